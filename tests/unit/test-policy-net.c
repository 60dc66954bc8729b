/* fusebox — the network allowlist (policy/policy-net.c): matching, the
 * precedence of every pair of entry kinds, the classes of addresses and the
 * second check of a resolved one, load errors at FILE:LINE:COL, narrowing,
 * the command line's short form, and the JSON written back. */
#include "tests/unit/test-policy-util.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#define NET(x) "{ \"version\": 1, \"rules\": [],\n  \"network\": " x " }"

/* ---- Matching ---------------------------------------------------------------- */

static const char *const match_policy =
  NET ("{ \"allow\": [\n"
       "    { \"host\": \"api.openai.com\", \"port\": 443, \"why\": \"model API\" },\n"
       "    { \"host\": \"*.example.com\", \"why\": \"examples\" },\n"
       "    { \"cidr\": \"10.1.0.0/16\", \"ports\": [443, 80], \"why\": \"lab\" },\n"
       "    { \"host\": \"B\\u00fccher.example\", \"why\": \"idna\" },\n"
       "    { \"cidr\": \"2001:db8::/32\", \"why\": \"v6 lab\" },\n"
       "    { \"host\": \"203.0.113.9\", \"why\": \"an address as host\" } ],\n"
       "  \"deny\": [\n"
       "    { \"host\": \"evil.example.com\", \"why\": \"known bad\" },\n"
       "    { \"cidr\": \"10.1.9.0/24\", \"why\": \"the lab's printers\" } ] }");

typedef struct
{
  const char *host;
  guint port;
  bool allowed;
  const char *rule; /* the deciding rule's name */
} MatchCase;

static const MatchCase match_cases[] = {
  { "api.openai.com", 443, true, "allow[0]" },
  { "API.OpenAI.COM", 443, true, "allow[0]" },  /* case-insensitive */
  { "api.openai.com.", 443, true, "allow[0]" }, /* trailing dot */
  { "api.openai.com", 80, false, "default" },   /* another port */
  { "openai.com", 443, false, "default" },
  { "x.api.openai.com", 443, false, "default" }, /* an exact name has no subdomains */
  { "a.example.com", 1234, true, "allow[1]" },
  { "a.b.example.com", 443, true, "allow[1]" },
  { "example.com", 443, false, "default" }, /* *.example.com is its subdomains only */
  { "badexample.com", 443, false, "default" },
  { "evil.example.com", 443, false, "deny[0]" },
  { "EVIL.example.com.", 443, false, "deny[0]" },
  { "x.evil.example.com", 443, true, "allow[1]" }, /* the deny is exact */
  { "10.1.2.3", 80, true, "allow[2]" },
  { "10.1.2.3", 443, true, "allow[2]" },
  { "10.1.2.3", 22, false, "default" },
  { "10.1.9.7", 443, false, "deny[1]" }, /* the longer prefix */
  { "10.2.0.1", 443, false, "default" },
  { "xn--bcher-kva.example", 443, true, "allow[3]" },
  { "[2001:db8::1]", 443, true, "allow[4]" },
  { "2001:db8::1", 443, true, "allow[4]" },
  { "[2001:DB8:0::1]", 443, true, "allow[4]" },
  { "203.0.113.9", 443, true, "allow[5]" },
  { "203.0.113.10", 443, false, "default" },
  { "[::ffff:203.0.113.9]", 443, true, "allow[5]" }, /* v4-mapped is the IPv4 address */
  /* malformed: refused before any entry */
  { "", 443, false, "malformed" },
  { "a..example.com", 443, false, "malformed" },
  { ".example.com", 443, false, "malformed" },
  { "a b.example.com", 443, false, "malformed" },
  { "a.example.com:443", 443, false, "malformed" },
  { "b\xc3\xbc"
    "cher.example",
    443, false, "malformed" }, /* clients send IDNA */
  { "a.example.com", 0, false, "malformed" },
  { "a.example.com", 65536, false, "malformed" },
  { "127.1", 443, false, "malformed" },      /* inet_aton's short forms are not names */
  { "2130706433", 443, false, "malformed" }, /* ... nor is a number */
  { "[203.0.113.9]", 443, false, "malformed" },
  { "[fe80::1%eth0]", 443, false, "malformed" },
  { "[2001:db8::1", 443, false, "malformed" },
};

static void
test_matching (void **state)
{
  (void)state;
  g_autoptr (FbPolicy) p = load_ok (match_policy, &test_vars);

  assert_int_equal (fb_policy_get_network (p), FB_POLICY_NETWORK_ALLOWLIST);
  for (guint i = 0; i < G_N_ELEMENTS (match_cases); i++)
    {
      const MatchCase *c = &match_cases[i];
      FbPolicyNetDecision d;

      fb_policy_net_decide (p, c->host, c->port, &d);
      if (d.allowed != c->allowed || strcmp (d.rule->name, c->rule) != 0)
        fail_msg ("%s:%u: got %s by %s, expected %s by %s", c->host, c->port, d.allowed ? "allow" : "deny",
                  d.rule->name, c->allowed ? "allow" : "deny", c->rule);
      assert_non_null (d.rule->why);
    }
}

