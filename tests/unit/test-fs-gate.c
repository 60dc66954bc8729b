/* fusebox — the gate that seats one FUSE worker at a time in the device's
 * read (fs/fs-fuse-gate.c), over a pipe: each byte written is a request,
 * and workers loop on fb_fuse_gate_read as libfuse's do. */
#include "fs/fs-fuse-private.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define WORKERS 4
#define REQUESTS 200
/* how long a test waits for what must happen before it calls it a hang */
#define HANG_S 20

typedef struct
{
  FbFuseGate *gate;
  int rfd, wfd;
  pthread_t threads[WORKERS];
  bool started[WORKERS];
  pthread_mutex_t lock;
  pthread_cond_t cond;
  unsigned answered;    /* lock */
  unsigned by[WORKERS]; /* lock: requests each worker answered */
  int slow_worker;      /* lock: who holds 'S', -1 */
  int fast_worker;      /* lock: who took 'F', -1 */
  bool release_slow;    /* lock */
} Bench;

typedef struct
{
  Bench *b;
  int index;
} Worker;

static Worker workers[WORKERS];

/* wait on b->cond until *flag (an int or bool read under the lock) says
 * so; false after HANG_S */
static bool
wait_until (Bench *b, bool (*done) (Bench *))
{
  struct timespec t;
  bool ok = true;

  clock_gettime (CLOCK_REALTIME, &t);
  t.tv_sec += HANG_S;
  pthread_mutex_lock (&b->lock);
  while (!done (b) && ok)
    ok = pthread_cond_timedwait (&b->cond, &b->lock, &t) == 0 || done (b);
  ok = done (b);
  pthread_mutex_unlock (&b->lock);
  return ok;
}

static bool
fast_taken (Bench *b)
{
  return b->fast_worker >= 0;
}

static bool
slow_taken (Bench *b)
{
  return b->slow_worker >= 0;
}

static void *
worker_main (void *data)
{
  Worker *w = data;
  Bench *b = w->b;
  char c;

  /* as libfuse's workers: cancellable only where the gate says */
  pthread_setcancelstate (PTHREAD_CANCEL_DISABLE, NULL);
  for (;;)
    {
      ssize_t n = fb_fuse_gate_read (b->gate, b->rfd, &c, 1);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      pthread_mutex_lock (&b->lock);
      if (c == 'S')
        {
          b->slow_worker = w->index;
          pthread_cond_broadcast (&b->cond);
          while (!b->release_slow)
            pthread_cond_wait (&b->cond, &b->lock);
        }
      else if (c == 'F')
        b->fast_worker = w->index;
      else if (c == 'C')
        {
          /* a request that keeps its worker on the CPU (a listing of a
           * huge directory) until the next one has been taken */
          b->slow_worker = w->index;
          pthread_cond_broadcast (&b->cond);
          while (b->fast_worker < 0 && !b->release_slow)
            {
              pthread_mutex_unlock (&b->lock);
              for (volatile unsigned i = 0; i < 100000; i++)
                ;
              pthread_mutex_lock (&b->lock);
            }
        }
      else if (c == 'D')
        {
          /* a request that waits for the disk */
          pthread_mutex_unlock (&b->lock);
          g_usleep (3 * 1000);
          pthread_mutex_lock (&b->lock);
        }
      b->by[w->index]++;
      b->answered++;
      pthread_cond_broadcast (&b->cond);
      pthread_mutex_unlock (&b->lock);
    }
  return NULL;
}

static Bench *
bench_new (unsigned spread, unsigned tick_ms)
{
  Bench *b = g_new0 (Bench, 1);
  int p[2];

  assert_int_equal (pipe2 (p, O_CLOEXEC), 0);
  b->rfd = p[0];
  b->wfd = p[1];
  pthread_mutex_init (&b->lock, NULL);
  pthread_cond_init (&b->cond, NULL);
  b->slow_worker = b->fast_worker = -1;
  assert_int_equal (fb_fuse_gate_new (b->rfd, spread, tick_ms, &b->gate), 0);
  for (int i = 0; i < WORKERS; i++)
    {
      workers[i] = (Worker){ b, i };
      assert_int_equal (pthread_create (&b->threads[i], NULL, worker_main, &workers[i]), 0);
      b->started[i] = true;
    }
  /* settled: one worker in read(2), the others waiting in the gate */
  for (int i = 0; i < HANG_S * 1000 && fb_fuse_gate_waiting (b->gate) < WORKERS - 1; i++)
    g_usleep (1000);
  assert_int_equal (fb_fuse_gate_waiting (b->gate), WORKERS - 1);
  return b;
}

static void
bench_free (Bench *b)
{
  pthread_mutex_lock (&b->lock);
  b->release_slow = true;
  pthread_cond_broadcast (&b->cond);
  pthread_mutex_unlock (&b->lock);
  /* the reader's read ends at the pipe's end, the waiting ones at the stop */
  close (b->wfd);
  fb_fuse_gate_stop (b->gate);
  for (int i = 0; i < WORKERS; i++)
    if (b->started[i])
      assert_int_equal (pthread_join (b->threads[i], NULL), 0);
  fb_fuse_gate_free (b->gate);
  close (b->rfd);
  g_free (b);
}

