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

#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
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

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x4000U /* Linux 6.8 */
#endif

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

/* What a mount of filesystem type TYPE ("fuse.SUBTYPE" as mountinfo spells
 * it) and superblock options OPTS (comma-separated) asks of a stat. */
static int
mount_kind (const char *type, const char *opts)
{
  if (strcmp (type, "fuse.fusebox") == 0)
    return HOST_FS_UNSERVED;
  if (strcmp (type, "fuse") == 0 || strcmp (type, "fuseblk") == 0 || g_str_has_prefix (type, "fuse.") ||
      g_str_has_prefix (type, "fuseblk."))
    /* the daemon's user's, or root's (the system's: an NTFS disk, a
     * container's /proc, snaps), as any of that user's processes would be
     * held by them */
    return fb_fuse_opts_trusted (opts) ? HOST_FS_ASKS : HOST_FS_UNSERVED;
  for (guint n = 0; n < G_N_ELEMENTS (local_fs_types); n++)
    if (strcmp (type, local_fs_types[n]) == 0)
      return HOST_FS_LOCAL;
  return HOST_FS_ASKS;
}

/* What one mountinfo line's mount asks of a stat: a HostFs, and its mount
 * id and device. */
static int
mount_kind_of_line (char *line, guint64 *ret_id, dev_t *ret_dev)
{
  g_auto (GStrv) head = NULL, tail = NULL;
  guint maj, min;
  char *sep = strstr (line, " - ");

  if (sep == NULL)
    return -EINVAL;
  *sep = '\0';
  head = g_strsplit (line, " ", 4);
  tail = g_strsplit (sep + 3, " ", 3);
  if (g_strv_length (head) < 3 || g_strv_length (tail) < 3 || sscanf (head[2], "%u:%u", &maj, &min) != 2)
    return -EINVAL;
  *ret_id = g_ascii_strtoull (head[0], NULL, 10);
  *ret_dev = makedev (maj, min);
  return mount_kind (tail[0], tail[2]);
}

typedef struct
{
  guint64 id;
  dev_t dev;
  int fs;
} MountKind;

/* The mount table as last read: mountinfo is read again only when poll
 * says the table changed since (POLLPRI), so a crossing costs a search,
 * not a read of the whole table however many mounts the host has; and a
 * mount id (or device) the kernel gave again to a new mount is never
 * taken for the one it was. */
static struct
{
  GMutex lock;
  int fd;
  GArray *kinds;
} mounts = { .fd = -1 };

static guint table_reads;

guint
host_fs_table_reads (void)
{
  return g_atomic_int_get (&table_reads);
}

static bool
mounts_read (void)
{
  g_autoptr (GString) text = g_string_sized_new (64 * 1024);
  g_autoptr (GArray) kinds = g_array_new (FALSE, FALSE, sizeof (MountKind));
  char *line, *next;
  ssize_t n;

  g_atomic_int_inc (&table_reads);
  if (lseek (mounts.fd, 0, SEEK_SET) < 0)
    return false;
  for (;;)
    {
      gsize have = text->len;

      g_string_set_size (text, have + 64 * 1024);
      n = read (mounts.fd, text->str + have, 64 * 1024);
      if (n < 0 && errno == EINTR)
        n = 0;
      if (n < 0)
        return false;
      g_string_set_size (text, have + (gsize)n);
      if (n == 0)
        break;
    }
  for (line = text->str; line != NULL && *line != '\0'; line = next)
    {
      MountKind k;

      next = strchr (line, '\n');
      if (next != NULL)
        *next++ = '\0';
      k.fs = mount_kind_of_line (line, &k.id, &k.dev);
      if (k.fs >= 0)
        g_array_append_val (kinds, k);
    }
  g_clear_pointer (&mounts.kinds, g_array_unref);
  mounts.kinds = g_steal_pointer (&kinds);
  return true;
}

/* With mounts.lock held: the table as it is now, or as it was at the last
 * change before now. */
