/* Helpers for the `fusebox serve` tests and benchmark: start the real
 * server, and a WebSocket client on libsoup 3 with a synchronous call()
 * driven by the default main context.
 *
 * Waits are bounded (WAIT_LIMIT_S) only so that a broken server fails the
 * test instead of hanging it; nothing asserts how long anything takes.
 * Each includer uses some of the helpers (G_GNUC_UNUSED: no warning for
 * the rest). */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_LIMIT_S 60

typedef struct
{
  GPid pid;
  char *url;
  char *dir;
  char *command; /* for people: how to start it by hand */
  int err_fd;
} TestServer;

G_GNUC_UNUSED static void
die_with_parent (gpointer data)
{
  /* A test or benchmark killed midway must not leave its server behind. */
  prctl (PR_SET_PDEATHSIG, SIGTERM);
}

/* `fusebox serve --listen ws://127.0.0.1:0 ARGS...` with XDG_STATE_HOME
 * under DIR; returns once the URL line is read. */
G_GNUC_UNUSED static TestServer *
test_server_start (const char *dir, const char *const *args)
{
  const char *bin = g_getenv ("FUSEBOX_BIN");
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_auto (GStrv) envp = g_get_environ ();
  g_autofree char *state = g_build_filename (dir, "state", NULL);
  g_autoptr (GError) error = NULL;
  GString *line = g_string_new (NULL);
  TestServer *s = g_new0 (TestServer, 1);
  int out_fd = -1;

  g_ptr_array_add (argv, (char *)(bin != NULL ? bin : "fusebox"));
  g_ptr_array_add (argv, (char *)"serve");
  g_ptr_array_add (argv, (char *)"--listen");
  g_ptr_array_add (argv, (char *)"ws://127.0.0.1:0");
  for (guint i = 0; args != NULL && args[i] != NULL; i++)
    g_ptr_array_add (argv, (char *)args[i]);
  g_ptr_array_add (argv, NULL);
  envp = g_environ_setenv (envp, "XDG_STATE_HOME", state, TRUE);
  s->dir = g_strdup (dir);
  {
    g_autofree char *joined = g_strjoinv (" ", (char **)argv->pdata);
    s->command = g_strdup_printf ("XDG_STATE_HOME=%s %s", state, joined);
  }
  if (!g_spawn_async_with_pipes (NULL, (char **)argv->pdata, envp, G_SPAWN_DO_NOT_REAP_CHILD, die_with_parent, NULL,
                                 &s->pid, NULL, &out_fd, NULL, &error))
    {
      fprintf (stderr, "can't start %s: %s\n", s->command, error->message);
      g_string_free (line, TRUE);
      return s;
    }
  for (;;)
    {
      char c;
      ssize_t n = read (out_fd, &c, 1);
      if (n <= 0 || c == '\n')
        break;
      g_string_append_c (line, c);
    }
  close (out_fd);
  s->url = g_string_free (line, FALSE);
  if (!g_str_has_prefix (s->url, "ws://"))
    fprintf (stderr, "the server did not print its URL; reproduce with: %s\n", s->command);
  return s;
}

G_GNUC_UNUSED static int
test_server_stop (TestServer *s)
{
  int status = -1;

  if (s == NULL)
    return -1;
  if (s->pid > 0)
    {
      kill (s->pid, SIGTERM);
      while (waitpid (s->pid, &status, 0) < 0 && errno == EINTR)
        ;
      g_spawn_close_pid (s->pid);
    }
  g_free (s->url);
  g_free (s->dir);
  g_free (s->command);
  g_free (s);
  return status;
}

/* --- the client -------------------------------------------------------------- */

typedef struct
{
  SoupSession *session;
  SoupWebsocketConnection *ws;
  GQueue inbox; /* JsonNode*: messages not consumed yet */
  bool closed;
  bool failed;
  gint64 next_id;
  char *session_id;  /* as initialize answered it: "ID.SECRET", what a resume takes */
  char *log_session; /* ID: the session in the access log and log/event */
  char *run_dir;
} TestClient;

G_GNUC_UNUSED static void
on_client_message (SoupWebsocketConnection *ws, int type, GBytes *message, gpointer user_data)
{
  TestClient *c = user_data;
  gsize len;
  const char *data = g_bytes_get_data (message, &len);
  g_autofree char *text = g_strndup (data, len);
  JsonNode *node = json_from_string (text, NULL);

  if (node != NULL)
    g_queue_push_tail (&c->inbox, node);
}

