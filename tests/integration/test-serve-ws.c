/* Integration tests: the real `fusebox serve` driven over WebSocket by a
 * libsoup 3 client: every method, every error code, the denial shape
 * (against files that really exist on the host), sessions (resume, -32010,
 * the detach timeout), log/subscribe, and an agent harness's flow
 * (a marker in the server's private /tmp; the smoke reporter started with
 * a Codex sandbox context and --exit-code 73).
 *
 * Needs root (or a usable /dev/fuse and user namespaces) for process/start;
 * exits 77 without, unless FUSEBOX_TESTS_MUST_RUN=1.  A failure prints the
 * command that starts the same server by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "tests/lib/test-serve.h"
#include "tests/lib/test-util.h"

static TestServe *F; /* T: state/, ws/, ro/ */
static char *ro_dir; /* T/ro */

static char *
b64 (const char *s)
{
  return g_base64_encode ((const guchar *)s, strlen (s));
}

static char *
unb64 (const char *s)
{
  gsize len;
  guchar *d = g_base64_decode (s, &len);
  char *r = g_strndup ((const char *)d, len);
  g_free (d);
  return r;
}

static void
fail_with_server (const char *what)
{
  fprintf (stderr, "%s; reproduce with: %s\n", what, F->server != NULL ? F->server->command : "(no server)");
}

#define ANSWER_OK(a)                                                                                                   \
  do                                                                                                                   \
    {                                                                                                                  \
      if (test_answer_result (a) == NULL)                                                                              \
        {                                                                                                              \
          fprintf (stderr, "unexpected error %" G_GINT64_FORMAT ": %s\n", test_answer_error_code (a),                  \
                   test_answer_error_message (a));                                                                     \
          fail_with_server ("call failed");                                                                            \
        }                                                                                                              \
      assert_non_null (test_answer_result (a));                                                                        \
    }                                                                                                                  \
  while (0)

/* An answer to call (METHOD, FORMAT, ...), params made by printf; an
 * error answer is returned, no answer fails the test. */
#define call(method, ...) answered (test_client_callf (F->client, method, __VA_ARGS__))

static JsonNode *
answered (JsonNode *r)
{
  if (r == NULL)
    fail_with_server ("no answer");
  assert_non_null (r);
  return r;
}

/* --- fixture ----------------------------------------------------------------- */

static int
setup_group (void **state)
{
  g_autofree char *policy = NULL;
  g_autofree char *policy_path = NULL;
  g_autofree char *secret = NULL;
  g_autofree char *ro_file = NULL;
  const char *args[5];

  F = test_serve_new (test_tmpdir ("fusebox-serve"));
  ro_dir = g_build_filename (F->dir, "ro", NULL);
  g_mkdir (ro_dir, 0755);
  secret = g_build_filename (F->ws, "secret.txt", NULL);
  ro_file = g_build_filename (ro_dir, "data.txt", NULL);
  test_write_file (secret, "top secret\n");
  test_write_file (ro_file, "read me\n");
  policy =
    g_strdup_printf ("{\"version\":1,\"network\":\"none\",\"rules\":["
                     "{\"path\":\"/\",\"access\":\"read\",\"why\":\"system files\"},"
                     "{\"path\":\"/tmp\",\"access\":\"write\",\"source\":\"private\",\"why\":\"a private /tmp\"},"
                     "{\"path\":\"${WORKSPACE}\",\"access\":\"write\",\"why\":\"the workspace\"},"
                     "{\"path\":\"${WORKSPACE}/secret.txt\",\"access\":\"deny\",\"why\":\"the secret stays secret\"},"
                     "{\"path\":\"%s\",\"access\":\"read\",\"why\":\"read-only data\"},"
                     "{\"path\":\"%s\",\"access\":\"read\",\"why\":\"the fixtures, wherever the build tree is\"}]}",
                     ro_dir, g_getenv ("FUSEBOX_BUILD_ROOT"));
  policy_path = g_build_filename (F->dir, "policy.json", NULL);
  test_write_file (policy_path, policy);
  args[0] = "--policy";
  args[1] = policy_path;
  args[2] = "--detach-timeout";
  args[3] = "1500";
  args[4] = NULL;
  if (!test_serve_start (F, args))
    return -1;
  *state = F;
  return 0;
}

static int
teardown_group (void **state)
{
  int status = test_serve_free (F);

  /* SIGTERM is a clean stop: the log is closed and the exit status 0. */
  if (!(WIFEXITED (status) && WEXITSTATUS (status) == 0))
    fprintf (stderr, "fusebox serve did not stop cleanly (status %d)\n", status);
  g_free (ro_dir);
  return WIFEXITED (status) && WEXITSTATUS (status) == 0 ? 0 : -1;
}

static void
skip_without_sandbox (void)
{
  if (test_host_lacks ("root") != NULL || test_host_lacks ("fuse") != NULL)
    test_skip_test (true, "process/start needs root and /dev/fuse");
}

/* --- handshake --------------------------------------------------------------- */

static void
test_handshake (void **state)
{
  TestClient *c = test_client_connect (F->server->url);
  g_autoptr (JsonNode) early = NULL;
  g_autoptr (JsonNode) init = NULL;
  g_autoptr (JsonNode) before = NULL;
  g_autoptr (JsonNode) again = NULL;
  g_autoptr (JsonNode) info = NULL;
  JsonObject *r, *env;

  assert_non_null (c->ws);
  early = test_client_call (c, "fs/readFile", "{\"path\":\"/etc/hostname\"}");
  assert_int_equal (test_answer_error_code (early), -32600);
  assert_non_null (strstr (test_answer_error_message (early), "initialize"));

  init = test_client_call (c, "initialize", "{\"clientName\":\"handshake\"}");
  r = test_answer_result (init);
  assert_non_null (r);
  assert_true (strlen (json_object_get_string_member (r, "sessionId")) >= 32);
  env = json_object_get_object_member (r, "environmentInfo");
  assert_non_null (env);
  assert_non_null (json_object_get_string_member (json_object_get_object_member (env, "shell"), "path"));
  assert_true (g_str_has_prefix (json_object_get_string_member (env, "cwd"), "file:///"));
  /* Codex reads every path of environmentInfo as a URI: a plain path makes
   * it refuse the executor ("relative URL without a base"). */
  assert_string_equal (json_object_get_string_member (env, "tempDir"), "file:///tmp");
  assert_true (g_str_has_prefix (json_object_get_string_member (env, "userHomeDir"), "file:///"));
  assert_true (g_str_has_prefix (json_object_get_string_member (env, "executorVersion"), "fusebox "));

  before = test_client_call (c, "fs/readFile", "{\"path\":\"/etc/hostname\"}");
  assert_int_equal (test_answer_error_code (before), -32600);
  assert_non_null (strstr (test_answer_error_message (before), "initialized"));
  again = test_client_call (c, "initialize", "{\"clientName\":\"handshake\"}");
  assert_int_equal (test_answer_error_code (again), -32600);

  test_client_send (c, "{\"method\":\"initialized\"}");
  info = test_client_call (c, "environment/info", "{}");
  assert_non_null (test_answer_result (info));
  test_client_free (c);
}

