/* fusebox — the libfuse low-level adapter over the view.
 *
 * Design:
 *  - Every decision is the view's (fs/fs.h); this file only translates
 *    between the kernel's requests and view calls.  A FUSE inode number is
 *    the address of an FbViewNode (the root is FUSE_ROOT_ID); the node's
 *    kernel lookup count keeps it alive until the kernel forgets it, and its
 *    generation number tells a reused address apart.  File handles are
 *    FbViewFile pointers.
 *  - Every op_<name> ends in exactly one fuse_reply_*.  Request fields come
 *    from the kernel, but names and sizes originate in the sandbox: the view
 *    validates names, and sizes are clamped to documented bounds here.
 *  - Threads: fuse_session_loop_mt with clone_fd, up to max_threads workers;
 *    the view is thread-safe.  Worker threads block SIGINT/SIGTERM/SIGHUP/
 *    SIGQUIT/SIGPIPE so the main loop gets them.  Nothing here calls
 *    fuse_lowlevel_notify_inval_* (that would deadlock inside an op): the
 *    notifier thread does (fs-fuse-inval.c).
 *  - Caching.  Entries and attributes are kept per object: 600 s
 *    (FB_FUSE_TIMEOUT_COHERENT) when the host watcher (fs-watch.c) covers
 *    it (fb_view_node_watched: a directory with its inode mark, or a file
 *    with one link in such a directory), 2 s otherwise
 *    (FUSEBOX_NO_FANOTIFY=1, fanotify unavailable, a network or FUSE
 *    filesystem, a mark refused: fs.fanotify.max_user_marks reached, a
 *    hard-linked file, a file on a filesystem whose file ids we can't
 *    decode unprivileged); absences (negative entries) 2 s; `--cache-timeout` fixes all three and turns the watcher
 *    off.  Why long is safe: the policy is static during a run, so a cached
 *    answer never grants what a fresh one would refuse; a change made
 *    through this mount updates the kernel's caches with the reply; one
 *    made through any other view in this process (the remote API's fs/
 *    calls, another sandbox's mount) or through another name of a
 *    hard-linked inode is invalidated at once, and so is one made on the
 *    host by another process, from its fanotify event (fs-fuse-inval.c).
 *    Why 600 s and not more: what no event reports (writes through a shared
 *    mmap on the host, host mounts appearing under a watched tree) is
 *    still bounded, at ten minutes, while a tool run again after any
 *    shorter pause (git status, find, a build) finds every name cached: with
 *    2 s a cold `git status` made 10,500 lookups and took 5x the host's
 *    time.  Absences stay 2 s: a creation event invalidates them, but when
 *    events are lost only the nodes we know can be invalidated, and an
 *    absence has none.  Where nothing watches the host, 2 s bounds how
 *    long a grown file reads cut off at its old size (the kernel truncates
 *    reads at the cached i_size): coherence before speed.
 *    keep_cache keeps page-cache contents
 *    across opens while the host file's size and mtime are unchanged (and
 *    auto_inval_data drops them when a refreshed mtime differs); readdir
 *    results are cached the same way; symlink texts are cached (a new text
 *    is a new inode).  Requests are up to 1 MiB (max_write and max_pages);
 *    reads are asynchronous and directory operations parallel.
 *  - Invalidation: fs-fuse-inval.c.
 */
#include "fs/fs-fuse-private.h"

#include <fuse_lowlevel.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* The signal fb_fuse_abort() sends to the FUSE threads (see there). */
#define FB_FUSE_WAKE_SIGNAL (SIGRTMIN + 4)

/* Largest readdir reply we build, whatever the kernel asks. */
#define READDIR_MAX (128 * 1024)

static GPrivate read_buf_key = G_PRIVATE_INIT (g_free);

void
fb_fuse_options_init (FbFuseOptions *options)
{
  memset (options, 0, sizeof *options);
  /* See "Caching" above: chosen per filesystem (FB_FUSE_TIMEOUT_AUTO),
   * 2 s for absences. */
  options->entry_timeout = FB_FUSE_TIMEOUT_AUTO;
  options->attr_timeout = FB_FUSE_TIMEOUT_AUTO;
  options->negative_timeout = 2.0;
  options->max_threads = 16;
  options->allow_other = geteuid () == 0;
  options->auto_unmount = true;
  options->fsname = "fusebox";
}

static FbFuse *
req_fuse (fuse_req_t req)
{
  return fuse_req_userdata (req);
}

static FbViewNode *
ino_node (FbFuse *f, fuse_ino_t ino)
{
  return ino == FUSE_ROOT_ID ? f->root : (FbViewNode *)(uintptr_t)ino;
}

static FbViewFile *
fi_file (struct fuse_file_info *fi)
{
  return (FbViewFile *)(uintptr_t)fi->fh;
}

/* --- ids across a user namespace (FbFuseIdMap) ---------------------------- */

uid_t
fb_fuse_id_map_uid_to_host (const FbFuseIdMap *map, uid_t inside)
{
  if (!map->enabled)
    return inside;
  return inside == map->inside_uid ? map->host_uid : map->overflow_uid;
}

gid_t
fb_fuse_id_map_gid_to_host (const FbFuseIdMap *map, gid_t inside)
{
  if (!map->enabled)
    return inside;
  return inside == map->inside_gid ? map->host_gid : map->overflow_gid;
}

void
fb_fuse_id_map_attr (const FbFuseIdMap *map, struct stat *st)
{
  if (!map->enabled)
    return;
  st->st_uid = st->st_uid == map->host_uid ? map->inside_uid : map->overflow_uid;
  st->st_gid = st->st_gid == map->host_gid ? map->inside_gid : map->overflow_gid;
}

