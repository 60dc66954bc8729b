/* fusebox — deciding names where the host folds them
 * (fb_policy_decide_child_folded, fb_policy_fold_name): a spelling that a
 * case-insensitive host resolves to a denied, hidden or protected name gets
 * that name's decision, whatever the disk holds; folded decisions never
 * widen one where the host may not fold; rules below a spelling follow it
 * only where the host is known to fold and the spellings differ by ASCII
 * case alone. */
#include "tests/unit/test-policy-util.h"

#include <locale.h>
#include <stdio.h>

static const char policy_text[] =
  "{ \"version\": 1, \"rules\": [\n"
  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"read everything\" },\n"
  "  { \"path\": \"${WORKSPACE}\", \"access\": \"write\", \"why\": \"ws\" },\n"
  "  { \"path\": \"${WORKSPACE}/secret-deny.txt\", \"access\": \"deny\", \"why\": \"secret-deny\" },\n"
  "  { \"path\": \"${WORKSPACE}/secret-hide.txt\", \"access\": \"hide\", \"why\": \"secret-hide\" },\n"
  "  { \"path\": \"${WORKSPACE}/private-dir\", \"access\": \"deny\", \"why\": \"private-dir\" },\n"
  "  { \"path\": \"${WORKSPACE}/docs/secret\", \"access\": \"deny\", \"why\": \"docs/secret\" },\n"
  "  { \"path\": \"${WORKSPACE}/caf\\u00e9\", \"access\": \"deny\", \"why\": \"cafe\" },\n"
  "  { \"path\": \"${WORKSPACE}/Foo\", \"access\": \"write\", \"why\": \"Foo\" },\n"
  "  { \"path\": \"${WORKSPACE}/foo\", \"access\": \"deny\", \"why\": \"foo\" },\n"
  "  { \"path\": \"${WORKSPACE}/Bar/x\", \"access\": \"deny\", \"why\": \"Bar/x\" },\n"
  "  { \"path\": \"${WORKSPACE}/bar/y\", \"access\": \"deny\", \"why\": \"bar/y\" },\n"
  "  { \"path\": \"${WORKSPACE}/ro\", \"access\": \"read\", \"why\": \"ro\" },\n"
  "  { \"path\": \"${WORKSPACE}/ro/Out\", \"access\": \"write\", \"why\": \"ro/Out\" },\n"
  "  { \"glob\": \"*.pem\", \"access\": \"deny\", \"why\": \"keys\" },\n"
  "  { \"glob\": \"/home/u/ws/build/*.key\", \"access\": \"hide\", \"why\": \"build keys\" } ] }";

/* PATH decided one component at a time, every directory folding (CERTAIN
 * or not) from FROM_DEPTH on, exactly above it. */
static void
decide_folded (FbPolicy *policy, const char *path, bool certain, FbPolicyDecision *ret)
{
  g_auto (GStrv) comps = g_strsplit (path + 1, "/", -1);
  g_autofree char *parent = g_strdup ("/");
  FbPolicyDecision d;

  fb_policy_decide (policy, "/", &d);
  for (guint i = 0; comps[i] != NULL; i++)
    {
      FbPolicyDecision next;
      char *joined;

      if (strncmp (parent, "/home/u/ws", 10) == 0)
        fb_policy_decide_child_folded (policy, &d, parent, comps[i], certain, &next);
      else
        fb_policy_decide_child (policy, &d, parent, comps[i], &next);
      d = next;
      joined =
        strcmp (parent, "/") == 0 ? g_strconcat ("/", comps[i], NULL) : g_strconcat (parent, "/", comps[i], NULL);
      g_free (parent);
      parent = joined;
    }
  *ret = d;
}

static void
expect (FbPolicy *policy, const char *path, bool certain, FbPolicyAccess access, const char *why)
{
  FbPolicyDecision d;

  decide_folded (policy, path, certain, &d);
  if (d.access != access || (why != NULL && strcmp (d.rule->why, why) != 0))
    fail_msg ("%s (%s): %s (%s), expected %s (%s)", path, certain ? "folds" : "may fold",
              fb_policy_access_to_string (d.access), d.rule->why, fb_policy_access_to_string (access),
              why != NULL ? why : "any rule");
}

