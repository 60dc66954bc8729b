/* fusebox — the remote API's process/... methods.
 *
 * process/start makes a new sandbox for each process, with namespaces, a
 * pid 1, a lock-down and an exit status of its own, under the server's
 * policy narrowed by the call's `sandbox` (ipc-rpc-sandbox.c), in the view
 * its session's processes under that same policy share (ipc-rpc-view.c):
 * the first waits for the view to be made.  The server never forks a
 * sandbox itself (it runs threads): it spawns the small single-threaded
 * helper `fusebox-launch` (launcher/launcher-launch.c) with a SOCK_SEQPACKET
 * status socket, which calls fb_launcher_spawn() to join the view, hands
 * back the command's pid namespace before anything runs in it (JOINED: the
 * view then names the accesses from that namespace after this process,
 * ipc-view-share.c; we answer GO), and stays as the sandbox's parent to
 * relay signals and report the exit status.
 *
 * Output: stdout and stderr are pipes (a pty when tty is true), read on the
 * loop without blocking.  Each read becomes a process/output notification
 * with a per-process seq and is also retained (FB_RPC_PROCESS_RETAIN bytes,
 * oldest dropped first) for process/read {afterSeq, maxBytes, waitMs}, which
 * is how a client that resumed its session catches up.  When the client
 * reads slower than the process writes, reading pauses (the process blocks
 * on its pipe) instead of the queue growing.  process/exited {exitCode,
 * sandboxDenied} comes once the exit status is known and every output
 * stream reached its end, then process/closed; so every output notification
 * precedes them.  sandboxDenied is true when the process exited non-zero
 * after its view logged a denial (deny, read-only or fusebox's own; never
 * a hidden name, which would tell that the name exists): Codex's client
 * reports such a command as refused by the sandbox, whatever its exit
 * code, so a command that succeeded although something it tried was
 * refused (git status can't take .git/index.lock under builtin:agent, and
 * goes on) must not be flagged.
 *
 * Shares (ipc-rpc-share.c): a running process counts against its
 * session's client's share and the server's budget of running processes
 * until it is finished; its retained output (chunks and their bookkeeping)
 * against the client's share and the server's budget of retained output
 * until it is forgotten.  Past the server's budget or a client's share,
 * finished processes are forgotten, the oldest of the session that holds
 * the most in the client that holds the most first (retained_victim, from
 * the loop), so running ones never lose more than FB_RPC_PROCESS_RETAIN
 * allows them to keep, and one session's flood costs its neighbours
 * nothing while it holds more than they do.  process/read of a forgotten
 * one says so (the session remembers the last FB_RPC_FORGOTTEN_MAX ids).
 *
 * process/write is idempotent per writeId (the last FB_WRITE_IDS_MAX ids are
 * remembered) and buffers at most FB_STDIN_PENDING_MAX bytes the process has
 * not read yet.  Loop thread only; the FUSE threads touch only the view and
 * its tee sink. */
#include "ipc/ipc-rpc-private.h"
#include "ipc/ipc-process-launch.h"
#include "ipc/ipc-proxy.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <pty.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define READ_CHUNK (64 * 1024)
#define FB_WRITE_IDS_MAX 1024
#define FB_STDIN_PENDING_MAX (1024 * 1024)
#define WAIT_MS_MAX 30000
/* Pause reading a process's output while its client has this much queued. */
#define PAUSE_QUEUE_BYTES (FB_RPC_QUEUE_MAX / 4)
/* What a retained chunk costs beyond its bytes: the Chunk, the GBytes, the
 * queue's link and malloc's headers, rounded up. */
#define CHUNK_OVERHEAD 128

typedef struct
{
  guint64 seq;
  const char *stream; /* "stdout", "stderr", "pty" */
  GBytes *data;
} Chunk;

typedef struct
{
  FbRpcProcess *proc;
  int fd;
  guint watch;
  guint resume;
  const char *stream;
} Stream;

typedef struct
{
  FbRpcConn *conn;
  FbRpcProcess *proc;
  JsonNode *id;
  guint64 after;
  guint64 max_bytes;
  guint timeout;
} Deferred;

struct FbRpcProcess
{
  FbRpcSession *session;
  FbRpcClient *client; /* the session's (it outlives its processes) */
  char *id;

  GPid helper;
  guint child_watch;
  int sock;
  guint sock_watch;

  Stream out, err;
  int in_fd;
  guint in_watch;
  GByteArray *in_pending;
  bool accepts_stdin;

  FbPolicy *policy;
  /* Its records' sink: counts its denials (sandboxDenied), names its
   * session, feeds its log share.  Its member's (which frees it) once it
   * joined, so that a file closed after its end is still its record. */
  FbRpcTeeSink *tee;
  FbRpcView *view;             /* the view it runs in (a reference) */
  FbViewFdAccount *fd_account; /* its sandbox's open files, with their floor, until it ends */
  bool view_used;              /* counted as running there (fb_rpc_view_use) */
  FbViewMember *member;        /* how the view tells its accesses apart, once it joined */
  /* Until it is launched: the command for the helper, and the helper's
   * ends of its status socket and its stdin, stdout and stderr. */
  int spec_fd;
  int helper_sock;
  int child_fds[3];
  /* Launched through the spare helper, which has not said a word yet
   * (spare_unheard): the above and our end of the status socket made for a
   * helper of its own (retry_sock, else -1) are kept, so that a spare that
   * dies first is replaced by a helper of its own (on_helper_exit); a
   * signal meanwhile is kept in pending_signal, to be its end if that
   * happens. */
  int retry_sock;
  int pending_signal;

  GQueue chunks;  /* Chunk*, oldest first */
  gsize retained; /* bytes of chunks, and CHUNK_OVERHEAD each */
  guint64 next_seq;
  bool running_claimed; /* holds one of its client's running processes (ipc-rpc-share.c) */
  GList finished_link;  /* in server->finished once finished */

  bool exit_known;
  int exit_code;
  bool helper_gone;
  bool finished;            /* exited and closed sent */
  FbAccessShare *log_share; /* its part of the log's budget (ipc-log.c "Shares"), or NULL */
  FbProxy *proxy;           /* a network allowlist's, until the process finishes, or NULL */
  bool log_stopped;         /* stopped for using it up: exits 125 */
  char *failure;

  GHashTable *write_ids;
  GQueue write_id_order;
  GList *waiters; /* Deferred* */
};

static void process_maybe_finish (FbRpcProcess *p);
static void stream_close (Stream *s);
static void unlaunched_close (FbRpcProcess *p);

/* --- output ------------------------------------------------------------------ */

static FbRpcConn *
process_conn (FbRpcProcess *p)
{
  return p->session != NULL ? p->session->conn : NULL;
}

static void
chunk_free (Chunk *c)
{
  g_bytes_unref (c->data);
  g_free (c);
}

static JsonObject *
chunk_json (FbRpcProcess *p, const Chunk *c, bool with_process)
{
  JsonObject *o = json_object_new ();
  gsize len;
  const guint8 *d = g_bytes_get_data (c->data, &len);
  g_autofree char *b64 = g_base64_encode (d, len);

  if (with_process)
    json_object_set_string_member (o, "processId", p->id);
  json_object_set_int_member (o, "seq", (gint64)c->seq);
  json_object_set_string_member (o, "stream", c->stream);
  json_object_set_string_member (o, "chunk", b64);
  return o;
}

/* Did the sandbox refuse what made the process fail?  Only known once it
 * has exited: a client keeps a true it saw while the process ran. */
static bool
sandbox_denied (FbRpcProcess *p)
{
  return p->exit_known && p->exit_code != 0 && p->tee != NULL && fb_rpc_tee_sink_get_denials (p->tee) > 0;
}

static JsonNode *
read_response (FbRpcProcess *p, guint64 after, guint64 max_bytes)
{
  JsonObject *o = json_object_new ();
  JsonArray *arr = json_array_new ();
  guint64 next = p->next_seq;
  gsize bytes = 0;

  for (GList *l = p->chunks.head; l != NULL; l = l->next)
    {
      Chunk *c = l->data;
      gsize len = g_bytes_get_size (c->data);
      if (c->seq <= after)
        continue;
      /* At least one chunk, then only as many as fit in maxBytes. */
      if (json_array_get_length (arr) > 0 && bytes + len > max_bytes)
        {
          next = c->seq;
          break;
        }
      bytes += len;
      json_array_add_object_element (arr, chunk_json (p, c, false));
    }
  json_object_set_array_member (o, "chunks", arr);
  /* As Codex: the seq after everything this answer covers, notifications
   * (exited, closed) included, unless maxBytes cut it short. */
  json_object_set_int_member (o, "nextSeq", (gint64)next);
  /* exited: the process is gone (its status known); closed: its output
   * was read to the end as well, and process/closed sent. */
  json_object_set_boolean_member (o, "exited", p->exit_known);
  if (p->exit_known)
    json_object_set_int_member (o, "exitCode", p->exit_code);
  else
    json_object_set_null_member (o, "exitCode");
  json_object_set_boolean_member (o, "closed", p->finished);
  if (p->failure != NULL)
    json_object_set_string_member (o, "failure", p->failure);
  else
    json_object_set_null_member (o, "failure");
  json_object_set_boolean_member (o, "sandboxDenied", sandbox_denied (p));
  return fb_rpc_object_node (o);
}

