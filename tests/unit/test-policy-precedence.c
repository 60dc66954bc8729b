/* fusebox — policy decisions: a precedence table (policy, path → access and
 * deciding rule), every pair of the equal-specificity order, protected names
 * at depth, and decide == a chain of decide_child over a fixed pseudo-random
 * set of paths. */
#include "tests/unit/test-policy-util.h"

/* Rule kinds in the table: an index >= 0 is a policy rule (PATH or GLOB as
 * the policy says), these are the synthetic ones. */
#define DEFAULT -1
#define PROTECTED -2

/* A: literal specificity, equal-specificity order, globs as rules. */
static const char policy_a[] = "{ \"version\": 1, \"rules\": [\n"
                               "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"r0\" },\n"
                               "  { \"path\": \"/home\", \"access\": \"hide\", \"why\": \"r1\" },\n"
                               "  { \"path\": \"/home/u\", \"access\": \"write\", \"why\": \"r2\" },\n"
                               "  { \"path\": \"/home/u/secret\", \"access\": \"deny\", \"why\": \"r3\" },\n"
                               "  { \"path\": \"/data\", \"access\": \"read\", \"why\": \"r4\" },\n"
                               "  { \"path\": \"/data\", \"access\": \"write\", \"why\": \"r5\" },\n"
                               "  { \"path\": \"/data/x\", \"access\": \"hide\", \"why\": \"r6\" },\n"
                               "  { \"path\": \"/data/x\", \"access\": \"read\", \"why\": \"r7\" },\n"
                               "  { \"path\": \"/opt\", \"access\": \"deny\", \"why\": \"r8\" },\n"
                               "  { \"path\": \"/opt/pub\", \"access\": \"read\", \"why\": \"r9\" },\n"
                               "  { \"glob\": \"*.pem\", \"access\": \"deny\", \"why\": \"r10\" },\n"
                               "  { \"glob\": \"/data/**/cache\", \"access\": \"hide\", \"why\": \"r11\" },\n"
                               "  { \"glob\": \"/home/u/*.log\", \"access\": \"hide\", \"why\": \"r12\" },\n"
                               "  { \"glob\": \"build/out\", \"access\": \"deny\", \"why\": \"r13\" },\n"
                               "  { \"path\": \"/srv/keys\", \"access\": \"read\", \"why\": \"r14\" },\n"
                               "  { \"path\": \"/srv/a.pem\", \"access\": \"read\", \"why\": \"r15\" },\n"
                               "  { \"glob\": \"/srv/keys/**\", \"access\": \"hide\", \"why\": \"r16\" },\n"
                               "  { \"path\": \"/srv/keys/pub\", \"access\": \"read\", \"why\": \"r17\" } ] }";

/* B: no rule at "/", custom protected names, an explicit rule on .git. */
static const char policy_b[] =
  "{ \"version\": 1,\n"
  "  \"protected_names\": { \".git\": \"hide\", \".env\": \"deny\", \".codex\": \"read\" },\n"
  "  \"rules\": [\n"
  "  { \"path\": \"/ws\", \"access\": \"write\", \"why\": \"r0\" },\n"
  "  { \"path\": \"/ws/.git\", \"access\": \"read\", \"why\": \"r1\" },\n"
  "  { \"path\": \"/ws/sub/.git\", \"access\": \"deny\", \"why\": \"r2\" },\n"
  "  { \"path\": \"/etc/ssl\", \"access\": \"read\", \"why\": \"r3\" },\n"
  "  { \"glob\": \"**/node_modules\", \"access\": \"hide\", \"why\": \"r4\" } ] }";

/* C: ties between a literal and a glob of the same access go to the earlier
 * rule; a glob and a literal at different depths. */
static const char policy_c[] = "{ \"version\": 1, \"protected_names\": {}, \"rules\": [\n"
                               "  { \"path\": \"/\", \"access\": \"write\", \"why\": \"r0\" },\n"
                               "  { \"glob\": \"/a/*\", \"access\": \"deny\", \"why\": \"r1\" },\n"
                               "  { \"glob\": \"/a/*\", \"access\": \"hide\", \"why\": \"r2\" },\n"
                               "  { \"glob\": \"f\", \"access\": \"deny\", \"why\": \"r3\" },\n"
                               "  { \"path\": \"/u/f\", \"access\": \"deny\", \"why\": \"r4\" },\n"
                               "  { \"path\": \"/u/g\", \"access\": \"deny\", \"why\": \"r5\" },\n"
                               "  { \"glob\": \"g\", \"access\": \"deny\", \"why\": \"r6\" },\n"
                               "  { \"path\": \"/u/g/h\", \"access\": \"read\", \"why\": \"r7\" },\n"
                               "  { \"path\": \"/.git\", \"access\": \"read\", \"why\": \"r8\" } ] }";

