/* fusebox — the lifecycle of a real `fusebox run`:
 *  - SIGKILL to the supervisor leaves no process of the sandbox and no
 *    mount behind (its pid and mount namespaces have no process left);
 *  - a command that forks a daemon and exits ends the run, daemon included;
 *  - SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the command, and
 *    an unhandled one comes back as 128+N;
 *  - its own failures exit 125/126/127 with the step and the fix, and the
 *    prerequisite probes after a 125;
 *  - run.json records the end.
 * "Within a second" is checked as a bounded wait with a 5 s cap (a loaded
 * CI machine must not fail it): the point is that the processes go, not
 * how fast.
 */
#include <signal.h>

#include "tests/lib/test-run.h"

/* `fusebox run` of SCRIPT in the background, after the script printed
 * its pid and mount namespaces ("pid:[...]", "mnt:[...]"): the
 * supervisor's pid. */
static pid_t
start_in_namespaces (RFx *fx, int *ret_out, const char *script, char **ret_pid_ns, char **ret_mnt_ns)
{
  g_autofree char *command = g_strconcat ("readlink /proc/self/ns/pid; readlink /proc/self/ns/mnt; ", script, NULL);
  pid_t sup = rfx_start (fx, ret_out, "--", "/bin/sh", "-c", command, NULL);

  *ret_pid_ns = test_read_line (*ret_out, 10000);
  *ret_mnt_ns = test_read_line (*ret_out, 10000);
  if (*ret_pid_ns == NULL || *ret_mnt_ns == NULL || !g_str_has_prefix (*ret_pid_ns, "pid:[") ||
      !g_str_has_prefix (*ret_mnt_ns, "mnt:["))
    fail_msg ("the sandbox did not report its namespaces (got '%s', '%s')", *ret_pid_ns ? *ret_pid_ns : "",
              *ret_mnt_ns ? *ret_mnt_ns : "");
  return sup;
}

RFX_CASE (test_sigkill_leaves_nothing)
{
  int out;
  g_autofree char *pid_ns = NULL, *mnt_ns = NULL;

  pid_t sup = start_in_namespaces (fx, &out, "echo ready; exec sleep 1000", &pid_ns, &mnt_ns);
  g_autofree char *ready = test_read_line (out, 10000);
  assert_string_equal (ready, "ready");
  assert_true (test_ns_has_processes ("pid", pid_ns));
  assert_true (test_ns_has_processes ("mnt", mnt_ns));

  assert_int_equal (kill (sup, SIGKILL), 0);
  assert_int_equal (rfx_wait (fx, sup, 5000), 128 + SIGKILL);
  if (!TEST_WAIT_FOR (!test_ns_has_processes ("pid", pid_ns) && !test_ns_has_processes ("mnt", mnt_ns), 5000))
    fail_msg ("processes of the sandbox (%s, %s) are still alive after its supervisor was killed", pid_ns, mnt_ns);
  /* the FUSE mount lived in that mount namespace only: nothing on the host
   * refers to the test's directories */
  g_autofree char *mounts = test_read_file ("/proc/self/mountinfo");
  assert_null (strstr (mounts, fx->tmp));
  close (out);

  /* the run is over for `fusebox runs`, though run.json never got "ended" */
  g_auto (TestCmd) runs = { 0 };
  rfx_fusebox (fx, &runs, "runs", "--json", NULL);
  g_autoptr (JsonObject) entry = test_parse_object (runs.out);
  assert_string_equal (test_json_str (entry, "state"), "over");
}

RFX_CASE (test_daemon_ends_with_the_run)
{
  int out;
  g_autofree char *pid_ns = NULL, *mnt_ns = NULL;

  /* the daemon keeps stdout open: the run must end anyway */
  pid_t sup = start_in_namespaces (fx, &out, "sleep 1000 & exit 0", &pid_ns, &mnt_ns);
  int status = rfx_wait (fx, sup, 10000);
  if (status < 0)
    fail_msg ("fusebox run did not end after its command exited (a daemon kept it alive)");
  assert_int_equal (status, 0);
  if (!TEST_WAIT_FOR (!test_ns_has_processes ("pid", pid_ns), 5000))
    fail_msg ("the daemon (%s) outlived the run", pid_ns);
  close (out);
}

