/* fusebox — a session's views: its processes that run under one effective
 * policy share one.
 *
 * The processes of one session (and of a session that resumes with its
 * secret) whose effective policy is the same (the server's, narrowed by
 * the call's `sandbox`: the key is the narrowed policy's JSON text) run in
 * one FUSE view, and so share the kernel's dentry, attribute and page
 * caches, and their private HOME and /tmp, which outlive each process as
 * in a shell.  A process whose sandbox is narrower gets a view of its own,
 * as does every other session: its private directories are the session's
 * (RUN_DIR/sessions/ID, FbViewOptions.private_root), and so are those its
 * fs/... calls see (ipc-rpc-sandbox.c).
 *
 * A view is kept by a keeper (FbLauncherPlan.keep_view: the launch helper
 * makes the user and mount namespaces the view is mounted in, hands back
 * the FUSE fd and the two namespaces, and leaves); each process joins it
 * (FbLauncherPlan.join_*) with fresh namespaces of its own, its own pid 1,
 * lock-down and exit status.  So a process's end, even a SIGKILL, takes
 * only its own copy of the mount: the view lives on for the others.  Each
 * access is told apart by the caller's pid namespace (ipc-view-share.c):
 * the process's JOINED record hands it over before anything runs in it.
 *
 * Bounds: FB_RPC_SESSION_VIEWS_MAX views per session and budget.views in
 * the server (as many as running processes: each has its FUSE session's
 * workers and descriptors); past either, the least recently used
 * view without a running process is closed, else process/start is refused
 * with the bound.  A view without a running process is closed after the
 * idle timeout (FbRpcServerOptions.view_idle_ms).
 *
 * Records of no process (ipc-view-share.c: a caller whose pid namespace
 * can't be read, gone before we asked) go to the server's log through a
 * share of its budget of the view's own, as a process's go through the
 * process's: a flood of them (they once went straight to the log, and one
 * client's threads stopped the whole server at its budget) stops only this
 * view's processes, and the next process/start gets a new view.
 *
 * Loop thread only; the FUSE workers reach a view through its sinks. */
#include "ipc/ipc-rpc-private.h"
#include "ipc/ipc-process-launch.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef enum
{
  VIEW_STARTING, /* the keeper is making it */
  VIEW_READY,
  VIEW_FAILED, /* could not be made, or its FUSE session ended: no process joins it */
} ViewState;

/* References (in its box): its session's table, each process using it. */
struct FbRpcView
{
  FbRpcServer *server;
  FbRpcSession *session; /* NULL once closed */
  char *key;             /* the effective policy's JSON */
  FbPolicy *policy;
  ViewState state;
  char *failure;            /* VIEW_FAILED: why, for the processes that waited */
  FbRpcTeeSink *tee;        /* records of no process: the session's */
  FbAccessShare *log_share; /* theirs: a share of the log's budget, or NULL */
  FbViewShare *share;
  FbView *view;
  FbViewFdAccount *fd_account;
  FbRunFuse *serving;
  int ns[2];   /* the keeper's user and mount namespaces: what processes join */
  GPid keeper; /* the launch helper making it, until it is reaped */
  int sock;
  guint sock_watch;
  guint child_watch;
  GQueue waiting; /* FbRpcProcess* to launch once it is ready (or failed) */
  guint running;  /* processes using it */
  guint idle_id;
  GList link; /* in server->views, least recently used first */
};

static void view_close (FbRpcView *v);
static void fail (FbRpcView *v, const char *format, ...) G_GNUC_PRINTF (2, 3);

/* From the loop (ipc-log.c): the records of no process reached the
 * view's share.  No process joins it any more, and its processes are
 * stopped, as one process is at its own share; the session's other views,
 * and the other sessions, go on. */
static void
on_log_share_full (gpointer data)
{
  FbRpcView *v = data;
  guint64 max = fb_access_share_get_max_bytes (v->log_share);
  g_autofree char *why =
    g_strdup_printf ("the view's records of no process used up their share of the access log (%" G_GUINT64_FORMAT
                     " KiB, a quarter of the server's --log-max-size); its processes were stopped, and the next "
                     "process gets a new view",
                     max >> 10);

  if (v->session == NULL)
    return;
  fail (v, "%s", why);
  fb_rpc_process_stop_view (v->session, v, why);
}