typedef struct
{
  char policy;
  const char *path;
  FbPolicyAccess access;
  int rule; /* index, DEFAULT or PROTECTED */
} Case;

#define H FB_POLICY_ACCESS_HIDE
#define D FB_POLICY_ACCESS_DENY
#define R FB_POLICY_ACCESS_READ
#define W FB_POLICY_ACCESS_WRITE

static const Case cases[] = {
  /* A */
  { 'A', "/", R, 0 },
  { 'A', "/usr", R, 0 },
  { 'A', "/usr/bin/ls", R, 0 },
  { 'A', "/home", H, 1 },
  { 'A', "/home/x", H, 1 },
  { 'A', "/home/u", W, 2 },
  { 'A', "/home/u/docs/a.txt", W, 2 },
  { 'A', "/home/u/secret", D, 3 },
  { 'A', "/home/u/secret/deeper", D, 3 },
  { 'A', "/data", W, 5 }, /* write beats read at one path */
  { 'A', "/data/y", W, 5 },
  { 'A', "/data/x", H, 6 }, /* hide beats read at one path */
  { 'A', "/data/x/z", H, 6 },
  { 'A', "/opt", D, 8 },
  { 'A', "/opt/pub", R, 9 }, /* more specific read under deny */
  { 'A', "/opt/pub/doc", R, 9 },
  { 'A', "/opt/other", D, 8 },
  { 'A', "/x.pem", D, 10 },
  { 'A', "/home/u/key.pem", D, 10 },
  { 'A', "/home/u/secret/k.pem", D, 10 }, /* the glob is a candidate at its own depth */
  { 'A', "/srv/a.pem", D, 10 },           /* glob deny beats literal read at one depth */
  { 'A', "/srv/keys", R, 14 },
  { 'A', "/srv/keys/b.pem", H, 16 }, /* both globs match; hide wins */
  { 'A', "/srv/keys/b.txt", H, 16 }, /* trailing ** matches inside */
  { 'A', "/srv/keys/pub", H, 16 },   /* a glob's hide beats a literal read at one depth */
  { 'A', "/data/sub/cache", H, 11 },
  { 'A', "/data/cache", H, 11 }, /* inner ** matches zero components */
  { 'A', "/data/a/b/c/cache", H, 11 },
  { 'A', "/data/cache/inner", H, 11 }, /* inherited below the glob's match */
  { 'A', "/data/cachex", W, 5 },
  { 'A', "/home/u/app.log", H, 12 },
  { 'A', "/home/u/sub/app.log", W, 2 }, /* "*" does not cross "/" */
  { 'A', "/build/out", D, 13 },
  { 'A', "/src/build/out", R, 0 }, /* "a/b" is anchored at the root */
  { 'A', "/home/u/.git", H, PROTECTED },
  { 'A', "/home/u/.git/config", H, PROTECTED },
  { 'A', "/opt/.git", H, PROTECTED }, /* deny narrowed to hide */
  { 'A', "/nonexistent", R, 0 },
  { 'A', "//x", H, DEFAULT }, /* malformed */
  { 'A', "/a/../b", H, DEFAULT },
  { 'A', "/usr/", H, DEFAULT },
  { 'A', "relative", H, DEFAULT },
  /* B */
  { 'B', "/", H, DEFAULT },
  { 'B', "/usr", H, DEFAULT },
  { 'B', "/ws", W, 0 },
  { 'B', "/ws/.git", R, 1 }, /* a literal rule on the name wins */
  { 'B', "/ws/.git/HEAD", R, 1 },
  { 'B', "/ws/sub/.git", D, 2 },
  { 'B', "/ws/a/.git", H, PROTECTED },
  { 'B', "/ws/a/.git/objects/pack", H, PROTECTED },
  { 'B', "/ws/.env", D, PROTECTED },
  { 'B', "/ws/.codex", R, PROTECTED }, /* write narrowed to read */
  { 'B', "/ws/.codex/config.toml", R, PROTECTED },
  { 'B', "/etc", H, DEFAULT },
  { 'B', "/etc/ssl/certs", R, 3 },
  { 'B', "/etc/ssl/.codex", R, 3 }, /* read narrowed by read: not narrowed */
  { 'B', "/etc/ssl/.env", D, PROTECTED },
  { 'B', "/ws/x/node_modules/y", H, 4 },
  { 'B', "/node_modules", H, 4 },
  /* C */
  { 'C', "/a/x", H, 2 },
  { 'C', "/a", W, 0 },
  { 'C', "/u/f", D, 3 }, /* tie: the glob came first */
  { 'C', "/u/g", D, 5 }, /* tie: the literal came first */
  { 'C', "/u/g/h", R, 7 },
  { 'C', "/x/y/f", D, 3 },
  { 'C', "/.git", R, 8 },
  { 'C', "/q/.git", W, 0 }, /* no protected names in C */
};

