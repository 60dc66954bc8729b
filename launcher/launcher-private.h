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
#include <linux/filter.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* The peer's pidfd (Linux 6.5), which Debian 12's headers do not name. */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

#define FB_EXIT_OK 0
#define FB_EXIT_FAILURE 1
#define FB_EXIT_USAGE 2

/* Each takes argv with argv[0] = the subcommand's name ("policy", "mount"...). */
int fb_cmd_policy (int argc, char **argv);
int fb_cmd_check (int argc, char **argv);
int fb_cmd_run (int argc, char **argv);
int fb_cmd_session (int argc, char **argv);
int fb_cmd_runs (int argc, char **argv);
int fb_cmd_log (int argc, char **argv);
int fb_cmd_report (int argc, char **argv);
int fb_cmd_mount (int argc, char **argv);
int fb_cmd_serve (int argc, char **argv);

/* Print "fusebox: " + message to stderr (no trailing newline needed).
 * Every %s argument is escaped (fb_text_printf): pass names, paths and
 * other programs' messages raw, and nothing escaped already. */
void fb_cmd_error (const char *format, ...) G_GNUC_PRINTF (1, 2);
/* printf to OUT with every %s argument escaped the same: the other
 * messages and lines for people that quote a name. */
void fb_cmd_print (FILE *out, const char *format, ...) G_GNUC_PRINTF (2, 3);
/* A command of commands (fusebox, fusebox policy) given none (USAGE on
 * stderr: FB_EXIT_USAGE) or --help, -h or help (USAGE on stdout:
 * FB_EXIT_OK); -1 when ARGV[1] is something else. */
int fb_cmd_usage_or_help (int argc, char **argv, void (*usage) (FILE *out));
/* COMMAND's ("mount", "policy check") usage error: MESSAGE and where its
 * --help is; returns FB_EXIT_USAGE. */
int fb_cmd_usage_error (const char *command, const char *message);
/* A command's options context as its --help shows it: "Usage: fusebox
 * COMMAND [OPTION...] PARAMETERS", SUMMARY above the options, DESCRIPTION
 * (NULL: none) below them. */
GOptionContext *fb_cmd_option_context (const char *parameters, const char *summary, const char *description);
/* COMMAND's options (ENTRIES) out of *ARGC, *ARGV into CTX; false after
 * fb_cmd_usage_error when they do not parse. */
bool fb_cmd_parse_options (GOptionContext *ctx, const GOptionEntry *entries, const char *command, int *argc,
                           char ***argv);

/* COMMAND takes options only: false after its usage error when ARGV still
 * holds an argument once they are parsed. */
bool fb_cmd_options_only (const char *command, int argc, char **argv);

/* The bearer token in FILE (serve --token-file, log --connect --token-file):
 * a regular file (a FIFO or a device there would hang or flood us; links
 * are followed) of at most FB_CMD_TOKEN_MAX bytes, one line without spaces
 * once surrounding blanks are stripped; NULL with ERROR naming FILE, what
 * is wrong and the fix (launcher-cmd-serve.c). */
#define FB_CMD_TOKEN_MAX 4096
char *fb_cmd_read_token (const char *file, GError **error);

/* Shared by `fusebox run` and `fusebox runs` (launcher-cmd-run.c,
 * launcher-cmd-runs.c): rm -rf below PARENT_FD/NAME without following
 * symlinks (directories the sandbox made read-only are made writable
 * first): 0 or the first -errno. */
int fb_cmd_remove_tree_at (int parent_fd, const char *name);
/* DIR's run.json, or NULL: missing silently, anything else (not a regular
 * file, too large, not a JSON object) after a warning from COMMAND. */
struct _JsonObject *fb_cmd_read_run_json (const char *dir, const char *command);
/* The same, for what a run made: anything born before SINCE (a run's
 * fb_run_get_made) was moved in by another, through a view that shows the
 * run directory (a --run-dir in a workspace), and is left where it is,
 * with what holds it: -EEXIST then, once the rest is removed.  A
 * filesystem that keeps no birth times removes all. */
int fb_cmd_remove_tree_since (int parent_fd, const char *name, const struct timespec *since);
/* A program installed beside this one (found through /proc/self/exe), or
 * the one $ENV_VAR names when it is set and not empty; NULL when this
 * program's own path can't be read. */
char *fb_cmd_sibling_program (const char *env_var, const char *name);

/* The caller's terminal around `fusebox run` (launcher-cmd-terminal.c):
 * the modes, TIOCEXCL and window size of each of fds 0-2 that is a
 * terminal, saved before the command starts and put back after the sandbox
 * is gone, its output restarted. */
typedef struct FbCmdTerminal FbCmdTerminal;
FbCmdTerminal *fb_cmd_terminal_save (void);
void fb_cmd_terminal_restore (FbCmdTerminal *terminal);
void fb_cmd_terminal_free (FbCmdTerminal *terminal);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbCmdTerminal, fb_cmd_terminal_free)