static void
send_request (Bench *b, const char *what)
{
  assert_int_equal (write (b->wfd, what, strlen (what)), (ssize_t)strlen (what));
}

static unsigned answered_target;

static bool
all_answered (Bench *b)
{
  return b->answered >= answered_target;
}

/* A walk (one request, its answer, the next) is served by one worker:
 * the others wait in the gate, not in read(2), where the pipe, as the
 * FUSE device, would hand each request to another one. */
static void
test_walk_stays_on_one_worker (void **state)
{
  Bench *b = bench_new (1, 5);
  unsigned most = 0;

  for (unsigned i = 1; i <= REQUESTS; i++)
    {
      send_request (b, "w");
      answered_target = i;
      assert_true (wait_until (b, all_answered));
    }
  for (int i = 0; i < WORKERS; i++)
    most = MAX (most, b->by[i]);
  /* a worker that comes back late (preempted for a whole tick) may lose
   * the seat now and then; half is far from the quarter each would get */
  assert_true (most > REQUESTS / 2);
  bench_free (b);
}

/* FIRST is sent, and once its worker holds it, THEN (if any): the 'F'
 * among them is taken by another worker while the first still holds its
 * request. */
static void
assert_served_beside (Bench *b, const char *first, const char *then)
{
  send_request (b, first);
  assert_true (wait_until (b, slow_taken));
  if (then != NULL)
    send_request (b, then);
  assert_true (wait_until (b, fast_taken));
  assert_int_not_equal (b->fast_worker, b->slow_worker);
}

/* A request that takes long does not hold up the next one, which no
 * worker was reading for when it came: the watchdog seats another. */
static void
test_slow_request_does_not_hold_the_next (void **state)
{
  Bench *b = bench_new (1, 5);

  assert_served_beside (b, "S", "F");
  bench_free (b);
}

/* Nor does one that keeps its worker busy on the CPU: a process in a
 * sandbox can ask for such requests, and the others' must not wait for
 * them. */
static volatile bool burn_stop;

/* more of the process's CPU time, as the daemon's other threads and a
 * loaded machine make it: the watchdog reads the whole process's */
static void *
burn (void *data)
{
  while (!burn_stop)
    ;
  return NULL;
}

static void
test_busy_request_does_not_hold_the_next (void **state)
{
  Bench *b = bench_new (1, 5);
  pthread_t burners[2];

  burn_stop = false;
  for (int i = 0; i < 2; i++)
    assert_int_equal (pthread_create (&burners[i], NULL, burn, NULL), 0);
  assert_served_beside (b, "C", "F");
  burn_stop = true;
  for (int i = 0; i < 2; i++)
    assert_int_equal (pthread_join (burners[i], NULL), 0);
  bench_free (b);
}

/* Requests that each wait (for the disk), queued together, are not
 * served one at a time: the watchdog adds workers while they stay queued,
 * though the one worker comes back to the seat between them. */
static void
test_slow_stream_gets_more_workers (void **state)
{
  Bench *b = bench_new (1, 5);
  unsigned workers_used = 0;

  send_request (b, "DDDDDDDDDDDDDDDDDDDDDDDDDDDDDD");
  answered_target = 30;
  assert_true (wait_until (b, all_answered));
  for (int i = 0; i < WORKERS; i++)
    workers_used += b->by[i] > 0;
  assert_true (workers_used > 1);
  bench_free (b);
}

/* Two requests queued at once: the worker that takes the first seats
 * another for the second (no watchdog here). */
static void
test_queued_request_seats_a_second_worker (void **state)
{
  Bench *b = bench_new (2, 0);

  assert_served_beside (b, "SF", NULL);
  bench_free (b);
}

/* libfuse cancels its workers at the end: a worker cancelled while it
 * waits leaves the waiting list, and one cancelled in read(2) leaves the
 * seat, so the rest still serve and still stop. */
static void
test_cancelled_workers_leave (void **state)
{
  Bench *b = bench_new (1, 0);

  /* let everyone settle: one reads, three wait */
  send_request (b, "w");
  answered_target = 1;
  assert_true (wait_until (b, all_answered));
  for (int i = 0; i < 2; i++)
    {
      assert_int_equal (pthread_cancel (b->threads[i]), 0);
      assert_int_equal (pthread_join (b->threads[i], NULL), 0);
      b->started[i] = false;
    }
  for (unsigned i = 2; i <= 20; i++)
    {
      send_request (b, "w");
      answered_target = i;
      assert_true (wait_until (b, all_answered));
    }
  bench_free (b);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_walk_stays_on_one_worker),
    cmocka_unit_test (test_slow_request_does_not_hold_the_next),
    cmocka_unit_test (test_busy_request_does_not_hold_the_next),
    cmocka_unit_test (test_slow_stream_gets_more_workers),
    cmocka_unit_test (test_queued_request_seats_a_second_worker),
    cmocka_unit_test (test_cancelled_workers_leave),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
