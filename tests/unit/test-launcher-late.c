/* Unit tests: a late command (FbLauncherPlan.late_command).  Real sandboxes
 * (the host's "/" read-only as root): each is made and locked down with no
 * command, waits (fb_launcher_child_wait_ready), and then takes one in a
 * sealed memfd with its three streams (fb_launcher_child_send_command). */
#include "tests/unit/test-launcher-util.h"

#include "ipc/ipc-process-launch.h"

#include <sys/mman.h>

/* A sealed memfd holding ARGV in ENVP and CWD with UMASK, registered for
 * teardown. */
static int
spec_fd (TestState *s, const char *const *argv, const char *const *envp, const char *cwd, guint32 mask)
{
  FbLaunchSpec spec = fb_launch_spec_command (0, argv, envp, cwd);
  const char *why = NULL;
  int fd = -1;

  spec.umask = mask;
  if (fb_launch_spec_seal (&spec, false, &fd, &why) < 0)
    fail_msg ("fb_launch_spec_seal: %s", why);
  return test_keep_fd (s, fd);
}

/* A late sandbox, ready for its command. */
static FbLauncherChild *
spawn_ready (TestState *s)
{
  FbLauncherPlan plan;

  test_plan (&plan, NULL);
  plan.late_command = true;
  FbLauncherChild *child = test_spawn (s, &plan);
  int r = fb_launcher_child_wait_ready (child);
  if (r < 0)
    {
      g_autofree char *message = fb_launcher_child_describe_failure (child);
      fail_msg ("wait_ready: %s: %s", g_strerror (-r), message);
    }
  return child;
}

/* Hand CHILD its command with stdout on a pipe (stdin /dev/null, stderr
 * ours); our copies of its streams are closed.  The pipe's read end. */
static int
send_command (TestState *s, FbLauncherChild *child, int spec)
{
  int p[2];
  int null = test_keep_fd (s, open ("/dev/null", O_RDONLY | O_CLOEXEC));

  test_keep_pipe (s, p);
  int stdio[3] = { null, p[1], STDERR_FILENO };
  assert_int_equal (fb_launcher_child_send_command (child, spec, stdio), 0);
  test_close_fd (s, p[1]);
  test_close_fd (s, null);
  return p[0];
}

/* ARGV (ENVP, CWD, UMASK) run late to completion: its stdout, its exit
 * status in *RET_EXIT. */
static char *
run_late (TestState *s, const char *const *argv, const char *const *envp, const char *cwd, guint32 mask, int *ret_exit)
{
  FbLauncherChild *child = spawn_ready (s);
  int out = send_command (s, child, spec_fd (s, argv, envp, cwd, mask));
  int r = fb_launcher_child_wait_exec (child);
  if (r < 0)
    {
      g_autofree char *message = fb_launcher_child_describe_failure (child);
      fail_msg ("wait_exec: %s", message);
    }
  char *text = test_read_all (out);
  assert_int_equal (fb_launcher_child_wait (child, ret_exit), 0);
  return text;
}

static void
test_output_and_status (void **state)
{
  const char *argv[] = { "/bin/sh", "-c", "echo hello late; exit 3", NULL };
  const char *envp[] = { NULL };
  int code = -1;
  g_autofree char *out = run_late (*state, argv, envp, "/", FB_LAUNCH_UMASK_KEEP, &code);

  assert_string_equal (out, "hello late\n");
  assert_int_equal (code, 3);
}

/* The spec's cwd and umask are the command's; "keep" leaves pid 1's (the
 * spawner's). */
static void
test_cwd_and_umask (void **state)
{
  const char *argv[] = { "/bin/sh", "-c", "pwd; umask", NULL };
  const char *envp[] = { NULL };
  int code = -1;
  mode_t old = umask (022);
  g_autofree char *out = run_late (*state, argv, envp, "/usr/bin", 027, &code);
  g_autofree char *kept = run_late (*state, argv, envp, "/", FB_LAUNCH_UMASK_KEEP, &code);

  umask (old);
  assert_string_equal (out, "/usr/bin\n0027\n");
  assert_string_equal (kept, "/\n0022\n");
  assert_int_equal (code, 0);
}

