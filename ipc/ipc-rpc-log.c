/* fusebox — the remote API's log/subscribe and log/unsubscribe: live
 * access-log records as log/event notifications.
 *
 * One subscription to the access log (fb_access_log_subscribe) fans out to
 * every subscription of every connection, each filtered by its session and
 * its own filter.  A subscription sees its own session's records only,
 * unless the operator said --subscribe-all (on_log_line says why), and a
 * slow subscriber's subscription ends before its connection could be cut
 * (FB_RPC_LOG_QUEUE_MAX).  Loop thread. */
#include "ipc/ipc-rpc-private.h"
#include "policy/util.h"

#include <string.h>

/* --- log/subscribe ---------------------------------------------------------- */

static bool
filter_matches_member (JsonObject *filter, const char *name, JsonObject *record)
{
  JsonNode *want = json_object_get_member (filter, name);
  const char *have;

  if (want == NULL || JSON_NODE_HOLDS_NULL (want))
    return true;
  have = json_object_get_string_member_with_default (record, name, NULL);
  if (have == NULL)
    return false;
  if (JSON_NODE_HOLDS_ARRAY (want))
    {
      JsonArray *a = json_node_get_array (want);
      for (guint i = 0; i < json_array_get_length (a); i++)
        {
          const char *s = json_array_get_string_element (a, i);
          if (s != NULL && strcmp (s, have) == 0)
            return true;
        }
      return false;
    }
  return strcmp (json_node_get_string (want), have) == 0;
}

static bool
filter_matches (JsonObject *filter, JsonObject *record)
{
  const char *prefix = json_object_get_string_member_with_default (filter, "pathPrefix", NULL);

  if (!filter_matches_member (filter, "op", record) || !filter_matches_member (filter, "decision", record) ||
      !filter_matches_member (filter, "session", record) || !filter_matches_member (filter, "process", record))
    return false;
  if (prefix != NULL)
    {
      const char *path = json_object_get_string_member_with_default (record, "path", "");
      gsize n = strlen (prefix);
      if (strncmp (path, prefix, n) != 0 || (n > 1 && path[n] != '\0' && path[n] != '/'))
        return false;
    }
  return true;
}

static void subscription_remove (FbRpcServer *server, FbRpcSubscription *sub);

/* A subscription whose client lets the events pile up ends, with a last
 * notification saying why; the connection and its session go on. */
static void
subscription_end (FbRpcServer *server, FbRpcSubscription *sub, gsize queued)
{
  JsonObject *o = json_object_new ();
  g_autoptr (JsonNode) params = NULL;
  g_autofree char *reason =
    g_strdup_printf ("this connection has %" G_GSIZE_FORMAT " bytes waiting to be read, past the log subscriptions' "
                     "limit of %d: read faster, narrow the filter, and subscribe again",
                     queued, FB_RPC_LOG_QUEUE_MAX);

  g_warning ("ending log subscription %s of %s: its client reads too slowly (%" G_GSIZE_FORMAT " bytes waiting)",
             sub->id, sub->conn->peer_name, queued);
  json_object_set_string_member (o, "subscriptionId", sub->id);
  json_object_set_string_member (o, "reason", reason);
  params = fb_rpc_object_node (o);
  fb_rpc_conn_notify (sub->conn, "log/ended", params);
  subscription_remove (server, sub);
}

/* On the loop thread, from the log writer, with each record as written.
 * Whose records a subscription sees: its own session's (the records whose
 * "session" is its session's id: the session's calls and its processes'
 * accesses), unless the server shows every record (--subscribe-all).  A
 * record of another session is never sent, nor is its session id.  And no
 * subscriber's slowness reaches another session: its subscription ends
 * (FB_RPC_LOG_QUEUE_MAX) before its connection could be cut as a slow
 * reader, so that no flood of records, whoever makes them, disconnects a
 * client and frees its session for a resume. */
static void
on_log_line (const char *line, gpointer user_data)
{
  FbRpcServer *server = user_data;
  g_autoptr (JsonNode) parsed = NULL;
  g_autofree char *text = NULL;
  gsize text_len = 0;
  bool unparsable = false;

  server->in_log_line = true;
  for (GList *l = server->subscriptions; l != NULL;)
    {
      FbRpcSubscription *sub = l->data;
      l = l->next;
      if (sub->filter != NULL || sub->session != NULL)
        {
          JsonObject *record;
          JsonNode *session;

          if (parsed == NULL && !unparsable)
            {
              parsed = json_from_string (line, NULL);
              unparsable = parsed == NULL || !JSON_NODE_HOLDS_OBJECT (parsed);
            }
          if (unparsable)
            continue;
          record = json_node_get_object (parsed);
          session = json_object_get_member (record, "session");
          if (sub->session != NULL && (session == NULL || !JSON_NODE_HOLDS_VALUE (session) ||
                                       json_node_get_value_type (session) != G_TYPE_STRING ||
                                       strcmp (json_node_get_string (session), sub->session) != 0))
            continue;
          if (sub->filter != NULL && !filter_matches (sub->filter, record))
            continue;
        }
      if (text == NULL)
        {
          /* The params are the log line itself, byte for byte. */
          text = g_strconcat ("{\"method\":\"log/event\",\"params\":", line, "}", NULL);
          text_len = strlen (text);
        }
      if (sub->conn->out_bytes + text_len > FB_RPC_LOG_QUEUE_MAX)
        {
          subscription_end (server, sub, sub->conn->out_bytes);
          continue;
        }
      fb_rpc_conn_send (sub->conn, g_strdup (text));
    }
  server->in_log_line = false;
}

