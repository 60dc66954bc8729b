/* fusebox — the built-in policies and the policy as JSON.
 *
 * The built-ins are generated for the caller's variables rather than fixed
 * text, because a fixed default cannot serve everyone: for root, HOME is
 * /root, which the default otherwise hides; a workspace may be HOME itself,
 * lie under HOME or /tmp (both private), or contain them.  The rules below
 * keep three promises for every caller:
 *  - the workspace is the host's, writable (read-only in "read-only");
 *  - HOME and /tmp are private (empty, in the run directory) unless the
 *    workspace is them or contains them;
 *  - other people's files (/home, /root) stay hidden unless they are the
 *    caller's HOME or the workspace itself;
 *  - the host's credentials (/etc/shadow, SSH host keys, ...), which the
 *    view would read for a root caller, stay hidden unless the workspace
 *    is them or holds them.
 * Each omission is a rule that would otherwise conflict (two rules at one
 * path) or undo one of these promises.
 *
 * "agent" is the default with the protected names read-only instead of
 * hidden: a coding agent needs its repository (git status, git log, its
 * .agents and .codex instructions) but must not rewrite history, hooks or
 * its own configuration, as in Codex's workspace-write sandbox.
 */
#include "policy/policy-private.h"
#include "policy/util.h"

static const char *const builtin_names[] = { "default", "read-only", "host", "agent", NULL };

const char *const *
fb_policy_builtin_names (void)
{
  return builtin_names;
}

char *
fb_policy_private_dir_name (const char *view_path)
{
  GString *out = g_string_sized_new (strlen (view_path) * 2);

  /* "%" and "/" escaped: distinct view paths get distinct names. */
  for (const char *p = view_path; *p != '\0'; p++)
    {
      if (*p == '%')
        g_string_append (out, "%25");
      else if (*p == '/')
        g_string_append (out, "%2F");
      else
        g_string_append_c (out, *p);
    }
  if (out->len > 255)
    {
      /* Too long for one file name (NAME_MAX): a digest, which cannot
       * collide with an escaped name (those start with "%2F"). */
      g_autofree char *sum = g_compute_checksum_for_string (G_CHECKSUM_SHA256, view_path, -1);

      g_string_free (out, TRUE);
      return g_strconcat ("_", sum, NULL);
    }
  return g_string_free (out, FALSE);
}

static void
add_rule (JsonBuilder *b, const char *path, const char *access, const char *source, const char *why)
{
  json_builder_begin_object (b);
  fb_json_builder_add_string_member (b, "path", path);
  fb_json_builder_add_string_member (b, "access", access);
  if (source != NULL)
    fb_json_builder_add_string_member (b, "source", source);
  fb_json_builder_add_string_member (b, "why", why);
  json_builder_end_object (b);
}

static void
add_default_protected (JsonBuilder *b, const char *access)
{
  static const char *const names[] = { ".git", ".agents", ".codex" };

  json_builder_set_member_name (b, "protected_names");
  json_builder_begin_object (b);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    fb_json_builder_add_string_member (b, names[i], access);
  json_builder_end_object (b);
}

static char *
to_text (JsonBuilder *b)
{
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = json_builder_get_root (b);

  json_generator_set_pretty (gen, TRUE);
  json_generator_set_indent (gen, 2);
  json_generator_set_root (gen, root);
  return json_generator_to_data (gen, NULL);
}

static bool
is_at_or_below (const char *path, const char *ancestor)
{
  return path != NULL && ancestor != NULL && fb_policy_path_has_prefix (path, ancestor);
}

