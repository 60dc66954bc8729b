/* fusebox — changes made on the host by other processes, from fanotify.
 *
 * Design:
 *  - The kernel keeps a FUSE mount's entries and attributes for as long as
 *    we tell it (fs-fuse.c "Caching").  Changes made through a view are
 *    reported by the view itself (fs-view-notify.c); this file covers the
 *    rest: a person editing a workspace file, a build outside the sandbox.
 *    Without it a grown file would read cut off at the old size until the
 *    attributes expire.
 *  - One fanotify group per process (FAN_CLASS_NOTIF, FAN_REPORT_DFID_NAME
 *    with the object's and the target's file ids), with a filesystem mark
 *    (FAN_MARK_FILESYSTEM) on each local host filesystem a view holds a node
 *    on, added when a view first meets its st_dev (watch_node_dev).  Marks
 *    need CAP_SYS_ADMIN in the initial user namespace: an unprivileged
 *    daemon, FUSEBOX_NO_FANOTIFY=1, a failed fanotify_init, or a filesystem
 *    whose mark fails or whose changes can come from elsewhere (NFS, SMB,
 *    FUSE, ... anything not in local_fs_type()) is not covered, and
 *    fb_watch_covers() says so: the FUSE adapter then keeps the short
 *    timeouts for it.
 *  - One reader thread, process-wide, rather than a GSource: `fusebox
 *    mount` has no main loop, and the listeners take every view's table
 *    lock, which must not stall the API's loop.  It turns each event into an
 *    FbViewChange (the object's st_dev/st_ino from its file id; the
 *    directory's and the name for names made, removed or moved) and reports
 *    it like a view's own change, with no origin, so every FUSE session
 *    queues the same invalidations.  Events of this process are skipped:
 *    they went through a view and were reported already.  On FAN_Q_OVERFLOW
 *    it reports FB_VIEW_CHANGE_ALL: every session invalidates everything
 *    its kernel knows.
 *  - Bounded: the kernel's queue holds at most 16,384 events (then
 *    overflow); we read into one fixed buffer, allocate nothing per event,
 *    and each event costs at most two handle decodings (direct for ext2/3/4,
 *    else open_by_handle_at + fstat) and one index lookup per view; the
 *    sessions' queues are bounded and coalesced (fs-fuse.c).
 *  - The filesystems are a fixed array (WATCH_FS_MAX); entries are written
 *    under watch_lock and published by an atomic count, so fb_watch_covers()
 *    (every FUSE reply) takes no lock.
 */
#include "fs/fs-private.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#define WATCH_FS_MAX 64
#define WATCH_BUF_SIZE (64 * 1024)

#define WATCH_MASK                                                                                                   \
  (FAN_MODIFY | FAN_ATTRIB | FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_DELETE_SELF |          \
   FAN_MOVE_SELF | FAN_ONDIR)

typedef struct
{
  dev_t dev;
  bool covered;
  bool ext;       /* ext2/3/4: handles decode to the inode number directly */
  fsid_t fsid;
  int fd;         /* a directory on it, for open_by_handle_at; -1 when not covered */
} WatchFs;

static GMutex watch_lock;
static WatchFs watch_fss[WATCH_FS_MAX];
static gint watch_n;       /* atomic: entries [0, watch_n) are complete */
static gint watch_active;  /* atomic: the group exists and its thread runs */
static int watch_fan = -1; /* watch_lock (set once) */

static bool
local_fs_type (unsigned long type)
{
  switch (type)
    {
    case 0xEF53:     /* ext2/3/4 */
    case 0x58465342: /* xfs */
    case 0x9123683E: /* btrfs */
    case 0x01021994: /* tmpfs */
    case 0x858458F6: /* ramfs */
    case 0x794C7630: /* overlayfs (changes through it) */
    case 0xF2F52010: /* f2fs */
    case 0xCA451A4E: /* bcachefs */
    case 0x2FC12FC1: /* zfs */
    case 0x4D44:     /* vfat */
    case 0x2011BAB0: /* exfat */
      return true;
    default:
      return false;
    }
}

