/* fusebox run --session — the ready sandbox: the next command's sandbox,
 * made before the command comes.
 *
 * A command of a session still gets fresh namespaces, pid 1 and lock-down
 * of its own (launcher-cmd-session.c); making them is most of its start.
 * So the session's daemon keeps one sandbox made ahead, joined to its
 * view and locked down, whose pid 1 waits for a command (the launch
 * helper's late command, ipc/ipc-process-launch.h: FB_LAUNCH_SPEC_LATE,
 * READY, COMMAND), and the next `run --session` hands it its argv,
 * environment, working directory, umask and standard streams instead of
 * making one.  The daemon runs threads, so the sandbox is made by the
 * launch helper (`fusebox-launch`, started with posix_spawn: no argument,
 * an empty environment, "/"), which stays as its parent and reports its
 * end.
 *
 * Before its command the sandbox is no one's: pid 1's mounts and
 * pivot_root go to the session's own log, as any access of no command
 * does (ipc/ipc-view-share.c); nothing of any command runs in it, and no
 * command's data reaches it.  A command takes it only if its caller is in
 * the situation the sandbox was made in (fb_session_caller_matches): a
 * sandbox made by the daemon inherits the daemon's cgroup, limits,
 * namespaces, credentials and LSM label, not the caller's, so a caller
 * that differs in any of them gets a sandbox of its own, made as before,
 * and run.json says why (ready_sandbox_why).
 *
 * Threads: the daemon's loop only. */
#include "ipc/ipc-process-launch.h"
#include "ipc/ipc.h"
#include "launcher/launcher-private.h"
#include "launcher/launcher.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

typedef enum
{
  READY_MAKING,  /* the helper makes it */
  READY_WAITING, /* made and locked down: pid 1 waits for a command */
  READY_RUNNING, /* a command's */
  READY_GONE,    /* the helper ended, or failed before a command */
} ReadyState;

struct FbSessionReady
{
  GPid pid;  /* the launch helper */
  int pidfd; /* its pidfd: a signal never reaches another process that got its pid once it was reaped */
  int sock;  /* its channel; -1 once it ended */
  guint watch;
  int pidns;    /* JOINED's: the sandbox's pid namespace */
  int proxy_fd; /* PROXY's (a network allowlist): the socket it listens on */
  ReadyState state;
  char *why; /* what failed, before a command */
  bool end_told;
  FbSessionReadyFunc changed; /* before a command: ready, or gone */
  FbSessionReadyEndFunc ended;
  gpointer data;
};

static void
helper_reaped (GPid pid, int status, gpointer data)
{
  (void)status;
  (void)data;
  g_spawn_close_pid (pid);
}

/* SIGKILL to the helper, through its pidfd: once the child watch has
 * reaped it, its pid may be another process's. */
static void
helper_kill (FbSessionReady *r)
{
  if (r->pidfd >= 0)
    (void)syscall (SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0);
}

static void
tell_end (FbSessionReady *r, int status, const char *message)
{
  if (r->end_told || r->ended == NULL)
    return;
  r->end_told = true;
  r->ended (r, status, message, r->data);
}

static void
gone (FbSessionReady *r, const char *why)
{
  bool was_running = r->state == READY_RUNNING;

  g_clear_handle_id (&r->watch, g_source_remove);
  fb_fd_close (&r->sock);
  r->state = READY_GONE;
  if (r->why == NULL && why != NULL)
    r->why = g_strdup (why);
  if (was_running)
    tell_end (r, FB_LAUNCHER_EXIT_SANDBOX, why);
  else if (r->changed != NULL)
    r->changed (r, r->data);
}

