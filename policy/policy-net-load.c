/* fusebox — the network allowlist: reading the "network" member of a
 * policy, writing it back, and the command line's short form (--network).
 *
 * Strict, as the rest of the loader (policy-load.c): an unknown key, a
 * name that is not one, a range with bits past its prefix, a port out of
 * range or listed twice, a duplicate entry or a missing why is an error at
 * FILE:LINE:COL, because an entry that loads means what it says.
 */
#include "policy/policy-private.h"
#include "policy/util.h"

/* ---- Loading ----------------------------------------------------------------------- */

static const char *const network_keys[] = { "allow", "deny", NULL };
static const char *const entry_keys[] = { "host", "cidr", "port", "ports", "why", NULL };

static int
compare_ports (gconstpointer a, gconstpointer b)
{
  return (int)*(const guint16 *)a - (int)*(const guint16 *)b;
}

static bool
load_port (const FbPolicyLoadCtx *ctx, JsonNode *node, const char *member, guint16 *ret)
{
  gint64 v;

  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_SCHEMA, member, member, false,
                                "expected a port number (an integer from 1 to 65535), got %s",
                                fb_policy_load_node_type (node));
  v = json_node_get_int (node);
  if (v < 1 || v > 65535)
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_VALUE, member, member, false,
                                "%" G_GINT64_FORMAT " is not a port; give a number from 1 to 65535", v);
  *ret = (guint16)v;
  return true;
}

/* "port": N or "ports": [N, ...] of the entry at PATH into RULE. */
static bool
load_ports (const FbPolicyLoadCtx *ctx, JsonObject *object, const char *path, FbPolicyNetRule *rule)
{
  g_autofree char *port_member = fb_policy_json_path_member (path, "port");
  g_autofree char *ports_member = fb_policy_json_path_member (path, "ports");
  JsonNode *port = json_object_get_member (object, "port");
  JsonNode *ports = json_object_get_member (object, "ports");
  g_autofree guint16 *list = NULL;
  JsonArray *array;
  guint n;

  if (port != NULL && ports != NULL)
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_SCHEMA, ports_member, ports_member, true,
                                "an entry has \"port\" or \"ports\", not both; put every port in \"ports\"");
  if (port != NULL)
    {
      list = g_new (guint16, 1);
      if (!load_port (ctx, port, port_member, &list[0]))
        return false;
      rule->n_ports = 1;
      rule->ports = g_steal_pointer (&list);
      return true;
    }
  if (ports == NULL)
    return true;
  if (!JSON_NODE_HOLDS_ARRAY (ports) || json_array_get_length (json_node_get_array (ports)) == 0)
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_SCHEMA, ports_member, ports_member, false,
                                "expected a non-empty array of port numbers, got %s",
                                JSON_NODE_HOLDS_ARRAY (ports) ? "an empty array" : fb_policy_load_node_type (ports));
  array = json_node_get_array (ports);
  n = json_array_get_length (array);
  list = g_new (guint16, n);
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *member = g_strdup_printf ("%s[%u]", ports_member, i);

      if (!load_port (ctx, json_array_get_element (array, i), member, &list[i]))
        return false;
      for (guint j = 0; j < i; j++)
        if (list[j] == list[i])
          return fb_policy_load_fail (ctx, FB_POLICY_ERROR_DUPLICATE, member, member, false,
                                      "port %u is listed twice; list it once", list[i]);
    }
  qsort (list, n, sizeof list[0], compare_ports);
  rule->n_ports = n;
  rule->ports = g_steal_pointer (&list);
  return true;
}

/* "host": a name, "*.suffix", "*", or an address literal (an address entry
 * of the whole address). */
