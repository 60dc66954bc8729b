/* fusebox run — put a command in a sandbox on top of the view.
 *
 *   fusebox run [--policy FILE|builtin:NAME] [--workspace DIR] [--read PATH]
 *               [--write PATH] [--deny PATH] [--hide PATH] [--network NET]...
 *               [--uid N] [--gid N] [--cwd DIR] [--setenv K V] [--unsetenv K]
 *               [--clearenv] [--log-level L] [--run-dir DIR] [--keep-run]
 *               [--session NAME [--session-idle-timeout S]]
 *               -- COMMAND [ARG...]
 *
 * The supervisor: it parses the options, builds the effective policy (the
 * spec, the command line's rules, and a hide rule for fusebox's own run
 * directories), prepares the run directory (0700: policy.json, run.json,
 * the access log; the view makes the private sources there when the
 * sandbox first reaches them), starts the sandbox
 * (launcher/launcher.h), serves it the view (fs/fs.h) with the access log
 * (ipc/ipc.h) on a GLib main loop, forwards signals, and exits with the
 * command's status.  See serve() for the order and the threads.
 *
 * Single-threaded until serve() has spawned the sandbox: the launcher forks.
 *
 * The run directory, policy.json, run.json, the log and its count of
 * denials are the run's (ipc/ipc.h, "one run", which lists run.json's
 * members; `run` adds "command", "cwd", "network", "uid", "gid", and on a
 * failure of the sandbox "failed_step"), shared with `mount` and `serve`;
 * `fusebox runs` (launcher-cmd-runs.c) lists and prunes them.
 */
#include "fs/fs.h"
#include "ipc/ipc-proxy.h"
#include "ipc/ipc.h"
#include "launcher/launcher-cmd-run.h"
#include "launcher/launcher-quick-spec.h"
#include "launcher/launcher-session-wire.h"
#include "launcher/launcher-private.h"
#include "launcher/launcher.h"
#include "policy/policy.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_SPEC "builtin:default"

static void
run_options_clear (RunOptions *o)
{
  g_free (o->policy_spec);
  g_free (o->workspace);
  if (o->rules)
    {
      for (guint i = 0; i < o->rules->len; i++)
        g_free (g_array_index (o->rules, ExtraRule, i).path);
      g_array_unref (o->rules);
    }
  g_free (o->cwd);
  if (o->env_ops)
    g_ptr_array_unref (o->env_ops);
  if (o->resolve)
    g_ptr_array_unref (o->resolve);
  if (o->network)
    g_ptr_array_unref (o->network);
  g_free (o->run_dir);
}

static void
run_usage (FILE *out)
{
  fprintf (out, "Usage: fusebox run [OPTION...] -- COMMAND [ARG...]\n"
                "\n"
                "Run COMMAND in new namespaces whose whole filesystem is the policy's view.\n"
                "\n"
                "Options:\n"
                "  --policy FILE|builtin:NAME  the policy (default builtin:default)\n"
                "  --workspace DIR             ${WORKSPACE} (default: the current directory)\n"
                "  --read PATH, --write PATH, --deny PATH, --hide PATH\n"
                "                              add a rule for PATH on top of the policy\n"
                "  --network NET               the network: none, host, or allowlist entries\n"
                "                              allow:HOST[:PORT] and deny:HOST[:PORT] (a name,\n"
                "                              *.SUFFIX, an address or CIDR range; repeat it or\n"
                "                              separate with commas), added to the policy's\n"
                "                              (fusebox-policy(5), NETWORK)\n"
                "  --uid N, --gid N            the ids inside (default: yours)\n"
                "  --cwd DIR                   working directory inside\n"
                "  --setenv K V, --unsetenv K, --clearenv\n"
                "                              the command's environment\n"
                "  --log-level mutations|opens|all\n"
                "  --run-dir DIR               the run directory (default under\n"
                "                              $XDG_STATE_HOME/fusebox/runs/; with --session\n"
                "                              it must be there)\n"
                "  --keep-run                  keep private sources after the run (not with\n"
                "                              --session: a session's are the session's)\n"
                "  --log-file-size SIZE        rotate the access log past SIZE (default 16M)\n"
                "  --log-max-size SIZE         the budget of all its files (default 256M): past\n"
                "                              it the sandbox is stopped (125)\n"
                "  --log-journal               every record to the systemd journal too\n"
                "  --resolve NAME:ADDRESS      the network proxy resolves NAME to ADDRESS\n"
                "                              (for tests and debugging, as curl's)\n"
                "  --session NAME              run in the view session NAME keeps, started now\n"
                "                              if need be: its commands share the kernel's\n"
                "                              caches and their /tmp and HOME; each is still a\n"
                "                              sandbox of its own ('fusebox session stop NAME')\n"
                "  --session-idle-timeout S    a session started now ends after S seconds\n"
                "                              without a command (default 600)\n"
                "\n"
                "Exit status: the command's, 128+N for signal N, 126 the command is not\n"
                "executable, 127 it was not found, 125 every failure of fusebox's own (a usage\n"
                "error, a policy that does not load, a run directory or log it can't make, a\n"
                "sandbox step), so that 0, 1 and 2 are only ever the command's.  A command\n"
                "may exit 125-127 itself: the run's run.json tells them apart (\"error\" is\n"
                "there only after a failure of fusebox's).  Manual: fusebox(1).\n");
}

/* A failure of fusebox's own, said as "run: MESSAGE" (a USAGE error in the
 * words of every command's, with where --help is); the message is built
 * raw and escaped where it is printed.  The status is 125 whichever it is,
 * run's own, as env(1)'s and timeout(1)'s: 0, 1 and 2 stay the command's.
 * A command that exits 125 itself looks the same; its run.json has no
 * "error". */
static int G_GNUC_PRINTF (2, 0) say_failure (bool usage, const char *format, va_list ap)
{
  g_autofree char *msg = g_strdup_vprintf (format, ap);

  if (usage)
    fb_cmd_usage_error ("run", msg);
  else
    fb_cmd_error ("run: %s", msg);
  return FB_LAUNCHER_EXIT_SANDBOX;
}

