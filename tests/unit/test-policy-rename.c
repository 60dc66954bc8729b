/* fusebox — the rename guard (fb_policy_subtree_has_rules and its folded
 * variant) over glob shapes: a directory that the view lets move, from one
 * writable place to another, keeps every decision below it.
 *
 * The view refuses to rename a directory when rules decide below its old
 * or its new path.  For each glob shape and each pair of directories, the
 * guard's answer is checked against the decisions themselves: when it
 * lets the rename through, every path below (every sequence of up to three
 * names from a small alphabet holding the globs' own components, in several
 * spellings) is decided the same at both places, by the plain policy, by
 * the policy deciding folded names (certain or not) and by a narrowed one
 * (the glob on the server's side or on the call's).  The table also pins
 * the guard's answer for the cases a review found open: "**" + "/secrets/"
 * + "**" at ".../secrets", "**" + "/.aws/credentials" at ".../.aws", which
 * the guard let through because it looked at anchored globs only, and
 * "proj" holding "secrets/key", which must stay movable. */
#include "tests/unit/test-policy-util.h"

#include <stdio.h>

/* The globs (deny or hide), as rules of their own. */
static const struct
{
  const char *glob;
  const char *access;
} shapes[] = {
  { "**/secrets/**", "hide" },
  { "**/secrets/*", "deny" },
  { "**/.aws/credentials", "deny" },
  { "**/c1/c2/key", "deny" },
  { "**/secrets/**/key", "hide" },
  { "**/s?crets/*", "deny" },
  { "**/[sS]ecrets/*", "hide" },
  { "**/*ecret*/key", "deny" },
  { "/**/secrets/*", "deny" },
  { "*.pem", "deny" },
  { "**/key", "hide" },
  { "key", "hide" },
  { "/ws/secrets/*", "deny" },
  { "ws/*/key", "deny" },
  { "/ws/**/key", "hide" },
  { "/ws/proj/**", "hide" },
  { "/ws/*/secrets/**", "hide" },
};

/* Directories that may be renamed, one to another. */
static const char *const dirs[] = {
  "/ws/proj",      "/ws/proj2", "/ws/x",         "/ws/secrets", "/ws/Secrets", "/ws/SECRETS",
  "/ws/a/secrets", "/ws/.aws",  "/ws/proj/.aws", "/ws/c1",      "/ws/c1/c2",   "/ws/key",
  "/ws/a",         "/other",    "/ws/c1/x/y",    "/ws/secreta",
};

/* Names the paths below are made of. */
static const char *const names[] = { "secrets", "SECRETS", "key", "c1", "c2", ".aws", "credentials", "x", "a.pem" };

static char *
policy_with (const char *glob, const char *access, bool base_side)
{
  return g_strdup_printf ("{ \"version\": 1, \"protected_names\": {}, \"rules\": [\n"
                          "  { \"path\": \"/\", \"access\": \"%s\", \"why\": \"root\" },\n"
                          "  { \"path\": \"/ws\", \"access\": \"write\", \"why\": \"ws\" },\n"
                          "  { \"path\": \"/other\", \"access\": \"write\", \"why\": \"other\" },\n"
                          "  { \"glob\": \"%s\", \"access\": \"%s\", \"why\": \"the shape\" } ] }",
                          base_side ? "read" : "write", glob, access);
}

static FbPolicy *
plain_policy (const char *glob, const char *access)
{
  g_autofree char *text = policy_with (glob, access, true);
  return load_ok (text, NULL);
}

static const char base_text[] = "{ \"version\": 1, \"protected_names\": {}, \"rules\": [\n"
                                "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
                                "  { \"path\": \"/ws\", \"access\": \"write\", \"why\": \"ws\" },\n"
                                "  { \"path\": \"/other\", \"access\": \"write\", \"why\": \"other\" } ] }";