static bool
load_host (const FbPolicyLoadCtx *ctx, FbPolicy *policy, const char *raw, const char *member, FbPolicyNetRule *rule)
{
  g_autofree char *ascii = NULL;
  const char *name = raw;
  const char *wrong;
  bool v4;

  if (raw[0] == '[' && raw[strlen (raw) - 1] == ']')
    {
      g_autofree char *inner = g_strndup (raw + 1, strlen (raw) - 2);

      if (fb_policy_net_parse_address (inner, rule->addr, &v4) && !v4)
        {
          rule->kind = FB_POLICY_NET_RULE_ADDRESS;
          rule->prefix = 128;
          return true;
        }
    }
  if (fb_policy_net_parse_address (raw, rule->addr, &v4))
    {
      rule->kind = FB_POLICY_NET_RULE_ADDRESS;
      rule->prefix = 128;
      return true;
    }
  if (strcmp (raw, "*") == 0)
    {
      rule->kind = FB_POLICY_NET_RULE_SUFFIX;
      rule->host = "";
      return true;
    }
  rule->kind = FB_POLICY_NET_RULE_HOST;
  if (g_str_has_prefix (raw, "*."))
    {
      rule->kind = FB_POLICY_NET_RULE_SUFFIX;
      name = raw + 2;
    }
  if (strchr (name, '*') != NULL)
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_VALUE, member, member, false,
                                "\"%s\": a wildcard is \"*.\" in front of a name (\"*.example.com\": its "
                                "subdomains), or \"*\" alone (every name)",
                                raw);
  if (strchr (name, ':') != NULL || strchr (name, '/') != NULL)
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_VALUE, member, member, false,
                                "\"%s\" is not a host name; a port goes in \"port\", a range in \"cidr\"", raw);
  /* IDNA: a name in Unicode is compared as the ASCII name clients send
   * (g_hostname_to_ascii also folds case); its failure means the name can
   * never be asked for. */
  ascii = g_hostname_to_ascii (name);
  if (ascii == NULL)
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_VALUE, member, member, false,
                                "\"%s\" is not a valid internationalized host name", raw);
  wrong = fb_policy_net_check_name (ascii);
  if (wrong != NULL)
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_VALUE, member, member, false, "\"%s\" is not a host name: %s", raw,
                                wrong);
  if (rule->kind == FB_POLICY_NET_RULE_SUFFIX)
    {
      g_autofree char *dotted = g_strconcat (".", ascii, NULL);

      rule->host = g_string_chunk_insert (policy->strings, dotted);
    }
  else
    rule->host = g_string_chunk_insert (policy->strings, ascii);
  return true;
}

/* The entry as --network writes it: HOST[:PORTS], [V6]:PORTS */
static char *
rule_text (const FbPolicyNetRule *rule)
{
  GString *out = g_string_new (NULL);
  g_autofree char *cidr = NULL;

  switch (rule->kind)
    {
      case FB_POLICY_NET_RULE_HOST:
        g_string_append (out, rule->host);
        break;
      case FB_POLICY_NET_RULE_SUFFIX:
        g_string_append_printf (out, "*%s", rule->host);
        break;
      case FB_POLICY_NET_RULE_ADDRESS:
      case FB_POLICY_NET_RULE_SPECIAL:
      case FB_POLICY_NET_RULE_DEFAULT:
        cidr = fb_policy_net_format_cidr (rule->addr, rule->prefix);
        if (rule->n_ports > 0 && strchr (cidr, ':') != NULL)
          g_string_append_printf (out, "[%s]", cidr);
        else
          g_string_append (out, cidr);
        break;
    }
  for (guint i = 0; i < rule->n_ports; i++)
    g_string_append_printf (out, "%c%u", i == 0 ? ':' : ',', rule->ports[i]);
  return g_string_free (out, FALSE);
}

static bool
same_target (const FbPolicyNetRule *a, const FbPolicyNetRule *b)
{
  if (a->kind != b->kind || a->n_ports != b->n_ports)
    return false;
  if (a->n_ports > 0 && memcmp (a->ports, b->ports, a->n_ports * sizeof a->ports[0]) != 0)
    return false;
  if (a->kind == FB_POLICY_NET_RULE_ADDRESS)
    return a->prefix == b->prefix && memcmp (a->addr, b->addr, 16) == 0;
  return strcmp (a->host, b->host) == 0;
}