static FbPolicy *
policy_for (char which)
{
  switch (which)
    {
      case 'A':
        return load_ok (policy_a, &test_vars);
      case 'B':
        return load_ok (policy_b, &test_vars);
      default:
        return load_ok (policy_c, &test_vars);
    }
}

static void
test_table (void **state)
{
  FbPolicy *policies[3] = { policy_for ('A'), policy_for ('B'), policy_for ('C') };
  guint failures = 0;

  assert_true (G_N_ELEMENTS (cases) >= 40);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const Case *c = &cases[i];
      FbPolicyDecision d;
      int got_rule;

      fb_policy_decide (policies[c->policy - 'A'], c->path, &d);
      assert_non_null (d.rule);
      assert_non_null (d.rule->why);
      assert_non_null (d.mount);
      if (d.rule->kind == FB_POLICY_RULE_DEFAULT)
        got_rule = DEFAULT;
      else if (d.rule->kind == FB_POLICY_RULE_PROTECTED)
        got_rule = PROTECTED;
      else
        got_rule = d.rule->index;
      if (d.access != c->access || got_rule != c->rule)
        {
          print_error ("case %u: policy %c %s: expected %s by %d, got %s by %d (%s)\n", i, c->policy, c->path,
                       fb_policy_access_to_string (c->access), c->rule, fb_policy_access_to_string (d.access), got_rule,
                       d.rule->why);
          failures++;
        }
      if (got_rule >= 0)
        {
          g_autofree char *why = g_strdup_printf ("r%d", got_rule);

          assert_string_equal (d.rule->why, why);
        }
    }
  for (guint i = 0; i < 3; i++)
    fb_policy_unref (policies[i]);
  assert_int_equal (failures, 0);
}

/* Equal specificity: two rules decide the same path at the same depth, and
 * the tie-break order hide > deny > write > read says which wins, whatever
 * the rules' order in the file and whether each is a literal path or a glob
 * (a glob may only deny or hide).  Every pair of the order is generated
 * from the table below, so none can be left out. */
static const FbPolicyAccess tie_break_order[] = { H, D, W, R }; /* strongest first */

typedef enum
{
  LITERAL,
  GLOB,
} RuleKind;

static guint
rank_of (FbPolicyAccess access)
{
  for (guint i = 0; i < G_N_ELEMENTS (tie_break_order); i++)
    if (tie_break_order[i] == access)
      return i;
  fail_msg ("access %d is not in the tie-break order", access);
  return 0;
}

/* The rule of KIND with ACCESS as JSON; SECOND picks a second spelling so
 * that two rules of one kind are not the same rule twice. */
static char *
tie_rule (RuleKind kind, FbPolicyAccess access, bool second)
{
  const char *access_s = fb_policy_access_to_string (access);

  if (kind == LITERAL)
    return g_strdup_printf ("{ \"path\": \"/ws/k.pem\", \"access\": \"%s\", \"why\": \"%s\" }", access_s, access_s);
  return g_strdup_printf ("{ \"glob\": \"%s\", \"access\": \"%s\", \"why\": \"%s\" }", second ? "/ws/k.*" : "*.pem",
                          access_s, access_s);
}

/* Decide /ws/k.pem under FIRST then SECOND, by whole path and by a chain of
 * decide_child (the view's way); the rule at index WINNER must decide. */