/* --- fs/... -------------------------------------------------------------------- */

static void
test_fs_roundtrip (void **state)
{
  g_autofree char *hello = b64 ("hello");
  g_autofree char *a = g_build_filename (F->ws, "a.txt", NULL);
  g_autofree char *link = g_build_filename (F->ws, "link", NULL);
  g_autoptr (JsonNode) w = call ("fs/writeFile", "{\"path\":\"file://%s\",\"dataBase64\":\"%s\"}", a, hello);
  g_autoptr (JsonNode) r = NULL;
  g_autoptr (JsonNode) m = NULL;
  g_autofree char *host = NULL;
  g_autofree char *got = NULL;

  ANSWER_OK (w);
  host = test_read_file (a);
  assert_string_equal (host, "hello");
  r = call ("fs/readFile", "{\"path\":\"%s\"}", a);
  ANSWER_OK (r);
  got = unb64 (json_object_get_string_member (test_answer_result (r), "dataBase64"));
  assert_string_equal (got, "hello");
  m = call ("fs/getMetadata", "{\"path\":\"file://%s\"}", a);
  ANSWER_OK (m);
  assert_true (json_object_get_boolean_member (test_answer_result (m), "isFile"));
  assert_false (json_object_get_boolean_member (test_answer_result (m), "isDirectory"));
  assert_false (json_object_get_boolean_member (test_answer_result (m), "isSymlink"));
  assert_int_equal (json_object_get_int_member (test_answer_result (m), "size"), 5);
  assert_true (json_object_get_int_member (test_answer_result (m), "modifiedAtMs") > 0);

  /* createDirectory: recursive by default; not recursive under a missing parent fails */
  {
    g_autoptr (JsonNode) d = call ("fs/createDirectory", "{\"path\":\"%s/d1/d2\"}", F->ws);
    g_autoptr (JsonNode) nr = call ("fs/createDirectory", "{\"path\":\"%s/x/y\",\"recursive\":false}", F->ws);
    g_autofree char *d2 = g_build_filename (F->ws, "d1", "d2", NULL);
    ANSWER_OK (d);
    assert_true (g_file_test (d2, G_FILE_TEST_IS_DIR));
    assert_int_equal (test_answer_error_code (nr), -32004);
  }
  /* readDirectory */
  {
    g_autoptr (JsonNode) l = call ("fs/readDirectory", "{\"path\":\"%s\"}", F->ws);
    JsonArray *e;
    bool seen_a = false, seen_d1 = false;
    ANSWER_OK (l);
    e = json_object_get_array_member (test_answer_result (l), "entries");
    for (guint i = 0; i < json_array_get_length (e); i++)
      {
        JsonObject *o = json_array_get_object_element (e, i);
        const char *n = json_object_get_string_member (o, "fileName");
        if (strcmp (n, "a.txt") == 0)
          seen_a = json_object_get_boolean_member (o, "isFile");
        if (strcmp (n, "d1") == 0)
          seen_d1 = json_object_get_boolean_member (o, "isDirectory");
      }
    assert_true (seen_a);
    assert_true (seen_d1);
  }
  /* canonicalize */
  {
    g_autoptr (JsonNode) c = call ("fs/canonicalize", "{\"path\":\"file://%s/d1/../a.txt\"}", F->ws);
    g_autofree char *want = g_strconcat ("file://", a, NULL);
    ANSWER_OK (c);
    assert_string_equal (json_object_get_string_member (test_answer_result (c), "path"), want);
  }
  /* walk, with its bounds */
  {
    g_autoptr (JsonNode) wk = call ("fs/walk",
                                    "{\"path\":\"%s\",\"options\":{\"maxDepth\":8,\"maxDirectories\":100,"
                                    "\"maxEntries\":1000,\"followDirectorySymlinks\":false}}",
                                    F->ws);
    g_autoptr (JsonNode) small = call ("fs/walk",
                                       "{\"path\":\"%s\",\"options\":{\"maxDepth\":8,\"maxDirectories\":100,"
                                       "\"maxEntries\":1,\"followDirectorySymlinks\":false}}",
                                       F->ws);
    g_autoptr (JsonNode) over = call ("fs/walk",
                                      "{\"path\":\"%s\",\"options\":{\"maxDepth\":65,\"maxDirectories\":1,"
                                      "\"maxEntries\":1,\"followDirectorySymlinks\":false}}",
                                      F->ws);
    g_autofree char *d2uri = g_strdup_printf ("file://%s/d1/d2", F->ws);
    JsonArray *e;
    bool seen = false;
    ANSWER_OK (wk);
    e = json_object_get_array_member (test_answer_result (wk), "entries");
    for (guint i = 0; i < json_array_get_length (e); i++)
      {
        JsonObject *o = json_array_get_object_element (e, i);
        if (strcmp (json_object_get_string_member (o, "path"), d2uri) == 0)
          seen = strcmp (json_object_get_string_member (o, "kind"), "directory") == 0;
      }
    assert_true (seen);
    assert_false (json_object_get_boolean_member (test_answer_result (wk), "truncated"));
    ANSWER_OK (small);
    assert_true (json_object_get_boolean_member (test_answer_result (small), "truncated"));
    assert_int_equal (test_answer_error_code (over), -32600);
  }
  /* copy: a file, a directory only when recursive */
  {
    g_autoptr (JsonNode) cf =
      call ("fs/copy", "{\"sourcePath\":\"%s\",\"destinationPath\":\"%s/b.txt\",\"recursive\":false}", a, F->ws);
    g_autoptr (JsonNode) cd =
      call ("fs/copy", "{\"sourcePath\":\"%s/d1\",\"destinationPath\":\"%s/d3\",\"recursive\":false}", F->ws, F->ws);
    g_autoptr (JsonNode) cr =
      call ("fs/copy", "{\"sourcePath\":\"%s/d1\",\"destinationPath\":\"%s/d3\",\"recursive\":true}", F->ws, F->ws);
    g_autoptr (JsonNode) into = call (
      "fs/copy", "{\"sourcePath\":\"%s/d1\",\"destinationPath\":\"%s/d1/d2/x\",\"recursive\":true}", F->ws, F->ws);
    g_autofree char *b = g_build_filename (F->ws, "b.txt", NULL);
    g_autofree char *bt = NULL;
    g_autofree char *d3d2 = g_build_filename (F->ws, "d3", "d2", NULL);
    ANSWER_OK (cf);
    bt = test_read_file (b);
    assert_string_equal (bt, "hello");
    assert_int_equal (test_answer_error_code (cd), -32600);
    ANSWER_OK (cr);
    assert_true (g_file_test (d3d2, G_FILE_TEST_IS_DIR));
    assert_int_equal (test_answer_error_code (into), -32600);
  }
  /* a symlink made on the host: metadata follows it, remove takes the link itself */
  assert_int_equal (symlink ("a.txt", link), 0);
  {
    g_autoptr (JsonNode) lm = call ("fs/getMetadata", "{\"path\":\"%s\"}", link);
    g_autoptr (JsonNode) rm = call ("fs/remove", "{\"path\":\"%s\"}", link);
    ANSWER_OK (lm);
    assert_true (json_object_get_boolean_member (test_answer_result (lm), "isSymlink"));
    assert_true (json_object_get_boolean_member (test_answer_result (lm), "isFile"));
    ANSWER_OK (rm);
    assert_false (g_file_test (link, G_FILE_TEST_IS_SYMLINK));
    assert_true (g_file_test (a, G_FILE_TEST_IS_REGULAR));
  }
  /* remove: recursive by default, force by default */
  {
    g_autoptr (JsonNode) rd = call ("fs/remove", "{\"path\":\"%s/d3\"}", F->ws);
    g_autoptr (JsonNode) missing = call ("fs/remove", "{\"path\":\"%s/nothing-here\"}", F->ws);
    g_autoptr (JsonNode) strict = call ("fs/remove", "{\"path\":\"%s/nothing-here\",\"force\":false}", F->ws);
    g_autoptr (JsonNode) nonrec = call ("fs/remove", "{\"path\":\"%s/d1\",\"recursive\":false}", F->ws);
    g_autofree char *d3 = g_build_filename (F->ws, "d3", NULL);
    ANSWER_OK (rd);
    assert_false (g_file_test (d3, G_FILE_TEST_EXISTS));
    ANSWER_OK (missing);
    assert_int_equal (test_answer_error_code (strict), -32004);
    assert_int_equal (test_answer_error_code (nonrec), -32603); /* ENOTEMPTY: Codex's "other" */
    assert_non_null (strstr (test_answer_error_message (nonrec), "(os error 39)"));
  }
  /* open, readBlock, close */
  {
    g_autoptr (JsonNode) o = call ("fs/open", "{\"handleId\":\"h1\",\"path\":\"%s\"}", a);
    g_autoptr (JsonNode) dup = call ("fs/open", "{\"handleId\":\"h1\",\"path\":\"%s\"}", a);
    g_autoptr (JsonNode) b1 = call ("fs/readBlock", "{\"handleId\":\"h1\",\"offset\":1,\"len\":3}");
    g_autoptr (JsonNode) b2 = call ("fs/readBlock", "{\"handleId\":\"h1\",\"offset\":0,\"len\":100}");
    g_autoptr (JsonNode) cl = call ("fs/close", "{\"handleId\":\"h1\"}");
    g_autoptr (JsonNode) after = call ("fs/readBlock", "{\"handleId\":\"h1\",\"offset\":0,\"len\":1}");
    g_autoptr (JsonNode) longid =
      call ("fs/open", "{\"handleId\":\"%s\",\"path\":\"%s\"}", "0123456789012345678901234567890123456789", a);
    g_autofree char *c1 = NULL;
    g_autofree char *c2 = NULL;
    ANSWER_OK (o);
    assert_string_equal (json_object_get_string_member (test_answer_result (o), "handleId"), "h1");
    assert_int_equal (test_answer_error_code (dup), -32600);
    ANSWER_OK (b1);
    c1 = unb64 (json_object_get_string_member (test_answer_result (b1), "chunk"));
    assert_string_equal (c1, "ell");
    assert_false (json_object_get_boolean_member (test_answer_result (b1), "eof"));
    ANSWER_OK (b2);
    c2 = unb64 (json_object_get_string_member (test_answer_result (b2), "chunk"));
    assert_string_equal (c2, "hello");
    assert_true (json_object_get_boolean_member (test_answer_result (b2), "eof"));
    ANSWER_OK (cl);
    assert_int_equal (test_answer_error_code (after), -32004);
    assert_int_equal (test_answer_error_code (longid), -32600);
  }
}

