/* fusebox run --session — the session's daemon: it keeps one view alive
 * for the commands of a session, and runs each command's log.
 *
 * A session is a daemon that keeps one view alive: a FUSE connection
 * served by it, mounted in namespaces a keeper made (FbLauncherPlan
 * .keep_view), so that the kernel's dentry, attribute and page caches and
 * the session's private /tmp and HOME outlive each command.  Each command
 * is still a run of its own, whose supervisor is its `run --session`
 * (launcher-cmd-session.c); only the view is the session's.  The first
 * command of a session starts the daemon (fb_session_daemon_start).
 *
 * Attribution: the daemon serves the view; each record is written to the
 * log of the command that made it (ipc/ipc-view-share.c: the caller's pid
 * namespace is the command's, handed over before anything runs in it), by
 * the FUSE worker itself before it answers (write-through), so `fusebox log
 * RUN`, `report RUN`, run.json's "denials" and the log's budget stay the
 * command's.  A file a command still had open when it ended is closed in
 * its name; the command's log is closed once none is: the kernel sends a
 * file's RELEASE when its last reference drops, asynchronously, so it may
 * come after the command's processes are gone and after its ENDED, and
 * the worker that wrote that file's close record tells the loop
 * (fb_view_member_end_notify, on_files_released).  Past LINGER_MS the
 * client is answered with what the log holds then (run.json's counts),
 * and the log is closed at the release.
 *
 * Who may join: the daemon listens on a SOCK_SEQPACKET socket in
 * fusebox's state directory ($XDG_STATE_HOME/fusebox/sessions/NAME.sock:
 * the directory 0700, the socket 0600, hidden from every view by identity,
 * and from `run`'s views by a rule, fb_run_sessions_root), and takes a peer
 * only with its own uid (SO_PEERCRED) and in its own pid namespace (a
 * process inside any sandbox is in another): so no command, however it
 * came by the socket, reaches the session's control channel.  (A client,
 * the other way round, trusts only a daemon of its own:
 * launcher-session-wire.c.)  A command joins only with the session's
 * effective policy (the SHA-256 of its JSON, ${RUN} being the session's
 * run directory), ids and log level: another is refused with what
 * differs.
 *
 * Bounds: SESSION_COMMANDS_MAX commands at once in a session,
 * SESSIONS_MAX sessions of a user; a session without a command ends after
 * its idle timeout (--session-idle-timeout, default 600 s); `fusebox
 * session stop NAME` ends one now, its running commands with it (status
 * 125).
 *
 * The messages: launcher-session-wire.c.  The quick client's side:
 * launcher-session-quick.c.
 *
 * Threads: the daemon is forked from the first client before any thread,
 * spawns the keeper, then runs the GLib main loop and the view's FUSE
 * workers. */
#include "ipc/ipc-process-launch.h"
#include "ipc/ipc-proxy.h"
#include "ipc/ipc.h"
#include "launcher/launcher-cmd-run.h"
#include "launcher/launcher-private.h"
#include "launcher/launcher-session-daemon.h"
#include "launcher/launcher-session.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* A run.json's size at most (its command's argv and environment are
 * execve's, 2 MiB, escaped). */
#define RUN_JSON_MAX (16 * 1024 * 1024)
/* Connections at once (commands, `session list|stop`): past it, refused. */
#define SESSION_CONNS_MAX (4 * SESSION_COMMANDS_MAX)
#define SESSIONS_MAX 16
/* How long a command's log waits for the files it left open to close. */
#define LINGER_MS 2000
/* How often the daemon looks for its socket's directory entry. */
#define SOCKET_CHECK_S 2

/* --- the daemon and its connections ----------------------------------------------- */

guint
fb_session_daemon_running (Daemon *d)
{
  guint n = 0;

  for (GList *l = d->conns; l != NULL; l = l->next)
    {
      Conn *c = l->data;
      n += c->member != NULL && !c->ended;
    }
  return n;
}

static gboolean
on_idle (gpointer data)
{
  Daemon *d = data;

  d->idle_id = 0;
  g_main_loop_quit (d->loop);
  return G_SOURCE_REMOVE;
}

/* No command runs: the idle timeout starts (a stop ends it at once). */
void
fb_session_daemon_maybe_idle (Daemon *d)
{
  if (d->stopping)
    {
      bool lingering = false;
      for (GList *l = d->conns; l != NULL; l = l->next)
        lingering = lingering || ((Conn *)l->data)->log != NULL;
      if (fb_session_daemon_running (d) == 0 && !lingering)
        g_main_loop_quit (d->loop);
      return;
    }
  if (fb_session_daemon_running (d) == 0 && d->idle_id == 0)
    d->idle_id = g_timeout_add_seconds (d->idle_s, on_idle, d);
}

static void
conn_hangup (Conn *c)
{
  g_clear_handle_id (&c->watch, g_source_remove);
  fb_fd_close (&c->fd);
}

static void
conn_free (Conn *c)
{
  Daemon *d = c->d;

  d->conns = g_list_remove (d->conns, c);
  conn_hangup (c);
  g_clear_handle_id (&c->linger_id, g_source_remove);
  g_clear_pointer (&c->ready, fb_session_ready_free);
  fb_fd_close (&c->proof);
  g_clear_pointer (&c->proxy, fb_proxy_free);
  fb_view_member_end (c->member);
  g_clear_pointer (&c->member, fb_view_member_unref);
  if (c->log != NULL)
    {
      fb_access_log_close (c->log, NULL);
      fb_access_log_free (c->log);
    }
  if (c->parked != NULL)
    {
      g_queue_remove (&d->parked, c);
      g_clear_handle_id (&c->park_id, g_source_remove);
      fb_session_close_fds (c->parked_fds);
      g_clear_pointer (&c->parked, g_free);
    }
  g_clear_pointer (&c->quick_run, fb_run_free);
  g_free (c->quick_failure);
  g_free (c->run_id);
  g_free (c);
}

static void msg_text (Msg *m, const char *format, ...) G_GNUC_PRINTF (2, 3);

static void
msg_text (Msg *m, const char *format, ...)
{
  va_list ap;

  va_start (ap, format);
  g_vsnprintf (m->text, sizeof m->text, format, ap);
  va_end (ap);
}

/* The command's log: closed once none of its files is open in the view
 * (its records all in), and CLOSED says what it holds. */
static void
close_command_log (Conn *c, bool answer_only)
{
  g_autoptr (GError) error = NULL;
  Msg m = { .type = MSG_CLOSED };
  bool full = FALSE;

  if (c->log != NULL)
    {
      guint64 not_written = 0;
      full = fb_access_log_is_full (c->log, &not_written);
      m.n3 = not_written;
      if (!answer_only)
        {
          if (!fb_access_log_close (c->log, &error))
            msg_text (&m, "%s", error->message);
          m.n1 = fb_access_log_get_count (c->log);
          fb_access_log_free (c->log);
          c->log = NULL;
        }
      else
        m.n1 = fb_access_log_get_count (c->log);
    }
  m.n2 = c->member != NULL ? fb_view_member_get_refusals (c->member) : 0;
  m.log_full = full;
  if (c->quick_run != NULL && !c->answered)
    fb_session_quick_end (c, &m);
  if (!c->answered && c->fd >= 0)
    fb_session_send (c->fd, &m, NULL, 0);
  c->answered = true;
}