/* The access log's budget of run, mount and serve
 * (launcher-cmd-logbudget.c): --log-file-size and --log-max-size (FILE_ARG,
 * MAX_ARG: NULL when not given) over the policy's "log" section over the
 * defaults.  False after a message (a usage error).  And the message for
 * a log that reached it (WHAT: "the sandbox", "the mount"...). */
typedef struct FbPolicy FbPolicy;
/* --workspace DIR of run, mount and serve (launcher-cmd-logbudget.c): its
 * absolute, symlink-free form, or NULL after COMMAND's message. */
char *fb_cmd_resolve_workspace (const char *command, const char *dir);
/* DIR (a --workspace) is on no other user's FUSE filesystem (false after a
 * message "COMMAND: ..."). */
bool fb_cmd_workspace_reachable (const char *command, const char *dir);
bool fb_cmd_log_budget (const char *command, const char *file_arg, const char *max_arg, const FbPolicy *policy,
                        guint64 default_max, guint64 *ret_file_size, guint64 *ret_max_size);
/* RUN's directory made with POLICY (fb_run_create) once the log's budget
 * (as fb_cmd_log_budget) is known: -1, or after COMMAND's message
 * FB_EXIT_USAGE (the budget's options) or FB_EXIT_FAILURE. */
typedef struct FbRun FbRun;
int fb_cmd_create_run (const char *command, FbRun *run, FbPolicy *policy, const char *file_arg, const char *max_arg,
                       guint64 default_max, guint64 *ret_file_size, guint64 *ret_max_size);
char *fb_cmd_log_full_message (const char *what, const char *log_path, guint64 max_size, guint64 not_written);

/* What mount and serve read from their command lines for their run
 * (launcher-cmd-logbudget.c), and the option rows they share, each with
 * one help text: FB_CMD_RUN_ARGS_ENTRIES (--workspace, --log, --log-level),
 * FB_CMD_RUN_ARGS_FILE_SIZE_ENTRY (--log-file-size) and
 * FB_CMD_RUN_ARGS_JOURNAL_ENTRY (--log-journal).  --policy and
 * --log-max-size say each command's own default. */
typedef struct
{
  char *policy, *workspace, *log, *level, *log_file_size, *log_max_size;
  gboolean log_journal;
  char *workspace_real; /* canonical */
} FbCmdRunArgs;
#define FB_CMD_RUN_ARGS_ENTRIES(args)                                                                                  \
  { "workspace",                                                                                                       \
    'w',                                                                                                               \
    0,                                                                                                                 \
    G_OPTION_ARG_FILENAME,                                                                                             \
    &(args)->workspace,                                                                                                \
    "Directory that ${WORKSPACE} stands for (default: the current directory)",                                         \
    "DIR" },                                                                                                           \
    { "log",                                                                                                           \
      'l',                                                                                                             \
      0,                                                                                                               \
      G_OPTION_ARG_FILENAME,                                                                                           \
      &(args)->log,                                                                                                    \
      "Write the access log to FILE (default: access.jsonl in a new run directory)",                                   \
      "FILE" },                                                                                                        \
  {                                                                                                                    \
    "log-level", 'L', 0, G_OPTION_ARG_STRING, &(args)->level, "mutations, opens (default) or all", "LEVEL"             \
  }
#define FB_CMD_RUN_ARGS_FILE_SIZE_ENTRY(args)                                                                          \
  {                                                                                                                    \
    "log-file-size", 0, 0, G_OPTION_ARG_STRING, &(args)->log_file_size,                                                \
      "Rotate the access log past SIZE (default 16M, or the policy's log.file_size)", "SIZE"                           \
  }
#define FB_CMD_RUN_ARGS_JOURNAL_ENTRY(args)                                                                            \
  {                                                                                                                    \
    "log-journal", 0, 0, G_OPTION_ARG_NONE, &(args)->log_journal,                                                      \
      "Every record to the systemd journal too (or the policy's log.journal)", NULL                                    \
  }
void fb_cmd_run_args_clear (FbCmdRunArgs *args);
/* RUN (made from ARGS' workspace and log) with ARGS' policy (--policy, or
 * DEFAULT_SPEC), loaded first (it may say ${RUN}), and its directory, as
 * fb_cmd_create_run makes it.  -1, or after COMMAND's message the exit
 * status. */
int fb_cmd_run_args_create_run (const FbCmdRunArgs *args, const char *command, const char *default_spec, FbRun *run,
                                guint64 default_max, guint64 *ret_file_size, guint64 *ret_max_size);
/* The journal output of run, mount and serve (launcher-cmd-logbudget.c):
 * --log-journal (ASKED) or the policy's "log": {"journal": true}; the
 * socket in *RET_SOCKET: $FUSEBOX_JOURNAL_SOCKET (tests), or NULL for the
 * system's journal. */
