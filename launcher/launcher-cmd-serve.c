/* fusebox serve — the remote API: an exec-server agents can drive.
 *
 *   fusebox serve [--listen ws://HOST:PORT|unix:PATH|stdio] [--policy P]
 *                 [--workspace DIR] [--log FILE] [--log-level L]
 *                 [--token-file FILE [--allow-remote] | --insecure-no-auth]
 *                 [--subscribe-all] [--detach-timeout MS] [--output-max SIZE]
 *                 [--view-idle-timeout MS]
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
 * file's and is not printed.  Its run directory, policy.json, run.json
 * (with the address, never the token) and log are a run's, as for `run`
 * and `mount` (ipc/ipc.h, "one run").  SIGINT, SIGTERM and SIGHUP stop it: every
 * process is terminated, the log is drained, fsynced and closed.  With
 * --listen stdio it also stops at EOF on stdin. */
#include "ipc/ipc-rpc.h"
#include "ipc/ipc.h"
#include "launcher/launcher-private.h"
#include "policy/policy.h"
#include "policy/util.h"
#include "policy/util-file.h"

#include <errno.h>
#include <glib-unix.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_SPEC "builtin:default"
#define DEFAULT_LISTEN "ws://127.0.0.1:0"

static int
usage_error (const char *message)
{
  return fb_cmd_usage_error ("serve", message);
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
  /* absolute (a relative $FUSEBOX_LAUNCH is refused): the helper is
   * started in "/" */
  return path;
}

char *
fb_cmd_read_token (const char *file, GError **error)
{
  g_autofree char *text = fb_file_read_regular (file, "the token file", FB_FILE_NAMED, FB_CMD_TOKEN_MAX, NULL, error);

  if (text == NULL)
    return NULL;
  g_strstrip (text);
  if (text[0] == '\0' || strpbrk (text, " \t\r\n") != NULL)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                   "%s: the token must be one line of at most %d bytes without spaces", file, FB_CMD_TOKEN_MAX);
      return NULL;
    }
  return g_steal_pointer (&text);
}

typedef struct
{
  FbCmdRunArgs run;
  char *listen, *token_file, *output_max;
  gboolean allow_remote, no_auth, subscribe_all;
  int detach_timeout;
  int view_idle_timeout;
  guint64 output_max_bytes; /* 0: the default */
  FbLogLevel log_level;
  char *token;                 /* --token-file's */
  guint64 file_size, max_size; /* the access log's budget */
} ServeCommandLine;

