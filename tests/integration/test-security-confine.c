/* fusebox — the security suite's confinement attacks: no sandboxed process
 * holds the host's root, and nothing inside changes a host object through
 * /proc or /dev.  Each test is one attack, run through the real `fusebox
 * run` (and `fusebox serve` for the identity), each target first proven to
 * exist and, outside, to be writable by root:
 *  - identity: every process of the sandbox (the outer process, pid 1, the
 *    command) is the overflow uid/gid on the host, with no supplementary
 *    group 0, for a root caller (with `sudo`'s group 0), with --uid 1000
 *    --gid 1000 and under `fusebox serve`; what the command creates in the
 *    workspace still belongs to the caller;
 *  - kernel.core_pattern and the usermode-helper paths (kernel.modprobe
 *    where the kernel has it, kernel.poweroff_cmd): the value the host has,
 *    written back, is refused inside;
 *  - host-wide /proc knobs guarded only by root's ownership (the SysRq
 *    trigger, IRQ affinity, PCI configuration space) can't be opened for
 *    writing, and the covers are read-only mounts, which also hold the
 *    sandbox's own network sysctls;
 *  - /dev/full: chmod, utimes, chown and setxattr fail with EROFS and the
 *    host's node keeps its mode and times, while the devices still read and
 *    write;
 *  - /proc/1/{exe,cwd,root,environ,mem,fd,map_files}: closed (EACCES), and
 *    the F6 attack (fchmod 04777 through /proc/1/exe, futimens, a user.*
 *    xattr, an O_PATH reopen, exec and overwrite: CVE-2019-5736) leaves the
 *    host's fusebox binary as it was, for a root and for a normal caller;
 *  - the caller's standard streams: a file given as stdin opens again
 *    through /proc/self/fd for reading, not for writing (Landlock), and a
 *    directory or an O_PATH handle given as one fails the launch, for a
 *    root and a normal caller;
 *  - the escapes 43de5cd closed already, kept closed: TIOCSTI into the
 *    caller's terminal (CVE-2017-5226) and nested user namespaces.
 * The probe is this program run inside the sandbox (`--probe OP ARG...`);
 * tests that copy or chmod anything on the host put it back in teardown.
 */
#include <ftw.h>
#include <signal.h>

#include "tests/lib/test-caller.h"
#include "tests/lib/test-run.h"
#include "tests/lib/test-serve.h"

#include <pty.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <termios.h>

#define OUTER_UID TEST_CALLER_UID
#define OUTER_GID TEST_CALLER_GID

/* ---- inside the sandbox ---- */

static char *
mount_flags (const char *path)
{
  struct statvfs sv;
  if (statvfs (path, &sv) < 0)
    return g_strdup (rfx_errname (errno));
  return g_strdup_printf ("%s%s%s%s", (sv.f_flag & ST_RDONLY) ? "ro" : "rw", (sv.f_flag & ST_NOSUID) ? ",nosuid" : "",
                          (sv.f_flag & ST_NODEV) ? ",nodev" : "", (sv.f_flag & ST_NOEXEC) ? ",noexec" : "");
}

