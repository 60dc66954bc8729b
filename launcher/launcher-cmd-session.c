/* fusebox run --session NAME — commands that share a kept view: the
 * command's side, and `fusebox session list|stop`.
 *
 *   fusebox run --session NAME [RUN OPTIONS] -- COMMAND [ARG...]
 *   fusebox session list
 *   fusebox session stop NAME
 *
 * A session is a daemon that keeps one view alive
 * (launcher-session-daemon.c): a FUSE connection served by it, mounted in
 * namespaces a keeper made (FbLauncherPlan .keep_view), so that the
 * kernel's dentry, attribute and page caches and the session's private
 * /tmp and HOME outlive each command.  Each `run --session` is still a run
 * of its own: its run directory, policy.json, run.json and access log, its
 * sandbox (fresh namespaces below the view's, FbLauncherPlan.join_*), pid
 * 1, lock-down, signals and exit status, and this process is that
 * sandbox's supervisor, as for any run; only the view is the session's.
 * The first command of a session starts it (fb_session_daemon_start).
 *
 * The command's sandbox is the one the session made ahead, when the daemon
 * has one waiting and the caller may have it (launcher-session-ready.c:
 * the daemon's launch helper is its parent, and signals and the exit
 * status go through the daemon, supervise_ready), or else one of its own
 * that joins the view's namespaces (supervise).  The messages, and whom a
 * client trusts to be its session's daemon: launcher-session-wire.c.
 *
 * Threads: the client is single-threaded (it spawns the sandbox). */
#include "ipc/ipc-process-launch.h"
#include "ipc/ipc.h"
#include "launcher/launcher-cmd-run.h"
#include "launcher/launcher-private.h"
#include "launcher/launcher-session.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* --- the command's supervisor ------------------------------------------------------ */

/* Why the command ended other than by itself, said at the end. */
typedef enum
{
  END_SELF,
  END_LOG_FULL,
  END_STOPPED,
  END_DAEMON_GONE,
} End;

/* Until the sandbox is gone: signals forwarded, the daemon's word heeded.
 * The command's exit status. */
static int
supervise (FbLauncherChild *child, int ctl, End *ret_end, char *why, gsize why_size)
{
  int pidfd = fb_launcher_child_get_pidfd (child);
  int code = FB_LAUNCHER_EXIT_SANDBOX;
  int sfd = fb_cmd_run_signalfd ();

  *ret_end = END_SELF;
  for (;;)
    {
      struct pollfd p[3] = { { sfd, POLLIN, 0 }, { pidfd, POLLIN, 0 }, { ctl, POLLIN, 0 } };
      int n = poll (p, 3, pidfd >= 0 ? -1 : 50);

      if (n < 0 && errno != EINTR)
        break;
      if (fb_launcher_child_try_wait (child, &code) == 0)
        break;
      if (n > 0 && (p[0].revents & POLLIN))
        {
          struct signalfd_siginfo si;
          while (read (sfd, &si, sizeof si) == (ssize_t)sizeof si)
            fb_launcher_child_kill (child, (int)si.ssi_signo);
        }
      if (n > 0 && p[2].revents != 0 && ctl >= 0)
        {
          Msg m;
          int fds[MSG_FDS_MAX];
          int r = fb_session_recv (ctl, &m, fds);
          fb_session_close_fds (fds);
          if (r <= 0 || m.type == MSG_LOG_FULL || m.type == MSG_STOPPING)
            {
              /* the view goes, or the log's budget is spent: the command
               * is stopped, as `run` stops it */
              *ret_end = r <= 0 ? END_DAEMON_GONE : m.type == MSG_LOG_FULL ? END_LOG_FULL : END_STOPPED;
              if (r > 0 && m.type == MSG_STOPPING)
                g_strlcpy (why, m.text, why_size);
              fb_launcher_child_kill (child, SIGKILL);
              if (r <= 0)
                ctl = -1;
            }
        }
    }
  if (sfd >= 0)
    close (sfd);
  return code;
}