static int usage_error (const char *format, ...) G_GNUC_PRINTF (1, 2);

static int
usage_error (const char *format, ...)
{
  va_list ap;
  int status;

  va_start (ap, format);
  status = say_failure (true, format, ap);
  va_end (ap);
  return status;
}

static bool
parse_id (const char *s, guint32 *ret)
{
  char *end;
  errno = 0;
  unsigned long v = strtoul (s, &end, 10);
  if (errno || *s == '\0' || *end || s[0] == '-' || v >= G_MAXUINT32)
    return false;
  *ret = (guint32)v;
  return true;
}

/* An absolute, normalized view path for a rule given on the command line:
 * relative paths are taken from the current directory, symlinks of existing
 * paths resolved (the view never follows a link on the sandbox's behalf, so
 * a rule at a link's spelling would match nothing). */
static char *
rule_path (const char *arg)
{
  char *real = fb_realpath (arg);
  if (real)
    return real;
  g_autofree char *cwd = g_get_current_dir ();
  return g_canonicalize_filename (arg, cwd);
}

/* Returns -1 when parsing succeeded, else the exit status. */
static int
parse_run_args (int argc, char **argv, RunOptions *o)
{
  o->rules = g_array_new (FALSE, FALSE, sizeof (ExtraRule));
  o->env_ops = g_ptr_array_new_with_free_func (g_free);
  o->resolve = g_ptr_array_new ();
  o->network = g_ptr_array_new ();
  o->uid = o->gid = FB_LAUNCHER_ID_CALLER;
  o->log_level = FB_LOG_LEVEL_OPENS;
  o->session_idle_s = 600;

  int i;
  for (i = 1; i < argc; i++)
    {
      const char *a = argv[i];
#define NEED(n)                                                                                                        \
  do                                                                                                                   \
    {                                                                                                                  \
      if (i + (n) >= argc)                                                                                             \
        return usage_error ("%s needs %s", a, (n) == 1 ? "a value" : "two values");                                    \
    }                                                                                                                  \
  while (0)
      if (strcmp (a, "--") == 0)
        {
          i++;
          break;
        }
      else if (strcmp (a, "-h") == 0 || strcmp (a, "--help") == 0)
        {
          run_usage (stdout);
          return FB_EXIT_OK;
        }
      else if (strcmp (a, "--policy") == 0)
        {
          NEED (1);
          g_free (o->policy_spec);
          o->policy_spec = g_strdup (argv[++i]);
        }
      else if (strcmp (a, "--workspace") == 0)
        {
          NEED (1);
          g_free (o->workspace);
          o->workspace = fb_cmd_resolve_workspace ("run", argv[++i]);
          if (o->workspace == NULL)
            return FB_LAUNCHER_EXIT_SANDBOX;
        }
      else if (strcmp (a, "--read") == 0 || strcmp (a, "--write") == 0 || strcmp (a, "--deny") == 0 ||
               strcmp (a, "--hide") == 0)
        {
          NEED (1);
          ExtraRule r = { .option = a + 2 };
          fb_policy_access_from_string (a + 2, &r.access);
          r.path = rule_path (argv[++i]);
          g_array_append_val (o->rules, r);
        }
      else if (strcmp (a, "--network") == 0)
        {
          NEED (1);
          g_autoptr (JsonObject) scratch = json_object_new ();
          g_autoptr (GError) error = NULL;

          /* checked now for a usage error; applied to the policy when it
           * is loaded (fb_cmd_run_load_policy) */
          if (!fb_policy_net_apply_short (scratch, argv[++i], &error))
            return usage_error ("%s", error->message);
          g_ptr_array_add (o->network, argv[i]);
        }
      else if (strcmp (a, "--uid") == 0 || strcmp (a, "--gid") == 0)
        {
          NEED (1);
          if (!parse_id (argv[++i], a[2] == 'u' ? &o->uid : &o->gid))
            return usage_error ("%s %s: give a number from 0 to 4294967294", a, argv[i]);
        }
      else if (strcmp (a, "--cwd") == 0)
        {
          NEED (1);
          if (argv[++i][0] != '/')
            return usage_error ("--cwd %s: give an absolute path (it is looked up inside the sandbox)", argv[i]);
          g_free (o->cwd);
          o->cwd = g_canonicalize_filename (argv[i], "/");
        }
      else if (strcmp (a, "--setenv") == 0)
        {
          NEED (2);
          if (!argv[i + 1][0] || strchr (argv[i + 1], '='))
            return usage_error ("--setenv %s: a variable name can't be empty or contain '='", argv[i + 1]);
          g_ptr_array_add (o->env_ops, g_strdup_printf ("%s=%s", argv[i + 1], argv[i + 2]));
          i += 2;
        }
      else if (strcmp (a, "--unsetenv") == 0)
        {
          NEED (1);
          if (!argv[++i][0] || strchr (argv[i], '='))
            return usage_error ("--unsetenv %s: a variable name can't be empty or contain '='", argv[i]);
          g_ptr_array_add (o->env_ops, g_strdup (argv[i]));
        }
      else if (strcmp (a, "--clearenv") == 0)
        {
          o->clearenv = true; /* the caller's environment; --setenv still applies */
        }
      else if (strcmp (a, "--log-level") == 0)
        {
          NEED (1);
          if (!fb_log_level_from_string (argv[++i], &o->log_level))
            return usage_error ("--log-level %s: give mutations, opens or all", argv[i]);
        }
      else if (strcmp (a, "--run-dir") == 0)
        {
          NEED (1);
          g_free (o->run_dir);
          o->run_dir = g_canonicalize_filename (argv[++i], NULL);
        }
      else if (strcmp (a, "--log-file-size") == 0 || strcmp (a, "--log-max-size") == 0)
        {
          NEED (1);
          *(a[6] == 'f' ? &o->log_file_size : &o->log_max_size) = argv[++i];
        }
      else if (strcmp (a, "--keep-run") == 0)
        o->keep_run = true;
      else if (strcmp (a, "--session") == 0)
        {
          NEED (1);
          o->session = argv[++i];
        }
      else if (strcmp (a, "--session-idle-timeout") == 0)
        {
          guint32 s;
          NEED (1);
          if (!parse_id (argv[++i], &s) || s == 0 || s > 7 * 24 * 3600)
            return usage_error ("--session-idle-timeout %s: give a number of seconds from 1 to 604800", argv[i]);
          o->session_idle_s = s;
        }
      else if (strcmp (a, "--log-journal") == 0)
        o->log_journal = true;
      else if (strcmp (a, "--resolve") == 0)
        {
          g_autoptr (GError) error = NULL;
          const char *one[] = { argv[i + 1], NULL };

          NEED (1);
          if (!fb_proxy_check_resolve (one, &error))
            return usage_error ("%s", error->message);
          g_ptr_array_add (o->resolve, argv[++i]);
        }
      else if (a[0] == '-')
        return usage_error ("unknown option '%s'", a);
      else
        break; /* the command, without "--" */
#undef NEED
    }
  if (i >= argc)
    return usage_error ("no command given: fusebox run [OPTION...] -- COMMAND [ARG...]");
  o->command = argv + i;
  if (!o->policy_spec)
    o->policy_spec = g_strdup (DEFAULT_SPEC);
  if (o->session && o->keep_run)
    return usage_error ("--keep-run and --session: a session's private sources are the session's");
  g_ptr_array_add (o->resolve, NULL);
  return -1;
}