static guint32
read_overflow_id (const char *path)
{
  g_autofree char *text = NULL;
  guint64 v;

  if (!g_file_get_contents (path, &text, NULL, NULL)
      || !g_ascii_string_to_unsigned (g_strstrip (text), 10, 0, G_MAXUINT32 - 1, &v, NULL))
    return 65534;
  return (guint32) v;
}

static void
req_caller (fuse_req_t req, FbViewCaller *caller)
{
  const struct fuse_ctx *ctx = fuse_req_ctx (req);
  const FbFuseIdMap *map = &req_fuse (req)->options.id_map;

  memset (caller, 0, sizeof *caller);
  caller->pid = ctx->pid;
  caller->uid = fb_fuse_id_map_uid_to_host (map, ctx->uid);
  caller->gid = fb_fuse_id_map_gid_to_host (map, ctx->gid);
  caller->umask = 0; /* the kernel applied it (no FUSE_CAP_DONT_MASK) */
}

/* Every attribute the kernel gets passes here.  A directory's host st_nlink
 * is 2 + its subdirectories, hidden ones included: passed through, `stat`
 * would tell that a hidden subdirectory exists.  1 is what btrfs and many
 * FUSE filesystems report, and what find/fts read as "unknown" (no
 * leaf optimisation), so nothing below a directory shows in its stat. */
static void
attr_out (FbFuse *f, struct stat *st)
{
  fb_fuse_id_map_attr (&f->options.id_map, st);
  if (S_ISDIR (st->st_mode))
    st->st_nlink = 1;
}

/* An entry or attribute timeout for NODE with attributes ST (see
 * "Caching"): the configured one, else long where host changes are
 * watched, short elsewhere. */
static double
cache_timeout (FbFuse *f, double configured, FbViewNode *node, const struct stat *st)
{
  if (configured >= 0)
    return configured;
  return f->coherent && node != NULL && fb_view_node_watched (node, st) ? FB_FUSE_TIMEOUT_COHERENT
                                                                          : FB_FUSE_TIMEOUT_SHORT;
}

const char *
fb_fuse_cache_mode (FbFuse *f)
{
  if (f->options.entry_timeout >= 0 && f->options.attr_timeout >= 0)
    return "fixed";
  return f->coherent ? "coherent" : "short";
}

static void
fill_entry (FbFuse *f, FbViewNode *node, const struct stat *st, struct fuse_entry_param *e)
{
  memset (e, 0, sizeof *e);
  e->ino = (fuse_ino_t)(uintptr_t)node;
  e->generation = fb_view_node_get_generation (node);
  e->attr = *st;
  attr_out (f, &e->attr);
  e->attr_timeout = cache_timeout (f, f->options.attr_timeout, node, st);
  e->entry_timeout = cache_timeout (f, f->options.entry_timeout, node, st);
}

/* Reply with NODE; the kernel's lookup count goes up only if it got it. */
static void
reply_entry (fuse_req_t req, FbFuse *f, FbViewNode *node, const struct stat *st)
{
  struct fuse_entry_param e;

  fill_entry (f, node, st, &e);
  fb_view_node_kernel_ref (node);
  if (fuse_reply_entry (req, &e) != 0)
    fb_view_node_kernel_forget (node, 1);
}

static void
reply_made (fuse_req_t req, FbFuse *f, int r, FbViewNode *node, const struct stat *st)
{
  if (r < 0)
    fuse_reply_err (req, -r);
  else
    {
      reply_entry (req, f, node, st);
      fb_view_node_unref (node);
    }
}

/* Open files the kernel holds.  A RELEASE queued just before the connection
 * ends (a lazy unmount right after the last close) is dropped by the kernel;
 * fb_fuse_free() releases what is left here, so every open still gets its
 * "close" record. */
static void
files_add (FbFuse *f, FbViewFile *file)
{
  g_mutex_lock (&f->files_lock);
  g_hash_table_add (f->files, file);
  g_mutex_unlock (&f->files_lock);
}

static void
files_remove (FbFuse *f, FbViewFile *file)
{
  g_mutex_lock (&f->files_lock);
  g_hash_table_remove (f->files, file);
  g_mutex_unlock (&f->files_lock);
}

/* --- lifecycle --------------------------------------------------------------- */

static void
op_init (void *userdata, struct fuse_conn_info *conn)
{
  FbFuse *f = userdata;
  unsigned want = FUSE_CAP_ASYNC_READ | FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO |
                  FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_CACHE_SYMLINKS | FUSE_CAP_ASYNC_DIO;

  conn->want |= want & conn->capable;
  /* The kernel clears set-id bits on write and truncate itself (a setattr
   * we pass through); with HANDLE_KILLPRIV it would be up to us, and a root
   * daemon's writes never clear them on the host. */
  conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
  /* Locks stay in the kernel, local to the mount: a sandbox can't block a
   * host process with a lock, and no lock op reaches us. */
  conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
  /* Writes go to the host as they come: the writeback cache would move
   * mtime bookkeeping into the kernel and blur the per-handle byte counts. */
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  /* No splice: with SPLICE_READ libfuse reads every request through a pipe,
   * one more system call for each small one (lookups, getattr), which is
   * most of a `find` or `git status`; large writes gain less than that
   * (write-only opens already skip the FUSE page cache, see op_open). */
  conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
  /* Directories without OPENDIR/RELEASEDIR: the kernel then keeps each
   * listing cached (until the directory's mtime changes) and a warm `find`
   * or `git status` costs no round trip per directory.  Listings are served
   * from the node and the offset (fb_view_readdir_at), deciding again at
   * every request. */
  f->stateless_dirs = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0;
  conn->max_write = FB_VIEW_IO_MAX;
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  conn->time_gran = 1;
}

static void
op_destroy (void *userdata)
{
}

