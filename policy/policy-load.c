/* fusebox — the policy engine: loading and strict validation.
 *
 * Invariants:
 *  - A policy that loads means what it says: every unknown key, wrong type,
 *    unknown value, relative or unnormalized path, duplicate rule, missing
 *    "why", glob granting access or unknown version is an error, because a
 *    typo that loads would silently weaken the sandbox.
 *  - Every error message reads "ORIGIN:LINE:COL: FIELD: what is wrong; what
 *    would be valid" (without LINE:COL when the policy came as a JsonNode).
 *  - A loaded FbPolicy is immutable and reference-counted; all queries may
 *    run concurrently on any thread (FUSE workers, the main loop).
 *
 * Threat model: the policy file is written by the user who runs fusebox, but
 * it may come from a repository they did not write, or from a remote API
 * caller (through the Codex translation); so parsing is bounded (size,
 * nesting) and never trusts the text (see policy-pos.c), and the fuzzer
 * (tests/fuzz/fuzz-policy.c) drives this file.
 */
#include "policy/policy-private.h"
#include "policy/util-file.h"
#include "policy/util.h"

#include <errno.h>

/* ---- Reference counting --------------------------------------------------- */

/* An answer of the policy's own, not of a rule of the file. */
static FbPolicyRule
answer_rule (const char *origin, FbPolicyAccess access, const char *why)
{
  return (FbPolicyRule){ .kind = FB_POLICY_RULE_DEFAULT, .index = -1, .origin = origin, .access = access, .why = why };
}

FbPolicy *
fb_policy_new_empty (const char *origin)
{
  FbPolicy *policy = g_atomic_rc_box_new0 (FbPolicy);

  policy->origin = g_strdup (origin != NULL ? origin : "<data>");
  policy->strings = g_string_chunk_new (1024);
  policy->default_rule = answer_rule ("default", FB_POLICY_ACCESS_HIDE, "no rule grants this path");
  policy->malformed_rule =
    answer_rule ("default", FB_POLICY_ACCESS_HIDE,
                 "not a normalized view path (absolute, without //, . or .. components or a trailing /)");
  policy->fold_rule = answer_rule ("folded-name", FB_POLICY_ACCESS_DENY,
                                   "the host folds names here (case-insensitive), and this name folds equal to a name "
                                   "whose rules below it can't be told apart from its own: refused as a whole");
  return policy;
}

static void
policy_clear (FbPolicy *policy)
{
  fb_policy_compiled_clear (policy);
  fb_policy_narrowed_clear (policy);
  fb_policy_net_clear (policy);
  for (guint i = 0; i < policy->n_rules; i++)
    fb_policy_glob_free (policy->globs != NULL ? policy->globs[i] : NULL);
  g_free (policy->globs);
  g_free (policy->rules);
  g_free (policy->protected_rules);
  fb_name_map_clear (&policy->protected_map);
  g_string_chunk_free (policy->strings);
  g_free (policy->origin);
}

FB_DEFINE_REF_UNREF (fb_policy, FbPolicy, policy_clear)

FbPolicyNetwork
fb_policy_get_network (const FbPolicy *policy)
{
  return policy->network;
}

void
fb_policy_get_log_limits (const FbPolicy *policy, FbPolicyLogLimits *ret_limits)
{
  if (policy->base != NULL)
    policy = policy->base; /* a call's sandbox does not budget the server's log */
  *ret_limits = policy->log;
}

bool
fb_policy_parse_size (const char *text, guint64 *ret_bytes)
{
  static const struct
  {
    const char *suffix;
    guint64 factor;
  } units[] = {
    { "", 1 },
    { "B", 1 },
    { "K", 1024 },
    { "KB", 1024 },
    { "KiB", 1024 },
    { "M", 1024 * 1024 },
    { "MB", 1024 * 1024 },
    { "MiB", 1024 * 1024 },
    { "G", 1024 * 1024 * 1024 },
    { "GB", 1024 * 1024 * 1024 },
    { "GiB", 1024 * 1024 * 1024 },
  };
  const char *p = text;
  guint64 n = 0;

  if (text == NULL || !g_ascii_isdigit (*p))
    return false;
  for (; g_ascii_isdigit (*p); p++)
    {
      if (n > (G_MAXUINT64 - 9) / 10)
        return false;
      n = n * 10 + (guint64)(*p - '0');
    }
  for (guint i = 0; i < G_N_ELEMENTS (units); i++)
    if (g_ascii_strcasecmp (p, units[i].suffix) == 0)
      {
        if (n == 0 || n > G_MAXUINT64 / units[i].factor)
          return false;
        *ret_bytes = n * units[i].factor;
        return true;
      }
  return false;
}

const char *
fb_policy_get_origin (const FbPolicy *policy)
{
  return policy->origin;
}

