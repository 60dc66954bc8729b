/* Unit tests: the quick client's two pieces of the session protocol that
 * it writes without GLib (launcher/launcher-session-wire.h,
 * launcher/launcher-quick-spec.c): which command lines it takes, and the
 * command's memfd, which the daemon reads with the helper's own decoder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipc/ipc-process-launch.h"
#include "launcher/launcher-quick-spec.h"
#include "launcher/launcher-session-wire.h"
#include "tests/lib/test-util.h"

static int
shape (const char *const *argv)
{
  int argc = 0;

  while (argv[argc] != NULL)
    argc++;
  return fb_session_quick_shape (argc, (char **)argv);
}

static void
test_shape_taken (void **state)
{
  const char *dashes[] = { "run", "--session", "s-1.x_y", "--", "true", NULL };
  const char *bare[] = { "run", "--session", "a", "git", "status", NULL };
  const char *dash_command[] = { "run", "--session", "a", "--", "-x", NULL };
  const char *double_dash_arg[] = { "run", "--session", "a", "--", "echo", "--", "--policy", NULL };

  (void)state;
  assert_int_equal (shape (dashes), 4);
  assert_int_equal (shape (bare), 3);
  assert_int_equal (shape (dash_command), 4);
  assert_int_equal (shape (double_dash_arg), 4);
}

static void
test_shape_refused (void **state)
{
  char long_name[SESSION_NAME_MAX + 2];
  const char *no_command[] = { "run", "--session", "a", "--", NULL };
  const char *no_name[] = { "run", "--session", NULL };
  const char *option[] = { "run", "--session", "a", "--policy", "builtin:host", "--", "true", NULL };
  const char *option_first[] = { "run", "--workspace", "/w", "--session", "a", "--", "true", NULL };
  const char *dot[] = { "run", "--session", ".a", "true", NULL };
  const char *slash[] = { "run", "--session", "a/b", "true", NULL };
  const char *empty[] = { "run", "--session", "", "true", NULL };
  const char *other[] = { "mount", "--session", "a", "true", NULL };
  const char *too_long[] = { "run", "--session", long_name, "true", NULL };

  (void)state;
  memset (long_name, 'n', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  assert_int_equal (shape (no_command), 0);
  assert_int_equal (shape (no_name), 0);
  assert_int_equal (shape (option), 0);
  assert_int_equal (shape (option_first), 0);
  assert_int_equal (shape (dot), 0);
  assert_int_equal (shape (slash), 0);
  assert_int_equal (shape (empty), 0);
  assert_int_equal (shape (other), 0);
  assert_int_equal (shape (too_long), 0);
  long_name[SESSION_NAME_MAX] = '\0';
  assert_true (fb_session_name_valid (long_name));
}

/* What the quick client writes, the daemon reads: argv, the environment,
 * the working directory and the umask, sealed, with the caller's ids. */
static void
test_memfd_decoded (void **state)
{
  const char *const argv[] = { "sh", "-c", "echo \"$0\"", "", NULL };
  const char *const envp[] = { "A=b=c", "EMPTY=", "LD_PRELOAD=/x.so", NULL };
  g_auto (FbLaunchSpec) spec = { 0 };
  char cwd[PATH_MAX];
  const char *why = NULL;
  mode_t old = umask (027);
  int fd = fb_quick_command_memfd (argv, envp);

  (void)state;
  umask (old);
  assert_true (fd >= 0);
  assert_int_equal (fcntl (fd, F_GET_SEALS) & (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL),
                    F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
  assert_int_equal (fb_launch_spec_decode (fd, false, &spec, &why), 0);
  assert_non_null (getcwd (cwd, sizeof cwd));
  assert_int_equal (g_strv_length (spec.argv), 4);
  for (int i = 0; i < 4; i++)
    assert_string_equal (spec.argv[i], argv[i]);
  assert_int_equal (g_strv_length (spec.envp), 3);
  for (int i = 0; i < 3; i++)
    assert_string_equal (spec.envp[i], envp[i]);
  assert_string_equal (spec.cwd, cwd);
  assert_int_equal (spec.umask, 027);
  assert_int_equal (spec.uid, FB_LAUNCH_ID_CALLER);
  assert_int_equal (spec.gid, FB_LAUNCH_ID_CALLER);
  close (fd);
}

/* Past execve's bounds: nothing, and the full client says why. */
static void
test_memfd_bounds (void **state)
{
  gsize n = FB_LAUNCH_SPEC_MAX + 1;
  g_autofree char *big = g_malloc (n + 1);
  const char *const argv[] = { "true", NULL };
  const char *const envp[] = { big, NULL };
  const char *const empty[] = { NULL };

  (void)state;
  memset (big, 'x', n);
  big[0] = 'B';
  big[1] = '=';
  big[n] = '\0';
  assert_int_equal (fb_quick_command_memfd (argv, envp), -1);
  /* a command the helper refuses (no argv) is the daemon's to refuse */
  int fd = fb_quick_command_memfd (empty, empty);
  g_auto (FbLaunchSpec) spec = { 0 };
  const char *why = NULL;
  assert_true (fd >= 0);
  assert_true (fb_launch_spec_decode (fd, false, &spec, &why) < 0);
  close (fd);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_shape_taken),
    cmocka_unit_test (test_shape_refused),
    cmocka_unit_test (test_memfd_decoded),
    cmocka_unit_test (test_memfd_bounds),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
