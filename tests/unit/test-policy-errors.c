/* fusebox — every kind of policy error, with its exact "FILE:LINE:COL: FIELD"
 * prefix and code; the same errors without positions from a JsonNode; and
 * the fixtures under fixtures/policies/ (good-*.json load, bad-*.json fail
 * with the message in the neighbouring .error file). */
#include "tests/unit/test-policy-util.h"

#include <glib/gstdio.h>
#include <unistd.h>

typedef struct
{
  const char *name;
  const char *text;
  FbPolicyError code;
  const char *prefix; /* the message starts with this */
} ErrorCase;

#define RULE(x) "{ \"version\": 1, \"rules\": [\n  " x " ] }"

static const ErrorCase error_cases[] = {
  /* syntax: the tokenizer's position */
  { "syntax", "{ \"version\": 1, \"rules\": [ }", FB_POLICY_ERROR_SYNTAX,
    "test.json:1:28: invalid JSON: expected a value" },
  { "trailing comma", "{ \"version\": 1, \"rules\": [],\n}", FB_POLICY_ERROR_SYNTAX,
    "test.json:2:1: invalid JSON: trailing comma before \"}\"" },
  { "empty", "  \n ", FB_POLICY_ERROR_SYNTAX, "test.json:2:2: invalid JSON: the text is empty" },
  { "text after", "{ \"version\": 1, \"rules\": [] } x", FB_POLICY_ERROR_SYNTAX,
    "test.json:1:31: invalid JSON: unexpected text after the end" },
  { "invalid utf-8", "{ \"version\": 1, \"rules\": [ { \"path\": \"/\xff\" } ] }", FB_POLICY_ERROR_SYNTAX,
    "test.json:1:40: invalid JSON: invalid UTF-8" },
  { "NUL escape", "{ \"version\": 1, \"rules\": [ { \"path\": \"/a\\u0000b\" } ] }", FB_POLICY_ERROR_SYNTAX,
    "test.json:1:41: invalid JSON: \\u0000 is not allowed" },
  { "too deep",
    "{ \"version\": 1, \"rules\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]] }",
    FB_POLICY_ERROR_SYNTAX, "test.json:1:57: invalid JSON: nested deeper than 32 levels" },
  { "huge number", "{ \"version\": 99999999999999999999999, \"rules\": [] }", FB_POLICY_ERROR_SYNTAX,
    "test.json:1:14: invalid JSON: the number is too large" },
  { "comment", "{ \"version\": 1, // no\n \"rules\": [] }", FB_POLICY_ERROR_SYNTAX,
    "test.json:1:17: invalid JSON: expected a key in double quotes" },
  /* schema */
  { "duplicate key", "{ \"version\": 1,\n  \"version\": 1, \"rules\": [] }", FB_POLICY_ERROR_SCHEMA,
    "test.json:2:3: version: duplicate key" },
  { "top level not an object", "[1]", FB_POLICY_ERROR_SCHEMA, "test.json:1:1: (top level): expected an object" },
  { "unknown top-level key", "{ \"version\": 1,\n  \"netwrok\": \"none\", \"rules\": [] }", FB_POLICY_ERROR_SCHEMA,
    "test.json:2:3: netwrok: unknown key; did you mean \"network\"? valid: version, network, protected_names, log, "
    "rules" },
  { "unknown rule key", RULE ("{ \"path\": \"/\", \"acess\": \"read\", \"why\": \"x\" }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:2:18: rules[0].acess: unknown key; did you mean \"access\"?" },
  { "wrong type", RULE ("{ \"path\": \"/\", \"access\": \"read\", \"why\": 3 }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:2:43: rules[0].why: expected a string, got an integer" },
  { "version as string", "{ \"version\": \"1\", \"rules\": [] }", FB_POLICY_ERROR_SCHEMA,
    "test.json:1:14: version: expected the integer 1, got a string" },
  { "rules not an array", "{ \"version\": 1, \"rules\": {} }", FB_POLICY_ERROR_SCHEMA,
    "test.json:1:26: rules: expected an array of rules, got an object" },
  { "rule not an object", "{ \"version\": 1, \"rules\": [ \"x\" ] }", FB_POLICY_ERROR_SCHEMA,
    "test.json:1:28: rules[0]: expected a rule object" },
  { "missing rules", "{ \"version\": 1 }", FB_POLICY_ERROR_SCHEMA, "test.json:1:1: rules: missing" },
  { "missing why", RULE ("{ \"path\": \"/\", \"access\": \"read\" }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:2:3: rules[0].why: missing; every rule says why" },
  { "missing access", RULE ("{ \"path\": \"/\", \"why\": \"x\" }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:2:3: rules[0].access: missing; valid: write, read, deny, hide" },
  { "path and glob", RULE ("{ \"path\": \"/\", \"glob\": \"*.x\", \"access\": \"deny\", \"why\": \"x\" }"),
    FB_POLICY_ERROR_SCHEMA, "test.json:2:18: rules[0].glob: a rule has either \"path\" or \"glob\", not both" },
  { "neither path nor glob", RULE ("{ \"access\": \"deny\", \"why\": \"x\" }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:2:3: rules[0].path: missing" },
  /* values */
  { "unknown access",
    "{ \"version\": 1, \"rules\": [\n"
    "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"a\" },\n"
    "  { \"path\": \"/b\", \"access\": \"read\", \"why\": \"a\" },\n"
    "  { \"path\": \"/c\", \"access\": \"read\", \"why\": \"a\" },\n"
    "  { \"path\": \"/d\", \"access\": \"wirte\", \"why\": \"a\" } ] }",
    FB_POLICY_ERROR_VALUE,
    "test.json:5:29: rules[3].access: unknown access \"wirte\"; valid: write, read, deny, hide" },
  { "empty why", RULE ("{ \"path\": \"/\", \"access\": \"read\", \"why\": \"\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:2:43: rules[0].why: empty" },
  { "unknown network", "{ \"version\": 1, \"network\": \"full\", \"rules\": [] }", FB_POLICY_ERROR_VALUE,
    "test.json:1:28: network: unknown network \"full\"; valid: none, host" },
  { "relative path", RULE ("{ \"path\": \"home/u\", \"access\": \"deny\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:2:13: rules[0].path: \"home/u\" is not absolute" },
  { "dot-dot", RULE ("{ \"path\": \"/a/../b\", \"access\": \"deny\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:2:13: rules[0].path: \"/a/../b\" contains \"..\"" },
  { "not normalized", RULE ("{ \"path\": \"/a//b/\", \"access\": \"deny\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:2:13: rules[0].path: \"/a//b/\" is not normalized; did you mean /a/b?" },
  { "not normalized after expansion", RULE ("{ \"path\": \"/ü/${HOME}/\", \"access\": \"deny\", \"why\": \"x\" }"),
    FB_POLICY_ERROR_VALUE,
    "test.json:2:13: rules[0].path: \"/ü/${HOME}/\" (expanded: \"/ü//home/u/\") is not normalized; did you mean "
    "/ü/home/u?" },
  { "glob grants", RULE ("{ \"glob\": \"*.pem\", \"access\": \"read\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:2:32: rules[0].access: a glob may only deny or hide, not read" },
  { "bad glob", RULE ("{ \"glob\": \"a[b\", \"access\": \"deny\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:2:13: rules[0].glob: invalid glob \"a[b\": unclosed \"[\" at offset 1" },
  { "** inside a name", RULE ("{ \"glob\": \"/x/a**b\", \"access\": \"deny\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:2:13: rules[0].glob: invalid glob \"/x/a**b\": \"**\" must be a whole component" },
  { "source on a glob", RULE ("{ \"glob\": \"*.x\", \"access\": \"deny\", \"why\": \"x\", \"source\": \"private\" }"),
    FB_POLICY_ERROR_VALUE, "test.json:2:50: rules[0].source: only a path rule may have a source" },
  { "bad source", RULE ("{ \"path\": \"/x\", \"access\": \"deny\", \"why\": \"x\", \"source\": \"rel\" }"),
    FB_POLICY_ERROR_VALUE,
    "test.json:2:59: rules[0].source: \"rel\" is neither \"private\" nor an absolute host path" },
  { "unnormalized source", RULE ("{ \"path\": \"/x\", \"access\": \"deny\", \"why\": \"x\", \"source\": \"/srv/\" }"),
    FB_POLICY_ERROR_VALUE, "test.json:2:59: rules[0].source: \"/srv/\" is not normalized; did you mean /srv?" },
  { "unknown variable", RULE ("{ \"path\": \"${FOO}/x\", \"access\": \"read\", \"why\": \"x\" }"),
    FB_POLICY_ERROR_VALUE,
    "test.json:2:13: rules[0].path: unknown variable ${FOO}; valid: ${WORKSPACE}, ${HOME}, ${CWD}, ${RUN}" },
  { "unavailable variable", RULE ("{ \"path\": \"${RUN}/x\", \"access\": \"read\", \"why\": \"x\" }"),
    FB_POLICY_ERROR_VALUE, "test.json:2:13: rules[0].path: ${RUN} is not available here" },
  { "unclosed variable", RULE ("{ \"path\": \"/${HOME\", \"access\": \"read\", \"why\": \"x\" }"),
    FB_POLICY_ERROR_VALUE, "test.json:2:13: rules[0].path: unclosed \"${\" at offset 1" },
  { "protected write", "{ \"version\": 1, \"protected_names\": { \".git\": \"write\" }, \"rules\": [] }",
    FB_POLICY_ERROR_VALUE,
    "test.json:1:46: protected_names[.git]: \"write\" does not protect anything; remove the name" },
  { "protected path", "{ \"version\": 1, \"protected_names\": { \"a/b\": \"hide\" }, \"rules\": [] }",
    FB_POLICY_ERROR_VALUE, "test.json:1:38: protected_names[a/b]: a protected name is one path component" },
  { "protected dot-dot", "{ \"version\": 1, \"protected_names\": { \"..\": \"hide\" }, \"rules\": [] }",
    FB_POLICY_ERROR_VALUE, "test.json:1:38: protected_names[..]: a protected name is one path component" },
  { "protected access", "{ \"version\": 1, \"protected_names\": { \".git\": \"nope\" }, \"rules\": [] }",
    FB_POLICY_ERROR_VALUE, "test.json:1:46: protected_names[.git]: unknown access \"nope\"; valid: hide, deny, read" },
  { "protected not an object", "{ \"version\": 1, \"protected_names\": [\".git\"], \"rules\": [] }",
    FB_POLICY_ERROR_SCHEMA, "test.json:1:36: protected_names: expected an object" },
  /* duplicates */
  { "duplicate rule",
    "{ \"version\": 1, \"rules\": [\n"
    "  { \"path\": \"/x\", \"access\": \"read\", \"why\": \"x\" },\n"
    "  { \"path\": \"/x\", \"access\": \"read\", \"why\": \"y\" } ] }",
    FB_POLICY_ERROR_DUPLICATE,
    "test.json:3:13: rules[1].path: duplicate of rules[0] at test.json:2:3 (same path \"/x\" and access read)" },
  { "duplicate after expansion",
    "{ \"version\": 1, \"rules\": [\n"
    "  { \"path\": \"/home/u/ws\", \"access\": \"write\", \"why\": \"x\" },\n"
    "  { \"path\": \"${WORKSPACE}\", \"access\": \"write\", \"why\": \"y\" } ] }",
    FB_POLICY_ERROR_DUPLICATE, "test.json:3:13: rules[1].path: duplicate of rules[0] at test.json:2:3" },
  { "duplicate glob",
    "{ \"version\": 1, \"rules\": [\n"
    "  { \"glob\": \"*.pem\", \"access\": \"deny\", \"why\": \"x\" },\n"
    "  { \"glob\": \"*.pem\", \"access\": \"deny\", \"why\": \"y\" } ] }",
    FB_POLICY_ERROR_DUPLICATE, "test.json:3:13: rules[1].glob: duplicate of rules[0] at test.json:2:3" },
  { "two sources",
    "{ \"version\": 1, \"rules\": [\n"
    "  { \"path\": \"/x\", \"access\": \"read\", \"why\": \"x\", \"source\": \"private\" },\n"
    "  { \"path\": \"/x\", \"access\": \"write\", \"why\": \"y\", \"source\": \"/srv\" } ] }",
    FB_POLICY_ERROR_DUPLICATE,
    "test.json:3:60: rules[1].source: /x already has the source \"private\" (rules[0] at test.json:2:3)" },
  /* version */
  { "missing version", "{ \"rules\": [] }", FB_POLICY_ERROR_VERSION, "test.json:1:1: version: missing" },
  { "unknown version", "{ \"version\": 2, \"rules\": [], \"newkey\": 1 }", FB_POLICY_ERROR_VERSION,
    "test.json:1:14: version: unknown version 2; this fusebox reads version 1" },
};

static const char *
case_text (const char *name)
{
  for (guint i = 0; i < G_N_ELEMENTS (error_cases); i++)
    if (strcmp (error_cases[i].name, name) == 0)
      return error_cases[i].text;
  fail_msg ("no case %s", name);
  return NULL;
}

static void
test_error_table (void **state)
{
  for (guint i = 0; i < G_N_ELEMENTS (error_cases); i++)
    {
      const ErrorCase *c = &error_cases[i];
      FbPolicyVars vars = test_vars;
      g_autoptr (GError) error = NULL;
      g_autoptr (FbPolicy) policy = NULL;

      vars.run = NULL; /* for "${RUN} is not available here" */
      policy = fb_policy_load_data (c->text, -1, "test.json", &vars, &error);

      if (policy != NULL)
        fail_msg ("%s: loaded", c->name);
      if (!g_error_matches (error, FB_POLICY_ERROR, (gint)c->code))
        fail_msg ("%s: expected code %d, got %d: %s", c->name, c->code, error->code, error->message);
      if (!g_str_has_prefix (error->message, c->prefix))
        fail_msg ("%s:\n  got      %s\n  expected %s", c->name, error->message, c->prefix);
    }
}

/* The example of fusebox-policy(5), ERRORS, in full. */
static void
test_manual_example_message (void **state)
{
  g_autofree char *message = load_error (case_text ("unknown access"), &test_vars, FB_POLICY_ERROR_VALUE);

  assert_string_equal (message,
                       "test.json:5:29: rules[3].access: unknown access \"wirte\"; valid: write, read, deny, hide");
}

/* Without text (fb_policy_load_json) messages name the origin and the JSON
 * path only. */
static void
test_json_node_errors (void **state)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) policy = NULL;

  assert_true (json_parser_load_from_data (parser, case_text ("unknown access"), -1, NULL));
  policy = fb_policy_load_json (json_parser_get_root (parser), "<sandbox>", &test_vars, &error);
  assert_null (policy);
  assert_string_equal (error->message,
                       "<sandbox>: rules[3].access: unknown access \"wirte\"; valid: write, read, deny, hide");

  g_clear_error (&error);
  policy = fb_policy_load_json (json_parser_get_root (parser), NULL, &test_vars, &error);
  assert_prefix (error->message, "rules[3].access: unknown access");
}

static void
test_json_node_origins (void **state)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) policy = NULL;
  const FbPolicyRule *rules;

  assert_true (json_parser_load_from_data (
    parser, "{\"version\": 1, \"rules\": [{\"path\": \"/\", \"access\": \"read\", \"why\": \"w\"}]}", -1, NULL));
  policy = fb_policy_load_json (json_parser_get_root (parser), "<sandbox>", NULL, &error);
  assert_non_null (policy);
  rules = fb_policy_get_rules (policy, NULL);
  assert_string_equal (rules[0].origin, "<sandbox>:rules[0]");
  assert_string_equal (fb_policy_get_origin (policy), "<sandbox>");
}

/* A policy rebuilt from another's JSON with rules added (as `run` adds its
 * own) names the rules it kept by their FILE:LINE:COL again, and only
 * those: an added rule, or one changed at the same place, keeps its JSON
 * path. */
static void
test_rebuilt_keeps_origins (void **state)
{
  const char *text = "{ \"version\": 1,\n"
                     "  \"network\": { \"allow\": [ { \"host\": \"example.com\", \"why\": \"docs\" } ] },\n"
                     "  \"rules\": [\n"
                     "    { \"path\": \"/\", \"access\": \"read\", \"why\": \"tools\" },\n"
                     "    { \"path\": \"/srv\", \"access\": \"deny\", \"why\": \"data\" } ] }\n";
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) base = fb_policy_load_data (text, -1, "p.json", &test_vars, &error);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (FbPolicy) rebuilt = NULL;
  g_autofree char *json = NULL;
  const FbPolicyRule *rules;
  const FbPolicyNetRule *net;
  JsonArray *array;
  JsonObject *added;
  guint n;

  assert_non_null (base);
  json = fb_policy_to_json (base);
  assert_true (json_parser_load_from_data (parser, json, -1, NULL));
  array = json_object_get_array_member (json_node_get_object (json_parser_get_root (parser)), "rules");
  added = json_object_new ();
  json_object_set_string_member (added, "path", "/home");
  json_object_set_string_member (added, "access", "hide");
  json_object_set_string_member (added, "why", "added");
  json_array_add_object_element (array, added);
  /* the second rule changed in place: not the file's any more */
  json_object_set_string_member (json_array_get_object_element (array, 1), "access", "hide");
  rebuilt = fb_policy_load_json (json_parser_get_root (parser), "p.json + command line", &test_vars, &error);
  assert_non_null (rebuilt);
  fb_policy_keep_origins (rebuilt, base);

  rules = fb_policy_get_rules (rebuilt, &n);
  assert_int_equal (n, 3);
  assert_string_equal (rules[0].origin, "p.json:4:5");
  assert_string_equal (rules[1].origin, "p.json + command line:rules[1]");
  assert_string_equal (rules[2].origin, "p.json + command line:rules[2]");
  net = fb_policy_net_get_rules (rebuilt, &n);
  for (guint i = 0; i < n; i++)
    if (net[i].index == 0 && net[i].allow)
      {
        assert_string_equal (net[i].origin, "p.json:2:27");
        return;
      }
  fail_msg ("the rebuilt policy has no network.allow[0]");
}

static void
test_io_and_not_found (void **state)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) policy = fb_policy_load_file ("/nonexistent/policy.json", NULL, &error);
  g_autofree char *json = NULL;

  assert_null (policy);
  assert_true (g_error_matches (error, FB_POLICY_ERROR, FB_POLICY_ERROR_IO));
  assert_prefix (error->message, "/nonexistent/policy.json: cannot read the policy: ");

  g_clear_error (&error);
  policy = fb_policy_load_spec ("builtin:nope", &test_vars, &error);
  assert_null (policy);
  assert_true (g_error_matches (error, FB_POLICY_ERROR, FB_POLICY_ERROR_NOT_FOUND));
  assert_string_equal (error->message, "builtin:nope: no such built-in policy; valid: default, read-only, host, agent");

  g_clear_error (&error);
  json = fb_policy_builtin_json ("nope", &test_vars, &error);
  assert_null (json);
  assert_true (g_error_matches (error, FB_POLICY_ERROR, FB_POLICY_ERROR_NOT_FOUND));
}

static void
test_load_file_positions (void **state)
{
  g_autofree char *path = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) policy = NULL;
  int fd = g_file_open_tmp ("fb-policy-XXXXXX.json", &path, NULL);

  assert_true (fd >= 0);
  close (fd);
  assert_true (g_file_set_contents (
    path, "{\n  \"version\": 1,\n  \"rules\": [\n    { \"path\": \"/\", \"access\": \"rd\", \"why\": \"x\" }\n  ]\n}\n",
    -1, NULL));
  policy = fb_policy_load_file (path, NULL, &error);
  g_unlink (path);
  assert_null (policy);
  {
    g_autofree char *expected = g_strdup_printf ("%s:4:30: rules[0].access: unknown access \"rd\"", path);

    assert_prefix (error->message, expected);
  }
}

/* fixtures/policies: good-*.json load with the test variables; bad-*.json
 * fail with the message in bad-*.error (one line, exact). */
static void
test_fixtures (void **state)
{
  const char *root = g_getenv ("FUSEBOX_SOURCE_ROOT");
  g_autofree char *dir_path = NULL;
  g_autoptr (GDir) dir = NULL;
  const char *name;
  guint good = 0;
  guint bad = 0;

  if (root == NULL)
    {
      if (g_getenv ("FUSEBOX_TESTS_MUST_RUN"))
        fail_msg ("FUSEBOX_SOURCE_ROOT is not set: run with 'meson test'");
      fprintf (stderr, "skipped: FUSEBOX_SOURCE_ROOT is not set: run with 'meson test'\n");
      skip ();
    }
  dir_path = g_build_filename (root, "fixtures", "policies", NULL);
  dir = g_dir_open (dir_path, 0, NULL);
  assert_non_null (dir);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir_path, name, NULL);
      g_autofree char *text = NULL;
      gsize len = 0;
      g_autoptr (GError) error = NULL;
      g_autoptr (FbPolicy) policy = NULL;
      FbPolicyVars vars = test_vars;

      if (!g_str_has_suffix (name, ".json"))
        continue;
      assert_true (g_file_get_contents (path, &text, &len, NULL));
      vars.run = NULL; /* the fixtures must load without a run directory too */
      policy = fb_policy_load_data (text, (gssize)len, name, &vars, &error);
      if (g_str_has_prefix (name, "bad-"))
        {
          g_autofree char *error_path = g_strdup_printf ("%.*s.error", (int)(strlen (path) - 5), path);
          g_autofree char *expected = NULL;

          if (!g_file_get_contents (error_path, &expected, NULL, NULL))
            fail_msg ("%s has no .error file", name);
          g_strchomp (expected);
          if (policy != NULL)
            fail_msg ("%s loaded", name);
          if (strcmp (error->message, expected) != 0)
            fail_msg ("%s:\n  got      %s\n  expected %s", name, error->message, expected);
          bad++;
        }
      else
        {
          if (policy == NULL)
            fail_msg ("%s: %s", name, error->message);
          good++;
        }
    }
  assert_true (good >= 5);
  assert_true (bad >= 5);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_error_table), cmocka_unit_test (test_manual_example_message),
                  cmocka_unit_test (test_json_node_errors), cmocka_unit_test (test_json_node_origins),
                  cmocka_unit_test (test_rebuilt_keeps_origins), cmocka_unit_test (test_io_and_not_found),
                  cmocka_unit_test (test_load_file_positions), cmocka_unit_test (test_fixtures))
