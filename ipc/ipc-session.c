/* fusebox — remote API sessions.
 *
 * A session is what `initialize` hands out: an id and the processes started
 * under it.  It outlives its connection, as Codex's does: when the
 * connection goes, the session detaches and its processes keep running for
 * the detach timeout (30 s by default, `fusebox serve --detach-timeout`), so
 * that a client whose network blinked can reconnect with
 * initialize{resumeSessionId} and carry on (process/read replays what it
 * missed).  When the timeout passes first, every process of the session is
 * terminated and the session is forgotten.  A session is attached to at most
 * one connection: resuming one that is attached elsewhere is -32010, as in
 * Codex.
 *
 * Session ids are random UUIDs (g_uuid_string_random): knowing one is what
 * lets a connection take over the processes, so they must not be guessable
 * from other ids.  Loop thread only. */
#include "ipc/ipc-rpc-private.h"

#include <errno.h>
#include <sys/random.h>

char *
fb_rpc_random_hex (gsize n_bytes)
{
  g_autofree guint8 *raw = g_malloc (n_bytes);
  GString *hex = g_string_sized_new (2 * n_bytes);
  gsize got = 0;

  /* The kernel's generator (getrandom blocks only until it is seeded,
   * at boot); never GLib's g_random, which is not meant for secrets. */
  while (got < n_bytes)
    {
      ssize_t n = getrandom (raw + got, n_bytes - got, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          int errsv = n < 0 ? errno : EIO;
          g_string_free (hex, TRUE);
          errno = errsv;
          return NULL;
        }
      got += (gsize)n;
    }
  for (gsize i = 0; i < n_bytes; i++)
    g_string_append_printf (hex, "%02x", raw[i]);
  explicit_bzero (raw, n_bytes);
  return g_string_free (hex, FALSE);
}

static gboolean
on_expire (gpointer data)
{
  FbRpcSession *session = data;

  session->expire_id = 0;
  g_debug ("session %s: detach timeout passed; terminating its processes", session->id);
  /* Frees the session, which kills its processes. */
  g_hash_table_remove (session->server->sessions, session->id);
  return G_SOURCE_REMOVE;
}

FbRpcSession *
fb_rpc_session_attach (FbRpcServer *server, FbRpcConn *conn, const char *resume_id, FbRpcError *error)
{
  FbRpcSession *session;

  if (resume_id != NULL)
    {
      session = g_hash_table_lookup (server->sessions, resume_id);
      if (session == NULL)
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "unknown session id %s", resume_id);
          return NULL;
        }
      if (session->conn != NULL)
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_SESSION_ATTACHED,
                            "session %s is already attached to another connection", resume_id);
          return NULL;
        }
      if (session->expire_id != 0)
        {
          g_source_remove (session->expire_id);
          session->expire_id = 0;
        }
      session->conn = conn;
      return session;
    }

  if (g_hash_table_size (server->sessions) >= FB_RPC_SESSIONS_MAX)
    {
      /* Detached sessions wait out their timeout; a client that reconnects
       * in a loop must not make them pile up without bound. */
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL,
                        "too many sessions (limit %d); try again after the detach "
                        "timeout",
                        FB_RPC_SESSIONS_MAX);
      return NULL;
    }
  session = g_new0 (FbRpcSession, 1);
  session->server = server;
  session->id = g_uuid_string_random ();
  session->conn = conn;
  session->processes = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify)fb_rpc_process_free);
  g_hash_table_insert (server->sessions, session->id, session);
  return session;
}

void
fb_rpc_session_detach (FbRpcSession *session)
{
  session->conn = NULL;
  if (session->expire_id != 0)
    g_source_remove (session->expire_id);
  session->expire_id = g_timeout_add (session->server->detach_timeout_ms, on_expire, session);
}

void
fb_rpc_session_free (FbRpcSession *session)
{
  if (session == NULL)
    return;
  if (session->expire_id != 0)
    g_source_remove (session->expire_id);
  g_hash_table_destroy (session->processes);
  g_free (session->id);
  g_free (session);
}
