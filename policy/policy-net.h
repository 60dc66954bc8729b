/* fusebox — the network half of a policy: which hosts, ports and addresses
 * a sandbox may connect to (docs/fusebox-policy.5, NETWORK).  Included by
 * policy/policy.h; include that.
 *
 * A policy's "network" is "none", "host", or an allowlist object
 * ({"allow": [...], "deny": [...]}), which the proxy outside the sandbox
 * enforces: it asks fb_policy_net_decide() with the host name (or address
 * literal) and port the client asked for, resolves the name itself, and asks
 * fb_policy_net_check_address() for each address before it connects, so
 * that a DNS answer can't turn an allowed name into the host's own services.
 *
 * Precedence (table-tested in tests/unit/test-policy-net.c):
 *  - a host name is matched by "host" entries: an exact name beats a longer
 *    "*.suffix", which beats a shorter one; "*" (every name) comes last;
 *  - an address (an IP literal asked for, or a resolved address) is matched
 *    by "cidr" entries: the longer prefix wins; names never match addresses
 *    and address entries never match names;
 *  - between entries of the same host (or prefix), one that lists the port
 *    beats one for any port; at a full tie deny wins;
 *  - nothing matching an allowlist denies (rule "default").
 * Names compare case-insensitively (stored lower-case ASCII, IDNA applied
 * to the policy's names, the trailing dot dropped); "*.example.com" matches
 * the subdomains of example.com, not example.com itself.
 *
 * Thread-safety: as the rest of the policy, immutable once loaded; every
 * query may run on any thread.  Rules and decisions point into the policy
 * (or into static storage) and stay valid while the caller holds a
 * reference to it.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>

G_BEGIN_DECLS

typedef struct FbPolicy FbPolicy;

typedef enum
{
  FB_POLICY_NET_RULE_HOST,    /* "host": one exact name */
  FB_POLICY_NET_RULE_SUFFIX,  /* "host": "*.example.com" (its subdomains), or "*" (every name) */
  FB_POLICY_NET_RULE_ADDRESS, /* "cidr": an address or a range, IPv4 or IPv6 */
  FB_POLICY_NET_RULE_DEFAULT, /* synthetic: nothing matched, the network is none or host, or the
                               * request names no valid host or port */
  FB_POLICY_NET_RULE_SPECIAL, /* synthetic: a resolved loopback, link-local, private... address
                               * that no address entry names */
} FbPolicyNetRuleKind;
#define FB_POLICY_NET_RULE_KIND_N (FB_POLICY_NET_RULE_SPECIAL + 1)

const char *fb_policy_net_rule_kind_to_string (FbPolicyNetRuleKind kind);

typedef struct
{
  FbPolicyNetRuleKind kind;
  bool allow;           /* an "allow" entry (or a synthetic allow: network host); else deny */
  int index;            /* position in network.allow or network.deny; -1 for synthetic rules */
  const char *name;     /* for the log and the API: "allow[0]", "deny[2]", or the synthetic
                         * rule's: "default", "none", "host", "malformed", "loopback", ... */
  const char *origin;   /* for people: "FILE:LINE:COL" of the entry, "builtin:agent:network.allow[0]",
                         * "--network allow:HOST", or "default" */
  const char *text;     /* the entry as --network writes it: "api.openai.com:443",
                         * "*.example.com", "10.1.0.0/16:80,443", "[fc00::/7]:443" */
  const char *host;     /* HOST: the name (lower-case ASCII, no trailing dot); SUFFIX: the
                         * suffix with its dot (".example.com"), "" for "*"; else NULL */
  guint8 addr[16];      /* ADDRESS: the network; IPv4 as ::ffff:a.b.c.d */
  guint prefix;         /* ADDRESS: prefix length over the 128 bits (IPv4 /n is 96 + n) */
  const guint16 *ports; /* ascending; NULL when n_ports is 0: any port */
  guint n_ports;
  const char *why; /* never NULL */
} FbPolicyNetRule;

typedef struct
{
  bool allowed;
  const FbPolicyNetRule *rule; /* the deciding rule; never NULL */
} FbPolicyNetDecision;

/* Decide a connection to HOST, as the client asked for it (a name, an IPv4
 * literal, an IPv6 literal with or without brackets; any case, a trailing
 * dot allowed), and PORT (1-65535).  Never fails: a malformed name (empty,
 * too long, not ASCII letters, digits, "-", "_" and dots, empty labels) or
 * port denies with rule "malformed".  Network none denies everything (rule
 * "none"), host allows everything (rule "host"). */
