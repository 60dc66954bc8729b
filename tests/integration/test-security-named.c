/* Adversarial tests: what a person names to fusebox may be someone else's.
 *
 *  - A policy (policy check, run --policy) or a token file (serve
 *    --token-file, log --connect --token-file) from a cloned repository or a
 *    shared directory that is a FIFO, a symbolic link to /dev/zero or a
 *    file larger than the bound: each command refuses it at once, naming
 *    the path, what it is (or its size and the bound) and the fix; none
 *    blocks in open(2) on the FIFO or reads the device.
 * Each object is first proven to exist on the host as what it is.  Every
 * command is run under timeout(1) with a generous bound: a hang fails the
 * test, it is not a timing assertion.
 *
 * Needs root (as CI runs); no sandbox is made. */
#include <signal.h>

#include "tests/lib/test-run.h"

/* bound on each command: far above what one takes; only a hang reaches it */
#define CAP_S "60"
/* timeout -s KILL's status for a command still running at the bound */
#define HUNG 137
/* the policy bound (docs/fusebox-policy.5, LIMITS) and the token's */
#define POLICY_MAX 8388608
#define TOKEN_MAX 4096
#define AS_KIB "1048576"

/* `fusebox ARGS...` (NULL-terminated) under timeout(1), with 1 GiB of
 * address space (an unbounded read of /dev/zero ends there, not in the
 * host's memory). */
static void
fusebox (RFx *fx, TestCmd *ret, const char *const *args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_auto (GStrv) env = rfx_env (fx);

  g_ptr_array_add (argv, (char *)"/bin/sh");
  g_ptr_array_add (argv, (char *)"-c");
  g_ptr_array_add (argv, (char *)"ulimit -v " AS_KIB " && exec \"$@\"");
  g_ptr_array_add (argv, (char *)"sh");
  g_ptr_array_add (argv, (char *)"/usr/bin/timeout");
  g_ptr_array_add (argv, (char *)"-s");
  g_ptr_array_add (argv, (char *)"KILL");
  g_ptr_array_add (argv, (char *)CAP_S);
  g_ptr_array_add (argv, (char *)test_bin ());
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (char *)args[i]);
  g_ptr_array_add (argv, NULL);
  rfx_set_repro (fx, (char **)argv->pdata + 8);
  test_cmd_run (ret, fx->ws, env, NULL, (char **)argv->pdata);
}
#define FUSEBOX(fx, r, ...) fusebox (fx, r, (const char *const[]){ __VA_ARGS__, NULL })

/* R ended (not at the bound) with STATUS (1; `run`'s own failures are 125)
 * and says each of the NULL-terminated fragments on stderr. */
static void
assert_refused (const TestCmd *r, int status, ...)
{
  va_list ap;
  const char *want;

  if (r->status == HUNG)
    fail_msg ("%s: still blocked after %s s (in open(2) or read(2) of what it was named?)", r->command, CAP_S);
  if (r->status != status)
    fail_msg ("%s: exit %d, not %d; stderr:\n%s", r->command, r->status, status, r->err);
  va_start (ap, status);
  while ((want = va_arg (ap, const char *)) != NULL)
    if (strstr (r->err, want) == NULL)
      fail_msg ("%s: no '%s' in:\n%s", r->command, want, r->err);
  va_end (ap);
}

/* T/NAME: a FIFO, a link to /dev/zero, a sparse file of SIZE bytes (SIZE
 * > 0), each proven to be what it is. */
static char *
make_fifo (RFx *fx, const char *name)
{
  char *path = g_build_filename (fx->tmp, name, NULL);
  struct stat st;

  assert_int_equal (mkfifo (path, 0600), 0);
  assert_int_equal (lstat (path, &st), 0);
  assert_true (S_ISFIFO (st.st_mode));
  return path;
}

static char *
make_zero_link (RFx *fx, const char *name)
{
  char *path = g_build_filename (fx->tmp, name, NULL);
  struct stat st;
  char c = 1;
  int fd;

  assert_int_equal (symlink ("/dev/zero", path), 0);
  assert_int_equal (stat (path, &st), 0);
  assert_true (S_ISCHR (st.st_mode));
  /* readable, and endless: what an unbounded read would take in */
  fd = open (path, O_RDONLY | O_CLOEXEC);
  assert_true (fd >= 0);
  assert_int_equal (read (fd, &c, 1), 1);
  assert_int_equal (c, 0);
  close (fd);
  return path;
}

