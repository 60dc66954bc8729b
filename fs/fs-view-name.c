/* fusebox — the view's operations on names: mkdir, mknod, symlink, link,
 * unlink, rmdir and rename.
 *
 * Every function here asks the policy before touching the host: the
 * decision of the new or removed name and of its directory (the checks
 * and prechecks of fs-view-check.c), and for link and rename the moved
 * node's own.  Host calls are relative to held descriptors only.  See
 * fs/fs.h for the errno of each refusal.
 */
#include "fs/fs-private.h"

#include <stdio.h> /* renameat2 */
#include <string.h>
#include <sys/stat.h>

static const FbViewCaller no_caller = { 0 };

/* A private source lives in the run directory and goes with the run (the
 * run removes it; `runs --prune` a session's or a kept one); every other
 * source is the host's and stays.  A rename moves a directory whole: from
 * the host's source into a private one it would hand the host's tree to
 * that removal, with what the view hides or refuses below it (a hidden
 * .git, a denied key, a read-only .git under builtin:agent), none of which
 * the sandbox could remove itself.  So a private source is a filesystem of
 * its own: rename (an exchange too) and link between it and any other
 * source answer EXDEV, as the host does between two filesystems, and mv and
 * its like copy what the sandbox can read and remove what it may, one
 * checked name at a time; the rest stays where it was.  A link would hand
 * nothing over (the removal takes a name, not the file), but a filesystem
 * that linked across where it refused to rename would be one no tool knows.
 * Within one source renames are the host's.  0, or -EXDEV logged as the
 * view's own refusal (fusebox:private-source). */
static int
check_same_source (FbView *view, const FbViewCaller *caller, FbOp op, FbAccess access, const char *path,
                   const char *target, const FbPolicyDecision *from, const FbPolicyDecision *to)
{
  if (from->mount == to->mount || !(from->mount->is_private || to->mount->is_private))
    return 0;
  view_emit (view, caller, op, path, target, access, FB_DECISION_DENY, EXDEV,
             view_refusal_rule (VIEW_REFUSAL_PRIVATE_SOURCE));
  return -EXDEV;
}

static const FbViewCaller *
caller_or_none (const FbViewCaller *caller)
{
  return caller != NULL ? caller : &no_caller;
}

/* --- making names -------------------------------------------------------------- */

typedef int (*MakeFunc) (int parent_fd, const char *name, gpointer data);

/* The shared body of mkdir, mknod and symlink. */
static int
make_name (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, FbOp op, MakeFunc make,
           gpointer data, FbViewNode **ret_node, struct stat *ret_st)
{
  g_autoptr (NodeState) pst = node_get_state (parent);
  g_auto (ChildInfo) ci = { 0 };
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  FbViewNode *node = NULL;
  CallerCreds creds;
  int r, fd, pfd;

  r = decide_new_child_checked (view, parent, pst, name, &ci);
  if (r < 0)
    return r;
  r = create_precheck (view, caller, parent, pst, name, &ci, op, NULL);
  if (r < 0)
    {
      if (r == -EEXIST)
        view_emit (view, caller, op, ci.path, NULL, FB_ACCESS_CREATE, FB_DECISION_ALLOW, EEXIST, ci.decision.rule);
      return r;
    }
  pfd = node_fd_get (parent, &hold);
  creds_enter (view, caller, &creds);
  r = pfd < 0 ? pfd : make (pfd, name, data);
  creds_leave (&creds);
  if (r == 0)
    {
      fd = host_open_child (pfd, name);
      r = fd < 0 ? fd : node_from_host_fd (view, parent, name, &ci, fd, &node, ret_st);
    }
  view_emit (view, caller, op, ci.path, NULL, FB_ACCESS_CREATE, FB_DECISION_ALLOW, -r, ci.decision.rule);
  if (r < 0)
    return r;
  view_changed_name (view, parent, name, NULL);
  if (ret_node != NULL)
    *ret_node = node;
  else
    fb_view_node_unref (node);
  return 0;
}

typedef struct
{
  mode_t mode;
  dev_t rdev;
  const char *target;
} MakeArgs;

static int
make_dir (int parent_fd, const char *name, gpointer data)
{
  const MakeArgs *a = data;

  return mkdirat (parent_fd, name, a->mode) < 0 ? -errno : 0;
}

static int
make_node (int parent_fd, const char *name, gpointer data)
{
  const MakeArgs *a = data;

  return mknodat (parent_fd, name, a->mode, a->rdev) < 0 ? -errno : 0;
}

