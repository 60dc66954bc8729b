/* fusebox — the view's nodes: the node table, a node's view path and its
 * decision.
 *
 *  - The table is keyed by (parent node, name): one node per view path.  A
 *    node in it is also linked below its parent (first_child,
 *    next_sibling: what a rename decides again) and in the index of host
 *    objects (dev, ino: what fanotify names); one that left it while still
 *    held is in view->detached, so that the kernel's counts and the
 *    watcher's rescans reach every live node.  A node's reference count
 *    only reaches zero under view->lock, so that a lookup holding the lock
 *    never revives a node being freed; the kernel's lookup count is apart
 *    (nlookup) and holds one reference while it is not zero.  Pinned
 *    nodes: fs-view.c.
 *  - Decisions.  Nodes share their decisions: most of a tree is decided
 *    by the same few rules at each depth, so a node points at the view's
 *    counted copy of its decision (an FbPolicyDecision is 72 bytes), freed
 *    with the last node that has it.  Copies are compared whole, padding
 *    cleared (__builtin_clear_padding), so that any field the policy adds
 *    counts; with a compiler that can't clear padding, equal decisions may
 *    not be found equal: fewer are shared, none is ever wrong.
 *  - Paths.  A node keeps its parent, its name and the decision of its
 *    view path, never the path itself: node_get_state() builds the path
 *    when an operation needs it, walking up the parents under the table
 *    lock into a buffer of FB_VIEW_PATH_MAX bytes (iterative; a path that
 *    does not fit makes a state that refuses everything, NodeState
 *    too_long).  So a node costs its name, whatever its depth, and a
 *    rename moves a tree by relinking one node and deciding the nodes
 *    below it again (restate_locked: iterative, one path buffer), with no
 *    string per node to rewrite.  A node that has left the table (its
 *    name now shows another object) is decided again from its parent
 *    whenever its state is built.
 *  - Moved directories.  A host directory node holds a descriptor that
 *    follows the directory wherever the host moves it, and the kernel may
 *    keep using the node (a working directory, an open descriptor) long
 *    after its name has gone.  Once the view knows that the node's name no
 *    longer shows that directory (a lookup found another object there, or
 *    the host or another view moved or removed it: view_node_recheck, from
 *    the host watcher's and the other views' changes, fs-fuse-inval.c), the
 *    node is marked moved and leaves the table: its state, and the state
 *    of every node below it, is the view's refusal VIEW_REFUSAL_MOVED,
 *    since where it went the policy may decide otherwise and the view does
 *    not know where that is.  A lookup of the new path makes new nodes.  A
 *    mount's root (its source, opened once at start, fs-view.c) has no
 *    host parent to check its name in (its name in its view parent shows
 *    something else, or nothing): its host path is checked instead
 *    (fs-view-source.c).  Files are not marked: one holds no descriptor
 *    while it is not open, and is opened again by its name (ESTALE when
 *    that shows another object); an open file keeps working, as an open
 *    descriptor does.  A directory whose parent the watcher could not mark
 *    (its budget, the kernel's max_user_marks, a filesystem that can't be
 *    marked) would have its move reported by nothing: node_get_state()
 *    checks it against its name whenever it is used.
 */
#include "fs/fs-private.h"

#include <malloc.h>
#include <string.h>

/* At most this many pinned nodes ("Pinned nodes" above). */
#define FB_VIEW_PINNED_MAX 1024

/* --- node states ----------------------------------------------------------- */

NodeState *
node_state_new (const char *path, const FbPolicyDecision *decision)
{
  gsize len = strlen (path);
  /* one block: the path follows the struct */
  NodeState *st = g_malloc0 (sizeof (NodeState) + len + 1);

  st->ref = 1;
  st->path = memcpy ((char *)(st + 1), path, len + 1);
  st->decision = *decision;
  return st;
}

FB_DEFINE_ATOMIC_REF (node_state, NodeState)

void
node_state_unref (NodeState *st)
{
  if (st != NULL && g_atomic_int_dec_and_test (&st->ref))
    g_free (st);
}

/* --- decisions (see "Decisions" above) ---------------------------------------- */

#if defined(__has_builtin)
#if __has_builtin(__builtin_clear_padding)
#define HAVE_CLEAR_PADDING 1
#endif
#endif

static guint
decision_hash (gconstpointer p)
{
  const guchar *b = p;
  guint32 h = 2166136261u;

  for (gsize i = 0; i < sizeof (FbPolicyDecision); i++)
    h = (h ^ b[i]) * 16777619u;
  return h;
}

static gboolean
decision_equal (gconstpointer a, gconstpointer b)
{
  return memcmp (a, b, sizeof (FbPolicyDecision)) == 0;
}

/* A decision the nodes that have it share: the key of view->decisions. */
typedef struct
{
  FbPolicyDecision d;
  guint refs; /* decisions_lock */
} SharedDecision;

#define SHARED_DECISION(p) ((SharedDecision *)(void *)((char *)(p)-G_STRUCT_OFFSET (SharedDecision, d)))

/* The view's copy of D, counted once more. */
static const FbPolicyDecision *
decision_share (FbView *view, const FbPolicyDecision *d)
{
  FbPolicyDecision key = *d;
  FbPolicyDecision *found;
  SharedDecision *sd;

#ifdef HAVE_CLEAR_PADDING
  __builtin_clear_padding (&key);
#endif
  g_mutex_lock (&view->decisions_lock);
  found = g_hash_table_lookup (view->decisions, &key);
  if (found != NULL)
    sd = SHARED_DECISION (found);
  else
    {
      sd = g_new (SharedDecision, 1);
      sd->d = key;
      sd->refs = 0;
      g_hash_table_add (view->decisions, &sd->d);
    }
  sd->refs++;
  g_mutex_unlock (&view->decisions_lock);
  return &sd->d;
}

static void
decision_unshare (FbView *view, const FbPolicyDecision *d)
{
  SharedDecision *sd = SHARED_DECISION (d);

  g_mutex_lock (&view->decisions_lock);
  if (--sd->refs == 0)
    {
      g_hash_table_remove (view->decisions, &sd->d);
      g_free (sd);
    }
  g_mutex_unlock (&view->decisions_lock);
}

