/* fusebox — the launcher's public interface: put a command in a sandbox.
 *
 * A launch is two processes:
 *  - the "outer" child, cloned with new user, mount, ipc, uts and cgroup
 *    namespaces (and net unless the plan shares the host's network), but
 *    still in the caller's pid namespace.  The parent writes its uid/gid
 *    maps (to unprivileged host ids: see FbLauncherIdentity); the child
 *    opens /dev/fuse, takes its ids inside, mounts the root (that FUSE
 *    connection, or, for probes and tests, a host directory bound
 *    read-only), hands the FUSE fd to the supervisor, then clones pid 1 into
 *    a new pid namespace, locks itself down and relays signals and the exit
 *    status between the two.
 *  - pid 1 of the new pid namespace, which mounts a fresh /proc, /dev and
 *    /dev/shm, pivots into the root, locks itself down (setsid, PDEATHSIG,
 *    no capabilities, no_new_privs, no inherited fds, seccomp) and then stays
 *    as a tiny init: it forks the command, forwards signals to it, reaps
 *    orphans and exits with the command's status.
 * Why two: the kernel accepts a FUSE fd for a mount only when the fd was
 * opened in the mounter's user namespace (fuse_get_tree() compares
 * f_cred->user_ns), so the sandbox opens /dev/fuse, not the supervisor; and
 * a FUSE connection reports caller pids in the pid namespace of its mounter,
 * so mounting from the caller's pid namespace gives the supervisor host pids
 * (their /proc/PID/comm is readable for the access log).
 *
 * Threads: fb_launcher_spawn() forks; call it only while the process has a
 * single thread (before the FUSE workers and GLib's worker thread start).
 * Everything the child needs (paths, map lines, the seccomp program, the
 * capability state) is computed before the clone, so the child makes only
 * async-signal-safe calls.  The child reports failures as {step, errno,
 * detail} records on a close-on-exec socket; the parent turns them into a
 * message with the step, the path and the fix.
 *
 * Lifetime: the outer child sets PR_SET_PDEATHSIG(SIGKILL) towards the thread
 * that called fb_launcher_spawn(), so that thread must live as long as the
 * sandbox (use the main thread); pid 1 sets it towards the outer child.
 * When pid 1 dies the kernel kills every process of its pid namespace, so the
 * whole tree dies with the supervisor, even on SIGKILL.
 *
 * Errors: int results are >= 0 on success, -errno on failure.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* Exit statuses of `fusebox run` for its own failures (as env(1), bwrap). */
#define FB_LAUNCHER_EXIT_SANDBOX 125        /* the sandbox could not be made */
#define FB_LAUNCHER_EXIT_NOT_EXECUTABLE 126 /* the command exists but can't be executed */
#define FB_LAUNCHER_EXIT_NOT_FOUND 127      /* the command was not found */

/* "use the caller's id inside" */
#define FB_LAUNCHER_ID_CALLER ((guint32)-1)

/* Who a sandbox is on the host (docs/security.md, "Identity").  Its one
 * uid and one gid map to HOST_UID/HOST_GID: the caller's own ids, except
 * for a caller that is the host's root (uid 0 in the initial user
 * namespace, or any uid that is that one), whose sandbox runs as the
 * kernel's overflow ids (/proc/sys/kernel/overflow{u,g}id, 65534: nobody),
 * so that no sandboxed process is ever the host's root; ROOT_CALLER says
 * which.  Files the command creates still belong to the caller: the
 * supervisor creates them (fs/, FbFuseIdMap). */
typedef struct
{
  guint32 host_uid, host_gid;
  bool root_caller;
} FbLauncherIdentity;

/* The identity of a sandbox started by this process now. */
void fb_launcher_identity_get (FbLauncherIdentity *ret_identity);

typedef enum
{
  FB_LAUNCHER_ROOT_FUSE = 0,     /* a new FUSE connection, served by the supervisor */
  FB_LAUNCHER_ROOT_HOST_DIR = 1, /* a host directory, bound read-only (probes, tests) */
} FbLauncherRootKind;

typedef enum
{
  FB_LAUNCHER_NETWORK_NONE = 0, /* a new network namespace with only loopback, up */
  FB_LAUNCHER_NETWORK_HOST = 1, /* the caller's network namespace */
} FbLauncherNetwork;

const char *fb_launcher_network_to_string (FbLauncherNetwork network);
bool fb_launcher_network_from_string (const char *s, FbLauncherNetwork *ret_network);