static void
deferred_free (Deferred *d)
{
  g_clear_handle_id (&d->timeout, g_source_remove);
  json_node_unref (d->id);
  g_free (d);
}

static void
deferred_complete (Deferred *d)
{
  g_autoptr (JsonNode) result = read_response (d->proc, d->after, d->max_bytes);

  d->proc->waiters = g_list_remove (d->proc->waiters, d);
  d->conn->deferred = g_list_remove (d->conn->deferred, d);
  fb_rpc_conn_reply (d->conn, d->id, result);
  deferred_free (d);
}

static void
wake_waiters (FbRpcProcess *p)
{
  while (p->waiters != NULL)
    deferred_complete (p->waiters->data);
}

static void
emit (FbRpcProcess *p, const char *method, JsonObject *params)
{
  FbRpcConn *conn = process_conn (p);
  g_autoptr (JsonNode) node = json_node_init_object (json_node_alloc (), params);

  json_object_unref (params);
  if (conn != NULL)
    fb_rpc_conn_notify (conn, method, node);
}

/* --- retained output's budgets ------------------------------------------------- */

/* Count DELTA bytes of P's retained output with its session (until it
 * goes: fb_rpc_process_free), its client and the server. */
static void
retained_add (FbRpcProcess *p, gssize delta)
{
  FbRpcServer *server = p->client->server;

  p->retained += delta;
  if (p->session != NULL)
    p->session->retained += delta;
  p->client->retained += delta;
  server->retained += delta;
}

static gsize
retained_share (FbRpcServer *server)
{
  return server->budget.retained / FB_RPC_CLIENT_SHARE;
}

static bool
over_retained (FbRpcServer *server, FbRpcClient *c)
{
  return server->retained > server->budget.retained || (c != NULL && c->retained > retained_share (server));
}

/* Why a finished process was forgotten (FbRpcSession.forgotten). */
typedef enum
{
  FORGOTTEN_BUDGET = 1, /* the retained output's budget or a client's share */
  FORGOTTEN_COUNT,      /* its session's FB_RPC_PROCESSES_MAX */
} Forgotten;

static void forget_finished (FbRpcProcess *p, Forgotten why);

/* The finished process to forget next, or NULL: while the server is over
 * its budget, or a client over its share (then only that client's), the
 * oldest finished process of the session that holds the most in the client
 * that holds the most.  So the clients that hold the least keep theirs,
 * and inside a client (all local WebSocket clients are one: 127.0.0.1)
 * a session that floods the rest forgets its own output, not its
 * neighbours'. */
static FbRpcProcess *
retained_victim (FbRpcServer *server)
{
  bool server_over = server->retained > server->budget.retained;
  gsize share = retained_share (server);
  FbRpcProcess *best = NULL;

  /* oldest first: a later one wins only by holding strictly more */
  for (GList *l = server->finished.head; l != NULL; l = l->next)
    {
      FbRpcProcess *p = l->data;

      if (!server_over && p->client->retained <= share)
        continue;
      if (best == NULL || p->client->retained > best->client->retained ||
          (p->client == best->client && p->session->retained > best->session->retained))
        best = p;
    }
  return best;
}

/* From the loop: forget finished processes until the budget and every
 * share hold (retained_victim).  Running ones are never forgotten: they
 * are bounded by their number. */
static gboolean
enforce_retained (gpointer data)
{
  FbRpcServer *server = data;
  FbRpcProcess *p;

  server->retain_idle = 0;
  while ((p = retained_victim (server)) != NULL)
    forget_finished (p, FORGOTTEN_BUDGET);
  return G_SOURCE_REMOVE;
}

static void
schedule_enforce_retained (FbRpcProcess *p)
{
  FbRpcServer *server = p->client->server;

  if (server->retain_idle == 0 && server->finished.head != NULL && over_retained (server, p->client))
    server->retain_idle = g_idle_add (enforce_retained, server);
}

static void
add_output (FbRpcProcess *p, const char *stream, const guint8 *data, gsize len)
{
  Chunk *c = g_new0 (Chunk, 1);

  c->seq = p->next_seq++;
  c->stream = stream;
  c->data = g_bytes_new (data, len);
  g_queue_push_tail (&p->chunks, c);
  retained_add (p, (gssize)(len + CHUNK_OVERHEAD));
  while (p->retained > FB_RPC_PROCESS_RETAIN && p->chunks.length > 1)
    {
      Chunk *old = g_queue_pop_head (&p->chunks);
      retained_add (p, -(gssize)(g_bytes_get_size (old->data) + CHUNK_OVERHEAD));
      chunk_free (old);
    }
  schedule_enforce_retained (p);
  emit (p, "process/output", chunk_json (p, c, true));
  wake_waiters (p);
}

static gboolean on_output (int fd, GIOCondition cond, gpointer user_data);

static gboolean
on_output_resume (gpointer user_data)
{
  Stream *s = user_data;

  s->resume = 0;
  if (s->fd >= 0 && s->watch == 0)
    s->watch = g_unix_fd_add (s->fd, G_IO_IN | G_IO_HUP | G_IO_ERR, on_output, s);
  return G_SOURCE_REMOVE;
}

