/* fusebox — the sandbox's mount plan.
 *
 * Runs in the cloned child, inside its new user and mount namespaces, with
 * every capability of the new user namespace and none on the host.
 *
 * Invariants:
 *  - Nothing is created on the host.  The only directories and files this
 *    code makes live in a tmpfs mounted inside the namespace: the staging
 *    tmpfs (which holds the mount point of the new root) and /dev's tmpfs.
 *    The mount points /proc and /dev must already exist in the root; a root
 *    without them fails with a message instead of growing them.
 *  - Every mount is a slave of the host's (MS_SLAVE|MS_REC first), so
 *    nothing mounted here propagates back to the host.
 *  - Host objects (the root directory, the device nodes) are copied as
 *    detached mounts (open_tree) before the staging tmpfs is mounted, and
 *    attached by fd (move_mount): the staging mount may cover their paths,
 *    is not part of a root of "/", and nothing is resolved twice.
 *  - The FUSE root: the outer child opens /dev/fuse itself (the kernel wants
 *    the fd's opener in the mounter's user namespace), before it takes its
 *    unprivileged ids (a 0600 root device would refuse them), mounts it —
 *    the mount returns at once, INIT is answered later — and sends the fd to
 *    the supervisor with the ROOT_MOUNTED record, before any lookup in the
 *    view, which would block until the supervisor serves the fd.  pid 1 does
 *    the rest (a procfs belongs to its mounter's pid namespace).
 *  - Host objects reachable inside can't be changed through their mounts:
 *    the device nodes are read-only, nosuid, noexec binds (a node's mode,
 *    owner, times and xattrs are the host's inode's; writes to the device
 *    itself need no writable mount), and the fresh procfs gets bubblewrap's
 *    read-only covers over its host-wide knobs (proc_covers below).
 *  - pivot_root(".", ".") stacks the old root on the new one, and
 *    umount2(".", MNT_DETACH) drops it (with the staging tmpfs): no
 *    "oldroot" directory is needed anywhere.
 *
 * Everything in the apply functions is async-signal-safe: the paths and
 * option strings are built by fb_launcher_mounts_new() in the parent.
 */
#include "launcher/launcher.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The device nodes of the sandbox's /dev, bound from the host's. */
static const struct
{
  const char *name;
  bool optional; /* containers may lack /dev/tty */
} devices[] = {
  { "null", false }, { "zero", false }, { "full", false }, { "random", false }, { "urandom", false }, { "tty", true },
};
#define N_DEVICES G_N_ELEMENTS (devices)

static const struct
{
  const char *name;
  const char *target;
} dev_links[] = {
  { "ptmx", "pts/ptmx" },    /* the private devpts instance's multiplexer */
  { "fd", "/proc/self/fd" }, /* bash process substitution, /dev/fd/N arguments */
  { "stdin", "/proc/self/fd/0" }, { "stdout", "/proc/self/fd/1" }, { "stderr", "/proc/self/fd/2" },
};

/* Entries of the fresh procfs bound read-only over themselves (where the
 * kernel has them), as bubblewrap's --proc does for the first four: each
 * holds files that write host-wide state and that the kernel guards only
 * by their owner, the host's root — sysctls (kernel.core_pattern,
 * kernel.modprobe: a program the kernel runs as root), the SysRq trigger,
 * IRQ affinities, PCI configuration space, filesystem and ACPI knobs,
 * latency statistics.  No sandboxed process is the host's root (the
 * identity step of launcher-ns.c); these covers are the second wall, and
 * also hold the sandbox's own network sysctls, which its uid 0 owns.
 * /proc/pressure stays writable: PSI triggers are for unprivileged
 * monitors and change nothing.  Covering makes the procfs not "fully
 * visible" for another user namespace, which the seccomp filter forbids
 * anyway. */
static const char *const proc_covers[] = {
  "sys", "sysrq-trigger", "irq", "bus", "fs", "acpi", "scsi", "asound", "latency_stats", "timer_stats", "mtrr",
};
#define N_PROC_COVERS G_N_ELEMENTS (proc_covers)

