/* fusebox — the protocol between `fusebox serve` and its launch helper,
 * `fusebox-launch` (launcher/launcher-launch.c).  It lives in ipc/ because
 * launcher/ may depend on ipc/, not the other way round.
 *
 * Why a helper: the server runs a GLib main loop and FUSE threads, and a
 * process that runs threads must not fork a sandbox (launcher/launcher.h,
 * DESIGN.md).  So process/start spawns this small single-threaded program,
 * which calls fb_launcher_spawn() and stays as the sandbox's parent.
 *
 * The channel is a SOCK_SEQPACKET socket at the helper's fd 3: one
 * FbLaunchRecord per message.  The helper's stdin, stdout and stderr are the
 * command's (pipes or a pty slave); the server keeps the other ends.
 *
 * helper → server, in this order:
 *   MOUNTED  + the FUSE fd (SCM_RIGHTS): serve it now, the sandbox waits
 *   EXEC     the command runs (value: the outer child's pid)
 *   FAILED   the sandbox could not be made or the command not executed;
 *            value: the exit status (125/126/127), text: what to do
 *   EXITED   value: the command's exit status (128+N for signal N)
 * server → helper:
 *   SIGNAL   value: a signal for the sandbox (SIGINT, SIGTERM, SIGKILL...)
 * EOF from the server (it died or dropped the process) kills the sandbox.
 */
#pragma once

#include <stdint.h>

#define FB_LAUNCH_FD 3
/* The helper died without a word: as a sandbox failure of `fusebox run`. */
#define FB_LAUNCH_EXIT_SANDBOX 125

typedef enum
{
  FB_LAUNCH_MOUNTED = 1,
  FB_LAUNCH_EXEC = 2,
  FB_LAUNCH_FAILED = 3,
  FB_LAUNCH_EXITED = 4,
  FB_LAUNCH_SIGNAL = 5,
} FbLaunchRecordType;

typedef struct
{
  uint32_t type;
  int32_t value;
  char text[1024]; /* NUL-terminated */
} FbLaunchRecord;
