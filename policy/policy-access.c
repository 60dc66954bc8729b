/* fusebox — enum names of the policy module, as they appear in policies,
 * logs and the protocol. */
#include "policy/policy.h"

#include <string.h>

G_DEFINE_QUARK (fb - policy - error - quark, fb_policy_error)

static const char *const access_names[] = {
  [FB_POLICY_ACCESS_HIDE] = "hide",
  [FB_POLICY_ACCESS_DENY] = "deny",
  [FB_POLICY_ACCESS_READ] = "read",
  [FB_POLICY_ACCESS_WRITE] = "write",
};

const char *
fb_policy_access_to_string (FbPolicyAccess access)
{
  if ((guint) access >= G_N_ELEMENTS (access_names))
    return "invalid";
  return access_names[access];
}

bool
fb_policy_access_from_string (const char *s, FbPolicyAccess *ret_access)
{
  for (guint i = 0; s != NULL && i < G_N_ELEMENTS (access_names); i++)
    if (strcmp (s, access_names[i]) == 0)
      {
        if (ret_access != NULL)
          *ret_access = (FbPolicyAccess) i;
        return true;
      }
  return false;
}

const char *
fb_policy_network_to_string (FbPolicyNetwork n)
{
  return n == FB_POLICY_NETWORK_HOST ? "host" : "none";
}

bool
fb_policy_network_from_string (const char *s, FbPolicyNetwork *ret_network)
{
  FbPolicyNetwork n;

  if (g_strcmp0 (s, "none") == 0)
    n = FB_POLICY_NETWORK_NONE;
  else if (g_strcmp0 (s, "host") == 0)
    n = FB_POLICY_NETWORK_HOST;
  else
    return false;
  if (ret_network != NULL)
    *ret_network = n;
  return true;
}

/* Restrictiveness, most restrictive first: hide, deny, read, write.  This is
 * not the equal-specificity precedence (where write beats read). */
static int
restrictiveness (FbPolicyAccess a)
{
  switch (a)
    {
    case FB_POLICY_ACCESS_HIDE:
      return 3;
    case FB_POLICY_ACCESS_DENY:
      return 2;
    case FB_POLICY_ACCESS_READ:
      return 1;
    case FB_POLICY_ACCESS_WRITE:
    default:
      return 0;
    }
}

FbPolicyAccess
fb_policy_access_narrow (FbPolicyAccess a, FbPolicyAccess b)
{
  return restrictiveness (a) >= restrictiveness (b) ? a : b;
}
