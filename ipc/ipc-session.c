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
 * Who may resume (threat model: another client of the same server, which
 * sees session ids in the access log, in its own log/event records under
 * --subscribe-all, or in a run directory a policy shows it).  A session has
 * two parts: its id, a random UUID, which the log and every record carry,
 * and a secret of FB_RPC_SESSION_SECRET_BYTES from getrandom, which only
 * the client that made the session ever sees.  initialize answers
 * sessionId = "ID.SECRET": Codex's client resumes with exactly the
 * sessionId it was given (and refuses an answer naming another), so the
 * secret travels in what it already sends, and nothing is asked of it.
 * A resume is granted only for the right secret, compared in constant
 * time; every other resumeSessionId (no dot, an unknown id, a wrong
 * secret, a session that ended) gets the same answer, so it tells nothing,
 * and is the connection's last: the server closes it once the answer is
 * handed over.  Guessing is bounded by the secret alone: 2^128 of them, each
 * a connection of its own, are some 10^25 years at a million a second.  No
 * count of refused resumes stands before the check (a server-wide bucket
 * did: one client's wrong guesses emptied it, every other client's right
 * secret was then refused, and their detached sessions expired, their
 * processes killed): a client with the right sessionId gets in at its
 * first try, whatever others send.
 *
 * Loop thread only. */
#include "ipc/ipc-rpc-private.h"

#include <errno.h>
#include <string.h>
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

static char *
log_share_why (FbRpcSession *session)
{
  guint64 max = fb_access_share_get_max_bytes (session->log_share);

  return g_strdup_printf ("the session used up its share of the access log (%" G_GUINT64_FORMAT
                          " KiB: a quarter of the server's --log-max-size, or a third of what the other sessions "
                          "left of it); its processes were stopped and its calls that log are refused, while the "
                          "other sessions go on.  Start a new session, give the server a larger budget "
                          "(--log-max-size), or see what filled it with 'fusebox log'",
                          max >> 10);
}

/* From the loop (ipc-log.c): the records of the session's calls and
 * processes reached its share of the log's budget. */
static void
on_log_share_full (gpointer data)
{
  FbRpcSession *session = data;
  g_autofree char *why = NULL;

  /* its processes are gone already; what is left is the records of its
   * views' ends */
  if (session->freeing)
    return;
  why = log_share_why (session);
  fb_rpc_process_stop_view (session, NULL, why);
}

bool
fb_rpc_session_log_refused (FbRpcSession *session, FbRpcError *error)
{
  g_autofree char *why = NULL;

  if (session == NULL || session->log_share == NULL || !fb_access_share_is_full (session->log_share, NULL))
    return false;
  why = log_share_why (session);
  fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "%s", why);
  return true;
}

char *
fb_rpc_session_handle (FbRpcSession *session)
{
  return g_strconcat (session->id, ".", session->secret, NULL);
}

/* Constant time in the length of A (the client's). */
static bool
secret_equal (const char *a, const char *b)
{
  gsize la = strlen (a), lb = strlen (b);
  unsigned char diff = la != lb;

  for (gsize i = 0; i < la; i++)
    diff |= (unsigned char)a[i] ^ (unsigned char)b[lb > 0 ? i % lb : 0];
  return diff == 0;
}

/* RESUME_ID's session, when its secret is right; else NULL. */
static FbRpcSession *
find_resumable (FbRpcServer *server, const char *resume_id)
{
  const char *dot = strchr (resume_id, '.');
  g_autofree char *id = NULL;
  FbRpcSession *session;

  if (dot == NULL)
    return NULL;
  id = g_strndup (resume_id, dot - resume_id);
  session = g_hash_table_lookup (server->sessions, id);
  if (session == NULL || !secret_equal (dot + 1, session->secret))
    return NULL;
  return session;
}

FbRpcSession *
fb_rpc_session_attach (FbRpcServer *server, FbRpcConn *conn, const char *resume_id, FbRpcError *error)
{
  FbRpcSession *session;

  if (resume_id != NULL)
    {
      session = find_resumable (server, resume_id);
      if (session == NULL)
        {
          /* Not echoed: the answer is the same whatever was wrong. */
          conn->close_after_answer = true;
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST,
                            "no session to resume with that sessionId (unknown, ended, or not this one's); "
                            "initialize without resumeSessionId starts a new one");
          return NULL;
        }
      if (session->conn != NULL)
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_SESSION_ATTACHED,
                            "session %s is already attached to another connection", session->id);
          return NULL;
        }
      g_clear_handle_id (&session->expire_id, g_source_remove);
      session->conn = conn;
      return session;
    }

  /* Detached sessions wait out their timeout; a client that reconnects
   * in a loop must not make them pile up without bound, nor take the
   * others' room (ipc-rpc-share.c). */
  if (conn->client->n_sessions >= fb_rpc_share (server->budget.sessions))
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST,
                        "too many sessions for %s (%u, its share of the server's %u; detached ones last %u ms); "
                        "resume one with its sessionId, or retry after the detach timeout",
                        conn->client->key, conn->client->n_sessions, server->budget.sessions,
                        server->detach_timeout_ms);
      return NULL;
    }
  if (g_hash_table_size (server->sessions) >= server->budget.sessions)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL,
                        "the server has %u sessions, its limit; retry after the detach timeout (%u ms)",
                        g_hash_table_size (server->sessions), server->detach_timeout_ms);
      return NULL;
    }
  session = g_new0 (FbRpcSession, 1);
  session->server = server;
  session->id = g_uuid_string_random ();
  session->secret = fb_rpc_random_hex (FB_RPC_SESSION_SECRET_BYTES);
  if (session->secret == NULL)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "can't make a session secret: getrandom: %s", g_strerror (errno));
      g_free (session->id);
      g_free (session);
      return NULL;
    }
  session->conn = conn;
  session->client = fb_rpc_client_get (server, conn->client->key);
  session->client->n_sessions++;
  session->processes = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify)fb_rpc_process_free);
  session->forgotten = g_hash_table_new (g_str_hash, g_str_equal);
  g_queue_init (&session->forgotten_order);
  session->views = g_hash_table_new (g_str_hash, g_str_equal);
  if (server->log != NULL)
    session->log_share = fb_access_log_group_share_new (server->log, session->id, on_log_share_full, session);
  g_hash_table_insert (server->sessions, session->id, session);
  return session;
}

void
fb_rpc_session_detach (FbRpcSession *session)
{
  session->conn = NULL;
  fb_rpc_session_drop_ready (session);
  g_clear_handle_id (&session->expire_id, g_source_remove);
  session->expire_id = g_timeout_add (session->server->detach_timeout_ms, on_expire, session);
}

void
fb_rpc_session_free (FbRpcSession *session)
{
  if (session == NULL)
    return;
  session->freeing = true;
  g_clear_handle_id (&session->expire_id, g_source_remove);
  g_hash_table_destroy (session->processes);
  /* after its processes: none runs in them any more */
  fb_rpc_session_close_views (session);
  g_hash_table_destroy (session->views);
  g_hash_table_destroy (session->forgotten);
  g_queue_clear_full (&session->forgotten_order, g_free);
  /* after its processes' and views' shares, its parts */
  if (session->log_share != NULL)
    fb_access_share_close (session->log_share);
  g_clear_pointer (&session->log_share, fb_access_share_unref);
  session->client->n_sessions--;
  fb_rpc_client_unref (session->client);
  g_free (session->id);
  if (session->secret != NULL)
    explicit_bzero (session->secret, strlen (session->secret));
  g_free (session->secret);
  g_free (session);
}
