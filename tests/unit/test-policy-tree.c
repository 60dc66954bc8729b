/* fusebox — what the view needs beyond an access: traversable ancestors and
 * their reachable children, mounts (private sources, host sources, identity
 * mounts under a mapped parent) and mounted children, and
 * fb_policy_subtree_has_rules (the rename guard). */
#include "tests/unit/test-policy-util.h"

static void
assert_list (const char *const *list, const char *expected)
{
  g_autofree char *got = NULL;

  assert_non_null (list);
  got = join_list (list);
  if (strcmp (got, expected) != 0)
    fail_msg ("list is [%s], expected [%s]", got, expected);
}

static const char tree_policy[] = "{ \"version\": 1, \"rules\": [\n"
                                  "  { \"path\": \"/etc/ssl/certs\", \"access\": \"read\", \"why\": \"certs\" },\n"
                                  "  { \"path\": \"/etc/hosts\", \"access\": \"read\", \"why\": \"hosts\" },\n"
                                  "  { \"path\": \"/etc/shadow\", \"access\": \"hide\", \"why\": \"shadow\" },\n"
                                  "  { \"path\": \"/srv\", \"access\": \"deny\", \"why\": \"srv\" },\n"
                                  "  { \"path\": \"/srv/a/b/c\", \"access\": \"deny\", \"why\": \"deep deny\" },\n"
                                  "  { \"path\": \"/srv/z\", \"access\": \"hide\", \"why\": \"z\" },\n"
                                  "  { \"path\": \"/ws\", \"access\": \"write\", \"why\": \"ws\" },\n"
                                  "  { \"path\": \"/ws/.git/hooks\", \"access\": \"read\", \"why\": \"hooks\" } ] }";

static void
test_traversable (void **state)
{
  g_autoptr (FbPolicy) policy = load_ok (tree_policy, NULL);
  FbPolicyDecision d;

  /* "/" has no rule: hidden, but it leads somewhere */
  fb_policy_decide (policy, "/", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_HIDE);
  assert_true (d.traversable);
  assert_list (d.reachable_children, "etc,srv,ws");

  fb_policy_decide (policy, "/etc", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_HIDE);
  assert_true (d.traversable);
  /* shadow is a hide rule: it leads nowhere */
  assert_list (d.reachable_children, "hosts,ssl");

  fb_policy_decide (policy, "/etc/ssl", &d);
  assert_true (d.traversable);
  assert_list (d.reachable_children, "certs");

  fb_policy_decide (policy, "/etc/ssl/certs", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_READ);
  assert_false (d.traversable);
  assert_list (d.reachable_children, "");

  /* a denied directory with a deny rule deep below: deny is visible */
  fb_policy_decide (policy, "/srv", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_DENY);
  assert_true (d.traversable);
  assert_list (d.reachable_children, "a");
  fb_policy_decide (policy, "/srv/a/b", &d);
  assert_true (d.traversable);
  assert_list (d.reachable_children, "c");
  fb_policy_decide (policy, "/srv/z", &d);
  assert_false (d.traversable);

  /* not traversable: a path below the trie, a hidden leaf */
  fb_policy_decide (policy, "/usr/lib", &d);
  assert_false (d.traversable);
  assert_null (d.priv_node);
  assert_list (d.reachable_children, "");
  fb_policy_decide (policy, "/etc/shadow", &d);
  assert_false (d.traversable);

  /* a protected name hides .git, but its hooks are read: .git is traversable */
  fb_policy_decide (policy, "/ws/.git", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_HIDE);
  assert_int_equal (d.rule->kind, FB_POLICY_RULE_PROTECTED);
  assert_true (d.traversable);
  assert_list (d.reachable_children, "hooks");
  fb_policy_decide (policy, "/ws/.git/hooks/pre-commit", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_READ);
  fb_policy_decide (policy, "/ws/.git/config", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_HIDE);

  /* a visible directory is never "traversable": it lists everything */
  fb_policy_decide (policy, "/ws", &d);
  assert_false (d.traversable);
}

