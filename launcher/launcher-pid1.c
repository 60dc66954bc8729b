/* fusebox — pid 1 of the sandbox and the exec of the command.
 *
 * The cloned child becomes pid 1 of the new pid namespace, and the kernel
 * gives that role two duties: it inherits every orphan (so it must reap, or
 * zombies pile up), and when it exits every process of the namespace gets
 * SIGKILL.  The second duty is what makes "a daemon that outlives the
 * command" impossible and "the tree dies with the supervisor" reliable.
 *
 * The loop: signals of interest are blocked and taken with sigwaitinfo(), so
 * there is no handler and no race between fork and wait.  The outer child
 * runs the same loop as a relay between the supervisor and pid 1.  SIGINT, SIGTERM,
 * SIGHUP and SIGQUIT are forwarded to the command (pid 1 itself ignores
 * default-action signals from inside its namespace, and from the host only
 * receives those it blocks or handles); SIGCHLD reaps every child; when the
 * command is reaped pid 1 exits with its status (128+N for signal N).
 *
 * Runs after the lock-down: no capabilities, seccomp on.  Async-signal-safe
 * only; the argv, envp and PATH candidates come from the parent, or, for a
 * late command, from a sealed memfd pid 1 receives once the sandbox is
 * made (below).  Before a late command arrives, a forwarded SIGINT,
 * SIGTERM, SIGHUP or SIGQUIT ends the sandbox with 128+N, as it would have
 * ended the command.
 */
#include "ipc/ipc-process-launch.h"
#include "launcher/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct FbLauncherCommand
{
  char **argv;
  char **envp;
  /* argv[0] if it has a "/", else argv[0] joined to each PATH entry */
  char **candidates;
  guint n_candidates;
  bool path_hint; /* read how many candidates to skip before searching */
};

static const char *
env_get (const char *const *envp, const char *name)
{
  size_t n = strlen (name);
  for (; envp && *envp; envp++)
    if (strncmp (*envp, name, n) == 0 && (*envp)[n] == '=')
      return *envp + n + 1;
  return NULL;
}

char **
fb_launcher_plan_path_candidates (const FbLauncherPlan *plan)
{
  extern char **environ;
  const char *const *envp = plan->envp ? plan->envp : (const char *const *)environ;
  g_autoptr (GPtrArray) candidates = g_ptr_array_new ();

  if (strchr (plan->argv[0], '/'))
    g_ptr_array_add (candidates, g_strdup (plan->argv[0]));
  else
    {
      /* execvp's search.  PATH is the sandbox's (envp), looked up inside
       * the view after pivot_root; an empty entry means the current
       * directory (POSIX). */
      const char *path = env_get (envp, "PATH");
      g_auto (GStrv) dirs = g_strsplit (path ? path : "/usr/local/bin:/usr/bin:/bin", ":", -1);
      for (char **d = dirs; *d; d++)
        g_ptr_array_add (candidates, g_build_filename (**d ? *d : ".", plan->argv[0], NULL));
    }
  g_ptr_array_add (candidates, NULL);
  return (char **)g_ptr_array_free (g_steal_pointer (&candidates), FALSE);
}

int
fb_launcher_command_new (const FbLauncherPlan *plan, FbLauncherCommand **ret_command)
{
  extern char **environ;
  const char *const *envp = plan->envp ? plan->envp : (const char *const *)environ;

  if (!plan->argv || !plan->argv[0] || !plan->argv[0][0])
    return -EINVAL;

  FbLauncherCommand *c = g_new0 (FbLauncherCommand, 1);
  c->argv = g_strdupv ((char **)plan->argv);
  c->envp = g_strdupv ((char **)envp);
  /* Built here because it allocates: the child may not. */
  c->candidates = fb_launcher_plan_path_candidates (plan);
  c->n_candidates = g_strv_length (c->candidates);
  c->path_hint = plan->path_hint;
  *ret_command = c;
  return 0;
}

void
fb_launcher_command_free (FbLauncherCommand *c)
{
  if (!c)
    return;
  g_strfreev (c->argv);
  g_strfreev (c->envp);
  g_strfreev (c->candidates);
  g_free (c);
}