static void
view_clear (FbRpcView *v)
{
  g_assert (v->session == NULL);
  g_free (v->key);
  g_free (v->failure);
}

FB_DEFINE_REF_UNREF (fb_rpc_view, FbRpcView, view_clear)

bool
fb_rpc_view_is_ready (FbRpcView *v)
{
  return v->state == VIEW_READY;
}

const char *
fb_rpc_view_get_failure (FbRpcView *v)
{
  return v->state == VIEW_FAILED ? v->failure : NULL;
}

const int *
fb_rpc_view_get_namespaces (FbRpcView *v)
{
  return v->ns;
}

/* The processes that waited: ready or failed, each launches or says why. */
static void
wake_waiting (FbRpcView *v)
{
  FbRpcProcess *p;

  while ((p = g_queue_pop_head (&v->waiting)) != NULL)
    fb_rpc_process_launch (p);
}

static void
fail (FbRpcView *v, const char *format, ...)
{
  va_list ap;

  if (v->state == VIEW_FAILED)
    return;
  va_start (ap, format);
  g_free (v->failure);
  v->failure = g_strdup_vprintf (format, ap);
  va_end (ap);
  g_debug ("a view of session %s failed: %s", v->session != NULL ? v->session->id : "(closed)", v->failure);
  v->state = VIEW_FAILED;
  /* nor a ready sandbox, which is of no use now */
  fb_rpc_ready_drop_view (v->server, v);
  /* no process joins it from now on: the next gets a new one */
  if (v->session != NULL && g_hash_table_lookup (v->session->views, v->key) == v)
    g_hash_table_steal (v->session->views, v->key);
  wake_waiting (v);
}

/* --- idle and bounds ---------------------------------------------------------- */

static gboolean
on_idle_timeout (gpointer data)
{
  FbRpcView *v = data;

  v->idle_id = 0;
  g_debug ("closing an idle view of session %s", v->session->id);
  view_close (v);
  return G_SOURCE_REMOVE;
}

void
fb_rpc_view_use (FbRpcView *v)
{
  FbRpcServer *server = v->server;

  v->running++;
  g_clear_handle_id (&v->idle_id, g_source_remove);
  /* the most recently used last */
  if (v->link.data != NULL)
    {
      g_queue_unlink (&server->views, &v->link);
      g_queue_push_tail_link (&server->views, &v->link);
    }
}

void
fb_rpc_view_release (FbRpcView *v)
{
  g_return_if_fail (v->running > 0);
  if (--v->running > 0 || v->session == NULL)
    return;
  /* no process runs in it: the keeper refreshes what they listed now */
  if (v->serving != NULL)
    fb_fuse_warm_flush (fb_run_fuse_get_fuse (v->serving));
  if (v->state == VIEW_FAILED)
    view_close (v);
  else if (v->idle_id == 0)
    v->idle_id = g_timeout_add (v->server->view_idle_ms, on_idle_timeout, v);
}

/* Close the least recently used view that no process runs in, of SESSION
 * (or of any session: NULL); false when every one has a process. */
static bool
close_idle (FbRpcServer *server, FbRpcSession *session)
{
  for (GList *l = server->views.head; l != NULL; l = l->next)
    {
      FbRpcView *v = l->data;

      if (v->running == 0 && v->waiting.length == 0 && (session == NULL || v->session == session))
        {
          view_close (v);
          return true;
        }
    }
  return false;
}

/* --- the keeper ----------------------------------------------------------------- */

static void
reap_keeper (GPid pid, int status, gpointer data)
{
  FbRpcView *v = data;

  v->child_watch = 0;
  v->keeper = 0;
  g_spawn_close_pid (pid);
  if (v->state == VIEW_STARTING)
    fail (v, "the launch helper ended before the view was made (exit status %d)",
          WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status));
  fb_rpc_view_unref (v);
}