static bool
same_rule (const FbPolicyRule *a, const FbPolicyRule *b)
{
  return a->kind == b->kind && a->index == b->index && a->access == b->access && g_strcmp0 (a->path, b->path) == 0 &&
         g_strcmp0 (a->glob, b->glob) == 0 && g_strcmp0 (a->source, b->source) == 0 && strcmp (a->why, b->why) == 0;
}

void
fb_policy_keep_origins (FbPolicy *policy, const FbPolicy *from)
{
  if (policy->narrow != NULL || from->narrow != NULL)
    return;
  for (guint i = 0; i < policy->n_rules && i < from->n_rules; i++)
    {
      FbPolicyRule *rule = &policy->rules[i];
      const FbPolicyRule *was = &from->rules[i];

      if (!same_rule (rule, was))
        continue;
      rule->origin = g_string_chunk_insert (policy->strings, was->origin);
      if (was->source_at != NULL)
        rule->source_at = g_string_chunk_insert (policy->strings, was->source_at);
    }
  for (guint i = 0; i < policy->n_net_rules; i++)
    {
      FbPolicyNetRule *rule = &policy->net_rules[i];

      if (rule->index < 0)
        continue;
      for (guint j = 0; j < from->n_net_rules; j++)
        {
          const FbPolicyNetRule *was = &from->net_rules[j];

          if (was->allow == rule->allow && was->index == rule->index && strcmp (was->text, rule->text) == 0 &&
              strcmp (was->why, rule->why) == 0)
            {
              rule->origin = g_string_chunk_insert (policy->strings, was->origin);
              break;
            }
        }
    }
}

const FbPolicyRule *
fb_policy_get_rules (const FbPolicy *policy, guint *ret_n)
{
  if (policy->narrow != NULL)
    return fb_policy_get_rules (policy->base, ret_n); /* the narrowing side's are not listed */
  if (ret_n != NULL)
    *ret_n = policy->n_rules;
  return policy->rules;
}

const FbPolicyMount *
fb_policy_get_mounts (const FbPolicy *policy, guint *ret_n)
{
  if (policy->narrow != NULL)
    return fb_policy_get_mounts (policy->base, ret_n); /* mounts are BASE's alone */
  if (ret_n != NULL)
    *ret_n = policy->mounts->len;
  return (const FbPolicyMount *)(void *)policy->mounts->data;
}

/* ---- Error messages -------------------------------------------------------- */

typedef FbPolicyLoadCtx Ctx;

typedef enum
{
  AT_VALUE, /* the start of the field's value */
  AT_KEY,   /* the start of the field's key */
} At;

/* "ORIGIN:LINE:COL: FIELD: message", where the position is that of POS_PATH
 * (its value or its key) and FIELD names FIELD_PATH. */
static bool G_GNUC_PRINTF (6, 7) fail (const Ctx *ctx, FbPolicyError code, const char *field_path, const char *pos_path,
                                       At at, const char *format, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;
  g_autoptr (GString) prefix = g_string_new (NULL);
  FbPolicyPos pos;

  va_start (ap, format);
  msg = g_strdup_vprintf (format, ap);
  va_end (ap);
  if (ctx->origin != NULL)
    g_string_append (prefix, ctx->origin);
  if (fb_policy_pos_index_lookup (ctx->index, pos_path, at == AT_KEY, &pos))
    g_string_append_printf (prefix, ":%u:%u", pos.line, pos.col);
  if (prefix->len > 0)
    g_string_append (prefix, ": ");
  g_set_error (ctx->error, FB_POLICY_ERROR, code, "%s%s: %s", prefix->str,
               field_path[0] != '\0' ? field_path : "(top level)", msg);
  return false;
}

/* Where a field is, for messages that name a second field ("duplicate of
 * rules[2] at FILE:3:5"). */
static char *
describe_position (const Ctx *ctx, const char *path)
{
  FbPolicyPos pos;

  if (fb_policy_pos_index_lookup (ctx->index, path, false, &pos))
    return g_strdup_printf ("%s at %s:%u:%u", path, ctx->origin != NULL ? ctx->origin : "<data>", pos.line, pos.col);
  return g_strdup (path);
}

static const char *
node_type_name (JsonNode *node)
{
  return fb_json_node_kind (node, "an integer");
}

static bool
is_string (JsonNode *node)
{
  return JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING;
}

