/* fusebox — helpers shared by the policy unit tests (header only). */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "policy/policy-private.h"
#include "tests/lib/test-util.h"

static const FbPolicyVars test_vars = {
  .workspace = "/home/u/ws",
  .home = "/home/u",
  .cwd = "/home/u/ws/src",
  .run = "/run/fusebox/r1",
};

/* Load TEXT or fail the test with the loader's message. */
static inline FbPolicy *
load_ok (const char *text, const FbPolicyVars *vars)
{
  g_autoptr (GError) error = NULL;
  FbPolicy *policy = fb_policy_load_data (text, -1, "test.json", vars, &error);

  if (policy == NULL)
    fail_msg ("policy did not load: %s", error->message);
  return policy;
}

/* Load TEXT, expect failure, return the message (caller frees). */
static inline char *
load_error (const char *text, const FbPolicyVars *vars, FbPolicyError code)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) policy = fb_policy_load_data (text, -1, "test.json", vars, &error);

  if (policy != NULL)
    fail_msg ("policy loaded but should have failed:\n%s", text);
  if (!g_error_matches (error, FB_POLICY_ERROR, (gint)code))
    fail_msg ("expected error code %d, got %s %d: %s", code, g_quark_to_string (error->domain), error->code,
              error->message);
  return g_strdup (error->message);
}

/* Assert that MESSAGE starts with PREFIX, printing both otherwise. */
#define assert_prefix(message, prefix)                                                                                 \
  do                                                                                                                   \
    {                                                                                                                  \
      const char *m_ = (message);                                                                                      \
      const char *p_ = (prefix);                                                                                       \
      if (!g_str_has_prefix (m_, p_))                                                                                  \
        fail_msg ("message\n  %s\ndoes not start with\n  %s", m_, p_);                                                 \
    }                                                                                                                  \
  while (0)

#define assert_contains(message, needle)                                                                               \
  do                                                                                                                   \
    {                                                                                                                  \
      const char *m_ = (message);                                                                                      \
      const char *n_ = (needle);                                                                                       \
      if (strstr (m_, n_) == NULL)                                                                                     \
        fail_msg ("message\n  %s\ndoes not contain\n  %s", m_, n_);                                                    \
    }                                                                                                                  \
  while (0)

/* A NULL-terminated list as "a,b,c" (caller frees). */
static inline char *
join_list (const char *const *list)
{
  return g_strjoinv (",", (char **)list);
}