/* --- names ------------------------------------------------------------------- */

static void
op_lookup (fuse_req_t req, fuse_ino_t parent, const char *name)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  FbViewNode *node = NULL;
  struct stat st;
  int r;

  req_caller (req, &caller);
  r = fb_view_lookup (f->view, &caller, ino_node (f, parent), name, &node, &st);
  if (r == -ENOENT && f->options.negative_timeout > 0)
    {
      /* A negative entry: the kernel remembers the absence for a while. */
      struct fuse_entry_param e = { 0 };
      e.entry_timeout = f->options.negative_timeout;
      fuse_reply_entry (req, &e);
      return;
    }
  reply_made (req, f, r, node, &st);
}

static void
op_forget (fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
  FbFuse *f = req_fuse (req);

  if (ino != FUSE_ROOT_ID)
    fb_view_node_kernel_forget (ino_node (f, ino), nlookup);
  fuse_reply_none (req);
}

static void
op_forget_multi (fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
  FbFuse *f = req_fuse (req);

  for (size_t i = 0; i < count; i++)
    if (forgets[i].ino != FUSE_ROOT_ID)
      fb_view_node_kernel_forget (ino_node (f, forgets[i].ino), forgets[i].nlookup);
  fuse_reply_none (req);
}

static void
op_getattr (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  struct stat st;
  int r;

  req_caller (req, &caller);
  r = fb_view_getattr (f->view, &caller, ino_node (f, ino), &st);
  /* fstat of a file whose name is gone (unlinked while open, renamed on
   * the host): a non-directory node has no descriptor of its own, its open
   * file does. */
  if ((r == -ENOENT || r == -ESTALE) && fi != NULL && fi->fh != 0 && !fb_view_file_is_dir (fi_file (fi)))
    r = fb_view_file_fstat (f->view, fi_file (fi), &st);
  if (r < 0)
    fuse_reply_err (req, -r);
  else
    {
      double timeout = cache_timeout (f, f->options.attr_timeout, ino_node (f, ino), &st);
      attr_out (f, &st);
      fuse_reply_attr (req, &st, timeout);
    }
}

static void
op_setattr (fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  FbViewSetattr sa = { 0 };
  struct stat st;
  int r;

  req_caller (req, &caller);
  if (to_set & FUSE_SET_ATTR_MODE)
    sa.valid |= FB_VIEW_SET_MODE;
  if (to_set & FUSE_SET_ATTR_UID)
    sa.valid |= FB_VIEW_SET_UID;
  if (to_set & FUSE_SET_ATTR_GID)
    sa.valid |= FB_VIEW_SET_GID;
  if (to_set & FUSE_SET_ATTR_SIZE)
    sa.valid |= FB_VIEW_SET_SIZE;
  if (to_set & FUSE_SET_ATTR_ATIME)
    sa.valid |= FB_VIEW_SET_ATIME;
  if (to_set & FUSE_SET_ATTR_MTIME)
    sa.valid |= FB_VIEW_SET_MTIME;
  if (to_set & FUSE_SET_ATTR_ATIME_NOW)
    sa.valid |= FB_VIEW_SET_ATIME_NOW;
  if (to_set & FUSE_SET_ATTR_MTIME_NOW)
    sa.valid |= FB_VIEW_SET_MTIME_NOW;
  sa.mode = attr->st_mode;
  sa.uid = attr->st_uid;
  sa.gid = attr->st_gid;
  if (f->options.id_map.enabled)
    {
      /* only the caller's own ids can be named inside; anything else is a
       * change of owner for the view to refuse */
      sa.uid = attr->st_uid == f->options.id_map.inside_uid ? f->options.id_map.host_uid : (uid_t) -1;
      sa.gid = attr->st_gid == f->options.id_map.inside_gid ? f->options.id_map.host_gid : (gid_t) -1;
    }
  sa.size = attr->st_size;
  sa.atime = attr->st_atim;
  sa.mtime = attr->st_mtim;
  if (sa.valid == 0)
    {
      /* ctime only (FUSE_SET_ATTR_CTIME) or nothing: answer the attributes */
      r = fb_view_getattr (f->view, &caller, ino_node (f, ino), &st);
    }
  else
    r = fb_view_setattr (f->view, &caller, ino_node (f, ino), fi != NULL ? fi_file (fi) : NULL, &sa, &st);
  if (r < 0)
    fuse_reply_err (req, -r);
  else
    {
      double timeout = cache_timeout (f, f->options.attr_timeout, ino_node (f, ino), &st);
      attr_out (f, &st);
      fuse_reply_attr (req, &st, timeout);
    }
}

static void
op_readlink (fuse_req_t req, fuse_ino_t ino)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  g_autofree char *text = NULL;
  int r;

  req_caller (req, &caller);
  r = fb_view_readlink (f->view, &caller, ino_node (f, ino), &text);
  if (r < 0)
    fuse_reply_err (req, -r);
  else
    fuse_reply_readlink (req, text);
}

static void
op_mknod (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  FbViewNode *node = NULL;
  struct stat st;
  int r;

  req_caller (req, &caller);
  r = fb_view_mknod (f->view, &caller, ino_node (f, parent), name, mode, rdev, &node, &st);
  reply_made (req, f, r, node, &st);
}

static void
op_mkdir (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  FbViewNode *node = NULL;
  struct stat st;
  int r;

  req_caller (req, &caller);
  r = fb_view_mkdir (f->view, &caller, ino_node (f, parent), name, mode, &node, &st);
  reply_made (req, f, r, node, &st);
}

static void
op_symlink (fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  FbViewNode *node = NULL;
  struct stat st;
  int r;

  req_caller (req, &caller);
  r = fb_view_symlink (f->view, &caller, ino_node (f, parent), name, link, &node, &st);
  reply_made (req, f, r, node, &st);
}

