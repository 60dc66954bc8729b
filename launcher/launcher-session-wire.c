/* fusebox run --session — the message layer between a session's commands
 * and its daemon: sending and receiving one Msg (launcher-session-wire.h),
 * the session's socket and the way to it, and the policy's digest a JOIN
 * carries.  launcher-cmd-session.c (the command's side) and
 * launcher-session-daemon.c (the daemon) are its two ends.
 *
 * The protocol (one Msg per message; descriptors with SCM_RIGHTS):
 *   client → daemon: HELLO            daemon → client: INFO (its run dir, run id, commands)
 *   JOIN (policy digest, ids, level, run id, log path and budget)
 *                                     JOINED + the view's user and mount namespaces | REFUSED
 *   REGISTER + the command's pid namespace (and, with a network allowlist,
 *            the socket its sandbox listens on: the daemon runs its proxy,
 *            with the command's --resolve entries, a line each)
 *                                     GO | REFUSED
 *   ENDED                             CLOSED (records, denials, the log's end) | REFUSED
 *   STOP (`session stop`)             (the daemon ends)
 *                                     LOG_FULL, STOPPING: kill the command
 * EOF from a client is its ENDED; EOF from the daemon ends the command.
 *
 * Whom a client talks to: the daemon listens in fusebox's state directory
 * ($XDG_STATE_HOME/fusebox/sessions/NAME.sock), and takes only peers of
 * its own (launcher-session-daemon.c).  The other way round, a client
 * trusts only a daemon of its own: fusebox/ and sessions/ must be
 * directories of its uid that no one else may write (fb_session_dir_ok),
 * and whatever answers at NAME.sock must have its uid (SO_PEERCRED,
 * fb_session_connect) before anything is sent: where XDG_STATE_HOME is
 * writable by another user (sudo -E, a shared HOME), that user's "daemon"
 * would otherwise hand a root caller namespaces of its own (no view, no
 * policy, no log), and its own /proc to write the maps through
 * (launcher-ns.c join_view takes /proc before it enters them).
 *
 * Threads: the client's one; in the daemon, its loop only. */
#include "ipc/ipc-process-launch.h"
#include "ipc/ipc.h"
#include "launcher/launcher-private.h"
#include "launcher/launcher-session.h"
#include "policy/util.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* How long a client waits for the daemon's answer. */
#define ANSWER_MS 30000

void
fb_session_close_fds (int fds[MSG_FDS_MAX])
{
  for (int i = 0; i < MSG_FDS_MAX; i++)
    fb_fd_close (&fds[i]);
}

int
fb_session_send (int fd, const Msg *m, const int *fds, int n_fds)
{
  return fb_send_fds (fd, m, sizeof *m, fds, n_fds, 0);
}

int
fb_session_send_type (int fd, MsgType type)
{
  Msg m = { .type = type };

  return fb_session_send (fd, &m, NULL, 0);
}

/* One message and up to MSG_FDS_MAX descriptors (else -1): 1, 0 at EOF,
 * -errno. */
int
fb_session_recv (int fd, Msg *m, int fds[MSG_FDS_MAX])
{
  bool truncated;
  int nfds;
  ssize_t n = fb_launch_recvmsg (fd, m, sizeof *m, 0, fds, MSG_FDS_MAX, &nfds, &truncated);

  /* a peer that closed with our message unread reports ECONNRESET once,
   * before what it sent us (a refusal, unix_release_sock) */
  if (n == -ECONNRESET)
    n = fb_launch_recvmsg (fd, m, sizeof *m, MSG_DONTWAIT, fds, MSG_FDS_MAX, &nfds, &truncated);
  if (n <= 0)
    return (int)n;
  if ((gsize)n != sizeof *m || truncated)
    {
      fb_session_close_fds (fds);
      return -EPROTO;
    }
  m->digest[sizeof m->digest - 1] = m->run_id[sizeof m->run_id - 1] = m->text[sizeof m->text - 1] = '\0';
  m->more[sizeof m->more - 1] = '\0';
  return 1;
}

char *
fb_session_socket_path (const char *name)
{
  g_autofree char *root = fb_run_sessions_root ();
  g_autofree char *file = g_strconcat (name, ".sock", NULL);

  return g_build_filename (root, file, NULL);
}

/* fusebox/ and sessions/ in the state directory, where they exist: each a
 * directory (not a link) of ours that no other user may write, as a run
 * directory must be (fb_run_dir_create).  False after a message. */
bool
fb_session_dir_ok (const char *command)
{
  g_autofree char *root = fb_run_sessions_root ();
  g_autoptr (GError) error = NULL;

  /* sessions/, fusebox/ and the way to them: each of ours (or root's) and
   * writable by no one else, or another user could answer there as a
   * session's daemon, or swap a directory for a link between this check
   * and the lock's open */
  if (!fb_run_state_no_links (&error) ||
      !fb_path_check_private (root, false, "the sessions' directory",
                              "set XDG_STATE_HOME to a directory of your own that only you may write", &error))
    {
      fb_cmd_error ("%s: %s", command, error->message);
      return false;
    }

  return true;
}

/* A connection to session NAME's daemon, or -errno (-ENOENT, -ECONNREFUSED:
 * none runs; -EPERM, after a message: a process of another user answers,
 * and was sent nothing). */
int
fb_session_connect (const char *name)
{
  g_autofree char *path = fb_session_socket_path (name);
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  struct ucred cred;
  socklen_t len = sizeof cred;
  int fd;

  if (strlen (path) >= sizeof sa.sun_path)
    return -ENAMETOOLONG;
  memcpy (sa.sun_path, path, strlen (path) + 1);
  fd = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  if (connect (fd, (struct sockaddr *)&sa, sizeof sa) < 0)
    {
      int e = errno;
      close (fd);
      return -e;
    }
  /* our daemon, or no one's: the uid the kernel saw bind and listen */
  if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != geteuid ())
    {
      fb_cmd_error ("session %s: %s is answered by a process of uid %d, not by a session of uid %u: nothing was "
                    "sent to it; remove it (another user can write to the state directory), or set "
                    "XDG_STATE_HOME to a directory of your own",
                    name, path, len == sizeof cred ? (int)cred.uid : -1, (unsigned)geteuid ());
      close (fd);
      return -EPERM;
    }
  return fd;
}

/* Wait up to ANSWER_MS for one message. */
int
fb_session_await (int fd, Msg *m, int fds[MSG_FDS_MAX])
{
  struct pollfd p = { .fd = fd, .events = POLLIN };
  int n;

  do
    n = poll (&p, 1, ANSWER_MS);
  while (n < 0 && errno == EINTR);
  if (n == 0)
    return -ETIMEDOUT;
  return fb_session_recv (fd, m, fds);
}

void
fb_session_policy_digest (FbPolicy *policy, char out[65])
{
  g_autofree char *json = fb_policy_to_json (policy);
  g_autofree char *sum = g_compute_checksum_for_string (G_CHECKSUM_SHA256, json != NULL ? json : "", -1);

  g_strlcpy (out, sum, 65);
}
