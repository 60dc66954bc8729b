/* fusebox — narrowing one policy by another (fb_policy_narrow).
 *
 * The remote API applies a call's `sandbox` on top of the server's policy:
 * every decision of the result is the narrower of BASE's and NARROW's for the
 * same view path, so a call can only take access away.  Neither side is
 * rewritten; the narrowed policy decides with both, step by step, with the
 * same fb_policy_step() as a loaded policy, and keeps each side's deciding
 * rule in the decision (rule and priv_other), so that decide_child continues
 * both sides without re-walking the path.
 *
 * What is combined where:
 *  - access: fb_policy_access_narrow of the two; the deciding rule is the
 *    more restrictive side's, BASE's on a tie;
 *  - mounts, sources, mounted children: BASE's alone (NARROW giving a source
 *    is refused: a call can't remap host paths);
 *  - traversal: a union trie of both sides' literal paths, annotated at
 *    narrowing time with the combined decision of each of its paths, gives
 *    traversable and reachable_children exactly for the combination;
 *  - network: the narrower (none < allowlist < host); a host or address
 *    is allowed only when both sides allow it (policy-net.c), so a call
 *    can take hosts away, never add them; protected names: both sides
 *    apply theirs in their own decisions, and fb_policy_is_protected_name
 *    answers the union with the narrower access.
 * A narrowed policy can't be narrowed again (its decisions carry exactly two
 * sides); narrow the loaded policies instead.
 *
 * Like any policy it is immutable once built and holds references to both
 * sides; queries run concurrently on any thread.
 */
#include "policy/policy-private.h"

typedef struct NarrowNode NarrowNode;
struct NarrowNode
{
  const char *name; /* borrowed from a side's trie ("" for the root) */
  char *path;
  const PolicyNode *b; /* BASE's trie node at this path, or NULL */
  const PolicyNode *n; /* NARROW's, or NULL */
  FbNameMap children;  /* name → NarrowNode */
  GPtrArray *child_list;
  bool visible;       /* the combined decision of path is visible */
  bool visible_below; /* ... of some path strictly below */
  const char **reachable;
};

/* Is P inside the array BASE of N elements?  (uintptr_t: comparing pointers
 * into different arrays, or offsetting NULL for an empty one, is undefined.) */
static bool
in_array (const FbPolicyRule *p, const FbPolicyRule *base, guint n)
{
  uintptr_t x = (uintptr_t)p;
  uintptr_t lo = (uintptr_t)base;

  return n > 0 && x >= lo && x < lo + (uintptr_t)n * sizeof (FbPolicyRule);
}

/* Does RULE belong to POLICY (a rule, a protected name, or a synthetic)? */
static bool
rule_of (const FbPolicy *policy, const FbPolicyRule *rule)
{
  return in_array (rule, policy->rules, policy->n_rules) ||
         in_array (rule, policy->protected_rules, policy->n_protected) || rule == &policy->default_rule ||
         rule == &policy->malformed_rule || rule == &policy->fold_rule;
}

/* The two sides' decisions at the same path, from a decision of the
 * narrowed POLICY. */
static void
split_sides (const FbPolicy *policy, const FbPolicyDecision *d, FbPolicyDecision *ret_b, FbPolicyDecision *ret_n)
{
  const NarrowNode *node = d->priv_node;
  const FbPolicyRule *rb;
  const FbPolicyRule *rn;

  if (d->priv_other == NULL)
    {
      /* not a decision of a narrowed policy: decide as for a malformed path */
      rb = &policy->base->malformed_rule;
      rn = &policy->narrow->malformed_rule;
    }
  else if (rule_of (policy->base, d->rule))
    {
      rb = d->rule;
      rn = d->priv_other;
    }
  else
    {
      rn = d->rule;
      rb = d->priv_other;
    }
  /* A decision's access is always its rule's (inheritance copies both,
   * protected names narrow to the name's access), so the rule is the state. */
  *ret_b = (FbPolicyDecision){
    .access = rb->access,
    .rule = rb,
    .mount = d->mount,
    .is_mount_point = d->is_mount_point,
    .mounted_children = d->mounted_children,
    .reachable_children = fb_policy_no_names,
    .priv_node = node != NULL ? node->b : NULL,
    .priv_depth = d->priv_depth,
  };
  *ret_n = (FbPolicyDecision){
    .access = rn->access,
    .rule = rn,
    .mount = &g_array_index (policy->narrow->mounts, FbPolicyMount, 0),
    .mounted_children = fb_policy_no_names,
    .reachable_children = fb_policy_no_names,
    .priv_node = node != NULL ? node->n : NULL,
    .priv_depth = d->priv_depth,
  };
}

