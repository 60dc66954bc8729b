/* Adversarial tests: fusebox's own state -- run directories, access logs,
 * the runs root -- is out of every sandbox's reach, by host identity, not
 * only by view path.
 *
 *  - Two runs with --run-dir in the workspace (beside each other, and in a
 *    directory of their own): the second can't see, read or append to the
 *    first's log, nor find its directory in a listing.
 *  - The same through an alias the hide rules can't know: a `source` that
 *    shows the test's directory (the state and the workspace inside it) at
 *    another view path.
 *  - A `source` that is a state directory (or inside one) is refused when
 *    the policy is loaded, with a message naming the rule.
 *  - `fusebox serve` under builtin:host (everything writable): a process
 *    can't read or append to the server's access.jsonl, nor see its run
 *    directory; nor can fs/readFile and fs/writeFile.
 * Each target is first proven readable on the host.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include "tests/lib/test-run.h"
#include "tests/lib/test-serve.h"

/* A shell probe for PATH inside the sandbox: one line,
 * "<exists|absent> <read|noread> <appended|noappend>". */
static char *
probe_script (const char *path)
{
  g_autofree char *q = g_shell_quote (path);

  return g_strdup_printf (
    "p=%s; "
    "if test -e \"$p\"; then e=exists; else e=absent; fi; "
    "if cat \"$p\" >/dev/null 2>&1; then r=read; else r=noread; fi; "
    "if (echo forged-by-the-sandbox >> \"$p\") 2>/dev/null; then a=appended; else a=noappend; fi; "
    "echo \"$e $r $a\"",
    q);
}

/* Every line of OUT equals WANT. */
static void
assert_lines (const char *out, const char *want, guint n)
{
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  guint got = 0;

  for (guint i = 0; lines[i] != NULL; i++)
    if (lines[i][0] != '\0')
      {
        if (strcmp (lines[i], want) != 0)
          fail_msg ("probe %u said '%s', want '%s' (all output:\n%s)", got, lines[i], want, out);
        got++;
      }
  assert_int_equal (got, n);
}

/* A finished run with --run-dir DIR; returns DIR's access.jsonl, proven
 * readable on the host. */
static char *
first_run (RFx *fx, const char *dir)
{
  RfxResult res = { 0 };
  char *log = g_build_filename (dir, "access.jsonl", NULL);
  g_autofree char *probe = g_build_filename (fx->ws, "probe-target", NULL);

  test_write (probe, "x\n", 0644);
  rfx_run (fx, &res, "--run-dir", dir, "--", "/bin/cat", probe, NULL);
  assert_int_equal (res.status, 0);
  rfx_result_clear (&res);
  test_assert_host_readable (log);
  test_assert_host_readable (dir);
  return log;
}

/* The second run: LOG and its directory are absent, unreadable,
 * unappendable, and the directory is not listed in its parent. */
static void
second_run_sees_nothing (RFx *fx, const char *run_dir, const char *log, const char *const *extra_args)
{
  g_autofree char *dir = g_path_get_dirname (log);
  g_autofree char *parent = g_path_get_dirname (dir);
  g_autofree char *base = g_path_get_basename (dir);
  g_autofree char *p1 = probe_script (log);
  g_autofree char *p2 = probe_script (dir);
  g_autofree char *qparent = g_shell_quote (parent);
  g_autofree char *qbase = g_shell_quote (base);
  g_autofree char *script =
    g_strdup_printf ("%s; %s; ls -a %s | grep -qxF %s && echo listed || echo unlisted", p1, p2, qparent, qbase);
  g_autofree char *before = test_read_file (log);
  g_autofree char *after = NULL;
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  RfxResult res = { 0 };

  g_ptr_array_add (argv, (char *)test_bin ());
  g_ptr_array_add (argv, (char *)"run");
  g_ptr_array_add (argv, (char *)"--read");
  g_ptr_array_add (argv, (char *)g_getenv ("FUSEBOX_BUILD_ROOT"));
  for (guint i = 0; extra_args != NULL && extra_args[i] != NULL; i++)
    g_ptr_array_add (argv, (char *)extra_args[i]);
  g_ptr_array_add (argv, (char *)"--run-dir");
  g_ptr_array_add (argv, (char *)run_dir);
  g_ptr_array_add (argv, (char *)"--");
  g_ptr_array_add (argv, (char *)"/bin/sh");
  g_ptr_array_add (argv, (char *)"-c");
  g_ptr_array_add (argv, script);
  g_ptr_array_add (argv, NULL);
  rfx_run_argv (fx, &res, (char **)argv->pdata);
  if (res.status != 0)
    fail_msg ("the second run exited %d: %s", res.status, res.err);
  /* "absent noread noappend" twice, then "unlisted" */
  {
    g_auto (GStrv) lines = g_strsplit (res.out, "\n", -1);
    assert_true (g_strv_length (lines) >= 3);
    assert_string_equal (lines[0], "absent noread noappend");
    assert_string_equal (lines[1], "absent noread noappend");
    assert_string_equal (lines[2], "unlisted");
  }
  after = test_read_file (log);
  assert_string_equal (before, after);
  rfx_result_clear (&res);
}

