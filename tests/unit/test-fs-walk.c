/* fusebox — fb_view_walk's reuse of nodes (fs-view.c "Pinned nodes"): the
 * root, mount points and synthetic directories are kept for the view's life,
 * a known host directory is reused only while the host still shows it at
 * its name, and the policy holds on every walk through kept nodes. */
#include "tests/unit/test-fs-util.h"

/* A private /priv with a workspace mounted at /priv/a/b/ws from TMP/wsrc:
 * /priv/a and /priv/a/b are synthetic (the private directory has neither). */
static const char policy_text[] =
  "{ \"version\": 1,\n"
  "  \"protected_names\": { \".git\": \"hide\" },\n"
  "  \"rules\": [\n"
  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
  "  { \"path\": \"@H@/priv\", \"access\": \"write\", \"source\": \"private\", \"why\": \"private\" },\n"
  "  { \"path\": \"@H@/priv/a/b/ws\", \"access\": \"write\", \"source\": \"@T@/wsrc\", \"why\": \"workspace\" },\n"
  "  { \"glob\": \"@H@/priv/a/b/ws/hidden-*\", \"access\": \"hide\", \"why\": \"hidden entries\" } ] }\n";

static const TestHostFile host_tree[] = {
  { "wsrc/dir/a", "old\n" },
  { "wsrc/hidden-x", "secret\n" },
  { "wsrc/.git/config", "[core]\n" },
  { "host/priv/on-host-only", "the host's, never shown\n" },
  { NULL },
};

static void
start (Fx *fx)
{
  fx_make_tree (fx, host_tree);
  fx_start (fx, policy_text, "run", FB_LOG_LEVEL_ALL);
}

static void
write_through_view (Fx *fx, const char *dir_rel, const char *name, const char *data)
{
  g_autoptr (FbViewNode) parent = fx_node (fx, dir_rel);
  FbViewFile *file = NULL;

  assert_errno (fb_view_create (fx->view, &fx->caller, parent, name, O_WRONLY | O_TRUNC, 0644, &file, NULL, NULL), 0);
  assert_int_equal (fb_view_write (fx->view, file, data, strlen (data), 0), (gssize)strlen (data));
  fb_view_release (fx->view, file);
}

/* The root, the mount point and the synthetic directories on the way are
 * the same nodes on every walk, even with no reference held in between. */
static void
test_structural_nodes_kept (void **state)
{
  Fx *fx = *state;
  static const char *const paths[] = { "/priv", "/priv/a", "/priv/a/b", "/priv/a/b/ws" };
  guint64 first[G_N_ELEMENTS (paths)], root_gen;

  start (fx);
  /* no reference held between the walks: generations (unique per node,
   * unlike addresses) tell whether a node was made again */
  {
    g_autoptr (FbViewNode) root = fb_view_get_root (fx->view);
    root_gen = fb_view_node_get_generation (root);
  }
  for (guint i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      g_autoptr (FbViewNode) node = fx_node (fx, paths[i]);
      first[i] = fb_view_node_get_generation (node);
      if (i == 1 || i == 2)
        assert_true (fb_view_node_is_synthetic (node));
    }
  for (guint i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      g_autoptr (FbViewNode) node = fx_node (fx, paths[i]);
      if (fb_view_node_get_generation (node) != first[i])
        fail_msg ("%s was made again (generation %" G_GUINT64_FORMAT " then %" G_GUINT64_FORMAT ")", paths[i], first[i],
                  fb_view_node_get_generation (node));
    }
  {
    g_autoptr (FbViewNode) root = fb_view_get_root (fx->view);
    assert_int_equal (fb_view_node_get_generation (root), root_gen);
  }
  /* what the view keeps for itself is not counted (fx_free checks 0) */
  assert_int_equal (fb_view_count_nodes (fx->view), 0);
}

/* A directory the view knows (held through a node below it) replaced on
 * the host by a new one of the same name: the next write lands in the new
 * directory, not in the one renamed away. */
static void
test_replaced_directory_gets_the_write (void **state)
{
  Fx *fx = *state;
  g_autofree char *from = NULL, *to = NULL, *in_new = NULL, *in_old = NULL;

  start (fx);
  g_autoptr (FbViewNode) held = fx_node (fx, "/priv/a/b/ws/dir/a");
  g_autoptr (FbViewNode) old_dir = fx_node (fx, "/priv/a/b/ws/dir");
  /* known and current: the same node */
  {
    g_autoptr (FbViewNode) same = fx_node (fx, "/priv/a/b/ws/dir");
    assert_ptr_equal (same, old_dir);
  }

  /* rm -rf dir && mkdir dir, keeping the old one to look into */
  from = fx_host (fx, "wsrc/dir");
  to = fx_host (fx, "wsrc/old-dir");
  assert_int_equal (rename (from, to), 0);
  mkdir_host (fx, "wsrc/dir");

  write_through_view (fx, "/priv/a/b/ws/dir", "a", "new\n");
  in_new = read_host (fx, "wsrc/dir/a");
  in_old = read_host (fx, "wsrc/old-dir/a");
  assert_non_null (in_new);
  assert_string_equal (in_new, "new\n");
  assert_string_equal (in_old, "old\n");

  /* the stale node was replaced by one for the new directory */
  g_autoptr (FbViewNode) new_dir = fx_node (fx, "/priv/a/b/ws/dir");
  assert_ptr_not_equal (new_dir, old_dir);
}