static void
assert_same_key (const char *a, const char *b)
{
  g_autofree char *ka = fb_policy_fold_name (a);
  g_autofree char *kb = fb_policy_fold_name (b);

  if (strcmp (ka, kb) != 0)
    fail_msg ("\"%s\" folds to \"%s\", \"%s\" to \"%s\": a folding host takes them for one name", a, ka, b, kb);
}

static void
test_fold_keys (void **state)
{
  assert_same_key (".GIT", ".git");
  assert_same_key ("SECRET-DENY.TXT", "secret-deny.txt");
  assert_same_key ("Secret-Hide.txt", "secret-hide.txt");
  assert_same_key ("caf\xc3\xa9", "cafe\xcc\x81");         /* NFC and NFD */
  assert_same_key ("\xef\xac\x81le", "file");              /* the fi ligature */
  assert_same_key ("secret-deny.txt.", "secret-deny.txt"); /* vfat, NTFS, SMB strip trailing dots */
  assert_same_key ("secret-deny.txt  ", "secret-deny.txt");
  assert_same_key (".g\xe2\x80\x8cit", ".git"); /* U+200C, ignored by HFS+ (CVE-2014-9390) */
  assert_same_key (".g\xc4\xb1t", ".GIT");      /* dotless i upper-cases to I (NTFS, exFAT upcase) */
  assert_same_key ("stra\xc3\x9f"
                   "e",
                   "STRASSE");                /* full case folding */
  assert_same_key ("\xe2\x84\xaa", "k");      /* KELVIN SIGN */
  assert_same_key ("\xc9t\xe9", "\xe9T\xc9"); /* not UTF-8: Latin-1, as vfat's iso8859-1 */
  {
    g_autofree char *a = fb_policy_fold_name ("a");
    g_autofree char *b = fb_policy_fold_name ("b");
    assert_string_not_equal (a, b);
  }
}

static void
test_fold_keys_turkish_locale (void **state)
{
  /* g_utf8_strup would give "G\u0130T" for "git" here: the key must not
   * depend on the locale */
  const char *old = setlocale (LC_ALL, NULL);
  g_autofree char *saved = g_strdup (old != NULL ? old : "C");

  if (setlocale (LC_ALL, "tr_TR.UTF-8") == NULL)
    {
      fprintf (stderr, "(no tr_TR.UTF-8 locale here: checked in C only)\n");
      assert_same_key (".git", ".GIT");
      return;
    }
  assert_same_key (".git", ".GIT");
  assert_same_key ("private-dir", "PRIVATE-DIR");
  setlocale (LC_ALL, saved);
}