/* Returns only on failure, with the errno to report: like execvp, EACCES
 * from any candidate wins over ENOENT so "found but not executable" is told
 * apart from "not found". */
static int
exec_command (const FbLauncherCommand *c, guint skip)
{
  bool saw_eacces = false;
  for (char **p = c->candidates + skip; *p; p++)
    {
      execve (*p, c->argv, c->envp);
      switch (errno)
        {
          case EACCES:
            saw_eacces = true;
            break;
          case ENOENT:
          case ENOTDIR:
          case ELOOP:
          case ENAMETOOLONG:
            break;
          default:
            return errno; /* ENOEXEC, ETXTBSY, E2BIG, ENOMEM...: this is the file */
        }
    }
  return saw_eacces ? EACCES : ENOENT;
}

/* The supervisor's fb_launcher_child_skip_candidates(): a guint32 on the
 * status socket, sent before it serves the view, so it is normally queued
 * already.  Skipping them all means "not found" (ENOENT, 127).  Anything
 * else (EOF: the supervisor is going away; a short or odd message) searches
 * every candidate, as execvp would. */
static guint
read_skip (const FbLauncherCommand *c, int status_fd)
{
  guint32 skip = 0;
  ssize_t n;

  do
    n = recv (status_fd, &skip, sizeof skip, 0);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof skip || skip > c->n_candidates)
    return 0;
  return skip;
}

static void
forward_set (sigset_t *set)
{
  sigemptyset (set);
  sigaddset (set, SIGINT);
  sigaddset (set, SIGTERM);
  sigaddset (set, SIGHUP);
  sigaddset (set, SIGQUIT);
  sigaddset (set, SIGCHLD);
}

/* The command's status (CODE) to the parent through REPORT_FD, once
 * nothing else runs in the pid namespace: everything left is killed and
 * reaped first, as the kernel would at pid 1's exit, so nothing of the
 * sandbox acts after its parent heard the command ended.  A process that
 * would not be reaped (it can't be: the sandbox's processes are pid 1's
 * uid, and SIGKILL ends a FUSE request's wait) would keep the status for
 * pid 1's exit. */
static void
report_end (int report_fd, int code)
{
  FbLauncherRecord rec = { .step = FB_LAUNCHER_STEP_ENDED, .detail = code };

  kill (-1, SIGKILL);
  for (;;)
    {
      pid_t w = waitpid (-1, NULL, __WALL);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0)
        break; /* ECHILD: pid 1 is alone */
    }
  while (send (report_fd, &rec, sizeof rec, MSG_NOSIGNAL) < 0 && errno == EINTR)
    ;
}

/* Wait for signals until PID is reaped, then exit with its status.
 * Forwarded signals go to PID; every child is reaped (pid 1 inherits the
 * sandbox's orphans).  With REPORT_FD >= 0 the status is also sent there,
 * the namespace emptied first (report_end). */
G_GNUC_NORETURN static void
wait_loop (const sigset_t *set, pid_t pid, int report_fd)
{
  for (;;)
    {
      siginfo_t info;
      int sig = sigwaitinfo (set, &info);
      if (sig < 0)
        continue; /* EINTR (a stop/continue) */
      if (sig != SIGCHLD)
        {
          kill (pid, sig);
          continue;
        }
      /* Several children may have exited for one SIGCHLD: reap them all. */
      for (;;)
        {
          int status;
          pid_t w = waitpid (-1, &status, WNOHANG);
          if (w <= 0)
            break;
          if (w != pid)
            continue; /* an orphan */
          /* For pid 1, exiting kills what the command left behind (daemons
           * included); for the relay, pid 1 is gone and so is everything. */
          if (WIFEXITED (status) || WIFSIGNALED (status))
            {
              int code = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
              if (report_fd >= 0)
                report_end (report_fd, code);
              _exit (code);
            }
        }
    }
}

/* The vfork child of a late command: STDIO (received by pid 1, above 2
 * unless pid 1's own 0-2 were closed) become 0, 1 and 2.  Each is copied
 * above 2 first, so that one already at 0-2 is neither overwritten before
 * it is read nor left close-on-exec by a dup2 onto itself. */