/* Its command has ended and no file of it is open: its records are all
 * in, the log is closed and CLOSED says what it holds. */
static void
command_done (Conn *c)
{
  Daemon *d = c->d;

  close_command_log (c, false);
  conn_free (c);
  fb_session_daemon_maybe_idle (d);
}

/* Files of the command still open LINGER_MS after its end: its client is
 * answered with what its log holds now; the log stays open for their
 * close records, and is closed at their release (on_files_released). */
static void
on_linger (gpointer data)
{
  Conn *c = data;

  c->linger_id = 0;
  close_command_log (c, true);
}

/* A word about a command from another thread, for the loop, which owns
 * the connections: by its run id, since the connection may be gone by
 * the time the loop reads it. */
typedef struct
{
  Daemon *d;
  char *run_id;
} Note;

static Note *
note_new (Conn *c)
{
  Note *n = g_new0 (Note, 1);

  n->d = c->d;
  n->run_id = g_strdup (c->run_id);
  return n;
}

static void
note_free (Note *n)
{
  g_free (n->run_id);
  g_free (n);
}

static void
close_released (gpointer data)
{
  Note *n = data;

  for (GList *l = n->d->conns; l != NULL; l = l->next)
    {
      Conn *c = l->data;
      if (c->ended && c->log != NULL && g_strcmp0 (c->run_id, n->run_id) == 0)
        {
          command_done (c);
          break;
        }
    }
  note_free (n);
}

/* An ended command's last file is released, its close record written:
 * on the FUSE worker that released it, or, none open, on the loop from
 * command_ended (fb_view_member_end_notify).  DATA: its Note. */
static void
on_files_released (gpointer data)
{
  g_idle_add_once (close_released, data);
}

/* ENDED or EOF: nothing of the command runs any more; its log is closed
 * once the files it left open are released. */
static void
command_ended (Conn *c)
{
  if (c->ended)
    return;
  c->ended = true;
  /* the next command's sandbox, if it waits for this one's end */
  if (c->d->ready_timed && c->d->ready_idle != 0)
    fb_session_daemon_ready_later (c->d, 0);
  /* a command in the ready sandbox whose supervisor is gone is killed,
   * as its own supervisor would have killed it */
  g_clear_pointer (&c->ready, fb_session_ready_free);
  fb_view_member_end (c->member);
  /* the last: the keeper refreshes what they listed now */
  if (fb_session_daemon_running (c->d) == 0 && c->d->serving != NULL)
    fb_fuse_warm_flush (fb_run_fuse_get_fuse (c->d->serving));
  /* its connections' last records, while its log is open */
  g_clear_pointer (&c->proxy, fb_proxy_free);
  if (c->log == NULL || c->member == NULL)
    {
      /* never joined, or never registered: nothing else writes to its log */
      command_done (c);
      return;
    }
  c->linger_id = g_timeout_add_once (LINGER_MS, on_linger, c);
  fb_view_member_end_notify (c->member, on_files_released, note_new (c));
}

static void
tell_log_full (gpointer data)
{
  Note *n = data;

  for (GList *l = n->d->conns; l != NULL; l = l->next)
    {
      Conn *c = l->data;
      if (g_strcmp0 (c->run_id, n->run_id) != 0)
        continue;
      /* the ready sandbox's command is ours to stop */
      if (c->ready != NULL)
        fb_session_ready_signal (c->ready, SIGKILL);
      if (c->fd >= 0)
        fb_session_send_type (c->fd, MSG_LOG_FULL);
    }
  note_free (n);
}

/* From the thread that wrote the record that reached the budget: the
 * command's supervisor is told from the loop. */
void
fb_session_daemon_on_log_full (gpointer data)
{
  g_idle_add_once (tell_log_full, note_new (data));
}

/* A message of TYPE whose text is FORMAT's (REFUSED, NOT_QUICK). */
void
fb_session_daemon_send_text (Conn *c, MsgType type, const char *format, va_list ap)
{
  Msg m = { .type = type };

  g_vsnprintf (m.text, sizeof m.text, format, ap);
  fb_session_send (c->fd, &m, NULL, 0);
}

static void refuse (Conn *c, const char *format, ...) G_GNUC_PRINTF (2, 3);

static void
refuse (Conn *c, const char *format, ...)
{
  va_list ap;

  va_start (ap, format);
  fb_session_daemon_send_text (c, MSG_REFUSED, format, ap);
  va_end (ap);
}

/* --- the ready sandbox (launcher-session-ready.c) -------------------------------- */

static void ready_changed (FbSessionReady *ready, gpointer data);
static void unpark_later (Daemon *d);

static gboolean
ready_start (gpointer data)
{
  Daemon *d = data;
  g_autoptr (GError) error = NULL;
  guint32 network = 0;

  d->ready_idle = 0;
  d->ready_timed = false;
  if (d->ready != NULL || d->stopping || d->launch_helper == NULL || d->ns[0] < 0)
    return G_SOURCE_REMOVE;
  switch (fb_policy_get_network (d->policy))
    {
      case FB_POLICY_NETWORK_NONE:
        network = 0;
        break;
      case FB_POLICY_NETWORK_HOST:
        network = 1;
        break;
      case FB_POLICY_NETWORK_ALLOWLIST:
        network = 2;
        break;
    }
  d->ready = fb_session_ready_start (d->launch_helper, d->ns, d->uid, d->gid, network, ready_changed, d, &error);
  if (d->ready == NULL)
    {
      g_free (d->ready_why);
      d->ready_why = g_strdup (error->message);
      unpark_later (d);
    }
  return G_SOURCE_REMOVE;
}

/* The next command's sandbox, made once the loop is idle (AFTER_MS 0)
 * or AFTER_MS later: at the session's start, after each command's JOIN,
 * so at most one start per command however often one fails.  A command
 * that took the ready sandbox has the next one made READY_AFTER_MS later,
 * or at its end if that comes first (command_ended): made at once, it
 * competed with the command's start and end for the CPU and the loop,
 * which the helper's spawn holds until its exec. */
void
fb_session_daemon_ready_later (Daemon *d, guint after_ms)
{
  if (d->ready != NULL || d->stopping || (d->ready_idle != 0 && (after_ms > 0 || !d->ready_timed)))
    return;
  g_clear_handle_id (&d->ready_idle, g_source_remove);
  d->ready_timed = after_ms > 0;
  d->ready_idle = after_ms > 0 ? g_timeout_add_full (G_PRIORITY_LOW, after_ms, ready_start, d, NULL)
                               : g_idle_add_full (G_PRIORITY_LOW, ready_start, d, NULL);
}

static void
ready_changed (FbSessionReady *ready, gpointer data)
{
  Daemon *d = data;

  if (ready != d->ready)
    return;
  /* waiting, or gone: a command parked for it goes on (from the loop: we
   * are in the sandbox's own callback) */
  unpark_later (d);
  if (fb_session_ready_is_waiting (ready))
    return;
  /* gone before a command: the next command makes its own sandbox */
  g_free (d->ready_why);
  d->ready_why = g_strdup (fb_session_ready_get_why (ready));
  g_clear_pointer (&d->ready, fb_session_ready_free);
}

