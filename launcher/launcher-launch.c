/* fusebox-launch — the launch helper of `fusebox serve` (process/start).
 *
 *   fusebox-launch            (no arguments; started by the server only)
 *
 * Started by the server with its status socket at fd 3 (FB_LAUNCH_FD), the
 * command's stdin/stdout/stderr as its own 0, 1, 2 (or, started ahead of
 * its command, /dev/null there until the command brings its own), an empty
 * environment and "/" as its working directory.  The command (argv, environment, cwd,
 * network) is the first record on the socket, a sealed memfd
 * (ipc/ipc-process-launch.h): it comes from a remote client, so it is data
 * for the exec inside the sandbox and nothing else -- the dynamic loader,
 * glibc and GLib read this process's environment before main(), and an
 * option parser would read its argv.  It is small and single-threaded on
 * purpose: the server runs threads and must not fork a sandbox itself, so
 * this process does the fork (fb_launcher_spawn), passes the FUSE fd back
 * at the sync point, then stays as the sandbox's parent to relay signals
 * and report the exit status.
 *
 * A command may join a view the server keeps (three descriptors with the
 * command: the memfd, the view's user and mount namespaces).  A late spec
 * (FB_LAUNCH_SPEC_LATE) makes the sandbox ahead of its command: the
 * helper builds and locks it down (joined to the kept view when the two
 * namespaces come), says READY, and waits for COMMAND with the command's
 * memfd and streams, which it checks and hands to the sandbox's pid 1; from
 * there on it is a command like any other.  A KEEP
 * record instead asks for such a view: the helper makes it, passes back
 * the FUSE fd and the two namespaces, and exits (the protocol:
 * ipc/ipc-process-launch.h).
 *
 * Lifetime: PR_SET_PDEATHSIG(SIGKILL) ties it to the server, and the
 * sandbox's outer child is tied to it (launcher.h), so nothing survives a
 * dead server.  EOF on the status socket (the server dropped the process)
 * kills the sandbox too.
 *
 * Errors that happen before the socket is usable go to stderr, which is
 * the command's: the client sees them as output. */
#include "ipc/ipc-process-launch.h"
#include "launcher/launcher.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* A record with N_FDS descriptors (at most 2). */
static int
send_record_fds (int fd, FbLaunchRecordType type, int value, const char *text, const int *fds, int n_fds)
{
  FbLaunchRecord rec;

  memset (&rec, 0, sizeof rec);
  rec.type = type;
  rec.value = value;
  if (text != NULL)
    g_strlcpy (rec.text, text, sizeof rec.text);
  return fb_send_fds (fd, &rec, sizeof rec, fds, n_fds, 0);
}

static int
send_record (int fd, FbLaunchRecordType type, int value, const char *text, int pass_fd)
{
  return send_record_fds (fd, type, value, text, &pass_fd, pass_fd >= 0 ? 1 : 0);
}

static int
fail (FbLauncherChild *child, const FbLauncherPlan *plan, int r)
{
  g_autofree char *text = NULL;
  int code = FB_LAUNCHER_EXIT_SANDBOX;

  if (child != NULL && fb_launcher_child_get_failure (child) != NULL)
    {
      text = fb_launcher_child_describe_failure (child);
      code = fb_launcher_failure_exit_code (fb_launcher_child_get_failure (child));
    }
  else
    text = g_strdup_printf ("the sandbox could not be made: %s", g_strerror (-r));
  send_record (FB_LAUNCH_FD, FB_LAUNCH_FAILED, code, text, -1);
  if (child != NULL)
    {
      int status;
      fb_launcher_child_kill (child, SIGKILL);
      fb_launcher_child_wait (child, &status);
    }
  return code;
}

G_STATIC_ASSERT (FB_LAUNCH_ID_CALLER == FB_LAUNCHER_ID_CALLER);