static void
serving_ended (int result, gpointer data)
{
  FbRpcView *v = data;

  /* ended under its processes (closed, it ends as it should) */
  if (v->session != NULL)
    fail (v, "the view's FUSE session ended (%s)", result < 0 ? g_strerror (-result) : "the kernel ended it");
}

/* MOUNTED: the view, served at once (the keeper's mount waits for INIT). */
static void
serve (FbRpcView *v, int fd)
{
  FbRpcServer *server = v->server;
  g_autofree char *private_root = NULL;
  FbViewOptions vo;
  FbFuseOptions fo;
  FbFuse *fuse = NULL;
  int r;

  if (server->run_dir != NULL)
    private_root = fb_rpc_session_private_root (v->session);
  fb_view_options_init (&vo);
  vo.sink = fb_view_share_get_sink (v->share);
  vo.owners = fb_view_share_get_owners (v->share);
  vo.log_level = server->log_level;
  vo.hidden_paths = (const char *const *)server->hidden_paths;
  vo.fd_account = v->fd_account;
  vo.private_root = private_root;
  vo.private_anchor_fd = server->run_dir_fd;
  vo.private_anchor = server->run_dir;
  r = fb_view_new (v->policy, &vo, &v->view);
  if (r == 0)
    {
      fb_fuse_options_init (&fo);
      fo.fsname = "fusebox";
      r = fb_fuse_new (v->view, &fo, &fuse);
    }
  if (r == 0)
    {
      v->serving = fb_run_fuse_new (fuse, server->log);
      r = fb_fuse_serve_fd (fuse, fd);
      fd = -1;
    }
  if (r == 0)
    r = fb_run_fuse_start (v->serving, serving_ended, v);
  if (fd >= 0)
    close (fd);
  if (r < 0)
    fail (v, "can't serve the view: %s", g_strerror (-r));
}

static void
stop_keeper_channel (FbRpcView *v)
{
  g_clear_handle_id (&v->sock_watch, g_source_remove);
  fb_fd_close (&v->sock);
}

static gboolean
on_keeper (int fd, GIOCondition cond, gpointer data)
{
  FbRpcView *v = data;

  for (;;)
    {
      FbLaunchRecord rec;
      int fds[2];
      int r = fb_launch_record_recv (fd, &rec, fds);

      if (r == -EAGAIN)
        return G_SOURCE_CONTINUE;
      if (r <= 0)
        {
          /* the helper is gone; reap_keeper says so if it was early */
          v->sock_watch = 0;
          stop_keeper_channel (v);
          return G_SOURCE_REMOVE;
        }
      if (rec.type == FB_LAUNCH_MOUNTED && fds[0] >= 0 && fds[1] < 0 && v->view == NULL)
        {
          serve (v, fds[0]);
          continue;
        }
      if (rec.type == FB_LAUNCH_VIEW_REFRESH && fds[0] >= 0 && fds[1] >= 0 && v->serving != NULL &&
          v->state == VIEW_STARTING)
        {
          /* the keeper stays as the view's refresher: the next process
           * finds the directories this one listed warm (fs/fs-fuse-warm.c);
           * without it only slower */
          int warm = fb_fuse_keep_warm (fb_run_fuse_get_fuse (v->serving), fds[0], fds[1]);
          if (warm < 0)
            g_warning ("a view of the server is not kept warm: %s", g_strerror (-warm));
          continue;
        }
      if (rec.type == FB_LAUNCH_KEPT && fds[0] >= 0 && fds[1] >= 0 && v->serving != NULL && v->state == VIEW_STARTING)
        {
          v->ns[0] = fds[0];
          v->ns[1] = fds[1];
          v->state = VIEW_READY;
          wake_waiting (v);
          continue;
        }
      for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
          close (fds[i]);
      if (rec.type == FB_LAUNCH_FAILED)
        fail (v, "%s", rec.text);
    }
}

/* The keeper, through the launch helper (KEEP): its argv, environment and
 * working directory are the server's, as for any process. */
