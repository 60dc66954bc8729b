/* fusebox — the policy engine: compiling rules into a trie, and deciding.
 *
 * Decision (policy.h has the user's version): walk the path's components
 * c1..cn; at depth k the candidates are the literal rule(s) at Pk and the
 * globs matching Pk; the best of them by precedence (hide > deny > write >
 * read, fb_policy_access_precedence; then the lower rule index) decides Pk,
 * or, with no candidate, Pk inherits the decision of its parent.  "/" is
 * decided by the rules at "/" or else by the synthetic default (hide).  Then
 * a protected name without a literal rule of its own narrows the decision
 * (never widens it).
 *
 * Everything that does not depend on the path's non-literal components is
 * computed once at load time and stored in the trie node: the best literal
 * rule, the mount starting there, whether a visible rule lies below, the
 * reachable and mounted children.  A decision is then one trie step and a
 * few hash probes per component, with no allocation; fb_policy_decide_child
 * does the same single step from the parent's decision.
 *
 * The trie and the index are immutable after fb_policy_compile(), so queries
 * need no lock.
 */
#include "policy/policy-private.h"

/* Does rule A beat rule B at one depth?  Ties go to the earlier rule so that
 * the deciding rule does not depend on hash order. */
static inline bool
beats (const FbPolicyRule *a, const FbPolicyRule *b)
{
  int pa;
  int pb;

  if (b == NULL)
    return true;
  pa = fb_policy_access_precedence (a->access);
  pb = fb_policy_access_precedence (b->access);
  return pa > pb || (pa == pb && a->index < b->index);
}

/* ---- Compiling ---------------------------------------------------------- */

static PolicyNode *
node_new (FbPolicy *policy, PolicyNode *parent, const char *name, gsize len)
{
  PolicyNode *node = g_new0 (PolicyNode, 1);

  node->parent = parent;
  node->name = g_string_chunk_insert_len (policy->strings, name, (gssize)len);
  node->name_len = (guint32)len;
  node->depth = parent != NULL ? parent->depth + 1 : 0;
  if (parent == NULL)
    node->path = "/";
  else
    {
      g_autofree char *path =
        parent->depth == 0 ? g_strconcat ("/", node->name, NULL) : g_strconcat (parent->path, "/", node->name, NULL);

      node->path = g_string_chunk_insert (policy->strings, path);
    }
  node->child_list = g_ptr_array_new ();
  node->reachable = (const char **)fb_policy_no_names;
  node->mounted = (const char **)fb_policy_no_names;
  g_ptr_array_add (policy->nodes, node);
  if (parent != NULL)
    {
      fb_name_map_insert (&parent->children, node->name, len, node);
      g_ptr_array_add (parent->child_list, node);
    }
  return node;
}

static PolicyNode *
ensure_node (FbPolicy *policy, const char *path)
{
  PolicyNode *node = policy->root;

  for (const char *p = path; *p == '/' && p[1] != '\0';)
    {
      const char *c = p + 1;
      const char *end = strchrnul (c, '/');
      gsize len = (gsize)(end - c);
      PolicyNode *child = fb_name_map_lookup (&node->children, c, len, fb_name_hash (c, len));

      node = child != NULL ? child : node_new (policy, node, c, len);
      p = end;
    }
  return node;
}

static gint
compare_nodes (gconstpointer a, gconstpointer b)
{
  const PolicyNode *na = *(const PolicyNode *const *)a;
  const PolicyNode *nb = *(const PolicyNode *const *)b;

  return strcmp (na->name, nb->name);
}

/* The host path shown at VIEW_PATH under MOUNT (NULL when the mount's host
 * directory is not known: a private source loaded without ${RUN}). */
static char *
host_under (const FbPolicyMount *mount, const char *view_path)
{
  const char *rest;

  if (mount->host_path == NULL)
    return NULL;
  rest = strcmp (mount->view_path, "/") == 0 ? view_path : view_path + strlen (mount->view_path);
  if (rest[0] == '\0' || strcmp (rest, "/") == 0)
    return g_strdup (mount->host_path);
  if (strcmp (mount->host_path, "/") == 0)
    return g_strdup (rest);
  return g_strconcat (mount->host_path, rest, NULL);
}

