/* fusebox — the view's operations on what a node is: its attributes
 * (getattr, setattr: mode, owner, size, times), access, readlink, statfs
 * and its extended attributes.
 *
 * Every function here asks the policy, from the node's stored decision,
 * before touching the host.  Host calls are relative to held descriptors
 * only.  See fs/fs.h for the errno of each refusal.  Operations on names
 * are in fs-view-name.c.
 */
#include "fs/fs-private.h"

#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

/* --- attributes ------------------------------------------------------------ */

int
fb_view_getattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, struct stat *ret_st)
{
  g_autoptr (NodeState) st = node_get_state (node);
  FbDecision d;
  int r;

  r = check_access (st, NEED_STAT, &d);
  if (r == 0)
    r = node_stat (view, node, ret_st);
  if (r == 0)
    fb_view_stat_mask_dir (ret_st);
  view_emit (view, caller, FB_OP_GETATTR, st->path, NULL, FB_ACCESS_STAT, d, -r, st->decision.rule);
  return r;
}

void
fb_view_stat_mask_dir (struct stat *st)
{
  if (S_ISDIR (st->st_mode))
    {
      st->st_nlink = 1;
      st->st_size = 4096;
      st->st_blocks = 8;
    }
}

static int
host_chmod (FbViewNode *node, FbViewFile *file, mode_t mode)
{
  _fb_cleanup_fd_ int tmp = -1;
  char proc[32];
  int fd;

  if (file != NULL && file->fd >= 0)
    return fchmod (file->fd, mode) < 0 ? -errno : 0;
  if (S_ISLNK (node->type))
    return -EOPNOTSUPP;
  fd = node_host_fd (node, &tmp);
  if (fd < 0)
    return fd;
  /* fchmodat2 (Linux 6.6) changes an O_PATH descriptor's inode directly;
   * before it, the /proc/self/fd magic link reaches the same inode. */
  if (syscall (SYS_fchmodat2, fd, "", mode, AT_EMPTY_PATH) == 0)
    return 0;
  if (errno != ENOSYS && errno != EINVAL)
    return -errno;
  proc_fd_path (proc, fd);
  return chmod (proc, mode) < 0 ? -errno : 0;
}

static int
host_truncate (FbViewNode *node, FbViewFile *file, off_t size)
{
  _fb_cleanup_fd_ int tmp = -1;
  char proc[32];
  int fd;

  if (S_ISDIR (node->type))
    return -EISDIR;
  if (!S_ISREG (node->type))
    return -EINVAL;
  if (file != NULL && file->fd >= 0 && file->can_write)
    return ftruncate (file->fd, size) < 0 ? -errno : 0;
  fd = node_host_fd (node, &tmp);
  if (fd < 0)
    return fd;
  proc_fd_path (proc, fd);
  return truncate (proc, size) < 0 ? -errno : 0;
}

