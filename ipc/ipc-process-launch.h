/* fusebox — the protocol between `fusebox serve` and its launch helper,
 * `fusebox-launch` (launcher/launcher-launch.c).  It lives in ipc/ because
 * launcher/ may depend on ipc/, not the other way round.
 *
 * Why a helper: the server runs a GLib main loop and FUSE threads, and a
 * process that runs threads must not fork a sandbox (launcher/launcher.h,
 * docs/design.md#processes).  So process/start spawns this small
 * single-threaded program, which calls fb_launcher_spawn() and stays as the
 * sandbox's parent.
 *
 * Threat model: the helper runs on the host, outside every namespace, as
 * the server's user; everything in a process/start comes from a client.
 * So nothing of the client's reaches the helper's own process: its argv is
 * its path alone, its environment empty, its working directory "/" (all
 * fixed by the server).  The client's argv, env and cwd travel as data, in
 * a sealed memfd (FB_LAUNCH_SPEC), and are used only for the final exec
 * inside the sandbox.  An `env` of {"LD_PRELOAD": "<a file the client
 * wrote>"} once became the helper's environment, and the dynamic loader
 * ran the client's code on the host before main().
 *
 * The channel is a SOCK_SEQPACKET socket at the helper's fd 3: one
 * FbLaunchRecord per message.  The helper's stdin, stdout and stderr are the
 * command's (pipes or a pty slave); the server keeps the other ends.
 *
 * server → helper, first, one of:
 *   SPEC     + a sealed memfd (SCM_RIGHTS) holding the command (below), in
 *            a view of its own; or + the memfd, a kept view's user
 *            namespace and its mount namespace: the command joins that
 *            view (FbLauncherPlan.join_*).  With value
 *            FB_LAUNCH_SPEC_STDIO, three more: the command's stdin, stdout
 *            and stderr, which the helper makes its own 0, 1 and 2 (a
 *            helper started before its command, with /dev/null there:
 *            ipc/ipc-process.c, "The spare helper").  With value
 *            FB_LAUNCH_SPEC_LATE (never with STDIO), the memfd is a late
 *            spec (its header alone: network, uid and gid): the sandbox
 *            is made and locked down with no command
 *            (FbLauncherPlan.late_command), the helper says READY and
 *            waits for COMMAND; its standard streams stay /dev/null
 *   KEEP     make a kept view (FbLauncherPlan.keep_view): no command; the
 *            helper answers MOUNTED, then KEPT, and exits 0
 * helper → server, in this order:
 *   MOUNTED  + the FUSE fd (SCM_RIGHTS): serve it now, the sandbox waits
 *            (not for a join: the view is served already)
 *   KEPT     + the kept view's user and mount namespaces (KEEP only)
 *   PROXY    + the socket the sandbox listens on at 127.0.0.1:FB_LAUNCH_PROXY_PORT
 *            (network 2, an allowlist: FbLauncherPlan.proxy_port), before
 *            JOINED or after MOUNTED: the server's proxy accepts on it
 *   JOINED   + the command's pid namespace (a join only): the server
 *            tells its view that accesses from it are this command's,
 *            then answers GO; nothing runs in the sandbox before
 *   READY    (LATE) the sandbox is made, locked down, and waits for
 *            COMMAND; a SIGNAL before it reaches the sandbox, which a
 *            terminating one ends (EXITED 128+N)
 *   EXEC     the command runs (value: the outer child's pid)
 *   FAILED   the sandbox could not be made or the command not executed;
 *            value: the exit status (125/126/127), text: what to do
 *   EXITED   value: the command's exit status (128+N for signal N)
 * server → helper, later:
 *   GO       the answer to JOINED
 *   COMMAND  (LATE, after READY) + 4 descriptors: the command's sealed
 *            memfd (a command, argc >= 1; its umask is applied inside,
 *            its network and ids are the late spec's) and its stdin,
 *            stdout and stderr.  A malformed one is answered FAILED 125
 *   SIGNAL   value: a signal for the sandbox (SIGINT, SIGTERM, SIGKILL...)
 * EOF from the server (it died or dropped the process) kills the sandbox.
 *
 * The memfd: an FbLaunchSpecHeader, then argc + envc + 1 NUL-terminated
 * strings (argv, the environment as NAME=VALUE, the cwd), nothing after;
 * a late spec is the header alone (argc and envc 0).  The header also
 * holds the ids inside (FB_LAUNCH_ID_CALLER: the helper's) and the
 * command's umask (FB_LAUNCH_UMASK_KEEP: the helper's; `serve` sends both
 * so).
 * Sealed against writes, growing and shrinking before it is sent, so what
 * the helper checked is what it uses.  Both sides check the same bounds
 * (fb_launch_spec_check): they are execve's own (MAX_ARG_STRLEN per
 * string, ARG_MAX-like totals), so a command the kernel would take is never
 * refused here.
 */