static void
combine (const FbPolicyDecision *b, const FbPolicyDecision *n, const NarrowNode *node, FbPolicyDecision *ret)
{
  /* fb_policy_access_narrow returns its first argument on a tie: BASE's */
  bool narrow_wins = fb_policy_access_narrow (b->access, n->access) != b->access;
  FbPolicyAccess access = narrow_wins ? n->access : b->access;

  ret->access = access;
  ret->rule = narrow_wins ? n->rule : b->rule;
  ret->priv_other = narrow_wins ? b->rule : n->rule;
  ret->mount = b->mount;
  ret->is_mount_point = b->is_mount_point;
  ret->mounted_children = b->mounted_children;
  ret->traversable = node != NULL && node->visible_below && !fb_policy_access_info (access)->readable;
  ret->reachable_children = ret->traversable ? node->reachable : fb_policy_no_names;
  ret->priv_node = node;
  ret->priv_depth = b->priv_depth;
}

static void
decide_malformed (const FbPolicy *policy, const FbPolicyMount *mount, guint depth, FbPolicyDecision *ret)
{
  FbPolicyDecision b;
  FbPolicyDecision n;

  fb_policy_decide_malformed (policy->base, mount, depth, &b);
  fb_policy_decide_malformed (policy->narrow, &g_array_index (policy->narrow->mounts, FbPolicyMount, 0), depth, &n);
  *ret = b;
  combine (&b, &n, NULL, ret);
}

static const NarrowNode *
child_of (const NarrowNode *node, const char *name, guint32 len)
{
  if (node == NULL)
    return NULL;
  return fb_name_map_lookup (&node->children, name, len, fb_name_hash (name, len));
}

void
fb_policy_narrowed_decide (const FbPolicy *policy, const char *view_path, FbPolicyDecision *ret)
{
  FbPathComp stack[64];
  g_autofree FbPathComp *heap = NULL;
  FbPathComp *comps = stack;
  const NarrowNode *node = policy->nroot;
  FbPolicyDecision b;
  FbPolicyDecision n;
  guint count = 0;

  if (!fb_policy_split_normalized (view_path, stack, G_N_ELEMENTS (stack), &count))
    {
      decide_malformed (policy, &g_array_index (policy->base->mounts, FbPolicyMount, 0), 0, ret);
      return;
    }
  if (count > G_N_ELEMENTS (stack))
    {
      comps = heap = g_new (FbPathComp, count);
      fb_policy_split_normalized (view_path, comps, count, &count);
    }
  fb_policy_decide_root (policy->base, &b);
  fb_policy_decide_root (policy->narrow, &n);
  for (guint k = 0; k < count; k++)
    {
      FbPolicyComps c = { .comps = comps, .n = k + 1 };

      fb_policy_step (policy->base, &b, comps[k].s, comps[k].len, &c, &b);
      fb_policy_step (policy->narrow, &n, comps[k].s, comps[k].len, &c, &n);
      node = child_of (node, comps[k].s, comps[k].len);
    }
  *ret = b;
  combine (&b, &n, node, ret);
}

void
fb_policy_narrowed_decide_child (const FbPolicy *policy, const FbPolicyDecision *parent, const char *parent_path,
                                 const char *name, FbPolicyDecision *ret)
{
  gsize len = strlen (name);
  FbPathComp buf[64];
  FbPolicyComps c = { .parent_path = parent_path, .name = name, .name_len = (guint32)len, .buf = buf, .buf_len = 64 };
  FbPolicyDecision pb;
  FbPolicyDecision pn;
  FbPolicyDecision b;
  FbPolicyDecision n;
  const NarrowNode *node;

  if (len == 0 || len > FB_POLICY_MAX_PATH || strchr (name, '/') != NULL || strcmp (name, ".") == 0 ||
      strcmp (name, "..") == 0 || parent_path == NULL || parent_path[0] != '/')
    {
      decide_malformed (policy, parent->mount, parent->priv_depth + 1, ret);
      return;
    }
  split_sides (policy, parent, &pb, &pn);
  node = child_of (parent->priv_node, name, (guint32)len);
  fb_policy_step (policy->base, &pb, name, (guint32)len, &c, &b);
  fb_policy_step (policy->narrow, &pn, name, (guint32)len, &c, &n);
  g_free (c.heap);
  *ret = b;
  combine (&b, &n, node, ret);
}

