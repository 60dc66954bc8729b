/* fusebox — the view's name resolution: the lookup of one name below a
 * node, the root, and the walk of a view path.  A lookup checks the name
 * and decides it (fs-view-check.c), finds or opens its host object
 * (fs-view-host.c) and enters a node in the table (fs-view-node.c). */
#include "fs/fs-private.h"

#include <dirent.h>
#include <string.h>
#include <sys/sysmacros.h>

/* --- one name --------------------------------------------------------------- */

static bool
dev_is_blank (FbView *view, dev_t dev)
{
  for (guint i = 0; i < G_N_ELEMENTS (view->blank_devs); i++)
    if (view->blank_devs[i] != 0 && view->blank_devs[i] == dev)
      return true;
  return false;
}

void
fb_view_blank_own_mount (FbView *view, dev_t dev)
{
  view->blank_devs[G_N_ELEMENTS (view->blank_devs) - 1] = dev;
}

static bool
mount_is_identity (const FbPolicyMount *m)
{
  return m != NULL && m->host_path != NULL && strcmp (m->host_path, m->view_path) == 0;
}

/* A node for the host object at NAME in PARENT whose attributes are ST, on
 * a filesystem FS (a HostFs): FD (O_PATH, taken) when it was opened, or -1
 * for a non-directory only stat'ed, whose node holds no descriptor anyway. */
static int
node_from_host (FbView *view, FbViewNode *parent, const char *name, const ChildInfo *ci, int fd, const struct stat *st,
                int fs, FbViewNode **ret_node, struct stat *ret_st)
{
  _fb_cleanup_fd_ int owned = fd;
  FbViewNode *node;

  /* the view's memory budget (fs.h, Bounds): the kernel must forget some
   * names first */
  if (fb_view_count_nodes (view) >= view->node_max)
    return -ENOMEM;
  /* fusebox's own state reached by an alias its directory's check can't
   * know of (a bind mount, a host rename since start): not found */
  if (view_state_hides (view, st))
    return -ENOENT;
  /* another run's own object, made where this view shows (a --run-dir in a
   * workspace, made after this view): not found either; a mount's source
   * is fusebox's to choose (a run's private /tmp is marked); one that is
   * not served is not asked (its mark is an extended attribute) */
  if (fs != HOST_FS_UNSERVED && !ci->decision.is_mount_point && view_state_marked (parent, name, owned, st))
    return -ENOENT;
  /* The view's own mount, /proc, /sys and /dev (dev_is_blank); the FUSE
   * filesystem of a user other than the daemon's and root, another fusebox
   * view (HOST_FS_UNSERVED, fs-view-host.c): a server that stops answering
   * would hold the worker that asked it; a view through a view adds
   * nothing, and two that reach each other's mount point would serve each
   * other, a worker of each per level, until neither could end. */
  if (dev_is_blank (view, st->st_dev) || fs == HOST_FS_UNSERVED)
    node = node_new (view, NODE_BLANK, -1, NULL, &ci->decision, name);
  else if (!S_ISDIR (st->st_mode) && !ci->decision.is_mount_point && parent != NULL && node_is_host_dir (parent))
    {
      /* A non-directory holds no descriptor (fs.h, Descriptors): it is
       * opened again from its parent when an operation needs it. */
      node = node_new (view, NODE_HOST, -1, st, &ci->decision, name);
      node->reopen = true;
    }
  else if (owned < 0)
    return -EINVAL; /* a directory is opened first */
  else
    {
      node = node_new (view, NODE_HOST, fb_steal_fd (&owned), st, &ci->decision, name);
      /* A directory's descriptor is an entry of the cache (fs-view-fd.c),
       * found again by name from its parent; a mount's source is not its
       * parent's child on the host, and keeps its own. */
      node->evictable =
        S_ISDIR (st->st_mode) && !ci->decision.is_mount_point && parent != NULL && node_is_host_dir (parent);
    }
  node->asks = fs == HOST_FS_ASKS;
  node->mount_root =
    node->kind == NODE_HOST && (parent == NULL || parent->kind != NODE_HOST || parent->dev != node->dev ||
                                (S_ISDIR (st->st_mode) && node->host_fd >= 0 && host_is_mount_root (node->host_fd)));
  node = table_insert (view, parent, node);
  if (node->evictable)
    node_fd_cached (node);
  /* (while the parent's descriptor is held: fs-view-fold.c) */
  view_dir_fold_inherit (node, parent);
  if (ret_st != NULL)
    {
      /* the node in the table shows the object just stat'ed (or a blank) */
      int r = node->kind == NODE_HOST ? (*ret_st = *st, 0) : node_stat (view, node, ret_st);
      if (r < 0)
        {
          fb_view_node_unref (node);
          return r;
        }
    }
  *ret_node = node;
  return 0;
}

