/* fusebox — the view's steps on the host: one name below a held
 * descriptor, a node's host object (opened again by name, checked to be
 * the same), its attributes, and creating as the caller.
 *
 * Every host object is reached from a held O_PATH descriptor, one checked
 * name at a time (check_name), never by a host path string; a node that
 * holds no descriptor of its own is found again from its parent's and
 * compared with what it was (st_dev, st_ino, type): ESTALE when the host
 * put another object there.  Directories' descriptors are fs-view-fd.c's.
 */
#include "fs/fs-private.h"

#include <linux/openat2.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* --- one name below a descriptor --------------------------------------------- */

void
proc_fd_path (char buf[static 32], int fd)
{
  g_snprintf (buf, 32, "/proc/self/fd/%d", fd);
}

static int openat2_state; /* 0 unknown, 1 works, -1 ENOSYS */
static int host_open_child_once (int parent_fd, const char *name);

/* One name below PARENT_FD as O_PATH, never following it.  openat2 adds the
 * kernel's own guarantee (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS) on top of the name check; plain openat with
 * O_NOFOLLOW is equivalent for a single checked name, and is the fallback on
 * kernels before 5.6. */
int
host_open_child (int parent_fd, const char *name)
{
  int fd = host_open_child_once (parent_fd, name);

  /* the limit may have been lowered (prlimit) or met by everything else
   * the process holds: the cache gives some back, once */
  if (fd == -EMFILE || fd == -ENFILE)
    {
      view_fd_pressure ();
      fd = host_open_child_once (parent_fd, name);
    }
  return fd;
}