static int
host_utimens (FbViewNode *node, FbViewFile *file, const FbViewSetattr *attr)
{
  _fb_cleanup_fd_ int tmp = -1;
  struct timespec ts[2];
  int fd;

  ts[0].tv_sec = 0;
  ts[0].tv_nsec = UTIME_OMIT;
  ts[1] = ts[0];
  if (attr->valid & FB_VIEW_SET_ATIME_NOW)
    ts[0].tv_nsec = UTIME_NOW;
  else if (attr->valid & FB_VIEW_SET_ATIME)
    ts[0] = attr->atime;
  if (attr->valid & FB_VIEW_SET_MTIME_NOW)
    ts[1].tv_nsec = UTIME_NOW;
  else if (attr->valid & FB_VIEW_SET_MTIME)
    ts[1] = attr->mtime;
  if (file != NULL && file->fd >= 0)
    return futimens (file->fd, ts) < 0 ? -errno : 0;
  fd = node_host_fd (node, &tmp);
  if (fd < 0)
    return fd;
  return utimensat (fd, "", ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static FbOp
setattr_op (FbViewSetFlags valid)
{
  if (valid & (FB_VIEW_SET_UID | FB_VIEW_SET_GID))
    return FB_OP_CHOWN;
  if (valid & FB_VIEW_SET_MODE)
    return FB_OP_CHMOD;
  if (valid & FB_VIEW_SET_SIZE)
    return FB_OP_TRUNCATE;
  return FB_OP_UTIMENS;
}

int
fb_view_setattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, FbViewFile *file,
                 const FbViewSetattr *attr, struct stat *ret_st)
{
  g_autoptr (NodeState) st = node_get_state (node);
  FbOp op = setattr_op (attr->valid);
  const FbPolicyRule *rule = st->decision.rule;
  struct stat cur;
  FbDecision d;
  int r;

  r = check_access (st, NEED_WRITE, &d);
  if (r < 0)
    goto out;
  if (node->kind != NODE_HOST)
    {
      r = -EROFS;
      goto out;
    }
  r = node_stat (view, node, &cur);
  if (r < 0)
    goto out;
  /* a run directory found before it was marked keeps its 0700, by which
   * every view knows to look for the mark (view_state_dir_marked) */
  if ((attr->valid & (FB_VIEW_SET_MODE | FB_VIEW_SET_UID | FB_VIEW_SET_GID)) && S_ISDIR (cur.st_mode) &&
      view_state_dir_marked (node, st))
    {
      r = -EPERM;
      d = FB_DECISION_DENY;
      rule = view_refusal_rule (VIEW_REFUSAL_OWN_STATE);
      goto out;
    }
  /* Giving a file away (or taking it) would let a root daemon's sandbox
   * change host ownership; only a chown that changes nothing passes (tar
   * and cp -p do those). */
  if (((attr->valid & FB_VIEW_SET_UID) && attr->uid != (uid_t)-1 && attr->uid != cur.st_uid) ||
      ((attr->valid & FB_VIEW_SET_GID) && attr->gid != (gid_t)-1 && attr->gid != cur.st_gid))
    {
      r = -EPERM;
      d = FB_DECISION_DENY;
      rule = view_refusal_rule (VIEW_REFUSAL_CHOWN);
      goto out;
    }
  if (attr->valid & FB_VIEW_SET_MODE)
    {
      mode_t mode = attr->mode & 07777;
      const mode_t sgid_x = S_ISGID | S_IXGRP;
      /* A set-id bit made through a root daemon would outlive the sandbox
       * as a privilege on the host.  S_ISGID grants only with group-exec:
       * a file that has it without (the old mandatory-locking mark, which
       * a write leaves) may not gain group-exec and keep it.  Nor may a
       * set-id bit the file has stay while the rest of the mode changes:
       * `chmod 04777` of a root-owned 04755 program lets every host user
       * write it through a shared mapping, whose writeback by another
       * user the kernel does not strip the bit for: root for anyone.  A
       * chmod that keeps the mode as it is (cp -p, tar) or takes the bits
       * away (the kernel turns the kill-priv of a chown into one) passes. */
      bool setid_after = (mode & S_ISUID) || (!S_ISDIR (cur.st_mode) && (mode & sgid_x) == sgid_x);

      if (((mode & S_ISUID) && !(cur.st_mode & S_ISUID)) ||
          ((mode & S_ISGID) && !(cur.st_mode & S_ISGID) && !S_ISDIR (cur.st_mode)) ||
          (!S_ISDIR (cur.st_mode) && (mode & sgid_x) == sgid_x && (cur.st_mode & sgid_x) != sgid_x) ||
          (setid_after && mode != (cur.st_mode & 07777)))
        {
          r = -EPERM;
          d = FB_DECISION_DENY;
          rule = view_refusal_rule (VIEW_REFUSAL_SETID);
          goto out;
        }
      r = host_chmod (node, file, mode);
      if (r < 0)
        goto out;
    }
  if (attr->valid & FB_VIEW_SET_SIZE)
    {
      if (attr->size < 0)
        {
          r = -EINVAL;
          goto out;
        }
      /* the kernel's do_truncate takes privileges off too */
      r = view_kill_priv (view, node, file != NULL && file->can_write ? file : NULL);
      if (r == 0)
        r = host_truncate (node, file, attr->size);
      if (r < 0)
        goto out;
    }
  if (attr->valid & (FB_VIEW_SET_ATIME | FB_VIEW_SET_MTIME | FB_VIEW_SET_ATIME_NOW | FB_VIEW_SET_MTIME_NOW))
    {
      r = host_utimens (node, file, attr);
      if (r < 0)
        goto out;
    }
  view_changed_object (view, node, (attr->valid & FB_VIEW_SET_SIZE) ? FB_VIEW_CHANGE_DATA : FB_VIEW_CHANGE_ATTR);
  if (ret_st != NULL)
    r = node_stat (view, node, ret_st);
out:
  view_emit (view, caller, op, st->path, NULL, FB_ACCESS_WRITE, d, -r, rule);
  return r;
}

int
fb_view_access (FbView *view, const FbViewCaller *caller, FbViewNode *node, int mask)
{
  g_autoptr (NodeState) st = node_get_state (node);
  FbDecision d = FB_DECISION_ALLOW;
  char proc[32];
  int r = 0;

  if (mask & ~(R_OK | W_OK | X_OK))
    return -EINVAL;
  r = check_access (st, NEED_STAT, &d);
  if (r == 0 && (mask & R_OK))
    r = check_access (st, S_ISDIR (node->type) ? NEED_LIST : NEED_READ, &d);
  if (r == 0 && (mask & X_OK))
    r = check_access (st, S_ISDIR (node->type) ? NEED_LIST : NEED_READ, &d);
  if (r == 0 && (mask & W_OK))
    {
      r = check_access (st, NEED_WRITE, &d);
      if (r == 0 && node->kind != NODE_HOST)
        r = -EROFS;
    }
  if (r == 0 && node->kind == NODE_HOST && mask != F_OK && !S_ISLNK (node->type))
    {
      _fb_cleanup_fd_ int tmp = -1;
      int fd = node_host_fd (node, &tmp);
      if (fd < 0)
        r = fd;
      else
        {
          proc_fd_path (proc, fd);
          if (faccessat (AT_FDCWD, proc, mask, AT_EACCESS) < 0)
            r = -errno;
        }
    }
  view_emit (view, caller, FB_OP_ACCESS, st->path, NULL, (mask & W_OK) ? FB_ACCESS_WRITE : FB_ACCESS_READ, d, -r,
             st->decision.rule);
  return r;
}

int
fb_view_readlink (FbView *view, const FbViewCaller *caller, FbViewNode *node, char **ret_text)
{
  g_autoptr (NodeState) st = node_get_state (node);
  g_autofree char *buf = NULL;
  FbDecision d;
  gssize n;
  int r;

  r = check_access (st, NEED_READ, &d);
  if (r == 0 && !S_ISLNK (node->type))
    r = -EINVAL;
  if (r == 0)
    {
      _fb_cleanup_fd_ int tmp = -1;
      int fd = node_host_fd (node, &tmp);
      buf = g_malloc (FB_VIEW_SYMLINK_MAX + 2);
      n = fd < 0 ? fd : readlinkat (fd, "", buf, FB_VIEW_SYMLINK_MAX + 1);
      if (fd < 0)
        r = fd;
      else if (n < 0)
        r = -errno;
      else if (n > FB_VIEW_SYMLINK_MAX)
        r = -ENAMETOOLONG;
      else
        buf[n] = '\0';
    }
  view_emit (view, caller, FB_OP_READLINK, st->path, NULL, FB_ACCESS_READ, d, -r, st->decision.rule);
  if (r < 0)
    return r;
  *ret_text = g_steal_pointer (&buf);
  return 0;
}

int
fb_view_statfs (FbView *view, const FbViewCaller *caller, FbViewNode *node, struct statvfs *ret_st)
{
  g_autoptr (NodeState) st = node_get_state (node);
  g_autoptr (FbViewNode) root = NULL;
  _fb_cleanup_fd_ int tmp = -1;
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  FbDecision d;
  int fd, r;

  r = check_access (st, NEED_STAT, &d);
  if (r == 0)
    {
      fd = node->kind == NODE_HOST ? node_host_fd (node, &tmp) : -1;
      if (fd < 0)
        {
          root = fb_view_get_root (view);
          fd = node_fd_get (root, &hold);
        }
      if (fd < 0 || fstatvfs (fd, ret_st) < 0)
        r = fd < 0 ? -ENOSYS : -errno;
    }
  view_emit (view, caller, FB_OP_STATFS, st->path, NULL, FB_ACCESS_STAT, d, -r, st->decision.rule);
  return r;
}

/* --- extended attributes -------------------------------------------------------- */

static int
check_xattr_name (const char *name)
{
  if (name == NULL || name[0] == '\0')
    return -EINVAL;
  if (strnlen (name, FB_VIEW_XATTR_NAME_MAX + 1) > FB_VIEW_XATTR_NAME_MAX)
    return -ERANGE;
  return 0;
}

/* NAME's value, or with NAME NULL the list of names, read through the
 * node's /proc link: there is no race-free way to read a symlink's own
 * attributes by descriptor, and symlinks hold none that matter here. */
static gssize
read_xattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, const char *name, void *buf, gsize size)
{
  g_autoptr (NodeState) st = node_get_state (node);
  _fb_cleanup_fd_ int tmp = -1;
  char proc[32];
  FbDecision d;
  gssize r;

  r = check_access (st, NEED_READ, &d);
  if (r == 0)
    {
      if (node->kind != NODE_HOST || S_ISLNK (node->type))
        r = name != NULL ? -ENODATA : 0;
      else
        {
          r = node_proc_path (node, proc, &tmp);
          if (r == 0)
            {
              void *to = size > 0 ? buf : NULL;

              size = MIN (size, FB_VIEW_XATTR_SIZE_MAX);
              r = name != NULL ? getxattr (proc, name, to, size) : listxattr (proc, to, size);
              if (r < 0)
                r = -errno;
            }
        }
    }
  /* an attribute that is not there is an answer, not a failure */
  view_emit (view, caller, name != NULL ? FB_OP_GETXATTR : FB_OP_LISTXATTR, st->path, NULL, FB_ACCESS_READ, d,
             r < 0 && !(name != NULL && r == -ENODATA) ? (int)-r : 0, st->decision.rule);
  return r;
}