/* Write back what PATH holds: the write changes nothing where it works. */
static const char *
write_back (const char *path)
{
  char buf[4096];
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return rfx_errname (errno);
  ssize_t n = read (fd, buf, sizeof buf);
  close (fd);
  if (n < 0)
    return rfx_errname (errno);
  fd = open (path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return rfx_errname (errno);
  ssize_t w = write (fd, buf, (size_t)n);
  int e = errno;
  close (fd);
  return w < 0 ? rfx_errname (e) : "OK";
}

/* An fd of PATH, then OP on it; "OPEN-<errno>" when the open fails. */
static char *
on_fd (const char *path, int flags, int (*op) (int fd, const char *arg), const char *arg)
{
  int fd = open (path, flags | O_CLOEXEC);
  if (fd < 0)
    return g_strdup_printf ("OPEN-%s", rfx_errname (errno));
  int r = op (fd, arg);
  int e = errno;
  close (fd);
  return g_strdup (r < 0 ? rfx_errname (e) : "OK");
}

static int
op_fchmod (int fd, const char *mode)
{
  return fchmod (fd, (mode_t)strtoul (mode, NULL, 8));
}

static int
op_futimens (int fd, const char *seconds)
{
  struct timespec ts[2] = { { .tv_sec = atol (seconds) }, { .tv_sec = atol (seconds) } };
  return futimens (fd, ts);
}

static int
op_fsetxattr (int fd, const char *name)
{
  return fsetxattr (fd, name, "x", 1, 0);
}

static int
op_nothing (int fd, const char *unused)
{
  return 0;
}

/* chmod through /proc/self/fd/N of an O_PATH handle: a reopen of the
 * magic link, as the kernel follows it. */
static const char *
path_chmod (const char *path, const char *mode)
{
  int fd = open (path, O_PATH | O_CLOEXEC);
  if (fd < 0)
    return rfx_errname (errno);
  g_autofree char *link = g_strdup_printf ("/proc/self/fd/%d", fd);
  int r = chmod (link, (mode_t)strtoul (mode, NULL, 8));
  int e = errno;
  close (fd);
  return r < 0 ? rfx_errname (e) : "OK";
}

/* execve PATH in a child: "OK" when it ran, else the errno. */
static const char *
try_exec (const char *path)
{
  int p[2];
  if (pipe2 (p, O_CLOEXEC) < 0)
    return rfx_errname (errno);
  pid_t pid = fork ();
  if (pid == 0)
    {
      int devnull = open ("/dev/null", O_RDWR);
      dup2 (devnull, 1);
      dup2 (devnull, 2);
      execl (path, path, "--version", (char *)NULL);
      int e = errno;
      (void)!write (p[1], &e, sizeof e);
      _exit (127);
    }
  close (p[1]);
  int e = 0;
  ssize_t n = read (p[0], &e, sizeof e);
  close (p[0]);
  waitpid (pid, NULL, 0);
  return n == (ssize_t)sizeof e ? rfx_errname (e) : "OK";
}

/* One operation of the probe (rfx_probe_main). */
static const char *
probe_op (const char *op, const char *const *args, int *words, char **owned)
{
  const char *a = args[0], *b = args[1], *c = args[2];
  const char *res;

  if (strcmp (op, "hold") == 0)
    {
      /* A (a token for the test to find us by) unused; until killed */
      printf ("ready\n");
      fflush (stdout);
      for (;;)
        pause ();
    }
  else if (strcmp (op, "create") == 0)
    res = rfx_open_res (AT_FDCWD, a, O_WRONLY | O_CREAT | O_EXCL), *words = 2;
  else if (strcmp (op, "writeback") == 0)
    res = write_back (a), *words = 2;
  else if (strcmp (op, "openw") == 0)
    res = rfx_open_res (AT_FDCWD, a, O_WRONLY), *words = 2;
  else if (strcmp (op, "open") == 0)
    res = rfx_open_res (AT_FDCWD, a, O_RDONLY), *words = 2;
  else if (strcmp (op, "readlink") == 0)
    {
      char buf[4096];
      ssize_t n = readlink (a, buf, sizeof buf - 1);
      buf[n > 0 ? n : 0] = '\0';
      res = n < 0 ? rfx_errname (errno) : (*owned = g_strdup (buf));
      *words = 2;
    }
  else if (strcmp (op, "flags") == 0)
    res = *owned = mount_flags (a), *words = 2;
  else if (strcmp (op, "chmod") == 0)
    res = rfx_res (chmod (a, (mode_t)strtoul (b, NULL, 8))), *words = 3;
  else if (strcmp (op, "utime") == 0)
    {
      struct timespec ts[2] = { { .tv_sec = atol (b) }, { .tv_sec = atol (b) } };
      res = rfx_res (utimensat (AT_FDCWD, a, ts, 0));
      *words = 3;
    }
  else if (strcmp (op, "chown") == 0)
    res = rfx_res (chown (a, (uid_t)atol (b), (gid_t)atol (c))), *words = 4;
  else if (strcmp (op, "setxattr") == 0)
    res = rfx_res (setxattr (a, b, "x", 1, 0)), *words = 3;
  else if (strcmp (op, "readdev") == 0)
    {
      char buf[16];
      int fd = open (a, O_RDONLY | O_CLOEXEC);
      ssize_t n = fd < 0 ? -1 : read (fd, buf, sizeof buf);
      res = n < 0 ? rfx_errname (errno) : n == (ssize_t)sizeof buf ? "OK" : "SHORT";
      if (fd >= 0)
        close (fd);
      *words = 2;
    }
  else if (strcmp (op, "writedev") == 0)
    {
      int fd = open (a, O_WRONLY | O_CLOEXEC);
      ssize_t n = fd < 0 ? -1 : write (fd, "0123456789abcdef", 16);
      res = n < 0 ? rfx_errname (errno) : "OK";
      if (fd >= 0)
        close (fd);
      *words = 2;
    }
  else if (strcmp (op, "fd-chmod") == 0)
    res = *owned = on_fd (a, O_RDONLY, op_fchmod, b), *words = 3;
  else if (strcmp (op, "fd-utime") == 0)
    res = *owned = on_fd (a, O_RDONLY, op_futimens, b), *words = 3;
  else if (strcmp (op, "fd-setxattr") == 0)
    res = *owned = on_fd (a, O_RDONLY, op_fsetxattr, b), *words = 3;
  else if (strcmp (op, "fd-write") == 0)
    res = *owned = on_fd (a, O_WRONLY, op_nothing, NULL), *words = 2;
  else if (strcmp (op, "path-chmod") == 0)
    res = path_chmod (a, b), *words = 3;
  else if (strcmp (op, "exec") == 0)
    res = try_exec (a), *words = 2;
  else if (strcmp (op, "tiocsti") == 0)
    {
      char ch = '!';
      res = rfx_res (ioctl (0, TIOCSTI, &ch));
      *words = 1;
    }
  else if (strcmp (op, "unshare-user") == 0)
    res = rfx_res (unshare (CLONE_NEWUSER)), *words = 1;
  else if (strcmp (op, "clone-user") == 0)
    {
      long pid = syscall (__NR_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
      if (pid == 0)
        _exit (0);
      if (pid > 0)
        waitpid ((pid_t)pid, NULL, 0);
      res = rfx_res (pid);
      *words = 1;
    }
  else
    return NULL;
  return res;
}

/* ---- outside: who runs fusebox, and how ---- */

/* The test's directories belong to the unprivileged caller. */
static int
chown_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  return lchown (path, OUTER_UID, OUTER_GID) < 0 ? -1 : 0;
}

static void
give_to_outer_user (RFx *fx)
{
  assert_int_equal (nftw (fx->ws, chown_one, 16, FTW_PHYS), 0);
  assert_int_equal (nftw (fx->home, chown_one, 16, FTW_PHYS), 0);
  assert_int_equal (nftw (fx->state, chown_one, 16, FTW_PHYS), 0);
}

static void
set_repro (RFx *fx, const TestCaller *c, char **argv)
{
  rfx_set_repro (fx, argv);
  test_caller_annotate (c, &fx->repro);
}

/* fusebox run ARGV (built by rfx_argv_va) with BIN instead of $FUSEBOX_BIN
 * when not NULL, as caller C, to completion. */
static void
run_as (RFx *fx, const TestCaller *c, const char *bin, RfxResult *ret, GPtrArray *argv)
{
  g_auto (GStrv) env = rfx_env (fx);

  if (bin != NULL)
    {
      g_free (argv->pdata[0]);
      argv->pdata[0] = g_strdup (bin);
    }
  set_repro (fx, c, (char **)argv->pdata);
  memset (ret, 0, sizeof *ret);
  test_caller_run (c, fx->ws, env, (char **)argv->pdata, ret);
}

static GPtrArray *
argv_of (const char *first, ...)
{
  va_list ap;
  va_start (ap, first);
  GPtrArray *argv = rfx_argv_va (first, ap);
  va_end (ap);
  return argv;
}

/* The probe's result lines must be WANT (NULL-terminated); each entry may
 * list alternatives separated by "|". */
static void
assert_lines (const RfxResult *r, const char *what, const char *const *want)
{
  if (r->status != 0)
    fail_msg ("%s: exit status %d; stdout:\n%s\nstderr:\n%s", what, r->status, r->out, r->err);
  g_auto (GStrv) got = g_strsplit (r->out, "\n", -1);
  g_autoptr (GString) bad = g_string_new (NULL);
  for (size_t i = 0; want[i] != NULL; i++)
    {
      g_auto (GStrv) alts = g_strsplit (want[i], "|", -1);
      if (got[i] == NULL || !g_strv_contains ((const char *const *)alts, got[i]))
        g_string_append_printf (bad, "  probe %zu: %s, expected %s\n", i, got[i] ? got[i] : "(missing)", want[i]);
    }
  if (bad->len)
    fail_msg ("%s:\n%s(output:\n%s%s)", what, bad->str, r->out, r->err);
}

/* ARGV (argv_of's: the probe and its operations) run by the unprivileged
 * caller in a default sandbox prints WANT, one line per operation. */
static void
assert_probes_as_caller (RFx *fx, GPtrArray *argv, const char *const *want, const char *what)
{
  TestCaller c;
  RfxResult r;

  test_caller_init (&c, fx->tmp);
  run_as (fx, &c, NULL, &r, argv);
  assert_lines (&r, what, want);
  rfx_result_clear (&r);
  test_caller_clear (&c);
}

/* The probe's operation OP PATH, added to ARGV (without its NULL yet), and
 * EXPECT, the line it must print, to WANT. */
static void
add_probe (GPtrArray *argv, GPtrArray *want, const char *op, const char *path, const char *expect)
{
  g_ptr_array_add (argv, g_strdup (op));
  g_ptr_array_add (argv, g_strdup (path));
  g_ptr_array_add (want, (char *)expect);
}

/* ---- the sandbox's identity, read from outside ---- */

static guint32
overflow_id (const char *name)
{
  g_autofree char *path = g_build_filename ("/proc/sys/kernel", name, NULL);
  g_autofree char *text = test_read_file (path);
  return text != NULL ? (guint32)strtoul (text, NULL, 10) : 65534;
}

static char *
status_line (pid_t pid, const char *key)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", (int)pid);
  g_autofree char *text = test_read_file (path);
  if (text == NULL)
    return NULL;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (char **l = lines; *l; l++)
    if (g_str_has_prefix (*l, key) && (*l)[strlen (key)] == ':')
      return g_strstrip (g_strdup (*l + strlen (key) + 1));
  return NULL;
}

