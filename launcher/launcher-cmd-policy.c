/* fusebox policy — check, explain and show policies.
 *
 *   fusebox policy check FILE...
 *   fusebox policy explain [--policy FILE|builtin:NAME] [--workspace DIR] [--network NET]...
 *                          [--json] PATH|net:HOST[:PORT]...
 *   fusebox policy show [--workspace DIR] [--effective] [NAME]
 *
 * Everything here is read-only: the policy engine reads the policy file and
 * answers; no path given to `explain` is looked up on the host, because a
 * decision depends on the view path only.  The policy's sources are, as a
 * run looks them up (fb_run_check_sources): `check` and `explain` refuse a
 * policy that a run would refuse.  Single-threaded, no main loop.
 *
 * Exit status: 0 success, 1 a policy failed to load (check: any of them),
 * 2 usage error (see launcher/launcher-private.h and fusebox(1)).
 */
#include "ipc/ipc.h"
#include "launcher/launcher-private.h"
#include "policy/policy.h"
#include "policy/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_SPEC "builtin:default"

static void
policy_usage (FILE *out)
{
  fprintf (out, "Usage: fusebox policy COMMAND [OPTION...] ARG...\n"
                "\n"
                "Check, explain or show sandbox policies (format: fusebox-policy(5)).\n"
                "\n"
                "Commands:\n"
                "  check FILE...       validate policy files; print \"FILE: ok (N rules)\" or each error\n"
                "  explain PATH...     show the access of each view path (or net:HOST:PORT), the deciding\n"
                "                      rule and its reason\n"
                "  show [NAME]         print a built-in policy as JSON, or list the built-ins\n"
                "\n"
                "Run 'fusebox policy COMMAND --help' for a command's options.\n"
                "Exit status: 0 success, 1 a policy failed to load, 2 usage error.\n");
}

/* GOptionContext stops at "--" but leaves it in argv; it only marks the end
 * of options ("fusebox policy explain -- -odd-name"), so drop it. */
static void
drop_double_dash (int *argc, char **argv)
{
  for (int i = 1; i < *argc; i++)
    if (strcmp (argv[i], "--") == 0)
      {
        memmove (argv + i, argv + i + 1, (*argc - i) * sizeof (char *));
        (*argc)--;
        return;
      }
}

static int
usage_error (const char *command, const char *message)
{
  g_autofree char *full = g_strconcat ("policy ", command, NULL);

  return fb_cmd_usage_error (full, message);
}

/* COMMAND's options (ENTRIES) out of *ARGC, *ARGV, and its "--": false
 * (the usage error printed) when they do not parse. */
static bool
parse_options (GOptionContext *ctx, const GOptionEntry *entries, const char *command, int *argc, char ***argv)
{
  g_autofree char *full = g_strconcat ("policy ", command, NULL);

  if (!fb_cmd_parse_options (ctx, entries, full, argc, argv))
    return false;
  drop_double_dash (argc, *argv);
  return true;
}

/* The absolute, symlink-free form of DIR: a policy path is a view path, and
 * the view never follows a symlink on the sandbox's behalf, so a rule at a
 * symlinked spelling of the workspace would never match anything. */
static char *
resolve_workspace (const char *command, const char *dir)
{
  g_autofree char *named = g_strdup_printf ("policy %s", command);
  g_autofree char *real = NULL;

  if (!fb_cmd_workspace_reachable (named, dir))
    return NULL;
  real = fb_realpath (dir);
  if (real == NULL)
    {
      int err = errno;
      fb_cmd_error ("policy %s: --workspace %s: %s; give the path of an existing directory", command, dir,
                    err == ENOENT ? "no such directory" : g_strerror (err));
      return NULL;
    }
  if (!g_file_test (real, G_FILE_TEST_IS_DIR))
    {
      fb_cmd_error ("policy %s: --workspace %s: not a directory; give the workspace directory, not a file", command,
                    dir);
      return NULL;
    }
  return g_steal_pointer (&real);
}

/* Variables as a run would see them.  ${RUN} does not exist before a run;
 * a stand-in under the default runs directory lets policies that use it be
 * checked and explained (private sources show where they would live).
 * FB_EXIT_FAILURE, the message printed, when --workspace is no directory. */
