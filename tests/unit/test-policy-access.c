/* fusebox — the policy's vocabulary tables (policy-access.c): every access
 * and rule kind has a unique name that reads back to it, the two orders
 * (precedence, restrictiveness) are the documented ones, and what the other
 * columns say matches what policies decide. */
#include "tests/unit/test-policy-util.h"
#include "tests/unit/test-table-util.h"
#include "tests/lib/test-util.h"

/* A: the name round trip, for every row and nothing else. */
static void
test_access_names (void **state)
{
  assert_string_table (fb_policy_access, FbPolicyAccess, fb_policy_access_table, FB_POLICY_ACCESS_N);
  assert_false (fb_policy_access_from_string ("Read", NULL));
  /* the network's names (FB_DEFINE_STRING_TABLE too) */
  {
    FbPolicyNetwork n = FB_POLICY_NETWORK_NONE;

    assert_string_equal (fb_policy_network_to_string (FB_POLICY_NETWORK_NONE), "none");
    assert_string_equal (fb_policy_network_to_string (FB_POLICY_NETWORK_HOST), "host");
    assert_true (fb_policy_network_from_string ("host", &n));
    assert_int_equal (n, FB_POLICY_NETWORK_HOST);
    assert_false (fb_policy_network_from_string ("all", &n));
  }
  /* out of the enum: the narrowest row */
  assert_ptr_equal (fb_policy_access_info ((FbPolicyAccess)FB_POLICY_ACCESS_N),
                    fb_policy_access_info (FB_POLICY_ACCESS_HIDE));
}

/* The accesses in the order fusebox-policy(5) gives for equal specificity
 * ("hide beats deny, which beats write, which beats read"): the names
 * after "the best of them decides:" in its PRECEDENCE section. */
static GPtrArray *
documented_precedence (void)
{
  const char *root = g_getenv ("FUSEBOX_SOURCE_ROOT");
  g_autofree char *path = g_build_filename (root != NULL ? root : ".", "docs", "fusebox-policy.5", NULL);
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  GPtrArray *order = g_ptr_array_new_with_free_func (g_free);
  const char *start;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    fail_msg ("cannot read %s (FUSEBOX_SOURCE_ROOT names the source tree)", path);
  start = strstr (text, "the best of them decides:");
  assert_non_null (start);
  lines = g_strsplit (start, "\n", 0);
  for (guint i = 1; lines[i] != NULL && !g_str_has_prefix (lines[i], "(so that"); i++)
    {
      FbPolicyAccess a;
      g_auto (GStrv) words = g_strsplit_set (lines[i], " ,", 0);

      if (words[0] != NULL && words[1] != NULL && (!strcmp (words[0], ".B") || !strcmp (words[0], ".BR")) &&
          fb_policy_access_from_string (words[1], &a))
        g_ptr_array_add (order, g_strdup (words[1]));
    }
  return order;
}

/* B: precedence decides at equal specificity, in the documented order;
 * a policy with one rule per access at one path shows it. */
static void
test_precedence_documented (void **state)
{
  g_autoptr (GPtrArray) order = documented_precedence ();

  assert_int_equal (order->len, FB_POLICY_ACCESS_N);
  for (guint i = 1; i < order->len; i++)
    {
      FbPolicyAccess higher;
      FbPolicyAccess lower;

      assert_true (fb_policy_access_from_string (order->pdata[i - 1], &higher));
      assert_true (fb_policy_access_from_string (order->pdata[i], &lower));
      if (fb_policy_access_precedence (higher) <= fb_policy_access_precedence (lower))
        fail_msg ("fusebox-policy(5) says %s beats %s at equal specificity; the table does not",
                  (char *)order->pdata[i - 1], (char *)order->pdata[i]);
    }
  assert_string_equal (order->pdata[0], "hide");
  assert_string_equal (order->pdata[1], "deny");
  assert_string_equal (order->pdata[2], "write");
  assert_string_equal (order->pdata[3], "read");

  /* every pair at one path: the higher precedence decides, whatever the order of the rules */
  for (guint i = 0; i < FB_POLICY_ACCESS_N; i++)
    for (guint j = 0; j < FB_POLICY_ACCESS_N; j++)
      {
        const char *a = fb_policy_access_to_string ((FbPolicyAccess)i);
        const char *b = fb_policy_access_to_string ((FbPolicyAccess)j);
        g_autofree char *text = NULL;
        g_autoptr (FbPolicy) policy = NULL;
        FbPolicyDecision d;
        FbPolicyAccess want;

        if (i == j)
          continue;
        text = g_strdup_printf ("{ \"version\": 1, \"protected_names\": {}, \"rules\": [\n"
                                "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
                                "  { \"path\": \"/x\", \"access\": \"%s\", \"why\": \"a\" },\n"
                                "  { \"path\": \"/x\", \"access\": \"%s\", \"why\": \"b\" } ] }",
                                a, b);
        policy = load_ok (text, &test_vars);
        fb_policy_decide (policy, "/x", &d);
        want = fb_policy_access_precedence ((FbPolicyAccess)i) > fb_policy_access_precedence ((FbPolicyAccess)j)
                 ? (FbPolicyAccess)i
                 : (FbPolicyAccess)j;
        assert_int_equal (d.access, want);
      }
}