/* The glob on the call's side (ON_CALL) or on the server's. */
static FbPolicy *
narrowed_policy (const char *glob, const char *access, bool on_call)
{
  g_autofree char *with = policy_with (glob, access, !on_call);
  g_autoptr (FbPolicy) base = load_ok (on_call ? base_text : with, NULL);
  g_autoptr (FbPolicy) call = load_ok (on_call ? with
                                               : "{ \"version\": 1, \"protected_names\": {}, \"rules\": [\n"
                                                 "  { \"path\": \"/\", \"access\": \"write\", \"why\": \"all\" } ] }",
                                       NULL);

  return narrow_ok (base, call);
}

typedef enum
{
  MODE_EXACT,
  MODE_FOLDED, /* every directory folds, known to */
  MODE_MAYBE,  /* every directory may fold */
} Mode;

static const char *const mode_names[] = { "exact", "folded (certain)", "folded (maybe)" };

static void
decide_child (FbPolicy *policy, Mode mode, const FbPolicyDecision *d, const char *path, const char *name,
              FbPolicyDecision *ret)
{
  if (mode == MODE_EXACT)
    fb_policy_decide_child (policy, d, path, name, ret);
  else
    fb_policy_decide_child_folded (policy, d, path, name, mode == MODE_FOLDED, ret);
}

static char *
child_path (const char *path, const char *name)
{
  return strcmp (path, "/") == 0 ? g_strconcat ("/", name, NULL) : g_strconcat (path, "/", name, NULL);
}

/* SUFFIX (components, each with its "/") decided one component at a time
 * below PATH decided as D, as the view does. */
static void
decide_below (FbPolicy *policy, Mode mode, const FbPolicyDecision *d, const char *path, const char *suffix,
              FbPolicyDecision *ret)
{
  g_auto (GStrv) comps = g_strsplit (suffix + 1, "/", -1);
  g_autoptr (GString) parent = g_string_new (path);
  FbPolicyDecision cur = *d;

  for (guint i = 0; comps[i] != NULL; i++)
    {
      FbPolicyDecision next;

      decide_child (policy, mode, &cur, parent->str, comps[i], &next);
      cur = next;
      if (parent->len > 1)
        g_string_append_c (parent, '/');
      g_string_append (parent, comps[i]);
    }
  *ret = cur;
}

static void
decide (FbPolicy *policy, Mode mode, const char *path, FbPolicyDecision *ret)
{
  FbPolicyDecision root;

  fb_policy_decide (policy, "/", &root);
  decide_below (policy, mode, &root, "/", path, ret);
}

/* What the view asks before moving a directory from FROM to TO. */
static bool
guard_refuses (FbPolicy *policy, Mode mode, const char *from, const char *to)
{
  FbPolicyDecision a, b;

  decide (policy, mode, from, &a);
  decide (policy, mode, to, &b);
  if (mode == MODE_EXACT)
    return fb_policy_subtree_has_rules (policy, &a, from) || fb_policy_subtree_has_rules (policy, &b, to);
  return fb_policy_subtree_has_rules_folded (policy, &a, from) || fb_policy_subtree_has_rules_folded (policy, &b, to);
}

/* Depth-first below A (at PA) and B (at PB) together, LEFT more levels:
 * the first suffix decided differently, prepended to SUFFIX. */
static bool
differs_below (FbPolicy *policy, Mode mode, const FbPolicyDecision *a, const char *pa, const FbPolicyDecision *b,
               const char *pb, guint left, GString *suffix)
{
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *ca_path = NULL;
      g_autofree char *cb_path = NULL;
      FbPolicyDecision ca, cb;

      decide_child (policy, mode, a, pa, names[i], &ca);
      decide_child (policy, mode, b, pb, names[i], &cb);
      if (ca.access == cb.access && left > 1)
        {
          ca_path = child_path (pa, names[i]);
          cb_path = child_path (pb, names[i]);
        }
      if (ca.access != cb.access ||
          (left > 1 && differs_below (policy, mode, &ca, ca_path, &cb, cb_path, left - 1, suffix)))
        {
          g_string_prepend (suffix, names[i]);
          g_string_prepend_c (suffix, '/');
          return true;
        }
    }
  return false;
}

