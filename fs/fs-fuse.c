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
 *  - Threads: fuse_session_loop_mt with clone_fd, up to max_threads workers,
 *    of which one at a time waits in the device's read (fs-fuse-gate.c);
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
 *    decode unprivileged); absences (negative entries) the same, 600 s
 *    in a watched directory (inval_absence_timeout, fs-fuse-inval.c);
 *    `--cache-timeout` fixes all three and turns the watcher
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
 *    time, and with absences kept 2 s a warm one still made ~400 (git
 *    probes `.gitignore` in every directory).  An absence has no node, so
 *    for events lost (an overflow) each long one given is remembered
 *    (bounded; past the bound, short) and expired with everything else; a
 *    name's invalidation is sent twice, the second a second later, because
 *    the kernel can't invalidate an entry whose LOOKUP answer is still on
 *    its way into the dcache.  Where nothing watches the host, 2 s bounds how
 *    long a grown file reads cut off at its old size (the kernel truncates
 *    reads at the cached i_size): coherence before speed.
 *    keep_cache keeps page-cache contents
 *    across opens while the host file's size and mtime are unchanged (and
 *    auto_inval_data drops them when a refreshed mtime differs); readdir
 *    results are cached the same way; symlink texts are cached (a new text
 *    is a new inode).  Requests are up to 1 MiB (max_write and max_pages);
 *    reads are asynchronous and directory operations parallel.
 *  - Invalidation: fs-fuse-inval.c.
 *  - Sessions (mount, serve, stop, abort, free): fs-fuse-session.c.
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

/* Largest readdir reply we build, whatever the kernel asks. */
#define READDIR_MAX (128 * 1024)

static GPrivate read_buf_key = G_PRIVATE_INIT (g_free);