/* PATH with the symlinks of its existing part resolved, the rest appended:
 * the view decides real host paths, and the run directory (or even its
 * root) may not exist yet when the policy is built. */
static char *
real_path_prefix (const char *path)
{
  g_autofree char *head = g_strdup (path);
  g_autoptr (GString) tail = g_string_new (NULL);
  for (;;)
    {
      g_autofree char *real = fb_realpath (head);
      if (real)
        {
          g_autofree char *joined = g_strconcat (real, tail->str, NULL);
          return g_canonicalize_filename (joined, "/");
        }
      char *slash = strrchr (head, '/');
      if (!slash || slash == head)
        return g_strdup (path);
      g_string_prepend (tail, slash);
      *slash = '\0';
    }
}

static bool
has_rule (JsonArray *rules, const char *path, const char *access)
{
  for (guint i = 0; i < json_array_get_length (rules); i++)
    {
      JsonObject *r = json_array_get_object_element (rules, i);
      if (r && g_strcmp0 (json_object_get_string_member_with_default (r, "path", NULL), path) == 0 &&
          g_strcmp0 (json_object_get_string_member_with_default (r, "access", NULL), access) == 0)
        return true;
    }
  return false;
}

#define RUN_DIRS_WHY "fusebox's own run directories"

/* The spec's policy, re-loaded with the command line's rules and network,
 * then a hide rule for fusebox's run directories (the root under
 * $XDG_STATE_HOME, and this run's when --run-dir puts it elsewhere): they
 * hold this run's policy and log and other runs' logs and private files,
 * and a policy that shows the host (builtin:host makes / writable) would
 * otherwise let the sandbox read or rewrite its own audit trail.  The rule
 * comes after the user's and, at its path, wins over any other access
 * (hide is the strongest at equal specificity); a more specific rule the
 * user wrote below it still decides there.  Errors in the file keep their
 * FILE:LINE:COL: the spec is loaded on its own first. */
FbPolicy *
fb_cmd_run_load_policy (const RunOptions *o, const FbPolicyVars *vars, const char *run_dir, GError **error)
{
  g_autoptr (FbPolicy) base = fb_policy_load_spec (o->policy_spec, vars, error);
  if (!base)
    return NULL;
  /* Each source is an existing directory: checked here, where the rules
   * still know their FILE:LINE:COL (fusebox's state is checked once the
   * run directory exists, in prepare) */
  if (!fb_run_check_sources (base, NULL, error))
    return NULL;

  g_autofree char *json = fb_policy_to_json (base);
  g_autoptr (JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, json, -1, error))
    return NULL;
  JsonObject *root = json_node_get_object (json_parser_get_root (parser));
  for (guint i = 0; i < o->network->len; i++)
    if (!fb_policy_net_apply_short (root, o->network->pdata[i], error))
      return NULL;
  JsonArray *rules = json_object_get_array_member (root, "rules");
  /* the sessions' control sockets (launcher-session-daemon.c): hidden as the
   * run directories are (where a rule stands makes no difference: the most
   * specific path decides, and at its path hide wins) */
  g_autofree char *sessions_root = fb_run_sessions_root ();
  g_autofree char *sessions_real = real_path_prefix (sessions_root);
  if (strcmp (sessions_real, "/") != 0 && !has_rule (rules, sessions_real, "hide"))
    {
      JsonObject *rule = json_object_new ();
      json_object_set_string_member (rule, "path", sessions_real);
      json_object_set_string_member (rule, "access", "hide");
      json_object_set_string_member (rule, "why", "fusebox's own state: the control sockets of its sessions");
      json_array_add_object_element (rules, rule);
    }
  for (guint i = 0; i < o->rules->len; i++)
    {
      const ExtraRule *r = &g_array_index (o->rules, ExtraRule, i);
      JsonObject *rule = json_object_new ();
      json_object_set_string_member (rule, "path", r->path);
      json_object_set_string_member (rule, "access", fb_policy_access_to_string (r->access));
      g_autofree char *why = g_strdup_printf ("--%s on the command line", r->option);
      json_object_set_string_member (rule, "why", why);
      json_array_add_object_element (rules, rule);
    }

  g_autofree char *runs_root = fb_run_dir_root ();
  char *hidden[2] = { real_path_prefix (runs_root), real_path_prefix (run_dir) };
  if (g_str_has_prefix (hidden[1], hidden[0]) && hidden[1][strlen (hidden[0])] == '/')
    g_clear_pointer (&hidden[1], g_free); /* covered by the root's rule */
  for (guint i = 0; i < G_N_ELEMENTS (hidden); i++)
    {
      if (!hidden[i] || strcmp (hidden[i], "/") == 0 || has_rule (rules, hidden[i], "hide"))
        continue;
      JsonObject *rule = json_object_new ();
      json_object_set_string_member (rule, "path", hidden[i]);
      json_object_set_string_member (rule, "access", "hide");
      json_object_set_string_member (rule, "why", RUN_DIRS_WHY);
      json_array_add_object_element (rules, rule);
    }
  for (guint i = 0; i < G_N_ELEMENTS (hidden); i++)
    g_free (hidden[i]);

  g_autofree char *origin = o->rules->len > 0 || o->network->len > 0
                              ? g_strdup_printf ("%s + command line", fb_policy_get_origin (base))
                              : g_strdup (fb_policy_get_origin (base));
  FbPolicy *policy = fb_policy_load_json (json_parser_get_root (parser), origin, vars, error);
  if (policy != NULL)
    fb_policy_keep_origins (policy, base); /* the log names a rule of the file by FILE:LINE:COL */
  return policy;
}