static const char *
private_host (FbPolicy *policy, const char *view_path)
{
  g_autofree char *name = NULL;
  g_autofree char *host = NULL;

  if (policy->run == NULL)
    return NULL;
  name = fb_policy_private_dir_name (view_path);
  host = strcmp (policy->run, "/") == 0 ? g_strconcat ("/private/", name, NULL)
                                        : g_strconcat (policy->run, "/private/", name, NULL);
  return g_string_chunk_insert (policy->strings, host);
}

static guint
add_mount (FbPolicy *policy, const char *view_path, const char *host_path, bool is_private, const FbPolicyRule *rule)
{
  FbPolicyMount mount = {
    .id = policy->mounts->len,
    .view_path = view_path,
    .host_path = host_path,
    .is_private = is_private,
    .rule = rule,
  };

  g_array_append_val (policy->mounts, mount);
  return mount.id;
}

/* Preorder, children by name: parents get lower mount ids than children, and
 * the numbering does not depend on rule order.  Mount ids are stored +1 in
 * node->mount while the array may still grow (fb_policy_compile turns them
 * into pointers). */
static void
assign_mounts (FbPolicy *policy, PolicyNode *node, guint inherited)
{
  const FbPolicyRule *src = node->source_rule;
  bool starts_here = true;
  guint here;

  if (src != NULL && strcmp (src->source, "private") == 0)
    here = add_mount (policy, node->path, private_host (policy, node->path), true, src);
  else if (src != NULL)
    here = add_mount (policy, node->path, src->source, false, src);
  else if (node->parent == NULL)
    here = add_mount (policy, "/", "/", false, node->literal != NULL ? node->literal : &policy->default_rule);
  else if (node->literal != NULL && fb_policy_access_visible (node->literal->access))
    {
      g_autofree char *inherited_host =
        host_under (&g_array_index (policy->mounts, FbPolicyMount, inherited), node->path);

      /* A rule without source shows the host's object of the same path; below
       * a mount that maps elsewhere (a private HOME, /tmp) that takes a mount
       * of its own: a workspace under a private HOME stays the host's.  A
       * hidden path shows nothing, so it needs no host directory (which may
       * not even exist: "${HOME}/.ssh" hide under a private HOME). */
      if (inherited_host == NULL || strcmp (inherited_host, node->path) != 0)
        here = add_mount (policy, node->path, node->path, false, node->literal);
      else
        {
          starts_here = false;
          here = inherited;
        }
    }
  else
    {
      starts_here = false;
      here = inherited;
    }

  node->mount = starts_here ? GUINT_TO_POINTER (here + 1) : NULL;
  for (guint i = 0; i < node->child_list->len; i++)
    assign_mounts (policy, g_ptr_array_index (node->child_list, i), here);
}

/* Post-order: what lies below each node. */
static void
summarize (FbPolicy *policy, PolicyNode *node)
{
  g_autoptr (GPtrArray) reachable = g_ptr_array_new ();
  g_autoptr (GPtrArray) mounted = g_ptr_array_new ();

  for (guint i = 0; i < node->child_list->len; i++)
    {
      PolicyNode *child = g_ptr_array_index (node->child_list, i);
      bool visible;

      summarize (policy, child);
      visible = (child->literal != NULL && fb_policy_access_visible (child->literal->access)) || child->visible_below;
      if (visible)
        g_ptr_array_add (reachable, (gpointer)child->name);
      if (child->mount != NULL || child->mount_below)
        g_ptr_array_add (mounted, (gpointer)child->name);
      node->visible_below = node->visible_below || visible;
      node->literal_below = node->literal_below || child->literal != NULL || child->literal_below;
      node->mount_below = node->mount_below || child->mount != NULL || child->mount_below;
    }
  node->reachable = fb_policy_names_new (reachable);
  node->mounted = fb_policy_names_new (mounted);
}