/* The host pids of the sandbox whose command's argv holds TOKEN: the
 * command, and its ancestors outside our user namespace (pid 1 and the
 * outer process).  The supervisor or fusebox-launch above them shares our
 * namespace and is not the sandbox; nor is the helper's argv the
 * command's (it is its path alone). */
static GArray *
sandbox_pids (const char *token)
{
  GArray *pids = g_array_new (FALSE, FALSE, sizeof (pid_t));
  g_autofree char *own_userns = g_file_read_link ("/proc/self/ns/user", NULL);
  g_autoptr (GArray) all = test_proc_pids ();
  for (guint k = 0; k < all->len; k++)
    {
      if (!test_proc_has_arg (g_array_index (all, pid_t, k), token))
        continue;
      /* the process, then up while outside our user namespace */
      for (pid_t pid = g_array_index (all, pid_t, k); pid > 1;)
        {
          g_autofree char *ns_path = g_strdup_printf ("/proc/%d/ns/user", (int)pid);
          g_autofree char *ns = g_file_read_link (ns_path, NULL);
          g_autofree char *ppid = NULL;
          bool known = false;
          if (ns == NULL || g_strcmp0 (ns, own_userns) == 0)
            break;
          for (guint i = 0; i < pids->len; i++)
            known = known || g_array_index (pids, pid_t, i) == pid;
          if (!known)
            g_array_append_val (pids, pid);
          ppid = status_line (pid, "PPid");
          pid = ppid != NULL ? (pid_t)atoi (ppid) : 0;
        }
    }
  return pids;
}

/* Every process of the sandbox is UID/GID on the host (all four ids of
 * each), in no group 0. */
