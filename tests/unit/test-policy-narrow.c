/* fusebox — fb_policy_narrow: a call's sandbox on top of the server's
 * policy.  Every decision is the narrower of both sides, the deciding rule
 * the more restrictive side's; mounts are the base's; traversal follows the
 * combination; decide == a chain of decide_child holds as for any policy. */
#include "tests/unit/test-policy-util.h"

static FbPolicy *
server_policy (void)
{
  g_autoptr (GError) error = NULL;
  FbPolicy *policy = fb_policy_load_spec ("builtin:default", &test_vars, &error);

  if (policy == NULL)
    fail_msg ("%s", error->message);
  return policy;
}

static FbPolicy *
narrowed (FbPolicy *base, const char *text)
{
  g_autoptr (FbPolicy) narrow = load_ok (text, &test_vars);

  return narrow_ok (base, narrow);
}

static void
expect (FbPolicy *policy, const char *path, FbPolicyAccess access, const char *why)
{
  FbPolicyDecision d;

  fb_policy_decide (policy, path, &d);
  if (d.access != access || strcmp (d.rule->why, why) != 0)
    fail_msg ("%s: %s (%s), expected %s (%s)", path, fb_policy_access_to_string (d.access), d.rule->why,
              fb_policy_access_to_string (access), why);
}

static const char call_sandbox[] =
  "{ \"version\": 1, \"network\": \"host\", \"rules\": [\n"
  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"call: read everything\" },\n"
  "  { \"path\": \"${WORKSPACE}\", \"access\": \"write\", \"why\": \"call: ws\" },\n"
  "  { \"path\": \"${WORKSPACE}/secret\", \"access\": \"deny\", \"why\": \"call: no\" },\n"
  "  { \"glob\": \"*.pem\", \"access\": \"deny\", \"why\": \"call: keys\" } ] }";

static void
test_narrower_wins (void **state)
{
  g_autoptr (FbPolicy) base = server_policy ();
  g_autoptr (FbPolicy) p = narrowed (base, call_sandbox);

  /* both read: the base's rule on a tie */
  expect (p, "/usr/bin/sh", FB_POLICY_ACCESS_READ, "system files and tools");
  expect (p, "/home/u/ws/src/main.c", FB_POLICY_ACCESS_WRITE, "the workspace");
  expect (p, "/home/u/ws/secret", FB_POLICY_ACCESS_DENY, "call: no");
  expect (p, "/home/u/ws/secret/x", FB_POLICY_ACCESS_DENY, "call: no");
  expect (p, "/home/u/ws/key.pem", FB_POLICY_ACCESS_DENY, "call: keys");
  /* the base writes /tmp and HOME; the call only reads there */
  expect (p, "/tmp/x", FB_POLICY_ACCESS_READ, "call: read everything");
  expect (p, "/home/u/.bashrc", FB_POLICY_ACCESS_READ, "call: read everything");
  /* the call can't widen: the base hides other homes and .git */
  expect (p, "/home/other", FB_POLICY_ACCESS_HIDE, "other people's files");
  expect (p, "/home/u/ws/.git", FB_POLICY_ACCESS_HIDE,
          "protected name .git: version-control and agent metadata is never exposed");
  /* network: none unless both say host */
  assert_int_equal (fb_policy_get_network (p), FB_POLICY_NETWORK_NONE);
  assert_string_equal (fb_policy_get_origin (p), "builtin:default narrowed by test.json");
}

static void
test_mounts_are_the_base_s (void **state)
{
  g_autoptr (FbPolicy) base = server_policy ();
  g_autoptr (FbPolicy) p = narrowed (base, call_sandbox);
  guint nb = 0;
  guint np = 0;
  const FbPolicyMount *mb = fb_policy_get_mounts (base, &nb);
  const FbPolicyMount *mp = fb_policy_get_mounts (p, &np);
  FbPolicyDecision d;

  assert_int_equal (nb, np);
  assert_ptr_equal (mb, mp);
  fb_policy_decide (p, "/home/u/ws", &d);
  assert_true (d.is_mount_point);
  assert_string_equal (d.mount->host_path, "/home/u/ws");
  fb_policy_decide (p, "/tmp/a", &d);
  assert_true (d.mount->is_private);
  fb_policy_decide (p, "/", &d);
  assert_string_equal (d.mounted_children[0], "home");
  assert_ptr_equal (fb_policy_get_rules (p, NULL), fb_policy_get_rules (base, NULL));
}