static bool
load_entry (const FbPolicyLoadCtx *ctx, FbPolicy *policy, JsonNode *node, const char *path, FbPolicyNetRule *rule)
{
  g_autofree char *host_member = fb_policy_json_path_member (path, "host");
  g_autofree char *cidr_member = fb_policy_json_path_member (path, "cidr");
  g_autofree char *why_member = fb_policy_json_path_member (path, "why");
  g_autofree char *text = NULL;
  g_autofree char *origin = NULL;
  JsonObject *object;
  JsonNode *host, *cidr, *why;

  if (!JSON_NODE_HOLDS_OBJECT (node))
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_SCHEMA, path, path, false,
                                "expected an entry {\"host\" or \"cidr\", optional \"port\" or \"ports\", \"why\"}, "
                                "got %s",
                                fb_policy_load_node_type (node));
  object = json_node_get_object (node);
  if (!fb_policy_load_check_keys (ctx, object, path, entry_keys))
    return false;
  host = json_object_get_member (object, "host");
  cidr = json_object_get_member (object, "cidr");
  why = json_object_get_member (object, "why");
  if (host != NULL && cidr != NULL)
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_SCHEMA, cidr_member, cidr_member, true,
                                "an entry has either \"host\" or \"cidr\", not both; split it into two entries");
  if (host == NULL && cidr == NULL)
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_SCHEMA, host_member, path, false,
                                "missing; an entry names a \"host\" (\"api.example.com\", \"*.example.com\") or a "
                                "\"cidr\" (\"10.1.0.0/16\", \"fc00::/7\", \"203.0.113.7\")");
  if (!JSON_NODE_HOLDS_VALUE (host != NULL ? host : cidr) ||
      json_node_get_value_type (host != NULL ? host : cidr) != G_TYPE_STRING)
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_SCHEMA, host != NULL ? host_member : cidr_member,
                                host != NULL ? host_member : cidr_member, false, "expected a string, got %s",
                                fb_policy_load_node_type (host != NULL ? host : cidr));
  if (host != NULL)
    {
      if (!load_host (ctx, policy, json_node_get_string (host), host_member, rule))
        return false;
    }
  else
    {
      g_autofree char *wrong = fb_policy_net_parse_cidr (json_node_get_string (cidr), rule->addr, &rule->prefix);

      if (wrong != NULL)
        return fb_policy_load_fail (ctx, FB_POLICY_ERROR_VALUE, cidr_member, cidr_member, false, "%s", wrong);
      rule->kind = FB_POLICY_NET_RULE_ADDRESS;
    }
  if (!load_ports (ctx, object, path, rule))
    return false;
  if (why == NULL)
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_SCHEMA, why_member, path, false,
                                "missing; every entry says why it exists (it is logged with each connection)");
  if (!JSON_NODE_HOLDS_VALUE (why) || json_node_get_value_type (why) != G_TYPE_STRING)
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_SCHEMA, why_member, why_member, false, "expected a string, got %s",
                                fb_policy_load_node_type (why));
  if (json_node_get_string (why)[0] == '\0')
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_VALUE, why_member, why_member, false,
                                "empty; say why the entry exists (it is logged with each connection it decides)");
  rule->why = g_string_chunk_insert (policy->strings, json_node_get_string (why));
  text = rule_text (rule);
  rule->text = g_string_chunk_insert (policy->strings, text);
  origin = fb_policy_load_origin (ctx, path);
  rule->origin = g_string_chunk_insert (policy->strings, origin);
  return true;
}

static bool
load_list (const FbPolicyLoadCtx *ctx, FbPolicy *policy, JsonObject *network, const char *key, GArray *out)
{
  g_autofree char *member = fb_policy_json_path_member ("network", key);
  JsonNode *node = json_object_get_member (network, key);
  JsonArray *array;
  guint first = out->len;

  if (node == NULL)
    return true;
  if (!JSON_NODE_HOLDS_ARRAY (node))
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_SCHEMA, member, member, false,
                                "expected an array of entries, got %s", fb_policy_load_node_type (node));
  array = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      g_autofree char *path = g_strdup_printf ("%s[%u]", member, i);
      g_autofree char *name = g_strdup_printf ("%s[%u]", key, i);
      FbPolicyNetRule rule = { .allow = strcmp (key, "allow") == 0, .index = (int)i };

      /* appended first, so that the array owns the ports even on failure */
      g_array_append_val (out, rule);
      if (!load_entry (ctx, policy, json_array_get_element (array, i), path,
                       &g_array_index (out, FbPolicyNetRule, out->len - 1)))
        return false;
      g_array_index (out, FbPolicyNetRule, out->len - 1).name = g_string_chunk_insert (policy->strings, name);
      for (guint j = first; j < out->len - 1; j++)
        {
          const FbPolicyNetRule *a = &g_array_index (out, FbPolicyNetRule, j);
          const FbPolicyNetRule *b = &g_array_index (out, FbPolicyNetRule, out->len - 1);

          if (same_target (a, b))
            {
              g_autofree char *other = g_strdup_printf ("%s[%d]", member, a->index);
              FbPolicyPos pos;
              g_autofree char *where =
                fb_policy_pos_index_lookup (ctx->index, other, false, &pos)
                  ? g_strdup_printf ("%s at %s:%u:%u", other, ctx->origin != NULL ? ctx->origin : "<data>", pos.line,
                                     pos.col)
                  : g_strdup (other);

              return fb_policy_load_fail (ctx, FB_POLICY_ERROR_DUPLICATE, path, path, false,
                                          "duplicate of %s (the same %s); remove one", where, b->text);
            }
        }
    }
  return true;
}