char *
fb_cmd_sibling_program (const char *env_var, const char *name)
{
  const char *env = g_getenv (env_var);
  g_autofree char *self = NULL;
  g_autofree char *dir = NULL;

  /* a relative one would be found in whatever directory this runs in: a
   * workspace a sandbox writes, say */
  if (env != NULL && env[0] != '\0' && !g_path_is_absolute (env))
    {
      fb_cmd_error ("$%s is %s: give %s's absolute path, or unset it", env_var, env, name);
      return NULL;
    }
  if (env != NULL && env[0] != '\0')
    return g_strdup (env);
  self = g_file_read_link ("/proc/self/exe", NULL);
  if (self == NULL)
    return NULL;
  dir = g_path_get_dirname (self);
  return g_build_filename (dir, name, NULL);
}

static void
run_clear (Run *run)
{
  g_clear_pointer (&run->run, fb_run_free);
  g_strfreev (run->envp);
  g_free (run->cwd);
}

/* The command's environment: the caller's (unless --clearenv) with HOME at
 * the view's HOME, TMPDIR=/tmp and, with a network allowlist, the proxy's
 * variables, then --setenv/--unsetenv in order. */
static char **
build_env (const RunOptions *o, const FbPolicyVars *vars, const FbPolicy *policy)
{
  char **env = o->clearenv ? g_new0 (char *, 1) : g_get_environ ();
  if (vars->home)
    env = g_environ_setenv (env, "HOME", vars->home, TRUE);
  env = g_environ_setenv (env, "TMPDIR", "/tmp", TRUE);
  /* an allowlist's way out: the proxy (HTTP_PROXY, ALL_PROXY...) */
  if (fb_policy_get_network (policy) == FB_POLICY_NETWORK_ALLOWLIST)
    env = fb_proxy_environ (env);
  for (guint i = 0; i < o->env_ops->len; i++)
    {
      const char *op = o->env_ops->pdata[i];
      const char *eq = strchr (op, '=');
      if (eq)
        {
          g_autofree char *k = g_strndup (op, eq - op);
          env = g_environ_setenv (env, k, eq + 1, TRUE);
        }
      else
        env = g_environ_unsetenv (env, op);
    }
  return env;
}

/* --cwd, else the caller's directory when the view shows it, else the
 * workspace. */
static char *
pick_cwd (const RunOptions *o, const FbPolicy *policy, const FbPolicyVars *vars)
{
  if (o->cwd)
    return g_strdup (o->cwd);
  FbPolicyDecision d;
  if (vars->cwd)
    {
      fb_policy_decide (policy, vars->cwd, &d);
      /* visible, and the host's own directory there (not a private source
       * shown at that path, where the caller's directory does not exist) */
      if (fb_policy_access_info (d.access)->readable && d.mount->host_path &&
          strcmp (d.mount->host_path, d.mount->view_path) == 0)
        return g_strdup (vars->cwd);
    }
  return g_strdup (vars->workspace ? vars->workspace : "/");
}

/* The run (ipc/ipc.h, "one run"): the policy, loaded before anything is
 * made (it may say ${RUN}); the log's budget; the run directory with
 * policy.json; the command's environment and directory; run.json. */
int
fb_cmd_run_prepare (const RunOptions *o, const char *view_run_dir, const char *view_run_id, Run *run)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) policy = NULL;
  FbRunOptions ro = { .kind = FB_RUN_KIND_RUN, .run_dir = o->run_dir, .workspace = o->workspace };
  FbPolicyVarsStorage view_vars = { 0 };
  const FbPolicyVars *vars;
  JsonObject *info;

  run->run = fb_run_new (&ro);
  vars = fb_run_get_vars (run->run);
  if (view_run_dir != NULL)
    {
      fb_policy_vars_init_from_env (&view_vars, o->workspace, view_run_dir);
      vars = &view_vars.vars;
    }
  if (fb_run_check_reachable (run->run, &error))
    policy = fb_cmd_run_load_policy (o, vars, view_run_dir != NULL ? view_run_dir : fb_run_get_dir (run->run), &error);
  if (policy != NULL)
    {
      run->envp = build_env (o, vars, policy);
      run->cwd = pick_cwd (o, policy, vars);
    }
  fb_policy_vars_clear (&view_vars);
  if (!policy)
    {
      fb_cmd_error ("run: %s", error->message);
      return FB_LAUNCHER_EXIT_SANDBOX;
    }
  if (fb_cmd_create_run ("run", run->run, policy, o->log_file_size, o->log_max_size, FB_LOG_DEFAULT_MAX_SIZE,
                         &run->log_file_size, &run->log_max_size) >= 0)
    return FB_LAUNCHER_EXIT_SANDBOX;

  info = fb_run_get_info (run->run);
  JsonArray *cmd = json_array_new ();
  for (char **c = o->command; *c; c++)
    json_array_add_string_element (cmd, *c);
  json_object_set_array_member (info, "command", cmd);
  json_object_set_string_member (info, "cwd", run->cwd);
  json_object_set_string_member (info, "network", fb_policy_network_to_string (fb_policy_get_network (policy)));
  json_object_set_int_member (info, "uid", o->uid == FB_LAUNCHER_ID_CALLER ? geteuid () : o->uid);
  json_object_set_int_member (info, "gid", o->gid == FB_LAUNCHER_ID_CALLER ? getegid () : o->gid);
  if (view_run_id != NULL)
    {
      json_object_set_string_member (info, "session", o->session);
      json_object_set_string_member (info, "session_run", view_run_id);
    }
  if (!fb_run_start (run->run, &error))
    {
      fb_cmd_error ("run: %s", error->message);
      return FB_LAUNCHER_EXIT_SANDBOX;
    }
  return -1;
}