static void
ready_ended (FbSessionReady *ready, int status, const char *message, gpointer data)
{
  Conn *c = data;
  Msg m = { .type = MSG_EXITED, .n1 = (guint64)status };

  (void)ready;
  c->quick_status = status;
  c->exited = true;
  if (message != NULL)
    {
      g_strlcpy (m.text, message, sizeof m.text);
      g_free (c->quick_failure);
      c->quick_failure = g_strdup (message);
    }
  if (c->fd >= 0)
    fb_session_send (c->fd, &m, NULL, 0);
}

/* The caller opened the daemon's proof (a memfd only this connection is
 * told of) through /proc/DAEMON/fd/N, which the kernel allows only to a
 * process that may read the daemon as a tracer would
 * (PTRACE_MODE_READ_FSCREDS): one in a Landlock domain the daemon is not
 * in may not, and no /proc file shows such a domain.  One opening: the
 * proof is closed after it.  False with *RET_WHY otherwise. */
static bool
proof_holds (Conn *c, int fd, char **ret_why)
{
  struct stat mine, theirs;
  bool ok = c->proof >= 0 && fd >= 0 && fstat (c->proof, &mine) == 0 && fstat (fd, &theirs) == 0 &&
            mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino;

  fb_fd_close (&c->proof);
  if (!ok)
    *ret_why = g_strdup ("the caller could not open the session daemon's /proc/PID/fd (a Landlock domain, or "
                         "another security module's ptrace rule, stands between them): a sandbox made by the "
                         "daemon would not have the caller's confinement");
  return ok;
}

/* JOIN with its command (FDS: the command's memfd, stdin, stdout,
 * stderr, the proof): run it in the ready sandbox, as the command's from its first
 * step (its pid namespace is the command's before the command is sent),
 * with its network proxy.  False with *RET_WHY when the command is to
 * make a sandbox of its own instead. */
/* Whether the caller may have the ready sandbox: one waits, the caller
 * opened the proof PROOF, and is in the daemon's situation.  False with
 * *RET_WHY. */
bool
fb_session_daemon_ready_for (Conn *c, int proof, char **ret_why)
{
  Daemon *d = c->d;

  if (d->ready == NULL || !fb_session_ready_is_waiting (d->ready))
    {
      *ret_why = d->ready_why != NULL ? g_strdup_printf ("no sandbox was ready: the last one failed: %s", d->ready_why)
                                      : g_strdup ("no sandbox was ready yet");
      return false;
    }
  return proof_holds (c, proof, ret_why) && fb_session_caller_matches (c->fd, fb_session_ready_get_maker (d->ready),
                                                                       fb_session_ready_get_pidns (d->ready), ret_why);
}

/* C's network proxy on FD (its sandbox's end, taken), under the session's
 * policy, writing to C's log.  All the commands' proxies hold one share
 * of the daemon's descriptors together: a command that floods its proxy
 * can't take the view's from the others. */
static FbProxy *
command_proxy_new (Conn *c, int fd, char **entries, GError **error)
{
  Daemon *d = c->d;
  FbProxyOptions po = { .policy = d->policy,
                        .sink = fb_access_log_get_sink (c->log),
                        .uid = d->uid,
                        .resolve = (const char *const *)entries,
                        .fds = &d->proxy_fds };

  if (d->proxy_fds.max == 0)
    fb_proxy_fds_init (&d->proxy_fds);
  return fb_proxy_new (&po, fd, error);
}

/* The command into the ready sandbox, which ready_for() granted. */
bool
fb_session_daemon_run_ready_granted (Conn *c, int fds[MSG_FDS_MAX], const char *resolve, char **ret_why)
{
  Daemon *d = c->d;
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) entries = resolve[0] != '\0' ? g_strsplit (resolve, "\n", -1) : g_new0 (char *, 1);

  if (!fb_proxy_check_resolve ((const char *const *)entries, &error))
    {
      *ret_why = g_strdup (error->message);
      return false;
    }
  c->member = fb_view_share_add (d->share, fb_session_ready_get_pidns (d->ready), c->run_id, NULL,
                                 fb_access_log_get_sink (c->log), NULL, NULL, &error);
  if (c->member == NULL)
    {
      *ret_why = g_strdup (error->message);
      return false;
    }
  if (fb_policy_get_network (d->policy) == FB_POLICY_NETWORK_ALLOWLIST)
    {
      int fd = fb_session_ready_take_proxy_fd (d->ready);

      c->proxy = fd >= 0 ? command_proxy_new (c, fd, entries, &error) : NULL;
      if (c->proxy == NULL)
        {
          *ret_why = g_strdup_printf ("its network proxy could not start: %s",
                                      error != NULL ? error->message : "the sandbox has no socket for it");
          goto undo;
        }
    }
  if (fb_session_ready_run (d->ready, fds[0], &fds[1], ready_ended, c) < 0)
    {
      *ret_why = g_strdup ("the ready sandbox could not be sent the command");
      goto undo;
    }
  c->ready = g_steal_pointer (&d->ready);
  return true;

undo:
  /* the sandbox is spent (its proxy socket taken, or its helper gone) */
  g_clear_pointer (&d->ready, fb_session_ready_free);
  g_clear_pointer (&c->proxy, fb_proxy_free);
  fb_view_member_end (c->member);
  g_clear_pointer (&c->member, fb_view_member_unref);
  return false;
}

static bool
run_ready (Conn *c, int fds[MSG_FDS_MAX], const char *resolve, char **ret_why)
{
  return fb_session_daemon_ready_for (c, fds[4], ret_why) &&
         fb_session_daemon_run_ready_granted (c, fds, resolve, ret_why);
}

/* Whether DIR_FD (the directory at PATH) is an entry of the runs root.
 * The session's view was made before any of its commands' run
 * directories, and hides fusebox's state by the identities it knew then:
 * the runs root, with everything in it, whenever made.  A run directory
 * elsewhere (a --run-dir in the workspace) would be in the view, and every
 * command of the session could read and rewrite that command's log and
 * run.json, and move the directory away and put a link in its place. */