G_GNUC_UNUSED static void
on_client_closed (SoupWebsocketConnection *ws, gpointer user_data)
{
  ((TestClient *)user_data)->closed = true;
}

G_GNUC_UNUSED static void
on_connected (GObject *source, GAsyncResult *res, gpointer user_data)
{
  TestClient *c = user_data;
  g_autoptr (GError) error = NULL;

  c->ws = soup_session_websocket_connect_finish (SOUP_SESSION (source), res, &error);
  if (c->ws == NULL)
    {
      c->failed = true;
      return;
    }
  soup_websocket_connection_set_max_incoming_payload_size (c->ws, 0);
  g_signal_connect (c->ws, "message", G_CALLBACK (on_client_message), c);
  g_signal_connect (c->ws, "closed", G_CALLBACK (on_client_closed), c);
}

G_GNUC_UNUSED static gboolean
on_wait_limit (gpointer data)
{
  *(bool *)data = true;
  return G_SOURCE_REMOVE;
}

/* Connect without an async wait per client (for many at once): call
 * test_client_wait_connected after starting them all. */
G_GNUC_UNUSED static TestClient *
test_client_start (const char *url, const char *origin)
{
  TestClient *c = g_new0 (TestClient, 1);
  SoupMessage *msg = soup_message_new ("GET", url);

  g_queue_init (&c->inbox);
  c->next_id = 1;
  c->session = soup_session_new ();
  if (origin != NULL)
    soup_message_headers_replace (soup_message_get_request_headers (msg), "Origin", origin);
  soup_session_websocket_connect_async (c->session, msg, NULL, NULL, G_PRIORITY_DEFAULT, NULL, on_connected, c);
  g_object_unref (msg);
  return c;
}

G_GNUC_UNUSED static bool
test_client_wait_connected (TestClient *c)
{
  bool done = false;
  bool expired = false;
  guint id = g_timeout_add_seconds (WAIT_LIMIT_S, on_wait_limit, &expired);

  while (c->ws == NULL && !c->failed && !expired)
    g_main_context_iteration (NULL, TRUE);
  if (!expired)
    g_source_remove (id);
  done = c->ws != NULL;
  return done;
}

G_GNUC_UNUSED static TestClient *
test_client_connect (const char *url)
{
  TestClient *c = test_client_start (url, NULL);
  test_client_wait_connected (c);
  return c;
}

G_GNUC_UNUSED static void
test_client_free (TestClient *c)
{
  if (c == NULL)
    return;
  if (c->ws != NULL)
    {
      g_signal_handlers_disconnect_by_data (c->ws, c);
      if (soup_websocket_connection_get_state (c->ws) == SOUP_WEBSOCKET_STATE_OPEN)
        soup_websocket_connection_close (c->ws, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
      g_object_unref (c->ws);
    }
  g_queue_clear_full (&c->inbox, (GDestroyNotify)json_node_unref);
  g_object_unref (c->session);
  g_free (c->session_id);
  g_free (c->log_session);
  g_free (c->run_dir);
  g_free (c);
}

G_GNUC_UNUSED static void
test_client_send (TestClient *c, const char *text)
{
  soup_websocket_connection_send_text (c->ws, text);
}

/* The first queued message for which MATCH holds (removed from the inbox),
 * waiting for it; NULL at the limit or when the connection closes. */
typedef bool (*TestMatch) (JsonObject *msg, gconstpointer data);

G_GNUC_UNUSED static JsonNode *
test_client_take (TestClient *c, TestMatch match, gconstpointer data)
{
  bool expired = false;
  guint id = g_timeout_add_seconds (WAIT_LIMIT_S, on_wait_limit, &expired);
  JsonNode *found = NULL;

  while (found == NULL && !expired)
    {
      for (GList *l = c->inbox.head; l != NULL; l = l->next)
        if (JSON_NODE_HOLDS_OBJECT (l->data) && match (json_node_get_object (l->data), data))
          {
            found = l->data;
            g_queue_delete_link (&c->inbox, l);
            break;
          }
      if (found == NULL)
        {
          if (c->closed)
            break;
          g_main_context_iteration (NULL, TRUE);
        }
    }
  if (!expired)
    g_source_remove (id);
  return found;
}

G_GNUC_UNUSED static bool
match_id (JsonObject *msg, gconstpointer data)
{
  JsonNode *id = json_object_get_member (msg, "id");
  return id != NULL && JSON_NODE_HOLDS_VALUE (id) && json_node_get_value_type (id) == G_TYPE_INT64 &&
         json_node_get_int (id) == *(const gint64 *)data && !json_object_has_member (msg, "method");
}

typedef struct
{
  const char *method;
  const char *process_id; /* NULL: any */
} NoteMatch;

G_GNUC_UNUSED static bool
match_note (JsonObject *msg, gconstpointer data)
{
  const NoteMatch *m = data;
  JsonObject *params;

  if (g_strcmp0 (json_object_get_string_member_with_default (msg, "method", NULL), m->method) != 0)
    return false;
  if (m->process_id == NULL)
    return true;
  params = json_object_get_object_member (msg, "params");
  return params != NULL &&
         g_strcmp0 (json_object_get_string_member_with_default (params, "processId", NULL), m->process_id) == 0;
}

/* The next notification METHOD (for PROCESS_ID when not NULL). */
G_GNUC_UNUSED static JsonNode *
test_client_note (TestClient *c, const char *method, const char *process_id)
{
  NoteMatch m = { method, process_id };
  return test_client_take (c, match_note, &m);
}

/* Send {id, method, params: PARAMS_JSON} and wait for its answer (the whole
 * message: {id, result} or {id, error}). */
G_GNUC_UNUSED static JsonNode *
test_client_call (TestClient *c, const char *method, const char *params_json)
{
  gint64 id = c->next_id++;
  g_autofree char *text = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"method\":\"%s\",\"params\":%s}", id, method,
                                           params_json != NULL ? params_json : "{}");

  test_client_send (c, text);
  return test_client_take (c, match_id, &id);
}

