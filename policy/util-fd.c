/* fusebox — descriptors passed over a socket (policy/util.h). */
#include "policy/util.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/sysmacros.h>
#include <string.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/xattr.h>

int
fb_send_fds (int sock, const void *buf, size_t len, const int *fds, int n_fds, int flags)
{
  struct iovec iov = { (void *)buf, len };
  union
  {
    struct cmsghdr align;
    char buf[CMSG_SPACE (FB_SEND_FDS_MAX * sizeof (int))];
  } control;
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

  if (n_fds < 0 || n_fds > FB_SEND_FDS_MAX)
    return -EINVAL;
  if (n_fds > 0)
    {
      struct cmsghdr *cm;

      memset (&control, 0, sizeof control);
      msg.msg_control = control.buf;
      msg.msg_controllen = CMSG_SPACE (n_fds * sizeof (int));
      cm = CMSG_FIRSTHDR (&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN (n_fds * sizeof (int));
      memcpy (CMSG_DATA (cm), fds, n_fds * sizeof (int));
    }
  while (sendmsg (sock, &msg, MSG_NOSIGNAL | flags) < 0)
    if (errno != EINTR)
      return -errno;
  return 0;
}

bool
fb_state_mark (int fd)
{
  char proc[32];

  /* through /proc: an O_PATH descriptor takes no fsetxattr */
  snprintf (proc, sizeof proc, "/proc/self/fd/%d", fd);
  return setxattr (proc, FB_STATE_XATTR, "state", 5, 0) == 0;
}

int
fb_lstat_cached (int dir_fd, const char *name, struct stat *ret_st)
{
  struct statx stx;

  int flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC | (name[0] == '\0' ? AT_EMPTY_PATH : 0);

  if (statx (dir_fd, name, flags, STATX_BASIC_STATS, &stx) < 0)
    return -1;
  fb_stat_from_statx (&stx, ret_st);
  return 0;
}

bool
fb_fuse_opts_trusted (const char *opts)
{
  g_autofree char *own = g_strdup_printf ("user_id=%u", (guint)geteuid ());
  g_auto (GStrv) split = g_strsplit (opts, ",", -1);

  return g_strv_contains ((const char *const *)split, own) || g_strv_contains ((const char *const *)split, "user_id=0");
}

/* What each mount is (fb_mount_untrusted_fuse), by its id and by its
 * device, from mountinfo read once, and again only when poll(2) on it says
 * the mount table changed (an id and a device number go to the next mount
 * once theirs is gone) or for one it does not hold: a command walks a few
 * dozen paths, and a host may have thousands of mounts. */
typedef struct
{
  gint64 owner; /* -1, or the uid of another user's FUSE filesystem */
  bool proc;    /* a procfs: its links may be magic */
} MountKind;

static struct
{
  GMutex lock;
  int fd;           /* /proc/self/mountinfo, open since the first read */
  GHashTable *ids;  /* guint64 mount id -> MountKind* */
  GHashTable *devs; /* guint64 device -> MountKind* (the same) */
} mounts = { .fd = -1 };

/* One line's mount id, device and kind: false for a line that is not one. */
static bool
line_kind (char *line, guint64 *ret_id, guint64 *ret_dev, MountKind *ret)
{
  const char *sep = strstr (line, " - ");
  g_auto (GStrv) tail = NULL;
  const char *uid;
  unsigned maj, min;
  guint64 id;

  /* ID PARENT MAJ:MIN ... - TYPE SOURCE OPTS */
  if (sep == NULL || sscanf (line, "%" G_GUINT64_FORMAT " %*u %u:%u", &id, &maj, &min) != 3)
    return false;
  tail = g_strsplit (sep + 3, " ", 3);
  if (g_strv_length (tail) < 3)
    return false;
  *ret_id = id;
  *ret_dev = makedev (maj, min);
  ret->proc = strcmp (tail[0], "proc") == 0;
  ret->owner = -1;
  if ((strcmp (tail[0], "fuse") == 0 || strcmp (tail[0], "fuseblk") == 0 || g_str_has_prefix (tail[0], "fuse.") ||
       g_str_has_prefix (tail[0], "fuseblk.")) &&
      !fb_fuse_opts_trusted (tail[2]))
    {
      uid = strstr (tail[2], "user_id=");
      ret->owner = uid != NULL ? (gint64)g_ascii_strtoull (uid + 8, NULL, 10) : G_MAXUINT32;
    }
  return true;
}

/* Read the table again through mounts.fd (lock held). */
static bool
mounts_reload (void)
{
  g_autoptr (GString) text = g_string_new (NULL);
  g_auto (GStrv) lines = NULL;
  char buf[64 * 1024];
  ssize_t n;

  while ((n = pread (mounts.fd, buf, sizeof buf, (off_t)text->len)) != 0)
    {
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return false;
      g_string_append_len (text, buf, n);
    }
  g_hash_table_remove_all (mounts.devs);
  g_hash_table_remove_all (mounts.ids);
  lines = g_strsplit (text->str, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      MountKind kind;
      guint64 id, dev;

      if (!line_kind (lines[i], &id, &dev, &kind))
        continue;
      g_hash_table_insert (mounts.ids, g_memdup2 (&id, sizeof id), g_memdup2 (&kind, sizeof kind));
      g_hash_table_insert (mounts.devs, g_memdup2 (&dev, sizeof dev), g_memdup2 (&kind, sizeof kind));
    }
  return true;
}

/* A child of a fork (of a process whose other threads may have held the
 * lock, or been changing the tables: a session's daemon forks its
 * sandboxes' makers) starts afresh, with a lock of its own; the parent's
 * tables are left as they were copied (leaked), its descriptor (which
 * shares the parent's offset and poll state) closed. */
static void
mounts_forked (void)
{
  g_mutex_init (&mounts.lock);
  mounts.ids = mounts.devs = NULL;
  if (mounts.fd >= 0)
    close (mounts.fd);
  mounts.fd = -1;
}

gint64
fb_mount_untrusted_fuse (guint64 key, bool by_id, bool *ret_proc)
{
  static gsize once = 0;
  struct pollfd p = { .events = POLLPRI };
  MountKind *found = NULL;
  gint64 owner = -2;
  GHashTable *table;

  if (g_once_init_enter (&once))
    {
      pthread_atfork (NULL, NULL, mounts_forked);
      g_once_init_leave (&once, 1);
    }
  g_mutex_lock (&mounts.lock);
  if (mounts.ids == NULL)
    {
      mounts.ids = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, g_free);
      mounts.devs = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, g_free);
    }
  table = by_id ? mounts.ids : mounts.devs;
  if (mounts.fd < 0)
    {
      mounts.fd = open ("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
      if (mounts.fd >= 0 && !mounts_reload ())
        fb_fd_close (&mounts.fd);
    }
  else
    {
      /* changed since the last read, or not in it: read it again */
      p.fd = mounts.fd;
      if ((poll (&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLPRI)) != 0) || g_hash_table_lookup (table, &key) == NULL)
        if (!mounts_reload ())
          fb_fd_close (&mounts.fd);
    }
  if (mounts.fd >= 0 && (found = g_hash_table_lookup (table, &key)) != NULL)
    owner = found->owner;
  if (ret_proc != NULL)
    *ret_proc = found != NULL && found->proc;
  g_mutex_unlock (&mounts.lock);
  return owner;
}

