/* fusebox — the policy's "log" section (the access log's budget, and the
 * journal): sizes as bytes or with K/M/G, every mistake reported at its
 * FILE:LINE:COL, the values kept through fb_policy_to_json (a run re-loads
 * its policy from it) and a narrowed policy's budget its base's. */
#include "tests/unit/test-policy-util.h"

#define WITH_LOG(x) "{ \"version\": 1,\n  \"log\": " x ",\n  \"rules\": [] }"

static void
test_sizes (void **state)
{
  static const struct
  {
    const char *text;
    guint64 bytes;
  } ok[] = {
    { "4096", 4096 },
    { "64K", 64 * 1024 },
    { "64KiB", 64 * 1024 },
    { "16M", 16 * 1024 * 1024 },
    { "256mb", 256 * 1024 * 1024 },
    { "1G", 1024 * 1024 * 1024 },
    { "3GiB", (guint64)3 * 1024 * 1024 * 1024 },
  };
  static const char *const bad[] = { "", "0", "-1", "1.5M", "12Q", "M", "1 M", "99999999999999999999", "17179869184G" };
  guint64 v;

  for (guint i = 0; i < G_N_ELEMENTS (ok); i++)
    {
      assert_true (fb_policy_parse_size (ok[i].text, &v));
      assert_int_equal (v, ok[i].bytes);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    if (fb_policy_parse_size (bad[i], &v))
      fail_msg ("\"%s\" parsed as a size", bad[i]);
}

static void
test_section (void **state)
{
  g_autoptr (FbPolicy) p =
    load_ok (WITH_LOG ("{ \"file_size\": \"32K\", \"max_size\": 1048576, \"journal\": true }"), &test_vars);
  g_autoptr (FbPolicy) none = load_ok ("{ \"version\": 1, \"rules\": [] }", &test_vars);
  FbPolicyLogLimits l;

  fb_policy_get_log_limits (p, &l);
  assert_int_equal (l.file_size, 32 * 1024);
  assert_int_equal (l.max_size, 1024 * 1024);
  assert_true (l.journal);
  fb_policy_get_log_limits (none, &l);
  assert_int_equal (l.file_size, 0);
  assert_int_equal (l.max_size, 0);
  assert_false (l.journal);

  /* through the effective policy's JSON, as `fusebox run` re-loads it */
  {
    g_autofree char *json = fb_policy_to_json (p);
    g_autoptr (FbPolicy) again = load_ok (json, &test_vars);

    fb_policy_get_log_limits (again, &l);
    assert_int_equal (l.file_size, 32 * 1024);
    assert_int_equal (l.max_size, 1024 * 1024);
    assert_true (l.journal);
  }
  /* a call's sandbox narrows access, never the server's log */
  {
    g_autoptr (FbPolicy) narrow = load_ok (WITH_LOG ("{ \"max_size\": \"64K\" }"), &test_vars);
    g_autoptr (FbPolicy) n = narrow_ok (p, narrow);

    fb_policy_get_log_limits (n, &l);
    assert_int_equal (l.max_size, 1024 * 1024);
  }
}

static void
test_errors (void **state)
{
  static const struct
  {
    const char *log;
    FbPolicyError code;
    const char *prefix;
  } cases[] = {
    { "[]", FB_POLICY_ERROR_SCHEMA, "test.json:2:10: log: expected an object" },
    { "{ \"max_sise\": \"1M\" }", FB_POLICY_ERROR_SCHEMA,
      "test.json:2:12: log.max_sise: unknown key; did you mean \"max_size\"?" },
    { "{ \"max_size\": \"lots\" }", FB_POLICY_ERROR_VALUE, "test.json:2:24: log.max_size: \"lots\" is not a size" },
    { "{ \"max_size\": 0 }", FB_POLICY_ERROR_VALUE, "test.json:2:24: log.max_size: 0 is not a size" },
    { "{ \"max_size\": true }", FB_POLICY_ERROR_SCHEMA, "test.json:2:24: log.max_size: expected a size" },
    { "{ \"max_size\": \"1K\" }", FB_POLICY_ERROR_VALUE,
      "test.json:2:24: log.max_size: 1024 bytes is below the least" },
    { "{ \"file_size\": \"1K\" }", FB_POLICY_ERROR_VALUE,
      "test.json:2:25: log.file_size: 1024 bytes is below the least" },
    { "{ \"file_size\": \"2M\", \"max_size\": \"1M\" }", FB_POLICY_ERROR_VALUE,
      "test.json:2:25: log.file_size: larger than log.max_size" },
    { "{ \"journal\": \"yes\" }", FB_POLICY_ERROR_SCHEMA, "test.json:2:23: log.journal: expected true or false" },
    { "{ \"jornal\": true }", FB_POLICY_ERROR_SCHEMA,
      "test.json:2:12: log.jornal: unknown key; did you mean \"journal\"?" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *text = g_strdup_printf (WITH_LOG ("%s"), cases[i].log);
      g_autofree char *msg = load_error (text, &test_vars, cases[i].code);

      if (!g_str_has_prefix (msg, cases[i].prefix))
        fail_msg ("case %u: got\n  %s\nexpected it to start with\n  %s", i, msg, cases[i].prefix);
    }
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_sizes), cmocka_unit_test (test_section),
                  cmocka_unit_test (test_errors))