static guint
edit_distance (const char *a, const char *b)
{
  gsize la = strlen (a);
  gsize lb = strlen (b);
  g_autofree guint *row = NULL;

  if (la > 64 || lb > 64)
    return G_MAXUINT;
  row = g_new (guint, lb + 1);
  for (gsize j = 0; j <= lb; j++)
    row[j] = (guint)j;
  for (gsize i = 1; i <= la; i++)
    {
      guint diag = row[0];

      row[0] = (guint)i;
      for (gsize j = 1; j <= lb; j++)
        {
          guint up = row[j];
          guint best = MIN (row[j] + 1, row[j - 1] + 1);

          best = MIN (best, diag + (a[i - 1] == b[j - 1] ? 0 : 1));
          diag = up;
          row[j] = best;
        }
    }
  return row[lb];
}

/* Refuse members outside VALID (a NULL-terminated list). */
static bool
check_keys (const Ctx *ctx, JsonObject *object, const char *path, const char *const *valid)
{
  g_autoptr (GList) members = json_object_get_members (object);

  for (GList *l = members; l != NULL; l = l->next)
    {
      const char *key = l->data;
      g_autofree char *member = NULL;
      g_autofree char *list = NULL;
      const char *suggestion = NULL;
      bool known = false;

      for (guint i = 0; valid[i] != NULL; i++)
        {
          if (strcmp (key, valid[i]) == 0)
            known = true;
          else if (suggestion == NULL && edit_distance (key, valid[i]) <= 2)
            suggestion = valid[i];
        }
      if (known)
        continue;
      member = fb_policy_json_path_member (path, key);
      list = g_strjoinv (", ", (char **)valid);
      if (suggestion != NULL)
        return fail (ctx, FB_POLICY_ERROR_SCHEMA, member, member, AT_KEY, "unknown key; did you mean \"%s\"? valid: %s",
                     suggestion, list);
      return fail (ctx, FB_POLICY_ERROR_SCHEMA, member, member, AT_KEY, "unknown key; valid: %s", list);
    }
  return true;
}

bool
fb_policy_load_fail (const Ctx *ctx, FbPolicyError code, const char *field_path, const char *pos_path, bool at_key,
                     const char *format, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, format);
  msg = g_strdup_vprintf (format, ap);
  va_end (ap);
  return fail (ctx, code, field_path, pos_path, at_key ? AT_KEY : AT_VALUE, "%s", msg);
}

bool
fb_policy_load_check_keys (const Ctx *ctx, JsonObject *object, const char *path, const char *const *valid)
{
  return check_keys (ctx, object, path, valid);
}

const char *
fb_policy_load_node_type (JsonNode *node)
{
  return node_type_name (node);
}

char *
fb_policy_load_origin (const Ctx *ctx, const char *path)
{
  FbPolicyPos pos;

  if (ctx->builtin || !fb_policy_pos_index_lookup (ctx->index, path, false, &pos))
    return ctx->origin != NULL ? g_strdup_printf ("%s:%s", ctx->origin, path) : g_strdup (path);
  return g_strdup_printf ("%s:%u:%u", ctx->origin != NULL ? ctx->origin : "<data>", pos.line, pos.col);
}

/* A string member: NULL without error when absent and optional. */
static bool
get_string (const Ctx *ctx, JsonObject *object, const char *path, const char *key, bool required,
            const char *why_required, const char **ret)
{
  g_autofree char *member = fb_policy_json_path_member (path, key);
  JsonNode *node = json_object_get_member (object, key);

  *ret = NULL;
  if (node == NULL)
    {
      if (required)
        return fail (ctx, FB_POLICY_ERROR_SCHEMA, member, path, AT_VALUE, "missing; %s", why_required);
      return true;
    }
  if (!is_string (node))
    return fail (ctx, FB_POLICY_ERROR_SCHEMA, member, member, AT_VALUE, "expected a string, got %s",
                 node_type_name (node));
  *ret = json_node_get_string (node);
  return true;
}

/* ---- Fields ---------------------------------------------------------------- */

static bool
check_version (const Ctx *ctx, JsonObject *root)
{
  JsonNode *node = json_object_get_member (root, "version");

  if (node == NULL)
    return fail (ctx, FB_POLICY_ERROR_VERSION, "version", "", AT_VALUE,
                 "missing; write \"version\": 1 (the format this fusebox reads)");
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    return fail (ctx, FB_POLICY_ERROR_SCHEMA, "version", "version", AT_VALUE, "expected the integer 1, got %s",
                 node_type_name (node));
  if (json_node_get_int (node) != 1)
    return fail (ctx, FB_POLICY_ERROR_VERSION, "version", "version", AT_VALUE,
                 "unknown version %" G_GINT64_FORMAT "; this fusebox reads version 1", json_node_get_int (node));
  return true;
}

static char *
protected_why (const char *name, FbPolicyAccess access)
{
  bool metadata = strcmp (name, ".git") == 0 || strcmp (name, ".agents") == 0 || strcmp (name, ".codex") == 0;
  const char *never = fb_policy_access_info (access)->protects;

  return metadata ? g_strconcat ("version-control and agent metadata is never ", never, NULL)
                  : g_strconcat ("never ", never, " at any depth", NULL);
}

