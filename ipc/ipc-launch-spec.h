/* fusebox — the command's memfd of ipc/ipc-process-launch.h (which
 * describes it), in C and libc alone: `fusebox`, the quick client of `run
 * --session` (launcher/launcher-front.c), writes one without GLib. */
#pragma once
#include <stdint.h>

#define FB_LAUNCH_SPEC_MAGIC 0x66626c32u /* "fbl2": with ids and umask */
/* execve's MAX_ARG_STRLEN: one argument or NAME=VALUE */
#define FB_LAUNCH_STRING_MAX (128 * 1024)
/* argv, environment and cwd together (execve: a quarter of an 8 MiB stack) */
#define FB_LAUNCH_SPEC_MAX (2 * 1024 * 1024)
/* argv and environment entries together */
#define FB_LAUNCH_STRINGS_MAX 65536
/* the cwd, an absolute path inside the sandbox */
#define FB_LAUNCH_CWD_MAX 4096

/* "the helper's own id" (FbLauncherPlan's FB_LAUNCHER_ID_CALLER) */
#define FB_LAUNCH_ID_CALLER 0xffffffffu
/* "the helper's own umask", left as it is */
#define FB_LAUNCH_UMASK_KEEP 0xffffffffu

typedef struct
{
  uint32_t magic;
  uint32_t network;      /* 0 none, 1 host, 2 an allowlist: none and the proxy's socket */
  uint32_t argc;         /* >= 1; 0 in a late spec */
  uint32_t envc;         /* 0 in a late spec */
  uint64_t strings_size; /* bytes after the header */
  uint32_t uid, gid;     /* the ids inside (FbLauncherPlan.uid/gid), or FB_LAUNCH_ID_CALLER */
  uint32_t umask;        /* 0..0777, or FB_LAUNCH_UMASK_KEEP */
  uint32_t reserved;     /* 0: the header holds no uninitialised padding */
} FbLaunchSpecHeader;