/* --- errors: each code, and the connection stays usable ---------------------- */

static void
test_errors (void **state)
{
  g_autoptr (JsonNode) unknown = call ("no/such", "{}");
  g_autoptr (JsonNode) type = call ("fs/readFile", "{\"path\":42}");
  g_autoptr (JsonNode) missing = call ("fs/readFile", "{}");
  g_autoptr (JsonNode) uri = call ("fs/readFile", "{\"path\":\"http://example.com/etc/hostname\"}");
  g_autoptr (JsonNode) rel = call ("fs/readFile", "{\"path\":\"etc/hostname\"}");
  g_autoptr (JsonNode) esc = call ("fs/readFile", "{\"path\":\"file:///tmp/%%zz\"}");
  g_autoptr (JsonNode) nb64 = NULL;
  g_autoptr (JsonNode) notfound = call ("fs/readFile", "{\"path\":\"%s/does-not-exist\"}", F->ws);
  g_autoptr (JsonNode) still = NULL;
  g_autofree char *big = NULL;
  JsonObject *o;

  assert_int_equal (test_answer_error_code (unknown), -32601);
  assert_int_equal (test_answer_error_code (type), -32602);
  assert_int_equal (test_answer_error_code (missing), -32602);
  assert_int_equal (test_answer_error_code (uri), -32602);
  assert_int_equal (test_answer_error_code (rel), -32602);
  assert_int_equal (test_answer_error_code (esc), -32602);
  nb64 = call ("fs/writeFile", "{\"path\":\"%s/x.txt\",\"dataBase64\":\"not base64!\"}", F->ws);
  assert_int_equal (test_answer_error_code (nb64), -32600);
  assert_non_null (strstr (test_answer_error_message (nb64), "base64"));
  assert_int_equal (test_answer_error_code (notfound), -32004);
  assert_string_equal (test_answer_error_message (notfound), "No such file or directory (os error 2)");

  /* Undecodable messages are answered on id -1. */
  for (guint i = 0; i < 4; i++)
    {
      static const char *const bad[] = { "{", "[1,2]", "{\"id\":{\"x\":1},\"method\":\"fs/readFile\"}",
                                         "{\"method\":\"nope/notify\"}" };
      g_autoptr (JsonNode) e = NULL;
      gint64 minus_one = -1;
      test_client_send (F->client, bad[i]);
      e = test_client_take (F->client, test_match_id, &minus_one);
      assert_non_null (e);
      assert_int_equal (test_answer_error_code (e), -32600);
    }
  /* params of the wrong type */
  test_client_send (F->client, "{\"id\":900,\"method\":\"fs/readFile\",\"params\":[1]}");
  {
    gint64 id = 900;
    g_autoptr (JsonNode) e = test_client_take (F->client, test_match_id, &id);
    assert_int_equal (test_answer_error_code (e), -32602);
  }
  /* Oversized (past 16 MiB, within the framing's slack the stream
   * allows): an error, and the connection still answers. */
  big = g_malloc (16 * 1024 * 1024 + 2);
  memset (big, ' ', 16 * 1024 * 1024 + 1);
  big[16 * 1024 * 1024 + 1] = '\0';
  test_client_send (F->client, big);
  {
    gint64 minus_one = -1;
    g_autoptr (JsonNode) e = test_client_take (F->client, test_match_id, &minus_one);
    assert_non_null (e);
    assert_int_equal (test_answer_error_code (e), -32600);
    assert_non_null (strstr (test_answer_error_message (e), "limit"));
  }
  still = call ("fs/getMetadata", "{\"path\":\"%s\"}", F->ws);
  o = test_answer_result (still);
  assert_non_null (o);
  assert_true (json_object_get_boolean_member (o, "isDirectory"));
}