static void
add_protected (FbPolicy *policy, GArray *out, const char *name, FbPolicyAccess access)
{
  FbPolicyRule rule = {
    .kind = FB_POLICY_RULE_PROTECTED,
    .index = -1,
    .access = access,
  };
  g_autofree char *origin = g_strdup_printf ("protected_names[%s]", name);
  g_autofree char *never = protected_why (name, access);
  g_autofree char *why = g_strdup_printf ("protected name %s: %s", name, never);

  rule.origin = g_string_chunk_insert (policy->strings, origin);
  rule.glob = g_string_chunk_insert (policy->strings, name);
  rule.why = g_string_chunk_insert (policy->strings, why);
  g_array_append_val (out, rule);
}

/* "hide, deny, read": the accesses a protected name may have. */
static char *
protecting_accesses (void)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < FB_POLICY_ACCESS_N; i++)
    if (fb_policy_access_table[i].protects != NULL)
      g_string_append_printf (out, "%s%s", out->len > 0 ? ", " : "", fb_policy_access_table[i].name);
  return g_string_free (out, FALSE);
}

static bool
load_protected (const Ctx *ctx, FbPolicy *policy, JsonObject *root)
{
  JsonNode *node = json_object_get_member (root, "protected_names");
  g_autoptr (GArray) out = g_array_new (FALSE, TRUE, sizeof (FbPolicyRule));

  if (node == NULL)
    {
      static const char *const defaults[] = { ".git", ".agents", ".codex" };

      for (guint i = 0; i < G_N_ELEMENTS (defaults); i++)
        add_protected (policy, out, defaults[i], FB_POLICY_ACCESS_HIDE);
    }
  else
    {
      g_autoptr (GList) members = NULL;

      if (!JSON_NODE_HOLDS_OBJECT (node))
        return fail (ctx, FB_POLICY_ERROR_SCHEMA, "protected_names", "protected_names", AT_VALUE,
                     "expected an object of name: access, got %s", node_type_name (node));
      members = json_object_get_members (json_node_get_object (node));
      for (GList *l = members; l != NULL; l = l->next)
        {
          const char *name = l->data;
          JsonNode *value = json_object_get_member (json_node_get_object (node), name);
          g_autofree char *member = fb_policy_json_path_member ("protected_names", name);
          FbPolicyAccess access;

          if (name[0] == '\0' || strchr (name, '/') != NULL || strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
            return fail (ctx, FB_POLICY_ERROR_VALUE, member, member, AT_KEY,
                         "a protected name is one path component: not empty, no \"/\", not \".\" or \"..\"");
          if (!is_string (value))
            return fail (ctx, FB_POLICY_ERROR_SCHEMA, member, member, AT_VALUE, "expected a string, got %s",
                         node_type_name (value));
          if (!fb_policy_access_from_string (json_node_get_string (value), &access))
            {
              g_autofree char *valid = protecting_accesses ();
              return fail (ctx, FB_POLICY_ERROR_VALUE, member, member, AT_VALUE, "unknown access \"%s\"; valid: %s",
                           json_node_get_string (value), valid);
            }
          if (fb_policy_access_info (access)->protects == NULL)
            return fail (ctx, FB_POLICY_ERROR_VALUE, member, member, AT_VALUE,
                         "\"%s\" does not protect anything; remove the name from protected_names instead",
                         json_node_get_string (value));
          add_protected (policy, out, name, access);
        }
    }
  policy->n_protected = out->len;
  policy->protected_rules = (FbPolicyRule *)(void *)g_array_free (g_steal_pointer (&out), FALSE);
  for (guint i = 0; i < policy->n_protected; i++)
    {
      const char *name = policy->protected_rules[i].glob;

      fb_name_map_insert (&policy->protected_map, name, strlen (name), &policy->protected_rules[i]);
    }
  return true;
}

/* Expands and checks a path or source; returns the normalized path. */
static char *
expand_path (const Ctx *ctx, const FbPolicyVars *vars, const char *raw, const char *member, const char *what)
{
  g_autofree char *message = NULL;
  g_autofree char *expanded = fb_policy_vars_expand (raw, vars, FB_EXPAND_PATH, &message);
  g_autofree char *normalized = NULL;
  g_autofree char *shown = NULL;

  if (expanded == NULL)
    {
      fail (ctx, FB_POLICY_ERROR_VALUE, member, member, AT_VALUE, "%s", message);
      return NULL;
    }
  shown = strcmp (raw, expanded) == 0 ? g_strdup_printf ("\"%s\"", raw)
                                      : g_strdup_printf ("\"%s\" (expanded: \"%s\")", raw, expanded);
  if (strlen (expanded) > FB_POLICY_MAX_PATH)
    {
      fail (ctx, FB_POLICY_ERROR_VALUE, member, member, AT_VALUE, "%s is longer than %d bytes", what,
            FB_POLICY_MAX_PATH);
      return NULL;
    }
  if (expanded[0] != '/')
    {
      fail (ctx, FB_POLICY_ERROR_VALUE, member, member, AT_VALUE, "%s is not absolute; a %s starts with \"/\"", shown,
            what);
      return NULL;
    }
  normalized = fb_policy_path_normalize (expanded);
  if (normalized == NULL)
    {
      fail (ctx, FB_POLICY_ERROR_VALUE, member, member, AT_VALUE,
            "%s contains \"..\"; name the %s directly (\"..\" would mean something else behind a symlink)", shown,
            what);
      return NULL;
    }
  if (strcmp (normalized, expanded) != 0)
    {
      fail (ctx, FB_POLICY_ERROR_VALUE, member, member, AT_VALUE, "%s is not normalized; did you mean %s?", shown,
            normalized);
      return NULL;
    }
  return g_steal_pointer (&normalized);
}

static const char *const rule_keys[] = { "path", "glob", "access", "why", "source", NULL };

static bool
load_rule (const Ctx *ctx, FbPolicy *policy, const FbPolicyVars *vars, JsonNode *node, guint i, FbPolicyRule *rule,
           FbGlob **ret_glob)
{
  g_autofree char *path = g_strdup_printf ("rules[%u]", i);
  g_autofree char *path_member = fb_policy_json_path_member (path, "path");
  g_autofree char *glob_member = fb_policy_json_path_member (path, "glob");
  g_autofree char *access_member = fb_policy_json_path_member (path, "access");
  g_autofree char *why_member = fb_policy_json_path_member (path, "why");
  g_autofree char *source_member = fb_policy_json_path_member (path, "source");
  g_autofree char *expanded = NULL;
  g_autofree char *source = NULL;
  g_autofree char *origin = NULL;
  g_autoptr (FbGlob) glob = NULL;
  JsonObject *object;
  const char *raw_path;
  const char *raw_glob;
  const char *raw_access;
  const char *why;
  const char *raw_source;
  FbPolicyPos pos;

  if (!JSON_NODE_HOLDS_OBJECT (node))
    return fail (ctx, FB_POLICY_ERROR_SCHEMA, path, path, AT_VALUE,
                 "expected a rule object {\"path\" or \"glob\", \"access\", \"why\"}, got %s", node_type_name (node));
  object = json_node_get_object (node);
  if (!check_keys (ctx, object, path, rule_keys))
    return false;
  if (!get_string (ctx, object, path, "path", false, NULL, &raw_path) ||
      !get_string (ctx, object, path, "glob", false, NULL, &raw_glob))
    return false;
  if (raw_path != NULL && raw_glob != NULL)
    return fail (ctx, FB_POLICY_ERROR_SCHEMA, glob_member, glob_member, AT_KEY,
                 "a rule has either \"path\" or \"glob\", not both; split it into two rules");
  if (raw_path == NULL && raw_glob == NULL)
    return fail (ctx, FB_POLICY_ERROR_SCHEMA, path_member, path, AT_VALUE,
                 "missing; a rule names a \"path\" (one view path and below) or a \"glob\" (a pattern)");
  if (!get_string (ctx, object, path, "access", true, "valid: write, read, deny, hide", &raw_access) ||
      !get_string (ctx, object, path, "why", true, "every rule says why it exists (it is logged with each access)",
                   &why) ||
      !get_string (ctx, object, path, "source", false, NULL, &raw_source))
    return false;
  if (!fb_policy_access_from_string (raw_access, &rule->access))
    return fail (ctx, FB_POLICY_ERROR_VALUE, access_member, access_member, AT_VALUE,
                 "unknown access \"%s\"; valid: write, read, deny, hide", raw_access);
  if (why[0] == '\0')
    return fail (ctx, FB_POLICY_ERROR_VALUE, why_member, why_member, AT_VALUE,
                 "empty; say why the rule exists (it is logged with each access it decides)");

  if (raw_path != NULL)
    {
      expanded = expand_path (ctx, vars, raw_path, path_member, "view path");
      if (expanded == NULL)
        return false;
      rule->kind = FB_POLICY_RULE_PATH;
      rule->path = g_string_chunk_insert (policy->strings, expanded);
    }
  else
    {
      g_autofree char *message = NULL;

      expanded = fb_policy_vars_expand (raw_glob, vars, FB_EXPAND_GLOB, &message);
      if (expanded == NULL)
        return fail (ctx, FB_POLICY_ERROR_VALUE, glob_member, glob_member, AT_VALUE, "%s", message);
      if (strlen (expanded) > FB_POLICY_MAX_PATH)
        return fail (ctx, FB_POLICY_ERROR_VALUE, glob_member, glob_member, AT_VALUE, "longer than %d bytes",
                     FB_POLICY_MAX_PATH);
      glob = fb_policy_glob_compile (expanded, &message);
      if (glob == NULL)
        return fail (ctx, FB_POLICY_ERROR_VALUE, glob_member, glob_member, AT_VALUE, "invalid glob \"%s\": %s",
                     expanded, message);
      if (fb_policy_access_info (rule->access)->readable)
        return fail (ctx, FB_POLICY_ERROR_VALUE, access_member, access_member, AT_VALUE,
                     "a glob may only deny or hide, not %s (a pattern must never grant access); "
                     "use path rules to grant",
                     raw_access);
      rule->kind = FB_POLICY_RULE_GLOB;
      rule->glob = g_string_chunk_insert (policy->strings, expanded);
    }

  if (raw_source != NULL)
    {
      if (raw_path == NULL)
        return fail (ctx, FB_POLICY_ERROR_VALUE, source_member, source_member, AT_KEY,
                     "only a path rule may have a source; a glob names no single directory");
      if (strcmp (raw_source, "private") == 0)
        source = g_strdup ("private");
      else
        {
          if (raw_source[0] != '/' && raw_source[0] != '$')
            return fail (ctx, FB_POLICY_ERROR_VALUE, source_member, source_member, AT_VALUE,
                         "\"%s\" is neither \"private\" nor an absolute host path", raw_source);
          source = expand_path (ctx, vars, raw_source, source_member, "host path");
          if (source == NULL)
            return false;
        }
      rule->source = g_string_chunk_insert (policy->strings, source);
      /* fb_run_check_sources looks the host path up when a run loads the
       * policy (this file reads no host path): its messages start here */
      if (!ctx->builtin && fb_policy_pos_index_lookup (ctx->index, source_member, false, &pos))
        origin = g_strdup_printf ("%s:%u:%u: %s", ctx->origin != NULL ? ctx->origin : "<data>", pos.line, pos.col,
                                  source_member);
      else
        origin = g_strdup_printf ("%s%s%s", ctx->origin != NULL ? ctx->origin : "", ctx->origin != NULL ? ": " : "",
                                  source_member);
      rule->source_at = g_string_chunk_insert (policy->strings, origin);
      g_clear_pointer (&origin, g_free);
    }

  rule->index = (int)i;
  rule->why = g_string_chunk_insert (policy->strings, why);
  origin = fb_policy_load_origin (ctx, path);
  rule->origin = g_string_chunk_insert (policy->strings, origin);
  *ret_glob = g_steal_pointer (&glob);
  return true;
}

/* The same path (or glob) twice with one access, or two sources for a path. */
static bool
check_duplicates (const Ctx *ctx, const FbPolicy *policy)
{
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL); /* key → GSList */
  g_autoptr (GPtrArray) lists = g_ptr_array_new_with_free_func ((GDestroyNotify)g_slist_free);
  bool ok = true;

  for (guint i = 0; ok && i < policy->n_rules; i++)
    {
      const FbPolicyRule *rule = &policy->rules[i];
      const char *key = rule->kind == FB_POLICY_RULE_PATH ? rule->path : rule->glob;
      g_autofree char *tagged = g_strconcat (rule->kind == FB_POLICY_RULE_PATH ? "p" : "g", key, NULL);
      GSList *earlier = g_hash_table_lookup (seen, tagged);
      g_autofree char *path = g_strdup_printf ("rules[%u]", i);

      for (GSList *l = earlier; ok && l != NULL; l = l->next)
        {
          const FbPolicyRule *other = l->data;
          g_autofree char *other_path = g_strdup_printf ("rules[%d]", other->index);
          g_autofree char *where = describe_position (ctx, other_path);

          if (rule->source != NULL && other->source != NULL && strcmp (rule->source, other->source) != 0)
            {
              g_autofree char *member = fb_policy_json_path_member (path, "source");

              ok = fail (ctx, FB_POLICY_ERROR_DUPLICATE, member, member, AT_VALUE,
                         "%s already has the source \"%s\" (%s); one path shows one host directory", key, other->source,
                         where);
            }
          else if (rule->access == other->access)
            {
              const char *kind = fb_policy_rule_kind_info (rule->kind)->name;
              g_autofree char *member = fb_policy_json_path_member (path, kind);

              ok = fail (ctx, FB_POLICY_ERROR_DUPLICATE, member, member, AT_VALUE,
                         "duplicate of %s (same %s \"%s\" and access %s); remove one", where, kind, key,
                         fb_policy_access_to_string (rule->access));
            }
        }
      if (earlier == NULL)
        {
          earlier = g_slist_prepend (NULL, (gpointer)rule);
          g_ptr_array_add (lists, earlier);
          g_hash_table_insert (seen, g_steal_pointer (&tagged), earlier);
        }
      else
        earlier->next = g_slist_prepend (earlier->next, (gpointer)rule);
    }
  return ok;
}