static void
assert_host_ids (const char *token, guint32 uid, guint32 gid)
{
  g_autoptr (GArray) pids = sandbox_pids (token);
  if (pids->len < 3)
    fail_msg ("found %u processes of the sandbox (outer, pid 1, command), not 3", pids->len);
  g_autofree char *want_uid = g_strdup_printf ("%u\t%u\t%u\t%u", uid, uid, uid, uid);
  g_autofree char *want_gid = g_strdup_printf ("%u\t%u\t%u\t%u", gid, gid, gid, gid);
  for (guint i = 0; i < pids->len; i++)
    {
      pid_t pid = g_array_index (pids, pid_t, i);
      g_autofree char *uids = status_line (pid, "Uid");
      g_autofree char *gids = status_line (pid, "Gid");
      g_autofree char *groups = status_line (pid, "Groups");
      if (uids == NULL || gids == NULL || groups == NULL)
        fail_msg ("pid %d: its status is unreadable (gone?)", (int)pid);
      if (strcmp (uids, want_uid) != 0 || strcmp (gids, want_gid) != 0)
        fail_msg ("pid %d of the sandbox is Uid %s, Gid %s on the host, not %u and %u", (int)pid, uids, gids, uid, gid);
      g_auto (GStrv) gs = g_strsplit (groups, " ", -1);
      for (char **g = gs; *g; g++)
        if (strcmp (*g, "0") == 0)
          fail_msg ("pid %d of the sandbox keeps the host's group 0 (Groups: %s)", (int)pid, groups);
    }
}

/* `fusebox run` in the background, stdout on a pipe (registered for
 * teardown); returns the supervisor's pid once the probe said "ready". */
static pid_t
start_holding (RFx *fx, const TestCaller *c, GPtrArray *argv, int *ret_stdout)
{
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  GPid pid;

  set_repro (fx, c, (char **)argv->pdata);
  if (!g_spawn_async_with_pipes (fx->ws, (char **)argv->pdata, env, G_SPAWN_DO_NOT_REAP_CHILD, test_caller_setup,
                                 (gpointer)c, &pid, NULL, ret_stdout, NULL, &error))
    fail_msg ("spawn %s: %s", test_bin (), error->message);
  rfx_keep_pid (fx, pid);
  for (;;)
    {
      g_autofree char *line = test_read_line (*ret_stdout, 30000);
      if (line == NULL)
        fail_msg ("the sandbox never said ready");
      if (strcmp (line, "ready") == 0)
        return pid;
      if (strcmp (line, "OK") != 0)
        fail_msg ("the probe said %s before ready", line);
    }
}

static void
stop_holding (RFx *fx, pid_t pid, int out_fd)
{
  /* forwarded to the command, whose pause() ends: 143 */
  kill (pid, SIGTERM);
  int status = rfx_wait (fx, pid, 30000);
  close (out_fd);
  if (status != 128 + SIGTERM)
    fail_msg ("the run ended with %d after SIGTERM, not 143", status);
}

static char *
new_token (void)
{
  return g_strdup_printf ("fb-security-%d-%u", (int)getpid (), g_random_int ());
}

static void
assert_owned_by (const char *path, uid_t uid, gid_t gid)
{
  struct stat st;
  if (lstat (path, &st) < 0)
    fail_msg ("%s was not created: %s", path, g_strerror (errno));
  if (st.st_uid != uid || st.st_gid != gid)
    fail_msg ("%s belongs to %u:%u on the host, not to the caller %u:%u", path, (unsigned)st.st_uid,
              (unsigned)st.st_gid, (unsigned)uid, (unsigned)gid);
}

/* A root caller (in group 0, as under sudo), with EXTRA options (NULL or
 * "--uid"...): the sandbox is the overflow ids on the host; its file is
 * root's. */
static void
identity_run (RFx *fx, const char *const *extra)
{
  g_autofree char *self = test_self ();
  g_autofree char *token = new_token ();
  g_autofree char *made = g_build_filename (fx->ws, "made-inside", NULL);
  TestCaller c;
  test_caller_init (&c, fx->tmp);
  c.root_groups = true;

  g_autoptr (GPtrArray) argv = argv_of (NULL);
  g_ptr_array_remove_index (argv, argv->len - 1); /* the NULL */
  for (; extra && *extra; extra++)
    g_ptr_array_add (argv, g_strdup (*extra));
  const char *rest[] = { "--", self, "--probe", "create", made, "hold", token };
  for (size_t i = 0; i < G_N_ELEMENTS (rest); i++)
    g_ptr_array_add (argv, g_strdup (rest[i]));
  g_ptr_array_add (argv, NULL);

  int out = -1;
  pid_t pid = start_holding (fx, &c, argv, &out);
  assert_host_ids (token, overflow_id ("overflowuid"), overflow_id ("overflowgid"));
  stop_holding (fx, pid, out);
  assert_owned_by (made, 0, 0);
  test_caller_clear (&c);
}

RFX_CASE (test_identity_root)
{
  identity_run (fx, NULL);
}

RFX_CASE (test_identity_root_uid_1000)
{
  const char *extra[] = { "--uid", "1000", "--gid", "1000", NULL };
  identity_run (fx, extra);
}

/* The sandbox of TOKEN is up: its three processes, and MADE created. */
static bool
sandbox_up (const char *token, const char *made)
{
  g_autoptr (GArray) pids = sandbox_pids (token);
  return pids->len >= 3 && g_file_test (made, G_FILE_TEST_EXISTS);
}