static const char mount_policy[] =
  "{ \"version\": 1, \"rules\": [\n"
  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
  "  { \"path\": \"/home\", \"access\": \"hide\", \"why\": \"homes\" },\n"
  "  { \"path\": \"/home/u\", \"access\": \"write\", \"source\": \"private\", "
  "\"why\": \"private home\" },\n"
  "  { \"path\": \"/home/u/ws\", \"access\": \"write\", \"why\": \"workspace\" },\n"
  "  { \"path\": \"/home/u/ws/deep\", \"access\": \"read\", \"why\": \"same host\" },\n"
  "  { \"path\": \"/home/u/.cache\", \"access\": \"read\", \"why\": \"cache\" },\n"
  "  { \"path\": \"/home/u/.ssh\", \"access\": \"hide\", \"why\": \"no mount\" },\n"
  "  { \"path\": \"/data\", \"access\": \"read\", \"source\": \"/srv/data\", "
  "\"why\": \"data\" },\n"
  "  { \"path\": \"/data/in\", \"access\": \"write\", \"why\": \"inbox\" },\n"
  "  { \"path\": \"/usr/local\", \"access\": \"write\", \"why\": \"same path\" },\n"
  "  { \"path\": \"/x%y\", \"access\": \"write\", \"source\": \"private\", "
  "\"why\": \"escaping\" } ] }";

static void
test_mounts (void **state)
{
  g_autoptr (FbPolicy) policy = load_ok (mount_policy, &test_vars);
  const FbPolicyMount *mounts;
  guint n = 0;
  FbPolicyDecision d;

  mounts = fb_policy_get_mounts (policy, &n);
  /* "/", /data, /data/in, /home/u, /home/u/.cache, /home/u/ws, /x%y (preorder by name) */
  assert_int_equal (n, 7);
  for (guint i = 0; i < n; i++)
    assert_int_equal (mounts[i].id, i);
  assert_string_equal (mounts[0].view_path, "/");
  assert_string_equal (mounts[0].host_path, "/");
  assert_false (mounts[0].is_private);

  assert_string_equal (mounts[1].view_path, "/data");
  assert_string_equal (mounts[1].host_path, "/srv/data");
  assert_false (mounts[1].is_private);
  /* /data/in would show /srv/data/in: it takes its own identity mount */
  assert_string_equal (mounts[2].view_path, "/data/in");
  assert_string_equal (mounts[2].host_path, "/data/in");

  assert_string_equal (mounts[3].view_path, "/home/u");
  assert_string_equal (mounts[3].host_path, "/run/fusebox/r1/private/%2Fhome%2Fu");
  assert_true (mounts[3].is_private);
  assert_string_equal (mounts[3].rule->why, "private home");
  /* under the private HOME, rules without source show the host's path */
  assert_string_equal (mounts[4].view_path, "/home/u/.cache");
  assert_string_equal (mounts[4].host_path, "/home/u/.cache");
  assert_string_equal (mounts[5].view_path, "/home/u/ws");
  assert_string_equal (mounts[5].host_path, "/home/u/ws");
  assert_false (mounts[5].is_private);
  /* "%" is escaped too, so "/x%y" and "/x/y" cannot collide */
  assert_string_equal (mounts[6].host_path, "/run/fusebox/r1/private/%2Fx%25y");

  fb_policy_decide (policy, "/", &d);
  assert_true (d.is_mount_point);
  assert_ptr_equal (d.mount, &mounts[0]);
  assert_list (d.mounted_children, "data,home,x%y"); /* /usr/local is no mount */

  fb_policy_decide (policy, "/home", &d);
  assert_false (d.is_mount_point);
  assert_ptr_equal (d.mount, &mounts[0]);
  assert_list (d.mounted_children, "u");
  assert_true (d.traversable);
  assert_list (d.reachable_children, "u");

  fb_policy_decide (policy, "/home/u", &d);
  assert_true (d.is_mount_point);
  assert_ptr_equal (d.mount, &mounts[3]);
  assert_list (d.mounted_children, ".cache,ws");
  /* a hidden path under the private HOME needs no host directory: no mount */
  fb_policy_decide (policy, "/home/u/.ssh", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_HIDE);
  assert_false (d.is_mount_point);
  assert_ptr_equal (d.mount, &mounts[3]);

  fb_policy_decide (policy, "/home/u/notes.txt", &d);
  assert_false (d.is_mount_point);
  assert_ptr_equal (d.mount, &mounts[3]);

  fb_policy_decide (policy, "/home/u/ws/src/main.c", &d);
  assert_ptr_equal (d.mount, &mounts[5]);
  assert_false (d.is_mount_point);
  /* /home/u/ws/deep is the host's path already under /home/u/ws: no mount */
  fb_policy_decide (policy, "/home/u/ws/deep", &d);
  assert_false (d.is_mount_point);
  assert_ptr_equal (d.mount, &mounts[5]);
  fb_policy_decide (policy, "/home/u/ws", &d);
  assert_list (d.mounted_children, "");

  /* /usr/local shows host /usr/local under "/": no mount, but no list entry either */
  fb_policy_decide (policy, "/usr", &d);
  assert_list (d.mounted_children, "");
  fb_policy_decide (policy, "/usr/local", &d);
  assert_false (d.is_mount_point);
  assert_ptr_equal (d.mount, &mounts[0]);
}