static const char *const log_keys[] = { "file_size", "max_size", "journal", NULL };

/* One size of the "log" section: an integer (bytes) or a string ("256M"). */
static bool
load_log_size (const Ctx *ctx, JsonObject *log, const char *key, guint64 min, guint64 *ret)
{
  g_autofree char *member = fb_policy_json_path_member ("log", key);
  JsonNode *node = json_object_get_member (log, key);
  guint64 v = 0;

  if (node == NULL)
    return true;
  if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_INT64)
    {
      if (json_node_get_int (node) <= 0)
        return fail (ctx, FB_POLICY_ERROR_VALUE, member, member, AT_VALUE,
                     "%" G_GINT64_FORMAT " is not a size; give bytes, or a string such as \"256M\"",
                     json_node_get_int (node));
      v = (guint64)json_node_get_int (node);
    }
  else if (is_string (node))
    {
      if (!fb_policy_parse_size (json_node_get_string (node), &v))
        return fail (ctx, FB_POLICY_ERROR_VALUE, member, member, AT_VALUE,
                     "\"%s\" is not a size; give a number of bytes, or one with K, M or G (\"256M\")",
                     json_node_get_string (node));
    }
  else
    return fail (ctx, FB_POLICY_ERROR_SCHEMA, member, member, AT_VALUE,
                 "expected a size (an integer, or a string such as \"256M\"), got %s", node_type_name (node));
  if (v < min)
    return fail (ctx, FB_POLICY_ERROR_VALUE, member, member, AT_VALUE,
                 "%" G_GUINT64_FORMAT " bytes is below the least this fusebox accepts, %" G_GUINT64_FORMAT, v, min);
  *ret = v;
  return true;
}

