/* fusebox — the view's open files and directories.
 *
 * A host file is opened by reopening the node's O_PATH descriptor through
 * /proc/self/fd (never by path), only when it is a regular file or a
 * directory, and always O_NONBLOCK: the daemon never waits on a FIFO, a
 * device or a lease.  Access is decided at open from the node's decision;
 * reads and writes then only check the handle's mode, and count bytes (one
 * "close" event at release carries both counters).
 * Every operation that changes a file's contents (write, truncate, O_TRUNC,
 * fallocate, copy_file_range) first takes its privileges off, as the
 * kernel's kill-priv would for an unprivileged writer (view_kill_priv).
 * Directories are in fs-view-dir.c.
 */
#include "fs/fs-private.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

/* The kernel marks opens for execve() with __FMODE_EXEC in the flags FUSE
 * passes on; it is not an O_* flag, only a hint for the log. */
#define FB_OPEN_EXEC_HINT 040

FbViewFile *
view_file_new (FbViewNode *node, NodeState *st, int fd, FbViewFdAccount *account, int flags, FbAccess access,
               const FbViewCaller *caller)
{
  FbViewFile *file = g_new0 (FbViewFile, 1);
  FbView *view = node_view (node);
  int acc = flags & O_ACCMODE;

  file->node = fb_view_node_ref (node);
  file->state = node_state_ref (st);
  file->fd = fd;
  file->fd_account = account;
  if (node->reopen && fd >= 0)
    {
      NodeExtra *x = node_extra (node);
      g_mutex_lock (&x->lock);
      file->open_next = x->open_files;
      if (x->open_files != NULL)
        x->open_files->open_prev = file;
      x->open_files = file;
      g_mutex_unlock (&x->lock);
    }
  file->flags = flags;
  file->can_read = acc == O_RDONLY || acc == O_RDWR;
  file->can_write = acc == O_WRONLY || acc == O_RDWR;
  file->access = access;
  if (caller != NULL)
    {
      file->pid = caller->pid;
      file->uid = caller->uid;
      file->comm = g_strdup (caller->comm);
      file->session = g_strdup (caller->session);
    }
  /* The "close" record comes at release, when a short-lived opener may be
   * gone with its /proc entry: note its name now if it will be logged. */
  if (file->comm == NULL && file->pid > 0 && view->options.sink != NULL &&
      (view->options.log_level >= FB_LOG_LEVEL_OPENS || file->can_write) && access != FB_ACCESS_LIST)
    {
      char comm[32];
      view_caller_comm (view, file->pid, comm, sizeof comm);
      if (comm[0] != '\0')
        file->comm = g_strdup (comm);
    }
  /* ...and, in a view several commands share, whose command it is */
  if (view->options.owners != NULL && file->pid > 0 && file->session == NULL && view->options.sink != NULL &&
      (view->options.log_level >= FB_LOG_LEVEL_OPENS || file->can_write))
    file->owner = view->options.owners->owner_of (view->options.owners->data, file->pid);
  g_mutex_init (&file->dir_lock);
  return file;
}

void
view_file_free (FbViewFile *file)
{
  if (file->node->reopen && file->fd >= 0)
    {
      NodeExtra *x = node_extra (file->node);
      g_mutex_lock (&x->lock);
      if (file->open_prev != NULL)
        file->open_prev->open_next = file->open_next;
      else
        x->open_files = file->open_next;
      if (file->open_next != NULL)
        file->open_next->open_prev = file->open_prev;
      g_mutex_unlock (&x->lock);
    }
  if (file->fd >= 0)
    close (file->fd);
  if (file->fd_account != NULL)
    view_file_unclaim (node_view (file->node), file->fd_account); /* claimed before it was opened */
  if (file->snapshot != NULL)
    g_array_unref (file->snapshot);
  g_free (file->stream.buf);
  g_mutex_clear (&file->dir_lock);
  node_state_unref (file->state);
  if (file->owner != NULL)
    node_view (file->node)->options.owners->unref (file->owner);
  fb_view_node_unref (file->node);
  g_free (file->comm);
  g_free (file->session);
  g_free (file);
}

static FbAccess
open_access (int flags)
{
  if (flags & FB_OPEN_EXEC_HINT)
    return FB_ACCESS_EXEC;
  switch (flags & O_ACCMODE)
    {
      case O_WRONLY:
        return FB_ACCESS_WRITE;
      case O_RDWR:
        return FB_ACCESS_READWRITE;
      default:
        return (flags & O_TRUNC) ? FB_ACCESS_WRITE : FB_ACCESS_READ;
    }
}