bool
fb_policy_compile (FbPolicy *policy, GError **error)
{
  policy->nodes = g_ptr_array_new ();
  policy->mounts = g_array_new (FALSE, TRUE, sizeof (FbPolicyMount));
  fb_policy_glob_index_init (&policy->glob_index);
  policy->root = node_new (policy, NULL, "", 0);

  for (guint i = 0; i < policy->n_rules; i++)
    {
      const FbPolicyRule *rule = &policy->rules[i];

      if (rule->kind == FB_POLICY_RULE_PATH)
        {
          PolicyNode *node = ensure_node (policy, rule->path);

          if (beats (rule, node->literal))
            node->literal = rule;
          if (rule->source != NULL)
            {
              if (node->source_rule != NULL && strcmp (node->source_rule->source, rule->source) != 0)
                {
                  g_set_error (error, FB_POLICY_ERROR, FB_POLICY_ERROR_DUPLICATE,
                               "%s: rules[%d].source: %s already has the source \"%s\" (rules[%d])", policy->origin,
                               rule->index, rule->path, node->source_rule->source, node->source_rule->index);
                  return false;
                }
              if (node->source_rule == NULL)
                node->source_rule = rule;
            }
        }
      else if (rule->kind == FB_POLICY_RULE_GLOB)
        {
          if (policy->fold_globs == NULL)
            policy->fold_globs = g_new0 (FbGlob *, policy->n_rules);
          policy->fold_globs[i] = fb_policy_glob_fold (policy->globs[i]);
          fb_policy_glob_index_add (&policy->glob_index, policy->globs[i], rule);
        }
    }
  for (guint i = 0; i < policy->nodes->len; i++)
    {
      PolicyNode *node = g_ptr_array_index (policy->nodes, i);

      g_ptr_array_sort (node->child_list, compare_nodes);
    }

  assign_mounts (policy, policy->root, 0);
  for (guint i = 0; i < policy->nodes->len; i++)
    {
      PolicyNode *node = g_ptr_array_index (policy->nodes, i);
      guint id = GPOINTER_TO_UINT (node->mount);

      node->mount = id != 0 ? &g_array_index (policy->mounts, FbPolicyMount, id - 1) : NULL;
    }
  summarize (policy, policy->root);
  return true;
}

void
fb_policy_compiled_clear (FbPolicy *policy)
{
  if (policy->nodes != NULL)
    {
      for (guint i = 0; i < policy->nodes->len; i++)
        {
          PolicyNode *node = g_ptr_array_index (policy->nodes, i);

          fb_name_map_clear (&node->children);
          g_ptr_array_unref (node->child_list);
          fb_policy_names_free (node->reachable);
          fb_policy_names_free (node->mounted);
          g_free (node);
        }
      g_clear_pointer (&policy->nodes, g_ptr_array_unref);
    }
  policy->root = NULL;
  for (guint i = 0; policy->fold_globs != NULL && i < policy->n_rules; i++)
    fb_policy_glob_free (policy->fold_globs[i]);
  g_clear_pointer (&policy->fold_globs, g_free);
  g_clear_pointer (&policy->mounts, g_array_unref);
  if (policy->glob_index.all != NULL)
    fb_policy_glob_index_clear (&policy->glob_index);
}

/* ---- Deciding ------------------------------------------------------------ */

static const FbPathComp *
comps_get (FbPolicyComps *c)
{
  guint n;

  if (c->comps != NULL)
    return c->comps;
  n = fb_policy_path_split (c->parent_path, c->buf, c->buf_len - 1);
  if (n + 1 > c->buf_len)
    {
      c->heap = g_new (FbPathComp, n + 1);
      fb_policy_path_split (c->parent_path, c->heap, n);
      c->comps = c->heap;
    }
  else
    c->comps = c->buf;
  ((FbPathComp *)c->comps)[n].s = c->name;
  ((FbPathComp *)c->comps)[n].len = c->name_len;
  c->n = n + 1;
  return c->comps;
}

/* The first component of the path being decided, without splitting it all:
 * anchored globs whose first component is literal are skipped on a mismatch
 * (most anchored globs name a top-level directory). */
static FbPathComp
comps_first (FbPolicyComps *c, guint depth)
{
  FbPathComp first;

  if (c->comps != NULL)
    return c->comps[0];
  if (depth == 1)
    {
      first.s = c->name;
      first.len = c->name_len;
    }
  else
    {
      first.s = c->parent_path + 1;
      first.len = (guint32)(strchrnul (first.s, '/') - first.s);
    }
  return first;
}

