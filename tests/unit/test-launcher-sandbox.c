/* fusebox — the sandbox as seen from inside: namespaces, ids, capabilities,
 * no_new_privs, seccomp, /proc, /dev, the network, the read-only root, and
 * nothing left on the host.  The root is a read-only bind of the host's "/"
 * standing in for the FUSE view; fb-smoke reports from inside. */
#include "test-launcher-util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <linux/fuse.h>

/* A TCP listener on 127.0.0.1, port chosen by the kernel; its address
 * ("127.0.0.1:PORT") in *RET_ADDRESS. */
static int
listen_loopback (TestState *s, char **ret_address)
{
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true (fd >= 0);
  test_keep_fd (s, fd);
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  assert_int_equal (bind (fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal (listen (fd, 4), 0);
  socklen_t len = sizeof sa;
  assert_int_equal (getsockname (fd, (struct sockaddr *)&sa, &len), 0);
  *ret_address = g_strdup_printf ("127.0.0.1:%d", ntohs (sa.sin_port));
  return fd;
}

static bool
listener_saw_connection (int fd, int timeout_ms)
{
  struct pollfd p = { .fd = fd, .events = POLLIN };
  return poll (&p, 1, timeout_ms) > 0;
}

static void
assert_locked_down (JsonObject *o)
{
  static const char *const caps[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
  for (size_t i = 0; i < G_N_ELEMENTS (caps); i++)
    assert_string_equal (json_object_get_string_member (o, caps[i]), "0000000000000000");
  assert_int_equal (json_object_get_int_member (o, "NoNewPrivs"), 1);
  assert_int_equal (json_object_get_int_member (o, "Seccomp"), 2);
}

/* fb-smoke with the arguments that follow (NULL-terminated, at most 6) in
 * test_plan's sandbox with NETWORK: it must start and exit EXIT_CODE; its
 * report. */
static G_GNUC_NULL_TERMINATED JsonObject *
run_smoke (TestState *s, FbLauncherNetwork network, int exit_code, ...)
{
  g_autofree char *smoke = test_fixture ("fb-smoke");
  const char *argv[8] = { smoke };
  FbLauncherPlan plan;
  TestRun run;
  JsonObject *o;
  va_list ap;
  guint n = 1;

  va_start (ap, exit_code);
  for (const char *arg; (arg = va_arg (ap, const char *)) != NULL;)
    {
      assert_true (n < G_N_ELEMENTS (argv) - 1);
      argv[n++] = arg;
    }
  va_end (ap);
  test_plan (&plan, argv);
  plan.network = network;
  test_run (s, &plan, &run);
  assert_false (run.failed);
  assert_int_equal (run.exit_code, exit_code);
  o = test_parse_object (run.out);
  test_run_clear (&run);
  return o;
}

/* Network none, ids of the caller (root here: uid 0 inside must still hold
 * no capability), a requested exit code. */
static void
test_smoke_network_none (void **state)
{
  TestState *s = *state;
  g_autofree char *target = NULL;
  int lfd = listen_loopback (s, &target);
  g_autoptr (JsonObject) o =
    run_smoke (s, FB_LAUNCHER_NETWORK_NONE, 73, "--connect", target, "--exit-code", "73", NULL);

  test_assert_own_namespaces (o, "fb-smoke in the sandbox");
  assert_int_equal (json_object_get_int_member (o, "euid"), geteuid ());
  assert_int_equal (json_object_get_int_member (o, "egid"), getegid ());
  assert_locked_down (o);

  /* loopback is up inside (refused, not unreachable), and it is not ours */
  assert_string_equal (json_object_get_string_member (o, "connect"), "ECONNREFUSED");
  assert_false (listener_saw_connection (lfd, 200));
}

static void
test_smoke_uid_gid (void **state)
{
  TestState *s = *state;
  g_autoptr (JsonObject) o = test_run_fixture_json (s, "fb-smoke", 1000, 1000);

  assert_int_equal (json_object_get_int_member (o, "euid"), 1000);
  assert_int_equal (json_object_get_int_member (o, "egid"), 1000);
  /* only one id is mapped: everything else shows as the overflow ids */
  assert_int_equal (json_object_get_int_member (o, "overflowuid"), 65534);
  assert_locked_down (o);
}

static void
test_smoke_network_host (void **state)
{
  TestState *s = *state;
  g_autofree char *target = NULL;
  int lfd = listen_loopback (s, &target);
  g_autoptr (JsonObject) o = run_smoke (s, FB_LAUNCHER_NETWORK_HOST, 0, "--connect", target, NULL);

  assert_string_equal (json_object_get_string_member (o, "connect"), "OK");
  assert_true (listener_saw_connection (lfd, 0));
  g_autofree char *own_net = test_own_ns ("net");
  g_autofree char *own_mnt = test_own_ns ("mnt");
  JsonObject *ns = json_object_get_object_member (o, "ns");
  assert_string_equal (json_object_get_string_member (ns, "net"), own_net);
  assert_string_not_equal (json_object_get_string_member (ns, "mnt"), own_mnt);
  assert_locked_down (o);
}

/* The host-directory root is read-only: a write fails with EROFS and
 * nothing lands on the host; reading works. */
static void
test_readonly_root (void **state)
{
  TestState *s = *state;
  /* writable by anyone: the read-only mount, not the mode, must refuse
   * (a root caller's sandbox is nobody on the host) */
  g_autofree char *marker = test_tmp_file (s, "marker", "old\n", 0666);
  g_autofree char *fresh = g_build_filename (s->tmpdir, "fresh", NULL);
  g_autoptr (JsonObject) o =
    run_smoke (s, FB_LAUNCHER_NETWORK_NONE, 0, "--allowed-write", fresh, "--denied-write", marker, NULL);
  assert_string_equal (json_object_get_string_member (o, "denied_read"), "OK");
  assert_string_equal (json_object_get_string_member (o, "allowed_write"), "EROFS");
  assert_string_equal (json_object_get_string_member (o, "denied_write"), "EROFS");
  assert_false (g_file_test (fresh, G_FILE_TEST_EXISTS));
  g_autofree char *content = NULL;
  assert_true (g_file_get_contents (marker, &content, NULL, NULL));
  assert_string_equal (content, "old\n");
}

/* /dev holds exactly the promised nodes and links, is read-only itself,
 * /dev/shm is a private writable tmpfs, ptys come from a private devpts. */
static void
test_minimal_dev (void **state)
{
  TestState *s = *state;
  /* a host POSIX shm object must stay invisible */
  g_autofree char *host_shm = g_strdup_printf ("/dev/shm/fb-launcher-test-%d", (int)getpid ());
  assert_true (g_file_set_contents (host_shm, "host", -1, NULL));
  g_autofree char *script = g_strdup_printf (
    "set -e; cd /dev;"
    "test \"$(ls -A | tr '\\n' ' ')\" = 'fd full null ptmx pts random shm stderr stdin stdout tty urandom zero ';"
    "for n in null zero full random urandom tty; do test -c $n; done;"
    "echo x > /dev/null; test \"$(head -c 3 /dev/zero | od -An -tx1 | tr -d ' ')\" = 000000;"
    "head -c 8 /dev/urandom > /dev/null;"
    "test -L fd && test -L stdin && test -L ptmx;"
    "test ! -e '%s';"
    "echo y > /dev/shm/mine && test \"$(cat /dev/shm/mine)\" = y;"
    "if touch /dev/planted 2>/dev/null; then echo 'dev writable'; exit 1; fi;"
    "test \"$(ls /dev/pts)\" = ptmx;"
    "echo ok",
    host_shm);
  const char *argv[] = { "/bin/sh", "-c", script, NULL };
  FbLauncherPlan plan;
  test_plan (&plan, argv);
  TestRun run;

  test_run (s, &plan, &run);
  unlink (host_shm);
  if (run.exit_code != 0)
    fail_msg ("inside: exit %d, output: %s", run.exit_code, run.out);
  assert_string_equal (run.out, "ok\n");
  assert_false (g_file_test ("/dev/shm/mine", G_FILE_TEST_EXISTS));
  test_run_clear (&run);
}

/* /proc is the sandbox's: the test's own pid is not there; SysV IPC is
 * private: a host segment is not listed in /proc/sysvipc/shm. */
static void
test_proc_and_ipc_private (void **state)
{
  TestState *s = *state;
  int shmid = shmget (IPC_PRIVATE, 4096, IPC_CREAT | 0600);
  assert_true (shmid >= 0);
  g_autofree char *script = g_strdup_printf ("test -r /proc/sysvipc/shm || exit 10;"
                                             "awk 'NR > 1 && $2 == %d { found = 1 } END { exit found ? 11 : 0 }' "
                                             "/proc/sysvipc/shm || exit $?;"
                                             "test ! -e /proc/%d || exit 12;"
                                             "test -e /proc/1/status || exit 13;"
                                             "echo ok",
                                             shmid, (int)getpid ());
  const char *argv[] = { "/bin/sh", "-c", script, NULL };
  FbLauncherPlan plan;
  test_plan (&plan, argv);
  TestRun run;

  /* the host does list it (the check inside can fail) */
  g_autofree char *host_list = NULL;
  assert_true (g_file_get_contents ("/proc/sysvipc/shm", &host_list, NULL, NULL));
  g_autofree char *needle = g_strdup_printf (" %d ", shmid);
  bool on_host = strstr (host_list, needle) != NULL;

  test_run (s, &plan, &run);
  shmctl (shmid, IPC_RMID, NULL);
  assert_true (on_host);
  if (run.exit_code != 0)
    fail_msg ("inside: exit %d (10 unreadable, 11 host segment listed, 12 test pid visible, 13 no pid 1)",
              run.exit_code);
  test_run_clear (&run);
}

/* Promise 2: the staging tmpfs and every mount live in the sandbox's mount
 * namespace only. */
static void
test_nothing_on_host (void **state)
{
  TestState *s = *state;
  const char *argv[] = { "/bin/cat", "/proc/self/mountinfo", NULL };
  struct stat st;
  bool had_tmp_root = stat ("/tmp/root", &st) == 0;
  g_autofree char *mountinfo = test_run_ok (s, argv);

  /* the sandbox's own /dev tmpfs, recognisable by its options... */
  assert_non_null (strstr (mountinfo, "nr_inodes=64"));

  /* ...is not on the host, nor is the staging tmpfs or its directory */
  if (!had_tmp_root)
    assert_int_equal (stat ("/tmp/root", &st), -1);
  g_autofree char *after = NULL;
  assert_true (g_file_get_contents ("/proc/self/mountinfo", &after, NULL, NULL));
  assert_null (strstr (after, "nr_inodes=64"));
  assert_null (strstr (after, " /tmp/root "));
}

/* /bin/true in a sandbox whose root is a FUSE mount that nobody serves
 * yet: the test plays the server. */
static FbLauncherChild *
spawn_fuse_root (TestState *s)
{
  static const char *const argv[] = { "/bin/true", NULL };
  FbLauncherPlan plan;

  test_require_fuse ();
  test_plan (&plan, argv);
  plan.root_kind = FB_LAUNCHER_ROOT_FUSE;
  return test_spawn (s, &plan);
}

/* A FUSE root: the sandbox opens /dev/fuse inside its user namespace,
 * mounts it and hands the fd over at the sync point.  Without a server it
 * then waits for the view (its /proc lookup), so we read the kernel's INIT
 * to prove the mount is real, and kill it. */
static void
test_fuse_root_sync_point (void **state)
{
  TestState *s = *state;
  FbLauncherChild *child = spawn_fuse_root (s);
  int fuse = -1;
  if (fb_launcher_child_wait_mounted (child, &fuse) < 0)
    {
      g_autofree char *msg = fb_launcher_child_describe_failure (child);
      fail_msg ("%s", msg);
    }
  assert_true (fuse >= 0);
  test_keep_fd (s, fuse);
  assert_true (fcntl (fuse, F_GETFD) & FD_CLOEXEC);
  size_t size = (1 << 20) + 4096; /* the kernel wants room for a max_write request */
  g_autofree char *buf = g_malloc (size);
  ssize_t n = read (fuse, buf, size);
  assert_true (n >= 40);
  uint32_t opcode;
  memcpy (&opcode, buf + 4, sizeof opcode);
  assert_int_equal (opcode, 26 /* FUSE_INIT */);
  assert_int_equal (fb_launcher_child_kill (child, SIGKILL), 0);
  int code;
  assert_int_equal (fb_launcher_child_wait (child, &code), 0);
  assert_int_equal (code, 128 + SIGKILL);
}

static void
fuse_reply (int fd, uint64_t unique, int error, const void *arg, size_t len)
{
  struct fuse_out_header out = { .len = sizeof out + len, .error = error, .unique = unique };
  struct iovec iov[2] = { { &out, sizeof out }, { (void *)arg, len } };
  assert_int_equal (writev (fd, iov, arg ? 2 : 1), (ssize_t)out.len);
}

/* A FUSE root served by a tiny server here: answer INIT, an empty root
 * directory, and ENOENT for every name.  pid 1's mount of /proc then looks
 * "proc" up in the view, which proves that (1) the sync point comes before
 * any lookup, (2) FUSE reports callers as host pids (the mount was made
 * from the caller's pid namespace: the view can read /proc/PID/comm), and
 * (3) a view without /proc fails the launch with a message saying so. */
static void
test_fuse_root_served (void **state)
{
  TestState *s = *state;
  FbLauncherChild *child = spawn_fuse_root (s);
  int fuse = -1;
  assert_int_equal (fb_launcher_child_wait_mounted (child, &fuse), 0);
  test_keep_fd (s, fuse);

  size_t size = (1 << 20) + 4096;
  g_autofree char *buf = g_malloc (size);
  pid_t lookup_pid = 0;
  g_autofree char *status = NULL;
  char lookup_name[64] = "";
  while (lookup_pid == 0)
    {
      ssize_t n = read (fuse, buf, size);
      if (n < 0)
        fail_msg ("read /dev/fuse: %s", g_strerror (errno));
      struct fuse_in_header in;
      memcpy (&in, buf, sizeof in);
      const char *arg = buf + sizeof in;
      switch (in.opcode)
        {
          case FUSE_INIT:
            {
              struct fuse_init_in init_in;
              memcpy (&init_in, arg, sizeof init_in);
              struct fuse_init_out init = { .major = FUSE_KERNEL_VERSION,
                                            .minor = FUSE_KERNEL_MINOR_VERSION,
                                            .max_readahead = init_in.max_readahead,
                                            .max_write = 4096,
                                            .time_gran = 1 };
              fuse_reply (fuse, in.unique, 0, &init, sizeof init);
              break;
            }
          case FUSE_GETATTR:
            {
              struct fuse_attr_out attr = { .attr_valid = 10 };
              attr.attr.ino = 1;
              attr.attr.mode = S_IFDIR | 0755;
              attr.attr.nlink = 2;
              fuse_reply (fuse, in.unique, 0, &attr, sizeof attr);
              break;
            }
          case FUSE_LOOKUP:
            lookup_pid = (pid_t)in.pid;
            g_strlcpy (lookup_name, arg, sizeof lookup_name);
            /* Read the caller's status while it waits for this answer: once
             * answered, it fails its mount and exits, and its /proc entry
             * may be gone before we look. */
            {
              g_autofree char *status_path = g_strdup_printf ("/proc/%d/status", (int)lookup_pid);
              if (!g_file_get_contents (status_path, &status, NULL, NULL))
                status = NULL;
            }
            fuse_reply (fuse, in.unique, -ENOENT, NULL, 0);
            break;
          default:
            fuse_reply (fuse, in.unique, -ENOSYS, NULL, 0);
            break;
        }
    }
  assert_string_equal (lookup_name, "proc");
  /* a host pid: its /proc entry (ours) shows it as pid 1 of a nested namespace */
  assert_non_null (status);
  g_autofree char *nspid = g_strdup_printf ("NSpid:\t%d\t1\n", (int)lookup_pid);
  if (!strstr (status, nspid))
    fail_msg ("pid %d from FUSE is not pid 1 of the sandbox seen from the host:\n%s", (int)lookup_pid, status);

  assert_int_equal (fb_launcher_child_wait_exec (child), -ECHILD);
  g_autofree char *msg = fb_launcher_child_describe_failure (child);
  assert_non_null (strstr (msg, "mount-proc: /proc: the sandbox's root (the FUSE view) has no /proc directory"));
  int code;
  assert_int_equal (fb_launcher_child_wait (child, &code), 0);
  assert_int_equal (code, FB_LAUNCHER_EXIT_SANDBOX);
}

/* Without root, only a writable uid_map lets the tests make sandboxes. */
static int
require_userns (void **state)
{
  if (geteuid () != 0 && access ("/proc/self/uid_map", W_OK) != 0)
    test_skip_or_fail ("these tests make user namespaces: run them as root, or where /proc/self/uid_map is writable");
  return 0;
}

TEST_DEFINE_MAIN (require_userns, NULL, TEST_LAUNCHER_TEST (test_smoke_network_none),
                  TEST_LAUNCHER_TEST (test_smoke_uid_gid), TEST_LAUNCHER_TEST (test_smoke_network_host),
                  TEST_LAUNCHER_TEST (test_readonly_root), TEST_LAUNCHER_TEST (test_minimal_dev),
                  TEST_LAUNCHER_TEST (test_proc_and_ipc_private), TEST_LAUNCHER_TEST (test_nothing_on_host),
                  TEST_LAUNCHER_TEST (test_fuse_root_sync_point), TEST_LAUNCHER_TEST (test_fuse_root_served))
