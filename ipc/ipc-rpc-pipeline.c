/* fusebox — the remote API's request pipeline: each connection's received
 * messages as an ordered queue of jobs, the worker pool that runs its
 * fs/... requests, and the hand-back of their answers to the loop thread.
 *
 * Each connection keeps the messages it received and has not answered yet
 * in order, as jobs (conn->jobs).  A worker of the server's pool decodes
 * them in order (the connection's sandbox reuse is the decoder's) and runs
 * the fs/... requests; everything else (initialize, the `initialized`
 * notification, process/..., log/..., policy/explain, environment/info,
 * errors) runs on the loop thread, in its turn: a worker stops at such a
 * job, and the loop thread runs it once every job before it has finished.
 * So a connection's requests take effect one at a time, in the order
 * received (a fs/readFile after a fs/writeFile of the same path reads what
 * was written; a process/start after a fs/writeFile sees the file), and
 * the loop thread never runs a request of a connection while a worker runs
 * another one of the same connection.
 *
 * A connection is on the pool at most once (`scheduled`), and the pool has
 * as many threads as CPUs, so a hundred clients don't make a hundred
 * threads.  A worker keeps a request's answer with its job
 * (fb_rpc_conn_capture_answer); the loop thread sends the answers of
 * finished jobs from the head of the queue only, so answers leave in the
 * order of the requests.  Only the answers of process/read with waitMs
 * come later: they wait for output.
 *
 * Bounds: FB_RPC_PENDING_MAX jobs or FB_RPC_PENDING_BYTES_MAX bytes
 * (received, and answered but not yet sent) per connection; past either,
 * the loop thread waits for the connection's worker (reading nothing more
 * meanwhile), as it waited for every request before the pipeline, and a
 * worker stops while the answers alone pass it.  A closing connection
 * (fb_rpc_conn_closed, ipc-rpc-conn.c) first runs what it received (it took
 * effect on receipt before, and a stdio client may send its requests and
 * close its input at once), then waits for its worker to stop, and only
 * then closes its fs/open handles and detaches
 * its session: a session is freed only once detached (the detach timeout,
 * server_free), so a worker never sees its connection's session go, and
 * the detach timeout starts as before, when the connection is gone.  The
 * last reference (the wake-up queue may hold one) frees the struct.
 *
 * Threads: the loop thread receives (fb_rpc_conn_receive*), runs the jobs
 * that are not fs/... requests and sends every answer (conn_pump, from
 * wake_dispatch); a worker (worker_run) decodes and runs fs/... jobs.  Lock
 * order: a connection's lock, then the server's ready_lock
 * (conn_wake_locked); neither is held while a request runs. */
#include "ipc/ipc-rpc-private.h"
#include "policy/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef enum
{
  JOB_QUEUED,
  JOB_RUNNING,
  JOB_DONE,
} JobState;

typedef struct
{
  char *frame; /* the message as received (the transport's buffer is gone by the time the job runs) */
  gsize frame_len;
  bool utf8_checked;
  bool decoded;     /* msg is valid (the worker decodes: the loop thread only copies) */
  FbRpcMessage msg; /* msg.sandbox_text points into frame */
  gsize bytes;      /* received, and then answered (conn->lock) */
  gsize msg_bytes;  /* received */
  bool on_worker;   /* once decoded: a fs/... request */
  JobState state;   /* conn->lock */
  GQueue answers;   /* char*, UTF-8: what the worker sent while it ran the job */
} Job;

/* The job the worker on this thread runs, and its connection. */
static __thread FbRpcConn *running_conn;
static __thread Job *running_job;

bool
fb_rpc_conn_capture_answer (FbRpcConn *conn, char *text)
{
  if (G_LIKELY (running_conn != conn))
    return false;
  g_queue_push_tail (&running_job->answers, text);
  return true;
}

static void
job_free (Job *job)
{
  fb_rpc_message_clear (&job->msg);
  g_free (job->frame);
  g_queue_clear_full (&job->answers, g_free);
  g_free (job);
}

static void
conn_clear (FbRpcConn *conn)
{
  /* Nothing runs for it any more: fb_rpc_conn_closed emptied the queue. */
  g_assert (g_queue_is_empty (&conn->jobs));
  g_mutex_clear (&conn->lock);
  g_cond_clear (&conn->cond);
}

FB_DEFINE_REF_UNREF (fb_rpc_conn, FbRpcConn, conn_clear)

static bool conn_decode (FbRpcConn *conn, const char *data, gsize len, bool utf8_checked, FbRpcMessage *msg);

static bool
is_worker_method (const FbRpcMessage *msg)
{
  /* The method table says which (ipc-rpc-dispatch.c). */
  return msg->kind == FB_RPC_MESSAGE_REQUEST && fb_rpc_method_on_worker (msg->method);
}