static void
free_rules (GArray *rules)
{
  for (guint i = 0; i < rules->len; i++)
    g_free ((gpointer)g_array_index (rules, FbPolicyNetRule, i).ports);
  g_array_free (rules, TRUE);
}

bool
fb_policy_net_load (const FbPolicyLoadCtx *ctx, FbPolicy *policy, JsonNode *node)
{
  GArray *rules;
  JsonObject *network;

  policy->network = FB_POLICY_NETWORK_NONE;
  if (node == NULL)
    return true;
  if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING)
    {
      const char *s = json_node_get_string (node);

      if (!fb_policy_network_from_string (s, &policy->network) || policy->network == FB_POLICY_NETWORK_ALLOWLIST)
        return fb_policy_load_fail (ctx, FB_POLICY_ERROR_VALUE, "network", "network", false,
                                    "unknown network \"%s\"; valid: none, host, or an allowlist "
                                    "{\"allow\": [{\"host\": \"api.example.com\", \"port\": 443, \"why\": \"...\"}]}",
                                    s);
      return true;
    }
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return fb_policy_load_fail (ctx, FB_POLICY_ERROR_SCHEMA, "network", "network", false,
                                "expected \"none\", \"host\" or an allowlist {\"allow\": [...], \"deny\": [...]}, "
                                "got %s",
                                fb_policy_load_node_type (node));
  network = json_node_get_object (node);
  if (!fb_policy_load_check_keys (ctx, network, "network", network_keys))
    return false;
  rules = g_array_new (FALSE, TRUE, sizeof (FbPolicyNetRule));
  if (!load_list (ctx, policy, network, "allow", rules) || !load_list (ctx, policy, network, "deny", rules))
    {
      free_rules (rules);
      return false;
    }
  policy->network = FB_POLICY_NETWORK_ALLOWLIST;
  policy->n_net_rules = rules->len;
  policy->net_rules = (FbPolicyNetRule *)(void *)g_array_free (rules, FALSE);
  return true;
}

void
fb_policy_net_build_json (const FbPolicy *policy, JsonBuilder *b)
{
  if (policy->network != FB_POLICY_NETWORK_ALLOWLIST)
    {
      json_builder_add_string_value (b, fb_policy_network_to_string (policy->network));
      return;
    }
  json_builder_begin_object (b);
  for (guint side = 0; side < 2; side++)
    {
      bool allow = side == 0; /* "allow" first, then "deny" */
      bool any = false;

      for (guint i = 0; i < policy->n_net_rules; i++)
        {
          const FbPolicyNetRule *rule = &policy->net_rules[i];

          if (rule->allow != allow)
            continue;
          if (!any)
            {
              json_builder_set_member_name (b, allow ? "allow" : "deny");
              json_builder_begin_array (b);
              any = true;
            }
          json_builder_begin_object (b);
          if (rule->kind == FB_POLICY_NET_RULE_ADDRESS)
            {
              g_autofree char *cidr = fb_policy_net_format_cidr (rule->addr, rule->prefix);

              fb_json_builder_add_string_member (b, "cidr", cidr);
            }
          else
            {
              g_autofree char *host =
                g_strconcat (rule->kind == FB_POLICY_NET_RULE_SUFFIX ? "*" : "", rule->host, NULL);

              fb_json_builder_add_string_member (b, "host", host);
            }
          if (rule->n_ports == 1)
            fb_json_builder_add_int_member (b, "port", rule->ports[0]);
          else if (rule->n_ports > 1)
            {
              json_builder_set_member_name (b, "ports");
              json_builder_begin_array (b);
              for (guint j = 0; j < rule->n_ports; j++)
                json_builder_add_int_value (b, rule->ports[j]);
              json_builder_end_array (b);
            }
          fb_json_builder_add_string_member (b, "why", rule->why);
          json_builder_end_object (b);
        }
      if (any)
        json_builder_end_array (b);
    }
  json_builder_end_object (b);
}

/* ---- The command line's short form ------------------------------------------------ */