bool
fb_watch_covers (dev_t dev)
{
  gint n = g_atomic_int_get (&watch_n);

  for (gint i = 0; i < n; i++)
    if (watch_fss[i].dev == dev)
      return watch_fss[i].covered;
  return false;
}

bool
fb_watch_active (void)
{
  return g_atomic_int_get (&watch_active) != 0;
}

/* The host object of a file id, as (st_dev, st_ino); false when it can't be
 * told (the filesystem is not one we marked, or the object is gone). */
static bool
resolve_fid (const fsid_t *fsid, struct file_handle *fh, dev_t *ret_dev, ino_t *ret_ino)
{
  gint n = g_atomic_int_get (&watch_n);
  struct stat st;
  int fd;

  for (gint i = 0; i < n; i++)
    {
      WatchFs *w = &watch_fss[i];
      if (!w->covered || memcmp (&w->fsid, fsid, sizeof *fsid) != 0)
        continue;
      /* ext4's FILEID_INO32_GEN(_PARENT): u32 inode number, u32 generation */
      if (w->ext && (fh->handle_type == 1 || fh->handle_type == 2) && fh->handle_bytes >= 8)
        {
          guint32 ino;
          memcpy (&ino, fh->f_handle, sizeof ino);
          *ret_dev = w->dev;
          *ret_ino = ino;
          return true;
        }
      fd = open_by_handle_at (w->fd, fh, O_PATH | O_CLOEXEC);
      if (fd < 0)
        return false;
      if (fstat (fd, &st) < 0)
        {
          close (fd);
          return false;
        }
      close (fd);
      *ret_dev = st.st_dev;
      *ret_ino = st.st_ino;
      return true;
    }
  return false;
}

static void
handle_event (const struct fanotify_event_metadata *m)
{
  const char *p = (const char *)m + m->metadata_len;
  const char *end = (const char *)m + m->event_len;
  FbViewChange c = { 0 };
  bool have_object = false;

  if (m->mask & FAN_Q_OVERFLOW)
    {
      c.what = FB_VIEW_CHANGE_ALL;
      view_changed (NULL, NULL, &c);
      return;
    }
  if (m->pid == getpid ())
    return; /* through a view of ours: reported already */
  while (p + sizeof (struct fanotify_event_info_header) <= end)
    {
      const struct fanotify_event_info_header *h = (const void *)p;
      const struct fanotify_event_info_fid *fid = (const void *)p;
      struct file_handle *fh;

      if (h->len < sizeof *h || p + h->len > end)
        break;
      if (h->len < sizeof *fid + sizeof (struct file_handle))
        {
          p += h->len;
          continue;
        }
      fh = (struct file_handle *)fid->handle;
      if (sizeof *fid + sizeof *fh + fh->handle_bytes > h->len)
        break;
      if (h->info_type == FAN_EVENT_INFO_TYPE_FID && !have_object)
        have_object = resolve_fid ((const fsid_t *)&fid->fsid, fh, &c.dev, &c.ino);
      else if (h->info_type == FAN_EVENT_INFO_TYPE_DFID_NAME && c.name == NULL)
        {
          const char *name = (const char *)fh->f_handle + fh->handle_bytes;
          const char *limit = p + h->len;
          if (memchr (name, '\0', limit - name) != NULL && strcmp (name, ".") != 0 && name[0] != '\0' &&
              resolve_fid ((const fsid_t *)&fid->fsid, fh, &c.parent_dev, &c.parent_ino))
            c.name = name;
        }
      p += h->len;
    }
  if (have_object)
    c.what |= (m->mask & FAN_MODIFY) ? FB_VIEW_CHANGE_DATA : FB_VIEW_CHANGE_ATTR;
  else
    c.dev = 0, c.ino = 0;
  if (c.name != NULL && (m->mask & (FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO)))
    c.what |= FB_VIEW_CHANGE_NAME;
  else
    c.name = NULL;
  if (c.what != 0)
    view_changed (NULL, NULL, &c);
}

