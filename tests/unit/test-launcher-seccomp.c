/* fusebox — escapes from inside: every entry of the seccomp filter denied
 * with its errno, TIOCSTI/TIOCLINUX with high bits set, socket families,
 * foreign ABIs killed; and the same prober outside a sandbox, as an
 * unprivileged user, to show that the probes tell the difference. */
#include "test-launcher-util.h"

#include <grp.h>

#include "fixtures/fb-escape-expected.h"

/* Probes whose answer without the filter (as an unprivileged host user)
 * differs from the sandbox's on any kernel: proof that the table can fail. */
static const char *const discriminating[] = {
  "clone_newuser",
  "unshare",
  "clone3",
  "open_tree",
  "add_key",
  "keyctl",
  "ptrace",
  "process_vm_readv",
  "kcmp",
  "personality_linux32",
  "socket_netlink_audit",
  "socketpair_packet",
  "io_uring_enter",
  "move_mount",
};

static void
test_escapes_denied (void **state)
{
  TestState *s = *state;
  g_autofree char *escape = test_fixture ("fb-escape");
  const char *argv[] = { escape, NULL };
  FbLauncherPlan plan;
  test_plan (&plan, argv);
  plan.uid = 1000;
  plan.gid = 1000;
  TestRun run;

  test_run (s, &plan, &run);
  assert_false (run.failed);
  assert_int_equal (run.exit_code, 0);
  g_autoptr (JsonObject) o = test_parse_object (run.out);

  guint wrong = 0;
  for (size_t i = 0; i < G_N_ELEMENTS (expected); i++)
    {
      const char *got = json_object_has_member (o, expected[i].probe)
                          ? json_object_get_string_member (o, expected[i].probe)
                          : "(missing)";
      if (strcmp (got, expected[i].inside) != 0)
        {
          fprintf (stderr, "probe %s: expected %s, got %s\n", expected[i].probe, expected[i].inside, got);
          wrong++;
        }
    }
  /* every probe of the fixture is in the table */
  assert_int_equal (json_object_get_size (o), G_N_ELEMENTS (expected));
  assert_int_equal (wrong, 0);
  test_run_clear (&run);
}

/* The same prober on the host, as nobody with no capabilities (it refuses
 * to run with any). */
static void
test_probes_discriminate (void **state)
{
  TestState *s = *state;
  if (geteuid () != 0)
    skip (); /* becoming nobody needs root */
  g_autofree char *escape = test_fixture ("fb-escape");
  int p[2];
  assert_int_equal (pipe2 (p, O_CLOEXEC), 0);
  test_keep_fd (s, p[0]);
  test_keep_fd (s, p[1]);
  pid_t pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0)
    {
      dup2 (p[1], 1);
      if (setgroups (0, NULL) < 0 || setresgid (65534, 65534, 65534) < 0 || setresuid (65534, 65534, 65534) < 0)
        _exit (120);
      execl (escape, escape, (char *)NULL);
      _exit (121);
    }
  test_keep_pid (s, pid);
  test_close_fd (s, p[1]);
  g_autofree char *out = test_read_all (p[0]);
  int status;
  assert_int_equal (waitpid (pid, &status, 0), pid);
  s->pids[0] = 0;
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 0);
  g_autoptr (JsonObject) o = test_parse_object (out);

  for (size_t i = 0; i < G_N_ELEMENTS (discriminating); i++)
    for (size_t j = 0; j < G_N_ELEMENTS (expected); j++)
      if (strcmp (expected[j].probe, discriminating[i]) == 0)
        {
          const char *got = json_object_get_string_member (o, discriminating[i]);
          if (strcmp (got, expected[j].inside) == 0)
            fail_msg ("probe %s gives %s outside the sandbox too: it proves nothing", discriminating[i], got);
        }
}

/* The filter program builds and is a sane size (one of its rules, the
 * personality one, expands to 33 comparisons). */
static void
test_filter_builds (void **state)
{
  g_autoptr (FbLauncherSeccomp) seccomp = NULL;
  assert_int_equal (fb_launcher_seccomp_new (&seccomp), 0);
  assert_non_null (seccomp);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_escapes_denied, test_setup, test_teardown),
    cmocka_unit_test_setup_teardown (test_probes_discriminate, test_setup, test_teardown),
    cmocka_unit_test (test_filter_builds),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