static gboolean
on_output (int fd, GIOCondition cond, gpointer user_data)
{
  Stream *s = user_data;
  FbRpcProcess *p = s->proc;
  FbRpcConn *conn = process_conn (p);
  guint8 buf[READ_CHUNK];
  ssize_t n;

  if (conn != NULL && conn->out_bytes > PAUSE_QUEUE_BYTES)
    {
      /* Back-pressure: the process waits on its pipe while the client
       * catches up, rather than the client's queue growing. */
      s->watch = 0;
      s->resume = g_timeout_add (20, on_output_resume, s);
      return G_SOURCE_REMOVE;
    }
  n = read (fd, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return G_SOURCE_CONTINUE;
  if (n <= 0)
    {
      /* EOF (or EIO from a pty master once the last slave is closed). */
      s->watch = 0;
      stream_close (s);
      process_maybe_finish (p);
      return G_SOURCE_REMOVE;
    }
  add_output (p, s->stream, buf, (gsize)n);
  return G_SOURCE_CONTINUE;
}

static void
stream_close (Stream *s)
{
  g_clear_handle_id (&s->watch, g_source_remove);
  g_clear_handle_id (&s->resume, g_source_remove);
  fb_fd_close (&s->fd);
}

static void
stream_open (Stream *s, FbRpcProcess *p, int fd, const char *name)
{
  s->proc = p;
  s->fd = fd;
  s->stream = name;
  g_unix_set_fd_nonblocking (fd, TRUE, NULL);
  s->watch = g_unix_fd_add (fd, G_IO_IN | G_IO_HUP | G_IO_ERR, on_output, s);
}

/* --- the end ----------------------------------------------------------------- */

/* The spec's network mode for POLICY (FbLaunchSpecHeader.network). */
static guint32
spec_network (FbPolicy *policy)
{
  switch (fb_policy_get_network (policy))
    {
      case FB_POLICY_NETWORK_HOST:
        return 1;
      case FB_POLICY_NETWORK_ALLOWLIST:
        return 2;
      case FB_POLICY_NETWORK_NONE:
        return 0;
    }
  return 0;
}

/* The sandbox is gone: none of its processes is left in its view, which
 * goes on for the others (the last one to leave starts its idle timer). */
static void
leave_view (FbRpcProcess *p)
{
  fb_view_member_end (p->member);
  if (p->view_used)
    fb_rpc_view_release (p->view);
  p->view_used = false;
}

static void
process_maybe_finish (FbRpcProcess *p)
{
  JsonObject *o;

  if (p->finished || !p->exit_known || p->out.fd >= 0 || p->err.fd >= 0)
    return;
  p->finished = true;
  /* The next process/start in its view finds its sandbox made, made
   * meanwhile: not while this one starts or runs, with which making it
   * would compete. */
  if (p->view_used && fb_rpc_view_is_ready (p->view) && p->session != NULL && p->session->conn != NULL)
    fb_rpc_ready_schedule (p->client->server, p->view, spec_network (p->policy));
  leave_view (p);
  /* its connections' last records, before its share's */
  g_clear_pointer (&p->proxy, fb_proxy_free);
  /* The sandbox holds nothing any more: its floor of open files goes
   * back for the next process, whatever keeps its output. */
  g_clear_pointer (&p->fd_account, fb_view_fd_account_unref);
  /* Nothing of it pushes records any more (but a file another process
   * holds): its share's last word, if any. */
  if (p->log_share != NULL)
    fb_access_share_close (p->log_share);
  /* Its descriptors are gone: its client may start another.  Its output
   * stays readable until a budget needs the room (enforce_retained). */
  if (p->running_claimed)
    {
      fb_rpc_process_release (p->client);
      p->running_claimed = false;
    }
  p->finished_link.data = p;
  g_queue_push_tail_link (&p->client->server->finished, &p->finished_link);
  schedule_enforce_retained (p);
  o = json_object_new ();
  json_object_set_string_member (o, "processId", p->id);
  json_object_set_int_member (o, "seq", (gint64)p->next_seq++);
  json_object_set_int_member (o, "exitCode", p->exit_code);
  json_object_set_boolean_member (o, "sandboxDenied", sandbox_denied (p));
  emit (p, "process/exited", o);
  o = json_object_new ();
  json_object_set_string_member (o, "processId", p->id);
  json_object_set_int_member (o, "seq", (gint64)p->next_seq++);
  emit (p, "process/closed", o);
  wake_waiters (p);
}

static void
set_exit (FbRpcProcess *p, int code)
{
  if (p->exit_known)
    return;
  p->exit_known = true;
  /* stopped by fusebox, as `fusebox run` does at its budget */
  p->exit_code = p->log_stopped ? FB_LAUNCH_EXIT_SANDBOX : code;
  if (p->in_fd >= 0)
    {
      g_clear_handle_id (&p->in_watch, g_source_remove);
      fb_fd_close (&p->in_fd);
    }
}

static void spare_died_unheard (FbRpcProcess *p);

static bool
spare_unheard (const FbRpcProcess *p)
{
  return p->retry_sock >= 0;
}

static void
on_helper_exit (GPid pid, int status, gpointer user_data)
{
  FbRpcProcess *p = user_data;

  p->child_watch = 0;
  g_spawn_close_pid (pid);
  if (spare_unheard (p) && !p->exit_known)
    {
      spare_died_unheard (p);
      return;
    }
  /* our copies of its streams go, so that they end */
  unlaunched_close (p);
  p->helper_gone = true;
  if (!p->exit_known)
    {
      /* The helper died without reporting (killed?): its own status. */
      int code = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + (WIFSIGNALED (status) ? WTERMSIG (status) : 0);
      set_exit (p, code != 0 ? code : FB_LAUNCH_EXIT_SANDBOX);
      if (p->failure == NULL)
        p->failure = g_strdup ("the launch helper ended without reporting the command's exit status");
    }
  /* The helper held the command's stdio: with it gone, so are the ends
   * that could still be written; what is buffered is read before EOF. */
  process_maybe_finish (p);
}

/* From the loop (ipc-log.c): the process's records reached its share of
 * the log's budget.  It is stopped, and says why on its stderr; what it
 * still does is logged up to the share's margin, then counted. */
static void send_signal (FbRpcProcess *p, int sig);

static void
on_log_share_full (gpointer data)
{
  FbRpcProcess *p = data;
  guint64 max = fb_access_share_get_max_bytes (p->log_share);
  /* not g_format_size: its U+00A0 would be escaped on a terminal */
  g_autofree char *size = max % (1024 * 1024) == 0 ? g_strdup_printf ("%" G_GUINT64_FORMAT " MiB", max >> 20)
                          : max % 1024 == 0        ? g_strdup_printf ("%" G_GUINT64_FORMAT " KiB", max >> 10)
                                                   : g_strdup_printf ("%" G_GUINT64_FORMAT " bytes", max);
  g_autofree char *line = NULL;

  if (p->exit_known)
    return; /* it ended by itself */
  p->log_stopped = true;
  g_free (p->failure);
  p->failure = g_strdup_printf ("the process used up its share of the access log (%s, a quarter of the server's "
                                "--log-max-size) and was stopped; the other processes go on.  Give the server a "
                                "larger budget (--log-max-size), or see what filled it with 'fusebox log'",
                                size);
  line = fb_text_printf ("fusebox: %s\n", p->failure);
  add_output (p, p->err.stream != NULL ? p->err.stream : "stderr", (const guint8 *)line, strlen (line));
  send_signal (p, SIGKILL);
}

void
fb_rpc_process_stop_view (FbRpcSession *session, FbRpcView *view, const char *why)
{
  g_autoptr (GPtrArray) stop = g_ptr_array_new ();
  GHashTableIter it;
  gpointer v;

  /* collected first: a signal may finish a process (send_signal) */
  g_hash_table_iter_init (&it, session->processes);
  while (g_hash_table_iter_next (&it, NULL, &v))
    if ((view == NULL || ((FbRpcProcess *)v)->view == view) && !((FbRpcProcess *)v)->exit_known)
      g_ptr_array_add (stop, v);
  for (guint i = 0; i < stop->len; i++)
    {
      FbRpcProcess *p = stop->pdata[i];
      g_autofree char *line = fb_text_printf ("fusebox: %s\n", why);

      p->log_stopped = true;
      g_free (p->failure);
      p->failure = g_strdup (why);
      add_output (p, p->err.stream != NULL ? p->err.stream : "stderr", (const guint8 *)line, strlen (line));
      send_signal (p, SIGKILL);
    }
}

/* One record, and the one descriptor it may carry (more are another
 * record's business: closed). */
static int
recv_record (int fd, FbLaunchRecord *rec, int *ret_fd)
{
  int fds[2];
  int r = fb_launch_record_recv (fd, rec, fds);

  if (fds[1] >= 0)
    close (fds[1]);
  *ret_fd = fds[0];
  return r;
}

/* What a process's records go through, freed with its member (its last
 * file closed, the process gone). */
typedef struct
{
  FbRpcTeeSink *tee;
  FbAccessShare *share; /* a reference, or NULL */
} ProcessSinks;

static void
process_sinks_free (gpointer data)
{
  ProcessSinks *sinks = data;

  fb_rpc_tee_sink_free (sinks->tee);
  if (sinks->share != NULL)
    fb_access_share_unref (sinks->share);
  g_free (sinks);
}

/* From here the view names what comes from the pid namespace PIDNS after
 * P: its member, which owns P's tee from now on (*RET_SINKS: what it
 * frees).  False with ERROR set when the view takes no member. */
static bool
add_member (FbRpcProcess *p, int pidns, ProcessSinks **ret_sinks, GError **error)
{
  ProcessSinks *sinks = g_new0 (ProcessSinks, 1);

  sinks->tee = p->tee;
  sinks->share = p->log_share != NULL ? fb_access_share_ref (p->log_share) : NULL;
  p->member = fb_rpc_view_add_member (p->view, pidns, p->id, p->fd_account, fb_rpc_tee_sink_get (p->tee),
                                      process_sinks_free, sinks, error);
  if (p->member == NULL)
    {
      if (sinks->share != NULL)
        fb_access_share_unref (sinks->share);
      g_free (sinks);
      return false;
    }
  if (ret_sinks != NULL)
    *ret_sinks = sinks;
  return true;
}

/* JOINED: the sandbox is in the view, with its pid namespace made and
 * nothing running in it.  From here the view names what comes from that
 * namespace after this process; then it may run (GO). */
static void
joined (FbRpcProcess *p, int pidns)
{
  g_autoptr (GError) gerr = NULL;
  FbLaunchRecord rec;

  if (p->member != NULL)
    return;
  if (!add_member (p, pidns, NULL, &gerr))
    {
      g_free (p->failure);
      p->failure = g_strdup_printf ("can't run in the session's view: %s", gerr->message);
      send_signal (p, SIGKILL);
      return;
    }
  memset (&rec, 0, sizeof rec);
  rec.type = FB_LAUNCH_GO;
  send (p->sock, &rec, sizeof rec, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* PROXY: the server's proxy accepts on the socket FD the sandbox listens
 * on (taken); its connections are the process's records, as its files
 * are.  One that can't start leaves the sandbox without a way out. */
static void
start_proxy (FbRpcProcess *p, int fd)
{
  g_autoptr (GError) gerr = NULL;
  FbProxyOptions po = { .policy = p->policy,
                        .sink = fb_rpc_tee_sink_get (p->tee),
                        .uid = geteuid (),
                        .process = p->id,
                        .max_connections = p->client->server->budget.tunnels };

  p->proxy = fb_proxy_new (&po, fd, &gerr);
  if (p->proxy == NULL)
    g_warning ("process %s: the network proxy could not start: %s", p->id, gerr->message);
}

static gboolean
on_status (int fd, GIOCondition cond, gpointer user_data)
{
  FbRpcProcess *p = user_data;

  for (;;)
    {
      FbLaunchRecord rec;
      int passed = -1;
      int r = recv_record (fd, &rec, &passed);
      if (r == -EAGAIN)
        return G_SOURCE_CONTINUE;
      if (r <= 0)
        {
          /* EOF: the helper is gone; its exit is reported by the child watch. */
          p->sock_watch = 0;
          fb_fd_close (&p->sock);
          return G_SOURCE_REMOVE;
        }
      /* a spare's first word: it has the command, and our copies go */
      if (spare_unheard (p))
        unlaunched_close (p);
      switch (rec.type)
        {
          case FB_LAUNCH_JOINED:
            if (passed >= 0)
              joined (p, passed);
            break;
          case FB_LAUNCH_EXEC:
            break;
          case FB_LAUNCH_PROXY:
            if (passed >= 0 && p->proxy == NULL)
              start_proxy (p, g_steal_fd (&passed));
            break;
          case FB_LAUNCH_FAILED:
            {
              /* The text quotes the client's command and cwd, and the client
               * shows it to a person. */
              g_autofree char *line = fb_text_printf ("fusebox: %s\n", rec.text);
              g_free (p->failure);
              p->failure = g_strdup (rec.text);
              /* Shown as the process's stderr, like `fusebox run` would. */
              add_output (p, p->err.stream != NULL ? p->err.stream : "stderr", (const guint8 *)line, strlen (line));
              set_exit (p, rec.value);
            }
            break;
          case FB_LAUNCH_EXITED:
            set_exit (p, rec.value);
            break;
          default:
            break;
        }
      if (passed >= 0)
        close (passed);
    }
}

static void
send_signal (FbRpcProcess *p, int sig)
{
  FbLaunchRecord rec;

  if (p->helper == 0 && !p->exit_known)
    {
      /* not launched yet (its view is being made): it ends as if the
       * signal had reached it, and never starts */
      fb_rpc_view_unwait (p->view, p);
      set_exit (p, 128 + sig);
      unlaunched_close (p);
      process_maybe_finish (p);
      return;
    }
  if (spare_unheard (p) && p->pending_signal == 0)
    p->pending_signal = sig;
  if (p->sock < 0)
    return;
  memset (&rec, 0, sizeof rec);
  rec.type = FB_LAUNCH_SIGNAL;
  rec.value = sig;
  send (p->sock, &rec, sizeof rec, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Forget P, finished: its session remembers its id and why, so that
 * process/read says why it is gone (lookup). */
static void
forget_finished (FbRpcProcess *p, Forgotten why)
{
  FbRpcSession *session = p->session;
  gpointer id;

  g_debug ("forgetting the output of process %s of %s (%" G_GSIZE_FORMAT " bytes): %s", p->id, p->client->key,
           p->retained, why == FORGOTTEN_BUDGET ? "the retained output's budget" : "its session's process limit");
  if (!g_hash_table_lookup_extended (session->forgotten, p->id, &id, NULL))
    {
      id = g_strdup (p->id);
      g_queue_push_tail (&session->forgotten_order, id);
      if (session->forgotten_order.length > FB_RPC_FORGOTTEN_MAX)
        {
          char *oldest = g_queue_pop_head (&session->forgotten_order);
          g_hash_table_remove (session->forgotten, oldest);
          g_free (oldest);
        }
    }
  g_hash_table_insert (session->forgotten, id, GINT_TO_POINTER (why));
  g_hash_table_remove (session->processes, p->id);
}

/* The id is used again: forgotten no more. */
static void
unforget (FbRpcSession *session, const char *process_id)
{
  gpointer id;

  if (!g_hash_table_lookup_extended (session->forgotten, process_id, &id, NULL))
    return;
  g_queue_remove (&session->forgotten_order, id);
  g_hash_table_remove (session->forgotten, id);
  g_free (id);
}

void
fb_rpc_process_free (FbRpcProcess *p)
{
  if (p == NULL)
    return;
  if (p->running_claimed)
    fb_rpc_process_release (p->client);
  p->running_claimed = false;
  if (p->finished_link.data != NULL)
    g_queue_unlink (&p->client->server->finished, &p->finished_link);
  p->finished_link.data = NULL;
  /* Its output leaves its session's count now (retained_add has no
   * session from here on). */
  if (p->session != NULL)
    p->session->retained -= p->retained;
  /* Answer long polls before the process goes. */
  p->session = NULL;
  wake_waiters (p);
  if (p->helper != 0 && !p->helper_gone)
    {
      /* Closing the status socket kills the sandbox; SIGKILL the helper in
       * case it is stuck before reading it. */
      kill (p->helper, SIGKILL);
    }
  /* a process dropped before it finished: its connections end with it */
  g_clear_pointer (&p->proxy, fb_proxy_free);
  g_clear_handle_id (&p->child_watch, g_source_remove);
  g_clear_handle_id (&p->sock_watch, g_source_remove);
  fb_fd_close (&p->sock);
  stream_close (&p->out);
  stream_close (&p->err);
  g_clear_handle_id (&p->in_watch, g_source_remove);
  fb_fd_close (&p->in_fd);
  if (p->in_pending != NULL)
    g_byte_array_unref (p->in_pending);
  if (p->helper != 0 && !p->helper_gone)
    {
      int status;
      /* Reap it here: the child watch is gone with the process. */
      while (waitpid (p->helper, &status, 0) < 0 && errno == EINTR)
        ;
      g_spawn_close_pid (p->helper);
    }
  if (p->view != NULL)
    fb_rpc_view_unwait (p->view, p);
  leave_view (p);
  /* its member frees the tee once no file of it is open in the view */
  if (p->member != NULL)
    g_clear_pointer (&p->member, fb_view_member_unref);
  else if (p->tee != NULL)
    fb_rpc_tee_sink_free (p->tee);
  p->tee = NULL;
  g_clear_pointer (&p->view, fb_rpc_view_unref);
  g_clear_pointer (&p->fd_account, fb_view_fd_account_unref);
  unlaunched_close (p);
  g_clear_pointer (&p->policy, fb_policy_unref);
  if (p->log_share != NULL)
    fb_access_share_close (p->log_share);
  g_clear_pointer (&p->log_share, fb_access_share_unref);
  retained_add (p, -(gssize)p->retained);
  g_queue_clear_full (&p->chunks, (GDestroyNotify)chunk_free);
  g_clear_pointer (&p->write_ids, g_hash_table_destroy);
  g_queue_clear_full (&p->write_id_order, g_free);
  g_free (p->failure);
  g_free (p->id);
  g_free (p);
}

void
fb_rpc_process_cancel_deferred (FbRpcConn *conn)
{
  while (conn->deferred != NULL)
    {
      Deferred *d = conn->deferred->data;
      conn->deferred = g_list_remove (conn->deferred, d);
      d->proc->waiters = g_list_remove (d->proc->waiters, d);
      deferred_free (d);
    }
}

/* --- process/start ----------------------------------------------------------- */

static bool
name_matches (GPatternSpec *const *patterns, guint n, const char *name)
{
  g_autofree char *up = g_ascii_strup (name, -1);

  for (guint i = 0; i < n; i++)
    if (g_pattern_spec_match_string (patterns[i], up))
      return true;
  return false;
}

static bool
pattern_list (JsonObject *policy, const char *member, GPtrArray **ret, FbRpcError *error)
{
  JsonNode *n = json_object_get_member (policy, member);
  GPtrArray *a = g_ptr_array_new_with_free_func ((GDestroyNotify)g_pattern_spec_free);

  *ret = a;
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return true;
  if (!JSON_NODE_HOLDS_ARRAY (n))
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `envPolicy.%s` must be an array", member);
      return false;
    }
  for (guint i = 0; i < json_array_get_length (json_node_get_array (n)); i++)
    {
      JsonNode *e = json_array_get_element (json_node_get_array (n), i);
      g_autofree char *up = NULL;
      if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_STRING)
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS,
                            "invalid params: `envPolicy.%s` must be an array of strings", member);
          return false;
        }
      up = g_ascii_strup (json_node_get_string (e), -1);
      g_ptr_array_add (a, g_pattern_spec_new (up));
    }
  return true;
}

static bool
string_map (JsonNode *n, const char *what, GHashTable *into, FbRpcError *error)
{
  JsonObject *o;
  g_autoptr (GList) names = NULL;

  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return true;
  if (!JSON_NODE_HOLDS_OBJECT (n))
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `%s` must be an object of strings", what);
      return false;
    }
  o = json_node_get_object (n);
  names = json_object_get_members (o);
  for (GList *l = names; l != NULL; l = l->next)
    {
      JsonNode *v = json_object_get_member (o, l->data);
      if (!JSON_NODE_HOLDS_VALUE (v) || json_node_get_value_type (v) != G_TYPE_STRING)
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `%s.%s` must be a string", what,
                            (const char *)l->data);
          return false;
        }
      if (((const char *)l->data)[0] == '\0' || strchr (l->data, '=') != NULL)
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `%s` holds an invalid name `%s`", what,
                            (const char *)l->data);
          return false;
        }
      g_hash_table_insert (into, g_strdup (l->data), g_strdup (json_node_get_string (v)));
    }
  return true;
}

