/* Unit tests of the remote API's message layer (ipc/ipc-rpc-wire.c): decoding
 * every kind of malformed message, strict base64, file:// URIs, and a
 * server driven in-process through a transport seam (ops that record what
 * would be sent): the handshake order, the answers' shapes, and the
 * bounded output queue that disconnects a slow reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib/gstdio.h>

#include "ipc/ipc-rpc-private.h"
#include "tests/lib/test-table.h"
#include "tests/lib/test-util.h"

/* --- decoding ---------------------------------------------------------------- */

typedef struct
{
  const char *text;
  bool ok;
  int code;    /* when !ok */
  bool has_id; /* when !ok: the error goes to the message's id */
  FbRpcMessageKind kind;
} ParseCase;

static void
test_parse_table (void **state)
{
  static const ParseCase cases[] = {
    { "{\"id\":1,\"method\":\"fs/readFile\",\"params\":{\"path\":\"/x\"}}", true, 0, false, FB_RPC_MESSAGE_REQUEST },
    { "{\"id\":\"abc\",\"method\":\"initialize\"}", true, 0, false, FB_RPC_MESSAGE_REQUEST },
    { "{\"method\":\"initialized\",\"params\":null}", true, 0, false, FB_RPC_MESSAGE_NOTIFICATION },
    { "{\"method\":\"initialized\"}", true, 0, false, FB_RPC_MESSAGE_NOTIFICATION },
    { "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"x\"}", true, 0, false, FB_RPC_MESSAGE_REQUEST },
    { "", false, -32600, false },
    { "{", false, -32600, false },
    { "null", false, -32600, false },
    { "42", false, -32600, false },
    { "[{\"id\":1,\"method\":\"x\"}]", false, -32600, false },
    { "{\"id\":1.5,\"method\":\"x\"}", false, -32600, false },
    { "{\"id\":true,\"method\":\"x\"}", false, -32600, false },
    { "{\"id\":[1],\"method\":\"x\"}", false, -32600, false },
    { "{\"id\":1,\"method\":7}", false, -32600, true },
    { "{\"id\":1}", false, -32600, true },
    { "{\"id\":1,\"result\":{}}", false, -32600, true },
    { "{\"id\":1,\"error\":{\"code\":1}}", false, -32600, true },
    { "{\"id\":1,\"method\":\"x\",\"params\":[1,2]}", false, -32602, true },
    { "{\"id\":1,\"method\":\"x\",\"params\":\"p\"}", false, -32602, true },
    { "{\"method\":\"x\",\"params\":3}", false, -32602, false },
    /* Integers at int64's edges are read exactly; past them json-glib 1.6
     * wraps to a wrong value, so they are refused. */
    { "{\"id\":9223372036854775807,\"method\":\"x\"}", true, 0, false, FB_RPC_MESSAGE_REQUEST },
    { "{\"id\":-9223372036854775808,\"method\":\"x\"}", true, 0, false, FB_RPC_MESSAGE_REQUEST },
    { "{\"id\":9223372036854775808,\"method\":\"x\"}", false, -32600, false },
    { "{\"id\":1,\"method\":\"x\",\"params\":{\"n\":-9223372036854775809}}", false, -32600, false },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const ParseCase *c = &cases[i];
      FbRpcMessage msg;
      int code = 0;
      g_autofree char *why = NULL;
      g_autoptr (JsonNode) id = NULL;
      bool ok = fb_rpc_message_parse (c->text, strlen (c->text), &msg, &code, &why, &id);

      if (ok != c->ok)
        fail_msg ("case %u (%s): parse %s", i, c->text, ok ? "succeeded" : why);
      if (ok)
        {
          assert_int_equal (msg.kind, c->kind);
          assert_non_null (msg.method);
          fb_rpc_message_clear (&msg);
        }
      else
        {
          assert_int_equal (code, c->code);
          assert_non_null (why);
          assert_true (strlen (why) > 0);
          assert_int_equal (id != NULL, c->has_id);
        }
    }
}

