/* fusebox — the view's policy checks: what a node's decision lets an
 * operation do, the decision of a name below a directory, and the checks
 * before a name is made or removed (their refusals logged).
 *
 * What an access kind lets the sandbox do is its row of the policy's access
 * table (visible, readable, writable); what a refusal answers is its
 * decision's row (fb_decision_table): no check names an access.
 */
#include "fs/fs-private.h"

#include <string.h>

/* --- names ------------------------------------------------------------------ */

bool
name_in (const char *const *names, const char *name)
{
  for (guint i = 0; names != NULL && names[i] != NULL; i++)
    if (strcmp (names[i], name) == 0)
      return true;
  return false;
}

int
check_name (const char *name)
{
  gsize len;

  if (name == NULL || name[0] == '\0')
    return -EINVAL;
  /* "." and ".." would step out of the parent the decision was made for;
   * "/" would make one lookup several. */
  if (strcmp (name, ".") == 0 || strcmp (name, "..") == 0 || strchr (name, '/') != NULL)
    return -EINVAL;
  len = strlen (name);
  if (len > FB_VIEW_NAME_MAX)
    return -ENAMETOOLONG;
  return 0;
}

char *
join_path (const char *dir, const char *name)
{
  if (strcmp (dir, "/") == 0)
    return g_strconcat ("/", name, NULL);
  return g_strconcat (dir, "/", name, NULL);
}

/* --- decisions -------------------------------------------------------------- */

/* Refuse as D: *RET_DECISION = D, and its errno, negated. */
static int
refuse (FbDecision d, FbDecision *ret_decision)
{
  *ret_decision = d;
  return -fb_decision_info (d)->err;
}

bool
decision_is_hidden (const FbPolicyDecision *d)
{
  return !fb_policy_access_visible (d->access) && !d->traversable;
}

/* A write refused: read-only where the contents may be read, else denied. */
static int
write_refusal (FbPolicyAccess a, FbDecision *ret_decision)
{
  return refuse (fb_policy_access_info (a)->readable ? FB_DECISION_READONLY : FB_DECISION_DENY, ret_decision);
}

/* May D's directory or file be changed (its contents, names in it)?  A
 * traversable directory lists only its reachable children: never. */
static bool
decision_writable (const FbPolicyDecision *d)
{
  return fb_policy_access_info (d->access)->writable && !d->traversable;
}

int
check_access (const NodeState *st, Need need, FbDecision *ret_decision)
{
  const FbPolicyAccessInfo *a = fb_policy_access_info (st->decision.access);
  FbDecision d = FB_DECISION_ALLOW;

  if (decision_is_hidden (&st->decision))
    return refuse (FB_DECISION_HIDE, ret_decision != NULL ? ret_decision : &d);
  switch (need)
    {
      case NEED_STAT:
        break;
      case NEED_LIST:
        if (st->decision.traversable)
          break;
        G_GNUC_FALLTHROUGH;
      case NEED_READ:
        if (!a->readable)
          return refuse (FB_DECISION_DENY, ret_decision != NULL ? ret_decision : &d);
        break;
      case NEED_WRITE:
        if (!a->writable)
          return write_refusal (st->decision.access, ret_decision != NULL ? ret_decision : &d);
        break;
    }
  if (ret_decision != NULL)
    *ret_decision = FB_DECISION_ALLOW;
  return 0;
}

void
child_info_clear (ChildInfo *ci)
{
  g_clear_pointer (&ci->path, g_free);
}

static int
decide_checked (FbView *view, FbViewNode *parent, FbViewFold fold, const NodeState *pst, const char *name,
                ChildInfo *ret)
{
  int r = check_name (name);

  memset (ret, 0, sizeof *ret);
  if (r < 0)
    return r;
  if (!S_ISDIR (parent->type))
    return -ENOTDIR;
  /* the longest path the view decides (fs.h, Bounds): nothing is made or
   * looked up past it */
  if (pst->too_long || strlen (pst->path) + 1 + strlen (name) > FB_VIEW_PATH_MAX)
    return -ENAMETOOLONG;
  ret->path = join_path (pst->path, name);
  view_decide_child (view, fold, pst, name, &ret->decision);
  view_state_decide (view, parent, pst, name, &ret->decision);
  return 0;
}

int
decide_child_checked (FbView *view, FbViewNode *parent, const NodeState *pst, const char *name, ChildInfo *ret)
{
  return decide_checked (view, parent, view_dir_fold (parent), pst, name, ret);
}

int
decide_new_child_checked (FbView *view, FbViewNode *parent, const NodeState *pst, const char *name, ChildInfo *ret)
{
  return decide_checked (view, parent, view_dir_fold_new (parent), pst, name, ret);
}

/* What an existing name needs to be entered from its directory: the
 * directory is visible and, when it is traversable, the name is one of its
 * reachable children. */
int
check_enter (const NodeState *pst, const char *name, FbDecision *ret_decision)
{
  const FbPolicyDecision *d = &pst->decision;

  *ret_decision = FB_DECISION_ALLOW;
  if (decision_is_hidden (d))
    return refuse (FB_DECISION_HIDE, ret_decision);
  if (d->traversable)
    {
      if (name_in (d->reachable_children, name))
        return 0;
      return refuse (fb_policy_access_visible (d->access) ? FB_DECISION_DENY : FB_DECISION_HIDE, ret_decision);
    }
  /* A denied directory shows its own name, not what is inside. */
  if (!fb_policy_access_info (d->access)->readable)
    return refuse (FB_DECISION_DENY, ret_decision);
  return 0;
}

