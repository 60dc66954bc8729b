/* fusebox — `fusebox run`'s preparation (options, the effective policy, the
 * run directory, run.json) and `fusebox runs` (states, --prune), through the
 * real binary with XDG_STATE_HOME in a temporary directory.  The sandbox
 * itself is tested by tests/integration/test-run-*.c. */
#include "test-launcher-util.h"

static int
fusebox (TestState *s, char **ret_out, char **ret_err, ...)
{
  const char *bin = test_meson_bin ();
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_ptr_array_add (argv, (char *)bin);
  va_list ap;
  va_start (ap, ret_err);
  const char *a;
  while ((a = va_arg (ap, const char *)))
    g_ptr_array_add (argv, (char *)a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  g_auto (GStrv) env = g_get_environ ();
  g_autofree char *state = g_build_filename (s->tmpdir, "state", NULL);
  env = g_environ_setenv (env, "XDG_STATE_HOME", state, TRUE);
  int status;
  g_autoptr (GError) error = NULL;
  if (!g_spawn_sync (s->tmpdir, (char **)argv->pdata, env, G_SPAWN_DEFAULT, NULL, NULL, ret_out, ret_err, &status,
                     &error))
    fail_msg ("%s: %s", bin, error->message);
  assert_true (WIFEXITED (status));
  return WEXITSTATUS (status);
}

static char *
runs_root (TestState *s)
{
  return g_build_filename (s->tmpdir, "state", "fusebox", "runs", NULL);
}

static void
test_usage_errors (void **state)
{
  TestState *s = *state;
  g_autofree char *out = NULL, *err = NULL;

  assert_int_equal (fusebox (s, NULL, &err, "run", NULL), 125);
  assert_non_null (strstr (err, "no command given"));
  g_clear_pointer (&err, g_free);
  assert_int_equal (fusebox (s, NULL, &err, "run", "--network", "bogus", "--", "true", NULL), 125);
  assert_non_null (strstr (err, "--network bogus: give none, host, allow:HOST[:PORT] or deny:HOST[:PORT]"));
  g_clear_pointer (&err, g_free);
  assert_int_equal (fusebox (s, NULL, &err, "run", "--uid", "-1", "--", "true", NULL), 125);
  g_clear_pointer (&err, g_free);
  assert_int_equal (fusebox (s, NULL, &err, "run", "--cwd", "relative", "--", "true", NULL), 125);
  g_clear_pointer (&err, g_free);
  assert_int_equal (fusebox (s, NULL, &err, "run", "--setenv", "A=B", "x", "--", "true", NULL), 125);
  g_clear_pointer (&err, g_free);
  assert_int_equal (fusebox (s, NULL, &err, "run", "--bogus", "--", "true", NULL), 125);
  g_clear_pointer (&err, g_free);
  assert_int_equal (fusebox (s, &out, NULL, "run", "--help", NULL), 0);
  assert_non_null (strstr (out, "Usage: fusebox run"));

  /* a bad policy fails before any run directory exists */
  g_autofree char *bad = g_build_filename (s->tmpdir, "bad.json", NULL);
  assert_true (g_file_set_contents (bad, "{ \"version\": 1, \"rules\": [ { \"path\": 3 } ] }", -1, NULL));
  assert_int_equal (fusebox (s, NULL, &err, "run", "--policy", bad, "--", "true", NULL), 125);
  assert_non_null (strstr (err, bad));
  g_autofree char *root = runs_root (s);
  assert_false (g_file_test (root, G_FILE_TEST_EXISTS));
}

static void
test_prepared_run (void **state)
{
  TestState *s = *state;
  g_autofree char *err = NULL;
  g_autofree char *extra = g_build_filename (s->tmpdir, "extra", NULL);
  assert_int_equal (g_mkdir (extra, 0755), 0);

  int code = fusebox (s, NULL, &err, "run", "--write", extra, "--network", "host", "--uid", "1000", "--setenv", "FOO",
                      "bar", "--", "true", NULL);
  /* no sandbox here (no /dev/fuse, no user namespaces: the probes say
   * which): the preparation is what this tests */
  if (code == FB_LAUNCHER_EXIT_SANDBOX && !strstr (err, "every prerequisite is met") &&
      g_strcmp0 (g_getenv ("FUSEBOX_TESTS_MUST_RUN"), "1") != 0)
    {
      fprintf (stderr, "skipped: this host can't make sandboxes; fusebox says:\n%s", err);
      skip ();
    }
  if (code != 0)
    fail_msg ("fusebox run failed (%d): %s", code, err);
  assert_int_equal (code, 0);

  g_autofree char *root = runs_root (s);
  g_autoptr (GDir) d = g_dir_open (root, 0, NULL);
  assert_non_null (d);
  const char *id = g_dir_read_name (d);
  assert_non_null (id);
  assert_null (g_dir_read_name (d));
  g_autofree char *dir = g_build_filename (root, id, NULL);
  struct stat st;
  assert_int_equal (stat (dir, &st), 0);
  assert_int_equal (st.st_mode & 07777, 0700);

  /* the effective policy: the spec's rules plus the command line's */
  g_autofree char *policy_path = g_build_filename (dir, "policy.json", NULL);
  g_autofree char *policy = NULL;
  assert_true (g_file_get_contents (policy_path, &policy, NULL, NULL));
  g_autoptr (JsonObject) p = test_parse_object (policy);
  assert_string_equal (json_object_get_string_member (p, "network"), "host");
  JsonArray *rules = json_object_get_array_member (p, "rules");
  guint n = json_array_get_length (rules);
  assert_true (n >= 2);
  JsonObject *added = json_array_get_object_element (rules, n - 2);
  assert_string_equal (json_object_get_string_member (added, "path"), extra);
  assert_string_equal (json_object_get_string_member (added, "access"), "write");
  assert_string_equal (json_object_get_string_member (added, "why"), "--write on the command line");
  /* and last, after the user's: fusebox's own run directories, hidden */
  JsonObject *last = json_array_get_object_element (rules, n - 1);
  assert_string_equal (json_object_get_string_member (last, "path"), root);
  assert_string_equal (json_object_get_string_member (last, "access"), "hide");
  assert_string_equal (json_object_get_string_member (last, "why"), "fusebox's own run directories");

  g_autofree char *info_path = g_build_filename (dir, "run.json", NULL);
  g_autofree char *info_text = NULL;
  assert_true (g_file_get_contents (info_path, &info_text, NULL, NULL));
  g_autoptr (JsonObject) info = test_parse_object (info_text);
  assert_string_equal (json_object_get_string_member (info, "run"), id);
  JsonArray *cmd = json_object_get_array_member (info, "command");
  assert_int_equal (json_array_get_length (cmd), 1);
  assert_string_equal (json_array_get_string_element (cmd, 0), "true");
  assert_int_equal (json_object_get_int_member (info, "uid"), 1000);
  assert_string_equal (json_object_get_string_member (info, "network"), "host");
  assert_true (json_object_has_member (info, "started"));
  assert_true (json_object_has_member (info, "ended"));
  assert_int_equal (json_object_get_int_member (info, "exit_status"), 0);
  assert_false (json_object_has_member (info, "error"));
  /* the working directory: the caller's, which is also the workspace */
  assert_string_equal (json_object_get_string_member (info, "cwd"), s->tmpdir);

  /* a second run into the same explicit directory is refused */
  g_clear_pointer (&err, g_free);
  assert_int_equal (fusebox (s, NULL, &err, "run", "--run-dir", dir, "--", "true", NULL), 125);
  assert_non_null (strstr (err, "not empty"));
}

static void
write_run_json (const char *dir, const char *json)
{
  assert_int_equal (g_mkdir_with_parents (dir, 0700), 0);
  g_autofree char *path = g_build_filename (dir, "run.json", NULL);
  assert_true (g_file_set_contents (path, json, -1, NULL));
}

static guint64
own_start_time (void)
{
  g_autofree char *stat = NULL;
  assert_true (g_file_get_contents ("/proc/self/stat", &stat, NULL, NULL));
  g_auto (GStrv) f = g_strsplit (strrchr (stat, ')') + 2, " ", 0);
  return g_ascii_strtoull (f[19], NULL, 10);
}

static void
test_runs_and_prune (void **state)
{
  TestState *s = *state;
  g_autofree char *root = runs_root (s);
  g_autofree char *over = g_build_filename (root, "20260101-000000-aaaaaa", NULL);
  g_autofree char *dead = g_build_filename (root, "20260101-000001-bbbbbb", NULL);
  g_autofree char *live = g_build_filename (root, "20260101-000002-cccccc", NULL);
  g_autofree char *mount = g_build_filename (root, "20260101-000003-dddddd", NULL);

  write_run_json (over, "{\"run\":\"20260101-000000-aaaaaa\",\"command\":[\"make\",\"test\"],"
                        "\"started\":\"2026-01-01T00:00:00Z\",\"ended\":\"2026-01-01T00:01:00Z\",\"exit_status\":3}");
  /* private sources the sandbox left read-only must still go */
  g_autofree char *priv = g_build_filename (over, "private", "home", NULL);
  assert_int_equal (g_mkdir_with_parents (priv, 0700), 0);
  g_autofree char *file = g_build_filename (priv, "f", NULL);
  assert_true (g_file_set_contents (file, "x", -1, NULL));
  assert_int_equal (chmod (priv, 0500), 0);
  /* a supervisor that is gone: the start time does not match any process */
  write_run_json (dead, "{\"run\":\"20260101-000001-bbbbbb\",\"command\":[\"sleep\"],"
                        "\"supervisor\":{\"pid\":1,\"start_time\":123456789}}");
  /* a live one: this test process */
  g_autofree char *live_json = g_strdup_printf ("{\"run\":\"20260101-000002-cccccc\",\"command\":[\"sleep\"],"
                                                "\"supervisor\":{\"pid\":%d,\"start_time\":%" G_GUINT64_FORMAT "}}",
                                                (int)getpid (), own_start_time ());
  write_run_json (live, live_json);
  /* a directory without run.json (a run that failed before writing it) */
  assert_int_equal (g_mkdir_with_parents (mount, 0700), 0);

  g_autofree char *out = NULL;
  assert_int_equal (fusebox (s, &out, NULL, "runs", NULL), 0);
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  /* each run.json of the format before kinds is a run's */
  assert_true (g_str_has_prefix (lines[0], "20260101-000000-aaaaaa   run   over"));
  assert_non_null (strstr (lines[0], "exit 3"));
  assert_non_null (strstr (lines[0], "make test"));
  assert_true (g_str_has_prefix (lines[1], "20260101-000001-bbbbbb   run   over"));
  assert_true (g_str_has_prefix (lines[2], "20260101-000002-cccccc   run   running"));
  assert_true (g_str_has_prefix (lines[3], "20260101-000003-dddddd         unknown"));
  g_clear_pointer (&out, g_free);

  assert_int_equal (fusebox (s, &out, NULL, "runs", "--prune", NULL), 0);
  assert_false (g_file_test (over, G_FILE_TEST_EXISTS));
  assert_false (g_file_test (dead, G_FILE_TEST_EXISTS));
  assert_true (g_file_test (live, G_FILE_TEST_IS_DIR));
  assert_true (g_file_test (mount, G_FILE_TEST_IS_DIR));
  g_clear_pointer (&out, g_free);

  assert_int_equal (fusebox (s, &out, NULL, "runs", "--json", NULL), 0);
  g_auto (GStrv) json_lines = g_strsplit (out, "\n", -1);
  assert_int_equal (g_strv_length (json_lines), 3); /* two objects and the final empty string */
  g_autoptr (JsonObject) first = test_parse_object (json_lines[0]);
  assert_string_equal (json_object_get_string_member (first, "state"), "running");
  assert_string_equal (json_object_get_string_member (first, "kind"), "run");
}

TEST_DEFINE_MAIN (NULL, NULL, TEST_LAUNCHER_TEST (test_usage_errors), TEST_LAUNCHER_TEST (test_prepared_run),
                  TEST_LAUNCHER_TEST (test_runs_and_prune))