/* Walks through the kept nodes still ask the policy: a hidden name below
 * the mount point, a protected name and a host file that the private
 * mount covers stay ENOENT, on the first walk and on later ones. */
static void
test_policy_through_kept_nodes (void **state)
{
  Fx *fx = *state;

  start (fx);
  /* they exist on the host, and are readable outside */
  {
    g_autofree char *secret = read_host (fx, "wsrc/hidden-x");
    assert_non_null (secret);
  }
  {
    g_autofree char *cfg = read_host (fx, "wsrc/.git/config");
    g_autofree char *own = read_host (fx, "host/priv/on-host-only");
    assert_non_null (cfg);
    assert_non_null (own);
  }
  for (int round = 0; round < 2; round++)
    {
      FbViewNode *node = NULL;
      TestEvent *e;

      fx_clear_events (fx);
      assert_errno (fx_walk (fx, "/priv/a/b/ws/hidden-x", &node), -ENOENT);
      e = fx_find_event (fx, "lookup", "/priv/a/b/ws/hidden-x");
      assert_non_null (e);
      assert_int_equal (e->decision, FB_DECISION_HIDE);
      assert_string_equal (e->why, "hidden entries");
      assert_errno (fx_walk (fx, "/priv/a/b/ws/.git", &node), -ENOENT);
      assert_errno (fx_walk (fx, "/priv/a/b/ws/.git/config", &node), -ENOENT);
      assert_errno (fx_walk (fx, "/priv/on-host-only", &node), -ENOENT);
      assert_errno (fx_walk (fx, "/priv/a/nothing", &node), -ENOENT);
      {
        g_autoptr (FbViewNode) ws = fx_node (fx, "/priv/a/b/ws");
        FbViewFile *file = NULL;
        assert_errno (fb_view_create (fx->view, &fx->caller, ws, "hidden-y", O_WRONLY, 0644, &file, NULL, NULL),
                      -EACCES);
        assert_errno (fb_view_create (fx->view, &fx->caller, ws, ".git", O_WRONLY, 0644, &file, NULL, NULL), -EACCES);
      }
      /* and what is allowed still is */
      {
        g_autoptr (FbViewNode) a = fx_node (fx, "/priv/a/b/ws/dir/a");
        assert_true (S_ISREG (fb_view_node_get_type (a)));
      }
    }
  assert_false (host_exists (fx, "wsrc/hidden-y"));
}

/* A view whose last outside reference goes while a caller still holds a
 * kept node: the node (and the view under it) stays usable until then. */
static void
test_kept_node_outlives_view_reference (void **state)
{
  Fx *fx = *state;
  FbViewNode *ws;
  FbView *view;

  start (fx);
  ws = fx_node (fx, "/priv/a/b/ws");
  view = g_steal_pointer (&fx->view);
  fb_view_unref (view);
  assert_true (S_ISDIR (fb_view_node_get_type (ws)));
  {
    g_autofree char *path = fb_view_node_dup_path (ws);
    g_autofree char *want = fx_vpath (fx, "/priv/a/b/ws");
    assert_string_equal (path, want);
  }
  fb_view_node_unref (ws); /* frees the view too (valgrind, ASan) */
}

/* The workspace's source moved on the host (no watcher here: a walk of
 * the remote API has none): every later walk through the mount point is
 * refused as fusebox's, logged with the rule, and a node below it that a
 * caller kept is refused too; the mount point stays, refused. */