static void
op_link (fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  FbViewNode *node = NULL;
  struct stat st;
  int r;

  req_caller (req, &caller);
  r = fb_view_link (f->view, &caller, ino_node (f, ino), ino_node (f, newparent), newname, &node, &st);
  reply_made (req, f, r, node, &st);
}

static void
op_unlink (fuse_req_t req, fuse_ino_t parent, const char *name)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;

  req_caller (req, &caller);
  fuse_reply_err (req, -fb_view_unlink (f->view, &caller, ino_node (f, parent), name));
}

static void
op_rmdir (fuse_req_t req, fuse_ino_t parent, const char *name)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;

  req_caller (req, &caller);
  fuse_reply_err (req, -fb_view_rmdir (f->view, &caller, ino_node (f, parent), name));
}

static void
op_rename (fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
           unsigned int flags)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;

  req_caller (req, &caller);
  fuse_reply_err (
    req, -fb_view_rename (f->view, &caller, ino_node (f, parent), name, ino_node (f, newparent), newname, flags));
}

/* --- files -------------------------------------------------------------------- */

/* Write-only opens bypass the kernel's page cache (direct_io).  FUSE mounts
 * never get SB_NOSEC, so every buffered write(2) first asks the daemon for
 * the file's security.capability (to know whether to clear it): one more
 * round trip per write.  The direct path skips that check (set-id bits are
 * still cleared: the host kernel does it on our write, and the daemon
 * refuses to set them), skips a copy into the FUSE page cache, and hands
 * the caller's pages to the daemon.  Nothing reads through a write-only
 * handle, so no cache is lost; readers opened later see the new size and
 * mtime and drop stale pages (keep_cache is off when they changed). */
static bool
write_only_direct (int flags)
{
  return (flags & O_ACCMODE) == O_WRONLY;
}

static void
op_open (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  FbViewFile *file = NULL;
  bool keep = false;
  int r;

  req_caller (req, &caller);
  r = fb_view_open (f->view, &caller, ino_node (f, ino), fi->flags, &file, &keep);
  if (r < 0)
    {
      fuse_reply_err (req, -r);
      return;
    }
  fi->fh = (uint64_t)(uintptr_t)file;
  fi->keep_cache = keep;
  fi->direct_io = write_only_direct (fi->flags);
  files_add (f, file);
  if (fuse_reply_open (req, fi) != 0)
    {
      files_remove (f, file);
      fb_view_release (f->view, file);
    }
}

static void
op_create (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  FbViewFile *file = NULL;
  FbViewNode *node = NULL;
  struct fuse_entry_param e;
  struct stat st;
  int r;

  req_caller (req, &caller);
  r = fb_view_create (f->view, &caller, ino_node (f, parent), name, fi->flags, mode, &file, &node, &st);
  if (r < 0)
    {
      fuse_reply_err (req, -r);
      return;
    }
  fi->fh = (uint64_t)(uintptr_t)file;
  fi->direct_io = write_only_direct (fi->flags);
  fill_entry (f, node, &st, &e);
  fb_view_node_kernel_ref (node);
  files_add (f, file);
  if (fuse_reply_create (req, &e, fi) != 0)
    {
      fb_view_node_kernel_forget (node, 1);
      files_remove (f, file);
      fb_view_release (f->view, file);
    }
  fb_view_node_unref (node);
}

static void
op_read (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);
  char *buf = g_private_get (&read_buf_key);
  gssize n;

  /* One buffer per worker thread, of the largest request we accept. */
  if (buf == NULL)
    {
      buf = g_malloc (FB_VIEW_IO_MAX);
      g_private_set (&read_buf_key, buf);
    }
  n = fb_view_read (f->view, fi_file (fi), buf, MIN (size, FB_VIEW_IO_MAX), off);
  if (n < 0)
    fuse_reply_err (req, (int)-n);
  else
    fuse_reply_buf (req, buf, (size_t)n);
}

typedef struct
{
  struct fuse_bufvec *src;
} WriteBuf;

static gssize
copy_bufvec (int host_fd, off_t offset, gpointer user_data)
{
  WriteBuf *wb = user_data;
  struct fuse_bufvec dst = FUSE_BUFVEC_INIT (fuse_buf_size (wb->src));

  dst.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
  dst.buf[0].fd = host_fd;
  dst.buf[0].pos = offset;
  /* fuse_buf_copy splices when the request arrived in a pipe, else it
   * pwrites from memory; it returns the bytes written or -errno. */
  return fuse_buf_copy (&dst, wb->src, 0);
}

static void
op_write_buf (fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);
  WriteBuf wb = { bufv };
  gssize n;

  if (fuse_buf_size (bufv) > FB_VIEW_IO_MAX)
    {
      fuse_reply_err (req, EINVAL);
      return;
    }
  n = fb_view_write_with (f->view, fi_file (fi), off, copy_bufvec, &wb);
  if (n < 0)
    fuse_reply_err (req, (int)-n);
  else
    fuse_reply_write (req, (size_t)n);
}

static void
op_flush (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);

  fuse_reply_err (req, -fb_view_flush (f->view, fi_file (fi)));
}

static void
op_release (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);

  files_remove (f, fi_file (fi));
  fb_view_release (f->view, fi_file (fi));
  fuse_reply_err (req, 0);
}

static void
op_fsync (fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);

  fuse_reply_err (req, -fb_view_fsync (f->view, fi_file (fi), datasync != 0));
}

static void
op_fallocate (fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);

  fuse_reply_err (req, -fb_view_fallocate (f->view, fi_file (fi), mode, offset, length));
}