/* A run with --run-dir T/ws/FIRST, then one with T/ws/SECOND that sees
 * nothing of the first's log. */
static void
runs_at (RFx *fx, const char *first, const char *second)
{
  g_autofree char *r1 = g_build_filename (fx->ws, first, NULL);
  g_autofree char *r2 = g_build_filename (fx->ws, second, NULL);
  g_autofree char *log = first_run (fx, r1);

  second_run_sees_nothing (fx, r2, log, NULL);
}

RFX_CASE (test_run_dirs_beside_each_other)
{
  runs_at (fx, "run-1", "run-2");
}

RFX_CASE (test_run_dirs_in_their_own_directory)
{
  runs_at (fx, "runs/one", "runs/two");
}

/* The default run directory, under the runs root in T/state, reached
 * through a source that shows all of T at /alias: no hide rule's path
 * matches there. */
RFX_CASE (test_alias_through_a_source)
{
  g_autofree char *policy_path = g_build_filename (fx->tmp, "alias.json", NULL);
  g_autofree char *policy = g_strdup_printf ("{\"version\":1,\"rules\":["
                                             "{\"path\":\"/\",\"access\":\"read\",\"why\":\"the system\"},"
                                             "{\"path\":\"${WORKSPACE}\",\"access\":\"write\",\"why\":\"the work\"},"
                                             "{\"path\":\"/alias\",\"access\":\"write\",\"source\":\"%s\","
                                             "\"why\":\"the test's directory again\"}]}",
                                             fx->tmp);
  g_autofree char *r1 = g_build_filename (fx->ws, "run-1", NULL);
  g_autofree char *r2 = g_build_filename (fx->ws, "run-2", NULL);
  g_autofree char *log = first_run (fx, r1);
  g_autofree char *ws_base = g_path_get_basename (fx->ws);
  g_autofree char *alias_log = g_build_filename ("/alias", ws_base, "run-1", "access.jsonl", NULL);
  g_autofree char *probe_alias = probe_script (alias_log);
  g_autofree char *latest = NULL;
  g_autofree char *root_alias = NULL;
  g_autofree char *probe_root = NULL;
  g_autofree char *script = NULL;
  g_autofree char *before = test_read_file (log);
  g_autofree char *after = NULL;
  RfxResult res = { 0 };

  /* and a default run under the runs root, seen as /alias/state/... */
  {
    RfxResult r0 = { 0 };
    rfx_run (fx, &r0, "--", "/bin/true", NULL);
    assert_int_equal (r0.status, 0);
    rfx_result_clear (&r0);
  }
  {
    g_autoptr (GDir) d = g_dir_open (fx->runs, 0, NULL);
    const char *name;
    assert_non_null (d);
    while ((name = g_dir_read_name (d)) != NULL)
      latest = g_strdup (name);
  }
  assert_non_null (latest);
  {
    g_autofree char *host_log = g_build_filename (fx->runs, latest, "access.jsonl", NULL);
    test_assert_host_readable (host_log);
  }
  root_alias = g_build_filename ("/alias", "state", "fusebox", "runs", latest, "access.jsonl", NULL);
  probe_root = probe_script (root_alias);
  script = g_strdup_printf ("%s; %s", probe_alias, probe_root);
  test_write (policy_path, policy, 0644);
  rfx_run (fx, &res, "--policy", policy_path, "--run-dir", r2, "--", "/bin/sh", "-c", script, NULL);
  if (res.status != 0)
    fail_msg ("the aliasing run exited %d: %s", res.status, res.err);
  assert_lines (res.out, "absent noread noappend", 2);
  after = test_read_file (log);
  assert_string_equal (before, after);
  rfx_result_clear (&res);
}