/* The command's environment: Codex's envPolicy applied to the server's own
 * environment (when given), then `env` on top. */
static char **
build_env (JsonObject *params, FbRpcError *error)
{
  g_autoptr (GHashTable) env = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  JsonNode *pol = json_object_get_member (params, "envPolicy");
  GPtrArray *out;
  GHashTableIter it;
  gpointer k, v;

  if (pol != NULL && !JSON_NODE_HOLDS_NULL (pol))
    {
      static const char *const core[] = { "HOME",     "LOGNAME", "PATH", "SHELL", "USER",
                                          "USERNAME", "TMPDIR",  "TEMP", "TMP",   "LANG" };
      static const char *const secret_globs[] = { "*KEY*", "*SECRET*", "*TOKEN*" };
      g_autoptr (GPtrArray) exclude = NULL;
      g_autoptr (GPtrArray) include = NULL;
      g_autoptr (GPtrArray) defaults = g_ptr_array_new_with_free_func ((GDestroyNotify)g_pattern_spec_free);
      g_auto (GStrv) environ_ = g_get_environ ();
      JsonObject *po;
      const char *inherit = "all";
      bool ignore_defaults = false;

      if (!JSON_NODE_HOLDS_OBJECT (pol))
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `envPolicy` must be an object");
          return NULL;
        }
      po = json_node_get_object (pol);
      if (!fb_rpc_param_string (po, "inherit", false, &inherit, error) ||
          !fb_rpc_param_bool (po, "ignoreDefaultExcludes", false, &ignore_defaults, error) ||
          !pattern_list (po, "exclude", &exclude, error) || !pattern_list (po, "includeOnly", &include, error))
        return NULL;
      if (inherit == NULL)
        inherit = "all";
      if (strcmp (inherit, "all") != 0 && strcmp (inherit, "core") != 0 && strcmp (inherit, "none") != 0)
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS,
                            "invalid params: `envPolicy.inherit` must be \"all\", \"core\" or \"none\"");
          return NULL;
        }
      for (guint i = 0; i < G_N_ELEMENTS (secret_globs); i++)
        g_ptr_array_add (defaults, g_pattern_spec_new (secret_globs[i]));
      for (guint i = 0; strcmp (inherit, "none") != 0 && environ_[i] != NULL; i++)
        {
          const char *eq = strchr (environ_[i], '=');
          g_autofree char *name = eq != NULL ? g_strndup (environ_[i], eq - environ_[i]) : NULL;
          bool keep = name != NULL;
          if (keep && strcmp (inherit, "core") == 0)
            {
              keep = false;
              for (guint c = 0; c < G_N_ELEMENTS (core); c++)
                keep = keep || strcmp (core[c], name) == 0;
            }
          if (keep && !ignore_defaults && name_matches ((GPatternSpec **)defaults->pdata, defaults->len, name))
            keep = false;
          if (keep && name_matches ((GPatternSpec **)exclude->pdata, exclude->len, name))
            keep = false;
          if (keep)
            g_hash_table_insert (env, g_steal_pointer (&name), g_strdup (eq + 1));
        }
      if (!string_map (json_object_get_member (po, "set"), "envPolicy.set", env, error))
        return NULL;
      if (include->len > 0)
        {
          g_hash_table_iter_init (&it, env);
          while (g_hash_table_iter_next (&it, &k, NULL))
            if (!name_matches ((GPatternSpec **)include->pdata, include->len, k))
              g_hash_table_iter_remove (&it);
        }
    }
  if (!string_map (json_object_get_member (params, "env"), "env", env, error))
    return NULL;
  out = g_ptr_array_new ();
  g_hash_table_iter_init (&it, env);
  while (g_hash_table_iter_next (&it, &k, &v))
    g_ptr_array_add (out, g_strconcat (k, "=", v, NULL));
  g_ptr_array_add (out, NULL);
  return (char **)g_ptr_array_free (out, FALSE);
}