static int
init_vars (FbPolicyVarsStorage *storage, const char *command, const char *workspace_arg)
{
  g_autofree char *run = g_build_filename (g_get_user_state_dir (), "fusebox", "runs", "RUN-ID", NULL);
  g_autofree char *workspace = NULL;

  if (workspace_arg != NULL && (workspace = resolve_workspace (command, workspace_arg)) == NULL)
    return FB_EXIT_FAILURE;
  fb_policy_vars_init_from_env (storage, workspace, run);
  return FB_EXIT_OK;
}

static void
print_load_error (const char *spec, const GError *error)
{
  /* Not-found and I/O messages name the spec and the valid choices already;
   * for an invalid policy add where the format is described.  The message
   * itself reads "FILE:LINE:COL: FIELD: what is wrong; what would be valid". */
  if (g_error_matches (error, FB_POLICY_ERROR, FB_POLICY_ERROR_NOT_FOUND) ||
      g_error_matches (error, FB_POLICY_ERROR, FB_POLICY_ERROR_IO))
    fb_cmd_error ("%s", error->message);
  else
    fb_cmd_error ("%s\nThe policy '%s' is invalid; see fusebox-policy(5) for the format.", error->message, spec);
}

/* What a run checks on the host once the policy has loaded: each source is
 * an existing directory outside fusebox's state (the runs root here: no run
 * directory exists yet).  NULL, or why a run would refuse the policy (to
 * print with REFUSED_FORMAT). */
#define REFUSED_FORMAT "%s\nA run would refuse this policy: its sources are looked up on this host."
static char *
sources_refused (FbPolicy *policy)
{
  g_auto (GStrv) state = fb_run_state_paths (NULL, NULL);
  g_autoptr (GError) error = NULL;

  if (fb_run_check_sources (policy, (const char *const *)state, &error))
    return NULL;
  return g_strdup (error->message);
}

/* ---- check ---- */