/* The first path below FROM (as a suffix, in *RET_SUFFIX) decided
 * differently from the same below TO, up to three names down (two where
 * names fold: slower, and every shape differs within two); false when
 * there is none. */
static bool
first_difference (FbPolicy *policy, Mode mode, const char *from, const char *to, char **ret_suffix)
{
  g_autoptr (GString) suffix = g_string_new (NULL);
  FbPolicyDecision df, dt;

  decide (policy, mode, from, &df);
  decide (policy, mode, to, &dt);
  if (!differs_below (policy, mode, &df, from, &dt, to, mode == MODE_EXACT ? 3 : 2, suffix))
    return false;
  *ret_suffix = g_string_free (g_steal_pointer (&suffix), FALSE);
  return true;
}

/* Every pair of writable directories the guard lets move keeps every
 * decision below. */
static void
sweep (FbPolicy *policy, const char *what, Mode mode)
{
  for (guint i = 0; i < G_N_ELEMENTS (dirs); i++)
    for (guint j = 0; j < G_N_ELEMENTS (dirs); j++)
      {
        g_autofree char *suffix = NULL;
        FbPolicyDecision a, b;

        if (i == j)
          continue;
        decide (policy, mode, dirs[i], &a);
        decide (policy, mode, dirs[j], &b);
        /* the view renames only between writable names */
        if (a.access != FB_POLICY_ACCESS_WRITE || b.access != FB_POLICY_ACCESS_WRITE || a.traversable || b.traversable)
          continue;
        if (!guard_refuses (policy, mode, dirs[i], dirs[j]) &&
            first_difference (policy, mode, dirs[i], dirs[j], &suffix))
          fail_msg ("%s, %s: moving %s to %s is let through, but %s%s and %s%s are decided differently", what,
                    mode_names[mode], dirs[i], dirs[j], dirs[i], suffix, dirs[j], suffix);
      }
}

static void
test_sweep_exact (void **state)
{
  for (guint s = 0; s < G_N_ELEMENTS (shapes); s++)
    {
      g_autoptr (FbPolicy) p = plain_policy (shapes[s].glob, shapes[s].access);
      sweep (p, shapes[s].glob, MODE_EXACT);
    }
}

static void
test_sweep_folded (void **state)
{
  for (guint s = 0; s < G_N_ELEMENTS (shapes); s++)
    {
      g_autoptr (FbPolicy) p = plain_policy (shapes[s].glob, shapes[s].access);
      sweep (p, shapes[s].glob, MODE_FOLDED);
      sweep (p, shapes[s].glob, MODE_MAYBE);
    }
}

static void
test_sweep_narrowed (void **state)
{
  for (guint s = 0; s < G_N_ELEMENTS (shapes); s++)
    for (guint side = 0; side < 2; side++)
      {
        g_autoptr (FbPolicy) p = narrowed_policy (shapes[s].glob, shapes[s].access, side == 1);
        g_autofree char *what = g_strdup_printf ("%s on the %s's side", shapes[s].glob, side ? "call" : "server");
        sweep (p, what, MODE_EXACT);
        sweep (p, what, MODE_FOLDED);
      }
}

/* The guard's own answers: refused where a path below would change, let
 * through where the glob's match lies wholly below the directory. */