void
fb_policy_narrowed_literal_children (const FbPolicy *policy, const FbPolicyDecision *d, GPtrArray *names)
{
  const NarrowNode *node = d->priv_other != NULL ? d->priv_node : NULL;

  for (guint i = 0; node != NULL && i < node->child_list->len; i++)
    g_ptr_array_add (names, (gpointer)((const NarrowNode *)g_ptr_array_index (node->child_list, i))->name);
}

/* The side RULE belongs to is narrowed to it; the rest as ever. */
void
fb_policy_narrowed_restrict (const FbPolicy *policy, FbPolicyDecision *d, const FbPolicyRule *rule)
{
  FbPolicyDecision b;
  FbPolicyDecision n;
  FbPolicyDecision *side;

  split_sides (policy, d, &b, &n);
  side = rule_of (policy->base, rule) ? &b : &n;
  if (fb_policy_access_narrow (side->access, rule->access) == side->access)
    return;
  side->access = rule->access;
  side->rule = rule;
  combine (&b, &n, d->priv_node, d);
}

void
fb_policy_narrowed_close_folded (const FbPolicy *policy, FbPolicyDecision *d)
{
  FbPolicyDecision b;
  FbPolicyDecision n;

  fb_policy_narrowed_restrict (policy, d, &policy->base->fold_rule);
  split_sides (policy, d, &b, &n);
  b.mounted_children = fb_policy_no_names;
  combine (&b, &n, NULL, d);
}

bool
fb_policy_narrowed_subtree_has_rules (const FbPolicy *policy, const FbPolicyDecision *decision, const char *view_path)
{
  const NarrowNode *node = decision->priv_node;

  return fb_policy_subtree_has_rules_at (policy->base, node != NULL ? node->b : NULL, view_path) ||
         fb_policy_subtree_has_rules_at (policy->narrow, node != NULL ? node->n : NULL, view_path);
}

/* ---- Building ------------------------------------------------------------- */

static NarrowNode *
build (FbPolicy *policy, const PolicyNode *b, const PolicyNode *n, const char *name, const char *parent_path)
{
  NarrowNode *node = g_new0 (NarrowNode, 1);
  FbPolicyDecision db;
  FbPolicyDecision dn;

  node->name = name;
  node->path = parent_path == NULL   ? g_strdup ("/")
               : parent_path[1] == 0 ? g_strconcat ("/", name, NULL)
                                     : g_strconcat (parent_path, "/", name, NULL);
  node->b = b;
  node->n = n;
  node->child_list = g_ptr_array_new ();
  node->reachable = (const char **)fb_policy_no_names;
  g_ptr_array_add (policy->nnodes, node);

  /* The combined decision of this very path: what traversal is built on. */
  fb_policy_decide (policy->base, node->path, &db);
  fb_policy_decide (policy->narrow, node->path, &dn);
  node->visible = fb_policy_access_visible (fb_policy_access_narrow (db.access, dn.access));

  /* Children: the union of both sides' (each side's list is sorted). */
  for (guint side = 0; side < 2; side++)
    {
      const PolicyNode *from = side == 0 ? b : n;

      for (guint i = 0; from != NULL && i < from->child_list->len; i++)
        {
          const PolicyNode *c = g_ptr_array_index (from->child_list, i);
          const PolicyNode *cb;
          const PolicyNode *cn;
          NarrowNode *child;

          if (fb_name_map_lookup (&node->children, c->name, c->name_len, fb_name_hash (c->name, c->name_len)) != NULL)
            continue;
          cb = b != NULL ? fb_name_map_lookup (&b->children, c->name, c->name_len, fb_name_hash (c->name, c->name_len))
                         : NULL;
          cn = n != NULL ? fb_name_map_lookup (&n->children, c->name, c->name_len, fb_name_hash (c->name, c->name_len))
                         : NULL;
          child = build (policy, cb, cn, c->name, node->path);
          fb_name_map_insert (&node->children, child->name, c->name_len, child);
          g_ptr_array_add (node->child_list, child);
        }
    }
  return node;
}

static gint
compare_nodes (gconstpointer a, gconstpointer b)
{
  const NarrowNode *na = *(const NarrowNode *const *)a;
  const NarrowNode *nb = *(const NarrowNode *const *)b;

  return strcmp (na->name, nb->name);
}

