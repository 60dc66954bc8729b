/* fusebox — the program people run.
 *
 * `fusebox run --session NAME [--] COMMAND [ARG...]`, with no other
 * option, is an agent's every command, and its start is the sandbox's
 * start: so this program runs it itself, as the session's quick client,
 * linked with libc alone.  Everything else, and any such command the
 * session can't take this way, is the full program's: fusebox-main,
 * beside this one (or named by $FUSEBOX_MAIN), exec'd with exactly these
 * arguments.  The full program loads fifteen shared libraries (GLib, GIO,
 * json-glib, libfuse and theirs: about 1.7 ms before main) and makes the
 * command's run directory itself; here the session's daemon makes it
 * (docs/performance.md, "The quick client").
 *
 * What the quick client does (the protocol: launcher-session-wire.c):
 *   1. its standard streams are open and none is a terminal (the full
 *      client saves and restores a terminal's modes);
 *   2. the sessions' directory in the state directory ($XDG_STATE_HOME,
 *      else ~/.local/state) is reached through directories of ours or
 *      root's that no other user may write, and the daemon at NAME.sock
 *      in it runs as our uid (the full client's checks, stricter: links
 *      resolved first, each real step checked);
 *   3. HELLO; the daemon's proof opened through its /proc/PID/fd;
 *   4. QUICK: the command, our environment, working directory and umask
 *      in a sealed memfd, our stdin, stdout and stderr, the proof.  The
 *      daemon runs it in its ready sandbox only if a full client with
 *      this environment and working directory ran there (so the policy,
 *      environment and directory are what the full client computed for
 *      them) and we are in its situation (launcher-session-ready.c);
 *      else NOT_QUICK, and the full program runs the command instead;
 *   5. signals forwarded; EXITED; ENDED; CLOSED brings the exit status and
 *      what to say, the daemon having written run.json.
 * Until STARTED nothing was made: a fallback to the full program at any
 * step before it loses nothing and runs the command once. */
#include "ipc/ipc-launch-spec.h"
#include "launcher/launcher-quick-spec.h"
#include "launcher/launcher-session-wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

/* the full client's: how long to wait for the daemon's answer */
#define ANSWER_MS 30000
/* exit statuses (launcher.h) */
#define EXIT_SANDBOX 125
#define EXIT_FAILURE_ 1

extern char **environ;

/* --- the full program ------------------------------------------------------------- */

static int
exec_main (char **argv)
{
  const char *env = getenv ("FUSEBOX_MAIN");
  char self[PATH_MAX], path[PATH_MAX + 16];
  ssize_t n;
  char *slash;

  if (env != NULL && env[0] != '\0' && env[0] != '/')
    {
      /* a relative one would be found in whatever directory this runs in */
      fprintf (stderr, "fusebox: $FUSEBOX_MAIN is %s: give fusebox-main's absolute path, or unset it\n", env);
      return EXIT_FAILURE_;
    }
  if (env != NULL && env[0] != '\0')
    snprintf (path, sizeof path, "%s", env);
  else if ((n = readlink ("/proc/self/exe", self, sizeof self - 1)) > 0 &&
           (self[n] = '\0', slash = strrchr (self, '/')))
    {
      *slash = '\0';
      snprintf (path, sizeof path, "%s/fusebox-main", self);
    }
  else
    {
      fprintf (stderr,
               "fusebox: can't find fusebox-main: /proc/self/exe is unreadable (%s); mount /proc, or name it "
               "with $FUSEBOX_MAIN\n",
               strerror (errno));
      return EXIT_FAILURE_;
    }
  execv (path, argv);
  fprintf (stderr,
           "fusebox: can't start %s: %s; it is installed beside fusebox (or named by $FUSEBOX_MAIN): reinstall "
           "fusebox\n",
           path, strerror (errno));
  return EXIT_FAILURE_;
}

/* --- the way to the daemon ---------------------------------------------------------- */

/* Is the filesystem of device DEV a FUSE filesystem that a user other than
 * us and root mounted (mountinfo's user_id=)?  Asked nothing: its server
 * may never answer. */