/* A source that is a state directory, or inside one, is refused at load. */
RFX_CASE (test_source_on_state_refused)
{
  g_autofree char *r1 = g_build_filename (fx->ws, "run-1", NULL);
  g_autofree char *log = first_run (fx, r1);
  g_autofree char *policy_path = g_build_filename (fx->tmp, "expose.json", NULL);
  const char *sources[] = { r1, fx->runs, NULL };
  RfxResult r0 = { 0 };

  (void)log;
  /* a default run: the runs root exists */
  rfx_run (fx, &r0, "--", "/bin/true", NULL);
  assert_int_equal (r0.status, 0);
  rfx_result_clear (&r0);
  test_assert_host_readable (fx->runs);
  for (guint i = 0; sources[i] != NULL; i++)
    {
      g_autofree char *policy = g_strdup_printf ("{\"version\":1,\"rules\":["
                                                 "{\"path\":\"/\",\"access\":\"read\",\"why\":\"the system\"},"
                                                 "{\"path\":\"/exposed\",\"access\":\"read\",\"source\":\"%s\","
                                                 "\"why\":\"a look at the logs\"}]}",
                                                 sources[i]);
      g_autofree char *r2 = g_strdup_printf ("%s/run-x%u", fx->ws, i);
      RfxResult res = { 0 };

      test_write (policy_path, policy, 0644);
      rfx_run (fx, &res, "--policy", policy_path, "--run-dir", r2, "--", "/bin/ls", "/exposed", NULL);
      assert_int_equal (res.status, 125);
      if (strstr (res.err, "fusebox's own state") == NULL || strstr (res.err, sources[i]) == NULL)
        fail_msg ("no clear refusal of the source %s:\n%s", sources[i], res.err);
      assert_string_equal (res.out, "");
      rfx_result_clear (&res);
    }
}

/* --- serve --------------------------------------------------------------------- */

RFX_CASE (test_serve_log_out_of_reach)
{
  const char *args[] = { "--workspace", fx->ws, "--policy", "builtin:host", NULL };
  TestServer *server = test_server_start (fx->tmp, args);
  TestClient *client = NULL;
  g_autofree char *log = NULL, *qlog = NULL, *argv_json = NULL, *before = NULL, *out = NULL, *after = NULL;
  int code;

  assert_true (g_str_has_prefix (server->url, "ws://"));
  rfx_keep_pid (fx, server->pid);
  client = test_client_open (server->url);
  assert_true (client->run_dir != NULL && client->run_dir[0] == '/');
  log = g_build_filename (client->run_dir, "access.jsonl", NULL);
  test_assert_host_readable (log);
  qlog = test_json_quote (log);
  {
    g_autofree char *p1 = probe_script (log);
    g_autofree char *p2 = probe_script (client->run_dir);
    g_autofree char *script = g_strdup_printf ("%s; %s", p1, p2);
    g_autofree char *qscript = test_json_quote (script);

    argv_json = g_strdup_printf ("[\"/bin/sh\",\"-c\",%s]", qscript);
  }
  before = test_read_file (log);
  test_process_start (client, "p", argv_json, fx->ws, false);
  out = test_process_read (client, "p", NULL, &code, NULL);
  assert_lines (out, "absent noread noappend", 2);
  /* nor can it move the state directory away for a link of its own (the
   * runs root and the sessions' directory hidden by identity, their
   * parent's parent was a writable directory like any other) */
  {
    g_autofree char *fusebox_dir = g_path_get_dirname (fx->runs);
    g_autofree char *state = g_path_get_dirname (fusebox_dir);
    g_autofree char *mv = g_strdup_printf ("mv %s %s.moved 2>/dev/null && echo moved || echo refused", state, state);
    g_autofree char *qmv = test_json_quote (mv);
    g_autofree char *mv_argv = g_strdup_printf ("[\"/bin/sh\",\"-c\",%s]", qmv);
    g_autofree char *mv_out = NULL;
    struct stat st;

    test_assert_host_readable (state);
    test_process_start (client, "m", mv_argv, fx->ws, false);
    mv_out = test_process_read (client, "m", NULL, &code, NULL);
    assert_string_equal (mv_out, "refused\n");
    assert_int_equal (lstat (state, &st), 0);
    assert_true (S_ISDIR (st.st_mode));
  }
  /* the remote API's own calls go through the same view */
  {
    g_autoptr (JsonNode) read = test_client_callf (client, "fs/readFile", "{\"path\":%s}", qlog);
    assert_int_equal (test_answer_error_code (read), -32004);
  }
  {
    g_autoptr (JsonNode) write =
      test_client_callf (client, "fs/writeFile", "{\"path\":%s,\"dataBase64\":\"eAo=\"}", qlog);
    assert_null (test_answer_result (write));
  }
  test_client_free (client);
  rfx_forget_pid (fx, server->pid);
  test_server_stop (server);
  after = test_read_file (log);
  /* nothing forged: what the server wrote since is its own records */
  assert_true (g_str_has_prefix (after, before));
  assert_null (strstr (after, "forged-by-the-sandbox"));
}