static void
subscription_free (FbRpcSubscription *sub)
{
  g_free (sub->id);
  g_clear_pointer (&sub->filter, json_object_unref);
  g_free (sub->session);
  g_free (sub);
}

static gboolean
unsubscribe_idle (gpointer data)
{
  FbRpcServer *server = data;

  server->unsubscribe_idle = 0;
  if (server->subscriptions == NULL && server->log_subscription != 0)
    {
      fb_access_log_unsubscribe (server->log, server->log_subscription);
      server->log_subscription = 0;
    }
  return G_SOURCE_REMOVE;
}

static void
subscription_remove (FbRpcServer *server, FbRpcSubscription *sub)
{
  server->subscriptions = g_list_remove (server->subscriptions, sub);
  sub->conn->n_subscriptions--;
  subscription_free (sub);
  if (server->subscriptions == NULL && server->log_subscription != 0)
    {
      /* From on_log_line the log's writer lock is held, and
       * fb_access_log_unsubscribe takes it: later, from the loop. */
      if (server->in_log_line)
        {
          if (server->unsubscribe_idle == 0)
            server->unsubscribe_idle = g_idle_add (unsubscribe_idle, server);
          return;
        }
      fb_access_log_unsubscribe (server->log, server->log_subscription);
      server->log_subscription = 0;
    }
}

JsonNode *
fb_rpc_log_subscribe (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  FbRpcServer *server = conn->server;
  JsonNode *filter = params != NULL ? json_object_get_member (params, "filter") : NULL;
  FbRpcSubscription *sub;
  g_autoptr (JsonBuilder) b = json_builder_new ();
  static const char *const known[] = { "op", "decision", "session", "process", "pathPrefix" };

  if (server->log == NULL)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "this server keeps no access log");
      return NULL;
    }
  if (filter != NULL && !JSON_NODE_HOLDS_NULL (filter))
    {
      JsonObject *f;
      g_autoptr (GList) names = NULL;
      if (!JSON_NODE_HOLDS_OBJECT (filter))
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `filter` must be an object");
          return NULL;
        }
      f = json_node_get_object (filter);
      names = json_object_get_members (f);
      for (GList *l = names; l != NULL; l = l->next)
        {
          JsonNode *v = json_object_get_member (f, l->data);
          bool ok = false;
          for (guint i = 0; i < G_N_ELEMENTS (known); i++)
            ok = ok || strcmp (l->data, known[i]) == 0;
          if (!ok)
            {
              fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS,
                                "invalid params: unknown filter field `%s` (known: op, decision, session, process, "
                                "pathPrefix)",
                                (const char *)l->data);
              return NULL;
            }
          if (JSON_NODE_HOLDS_ARRAY (v) && strcmp (l->data, "pathPrefix") != 0)
            {
              JsonArray *a = json_node_get_array (v);
              for (guint i = 0; i < json_array_get_length (a); i++)
                {
                  JsonNode *e = json_array_get_element (a, i);
                  ok = ok && JSON_NODE_HOLDS_VALUE (e) && json_node_get_value_type (e) == G_TYPE_STRING;
                }
            }
          else
            ok =
              JSON_NODE_HOLDS_NULL (v) || (JSON_NODE_HOLDS_VALUE (v) && json_node_get_value_type (v) == G_TYPE_STRING);
          if (!ok)
            {
              fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS,
                                "invalid params: filter field `%s` must be a string%s", (const char *)l->data,
                                strcmp (l->data, "pathPrefix") != 0 ? " or an array of strings" : "");
              return NULL;
            }
        }
    }
  if (conn->n_subscriptions >= FB_RPC_SUBSCRIPTIONS_MAX)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "too many log subscriptions on this connection (limit %d)",
                        FB_RPC_SUBSCRIPTIONS_MAX);
      return NULL;
    }
  sub = g_new0 (FbRpcSubscription, 1);
  sub->id = g_strdup_printf ("log-%u", ++server->next_subscription);
  sub->conn = conn;
  /* Its own session's records only, unless the operator said otherwise. */
  sub->session = server->subscribe_all ? NULL : g_strdup (conn->session->id);
  if (filter != NULL && JSON_NODE_HOLDS_OBJECT (filter))
    sub->filter = json_object_ref (json_node_get_object (filter));
  if (server->log_subscription == 0)
    server->log_subscription = fb_access_log_subscribe (server->log, on_log_line, server, NULL);
  server->subscriptions = g_list_append (server->subscriptions, sub);
  conn->n_subscriptions++;

  json_builder_begin_object (b);
  fb_json_builder_add_string_member (b, "subscriptionId", sub->id);
  fb_json_builder_add_string_member (b, "scope", sub->session != NULL ? "session" : "all");
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

JsonNode *
fb_rpc_log_unsubscribe (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  const char *sid;

  if (!fb_rpc_param_string (params, "subscriptionId", true, &sid, error))
    return NULL;
  for (GList *l = conn->server->subscriptions; l != NULL; l = l->next)
    {
      FbRpcSubscription *sub = l->data;
      if (sub->conn == conn && strcmp (sub->id, sid) == 0)
        {
          subscription_remove (conn->server, sub);
          return fb_rpc_object_node (json_object_new ());
        }
    }
  fb_rpc_error_set (error, FB_RPC_ERROR_NOT_FOUND, "unknown subscription `%s`", sid);
  return NULL;
}

void
fb_rpc_log_conn_closed (FbRpcConn *conn)
{
  FbRpcServer *server = conn->server;

  for (GList *l = server->subscriptions; l != NULL;)
    {
      FbRpcSubscription *sub = l->data;
      l = l->next;
      if (sub->conn == conn)
        subscription_remove (server, sub);
    }
}