/* --- the denial shape --------------------------------------------------------- */

static void
check_denial (JsonNode *answer, const char *path, const char *message, const char *decision, const char *access,
              const char *why)
{
  JsonObject *e, *data;

  assert_int_equal (test_answer_error_code (answer), -32050);
  e = json_object_get_object_member (json_node_get_object (answer), "error");
  assert_string_equal (json_object_get_string_member (e, "message"), message);
  data = json_object_get_object_member (e, "data");
  assert_non_null (data);
  assert_string_equal (json_object_get_string_member (data, "path"), path);
  assert_string_equal (json_object_get_string_member (data, "decision"), decision);
  assert_string_equal (json_object_get_string_member (data, "access"), access);
  assert_string_equal (json_object_get_string_member (data, "why"), why);
  assert_true (strlen (json_object_get_string_member (data, "rule")) > 0);
}

static void
test_denial (void **state)
{
  g_autofree char *secret = g_build_filename (F->ws, "secret.txt", NULL);
  g_autofree char *ro_file = g_build_filename (ro_dir, "data.txt", NULL);
  g_autofree char *data = b64 ("overwritten");

  /* The files exist on the host: a denial is not a missing file. */
  assert_true (g_file_test (secret, G_FILE_TEST_IS_REGULAR));
  assert_true (g_file_test (ro_file, G_FILE_TEST_IS_REGULAR));

  g_autoptr (JsonNode) r = call ("fs/readFile", "{\"path\":\"%s\"}", secret);
  check_denial (r, secret, "Permission denied (os error 13)", "deny", "read", "the secret stays secret");
  g_autoptr (JsonNode) w = call ("fs/writeFile", "{\"path\":\"%s\",\"dataBase64\":\"%s\"}", ro_file, data);
  check_denial (w, ro_file, "Read-only file system (os error 30)", "readonly", "write", "read-only data");
  g_autoptr (JsonNode) w2 = call ("fs/writeFile", "{\"path\":\"%s\",\"dataBase64\":\"%s\"}", secret, data);
  assert_int_equal (test_answer_error_code (w2), -32050);
  g_autofree char *after = test_read_file (ro_file);
  assert_string_equal (after, "read me\n");

  g_autoptr (JsonNode) ex = call ("policy/explain", "{\"path\":\"file://%s\"}", secret);
  ANSWER_OK (ex);
  assert_string_equal (json_object_get_string_member (test_answer_result (ex), "access"), "deny");
  assert_string_equal (json_object_get_string_member (test_answer_result (ex), "why"), "the secret stays secret");

  /* Logged like a FUSE access, with the session as the caller. */
  g_autofree char *log_path = g_build_filename (F->client->run_dir, "access.jsonl", NULL);
  g_autofree char *log = test_read_file (log_path);
  assert_non_null (log);
  g_autofree char *want_session = g_strdup_printf ("\"session\":\"%s\"", F->client->log_session);
  {
    g_auto (GStrv) lines = g_strsplit (log, "\n", -1);
    bool found = false;
    for (guint i = 0; lines[i] != NULL && !found; i++)
      found = strstr (lines[i], want_session) != NULL && strstr (lines[i], "\"decision\":\"deny\"") != NULL &&
              strstr (lines[i], "secret.txt") != NULL && strstr (lines[i], "the secret stays secret") != NULL;
    assert_true (found);
  }
}

