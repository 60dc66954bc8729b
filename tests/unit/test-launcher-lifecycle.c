/* fusebox — a sandbox's life: exit statuses and failure messages, signals
 * forwarded, daemons that outlive the command, kill -9 -1 from inside,
 * SIGKILL of the supervisor, no inherited fds, no controlling terminal. */
#include "test-launcher-util.h"

#include <dirent.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* Host pids of every process whose pid namespace link is NS. */
static GArray *
pids_in_ns (const char *ns)
{
  GArray *pids = g_array_new (FALSE, FALSE, sizeof (pid_t));
  DIR *d = opendir ("/proc");
  assert_non_null (d);
  struct dirent *e;
  while ((e = readdir (d)))
    {
      char *end;
      long pid = strtol (e->d_name, &end, 10);
      if (*end || pid <= 0)
        continue;
      g_autofree char *path = g_strdup_printf ("/proc/%ld/ns/pid", pid);
      g_autofree char *link = g_file_read_link (path, NULL);
      if (link && strcmp (link, ns) == 0)
        {
          pid_t p = (pid_t)pid;
          g_array_append_val (pids, p);
        }
    }
  closedir (d);
  return pids;
}

static void
test_exit_status (void **state)
{
  TestState *s = *state;
  TestRun run;
  FbLauncherPlan plan;

  static const struct
  {
    const char *script;
    int exit_code;
  } cases[] = {
    { "exit 0", 0 }, { "exit 201", 201 }, { "kill -9 $$", 128 + SIGKILL }, /* killed by a signal: 128 + N */
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *argv[] = { "/bin/sh", "-c", cases[i].script, NULL };

      test_plan (&plan, argv);
      test_run (s, &plan, &run);
      if (run.failed || run.exit_code != cases[i].exit_code)
        fail_msg ("sh -c '%s': %s %d, expected exit %d", cases[i].script, run.failed ? "failed, exit" : "exit",
                  run.exit_code, cases[i].exit_code);
      test_run_clear (&run);
    }
}

static void
assert_failure (TestRun *run, int exit_code, FbLauncherStep step, int error, const char *in_message)
{
  if (!run->failed)
    fail_msg ("expected a failure at %s, got exit %d", fb_launcher_step_to_string (step), run->exit_code);
  assert_int_equal (run->exit_code, exit_code);
  assert_string_equal (fb_launcher_step_to_string (run->failure.step), fb_launcher_step_to_string (step));
  assert_int_equal (run->failure.error, error);
  assert_non_null (run->message);
  /* the message names the step and the path */
  if (!strstr (run->message, fb_launcher_step_to_string (step)) || !strstr (run->message, in_message))
    fail_msg ("message lacks the step or \"%s\": %s", in_message, run->message);
}

/* Run PLAN, which must fail as assert_failure says. */
static void
run_failing (TestState *s, FbLauncherPlan *plan, int exit_code, FbLauncherStep step, int error, const char *in_message)
{
  TestRun run;

  test_run (s, plan, &run);
  assert_failure (&run, exit_code, step, error, in_message);
  test_run_clear (&run);
}