/* A node for a host object just opened (FD, O_PATH) at NAME in PARENT.
 * Takes FD. */
int
node_from_host_fd (FbView *view, FbViewNode *parent, const char *name, const ChildInfo *ci, int fd,
                   FbViewNode **ret_node, struct stat *ret_st)
{
  _fb_cleanup_fd_ int owned = fd;
  struct stat st;
  int fs = host_stat_fd (parent, owned, &st);

  if (fs < 0)
    return fs;
  return node_from_host (view, parent, name, ci, fb_steal_fd (&owned), &st, fs, ret_node, ret_st);
}

/* The node at (PARENT, NAME) when it still shows the host object there:
 * one fstatat instead of opening the name again.  Returns a reference. */
static FbViewNode *
reuse_known_node (FbView *view, FbViewNode *parent, int parent_fd, const char *name, struct stat *ret_st)
{
  FbViewNode *node;
  struct stat st;
  int fs;

  g_mutex_lock (&view->lock);
  node = table_find_locked (view, parent, name);
  if (node != NULL)
    g_atomic_int_inc (&node->ref);
  g_mutex_unlock (&view->lock);
  if (node == NULL)
    return NULL;
  /* (a filesystem not served now, or one that asks where the node's did
   * not: another mount that took its device and inode numbers) */
  if (node->kind == NODE_HOST && (fs = host_statat (parent, parent_fd, name, &st)) >= 0 && fs != HOST_FS_UNSERVED &&
      (fs == HOST_FS_ASKS) == node->asks && st.st_ino == node->ino && st.st_dev == node->dev &&
      (st.st_mode & S_IFMT) == node->type)
    {
      if (ret_st != NULL)
        *ret_st = st;
      return node;
    }
  fb_view_node_unref (node);
  return NULL;
}

int
lookup_child (FbView *view, FbViewNode *parent, NodeState *pst, const char *name, const ChildInfo *ci,
              FbViewNode **ret_node, struct stat *ret_st)
{
  return lookup_child_typed (view, parent, pst, name, DT_UNKNOWN, ci, ret_node, ret_st);
}

int
lookup_child_typed (FbView *view, FbViewNode *parent, NodeState *pst, const char *name, unsigned char type_hint,
                    const ChildInfo *ci, FbViewNode **ret_node, struct stat *ret_st)
{
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  FbViewNode *node;
  NodeKind kind = NODE_HOST;
  bool pin = false;
  int fd = -1, pfd = -1;

  if (parent->kind == NODE_BLANK)
    return -ENOENT;
  if (node_is_host_dir (parent))
    {
      /* the parent's descriptor for the whole lookup (it may have been
       * closed while unused: then opened again here) */
      pfd = node_fd_get (parent, &hold);
      if (pfd < 0)
        return pfd;
    }
  if (is_blank_path (view, ci->path))
    kind = NODE_BLANK;
  else if (ci->decision.is_mount_point || name_in (pst->decision.mounted_children, name))
    {
      node = pinned_find (view, parent, name, ci->decision.is_mount_point);
      if (node != NULL)
        {
          int r = ret_st != NULL ? node_stat (view, node, ret_st) : 0;
          if (r < 0)
            {
              fb_view_node_unref (node);
              return r;
            }
          *ret_node = node;
          return 0;
        }
      pin = true;
      if (ci->decision.is_mount_point)
        {
          fd = mount_fd_dup (view, ci->decision.mount);
          /* a private directory that could not be made (or no descriptor
           * left): the error, not an empty stand-in in its place */
          if (fd < 0 && fd != -ENOENT)
            return fd;
        }
      else if (parent->kind == NODE_HOST)
        {
          /* A directory on the way to a mount point: the host's own when
           * it has one there, else made up.  The host's can be replaced,
           * so it is revalidated like any host name. */
          node = reuse_known_node (view, parent, pfd, name, ret_st);
          if (node != NULL)
            {
              *ret_node = node;
              return 0;
            }
          fd = host_open_child (pfd, name);
          if (fd >= 0)
            {
              struct stat st;
              int fs = host_stat_fd (parent, fd, &st);
              if (fs < 0 || fs == HOST_FS_UNSERVED ||
                  (!S_ISDIR (st.st_mode) && !mount_is_identity (ci->decision.mount)))
                {
                  close (fd);
                  fd = -1;
                }
            }
        }
      if (fd < 0)
        kind = NODE_SYNTHETIC;
    }
  else if (parent->kind != NODE_HOST)
    return -ENOENT;
  else
    {
      /* The common case of a revalidation: the kernel asks again for a name
       * it knows, and the host still has the same object there. */
      node = reuse_known_node (view, parent, pfd, name, ret_st);
      if (node != NULL)
        {
          *ret_node = node;
          return 0;
        }
      /* A new name: a non-directory is only stat'ed (its node holds no
       * descriptor), one system call where opening it, stat'ing the
       * descriptor and closing it took three.  The name was checked
       * (check_name: one component, not "." or ".."), so fstatat resolves
       * exactly what openat2 with RESOLVE_BENEATH would, and never follows
       * it; the object is opened, and checked to be the same one, when an
       * operation needs it (node_host_fd).  A directory, or any name a
       * listing says is one, is opened at once: its node keeps the
       * descriptor. */
      if (type_hint != DT_DIR)
        {
          struct stat st;
          int fs = host_statat (parent, pfd, name, &st);
          if (fs < 0)
            return fs;
          if (!S_ISDIR (st.st_mode) || fs == HOST_FS_UNSERVED)
            return node_from_host (view, parent, name, ci, -1, &st, fs, ret_node, ret_st);
        }
      fd = host_open_child (pfd, name);
      if (fd < 0)
        return fd;
    }

  if (kind == NODE_HOST)
    {
      int r = node_from_host_fd (view, parent, name, ci, fd, ret_node, ret_st);
      if (r == 0 && pin)
        node_pin (view, *ret_node);
      if (r == 0 && ci->decision.is_mount_point)
        view_mount_node_new (view, *ret_node);
      return r;
    }

  node = table_insert (view, parent, node_new (view, kind, -1, NULL, &ci->decision, name));
  if (pin)
    node_pin (view, node);
  if (ret_st != NULL)
    node_stat (view, node, ret_st);
  *ret_node = node;
  return 0;
}