static char *
make_sparse (RFx *fx, const char *name, off_t size)
{
  char *path = g_build_filename (fx->tmp, name, NULL);
  int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

  assert_true (fd >= 0);
  assert_int_equal (ftruncate (fd, size), 0);
  close (fd);
  test_assert_host_readable (path);
  return path;
}

/* A policy that is a FIFO, a link to /dev/zero, or 9 MiB: `policy check`
 * and `run --policy` refuse it at once and say why; a good policy passes
 * the same `policy check` first (the command reads what it is named). */
static void
test_policy_not_a_file (void **state)
{
  RFX_BEGIN (state);
  g_autofree char *good = rfx_policy_ws (fx);
  g_autofree char *fifo = make_fifo (fx, "fifo.json");
  g_autofree char *zero = make_zero_link (fx, "zero.json");
  g_autofree char *big = make_sparse (fx, "big.json", 9 * 1024 * 1024);
  g_autofree char *big_says = g_strdup_printf ("%s is too large: %d bytes", big, 9 * 1024 * 1024);
  TestCmd r = { 0 };

  FUSEBOX (fx, &r, "policy", "check", good);
  if (r.status != 0)
    fail_msg ("%s: exit %d; stderr:\n%s", r.command, r.status, r.err);
  test_cmd_clear (&r);

  FUSEBOX (fx, &r, "policy", "check", fifo);
  assert_refused (&r, 1, fifo, "is a FIFO, not a regular file", "name that", NULL);
  test_cmd_clear (&r);
  FUSEBOX (fx, &r, "run", "--policy", fifo, "--", "true");
  assert_refused (&r, 125, fifo, "is a FIFO, not a regular file", NULL);
  test_cmd_clear (&r);

  FUSEBOX (fx, &r, "policy", "check", zero);
  assert_refused (&r, 1, zero, "is a character device (through a symbolic link to /dev/zero), not a regular file",
                  NULL);
  test_cmd_clear (&r);
  FUSEBOX (fx, &r, "run", "--policy", zero, "--", "true");
  assert_refused (&r, 125, zero, "is a character device", NULL);
  test_cmd_clear (&r);

  FUSEBOX (fx, &r, "policy", "check", big);
  assert_refused (&r, 1, big_says, G_STRINGIFY (POLICY_MAX), NULL);
  test_cmd_clear (&r);
  RFX_PASS ();
}

/* A token file that is a FIFO, a link to /dev/zero or larger than a token:
 * `serve --token-file` and `log --connect --token-file` refuse it at once
 * and say why (neither listens or connects first). */
static void
test_token_file_not_a_file (void **state)
{
  RFX_BEGIN (state);
  g_autofree char *fifo = make_fifo (fx, "token-fifo");
  g_autofree char *zero = make_zero_link (fx, "token-zero");
  g_autofree char *big = make_sparse (fx, "token-big", 2 * TOKEN_MAX);
  const char *const files[] = { fifo, zero, big };
  const char *const says[] = { "is a FIFO, not a regular file",
                               "is a character device (through a symbolic link to /dev/zero)",
                               "is too large: " G_STRINGIFY (8192) " bytes" };
  TestCmd r = { 0 };

  for (guint i = 0; i < G_N_ELEMENTS (files); i++)
    {
      FUSEBOX (fx, &r, "serve", "--listen", "ws://127.0.0.1:0", "--token-file", files[i]);
      assert_refused (&r, 1, "serve: --token-file: the token file", files[i], says[i], NULL);
      test_cmd_clear (&r);
      FUSEBOX (fx, &r, "log", "--follow", "--connect", "ws://127.0.0.1:1", "--token-file", files[i]);
      assert_refused (&r, 1, "log: --token-file: the token file", files[i], says[i], NULL);
      test_cmd_clear (&r);
    }
  RFX_PASS ();
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    RFX_TEST (test_policy_not_a_file),
    RFX_TEST (test_token_file_not_a_file),
  };

  (void)argc;
  test_filter_tests (argv[0]);
  if (!g_file_test (test_bin (), G_FILE_TEST_IS_EXECUTABLE))
    test_skip_or_fail ("FUSEBOX_BIN is not an executable: run with 'meson test'");
  if (geteuid () != 0)
    test_skip_or_fail ("these tests need root");
  if (!g_file_test ("/usr/bin/timeout", G_FILE_TEST_IS_EXECUTABLE))
    test_skip_or_fail ("/usr/bin/timeout (coreutils) is missing");
  return cmocka_run_group_tests (tests, NULL, NULL);
}