/* The rules carry what the log and explain print. */
static void
test_rule_fields (void **state)
{
  (void)state;
  g_autoptr (FbPolicy) p = load_ok (match_policy, &test_vars);
  static const struct
  {
    const char *name, *origin, *text, *why;
    FbPolicyNetRuleKind kind;
  } want[] = {
    { "allow[0]", "test.json:3:5", "api.openai.com:443", "model API", FB_POLICY_NET_RULE_HOST },
    { "allow[1]", "test.json:4:5", "*.example.com", "examples", FB_POLICY_NET_RULE_SUFFIX },
    { "allow[2]", "test.json:5:5", "10.1.0.0/16:80,443", "lab", FB_POLICY_NET_RULE_ADDRESS },
    { "allow[3]", "test.json:6:5", "xn--bcher-kva.example", "idna", FB_POLICY_NET_RULE_HOST },
    { "allow[4]", "test.json:7:5", "2001:db8::/32", "v6 lab", FB_POLICY_NET_RULE_ADDRESS },
    { "allow[5]", "test.json:8:5", "203.0.113.9", "an address as host", FB_POLICY_NET_RULE_ADDRESS },
    { "deny[0]", "test.json:10:5", "evil.example.com", "known bad", FB_POLICY_NET_RULE_HOST },
    { "deny[1]", "test.json:11:5", "10.1.9.0/24", "the lab's printers", FB_POLICY_NET_RULE_ADDRESS },
  };
  guint n = 0;
  const FbPolicyNetRule *rules = fb_policy_net_get_rules (p, &n);

  for (guint k = 0; k < FB_POLICY_NET_RULE_KIND_N; k++)
    for (guint l = 0; l < k; l++)
      assert_string_not_equal (fb_policy_net_rule_kind_to_string (k), fb_policy_net_rule_kind_to_string (l));
  assert_string_equal (fb_policy_net_rule_kind_to_string (FB_POLICY_NET_RULE_KIND_N), "invalid");

  assert_int_equal (n, G_N_ELEMENTS (want));
  for (guint i = 0; i < n; i++)
    {
      assert_string_equal (rules[i].name, want[i].name);
      assert_string_equal (rules[i].origin, want[i].origin);
      assert_string_equal (rules[i].text, want[i].text);
      assert_string_equal (rules[i].why, want[i].why);
      assert_int_equal (rules[i].kind, want[i].kind);
      assert_int_equal (rules[i].allow, g_str_has_prefix (want[i].name, "allow"));
    }
}

/* ---- Precedence: every pair of entry kinds ------------------------------------- */

/* From the most specific down: each beats every one after it, whatever
 * either's action; at one level deny beats allow. */
typedef struct
{
  const char *target; /* the entry's "host" or "cidr" member, and its port */
  const char *json;
} Level;

static const Level name_levels[] = {
  { "exact:443", "\"host\": \"a.b.example.com\", \"port\": 443" },
  { "exact", "\"host\": \"a.b.example.com\"" },
  { "long:443", "\"host\": \"*.b.example.com\", \"port\": 443" },
  { "long", "\"host\": \"*.b.example.com\"" },
  { "short:443", "\"host\": \"*.example.com\", \"ports\": [80, 443]" },
  { "short", "\"host\": \"*.example.com\"" },
  { "star:443", "\"host\": \"*\", \"port\": 443" },
  { "star", "\"host\": \"*\"" },
};

static const Level address_levels[] = {
  { "/32:443", "\"cidr\": \"203.0.113.7\", \"port\": 443" },
  { "/32", "\"host\": \"203.0.113.7\"" },
  { "/24:443", "\"cidr\": \"203.0.113.0/24\", \"port\": 443" },
  { "/24", "\"cidr\": \"203.0.113.0/24\"" },
  { "/8:443", "\"cidr\": \"203.0.0.0/8\", \"ports\": [443, 8443]" },
  { "/8", "\"cidr\": \"203.0.0.0/8\"" },
  { "/0:443", "\"cidr\": \"0.0.0.0/0\", \"port\": 443" },
  { "/0", "\"cidr\": \"::/0\"" },
};

/* The policy of entry A (LEVELS[i], A_ALLOW) and entry B (LEVELS[j]), the
 * less specific one first, so that file order can't be what decides. */
static char *
pair_policy (const Level *a, bool a_allow, const Level *b, bool b_allow)
{
  g_autoptr (GString) allow = g_string_new (NULL);
  g_autoptr (GString) deny = g_string_new (NULL);
  GString *for_b = b_allow ? allow : deny;
  GString *for_a = a_allow ? allow : deny;

  g_string_append_printf (for_b, "{ %s, \"why\": \"b\" }", b->json);
  g_string_append_printf (for_a, "%s{ %s, \"why\": \"a\" }", for_a->len > 0 ? ", " : "", a->json);
  return g_strdup_printf (NET ("{ \"allow\": [ %s ], \"deny\": [ %s ] }"), allow->str, deny->str);
}

