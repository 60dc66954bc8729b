/* fusebox run --session — the session daemon's side of the quick client
 * (launcher-front.c): a `run --session NAME -- COMMAND` that sends only its
 * command, environment and directory, and has its command run in the
 * ready sandbox as a full client's would have been.
 *
 * What a full client settled, for the next caller with the same
 * environment and working directory: `run --session NAME -- COMMAND`
 * with no other option computes its policy, the command's environment
 * and directory, and run.json's description of it from these alone (and
 * from what the session fixed: its policy's digest, ids, log level).  So
 * the quick client, which sends its command, environment and directory,
 * gets exactly what the full client got for them, with the daemon
 * making the command's run; any other caller is told NOT_QUICK and runs
 * the full client.  Kept for the session's life, QUICK_MAX of them. */
#include "ipc/ipc-process-launch.h"
#include "launcher/launcher-session-daemon.h"
#include "policy/util.h"

#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#define QUICK_MAX 4

struct Quick
{
  char **environ;    /* the caller's own */
  char *cwd;         /* the caller's working directory */
  char **envp;       /* the command's environment, as the client built it */
  char *command_cwd; /* the command's working directory, as it picked it */
  JsonObject *info;  /* run.json's members that every such command shares */
  guint32 journal;
  guint64 log_file, log_max;
};

void
fb_session_quick_free (Quick *q)
{
  g_strfreev (q->environ);
  g_free (q->cwd);
  g_strfreev (q->envp);
  g_free (q->command_cwd);
  g_clear_pointer (&q->info, json_object_unref);
  g_free (q);
}

/* run.json's members that describe the session and the policy, not the
 * command: copied from the full client's */
static const char *const quick_members[] = { "kind",    "network",     "uid",       "gid",
                                             "session", "session_run", "workspace", "policy" };

/* A full client's JOIN went to the ready sandbox (M: with the quick
 * client's command line; SPEC_FD: the command as it built it; OWN_FD: its
 * own environment and directory; INFO: its run.json): learn it. */
/* The newest of what was learned for SPEC's caller (its environment and
 * working directory, byte for byte): its index, or -1. */
static int
quick_find (Daemon *d, const FbLaunchSpec *spec)
{
  for (guint i = d->quicks->len; i > 0; i--)
    {
      const Quick *q = g_ptr_array_index (d->quicks, i - 1);
      if (strcmp (q->cwd, spec->cwd) == 0 &&
          g_strv_equal ((const char *const *)q->environ, (const char *const *)spec->envp))
        return (int)i - 1;
    }
  return -1;
}

void
fb_session_quick_learn (Daemon *d, const Msg *m, int spec_fd, int own_fd, JsonObject *info)
{
  g_auto (FbLaunchSpec) spec = { 0 };
  g_auto (FbLaunchSpec) own = { 0 };
  g_autofree char *runs_root = fb_run_dir_root ();
  g_autofree char *log_dir = g_path_get_dirname (m->text);
  g_autofree char *log_root = g_path_get_dirname (log_dir);
  const char *why;
  Quick *q;
  int found;

  if (spec_fd < 0 || own_fd < 0 || info == NULL || fb_launch_spec_decode (spec_fd, false, &spec, &why) < 0 ||
      fb_launch_spec_decode (own_fd, false, &own, &why) < 0 || strcmp (runs_root, log_root) != 0)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (quick_members); i++)
    if (!json_object_has_member (info, quick_members[i]))
      return;
  if ((found = quick_find (d, &own)) >= 0)
    g_ptr_array_remove_index (d->quicks, (guint)found);
  if (d->quicks->len >= QUICK_MAX)
    g_ptr_array_remove_index (d->quicks, 0);
  q = g_new0 (Quick, 1);
  q->environ = g_steal_pointer (&own.envp);
  q->cwd = g_steal_pointer (&own.cwd);
  q->envp = g_steal_pointer (&spec.envp);
  q->command_cwd = g_steal_pointer (&spec.cwd);
  q->info = json_object_new ();
  for (guint i = 0; i < G_N_ELEMENTS (quick_members); i++)
    json_object_set_member (q->info, quick_members[i], json_object_dup_member (info, quick_members[i]));
  q->journal = m->journal;
  q->log_file = m->n1;
  q->log_max = m->n2;
  g_ptr_array_add (d->quicks, q);
}