/* The flags a host open keeps.  O_NONBLOCK: a regular file ignores it for
 * I/O but it turns a lease break or mandatory lock wait into an error
 * instead of a stuck worker.  Not O_DIRECT: the caller's O_DIRECT is served
 * by the kernel on its side of the mount (no FUSE page cache), while the
 * daemon's buffers (a request's data follows its header) are never aligned
 * as the host's O_DIRECT wants, so every such read and write got EINVAL. */
static int
host_open_flags (int flags)
{
  int keep = O_ACCMODE | O_APPEND | O_TRUNC | O_DSYNC | O_SYNC | O_LARGEFILE;

  return (flags & keep) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
}

/* keep_cache: the kernel may keep the pages it has for NODE when the host
 * file's size and mtime are those of the previous open. */
bool
node_stamp_compare (FbViewNode *node, const struct stat *st)
{
  NodeExtra *x = node_extra (node);
  bool same;

  g_mutex_lock (&x->lock);
  same = x->have_stamp && x->stamp_size == st->st_size && x->stamp_mtime.tv_sec == st->st_mtim.tv_sec &&
         x->stamp_mtime.tv_nsec == st->st_mtim.tv_nsec;
  x->have_stamp = true;
  x->stamp_size = st->st_size;
  x->stamp_mtime = st->st_mtim;
  g_mutex_unlock (&x->lock);
  return same;
}

/* --- kill-priv -------------------------------------------------------------- */

/* The attribute that holds a file's capabilities (XATTR_NAME_CAPS). */
#define CAPS_XATTR "security.capability"

/* The set-id bits a write takes off a file of MODE, as the kernel's
 * setattr_should_drop_suidgid() does for a writer without CAP_FSETID:
 * S_ISUID always, S_ISGID when group-exec is set (without it the bit gives
 * nothing at execve: it is the old mandatory-locking mark). */