/* Private sources go with the run unless --keep-run; the log, policy.json
 * and run.json stay (`fusebox runs --prune` removes them). */
static void
remove_private (Run *run)
{
  const char *dir = fb_run_get_dir (run->run);
  /* through the descriptor taken when the directory was made: its path
   * may lead elsewhere by now (a --run-dir in the workspace whose parent
   * the sandbox renamed and replaced with a link) */
  int fd = fb_run_get_dir_fd (run->run);
  if (fd < 0)
    return;
  int r = fb_cmd_remove_tree_since (fd, "private", fb_run_get_made (run->run));
  if (r == -EEXIST)
    fb_cmd_error ("run: left %s/private: it holds entries made before this run began, which another sandbox that "
                  "sees the run directory moved in (a --run-dir in a workspace); look at them, then remove them "
                  "yourself, and give --run-dir a place no sandbox sees",
                  dir);
  else if (r < 0)
    fb_cmd_error ("run: removing the private sources in %s/private: %s; remove them with 'fusebox runs --prune'", dir,
                  g_strerror (-r));
}

/* ---- serving the view ----
 *
 * The order is forced by two rules.  fb_launcher_spawn() forks, so it runs
 * while this process has one thread: nothing before it may start a thread
 * (GLib's worker thread, libfuse's workers).  And the sandbox's first lookup
 * in the view (pid 1 mounting /proc on it) blocks until the FUSE connection
 * is served, so serving starts right after fb_launcher_child_wait_mounted().
 * The access log and the view are made between the two, while the child
 * builds its namespaces: that work overlaps instead of adding to startup.
 *
 * Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT are blocked before the spawn
 * and read from a signalfd in the main loop.  Every thread started later
 * inherits the mask (libfuse's workers block them again, GLib's worker
 * blocks everything), so none is lost to a thread and none kills the
 * supervisor halfway through writing the log.  g_unix_signal_add() has no
 * SIGQUIT; one mechanism for the four is simpler than two.
 *
 * The end: the outer child's pidfd becomes readable when pid 1 (and so the
 * whole pid namespace) is gone.  The FUSE connection ends by itself once the
 * last process holding the sandbox's mount namespace is gone (the kernel
 * aborts the connection when the superblock dies); a file of the view kept
 * open elsewhere (passed out over an abstract socket with network host)
 * would keep it alive, so after LINGER_MS it is aborted. */

/* ---- the command's PATH search, answered by the view ----
 *
 * execvp inside the sandbox tries argv[0] in each PATH entry in turn, and
 * every entry that does not hold it costs lookups through FUSE: a request
 * each, and two context switches (with the caller's PATH on the build
 * machine, 9 misses before /usr/bin/true: 1.6 ms of a quiet 19 ms run).
 * The supervisor asks the same view directly instead, in-process, while
 * the child still builds its namespaces, and tells the command how many
 * leading candidates are certainly absent; the command still execs, and
 * the kernel still looks the rest up through the view.
 *
 * "Certainly absent" is the view's ENOENT or ENOTDIR on a walk that is the
 * kernel's own: component by component, symlinks followed inside the view,
 * ".." to the parent.  The walk gives up (counts the candidate as maybe
 * present, which ends the skipping) where the sandbox does not see the
 * view: /proc and /dev, which the launcher mounts over it
 * (launcher-mount.c), and any synthetic node; and on a relative candidate
 * (the command's working directory) or any other error.  Skipping a
 * candidate execvp would have failed on anyway never changes which file
 * runs.  When every candidate is absent the command is not found (127)
 * without a search; the one difference from execvp: a PATH directory the
 * sandbox's user may not search reads as absent too, where execvp would
 * have reported EACCES (126).
 *
 * The walk's lookups are the view's, logged as such (at the "all" level,
 * and a hidden or denied name at every level) with pid 0 and comm
 * "fusebox": the supervisor asked on the command's behalf, and the command
 * does not ask again. */