/* Without ${RUN}, private mounts exist but have no host directory. */
static void
test_private_without_run (void **state)
{
  FbPolicyVars vars = test_vars;
  g_autoptr (FbPolicy) policy = NULL;
  const FbPolicyMount *mounts;
  guint n = 0;

  vars.run = NULL;
  policy = load_ok (mount_policy, &vars);
  mounts = fb_policy_get_mounts (policy, &n);
  assert_int_equal (n, 7);
  assert_string_equal (mounts[3].view_path, "/home/u");
  assert_null (mounts[3].host_path);
  assert_true (mounts[3].is_private);
  /* below an unknown host directory, a path rule is its own mount */
  assert_string_equal (mounts[4].host_path, "/home/u/.cache");
}

static void
test_root_source (void **state)
{
  g_autoptr (FbPolicy) policy =
    load_ok ("{ \"version\": 1, \"rules\": [ { \"path\": \"/\", \"access\": \"write\", \"source\": \"private\", "
             "\"why\": \"an empty root\" }, { \"path\": \"/usr\", \"access\": \"read\", \"why\": \"tools\" } ] }",
             &test_vars);
  const FbPolicyMount *mounts;
  guint n = 0;
  FbPolicyDecision d;

  mounts = fb_policy_get_mounts (policy, &n);
  assert_int_equal (n, 2);
  assert_string_equal (mounts[0].host_path, "/run/fusebox/r1/private/%2F");
  assert_true (mounts[0].is_private);
  assert_string_equal (mounts[1].view_path, "/usr");
  assert_string_equal (mounts[1].host_path, "/usr");
  fb_policy_decide (policy, "/usr/bin", &d);
  assert_ptr_equal (d.mount, &mounts[1]);
}

static void
test_private_dir_name (void **state)
{
  g_autofree char *a = fb_policy_private_dir_name ("/home/u");
  g_autofree char *b = fb_policy_private_dir_name ("/home%2Fu");
  g_autoptr (GString) longpath = g_string_new (NULL);
  g_autofree char *c = NULL;

  assert_string_equal (a, "%2Fhome%2Fu");
  assert_string_equal (b, "%2Fhome%252Fu");
  for (guint i = 0; i < 100; i++)
    g_string_append (longpath, "/abc");
  c = fb_policy_private_dir_name (longpath->str);
  assert_int_equal (strlen (c), 65);
  assert_int_equal (c[0], '_');
}

