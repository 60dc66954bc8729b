/* fusebox — the remote API's server: what it holds for its connections,
 * sessions, views and budgets, made and freed here.  The rest is grouped by
 * concern: the wire format (ipc-rpc-wire.c, its JSON decoder ipc-rpc-json.c),
 * connections (ipc-rpc-conn.c), dispatch and the handshake
 * (ipc-rpc-dispatch.c), the pipeline (ipc-rpc-pipeline.c), the log/...
 * methods (ipc-rpc-log.c); ipc-rpc.h lists every file.
 *
 * Threat model: a client that holds the server's token (ipc-transport.c)
 * sends arbitrary bytes, and may be hostile to the server's other clients.
 * Every message is bounded (FB_RPC_MESSAGE_MAX), every member is
 * type-checked before use, and nothing a client sends can make the server
 * hold unbounded memory: the output queue is bounded (a slow reader is
 * disconnected), and so is every table a client can fill (ipc-rpc.h lists
 * the bounds).  A session is its client's alone (ipc-session.c: resuming
 * takes a secret only that client saw), and log/subscribe shows a client
 * its own session's records (ipc-rpc-log.c).
 *
 * Threads: the loop thread receives and sends; a worker decodes the
 * messages and runs the fs/... methods (ipc-rpc-pipeline.c), the loop
 * thread every other method: two CPUs for one connection.  A connection's requests still take
 * effect one at a time in the order received, and their answers leave in
 * that order.  A connection's handshake state follows Codex: `initialize`
 * once, then the `initialized` notification, then the other methods. */
#include "ipc/ipc-rpc-private.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* --- the server ------------------------------------------------------------- */

static void
vars_copy (FbRpcVars *dst, const FbPolicyVars *src)
{
  memset (dst, 0, sizeof *dst);
  if (src == NULL)
    return;
  dst->vars.workspace = dst->owned[0] = g_strdup (src->workspace);
  dst->vars.home = dst->owned[1] = g_strdup (src->home);
  dst->vars.cwd = dst->owned[2] = g_strdup (src->cwd);
  dst->vars.run = dst->owned[3] = g_strdup (src->run);
}

FbRpcServer *
fb_rpc_server_new (const FbRpcServerOptions *options, GError **error)
{
  FbRpcServer *server;

  g_return_val_if_fail (options != NULL && options->policy != NULL, NULL);
  server = g_new0 (FbRpcServer, 1);
  server->context = g_main_context_ref_thread_default ();
  server->policy = fb_policy_ref (options->policy);
  vars_copy (&server->vars, options->vars);
  server->log = options->log;
  server->log_level = options->log_level;
  server->detach_timeout_ms =
    options->detach_timeout_ms != 0 ? options->detach_timeout_ms : FB_RPC_DEFAULT_DETACH_TIMEOUT_MS;
  server->subscribe_all = options->subscribe_all;
  server->view_idle_ms = options->view_idle_ms != 0 ? options->view_idle_ms : FB_RPC_VIEW_IDLE_MS;
  g_queue_init (&server->views);
  server->spare_sock = -1;
  server->launch_helper = g_strdup (options->launch_helper);
  server->run_dir = g_strdup (options->run_dir);
  server->run_dir_fd = options->run_dir_fd != NULL ? fcntl (*options->run_dir_fd, F_DUPFD_CLOEXEC, 3) : -1;
  server->hidden_paths = g_strdupv ((char **)options->hidden_paths);
  server->cwd = g_strdup (server->vars.vars.workspace != NULL ? server->vars.vars.workspace
                          : server->vars.vars.cwd != NULL     ? server->vars.vars.cwd
                                                              : "/");
  server->sessions = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify)fb_rpc_session_free);
  server->clients = g_hash_table_new (g_str_hash, g_str_equal);
  g_queue_init (&server->finished);
  g_mutex_init (&server->sandbox_lock);
  server->sandboxes = g_hash_table_new (g_str_hash, g_str_equal);
  g_queue_init (&server->sandbox_lru);
  fb_rpc_server_pipeline_init (server);
  {
    /* The server's own view up front: a policy whose private directories
     * can't be made fails here, with its message, not at the first call. */
    FbRpcError e = { 0 };
    g_autoptr (FbRpcSandbox) base = fb_rpc_sandbox_lookup (server, NULL, &e);
    if (base == NULL)
      {
        g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "%s", e.message);
        fb_rpc_error_clear (&e);
        fb_rpc_server_free (server);
        return NULL;
      }
  }
  /* After the first view: it raised the descriptor limit. */
  server->budget.retained = options->retained_max != 0 ? MAX (options->retained_max, FB_RPC_RETAIN_TOTAL_MIN) : 0;
  fb_rpc_server_budget_init (server);
  /* a view (its FUSE session's workers and descriptors) for each running
   * process at most */
  server->budget.views = server->budget.processes;
  return server;
}

void
fb_rpc_server_free (FbRpcServer *server)
{
  if (server == NULL)
    return;
  while (server->conns != NULL)
    {
      FbRpcConn *conn = server->conns->data;
      /* The transports outlive nothing of ours: forget them here, and
       * send them nothing more. */
      conn->closing = true;
      fb_rpc_conn_closed (conn);
    }
  fb_rpc_server_pipeline_clear (server);
  fb_rpc_process_spare_stop (server);
  g_hash_table_destroy (server->sessions);
  g_clear_handle_id (&server->retain_idle, g_source_remove);
  /* Every connection and session has let its client go. */
  g_hash_table_destroy (server->clients);
  fb_rpc_server_clear_sandboxes (server);
  g_hash_table_destroy (server->sandboxes);
  g_mutex_clear (&server->sandbox_lock);
  g_clear_handle_id (&server->unsubscribe_idle, g_source_remove);
  if (server->log_subscription != 0)
    fb_access_log_unsubscribe (server->log, server->log_subscription);
  fb_policy_unref (server->policy);
  for (guint i = 0; i < G_N_ELEMENTS (server->vars.owned); i++)
    g_free (server->vars.owned[i]);
  g_free (server->launch_helper);
  g_free (server->run_dir);
  if (server->run_dir_fd >= 0)
    close (server->run_dir_fd);
  g_free (server->cwd);
  g_strfreev (server->hidden_paths);
  g_main_context_unref (server->context);
  g_free (server);
}