/* The same through `fusebox serve`'s process/start (fusebox-launch). */
RFX_CASE (test_identity_serve)
{
  g_autofree char *self = test_self ();
  g_autofree char *token = new_token ();
  g_autofree char *made = g_build_filename (fx->ws, "made-by-serve", NULL);
  g_autofree char *policy = g_build_filename (fx->tmp, "policy.json", NULL);
  g_autofree char *policy_text = g_strdup_printf ("{\"version\":1,\"network\":\"none\",\"rules\":["
                                                  "{\"path\":\"/\",\"access\":\"read\",\"why\":\"tools\"},"
                                                  "{\"path\":\"%s\",\"access\":\"write\",\"why\":\"the workspace\"},"
                                                  "{\"path\":\"%s\",\"access\":\"read\",\"why\":\"the probe\"}]}",
                                                  fx->ws, g_getenv ("FUSEBOX_BUILD_ROOT"));
  test_write (policy, policy_text, 0644);
  const char *args[] = { "--workspace", fx->ws, "--policy", policy, NULL };
  TestServer *server = test_server_start (fx->tmp, args);
  if (server->pid > 0)
    rfx_keep_pid (fx, server->pid); /* a failed assertion leaves it to teardown */
  g_free (fx->repro);
  fx->repro = g_strdup (server->command);
  if (!g_str_has_prefix (server->url, "ws://"))
    fail_msg ("fusebox serve did not start");
  TestClient *client = test_client_open (server->url);
  g_autofree char *params = g_strdup_printf (
    "{\"processId\":\"sec\",\"argv\":[\"%s\",\"--probe\",\"create\",\"%s\",\"hold\",\"%s\"],\"cwd\":\"file://%s\","
    "\"env\":{\"PATH\":\"/usr/bin:/bin\"},\"tty\":false}",
    self, made, token, fx->ws);
  g_autoptr (JsonNode) start = test_client_call (client, "process/start", params);
  if (test_answer_result (start) == NULL)
    fail_msg ("process/start failed: %s", test_answer_error_message (start));
  if (!TEST_WAIT_FOR (sandbox_up (token, made), 30000))
    fail_msg ("the sandboxed process never came up");
  assert_host_ids (token, overflow_id ("overflowuid"), overflow_id ("overflowgid"));
  g_autoptr (JsonNode) term = test_client_call (client, "process/terminate", "{\"processId\":\"sec\"}");
  test_client_free (client);
  rfx_forget_pid (fx, server->pid);
  test_server_stop (server);
  assert_owned_by (made, 0, 0);
}

/* ---- sysctls and other host-wide knobs of /proc ---- */

/* Outside, as root: PATH's value written back works (nothing changes). */
static void
assert_host_writes_back (const char *path)
{
  g_autofree char *before = test_read_file (path);
  if (before == NULL)
    fail_msg ("%s is not readable on the host", path);
  const char *r = write_back (path);
  if (strcmp (r, "OK") != 0)
    fail_msg ("on the host, root can't write %s back (%s): the test would prove nothing", path, r);
}

static void
assert_unchanged (const char *path, const char *before)
{
  g_autofree char *after = test_read_file (path);
  assert_string_equal (after, before);
}

/* PATH's value, which root may write back on the host, written back from
 * inside a sandbox is refused, and PATH stays as it was. */
static void
assert_write_back_refused (RFx *fx, const char *path)
{
  g_autofree char *self = test_self ();
  g_autofree char *before = test_read_file (path);
  g_autofree char *what = g_strdup_printf ("writing %s back inside", path);
  g_autoptr (GPtrArray) argv = argv_of ("--", self, "--probe", "writeback", path, NULL);
  const char *want[] = { "EACCES|EROFS", NULL };

  assert_host_writes_back (path);
  assert_probes_as_caller (fx, argv, want, what);
  assert_unchanged (path, before);
}

/* kernel.core_pattern: the value the host has, written back from inside,
 * is refused (a pattern of our own would run as root on the next crash). */
RFX_CASE (test_core_pattern)
{
  assert_write_back_refused (fx, "/proc/sys/kernel/core_pattern");
}

/* The paths of programs the kernel runs as root: kernel.modprobe where the
 * kernel has modules, kernel.poweroff_cmd. */
RFX_CASE (test_usermode_helpers)
{
  static const char *const helpers[] = { "/proc/sys/kernel/modprobe", "/proc/sys/kernel/poweroff_cmd" };
  g_autoptr (GPtrArray) present = g_ptr_array_new ();
  for (size_t i = 0; i < G_N_ELEMENTS (helpers); i++)
    if (access (helpers[i], F_OK) == 0)
      g_ptr_array_add (present, (char *)helpers[i]);
  if (present->len == 0)
    test_skip_or_fail ("the kernel has neither kernel.modprobe nor kernel.poweroff_cmd");
  for (guint i = 0; i < present->len; i++)
    assert_write_back_refused (fx, present->pdata[i]);
}

/* Files whose only guard is the host root's ownership: the SysRq trigger,
 * IRQ affinity, PCI configuration space.  Opened for writing (which alone
 * changes nothing) on the host, refused inside. */