static void
try_globs (GPtrArray *list, const char *name, guint32 len, guint depth, FbPolicyComps *comps, const FbPolicyRule **best)
{
  for (guint i = 0; i < list->len; i++)
    {
      const FbGlobEntry *e = g_ptr_array_index (list, i);
      const FbGlob *glob = e->glob;
      const FbPathComp *c;

      if (depth < glob->min_depth || depth > glob->max_depth || !beats (e->rule, *best))
        continue;
      if (glob->name_only)
        {
          /* "*.pem", "id_rsa": the last component alone decides */
          if (fb_policy_glob_match_name (glob, name, len))
            *best = e->rule;
          continue;
        }
      if (!glob->floating && glob->parts[0].literal)
        {
          FbPathComp first = comps_first (comps, depth);

          if (first.len != glob->parts[0].len || memcmp (first.s, glob->parts[0].text, first.len) != 0)
            continue;
        }
      c = comps_get (comps); /* sets comps->n */
      if (fb_policy_glob_match (glob, c, comps->n))
        *best = e->rule;
    }
}

static const FbPolicyRule *
best_glob (const FbPolicy *policy, const char *name, guint32 len, guint32 hash, guint depth, FbPolicyComps *comps,
           const FbPolicyRule *best)
{
  const FbGlobIndex *idx = &policy->glob_index;
  GPtrArray *list;

  list = fb_name_map_lookup (&idx->by_name, name, len, hash);
  if (list != NULL)
    try_globs (list, name, len, depth, comps, &best);
  if (idx->by_extension.entries != NULL)
    {
      guint dots = 0;

      /* Suffixes after a dot, shortest first, as long as an indexed
       * extension could have that many dots. */
      for (guint32 i = len; i-- > 0 && dots < idx->n_extension_dots;)
        if (name[i] == '.')
          {
            dots++;
            list = fb_name_map_lookup (&idx->by_extension, name + i + 1, len - i - 1,
                                       fb_name_hash (name + i + 1, len - i - 1));
            if (list != NULL)
              try_globs (list, name, len, depth, comps, &best);
          }
    }
  if (idx->other->len > 0)
    try_globs (idx->other, name, len, depth, comps, &best);
  return best;
}

void
fb_policy_decide_malformed (const FbPolicy *policy, const FbPolicyMount *mount, guint depth, FbPolicyDecision *ret)
{
  *ret = (FbPolicyDecision){
    .access = FB_POLICY_ACCESS_HIDE,
    .rule = &policy->malformed_rule,
    .mount = mount,
    .mounted_children = fb_policy_no_names,
    .reachable_children = fb_policy_no_names,
    .priv_depth = depth,
  };
}

void
fb_policy_decide_root (const FbPolicy *policy, FbPolicyDecision *ret)
{
  const PolicyNode *root = policy->root;
  const FbPolicyRule *rule = root->literal != NULL ? root->literal : &policy->default_rule;

  *ret = (FbPolicyDecision){
    .access = rule->access,
    .rule = rule,
    .is_mount_point = true,
    .mount = &g_array_index (policy->mounts, FbPolicyMount, 0),
    .mounted_children = root->mounted,
    .priv_node = root,
    .priv_depth = 0,
  };
  ret->traversable = root->visible_below && !fb_policy_access_info (rule->access)->readable;
  ret->reachable_children = ret->traversable ? root->reachable : fb_policy_no_names;
}