/* The call sees only its workspace: hidden ancestors list only the way to it. */
static void
test_traversal_follows_the_combination (void **state)
{
  g_autoptr (FbPolicy) base = server_policy ();
  g_autoptr (FbPolicy) p = narrowed (
    base, "{ \"version\": 1, \"rules\": [ { \"path\": \"${WORKSPACE}/src\", \"access\": \"write\", "
          "\"why\": \"call: src only\" }, { \"path\": \"/usr/share/doc\", \"access\": \"read\", \"why\": "
          "\"call: docs\" }, { \"path\": \"/home/other/x\", \"access\": \"read\", \"why\": \"call: x\" } ] }");
  FbPolicyDecision d;
  g_autofree char *list = NULL;

  fb_policy_decide (p, "/", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_HIDE);
  assert_true (d.traversable);
  list = join_list (d.reachable_children);
  /* /home/other/x is hidden by the base: it does not make "home/other" reachable,
   * but HOME's way to src does */
  assert_string_equal (list, "home,usr");
  g_clear_pointer (&list, g_free);

  fb_policy_decide (p, "/home", &d);
  assert_true (d.traversable);
  list = join_list (d.reachable_children);
  assert_string_equal (list, "u");
  g_clear_pointer (&list, g_free);

  fb_policy_decide (p, "/home/u/ws", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_HIDE);
  assert_true (d.traversable);
  list = join_list (d.reachable_children);
  assert_string_equal (list, "src");

  expect (p, "/home/u/ws/src/a.c", FB_POLICY_ACCESS_WRITE, "the workspace");
  expect (p, "/home/u/ws/README", FB_POLICY_ACCESS_HIDE, "no rule grants this path");
  expect (p, "/usr/share/doc/x", FB_POLICY_ACCESS_READ, "system files and tools");
  expect (p, "/usr/bin/sh", FB_POLICY_ACCESS_HIDE, "no rule grants this path");
  fb_policy_decide (p, "/home/other", &d);
  assert_false (d.traversable);
}

static void
check_chains (FbPolicy *policy, guint seed)
{
  static const char *const vocab[] = { "home",  "u",   "ws",    "src",   ".git", "secret", "tmp",    "usr",
                                       "share", "doc", "a.pem", "other", "x",    "bin",    ".codex", "y" };

  assert_chains_agree (policy, seed, 3000, 10, vocab, G_N_ELEMENTS (vocab));
}

static void
test_decide_equals_chain (void **state)
{
  g_autoptr (FbPolicy) base = server_policy ();
  g_autoptr (FbPolicy) a = narrowed (base, call_sandbox);
  g_autoptr (FbPolicy) b = narrowed (
    base, "{ \"version\": 1, \"protected_names\": { \".codex\": \"deny\" }, \"rules\": [ { \"path\": "
          "\"${WORKSPACE}/src\", \"access\": \"write\", \"why\": \"s\" }, { \"glob\": \"/home/u/**/x\", \"access\": "
          "\"hide\", \"why\": \"x\" }, { \"path\": \"/usr/share\", \"access\": \"read\", \"why\": \"d\" } ] }");

  check_chains (a, 11);
  check_chains (b, 12);
}

