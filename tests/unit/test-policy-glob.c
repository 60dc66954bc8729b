/* fusebox — the glob matcher as a unit (a table of pattern, path → match),
 * compile errors with their offsets, the "could match below" automaton, and
 * globs as rules (the last-component index must not lose a match). */
#include "tests/unit/test-policy-util.h"
#include "tests/lib/test-table.h"

#include <fnmatch.h>

typedef struct
{
  const char *pattern;
  const char *path;
  bool match;
} GlobCase;

static const GlobCase glob_cases[] = {
  /* floating: no "/" matches the last component at any depth */
  { "*.pem", "/a.pem", true },
  { "*.pem", "/x/y/z/a.pem", true },
  { "*.pem", "/x/a.pem/b", false },
  { "*.pem", "/.pem", true },
  { "*.pem", "/a.pemx", false },
  { "*.tar.gz", "/d/a.tar.gz", true },
  { "*.tar.gz", "/d/a.gz", false },
  { "id_rsa", "/home/u/.ssh/id_rsa", true },
  { "id_rsa", "/home/u/.ssh/id_rsa.pub", false },
  { "*", "/anything", true },
  { "*", "/a/b", true },
  /* anchored */
  { "/etc/passwd", "/etc/passwd", true },
  { "/etc/passwd", "/x/etc/passwd", false },
  { "etc/passwd", "/etc/passwd", true }, /* a "/" inside anchors too */
  { "etc/passwd", "/x/etc/passwd", false },
  { "/a/*/c", "/a/b/c", true },
  { "/a/*/c", "/a/b/x/c", false },
  { "/a/*", "/a", false },
  /* ** */
  { "**/x", "/x", true },
  { "**/x", "/a/b/c/x", true },
  { "/a/**/b", "/a/b", true },
  { "/a/**/b", "/a/1/2/3/b", true },
  { "/a/**/b", "/a/1/2/3/c", false },
  { "/a/**", "/a", false }, /* trailing: inside only */
  { "/a/**", "/a/b", true },
  { "/a/**", "/a/b/c/d", true },
  { "/a/**", "/ab/c", false },
  { "**", "/x", true },
  { "/**/a/**/a/**/b", "/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/c", false }, /* no blow-up */
  { "/**/a/**/a/**/b", "/a/q/a/r/b", true },
  /* characters */
  { "?.c", "/a.c", true },
  { "?.c", "/ab.c", false },
  { "?.c", "/é.c", true }, /* one character, two bytes */
  { "a*b*c", "/aXXbYYc", true },
  { "a*b*c", "/aXXbYY", false },
  { "[abc].txt", "/b.txt", true },
  { "[abc].txt", "/d.txt", false },
  { "[a-c]x", "/bx", true },
  { "[!a-c]x", "/bx", false },
  { "[^a-c]x", "/dx", true },
  { "[]]x", "/]x", true },
  { "[!]]x", "/]x", false },
  { "[é-ê]", "/é", true },
  { "\\*", "/*", true },
  { "\\*", "/a", false },
  { "a\\?", "/a?", true },
  { "\\[x]", "/[x]", true },
  { ".git", "/.git", true },
  { "*", "/.hidden", true }, /* "*" matches a leading dot, as gitignore */
  /* the first- and last-byte prefilters must never reject a match */
  { "[a-c]x", "/Bx", false },
  { "*_key", "/ssh_host_rsa_key", true },
  { "*_key", "/ssh_host_rsa_keys", false },
  { "[.]git", "/.git", true },
  { "?é", "/aé", true },
  { "?é", "/ae", false },
  { "[é]x", "/éx", true },
  { "a*\\*", "/ab*", true },
  { "a*\\*", "/abc", false },
  { "[!x]*", "/éa", true },
  { "[\\]]*", "/]a", true },
};

static void
test_match_table (void **state)
{
  guint failures = 0;

  for (guint i = 0; i < G_N_ELEMENTS (glob_cases); i++)
    {
      g_autofree char *message = NULL;
      g_autoptr (FbGlob) glob = fb_policy_glob_compile (glob_cases[i].pattern, &message);

      if (glob == NULL)
        fail_msg ("%s does not compile: %s", glob_cases[i].pattern, message);
      if (fb_policy_glob_match_path (glob, glob_cases[i].path) != glob_cases[i].match)
        {
          print_error ("%s vs %s: expected %s\n", glob_cases[i].pattern, glob_cases[i].path,
                       glob_cases[i].match ? "a match" : "no match");
          failures++;
        }
    }
  assert_int_equal (failures, 0);
}