static void
check_pairs (const Level *levels, guint n, const char *host)
{
  for (guint i = 0; i < n; i++)
    for (guint j = i; j < n; j++)
      for (guint actions = 0; actions < 4; actions++)
        {
          bool a_allow = actions & 1, b_allow = (actions & 2) != 0;
          g_autofree char *text = NULL;
          g_autoptr (FbPolicy) p = NULL;
          FbPolicyNetDecision d;

          if (i == j && a_allow == b_allow)
            continue; /* the same entry twice is a duplicate */
          text = pair_policy (&levels[i], a_allow, &levels[j], b_allow);
          p = load_ok (text, &test_vars);
          fb_policy_net_decide (p, host, 443, &d);
          /* the more specific decides; at one level deny wins */
          if (i == j ? d.allowed : (d.allowed != a_allow || strcmp (d.rule->why, "a") != 0))
            fail_msg ("%s (%s) against %s (%s), asked %s:443: got %s by %s (%s)", levels[i].target,
                      a_allow ? "allow" : "deny", levels[j].target, b_allow ? "allow" : "deny", host,
                      d.allowed ? "allow" : "deny", d.rule->name, d.rule->text);
          /* at another port only the entries for any port are left */
          fb_policy_net_decide (p, host, 22, &d);
          if (strchr (levels[i].target, ':') == NULL && i != j &&
              (d.allowed != a_allow || strcmp (d.rule->why, "a") != 0))
            fail_msg ("%s against %s at port 22: got %s", levels[i].target, levels[j].target, d.rule->name);
          if (strchr (levels[i].target, ':') != NULL && strchr (levels[j].target, ':') == NULL &&
              (d.allowed != b_allow || strcmp (d.rule->why, "b") != 0))
            fail_msg ("%s against %s at port 22: got %s", levels[i].target, levels[j].target, d.rule->name);
        }
}

static void
test_precedence_names (void **state)
{
  (void)state;
  check_pairs (name_levels, G_N_ELEMENTS (name_levels), "a.b.example.com");
}

static void
test_precedence_addresses (void **state)
{
  (void)state;
  check_pairs (address_levels, G_N_ELEMENTS (address_levels), "203.0.113.7");
}

/* Names never match address entries, nor addresses name entries. */
static void
test_names_and_addresses_apart (void **state)
{
  (void)state;
  g_autoptr (FbPolicy) p = load_ok (NET ("{ \"allow\": [ { \"host\": \"*\", \"why\": \"names\" } ],"
                                         " \"deny\": [ { \"cidr\": \"0.0.0.0/0\", \"why\": \"no v4 literals\" } ] }"),
                                    &test_vars);
  FbPolicyNetDecision d;

  fb_policy_net_decide (p, "anything.example", 443, &d);
  assert_true (d.allowed);
  fb_policy_net_decide (p, "203.0.113.7", 443, &d);
  assert_false (d.allowed);
  assert_string_equal (d.rule->name, "deny[0]");
  fb_policy_net_decide (p, "[2001:db8::1]", 443, &d);
  assert_false (d.allowed);
  assert_string_equal (d.rule->name, "default");
}

/* ---- Addresses ------------------------------------------------------------------ */

static void
parse (const char *text, int *ret_family, guint8 ret[16])
{
  if (inet_pton (AF_INET, text, ret) == 1)
    *ret_family = AF_INET;
  else if (inet_pton (AF_INET6, text, ret) == 1)
    *ret_family = AF_INET6;
  else
    fail_msg ("%s is not an address", text);
}

static const struct
{
  FbPolicyNetClass cls;
  const char *addresses[20]; /* to the first NULL */
} class_cases[] = {
  { FB_POLICY_NET_CLASS_UNSPECIFIED, { "0.0.0.0", "0.1.2.3", "::" } },
  { FB_POLICY_NET_CLASS_LOOPBACK,
    { "127.0.0.1", "127.255.255.254", "::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1" /* NAT64 */,
      "2002:7f00:1::" /* 6to4 */ } },
  { FB_POLICY_NET_CLASS_PRIVATE,
    { "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1", "::ffff:10.9.8.7", "fc00::1", "fd12:3456::1",
      "fec0::1", "64:ff9b:1::1" } },
  { FB_POLICY_NET_CLASS_SHARED, { "100.64.0.1", "100.127.255.255" } },
  { FB_POLICY_NET_CLASS_LINK_LOCAL, { "169.254.169.254", "fe80::1", "febf::1" } },
  { FB_POLICY_NET_CLASS_MULTICAST, { "224.0.0.1", "ff02::1" } },
  { FB_POLICY_NET_CLASS_RESERVED,
    { "255.255.255.255", "240.0.0.1", "192.0.0.8", "198.18.0.1", "::7f00:1" /* IPv4-compatible */, "100::1" } },
  /* public: the neighbours of each block */
  { FB_POLICY_NET_CLASS_PUBLIC,
    { "1.1.1.1", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255", "128.0.0.0",
      "172.15.255.255", "172.32.0.0", "192.167.255.255", "203.0.113.7", "223.255.255.255", "2001:db8::1",
      "2606:4700::1111", "64:ff9b::1.1.1.1", "2002:101:101::", "::ffff:1.1.1.1", "fbff::1" } },
};

static void
test_classify (void **state)
{
  (void)state;
  for (guint i = 0; i < G_N_ELEMENTS (class_cases); i++)
    for (const char *const *address = class_cases[i].addresses; *address != NULL; address++)
      {
        guint8 a[16];
        int family;
        FbPolicyNetClass got;

        parse (*address, &family, a);
        got = fb_policy_net_classify (family, a);
        if (got != class_cases[i].cls)
          fail_msg ("%s: %s, expected %s", *address, fb_policy_net_class_to_string (got),
                    fb_policy_net_class_to_string (class_cases[i].cls));
      }
  for (guint c = 0; c < FB_POLICY_NET_CLASS_N; c++)
    assert_string_not_equal (fb_policy_net_class_to_string (c), "invalid");
  assert_string_equal (fb_policy_net_class_to_string (FB_POLICY_NET_CLASS_N), "invalid");
}