static void
test_refusals (void **state)
{
  g_autoptr (FbPolicy) base = server_policy ();
  g_autoptr (FbPolicy) with_source =
    load_ok ("{ \"version\": 1, \"rules\": [ { \"path\": \"/\", \"access\": \"read\", \"why\": \"r\" },\n"
             "  { \"path\": \"/data\", \"access\": \"read\", \"source\": \"/srv\", \"why\": \"remap\" } ] }",
             &test_vars);
  g_autoptr (FbPolicy) plain = load_ok (call_sandbox, &test_vars);
  g_autoptr (FbPolicy) once = NULL;
  g_autoptr (FbPolicy) twice = NULL;
  g_autoptr (FbPolicy) result = NULL;
  g_autoptr (GError) error = NULL;

  result = fb_policy_narrow (base, with_source, &error);
  assert_null (result);
  assert_true (g_error_matches (error, FB_POLICY_ERROR, FB_POLICY_ERROR_VALUE));
  assert_string_equal (error->message, "test.json: rules[1].source: a narrowing policy can't give a source (it may "
                                       "only take access away, not show other host directories); remove \"source\"");
  g_clear_error (&error);

  once = fb_policy_narrow (base, plain, &error);
  assert_non_null (once);
  twice = fb_policy_narrow (once, plain, &error);
  assert_null (twice);
  assert_prefix (error->message, "builtin:default narrowed by test.json: a narrowed policy can't be narrowed again");
}

static void
test_network_protected_subtree (void **state)
{
  g_autoptr (FbPolicy) host_base = load_ok ("{ \"version\": 1, \"network\": \"host\", \"protected_names\": { "
                                            "\".git\": \"read\" }, \"rules\": [ { \"path\": \"/\", \"access\": "
                                            "\"write\", \"why\": \"w\" } ] }",
                                            &test_vars);
  g_autoptr (FbPolicy) host_call = load_ok ("{ \"version\": 1, \"network\": \"host\", \"protected_names\": { "
                                            "\".git\": \"hide\", \".env\": \"deny\" }, \"rules\": [ { \"path\": "
                                            "\"/\", \"access\": \"write\", \"why\": \"w\" }, { \"path\": \"/a/b/c\", "
                                            "\"access\": \"read\", \"why\": \"deep\" } ] }",
                                            &test_vars);
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) p = narrow_ok (host_base, host_call);
  FbPolicyAccess access = FB_POLICY_ACCESS_WRITE;
  FbPolicyDecision d;
  g_autofree char *json = NULL;
  g_autoptr (FbPolicy) reloaded = NULL;

  assert_int_equal (fb_policy_get_network (p), FB_POLICY_NETWORK_HOST);
  assert_true (fb_policy_is_protected_name (p, ".git", &access));
  assert_int_equal (access, FB_POLICY_ACCESS_HIDE);
  assert_true (fb_policy_is_protected_name (p, ".env", &access));
  assert_int_equal (access, FB_POLICY_ACCESS_DENY);
  assert_false (fb_policy_is_protected_name (p, ".codex", NULL));
  expect (p, "/x/.git", FB_POLICY_ACCESS_HIDE,
          "protected name .git: version-control and agent metadata is never exposed");

  /* a literal rule below, on the narrowing side only, still guards renames */
  fb_policy_decide (p, "/a", &d);
  assert_true (fb_policy_subtree_has_rules (p, &d, "/a"));
  fb_policy_decide (p, "/q", &d);
  assert_false (fb_policy_subtree_has_rules (p, &d, "/q"));

  /* to_json shows both sides and does not load as one policy */
  json = fb_policy_to_json (p);
  assert_contains (json, "\"narrowed\"");
  reloaded = fb_policy_load_data (json, -1, "narrowed.json", &test_vars, &error);
  assert_null (reloaded);
}

/* The narrowed policy holds both sides: dropping them is safe. */
static void
test_lifetime (void **state)
{
  FbPolicy *base = server_policy ();
  FbPolicy *narrow = load_ok (call_sandbox, &test_vars);
  g_autoptr (FbPolicy) p = narrow_ok (base, narrow);

  fb_policy_unref (base);
  fb_policy_unref (narrow);
  expect (p, "/home/u/ws/secret", FB_POLICY_ACCESS_DENY, "call: no");
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_narrower_wins), cmocka_unit_test (test_mounts_are_the_base_s),
                  cmocka_unit_test (test_traversal_follows_the_combination),
                  cmocka_unit_test (test_decide_equals_chain), cmocka_unit_test (test_refusals),
                  cmocka_unit_test (test_network_protected_subtree), cmocka_unit_test (test_lifetime))