static void
take_stdio (const int stdio[3], int status_fd)
{
  int tmp[3];

  for (int i = 0; i < 3; i++)
    if ((tmp[i] = fcntl (stdio[i], F_DUPFD_CLOEXEC, 3)) < 0)
      {
        fb_launcher_report (status_fd, FB_LAUNCHER_STEP_STDIO, errno, i);
        _exit (FB_LAUNCHER_EXIT_SANDBOX);
      }
  for (int i = 0; i < 3; i++)
    if (dup2 (tmp[i], i) < 0)
      {
        fb_launcher_report (status_fd, FB_LAUNCHER_STEP_STDIO, errno, i);
        _exit (FB_LAUNCHER_EXIT_SANDBOX);
      }
}

/* pid 1 and the command it starts next see nothing but what is beneath
 * the sandbox's root and STDIO, its standard streams, for what they were
 * opened for (fb_launcher_confine_paths); a stream that is a directory
 * fails the launch. */
static void
confine (int status_fd, const int stdio[3])
{
  int stream = -1;
  int r = fb_launcher_confine_paths (stdio, &stream);

  /* A directory (or a path handle) is no stream: below it, or through it
   * by "..", the command would walk the host past the view, and what
   * Landlock does not handle (stat, chmod, a Unix socket's connect) would
   * reach whatever the sandbox's host id may reach. */
  if (r == -EISDIR)
    {
      fb_launcher_report (status_fd, FB_LAUNCHER_STEP_STDIO, EISDIR, stream);
      _exit (FB_LAUNCHER_EXIT_SANDBOX);
    }
  if (r < 0)
    {
      fb_launcher_report (status_fd, FB_LAUNCHER_STEP_LANDLOCK, -r, 0);
      _exit (FB_LAUNCHER_EXIT_SANDBOX);
    }
}

/* Start the command (STDIO: its 0, 1, 2; NULL: pid 1's own) and return its
 * pid; the forwarded signals and SIGCHLD must be blocked already. */
static pid_t
start_command (const FbLauncherCommand *c, int status_fd, const int *stdio)
{
  /* vfork: the command shares pid 1's memory until its exec (pid 1 waits
   * meanwhile), so the kernel neither copies the page tables of the
   * supervisor's image that pid 1 still carries nor tears that copy down
   * again at the exec; with fork that was about 0.7 ms of CPU per run
   * (docs/performance.md, Startup).  The child below only makes syscalls on
   * its own stack and the prepared command, and leaves by execve or _exit,
   * as vfork demands; errno is the one shared word it writes, and pid 1
   * does not read it after a successful vfork. */
  pid_t pid = vfork ();
  if (pid < 0)
    {
      fb_launcher_report (status_fd, FB_LAUNCHER_STEP_FORK, errno, 0);
      _exit (FB_LAUNCHER_EXIT_SANDBOX);
    }
  if (pid == 0)
    {
      if (stdio != NULL)
        take_stdio (stdio, status_fd);
      /* The command starts with default dispositions and nothing blocked,
       * whatever the supervisor had (GLib ignores SIGPIPE, for instance). */
      sigset_t none;
      struct sigaction dfl = { .sa_handler = SIG_DFL };
      for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
          sigaction (sig, &dfl, NULL);
      sigemptyset (&none);
      sigprocmask (SIG_SETMASK, &none, NULL);
      /* pid 1's death kills the namespace anyway; this also covers the gap
       * if pid 1 were ever not the namespace's init. */
      prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      int err = exec_command (c, c->path_hint ? read_skip (c, status_fd) : 0);
      fb_launcher_report (status_fd, FB_LAUNCHER_STEP_EXEC, err, 0);
      _exit (err == ENOENT ? FB_LAUNCHER_EXIT_NOT_FOUND : FB_LAUNCHER_EXIT_NOT_EXECUTABLE);
    }
  return pid;
}