static bool
string_array (JsonObject *params, const char *name, GPtrArray **ret, FbRpcError *error)
{
  JsonNode *n = json_object_get_member (params, name);
  JsonArray *a;

  if (n == NULL || !JSON_NODE_HOLDS_ARRAY (n))
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `%s` must be an array of strings", name);
      return false;
    }
  a = json_node_get_array (n);
  *ret = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < json_array_get_length (a); i++)
    {
      JsonNode *e = json_array_get_element (a, i);
      if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_STRING)
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `%s[%u]` must be a string", name, i);
          g_clear_pointer (ret, g_ptr_array_unref);
          return false;
        }
      g_ptr_array_add (*ret, g_strdup (json_node_get_string (e)));
    }
  return true;
}

/* Finished processes stay readable until room is needed: the session's
 * oldest finished one goes. */
static bool
evict_finished (FbRpcSession *session)
{
  for (GList *l = session->server->finished.head; l != NULL; l = l->next)
    {
      FbRpcProcess *p = l->data;
      if (p->session == session)
        {
          forget_finished (p, FORGOTTEN_COUNT);
          return true;
        }
    }
  return false;
}

/* The helper's first record: the command's memfd, and the view's user and
 * mount namespaces it joins; for a spare helper (STDIO not NULL), also the
 * command's stdin, stdout and stderr.  The socket is new and empty, so this
 * one message fits; it never blocks the loop. */
static int
send_spec (int sock, int spec_fd, const int ns[2], const int *stdio)
{
  FbLaunchRecord rec;
  int fds[6] = { spec_fd, ns[0], ns[1], -1, -1, -1 };

  memset (&rec, 0, sizeof rec);
  rec.type = FB_LAUNCH_SPEC;
  if (stdio != NULL)
    {
      rec.value = FB_LAUNCH_SPEC_STDIO;
      memcpy (&fds[3], stdio, 3 * sizeof *stdio);
    }
  return fb_send_fds (sock, &rec, sizeof rec, fds, stdio != NULL ? 6 : 3, MSG_DONTWAIT);
}

/* --- The spare helper ----------------------------------------------------
 *
 * Starting the helper is on every process/start's way: its exec and its
 * dynamic loading come before it reads its command.  So the server keeps
 * one helper started ahead (at most one, for all sessions), with /dev/null
 * as its stdin, stdout and stderr, waiting for its first record; a
 * process/start takes it and sends the command with its three streams
 * (FB_LAUNCH_SPEC_STDIO), and an idle moment starts the next.  It is the
 * same program with the same argv, environment, working directory and
 * descriptors as one started for the command (fb_launch_helper_spawn); it
 * holds nothing of any client before its command comes.  One that died
 * meanwhile is reaped, and the process gets a helper of its own.  A ready
 * sandbox for the process's view, made ahead, comes before the spare
 * (ready_launch, ipc-process-ready.c). */

static void
spare_reaped (GPid pid, int status, gpointer data)
{
  FbRpcServer *server = data;

  (void)status;
  server->spare_watch = 0;
  server->spare = 0;
  fb_fd_close (&server->spare_sock);
  g_spawn_close_pid (pid);
}

