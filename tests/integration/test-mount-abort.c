/* fusebox — a stopping `fusebox mount` ends its own FUSE connection and
 * mount, never the next one to get its number.
 *
 * The kernel names a FUSE connection (/sys/fs/fuse/connections/N) and its
 * mount (st_dev 0:N) by the superblock's anonymous device number, and
 * hands that number to the next mount (of any filesystem) as soon as the
 * old superblock is gone.
 *
 * The abort: a daemon told to stop unmounts lazily and, unless its workers
 * have seen the connection end, aborts it after a grace period (and at once
 * at a second signal).  Here its workers can't see the end: the test stops
 * them with ptrace, so the daemon's abort comes after its connection is
 * gone, while a FUSE mount the test made (served by nobody: a /dev/fuse
 * descriptor it only reads) holds the number.  That mount must stay
 * connected: its descriptor reads EAGAIN, not the end of its connection.
 * On a busy host the other mount is another sandbox's, cut off mid-run.
 *
 * The unmount watcher: the small process that detaches the mount of a
 * daemon that died (launcher-cmd-mount.c).  Held stopped while its daemon
 * is unmounted and ends, then let go once the next `fusebox mount` at the
 * same path has the same number, it must leave that mount alone (a restart
 * at the same mount point, on a loaded host). */
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/ptrace.h>

#include "tests/lib/test-mount.h"

static const char policy_text[] = "{ \"version\": 1, \"rules\": [\n"
                                  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" } ] }\n";

#define CONNECTIONS "/sys/fs/fuse/connections"

/* FUSE mounts the test makes until one gets the number back. */
#define OTHERS_MAX 16

/* The watcher the test holds stopped (let go at teardown). */
static pid_t stopped_watcher;

/* The daemon's FUSE threads the test holds stopped (thawed at teardown,
 * also when the test failed). */
static pid_t frozen[64];
static guint n_frozen;

/* The FUSE mounts the test made, and their descriptors. */
static char *other_path[OTHERS_MAX];
static int other_fd[OTHERS_MAX];
static guint n_others;

/* The minor device number of the mount at PATH (major 0: an anonymous
 * device), from mountinfo: a stat of a mount nobody serves would hang.
 * 0 when nothing is mounted there. */
static unsigned
mount_minor (const char *path)
{
  g_autofree char *text = test_read_file ("/proc/self/mountinfo");
  g_auto (GStrv) lines = NULL;
  unsigned found = 0;

  assert_non_null (text);
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      unsigned maj, min;
      char mnt[4096];
      if (sscanf (lines[i], "%*u %*u %u:%u %*s %4095s", &maj, &min, mnt) == 3 && maj == 0 && strcmp (mnt, path) == 0)
        found = min; /* the last one is on top */
    }
  return found;
}

/* The test's own mount namespace: nothing it mounts reaches the host, and
 * the daemons it starts inherit it. */
