/* fusebox — the view's open files and directories.
 *
 * A host file is opened by reopening the node's O_PATH descriptor through
 * /proc/self/fd (never by path), only when it is a regular file or a
 * directory, and always O_NONBLOCK: the daemon never waits on a FIFO, a
 * device or a lease.  Access is decided at open from the node's decision;
 * reads and writes then only check the handle's mode, and count bytes (one
 * "close" event at release carries both counters).
 * Directories are in fs-view-dir.c.
 */
#include "fs/fs-private.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

/* The kernel marks opens for execve() with __FMODE_EXEC in the flags FUSE
 * passes on; it is not an O_* flag, only a hint for the log. */
#define FB_OPEN_EXEC_HINT 040

FbViewFile *
view_file_new (FbViewNode *node, NodeState *st, int fd, int flags, const char *access, const FbViewCaller *caller)
{
  FbViewFile *file = g_new0 (FbViewFile, 1);
  FbView *view = node->view;
  int acc = flags & O_ACCMODE;

  file->node = fb_view_node_ref (node);
  file->state = node_state_ref (st);
  file->fd = fd;
  if (node->reopen && fd >= 0)
    {
      g_mutex_lock (&node->lock);
      if (node->n_open++ == 0)
        node->held_fd = fcntl (fd, F_DUPFD_CLOEXEC, 3);
      g_mutex_unlock (&node->lock);
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
      (view->options.log_level >= FB_LOG_LEVEL_OPENS || file->can_write) && strcmp (access, "list") != 0)
    {
      char comm[32];
      view_caller_comm (view, file->pid, comm, sizeof comm);
      if (comm[0] != '\0')
        file->comm = g_strdup (comm);
    }
  g_mutex_init (&file->dir_lock);
  return file;
}

void
view_file_free (FbViewFile *file)
{
  if (file->node->reopen && file->fd >= 0)
    {
      FbViewNode *node = file->node;
      g_mutex_lock (&node->lock);
      if (--node->n_open == 0 && node->held_fd >= 0)
        {
          close (node->held_fd);
          node->held_fd = -1;
        }
      g_mutex_unlock (&node->lock);
    }
  if (file->fd >= 0)
    close (file->fd);
  if (file->snapshot != NULL)
    g_array_unref (file->snapshot);
  g_free (file->buf);
  g_mutex_clear (&file->dir_lock);
  node_state_unref (file->state);
  fb_view_node_unref (file->node);
  g_free (file->comm);
  g_free (file->session);
  g_free (file);
}

static const char *
open_access (int flags)
{
  if (flags & FB_OPEN_EXEC_HINT)
    return "exec";
  switch (flags & O_ACCMODE)
    {
      case O_WRONLY:
        return "write";
      case O_RDWR:
        return "readwrite";
      default:
        return (flags & O_TRUNC) ? "write" : "read";
    }
}

/* The flags a host open keeps.  O_NONBLOCK: a regular file ignores it for
 * I/O but it turns a lease break or mandatory lock wait into an error
 * instead of a stuck worker. */
static int
host_open_flags (int flags)
{
  int keep = O_ACCMODE | O_APPEND | O_TRUNC | O_DIRECT | O_DSYNC | O_SYNC | O_LARGEFILE;

  return (flags & keep) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
}

/* keep_cache: the kernel may keep the pages it has for NODE when the host
 * file's size and mtime are those of the previous open. */
