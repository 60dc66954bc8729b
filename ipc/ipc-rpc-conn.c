/* fusebox — the remote API's connections: accepting one (against its
 * client's fair share, ipc-rpc-share.c), its bounded output queue, the
 * answers and notifications it sends, and its end.
 *
 * A slow reader is disconnected rather than held without bound
 * (FB_RPC_QUEUE_MAX); its session detaches and can be resumed.  Loop
 * thread, except that a worker running one of the connection's requests
 * may send: its answers are kept with the request (fb_rpc_conn_capture_answer,
 * ipc-rpc-pipeline.c) and queued here by the loop thread in their turn. */
#include "ipc/ipc-rpc-private.h"

#include <string.h>
#include <unistd.h>

/* --- connections: the output queue ------------------------------------------ */

static void conn_close (FbRpcConn *conn, const char *reason);

static void
conn_flush (FbRpcConn *conn)
{
  while (!conn->closing && !g_queue_is_empty (&conn->out) && conn->ops->can_write (conn->transport))
    {
      g_autofree char *text = g_queue_pop_head (&conn->out);
      gsize len = strlen (text);
      conn->out_bytes -= len;
      conn->ops->write (conn->transport, text, len);
    }
  /* A refused resume's answer was the last: once it is handed over. */
  if (conn->close_after_answer && !conn->closing && g_queue_is_empty (&conn->out))
    conn_close (conn, "resume refused");
}

static void
conn_close (FbRpcConn *conn, const char *reason)
{
  if (conn->closing)
    return;
  conn->closing = true;
  g_queue_clear_full (&conn->out, g_free);
  conn->out_bytes = 0;
  conn->ops->close (conn->transport, reason);
}

static void conn_queue (FbRpcConn *conn, char *text);

void
fb_rpc_conn_send_utf8 (FbRpcConn *conn, char *text)
{
  if (fb_rpc_conn_capture_answer (conn, text))
    return;
  if (conn->closing)
    {
      g_free (text);
      return;
    }
  conn_queue (conn, text);
}

void
fb_rpc_conn_send (FbRpcConn *conn, char *text)
{
  if (!g_utf8_validate (text, -1, NULL))
    {
      /* A host file name need not be UTF-8, and json-glib turns some
       * invalid escapes into raw bytes: replace what is not UTF-8 with
       * U+FFFD (as Rust's to_string_lossy does for Codex) so that the
       * message stays JSON a client can parse.  JSON's own syntax is
       * ASCII, so only string contents change. */
      char *valid = g_utf8_make_valid (text, -1);
      g_free (text);
      text = valid;
    }
  fb_rpc_conn_send_utf8 (conn, text);
}

static void
conn_queue (FbRpcConn *conn, char *text)
{
  conn->out_bytes += strlen (text);
  g_queue_push_tail (&conn->out, text);
  conn_flush (conn);
  if (conn->out_bytes > FB_RPC_QUEUE_MAX)
    {
      /* A slow reader: rather than hold its output without bound, drop the
       * connection.  Its session detaches (processes keep running for the
       * detach timeout) and process output stays replayable through
       * process/read after a resume. */
      g_warning ("closing connection %s: it reads too slowly (%" G_GSIZE_FORMAT " bytes waiting, limit %d)",
                 conn->peer_name, conn->out_bytes, FB_RPC_QUEUE_MAX);
      conn_close (conn, "slow reader: output queue full");
    }
}

void
fb_rpc_conn_writable (FbRpcConn *conn)
{
  conn_flush (conn);
}

bool
fb_rpc_conn_drain (FbRpcConn *conn)
{
  fb_rpc_conn_wait_idle (conn);
  conn_flush (conn);
  return conn->closing || g_queue_is_empty (&conn->out);
}

void
fb_rpc_conn_reply (FbRpcConn *conn, JsonNode *id, JsonNode *result)
{
  fb_rpc_conn_send (conn, fb_rpc_encode_result (id, result));
}

