/* fusebox — the launch: clone(2) into new namespaces, and the parent's side
 * of it (status channel, waiting, messages).
 *
 * Design (see launcher.h for the contract, docs/security.md for the why):
 *  - The parent prepares everything the children need — map lines, the
 *    mount plan, the capability state, the seccomp program, argv/envp/PATH —
 *    then clones the outer child with CLONE_NEWUSER | CLONE_NEWNS |
 *    CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP (| CLONE_NEWNET).  The
 *    new user namespace owns the others, so the child holds every capability
 *    over them and none over the host.
 *  - Identity (docs/security.md, "Identity"): the parent writes the outer
 *    child's maps, one uid and one gid each, to the host ids of
 *    FbLauncherIdentity: the caller's own, or the overflow ids for a caller
 *    that is the host's root, so that no sandboxed process is ever the
 *    host's root (a procfs's sysctls, device nodes and magic links check
 *    that uid).  The parent writes them because a map to an id other than
 *    the writer's own needs CAP_SETUID/CAP_SETGID over the parent namespace
 *    in the writer and in the file's opener (new_idmap_permitted()), which
 *    nothing inside the new namespace has.  The child sends its /proc
 *    directory, waits for the parent's word, opens /dev/fuse while it is
 *    still the caller on the host, drops a root caller's groups, takes its
 *    ids inside (capabilities kept for the mounts), and only then touches
 *    anything else.
 *  - The outer child then brings loopback up, mounts the root, clones pid 1
 *    with CLONE_NEWPID, locks itself down and relays signals and the exit
 *    status.  pid 1 mounts /proc and /dev, pivots, locks down and runs the
 *    tiny init of launcher-pid1.c.  (Why two processes: launcher.h.)
 *  - Both report on a close-on-exec SOCK_SEQPACKET socket: a ROOT_MOUNTED
 *    record (the sync point, carrying the FUSE fd for a FUSE root), a failure
 *    record {step, errno, detail} before _exit(125/126/127), or nothing until
 *    the command's exec closes the last child-side end.
 *  - The clones are raw syscalls without a stack (fork semantics): glibc's
 *    clone() wants a stack and a function, and fork() can't take namespace
 *    flags.  The children never return into the parent's code and call only
 *    async-signal-safe functions; the parent must be single-threaded to start
 *    with, which is the caller's promise (launcher.h).
 *  - All signals are blocked around the clone, so no handler of the parent
 *    (GLib's, say) runs in a child before it resets dispositions.
 */
#include "fs/fs.h"
#include "launcher/launcher.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

typedef FbLauncherRecord Record;

struct FbLauncherChild
{
  pid_t pid;
  int pidfd;
  int status_fd; /* read end; -1 after EOF */
  bool mounted;
  int fuse_fd; /* received with ROOT_MOUNTED, until wait_mounted hands it out */
  bool executed;
  bool failed;
  bool late;         /* plan.late_command */
  bool ready;        /* late: pid 1 reported READY */
  bool command_sent; /* late: send_command() gave pid 1 its command, so EOF is its exec */
  bool ended;        /* late: pid 1 reported the command's status (ENDED), its pid namespace emptied */
  int ended_code;    /* that status: the exit code, 128+N for signal N */
  int kept_fds[3];   /* KEEP_VIEW: the user and mount namespaces and the refresher's socket, until wait_kept */
  int proxy_fd;      /* PROXY_SOCKET's, until take_proxy_fd hands it out */
  bool reaped;
  int exit_code;
  FbLauncherFailure failure;
  /* for messages */
  FbLauncherRootKind root_kind;
  char *root_dir;
  char *fuse_device;
  char *cwd;
  char *argv0;
  char *path_env;
  guint32 uid, gid;
  FbLauncherIdentity identity;
  FbLauncherNetwork network;
};

/* What the children need, built before the clone. */
typedef struct
{
  int status_fd;    /* child-side end of the status socket, >= 3, close-on-exec */
  int parent_pidfd; /* to notice a parent that died before PDEATHSIG was set; -1 if unsupported */
  int stdio[3];
  char *uid_map; /* written by the parent (write_ids) */
  char *gid_map;
  bool root_caller; /* setgroups left allowed, for the child to clear its groups */
  guint32 uid, gid; /* inside */
  bool new_net;
  guint16 proxy_port; /* new_net: listen at 127.0.0.1:proxy_port for the parent (proxy_listen) */
  bool keep_view;     /* mount the root, hand back the namespaces, exit */
  bool late;          /* pid 1 waits for its command (fb_launcher_pid1_run_late) */
  int join_fds[2];    /* a kept view's user and mount namespaces, or -1 */
  const char *cwd;
  FbLauncherMounts *mounts;
  FbLauncherLimits *limits;
  FbLauncherLockdown *lockdown;
  FbLauncherSeccomp *seccomp;
  FbLauncherCommand *command;
} Prepared;

void
fb_launcher_plan_init (FbLauncherPlan *plan)
{
  memset (plan, 0, sizeof *plan);
  plan->root_kind = FB_LAUNCHER_ROOT_HOST_DIR;
  plan->uid = FB_LAUNCHER_ID_CALLER;
  plan->gid = FB_LAUNCHER_ID_CALLER;
  plan->network = FB_LAUNCHER_NETWORK_NONE;
  plan->stdin_fd = plan->stdout_fd = plan->stderr_fd = -1;
  plan->join_userns_fd = plan->join_mntns_fd = -1;
}

const char *
fb_launcher_network_to_string (FbLauncherNetwork network)
{
  switch (network)
    {
      case FB_LAUNCHER_NETWORK_NONE:
        return "none";
      case FB_LAUNCHER_NETWORK_HOST:
        return "host";
    }
  return "unknown";
}

bool
fb_launcher_network_from_string (const char *s, FbLauncherNetwork *ret_network)
{
  if (g_strcmp0 (s, "none") == 0)
    *ret_network = FB_LAUNCHER_NETWORK_NONE;
  else if (g_strcmp0 (s, "host") == 0)
    *ret_network = FB_LAUNCHER_NETWORK_HOST;
  else
    return false;
  return true;
}

static const char *const step_names[FB_LAUNCHER_STEP_N] = {
  [FB_LAUNCHER_STEP_NONE] = "none",
  [FB_LAUNCHER_STEP_CLONE] = "clone",
  [FB_LAUNCHER_STEP_PARENT_GONE] = "parent-gone",
  [FB_LAUNCHER_STEP_IDS_READY] = "ids-ready",
  [FB_LAUNCHER_STEP_SETGROUPS] = "setgroups",
  [FB_LAUNCHER_STEP_UID_MAP] = "uid-map",
  [FB_LAUNCHER_STEP_GID_MAP] = "gid-map",
  [FB_LAUNCHER_STEP_DROP_GROUPS] = "drop-groups",
  [FB_LAUNCHER_STEP_SET_IDS] = "set-ids",
  [FB_LAUNCHER_STEP_LOOPBACK] = "loopback",
  [FB_LAUNCHER_STEP_MOUNT_SLAVE] = "mount-slave",
  [FB_LAUNCHER_STEP_OPEN_ROOT] = "open-root",
  [FB_LAUNCHER_STEP_OPEN_DEVICE] = "open-device",
  [FB_LAUNCHER_STEP_OPEN_FUSE] = "open-fuse",
  [FB_LAUNCHER_STEP_STAGING] = "staging",
  [FB_LAUNCHER_STEP_MOUNT_ROOT] = "mount-root",
  [FB_LAUNCHER_STEP_ROOT_READONLY] = "root-readonly",
  [FB_LAUNCHER_STEP_ROOT_MOUNTED] = "root-mounted",
  [FB_LAUNCHER_STEP_SEND_FUSE_FD] = "send-fuse-fd",
  [FB_LAUNCHER_STEP_CLONE_PID] = "clone-pid",
  [FB_LAUNCHER_STEP_MOUNT_PROC] = "mount-proc",
  [FB_LAUNCHER_STEP_LIMITS] = "limits",
  [FB_LAUNCHER_STEP_PROC_COVER] = "proc-cover",
  [FB_LAUNCHER_STEP_MOUNT_DEV] = "mount-dev",
  [FB_LAUNCHER_STEP_BIND_DEVICE] = "bind-device",
  [FB_LAUNCHER_STEP_MOUNT_DEVPTS] = "mount-devpts",
  [FB_LAUNCHER_STEP_DEV_LINK] = "dev-link",
  [FB_LAUNCHER_STEP_MOUNT_SHM] = "mount-shm",
  [FB_LAUNCHER_STEP_DEV_READONLY] = "dev-readonly",
  [FB_LAUNCHER_STEP_PIVOT_ROOT] = "pivot-root",
  [FB_LAUNCHER_STEP_DETACH_OLD_ROOT] = "detach-old-root",
  [FB_LAUNCHER_STEP_CHDIR] = "chdir",
  [FB_LAUNCHER_STEP_SETSID] = "setsid",
  [FB_LAUNCHER_STEP_PDEATHSIG] = "pdeathsig",
  [FB_LAUNCHER_STEP_DUMPABLE] = "dumpable",
  [FB_LAUNCHER_STEP_SECUREBITS] = "securebits",
  [FB_LAUNCHER_STEP_DROP_CAPS] = "drop-caps",
  [FB_LAUNCHER_STEP_VERIFY_CAPS] = "verify-caps",
  [FB_LAUNCHER_STEP_NO_NEW_PRIVS] = "no-new-privs",
  [FB_LAUNCHER_STEP_CLOSE_FDS] = "close-fds",
  [FB_LAUNCHER_STEP_SECCOMP] = "seccomp",
  [FB_LAUNCHER_STEP_SIGNALS] = "signals",
  [FB_LAUNCHER_STEP_FORK] = "fork",
  [FB_LAUNCHER_STEP_STDIO] = "stdio",
  [FB_LAUNCHER_STEP_EXEC] = "exec",
  [FB_LAUNCHER_STEP_JOIN_VIEW] = "join-view",
  [FB_LAUNCHER_STEP_VIEW_USERNS] = "view-userns",
  [FB_LAUNCHER_STEP_VIEW_MNTNS] = "view-mntns",
  [FB_LAUNCHER_STEP_VIEW_REFRESH] = "view-refresh",
  [FB_LAUNCHER_STEP_VIEW_JOINED] = "view-joined",
  [FB_LAUNCHER_STEP_PROXY_LISTEN] = "proxy-listen",
  [FB_LAUNCHER_STEP_PROXY_SOCKET] = "proxy-socket",
  [FB_LAUNCHER_STEP_READY] = "ready",
  [FB_LAUNCHER_STEP_COMMAND] = "command",
  [FB_LAUNCHER_STEP_STARTED] = "started",
  [FB_LAUNCHER_STEP_ENDED] = "ended",
  [FB_LAUNCHER_STEP_LANDLOCK] = "landlock",
};

