/* fusebox — variables (${WORKSPACE} ${HOME} ${CWD} ${RUN}, "$$"), the
 * normalization of their values and of paths, and
 * fb_policy_vars_init_from_env against the real process environment. */
#include "tests/unit/test-policy-util.h"
#include "tests/lib/test-table.h"

#include <glib/gstdio.h>
#include <pwd.h>
#include <unistd.h>

static void
test_normalize (void **state)
{
  static const struct
  {
    const char *in;
    const char *out; /* NULL: refused */
    bool normalized;
  } cases[] = {
    { "/", "/", true },          { "/a/b", "/a/b", true }, { "/a/b/", "/a/b", false },   { "//a//b", "/a/b", false },
    { "/a/./b", "/a/b", false }, { "/.", "/", false },     { "/a/../b", NULL, false },   { "/..", NULL, false },
    { "a/b", NULL, false },      { "", NULL, false },      { "/a/..b", "/a/..b", true }, { "/a/.b", "/a/.b", true },
    { "///", "/", false },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *out = fb_policy_path_normalize (cases[i].in);

      assert_int_equal (fb_policy_path_is_normalized (cases[i].in), cases[i].normalized);
      if (cases[i].out == NULL)
        assert_null (out);
      else
        {
          assert_non_null (out);
          assert_string_equal (out, cases[i].out);
        }
    }
  assert_true (fb_policy_path_has_prefix ("/a/b", "/a"));
  assert_true (fb_policy_path_has_prefix ("/a", "/a"));
  assert_true (fb_policy_path_has_prefix ("/a", "/"));
  assert_false (fb_policy_path_has_prefix ("/ab", "/a"));
  assert_false (fb_policy_path_has_prefix ("/a", "/a/b"));
}

static char *
expand (const char *text, const FbPolicyVars *vars, FbExpandMode mode, char **ret_message)
{
  return fb_policy_vars_expand (text, vars, mode, ret_message);
}