RFX_CASE (test_signals_forwarded)
{
  static const struct
  {
    int sig;
    int code;
  } cases[] = { { SIGINT, 11 }, { SIGTERM, 12 }, { SIGHUP, 13 }, { SIGQUIT, 14 } };

  for (size_t i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      int out;
      /* the command says "ready" once its traps are set */
      pid_t sup = rfx_start (fx, &out, "--", "/bin/sh", "-c",
                             "trap 'exit 11' INT; trap 'exit 12' TERM; trap 'exit 13' HUP; trap 'exit 14' QUIT; "
                             "echo ready; while :; do sleep 0.05; done",
                             NULL);
      g_autofree char *ready = test_read_line (out, 10000);
      assert_string_equal (ready, "ready");
      assert_int_equal (kill (sup, cases[i].sig), 0);
      int status = rfx_wait (fx, sup, 10000);
      if (status != cases[i].code)
        fail_msg ("signal %s: fusebox run exited %d, expected the command's %d", strsignal (cases[i].sig), status,
                  cases[i].code);
      close (out);
    }

  /* not handled by the command: 128+N, as a shell would report it */
  int out;
  g_autofree char *dir = g_build_filename (fx->runs, "unhandled", NULL);
  pid_t sup = rfx_start (fx, &out, "--run-dir", dir, "--", "/bin/sh", "-c", "echo ready; exec sleep 1000", NULL);
  g_autofree char *ready = test_read_line (out, 10000);
  assert_string_equal (ready, "ready");
  assert_int_equal (kill (sup, SIGTERM), 0);
  assert_int_equal (rfx_wait (fx, sup, 10000), 128 + SIGTERM);
  close (out);

  /* run.json has the end */
  g_autofree char *info_path = g_build_filename (dir, "run.json", NULL);
  g_autofree char *info_text = test_read_file (info_path);
  g_autoptr (JsonObject) info = test_parse_object (info_text);
  assert_int_equal (json_object_get_int_member (info, "exit_status"), 128 + SIGTERM);
  assert_true (json_object_has_member (info, "ended"));
  assert_true (json_object_has_member (info, "records"));
}

RFX_CASE (test_own_failures)
{
  g_autofree char *script = g_build_filename (fx->ws, "not-executable.sh", NULL);
  RfxResult r;

  rfx_run (fx, &r, "--", "fusebox-no-such-command", NULL);
  assert_int_equal (r.status, 127);
  assert_non_null (strstr (r.err, "exec: fusebox-no-such-command: command not found in the sandbox"));
  rfx_result_clear (&r);

  test_write (script, "#!/bin/sh\nexit 0\n", 0644);
  rfx_run (fx, &r, "--", script, NULL);
  assert_int_equal (r.status, 126);
  assert_non_null (strstr (r.err, "can't be executed"));
  rfx_result_clear (&r);

  /* a sandbox step fails: the step, the path, the fix, then the probes */
  g_autofree char *dir = g_build_filename (fx->runs, "cwd-failure", NULL);
  rfx_run (fx, &r, "--run-dir", dir, "--cwd", "/fusebox-no-such-dir", "--", "/bin/true", NULL);
  assert_int_equal (r.status, 125);
  test_assert_contains (r.err, "chdir: /fusebox-no-such-dir:", "pass --cwd", "every prerequisite is met", NULL);
  g_autofree char *info_path = g_build_filename (dir, "run.json", NULL);
  g_autofree char *info_text = test_read_file (info_path);
  g_autoptr (JsonObject) info = test_parse_object (info_text);
  assert_int_equal (json_object_get_int_member (info, "exit_status"), 125);
  assert_string_equal (test_json_str (info, "failed_step"), "chdir");
  rfx_result_clear (&r);

  /* fusebox's own failures before the sandbox exists are 125 too, never a
   * status the command could have given (usage errors and a bad policy:
   * test-launcher-run): a run directory that can't be made */
  g_autofree char *not_dir = g_build_filename (fx->ws, "not-a-dir", NULL);
  test_write (not_dir, "x", 0644);
  g_autofree char *under_file = g_build_filename (not_dir, "run", NULL);
  rfx_run (fx, &r, "--run-dir", under_file, "--", "/bin/true", NULL);
  assert_int_equal (r.status, 125);
  assert_non_null (strstr (r.err, "the run directory"));
  rfx_result_clear (&r);

  /* and the command's own status otherwise */
  rfx_run (fx, &r, "--", "/bin/sh", "-c", "exit 42", NULL);
  assert_int_equal (r.status, 42);
  rfx_result_clear (&r);
}

RFX_DEFINE_MAIN (NULL, NULL, RFX_TEST (test_sigkill_leaves_nothing), RFX_TEST (test_daemon_ends_with_the_run),
                 RFX_TEST (test_signals_forwarded), RFX_TEST (test_own_failures))
