/* fusebox — the shape of the view: traversable ancestors and their
 * reachable children, synthetic directories on the way to mount points,
 * private sources in the run directory, /proc /sys /dev as empty
 * directories, directory listings (hidden names left out, resumable at any
 * offset, with or without attributes, with offsets of the view's own),
 * walks through ".." and symlinks inside the view, the host replacing an
 * object under a known name, and the kernel's lookup counts. */
#include "fs/fs-private.h"
#include "tests/unit/test-fs-util.h"

#include <dirent.h>

static const char policy_text[] =
  "{ \"version\": 1,\n"
  "  \"protected_names\": { \".git\": \"hide\" },\n"
  "  \"rules\": [\n"
  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
  "  { \"path\": \"@H@/mixed\", \"access\": \"hide\", \"why\": \"mixed hidden\" },\n"
  "  { \"path\": \"@H@/mixed/pub\", \"access\": \"read\", \"why\": \"mixed pub\" },\n"
  "  { \"path\": \"@H@/dmix\", \"access\": \"deny\", \"why\": \"dmix denied\" },\n"
  "  { \"path\": \"@H@/dmix/open\", \"access\": \"read\", \"why\": \"dmix open\" },\n"
  "  { \"path\": \"@H@/priv\", \"access\": \"write\", \"source\": \"private\", \"why\": \"private\" },\n"
  "  { \"path\": \"@H@/priv/a/b/ws\", \"access\": \"write\", \"source\": \"@T@/elsewhere\", \"why\": \"ws elsewhere\" "
  "},\n"
  "  { \"path\": \"@H@/big\", \"access\": \"write\", \"why\": \"big\" },\n"
  "  { \"path\": \"@H@/denied-dir\", \"access\": \"deny\", \"why\": \"denied dir\" },\n"
  "  { \"glob\": \"@H@/big/hidden-*\", \"access\": \"hide\", \"why\": \"hidden entries\" },\n"
  "  { \"glob\": \"@H@/offs/*/secret\", \"access\": \"hide\", \"why\": \"a hidden stand-in\" } ] }\n";

static const TestHostFile host_tree[] = {
  { "host/mixed/pub/p.txt", "public\n" },
  { "host/mixed/other.txt", "other\n" },
  { "host/dmix/open/o.txt", "open\n" },
  { "host/dmix/closed.txt", "closed\n" },
  { "host/priv/on-host-only", "the host's, never shown\n" },
  { "elsewhere/w.txt", "elsewhere\n" },
  { "host/big", NULL },
  { NULL },
};

static char *
policy (void)
{
  return g_strdup (policy_text);
}

/* What a listing hands out; each but LIMIT is optional (NULL). */
typedef struct
{
  GPtrArray *names;
  guint limit; /* accept this many per call */
  guint taken;
  off_t last;
  GPtrArray *nodes; /* plus mode: refs taken */
  GString *pairs;   /* "name@offset" lines */
} Collect;

static bool
collect (const FbViewDirEntry *e, gpointer data)
{
  Collect *c = data;

  if (c->limit > 0 && c->taken >= c->limit)
    return false;
  c->taken++;
  if (c->pairs != NULL)
    g_string_append_printf (c->pairs, "%s@%lld\n", e->name, (long long)e->next_offset);
  if (c->names != NULL)
    g_ptr_array_add (c->names, g_strdup (e->name));
  c->last = e->next_offset;
  if (e->node != NULL && c->nodes != NULL)
    g_ptr_array_add (c->nodes, fb_view_node_ref (e->node));
  return true;
}

/* All names of DIR, LIMIT at a time, resuming from the last offset. */
static GPtrArray *
list_dir (Fx *fx, const char *rel, guint limit, bool plus)
{
  g_autoptr (FbViewNode) node = fx_node (fx, rel);
  FbViewFile *dir = NULL;
  Collect c = { 0 };

  c.names = g_ptr_array_new_with_free_func (g_free);
  c.nodes = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);
  c.limit = limit;
  assert_errno (fb_view_opendir (fx->view, &fx->caller, node, &dir, NULL), 0);
  for (;;)
    {
      guint before = c.names->len;
      c.taken = 0;
      assert_errno (fb_view_readdir (fx->view, dir, c.last, plus, collect, &c), 0);
      if (c.names->len == before)
        break;
    }
  fb_view_releasedir (fx->view, dir);
  g_ptr_array_unref (c.nodes);
  g_ptr_array_sort (c.names, (GCompareFunc)(void *)test_cmp_names);
  return c.names;
}

/* The same through fb_view_readdir_at (no open directory): every call
 * starts again from the node and the offset. */
static GPtrArray *
list_at (Fx *fx, const char *rel, guint limit, bool plus, int *ret_err)
{
  g_autoptr (FbViewNode) node = fx_node (fx, rel);
  Collect c = { 0 };

  *ret_err = 0;
  c.names = g_ptr_array_new_with_free_func (g_free);
  c.nodes = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);
  c.limit = limit;
  for (;;)
    {
      guint before = c.names->len;
      int r;
      c.taken = 0;
      r = fb_view_readdir_at (fx->view, &fx->caller, node, c.last, plus, collect, &c);
      if (r < 0)
        {
          *ret_err = r;
          break;
        }
      if (c.names->len == before)
        break;
    }
  g_ptr_array_unref (c.nodes);
  g_ptr_array_sort (c.names, (GCompareFunc)(void *)test_cmp_names);
  return c.names;
}