static bool
in_runs_root (int dir_fd, const char *path)
{
  g_autofree char *runs_root = fb_run_dir_root ();
  g_autofree char *base = g_path_get_basename (path);
  _fb_cleanup_fd_ int root_fd = open (runs_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct stat a, b;

  return root_fd >= 0 && fstat (dir_fd, &a) == 0 && fstatat (root_fd, base, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
         a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* JOIN's run: the caller's own, new.  Its id is no other command's of
 * this session, and the log it names is to be made in a run directory
 * of ours (not writable by others) whose run.json names this id and the
 * caller as its supervisor (its pid and start time: written by the
 * caller before JOIN, fb_run_start), and does not exist yet.  So a JOIN
 * can't make the daemon write where its caller could not (a caller under
 * Landlock or in a chroot), nor into another command's log.  False with
 * *RET_WHY. */
static bool
join_run_ok (Conn *c, const Msg *m, JsonObject **ret_info, int *ret_dir, char **ret_why)
{
  g_autofree char *dir = g_path_get_dirname (m->text);
  g_autofree char *base = g_path_get_basename (m->text);
  g_autofree char *text = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  _fb_cleanup_fd_ int dfd = -1, jfd = -1;
  struct ucred cred;
  socklen_t len = sizeof cred;
  struct stat st;
  JsonObject *root, *sup;
  gsize n = strlen (m->run_id);
  ssize_t got;

  *ret_why = NULL;
  for (gsize i = 0; i < n; i++)
    if (!g_ascii_isalnum (m->run_id[i]) && m->run_id[i] != '-')
      n = 0;
  for (GList *l = c->d->conns; n > 0 && l != NULL; l = l->next)
    if (l->data != c && g_strcmp0 (((Conn *)l->data)->run_id, m->run_id) == 0)
      n = 0;
  if (n == 0)
    {
      *ret_why = g_strdup_printf ("the run id %s is not a new run's", m->run_id);
      return false;
    }
  if (!g_path_is_absolute (m->text) || getsockopt (c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
      (dfd = open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 || fstat (dfd, &st) < 0 ||
      st.st_uid != geteuid () || (st.st_mode & 022) != 0 ||
      (jfd = openat (dfd, "run.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 || fstat (jfd, &st) < 0 ||
      !S_ISREG (st.st_mode) || st.st_size <= 0 || st.st_size > RUN_JSON_MAX ||
      (got = pread (jfd, text = g_malloc ((gsize)st.st_size + 1), (gsize)st.st_size, 0)) != st.st_size)
    {
      *ret_why = g_strdup_printf ("the log %s is not in a run directory of the caller's (%s/run.json)", m->text, dir);
      return false;
    }
  text[got] = '\0';
  root = json_parser_load_from_data (parser, text, -1, NULL) && JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))
           ? json_node_get_object (json_parser_get_root (parser))
           : NULL;
  sup = root != NULL && json_object_has_member (root, "supervisor") ? json_object_get_object_member (root, "supervisor")
                                                                    : NULL;
  if (sup == NULL || g_strcmp0 (json_object_get_string_member_with_default (root, "run", ""), m->run_id) != 0 ||
      json_object_get_int_member_with_default (sup, "pid", 0) != (gint64)cred.pid ||
      json_object_get_int_member_with_default (sup, "start_time", -1) != (gint64)fb_run_process_start_time (cred.pid))
    {
      *ret_why = g_strdup_printf ("%s/run.json is not run %s's, supervised by the caller (pid %d)", dir, m->run_id,
                                  (int)cred.pid);
      return false;
    }
  if (!in_runs_root (dfd, dir))
    {
      g_autofree char *runs_root = fb_run_dir_root ();
      *ret_why = g_strdup_printf ("the run directory %s is not in fusebox's runs directory %s, the only place the "
                                  "session's view hides from every command",
                                  dir, runs_root);
      return false;
    }
  if (fstatat (dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
    {
      *ret_why = g_strdup_printf ("the log %s exists already", m->text);
      return false;
    }
  *ret_info = json_object_ref (root);
  *ret_dir = g_steal_fd (&dfd);
  return true;
}

static void
on_join (Conn *c, const Msg *m, int fds[MSG_FDS_MAX])
{
  Daemon *d = c->d;
  FbAccessLogOptions lo = { 0 };
  g_autoptr (GError) error = NULL;
  Msg answer = { .type = MSG_JOINED };
  g_autoptr (JsonObject) info = NULL;
  _fb_cleanup_fd_ int dir = -1;

  if (c->run_id != NULL || d->stopping)
    {
      refuse (c, "session %s is ending", d->name);
      return;
    }
  {
    g_autofree char *why = NULL;
    if (!join_run_ok (c, m, &info, &dir, &why))
      {
        refuse (c, "session %s refuses the command: %s", d->name, why);
        return;
      }
  }
  if (strcmp (m->digest, d->digest) != 0)
    {
      refuse (c,
              "session %s runs its commands under another policy (%s, with its workspace and the rules it "
              "was started with; its run directory %s holds it): give the same policy, workspace and rules, "
              "or another session name",
              d->name, fb_policy_get_origin (d->policy), fb_run_get_dir (d->run));
      return;
    }
  if (m->uid != d->uid || m->gid != d->gid)
    {
      refuse (c,
              "session %s runs its commands as uid %u, gid %u inside; give the same --uid and --gid, or "
              "another session name",
              d->name, d->uid, d->gid);
      return;
    }
  if (m->level != (guint32)d->level)
    {
      refuse (c, "session %s logs at level %s; give the same --log-level, or another session name", d->name,
              fb_log_level_to_string (d->level));
      return;
    }
  if (fb_session_daemon_running (d) >= SESSION_COMMANDS_MAX)
    {
      refuse (c, "session %s runs %d commands, its limit: wait for one to end, or use another session name", d->name,
              SESSION_COMMANDS_MAX);
      return;
    }
  /* The command's own log, written by the view's workers before they
   * answer, as its run's would be. */
  lo.path = m->text;
  lo.run_id = m->run_id;
  lo.coalesce = TRUE;
  lo.write_through = TRUE;
  lo.rotate_bytes = m->n1;
  lo.max_bytes = m->n2;
  lo.on_full = fb_session_daemon_on_log_full;
  lo.on_full_data = c;
  lo.journal = m->journal != 0;
  lo.journal_socket = g_getenv ("FUSEBOX_JOURNAL_SOCKET");
  /* in the directory join_run_ok looked at, made new: the caller may
   * swap what its path names (a link to where it may not write) */
  lo.new_in_dir = TRUE;
  lo.dir_fd = dir;
  c->log = fb_access_log_new (&lo, NULL, &error);
  if (c->log == NULL)
    {
      refuse (c, "session %s can't open the command's access log %s: %s", d->name, m->text, error->message);
      return;
    }
  c->run_id = g_strdup (m->run_id);
  g_clear_handle_id (&d->idle_id, g_source_remove);
  if (m->ready != 0 && fds[0] >= 0 && fds[3] >= 0)
    {
      g_autofree char *why = NULL;

      if (run_ready (c, fds, m->more, &why))
        {
          if (m->quick != 0 && m->more[0] == '\0')
            fb_session_quick_learn (d, m, fds[0], fds[5], info);
          fb_session_send_type (c->fd, MSG_STARTED);
          fb_session_daemon_ready_later (d, READY_AFTER_MS);
          return;
        }
      g_strlcpy (answer.more, why, sizeof answer.more);
    }
  fb_session_daemon_ready_later (d, 0);
  fb_session_send (c->fd, &answer, d->ns, 2);
}

/* REGISTER: the command's pid namespace, and with a network allowlist the
 * socket its sandbox listens on (launcher.h, proxy_port): the daemon runs
 * the command's proxy, its records in the command's log, resolving names
 * as the command's --resolve says (RESOLVE, a line each). */
static void
on_register (Conn *c, int pidns, int *proxy_fd, const char *resolve)
{
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) entries = resolve[0] != '\0' ? g_strsplit (resolve, "\n", -1) : g_new0 (char *, 1);

  if (c->log == NULL || c->member != NULL || pidns < 0)
    {
      refuse (c, "a command registers once, after it joined");
      return;
    }
  c->member =
    fb_view_share_add (c->d->share, pidns, c->run_id, NULL, fb_access_log_get_sink (c->log), NULL, NULL, &error);
  if (c->member == NULL)
    {
      refuse (c, "%s", error->message);
      return;
    }
  if (!fb_proxy_check_resolve ((const char *const *)entries, &error))
    {
      refuse (c, "%s", error->message);
      return;
    }
  if (*proxy_fd >= 0 && fb_policy_get_network (c->d->policy) == FB_POLICY_NETWORK_ALLOWLIST)
    {
      c->proxy = command_proxy_new (c, g_steal_fd (proxy_fd), entries, &error);
      if (c->proxy == NULL)
        {
          refuse (c, "session %s can't start the command's network proxy: %s", c->d->name, error->message);
          return;
        }
    }
  fb_session_send_type (c->fd, MSG_GO);
}

static void
on_stop (Daemon *d)
{
  Msg m = { .type = MSG_STOPPING };

  d->stopping = true;
  g_clear_handle_id (&d->ready_idle, g_source_remove);
  g_clear_pointer (&d->ready, fb_session_ready_free);
  /* those waiting for a sandbox are told the session ends */
  unpark_later (d);
  if (d->stop_why != NULL)
    g_strlcpy (m.text, d->stop_why, sizeof m.text);
  for (GList *l = d->conns; l != NULL; l = l->next)
    {
      Conn *c = l->data;
      if (c->ready != NULL)
        fb_session_ready_signal (c->ready, SIGKILL);
      /* its end is the stop's, unless it had exited already */
      if (c->member != NULL && !c->ended && !c->exited)
        c->stopped = true;
      if (c->member != NULL && !c->ended && c->fd >= 0)
        fb_session_send (c->fd, &m, NULL, 0);
    }
  fb_session_daemon_maybe_idle (d);
}

/* --- waiting for the sandbox being made ------------------------------------------ */

/* A command that comes while the next sandbox is being made (it is made
 * when the last command ends, fb_session_daemon_ready_later) waits for
 * it, up to PARK_MS, rather than making one of its own, which takes
 * longer: so commands run back to back still find one.  One wait per
 * connection. */
#define PARK_MS 250

static void
unpark (Conn *c)
{
  Daemon *d = c->d;
  g_autofree Msg *m = g_steal_pointer (&c->parked);
  int fds[MSG_FDS_MAX];

  g_queue_remove (&d->parked, c);
  g_clear_handle_id (&c->park_id, g_source_remove);
  memcpy (fds, c->parked_fds, sizeof fds);
  if (m->type == MSG_QUICK)
    fb_session_quick_start (c, fds);
  else
    on_join (c, m, fds);
  fb_session_close_fds (fds);
}

static gboolean
unpark_next (gpointer data)
{
  Daemon *d = data;

  d->unpark_idle = 0;
  /* the oldest first, while none is being made: one takes a sandbox that
   * waits (and the next is made at once for the others); with none
   * coming, all go on without */
  while (!g_queue_is_empty (&d->parked))
    {
      if (d->ready == NULL && d->ready_idle != 0 && d->ready_timed)
        fb_session_daemon_ready_later (d, 0);
      if (d->ready != NULL ? !fb_session_ready_is_waiting (d->ready) : d->ready_idle != 0)
        break;
      unpark (g_queue_peek_head (&d->parked));
    }
  return G_SOURCE_REMOVE;
}

static void
unpark_later (Daemon *d)
{
  if (d->unpark_idle == 0 && !g_queue_is_empty (&d->parked))
    d->unpark_idle = g_idle_add (unpark_next, d);
}

static void
on_park_timeout (gpointer data)
{
  Conn *c = data;

  c->park_id = 0;
  unpark (c);
}

/* Park M (a JOIN with its command, a QUICK) and its FDS (taken) if a
 * sandbox is being made or about to be; true if parked. */
static bool
park (Conn *c, const Msg *m, int fds[MSG_FDS_MAX])
{
  Daemon *d = c->d;
  bool coming = d->ready != NULL ? !fb_session_ready_is_waiting (d->ready) : d->ready_idle != 0;

  if (c->waited || d->stopping || !coming || (m->type == MSG_JOIN && m->ready == 0))
    return false;
  /* made now, not after the last command's READY_AFTER_MS */
  if (d->ready == NULL)
    fb_session_daemon_ready_later (d, 0);
  c->waited = true;
  c->parked = g_memdup2 (m, sizeof *m);
  memcpy (c->parked_fds, fds, sizeof c->parked_fds);
  for (int i = 0; i < MSG_FDS_MAX; i++)
    fds[i] = -1;
  c->park_id = g_timeout_add_once (PARK_MS, on_park_timeout, c);
  g_queue_push_tail (&d->parked, c);
  return true;
}

static gboolean
on_conn (int fd, GIOCondition cond, gpointer data)
{
  Conn *c = data;
  Daemon *d = c->d;
  Msg m;
  int fds[MSG_FDS_MAX];
  int r = fb_session_recv (fd, &m, fds);

  if (r <= 0)
    {
      c->watch = 0;
      conn_hangup (c);
      if (c->log != NULL || c->member != NULL)
        command_ended (c);
      else
        conn_free (c);
      fb_session_daemon_maybe_idle (d);
      return G_SOURCE_REMOVE;
    }
  switch ((MsgType)m.type)
    {
      case MSG_HELLO:
        {
          Msg info = { .type = MSG_INFO, .running = fb_session_daemon_running (d) };

          if (c->proof < 0)
            c->proof = memfd_create ("fusebox-session-proof", MFD_CLOEXEC);
          info.n1 = (guint64)c->proof;
          g_strlcpy (info.run_id, fb_run_get_id (d->run), sizeof info.run_id);
          g_strlcpy (info.text, fb_run_get_dir (d->run), sizeof info.text);
          fb_session_send (c->fd, &info, NULL, 0);
        }
        break;
      case MSG_JOIN:
        if (!park (c, &m, fds))
          on_join (c, &m, fds);
        break;
      case MSG_QUICK:
        if (!park (c, &m, fds))
          fb_session_quick_start (c, fds);
        break;
      case MSG_SIGNAL:
        if (c->ready != NULL && m.n1 > 0 && m.n1 < NSIG)
          fb_session_ready_signal (c->ready, (int)m.n1);
        break;
      case MSG_REGISTER:
        on_register (c, fds[0], &fds[1], m.text);
        break;
      case MSG_ENDED:
        command_ended (c);
        break;
      case MSG_STOP:
        c->stop_waits = true;
        on_stop (d);
        break;
      case MSG_INFO:
      case MSG_JOINED:
      case MSG_GO:
      case MSG_CLOSED:
      case MSG_REFUSED:
      case MSG_LOG_FULL:
      case MSG_STOPPING:
      case MSG_STARTED:
      case MSG_EXITED:
      case MSG_NOT_QUICK:
        break;
    }
  fb_session_close_fds (fds);
  return G_SOURCE_CONTINUE;
}

/* The root directory of /proc/PID (DIR), as the kernel names it: its
 * device, inode and mount. */
static bool
root_of (const char *dir, struct statx *ret)
{
  g_autofree char *path = g_build_filename (dir, "root", NULL);

  return statx (AT_FDCWD, path, 0, STATX_INO | STATX_MNT_ID, ret) == 0 && (ret->stx_mask & STATX_MNT_ID) != 0;
}

/* The peer is this user, not inside a sandbox (the same pid namespace as
 * the daemon's: every sandbox has its own), and neither in another mount
 * namespace nor in a chroot (its root is the daemon's): a command joins
 * the view's namespaces, whose root is the whole view, and would leave
 * the chroot, which the kernel refuses a chrooted process's own user
 * namespace for (an outside review read a file outside a chroot so).  Read from the peer's own
 * pidfd (SO_PEERPIDFD, Linux 6.5), so that a pid reused since the connect
 * can't stand in for it.  False with *RET_WHY. */
static bool
peer_allowed (int fd, const char **ret_why)
{
  struct ucred cred;
  socklen_t len = sizeof cred;
  char path[64];
  struct stat mine, theirs;
  struct statx my_root, their_root;
  int pidfd = -1;
  bool ok;

  *ret_why = "a peer of another user or inside a sandbox";
  if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != geteuid () || cred.pid <= 0)
    return false;
  len = sizeof pidfd;
  if (getsockopt (fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0)
    pidfd = -1;
  g_snprintf (path, sizeof path, "/proc/%d/ns/pid", (int)cred.pid);
  ok = stat ("/proc/self/ns/pid", &mine) == 0 && stat (path, &theirs) == 0 && mine.st_ino == theirs.st_ino &&
       mine.st_dev == theirs.st_dev;
  if (ok)
    {
      g_snprintf (path, sizeof path, "/proc/%d/ns/mnt", (int)cred.pid);
      ok = stat ("/proc/self/ns/mnt", &mine) == 0 && stat (path, &theirs) == 0 && mine.st_ino == theirs.st_ino &&
           mine.st_dev == theirs.st_dev;
      g_snprintf (path, sizeof path, "/proc/%d", (int)cred.pid);
      ok = ok && root_of ("/proc/self", &my_root) && root_of (path, &their_root) &&
           my_root.stx_ino == their_root.stx_ino && my_root.stx_dev_major == their_root.stx_dev_major &&
           my_root.stx_dev_minor == their_root.stx_dev_minor && my_root.stx_mnt_id == their_root.stx_mnt_id;
      if (!ok)
        *ret_why = "a peer in another mount namespace or in a chroot (its root is not the session daemon's: the "
                   "session's view would take its commands out of it); run fusebox where the session was started, "
                   "outside any chroot";
    }
  /* still the peer that connected (not reaped: its pid not reused) */
  if (ok && pidfd >= 0)
    ok = syscall (SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0;
  if (pidfd >= 0)
    close (pidfd);
  return ok;
}

/* A pause in accepting, after the process ran out of descriptors: the
 * socket stays readable, and the loop would spin on it. */
static gboolean on_listen (int fd, GIOCondition cond, gpointer data);

static gboolean
listen_again (gpointer data)
{
  Daemon *d = data;

  d->listen_watch = g_unix_fd_add (d->listen_fd, G_IO_IN, on_listen, d);
  return G_SOURCE_REMOVE;
}

static gboolean
on_listen (int fd, GIOCondition cond, gpointer data)
{
  Daemon *d = data;
  int cfd = accept4 (fd, NULL, NULL, SOCK_CLOEXEC);
  const char *why;
  Conn *c;

  if (cfd < 0 && (errno == EMFILE || errno == ENFILE))
    {
      d->listen_watch = 0;
      g_timeout_add_seconds (1, listen_again, d);
      return G_SOURCE_REMOVE;
    }
  if (cfd < 0)
    return G_SOURCE_CONTINUE;
  if (g_list_length (d->conns) >= SESSION_CONNS_MAX)
    why = "one connection too many";
  else if (peer_allowed (cfd, &why))
    why = NULL;
  if (why != NULL)
    {
      Msg m = { .type = MSG_REFUSED };

      msg_text (&m, "session %s refused %s", d->name, why);
      g_message ("%s", m.text);
      fb_session_send (cfd, &m, NULL, 0);
      close (cfd);
      return G_SOURCE_CONTINUE;
    }
  c = g_new0 (Conn, 1);
  c->d = d;
  c->fd = cfd;
  c->proof = -1;
  c->watch = g_unix_fd_add (cfd, G_IO_IN | G_IO_HUP | G_IO_ERR, on_conn, c);
  d->conns = g_list_prepend (d->conns, c);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_stop_signal (gpointer data)
{
  on_stop (data);
  return G_SOURCE_CONTINUE;
}

/* The session's own log (records of no command) reached its budget: from
 * the loop, the session stops, and its commands with it (125), as a run
 * stops at its log's budget.  Each command's own records are in its own
 * log, under its own budget. */
static void
session_log_full (gpointer data)
{
  Daemon *d = data;
  g_autofree char *msg = fb_cmd_log_full_message ("the session", fb_run_get_log_path (d->run), d->log_max, 0);

  g_message ("session %s: %s", d->name, msg);
  fb_run_set_error (d->run, msg, NULL);
  if (d->stop_why == NULL)
    d->stop_why = g_steal_pointer (&msg);
  on_stop (d);
}

/* From the thread that wrote the record that reached the budget. */
static void
on_session_log_full (gpointer data)
{
  g_idle_add_once (session_log_full, data);
}

/* The socket's directory entry is gone (its state directory removed) or
 * another's: no client can reach this session any more, not even `session
 * stop`; it ends rather than wait for its idle timeout. */
static gboolean
check_socket (gpointer data)
{
  Daemon *d = data;
  struct stat st;

  if (d->stopping)
    return G_SOURCE_CONTINUE;
  if (lstat (d->sock_path, &st) < 0 || st.st_dev != d->sock_dev || st.st_ino != d->sock_ino)
    {
      g_message ("session %s: its socket %s is gone; the session ends", d->name, d->sock_path);
      if (d->stop_why == NULL)
        d->stop_why = g_strdup_printf ("its socket %s is gone (its state directory removed?)", d->sock_path);
      on_stop (d);
    }
  return G_SOURCE_CONTINUE;
}

static void
serving_ended (int result, gpointer data)
{
  Daemon *d = data;

  /* the view is gone: no command can run in it any more */
  on_stop (d);
  g_main_loop_quit (d->loop);
}

/* The keeper, the view and its FUSE session: before any thread exists (the
 * keeper is forked). */
static int
start_view (Daemon *d, GError **error)
{
  FbLauncherPlan plan;
  g_autoptr (FbLauncherChild) keeper = NULL;
  FbViewOptions vo;
  FbFuseOptions fo;
  FbFuse *fuse = NULL;
  int fuse_fd = -1, refresh_fd = -1, r;

  fb_launcher_plan_init (&plan);
  plan.root_kind = FB_LAUNCHER_ROOT_FUSE;
  plan.keep_view = true;
  plan.uid = d->uid;
  plan.gid = d->gid;
  r = fb_launcher_spawn (&plan, &keeper);
  if (r < 0)
    {
      FbLauncherFailure f = { .step = FB_LAUNCHER_STEP_CLONE, .error = -r };
      g_autofree char *msg = fb_launcher_describe_failure (&plan, &f);
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "%s", msg);
      return r;
    }
  fb_run_view_options (d->run, &vo);
  vo.sink = fb_view_share_get_sink (d->share);
  vo.owners = fb_view_share_get_owners (d->share);
  vo.log_level = d->level;
  r = fb_view_new (d->policy, &vo, &d->view);
  if (r < 0)
    {
      g_autofree char *why = fb_view_new_explain (r, NULL);

      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "can't open the policy's directories: %s", why);
      return r;
    }
  fb_fuse_options_init (&fo);
  fo.id_map.host_uid = geteuid ();
  fo.id_map.host_gid = getegid ();
  fo.id_map.inside_uid = d->uid;
  fo.id_map.inside_gid = d->gid;
  fo.id_map.enabled = fo.id_map.inside_uid != fo.id_map.host_uid || fo.id_map.inside_gid != fo.id_map.host_gid;
  fb_fuse_new (d->view, &fo, &fuse);
  d->serving = fb_run_fuse_new (fuse, fb_run_get_log (d->run));
  if (fb_launcher_child_wait_mounted (keeper, &fuse_fd) < 0 || fb_fuse_serve_fd (fuse, fuse_fd) < 0 ||
      fb_run_fuse_start (d->serving, serving_ended, d) < 0 ||
      fb_launcher_child_wait_kept (keeper, &d->ns[0], &d->ns[1], &refresh_fd) < 0)
    {
      g_autofree char *msg = fb_launcher_child_describe_failure (keeper);
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "the session's view could not be made: %s",
                   msg != NULL ? msg : "its keeper ended without a word");
      return -ECHILD;
    }
  /* the keeper stays as the view's refresher: the next command finds the
   * directories this one listed warm (fs/fs-fuse-warm.c); without it only
   * slower */
  r = fb_fuse_keep_warm (fuse, refresh_fd, fcntl (fb_launcher_child_get_pidfd (keeper), F_DUPFD_CLOEXEC, 3));
  if (r < 0)
    g_warning ("the session's view is not kept warm: %s", g_strerror (-r));
  d->keeper = g_steal_pointer (&keeper);
  return 0;
}

static int
listen_on (const char *path, GError **error)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  mode_t old;
  int fd;

  if (strlen (path) >= sizeof sa.sun_path)
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID, "%s: the path is too long for a socket", path);
      return -1;
    }
  memcpy (sa.sun_path, path, strlen (path) + 1);
  fd = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  /* 0600 from birth: no moment in which another user could connect */
  old = umask (0177);
  unlink (path); /* a stale one: its daemon is gone (we hold the lock) */
  if (fd < 0 || bind (fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen (fd, 64) < 0)
    {
      int e = errno;
      umask (old);
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "%s: can't listen: %s", path, g_strerror (e));
      if (fd >= 0)
        close (fd);
      return -1;
    }
  umask (old);
  return fd;
}

/* The daemon's life, in the grandchild of the first client; READY gets
 * "ok", or the message of what failed.  Returns the exit status. */
static int
daemon_main (Daemon *d, int ready)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) waiters = NULL;
  FbAccessLogOptions lo = { 0 };
  JsonObject *info = fb_run_get_info (d->run);
  int status = 0;

  d->ns[0] = d->ns[1] = d->listen_fd = -1;
  json_object_set_string_member (info, "session", d->name);
  json_object_set_int_member (info, "idle_timeout", d->idle_s);
  lo.write_through = TRUE;
  /* a budget like a command's: what no command made is bounded too */
  lo.rotate_bytes = d->log_file;
  lo.max_bytes = d->log_max;
  lo.on_full = on_session_log_full;
  lo.on_full_data = d;
  if (!fb_run_start (d->run, &error) || (d->listen_fd = listen_on (d->sock_path, &error)) < 0 ||
      fb_run_open_log (d->run, &lo, &error) == NULL)
    goto out;
  {
    struct stat st;
    if (lstat (d->sock_path, &st) == 0)
      {
        d->sock_dev = st.st_dev;
        d->sock_ino = st.st_ino;
      }
  }
  /* the records of no command go to the session's own log */
  d->share = fb_view_share_new (fb_run_get_sink (d->run));
  if (start_view (d, &error) < 0)
    goto out;
  /* from here the view makes what the sandboxes ask with the modes the
   * kernel passes, which had the command's umask applied */
  umask (0);
  d->loop = g_main_loop_new (NULL, FALSE);
  d->listen_watch = g_unix_fd_add (d->listen_fd, G_IO_IN, on_listen, d);
  g_unix_signal_add (SIGTERM, on_stop_signal, d);
  g_unix_signal_add (SIGINT, on_stop_signal, d);
  g_unix_signal_add (SIGHUP, on_stop_signal, d);
  g_timeout_add_seconds (SOCKET_CHECK_S, check_socket, d);
  fb_session_daemon_maybe_idle (d);
  fb_session_daemon_ready_later (d, 0);
  if (write (ready, "ok", 2) != 2)
    status = 1;
  close (ready);
  ready = -1;
  g_main_loop_run (d->loop);