int
fb_view_lookup (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, FbViewNode **ret_node,
                struct stat *ret_st)
{
  g_autoptr (NodeState) pst = node_get_state (parent);
  g_auto (ChildInfo) ci = { 0 };
  FbDecision decision;
  FbViewNode *node = NULL;
  int r;

  /* a directory that may fold names is probed with the first existing
   * one, before it is decided (fs-view-fold.c) */
  if (check_name (name) == 0)
    view_fold_settle (parent, name);
  r = decide_child_checked (view, parent, pst, name, &ci);
  if (r == -ENAMETOOLONG && check_name (name) == 0 && host_name_exists (parent, name))
    {
      /* a host tree deeper than the view decides (made outside fusebox):
       * reported, and not followed */
      g_autofree char *path = g_strconcat (pst->path, "/", name, NULL);
      view_emit (view, caller, FB_OP_LOOKUP, path, NULL, FB_ACCESS_STAT, FB_DECISION_DENY, ENAMETOOLONG,
                 view_refusal_rule (VIEW_REFUSAL_TOO_LONG));
    }
  if (r < 0)
    return r;
  r = check_enter (pst, name, &decision);
  if (r < 0)
    {
      /* Only what the host really holds is reported as refused; every
       * refusal, whether the host holds the name or not, is answered alike
       * (FbViewCaller.ret_hidden). */
      if (decision == FB_DECISION_HIDE)
        view_emit_hidden (view, caller, ci.path, decision, -r, pst->decision.rule, host_name_exists (parent, name));
      else
        view_emit (view, caller, FB_OP_LOOKUP, ci.path, NULL, FB_ACCESS_STAT, decision, -r, pst->decision.rule);
      if (caller->ret_hidden != NULL)
        *caller->ret_hidden = true;
      return r;
    }
  if (decision_is_hidden (&ci.decision))
    {
      view_emit_hidden (view, caller, ci.path, FB_DECISION_HIDE, ENOENT, ci.decision.rule,
                        host_name_exists (parent, name));
      if (caller->ret_hidden != NULL)
        *caller->ret_hidden = true;
      return -ENOENT;
    }
  /* where the host folds names, only the spelling it lists is resolved */
  if (!child_is_structural (view, pst, &ci, name))
    {
      r = view_fold_admit (view, caller, parent, name, FB_OP_LOOKUP, FB_ACCESS_STAT, ci.path, NULL);
      if (r < 0)
        return r;
    }
  r = lookup_child (view, parent, pst, name, &ci, &node, ret_st);
  if (r == -ENOMEM)
    view_emit (view, caller, FB_OP_LOOKUP, ci.path, NULL, FB_ACCESS_STAT, FB_DECISION_DENY, ENOMEM,
               view_refusal_rule (VIEW_REFUSAL_NODES));
  /* a name probed and not found is a lookup too (level all): what a tool
   * looked for tells an auditor as much as what it found */
  if (r == 0 || r == -ENOENT)
    view_emit (view, caller, FB_OP_LOOKUP, ci.path, NULL, FB_ACCESS_STAT, FB_DECISION_ALLOW, -r, ci.decision.rule);
  if (r < 0)
    return r;
  if (!S_ISDIR (node->type))
    view_dir_child_stated (view, parent);
  *ret_node = node;
  return 0;
}

