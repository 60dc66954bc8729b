/* fusebox — the view's bounds on depth and memory (fs/fs.h, Bounds):
 * paths are built from the parents, a node moved past FB_VIEW_PATH_MAX by a
 * rename the depth check could not see refuses everything but stat, and a
 * view keeps at most its node_max nodes. */
#include "tests/unit/test-fs-util.h"

#include <fcntl.h>

static const char policy_text[] = "{ \"version\": 1,\n"
                                  "  \"rules\": [\n"
                                  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
                                  "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"ws\" } ] }\n";

static void
start_with (Fx *fx, guint node_max)
{
  FbViewOptions options;

  fx->policy = fx_load_policy (fx, policy_text, NULL);
  fb_view_options_init (&options);
  options.sink = &fx->sink.sink;
  options.log_level = FB_LOG_LEVEL_ALL;
  options.node_max = node_max;
  assert_int_equal (fb_view_new (fx->policy, &options, &fx->view), 0);
}

/* N levels of "d" below host REL, made on the host. */
static void
host_chain (Fx *fx, const char *rel, int n)
{
  g_autofree char *top = fx_host (fx, rel);
  int fd;

  assert_int_equal (g_mkdir_with_parents (top, 0755), 0);
  fd = open (top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (int i = 0; i < n; i++)
    {
      int next;
      assert_int_equal (mkdirat (fd, "d", 0755), 0);
      next = openat (fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      close (fd);
      fd = next;
    }
  close (fd);
}

/* Down the chain below NODE by lookups until one fails: its errno, the
 * deepest node in *RET (a reference). */
static int
lookup_down (Fx *fx, FbViewNode *node, FbViewNode **ret)
{
  FbViewNode *cur = fb_view_node_ref (node);
  int r;

  for (;;)
    {
      FbViewNode *next = NULL;
      r = fb_view_lookup (fx->view, &fx->caller, cur, "d", &next, NULL);
      if (r < 0)
        break;
      fb_view_node_unref (cur);
      cur = next;
    }
  *ret = cur;
  return r;
}

static void
test_moved_past_the_limit (void **state)
{
  Fx *fx = *state;
  g_autoptr (FbViewNode) deep = NULL;
  g_autofree char *path = NULL;
  g_autofree char *vws = NULL;
  g_autofree char *h_a = NULL, *h_away = NULL;
  gsize prefix;
  FbViewFile *dir = NULL;
  FbViewNode *child = NULL;

  mkdir_host (fx, "host/ws");
  start_with (fx, 0);
  vws = fx_vpath (fx, "/ws");
  prefix = strlen (vws) + strlen ("/a");
  host_chain (fx, "host/ws/a", (int)(FB_VIEW_PATH_MAX - prefix) / 2 - 20);
  g_autoptr (FbViewNode) ws = fx_node (fx, "/ws");
  g_autoptr (FbViewNode) a = fx_node (fx, "/ws/a");
  /* the whole chain is looked up: every node's path is built from its
   * parents, and the deepest is the one expected */
  assert_errno (lookup_down (fx, a, &deep), -ENOENT);
  path = fb_view_node_dup_path (deep);
  assert_int_equal (strlen (path), prefix + 2 * ((FB_VIEW_PATH_MAX - prefix) / 2 - 20));
  g_clear_pointer (&path, g_free);

  /* the host moves the chain away from under a/ (outside the view): the
   * nodes stay where the view saw them, and a's tree on the host is empty */
  h_a = fx_host (fx, "host/ws/a/d");
  h_away = fx_host (fx, "host/ws/away");
  assert_int_equal (rename (h_a, h_away), 0);
  /* so a may move deeper: the depth check measures the host */
  {
    FbViewNode *sub = NULL;
    assert_errno (fb_view_mkdir (fx->view, &fx->caller, ws, "sub", 0755, &sub, NULL), 0);
    assert_errno (fb_view_rename (fx->view, &fx->caller, ws, "a", sub,
                                  "a-with-a-name-long-enough-to-take-the-chain-below-it-past-the-limit-of-the-view", 0),
                  0);
    fb_view_node_unref (sub);
  }
  /* the node the view still holds at the bottom is now past the limit:
   * stat works, nothing else, and nothing below it is looked up */
  assert_true (fb_view_node_is_synthetic (deep) == false);
  path = fb_view_node_dup_path (deep);
  if (!g_str_has_prefix (path, "\u2026/"))
    fail_msg ("the path past the limit: %.80s... (%zu bytes)", path, strlen (path));
  assert_true (strlen (path) <= FB_VIEW_PATH_MAX + 3);
  assert_errno (fb_view_opendir (fx->view, &fx->caller, deep, &dir, NULL), -EACCES);
  assert_errno (fb_view_lookup (fx->view, &fx->caller, deep, "x", &child, NULL), -ENAMETOOLONG);
  assert_errno (fb_view_mkdir (fx->view, &fx->caller, deep, "x", 0755, &child, NULL), -ENAMETOOLONG);

  /* moved back, it is what it was */
  {
    g_autoptr (FbViewNode) sub = fx_node (fx, "/ws/sub");
    assert_errno (fb_view_rename (fx->view, &fx->caller, sub,
                                  "a-with-a-name-long-enough-to-take-the-chain-below-it-past-the-limit-of-the-view", ws,
                                  "a", 0),
                  0);
  }
  g_clear_pointer (&path, g_free);
  path = fb_view_node_dup_path (deep);
  assert_true (g_str_has_prefix (path, vws));
  {
    FbPolicyDecision d;
    fb_view_node_get_decision (deep, &d);
    assert_int_equal (d.access, FB_POLICY_ACCESS_WRITE);
  }
}

/* Nodes below the root's way to ws, in a view of its own. */
static guint
count_to_ws (Fx *fx)
{
  g_autoptr (FbViewNode) ws = NULL;
  guint n;

  start_with (fx, 0);
  ws = fx_node (fx, "/ws");
  n = fb_view_count_nodes (fx->view);
  g_clear_pointer (&ws, fb_view_node_unref);
  fb_view_unref (g_steal_pointer (&fx->view));
  fb_policy_unref (g_steal_pointer (&fx->policy));
  return n;
}

static void
test_node_budget (void **state)
{
  Fx *fx = *state;
  g_autoptr (FbViewNode) ws = NULL;
  g_autoptr (GPtrArray) held = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);
  FbViewNode *node = NULL;
  TestEvent *e;
  guint base;

  for (int i = 0; i < 10; i++)
    {
      g_autofree char *rel = g_strdup_printf ("host/ws/f%d", i);
      write_host (fx, rel, "x\n");
    }
  base = count_to_ws (fx);
  /* room for five names below ws */
  start_with (fx, base + 5);
  assert_int_equal (fb_view_get_node_max (fx->view), base + 5);
  ws = fx_node (fx, "/ws");
  for (int i = 0; i < 5; i++)
    {
      g_autofree char *name = g_strdup_printf ("f%d", i);
      assert_errno (fb_view_lookup (fx->view, &fx->caller, ws, name, &node, NULL), 0);
      g_ptr_array_add (held, node);
    }
  /* the sixth waits until the kernel forgets some: refused and logged */
  assert_errno (fb_view_lookup (fx->view, &fx->caller, ws, "f5", &node, NULL), -ENOMEM);
  e = fx_find_event (fx, "lookup", "/ws/f5");
  assert_non_null (e);
  assert_int_equal (e->decision, FB_DECISION_DENY);
  assert_int_equal (e->err, ENOMEM);
  assert_non_null (strstr (e->why, "names in memory"));
  /* names known already are still found */
  assert_errno (fb_view_lookup (fx->view, &fx->caller, ws, "f0", &node, NULL), 0);
  fb_view_node_unref (node);
  /* forgotten, they make room */
  g_ptr_array_set_size (held, 0);
  assert_errno (fb_view_lookup (fx->view, &fx->caller, ws, "f5", &node, NULL), 0);
  fb_view_node_unref (node);
}

TEST_DEFINE_MAIN (NULL, NULL, FX_TEST (test_moved_past_the_limit), FX_TEST (test_node_budget))