/* The LEN bytes at TEXT are refused as an invalid request, for a reason
 * that mentions WHY_PART (NULL: any). */
static void
assert_refused (const char *text, gsize len, const char *why_part)
{
  FbRpcMessage msg;
  int code;
  g_autofree char *why = NULL;
  g_autoptr (JsonNode) id = NULL;

  assert_false (fb_rpc_message_parse (text, len, &msg, &code, &why, &id));
  assert_int_equal (code, -32600);
  if (why_part != NULL)
    assert_non_null (strstr (why, why_part));
}

static void
test_parse_bytes (void **state)
{
  static const char nul[] = "{\"id\":1,\"method\":\"a\0b\"}";
  static const char latin1[] = "{\"id\":1,\"method\":\"caf\xe9\"}";

  /* An embedded NUL would silently shorten the text for json-glib. */
  assert_refused (nul, sizeof nul - 1, NULL);
  assert_refused (latin1, sizeof latin1 - 1, NULL);
  /* Over the limit: refused before parsing. */
  assert_refused ("{}", (gsize)FB_RPC_MESSAGE_MAX + 1, "limit");
}

/* The sandbox cache is keyed by the text of params.sandbox: exactly the
 * value the tree holds (the last params, its last sandbox), and nothing
 * else that is called "sandbox". */
static void
test_parse_sandbox_text (void **state)
{
  /* in: a message's text; out: its params.sandbox as the cache keys it, NULL: none */
  static const TestInOut cases[] = {
    { "{\"id\":1,\"method\":\"m\",\"params\":{\"path\":\"/a\",\"sandbox\": {\"x\" : [1, {}]} }}", "{\"x\" : [1, {}]}" },
    { "{\"id\":1,\"method\":\"m\",\"params\":{\"sandbox\":{\"a\":1},\"sandbox\":null}}", "null" },
    { "{\"id\":1,\"method\":\"m\",\"params\":{\"sandbox\":{\"a\":1}},\"params\":{}}", NULL },
    { "{\"id\":1,\"method\":\"m\",\"params\":{\"sandbox\":1},\"params\":{\"sandbox\":\"s\"}}", "\"s\"" },
    { "{\"id\":1,\"method\":\"m\",\"sandbox\":{\"a\":1},\"params\":{}}", NULL },
    { "{\"id\":1,\"method\":\"m\",\"params\":{\"p\":{\"sandbox\":{\"a\":1}}}}", NULL },
    { "{\"id\":1,\"method\":\"m\",\"x\":{\"params\":{\"sandbox\":{\"a\":1}}},\"params\":{}}", NULL },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      FbRpcMessage msg;
      int code = 0;
      g_autofree char *why = NULL;
      g_autoptr (JsonNode) id = NULL;

      if (!fb_rpc_message_parse (cases[i].in, strlen (cases[i].in), &msg, &code, &why, &id))
        fail_msg ("case %u: %s", i, why);
      if (cases[i].out == NULL)
        assert_null (msg.sandbox_text);
      else
        {
          g_autofree char *got = g_strndup (msg.sandbox_text, msg.sandbox_len);
          g_autoptr (JsonNode) reparsed = json_from_string (got, NULL);
          assert_string_equal (got, cases[i].out);
          /* ...and it decodes to the member the methods read. */
          assert_true (json_node_equal (reparsed, json_object_get_member (msg.params, "sandbox")));
        }
      fb_rpc_message_clear (&msg);
    }
}

/* A connection reuses the tree of the previous params.sandbox only when the
 * value is the very same text: each message must decode as if alone. */