/* NODE's decision is now D (view->lock held, or NODE not in the table). */
static void
node_set_decision (FbView *view, FbViewNode *node, const FbPolicyDecision *d)
{
  const FbPolicyDecision *old = node->decision;

  node->decision = decision_share (view, d);
  if (old != NULL)
    decision_unshare (view, old);
}

/* --- paths (see "Paths" above) ----------------------------------------------- */

static const char *const no_names[] = { NULL };

/* The decision of a path past FB_VIEW_PATH_MAX: the view's refusal. */
static void
decision_too_long (const FbPolicyDecision *was, FbPolicyDecision *ret)
{
  *ret = (FbPolicyDecision){
    .access = FB_POLICY_ACCESS_DENY,
    .rule = view_refusal_rule (VIEW_REFUSAL_TOO_LONG),
    .mount = was->mount,
    .mounted_children = no_names,
    .reachable_children = no_names,
    .priv_depth = was->priv_depth,
  };
}

/* The decision of a path through MOVED, a moved directory (or a mount
 * point whose source left its path): the view's refusal. */
static void
decision_moved (const FbPolicyDecision *was, const FbViewNode *moved, FbPolicyDecision *ret)
{
  decision_too_long (was, ret);
  ret->rule = view_refusal_rule (moved->decision->is_mount_point ? VIEW_REFUSAL_SOURCE_MOVED : VIEW_REFUSAL_MOVED);
}

static bool node_may_move (const FbViewNode *node);

/* The directories on a node's way whose moves the host watcher would not
 * report (their parent is not marked: past the watcher's budget, the
 * kernel's max_user_marks, a filesystem that can't be marked), referenced:
 * the first ones inline, the rest in MORE.  Collected by the walk up that
 * builds the node's path (path_build_locked), and only while the watcher
 * runs (without it, fixed timeouts: not checked at all). */
#define UNWATCHED_INLINE 16
typedef struct
{
  FbViewNode *inline_nodes[UNWATCHED_INLINE];
  guint n;
  GPtrArray *more;
} Unwatched;

static void
unwatched_add_locked (Unwatched *uw, FbViewNode *d)
{
  if (!node_may_move (d) || __atomic_load_n (&d->parent->watched, __ATOMIC_SEQ_CST) == 1)
    return;
  g_atomic_int_inc (&d->ref);
  if (uw->n < UNWATCHED_INLINE)
    uw->inline_nodes[uw->n++] = d;
  else
    {
      if (uw->more == NULL)
        uw->more = g_ptr_array_new ();
      g_ptr_array_add (uw->more, d);
    }
}

/* NODE's view path, built from its parents at the end of BUF (SIZE bytes):
 * returns where it starts, or NULL when it does not fit (*RET_TAIL then
 * points at the last components that did, each after a "/").
 * *RET_DETACHED: the highest node on the way that has left the table
 * (renames no longer keep its decision, nor those below it, current), or
 * NULL; *RET_MOVED: the highest moved directory on the way (NODE too), or
 * NULL; UW (when not NULL): the unwatched directories on the way.  At most
 * SIZE / 2 steps: each adds a "/" and a name. */
static char *
path_build_locked (FbViewNode *node, char *buf, gsize size, char **ret_tail, FbViewNode **ret_detached,
                   FbViewNode **ret_moved, Unwatched *uw)
{
  char *p = buf + size - 1;
  FbViewNode *n;

  *p = '\0';
  *ret_detached = NULL;
  *ret_moved = NULL;
  *ret_tail = p;
  for (n = node; n->parent != NULL; n = n->parent)
    {
      const char *name = node_name (n);
      gsize len = strlen (name);

      if (n->moved)
        *ret_moved = n;
      if (uw != NULL)
        unwatched_add_locked (uw, n);
      if ((gsize)(p - buf) < len + 1)
        return NULL;
      p -= len;
      memcpy (p, name, len);
      *--p = '/';
      *ret_tail = p;
      if (!n->in_table)
        *ret_detached = n;
    }
  if (n->moved) /* the root, whose own source left its path */
    *ret_moved = n;
  if (node->parent == NULL)
    return memcpy (p - 1, "/", 2);
  return p;
}

/* The decision of NODE at PATH (from path_build_locked, writable) when
 * TOP, on the way up from it, has left the table: decided again, one
 * level at a time, from the parent of TOP, whose decision is current. */
static void
decide_detached_locked (FbView *view, FbViewNode *node, FbViewNode *top, char *path, FbPolicyDecision *ret)
{
  g_autoptr (GPtrArray) chain = g_ptr_array_new ();
  FbPolicyDecision d = *top->parent->decision;
  gsize plen = strlen (path);

  for (FbViewNode *n = node;; n = n->parent)
    {
      g_ptr_array_add (chain, n);
      plen -= 1 + strlen (node_name (n));
      if (n == top)
        break;
    }
  for (guint i = chain->len; i-- > 0;)
    {
      FbViewNode *n = chain->pdata[i];
      NodeState pst = { .decision = d };
      char saved = path[plen];

      /* the parent's path is the first PLEN bytes ("/" for the root) */
      path[plen] = '\0';
      pst.path = plen == 0 ? (char *)"/" : path;
      view_decide_child (view, view_dir_fold_known (n->parent), &pst, node_name (n), &d);
      path[plen] = saved;
      plen += 1 + strlen (node_name (n));
    }
  *ret = d;
}

/* NODE's path (in BUF, FB_VIEW_PATH_MAX + 1 bytes) and decision; false
 * when the path is too long (*RET_PATH: "…" and the last components,
 * allocated; *RET_DECISION the refusal).  Below a moved directory (or at
 * one) the decision is that refusal, under the path the node had.  UW: as
 * path_build_locked's. */