/* "TARGET[:PORT]" → an entry {"host" or "cidr", "port"?, "why"}. */
static JsonObject *
short_entry (const char *arg, const char *verb, const char *item, GError **error)
{
  g_autofree char *target = NULL;
  const char *port = NULL;
  JsonObject *entry;
  g_autofree char *why = NULL;
  guint8 addr[16];
  bool v4;

  if (item[0] == '[')
    {
      const char *close = strchr (item, ']');

      if (close == NULL || (close[1] != '\0' && close[1] != ':'))
        {
          g_set_error (error, FB_POLICY_ERROR, FB_POLICY_ERROR_VALUE,
                       "--network %s:%s: an IPv6 address in brackets is \"[ADDRESS]\" or \"[ADDRESS]:PORT\"", verb,
                       item);
          return NULL;
        }
      target = g_strndup (item + 1, (gsize)(close - item - 1));
      port = close[1] == ':' ? close + 2 : NULL;
    }
  else
    {
      const char *colon = strchr (item, ':');

      if (colon != NULL && strchr (colon + 1, ':') == NULL)
        {
          target = g_strndup (item, (gsize)(colon - item));
          port = colon + 1;
        }
      else
        target = g_strdup (item); /* no port, or an IPv6 address without one */
    }
  if (port != NULL)
    {
      guint64 n = 0;

      if (!g_ascii_string_to_unsigned (port, 10, 1, 65535, &n, NULL))
        {
          g_set_error (error, FB_POLICY_ERROR, FB_POLICY_ERROR_VALUE,
                       "--network %s:%s: \"%s\" is not a port; give a number from 1 to 65535", verb, item, port);
          return NULL;
        }
    }
  entry = json_object_new ();
  if (strchr (target, '/') != NULL || fb_policy_net_parse_address (target, addr, &v4))
    json_object_set_string_member (entry, "cidr", target);
  else
    json_object_set_string_member (entry, "host", target);
  if (port != NULL)
    json_object_set_int_member (entry, "port", (gint64)g_ascii_strtoull (port, NULL, 10));
  why = g_strdup_printf ("--network %s on the command line", arg);
  json_object_set_string_member (entry, "why", why);
  return entry;
}

static JsonArray *
member_array (JsonObject *object, const char *key)
{
  if (!json_object_has_member (object, key))
    json_object_set_array_member (object, key, json_array_new ());
  return json_object_get_array_member (object, key);
}

bool
fb_policy_net_apply_short (JsonObject *root, const char *arg, GError **error)
{
  g_auto (GStrv) items = NULL;
  JsonNode *have = json_object_get_member (root, "network");
  JsonObject *network;
  JsonObject *last = NULL;
  const char *verb = NULL;

  if (strcmp (arg, "none") == 0 || strcmp (arg, "host") == 0)
    {
      json_object_set_string_member (root, "network", arg);
      return true;
    }
  if (!g_str_has_prefix (arg, "allow:") && !g_str_has_prefix (arg, "deny:"))
    {
      g_set_error (error, FB_POLICY_ERROR, FB_POLICY_ERROR_VALUE,
                   "--network %s: give none, host, allow:HOST[:PORT] or deny:HOST[:PORT] (HOST a name, *.SUFFIX, "
                   "an address or a CIDR range; comma-separated or repeated)",
                   arg);
      return false;
    }
  /* none and host start an empty allowlist: --network allow:X means "X" */
  if (have == NULL || !JSON_NODE_HOLDS_OBJECT (have))
    json_object_set_object_member (root, "network", json_object_new ());
  network = json_object_get_object_member (root, "network");
  items = g_strsplit (arg, ",", -1);
  for (guint i = 0; items[i] != NULL; i++)
    {
      const char *item = items[i];
      JsonObject *entry;

      if (last != NULL && item[0] != '\0' && strspn (item, "0123456789") == strlen (item))
        {
          /* "allow:h:80,443": one more port of the entry before */
          guint64 n = 0;
          JsonArray *ports;

          if (!g_ascii_string_to_unsigned (item, 10, 1, 65535, &n, NULL))
            {
              g_set_error (error, FB_POLICY_ERROR, FB_POLICY_ERROR_VALUE,
                           "--network %s: \"%s\" is not a port; give a number from 1 to 65535", arg, item);
              return false;
            }
          if (json_object_has_member (last, "port"))
            {
              gint64 first = json_object_get_int_member (last, "port");

              json_object_remove_member (last, "port");
              ports = member_array (last, "ports");
              json_array_add_int_element (ports, first);
            }
          ports = member_array (last, "ports");
          json_array_add_int_element (ports, (gint64)n);
          continue;
        }
      if (g_str_has_prefix (item, "allow:") || g_str_has_prefix (item, "deny:"))
        {
          verb = item[0] == 'a' ? "allow" : "deny";
          item += strlen (verb) + 1;
        }
      if (item[0] == '\0')
        {
          g_set_error (error, FB_POLICY_ERROR, FB_POLICY_ERROR_VALUE, "--network %s: an empty host", arg);
          return false;
        }
      entry = short_entry (arg, verb, item, error);
      if (entry == NULL)
        return false;
      json_array_add_object_element (member_array (network, verb), entry);
      last = entry;
    }
  return true;
}