static gboolean
on_record (int fd, GIOCondition cond, gpointer data)
{
  FbSessionReady *r = data;

  (void)cond;
  for (;;)
    {
      FbLaunchRecord rec;
      int fds[2] = { -1, -1 };
      int n = fb_launch_record_recv (fd, &rec, fds);

      if (n == -EAGAIN)
        return G_SOURCE_CONTINUE;
      if (n <= 0)
        {
          r->watch = 0;
          gone (r, "the launch helper ended without a word");
          return G_SOURCE_REMOVE;
        }
      switch ((FbLaunchRecordType)rec.type)
        {
          case FB_LAUNCH_PROXY:
            if (r->proxy_fd < 0)
              r->proxy_fd = g_steal_fd (&fds[0]);
            break;
          case FB_LAUNCH_JOINED:
            if (r->pidns < 0 && fds[0] >= 0)
              {
                FbLaunchRecord go;

                r->pidns = g_steal_fd (&fds[0]);
                /* no command's yet: what pid 1 does in the view until
                 * one takes it is the session's (see the top) */
                memset (&go, 0, sizeof go);
                go.type = FB_LAUNCH_GO;
                if (fb_send_fds (fd, &go, sizeof go, NULL, 0, MSG_DONTWAIT) < 0)
                  {
                    r->watch = 0;
                    gone (r, "the launch helper could not be told to go on");
                    return G_SOURCE_REMOVE;
                  }
              }
            break;
          case FB_LAUNCH_READY:
            if (r->state == READY_MAKING && r->pidns >= 0)
              {
                r->state = READY_WAITING;
                if (r->changed != NULL)
                  r->changed (r, r->data);
              }
            break;
          case FB_LAUNCH_FAILED:
            if (r->state == READY_RUNNING)
              tell_end (r, rec.value, rec.text);
            else
              {
                r->watch = 0;
                gone (r, rec.text);
                return G_SOURCE_REMOVE;
              }
            break;
          case FB_LAUNCH_EXITED:
            if (r->state == READY_RUNNING)
              tell_end (r, rec.value, NULL);
            break;
          case FB_LAUNCH_EXEC:
          case FB_LAUNCH_MOUNTED:
          case FB_LAUNCH_SIGNAL:
          case FB_LAUNCH_SPEC:
          case FB_LAUNCH_KEEP:
          case FB_LAUNCH_KEPT:
          case FB_LAUNCH_GO:
          case FB_LAUNCH_VIEW_REFRESH:
          case FB_LAUNCH_COMMAND:
            break;
        }
      for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
          close (fds[i]);
    }
}

FbSessionReady *
fb_session_ready_start (const char *helper, const int view_ns[2], guint32 uid, guint32 gid, guint32 network,
                        FbSessionReadyFunc changed, gpointer data, GError **error)
{
  g_autoptr (FbSessionReady) r = g_new0 (FbSessionReady, 1);

  r->sock = r->pidns = r->proxy_fd = r->pidfd = -1;
  r->changed = changed;
  r->data = data;
  r->pid = fb_launch_helper_spawn_late (helper, network, uid, gid, view_ns, &r->sock, error);
  if (r->pid == 0)
    return NULL;
  /* before the loop runs again: only its child watch reaps it */
  r->pidfd = (int)syscall (SYS_pidfd_open, r->pid, 0);
  g_child_watch_add (r->pid, helper_reaped, NULL);
  r->watch = g_unix_fd_add (r->sock, G_IO_IN | G_IO_HUP | G_IO_ERR, on_record, r);
  return g_steal_pointer (&r);
}

bool
fb_session_ready_is_waiting (const FbSessionReady *r)
{
  return r->state == READY_WAITING && r->sock >= 0;
}

GPid
fb_session_ready_get_maker (const FbSessionReady *r)
{
  return r->pid;
}

const char *
fb_session_ready_get_why (const FbSessionReady *r)
{
  return r->why;
}

int
fb_session_ready_get_pidns (const FbSessionReady *r)
{
  return r->pidns;
}

int
fb_session_ready_take_proxy_fd (FbSessionReady *r)
{
  return g_steal_fd (&r->proxy_fd);
}

int
fb_session_ready_run (FbSessionReady *r, int spec_fd, const int stdio[3], FbSessionReadyEndFunc ended, gpointer data)
{
  FbLaunchRecord rec;
  int fds[4] = { spec_fd, stdio[0], stdio[1], stdio[2] };

  if (!fb_session_ready_is_waiting (r))
    return -ESRCH;
  memset (&rec, 0, sizeof rec);
  rec.type = FB_LAUNCH_COMMAND;
  if (fb_send_fds (r->sock, &rec, sizeof rec, fds, 4, MSG_DONTWAIT) < 0)
    return -errno;
  r->state = READY_RUNNING;
  r->changed = NULL;
  r->ended = ended;
  r->data = data;
  return 0;
}

void
fb_session_ready_signal (FbSessionReady *r, int sig)
{
  FbLaunchRecord rec;

  if (r->sock < 0)
    return;
  memset (&rec, 0, sizeof rec);
  rec.type = FB_LAUNCH_SIGNAL;
  rec.value = sig;
  /* a full socket: the helper is not reading; SIGKILL is sure anyway */
  if (fb_send_fds (r->sock, &rec, sizeof rec, NULL, 0, MSG_DONTWAIT) < 0 && sig == SIGKILL)
    helper_kill (r);
}

/* The helper is killed, and with it the sandbox: its outer child dies
 * with it (PR_SET_PDEATHSIG), and pid 1 with the outer child; the child
 * watch reaps it. */
void
fb_session_ready_free (FbSessionReady *r)
{
  if (r == NULL)
    return;
  g_clear_handle_id (&r->watch, g_source_remove);
  if (r->sock >= 0)
    helper_kill (r);
  fb_fd_close (&r->pidfd);
  fb_fd_close (&r->sock);
  fb_fd_close (&r->pidns);
  fb_fd_close (&r->proxy_fd);
  g_free (r->why);
  g_free (r);
}

