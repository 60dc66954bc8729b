/* fusebox — the ready sandbox: the next process's sandbox in the view a
 * session last used, made before its process/start.
 *
 * A process still gets fresh namespaces, a pid 1 and a lock-down of its
 * own; making them is most of its start.  So READY_DELAY_MS after a
 * process in a view ended, unless another process started meanwhile (not
 * while one starts or runs: making a sandbox would compete with it), the
 * server starts a launch helper with a late
 * spec for that view (ipc/ipc-process-launch.h: FB_LAUNCH_SPEC_LATE, its
 * network mode and the helper's ids): it joins the view, hands back its
 * pid namespace (JOINED, answered GO at once), locks the sandbox down and
 * says READY.  The next process/start in that view with that network mode
 * takes it (ipc-process.c, ready_launch): its member for that pid
 * namespace first, then the proxy's socket, then COMMAND with its spec and
 * stdio.  Every other process/start goes on as before (the spare helper).
 *
 * At most one per server, for the view last used; a process/start in
 * another view, or in its view before it said READY, kills it (rather
 * than let it be finished beside that process's start, which it would
 * slow), and so does its session's client leaving.  Before a command takes it the sandbox is no process's:
 * what its pid 1 does in the view (its mounts, its pivot_root) is the
 * view's records of no process, and no client's data reaches it.  It
 * holds the view's mount namespace, so it never outlives the view: the
 * view's end (idle, eviction, failure, its session's end) kills and reaps
 * it (fb_rpc_ready_drop_view) without counting as a process there, and so
 * never delays that end; so does the server's (fb_rpc_ready_stop).  One
 * that died, failed, or said anything out of turn is dropped, and a
 * process/start then makes its sandbox as before.
 *
 * Loop thread only. */
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

/* How long after a process's end its view's ready sandbox is started: a
 * client that starts its next process at once (a script, not an agent's
 * turn) would find it half made, and its start slowed by it. */
#define READY_DELAY_MS 50

struct FbRpcReady
{
  FbRpcView *view; /* a reference */
  guint32 network;
  GPid pid; /* the launch helper */
  int sock;
  guint sock_watch;
  guint child_watch;
  int pidns;    /* JOINED's */
  int proxy_fd; /* PROXY's (an allowlist) */
  bool ready;   /* READY came */
};

static void
ready_free (FbRpcReady *r)
{
  if (r == NULL)
    return;
  g_clear_handle_id (&r->sock_watch, g_source_remove);
  g_clear_handle_id (&r->child_watch, g_source_remove);
  if (r->pid != 0)
    {
      /* its outer child dies with it (PR_SET_PDEATHSIG), and pid 1 with
       * the outer child: none of them holds the view's namespaces after */
      kill (r->pid, SIGKILL);
      while (waitpid (r->pid, NULL, 0) < 0 && errno == EINTR)
        ;
      g_spawn_close_pid (r->pid);
    }
  fb_fd_close (&r->sock);
  fb_fd_close (&r->pidns);
  fb_fd_close (&r->proxy_fd);
  g_clear_pointer (&r->view, fb_rpc_view_unref);
  g_free (r);
}

static void
drop (FbRpcServer *server)
{
  g_clear_pointer (&server->ready_sandbox, ready_free);
}

static void
on_ready_exit (GPid pid, int status, gpointer data)
{
  FbRpcServer *server = data;

  (void)status;
  g_debug ("the ready sandbox's launch helper %d ended before a process took it", (int)pid);
  server->ready_sandbox->child_watch = 0;
  server->ready_sandbox->pid = 0;
  g_spawn_close_pid (pid);
  drop (server);
}

