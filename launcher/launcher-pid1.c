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
 * only; the argv, envp and PATH candidates come from the parent.
 */
#include "launcher/launcher.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
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

/* Wait for signals until PID is reaped, then exit with its status.
 * Forwarded signals go to PID; every child is reaped (pid 1 inherits the
 * sandbox's orphans). */
G_GNUC_NORETURN static void
wait_loop (const sigset_t *set, pid_t pid)
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
          if (WIFEXITED (status))
            _exit (WEXITSTATUS (status));
          if (WIFSIGNALED (status))
            _exit (128 + WTERMSIG (status));
        }
    }
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

  /* The command holds the channel until its exec closes it: the
   * supervisor's EOF then means "executed". */
  close (status_fd);
  wait_loop (&set, pid);
}

void
fb_launcher_relay_run (pid_t pid)
{
  sigset_t set;
  forward_set (&set);
  sigprocmask (SIG_SETMASK, &set, NULL);
  wait_loop (&set, pid);
}