/* What to launch.  Initialise with fb_launcher_plan_init(); all strings are
 * borrowed and only read during fb_launcher_spawn(). */
typedef struct
{
  FbLauncherRootKind root_kind;
  const char *fuse_device; /* ROOT_FUSE: NULL = "/dev/fuse", opened inside the user namespace */
  const char *root_dir;    /* ROOT_HOST_DIR: absolute host path shown read-only as "/" */
  guint32 uid;             /* uid inside; FB_LAUNCHER_ID_CALLER = the caller's euid */
  guint32 gid;             /* gid inside; FB_LAUNCHER_ID_CALLER = the caller's egid */
  FbLauncherNetwork network;
  const char *const *argv; /* argv[0] without "/" is searched in envp's PATH inside */
  const char *const *envp; /* NULL = the caller's environ */
  const char *cwd;         /* absolute path inside the sandbox; NULL = "/" */
  int stdin_fd;            /* -1 = the caller's 0, 1, 2 */
  int stdout_fd;
  int stderr_fd;
  /* The PATH search of argv[0] waits for fb_launcher_child_skip_candidates()
   * (the caller found the first candidates absent without a round trip
   * through the sandbox's filesystem).  Set it only if the caller always
   * sends that, or frees the child. */
  bool path_hint;
  /* A kept view, for commands that share one (ipc/ipc-view-share.c).
   * KEEP_VIEW (a FUSE root, no command): the outer child makes its user and
   * mount namespaces and mounts the root as for a command, hands back the
   * FUSE fd (fb_launcher_child_wait_mounted) and then the two namespaces
   * and a socket (fb_launcher_child_wait_kept), and stays as the view's
   * refresher (fb_fuse_keep_warm: it stats the view paths the socket
   * brings, and exits when it ends); the namespaces, and the view mounted
   * in them, live on while someone holds those descriptors.
   * JOIN_USERNS_FD/JOIN_MNTNS_FD (-1: none): a kept view's, which the
   * command joins instead of making its own: the outer child enters that
   * user namespace (whose maps the keeper's parent wrote) and a copy of
   * that mount namespace (the same FUSE superblock: the kernel's dentry,
   * attribute and page caches are shared), with fresh ipc, uts, cgroup,
   * network and pid namespaces of its own; its pid namespace is handed
   * back (fb_launcher_child_wait_joined) before pid 1 exists, and nothing
   * runs until fb_launcher_child_go(). */
  bool keep_view;
  int join_userns_fd;
  int join_mntns_fd;
  /* NETWORK_NONE: 0, or the port of a TCP socket the outer child listens
   * on at 127.0.0.1 in the sandbox's network namespace, once "lo" is up,
   * and hands to the caller before the root's sync point
   * (fb_launcher_child_take_proxy_fd): the caller accepts on it from
   * outside, so the sandbox reaches a proxy of the caller's at that
   * address with no route out and no relay process inside. */
  guint16 proxy_port;
  /* The sandbox made ahead of its command: argv, envp, cwd, path_hint and
   * the std*_fd fields are not used (argv may be NULL), and the sandbox's
   * own standard streams are the caller's 0-2 (give it /dev/null there).
   * Everything up to pid 1's lock-down happens as for a command (a join
   * waits for fb_launcher_child_go() too); then pid 1 says it is ready
   * (fb_launcher_child_wait_ready) and waits for the command
   * (fb_launcher_child_send_command), after which the sandbox goes on as
   * for any command.  A SIGINT, SIGTERM, SIGHUP or SIGQUIT relayed to pid
   * 1 before the command ends the sandbox with 128+N. */
  bool late_command;
} FbLauncherPlan;

void fb_launcher_plan_init (FbLauncherPlan *plan);

/* The paths the command's PATH search tries, in order: argv[0] if it holds a
 * "/", else argv[0] in each entry of envp's PATH (an empty entry is ".").
 * The caller frees it with g_strfreev(). */
char **fb_launcher_plan_path_candidates (const FbLauncherPlan *plan);