/* initialize + initialized; keeps the session id and the run directory.
 * A resume may race with the server noticing that the session's previous
 * connection closed (it answers -32010 until then): retried a while. */
G_GNUC_UNUSED static bool
test_client_handshake (TestClient *c, const char *resume)
{
  g_autofree char *params = resume != NULL
                              ? g_strdup_printf ("{\"clientName\":\"test\",\"resumeSessionId\":\"%s\"}", resume)
                              : g_strdup ("{\"clientName\":\"test\"}");
  JsonNode *r = NULL;
  JsonObject *result;

  for (guint attempt = 0; attempt < 200; attempt++)
    {
      JsonObject *o;
      r = test_client_call (c, "initialize", params);
      if (r == NULL)
        return false;
      o = json_node_get_object (r);
      if (resume == NULL || !json_object_has_member (o, "error") ||
          json_object_get_int_member (json_object_get_object_member (o, "error"), "code") != -32010)
        break;
      json_node_unref (r);
      r = NULL;
      g_usleep (20000);
    }
  if (r == NULL || !json_object_has_member (json_node_get_object (r), "result"))
    {
      if (r != NULL)
        json_node_unref (r);
      return false;
    }
  result = json_object_get_object_member (json_node_get_object (r), "result");
  c->session_id = g_strdup (json_object_get_string_member (result, "sessionId"));
  c->log_session = g_strndup (c->session_id, strcspn (c->session_id, "."));
  c->run_dir = g_strdup (json_object_get_string_member_with_default (
    json_object_get_object_member (result, "environmentInfo"), "runDir", ""));
  json_node_unref (r);
  test_client_send (c, "{\"method\":\"initialized\",\"params\":{}}");
  return true;
}

/* result member of an answer, or NULL when it is an error. */
G_GNUC_UNUSED static JsonObject *
answer_result (JsonNode *answer)
{
  if (answer == NULL || !json_object_has_member (json_node_get_object (answer), "result"))
    return NULL;
  return json_object_get_object_member (json_node_get_object (answer), "result");
}

G_GNUC_UNUSED static gint64
answer_error_code (JsonNode *answer)
{
  JsonObject *e;

  if (answer == NULL || !json_object_has_member (json_node_get_object (answer), "error"))
    return 0;
  e = json_object_get_object_member (json_node_get_object (answer), "error");
  return json_object_get_int_member (e, "code");
}

G_GNUC_UNUSED static const char *
answer_error_message (JsonNode *answer)
{
  if (answer == NULL || !json_object_has_member (json_node_get_object (answer), "error"))
    return "";
  return json_object_get_string_member (json_object_get_object_member (json_node_get_object (answer), "error"),
                                        "message");
}