static gboolean
spare_start (gpointer data)
{
  FbRpcServer *server = data;
  g_autoptr (GError) gerr = NULL;
  int sv[2], null_fd;

  server->spare_idle = 0;
  if (server->spare != 0 || server->launch_helper == NULL)
    return G_SOURCE_REMOVE;
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    return G_SOURCE_REMOVE;
  null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0)
    server->spare = fb_launch_helper_spawn (server->launch_helper, null_fd, null_fd, null_fd, sv[1], &gerr);
  close (sv[1]);
  if (null_fd >= 0)
    close (null_fd);
  if (server->spare == 0)
    {
      /* the next process/start starts one of its own, and says why if it can't */
      close (sv[0]);
      return G_SOURCE_REMOVE;
    }
  server->spare_sock = sv[0];
  server->spare_watch = g_child_watch_add (server->spare, spare_reaped, server);
  return G_SOURCE_REMOVE;
}

/* A helper that was never sent its command, or could not be, killed and
 * reaped, and its socket (or -1) closed. */
static void
helper_kill (GPid pid, int sock)
{
  kill (pid, SIGKILL);
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
  g_spawn_close_pid (pid);
  if (sock >= 0)
    close (sock);
}

/* The spare for a process/start, if one waits: its pid and socket, no
 * longer the server's.  The next is started once the loop is idle. */
static GPid
spare_take (FbRpcServer *server, int *ret_sock)
{
  GPid pid = server->spare;

  if (server->spare_idle == 0)
    server->spare_idle = g_idle_add_full (G_PRIORITY_LOW, spare_start, server, NULL);
  if (pid == 0)
    return 0;
  g_clear_handle_id (&server->spare_watch, g_source_remove);
  server->spare = 0;
  *ret_sock = g_steal_fd (&server->spare_sock);
  /* one that died unseen (its watch not yet run) is of no use */
  if (waitpid (pid, NULL, WNOHANG) != 0)
    {
      g_spawn_close_pid (pid);
      fb_fd_close (ret_sock);
      return 0;
    }
  return pid;
}

void
fb_rpc_process_spare_stop (FbRpcServer *server)
{
  fb_rpc_ready_stop (server);
  g_clear_handle_id (&server->spare_idle, g_source_remove);
  if (server->spare != 0)
    {
      g_clear_handle_id (&server->spare_watch, g_source_remove);
      helper_kill (server->spare, g_steal_fd (&server->spare_sock));
      server->spare = 0;
    }
}

/* What waited for the launch, closed: once launched, the helper has its
 * copies; if it never is, the streams' other ends go and they end. */
static void
unlaunched_close (FbRpcProcess *p)
{
  fb_fd_close (&p->retry_sock);
  fb_fd_close (&p->spec_fd);
  fb_fd_close (&p->helper_sock);
  for (int i = 0; i < 3; i++)
    fb_fd_close (&p->child_fds[i]);
}

/* P's command, run in the ready sandbox for its view and network mode
 * (ipc-process-ready.c), if one waits: as joined() does at JOINED, its
 * member for the sandbox's pid namespace first, so that the command's
 * first step is its own (fb_view_share_add forgets the pids cached as no
 * one's); then its proxy; then COMMAND with its spec and stdio.  The
 * helper's pid, or 0: none, or one of no use (killed), and the caller
 * makes a sandbox as before. */
static GPid
ready_launch (FbRpcProcess *p)
{
  FbRpcServer *server = p->client->server;
  g_autoptr (GError) gerr = NULL;
  ProcessSinks *sinks = NULL;
  FbLaunchRecord rec;
  GPid pid;
  int sock = -1, pidns = -1, proxy_fd = -1;
  bool allowlist = fb_policy_get_network (p->policy) == FB_POLICY_NETWORK_ALLOWLIST;

  if (!fb_rpc_ready_take (server, p->view, spec_network (p->policy), &pid, &sock, &pidns, &proxy_fd))
    return 0;
  if (allowlist && proxy_fd < 0)
    goto pass;
  if (!add_member (p, pidns, &sinks, &gerr))
    goto pass;
  if (allowlist)
    start_proxy (p, g_steal_fd (&proxy_fd));
  memset (&rec, 0, sizeof rec);
  rec.type = FB_LAUNCH_COMMAND;
  {
    int fds[4] = { p->spec_fd, p->child_fds[0], p->child_fds[1], p->child_fds[2] };
    if (fb_send_fds (sock, &rec, sizeof rec, fds, 4, MSG_DONTWAIT) < 0)
      goto pass;
  }
  fb_fd_close (&pidns);
  fb_fd_close (&proxy_fd);
  /* its socket is the process's now; the helper has its copies of the
   * rest */
  fb_fd_close (&p->sock);
  p->sock = sock;
  unlaunched_close (p);
  return pid;

pass:
  g_debug ("process %s: the ready sandbox is of no use: %s", p->id,
           gerr != NULL ? gerr->message : "its helper is gone");
  if (p->member != NULL)
    {
      /* the tee stays the process's, for the sandbox made instead */
      sinks->tee = NULL;
      fb_view_member_end (p->member);
      g_clear_pointer (&p->member, fb_view_member_unref);
    }
  g_clear_pointer (&p->proxy, fb_proxy_free);
  fb_fd_close (&pidns);
  fb_fd_close (&proxy_fd);
  helper_kill (pid, sock);
  return 0;
}

/* The helper, told to run the command in P's view.  It runs on the host:
 * its argv, environment and working directory are ours, fixed; the
 * client's command reaches it only as data (ipc/ipc-process-launch.h),
 * sent before it reads anything. */
static bool
spawn_helper (FbRpcProcess *p, bool may_take_spare, FbRpcError *error)
{
  FbRpcServer *server = p->client->server;
  g_autoptr (GError) gerr = NULL;
  int spare_sock = -1;
  GPid pid;
  int r;

  pid = may_take_spare ? ready_launch (p) : 0;
  if (pid != 0)
    goto watched;
  pid = may_take_spare ? spare_take (server, &spare_sock) : 0;
  if (pid != 0)
    {
      r = send_spec (spare_sock, p->spec_fd, fb_rpc_view_get_namespaces (p->view), p->child_fds);
      if (r == 0)
        {
          /* its socket is the process's now; the pair made for a helper
           * of its own waits until the spare says a word */
          p->retry_sock = g_steal_fd (&p->sock);
          p->sock = spare_sock;
          goto watched;
        }
      helper_kill (pid, spare_sock);
    }
  pid = fb_launch_helper_spawn (server->launch_helper, p->child_fds[0], p->child_fds[1], p->child_fds[2],
                                p->helper_sock, &gerr);
  if (pid == 0)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "can't start the launch helper %s: %s", server->launch_helper,
                        gerr->message);
      return false;
    }
  r = send_spec (p->sock, p->spec_fd, fb_rpc_view_get_namespaces (p->view), NULL);
  if (r < 0)
    {
      /* The helper waits for its command: closing our end ends it. */
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "can't pass the command to the launch helper: %s",
                        g_strerror (-r));
      helper_kill (pid, -1);
      return false;
    }
  unlaunched_close (p);
watched:
  p->helper = pid;
  p->sock_watch = g_unix_fd_add (p->sock, G_IO_IN | G_IO_HUP | G_IO_ERR, on_status, p);
  p->child_watch = g_child_watch_add (pid, on_helper_exit, p);
  if (!p->view_used)
    fb_rpc_view_use (p->view);
  p->view_used = true;
  return true;
}

/* It will not run: said on its stderr, as a sandbox that could not be made
 * (125). */
static void
launch_failed (FbRpcProcess *p, const char *why)
{
  g_autofree char *line = fb_text_printf ("fusebox: %s\n", why);

  g_free (p->failure);
  p->failure = g_strdup (why);
  add_output (p, p->err.stream != NULL ? p->err.stream : "stderr", (const guint8 *)line, strlen (line));
  set_exit (p, FB_LAUNCH_EXIT_SANDBOX);
  /* its streams end with the ends the helper would have had */
  unlaunched_close (p);
  process_maybe_finish (p);
}

/* The spare P was launched through died before it said a word, so the
 * command never ran: a helper of its own (never the next spare), unless a
 * signal came for it meanwhile, which is then its end. */
static void
spare_died_unheard (FbRpcProcess *p)
{
  FbRpcError error = { 0 };

  p->helper = 0;
  g_clear_handle_id (&p->sock_watch, g_source_remove);
  fb_fd_close (&p->sock);
  p->sock = g_steal_fd (&p->retry_sock);
  if (p->pending_signal != 0)
    {
      set_exit (p, 128 + p->pending_signal);
      unlaunched_close (p);
      process_maybe_finish (p);
    }
  else if (!spawn_helper (p, false, &error))
    launch_failed (p, error.message);
  fb_rpc_error_clear (&error);
}

