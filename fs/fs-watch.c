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
 *    with the object's and the target's file ids) with INODE marks, one per
 *    host directory a view holds a descriptor for (watch_dir_add, from
 *    table_insert; FAN_EVENT_ON_CHILD | FAN_ONDIR), removed when the last
 *    node of that directory is freed (watch_dir_remove).  Not filesystem
 *    marks: those made every write() by any process on the filesystem pay
 *    for our group (fanotify_handle_event), and need CAP_SYS_ADMIN; inode
 *    marks cost nothing outside the directories we show, and an
 *    unprivileged daemon may place them (Linux >= 5.13, with file-id
 *    reporting; they count against fs.fanotify.max_user_marks).
 *  - Coverage (fb_view_node_watched): a directory node is covered when its
 *    mark is placed: names made, removed or moved in it and its own
 *    attributes are reported on that mark.  A non-directory node is covered
 *    when its parent node (same st_dev) is, because fsnotify reports an
 *    event on a file to its parent directory's mark (fsnotify_parent), and
 *    when its file id can be told (ext2/3/4's and tmpfs's hold the inode
 *    number; elsewhere open_by_handle_at, which needs CAP_DAC_READ_SEARCH).
 *    Except a file with more than one link: a write through a name in a
 *    directory we don't mark reaches no mark of ours, so such files get the
 *    short timeouts (st_nlink > 1 at each reply; rare in workspaces, and
 *    simpler and cheaper than a mark per file).  Where a mark can't be
 *    placed (ENOSPC: max_user_marks; EPERM/EACCES; a network or FUSE
 *    filesystem, whose changes can come from elsewhere: anything not in
 *    local_fs_type()), the directory and its children get the short
 *    timeouts.  Not reported either way: a file linked anew on the host
 *    (link() notifies the inode only), writes through a shared mmap.
 *  - Mapping an event without privileges: each marked directory's file
 *    handle (name_to_handle_at, which needs none) is kept with its
 *    st_dev/st_ino; an event's directory id is looked up there, and so is
 *    its object id when that is a marked directory; a child's id is
 *    decoded (see above).  Where every id decodes to the inode (ext2/3/4,
 *    tmpfs) no handle is kept: the directory is a 16-byte record, by object
 *    only, in a table of such records (watch_objs), which is what a view's
 *    walk of thousands of directories leaves here.
 *  - The mount table too (/proc/self/mountinfo's POLLPRI): a mount moved,
 *    taken off or put over a directory makes no fanotify event, so each
 *    change is reported as FB_VIEW_CHANGE_MOUNTS, and the sessions check
 *    the directories that a mount's move can take from their names (mount
 *    roots, mount sources: fs-fuse-inval.c).
 *  - One reader thread, process-wide, rather than a GSource: `fusebox
 *    mount` has no main loop, and the listeners take every view's table
 *    lock, which must not stall the API's loop.  It turns each event into an
 *    FbViewChange (the object's st_dev/st_ino from its file id; the
 *    directory's and the name for names made, removed or moved) and reports
 *    it like a view's own change, with no origin, so every FUSE session
 *    queues the same invalidations.  Events of this process are skipped
 *    (an unprivileged group still sees its own pid, others' as 0): they
 *    went through a view and were reported already.  On FAN_Q_OVERFLOW it
 *    reports FB_VIEW_CHANGE_ALL: every session invalidates everything its
 *    kernel knows, absences included (fs-fuse-inval.c), and so it does if
 *    the group fails.  FUSEBOX_TEST_LOSE_EVENTS=1 treats every event as
 *    lost, so that tests can show that path works.
 *  - Marks are placed and removed through the directory's own O_PATH
 *    descriptor and "." (a path walk of one step), not through
 *    /proc/self/fd/N (five steps through procfs, 7-26 us more per mark).
 *    The walk needs search permission on the directory, where the magic link
 *    did not: a directory we may read but not search goes unmarked (short
 *    timeouts); fanotify_mark needs read permission on it either way.
 *  - Stopping (fb_watch_stop, once nothing is served any more): all marks
 *    go in one FAN_MARK_FLUSH.  Closing the group at exit waits until the
 *    kernel has freed every mark it held (fsnotify_destroy_group ->
 *    fsnotify_wait_marks_destroyed, an SRCU grace period); after a
 *    FAN_MARK_REMOVE per directory as the view's nodes were freed, that
 *    wait took 9-22 ms in a third to a half of `fusebox run -- true`'s
 *    exits, after one flush in 2-3 of 40 (docs/performance.md, Startup).
 *  - Bounded: the kernel's queue holds at most 16,384 events (then
 *    overflow); we read into one fixed buffer, allocate nothing per event,
 *    and each event costs at most two hash lookups or handle decodings and
 *    one index lookup per view; at most WATCH_DIRS_MAX directories are
 *    marked (then short timeouts); the sessions' queues are bounded and
 *    coalesced (fs-fuse.c).  fb_watch_events_read() counts the events of
 *    other processes read (a check that nothing outside the viewed
 *    directories reaches us).
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

/* For tests: every host event is treated as lost (the overflow path). */
static bool watch_lose_events;
/* For tests (watch_test_ids_unread): file ids not read for the inode. */
static bool watch_ids_unread;

#define WATCH_FS_MAX 64
#define WATCH_DIRS_MAX 65536
/* FUSEBOX_TEST_WATCH_DIRS_MAX (for tests): a lower bound, so that a test
 * reaches it with a few directories */
static guint watch_dirs_max = WATCH_DIRS_MAX;
#define WATCH_BUF_SIZE (64 * 1024)
/* The pause between reads of the event queue (see watch_thread). */
#define WATCH_BATCH_US 2000

#define WATCH_MASK                                                                                                     \
  (FAN_MODIFY | FAN_ATTRIB | FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_DELETE_SELF |               \
   FAN_MOVE_SELF | FAN_ONDIR | FAN_EVENT_ON_CHILD)

#ifndef AT_HANDLE_FID
#define AT_HANDLE_FID 0x200
#endif

/* Filesystems whose file ids hold the inode number (decoded without
 * privilege, and a marked directory's id need not be kept). */
typedef enum
{
  WATCH_IDS_NONE,
  WATCH_IDS_EXT,   /* ext2/3/4: FILEID_INO32_GEN(_PARENT): u32 inode, u32 generation */
  WATCH_IDS_TMPFS, /* tmpfs (shmem_encode_fh), type 1: u32 generation, u32 inode low, u32 inode high */
} WatchIds;

typedef struct
{
  dev_t dev;
  bool local;   /* a local filesystem: marks there see every change */
  guint8 ids;   /* WatchIds: how its file ids hold the inode number, if they do */
  bool decodes; /* children's file ids can be told (ids, or open_by_handle_at works) */
  fsid_t fsid;
  int fd;     /* a directory on it, for open_by_handle_at; -1 when not decoding that way */
  guint dirs; /* marked directories on it: at 0 it is let go (its descriptor
               * would keep the filesystem mounted, busy for its unmount) */
} WatchFs;

/* A marked directory whose file id does not tell the object by itself (not
 * ext's: handle_decodes()), by object and by file id. */
typedef struct
{
  ino_t ino;
  /* st_dev as the kernel encodes it (new_encode_dev): 32 bits, as the
   * nodes keep it, which are the only callers */
  guint32 dev;
  guint32 refs; /* nodes holding the mark */
  fsid_t fsid;
  gint32 handle_type;
  guint8 handle_bytes;                 /* at most MAX_HANDLE_SZ */
  unsigned char handle[MAX_HANDLE_SZ]; /* HANDLE_BYTES of them allocated */
} WatchDir;

/* A marked directory whose file id resolve_fid() reads the object from
 * (ext's): by object only, in an open-addressing table of these records
 * themselves (watch_objs).  A view keeps one a directory it holds (a walk
 * thousands), so none has a block or a table entry of its own. */
typedef struct
{
  ino_t ino;
  guint32 dev;
  guint32 refs; /* nodes holding the mark; 0: a free slot */
} WatchObj;

G_STATIC_ASSERT (MAX_HANDLE_SZ <= G_MAXUINT8);

static GMutex watch_lock;
static WatchFs watch_fss[WATCH_FS_MAX]; /* watch_lock */
static gint watch_n;                    /* watch_lock */
static GHashTable *watch_by_obj;        /* watch_lock: WatchDir* (key: dev, ino) */
static GHashTable *watch_by_handle;     /* watch_lock: the same (key: fsid, handle) */
static gint watch_active;               /* atomic: the group exists and its thread runs */
static int watch_fan = -1;              /* set once */
static bool watch_stopped;              /* watch_lock: fb_watch_stop() flushed the marks */
static guint64 watch_events;            /* atomic: events of other processes read */
/* watch_lock: WatchObj, linear probing, at most three quarters full, a
 * power of two long (or 0) */
static WatchObj *watch_objs;
static guint watch_objs_size, watch_objs_used;
#define WATCH_OBJS_MIN 64

static guint
obj_hash (gconstpointer p)
{
  const WatchDir *d = p;
  return (guint)d->ino ^ (guint)(d->ino >> 32) ^ (guint)d->dev * 31u;
}

static gboolean
obj_equal (gconstpointer a, gconstpointer b)
{
  const WatchDir *x = a, *y = b;
  return x->dev == y->dev && x->ino == y->ino;
}

static guint
handle_hash (gconstpointer p)
{
  const WatchDir *d = p;
  guint h = (guint)d->handle_type * 16777619u;

  for (guint i = 0; i < d->handle_bytes; i++)
    h = (h ^ d->handle[i]) * 16777619u;
  return h;
}

static gboolean
handle_equal (gconstpointer a, gconstpointer b)
{
  const WatchDir *x = a, *y = b;
  return x->handle_type == y->handle_type && x->handle_bytes == y->handle_bytes &&
         memcmp (&x->fsid, &y->fsid, sizeof x->fsid) == 0 && memcmp (x->handle, y->handle, x->handle_bytes) == 0;
}

/* Does a file id of TYPE and BYTES on W tell the object by itself (see
 * WatchIds)?  A marked directory's is then not kept: handle_ino() reads
 * it, and the directory is in watch_objs. */
static bool
handle_decodes (const WatchFs *w, int type, guint bytes)
{
  switch (w->ids)
    {
      case WATCH_IDS_EXT:
        return (type == 1 || type == 2) && bytes >= 8;
      case WATCH_IDS_TMPFS:
        return type == 1 && bytes == 12;
      default:
        return false;
    }
}

/* The inode number in BYTES, a file id that handle_decodes() on W. */
static ino_t
handle_ino (const WatchFs *w, const unsigned char *bytes)
{
  guint32 lo, hi;

  if (w->ids == WATCH_IDS_EXT)
    {
      memcpy (&lo, bytes, sizeof lo);
      return lo;
    }
  memcpy (&lo, bytes + 4, sizeof lo);
  memcpy (&hi, bytes + 8, sizeof hi);
  return ((ino_t)hi << 32) | lo;
}

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
fb_watch_active (void)
{
  return g_atomic_int_get (&watch_active) != 0;
}

guint64
fb_watch_events_read (void)
{
  return __atomic_load_n (&watch_events, __ATOMIC_RELAXED);
}

/* DIR_FD's file id as fanotify reports it; false when it has none. */
static bool
dir_handle (int dir_fd, WatchDir *d)
{
  struct
  {
    struct file_handle fh;
    unsigned char bytes[MAX_HANDLE_SZ];
  } h;
  int mount_id;

  h.fh.handle_bytes = MAX_HANDLE_SZ;
  /* AT_HANDLE_FID: the encoding fanotify uses (Linux >= 6.5); before, the
   * same for the filesystems that export handles */
  if (name_to_handle_at (dir_fd, "", &h.fh, &mount_id, AT_EMPTY_PATH | AT_HANDLE_FID) < 0)
    {
      h.fh.handle_bytes = MAX_HANDLE_SZ;
      if (errno != EINVAL || name_to_handle_at (dir_fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0)
        return false;
    }
  d->handle_type = h.fh.handle_type;
  d->handle_bytes = h.fh.handle_bytes;
  memcpy (d->handle, h.fh.f_handle, h.fh.handle_bytes);
  return true;
}

/* W let go (no marked directory left on it); watch_lock held. */
static void
fs_drop_locked (WatchFs *w)
{
  if (w->fd >= 0)
    close (w->fd);
  *w = watch_fss[--watch_n];
}

/* The filesystem of DEV, registered on first use with DIR_FD, a directory
 * on it; watch_lock held.  NULL when the table is full. */
static WatchFs *
fs_get_locked (dev_t dev, int dir_fd, const WatchDir *dir)
{
  struct statfs sfs;
  WatchFs *w;

  for (gint i = 0; i < watch_n; i++)
    if (watch_fss[i].dev == dev)
      return &watch_fss[i];
  if (watch_n >= WATCH_FS_MAX)
    return NULL;
  w = &watch_fss[watch_n++];
  memset (w, 0, sizeof *w);
  w->dev = dev;
  w->fd = -1;
  if (fstatfs (dir_fd, &sfs) < 0)
    return w;
  w->local = local_fs_type ((unsigned long)sfs.f_type);
  w->fsid = sfs.f_fsid;
  w->ids = watch_ids_unread           ? WATCH_IDS_NONE
           : sfs.f_type == 0xEF53     ? WATCH_IDS_EXT
           : sfs.f_type == 0x01021994 ? WATCH_IDS_TMPFS
                                      : WATCH_IDS_NONE;
  w->decodes = w->ids != WATCH_IDS_NONE;
  if (!w->decodes && w->local)
    {
      /* privileged (CAP_DAC_READ_SEARCH): children's ids by open_by_handle_at */
      char proc[32];
      int fd;
      proc_fd_path (proc, dir_fd);
      fd = open (proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd >= 0)
        {
          struct
          {
            struct file_handle fh;
            unsigned char bytes[MAX_HANDLE_SZ];
          } h;
          int probe;
          h.fh.handle_bytes = dir->handle_bytes;
          h.fh.handle_type = dir->handle_type;
          memcpy (h.fh.f_handle, dir->handle, dir->handle_bytes);
          probe = open_by_handle_at (fd, &h.fh, O_PATH | O_CLOEXEC);
          if (probe >= 0)
            {
              close (probe);
              w->fd = fd;
              w->decodes = true;
            }
          else
            close (fd);
        }
    }
  return w;
}

/* --- the decoded directories' table (watch_lock) --- */

static guint
obj_home (ino_t ino, guint32 dev, guint size)
{
  guint64 h = ((guint64)ino ^ ((guint64)dev << 40)) * G_GUINT64_CONSTANT (0x9e3779b97f4a7c15);

  return (guint)(h >> 32) & (size - 1);
}

static WatchObj *
objs_find (ino_t ino, guint32 dev)
{
  if (watch_objs_size == 0)
    return NULL;
  for (guint i = obj_home (ino, dev, watch_objs_size);; i = (i + 1) & (watch_objs_size - 1))
    {
      WatchObj *o = &watch_objs[i];
      if (o->refs == 0)
        return NULL;
      if (o->ino == ino && o->dev == dev)
        return o;
    }
}

/* Record O in a free slot of a table with room. */
static void
objs_put (const WatchObj *o)
{
  guint i = obj_home (o->ino, o->dev, watch_objs_size);

  while (watch_objs[i].refs != 0)
    i = (i + 1) & (watch_objs_size - 1);
  watch_objs[i] = *o;
}

static void
objs_resize (guint size)
{
  WatchObj *old = watch_objs;
  guint old_size = watch_objs_size;

  watch_objs = size > 0 ? g_new0 (WatchObj, size) : NULL;
  watch_objs_size = size;
  for (guint i = 0; i < old_size; i++)
    if (old[i].refs != 0)
      objs_put (&old[i]);
  g_free (old);
}

static void
objs_add (ino_t ino, guint32 dev)
{
  WatchObj o = { .ino = ino, .dev = dev, .refs = 1 };

  if ((watch_objs_used + 1) * 4 > watch_objs_size * 3)
    objs_resize (watch_objs_size == 0 ? WATCH_OBJS_MIN : watch_objs_size * 2);
  objs_put (&o);
  watch_objs_used++;
}

/* Free slot O, moving back the records after it that their probe would
 * no longer reach (no tombstones), and shrink a table mostly empty. */
static void
objs_remove (WatchObj *o)
{
  guint mask = watch_objs_size - 1;
  guint hole = (guint)(o - watch_objs);

  o->refs = 0;
  for (guint j = (hole + 1) & mask; watch_objs[j].refs != 0; j = (j + 1) & mask)
    {
      guint home = obj_home (watch_objs[j].ino, watch_objs[j].dev, watch_objs_size);
      /* J's record stays if its home lies cyclically in (HOLE, J] */
      if (((j - home) & mask) < ((j - hole) & mask))
        continue;
      watch_objs[hole] = watch_objs[j];
      watch_objs[j].refs = 0;
      hole = j;
    }
  watch_objs_used--;
  if (watch_objs_used == 0)
    objs_resize (0);
  else if (watch_objs_size > WATCH_OBJS_MIN && watch_objs_used * 8 < watch_objs_size)
    objs_resize (watch_objs_size / 2);
}

bool
watch_dir_add (dev_t dev, ino_t ino, int dir_fd)
{
  WatchDir key = { 0 }, *d;
  WatchObj *o;
  WatchFs *w;
  bool ok = false;

  if (!fb_watch_active () || dir_fd < 0)
    return false;
  key.dev = dev;
  key.ino = ino;
  g_mutex_lock (&watch_lock);
  o = objs_find (ino, key.dev);
  d = o == NULL ? g_hash_table_lookup (watch_by_obj, &key) : NULL;
  if (o != NULL || d != NULL)
    {
      /* Marked, by this number: but a record outlives its directory while
       * a node holds it (a removed working directory), the kernel's mark
       * does not, and the filesystem may give the number to a new
       * directory, which would count as marked with no mark.  So the mark
       * is placed again on the directory given (nothing when it is there). */
      if (watch_stopped || fanotify_mark (watch_fan, FAN_MARK_ADD, WATCH_MASK, dir_fd, ".") < 0)
        goto out;
      if (o != NULL)
        o->refs++;
      else
        d->refs++;
      ok = true;
      goto out;
    }
  if (watch_stopped || watch_objs_used + g_hash_table_size (watch_by_obj) >= watch_dirs_max ||
      !dir_handle (dir_fd, &key))
    goto out;
  w = fs_get_locked (dev, dir_fd, &key);
  if (w == NULL)
    goto out;
  key.fsid = w->fsid;
  /* not local; ENOSPC (fs.fanotify.max_user_marks), EACCES (unreadable or
   * not searchable): not covered, and a filesystem with no marked
   * directory is not kept */
  if (!w->local || fanotify_mark (watch_fan, FAN_MARK_ADD, WATCH_MASK, dir_fd, ".") < 0)
    {
      if (w->dirs == 0)
        fs_drop_locked (w);
      goto out;
    }
  if (handle_decodes (w, key.handle_type, key.handle_bytes))
    objs_add (ino, key.dev);
  else
    {
      /* as long as its handle (MAX_HANDLE_SZ is 128) */
      d = g_malloc (G_STRUCT_OFFSET (WatchDir, handle) + key.handle_bytes);
      memcpy (d, &key, G_STRUCT_OFFSET (WatchDir, handle) + key.handle_bytes);
      d->refs = 1;
      g_hash_table_add (watch_by_obj, d);
      g_hash_table_add (watch_by_handle, d);
    }
  w->dirs++;
  ok = true;
out:
  g_mutex_unlock (&watch_lock);
  return ok;
}

/* One marked directory less on DEV; watch_lock held. */
static void
fs_put_locked (dev_t dev)
{
  for (gint i = 0; i < watch_n; i++)
    if (watch_fss[i].dev == dev)
      {
        if (watch_fss[i].dirs > 0 && --watch_fss[i].dirs == 0)
          fs_drop_locked (&watch_fss[i]);
        return;
      }
}

void
watch_dir_remove (dev_t dev, ino_t ino, int dir_fd)
{
  WatchDir key = { 0 }, *d = NULL;
  WatchObj *o;
  bool last;

  key.dev = dev;
  key.ino = ino;
  g_mutex_lock (&watch_lock);
  o = objs_find (ino, key.dev);
  if (o == NULL && watch_by_obj != NULL)
    d = g_hash_table_lookup (watch_by_obj, &key);
  last = (o != NULL && --o->refs == 0) || (d != NULL && --d->refs == 0);
  if (last)
    {
      /* no descriptor (the directory's was closed, and it is gone or
       * replaced): the mark stays until the host removes the directory or
       * the watcher stops; its events then find no node */
      if (!watch_stopped && dir_fd >= 0)
        (void)fanotify_mark (watch_fan, FAN_MARK_REMOVE, WATCH_MASK, dir_fd, ".");
      if (o != NULL)
        objs_remove (o);
      else
        {
          g_hash_table_remove (watch_by_handle, d);
          g_hash_table_remove (watch_by_obj, d);
          g_free (d);
        }
      fs_put_locked (key.dev);
    }
  g_mutex_unlock (&watch_lock);
}

bool
watch_children_decode (dev_t dev)
{
  bool r = false;

  g_mutex_lock (&watch_lock);
  for (gint i = 0; i < watch_n; i++)
    if (watch_fss[i].dev == dev)
      {
        r = watch_fss[i].local && watch_fss[i].decodes;
        break;
      }
  g_mutex_unlock (&watch_lock);
  return r;
}

/* The host object of a file id, as (st_dev, st_ino); false when it can't be
 * told (not a directory we marked on a filesystem we can't decode, or the
 * object is gone). */
static bool
resolve_fid (const fsid_t *fsid, struct file_handle *fh, dev_t *ret_dev, ino_t *ret_ino)
{
  WatchDir key;
  WatchDir *d;
  bool ok = false;

  if (fh->handle_bytes > MAX_HANDLE_SZ)
    return false;
  key.fsid = *fsid;
  key.handle_type = fh->handle_type;
  key.handle_bytes = fh->handle_bytes;
  memcpy (key.handle, fh->f_handle, fh->handle_bytes);
  g_mutex_lock (&watch_lock);
  d = g_hash_table_lookup (watch_by_handle, &key);
  if (d != NULL)
    {
      *ret_dev = d->dev;
      *ret_ino = d->ino;
      ok = true;
      goto out;
    }
  for (gint i = 0; i < watch_n; i++)
    {
      WatchFs *w = &watch_fss[i];
      struct stat st;
      int fd;

      if (!w->local || !w->decodes || memcmp (&w->fsid, fsid, sizeof *fsid) != 0)
        continue;
      if (handle_decodes (w, fh->handle_type, fh->handle_bytes))
        {
          *ret_dev = w->dev;
          *ret_ino = handle_ino (w, fh->f_handle);
          ok = true;
          break;
        }
      if (w->fd < 0)
        continue;
      fd = open_by_handle_at (w->fd, fh, O_PATH | O_CLOEXEC);
      if (fd < 0)
        break;
      if (fstat (fd, &st) == 0)
        {
          *ret_dev = st.st_dev;
          *ret_ino = st.st_ino;
          ok = true;
        }
      close (fd);
      break;
    }
out:
  g_mutex_unlock (&watch_lock);
  return ok;
}

/* M is a copy of the event's metadata; RAW the event in the read buffer. */
static void
handle_event (const struct fanotify_event_metadata *m, const char *raw)
{
  const char *p = raw + m->metadata_len;
  const char *end = raw + m->event_len;
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
  __atomic_add_fetch (&watch_events, 1, __ATOMIC_RELAXED);
  if (watch_lose_events)
    {
      /* FUSEBOX_TEST_LOSE_EVENTS=1: as if the queue had overflowed */
      c.what = FB_VIEW_CHANGE_ALL;
      view_changed (NULL, NULL, &c);
      return;
    }
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
          if (memchr (name, '\0', limit - name) == NULL || name[0] == '\0')
            ;
          else if (strcmp (name, ".") == 0)
            {
              /* an event on the marked directory itself */
              if (!have_object)
                have_object = resolve_fid ((const fsid_t *)&fid->fsid, fh, &c.dev, &c.ino);
            }
          else if (resolve_fid ((const fsid_t *)&fid->fsid, fh, &c.parent_dev, &c.parent_ino))
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
  /* The mount table: a mount moved, taken off or put over a directory
   * makes no fanotify event, and a directory a view holds (a mount's
   * source, a mount's root) may have left its path so.  Its poll says
   * POLLPRI once per change (mounts_poll), nothing to read. */
  int mounts = open ("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);

  for (;;)
    {
      struct pollfd pfd[2] = { { fan, POLLIN, 0 }, { mounts, POLLPRI, 0 } };
      ssize_t n;

      if (poll (pfd, mounts >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
        break;
      if (mounts >= 0 && (pfd[1].revents & (POLLPRI | POLLERR)) != 0)
        {
          FbViewChange c = { .what = FB_VIEW_CHANGE_MOUNTS };
          view_changed (NULL, NULL, &c);
        }
      if ((pfd[0].revents & POLLIN) == 0)
        continue;
      n = read (fan, buf, WATCH_BUF_SIZE);
      if (n < 0)
        {
          if (errno == EAGAIN || errno == EINTR)
            continue;
          break;
        }
      /* The kernel aligns each event to 4 bytes (FANOTIFY_EVENT_ALIGN), and
       * the metadata's 64-bit mask wants 8: copy the metadata out instead of
       * reading it in place (UBSan: misaligned member access).  The info
       * records after it need no more than 4. */
      for (ssize_t off = 0; off + (ssize_t)FAN_EVENT_METADATA_LEN <= n;)
        {
          struct fanotify_event_metadata m;

          memcpy (&m, buf + off, sizeof m);
          if (m.event_len < FAN_EVENT_METADATA_LEN || m.metadata_len < FAN_EVENT_METADATA_LEN ||
              m.metadata_len > m.event_len || off + (ssize_t)m.event_len > n)
            break;
          if (m.vers == FANOTIFY_METADATA_VERSION)
            {
              if (m.fd >= 0)
                close (m.fd);
              handle_event (&m, buf + off);
            }
          off += m.event_len;
        }
      /* Let events gather before the next read (unless the buffer came
       * back nearly full: then drain).  Most events are our own daemon's
       * (every write and create through a view makes one), and a wake-up
       * each cost this thread ~10% of a busy daemon's CPU; a host change
       * now shows at most WATCH_BATCH_US later. */
      if (n < WATCH_BUF_SIZE / 2)
        g_usleep (WATCH_BATCH_US);
    }
  /* the group is unusable: stop claiming coherence (replies from now on
   * get the short timeouts), and drop what was cached for long */
  if (mounts >= 0)
    close (mounts);
  g_atomic_int_set (&watch_active, 0);
  {
    FbViewChange all = { .what = FB_VIEW_CHANGE_ALL };
    view_changed (NULL, NULL, &all);
  }
  return NULL;
}

void
watch_test_ids_unread (bool unread)
{
  g_mutex_lock (&watch_lock);
  watch_ids_unread = unread;
  g_mutex_unlock (&watch_lock);
}

bool
fb_watch_start (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      int fan = -1;
      const char *no = g_getenv ("FUSEBOX_NO_FANOTIFY");
      const char *lose = g_getenv ("FUSEBOX_TEST_LOSE_EVENTS");
      const char *dirs_max = g_getenv ("FUSEBOX_TEST_WATCH_DIRS_MAX");

      watch_lose_events = lose != NULL && strcmp (lose, "1") == 0;
      if (dirs_max != NULL)
        watch_dirs_max = (guint)CLAMP (g_ascii_strtoull (dirs_max, NULL, 10), 1, WATCH_DIRS_MAX);

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

          g_mutex_lock (&watch_lock);
          watch_fan = fan;
          watch_by_obj = g_hash_table_new (obj_hash, obj_equal);
          watch_by_handle = g_hash_table_new (handle_hash, handle_equal);
          g_mutex_unlock (&watch_lock);
          GThread *t;

          sigfillset (&block);
          pthread_sigmask (SIG_BLOCK, &block, &old);
          t = g_thread_try_new ("fusebox-watch", watch_thread, GINT_TO_POINTER (fan), NULL);
          pthread_sigmask (SIG_SETMASK, &old, NULL);
          if (t != NULL)
            {
              g_thread_unref (t); /* it lives as long as the process */
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
fb_watch_stop (void)
{
  /* replies from now on get the short timeouts, and no mark is added */
  if (!g_atomic_int_compare_and_exchange (&watch_active, 1, 0))
    return;
  g_mutex_lock (&watch_lock);
  watch_stopped = true;
  /* every inode mark of the group; the nodes freed later remove none
   * (fs-watch.c "Stopping") */
  (void)fanotify_mark (watch_fan, FAN_MARK_FLUSH, 0, AT_FDCWD, NULL);
  g_mutex_unlock (&watch_lock);
}