RFX_CASE (test_proc_root_knobs)
{
  g_autofree char *self = test_self ();
  g_autoptr (GPtrArray) knobs = g_ptr_array_new_with_free_func (g_free);
  if (access ("/proc/sysrq-trigger", F_OK) == 0)
    g_ptr_array_add (knobs, g_strdup ("/proc/sysrq-trigger"));
  if (access ("/proc/irq/default_smp_affinity", F_OK) == 0)
    g_ptr_array_add (knobs, g_strdup ("/proc/irq/default_smp_affinity"));
  {
    g_autoptr (GDir) bus = g_dir_open ("/proc/bus/pci", 0, NULL);
    const char *b;
    while (bus != NULL && (b = g_dir_read_name (bus)) != NULL)
      {
        g_autofree char *dir = g_build_filename ("/proc/bus/pci", b, NULL);
        g_autoptr (GDir) devs = g_dir_open (dir, 0, NULL);
        const char *d = devs != NULL ? g_dir_read_name (devs) : NULL;
        if (d != NULL)
          {
            g_ptr_array_add (knobs, g_build_filename (dir, d, NULL));
            break;
          }
      }
  }
  if (knobs->len == 0)
    test_skip_or_fail ("no /proc/sysrq-trigger, /proc/irq or /proc/bus/pci device here");
  g_autoptr (GPtrArray) argv = argv_of ("--", self, "--probe", NULL);
  g_ptr_array_remove_index (argv, argv->len - 1);
  g_autoptr (GPtrArray) want = g_ptr_array_new ();
  for (guint i = 0; i < knobs->len; i++)
    {
      int fd = open (knobs->pdata[i], O_WRONLY | O_CLOEXEC);
      if (fd < 0)
        fail_msg ("on the host, root can't open %s for writing (%s): the test would prove nothing",
                  (char *)knobs->pdata[i], g_strerror (errno));
      close (fd);
      add_probe (argv, want, "openw", knobs->pdata[i], "EACCES|EROFS");
    }
  g_ptr_array_add (argv, NULL);
  g_ptr_array_add (want, NULL);
  assert_probes_as_caller (fx, argv, (const char *const *)want->pdata,
                           "opening /proc's host-wide knobs for writing inside");
}

/* The covers themselves: read-only mounts over every entry the launcher
 * covers that this kernel has, which also hold what anyone may open for
 * writing there. */
RFX_CASE (test_proc_covers)
{
  static const char *const covered[] = { "sys",  "sysrq-trigger", "irq",           "bus",         "fs",  "acpi",
                                         "scsi", "asound",        "latency_stats", "timer_stats", "mtrr" };
  g_autofree char *self = test_self ();
  g_autoptr (GPtrArray) argv = argv_of ("--", self, "--probe", NULL);
  g_ptr_array_remove_index (argv, argv->len - 1);
  g_autoptr (GPtrArray) want = g_ptr_array_new ();
  for (size_t i = 0; i < G_N_ELEMENTS (covered); i++)
    {
      g_autofree char *path = g_build_filename ("/proc", covered[i], NULL);
      if (access (path, F_OK) != 0)
        continue;
      add_probe (argv, want, "flags", path, "ro,nosuid,nodev,noexec");
    }
  /* mode 0666, guarded by a capability check at write time: without the
   * cover anyone could open it for writing */
  add_probe (argv, want, "openw", "/proc/sys/kernel/ns_last_pid", "EROFS");
  g_ptr_array_add (argv, NULL);
  g_ptr_array_add (want, NULL);
  assert_probes_as_caller (fx, argv, (const char *const *)want->pdata, "the read-only covers of /proc");
}

/* ---- /dev ---- */

typedef struct
{
  char *path;
  struct stat st;
} SavedNode;

static SavedNode saved_node; /* put back in teardown: an old build changes it */

static int
restore_node_teardown (void **state)
{
  if (saved_node.path != NULL)
    {
      struct timespec ts[2] = { saved_node.st.st_atim, saved_node.st.st_mtim };
      chmod (saved_node.path, saved_node.st.st_mode & 07777);
      chown (saved_node.path, saved_node.st.st_uid, saved_node.st.st_gid);
      utimensat (AT_FDCWD, saved_node.path, ts, 0);
      removexattr (saved_node.path, "user.fusebox-test");
      g_clear_pointer (&saved_node.path, g_free);
    }
  return rfx_teardown (state);
}

/* /dev/full: no change of its mode (the sticky bit, which alone changes no
 * access, so that a failing build does no harm while it runs), times,
 * owner or xattrs from inside, and the host's node as it was; the devices
 * still read and write. */