/* The first record: KEEP (*RET_KEEP), or the command, in a sealed memfd,
 * alone or with a kept view's user and mount namespaces (RET_JOIN_FDS),
 * and with FB_LAUNCH_SPEC_STDIO the command's stdin, stdout and stderr
 * after them, which become ours (we were started before the command, with
 * /dev/null there).  With FB_LAUNCH_SPEC_LATE (*RET_LATE) the memfd is a
 * late spec: the sandbox only, its command comes later (COMMAND).
 * Anything else (another number of descriptors, a short message, unknown
 * or contradicting flags) is refused. */
static int
receive_spec (FbLaunchSpec *ret_spec, bool *ret_keep, bool *ret_late, int ret_join_fds[2], const char **ret_why)
{
  FbLaunchRecord rec;
  int fds[FB_LAUNCH_RECV_FDS_MAX], nfds, r, n_stdio;
  bool truncated;
  ssize_t n = fb_launch_recvmsg (FB_LAUNCH_FD, &rec, sizeof rec, 0, fds, G_N_ELEMENTS (fds), &nfds, &truncated);

  if (n < 0)
    {
      *ret_why = "can't read the command from the server";
      return (int)n;
    }
  *ret_keep = n == (ssize_t)sizeof rec && rec.type == FB_LAUNCH_KEEP && nfds == 0 && !truncated;
  if (*ret_keep)
    return 0;
  n_stdio = n == (ssize_t)sizeof rec && rec.value == FB_LAUNCH_SPEC_STDIO ? 3 : 0;
  *ret_late = n == (ssize_t)sizeof rec && rec.value == FB_LAUNCH_SPEC_LATE;
  if (n != (ssize_t)sizeof rec || rec.type != FB_LAUNCH_SPEC || (rec.value != 0 && n_stdio == 0 && !*ret_late) ||
      (nfds - n_stdio != 1 && nfds - n_stdio != 3) || truncated)
    {
      /* LATE with STDIO among them: a sandbox with no command has no
       * streams of its own to take */
      *ret_why = "the server's first record is not the command";
      r = -EPROTO;
    }
  else
    r = fb_launch_spec_decode (fds[0], *ret_late, ret_spec, ret_why);
  for (int i = 0; r == 0 && i < n_stdio; i++)
    if (dup2 (fds[nfds - 3 + i], i) < 0)
      {
        *ret_why = "can't take the command's stdin, stdout and stderr";
        r = -errno;
      }
  if (r == 0 && nfds - n_stdio == 3)
    {
      ret_join_fds[0] = g_steal_fd (&fds[1]);
      ret_join_fds[1] = g_steal_fd (&fds[2]);
    }
  for (guint i = 0; i < G_N_ELEMENTS (fds); i++)
    if (fds[i] >= 0)
      close (fds[i]);
  return r;
}

/* An allowlist's listening socket, to the server's proxy (PROXY): it came
 * before the root's or the join's record. */
static int
send_proxy (FbLauncherChild *child)
{
  int fd = fb_launcher_child_take_proxy_fd (child);
  int r;

  if (fd < 0)
    return 0;
  r = send_record (FB_LAUNCH_FD, FB_LAUNCH_PROXY, 0, NULL, fd);
  close (fd);
  return r;
}

/* The sync point of a view made now: its FUSE fd to the server (MOUNTED),
 * which serves it at once. */
static int
send_mounted (FbLauncherChild *child)
{
  int fuse_fd = -1;
  int r = fb_launcher_child_wait_mounted (child, &fuse_fd);

  if (r < 0)
    return r;
  r = send_record (FB_LAUNCH_FD, FB_LAUNCH_MOUNTED, 0, NULL, fuse_fd);
  close (fuse_fd);
  return r < 0 ? r : send_proxy (child);
}

/* KEEP: make the view, hand back its FUSE fd (MOUNTED), its refresher's
 * socket (VIEW_REFRESH) and namespaces (KEPT), and wait for the keeper,
 * which stays as the refresher until the server ends the socket (or kills
 * us: its PDEATHSIG): the server serves the view and keeps it. */
