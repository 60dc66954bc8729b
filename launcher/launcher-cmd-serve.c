/* fusebox serve — the remote API: an exec-server agents can drive.
 *
 *   fusebox serve [--listen ws://HOST:PORT|unix:PATH|stdio] [--policy P]
 *                 [--workspace DIR] [--log FILE] [--log-level L]
 *                 [--token-file FILE [--allow-remote] | --insecure-no-auth]
 *                 [--subscribe-all] [--detach-timeout MS]
 *
 * The same supervisor as `fusebox run` without a command
 * (docs/design.md#processes): a GLib main loop that owns the access log and
 * the API server (ipc/ipc-rpc.h); every fs call is decided by the view in this process,
 * and every process/start makes a new sandbox through the launch helper
 * `fusebox-launch` (this process runs threads, so it never forks a sandbox
 * itself).  For ws:// and unix: the first line on stdout is the address to
 * connect to (port 0 resolved), so a harness can start it and read where it
 * listens.  A ws:// listener wants a token (ipc/ipc-transport.c): made
 * at each start and printed as the URL's query (token=...), so that the
 * first line is all a client needs (Codex takes it as
 * CODEX_EXEC_SERVER_URL as it is); with --token-file the token is the
 * file's and is not printed.  SIGINT, SIGTERM and SIGHUP stop it: every
 * process is terminated, the log is drained, fsynced and closed.  With
 * --listen stdio it also stops at EOF on stdin. */
#include "ipc/ipc-rpc.h"
#include "ipc/ipc.h"
#include "launcher/launcher-private.h"
#include "policy/policy.h"

#include <errno.h>
#include <glib-unix.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_SPEC "builtin:default"
#define DEFAULT_LISTEN "ws://127.0.0.1:0"
#define TOKEN_MAX 4096

static int
usage_error (const char *message)
{
  fb_cmd_error ("serve: %s\nRun 'fusebox serve --help' for usage.", message);
  return FB_EXIT_USAGE;
}

static gboolean
on_signal (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_CONTINUE;
}

typedef struct
{
  GMainLoop *loop;
  FbRpcListener *listener;
} StdioWatch;

static gboolean
check_finished (gpointer data)
{
  StdioWatch *w = data;

  if (fb_rpc_listener_is_finished (w->listener))
    g_main_loop_quit (w->loop);
  return G_SOURCE_CONTINUE;
}

/* fusebox-launch beside this binary, unless $FUSEBOX_LAUNCH names one. */
static char *
find_helper (void)
{
  const char *env = g_getenv ("FUSEBOX_LAUNCH");
  char *path = fb_cmd_sibling_program ("FUSEBOX_LAUNCH", "fusebox-launch");

  /* named by the variable: used as given (a wrong one fails at spawn) */
  if (path != NULL && (env == NULL || env[0] == '\0') && !g_file_test (path, G_FILE_TEST_IS_EXECUTABLE))
    g_clear_pointer (&path, g_free);
  if (path != NULL && !g_path_is_absolute (path))
    {
      /* the helper is started in "/", not in our working directory */
      char *abs = g_canonicalize_filename (path, NULL);
      g_free (path);
      path = abs;
    }
  return path;
}

static char *
read_token (const char *file, GError **error)
{
  g_autofree char *text = NULL;
  gsize len;
  struct stat st;

  if (stat (file, &st) == 0 && (st.st_mode & 0077) != 0)
    g_printerr ("fusebox: serve: warning: the token file %s is readable by others (mode %o); chmod 600 it\n", file,
                st.st_mode & 0777);
  if (!g_file_get_contents (file, &text, &len, error))
    return NULL;
  g_strstrip (text);
  if (text[0] == '\0' || strlen (text) > TOKEN_MAX || strpbrk (text, " \t\r\n") != NULL)
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                   "%s: the token must be one line of at most %d bytes without spaces", file, TOKEN_MAX);
      return NULL;
    }
  return g_steal_pointer (&text);
}

/* The access log reached its budget (on whatever thread wrote the record
 * that reached it): stop serving, as SIGTERM would, from the main loop;
 * the message comes at the end. */
typedef struct
{
  GMainLoop *loop;
  gint full; /* atomic */
} LogBudget;

static gboolean
quit_for_budget (gpointer data)
{
  g_main_loop_quit (((LogBudget *)data)->loop);
  return G_SOURCE_REMOVE;
}

static void
on_log_full (gpointer data)
{
  LogBudget *b = data;

  g_atomic_int_set (&b->full, 1);
  g_idle_add_full (G_PRIORITY_HIGH - 10, quit_for_budget, b, NULL);
}