static guint
check_tie (RuleKind kind_first, FbPolicyAccess first, RuleKind kind_second, FbPolicyAccess second, guint winner)
{
  g_autofree char *rule_first = tie_rule (kind_first, first, false);
  g_autofree char *rule_second = tie_rule (kind_second, second, kind_first == kind_second);
  g_autofree char *text =
    g_strdup_printf ("{ \"version\": 1, \"protected_names\": {}, \"rules\": [\n"
                     "  { \"path\": \"/\", \"access\": \"write\", \"why\": \"base\" },\n  %s,\n  %s ] }",
                     rule_first, rule_second);
  g_autoptr (FbPolicy) policy = load_ok (text, &test_vars);
  FbPolicyAccess expected = winner == 1 ? first : second;
  FbPolicyDecision whole;
  FbPolicyDecision chain;
  FbPolicyDecision ws;

  fb_policy_decide (policy, "/ws/k.pem", &whole);
  fb_policy_decide (policy, "/ws", &ws);
  fb_policy_decide_child (policy, &ws, "/ws", "k.pem", &chain);
  if (whole.access == expected && whole.rule->index == (int)winner && chain.access == expected &&
      chain.rule == whole.rule)
    return 0;
  print_error ("%s %s then %s %s on /ws/k.pem: expected %s by rule %u, got %s by rule %d (by decide_child: %s by "
               "rule %d)\n",
               kind_first == LITERAL ? "literal" : "glob", fb_policy_access_to_string (first),
               kind_second == LITERAL ? "literal" : "glob", fb_policy_access_to_string (second),
               fb_policy_access_to_string (expected), winner, fb_policy_access_to_string (whole.access),
               whole.rule->index, fb_policy_access_to_string (chain.access), chain.rule->index);
  return 1;
}

static void
test_equal_specificity (void **state)
{
  static const RuleKind kinds[][2] = { { LITERAL, LITERAL }, { GLOB, LITERAL }, { LITERAL, GLOB }, { GLOB, GLOB } };
  guint failures = 0;
  guint checked = 0;
  guint deny_write = 0;

  for (guint k = 0; k < G_N_ELEMENTS (kinds); k++)
    for (guint i = 0; i < G_N_ELEMENTS (tie_break_order); i++)
      for (guint j = 0; j < G_N_ELEMENTS (tie_break_order); j++)
        {
          FbPolicyAccess first = tie_break_order[i];
          FbPolicyAccess second = tie_break_order[j];
          guint winner;

          /* a glob may only deny or hide */
          if ((kinds[k][0] == GLOB && first != H && first != D) || (kinds[k][1] == GLOB && second != H && second != D))
            continue;
          /* one literal path with one access twice is a duplicate, refused by the loader */
          if (kinds[k][0] == LITERAL && kinds[k][1] == LITERAL && first == second)
            continue;
          /* the stronger wins; between equals, the earlier rule */
          winner = rank_of (first) <= rank_of (second) ? 1 : 2;
          failures += check_tie (kinds[k][0], first, kinds[k][1], second, winner);
          checked++;
          if ((first == D && second == W) || (first == W && second == D))
            deny_write++;
        }
  /* literal-literal: 4 x 3; with a glob (hide or deny) against a literal: 2 x 4
   * each way; glob-glob: 2 x 2. */
  assert_int_equal (checked, 12 + 8 + 8 + 4);
  /* deny against write: literal-literal, glob-literal and literal-glob, both orders where allowed */
  assert_int_equal (deny_write, 4);
  assert_int_equal (failures, 0);
}

static void
test_rule_fields (void **state)
{
  g_autoptr (FbPolicy) policy = policy_for ('A');
  FbPolicyDecision d;

  fb_policy_decide (policy, "/home/u/key.pem", &d);
  assert_int_equal (d.rule->kind, FB_POLICY_RULE_GLOB);
  assert_string_equal (d.rule->glob, "*.pem");
  assert_null (d.rule->path);
  /* The rule's origin is its position in the text: line 12, column 3. */
  assert_string_equal (d.rule->origin, "test.json:12:3");

  fb_policy_decide (policy, "/home/u", &d);
  assert_int_equal (d.rule->kind, FB_POLICY_RULE_PATH);
  assert_string_equal (d.rule->path, "/home/u");
  assert_string_equal (d.rule->origin, "test.json:4:3");

  fb_policy_decide (policy, "/home/u/.git", &d);
  assert_int_equal (d.rule->index, -1);
  assert_string_equal (d.rule->origin, "protected_names[.git]");
  assert_string_equal (d.rule->glob, ".git");
  assert_contains (d.rule->why, "protected name .git");

  fb_policy_decide (policy, "//", &d);
  assert_string_equal (d.rule->origin, "default");
}