static bool
state_locked (FbViewNode *node, char *buf, gsize size, char **ret_path, char **ret_tail_owned,
              FbPolicyDecision *ret_decision, Unwatched *uw)
{
  FbViewNode *detached, *moved;
  char *tail;
  char *path = path_build_locked (node, buf, size, &tail, &detached, &moved, uw);

  *ret_tail_owned = NULL;
  if (path == NULL)
    {
      decision_too_long (node->decision, ret_decision);
      *ret_tail_owned = g_strconcat ("\u2026", tail, NULL);
      *ret_path = *ret_tail_owned;
      return false;
    }
  if (moved != NULL)
    decision_moved (node->decision, moved, ret_decision);
  else if (detached != NULL)
    decide_detached_locked (node_view (node), node, detached, path, ret_decision);
  else
    *ret_decision = *node->decision;
  *ret_path = path;
  return true;
}

/* Check D against its name (it is dropped): true when it is marked now.
 * The name is then told to every listener as a host change (no origin, so
 * this view's FUSE session too): the kernel forgets its entry, which still
 * leads to D, and a directory made at that name since is found at once. */
static bool
unwatched_check (FbViewNode *d)
{
  g_autoptr (FbViewNode) parent = NULL;
  g_autofree char *name = NULL;
  bool marked = view_node_recheck (d, &parent, &name);

  fb_view_node_unref (d);
  if (marked && parent->kind == NODE_HOST)
    view_changed (NULL, NULL,
                  &(FbViewChange){
                    .what = FB_VIEW_CHANGE_NAME, .parent_dev = parent->dev, .parent_ino = parent->ino, .name = name });
  return marked;
}

NodeState *
node_get_state (FbViewNode *node)
{
  FbView *view = node_view (node);
  char buf[FB_VIEW_PATH_MAX + 1];
  g_autofree char *tail = NULL;
  Unwatched uw = { .n = 0, .more = NULL };
  FbPolicyDecision d;
  NodeState *st;
  char *path;
  bool fits;

  g_mutex_lock (&view->lock);
  fits = state_locked (node, buf, sizeof buf, &path, &tail, &d, fb_watch_active () ? &uw : NULL);
  g_mutex_unlock (&view->lock);
  if (uw.n > 0)
    {
      /* a directory whose move no event would report is checked against
       * its name now, before its decision is used (view_node_recheck) */
      bool marked = false;

      for (guint i = 0; i < uw.n; i++)
        marked = unwatched_check (uw.inline_nodes[i]) || marked;
      for (guint i = 0; uw.more != NULL && i < uw.more->len; i++)
        marked = unwatched_check (uw.more->pdata[i]) || marked;
      g_clear_pointer (&uw.more, g_ptr_array_unref);
      if (marked)
        {
          g_clear_pointer (&tail, g_free);
          g_mutex_lock (&view->lock);
          fits = state_locked (node, buf, sizeof buf, &path, &tail, &d, NULL);
          g_mutex_unlock (&view->lock);
        }
    }
  st = node_state_new (path, &d);
  st->too_long = !fits;
  return st;
}

/* --- the table -------------------------------------------------------------- */

/* The table's key: a parent and a name. */
typedef struct
{
  const FbViewNode *parent;
  const char *name;
} NodeKey;

static guint
key_hash (const FbViewNode *parent, const char *name)
{
  return g_direct_hash (parent) ^ g_str_hash (name);
}

static guint
node_key_hash (const FbViewNode *n)
{
  return key_hash (n->parent, node_name (n));
}

static bool
node_key_equal (const FbViewNode *x, const FbViewNode *y)
{
  return x->parent == y->parent && strcmp (node_name (x), node_name (y)) == 0;
}

static bool
node_key_match (const FbViewNode *n, gconstpointer key)
{
  const NodeKey *k = key;

  return n->parent == k->parent && strcmp (node_name (n), k->name) == 0;
}

static guint
ino_key_hash (const FbViewNode *n)
{
  return (guint)(n->ino ^ (n->ino >> 32) ^ (n->dev * 31));
}

static bool
ino_key_equal (const FbViewNode *x, const FbViewNode *y)
{
  return x->ino == y->ino && x->dev == y->dev;
}

void
view_table_init (FbView *view)
{
  node_slabs_init (&view->slabs);
  g_mutex_init (&view->lock);
  g_mutex_init (&view->decisions_lock);
  g_mutex_init (&view->cursor_lock);
  view->decisions = g_hash_table_new (decision_hash, decision_equal);
  view->node_max = view->options.node_max != 0 ? view->options.node_max : FB_VIEW_NODES_MAX;
  node_set_init (&view->table, &view->slabs, node_key_hash, node_key_equal);
  node_set_init (&view->by_ino, &view->slabs, ino_key_hash, ino_key_equal);
  view->ino_more = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_ptr_array_unref);
  view->pinned = g_ptr_array_new ();
  view->detached = g_hash_table_new (g_direct_hash, g_direct_equal);
}

void
view_table_clear (FbView *view)
{
  node_set_clear (&view->table);
  node_set_clear (&view->by_ino);
  g_hash_table_destroy (view->ino_more);
  g_hash_table_destroy (view->detached);
  g_hash_table_destroy (view->decisions);
  g_ptr_array_unref (view->pinned);
  g_mutex_clear (&view->lock);
  g_mutex_clear (&view->decisions_lock);
  view_dir_clear (view);
  node_slabs_clear (&view->slabs);
}

/* The index of host objects: by_ino holds the first node of each, and
 * ino_more, for the few objects with more (hard links reached by two
 * names, a name replaced while its old node is held), the others in an
 * array, so that no node carries links of its own for them. */

/* The first node of NODE's host object, or NULL (always for a node that
 * is not a host object: only those are indexed); in RET_MORE the array
 * of its others, or NULL. */
static FbViewNode *
ino_index_find_locked (FbView *view, const FbViewNode *node, GPtrArray **ret_more)
{
  FbViewNode *head = node->kind == NODE_HOST ? node_set_find (&view->by_ino, node) : NULL;

  *ret_more = head != NULL ? g_hash_table_lookup (view->ino_more, head) : NULL;
  return head;
}

static void
ino_index_add_locked (FbView *view, FbViewNode *node)
{
  FbViewNode *head;
  GPtrArray *more;

  if (node->kind != NODE_HOST)
    return;
  head = ino_index_find_locked (view, node, &more);
  if (head == NULL)
    {
      node_set_add (&view->by_ino, node);
      return;
    }
  if (more == NULL)
    {
      more = g_ptr_array_new ();
      g_hash_table_insert (view->ino_more, head, more);
    }
  g_ptr_array_add (more, node);
}