/* Making or removing a name needs the name (CI) and its directory (PST)
 * writable: else the refusal of the first that is not, with its rule. */
static int
check_name_writable (const NodeState *pst, const ChildInfo *ci, FbDecision *ret_decision, const FbPolicyRule **ret_rule)
{
  *ret_rule = ci->decision.rule;
  if (!decision_writable (&ci->decision))
    return write_refusal (ci->decision.access, ret_decision);
  if (!decision_writable (&pst->decision))
    {
      *ret_rule = pst->decision.rule;
      return write_refusal (pst->decision.access, ret_decision);
    }
  return 0;
}

int
check_create (const NodeState *pst, const ChildInfo *ci, FbDecision *ret_decision, const FbPolicyRule **ret_rule)
{
  *ret_decision = FB_DECISION_ALLOW;
  *ret_rule = ci->decision.rule;
  /* A hidden name can't be made to exist: EACCES, whether or not the
   * host holds something there (ENOENT or EEXIST would tell). */
  if (decision_is_hidden (&ci->decision))
    return refuse (FB_DECISION_DENY, ret_decision);
  return check_name_writable (pst, ci, ret_decision, ret_rule);
}

static int
check_remove (const NodeState *pst, const ChildInfo *ci, FbDecision *ret_decision, const FbPolicyRule **ret_rule)
{
  int r;

  *ret_rule = pst->decision.rule;
  r = check_enter (pst, strrchr (ci->path, '/') + 1, ret_decision);
  if (r < 0)
    return r;
  *ret_rule = ci->decision.rule;
  if (decision_is_hidden (&ci->decision))
    return refuse (FB_DECISION_HIDE, ret_decision);
  return check_name_writable (pst, ci, ret_decision, ret_rule);
}

bool
is_blank_path (FbView *view, const char *path)
{
  return name_in ((const char *const *)view->blank_paths, path);
}

/* Names that exist in the view whatever the host holds (mount points, the
 * directories leading to them, /proc /sys /dev): they can't be created,
 * removed or renamed through the view. */
bool
child_is_structural (FbView *view, const NodeState *pst, const ChildInfo *ci, const char *name)
{
  return ci->decision.is_mount_point || name_in (pst->decision.mounted_children, name) ||
         is_blank_path (view, ci->path);
}

/* --- before making or removing a name --------------------------------------- */

int
create_precheck (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const NodeState *pst, const char *name,
                 const ChildInfo *ci, FbOp op, const char *target_path)
{
  const FbPolicyRule *rule;
  FbDecision d;
  int r;

  r = check_create (pst, ci, &d, &rule);
  if (r < 0)
    {
      /* A name the view shows already is EEXIST whatever the policy, as the
       * kernel answers before asking for write access; a hidden one never
       * is (that would tell that it exists). */
      if (!decision_is_hidden (&ci->decision) &&
          (child_is_structural (view, pst, ci, name) || host_name_exists (parent, name)))
        return -EEXIST;
      view_emit (view, caller, op, target_path != NULL ? target_path : ci->path, target_path != NULL ? ci->path : NULL,
                 FB_ACCESS_CREATE, d, -r, rule);
      return r;
    }
  if (child_is_structural (view, pst, ci, name))
    return -EEXIST;
  if (parent->kind != NODE_HOST)
    return -EROFS; /* a synthetic directory has no host directory to write to */
  if (view_state_dir_marked (parent, pst))
    {
      view_emit (view, caller, op, target_path != NULL ? target_path : ci->path, target_path != NULL ? ci->path : NULL,
                 FB_ACCESS_CREATE, FB_DECISION_DENY, EACCES, view_refusal_rule (VIEW_REFUSAL_OWN_STATE));
      return -EACCES;
    }
  return 0;
}

/* The checks before removing (or renaming away) NAME of PARENT.  A refusal
 * is only reported for something the host really holds; otherwise ENOENT. */
int
remove_precheck (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const NodeState *pst, const char *name,
                 const ChildInfo *ci, FbOp op, const char *target_path)
{
  const FbPolicyRule *rule;
  FbDecision d;
  int r;

  r = check_remove (pst, ci, &d, &rule);
  if (r < 0)
    {
      bool structural = child_is_structural (view, pst, ci, name);
      if (!structural && !host_name_exists (parent, name))
        return -ENOENT;
      if (d == FB_DECISION_HIDE && !host_name_exists (parent, name))
        return -ENOENT;
      view_emit (view, caller, op, ci->path, target_path, FB_ACCESS_DELETE, d, -r, rule);
      return r;
    }
  if (child_is_structural (view, pst, ci, name))
    return -EBUSY; /* a mount point or the way to one */
  if (parent->kind != NODE_HOST)
    return -EROFS;
  if (view_state_dir_marked (parent, pst))
    {
      view_emit (view, caller, op, ci->path, target_path, FB_ACCESS_DELETE, FB_DECISION_DENY, EACCES,
                 view_refusal_rule (VIEW_REFUSAL_OWN_STATE));
      return -EACCES;
    }
  return 0;
}