static void
test_walk_through_moved_source (void **state)
{
  Fx *fx = *state;
  g_autofree char *from = NULL, *to = NULL;
  FbViewNode *node = NULL;
  TestEvent *e;

  start (fx);
  g_autoptr (FbViewNode) kept = fx_node (fx, "/priv/a/b/ws/dir");
  {
    g_autoptr (FbViewNode) a = fx_node (fx, "/priv/a/b/ws/dir/a");
    assert_true (S_ISREG (fb_view_node_get_type (a)));
  }
  mkdir_host (fx, "elsewhere");
  from = fx_host (fx, "wsrc");
  to = fx_host (fx, "elsewhere/wsrc");
  assert_int_equal (rename (from, to), 0);
  {
    g_autofree char *moved = read_host (fx, "elsewhere/wsrc/dir/a");
    assert_non_null (moved);
  }
  fx_clear_events (fx);
  assert_errno (fx_walk (fx, "/priv/a/b/ws/dir/a", &node), -EACCES);
  e = fx_find_event (fx, "lookup", "/priv/a/b/ws/dir");
  assert_non_null (e);
  assert_int_equal (e->decision, FB_DECISION_DENY);
  assert_non_null (strstr (e->why, "this mount's source directory"));
  {
    FbViewFile *file = NULL;
    assert_errno (fb_view_create (fx->view, &fx->caller, kept, "planted", O_WRONLY, 0644, &file, NULL, NULL), -EACCES);
  }
  assert_false (host_exists (fx, "elsewhere/wsrc/dir/planted"));
  /* moved back, the mount stays refused: the view does not follow */
  assert_int_equal (rename (to, from), 0);
  assert_errno (fx_walk (fx, "/priv/a/b/ws/dir/a", &node), -EACCES);
}

/* The same for the root's own source: the whole view is refused. */
static void
test_walk_through_moved_root_source (void **state)
{
  static const char root_policy[] = "{ \"version\": 1, \"rules\": [\n"
                                    "  { \"path\": \"/\", \"access\": \"write\", \"source\": \"@T@/rootsrc\", "
                                    "\"why\": \"root\" } ] }\n";
  static const TestHostFile tree[] = { { "rootsrc/f", "shown\n" }, { NULL } };
  Fx *fx = *state;
  g_autofree char *from = NULL, *to = NULL;
  FbViewNode *node = NULL;

  fx_make_tree (fx, tree);
  fx_start (fx, root_policy, "run", FB_LOG_LEVEL_ALL);
  assert_errno (fb_view_walk (fx->view, &fx->caller, "/f", 0, &node), 0);
  assert_true (S_ISREG (fb_view_node_get_type (node)));
  g_clear_pointer (&node, fb_view_node_unref);
  mkdir_host (fx, "elsewhere");
  from = fx_host (fx, "rootsrc");
  to = fx_host (fx, "elsewhere/rootsrc");
  assert_int_equal (rename (from, to), 0);
  assert_errno (fb_view_walk (fx->view, &fx->caller, "/f", 0, &node), -EACCES);
}

/* The ways to the sources are bounded: 17 sources 250 directories deep
 * (4,250 directories) refuse the view with -E2BIG, and the message says
 * the bound and what to change; 16 of them (4,000) make a view. */
static void
test_source_ways_bounded (void **state)
{
  Fx *fx = *state;
  g_autoptr (GString) deep = g_string_new ("");
  g_autofree char *why = NULL, *other = NULL;
  FbViewOptions options;

  for (int i = 0; i < 250 - 2; i++) /* under @T@/sN/: 250 with those two */
    g_string_append (deep, i == 0 ? "d" : "/d");
  for (int n = 16; n <= 17; n++)
    {
      g_autoptr (GString) text = g_string_new ("{ \"version\": 1, \"rules\": [\n"
                                               "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" }");
      int r;

      for (int i = 0; i < n; i++)
        {
          g_autofree char *rel = g_strdup_printf ("s%d/%s", i, deep->str);
          g_autofree char *host = fx_host (fx, rel);
          assert_int_equal (g_mkdir_with_parents (host, 0755), 0);
          g_string_append_printf (
            text, ",\n  { \"path\": \"/m%d\", \"access\": \"read\", \"source\": \"%s\", \"why\": \"deep\" }", i, host);
        }
      g_string_append (text, " ] }\n");
      g_clear_pointer (&fx->policy, fb_policy_unref);
      fx->policy = fx_load_policy (fx, text->str, "run");
      fb_view_options_init (&options);
      options.sink = &fx->sink.sink;
      r = fb_view_new (fx->policy, &options, &fx->view);
      if (n == 16)
        {
          assert_int_equal (r, 0);
          g_clear_pointer (&fx->view, fb_view_unref);
        }
      else
        assert_int_equal (r, -E2BIG);
    }
  why = fb_view_new_explain (-E2BIG, NULL);
  assert_non_null (strstr (why, "more than 4,096 directories"));
  assert_non_null (strstr (why, "give fewer rules a source"));
  other = fb_view_new_explain (-EACCES, "/run/x");
  assert_string_equal (other, "Permission denied: a private source under /run/x, or a rule's source directory, could "
                              "not be created or opened");
}

TEST_DEFINE_MAIN (NULL, NULL, FX_TEST (test_structural_nodes_kept), FX_TEST (test_replaced_directory_gets_the_write),
                  FX_TEST (test_policy_through_kept_nodes), FX_TEST (test_kept_node_outlives_view_reference),
                  FX_TEST (test_walk_through_moved_source), FX_TEST (test_walk_through_moved_root_source),
                  FX_TEST (test_source_ways_bounded))
