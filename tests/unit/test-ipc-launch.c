/* Unit tests: the command process/start hands to the launch helper
 * (ipc/ipc-process-launch.c).  The helper trusts nothing in it: every
 * malformed or unsealed memfd is refused, and both sides enforce execve's
 * bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/ipc-process-launch.h"
#include "policy/util.h"
#include "tests/lib/test-util.h"

/* fb_launch_spec_check of a command with the helper's ids and umask. */
static int
check (guint32 network, const char *const *argv, const char *const *envp, const char *cwd, const char **ret_why)
{
  FbLaunchSpec spec = fb_launch_spec_command (network, argv, envp, cwd);

  return fb_launch_spec_check (&spec, false, ret_why);
}

static void
test_roundtrip (void **state)
{
  const char *argv[] = { "--network", "host", "--cwd", "/", NULL };
  const char *envp[] = { "LD_PRELOAD=/ws/x.so", "EMPTY=", "A=b=c", NULL };
  g_auto (FbLaunchSpec) spec = { 0 };
  const char *why = NULL;
  int fd = -1;

  assert_int_equal (fb_launch_spec_encode (1, argv, envp, "/ws/--cwd", &fd, &why), 0);
  assert_true (fcntl (fd, F_GETFD) & FD_CLOEXEC);
  /* sealed: the server can't change what the helper checked */
  assert_int_equal (write (fd, "x", 1), -1);
  assert_int_equal (fb_launch_spec_decode (fd, false, &spec, &why), 0);
  assert_int_equal (spec.network, 1);
  assert_int_equal (g_strv_length (spec.argv), 4);
  assert_string_equal (spec.argv[0], "--network");
  assert_string_equal (spec.argv[3], "/");
  assert_int_equal (g_strv_length (spec.envp), 3);
  assert_string_equal (spec.envp[0], "LD_PRELOAD=/ws/x.so");
  assert_string_equal (spec.envp[1], "EMPTY=");
  assert_string_equal (spec.envp[2], "A=b=c");
  assert_string_equal (spec.cwd, "/ws/--cwd");
  close (fd);
}

static void
test_empty_env (void **state)
{
  const char *argv[] = { "/bin/true", NULL };
  const char *envp[] = { NULL };
  g_auto (FbLaunchSpec) spec = { 0 };
  const char *why = NULL;
  int fd = -1;

  assert_int_equal (fb_launch_spec_encode (0, argv, envp, "/", &fd, &why), 0);
  assert_int_equal (fb_launch_spec_decode (fd, false, &spec, &why), 0);
  assert_non_null (spec.envp);
  assert_null (spec.envp[0]);
  close (fd);
}

static void
test_bounds (void **state)
{
  g_autofree char *big = g_malloc (FB_LAUNCH_STRING_MAX + 1);
  const char *argv_ok[] = { "/bin/true", NULL };
  const char *argv_big[] = { "/bin/true", big, NULL };
  const char *argv_empty0[] = { "", NULL };
  const char *argv_none[] = { NULL };
  const char *env_noeq[] = { "NOEQUALS", NULL };
  const char *env_noname[] = { "=value", NULL };
  g_autoptr (GPtrArray) many = g_ptr_array_new_with_free_func (g_free);
  const char *why = NULL;
  int fd = -1;

  memset (big, 'a', FB_LAUNCH_STRING_MAX);
  big[FB_LAUNCH_STRING_MAX] = '\0';
  assert_int_equal (check (0, argv_big, NULL, "/", &why), -E2BIG);
  assert_non_null (why);
  assert_int_equal (check (0, argv_empty0, NULL, "/", &why), -EINVAL);
  assert_int_equal (check (0, argv_none, NULL, "/", &why), -EINVAL);
  assert_int_equal (check (0, argv_ok, env_noeq, "/", &why), -EINVAL);
  assert_int_equal (check (0, argv_ok, env_noname, "/", &why), -EINVAL);
  assert_int_equal (check (0, argv_ok, NULL, "relative", &why), -EINVAL);
  /* 0 none, 1 host, 2 an allowlist (the proxy's socket), nothing else */
  assert_int_equal (check (2, argv_ok, NULL, "/", &why), 0);
  assert_int_equal (check (3, argv_ok, NULL, "/", &why), -EINVAL);
  /* 2 MiB in total: 20 strings of 127 KiB */
  big[FB_LAUNCH_STRING_MAX - 1024] = '\0';
  g_ptr_array_add (many, g_strdup ("/bin/true"));
  for (int i = 0; i < 20; i++)
    g_ptr_array_add (many, g_strdup (big));
  g_ptr_array_add (many, NULL);
  assert_int_equal (check (0, (const char *const *)many->pdata, NULL, "/", &why), -E2BIG);
  assert_int_equal (fb_launch_spec_encode (0, (const char *const *)many->pdata, NULL, "/", &fd, &why), -E2BIG);
  assert_int_equal (fd, -1);
}