out:
  if (ready >= 0)
    {
      const char *msg = error != NULL ? error->message : "the session's daemon could not start";
      if (write (ready, msg, strlen (msg)) < 0)
        status = 1;
      close (ready);
      status = FB_LAUNCHER_EXIT_SANDBOX;
      if (error != NULL)
        fb_run_set_error (d->run, error->message, NULL);
    }
  if (d->listen_fd >= 0)
    {
      unlink (d->sock_path);
      close (d->listen_fd);
    }
  /* the sandbox made ahead holds the view's mount namespace too */
  g_clear_handle_id (&d->ready_idle, g_source_remove);
  g_clear_pointer (&d->ready, fb_session_ready_free);
  /* the view first (nothing pushes records any more), then every
   * command's end (their logs) */
  for (int i = 0; i < 2; i++)
    if (d->ns[i] >= 0)
      close (d->ns[i]);
  if (d->serving != NULL)
    {
      fb_watch_stop ();
      /* ends the refresher first: it holds the view's mount namespace */
      fb_run_fuse_end (d->serving, 0);
      fb_run_fuse_free (d->serving);
    }
  g_clear_pointer (&d->keeper, fb_launcher_child_free);
  /* a `session stop` returns once run.json says the session has ended, so
   * that a `runs --prune` after it takes the session's private sources */
  waiters = g_array_new (FALSE, FALSE, sizeof (int));
  while (d->conns != NULL)
    {
      Conn *c = d->conns->data;
      if (c->stop_waits && c->fd >= 0)
        {
          g_clear_handle_id (&c->watch, g_source_remove);
          g_array_append_val (waiters, c->fd);
          c->fd = -1;
        }
      conn_free (c);
    }
  g_clear_pointer (&d->view, fb_view_unref);
  g_clear_pointer (&d->share, fb_view_share_free);
  g_clear_pointer (&d->stop_why, g_free);
  g_clear_pointer (&d->ready_why, g_free);
  g_clear_pointer (&d->launch_helper, g_free);
  g_clear_pointer (&d->quicks, g_ptr_array_unref);
  g_clear_handle_id (&d->unpark_idle, g_source_remove);
  fb_cmd_close_run_log (d->run, "session", "the session");
  fb_run_end (d->run, status, NULL);
  for (guint i = 0; i < waiters->len; i++)
    close (g_array_index (waiters, int, i));
  return status;
}