/* The second check: what a name resolved to. */
static const char *const check_policy =
  NET ("{ \"allow\": [\n"
       "    { \"host\": \"api.example.com\", \"why\": \"api\" },\n"
       "    { \"host\": \"*.corp.example\", \"why\": \"corp\" },\n"
       "    { \"cidr\": \"10.20.0.0/16\", \"why\": \"the corp network\" },\n"
       "    { \"cidr\": \"127.0.0.1\", \"port\": 8080, \"why\": \"the local model server\" },\n"
       "    { \"cidr\": \"0.0.0.0/0\", \"why\": \"every v4 address\" },\n"
       "    { \"cidr\": \"fd00:1::/32\", \"why\": \"v6 lab\" } ],\n"
       "  \"deny\": [ { \"cidr\": \"198.51.100.0/24\", \"why\": \"a bad neighbourhood\" } ] }");

static const struct
{
  const char *host;
  guint port;
  const char *address;
  bool allowed;
  const char *rule;
} check_cases[] = {
  { "api.example.com", 443, "203.0.113.7", true, "allow[4]" }, /* 0.0.0.0/0 names public v4 */
  { "api.example.com", 443, "2001:db8::7", true, "allow[0]" }, /* no address entry: the name's */
  { "api.example.com", 443, "127.0.0.1", false, "loopback" },
  { "api.example.com", 443, "::1", false, "loopback" },
  { "api.example.com", 443, "::ffff:127.0.0.1", false, "loopback" },
  { "api.example.com", 443, "64:ff9b::7f00:1", false, "loopback" },
  { "api.example.com", 443, "169.254.169.254", false, "link-local" },
  { "api.example.com", 443, "fe80::1", false, "link-local" },
  { "api.example.com", 443, "192.168.1.1", false, "private" }, /* 0.0.0.0/0 does not name it */
  { "api.example.com", 443, "fc00::1", false, "private" },
  { "api.example.com", 443, "100.64.0.1", false, "shared" },
  { "api.example.com", 443, "0.0.0.0", false, "unspecified" },
  { "api.example.com", 443, "::", false, "unspecified" },
  { "api.example.com", 443, "224.0.0.1", false, "multicast" },
  { "api.example.com", 443, "198.51.100.3", false, "deny[0]" },
  { "x.corp.example", 443, "10.20.3.4", true, "allow[2]" }, /* named: inside 10/8 */
  { "x.corp.example", 443, "::ffff:10.20.3.4", true, "allow[2]" },
  { "x.corp.example", 443, "10.21.0.1", false, "private" },
  { "x.corp.example", 443, "fd00:1::5", true, "allow[5]" },
  { "x.corp.example", 8080, "127.0.0.1", true, "allow[3]" },
  { "x.corp.example", 8081, "127.0.0.1", false, "loopback" },
  { "x.corp.example", 8080, "127.0.0.2", false, "loopback" },
  /* an address literal: the same check */
  { "127.0.0.1", 8080, "127.0.0.1", true, "allow[3]" },
  { "127.0.0.1", 80, "127.0.0.1", false, "loopback" },
  { "10.20.0.1", 443, "10.20.0.1", true, "allow[2]" },
  /* denied by name: the address changes nothing */
  { "other.example", 443, "203.0.113.7", false, "default" },
};

static void
test_check_address (void **state)
{
  (void)state;
  g_autoptr (FbPolicy) p = load_ok (check_policy, &test_vars);

  for (guint i = 0; i < G_N_ELEMENTS (check_cases); i++)
    {
      FbPolicyNetDecision by_name, d;
      guint8 a[16];
      int family;

      parse (check_cases[i].address, &family, a);
      fb_policy_net_decide (p, check_cases[i].host, check_cases[i].port, &by_name);
      fb_policy_net_check_address (p, &by_name, family, a, check_cases[i].port, &d);
      if (d.allowed != check_cases[i].allowed || strcmp (d.rule->name, check_cases[i].rule) != 0)
        fail_msg ("%s:%u at %s: got %s by %s, expected %s by %s", check_cases[i].host, check_cases[i].port,
                  check_cases[i].address, d.allowed ? "allow" : "deny", d.rule->name,
                  check_cases[i].allowed ? "allow" : "deny", check_cases[i].rule);
      if (!d.allowed && d.rule->kind == FB_POLICY_NET_RULE_SPECIAL)
        assert_contains (d.rule->why, "can't turn an allowed name into the host's own services");
    }
}

/* none and host, whatever is asked. */
static void
test_none_and_host (void **state)
{
  (void)state;
  g_autoptr (FbPolicy) none = load_ok (NET ("\"none\""), &test_vars);
  g_autoptr (FbPolicy) absent = load_ok ("{ \"version\": 1, \"rules\": [] }", &test_vars);
  g_autoptr (FbPolicy) host = load_ok (NET ("\"host\""), &test_vars);
  guint8 lo[4] = { 127, 0, 0, 1 };
  FbPolicyNetDecision d, a;

  fb_policy_net_decide (none, "api.example.com", 443, &d);
  assert_false (d.allowed);
  assert_string_equal (d.rule->name, "none");
  fb_policy_net_decide (absent, "api.example.com", 443, &d);
  assert_false (d.allowed);
  fb_policy_net_decide (host, "api.example.com", 443, &d);
  assert_true (d.allowed);
  assert_string_equal (d.rule->name, "host");
  fb_policy_net_check_address (host, &d, AF_INET, lo, 443, &a);
  assert_true (a.allowed);
  assert_int_equal (fb_policy_get_network (none), FB_POLICY_NETWORK_NONE);
  assert_int_equal (fb_policy_get_network (absent), FB_POLICY_NETWORK_NONE);
  assert_int_equal (fb_policy_get_network (host), FB_POLICY_NETWORK_HOST);
}