/* Where the child was when it failed.  Values travel on the status socket. */
typedef enum
{
  FB_LAUNCHER_STEP_NONE = 0,
  FB_LAUNCHER_STEP_CLONE,         /* parent: clone(2) with the new namespaces */
  FB_LAUNCHER_STEP_PARENT_GONE,   /* the supervisor died before the sandbox was ready */
  FB_LAUNCHER_STEP_IDS_READY,     /* (not a failure: the child's /proc dir, for the parent to write its maps) */
  FB_LAUNCHER_STEP_SETGROUPS,     /* parent: writing "deny" to /proc/PID/setgroups */
  FB_LAUNCHER_STEP_UID_MAP,       /* parent: writing /proc/PID/uid_map */
  FB_LAUNCHER_STEP_GID_MAP,       /* parent: writing /proc/PID/gid_map */
  FB_LAUNCHER_STEP_DROP_GROUPS,   /* setgroups(0, NULL): a root caller's groups stay outside */
  FB_LAUNCHER_STEP_SET_IDS,       /* setresgid/setresuid to the ids inside, capabilities kept */
  FB_LAUNCHER_STEP_LOOPBACK,      /* bringing "lo" up in the new network namespace */
  FB_LAUNCHER_STEP_MOUNT_SLAVE,   /* making every mount a slave so nothing propagates to the host */
  FB_LAUNCHER_STEP_OPEN_ROOT,     /* opening the host directory used as root */
  FB_LAUNCHER_STEP_OPEN_DEVICE,   /* opening a host device node (detail: index) */
  FB_LAUNCHER_STEP_OPEN_FUSE,     /* opening /dev/fuse inside the user namespace */
  FB_LAUNCHER_STEP_STAGING,       /* mounting the staging tmpfs */
  FB_LAUNCHER_STEP_MOUNT_ROOT,    /* mounting the FUSE fd, or cloning the host directory's tree */
  FB_LAUNCHER_STEP_ROOT_READONLY, /* making the host directory's tree read-only */
  FB_LAUNCHER_STEP_ROOT_MOUNTED,  /* (not a failure: the sync point, see wait_mounted) */
  FB_LAUNCHER_STEP_SEND_FUSE_FD,  /* passing the FUSE fd to the supervisor */
  FB_LAUNCHER_STEP_CLONE_PID,     /* cloning pid 1 into the new pid namespace */
  FB_LAUNCHER_STEP_MOUNT_PROC,
  FB_LAUNCHER_STEP_LIMITS,     /* detail: index of the /proc/sys/user limit (launcher-limits.c) */
  FB_LAUNCHER_STEP_PROC_COVER, /* detail: index of the entry covered read-only */
  FB_LAUNCHER_STEP_MOUNT_DEV,
  FB_LAUNCHER_STEP_BIND_DEVICE, /* detail: index */
  FB_LAUNCHER_STEP_MOUNT_DEVPTS,
  FB_LAUNCHER_STEP_DEV_LINK,
  FB_LAUNCHER_STEP_MOUNT_SHM,
  FB_LAUNCHER_STEP_DEV_READONLY,
  FB_LAUNCHER_STEP_PIVOT_ROOT,
  FB_LAUNCHER_STEP_DETACH_OLD_ROOT,
  FB_LAUNCHER_STEP_CHDIR,
  FB_LAUNCHER_STEP_SETSID,
  FB_LAUNCHER_STEP_PDEATHSIG,
  FB_LAUNCHER_STEP_DUMPABLE,
  FB_LAUNCHER_STEP_SECUREBITS,
  FB_LAUNCHER_STEP_DROP_CAPS,
  FB_LAUNCHER_STEP_VERIFY_CAPS,
  FB_LAUNCHER_STEP_NO_NEW_PRIVS,
  FB_LAUNCHER_STEP_CLOSE_FDS,
  FB_LAUNCHER_STEP_SECCOMP,
  FB_LAUNCHER_STEP_SIGNALS,
  FB_LAUNCHER_STEP_FORK,
  FB_LAUNCHER_STEP_STDIO,
  FB_LAUNCHER_STEP_EXEC,
  FB_LAUNCHER_STEP_JOIN_VIEW,    /* entering a kept view's user and mount namespaces, or making the rest */
  FB_LAUNCHER_STEP_VIEW_USERNS,  /* (not a failure: a kept view's user namespace, for the parent) */
  FB_LAUNCHER_STEP_VIEW_MNTNS,   /* (not a failure: a kept view's mount namespace, for the parent) */
  FB_LAUNCHER_STEP_VIEW_REFRESH, /* (not a failure: a kept view's refresher socket, for the parent) */
  FB_LAUNCHER_STEP_VIEW_JOINED,  /* (not a failure: the sync point of a join, with the new pid namespace) */
  FB_LAUNCHER_STEP_PROXY_LISTEN, /* listening at 127.0.0.1:proxy_port in the new network namespace */
  FB_LAUNCHER_STEP_PROXY_SOCKET, /* (not a failure: that listening socket, for the parent) */
  FB_LAUNCHER_STEP_READY,        /* (not a failure: a late command's pid 1 is locked down and waits for it) */
  FB_LAUNCHER_STEP_COMMAND,      /* pid 1 taking its late command (the parent's record carries this step) */
  FB_LAUNCHER_STEP_STARTED,      /* (not a failure: a late command was executed, or failed and said so) */
  FB_LAUNCHER_STEP_ENDED,        /* (not a failure: a late command's status, its pid namespace emptied; detail) */
  FB_LAUNCHER_STEP_LANDLOCK,     /* confining pid 1's paths to the sandbox's root (Landlock) */
  FB_LAUNCHER_STEP_N
} FbLauncherStep;