/* Where the staging tmpfs may go: any existing directory works (the mount
 * exists only inside the namespace); the first found is used. */
static const char *const staging_candidates[] = { "/tmp", "/run", "/mnt", "/var/tmp", "/dev" };

struct FbLauncherMounts
{
  FbLauncherRootKind kind;
  char *root_dir;    /* ROOT_HOST_DIR */
  char *fuse_device; /* ROOT_FUSE */
  char *staging;
  char *root;              /* staging + "/root": the new root's mount point */
  char *fuse_options_tail; /* everything after "fd=N," */
  char *proc;
  char *proc_cover_paths[N_PROC_COVERS];
  char *dev;
  char *pts;
  char *shm;
  char *host_devices[N_DEVICES];
  char *dev_files[N_DEVICES];
  char *dev_link_paths[G_N_ELEMENTS (dev_links)];

  /* the child's own copy only: what open_fuse and apply_root opened */
  int fuse_fd;
  int dev_trees[N_DEVICES];
  char fuse_options[256];
};

const char *
fb_launcher_mounts_device_name (int detail)
{
  static const char *const names[] = {
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"
  };
  G_STATIC_ASSERT (G_N_ELEMENTS (names) == N_DEVICES);
  if (detail < 0 || (size_t)detail >= N_DEVICES)
    return NULL;
  return names[detail];
}

const char *
fb_launcher_mounts_proc_cover_name (int detail)
{
  if (detail < 0 || (size_t)detail >= N_PROC_COVERS)
    return NULL;
  return proc_covers[detail];
}

int
fb_launcher_mounts_new (const FbLauncherPlan *plan, guint32 uid, guint32 gid, FbLauncherMounts **ret_mounts)
{
  const char *staging = NULL;

  if (plan->root_kind == FB_LAUNCHER_ROOT_HOST_DIR && (!plan->root_dir || plan->root_dir[0] != '/'))
    return -EINVAL;
  if (plan->root_kind == FB_LAUNCHER_ROOT_FUSE && plan->fuse_device && plan->fuse_device[0] != '/')
    return -EINVAL;

  for (size_t i = 0; i < G_N_ELEMENTS (staging_candidates) && !staging; i++)
    {
      struct stat st;
      if (stat (staging_candidates[i], &st) == 0 && S_ISDIR (st.st_mode))
        staging = staging_candidates[i];
    }
  if (!staging)
    return -ENOENT;

  FbLauncherMounts *m = g_new0 (FbLauncherMounts, 1);
  m->kind = plan->root_kind;
  m->root_dir = g_strdup (plan->root_dir);
  m->fuse_device = g_strdup (plan->fuse_device ? plan->fuse_device : "/dev/fuse");
  m->staging = g_strdup (staging);
  m->root = g_strconcat (staging, "/root", NULL);
  /* user_id/group_id are read in the mounter's user namespace: the ids
   * inside.  default_permissions: the kernel checks modes, so the view need
   * not; allow_other: every process of the sandbox may use the mount, not
   * only the mounter (it is limited to this user namespace anyway). */
  m->fuse_options_tail =
    g_strdup_printf ("rootmode=40000,user_id=%u,group_id=%u,default_permissions,allow_other", uid, gid);
  m->proc = g_strconcat (m->root, "/proc", NULL);
  for (size_t i = 0; i < N_PROC_COVERS; i++)
    m->proc_cover_paths[i] = g_strconcat (m->proc, "/", proc_covers[i], NULL);
  m->fuse_fd = -1;
  m->dev = g_strconcat (m->root, "/dev", NULL);
  m->pts = g_strconcat (m->dev, "/pts", NULL);
  m->shm = g_strconcat (m->dev, "/shm", NULL);
  for (size_t i = 0; i < N_DEVICES; i++)
    {
      m->host_devices[i] = g_strconcat ("/dev/", devices[i].name, NULL);
      m->dev_files[i] = g_strconcat (m->dev, "/", devices[i].name, NULL);
      m->dev_trees[i] = -1;
    }
  for (size_t i = 0; i < G_N_ELEMENTS (dev_links); i++)
    m->dev_link_paths[i] = g_strconcat (m->dev, "/", dev_links[i].name, NULL);
  *ret_mounts = m;
  return 0;
}