/* C: restrictiveness (narrowing) is another order: hide, deny, read, write,
 * most restrictive first (policy.h); every precedence and restrictiveness
 * value is used once. */
static void
test_restrictiveness (void **state)
{
  static const FbPolicyAccess order[] = {
    FB_POLICY_ACCESS_HIDE,
    FB_POLICY_ACCESS_DENY,
    FB_POLICY_ACCESS_READ,
    FB_POLICY_ACCESS_WRITE,
  };

  G_STATIC_ASSERT (G_N_ELEMENTS (order) == FB_POLICY_ACCESS_N);
  for (guint i = 0; i < G_N_ELEMENTS (order); i++)
    for (guint j = 0; j < G_N_ELEMENTS (order); j++)
      {
        FbPolicyAccess narrower = order[MIN (i, j)];

        assert_int_equal (fb_policy_access_narrow (order[i], order[j]), narrower);
        if (i != j)
          {
            assert_int_not_equal (fb_policy_access_table[i].restrictiveness, fb_policy_access_table[j].restrictiveness);
            assert_int_not_equal (fb_policy_access_table[i].precedence, fb_policy_access_table[j].precedence);
          }
      }
}

/* D: what each access lets the sandbox do, and that a protected name may
 * only have an access that protects something. */
static void
test_columns (void **state)
{
  g_autofree char *write_msg = NULL;
  g_autofree char *unknown_msg = NULL;

  for (guint i = 0; i < FB_POLICY_ACCESS_N; i++)
    {
      const FbPolicyAccessInfo *info = &fb_policy_access_table[i];

      /* writing implies reading implies seeing */
      if (info->writable)
        assert_true (info->readable);
      if (info->readable)
        assert_true (info->visible);
      /* what grants nothing but a name protects it; what lets write protects nothing */
      assert_true ((info->protects == NULL) == info->writable);
      assert_int_equal (fb_policy_access_visible ((FbPolicyAccess)i), info->visible);
    }
  assert_false (fb_policy_access_info (FB_POLICY_ACCESS_HIDE)->visible);
  assert_true (fb_policy_access_info (FB_POLICY_ACCESS_DENY)->visible);
  assert_false (fb_policy_access_info (FB_POLICY_ACCESS_DENY)->readable);
  assert_false (fb_policy_access_info (FB_POLICY_ACCESS_READ)->writable);
  assert_true (fb_policy_access_info (FB_POLICY_ACCESS_WRITE)->writable);

  write_msg = load_error ("{ \"version\": 1, \"protected_names\": { \".env\": \"write\" }, \"rules\": [] }", &test_vars,
                          FB_POLICY_ERROR_VALUE);
  assert_non_null (strstr (write_msg, "\"write\" does not protect anything"));
  unknown_msg = load_error ("{ \"version\": 1, \"protected_names\": { \".env\": \"nope\" }, \"rules\": [] }",
                            &test_vars, FB_POLICY_ERROR_VALUE);
  assert_non_null (strstr (unknown_msg, "unknown access \"nope\"; valid: hide, deny, read"));
}

/* E: rule kinds: unique names; the policy's own rules are numbered. */
static void
test_rule_kinds (void **state)
{
  FbPolicyRule rule = { .index = 7 };
  char buf[16];

  for (guint i = 0; i < FB_POLICY_RULE_KIND_N; i++)
    {
      assert_non_null (fb_policy_rule_kind_table[i].name);
      for (guint j = 0; j < i; j++)
        assert_string_not_equal (fb_policy_rule_kind_table[i].name, fb_policy_rule_kind_table[j].name);
      rule.kind = (FbPolicyRuleKind)i;
      if (fb_policy_rule_kind_table[i].numbered)
        assert_string_equal (fb_policy_rule_name (&rule, buf), "7");
      else
        assert_string_equal (fb_policy_rule_name (&rule, buf), fb_policy_rule_kind_table[i].name);
    }
  assert_string_equal (fb_policy_rule_kind_info (FB_POLICY_RULE_PATH)->name, "path");
  assert_string_equal (fb_policy_rule_kind_info (FB_POLICY_RULE_GLOB)->name, "glob");
  assert_string_equal (fb_policy_rule_kind_info (FB_POLICY_RULE_PROTECTED)->name, "protected");
  assert_string_equal (fb_policy_rule_kind_info (FB_POLICY_RULE_DEFAULT)->name, "default");
  assert_string_equal (fb_policy_rule_kind_info (FB_POLICY_RULE_FUSEBOX)->name, "fusebox");
  assert_true (fb_policy_rule_kind_info (FB_POLICY_RULE_PATH)->numbered);
  assert_true (fb_policy_rule_kind_info (FB_POLICY_RULE_GLOB)->numbered);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_access_names), cmocka_unit_test (test_precedence_documented),
                  cmocka_unit_test (test_restrictiveness), cmocka_unit_test (test_columns),
                  cmocka_unit_test (test_rule_kinds))