void fb_policy_net_decide (const FbPolicy *policy, const char *host, guint port, FbPolicyNetDecision *ret);

/* The second check, for each address the proxy resolved for a name decided
 * as BY_NAME (the result of fb_policy_net_decide for that host and PORT), or
 * the address literal itself.  FAMILY is AF_INET (ADDRESS: 4 bytes) or
 * AF_INET6 (16 bytes, network order: g_inet_address_to_bytes()).
 *  - BY_NAME denied: *ret = *BY_NAME.
 *  - An address entry matching ADDRESS and PORT decides when it denies.
 *  - A loopback, link-local, private (RFC 1918, fc00::/7), shared
 *    (100.64.0.0/10), unspecified, "this network" (0.0.0.0/8), multicast or
 *    reserved address (and such an IPv4 address in v4-mapped, NAT64 or
 *    6to4 form) is refused (kind SPECIAL, name "loopback",
 *    "private"...) unless the best address entry matching it allows and lies
 *    inside that block (127.0.0.1 or 127.0.0.0/8 names loopback; 0.0.0.0/0
 *    does not).
 *  - Otherwise allowed: by the matching allow address entry, else BY_NAME's
 *    rule.
 * Network host allows, none denies, whatever the address. */
void fb_policy_net_check_address (const FbPolicy *policy, const FbPolicyNetDecision *by_name, int family,
                                  const void *address, guint port, FbPolicyNetDecision *ret);

/* HOST as decisions compare it: lower-case ASCII without a trailing dot; an
 * IP literal in its canonical text (IPv6 without brackets).  NULL when it
 * is malformed (as fb_policy_net_decide refuses it).  What the proxy should
 * resolve and log. */
char *fb_policy_net_host_normalize (const char *host);

/* The entries of the policy's allowlist, allow entries first, in file order
 * (none for network none or host; a narrowed policy lists its base's). */
const FbPolicyNetRule *fb_policy_net_get_rules (const FbPolicy *policy, guint *ret_n);

/* --network ARG, the command line's short form, applied to ROOT (a policy's
 * JSON object, as fb_policy_to_json writes it): "none" and "host" replace
 * its network; "allow:ITEM" and "deny:ITEM" add entries to its allowlist
 * (which starts empty when the network was none or host).  ITEM is HOST,
 * HOST:PORT, *.SUFFIX, an address, a CIDR range, [IPV6]:PORT or
 * [IPV6/N]:PORT; items are comma-separated, an item without a verb takes
 * the one before ("allow:a.com,b.com"), and a bare number is one more port
 * of the item before ("allow:a.com:80,443").  Each entry's why names the
 * option.  The result is checked when ROOT is loaded. */
typedef struct _JsonObject JsonObject;
bool fb_policy_net_apply_short (JsonObject *root, const char *arg, GError **error);

/* Classification of an address, for the second check and for logs. */
typedef enum
{
  FB_POLICY_NET_CLASS_PUBLIC,      /* none of the below: reachable by an allowed name */
  FB_POLICY_NET_CLASS_UNSPECIFIED, /* 0.0.0.0/8 ("this network"), :: */
  FB_POLICY_NET_CLASS_LOOPBACK,    /* 127.0.0.0/8, ::1 */
  FB_POLICY_NET_CLASS_PRIVATE,     /* 10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10, 64:ff9b:1::/48 */
  FB_POLICY_NET_CLASS_SHARED,      /* 100.64.0.0/10 (carrier-grade NAT) */
  FB_POLICY_NET_CLASS_LINK_LOCAL,  /* 169.254.0.0/16, fe80::/10 */
  FB_POLICY_NET_CLASS_MULTICAST,   /* 224.0.0.0/4, ff00::/8 */
  FB_POLICY_NET_CLASS_RESERVED,    /* 192.0.0.0/24, 198.18.0.0/15, 240.0.0.0/4 (and broadcast),
                                    * ::/96, 100::/64 */
} FbPolicyNetClass;
#define FB_POLICY_NET_CLASS_N (FB_POLICY_NET_CLASS_RESERVED + 1)

const char *fb_policy_net_class_to_string (FbPolicyNetClass c);
/* The class of ADDRESS (FAMILY AF_INET: 4 bytes, AF_INET6: 16, network
 * order); an IPv4 address in v4-mapped or NAT64 form has the class of the
 * IPv4 address, and in 6to4 form when that is not public. */
FbPolicyNetClass fb_policy_net_classify (int family, const void *address);

G_END_DECLS