gssize
fb_view_getxattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, const char *name, void *buf, gsize size)
{
  int r = check_xattr_name (name);

  return r < 0 ? r : read_xattr (view, caller, node, name, buf, size);
}

/* The list without the trusted.* names: the host's kernel lists them only
 * to a caller with CAP_SYS_ADMIN, which no sandbox has, and the daemon,
 * root, would pass them on.  (Their values the kernel already refuses on
 * the sandbox's side of the mount.)  The whole list is read, so that the
 * size asked for (SIZE 0) is the size of what is shown. */
gssize
fb_view_listxattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, char *buf, gsize size)
{
  g_autofree char *all = g_malloc (FB_VIEW_XATTR_SIZE_MAX);
  gssize n = read_xattr (view, caller, node, NULL, all, FB_VIEW_XATTR_SIZE_MAX);
  gsize shown = 0;

  if (n == -ERANGE)
    return -E2BIG;
  if (n < 0)
    return n;
  for (gsize at = 0; at < (gsize)n;)
    {
      gsize len = strnlen (all + at, (gsize)n - at);

      if (at + len < (gsize)n && !g_str_has_prefix (all + at, "trusted."))
        {
          memmove (all + shown, all + at, len + 1);
          shown += len + 1;
        }
      at += len + 1;
    }
  if (size == 0)
    return (gssize)shown;
  if (shown > size)
    return -ERANGE;
  memcpy (buf, all, shown);
  return (gssize)shown;
}