static bool
start_keeper (FbRpcView *v, FbRpcError *error)
{
  FbRpcServer *server = v->server;
  g_autoptr (GError) gerr = NULL;
  FbLaunchRecord rec = { .type = FB_LAUNCH_KEEP };
  int sv[2], null_fd;
  bool ok;

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "can't make a view: socketpair: %s", g_strerror (errno));
      return false;
    }
  null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
  v->keeper = fb_launch_helper_spawn (server->launch_helper, null_fd, null_fd, -1, sv[1], &gerr);
  ok = v->keeper != 0;
  if (null_fd >= 0)
    close (null_fd);
  close (sv[1]);
  if (ok)
    ok = send (sv[0], &rec, sizeof rec, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof rec;
  if (!ok)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "can't start the launch helper %s: %s", server->launch_helper,
                        gerr != NULL ? gerr->message : g_strerror (errno));
      if (v->keeper != 0)
        {
          kill (v->keeper, SIGKILL);
          while (waitpid (v->keeper, NULL, 0) < 0 && errno == EINTR)
            ;
          g_spawn_close_pid (v->keeper);
          v->keeper = 0;
        }
      close (sv[0]);
      return false;
    }
  v->sock = sv[0];
  v->sock_watch = g_unix_fd_add (v->sock, G_IO_IN | G_IO_HUP | G_IO_ERR, on_keeper, v);
  v->child_watch = g_child_watch_add (v->keeper, reap_keeper, fb_rpc_view_ref (v));
  return true;
}

/* Its share of the log: its notice (if it was reached) written, no
 * callback any more. */
static void
view_close_share (FbRpcView *v)
{
  if (v->log_share == NULL)
    return;
  fb_access_share_close (v->log_share);
  g_clear_pointer (&v->log_share, fb_access_share_unref);
}

/* --- a session's views ---------------------------------------------------------- */

char *
fb_rpc_session_private_root (FbRpcSession *session)
{
  return g_build_filename (session->server->run_dir, "sessions", session->id, NULL);
}

FbRpcView *
fb_rpc_view_get (FbRpcSession *session, FbPolicy *policy, FbRpcError *error)
{
  FbRpcServer *server = session->server;
  g_autofree char *key = fb_policy_to_json (policy);
  FbRpcView *v;

  if (key == NULL)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "the process's policy could not be written out");
      return NULL;
    }
  v = g_hash_table_lookup (session->views, key);
  if (v != NULL)
    return fb_rpc_view_ref (v);
  if (server->launch_helper == NULL)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "this server was started without its launch helper");
      return NULL;
    }
  /* Its bounds: the session's, then the server's; room is made by closing
   * a view no process runs in. */
  if (g_hash_table_size (session->views) >= FB_RPC_SESSION_VIEWS_MAX && !close_idle (server, session))
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST,
                        "this session runs processes in %u views, its limit (a view per distinct sandbox): wait "
                        "for some to end, or start this one under a sandbox already in use",
                        FB_RPC_SESSION_VIEWS_MAX);
      return NULL;
    }
  if (server->views.length >= server->budget.views && !close_idle (server, NULL))
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL,
                        "the server runs processes in %u views, its limit (each keeps open files for its "
                        "sandboxes); retry when some processes have ended",
                        server->budget.views);
      return NULL;
    }
  v = g_atomic_rc_box_new0 (FbRpcView); /* the session's table's reference */
  v->server = server;
  v->session = session;
  v->key = g_steal_pointer (&key);
  v->policy = fb_policy_ref (policy);
  v->ns[0] = v->ns[1] = -1;
  v->sock = -1;
  g_queue_init (&v->waiting);
  v->log_share = server->log != NULL
                   ? fb_access_log_share_new (server->log, session->log_share, session->id, NULL, on_log_share_full, v)
                   : NULL;
  v->tee = fb_rpc_tee_sink_new (v->log_share != NULL ? fb_access_share_get_sink (v->log_share) : NULL);
  fb_rpc_tee_sink_set_session (v->tee, session->id);
  v->share = fb_view_share_new (fb_rpc_tee_sink_get (v->tee));
  /* Its own account of open files, for what no process of it opens (each
   * process has its own, with its floor: ipc-process.c).  No floor of its
   * own: a keeper runs nothing. */
  if (fb_view_fd_account_new (session->client->key, false, &v->fd_account) < 0)
    fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "can't make a view: no account of open files");
  if (v->fd_account == NULL || !start_keeper (v, error))
    {
      v->session = NULL;
      fb_view_share_free (v->share);
      fb_rpc_tee_sink_free (v->tee);
      view_close_share (v);
      g_clear_pointer (&v->fd_account, fb_view_fd_account_unref);
      fb_policy_unref (v->policy);
      fb_rpc_view_unref (v);
      return NULL;
    }
  v->link.data = v;
  g_queue_push_tail_link (&server->views, &v->link);
  g_hash_table_insert (session->views, v->key, v);
  return fb_rpc_view_ref (v);
}

