/* Adversarial tests: what a person names to fusebox may be someone else's.
 *
 *  - A policy (policy check, run --policy) or a token file (serve
 *    --token-file, log --connect --token-file) from a cloned repository or a
 *    shared directory that is a FIFO, a symbolic link to /dev/zero or a
 *    file larger than the bound: each command refuses it at once, naming
 *    the path, what it is (or its size and the bound) and the fix; none
 *    blocks in open(2) on the FIFO or reads the device.
 *  - `log --follow --connect unix:PATH` where PATH is answered by another
 *    user's process (a fake server in a shared directory): refused before
 *    anything is sent, naming the peer's uid; nothing it sends is printed.
 *    The same fake server run as root is believed (root's server is the one
 *    a person may follow), which proves it would be.
 *  - `log --follow --connect ws://127.0.0.1:PORT --token-file F` while
 *    another user holds PORT (serve down for a restart): refused before
 *    the upgrade request, naming the listener's uid; the listener reads
 *    nothing.  The same listener run as root gets the token, which proves
 *    it would.
 * Each object is first proven to exist on the host as what it is.  Every
 * command is run under timeout(1) with a generous bound: a hang fails the
 * test, it is not a timing assertion.
 *
 * Needs root (a process of another uid); no sandbox is made. */
#include <grp.h>
#include <signal.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "tests/lib/test-run.h"

/* bound on each command: far above what one takes; only a hang reaches it */
#define CAP_S "60"
/* timeout -s KILL's status for a command still running at the bound */
#define HUNG 137
/* the policy bound (docs/fusebox-policy.5, LIMITS) and the token's */
#define POLICY_MAX 8388608
#define TOKEN_MAX 4096
#define OTHER_UID 65534
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
RFX_CASE (test_policy_not_a_file)
{
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
}

/* A token file that is a FIFO, a link to /dev/zero or larger than a token:
 * `serve --token-file` and `log --connect --token-file` refuse it at once
 * and say why (neither listens or connects first). */
RFX_CASE (test_token_file_not_a_file)
{
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
}

/* ---- a fake server on a unix socket ---- */

static bool
read_line (int fd, GString *line)
{
  char c;

  g_string_truncate (line, 0);
  for (;;)
    {
      ssize_t n = read (fd, &c, 1);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return false;
      if (c == '\n')
        return true;
      g_string_append_c (line, c);
    }
}

static void
write_str (int fd, const char *s)
{
  (void)!write (fd, s, strlen (s));
}

/* In a child: listen at PATH as UID (the uid SO_PEERCRED shows is the one
 * that called listen), answer `fusebox log --connect`'s initialize and
 * log/subscribe (ids 1 and 2, as the client numbers them) as serve would,
 * send one forged record, and exit when the client goes. */
static pid_t
start_fake_server (const char *path, uid_t uid)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  int s = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  pid_t pid;

  assert_true (s >= 0);
  assert_true (strlen (path) < sizeof sa.sun_path);
  strcpy (sa.sun_path, path);
  assert_int_equal (bind (s, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal (chmod (path, 0777), 0);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0)
    {
      g_autoptr (GString) line = g_string_new (NULL);
      int c;

      if (setgroups (0, NULL) < 0 || setresgid (uid, uid, uid) < 0 || setresuid (uid, uid, uid) < 0 ||
          listen (s, 4) < 0)
        _exit (99);
      c = accept4 (s, NULL, NULL, SOCK_CLOEXEC);
      if (c < 0)
        _exit (98);
      while (read_line (c, line))
        {
          if (strstr (line->str, "\"initialize\"") != NULL)
            write_str (c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"userAgent\":\"fusebox\"}}\n");
          else if (strstr (line->str, "\"log/subscribe\"") != NULL)
            {
              write_str (c,
                         "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"subscriptionId\":\"s1\",\"scope\":\"all\"}}\n");
              write_str (c, "{\"jsonrpc\":\"2.0\",\"method\":\"log/event\",\"params\":{\"ts\":\"2024-01-01T00:00:00."
                            "000000Z\",\"run\":\"r\",\"seq\":1,\"pid\":1,\"uid\":0,\"comm\":\"sshd\",\"op\":\"open\","
                            "\"path\":\"/FORGED/etc/shadow\",\"access\":\"read\",\"decision\":\"allow\",\"errno\":0,"
                            "\"rule\":0,\"why\":\"forged\"}}\n");
              break;
            }
        }
      _exit (0);
    }
  close (s);
  return pid;
}

/* `log --follow --connect unix:PATH`, PATH answered by a fake server of
 * another uid: refused before anything is sent, naming that uid; the same
 * server run as root is followed (and its record printed). */
RFX_CASE (test_connect_impostor)
{
  g_autofree char *dir = g_build_filename (fx->tmp, "shared", NULL);
  g_autofree char *sock = g_build_filename (dir, "serve.sock", NULL);
  g_autofree char *url = g_strconcat ("unix:", sock, NULL);
  g_autofree char *says = NULL;
  TestCmd r = { 0 };
  pid_t pid;
  int status;

  assert_int_equal (g_mkdir_with_parents (dir, 01777), 0);
  assert_int_equal (chmod (dir, 01777), 0);

  /* root's server: believed */
  pid = start_fake_server (sock, 0);
  rfx_keep_pid (fx, pid);
  FUSEBOX (fx, &r, "log", "--follow", "--connect", url);
  if (strstr (r.out, "/FORGED/etc/shadow") == NULL)
    fail_msg ("%s: the fake server as root was not followed (exit %d); stdout:\n%s\nstderr:\n%s", r.command, r.status,
              r.out, r.err);
  test_cmd_clear (&r);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  rfx_forget_pid (fx, pid);
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  assert_int_equal (unlink (sock), 0);

  /* another user's: refused */
  pid = start_fake_server (sock, OTHER_UID);
  rfx_keep_pid (fx, pid);
  FUSEBOX (fx, &r, "log", "--follow", "--connect", url);
  says = g_strdup_printf ("%s is answered by a process of uid %d, not root's", url, OTHER_UID);
  assert_refused (&r, 1, says, "nothing was sent to it", "as uid " G_STRINGIFY (OTHER_UID), NULL);
  if (strstr (r.out, "FORGED") != NULL)
    fail_msg ("%s printed another user's forged record:\n%s", r.command, r.out);
  test_cmd_clear (&r);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  rfx_forget_pid (fx, pid);
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
}

