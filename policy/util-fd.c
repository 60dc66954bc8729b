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

/* What each device's mount is (fb_dev_untrusted_fuse), from mountinfo read
 * once, and again only when poll(2) on it says the mount table changed (a
 * device number goes to the next mount once its own is gone): a command
 * walks a few dozen paths, and a host may have thousands of mounts. */
static struct
{
  GMutex lock;
  int fd;             /* /proc/self/mountinfo, open since the first read */
  GHashTable *owners; /* guint64 dev -> gint64 what fb_dev_untrusted_fuse says */
} untrusted = { .fd = -1 };

/* One line's device and what it is: -1 not another user's FUSE. */
static gint64
line_untrusted_fuse (char *line, dev_t *ret_dev)
{
  const char *sep = strstr (line, " - ");
  g_auto (GStrv) tail = NULL;
  const char *uid;
  unsigned maj, min;

  /* ID PARENT MAJ:MIN ... - TYPE SOURCE OPTS */
  if (sep == NULL || sscanf (line, "%*u %*u %u:%u", &maj, &min) != 2)
    return -2;
  *ret_dev = makedev (maj, min);
  tail = g_strsplit (sep + 3, " ", 3);
  if (g_strv_length (tail) < 3 || !(strcmp (tail[0], "fuse") == 0 || strcmp (tail[0], "fuseblk") == 0 ||
                                    g_str_has_prefix (tail[0], "fuse.") || g_str_has_prefix (tail[0], "fuseblk.")))
    return -1;
  if (fb_fuse_opts_trusted (tail[2]))
    return -1;
  uid = strstr (tail[2], "user_id=");
  return uid != NULL ? (gint64)g_ascii_strtoull (uid + 8, NULL, 10) : G_MAXUINT32;
}

/* Read the table again through untrusted.fd (lock held). */
static bool
untrusted_reload (void)
{
  g_autoptr (GString) text = g_string_new (NULL);
  g_auto (GStrv) lines = NULL;
  char buf[64 * 1024];
  ssize_t n;

  while ((n = pread (untrusted.fd, buf, sizeof buf, (off_t)text->len)) != 0)
    {
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return false;
      g_string_append_len (text, buf, n);
    }
  g_hash_table_remove_all (untrusted.owners);
  lines = g_strsplit (text->str, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      dev_t dev = 0;
      gint64 owner = line_untrusted_fuse (lines[i], &dev);
      guint64 key = dev;

      if (owner >= -1)
        g_hash_table_insert (untrusted.owners, g_memdup2 (&key, sizeof key), g_memdup2 (&owner, sizeof owner));
    }
  return true;
}

/* A child of a fork (of a process whose other threads may have held the
 * lock, or been changing the table: a session's daemon forks its
 * sandboxes' makers) starts afresh, with a lock of its own; the parent's
 * table is left as it was copied (leaked), its descriptor (which shares
 * the parent's offset and poll state) closed. */
static void
untrusted_forked (void)
{
  g_mutex_init (&untrusted.lock);
  untrusted.owners = NULL;
  if (untrusted.fd >= 0)
    close (untrusted.fd);
  untrusted.fd = -1;
}

gint64
fb_dev_untrusted_fuse (dev_t dev)
{
  static gsize once = 0;
  struct pollfd p = { .events = POLLPRI };
  gpointer found = NULL;
  gint64 owner = -1;
  guint64 key = dev;

  if (g_once_init_enter (&once))
    {
      pthread_atfork (NULL, NULL, untrusted_forked);
      g_once_init_leave (&once, 1);
    }
  g_mutex_lock (&untrusted.lock);
  if (untrusted.owners == NULL)
    untrusted.owners = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, g_free);
  if (untrusted.fd < 0)
    {
      untrusted.fd = open ("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
      if (untrusted.fd >= 0 && !untrusted_reload ())
        fb_fd_close (&untrusted.fd);
    }
  else
    {
      /* changed since the last read: read it again */
      p.fd = untrusted.fd;
      if ((poll (&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLPRI)) != 0) ||
          !g_hash_table_lookup_extended (untrusted.owners, &key, NULL, NULL))
        if (!untrusted_reload ())
          fb_fd_close (&untrusted.fd);
    }
  if (untrusted.fd >= 0 && g_hash_table_lookup_extended (untrusted.owners, &key, NULL, &found))
    owner = *(gint64 *)found;
  g_mutex_unlock (&untrusted.lock);
  return owner;
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