static int
make_symlink (int parent_fd, const char *name, gpointer data)
{
  const MakeArgs *a = data;

  return symlinkat (a->target, parent_fd, name) < 0 ? -errno : 0;
}

int
fb_view_mkdir (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, mode_t mode,
               FbViewNode **ret_node, struct stat *ret_st)
{
  MakeArgs a = { 0 };

  /* S_ISGID stays (a directory's group inheritance); S_ISUID never. */
  a.mode = mode & 07777 & ~S_ISUID & ~caller_or_none (caller)->umask;
  return make_name (view, caller, parent, name, FB_OP_MKDIR, make_dir, &a, ret_node, ret_st);
}

int
fb_view_mknod (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, mode_t mode, dev_t rdev,
               FbViewNode **ret_node, struct stat *ret_st)
{
  MakeArgs a = { 0 };
  mode_t type = mode & S_IFMT;

  /* Device nodes would open host devices for whoever finds them later. */
  if (type == S_IFCHR || type == S_IFBLK)
    {
      g_autoptr (NodeState) pst = node_get_state (parent);
      g_autofree char *path = check_name (name) == 0 ? join_path (pst->path, name) : NULL;
      view_emit (view, caller, FB_OP_MKNOD, path != NULL ? path : pst->path, NULL, FB_ACCESS_CREATE, FB_DECISION_DENY,
                 EPERM, view_refusal_rule (VIEW_REFUSAL_DEVICE));
      return -EPERM;
    }
  if (type == 0)
    type = S_IFREG;
  if (type != S_IFREG && type != S_IFIFO && type != S_IFSOCK)
    return -EINVAL;
  a.mode = type | (mode & 0777 & ~caller_or_none (caller)->umask) | (mode & S_ISVTX);
  a.rdev = 0;
  return make_name (view, caller, parent, name, FB_OP_MKNOD, make_node, &a, ret_node, ret_st);
}

int
fb_view_symlink (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, const char *target,
                 FbViewNode **ret_node, struct stat *ret_st)
{
  MakeArgs a = { 0 };
  gsize len;

  if (target == NULL || target[0] == '\0')
    return -ENOENT;
  len = strnlen (target, FB_VIEW_SYMLINK_MAX + 1);
  if (len > FB_VIEW_SYMLINK_MAX)
    return -ENAMETOOLONG;
  /* The text is stored as given: it is resolved later by the kernel inside
   * the view (never by us on the host), so pointing at a hidden path only
   * makes a link that leads nowhere. */
  a.target = target;
  return make_name (view, caller, parent, name, FB_OP_SYMLINK, make_symlink, &a, ret_node, ret_st);
}

