/* fusebox-launch — the launch helper of `fusebox serve` (process/start).
 *
 *   fusebox-launch [--network none|host] [--cwd DIR] -- ARGV...
 *
 * Started by the server with its status socket at fd 3 (FB_LAUNCH_FD) and
 * the command's stdin/stdout/stderr as its own 0, 1, 2; the environment it
 * gets is the command's.  It is small and single-threaded on purpose: the
 * server runs threads and must not fork a sandbox itself, so this process
 * does the fork (fb_launcher_spawn), passes the FUSE fd back at the sync
 * point, then stays as the sandbox's parent to relay signals and report
 * the exit status.  ipc/ipc-process-launch.h has the protocol.
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

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int
send_record (int fd, FbLaunchRecordType type, int value, const char *text, int pass_fd)
{
  FbLaunchRecord rec;
  struct iovec iov = { &rec, sizeof rec };
  char cbuf[CMSG_SPACE (sizeof (int))];
  struct msghdr msg = { 0 };

  memset (&rec, 0, sizeof rec);
  rec.type = type;
  rec.value = value;
  if (text != NULL)
    g_strlcpy (rec.text, text, sizeof rec.text);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (pass_fd >= 0)
    {
      struct cmsghdr *cm;
      memset (cbuf, 0, sizeof cbuf);
      msg.msg_control = cbuf;
      msg.msg_controllen = sizeof cbuf;
      cm = CMSG_FIRSTHDR (&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN (sizeof (int));
      memcpy (CMSG_DATA (cm), &pass_fd, sizeof (int));
    }
  while (sendmsg (fd, &msg, MSG_NOSIGNAL) < 0)
    if (errno != EINTR)
      return -errno;
  return 0;
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

int
main (int argc, char **argv)
{
  g_autoptr (FbLauncherChild) child = NULL;
  const char *network = "none", *cwd = NULL;
  FbLauncherPlan plan;
  int fuse_fd = -1, r, i, exit_code = FB_LAUNCHER_EXIT_SANDBOX;

  /* Die with the server (and the sandbox with us). */
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  if (getppid () == 1)
    return FB_LAUNCHER_EXIT_SANDBOX;
  signal (SIGPIPE, SIG_IGN);

  for (i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "--") == 0)
        {
          i++;
          break;
        }
      if (strcmp (argv[i], "--network") == 0 && i + 1 < argc)
        network = argv[++i];
      else if (strcmp (argv[i], "--cwd") == 0 && i + 1 < argc)
        cwd = argv[++i];
      else
        {
          fprintf (stderr, "fusebox-launch: unknown argument '%s'; this helper is started by 'fusebox serve'\n",
                   argv[i]);
          return FB_LAUNCHER_EXIT_SANDBOX;
        }
    }
  if (i >= argc)
    {
      fprintf (stderr, "fusebox-launch: no command given after '--'\n");
      return FB_LAUNCHER_EXIT_SANDBOX;
    }

  fb_launcher_plan_init (&plan);
  plan.root_kind = FB_LAUNCHER_ROOT_FUSE;
  plan.argv = (const char *const *)argv + i;
  plan.cwd = cwd;
  plan.envp = NULL; /* ours is the command's */
  if (!fb_launcher_network_from_string (network, &plan.network))
    {
      fprintf (stderr, "fusebox-launch: --network %s: use none or host\n", network);
      return FB_LAUNCHER_EXIT_SANDBOX;
    }

  r = fb_launcher_spawn (&plan, &child);
  if (r < 0)
    return fail (NULL, &plan, r);
  r = fb_launcher_child_wait_mounted (child, &fuse_fd);
  if (r < 0)
    return fail (child, &plan, r);
  r = send_record (FB_LAUNCH_FD, FB_LAUNCH_MOUNTED, 0, NULL, fuse_fd);
  close (fuse_fd);
  if (r < 0)
    return fail (child, &plan, r);
  r = fb_launcher_child_wait_exec (child);
  if (r < 0)
    return fail (child, &plan, r);
  send_record (FB_LAUNCH_FD, FB_LAUNCH_EXEC, (int)fb_launcher_child_get_pid (child), NULL, -1);

  for (;;)
    {
      struct pollfd pfd[2] = { { FB_LAUNCH_FD, POLLIN, 0 }, { fb_launcher_child_get_pidfd (child), POLLIN, 0 } };
      int n = poll (pfd, pfd[1].fd >= 0 ? 2 : 1, pfd[1].fd >= 0 ? -1 : 100);

      if (n < 0 && errno != EINTR)
        break;
      if (fb_launcher_child_try_wait (child, &exit_code) == 0)
        {
          send_record (FB_LAUNCH_FD, FB_LAUNCH_EXITED, exit_code, NULL, -1);
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