/* Protected names narrow only: a "read" protected name under a denied or
 * hidden directory stays denied or hidden; under a writable one it is read. */
static void
test_protected_narrow_only (void **state)
{
  g_autoptr (FbPolicy) policy = load_ok ("{ \"version\": 1, \"protected_names\": { \".git\": \"read\", \".agents\": "
                                         "\"hide\" }, \"rules\": [\n"
                                         "  { \"path\": \"/\", \"access\": \"write\", \"why\": \"w\" },\n"
                                         "  { \"path\": \"/d\", \"access\": \"deny\", \"why\": \"d\" },\n"
                                         "  { \"path\": \"/h\", \"access\": \"hide\", \"why\": \"h\" },\n"
                                         "  { \"path\": \"/r\", \"access\": \"read\", \"why\": \"r\" },\n"
                                         "  { \"path\": \"/w/a/b/c/.git\", \"access\": \"write\", \"why\": \"x\" } ] }",
                                         &test_vars);
  FbPolicyDecision d;
  FbPolicyAccess access;

  fb_policy_decide (policy, "/d/.git", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_DENY);
  assert_string_equal (d.rule->why, "d");
  fb_policy_decide (policy, "/h/.git", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_HIDE);
  assert_string_equal (d.rule->why, "h");
  fb_policy_decide (policy, "/r/.git", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_READ);
  assert_string_equal (d.rule->why, "r");
  /* at depth: read, and everything inside it read too */
  fb_policy_decide (policy, "/w/a/b/.git", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_READ);
  assert_int_equal (d.rule->kind, FB_POLICY_RULE_PROTECTED);
  fb_policy_decide (policy, "/w/a/b/.git/refs/heads/main", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_READ);
  assert_int_equal (d.rule->kind, FB_POLICY_RULE_PROTECTED);
  /* an explicit literal rule on the name wins, even to write */
  fb_policy_decide (policy, "/w/a/b/c/.git", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_WRITE);
  assert_string_equal (d.rule->why, "x");
  /* hidden at depth 9 */
  fb_policy_decide (policy, "/1/2/3/4/5/6/7/8/.agents", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_HIDE);
  /* a name merely containing a protected name is not protected */
  fb_policy_decide (policy, "/w/.gitignore", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_WRITE);

  assert_true (fb_policy_is_protected_name (policy, ".git", &access));
  assert_int_equal (access, FB_POLICY_ACCESS_READ);
  assert_true (fb_policy_is_protected_name (policy, ".agents", NULL));
  assert_false (fb_policy_is_protected_name (policy, ".codex", NULL)); /* the list replaces the default */
  assert_false (fb_policy_is_protected_name (policy, "git", NULL));
}

static void
test_default_protected_names (void **state)
{
  g_autoptr (FbPolicy) policy =
    load_ok ("{\"version\": 1, \"rules\": [{\"path\": \"/\", \"access\": \"write\", \"why\": \"w\"}]}", NULL);
  const char *names[] = { ".git", ".agents", ".codex" };

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *path = g_strdup_printf ("/a/b/%s", names[i]);
      FbPolicyDecision d;
      FbPolicyAccess access = FB_POLICY_ACCESS_WRITE;

      assert_true (fb_policy_is_protected_name (policy, names[i], &access));
      assert_int_equal (access, FB_POLICY_ACCESS_HIDE);
      fb_policy_decide (policy, path, &d);
      assert_int_equal (d.access, FB_POLICY_ACCESS_HIDE);
      assert_int_equal (d.rule->kind, FB_POLICY_RULE_PROTECTED);
    }
}

/* decide(P) must equal decide(parent) + decide_child(name) for every P:
 * the view decides by steps, the API by whole paths. */
static void
check_chains (FbPolicy *policy, guint seed, guint count)
{
  static const char *const vocab[] = {
    "home",   "u",       "ws",  "src",      ".git",  "secret", "data", "x",   "cache",        "opt",
    "pub",    "a.pem",   "srv", "keys",     "build", "out",    "etc",  "ssl", "node_modules", ".env",
    ".codex", "app.log", "tmp", "b.tar.gz", "f",     "g",      "h",    "a",   "zz",           "q"
  };
  assert_chains_agree (policy, seed, count, 12, vocab, G_N_ELEMENTS (vocab));
}