static int
cmd_check (int argc, char **argv)
{
  g_autofree char *workspace_arg = NULL;
  const GOptionEntry entries[] = {
    { "workspace", 'w', 0, G_OPTION_ARG_FILENAME, &workspace_arg,
      "Directory that ${WORKSPACE} stands for (default: the current directory)", "DIR" },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = fb_cmd_option_context (
    "FILE...", "Validate policy files.",
    "Each FILE is loaded exactly as 'fusebox run --policy FILE' would load it: every key, type,\n"
    "path, variable and glob is checked, and each source is looked up on this host (an existing\n"
    "directory, not a link, outside fusebox's state).  A valid file prints \"FILE: ok (N rules)\"\n"
    "on stdout; an invalid one prints \"FILE:LINE:COL: FIELD: what is wrong; what would be valid\"\n"
    "on stderr.\n"
    "All files are checked even after a failure.\n"
    "\n"
    "Exit status: 0 all files valid, 1 at least one invalid or unreadable, 2 usage error.");
  FbPolicyVarsStorage storage = { 0 };
  int status = FB_EXIT_OK;

  if (!parse_options (ctx, entries, "check", &argc, &argv))
    return FB_EXIT_USAGE;
  if (argc < 2)
    return usage_error ("check", "no FILE given");
  if ((status = init_vars (&storage, "check", workspace_arg)) != FB_EXIT_OK)
    return status;

  for (int i = 1; i < argc; i++)
    {
      g_autoptr (GError) load_error = NULL;
      g_autoptr (FbPolicy) policy = fb_policy_load_file (argv[i], &storage.vars, &load_error);

      if (policy == NULL)
        {
          fb_cmd_print (stderr, "%s\n", load_error->message);
          status = FB_EXIT_FAILURE;
          continue;
        }
      g_autofree char *refused = sources_refused (policy);
      if (refused != NULL)
        {
          fb_cmd_print (stderr, REFUSED_FORMAT "\n", refused);
          status = FB_EXIT_FAILURE;
          continue;
        }
      guint n = 0, n_net = 0;
      fb_policy_get_rules (policy, &n);
      fb_policy_net_get_rules (policy, &n_net);
      g_autofree char *file = fb_text_safe (argv[i], FB_TEXT_PLAIN);
      /* an allowlist counts its entries too; none and host have none */
      g_autofree char *net = fb_policy_get_network (policy) == FB_POLICY_NETWORK_ALLOWLIST
                               ? g_strdup_printf (", %u network entr%s", n_net, n_net == 1 ? "y" : "ies")
                               : g_strdup ("");
      printf ("%s: ok (%u rule%s%s)\n", file, n, n == 1 ? "" : "s", net);
    }
  fb_policy_vars_clear (&storage);
  return status;
}

/* ---- explain ---- */

/* PATH as a view path: relative paths are taken from the current
 * directory; ".", ".." and "//" are folded lexically, as the kernel does
 * inside the view (symlinks are not resolved: a link is decided as itself). */
static char *
view_path (const char *path, const char *cwd)
{
  g_autofree char *canon = g_canonicalize_filename (path, cwd);
  const char *p = canon;

  /* POSIX keeps a leading "//"; a view path has exactly one "/". */
  while (p[0] == '/' && p[1] == '/')
    p++;
  return g_strdup (p);
}

static char *
host_path_of (const FbPolicyDecision *d, const char *view)
{
  const FbPolicyMount *m = d->mount;
  const char *suffix;

  if (m->host_path == NULL)
    return NULL;
  suffix = strcmp (m->view_path, "/") == 0 ? view : view + strlen (m->view_path);
  if (suffix[0] == '\0')
    return g_strdup (m->host_path);
  if (strcmp (m->host_path, "/") == 0)
    return g_strdup (suffix);
  return g_strconcat (m->host_path, suffix, NULL);
}

/* /proc, /sys and /dev are never the host's inside the view (fs/fs-view.c
 * blanks them): a run mounts a fresh procfs and a minimal /dev over them, and
 * leaves /sys empty.  Returns the tree VIEW lies in, or NULL. */
static const char *
kernel_tree (const char *view)
{
  static const char *const trees[] = { "/proc", "/sys", "/dev" };

  for (guint i = 0; i < G_N_ELEMENTS (trees); i++)
    {
      gsize n = strlen (trees[i]);
      if (strncmp (view, trees[i], n) == 0 && (view[n] == '\0' || view[n] == '/'))
        return trees[i];
    }
  return NULL;
}

/* A policy's paths, globs and whys come from its file (maybe a repository's):
 * shown escaped like a log's names (fb_text_append_safe). */
#define SAFE(s) fb_text_safe ((s), FB_TEXT_ELIDE)

static void
explain_text (const char *view, const FbPolicyDecision *d)
{
  const FbPolicyRule *r = d->rule;
  g_autofree char *host = host_path_of (d, view);
  g_autofree char *view_s = SAFE (view);
  g_autofree char *origin = SAFE (r->origin);
  g_autofree char *why = SAFE (r->why);

  printf ("%s\n", view_s);
  printf ("  access:      %s\n", fb_policy_access_to_string (d->access));
  switch (r->kind)
    {
      case FB_POLICY_RULE_PATH:
        {
          g_autofree char *path = SAFE (r->path);
          printf ("  rule:        %s (path %s, %s)\n", origin, path, fb_policy_access_to_string (r->access));
          break;
        }
      case FB_POLICY_RULE_GLOB:
        {
          g_autofree char *glob = SAFE (r->glob);
          printf ("  rule:        %s (glob %s, %s)\n", origin, glob, fb_policy_access_to_string (r->access));
          break;
        }
      case FB_POLICY_RULE_PROTECTED:
        {
          g_autofree char *glob = SAFE (r->glob);
          printf ("  rule:        %s (protected name %s, %s)\n", origin, glob, fb_policy_access_to_string (r->access));
          break;
        }
      case FB_POLICY_RULE_DEFAULT:
      case FB_POLICY_RULE_FUSEBOX: /* the view's own; a policy never decides by one */
        printf ("  rule:        %s (no rule matches: hide)\n", origin);
        break;
    }
  printf ("  why:         %s\n", why);
  if (d->traversable)
    {
      GString *children = g_string_new (NULL);
      for (guint i = 0; d->reachable_children[i] != NULL; i++)
        {
          if (i > 0)
            g_string_append (children, ", ");
          fb_text_append_safe (children, d->reachable_children[i], strlen (d->reachable_children[i]));
        }
      printf ("  traversable: yes; lists only: %s\n", children->len > 0 ? children->str : "(nothing)");
      g_string_free (children, TRUE);
    }
  const FbPolicyMount *m = d->mount;
  g_autofree char *shown = m->host_path != NULL ? SAFE (m->host_path) : g_strdup ("(a directory of the run)");
  g_autofree char *mount_view = SAFE (m->view_path);
  bool reachable = fb_policy_access_visible (d->access) || d->traversable;
  if (d->is_mount_point && !(strcmp (m->view_path, "/") == 0 && g_strcmp0 (m->host_path, "/") == 0))
    printf ("  mount point: yes; shows %s%s\n", shown, m->is_private ? " (private, made for each run)" : "");
  else if (reachable && !d->is_mount_point && strcmp (m->view_path, "/") != 0)
    printf ("  mount:       inside %s, which shows %s%s\n", mount_view, shown,
            m->is_private ? " (private, made for each run)" : "");
  if (reachable && kernel_tree (view) != NULL)
    printf ("  host path:   none: the view shows an empty %s, never the host's%s\n", kernel_tree (view),
            strcmp (kernel_tree (view), "/sys") != 0 ? "; a run mounts its own there" : "");
  else if (reachable)
    {
      g_autofree char *host_s = host != NULL ? SAFE (host) : g_strdup ("(unknown: private, needs a run directory)");
      printf ("  host path:   %s\n", host_s);
    }
  else
    printf ("  host path:   none (hidden)\n");
}

static void
explain_json (JsonBuilder *b, const char *view, const FbPolicyDecision *d)
{
  const FbPolicyRule *r = d->rule;
  g_autofree char *host = host_path_of (d, view);
  bool shown = fb_policy_access_visible (d->access) || d->traversable;

  json_builder_begin_object (b);
  fb_json_builder_add_string_member (b, "path", view);
  fb_json_builder_add_string_member (b, "access", fb_policy_access_to_string (d->access));
  json_builder_set_member_name (b, "traversable");
  json_builder_add_boolean_value (b, d->traversable);
  fb_json_builder_add_strings_member (b, "reachable_children", d->traversable ? d->reachable_children : NULL, -1);
  json_builder_set_member_name (b, "mount_point");
  json_builder_add_boolean_value (b, d->is_mount_point);
  fb_json_builder_add_string_member (b, "host_path", shown && kernel_tree (view) == NULL ? host : NULL);
  json_builder_set_member_name (b, "mount");
  json_builder_begin_object (b);
  fb_json_builder_add_string_member (b, "view_path", d->mount->view_path);
  fb_json_builder_add_string_member (b, "host_path", d->mount->host_path);
  json_builder_set_member_name (b, "private");
  json_builder_add_boolean_value (b, d->mount->is_private);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "rule");
  json_builder_begin_object (b);
  fb_json_builder_add_string_member (b, "kind", fb_policy_rule_kind_info (r->kind)->name);
  fb_json_builder_add_string_member (b, "origin", r->origin);
  fb_json_builder_add_int_member (b, "index", r->index);
  fb_json_builder_add_string_member (b, "path", r->path);
  fb_json_builder_add_string_member (b, "glob", r->glob);
  fb_json_builder_add_string_member (b, "access", fb_policy_access_to_string (r->access));
  fb_json_builder_add_string_member (b, "why", r->why);
  fb_json_builder_add_string_member (b, "source", r->source);
  json_builder_end_object (b);
  json_builder_end_object (b);
}