#pragma once
#include "ipc/ipc-launch-spec.h"

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define FB_LAUNCH_FD 3
/* FB_PROXY_PORT (ipc/ipc-proxy.h), which the helper does not link */
#define FB_LAUNCH_PROXY_PORT 3128
/* The helper died without a word: as a sandbox failure of `fusebox run`. */
#define FB_LAUNCH_EXIT_SANDBOX 125

typedef enum
{
  FB_LAUNCH_MOUNTED = 1,
  FB_LAUNCH_EXEC = 2,
  FB_LAUNCH_FAILED = 3,
  FB_LAUNCH_EXITED = 4,
  FB_LAUNCH_SIGNAL = 5,
  FB_LAUNCH_SPEC = 6,
  FB_LAUNCH_KEEP = 7,
  FB_LAUNCH_KEPT = 8,
  FB_LAUNCH_JOINED = 9,
  FB_LAUNCH_GO = 10,
  FB_LAUNCH_PROXY = 11,
  FB_LAUNCH_VIEW_REFRESH = 12, /* the refresher's socket and pidfd */
  FB_LAUNCH_READY = 13,
  FB_LAUNCH_COMMAND = 14,
} FbLaunchRecordType;

typedef struct
{
  uint32_t type;
  int32_t value;
  char text[1024]; /* NUL-terminated */
} FbLaunchRecord;

/* SPEC's value, flags: STDIO, the last three descriptors are the command's
 * stdio; LATE, the memfd is a late spec (the sandbox, its command later in
 * COMMAND).  Not both. */
#define FB_LAUNCH_SPEC_STDIO 1
#define FB_LAUNCH_SPEC_LATE 2

/* --- the command (FB_LAUNCH_SPEC) ---------------------------------------- */

/* FB_LAUNCH_SPEC_MAGIC, the bounds, FbLaunchSpecHeader: ipc/ipc-launch-spec.h */

typedef struct
{
  guint32 network;
  guint32 uid, gid; /* FB_LAUNCH_ID_CALLER: the helper's own */
  guint32 umask;    /* FB_LAUNCH_UMASK_KEEP: the helper's own */
  char **argv;      /* NULL-terminated, argc >= 1; NULL in a late spec */
  char **envp;      /* NULL-terminated, may be empty; NULL in a late spec */
  char *cwd;        /* absolute; NULL in a late spec */
} FbLaunchSpec;

void fb_launch_spec_clear (FbLaunchSpec *spec);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (FbLaunchSpec, fb_launch_spec_clear)

/* The bounds and shapes both sides demand: argv[0] not empty, every
 * environment entry NAME=VALUE with a non-empty NAME, an absolute cwd, the
 * sizes above, a umask within 0777 or "keep".  LATE: a late spec instead
 * (SPEC_LATE: the sandbox, not yet its command): no argv, environment or
 * cwd at all; this is the only place argc 0 is accepted.  Returns 0, or
 * -E2BIG / -EINVAL with *ret_why (static text, for people) saying which. */
int fb_launch_spec_check (const FbLaunchSpec *spec, bool late, const char **ret_why);
/* Server side: a sealed, close-on-exec memfd holding SPEC (LATE: a late
 * spec, with no strings). */