/* --- sessions ------------------------------------------------------------------ */

static void
test_session_attached_elsewhere (void **state)
{
  TestClient *b = test_client_connect (F->server->url);
  g_autofree char *params =
    g_strdup_printf ("{\"clientName\":\"b\",\"resumeSessionId\":\"%s\"}", F->client->session_id);
  g_autoptr (JsonNode) r = test_client_call (b, "initialize", params);
  g_autoptr (JsonNode) u = NULL;

  assert_int_equal (test_answer_error_code (r), -32010);
  u = test_client_call (b, "initialize", "{\"clientName\":\"b\",\"resumeSessionId\":\"no-such-session\"}");
  assert_int_equal (test_answer_error_code (u), -32600);
  test_client_free (b);
}

static bool
process_with_arg_exists (const char *arg)
{
  g_autoptr (GArray) pids = test_proc_pids ();

  for (guint i = 0; i < pids->len; i++)
    if (test_proc_has_arg (g_array_index (pids, pid_t, i), arg))
      return true;
  return false;
}

static void
start_sleep (TestClient *c, const char *id, const char *seconds)
{
  g_autofree char *params = g_strdup_printf (
    "{\"processId\":\"%s\",\"argv\":[\"/bin/sleep\",\"%s\"],\"cwd\":\"%s\",\"env\":{\"PATH\":\"/usr/bin:/bin\"},"
    "\"tty\":false}",
    id, seconds, F->ws);
  g_autoptr (JsonNode) r = test_client_call (c, "process/start", params);
  assert_non_null (test_answer_result (r));
}

static void
test_resume_and_detach_timeout (void **state)
{
  TestClient *a, *b, *c;
  g_autofree char *sid = NULL;
  g_autofree char *cid = NULL;
  bool gone = false;

  skip_without_sandbox ();
  /* Resumed within the detach timeout: the process is still there. */
  a = test_client_connect (F->server->url);
  assert_true (test_client_handshake (a, NULL));
  start_sleep (a, "s1", "97.531");
  sid = g_strdup (a->session_id);
  test_client_free (a);
  b = test_client_connect (F->server->url);
  assert_true (test_client_handshake (b, sid));
  {
    g_autoptr (JsonNode) r = test_client_call (b, "process/read", "{\"processId\":\"s1\"}");
    g_autoptr (JsonNode) t = NULL;
    g_autoptr (JsonNode) ex = NULL;
    g_autoptr (JsonNode) cl = NULL;
    assert_non_null (test_answer_result (r));
    assert_false (json_object_get_boolean_member (test_answer_result (r), "exited"));
    t = test_client_call (b, "process/terminate", "{\"processId\":\"s1\"}");
    assert_true (json_object_get_boolean_member (test_answer_result (t), "running"));
    ex = test_client_note (b, "process/exited", "s1");
    assert_non_null (ex);
    assert_int_equal (
      json_object_get_int_member (json_object_get_object_member (json_node_get_object (ex), "params"), "exitCode"),
      128 + SIGKILL);
    cl = test_client_note (b, "process/closed", "s1");
    assert_non_null (cl);
  }
  test_client_free (b);

  /* Not resumed: after the detach timeout (1.5 s here) the process is
   * terminated and the session forgotten. */
  c = test_client_connect (F->server->url);
  assert_true (test_client_handshake (c, NULL));
  start_sleep (c, "s2", "86.420");
  cid = g_strdup (c->session_id);
  for (guint i = 0; i < 100 && !process_with_arg_exists ("86.420"); i++)
    g_usleep (50000);
  assert_true (process_with_arg_exists ("86.420"));
  test_client_free (c);
  for (guint i = 0; i < TEST_WAIT_LIMIT_S * 10 && !gone; i++)
    {
      gone = !process_with_arg_exists ("86.420");
      if (!gone)
        g_usleep (100000);
    }
  assert_true (gone);
  {
    TestClient *d = test_client_connect (F->server->url);
    g_autofree char *params = g_strdup_printf ("{\"clientName\":\"d\",\"resumeSessionId\":\"%s\"}", cid);
    g_autoptr (JsonNode) r = test_client_call (d, "initialize", params);
    assert_int_equal (test_answer_error_code (r), -32600);
    test_client_free (d);
  }
}

/* --- log/subscribe, policy/explain --------------------------------------------- */

static void
test_log_subscribe (void **state)
{
  g_autoptr (JsonNode) s = call ("log/subscribe", "{\"filter\":{\"op\":[\"create\",\"unlink\"]}}");
  g_autoptr (JsonNode) w = NULL;
  g_autoptr (JsonNode) ev = NULL;
  g_autoptr (JsonNode) u = NULL;
  g_autoptr (JsonNode) u2 = NULL;
  g_autoptr (JsonNode) bad = call ("log/subscribe", "{\"filter\":{\"color\":\"red\"}}");
  g_autofree char *data = b64 ("logged");
  g_autofree char *path = g_build_filename (F->ws, "logged.txt", NULL);
  const char *sub;
  JsonObject *p;

  ANSWER_OK (s);
  sub = json_object_get_string_member (test_answer_result (s), "subscriptionId");
  assert_int_equal (test_answer_error_code (bad), -32602);
  w = call ("fs/writeFile", "{\"path\":\"%s\",\"dataBase64\":\"%s\"}", path, data);
  ANSWER_OK (w);
  ev = test_client_note (F->client, "log/event", NULL);
  assert_non_null (ev);
  p = json_object_get_object_member (json_node_get_object (ev), "params");
  assert_string_equal (json_object_get_string_member (p, "op"), "create");
  assert_string_equal (json_object_get_string_member (p, "path"), path);
  assert_string_equal (json_object_get_string_member (p, "session"), F->client->log_session);
  assert_string_equal (json_object_get_string_member (p, "decision"), "allow");
  assert_true (json_object_has_member (p, "seq"));
  u = call ("log/unsubscribe", "{\"subscriptionId\":\"%s\"}", sub);
  ANSWER_OK (u);
  u2 = call ("log/unsubscribe", "{\"subscriptionId\":\"%s\"}", sub);
  assert_int_equal (test_answer_error_code (u2), -32004);
}

/* --- processes ------------------------------------------------------------------ */