static void
test_variants_take_the_rule (void **state)
{
  g_autoptr (FbPolicy) p = load_ok (policy_text, &test_vars);

  for (int certain = 0; certain < 2; certain++)
    {
      expect (p, "/home/u/ws/secret-deny.txt", certain, FB_POLICY_ACCESS_DENY, "secret-deny");
      expect (p, "/home/u/ws/SECRET-DENY.TXT", certain, FB_POLICY_ACCESS_DENY, "secret-deny");
      expect (p, "/home/u/ws/secret-deny.txt.", certain, FB_POLICY_ACCESS_DENY, "secret-deny");
      expect (p, "/home/u/ws/Secret-Hide.txt", certain, FB_POLICY_ACCESS_HIDE, "secret-hide");
      expect (p, "/home/u/ws/.GIT", certain, FB_POLICY_ACCESS_HIDE, NULL);
      expect (p, "/home/u/ws/.GIT/config", certain, FB_POLICY_ACCESS_HIDE, NULL);
      expect (p, "/home/u/ws/sub/.Git", certain, FB_POLICY_ACCESS_HIDE, NULL);
      expect (p, "/home/u/ws/PRIVATE-DIR", certain, FB_POLICY_ACCESS_DENY, "private-dir");
      expect (p, "/home/u/ws/PRIVATE-DIR/inner.txt", certain, FB_POLICY_ACCESS_DENY, "private-dir");
      expect (p, "/home/u/ws/cafe\xcc\x81", certain, FB_POLICY_ACCESS_DENY, "cafe");
      expect (p, "/home/u/ws/CAF\xc3\x89", certain, FB_POLICY_ACCESS_DENY, "cafe");
      /* globs, folded on both sides */
      expect (p, "/home/u/ws/KEY.PEM", certain, FB_POLICY_ACCESS_DENY, "keys");
      expect (p, "/home/u/ws/BUILD/A.Key", certain, FB_POLICY_ACCESS_HIDE, "build keys");
      /* two spellings at one place: the narrower, no subtree to choose */
      expect (p, "/home/u/ws/FOO", certain, FB_POLICY_ACCESS_DENY, "foo");
      expect (p, "/home/u/ws/Foo", certain, FB_POLICY_ACCESS_DENY, "foo");
      /* names that fold equal to nothing keep their own decision */
      expect (p, "/home/u/ws/normal.txt", certain, FB_POLICY_ACCESS_WRITE, "ws");
      expect (p, "/home/u/ws/Docs-2", certain, FB_POLICY_ACCESS_WRITE, "ws");
    }
}

static void
test_subtrees (void **state)
{
  g_autoptr (FbPolicy) p = load_ok (policy_text, &test_vars);

  /* known to fold: DOCS is docs, its rules below follow */
  expect (p, "/home/u/ws/DOCS", true, FB_POLICY_ACCESS_WRITE, "ws");
  expect (p, "/home/u/ws/DOCS/secret", true, FB_POLICY_ACCESS_DENY, "docs/secret");
  expect (p, "/home/u/ws/DOCS/SECRET", true, FB_POLICY_ACCESS_DENY, "docs/secret");
  expect (p, "/home/u/ws/DOCS/other", true, FB_POLICY_ACCESS_WRITE, "ws");
  /* may fold: DOCS may be another directory, whose rules would be
   * widened by docs's: refused as a whole */
  expect (p, "/home/u/ws/DOCS", false, FB_POLICY_ACCESS_DENY, p->fold_rule.why);
  expect (p, "/home/u/ws/DOCS/other", false, FB_POLICY_ACCESS_DENY, p->fold_rule.why);
  /* bar has a subtree of its own and Bar another: no single one to follow */
  expect (p, "/home/u/ws/bar", true, FB_POLICY_ACCESS_DENY, p->fold_rule.why);
  expect (p, "/home/u/ws/BAR", true, FB_POLICY_ACCESS_DENY, p->fold_rule.why);
  /* a twin's literal takes over from what the parent passes down */
  expect (p, "/home/u/ws/RO/out", true, FB_POLICY_ACCESS_WRITE, "ro/Out");
  expect (p, "/home/u/ws/ro/out", false, FB_POLICY_ACCESS_READ, "ro");
  /* unfolded spellings are what they were */
  expect (p, "/home/u/ws/docs/secret", true, FB_POLICY_ACCESS_DENY, "docs/secret");
  expect (p, "/home/u/ws/docs/other", false, FB_POLICY_ACCESS_WRITE, "ws");
}

/* Where the host may not fold, a folded decision is never wider than the
 * name's own. */
