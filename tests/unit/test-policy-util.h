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

/* BASE narrowed by NARROW (fb_policy_narrow), or fail the test with the
 * message. */
static inline FbPolicy *
narrow_ok (FbPolicy *base, FbPolicy *narrow)
{
  g_autoptr (GError) error = NULL;
  FbPolicy *policy = fb_policy_narrow (base, narrow, &error);

  if (policy == NULL)
    fail_msg ("narrowing failed: %s", error->message);
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

/* A and B (decisions of PATH by POLICY) agree on every field the view
 * relies on, and on priv_other where POLICY is narrowed (elsewhere no one
 * sets or reads it). */
static inline void
assert_same_decision (const FbPolicy *policy, const FbPolicyDecision *a, const FbPolicyDecision *b, const char *path)
{
  if (a->access != b->access || a->rule != b->rule || a->traversable != b->traversable ||
      a->is_mount_point != b->is_mount_point || a->mount != b->mount || a->mounted_children != b->mounted_children ||
      a->reachable_children != b->reachable_children || (policy->narrow != NULL && a->priv_other != b->priv_other) ||
      a->priv_node != b->priv_node || a->priv_depth != b->priv_depth)
    fail_msg ("decide and the decide_child chain disagree on %s: %s/%s vs %s/%s", path,
              fb_policy_access_to_string (a->access), a->rule->origin, fb_policy_access_to_string (b->access),
              b->rule->origin);
}

/* COUNT random paths (seeded by SEED) of up to MAX_DEPTH - 1 names from
 * VOCAB (N of them), decided one name at a time from "/" with
 * fb_policy_decide_child (into a decision of its own, and in place), are
 * decided at every step as fb_policy_decide decides the whole path. */
static inline void
assert_chains_agree (FbPolicy *policy, guint seed, guint count, guint max_depth, const char *const *vocab, gsize n)
{
  g_autoptr (GRand) rand = g_rand_new_with_seed (seed);

  for (guint i = 0; i < count; i++)
    {
      guint depth = (guint)g_rand_int_range (rand, 0, (gint32)max_depth);
      g_autoptr (GString) path = g_string_new ("");
      FbPolicyDecision chain;
      FbPolicyDecision whole;

      fb_policy_decide (policy, "/", &chain);
      for (guint k = 0; k < depth; k++)
        {
          const char *name = vocab[g_rand_int_range (rand, 0, (gint32)n)];
          g_autofree char *parent = g_strdup (path->len > 0 ? path->str : "/");
          FbPolicyDecision next;
          FbPolicyDecision in_place = chain;

          g_string_append_printf (path, "/%s", name);
          fb_policy_decide_child (policy, &chain, parent, name, &next);
          fb_policy_decide_child (policy, &in_place, parent, name, &in_place);
          assert_same_decision (policy, &next, &in_place, path->str);
          chain = next;
          fb_policy_decide (policy, path->str, &whole);
          assert_same_decision (policy, &whole, &chain, path->str);
        }
    }
}