static void
test_parse_sandbox_reuse (void **state)
{
  static const char *const texts[] = {
    "{\"id\":1,\"method\":\"m\",\"params\":{\"sandbox\":{\"a\":[1,2]},\"path\":\"/x\"}}",
    "{\"id\":2,\"method\":\"m\",\"params\":{\"path\":\"/y\",\"sandbox\":{\"a\":[1,2]}}}",
    "{\"id\":3,\"method\":\"m\",\"params\":{\"sandbox\":{\"a\":[1,2]} , \"p\":1}}",
    "{\"id\":4,\"method\":\"m\",\"params\":{\"sandbox\":{\"a\":[1,3]}}}",
    "{\"id\":5,\"method\":\"m\",\"params\":{\"sandbox\":1}}",
    "{\"id\":6,\"method\":\"m\",\"params\":{\"sandbox\":12}}",
    "{\"id\":7,\"method\":\"m\",\"params\":{\"sandbox\":12.5}}",
    "{\"id\":8,\"method\":\"m\",\"params\":{\"sandbox\":12}}",
    "{\"id\":9,\"method\":\"m\",\"params\":{\"sandbox\":12}x}",
  };
  static const bool shared[] = { false, true, true, false, false, false, false, false, true };
  FbRpcJsonReuse reuse = { 0 };

  for (guint i = 0; i < G_N_ELEMENTS (texts); i++)
    {
      JsonNode *before = reuse.node != NULL ? json_node_ref (reuse.node) : NULL;
      g_autofree char *why = NULL;
      g_autoptr (JsonNode) alone = json_from_string (texts[i], NULL);
      g_autoptr (JsonNode) got = fb_rpc_json_parse_message (texts[i], strlen (texts[i]), &reuse, NULL, NULL, &why);
      if (alone == NULL)
        {
          /* Invalid text stays invalid, shared prefix or not. */
          assert_null (got);
        }
      else
        {
          JsonNode *sb =
            json_object_get_member (json_object_get_object_member (json_node_get_object (got), "params"), "sandbox");
          assert_non_null (got);
          assert_true (json_node_equal (got, alone));
          if (shared[i] != (before != NULL && sb == before))
            fail_msg ("text %u: sandbox tree %s", i, shared[i] ? "not shared" : "shared");
        }
      if (before != NULL)
        json_node_unref (before);
    }
  fb_rpc_json_reuse_clear (&reuse);
}

/* --- encoding ---------------------------------------------------------------- */

static void
test_encode (void **state)
{
  g_autoptr (JsonNode) id = json_from_string ("\"req-1\"", NULL);
  g_autoptr (JsonNode) data = json_from_string ("{\"why\":\"a \\\"quoted\\\" reason\"}", NULL);
  g_autofree char *e = fb_rpc_encode_error (id, -32050, "Permission denied (os error 13)", data);
  g_autofree char *r = fb_rpc_encode_result (NULL, NULL);
  g_autofree char *n = fb_rpc_encode_notification ("process/output", NULL);
  g_autoptr (JsonNode) pe = json_from_string (e, NULL);
  g_autoptr (JsonNode) pr = json_from_string (r, NULL);
  g_autoptr (JsonNode) pn = json_from_string (n, NULL);
  JsonObject *err;

  assert_non_null (pe);
  assert_string_equal (json_object_get_string_member (json_node_get_object (pe), "id"), "req-1");
  err = json_object_get_object_member (json_node_get_object (pe), "error");
  assert_int_equal (json_object_get_int_member (err, "code"), -32050);
  assert_string_equal (json_object_get_object_member (err, "data") != NULL
                         ? json_object_get_string_member (json_object_get_object_member (err, "data"), "why")
                         : "",
                       "a \"quoted\" reason");
  assert_false (json_object_has_member (json_node_get_object (pe), "jsonrpc"));
  /* No id: the answer goes to -1, as Codex's does. */
  assert_int_equal (json_object_get_int_member (json_node_get_object (pr), "id"), -1);
  assert_string_equal (json_object_get_string_member (json_node_get_object (pn), "method"), "process/output");

  {
    g_autofree char *m = fb_rpc_os_error_message (30);
    assert_string_equal (m, "Read-only file system (os error 30)");
  }
  /* fs/readFile's answer, encoded in place: every length's padding. */
  for (gsize len = 0; len <= 4099; len = len < 9 ? len + 1 : len * 2 + 1)
    {
      g_autofree guint8 *bytes = g_malloc (len + 1);
      g_autofree char *want = NULL;
      g_autofree char *got = NULL;
      g_autofree char *expected = NULL;
      for (gsize i = 0; i < len; i++)
        bytes[i] = (guint8)(i * 37 + 11);
      want = g_base64_encode (bytes, len);
      got = fb_rpc_encode_result_base64 (id, "dataBase64", bytes, len);
      expected = g_strdup_printf ("{\"id\":\"req-1\",\"result\":{\"dataBase64\":\"%s\"}}", want);
      assert_string_equal (got, expected);
    }
}