void
fb_rpc_conn_cond_wait_locked (FbRpcConn *conn)
{
  conn->cond_waiters++;
  g_cond_wait (&conn->cond, &conn->lock);
  conn->cond_waiters--;
}

/* Under conn->lock.  g_cond_broadcast makes a futex call even with nobody
 * waiting, which is nearly always: once per request otherwise. */
static void
conn_signal_locked (FbRpcConn *conn)
{
  if (conn->cond_waiters > 0)
    g_cond_broadcast (&conn->cond);
}

/* Tell the loop thread that CONN has finished jobs.  Under conn->lock. */
static void
conn_wake_locked (FbRpcConn *conn)
{
  FbRpcServer *server = conn->server;
  g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&server->ready_lock);

  if (conn->in_ready)
    return;
  conn->in_ready = true;
  g_queue_push_tail (&server->ready, fb_rpc_conn_ref (conn));
  /* Not g_source_set_ready_time: it takes the main context's lock, which
   * the loop thread takes and releases many times per iteration, and
   * writes the context's eventfd under it; the worker then often slept on
   * that lock.  Our own eventfd, written once until the loop thread reads
   * it (wake_dispatch). */
  if (g_atomic_int_compare_and_exchange (&server->wake_signaled, 0, 1))
    {
      guint64 one = 1;
      ssize_t n G_GNUC_UNUSED = write (server->wake_fd, &one, sizeof one);
    }
}

#ifndef WAKE_EVERY
#define WAKE_EVERY 4
#endif

/* A worker: CONN's fs/... jobs, in order, up to the first one for the loop
 * thread. */
static void
worker_run (gpointer data, gpointer user_data)
{
  FbRpcConn *conn = data;
  guint since_wake = 0;

  g_mutex_lock (&conn->lock);
  /* Answers waiting to be sent count against the connection's bound too:
   * past it, the worker stops, and the loop thread reschedules once it has
   * sent them. */
  while (!conn->stopping && conn->answer_bytes <= FB_RPC_PENDING_BYTES_MAX)
    {
      Job *job = NULL;
      for (GList *l = conn->jobs.head; l != NULL; l = l->next)
        {
          Job *j = l->data;
          if (j->state == JOB_QUEUED)
            {
              job = j;
              break;
            }
        }
      if (job == NULL || (job->decoded && !job->on_worker))
        break;
      job->state = JOB_RUNNING;
      g_mutex_unlock (&conn->lock);

      running_conn = conn;
      running_job = job;
      if (!job->decoded)
        {
          /* Decoded here, in order (conn->reuse is the decoder's), and off
           * the loop thread; a message that can't be decoded is answered
           * here too. */
          job->decoded = true;
          job->on_worker = conn_decode (conn, job->frame, job->frame_len, job->utf8_checked, &job->msg) &&
                           is_worker_method (&job->msg);
          if (job->msg.root != NULL && !job->on_worker)
            {
              /* The loop thread's, in its turn. */
              running_conn = NULL;
              running_job = NULL;
              g_mutex_lock (&conn->lock);
              job->state = JOB_QUEUED;
              break;
            }
        }
      if (job->on_worker)
        fb_rpc_conn_run_message (conn, &job->msg);
      /* Freed on the thread that decoded it: json-glib's nodes come from
       * GSlice, whose per-thread magazines made the loop thread's frees
       * of the worker's nodes (and its own allocations after them) a slow
       * path: g_slice_alloc was the loop thread's first function. */
      fb_rpc_message_clear (&job->msg);
      running_conn = NULL;
      running_job = NULL;

      g_mutex_lock (&conn->lock);
      job->state = JOB_DONE;
      for (GList *l = job->answers.head; l != NULL; l = l->next)
        job->bytes += strlen (l->data);
      conn->job_bytes += job->bytes - job->msg_bytes;
      conn->answer_bytes += job->bytes - job->msg_bytes;
      /* The loop thread hears of finished jobs every WAKE_EVERY jobs, and
       * when this run stops (below): each wake costs it a main-loop
       * iteration (poll, the eventfd, a send, the access log's writer),
       * and answers sent in bigger batches wake the client less often. */
      if (++since_wake >= WAKE_EVERY)
        {
          conn_wake_locked (conn);
          since_wake = 0;
        }
      conn_signal_locked (conn);
    }
  conn->scheduled = false;
  /* The loop thread may be waiting for this, or have a job of its own to
   * run next. */
  conn_wake_locked (conn);
  conn_signal_locked (conn);
  g_mutex_unlock (&conn->lock);
  fb_rpc_conn_unref (conn);
}

/* Loop thread: send what finished, run the loop thread's job at the head,
 * hand fs/... jobs to the pool. */