/* The client has hung up (a QUICK it sent before it gave up waiting). */
static bool
peer_gone (int fd)
{
  struct pollfd p = { .fd = fd, .events = POLLRDHUP };

  return poll (&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

static void not_quick (Conn *c, const char *format, ...) G_GNUC_PRINTF (2, 3);

static void
not_quick (Conn *c, const char *format, ...)
{
  va_list ap;

  va_start (ap, format);
  fb_session_daemon_send_text (c, MSG_NOT_QUICK, format, ap);
  va_end (ap);
}

/* The run of a quick client's command SPEC, as Q's full client made
 * its own: the run directory, policy.json (the session's effective
 * policy, which the digest made the command's), run.json with the caller
 * as its supervisor. */
static FbRun *
quick_run_new (Daemon *d, const Quick *q, const FbLaunchSpec *spec, pid_t caller, GError **error)
{
  JsonObject *info;
  JsonArray *cmd = json_array_new ();
  FbRunOptions ro = { .kind = FB_RUN_KIND_RUN,
                      .workspace = json_object_get_string_member_with_default (q->info, "workspace", NULL) };
  FbRun *run = fb_run_new (&ro);

  if (!fb_run_create (run, d->policy, error))
    {
      fb_run_free (run);
      json_array_unref (cmd);
      return NULL;
    }
  info = fb_run_get_info (run);
  for (char **a = spec->argv; *a != NULL; a++)
    json_array_add_string_element (cmd, *a);
  json_object_set_array_member (info, "command", cmd);
  json_object_set_string_member (info, "cwd", q->command_cwd);
  for (guint i = 0; i < G_N_ELEMENTS (quick_members); i++)
    if (strcmp (quick_members[i], "kind") != 0)
      json_object_set_member (info, quick_members[i], json_object_dup_member (q->info, quick_members[i]));
  json_object_set_boolean_member (info, "ready_sandbox", TRUE);
  json_object_set_boolean_member (info, "quick", TRUE);
  if (!fb_run_start_as (run, caller, error))
    {
      fb_run_free (run);
      return NULL;
    }
  return run;
}

/* QUICK (FDS: the caller's command, environment, directory and umask in
 * a sealed memfd; its stdin, stdout, stderr; the proof as it opened it):
 * into the ready sandbox as a full client's JOIN would have put it, or
 * NOT_QUICK with why, and the caller runs the full client instead,
 * nothing made. */
void
fb_session_quick_start (Conn *c, int fds[MSG_FDS_MAX])
{
  Daemon *d = c->d;
  g_auto (FbLaunchSpec) spec = { 0 };
  g_autoptr (GError) error = NULL;
  g_autofree char *why = NULL;
  FbAccessLogOptions lo = { 0 };
  struct ucred cred;
  socklen_t len = sizeof cred;
  const char *bad = NULL;
  const Quick *q = NULL;
  int found, sent[MSG_FDS_MAX] = { -1, -1, -1, -1, -1, -1 };
  Msg started = { .type = MSG_STARTED };

  if (c->run_id != NULL || d->stopping)
    {
      not_quick (c, "the session is ending");
      return;
    }
  if (fds[0] < 0 || fds[3] < 0 || fb_launch_spec_decode (fds[0], false, &spec, &bad) < 0 ||
      spec.uid != FB_LAUNCH_ID_CALLER || spec.gid != FB_LAUNCH_ID_CALLER || spec.umask > 0777)
    {
      not_quick (c, "its command is malformed: %s", bad != NULL ? bad : "descriptors or ids");
      return;
    }
  found = quick_find (d, &spec);
  if (found >= 0)
    q = g_ptr_array_index (d->quicks, (guint)found);
  if (q == NULL)
    {
      not_quick (c, "no command with this environment and directory ran in it yet");
      return;
    }
  if (fb_session_daemon_running (d) >= SESSION_COMMANDS_MAX)
    {
      not_quick (c, "it runs %d commands", SESSION_COMMANDS_MAX);
      return;
    }
  if (getsockopt (c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || !fb_session_daemon_ready_for (c, fds[4], &why))
    {
      not_quick (c, "%s", why != NULL ? why : "its caller is unknown");
      return;
    }
  c->quick_status = FB_LAUNCHER_EXIT_SANDBOX;
  c->quick_log_max = q->log_max;
  c->quick_run = quick_run_new (d, q, &spec, cred.pid, &error);
  if (c->quick_run == NULL)
    {
      not_quick (c, "its run could not be made: %s", error->message);
      return;
    }
  lo.path = fb_run_get_log_path (c->quick_run);
  lo.run_id = fb_run_get_id (c->quick_run);
  lo.coalesce = TRUE;
  lo.write_through = TRUE;
  lo.rotate_bytes = q->log_file;
  lo.max_bytes = q->log_max;
  lo.on_full = fb_session_daemon_on_log_full;
  lo.on_full_data = c;
  lo.journal = q->journal != 0;
  lo.journal_socket = g_getenv ("FUSEBOX_JOURNAL_SOCKET");
  c->log = fb_access_log_new (&lo, NULL, &error);
  c->run_id = g_strdup (fb_run_get_id (c->quick_run));
  if (c->log == NULL)
    why = g_strdup_printf ("the command's access log %s could not be opened: %s", lo.path, error->message);
  else
    {
      /* its own argv and umask; the environment and directory the full
       * client built for this caller */
      FbLaunchSpec cmd = { .uid = FB_LAUNCH_ID_CALLER,
                           .gid = FB_LAUNCH_ID_CALLER,
                           .umask = spec.umask,
                           .argv = spec.argv,
                           .envp = q->envp,
                           .cwd = q->command_cwd };

      g_clear_handle_id (&d->idle_id, g_source_remove);
      if (peer_gone (c->fd))
        why = g_strdup ("its client went away before the command was sent (it waited too long for the daemon)");
      else if (fb_launch_spec_seal (&cmd, false, &sent[0], &bad) < 0)
        why = g_strdup_printf ("its command could not be sealed: %s", bad);
      else
        {
          for (int i = 1; i < 4; i++)
            sent[i] = fds[i];
          (void)fb_session_daemon_run_ready_granted (c, sent, "", &why);
        }
      fb_fd_close (&sent[0]);
    }
  if (c->member == NULL || c->ready == NULL)
    {
      /* made, not run: its run says so, and the caller runs the full
       * client, whose run is another */
      fb_run_set_error (c->quick_run, why != NULL ? why : "it could not be run", NULL);
      fb_run_end (c->quick_run, FB_LAUNCHER_EXIT_SANDBOX, NULL);
      if (c->log != NULL)
        {
          fb_access_log_close (c->log, NULL);
          g_clear_pointer (&c->log, fb_access_log_free);
        }
      g_clear_pointer (&c->quick_run, fb_run_free);
      g_clear_pointer (&c->run_id, g_free);
      not_quick (c, "%s", why != NULL ? why : "it could not be run");
      fb_session_daemon_maybe_idle (d);
      return;
    }
  g_strlcpy (started.run_id, c->run_id, sizeof started.run_id);
  fb_session_send (c->fd, &started, NULL, 0);
  fb_session_daemon_ready_later (d, READY_AFTER_MS);
}

/* A quick client's run ends here, as the full client's finish() ends its
 * own: its status (125 when the log's budget was spent or the session
 * stopped), what is said, run.json's end; into CLOSED (M). */
void
fb_session_quick_end (Conn *c, Msg *m)
{
  g_autoptr (GString) say = g_string_new (NULL);
  g_autoptr (GError) error = NULL;
  JsonObject *info = fb_run_get_info (c->quick_run);
  const char *log_path = fb_run_get_log_path (c->quick_run);
  int status = c->quick_status;

  json_object_set_int_member (info, "records", (gint64)m->n1);
  json_object_set_int_member (info, "denials", (gint64)m->n2);
  if (c->quick_failure != NULL)
    {
      g_string_append_printf (say, "%s\n", c->quick_failure);
      fb_run_set_error (c->quick_run, c->quick_failure, NULL);
    }
  if (m->text[0] != '\0')
    {
      json_object_set_string_member (info, "log_error", m->text);
      g_string_append_printf (say, "the access log %s could not be completed: %s\n", log_path, m->text);
    }
  if (m->log_full)
    {
      g_autofree char *msg = fb_cmd_log_full_message ("the sandbox", log_path, c->quick_log_max, m->n3);
      g_string_append_printf (say, "%s\n", msg);
      fb_run_set_error (c->quick_run, msg, NULL);
      status = FB_LAUNCHER_EXIT_SANDBOX;
    }
  /* ended other than by itself: its status is ours to give (a command
   * that exited first keeps its own, whatever came after) */
  if (c->stopped || !c->exited)
    {
      g_autofree char *msg =
        c->stopped  ? g_strdup_printf ("the session %s was stopped%s%s; the command was stopped", c->d->name,
                                      c->d->stop_why != NULL ? ": " : "", c->d->stop_why != NULL ? c->d->stop_why : "")
        : c->fd < 0 ? g_strdup ("its client went away; the command was killed")
                    : g_strdup ("its client ended it before it exited; the command was killed");
      if (c->fd >= 0)
        g_string_append_printf (say, "%s\n", msg);
      fb_run_set_error (c->quick_run, msg, NULL);
      status = FB_LAUNCHER_EXIT_SANDBOX;
    }
  json_object_set_int_member (info, "exit_status", status);
  if (!fb_run_end (c->quick_run, status, &error))
    g_string_append_printf (say, "%s\n", error->message);
  m->status = status;
  g_strlcpy (m->more, say->str, sizeof m->more);
}