/* --- base64 and URIs --------------------------------------------------------- */

static void
test_base64 (void **state)
{
  static const TestInOut cases[] = {
    /* out NULL: refused */
    { "", "" },           { "aGk=", "hi" },  { "aGVsbG8=", "hello" },
    { "YWJj", "abc" },    { "aGk", NULL },   { "aGk==", NULL },
    { "a=Gk", NULL },     { "aG k=", NULL }, { "aGl=", NULL }, /* non-canonical trailing bits */
    { "aGVsbG9=", NULL }, { "!!!!", NULL },  { "aGk=aGk=", NULL },
    { "====", NULL },     { "-_-_", NULL }, /* the URL-safe alphabet is not standard base64 */
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree guint8 *d = NULL;
      gsize len = 0;
      bool ok = fb_rpc_base64_decode (cases[i].in, &d, &len);
      if (ok != (cases[i].out != NULL))
        fail_msg ("base64 case %u (%s): %s", i, cases[i].in, ok ? "accepted" : "refused");
      if (ok)
        {
          assert_int_equal (len, strlen (cases[i].out));
          assert_memory_equal (d, cases[i].out, len);
        }
    }
}

static void
test_uris (void **state)
{
  static const TestInOut cases[] = {
    /* out NULL: refused */
    { "file:///etc/hosts", "/etc/hosts" },
    { "file:///a%20b/c%2Fd", "/a b/c/d" },
    { "file://localhost/srv/x", "/srv/x" },
    { "FILE:///upper", "/upper" },
    { "/plain/path with space", "/plain/path with space" },
    { "relative/path", NULL },
    { "file://example.com/x", NULL },
    { "http:///x", NULL },
    { "file:///bad%zz", NULL },
    { "file:///nul%00byte", NULL },
    { "file:///x?q=1", NULL },
    { "file:///x#frag", NULL },
    { "file://", NULL },
    { "", NULL },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *why = NULL;
      g_autofree char *p = fb_rpc_path_from_uri (cases[i].in, &why);
      if ((p != NULL) != (cases[i].out != NULL))
        fail_msg ("uri case %u (%s): %s", i, cases[i].in, p != NULL ? p : why);
      if (p != NULL)
        assert_string_equal (p, cases[i].out);
      else
        assert_non_null (why);
    }
  {
    g_autofree char *u = fb_rpc_path_to_uri ("/a b/%x/ü");
    g_autofree char *why = NULL;
    g_autofree char *back = fb_rpc_path_from_uri (u, &why);
    assert_true (g_str_has_prefix (u, "file:///a%20b/%25x/"));
    assert_string_equal (back, "/a b/%x/ü");
  }
}

/* --- the server through a transport seam ---------------------------------------- */

typedef struct
{
  GPtrArray *sent; /* char* */
  bool writable;
  char *closed_reason;
} Seam;

static bool
seam_can_write (gpointer t)
{
  return ((Seam *)t)->writable;
}

static void
seam_write (gpointer t, const char *text, gsize len)
{
  g_ptr_array_add (((Seam *)t)->sent, g_strndup (text, len));
}

static void
seam_close (gpointer t, const char *reason)
{
  Seam *s = t;
  g_free (s->closed_reason);
  s->closed_reason = g_strdup (reason);
}

static const FbRpcTransportOps seam_ops = { seam_can_write, seam_write, seam_close };