static void
serve_command_line_clear (ServeCommandLine *c)
{
  fb_cmd_run_args_clear (&c->run);
  g_free (c->listen);
  g_free (c->token_file);
  g_free (c->output_max);
  g_free (c->token);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (ServeCommandLine, serve_command_line_clear)

typedef struct
{
  GMainLoop *loop;
  FbRpcServer *server;
  FbRpcListener *listener;
  guint stdio_id;
} Server;

static gboolean
on_signal (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_CONTINUE;
}

static gboolean
check_finished (gpointer data)
{
  Server *s = data;

  if (fb_rpc_listener_is_finished (s->listener))
    g_main_loop_quit (s->loop);
  return G_SOURCE_CONTINUE;
}

/* The access log reached its budget (on whatever thread wrote the record
 * that reached it): stop serving, as SIGTERM would, from the main loop;
 * the message comes at the end. */
static gboolean
quit_for_budget (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

static void
on_log_full (gpointer data)
{
  g_idle_add_full (G_PRIORITY_HIGH - 10, quit_for_budget, data, NULL);
}

/* The options, the token and the workspace.  -1, or the exit status. */
static int
parse_serve_args (int argc, char **argv, ServeCommandLine *c)
{
  const GOptionEntry entries[] = {
    { "listen", 0, 0, G_OPTION_ARG_STRING, &c->listen,
      "Where to listen: ws://HOST:PORT (default " DEFAULT_LISTEN "), unix:PATH or stdio", "ADDRESS" },
    { "policy", 'p', 0, G_OPTION_ARG_STRING, &c->run.policy,
      "The server's policy: a file, or builtin:NAME (default " DEFAULT_SPEC "); a call's sandbox can only narrow it",
      "FILE|builtin:NAME" },
    FB_CMD_RUN_ARGS_ENTRIES (&c->run),
    { "allow-remote", 0, 0, G_OPTION_ARG_NONE, &c->allow_remote,
      "Allow a ws:// address that is not loopback (needs --token-file)", NULL },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &c->token_file,
      "The token ws:// clients must present, read from FILE (default: a new one, printed in the URL)", "FILE" },
    { "insecure-no-auth", 0, 0, G_OPTION_ARG_NONE, &c->no_auth,
      "Serve ws:// on loopback without a token: anyone on this machine can then connect", NULL },
    { "subscribe-all", 0, 0, G_OPTION_ARG_NONE, &c->subscribe_all,
      "log/subscribe shows every session's records (default: each client its own session's)", NULL },
    { "detach-timeout", 0, 0, G_OPTION_ARG_INT, &c->detach_timeout,
      "Milliseconds a disconnected session keeps its processes for a resume (default 30000)", "MS" },
    { "view-idle-timeout", 0, 0, G_OPTION_ARG_INT, &c->view_idle_timeout,
      "Milliseconds a session's view is kept after its last process ended (default 300000)", "MS" },
    { "output-max", 0, 0, G_OPTION_ARG_STRING, &c->output_max,
      "Processes' output kept for process/read, all together (default 256M, at least 4M; a quarter for the "
      "clients of one address): past it, finished processes' is forgotten",
      "SIZE" },
    FB_CMD_RUN_ARGS_FILE_SIZE_ENTRY (&c->run),
    { "log-max-size", 0, 0, G_OPTION_ARG_STRING, &c->run.log_max_size,
      "The budget of all the log's files (default 1G, or the policy's log.max_size): past it, the server stops",
      "SIZE" },
    FB_CMD_RUN_ARGS_JOURNAL_ENTRY (&c->run),
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = NULL;
  g_autoptr (GError) error = NULL;

  c->detach_timeout = FB_RPC_DEFAULT_DETACH_TIMEOUT_MS;
  c->view_idle_timeout = FB_RPC_VIEW_IDLE_MS;
  c->log_level = FB_LOG_LEVEL_OPENS;
  ctx = fb_cmd_option_context (
    NULL,
    "Serve the remote API (Codex's exec-server protocol): agents read and write "
    "files and start sandboxed processes, every call decided by the policy and "
    "logged.",
    "For ws:// and unix: the first line on stdout is the address to connect to; for ws:// it carries\n"
    "the token every client must present (?token=..., or Authorization: Bearer), unless --token-file\n"
    "gave it.  GET /readyz answers 200 once the server listens.  Requests carrying an Origin header\n"
    "(browsers) are refused.  The protocol and every method are described in docs/api.md.  Stop with\n"
    "SIGINT/SIGTERM (or EOF with stdio).\n"
    "\n"
    "Exit status: 0 stopped cleanly, 1 failure, 2 usage error.");
  if (!fb_cmd_parse_options (ctx, entries, "serve", &argc, &argv))
    return FB_EXIT_USAGE;
  if (argc != 1)
    return usage_error ("unexpected argument; serve takes options only");
  if (c->run.level != NULL && !fb_log_level_from_string (c->run.level, &c->log_level))
    return usage_error ("--log-level: use mutations, opens or all");
  if (c->detach_timeout <= 0)
    return usage_error ("--detach-timeout: give a positive number of milliseconds");
  if (c->view_idle_timeout <= 0)
    return usage_error ("--view-idle-timeout: give a positive number of milliseconds");
  if (c->output_max != NULL &&
      (!fb_policy_parse_size (c->output_max, &c->output_max_bytes) || c->output_max_bytes < FB_RPC_RETAIN_TOTAL_MIN))
    return usage_error ("--output-max: give a size of at least 4M (bytes, or with K, M or G)");
  if (c->no_auth && c->token_file != NULL)
    return usage_error ("--insecure-no-auth and --token-file: give one of them");
  if (c->no_auth && c->allow_remote)
    return usage_error ("--insecure-no-auth is for loopback only; a remote listener needs --token-file");
  if (c->token_file != NULL)
    {
      struct stat st;

      /* a token another user made, or could swap, is one they know */
      if (!fb_path_check_private (c->token_file, true, "--token-file",
                                  "give a file of yours in a directory where no other user may write on the way",
                                  &error))
        {
          fb_cmd_error ("serve: %s", error->message);
          return FB_EXIT_FAILURE;
        }
      c->token = fb_cmd_read_token (c->token_file, &error);
      if (c->token == NULL)
        {
          fb_cmd_error ("serve: --token-file: %s", error->message);
          return FB_EXIT_FAILURE;
        }
      if (stat (c->token_file, &st) == 0 && (st.st_mode & 0077) != 0)
        fb_cmd_print (stderr,
                      "fusebox: serve: warning: the token file %s is readable by others (mode %o); chmod 600 it\n",
                      c->token_file, st.st_mode & 0777);
    }
  /* The socket is made, and removed at the end, by path: in a directory
   * another user may change, they could put their own listener in its
   * place, or have the end remove a socket of someone else's. */
  if (c->listen != NULL && g_str_has_prefix (c->listen, "unix:"))
    {
      g_autofree char *dir = g_path_get_dirname (c->listen + strlen ("unix:"));
      /* there already (one made after this check could be another's), and
       * out of other users' reach */
      if (!fb_path_check_existing (
            dir, "--listen's directory",
            "give a socket path in a directory that exists, where no other user may write on the way", &error) ||
          /* the socket's own name (another user's mount there, in a sticky
           * directory, would hold the look at what is there) */
          !fb_path_check_not_foreign_fuse (c->listen + strlen ("unix:"), "--listen",
                                           "give a socket path in a directory of yours", &error))
        {
          fb_cmd_error ("serve: %s", error->message);
          return FB_EXIT_FAILURE;
        }
    }
  if (c->run.workspace != NULL &&
      (c->run.workspace_real = fb_cmd_resolve_workspace ("serve", c->run.workspace)) == NULL)
    return FB_EXIT_FAILURE;
  return -1;
}

/* The run (ipc/ipc.h, "one run"): the policy (loaded before anything is
 * made: it may say ${RUN}), the log's budget, the run directory with
 * policy.json, fusebox's state (hidden from every view by identity, never
 * a source) and run.json.  -1, or the exit status. */
static int
prepare_run (ServeCommandLine *c, FbRun **ret_run)
{
  g_autoptr (GError) error = NULL;
  FbRunOptions ro = { .kind = FB_RUN_KIND_SERVE, .workspace = c->run.workspace_real, .log_path = c->run.log };
  FbRun *run = *ret_run = fb_run_new (&ro);
  int status;

  status = fb_cmd_run_args_create_run (&c->run, "serve", DEFAULT_SPEC, run, FB_LOG_DEFAULT_MAX_SIZE_SERVE,
                                       &c->file_size, &c->max_size);
  if (status >= 0)
    return status;
  if (!fb_run_start (run, &error))
    {
      fb_cmd_error ("serve: %s", error->message);
      return FB_EXIT_FAILURE;
    }
  return -1;
}

/* Where it listens, to whoever started it: for ws:// and unix: the first
 * line on stdout, the address alone (with the token this start made:
 * harnesses read it, and it is all a client needs); the rest on stderr,
 * never the token (stderr may go where others read: a journal).  And in
 * run.json, without the token. */
static void
announce (const ServeCommandLine *c, FbRun *run, Server *s, const char *url)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *bare_url = g_strndup (url, strcspn (url, "?"));
  g_autofree char *fd_note = NULL;
  const char *origin = fb_policy_get_origin (fb_run_get_policy (run));
  const char *auth_note = "this user only";

  if (g_str_has_suffix (bare_url, "/"))
    bare_url[strlen (bare_url) - 1] = '\0';
  json_object_set_string_member (fb_run_get_info (run), "listen", bare_url);
  if (!fb_run_save (run, &error))
    fb_cmd_print (stderr, "fusebox: serve: warning: run.json: %s\n", error->message);
  if (strcmp (url, "stdio") == 0)
    {
      fb_cmd_print (stderr, "fusebox: serving on stdio under the policy %s; run directory %s\n", origin,
                    fb_run_get_dir (run));
      s->stdio_id = g_timeout_add (50, check_finished, s);
    }
  else
    {
      /* Before the address: said before anyone can connect. */
      if (c->no_auth && g_str_has_prefix (url, "ws://"))
        fb_cmd_print (stderr,
                      "fusebox: serve: WARNING: --insecure-no-auth: %s asks no token; every user and program on "
                      "this machine can connect and run commands and read and write files as %s under the policy\n",
                      bare_url, g_get_user_name ());
      printf ("%s\n", url);
      fflush (stdout);
      if (strchr (url, '?') != NULL)
        auth_note = "the token is in the URL above";
      else if (c->token != NULL)
        auth_note = "the token is the one in --token-file";
      else if (g_str_has_prefix (url, "ws://"))
        auth_note = "no token";
      fb_cmd_print (stderr, "fusebox: serving %s (%s) under the policy %s; run directory %s; access log %s\n", bare_url,
                    auth_note, origin, fb_run_get_dir (run), fb_run_get_log_path (run));
    }
  /* what the soft RLIMIT_NOFILE was raised to, and every sandbox's share */
  fd_note = fb_cmd_fd_budget_note (NULL);
  fb_cmd_print (stderr, "fusebox: %s\n", fd_note);
}

/* The access log, the API server over the run's policy and state, the
 * listener.  -1, or the exit status. */
static int
start_server (const ServeCommandLine *c, FbRun *run, Server *s)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *helper = find_helper ();
  g_autofree char *url = NULL;
  FbAccessLogOptions lo = { 0 };
  FbRpcServerOptions so = { 0 };
  FbRpcListenOptions listen_opts = { 0 };
  int run_dir_fd;

  if (helper == NULL)
    g_printerr ("fusebox: serve: warning: the launch helper fusebox-launch was not found beside this program (or in "
                "$FUSEBOX_LAUNCH); process/start will fail\n");
  /* the budget stops the server (ipc/ipc-log.c) */
  lo.rotate_bytes = c->file_size;
  lo.max_bytes = c->max_size;
  lo.on_full = on_log_full;
  lo.on_full_data = s->loop;
  lo.journal = fb_cmd_log_journal (c->run.log_journal, fb_run_get_policy (run), &lo.journal_socket);
  if (fb_run_open_log (run, &lo, &error) == NULL)
    {
      fb_cmd_error ("serve: can't open the access log %s: %s; give a --log FILE you can write, in a directory only "
                    "you can write",
                    fb_run_get_log_path (run), error->message);
      return FB_EXIT_FAILURE;
    }

  so.policy = fb_run_get_policy (run);
  so.vars = fb_run_get_vars (run);
  so.log = fb_run_get_log (run);
  so.log_level = c->log_level;
  so.subscribe_all = c->subscribe_all;
  so.detach_timeout_ms = (guint)c->detach_timeout;
  so.view_idle_ms = (guint)c->view_idle_timeout;
  so.retained_max = (gsize)c->output_max_bytes;
  so.launch_helper = helper;
  so.run_dir = fb_run_get_dir (run);
  run_dir_fd = fb_run_get_dir_fd (run);
  so.run_dir_fd = &run_dir_fd;
  /* Fusebox's own state (this run directory and its log, the runs root),
   * and the token file: no view shows them, by host identity.  A process
   * that read the token through its view could call this server, under
   * its policy, whatever narrower sandbox it was started in. */
  g_autoptr (GPtrArray) hidden = g_ptr_array_new_with_free_func (g_free);
  for (const char *const *p = fb_run_get_state_paths (run); p != NULL && *p != NULL; p++)
    g_ptr_array_add (hidden, g_strdup (*p));
  if (c->token_file != NULL)
    {
      char *real = fb_realpath (c->token_file);
      g_ptr_array_add (hidden, g_canonicalize_filename (c->token_file, NULL));
      if (real != NULL)
        g_ptr_array_add (hidden, real);
    }
  g_ptr_array_add (hidden, NULL);
  so.hidden_paths = (const char *const *)hidden->pdata;
  s->server = fb_rpc_server_new (&so, &error);
  if (s->server == NULL)
    {
      fb_cmd_error ("serve: %s", error->message);
      return FB_EXIT_FAILURE;
    }
  listen_opts.listen = c->listen != NULL ? c->listen : DEFAULT_LISTEN;
  listen_opts.allow_remote = c->allow_remote;
  listen_opts.token = c->token;
  listen_opts.no_auth = c->no_auth;
  s->listener = fb_rpc_listen (s->server, &listen_opts, &url, &error);
  if (s->listener == NULL)
    {
      fb_cmd_error ("serve: %s", error->message);
      return error->code == FB_IPC_ERROR_INVALID ? FB_EXIT_USAGE : FB_EXIT_FAILURE;
    }
  announce (c, run, s, url);
  return -1;
}