/* A run started with rfx_start (its stdout on OUT_FD) to its end, which
 * must be a success: what it printed. */
static char *
wait_victim (RFx *fx, pid_t victim, int out_fd)
{
  int status = rfx_wait (fx, victim, 60000);
  char *out = test_read_all (out_fd);

  close (out_fd);
  assert_int_equal (status, 0);
  return out;
}
/* A run with --run-dir in the workspace makes its private /tmp (on first
 * use) from its run directory's descriptor: another sandbox of the same
 * workspace (a run that does not know that directory) renamed its parent
 * and put a link to a host directory in its place, and the victim's
 * supervisor made its /tmp there, as root, where nothing removed it. */
RFX_CASE (test_private_made_in_its_own_run_dir)
{
  g_autofree char *runs = g_build_filename (fx->ws, "runs", NULL);
  g_autofree char *victim_dir = g_build_filename (runs, "1", NULL);
  g_autofree char *moved = g_build_filename (fx->ws, "runs.old", "1", NULL);
  g_autofree char *moved_json = g_build_filename (moved, "run.json", NULL);
  g_autofree char *moved_private = g_build_filename (moved, "private", NULL);
  g_autofree char *target = g_build_filename (fx->tmp, "target", NULL);
  g_autofree char *go = g_build_filename (fx->ws, "go", NULL);
  g_autofree char *wait_go = g_strdup_printf ("i=0; while [ ! -e %s ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); "
                                              "done; echo victim > /tmp/v && cat /tmp/v",
                                              go);
  g_autofree char *swap = g_strdup_printf (
    "cd %s && mv runs runs.old && mkdir runs && ln -s %s runs/1 && touch go && echo swapped", fx->ws, target);
  g_autofree char *text = NULL;
  g_autofree char *out = NULL;
  RfxResult res = { 0 };
  int out_fd = -1;
  pid_t victim;

  assert_int_equal (g_mkdir_with_parents (runs, 0755), 0);
  assert_int_equal (mkdir (target, 0700), 0);
  test_assert_host_readable (target);
  victim = rfx_start (fx, &out_fd, "--run-dir", victim_dir, "--", "/bin/sh", "-c", wait_go, NULL);
  /* the victim's run directory made before the other sandbox starts */
  for (int i = 0; i < 600 && !g_file_test (victim_dir, G_FILE_TEST_IS_DIR); i++)
    g_usleep (50 * 1000);
  rfx_run (fx, &res, "--", "/bin/sh", "-c", swap, NULL);
  assert_int_equal (res.status, 0);
  assert_string_equal (res.out, "swapped\n");
  rfx_result_clear (&res);
  out = wait_victim (fx, victim, out_fd);
  assert_string_equal (out, "victim\n");
  /* nothing made where the link leads; the run's records in its own
   * directory, and its private sources removed from there */
  {
    g_autoptr (GDir) d = g_dir_open (target, 0, NULL);
    assert_non_null (d);
    assert_null (g_dir_read_name (d));
  }
  assert_true (g_file_get_contents (moved_json, &text, NULL, NULL));
  assert_non_null (strstr (text, "\"exit_status\" : 0"));
  assert_false (g_file_test (moved_private, G_FILE_TEST_EXISTS));
}