typedef struct
{
  char *dir;
  FbPolicy *policy;
  FbRpcServer *server;
  Seam seam;
  FbRpcConn *conn;
  JsonNode *last; /* the answer last_sent parsed last */
} Harness;

static int
setup (void **state)
{
  Harness *h = g_new0 (Harness, 1);
  g_autoptr (GError) error = NULL;
  g_autofree char *run = NULL;
  FbPolicyVars vars = { 0 };
  FbRpcServerOptions so = { 0 };
  static const char policy[] = "{\"version\":1,\"network\":\"none\",\"rules\":["
                               "{\"path\":\"/\",\"access\":\"read\",\"why\":\"the host\"},"
                               "{\"path\":\"${WORKSPACE}\",\"access\":\"write\",\"why\":\"the workspace\"}]}";

  h->dir = g_dir_make_tmp ("fusebox-rpc-XXXXXX", NULL);
  run = g_build_filename (h->dir, "run", NULL);
  g_mkdir (run, 0700);
  vars.workspace = vars.cwd = vars.home = h->dir;
  vars.run = run;
  h->policy = fb_policy_load_data (policy, -1, "test", &vars, &error);
  assert_non_null (h->policy);
  so.policy = h->policy;
  so.vars = &vars;
  h->server = fb_rpc_server_new (&so, &error);
  assert_non_null (h->server);
  h->seam.sent = g_ptr_array_new_with_free_func (g_free);
  h->seam.writable = true;
  h->conn = fb_rpc_server_accept (h->server, &seam_ops, &h->seam, getuid (), "seam");
  assert_non_null (h->conn);
  *state = h;
  return 0;
}

static int
teardown (void **state)
{
  Harness *h = *state;
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", h->dir);

  if (h->conn != NULL)
    fb_rpc_conn_closed (h->conn);
  fb_rpc_server_free (h->server);
  fb_policy_unref (h->policy);
  g_ptr_array_unref (h->seam.sent);
  g_free (h->seam.closed_reason);
  g_clear_pointer (&h->last, json_node_unref);
  if (system (cmd) != 0)
    return -1;
  g_free (h->dir);
  g_free (h);
  return 0;
}

/* The last answer sent, parsed; the harness keeps it until the next call. */
static JsonObject *
last_sent (Harness *h)
{
  assert_true (h->seam.sent->len > 0);
  g_clear_pointer (&h->last, json_node_unref);
  h->last = json_from_string (g_ptr_array_index (h->seam.sent, h->seam.sent->len - 1), NULL);
  assert_non_null (h->last);
  return json_node_get_object (h->last);
}

static void
receive (Harness *h, const char *text)
{
  fb_rpc_conn_receive (h->conn, text, strlen (text));
  /* fs/... requests run on a worker: wait for their answers. */
  fb_rpc_conn_wait_idle (h->conn);
}

/* Receive TEXT and return the answer (see last_sent). */
static JsonObject *
request (Harness *h, const char *text)
{
  receive (h, text);
  return last_sent (h);
}

static void
test_server_handshake_and_fs (void **state)
{
  Harness *h = *state;
  g_autofree char *file = g_build_filename (h->dir, "f.txt", NULL);
  g_autofree char *text = NULL;
  JsonObject *o;

  o = request (h, "{\"id\":1,\"method\":\"fs/readFile\",\"params\":{\"path\":\"/\"}}");
  assert_int_equal (json_object_get_int_member (json_object_get_object_member (o, "error"), "code"), -32600);
  o = request (h, "{\"id\":2,\"method\":\"initialize\",\"params\":{\"clientName\":\"unit\"}}");
  assert_true (json_object_has_member (json_object_get_object_member (o, "result"), "sessionId"));
  receive (h, "{\"method\":\"initialized\"}");
  g_autofree char *req = g_strdup_printf (
    "{\"id\":3,\"method\":\"fs/writeFile\",\"params\":{\"path\":\"%s\",\"dataBase64\":\"aGk=\"}}", file);
  o = request (h, req);
  assert_int_equal (json_object_get_int_member (o, "id"), 3);
  assert_true (json_object_has_member (o, "result"));
  assert_true (g_file_get_contents (file, &text, NULL, NULL));
  assert_string_equal (text, "hi");
  /* The host outside the workspace is read-only under this policy. */
  o = request (
    h, "{\"id\":4,\"method\":\"fs/writeFile\",\"params\":{\"path\":\"/etc/fusebox-unit\",\"dataBase64\":\"\"}}");
  assert_int_equal (json_object_get_int_member (json_object_get_object_member (o, "error"), "code"), -32050);
  assert_false (g_file_test ("/etc/fusebox-unit", G_FILE_TEST_EXISTS));
}

