/* fusebox — helpers shared by the launcher's unit tests.
 *
 * The tests launch real sandboxes whose root is a read-only bind of the
 * host's "/" (a stand-in for the FUSE view), so the fixtures built by meson
 * are reachable inside at their build paths.  Everything a test starts is
 * registered in a TestState and killed and reaped in teardown, because a
 * failed cmocka assertion longjmps past any cleanup attribute.
 */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "launcher/launcher.h"
#include "tests/lib/test-util.h"

#define TEST_MAX 16

typedef struct
{
  FbLauncherChild *children[TEST_MAX];
  pid_t pids[TEST_MAX]; /* host processes the test forked */
  int fds[TEST_MAX];
  char *tmpdir;
} TestState;

static G_GNUC_UNUSED int
test_setup (void **state)
{
  TestState *s = g_new0 (TestState, 1);
  for (int i = 0; i < TEST_MAX; i++)
    s->fds[i] = -1;
  s->tmpdir = test_tmpdir ("fb-launcher-test");
  /* A root caller's sandbox is nobody on the host (docs/security.md,
   * "Identity"): the host-directory root shows it what "others" may see. */
  assert_int_equal (chmod (s->tmpdir, 0755), 0);
  *state = s;
  return 0;
}

static G_GNUC_UNUSED int
test_teardown (void **state)
{
  TestState *s = *state;
  for (int i = 0; i < TEST_MAX; i++)
    {
      fb_launcher_child_free (s->children[i]); /* SIGKILL + reap when still running */
      if (s->pids[i] > 0)
        {
          kill (s->pids[i], SIGKILL);
          waitpid (s->pids[i], NULL, 0);
        }
      if (s->fds[i] >= 0)
        close (s->fds[i]);
    }
  test_rm_rf (s->tmpdir);
  g_free (s->tmpdir);
  g_free (s);
  return 0;
}

static G_GNUC_UNUSED int
test_keep_fd (TestState *s, int fd)
{
  for (int i = 0; i < TEST_MAX; i++)
    if (s->fds[i] < 0)
      {
        s->fds[i] = fd;
        return fd;
      }
  fail_msg ("too many fds in one test");
  return -1;
}

/* A CLOEXEC pipe into P, both ends closed in teardown. */
static G_GNUC_UNUSED void
test_keep_pipe (TestState *s, int p[2])
{
  assert_int_equal (pipe2 (p, O_CLOEXEC), 0);
  test_keep_fd (s, p[0]);
  test_keep_fd (s, p[1]);
}

static G_GNUC_UNUSED void
test_close_fd (TestState *s, int fd)
{
  for (int i = 0; i < TEST_MAX; i++)
    if (s->fds[i] == fd)
      s->fds[i] = -1;
  close (fd);
}

static G_GNUC_UNUSED void
test_keep_pid (TestState *s, pid_t pid)
{
  for (int i = 0; i < TEST_MAX; i++)
    if (s->pids[i] <= 0)
      {
        s->pids[i] = pid;
        return;
      }
  fail_msg ("too many processes in one test");
}

/* TMPDIR/NAME holding CONTENT, with MODE whatever the umask (caller
 * frees). */
static G_GNUC_UNUSED char *
test_tmp_file (TestState *s, const char *name, const char *content, mode_t mode)
{
  char *path = g_build_filename (s->tmpdir, name, NULL);

  assert_true (g_file_set_contents (path, content, -1, NULL));
  assert_int_equal (chmod (path, mode), 0);
  return path;
}

/* A plan with the host's "/" as a read-only root. */
static G_GNUC_UNUSED void
test_plan (FbLauncherPlan *plan, const char *const *argv)
{
  fb_launcher_plan_init (plan);
  plan->root_kind = FB_LAUNCHER_ROOT_HOST_DIR;
  plan->root_dir = "/";
  plan->argv = argv;
}

/* fb_launcher_spawn() failed with R: when `fusebox check`'s probes say the
 * host lacks what a sandbox needs, say what and skip (fail under
 * FUSEBOX_TESTS_MUST_RUN=1: fusebox needs it); when the host has it all,
 * the failure is fusebox's own. */
static G_GNUC_UNUSED void
test_spawn_failed (int r)
{
  FbLauncherCheckOptions options = { .quiet_ok = true };
  char *out = NULL;
  size_t size = 0;
  FILE *f = open_memstream (&out, &size);
  assert_non_null (f);
  int failures = fb_launcher_check_run (&options, f);
  fclose (f);
  if (failures == 0)
    fail_msg ("fb_launcher_spawn: %s, although this host has what a sandbox needs", g_strerror (-r));
  test_skip_test (true, "this host can't make sandboxes (%s):\n%s", g_strerror (-r), out);
}