static gpointer
watch_thread (gpointer data)
{
  int fan = GPOINTER_TO_INT (data);
  g_autofree char *buf = g_malloc (WATCH_BUF_SIZE);

  for (;;)
    {
      struct pollfd pfd = { fan, POLLIN, 0 };
      ssize_t n;

      if (poll (&pfd, 1, -1) < 0 && errno != EINTR)
        break;
      n = read (fan, buf, WATCH_BUF_SIZE);
      if (n < 0)
        {
          if (errno == EAGAIN || errno == EINTR)
            continue;
          break;
        }
      for (struct fanotify_event_metadata *m = (void *)buf; FAN_EVENT_OK (m, n); m = FAN_EVENT_NEXT (m, n))
        {
          if (m->vers != FANOTIFY_METADATA_VERSION)
            continue;
          if (m->fd >= 0)
            close (m->fd);
          handle_event (m);
        }
    }
  /* the group is unusable: stop claiming coherence (replies from now on
   * get the short timeouts) */
  g_atomic_int_set (&watch_active, 0);
  g_mutex_lock (&watch_lock);
  for (gint i = 0; i < g_atomic_int_get (&watch_n); i++)
    watch_fss[i].covered = false;
  g_mutex_unlock (&watch_lock);
  return NULL;
}

bool
fb_watch_start (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      int fan = -1;
      const char *no = g_getenv ("FUSEBOX_NO_FANOTIFY");

      if (no == NULL || strcmp (no, "1") != 0)
        {
          fan = fanotify_init (FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME_TARGET,
                               O_RDONLY | O_LARGEFILE | O_CLOEXEC);
          if (fan < 0 && errno == EINVAL) /* before 5.17: no target ids, only the directory's and the name */
            fan = fanotify_init (FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME | FAN_REPORT_FID,
                                 O_RDONLY | O_LARGEFILE | O_CLOEXEC);
        }
      if (fan >= 0)
        {
          sigset_t block, old;
          GThread *t;

          sigfillset (&block);
          pthread_sigmask (SIG_BLOCK, &block, &old);
          t = g_thread_try_new ("fusebox-watch", watch_thread, GINT_TO_POINTER (fan), NULL);
          pthread_sigmask (SIG_SETMASK, &old, NULL);
          if (t != NULL)
            {
              g_thread_unref (t); /* it lives as long as the process */
              g_mutex_lock (&watch_lock);
              watch_fan = fan;
              g_mutex_unlock (&watch_lock);
              g_atomic_int_set (&watch_active, 1);
            }
          else
            close (fan);
        }
      g_once_init_leave (&once, 1);
    }
  return fb_watch_active ();
}

void
watch_dev (dev_t dev, int dir_fd)
{
  char proc[32];
  struct statfs sfs;
  WatchFs *w;
  gint n;

  if (!fb_watch_active () || dir_fd < 0)
    return;
  n = g_atomic_int_get (&watch_n);
  for (gint i = 0; i < n; i++)
    if (watch_fss[i].dev == dev)
      return;
  g_mutex_lock (&watch_lock);
  n = g_atomic_int_get (&watch_n);
  for (gint i = 0; i < n; i++)
    if (watch_fss[i].dev == dev)
      goto out;
  if (n >= WATCH_FS_MAX)
    goto out; /* not covered: short timeouts there */
  w = &watch_fss[n];
  memset (w, 0, sizeof *w);
  w->dev = dev;
  w->fd = -1;
  proc_fd_path (proc, dir_fd);
  if (fstatfs (dir_fd, &sfs) == 0 && local_fs_type ((unsigned long)sfs.f_type))
    {
      int fd = open (proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      struct stat st;
      /* the descriptor must be on DEV itself (not a file bind-mounted
       * elsewhere) */
      if (fd >= 0 && (fstat (fd, &st) < 0 || st.st_dev != dev))
        {
          close (fd);
          goto out; /* ask again with a directory of DEV */
        }
      if (fd >= 0 && fanotify_mark (watch_fan, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, WATCH_MASK, AT_FDCWD, proc) == 0)
        {
          w->fd = fd;
          w->fsid = sfs.f_fsid;
          w->ext = sfs.f_type == 0xEF53;
          w->covered = true;
        }
      else if (fd >= 0)
        close (fd);
    }
  g_atomic_int_set (&watch_n, n + 1);
out:
  g_mutex_unlock (&watch_lock);
}