/* N empty files DIR/PREFIX-000 ... on the host. */
static void
fill_host (const char *dir, const char *prefix, int n)
{
  for (int i = 0; i < n; i++)
    {
      g_autofree char *p = g_strdup_printf ("%s/%s-%03d", dir, prefix, i);
      test_write (p, "", 0644);
    }
}

static char *
names_of (GPtrArray *names)
{
  g_ptr_array_add (names, NULL);
  return g_strjoinv (",", (char **)names->pdata);
}

static void
test_traversable (void **state)
{
  Fx *fx = *state;
  g_autofree char *pol = policy ();
  g_autoptr (GPtrArray) l1 = NULL, l2 = NULL;
  g_autofree char *s1 = NULL, *s2 = NULL;
  FbViewNode *n = NULL;
  FbViewFile *file = NULL;

  fx_make_tree (fx, host_tree);
  fx_start (fx, pol, NULL, -1);
  /* a hidden directory with a readable path below: only that path */
  l1 = list_dir (fx, "/mixed", 0, false);
  s1 = names_of (l1);
  assert_string_equal (s1, ".,..,pub");
  assert_errno (fx_walk (fx, "/mixed/other.txt", &n), -ENOENT);
  {
    g_autoptr (FbViewNode) p = fx_node (fx, "/mixed/pub/p.txt");
    g_autoptr (FbViewNode) mixed = fx_node (fx, "/mixed");
    assert_errno (fb_view_open (fx->view, &fx->caller, p, O_RDONLY, &file, NULL), 0);
    fb_view_release (fx->view, file);
    assert_errno (fb_view_mkdir (fx->view, &fx->caller, mixed, "new", 0755, NULL, NULL), -EACCES);
    assert_false (host_exists (fx, "host/mixed/new"));
  }
  /* a denied one: visible, lists its reachable child, the rest EACCES */
  l2 = list_dir (fx, "/dmix", 0, true);
  s2 = names_of (l2);
  assert_string_equal (s2, ".,..,open");
  assert_errno (fx_walk (fx, "/dmix/closed.txt", &n), -EACCES);
  {
    g_autoptr (FbViewNode) o = fx_node (fx, "/dmix/open/o.txt");
    assert_errno (fb_view_open (fx->view, &fx->caller, o, O_RDONLY, &file, NULL), 0);
    fb_view_release (fx->view, file);
  }
}

/* A private directory that can't be made when first reached (here a file
 * stands where the run directory's private/ would go) fails the lookup: no
 * empty stand-in hides the failure, and nothing is made in its place. */
static void
test_private_unmade_fails (void **state)
{
  Fx *fx = *state;
  g_autofree char *pol = policy ();
  g_autofree char *in_the_way = NULL;
  FbViewNode *n = NULL;
  int r;

  fx_make_tree (fx, host_tree);
  write_host (fx, "run/private", "in the way\n");
  in_the_way = fx_host (fx, "run/private");
  fx_start (fx, pol, "run", -1);
  r = fx_walk (fx, "/priv", &n);
  assert_null (n);
  assert_true (r < 0);
  assert_int_not_equal (r, -ENOENT);
  assert_errno (fx_walk (fx, "/priv/a/b/ws", &n), r);
  assert_true (g_file_test (in_the_way, G_FILE_TEST_IS_REGULAR));
}

/* A private source shows an empty directory in the run directory (made
 * 0700 when a lookup first reaches it, not before), never the host's
 * directory of that name; a workspace below it with its own source is
 * reached through synthetic directories that can't be written or removed. */