/* One component: NAME (LEN bytes) below PARENT.  RET may alias PARENT. */
void
fb_policy_step (const FbPolicy *policy, const FbPolicyDecision *parent, const char *name, guint32 len,
                FbPolicyComps *comps, FbPolicyDecision *ret)
{
  const PolicyNode *pnode = parent->priv_node;
  guint32 hash = fb_name_hash (name, len);
  const PolicyNode *node = pnode != NULL ? fb_name_map_lookup (&pnode->children, name, len, hash) : NULL;
  const FbPolicyRule *best = node != NULL ? node->literal : NULL;
  const FbPolicyRule *prot;
  guint depth = parent->priv_depth + 1;
  FbPolicyAccess access;
  const FbPolicyRule *rule;

  if (policy->glob_index.all->len > 0)
    best = best_glob (policy, name, len, hash, depth, comps, best);
  if (best != NULL)
    {
      access = best->access;
      rule = best;
    }
  else
    {
      access = parent->access;
      rule = parent->rule;
    }
  if (policy->n_protected > 0 && (node == NULL || node->literal == NULL) &&
      (prot = fb_name_map_lookup (&policy->protected_map, name, len, hash)) != NULL)
    {
      FbPolicyAccess narrowed = fb_policy_access_narrow (access, prot->access);

      if (narrowed != access)
        {
          access = narrowed;
          rule = prot;
        }
    }

  ret->access = access;
  ret->rule = rule;
  if (node != NULL && node->mount != NULL)
    {
      ret->mount = node->mount;
      ret->is_mount_point = true;
    }
  else
    {
      ret->mount = parent->mount;
      ret->is_mount_point = false;
    }
  ret->traversable = node != NULL && node->visible_below && !fb_policy_access_info (access)->readable;
  ret->reachable_children = ret->traversable ? node->reachable : fb_policy_no_names;
  ret->mounted_children = node != NULL ? node->mounted : fb_policy_no_names;
  ret->priv_node = node;
  ret->priv_depth = depth;
  ret->priv_other = NULL; /* a narrowed policy's, set by its caller (policy-narrow.c) */
}

/* Split VIEW_PATH into COMPS (up to MAX stored, all counted) while checking
 * that it is normalized: one pass instead of two on the hot path. */
bool
fb_policy_split_normalized (const char *view_path, FbPathComp *comps, guint max, guint *ret_n)
{
  guint n = 0;

  if (view_path == NULL || view_path[0] != '/')
    return false;
  if (view_path[1] != '\0')
    for (const char *p = view_path; *p != '\0';)
      {
        const char *c = p + 1;
        const char *end = strchrnul (c, '/');
        guint32 len = (guint32)(end - c);

        if (len == 0 || (c[0] == '.' && (len == 1 || (len == 2 && c[1] == '.'))))
          return false;
        if (n < max)
          {
            comps[n].s = c;
            comps[n].len = len;
          }
        n++;
        p = end;
      }
  *ret_n = n;
  return true;
}

void
fb_policy_decide (const FbPolicy *policy, const char *view_path, FbPolicyDecision *ret)
{
  FbPathComp stack[64];
  g_autofree FbPathComp *heap = NULL;
  FbPathComp *comps = stack;
  guint n = 0;

  if (G_UNLIKELY (policy->narrow != NULL))
    {
      fb_policy_narrowed_decide (policy, view_path, ret);
      return;
    }
  if (!fb_policy_split_normalized (view_path, stack, G_N_ELEMENTS (stack), &n))
    {
      fb_policy_decide_malformed (policy, &g_array_index (policy->mounts, FbPolicyMount, 0), 0, ret);
      return;
    }
  if (n > G_N_ELEMENTS (stack))
    {
      comps = heap = g_new (FbPathComp, n);
      fb_policy_split_normalized (view_path, comps, n, &n);
    }
  fb_policy_decide_root (policy, ret);
  for (guint k = 0; k < n; k++)
    {
      FbPolicyComps c = { .comps = comps, .n = k + 1 };

      fb_policy_step (policy, ret, comps[k].s, comps[k].len, &c, ret);
    }
}

void
fb_policy_decide_child (const FbPolicy *policy, const FbPolicyDecision *parent, const char *parent_path,
                        const char *name, FbPolicyDecision *ret)
{
  gsize len = strlen (name);
  FbPathComp buf[64];
  FbPolicyComps c = { .parent_path = parent_path, .name = name, .name_len = (guint32)len, .buf = buf, .buf_len = 64 };
  FbPolicyDecision out;

  if (G_UNLIKELY (policy->narrow != NULL))
    {
      fb_policy_narrowed_decide_child (policy, parent, parent_path, name, ret);
      return;
    }

  if (len == 0 || len > FB_POLICY_MAX_PATH || strchr (name, '/') != NULL || strcmp (name, ".") == 0 ||
      strcmp (name, "..") == 0 || parent_path == NULL || parent_path[0] != '/')
    {
      fb_policy_decide_malformed (policy, parent->mount, parent->priv_depth + 1, ret);
      return;
    }
  fb_policy_step (policy, parent, name, (guint32)len, &c, &out);
  g_free (c.heap);
  *ret = out;
}