static void
op_lseek (fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);
  off_t r = fb_view_lseek (f->view, fi_file (fi), off, whence);

  if (r < 0)
    fuse_reply_err (req, (int)-r);
  else
    fuse_reply_lseek (req, r);
}

static void
op_copy_file_range (fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in, fuse_ino_t ino_out,
                    off_t off_out, struct fuse_file_info *fi_out, size_t len, int flags)
{
  FbFuse *f = req_fuse (req);
  gssize n;

  n = fb_view_copy_file_range (f->view, fi_file (fi_in), off_in, fi_file (fi_out), off_out, len, (unsigned int)flags);
  if (n < 0)
    fuse_reply_err (req, (int)-n);
  else
    fuse_reply_write (req, (size_t)n);
}

/* --- directories --------------------------------------------------------------- */

static void
op_opendir (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  FbViewFile *dir = NULL;
  bool keep = false;
  int r;

  if (f->stateless_dirs)
    {
      /* ENOSYS here tells the kernel to stop sending OPENDIR (and
       * RELEASEDIR) and to cache listings (FOPEN_KEEP_CACHE |
       * FOPEN_CACHE_DIR); the first READDIR asks the policy instead. */
      fuse_reply_err (req, ENOSYS);
      return;
    }

  req_caller (req, &caller);
  r = fb_view_opendir (f->view, &caller, ino_node (f, ino), &dir, &keep);
  if (r < 0)
    {
      fuse_reply_err (req, -r);
      return;
    }
  fi->fh = (uint64_t)(uintptr_t)dir;
  /* The kernel may cache the listing (the policy is static; the host's
   * changes show when the directory's mtime does) and keep it across
   * opendir while the mtime is unchanged. */
  fi->cache_readdir = 1;
  fi->keep_cache = keep;
  files_add (f, dir);
  if (fuse_reply_open (req, fi) != 0)
    {
      files_remove (f, dir);
      fb_view_releasedir (f->view, dir);
    }
}

typedef struct
{
  fuse_req_t req;
  FbFuse *f;
  char *buf;
  size_t size, pos;
  bool plus;
  GPtrArray *nodes; /* plus: nodes whose lookup count we raised */
} DirFill;

static bool
fill_dir (const FbViewDirEntry *entry, gpointer user_data)
{
  DirFill *d = user_data;
  size_t need;

  if (d->plus)
    {
      struct fuse_entry_param e = { 0 };

      if (entry->node != NULL)
        fill_entry (d->f, entry->node, entry->st, &e);
      else
        e.attr = *entry->st; /* "." and "..": no lookup, just the type */
      need = fuse_add_direntry_plus (d->req, d->buf + d->pos, d->size - d->pos, entry->name, &e, entry->next_offset);
      if (need > d->size - d->pos)
        return false;
      if (entry->node != NULL)
        {
          fb_view_node_kernel_ref (entry->node);
          g_ptr_array_add (d->nodes, entry->node);
        }
    }
  else
    {
      struct stat st = { 0 };

      st.st_ino = entry->ino;
      st.st_mode = DTTOIF (entry->type);
      need = fuse_add_direntry (d->req, d->buf + d->pos, d->size - d->pos, entry->name, &st, entry->next_offset);
      if (need > d->size - d->pos)
        return false;
    }
  d->pos += need;
  return true;
}

static void
do_readdir (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi, bool plus)
{
  FbFuse *f = req_fuse (req);
  g_autofree char *buf = NULL;
  DirFill d = { 0 };
  int r;

  d.req = req;
  d.f = f;
  d.size = MIN (size, READDIR_MAX);
  d.buf = buf = g_malloc (d.size);
  d.plus = plus;
  d.nodes = g_ptr_array_new ();
  if (fi->fh == 0)
    {
      FbViewCaller caller;
      req_caller (req, &caller);
      r = fb_view_readdir_at (f->view, &caller, ino_node (f, ino), off, plus, fill_dir, &d);
    }
  else
    r = fb_view_readdir (f->view, fi_file (fi), off, plus, fill_dir, &d);
  /* An error after some entries: return those, the error comes next time. */
  if (r < 0 && d.pos == 0)
    {
      for (guint i = 0; i < d.nodes->len; i++)
        fb_view_node_kernel_forget (d.nodes->pdata[i], 1);
      fuse_reply_err (req, -r);
    }
  else if (fuse_reply_buf (req, d.buf, d.pos) != 0)
    for (guint i = 0; i < d.nodes->len; i++)
      fb_view_node_kernel_forget (d.nodes->pdata[i], 1);
  g_ptr_array_unref (d.nodes);
}

static void
op_readdir (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
  do_readdir (req, ino, size, off, fi, false);
}

static void
op_readdirplus (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
  do_readdir (req, ino, size, off, fi, true);
}

static void
op_releasedir (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);

  if (fi->fh != 0)
    {
      files_remove (f, fi_file (fi));
      fb_view_releasedir (f->view, fi_file (fi));
    }
  fuse_reply_err (req, 0);
}

static void
op_fsyncdir (fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);

  if (fi->fh == 0)
    fuse_reply_err (req, -fb_view_fsyncdir_at (f->view, ino_node (f, ino), datasync != 0));
  else
    fuse_reply_err (req, -fb_view_fsync (f->view, fi_file (fi), datasync != 0));
}

/* --- the rest ------------------------------------------------------------------ */

static void
op_statfs (fuse_req_t req, fuse_ino_t ino)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  struct statvfs st;
  int r;

  req_caller (req, &caller);
  r = fb_view_statfs (f->view, &caller, ino_node (f, ino), &st);
  if (r < 0)
    fuse_reply_err (req, -r);
  else
    fuse_reply_statfs (req, &st);
}