/* A cwd that is not there fails as the normal path's chdir does. */
/* The command of CHILD did not start: STEP failed with ERROR, the
 * message names SAY (and SAY2, if not NULL), and the exit status is CODE. */
static void
assert_failed (FbLauncherChild *child, FbLauncherStep step, int error, const char *say, const char *say2, int code)
{
  g_autofree char *message = NULL;
  int got = -1;

  assert_int_equal (fb_launcher_child_wait_exec (child), -ECHILD);
  assert_int_equal (fb_launcher_child_get_failure (child)->step, step);
  assert_int_equal (fb_launcher_child_get_failure (child)->error, error);
  message = fb_launcher_child_describe_failure (child);
  assert_non_null (strstr (message, say));
  if (say2 != NULL)
    assert_non_null (strstr (message, say2));
  assert_int_equal (fb_launcher_child_wait (child, &got), 0);
  assert_int_equal (got, code);
}

static void
test_missing_cwd (void **state)
{
  TestState *s = *state;
  const char *argv[] = { "/bin/true", NULL };
  FbLauncherChild *child = spawn_ready (s);

  send_command (s, child, spec_fd (s, argv, NULL, "/no/such/dir", FB_LAUNCH_UMASK_KEEP));
  assert_failed (child, FB_LAUNCHER_STEP_CHDIR, ENOENT, "/no/such/dir", NULL, FB_LAUNCHER_EXIT_SANDBOX);
}

/* argv[0] without "/" is searched in the environment's PATH (an empty
 * entry: "."); one found nowhere is the exec's failure, 127. */
static void
test_path_search (void **state)
{
  TestState *s = *state;
  const char *argv[] = { "sh", "-c", "echo found", NULL };
  const char *envp[] = { "PATH=/no/such:/usr/bin:/bin", NULL };
  const char *missing[] = { "fusebox-no-such-command", NULL };
  int code = -1;
  g_autofree char *out = run_late (s, argv, envp, "/", FB_LAUNCH_UMASK_KEEP, &code);

  assert_string_equal (out, "found\n");
  assert_int_equal (code, 0);

  FbLauncherChild *child = spawn_ready (s);
  send_command (s, child, spec_fd (s, missing, envp, "/", FB_LAUNCH_UMASK_KEEP));
  assert_failed (child, FB_LAUNCHER_STEP_EXEC, ENOENT, "fusebox-no-such-command", "PATH=/no/such:/usr/bin:/bin",
                 FB_LAUNCHER_EXIT_NOT_FOUND);
}

/* A terminating signal before the command ends the sandbox with 128+N:
 * once it waits, and while it is still being made. */
static void
test_signal_before_command (void **state)
{
  TestState *s = *state;
  const char *argv[] = { "/bin/true", NULL };
  FbLauncherChild *child = spawn_ready (s);
  FbLauncherPlan plan;
  int code = -1;

  assert_int_equal (fb_launcher_child_kill (child, SIGTERM), 0);
  assert_int_equal (fb_launcher_child_wait (child, &code), 0);
  assert_int_equal (code, 128 + SIGTERM);
  /* it never executed anything, and takes no command */
  assert_int_equal (fb_launcher_child_wait_exec (child), -ECHILD);
  assert_int_equal (fb_launcher_child_wait_ready (child), 0);
  int null = test_keep_fd (s, open ("/dev/null", O_RDWR | O_CLOEXEC));
  int stdio[3] = { null, null, null };
  assert_true (fb_launcher_child_send_command (child, spec_fd (s, argv, NULL, "/", FB_LAUNCH_UMASK_KEEP), stdio) < 0);

  test_plan (&plan, NULL);
  plan.late_command = true;
  child = test_spawn (s, &plan);
  assert_int_equal (fb_launcher_child_kill (child, SIGHUP), 0);
  assert_int_equal (fb_launcher_child_wait (child, &code), 0);
  assert_int_equal (code, 128 + SIGHUP);
}

/* pid 1 keeps none of the command's streams: the command's stdout ends for
 * its reader when the command closes it, while pid 1 and the command live
 * on. */
