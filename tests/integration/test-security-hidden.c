/* Adversarial tests: no answer of `fusebox serve` tells whether a hidden
 * name exists.
 *
 * A real server (builtin:default: `.git` hidden at any depth) and a real
 * WebSocket client.  On the host, ws/repo/.git/config exists (first proven
 * so) and ws/plain has no .git.  The same questions about both give the
 * same answers:
 *  - fs/remove with force of the hidden path: {} for both, without force
 *    -32004 for both, and the host's file is still there;
 *  - a process that reads the hidden path and exits 1: sandboxDenied false
 *    for both (a write under a read rule, by contrast, is flagged: the
 *    flag works);
 *  - the access log (the auditor's, like log/subscribe) does record the
 *    hide of the name that exists.
 * Before, the view's hide record (written only for a name the host holds)
 * counted as a denial: sandboxDenied was true for the existing name only,
 * and fs/remove's force, which ignores a missing path, answered -32004 for
 * the existing one only.
 *
 * Needs root and /dev/fuse for process/start (exit 77 without, unless
 * FUSEBOX_TESTS_MUST_RUN=1).  A failure prints the command that starts
 * the same server by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "tests/lib/test-log.h"
#include "tests/lib/test-serve.h"

static TestServe *F;

static char *
ws_path (const char *rel)
{
  return g_build_filename (F->ws, rel, NULL);
}

/* fs/remove {path: WS/REL, force: FORCE}: 0 for a result, else the error
 * code. */
static gint64
remove_code (const char *rel, bool force)
{
  g_autofree char *path = ws_path (rel);
  g_autofree char *qpath = test_json_quote (path);
  g_autofree char *params = g_strdup_printf ("{\"path\":%s,\"force\":%s}", qpath, force ? "true" : "false");
  g_autoptr (JsonNode) r = test_client_call (F->client, "fs/remove", params);

  assert_non_null (r);
  return test_answer_result (r) != NULL ? 0 : test_answer_error_code (r);
}

/* Run /bin/sh -c SCRIPT in the workspace; its exit code and sandboxDenied. */
static void
run_sh (const char *id, const char *script, gint64 *ret_exit, bool *ret_denied)
{
  g_autofree char *qws = test_json_quote (F->ws);
  g_autofree char *qscript = test_json_quote (script);
  g_autofree char *params = g_strdup_printf ("{\"processId\":\"%s\",\"argv\":[\"/bin/sh\",\"-c\",%s],\"cwd\":%s,"
                                             "\"env\":{\"PATH\":\"/usr/bin:/bin\"},\"tty\":false}",
                                             id, qscript, qws);
  g_autoptr (JsonNode) start = test_client_call (F->client, "process/start", params);
  g_autoptr (JsonNode) exited = NULL;
  JsonObject *p;

  if (test_answer_result (start) == NULL)
    fail_msg ("process/start failed: %s; reproduce the server with: %s", test_answer_error_message (start),
              F->server->command);
  exited = test_client_note (F->client, "process/exited", id);
  if (exited == NULL)
    fail_msg ("no process/exited for %s", id);
  p = json_object_get_object_member (json_node_get_object (exited), "params");
  *ret_exit = json_object_get_int_member (p, "exitCode");
  *ret_denied = json_object_get_boolean_member_with_default (p, "sandboxDenied", false);
}

/* --- fixture ----------------------------------------------------------------- */

static int
setup_group (void **state)
{
  test_host_require ("root", "process/start needs root");
  test_host_require ("fuse", "process/start needs a usable /dev/fuse");
  /* not /tmp: the built-in default makes /tmp private, and the workspace
   * must be at the same path on the host and in the view */
  F = test_serve_new (test_workdir ("fusebox-sec-hidden"));
  {
    g_autofree char *git = ws_path ("repo/.git");
    g_autofree char *config = ws_path ("repo/.git/config");
    g_autofree char *plain = ws_path ("plain");
    g_autofree char *data = NULL;
    assert_int_equal (g_mkdir_with_parents (git, 0755), 0);
    assert_int_equal (g_mkdir_with_parents (plain, 0755), 0);
    assert_true (g_file_set_contents (config, "[core]\n", -1, NULL));
    /* the hidden stand-in exists and is readable on the host */
    assert_true (g_file_get_contents (config, &data, NULL, NULL));
  }
  if (!test_serve_start (F, NULL))
    return -1;
  *state = F;
  return 0;
}

/* --- tests -------------------------------------------------------------------- */

static void
test_remove_force (void **state)
{
  g_autofree char *config = ws_path ("repo/.git/config");
  gint64 existing, missing;

  existing = remove_code ("repo/.git/config", true);
  missing = remove_code ("plain/.git/config", true);
  if (existing != missing)
    fail_msg ("fs/remove with force: %" G_GINT64_FORMAT " for the hidden name that exists, %" G_GINT64_FORMAT
              " for the one that does not; reproduce the server with: %s",
              existing, missing, F->server->command);
  assert_int_equal (existing, 0);
  existing = remove_code ("repo/.git/config", false);
  missing = remove_code ("plain/.git/config", false);
  assert_int_equal (existing, -32004);
  assert_int_equal (missing, -32004);
  assert_true (g_file_test (config, G_FILE_TEST_IS_REGULAR));
}

static void
test_sandbox_denied (void **state)
{
  g_autofree char *config = ws_path ("repo/.git/config");
  gint64 code;
  bool existing, missing, readonly;

  run_sh ("existing", "cat repo/.git/config; exit 1", &code, &existing);
  assert_int_equal (code, 1);
  run_sh ("missing", "cat plain/.git/config; exit 1", &code, &missing);
  assert_int_equal (code, 1);
  if (existing != missing)
    fail_msg ("sandboxDenied %d for a process that met the hidden name that exists, %d for the one that does "
              "not; reproduce the server with: %s",
              existing, missing, F->server->command);
  assert_false (existing);
  /* the flag itself works: a write under the read-only root */
  run_sh ("readonly", "echo x > /usr/fusebox-hidden-probe; exit 1", &code, &readonly);
  assert_int_equal (code, 1);
  assert_true (readonly);
  assert_true (g_file_test (config, G_FILE_TEST_IS_REGULAR));

  /* the auditor's log still has the hide of the name that exists (a call
   * first: the server writes what is queued before it answers) */
  {
    g_autofree char *qws = test_json_quote (F->ws);
    g_autofree char *params = g_strdup_printf ("{\"path\":%s}", qws);
    g_autoptr (JsonNode) r = test_client_call (F->client, "fs/getMetadata", params);
    g_autofree char *log = g_build_filename (F->client->run_dir, "access.jsonl", NULL);
    g_autofree char *text = NULL;
    g_autofree char *git = ws_path ("repo/.git");
    g_autofree char *needle = g_strdup_printf ("\"path\":\"%s\"", git);
    assert_true (g_file_get_contents (log, &text, NULL, NULL));
    if (!test_log_has (text, needle, "\"decision\":\"hide\"", NULL))
      fail_msg ("no hide record of %s in %s", git, log);
  }
}

TEST_DEFINE_MAIN (setup_group, test_serve_group_teardown, TEST_SERVE_TEST (test_remove_force),
                  TEST_SERVE_TEST (test_sandbox_denied))