/* Differential check of one component against fnmatch(3) (same syntax for
 * ASCII names: "*", "?", "[...]" with "!" negation, "\\" escapes), over a
 * fixed pseudo-random set: the matcher and its prefilters must agree. */
static void
test_against_fnmatch (void **state)
{
  static const char *const tokens[] = { "a", "b", ".", "*", "?", "[ab]", "[!a]", "[a-c]", "\\*", "\\?", "x" };
  static const char name_chars[] = "ab.*?cx";
  g_autoptr (GRand) rand = g_rand_new_with_seed (7);
  guint compared = 0;

  for (guint i = 0; i < 20000; i++)
    {
      g_autoptr (GString) pattern = g_string_new ("/");
      g_autoptr (GString) path = g_string_new ("/");
      guint n_tokens = (guint)g_rand_int_range (rand, 1, 6);
      guint n_chars = (guint)g_rand_int_range (rand, 1, 7);
      g_autofree char *message = NULL;
      g_autoptr (FbGlob) glob = NULL;
      bool ours;
      bool theirs;

      for (guint k = 0; k < n_tokens; k++)
        g_string_append (pattern, tokens[g_rand_int_range (rand, 0, G_N_ELEMENTS (tokens))]);
      for (guint k = 0; k < n_chars; k++)
        g_string_append_c (path, name_chars[g_rand_int_range (rand, 0, sizeof name_chars - 1)]);
      if (strstr (pattern->str, "**") != NULL || strcmp (path->str, "/.") == 0 || strcmp (path->str, "/..") == 0 ||
          strcmp (pattern->str, "/.") == 0 || strcmp (pattern->str, "/..") == 0)
        continue; /* not a valid component pattern or view path */
      glob = fb_policy_glob_compile (pattern->str, &message);
      if (glob == NULL)
        fail_msg ("%s does not compile: %s", pattern->str, message);
      ours = fb_policy_glob_match_path (glob, path->str);
      theirs = fnmatch (pattern->str + 1, path->str + 1, 0) == 0;
      if (ours != theirs)
        fail_msg ("%s vs %s: ours %d, fnmatch %d", pattern->str, path->str, ours, theirs);
      compared++;
    }
  assert_true (compared > 10000);
}

static void
test_root_never_matches (void **state)
{
  g_autofree char *message = NULL;
  g_autoptr (FbGlob) glob = fb_policy_glob_compile ("**", &message);

  assert_non_null (glob);
  assert_false (fb_policy_glob_match_path (glob, "/"));
}

/* in: a pattern; out: the start of the message that refuses it */
static const TestInOut bad_globs[] = {
  { "", "empty pattern" },
  { "/", "the pattern \"/\" names the root" },
  { "a[bc", "unclosed \"[\" at offset 1" },
  { "/x/a**b", "\"**\" must be a whole component (a/**/b), not part of a name at offset 4" },
  { "***", "\"**\" must be a whole component (a/**/b), not part of a name at offset 0" },
  { "/a//b", "\"//\" at offset 3" },
  { "/a/", "trailing \"/\" at offset 3" },
  { "/a/../b", "\"..\" component at offset 3" },
  { "./a", "\".\" component at offset 0" },
  { "a\\", "\"\\\" escapes nothing at offset 1" },
  { "[z-a]", "empty range in \"[...]\" at offset 1" },
  { "[\\", "unclosed \"[\" at offset 0" },
};

static void
test_compile_errors (void **state)
{
  for (guint i = 0; i < G_N_ELEMENTS (bad_globs); i++)
    {
      g_autofree char *message = NULL;
      g_autoptr (FbGlob) glob = fb_policy_glob_compile (bad_globs[i].in, &message);

      if (glob != NULL)
        fail_msg ("%s compiled but should not", bad_globs[i].in);
      assert_prefix (message, bad_globs[i].out);
    }
}

static void
test_could_match_below (void **state)
{
  static const struct
  {
    const char *pattern;
    const char *dir;
    bool below;
  } cases[] = {
    { "/a/b/c", "/a", true },      { "/a/b/c", "/a/b", true },     { "/a/b/c", "/a/b/c", false },
    { "/a/b/c", "/x", false },     { "/a/*/c", "/a/zz", true },    { "/a/**/c", "/a/1/2/3", true },
    { "/a/**", "/a", true },       { "/a/**", "/b", false },       { "**/x", "/anything/at/all", true },
    { "/a/[bc]/d", "/a/c", true }, { "/a/[bc]/d", "/a/e", false },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *message = NULL;
      g_autoptr (FbGlob) glob = fb_policy_glob_compile (cases[i].pattern, &message);
      FbPathComp comps[16];
      guint n = fb_policy_path_split (cases[i].dir, comps, G_N_ELEMENTS (comps));

      assert_non_null (glob);
      if (fb_policy_glob_could_match_below (glob, comps, n) != cases[i].below)
        fail_msg ("%s below %s: expected %d", cases[i].pattern, cases[i].dir, cases[i].below);
    }
}