static mode_t
priv_bits (mode_t mode)
{
  mode_t bits = 0;

  if (!S_ISREG (mode))
    return 0;
  if (mode & S_ISUID)
    bits |= S_ISUID;
  if ((mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
    bits |= S_ISGID;
  return bits;
}

/* The kernel clears set-id bits and file capabilities when a file is
 * written, but not for a writer holding CAP_FSETID, and a FUSE daemon
 * running as root holds it: its pwrite keeps `-rwsr-xr-x root` on the host
 * (and a write-only open, served with direct I/O, a shared mmap's
 * writeback, fallocate and copy_file_range never ask the daemon to clear
 * anything).  So the view does it itself, whoever the caller and whatever
 * route the kernel chose, before the contents change.  The mode is checked
 * at every write (one fstat: a chmod of a set-group-ID file may have added
 * group-exec since); a handle that found no capability does not look
 * again, because the view never sets security.* and the host's own
 * kill-priv takes a capability off with our write whoever we are. */
int
view_kill_priv (FbView *view, FbViewNode *node, FbViewFile *file)
{
  _fb_cleanup_fd_ int tmp = -1;
  bool by_path = file == NULL || file->fd < 0;
  bool changed = false;
  char proc[32];
  struct stat st;
  mode_t bits;
  int fd, r;

  if (node->kind != NODE_HOST || !S_ISREG (node->type))
    return 0;
  fd = by_path ? node_host_fd (node, &tmp) : file->fd;
  if (fd < 0)
    return fd == -1 ? -EBADF : fd;
  if (fstat (fd, &st) < 0)
    return -errno;
  proc_fd_path (proc, fd); /* an O_PATH descriptor takes no fchmod or fremovexattr */
  bits = priv_bits (st.st_mode);
  if (bits != 0)
    {
      mode_t mode = st.st_mode & 07777 & ~bits;
      r = (by_path ? chmod (proc, mode) : fchmod (fd, mode)) < 0 ? -errno : 0;
      /* EPERM: we neither own the file nor hold CAP_FOWNER, hence no
       * CAP_FSETID either, and the host's kill-priv clears the bits with
       * our write.  Anything else: better no write than a privileged file
       * with new contents. */
      if (r < 0 && r != -EPERM)
        return r;
      changed = r == 0;
    }
  if (by_path || !g_atomic_int_get (&file->caps_killed))
    {
      bool gone = true;
      if ((by_path ? getxattr (proc, CAPS_XATTR, NULL, 0) : fgetxattr (fd, CAPS_XATTR, NULL, 0)) >= 0)
        {
          r = (by_path ? removexattr (proc, CAPS_XATTR) : fremovexattr (fd, CAPS_XATTR)) < 0 ? -errno : 0;
          /* EPERM (no CAP_SETFCAP): the host's kill-priv removes it with
           * our write, which it does for every writer */
          if (r < 0 && r != -EPERM && r != -ENODATA)
            return r;
          changed |= r == 0;
          gone = r != -EPERM;
        }
      if (gone && !by_path)
        g_atomic_int_set (&file->caps_killed, 1);
    }
  if (changed)
    {
      /* Every node of the object, the one written through included: the
       * kernel keeps the mode it was last told.  Attributes only, so no
       * page of a write in flight is touched. */
      FbViewChange c = { 0 };
      c.what = FB_VIEW_CHANGE_ATTR;
      c.dev = node->dev;
      c.ino = node->ino;
      view_changed (view, NULL, &c);
    }
  return 0;
}

int
fb_view_open (FbView *view, const FbViewCaller *caller, FbViewNode *node, int flags, FbViewFile **ret_file,
              bool *ret_keep_cache)
{
  g_autoptr (NodeState) st = node_get_state (node);
  FbAccess access = open_access (flags);
  bool wants_write = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
  FbViewFdAccount *account = NULL;
  FbViewFile *file;
  struct stat hst;
  FbDecision d;
  int r, fd;

  r = check_access (st, wants_write ? NEED_WRITE : NEED_READ, &d);
  if (r < 0)
    {
      view_emit (view, caller, FB_OP_OPEN, st->path, NULL, access, d, -r, st->decision.rule);
      return r;
    }
  if (S_ISDIR (node->type))
    r = -EISDIR;
  else if (S_ISLNK (node->type))
    r = -ELOOP;
  else if (!S_ISREG (node->type))
    r = -ENXIO; /* FIFOs, sockets, devices: never opened by the daemon */
  if (r < 0)
    {
      view_emit (view, caller, FB_OP_OPEN, st->path, NULL, access, FB_DECISION_ALLOW, -r, st->decision.rule);
      return r;
    }
  /* the descriptor the sandbox will hold comes out of the caller's share
   * of the budget (fs-view-fd.c): EMFILE past it, for this caller only,
   * logged there */
  r = view_file_claim (view, caller, FB_OP_OPEN, st->path, access, &account);
  if (r < 0)
    return r;
  fd = node_reopen (node, host_open_flags (flags));
  if (fd < 0)
    {
      view_file_unclaim (view, account);
      view_emit (view, caller, FB_OP_OPEN, st->path, NULL, access, FB_DECISION_ALLOW, -fd, st->decision.rule);
      return fd;
    }
  if (ret_keep_cache != NULL)
    *ret_keep_cache = fstat (fd, &hst) == 0 && !(flags & O_TRUNC) && node_stamp_compare (node, &hst);
  file = view_file_new (node, st, fd, account, flags, access, caller);
  if (flags & O_TRUNC)
    {
      /* After the open, not before: an open that fails (ETXTBSY) truncates
       * nothing and must leave the bits, as the kernel's do_truncate does.
       * In between the file is empty. */
      r = view_kill_priv (view, node, file);
      if (r < 0)
        {
          view_file_free (file);
          return r;
        }
      view_changed_object (view, node, FB_VIEW_CHANGE_DATA);
    }
  *ret_file = file;
  return 0;
}

/* NAME in PARENT exists in the view: an ordinary open of it (lookup and
 * open, which refuse what create would not open), for fb_view_create. */
static int
open_existing (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, int flags,
               FbViewNode **ret_node, FbViewFile **ret_file, struct stat *ret_st)
{
  g_autoptr (FbViewNode) existing = NULL;
  int r;

  r = fb_view_lookup (view, caller, parent, name, &existing, ret_st);
  if (r < 0)
    return r;
  r = fb_view_open (view, caller, existing, flags & ~(O_CREAT | O_EXCL), ret_file, NULL);
  if (r == 0 && ret_node != NULL)
    *ret_node = g_steal_pointer (&existing);
  return r;
}

int
fb_view_create (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, int flags, mode_t mode,
                FbViewFile **ret_file, FbViewNode **ret_node, struct stat *ret_st)
{
  g_autoptr (NodeState) pst = node_get_state (parent);
  g_autoptr (NodeState) st = NULL;
  g_auto (ChildInfo) ci = { 0 };
  _fb_cleanup_fd_ int fd = -1;
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  FbViewNode *node = NULL;
  CallerCreds creds;
  struct stat hst;
  mode_t umask_bits = caller != NULL ? caller->umask : 0;
  FbViewFdAccount *account = NULL;
  int r, path_fd, pfd, claim;

  r = decide_new_child_checked (view, parent, pst, name, &ci);
  if (r < 0)
    return r;
  r = create_precheck (view, caller, parent, pst, name, &ci, FB_OP_CREATE, NULL);
  if (r == -EEXIST && !(flags & O_EXCL))
    return open_existing (view, caller, parent, name, flags, ret_node, ret_file, ret_st);
  if (r < 0)
    {
      if (r == -EEXIST)
        view_emit (view, caller, FB_OP_CREATE, ci.path, NULL, FB_ACCESS_CREATE, FB_DECISION_ALLOW, EEXIST,
                   ci.decision.rule);
      return r;
    }

  /* O_EXCL first, whatever the caller asked: without it an existing FIFO
   * or device at that name would be opened by the daemon.  An existing name
   * then goes through lookup and open, which refuse those. */
  /* All of 07777 but what the view refuses to set (S_ISUID ever, S_ISGID on
   * a file: see fs.h, Privilege), so the sticky bit survives; the umask is
   * the caller's (0 from FUSE, where the kernel applied it already). */
  mode = (mode & 07777 & ~(S_ISUID | S_ISGID)) & ~(umask_bits & 0777);
  pfd = node_fd_get (parent, &hold);
  /* claimed before the name is made: EMFILE makes nothing (fb_view_open) */
  claim = pfd < 0 ? pfd : view_file_claim (view, caller, FB_OP_CREATE, ci.path, FB_ACCESS_CREATE, &account);
  if (claim < 0 && pfd >= 0)
    return claim; /* logged as the refusal it is */
  creds_enter (view, caller, &creds);
  fd = claim < 0 ? claim : openat (pfd, name, host_open_flags (flags) | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
  r = fd >= 0 ? 0 : claim < 0 ? claim : -errno;
  creds_leave (&creds);
  if (fd < 0 && claim == 0)
    view_file_unclaim (view, g_steal_pointer (&account));
  if (r == -EEXIST && !(flags & O_EXCL))
    return open_existing (view, caller, parent, name, flags, ret_node, ret_file, ret_st);
  if (r == 0)
    {
      char proc[32];
      /* The O_PATH descriptor of the very file created, not of whatever the
       * name holds a moment later. */
      proc_fd_path (proc, fd);
      path_fd = open (proc, O_PATH | O_CLOEXEC);
      r = path_fd < 0 ? -errno : node_from_host_fd (view, parent, name, &ci, path_fd, &node, &hst);
    }
  view_emit (view, caller, FB_OP_CREATE, ci.path, NULL, FB_ACCESS_CREATE, FB_DECISION_ALLOW, -r, ci.decision.rule);
  if (r < 0)
    {
      if (fd >= 0)
        view_file_unclaim (view, g_steal_pointer (&account)); /* closed on return: nobody will hold it */
      return r;
    }
  view_changed_name (view, parent, name, NULL);
  node_stamp_compare (node, &hst);
  if (ret_st != NULL)
    *ret_st = hst;
  st = node_get_state (node);
  *ret_file = view_file_new (node, st, fb_steal_fd (&fd), g_steal_pointer (&account), flags & ~(O_CREAT | O_EXCL),
                             open_access (flags), caller);
  if (ret_node != NULL)
    *ret_node = node;
  else
    fb_view_node_unref (node);
  return 0;
}

gssize
fb_view_read (FbView *view, FbViewFile *file, void *buf, gsize size, off_t offset)
{
  gssize n;

  if (file->is_dir)
    return -EISDIR;
  if (!file->can_read)
    return -EBADF;
  if (offset < 0)
    return -EINVAL;
  n = pread (file->fd, buf, MIN (size, FB_VIEW_IO_MAX), offset);
  if (n < 0)
    return -errno;
  __atomic_add_fetch (&file->bytes_read, n, __ATOMIC_RELAXED);
  return n;
}

/* What every change of FILE's contents needs first: a file open for
 * writing, a valid range (RANGE_OK) and its privileges taken off
 * (view_kill_priv).  0, or -errno: nothing may be written then. */
static int
write_begin (FbView *view, FbViewFile *file, bool range_ok)
{
  if (file->is_dir)
    return -EISDIR;
  if (!file->can_write)
    return -EBADF;
  if (!range_ok)
    return -EINVAL;
  return view_kill_priv (view, file->node, file);
}

gssize
fb_view_write (FbView *view, FbViewFile *file, const void *buf, gsize size, off_t offset)
{
  gssize n;

  n = write_begin (view, file, offset >= 0);
  if (n < 0)
    return n;
  n = pwrite (file->fd, buf, MIN (size, FB_VIEW_IO_MAX), offset);
  if (n < 0)
    return -errno;
  __atomic_add_fetch (&file->bytes_written, n, __ATOMIC_RELAXED);
  view_changed_object (view, file->node, FB_VIEW_CHANGE_DATA);
  return n;
}

gssize
fb_view_write_with (FbView *view, FbViewFile *file, off_t offset, FbViewWriteFunc func, gpointer user_data)
{
  gssize n;

  n = write_begin (view, file, offset >= 0);
  if (n < 0)
    return n;
  n = func (file->fd, offset, user_data);
  if (n > 0)
    {
      __atomic_add_fetch (&file->bytes_written, n, __ATOMIC_RELAXED);
      view_changed_object (view, file->node, FB_VIEW_CHANGE_DATA);
    }
  return n;
}

int
fb_view_flush (FbView *view, FbViewFile *file)
{
  int dupfd;

  if (file->fd < 0)
    return 0;
  /* Closing a duplicate makes network filesystems write back now, as a
   * close(2) on the host would (close-to-open consistency). */
  dupfd = fcntl (file->fd, F_DUPFD_CLOEXEC, 3);
  if (dupfd < 0)
    return -errno;
  return close (dupfd) < 0 ? -errno : 0;
}

int
fb_view_fsync (FbView *view, FbViewFile *file, bool datasync)
{
  if (file->fd < 0)
    return 0;
  if ((datasync ? fdatasync (file->fd) : fsync (file->fd)) < 0)
    return -errno;
  return 0;
}

int
fb_view_fallocate (FbView *view, FbViewFile *file, int mode, off_t offset, off_t length)
{
  int r;

  r = write_begin (view, file, offset >= 0 && length > 0);
  if (r < 0)
    return r;
  if (fallocate (file->fd, mode, offset, length) < 0)
    return -errno;
  view_changed_object (view, file->node, FB_VIEW_CHANGE_DATA);
  return 0;
}

off_t
fb_view_lseek (FbView *view, FbViewFile *file, off_t offset, int whence)
{
  off_t r;

  if (file->is_dir || file->fd < 0)
    return -EINVAL;
  if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END && whence != SEEK_DATA && whence != SEEK_HOLE)
    return -EINVAL;
  r = lseek (file->fd, offset, whence);
  return r < 0 ? -errno : r;
}

gssize
fb_view_copy_file_range (FbView *view, FbViewFile *in, off_t offset_in, FbViewFile *out, off_t offset_out, gsize length,
                         unsigned int flags)
{
  loff_t oi = offset_in, oo = offset_out;
  gssize n;

  if (flags != 0 || offset_in < 0 || offset_out < 0)
    return -EINVAL;
  if (in->is_dir || out->is_dir)
    return -EISDIR;
  if (!in->can_read || !out->can_write)
    return -EBADF;
  n = view_kill_priv (view, out->node, out);
  if (n < 0)
    return n;
  n = copy_file_range (in->fd, &oi, out->fd, &oo, MIN (length, FB_VIEW_COPY_MAX), 0);
  if (n < 0)
    return -errno;
  __atomic_add_fetch (&in->bytes_read, n, __ATOMIC_RELAXED);
  __atomic_add_fetch (&out->bytes_written, n, __ATOMIC_RELAXED);
  if (n > 0)
    view_changed_object (view, out->node, FB_VIEW_CHANGE_DATA);
  return n;
}

FbViewNode *
fb_view_file_get_node (FbViewFile *file)
{
  return file->node;
}

bool
fb_view_file_is_dir (FbViewFile *file)
{
  return file->is_dir;
}

int
fb_view_file_fstat (FbView *view, FbViewFile *file, struct stat *ret_st)
{
  if (file->fd < 0 || file->is_dir)
    return node_stat (view, file->node, ret_st);
  return fstat (file->fd, ret_st) < 0 ? -errno : 0;
}

void
fb_view_release (FbView *view, FbViewFile *file)
{
  if (file == NULL)
    return;
  if (!file->is_dir)
    view_emit_close (view, file);
  view_file_free (file);
}