const char *fb_launcher_step_to_string (FbLauncherStep step);

typedef struct
{
  FbLauncherStep step;
  int error;  /* errno */
  int detail; /* step-specific index (a device), else 0 */
} FbLauncherFailure;

/* The exit status `fusebox run` uses for this failure: 127 when the command
 * was not found, 126 when it can't be executed, else 125. */
int fb_launcher_failure_exit_code (const FbLauncherFailure *failure);

/* A started sandbox. */
typedef struct FbLauncherChild FbLauncherChild;

/* Clone the sandbox.  On success *ret_child holds the outer child.
 * Errors: -EINVAL for a bad plan, or the clone's -errno: describe it with
 * fb_launcher_describe_failure() and FB_LAUNCHER_STEP_CLONE. */
int fb_launcher_spawn (const FbLauncherPlan *plan, FbLauncherChild **ret_child);

/* The outer child's pid: the supervisor's child, pid 1's parent. */
pid_t fb_launcher_child_get_pid (const FbLauncherChild *child);
/* A pidfd for the outer child (CLONE_PIDFD), or -1 on kernels without it.
 * Owned by the child object. */
int fb_launcher_child_get_pidfd (const FbLauncherChild *child);

/* The sync point.  Blocks until the child has mounted its root.  For a FUSE
 * root, *ret_fuse_fd receives the connection's fd (close-on-exec, the
 * caller's to close) and the supervisor must start serving it right after
 * this returns: every later step of the sandbox looks up paths in the view
 * and waits for answers.  For a host-directory root *ret_fuse_fd is -1;
 * RET_FUSE_FD may be NULL.  Returns 0, or -ECHILD when the child failed or
 * died first (then see fb_launcher_child_get_failure()). */
int fb_launcher_child_wait_mounted (FbLauncherChild *child, int *ret_fuse_fd);
/* KEEP_VIEW, after wait_mounted: blocks until the keeper handed back its
 * user and mount namespaces and its refresher socket (descriptors,
 * close-on-exec, the caller's to close; RET_REFRESH_FD may be NULL: it is
 * closed, and the keeper exits).  The keeper stays until that socket is
 * shut down or closed.  Returns 0, or -ECHILD (see
 * fb_launcher_child_get_failure()). */
int fb_launcher_child_wait_kept (FbLauncherChild *child, int *ret_userns_fd, int *ret_mntns_fd, int *ret_refresh_fd);
/* A join: blocks until the outer child has entered the kept view and made
 * the command's pid namespace, whose descriptor *RET_PIDNS_FD receives
 * (close-on-exec, the caller's): every process of the command lives in
 * it, which is how the view tells its accesses from another command's.
 * Nothing inside runs before fb_launcher_child_go().  Returns 0, or
 * -ECHILD. */
int fb_launcher_child_wait_joined (FbLauncherChild *child, int *ret_pidns_fd);
int fb_launcher_child_go (FbLauncherChild *child);
/* Blocks until the command was executed (0) or the sandbox failed
 * (-ECHILD, see fb_launcher_child_get_failure()). */
int fb_launcher_child_wait_exec (FbLauncherChild *child);
/* plan.late_command: blocks until pid 1 has made and locked down the
 * sandbox and waits for its command (0), or the sandbox failed (-ECHILD,
 * also for a child that ended without a word: see
 * fb_launcher_child_get_failure()). */