/* ---- explain net:HOST[:PORT] ---- */

#define NET_PREFIX "net:"
#define NET_DEFAULT_PORT 443

typedef struct
{
  char *host; /* as given */
  guint port;
  bool has_address;
  int family;
  guint8 address[16];
  char *normalized; /* NULL when the host is malformed */
  FbPolicyNetDecision by_name;
  FbPolicyNetDecision d; /* with the address's check, for an address */
} NetQuery;

static void
net_query_clear (NetQuery *q)
{
  g_free (q->host);
  g_free (q->normalized);
}

/* "net:HOST[:PORT]", HOST a name, an IPv4 address or [IPv6]; false with a
 * message for a PORT that is not one. */
static bool
net_query_parse (const char *arg, NetQuery *q, char **ret_message)
{
  const char *spec = arg + strlen (NET_PREFIX);
  const char *colon = spec[0] == '[' ? strstr (spec, "]:") : strrchr (spec, ':');
  guint64 port = NET_DEFAULT_PORT;

  if (colon != NULL && spec[0] == '[')
    colon++;
  else if (colon != NULL && spec[0] != '[' && strchr (spec, ':') != colon)
    colon = NULL; /* an IPv6 address without brackets: no port */
  if (colon != NULL && !g_ascii_string_to_unsigned (colon + 1, 10, 1, 65535, &port, NULL))
    {
      *ret_message =
        g_strdup_printf ("%s: \"%s\" is not a port; give net:HOST:PORT with a port from 1 to 65535", arg, colon + 1);
      return false;
    }
  q->host = colon != NULL ? g_strndup (spec, (gsize)(colon - spec)) : g_strdup (spec);
  q->port = (guint)port;
  q->normalized = fb_policy_net_host_normalize (q->host);
  if (q->normalized != NULL)
    {
      if (inet_pton (AF_INET, q->normalized, q->address) == 1)
        q->has_address = true, q->family = AF_INET;
      else if (inet_pton (AF_INET6, q->normalized, q->address) == 1)
        q->has_address = true, q->family = AF_INET6;
    }
  return true;
}

