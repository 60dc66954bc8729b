/* fusebox — the network allowlist: deciding hosts, ports and addresses
 * (policy-net.h has the semantics). */
#include "policy/policy-private.h"

#include <sys/socket.h>

static const FbPolicyNetRule none_rule = {
  .kind = FB_POLICY_NET_RULE_DEFAULT,
  .index = -1,
  .name = "none",
  .origin = "default",
  .text = "none",
  .why = "the policy's network is none: the sandbox connects nowhere",
};

static const FbPolicyNetRule host_rule = {
  .kind = FB_POLICY_NET_RULE_DEFAULT,
  .allow = true,
  .index = -1,
  .name = "host",
  .origin = "default",
  .text = "host",
  .why = "the policy's network is host: the sandbox shares the host's network",
};

void
fb_policy_net_decide (const FbPolicy *policy, const char *host, guint port, FbPolicyNetDecision *ret)
{
  (void)host;
  (void)port;
  ret->allowed = policy->network == FB_POLICY_NETWORK_HOST;
  ret->rule = ret->allowed ? &host_rule : &none_rule;
}

void
fb_policy_net_check_address (const FbPolicy *policy, const FbPolicyNetDecision *by_name, int family,
                             const void *address, guint port, FbPolicyNetDecision *ret)
{
  (void)policy;
  (void)family;
  (void)address;
  (void)port;
  *ret = *by_name;
}

char *
fb_policy_net_host_normalize (const char *host)
{
  return g_ascii_strdown (host, -1);
}

const FbPolicyNetRule *
fb_policy_net_get_rules (const FbPolicy *policy, guint *ret_n)
{
  (void)policy;
  if (ret_n != NULL)
    *ret_n = 0;
  return NULL;
}

const char *
fb_policy_net_rule_kind_to_string (FbPolicyNetRuleKind kind)
{
  (void)kind;
  return "default";
}

const char *
fb_policy_net_class_to_string (FbPolicyNetClass c)
{
  (void)c;
  return "public";
}

FbPolicyNetClass
fb_policy_net_classify (int family, const void *address)
{
  (void)family;
  (void)address;
  return FB_POLICY_NET_CLASS_PUBLIC;
}