/* --- the root and the walk -------------------------------------------------- */

FbViewNode *
fb_view_get_root (FbView *view)
{
  FbViewNode *node;
  FbPolicyDecision d;
  struct stat st;
  int fd, fs;

  g_mutex_lock (&view->lock);
  node = table_find_locked (view, NULL, "");
  if (node != NULL)
    {
      g_atomic_int_inc (&node->ref);
      g_mutex_unlock (&view->lock);
      return node;
    }
  g_mutex_unlock (&view->lock);

  fb_policy_decide (view->policy, "/", &d);
  fd = mount_fd_dup (view, d.mount);
  fs = fd >= 0 ? host_stat_fd (NULL, fd, &st) : -EBADF;
  if (fs >= 0)
    {
      /* the policy's own choice: served whatever its filesystem */
      node = node_new (view, NODE_HOST, fd, &st, &d, "");
      node->asks = fs != HOST_FS_LOCAL;
    }
  else
    {
      if (fd >= 0)
        close (fd);
      node = node_new (view, NODE_SYNTHETIC, -1, NULL, &d, "");
    }
  node = table_insert (view, NULL, node);
  node_pin (view, node);
  if (node->kind == NODE_HOST)
    view_mount_node_new (view, node);
  return node;
}

static FbViewNode *
node_parent_ref (FbViewNode *node)
{
  FbView *view = node_view (node);
  FbViewNode *parent;

  g_mutex_lock (&view->lock);
  parent = node->parent != NULL ? fb_view_node_ref (node->parent) : NULL;
  g_mutex_unlock (&view->lock);
  return parent != NULL ? parent : fb_view_node_ref (node);
}

int
fb_view_walk (FbView *view, const FbViewCaller *caller, const char *path, FbViewWalkFlags flags, FbViewNode **ret_node)
{
  g_autoptr (FbViewNode) cur = NULL;
  g_autofree char *rest = NULL;
  const char *p;
  guint links = 0;

  if (path == NULL || path[0] != '/')
    return -EINVAL;
  if (strlen (path) > FB_VIEW_PATH_MAX)
    return -ENAMETOOLONG;
  cur = fb_view_get_root (view);
  if (cur->kind == NODE_HOST)
    view_source_check_mount (view, cur->decision->mount->id); /* a root rule's own source */
  rest = g_strdup (path);
  p = rest;
  for (;;)
    {
      g_autofree char *comp = NULL;
      g_autoptr (FbViewNode) next = NULL;
      const char *end;
      bool last, trailing_slash;
      int r;

      while (*p == '/')
        p++;
      if (*p == '\0')
        break;
      end = strchrnul (p, '/');
      comp = g_strndup (p, end - p);
      p = end;
      trailing_slash = *p == '/';
      {
        const char *q = p;
        while (*q == '/')
          q++;
        last = *q == '\0';
      }
      if (strcmp (comp, ".") == 0)
        continue;
      if (strcmp (comp, "..") == 0)
        {
          FbViewNode *up = node_parent_ref (cur);
          fb_view_node_unref (cur);
          cur = up;
          continue;
        }
      /* no attributes wanted: a pinned node then costs no system call */
      r = fb_view_lookup (view, caller, cur, comp, &next, NULL);
      if (r < 0)
        return r;
      /* a mount's source that left its host path is refused from here on
       * (fs-view-source.c): the walk has no watcher's events to wait for */
      if (next->kind == NODE_HOST && next->decision->is_mount_point)
        view_source_check_mount (view, next->decision->mount->id);
      if (S_ISLNK (next->type) && (!last || trailing_slash || !(flags & FB_VIEW_WALK_NOFOLLOW)))
        {
          g_autofree char *text = NULL;
          char *joined;

          if (++links > FB_VIEW_WALK_MAX_LINKS)
            return -ELOOP;
          r = fb_view_readlink (view, caller, next, &text);
          if (r < 0)
            return r;
          joined = g_strconcat (text, p, NULL); /* p is "" or starts with "/" */
          if (strlen (joined) > FB_VIEW_PATH_MAX)
            {
              g_free (joined);
              return -ENAMETOOLONG;
            }
          g_free (rest);
          rest = joined;
          p = rest;
          if (text[0] == '/')
            {
              fb_view_node_unref (cur);
              cur = fb_view_get_root (view);
            }
          continue;
        }
      if ((!last || trailing_slash) && !S_ISDIR (next->type))
        return -ENOTDIR;
      fb_view_node_unref (cur);
      cur = g_steal_pointer (&next);
    }
  *ret_node = g_steal_pointer (&cur);
  return 0;
}