static void
private_namespace (void)
{
  if (unshare (CLONE_NEWNS) < 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    fail_msg ("a private mount namespace: %s", g_strerror (errno));
}

/* ... with fusectl at CONNECTIONS, as most hosts have it (systemd mounts
 * it). */
static void
private_fusectl (void)
{
  private_namespace ();
  if (!g_file_test (CONNECTIONS "/.", G_FILE_TEST_IS_DIR))
    test_skip_test (false, CONNECTIONS " is missing (no fuse module in sysfs?)");
  if (mount ("fusectl", CONNECTIONS, "fusectl", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 && errno != EBUSY)
    test_skip_test (false, "fusectl can't be mounted at " CONNECTIONS ": %s", g_strerror (errno));
}

/* Stop every thread of PID named "fusebox-fuse" (the serving thread and
 * the workers): they can't read the end of the connection, nor start
 * another worker. */
static void
freeze_fuse_threads (pid_t pid)
{
  g_autofree char *dir_path = g_strdup_printf ("/proc/%d/task", (int)pid);
  g_autoptr (GDir) dir = g_dir_open (dir_path, 0, NULL);
  const char *name;

  assert_non_null (dir);
  while ((name = g_dir_read_name (dir)) != NULL && n_frozen < G_N_ELEMENTS (frozen))
    {
      g_autofree char *comm_path = g_build_filename (dir_path, name, "comm", NULL);
      g_autofree char *comm = test_read_file (comm_path);
      pid_t tid = (pid_t)atoi (name);
      int status;

      if (comm == NULL || strcmp (g_strchomp (comm), "fusebox-fuse") != 0)
        continue;
      if (ptrace (PTRACE_SEIZE, tid, NULL, NULL) < 0)
        {
          if (n_frozen == 0 && errno == EPERM)
            test_skip_test (false, "ptrace is refused here (%s): the test stops the daemon's FUSE threads with it",
                            g_strerror (errno));
          fail_msg ("PTRACE_SEIZE of the daemon's thread %d: %s", (int)tid, g_strerror (errno));
        }
      frozen[n_frozen++] = tid;
      assert_int_equal (ptrace (PTRACE_INTERRUPT, tid, NULL, NULL), 0);
      assert_int_equal (waitpid (tid, &status, __WALL), tid);
    }
  if (n_frozen == 0)
    fail_msg ("the daemon %d has no thread named fusebox-fuse", (int)pid);
}

static void
thaw (void)
{
  for (guint i = 0; i < n_frozen; i++)
    (void)ptrace (PTRACE_DETACH, frozen[i], NULL, NULL);
  n_frozen = 0;
}

/* A FUSE mount at PATH that nobody serves; its /dev/fuse descriptor
 * (non-blocking) is kept, and its minor number returned. */
static unsigned
mount_other (const char *path)
{
  g_autofree char *opts = NULL;
  int fd;

  assert_int_equal (g_mkdir_with_parents (path, 0755), 0);
  fd = open ("/dev/fuse", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  assert_true (fd >= 0);
  opts = g_strdup_printf ("fd=%d,rootmode=40000,user_id=0,group_id=0", fd);
  if (mount ("fusebox-test", path, "fuse", MS_NOSUID | MS_NODEV, opts) < 0)
    fail_msg ("mount of a FUSE filesystem at %s: %s", path, g_strerror (errno));
  other_path[n_others] = g_strdup (path);
  other_fd[n_others] = fd;
  n_others++;
  return mount_minor (path);
}

/* FUSE mounts of our own until one gets number N: each takes the lowest
 * free one.  Its index, or -1 when another mount on the host took N first
 * (the last number got in *RET_GOT). */
static int
take_number (MFx *fx, unsigned n, unsigned *ret_got)
{
  while (n_others < OTHERS_MAX)
    {
      g_autofree char *path = g_strdup_printf ("%s/other%u", fx->tmp, n_others);
      *ret_got = mount_other (path);
      if (*ret_got == n)
        return (int)n_others - 1;
    }
  return -1;
}

/* What a read of FD (a FUSE connection's descriptor) says: 0 when there is
 * nothing to read (connected), else the errno. */
static int
read_state (int fd)
{
  /* a read must have room for the largest request the kernel may send */
  static char buf[(1 << 20) + 4096];

  for (;;)
    {
      if (read (fd, buf, sizeof buf) >= 0)
        continue; /* FUSE_INIT, which nobody answers */
      return errno == EAGAIN ? 0 : errno;
    }
}

MFX_CASE (test_abort_reaches_only_its_own)
{
  g_autofree char *conn = NULL;
  struct stat st;
  unsigned n, got = 0;
  int taken = -1, r;

  private_fusectl ();
  mfx_mount (fx, policy_text, NULL);
  n = mount_minor (fx->mnt);
  assert_true (n != 0);
  conn = g_strdup_printf (CONNECTIONS "/%u", n);
  if (!g_file_test (conn, G_FILE_TEST_IS_DIR))
    fail_msg ("%s is missing, with fusectl mounted at " CONNECTIONS, conn);

  /* served: the daemon's FUSE threads run, and have their name */
  assert_int_equal (stat (fx->mnt, &st), 0);
  freeze_fuse_threads (fx->daemon);
  /* It unmounts lazily; nothing uses the mount, so the connection ends at
   * once, and its number is free. */
  assert_int_equal (kill (fx->daemon, SIGTERM), 0);
  if (!TEST_WAIT_FOR (!g_file_test (conn, G_FILE_TEST_EXISTS), 10000))
    fail_msg ("%s is still there 10 s after the daemon's SIGTERM: it did not unmount", conn);
  fx->mounted = false;

  /* The next FUSE mount gets the lowest free number: N, unless another
   * mount on the host takes it first, or a lower one is free (then that
   * mount is kept and the next one tried). */
  taken = take_number (fx, n, &got);
  if (taken < 0)
    test_skip_test (false,
                    "another mount on the host took connection number %u first (the last of %u FUSE mounts got %u)", n,
                    n_others, got);
  assert_int_equal (read_state (other_fd[taken]), 0);

  /* A second signal: the daemon aborts at once, as after its grace
   * period (ABORT_GRACE_MS), whose end the wait covers too. */
  assert_int_equal (kill (fx->daemon, SIGTERM), 0);
  if (TEST_WAIT_FOR ((r = read_state (other_fd[taken])) != 0, 4000))
    fail_msg ("the stopping daemon aborted connection %u after its own had ended: the FUSE mount holding that number "
              "now reads %s",
              n, g_strerror (r));
}

/* The unmount watcher of the daemon PID: its child named
 * fusebox-unmount; 0 when there is none. */
static pid_t
find_watcher (pid_t daemon)
{
  g_autoptr (GArray) pids = test_proc_pids ();

  assert_true (pids->len > 0);
  for (guint i = 0; i < pids->len; i++)
    {
      pid_t pid = g_array_index (pids, pid_t, i);
      g_autofree char *path = g_strdup_printf ("/proc/%d/stat", (int)pid);
      g_autofree char *text = test_read_file (path);
      const char *close_paren = text != NULL ? strrchr (text, ')') : NULL;
      int ppid;

      /* "PID (COMM) STATE PPID ..." */
      if (close_paren != NULL && strstr (text, "(fusebox-unmount)") != NULL &&
          sscanf (close_paren + 1, " %*c %d", &ppid) == 1 && ppid == daemon)
        return pid;
    }
  return 0;
}

MFX_CASE (test_watcher_leaves_next_mount)
{
  struct stat st;
  unsigned n, got = 0;
  pid_t watcher = 0;
  int taken = -1;

  private_namespace ();
  mfx_mount (fx, policy_text, NULL);
  assert_int_equal (stat (fx->mnt, &st), 0);
  n = mount_minor (fx->mnt);
  assert_true (n != 0);
  if (!TEST_WAIT_FOR ((watcher = find_watcher (fx->daemon)) > 0, 10000))
    fail_msg ("the daemon %d has no unmount watcher (a child named fusebox-unmount)", (int)fx->daemon);
  assert_int_equal (kill (watcher, SIGSTOP), 0);
  stopped_watcher = watcher;

  /* Unmounted, and the daemon ended: the number is free.  The lower free
   * ones go to mounts of our own, N to the next `fusebox mount` here. */
  mfx_unmount (fx);
  for (guint attempt = 0; attempt < 5 && mount_minor (fx->mnt) != n; attempt++)
    {
      mfx_unmount (fx); /* a mount that missed N (someone took it meanwhile) */
      taken = take_number (fx, n, &got);
      if (taken < 0)
        break;
      assert_int_equal (umount2 (other_path[taken], MNT_DETACH), 0);
      g_clear_pointer (&other_path[taken], g_free);
      mfx_mount (fx, policy_text, NULL);
    }
  if (mount_minor (fx->mnt) != n)
    test_skip_test (false, "other mounts on the host kept taking device number 0:%u first", n);

  /* The first daemon's watcher sees its daemon gone, and a mount at its
   * path with its number: it must know that this one is not its own. */
  assert_int_equal (kill (watcher, SIGCONT), 0);
  stopped_watcher = 0;
  if (!TEST_WAIT_FOR (!test_pid_alive (watcher), 10000))
    fail_msg ("the first daemon's unmount watcher %d did not end", (int)watcher);
  if (!test_is_mounted (fx->mnt) || stat (fx->mnt, &st) < 0)
    fail_msg ("the first daemon's unmount watcher detached the next mount at %s (device 0:%u, the first one's "
              "number)",
              fx->mnt, n);
}

static int
teardown (void **state)
{
  thaw ();
  if (stopped_watcher > 0)
    kill (stopped_watcher, SIGCONT);
  stopped_watcher = 0;
  for (guint i = 0; i < n_others; i++)
    {
      if (other_path[i] != NULL)
        umount2 (other_path[i], MNT_DETACH);
      close (other_fd[i]);
      g_free (other_path[i]);
      other_path[i] = NULL;
    }
  n_others = 0;
  return mfx_teardown (state);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_abort_reaches_only_its_own, mfx_setup, teardown),
    cmocka_unit_test_setup_teardown (test_watcher_leaves_next_mount, mfx_setup, teardown),
  };

  return MFX_MAIN (tests);
}