void
fb_launcher_pid1_run (const FbLauncherCommand *c, int status_fd)
{
  sigset_t set;
  forward_set (&set);
  /* Exactly these blocked, before the fork: a SIGCHLD or a forwarded signal
   * that arrives before sigwaitinfo() waits in the queue instead of being
   * lost.  Everything else is let through: with default dispositions, init
   * ignores it (and only SIGKILL/SIGSTOP reach it from the host). */
  if (sigprocmask (SIG_SETMASK, &set, NULL) < 0)
    {
      fb_launcher_report (status_fd, FB_LAUNCHER_STEP_SIGNALS, errno, 0);
      _exit (FB_LAUNCHER_EXIT_SANDBOX);
    }
  confine (status_fd, (const int[3]){ 0, 1, 2 });
  pid_t pid = start_command (c, status_fd, NULL);
  /* The command holds the channel until its exec closes it: the
   * supervisor's EOF then means "executed". */
  close (status_fd);
  wait_loop (&set, pid, -1);
}

/* ---- a late command (FbLauncherPlan.late_command) ----
 *
 * pid 1 takes its command from a sealed memfd in the launch helper's format
 * (FbLaunchSpecHeader, then argc + envc + 1 NUL-terminated strings: argv,
 * the environment, the cwd; ipc/ipc-process-launch.h).  It runs locked
 * down and async-signal-safe, so it checks the memfd itself, maps it
 * read-only and builds argv, envp and the PATH candidates in anonymous
 * memory of its own: no malloc.  The seals (no write, grow or shrink) make
 * what it checked what the exec uses.  The parent reads the same memfd the
 * same way for its messages (fb_launcher_late_command_check). */

#define LATE_SEALS (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK)
/* The PATH candidates' bytes: PATH entries times argv[0] could otherwise
 * ask for terabytes of a 2 MiB spec. */
#define LATE_CANDIDATES_MAX (4 * (size_t)FB_LAUNCH_SPEC_MAX)

typedef struct
{
  const char *map; /* the memfd, read-only */
  size_t map_size;
  void *mem; /* argv, envp, the candidates and their bytes */
  size_t mem_size;
  FbLauncherCommand command; /* pointing into both */
  const char *cwd;
  guint32 umask;
} LateCommand;

static void
late_command_unmap (LateCommand *lc)
{
  if (lc->map != NULL)
    munmap ((void *)lc->map, lc->map_size);
  if (lc->mem != NULL)
    munmap (lc->mem, lc->mem_size);
  lc->map = NULL;
  lc->mem = NULL;
}

/* Async-signal-safe: map and check the memfd FD and build the command.
 * 0, or -EPROTO (not a well-formed, sealed command), -E2BIG, or the -errno
 * of a syscall; *LC is then unmapped. */