static int
host_open_child_once (int parent_fd, const char *name)
{
  int fd;

  if (g_atomic_int_get (&openat2_state) >= 0)
    {
      struct open_how how = {
        .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
      };
      fd = (int)syscall (SYS_openat2, parent_fd, name, &how, sizeof how);
      if (fd >= 0)
        return fd;
      if (errno != ENOSYS)
        return -errno;
      g_atomic_int_set (&openat2_state, -1);
    }
  fd = openat (parent_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  return fd >= 0 ? fd : -errno;
}

/* --- a host name's attributes ------------------------------------------------ */

/* Filesystems whose stat answers from the kernel's own memory, whatever
 * its flags: one stat is the answer.  Any other (NFS, SMB, FUSE, one not
 * known here) may answer AT_STATX_DONT_SYNC from a cache, and is asked
 * again synchronously. */
static const char *const local_fs_types[] = {
  "autofs",  "bcachefs", "binfmt_misc", "bpf",       "btrfs",   "cgroup", "cgroup2",  "configfs",   "debugfs",
  "devpts",  "devtmpfs", "efivarfs",    "erofs",     "exfat",   "ext2",   "ext3",     "ext4",       "f2fs",
  "fusectl", "hfs",      "hfsplus",     "hugetlbfs", "iso9660", "jfs",    "mqueue",   "msdos",      "nilfs2",
  "nsfs",    "ntfs3",    "overlay",     "proc",      "pstore",  "ramfs",  "reiserfs", "securityfs", "squashfs",
  "sysfs",   "tmpfs",    "tracefs",     "udf",       "vfat",    "xfs",    "zfs",
};

/* What the filesystem of the mount MNT_ID (statx's, as mountinfo numbers
 * it; by DEV when the kernel gives none) asks of a stat.  Read from
 * mountinfo, never from the filesystem: a FUSE filesystem whose server
 * does not answer holds whoever asks it anything (a statfs, a stat that is
 * not from its cache, an open), and a worker that waits on another user's
 * server holds the lookups behind it and the view's end.  So the FUSE
 * filesystems of users other than the daemon's and root (FUSE's owner
 * record, user_id=, written by the kernel or fusermount3, not chosen by
 * the mounter) and fusebox views (the daemon's own stays blank by device:
 * fs-view-lookup.c) are never served.  -EIO when mountinfo can't be read:
 * not a blank that would stay. */
static int
host_fs_of_mount (guint64 mnt_id, dev_t dev)
{
  g_autofree char *text = NULL;
  g_autofree char *want_dev = g_strdup_printf ("%u:%u", major (dev), minor (dev));
  char *line, *next;

  if (!g_file_get_contents ("/proc/self/mountinfo", &text, NULL, NULL))
    return -EIO;
  for (line = text; line != NULL && *line != '\0'; line = next)
    {
      g_auto (GStrv) head = NULL, tail = NULL;
      char *sep;
      guint n;

      next = strchr (line, '\n');
      if (next != NULL)
        *next++ = '\0';
      sep = strstr (line, " - ");
      if (sep == NULL)
        continue;
      *sep = '\0';
      head = g_strsplit (line, " ", 4);
      tail = g_strsplit (sep + 3, " ", 3);
      if (g_strv_length (head) < 3 || g_strv_length (tail) < 3)
        continue;
      if (mnt_id != 0 ? g_ascii_strtoull (head[0], NULL, 10) != mnt_id : strcmp (head[2], want_dev) != 0)
        continue;
      if (strcmp (tail[0], "fuse.fusebox") == 0)
        return HOST_FS_UNSERVED;
      if (strcmp (tail[0], "fuse") == 0 || strcmp (tail[0], "fuseblk") == 0 || g_str_has_prefix (tail[0], "fuse.") ||
          g_str_has_prefix (tail[0], "fuseblk."))
        {
          g_autofree char *own = g_strdup_printf ("user_id=%u", (guint)geteuid ());
          g_auto (GStrv) opts = g_strsplit (tail[2], ",", -1);
          /* the daemon's user's, or root's (the system's: an NTFS disk, a
           * container's /proc, snaps), as any of that user's processes
           * would be held by them */
          bool trusted = g_strv_contains ((const char *const *)opts, own) ||
                         g_strv_contains ((const char *const *)opts, "user_id=0");
          return trusted ? HOST_FS_ASKS : HOST_FS_UNSERVED;
        }
      for (n = 0; n < G_N_ELEMENTS (local_fs_types); n++)
        if (strcmp (tail[0], local_fs_types[n]) == 0)
          return HOST_FS_LOCAL;
      return HOST_FS_ASKS;
    }
  /* gone meanwhile (or a device mountinfo does not show): asked again */
  return HOST_FS_ASKS;
}

/* The attributes of NAME below DIR_FD (FLAGS: 0, or AT_EMPTY_PATH for
 * DIR_FD itself), an object in or just below NEAR (a host directory, or
 * NULL), and what its filesystem asks of a stat.  First from whatever the
 * kernel holds (AT_STATX_DONT_SYNC: a FUSE filesystem is not asked, even
 * one whose server stopped answering); where that is another filesystem
 * than NEAR's, its kind from mountinfo; then, on a filesystem that may
 * answer from a cache, a stat as usual.  Automount points are not
 * triggered, as fstatat() does not. */
static int
host_stat_at (FbViewNode *near, int dir_fd, const char *name, int flags, struct stat *ret_st)
{
  struct statx stx;
  int fs;

  if (statx (dir_fd, name, flags | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC,
             STATX_BASIC_STATS | STATX_MNT_ID, &stx) < 0)
    return -errno;
  memset (ret_st, 0, sizeof *ret_st);
  ret_st->st_dev = makedev (stx.stx_dev_major, stx.stx_dev_minor);
  ret_st->st_ino = stx.stx_ino;
  ret_st->st_mode = stx.stx_mode;
  ret_st->st_nlink = stx.stx_nlink;
  ret_st->st_uid = stx.stx_uid;
  ret_st->st_gid = stx.stx_gid;
  ret_st->st_rdev = makedev (stx.stx_rdev_major, stx.stx_rdev_minor);
  ret_st->st_size = (off_t)stx.stx_size;
  ret_st->st_blksize = (blksize_t)stx.stx_blksize;
  ret_st->st_blocks = (blkcnt_t)stx.stx_blocks;
  ret_st->st_atim = (struct timespec){ stx.stx_atime.tv_sec, stx.stx_atime.tv_nsec };
  ret_st->st_mtim = (struct timespec){ stx.stx_mtime.tv_sec, stx.stx_mtime.tv_nsec };
  ret_st->st_ctim = (struct timespec){ stx.stx_ctime.tv_sec, stx.stx_ctime.tv_nsec };
  if (near != NULL && near->kind == NODE_HOST && ret_st->st_dev == near->dev)
    fs = near->asks ? HOST_FS_ASKS : HOST_FS_LOCAL;
  else
    fs = host_fs_of_mount ((stx.stx_mask & STATX_MNT_ID) ? stx.stx_mnt_id : 0, ret_st->st_dev);
  if (fs == HOST_FS_ASKS && fstatat (dir_fd, name, ret_st, flags | AT_SYMLINK_NOFOLLOW) < 0)
    return -errno;
  return fs;
}

int
host_statat (FbViewNode *dir, int dir_fd, const char *name, struct stat *ret_st)
{
  return host_stat_at (dir, dir_fd, name, 0, ret_st);
}

int
host_stat_fd (FbViewNode *near, int fd, struct stat *ret_st)
{
  return host_stat_at (near, fd, "", AT_EMPTY_PATH, ret_st);
}

bool
host_name_exists (FbViewNode *parent, const char *name)
{
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  struct stat st;
  int pfd;

  if (!node_is_host_dir (parent))
    return false;
  pfd = node_fd_get (parent, &hold);
  return pfd >= 0 && host_statat (parent, pfd, name, &st) >= 0;
}

/* --- a node's host object --------------------------------------------------- */

/* The parent and name of a reopened node, as they are now (a rename
 * through the view moves them). */
static FbViewNode *
node_parent_name (FbViewNode *node, char **ret_name)
{
  FbView *view = node_view (node);
  FbViewNode *parent;

  g_mutex_lock (&view->lock);
  parent = node->parent != NULL ? fb_view_node_ref (node->parent) : NULL;
  *ret_name = g_strdup (node_name (node));
  g_mutex_unlock (&view->lock);
  return parent;
}

static int
same_host_object (FbViewNode *node, const struct stat *st)
{
  if (st->st_ino != node->ino || st->st_dev != node->dev || (st->st_mode & S_IFMT) != node->type)
    return -ESTALE;
  return 0;
}

int
host_identity_fd (int fd, struct stat *ret_st)
{
  struct statx stx;

  if (statx (fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &stx) < 0)
    return -errno;
  memset (ret_st, 0, sizeof *ret_st);
  ret_st->st_dev = makedev (stx.stx_dev_major, stx.stx_dev_minor);
  ret_st->st_ino = stx.stx_ino;
  ret_st->st_mode = stx.stx_mode & S_IFMT;
  return 0;
}

int
node_check_fd (FbViewNode *node, int fd)
{
  struct stat st;
  int r = host_identity_fd (fd, &st);

  return r < 0 ? r : same_host_object (node, &st);
}

/* One fstatat by name from the parent's descriptor: no descriptor opened
 * for a getattr (the common case of a reopened node). */
static int
host_stat_child (FbViewNode *node, struct stat *ret_st)
{
  g_autofree char *name = NULL;
  g_autoptr (FbViewNode) parent = node_parent_name (node, &name);
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  int pfd, r;

  if (parent == NULL || !node_is_host_dir (parent))
    return -ESTALE;
  pfd = node_fd_get (parent, &hold);
  if (pfd < 0)
    return pfd;
  r = host_statat (parent, pfd, name, ret_st);
  if (r < 0)
    return r;
  return same_host_object (node, ret_st);
}

int
node_host_fd (FbViewNode *node, int *tmp)
{
  g_autofree char *name = NULL;
  g_autoptr (FbViewNode) parent = NULL;
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  NodeExtra *x;
  int fd, pfd, r;

  *tmp = -1;
  if (node->evictable)
    {
      /* the caller may keep it past any eviction */
      _fb_cleanup_node_fd_ NodeFd own = NODE_FD_INIT;
      fd = node_fd_get (node, &own);
      if (fd < 0)
        return fd;
      *tmp = fcntl (fd, F_DUPFD_CLOEXEC, 3);
      return *tmp >= 0 ? *tmp : -errno;
    }
  if (!node->reopen)
    return node->host_fd;
  x = node_extra_peek (node);
  if (x != NULL)
    {
      g_mutex_lock (&x->lock);
      if (x->open_files != NULL)
        *tmp = fcntl (x->open_files->fd, F_DUPFD_CLOEXEC, 3);
      g_mutex_unlock (&x->lock);
    }
  if (*tmp >= 0)
    return *tmp;
  parent = node_parent_name (node, &name);
  if (parent == NULL || !node_is_host_dir (parent))
    return -ESTALE;
  pfd = node_fd_get (parent, &hold);
  if (pfd < 0)
    return pfd;
  /* check_name() held when the node was made, and the name is only ever
   * replaced by another checked one (rename) */
  fd = host_open_child (pfd, name);
  if (fd < 0)
    return fd;
  r = node_check_fd (node, fd);
  if (r < 0)
    {
      close (fd);
      return r;
    }
  *tmp = fd;
  return fd;
}

int
node_proc_path (FbViewNode *node, char proc[static 32], int *tmp)
{
  int fd = node_host_fd (node, tmp);

  if (fd < 0)
    return fd == -1 ? -EBADF : fd;
  proc_fd_path (proc, fd);
  return 0;
}

int
node_stat (FbView *view, FbViewNode *node, struct stat *ret_st)
{
  if (node->reopen)
    {
      NodeExtra *x = node_extra_peek (node);
      int r = 1;
      if (x != NULL)
        {
          g_mutex_lock (&x->lock);
          if (x->open_files != NULL)
            r = fstat (x->open_files->fd, ret_st) < 0 ? -errno : 0;
          g_mutex_unlock (&x->lock);
        }
      return r <= 0 ? r : host_stat_child (node, ret_st);
    }
  if (node->kind == NODE_HOST)
    {
      _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
      int fd = node_fd_get (node, &hold);
      if (fd < 0)
        return fd;
      if (fstatat (fd, "", ret_st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
      return 0;
    }
  memset (ret_st, 0, sizeof *ret_st);
  ret_st->st_mode = S_IFDIR | 0555;
  ret_st->st_nlink = 2;
  ret_st->st_ino = node->ino;
  ret_st->st_blksize = 4096;
  ret_st->st_atim = ret_st->st_mtim = ret_st->st_ctim = view->started;
  return 0;
}

int
node_reopen (FbViewNode *node, int flags)
{
  _fb_cleanup_fd_ int tmp = -1;
  char proc[32];
  int fd;

  fd = node_proc_path (node, proc, &tmp);
  if (fd < 0)
    return fd;
  fd = open (proc, flags);
  return fd >= 0 ? fd : -errno;
}

/* --- acting as the caller ----------------------------------------------------- */

void
creds_enter (FbView *view, const FbViewCaller *caller, CallerCreds *saved)
{
  memset (saved, 0, sizeof *saved);
  if (!view->options.act_as_caller || caller == NULL || (caller->uid == 0 && caller->gid == 0))
    return;
  /* setfsuid/setfsgid are per thread (the raw syscalls, unlike setuid in
   * glibc): only this FUSE worker creates as the caller, and only until
   * creds_leave.  Group first: after the uid switch we may lack the right. */
  saved->old_gid = (gid_t)setfsgid (caller->gid);
  saved->old_uid = (uid_t)setfsuid (caller->uid);
  saved->switched = true;
}

void
creds_leave (CallerCreds *saved)
{
  if (!saved->switched)
    return;
  setfsuid (saved->old_uid);
  setfsgid (saved->old_gid);
  saved->switched = false;
}