/* In a child of UID (which owns the socket: the kernel takes its uid when
 * the socket is made), a TCP listener on 127.0.0.1; *RET_PORT its port.
 * What the first connection sends, up to the end of its HTTP header or EOF,
 * comes back on *RET_CAPTURE (read it to EOF). */
static pid_t
start_tcp_listener (uid_t uid, guint16 *ret_port, int *ret_capture)
{
  int port_pipe[2], capture[2];
  pid_t pid;
  guint16 port = 0;

  assert_int_equal (pipe2 (port_pipe, O_CLOEXEC), 0);
  assert_int_equal (pipe2 (capture, O_CLOEXEC), 0);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0)
    {
      struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
      socklen_t len = sizeof sa;
      g_autoptr (GString) got = g_string_new (NULL);
      char buf[4096];
      int s, c;

      if (setgroups (0, NULL) < 0 || setresgid (uid, uid, uid) < 0 || setresuid (uid, uid, uid) < 0)
        _exit (99);
      s = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (s < 0 || bind (s, (struct sockaddr *)&sa, sizeof sa) < 0 || listen (s, 4) < 0 ||
          getsockname (s, (struct sockaddr *)&sa, &len) < 0)
        _exit (98);
      port = ntohs (sa.sin_port);
      if (write (port_pipe[1], &port, sizeof port) != sizeof port)
        _exit (97);
      c = accept4 (s, NULL, NULL, SOCK_CLOEXEC);
      if (c < 0)
        _exit (96);
      while (strstr (got->str, "\r\n\r\n") == NULL && got->len < 65536)
        {
          ssize_t n = read (c, buf, sizeof buf);

          if (n < 0 && errno == EINTR)
            continue;
          if (n <= 0)
            break;
          g_string_append_len (got, buf, n);
        }
      (void)!write (capture[1], got->str, got->len);
      _exit (0);
    }
  close (port_pipe[1]);
  close (capture[1]);
  assert_int_equal (read (port_pipe[0], &port, sizeof port), sizeof port);
  close (port_pipe[0]);
  *ret_port = port;
  *ret_capture = capture[0];
  return pid;
}

/* `log --follow --connect ws://127.0.0.1:PORT --token-file F`, PORT held
 * by a listener of another uid: refused before the upgrade, naming that
 * uid, and the listener reads nothing; root's listener gets the token
 * (which proves the other would). */
RFX_CASE (test_token_to_loopback_impostor)
{
  g_autofree char *token_file = g_build_filename (fx->tmp, "token", NULL);
  const char *token = "8b1f0c7e2a9d4f6031c5e7a9b2d4f60818e3c5a7b9d1f3e5";
  g_autofree char *says = NULL;
  TestCmd r = { 0 };

  test_write (token_file, token, 0600);
  for (int i = 0; i < 2; i++)
    {
      uid_t uid = i == 0 ? 0 : OTHER_UID;
      guint16 port = 0;
      int capture = -1, status;
      pid_t pid = start_tcp_listener (uid, &port, &capture);
      g_autofree char *url = g_strdup_printf ("ws://127.0.0.1:%u", port);
      g_autofree char *got = NULL;

      rfx_keep_pid (fx, pid);
      FUSEBOX (fx, &r, "log", "--follow", "--connect", url, "--token-file", token_file);
      got = test_read_all (capture);
      close (capture);
      assert_int_equal (waitpid (pid, &status, 0), pid);
      rfx_forget_pid (fx, pid);
      assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
      if (uid == 0)
        {
          /* root's listener: believed, and the token is sent */
          if (strstr (got, token) == NULL)
            fail_msg ("%s: root's listener did not get the token (exit %d); it read:\n%s\nstderr:\n%s", r.command,
                      r.status, got, r.err);
        }
      else
        {
          says =
            g_strdup_printf ("%s is answered by a process of uid %d, not root's: nothing was sent", url, OTHER_UID);
          assert_refused (&r, 1, says, "as uid " G_STRINGIFY (OTHER_UID), NULL);
          if (got[0] != '\0')
            fail_msg ("%s: uid %d's listener read %zu bytes:\n%s", r.command, OTHER_UID, strlen (got), got);
        }
      test_cmd_clear (&r);
    }
}

static int
require_host (void **state)
{
  if (!g_file_test (test_bin (), G_FILE_TEST_IS_EXECUTABLE))
    test_skip_or_fail ("FUSEBOX_BIN is not an executable: run with 'meson test'");
  test_host_require ("root", "these tests need root (a fake server of another uid)");
  if (!g_file_test ("/usr/bin/timeout", G_FILE_TEST_IS_EXECUTABLE))
    test_skip_or_fail ("/usr/bin/timeout (coreutils) is missing");
  return 0;
}

TEST_DEFINE_MAIN (require_host, NULL, RFX_TEST (test_policy_not_a_file), RFX_TEST (test_token_file_not_a_file),
                  RFX_TEST (test_connect_impostor), RFX_TEST (test_token_to_loopback_impostor))