/* "log": {"file_size": ..., "max_size": ..., "journal": ...}: the access
 * log's budget, and whether the systemd journal gets its records too. */
static bool
load_log (const Ctx *ctx, FbPolicy *policy, JsonObject *root)
{
  JsonNode *node = json_object_get_member (root, "log");
  JsonObject *log;

  if (node == NULL)
    return true;
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return fail (ctx, FB_POLICY_ERROR_SCHEMA, "log", "log", AT_VALUE,
                 "expected an object {\"file_size\": \"16M\", \"max_size\": \"256M\"}, got %s", node_type_name (node));
  log = json_node_get_object (node);
  if (!check_keys (ctx, log, "log", log_keys) ||
      !load_log_size (ctx, log, "file_size", FB_POLICY_LOG_MIN_FILE_SIZE, &policy->log.file_size) ||
      !load_log_size (ctx, log, "max_size", FB_POLICY_LOG_MIN_MAX_SIZE, &policy->log.max_size))
    return false;
  node = json_object_get_member (log, "journal");
  if (node != NULL)
    {
      if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_BOOLEAN)
        return fail (ctx, FB_POLICY_ERROR_SCHEMA, "log.journal", "log.journal", AT_VALUE,
                     "expected true or false, got %s", node_type_name (node));
      policy->log.journal = json_node_get_boolean (node);
    }
  if (policy->log.file_size != 0 && policy->log.max_size != 0 && policy->log.file_size > policy->log.max_size)
    return fail (ctx, FB_POLICY_ERROR_VALUE, "log.file_size", "log.file_size", AT_VALUE,
                 "larger than log.max_size: one file would pass the whole budget; make it at most %" G_GUINT64_FORMAT,
                 policy->log.max_size);
  return true;
}