/* The same for a command in the session's ready sandbox, whose parent is
 * the daemon's launch helper: signals go to it through the daemon, which
 * stops it itself when the log's budget is spent or the session stops;
 * EXITED brings its status, and *RET_FAILURE what kept it from starting.
 * If the daemon goes, the helper sees its end and kills the sandbox. */
static int
supervise_ready (int ctl, End *ret_end, char *why, gsize why_size, char **ret_failure)
{
  int code = FB_LAUNCHER_EXIT_SANDBOX;
  int sfd = fb_cmd_run_signalfd ();

  *ret_end = END_SELF;
  for (;;)
    {
      struct pollfd p[2] = { { sfd, POLLIN, 0 }, { ctl, POLLIN, 0 } };
      int n = poll (p, 2, -1);
      Msg m;
      int fds[MSG_FDS_MAX], r;

      if (n < 0 && errno != EINTR)
        break;
      if (n > 0 && (p[0].revents & POLLIN))
        {
          struct signalfd_siginfo si;
          while (read (sfd, &si, sizeof si) == (ssize_t)sizeof si)
            {
              Msg sig = { .type = MSG_SIGNAL, .n1 = si.ssi_signo };
              fb_session_send (ctl, &sig, NULL, 0);
            }
        }
      if (n <= 0 || p[1].revents == 0)
        continue;
      r = fb_session_recv (ctl, &m, fds);
      fb_session_close_fds (fds);
      if (r <= 0)
        {
          *ret_end = END_DAEMON_GONE;
          break;
        }
      if (m.type == MSG_EXITED)
        {
          code = (int)m.n1;
          if (m.text[0] != '\0')
            *ret_failure = g_strdup (m.text);
          break;
        }
      if (m.type == MSG_LOG_FULL)
        *ret_end = END_LOG_FULL;
      else if (m.type == MSG_STOPPING)
        {
          *ret_end = END_STOPPED;
          g_strlcpy (why, m.text, why_size);
        }
    }
  if (sfd >= 0)
    close (sfd);
  return code;
}

/* The command for the ready sandbox (FDS: a sealed memfd of its argv,
 * environment, working directory and umask, then dups of our stdin,
 * stdout and stderr, then the daemon's proof PROOF opened through its
 * /proc/PID/fd, -1 if we may not: the daemon then says why); false when
 * it can't go there (a standard stream is
 * closed, or the command is past execve's bounds: the sandbox of its own
 * says what the kernel says). */
