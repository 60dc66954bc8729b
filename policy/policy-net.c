/* fusebox — the network allowlist: deciding hosts, ports and addresses.
 *
 * policy-net.h states the semantics; docs/fusebox-policy.5 (NETWORK) the
 * user's version.  This file decides.
 *
 * Threat model: the host name and port come from the sandbox (through the
 * proxy's request), so they are validated here and anything unexpected is
 * denied ("malformed"), never trusted.  A name is decided as the client
 * spelled it, but the connection goes to what the proxy's resolver answers:
 * the second check (fb_policy_net_check_address) keeps a DNS answer, which
 * whoever controls the name's zone writes, from pointing an allowed name at
 * the host's loopback, its link-local neighbours (cloud metadata at
 * 169.254.169.254) or its private networks.  policy-net-load.c reads the
 * "network" member and the command line's short form.  Every IPv4 address is kept as
 * its v4-mapped IPv6 form, so that one range check covers both families and
 * ::ffff:127.0.0.1 is never a way around 127.0.0.0/8.
 *
 * Entries are matched by a linear scan: an allowlist holds a handful to a
 * few hundred entries, a scan of them costs less than the connection's
 * first packet, and the policy's size bound bounds the scan.
 */
#include "policy/policy-private.h"

#include <arpa/inet.h>
#include <sys/socket.h>

/* ---- Synthetic rules -------------------------------------------------------- */

/* Rules no entry wrote: the network's kind, nothing matching, a request
 * that names no host.  Named by NAME in the log and by "default" for
 * people. */
#define SYNTHETIC(n, a, w)                                                                                             \
  {                                                                                                                    \
    .kind = FB_POLICY_NET_RULE_DEFAULT, .allow = a, .index = -1, .name = n, .origin = "default", .text = n, .why = w   \
  }

static const FbPolicyNetRule none_rule =
  SYNTHETIC ("none", false, "the policy's network is none: the sandbox connects nowhere");
static const FbPolicyNetRule host_rule =
  SYNTHETIC ("host", true, "the policy's network is host: the sandbox shares the host's network");
static const FbPolicyNetRule default_rule = SYNTHETIC ("default", false, "no network entry allows this host and port");
static const FbPolicyNetRule malformed_rule =
  SYNTHETIC ("malformed", false,
             "not a host name (ASCII letters, digits, \"-\", \"_\" and dots, a last label that is not a number), "
             "an IP address, and a port from 1 to 65535");
#undef SYNTHETIC

/* ---- Address classes: one table, one row per class --------------------------- */

static const struct
{
  const char *name;
  FbPolicyNetRule rule; /* the refusal of such an address that no entry names */
} class_table[FB_POLICY_NET_CLASS_N] = {
#define SPECIAL(n, w)                                                                                                  \
  {                                                                                                                    \
    .name = n, .rule = {                                                                                               \
      .kind = FB_POLICY_NET_RULE_SPECIAL,                                                                              \
      .index = -1,                                                                                                     \
      .name = n,                                                                                                       \
      .origin = "fusebox:special-address",                                                                             \
      .text = n,                                                                                                       \
      .why = "the name resolved to " w ", which only an address entry inside that block allows: "                      \
             "a DNS answer can't turn an allowed name into the host's own services"                                    \
    }                                                                                                                  \
  }
  [FB_POLICY_NET_CLASS_PUBLIC] = { .name = "public" },
  [FB_POLICY_NET_CLASS_UNSPECIFIED] = SPECIAL ("unspecified", "an unspecified address (0.0.0.0/8, ::)"),
  [FB_POLICY_NET_CLASS_LOOPBACK] = SPECIAL ("loopback", "a loopback address (127.0.0.0/8, ::1)"),
  [FB_POLICY_NET_CLASS_PRIVATE] = SPECIAL ("private", "a private address (10/8, 172.16/12, 192.168/16, fc00::/7)"),
  [FB_POLICY_NET_CLASS_SHARED] = SPECIAL ("shared", "a carrier-grade NAT address (100.64.0.0/10)"),
  [FB_POLICY_NET_CLASS_LINK_LOCAL] = SPECIAL ("link-local", "a link-local address (169.254.0.0/16, fe80::/10)"),
  [FB_POLICY_NET_CLASS_MULTICAST] = SPECIAL ("multicast", "a multicast address (224.0.0.0/4, ff00::/8)"),
  [FB_POLICY_NET_CLASS_RESERVED] = SPECIAL ("reserved", "a reserved address"),
#undef SPECIAL
};