static void
test_own_failures (void **state)
{
  TestState *s = *state;
  TestRun run;
  FbLauncherPlan plan;

  /* 127: not found, in PATH and by path.  PATH without the caller's
   * entries: a root caller's sandbox is nobody on the host, for whom
   * /root/... is EACCES (126) on this host-directory root. */
  const char *by_name[] = { "fb-no-such-command", NULL };
  const char *path_env[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };
  test_plan (&plan, by_name);
  plan.envp = path_env;
  test_run (s, &plan, &run);
  assert_failure (&run, 127, FB_LAUNCHER_STEP_EXEC, ENOENT, "fb-no-such-command");
  assert_non_null (strstr (run.message, "PATH="));
  test_run_clear (&run);

  const char *by_path[] = { "/nonexistent-fb/cmd", NULL };
  test_plan (&plan, by_path);
  run_failing (s, &plan, 127, FB_LAUNCHER_STEP_EXEC, ENOENT, "/nonexistent-fb/cmd");

  /* 126: exists but has no x bit (inside, nobody has CAP_DAC_OVERRIDE) */
  g_autofree char *noexec = test_tmp_file (s, "noexec", "#!/bin/sh\n", 0644);
  const char *not_exec[] = { noexec, NULL };
  test_plan (&plan, not_exec);
  run_failing (s, &plan, 126, FB_LAUNCHER_STEP_EXEC, EACCES, noexec);

  /* 126: executable but no known format */
  g_autofree char *garbage = test_tmp_file (s, "garbage", "\x01\x02garbage", 0755);
  const char *bad_format[] = { garbage, NULL };
  test_plan (&plan, bad_format);
  run_failing (s, &plan, 126, FB_LAUNCHER_STEP_EXEC, ENOEXEC, garbage);

  /* 125: the sandbox could not be made */
  const char *t[] = { "/bin/true", NULL };
  test_plan (&plan, t);
  plan.cwd = "/nonexistent-fb-cwd";
  run_failing (s, &plan, 125, FB_LAUNCHER_STEP_CHDIR, ENOENT, "/nonexistent-fb-cwd");

  g_autofree char *missing = g_build_filename (s->tmpdir, "missing-root", NULL);
  test_plan (&plan, t);
  plan.root_dir = missing;
  run_failing (s, &plan, 125, FB_LAUNCHER_STEP_OPEN_ROOT, ENOENT, missing);

  /* a root without /proc to mount on: named, not grown on the host */
  test_plan (&plan, t);
  plan.root_dir = s->tmpdir;
  run_failing (s, &plan, 125, FB_LAUNCHER_STEP_MOUNT_PROC, ENOENT, "/proc");
  assert_false (g_file_test (g_build_filename (s->tmpdir, "proc", NULL), G_FILE_TEST_EXISTS));

  /* bad plans are refused before any clone */
  FbLauncherChild *child = NULL;
  const char *none[] = { NULL };
  test_plan (&plan, none);
  assert_int_equal (fb_launcher_spawn (&plan, &child), -EINVAL);
  test_plan (&plan, t);
  plan.cwd = "relative";
  assert_int_equal (fb_launcher_spawn (&plan, &child), -EINVAL);
  assert_null (child);
}

/* A signal to the supervisor's child reaches the command (which handles it)
 * and the command's status comes back; default actions give 128+N. */
static void
test_signals_forwarded (void **state)
{
  TestState *s = *state;
  static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

  for (size_t i = 0; i < G_N_ELEMENTS (sigs); i++)
    {
      g_autofree char *script = g_strdup_printf ("trap 'echo got; exit %d' %d; echo ready;"
                                                 "while :; do sleep 0.05; done",
                                                 (int)(40 + i), sigs[i]);
      const char *argv[] = { "/bin/sh", "-c", script, NULL };
      int out;
      FbLauncherChild *child = test_spawn_ready (s, argv, &out);
      assert_int_equal (fb_launcher_child_kill (child, sigs[i]), 0);
      g_autofree char *got = test_read_line (out, -1);
      assert_non_null (got);
      assert_string_equal (got, "got");
      int code;
      assert_int_equal (fb_launcher_child_wait (child, &code), 0);
      assert_int_equal (code, 40 + (int)i);
      test_close_fd (s, out);
    }

  /* no handler: the command dies of it, the run says 128+N */
  static const int fatal[] = { SIGINT, SIGTERM, SIGHUP };
  for (size_t i = 0; i < G_N_ELEMENTS (fatal); i++)
    {
      const char *argv[] = { "/bin/sh", "-c", "echo ready; exec sleep 1000", NULL };
      int out;
      FbLauncherChild *child = test_spawn_ready (s, argv, &out);
      /* whether the shell or the sleep it execs gets it, the default
       * action kills the command */
      assert_int_equal (fb_launcher_child_kill (child, fatal[i]), 0);
      int code = 0;
      assert_int_equal (fb_launcher_child_wait (child, &code), 0);
      assert_int_equal (code, 128 + fatal[i]);
      test_close_fd (s, out);
    }
}