/* Where hosts keep their credentials readable to root alone. */
static const struct
{
  const char *pattern;
  bool glob;
  const char *under; /* the pattern's fixed part: a workspace there keeps it */
  const char *why;
} host_secrets[] = {
  { "/etc/shadow", false, "/etc/shadow", "the host's password hashes" },
  { "/etc/shadow[.~-]*", true, "/etc",
    "copies of the host's password hashes (shadow-, an editor's shadow~, shadow.bak)" },
  { "/etc/gshadow", false, "/etc/gshadow", "the host's group password hashes" },
  { "/etc/gshadow[.~-]*", true, "/etc", "copies of the host's group password hashes" },
  { "/var/backups/*shadow*", true, "/var/backups", "backups of the host's password hashes" },
  { "/etc/security/opasswd", false, "/etc/security/opasswd", "the host's old password hashes (pam_pwhistory)" },
  { "/var/cache/debconf/passwords.dat", false, "/var/cache/debconf/passwords.dat",
    "passwords given to the host's package configuration (debconf)" },
  { "/etc/ssh/ssh_host_*key*", true, "/etc/ssh", "the host's SSH keys and their copies" },
  { "/etc/ssl/private", false, "/etc/ssl/private", "the host's TLS private keys" },
  { "/etc/letsencrypt", false, "/etc/letsencrypt", "the host's certificates and their private keys" },
};

static void
add_default_rules (JsonBuilder *b, const char *home, const char *ws, bool workspace_writable)
{
  bool home_private;
  bool tmp_private;

  add_rule (b, "/", "read", NULL, "system files and tools");

  /* Hide the trees of other people's files, unless that tree is the caller's
   * HOME (then HOME's own rule covers it) or the workspace itself. */
  if (g_strcmp0 (home, "/home") != 0 && g_strcmp0 (ws, "/home") != 0)
    add_rule (b, "/home", "hide", NULL, "other people's files");
  if (g_strcmp0 (home, "/root") != 0 && g_strcmp0 (ws, "/root") != 0)
    add_rule (b, "/root", "hide", NULL, "the administrator's files");

  /* A private HOME, unless the workspace is HOME or contains it (the
   * workspace is the host's), or HOME is "/" (a private root would hide the
   * whole system). */
  home_private = home != NULL && strcmp (home, "/") != 0 && !is_at_or_below (home, ws);
  if (home_private)
    add_rule (b, "${HOME}", "write", "private", "an empty private HOME: the host's stays out of reach");
  else if (home != NULL && ws != NULL && strcmp (home, ws) != 0 && is_at_or_below (home, ws) &&
           (is_at_or_below (home, "/home") || is_at_or_below (home, "/root")) && workspace_writable)
    /* The workspace contains HOME but /home or /root above would hide it:
     * HOME is part of the workspace, so show it as such. */
    add_rule (b, "${HOME}", "write", NULL, "the home directory, inside the workspace");

  /* A private /tmp unless the workspace is /tmp or contains it, or HOME is
   * /tmp (HOME's private rule covers it). */
  tmp_private = !is_at_or_below ("/tmp", ws) && g_strcmp0 (home, "/tmp") != 0;
  if (tmp_private)
    add_rule (b, "/tmp", "write", "private", "a private /tmp: nothing is left behind on the host");

  if (ws != NULL)
    {
      if (workspace_writable)
        add_rule (b, "${WORKSPACE}", "write", NULL, "the workspace");
      else if (strcmp (ws, "/") != 0)
        /* (a workspace of "/" is already read by the first rule) */
        add_rule (b, "${WORKSPACE}", "read", NULL, "the workspace, read-only");
    }

  /* The host's secrets, which "/" read would show a root caller (the view
   * reads as the caller): hidden, unless the workspace is one of them or
   * holds it (the caller chose that tree).  Last, so that the rules above
   * keep their places (rules[N] in explanations and logs). */
  for (gsize i = 0; i < G_N_ELEMENTS (host_secrets); i++)
    if (!is_at_or_below (host_secrets[i].under, ws))
      {
        json_builder_begin_object (b);
        fb_json_builder_add_string_member (b, host_secrets[i].glob ? "glob" : "path", host_secrets[i].pattern);
        fb_json_builder_add_string_member (b, "access", "hide");
        fb_json_builder_add_string_member (b, "why", host_secrets[i].why);
        json_builder_end_object (b);
      }
}