static void
test_pid1_keeps_no_stream (void **state)
{
  TestState *s = *state;
  const char *argv[] = { "/bin/sh", "-c", "echo bye; exec >&- 2>&-; sleep 60", NULL };
  FbLauncherChild *child = spawn_ready (s);
  int out = send_command (s, child, spec_fd (s, argv, NULL, "/", FB_LAUNCH_UMASK_KEEP));
  GString *got = g_string_new (NULL);
  char buf[64];
  ssize_t n;

  assert_int_equal (fb_launcher_child_wait_exec (child), 0);
  for (;;)
    {
      struct pollfd pfd = { .fd = out, .events = POLLIN };
      if (poll (&pfd, 1, 10000) != 1)
        {
          g_string_free (got, TRUE);
          fail_msg ("the command's stdout did not end: someone else holds it");
        }
      n = read (out, buf, sizeof buf);
      assert_true (n >= 0);
      if (n == 0)
        break;
      g_string_append_len (got, buf, n);
    }
  assert_string_equal (got->str, "bye\n");
  g_string_free (got, TRUE);
  int code;
  assert_int_equal (fb_launcher_child_try_wait (child, &code), -EAGAIN);
}

/* Each line of TEXT that ends is a CLOCK_MONOTONIC time in ns: the
 * greatest into *MAX; what follows the last newline stays in TEXT. */
static void
take_times (GString *text, gint64 *max)
{
  char *nl;

  while ((nl = memchr (text->str, '\n', text->len)) != NULL)
    {
      gint64 t = g_ascii_strtoll (text->str, NULL, 10);
      *max = MAX (*max, t);
      g_string_erase (text, 0, nl - text->str + 1);
    }
}

/* One sandbox of test_end_told_after_namespace_emptied. */
static void
end_told_after_namespace_emptied (TestState *s)
{
  const char *argv[] = { "/bin/sh", "-c",
                         "/usr/bin/python3 -c 'import os, time\n"
                         "while True: os.write(1, b\"%d\\n\" % time.monotonic_ns())' & sleep 0.15; exit 5",
                         NULL };
  FbLauncherChild *child = spawn_ready (s);
  int spec = spec_fd (s, argv, NULL, "/", FB_LAUNCH_UMASK_KEEP);
  int out = send_command (s, child, spec);
  g_autoptr (GString) text = g_string_new (NULL);
  gint64 before = 0, after = 0, ended_at;
  int code = -1, waited = -1;
  struct timespec now;
  char buf[65536];
  ssize_t n;

  assert_int_equal (fb_launcher_child_read_ended (child, &code), -EAGAIN);
  assert_int_equal (fb_launcher_child_get_status_fd (child), -1); /* not before the exec */
  assert_int_equal (fb_launcher_child_wait_exec (child), 0);
  assert_true (fb_launcher_child_get_status_fd (child) >= 0);
  /* the writer's output read as it comes, so that it never waits for us */
  while (fb_launcher_child_read_ended (child, &code) == -EAGAIN)
    {
      struct pollfd pfd[2] = { { fb_launcher_child_get_status_fd (child), POLLIN, 0 }, { out, POLLIN, 0 } };
      if (pfd[0].fd < 0 || poll (pfd, 2, 10000) < 1)
        fail_msg ("no ENDED from pid 1 (the channel %s)", pfd[0].fd < 0 ? "ended" : "stayed silent for 10 s");
      if (pfd[1].revents & POLLIN)
        {
          n = read (out, buf, sizeof buf);
          assert_true (n > 0);
          g_string_append_len (text, buf, n);
          take_times (text, &before);
        }
    }
  clock_gettime (CLOCK_MONOTONIC, &now);
  ended_at = (gint64)now.tv_sec * G_GINT64_CONSTANT (1000000000) + now.tv_nsec;
  assert_int_equal (code, 5);
  assert_true (before > 0); /* the writer ran */
  while ((n = read (out, buf, sizeof buf)) > 0)
    {
      g_string_append_len (text, buf, n);
      take_times (text, &after);
    }
  assert_int_equal (n, 0);
  if (after > ended_at)
    fail_msg ("the background writer wrote %" G_GINT64_FORMAT " ns after ENDED came", after - ended_at);
  assert_int_equal (fb_launcher_child_wait (child, &waited), 0);
  assert_int_equal (waited, 5);
  test_close_fd (s, out);
  test_close_fd (s, spec);
}