static const char rename_policy[] = "{ \"version\": 1, \"rules\": [\n"
                                    "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
                                    "  { \"path\": \"/ws\", \"access\": \"write\", \"why\": \"ws\" },\n"
                                    "  { \"path\": \"/ws/keep/secret\", \"access\": \"deny\", \"why\": \"s\" },\n"
                                    "  { \"path\": \"/opt/secret\", \"access\": \"deny\", \"why\": \"o\" },\n"
                                    "  { \"glob\": \"/var/build/*.o\", \"access\": \"hide\", \"why\": \"objs\" },\n"
                                    "  { \"glob\": \"/ws/**/tmp\", \"access\": \"hide\", \"why\": \"tmps\" },\n"
                                    "  { \"glob\": \"*.pem\", \"access\": \"deny\", \"why\": \"keys\" },\n"
                                    "  { \"glob\": \"**/dist\", \"access\": \"hide\", \"why\": \"dist\" } ] }";

static bool
has_rules (FbPolicy *policy, const char *path)
{
  FbPolicyDecision d;

  fb_policy_decide (policy, path, &d);
  return fb_policy_subtree_has_rules (policy, &d, path);
}

static void
test_subtree_has_rules (void **state)
{
  g_autoptr (FbPolicy) policy = load_ok (rename_policy, NULL);

  /* literal rules below */
  assert_true (has_rules (policy, "/"));
  assert_true (has_rules (policy, "/ws"));
  assert_true (has_rules (policy, "/ws/keep"));
  assert_true (has_rules (policy, "/opt"));
  assert_false (has_rules (policy, "/opt/secret")); /* the rule is at it, not below */
  assert_false (has_rules (policy, "/opt/secret/x"));
  /* the literal is below /ws/keep, and "/ws/ ** /tmp" reaches below it */
  assert_true (has_rules (policy, "/ws/keep/secret"));
  /* a glob anchored through or at the directory */
  assert_true (has_rules (policy, "/var"));
  assert_true (has_rules (policy, "/var/build"));
  assert_false (has_rules (policy, "/var/build/a.o")); /* nothing can match below a.o */
  assert_false (has_rules (policy, "/var/other"));
  /* "/ws/ ** /tmp" can match below any directory under /ws */
  assert_true (has_rules (policy, "/ws/src"));
  assert_true (has_rules (policy, "/ws/src/deep/er"));
  /* outside every anchored glob and literal rule: floating globs follow the file */
  assert_false (has_rules (policy, "/usr"));
  assert_false (has_rules (policy, "/usr/share/doc"));
  assert_false (has_rules (policy, "/other/keys"));
  /* a decision below the trie (priv_node NULL) still sees anchored globs */
  assert_true (has_rules (policy, "/ws/a/b/c"));
}

/* Decisions point into the policy: they stay valid while a reference is
 * held, whoever dropped theirs. */
static void
test_refcount (void **state)
{
  FbPolicy *policy = load_ok (mount_policy, &test_vars);
  FbPolicy *second = fb_policy_ref (policy);
  FbPolicyDecision d;

  assert_ptr_equal (second, policy);
  fb_policy_decide (policy, "/home/u/ws", &d);
  fb_policy_unref (policy);
  assert_string_equal (d.rule->why, "workspace");
  assert_string_equal (d.mount->host_path, "/home/u/ws");
  fb_policy_unref (second);
  fb_policy_unref (NULL); /* accepts NULL */
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_traversable), cmocka_unit_test (test_mounts),
                  cmocka_unit_test (test_private_without_run), cmocka_unit_test (test_root_source),
                  cmocka_unit_test (test_private_dir_name), cmocka_unit_test (test_subtree_has_rules),
                  cmocka_unit_test (test_refcount))