static void
test_harness_flow (void **state)
{
  g_autofree char *name = g_strdup_printf ("fusebox-serve-marker-%d", (int)getpid ());
  g_autofree char *host_marker = g_build_filename ("/tmp", name, NULL);
  g_autofree char *sandbox_data = b64 ("written by the agent");
  g_autofree char *denied = g_build_filename (F->ws, "denied-marker", NULL);
  g_autofree char *allowed = g_build_filename (F->ws, "allowed.txt", NULL);
  g_autofree char *smoke = g_build_filename (g_getenv ("FUSEBOX_BUILD_ROOT"), "fixtures", "fb-smoke", NULL);

  /* 1. A marker in the server's private /tmp: readable back through the
   *    API, while the host's /tmp file of the same name is untouched. */
  test_write_file (host_marker, "the host's own file\n");
  g_autoptr (JsonNode) w =
    call ("fs/writeFile", "{\"path\":\"file:///tmp/%s\",\"dataBase64\":\"%s\"}", name, sandbox_data);
  ANSWER_OK (w);
  g_autoptr (JsonNode) r = call ("fs/readFile", "{\"path\":\"/tmp/%s\"}", name);
  ANSWER_OK (r);
  g_autofree char *got = unb64 (json_object_get_string_member (test_answer_result (r), "dataBase64"));
  assert_string_equal (got, "written by the agent");
  g_autofree char *host_text = test_read_file (host_marker);
  assert_string_equal (host_text, "the host's own file\n");
  g_unlink (host_marker);

  /* 2. The smoke reporter in a sandbox: workspace writable, one marker
   *    denied (it exists on the host), network restricted, exit code 73. */
  skip_without_sandbox ();
  test_write_file (denied, "denied marker\n");
  assert_true (g_file_test (denied, G_FILE_TEST_IS_REGULAR));
  assert_true (g_file_test (smoke, G_FILE_TEST_IS_EXECUTABLE));
  g_autofree char *sandbox = g_strdup_printf (
    "{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":\"restricted\",\"entries\":["
    "{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"root\"}},\"access\":\"read\"},"
    "{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"project_roots\"}},\"access\":\"write\"},"
    "{\"path\":{\"type\":\"path\",\"path\":\"file://%s\"},\"access\":\"deny\"}]},\"network\":\"restricted\"},"
    "\"cwd\":\"file://%s\",\"workspaceRoots\":[\"file://%s\"],\"windowsSandboxLevel\":\"disabled\"}",
    denied, F->ws, F->ws);
  /* The network check aims at a listener of ours on the host's loopback:
   * the sandbox has a loopback of its own, so its connect must fail and
   * the listener must see nothing.  No traffic leaves the machine. */
  int listener = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t sin_len = sizeof sin;
  int listen_port;
  assert_true (listener >= 0);
  assert_int_equal (bind (listener, (struct sockaddr *)&sin, sizeof sin), 0);
  assert_int_equal (listen (listener, 8), 0);
  assert_int_equal (getsockname (listener, (struct sockaddr *)&sin, &sin_len), 0);
  listen_port = ntohs (sin.sin_port);
  g_autofree char *params =
    g_strdup_printf ("{\"processId\":\"smoke\",\"argv\":[\"%s\",\"--exit-code\",\"73\",\"--denied-write\",\"%s\","
                     "\"--allowed-write\",\"%s\",\"--connect\",\"127.0.0.1:%d\"],\"cwd\":\"file://%s\","
                     "\"env\":{\"PATH\":\"/usr/bin:/"
                     "bin\",\"ASAN_OPTIONS\":\"detect_leaks=0\"},\"tty\":false,\"pipeStdin\":false,\"arg0\":null,"
                     "\"sandbox\":%s}",
                     smoke, denied, allowed, listen_port, F->ws, sandbox);
  g_autoptr (JsonNode) start = test_client_call (F->client, "process/start", params);
  ANSWER_OK (start);
  assert_string_equal (json_object_get_string_member (test_answer_result (start), "processId"), "smoke");
  TestProcessOutput col = { 0 };
  test_process_collect (F->client, "smoke", &col);
  if (col.exit_code != 73)
    fprintf (stderr, "stdout: %s\nstderr: %s\n", col.out->str, col.err->str);
  assert_int_equal (col.exit_code, 73);
  assert_true (col.ordered);
  assert_true (col.denied);
  g_autoptr (JsonNode) report = json_from_string (col.out->str, NULL);
  assert_non_null (report);
  JsonObject *rep = json_node_get_object (report);
  assert_string_equal (json_object_get_string_member (rep, "denied_write"), "EACCES");
  assert_string_equal (json_object_get_string_member (rep, "allowed_write"), "OK");
  assert_string_not_equal (json_object_get_string_member (rep, "connect"), "OK");
  {
    int c = accept (listener, NULL, NULL);
    int e = errno;
    if (c >= 0)
      close (c);
    close (listener);
    /* nothing came in: the listener's queue is empty */
    assert_int_equal (c, -1);
    assert_int_equal (e, EAGAIN);
  }
  assert_string_equal (json_object_get_string_member (rep, "proc_fstype"), "proc");
  assert_string_equal (json_object_get_string_member (rep, "CapEff"), "0000000000000000");
  assert_int_equal (json_object_get_int_member (rep, "NoNewPrivs"), 1);
  assert_int_equal (json_object_get_int_member (rep, "Seccomp"), 2);
  {
    /* New namespaces: none of them the test's own. */
    static const char *const kinds[] = { "user", "mnt", "pid", "net" };
    JsonObject *ns = json_object_get_object_member (rep, "ns");
    for (guint i = 0; i < G_N_ELEMENTS (kinds); i++)
      {
        g_autofree char *link = g_strdup_printf ("/proc/self/ns/%s", kinds[i]);
        g_autofree char *mine = g_file_read_link (link, NULL);
        assert_non_null (mine);
        assert_string_not_equal (json_object_get_string_member (ns, kinds[i]), mine);
      }
  }
  g_autofree char *denied_text = test_read_file (denied);
  assert_string_equal (denied_text, "denied marker\n");
  {
    /* The sandboxed process's own accesses went through its FUSE view into
     * the same access log: the refused write is there, as a FUSE access
     * (the caller is the process itself, pid and all), and as a record of
     * the session that started it. */
    g_autofree char *log_path = g_build_filename (F->client->run_dir, "access.jsonl", NULL);
    g_autofree char *log = test_read_file (log_path);
    g_autofree char *want_session = g_strdup_printf ("\"session\":\"%s\"", F->client->log_session);
    g_auto (GStrv) lines = NULL;
    bool found = false;
    assert_non_null (log);
    lines = g_strsplit (log, "\n", -1);
    for (guint i = 0; lines[i] != NULL && !found; i++)
      found = strstr (lines[i], "denied-marker") != NULL && strstr (lines[i], "\"decision\":\"deny\"") != NULL &&
              strstr (lines[i], want_session) != NULL && strstr (lines[i], "\"pid\":0,") == NULL;
    assert_true (found);
  }
  {
    g_autofree char *allowed_text = test_read_file (allowed);
    assert_non_null (allowed_text);
  }
  test_process_output_clear (&col);
}

