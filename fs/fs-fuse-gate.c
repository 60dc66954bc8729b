/* fusebox — which FUSE worker reads the next request.
 *
 * Without the gate, every idle libfuse worker waits in read(2) on the
 * device, and the kernel hands each request to the worker that has waited
 * longest.  A walk sends one request at a time, and the worker that
 * answered is still on its way back when the next one comes, so the walk
 * goes from thread to thread, each hand-off a wake-up of another thread on
 * another CPU with cold caches.
 *
 * The gate seats one worker at a time in the kernel's read (the reader); the
 * other idle workers wait here, the last to arrive first.  A reader that
 * takes a request wakes a waiting worker to read only when another request
 * is already queued (a poll), so a walk is served by one thread and
 * parallel callers still get up to max_threads workers.
 *
 * While the reader's seat is empty (every worker busy), a request waits for
 * the first worker to finish.  One request that takes long (a slow host
 * filesystem) would then hold up every other, and requests that each wait
 * for the disk would be served one at a time, so a watchdog thread looks
 * every tick while the view is active: when at two ticks in a row a
 * request was queued with no worker reading, and either no busy worker
 * finished a request for a whole tick (each holds one that takes long: a
 * slow filesystem, or a listing that costs a lot of CPU, which a process in
 * a sandbox can ask for) or the busy workers used less than half their CPU
 * meanwhile (they wait for a disk), it wakes a waiting worker.  So a
 * stalled view gets a reader within two ticks, one caller's expensive
 * requests don't make the others wait for them, and requests that wait
 * for the disk get one more worker every two ticks, up to libfuse's
 * max_threads.  A walk of cheap requests, which keeps its worker on the
 * CPU, gets no more than the spread: more would only take the CPU from
 * it and from the callers.  While workers are busy with nothing queued the
 * watchdog waits in poll(2) for the next request instead of ticking, and
 * it sleeps while no request comes.
 *
 * Cancellation: libfuse ends its workers with pthread_cancel().  A worker is
 * cancellable only in read(2) and in its wait here (sem_wait), and a
 * cleanup handler leaves the seat or the waiting list.
 *
 * Lock: FbFuseGate.lock guards every field; the semaphores are posted and
 * waited without it. */
#include "fs/fs-fuse-private.h"

#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/eventfd.h>
#include <time.h>

typedef struct Waiter
{
  sem_t sem;
  struct Waiter *prev, *next;
  bool queued; /* lock: on the waiting list */
} Waiter;

struct FbFuseGate
{
  pthread_mutex_t lock;
  int fd;           /* the device, for the watchdog's look at the queue */
  int stop_fd;      /* an eventfd: the gate stops (the watchdog may be in poll) */
  unsigned tick_ms; /* 0: no watchdog */
  bool reader;      /* a worker waits in read(2) */
  guint64 seated;   /* times a worker took the seat */
  unsigned busy;    /* workers that took a request and have not come back */
  guint64 returned; /* times a worker came back with its request done */
  unsigned spread;  /* the busy workers up to which a queued request wakes one more */
  Waiter *top;      /* the waiting workers, the last one first */
  bool stopping;
  pthread_t watch;
  bool watching;     /* the watchdog thread runs */
  bool watch_asleep; /* it waits for the next request */
  pthread_cond_t watch_cond;
};

/* the gate whose request this worker holds (its next read gives it back) */
static __thread FbFuseGate *held;

