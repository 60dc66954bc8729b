/* fusebox — the command line's internal interface: one entry point per
 * subcommand, each in launcher/launcher-cmd-<name>.c.
 *
 * Exit codes shared by every subcommand (documented in docs/fusebox.1):
 *   0  success
 *   1  the command ran and failed (invalid policy, mount failed, ...)
 *   2  usage error (unknown option, missing argument)
 *  `fusebox run` adds 125, 126, 127 and the command's own status. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define FB_EXIT_OK 0
#define FB_EXIT_FAILURE 1
#define FB_EXIT_USAGE 2

/* Each takes argv with argv[0] = the subcommand's name ("policy", "mount"...). */
int fb_cmd_policy (int argc, char **argv);
int fb_cmd_check (int argc, char **argv);
int fb_cmd_run (int argc, char **argv);
int fb_cmd_runs (int argc, char **argv);
int fb_cmd_log (int argc, char **argv);
int fb_cmd_report (int argc, char **argv);
int fb_cmd_mount (int argc, char **argv);
int fb_cmd_serve (int argc, char **argv);

/* Print "fusebox: " + message to stderr (no trailing newline needed). */
void fb_cmd_error (const char *format, ...) G_GNUC_PRINTF (1, 2);

G_END_DECLS