static void
test_process_io (void **state)
{
  g_autofree char *p1 = NULL;
  g_autofree char *hi = b64 ("hi\n");
  g_autoptr (JsonNode) s = NULL;
  g_autoptr (JsonNode) w1 = NULL;
  g_autoptr (JsonNode) w2 = NULL;
  g_autoptr (JsonNode) sig = NULL;
  g_autoptr (JsonNode) rd = NULL;
  g_autoptr (JsonNode) dup = NULL;
  g_autoptr (JsonNode) empty = NULL;
  g_autoptr (JsonNode) unk = NULL;
  g_autoptr (JsonNode) term = NULL;
  g_autoptr (JsonNode) badsig = NULL;
  TestProcessOutput col = { 0 };

  skip_without_sandbox ();
  p1 = g_strdup_printf ("{\"processId\":\"cat\",\"argv\":[\"/bin/cat\"],\"cwd\":\"%s\",\"env\":{},\"tty\":false,"
                        "\"pipeStdin\":true}",
                        F->ws);
  s = call ("process/start", "%s", p1);
  ANSWER_OK (s);
  dup = call ("process/start", "%s", p1);
  assert_int_equal (test_answer_error_code (dup), -32600);
  /* The same writeId twice: written once. */
  w1 = call ("process/write", "{\"processId\":\"cat\",\"chunk\":\"%s\",\"writeId\":\"w1\"}", hi);
  w2 = call ("process/write", "{\"processId\":\"cat\",\"chunk\":\"%s\",\"writeId\":\"w1\"}", hi);
  assert_string_equal (json_object_get_string_member (test_answer_result (w1), "status"), "accepted");
  assert_string_equal (json_object_get_string_member (test_answer_result (w2), "status"), "accepted");
  {
    g_autoptr (JsonNode) o = test_client_note (F->client, "process/output", "cat");
    g_autofree char *text = unb64 (
      json_object_get_string_member (json_object_get_object_member (json_node_get_object (o), "params"), "chunk"));
    assert_string_equal (text, "hi\n");
  }
  /* Replay through process/read: the retained chunk, once. */
  rd = call ("process/read", "{\"processId\":\"cat\",\"afterSeq\":0,\"maxBytes\":1000}");
  ANSWER_OK (rd);
  assert_int_equal (json_array_get_length (json_object_get_array_member (test_answer_result (rd), "chunks")), 1);
  assert_int_equal (json_object_get_int_member (test_answer_result (rd), "nextSeq"), 2);
  assert_false (json_object_get_boolean_member (test_answer_result (rd), "exited"));
  badsig = call ("process/signal", "{\"processId\":\"cat\",\"signal\":\"hangup\"}");
  assert_int_equal (test_answer_error_code (badsig), -32602);
  sig = call ("process/signal", "{\"processId\":\"cat\",\"signal\":\"interrupt\"}");
  ANSWER_OK (sig);
  test_process_collect (F->client, "cat", &col);
  assert_int_equal (col.exit_code, 128 + SIGINT);
  assert_true (col.ordered);
  assert_false (col.denied);
  test_process_output_clear (&col);

  empty = call ("process/start", "{\"processId\":\"e\",\"argv\":[],\"cwd\":\"%s\",\"env\":{},\"tty\":false}", F->ws);
  assert_int_equal (test_answer_error_code (empty), -32602);
  unk = call ("process/write", "{\"processId\":\"nobody\",\"chunk\":\"%s\",\"writeId\":\"w\"}", hi);
  assert_string_equal (json_object_get_string_member (test_answer_result (unk), "status"), "unknownProcess");
  term = call ("process/terminate", "{\"processId\":\"nobody\"}");
  assert_false (json_object_get_boolean_member (test_answer_result (term), "running"));

  /* A tty: output arrives on the "pty" stream. */
  {
    g_autoptr (JsonNode) t =
      call ("process/start",
            "{\"processId\":\"tty\",\"argv\":[\"/bin/sh\",\"-c\",\"test -t 1 && echo is-a-tty\"],"
            "\"cwd\":\"%s\",\"env\":{\"PATH\":\"/usr/bin:/bin\"},\"tty\":true}",
            F->ws);
    g_autoptr (JsonNode) o = NULL;
    JsonObject *p;
    g_autofree char *text = NULL;
    ANSWER_OK (t);
    o = test_client_note (F->client, "process/output", "tty");
    assert_non_null (o);
    p = json_object_get_object_member (json_node_get_object (o), "params");
    assert_string_equal (json_object_get_string_member (p, "stream"), "pty");
    text = unb64 (json_object_get_string_member (p, "chunk"));
    assert_non_null (strstr (text, "is-a-tty"));
  }
}

/* --- many clients ----------------------------------------------------------------- */

static void
test_hundred_clients (void **state)
{
  TestClient *c[100];
  g_autofree char *a = g_build_filename (F->ws, "many.txt", NULL);

  test_write_file (a, "many");
  for (guint i = 0; i < G_N_ELEMENTS (c); i++)
    c[i] = test_client_start (F->server->url, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (c); i++)
    {
      assert_true (test_client_wait_connected (c[i]));
      assert_true (test_client_handshake (c[i], NULL));
    }
  for (guint i = 0; i < G_N_ELEMENTS (c); i++)
    {
      g_autofree char *params = g_strdup_printf ("{\"path\":\"%s\"}", a);
      g_autoptr (JsonNode) r = test_client_call (c[i], "fs/readFile", params);
      assert_non_null (test_answer_result (r));
    }
  for (guint i = 0; i < G_N_ELEMENTS (c); i++)
    test_client_free (c[i]);
}