int
fb_cmd_serve (int argc, char **argv)
{
  g_autofree char *listen = NULL;
  g_autofree char *policy_arg = NULL;
  g_autofree char *workspace_arg = NULL;
  g_autofree char *log_arg = NULL;
  g_autofree char *log_file_size = NULL, *log_max_size = NULL;
  g_autofree char *level_arg = NULL;
  g_autofree char *token_file = NULL;
  gboolean allow_remote = FALSE;
  gboolean no_auth = FALSE;
  gboolean subscribe_all = FALSE;
  int detach_timeout = FB_RPC_DEFAULT_DETACH_TIMEOUT_MS;
  const GOptionEntry entries[] = {
    { "listen", 0, 0, G_OPTION_ARG_STRING, &listen,
      "Where to listen: ws://HOST:PORT (default " DEFAULT_LISTEN "), unix:PATH or stdio", "ADDRESS" },
    { "policy", 'p', 0, G_OPTION_ARG_STRING, &policy_arg,
      "The server's policy: a file, or builtin:NAME (default " DEFAULT_SPEC "); a call's sandbox can only narrow it",
      "FILE|builtin:NAME" },
    { "workspace", 'w', 0, G_OPTION_ARG_FILENAME, &workspace_arg,
      "Directory that ${WORKSPACE} stands for (default: the current directory)", "DIR" },
    { "log", 'l', 0, G_OPTION_ARG_FILENAME, &log_arg,
      "Write the access log to FILE (default: access.jsonl in a new run directory)", "FILE" },
    { "log-level", 'L', 0, G_OPTION_ARG_STRING, &level_arg, "mutations, opens (default) or all", "LEVEL" },
    { "allow-remote", 0, 0, G_OPTION_ARG_NONE, &allow_remote,
      "Allow a ws:// address that is not loopback (needs --token-file)", NULL },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
      "The token ws:// clients must present, read from FILE (default: a new one, printed in the URL)", "FILE" },
    { "insecure-no-auth", 0, 0, G_OPTION_ARG_NONE, &no_auth,
      "Serve ws:// on loopback without a token: anyone on this machine can then connect", NULL },
    { "subscribe-all", 0, 0, G_OPTION_ARG_NONE, &subscribe_all,
      "log/subscribe shows every session's records (default: each client its own session's)", NULL },
    { "detach-timeout", 0, 0, G_OPTION_ARG_INT, &detach_timeout,
      "Milliseconds a disconnected session keeps its processes for a resume (default 30000)", "MS" },
    { "log-file-size", 0, 0, G_OPTION_ARG_STRING, &log_file_size,
      "Rotate the access log past SIZE (default 16M, or the policy's log.file_size)", "SIZE" },
    { "log-max-size", 0, 0, G_OPTION_ARG_STRING, &log_max_size,
      "The budget of all the log's files (default 1G, or the policy's log.max_size): past it, the server stops",
      "SIZE" },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) policy = NULL;
  g_autoptr (FbAccessLog) log = NULL;
  g_autoptr (GMainLoop) loop = NULL;
  g_autofree char *workspace = NULL;
  g_autofree char *run_id = NULL;
  g_autofree char *run_dir = NULL;
  g_autofree char *log_path = NULL;
  g_auto (GStrv) state_paths = NULL;
  g_autofree char *token = NULL;
  g_autofree char *bare_url = NULL;
  g_autofree char *helper = NULL;
  g_autofree char *url = NULL;
  const char *auth_note = "this user only";
  guint64 file_size = 0, max_size = 0;
  LogBudget budget = { 0 };
  FbPolicyVarsStorage vars = { 0 };
  FbLogLevel level = FB_LOG_LEVEL_OPENS;
  FbAccessLogOptions lo = { 0 };
  FbRpcServerOptions so = { 0 };
  FbRpcListenOptions listen_opts = { 0 };
  FbRpcServer *server = NULL;
  FbRpcListener *listener = NULL;
  StdioWatch watch;
  guint sig_ids[3], stdio_id = 0;
  int status = FB_EXIT_OK;

  g_set_prgname ("fusebox serve");
  /* stdout carries the address (with stdio, the protocol itself): every log
   * message, debug ones included (G_MESSAGES_DEBUG=fusebox), goes to
   * stderr, where GLib would print debug and info on stdout. */
  g_log_writer_default_set_use_stderr (TRUE);
  ctx = g_option_context_new (NULL);
  g_option_context_set_summary (ctx, "Serve the remote API (Codex's exec-server protocol): agents read and write "
                                     "files and start sandboxed processes, every call decided by the policy and "
                                     "logged.");
  g_option_context_set_description (
    ctx, "For ws:// and unix: the first line on stdout is the address to connect to; for ws:// it carries\n"
         "the token every client must present (?token=..., or Authorization: Bearer), unless --token-file\n"
         "gave it.  GET /readyz answers 200 once the server listens.  Requests carrying an Origin header\n"
         "(browsers) are refused.  The protocol and every method are described in docs/api.md.  Stop with\n"
         "SIGINT/SIGTERM (or EOF with stdio).\n"
         "\n"
         "Exit status: 0 stopped cleanly, 1 failure, 2 usage error.");
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return usage_error (error->message);
  if (argc != 1)
    return usage_error ("unexpected argument; serve takes options only");
  if (level_arg != NULL && !fb_log_level_from_string (level_arg, &level))
    return usage_error ("--log-level: use mutations, opens or all");
  if (detach_timeout <= 0)
    return usage_error ("--detach-timeout: give a positive number of milliseconds");
  if (no_auth && token_file != NULL)
    return usage_error ("--insecure-no-auth and --token-file: give one of them");
  if (no_auth && allow_remote)
    return usage_error ("--insecure-no-auth is for loopback only; a remote listener needs --token-file");
  if (token_file != NULL)
    {
      token = read_token (token_file, &error);
      if (token == NULL)
        {
          fb_cmd_error ("serve: --token-file %s: %s", token_file, error->message);
          return FB_EXIT_FAILURE;
        }
    }
  if (workspace_arg != NULL)
    {
      char *real = realpath (workspace_arg, NULL);
      if (real == NULL || !g_file_test (real, G_FILE_TEST_IS_DIR))
        {
          fb_cmd_error ("serve: --workspace %s: %s; give the path of an existing directory", workspace_arg,
                        real == NULL ? g_strerror (errno) : "not a directory");
          free (real);
          return FB_EXIT_FAILURE;
        }
      workspace = g_strdup (real);
      free (real);
    }
  helper = find_helper ();
  if (helper == NULL)
    g_printerr ("fusebox: serve: warning: the launch helper fusebox-launch was not found beside this program (or in "
                "$FUSEBOX_LAUNCH); process/start will fail\n");

  run_id = fb_run_new_id ();
  run_dir = fb_run_dir_create (run_id, &error);
  if (run_dir == NULL)
    {
      fb_cmd_error ("serve: can't create the run directory: %s; set XDG_STATE_HOME to a writable directory",
                    error->message);
      return FB_EXIT_FAILURE;
    }
  fb_policy_vars_init_from_env (&vars, workspace, run_dir);
  policy = fb_policy_load_spec (policy_arg != NULL ? policy_arg : DEFAULT_SPEC, &vars.vars, &error);
  if (policy == NULL)
    {
      fb_policy_vars_clear (&vars);
      fb_cmd_error ("serve: %s", error->message);
      return FB_EXIT_FAILURE;
    }
  {
    /* The effective policy beside the log, for whoever audits the run. */
    g_autofree char *json = fb_policy_to_json (policy);
    g_autofree char *path = g_build_filename (run_dir, "policy.json", NULL);
    if (json != NULL)
      g_file_set_contents_full (path, json, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, NULL);
  }
  log_path =
    log_arg != NULL ? g_canonicalize_filename (log_arg, NULL) : g_build_filename (run_dir, "access.jsonl", NULL);

  signal (SIGPIPE, SIG_IGN);
  loop = g_main_loop_new (NULL, FALSE);
  /* Above every other source: a stop request is served even if some
   * source of high priority were ready at every iteration (a bug, but one
   * that must not make the server unkillable but by SIGKILL). */
  sig_ids[0] = g_unix_signal_add_full (G_PRIORITY_HIGH - 10, SIGINT, on_signal, loop, NULL);
  sig_ids[1] = g_unix_signal_add_full (G_PRIORITY_HIGH - 10, SIGTERM, on_signal, loop, NULL);
  sig_ids[2] = g_unix_signal_add_full (G_PRIORITY_HIGH - 10, SIGHUP, on_signal, loop, NULL);

  if (!fb_cmd_log_budget ("serve", log_file_size, log_max_size, policy, FB_LOG_DEFAULT_MAX_SIZE_SERVE, &file_size,
                          &max_size))
    {
      status = FB_EXIT_USAGE;
      goto out;
    }
  budget.loop = loop;
  lo.path = log_path;
  lo.run_id = run_id;
  /* repeated refusals folded; the budget stops the server (ipc/ipc-log.c) */
  lo.coalesce = TRUE;
  lo.rotate_bytes = file_size;
  lo.max_bytes = max_size;
  lo.on_full = on_log_full;
  lo.on_full_data = &budget;
  log = fb_access_log_new (&lo, NULL, &error);
  if (log == NULL)
    {
      fb_cmd_error ("serve: can't open the access log %s: %s; give a writable --log FILE", log_path, error->message);
      status = FB_EXIT_FAILURE;
      goto out;
    }

  so.policy = policy;
  so.vars = &vars.vars;
  so.log = log;
  so.log_level = level;
  so.subscribe_all = subscribe_all;
  so.detach_timeout_ms = (guint)detach_timeout;
  so.launch_helper = helper;
  so.run_dir = run_dir;
  /* Fusebox's own state (this run directory and its log, the runs root):
   * no view shows it, by host identity, and no source may. */
  state_paths = fb_run_state_paths (run_dir, log_path);
  if (!fb_run_check_sources (policy, (const char *const *)state_paths, &error))
    {
      fb_cmd_error ("serve: %s", error->message);
      status = FB_EXIT_FAILURE;
      goto out;
    }
  so.hidden_paths = (const char *const *)state_paths;
  server = fb_rpc_server_new (&so, &error);
  if (server == NULL)
    {
      fb_cmd_error ("serve: %s", error->message);
      status = FB_EXIT_FAILURE;
      goto out;
    }
  listen_opts.listen = listen != NULL ? listen : DEFAULT_LISTEN;
  listen_opts.allow_remote = allow_remote;
  listen_opts.token = token;
  listen_opts.no_auth = no_auth;
  listener = fb_rpc_listen (server, &listen_opts, &url, &error);
  if (listener == NULL)
    {
      fb_cmd_error ("serve: %s", error->message);
      status = error->code == FB_IPC_ERROR_INVALID ? FB_EXIT_USAGE : FB_EXIT_FAILURE;
      goto out;
    }
  if (strcmp (url, "stdio") == 0)
    {
      g_printerr ("fusebox: serving on stdio under the policy %s; run directory %s\n", fb_policy_get_origin (policy),
                  run_dir);
      watch.loop = loop;
      watch.listener = listener;
      stdio_id = g_timeout_add (50, check_finished, &watch);
    }
  else
    {
      bare_url = g_strndup (url, strcspn (url, "?"));
      if (g_str_has_suffix (bare_url, "/"))
        bare_url[strlen (bare_url) - 1] = '\0';
      /* Before the address: said before anyone can connect. */
      if (no_auth && g_str_has_prefix (url, "ws://"))
        g_printerr ("fusebox: serve: WARNING: --insecure-no-auth: %s asks no token; every user and program on "
                    "this machine can connect and run commands and read and write files as %s under the policy\n",
                    bare_url, g_get_user_name ());
      /* The first line is the address alone, with the token this start
       * made: harnesses read it, and it is all a client needs. */
      printf ("%s\n", url);
      fflush (stdout);
      if (strchr (url, '?') != NULL)
        auth_note = "the token is in the URL above";
      else if (token != NULL)
        auth_note = "the token is the one in --token-file";
      else if (g_str_has_prefix (url, "ws://"))
        auth_note = "no token";
      /* Not the token: stderr may go where others read (a journal). */
      g_printerr ("fusebox: serving %s (%s) under the policy %s; run directory %s; access log %s\n", bare_url,
                  auth_note, fb_policy_get_origin (policy), run_dir, log_path);
    }
  {
    /* what the soft RLIMIT_NOFILE was raised to, and every sandbox's share */
    g_autofree char *fd_note = fb_cmd_fd_budget_note (NULL);
    g_printerr ("fusebox: %s\n", fd_note);
  }

  g_main_loop_run (loop);

out:
  if (stdio_id != 0)
    g_source_remove (stdio_id);
  g_clear_pointer (&listener, fb_rpc_listener_free);
  g_clear_pointer (&server, fb_rpc_server_free);
  if (log != NULL && !fb_access_log_close (log, &error))
    {
      fb_cmd_error ("serve: the access log %s could not be completed: %s", log_path, error->message);
      status = FB_EXIT_FAILURE;
    }
  if (log != NULL && g_atomic_int_get (&budget.full))
    {
      guint64 not_written = 0;
      fb_access_log_is_full (log, &not_written);
      g_autofree char *msg = fb_cmd_log_full_message ("the server", log_path, max_size, not_written);
      fb_cmd_error ("serve: %s", msg);
      status = FB_EXIT_FAILURE;
    }
  for (guint i = 0; i < G_N_ELEMENTS (sig_ids); i++)
    g_source_remove (sig_ids[i]);
  fb_policy_vars_clear (&vars);
  return status;
}