int fb_launcher_child_wait_ready (FbLauncherChild *child);
/* plan.late_command, once: hands pid 1 its command.  SPEC_FD: a memfd
 * sealed against writes, growth and shrinking, holding one command in the
 * launch helper's format (FbLaunchSpecHeader with argc >= 1, then argv,
 * the environment and the cwd, ipc/ipc-process-launch.h; its umask, unless
 * FB_LAUNCH_UMASK_KEEP, is the command's; its network and ids are not
 * read: the sandbox has its own already).  STDIO: the command's stdin,
 * stdout and stderr.  The descriptors are copied; the caller keeps its
 * own.  Then fb_launcher_child_wait_exec() and the exit status work as for
 * a command given to fb_launcher_spawn().  Returns 0, -EINVAL (not a late
 * child, or a command sent already), -EPROTO or -E2BIG (SPEC_FD is not
 * such a memfd), -EPIPE (the sandbox is gone) or -errno. */
int fb_launcher_child_send_command (FbLauncherChild *child, int spec_fd, const int stdio[3]);
/* A late command's end, told before its sandbox is torn down: once
 * fb_launcher_child_wait_exec() succeeded, pid 1 keeps the status channel
 * (the descriptor get_status_fd() returns, to poll for input; -1 before or
 * for another child) and, when the command is reaped, kills and reaps
 * everything left in its pid namespace, then sends the command's status.
 * read_ended() reads what came, without blocking: 0 with *RET_EXIT_CODE
 * (the exit code, 128+N for signal N) once the status came, else -EAGAIN
 * (the status comes with pid 1's exit then, as for any command). */
int fb_launcher_child_get_status_fd (const FbLauncherChild *child);
int fb_launcher_child_read_ended (FbLauncherChild *child, int *ret_exit_code);
/* With plan.proxy_port, after wait_mounted (or wait_joined): the listening
 * socket inside (close-on-exec, non-blocking, the caller's to close), or
 * -1 when there is none. */
int fb_launcher_child_take_proxy_fd (FbLauncherChild *child);
/* The failure the child reported, or NULL. */
const FbLauncherFailure *fb_launcher_child_get_failure (const FbLauncherChild *child);
/* With plan.path_hint: the first COUNT candidates of
 * fb_launcher_plan_path_candidates() are known to be absent (ENOENT or
 * ENOTDIR) inside, so the command starts its search after them (all of
 * them: the command is not found, 127).  Send it once, before serving the
 * sandbox's filesystem, so the command never waits for it. */
int fb_launcher_child_skip_candidates (FbLauncherChild *child, guint count);
/* A message for people: what failed, the path, and what to do. */
char *fb_launcher_child_describe_failure (const FbLauncherChild *child);
char *fb_launcher_describe_failure (const FbLauncherPlan *plan, const FbLauncherFailure *failure);

/* Send SIG to the outer child, which relays SIGINT, SIGTERM, SIGHUP and
 * SIGQUIT to pid 1, which forwards them to the command (before a late
 * command has come, they end the sandbox: 128+N).  SIGKILL kills the
 * whole sandbox (PDEATHSIG of pid 1, then the pid namespace). */
int fb_launcher_child_kill (FbLauncherChild *child, int sig);
/* Reap pid 1.  *ret_exit_code: the command's exit status, 128+N when it was
 * killed by signal N, or 125/126/127 when the sandbox failed.  Returns 0 or
 * -errno of waitpid. */
int fb_launcher_child_wait (FbLauncherChild *child, int *ret_exit_code);
/* Non-blocking variant: -EAGAIN while pid 1 runs. */
int fb_launcher_child_try_wait (FbLauncherChild *child, int *ret_exit_code);
/* Kills (SIGKILL) and reaps a child not yet reaped; accepts NULL. */
void fb_launcher_child_free (FbLauncherChild *child);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbLauncherChild, fb_launcher_child_free)

/* ---- Building blocks (launcher-*.c share them; `fusebox check` reuses them) ---- */

/* The seccomp program (launcher-seccomp-gen.c, docs/security.md), prepared
 * once in the parent. */
typedef struct FbLauncherSeccomp FbLauncherSeccomp;
int fb_launcher_seccomp_new (FbLauncherSeccomp **ret_seccomp);
/* Async-signal-safe: install the program on the calling process (all
 * threads, SECCOMP_FILTER_FLAG_TSYNC).  Needs no_new_privs or CAP_SYS_ADMIN. */