/* The way to the state as written, links on it included: with
 * XDG_STATE_HOME reached through a link (~/.local/state a link to a data
 * disk's directory), a sandbox under builtin:host moved the link away (or
 * the directory above it, which the resolved way does not pass) and put a
 * directory of its own in its place: the next runs kept their logs and
 * private files there, in its sight.  Both renames are refused. */
RFX_CASE (test_state_way_through_a_link)
{
  g_autofree char *data = g_build_filename (fx->tmp, "data", "state", NULL);
  g_autofree char *local = g_build_filename (fx->tmp, "home", ".local", NULL);
  g_autofree char *link = g_build_filename (local, "state", NULL);
  /* a second link between the first and the directory, in a directory of
   * its own: on neither the written nor the resolved way, but passed */
  g_autofree char *middle_dir = g_build_filename (fx->tmp, "middle", NULL);
  g_autofree char *middle = g_build_filename (middle_dir, "state", NULL);
  g_autofree char *env_state = g_strdup_printf ("XDG_STATE_HOME=%s", link);
  g_autofree char *script = g_strdup_printf ("mv %s %s.old 2>/dev/null && echo moved-link || echo refused-link; "
                                             "mv %s %s.old 2>/dev/null && echo moved-dir || echo refused-dir; "
                                             "mv %s %s.old 2>/dev/null && echo moved-middle || echo refused-middle; "
                                             "mv %s %s.old 2>/dev/null && echo moved-middle-dir || echo "
                                             "refused-middle-dir",
                                             link, link, local, local, middle, middle, middle_dir, middle_dir);
  char *argv[] = { (char *)"/usr/bin/env",
                   env_state,
                   (char *)test_bin (),
                   (char *)"run",
                   (char *)"--policy",
                   (char *)"builtin:host",
                   (char *)"--",
                   (char *)"/bin/sh",
                   (char *)"-c",
                   script,
                   NULL };
  RfxResult res = { 0 };
  struct stat st;

  assert_int_equal (g_mkdir_with_parents (data, 0700), 0);
  assert_int_equal (g_mkdir_with_parents (local, 0700), 0);
  assert_int_equal (g_mkdir_with_parents (middle_dir, 0700), 0);
  assert_int_equal (symlink (data, middle), 0);
  assert_int_equal (symlink (middle, link), 0);
  /* fusebox/ made by the user, as fusebox asks where links lead to it */
  {
    g_autofree char *made = g_build_filename (data, "fusebox", NULL);
    assert_int_equal (mkdir (made, 0700), 0);
  }
  rfx_run_argv (fx, &res, argv);
  if (res.status != 0)
    fail_msg ("the run exited %d: %s", res.status, res.err);
  assert_string_equal (res.out, "refused-link\nrefused-dir\nrefused-middle\nrefused-middle-dir\n");
  rfx_result_clear (&res);
  assert_int_equal (lstat (link, &st), 0);
  assert_true (S_ISLNK (st.st_mode));
  /* its runs where the link leads */
  {
    g_autofree char *runs = g_build_filename (data, "fusebox", "runs", NULL);
    assert_true (g_file_test (runs, G_FILE_TEST_IS_DIR));
  }
}

/* Another sandbox that sees a running run's --run-dir (in the workspace)
 * moves a directory of the workspace into that run's private /tmp: a
 * vendored repository whose .git it may not touch (a protected name).  The
 * run's end, as root, removed it with the run's /tmp.  What was born
 * before the run began is left where it is, said so; what the run made
 * goes. */