void
fb_launcher_mounts_free (FbLauncherMounts *m)
{
  if (!m)
    return;
  g_free (m->root_dir);
  g_free (m->fuse_device);
  g_free (m->staging);
  g_free (m->root);
  g_free (m->fuse_options_tail);
  g_free (m->proc);
  for (size_t i = 0; i < N_PROC_COVERS; i++)
    g_free (m->proc_cover_paths[i]);
  g_free (m->dev);
  g_free (m->pts);
  g_free (m->shm);
  for (size_t i = 0; i < N_DEVICES; i++)
    {
      g_free (m->host_devices[i]);
      g_free (m->dev_files[i]);
    }
  for (size_t i = 0; i < G_N_ELEMENTS (dev_links); i++)
    g_free (m->dev_link_paths[i]);
  g_free (m);
}

static int
fail (FbLauncherFailure *ret_failure, FbLauncherStep step, int error, int detail)
{
  ret_failure->step = step;
  ret_failure->error = error;
  ret_failure->detail = detail;
  return -error;
}

static void
close_all (int *fds, size_t n)
{
  for (size_t i = 0; i < n; i++)
    fb_fd_close (&fds[i]);
}

/* A detached copy of the mount at PATH (a file or a directory), taken now:
 * mounts made later on the original (the staging tmpfs) are not in it. */
static int
clone_tree (const char *path, bool recursive)
{
  _fb_cleanup_fd_ int fd = open (path, O_PATH | O_CLOEXEC | (recursive ? O_DIRECTORY : 0));
  if (fd < 0)
    return -errno;
  int tree = open_tree (fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0));
  return tree < 0 ? -errno : tree;
}