int fb_launch_spec_seal (const FbLaunchSpec *spec, bool late, int *ret_fd, const char **ret_why);
/* A command's spec with the helper's own ids and umask
 * (FB_LAUNCH_ID_CALLER, FB_LAUNCH_UMASK_KEEP); the strings borrowed. */
FbLaunchSpec fb_launch_spec_command (guint32 network, const char *const *argv, const char *const *envp,
                                     const char *cwd);
/* fb_launch_spec_seal of a command with the helper's own ids and umask
 * (FB_LAUNCH_ID_CALLER, FB_LAUNCH_UMASK_KEEP). */
int fb_launch_spec_encode (guint32 network, const char *const *argv, const char *const *envp, const char *cwd,
                           int *ret_fd, const char **ret_why);
/* Helper side: FD must be a memfd sealed against writes, growth and
 * shrinking, holding exactly one well-formed spec within the bounds: a
 * command, or with LATE a late spec (no strings). */
int fb_launch_spec_decode (int fd, bool late, FbLaunchSpec *ret_spec, const char **ret_why);

/* Server side: start the helper at PATH, with no argument, an empty
 * environment and "/" as its working directory; IN, OUT and ERR as its
 * stdin, stdout and stderr (IN and OUT must be given; ERR -1: the
 * server's own, for a keeper's messages), SOCK as its fd 3
 * (FB_LAUNCH_FD), every other descriptor closed, every signal's default
 * action and none blocked.  posix_spawn(3), whose
 * child shares the server's memory until its exec: a fork would copy the
 * page tables of everything the server holds (its views' nodes, tens of
 * megabytes after a big walk) and mark each of its pages copy-on-write,
 * so that the server then takes a page fault at its next write to every
 * one of them (docs/performance.md, "The launch helper's start").
 * The helper's pid, or 0 with ERROR set. */
GPid fb_launch_helper_spawn (const char *path, int in, int out, int err, int sock, GError **error);

/* A helper at PATH started ahead of its command (/dev/null as its
 * streams), sent a late spec (NETWORK; UID, GID inside) with the view's
 * user and mount namespaces VIEW_NS: it makes the sandbox and says READY;
 * its command comes with COMMAND.  Its pid and *RET_SOCK, our end of its
 * socket; or 0 with ERROR set (a helper started is killed and reaped). */
GPid fb_launch_helper_spawn_late (const char *path, guint32 network, guint32 uid, guint32 gid, const int view_ns[2],
                                  int *ret_sock, GError **error);

/* recvmsg of up to SIZE bytes into BUF (FLAGS: MSG_DONTWAIT or 0), close on
 * exec, and the descriptors it carries: the first MAX_FDS (at most
 * FB_LAUNCH_RECV_FDS_MAX) in FDS, else -1, the rest closed; *RET_NFDS how
 * many came, *RET_TRUNCATED whether the kernel dropped some (MSG_CTRUNC:
 * more than MAX_FDS were sent).  The bytes read, 0 at EOF, or -errno. */
#define FB_LAUNCH_RECV_FDS_MAX 6
ssize_t fb_launch_recvmsg (int sock, void *buf, gsize size, int flags, int *fds, int max_fds, int *ret_nfds,
                           bool *ret_truncated);
/* One message of exactly SIZE bytes on a SOCK_SEQPACKET socket, and up to
 * two descriptors it carries (FDS, else -1; more are closed): its size, 0
 * at EOF, -EPROTO for another size, -errno (FLAGS: MSG_DONTWAIT or 0).
 * Also `run --session`'s channel (launcher-session-wire.c). */
ssize_t fb_launch_recv (int sock, void *buf, gsize size, int flags, int fds[2]);
/* Server side: one record from the helper, without blocking: 1, 0 at EOF,
 * -EAGAIN when none is there, -EPROTO for a short one, -errno. */
int fb_launch_record_recv (int sock, FbLaunchRecord *rec, int fds[2]);