/* A memfd holding DATA (LEN bytes), sealed or not. */
static int
memfd_with (const void *data, gsize len, bool seal)
{
  int fd = memfd_create ("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);

  assert_true (fd >= 0);
  assert_int_equal (write (fd, data, len), (ssize_t)len);
  if (seal)
    assert_int_equal (fcntl (fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE), 0);
  return fd;
}

static int
decode_bytes (const void *data, gsize len, bool seal)
{
  g_auto (FbLaunchSpec) spec = { 0 };
  const char *why = NULL;
  int fd = memfd_with (data, len, seal);
  int r = fb_launch_spec_decode (fd, false, &spec, &why);

  close (fd);
  if (r < 0)
    assert_non_null (why);
  return r;
}

static void
test_malformed (void **state)
{
  char buf[256];
  FbLaunchSpecHeader h = { FB_LAUNCH_SPEC_MAGIC, 0, 1, 1, 0 };
  const char strings[] = "/bin/true\0A=b\0/";
  gsize n;
  int pipefd[2];
  g_auto (FbLaunchSpec) spec = { 0 };
  const char *why = NULL;

  /* well-formed, then broken one way at a time */
  h.strings_size = sizeof strings;
  memcpy (buf, &h, sizeof h);
  memcpy (buf + sizeof h, strings, sizeof strings);
  n = sizeof h + sizeof strings;
  assert_int_equal (decode_bytes (buf, n, true), 0);
  /* not sealed */
  assert_int_equal (decode_bytes (buf, n, false), -EPROTO);
  /* shorter than its header says; longer */
  assert_int_equal (decode_bytes (buf, n - 1, true), -EPROTO);
  buf[n] = 'x';
  assert_int_equal (decode_bytes (buf, n + 1, true), -EPROTO);
  /* shorter than a header */
  assert_int_equal (decode_bytes (buf, sizeof h - 1, true), -EPROTO);
  /* a string without its NUL: the cwd runs to the end */
  {
    FbLaunchSpecHeader h2 = h;
    h2.strings_size = sizeof strings - 1;
    memcpy (buf, &h2, sizeof h2);
    assert_int_equal (decode_bytes (buf, n - 1, true), -EPROTO);
  }
  /* more strings announced than present */
  {
    FbLaunchSpecHeader h3 = h;
    h3.envc = 2;
    memcpy (buf, &h3, sizeof h3);
    assert_int_equal (decode_bytes (buf, n, true), -EPROTO);
  }
  /* no argv; a wrong magic; too many strings */
  {
    FbLaunchSpecHeader h4 = h;
    h4.argc = 0;
    h4.envc = 2;
    memcpy (buf, &h4, sizeof h4);
    assert_int_equal (decode_bytes (buf, n, true), -EPROTO);
    h4 = h;
    h4.magic ^= 1;
    memcpy (buf, &h4, sizeof h4);
    assert_int_equal (decode_bytes (buf, n, true), -EPROTO);
    h4 = h;
    h4.envc = FB_LAUNCH_STRINGS_MAX;
    memcpy (buf, &h4, sizeof h4);
    assert_int_equal (decode_bytes (buf, n, true), -EPROTO);
    /* the reserved word set; a umask out of range */
    h4 = h;
    h4.reserved = 1;
    memcpy (buf, &h4, sizeof h4);
    assert_int_equal (decode_bytes (buf, n, true), -EPROTO);
    h4 = h;
    h4.umask = 01000;
    memcpy (buf, &h4, sizeof h4);
    assert_int_equal (decode_bytes (buf, n, true), -EINVAL);
    memcpy (buf, &h, sizeof h);
  }
  /* well-formed but outside the bounds: an environment entry without "=" */
  {
    const char bad[] = "/bin/true\0NOEQ\0/";
    FbLaunchSpecHeader h5 = h;
    h5.strings_size = sizeof bad;
    memcpy (buf, &h5, sizeof h5);
    memcpy (buf + sizeof h, bad, sizeof bad);
    assert_int_equal (decode_bytes (buf, sizeof h + sizeof bad, true), -EINVAL);
  }
  /* not a memfd at all */
  assert_int_equal (pipe2 (pipefd, O_CLOEXEC), 0);
  assert_true (fb_launch_spec_decode (pipefd[0], false, &spec, &why) < 0);
  close (pipefd[0]);
  close (pipefd[1]);
}

/* The ids and umask travel; "serve" sends the helper's own (encode). */
static void
test_ids_umask (void **state)
{
  char true_path[] = "/bin/true", root[] = "/";
  char *argv[] = { true_path, NULL };
  char *envp[] = { NULL };
  FbLaunchSpec in = { .network = 2, .uid = 1234, .gid = 5678, .umask = 027, .argv = argv, .envp = envp, .cwd = root };
  g_auto (FbLaunchSpec) out = { 0 };
  g_auto (FbLaunchSpec) kept = { 0 };
  const char *why = NULL;
  int fd = -1;

  assert_int_equal (fb_launch_spec_seal (&in, false, &fd, &why), 0);
  assert_int_equal (fb_launch_spec_decode (fd, false, &out, &why), 0);
  close (fd);
  assert_int_equal (out.network, 2);
  assert_int_equal (out.uid, 1234);
  assert_int_equal (out.gid, 5678);
  assert_int_equal (out.umask, 027);
  assert_int_equal (fb_launch_spec_encode (0, (const char *const *)argv, NULL, "/", &fd, &why), 0);
  assert_int_equal (fb_launch_spec_decode (fd, false, &kept, &why), 0);
  close (fd);
  assert_int_equal (kept.uid, FB_LAUNCH_ID_CALLER);
  assert_int_equal (kept.gid, FB_LAUNCH_ID_CALLER);
  assert_int_equal (kept.umask, FB_LAUNCH_UMASK_KEEP);
  /* a umask is 0..0777 or "keep" */
  in.umask = 01000;
  assert_int_equal (fb_launch_spec_check (&in, false, &why), -EINVAL);
  assert_int_equal (fb_launch_spec_seal (&in, false, &fd, &why), -EINVAL);
}

/* A late spec: a header alone, and only where one is asked for. */
static void
test_late (void **state)
{
  char true_path[] = "/bin/true", root[] = "/";
  char *argv[] = { true_path, NULL };
  FbLaunchSpec late = { .network = 1, .uid = 42, .gid = 43, .umask = FB_LAUNCH_UMASK_KEEP };
  FbLaunchSpec command = late;
  g_auto (FbLaunchSpec) out = { 0 };
  g_auto (FbLaunchSpec) wrong = { 0 };
  const char *why = NULL;
  struct stat st;
  int fd = -1;

  assert_int_equal (fb_launch_spec_seal (&late, true, &fd, &why), 0);
  assert_int_equal (fstat (fd, &st), 0);
  assert_int_equal (st.st_size, sizeof (FbLaunchSpecHeader));
  assert_int_equal (fb_launch_spec_decode (fd, true, &out, &why), 0);
  assert_int_equal (out.network, 1);
  assert_int_equal (out.uid, 42);
  assert_int_equal (out.gid, 43);
  assert_null (out.argv);
  assert_null (out.cwd);
  /* argc 0 is no command */
  assert_int_equal (fb_launch_spec_decode (fd, false, &wrong, &why), -EPROTO);
  assert_non_null (why);
  close (fd);
  assert_int_equal (fb_launch_spec_check (&late, false, &why), -EINVAL);
  /* and a command is no late spec */
  command.argv = argv;
  command.cwd = root;
  assert_int_equal (fb_launch_spec_check (&command, true, &why), -EINVAL);
  assert_int_equal (fb_launch_spec_seal (&command, false, &fd, &why), 0);
  assert_int_equal (fb_launch_spec_decode (fd, true, &wrong, &why), -EPROTO);
  close (fd);
}

/* The helper refuses a late spec that brings streams (a sandbox with no
 * command has none of its own to take), and a command where a late spec
 * belongs, before it makes anything: FAILED 125. */
static int
helper_answer (const char *helper, guint32 value, int spec, int n_stdio)
{
  FbLaunchRecord rec = { .type = FB_LAUNCH_SPEC, .value = (int32_t)value };
  int pair[2], fds[2] = { -1, -1 }, status;
  int null = open ("/dev/null", O_RDWR | O_CLOEXEC);
  int sent[4] = { spec, null, null, null };
  g_autoptr (GError) error = NULL;
  GPid pid;

  assert_true (null >= 0);
  assert_int_equal (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  pid = fb_launch_helper_spawn (helper, null, null, null, pair[1], &error);
  assert_true (pid > 0);
  close (pair[1]);
  assert_int_equal (fb_send_fds (pair[0], &rec, sizeof rec, sent, 1 + n_stdio, 0), 0);
  assert_int_equal (fb_launch_recv (pair[0], &rec, sizeof rec, 0, fds), sizeof rec);
  assert_int_equal (rec.type, FB_LAUNCH_FAILED);
  assert_non_null (strstr (rec.text, "refused"));
  assert_int_equal (waitpid (pid, &status, 0), pid);
  close (pair[0]);
  close (null);
  return rec.value;
}

static void
test_helper_refuses_late (void **state)
{
  const char *root = g_getenv ("FUSEBOX_BUILD_ROOT");
  g_autofree char *helper = NULL;
  const char *argv[] = { "/bin/true", NULL };
  FbLaunchSpec late = { .uid = FB_LAUNCH_ID_CALLER, .gid = FB_LAUNCH_ID_CALLER, .umask = FB_LAUNCH_UMASK_KEEP };
  const char *why = NULL;
  int late_fd = -1, command_fd = -1;

  if (root == NULL)
    {
      test_skip_test (true, "FUSEBOX_BUILD_ROOT is not set: run with 'meson test'");
      return;
    }
  helper = g_build_filename (root, "launcher", "fusebox-launch", NULL);
  assert_int_equal (fb_launch_spec_seal (&late, true, &late_fd, &why), 0);
  assert_int_equal (fb_launch_spec_encode (0, argv, NULL, "/", &command_fd, &why), 0);
  assert_int_equal (helper_answer (helper, FB_LAUNCH_SPEC_LATE | FB_LAUNCH_SPEC_STDIO, late_fd, 3), 125);
  assert_int_equal (helper_answer (helper, FB_LAUNCH_SPEC_LATE, command_fd, 0), 125);
  /* and a late spec without the flag is no command */
  assert_int_equal (helper_answer (helper, 0, late_fd, 0), 125);
  close (late_fd);
  close (command_fd);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_roundtrip), cmocka_unit_test (test_empty_env),
                  cmocka_unit_test (test_bounds), cmocka_unit_test (test_malformed), cmocka_unit_test (test_ids_umask),
                  cmocka_unit_test (test_late), cmocka_unit_test (test_helper_refuses_late))