RFX_CASE (test_private_removal_keeps_moved_in)
{
  g_autofree char *run_dir = g_build_filename (fx->ws, "runs", "b", NULL);
  g_autofree char *git_config = g_build_filename (fx->ws, "vendor", "lib", ".git", "config", NULL);
  g_autofree char *moved_config = g_build_filename (run_dir, "private", "%2Ftmp", "lib", ".git", "config", NULL);
  g_autofree char *mine = g_build_filename (run_dir, "private", "%2Ftmp", "mine", NULL);
  g_autofree char *go = g_build_filename (fx->ws, "go", NULL);
  g_autofree char *victim_sh = g_strdup_printf ("echo mine > /tmp/mine && i=0; while [ ! -e %s ] && [ $i -lt 600 ]; "
                                                "do sleep 0.05; i=$((i+1)); done; ls /tmp",
                                                go);
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  RfxResult res = { 0 };
  int out_fd = -1;
  pid_t victim;

  {
    g_autofree char *git_dir = g_path_get_dirname (git_config);
    assert_int_equal (g_mkdir_with_parents (git_dir, 0755), 0);
    test_write (git_config, "[core]\n", 0644);
  }
  test_assert_host_readable (git_config);
  /* the protected name is out of a sandbox's reach in place */
  rfx_run (fx, &res, "--", "/bin/sh", "-c", "rm -rf vendor/lib/.git; ls -a vendor/lib", NULL);
  rfx_result_clear (&res);
  test_assert_host_readable (git_config);

  victim = rfx_start (fx, &out_fd, "--run-dir", run_dir, "--", "/bin/sh", "-c", victim_sh, NULL);
  for (int i = 0; i < 600 && !g_file_test (mine, G_FILE_TEST_EXISTS); i++)
    g_usleep (50 * 1000);
  test_assert_host_readable (mine);
  /* a sandbox no longer finds the run's private tree (it carries
   * fusebox's mark: test_marked_state_hidden_from_earlier_views); whatever
   * else moves something in (a process outside any sandbox, a filesystem
   * without user attributes), the removal keeps it */
  rfx_run (fx, &res, "--", "/bin/sh", "-c", "mv vendor/lib runs/b/private/%2Ftmp/lib 2>/dev/null || echo refused",
           NULL);
  assert_string_equal (res.out, "refused\n");
  rfx_result_clear (&res);
  {
    g_autofree char *lib = g_build_filename (fx->ws, "vendor", "lib", NULL);
    g_autofree char *into = g_build_filename (run_dir, "private", "%2Ftmp", "lib", NULL);
    assert_int_equal (rename (lib, into), 0);
    test_write (go, "", 0644);
  }
  out = wait_victim (fx, victim, out_fd);
  assert_non_null (strstr (out, "lib"));
  /* the run's own file went; the moved-in tree is whole, and said */
  assert_false (g_file_test (mine, G_FILE_TEST_EXISTS));
  test_assert_host_readable (moved_config);
}

/* Two runs whose run directories a harness keeps in the workspace, made
 * after another sandbox of that workspace started (its view knew nothing
 * of them): one new (runs/b), one the harness made empty before, which the
 * earlier sandbox already had as its working directory (runs/c).  The
 * earlier sandbox read both logs, and could hard-link them out for later
 * sandboxes.  What fusebox makes for a run carries its mark, and every
 * view hides what carries it: not found, not linkable; nor may a sandbox
 * set or remove the mark.  In the directory it knew from before, nothing
 * is made (a private/ of its own would have been the run's /tmp), and the
 * directory is neither chmod'ed (a 0700 directory is where views look for
 * the mark) nor moved (the run's files where the sandbox chose). */