static bool
queued_request (int fd)
{
  struct pollfd p = { .fd = fd, .events = POLLIN };

  return poll (&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

static void
push (FbFuseGate *g, Waiter *w)
{
  w->prev = NULL;
  w->next = g->top;
  if (g->top != NULL)
    g->top->prev = w;
  g->top = w;
  w->queued = true;
}

static void
unlink_waiter (FbFuseGate *g, Waiter *w)
{
  if (w->prev != NULL)
    w->prev->next = w->next;
  else
    g->top = w->next;
  if (w->next != NULL)
    w->next->prev = w->prev;
  w->queued = false;
}

static void
wake_top (FbFuseGate *g)
{
  Waiter *w = g->top;

  if (w == NULL)
    return;
  unlink_waiter (g, w);
  sem_post (&w->sem);
}

static void
wait_cancelled (void *data)
{
  void **a = data;
  FbFuseGate *g = a[0];
  Waiter *w = a[1];

  pthread_mutex_lock (&g->lock);
  if (w->queued)
    unlink_waiter (g, w);
  else if (!g->reader)
    wake_top (g); /* it was given the seat: pass that on */
  pthread_mutex_unlock (&g->lock);
}

static void
read_cancelled (void *data)
{
  FbFuseGate *g = data;

  pthread_mutex_lock (&g->lock);
  g->reader = false;
  wake_top (g);
  pthread_mutex_unlock (&g->lock);
}

/* Called with the lock; returns with it.  -EINTR when a signal ended the
 * wait (fb_fuse_abort wakes the workers so). */
static int
wait_turn (FbFuseGate *g)
{
  Waiter w;
  void *args[2] = { g, &w };
  volatile int r = 0; /* across the cleanup handler's setjmp */

  sem_init (&w.sem, 0, 0);
  push (g, &w);
  pthread_mutex_unlock (&g->lock);
  pthread_cleanup_push (wait_cancelled, args);
  pthread_setcancelstate (PTHREAD_CANCEL_ENABLE, NULL);
  if (sem_wait (&w.sem) < 0)
    r = -errno;
  pthread_setcancelstate (PTHREAD_CANCEL_DISABLE, NULL);
  pthread_cleanup_pop (0);
  pthread_mutex_lock (&g->lock);
  if (w.queued)
    unlink_waiter (g, &w);
  sem_destroy (&w.sem);
  return r;
}

ssize_t
fb_fuse_gate_read (FbFuseGate *g, int fd, void *buf, size_t len)
{
  ssize_t n;
  int err;

  pthread_mutex_lock (&g->lock);
  if (held == g)
    {
      g->busy--;
      g->returned++;
      held = NULL;
    }
  while (g->reader && !g->stopping)
    {
      int r = wait_turn (g);
      if (r < 0)
        {
          pthread_mutex_unlock (&g->lock);
          errno = -r;
          return -1;
        }
    }
  if (g->stopping)
    {
      pthread_mutex_unlock (&g->lock);
      errno = ENODEV;
      return -1;
    }
  g->reader = true;
  g->seated++;
  pthread_mutex_unlock (&g->lock);

  pthread_cleanup_push (read_cancelled, g);
  pthread_setcancelstate (PTHREAD_CANCEL_ENABLE, NULL);
  n = read (fd, buf, len);
  err = errno;
  pthread_setcancelstate (PTHREAD_CANCEL_DISABLE, NULL);
  pthread_cleanup_pop (0);

  pthread_mutex_lock (&g->lock);
  g->reader = false;
  if (n > 0)
    {
      g->busy++;
      held = g;
      /* another request already waits, and a CPU is left for a second
       * worker: it reads for it */
      if (g->top != NULL && g->busy < g->spread && queued_request (fd))
        wake_top (g);
      if (g->watch_asleep)
        pthread_cond_signal (&g->watch_cond);
    }
  else
    wake_top (g); /* an error or the end: let another worker look too */
  pthread_mutex_unlock (&g->lock);
  errno = err;
  return n;
}

/* Called with the lock: one tick, or less if the gate stops. */
static void
watch_tick (FbFuseGate *g)
{
  struct timespec t;

  clock_gettime (CLOCK_MONOTONIC, &t);
  t.tv_nsec += (long)g->tick_ms * 1000000L;
  t.tv_sec += t.tv_nsec / 1000000000L;
  t.tv_nsec %= 1000000000L;
  pthread_cond_timedwait (&g->watch_cond, &g->lock, &t);
}

/* Called with the lock, a worker busy for a while and nothing queued (a
 * slow host filesystem): returns, with the lock, once a request comes, the
 * gate stops, or a second has passed, rather than after every tick. */
static void
watch_poll (FbFuseGate *g)
{
  struct pollfd p[2] = { { .fd = g->fd, .events = POLLIN }, { .fd = g->stop_fd, .events = POLLIN } };
  int n;

  pthread_mutex_unlock (&g->lock);
  n = poll (p, 2, 1000);
  pthread_mutex_lock (&g->lock);
  /* the connection's end reads as ready at once: tick instead of spinning */
  if (n > 0 && (p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0)
    watch_tick (g);
}

/* the daemon's CPU time, in microseconds */
static gint64
cpu_now (void)
{
  struct timespec t;

  if (clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &t) < 0)
    return 0;
  return (gint64)t.tv_sec * G_USEC_PER_SEC + t.tv_nsec / 1000;
}

static void *
watch_main (void *data)
{
  FbFuseGate *g = data;
  guint64 seen, returned = 0;
  bool behind = false; /* at the last tick, a request waited with no reader */
  gint64 cpu = 0, wall = 0;

  pthread_mutex_lock (&g->lock);
  seen = g->seated;
  while (!g->stopping)
    {
      bool stalled = !g->reader && g->busy > 0;
      bool waiting = stalled && queued_request (g->fd);
      gint64 cpu_was = cpu, wall_was = wall;
      /* no busy worker finished a request since the last tick: each holds
       * one that takes long (a slow filesystem, a costly listing) */
      bool held_long = g->returned == returned;
      /* or they finish, but used less than half their CPU meanwhile: they
       * wait for something (a disk) more than they work */
      bool off_cpu;

      cpu = cpu_now ();
      wall = g_get_monotonic_time ();
      returned = g->returned;
      off_cpu = (cpu - cpu_was) * 2 < (wall - wall_was) * (gint64)g->busy;
      if (waiting && behind && g->top != NULL && (held_long || off_cpu))
        {
          wake_top (g);
          waiting = false;
        }
      behind = waiting;
      if (stalled && !waiting && g->seated == seen)
        watch_poll (g);
      else if (stalled || g->seated != seen)
        {
          seen = g->seated;
          watch_tick (g);
        }
      else
        {
          g->watch_asleep = true;
          pthread_cond_wait (&g->watch_cond, &g->lock);
          g->watch_asleep = false;
          seen = g->seated;
          behind = false;
        }
    }
  pthread_mutex_unlock (&g->lock);
  return NULL;
}

int
fb_fuse_gate_new (int fd, unsigned spread, unsigned tick_ms, FbFuseGate **ret_gate)
{
  FbFuseGate *g = g_new0 (FbFuseGate, 1);
  pthread_condattr_t attr;
  int r;

  pthread_mutex_init (&g->lock, NULL);
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&g->watch_cond, &attr);
  pthread_condattr_destroy (&attr);
  g->fd = fd;
  g->stop_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (g->stop_fd < 0)
    {
      r = -errno;
      pthread_cond_destroy (&g->watch_cond);
      pthread_mutex_destroy (&g->lock);
      g_free (g);
      return r;
    }
  g->tick_ms = tick_ms;
  g->spread = spread;
  if (tick_ms > 0)
    {
      r = pthread_create (&g->watch, NULL, watch_main, g);
      if (r != 0)
        {
          fb_fuse_gate_free (g);
          return -r;
        }
      g->watching = true;
    }
  *ret_gate = g;
  return 0;
}

/* How many workers wait in the gate (for tests). */
unsigned
fb_fuse_gate_waiting (FbFuseGate *g)
{
  unsigned n = 0;

  pthread_mutex_lock (&g->lock);
  for (Waiter *w = g->top; w != NULL; w = w->next)
    n++;
  pthread_mutex_unlock (&g->lock);
  return n;
}

/* Every waiting worker's read fails with ENODEV, now and from now on, and
 * the watchdog ends. */
void
fb_fuse_gate_stop (FbFuseGate *g)
{
  pthread_mutex_lock (&g->lock);
  g->stopping = true;
  while (g->top != NULL)
    wake_top (g);
  pthread_cond_signal (&g->watch_cond);
  (void)eventfd_write (g->stop_fd, 1);
  pthread_mutex_unlock (&g->lock);
  if (g->watching)
    pthread_join (g->watch, NULL);
  g->watching = false;
}

/* After the workers are gone. */
void
fb_fuse_gate_free (FbFuseGate *g)
{
  if (g == NULL)
    return;
  fb_fuse_gate_stop (g);
  close (g->stop_fd);
  pthread_cond_destroy (&g->watch_cond);
  pthread_mutex_destroy (&g->lock);
  g_free (g);
}