static void
op_setxattr (fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size, int flags)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;

  req_caller (req, &caller);
  fuse_reply_err (req, -fb_view_setxattr (f->view, &caller, ino_node (f, ino), name, value, size, flags));
}

static void
op_getxattr (fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  g_autofree char *buf = NULL;
  gssize n;

  req_caller (req, &caller);
  if (size == 0)
    {
      n = fb_view_getxattr (f->view, &caller, ino_node (f, ino), name, NULL, 0);
      if (n < 0)
        fuse_reply_err (req, (int)-n);
      else
        fuse_reply_xattr (req, (size_t)n);
      return;
    }
  size = MIN (size, FB_VIEW_XATTR_SIZE_MAX);
  buf = g_malloc (size);
  n = fb_view_getxattr (f->view, &caller, ino_node (f, ino), name, buf, size);
  if (n < 0)
    fuse_reply_err (req, (int)-n);
  else
    fuse_reply_buf (req, buf, (size_t)n);
}

static void
op_listxattr (fuse_req_t req, fuse_ino_t ino, size_t size)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;
  g_autofree char *buf = NULL;
  gssize n;

  req_caller (req, &caller);
  if (size == 0)
    {
      n = fb_view_listxattr (f->view, &caller, ino_node (f, ino), NULL, 0);
      if (n < 0)
        fuse_reply_err (req, (int)-n);
      else
        fuse_reply_xattr (req, (size_t)n);
      return;
    }
  size = MIN (size, FB_VIEW_XATTR_SIZE_MAX);
  buf = g_malloc (size);
  n = fb_view_listxattr (f->view, &caller, ino_node (f, ino), buf, size);
  if (n < 0)
    fuse_reply_err (req, (int)-n);
  else
    fuse_reply_buf (req, buf, (size_t)n);
}

static void
op_removexattr (fuse_req_t req, fuse_ino_t ino, const char *name)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;

  req_caller (req, &caller);
  fuse_reply_err (req, -fb_view_removexattr (f->view, &caller, ino_node (f, ino), name));
}

static void
op_access (fuse_req_t req, fuse_ino_t ino, int mask)
{
  FbFuse *f = req_fuse (req);
  FbViewCaller caller;

  req_caller (req, &caller);
  fuse_reply_err (req, -fb_view_access (f->view, &caller, ino_node (f, ino), mask));
}

/* Everything not here (locks stay in the kernel, ioctl, bmap, poll) gets
 * ENOSYS from libfuse. */
static const struct fuse_lowlevel_ops fb_fuse_ops = {
  .init = op_init,
  .destroy = op_destroy,
  .lookup = op_lookup,
  .forget = op_forget,
  .forget_multi = op_forget_multi,
  .getattr = op_getattr,
  .setattr = op_setattr,
  .readlink = op_readlink,
  .mknod = op_mknod,
  .mkdir = op_mkdir,
  .symlink = op_symlink,
  .link = op_link,
  .unlink = op_unlink,
  .rmdir = op_rmdir,
  .rename = op_rename,
  .open = op_open,
  .create = op_create,
  .read = op_read,
  .write_buf = op_write_buf,
  .flush = op_flush,
  .release = op_release,
  .fsync = op_fsync,
  .fallocate = op_fallocate,
  .lseek = op_lseek,
  .copy_file_range = op_copy_file_range,
  .opendir = op_opendir,
  .readdir = op_readdir,
  .readdirplus = op_readdirplus,
  .releasedir = op_releasedir,
  .fsyncdir = op_fsyncdir,
  .statfs = op_statfs,
  .setxattr = op_setxattr,
  .getxattr = op_getxattr,
  .listxattr = op_listxattr,
  .removexattr = op_removexattr,
  .access = op_access,
};

/* --- sessions ------------------------------------------------------------------- */

/* The view holds one descriptor per directory the kernel remembers (and one
 * per open file): a `find` over a large tree needs more than the usual soft
 * limit of 1024.  The hard limit is the administrator's bound; the soft one
 * is raised to it, once per process. */
static void
raise_nofile_limit (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      struct rlimit rl;
      if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max)
        {
          rl.rlim_cur = rl.rlim_max;
          (void)setrlimit (RLIMIT_NOFILE, &rl);
        }
      g_once_init_leave (&once, 1);
    }
}

int
fb_fuse_new (FbView *view, const FbFuseOptions *options, FbFuse **ret_fuse)
{
  FbFuse *f = g_new0 (FbFuse, 1);

  raise_nofile_limit ();
  f->view = fb_view_ref (view);
  if (options != NULL)
    f->options = *options;
  else
    fb_fuse_options_init (&f->options);
  f->fsname = g_strdup (f->options.fsname != NULL ? f->options.fsname : "fusebox");
  f->options.fsname = f->fsname;
  if (f->options.max_threads == 0)
    f->options.max_threads = 16;
  if (f->options.id_map.enabled && f->options.id_map.overflow_uid == 0)
    f->options.id_map.overflow_uid = read_overflow_id ("/proc/sys/kernel/overflowuid");
  if (f->options.id_map.enabled && f->options.id_map.overflow_gid == 0)
    f->options.id_map.overflow_gid = read_overflow_id ("/proc/sys/kernel/overflowgid");
  /* --uid 65534: "someone else" must still not read as the caller; -1 is
   * unmapped in every namespace and shows as the overflow id too */
  if (f->options.id_map.enabled && f->options.id_map.overflow_uid == f->options.id_map.inside_uid)
    f->options.id_map.overflow_uid = (uid_t) -1;
  if (f->options.id_map.enabled && f->options.id_map.overflow_gid == f->options.id_map.inside_gid)
    f->options.id_map.overflow_gid = (gid_t) -1;
  f->root = fb_view_get_root (view);
  g_mutex_init (&f->files_lock);
  f->files = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_mutex_init (&f->inval_lock);
  g_cond_init (&f->inval_cond);
  g_queue_init (&f->inval_queue);
  f->inval_pending = g_hash_table_new (g_str_hash, g_str_equal);
  f->sync = g_new0 (InvalSync, 1);
  f->sync->ref = 1;
  g_mutex_init (&f->sync->lock);
  g_cond_init (&f->sync->cond);
  *ret_fuse = f;
  return 0;
}

