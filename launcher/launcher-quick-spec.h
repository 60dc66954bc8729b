/* fusebox — the quick client's command (launcher-front.c), libc alone. */
#pragma once

/* COMMAND, the environment ENVP, our working directory and umask, with
 * the caller's own ids (FB_LAUNCH_ID_CALLER), in a memfd sealed as
 * fb_launch_spec_decode() demands; -1 when it can't be made or is past
 * the bounds of ipc/ipc-launch-spec.h (the full client then says which). */
int fb_quick_command_memfd (const char *const *command, const char *const *envp);