static int
attach_tree (int tree, const char *target)
{
  if (move_mount (tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return -errno;
  return 0;
}

static int
make_file (const char *path)
{
  _fb_cleanup_fd_ int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
  return fd < 0 ? -errno : 0;
}

/* "fd=N," + tail into buf, without stdio (async-signal-safe). */
static bool
format_fuse_options (char *buf, size_t size, int fd, const char *tail)
{
  char digits[16];
  size_t nd = 0, pos = 0;
  unsigned v = (unsigned)fd;
  do
    digits[nd++] = (char)('0' + v % 10);
  while ((v /= 10) && nd < sizeof digits);
  size_t tail_len = strlen (tail);
  if (3 + nd + 1 + tail_len + 1 > size)
    return false;
  memcpy (buf + pos, "fd=", 3);
  pos += 3;
  while (nd)
    buf[pos++] = digits[--nd];
  buf[pos++] = ',';
  memcpy (buf + pos, tail, tail_len + 1);
  return true;
}

int
fb_launcher_mounts_open_fuse (FbLauncherMounts *m, FbLauncherFailure *ret_failure)
{
  if (m->kind != FB_LAUNCHER_ROOT_FUSE)
    return 0;
  /* Here, inside the user namespace: fuse_get_tree() accepts only an fd
   * whose opener lives in the mounter's user namespace. */
  m->fuse_fd = open (m->fuse_device, O_RDWR | O_CLOEXEC);
  if (m->fuse_fd < 0)
    return fail (ret_failure, FB_LAUNCHER_STEP_OPEN_FUSE, errno, 0);
  return 0;
}

/* The device nodes: a bind shares the host's inode, so a writable bind
 * would let chmod, chown, utimes and setxattr inside change the host's
 * node (seen: `chmod 0600 /dev/full` inside did).  Read-only, nosuid and
 * noexec on the detached copy, before anyone can see it: writing to the
 * device itself never needs a writable mount (do_dentry_open() skips
 * mnt_want_write for special files), changing the inode does. */
static int
open_devices (FbLauncherMounts *m, FbLauncherFailure *ret_failure)
{
  struct mount_attr dev_attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC };

  for (size_t i = 0; i < N_DEVICES; i++)
    {
      int tree = clone_tree (m->host_devices[i], false);
      if (tree < 0)
        {
          if (devices[i].optional && (tree == -ENOENT || tree == -ENXIO))
            continue;
          return fail (ret_failure, FB_LAUNCHER_STEP_OPEN_DEVICE, -tree, (int)i);
        }
      m->dev_trees[i] = tree;
      if (mount_setattr (tree, "", AT_EMPTY_PATH, &dev_attr, sizeof dev_attr) < 0)
        return fail (ret_failure, FB_LAUNCHER_STEP_OPEN_DEVICE, errno, (int)i);
    }
  return 0;
}

const char *
fb_launcher_mounts_get_root (const FbLauncherMounts *m)
{
  return m->root;
}

int
fb_launcher_mounts_apply_joined (FbLauncherMounts *m, FbLauncherFailure *ret_failure)
{
  int r = 0;

  /* as apply_root: nothing of ours propagates anywhere */
  if (mount (NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
    r = fail (ret_failure, FB_LAUNCHER_STEP_MOUNT_SLAVE, errno, 0);
  if (r == 0)
    r = open_devices (m, ret_failure);
  /* The view's mount came with the copy of the keeper's namespace, locked
   * to its place as every mount a less privileged user namespace's copy
   * holds (fs/namespace.c, lock_mnt_tree), and pivot_root refuses a locked
   * new root: bound over itself, it is a mount of our own. */
  if (r == 0 && mount (m->root, m->root, NULL, MS_BIND | MS_REC, NULL) < 0)
    r = fail (ret_failure, FB_LAUNCHER_STEP_JOIN_VIEW, errno, 0);
  if (r < 0)
    close_all (m->dev_trees, N_DEVICES);
  return r;
}

int
fb_launcher_mounts_apply_root (FbLauncherMounts *m, int status_fd, FbLauncherFailure *ret_failure)
{
  int root_tree = -1;
  int fuse_fd = m->fuse_fd;
  int r;

  m->fuse_fd = -1; /* ours to close from here on */

  /* Mount events must not propagate to the host (shared mounts of systemd
   * hosts would otherwise receive our /proc, tmpfs...).  Slave rather than
   * private: a host unmount still reaches the sandbox's copy. */
  if (mount (NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
    {
      r = fail (ret_failure, FB_LAUNCHER_STEP_MOUNT_SLAVE, errno, 0);
      goto out;
    }

  /* Host objects first, as detached copies, resolved in this mount namespace
   * (open_tree refuses mounts of another namespace, so the parent can't do
   * it) and before the staging tmpfs exists: a root of "/" must not contain
   * the staging mount. */
  if (m->kind == FB_LAUNCHER_ROOT_HOST_DIR)
    {
      /* The whole tree below the directory, so a host "/" keeps its /usr,
       * /home mounts; read-only, nosuid and nodev recursively in one call on
       * the detached copy, before anything can see it writable. */
      root_tree = clone_tree (m->root_dir, true);
      if (root_tree < 0)
        {
          r = fail (ret_failure,
                    root_tree == -ENOENT || root_tree == -ENOTDIR || root_tree == -EACCES ? FB_LAUNCHER_STEP_OPEN_ROOT
                                                                                          : FB_LAUNCHER_STEP_MOUNT_ROOT,
                    -root_tree, 0);
          root_tree = -1;
          goto out;
        }
      struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
      if (mount_setattr (root_tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
        {
          r = fail (ret_failure, FB_LAUNCHER_STEP_ROOT_READONLY, errno, 0);
          goto out;
        }
    }
  else if (fuse_fd < 0 || !format_fuse_options (m->fuse_options, sizeof m->fuse_options, fuse_fd, m->fuse_options_tail))
    {
      /* fb_launcher_mounts_open_fuse() came first, or this is a bug */
      r = fail (ret_failure, FB_LAUNCHER_STEP_MOUNT_ROOT, fuse_fd < 0 ? EBADF : ENAMETOOLONG, 0);
      goto out;
    }
  if ((r = open_devices (m, ret_failure)) < 0)
    goto out;

  if (mount ("tmpfs", m->staging, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64") < 0)
    {
      r = fail (ret_failure, FB_LAUNCHER_STEP_STAGING, errno, 0);
      goto out;
    }
  if (mkdir (m->root, 0755) < 0)
    {
      r = fail (ret_failure, FB_LAUNCHER_STEP_STAGING, errno, 0);
      goto out;
    }

  if (m->kind == FB_LAUNCHER_ROOT_FUSE)
    {
      /* Returns at once: FUSE_INIT is queued for the server, and nothing
       * here waits for its answer. */
      if (mount ("fuse", m->root, "fuse", MS_NOSUID | MS_NODEV, m->fuse_options) < 0)
        {
          r = fail (ret_failure, FB_LAUNCHER_STEP_MOUNT_ROOT, errno, 0);
          goto out;
        }
      /* The sync point, with the connection for the supervisor to serve. */
      if ((r = fb_launcher_report_fd (status_fd, FB_LAUNCHER_STEP_ROOT_MOUNTED, fuse_fd)) < 0)
        {
          r = fail (ret_failure, FB_LAUNCHER_STEP_SEND_FUSE_FD, -r, 0);
          goto out;
        }
      /* Our copy would keep the connection alive if the supervisor died,
       * leaving the sandbox's lookups hanging instead of failing. */
      fb_fd_close (&fuse_fd);
    }
  else
    {
      if ((r = attach_tree (root_tree, m->root)) < 0)
        {
          r = fail (ret_failure, FB_LAUNCHER_STEP_MOUNT_ROOT, -r, 0);
          goto out;
        }
      fb_launcher_report (status_fd, FB_LAUNCHER_STEP_ROOT_MOUNTED, 0, 0);
    }
  r = 0;

out:
  fb_fd_close (&root_tree);
  fb_fd_close (&fuse_fd);
  if (r < 0)
    close_all (m->dev_trees, N_DEVICES);
  return r;
}

int
fb_launcher_mounts_apply_rest (FbLauncherMounts *m, const FbLauncherLimits *limits, FbLauncherFailure *ret_failure)
{
  int r;

  /* From here on, paths below m->root are looked up in the view. */

  /* A procfs of the new pid namespace (the mounter's): only the sandbox's
   * processes.  The kernel allows it in a user namespace only while an
   * unmasked procfs is visible in this mount namespace (the host's, still
   * there until the pivot): fs/namespace.c, mount_too_revealing().
   *
   * Where none is (bubblewrap run as root with uid 0 inside covers
   * /proc/irq and /proc/bus; docker masks /proc/kcore...; every inherited
   * mount is locked in our user namespace, so we can't uncover them), we
   * fail with EPERM on purpose instead of falling back:
   *  - binding the visible procfs would show another pid namespace, the
   *    supervisor included, and /proc/PID/root of a same-uid, dumpable
   *    process passes ptrace_may_access(): a way out of the view;
   *  - "subset=pid" is refused the same way (checked on Linux 6.18: the
   *    proposed exemption for pid-only procfs is not in it), and a
   *    fallback we can't exercise would be untested code in the launcher;
   *  - no /proc at all breaks /dev/fd, /proc/self and the tools using them.
   * `fusebox check` names the covering mounts and the bwrap invocations that
   * work (launcher-check.c); test-run-nested runs them. */
  if (mount ("proc", m->proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    {
      r = fail (ret_failure, FB_LAUNCHER_STEP_MOUNT_PROC, errno, 0);
      goto out;
    }
  /* The namespace's own limits of per-user kernel objects, while this
   * procfs's /proc/sys is writable (the inherited one may not be). */
  if (limits)
    {
      _fb_cleanup_fd_ int proc_fd = open (m->proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (proc_fd < 0)
        {
          r = fail (ret_failure, FB_LAUNCHER_STEP_LIMITS, errno, 0);
          goto out;
        }
      r = fb_launcher_limits_apply (limits, proc_fd, ret_failure);
      if (r < 0)
        goto out;
    }
  /* Its host-wide knobs read-only (proc_covers above): each a detached
   * copy made read-only before it is attached over itself. */
  struct mount_attr ro_attr = { .attr_set =
                                  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC };
  for (size_t i = 0; i < N_PROC_COVERS; i++)
    {
      int e = 0;
      _fb_cleanup_fd_ int tree =
        open_tree (AT_FDCWD, m->proc_cover_paths[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
      if (tree < 0 && errno == ENOENT)
        continue; /* not in this kernel */
      if (tree < 0)
        e = errno;
      else if (mount_setattr (tree, "", AT_EMPTY_PATH, &ro_attr, sizeof ro_attr) < 0)
        e = errno;
      else if ((r = attach_tree (tree, m->proc_cover_paths[i])) < 0)
        e = -r;
      if (e)
        {
          r = fail (ret_failure, FB_LAUNCHER_STEP_PROC_COVER, e, (int)i);
          goto out;
        }
    }
  /* A minimal /dev: a tmpfs with the harmless nodes bound from the host
   * (mknod is not allowed in a user namespace, and binds keep the nodes'
   * host mount, so they work). */
  if (mount ("tmpfs", m->dev, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64") < 0)
    {
      r = fail (ret_failure, FB_LAUNCHER_STEP_MOUNT_DEV, errno, 0);
      goto out;
    }
  for (size_t i = 0; i < N_DEVICES; i++)
    {
      if (m->dev_trees[i] < 0)
        continue; /* optional and absent */
      if ((r = make_file (m->dev_files[i])) < 0 || (r = attach_tree (m->dev_trees[i], m->dev_files[i])) < 0)
        {
          r = fail (ret_failure, FB_LAUNCHER_STEP_BIND_DEVICE, -r, (int)i);
          goto out;
        }
      fb_fd_close (&m->dev_trees[i]);
    }

  /* A private devpts instance: ptys of the sandbox only, none of the host's. */
  if (mkdir (m->pts, 0755) < 0 ||
      mount ("devpts", m->pts, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620") < 0)
    {
      r = fail (ret_failure, FB_LAUNCHER_STEP_MOUNT_DEVPTS, errno, 0);
      goto out;
    }
  for (size_t i = 0; i < G_N_ELEMENTS (dev_links); i++)
    if (symlink (dev_links[i].target, m->dev_link_paths[i]) < 0)
      {
        r = fail (ret_failure, FB_LAUNCHER_STEP_DEV_LINK, errno, (int)i);
        goto out;
      }

  /* A private /dev/shm: POSIX shared memory of the host stays invisible. */
  if (mkdir (m->shm, 01777) < 0 || mount ("tmpfs", m->shm, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0)
    {
      r = fail (ret_failure, FB_LAUNCHER_STEP_MOUNT_SHM, errno, 0);
      goto out;
    }

  /* /dev itself read-only: the sandbox can't plant files or links there. */
  if (mount (NULL, m->dev, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    {
      r = fail (ret_failure, FB_LAUNCHER_STEP_DEV_READONLY, errno, 0);
      goto out;
    }

  if (chdir (m->root) < 0 || syscall (__NR_pivot_root, ".", ".") < 0)
    {
      r = fail (ret_failure, FB_LAUNCHER_STEP_PIVOT_ROOT, errno, 0);
      goto out;
    }
  /* The old root now sits on top of the new one at "/": detach it, and the
   * host's tree (staging tmpfs included) is gone from this namespace. */
  if (umount2 (".", MNT_DETACH) < 0)
    {
      r = fail (ret_failure, FB_LAUNCHER_STEP_DETACH_OLD_ROOT, errno, 0);
      goto out;
    }
  if (chdir ("/") < 0)
    {
      r = fail (ret_failure, FB_LAUNCHER_STEP_DETACH_OLD_ROOT, errno, 0);
      goto out;
    }
  r = 0;

out:
  close_all (m->dev_trees, N_DEVICES);
  return r;
}