RFX_CASE (test_marked_state_hidden_from_earlier_views)
{
  g_autofree char *runs = g_build_filename (fx->ws, "runs", NULL);
  g_autofree char *dir_c = g_build_filename (runs, "c", NULL);
  g_autofree char *dir_b = g_build_filename (runs, "b", NULL);
  g_autofree char *log_b = g_build_filename (dir_b, "access.jsonl", NULL);
  g_autofree char *log_c = g_build_filename (dir_c, "access.jsonl", NULL);
  g_autofree char *stolen = g_build_filename (fx->ws, "stolen", NULL);
  g_autofree char *go = g_build_filename (fx->ws, "go", NULL);
  g_autofree char *mine = g_build_filename (fx->ws, "mine", NULL);
  g_autofree char *script = g_strdup_printf (
    "cd runs/c && i=0; while [ ! -e %s ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; cd %s; "
    "cat runs/b/access.jsonl >/dev/null 2>&1 && echo read-b; cat runs/c/access.jsonl >/dev/null 2>&1 && echo read-c; "
    "ln runs/c/access.jsonl stolen 2>/dev/null && echo linked; "
    "mkdir runs/c/private 2>/dev/null && echo made-private; chmod 755 runs/c 2>/dev/null && echo chmodded; "
    "mv runs/c runs/moved 2>/dev/null && echo moved; echo done",
    go, fx->ws);
  /* user attributes work here (user.other), the mark may not be set */
  const char *mark_py = "import os\n"
                        "os.setxattr('mine', 'user.other', b'x')\n"
                        "try:\n"
                        "    os.setxattr('mine', 'user.fusebox', b'state')\n"
                        "    print('marked')\n"
                        "except PermissionError:\n"
                        "    print('refused')\n";
  g_autofree char *out = NULL;
  RfxResult r = { 0 };
  int out_fd = -1;
  pid_t earlier;

  assert_int_equal (g_mkdir_with_parents (dir_c, 0700), 0);
  test_write (mine, "mine\n", 0644);
  earlier = rfx_start (fx, &out_fd, "--", "/bin/sh", "-c", script, NULL);
  /* the earlier sandbox is in runs/c before either run starts */
  g_usleep (500 * 1000);
  rfx_run (fx, &r, "--run-dir", dir_b, "--", "/bin/true", NULL);
  assert_int_equal (r.status, 0);
  rfx_result_clear (&r);
  rfx_run (fx, &r, "--run-dir", dir_c, "--", "/bin/true", NULL);
  assert_int_equal (r.status, 0);
  rfx_result_clear (&r);
  test_assert_host_readable (log_b);
  test_assert_host_readable (log_c);
  test_write (go, "", 0644);
  out = wait_victim (fx, earlier, out_fd);
  assert_string_equal (out, "done\n");
  assert_false (g_file_test (stolen, G_FILE_TEST_EXISTS));

  rfx_run (fx, &r, "--", "/usr/bin/python3", "-c", mark_py, NULL);
  assert_int_equal (r.status, 0);
  assert_string_equal (r.out, "refused\n");
  rfx_result_clear (&r);
}

/* A state directory under a workspace (a harness's XDG_STATE_HOME=WS/.st):
 * an earlier sandbox, with its state elsewhere, puts links where fusebox
 * would make fusebox/runs and fusebox/sessions.  The links are the
 * caller's (a sandbox's files are), so their owner says nothing; but
 * fusebox never makes them as links: a later run, session or prune
 * refuses them, naming the link, and makes nothing where they lead. */