static void
test_private_and_synthetic (void **state)
{
  Fx *fx = *state;
  g_autofree char *pol = policy ();
  g_autoptr (GPtrArray) lp = NULL, la = NULL, lw = NULL;
  g_autofree char *sp = NULL, *sa = NULL, *sw = NULL;
  g_autofree char *run = NULL;
  FbViewNode *n = NULL;

  fx_make_tree (fx, host_tree);
  fx_start (fx, pol, "run", -1);
  run = fx_host (fx, "run/private");
  assert_false (g_file_test (run, G_FILE_TEST_EXISTS));
  lp = list_dir (fx, "/priv", 0, false);
  assert_true (g_file_test (run, G_FILE_TEST_IS_DIR));
  {
    g_autoptr (GDir) d = g_dir_open (run, 0, NULL);
    g_autofree char *made = g_build_filename (run, g_dir_read_name (d), NULL);
    struct stat mst;
    assert_int_equal (stat (made, &mst), 0);
    assert_int_equal (mst.st_mode & 07777, 0700);
  }
  sp = names_of (lp);
  assert_string_equal (sp, ".,..,a"); /* not on-host-only */
  assert_errno (fx_walk (fx, "/priv/on-host-only", &n), -ENOENT);
  la = list_dir (fx, "/priv/a", 0, true);
  sa = names_of (la);
  assert_string_equal (sa, ".,..,b");
  lw = list_dir (fx, "/priv/a/b/ws", 0, false);
  sw = names_of (lw);
  assert_string_equal (sw, ".,..,w.txt");
  {
    g_autoptr (FbViewNode) a = fx_node (fx, "/priv/a");
    g_autoptr (FbViewNode) priv = fx_node (fx, "/priv");
    g_autoptr (FbViewNode) made = NULL;
    FbViewFile *file = NULL;
    struct stat st;
    assert_true (fb_view_node_is_synthetic (a));
    assert_errno (fb_view_getattr (fx->view, &fx->caller, a, &st), 0);
    assert_true (S_ISDIR (st.st_mode));
    assert_errno (fb_view_mkdir (fx->view, &fx->caller, a, "x", 0755, NULL, NULL), -EROFS);
    assert_errno (fb_view_rmdir (fx->view, &fx->caller, priv, "a"), -EBUSY);
    assert_errno (fb_view_rename (fx->view, &fx->caller, priv, "a", priv, "z", 0), -EBUSY);
    assert_errno (fb_view_mkdir (fx->view, &fx->caller, priv, "a", 0755, NULL, NULL), -EEXIST);
    /* writing in the private directory lands in the run directory */
    assert_errno (fb_view_create (fx->view, &fx->caller, priv, "mine", O_WRONLY | O_CREAT, 0600, &file, &made, NULL),
                  0);
    assert_int_equal (fb_view_write (fx->view, file, "m", 1, 0), 1);
    fb_view_release (fx->view, file);
    assert_false (host_exists (fx, "host/priv/mine"));
  }
  {
    g_autofree char *cmd = NULL;
    g_autoptr (GDir) d = g_dir_open (run, 0, NULL);
    const char *name = g_dir_read_name (d);
    g_autofree char *mine = NULL;
    assert_non_null (name);
    mine = g_build_filename (run, name, "mine", NULL);
    assert_true (g_file_test (mine, G_FILE_TEST_EXISTS));
  }
  /* the workspace below it is the other host directory, writable */
  {
    g_autoptr (FbViewNode) ws = fx_node (fx, "/priv/a/b/ws");
    assert_errno (fb_view_mkdir (fx->view, &fx->caller, ws, "d", 0755, NULL, NULL), 0);
    assert_true (host_exists (fx, "elsewhere/d"));
  }
}

/* /proc, /sys and /dev are empty and read-only: the host's are never
 * passed through, whatever the policy says about the rest. */
static void
test_blank_dirs (void **state)
{
  Fx *fx = *state;
  g_autofree char *pol = policy ();
  static const char *const blanks[] = { "/proc", "/sys", "/dev" };

  fx_make_tree (fx, host_tree);
  fx_start (fx, pol, NULL, -1);
  for (guint i = 0; i < G_N_ELEMENTS (blanks); i++)
    {
      g_autoptr (FbViewNode) n = NULL;
      FbViewNode *child = NULL;
      FbViewFile *dir = NULL;
      Collect c = { 0 };
      struct stat st;

      assert_errno (fb_view_walk (fx->view, &fx->caller, blanks[i], 0, &n), 0);
      assert_true (fb_view_node_is_synthetic (n));
      assert_errno (fb_view_getattr (fx->view, &fx->caller, n, &st), 0);
      assert_true (S_ISDIR (st.st_mode));
      assert_errno (fb_view_lookup (fx->view, &fx->caller, n, "self", &child, NULL), -ENOENT);
      assert_errno (fb_view_lookup (fx->view, &fx->caller, n, "null", &child, NULL), -ENOENT);
      assert_errno (fb_view_opendir (fx->view, &fx->caller, n, &dir, NULL), 0);
      c.names = g_ptr_array_new_with_free_func (g_free);
      assert_errno (fb_view_readdir (fx->view, dir, 0, true, collect, &c), 0);
      fb_view_releasedir (fx->view, dir);
      assert_int_equal (c.names->len, 2); /* "." and ".." */
      g_ptr_array_unref (c.names);
      /* read-only here (the root's rule), and nothing to write to anyway */
      assert_errno (fb_view_mkdir (fx->view, &fx->caller, n, "x", 0755, NULL, NULL), -EROFS);
    }
  /* and /proc/self/... by a walk as well */
  {
    FbViewNode *n = NULL;
    assert_errno (fb_view_walk (fx->view, &fx->caller, "/proc/self/status", 0, &n), -ENOENT);
    assert_errno (fb_view_walk (fx->view, &fx->caller, "/proc/1/root", 0, &n), -ENOENT);
  }
}

/* A big directory read a few entries at a time, from the offsets the view
 * hands out: every visible name exactly once, no hidden one. */