static bool
walk_finds_nothing (FbView *view, const FbViewCaller *caller, const char *path)
{
  if (path[0] != '/')
    return false;
  g_autoptr (GPtrArray) stack = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);
  g_autoptr (GQueue) todo = g_queue_new ();
  g_auto (GStrv) parts = g_strsplit (path, "/", -1);
  g_autoptr (GPtrArray) texts = g_ptr_array_new_with_free_func (g_free); /* owns link targets' parts */
  guint links = 0;

  g_ptr_array_add (stack, fb_view_get_root (view));
  for (char **q = parts; *q; q++)
    g_queue_push_tail (todo, *q);
  while (!g_queue_is_empty (todo))
    {
      const char *name = g_queue_pop_head (todo);
      if (name[0] == '\0' || strcmp (name, ".") == 0)
        continue;
      if (strcmp (name, "..") == 0)
        {
          if (stack->len > 1)
            g_ptr_array_remove_index (stack, stack->len - 1);
          continue;
        }
      if (stack->len == 1 && (strcmp (name, "proc") == 0 || strcmp (name, "dev") == 0))
        return false;
      FbViewNode *parent = stack->pdata[stack->len - 1];
      FbViewNode *node = NULL;
      struct stat st;
      int r = fb_view_lookup (view, caller, parent, name, &node, &st);
      if (r < 0)
        return r == -ENOENT || r == -ENOTDIR;
      g_ptr_array_add (stack, node);
      if (fb_view_node_is_synthetic (node))
        return false;
      if (S_ISLNK (st.st_mode))
        {
          char *target = NULL;
          if (++links > FB_VIEW_WALK_MAX_LINKS || fb_view_readlink (view, caller, node, &target) < 0)
            {
              g_free (target);
              return false;
            }
          g_ptr_array_remove_index (stack, stack->len - 1);
          if (target[0] == '/')
            g_ptr_array_set_size (stack, 1);
          char **tparts = g_strsplit (target, "/", -1);
          g_free (target);
          for (guint i = g_strv_length (tparts); i > 0; i--)
            {
              g_ptr_array_add (texts, tparts[i - 1]);
              g_queue_push_head (todo, tparts[i - 1]);
            }
          g_free (tparts); /* the strings are in texts */
          continue;
        }
      if (!g_queue_is_empty (todo) && !S_ISDIR (st.st_mode))
        {
          /* more to walk below a non-directory; "x/" and "x/." too, as
           * for the kernel */
          return true;
        }
    }
  return false; /* found */
}

/* Tell the command how many of its PATH candidates to skip (see above). */
static void
send_path_hint (FbLauncherChild *child, const FbLauncherPlan *plan, FbView *view)
{
  g_auto (GStrv) candidates = fb_launcher_plan_path_candidates (plan);
  FbViewCaller caller = { .pid = 0, .uid = geteuid (), .gid = getegid (), .comm = "fusebox" };
  guint skip = 0;

  while (candidates[skip] && walk_finds_nothing (view, &caller, candidates[skip]))
    skip++;
  fb_launcher_child_skip_candidates (child, skip);
}

/* How long the FUSE connection may outlive the sandbox (see above). */
#define LINGER_MS 2000

typedef struct
{
  GMainLoop *loop;
  FbLauncherChild *child;
  FbView *view;
  FbRunFuse *serving;
  FbProxy *proxy; /* with a network allowlist */
  bool child_over;
  int exit_code;
  bool view_failed; /* we killed the sandbox: its status is ours, 125 */
} Supervisor;

/* The access log reached its budget (ipc/ipc-log.c), on whatever thread
 * wrote the record that reached it: stop the sandbox at once (SIGKILL to
 * the outer process: pid 1 and everything in the sandbox follow), so that
 * what it writes meanwhile stays within the log's margin.  The message and
 * the status (125) come at the end of serve(). */
static void
on_log_full (gpointer data)
{
  Supervisor *sv = data;
  FbLauncherChild *child = sv->child;

  if (child)
    fb_launcher_child_kill (child, SIGKILL);
}

static void
maybe_quit (Supervisor *sv)
{
  if (sv->child_over && fb_run_fuse_is_over (sv->serving))
    g_main_loop_quit (sv->loop);
}

/* Serving has ended (ipc-run-fuse.c), on the loop. */
static void
serving_ended (int result, gpointer data)
{
  Supervisor *sv = data;
  if (!sv->child_over && result < 0)
    {
      /* The view is gone under a running sandbox: every access would fail
       * with ENOTCONN.  End it rather than let it run blind. */
      fb_cmd_error ("run: serving the view failed (%s); stopping the sandbox", g_strerror (-result));
      fb_launcher_child_kill (sv->child, SIGKILL);
      sv->view_failed = true;
    }
  maybe_quit (sv);
}

static void
child_over (Supervisor *sv)
{
  if (sv->child_over)
    return;
  if (fb_launcher_child_wait (sv->child, &sv->exit_code) < 0)
    sv->exit_code = FB_LAUNCHER_EXIT_SANDBOX;
  sv->child_over = true;
  /* the connection outlives the sandbox: end it after the linger */
  fb_run_fuse_end (sv->serving, LINGER_MS);
  maybe_quit (sv);
}

static gboolean
on_pidfd (gint fd, GIOCondition condition, gpointer data)
{
  child_over (data);
  return G_SOURCE_REMOVE;
}

/* Kernels without pidfds: poll for the exit. */
static gboolean
poll_child (gpointer data)
{
  Supervisor *sv = data;
  if (fb_launcher_child_try_wait (sv->child, NULL) == -EAGAIN)
    return G_SOURCE_CONTINUE;
  child_over (sv);
  return G_SOURCE_REMOVE;
}

static gboolean
on_signal (gint fd, GIOCondition condition, gpointer data)
{
  Supervisor *sv = data;
  struct signalfd_siginfo si;
  while (read (fd, &si, sizeof si) == (ssize_t)sizeof si)
    {
      if (!sv->child_over)
        fb_launcher_child_kill (sv->child, (int)si.ssi_signo);
      else
        fb_run_fuse_end (sv->serving, 0); /* a second request to end: don't wait for the linger */
    }
  return G_SOURCE_CONTINUE;
}

/* The prerequisite probes after a failure, so that the user sees which one
 * is missing and its fix, not a bare errno.  They fork: in-process only
 * while single-threaded, else through a fresh `fusebox check`. */
void
fb_cmd_run_probes (bool single_threaded)
{
  fprintf (stderr, "fusebox: checking the prerequisites of a sandbox ('fusebox check'):\n");
  if (single_threaded)
    {
      FbLauncherCheckOptions co = { .quiet_ok = true };
      if (fb_launcher_check_run (&co, stderr) == 0)
        fprintf (stderr, "fusebox: every prerequisite is met; the step above is the cause\n");
      return;
    }
  const char *argv[] = { "/proc/self/exe", "check", "--quiet", NULL };
  GPid pid;
  g_autoptr (GError) error = NULL;
  if (!g_spawn_async_with_pipes_and_fds (NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, -1, STDERR_FILENO,
                                         STDERR_FILENO, NULL, NULL, 0, &pid, NULL, NULL, NULL, &error))
    {
      fb_cmd_print (stderr, "fusebox: could not run 'fusebox check' (%s); run it yourself\n", error->message);
      return;
    }
  int status;
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    fprintf (stderr, "fusebox: every prerequisite is met; the step above is the cause\n");
}