const char *
fb_policy_net_class_to_string (FbPolicyNetClass c)
{
  return (guint)c < FB_POLICY_NET_CLASS_N ? class_table[c].name : "invalid";
}

static const struct
{
  const char *name;
} kind_table[FB_POLICY_NET_RULE_KIND_N] = {
  [FB_POLICY_NET_RULE_HOST] = { "host" },       [FB_POLICY_NET_RULE_SUFFIX] = { "suffix" },
  [FB_POLICY_NET_RULE_ADDRESS] = { "address" }, [FB_POLICY_NET_RULE_DEFAULT] = { "default" },
  [FB_POLICY_NET_RULE_SPECIAL] = { "special" },
};

const char *
fb_policy_net_rule_kind_to_string (FbPolicyNetRuleKind kind)
{
  return (guint)kind < FB_POLICY_NET_RULE_KIND_N ? kind_table[kind].name : "invalid";
}

/* ---- Addresses ------------------------------------------------------------------ */

static const guint8 v4_mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

static bool
is_v4_mapped (const guint8 a[16])
{
  return memcmp (a, v4_mapped_prefix, 12) == 0;
}

/* Do A and NET agree on their first PREFIX bits? */
static bool
in_prefix (const guint8 a[16], const guint8 net[16], guint prefix)
{
  guint bytes = prefix / 8;
  guint bits = prefix % 8;

  if (memcmp (a, net, bytes) != 0)
    return false;
  return bits == 0 || ((a[bytes] ^ net[bytes]) & (guint8)(0xff << (8 - bits))) == 0;
}

static bool
canonical_address (int family, const void *address, guint8 ret[16])
{
  if (family == AF_INET)
    {
      memcpy (ret, v4_mapped_prefix, 12);
      memcpy (ret + 12, address, 4);
      return true;
    }
  if (family == AF_INET6)
    {
      memcpy (ret, address, 16);
      return true;
    }
  return false;
}

/* The IPv4 blocks that are not public, and the IPv6 ones (IANA's special-
 * purpose registries, RFC 6890, less the documentation ranges, which route
 * nowhere special). */
static const struct
{
  guint8 net[4];
  guint prefix;
  FbPolicyNetClass cls;
} v4_blocks[] = {
  { { 0, 0, 0, 0 }, 8, FB_POLICY_NET_CLASS_UNSPECIFIED },     { { 10, 0, 0, 0 }, 8, FB_POLICY_NET_CLASS_PRIVATE },
  { { 100, 64, 0, 0 }, 10, FB_POLICY_NET_CLASS_SHARED },      { { 127, 0, 0, 0 }, 8, FB_POLICY_NET_CLASS_LOOPBACK },
  { { 169, 254, 0, 0 }, 16, FB_POLICY_NET_CLASS_LINK_LOCAL }, { { 172, 16, 0, 0 }, 12, FB_POLICY_NET_CLASS_PRIVATE },
  { { 192, 0, 0, 0 }, 24, FB_POLICY_NET_CLASS_RESERVED },     { { 192, 168, 0, 0 }, 16, FB_POLICY_NET_CLASS_PRIVATE },
  { { 198, 18, 0, 0 }, 15, FB_POLICY_NET_CLASS_RESERVED },    { { 224, 0, 0, 0 }, 4, FB_POLICY_NET_CLASS_MULTICAST },
  { { 240, 0, 0, 0 }, 4, FB_POLICY_NET_CLASS_RESERVED },
};