static void
test_decide_equals_chain (void **state)
{
  g_autoptr (FbPolicy) a = policy_for ('A');
  g_autoptr (FbPolicy) b = policy_for ('B');
  g_autoptr (FbPolicy) c = policy_for ('C');
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) builtin = fb_policy_load_spec ("builtin:default", &test_vars, &error);

  assert_non_null (builtin);
  check_chains (a, 1, 2000);
  check_chains (b, 2, 2000);
  check_chains (c, 3, 2000);
  check_chains (builtin, 4, 2000);
}

static void
test_decide_child_refuses_bad_names (void **state)
{
  g_autoptr (FbPolicy) policy = policy_for ('A');
  FbPolicyDecision parent;
  FbPolicyDecision d;
  const char *bad[] = { "", ".", "..", "a/b", "/" };

  fb_policy_decide (policy, "/usr", &parent);
  assert_int_equal (parent.access, FB_POLICY_ACCESS_READ);
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      fb_policy_decide_child (policy, &parent, "/usr", bad[i], &d);
      assert_int_equal (d.access, FB_POLICY_ACCESS_HIDE);
      assert_int_equal (d.rule->kind, FB_POLICY_RULE_DEFAULT);
      assert_non_null (d.mount);
      assert_non_null (d.mounted_children);
      assert_non_null (d.reachable_children);
    }
  /* ret may alias parent */
  fb_policy_decide_child (policy, &parent, "/usr", "bin", &parent);
  assert_int_equal (parent.access, FB_POLICY_ACCESS_READ);
  assert_int_equal (parent.priv_depth, 2);
}

/* Deep paths: more components than the decision's stack buffers hold. */
static void
test_deep_paths (void **state)
{
  g_autoptr (FbPolicy) policy = policy_for ('A');
  g_autoptr (GString) path = g_string_new ("/data");
  FbPolicyDecision d;

  for (guint i = 0; i < 300; i++)
    g_string_append (path, "/d");
  g_string_append (path, "/cache");
  fb_policy_decide (policy, path->str, &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_HIDE);
  assert_string_equal (d.rule->why, "r11");
  assert_int_equal (d.priv_depth, 302);
  g_string_append (path, "/k.pem");
  fb_policy_decide (policy, path->str, &d);
  assert_string_equal (d.rule->why, "r10");
}

/* Leaves the bytes of a deep stack frame set, as a caller's earlier work
 * would: a decision built on the stack without setting every field then
 * carries them. */
static G_GNUC_NO_INLINE void
dirty_stack (void)
{
  volatile unsigned char junk[4096];

  for (gsize i = 0; i < sizeof junk; i++)
    junk[i] = 0xa5;
}

/* The view shares decisions by their bytes (fs-view-node.c): every field
 * of a decision is set on every path, the private ones included, so that
 * two equal decisions are equal byte for byte. */
static void
test_decide_child_sets_every_field (void **state)
{
  g_autoptr (FbPolicy) policy = policy_for ('A');
  FbPolicyDecision parent;
  FbPolicyDecision a;
  FbPolicyDecision b;

  fb_policy_decide (policy, "/usr", &parent);
  memset (&a, 0x5a, sizeof a);
  memset (&b, 0xc3, sizeof b);
  dirty_stack ();
  fb_policy_decide_child (policy, &parent, "/usr", "bin", &a);
  fb_policy_decide_child (policy, &parent, "/usr", "bin", &b);
  assert_null (a.priv_other);
  assert_null (b.priv_other);
  assert_ptr_equal (a.rule, b.rule);
  assert_ptr_equal (a.priv_node, b.priv_node);
  assert_int_equal (a.priv_depth, b.priv_depth);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_table), cmocka_unit_test (test_equal_specificity),
                  cmocka_unit_test (test_rule_fields), cmocka_unit_test (test_protected_narrow_only),
                  cmocka_unit_test (test_default_protected_names), cmocka_unit_test (test_decide_equals_chain),
                  cmocka_unit_test (test_decide_child_refuses_bad_names), cmocka_unit_test (test_deep_paths),
                  cmocka_unit_test (test_decide_child_sets_every_field))