/* The sandbox reported a failure (or died before it could): say which step,
 * the path and the fix, record it, and return the exit status. */
int
fb_cmd_run_report_failure (Run *run, FbLauncherChild *child, int exit_code, bool single_threaded)
{
  g_autofree char *msg = fb_launcher_child_describe_failure (child);
  const FbLauncherFailure *f = fb_launcher_child_get_failure (child);
  if (!msg)
    msg = g_strdup ("the sandbox ended before its command started, without a word (killed?)");
  fb_cmd_error ("run: %s", msg);
  fb_run_set_error (run->run, msg, f ? fb_launcher_step_to_string (f->step) : NULL);
  /* 126/127 are about the command, not the host, and so is a directory
   * given as its stream: probing would not help */
  if (exit_code == FB_LAUNCHER_EXIT_SANDBOX && !(f != NULL && f->step == FB_LAUNCHER_STEP_STDIO && f->error == EISDIR))
    fb_cmd_run_probes (single_threaded);
  return exit_code;
}

/* A failure of fusebox's own before the sandbox runs: said, with NOTE as
 * run.json's error; the status is 125. */
static int fail (Run *run, const char *note, const char *format, ...) G_GNUC_PRINTF (3, 4);

static int
fail (Run *run, const char *note, const char *format, ...)
{
  va_list ap;
  int status;

  va_start (ap, format);
  status = say_failure (false, format, ap);
  va_end (ap);
  fb_run_set_error (run->run, note, NULL);
  return status;
}

void
fb_cmd_run_plan (const RunOptions *o, const Run *run, FbLauncherPlan *plan)
{
  fb_launcher_plan_init (plan);
  plan->root_kind = FB_LAUNCHER_ROOT_FUSE;
  plan->uid = o->uid;
  plan->gid = o->gid;
  plan->network = fb_policy_get_network (fb_run_get_policy (run->run)) == FB_POLICY_NETWORK_HOST
                    ? FB_LAUNCHER_NETWORK_HOST
                    : FB_LAUNCHER_NETWORK_NONE;
  /* an allowlist: only loopback, and the proxy's socket in it */
  if (fb_policy_get_network (fb_run_get_policy (run->run)) == FB_POLICY_NETWORK_ALLOWLIST)
    plan->proxy_port = FB_PROXY_PORT;
  plan->argv = (const char *const *)o->command;
  plan->envp = (const char *const *)run->envp;
  plan->cwd = run->cwd;
}

/* The sandbox, and while it makes its namespaces the log and the view;
 * then serve the view it mounted.  -1, or the exit status. */
static int
start_sandbox (const RunOptions *o, Run *run, Supervisor *sv)
{
  g_autoptr (GError) error = NULL;
  FbPolicy *policy = fb_run_get_policy (run->run);
  FbAccessLogOptions lo = { 0 };
  FbLauncherPlan plan;
  FbViewOptions vo;
  FbFuseOptions fo;
  FbFuse *fuse = NULL;
  int fuse_fd = -1, r;

  fb_cmd_run_plan (o, run, &plan);
  plan.path_hint = true; /* send_path_hint(), or the child is freed */

  /* from here on_log_full may stop it, from any thread */
  r = fb_launcher_spawn (&plan, &sv->child);
  if (r < 0)
    {
      FbLauncherFailure f = { .step = FB_LAUNCHER_STEP_CLONE, .error = -r };
      g_autofree char *msg = fb_launcher_describe_failure (&plan, &f);
      fb_cmd_error ("run: %s", msg);
      fb_run_set_error (run->run, msg, "clone");
      if (r != -EINVAL)
        fb_cmd_run_probes (true);
      return FB_LAUNCHER_EXIT_SANDBOX;
    }
  /* The command has its umask from us (the clone copied it).  From here
   * the view creates what the sandbox asks with exactly the modes the
   * kernel passes, which already had the caller's umask applied. */
  umask (0);

  /* While the child makes its namespaces: the log and the view.
   * write_through: each record reaches the file before its FUSE reply;
   * the budget stops the sandbox (ipc/ipc-log.c). */
  lo.write_through = TRUE;
  lo.rotate_bytes = run->log_file_size;
  lo.max_bytes = run->log_max_size;
  lo.on_full = on_log_full;
  lo.on_full_data = sv;
  lo.journal = fb_cmd_log_journal (o->log_journal, policy, &lo.journal_socket);
  if (!fb_run_open_log (run->run, &lo, &error))
    return fail (run, "the access log could not be opened",
                 "can't open the access log %s: %s; the run directory %s must be writable",
                 fb_run_get_log_path (run->run), error->message, fb_run_get_dir (run->run));
  fb_run_view_options (run->run, &vo);
  vo.log_level = o->log_level;
  r = fb_view_new (policy, &vo, &sv->view);
  if (r < 0)
    {
      g_autofree char *why = fb_view_new_explain (r, fb_run_get_dir (run->run));

      return fail (run, "the policy's directories could not be opened", "can't open the policy's directories: %s", why);
    }
  send_path_hint (sv->child, &plan, sv->view);
  /* the view raised the soft RLIMIT_NOFILE (after the sandbox was forked:
   * the command keeps the caller's); a small budget is said */
  fb_cmd_fd_budget_warn ("run");
  fb_fuse_options_init (&fo);
  /* --uid/--gid other than ours: the kernel speaks the sandbox's ids on
   * the connection; the view must act as, and show, the host's
   * (FbFuseIdMap in fs/fs.h) */
  fo.id_map.host_uid = geteuid ();
  fo.id_map.host_gid = getegid ();
  fo.id_map.inside_uid = o->uid == FB_LAUNCHER_ID_CALLER ? fo.id_map.host_uid : o->uid;
  fo.id_map.inside_gid = o->gid == FB_LAUNCHER_ID_CALLER ? fo.id_map.host_gid : o->gid;
  fo.id_map.enabled = fo.id_map.inside_uid != fo.id_map.host_uid || fo.id_map.inside_gid != fo.id_map.host_gid;
  fb_fuse_new (sv->view, &fo, &fuse);
  sv->serving = fb_run_fuse_new (fuse, fb_run_get_log (run->run));

  if (fb_launcher_child_wait_mounted (sv->child, &fuse_fd) < 0)
    {
      /* Nothing serves yet: still single-threaded, the probes may fork. */
      int code = FB_LAUNCHER_EXIT_SANDBOX;
      fb_launcher_child_wait (sv->child, &code);
      return fb_cmd_run_report_failure (run, sv->child, code, true);
    }
  r = fb_fuse_serve_fd (fuse, fuse_fd);
  if (r == 0)
    r = fb_run_fuse_start (sv->serving, serving_ended, sv);
  if (r < 0) /* freeing the child kills it */
    return fail (run, "the view could not be served", "can't serve the view to the sandbox: %s", g_strerror (-r));
  if (plan.proxy_port != 0)
    {
      /* the listening socket came before the root's record (launcher.h) */
      FbProxyOptions po = { .policy = policy,
                            .sink = fb_run_get_sink (run->run),
                            .uid = o->uid == FB_LAUNCHER_ID_CALLER ? geteuid () : o->uid,
                            .resolve = (const char *const *)o->resolve->pdata };
      int fd = fb_launcher_child_take_proxy_fd (sv->child);

      sv->proxy = fd >= 0 ? fb_proxy_new (&po, fd, &error) : NULL;
      if (sv->proxy == NULL)
        return fail (run, "the network proxy could not be started", "can't start the network proxy: %s",
                     error != NULL ? error->message : "the sandbox sent no listening socket");
    }
  return -1;
}