static void
test_slow_reader_disconnected (void **state)
{
  Harness *h = *state;
  g_autofree char *file = g_build_filename (h->dir, "big", NULL);
  g_autofree char *req = NULL;
  char *big = g_malloc0 (FB_RPC_READ_FILE_MAX);
  guint sent_before;

  memset (big, 'x', FB_RPC_READ_FILE_MAX - 1);
  assert_true (g_file_set_contents (file, big, FB_RPC_READ_FILE_MAX - 1, NULL));
  g_free (big);
  receive (h, "{\"id\":1,\"method\":\"initialize\",\"params\":{\"clientName\":\"slow\"}}");
  receive (h, "{\"method\":\"initialized\"}");
  /* The client stops reading: answers wait in the bounded queue... */
  h->seam.writable = false;
  sent_before = h->seam.sent->len;
  req = g_strdup_printf ("{\"id\":2,\"method\":\"fs/readFile\",\"params\":{\"path\":\"%s\"}}", file);
  /* (each answer is about 11 MB of base64: two fit in the 32 MiB bound) */
  for (guint i = 0; i < 2; i++)
    receive (h, req);
  assert_int_equal (h->seam.sent->len, sent_before);
  assert_null (h->seam.closed_reason);
  assert_true (h->conn->out_bytes <= FB_RPC_QUEUE_MAX);
  /* ... until they pass the bound: then the client is disconnected, and
   * the queue let go, instead of growing. */
  for (guint i = 0; i < 4 && h->seam.closed_reason == NULL; i++)
    receive (h, req);
  assert_non_null (h->seam.closed_reason);
  assert_non_null (strstr (h->seam.closed_reason, "slow reader"));
  assert_int_equal (h->conn->out_bytes, 0);
  /* Nothing more is queued for a closing connection. */
  receive (h, req);
  assert_int_equal (h->conn->out_bytes, 0);
}

static void
test_pipeline_bound_big_messages (void **state)
{
  Harness *h = *state;
  g_autofree char *file = g_build_filename (h->dir, "big-write", NULL);
  g_autofree char *data = NULL;
  g_autofree char *enc = NULL;
  g_autofree char *req = NULL;
  g_autofree char *host = NULL;
  gsize host_len = 0;
  gsize n = 9 * 1024 * 1024; /* 12 MiB of base64: three pass FB_RPC_PENDING_BYTES_MAX */
  guint sent_before;

  receive (h, "{\"id\":1,\"method\":\"initialize\",\"params\":{\"clientName\":\"big\"}}");
  receive (h, "{\"method\":\"initialized\"}");
  sent_before = h->seam.sent->len;
  data = g_malloc (n);
  memset (data, 'b', n);
  enc = g_base64_encode ((const guchar *)data, n);
  req = g_strdup_printf ("{\"id\":2,\"method\":\"fs/writeFile\",\"params\":{\"path\":\"%s\",\"dataBase64\":\"%s\"}}",
                         file, enc);
  assert_true (strlen (req) < FB_RPC_MESSAGE_MAX);
  /* Received one after the other without waiting: past the bound on
   * queued bytes, the loop thread waits for the worker, and every request
   * is still run and answered. */
  for (guint i = 0; i < 4; i++)
    fb_rpc_conn_receive (h->conn, req, strlen (req));
  fb_rpc_conn_wait_idle (h->conn);
  assert_int_equal (h->seam.sent->len, sent_before + 4);
  for (guint i = 0; i < 4; i++)
    {
      g_autoptr (JsonNode) a = json_from_string (g_ptr_array_index (h->seam.sent, sent_before + i), NULL);
      assert_non_null (a);
      assert_true (json_object_has_member (json_node_get_object (a), "result"));
    }
  assert_true (g_file_get_contents (file, &host, &host_len, NULL));
  assert_int_equal (host_len, n);
}