/* The command's end is told on the status channel (ENDED) before the
 * sandbox is torn down, and only once nothing it left runs: a background
 * process that writes the time to the command's stdout without pause
 * wrote nothing after we had ENDED, and its stdout ends for us then; the
 * status is the command's, and the outer child's too.  Told before the
 * namespace is emptied, the writer would go on for the moment pid 1 takes
 * to exit, which our wake-up is about as quick as: eight sandboxes, so that
 * such a pid 1 is caught in nearly every run. */
static void
test_end_told_after_namespace_emptied (void **state)
{
  for (int i = 0; i < 8; i++)
    end_told_after_namespace_emptied (*state);
}

/* A command ended by a signal is told as 128+N. */
static void
test_end_told_for_signal (void **state)
{
  TestState *s = *state;
  const char *argv[] = { "/bin/sh", "-c", "kill -TERM $$", NULL };
  FbLauncherChild *child = spawn_ready (s);
  int code = -1;

  send_command (s, child, spec_fd (s, argv, NULL, "/", FB_LAUNCH_UMASK_KEEP));
  assert_int_equal (fb_launcher_child_wait_exec (child), 0);
  while (fb_launcher_child_read_ended (child, &code) == -EAGAIN)
    {
      struct pollfd pfd = { .fd = fb_launcher_child_get_status_fd (child), .events = POLLIN };
      if (pfd.fd < 0 || poll (&pfd, 1, 10000) != 1)
        fail_msg ("no ENDED from pid 1");
    }
  assert_int_equal (code, 128 + SIGTERM);
}

/* What is not a sealed command is refused before pid 1 sees it; a second
 * command, and a command for a sandbox that has one, are refused. */
static void
test_refused (void **state)
{
  TestState *s = *state;
  const char *argv[] = { "/bin/sh", "-c", "exit 0", NULL };
  FbLaunchSpec late = { .uid = FB_LAUNCH_ID_CALLER, .gid = FB_LAUNCH_ID_CALLER, .umask = FB_LAUNCH_UMASK_KEEP };
  FbLauncherChild *child = spawn_ready (s);
  int null = test_keep_fd (s, open ("/dev/null", O_RDWR | O_CLOEXEC));
  int stdio[3] = { null, null, null };
  int unsealed = test_keep_fd (s, memfd_create ("unsealed", MFD_CLOEXEC));
  const char *why = NULL;
  int late_fd = -1, code = -1;

  assert_int_equal (fb_launcher_child_send_command (child, unsealed, stdio), -EPROTO);
  assert_int_equal (fb_launch_spec_seal (&late, true, &late_fd, &why), 0);
  test_keep_fd (s, late_fd);
  assert_int_equal (fb_launcher_child_send_command (child, late_fd, stdio), -EPROTO);
  /* still waiting: the good one runs */
  assert_int_equal (fb_launcher_child_send_command (child, spec_fd (s, argv, NULL, "/", 077), stdio), 0);
  assert_int_equal (fb_launcher_child_send_command (child, spec_fd (s, argv, NULL, "/", 077), stdio), -EINVAL);
  assert_int_equal (fb_launcher_child_wait_exec (child), 0);
  assert_int_equal (fb_launcher_child_wait (child, &code), 0);
  assert_int_equal (code, 0);
  /* a normal child is not late */
  {
    const char *true_argv[] = { "/bin/true", NULL };
    FbLauncherPlan plan;
    test_plan (&plan, true_argv);
    FbLauncherChild *normal = test_spawn (s, &plan);
    assert_int_equal (fb_launcher_child_wait_ready (normal), -EINVAL);
    assert_int_equal (fb_launcher_child_send_command (normal, unsealed, stdio), -EINVAL);
  }
}

TEST_DEFINE_MAIN (NULL, NULL, TEST_LAUNCHER_TEST (test_output_and_status), TEST_LAUNCHER_TEST (test_cwd_and_umask),
                  TEST_LAUNCHER_TEST (test_missing_cwd), TEST_LAUNCHER_TEST (test_path_search),
                  TEST_LAUNCHER_TEST (test_signal_before_command), TEST_LAUNCHER_TEST (test_pid1_keeps_no_stream),
                  TEST_LAUNCHER_TEST (test_end_told_after_namespace_emptied),
                  TEST_LAUNCHER_TEST (test_end_told_for_signal), TEST_LAUNCHER_TEST (test_refused))