void
fb_rpc_conn_reply_error (FbRpcConn *conn, JsonNode *id, FbRpcError *error)
{
  fb_rpc_conn_send (conn, fb_rpc_encode_error (id, error->code, error->message, error->data));
}

void
fb_rpc_conn_notify (FbRpcConn *conn, const char *method, JsonNode *params)
{
  fb_rpc_conn_send (conn, fb_rpc_encode_notification (method, params));
}

void
fb_rpc_conn_get_caller (FbRpcConn *conn, FbViewCaller *ret_caller)
{
  memset (ret_caller, 0, sizeof *ret_caller);
  ret_caller->pid = 0;
  ret_caller->uid = conn->peer_uid;
  ret_caller->gid = conn->peer_gid;
  ret_caller->umask = 022;
  ret_caller->comm = conn->client_name != NULL ? conn->client_name : "rpc";
  ret_caller->session = conn->session != NULL ? conn->session->id : NULL;
}

/* --- accepting and closing -------------------------------------------------- */

FbRpcConn *
fb_rpc_server_accept (FbRpcServer *server, const FbRpcTransportOps *ops, gpointer transport, uid_t peer_uid,
                      const char *peer_name)
{
  return fb_rpc_server_accept_client (server, ops, transport, peer_uid, peer_name, peer_name, NULL);
}

FbRpcConn *
fb_rpc_server_accept_client (FbRpcServer *server, const FbRpcTransportOps *ops, gpointer transport, uid_t peer_uid,
                             const char *peer_name, const char *client, char **ret_why)
{
  FbRpcConn *conn;
  g_autofree char *why = NULL;

  if (client == NULL)
    client = peer_name != NULL ? peer_name : "client";
  if (!fb_rpc_client_may_connect (server, client, &why))
    {
      g_message ("refusing a connection from %s: %s", client, why);
      if (ret_why != NULL)
        *ret_why = g_steal_pointer (&why);
      return NULL;
    }
  conn = g_atomic_rc_box_new0 (FbRpcConn);
  g_mutex_init (&conn->lock);
  g_cond_init (&conn->cond);
  g_queue_init (&conn->jobs);
  conn->server = server;
  conn->ops = ops;
  conn->transport = transport;
  conn->peer_uid = peer_uid;
  conn->peer_gid = getegid ();
  conn->peer_name = g_strdup (peer_name != NULL ? peer_name : "client");
  g_queue_init (&conn->out);
  server->conns = g_list_prepend (server->conns, conn);
  server->n_conns++;
  conn->client = fb_rpc_client_get (server, client);
  conn->client->n_conns++;
  return conn;
}

void
fb_rpc_conn_closed (FbRpcConn *conn)
{
  FbRpcServer *server = conn->server;

  /* What the client sent before it went takes effect (it did on receipt
   * before the pipeline), and is answered while the transport can. */
  fb_rpc_conn_wait_idle (conn);
  {
    /* The worker may still be on its way out, or not yet started. */
    g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&conn->lock);
    conn->stopping = true;
    while (conn->scheduled)
      fb_rpc_conn_cond_wait_locked (conn);
  }
  conn->closing = true;
  fb_rpc_process_cancel_deferred (conn);
  fb_rpc_fs_close_all (conn);
  fb_rpc_log_conn_closed (conn);
  if (conn->session != NULL && conn->session->conn == conn)
    fb_rpc_session_detach (conn->session);
  conn->session = NULL;
  g_queue_clear_full (&conn->out, g_free);
  fb_rpc_json_reuse_clear (&conn->reuse);
  server->conns = g_list_remove (server->conns, conn);
  server->n_conns--;
  conn->client->n_conns--;
  g_clear_pointer (&conn->client, fb_rpc_client_unref);
  g_free (conn->peer_name);
  g_free (conn->client_name);
  /* A wake-up still queued for it does nothing. */
  conn->gone = true;
  fb_rpc_conn_unref (conn);
}

guint
fb_rpc_server_count_connections (FbRpcServer *server)
{
  return server->n_conns;
}