RFX_CASE (test_state_link_planted)
{
  g_autofree char *st = g_build_filename (fx->ws, "st", NULL);
  g_autofree char *visible = g_build_filename (fx->ws, "visible", NULL);
  g_autofree char *runs_link = g_build_filename (st, "fusebox", "runs", NULL);
  g_autofree char *kept = g_build_filename (visible, "20260101-000000-kept", "run.json", NULL);
  g_autofree char *state = NULL;
  RfxResult r = { 0 };

  /* the plant, by a sandbox */
  rfx_run (fx, &r, "--", "/bin/sh", "-c",
           "mkdir -p st/fusebox visible/20260101-000000-kept && chmod 700 visible && "
           "echo '{\"run\":\"kept\",\"exit_status\":0}' > visible/20260101-000000-kept/run.json && "
           "ln -s ../../visible st/fusebox/runs && echo planted",
           NULL);
  assert_int_equal (r.status, 0);
  assert_string_equal (r.out, "planted\n");
  rfx_result_clear (&r);
  test_assert_host_readable (kept);

  state = g_steal_pointer (&fx->state);
  fx->state = g_strdup (st);
  rfx_run (fx, &r, "--", "/bin/true", NULL);
  assert_int_equal (r.status, 125);
  assert_non_null (strstr (r.err, runs_link));
  assert_non_null (strstr (r.err, "is a symbolic link"));
  rfx_result_clear (&r);
  rfx_fusebox (fx, &r, "runs", "--prune", NULL);
  assert_int_not_equal (r.status, 0);
  assert_non_null (strstr (r.err, "is a symbolic link"));
  rfx_result_clear (&r);
  test_assert_host_readable (kept);
  {
    g_autoptr (GDir) d = g_dir_open (visible, 0, NULL);
    guint n = 0;
    while (g_dir_read_name (d) != NULL)
      n++;
    assert_int_equal (n, 1); /* no run made there */
  }

  /* the sessions' directory the same way */
  assert_int_equal (unlink (runs_link), 0);
  {
    g_autofree char *sessions_link = g_build_filename (st, "fusebox", "sessions", NULL);
    g_autofree char *lock = g_build_filename (visible, "s1.lock", NULL);

    assert_int_equal (symlink ("../../visible", sessions_link), 0);
    rfx_run (fx, &r, "--session", "s1", "--", "/bin/true", NULL);
    assert_int_equal (r.status, 125);
    assert_non_null (strstr (r.err, sessions_link));
    rfx_result_clear (&r);
    assert_false (g_file_test (lock, G_FILE_TEST_EXISTS));
  }

  /* XDG_STATE_HOME itself a link the sandbox made, to a root-only
   * directory (a user's own link to a data disk looks the same): the state
   * is not made there the first time; once the user made fusebox/ where it
   * leads, it is used */
  {
    g_autofree char *secret = g_build_filename (fx->tmp, "secret-dir", NULL);
    g_autofree char *plant = g_strdup_printf ("ln -s %s st2 && echo planted", secret);
    g_autofree char *st2 = g_build_filename (fx->ws, "st2", NULL);
    g_autofree char *made = g_build_filename (secret, "fusebox", NULL);

    assert_int_equal (mkdir (secret, 0700), 0);
    g_free (fx->state);
    fx->state = g_strdup (state);
    rfx_run (fx, &r, "--", "/bin/sh", "-c", plant, NULL);
    assert_string_equal (r.out, "planted\n");
    rfx_result_clear (&r);
    g_free (fx->state);
    fx->state = g_strdup (st2);
    rfx_run (fx, &r, "--", "/bin/true", NULL);
    assert_int_equal (r.status, 125);
    assert_non_null (strstr (r.err, "the way to it passes the symbolic link"));
    rfx_result_clear (&r);
    rfx_run (fx, &r, "--session", "s2", "--", "/bin/true", NULL);
    assert_int_equal (r.status, 125);
    assert_non_null (strstr (r.err, "the way to it passes the symbolic link"));
    rfx_result_clear (&r);
    assert_false (g_file_test (made, G_FILE_TEST_EXISTS));
    assert_int_equal (mkdir (made, 0700), 0);
    rfx_run (fx, &r, "--", "/bin/true", NULL);
    assert_int_equal (r.status, 0);
    rfx_result_clear (&r);
  }
  g_free (fx->state);
  fx->state = g_steal_pointer (&state);
}

RFX_DEFINE_MAIN (NULL, NULL, RFX_TEST (test_run_dirs_beside_each_other),
                 RFX_TEST (test_run_dirs_in_their_own_directory), RFX_TEST (test_alias_through_a_source),
                 RFX_TEST (test_source_on_state_refused), RFX_TEST (test_serve_log_out_of_reach),
                 RFX_TEST (test_private_made_in_its_own_run_dir), RFX_TEST (test_state_way_through_a_link),
                 RFX_TEST (test_state_link_planted), RFX_TEST (test_private_removal_keeps_moved_in),
                 RFX_TEST (test_marked_state_hidden_from_earlier_views))