static const struct
{
  guint8 net[16];
  guint prefix;
  FbPolicyNetClass cls;
} v6_blocks[] = {
  { { 0 }, 128, FB_POLICY_NET_CLASS_UNSPECIFIED },
  { { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 }, 128, FB_POLICY_NET_CLASS_LOOPBACK },
  { { 0 }, 96, FB_POLICY_NET_CLASS_RESERVED },                                 /* IPv4-compatible, deprecated */
  { { 0x01, 0x00 }, 64, FB_POLICY_NET_CLASS_RESERVED },                        /* discard-only */
  { { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48, FB_POLICY_NET_CLASS_PRIVATE }, /* local-use NAT64 */
  { { 0xfc }, 7, FB_POLICY_NET_CLASS_PRIVATE },
  { { 0xfe, 0xc0 }, 10, FB_POLICY_NET_CLASS_PRIVATE }, /* site-local, deprecated */
  { { 0xfe, 0x80 }, 10, FB_POLICY_NET_CLASS_LINK_LOCAL },
  { { 0xff }, 8, FB_POLICY_NET_CLASS_MULTICAST },
};

static FbPolicyNetClass
classify_v4 (const guint8 *v4, guint *ret_prefix)
{
  guint8 a[16];

  memcpy (a, v4_mapped_prefix, 12);
  memcpy (a + 12, v4, 4);
  for (guint i = 0; i < G_N_ELEMENTS (v4_blocks); i++)
    {
      guint8 net[16];

      memcpy (net, v4_mapped_prefix, 12);
      memcpy (net + 12, v4_blocks[i].net, 4);
      if (in_prefix (a, net, 96 + v4_blocks[i].prefix))
        {
          *ret_prefix = v4_blocks[i].prefix;
          return v4_blocks[i].cls;
        }
    }
  return FB_POLICY_NET_CLASS_PUBLIC;
}

/* The class of A (canonical form) and the prefix of its block over the 128
 * bits: an IPv4 address embedded at byte OFF (v4-mapped and NAT64 at 12,
 * 6to4 at 2) is classified as that IPv4 address, its block shifted by OFF. */
static FbPolicyNetClass
classify (const guint8 a[16], guint *ret_prefix)
{
  static const guint8 nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
  FbPolicyNetClass c;
  guint off = 0;
  guint prefix = 0;

  if (is_v4_mapped (a) || memcmp (a, nat64, 12) == 0)
    off = 12;
  else if (a[0] == 0x20 && a[1] == 0x02)
    off = 2;
  if (off != 0)
    {
      c = classify_v4 (a + off, &prefix);
      if (c != FB_POLICY_NET_CLASS_PUBLIC || off == 12)
        {
          *ret_prefix = off * 8 + prefix;
          return c;
        }
    }
  for (guint i = 0; i < G_N_ELEMENTS (v6_blocks); i++)
    if (in_prefix (a, v6_blocks[i].net, v6_blocks[i].prefix))
      {
        *ret_prefix = v6_blocks[i].prefix;
        return v6_blocks[i].cls;
      }
  *ret_prefix = 0;
  return FB_POLICY_NET_CLASS_PUBLIC;
}

FbPolicyNetClass
fb_policy_net_classify (int family, const void *address)
{
  guint8 a[16];
  guint prefix;

  if (!canonical_address (family, address, a))
    return FB_POLICY_NET_CLASS_RESERVED;
  return classify (a, &prefix);
}

/* An address literal (no brackets, no zone) into its canonical form. */
bool
fb_policy_net_parse_address (const char *text, guint8 ret[16], bool *ret_v4)
{
  guint8 v4[4];

  if (inet_pton (AF_INET, text, v4) == 1)
    {
      canonical_address (AF_INET, v4, ret);
      *ret_v4 = true;
      return true;
    }
  *ret_v4 = false;
  return strchr (text, ':') != NULL && inet_pton (AF_INET6, text, ret) == 1;
}

/* The text of a network: an IPv4 one (v4-mapped, prefix at least 96) as
 * a.b.c.d[/n], else IPv6 text[/n]; the prefix only when it is not the
 * whole address. */
char *
fb_policy_net_format_cidr (const guint8 addr[16], guint prefix)
{
  char buf[INET6_ADDRSTRLEN];

  if (is_v4_mapped (addr) && prefix >= 96)
    {
      inet_ntop (AF_INET, addr + 12, buf, sizeof buf);
      return prefix == 128 ? g_strdup (buf) : g_strdup_printf ("%s/%u", buf, prefix - 96);
    }
  inet_ntop (AF_INET6, addr, buf, sizeof buf);
  return prefix == 128 ? g_strdup (buf) : g_strdup_printf ("%s/%u", buf, prefix);
}

/* "A.B.C.D/N", "V6/N" or a bare address (the whole address).  NULL, or a
 * message for people. */
char *
fb_policy_net_parse_cidr (const char *text, guint8 ret_addr[16], guint *ret_prefix)
{
  const char *slash = strchr (text, '/');
  g_autofree char *addr_text = slash != NULL ? g_strndup (text, (gsize)(slash - text)) : g_strdup (text);
  guint8 addr[16];
  guint8 masked[16] = { 0 };
  guint64 prefix;
  bool v4;

  if (!fb_policy_net_parse_address (addr_text, addr, &v4))
    return g_strdup_printf ("\"%s\" is not an IPv4 or IPv6 address (write 10.1.0.0/16, 203.0.113.7, fc00::/7 or "
                            "::1; no brackets, no zone)",
                            addr_text);
  if (slash == NULL)
    prefix = v4 ? 32 : 128;
  else
    {
      const char *p = slash + 1;

      if (!g_ascii_isdigit (*p) || (p[0] == '0' && p[1] != '\0') || strlen (p) > 3)
        return g_strdup_printf ("\"%s\": the prefix length after \"/\" is a number from 0 to %u", text, v4 ? 32 : 128);
      prefix = g_ascii_strtoull (p, NULL, 10);
      for (; *p != '\0'; p++)
        if (!g_ascii_isdigit (*p))
          return g_strdup_printf ("\"%s\": the prefix length after \"/\" is a number from 0 to %u", text,
                                  v4 ? 32 : 128);
      if (prefix > (v4 ? 32u : 128u))
        return g_strdup_printf ("\"%s\": the prefix length after \"/\" is a number from 0 to %u", text, v4 ? 32 : 128);
    }
  if (v4)
    prefix += 96;
  for (guint i = 0; i < prefix; i++)
    masked[i / 8] |= addr[i / 8] & (guint8)(0x80 >> (i % 8));
  if (memcmp (masked, addr, 16) != 0)
    {
      g_autofree char *want = fb_policy_net_format_cidr (masked, (guint)prefix);

      return g_strdup_printf ("\"%s\" has bits set past its prefix; did you mean %s%s?", text, want,
                              strchr (want, '/') == NULL ? (v4 ? "/32" : "/128") : "");
    }
  memcpy (ret_addr, addr, 16);
  *ret_prefix = (guint)prefix;
  return NULL;
}

/* ---- Host names ------------------------------------------------------------------ */

/* Check and normalize an ASCII name in place (lower case, the trailing dot
 * dropped).  NULL, or what is wrong. */
const char *
fb_policy_net_check_name (char *name)
{
  gsize len = strlen (name);
  gsize label = 0;
  bool numeric = true;

  if (len > 0 && name[len - 1] == '.')
    name[--len] = '\0';
  if (len == 0)
    return "empty";
  if (len > 253)
    return "longer than 253 characters";
  for (gsize i = 0; i <= len; i++)
    {
      char c = name[i];

      if (c == '.' || c == '\0')
        {
          if (label == 0)
            return "an empty label (\"..\", or a dot in front)";
          if (label > 63)
            return "a label longer than 63 characters";
          if (c == '\0' && numeric)
            return "its last label is a number: an address goes as a.b.c.d (or in \"cidr\"), and a name ends "
                   "with letters";
          label = 0;
          numeric = true;
          continue;
        }
      if (!g_ascii_isalnum (c) && c != '-' && c != '_')
        return "a character other than ASCII letters, digits, \"-\", \"_\" and dots";
      numeric = numeric && g_ascii_isdigit (c);
      name[i] = g_ascii_tolower (c);
      label++;
    }
  return NULL;
}

/* What the client asked for, ready to match. */
typedef struct
{
  bool is_address;
  guint8 addr[16];
  char name[256];
  gsize len;
} Query;

static bool
parse_query (const char *host, Query *q)
{
  gsize len = host != NULL ? strlen (host) : 0;
  bool v4;

  if (len == 0 || len > 254)
    return false;
  if (host[0] == '[')
    {
      g_autofree char *inner = NULL;

      if (host[len - 1] != ']')
        return false;
      inner = g_strndup (host + 1, len - 2);
      q->is_address = true;
      return fb_policy_net_parse_address (inner, q->addr, &v4) && !v4;
    }
  if (fb_policy_net_parse_address (host, q->addr, &v4))
    {
      q->is_address = true;
      return true;
    }
  q->is_address = false;
  memcpy (q->name, host, len + 1);
  if (fb_policy_net_check_name (q->name) != NULL)
    return false;
  q->len = strlen (q->name);
  return true;
}

char *
fb_policy_net_host_normalize (const char *host)
{
  Query q;

  if (!parse_query (host, &q))
    return NULL;
  if (q.is_address)
    return fb_policy_net_format_cidr (q.addr, 128);
  return g_strdup (q.name);
}

/* ---- Matching -------------------------------------------------------------------- */

static bool
port_matches (const FbPolicyNetRule *rule, guint port)
{
  for (guint i = 0; i < rule->n_ports; i++)
    if (rule->ports[i] == port)
      return true;
  return rule->n_ports == 0;
}

/* How specific RULE is: an exact name beats any suffix, a longer suffix a
 * shorter one, "*" (the empty suffix) comes last; addresses by prefix. */
static guint
specificity (const FbPolicyNetRule *rule)
{
  switch (rule->kind)
    {
      case FB_POLICY_NET_RULE_HOST:
        return 1000; /* past any suffix: a name has at most 253 characters */
      case FB_POLICY_NET_RULE_SUFFIX:
        return (guint)strlen (rule->host) + 1;
      case FB_POLICY_NET_RULE_ADDRESS:
      case FB_POLICY_NET_RULE_SPECIAL:
        return rule->prefix;
      case FB_POLICY_NET_RULE_DEFAULT:
        return 0;
    }
  return 0;
}

/* Does A decide over B (both match)?  More specific; then one that lists
 * the port over one for any port; then deny over allow.  A full tie keeps
 * B, the earlier. */
bool
fb_policy_net_rule_beats (const FbPolicyNetRule *a, const FbPolicyNetRule *b)
{
  guint sa = specificity (a);
  guint sb = specificity (b);

  if (sa != sb)
    return sa > sb;
  if ((a->n_ports > 0) != (b->n_ports > 0))
    return a->n_ports > 0;
  return !a->allow && b->allow;
}

static bool
rule_matches (const FbPolicyNetRule *rule, const Query *q, guint port)
{
  gsize n;

  if (!port_matches (rule, port))
    return false;
  switch (rule->kind)
    {
      case FB_POLICY_NET_RULE_HOST:
        return !q->is_address && strcmp (rule->host, q->name) == 0;
      case FB_POLICY_NET_RULE_SUFFIX:
        n = strlen (rule->host);
        return !q->is_address && q->len > n && memcmp (q->name + q->len - n, rule->host, n) == 0;
      case FB_POLICY_NET_RULE_ADDRESS:
        return q->is_address && in_prefix (q->addr, rule->addr, rule->prefix);
      case FB_POLICY_NET_RULE_DEFAULT:
      case FB_POLICY_NET_RULE_SPECIAL:
        return false;
    }
  return false;
}

static const FbPolicyNetRule *
best_match (const FbPolicy *policy, const Query *q, guint port)
{
  const FbPolicyNetRule *best = NULL;

  for (guint i = 0; i < policy->n_net_rules; i++)
    {
      const FbPolicyNetRule *rule = &policy->net_rules[i];

      if (rule_matches (rule, q, port) && (best == NULL || fb_policy_net_rule_beats (rule, best)))
        best = rule;
    }
  return best;
}

/* Of two sides' decisions (a narrowed policy), the narrower: a denial
 * (BASE's first), else the allow that names an entry rather than "host". */
static void
combine (const FbPolicyNetDecision *base, const FbPolicyNetDecision *narrow, FbPolicyNetDecision *ret)
{
  if (!base->allowed)
    *ret = *base;
  else if (!narrow->allowed)
    *ret = *narrow;
  else
    *ret = base->rule == &host_rule ? *narrow : *base;
}

/* What the policy's network mode settles alone: "none" refuses every
 * connection and "host" gives HOST_ANSWER; false for an allowlist, whose
 * entries decide. */
static bool
decided_by_mode (const FbPolicy *policy, const FbPolicyNetDecision *host_answer, FbPolicyNetDecision *ret)
{
  switch (policy->network)
    {
      case FB_POLICY_NETWORK_NONE:
        *ret = (FbPolicyNetDecision){ false, &none_rule };
        return true;
      case FB_POLICY_NETWORK_HOST:
        *ret = *host_answer;
        return true;
      case FB_POLICY_NETWORK_ALLOWLIST:
        break;
    }
  return false;
}

void
fb_policy_net_decide (const FbPolicy *policy, const char *host, guint port, FbPolicyNetDecision *ret)
{
  const FbPolicyNetRule *best;
  Query q;

  if (policy->narrow != NULL)
    {
      FbPolicyNetDecision b, n;

      fb_policy_net_decide (policy->base, host, port, &b);
      fb_policy_net_decide (policy->narrow, host, port, &n);
      combine (&b, &n, ret);
      return;
    }
  if (decided_by_mode (policy, &(FbPolicyNetDecision){ true, &host_rule }, ret))
    return;
  if (port == 0 || port > 65535 || !parse_query (host, &q))
    {
      *ret = (FbPolicyNetDecision){ false, &malformed_rule };
      return;
    }
  best = best_match (policy, &q, port);
  *ret = best != NULL ? (FbPolicyNetDecision){ best->allow, best } : (FbPolicyNetDecision){ false, &default_rule };
}

void
fb_policy_net_check_address (const FbPolicy *policy, const FbPolicyNetDecision *by_name, int family,
                             const void *address, guint port, FbPolicyNetDecision *ret)
{
  const FbPolicyNetRule *best;
  FbPolicyNetClass cls;
  guint block = 0;
  Query q = { .is_address = true };

  if (!by_name->allowed)
    {
      *ret = *by_name;
      return;
    }
  if (policy->narrow != NULL)
    {
      FbPolicyNetDecision b, n;

      fb_policy_net_check_address (policy->base, by_name, family, address, port, &b);
      fb_policy_net_check_address (policy->narrow, by_name, family, address, port, &n);
      /* each side returns BY_NAME unless it has something to add */
      if (!b.allowed || (n.allowed && b.rule != by_name->rule))
        *ret = b;
      else
        *ret = n;
      return;
    }
  if (decided_by_mode (policy, by_name, ret))
    return;
  if (port == 0 || port > 65535 || !canonical_address (family, address, q.addr))
    {
      *ret = (FbPolicyNetDecision){ false, &malformed_rule };
      return;
    }
  best = best_match (policy, &q, port);
  if (best != NULL && !best->allow)
    {
      *ret = (FbPolicyNetDecision){ false, best };
      return;
    }
  cls = classify (q.addr, &block);
  if (cls != FB_POLICY_NET_CLASS_PUBLIC && (best == NULL || best->prefix < block))
    {
      *ret = (FbPolicyNetDecision){ false, &class_table[cls].rule };
      return;
    }
  *ret = best != NULL ? (FbPolicyNetDecision){ true, best } : *by_name;
}

const FbPolicyNetRule *
fb_policy_net_get_rules (const FbPolicy *policy, guint *ret_n)
{
  if (policy->narrow != NULL)
    return fb_policy_net_get_rules (policy->base, ret_n);
  if (ret_n != NULL)
    *ret_n = policy->n_net_rules;
  return policy->net_rules;
}

void
fb_policy_net_clear (FbPolicy *policy)
{
  for (guint i = 0; i < policy->n_net_rules; i++)
    g_free ((gpointer)policy->net_rules[i].ports);
  g_clear_pointer (&policy->net_rules, g_free);
  policy->n_net_rules = 0;
}
