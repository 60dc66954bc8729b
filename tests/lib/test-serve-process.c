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