/* Globs as rules, through every branch of the index: literal last component,
 * "*.EXT" (several extensions, dotted ones), and the rest. */
static void
test_globs_as_rules (void **state)
{
  g_autoptr (FbPolicy) policy =
    load_ok ("{ \"version\": 1, \"protected_names\": {}, \"rules\": [\n"
             "  { \"path\": \"/\", \"access\": \"write\", \"why\": \"all\" },\n"
             "  { \"glob\": \"id_rsa\", \"access\": \"hide\", \"why\": \"name\" },\n"
             "  { \"glob\": \"/etc/ssh/*_key\", \"access\": \"hide\", \"why\": \"rest\" },\n"
             "  { \"glob\": \"*.pem\", \"access\": \"deny\", \"why\": \"pem\" },\n"
             "  { \"glob\": \"*.tar.gz\", \"access\": \"deny\", \"why\": \"tgz\" },\n"
             "  { \"glob\": \"/ws/*.gz\", \"access\": \"hide\", \"why\": \"gz\" },\n"
             "  { \"glob\": \"**/secrets/**\", \"access\": \"hide\", \"why\": \"sec\" },\n"
             "  { \"glob\": \"/ws/?\", \"access\": \"deny\", \"why\": \"one\" },\n"
             "  { \"glob\": \"cache\", \"access\": \"deny\", \"why\": \"cache\" },\n"
             "  { \"glob\": \"/a/cache\", \"access\": \"hide\", \"why\": \"acache\" } ] }",
             NULL);
  static const TestInOut cases[] = {
    /* in: a path; out: the why of the rule that decides it */
    { "/home/u/.ssh/id_rsa", "name" },
    { "/etc/ssh/ssh_host_rsa_key", "rest" },
    { "/etc/ssh/ssh_config", "all" },
    { "/k/a.pem", "pem" },
    { "/k/a.b.pem", "pem" },
    { "/k/a.tar.gz", "tgz" },
    { "/ws/a.tar.gz", "gz" }, /* both match at one depth: hide beats deny */
    { "/ws/b.gz", "gz" },
    { "/x/b.gz", "all" },
    { "/x/secrets", "all" }, /* trailing ** is inside only */
    { "/x/secrets/a", "sec" },
    { "/x/secrets/a/b.pem", "sec" }, /* both match at depth 4: hide beats deny */
    { "/ws/q", "one" },
    { "/ws/qq", "all" },
    { "/b/cache", "cache" },
    { "/a/cache", "acache" }, /* two globs share a last component */
    { "/a/cache/x", "acache" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      FbPolicyDecision d;

      fb_policy_decide (policy, cases[i].in, &d);
      if (strcmp (d.rule->why, cases[i].out) != 0)
        fail_msg ("%s decided by %s, expected %s", cases[i].in, d.rule->why, cases[i].out);
    }
}

/* Variables in globs are escaped: a workspace named "[x]" is literal. */
static void
test_glob_variables_are_literal (void **state)
{
  FbPolicyVars vars = { .workspace = "/srv/[x]*", .home = "/h" };
  g_autoptr (FbPolicy) policy =
    load_ok ("{ \"version\": 1, \"rules\": [\n"
             "  { \"path\": \"/\", \"access\": \"write\", \"why\": \"all\" },\n"
             "  { \"glob\": \"${WORKSPACE}/*.o\", \"access\": \"hide\", \"why\": \"objects\" } ] }",
             &vars);
  guint n = 0;
  const FbPolicyRule *rules = fb_policy_get_rules (policy, &n);
  FbPolicyDecision d;

  assert_int_equal (n, 2);
  assert_string_equal (rules[1].glob, "/srv/\\[x\\]\\*/*.o");
  fb_policy_decide (policy, "/srv/[x]*/a.o", &d);
  assert_string_equal (d.rule->why, "objects");
  fb_policy_decide (policy, "/srv/x/a.o", &d);
  assert_string_equal (d.rule->why, "all");
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_match_table), cmocka_unit_test (test_against_fnmatch),
                  cmocka_unit_test (test_root_never_matches), cmocka_unit_test (test_compile_errors),
                  cmocka_unit_test (test_could_match_below), cmocka_unit_test (test_globs_as_rules),
                  cmocka_unit_test (test_glob_variables_are_literal))