gboolean fb_cmd_log_journal (gboolean asked, const FbPolicy *policy, const char **ret_socket);
/* Close RUN's access log; say so when it could not be completed, or
 * reached its budget (WHAT was stopped), which run.json then has as its
 * "error".  False after either. */
bool fb_cmd_close_run_log (FbRun *run, const char *command, const char *what);

/* launcher-cmd-descriptors.c: the descriptor budget (fs/fs-view-fd.c) in a
 * sentence, after raising the soft RLIMIT_NOFILE to the hard one;
 * *ret_low (may be NULL): a sandbox's share is small.  _warn() prints it
 * as COMMAND's warning when it is. */
char *fb_cmd_fd_budget_note (bool *ret_low);
void fb_cmd_fd_budget_warn (const char *command);

/* fusebox log --follow --connect (launcher-cmd-log-connect.c): FUNC gets each
 * log/event's record (LINE: its JSON as the server logged it); returns the
 * exit status.  (C11 allows these typedefs to repeat json-glib's.) */
typedef struct _JsonNode JsonNode;
typedef struct _JsonObject JsonObject;
typedef void (*FbLogConnectFunc) (const char *line, JsonObject *record, gpointer user_data);
int fb_log_connect_follow (const char *url, const char *token_file, JsonNode *server_filter, FbLogConnectFunc func,
                           gpointer user_data);

/* launcher-session-ready.c: a `run --session` daemon's sandbox made
 * ahead of its command, by the launch helper HELPER, in the view whose
 * user and mount namespaces are VIEW_NS, with the ids UID, GID inside and
 * NETWORK (ipc/ipc-process-launch.h: 0 none, 1 host, 2 an allowlist).
 * Before a command, CHANGED is called when it is ready (made and locked
 * down, pid 1 waiting) and when it is gone (the helper failed or ended:
 * fb_session_ready_get_why says what); once a command runs in it
 * (fb_session_ready_run), ENDED gets its exit status, and MESSAGE when
 * the command could not be started (else NULL), once.  Freeing it kills
 * the sandbox. */
typedef struct FbSessionReady FbSessionReady;
typedef void (*FbSessionReadyFunc) (FbSessionReady *ready, gpointer data);
typedef void (*FbSessionReadyEndFunc) (FbSessionReady *ready, int status, const char *message, gpointer data);
FbSessionReady *fb_session_ready_start (const char *helper, const int view_ns[2], guint32 uid, guint32 gid,
                                        guint32 network, FbSessionReadyFunc changed, gpointer data, GError **error);
bool fb_session_ready_is_waiting (const FbSessionReady *ready);
const char *fb_session_ready_get_why (const FbSessionReady *ready);
/* Its pid namespace (borrowed), for the command's view member. */
int fb_session_ready_get_pidns (const FbSessionReady *ready);
/* The socket its network namespace listens on (a network allowlist), or -1. */
int fb_session_ready_take_proxy_fd (FbSessionReady *ready);
/* Run the command of SPEC_FD (a sealed memfd: ipc/ipc-process-launch.h)
 * with STDIO as its stdin, stdout and stderr.  0, or -errno. */
int fb_session_ready_run (FbSessionReady *ready, int spec_fd, const int stdio[3], FbSessionReadyEndFunc ended,
                          gpointer data);
void fb_session_ready_signal (FbSessionReady *ready, int sig);
void fb_session_ready_free (FbSessionReady *ready);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbSessionReady, fb_session_ready_free)
/* The process that made it (the launch helper, its parent): what the
 * sandbox inherited, it inherited from that one. */
GPid fb_session_ready_get_maker (const FbSessionReady *ready);
/* Whether the peer of SOCK is in the situation process MAKER is in, as
 * far as what a sandbox inherits from its maker goes: its credentials,
 * capabilities, seccomp (none), cgroup, limits, LSM label, audit session,
 * scheduling, CPU and memory affinity, transparent huge pages, OOM score
 * and namespaces; else false with *RET_WHY saying which differs.  The
 * cgroup, limits, scheduling, affinity, OOM score and I/O priority are
 * read from pid 1 of the sandbox whose pid namespace is SANDBOX_PIDNS
 * (what the command inherits) where the kernel names it.  Not seen in
 * /proc, and not compared: a Landlock domain (the daemon's proof,
 * launcher-session-daemon.c, stands for it), PR_SET_MDWE. */
bool fb_session_caller_matches (int sock, GPid maker, int sandbox_pidns, char **ret_why);

/* The sandbox's seccomp program, compiled from launcher-seccomp-gen.c's
 * rules when fusebox is built (launcher-seccomp-bpf.c, generated). */
extern const struct sock_filter fb_launcher_seccomp_program[];
extern const unsigned short fb_launcher_seccomp_program_len;

G_END_DECLS