/* kill -9 -1 inside kills the sandbox's processes and nothing of the host. */
static void
test_kill_all_inside (void **state)
{
  TestState *s = *state;
  pid_t host = fork ();
  assert_true (host >= 0);
  if (host == 0)
    {
      for (;;)
        pause ();
    }
  test_keep_pid (s, host);

  const char *argv[] = { "/bin/sh", "-c", "sleep 1000 & kill -9 -1; wait $!; echo \"survived $?\"", NULL };
  g_autofree char *out = test_run_ok (s, argv);
  /* the sandbox's sleep was killed, the shell (the caller) was spared */
  assert_string_equal (out, "survived 137\n");
  /* the host's process lives */
  assert_int_equal (waitpid (host, NULL, WNOHANG), 0);
  assert_int_equal (kill (host, 0), 0);
}

/* A command that leaves a daemon behind ends the run when it exits: pid 1
 * exits with it and the kernel kills the rest of the namespace. */
static void
test_daemon_does_not_outlive (void **state)
{
  TestState *s = *state;
  const char *argv[] = { "/bin/sh", "-c",
                         "(setsid sleep 1000 > /dev/null 2>&1 &); readlink /proc/self/ns/pid; read x; exit 3", NULL };
  FbLauncherPlan plan;
  test_plan (&plan, argv);
  int in[2], out[2];
  test_keep_pipe (s, in);
  test_keep_pipe (s, out);
  plan.stdin_fd = in[0];
  plan.stdout_fd = out[1];
  FbLauncherChild *child = test_spawn (s, &plan);
  test_close_fd (s, in[0]);
  test_close_fd (s, out[1]);

  g_autofree char *ns = test_read_line (out[0], -1);
  assert_non_null (ns);
  assert_true (g_str_has_prefix (ns, "pid:["));
  /* pid 1, the shell and the daemon (once it has forked) */
  g_autoptr (GArray) before = NULL;
  for (int tries = 0; tries < 100; tries++)
    {
      if (before)
        g_array_unref (before);
      before = pids_in_ns (ns);
      if (before->len >= 3)
        break;
      usleep (20000);
    }
  assert_true (before->len >= 3);

  assert_int_equal (write (in[1], "go\n", 3), 3);
  int code;
  assert_int_equal (fb_launcher_child_wait (child, &code), 0);
  assert_int_equal (code, 3);
  g_autoptr (GArray) after = pids_in_ns (ns);
  assert_int_equal (after->len, 0);
}

/* SIGKILL to the supervisor: the outer child and pid 1 get PDEATHSIG, the
 * pid namespace dies with pid 1; nothing of the sandbox is left. */