/* --- whether a caller is in the situation the daemon is in --------------------------- */

static char *
read_text (int dirfd, const char *name)
{
  g_autofree char *buf = g_malloc (65536);
  int fd = openat (dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  gsize len = 0;

  if (fd < 0)
    return NULL;
  for (;;)
    {
      ssize_t n = read (fd, buf + len, 65535 - len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      len += (gsize)n;
      if (len == 65535)
        break;
    }
  close (fd);
  buf[len] = '\0';
  return g_steal_pointer (&buf);
}

/* The value of "NAME:" in a /proc/PID/status text, or NULL. */
static char *
status_field (const char *status, const char *name)
{
  gsize n = strlen (name);

  for (const char *line = status; line != NULL && *line != '\0';)
    {
      const char *end = strchr (line, '\n');
      if (strncmp (line, name, n) == 0 && line[n] == ':')
        return g_strndup (line + n + 1, end != NULL ? (gsize)(end - line - n - 1) : strlen (line + n + 1));
      line = end != NULL ? end + 1 : NULL;
    }
  return NULL;
}

/* Fields 18-19 (priority, nice) and 40-41 (rt_priority, policy) of
 * /proc/PID/stat, after the command name, which may hold anything. */
static char *
stat_sched (const char *stat)
{
  const char *p = stat != NULL ? strrchr (stat, ')') : NULL;
  g_auto (GStrv) f = p != NULL ? g_strsplit (p + 2, " ", -1) : NULL;

  /* f[0] is field 3 (state) */
  if (f == NULL || g_strv_length (f) < 39)
    return NULL;
  return g_strdup_printf ("%s %s %s %s", f[15], f[16], f[37], f[38]);
}

/* What a sandbox made by a process inherits from it: each item as text
 * (describe_process: a field of /proc/PID/status where it starts with a
 * capital, a file of /proc/PID, a namespace's identity, or "sched"), with
 * what a message calls it.  OF_SANDBOX: read from the sandbox's pid 1,
 * which the command inherits from, not from its maker: any process of
 * the same user may change these on the maker after the sandbox was made
 * (renice, prlimit --pid, taskset, oom_score_adj, a cgroup it may write:
 * an outside review made a confined caller match a maker it had changed
 * so, and ran in the sandbox the maker made before), while on pid 1 it
 * could only narrow what the command gets (a limit lowered, nice raised),
 * or what any process of its own may do for itself (affinity, cgroup).
 * The rest differ on pid 1 by design (its capabilities, seccomp filter,
 * namespaces), and no process of that user may change them on another. */
static const struct
{
  const char *item, *label;
  bool of_sandbox;
} inherited[] = {
  { "Uid", "user ids" },
  { "Gid", "group ids" },
  { "Groups", "supplementary groups" },
  { "CapInh", "inheritable capabilities" },
  { "CapPrm", "permitted capabilities" },
  { "CapEff", "effective capabilities" },
  { "CapBnd", "capability bounding set" },
  { "CapAmb", "ambient capabilities" },
  { "NoNewPrivs", "no_new_privs" },
  { "Seccomp", "seccomp mode" },
  { "Seccomp_filters", "seccomp filters" },
  { "Speculation_Store_Bypass", "speculation control" },
  { "SpeculationIndirectBranch", "indirect branch speculation control" },
  { "Cpus_allowed_list", "CPU affinity", true },
  { "Mems_allowed_list", "memory node affinity", true },
  { "THP_enabled", "transparent huge pages setting" },
  { "cgroup", "cgroup", true },
  { "limits", "resource limits", true },
  { "attr/current", "LSM label" },
  { "oom_score_adj", "OOM score adjustment", true },
  { "loginuid", "audit login uid" },
  { "sessionid", "audit session" },
  { "sched", "scheduling (nice, policy, priority)", true },
  { "ns/cgroup", "cgroup namespace" },
  { "ns/ipc", "IPC namespace" },
  { "ns/mnt", "mount namespace" },
  { "ns/net", "network namespace" },
  { "ns/pid", "pid namespace" },
  { "ns/time", "time namespace" },
  { "ns/user", "user namespace" },
  { "ns/uts", "UTS namespace" },
};

static bool
is_status_field (const char *item)
{
  return g_ascii_isupper (item[0]);
}

static char *
describe_process (int proc_dir, const char *status, const char *item)
{
  if (g_str_has_prefix (item, "ns/"))
    {
      struct stat st;
      if (fstatat (proc_dir, item, &st, 0) < 0)
        return NULL;
      return g_strdup_printf ("%ju:%ju", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
    }
  if (strcmp (item, "sched") == 0)
    {
      g_autofree char *stat = read_text (proc_dir, "stat");
      return stat_sched (stat);
    }
  if (is_status_field (item))
    return status != NULL ? status_field (status, item) : NULL;
  return read_text (proc_dir, item);
}

/* Pid 1 of the sandbox whose pid namespace is PIDNS, as we name it
 * (NS_GET_PID_FROM_PIDNS, Linux 6.10), and a pidfd of it; 0 if the
 * kernel can't say. */
static pid_t
sandbox_pid1 (int pidns, int *ret_pidfd)
{
  int pid = pidns >= 0 ? ioctl (pidns, _IOR (0xb7, 0x6, int) /* NS_GET_PID_FROM_PIDNS */, 1) : -1;

  *ret_pidfd = pid > 0 ? (int)syscall (SYS_pidfd_open, pid, 0) : -1;
  return *ret_pidfd >= 0 ? pid : 0;
}

bool
fb_session_caller_matches (int sock, GPid maker, int sandbox_pidns, char **ret_why)
{
  struct ucred cred;
  socklen_t len = sizeof cred;
  int pidfd = -1, self = -1, peer = -1, pid1_fd = -1, sandbox = -1;
  pid_t pid1;
  char path[64];
  const char *differs = NULL;
  g_autofree char *my_status = NULL, *their_status = NULL, *pid1_status = NULL;

  len = sizeof pidfd;
  if (getsockopt (sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0 || pidfd < 0)
    {
      *ret_why = g_strdup ("the kernel does not name the caller's process (SO_PEERPIDFD, Linux 6.5)");
      return false;
    }
  len = sizeof cred;
  if (getsockopt (sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid <= 0)
    {
      close (pidfd);
      *ret_why = g_strdup ("the caller's process is not known");
      return false;
    }
  g_snprintf (path, sizeof path, "/proc/%d", (int)maker);
  self = open (path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  g_snprintf (path, sizeof path, "/proc/%d", (int)cred.pid);
  peer = open (path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  my_status = self >= 0 ? read_text (self, "status") : NULL;
  their_status = peer >= 0 ? read_text (peer, "status") : NULL;
  /* what the command will inherit, where the kernel names pid 1; else
   * the maker's (the weaker check, on kernels before 6.10) */
  pid1 = sandbox_pid1 (sandbox_pidns, &pid1_fd);
  if (pid1 > 0)
    {
      g_snprintf (path, sizeof path, "/proc/%d", (int)pid1);
      sandbox = open (path, O_PATH | O_DIRECTORY | O_CLOEXEC);
      pid1_status = sandbox >= 0 ? read_text (sandbox, "status") : NULL;
    }

  for (gsize i = 0; self >= 0 && peer >= 0 && differs == NULL && i < G_N_ELEMENTS (inherited); i++)
    {
      bool of_pid1 = inherited[i].of_sandbox && sandbox >= 0;
      g_autofree char *mine =
        describe_process (of_pid1 ? sandbox : self, of_pid1 ? pid1_status : my_status, inherited[i].item);
      g_autofree char *theirs = describe_process (peer, their_status, inherited[i].item);

      /* missing for both: what this kernel has not (no LSM's label, no
       * audit, no time namespaces) */
      if (g_strcmp0 (mine, theirs) != 0)
        differs = inherited[i].label;
    }
  /* its I/O priority (ioprio_get: IOPRIO_WHO_PROCESS) */
  if (differs == NULL &&
      syscall (SYS_ioprio_get, 1, pid1 > 0 ? (int)pid1 : (int)maker) != syscall (SYS_ioprio_get, 1, (int)cred.pid))
    differs = "I/O priority";
  /* neither under a seccomp filter: one's filters can't be compared with
   * another's, and a sandbox made by the daemon would not have the
   * caller's */
  if (differs == NULL)
    {
      g_autofree char *mine = describe_process (self, my_status, "Seccomp");
      if (mine == NULL || strcmp (g_strstrip (mine), "0") != 0)
        differs = "seccomp filter (the session's daemon has one)";
    }
  /* all that was read is the caller's: its pid not reaped and reused meanwhile */
  if (differs == NULL && (self < 0 || peer < 0 || syscall (SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0))
    differs = "process (it ended)";
  /* and pid 1 was the sandbox's all along: its pidfd was taken before */
  if (differs == NULL && pid1 > 0 && (sandbox < 0 || syscall (SYS_pidfd_send_signal, pid1_fd, 0, NULL, 0) < 0))
    differs = "sandbox (its pid 1 ended)";
  if (sandbox >= 0)
    close (sandbox);
  if (pid1_fd >= 0)
    close (pid1_fd);
  if (self >= 0)
    close (self);
  if (peer >= 0)
    close (peer);
  close (pidfd);
  if (differs != NULL)
    {
      *ret_why = g_strdup_printf ("the caller's %s differs from that of the sandbox the session made ahead "
                                  "(as its pid 1 and its maker, the launch helper, have it)",
                                  differs);
      return false;
    }
  return true;
}