static void
ino_index_remove_locked (FbView *view, FbViewNode *node)
{
  GPtrArray *more;
  FbViewNode *head = ino_index_find_locked (view, node, &more);

  if (head != node) /* not indexed, or one of the others */
    {
      if (more != NULL)
        g_ptr_array_remove_fast (more, node);
      if (more != NULL && more->len == 0)
        g_hash_table_remove (view->ino_more, head);
      return;
    }
  if (more == NULL)
    {
      node_set_remove (&view->by_ino, node);
      return;
    }
  /* the last of the others is the first now */
  g_hash_table_steal (view->ino_more, node);
  head = g_ptr_array_steal_index_fast (more, more->len - 1);
  node_set_add (&view->by_ino, head); /* replaces NODE: the same key */
  if (more->len > 0)
    g_hash_table_insert (view->ino_more, head, more);
  else
    g_ptr_array_unref (more);
}

/* --- nodes ------------------------------------------------------------------ */

/* Nodes before malloc is trimmed again: memory freed by nodes the kernel
 * forgot goes back to the system once their count halves, from at least
 * this many (malloc keeps freed memory for reuse otherwise, and a walk's
 * nodes are freed in the middle of the heap, from every worker's arena) */
#define VIEW_TRIM_MIN 16384

/* One node more (DELTA 1) or less (-1). */
static void
view_count_node (FbView *view, gint delta)
{
  gint n = g_atomic_int_add ((gint *)&view->n_nodes, delta) + delta;
  gint mark = g_atomic_int_get (&view->trim_mark);

  if (delta > 0)
    {
      while (n > mark && !g_atomic_int_compare_and_exchange (&view->trim_mark, mark, n))
        mark = g_atomic_int_get (&view->trim_mark);
    }
  else if (mark >= VIEW_TRIM_MIN && n <= mark / 2 && g_atomic_int_compare_and_exchange (&view->trim_mark, mark, n))
    malloc_trim (0);
}

/* NODE's name is now a copy of NAME, apart from its block (view->lock
 * held, or NODE not shared yet); the string it had apart is freed. */
static void
name_set_apart (FbViewNode *node, const char *name)
{
  char *copy = g_strdup (name);

  if (node->name_apart)
    g_free ((char *)node_name (node));
  memcpy (node->name_buf, &copy, sizeof copy);
  node->name_apart = true;
}

/* The first node linked below N, or NULL (only directories have children). */
static FbViewNode *
first_child (FbViewNode *n)
{
  return S_ISDIR (n->type) ? node_dir (n)->first_child : NULL;
}

FbViewNode *
node_new (FbView *view, NodeKind kind, int fd, const struct stat *st, const FbPolicyDecision *decision,
          const char *name)
{
  gsize len = strlen (name);
  mode_t type = kind == NODE_HOST ? st->st_mode & S_IFMT : S_IFDIR;
  gsize dir = S_ISDIR (type) ? sizeof (NodeDir) : 0;
  bool apart = len > NODE_NAME_IN_BLOCK_MAX;
  /* one block: a directory's part, the node, the name (or its pointer) */
  char *block = node_slabs_alloc (&view->slabs, dir + G_STRUCT_OFFSET (FbViewNode, name_buf) +
                                                  MAX (apart ? 0 : len + 1, sizeof (char *)));
  FbViewNode *node = (FbViewNode *)(void *)(block + dir);

  node->ref = 1;
  fb_view_ref (view); /* each node holds one, dropped by node_free */
  node->type = type;
  if (apart)
    name_set_apart (node, name);
  else
    memcpy (node->name_buf, name, len + 1);
  node->kind = kind;
  node->host_fd = fd;
  node->generation = __atomic_add_fetch (&view->generation, 1, __ATOMIC_RELAXED);
  if (kind == NODE_HOST)
    {
      node->ino = st->st_ino;
      node->dev = st->st_dev;
    }
  else
    {
      /* Synthetic directories need inode numbers that no host file has in
       * practice: the top byte is set. */
      node->ino = (ino_t)(0xfb00000000000000ULL | node->generation);
    }
  node_set_decision (view, node, decision); /* the path is built when needed */
  view_count_node (view, 1);
  return node;
}

NodeExtra *
node_extra_peek (FbViewNode *node)
{
  return g_atomic_pointer_get (&node->extra);
}

NodeExtra *
node_extra (FbViewNode *node)
{
  NodeExtra *x = g_atomic_pointer_get (&node->extra);

  if (x != NULL)
    return x;
  x = g_new0 (NodeExtra, 1);
  g_mutex_init (&x->lock);
  if (!g_atomic_pointer_compare_and_exchange (&node->extra, NULL, x))
    {
      /* another thread made one first */
      g_mutex_clear (&x->lock);
      g_free (x);
      x = g_atomic_pointer_get (&node->extra);
    }
  return x;
}

NodeExtraDir *
node_extra_dir (NodeExtra *x)
{
  if (x->dir == NULL)
    x->dir = g_new0 (NodeExtraDir, 1);
  return x->dir;
}

/* Remove the mark of NODE, a watched directory being freed, through FD (its
 * descriptor, -1 when the cache closed it: then opened again from PARENT,
 * still referenced, by its name; a directory gone or replaced keeps its
 * mark until the host removes it or the watcher stops). */
static void
node_unwatch (FbViewNode *node, FbViewNode *parent, int fd)
{
  _fb_cleanup_fd_ int tmp = -1;

  if (fd < 0 && parent != NULL && node_is_host_dir (parent))
    {
      _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
      int pfd = node_fd_get (parent, &hold);
      tmp = pfd >= 0 ? host_open_child (pfd, node_name (node)) : -1;
      if (tmp >= 0 && node_check_fd (node, tmp) < 0)
        fb_fd_close (&tmp);
      fd = tmp;
    }
  watch_dir_remove (node->dev, node->ino, fd);
}

/* A node that never entered the table (PARENT NULL), or left it with its
 * last reference (PARENT: its parent, still referenced). */