static void
test_supervisor_sigkill (void **state)
{
  TestState *s = *state;
  /* adopt the orphans so that we can reap them (and not leave zombies) */
  assert_int_equal (prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
  int out[2], info[2];
  test_keep_pipe (s, out);
  test_keep_pipe (s, info);

  pid_t supervisor = fork ();
  assert_true (supervisor >= 0);
  if (supervisor == 0)
    {
      const char *argv[] = { "/bin/sh", "-c", "sleep 1000 & sleep 1000 & readlink /proc/self/ns/pid; exec sleep 1000",
                             NULL };
      FbLauncherPlan plan;
      test_plan (&plan, argv);
      plan.stdout_fd = out[1];
      FbLauncherChild *child = NULL;
      if (fb_launcher_spawn (&plan, &child) < 0)
        _exit (1);
      pid_t outer = fb_launcher_child_get_pid (child);
      if (write (info[1], &outer, sizeof outer) != sizeof outer)
        _exit (1);
      int code;
      fb_launcher_child_wait (child, &code);
      _exit (0);
    }
  test_keep_pid (s, supervisor);
  test_close_fd (s, out[1]);
  test_close_fd (s, info[1]);

  pid_t outer;
  assert_int_equal (read (info[0], &outer, sizeof outer), sizeof outer);
  g_autofree char *ns = test_read_line (out[0], -1);
  assert_non_null (ns);
  assert_true (g_str_has_prefix (ns, "pid:["));
  /* pidfds before the kill: no pid can be reused under us.  A listing can
   * hold a process that is already gone by the time we open it (readlink,
   * the shell before its exec): those are skipped, and we wait until four
   * live ones are held (pid 1, two sleeps, the exec'd sleep). */
  GArray *pidfds = g_array_new (FALSE, FALSE, sizeof (int));
  int fd = (int)syscall (SYS_pidfd_open, outer, 0);
  assert_true (fd >= 0);
  g_array_append_val (pidfds, fd);
  for (int tries = 0; tries < 100 && pidfds->len < 5; tries++)
    {
      g_autoptr (GArray) inside = pids_in_ns (ns);
      for (guint i = 1; i < pidfds->len; i++)
        close (g_array_index (pidfds, int, i));
      g_array_set_size (pidfds, 1);
      for (guint i = 0; i < inside->len; i++)
        {
          fd = (int)syscall (SYS_pidfd_open, g_array_index (inside, pid_t, i), 0);
          if (fd < 0)
            {
              assert_int_equal (errno, ESRCH);
              continue;
            }
          g_array_append_val (pidfds, fd);
        }
      if (pidfds->len < 5)
        usleep (20000);
    }
  assert_true (pidfds->len >= 5);

  assert_int_equal (kill (supervisor, SIGKILL), 0);
  assert_int_equal (waitpid (supervisor, NULL, 0), supervisor);
  s->pids[0] = 0;

  /* everything gone within a second */
  gint64 deadline = g_get_monotonic_time () + G_USEC_PER_SEC;
  for (guint i = 0; i < pidfds->len; i++)
    {
      int left_ms = (int)MAX (0, (deadline - g_get_monotonic_time ()) / 1000);
      struct pollfd pfd = { .fd = g_array_index (pidfds, int, i), .events = POLLIN };
      int n = poll (&pfd, 1, left_ms);
      if (n != 1)
        fail_msg ("process %u of the sandbox still alive after 1 s", i);
    }
  for (guint i = 0; i < pidfds->len; i++)
    close (g_array_index (pidfds, int, i));
  g_array_unref (pidfds);
  /* reap what was re-parented to us */
  while (waitpid (-1, NULL, WNOHANG) > 0)
    ;
  g_autoptr (GArray) left = pids_in_ns (ns);
  assert_int_equal (left->len, 0);
  assert_int_equal (prctl (PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0), 0);
}

/* Nothing but 0-2 is inherited, and there is no controlling terminal (a new
 * session led by pid 1). */
static void
test_no_fds_no_tty (void **state)
{
  TestState *s = *state;
  /* an fd without O_CLOEXEC: the lock-down must still close it */
  int leak = open ("/dev/null", O_RDONLY);
  assert_true (leak > 2);
  test_keep_fd (s, leak);
  const char *argv[] = { "/bin/sh", "-c", "ls /proc/self/fd | tr '\\n' ' '; cut -d' ' -f6,7 /proc/self/stat", NULL };
  g_autofree char *out = test_run_ok (s, argv);
  /* ls's own directory fd is 3; session 1 (pid 1's), tty_nr 0 */
  assert_string_equal (out, "0 1 2 3 1 0\n");
}

TEST_DEFINE_MAIN (NULL, NULL, TEST_LAUNCHER_TEST (test_exit_status), TEST_LAUNCHER_TEST (test_own_failures),
                  TEST_LAUNCHER_TEST (test_signals_forwarded), TEST_LAUNCHER_TEST (test_kill_all_inside),
                  TEST_LAUNCHER_TEST (test_daemon_does_not_outlive), TEST_LAUNCHER_TEST (test_supervisor_sigkill),
                  TEST_LAUNCHER_TEST (test_no_fds_no_tty))