static void
net_query_decide (const FbPolicy *policy, NetQuery *q)
{
  fb_policy_net_decide (policy, q->host, q->port, &q->by_name);
  q->d = q->by_name;
  /* an address literal goes through the address's check too, as the
   * proxy does it: loopback and private addresses need an entry of theirs */
  if (q->has_address)
    fb_policy_net_check_address (policy, &q->by_name, q->family, q->address, q->port, &q->d);
}

static void
net_explain_text (const FbPolicy *policy, const NetQuery *q)
{
  const FbPolicyNetRule *r = q->d.rule;
  g_autofree char *host = SAFE (q->host);
  g_autofree char *origin = SAFE (r->origin);
  g_autofree char *text = SAFE (r->text);
  g_autofree char *why = SAFE (r->why);

  printf ("net:%s:%u\n", host, q->port);
  printf ("  connect:     %s\n", q->d.allowed ? "allow" : "deny");
  printf ("  network:     %s\n", fb_policy_network_to_string (fb_policy_get_network (policy)));
  if (r->index >= 0)
    printf ("  rule:        %s (%s %s)\n", origin, r->name, text);
  else if (strcmp (r->origin, r->name) != 0)
    printf ("  rule:        %s (%s)\n", origin, r->name);
  else
    printf ("  rule:        %s\n", origin);
  printf ("  why:         %s\n", why);
  if (q->has_address)
    printf ("  address:     %s (%s)\n", q->normalized,
            fb_policy_net_class_to_string (fb_policy_net_classify (q->family, q->address)));
  else if (q->d.allowed && fb_policy_get_network (policy) == FB_POLICY_NETWORK_ALLOWLIST)
    printf ("  addresses:   the proxy resolves the name; a loopback, link-local or private answer is refused\n"
            "               unless an address entry inside its block allows it\n");
}

static void
net_explain_json (JsonBuilder *b, const FbPolicy *policy, const NetQuery *q)
{
  const FbPolicyNetRule *r = q->d.rule;

  json_builder_begin_object (b);
  fb_json_builder_add_string_member (b, "host", q->host);
  fb_json_builder_add_int_member (b, "port", q->port);
  fb_json_builder_add_string_member (b, "network", fb_policy_network_to_string (fb_policy_get_network (policy)));
  fb_json_builder_add_string_member (b, "decision", q->d.allowed ? "allow" : "deny");
  fb_json_builder_add_string_member (
    b, "address_class",
    q->has_address ? fb_policy_net_class_to_string (fb_policy_net_classify (q->family, q->address)) : NULL);
  json_builder_set_member_name (b, "rule");
  json_builder_begin_object (b);
  fb_json_builder_add_string_member (b, "kind", fb_policy_net_rule_kind_to_string (r->kind));
  fb_json_builder_add_string_member (b, "name", r->name);
  fb_json_builder_add_string_member (b, "origin", r->origin);
  fb_json_builder_add_int_member (b, "index", r->index);
  fb_json_builder_add_string_member (b, "text", r->text);
  fb_json_builder_add_string_member (b, "action", r->allow ? "allow" : "deny");
  fb_json_builder_add_string_member (b, "why", r->why);
  json_builder_end_object (b);
  json_builder_end_object (b);
}

/* The policy of SPEC with the --network arguments applied, as a run
 * applies them (launcher-cmd-run.c). */
static FbPolicy *
apply_network_args (FbPolicy *policy, char **network, const FbPolicyVars *vars, GError **error)
{
  g_autofree char *json = fb_policy_to_json (policy);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autofree char *origin = g_strdup_printf ("%s + command line", fb_policy_get_origin (policy));
  JsonObject *root;

  if (!json_parser_load_from_data (parser, json, -1, error))
    return NULL;
  root = json_node_get_object (json_parser_get_root (parser));
  for (guint i = 0; network[i] != NULL; i++)
    if (!fb_policy_net_apply_short (root, network[i], error))
      return NULL;
  FbPolicy *applied = fb_policy_load_json (json_parser_get_root (parser), origin, vars, error);
  if (applied != NULL)
    fb_policy_keep_origins (applied, policy);
  return applied;
}