/* fsname goes into a comma-separated option string: keep it to safe bytes. */
static char *
safe_fsname (const char *name)
{
  char *s = g_strdup (name);

  for (char *p = s; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && *p != '-' && *p != '_' && *p != '.' && *p != ':')
      *p = '_';
  return s;
}

static int
session_new (FbFuse *f, bool mount_options)
{
  g_autofree char *fsname = safe_fsname (f->fsname);
  g_autofree char *opts = NULL;
  char *argv[4];
  struct fuse_args args;

  if (f->se != NULL)
    return -EALREADY;
  /* default_permissions: the kernel checks the host's modes and owners
   * against the caller, so a root daemon can't be used to read what the
   * caller couldn't (/etc/shadow).  allow_other: callers other than the
   * daemon's user may use the mount (the sandbox's uid, root's callers). */
  opts = g_strdup_printf ("default_permissions,fsname=%s,subtype=fusebox%s%s", fsname,
                          mount_options && f->options.allow_other ? ",allow_other" : "",
                          mount_options && f->options.auto_unmount ? ",auto_unmount" : "");
  argv[0] = (char *)"fusebox";
  argv[1] = (char *)"-o";
  argv[2] = opts;
  argv[3] = NULL;
  args = (struct fuse_args)FUSE_ARGS_INIT (3, argv);
  f->se = fuse_session_new (&args, &fb_fuse_ops, sizeof fb_fuse_ops, f);
  fuse_opt_free_args (&args);
  if (f->se == NULL)
    return -EINVAL;
  return 0;
}

/* The device number of the fuse mount at REAL (a canonical path resolved
 * before mounting), from mountinfo: a stat would ask our own filesystem,
 * which does not serve yet, and hang. */
static dev_t
mount_dev (const char *real)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  dev_t dev = 0;

  if (real == NULL || !g_file_get_contents ("/proc/self/mountinfo", &text, NULL, NULL))
    return 0;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      unsigned maj, min;
      char mnt[4096];
      /* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ..." (octal escapes in paths are
       * rare enough for mount points we were given) */
      if (sscanf (lines[i], "%*u %*u %u:%u %*s %4095s", &maj, &min, mnt) == 3 && strcmp (mnt, real) == 0 &&
          strstr (lines[i], " - fuse") != NULL)
        dev = makedev (maj, min); /* the last one is on top */
    }
  return dev;
}

int
fb_fuse_mount (FbFuse *f, const char *mountpoint)
{
  bool is_fd = g_str_has_prefix (mountpoint, "/dev/fd/");
  g_autofree char *real = is_fd ? NULL : realpath (mountpoint, NULL);
  int r;

  if (!is_fd && real == NULL)
    return -errno;
  r = session_new (f, !is_fd);
  if (r < 0)
    return r;
  if (fuse_session_mount (f->se, mountpoint) != 0)
    {
      fuse_session_destroy (f->se);
      f->se = NULL;
      return -EIO;
    }
  if (!is_fd)
    {
      f->mountpoint = g_strdup (real);
      f->conn_dev = mount_dev (real);
    }
  return inval_start (f);
}

int
fb_fuse_serve_fd (FbFuse *f, int fd)
{
  g_autofree char *path = g_strdup_printf ("/dev/fd/%d", fd);

  return fb_fuse_mount (f, path);
}

char *
fb_fuse_kernel_mount_options (int fd, uid_t uid, gid_t gid, bool allow_other)
{
  return g_strdup_printf ("fd=%d,rootmode=40000,user_id=%u,group_id=%u,default_permissions%s", fd, (unsigned)uid,
                          (unsigned)gid, allow_other ? ",allow_other" : "");
}

int
fb_fuse_run (FbFuse *f)
{
  struct fuse_loop_config *cfg;
  int r;

  if (f->se == NULL)
    return -ENOTCONN;
  cfg = fuse_loop_cfg_create ();
  fuse_loop_cfg_set_max_threads (cfg, f->options.max_threads);
  fuse_loop_cfg_set_idle_threads (cfg, MAX (f->options.max_threads / 2, 1));
  /* one /dev/fuse descriptor per worker: no contention on a single one */
  fuse_loop_cfg_set_clone_fd (cfg, 1);
  r = fuse_session_loop_mt (f->se, cfg);
  fuse_loop_cfg_destroy (cfg);
  return r < 0 ? r : (r > 0 ? -EIO : 0);
}

static gpointer
serve_thread (gpointer data)
{
  FbFuse *f = data;

  f->result = fb_fuse_run (f);
  if (f->done != NULL)
    f->done (f->result, f->done_data);
  return NULL;
}

int
fb_fuse_start (FbFuse *f, FbFuseDoneFunc done, gpointer user_data)
{
  sigset_t block, old;
  g_autoptr (GError) error = NULL;

  if (f->se == NULL)
    return -ENOTCONN;
  if (f->thread != NULL)
    return -EALREADY;
  f->done = done;
  f->done_data = user_data;
  /* Workers inherit the mask: signals go to the main loop. */
  sigemptyset (&block);
  sigaddset (&block, SIGINT);
  sigaddset (&block, SIGTERM);
  sigaddset (&block, SIGHUP);
  sigaddset (&block, SIGQUIT);
  sigaddset (&block, SIGPIPE);
  pthread_sigmask (SIG_BLOCK, &block, &old);
  f->thread = g_thread_try_new ("fusebox-fuse", serve_thread, f, &error);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  return f->thread != NULL ? 0 : -EAGAIN;
}