static int
keep (void)
{
  g_autoptr (FbLauncherChild) child = NULL;
  FbLauncherPlan plan;
  int ns[2] = { -1, -1 }, refresh = -1, code = 0, r;

  fb_launcher_plan_init (&plan);
  plan.root_kind = FB_LAUNCHER_ROOT_FUSE;
  plan.keep_view = true;
  r = fb_launcher_spawn (&plan, &child);
  if (r < 0)
    return fail (NULL, &plan, r);
  r = send_mounted (child);
  if (r < 0)
    return fail (child, &plan, r);
  r = fb_launcher_child_wait_kept (child, &ns[0], &ns[1], &refresh);
  if (r < 0)
    return fail (child, &plan, r);
  /* the refresher's socket and pidfd (the keeper stays for it; ours, taken
   * before it could be reaped), before KEPT */
  {
    int fds[2] = { refresh, fb_launcher_child_get_pidfd (child) };
    r = fds[1] >= 0 ? send_record_fds (FB_LAUNCH_FD, FB_LAUNCH_VIEW_REFRESH, 0, NULL, fds, 2) : 0;
  }
  close (refresh);
  if (r == 0)
    r = send_record_fds (FB_LAUNCH_FD, FB_LAUNCH_KEPT, 0, NULL, ns, 2);
  close (ns[0]);
  close (ns[1]);
  if (r < 0)
    return fail (child, &plan, r);
  fb_launcher_child_wait (child, &code);
  return code;
}

/* A join's sync point: the command's pid namespace to the server (JOINED),
 * and its word (GO) back before anything runs.  A signal meanwhile (a
 * process/terminate) reaches the sandbox at once: *RET_SIGNALED says
 * which, and the command's status is then that signal's. */
static int
joined (FbLauncherChild *child, int *ret_signaled)
{
  FbLaunchRecord rec;
  int pidns = -1, r;
  ssize_t k;

  r = fb_launcher_child_wait_joined (child, &pidns);
  if (r < 0)
    return r;
  r = send_proxy (child);
  if (r == 0)
    r = send_record (FB_LAUNCH_FD, FB_LAUNCH_JOINED, 0, NULL, pidns);
  close (pidns);
  if (r < 0)
    return r;
  for (;;)
    {
      do
        k = recv (FB_LAUNCH_FD, &rec, sizeof rec, 0);
      while (k < 0 && errno == EINTR);
      if (k != (ssize_t)sizeof rec)
        return -EPIPE; /* the server is gone or dropped us */
      if (rec.type == FB_LAUNCH_GO)
        return fb_launcher_child_go (child);
      if (rec.type == FB_LAUNCH_SIGNAL && rec.value > 0 && rec.value < NSIG)
        {
          fb_launcher_child_kill (child, rec.value);
          *ret_signaled = rec.value;
        }
    }
}

/* LATE: the sandbox is made and waits (READY to the server), then its
 * command comes: COMMAND with its sealed memfd (checked here as the first
 * record's, a command with an argv) and its stdin, stdout and stderr, for
 * pid 1.  A SIGNAL meanwhile reaches the sandbox (*RET_SIGNALED), whose pid 1
 * ends with a terminating one; a sandbox that ends, or a server that
 * leaves, ends the wait (-ECHILD, -ENOTCONN).  A malformed COMMAND is
 * refused: *RET_REFUSED says why, for the server. */