RFX_CASE (test_dev_nodes)
{
  const char *full = "/dev/full";
  g_autofree char *self = test_self ();
  struct stat before, after;
  assert_int_equal (stat (full, &before), 0);
  assert_true (S_ISCHR (before.st_mode));
  saved_node.path = g_strdup (full);
  saved_node.st = before;
  /* outside, root may change it: the same mode, the same times */
  assert_int_equal (chmod (full, before.st_mode & 07777), 0);
  g_autofree char *mode = g_strdup_printf ("%o", (unsigned)((before.st_mode & 07777) | S_ISVTX));
  TestCaller c;
  test_caller_init (&c, fx->tmp);
  RfxResult r;
  g_autoptr (GPtrArray) argv =
    argv_of ("--", self, "--probe", "flags", full, "chmod", full, mode, "utime", full, "1000000000", "chown", full, "0",
             "0", "setxattr", full, "user.fusebox-test", "writedev", "/dev/null", "readdev", "/dev/zero", "writedev",
             full, "readdev", full, "readdev", "/dev/urandom", NULL);
  run_as (fx, &c, NULL, &r, argv);
  const char *want[] = {
    "ro,nosuid,noexec", "EROFS", "EROFS", "EROFS", "EROFS", "OK", "OK", "ENOSPC", "OK", "OK", NULL
  };
  assert_lines (&r, "changing /dev/full inside", want);
  assert_int_equal (stat (full, &after), 0);
  assert_int_equal (after.st_mode, before.st_mode);
  assert_int_equal (after.st_uid, before.st_uid);
  assert_int_equal (after.st_gid, before.st_gid);
  assert_int_equal (after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  assert_int_equal (after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  rfx_result_clear (&r);
  test_caller_clear (&c);
}

/* ---- /proc/1 and the host's fusebox binary ---- */

/* A copy of the program NAME beside fusebox in the test's directory, so
 * that an old build's failure changes only the copy; returns its path. */
static char *
copy_program (RFx *fx, const char *name)
{
  g_autofree char *data = NULL;
  g_autofree char *dir = g_path_get_dirname (test_bin ());
  g_autofree char *from = g_build_filename (dir, name, NULL);
  gsize len;
  g_autoptr (GError) error = NULL;
  char *copy = g_build_filename (fx->tmp, "bin", name, NULL);
  if (!g_file_get_contents (from, &data, &len, &error))
    fail_msg ("%s", error->message);
  test_write (copy, "", 0755);
  if (!g_file_set_contents_full (copy, data, (gssize)len, G_FILE_SET_CONTENTS_NONE, 0755, &error))
    fail_msg ("%s", error->message);
  assert_int_equal (chmod (copy, 0755), 0);
  return copy;
}

/* A binary as the attacks below would change it: its mode, times, the
 * test's xattr. */
static void
assert_binary_unchanged (const char *bin, const struct stat *before)
{
  struct stat after;

  assert_int_equal (stat (bin, &after), 0);
  assert_int_equal (after.st_mode, before->st_mode);
  assert_int_equal (after.st_mtim.tv_sec, before->st_mtim.tv_sec);
  assert_int_equal (after.st_mtim.tv_nsec, before->st_mtim.tv_nsec);
  assert_true (getxattr (bin, "user.fusebox-test", NULL, 0) < 0);
}

/* Every way through /proc/1 to pid 1's objects (the host's fusebox binary,
 * its memory and environment, its fds, cwd and root), and the attacks on
 * the binary: closed for CALLER, and the copy unchanged. */
static void
assert_pid1_closed (RFx *fx, const TestCaller *c)
{
  g_autofree char *self = test_self ();
  /* the front, which execs the full program: pid 1 is a fork of the
   * latter's */
  g_autofree char *bin = copy_program (fx, "fusebox");
  g_autofree char *full = copy_program (fx, "fusebox-main");
  struct stat before, full_before;
  assert_int_equal (stat (bin, &before), 0);
  assert_int_equal (stat (full, &full_before), 0);
  RfxResult r;
  g_autoptr (GPtrArray) argv =
    argv_of ("--", self, "--probe", "open", "/proc/1/exe", "readlink", "/proc/1/exe", "open", "/proc/1/environ", "open",
             "/proc/1/mem", "open", "/proc/1/cwd", "open", "/proc/1/root", "open", "/proc/1/fd", "open", "/proc/1/fd/1",
             "open", "/proc/1/map_files", "fd-chmod", "/proc/1/exe", "4777", "fd-utime", "/proc/1/exe", "1000000000",
             "fd-setxattr", "/proc/1/exe", "user.fusebox-test", "fd-write", "/proc/1/exe", "path-chmod", "/proc/1/exe",
             "4777", "exec", "/proc/1/exe", "readlink", "/proc/self/exe", NULL);
  run_as (fx, c, bin, &r, argv);
  const char *want[] = { "EACCES",      "EACCES", "EACCES", "EACCES",      "EACCES",      "EACCES",
                         "EACCES",      "EACCES", "EACCES", "OPEN-EACCES", "OPEN-EACCES", "OPEN-EACCES",
                         "OPEN-EACCES", "EACCES", "EACCES", self,          NULL };
  assert_lines (&r, "pid 1 through /proc/1", want);
  assert_binary_unchanged (bin, &before);
  assert_binary_unchanged (full, &full_before);
  rfx_result_clear (&r);
}

/* C: OUTER_UID with a private 0666 FUSE node, the fixture's directories
 * its own; the test is skipped where that user may not make sandboxes. */
static void
normal_caller_init (RFx *fx, TestCaller *c)
{
  test_caller_init (c, fx->tmp);
  c->fuse_mode = 0666;
  c->drop = true;
  give_to_outer_user (fx);
  test_caller_require_sandboxes (c, fx->ws, NULL);
}

RFX_CASE (test_proc_pid1_root)
{
  TestCaller c;
  test_caller_init (&c, fx->tmp);
  assert_pid1_closed (fx, &c);
  test_caller_clear (&c);
}

/* A normal caller keeps its uid, so the kernel's own rule (an euid change
 * makes a process not dumpable) does not close pid 1: fusebox must. */
RFX_CASE (test_proc_pid1_unprivileged)
{
  TestCaller c;
  normal_caller_init (fx, &c);
  assert_pid1_closed (fx, &c);
  test_caller_clear (&c);
}

/* ---- the caller's standard streams ---- */

/* The kernel's Landlock ABI, 0 without one. */
static int
landlock_abi (void)
{
  long v = syscall (444 /* landlock_create_ruleset */, NULL, 0, 1U /* VERSION */);
  return v > 0 ? (int)v : 0;
}

/* A standard stream is the caller's to give, no more: the command may
 * open it again through /proc/self/fd for what it was given (read, here)
 * but not for more (write: OWNER's file, which the sandbox's host id could
 * write), and a directory (below which is a file the view does not show,
 * readable to the sandbox's host id) or a path handle is refused as one. */
static void
assert_streams_kept (RFx *fx, const TestCaller *c, uid_t owner, mode_t mode)
{
  g_autofree char *self = test_self ();
  g_autofree char *file = g_build_filename (fx->tmp, "given", NULL);
  g_autofree char *dir = g_build_filename (fx->tmp, "given-dir", NULL);
  g_autofree char *secret = g_build_filename (dir, "secret", NULL);
  g_autofree char *text = NULL;
  TestCaller given = *c;
  struct stat st;
  RfxResult r;

  if (landlock_abi () < 2)
    test_skip_test (true, "the kernel has no Landlock of ABI 2 or later (Linux 5.19, \"landlock\" in the lsm= "
                          "list), with which the sandbox keeps the caller's streams to what they were given");
  test_write (file, "given\n", mode);
  assert_int_equal (chown (file, owner, owner), 0);
  assert_int_equal (chmod (file, mode), 0); /* past the umask */
  assert_int_equal (mkdir (dir, 0755), 0);
  test_write (secret, "secret\n", 0644);
  /* on the host: the file is the caller's to write, the secret there */
  assert_int_equal (stat (file, &st), 0);
  assert_int_equal (st.st_uid, owner);
  assert_true ((st.st_mode & (owner == 0 ? S_IWOTH : S_IWUSR)) != 0);
  assert_true (g_file_get_contents (secret, &text, NULL, NULL));
  assert_string_equal (text, "secret\n");

  given.stdin_fd = open (file, O_RDONLY | O_CLOEXEC);
  assert_true (given.stdin_fd >= 0);
  {
    g_autoptr (GPtrArray) argv = argv_of ("--", self, "--probe", "open", "/proc/self/fd/0", "openw", "/proc/self/fd/0",
                                          "openw", "/dev/stdin", NULL);
    run_as (fx, &given, NULL, &r, argv);
  }
  close (given.stdin_fd);
  {
    const char *want[] = { "OK", "EACCES", "EACCES", NULL };
    assert_lines (&r, "a file given as stdin, opened again", want);
  }
  rfx_result_clear (&r);
  g_clear_pointer (&text, g_free);
  assert_true (g_file_get_contents (file, &text, NULL, NULL));
  assert_string_equal (text, "given\n");

  /* a directory, or a path handle, as a stream: the launch fails saying
   * why, before the command runs (below it, and up from it by "..",
   * chmod, stat and a Unix socket's connect would reach the host) */
  for (int i = 0; i < 2; i++)
    {
      given.stdin_fd = i == 0 ? open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : open (file, O_PATH | O_CLOEXEC);
      assert_true (given.stdin_fd >= 0);
      {
        g_autoptr (GPtrArray) argv = argv_of ("--", self, "--probe", "open", "/proc/self/fd/0/secret", "path-chmod",
                                              "/proc/self/fd/0", "0777", NULL);
        run_as (fx, &given, NULL, &r, argv);
      }
      close (given.stdin_fd);
      if (r.status != 125 || strstr (r.err, "the command's stdin is a directory (or an O_PATH handle)") == NULL ||
          r.out[0] != '\0')
        fail_msg ("a %s as stdin: exit status %d; stdout:\n%s\nstderr:\n%s", i == 0 ? "directory" : "path handle",
                  r.status, r.out, r.err);
      rfx_result_clear (&r);
    }
  assert_int_equal (stat (file, &st), 0);
  assert_int_equal (st.st_mode & 07777, mode);
}

RFX_CASE (test_streams_root)
{
  TestCaller c;
  test_caller_init (&c, fx->tmp);
  /* the sandbox is nobody on the host: a file anyone may write */
  assert_streams_kept (fx, &c, 0, 0666);
  test_caller_clear (&c);
}

RFX_CASE (test_streams_unprivileged)
{
  TestCaller c;
  normal_caller_init (fx, &c);
  /* the sandbox is the caller on the host: the caller's own file */
  assert_streams_kept (fx, &c, TEST_CALLER_UID, 0600);
  test_caller_clear (&c);
}

/* ---- escapes closed before, kept closed ---- */

/* TIOCSTI into the caller's terminal (CVE-2017-5226), nested user
 * namespaces by unshare and by clone: the command's stdin is a terminal
 * of ours, and nothing arrives on it. */
RFX_CASE (test_known_escapes)
{
  g_autofree char *self = test_self ();
  int master = -1, slave = -1;
  assert_int_equal (openpty (&master, &slave, NULL, NULL, NULL), 0);
  /* raw: an injected byte would be readable at once, without a newline */
  struct termios tio;
  assert_int_equal (tcgetattr (slave, &tio), 0);
  cfmakeraw (&tio);
  assert_int_equal (tcsetattr (slave, TCSANOW, &tio), 0);
  TestCaller c;
  test_caller_init (&c, fx->tmp);
  c.stdin_fd = slave;
  RfxResult r;
  g_autoptr (GPtrArray) argv =
    argv_of ("--", self, "--probe", "tiocsti", "tiocsti", "unshare-user", "clone-user", NULL);
  run_as (fx, &c, NULL, &r, argv);
  const char *want[] = { "EPERM", "EPERM", "EPERM", "EPERM", NULL };
  assert_lines (&r, "known escapes", want);
  /* nothing was pushed into the terminal's input */
  int fl = fcntl (slave, F_GETFL);
  assert_int_equal (fcntl (slave, F_SETFL, fl | O_NONBLOCK), 0);
  char ch;
  assert_int_equal (read (slave, &ch, 1), -1);
  assert_int_equal (errno, EAGAIN);
  close (master);
  close (slave);
  rfx_result_clear (&r);
  test_caller_clear (&c);
}

RFX_DEFINE_PROBE_MAIN (probe_op, NULL, RFX_TEST (test_identity_root), RFX_TEST (test_identity_root_uid_1000),
                       RFX_TEST (test_identity_serve), RFX_TEST (test_core_pattern), RFX_TEST (test_usermode_helpers),
                       RFX_TEST (test_proc_root_knobs), RFX_TEST (test_proc_covers),
                       cmocka_unit_test_setup_teardown (test_dev_nodes, rfx_setup, restore_node_teardown),
                       RFX_TEST (test_proc_pid1_root), RFX_TEST (test_proc_pid1_unprivileged),
                       RFX_TEST (test_streams_root), RFX_TEST (test_streams_unprivileged),
                       RFX_TEST (test_known_escapes))