char *
fb_policy_builtin_json (const char *name, const FbPolicyVars *vars, GError **error)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autofree char *home = vars != NULL && vars->home != NULL ? fb_policy_path_normalize (vars->home) : NULL;
  g_autofree char *ws = vars != NULL && vars->workspace != NULL ? fb_policy_path_normalize (vars->workspace) : NULL;
  bool is_default = g_strcmp0 (name, "default") == 0;
  bool is_read_only = g_strcmp0 (name, "read-only") == 0;
  bool is_host = g_strcmp0 (name, "host") == 0;
  bool is_agent = g_strcmp0 (name, "agent") == 0;

  if (!is_default && !is_read_only && !is_host && !is_agent)
    {
      g_set_error (error, FB_POLICY_ERROR, FB_POLICY_ERROR_NOT_FOUND,
                   "builtin:%s: no such built-in policy; valid: default, read-only, host, agent", name);
      return NULL;
    }

  json_builder_begin_object (b);
  fb_json_builder_add_int_member (b, "version", 1);
  fb_json_builder_add_string_member (b, "network", is_host ? "host" : "none");
  add_default_protected (b, is_agent ? "read" : "hide");
  json_builder_set_member_name (b, "rules");
  json_builder_begin_array (b);
  if (is_host)
    add_rule (b, "/", "write", NULL, "the host as it is: this run only wants the access log");
  else
    add_default_rules (b, home, ws, is_default || is_agent);
  json_builder_end_array (b);
  json_builder_end_object (b);
  return to_text (b);
}

char *
fb_policy_to_json (const FbPolicy *policy)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();

  if (policy->narrow != NULL)
    return fb_policy_narrowed_to_json (policy);

  json_builder_begin_object (b);
  fb_json_builder_add_int_member (b, "version", 1);
  json_builder_set_member_name (b, "network");
  fb_policy_net_build_json (policy, b);
  json_builder_set_member_name (b, "protected_names");
  json_builder_begin_object (b);
  for (guint i = 0; i < policy->n_protected; i++)
    fb_json_builder_add_string_member (b, policy->protected_rules[i].glob,
                                       fb_policy_access_to_string (policy->protected_rules[i].access));
  json_builder_end_object (b);
  if (policy->log.file_size != 0 || policy->log.max_size != 0 || policy->log.journal)
    {
      json_builder_set_member_name (b, "log");
      json_builder_begin_object (b);
      if (policy->log.file_size != 0)
        fb_json_builder_add_int_member (b, "file_size", (gint64)policy->log.file_size);
      if (policy->log.max_size != 0)
        fb_json_builder_add_int_member (b, "max_size", (gint64)policy->log.max_size);
      if (policy->log.journal)
        {
          json_builder_set_member_name (b, "journal");
          json_builder_add_boolean_value (b, TRUE);
        }
      json_builder_end_object (b);
    }
  json_builder_set_member_name (b, "rules");
  json_builder_begin_array (b);
  for (guint i = 0; i < policy->n_rules; i++)
    {
      const FbPolicyRule *rule = &policy->rules[i];
      /* Expanded values may hold "$": doubled so that loading this text
       * again does not expand anything. */
      g_autofree char *what = fb_policy_vars_escape (rule->kind == FB_POLICY_RULE_PATH ? rule->path : rule->glob);

      json_builder_begin_object (b);
      fb_json_builder_add_string_member (b, fb_policy_rule_kind_info (rule->kind)->name, what);
      fb_json_builder_add_string_member (b, "access", fb_policy_access_to_string (rule->access));
      if (rule->source != NULL)
        {
          g_autofree char *source = fb_policy_vars_escape (rule->source);

          fb_json_builder_add_string_member (b, "source", source);
        }
      fb_json_builder_add_string_member (b, "why", rule->why);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  return to_text (b);
}