int
fb_cmd_serve (int argc, char **argv)
{
  g_auto (ServeCommandLine) c = { 0 };
  g_autoptr (FbRun) run = NULL;
  g_autoptr (GMainLoop) loop = NULL;
  g_autoptr (GError) error = NULL;
  Server s = { 0 };
  guint sig_ids[3];
  int status;

  g_set_prgname ("fusebox serve");
  /* stdout carries the address (with stdio, the protocol itself): every log
   * message, debug ones included (G_MESSAGES_DEBUG=fusebox), goes to
   * stderr, where GLib would print debug and info on stdout. */
  g_log_writer_default_set_use_stderr (TRUE);
  status = parse_serve_args (argc, argv, &c);
  if (status < 0)
    status = prepare_run (&c, &run);
  if (status >= 0)
    return status;

  signal (SIGPIPE, SIG_IGN);
  loop = s.loop = g_main_loop_new (NULL, FALSE);
  /* Above every other source: a stop request is served even if some
   * source of high priority were ready at every iteration (a bug, but one
   * that must not make the server unkillable but by SIGKILL). */
  sig_ids[0] = g_unix_signal_add_full (G_PRIORITY_HIGH - 10, SIGINT, on_signal, loop, NULL);
  sig_ids[1] = g_unix_signal_add_full (G_PRIORITY_HIGH - 10, SIGTERM, on_signal, loop, NULL);
  sig_ids[2] = g_unix_signal_add_full (G_PRIORITY_HIGH - 10, SIGHUP, on_signal, loop, NULL);

  status = start_server (&c, run, &s);
  if (status < 0)
    {
      g_main_loop_run (loop);
      status = FB_EXIT_OK;
    }

  g_clear_handle_id (&s.stdio_id, g_source_remove);
  g_clear_pointer (&s.listener, fb_rpc_listener_free);
  g_clear_pointer (&s.server, fb_rpc_server_free);
  /* the sessions' private /tmp and HOME (RUN_DIR/sessions/ID) go with the
   * server, as a run's private sources go with it: nothing of them is
   * left on the host; through the directory's descriptor, as made */
  if (fb_run_get_dir_fd (run) >= 0)
    {
      int r = fb_cmd_remove_tree_since (fb_run_get_dir_fd (run), "sessions", fb_run_get_made (run));
      if (r == -EEXIST)
        fb_cmd_error ("serve: left %s/sessions: it holds entries made before the server began, which a sandbox "
                      "that sees the run directory moved in; look at them, then remove them yourself",
                      fb_run_get_dir (run));
      else if (r < 0)
        fb_cmd_error ("serve: removing the sessions' private directories in %s/sessions: %s; remove them with "
                      "'fusebox runs --prune'",
                      fb_run_get_dir (run), g_strerror (-r));
    }
  if (!fb_cmd_close_run_log (run, "serve", "the server"))
    status = FB_EXIT_FAILURE;
  if (!fb_run_end (run, status, &error))
    fb_cmd_error ("serve: can't write run.json: %s", error->message);
  for (guint i = 0; i < G_N_ELEMENTS (sig_ids); i++)
    g_source_remove (sig_ids[i]);
  return status;
}
