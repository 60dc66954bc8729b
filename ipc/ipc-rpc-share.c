/* fusebox — fair shares of what `fusebox serve` holds for its clients.
 *
 * Threat model: one client (or a runaway harness) opening connections,
 * sessions, fs/open handles and processes until the server has none left
 * for the others: 78 connections of 256 handles each took every descriptor
 * of a 20,000 limit, and the other clients' fs/readFile and process/start
 * failed with "Too many open files"; one client could hold all 4,096
 * sessions or 1,024 connections; output kept for process/read was bounded
 * per process only.
 *
 * So each of these has a server-wide budget, and each client a share of it:
 *   - connections: FB_RPC_CLIENTS_MAX, at most a quarter of the descriptors
 *     the views leave (fb_view_fd_budget's reserve: one descriptor each);
 *   - sessions: FB_RPC_SESSIONS_MAX (no descriptor of their own);
 *   - fs/open handles: FB_RPC_HANDLES_TOTAL_MAX, at most half of what the
 *     views may hold open (each handle is a file open in a view; the view
 *     shares the rest between sessions and sandboxes, fs/fs-view-fd.c);
 *     and FB_RPC_HANDLES_MAX per connection;
 *   - running processes: FB_RPC_PROCESSES_TOTAL_MAX, at most what half the
 *     reserve allows at FB_RPC_PROCESS_FDS descriptors each (the /dev/fuse
 *     of each FUSE worker, pipes, the helper's socket and pidfd: measured
 *     about 11 outside any view), and at most as many as the views keep
 *     floors of open files for (fs.h, Descriptors: FB_VIEW_FD_FLOOR each,
 *     enough to load a command, in at most half of the files' budget);
 *     and FB_RPC_PROCESSES_MAX per session.  Each process's sandbox has
 *     an account of open files of its own, with its floor, in its
 *     client's part (fb_rpc_process_fd_account): a process started is one
 *     that can load its libraries, whatever the others hold, and a limit
 *     lowered since the start refuses process/start rather than that;
 *   - network proxy connections (ipc-proxy.c, FB_PROXY_CONN_FDS
 *     descriptors each in the server: two sockets and a pipe each way):
 *     FB_RPC_PROCESS_TUNNELS of the reserve shared between
 *     the running processes, at least FB_RPC_PROCESS_TUNNELS_MIN each; a
 *     process's proxy accepts no more past its part (the rest wait in the
 *     kernel's backlog): 2 clients' processes holding 256 tunnels each
 *     took every descriptor of a 2,048 limit, and a third client's
 *     fs/readFile failed;
 *   - retained output (process/read): FB_RPC_PROCESS_RETAIN per process,
 *     FB_RPC_RETAIN_TOTAL_MAX in all (or `serve --output-max`); past the
 *     budget or a client's share, finished processes are forgotten: the
 *     oldest of the session holding the most in the client holding the
 *     most (ipc-process.c).  Running ones are bounded by their number.
 * A client is a peer address (ws: the IP; a unix peer: its pid; stdio: the
 * parent): what is known before the handshake, and what a remote peer
 * can't multiply.  It holds at most 1/FB_RPC_CLIENT_SHARE of each budget,
 * so the rest stays for the others: one at its share gets an error naming
 * the limit and what to do, while another is served.  On loopback every
 * local client has the same address, 127.0.0.1, so they share one share:
 * retained output is shared between their sessions (the one holding the
 * most loses first), and for the rest the per-connection and per-session
 * bounds are what keeps one local client from another's room (a local
 * client may take the local share of connections, handles and running
 * processes: docs/security.md says what to do).
 *
 * The budgets are computed once, when the server starts.  Loop thread, but
 * the handle counts (fs/open runs on workers): atomics. */
#include "ipc/ipc-rpc-private.h"
#include "ipc/ipc-proxy.h"

#include <string.h>

/* Descriptors a running process costs the server outside any view. */
#define FB_RPC_PROCESS_FDS 16
/* The part of the reserve for the processes' proxy connections (1/N), and
 * each process's least. */
#define FB_RPC_PROCESS_TUNNELS 8
#define FB_RPC_PROCESS_TUNNELS_MIN 4

void
fb_rpc_server_budget_init (FbRpcServer *server)
{
  FbViewFdBudget fd;
  FbRpcBudget *b = &server->budget;

  fb_view_fd_budget (&fd);
  b->conns = CLAMP (fd.reserve / 4, 8u, (guint)FB_RPC_CLIENTS_MAX);
  b->processes = CLAMP (fd.reserve / 2 / FB_RPC_PROCESS_FDS, 4u, (guint)FB_RPC_PROCESSES_TOTAL_MAX);
  /* no more running than have their floor of open files kept (at least
   * one: with none kept, process/start says why) */
  b->processes = MAX (MIN (b->processes, fb_view_fd_set_floors (b->processes)), 1u);
  b->tunnels = CLAMP (fd.reserve / FB_RPC_PROCESS_TUNNELS / FB_PROXY_CONN_FDS / b->processes,
                      (guint)FB_RPC_PROCESS_TUNNELS_MIN, (guint)FB_PROXY_MAX_CONNECTIONS);
  fb_view_fd_budget (&fd);
  b->handles = CLAMP (fd.shared / 2, 16u, (guint)FB_RPC_HANDLES_TOTAL_MAX);
  b->sessions = FB_RPC_SESSIONS_MAX;
  /* the operator's (serve --output-max), else the default */
  if (b->retained == 0)
    b->retained = FB_RPC_RETAIN_TOTAL_MAX;
  g_debug ("budgets for RLIMIT_NOFILE %" G_GUINT64_FORMAT ": %u connections, %u sessions, %u fs/open handles, "
           "%u running processes (%u files kept for each, %u proxy connections), %" G_GSIZE_FORMAT
           " bytes of retained output; a client's "
           "share: 1/%d",
           fd.limit, b->conns, b->sessions, b->handles, b->processes, fd.floor, b->tunnels, b->retained,
           FB_RPC_CLIENT_SHARE);
}