void
fb_fuse_options_init (FbFuseOptions *options)
{
  *options = (FbFuseOptions){
    /* See "Caching" above: chosen per object (FB_FUSE_TIMEOUT_AUTO). */
    .entry_timeout = FB_FUSE_TIMEOUT_AUTO,
    .attr_timeout = FB_FUSE_TIMEOUT_AUTO,
    .negative_timeout = FB_FUSE_TIMEOUT_AUTO,
    .max_threads = 16,
    .allow_other = geteuid () == 0,
    .auto_unmount = true,
    .fsname = "fusebox",
  };
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

/* What an operation on the view starts from: the session, and who asks
 * (with the ids the host knows). */
typedef struct
{
  FbFuse *f;
  FbViewCaller caller;
} Req;

static Req
req_begin (fuse_req_t req)
{
  const struct fuse_ctx *ctx = fuse_req_ctx (req);
  Req q = { .f = req_fuse (req) };
  const FbFuseIdMap *map = &q.f->options.id_map;

  q.caller.pid = ctx->pid;
  q.caller.unlogged = warm_is_refresher (q.f, ctx->pid);
  q.caller.uid = fb_fuse_id_map_uid_to_host (map, ctx->uid);
  q.caller.gid = fb_fuse_id_map_gid_to_host (map, ctx->gid);
  q.caller.umask = 0; /* the kernel applied it (no FUSE_CAP_DONT_MASK) */
  return q;
}

/* Every attribute the kernel gets passes here.  A directory's host st_nlink
 * is 2 + its subdirectories, hidden ones included: passed through, `stat`
 * would tell that a hidden subdirectory exists.  1 is what btrfs and many
 * FUSE filesystems report, and what find/fts read as "unknown" (no
 * leaf optimisation), so nothing below a directory shows in its stat.
 * Likewise its size: on tmpfs and btrfs st_size grows with every name,
 * and everywhere st_blocks grows with enough of them; every directory
 * shows as a one-block directory of ext4 does (4096 bytes, 8 blocks). */
static void
attr_out (FbFuse *f, struct stat *st)
{
  fb_fuse_id_map_attr (&f->options.id_map, st);
  fb_view_stat_mask_dir (st);
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

/* The attribute timeout of INO (NODE, attributes ST).  The root of a
 * mount on the host is never cached (see fb_fuse_mount). */
static double
attr_timeout (FbFuse *f, fuse_ino_t ino, FbViewNode *node, const struct stat *st)
{
  if (ino == FUSE_ROOT_ID && f->root_uncached)
    return 0;
  return cache_timeout (f, f->options.attr_timeout, node, st);
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
  /* the view's memory budget (fs.h, Bounds): past three quarters, the
   * kernel is asked to forget its oldest names */
  if (fb_view_count_nodes (f->view) > fb_view_get_node_max (f->view) / 4 * 3)
    inval_evict_request (f);
}

/* What an operation that finds or makes a name answers with: the node (a
 * reference of ours) and its attributes. */
typedef struct
{
  FbViewNode *node;
  struct stat st;
} Made;

/* The answer to an operation that returned R and filled M. */
static void
reply_made (fuse_req_t req, FbFuse *f, int r, Made *m)
{
  if (r < 0)
    fuse_reply_err (req, -r);
  else
    {
      reply_entry (req, f, m->node, &m->st);
      fb_view_node_unref (m->node);
    }
}

/* The attributes ST of INO, after an operation that returned R. */
static void
reply_attr (fuse_req_t req, FbFuse *f, fuse_ino_t ino, int r, struct stat *st)
{
  if (r < 0)
    fuse_reply_err (req, -r);
  else
    {
      double timeout = attr_timeout (f, ino, ino_node (f, ino), st);
      attr_out (f, st);
      fuse_reply_attr (req, st, timeout);
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

/* FILE (a file or a directory) once the kernel no longer holds it. */
static void
files_release (FbFuse *f, FbViewFile *file)
{
  files_remove (f, file);
  if (fb_view_file_is_dir (file))
    fb_view_releasedir (f->view, file);
  else
    fb_view_release (f->view, file);
}

/* Hands the open FILE to the kernel in FI.  When the kernel never got the
 * reply (the caller was interrupted), no RELEASE will come: it is released
 * here. */
static void
reply_open (fuse_req_t req, FbFuse *f, struct fuse_file_info *fi, FbViewFile *file)
{
  fi->fh = (uint64_t)(uintptr_t)file;
  files_add (f, file);
  if (fuse_reply_open (req, fi) != 0)
    files_release (f, file);
}

/* --- lifecycle --------------------------------------------------------------- */

static void
op_init (void *userdata, struct fuse_conn_info *conn)
{
  FbFuse *f = userdata;
  unsigned want = FUSE_CAP_ASYNC_READ | FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO |
                  FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_CACHE_SYMLINKS | FUSE_CAP_ASYNC_DIO;

  conn->want |= want & conn->capable;
  /* Set-id bits and file capabilities come off in the view before every
   * write, truncation, fallocate and copy (view_kill_priv): the kernel
   * asks for it only on some routes (a buffered write by a caller without
   * CAP_FSETID), not for direct I/O or a shared mmap's writeback, and a
   * root daemon's own writes never clear them on the host.  Without
   * HANDLE_KILLPRIV the kernel still turns the kill of a chown into a
   * setattr of the mode, which the view does not do by itself. */
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
  Req q = req_begin (req);
  FbFuse *f = q.f;
  Made m = { NULL };
  guint64 gen = inval_name_gen (f);
  bool hidden = false;
  FbViewDeferred deferred = { 0 };
  int r;

  q.caller.ret_hidden = &hidden;
  q.caller.deferred = &deferred;
  r = fb_view_lookup (f->view, &q.caller, ino_node (f, parent), name, &m.node, &m.st);
  /* A hidden name is not remembered as absent: the kernel would answer
   * the next attempt (this command's or, in a shared view, another's)
   * from its cache, and no one would log it.  Nor is one the host does not
   * hold: answered from the cache, a repeat takes 2 µs where the daemon
   * takes 40, and the sandbox would tell which hidden names exist.  Its
   * ENOENT (reply_made) is a negative entry that expires at once; the log
   * folds the repeats. */
  if (r == -ENOENT && f->options.negative_timeout != 0 && !hidden)
    {
      /* A negative entry: the kernel remembers the absence for a while. */
      struct fuse_entry_param e = { 0 };
      e.entry_timeout = inval_absence_timeout (f, gen, parent, ino_node (f, parent), name);
      fuse_reply_entry (req, &e);
      fb_view_emit_deferred (f->view, &deferred);
      return;
    }
  reply_made (req, f, r, &m);
  /* a hidden name's record, after the answer (fs.h) */
  fb_view_emit_deferred (f->view, &deferred);
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
  Req q = req_begin (req);
  struct stat st;
  int r = fb_view_getattr (q.f->view, &q.caller, ino_node (q.f, ino), &st);

  /* fstat of a file whose name is gone (unlinked while open, renamed on
   * the host): a non-directory node has no descriptor of its own, its open
   * file does. */
  if ((r == -ENOENT || r == -ESTALE) && fi != NULL && fi->fh != 0 && !fb_view_file_is_dir (fi_file (fi)))
    r = fb_view_file_fstat (q.f->view, fi_file (fi), &st);
  reply_attr (req, q.f, ino, r, &st);
}

/* What a SETATTR asks to set, as FUSE and as the view say it. */
static const struct
{
  int fuse;
  FbViewSetFlags view;
} set_flags[] = {
  { FUSE_SET_ATTR_MODE, FB_VIEW_SET_MODE },
  { FUSE_SET_ATTR_UID, FB_VIEW_SET_UID },
  { FUSE_SET_ATTR_GID, FB_VIEW_SET_GID },
  { FUSE_SET_ATTR_SIZE, FB_VIEW_SET_SIZE },
  { FUSE_SET_ATTR_ATIME, FB_VIEW_SET_ATIME },
  { FUSE_SET_ATTR_MTIME, FB_VIEW_SET_MTIME },
  { FUSE_SET_ATTR_ATIME_NOW, FB_VIEW_SET_ATIME_NOW },
  { FUSE_SET_ATTR_MTIME_NOW, FB_VIEW_SET_MTIME_NOW },
};

static void
op_setattr (fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
  Req q = req_begin (req);
  FbFuse *f = q.f;
  FbViewSetattr sa = { 0 };
  struct stat st;
  int r;

  for (size_t i = 0; i < G_N_ELEMENTS (set_flags); i++)
    if (to_set & set_flags[i].fuse)
      sa.valid |= set_flags[i].view;
  sa.mode = attr->st_mode;
  sa.uid = attr->st_uid;
  sa.gid = attr->st_gid;
  if (f->options.id_map.enabled)
    {
      /* only the caller's own ids can be named inside; anything else is a
       * change of owner for the view to refuse */
      sa.uid = attr->st_uid == f->options.id_map.inside_uid ? f->options.id_map.host_uid : (uid_t)-1;
      sa.gid = attr->st_gid == f->options.id_map.inside_gid ? f->options.id_map.host_gid : (gid_t)-1;
    }
  sa.size = attr->st_size;
  sa.atime = attr->st_atim;
  sa.mtime = attr->st_mtim;
  if (sa.valid == 0)
    {
      /* ctime only (FUSE_SET_ATTR_CTIME) or nothing: answer the attributes */
      r = fb_view_getattr (f->view, &q.caller, ino_node (f, ino), &st);
    }
  else
    r = fb_view_setattr (f->view, &q.caller, ino_node (f, ino), fi != NULL ? fi_file (fi) : NULL, &sa, &st);
  reply_attr (req, f, ino, r, &st);
}

static void
op_readlink (fuse_req_t req, fuse_ino_t ino)
{
  Req q = req_begin (req);
  g_autofree char *text = NULL;
  int r = fb_view_readlink (q.f->view, &q.caller, ino_node (q.f, ino), &text);

  if (r < 0)
    fuse_reply_err (req, -r);
  else
    fuse_reply_readlink (req, text);
}

static void
op_mknod (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
  Req q = req_begin (req);
  Made m = { NULL };
  int r = fb_view_mknod (q.f->view, &q.caller, ino_node (q.f, parent), name, mode, rdev, &m.node, &m.st);

  reply_made (req, q.f, r, &m);
}

static void
op_mkdir (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
  Req q = req_begin (req);
  Made m = { NULL };
  int r = fb_view_mkdir (q.f->view, &q.caller, ino_node (q.f, parent), name, mode, &m.node, &m.st);

  reply_made (req, q.f, r, &m);
}

static void
op_symlink (fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
  Req q = req_begin (req);
  Made m = { NULL };
  int r = fb_view_symlink (q.f->view, &q.caller, ino_node (q.f, parent), name, link, &m.node, &m.st);

  reply_made (req, q.f, r, &m);
}

static void
op_link (fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
  Req q = req_begin (req);
  Made m = { NULL };
  int r = fb_view_link (q.f->view, &q.caller, ino_node (q.f, ino), ino_node (q.f, newparent), newname, &m.node, &m.st);

  reply_made (req, q.f, r, &m);
}

static void
op_unlink (fuse_req_t req, fuse_ino_t parent, const char *name)
{
  Req q = req_begin (req);

  fuse_reply_err (req, -fb_view_unlink (q.f->view, &q.caller, ino_node (q.f, parent), name));
}

static void
op_rmdir (fuse_req_t req, fuse_ino_t parent, const char *name)
{
  Req q = req_begin (req);

  fuse_reply_err (req, -fb_view_rmdir (q.f->view, &q.caller, ino_node (q.f, parent), name));
}

static void
op_rename (fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
           unsigned int flags)
{
  Req q = req_begin (req);

  fuse_reply_err (req, -fb_view_rename (q.f->view, &q.caller, ino_node (q.f, parent), name, ino_node (q.f, newparent),
                                        newname, flags));
}

/* --- files -------------------------------------------------------------------- */

/* Write-only opens bypass the kernel's page cache (direct_io).  FUSE mounts
 * never get SB_NOSEC, so every buffered write(2) first asks the daemon for
 * the file's security.capability (to know whether to clear it): one more
 * round trip per write.  The direct path skips that check (set-id bits and
 * capabilities still come off: the view takes them off before every
 * write), skips a copy into the FUSE page cache, and hands
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
  Req q = req_begin (req);
  FbViewFile *file = NULL;
  bool keep = false;
  int r = fb_view_open (q.f->view, &q.caller, ino_node (q.f, ino), fi->flags, &file, &keep);

  if (r < 0)
    {
      fuse_reply_err (req, -r);
      return;
    }
  fi->keep_cache = keep;
  fi->direct_io = write_only_direct (fi->flags);
  /* A read-only handle has nothing to write back at close(2), and locks
   * stay in the kernel: no FLUSH round trip per close (FOPEN_NOFLUSH,
   * Linux >= 5.16; older kernels ignore it).  The "close" record comes
   * with RELEASE either way. */
  fi->noflush = (fi->flags & O_ACCMODE) == O_RDONLY;
  reply_open (req, q.f, fi, file);
}

static void
op_create (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi)
{
  Req q = req_begin (req);
  FbFuse *f = q.f;
  FbViewFile *file = NULL;
  FbViewNode *node = NULL;
  struct fuse_entry_param e;
  struct stat st;
  int r = fb_view_create (f->view, &q.caller, ino_node (f, parent), name, fi->flags, mode, &file, &node, &st);

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
      files_release (f, file);
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

/* The answer to a write that returned N: the bytes written, or -errno. */
static void
reply_written (fuse_req_t req, gssize n)
{
  if (n < 0)
    fuse_reply_err (req, (int)-n);
  else
    fuse_reply_write (req, (size_t)n);
}

static void
op_write_buf (fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off, struct fuse_file_info *fi)
{
  FbFuse *f = req_fuse (req);
  WriteBuf wb = { bufv };

  if (fuse_buf_size (bufv) > FB_VIEW_IO_MAX)
    {
      fuse_reply_err (req, EINVAL);
      return;
    }
  reply_written (req, fb_view_write_with (f->view, fi_file (fi), off, copy_bufvec, &wb));
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
  files_release (req_fuse (req), fi_file (fi));
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

  reply_written (req, fb_view_copy_file_range (f->view, fi_file (fi_in), off_in, fi_file (fi_out), off_out, len,
                                               (unsigned int)flags));
}

/* --- directories --------------------------------------------------------------- */

static void
op_opendir (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
  Req q = req_begin (req);
  FbViewFile *dir = NULL;
  bool keep = false;
  int r;

  if (q.f->stateless_dirs)
    {
      /* ENOSYS here tells the kernel to stop sending OPENDIR (and
       * RELEASEDIR) and to cache listings (FOPEN_KEEP_CACHE |
       * FOPEN_CACHE_DIR); the first READDIR asks the policy instead. */
      fuse_reply_err (req, ENOSYS);
      return;
    }

  r = fb_view_opendir (q.f->view, &q.caller, ino_node (q.f, ino), &dir, &keep);
  if (r < 0)
    {
      fuse_reply_err (req, -r);
      return;
    }
  /* The kernel may cache the listing (the policy is static; the host's
   * changes show when the directory's mtime does) and keep it across
   * opendir while the mtime is unchanged. */
  fi->cache_readdir = 1;
  fi->keep_cache = keep;
  reply_open (req, q.f, fi, dir);
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
        e.attr = *entry->st; /* no node (nodeid 0: the kernel links nothing), just the type */
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
      Req q = req_begin (req);

      r = fb_view_readdir_at (f->view, &q.caller, ino_node (f, ino), off, plus, fill_dir, &d);
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
  else
    /* the kernel marks the directory's atime stale when it takes this
     * answer: the refresher asks for it again before the next command */
    warm_listed (f, ino_node (f, ino));
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
  if (fi->fh != 0)
    files_release (req_fuse (req), fi_file (fi));
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
  Req q = req_begin (req);
  struct statvfs st;
  int r = fb_view_statfs (q.f->view, &q.caller, ino_node (q.f, ino), &st);

  if (r < 0)
    fuse_reply_err (req, -r);
  else
    fuse_reply_statfs (req, &st);
}

static void
op_setxattr (fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size, int flags)
{
  Req q = req_begin (req);

  fuse_reply_err (req, -fb_view_setxattr (q.f->view, &q.caller, ino_node (q.f, ino), name, value, size, flags));
}

/* The buffer for an xattr read of SIZE bytes, SIZE capped at the largest
 * value we read; none for SIZE 0, which asks for the size alone. */
static char *
xattr_buf (size_t *size)
{
  *size = MIN (*size, FB_VIEW_XATTR_SIZE_MAX);
  return *size != 0 ? g_malloc (*size) : NULL;
}

/* The answer to an xattr read of SIZE bytes into BUF that returned N: the
 * size alone when SIZE is 0, else the bytes. */
static void
reply_xattr (fuse_req_t req, size_t size, const char *buf, gssize n)
{
  if (n < 0)
    fuse_reply_err (req, (int)-n);
  else if (size == 0)
    fuse_reply_xattr (req, (size_t)n);
  else
    fuse_reply_buf (req, buf, (size_t)n);
}

static void
op_getxattr (fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
  Req q = req_begin (req);
  g_autofree char *buf = xattr_buf (&size);

  reply_xattr (req, size, buf, fb_view_getxattr (q.f->view, &q.caller, ino_node (q.f, ino), name, buf, size));
}

static void
op_listxattr (fuse_req_t req, fuse_ino_t ino, size_t size)
{
  Req q = req_begin (req);
  g_autofree char *buf = xattr_buf (&size);

  reply_xattr (req, size, buf, fb_view_listxattr (q.f->view, &q.caller, ino_node (q.f, ino), buf, size));
}

static void
op_removexattr (fuse_req_t req, fuse_ino_t ino, const char *name)
{
  Req q = req_begin (req);

  fuse_reply_err (req, -fb_view_removexattr (q.f->view, &q.caller, ino_node (q.f, ino), name));
}

static void
op_access (fuse_req_t req, fuse_ino_t ino, int mask)
{
  Req q = req_begin (req);

  fuse_reply_err (req, -fb_view_access (q.f->view, &q.caller, ino_node (q.f, ino), mask));
}

/* Everything not here (locks stay in the kernel, ioctl, bmap, poll) gets
 * ENOSYS from libfuse. */
const struct fuse_lowlevel_ops fb_fuse_ops = {
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