/* Which attribute namespaces the sandbox may change. */
static int
check_xattr_writable (const char *name, bool remove)
{
  /* Taking a file's capabilities away grants nothing, and the kernel asks
   * for it before a buffered write to such a file (its kill-priv, which
   * the view also does itself: view_kill_priv); refused, the write would
   * fail with EPERM. */
  if (remove && strcmp (name, "security.capability") == 0)
    return 0;
  /* security.* holds file capabilities and LSM labels, trusted.* is for
   * root's own bookkeeping: set through a root daemon they would grant
   * privileges on the host. */
  if (g_str_has_prefix (name, "security.") || g_str_has_prefix (name, "trusted."))
    return -EPERM;
  /* fusebox's mark on a run's own objects (policy/util.h): a sandbox that
   * set it would hide what it likes from every view, one that removed it
   * would bring a run's files back into other views */
  if (strcmp (name, FB_STATE_XATTR) == 0)
    return -EPERM;
  if (g_str_has_prefix (name, "user."))
    return 0;
  /* system.posix_acl_*: the kernel does not enforce ACLs in the view
   * (default_permissions checks modes only), so they are not passed. */
  return -EOPNOTSUPP;
}

static int
change_xattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, FbOp op, const char *name, const void *value,
              gsize size, int flags, bool remove)
{
  g_autoptr (NodeState) st = node_get_state (node);
  const FbPolicyRule *rule = st->decision.rule;
  _fb_cleanup_fd_ int tmp = -1;
  char proc[32];
  FbDecision d;
  int r;

  r = check_xattr_name (name);
  if (r < 0)
    return r;
  if (!remove && size > FB_VIEW_XATTR_SIZE_MAX)
    return -E2BIG;
  r = check_access (st, NEED_WRITE, &d);
  if (r == 0)
    {
      r = check_xattr_writable (name, remove);
      if (r == -EPERM)
        {
          d = FB_DECISION_DENY;
          rule = view_refusal_rule (VIEW_REFUSAL_XATTR);
        }
    }
  if (r == 0 && node->kind != NODE_HOST)
    r = -EROFS;
  if (r == 0 && S_ISLNK (node->type))
    r = -EPERM; /* user.* attributes are not allowed on symlinks */
  if (r == 0)
    {
      r = node_proc_path (node, proc, &tmp);
      if (r < 0)
        ;
      else if (remove)
        r = removexattr (proc, name) < 0 ? -errno : 0;
      else
        r = setxattr (proc, name, value, size, flags) < 0 ? -errno : 0;
      if (r == 0)
        view_changed_object (view, node, FB_VIEW_CHANGE_ATTR);
    }
  view_emit (view, caller, op, st->path, NULL, FB_ACCESS_WRITE, d, -r, rule);
  return r;
}

int
fb_view_setxattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, const char *name, const void *value,
                  gsize size, int flags)
{
  return change_xattr (view, caller, node, FB_OP_SETXATTR, name, value, size, flags, false);
}

int
fb_view_removexattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, const char *name)
{
  return change_xattr (view, caller, node, FB_OP_REMOVEXATTR, name, NULL, 0, 0, true);
}