static void
test_expand (void **state)
{
  FbPolicyVars vars = { .workspace = "/ws/", .home = "//home//u", .cwd = "/", .run = NULL };
  static const TestInOut cases[] = {
    { "${WORKSPACE}", "/ws" }, /* values are normalized */
    { "${WORKSPACE}/src", "/ws/src" },
    { "${HOME}/.cache", "/home/u/.cache" },
    { "${CWD}/x", "/x" }, /* "/" before "/" adds nothing */
    { "${CWD}", "/" },
    { "/a$b", "/a$b" },            /* a lone "$" is literal */
    { "/a$$b", "/a$b" },           /* "$$" is one "$" */
    { "/a$${HOME}", "/a${HOME}" }, /* ...so "${" can be written */
    { "/a$", "/a$" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *message = NULL;
      g_autofree char *out = expand (cases[i].in, &vars, FB_EXPAND_PATH, &message);

      if (out == NULL)
        fail_msg ("%s: %s", cases[i].in, message);
      assert_string_equal (out, cases[i].out);
    }
}

static void
test_expand_errors (void **state)
{
  FbPolicyVars vars = { .workspace = "/ws", .home = "relative/home", .cwd = "/a/../b", .run = NULL };
  static const TestInOut cases[] = {
    /* out: the message's start */
    { "${RUN}/x", "${RUN} is not available here" },
    { "${FOO}", "unknown variable ${FOO}; valid: ${WORKSPACE}, ${HOME}, ${CWD}, ${RUN}" },
    { "${workspace}", "unknown variable ${workspace}; valid:" },
    { "${}", "unknown variable ${}; valid:" },
    { "/x/${HOME", "unclosed \"${\" at offset 3" },
    { "${HOME}", "${HOME} is \"relative/home\", which is not an absolute path without \"..\"" },
    { "${CWD}", "${CWD} is \"/a/../b\", which is not an absolute path without \"..\"" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *message = NULL;
      g_autofree char *out = expand (cases[i].in, &vars, FB_EXPAND_PATH, &message);

      if (out != NULL)
        fail_msg ("%s expanded to %s", cases[i].in, out);
      assert_prefix (message, cases[i].out);
    }
  /* NULL vars: every variable is unavailable */
  {
    g_autofree char *message = NULL;
    g_autofree char *out = expand ("${HOME}", NULL, FB_EXPAND_PATH, &message);

    assert_null (out);
    assert_string_equal (message, "${HOME} is not available here");
  }
}

static void
test_glob_mode_escapes (void **state)
{
  FbPolicyVars vars = { .workspace = "/w[1]/a*b?\\c" };
  g_autofree char *message = NULL;
  g_autofree char *out = expand ("${WORKSPACE}/**/*.o", &vars, FB_EXPAND_GLOB, &message);

  assert_string_equal (out, "/w\\[1\\]/a\\*b\\?\\\\c/**/*.o");
}

static void
test_escape_round_trip (void **state)
{
  const char *texts[] = { "/plain", "/a$b", "/a${HOME}", "$$", "/$" };

  for (guint i = 0; i < G_N_ELEMENTS (texts); i++)
    {
      g_autofree char *escaped = fb_policy_vars_escape (texts[i]);
      g_autofree char *message = NULL;
      g_autofree char *back = expand (escaped, NULL, FB_EXPAND_PATH, &message);

      assert_non_null (back);
      assert_string_equal (back, texts[i]);
    }
}

/* Variables in every field that takes them, through the loader. */
static void
test_variables_in_policy (void **state)
{
  FbPolicyVars vars = { .workspace = "/home/u/ws/", .home = "/home/u", .cwd = "/home/u/ws/src", .run = "/run/r" };
  g_autoptr (FbPolicy) policy = load_ok (
    "{ \"version\": 1, \"rules\": [\n"
    "  { \"path\": \"${WORKSPACE}\", \"access\": \"write\", \"why\": \"ws\" },\n"
    "  { \"path\": \"${CWD}/build\", \"access\": \"read\", \"why\": \"cwd\" },\n"
    "  { \"path\": \"${HOME}/.cache\", \"access\": \"write\", \"source\": \"${RUN}/cache\", \"why\": \"c\" },\n"
    "  { \"glob\": \"${WORKSPACE}/**/*.o\", \"access\": \"hide\", \"why\": \"objs\" },\n"
    "  { \"path\": \"/lit$$eral\", \"access\": \"read\", \"why\": \"dollar\" } ] }",
    &vars);
  guint n = 0;
  const FbPolicyRule *rules = fb_policy_get_rules (policy, &n);
  const FbPolicyMount *mounts;
  FbPolicyDecision d;

  assert_int_equal (n, 5);
  assert_string_equal (rules[0].path, "/home/u/ws");
  assert_string_equal (rules[1].path, "/home/u/ws/src/build");
  assert_string_equal (rules[2].path, "/home/u/.cache");
  assert_string_equal (rules[2].source, "/run/r/cache");
  assert_string_equal (rules[3].glob, "/home/u/ws/**/*.o");
  assert_string_equal (rules[4].path, "/lit$eral");

  fb_policy_decide (policy, "/home/u/ws/src/x.o", &d);
  assert_string_equal (d.rule->why, "objs");
  fb_policy_decide (policy, "/home/u/.cache/pip", &d);
  assert_string_equal (d.mount->host_path, "/run/r/cache");
  mounts = fb_policy_get_mounts (policy, &n);
  assert_int_equal (n, 2);
  assert_string_equal (mounts[1].view_path, "/home/u/.cache");
}

static void
test_init_from_env (void **state)
{
  g_autofree char *tmp = g_dir_make_tmp ("fb-vars-XXXXXX", NULL);
  g_autofree char *old_cwd = g_get_current_dir ();
  g_autofree char *old_home = g_strdup (g_getenv ("HOME"));
  g_autofree char *sub = g_build_filename (tmp, "sub", NULL);
  g_autofree char *expect_ws = NULL;
  g_autofree char *expect_run = NULL;
  FbPolicyVarsStorage storage;
  struct passwd *pw = getpwuid (getuid ());

  assert_non_null (tmp);
  assert_int_equal (g_mkdir (sub, 0700), 0);
  assert_int_equal (chdir (sub), 0);

  /* HOME from the environment, normalized */
  g_setenv ("HOME", "/home//someone/", TRUE);
  fb_policy_vars_init_from_env (&storage, "../ws/", "run");
  expect_ws = g_build_filename (tmp, "ws", NULL);
  expect_run = g_build_filename (sub, "run", NULL);
  assert_string_equal (storage.vars.home, "/home/someone");
  assert_string_equal (storage.vars.cwd, sub);
  assert_string_equal (storage.vars.workspace, expect_ws); /* relative to the cwd, ".." folded */
  assert_string_equal (storage.vars.run, expect_run);
  fb_policy_vars_clear (&storage);
  assert_null (storage.vars.home);
  assert_null (storage.owned[0]);

  /* no workspace: the cwd; no run: NULL; a relative HOME: the passwd entry */
  g_setenv ("HOME", "relative", TRUE);
  fb_policy_vars_init_from_env (&storage, NULL, NULL);
  assert_string_equal (storage.vars.workspace, sub);
  assert_null (storage.vars.run);
  assert_non_null (pw);
  {
    g_autofree char *pw_home = fb_policy_path_normalize (pw->pw_dir);

    assert_string_equal (storage.vars.home, pw_home);
  }
  fb_policy_vars_clear (&storage);

  g_unsetenv ("HOME");
  fb_policy_vars_init_from_env (&storage, "/abs/ws", NULL);
  assert_non_null (storage.vars.home);
  assert_string_equal (storage.vars.workspace, "/abs/ws");
  fb_policy_vars_clear (&storage);

  if (old_home != NULL)
    g_setenv ("HOME", old_home, TRUE);
  assert_int_equal (chdir (old_cwd), 0);
  g_rmdir (sub);
  g_rmdir (tmp);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_normalize), cmocka_unit_test (test_expand),
                  cmocka_unit_test (test_expand_errors), cmocka_unit_test (test_glob_mode_escapes),
                  cmocka_unit_test (test_escape_round_trip), cmocka_unit_test (test_variables_in_policy),
                  cmocka_unit_test (test_init_from_env))