static bool
ready_command (const RunOptions *o, const Run *run, int ctl, guint64 proof, int fds[MSG_FDS_MAX])
{
  struct ucred cred;
  socklen_t len = sizeof cred;
  extern char **environ;
  const char *why;
  mode_t mask = umask (0);
  FbLaunchSpec spec = { .uid = FB_LAUNCH_ID_CALLER,
                        .gid = FB_LAUNCH_ID_CALLER,
                        .umask = (guint32)mask,
                        .argv = (char **)o->command,
                        .envp = run->envp != NULL ? run->envp : environ,
                        .cwd = run->cwd != NULL ? run->cwd : (char *)"/" };

  umask (mask);
  for (int i = 0; i < MSG_FDS_MAX; i++)
    fds[i] = -1;
  if (fb_launch_spec_seal (&spec, false, &fds[0], &why) < 0)
    return false;
  for (int i = 0; i < 3; i++)
    if ((fds[i + 1] = fcntl (i, F_DUPFD_CLOEXEC, 3)) < 0)
      {
        fb_session_close_fds (fds);
        return false;
      }
  /* a memfd, never past 0-2 (a daemon's streams): opening a pipe or a
   * terminal could wait, or take a controlling terminal */
  if (proof > 2 && proof <= G_MAXINT && getsockopt (ctl, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0)
    {
      g_autofree char *path = g_strdup_printf ("/proc/%d/fd/%d", (int)cred.pid, (int)proof);
      struct stat st;

      fds[4] = open (path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      if (fds[4] >= 0 && (fstat (fds[4], &st) < 0 || !S_ISREG (st.st_mode)))
        fb_fd_close (&fds[4]);
    }
  /* our own environment and directory, from which the quick client's
   * next command gets what this one gets */
  if (o->quick_shape && fds[4] >= 0)
    {
      /* getcwd(3), as the quick client: not $PWD, which GLib prefers */
      char own_cwd[PATH_MAX];
      FbLaunchSpec own = { .uid = FB_LAUNCH_ID_CALLER,
                           .gid = FB_LAUNCH_ID_CALLER,
                           .umask = (guint32)mask,
                           .argv = (char **)o->command,
                           .envp = environ,
                           .cwd = own_cwd };

      if (getcwd (own_cwd, sizeof own_cwd) == NULL || fb_launch_spec_seal (&own, false, &fds[5], &why) < 0)
        fds[5] = -1;
    }
  return true;
}

/* The run's end as the daemon tells it: CLOSED's counts in run.json. */
static int
finish (Run *run, int ctl, End end, const char *why, int status, const char *name)
{
  JsonObject *info = fb_run_get_info (run->run);
  Msg m = { 0 };
  int fds[MSG_FDS_MAX];

  if (ctl >= 0 && fb_session_send_type (ctl, MSG_ENDED) == 0 && fb_session_await (ctl, &m, fds) > 0 &&
      m.type == MSG_CLOSED)
    {
      json_object_set_int_member (info, "records", (gint64)m.n1);
      json_object_set_int_member (info, "denials", (gint64)m.n2);
      if (m.text[0] != '\0')
        {
          json_object_set_string_member (info, "log_error", m.text);
          fb_cmd_error ("run: the access log %s could not be completed: %s", fb_run_get_log_path (run->run), m.text);
        }
      if (m.log_full)
        {
          g_autofree char *msg =
            fb_cmd_log_full_message ("the sandbox", fb_run_get_log_path (run->run), run->log_max_size, m.n3);
          fb_cmd_error ("run: %s", msg);
          fb_run_set_error (run->run, msg, NULL);
          status = FB_LAUNCHER_EXIT_SANDBOX;
        }
    }
  if (end == END_STOPPED || end == END_DAEMON_GONE)
    {
      g_autofree char *msg =
        g_strdup_printf ("the session %s %s%s%s; the command was stopped", name,
                         end == END_STOPPED ? "was stopped" : "ended under it", why[0] != '\0' ? ": " : "", why);
      fb_cmd_error ("run: %s", msg);
      fb_run_set_error (run->run, msg, NULL);
      status = FB_LAUNCHER_EXIT_SANDBOX;
    }
  return status;
}

/* REGISTER: the command's pid namespace, the socket its sandbox listens
 * on for the proxy when the policy has an allowlist, and the command's
 * --resolve entries (checked to fit by resolve_text). */
static int
send_register (int ctl, FbLauncherChild *child, int pidns, const char *resolve)
{
  int fds[2] = { pidns, fb_launcher_child_take_proxy_fd (child) };
  Msg m = { .type = MSG_REGISTER };
  int r;

  g_strlcpy (m.text, resolve, sizeof m.text);
  r = fb_session_send (ctl, &m, fds, fds[1] >= 0 ? 2 : 1);

  if (fds[1] >= 0)
    close (fds[1]);
  return r;
}

/* JOINED's descriptors: the view's user namespace, made by our uid, and
 * its mount namespace. */
static bool
view_namespaces_ok (const int fds[2])
{
  uid_t owner;

  return ioctl (fds[0], NS_GET_NSTYPE) == CLONE_NEWUSER && ioctl (fds[1], NS_GET_NSTYPE) == CLONE_NEWNS &&
         ioctl (fds[0], NS_GET_OWNER_UID, &owner) == 0 && owner == geteuid ();
}
/* The client's side of in_runs_root: --run-dir DIR would be made (or is)
 * directly in the runs root. */
static bool
run_dir_in_runs_root (const char *run_dir)
{
  g_autofree char *runs_root = fb_run_dir_root ();
  g_autofree char *dir = g_canonicalize_filename (run_dir, NULL);
  g_autofree char *parent = g_path_get_dirname (dir);
  struct stat a, b;

  /* (no root yet: the first run makes it, and DIR in it) */
  if (stat (runs_root, &b) < 0)
    return errno == ENOENT && strcmp (parent, runs_root) == 0;
  return stat (parent, &a) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int
fb_cmd_run_session (const RunOptions *o, Run *run)
{
  g_autoptr (FbCmdTerminal) terminal = NULL;
  g_autoptr (FbLauncherChild) child = NULL;
  const char *name = o->session;
  FbPolicy *policy;
  FbLauncherPlan plan;
  Msg m = { 0 }, join = { .type = MSG_JOIN };
  int fds[MSG_FDS_MAX] = { -1, -1, -1, -1, -1, -1 }, command_fds[MSG_FDS_MAX], pidns = -1, ctl, status, r;
  guint64 proof;
  JsonObject *info;
  End end = END_SELF;
  char stop_why[sizeof m.text] = "";
  /* the command's --resolve entries, for the proxy the daemon runs */
  g_autofree char *resolve = g_strjoinv ("\n", (char **)o->resolve->pdata);

  if (!fb_session_name_valid (name))
    {
      fb_cmd_error ("run: --session %s: a session's name is 1 to %d letters, digits, '.', '_' or '-', not starting "
                    "with '.'",
                    name, SESSION_NAME_MAX);
      return FB_LAUNCHER_EXIT_SANDBOX;
    }
  if (strlen (resolve) >= sizeof m.text)
    {
      fb_cmd_error ("run: --session %s: the --resolve entries take %zu bytes; a session's command takes up to %zu",
                    name, strlen (resolve), sizeof m.text - 1);
      return FB_LAUNCHER_EXIT_SANDBOX;
    }
  /* its run directory where the session's view hides it (in_runs_root):
   * refused before anything is made */
  if (o->run_dir != NULL && !run_dir_in_runs_root (o->run_dir))
    {
      g_autofree char *runs_root = fb_run_dir_root ();
      fb_cmd_error ("run: --session %s: --run-dir %s is not in fusebox's runs directory %s: the session's view was "
                    "made before it, and every command of the session could read and rewrite this command's log; "
                    "leave --run-dir out (`fusebox log RUN` finds the log by its run id), or give %s/NAME",
                    name, o->run_dir, runs_root, runs_root);
      return FB_LAUNCHER_EXIT_SANDBOX;
    }
  if (!fb_session_dir_ok ("run: --session"))
    return FB_LAUNCHER_EXIT_SANDBOX;
  ctl = fb_session_connect (name);
  if (ctl == -EPERM || (ctl < 0 && fb_session_daemon_start (o, name) < 0))
    return FB_LAUNCHER_EXIT_SANDBOX;
  if (ctl < 0)
    ctl = fb_session_connect (name);
  /* a refusal may be waiting already, the connection closed after it:
   * whether HELLO went or not, the answer is read */
  if (ctl >= 0)
    (void)fb_session_send_type (ctl, MSG_HELLO);
  if (ctl >= 0 && fb_session_await (ctl, &m, fds) > 0 && m.type == MSG_REFUSED)
    {
      fb_cmd_error ("run: --session %s: %s", name, m.text);
      close (ctl);
      return FB_LAUNCHER_EXIT_SANDBOX;
    }
  if (ctl < 0 || m.type != MSG_INFO)
    {
      fb_cmd_error ("run: --session %s: its daemon does not answer (%s); stop it with 'fusebox session stop %s'", name,
                    ctl < 0 ? g_strerror (-ctl) : "no answer", name);
      if (ctl >= 0)
        close (ctl);
      return FB_LAUNCHER_EXIT_SANDBOX;
    }

  /* the command's run, under the session's policy: ${RUN}, where the
   * private sources are, is the session's run directory */
  proof = m.n1;
  status = fb_cmd_run_prepare (o, m.text, m.run_id, run);
  if (status >= 0)
    {
      close (ctl);
      return status;
    }
  policy = fb_run_get_policy (run->run);
  fb_session_policy_digest (policy, join.digest);
  join.uid = o->uid == FB_LAUNCHER_ID_CALLER ? geteuid () : o->uid;
  join.gid = o->gid == FB_LAUNCHER_ID_CALLER ? getegid () : o->gid;
  join.level = o->log_level;
  {
    const char *journal_socket;
    join.journal = fb_cmd_log_journal (o->log_journal, policy, &journal_socket);
  }
  join.n1 = run->log_file_size;
  join.n2 = run->log_max_size;
  g_strlcpy (join.run_id, fb_run_get_id (run->run), sizeof join.run_id);
  g_strlcpy (join.text, fb_run_get_log_path (run->run), sizeof join.text);
  g_strlcpy (join.more, resolve, sizeof join.more);
  /* the command comes along, for the sandbox the session made ahead */
  join.ready = ready_command (o, run, ctl, proof, command_fds);
  join.quick = join.ready && command_fds[5] >= 0;
  r = fb_session_send (ctl, &join, command_fds, !join.ready ? 0 : join.quick ? 6 : command_fds[4] >= 0 ? 5 : 4);
  fb_session_close_fds (command_fds);
  if (r < 0 || fb_session_await (ctl, &m, fds) <= 0 ||
      (m.type == MSG_JOINED ? fds[1] < 0 || !view_namespaces_ok (fds) : m.type != MSG_STARTED))
    {
      const char *why = m.type == MSG_REFUSED ? m.text
                        : m.type == MSG_JOINED && fds[1] >= 0
                          ? "its daemon handed over namespaces that are not a user namespace of ours and a mount "
                            "namespace: stop it with 'fusebox session stop', and see who runs it"
                          : "its daemon does not answer";
      fb_session_close_fds (fds);
      fb_cmd_error ("run: --session %s: %s", name, why);
      fb_run_set_error (run->run, why, NULL);
      close (ctl);
      return FB_LAUNCHER_EXIT_SANDBOX;
    }

  info = fb_run_get_info (run->run);
  json_object_set_boolean_member (info, "ready_sandbox", m.type == MSG_STARTED);
  if (m.type == MSG_JOINED && join.ready && m.more[0] != '\0')
    json_object_set_string_member (info, "ready_sandbox_why", m.more);
  terminal = fb_cmd_terminal_save ();
  signal (SIGPIPE, SIG_IGN);
  if (m.type == MSG_STARTED)
    {
      g_autofree char *failure = NULL;

      status = supervise_ready (ctl, &end, stop_why, sizeof stop_why, &failure);
      if (failure != NULL)
        {
          fb_cmd_error ("run: %s", failure);
          fb_run_set_error (run->run, failure, NULL);
        }
      fb_cmd_terminal_restore (terminal);
      status = finish (run, ctl, end, stop_why, status, name);
      close (ctl);
      json_object_set_int_member (info, "exit_status", status);
      return status;
    }
  fb_cmd_run_plan (o, run, &plan);
  plan.join_userns_fd = fds[0];
  plan.join_mntns_fd = fds[1];
  r = fb_launcher_spawn (&plan, &child);
  close (fds[0]);
  close (fds[1]);
  if (r < 0)
    {
      FbLauncherFailure f = { .step = FB_LAUNCHER_STEP_CLONE, .error = -r };
      g_autofree char *msg = fb_launcher_describe_failure (&plan, &f);
      fb_cmd_error ("run: %s", msg);
      fb_run_set_error (run->run, msg, "clone");
      status = FB_LAUNCHER_EXIT_SANDBOX;
    }
  /* its pid namespace to the daemon before anything runs in it */
  else if (fb_launcher_child_wait_joined (child, &pidns) < 0 || send_register (ctl, child, pidns, resolve) < 0 ||
           fb_session_await (ctl, &m, fds) <= 0 || m.type != MSG_GO || fb_launcher_child_go (child) < 0 ||
           fb_launcher_child_wait_exec (child) < 0)
    {
      int code = FB_LAUNCHER_EXIT_SANDBOX;
      if (m.type == MSG_REFUSED)
        {
          fb_cmd_error ("run: --session %s: %s", name, m.text);
          fb_run_set_error (run->run, m.text, NULL);
          status = code;
        }
      else
        {
          fb_launcher_child_kill (child, SIGKILL);
          fb_launcher_child_wait (child, &code);
          status = fb_cmd_run_report_failure (run, child, code, true);
        }
    }
  else
    {
      status = supervise (child, ctl, &end, stop_why, sizeof stop_why);
      if (fb_launcher_child_get_failure (child) != NULL)
        status = fb_cmd_run_report_failure (run, child, status, true);
    }
  if (pidns >= 0)
    close (pidns);
  /* nothing of the sandbox is left (freeing it kills and reaps one still there) */
  g_clear_pointer (&child, fb_launcher_child_free);
  fb_cmd_terminal_restore (terminal);
  status = finish (run, ctl, end, stop_why, status, name);
  close (ctl);
  json_object_set_int_member (fb_run_get_info (run->run), "exit_status", status);
  return status;
}

/* --- fusebox session list|stop ------------------------------------------------------ */

static int
session_usage (FILE *out, int status)
{
  fprintf (out, "Usage: fusebox session list\n"
                "       fusebox session stop NAME\n"
                "\n"
                "The sessions of 'fusebox run --session NAME': each keeps one view for the\n"
                "commands run in it.  list names them; stop ends one now, and the commands\n"
                "running in it (status 125).  Manual: fusebox(1).\n");
  return status;
}

int
fb_cmd_session (int argc, char **argv)
{
  g_autofree char *root = fb_run_sessions_root ();

  /* -h or --help anywhere: `session stop --help` asks, it names no session */
  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "-h") == 0 || strcmp (argv[i], "--help") == 0)
      return session_usage (stdout, FB_EXIT_OK);
  /* nothing on another user's FUSE filesystem is looked at, listed or
   * connected to (its server may never answer) */
  if ((argc == 2 && strcmp (argv[1], "list") == 0) || (argc == 3 && strcmp (argv[1], "stop") == 0))
    {
      g_autoptr (GError) error = NULL;

      if (!fb_path_check_not_foreign_fuse (root, "the sessions' directory",
                                           "set XDG_STATE_HOME to a directory of your own", &error))
        {
          fb_cmd_error ("session %s: %s", argv[1], error->message);
          return FB_EXIT_FAILURE;
        }
    }
  if (argc == 2 && strcmp (argv[1], "list") == 0)
    {
      g_autoptr (GDir) dir = g_dir_open (root, 0, NULL);

      for (const char *e; dir != NULL && (e = g_dir_read_name (dir)) != NULL;)
        if (g_str_has_suffix (e, ".sock"))
          {
            g_autofree char *name = g_strndup (e, strlen (e) - 5);
            Msg m;
            int fds[MSG_FDS_MAX], fd = fb_session_connect (name);
            if (fd >= 0 && fb_session_send_type (fd, MSG_HELLO) == 0 && fb_session_await (fd, &m, fds) > 0 &&
                m.type == MSG_INFO)
              fb_cmd_print (stdout, "%s\t%u running\t%s\n", name, m.running, m.run_id);
            if (fd >= 0)
              close (fd);
          }
      return FB_EXIT_OK;
    }
  if (argc == 3 && strcmp (argv[1], "stop") == 0)
    {
      Msg m;
      int fds[MSG_FDS_MAX], fd;

      if (!fb_session_name_valid (argv[2]) || (fd = fb_session_connect (argv[2])) < 0)
        {
          fb_cmd_error ("session stop: no session %s runs ('fusebox session list' names them)", argv[2]);
          return FB_EXIT_FAILURE;
        }
      /* it ends, and hangs up on us; or it refuses us, saying why (another
       * mount namespace, another root, too many connections) */
      g_autofree char *refused = NULL;
      fb_session_send_type (fd, MSG_STOP);
      while (fb_session_await (fd, &m, fds) > 0)
        {
          fb_session_close_fds (fds);
          if (m.type == MSG_REFUSED && refused == NULL)
            refused = g_strndup (m.text, sizeof m.text);
        }
      close (fd);
      if (refused != NULL)
        {
          fb_cmd_error ("session stop %s: %s; it goes on", argv[2], refused);
          return FB_EXIT_FAILURE;
        }
      return FB_EXIT_OK;
    }
  fb_cmd_error ("session: give list, or stop NAME");
  return session_usage (stderr, FB_EXIT_USAGE);
}