const char *
fb_launcher_step_to_string (FbLauncherStep step)
{
  if ((int)step < 0 || step >= FB_LAUNCHER_STEP_N || !step_names[step])
    return "unknown";
  return step_names[step];
}

int
fb_launcher_failure_exit_code (const FbLauncherFailure *failure)
{
  if (failure->step == FB_LAUNCHER_STEP_EXEC)
    return failure->error == ENOENT ? FB_LAUNCHER_EXIT_NOT_FOUND : FB_LAUNCHER_EXIT_NOT_EXECUTABLE;
  return FB_LAUNCHER_EXIT_SANDBOX;
}

/* ---- the child's side: async-signal-safe only ---- */

void
fb_launcher_report (int status_fd, FbLauncherStep step, int error, int detail)
{
  Record rec = { .step = step, .error = error, .detail = detail };
  ssize_t n;
  do
    n = send (status_fd, &rec, sizeof rec, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
}

int
fb_launcher_report_fd (int status_fd, FbLauncherStep step, int fd)
{
  Record rec = { .step = step };

  return fb_send_fds (status_fd, &rec, sizeof rec, &fd, 1, 0);
}

/* ---- identity ---- */

static guint32
read_overflow_id (const char *path)
{
  g_autofree char *text = NULL;
  guint64 v;

  if (g_file_get_contents (path, &text, NULL, NULL) &&
      g_ascii_string_to_unsigned (g_strstrip (text), 10, 0, G_MAXUINT32 - 1, &v, NULL))
    return (guint32)v;
  return 65534;
}

void
fb_launcher_identity_get (FbLauncherIdentity *ret_identity)
{
  guint32 euid = geteuid ();
  guint32 egid = getegid ();
  guint32 overflow_uid = read_overflow_id ("/proc/sys/kernel/overflowuid");
  guint32 overflow_gid = read_overflow_id ("/proc/sys/kernel/overflowgid");
  struct stat st;
  bool root;

  /* Are we the host's root?  Not only uid 0 of the initial namespace: uid
   * 1000 of `bwrap --unshare-user --uid 1000` run by root is the same kernel
   * uid.  The sysctl tree belongs to that uid in every procfs, shown in our
   * namespace's ids, so its owner being our euid says it.  Where the
   * namespace does not map it, the owner shows as the overflow id, which is
   * then not a sign.  Without /proc/sys, uid 0 counts as root. */
  if (stat ("/proc/sys/kernel", &st) == 0)
    root = st.st_uid == euid && euid != overflow_uid;
  else
    root = euid == 0;

  ret_identity->root_caller = root;
  ret_identity->host_uid = root ? overflow_uid : euid;
  ret_identity->host_gid = root ? overflow_gid : egid;
}

static int
write_at (int dirfd, const char *name, const char *data)
{
  /* O_NOFOLLOW: procfs's map files are never links; a link is something
   * else's file, written with our privileges */
  _fb_cleanup_fd_ int fd = openat (dirfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return -errno;
  size_t len = strlen (data);
  ssize_t n = write (fd, data, len);
  return n < 0 ? -errno : (size_t)n != len ? -EIO : 0;
}

/* The parent's half: the child's maps, through its /proc directory. */
static int
write_maps_at (int proc_dirfd, const Prepared *p, FbLauncherStep *ret_step)
{
  int r;

  /* An unprivileged map needs setgroups denied first (CVE-2014-8989:
   * dropping a group could grant what a negative group ACL denied); the
   * caller's groups then stay, which are its own.  A root caller's map is
   * privileged and leaves setgroups allowed: the child must drop root's
   * groups (become_ids()), and only "allow" lets it. */
  if (!p->root_caller && (r = write_at (proc_dirfd, "setgroups", "deny")) < 0 && r != -ENOENT)
    {
      *ret_step = FB_LAUNCHER_STEP_SETGROUPS;
      return r;
    }
  if ((r = write_at (proc_dirfd, "uid_map", p->uid_map)) < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_UID_MAP;
      return r;
    }
  if ((r = write_at (proc_dirfd, "gid_map", p->gid_map)) < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_GID_MAP;
      return r;
    }
  return 0;
}

/* The child's half, after the maps: become the ids inside.  The child is
 * still the caller's (host) uid until here, holding every capability of
 * the new namespace; it keeps those for the mounts that follow (the
 * lock-down drops them) and leaves the caller's uid behind. */
static int
become_ids (const Prepared *p, FbLauncherStep *ret_step)
{
  /* A root caller's supplementary groups (0 among them, under sudo) must
   * not come along.  Where a namespace above ours denies setgroups, the
   * groups we came with stay: refused unless there are none. */
  if (p->root_caller && setgroups (0, NULL) < 0)
    {
      int e = errno;
      if (e != EPERM || getgroups (0, NULL) != 0)
        {
          *ret_step = FB_LAUNCHER_STEP_DROP_GROUPS;
          return -e;
        }
    }

  /* No capability fix-up on the uid change (it would clear them when the
   * old uid counts as root inside and the new one does not), and the
   * effective set raised from the permitted one afterwards whatever the
   * rules did.  The lock-down rewrites the securebits. */
  int bits = prctl (PR_GET_SECUREBITS, 0, 0, 0, 0);
  if (bits < 0 || prctl (PR_SET_SECUREBITS, (unsigned long)bits | SECBIT_NO_SETUID_FIXUP, 0, 0, 0) < 0 ||
      setresgid (p->gid, p->gid, p->gid) < 0 || setresuid (p->uid, p->uid, p->uid) < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_SET_IDS;
      return -errno;
    }
  struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
  struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { { 0 } };
  if (syscall (__NR_capget, &hdr, data) < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_SET_IDS;
      return -errno;
    }
  bool any = false;
  for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
    {
      data[i].effective = data[i].permitted;
      any = any || data[i].permitted != 0;
    }
  if (!any)
    {
      *ret_step = FB_LAUNCHER_STEP_SET_IDS;
      return -EPERM;
    }
  if (syscall (__NR_capset, &hdr, data) < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_SET_IDS;
      return -errno;
    }
  return 0;
}

int
fb_launcher_ns_loopback_up (void)
{
  /* A new network namespace has "lo" down: 127.0.0.1 would be unreachable,
   * and local servers of the command (tests, language servers) need it. */
  _fb_cleanup_fd_ int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  struct ifreq ifr;
  memset (&ifr, 0, sizeof ifr);
  memcpy (ifr.ifr_name, "lo", 3);
  int r = 0;
  if (ioctl (fd, SIOCGIFFLAGS, &ifr) < 0)
    r = -errno;
  else
    {
      ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
      if (ioctl (fd, SIOCSIFFLAGS, &ifr) < 0)
        r = -errno;
    }
  return r;
}

G_GNUC_NORETURN static void
child_fail (const Prepared *p, FbLauncherStep step, int error, int detail)
{
  fb_launcher_report (p->status_fd, step, error, detail);
  _exit (FB_LAUNCHER_EXIT_SANDBOX);
}

static void
child_setup_stdio (const Prepared *p)
{
  int tmp[3] = { -1, -1, -1 };
  /* Move every source above 2 first, so that "stdout_fd = 2, stderr_fd = 1"
   * style swaps can't clobber each other. */
  for (int i = 0; i < 3; i++)
    if (p->stdio[i] >= 0 && (tmp[i] = fcntl (p->stdio[i], F_DUPFD_CLOEXEC, 3)) < 0)
      child_fail (p, FB_LAUNCHER_STEP_STDIO, errno, i);
  for (int i = 0; i < 3; i++)
    if (tmp[i] >= 0)
      {
        if (dup2 (tmp[i], i) < 0)
          child_fail (p, FB_LAUNCHER_STEP_STDIO, errno, i);
        close (tmp[i]);
      }
}

/* Die with our parent: PDEATHSIG first, then its pidfd tells whether it
 * died before the signal was armed (an exited process's pidfd is readable). */
static void
arm_pdeathsig (const Prepared *p, int parent_pidfd)
{
  if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
    child_fail (p, FB_LAUNCHER_STEP_PDEATHSIG, errno, 0);
  if (parent_pidfd >= 0)
    {
      struct pollfd pfd = { .fd = parent_pidfd, .events = POLLIN };
      if (poll (&pfd, 1, 0) > 0)
        child_fail (p, FB_LAUNCHER_STEP_PARENT_GONE, ESRCH, 0);
    }
}

/* The parent's word on the status socket: NONE, or the step and errno that
 * failed, reported as our own. */
static void
wait_for_word (const Prepared *p)
{
  Record answer;
  ssize_t n;
  do
    n = recv (p->status_fd, &answer, sizeof answer, 0);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof answer)
    _exit (FB_LAUNCHER_EXIT_SANDBOX); /* the parent is gone */
  if (answer.step != FB_LAUNCHER_STEP_NONE)
    child_fail (p, (FbLauncherStep)answer.step, answer.error, 0);
}

/* The child's side of write_ids(): our /proc directory to the parent (its
 * /proc may show another pid namespace), then its word: NONE, or the step
 * and errno that failed, reported as our own. */
static void
wait_for_maps (const Prepared *p)
{
  int self = open ("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (self < 0)
    child_fail (p, FB_LAUNCHER_STEP_UID_MAP, errno, 0);
  int r = fb_launcher_report_fd (p->status_fd, FB_LAUNCHER_STEP_IDS_READY, self);
  if (r < 0)
    child_fail (p, FB_LAUNCHER_STEP_UID_MAP, -r, 0);
  close (self);
  wait_for_word (p);
}

/* "/proc/PID" into BUF, without stdio (async-signal-safe). */
static void
proc_pid_path (char buf[32], long pid)
{
  char digits[24];
  size_t n = 0, pos = 0;

  do
    digits[n++] = (char)('0' + pid % 10);
  while ((pid /= 10) > 0 && n < sizeof digits);
  memcpy (buf, "/proc/", 6);
  pos = 6;
  while (n > 0)
    buf[pos++] = digits[--n];
  buf[pos] = '\0';
}

/* A join (FbLauncherPlan.join_*): this process enters the kept view's user
 * namespace, whose maps the keeper's parent wrote (it is still the caller
 * on the host, the namespace's owner, so it holds every capability there,
 * which setns(2) wants), and its mount namespace, which holds the view's
 * FUSE mount.  There it forks the sandbox's real outer child, which takes
 * its ids and makes namespaces of the command's own, as a fresh sandbox
 * has them: a user namespace below the view's (the view's allow_other
 * admits the processes of the keeper's user namespace and of those below
 * it, fuse_allow_current_process()), owning a copy of the view's mount
 * namespace (the same FUSE superblock: the kernel's caches are shared) and
 * new ipc, uts, cgroup and (unless the host's) network namespaces.  That
 * user namespace keeps the command apart from the session's others: pid 1
 * sets its limits of per-user objects (no namespace for anything inside,
 * launcher-limits.c) there, not in the view's, in which every later
 * command still makes its own.  The child's ids must be the view's ids
 * inside before it makes that namespace (its owner must be mapped in the
 * parent), and then only a process of the view's namespace with
 * CAP_SETUID there, and as the owner of the child's /proc files, may
 * write its maps (new_idmap_permitted(); a root caller's child is not
 * dumpable after its uid change): this process, which has not changed its
 * ids.  Then it locks itself down and relays signals and the exit status,
 * and the child goes on as a fresh sandbox's outer child does (returning
 * here). */
static void
join_view (Prepared *p)
{
  int flags =
    CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | (p->new_net ? CLONE_NEWNET : 0);
  FbLauncherStep step = FB_LAUNCHER_STEP_NONE;
  int to_us[2], to_child[2], self_pidfd, proc_fd, dirfd, r;
  char path[32], word = 0;
  struct statfs sfs;
  long pid;

  /* Our /proc, taken before we enter the view's mount namespace: the child's
   * maps are written through it.  One named after setns() would be
   * whatever that namespace mounts there, and we write as the caller (as
   * root, for root): a /proc/PID/uid_map that is a link to a file of the
   * caller's would be overwritten. */
  proc_fd = open ("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (proc_fd < 0 || fstatfs (proc_fd, &sfs) < 0 || sfs.f_type != PROC_SUPER_MAGIC)
    child_fail (p, FB_LAUNCHER_STEP_UID_MAP, proc_fd < 0 ? errno : ENOTSUP, 0);
  if (setns (p->join_fds[0], CLONE_NEWUSER) < 0 || setns (p->join_fds[1], CLONE_NEWNS) < 0)
    child_fail (p, FB_LAUNCHER_STEP_JOIN_VIEW, errno, 0);
  close (p->join_fds[0]);
  close (p->join_fds[1]);
  if (pipe2 (to_us, O_CLOEXEC) < 0 || pipe2 (to_child, O_CLOEXEC) < 0)
    child_fail (p, FB_LAUNCHER_STEP_JOIN_VIEW, errno, 0);
  self_pidfd = (int)syscall (__NR_pidfd_open, getpid (), 0);
  pid = syscall (__NR_clone, SIGCHLD, NULL, NULL, NULL, NULL);
  if (pid == 0)
    {
      /* the outer child proper: its parent is this process now */
      close (proc_fd);
      close (to_us[0]);
      close (to_child[1]);
      if (p->parent_pidfd >= 0)
        close (p->parent_pidfd);
      p->parent_pidfd = self_pidfd;
      arm_pdeathsig (p, p->parent_pidfd);
      if ((r = become_ids (p, &step)) < 0)
        child_fail (p, step, -r, 0);
      if (unshare (flags) < 0)
        child_fail (p, FB_LAUNCHER_STEP_JOIN_VIEW, errno, 0);
      if (write (to_us[1], &word, 1) != 1 || read (to_child[0], &word, 1) != 1)
        _exit (FB_LAUNCHER_EXIT_SANDBOX); /* it failed, and said why */
      close (to_us[1]);
      close (to_child[0]);
      return;
    }
  if (pid < 0)
    child_fail (p, FB_LAUNCHER_STEP_JOIN_VIEW, errno, 0);
  close (to_us[1]);
  close (to_child[0]);
  if (self_pidfd >= 0)
    close (self_pidfd);
  /* a child that failed before said why; we only relay its end */
  if (read (to_us[0], &word, 1) == 1)
    {
      proc_pid_path (path, pid);
      dirfd = openat (proc_fd, path + strlen ("/proc/"), O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      if (dirfd < 0)
        child_fail (p, FB_LAUNCHER_STEP_UID_MAP, errno, 0);
      if ((r = write_maps_at (dirfd, p, &step)) < 0)
        child_fail (p, step, -r, 0);
      close (dirfd);
      if (write (to_child[1], &word, 1) != 1)
        child_fail (p, FB_LAUNCHER_STEP_JOIN_VIEW, errno, 0);
    }
  close (proc_fd);
  close (to_us[0]);
  close (to_child[1]);
  /* The child's ids, so that our death's PDEATHSIG may kill it
   * (kill_ok_by_cred(): without a capability, only the same uid may), and
   * every capability of the view's namespace: none from here on. */
  if ((r = become_ids (p, &step)) < 0)
    child_fail (p, step, -r, 0);
  arm_pdeathsig (p, p->parent_pidfd);
  if ((r = fb_launcher_lockdown_apply (p->lockdown, p->seccomp, p->status_fd, &step)) < 0)
    child_fail (p, step, -r, 0);
  close (p->status_fd);
  fb_launcher_relay_run ((pid_t)pid);
}

/* A join's sync point: the command's pid namespace goes to the parent,
 * which tells the shared view that the accesses from that namespace are
 * this command's.  Made by unshare before pid 1 (our next child is its pid
 * 1), named once pid 1 exists (the kernel shows pid_for_children only
 * with its reaper), by us: pid 1 is not dumpable, so its own /proc/PID/ns
 * is closed to the parent.  pid 1 waits for the parent's word before it
 * touches anything (pid1_main). */
static void
join_pid_namespace (const Prepared *p)
{
  int fd = open ("/proc/self/ns/pid_for_children", O_RDONLY | O_CLOEXEC);
  int r = fd < 0 ? -errno : fb_launcher_report_fd (p->status_fd, FB_LAUNCHER_STEP_VIEW_JOINED, fd);

  if (r < 0)
    child_fail (p, FB_LAUNCHER_STEP_JOIN_VIEW, -r, 0);
  close (fd);
}

/* The keeper's last part: the view's refresher (fs/fs-fuse-warm.c).  The
 * server sends view paths, relative to the root and NUL-terminated; each is
 * stat'ed through the mount (STATX_ATIME: the kernel asks the view for
 * attributes it marked stale), so that the next command finds them valid.
 * It stats only: through names the kernel has cached (RESOLVE_CACHED: no
 * lookup), beneath the view's root, across no symlink and no other mount;
 * its capabilities are dropped first.  Anything that fails is skipped.
 * It leaves when the socket ends. */
G_GNUC_NORETURN static void
refresh_view (int sock, int root)
{
  static char buf[FB_FUSE_WARM_MSG_MAX + 1];
  struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
  struct __user_cap_data_struct none[2] = { { 0 } };

  if (syscall (SYS_capset, &hdr, none) < 0 || prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    _exit (1);
  for (;;)
    {
      ssize_t n = recv (sock, buf, sizeof buf - 1, 0);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        _exit (0);
      buf[n] = '\0';
      for (char *path = buf; path < buf + n; path += strlen (path) + 1)
        {
          struct open_how how = {
            .flags = O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC,
            .resolve = RESOLVE_CACHED | RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
          };
          struct statx stx;
          int fd = (int)syscall (SYS_openat2, root, path[0] != '\0' ? path : ".", &how, sizeof how);

          if (fd < 0)
            continue;
          (void)statx (fd, "", AT_EMPTY_PATH, STATX_ATIME, &stx);
          close (fd);
        }
    }
}

/* The refresher stays for the view's life: it keeps nothing of its
 * parent's (a session daemon's log, control socket and startup pipe; a
 * launch helper's channel to the server), only A and B, with /dev/null as
 * its standard streams.  Hardening: it is not dumpable and no sandbox sees
 * it. */
static void
keep_only (int a, int b)
{
  int lo = MIN (a, b), hi = MAX (a, b), null = open ("/dev/null", O_RDWR | O_CLOEXEC);

  for (int fd = 0; fd < 3 && null >= 0; fd++)
    if (fd != null)
      dup2 (null, fd);
  if (lo > 3)
    syscall (__NR_close_range, 3U, (unsigned)lo - 1, 0U);
  if (hi > lo + 1)
    syscall (__NR_close_range, (unsigned)lo + 1, (unsigned)hi - 1, 0U);
  syscall (__NR_close_range, (unsigned)hi + 1, ~0U, 0U);
}

/* KEEP_VIEW: the view is mounted (at the staging root, where each joining
 * command binds it before its pid 1 pivots); hand back the namespaces that
 * hold it and the refresher's socket (launcher.h), and stay as the
 * refresher.  The namespaces outlive this process while the parent keeps
 * the descriptors. */
G_GNUC_NORETURN static void
keep_view (const Prepared *p)
{
  static const struct
  {
    const char *path;
    FbLauncherStep step;
  } kept[] = {
    { "/proc/self/ns/user", FB_LAUNCHER_STEP_VIEW_USERNS },
    { "/proc/self/ns/mnt", FB_LAUNCHER_STEP_VIEW_MNTNS },
  };
  int pair[2], root, r;

  for (size_t i = 0; i < G_N_ELEMENTS (kept); i++)
    {
      int fd = open (kept[i].path, O_RDONLY | O_CLOEXEC);
      r = fd < 0 ? -errno : fb_launcher_report_fd (p->status_fd, kept[i].step, fd);
      if (r < 0)
        child_fail (p, FB_LAUNCHER_STEP_JOIN_VIEW, -r, 0);
      close (fd);
    }
  root = open (fb_launcher_mounts_get_root (p->mounts), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0 || socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    child_fail (p, FB_LAUNCHER_STEP_JOIN_VIEW, errno, 0);
  r = fb_launcher_report_fd (p->status_fd, FB_LAUNCHER_STEP_VIEW_REFRESH, pair[0]);
  if (r < 0)
    child_fail (p, FB_LAUNCHER_STEP_JOIN_VIEW, -r, 0);
  keep_only (pair[1], root);
  refresh_view (pair[1], root);
}

G_GNUC_NORETURN static void
pid1_main (Prepared *p, int parent_pidfd)
{
  FbLauncherStep step = FB_LAUNCHER_STEP_NONE;
  FbLauncherFailure failure;
  int r;

  arm_pdeathsig (p, parent_pidfd);
  if (parent_pidfd >= 0)
    close (parent_pidfd);
  /* a join: not a lookup in the view before it knows us (join_pid_namespace) */
  if (p->join_fds[0] >= 0)
    wait_for_word (p);

  if ((r = fb_launcher_mounts_apply_rest (p->mounts, p->limits, &failure)) < 0)
    child_fail (p, failure.step, failure.error, failure.detail);

  if (chdir (p->cwd) < 0)
    child_fail (p, FB_LAUNCHER_STEP_CHDIR, errno, 0);

  if ((r = fb_launcher_lockdown_apply (p->lockdown, p->seccomp, p->status_fd, &step)) < 0)
    child_fail (p, step, -r, 0);

  if (p->late)
    fb_launcher_pid1_run_late (p->status_fd);
  fb_launcher_pid1_run (p->command, p->status_fd);
}

/* FbLauncherPlan.proxy_port: the sandbox's way out is a socket listening
 * in its own network namespace, which has only "lo", and accepted on by
 * the parent, outside: the parent's proxy decides every connection, and
 * nothing inside can route around it (no other interface, no relay
 * process, no unix socket to find).  The socket goes to the parent before
 * the root's record, so it is there when wait_mounted() returns; our copy
 * is closed by the lock-down (and pid 1's, cloned later, by its own).
 * Non-blocking: the parent's main loop accepts on it. */
static void
proxy_listen (const Prepared *p)
{
  struct sockaddr_in sin = { .sin_family = AF_INET,
                             .sin_port = htons (p->proxy_port),
                             .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int r;

  if (fd < 0 || bind (fd, (struct sockaddr *)&sin, sizeof sin) < 0 || listen (fd, SOMAXCONN) < 0)
    child_fail (p, FB_LAUNCHER_STEP_PROXY_LISTEN, errno, p->proxy_port);
  if ((r = fb_launcher_report_fd (p->status_fd, FB_LAUNCHER_STEP_PROXY_SOCKET, fd)) < 0)
    child_fail (p, FB_LAUNCHER_STEP_PROXY_LISTEN, -r, p->proxy_port);
  close (fd);
}

G_GNUC_NORETURN static void
outer_main (Prepared *p)
{
  FbLauncherStep step = FB_LAUNCHER_STEP_NONE;
  FbLauncherFailure failure;
  int r;

  arm_pdeathsig (p, p->parent_pidfd);

  /* Parent's handlers must not run here; pid 1 and the command set up
   * their own.  Signals stay blocked (the parent blocked them for us): the
   * relay loop and pid 1 take them with sigwaitinfo(). */
  struct sigaction dfl = { .sa_handler = SIG_DFL };
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP)
      sigaction (sig, &dfl, NULL);

  child_setup_stdio (p);

  /* Identity: see the top of this file.  Until become_ids() this process
   * is still the caller on the host, which is what opening /dev/fuse needs
   * where it is 0600 root (the kernel also wants the fd opened inside this
   * user namespace: launcher.h). */
  if (p->join_fds[0] >= 0)
    join_view (p);
  else
    {
      wait_for_maps (p);
      if ((r = fb_launcher_mounts_open_fuse (p->mounts, &failure)) < 0)
        child_fail (p, failure.step, failure.error, failure.detail);
    }
  if ((r = become_ids (p, &step)) < 0)
    child_fail (p, step, -r, 0);
  /* The uid change cleared PDEATHSIG (commit_creds()): again, and the
   * parent must still be there. */
  arm_pdeathsig (p, p->parent_pidfd);
  if (p->parent_pidfd >= 0)
    close (p->parent_pidfd);
  /* This process and pid 1 (cloned from it, which inherits the flag) run
   * the supervisor's image: its memory, its environment, the host's
   * fusebox binary as /proc/PID/exe.  Not dumpable, /proc/PID of either is
   * closed to the sandbox (ptrace_may_access() wants a capability in the
   * host's namespace, the mm's): CVE-2019-5736 and the /proc/PID/mem
   * family.  A root caller's uid change already did it (suid_dumpable);
   * the caller's own uid does not. */
  if (prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    child_fail (p, FB_LAUNCHER_STEP_DUMPABLE, errno, 0);

  if (p->new_net && (r = fb_launcher_ns_loopback_up ()) < 0)
    child_fail (p, FB_LAUNCHER_STEP_LOOPBACK, -r, 0);
  if (p->new_net && p->proxy_port != 0)
    proxy_listen (p);

  /* A joined view's root is mounted already (join_view) */
  if ((r = p->join_fds[0] >= 0 ? fb_launcher_mounts_apply_joined (p->mounts, &failure)
                               : fb_launcher_mounts_apply_root (p->mounts, p->status_fd, &failure)) < 0)
    child_fail (p, failure.step, failure.error, failure.detail);
  if (p->keep_view)
    keep_view (p);
  /* a join's pid namespace is made first, to be named after (see
   * join_pid_namespace) */
  if (p->join_fds[0] >= 0 && unshare (CLONE_NEWPID) < 0)
    child_fail (p, FB_LAUNCHER_STEP_JOIN_VIEW, errno, 0);

  /* pid 1: a new pid namespace owned by our user namespace */
  int self_pidfd = (int)syscall (__NR_pidfd_open, getpid (), 0);
  long pid = syscall (__NR_clone, (p->join_fds[0] >= 0 ? 0 : CLONE_NEWPID) | SIGCHLD, NULL, NULL, NULL, NULL);
  if (pid == 0)
    pid1_main (p, self_pidfd);
  if (pid < 0)
    child_fail (p, FB_LAUNCHER_STEP_CLONE_PID, errno, 0);
  if (self_pidfd >= 0)
    close (self_pidfd);
  if (p->join_fds[0] >= 0)
    join_pid_namespace (p);

  /* We stay in the caller's pid namespace, out of the sandbox's sight, but
   * hold every capability of its user namespace: drop them like pid 1. */
  if ((r = fb_launcher_lockdown_apply (p->lockdown, p->seccomp, p->status_fd, &step)) < 0)
    child_fail (p, step, -r, 0);
  close (p->status_fd);

  fb_launcher_relay_run ((pid_t)pid);
}

/* ---- the parent's side ---- */

/* One record from the child, with the fd it carries (else -1).  Returns
 * recvmsg's result, -1 with errno on failure. */
static ssize_t
recv_record (int fd, Record *rec, int *ret_passed_fd)
{
  struct iovec iov = { .iov_base = rec, .iov_len = sizeof *rec };
  union
  {
    struct cmsghdr align;
    char buf[CMSG_SPACE (sizeof (int))];
  } control;
  struct msghdr msg = {
    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf
  };
  ssize_t n = recvmsg (fd, &msg, MSG_CMSG_CLOEXEC);
  *ret_passed_fd = -1;
  for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR (&msg) : NULL; c; c = CMSG_NXTHDR (&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN (sizeof (int)))
      memcpy (ret_passed_fd, CMSG_DATA (c), sizeof *ret_passed_fd);
  return n;
}

/* The first failure the child reports is the one we tell. */
static void
note_failure (FbLauncherChild *child, const Record *rec)
{
  if (child->failed)
    return;
  child->failed = true;
  child->failure.step = rec->step >= 0 && rec->step < FB_LAUNCHER_STEP_N ? rec->step : FB_LAUNCHER_STEP_NONE;
  child->failure.error = rec->error;
  child->failure.detail = rec->detail;
}

/* The parent's half of the identity step (see the top of this file and
 * wait_for_maps()).  Runs in fb_launcher_spawn(), single-threaded: the
 * child sent its /proc directory or, having failed before, its failure
 * record; a child that died without a word is left to read_status(). */
static void
write_ids (FbLauncherChild *child, const Prepared *p)
{
  Record rec;
  _fb_cleanup_fd_ int dirfd = -1;
  ssize_t n;

  do
    n = recv_record (child->status_fd, &rec, &dirfd);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof rec)
    return;
  if (rec.step != FB_LAUNCHER_STEP_IDS_READY || dirfd < 0)
    {
      note_failure (child, &rec);
      return;
    }
  Record answer = { .step = FB_LAUNCHER_STEP_NONE };
  FbLauncherStep step = FB_LAUNCHER_STEP_NONE;
  int r = write_maps_at (dirfd, p, &step);
  fb_fd_close (&dirfd);
  if (r < 0)
    {
      answer.step = step;
      answer.error = -r;
    }
  /* A child gone meanwhile: its EOF tells read_status(). */
  while (send (child->status_fd, &answer, sizeof answer, MSG_NOSIGNAL) < 0 && errno == EINTR)
    ;
}

static void
prepared_clear (Prepared *p)
{
  g_free (p->uid_map);
  g_free (p->gid_map);

  fb_launcher_mounts_free (p->mounts);
  fb_launcher_limits_free (p->limits);
  fb_launcher_lockdown_free (p->lockdown);
  fb_launcher_seccomp_free (p->seccomp);
  fb_launcher_command_free (p->command);
  if (p->status_fd >= 0)
    close (p->status_fd);
  if (p->parent_pidfd >= 0)
    close (p->parent_pidfd);
}

static int
fd_above_2 (int fd)
{
  if (fd > 2)
    return fd;
  int n = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  return n < 0 ? -errno : n;
}

int
fb_launcher_spawn (const FbLauncherPlan *plan, FbLauncherChild **ret_child)
{
  Prepared p = { .status_fd = -1, .parent_pidfd = -1 };
  int sockfd[2] = { -1, -1 };
  int r;

  if (!plan->keep_view && !plan->late_command && (!plan->argv || !plan->argv[0]))
    return -EINVAL;
  if (!plan->late_command && plan->cwd && plan->cwd[0] != '/')
    return -EINVAL;
  if (plan->late_command && plan->keep_view)
    return -EINVAL;
  if ((plan->join_userns_fd >= 0) != (plan->join_mntns_fd >= 0) ||
      (plan->keep_view && (plan->root_kind != FB_LAUNCHER_ROOT_FUSE || plan->join_userns_fd >= 0)))
    return -EINVAL;

  FbLauncherIdentity identity;
  fb_launcher_identity_get (&identity);
  guint32 uid = plan->uid == FB_LAUNCHER_ID_CALLER ? geteuid () : plan->uid;
  guint32 gid = plan->gid == FB_LAUNCHER_ID_CALLER ? getegid () : plan->gid;

  /* a join's maps are written in the kept view's user namespace, whose ids
   * inside are these (join_view) */
  p.uid_map = g_strdup_printf ("%u %u 1\n", uid, plan->join_userns_fd >= 0 ? uid : identity.host_uid);
  p.gid_map = g_strdup_printf ("%u %u 1\n", gid, plan->join_userns_fd >= 0 ? gid : identity.host_gid);
  p.root_caller = identity.root_caller;
  p.uid = uid;
  p.gid = gid;
  /* a keeper runs nothing: each command that joins makes its own */
  p.new_net = plan->network == FB_LAUNCHER_NETWORK_NONE && !plan->keep_view;
  p.proxy_port = plan->proxy_port;
  p.keep_view = plan->keep_view;
  p.late = plan->late_command;
  p.join_fds[0] = plan->join_userns_fd;
  p.join_fds[1] = plan->join_mntns_fd;

  /* a late command's pid 1 waits in "/" with the caller's streams, and
   * takes its command's cwd and streams when they come */
  p.cwd = plan->cwd && !p.late ? plan->cwd : "/";
  p.stdio[0] = p.late ? -1 : plan->stdin_fd;
  p.stdio[1] = p.late ? -1 : plan->stdout_fd;
  p.stdio[2] = p.late ? -1 : plan->stderr_fd;

  if ((r = fb_launcher_mounts_new (plan, uid, gid, &p.mounts)) < 0 || (r = fb_launcher_limits_new (&p.limits)) < 0 ||
      (r = fb_launcher_lockdown_new (&p.lockdown)) < 0 || (r = fb_launcher_seccomp_new (&p.seccomp)) < 0 ||
      (!plan->keep_view && !p.late && (r = fb_launcher_command_new (plan, &p.command)) < 0))
    goto out;

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockfd) < 0)
    {
      r = -errno;
      goto out;
    }
  if ((p.status_fd = fd_above_2 (sockfd[1])) < 0)
    {
      r = p.status_fd;
      p.status_fd = -1;
      goto out;
    }
  if (p.status_fd != sockfd[1])
    close (sockfd[1]);
  sockfd[1] = -1;

  /* pidfd_open returns a close-on-exec fd; -1 on kernels before 5.3 */
  p.parent_pidfd = (int)syscall (__NR_pidfd_open, getpid (), 0);

  unsigned long flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | SIGCHLD;
  if (p.new_net)
    flags |= CLONE_NEWNET;
  if (p.keep_view)
    flags = CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD;
  else if (p.join_fds[0] >= 0)
    flags = SIGCHLD; /* the child enters the view's namespaces, then makes its own (join_view) */

  sigset_t all, saved;
  sigfillset (&all);
  sigprocmask (SIG_SETMASK, &all, &saved);
  int pidfd = -1;
  long pid = syscall (__NR_clone, flags | CLONE_PIDFD, NULL, &pidfd, NULL, NULL);
  if (pid < 0 && errno == EINVAL)
    {
      /* before 5.2: no CLONE_PIDFD */
      pidfd = -1;
      pid = syscall (__NR_clone, flags, NULL, NULL, NULL, NULL);
    }
  if (pid == 0)
    outer_main (&p);
  int clone_errno = errno;
  sigprocmask (SIG_SETMASK, &saved, NULL);
  if (pid < 0)
    {
      r = -clone_errno;
      goto out;
    }

  FbLauncherChild *child = g_new0 (FbLauncherChild, 1);
  child->pid = (pid_t)pid;
  child->pidfd = pidfd;
  child->fuse_fd = -1;
  child->kept_fds[0] = child->kept_fds[1] = child->kept_fds[2] = -1;
  child->proxy_fd = -1;
  child->status_fd = sockfd[0];
  sockfd[0] = -1;
  child->root_kind = plan->root_kind;
  child->root_dir = g_strdup (plan->root_dir);
  child->fuse_device = g_strdup (plan->fuse_device ? plan->fuse_device : "/dev/fuse");
  child->cwd = g_strdup (p.cwd);
  child->late = p.late;
  child->argv0 = g_strdup (p.late ? "(a late command)" : plan->argv != NULL ? plan->argv[0] : "(a kept view)");
  if (!p.late)
    {
      const char *const *envp = plan->envp;
      extern char **environ;
      if (!envp)
        envp = (const char *const *)environ;
      for (; *envp; envp++)
        if (g_str_has_prefix (*envp, "PATH="))
          child->path_env = g_strdup (*envp + 5);
    }
  child->uid = uid;
  child->gid = gid;
  child->identity = identity;
  child->network = plan->network;
  if (p.join_fds[0] < 0) /* a joined view's maps were written for its keeper */
    write_ids (child, &p);
  *ret_child = child;
  r = 0;

out:
  if (sockfd[0] >= 0)
    close (sockfd[0]);
  if (sockfd[1] >= 0)
    close (sockfd[1]);
  prepared_clear (&p);
  return r;
}

int
fb_launcher_child_skip_candidates (FbLauncherChild *child, guint count)
{
  guint32 skip = count;

  if (child->status_fd < 0)
    return -EPIPE; /* the sandbox is gone already */
  /* The other direction of the status socket: only the command reads it
   * (launcher-pid1.c, read_skip()), once, before its exec. */
  if (send (child->status_fd, &skip, sizeof skip, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
    return -errno;
  return 0;
}

pid_t
fb_launcher_child_get_pid (const FbLauncherChild *child)
{
  return child->pid;
}

int
fb_launcher_child_get_pidfd (const FbLauncherChild *child)
{
  return child->pidfd;
}

const FbLauncherFailure *
fb_launcher_child_get_failure (const FbLauncherChild *child)
{
  return child->failed ? &child->failure : NULL;
}

/* What read_status() waits for besides the end of the channel. */
typedef enum
{
  WANT_END,
  WANT_MOUNTED, /* ROOT_MOUNTED, or a join's VIEW_JOINED */
  WANT_KEPT,    /* a keeper's namespaces and refresher socket */
  WANT_READY,   /* a late command's pid 1, waiting for it */
} Want;

static bool
have (const FbLauncherChild *child, Want want)
{
  switch (want)
    {
      case WANT_END:
        return false;
      case WANT_MOUNTED:
        return child->mounted;
      case WANT_KEPT:
        return child->kept_fds[0] >= 0 && child->kept_fds[1] >= 0 && child->kept_fds[2] >= 0;
      case WANT_READY:
        return child->ready;
    }
  return false;
}

/* kept_fds is indexed by these steps' order */
G_STATIC_ASSERT (FB_LAUNCHER_STEP_VIEW_MNTNS == FB_LAUNCHER_STEP_VIEW_USERNS + 1 &&
                 FB_LAUNCHER_STEP_VIEW_REFRESH == FB_LAUNCHER_STEP_VIEW_USERNS + 2);

/* Keep FD (a received descriptor) in *SLOT. */
static void
keep_fd (int *slot, int fd)
{
  fb_fd_close (slot);
  *slot = fd;
}

/* Read records until WANT is satisfied or the channel ends (EOF: the
 * command was executed, or everything died). */
static int
read_status (FbLauncherChild *child, Want want)
{
  while (child->status_fd >= 0)
    {
      if (have (child, want))
        return 0;
      Record rec;
      int passed_fd;
      ssize_t n = recv_record (child->status_fd, &rec, &passed_fd);
      if (n < 0 && errno == EINTR)
        continue;
      /* The child closed its end with fb_launcher_child_skip_candidates()'s
       * message unread (it failed before its exec): the kernel reports that
       * once, then hands out the records it sent before it closed. */
      if (n < 0 && errno == ECONNRESET)
        continue;
      if (n < 0 && errno == EAGAIN)
        break; /* non-blocking drain: nothing more now */
      if (n == (ssize_t)sizeof rec)
        {
          if (rec.step == FB_LAUNCHER_STEP_ROOT_MOUNTED || rec.step == FB_LAUNCHER_STEP_VIEW_JOINED)
            {
              child->mounted = true;
              keep_fd (&child->fuse_fd, passed_fd);
              continue;
            }
          if (rec.step == FB_LAUNCHER_STEP_VIEW_USERNS || rec.step == FB_LAUNCHER_STEP_VIEW_MNTNS ||
              rec.step == FB_LAUNCHER_STEP_VIEW_REFRESH)
            {
              keep_fd (&child->kept_fds[rec.step - FB_LAUNCHER_STEP_VIEW_USERNS], passed_fd);
              continue;
            }
          if (rec.step == FB_LAUNCHER_STEP_PROXY_SOCKET)
            {
              keep_fd (&child->proxy_fd, passed_fd);
              continue;
            }
          if (rec.step == FB_LAUNCHER_STEP_READY && child->late)
            {
              if (passed_fd >= 0)
                close (passed_fd);
              child->ready = true;
              continue;
            }
          /* a late command's pid 1 keeps the channel past the exec, so
           * STARTED stands for the EOF (a failure came before it) */
          if (rec.step == FB_LAUNCHER_STEP_STARTED && child->late && child->command_sent)
            {
              if (passed_fd >= 0)
                close (passed_fd);
              if (!child->failed)
                child->executed = true;
              if (want == WANT_END)
                return child->failed ? -ECHILD : 0;
              continue;
            }
          if (rec.step == FB_LAUNCHER_STEP_ENDED && child->late && child->executed && !child->ended &&
              rec.detail >= 0 && rec.detail <= 255)
            {
              if (passed_fd >= 0)
                close (passed_fd);
              child->ended = true;
              child->ended_code = rec.detail;
              continue;
            }
          if (passed_fd >= 0)
            close (passed_fd);
          note_failure (child, &rec);
          continue;
        }
      if (passed_fd >= 0)
        close (passed_fd);
      /* EOF (or a short or failed read, which only a dying child causes) */
      fb_fd_close (&child->status_fd);
    }
  if (child->failed)
    return -ECHILD;
  /* A late command's channel ends at its exec only once it was sent: an
   * EOF before is the sandbox's end (a signal before the command, most
   * likely). */
  if (!child->mounted || (child->late && !child->command_sent))
    {
      /* died without a word: killed, most likely */
      child->failed = true;
      child->failure.step = FB_LAUNCHER_STEP_NONE;
      child->failure.error = ECHILD;
      return -ECHILD;
    }
  child->executed = true;
  return 0;
}

int
fb_launcher_child_wait_mounted (FbLauncherChild *child, int *ret_fuse_fd)
{
  int r = child->mounted ? 0 : read_status (child, WANT_MOUNTED);
  if (r < 0)
    return r;
  if (ret_fuse_fd)
    {
      *ret_fuse_fd = child->fuse_fd;
      child->fuse_fd = -1;
    }
  return 0;
}

int
fb_launcher_child_wait_kept (FbLauncherChild *child, int *ret_userns_fd, int *ret_mntns_fd, int *ret_refresh_fd)
{
  read_status (child, WANT_KEPT);
  if (!have (child, WANT_KEPT))
    {
      if (!child->failed)
        {
          child->failed = true;
          child->failure.step = FB_LAUNCHER_STEP_JOIN_VIEW;
          child->failure.error = ECHILD;
        }
      return -ECHILD;
    }
  *ret_userns_fd = child->kept_fds[0];
  *ret_mntns_fd = child->kept_fds[1];
  if (ret_refresh_fd != NULL)
    *ret_refresh_fd = g_steal_fd (&child->kept_fds[2]);
  else
    fb_fd_close (&child->kept_fds[2]);
  child->kept_fds[0] = child->kept_fds[1] = -1;
  return 0;
}

int
fb_launcher_child_wait_joined (FbLauncherChild *child, int *ret_pidns_fd)
{
  return fb_launcher_child_wait_mounted (child, ret_pidns_fd);
}

int
fb_launcher_child_go (FbLauncherChild *child)
{
  Record word = { .step = FB_LAUNCHER_STEP_NONE };

  if (child->status_fd < 0)
    return -EPIPE; /* the sandbox is gone already */
  while (send (child->status_fd, &word, sizeof word, MSG_NOSIGNAL) < 0)
    if (errno != EINTR)
      return -errno;
  return 0;
}

int
fb_launcher_child_wait_exec (FbLauncherChild *child)
{
  if (child->executed)
    return 0;
  return read_status (child, WANT_END);
}

int
fb_launcher_child_get_status_fd (const FbLauncherChild *child)
{
  return child->late && child->executed ? child->status_fd : -1;
}

int
fb_launcher_child_read_ended (FbLauncherChild *child, int *ret_exit_code)
{
  if (!child->ended && child->late && child->executed && child->status_fd >= 0)
    {
      int fl = fcntl (child->status_fd, F_GETFL);
      if (fl >= 0 && !(fl & O_NONBLOCK))
        fcntl (child->status_fd, F_SETFL, fl | O_NONBLOCK);
      read_status (child, WANT_END);
    }
  if (!child->ended)
    return -EAGAIN;
  *ret_exit_code = child->ended_code;
  return 0;
}

int
fb_launcher_child_wait_ready (FbLauncherChild *child)
{
  int r;

  if (!child->late)
    return -EINVAL;
  if (child->ready)
    return 0;
  r = read_status (child, WANT_READY);
  return r < 0 ? r : child->ready ? 0 : -ECHILD;
}

int
fb_launcher_child_send_command (FbLauncherChild *child, int spec_fd, const int stdio[3])
{
  FbLauncherRecord rec = { .step = FB_LAUNCHER_STEP_COMMAND };
  int fds[4] = { spec_fd, stdio[0], stdio[1], stdio[2] };
  g_autofree char *argv0 = NULL, *cwd = NULL, *path_env = NULL;
  int r;

  if (!child->late || child->command_sent)
    return -EINVAL;
  if (child->status_fd < 0)
    return -EPIPE; /* the sandbox is gone already */
  /* pid 1 checks it again (it trusts nothing it receives); this is for
   * the caller, and for the messages about the command */
  r = fb_launcher_late_command_check (spec_fd, &argv0, &cwd, &path_env);
  if (r < 0)
    return r;
  /* the other direction of the status socket: pid 1 reads it once, after
   * READY (fb_launcher_pid1_run_late) */
  r = fb_send_fds (child->status_fd, &rec, sizeof rec, fds, G_N_ELEMENTS (fds), 0);
  if (r < 0)
    return r;
  child->command_sent = true;
  g_free (child->argv0);
  child->argv0 = g_steal_pointer (&argv0);
  g_free (child->cwd);
  child->cwd = g_steal_pointer (&cwd);
  g_free (child->path_env);
  child->path_env = g_steal_pointer (&path_env);
  return 0;
}

int
fb_launcher_child_take_proxy_fd (FbLauncherChild *child)
{
  int fd = child->proxy_fd;

  child->proxy_fd = -1;
  return fd;
}

int
fb_launcher_child_kill (FbLauncherChild *child, int sig)
{
  if (child->reaped)
    return -ESRCH;
  if (child->pidfd >= 0)
    {
      if (syscall (__NR_pidfd_send_signal, child->pidfd, sig, NULL, 0) < 0)
        return -errno;
      return 0;
    }
  if (kill (child->pid, sig) < 0)
    return -errno;
  return 0;
}

static void
set_exit (FbLauncherChild *child, int status)
{
  child->reaped = true;
  if (WIFEXITED (status))
    child->exit_code = WEXITSTATUS (status);
  else if (WIFSIGNALED (status))
    child->exit_code = 128 + WTERMSIG (status);
  else
    child->exit_code = FB_LAUNCHER_EXIT_SANDBOX;
  /* A failure record makes the status ours, whatever pid 1 exited with. */
  if (child->status_fd >= 0)
    {
      /* drain what is left, without blocking: the child is gone */
      int fl = fcntl (child->status_fd, F_GETFL);
      if (fl >= 0)
        fcntl (child->status_fd, F_SETFL, fl | O_NONBLOCK);
      read_status (child, WANT_END);
    }
  /* ...except pid 1's "parent gone" after the child was killed: a
   * supervisor alive to read it is not the parent that went (pid 1's
   * parent is this child), so it only echoes the signal, which is the
   * status (test-launcher-sandbox's test_fuse_root_sync_point got 125,
   * "parent-gone", instead of 137 in 5 of 300 runs). */
  if (child->failed && child->failure.step == FB_LAUNCHER_STEP_PARENT_GONE && WIFSIGNALED (status))
    {
      child->failed = false;
      return;
    }
  if (child->failed && child->failure.step != FB_LAUNCHER_STEP_NONE)
    child->exit_code = fb_launcher_failure_exit_code (&child->failure);
}

static int
do_wait (FbLauncherChild *child, int *ret_exit_code, int options)
{
  if (!child->reaped)
    {
      int status;
      pid_t w;
      do
        w = waitpid (child->pid, &status, options);
      while (w < 0 && errno == EINTR);
      if (w < 0)
        return -errno;
      if (w == 0)
        return -EAGAIN;
      set_exit (child, status);
    }
  if (ret_exit_code)
    *ret_exit_code = child->exit_code;
  return 0;
}

int
fb_launcher_child_wait (FbLauncherChild *child, int *ret_exit_code)
{
  return do_wait (child, ret_exit_code, 0);
}

int
fb_launcher_child_try_wait (FbLauncherChild *child, int *ret_exit_code)
{
  return do_wait (child, ret_exit_code, WNOHANG);
}

void
fb_launcher_child_free (FbLauncherChild *child)
{
  if (!child)
    return;
  if (!child->reaped)
    {
      fb_launcher_child_kill (child, SIGKILL);
      int status;
      while (waitpid (child->pid, &status, 0) < 0 && errno == EINTR)
        ;
    }
  fb_fd_close (&child->status_fd);
  fb_fd_close (&child->pidfd);
  fb_fd_close (&child->fuse_fd);
  fb_fd_close (&child->proxy_fd);
  for (guint i = 0; i < G_N_ELEMENTS (child->kept_fds); i++)
    fb_fd_close (&child->kept_fds[i]);
  g_free (child->root_dir);
  g_free (child->fuse_device);
  g_free (child->cwd);
  g_free (child->argv0);
  g_free (child->path_env);
  g_free (child);
}

/* ---- messages ---- */

typedef struct
{
  FbLauncherRootKind root_kind;
  const char *root_dir;
  const char *fuse_device;
  const char *cwd;
  const char *argv0;
  const char *path_env;
  guint32 uid, gid;
  FbLauncherIdentity identity;
} MessageContext;

static char *
describe (const MessageContext *ctx, const FbLauncherFailure *f)
{
  const char *step = fb_launcher_step_to_string (f->step);
  const char *err = g_strerror (f->error);
  const char *root = ctx->root_kind == FB_LAUNCHER_ROOT_FUSE ? "the FUSE view" : ctx->root_dir;
  const char *check = "run 'fusebox check' to see which prerequisite is missing and how to fix it";

  switch (f->step)
    {
      case FB_LAUNCHER_STEP_CLONE:
        return g_strdup_printf ("%s: could not create the sandbox's user, mount, pid, ipc, uts, cgroup (and network) "
                                "namespaces: %s; user namespaces are disabled or limited on this host: %s",
                                step, err, check);
      case FB_LAUNCHER_STEP_PARENT_GONE:
        /* Only pid 1's record can reach a supervisor still alive to
         * read it: the process between them ended. */
        return g_strdup_printf ("%s: the sandbox's outer process ended while pid 1 was being made (was it "
                                "killed?); nothing ran",
                                step);
      case FB_LAUNCHER_STEP_SETGROUPS:
        return g_strdup_printf ("%s: /proc/PID/setgroups of the sandbox: writing \"deny\" failed: %s; %s", step, err,
                                check);
      case FB_LAUNCHER_STEP_UID_MAP:
      case FB_LAUNCHER_STEP_GID_MAP:
        {
          bool is_uid = f->step == FB_LAUNCHER_STEP_UID_MAP;
          const char *what = is_uid ? "uid" : "gid";
          guint32 inside = is_uid ? ctx->uid : ctx->gid;
          guint32 host = is_uid ? ctx->identity.host_uid : ctx->identity.host_gid;
          /* EPERM is the kernel's word on the ids; EACCES the file's: the
           * write itself was refused */
          if (f->error == EACCES)
            return g_strdup_printf (
              "%s: /proc/PID/%s_map of the sandbox: mapping %s %u inside to %u outside failed: %s; the file could "
              "not be written at all: a Landlock domain fusebox runs in (an agent's own sandbox, often), which "
              "lets it write no file outside its own, or a /proc mounted read-only, refuses it: run fusebox "
              "outside it; %s",
              step, what, what, inside, host, err, check);
          if (ctx->identity.root_caller)
            return g_strdup_printf (
              "%s: /proc/PID/%s_map of the sandbox: mapping %s %u inside to %u outside failed: %s; fusebox runs "
              "the sandbox of the host's root as the unprivileged overflow id %u (nobody), never as root, which "
              "needs CAP_SETUID and CAP_SETGID and that id mapped where fusebox runs: a user namespace that maps "
              "root alone (unshare -r, bwrap --unshare-user run as root) does not; run fusebox outside it, or run "
              "the outer sandbox as a normal user; %s",
              step, what, what, inside, host, err, host, check);
          return g_strdup_printf ("%s: /proc/PID/%s_map of the sandbox: mapping %s %u inside to %u outside failed: "
                                  "%s; an unprivileged caller can only map its own id once; %s",
                                  step, what, what, inside, host, err, check);
        }
      case FB_LAUNCHER_STEP_DROP_GROUPS:
        return g_strdup_printf ("%s: dropping the supplementary groups of the host's root failed: %s; a user "
                                "namespace above fusebox denies setgroups, so root's groups would follow it into the "
                                "sandbox: clear them first (setpriv --clear-groups, or run fusebox outside it)",
                                step, err);
      case FB_LAUNCHER_STEP_SET_IDS:
        return g_strdup_printf ("%s: taking uid %u and gid %u inside the sandbox failed: %s; %s", step, ctx->uid,
                                ctx->gid, err, check);
      case FB_LAUNCHER_STEP_LOOPBACK:
        return g_strdup_printf ("%s: bringing up \"lo\" in the sandbox's network namespace failed: %s; use "
                                "--network host to share the host's network instead",
                                step, err);
      case FB_LAUNCHER_STEP_PROXY_LISTEN:
        return g_strdup_printf ("%s: listening at 127.0.0.1:%d in the sandbox's network namespace, for the network "
                                "proxy, failed: %s; use --network none or host to run without the proxy",
                                step, f->detail, err);
      case FB_LAUNCHER_STEP_MOUNT_SLAVE:
        return g_strdup_printf ("%s: /: making the sandbox's mounts slaves of the host's failed: %s; %s%s", step, err,
                                f->error == EPERM ? "no mount is allowed here: a Landlock domain fusebox runs in "
                                                    "(an agent's own sandbox, often) forbids every mount, and so may "
                                                    "a security module; "
                                                  : "",
                                check);
      case FB_LAUNCHER_STEP_OPEN_ROOT:
        return g_strdup_printf ("%s: %s: the root directory can't be opened: %s; give an existing directory", step,
                                root, err);
      case FB_LAUNCHER_STEP_OPEN_DEVICE:
        return g_strdup_printf ("%s: %s: the host device can't be opened: %s; the sandbox's /dev binds it from the "
                                "host, so it must exist (in a container, pass it with --device)",
                                step, fb_launcher_mounts_device_name (f->detail), err);
      case FB_LAUNCHER_STEP_OPEN_FUSE:
        return g_strdup_printf ("%s: %s: opening the FUSE device inside the sandbox's user namespace failed: %s; %s",
                                step, ctx->fuse_device, err,
                                f->error == ENOENT   ? "load the fuse module (modprobe fuse) or, in a container, pass "
                                                       "the device (--device /dev/fuse)"
                                : f->error == EACCES ? "make it usable for you: chmod 0666 /dev/fuse (the default of "
                                                       "fuse3 packages) or add yourself to its group"
                                                     : check);
      case FB_LAUNCHER_STEP_SEND_FUSE_FD:
        return g_strdup_printf ("%s: handing the FUSE connection to the supervisor failed: %s", step, err);
      case FB_LAUNCHER_STEP_CLONE_PID:
        return g_strdup_printf ("%s: creating the sandbox's pid namespace failed: %s; %s", step, err, check);
      case FB_LAUNCHER_STEP_STAGING:
        return g_strdup_printf ("%s: mounting the staging tmpfs inside the sandbox's mount namespace failed: %s; %s",
                                step, err, check);
      case FB_LAUNCHER_STEP_MOUNT_ROOT:
        if (ctx->root_kind == FB_LAUNCHER_ROOT_FUSE)
          return g_strdup_printf ("%s: mounting the FUSE view (/dev/fuse) as the sandbox's root failed: %s; FUSE "
                                  "must be mountable inside a user namespace: %s",
                                  step, err, check);
        return g_strdup_printf ("%s: %s: binding it as the sandbox's root failed: %s; the kernel needs open_tree and "
                                "move_mount (Linux 5.2): %s",
                                step, root, err, check);
      case FB_LAUNCHER_STEP_ROOT_READONLY:
        return g_strdup_printf ("%s: %s: making the root read-only failed: %s; the kernel needs mount_setattr "
                                "(Linux 5.12)",
                                step, root, err);
      case FB_LAUNCHER_STEP_MOUNT_PROC:
        if (f->error == ENOENT || f->error == ENOTDIR)
          return g_strdup_printf ("%s: /proc: the sandbox's root (%s) has no /proc directory to mount on: %s; the "
                                  "policy must keep /proc visible",
                                  step, root, err);
        return g_strdup_printf ("%s: /proc: mounting a fresh procfs for the sandbox failed: %s; the kernel allows it "
                                "only where an unmasked /proc is visible: in a container, unmask /proc (docker "
                                "--security-opt systempaths=unconfined, podman --security-opt unmask=/proc/*); "
                                "inside bubblewrap, run bwrap as a normal user (as uid 0 it covers /proc/irq and "
                                "/proc/bus); %s",
                                step, err, check);
      case FB_LAUNCHER_STEP_LIMITS:
        return g_strdup_printf ("%s: /proc/sys/user/%s: setting the sandbox's own limit in its fresh procfs failed: "
                                "%s; %s",
                                step, fb_launcher_limits_name (f->detail) ? fb_launcher_limits_name (f->detail) : "",
                                err, check);
      case FB_LAUNCHER_STEP_PROC_COVER:
        return g_strdup_printf ("%s: /proc/%s: covering it read-only in the sandbox's procfs failed: %s; the kernel "
                                "needs open_tree, move_mount (Linux 5.2) and mount_setattr (5.12): %s",
                                step, fb_launcher_mounts_proc_cover_name (f->detail), err, check);
      case FB_LAUNCHER_STEP_MOUNT_DEV:
        if (f->error == ENOENT || f->error == ENOTDIR)
          return g_strdup_printf ("%s: /dev: the sandbox's root (%s) has no /dev directory to mount on: %s; the "
                                  "policy must keep /dev visible",
                                  step, root, err);
        return g_strdup_printf ("%s: /dev: mounting the sandbox's tmpfs /dev failed: %s; %s", step, err, check);
      case FB_LAUNCHER_STEP_BIND_DEVICE:
        return g_strdup_printf ("%s: %s: binding the host's node into the sandbox failed: %s; %s", step,
                                fb_launcher_mounts_device_name (f->detail), err, check);
      case FB_LAUNCHER_STEP_MOUNT_DEVPTS:
        return g_strdup_printf ("%s: /dev/pts: mounting a private devpts failed: %s; %s", step, err, check);
      case FB_LAUNCHER_STEP_DEV_LINK:
      case FB_LAUNCHER_STEP_MOUNT_SHM:
      case FB_LAUNCHER_STEP_DEV_READONLY:
        return g_strdup_printf ("%s: /dev: setting up the sandbox's /dev failed: %s; %s", step, err, check);
      case FB_LAUNCHER_STEP_PIVOT_ROOT:
      case FB_LAUNCHER_STEP_DETACH_OLD_ROOT:
        return g_strdup_printf ("%s: %s: switching the sandbox to its new root failed: %s; %s", step, root, err, check);
      case FB_LAUNCHER_STEP_CHDIR:
        return g_strdup_printf ("%s: %s: the working directory is not reachable in the sandbox: %s; pass --cwd with "
                                "a directory the policy makes visible",
                                step, ctx->cwd, err);
      case FB_LAUNCHER_STEP_SETSID:
      case FB_LAUNCHER_STEP_PDEATHSIG:
      case FB_LAUNCHER_STEP_DUMPABLE:
      case FB_LAUNCHER_STEP_SECUREBITS:
      case FB_LAUNCHER_STEP_DROP_CAPS:
      case FB_LAUNCHER_STEP_VERIFY_CAPS:
      case FB_LAUNCHER_STEP_NO_NEW_PRIVS:
      case FB_LAUNCHER_STEP_CLOSE_FDS:
        return g_strdup_printf ("%s: locking the sandbox down failed: %s; nothing ran; %s", step, err, check);
      case FB_LAUNCHER_STEP_SECCOMP:
        return g_strdup_printf ("%s: installing the seccomp filter failed: %s; the kernel needs CONFIG_SECCOMP_FILTER; "
                                "%s",
                                step, err, check);
      case FB_LAUNCHER_STEP_LANDLOCK:
        return g_strdup_printf ("%s: confining the command to the sandbox's own root with Landlock failed: %s; the "
                                "kernel says it has Landlock (ABI 2 or later) but refused a domain that allows "
                                "everything beneath \"/\" and the command's standard streams",
                                step, err);
      case FB_LAUNCHER_STEP_SIGNALS:
      case FB_LAUNCHER_STEP_FORK:
        return g_strdup_printf ("%s: the sandbox's pid 1 could not start the command: %s", step, err);
      case FB_LAUNCHER_STEP_STDIO:
        if (f->error == EISDIR)
          return g_strdup_printf ("%s: fd %d: the command's %s is a directory (or an O_PATH handle), which no "
                                  "command is given: through it the command would walk the host past the view and "
                                  "its policy; give a file, a pipe or a terminal (for instance < /dev/null)",
                                  step, f->detail,
                                  f->detail == 0   ? "stdin"
                                  : f->detail == 1 ? "stdout"
                                                   : "stderr");
        return g_strdup_printf ("%s: fd %d: passing standard input/output into the sandbox failed: %s", step, f->detail,
                                err);
      case FB_LAUNCHER_STEP_EXEC:
        if (f->error == ENOENT)
          {
            if (strchr (ctx->argv0, '/'))
              return g_strdup_printf ("%s: %s: command not found in the sandbox: %s; check the path and that the "
                                      "policy makes it visible",
                                      step, ctx->argv0, err);
            return g_strdup_printf ("%s: %s: command not found in the sandbox (searched PATH=%s); give its full path "
                                    "or fix PATH with --setenv PATH ...",
                                    step, ctx->argv0,
                                    ctx->path_env ? ctx->path_env : "(unset: /usr/local/bin:/usr/bin:/bin)");
          }
        if (f->error == EACCES)
          return g_strdup_printf ("%s: %s: the command can't be executed in the sandbox: %s; check that it is an "
                                  "executable file (mode +x) and that the policy lets the sandbox read it",
                                  step, ctx->argv0, err);
        if (f->error == ENOEXEC)
          return g_strdup_printf ("%s: %s: not an executable format: %s; a script needs a \"#!\" line", step,
                                  ctx->argv0, err);
        return g_strdup_printf ("%s: %s: executing the command failed: %s", step, ctx->argv0, err);
      case FB_LAUNCHER_STEP_COMMAND:
        return g_strdup_printf ("%s: the sandbox's pid 1 refused the command it was handed: %s; it must come as a "
                                "memfd sealed against writes, growth and shrinking, in the launch helper's format "
                                "with an argv, and its three standard streams",
                                step, err);
      case FB_LAUNCHER_STEP_JOIN_VIEW:
        return g_strdup_printf ("%s: joining the session's view (its user and mount namespaces, then new ipc, uts, "
                                "cgroup, network and pid namespaces of the command's own) failed: %s; the session's "
                                "view may have ended: run the command again to start a new one",
                                step, err);
      case FB_LAUNCHER_STEP_NONE:
      case FB_LAUNCHER_STEP_IDS_READY:
      case FB_LAUNCHER_STEP_ROOT_MOUNTED:
      case FB_LAUNCHER_STEP_VIEW_USERNS:
      case FB_LAUNCHER_STEP_VIEW_MNTNS:
      case FB_LAUNCHER_STEP_VIEW_REFRESH:
      case FB_LAUNCHER_STEP_VIEW_JOINED:
      case FB_LAUNCHER_STEP_PROXY_SOCKET:
      case FB_LAUNCHER_STEP_READY:
      case FB_LAUNCHER_STEP_STARTED:
      case FB_LAUNCHER_STEP_ENDED:
      case FB_LAUNCHER_STEP_N:
        break;
    }
  return g_strdup_printf ("the sandbox's pid 1 died before it could report (killed?): %s", err);
}

char *
fb_launcher_child_describe_failure (const FbLauncherChild *child)
{
  if (!child->failed)
    return NULL;
  MessageContext ctx = {
    .root_kind = child->root_kind,
    .root_dir = child->root_dir,
    .fuse_device = child->fuse_device,
    .cwd = child->cwd,
    .argv0 = child->argv0,
    .path_env = child->path_env,
    .uid = child->uid,
    .gid = child->gid,
    .identity = child->identity,
  };
  return describe (&ctx, &child->failure);
}

char *
fb_launcher_describe_failure (const FbLauncherPlan *plan, const FbLauncherFailure *failure)
{
  extern char **environ;
  const char *const *envp = plan->envp ? plan->envp : (const char *const *)environ;
  const char *path_env = NULL;
  for (; *envp; envp++)
    if (g_str_has_prefix (*envp, "PATH="))
      path_env = *envp + 5;
  MessageContext ctx = {
    .root_kind = plan->root_kind,
    .root_dir = plan->root_dir,
    .fuse_device = plan->fuse_device ? plan->fuse_device : "/dev/fuse",
    .cwd = plan->cwd ? plan->cwd : "/",
    .argv0 = plan->argv && plan->argv[0] ? plan->argv[0] : "(none)",
    .path_env = path_env,
    .uid = plan->uid == FB_LAUNCHER_ID_CALLER ? geteuid () : plan->uid,
    .gid = plan->gid == FB_LAUNCHER_ID_CALLER ? getegid () : plan->gid,
  };
  fb_launcher_identity_get (&ctx.identity);
  return describe (&ctx, failure);
}