static bool
foreign_fuse (dev_t dev)
{
  FILE *f = fopen ("/proc/self/mountinfo", "re");
  char *line = NULL;
  size_t cap = 0;
  bool foreign = false;

  if (f == NULL)
    return true; /* can't tell: the full client looks */
  while (getline (&line, &cap, f) > 0)
    {
      unsigned maj, min;
      char *sep = strstr (line, " - "), *type, *opts, *save = NULL;
      char own[32];

      if (sep == NULL || sscanf (line, "%*u %*u %u:%u", &maj, &min) != 2 || makedev (maj, min) != dev)
        continue;
      line[strcspn (line, "\n")] = '\0';
      type = strtok_r (sep + 3, " ", &save);
      (void)strtok_r (NULL, " ", &save); /* the source */
      opts = strtok_r (NULL, " ", &save);
      if (type == NULL || opts == NULL ||
          !(strcmp (type, "fuse") == 0 || strcmp (type, "fuseblk") == 0 || strncmp (type, "fuse.", 5) == 0 ||
            strncmp (type, "fuseblk.", 8) == 0))
        break;
      snprintf (own, sizeof own, "user_id=%u", (unsigned)geteuid ());
      foreign = true;
      for (char *o = strtok_r (opts, ",", &save); o != NULL; o = strtok_r (NULL, ",", &save))
        if (strcmp (o, own) == 0 || strcmp (o, "user_id=0") == 0)
          foreign = false;
      break;
    }
  free (line);
  fclose (f);
  return foreign;
}

/* WANT (absolute) resolved as realpath(3) resolves it, into REAL (of
 * PATH_MAX), but each step looked at from what the kernel holds before
 * anything goes below it, and links read, not followed by the kernel: a
 * name is looked up only in a directory on a filesystem that answers.
 * False where a step is missing, on another user's FUSE filesystem, or
 * past 40 links. */
static bool
resolve_checked (const char *want, char *real)
{
  char rest[2 * PATH_MAX], step[PATH_MAX], target[PATH_MAX];
  dev_t last = 0;
  int links = 0;
  struct statx stx;

  if (strlen (want) >= sizeof rest)
    return false;
  strcpy (rest, want);
  strcpy (real, "/");
  if (statx (AT_FDCWD, "/", AT_STATX_DONT_SYNC, STATX_TYPE, &stx) < 0)
    return false;
  last = makedev (stx.stx_dev_major, stx.stx_dev_minor);
  if (foreign_fuse (last))
    return false;
  for (;;)
    {
      char *p = rest + strspn (rest, "/");
      size_t n = strcspn (p, "/");
      ssize_t t;
      dev_t dev;

      if (n == 0)
        return true;
      if (n == 1 && p[0] == '.')
        {
          memmove (rest, p + n, strlen (p + n) + 1);
          continue;
        }
      if (n == 2 && p[0] == '.' && p[1] == '.')
        {
          char *slash = strrchr (real, '/');
          if (slash == real)
            real[1] = '\0';
          else
            *slash = '\0';
          memmove (rest, p + n, strlen (p + n) + 1);
          continue;
        }
      if ((size_t)snprintf (step, sizeof step, "%s%s%.*s", real, strcmp (real, "/") == 0 ? "" : "/", (int)n, p) >=
          sizeof step)
        return false;
      memmove (rest, p + n, strlen (p + n) + 1);
      if (statx (AT_FDCWD, step, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC, STATX_TYPE, &stx) < 0)
        return false;
      dev = makedev (stx.stx_dev_major, stx.stx_dev_minor);
      if (dev != last && foreign_fuse (dev))
        return false;
      last = dev;
      if (!S_ISLNK (stx.stx_mode))
        {
          strcpy (real, step);
          continue;
        }
      if (++links > 40 || (t = readlink (step, target, sizeof target - 1)) <= 0 ||
          (size_t)t + 1 + strlen (rest) >= sizeof rest)
        return false;
      target[t] = '\0';
      /* the link's target, then what was left after it */
      memmove (rest + t + 1, rest, strlen (rest) + 1);
      memcpy (rest, target, (size_t)t);
      rest[t] = '/';
      if (target[0] == '/')
        strcpy (real, "/");
    }
}

/* DIR's sessions' directory, every real step of it a directory of ours or
 * root's that no other user may write (root's sticky ones, /tmp's kind,
 * on the way); fusebox/ and sessions/ ours.  An O_PATH descriptor of it,
 * or -1: the full client then says what is wrong, or makes it. */
