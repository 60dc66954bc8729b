/* fusebox — serving a view's FUSE session, and ending it.
 *
 * `run`, `mount` and each process of `serve` serve their view on threads
 * of their own (fb_fuse_start) and end it the same way, here.  The serving
 * thread's end reaches the loop as ON_END, from an idle source.  A stop
 * (fb_run_fuse_end) gives the connection a grace period to end by itself
 * (the RELEASE of files closed just now, a detached mount's last open
 * file, the sandbox's mount namespace going away), then aborts it, and
 * again every FB_RUN_FUSE_RETRY_MS until serving has ended: an abort wakes
 * the workers, and a wake can race with a worker about to block
 * (fb_fuse_abort()).  A second stop aborts at once.  Waiting for the end
 * (fb_run_fuse_finish) drains the access log meanwhile: a worker may be
 * blocked pushing to its queue, which only the loop's thread empties.
 *
 * Threads: the loop's, but for the serving thread's done callback, which
 * writes RESULT, then OVER (atomic), then attaches the idle source; the
 * loop reads RESULT only after it has seen OVER. */
#include "ipc/ipc-private.h"
#include "policy/util.h"

struct FbRunFuse
{
  FbFuse *fuse;
  FbAccessLog *log; /* borrowed, may be NULL: drained while waiting */
  FbRunFuseEndFunc on_end;
  gpointer on_end_data;
  GSource *end_source; /* ON_END's idle, attached by the serving thread */
  bool started;
  bool ending;    /* a stop was asked */
  bool joined;    /* the serving thread is gone */
  guint abort_id; /* the grace's timeout, then the retries' */
  int result;     /* fb_fuse_run's, written before OVER */
  gint over;      /* atomic */
};

FbRunFuse *
fb_run_fuse_new (FbFuse *fuse, FbAccessLog *log)
{
  FbRunFuse *rf = g_new0 (FbRunFuse, 1);

  rf->fuse = fuse;
  rf->log = log;
  return rf;
}

FbFuse *
fb_run_fuse_get_fuse (FbRunFuse *rf)
{
  return rf->fuse;
}

static gboolean
end_idle (gpointer data)
{
  FbRunFuse *rf = data;

  if (rf->on_end != NULL)
    rf->on_end (rf->result, rf->on_end_data);
  return G_SOURCE_REMOVE;
}

/* On the serving thread. */
static void
serving_done (int result, gpointer data)
{
  FbRunFuse *rf = data;

  rf->result = result;
  g_atomic_int_set (&rf->over, 1);
  g_source_attach (rf->end_source, NULL);
}

int
fb_run_fuse_start (FbRunFuse *rf, FbRunFuseEndFunc on_end, gpointer user_data)
{
  int r;

  rf->on_end = on_end;
  rf->on_end_data = user_data;
  rf->end_source = g_idle_source_new ();
  g_source_set_callback (rf->end_source, end_idle, rf, NULL);
  r = fb_fuse_start (rf->fuse, serving_done, rf);
  if (r == 0)
    rf->started = true;
  return r;
}

gboolean
fb_run_fuse_is_over (FbRunFuse *rf)
{
  return g_atomic_int_get (&rf->over);
}

gboolean
fb_run_fuse_is_ending (FbRunFuse *rf)
{
  return rf->ending;
}

static gboolean
abort_tick (gpointer data)
{
  FbRunFuse *rf = data;

  rf->abort_id = 0; /* this source ends here; a new one retries */
  if (g_atomic_int_get (&rf->over))
    return G_SOURCE_REMOVE;
  fb_fuse_abort (rf->fuse);
  rf->abort_id = g_timeout_add (FB_RUN_FUSE_RETRY_MS, abort_tick, rf);
  return G_SOURCE_REMOVE;
}

void
fb_run_fuse_end (FbRunFuse *rf, guint grace_ms)
{
  /* a kept view's refresher pins its mount, whose end is what ends the
   * connection within the grace */
  fb_fuse_warm_stop (rf->fuse);
  if (!rf->started || g_atomic_int_get (&rf->over))
    return;
  if (rf->ending)
    {
      /* a second request to end: don't wait for the grace */
      fb_fuse_abort (rf->fuse);
      return;
    }
  rf->ending = true;
  if (grace_ms == 0)
    abort_tick (rf);
  else
    rf->abort_id = g_timeout_add (grace_ms, abort_tick, rf);
}

int
fb_run_fuse_finish (FbRunFuse *rf)
{
  gint64 next_abort;

  if (!rf->started || rf->joined)
    return rf->result;
  if (!g_atomic_int_get (&rf->over))
    {
      /* Not over by itself: end it now, and keep at it while waiting (the
       * loop, and so the retries' timeout, does not run meanwhile). */
      rf->ending = true;
      fb_fuse_abort (rf->fuse);
      next_abort = g_get_monotonic_time () + FB_RUN_FUSE_RETRY_MS * 1000;
      while (!g_atomic_int_get (&rf->over))
        {
          if (rf->log != NULL)
            fb_access_log_drain (rf->log, NULL);
          g_usleep (1000);
          if (g_get_monotonic_time () >= next_abort)
            {
              fb_fuse_abort (rf->fuse);
              next_abort = g_get_monotonic_time () + FB_RUN_FUSE_RETRY_MS * 1000;
            }
        }
    }
  g_clear_handle_id (&rf->abort_id, g_source_remove);
  fb_fuse_join (rf->fuse);
  rf->joined = true;
  return rf->result;
}

void
fb_run_fuse_free (FbRunFuse *rf)
{
  if (rf == NULL)
    return;
  fb_run_fuse_finish (rf);
  fb_source_clear (&rf->end_source); /* ON_END has run, or never will */
  fb_fuse_free (rf->fuse);
  g_free (rf);
}