int
fb_view_link (FbView *view, const FbViewCaller *caller, FbViewNode *node, FbViewNode *newparent, const char *newname,
              FbViewNode **ret_node, struct stat *ret_st)
{
  g_autoptr (NodeState) st = node_get_state (node);
  g_autoptr (NodeState) npst = node_get_state (newparent);
  g_auto (ChildInfo) ci = { 0 };
  FbViewNode *fresh = NULL;
  _fb_cleanup_fd_ int tmp = -1;
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  FbDecision d;
  char proc[32];
  int r, fd, hfd, npfd;

  r = decide_new_child_checked (view, newparent, npst, newname, &ci);
  if (r < 0)
    return r;
  /* The new name would give the inode a second decision: only an object
   * already writable through this path may get one. */
  r = check_access (st, NEED_WRITE, &d);
  if (r < 0)
    {
      view_emit (view, caller, FB_OP_LINK, st->path, ci.path, FB_ACCESS_WRITE, d, -r, st->decision.rule);
      return r;
    }
  if (node->kind != NODE_HOST || S_ISDIR (node->type))
    return -EPERM;
  r = create_precheck (view, caller, newparent, npst, newname, &ci, FB_OP_LINK, st->path);
  if (r < 0)
    return r;
  r = check_same_source (view, caller, FB_OP_LINK, FB_ACCESS_CREATE, st->path, ci.path, &st->decision, &ci.decision);
  if (r < 0)
    return r;
  /* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; without it the kernel says
   * ENOENT and the /proc/self/fd link (followed once, to the very inode)
   * does the same.  Remember which one works. */
  hfd = node_host_fd (node, &tmp);
  if (hfd < 0)
    return hfd;
  npfd = node_fd_get (newparent, &hold);
  if (npfd < 0)
    return npfd;
  r = -ENOENT;
  if (g_atomic_int_get (&view->can_empty_path_link))
    r = linkat (hfd, "", npfd, newname, AT_EMPTY_PATH) < 0 ? -errno : 0;
  if (r == -ENOENT)
    {
      proc_fd_path (proc, hfd);
      r = linkat (AT_FDCWD, proc, npfd, newname, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
      if (r == 0)
        g_atomic_int_set (&view->can_empty_path_link, 0);
    }
  if (r == 0)
    {
      fd = host_open_child (npfd, newname);
      r = fd < 0 ? fd : node_from_host_fd (view, newparent, newname, &ci, fd, &fresh, ret_st);
    }
  view_emit (view, caller, FB_OP_LINK, st->path, ci.path, FB_ACCESS_CREATE, FB_DECISION_ALLOW, -r, ci.decision.rule);
  if (r < 0)
    return r;
  {
    /* the new name, and the link count every other name of it shows */
    struct stat obj = { .st_dev = node->dev, .st_ino = node->ino };
    view_changed_name (view, newparent, newname, &obj);
  }
  if (ret_node != NULL)
    *ret_node = fresh;
  else
    fb_view_node_unref (fresh);
  return 0;
}

/* --- removing names -------------------------------------------------------------- */

static int
remove_name (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, bool dir)
{
  g_autoptr (NodeState) pst = node_get_state (parent);
  g_auto (ChildInfo) ci = { 0 };
  FbOp op = dir ? FB_OP_RMDIR : FB_OP_UNLINK;
  int r;

  r = decide_child_checked (view, parent, pst, name, &ci);
  if (r < 0)
    return r;
  r = remove_precheck (view, caller, parent, pst, name, &ci, op, NULL);
  if (r < 0)
    return r;
  /* where the host folds names, an alias would remove the entry it reaches */
  r = view_fold_admit (view, caller, parent, name, op, FB_ACCESS_DELETE, ci.path, NULL);
  if (r < 0)
    return r;
  {
    /* what the name held: its other names' link count changes */
    _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
    int pfd = node_fd_get (parent, &hold);
    struct stat gone;
    bool known = pfd >= 0 && host_statat (parent, pfd, name, &gone) >= 0;
    /* A directory below which other rules decide is not removed, as it is
     * not renamed (EACCES), whatever it holds: the host's answer depends
     * on the names those rules hide (ENOTEMPTY for one that holds only a
     * hidden name, success when it is empty) and would tell the sandbox
     * whether they exist. */
    if (dir && known && S_ISDIR (gone.st_mode) && view_subtree_has_rules (view, &ci.decision, ci.path))
      {
        view_emit (view, caller, op, ci.path, NULL, FB_ACCESS_DELETE, FB_DECISION_DENY, EACCES,
                   view_refusal_rule (VIEW_REFUSAL_RULED_DIR));
        return -EACCES;
      }
    /* nor a link on the way to fusebox's own state (a directory there is
     * never empty): a directory of the caller's would take its place */
    if (known && view_state_on_the_way (view, &gone))
      {
        view_emit (view, caller, op, ci.path, NULL, FB_ACCESS_DELETE, FB_DECISION_DENY, EACCES,
                   view_refusal_rule (VIEW_REFUSAL_OWN_STATE));
        return -EACCES;
      }
    r = pfd < 0 ? pfd : unlinkat (pfd, name, dir ? AT_REMOVEDIR : 0) < 0 ? -errno : 0;
    if (r == 0)
      {
        view_detach_name (view, parent, name);
        view_changed_name (view, parent, name, known && !dir ? &gone : NULL);
      }
  }
  view_emit (view, caller, op, ci.path, NULL, FB_ACCESS_DELETE, FB_DECISION_ALLOW, -r, ci.decision.rule);
  return r;
}

int
fb_view_unlink (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name)
{
  return remove_name (view, caller, parent, name, false);
}

int
fb_view_rmdir (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name)
{
  return remove_name (view, caller, parent, name, true);
}

/* A rename must not move a tree deeper than the view decides (fs.h,
 * Bounds): the new name's path is checked like any name, and a directory
 * that goes to a longer path (SRC_PATH to DST_PATH) has its host tree
 * measured first (fs-view-depth.c).  0, or -ENAMETOOLONG/-EXDEV logged as
 * the view's own refusal. */
static int
check_depth (FbView *view, const FbViewCaller *caller, int pfd, const char *name, const struct stat *st,
             const char *src_path, const char *dst_path, const char *log_path, const char *log_target)
{
  gsize src_len = strlen (src_path), dst_len = strlen (dst_path);
  int r;

  if (!S_ISDIR (st->st_mode) || dst_len <= src_len)
    return 0; /* nothing below it gets longer */
  r = view_tree_fits (pfd, name, FB_VIEW_PATH_MAX - dst_len);
  if (r == -ENAMETOOLONG || r == -EXDEV)
    view_emit (view, caller, FB_OP_RENAME, log_path, log_target, FB_ACCESS_WRITE, FB_DECISION_DENY, -r,
               view_refusal_rule (VIEW_REFUSAL_TOO_LONG));
  return r;
}

static int rename_locked (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name,
                          FbViewNode *newparent, const char *newname, unsigned int flags);

/* Renames through one view go one at a time, from the paths they are
 * decided for to the nodes moved: two at once could each pass the depth
 * check and together build a tree deeper than either measured. */
int
fb_view_rename (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, FbViewNode *newparent,
                const char *newname, unsigned int flags)
{
  g_autoptr (NodeState) pst = node_get_state (parent);
  g_autoptr (NodeState) npst = node_get_state (newparent);
  g_autofree char *path = join_path (pst->path, name);
  g_autofree char *target = join_path (npst->path, newname);
  gsize src_len = strlen (path), dst_len = strlen (target);
  /* a name that moves to a longer path (either one, for an exchange) may
   * have its tree measured under the lock (check_depth) */
  bool may_walk = (flags & RENAME_EXCHANGE) ? src_len != dst_len : dst_len > src_len;
  int r;

  if (may_walk && g_atomic_int_add (&view->rename_walkers, 1) >= VIEW_RENAME_WALKERS_MAX)
    {
      g_atomic_int_add (&view->rename_walkers, -1);
      view_emit (view, caller, FB_OP_RENAME, path, target, FB_ACCESS_WRITE, FB_DECISION_DENY, EXDEV,
                 view_refusal_rule (VIEW_REFUSAL_RENAMES_BUSY));
      return -EXDEV;
    }
  g_mutex_lock (&view->rename_lock);
  r = rename_locked (view, caller, parent, name, newparent, newname, flags);
  g_mutex_unlock (&view->rename_lock);
  if (may_walk)
    g_atomic_int_add (&view->rename_walkers, -1);
  return r;
}

static int
rename_locked (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, FbViewNode *newparent,
               const char *newname, unsigned int flags)
{
  g_autoptr (NodeState) pst = node_get_state (parent);
  g_autoptr (NodeState) npst = node_get_state (newparent);
  g_auto (ChildInfo) ci = { 0 };
  g_auto (ChildInfo) nci = { 0 };
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  _fb_cleanup_node_fd_ NodeFd nhold = NODE_FD_INIT;
  struct stat sst = { 0 }, dst = { 0 };
  bool dst_exists;
  int r, pfd, npfd;

  /* RENAME_WHITEOUT makes a 0/0 character device: a device node by
   * another name. */
  if ((flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) != 0 ||
      (flags & (RENAME_NOREPLACE | RENAME_EXCHANGE)) == (RENAME_NOREPLACE | RENAME_EXCHANGE))
    return -EINVAL;
  r = decide_child_checked (view, parent, pst, name, &ci);
  if (r < 0)
    return r;
  r = decide_new_child_checked (view, newparent, npst, newname, &nci);
  if (r < 0)
    return r;
  r = remove_precheck (view, caller, parent, pst, name, &ci, FB_OP_RENAME, nci.path);
  if (r < 0)
    return r;
  /* The destination is a name being made (or, for an exchange, replaced by
   * the source): it must be writable, and hidden names never are. */
  {
    const FbPolicyRule *rule;
    FbDecision d;
    r = check_create (npst, &nci, &d, &rule);
    if (r < 0)
      {
        view_emit (view, caller, FB_OP_RENAME, ci.path, nci.path, FB_ACCESS_CREATE, d, -r, rule);
        return r;
      }
    if (child_is_structural (view, npst, &nci, newname))
      return -EBUSY;
    if (newparent->kind != NODE_HOST)
      return -EROFS;
  }
  pfd = node_fd_get (parent, &hold);
  if (pfd < 0)
    return pfd;
  npfd = node_fd_get (newparent, &nhold);
  if (npfd < 0)
    return npfd;
  /* where the host folds names: the source by its own spelling only, and
   * never onto another entry reached by another spelling */
  r = view_fold_admit (view, caller, parent, name, FB_OP_RENAME, FB_ACCESS_WRITE, ci.path, nci.path);
  if (r < 0)
    return r;
  /* a filesystem that is not served (another user's FUSE, another view)
   * is asked nothing, its fusebox mark included: it is a mount's root,
   * which the host would not move nor replace either (EBUSY) */
  r = host_statat (parent, pfd, name, &sst);
  if (r < 0)
    return r;
  if (r == HOST_FS_UNSERVED)
    return -EBUSY;
  r = view_fold_check_target (view, caller, newparent, newname, &sst, ci.path, nci.path);
  if (r < 0)
    return r;
  r = host_statat (newparent, npfd, newname, &dst);
  if (r == HOST_FS_UNSERVED)
    return -EBUSY;
  dst_exists = r >= 0;
  /* Moving a directory from or to a place below which other rules decide
   * would carry the paths below it out of their rules' reach (a denied file
   * would come out readable under the new name) or into another's:
   * refused, for each directory that moves (both of an exchange) at its
   * old and its new place, and for a directory that a plain rename
   * replaces.  Elsewhere every path below is decided alike at both places
   * (fb_policy_subtree_has_rules), and the moved directory itself is
   * writable at both. */
  {
    bool src_moves = S_ISDIR (sst.st_mode);
    bool dst_dir = dst_exists && S_ISDIR (dst.st_mode) && !(flags & RENAME_NOREPLACE);
    bool dst_moves = dst_dir && (flags & RENAME_EXCHANGE);

    if (((src_moves || dst_moves) && view_subtree_has_rules (view, &ci.decision, ci.path)) ||
        ((src_moves || dst_dir) && view_subtree_has_rules (view, &nci.decision, nci.path)))
      {
        view_emit (view, caller, FB_OP_RENAME, ci.path, nci.path, FB_ACCESS_WRITE, FB_DECISION_DENY, EACCES,
                   view_refusal_rule (VIEW_REFUSAL_RULED_DIR));
        return -EACCES;
      }
  }
  /* nor anything on the way to fusebox's own state, a directory or a link
   * (the source, or the target an exchange moves or a rename replaces):
   * the state would be elsewhere, a link or a directory of the caller's
   * in its place */
  if (view_state_on_the_way (view, &sst) || (dst_exists && view_state_on_the_way (view, &dst)) ||
      /* or a marked directory (a run's, which stays 0700): moved, the
       * run's files would be where a sandbox chose */
      (S_ISDIR (sst.st_mode) && view_state_marked (parent, name, -1, &sst)) ||
      (dst_exists && S_ISDIR (dst.st_mode) && view_state_marked (newparent, newname, -1, &dst)))
    {
      view_emit (view, caller, FB_OP_RENAME, ci.path, nci.path, FB_ACCESS_WRITE, FB_DECISION_DENY, EACCES,
                 view_refusal_rule (VIEW_REFUSAL_OWN_STATE));
      return -EACCES;
    }
  /* nothing moves into or out of a private source: no tree of the host's
   * goes with the run, whatever the view hides in it */
  r = check_same_source (view, caller, FB_OP_RENAME, FB_ACCESS_WRITE, ci.path, nci.path, &ci.decision, &nci.decision);
  if (r < 0)
    return r;
  /* no path below the moved directory (either one of an exchange) may pass
   * FB_VIEW_PATH_MAX at its new place */
  r = check_depth (view, caller, pfd, name, &sst, ci.path, nci.path, ci.path, nci.path);
  if (r == 0 && dst_exists && (flags & RENAME_EXCHANGE))
    r = check_depth (view, caller, npfd, newname, &dst, nci.path, ci.path, ci.path, nci.path);
  if (r < 0)
    return r;
  g_mutex_lock (&view->moves_lock);
  r = renameat2 (pfd, name, npfd, newname, flags) < 0 ? -errno : 0;
  if (r == 0)
    view_rehome_after_rename (view, parent, name, newparent, newname, (flags & RENAME_EXCHANGE) != 0);
  g_mutex_unlock (&view->moves_lock);
  if (r == 0)
    {
      view_changed_name (view, parent, name, NULL);
      /* a replaced file loses a link */
      view_changed_name (view, newparent, newname, dst_exists && !S_ISDIR (dst.st_mode) ? &dst : NULL);
    }
  view_emit (view, caller, FB_OP_RENAME, ci.path, nci.path, FB_ACCESS_WRITE, FB_DECISION_ALLOW, -r, ci.decision.rule);
  return r;
}
