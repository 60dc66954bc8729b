/* fusebox — `fusebox check`: every probe passes on a host where sandboxes
 * work, a missing or wrong /dev/fuse and zeroed sysctls are named with their
 * fix, and the command's exit status follows. */
#include "test-launcher-util.h"

static char *
run_check (const FbLauncherCheckOptions *options, int *ret_failures)
{
  char *buf = NULL;
  size_t size = 0;
  FILE *out = open_memstream (&buf, &size);
  assert_non_null (out);
  *ret_failures = fb_launcher_check_run (options, out);
  fclose (out);
  return buf;
}

static void
test_all_ok_here (void **state)
{
  test_require_fuse ();
  int failures;
  g_autofree char *out = run_check (NULL, &failures);
  if (failures != 0)
    fail_msg ("%d probes failed:\n%s", failures, out);
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  guint n = 0;
  for (char **l = lines; *l && **l; l++, n++)
    if (!g_str_has_prefix (*l, "OK    "))
      fail_msg ("not OK: %s", *l);
  /* max_user_namespaces, userns, maps, mounts, /dev/fuse, FUSE mount, procfs,
   * seccomp, whole sandbox (+ the AppArmor sysctl where it exists) */
  assert_true (n >= 9);
  test_assert_contains (out, "OK    FUSE mount in a user namespace\n", "OK    fresh procfs\n",
                        "OK    the network proxy's socket in the sandbox\n", NULL);
}

/* The checks, quiet, with PATH for /dev/fuse: its two probes fail; what
 * they print. */
static char *
check_fuse_at (const char *path)
{
  FbLauncherCheckOptions options = { .fuse_path = path, .quiet_ok = true };
  int failures;
  char *out = run_check (&options, &failures);

  if (failures != 2)
    fail_msg ("%d probes failed, expected 2:\n%s", failures, out);
  return out;
}

static void
test_missing_fuse (void **state)
{
  TestState *s = *state;
  g_autofree char *path = g_build_filename (s->tmpdir, "no-fuse", NULL);
  g_autofree char *out = check_fuse_at (path);
  g_autofree char *line = g_strdup_printf ("FAIL  %s: missing; fix: sudo modprobe fuse", path);
  if (!strstr (out, line))
    fail_msg ("no \"%s\" in:\n%s", line, out);
  assert_non_null (strstr (out, "FAIL  FUSE mount in a user namespace: not tried"));
  /* quiet: no OK lines */
  assert_null (strstr (out, "OK "));
}

static void
test_not_a_fuse_device (void **state)
{
  TestState *s = *state;
  g_autofree char *path = g_build_filename (s->tmpdir, "fake-fuse", NULL);
  assert_true (g_file_set_contents (path, "", 0, NULL));
  g_autofree char *out = check_fuse_at (path);
  assert_non_null (strstr (out, "not the FUSE device (char 10:229)"));
}

/* Sysctls are read through a seam: a zero max_user_namespaces is a failure
 * with its sysctl fix even though the kernel itself allows namespaces. */
static void
test_sysctls_explained (void **state)
{
  TestState *s = *state;
  g_autofree char *user = g_build_filename (s->tmpdir, "user", NULL);
  g_autofree char *kernel = g_build_filename (s->tmpdir, "kernel", NULL);
  assert_int_equal (g_mkdir (user, 0700), 0);
  assert_int_equal (g_mkdir (kernel, 0700), 0);
  g_autofree char *max = g_build_filename (user, "max_user_namespaces", NULL);
  g_autofree char *aa = g_build_filename (kernel, "apparmor_restrict_unprivileged_userns", NULL);
  assert_true (g_file_set_contents (max, "0\n", -1, NULL));
  assert_true (g_file_set_contents (aa, "1\n", -1, NULL));
  FbLauncherCheckOptions options = { .sysctl_root = s->tmpdir };
  int failures;
  g_autofree char *out = run_check (&options, &failures);
  assert_true (failures >= 1);
  test_assert_contains (out, "FAIL  user.max_user_namespaces: is 0", "sysctl user.max_user_namespaces=15000", NULL);
  /* the AppArmor sysctl gets its own line; root is not restricted by it */
  assert_non_null (strstr (out, "kernel.apparmor_restrict_unprivileged_userns"));
  if (geteuid () == 0)
    assert_non_null (strstr (out, "OK    kernel.apparmor_restrict_unprivileged_userns: 1\n"));
}

static int
run_cli (const char *const *args, char **ret_out)
{
  const char *bin = test_meson_bin ();
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_ptr_array_add (argv, (char *)bin);
  for (; *args; args++)
    g_ptr_array_add (argv, (char *)*args);
  g_ptr_array_add (argv, NULL);
  int status;
  g_autoptr (GError) error = NULL;
  if (!g_spawn_sync (NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, ret_out, NULL, &status, &error))
    fail_msg ("%s: %s", bin, error->message);
  assert_true (WIFEXITED (status));
  return WEXITSTATUS (status);
}

static void
test_cli (void **state)
{
  g_autofree char *out = NULL;
  const char *bad[] = { "check", "extra", NULL };
  assert_int_equal (run_cli (bad, &out), 2);
  g_clear_pointer (&out, g_free);

  const char *missing[] = { "check", "--fuse-device", "/nonexistent-fb/fuse", NULL };
  assert_int_equal (run_cli (missing, &out), 1);
  test_assert_contains (out, "FAIL  /nonexistent-fb/fuse: missing", "2 prerequisites are missing", NULL);
  g_clear_pointer (&out, g_free);

  test_require_fuse (); /* what follows needs a sandbox */
  const char *ok[] = { "check", NULL };
  assert_int_equal (run_cli (ok, &out), 0);
  assert_true (g_str_has_suffix (out, "'fusebox run' can work here.\n"));
  g_clear_pointer (&out, g_free);

  /* nested: inside an unprivileged-style user+pid namespace with its own
   * /proc.  Run by root, its uid 0 is the host's root and nothing else is
   * mapped there: a sandbox can't be anyone else, so check refuses and
   * says why (tests/integration/test-run-nested.c runs the unprivileged
   * case) */
  g_autofree char *unshare = g_find_program_in_path ("unshare");
  if (!unshare || geteuid () != 0)
    return;
  const char *nested[] = { unshare, "-Urmpf", "--mount-proc", g_getenv ("FUSEBOX_BIN"), "check", NULL };
  int status;
  g_autoptr (GError) error = NULL;
  g_clear_pointer (&out, g_free);
  assert_true (g_spawn_sync (NULL, (char **)nested, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL, &status, &error));
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 1 ||
      !strstr (out, "FAIL  sandbox identity: you are the host's root, whose sandboxes run as the overflow ids"))
    fail_msg ("nested check as root did not refuse the identity:\n%s", out);
}

TEST_DEFINE_MAIN (NULL, NULL, TEST_LAUNCHER_TEST (test_all_ok_here), TEST_LAUNCHER_TEST (test_missing_fuse),
                  TEST_LAUNCHER_TEST (test_not_a_fuse_device), TEST_LAUNCHER_TEST (test_sysctls_explained),
                  TEST_LAUNCHER_TEST (test_cli))