static void
conn_pump (FbRpcConn *conn)
{
  g_mutex_lock (&conn->lock);
  for (;;)
    {
      Job *job = g_queue_peek_head (&conn->jobs);
      if (job == NULL)
        break;
      if (job->state == JOB_DONE)
        {
          char *text;
          g_queue_pop_head (&conn->jobs);
          conn->job_bytes -= job->bytes;
          conn->answer_bytes -= job->bytes - job->msg_bytes;
          g_mutex_unlock (&conn->lock);
          /* The job's access records were queued before it was done: write
           * them before its answers leave, so that a client never holds an
           * answer whose record a SIGKILL of the server could still lose
           * (docs/design.md, promise 3).  Nothing queued costs two
           * uncontended locks. */
          if (conn->server->log != NULL)
            fb_access_log_drain (conn->server->log, NULL);
          while ((text = g_queue_pop_head (&job->answers)) != NULL)
            fb_rpc_conn_send_utf8 (conn, text);
          job_free (job);
          g_mutex_lock (&conn->lock);
          continue;
        }
      if (job->state == JOB_RUNNING || conn->scheduled)
        break; /* the worker tells when it is done */
      if (job->on_worker || !job->decoded)
        {
          if (conn->server->pool != NULL)
            {
              conn->scheduled = true;
              g_thread_pool_push (conn->server->pool, fb_rpc_conn_ref (conn), NULL);
              break;
            }
          /* No workers: run it here, as below. */
        }
      job->state = JOB_RUNNING;
      g_mutex_unlock (&conn->lock);
      fb_rpc_conn_run_message (conn, &job->msg);
      g_mutex_lock (&conn->lock);
      job->state = JOB_DONE;
    }
  g_mutex_unlock (&conn->lock);
}

/* Loop thread: until CONN holds fewer than MAX_JOBS jobs and at most
 * MAX_BYTES bytes, run its jobs and wait for its worker. */
static void
conn_wait_below (FbRpcConn *conn, guint max_jobs, gsize max_bytes)
{
  for (;;)
    {
      conn_pump (conn);
      g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&conn->lock);
      if (conn->jobs.length < max_jobs && conn->job_bytes <= max_bytes)
        return;
      /* After conn_pump, what is left waits for the worker, whose every
       * step signals. */
      if (conn->scheduled)
        fb_rpc_conn_cond_wait_locked (conn);
    }
}

void
fb_rpc_conn_wait_idle (FbRpcConn *conn)
{
  conn_wait_below (conn, 1, 0);
}

/* The wake source: pump every connection a worker has finished jobs for. */
typedef struct
{
  GSource source;
  FbRpcServer *server;
  gpointer tag; /* server->wake_fd */
} WakeSource;

static gboolean
wake_dispatch (GSource *source, GSourceFunc callback, gpointer user_data)
{
  FbRpcServer *server = ((WakeSource *)source)->server;
  GQueue ready = G_QUEUE_INIT;
  FbRpcConn *conn;

  {
    /* Read, then clear the flag, then take the queue: a worker that
     * queued after the read either sees the flag still set (and its
     * connection is in what we take) or writes again. */
    guint64 n;
    ssize_t r G_GNUC_UNUSED = read (server->wake_fd, &n, sizeof n);
    g_atomic_int_set (&server->wake_signaled, 0);
  }
  {
    g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&server->ready_lock);
    ready = server->ready;
    g_queue_init (&server->ready);
    for (GList *l = ready.head; l != NULL; l = l->next)
      ((FbRpcConn *)l->data)->in_ready = false;
  }
  while ((conn = g_queue_pop_head (&ready)) != NULL)
    {
      if (!conn->gone)
        conn_pump (conn);
      fb_rpc_conn_unref (conn);
    }
  return G_SOURCE_CONTINUE;
}

static gboolean
wake_check (GSource *source)
{
  return g_source_query_unix_fd (source, ((WakeSource *)source)->tag) != 0;
}

static GSourceFuncs wake_funcs = { .check = wake_check, .dispatch = wake_dispatch };

/* Queue the message DATA (copied), or an answer ready as it is (TEXT,
 * taken), in its turn; LEN is what was received. */
static void
conn_enqueue (FbRpcConn *conn, const char *data, bool utf8_checked, char *text, gsize len)
{
  Job *job = g_new0 (Job, 1);

  g_queue_init (&job->answers);
  job->bytes = job->msg_bytes = len;
  if (data != NULL)
    {
      job->frame = g_memdup2 (data, len);
      job->frame_len = len;
      job->utf8_checked = utf8_checked;
      job->state = JOB_QUEUED;
    }
  else
    {
      g_queue_push_tail (&job->answers, text);
      job->decoded = true;
      job->state = JOB_DONE;
    }
  {
    g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&conn->lock);
    g_queue_push_tail (&conn->jobs, job);
    conn->job_bytes += len;
  }
  conn_wait_below (conn, FB_RPC_PENDING_MAX, FB_RPC_PENDING_BYTES_MAX);
}