guint
fb_rpc_share (guint total)
{
  return MAX (total / FB_RPC_CLIENT_SHARE, 1u);
}

FbRpcClient *
fb_rpc_client_get (FbRpcServer *server, const char *key)
{
  FbRpcClient *c = g_hash_table_lookup (server->clients, key);

  if (c == NULL)
    {
      c = g_new0 (FbRpcClient, 1);
      c->server = server;
      c->key = g_strdup (key);
      g_hash_table_insert (server->clients, c->key, c);
    }
  c->refs++;
  return c;
}

void
fb_rpc_client_unref (FbRpcClient *c)
{
  if (c == NULL || --c->refs > 0)
    return;
  g_hash_table_remove (c->server->clients, c->key);
  g_free (c->key);
  g_free (c);
}

bool
fb_rpc_client_may_connect (FbRpcServer *server, const char *key, char **ret_why)
{
  FbRpcClient *c = g_hash_table_lookup (server->clients, key);
  guint share = fb_rpc_share (server->budget.conns);

  if (server->n_conns >= server->budget.conns)
    {
      *ret_why = g_strdup_printf ("the server has %u connections open, its limit (for its descriptors); "
                                  "retry when some have closed",
                                  server->n_conns);
      return false;
    }
  if (c != NULL && c->n_conns >= share)
    {
      *ret_why = g_strdup_printf ("%s has %u connections open, its share of the server's %u; close some "
                                  "(one connection carries all of a session's calls) and retry",
                                  key, c->n_conns, server->budget.conns);
      return false;
    }
  return true;
}

bool
fb_rpc_handle_claim (FbRpcConn *conn, FbRpcError *error)
{
  FbRpcServer *server = conn->server;
  FbRpcClient *c = conn->client;
  guint share = fb_rpc_share (server->budget.handles);

  if ((guint)g_atomic_int_add (&c->n_handles, 1) >= share)
    {
      g_atomic_int_add (&c->n_handles, -1);
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST,
                        "too many open file handles for %s (%u, its share of the server's %u); close some with "
                        "fs/close",
                        c->key, share, server->budget.handles);
      return false;
    }
  if ((guint)g_atomic_int_add (&server->n_handles, 1) >= server->budget.handles)
    {
      g_atomic_int_add (&server->n_handles, -1);
      g_atomic_int_add (&c->n_handles, -1);
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL,
                        "the server holds %u open file handles, its limit (for its descriptors); close some with "
                        "fs/close or retry later",
                        server->budget.handles);
      return false;
    }
  return true;
}

void
fb_rpc_handle_release (FbRpcClient *client)
{
  g_atomic_int_add (&client->n_handles, -1);
  g_atomic_int_add (&client->server->n_handles, -1);
}

bool
fb_rpc_process_claim (FbRpcSession *session, FbRpcError *error)
{
  FbRpcServer *server = session->server;
  FbRpcClient *c = session->client;
  guint share = fb_rpc_share (server->budget.processes);

  if (c->n_processes >= share)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST,
                        "too many running processes for %s (%u, its share of the server's %u); wait for some to "
                        "end, or end them with process/terminate",
                        c->key, c->n_processes, server->budget.processes);
      return false;
    }
  if (server->n_processes >= server->budget.processes)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL,
                        "the server runs %u processes, its limit (for its descriptors); retry when some have ended",
                        server->n_processes);
      return false;
    }
  c->n_processes++;
  server->n_processes++;
  return true;
}

bool
fb_rpc_process_fd_account (FbRpcSession *session, FbViewFdAccount **ret_account, FbRpcError *error)
{
  FbViewFdBudget fd;
  int r = fb_view_fd_account_new (session->client->key, true, ret_account);

  if (r == 0)
    return true;
  fb_view_fd_budget (&fd);
  fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL,
                    "the server keeps open files for %u sandboxes at once (%u each, enough to start a command, out "
                    "of what RLIMIT_NOFILE %" G_GUINT64_FORMAT " allows), and %u run: retry when some processes "
                    "have ended, or raise the server's limit",
                    fd.floors, fd.floor, fd.limit, fd.floors_taken);
  return false;
}

void
fb_rpc_process_release (FbRpcClient *client)
{
  client->n_processes--;
  client->server->n_processes--;
}

bool
fb_rpc_server_may_accept (FbRpcServer *server, const char *client, char **ret_why)
{
  return fb_rpc_client_may_connect (server, client, ret_why);
}