static void
node_free (FbViewNode *node, FbViewNode *parent)
{
  FbView *view = node_view (node);
  int fd = node_fd_forget (node);

  if (S_ISDIR (node->type) && __atomic_load_n (&node->watched, __ATOMIC_SEQ_CST) == 1)
    node_unwatch (node, parent, fd);
  if (S_ISDIR (node->type))
    view_dir_forget (view, node);
  if (fd >= 0)
    close (fd);
  if (node->extra != NULL)
    {
      NodeExtraDir *xd = node->extra->dir;

      if (xd != NULL && xd->listing != NULL)
        g_array_unref (xd->listing);
      if (xd != NULL && xd->spellings != NULL)
        {
          g_atomic_int_add (&view->spellings_kept, -(gint)g_hash_table_size (xd->spellings));
          g_hash_table_destroy (xd->spellings);
        }
      g_free (xd);
      g_mutex_clear (&node->extra->lock);
      g_free (node->extra);
    }
  if (node->decision != NULL)
    decision_unshare (view, node->decision);
  if (node->name_apart)
    g_free ((char *)node_name (node));
  view_count_node (view, -1);
  node_slabs_free (S_ISDIR (node->type) ? (void *)node_dir (node) : node);
  fb_view_unref (view);
}

static void
child_link_locked (FbViewNode *parent, FbViewNode *node)
{
  NodeDir *d;

  node->prev_sibling = node->next_sibling = NULL;
  if (parent == NULL || !S_ISDIR (parent->type))
    return;
  d = node_dir (parent);
  node->next_sibling = d->first_child;
  if (d->first_child != NULL)
    d->first_child->prev_sibling = node;
  d->first_child = node;
}

static void
child_unlink_locked (FbViewNode *node)
{
  if (node->parent == NULL)
    return;
  if (node->prev_sibling != NULL)
    node->prev_sibling->next_sibling = node->next_sibling;
  else if (first_child (node->parent) == node)
    node_dir (node->parent)->first_child = node->next_sibling;
  if (node->next_sibling != NULL)
    node->next_sibling->prev_sibling = node->prev_sibling;
  node->prev_sibling = node->next_sibling = NULL;
}

static void
table_remove_locked (FbView *view, FbViewNode *node)
{
  node_set_remove (&view->table, node);
  child_unlink_locked (node);
  node->in_table = false;
}

/* Take NODE out of the table: later lookups of its name make a new node.
 * Its parent link stays (for ".." in walks); it is among the detached
 * nodes until it is freed.  MOVED: its name shows another object, or
 * nothing, and a directory may be alive elsewhere ("Moved directories");
 * not for one this view removed, which is dead (it can hold nothing new,
 * and an open file of its old entries keeps working). */
static void
detach_locked (FbView *view, FbViewNode *node, bool moved)
{
  if (!node->in_table)
    return;
  table_remove_locked (view, node);
  g_hash_table_add (view->detached, node);
  if (moved && node->kind == NODE_HOST && S_ISDIR (node->type))
    node->moved = true;
}

FbViewNode *
table_find_locked (FbView *view, FbViewNode *parent, const char *name)
{
  NodeKey key = { parent, name };

  return node_set_find_by (&view->table, key_hash (parent, name), node_key_match, &key);
}

FB_DEFINE_ATOMIC_REF (fb_view_node, FbViewNode)

void
fb_view_node_unref (FbViewNode *node)
{
  while (node != NULL)
    {
      FbView *view = node_view (node);
      FbViewNode *parent;
      int old;

      /* Fast path: not the last reference.  The count only reaches zero
       * under the table lock, so that a lookup holding the lock never
       * revives a node that is being freed. */
      for (;;)
        {
          old = g_atomic_int_get (&node->ref);
          if (old <= 1)
            break;
          if (g_atomic_int_compare_and_exchange (&node->ref, old, old - 1))
            return;
        }
      g_mutex_lock (&view->lock);
      if (!g_atomic_int_dec_and_test (&node->ref))
        {
          g_mutex_unlock (&view->lock);
          return;
        }
      if (node->in_table)
        table_remove_locked (view, node);
      else if (node->in_all)
        g_hash_table_remove (view->detached, node);
      if (node->in_all)
        {
          node->in_all = false;
          ino_index_remove_locked (view, node);
        }
      parent = node->parent;
      node->parent = NULL;
      g_mutex_unlock (&view->lock);
      node_free (node, parent);
      node = parent; /* drop the child's reference on its parent, iteratively */
    }
}

static bool
same_object (const FbViewNode *a, const FbViewNode *b)
{
  if (a->kind != b->kind)
    return false;
  if (a->kind != NODE_HOST)
    return true;
  return a->ino == b->ino && a->dev == b->dev && a->type == b->type;
}

/* Watch NODE's host changes (fs-watch.c "Coverage"): a directory gets a
 * mark; a non-directory is covered by its parent's on the same device. */
