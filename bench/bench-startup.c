/* fusebox — startup of a sandbox: `fusebox run -- true` against bubblewrap
 * (issue 4: within 1.5x of `bwrap --unshare-all --die-with-parent --ro-bind
 * / / --dev /dev --proc /proc true`, median of 20).
 *
 *   bench-startup [-n RUNS] [--fusebox PATH] [--bwrap PATH]
 *
 * The two commands run alternately (A B A B ...), so a load change on a
 * shared machine hits both alike; three warm-up rounds are not counted.
 * Each run is timed from just before fork to the reaped exit
 * (CLOCK_MONOTONIC): what a caller waiting for the command sees.  The output
 * is the median, min and 90th percentile of each, and the ratio of the
 * medians.  `fusebox run` works in a fresh workspace and a fresh
 * XDG_STATE_HOME (both under $TMPDIR or /var/tmp, removed at the end), with
 * the built-in default policy.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Run ARGV in DIR with ENVP, output to /dev/null; returns the wall time in
 * ms, or a negative value when it failed. */
static double
time_one (char **argv, char **envp, const char *dir)
{
  double start = now_ms ();
  pid_t pid = fork ();
  if (pid < 0)
    return -1;
  if (pid == 0)
    {
      int null = open ("/dev/null", O_RDWR);
      if (null >= 0)
        {
          dup2 (null, 1);
          dup2 (null, 2);
        }
      if (chdir (dir) < 0)
        _exit (126);
      execve (argv[0], argv, envp);
      _exit (127);
    }
  int status;
  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      return -1;
  double t = now_ms () - start;
  return WIFEXITED (status) && WEXITSTATUS (status) == 0 ? t : -1;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double
percentile (double *v, int n, double p)
{
  int i = (int)(p * (n - 1) + 0.5);
  return v[i];
}

int
main (int argc, char **argv)
{
  int runs = 20;
  const char *fusebox = "fusebox";
  const char *bwrap = "/usr/bin/bwrap";

  for (int i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "-n") == 0 && i + 1 < argc)
        runs = atoi (argv[++i]);
      else if (strcmp (argv[i], "--fusebox") == 0 && i + 1 < argc)
        fusebox = argv[++i];
      else if (strcmp (argv[i], "--bwrap") == 0 && i + 1 < argc)
        bwrap = argv[++i];
      else
        {
          fprintf (stderr, "usage: bench-startup [-n RUNS] [--fusebox PATH] [--bwrap PATH]\n");
          return 2;
        }
    }
  if (runs < 1 || access (fusebox, X_OK) < 0 || access (bwrap, X_OK) < 0)
    {
      fprintf (stderr,
               "bench-startup: need RUNS >= 1, an executable fusebox (%s) and bwrap (%s; apt-get install "
               "bubblewrap)\n",
               fusebox, bwrap);
      return 2;
    }

  const char *base = g_getenv ("TMPDIR") ? g_getenv ("TMPDIR") : "/var/tmp";
  g_autofree char *tmp = g_build_filename (base, "fusebox-bench-XXXXXX", NULL);
  if (!g_mkdtemp (tmp))
    {
      fprintf (stderr, "bench-startup: mkdtemp in %s: %s\n", base, g_strerror (errno));
      return 1;
    }
  g_autofree char *ws = g_build_filename (tmp, "ws", NULL);
  g_autofree char *state = g_build_filename (tmp, "state", NULL);
  g_mkdir (ws, 0755);
  char **envp = g_get_environ ();
  envp = g_environ_setenv (envp, "XDG_STATE_HOME", state, TRUE);

  const char *a_argv[] = { fusebox, "run", "--", "/bin/true", NULL };
  const char *b_argv[] = { bwrap,    "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
                           "--proc", "/proc",         "/bin/true",         NULL };
  double *a = g_new (double, runs), *b = g_new (double, runs);
  int failed = 0;

  for (int i = -3; i < runs; i++)
    {
      double ta = time_one ((char **)a_argv, envp, ws);
      double tb = time_one ((char **)b_argv, envp, ws);
      if (ta < 0 || tb < 0)
        {
          fprintf (stderr, "bench-startup: %s failed; run it by hand to see why\n", ta < 0 ? "fusebox run" : "bwrap");
          failed = 1;
          break;
        }
      if (i >= 0)
        {
          a[i] = ta;
          b[i] = tb;
        }
    }

  g_autofree char *rm = g_strdup_printf ("rm -rf '%s'", tmp);
  if (system (rm) != 0)
    fprintf (stderr, "bench-startup: could not remove %s\n", tmp);
  if (failed)
    return 1;

  qsort (a, runs, sizeof *a, cmp_double);
  qsort (b, runs, sizeof *b, cmp_double);
  double ma = percentile (a, runs, 0.5), mb = percentile (b, runs, 0.5);
  printf ("%d runs each, interleaved (wall clock, fork to reaped exit)\n", runs);
  printf ("  %-44s median %7.2f ms  min %7.2f  p90 %7.2f\n", "fusebox run -- true", ma, a[0],
          percentile (a, runs, 0.9));
  printf ("  %-44s median %7.2f ms  min %7.2f  p90 %7.2f\n", "bwrap --unshare-all ... true", mb, b[0],
          percentile (b, runs, 0.9));
  printf ("  ratio of medians: %.2f (target <= 1.50)\n", ma / mb);
  g_free (a);
  g_free (b);
  g_strfreev (envp);
  return 0;
}