bool
node_stamp_compare (FbViewNode *node, const struct stat *st)
{
  bool same;

  g_mutex_lock (&node->lock);
  same = node->have_stamp && node->stamp_size == st->st_size && node->stamp_mtime.tv_sec == st->st_mtim.tv_sec &&
         node->stamp_mtime.tv_nsec == st->st_mtim.tv_nsec;
  node->have_stamp = true;
  node->stamp_size = st->st_size;
  node->stamp_mtime = st->st_mtim;
  g_mutex_unlock (&node->lock);
  return same;
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

int
fb_view_open (FbView *view, const FbViewCaller *caller, FbViewNode *node, int flags, FbViewFile **ret_file,
              bool *ret_keep_cache)
{
  g_autoptr (NodeState) st = node_get_state (node);
  const char *access = open_access (flags);
  bool wants_write = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
  struct stat hst;
  FbDecision d;
  int r, fd;

  r = check_access (st, wants_write ? NEED_WRITE : NEED_READ, &d);
  if (r < 0)
    {
      view_emit (view, caller, EV_OPEN, "open", st->path, NULL, access, d, -r, st->decision.rule);
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
      view_emit (view, caller, EV_OPEN, "open", st->path, NULL, access, FB_DECISION_ALLOW, -r, st->decision.rule);
      return r;
    }
  fd = node_reopen (node, host_open_flags (flags));
  if (fd < 0)
    {
      view_emit (view, caller, EV_OPEN, "open", st->path, NULL, access, FB_DECISION_ALLOW, -fd, st->decision.rule);
      return fd;
    }
  if (ret_keep_cache != NULL)
    *ret_keep_cache = fstat (fd, &hst) == 0 && !(flags & O_TRUNC) && node_stamp_compare (node, &hst);
  if (flags & O_TRUNC)
    view_changed_object (view, node, FB_VIEW_CHANGE_DATA);
  *ret_file = view_file_new (node, st, fd, flags, access, caller);
  return 0;
}

int
fb_view_create (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, int flags, mode_t mode,
                FbViewFile **ret_file, FbViewNode **ret_node, struct stat *ret_st)
{
  g_autoptr (NodeState) pst = node_get_state (parent);
  g_autoptr (NodeState) st = NULL;
  g_auto (ChildInfo) ci = { 0 };
  _fb_cleanup_fd_ int fd = -1;
  FbViewNode *node = NULL;
  CallerCreds creds;
  struct stat hst;
  mode_t umask_bits = caller != NULL ? caller->umask : 0;
  int r, path_fd;

  r = decide_child_checked (view, parent, pst, name, &ci);
  if (r < 0)
    return r;
  r = create_precheck (view, caller, parent, pst, name, &ci, "create", NULL);
  if (r == -EEXIST && !(flags & O_EXCL))
    {
      /* The name exists in the view: an ordinary open of it. */
      g_autoptr (FbViewNode) existing = NULL;
      r = fb_view_lookup (view, caller, parent, name, &existing, ret_st);
      if (r < 0)
        return r;
      r = fb_view_open (view, caller, existing, flags & ~(O_CREAT | O_EXCL), ret_file, NULL);
      if (r == 0 && ret_node != NULL)
        *ret_node = g_steal_pointer (&existing);
      return r;
    }
  if (r < 0)
    {
      if (r == -EEXIST)
        view_emit (view, caller, EV_MUTATION, "create", ci.path, NULL, "create", FB_DECISION_ALLOW, EEXIST,
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
  creds_enter (view, caller, &creds);
  fd = openat (parent->fd, name, host_open_flags (flags) | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
  r = fd < 0 ? -errno : 0;
  creds_leave (&creds);
  if (r == -EEXIST && !(flags & O_EXCL))
    {
      g_autoptr (FbViewNode) existing = NULL;
      r = fb_view_lookup (view, caller, parent, name, &existing, ret_st);
      if (r < 0)
        return r;
      r = fb_view_open (view, caller, existing, flags & ~(O_CREAT | O_EXCL), ret_file, NULL);
      if (r == 0 && ret_node != NULL)
        *ret_node = g_steal_pointer (&existing);
      return r;
    }
  if (r == 0)
    {
      char proc[32];
      /* The O_PATH descriptor of the very file created, not of whatever the
       * name holds a moment later. */
      proc_fd_path (proc, fd);
      path_fd = open (proc, O_PATH | O_CLOEXEC);
      r = path_fd < 0 ? -errno : node_from_host_fd (view, parent, name, &ci, path_fd, &node, &hst);
    }
  view_emit (view, caller, EV_MUTATION, "create", ci.path, NULL, "create", FB_DECISION_ALLOW, -r, ci.decision.rule);
  if (r < 0)
    return r;
  view_changed_name (view, parent, name, NULL);
  node_stamp_compare (node, &hst);
  if (ret_st != NULL)
    *ret_st = hst;
  st = node_get_state (node);
  *ret_file = view_file_new (node, st, fb_steal_fd (&fd), flags & ~(O_CREAT | O_EXCL), open_access (flags), caller);
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

gssize
fb_view_write (FbView *view, FbViewFile *file, const void *buf, gsize size, off_t offset)
{
  gssize n;

  if (file->is_dir)
    return -EISDIR;
  if (!file->can_write)
    return -EBADF;
  if (offset < 0)
    return -EINVAL;
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

  if (file->is_dir)
    return -EISDIR;
  if (!file->can_write)
    return -EBADF;
  if (offset < 0)
    return -EINVAL;
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
  if (file->is_dir)
    return -EISDIR;
  if (!file->can_write)
    return -EBADF;
  if (offset < 0 || length <= 0)
    return -EINVAL;
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