static const char *const top_keys[] = { "version", "network", "protected_names", "log", "rules", NULL };

static FbPolicy *
load_root (const Ctx *ctx, JsonNode *root, const FbPolicyVars *vars)
{
  g_autoptr (FbPolicy) policy = fb_policy_new_empty (ctx->origin);
  JsonObject *object;
  JsonNode *rules;
  JsonArray *array;

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      fail (ctx, FB_POLICY_ERROR_SCHEMA, "", "", AT_VALUE,
            "expected an object {\"version\": 1, \"rules\": [...]}, got %s",
            root != NULL ? node_type_name (root) : "nothing");
      return NULL;
    }
  object = json_node_get_object (root);
  /* The version first: a newer format may have keys this reader does not
   * know, and "unknown version" is then the useful message. */
  if (!check_version (ctx, object) || !check_keys (ctx, object, "", top_keys))
    return NULL;
  if (!fb_policy_net_load (ctx, policy, json_object_get_member (object, "network")))
    return NULL;
  if (!load_protected (ctx, policy, object) || !load_log (ctx, policy, object))
    return NULL;

  rules = json_object_get_member (object, "rules");
  if (rules == NULL)
    {
      fail (ctx, FB_POLICY_ERROR_SCHEMA, "rules", "", AT_VALUE,
            "missing; a policy lists its rules (an empty list hides everything)");
      return NULL;
    }
  if (!JSON_NODE_HOLDS_ARRAY (rules))
    {
      fail (ctx, FB_POLICY_ERROR_SCHEMA, "rules", "rules", AT_VALUE, "expected an array of rules, got %s",
            node_type_name (rules));
      return NULL;
    }
  array = json_node_get_array (rules);
  policy->n_rules = json_array_get_length (array);
  policy->rules = g_new0 (FbPolicyRule, policy->n_rules);
  policy->globs = g_new0 (FbGlob *, policy->n_rules);
  for (guint i = 0; i < policy->n_rules; i++)
    if (!load_rule (ctx, policy, vars, json_array_get_element (array, i), i, &policy->rules[i], &policy->globs[i]))
      return NULL;
  if (!check_duplicates (ctx, policy))
    return NULL;
  if (vars != NULL && vars->run != NULL)
    {
      g_autofree char *run = fb_policy_path_normalize (vars->run);

      if (run != NULL)
        policy->run = g_string_chunk_insert (policy->strings, run);
    }
  if (!fb_policy_compile (policy, ctx->error))
    return NULL;
  return g_steal_pointer (&policy);
}