static void
test_writable_again_flushes_in_order (void **state)
{
  Harness *h = *state;

  h->seam.writable = false;
  receive (h, "{\"id\":1,\"method\":\"nope\"}");
  receive (h, "{\"id\":2,\"method\":\"nope\"}");
  assert_int_equal (h->seam.sent->len, 0);
  h->seam.writable = true;
  fb_rpc_conn_writable (h->conn);
  assert_int_equal (h->seam.sent->len, 2);
  assert_non_null (strstr (g_ptr_array_index (h->seam.sent, 0), "\"id\":1"));
  assert_non_null (strstr (g_ptr_array_index (h->seam.sent, 1), "\"id\":2"));
}

/* An fs/open handle outlives its sandbox's place in the view cache: reading
 * and closing it after 64 other sandboxes pushed it out must work (and,
 * under AddressSanitizer, touch nothing freed: the handle's view reports to
 * that sandbox's tee sink). */
static void
test_handle_outlives_cache (void **state)
{
  Harness *h = *state;
  g_autofree char *file = g_build_filename (h->dir, "h.txt", NULL);
  JsonObject *o;

  assert_true (g_file_set_contents (file, "handle", -1, NULL));
  receive (h, "{\"id\":1,\"method\":\"initialize\",\"params\":{\"clientName\":\"h\"}}");
  receive (h, "{\"method\":\"initialized\"}");
  g_autofree char *open_req =
    g_strdup_printf ("{\"id\":2,\"method\":\"fs/open\",\"params\":{\"handleId\":\"h\",\"path\":\"%s\","
                     "\"sandbox\":{\"fuseboxPolicy\":{\"version\":1,\"rules\":[{\"path\":\"/\",\"access\":"
                     "\"read\",\"why\":\"first\"}]}}}}",
                     file);
  o = request (h, open_req);
  assert_true (json_object_has_member (o, "result"));
  for (guint i = 0; i < FB_RPC_VIEW_CACHE_MAX + 2; i++)
    {
      g_autofree char *req = g_strdup_printf (
        "{\"id\":%u,\"method\":\"fs/getMetadata\",\"params\":{\"path\":\"/\",\"sandbox\":{\"fuseboxPolicy\":{"
        "\"version\":1,\"rules\":[{\"path\":\"/\",\"access\":\"read\",\"why\":\"other %u\"}]}}}}",
        10 + i, i);
      assert_true (json_object_has_member (request (h, req), "result"));
    }
  o = request (h, "{\"id\":3,\"method\":\"fs/readBlock\",\"params\":{\"handleId\":\"h\",\"offset\":0,\"len\":6}}");
  assert_string_equal (json_object_get_string_member (json_object_get_object_member (o, "result"), "chunk"),
                       "aGFuZGxl");
  o = request (h, "{\"id\":4,\"method\":\"fs/close\",\"params\":{\"handleId\":\"h\"}}");
  assert_true (json_object_has_member (o, "result"));
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_parse_table), cmocka_unit_test (test_parse_bytes),
                  cmocka_unit_test (test_parse_sandbox_text), cmocka_unit_test (test_parse_sandbox_reuse),
                  cmocka_unit_test (test_encode), cmocka_unit_test (test_base64), cmocka_unit_test (test_uris),
                  cmocka_unit_test_setup_teardown (test_server_handshake_and_fs, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_slow_reader_disconnected, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_writable_again_flushes_in_order, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_pipeline_bound_big_messages, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_handle_outlives_cache, setup, teardown))