gint64
fb_dev_untrusted_fuse (dev_t dev)
{
  gint64 owner = fb_mount_untrusted_fuse (dev, false, NULL);

  return owner >= 0 ? owner : -1;
}

void
fb_stat_from_statx (const struct statx *stx, struct stat *ret_st)
{
  memset (ret_st, 0, sizeof *ret_st);
  ret_st->st_dev = makedev (stx->stx_dev_major, stx->stx_dev_minor);
  ret_st->st_ino = stx->stx_ino;
  ret_st->st_mode = stx->stx_mode;
  ret_st->st_nlink = stx->stx_nlink;
  ret_st->st_uid = stx->stx_uid;
  ret_st->st_gid = stx->stx_gid;
  ret_st->st_rdev = makedev (stx->stx_rdev_major, stx->stx_rdev_minor);
  ret_st->st_size = (off_t)stx->stx_size;
  ret_st->st_blksize = (blksize_t)stx->stx_blksize;
  ret_st->st_blocks = (blkcnt_t)stx->stx_blocks;
  ret_st->st_atim = (struct timespec){ stx->stx_atime.tv_sec, stx->stx_atime.tv_nsec };
  ret_st->st_mtim = (struct timespec){ stx->stx_mtime.tv_sec, stx->stx_mtime.tv_nsec };
  ret_st->st_ctim = (struct timespec){ stx->stx_ctime.tv_sec, stx->stx_ctime.tv_nsec };
}

bool
fb_state_marked (int dir_fd, const char *name)
{
  char proc[64 + 256];
  char value[8];
  int n = name != NULL ? snprintf (proc, sizeof proc, "/proc/self/fd/%d/%s", dir_fd, name)
                       : snprintf (proc, sizeof proc, "/proc/self/fd/%d", dir_fd);

  if (n < 0 || (size_t)n >= sizeof proc)
    return false;
  return (name != NULL ? lgetxattr (proc, FB_STATE_XATTR, value, sizeof value)
                       : getxattr (proc, FB_STATE_XATTR, value, sizeof value)) >= 0;
}

int
fb_open_path_on_dir_fs (int dir_fd, const char *name, struct stat *ret_st)
{
  _fb_cleanup_fd_ int fd = openat (dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  g_autofree char *dir = NULL;
  struct stat dir_st;

  if (fd < 0 || fb_lstat_cached (fd, "", ret_st) < 0)
    return -1;
  dir = strchr (name, '/') != NULL ? g_path_get_dirname (name) : g_strdup (".");
  if (fb_lstat_cached (dir_fd, dir, &dir_st) < 0)
    return -1;
  if (ret_st->st_dev != dir_st.st_dev)
    {
      errno = EXDEV;
      return -1;
    }
  if (S_ISLNK (ret_st->st_mode))
    {
      errno = ELOOP;
      return -1;
    }
  return fb_steal_fd (&fd);
}

int
fb_reopen_path (int path_fd, int flags)
{
  char proc[32];

  g_snprintf (proc, sizeof proc, "/proc/self/fd/%d", path_fd);
  return open (proc, flags & ~O_NOFOLLOW);
}