static void
test_never_wider_than_exact (void **state)
{
  g_autoptr (FbPolicy) p = load_ok (policy_text, &test_vars);
  static const char *const paths[] = {
    "/home/u/ws/secret-deny.txt",
    "/home/u/ws/SECRET-DENY.TXT",
    "/home/u/ws/Secret-Hide.txt",
    "/home/u/ws/.git",
    "/home/u/ws/.GIT/x",
    "/home/u/ws/docs/secret",
    "/home/u/ws/DOCS/secret",
    "/home/u/ws/Foo",
    "/home/u/ws/foo",
    "/home/u/ws/fOO/x",
    "/home/u/ws/ro/Out",
    "/home/u/ws/RO/OUT/y",
    "/home/u/ws/Bar/x",
    "/home/u/ws/bar/z",
    "/home/u/ws/build/k.key",
    "/home/u/ws/x.PEM",
    "/home/u/ws/plain",
    "/home/u/ws/caf\xc3\xa9/f",
  };

  for (guint i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      FbPolicyDecision exact, folded;

      fb_policy_decide (p, paths[i], &exact);
      decide_folded (p, paths[i], false, &folded);
      if (fb_policy_access_narrow (exact.access, folded.access) != folded.access)
        fail_msg ("%s: folded %s is wider than its own %s", paths[i], fb_policy_access_to_string (folded.access),
                  fb_policy_access_to_string (exact.access));
      if (folded.traversable && !exact.traversable && folded.access != exact.access)
        fail_msg ("%s: folded, it is traversable and its own decision is not", paths[i]);
    }
}

static void
test_narrowed (void **state)
{
  g_autoptr (FbPolicy) base = load_ok (policy_text, &test_vars);
  g_autoptr (FbPolicy) call = load_ok ("{ \"version\": 1, \"rules\": [\n"
                                       "  { \"path\": \"/\", \"access\": \"write\", \"why\": \"call\" },\n"
                                       "  { \"path\": \"${WORKSPACE}/call-secret\", \"access\": \"deny\", "
                                       "\"why\": \"call-secret\" },\n"
                                       "  { \"glob\": \"*.key\", \"access\": \"deny\", \"why\": \"call keys\" } ] }",
                                       &test_vars);
  g_autoptr (FbPolicy) p = narrow_ok (base, call);

  for (int certain = 0; certain < 2; certain++)
    {
      expect (p, "/home/u/ws/CALL-SECRET", certain, FB_POLICY_ACCESS_DENY, "call-secret");
      expect (p, "/home/u/ws/Call-Secret/x", certain, FB_POLICY_ACCESS_DENY, "call-secret");
      expect (p, "/home/u/ws/A.KEY", certain, FB_POLICY_ACCESS_DENY, "call keys");
      expect (p, "/home/u/ws/SECRET-DENY.TXT", certain, FB_POLICY_ACCESS_DENY, "secret-deny");
      expect (p, "/home/u/ws/Secret-Hide.txt", certain, FB_POLICY_ACCESS_HIDE, "secret-hide");
      expect (p, "/home/u/ws/.GIT", certain, FB_POLICY_ACCESS_HIDE, NULL);
      expect (p, "/home/u/ws/KEY.PEM", certain, FB_POLICY_ACCESS_DENY, "keys");
      expect (p, "/home/u/ws/normal", certain, FB_POLICY_ACCESS_WRITE, "ws");
    }
  expect (p, "/home/u/ws/DOCS/secret", true, FB_POLICY_ACCESS_DENY, "docs/secret");
  expect (p, "/home/u/ws/DOCS/x", false, FB_POLICY_ACCESS_DENY, base->fold_rule.why);
}

static void
test_subtree_has_rules_folded (void **state)
{
  g_autoptr (FbPolicy) p = load_ok (policy_text, &test_vars);
  FbPolicyDecision d;

  fb_policy_decide (p, "/home/u/ws/BUILD", &d);
  assert_false (fb_policy_subtree_has_rules (p, &d, "/home/u/ws/BUILD"));
  assert_true (fb_policy_subtree_has_rules_folded (p, &d, "/home/u/ws/BUILD"));
  fb_policy_decide (p, "/home/u/ws/other", &d);
  assert_false (fb_policy_subtree_has_rules_folded (p, &d, "/home/u/ws/other"));
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_fold_keys), cmocka_unit_test (test_fold_keys_turkish_locale),
                  cmocka_unit_test (test_variants_take_the_rule), cmocka_unit_test (test_subtrees),
                  cmocka_unit_test (test_never_wider_than_exact), cmocka_unit_test (test_narrowed),
                  cmocka_unit_test (test_subtree_has_rules_folded))