static bool
mounts_current (void)
{
  struct pollfd p = { .events = POLLPRI };

  if (mounts.fd < 0)
    {
      mounts.fd = open ("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
      if (mounts.fd < 0)
        return false;
      g_clear_pointer (&mounts.kinds, g_array_unref);
    }
  p.fd = mounts.fd;
  /* poll first, then read: a change made during the read is told by the
   * next poll */
  if (poll (&p, 1, 0) < 0 || (p.revents & (POLLERR | POLLPRI)) != 0)
    g_clear_pointer (&mounts.kinds, g_array_unref);
  return mounts.kinds != NULL || mounts_read ();
}

/* The kind of the mount OLD_ID (mountinfo's numbering; by DEV when 0). */
static int
mount_kind_from_table (guint64 old_id, dev_t dev)
{
  int fs = -EIO;

  g_mutex_lock (&mounts.lock);
  if (mounts_current ())
    for (guint i = 0; i < mounts.kinds->len; i++)
      {
        const MountKind *k = &g_array_index (mounts.kinds, MountKind, i);

        if (old_id != 0 ? k->id == old_id : k->dev == dev)
          {
            fs = k->fs;
            break;
          }
      }
  g_mutex_unlock (&mounts.lock);
  return fs;
}

/* statmount(2) (Linux 6.8): one mount's facts by its unique id, never given
 * again to another mount.  The part of struct statmount read here (its
 * strings start 512 bytes in), and of struct mnt_id_req. */
#define SYS_statmount_nr 457
#define SM_MNT_BASIC 0x2U
#define SM_FS_TYPE 0x20U
#define SM_MNT_OPTS 0x80U    /* Linux 6.11 */
#define SM_FS_SUBTYPE 0x100U /* Linux 6.13 */
typedef struct
{
  guint32 size, mnt_opts;
  guint64 mask;
  guint32 sb_dev_major, sb_dev_minor;
  guint64 sb_magic;
  guint32 sb_flags, fs_type;
  guint64 mnt_id, mnt_parent_id;
  guint32 mnt_id_old, mnt_parent_id_old;
  guint64 mnt_attr, mnt_propagation, mnt_peer_group, mnt_master, propagate_from;
  guint32 mnt_root, mnt_point;
  guint64 mnt_ns_id;
  guint32 fs_subtype, sb_source;
  guint8 rest[512 - 128];
} HostStatmount;
G_STATIC_ASSERT (sizeof (HostStatmount) == 512);
typedef struct
{
  guint32 size, spare;
  guint64 mnt_id, param;
} HostMntIdReq;

static gint use_statmount = 1;

void
host_fs_use_statmount (bool use)
{
  g_atomic_int_set (&use_statmount, use);
}

/* Does statmount tell a mount's subtype, when it has one (Linux 6.13)? */
static bool
kernel_tells_subtypes (void)
{
  static gint known; /* 0 not yet, 1 yes, 2 no */

  if (g_atomic_int_get (&known) == 0)
    {
      struct utsname u;
      guint major = 0, minor = 0;
      bool yes = uname (&u) == 0 && sscanf (u.release, "%u.%u", &major, &minor) == 2 &&
                 (major > 6 || (major == 6 && minor >= 13));

      g_atomic_int_set (&known, yes ? 1 : 2);
    }
  return g_atomic_int_get (&known) == 1;
}

/* The kind of the mount UNIQUE_ID from statmount: a HostFs; -EIO when this
 * namespace has no such mount; -ENOSYS when the kernel can't tell (before
 * 6.11 a FUSE mount's options, before 6.13 its subtype: a trusted one's may
 * be another view's), with mountinfo's id for it in RET_OLD_ID if known. */
static int
mount_kind_from_statmount (guint64 unique_id, guint64 *ret_old_id)
{
  HostMntIdReq req = { .size = 24,
                       .mnt_id = unique_id,
                       .param = SM_MNT_BASIC | SM_FS_TYPE | SM_MNT_OPTS | SM_FS_SUBTYPE };
  g_autofree HostStatmount *sm = NULL;
  g_autofree char *type = NULL;
  gsize size = 4096;
  const char *opts;
  int fs;

  *ret_old_id = 0;
  for (;;)
    {
      sm = g_realloc (sm, size);
      if (syscall (SYS_statmount_nr, &req, sm, size, 0) == 0)
        break;
      if (errno == EOVERFLOW && size < 1024 * 1024)
        size *= 4;
      else
        return errno == ENOENT ? -EIO : -ENOSYS;
    }
  if (sm->mask & SM_MNT_BASIC)
    *ret_old_id = sm->mnt_id_old;
  if (!(sm->mask & SM_FS_TYPE) || sm->size > size || sm->fs_type >= size - sizeof *sm)
    return -ENOSYS;
  type = g_strdup ((const char *)sm + sizeof *sm + sm->fs_type);
  if (strcmp (type, "fuse") != 0 && strcmp (type, "fuseblk") != 0)
    return mount_kind (type, "");
  if (!(sm->mask & SM_MNT_OPTS) || sm->mnt_opts >= size - sizeof *sm)
    return -ENOSYS;
  opts = (const char *)sm + sizeof *sm + sm->mnt_opts;
  /* another user's: not served, whatever its subtype */
  fs = mount_kind (type, opts);
  if (fs == HOST_FS_UNSERVED)
    return fs;
  /* a trusted one is another fusebox view by its subtype: none when the
   * kernel tells subtypes and gave none */
  if (!(sm->mask & SM_FS_SUBTYPE))
    return kernel_tells_subtypes () ? fs : -ENOSYS;
  if (sm->fs_subtype >= size - sizeof *sm)
    return -ENOSYS;
  {
    const char *sub = (const char *)sm + sizeof *sm + sm->fs_subtype;
    g_autofree char *full = g_strdup_printf ("%s.%s", type, sub);

    return mount_kind (*sub != '\0' ? full : type, opts);
  }
}

/* Kinds found by statmount, by unique id: never stale (no other mount
 * takes the id), dropped all at once past a bound. */
static struct
{
  GMutex lock;
  GHashTable *kinds; /* guint64 * -> HostFs */
} by_unique;

#define BY_UNIQUE_MAX 4096

/* What the filesystem of the mount MNT_ID (statx's: its unique id when
 * UNIQUE, else mountinfo's number; by DEV when 0) asks of a stat.  Never
 * from the filesystem: a FUSE filesystem whose server does not answer
 * holds whoever asks it anything (a statfs, a stat that is not from its
 * cache, an open), and a worker that waits on another user's server holds
 * the lookups behind it and the view's end.  So the FUSE filesystems of
 * users other than the daemon's and root (FUSE's owner record, user_id=,
 * written by the kernel or fusermount3, not chosen by the mounter) and
 * fusebox views (the daemon's own stays blank by device: fs-view-lookup.c)
 * are never served.  From statmount by the unique id where the kernel has
 * it (a search of a small table after the first time, whatever the host's
 * mount table and its changes); else from mountinfo, kept and read again
 * when poll says the table changed, so that an id the kernel gives again
 * is never taken for the mount it was.  The caller stat'ed the object
 * first: the mount it found is in the table read since.  -EIO when
 * mountinfo can't be read, or no such mount is there (taken off since, or
 * before, and held open): not asked, and not a blank that would stay. */
int
host_fs_of_mount (guint64 mnt_id, bool unique, dev_t dev)
{
  guint64 old_id = 0;
  gpointer found;
  int fs;

  if (!unique)
    return mount_kind_from_table (mnt_id, dev);
  g_mutex_lock (&by_unique.lock);
  fs = by_unique.kinds != NULL && g_hash_table_lookup_extended (by_unique.kinds, &mnt_id, NULL, &found)
         ? GPOINTER_TO_INT (found)
         : -1;
  g_mutex_unlock (&by_unique.lock);
  if (fs >= 0)
    return fs;
  fs = mount_kind_from_statmount (mnt_id, &old_id);
  if (fs == -ENOSYS)
    return mount_kind_from_table (old_id, dev);
  if (fs < 0)
    return fs;
  g_mutex_lock (&by_unique.lock);
  if (by_unique.kinds == NULL || g_hash_table_size (by_unique.kinds) >= BY_UNIQUE_MAX)
    {
      g_clear_pointer (&by_unique.kinds, g_hash_table_unref);
      by_unique.kinds = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
    }
  g_hash_table_insert (by_unique.kinds, g_memdup2 (&mnt_id, sizeof mnt_id), GINT_TO_POINTER (fs));
  g_mutex_unlock (&by_unique.lock);
  return fs;
}

int
host_fs_of_statx (const struct statx *stx)
{
  bool unique = (stx->stx_mask & STATX_MNT_ID_UNIQUE) != 0;
  guint64 id = unique || (stx->stx_mask & STATX_MNT_ID) ? stx->stx_mnt_id : 0;

  return host_fs_of_mount (id, unique, makedev (stx->stx_dev_major, stx->stx_dev_minor));
}

guint
host_statx_mount_mask (void)
{
  return g_atomic_int_get (&use_statmount) ? STATX_MNT_ID_UNIQUE : STATX_MNT_ID;
}
/* The attributes of NAME below DIR_FD (FLAGS: 0, or AT_EMPTY_PATH for
 * DIR_FD itself), an object in or just below NEAR (a host directory, or
 * NULL), and what its filesystem asks of a stat.  First from whatever the
 * kernel holds (AT_STATX_DONT_SYNC: a FUSE filesystem is not asked, even
 * one whose server stopped answering); where that is another filesystem
 * than NEAR's, its kind from mountinfo; then, on a filesystem that may
 * answer from a cache, a stat as usual of the object the first one found,
 * opened and checked to be it without asking (a name is not stat'ed
 * twice: a mount put over it between the two would be asked).  Automount
 * points are not triggered, as fstatat() does not. */
static int
host_stat_once (FbViewNode *near, int dir_fd, const char *name, int flags, struct stat *ret_st)
{
  _fb_cleanup_fd_ int fd = -1;
  struct statx stx;
  struct stat id;
  int fs;

  if (statx (dir_fd, name, flags | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC,
             STATX_BASIC_STATS | host_statx_mount_mask (), &stx) < 0)
    return -errno;
  fb_stat_from_statx (&stx, ret_st);
  if (near != NULL && near->kind == NODE_HOST && ret_st->st_dev == near->dev)
    fs = near->asks ? HOST_FS_ASKS : HOST_FS_LOCAL;
  else
    fs = host_fs_of_statx (&stx);
  if (fs != HOST_FS_ASKS)
    return fs;
  if (flags & AT_EMPTY_PATH)
    return fstatat (dir_fd, "", ret_st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : fs;
  fd = host_open_child (dir_fd, name);
  if (fd < 0)
    return fd;
  if (host_identity_fd (fd, &id) < 0 || id.st_dev != ret_st->st_dev || id.st_ino != ret_st->st_ino)
    return -EAGAIN;
  return fstatat (fd, "", ret_st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : fs;
}

/* host_stat_once, again while the name changes between its two steps;
 * ESTALE when it keeps changing. */
static int
host_stat_at (FbViewNode *near, int dir_fd, const char *name, int flags, struct stat *ret_st)
{
  int r = -EAGAIN;

  for (int tries = 0; tries < 3 && r == -EAGAIN; tries++)
    r = host_stat_once (near, dir_fd, name, flags, ret_st);
  return r == -EAGAIN ? -ESTALE : r;
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
  struct statx stx;
  struct stat st;
  int fs;

  if (statx (fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
             STATX_TYPE | STATX_INO | host_statx_mount_mask (), &stx) < 0)
    return -errno;
  st.st_dev = makedev (stx.stx_dev_major, stx.stx_dev_minor);
  st.st_ino = stx.stx_ino;
  st.st_mode = stx.stx_mode;
  if (same_host_object (node, &st) < 0)
    return -ESTALE;
  if (!node->mount_root)
    return 0;
  /* A mount's root: the mount may be gone, and the kernel gives its device
   * number (the lowest free) and the root's inode number (a FUSE root's is
   * always 1) to the next mount made there, another user's FUSE filesystem
   * whose server never answers, say.  Its kind is read again. */
  fs = host_fs_of_statx (&stx);
  if (fs < 0)
    return fs;
  return fs == HOST_FS_UNSERVED || (fs == HOST_FS_ASKS) != node->asks ? -ESTALE : 0;
}

bool
host_is_mount_root (int fd)
{
  struct statx stx;

  /* a bind mount of a directory of the same filesystem has its parent's
   * device number: the kernel says it is a mount's root */
  return statx (fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE, &stx) == 0 &&
         (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
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