void
fb_rpc_view_wait (FbRpcView *v, FbRpcProcess *p)
{
  g_queue_push_tail (&v->waiting, p);
}

void
fb_rpc_view_unwait (FbRpcView *v, FbRpcProcess *p)
{
  g_queue_remove (&v->waiting, p);
}

FbViewMember *
fb_rpc_view_add_member (FbRpcView *v, int pidns_fd, const char *process_id, FbViewFdAccount *fd_account,
                        FbAccessSink *sink, GDestroyNotify destroy, gpointer destroy_data, GError **error)
{
  if (v->state != VIEW_READY)
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID, "%s",
                   v->failure != NULL ? v->failure : "the view is closed");
      return NULL;
    }
  return fb_view_share_add (v->share, pidns_fd, process_id, fd_account, sink, destroy, destroy_data, error);
}

/* Out of its session and of the server's list; what makes it (the
 * namespaces that hold its mount, its FUSE session) ends now.  Its
 * processes (none but on a failure or the session's end) hold their
 * references. */
static void
view_close (FbRpcView *v)
{
  FbRpcServer *server = v->server;
  FbRpcSession *session = v->session;

  if (session == NULL)
    return;
  if (g_hash_table_lookup (session->views, v->key) == v)
    g_hash_table_steal (session->views, v->key);
  v->session = NULL;
  if (v->link.data != NULL)
    g_queue_unlink (&server->views, &v->link);
  v->link.data = NULL;
  g_clear_handle_id (&v->idle_id, g_source_remove);
  if (v->state != VIEW_FAILED)
    {
      v->state = VIEW_FAILED;
      v->failure = g_strdup ("the view was closed");
    }
  wake_waiting (v);
  /* a ready sandbox holds its mount namespace: killed and reaped first */
  fb_rpc_ready_drop_view (server, v);
  stop_keeper_channel (v);
  if (v->keeper != 0)
    kill (v->keeper, SIGKILL); /* reaped by its watch */
  /* Its mount namespace goes, and with the last mount of the view the
   * kernel ends the FUSE connection; abort it anyway, and wait. */
  for (int i = 0; i < 2; i++)
    if (v->ns[i] >= 0)
      close (v->ns[i]);
  v->ns[0] = v->ns[1] = -1;
  if (v->serving != NULL)
    fb_run_fuse_end (v->serving, 0);
  g_clear_pointer (&v->serving, fb_run_fuse_free);
  g_clear_pointer (&v->view, fb_view_unref);
  g_clear_pointer (&v->share, fb_view_share_free);
  g_clear_pointer (&v->tee, fb_rpc_tee_sink_free);
  view_close_share (v);
  g_clear_pointer (&v->fd_account, fb_view_fd_account_unref);
  g_clear_pointer (&v->policy, fb_policy_unref);
  fb_rpc_view_unref (v); /* its session's */
}

void
fb_rpc_session_drop_ready (FbRpcSession *session)
{
  for (GList *l = session->server->views.head; l != NULL; l = l->next)
    if (((FbRpcView *)l->data)->session == session)
      fb_rpc_ready_drop_view (session->server, l->data);
}

void
fb_rpc_session_close_views (FbRpcSession *session)
{
  /* a failed one is no longer in the session's table, but still open */
  for (GList *l = session->server->views.head; l != NULL;)
    {
      FbRpcView *v = l->data;
      l = l->next;
      if (v->session == session)
        view_close (v);
    }
}