static gboolean
on_ready_record (int fd, GIOCondition cond, gpointer data)
{
  FbRpcServer *server = data;
  FbRpcReady *r = server->ready_sandbox;

  (void)cond;
  for (;;)
    {
      FbLaunchRecord rec;
      int fds[2];
      int n = fb_launch_record_recv (fd, &rec, fds);
      bool bad = false;

      if (n == -EAGAIN)
        return G_SOURCE_CONTINUE;
      if (n <= 0)
        bad = true;
      else if (rec.type == FB_LAUNCH_PROXY && fds[0] >= 0 && r->proxy_fd < 0 && r->pidns < 0)
        r->proxy_fd = g_steal_fd (&fds[0]);
      else if (rec.type == FB_LAUNCH_JOINED && fds[0] >= 0 && r->pidns < 0)
        {
          FbLaunchRecord go;

          r->pidns = g_steal_fd (&fds[0]);
          /* no process's yet: what its pid 1 does in the view until one
           * takes it is the view's records of no process (see the top) */
          memset (&go, 0, sizeof go);
          go.type = FB_LAUNCH_GO;
          bad = send (fd, &go, sizeof go, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof go;
        }
      else if (rec.type == FB_LAUNCH_READY && r->pidns >= 0 && !r->ready)
        r->ready = true;
      else
        bad = true; /* FAILED, EXITED, or out of turn: of no use */
      for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
          close (fds[i]);
      if (bad)
        {
          if (n > 0 && rec.type == FB_LAUNCH_FAILED)
            g_debug ("the ready sandbox could not be made: %s", rec.text);
          r->sock_watch = 0;
          drop (server);
          return G_SOURCE_REMOVE;
        }
    }
}

/* A launch helper told to make a sandbox in VIEW with no command, or NULL. */
static FbRpcReady *
ready_start (FbRpcServer *server, FbRpcView *view, guint32 network)
{
  g_autoptr (GError) gerr = NULL;
  int sock = -1;
  GPid pid = fb_launch_helper_spawn_late (server->launch_helper, network, FB_LAUNCH_ID_CALLER, FB_LAUNCH_ID_CALLER,
                                          fb_rpc_view_get_namespaces (view), &sock, &gerr);
  FbRpcReady *r;

  if (pid == 0)
    {
      g_debug ("no ready sandbox: %s", gerr->message);
      return NULL;
    }
  r = g_new0 (FbRpcReady, 1);
  r->pid = pid;
  r->sock = sock;
  r->pidns = r->proxy_fd = -1;
  r->network = network;
  r->view = fb_rpc_view_ref (view);
  r->sock_watch = g_unix_fd_add (r->sock, G_IO_IN | G_IO_HUP | G_IO_ERR, on_ready_record, server);
  r->child_watch = g_child_watch_add (r->pid, on_ready_exit, server);
  return r;
}

static gboolean
ready_timeout (gpointer data)
{
  FbRpcServer *server = data;
  FbRpcView *view = g_steal_pointer (&server->ready_sandbox_next);

  server->ready_sandbox_idle = 0;
  if (view != NULL && fb_rpc_view_is_ready (view) && server->launch_helper != NULL &&
      (server->ready_sandbox == NULL || server->ready_sandbox->view != view ||
       server->ready_sandbox->network != server->ready_sandbox_network))
    {
      drop (server);
      server->ready_sandbox = ready_start (server, view, server->ready_sandbox_network);
    }
  g_clear_pointer (&view, fb_rpc_view_unref);
  return G_SOURCE_REMOVE;
}

void
fb_rpc_ready_schedule (FbRpcServer *server, FbRpcView *view, guint32 network)
{
  g_clear_pointer (&server->ready_sandbox_next, fb_rpc_view_unref);
  server->ready_sandbox_next = fb_rpc_view_ref (view);
  server->ready_sandbox_network = network;
  g_clear_handle_id (&server->ready_sandbox_idle, g_source_remove);
  server->ready_sandbox_idle = g_timeout_add_full (G_PRIORITY_LOW, READY_DELAY_MS, ready_timeout, server, NULL);
}

bool
fb_rpc_ready_take (FbRpcServer *server, FbRpcView *view, guint32 network, GPid *ret_pid, int *ret_sock, int *ret_pidns,
                   int *ret_proxy_fd)
{
  FbRpcReady *r = server->ready_sandbox;

  /* none is made while a process starts (its end asks again) */
  g_clear_handle_id (&server->ready_sandbox_idle, g_source_remove);
  g_clear_pointer (&server->ready_sandbox_next, fb_rpc_view_unref);
  if (r != NULL && (r->view != view || r->network != network || !r->ready))
    {
      /* made for a view no longer the last used, or not made yet: killed
       * now, rather than finished beside this process's start, which it
       * would slow */
      drop (server);
      return false;
    }
  if (r == NULL || !fb_rpc_view_is_ready (view))
    return false;
  /* one that died unseen (its watch not yet run) is of no use */
  if (waitpid (r->pid, NULL, WNOHANG) != 0)
    {
      g_spawn_close_pid (r->pid);
      r->pid = 0;
      drop (server);
      return false;
    }
  g_clear_handle_id (&r->sock_watch, g_source_remove);
  g_clear_handle_id (&r->child_watch, g_source_remove);
  *ret_pid = r->pid;
  r->pid = 0;
  *ret_sock = g_steal_fd (&r->sock);
  *ret_pidns = g_steal_fd (&r->pidns);
  *ret_proxy_fd = g_steal_fd (&r->proxy_fd);
  drop (server);
  return true;
}

void
fb_rpc_ready_drop_view (FbRpcServer *server, FbRpcView *view)
{
  if (server->ready_sandbox_next == view)
    g_clear_pointer (&server->ready_sandbox_next, fb_rpc_view_unref);
  if (server->ready_sandbox != NULL && server->ready_sandbox->view == view)
    drop (server);
}

void
fb_rpc_ready_stop (FbRpcServer *server)
{
  g_clear_handle_id (&server->ready_sandbox_idle, g_source_remove);
  g_clear_pointer (&server->ready_sandbox_next, fb_rpc_view_unref);
  drop (server);
}