static void
test_readdir_resume (void **state)
{
  Fx *fx = *state;
  g_autofree char *pol = policy ();
  g_autofree char *big = NULL;
  g_autoptr (GPtrArray) names = NULL;
  g_autoptr (GPtrArray) plus = NULL;
  guint visible = 0;

  fx_make_tree (fx, host_tree);
  big = fx_host (fx, "host/big");
  for (int i = 0; i < 3000; i++)
    {
      g_autofree char *p = g_strdup_printf ("%s/%s-%04d", big, i % 10 == 0 ? "hidden" : "file", i);
      int fd = open (p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      assert_true (fd >= 0);
      close (fd);
      if (i % 10 != 0)
        visible++;
    }
  fx_start (fx, pol, NULL, -1);
  names = list_dir (fx, "/big", 7, false);
  assert_int_equal (names->len, visible + 2);
  for (guint i = 1; i < names->len; i++)
    if (strcmp (names->pdata[i - 1], names->pdata[i]) == 0)
      fail_msg ("%s listed twice", (char *)names->pdata[i]);
  for (guint i = 0; i < names->len; i++)
    assert_false (g_str_has_prefix (names->pdata[i], "hidden-"));
  /* with attributes (readdirplus), the same names, and a node each */
  plus = list_dir (fx, "/big", 100, true);
  assert_int_equal (plus->len, names->len);
  /* without an open directory, from the node and the offsets handed out */
  {
    int err;
    g_autoptr (GPtrArray) at = list_at (fx, "/big", 9, false, &err);
    g_autoptr (GPtrArray) atp = list_at (fx, "/big", 50, true, &err);
    assert_int_equal (err, 0);
    assert_int_equal (at->len, names->len);
    assert_int_equal (atp->len, names->len);
    for (guint i = 0; i < names->len; i++)
      assert_string_equal (at->pdata[i], names->pdata[i]);
  }
}

/* The host positions the view keeps for NODE's listings without a handle. */
static guint
positions_of (FbView *view, const void *node)
{
  guint n = 0;

  g_mutex_lock (&view->cursor_lock);
  for (guint i = 0; view->cursors != NULL && i < DIR_CURSOR_SETS * DIR_CURSOR_WAYS; i++)
    if (view->cursors[i].node == node)
      n++;
  g_mutex_unlock (&view->cursor_lock);
  return n;
}

/* One call of NODE's listing without a handle from C's last offset, LIMIT
 * entries at most: how many it gave. */
static guint
list_at_once (Fx *fx, FbViewNode *node, Collect *c, guint limit)
{
  guint before = c->names->len;

  c->limit = limit;
  c->taken = 0;
  assert_errno (fb_view_readdir_at (fx->view, &fx->caller, node, c->last, false, collect, c), 0);
  return c->names->len - before;
}

static void
assert_once_each (GPtrArray *names, const char *what)
{
  g_ptr_array_sort (names, (GCompareFunc)(void *)test_cmp_names);
  for (guint i = 1; i < names->len; i++)
    if (strcmp (names->pdata[i - 1], names->pdata[i]) == 0)
      fail_msg ("%s: %s listed twice", what, (char *)names->pdata[i]);
}

/* A streamed listing without a handle that the host directory changes
 * under goes on from the host's position where it stopped, as the host's
 * own offsets would: no name that was there all along is handed out
 * twice or left out (found again from the start, skipping as many shown
 * entries, the new names ext4 hashed before it would shift it back). */
static void
test_readdir_at_changed_midway (void **state)
{
  Fx *fx = *state;
  g_autofree char *pol = policy ();
  g_autofree char *big = NULL;
  g_autoptr (FbViewNode) node = NULL;
  Collect c = { .names = g_ptr_array_new_with_free_func (g_free) };
  guint before = 0;

  fx_make_tree (fx, host_tree);
  big = fx_host (fx, "host/big");
  fill_host (big, "before", 300);
  fx_start (fx, pol, NULL, -1);
  node = fx_node (fx, "/big");
  assert_int_equal (list_at_once (fx, node, &c, 40), 40);
  fill_host (big, "after", 300);
  while (list_at_once (fx, node, &c, 40) > 0)
    ;
  assert_once_each (c.names, "/big changed midway");
  for (guint i = 0; i < c.names->len; i++)
    if (g_str_has_prefix (c.names->pdata[i], "before-"))
      before++;
  assert_int_equal (before, 300);
  g_ptr_array_unref (c.names);
}

/* A plain directory listed to its end without a handle keeps nothing in
 * the view once the kernel has asked past its end: no extra part in its
 * node, no position (a walk lists thousands).  Listings still under way
 * keep theirs, more of them than the view has room for: those that lost
 * theirs go on from the start, each name once.  A node's positions go
 * with it. */
static void
test_readdir_at_keeps_nothing (void **state)
{
  Fx *fx = *state;
  g_autofree char *pol = policy ();
  enum
  {
    DIRS = 1500
  };
  FbViewNode **nodes = g_new0 (FbViewNode *, DIRS);
  Collect *cs = g_new0 (Collect, DIRS);
  guint kept = 0;
  void *gone;

  fx_make_tree (fx, host_tree);
  for (int i = 0; i < DIRS; i++)
    {
      g_autofree char *rel = g_strdup_printf ("host/big/d%04d", i);
      mkdir_host (fx, rel);
      for (int j = 0; j < 6; j++)
        {
          g_autofree char *f = g_strdup_printf ("host/big/d%04d/f%d", i, j);
          write_host (fx, f, "");
        }
    }
  fx_start (fx, pol, NULL, -1);

  /* one read to the end, then the kernel's call past it */
  {
    g_autoptr (FbViewNode) d = fx_node (fx, "/big/d0000");
    Collect c = { .names = g_ptr_array_new_with_free_func (g_free) };
    assert_int_equal (list_at_once (fx, d, &c, 0), 8);
    assert_int_equal (positions_of (fx->view, d), 1);
    assert_int_equal (list_at_once (fx, d, &c, 0), 0);
    assert_int_equal (positions_of (fx->view, d), 0);
    assert_null (node_extra_peek (d));
    /* and once more past the end: nothing, found the long way */
    assert_int_equal (list_at_once (fx, d, &c, 0), 0);
    assert_int_equal (c.names->len, 8);
    g_ptr_array_unref (c.names);
  }

  /* DIRS listings under way at once, three entries each so far */
  for (int i = 0; i < DIRS; i++)
    {
      g_autofree char *path = g_strdup_printf ("/big/d%04d", i);
      nodes[i] = fx_node (fx, path);
      cs[i].names = g_ptr_array_new_with_free_func (g_free);
      assert_int_equal (list_at_once (fx, nodes[i], &cs[i], 3), 3);
    }
  for (int i = 0; i < DIRS; i++)
    kept += positions_of (fx->view, nodes[i]);
  assert_true (kept <= DIR_CURSOR_SETS * DIR_CURSOR_WAYS);
  assert_true (kept < DIRS); /* some gave way */
  for (int i = 0; i < DIRS; i++)
    {
      g_autofree char *what = g_strdup_printf ("/big/d%04d", i);
      while (list_at_once (fx, nodes[i], &cs[i], 2) > 0)
        ;
      assert_once_each (cs[i].names, what);
      assert_int_equal (cs[i].names->len, 8);
      g_ptr_array_unref (cs[i].names);
    }

  /* a listing under way, its node let go */
  {
    Collect c = { .names = g_ptr_array_new_with_free_func (g_free) };
    assert_int_equal (list_at_once (fx, nodes[1], &c, 4), 4);
    assert_int_equal (positions_of (fx->view, nodes[1]), 1);
    g_ptr_array_unref (c.names);
  }
  gone = nodes[1];
  for (int i = 0; i < DIRS; i++)
    fb_view_node_unref (nodes[i]);
  assert_int_equal (positions_of (fx->view, gone), 0);
  g_free (nodes);
  g_free (cs);
}

/* A directory listed from a list (here: a host directory holding a mount
 * point) that changes while it is listed: the listing goes on in the list
 * it started with, so no name is handed out twice or skipped, and the list
 * is not made anew at every call (which made a directory kept changing
 * cost a build per call, quadratic in its size). */
static void
test_assembled_listing_changes (void **state)
{
  Fx *fx = *state;
  static const char pol[] = "{ \"version\": 1,\n"
                            "  \"rules\": [\n"
                            "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
                            "  { \"path\": \"@H@/big\", \"access\": \"write\", \"why\": \"big\" },\n"
                            "  { \"path\": \"@H@/big/m\", \"access\": \"write\", \"source\": \"@T@/elsewhere\", "
                            "\"why\": \"mounted\" } ] }\n";
  g_autofree char *big = NULL;
  g_autoptr (FbViewNode) node = NULL;
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  Collect c = { .names = names, .limit = 10 };

  mkdir_host (fx, "host/big");
  mkdir_host (fx, "elsewhere");
  big = fx_host (fx, "host/big");
  fill_host (big, "before", 300);
  fx_start (fx, pol, NULL, -1);
  node = fx_node (fx, "/big");
  assert_errno (fb_view_readdir_at (fx->view, &fx->caller, node, 0, false, collect, &c), 0);
  assert_int_equal (names->len, 10);
  /* the host directory changes under the listing */
  fill_host (big, "after", 300);
  for (;;)
    {
      guint before = names->len;
      c.taken = 0;
      assert_errno (fb_view_readdir_at (fx->view, &fx->caller, node, c.last, false, collect, &c), 0);
      if (names->len == before)
        break;
    }
  g_ptr_array_sort (names, (GCompareFunc)(void *)test_cmp_names);
  for (guint i = 1; i < names->len; i++)
    if (strcmp (names->pdata[i - 1], names->pdata[i]) == 0)
      fail_msg ("%s listed twice", (char *)names->pdata[i]);
  /* ".", "..", the mount point and every name there at the start */
  assert_int_equal (names->len, 303);
  for (guint i = 0; i < names->len; i++)
    assert_false (g_str_has_prefix (names->pdata[i], "after-"));
}

/* The (name, offset) pairs of REL, LIMIT at a time; through an open
 * directory or (AT) without. */
static char *
pairs_of (Fx *fx, const char *rel, guint limit, bool at, GPtrArray *names)
{
  g_autoptr (FbViewNode) node = fx_node (fx, rel);
  FbViewFile *dir = NULL;
  Collect c = { .pairs = g_string_new (NULL), .names = names, .limit = limit };

  if (!at)
    assert_errno (fb_view_opendir (fx->view, &fx->caller, node, &dir, NULL), 0);
  for (;;)
    {
      gsize before = c.pairs->len;
      c.taken = 0;
      if (at)
        assert_errno (fb_view_readdir_at (fx->view, &fx->caller, node, c.last, false, collect, &c), 0);
      else
        assert_errno (fb_view_readdir (fx->view, dir, c.last, false, collect, &c), 0);
      if (c.pairs->len == before)
        break;
    }
  if (dir != NULL)
    fb_view_releasedir (fx->view, dir);
  return g_string_free (c.pairs, FALSE);
}

/* The first entry after OFFSET, or NULL at the end. */
static char *
entry_after (Fx *fx, FbViewNode *node, FbViewFile *dir, off_t offset)
{
  g_autoptr (GPtrArray) one = g_ptr_array_new_with_free_func (g_free);
  Collect c = { .names = one, .limit = 1 };

  if (dir != NULL)
    assert_errno (fb_view_readdir (fx->view, dir, offset, false, collect, &c), 0);
  else
    assert_errno (fb_view_readdir_at (fx->view, &fx->caller, node, offset, false, collect, &c), 0);
  if (c.last != 0 && c.last != offset + 1)
    fail_msg ("the entry after offset %lld has offset %lld", (long long)offset, (long long)c.last);
  return one->len > 0 ? g_strdup (one->pdata[0]) : NULL;
}

/* The offsets a listing hands out are the view's own: the same names give
 * the same (name, offset) pairs whether or not the host holds a hidden name
 * among them (the host's ext4 hashes or tmpfs counters would differ), and
 * any offset handed out leads back to the entry after it, in any order,
 * through an open directory and without. */
static void
test_readdir_offsets (void **state)
{
  Fx *fx = *state;
  g_autofree char *pol = policy ();
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  static const off_t probes[] = { 0, 1, 2, 3, 150, 57, 401, 199, 402, 403, 500, 100000, 1, 0 };

  fx_make_tree (fx, host_tree);
  for (int i = 0; i < 400; i++)
    {
      g_autofree char *a = g_strdup_printf ("host/offs/with/n%04d", i);
      g_autofree char *b = g_strdup_printf ("host/offs/without/n%04d", i);
      write_host (fx, a, "");
      write_host (fx, b, "");
      if (i == 200)
        write_host (fx, "host/offs/with/secret", "HIDDEN\n");
    }
  {
    g_autofree char *h = fx_host (fx, "host/offs/with/secret");
    assert_true (g_file_test (h, G_FILE_TEST_IS_REGULAR));
  }
  fx_start (fx, pol, NULL, -1);
  for (guint limit = 1; limit <= 97; limit += 48)
    for (int at = 0; at < 2; at++)
      {
        g_autofree char *with = pairs_of (fx, "/offs/with", limit, at, NULL);
        g_autofree char *without = pairs_of (fx, "/offs/without", limit, at, NULL);
        if (strcmp (with, without) != 0)
          fail_msg ("%s, %u at a time: the listing with a hidden name differs from the one without:\n%s\n---\n%s",
                    at ? "without an open directory" : "through an open directory", limit, with, without);
        assert_null (strstr (with, "secret"));
      }
  /* offsets count the entries shown: 1, 2, ... 402 ("." and ".." too) */
  g_free (pairs_of (fx, "/offs/with", 13, true, names));
  assert_int_equal (names->len, 402);
  for (int at = 0; at < 2; at++)
    {
      g_autoptr (FbViewNode) node = fx_node (fx, "/offs/with");
      FbViewFile *dir = NULL;
      if (!at)
        assert_errno (fb_view_opendir (fx->view, &fx->caller, node, &dir, NULL), 0);
      for (guint i = 0; i < G_N_ELEMENTS (probes); i++)
        {
          g_autofree char *got = entry_after (fx, node, dir, probes[i]);
          const char *want = probes[i] < (off_t)names->len ? names->pdata[probes[i]] : NULL;
          if (g_strcmp0 (got, want) != 0)
            fail_msg ("%s: after offset %lld came %s, not %s", at ? "without an open directory" : "an open directory",
                      (long long)probes[i], got ? got : "the end", want ? want : "the end");
        }
      if (dir != NULL)
        fb_view_releasedir (fx->view, dir);
    }
}

/* fb_view_readdir_at asks the policy at every call: a denied directory
 * refuses, a traversable one lists its reachable children, and a listing
 * that was assembled follows the host's changes. */
static void
test_readdir_at_policy (void **state)
{
  Fx *fx = *state;
  g_autofree char *pol = policy ();
  int err;

  fx_make_tree (fx, host_tree);
  write_host (fx, "host/denied-dir/x", "x\n");
  fx_start (fx, pol, "run", -1);
  {
    g_autoptr (GPtrArray) m = list_at (fx, "/mixed", 0, true, &err);
    g_autofree char *s = names_of (m);
    assert_int_equal (err, 0);
    assert_string_equal (s, ".,..,pub");
  }
  {
    g_autoptr (GPtrArray) d = list_at (fx, "/dmix/open", 0, false, &err);
    assert_int_equal (err, 0);
  }
  {
    g_autoptr (FbViewNode) dmix = fx_node (fx, "/dmix");
    g_autoptr (FbViewNode) denied = fx_node (fx, "/denied-dir");
    Collect c = { 0 };
    c.names = g_ptr_array_new_with_free_func (g_free);
    /* a denied directory with a readable path below lists that path only */
    assert_errno (fb_view_readdir_at (fx->view, &fx->caller, dmix, 0, false, collect, &c), 0);
    assert_int_equal (c.names->len, 3);
    /* a denied one without: refused, at the start and at any offset */
    assert_errno (fb_view_readdir_at (fx->view, &fx->caller, denied, 0, false, collect, &c), -EACCES);
    assert_errno (fb_view_readdir_at (fx->view, &fx->caller, denied, 5, true, collect, &c), -EACCES);
    assert_int_equal (c.names->len, 3);
    g_ptr_array_unref (c.names);
  }
  {
    /* the private directory's listing is assembled (it leads to a mount
     * point); a file made there by someone else shows up */
    g_autoptr (GPtrArray) before = list_at (fx, "/priv", 0, false, &err);
    g_autofree char *run = fx_host (fx, "run/private");
    g_autoptr (GDir) d = g_dir_open (run, 0, NULL);
    const char *name = g_dir_read_name (d);
    g_autofree char *extra = g_build_filename (run, name, "made-on-host", NULL);
    g_autoptr (GPtrArray) after = NULL;
    assert_true (g_file_set_contents (extra, "x", -1, NULL));
    after = list_at (fx, "/priv", 0, false, &err);
    assert_int_equal (after->len, before->len + 1);
  }
}

/* Walks resolve ".." to the parent view path and symlinks inside the view
 * (never on the host): a link to a hidden file leads nowhere. */
static void
test_walk (void **state)
{
  Fx *fx = *state;
  g_autofree char *pol = policy ();
  g_autofree char *l1 = NULL, *l2 = NULL, *l3 = NULL, *l4 = NULL;
  g_autofree char *abs_target = NULL;
  g_autoptr (FbViewNode) n = NULL;
  FbViewNode *m = NULL;

  fx_make_tree (fx, host_tree);
  write_host (fx, "host/big/f", "f\n");
  l1 = fx_host (fx, "host/big/to-pub");
  assert_int_equal (symlink ("../mixed/pub/p.txt", l1), 0);
  l2 = fx_host (fx, "host/big/to-other");
  assert_int_equal (symlink ("../mixed/other.txt", l2), 0);
  l3 = fx_host (fx, "host/big/loop");
  assert_int_equal (symlink ("loop", l3), 0);
  l4 = fx_host (fx, "host/big/abs");
  abs_target = fx_vpath (fx, "/mixed/pub/p.txt");
  assert_int_equal (symlink (abs_target, l4), 0);
  fx_start (fx, pol, NULL, -1);

  n = fx_node (fx, "/big/../mixed/pub/./p.txt");
  {
    g_autofree char *p = fb_view_node_dup_path (n);
    assert_string_equal (p, abs_target);
  }
  g_clear_pointer (&n, fb_view_node_unref);
  assert_errno (fb_view_walk (fx->view, &fx->caller, l1, 0, &m), 0); /* l1's host path is its view path */
  fb_view_node_unref (m);
  assert_errno (fb_view_walk (fx->view, &fx->caller, l4, 0, &m), 0);
  fb_view_node_unref (m);
  assert_errno (fb_view_walk (fx->view, &fx->caller, l2, 0, &m), -ENOENT);
  assert_errno (fb_view_walk (fx->view, &fx->caller, l3, 0, &m), -ELOOP);
  /* without following, the link itself */
  assert_errno (fb_view_walk (fx->view, &fx->caller, l2, FB_VIEW_WALK_NOFOLLOW, &m), 0);
  assert_int_equal (fb_view_node_get_type (m), S_IFLNK);
  fb_view_node_unref (m);
  assert_errno (fb_view_walk (fx->view, &fx->caller, "relative/path", 0, &m), -EINVAL);
  {
    g_autofree char *through_file = fx_vpath (fx, "/big/f/x");
    assert_errno (fb_view_walk (fx->view, &fx->caller, through_file, 0, &m), -ENOTDIR);
  }
}

/* Another object at REL on the host, with CONTENT, renamed over it. */
static void
replace_on_host (Fx *fx, const char *rel, const char *content)
{
  g_autofree char *f = fx_host (fx, rel);
  g_autofree char *tmp = g_strconcat (f, ".new", NULL);

  assert_true (g_file_set_contents (tmp, content, -1, NULL));
  assert_int_equal (rename (tmp, f), 0);
}

/* The host replaced an object under a known name: the next lookup makes a
 * new node, and the old one (a file, which holds no descriptor while not
 * open) answers ESTALE instead of reaching the new object; the same object
 * gives the same node.  Kernel lookup counts keep nodes alive, forgets free them. */
static void
test_nodes_and_counts (void **state)
{
  Fx *fx = *state;
  g_autofree char *pol = policy ();
  g_autoptr (FbViewNode) c = NULL;
  guint count;

  fx_make_tree (fx, host_tree);
  write_host (fx, "host/big/f", "one\n");
  fx_start (fx, pol, NULL, -1);
  g_autoptr (FbViewNode) a = fx_node (fx, "/big/f");
  g_autoptr (FbViewNode) b = fx_node (fx, "/big/f");
  assert_ptr_equal (a, b);
  replace_on_host (fx, "host/big/f", "two\n");
  c = fx_node (fx, "/big/f");
  assert_ptr_not_equal (a, c);
  {
    FbViewFile *file = NULL;
    struct stat st;
    assert_errno (fb_view_open (fx->view, &fx->caller, a, O_RDONLY, &file, NULL), -ESTALE);
    assert_errno (fb_view_getattr (fx->view, &fx->caller, a, &st), -ESTALE);
  }
  /* lookup counts */
  count = fb_view_count_nodes (fx->view);
  fb_view_node_kernel_ref (c);
  fb_view_node_kernel_ref (c);
  g_clear_pointer (&c, fb_view_node_unref);
  g_clear_pointer (&a, fb_view_node_unref);
  g_clear_pointer (&b, fb_view_node_unref);
  /* a (detached, now unreferenced) is gone; c lives on its kernel count */
  assert_int_equal (fb_view_count_nodes (fx->view), count - 1);
  c = fx_node (fx, "/big/f");
  fb_view_node_kernel_forget (c, 1);
  fb_view_node_kernel_forget (c, 5); /* more than it has: clamps */
  fb_view_node_kernel_forget (c, 1);
  g_clear_pointer (&c, fb_view_node_unref);
}

static void
collect_node (FbViewNode *node, gpointer user_data)
{
  g_ptr_array_add (user_data, node);
}

/* The nodes of VIEW showing the host object of HOST_PATH. */
static GPtrArray *
object_nodes (FbView *view, const char *host_path)
{
  GPtrArray *found = g_ptr_array_new ();
  struct stat st;

  assert_int_equal (stat (host_path, &st), 0);
  fb_view_find_object (view, st.st_dev, st.st_ino, collect_node, found);
  return found;
}

/* A host object reached by several names (hard links) has a node for each,
 * and the index of host objects (what the watcher's events are mapped
 * through) finds every one of them, whichever goes first. */
static void
test_object_index (void **state)
{
  Fx *fx = *state;
  g_autofree char *pol = policy ();
  g_autofree char *f1 = NULL, *f2 = NULL, *f3 = NULL;
  FbViewNode *n[3];

  fx_make_tree (fx, host_tree);
  write_host (fx, "host/big/l1", "linked\n");
  f1 = fx_host (fx, "host/big/l1");
  f2 = fx_host (fx, "host/big/l2");
  f3 = fx_host (fx, "host/big/l3");
  assert_int_equal (link (f1, f2), 0);
  assert_int_equal (link (f1, f3), 0);
  fx_start (fx, pol, NULL, -1);
  n[0] = fx_node (fx, "/big/l1");
  n[1] = fx_node (fx, "/big/l2");
  n[2] = fx_node (fx, "/big/l3");
  {
    g_autoptr (GPtrArray) found = object_nodes (fx->view, f1);
    assert_int_equal (found->len, 3);
    for (guint i = 0; i < 3; i++)
      assert_true (g_ptr_array_find (found, n[i], NULL));
  }
  /* the first found goes first, then the others in turn */
  for (guint left = 3; left > 0; left--)
    {
      g_autoptr (GPtrArray) before = object_nodes (fx->view, f1);
      FbViewNode *gone = before->pdata[0];
      assert_int_equal (before->len, left);
      for (guint i = 0; i < 3; i++)
        if (n[i] == gone)
          n[i] = NULL;
      fb_view_node_unref (gone);
      g_autoptr (GPtrArray) after = object_nodes (fx->view, f1);
      assert_int_equal (after->len, left - 1);
      assert_false (g_ptr_array_find (after, gone, NULL));
      for (guint i = 0; i < 3; i++)
        if (n[i] != NULL)
          assert_true (g_ptr_array_find (after, n[i], NULL));
    }
}

static void
collect_name (FbViewNode *node, FbViewNode *parent, const char *name, gpointer user_data)
{
  g_ptr_array_add (user_data, g_strdup (name));
}

/* The names the kernel could forget are offered oldest first; a node that
 * left the table (its name now shows another object) but that the kernel
 * still holds is reached when the kernel's counts are dropped. */
static void
test_evictable_and_detached (void **state)
{
  Fx *fx = *state;
  g_autofree char *pol = policy ();
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  FbViewNode *old, *fresh;
  guint count;

  fx_make_tree (fx, host_tree);
  for (guint i = 0; i < 5; i++)
    {
      g_autofree char *rel = g_strdup_printf ("host/big/e%u", i);
      write_host (fx, rel, "e\n");
    }
  fx_start (fx, pol, NULL, -1);
  for (guint i = 0; i < 5; i++)
    {
      g_autofree char *path = g_strdup_printf ("/big/e%u", i);
      g_autoptr (FbViewNode) n = fx_node (fx, path);
      fb_view_node_kernel_ref (n);
    }
  fb_view_foreach_evictable (fx->view, 2, collect_name, names);
  assert_int_equal (names->len, 2);
  assert_string_equal (names->pdata[0], "e0");
  assert_string_equal (names->pdata[1], "e1");

  /* e0 replaced on the host: its node leaves the table, held by the kernel */
  old = fx_node (fx, "/big/e0");
  replace_on_host (fx, "host/big/e0", "new\n");
  fresh = fx_node (fx, "/big/e0");
  assert_ptr_not_equal (old, fresh);
  fb_view_node_unref (fresh);
  fb_view_node_unref (old);
  count = fb_view_count_nodes (fx->view);
  fb_view_drop_kernel_refs (fx->view);
  /* the five the kernel held are freed, the detached one with them, and
   * /big, which only they held */
  assert_int_equal (fb_view_count_nodes (fx->view), count - 6);
}

TEST_DEFINE_MAIN (NULL, NULL, FX_TEST (test_traversable), FX_TEST (test_private_and_synthetic),
                  FX_TEST (test_private_unmade_fails), FX_TEST (test_blank_dirs), FX_TEST (test_readdir_resume),
                  FX_TEST (test_readdir_at_changed_midway), FX_TEST (test_readdir_at_keeps_nothing),
                  FX_TEST (test_readdir_offsets), FX_TEST (test_readdir_at_policy),
                  FX_TEST (test_assembled_listing_changes), FX_TEST (test_walk), FX_TEST (test_nodes_and_counts),
                  FX_TEST (test_object_index), FX_TEST (test_evictable_and_detached))