/* One side of fb_policy_subtree_has_rules: NODE is the trie node of
 * VIEW_PATH in POLICY (NULL below the trie).  Every glob counts whose match
 * of a path below could take in a component of VIEW_PATH: all anchored
 * ones that can match below, and "**"-led ones whose parts after the "**"
 * have begun to match in VIEW_PATH ("**" + "/secrets/" + "**" at
 * ".../secrets", not at ".../proj"): a rename takes those components away
 * from, or brings them to, the paths below. */
bool
fb_policy_subtree_has_rules_at (const FbPolicy *policy, const PolicyNode *node, const char *view_path)
{
  GPtrArray *globs = policy->glob_index.all;
  FbPathComp stack[64];
  g_autofree FbPathComp *heap = NULL;
  FbPathComp *comps = stack;
  guint n;

  if (node != NULL && node->literal_below)
    return true;
  if (globs->len == 0 || !fb_policy_path_is_normalized (view_path))
    return false;
  n = fb_policy_path_split (view_path, stack, G_N_ELEMENTS (stack));
  if (n > G_N_ELEMENTS (stack))
    {
      comps = heap = g_new (FbPathComp, n);
      fb_policy_path_split (view_path, comps, n);
    }
  for (guint i = 0; i < globs->len; i++)
    {
      const FbGlobEntry *e = g_ptr_array_index (globs, i);

      if (e->glob->max_depth > n && fb_policy_glob_could_match_through (e->glob, comps, n))
        return true;
    }
  return false;
}

bool
fb_policy_subtree_has_rules (const FbPolicy *policy, const FbPolicyDecision *decision, const char *view_path)
{
  if (G_UNLIKELY (policy->narrow != NULL))
    return fb_policy_narrowed_subtree_has_rules (policy, decision, view_path);
  return fb_policy_subtree_has_rules_at (policy, decision->priv_node, view_path);
}

bool
fb_policy_is_protected_name (const FbPolicy *policy, const char *name, FbPolicyAccess *ret_access)
{
  gsize len = strlen (name);
  /* (a narrowed policy's map holds the union of both sides') */
  const FbPolicyRule *rule = fb_name_map_lookup (&policy->protected_map, name, len, fb_name_hash (name, len));

  if (rule == NULL)
    return false;
  if (ret_access != NULL)
    *ret_access = rule->access;
  return true;
}

/* ---- Folded names (policy-fold.c) ---------------------------------------- */

void
fb_policy_literal_children (const FbPolicy *policy, const FbPolicyDecision *d, GPtrArray *names)
{
  const PolicyNode *node = d->priv_node;

  if (G_UNLIKELY (policy->narrow != NULL))
    {
      fb_policy_narrowed_literal_children (policy, d, names);
      return;
    }
  for (guint i = 0; node != NULL && i < node->child_list->len; i++)
    g_ptr_array_add (names, (gpointer)((const PolicyNode *)g_ptr_array_index (node->child_list, i))->name);
}

void
fb_policy_restrict (const FbPolicy *policy, FbPolicyDecision *d, const FbPolicyRule *rule)
{
  const PolicyNode *node = d->priv_node;

  if (G_UNLIKELY (policy->narrow != NULL))
    {
      fb_policy_narrowed_restrict (policy, d, rule);
      return;
    }
  /* fb_policy_access_narrow returns its first argument on a tie */
  if (fb_policy_access_narrow (d->access, rule->access) == d->access)
    return;
  d->access = rule->access;
  d->rule = rule;
  d->traversable = node != NULL && node->visible_below && !fb_policy_access_info (rule->access)->readable;
  d->reachable_children = d->traversable ? node->reachable : fb_policy_no_names;
}

void
fb_policy_close_folded (const FbPolicy *policy, FbPolicyDecision *d)
{
  if (G_UNLIKELY (policy->narrow != NULL))
    {
      fb_policy_narrowed_close_folded (policy, d);
      return;
    }
  fb_policy_restrict (policy, d, &policy->fold_rule);
  d->traversable = false;
  d->reachable_children = fb_policy_no_names;
  d->mounted_children = fb_policy_no_names;
  d->priv_node = NULL;
}