void
fb_rpc_process_launch (FbRpcProcess *p)
{
  FbRpcError error = { 0 };

  if (!fb_rpc_view_is_ready (p->view))
    launch_failed (p, fb_rpc_view_get_failure (p->view) != NULL ? fb_rpc_view_get_failure (p->view)
                                                                : "the session's view could not be made");
  else if (!spawn_helper (p, true, &error))
    launch_failed (p, error.message);
  fb_rpc_error_clear (&error);
}

JsonNode *
fb_rpc_process_start (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  FbRpcServer *server = conn->server;
  FbRpcSession *session = conn->session;
  g_autoptr (GPtrArray) argv = NULL;
  g_autoptr (FbPolicy) policy = NULL;
  g_autoptr (FbViewFdAccount) fd_account = NULL;
  g_auto (GStrv) envp = NULL;
  g_autofree char *cwd = NULL;
  const char *process_id, *arg0;
  bool tty, pipe_stdin;
  int sv[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 }, in[2] = { -1, -1 };
  int master = -1, slave = -1, slave_out = -1, slave_err = -1, master_in = -1, null_fd = -1, spec_fd = -1;
  bool claimed = false;
  FbRpcView *view = NULL;
  FbRpcProcess *p, *old;
  JsonObject *o;

  if (!fb_rpc_param_string (params, "processId", true, &process_id, error) ||
      !string_array (params, "argv", &argv, error) || !fb_rpc_param_path (params, "cwd", &cwd, error) ||
      !fb_rpc_param_bool (params, "tty", false, &tty, error) ||
      !fb_rpc_param_bool (params, "pipeStdin", false, &pipe_stdin, error) ||
      !fb_rpc_param_string (params, "arg0", false, &arg0, error))
    return NULL;
  if (strlen (process_id) > FB_RPC_PROCESS_ID_MAX)
    {
      /* it is in every record of the process, and in its notices */
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `processId` is %zu bytes long; at most %d",
                        strlen (process_id), FB_RPC_PROCESS_ID_MAX);
      return NULL;
    }
  if (argv->len == 0)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `argv` must not be empty");
      return NULL;
    }
  if (fb_rpc_session_log_refused (session, error))
    return NULL;
  if (arg0 != NULL && strcmp (arg0, g_ptr_array_index (argv, 0)) != 0)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS,
                        "invalid params: `arg0` (an argv[0] other than the program) is not supported by fusebox's "
                        "launcher; send null");
      return NULL;
    }
  old = g_hash_table_lookup (session->processes, process_id);
  if (old != NULL && !old->finished)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "process %s already exists", process_id);
      return NULL;
    }
  if (old != NULL)
    g_hash_table_remove (session->processes, process_id);
  unforget (session, process_id);
  if (g_hash_table_size (session->processes) >= FB_RPC_PROCESSES_MAX && !evict_finished (session))
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "too many processes in this session (limit %d)",
                        FB_RPC_PROCESSES_MAX);
      return NULL;
    }
  if (server->launch_helper == NULL)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "this server was started without its launch helper");
      return NULL;
    }
  envp = build_env (params, error);
  if (envp == NULL)
    return NULL;
  policy = fb_rpc_sandbox_build_policy (server, json_object_get_member (params, "sandbox"), error);
  if (policy == NULL)
    return NULL;
  /* an allowlist's way out: the proxy the server runs for the process */
  if (fb_policy_get_network (policy) == FB_POLICY_NETWORK_ALLOWLIST)
    envp = fb_proxy_environ (envp);
  /* The command, as data for the helper; its bounds are execve's. */
  {
    guint32 network = spec_network (policy);
    const char *why = NULL;
    int r;

    g_ptr_array_add (argv, NULL);
    r =
      fb_launch_spec_encode (network, (const char *const *)argv->pdata, (const char *const *)envp, cwd, &spec_fd, &why);
    if (r == -E2BIG || r == -EINVAL)
      {
        fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: %s", why);
        return NULL;
      }
    if (r < 0)
      {
        fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "%s: %s", why, g_strerror (-r));
        return NULL;
      }
  }
  /* One of its client's running processes, within the server's budget
   * (ipc-rpc-share.c): what it holds from here on is counted. */
  if (!fb_rpc_process_claim (session, error))
    goto fail;
  claimed = true;
  /* ... and its sandbox's floor of open files, kept for it until it ends,
   * in the view its session's processes under this policy share, or a
   * new one */
  if (!fb_rpc_process_fd_account (session, &fd_account, error))
    goto fail;
  view = fb_rpc_view_get (session, policy, error);
  if (view == NULL)
    goto fail;

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    goto sys_fail;
  if (tty)
    {
      if (openpty (&master, &slave, NULL, NULL, NULL) < 0)
        goto sys_fail;
      fcntl (master, F_SETFD, FD_CLOEXEC);
      fcntl (slave, F_SETFD, FD_CLOEXEC);
      /* the helper's stdout and stderr (the slave again) and our writer:
       * each made here, where a failure is the call's error (a -1 would
       * leave the helper the server's own stdout or stderr) */
      slave_out = fcntl (slave, F_DUPFD_CLOEXEC, 3);
      slave_err = fcntl (slave, F_DUPFD_CLOEXEC, 3);
      master_in = fcntl (master, F_DUPFD_CLOEXEC, 3);
      if (slave_out < 0 || slave_err < 0 || master_in < 0)
        goto sys_fail;
    }
  else
    {
      if (pipe2 (out, O_CLOEXEC) < 0 || pipe2 (err, O_CLOEXEC) < 0)
        goto sys_fail;
      if (pipe_stdin)
        {
          if (pipe2 (in, O_CLOEXEC) < 0)
            goto sys_fail;
        }
      else
        {
          null_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
          if (null_fd < 0)
            goto sys_fail;
        }
    }

  p = g_new0 (FbRpcProcess, 1);
  p->session = session;
  p->client = session->client;
  p->running_claimed = true;
  p->id = g_strdup (process_id);
  p->sock = g_steal_fd (&sv[0]);
  p->helper_sock = g_steal_fd (&sv[1]);
  p->retry_sock = -1;
  p->spec_fd = g_steal_fd (&spec_fd);
  p->policy = g_steal_pointer (&policy);
  p->view = g_steal_pointer (&view);
  p->fd_account = g_steal_pointer (&fd_account);
  /* Its records count against a share of the log's budget of its own too,
   * so that one process's flood stops that process, not the server. */
  if (server->log != NULL)
    p->log_share =
      fb_access_log_share_new (server->log, session->log_share, session->id, process_id, on_log_share_full, p);
  p->tee = fb_rpc_tee_sink_new (p->log_share != NULL ? fb_access_share_get_sink (p->log_share) : NULL);
  fb_rpc_tee_sink_set_session (p->tee, session->id);
  p->next_seq = 1;
  p->in_fd = -1;
  p->out.fd = p->err.fd = -1;
  g_queue_init (&p->chunks);
  g_queue_init (&p->write_id_order);
  p->write_ids = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  if (tty)
    {
      /* the helper's stdin, stdout and stderr: the slave, three times */
      p->child_fds[0] = slave;
      p->child_fds[1] = g_steal_fd (&slave_out);
      p->child_fds[2] = g_steal_fd (&slave_err);
      stream_open (&p->out, p, master, "pty");
      p->in_fd = g_steal_fd (&master_in);
      p->accepts_stdin = true;
    }
  else
    {
      p->child_fds[0] = pipe_stdin ? in[0] : null_fd;
      p->child_fds[1] = out[1];
      p->child_fds[2] = err[1];
      stream_open (&p->out, p, out[0], "stdout");
      stream_open (&p->err, p, err[0], "stderr");
      if (pipe_stdin)
        {
          p->in_fd = in[1];
          p->accepts_stdin = true;
        }
    }
  if (p->in_fd >= 0)
    g_unix_set_fd_nonblocking (p->in_fd, TRUE, NULL);
  g_hash_table_insert (session->processes, p->id, p);

  if (fb_rpc_view_is_ready (p->view))
    {
      /* a launch helper that can't start is the call's error, as ever */
      if (!spawn_helper (p, true, error))
        {
          g_hash_table_remove (session->processes, process_id); /* frees it */
          return NULL;
        }
    }
  else if (fb_rpc_view_get_failure (p->view) != NULL)
    fb_rpc_process_launch (p);
  else
    fb_rpc_view_wait (p->view, p);

  o = json_object_new ();
  json_object_set_string_member (o, "processId", process_id);
  /* Codex's ProcessSandboxType knows none, macosSeatbelt, linuxSeccomp and
   * windowsRestrictedToken, and its client fails a command whose answer has
   * any other value, after it ran.  linuxSeccomp is what it is here: a Linux
   * sandbox of namespaces and seccomp, for every process (a call without a
   * `sandbox` is confined by the server's policy, where Codex answers
   * "none").  It also keeps the client's checks for a sandbox denial
   * (non-zero exit with "Read-only file system" and the like) on. */
  json_object_set_string_member (o, "sandboxType", "linuxSeccomp");
  return fb_rpc_object_node (o);

