/* fusebox — the server and the WebSocket client of tests/lib/test-serve.h
 * (no cmocka: bench/ builds this file too). */
#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/test-serve.h"

void
test_die_with_parent (gpointer data)
{
  prctl (PR_SET_PDEATHSIG, SIGTERM);
}

TestServer *
test_server_start (const char *dir, const char *const *args)
{
  return test_server_start_on (dir, "ws://127.0.0.1:0", args);
}

TestServer *
test_server_start_on (const char *dir, const char *listen, const char *const *args)
{
  const char *bin = g_getenv ("FUSEBOX_BIN");
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_auto (GStrv) envp = g_get_environ ();
  g_autofree char *state = g_build_filename (dir, "state", NULL);
  g_autofree char *joined = NULL;
  g_autoptr (GError) error = NULL;
  GString *line = g_string_new (NULL);
  TestServer *s = g_new0 (TestServer, 1);
  int out_fd = -1;

  g_ptr_array_add (argv, (char *)(bin != NULL ? bin : "fusebox"));
  g_ptr_array_add (argv, (char *)"serve");
  g_ptr_array_add (argv, (char *)"--listen");
  g_ptr_array_add (argv, (char *)listen);
  for (guint i = 0; args != NULL && args[i] != NULL; i++)
    g_ptr_array_add (argv, (char *)args[i]);
  g_ptr_array_add (argv, NULL);
  envp = g_environ_setenv (envp, "XDG_STATE_HOME", state, TRUE);
  s->dir = g_strdup (dir);
  joined = g_strjoinv (" ", (char **)argv->pdata);
  s->command = g_strdup_printf ("XDG_STATE_HOME=%s %s", state, joined);
  if (!g_spawn_async_with_pipes (NULL, (char **)argv->pdata, envp, G_SPAWN_DO_NOT_REAP_CHILD, test_die_with_parent,
                                 NULL, &s->pid, NULL, &out_fd, NULL, &error))
    {
      fprintf (stderr, "can't start %s: %s\n", s->command, error->message);
      s->url = g_string_free (line, FALSE);
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

int
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

static void
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

static void
on_client_closed (SoupWebsocketConnection *ws, gpointer user_data)
{
  ((TestClient *)user_data)->closed = true;
}

static void
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

static gboolean
on_wait_limit (gpointer data)
{
  *(bool *)data = true;
  return G_SOURCE_REMOVE;
}

TestClient *
test_client_start (const char *url, const char *origin)
{
  return test_client_start_header (url, origin != NULL ? "Origin" : NULL, origin);
}

TestClient *
test_client_start_header (const char *url, const char *name, const char *value)
{
  TestClient *c = g_new0 (TestClient, 1);
  SoupMessage *msg = soup_message_new ("GET", url);

  g_queue_init (&c->inbox);
  c->next_id = 1;
  c->session = soup_session_new ();
  c->strings = g_string_chunk_new (256);
  if (name != NULL)
    soup_message_headers_replace (soup_message_get_request_headers (msg), name, value);
  soup_session_websocket_connect_async (c->session, msg, NULL, NULL, G_PRIORITY_DEFAULT, NULL, on_connected, c);
  g_object_unref (msg);
  return c;
}

bool
test_client_wait_connected (TestClient *c)
{
  bool expired = false;
  guint id = g_timeout_add_seconds (TEST_WAIT_LIMIT_S, on_wait_limit, &expired);

  while (c->ws == NULL && !c->failed && !expired)
    g_main_context_iteration (NULL, TRUE);
  if (!expired)
    g_source_remove (id);
  return c->ws != NULL;
}

TestClient *
test_client_connect (const char *url)
{
  TestClient *c = test_client_start (url, NULL);
  test_client_wait_connected (c);
  return c;
}

void
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
  g_string_chunk_free (c->strings);
  g_free (c);
}

void
test_client_send (TestClient *c, const char *text)
{
  soup_websocket_connection_send_text (c->ws, text);
}

JsonNode *
test_client_take (TestClient *c, TestMatch match, gconstpointer data)
{
  bool expired = false;
  guint id = g_timeout_add_seconds (TEST_WAIT_LIMIT_S, on_wait_limit, &expired);
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

bool
test_match_id (JsonObject *msg, gconstpointer data)
{
  JsonNode *id = json_object_get_member (msg, "id");
  return id != NULL && JSON_NODE_HOLDS_VALUE (id) && json_node_get_value_type (id) == G_TYPE_INT64 &&
         json_node_get_int (id) == *(const gint64 *)data && !json_object_has_member (msg, "method");
}

bool
test_match_note (JsonObject *msg, gconstpointer data)
{
  const TestNoteMatch *m = data;
  JsonObject *params;

  if (g_strcmp0 (json_object_get_string_member_with_default (msg, "method", NULL), m->method) != 0)
    return false;
  if (m->process_id == NULL)
    return true;
  params = json_object_get_object_member (msg, "params");
  return params != NULL &&
         g_strcmp0 (json_object_get_string_member_with_default (params, "processId", NULL), m->process_id) == 0;
}

JsonNode *
test_client_note (TestClient *c, const char *method, const char *process_id)
{
  TestNoteMatch m = { method, process_id };
  return test_client_take (c, test_match_note, &m);
}

JsonNode *
test_client_call (TestClient *c, const char *method, const char *params_json)
{
  gint64 id = c->next_id++;
  g_autofree char *text = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"method\":\"%s\",\"params\":%s}", id, method,
                                           params_json != NULL ? params_json : "{}");

  test_client_send (c, text);
  return test_client_take (c, test_match_id, &id);
}

JsonNode *
test_client_callf (TestClient *c, const char *method, const char *format, ...)
{
  g_autofree char *params = NULL;
  va_list ap;

  va_start (ap, format);
  params = g_strdup_vprintf (format, ap);
  va_end (ap);
  return test_client_call (c, method, params);
}

bool
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
  c->session_id = g_string_chunk_insert (c->strings, json_object_get_string_member (result, "sessionId"));
  c->log_session = g_string_chunk_insert_len (c->strings, c->session_id, strcspn (c->session_id, "."));
  c->run_dir =
    g_string_chunk_insert (c->strings, json_object_get_string_member_with_default (
                                         json_object_get_object_member (result, "environmentInfo"), "runDir", ""));
  json_node_unref (r);
  test_client_send (c, "{\"method\":\"initialized\",\"params\":{}}");
  return true;
}

JsonObject *
test_answer_result (JsonNode *answer)
{
  if (answer == NULL || !json_object_has_member (json_node_get_object (answer), "result"))
    return NULL;
  return json_object_get_object_member (json_node_get_object (answer), "result");
}

gint64
test_answer_error_code (JsonNode *answer)
{
  JsonObject *e;

  if (answer == NULL || !json_object_has_member (json_node_get_object (answer), "error"))
    return 0;
  e = json_object_get_object_member (json_node_get_object (answer), "error");
  return json_object_get_int_member (e, "code");
}

const char *
test_answer_error_message (JsonNode *answer)
{
  if (answer == NULL || !json_object_has_member (json_node_get_object (answer), "error"))
    return "";
  return json_object_get_string_member (json_object_get_object_member (json_node_get_object (answer), "error"),
                                        "message");
}
