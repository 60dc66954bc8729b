/* fusebox — the command's PATH search in `fusebox run`.
 *
 * The supervisor walks the view for the command's PATH candidates before
 * the command starts and lets it skip those certainly absent
 * (launcher-cmd-run.c, send_path_hint()).  These runs show that the search
 * still picks what execvp would: the first candidate that exists and can be
 * executed, past missing, hidden and non-executable ones; through a
 * symlinked PATH entry; under /proc, which the sandbox mounts over the
 * view; from a relative entry; and "not found" (127) when no candidate
 * exists.  Each program prints its own name, so a search that skipped too
 * far or too little shows as the wrong word.
 */
#include "tests/lib/test-log.h"
#include "tests/lib/test-run.h"

/* T/ws/NAME/prog: a script that prints NAME, with MODE. */
static char *
make_prog (RFx *fx, const char *name, mode_t mode)
{
  g_autofree char *dir = g_build_filename (fx->ws, name, NULL);
  g_autofree char *script = g_strdup_printf ("#!/bin/sh\necho %s\n", name);
  char *path = g_build_filename (dir, "prog", NULL);

  test_write (path, script, mode);
  test_assert_host_readable (path);
  return path;
}

static void
run_prog (RFx *fx, RfxResult *r, const char *path_env)
{
  rfx_run (fx, r, "--setenv", "PATH", path_env, "--", "prog", NULL);
}

/* `prog` found with PATH=PATH_ENV in the sandbox is the one in BIN. */
static void
assert_runs_from (RFx *fx, const char *path_env, const char *bin)
{
  RfxResult r;
  g_autofree char *want = g_strdup_printf ("%s\n", bin);

  run_prog (fx, &r, path_env);
  if (r.status != 0 || strcmp (r.out, want) != 0)
    fail_msg ("PATH=%s: exit %d and \"%s\", expected %s's prog (exit 0); stderr:\n%s", path_env, r.status, r.out, bin,
              r.err);
  rfx_result_clear (&r);
}

RFX_CASE (test_first_present_wins)
{
  g_autofree char *b = make_prog (fx, "bin-b", 0755);
  g_autofree char *c = make_prog (fx, "bin-c", 0755);
  g_autofree char *empty = g_build_filename (fx->ws, "bin-a", NULL);
  g_autofree char *missing = g_build_filename (fx->ws, "no-such-dir", NULL);
  g_autofree char *bin_b = g_path_get_dirname (b);
  g_autofree char *bin_c = g_path_get_dirname (c);
  assert_int_equal (g_mkdir_with_parents (empty, 0755), 0);

  /* missing and empty entries first: the first present one runs */
  g_autofree char *path1 = g_strjoin (":", "/fusebox-no-such-dir", missing, empty, bin_b, bin_c, "/usr/bin:/bin", NULL);
  assert_runs_from (fx, path1, "bin-b");

  /* the same entries the other way round: the order decides, not the set */
  g_autofree char *path2 = g_strjoin (":", missing, bin_c, bin_b, NULL);
  assert_runs_from (fx, path2, "bin-c");

  /* a file where a directory is expected (ENOTDIR) is passed over too */
  g_autofree char *path3 = g_strjoin (":", b, bin_c, NULL);
  assert_runs_from (fx, path3, "bin-c");
}

RFX_CASE (test_not_executable_then_present)
{
  RfxResult r;
  g_autofree char *x = make_prog (fx, "bin-x", 0644);
  g_autofree char *b = make_prog (fx, "bin-b", 0755);
  g_autofree char *bin_x = g_path_get_dirname (x);
  g_autofree char *bin_b = g_path_get_dirname (b);

  /* execvp: EACCES from bin-x, then bin-b runs */
  g_autofree char *path1 = g_strjoin (":", bin_x, bin_b, NULL);
  assert_runs_from (fx, path1, "bin-b");

  /* and alone: found but not executable, 126, not "not found" */
  run_prog (fx, &r, bin_x);
  assert_int_equal (r.status, 126);
  assert_non_null (strstr (r.err, "can't be executed"));
  rfx_result_clear (&r);
}

RFX_CASE (test_hidden_entry_is_absent_and_logged)
{
  RfxResult r;
  g_autofree char *b = make_prog (fx, "bin-b", 0755);
  g_autofree char *bin_b = g_path_get_dirname (b);
  /* a stand-in under /home, which the built-in default hides */
  g_autofree char *name = g_path_get_basename (fx->tmp);
  g_autofree char *hidden_root = g_build_filename ("/home", name, NULL);
  g_autofree char *hidden_bin = g_build_filename (hidden_root, "bin", NULL);
  g_autofree char *hidden_prog = g_build_filename (hidden_bin, "prog", NULL);
  rfx_keep_path (fx, hidden_root);
  test_write (hidden_prog, "#!/bin/sh\necho hidden\n", 0755);
  test_assert_host_readable (hidden_prog);

  g_autofree char *dir = g_build_filename (fx->runs, "hidden", NULL);
  g_autofree char *path_env = g_strjoin (":", hidden_bin, bin_b, NULL);
  rfx_run (fx, &r, "--run-dir", dir, "--setenv", "PATH", path_env, "--", "prog", NULL);
  assert_int_equal (r.status, 0);
  assert_string_equal (r.out, "bin-b\n");
  rfx_result_clear (&r);

  /* the hidden name is a decision, and decisions are logged, whoever asked */
  g_autofree char *log = test_log_text (dir);
  assert_non_null (strstr (log, "\"path\":\"/home\""));
  assert_non_null (strstr (log, "\"decision\":\"hide\""));
}

RFX_CASE (test_symlink_proc_and_relative_entries)
{
  g_autofree char *b = make_prog (fx, "bin-b", 0755);
  g_autofree char *c = make_prog (fx, "bin-c", 0755);
  g_autofree char *bin_b = g_path_get_dirname (b);
  g_autofree char *link = g_build_filename (fx->ws, "link-to-b", NULL);
  assert_int_equal (symlink ("bin-b", link), 0);

  /* an entry that is a symlink in the view */
  g_autofree char *path1 = g_strjoin (":", "/fusebox-no-such-dir", link, NULL);
  assert_runs_from (fx, path1, "bin-b");

  /* under /proc, which is the sandbox's procfs, not the view's blank
   * directory: the working directory is the workspace */
  assert_runs_from (fx, "/fusebox-no-such-dir:/proc/self/cwd/bin-c", "bin-c");

  /* a relative entry is the working directory's */
  assert_runs_from (fx, "/fusebox-no-such-dir:bin-c:bin-b", "bin-c");
}

RFX_CASE (test_found_nowhere)
{
  RfxResult r;

  run_prog (fx, &r, "/fusebox-no-such-dir:/usr/bin:/bin");
  assert_int_equal (r.status, 127);
  assert_non_null (strstr (r.err, "exec: prog: command not found in the sandbox"));
  rfx_result_clear (&r);
}

RFX_DEFINE_MAIN (NULL, NULL, RFX_TEST (test_first_present_wins), RFX_TEST (test_not_executable_then_present),
                 RFX_TEST (test_hidden_entry_is_absent_and_logged), RFX_TEST (test_symlink_proc_and_relative_entries),
                 RFX_TEST (test_found_nowhere))