sys_fail:
  fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "can't set up the process's channels: %s", g_strerror (errno));
fail:
  for (guint i = 0; i < 2; i++)
    {
      fb_fd_close (&sv[i]);
      fb_fd_close (&out[i]);
      fb_fd_close (&err[i]);
      fb_fd_close (&in[i]);
    }
  fb_fd_close (&master);
  fb_fd_close (&slave);
  fb_fd_close (&slave_out);
  fb_fd_close (&slave_err);
  fb_fd_close (&master_in);
  fb_fd_close (&null_fd);
  fb_fd_close (&spec_fd);
  if (claimed)
    fb_rpc_process_release (session->client);
  g_clear_pointer (&view, fb_rpc_view_unref);
  return NULL;
}

/* --- process/read, write, signal, terminate ---------------------------------- */

static FbRpcProcess *
lookup (FbRpcConn *conn, JsonObject *params, FbRpcError *error)
{
  const char *process_id;
  FbRpcProcess *p;
  Forgotten why;

  if (!fb_rpc_param_string (params, "processId", true, &process_id, error))
    return NULL;
  p = g_hash_table_lookup (conn->session->processes, process_id);
  why = GPOINTER_TO_INT (p == NULL ? g_hash_table_lookup (conn->session->forgotten, process_id) : NULL);
  if (why == FORGOTTEN_BUDGET)
    fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST,
                      "process %s has ended and its output is no longer kept: past the server's budget for output "
                      "kept for process/read (%" G_GSIZE_FORMAT " MiB, a quarter of it for the clients of one address, "
                      "%s), finished processes are forgotten, oldest first, of the session that holds the most; read "
                      "a process's output while it runs or as soon as it has ended",
                      process_id, conn->server->budget.retained >> 20, conn->client->key);
  else if (why == FORGOTTEN_COUNT)
    fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST,
                      "process %s has ended and its output is no longer kept: a session keeps %d processes, and a "
                      "new one took the place of its oldest finished one; read a process's output before starting "
                      "more",
                      process_id, FB_RPC_PROCESSES_MAX);
  else if (p == NULL)
    /* Codex's code and wording for it. */
    fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "unknown process id %s", process_id);
  return p;
}

static void
on_read_timeout (gpointer data)
{
  Deferred *d = data;

  d->timeout = 0;
  deferred_complete (d);
}

JsonNode *
fb_rpc_process_read (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  FbRpcProcess *p;
  guint64 after, max_bytes, wait_ms;
  bool have = false;
  Deferred *d;

  if (!fb_rpc_param_uint (params, "afterSeq", false, 0, &after, error) ||
      !fb_rpc_param_uint (params, "maxBytes", false, FB_RPC_PROCESS_RETAIN, &max_bytes, error) ||
      !fb_rpc_param_uint (params, "waitMs", false, 0, &wait_ms, error))
    return NULL;
  p = lookup (conn, params, error);
  if (p == NULL)
    return NULL;
  for (GList *l = p->chunks.tail; l != NULL && !have; l = l->prev)
    have = ((Chunk *)l->data)->seq > after;
  if (have || p->finished || wait_ms == 0)
    return read_response (p, after, max_bytes);
  /* A long poll: answered at the next output, at the end, or at waitMs. */
  d = g_new0 (Deferred, 1);
  d->conn = conn;
  d->proc = p;
  d->id = json_node_copy (id);
  d->after = after;
  d->max_bytes = max_bytes;
  d->timeout = g_timeout_add_once ((guint)MIN (wait_ms, (guint64)WAIT_MS_MAX), on_read_timeout, d);
  p->waiters = g_list_append (p->waiters, d);
  conn->deferred = g_list_append (conn->deferred, d);
  *ret_deferred = true;
  return NULL;
}

static gboolean on_stdin_writable (int fd, GIOCondition cond, gpointer user_data);

static void
flush_stdin (FbRpcProcess *p)
{
  while (p->in_fd >= 0 && p->in_pending != NULL && p->in_pending->len > 0)
    {
      ssize_t n = write (p->in_fd, p->in_pending->data, p->in_pending->len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        {
          if (p->in_watch == 0)
            p->in_watch = g_unix_fd_add (p->in_fd, G_IO_OUT | G_IO_ERR | G_IO_HUP, on_stdin_writable, p);
          return;
        }
      if (n < 0)
        {
          /* The command closed its stdin: what is pending is lost to it. */
          g_byte_array_set_size (p->in_pending, 0);
          return;
        }
      g_byte_array_remove_range (p->in_pending, 0, (guint)n);
    }
}

static gboolean
on_stdin_writable (int fd, GIOCondition cond, gpointer user_data)
{
  FbRpcProcess *p = user_data;

  p->in_watch = 0;
  flush_stdin (p);
  return G_SOURCE_REMOVE;
}

static JsonNode *
write_status (const char *status)
{
  JsonObject *o = json_object_new ();
  json_object_set_string_member (o, "status", status);
  return fb_rpc_object_node (o);
}

JsonNode *
fb_rpc_process_write (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  const char *process_id, *chunk, *write_id;
  g_autofree guint8 *data = NULL;
  gsize len;
  FbRpcProcess *p;

  if (!fb_rpc_param_string (params, "processId", true, &process_id, error) ||
      !fb_rpc_param_string (params, "chunk", true, &chunk, error) ||
      !fb_rpc_param_string (params, "writeId", true, &write_id, error))
    return NULL;
  if (!fb_rpc_base64_decode (chunk, &data, &len))
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `chunk` is not valid base64");
      return NULL;
    }
  p = g_hash_table_lookup (conn->session->processes, process_id);
  if (p == NULL)
    return write_status ("unknownProcess");
  /* Idempotent: a retried write (same writeId) is acknowledged, not
   * written twice. */
  if (g_hash_table_contains (p->write_ids, write_id))
    return write_status ("accepted");
  /* A process started without tty or pipeStdin has its stdin on
   * /dev/null: closed to writers, as Codex answers (its client then stops
   * writing; an error would fail the whole command). */
  if (!p->accepts_stdin || p->in_fd < 0)
    return write_status ("stdinClosed");
  if (p->in_pending == NULL)
    p->in_pending = g_byte_array_new ();
  if (p->in_pending->len + len > FB_STDIN_PENDING_MAX)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST,
                        "process %s has %u bytes of stdin it has not read yet (limit %d); retry later", process_id,
                        p->in_pending->len, FB_STDIN_PENDING_MAX);
      return NULL;
    }
  g_byte_array_append (p->in_pending, data, (guint)len);
  flush_stdin (p);
  g_hash_table_add (p->write_ids, g_strdup (write_id));
  g_queue_push_tail (&p->write_id_order, g_strdup (write_id));
  while (p->write_id_order.length > FB_WRITE_IDS_MAX)
    {
      g_autofree char *oldest = g_queue_pop_head (&p->write_id_order);
      g_hash_table_remove (p->write_ids, oldest);
    }
  return write_status ("accepted");
}

JsonNode *
fb_rpc_process_signal (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  const char *sig, *process_id;
  FbRpcProcess *p;

  if (!fb_rpc_param_string (params, "signal", true, &sig, error))
    return NULL;
  if (strcmp (sig, "interrupt") != 0)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: unknown signal `%s` (known: interrupt)",
                        sig);
      return NULL;
    }
  if (!fb_rpc_param_string (params, "processId", true, &process_id, error))
    return NULL;
  /* An unknown process is not an error, as in Codex (and as terminate):
   * there is nothing left to interrupt. */
  p = g_hash_table_lookup (conn->session->processes, process_id);
  if (p != NULL && !p->exit_known)
    send_signal (p, SIGINT);
  return fb_rpc_object_node (json_object_new ());
}

JsonNode *
fb_rpc_process_terminate (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  const char *process_id;
  FbRpcProcess *p;
  bool running;
  JsonObject *o;

  if (!fb_rpc_param_string (params, "processId", true, &process_id, error))
    return NULL;
  p = g_hash_table_lookup (conn->session->processes, process_id);
  running = p != NULL && !p->exit_known;
  if (running)
    send_signal (p, SIGKILL);
  o = json_object_new ();
  json_object_set_boolean_member (o, "running", running);
  return fb_rpc_object_node (o);
}