int fb_launcher_seccomp_install (const FbLauncherSeccomp *seccomp);
void fb_launcher_seccomp_free (FbLauncherSeccomp *seccomp);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbLauncherSeccomp, fb_launcher_seccomp_free)

/* The capability lock-down, prepared in the parent. */
typedef struct FbLauncherLockdown FbLauncherLockdown;
int fb_launcher_lockdown_new (FbLauncherLockdown **ret_lockdown);
/* Async-signal-safe, in this order: setsid, PR_SET_PDEATHSIG(SIGKILL),
 * PR_SET_DUMPABLE(0), securebits, every capability dropped from all five sets and checked,
 * PR_SET_NO_NEW_PRIVS, every fd but 0-2 and KEEP_FD closed, then SECCOMP
 * (may be NULL) installed.  On failure returns -errno and sets *ret_step. */
int fb_launcher_lockdown_apply (const FbLauncherLockdown *lockdown, const FbLauncherSeccomp *seccomp, int keep_fd,
                                FbLauncherStep *ret_step);
/* pid 1, just before its command (whose standard streams are STDIO): a
 * Landlock domain in which every access beneath "/" is allowed, each of
 * STDIO that is a file or a device of a real file system may be opened
 * again for what it was opened for (a terminal, a file: read, write), and
 * nothing else is.  Async-signal-safe.  0, also where the kernel has no
 * Landlock the sandbox can use (fb_launcher_landlock_abi() below 2);
 * -EISDIR with *RET_STREAM when that stream is a directory or a path
 * handle (checked with Landlock or without), or -errno. */
int fb_launcher_confine_paths (const int stdio[3], int *ret_stream);
/* The kernel's Landlock ABI version; 0 when it has none (not built, not
 * in the LSM list, or refused to us), 1 when it has one the sandbox can't
 * use (every rename or link into another directory would be refused):
 * below 2 no paths are confined. */
int fb_launcher_landlock_abi (void);
void fb_launcher_lockdown_free (FbLauncherLockdown *lockdown);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbLauncherLockdown, fb_launcher_lockdown_free)

/* The mount plan, prepared in the parent, applied by the children inside
 * their new user+mount namespace (each mutates its own copy: it keeps the
 * fds it opens).  Nothing is created on the host: every directory and file
 * the plan makes lives in a tmpfs mounted inside the namespace. */
typedef struct FbLauncherMounts FbLauncherMounts;
int fb_launcher_mounts_new (const FbLauncherPlan *plan, guint32 uid, guint32 gid, FbLauncherMounts **ret_mounts);
/* Async-signal-safe, in the outer child inside its user namespace, while it
 * is still the caller on the host: opens the FUSE device of a FUSE root
 * (nothing for a host directory).  On failure returns -errno and fills
 * *ret_failure. */
int fb_launcher_mounts_open_fuse (FbLauncherMounts *mounts, FbLauncherFailure *ret_failure);
/* Async-signal-safe, in the outer child, after open_fuse: mounts the root
 * and sends the FB_LAUNCHER_STEP_ROOT_MOUNTED record on STATUS_FD (with the
 * FUSE fd attached for a FUSE root).  On failure returns -errno and fills
 * *ret_failure. */
int fb_launcher_mounts_apply_root (FbLauncherMounts *mounts, int status_fd, FbLauncherFailure *ret_failure);
/* Where the root is mounted until pid 1 pivots into it (a path in the
 * child's mount namespace).  Async-signal-safe. */
const char *fb_launcher_mounts_get_root (const FbLauncherMounts *mounts);
/* Async-signal-safe, in the outer child of a join, in its own user and
 * mount namespaces below the kept view's: what apply_root does for a root
 * the view's keeper mounted already (the device nodes, the root made a
 * mount pid 1 may pivot into).  No record is sent. */
int fb_launcher_mounts_apply_joined (FbLauncherMounts *mounts, FbLauncherFailure *ret_failure);
/* The sandbox's own limits of per-user kernel objects (inotify, fanotify,
 * namespaces: launcher-limits.c), prepared in the parent. */
typedef struct FbLauncherLimits FbLauncherLimits;
int fb_launcher_limits_new (FbLauncherLimits **ret_limits);
/* Async-signal-safe, with CAP_SYS_RESOURCE in the sandbox's user namespace:
 * writes them through PROC_FD, a writable procfs.  On failure returns -errno
 * and fills *ret_failure (detail: the limit). */
