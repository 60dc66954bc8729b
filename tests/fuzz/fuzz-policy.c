/* fusebox — libFuzzer target for the policy parser and the decisions it
 * leads to.  Input: policy text.  A policy that loads is asked about a few
 * paths (whole and step by step, which must agree), dumped with
 * fb_policy_to_json and loaded again (which must succeed and decide the
 * same), and narrowed both ways (the default built-in by it, it by the host
 * built-in), where decide must again equal the decide_child chain.  Seed
 * corpus: fixtures/policies/.
 *
 *   build-fuzz/tests/fuzz/fuzz-policy -max_total_time=600 CORPUS fixtures/policies
 */
#include "policy/policy-private.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

static const char *const paths[] = {
  "/",
  "/home/u",
  "/home/u/ws/src/main.c",
  "/home/u/ws/.git/config",
  "/tmp/x.pem",
  "/srv/app/secrets/README",
  "/etc/ssh/ssh_host_rsa_key",
  "/a/b/c/d/e/f/g/h/i/j",
  "/données/été",
  "//bad",
};

static void
check_decisions (const FbPolicy *a, const FbPolicy *b)
{
  for (size_t i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      FbPolicyDecision whole;
      FbPolicyDecision chain;
      FbPolicyDecision other;
      const char *p = paths[i];

      fb_policy_decide (a, p, &whole);
      if (whole.rule == NULL || whole.mount == NULL || whole.mounted_children == NULL ||
          whole.reachable_children == NULL || whole.rule->why == NULL)
        abort ();
      (void)fb_policy_subtree_has_rules (a, &whole, p);
      if (!fb_policy_path_is_normalized (p))
        continue;
      fb_policy_decide (a, "/", &chain);
      if (strcmp (p, "/") != 0)
        {
          g_auto (GStrv) names = g_strsplit (p + 1, "/", -1);
          g_autoptr (GString) parent = g_string_new ("/");

          for (guint k = 0; names[k] != NULL; k++)
            {
              fb_policy_decide_child (a, &chain, parent->str, names[k], &chain);
              if (parent->len > 1)
                g_string_append_c (parent, '/');
              g_string_append (parent, names[k]);
            }
        }
      if (chain.access != whole.access || chain.rule != whole.rule || chain.mount != whole.mount ||
          chain.traversable != whole.traversable)
        abort ();
      if (b != NULL)
        {
          fb_policy_decide (b, p, &other);
          if (other.access != whole.access || other.traversable != whole.traversable ||
              g_strcmp0 (other.rule->why, whole.rule->why) != 0)
            abort ();
        }
    }
}

/* The network: A and B (the same policy written back and loaded again, or
 * A narrowed by the host built-in) decide every connection alike. */
static void
check_network (const FbPolicy *a, const FbPolicy *b)
{
  static const struct
  {
    const char *host;
    guint port;
  } asks[] = {
    { "api.example.com", 443 }, { "a.b.example.com", 80 }, { "EXAMPLE.com.", 8080 }, { "203.0.113.7", 443 },
    { "127.0.0.1", 8080 },      { "[::1]", 443 },          { "10.1.2.3", 22 },       { "", 1 },
  };
  static const guint8 addresses[][4] = { { 127, 0, 0, 1 }, { 10, 1, 2, 3 }, { 203, 0, 113, 7 } };

  for (guint i = 0; i < G_N_ELEMENTS (asks); i++)
    {
      FbPolicyNetDecision da, db;

      fb_policy_net_decide (a, asks[i].host, asks[i].port, &da);
      fb_policy_net_decide (b, asks[i].host, asks[i].port, &db);
      if (da.allowed != db.allowed || strcmp (da.rule->why, db.rule->why) != 0)
        abort ();
      for (guint j = 0; j < G_N_ELEMENTS (addresses); j++)
        {
          FbPolicyNetDecision ca, cb;

          fb_policy_net_check_address (a, &da, AF_INET, addresses[j], asks[i].port, &ca);
          fb_policy_net_check_address (b, &db, AF_INET, addresses[j], asks[i].port, &cb);
          if (ca.allowed != cb.allowed || (ca.allowed && !da.allowed))
            abort ();
        }
    }
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const FbPolicyVars vars = {
    .workspace = "/home/u/ws",
    .home = "/home/u",
    .cwd = "/home/u/ws",
    .run = "/run/fusebox/fuzz",
  };
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) policy = NULL;
  g_autoptr (FbPolicy) again = NULL;
  g_autofree char *json = NULL;

  policy = fb_policy_load_data ((const char *)data, (gssize)size, "fuzz.json", &vars, &error);
  if (policy == NULL)
    {
      /* every failure is a policy error with a message */
      if (error == NULL || error->domain != FB_POLICY_ERROR || error->message == NULL)
        abort ();
      return 0;
    }
  json = fb_policy_to_json (policy);
  again = fb_policy_load_data (json, -1, "again.json", &vars, &error);
  if (again == NULL)
    {
      /* the effective policy must always load again */
      fprintf (stderr, "to_json output does not load: %s\n%s\n", error->message, json);
      abort ();
    }
  check_decisions (policy, again);
  check_network (policy, again);

  /* Narrowing both ways: the server's default by this policy (refused when
   * it gives a source), and this policy by the host built-in. */
  {
    static FbPolicy *server = NULL;
    static FbPolicy *host = NULL;
    g_autoptr (FbPolicy) narrowed = NULL;
    g_autoptr (FbPolicy) narrowed2 = NULL;

    if (server == NULL)
      {
        server = fb_policy_load_spec ("builtin:default", &vars, NULL);
        host = fb_policy_load_spec ("builtin:host", &vars, NULL);
        if (server == NULL || host == NULL)
          abort ();
      }
    g_clear_error (&error);
    narrowed = fb_policy_narrow (server, policy, &error);
    if (narrowed != NULL)
      check_decisions (narrowed, NULL);
    else if (error == NULL)
      abort ();
    g_clear_error (&error);
    narrowed2 = fb_policy_narrow (policy, host, &error);
    if (narrowed2 == NULL)
      abort ();
    check_decisions (narrowed2, NULL);
    check_network (policy, narrowed2);
  }
  return 0;
}