/* The main loop, until the sandbox is gone and its view no longer served;
 * then the command's status, or ours. */
static int
supervise (Run *run, Supervisor *sv, int sfd)
{
  g_autoptr (GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  int pidfd = fb_launcher_child_get_pidfd (sv->child);
  guint sig_id = 0, child_id;

  sv->loop = loop;
  if (sfd >= 0)
    sig_id = g_unix_fd_add (sfd, G_IO_IN, on_signal, sv);
  child_id = pidfd >= 0 ? g_unix_fd_add (pidfd, G_IO_IN, on_pidfd, sv) : g_timeout_add (20, poll_child, sv);
  g_main_loop_run (loop);
  sv->loop = NULL;
  if (sig_id)
    g_source_remove (sig_id);
  if (!sv->child_over)
    g_source_remove (child_id);
  /* Nothing is served any more: the host watcher's marks go now, all at
   * once, so that the kernel frees them while we finish instead of making
   * our exit wait (fs-watch.c "Stopping"). */
  fb_watch_stop ();
  fb_run_fuse_finish (sv->serving);

  if (sv->view_failed)
    {
      fb_run_set_error (run->run, "serving the view failed; the sandbox was stopped", NULL);
      return FB_LAUNCHER_EXIT_SANDBOX;
    }
  if (fb_launcher_child_get_failure (sv->child))
    return fb_cmd_run_report_failure (run, sv->child, sv->exit_code, false);
  return sv->exit_code;
}

int
fb_cmd_run_signalfd (void)
{
  return fb_forwarded_signalfd ();
}

static int
serve (const RunOptions *o, Run *run)
{
  /* before the command can touch it; restored at the end, whatever ends
   * the run (launcher-cmd-terminal.c) */
  g_autoptr (FbCmdTerminal) terminal = fb_cmd_terminal_save ();
  Supervisor sv = { 0 };
  int sfd = fb_cmd_run_signalfd (), status;

  /* The log is written with write(2); a closed pipe elsewhere is an error
   * to report, not a reason to die. */
  signal (SIGPIPE, SIG_IGN);

  status = start_sandbox (o, run, &sv);
  if (status < 0)
    status = supervise (run, &sv, sfd);
  /* its last records (the connections still open) before the log closes */
  g_clear_pointer (&sv.proxy, fb_proxy_free);

  g_clear_pointer (&sv.serving, fb_run_fuse_free);
  g_clear_pointer (&sv.view, fb_view_unref);
  /* Kills and reaps a sandbox still running (a failure on our side). */
  FbLauncherChild *child = g_steal_pointer (&sv.child);
  g_clear_pointer (&child, fb_launcher_child_free);
  /* Nothing of the sandbox is left to change the terminal again. */
  fb_cmd_terminal_restore (terminal);
  if (!fb_cmd_close_run_log (run->run, "run", "the sandbox") && fb_run_log_is_full (run->run, NULL))
    status = FB_LAUNCHER_EXIT_SANDBOX;
  if (sfd >= 0)
    close (sfd);
  json_object_set_int_member (fb_run_get_info (run->run), "exit_status", status);
  if (!o->keep_run)
    remove_private (run);
  return status;
}

int
fb_cmd_run (int argc, char **argv)
{
  RunOptions o = { 0 };
  Run run = { 0 };
  int status = parse_run_args (argc, argv, &o);
  o.quick_shape = fb_session_quick_shape (argc, argv) > 0;
  if (status < 0 && o.session != NULL)
    status = fb_cmd_run_session (&o, &run);
  if (status < 0)
    status = fb_cmd_run_prepare (&o, NULL, NULL, &run);
  if (status < 0)
    status = serve (&o, &run);
  if (run.run)
    {
      g_autoptr (GError) error = NULL;
      if (!fb_run_end (run.run, status, &error))
        fb_cmd_error ("run: %s", error->message);
    }
  run_clear (&run);
  run_options_clear (&o);
  return status;
}