int fb_launcher_limits_apply (const FbLauncherLimits *limits, int proc_fd, FbLauncherFailure *ret_failure);
/* The name of limit DETAIL ("max_inotify_instances"...) for messages, or NULL. */
const char *fb_launcher_limits_name (int detail);
void fb_launcher_limits_free (FbLauncherLimits *limits);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbLauncherLimits, fb_launcher_limits_free)

/* Async-signal-safe, in pid 1 (the procfs must be its pid namespace's):
 * mounts /proc, sets LIMITS through it before it covers /proc/sys, mounts
 * /dev, /dev/pts, /dev/shm and pivots into the root. */
int fb_launcher_mounts_apply_rest (FbLauncherMounts *mounts, const FbLauncherLimits *limits,
                                   FbLauncherFailure *ret_failure);
/* The name of device DETAIL ("/dev/null"...) for messages, or NULL. */
const char *fb_launcher_mounts_device_name (int detail);
/* The /proc entry DETAIL of FB_LAUNCHER_STEP_PROC_COVER ("sys"...), or NULL. */
const char *fb_launcher_mounts_proc_cover_name (int detail);
void fb_launcher_mounts_free (FbLauncherMounts *mounts);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbLauncherMounts, fb_launcher_mounts_free)

/* Async-signal-safe helpers for a cloned child (launcher-ns.c).  The status
 * channel is a SOCK_SEQPACKET socket: one record per message, EOF when every
 * child-side end is closed (the last one by the command's exec).  Each
 * record is an FbLauncherRecord, with descriptors as SCM_RIGHTS. */
typedef struct
{
  gint32 step; /* FbLauncherStep */
  gint32 error;
  gint32 detail;
} FbLauncherRecord;
void fb_launcher_report (int status_fd, FbLauncherStep step, int error, int detail);
/* A record carrying FD (SCM_RIGHTS); returns -errno. */
int fb_launcher_report_fd (int status_fd, FbLauncherStep step, int fd);
int fb_launcher_ns_loopback_up (void);

/* The command and pid 1 (launcher-pid1.c). */
typedef struct FbLauncherCommand FbLauncherCommand;
int fb_launcher_command_new (const FbLauncherPlan *plan, FbLauncherCommand **ret_command);
/* Never returns: forks the command, forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT to
 * it, reaps every child and _exits with the command's status (128+N for a
 * signal).  STATUS_FD goes to the command (close-on-exec: EOF on exec) and
 * is closed in pid 1. */
G_GNUC_NORETURN void fb_launcher_pid1_run (const FbLauncherCommand *command, int status_fd);
/* Never returns: pid 1 of a late command, after its lock-down.  Sends
 * FB_LAUNCHER_STEP_READY on STATUS_FD, receives the COMMAND record (the
 * memfd and three stdio descriptors), checks it (else reports
 * FB_LAUNCHER_STEP_COMMAND and _exits 125), applies its umask and cwd, and
 * goes on as fb_launcher_pid1_run(). */
G_GNUC_NORETURN void fb_launcher_pid1_run_late (int status_fd);
/* The parent's reading of a late command's memfd, as pid 1 checks it:
 * 0 with argv[0], the cwd and the environment's PATH (NULL: none) for
 * messages, or -EPROTO, -E2BIG, -errno. */
int fb_launcher_late_command_check (int spec_fd, char **ret_argv0, char **ret_cwd, char **ret_path_env);
/* Never returns: the outer child's loop.  Relays SIGINT/SIGTERM/SIGHUP/SIGQUIT
 * to PID (pid 1) and _exits with its status (128+N for a signal). */
G_GNUC_NORETURN void fb_launcher_relay_run (pid_t pid);
void fb_launcher_command_free (FbLauncherCommand *command);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbLauncherCommand, fb_launcher_command_free)

/* `fusebox check` (launcher-check.c): each probe runs in a child with a
 * timeout and prints one line to OUT.  Returns the number of probes that
 * failed (0: `run` can work). */
typedef struct
{
  const char *fuse_path;   /* NULL = "/dev/fuse" */
  const char *sysctl_root; /* NULL = "/proc/sys" (a seam for tests) */
  guint timeout_ms;        /* per probe; 0 = 5000 */
  bool quiet_ok;           /* print only the problems */
} FbLauncherCheckOptions;
int fb_launcher_check_run (const FbLauncherCheckOptions *options, FILE *out);

G_END_DECLS
