/* fusebox — a test's client of `fusebox serve`: connecting, and the
 * process/ methods, each failing the test on an error answer
 * (tests/lib/test-serve.h). */
#include "tests/lib/test-serve.h"
#include "tests/lib/test-util.h"

TestClient *
test_client_open (const char *url)
{
  TestClient *c = test_client_connect (url);

  if (c->ws == NULL || !test_client_handshake (c, NULL))
    fail_msg ("can't connect to %s", url);
  return c;
}

void
test_process_start (TestClient *c, const char *id, const char *argv_json, const char *cwd, bool pipe_stdin)
{
  g_autofree char *qcwd = test_json_quote (cwd);
  g_autofree char *params = g_strdup_printf (
    "{\"processId\":\"%s\",\"argv\":%s,\"cwd\":%s,\"env\":{\"PATH\":\"/usr/bin:/bin\"},\"tty\":false%s}", id, argv_json,
    qcwd, pipe_stdin ? ",\"pipeStdin\":true" : "");
  g_autoptr (JsonNode) r = test_client_call (c, "process/start", params);

  if (test_answer_result (r) == NULL)
    fail_msg ("process/start %s: %s", id, test_answer_error_message (r));
}

char *
test_process_read (TestClient *c, const char *id, const char *needle, int *ret_exit_code, char **ret_failure)
{
  g_autoptr (GString) out = g_string_new (NULL);
  gint64 after = 0;

  *ret_exit_code = -1;
  for (guint round = 0; round < 600; round++)
    {
      g_autofree char *params =
        g_strdup_printf ("{\"processId\":\"%s\",\"afterSeq\":%" G_GINT64_FORMAT ",\"waitMs\":1000}", id, after);
      g_autoptr (JsonNode) r = test_client_call (c, "process/read", params);
      JsonObject *res = test_answer_result (r);
      JsonArray *chunks;

      if (res == NULL)
        fail_msg ("process/read %s: %s", id, test_answer_error_message (r));
      chunks = json_object_get_array_member (res, "chunks");
      for (guint i = 0; i < json_array_get_length (chunks); i++)
        {
          JsonObject *ch = json_array_get_object_element (chunks, i);
          gsize len = 0;
          g_autofree guchar *data = g_base64_decode (json_object_get_string_member (ch, "chunk"), &len);
          g_string_append_len (out, (const char *)data, (gssize)len);
          after = MAX (after, json_object_get_int_member (ch, "seq"));
        }
      if (json_object_get_boolean_member (res, "exited"))
        *ret_exit_code = (int)json_object_get_int_member (res, "exitCode");
      if (ret_failure != NULL && json_object_has_member (res, "failure") &&
          !json_object_get_null_member (res, "failure"))
        {
          g_free (*ret_failure);
          *ret_failure = g_strdup (json_object_get_string_member (res, "failure"));
        }
      if ((needle != NULL && strstr (out->str, needle) != NULL) || json_object_get_boolean_member (res, "closed"))
        break;
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

void
test_process_write (TestClient *c, const char *id, const char *text, const char *write_id)
{
  g_autofree char *b64 = g_base64_encode ((const guchar *)text, strlen (text));
  g_autofree char *params =
    g_strdup_printf ("{\"processId\":\"%s\",\"chunk\":\"%s\",\"writeId\":\"%s\"}", id, b64, write_id);
  g_autoptr (JsonNode) r = test_client_call (c, "process/write", params);

  if (test_answer_result (r) == NULL)
    fail_msg ("process/write %s: %s", id, test_answer_error_message (r));
}

JsonNode *
test_process_note (TestClient *c, const char *id)
{
  static const char *const methods[] = { "process/output", "process/exited", "process/closed" };

  for (;;)
    {
      for (guint i = 0; i < G_N_ELEMENTS (methods); i++)
        {
          TestNoteMatch m = { methods[i], id };
          for (GList *l = c->inbox.head; l != NULL; l = l->next)
            if (test_match_note (json_node_get_object (l->data), &m))
              {
                JsonNode *n = l->data;
                g_queue_delete_link (&c->inbox, l);
                return n;
              }
        }
      if (c->closed)
        fail_msg ("the connection closed before process %s was over", id);
      g_main_context_iteration (NULL, TRUE);
    }
}

void
test_process_collect (TestClient *c, const char *id, TestProcessOutput *ret)
{
  bool exited = false;
  gint64 last_seq = 0;

  ret->out = g_string_new (NULL);
  ret->err = g_string_new (NULL);
  ret->exit_code = -1;
  ret->denied = false;
  ret->ordered = true;
  for (;;)
    {
      g_autoptr (JsonNode) n = test_process_note (c, id);
      const char *method = json_object_get_string_member (json_node_get_object (n), "method");
      JsonObject *p = json_object_get_object_member (json_node_get_object (n), "params");
      gint64 seq = json_object_get_int_member (p, "seq");
      bool done = false;

      if (strcmp (method, "process/output") == 0)
        {
          gsize len;
          g_autofree guchar *d = g_base64_decode (json_object_get_string_member (p, "chunk"), &len);
          bool is_err = strcmp (json_object_get_string_member (p, "stream"), "stderr") == 0;
          if (exited)
            ret->ordered = false;
          g_string_append_len (is_err ? ret->err : ret->out, (const char *)d, (gssize)len);
        }
      else if (strcmp (method, "process/exited") == 0)
        {
          exited = true;
          ret->exit_code = json_object_get_int_member (p, "exitCode");
          ret->denied = json_object_get_boolean_member (p, "sandboxDenied");
        }
      else
        {
          if (!exited)
            ret->ordered = false;
          done = true;
        }
      /* notifications are sorted by seq, output first */
      if (seq <= last_seq)
        ret->ordered = false;
      last_seq = seq;
      if (done)
        return;
    }
}

void
test_process_output_clear (TestProcessOutput *o)
{
  if (o->out != NULL)
    g_string_free (o->out, TRUE);
  if (o->err != NULL)
    g_string_free (o->err, TRUE);
  memset (o, 0, sizeof *o);
}

/* ---- a group of tests against one server ---- */

TestServe *
test_serve_new (char *dir)
{
  TestServe *t = g_new0 (TestServe, 1);

  t->dir = dir;
  t->ws = g_build_filename (t->dir, "ws", NULL);
  assert_int_equal (g_mkdir_with_parents (t->ws, 0755), 0);
  return t;
}

bool
test_serve_start (TestServe *t, const char *const *args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();

  g_ptr_array_add (argv, (char *)"--workspace");
  g_ptr_array_add (argv, t->ws);
  for (guint i = 0; args != NULL && args[i] != NULL; i++)
    g_ptr_array_add (argv, (char *)args[i]);
  g_ptr_array_add (argv, NULL);
  t->server = test_server_start (t->dir, (const char *const *)argv->pdata);
  return g_str_has_prefix (t->server->url, "ws://");
}

int
test_serve_free (TestServe *t)
{
  int status;

  test_client_free (t->client);
  status = test_server_stop (t->server);
  test_rm_rf (t->dir);
  g_free (t->dir);
  g_free (t->ws);
  g_free (t);
  return status;
}

int
test_serve_group_teardown (void **state)
{
  test_serve_free (*state);
  return 0;
}

int
test_serve_client_setup (void **state)
{
  TestServe *t = *state;

  t->client = test_client_connect (t->server->url);
  if (t->client->ws == NULL)
    return -1;
  return test_client_handshake (t->client, NULL) ? 0 : -1;
}

int
test_serve_client_teardown (void **state)
{
  TestServe *t = *state;

  g_clear_pointer (&t->client, test_client_free);
  return 0;
}
