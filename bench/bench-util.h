/* fusebox — what every micro-benchmark measures the same way (header only):
 * a clock in nanoseconds and the quantiles of a set of samples. */
#pragma once

#include <stdlib.h>
#include <time.h>

#include <glib.h>

/* CLOCK now, in nanoseconds. */
static G_GNUC_UNUSED double
bench_now_ns (clockid_t clock)
{
  struct timespec ts;

  clock_gettime (clock, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static G_GNUC_UNUSED int
bench_cmp_double (const void *a, const void *b)
{
  double x = *(const double *)a;
  double y = *(const double *)b;

  return x < y ? -1 : x > y ? 1 : 0;
}

/* Sort the N SAMPLES; their Q-quantile (0.5: the median, 0.9: p90) is
 * then SAMPLES[(size_t)(N * Q)]. */
static G_GNUC_UNUSED void
bench_sort (double *samples, size_t n)
{
  qsort (samples, n, sizeof *samples, bench_cmp_double);
}