static void
test_normalize (void **state)
{
  (void)state;
  static const struct
  {
    const char *in, *out;
  } cases[] = {
    { "API.Example.COM.", "api.example.com" },
    { "a_b-c.example", "a_b-c.example" },
    { "[2001:DB8::1]", "2001:db8::1" },
    { "::ffff:10.0.0.1", "10.0.0.1" },
    { "203.0.113.7", "203.0.113.7" },
    { "a..b", NULL },
    { "", NULL },
    { "1.2.3", NULL },
    { "x.123", NULL },
    { "caf\xc3\xa9.example", NULL },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *got = fb_policy_net_host_normalize (cases[i].in);

      if (g_strcmp0 (got, cases[i].out) != 0)
        fail_msg ("%s: got %s, expected %s", cases[i].in, got, cases[i].out);
    }
}

/* ---- Load errors ------------------------------------------------------------------ */

typedef struct
{
  const char *text;
  FbPolicyError code;
  const char *prefix;
} ErrorCase;

#define ENTRY(x) NET ("{ \"allow\": [\n    " x " ] }")

static const ErrorCase error_cases[] = {
  { NET ("\"allowlist\""), FB_POLICY_ERROR_VALUE,
    "test.json:2:14: network: unknown network \"allowlist\"; valid: none, host, or an allowlist" },
  { NET ("3"), FB_POLICY_ERROR_SCHEMA, "test.json:2:14: network: expected \"none\", \"host\" or an allowlist" },
  { NET ("{ \"alow\": [] }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:2:16: network.alow: unknown key; did you mean \"allow\"?" },
  { NET ("{ \"allow\": {} }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:2:25: network.allow: expected an array of entries, got an object" },
  { ENTRY ("\"api.example.com\""), FB_POLICY_ERROR_SCHEMA,
    "test.json:3:5: network.allow[0]: expected an entry {\"host\" or \"cidr\"" },
  { ENTRY ("{ \"why\": \"x\" }"), FB_POLICY_ERROR_SCHEMA, "test.json:3:5: network.allow[0].host: missing" },
  { ENTRY ("{ \"host\": \"a.example\", \"cidr\": \"10.0.0.0/8\", \"why\": \"x\" }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:3:28: network.allow[0].cidr: an entry has either \"host\" or \"cidr\", not both" },
  { ENTRY ("{ \"host\": \"a.example\", \"prot\": 443, \"why\": \"x\" }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:3:28: network.allow[0].prot: unknown key; did you mean \"port\"?" },
  { ENTRY ("{ \"host\": \"a.example\" }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:3:5: network.allow[0].why: missing; every entry says why" },
  { ENTRY ("{ \"host\": \"a.example\", \"why\": \"\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:35: network.allow[0].why: empty" },
  { ENTRY ("{ \"host\": 7, \"why\": \"x\" }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:3:15: network.allow[0].host: expected a string, got an integer" },
  { ENTRY ("{ \"host\": \"a..example\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:15: network.allow[0].host: \"a..example\" is not a host name: an empty label" },
  { ENTRY ("{ \"host\": \"a.*.example\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:15: network.allow[0].host: \"a.*.example\": a wildcard is \"*.\" in front of a name" },
  { ENTRY ("{ \"host\": \"*example.com\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:15: network.allow[0].host: \"*example.com\": a wildcard is" },
  { ENTRY ("{ \"host\": \"a.example:443\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:15: network.allow[0].host: \"a.example:443\" is not a host name; a port goes in \"port\"" },
  { ENTRY ("{ \"host\": \"a b.example\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:15: network.allow[0].host: " },
  { ENTRY ("{ \"host\": \"1.2.3\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:15: network.allow[0].host: \"1.2.3\" is not a host name: its last label is a number" },
  { ENTRY ("{ \"cidr\": \"10.1.2.0/16\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:15: network.allow[0].cidr: \"10.1.2.0/16\" has bits set past its prefix; did you mean "
    "10.1.0.0/16?" },
  { ENTRY ("{ \"cidr\": \"10.0.0.0/33\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:15: network.allow[0].cidr: \"10.0.0.0/33\": the prefix length after \"/\" is a number from 0 to "
    "32" },
  { ENTRY ("{ \"cidr\": \"fc00::/129\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:15: network.allow[0].cidr: \"fc00::/129\": the prefix length after \"/\" is a number from 0 to "
    "128" },
  { ENTRY ("{ \"cidr\": \"10.0.0.0/\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:15: network.allow[0].cidr: \"10.0.0.0/\": the prefix length" },
  { ENTRY ("{ \"cidr\": \"example.com\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:15: network.allow[0].cidr: \"example.com\" is not an IPv4 or IPv6 address" },
  { ENTRY ("{ \"cidr\": \"[::1]\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:15: network.allow[0].cidr: \"[::1]\" is not an IPv4 or IPv6 address" },
  { ENTRY ("{ \"cidr\": \"fe80::1%eth0\", \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:15: network.allow[0].cidr: \"fe80::1%eth0\" is not an IPv4 or IPv6 address" },
  { ENTRY ("{ \"host\": \"a.example\", \"port\": 0, \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:36: network.allow[0].port: 0 is not a port; give a number from 1 to 65535" },
  { ENTRY ("{ \"host\": \"a.example\", \"port\": \"443\", \"why\": \"x\" }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:3:36: network.allow[0].port: expected a port number (an integer from 1 to 65535), got a string" },
  { ENTRY ("{ \"host\": \"a.example\", \"ports\": [80, 70000], \"why\": \"x\" }"), FB_POLICY_ERROR_VALUE,
    "test.json:3:42: network.allow[0].ports[1]: 70000 is not a port" },
  { ENTRY ("{ \"host\": \"a.example\", \"ports\": [80, 80], \"why\": \"x\" }"), FB_POLICY_ERROR_DUPLICATE,
    "test.json:3:42: network.allow[0].ports[1]: port 80 is listed twice" },
  { ENTRY ("{ \"host\": \"a.example\", \"ports\": [], \"why\": \"x\" }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:3:37: network.allow[0].ports: expected a non-empty array of port numbers, got an empty array" },
  { ENTRY ("{ \"host\": \"a.example\", \"port\": 1, \"ports\": [2], \"why\": \"x\" }"), FB_POLICY_ERROR_SCHEMA,
    "test.json:3:39: network.allow[0].ports: an entry has \"port\" or \"ports\", not both" },
  { ENTRY ("{ \"host\": \"a.example\", \"why\": \"x\" },\n    { \"host\": \"A.EXAMPLE.\", \"why\": \"y\" }"),
    FB_POLICY_ERROR_DUPLICATE,
    "test.json:4:5: network.allow[1]: duplicate of network.allow[0] at test.json:3:5 (the same a.example)" },
  { ENTRY ("{ \"cidr\": \"10.0.0.0/8\", \"ports\": [443, 80], \"why\": \"x\" },\n"
           "    { \"cidr\": \"10.0.0.0/8\", \"ports\": [80, 443], \"why\": \"y\" }"),
    FB_POLICY_ERROR_DUPLICATE, "test.json:4:5: network.allow[1]: duplicate of network.allow[0]" },
  { NET ("{ \"deny\": [ { \"host\": \"*.\", \"why\": \"x\" } ] }"), FB_POLICY_ERROR_VALUE,
    "test.json:2:36: network.deny[0].host: \"*.\" is not a host name: empty" },
};

static void
test_errors (void **state)
{
  guint failed = 0;

  (void)state;
  for (guint i = 0; i < G_N_ELEMENTS (error_cases); i++)
    {
      g_autofree char *message = load_error (error_cases[i].text, &test_vars, error_cases[i].code);

      if (!g_str_has_prefix (message, error_cases[i].prefix))
        {
          print_message ("case %u:\n  %s\ndoes not start with\n  %s\n", i, message, error_cases[i].prefix);
          failed++;
        }
    }
  assert_int_equal (failed, 0);
}

/* The same entries are accepted or refused without positions (a call's
 * sandbox comes as JSON). */
static void
test_errors_without_positions (void **state)
{
  (void)state;
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) p = NULL;

  assert_true (json_parser_load_from_data (
    parser, ENTRY ("{ \"host\": \"a.example\", \"ports\": [80, 80], \"why\": \"x\" }"), -1, NULL));
  p = fb_policy_load_json (json_parser_get_root (parser), "<sandbox>", &test_vars, &error);
  assert_null (p);
  assert_string_equal (error->message, "<sandbox>: network.allow[0].ports[1]: port 80 is listed twice; list it once");
}

/* ---- Written back ------------------------------------------------------------------ */

static void
test_round_trip (void **state)
{
  (void)state;
  g_autoptr (FbPolicy) p = load_ok (match_policy, &test_vars);
  g_autofree char *json = fb_policy_to_json (p);
  g_autoptr (FbPolicy) again = load_ok (json, &test_vars);
  g_autofree char *json2 = fb_policy_to_json (again);
  guint n1, n2;
  const FbPolicyNetRule *r1 = fb_policy_net_get_rules (p, &n1);
  const FbPolicyNetRule *r2 = fb_policy_net_get_rules (again, &n2);

  assert_string_equal (json, json2);
  assert_int_equal (n1, n2);
  for (guint i = 0; i < n1; i++)
    {
      assert_string_equal (r1[i].text, r2[i].text);
      assert_string_equal (r1[i].why, r2[i].why);
      assert_int_equal (r1[i].allow, r2[i].allow);
    }
  assert_contains (json, "\"host\" : \"*.example.com\"");
  assert_contains (json, "\"cidr\" : \"10.1.0.0/16\"");
  assert_contains (json, "\"cidr\" : \"2001:db8::/32\"");
}

/* ---- The command line's short form ------------------------------------------------ */

static FbPolicy *
apply (const char *base, const char *const *args, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *root;

  assert_true (json_parser_load_from_data (parser, base, -1, NULL));
  root = json_node_get_object (json_parser_get_root (parser));
  for (guint i = 0; args[i] != NULL; i++)
    if (!fb_policy_net_apply_short (root, args[i], error))
      return NULL;
  return fb_policy_load_json (json_parser_get_root (parser), "cli", &test_vars, error);
}

static void
test_short_form (void **state)
{
  (void)state;
  static const struct
  {
    const char *base;
    const char *args[4];
    const char *texts; /* the entries' texts, allow then deny, "|"-separated; NULL: network none/host */
    FbPolicyNetwork network;
  } cases[] = {
    { NET ("\"none\""), { "allow:api.openai.com:443" }, "+api.openai.com:443", FB_POLICY_NETWORK_ALLOWLIST },
    { NET ("\"host\""),
      { "allow:a.example,b.example:80,443" },
      "+a.example|+b.example:80,443",
      FB_POLICY_NETWORK_ALLOWLIST },
    { NET ("\"none\""),
      { "allow:*.example.com", "deny:evil.example.com" },
      "+*.example.com|-evil.example.com",
      FB_POLICY_NETWORK_ALLOWLIST },
    { NET ("\"none\""),
      { "allow:10.0.0.0/8:443,[fd00::/8]:80,[::1]:8080,::1" },
      "+10.0.0.0/8:443|+[fd00::/8]:80|+[::1]:8080|+::1",
      FB_POLICY_NETWORK_ALLOWLIST },
    { NET ("\"none\""),
      { "allow:a.example,deny:b.example,c.example" },
      "+a.example|-b.example|-c.example",
      FB_POLICY_NETWORK_ALLOWLIST },
    { NET ("{ \"allow\": [ { \"host\": \"x.example\", \"why\": \"file\" } ] }"),
      { "allow:y.example" },
      "+x.example|+y.example",
      FB_POLICY_NETWORK_ALLOWLIST },
    { NET ("{ \"allow\": [ { \"host\": \"x.example\", \"why\": \"file\" } ] }"),
      { "host" },
      NULL,
      FB_POLICY_NETWORK_HOST },
    { NET ("\"host\""), { "none" }, NULL, FB_POLICY_NETWORK_NONE },
    { NET ("\"none\""), { "allow:a.example", "none", "deny:b.example" }, "-b.example", FB_POLICY_NETWORK_ALLOWLIST },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (FbPolicy) p = apply (cases[i].base, cases[i].args, &error);
      g_autoptr (GString) got = g_string_new (NULL);
      const FbPolicyNetRule *rules;
      guint n;

      if (p == NULL)
        fail_msg ("case %u: %s", i, error->message);
      assert_int_equal (fb_policy_get_network (p), cases[i].network);
      rules = fb_policy_net_get_rules (p, &n);
      for (guint j = 0; j < n; j++)
        g_string_append_printf (got, "%s%c%s", j > 0 ? "|" : "", rules[j].allow ? '+' : '-', rules[j].text);
      if (cases[i].texts != NULL || n > 0)
        assert_string_equal (got->str, cases[i].texts);
      if (n > 0 && rules[n - 1].why != NULL && strstr (cases[i].base, "file") == NULL)
        assert_contains (rules[n - 1].why, "on the command line");
    }
}

static void
test_short_form_errors (void **state)
{
  (void)state;
  static const struct
  {
    const char *arg;
    const char *message; /* or a prefix of the loader's */
  } cases[] = {
    { "bogus", "--network bogus: give none, host, allow:HOST[:PORT] or deny:HOST[:PORT]" },
    { "allow:", "--network allow:: an empty host" },
    { "allow:a.example:0", "--network allow:a.example:0: \"0\" is not a port" },
    { "allow:a.example:http", "--network allow:a.example:http: \"http\" is not a port" },
    { "allow:a.example:80,99999", "--network allow:a.example:80,99999: \"99999\" is not a port" },
    { "allow:[::1", "--network allow:[::1: an IPv6 address in brackets is" },
    { "allow:a..example", "cli: network.allow[0].host: \"a..example\" is not a host name" },
    { "deny:10.1.2.3/8", "cli: network.deny[0].cidr: \"10.1.2.3/8\" has bits set past its prefix" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *args[] = { cases[i].arg, NULL };
      g_autoptr (GError) error = NULL;
      g_autoptr (FbPolicy) p = apply (NET ("\"none\""), args, &error);

      assert_null (p);
      assert_prefix (error->message, cases[i].message);
    }
}

/* ---- Narrowing ---------------------------------------------------------------------- */

static const struct
{
  const char *base, *narrow;
  FbPolicyNetwork network;
  /* "host:port" → allowed?, and the deciding rule's why */
  const char *asks[6];
  const char *answers[6];
} narrow_cases[] = {
  /* host narrowed by an allowlist: the allowlist */
  { NET ("\"host\""),
    NET ("{ \"allow\": [ { \"host\": \"a.example\", \"why\": \"call\" } ] }"),
    FB_POLICY_NETWORK_ALLOWLIST,
    { "a.example", "b.example" },
    { "+call", "-no network entry allows" } },
  /* an allowlist narrowed by host: the allowlist */
  { NET ("{ \"allow\": [ { \"host\": \"a.example\", \"why\": \"server\" } ] }"),
    NET ("\"host\""),
    FB_POLICY_NETWORK_ALLOWLIST,
    { "a.example", "b.example" },
    { "+server", "-no network entry allows" } },
  /* none on either side: none */
  { NET ("{ \"allow\": [ { \"host\": \"a.example\", \"why\": \"server\" } ] }"),
    NET ("\"none\""),
    FB_POLICY_NETWORK_NONE,
    { "a.example" },
    { "-the policy's network is none" } },
  { NET ("\"none\""),
    NET ("{ \"allow\": [ { \"host\": \"*\", \"why\": \"call\" } ] }"),
    FB_POLICY_NETWORK_NONE,
    { "a.example" },
    { "-the policy's network is none" } },
  { NET ("\"host\""), NET ("\"host\""), FB_POLICY_NETWORK_HOST, { "a.example" }, { "+the policy's network is host" } },
  /* two allowlists intersect: a call can take hosts away, never add them */
  { NET ("{ \"allow\": [ { \"host\": \"*.example\", \"why\": \"server\" } ],"
         " \"deny\": [ { \"host\": \"x.example\", \"why\": \"server says no\" } ] }"),
    NET ("{ \"allow\": [ { \"host\": \"a.example\", \"why\": \"call\" }, { \"host\": \"x.example\", \"why\": \"call "
         "wants x\" }, { \"host\": \"other.test\", \"why\": \"call adds\" } ] }"),
    FB_POLICY_NETWORK_ALLOWLIST,
    { "a.example", "b.example", "x.example", "other.test" },
    { "+server", "-no network entry allows", "-server says no", "-no network entry allows" } },
};

static void
test_narrowing (void **state)
{
  (void)state;
  for (guint i = 0; i < G_N_ELEMENTS (narrow_cases); i++)
    {
      g_autoptr (FbPolicy) base = load_ok (narrow_cases[i].base, &test_vars);
      g_autoptr (FbPolicy) narrow = load_ok (narrow_cases[i].narrow, &test_vars);
      g_autoptr (FbPolicy) p = narrow_ok (base, narrow);

      assert_int_equal (fb_policy_get_network (p), narrow_cases[i].network);
      for (guint j = 0; narrow_cases[i].asks[j] != NULL; j++)
        {
          const char *want = narrow_cases[i].answers[j];
          FbPolicyNetDecision d;

          fb_policy_net_decide (p, narrow_cases[i].asks[j], 443, &d);
          if (d.allowed != (want[0] == '+') || !g_str_has_prefix (d.rule->why, want + 1))
            fail_msg ("case %u, %s: got %s by \"%s\", expected %s", i, narrow_cases[i].asks[j],
                      d.allowed ? "allow" : "deny", d.rule->why, want);
        }
    }
}

/* The address check of a narrowed policy: either side's refusal holds, and
 * an address entry of either names a private address only when both let
 * it through. */
static void
test_narrowing_addresses (void **state)
{
  (void)state;
  g_autoptr (FbPolicy) base = load_ok (
    NET (
      "{ \"allow\": [ { \"host\": \"*\", \"why\": \"server\" }, { \"cidr\": \"10.0.0.0/8\", \"why\": \"corp\" } ] }"),
    &test_vars);
  g_autoptr (FbPolicy) narrow_host = load_ok (NET ("\"host\""), &test_vars);
  g_autoptr (FbPolicy) narrow_list =
    load_ok (NET ("{ \"allow\": [ { \"host\": \"a.example\", \"why\": \"call\" } ] }"), &test_vars);
  g_autoptr (FbPolicy) p1 = fb_policy_narrow (base, narrow_host, NULL);
  g_autoptr (FbPolicy) p2 = fb_policy_narrow (base, narrow_list, NULL);
  guint8 ten[4] = { 10, 1, 2, 3 }, lo[4] = { 127, 0, 0, 1 }, pub[4] = { 203, 0, 113, 7 };
  FbPolicyNetDecision n, d;

  fb_policy_net_decide (p1, "a.example", 443, &n);
  assert_true (n.allowed);
  fb_policy_net_check_address (p1, &n, AF_INET, ten, 443, &d);
  assert_true (d.allowed);
  assert_string_equal (d.rule->why, "corp");
  fb_policy_net_check_address (p1, &n, AF_INET, lo, 443, &d);
  assert_false (d.allowed);
  assert_string_equal (d.rule->name, "loopback");

  fb_policy_net_decide (p2, "a.example", 443, &n);
  assert_true (n.allowed);
  fb_policy_net_check_address (p2, &n, AF_INET, pub, 443, &d);
  assert_true (d.allowed);
  /* the call's list has no address entry: 10.x is refused on its side */
  fb_policy_net_check_address (p2, &n, AF_INET, ten, 443, &d);
  assert_false (d.allowed);
  assert_string_equal (d.rule->name, "private");
}

/* Every pair of networks narrows to the narrower: none < allowlist < host. */
static void
test_network_narrow_table (void **state)
{
  (void)state;
  static const FbPolicyNetwork order[] = { FB_POLICY_NETWORK_NONE, FB_POLICY_NETWORK_ALLOWLIST,
                                           FB_POLICY_NETWORK_HOST };

  for (guint i = 0; i < G_N_ELEMENTS (order); i++)
    for (guint j = 0; j < G_N_ELEMENTS (order); j++)
      assert_int_equal (fb_policy_network_narrow (order[i], order[j]), order[MIN (i, j)]);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_matching), cmocka_unit_test (test_rule_fields),
                  cmocka_unit_test (test_precedence_names), cmocka_unit_test (test_precedence_addresses),
                  cmocka_unit_test (test_names_and_addresses_apart), cmocka_unit_test (test_classify),
                  cmocka_unit_test (test_check_address), cmocka_unit_test (test_none_and_host),
                  cmocka_unit_test (test_normalize), cmocka_unit_test (test_errors),
                  cmocka_unit_test (test_errors_without_positions), cmocka_unit_test (test_round_trip),
                  cmocka_unit_test (test_short_form), cmocka_unit_test (test_short_form_errors),
                  cmocka_unit_test (test_narrowing), cmocka_unit_test (test_narrowing_addresses),
                  cmocka_unit_test (test_network_narrow_table))