static void
summarize (NarrowNode *node)
{
  g_autoptr (GPtrArray) reachable = g_ptr_array_new ();

  g_ptr_array_sort (node->child_list, compare_nodes);
  for (guint i = 0; i < node->child_list->len; i++)
    {
      NarrowNode *child = g_ptr_array_index (node->child_list, i);

      summarize (child);
      if (child->visible || child->visible_below)
        {
          g_ptr_array_add (reachable, (gpointer)child->name);
          node->visible_below = true;
        }
    }
  node->reachable = fb_policy_names_new (reachable);
}

void
fb_policy_narrowed_clear (FbPolicy *policy)
{
  if (policy->nnodes != NULL)
    {
      for (guint i = 0; i < policy->nnodes->len; i++)
        {
          NarrowNode *node = g_ptr_array_index (policy->nnodes, i);

          fb_name_map_clear (&node->children);
          g_ptr_array_unref (node->child_list);
          fb_policy_names_free (node->reachable);
          g_free (node->path);
          g_free (node);
        }
      g_clear_pointer (&policy->nnodes, g_ptr_array_unref);
    }
  policy->nroot = NULL;
  g_clear_pointer (&policy->base, fb_policy_unref);
  g_clear_pointer (&policy->narrow, fb_policy_unref);
}

FbPolicy *
fb_policy_narrow (FbPolicy *base, FbPolicy *narrow, GError **error)
{
  g_autoptr (FbPolicy) policy = NULL;
  g_autofree char *origin = NULL;

  g_return_val_if_fail (base != NULL && narrow != NULL, NULL);
  if (base->narrow != NULL || narrow->narrow != NULL)
    {
      g_set_error (error, FB_POLICY_ERROR, FB_POLICY_ERROR_VALUE,
                   "%s: a narrowed policy can't be narrowed again; narrow the loaded policy instead",
                   base->narrow != NULL ? base->origin : narrow->origin);
      return NULL;
    }
  for (guint i = 0; i < narrow->n_rules; i++)
    if (narrow->rules[i].source != NULL)
      {
        g_set_error (error, FB_POLICY_ERROR, FB_POLICY_ERROR_VALUE,
                     "%s: rules[%u].source: a narrowing policy can't give a source (it may only take access away, "
                     "not show other host directories); remove \"source\"",
                     narrow->origin, i);
        return NULL;
      }

  origin = g_strdup_printf ("%s narrowed by %s", base->origin, narrow->origin);
  policy = fb_policy_new_empty (origin);
  policy->base = fb_policy_ref (base);
  policy->narrow = fb_policy_ref (narrow);
  /* Allowlists intersect: fb_policy_net_decide asks both sides.  host
   * narrowed by an allowlist is that allowlist, and the other way round. */
  policy->network = fb_policy_network_narrow (base->network, narrow->network);

  /* Protected names: the union, each with the narrower access (BASE's rule
   * on a tie). */
  for (guint side = 0; side < 2; side++)
    {
      const FbPolicy *from = side == 0 ? base : narrow;

      for (guint i = 0; i < from->n_protected; i++)
        {
          const FbPolicyRule *rule = &from->protected_rules[i];
          gsize len = strlen (rule->glob);
          const FbPolicyRule *have =
            fb_name_map_lookup (&policy->protected_map, rule->glob, len, fb_name_hash (rule->glob, len));

          if (have == NULL || fb_policy_access_narrow (have->access, rule->access) != have->access)
            fb_name_map_insert (&policy->protected_map, rule->glob, len, (gpointer)rule);
        }
    }
  policy->n_protected = policy->protected_map.n;

  policy->nnodes = g_ptr_array_new ();
  policy->nroot = build (policy, base->root, narrow->root, "", NULL);
  summarize (policy->nroot);
  return g_steal_pointer (&policy);
}

char *
fb_policy_narrowed_to_json (const FbPolicy *policy)
{
  g_autofree char *base = fb_policy_to_json (policy->base);
  g_autofree char *narrow = fb_policy_to_json (policy->narrow);

  /* No single policy in the format says "the narrower of two": both are
   * shown, under a key that makes the text refuse to load as one. */
  return g_strdup_printf ("{ \"narrowed\": {\n\"base\": %s,\n\"narrow\": %s\n} }\n", base, narrow);
}