int
fb_fuse_join (FbFuse *f)
{
  if (f->thread == NULL)
    return -ECHILD;
  g_thread_join (f->thread);
  f->thread = NULL;
  return f->result;
}

static int
run_fusermount_unmount (const char *mountpoint)
{
  const char *argv[] = { "fusermount3", "-u", "-q", "-z", "--", mountpoint, NULL };
  int status = 0;

  if (!g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                     NULL, &status, NULL))
    return -ENOENT;
  return g_spawn_check_wait_status (status, NULL) ? 0 : -EIO;
}

void
fb_fuse_stop (FbFuse *f)
{
  if (f->se == NULL)
    return;
  /* The session is not marked as exited: the workers keep answering (the
   * RELEASE of a file closed just now, the files still open in the detached
   * mount) until the kernel ends the connection and they read ENODEV. */
  if (f->mountpoint != NULL && !f->unmounted)
    {
      /* Lazily: the mount leaves the namespace now, the connection ends
       * when the last file open in it is closed. */
      if (umount2 (f->mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW) == 0 || errno == EINVAL ||
          run_fusermount_unmount (f->mountpoint) == 0)
        f->unmounted = true;
    }
  else if (f->mountpoint == NULL)
    {
      /* A served descriptor: the mount is in the sandbox's namespace and
       * ends with it; mark the session so that the workers leave at their
       * next request (fb_fuse_abort() wakes them now). */
      fuse_session_exit (f->se);
    }
}

static void
wake_handler (int sig)
{
  /* nothing: the point is the EINTR it causes */
}

/* Interrupt every FUSE thread's blocking read(): with the session marked as
 * exited, each worker then leaves its loop instead of waiting for a request
 * that may never come (a detached mount with a file still open in it).
 * The threads are found by name: all inherit "fusebox-fuse" from the
 * serving thread.  The signal's handler does nothing and is installed
 * without SA_RESTART. */
static int
interrupt_workers (void)
{
  struct sigaction sa = { 0 };
  g_autoptr (GDir) dir = NULL;
  const char *name;
  int n = 0;

  sa.sa_handler = wake_handler;
  sigemptyset (&sa.sa_mask);
  if (sigaction (FB_FUSE_WAKE_SIGNAL, &sa, NULL) < 0)
    return -errno;
  dir = g_dir_open ("/proc/self/task", 0, NULL);
  if (dir == NULL)
    return -ENOENT;
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *comm_path = g_build_filename ("/proc/self/task", name, "comm", NULL);
      g_autofree char *comm = NULL;
      pid_t tid = (pid_t)atoi (name);
      if (!g_file_get_contents (comm_path, &comm, NULL, NULL) || strcmp (g_strchomp (comm), "fusebox-fuse") != 0)
        continue;
      if (syscall (SYS_tgkill, getpid (), tid, FB_FUSE_WAKE_SIGNAL) == 0)
        n++;
    }
  return n > 0 ? 0 : -ESRCH;
}

int
fb_fuse_abort (FbFuse *f)
{
  g_autofree char *path = NULL;
  int fd;

  if (f->se == NULL)
    return -ENOTCONN;
  fuse_session_exit (f->se);
  /* The kernel's own switch when fusectl is mounted: pending requests fail
   * at once.  Otherwise the workers are woken and leave; closing the last
   * /dev/fuse descriptor (fb_fuse_free) then ends the connection. */
  if (f->conn_dev != 0)
    {
      path = g_strdup_printf ("/sys/fs/fuse/connections/%u/abort", minor (f->conn_dev));
      fd = open (path, O_WRONLY | O_CLOEXEC);
      if (fd >= 0)
        {
          bool ok = write (fd, "1", 1) == 1;
          close (fd);
          if (ok)
            return 0;
        }
    }
  return interrupt_workers ();
}

void
fb_fuse_free (FbFuse *f)
{
  if (f == NULL)
    return;
  if (f->thread != NULL)
    fb_fuse_join (f);
  inval_finish (f);
  if (f->se != NULL)
    {
      /* Unmount only what we mounted and did not unmount already: after a
       * lazy unmount the path may hold someone else's mount by now.  When
       * the connection is over (POLLERR), fuse_session_unmount only frees
       * its copy of the path. */
      struct pollfd pfd = { .fd = fuse_session_fd (f->se), .events = 0 };
      if ((f->mountpoint != NULL && !f->unmounted) ||
          (f->mountpoint != NULL && poll (&pfd, 1, 0) == 1 && (pfd.revents & POLLERR)))
        fuse_session_unmount (f->se);
      fuse_session_destroy (f->se);
    }
  /* Files whose RELEASE never came (see files_add) */
  {
    GHashTableIter iter;
    gpointer key;
    g_hash_table_iter_init (&iter, f->files);
    while (g_hash_table_iter_next (&iter, &key, NULL))
      {
        FbViewFile *file = key;
        if (fb_view_file_is_dir (file))
          fb_view_releasedir (f->view, file);
        else
          fb_view_release (f->view, file);
      }
    g_hash_table_destroy (f->files);
    g_mutex_clear (&f->files_lock);
  }
  g_hash_table_destroy (f->inval_pending);
  inval_sync_unref (f->sync);
  g_cond_clear (&f->inval_cond);
  g_mutex_clear (&f->inval_lock);
  fb_view_drop_kernel_refs (f->view);
  fb_view_node_unref (f->root);
  fb_view_unref (f->view);
  g_free (f->mountpoint);
  g_free (f->fsname);
  g_free (f);
}