static int
late_command (FbLauncherChild *child, int *ret_signaled, const char **ret_refused)
{
  int r = fb_launcher_child_wait_ready (child);

  if (r < 0)
    return r;
  r = send_record (FB_LAUNCH_FD, FB_LAUNCH_READY, 0, NULL, -1);
  if (r < 0)
    return r;
  for (;;)
    {
      struct pollfd pfd[2] = { { FB_LAUNCH_FD, POLLIN, 0 }, { fb_launcher_child_get_pidfd (child), POLLIN, 0 } };
      FbLaunchRecord rec;
      int fds[FB_LAUNCH_RECV_FDS_MAX], nfds, code;
      bool truncated;
      ssize_t k;

      if (poll (pfd, pfd[1].fd >= 0 ? 2 : 1, pfd[1].fd >= 0 ? -1 : 100) < 0 && errno != EINTR)
        return -errno;
      if (fb_launcher_child_try_wait (child, &code) == 0)
        return -ECHILD; /* ended before its command: a signal, or killed */
      if (!(pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      k = fb_launch_recvmsg (FB_LAUNCH_FD, &rec, sizeof rec, 0, fds, G_N_ELEMENTS (fds), &nfds, &truncated);
      if (k == -EINTR)
        continue;
      if (k <= 0)
        return -ENOTCONN; /* the server is gone or dropped us */
      if (k == (ssize_t)sizeof rec && rec.type == FB_LAUNCH_SIGNAL && rec.value > 0 && rec.value < NSIG && nfds == 0)
        {
          fb_launcher_child_kill (child, rec.value);
          *ret_signaled = rec.value;
          continue;
        }
      if (k != (ssize_t)sizeof rec || rec.type != FB_LAUNCH_COMMAND || nfds != 4 || truncated)
        {
          *ret_refused = "the server's record is not the command";
          r = -EPROTO;
        }
      else
        {
          g_auto (FbLaunchSpec) spec = { 0 };
          r = fb_launch_spec_decode (fds[0], false, &spec, ret_refused);
          if (r == 0)
            r = fb_launcher_child_send_command (child, fds[0], &fds[1]);
        }
      for (guint i = 0; i < G_N_ELEMENTS (fds); i++)
        if (fds[i] >= 0)
          close (fds[i]);
      return r;
    }
}

int
main (int argc, char **argv)
{
  g_autoptr (FbLauncherChild) child = NULL;
  g_auto (FbLaunchSpec) spec = { 0 };
  const char *why = NULL;
  FbLauncherPlan plan;
  int r, exit_code = FB_LAUNCHER_EXIT_SANDBOX;
  int join_fds[2] = { -1, -1 }, signaled = 0;
  bool keep_view = false, late = false;
  const char *refused = NULL;

  /* Die with the server (and the sandbox with us). */
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  if (getppid () == 1)
    return FB_LAUNCHER_EXIT_SANDBOX;
  signal (SIGPIPE, SIG_IGN);

  if (argc != 1)
    {
      fprintf (stderr, "fusebox-launch: this helper takes no arguments; it is started by 'fusebox serve'\n");
      return FB_LAUNCHER_EXIT_SANDBOX;
    }
  r = receive_spec (&spec, &keep_view, &late, join_fds, &why);
  if (r == 0 && keep_view)
    return keep ();
  if (r < 0)
    {
      g_autofree char *text = g_strdup_printf ("the launch helper refused the command: %s (%s)", why, g_strerror (-r));
      send_record (FB_LAUNCH_FD, FB_LAUNCH_FAILED, FB_LAUNCHER_EXIT_SANDBOX, text, -1);
      return FB_LAUNCHER_EXIT_SANDBOX;
    }

  fb_launcher_plan_init (&plan);
  plan.root_kind = FB_LAUNCHER_ROOT_FUSE;
  plan.late_command = late;
  plan.uid = spec.uid;
  plan.gid = spec.gid;
  /* a late command's umask comes with it, for its pid 1 to apply */
  if (!late && spec.umask != FB_LAUNCH_UMASK_KEEP)
    umask ((mode_t)spec.umask); /* the command inherits it through the sandbox */
  plan.argv = (const char *const *)spec.argv;
  plan.cwd = spec.cwd;
  /* Always the client's, never ours (which is empty): the launcher would
   * take environ for NULL. */
  plan.envp = (const char *const *)spec.envp;
  plan.network = spec.network == 1 ? FB_LAUNCHER_NETWORK_HOST : FB_LAUNCHER_NETWORK_NONE;
  plan.proxy_port = spec.network == 2 ? FB_LAUNCH_PROXY_PORT : 0;
  plan.join_userns_fd = join_fds[0];
  plan.join_mntns_fd = join_fds[1];

  r = fb_launcher_spawn (&plan, &child);
  for (int i = 0; i < 2; i++)
    if (join_fds[i] >= 0)
      close (join_fds[i]); /* the child has its copies */
  if (r < 0)
    return fail (NULL, &plan, r);
  r = plan.join_userns_fd >= 0 ? joined (child, &signaled) : send_mounted (child);
  if (r >= 0 && late)
    r = late_command (child, &signaled, &refused);
  if (r < 0 && refused != NULL)
    {
      g_autofree char *text =
        g_strdup_printf ("the launch helper refused the command: %s (%s)", refused, g_strerror (-r));
      send_record (FB_LAUNCH_FD, FB_LAUNCH_FAILED, FB_LAUNCHER_EXIT_SANDBOX, text, -1);
      fb_launcher_child_kill (child, SIGKILL);
      fb_launcher_child_wait (child, &exit_code);
      return FB_LAUNCHER_EXIT_SANDBOX;
    }
  if (r == -ENOTCONN && late)
    {
      /* the server left before the command: the sandbox goes too */
      fb_launcher_child_kill (child, SIGKILL);
      fb_launcher_child_wait (child, &exit_code);
      return exit_code;
    }
  if (r >= 0)
    r = fb_launcher_child_wait_exec (child);
  if (r < 0 && signaled != 0)
    {
      /* ended by the signal before its command ran: while it joined the
       * view (the GO the server sent before it knew finds the child
       * killed) or before its exec */
      fb_launcher_child_kill (child, SIGKILL);
      fb_launcher_child_wait (child, &exit_code);
      send_record (FB_LAUNCH_FD, FB_LAUNCH_EXITED, 128 + signaled, NULL, -1);
      return 0;
    }
  if (r < 0)
    return fail (child, &plan, r);
  send_record (FB_LAUNCH_FD, FB_LAUNCH_EXEC, (int)fb_launcher_child_get_pid (child), NULL, -1);

  for (;;)
    {
      /* a late command's pid 1 tells its end before the sandbox is torn
       * down (pid 1, the relay and the outer child end in turn after it):
       * the server hears it that much sooner */
      struct pollfd pfd[3] = { { FB_LAUNCH_FD, POLLIN, 0 },
                               { fb_launcher_child_get_pidfd (child), POLLIN, 0 },
                               { fb_launcher_child_get_status_fd (child), POLLIN, 0 } };
      int n = poll (pfd, 3, pfd[1].fd >= 0 ? -1 : 100);

      if (n < 0 && errno != EINTR)
        break;
      if (fb_launcher_child_read_ended (child, &exit_code) == 0 || fb_launcher_child_try_wait (child, &exit_code) == 0)
        {
          send_record (FB_LAUNCH_FD, FB_LAUNCH_EXITED, exit_code, NULL, -1);
          /* nothing of the sandbox runs now but pid 1 on its way out */
          fb_launcher_child_wait (child, NULL);
          return 0;
        }
      if (n > 0 && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
        {
          FbLaunchRecord rec;
          ssize_t k = recv (FB_LAUNCH_FD, &rec, sizeof rec, 0);
          if (k <= 0 && !(k < 0 && errno == EINTR))
            {
              /* The server is gone or dropped us: the sandbox goes too. */
              fb_launcher_child_kill (child, SIGKILL);
              fb_launcher_child_wait (child, &exit_code);
              return exit_code;
            }
          if (k == (ssize_t)sizeof rec && rec.type == FB_LAUNCH_SIGNAL && rec.value > 0 && rec.value < NSIG)
            fb_launcher_child_kill (child, rec.value);
        }
    }
  fb_launcher_child_kill (child, SIGKILL);
  fb_launcher_child_wait (child, &exit_code);
  return exit_code;
}