/* ---- Entry points ---------------------------------------------------------- */

FbPolicy *
fb_policy_load_json (JsonNode *root, const char *origin, const FbPolicyVars *vars, GError **error)
{
  Ctx ctx = {
    .origin = origin,
    .builtin = true, /* no positions: rules are named by their JSON path */
    .error = error,
  };

  return load_root (&ctx, root, vars);
}

FbPolicy *
fb_policy_load_data (const char *data, gssize len, const char *origin, const FbPolicyVars *vars, GError **error)
{
  g_autoptr (FbPolicyPosIndex) index = NULL;
  g_autoptr (JsonParser) parser = NULL;
  g_autoptr (GError) local = NULL;
  gsize n = len < 0 ? strlen (data) : (gsize)len;
  Ctx ctx = {
    .origin = origin != NULL ? origin : "<data>",
    .builtin = origin != NULL && g_str_has_prefix (origin, "builtin:"),
    .error = error,
  };

  if (n > FB_POLICY_MAX_SIZE)
    {
      g_set_error (error, FB_POLICY_ERROR, FB_POLICY_ERROR_IO, "%s: the policy is %zu bytes; the limit is %d",
                   ctx.origin, n, FB_POLICY_MAX_SIZE);
      return NULL;
    }
  index = fb_policy_pos_index_build (data, n, ctx.origin, error);
  if (index == NULL)
    return NULL;
  ctx.index = index;
  parser = json_parser_new_immutable ();
  if (!json_parser_load_from_data (parser, data, (gssize)n, &local))
    {
      /* The tokenizer above accepted the text, so this is json-glib's own
       * limit (such as an integer beyond 64 bits). */
      g_set_error (error, FB_POLICY_ERROR, FB_POLICY_ERROR_SYNTAX, "%s: invalid JSON: %s", ctx.origin, local->message);
      return NULL;
    }
  return load_root (&ctx, json_parser_get_root (parser), vars);
}

FbPolicy *
fb_policy_load_file (const char *path, const FbPolicyVars *vars, GError **error)
{
  g_autofree char *data = NULL;
  g_autoptr (GError) local = NULL;
  gsize len = 0;

  /* A policy comes from wherever the user points (a cloned repository):
   * a FIFO there would hang us, a link to /dev/zero fill memory. */
  data = fb_file_read_regular (path, "the policy", FB_FILE_NAMED, FB_POLICY_MAX_SIZE, &len, &local);
  if (data == NULL)
    {
      g_set_error (error, FB_POLICY_ERROR, FB_POLICY_ERROR_IO, "%s: cannot read the policy: %s", path, local->message);
      return NULL;
    }
  return fb_policy_load_data (data, (gssize)len, path, vars, error);
}

FbPolicy *
fb_policy_load_spec (const char *spec, const FbPolicyVars *vars, GError **error)
{
  g_autofree char *json = NULL;

  if (!g_str_has_prefix (spec, "builtin:"))
    return fb_policy_load_file (spec, vars, error);
  json = fb_policy_builtin_json (spec + strlen ("builtin:"), vars, error);
  if (json == NULL)
    return NULL;
  return fb_policy_load_data (json, -1, spec, vars, error);
}