/* Spawn; register the child for teardown.  Returns the child. */
static G_GNUC_UNUSED FbLauncherChild *
test_spawn (TestState *s, const FbLauncherPlan *plan)
{
  FbLauncherChild *child = NULL;
  int r = fb_launcher_spawn (plan, &child);
  if (r < 0)
    test_spawn_failed (r);
  for (int i = 0; i < TEST_MAX; i++)
    if (!s->children[i])
      {
        s->children[i] = child;
        return child;
      }
  fail_msg ("too many sandboxes in one test");
  return NULL;
}

/* A test case run with a TestState (test_setup, test_teardown). */
#define TEST_LAUNCHER_TEST(f) cmocka_unit_test_setup_teardown (f, test_setup, test_teardown)

/* This test mounts FUSE inside the sandbox: skip it (fail under
 * FUSEBOX_TESTS_MUST_RUN=1, fusebox needs it) when /dev/fuse is missing or
 * not usable here. */
static G_GNUC_UNUSED void
test_require_fuse (void)
{
  const char *lacks = test_host_lacks ("fuse");

  if (lacks != NULL)
    test_skip_test (true, "%s", lacks);
}

/* Spawn ARGV (test_plan's sandbox) with its stdout on a pipe and wait for
 * the line "ready" that ARGV prints once it is set up.  The pipe's read
 * end (registered for teardown) in *RET_OUT. */
static G_GNUC_UNUSED FbLauncherChild *
test_spawn_ready (TestState *s, const char *const *argv, int *ret_out)
{
  FbLauncherPlan plan;
  int p[2];

  test_plan (&plan, argv);
  test_keep_pipe (s, p);
  plan.stdout_fd = p[1];
  FbLauncherChild *child = test_spawn (s, &plan);
  test_close_fd (s, p[1]);
  g_autofree char *ready = test_read_line (p[0], -1);
  assert_non_null (ready);
  assert_string_equal (ready, "ready");
  *ret_out = p[0];
  return child;
}

typedef struct
{
  int exit_code;
  char *out;     /* the command's stdout */
  char *message; /* the failure message, or NULL */
  FbLauncherFailure failure;
  bool failed;
} TestRun;

static G_GNUC_UNUSED void
test_run_clear (TestRun *run)
{
  g_free (run->out);
  g_free (run->message);
  memset (run, 0, sizeof *run);
}

/* Run PLAN to completion with stdout captured. */
static G_GNUC_UNUSED void
test_run (TestState *s, FbLauncherPlan *plan, TestRun *ret)
{
  int p[2];
  test_keep_pipe (s, p);
  plan->stdout_fd = p[1];
  FbLauncherChild *child = test_spawn (s, plan);
  test_close_fd (s, p[1]);

  memset (ret, 0, sizeof *ret);
  int r = fb_launcher_child_wait_exec (child);
  if (r < 0)
    {
      ret->failed = true;
      ret->failure = *fb_launcher_child_get_failure (child);
      ret->message = fb_launcher_child_describe_failure (child);
    }
  ret->out = test_read_all (p[0]);
  test_close_fd (s, p[0]);
  assert_int_equal (fb_launcher_child_wait (child, &ret->exit_code), 0);
}

/* ARGV in test_plan's sandbox, which must start and exit 0; what it
 * printed (caller frees). */
static G_GNUC_UNUSED char *
test_run_ok (TestState *s, const char *const *argv)
{
  FbLauncherPlan plan;
  TestRun run;
  char *out;

  test_plan (&plan, argv);
  test_run (s, &plan, &run);
  if (run.failed || run.exit_code != 0)
    fail_msg ("%s: exit %d: %s%s", argv[0], run.exit_code, run.message != NULL ? run.message : "", run.out);
  out = g_steal_pointer (&run.out);
  test_run_clear (&run);
  return out;
}

/* Fixture NAME in a sandbox (the host's / read-only) as UID:GID, which
 * must start and exit 0; what it prints, as a JSON object. */
static G_GNUC_UNUSED JsonObject *
test_run_fixture_json (TestState *s, const char *name, uid_t uid, gid_t gid)
{
  g_autofree char *path = test_fixture (name);
  const char *argv[] = { path, NULL };
  FbLauncherPlan plan;
  TestRun run;
  JsonObject *o;

  test_plan (&plan, argv);
  plan.uid = uid;
  plan.gid = gid;
  test_run (s, &plan, &run);
  assert_false (run.failed);
  assert_int_equal (run.exit_code, 0);
  o = test_parse_object (run.out);
  test_run_clear (&run);
  return o;
}