static int
sessions_dir (void)
{
  const char *state = getenv ("XDG_STATE_HOME"), *home = getenv ("HOME");
  char want[PATH_MAX], real[PATH_MAX];
  int fd;
  char *part, *save = NULL;

  if (state != NULL && state[0] == '/')
    snprintf (want, sizeof want, "%s/fusebox/sessions", state);
  else if (home != NULL && home[0] == '/')
    snprintf (want, sizeof want, "%s/.local/state/fusebox/sessions", home);
  else
    return -1;
  if (!resolve_checked (want, real))
    return -1;
  fd = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  for (part = strtok_r (real, "/", &save); fd >= 0; part = strtok_r (NULL, "/", &save))
    {
      struct stat st;
      bool last = part == NULL;
      int next;

      if (fstat (fd, &st) < 0 || !S_ISDIR (st.st_mode) || (st.st_uid != 0 && st.st_uid != geteuid ()) ||
          ((st.st_mode & 022) != 0 && !(st.st_uid == 0 && (st.st_mode & S_ISVTX) && !last)))
        break;
      if (last)
        return fd;
      next = openat (fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      close (fd);
      fd = next;
    }
  if (fd >= 0)
    close (fd);
  return -1;
}

static int
recv_msg (int fd, Msg *m)
{
  union
  {
    struct cmsghdr align;
    char buf[CMSG_SPACE (MSG_FDS_MAX * sizeof (int))];
  } control;
  struct iovec iov = { m, sizeof *m };
  struct msghdr msg = {
    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf
  };
  ssize_t n;

  do
    n = recvmsg (fd, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  /* no message of ours carries descriptors back: any that came are closed */
  for (struct cmsghdr *cm = CMSG_FIRSTHDR (&msg); n > 0 && cm != NULL; cm = CMSG_NXTHDR (&msg, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
      for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN (0)) / sizeof (int); i++)
        {
          int got;
          memcpy (&got, CMSG_DATA (cm) + i * sizeof (int), sizeof got);
          close (got);
        }
  if (n != (ssize_t)sizeof *m || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
    return n == 0 ? 0 : -1;
  m->digest[sizeof m->digest - 1] = m->run_id[sizeof m->run_id - 1] = '\0';
  m->text[sizeof m->text - 1] = m->more[sizeof m->more - 1] = '\0';
  return 1;
}

/* One message within ANSWER_MS: 1, 0 at EOF, -1. */
static int
await_msg (int fd, Msg *m)
{
  struct pollfd p = { .fd = fd, .events = POLLIN };
  int n;

  do
    n = poll (&p, 1, ANSWER_MS);
  while (n < 0 && errno == EINTR);
  return n <= 0 ? -1 : recv_msg (fd, m);
}

static int
send_msg (int fd, const Msg *m, const int *fds, int n_fds)
{
  union
  {
    struct cmsghdr align;
    char buf[CMSG_SPACE (MSG_FDS_MAX * sizeof (int))];
  } control;
  struct iovec iov = { (void *)m, sizeof *m };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

  if (n_fds > 0)
    {
      struct cmsghdr *cm;

      memset (&control, 0, sizeof control);
      msg.msg_control = control.buf;
      msg.msg_controllen = CMSG_SPACE ((size_t)n_fds * sizeof (int));
      cm = CMSG_FIRSTHDR (&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN ((size_t)n_fds * sizeof (int));
      memcpy (CMSG_DATA (cm), fds, (size_t)n_fds * sizeof (int));
    }
  while (sendmsg (fd, &msg, MSG_NOSIGNAL) < 0)
    if (errno != EINTR)
      return -1;
  return 0;
}

static int
send_type (int fd, MsgType type)
{
  Msg m;

  memset (&m, 0, sizeof m);
  m.type = type;
  return send_msg (fd, &m, NULL, 0);
}

/* --- the command ------------------------------------------------------------------ */

/* The daemon's proof, descriptor N of its process PID, opened as the full
 * client opens it; -1. */
static int
open_proof (pid_t pid, uint64_t n)
{
  char path[64];
  struct stat st;
  int fd;

  /* a memfd, never past 0-2 (a daemon's streams) */
  if (n <= 2 || n > INT_MAX || pid <= 0)
    return -1;
  snprintf (path, sizeof path, "/proc/%d/fd/%d", (int)pid, (int)n);
  fd = open (path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0 && (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode)))
    {
      close (fd);
      fd = -1;
    }
  return fd;
}

static void
close_all (int *fds, int n)
{
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0)
      close (fds[i]);
}

/* Connected to session NAME's daemon, the command sent; STARTED came: the
 * channel.  -1: the full client is to run it (nothing was sent that could
 * run it, or the daemon said NOT_QUICK); -2 after a message: the command
 * was sent and no answer says it did not run, so it is not run again. */
static int
start (const char *name, char **command)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  struct ucred cred;
  socklen_t len = sizeof cred;
  int fds[5] = { -1, -1, -1, -1, -1 };
  int dir, ctl = -1, r;
  Msg m;

  for (int i = 0; i < 3; i++)
    if (fcntl (i, F_GETFD) < 0 || isatty (i))
      return -1;
  dir = sessions_dir ();
  if (dir < 0)
    return -1;
  if (snprintf (sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s.sock", dir, name) < (int)sizeof sa.sun_path)
    ctl = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (ctl >= 0 && connect (ctl, (struct sockaddr *)&sa, sizeof sa) < 0)
    {
      close (ctl);
      ctl = -1;
    }
  close (dir);
  /* our daemon, or the full client says whose it is */
  if (ctl < 0 || getsockopt (ctl, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != geteuid () ||
      send_type (ctl, MSG_HELLO) < 0 || await_msg (ctl, &m) <= 0 || m.type != MSG_INFO)
    goto no;
  fds[4] = open_proof (cred.pid, m.n1);
  fds[0] = fb_quick_command_memfd ((const char *const *)command, (const char *const *)environ);
  for (int i = 0; i < 3; i++)
    fds[i + 1] = fcntl (i, F_DUPFD_CLOEXEC, 3);
  if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0 || fds[3] < 0 || fds[4] < 0)
    goto no;
  memset (&m, 0, sizeof m);
  m.type = MSG_QUICK;
  if (send_msg (ctl, &m, fds, 5) < 0)
    goto no;
  close_all (fds, 5);
  r = await_msg (ctl, &m);
  if (r > 0 && m.type == MSG_STARTED)
    return ctl;
  close (ctl);
  if (r > 0 && m.type == MSG_NOT_QUICK)
    return -1;
  fprintf (stderr,
           "fusebox: run: --session %s: its daemon took the command and did not answer; it may have run: "
           "see 'fusebox runs', and stop the session with 'fusebox session stop %s'\n",
           name, name);
  return -2;

no:
  close_all (fds, 5);
  if (ctl >= 0)
    close (ctl);
  return -1;
}

/* The daemon is gone: the helper it started sees that and kills the
 * sandbox. */
static int
gone (const char *name)
{
  fprintf (stderr, "fusebox: run: the session %s ended under it; the command was stopped\n", name);
  return EXIT_SANDBOX;
}

/* The command of session NAME, started; its exit status. */
static int
supervise (const char *name, int ctl)
{
  int sfd = fb_forwarded_signalfd (), status;
  Msg m;

  /* a closed stderr is no reason to leave the command unreported */
  signal (SIGPIPE, SIG_IGN);
  for (;;)
    {
      struct pollfd p[2] = { { sfd, POLLIN, 0 }, { ctl, POLLIN, 0 } };
      int n = poll (p, 2, -1), r;

      if (n < 0 && errno != EINTR)
        return gone (name);
      if (n > 0 && (p[0].revents & POLLIN))
        {
          struct signalfd_siginfo si;
          while (read (sfd, &si, sizeof si) == (ssize_t)sizeof si)
            {
              memset (&m, 0, sizeof m);
              m.type = MSG_SIGNAL;
              m.n1 = si.ssi_signo;
              send_msg (ctl, &m, NULL, 0);
            }
        }
      if (n <= 0 || p[1].revents == 0)
        continue;
      r = recv_msg (ctl, &m);
      if (r <= 0)
        return gone (name);
      /* LOG_FULL, STOPPING: the daemon stops the command and says why at
       * the end */
      if (m.type == MSG_EXITED)
        break;
    }
  status = (int)m.n1;
  if (send_type (ctl, MSG_ENDED) < 0 || await_msg (ctl, &m) <= 0 || m.type != MSG_CLOSED)
    {
      /* the command ended, and its status came; its log's end and
       * run.json's are the daemon's, which is gone */
      fprintf (stderr,
               "fusebox: run: the session %s ended before it closed the command's log: its run.json has no "
               "end\n",
               name);
      return status;
    }
  /* what the full client would say, the daemon's lines escaped as its */
  for (char *save = NULL, *line = strtok_r (m.more, "\n", &save); line != NULL; line = strtok_r (NULL, "\n", &save))
    fprintf (stderr, "fusebox: run: %s\n", line);
  return m.status;
}

int
main (int argc, char **argv)
{
  int cmd = argc > 1 ? fb_session_quick_shape (argc - 1, argv + 1) : 0;

  if (cmd > 0)
    {
      int ctl = start (argv[3], argv + 1 + cmd);
      if (ctl >= 0)
        return supervise (argv[3], ctl);
      if (ctl == -2)
        return EXIT_SANDBOX;
    }
  return exec_main (argv);
}