static void
node_watch (FbViewNode *node, FbViewNode *parent)
{
  if (S_ISDIR (node->type))
    {
      _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
      int fd = node_fd_get (node, &hold);
      /* claimed first (-1): table_insert and fb_watch_view may race */
      gint8 unwatched = 0;
      if (fd >= 0 &&
          __atomic_compare_exchange_n (&node->watched, &unwatched, -1, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        __atomic_store_n (&node->watched, watch_dir_add (node->dev, node->ino, fd) ? 1 : 0, __ATOMIC_SEQ_CST);
    }
  else if (parent != NULL && parent->kind == NODE_HOST && parent->dev == node->dev &&
           __atomic_load_n (&parent->watched, __ATOMIC_SEQ_CST) == 1 && watch_children_decode (node->dev))
    __atomic_store_n (&node->watched, 1, __ATOMIC_SEQ_CST);
}

bool
fb_view_node_watched (FbViewNode *node, const struct stat *st)
{
  if (node->kind != NODE_HOST)
    return true;
  /* another link may be written through an unmarked directory */
  return fb_watch_active () && __atomic_load_n (&node->watched, __ATOMIC_SEQ_CST) == 1 &&
         (S_ISDIR (st->st_mode) || st->st_nlink <= 1);
}

/* Put FRESH (one reference, not in the table) at (PARENT, its name), or
 * return the node already there when it shows the same host object (FRESH
 * is then freed).  Returns a new reference either way. */
FbViewNode *
table_insert (FbView *view, FbViewNode *parent, FbViewNode *fresh)
{
  FbViewNode *existing;

  g_mutex_lock (&view->lock);
  existing = table_find_locked (view, parent, node_name (fresh));
  if (existing != NULL && same_object (existing, fresh))
    {
      g_atomic_int_inc (&existing->ref);
      g_mutex_unlock (&view->lock);
      node_free (fresh, NULL);
      return existing;
    }
  if (existing != NULL)
    detach_locked (view, existing, true);
  fresh->parent = parent != NULL ? fb_view_node_ref (parent) : NULL;
  node_set_add (&view->table, fresh);
  child_link_locked (parent, fresh);
  fresh->in_table = true;
  fresh->in_all = true;
  ino_index_add_locked (view, fresh);
  g_mutex_unlock (&view->lock);
  if (fresh->kind == NODE_HOST && fb_watch_active ())
    node_watch (fresh, parent);
  return fresh;
}

void
view_detach_name (FbView *view, FbViewNode *parent, const char *name)
{
  FbViewNode *node;

  g_mutex_lock (&view->lock);
  node = table_find_locked (view, parent, name);
  if (node != NULL)
    detach_locked (view, node, false);
  g_mutex_unlock (&view->lock);
}

/* --- moved directories (see "Moved directories" above) ----------------------- */

/* A mount point's directory is its source's, not its parent's entry of
 * that name (which may hold anything, or nothing): a source that left its
 * host path is fs-view-source.c's. */
static bool
node_may_move (const FbViewNode *node)
{
  return node->kind == NODE_HOST && S_ISDIR (node->type) && node->in_table && !node->moved && node->parent != NULL &&
         node->parent->kind == NODE_HOST && !node->decision->is_mount_point;
}

FbViewNode *
view_child_dir_ref_locked (FbView *view, FbViewNode *parent, const char *name)
{
  FbViewNode *child = table_find_locked (view, parent, name);

  if (child == NULL || !node_may_move (child))
    return NULL;
  g_atomic_int_inc (&child->ref); /* found under the lock: not being freed */
  return child;
}

bool
view_node_recheck (FbViewNode *node, FbViewNode **ret_parent, char **ret_name)
{
  FbView *view = node_view (node);
  g_autoptr (FbViewNode) parent = NULL;
  g_autofree char *name = NULL;
  struct stat st;
  bool there, marked = false;

  *ret_parent = NULL;
  *ret_name = NULL;
  /* A rename through this view moves the host's name first and its nodes
   * after: in between, the name would seem to have lost its directory.
   * moves_lock covers just that (not rename_lock, which a rename holds
   * while it measures a tree: renames back to back kept a check away from
   * it for tens of seconds). */
  g_mutex_lock (&view->moves_lock);
  g_mutex_lock (&view->lock);
  if (node_may_move (node))
    {
      parent = fb_view_node_ref (node->parent);
      name = g_strdup (node_name (node));
    }
  g_mutex_unlock (&view->lock);
  if (parent == NULL)
    {
      g_mutex_unlock (&view->moves_lock);
      return false;
    }
  {
    _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
    int pfd = node_fd_get (parent, &hold);

    /* any failure counts as gone: the name no longer shows it for sure */
    there = pfd >= 0 && fb_lstat_cached (pfd, name, &st) == 0 && S_ISDIR (st.st_mode) && st.st_ino == node->ino &&
            (guint32)st.st_dev == node->dev;
  }
  if (!there)
    {
      g_mutex_lock (&view->lock);
      if (node->in_table && node->parent == parent && strcmp (node_name (node), name) == 0)
        {
          detach_locked (view, node, true);
          marked = true;
        }
      g_mutex_unlock (&view->lock);
    }
  g_mutex_unlock (&view->moves_lock);
  if (!marked)
    return false;
  *ret_parent = g_steal_pointer (&parent);
  *ret_name = g_steal_pointer (&name);
  return true;
}

/* Keep NODE (just returned by table_insert, in the table) for the view's
 * life: see "Pinned nodes" above.  Only for nodes that can't go stale. */
void
node_pin (FbView *view, FbViewNode *node)
{
  g_mutex_lock (&view->lock);
  /* Bounded: a host directory on the way to a mount point replaced on the
   * host (never through the view: those names are structural) leaves its
   * old nodes pinned; past the bound nodes are made per walk, as before. */
  if (!node->pinned && node->in_table && view->pinned->len < FB_VIEW_PINNED_MAX)
    {
      node->pinned = true;
      g_atomic_int_inc (&node->ref);
      g_ptr_array_add (view->pinned, node);
      g_atomic_int_inc (&view->n_pinned);
    }
  g_mutex_unlock (&view->lock);
}

/* The pinned node at (PARENT, NAME), a new reference, or NULL.  Pinned host
 * directories on the way to mount points are not returned unless
 * MOUNT_POINT: the host can replace them, reuse_known_node() checks them. */
FbViewNode *
pinned_find (FbView *view, FbViewNode *parent, const char *name, bool mount_point)
{
  FbViewNode *node;

  g_mutex_lock (&view->lock);
  node = table_find_locked (view, parent, name);
  if (node != NULL && node->pinned && (mount_point || node->kind != NODE_HOST))
    g_atomic_int_inc (&node->ref);
  else
    node = NULL;
  g_mutex_unlock (&view->lock);
  return node;
}

/* --- the live nodes -------------------------------------------------------- */

/* The live nodes that entered the table: those in it, then those that left
 * it (view->lock held throughout). */
typedef struct
{
  FbView *view;
  guint pos; /* in view->table */
  GHashTableIter detached;
  bool in_detached;
} NodeIter;

static void
node_iter_init_locked (NodeIter *it, FbView *view)
{
  it->view = view;
  it->pos = 0;
  it->in_detached = false;
}

static FbViewNode *
node_iter_next_locked (NodeIter *it)
{
  FbViewNode *n;
  gpointer key;

  if (!it->in_detached)
    {
      n = node_set_next (&it->view->table, &it->pos);
      if (n != NULL)
        return n;
      it->in_detached = true;
      g_hash_table_iter_init (&it->detached, it->view->detached);
    }
  return g_hash_table_iter_next (&it->detached, &key, NULL) ? key : NULL;
}

/* For sorting the oldest node first: made the most generations before NOW
 * (the view's, in the 32 bits a node keeps). */
static gint
node_older (gconstpointer a, gconstpointer b, gpointer now)
{
  guint32 n = *(const guint32 *)now;
  guint32 age_a = n - (*(FbViewNode *const *)a)->generation;
  guint32 age_b = n - (*(FbViewNode *const *)b)->generation;

  return age_a > age_b ? -1 : age_a < age_b;
}

/* --- the kernel's counts ---------------------------------------------------- */

guint64
fb_view_node_get_generation (FbViewNode *node)
{
  return node->generation;
}

guint64
fb_view_node_get_kernel_count (FbViewNode *node)
{
  return __atomic_load_n (&node->nlookup, __ATOMIC_ACQUIRE);
}

void
fb_view_node_kernel_ref (FbViewNode *node)
{
  if (__atomic_fetch_add (&node->nlookup, 1, __ATOMIC_ACQ_REL) == 0)
    fb_view_node_ref (node);
}

void
fb_view_node_kernel_forget (FbViewNode *node, guint64 nlookup)
{
  guint64 old = __atomic_load_n (&node->nlookup, __ATOMIC_ACQUIRE);
  guint64 next;

  /* A forget larger than the count (a kernel bug or a forged request from a
   * compromised connection) clamps at zero instead of wrapping. */
  do
    {
      if (old == 0)
        return;
      next = nlookup >= old ? 0 : old - nlookup;
    }
  while (!__atomic_compare_exchange_n (&node->nlookup, &old, next, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
  if (next == 0)
    fb_view_node_unref (node);
}

void
fb_view_drop_kernel_refs (FbView *view)
{
  g_autoptr (GPtrArray) held = g_ptr_array_new ();

  NodeIter it;
  FbViewNode *n;

  g_mutex_lock (&view->lock);
  node_iter_init_locked (&it, view);
  while ((n = node_iter_next_locked (&it)) != NULL)
    if (__atomic_load_n (&n->nlookup, __ATOMIC_ACQUIRE) > 0)
      {
        g_atomic_int_inc (&n->ref);
        g_ptr_array_add (held, n);
      }
  g_mutex_unlock (&view->lock);
  for (guint i = 0; i < held->len; i++)
    {
      n = held->pdata[i];
      if (__atomic_exchange_n (&n->nlookup, 0, __ATOMIC_ACQ_REL) > 0)
        fb_view_node_unref (n);
      fb_view_node_unref (n);
    }
}

/* --- every node ------------------------------------------------------------- */

void
fb_view_find_object (FbView *view, dev_t dev, ino_t ino, FbViewNodeFunc func, gpointer user_data)
{
  FbViewNode key = { 0 };
  FbViewNode *head;
  GPtrArray *more;

  key.kind = NODE_HOST;
  key.dev = dev;
  key.ino = ino;
  g_mutex_lock (&view->lock);
  head = ino_index_find_locked (view, &key, &more);
  if (head != NULL)
    {
      func (head, user_data);
      for (guint i = 0; more != NULL && i < more->len; i++)
        func (more->pdata[i], user_data);
    }
  g_mutex_unlock (&view->lock);
}

static bool
is_mount_point_of (const FbViewNode *node, guint mount)
{
  return node->kind == NODE_HOST && node->decision->is_mount_point && node->decision->mount->id == mount;
}

void
view_mount_mark_moved (FbView *view, guint mount, GPtrArray *ret_nodes)
{
  NodeIter it;
  FbViewNode *n;

  g_mutex_lock (&view->lock);
  node_iter_init_locked (&it, view);
  while ((n = node_iter_next_locked (&it)) != NULL)
    if (is_mount_point_of (n, mount) && !n->moved)
      {
        n->moved = true;
        if (ret_nodes != NULL)
          {
            g_atomic_int_inc (&n->ref);
            g_ptr_array_add (ret_nodes, n);
          }
      }
  g_mutex_unlock (&view->lock);
}

void
view_mount_node_new (FbView *view, FbViewNode *node)
{
  /* the check marks the source first, then the nodes in the table, under
   * the lock: NODE is in the table now, so one of the two sees the other */
  g_mutex_lock (&view->lock);
  if (node->decision->is_mount_point && view_source_moved (view, node->decision->mount->id))
    node->moved = true;
  g_mutex_unlock (&view->lock);
}

void
view_host_dirs_ref (FbView *view, bool mount_roots, GPtrArray *ret_nodes)
{
  NodeIter it;
  FbViewNode *n;

  g_mutex_lock (&view->lock);
  node_iter_init_locked (&it, view);
  while ((n = node_iter_next_locked (&it)) != NULL)
    if (node_may_move (n) && (!mount_roots || n->mount_root))
      {
        g_atomic_int_inc (&n->ref);
        g_ptr_array_add (ret_nodes, n);
      }
  g_mutex_unlock (&view->lock);
}

void
fb_view_foreach_known (FbView *view, FbViewKnownFunc func, gpointer user_data)
{
  NodeIter it;
  FbViewNode *n;

  g_mutex_lock (&view->lock);
  node_iter_init_locked (&it, view);
  while ((n = node_iter_next_locked (&it)) != NULL)
    if (n->parent == NULL || __atomic_load_n (&n->nlookup, __ATOMIC_ACQUIRE) > 0)
      func (n, n->parent, node_name (n), user_data);
  g_mutex_unlock (&view->lock);
}

void
fb_watch_view (FbView *view)
{
  g_autoptr (GPtrArray) dirs = g_ptr_array_new ();
  NodeIter it;
  FbViewNode *n;

  if (!fb_watch_active ())
    return;
  /* the directories are referenced under the lock, marked outside it;
   * their children made before stay unwatched (short timeouts) */
  g_mutex_lock (&view->lock);
  node_iter_init_locked (&it, view);
  while (dirs->len < 256 && (n = node_iter_next_locked (&it)) != NULL)
    if (node_is_host_dir (n) && __atomic_load_n (&n->watched, __ATOMIC_SEQ_CST) == 0)
      g_ptr_array_add (dirs, fb_view_node_ref (n));
  g_mutex_unlock (&view->lock);
  for (guint i = 0; i < dirs->len; i++)
    {
      n = g_ptr_array_index (dirs, i);
      node_watch (n, NULL);
      fb_view_node_unref (n);
    }
}

void
fb_view_foreach_evictable (FbView *view, guint max, FbViewKnownFunc func, gpointer user_data)
{
  g_autoptr (GPtrArray) found = g_ptr_array_new ();
  guint pos = 0;
  FbViewNode *n;
  guint32 now;

  g_mutex_lock (&view->lock);
  while ((n = node_set_next (&view->table, &pos)) != NULL)
    {
      if (n->kind == NODE_HOST && n->parent != NULL && !n->pinned && first_child (n) == NULL &&
          !n->decision->is_mount_point && __atomic_load_n (&n->nlookup, __ATOMIC_ACQUIRE) > 0)
        g_ptr_array_add (found, n);
    }
  /* the oldest first */
  now = (guint32)__atomic_load_n (&view->generation, __ATOMIC_RELAXED);
  if (found->len > max)
    g_ptr_array_sort_with_data (found, node_older, &now);
  for (guint i = 0; i < found->len && i < max; i++)
    {
      n = found->pdata[i];
      func (n, n->parent, node_name (n), user_data);
    }
  g_mutex_unlock (&view->lock);
}

/* --- node getters ----------------------------------------------------------- */

mode_t
fb_view_node_get_type (FbViewNode *node)
{
  return node->type;
}

bool
fb_view_node_is_synthetic (FbViewNode *node)
{
  return node->kind != NODE_HOST;
}

char *
fb_view_node_dup_path (FbViewNode *node)
{
  g_autoptr (NodeState) st = node_get_state (node);

  return g_strdup (st->path);
}

void
fb_view_node_get_decision (FbViewNode *node, FbPolicyDecision *ret_decision)
{
  g_autoptr (NodeState) st = node_get_state (node);

  *ret_decision = st->decision;
}

/* --- rename bookkeeping ----------------------------------------------------- */

/* TOP was just placed at its new name: decide it and every node below it
 * in the table again, for their new view paths.  Iterative, whatever the
 * depth (down by first_child, across by next_sibling, up by parent), with
 * one path buffer; a node whose path would pass FB_VIEW_PATH_MAX keeps its
 * old decision and nothing below it is visited (node_get_state refuses it
 * by its path; a rename that brings it back decides it again).  The table
 * lock is held: no statfs of a directory never asked (which then counts as
 * one that may fold). */
static void
restate_locked (FbView *view, FbViewNode *top)
{
  char up[FB_VIEW_PATH_MAX + 1];
  char path[FB_VIEW_PATH_MAX + 1];
  g_autofree char *tail = NULL;
  FbPolicyDecision top_parent;
  FbViewNode *n = top;
  char *ppath;
  gsize plen; /* bytes of the path of N's parent in PATH ("" for the root) */

  if (!state_locked (top->parent, up, sizeof up, &ppath, &tail, &top_parent, NULL))
    return;
  plen = strcmp (ppath, "/") == 0 ? 0 : strlen (ppath);
  memcpy (path, ppath, plen);
  for (;;)
    {
      const char *name = node_name (n);
      gsize nlen = strlen (name);

      if (plen + 1 + nlen <= FB_VIEW_PATH_MAX)
        {
          NodeState pst = { .decision = n == top ? top_parent : *n->parent->decision };
          FbPolicyDecision d;

          path[plen] = '\0';
          pst.path = plen == 0 ? (char *)"/" : path;
          view_decide_child (view, view_dir_fold_known (n->parent), &pst, name, &d);
          node_set_decision (view, n, &d);
          if (first_child (n) != NULL)
            {
              path[plen] = '/';
              memcpy (path + plen + 1, name, nlen);
              plen += 1 + nlen;
              n = first_child (n);
              continue;
            }
        }
      while (n != top && n->next_sibling == NULL)
        {
          n = n->parent;
          plen -= 1 + strlen (node_name (n));
        }
      if (n == top)
        break;
      n = n->next_sibling;
    }
}

static void
place_locked (FbView *view, FbViewNode *node, FbViewNode *parent, const char *name, GPtrArray *unref_later)
{
  child_unlink_locked (node);
  if (node->parent != NULL)
    g_ptr_array_add (unref_later, node->parent);
  node->parent = fb_view_node_ref (parent);
  name_set_apart (node, name);
  node_set_add (&view->table, node);
  child_link_locked (parent, node);
  node->in_table = true;
  restate_locked (view, node);
}

/* After the host renamed PARENT/NAME to NEWPARENT/NEWNAME: the nodes the
 * kernel keeps for the moved object (and below it) now stand for their new
 * view paths, with the decisions of those paths. */
void
view_rehome_after_rename (FbView *view, FbViewNode *parent, const char *name, FbViewNode *newparent,
                          const char *newname, bool exchange)
{
  g_autoptr (GPtrArray) unref_later = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);
  FbViewNode *a, *b;

  g_mutex_lock (&view->lock);
  a = table_find_locked (view, parent, name);
  b = table_find_locked (view, newparent, newname);
  if (a != NULL)
    node_set_remove (&view->table, a);
  if (b != NULL)
    node_set_remove (&view->table, b);
  if (exchange)
    {
      if (a != NULL)
        place_locked (view, a, newparent, newname, unref_later);
      if (b != NULL)
        place_locked (view, b, parent, name, unref_later);
    }
  else
    {
      if (b != NULL)
        {
          child_unlink_locked (b);
          b->in_table = false;
          g_hash_table_add (view->detached, b); /* a file, or an empty directory: gone */
        }
      if (a != NULL)
        place_locked (view, a, newparent, newname, unref_later);
    }
  g_mutex_unlock (&view->lock);
  /* unref_later drops the old parents' references outside the lock */
}
