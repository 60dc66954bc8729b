/* fusebox — what the quick client (launcher-front.c) shares with the
 * full program, in libc alone. */
#pragma once

/* COMMAND, the environment ENVP, our working directory and umask, with
 * the caller's own ids (FB_LAUNCH_ID_CALLER), in a memfd sealed as
 * fb_launch_spec_decode() demands; -1 when it can't be made or is past
 * the bounds of ipc/ipc-launch-spec.h (the full client then says which). */
int fb_quick_command_memfd (const char *const *command, const char *const *envp);

/* SIGINT, SIGTERM, SIGHUP and SIGQUIT, which a supervisor forwards to its
 * command, blocked and read from a close-on-exec, non-blocking signalfd
 * (-1 if none could be made: they stay blocked). */
int fb_forwarded_signalfd (void);