static int
cmd_explain (int argc, char **argv)
{
  g_autofree char *spec_arg = NULL;
  g_autofree char *workspace_arg = NULL;
  gboolean json = FALSE;
  g_auto (GStrv) network = NULL;
  const GOptionEntry entries[] = {
    { "policy", 'p', 0, G_OPTION_ARG_FILENAME, &spec_arg, "Policy file, or builtin:NAME (default: " DEFAULT_SPEC ")",
      "FILE|builtin:NAME" },
    { "workspace", 'w', 0, G_OPTION_ARG_FILENAME, &workspace_arg,
      "Workspace directory, ${WORKSPACE} (default: the current directory)", "DIR" },
    { "network", 0, 0, G_OPTION_ARG_STRING_ARRAY, &network,
      "The network as fusebox run --network gives it: none, host, allow:HOST[:PORT], deny:HOST[:PORT]", "NET" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print a JSON array, one object per PATH", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = fb_cmd_option_context (
    "PATH...", "Explain how a policy decides view paths and connections.",
    "For each net:HOST[:PORT] (PORT 443 unless given; HOST a name, an IPv4 address or [IPv6]) print\n"
    "whether the sandbox may connect there, the deciding network entry (FILE:LINE:COL) and its why;\n"
    "an address is also checked as the proxy checks a resolved one.  Write ./net:x for a file.\n"
    "For each PATH (relative ones are taken from the current directory) print its access (write,\n"
    "read, deny or hide), the deciding rule (FILE:LINE:COL of the rule, builtin:NAME:rules[i],\n"
    "protected_names[NAME] or default) with its why, whether a hidden or denied directory is\n"
    "traversable (and the only children it lists), whether the path is a mount point, and the host\n"
    "path the view shows there.  No PATH is looked up on the host: the answer is the policy's.\n"
    "The policy's sources are, as a run looks them up: one that is not an existing directory\n"
    "(or is a link, or lies in fusebox's state) is reported, and nothing is explained.\n"
    "\n"
    "Exit status: 0 success, 1 the policy failed to load, 2 usage error.");
  g_autoptr (GError) error = NULL;
  g_autofree char *cwd = g_get_current_dir ();
  FbPolicyVarsStorage storage = { 0 };
  int status = FB_EXIT_OK;
  const char *spec;

  if (!parse_options (ctx, entries, "explain", &argc, &argv))
    return FB_EXIT_USAGE;
  if (argc < 2)
    return usage_error ("explain", "no PATH given");
  spec = spec_arg != NULL ? spec_arg : DEFAULT_SPEC;
  if ((status = init_vars (&storage, "explain", workspace_arg)) != FB_EXIT_OK)
    return status;

  g_autoptr (FbPolicy) policy = fb_policy_load_spec (spec, &storage.vars, &error);
  if (policy == NULL)
    {
      print_load_error (spec, error);
      fb_policy_vars_clear (&storage);
      return FB_EXIT_FAILURE;
    }
  if (network != NULL)
    {
      FbPolicy *applied = apply_network_args (policy, network, &storage.vars, &error);

      if (applied == NULL)
        {
          fb_policy_vars_clear (&storage);
          return usage_error ("explain", error->message);
        }
      fb_policy_unref (policy);
      policy = applied;
    }
  g_autofree char *refused = sources_refused (policy);
  if (refused != NULL)
    {
      fb_cmd_error (REFUSED_FORMAT, refused);
      fb_policy_vars_clear (&storage);
      return FB_EXIT_FAILURE;
    }

  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_array (b);
  for (int i = 1; i < argc; i++)
    {
      if (g_str_has_prefix (argv[i], NET_PREFIX))
        {
          NetQuery q = { 0 };
          g_autofree char *message = NULL;

          if (!net_query_parse (argv[i], &q, &message))
            {
              net_query_clear (&q);
              fb_policy_vars_clear (&storage);
              return usage_error ("explain", message);
            }
          net_query_decide (policy, &q);
          if (json)
            net_explain_json (b, policy, &q);
          else
            {
              if (i > 1)
                printf ("\n");
              net_explain_text (policy, &q);
            }
          net_query_clear (&q);
          continue;
        }
      g_autofree char *view = view_path (argv[i], cwd);
      FbPolicyDecision d;

      fb_policy_decide (policy, view, &d);
      if (json)
        explain_json (b, view, &d);
      else
        {
          if (i > 1)
            printf ("\n");
          explain_text (view, &d);
        }
    }
  json_builder_end_array (b);
  if (json)
    {
      g_autoptr (JsonNode) root = json_builder_get_root (b);
      g_autofree char *text = fb_json_to_string (root, TRUE);
      printf ("%s\n", text);
    }
  fb_policy_vars_clear (&storage);
  return FB_EXIT_OK;
}

/* ---- show ---- */

static int
cmd_show (int argc, char **argv)
{
  g_autofree char *workspace_arg = NULL;
  gboolean effective = FALSE;
  const GOptionEntry entries[] = {
    { "workspace", 'w', 0, G_OPTION_ARG_FILENAME, &workspace_arg,
      "Workspace directory the built-in is generated for (default: the current directory)", "DIR" },
    { "effective", 'e', 0, G_OPTION_ARG_NONE, &effective,
      "Print the loaded policy with every variable expanded (NAME may then also be a FILE)", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = fb_cmd_option_context (
    "[NAME]", "Print a built-in policy as JSON, or list the built-ins.",
    "Without NAME, list the built-in policies.  With NAME (\"default\" or \"builtin:default\"),\n"
    "print its JSON as generated for this caller: the built-ins depend on HOME and the\n"
    "workspace (for root, HOME is /root, which the default otherwise hides).  Save it to a file\n"
    "to start a policy of your own.\n"
    "\n"
    "Exit status: 0 success, 1 unknown NAME or the policy failed to load, 2 usage error.");
  g_autoptr (GError) error = NULL;
  FbPolicyVarsStorage storage = { 0 };
  int status = FB_EXIT_OK;

  if (!parse_options (ctx, entries, "show", &argc, &argv))
    return FB_EXIT_USAGE;
  if (argc > 2)
    return usage_error ("show", "give at most one NAME");
  if (argc < 2)
    {
      if (effective)
        return usage_error ("show", "--effective needs a NAME or FILE");
      for (const char *const *n = fb_policy_builtin_names (); *n != NULL; n++)
        printf ("builtin:%s\n", *n);
      return FB_EXIT_OK;
    }
  if ((status = init_vars (&storage, "show", workspace_arg)) != FB_EXIT_OK)
    return status;

  const char *arg = argv[1];
  g_autofree char *text = NULL;
  if (effective)
    {
      /* A bare name means the built-in; anything else goes through the
       * same spec parsing as --policy. */
      g_autofree char *spec =
        g_strv_contains (fb_policy_builtin_names (), arg) ? g_strconcat ("builtin:", arg, NULL) : g_strdup (arg);
      g_autoptr (FbPolicy) policy = fb_policy_load_spec (spec, &storage.vars, &error);
      if (policy != NULL)
        text = fb_policy_to_json (policy);
      else
        print_load_error (spec, error);
    }
  else
    {
      const char *name = g_str_has_prefix (arg, "builtin:") ? arg + strlen ("builtin:") : arg;
      text = fb_policy_builtin_json (name, &storage.vars, &error);
      if (text == NULL)
        print_load_error (arg, error);
    }
  fb_policy_vars_clear (&storage);
  if (text == NULL)
    return FB_EXIT_FAILURE;
  printf ("%s%s", text, g_str_has_suffix (text, "\n") ? "" : "\n");
  return FB_EXIT_OK;
}

int
fb_cmd_policy (int argc, char **argv)
{
  static const struct
  {
    const char *name;
    int (*run) (int argc, char **argv);
  } subcommands[] = {
    { "check", cmd_check },
    { "explain", cmd_explain },
    { "show", cmd_show },
  };
  int status = fb_cmd_usage_or_help (argc, argv, policy_usage);

  if (status >= 0)
    return status;
  for (guint i = 0; i < G_N_ELEMENTS (subcommands); i++)
    if (strcmp (argv[1], subcommands[i].name) == 0)
      return subcommands[i].run (argc - 1, argv + 1);

  fb_cmd_error ("policy: unknown command '%s'; valid: check, explain, show (see 'fusebox policy --help')", argv[1]);
  return FB_EXIT_USAGE;
}