/* Start session NAME's daemon (O's policy and options): with the lock
 * held, so that two first commands make one.  0, or -1 after a message. */
int
fb_session_daemon_start (const RunOptions *o, const char *name)
{
  g_autofree char *root = fb_run_sessions_root ();
  g_autofree char *lock_name = g_strconcat (name, ".lock", NULL);
  g_autofree char *lock_path = g_build_filename (root, lock_name, NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (GDir) dir = NULL;
  _fb_cleanup_fd_ int root_fd = -1;
  FbRunOptions ro = { .kind = FB_RUN_KIND_SESSION, .workspace = o->workspace };
  g_autoptr (FbRun) srun = NULL;
  g_autoptr (FbPolicy) policy = NULL;
  char buf[4096];
  guint64 log_file = 0, log_max = 0;
  int lock = -1, pipefd[2] = { -1, -1 }, fd, live = 0;
  pid_t pid;
  ssize_t n;

  if (!fb_run_state_no_links (&error) ||
      !fb_path_check_private (root, false, "the sessions' directory",
                              "set XDG_STATE_HOME to a directory of your own that only you may write", &error) ||
      !fb_run_state_first_way_ok (&error) ||
      !fb_path_make_private (root, "the sessions' directory",
                             "set XDG_STATE_HOME to a directory of your own that only you may write", &error))
    {
      fb_cmd_error ("run: --session %s: %s", name, error->message);
      return -1;
    }
  /* its mode and the lock through one descriptor, taken without following
   * a link: the checked path may have been swapped since */
  if (!fb_session_dir_ok ("run: --session") ||
      (root_fd = open (root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 || fchmod (root_fd, 0700) < 0 ||
      (lock = openat (root_fd, lock_name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0 ||
      flock (lock, LOCK_EX) < 0)
    {
      fb_cmd_error ("run: --session %s: %s: %s; set XDG_STATE_HOME to a writable directory", name,
                    lock >= 0 ? lock_path : root, g_strerror (errno));
      if (lock >= 0)
        close (lock);
      return -1;
    }
  /* another first command may have made it meanwhile */
  if ((fd = fb_session_connect (name)) >= 0)
    {
      close (fd);
      close (lock);
      return 0;
    }
  /* the user's live sessions: a socket that takes a connection */
  dir = g_dir_open (root, 0, NULL);
  for (const char *e; dir != NULL && (e = g_dir_read_name (dir)) != NULL;)
    if (g_str_has_suffix (e, ".sock"))
      {
        g_autofree char *other = g_strndup (e, strlen (e) - 5);
        if ((fd = fb_session_connect (other)) >= 0)
          {
            live++;
            close (fd);
          }
      }
  if (live >= SESSIONS_MAX)
    {
      fb_cmd_error ("run: --session %s: %d sessions run already, the limit: end one with 'fusebox session stop "
                    "NAME' ('fusebox session list' names them), or run without --session",
                    name, live);
      close (lock);
      return -1;
    }

  srun = fb_run_new (&ro);
  if (fb_run_check_reachable (srun, &error))
    policy = fb_cmd_run_load_policy (o, fb_run_get_vars (srun), fb_run_get_dir (srun), &error);
  if (policy == NULL || !fb_run_create (srun, policy, &error))
    {
      fb_cmd_error ("run: --session %s: %s", name, error->message);
      close (lock);
      return -1;
    }
  if (!fb_cmd_log_budget ("run", o->log_file_size, o->log_max_size, policy, FB_LOG_DEFAULT_MAX_SIZE, &log_file,
                          &log_max))
    {
      close (lock);
      return -1;
    }
  if (pipe2 (pipefd, O_CLOEXEC) < 0 || (pid = fork ()) < 0)
    {
      fb_cmd_error ("run: --session %s: can't start its daemon: %s", name, g_strerror (errno));
      close (lock);
      return -1;
    }
  if (pid == 0)
    {
      /* The daemon: a session of its own, no terminal, nothing of this
       * process's but the pipe; not our child (a second fork), so that
       * this command's exit leaves it be. */
      Daemon d = { 0 };
      int null_fd;
      /* the session's run directory, as made (fb_run_get_dir_fd), clear
       * of 3 and 4 for the moves below */
      int dir_fd = fcntl (fb_run_get_dir_fd (srun), F_DUPFD_CLOEXEC, 5);

      /* nothing of the caller's: not its descriptors (a pipe it waits on,
       * the lock, which would stay taken while we live), not its terminal */
      if (dir_fd < 0 || dup2 (pipefd[1], 3) < 0 || dup3 (dir_fd, 4, O_CLOEXEC) < 0 || close_range (5, ~0U, 0) < 0)
        _exit (FB_LAUNCHER_EXIT_SANDBOX);
      pipefd[1] = 3;
      fb_run_set_dir_fd (srun, 4);
      null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
      setsid ();
      if (fork () != 0)
        _exit (0);
      if (null_fd >= 0)
        for (int i = 0; i < 3; i++)
          dup2 (null_fd, i);
      if (chdir ("/") < 0)
        _exit (FB_LAUNCHER_EXIT_SANDBOX);
      d.name = g_strdup (name);
      d.sock_path = fb_session_socket_path (name);
      d.idle_s = o->session_idle_s;
      d.run = g_steal_pointer (&srun);
      d.policy = fb_policy_ref (policy);
      fb_session_policy_digest (d.policy, d.digest);
      d.uid = o->uid == FB_LAUNCHER_ID_CALLER ? geteuid () : o->uid;
      d.gid = o->gid == FB_LAUNCHER_ID_CALLER ? getegid () : o->gid;
      d.level = o->log_level;
      d.log_file = log_file;
      d.log_max = log_max;
      d.launch_helper = fb_cmd_sibling_program ("FUSEBOX_LAUNCH", "fusebox-launch");
      d.quicks = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_session_quick_free);
      _exit (daemon_main (&d, pipefd[1]));
    }
  close (pipefd[1]);
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
  do
    n = read (pipefd[0], buf, sizeof buf - 1);
  while (n < 0 && errno == EINTR);
  close (pipefd[0]);
  close (lock);
  buf[MAX (n, 0)] = '\0';
  if (n != 2 || strcmp (buf, "ok") != 0)
    {
      fb_cmd_error ("run: --session %s: %s", name, n > 0 ? buf : "its daemon ended before it was ready");
      return -1;
    }
  return 0;
}