static void
test_origin_refused (void **state)
{
  TestClient *c = test_client_start (F->server->url, "https://example.com");
  assert_false (test_client_wait_connected (c));
  test_client_free (c);
}

/* --- pipelining: requests take effect in the order received ----------------- */

static bool
match_answer (JsonObject *msg, gconstpointer data)
{
  return json_object_has_member (msg, "id") && !json_object_has_member (msg, "method");
}

/* The next answer, whatever its id: answers must come in request order. */
static JsonNode *
next_answer (void)
{
  return test_client_take (F->client, match_answer, NULL);
}

#define PIPE_ROUNDS 150 /* 300 requests: past FB_RPC_PENDING_MAX (64) queued at once */

static void
test_pipelined_write_read (void **state)
{
  g_autofree char *path = g_build_filename (F->ws, "pipelined.txt", NULL);
  g_autofree char *host = NULL;
  g_autofree char *last = NULL;
  /* What a Codex harness sends with every call: the workspace writable. */
  g_autofree char *sandbox =
    g_strdup_printf ("{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":\"restricted\",\"entries\":["
                     "{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"root\"}},\"access\":\"read\"},"
                     "{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"project_roots\"}},\"access\":\"write\"}]},"
                     "\"network\":\"restricted\"},\"cwd\":\"file://%s\",\"workspaceRoots\":[\"file://%s\"],"
                     "\"windowsSandboxLevel\":\"disabled\"}",
                     F->ws, F->ws);
  gint64 first = F->client->next_id;

  /* Every request sent before any answer is read: a worker runs the fs
   * calls while the loop thread decodes the next ones. */
  for (int i = 0; i < PIPE_ROUNDS; i++)
    {
      g_autofree char *data = g_strdup_printf ("round %d of the pipelined writes", i);
      g_autofree char *enc = b64 (data);
      g_autofree char *w =
        g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"method\":\"fs/writeFile\",\"params\":{\"path\":\"file://%s\","
                         "\"dataBase64\":\"%s\",\"sandbox\":%s}}",
                         first + 2 * i, path, enc, sandbox);
      g_autofree char *r = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT
                                            ",\"method\":\"fs/readFile\",\"params\":{\"path\":\"%s\",\"sandbox\":%s}}",
                                            first + 2 * i + 1, path, sandbox);
      test_client_send (F->client, w);
      test_client_send (F->client, r);
      g_free (last);
      last = g_steal_pointer (&data);
    }
  F->client->next_id = first + 2 * PIPE_ROUNDS;
  for (int i = 0; i < PIPE_ROUNDS; i++)
    {
      g_autoptr (JsonNode) w = next_answer ();
      g_autoptr (JsonNode) r = next_answer ();
      g_autofree char *want = g_strdup_printf ("round %d of the pipelined writes", i);
      g_autofree char *got = NULL;

      assert_non_null (w);
      assert_non_null (r);
      /* In request order, and each read sees the write just before it. */
      assert_int_equal (json_object_get_int_member (json_node_get_object (w), "id"), first + 2 * i);
      assert_int_equal (json_object_get_int_member (json_node_get_object (r), "id"), first + 2 * i + 1);
      ANSWER_OK (w);
      ANSWER_OK (r);
      got = unb64 (json_object_get_string_member (test_answer_result (r), "dataBase64"));
      assert_string_equal (got, want);
    }
  host = test_read_file (path);
  assert_string_equal (host, last);
}

static void
test_pipelined_write_then_start (void **state)
{
  g_autofree char *path = g_build_filename (F->ws, "before-start.txt", NULL);
  g_autofree char *enc = b64 ("written just before process/start");
  g_autofree char *w = NULL;
  g_autofree char *p = NULL;
  g_autoptr (JsonNode) wa = NULL;
  g_autoptr (JsonNode) pa = NULL;
  gint64 id = F->client->next_id;
  TestProcessOutput col = { 0 };

  skip_without_sandbox ();
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  /* Sent together: process/start runs on the loop thread, fs/writeFile on a
   * worker, and the process must still see the file. */
  w = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT
                       ",\"method\":\"fs/writeFile\",\"params\":{\"path\":\"%s\",\"dataBase64\":\"%s\"}}",
                       id, path, enc);
  p = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"method\":\"process/start\",\"params\":{\"processId\":\"catter\","
                       "\"argv\":[\"/bin/cat\",\"%s\"],\"cwd\":\"%s\",\"env\":{},\"tty\":false}}",
                       id + 1, path, F->ws);
  F->client->next_id = id + 2;
  test_client_send (F->client, w);
  test_client_send (F->client, p);
  wa = next_answer ();
  assert_non_null (wa);
  assert_int_equal (json_object_get_int_member (json_node_get_object (wa), "id"), id);
  ANSWER_OK (wa);
  pa = test_client_take (F->client, test_match_id, &(gint64){ id + 1 });
  ANSWER_OK (pa);
  test_process_collect (F->client, "catter", &col);
  assert_int_equal (col.exit_code, 0);
  assert_string_equal (col.out->str, "written just before process/start");
  test_process_output_clear (&col);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_handshake),
    cmocka_unit_test (test_origin_refused),
    TEST_SERVE_TEST (test_fs_roundtrip),
    TEST_SERVE_TEST (test_errors),
    TEST_SERVE_TEST (test_denial),
    TEST_SERVE_TEST (test_session_attached_elsewhere),
    TEST_SERVE_TEST (test_log_subscribe),
    TEST_SERVE_TEST (test_harness_flow),
    TEST_SERVE_TEST (test_process_io),
    TEST_SERVE_TEST (test_pipelined_write_read),
    TEST_SERVE_TEST (test_pipelined_write_then_start),
    cmocka_unit_test (test_resume_and_detach_timeout),
    cmocka_unit_test (test_hundred_clients),
  };

  signal (SIGPIPE, SIG_IGN);
  return TEST_RUN_GROUP (tests, setup_group, teardown_group);
}