static void
test_table (void **state)
{
  static const struct
  {
    const char *glob;
    const char *from;
    const char *to;
    bool refused;
    bool needed;      /* some path below is decided differently at the two places */
    bool folded_only; /* refused where names fold, let through exactly */
  } cases[] = {
    /* the review's cases */
    { "**/secrets/**", "/ws/secrets", "/ws/x", true, true },
    { "**/secrets/*", "/ws/secrets", "/ws/x", true, true },
    { "**/.aws/credentials", "/ws/proj/.aws", "/ws/proj/aws2", true, true },
    /* a suffix wholly inside the moved tree follows it */
    { "**/secrets/**", "/ws/proj", "/ws/proj2", false },
    { "**/.aws/credentials", "/ws/proj", "/ws/proj2", false },
    /* the new place counts as much as the old */
    { "**/secrets/**", "/ws/x", "/ws/secrets", true, true },
    { "**/.aws/credentials", "/ws/aws2", "/ws/.aws", true, true },
    { "/ws/secrets/*", "/ws/x", "/ws/secrets", true, true },
    /* any non-last component, at any depth of the moved path */
    { "**/c1/c2/key", "/ws/c1", "/ws/x", true, true },
    { "**/c1/c2/key", "/ws/c1/c2", "/ws/x", true, true },
    { "**/c1/c2/key", "/ws/a/c1", "/ws/b", true, true },
    { "**/c1/c2/key", "/ws/key", "/ws/x", false }, /* the last component: only below */
    { "**/c1/c2/key", "/ws/c2", "/ws/x", false },  /* c2 needs c1 before it, below */
    { "**/secrets/**/key", "/ws/secrets/a/b", "/ws/x", true, true },
    { "**/s?crets/*", "/ws/secrets", "/ws/x", true, true },
    { "**/[sS]ecrets/*", "/ws/Secrets", "/ws/x", true, true },
    { "**/*ecret*/key", "/ws/mysecrets", "/ws/x", true, true },
    { "/**/secrets/*", "/ws/secrets", "/ws/x", true, true },
    { "/**/secrets/*", "/ws/proj", "/ws/proj2", false },
    /* names alone follow the file */
    { "*.pem", "/ws/proj", "/ws/x", false },
    { "**/key", "/ws/c1", "/ws/x", false },
    /* anchored globs: whatever could match below, needed or not */
    { "/ws/secrets/*", "/ws/secrets", "/ws/x", true, true },
    { "/ws/secrets/*", "/ws/proj", "/ws/x", false },
    { "ws/*/key", "/ws/a", "/ws/b", true, false },
    { "/ws/**/key", "/ws/a", "/ws/b", true, false },
    { "/ws/proj/**", "/ws/p2", "/ws/proj", true, true },
    /* "SECRETS" is "secrets" to a host that folds names */
    { "**/secrets/**", "/ws/SECRETS", "/ws/x", true, true, true },
    { "**/.aws/credentials", "/ws/.AWS", "/ws/x", true, true, true },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (FbPolicy) p = plain_policy (cases[i].glob, "deny");

      for (Mode mode = MODE_EXACT; mode <= MODE_MAYBE; mode++)
        {
          bool folds = mode != MODE_EXACT || !cases[i].folded_only;
          bool want = cases[i].refused && folds;
          bool got = guard_refuses (p, mode, cases[i].from, cases[i].to);
          g_autofree char *suffix = NULL;

          if (got != want)
            fail_msg ("%s, %s: moving %s to %s: the guard says %s, expected %s", cases[i].glob, mode_names[mode],
                      cases[i].from, cases[i].to, got ? "refused" : "let through", want ? "refused" : "let through");
          if (cases[i].needed && folds && !first_difference (p, mode, cases[i].from, cases[i].to, &suffix))
            fail_msg ("%s, %s: moving %s to %s changes nothing below", cases[i].glob, mode_names[mode], cases[i].from,
                      cases[i].to);
        }
    }
}

/* The narrowed policy asks both sides. */
static void
test_narrowed (void **state)
{
  for (guint side = 0; side < 2; side++)
    {
      g_autoptr (FbPolicy) p = narrowed_policy ("**/secrets/**", "hide", side == 1);

      assert_true (guard_refuses (p, MODE_EXACT, "/ws/secrets", "/ws/x"));
      assert_true (guard_refuses (p, MODE_EXACT, "/ws/x", "/ws/secrets"));
      assert_false (guard_refuses (p, MODE_EXACT, "/ws/proj", "/ws/proj2"));
      assert_true (guard_refuses (p, MODE_FOLDED, "/ws/SECRETS", "/ws/x"));
    }
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_table), cmocka_unit_test (test_narrowed),
                  cmocka_unit_test (test_sweep_exact), cmocka_unit_test (test_sweep_folded),
                  cmocka_unit_test (test_sweep_narrowed))
