/* fusebox — the policy module's vocabulary: one table per enum that appears
 * in policies, logs and the protocol, from which every per-value fact
 * derives (policy.h says what each column means). */
#include "policy/policy.h"
#include "policy/util.h"

#include <string.h>

G_DEFINE_QUARK (fb - policy - error - quark, fb_policy_error)

/* Precedence and restrictiveness are two orders (fusebox-policy(5),
 * PRECEDENCE and PROTECTED NAMES): at equal specificity write beats read, so
 * that a duplicate read never downgrades an explicit write, while a
 * narrowing keeps read over write: it never grants more than either side. */
const FbPolicyAccessInfo fb_policy_access_table[FB_POLICY_ACCESS_N] = {
  [FB_POLICY_ACCESS_HIDE] = {
    .name = "hide",
    .precedence = 3,
    .restrictiveness = 3,
    .protects = "exposed",
  },
  [FB_POLICY_ACCESS_DENY] = {
    .name = "deny",
    .precedence = 2,
    .restrictiveness = 2,
    .visible = true,
    .protects = "opened",
  },
  [FB_POLICY_ACCESS_READ] = {
    .name = "read",
    .precedence = 0,
    .restrictiveness = 1,
    .visible = true,
    .readable = true,
    .protects = "modified",
  },
  [FB_POLICY_ACCESS_WRITE] = {
    .name = "write",
    .precedence = 1,
    .restrictiveness = 0,
    .visible = true,
    .readable = true,
    .writable = true,
  },
};

const FbPolicyRuleKindInfo fb_policy_rule_kind_table[FB_POLICY_RULE_KIND_N] = {
  [FB_POLICY_RULE_PATH] = { .name = "path", .numbered = true },
  [FB_POLICY_RULE_GLOB] = { .name = "glob", .numbered = true },
  [FB_POLICY_RULE_PROTECTED] = { .name = "protected" },
  [FB_POLICY_RULE_DEFAULT] = { .name = "default" },
  [FB_POLICY_RULE_FUSEBOX] = { .name = "fusebox" },
};

FB_DEFINE_STRING_TABLE (fb_policy_access, FbPolicyAccess, fb_policy_access_table, FB_POLICY_ACCESS_N)

const char *
fb_policy_rule_name (const FbPolicyRule *rule, char buf[16])
{
  const FbPolicyRuleKindInfo *kind = fb_policy_rule_kind_info (rule->kind);

  if (!kind->numbered)
    return kind->name;
  g_snprintf (buf, 16, "%d", rule->index);
  return buf;
}

static const struct
{
  const char *name;
  guint8 breadth; /* a narrowing keeps the lower: none < allowlist < host */
} network_table[FB_POLICY_NETWORK_N] = {
  [FB_POLICY_NETWORK_NONE] = { "none", 0 },
  [FB_POLICY_NETWORK_HOST] = { "host", 2 },
  [FB_POLICY_NETWORK_ALLOWLIST] = { "allowlist", 1 },
};

FB_DEFINE_STRING_TABLE (fb_policy_network, FbPolicyNetwork, network_table, FB_POLICY_NETWORK_N)

FbPolicyNetwork
fb_policy_network_narrow (FbPolicyNetwork a, FbPolicyNetwork b)
{
  if ((guint)a >= FB_POLICY_NETWORK_N || (guint)b >= FB_POLICY_NETWORK_N)
    return FB_POLICY_NETWORK_NONE;
  return network_table[a].breadth <= network_table[b].breadth ? a : b;
}

FbPolicyAccess
fb_policy_access_narrow (FbPolicyAccess a, FbPolicyAccess b)
{
  return fb_policy_access_info (a)->restrictiveness >= fb_policy_access_info (b)->restrictiveness ? a : b;
}