static bool
conn_idle (FbRpcConn *conn)
{
  g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&conn->lock);
  return g_queue_is_empty (&conn->jobs);
}

static void conn_receive (FbRpcConn *conn, const char *data, gsize len, bool utf8_checked);

void
fb_rpc_conn_receive (FbRpcConn *conn, const char *data, gsize len)
{
  conn_receive (conn, data, len, false);
}

void
fb_rpc_conn_receive_utf8 (FbRpcConn *conn, const char *data, gsize len)
{
  conn_receive (conn, data, len, true);
}

/* An answer that needs no method: at once when nothing waits before it. */
static void
conn_answer_now (FbRpcConn *conn, char *text, gsize len)
{
  if (conn_idle (conn))
    fb_rpc_conn_send (conn, text);
  else
    {
      if (!g_utf8_validate (text, -1, NULL))
        {
          char *valid = g_utf8_make_valid (text, -1);
          g_free (text);
          text = valid;
        }
      conn_enqueue (conn, NULL, false, text, len);
    }
}

/* Decode DATA into *MSG (true), or answer why it can't be (false). */
static bool
conn_decode (FbRpcConn *conn, const char *data, gsize len, bool utf8_checked, FbRpcMessage *msg)
{
  int code;
  g_autofree char *why = NULL;
  g_autoptr (JsonNode) id = NULL;

  if (!fb_rpc_message_parse_reuse (data, len, utf8_checked, &conn->reuse, msg, &code, &why, &id))
    {
      fb_rpc_conn_send (conn, fb_rpc_encode_error (id, code, why, NULL));
      return false;
    }
  return true;
}

static void
conn_receive (FbRpcConn *conn, const char *data, gsize len, bool utf8_checked)
{
  FbRpcMessage msg;

  if (conn->closing)
    return;
  if (conn->server->pool != NULL)
    {
      /* Decoded by the worker; the loop thread only frames and sends. */
      conn_enqueue (conn, data, utf8_checked, NULL, len);
      return;
    }
  if (conn_decode (conn, data, len, utf8_checked, &msg))
    {
      fb_rpc_conn_run_message (conn, &msg);
      fb_rpc_message_clear (&msg);
    }
}

void
fb_rpc_conn_receive_oversized (FbRpcConn *conn, guint64 len)
{
  g_autofree char *why =
    g_strdup_printf ("message of %" G_GUINT64_FORMAT " bytes is over the limit of %d bytes", len, FB_RPC_MESSAGE_MAX);
  if (conn->closing)
    return;
  conn_answer_now (conn, fb_rpc_encode_error (NULL, FB_RPC_ERROR_INVALID_REQUEST, why, NULL), 0);
}

/* --- the server's part ------------------------------------------------------ */

void
fb_rpc_server_pipeline_init (FbRpcServer *server)
{
  g_mutex_init (&server->ready_lock);
  g_queue_init (&server->ready);
  server->wake_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (server->wake_fd < 0)
    g_error ("eventfd: %s", g_strerror (errno));
  server->wake = g_source_new (&wake_funcs, sizeof (WakeSource));
  ((WakeSource *)server->wake)->server = server;
  ((WakeSource *)server->wake)->tag = g_source_add_unix_fd (server->wake, server->wake_fd, G_IO_IN);
  /* GLib blocks a source while it dispatches by taking its fds out of the
   * poll set and putting them back, and each of the two signals the
   * context's wake-up eventfd (a write now, a read and an extra main-loop
   * iteration later).  Nothing here runs a nested main loop, so the
   * dispatch needs no blocking. */
  g_source_set_can_recurse (server->wake, TRUE);
  g_source_set_priority (server->wake, G_PRIORITY_DEFAULT);
  g_source_set_name (server->wake, "fusebox rpc: answers from the workers");
  g_source_attach (server->wake, server->context);
  {
    /* One worker per CPU, shared by every connection; FUSEBOX_RPC_WORKERS=0
     * runs every request on the loop thread (the server before the
     * pipeline, for comparisons). */
    const char *env = g_getenv ("FUSEBOX_RPC_WORKERS");
    int n = env != NULL ? atoi (env) : (int)g_get_num_processors ();
    if (n > 0)
      server->pool = g_thread_pool_new (worker_run, server, CLAMP (n, 1, 16), FALSE, NULL);
  }
}

void
fb_rpc_server_pipeline_clear (FbRpcServer *server)
{
  if (server->pool != NULL)
    g_thread_pool_free (server->pool, FALSE, TRUE);
  {
    FbRpcConn *conn;
    while ((conn = g_queue_pop_head (&server->ready)) != NULL)
      fb_rpc_conn_unref (conn);
  }
  fb_source_clear (&server->wake);
  close (server->wake_fd);
  g_mutex_clear (&server->ready_lock);
}