static int
late_command_map (int fd, LateCommand *lc)
{
  FbLaunchSpecHeader h;
  struct stat st;
  const char *p, *end, *argv0, *path = NULL;
  size_t n_strings, n_candidates = 1, chars = 0, n_ptrs;
  char **ptrs, *out;
  int seals, r;

  memset (lc, 0, sizeof *lc);
  seals = fcntl (fd, F_GET_SEALS);
  if (seals < 0)
    return errno == EINVAL ? -EPROTO : -errno; /* not a memfd */
  if ((seals & LATE_SEALS) != LATE_SEALS)
    return -EPROTO;
  if (fstat (fd, &st) < 0)
    return -errno;
  if (st.st_size < (off_t)sizeof h || st.st_size > FB_LAUNCH_SPEC_MAX)
    return -EPROTO;
  lc->map_size = (size_t)st.st_size;
  lc->map = mmap (NULL, lc->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (lc->map == MAP_FAILED)
    {
      lc->map = NULL;
      return -errno;
    }
  memcpy (&h, lc->map, sizeof h);
  r = -EPROTO;
  if (h.magic != FB_LAUNCH_SPEC_MAGIC || h.reserved != 0 || h.argc == 0 ||
      (guint64)h.argc + h.envc > FB_LAUNCH_STRINGS_MAX || h.strings_size != lc->map_size - sizeof h ||
      (h.umask > 0777 && h.umask != FB_LAUNCH_UMASK_KEEP))
    goto fail;
  /* exactly argc + envc + 1 strings, each with its NUL, filling the rest */
  p = lc->map + sizeof h;
  end = lc->map + lc->map_size;
  n_strings = (size_t)h.argc + h.envc + 1;
  for (size_t i = 0; i < n_strings; i++)
    {
      const char *nul = memchr (p, '\0', (size_t)(end - p));
      if (nul == NULL)
        goto fail;
      if (i >= h.argc && i < (size_t)h.argc + h.envc && path == NULL && strncmp (p, "PATH=", 5) == 0)
        path = p + 5;
      lc->cwd = p;
      p = nul + 1;
    }
  argv0 = lc->map + sizeof h;
  if (p != end || argv0[0] == '\0' || lc->cwd[0] != '/')
    goto fail;

  /* fb_launcher_plan_path_candidates(), without malloc */
  if (strchr (argv0, '/') == NULL)
    {
      if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
      n_candidates = 1;
      for (const char *q = path; *q; q++)
        n_candidates += *q == ':';
      /* each: the entry ("." for an empty one), "/", argv[0], NUL */
      chars = strlen (path) + n_candidates * (2 + strlen (argv0) + 1);
      r = -E2BIG;
      if (chars > LATE_CANDIDATES_MAX)
        goto fail;
    }
  n_ptrs = (size_t)h.argc + 1 + (size_t)h.envc + 1 + n_candidates + 1;
  lc->mem_size = n_ptrs * sizeof (char *) + chars;
  lc->mem = mmap (NULL, lc->mem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (lc->mem == MAP_FAILED)
    {
      lc->mem = NULL;
      r = -errno;
      goto fail;
    }
  ptrs = lc->mem;
  out = (char *)(ptrs + n_ptrs);
  lc->command.argv = ptrs;
  p = argv0;
  for (guint32 i = 0; i < h.argc; i++, p += strlen (p) + 1)
    *ptrs++ = (char *)p;
  *ptrs++ = NULL;
  lc->command.envp = ptrs;
  for (guint32 i = 0; i < h.envc; i++, p += strlen (p) + 1)
    *ptrs++ = (char *)p;
  *ptrs++ = NULL;
  lc->command.candidates = ptrs;
  lc->command.n_candidates = (guint)n_candidates;
  if (chars == 0)
    *ptrs++ = (char *)argv0;
  else
    for (const char *dir = path;; dir++)
      {
        const char *colon = strchr (dir, ':');
        size_t len = colon != NULL ? (size_t)(colon - dir) : strlen (dir);

        /* execvp's search; an empty entry means the current directory */
        *ptrs++ = out;
        if (len == 0)
          *out++ = '.';
        memcpy (out, dir, len);
        out += len;
        *out++ = '/';
        memcpy (out, argv0, strlen (argv0) + 1);
        out += strlen (argv0) + 1;
        if (colon == NULL)
          break;
        dir = colon;
      }
  *ptrs = NULL;
  lc->umask = h.umask;
  return 0;

fail:
  late_command_unmap (lc);
  return r;
}

int
fb_launcher_late_command_check (int spec_fd, char **ret_argv0, char **ret_cwd, char **ret_path_env)
{
  LateCommand lc;
  int r = late_command_map (spec_fd, &lc);

  if (r < 0)
    return r;
  *ret_argv0 = g_strdup (lc.command.argv[0]);
  *ret_cwd = g_strdup (lc.cwd);
  *ret_path_env = g_strdup (env_get ((const char *const *)lc.command.envp, "PATH"));
  late_command_unmap (&lc);
  return 0;
}

/* Before its command, the sandbox has nothing to forward a signal to: a
 * terminating one ends it, as it would end the command (128+N). */
static void
die_of_signal (int sig)
{
  _exit (128 + sig);
}

static const int late_terminating[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

G_GNUC_NORETURN static void
late_fail (int status_fd, FbLauncherStep step, int error)
{
  fb_launcher_report (status_fd, step, error, 0);
  _exit (FB_LAUNCHER_EXIT_SANDBOX);
}

/* The COMMAND record: exactly one Record and four descriptors (the memfd,
 * stdin, stdout, stderr) in FDS, close-on-exec. */
static void
receive_command (int status_fd, int fds[4])
{
  FbLauncherRecord rec;
  union
  {
    struct cmsghdr align;
    char buf[CMSG_SPACE (4 * sizeof (int))];
  } control;
  struct iovec iov = { .iov_base = &rec, .iov_len = sizeof rec };
  struct msghdr msg = {
    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf
  };
  struct cmsghdr *c;
  ssize_t n;

  do
    n = recvmsg (status_fd, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n == 0)
    _exit (FB_LAUNCHER_EXIT_SANDBOX); /* the parent is gone: nobody to tell */
  if (n < 0)
    late_fail (status_fd, FB_LAUNCHER_STEP_COMMAND, errno);
  c = CMSG_FIRSTHDR (&msg);
  if (n != (ssize_t)sizeof rec || rec.step != FB_LAUNCHER_STEP_COMMAND || (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) ||
      c == NULL || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN (4 * sizeof (int)) || CMSG_NXTHDR (&msg, c) != NULL)
    late_fail (status_fd, FB_LAUNCHER_STEP_COMMAND, EPROTO);
  memcpy (fds, CMSG_DATA (c), 4 * sizeof (int));
}

void
fb_launcher_pid1_run_late (int status_fd)
{
  struct sigaction die = { .sa_handler = die_of_signal }, dfl = { .sa_handler = SIG_DFL };
  sigset_t set, waiting;
  LateCommand lc;
  int fds[4], r;

  /* Until the command comes, the terminating signals the relay forwards
   * are handled (a handler also makes init take them from the host, where
   * a default disposition would drop them: pid_namespaces(7)); one that
   * came while the sandbox was made waited blocked, and is handled as soon
   * as they are unblocked here. */
  forward_set (&set);
  sigfillset (&die.sa_mask);
  sigemptyset (&waiting);
  sigaddset (&waiting, SIGCHLD);
  for (size_t i = 0; i < G_N_ELEMENTS (late_terminating); i++)
    if (sigaction (late_terminating[i], &die, NULL) < 0)
      late_fail (status_fd, FB_LAUNCHER_STEP_SIGNALS, errno);
  if (sigprocmask (SIG_SETMASK, &waiting, NULL) < 0)
    late_fail (status_fd, FB_LAUNCHER_STEP_SIGNALS, errno);

  fb_launcher_report (status_fd, FB_LAUNCHER_STEP_READY, 0, 0);
  receive_command (status_fd, fds);

  /* From here on they are the command's: blocked first (one that comes
   * now waits for wait_loop, which forwards it), then back to the default,
   * with which init ignores them from inside its namespace again. */
  if (sigprocmask (SIG_SETMASK, &set, NULL) < 0)
    late_fail (status_fd, FB_LAUNCHER_STEP_SIGNALS, errno);
  for (size_t i = 0; i < G_N_ELEMENTS (late_terminating); i++)
    sigaction (late_terminating[i], &dfl, NULL);

  if ((r = late_command_map (fds[0], &lc)) < 0)
    late_fail (status_fd, FB_LAUNCHER_STEP_COMMAND, -r);
  close (fds[0]);
  if (lc.umask != FB_LAUNCH_UMASK_KEEP)
    umask ((mode_t)lc.umask);
  if (chdir (lc.cwd) < 0)
    late_fail (status_fd, FB_LAUNCHER_STEP_CHDIR, errno);

  confine (status_fd, &fds[1]);
  pid_t pid = start_command (&lc.command, status_fd, &fds[1]);
  /* The command has exec'd (or failed, and said so first: vfork returns
   * after either): pid 1 keeps none of its streams, so their readers see
   * EOF when the command's processes close them, and nothing of its
   * memory.  It keeps the channel (close-on-exec: the command never had
   * it), says STARTED where another pid 1 closes it, and tells the
   * command's end on it. */
  for (int i = 1; i < 4; i++)
    close (fds[i]);
  late_command_unmap (&lc);
  fb_launcher_report (status_fd, FB_LAUNCHER_STEP_STARTED, 0, 0);
  wait_loop (&set, pid, status_fd);
}

void
fb_launcher_relay_run (pid_t pid)
{
  sigset_t set;
  forward_set (&set);
  sigprocmask (SIG_SETMASK, &set, NULL);
  wait_loop (&set, pid, -1);
}
