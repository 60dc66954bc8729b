/* fusebox run — what `run` shares with `run --session`
 * (launcher-cmd-run.c, launcher-cmd-session.c). */
#pragma once

#include "fs/fs.h"
#include "ipc/ipc.h"
#include "launcher/launcher.h"
#include "policy/policy.h"

G_BEGIN_DECLS

typedef struct
{
  FbPolicyAccess access;
  char *path; /* absolute, normalized */
  const char *option;
} ExtraRule;

typedef struct
{
  char *policy_spec;
  char *workspace;
  GArray *rules;      /* ExtraRule */
  GPtrArray *network; /* --network arguments (borrowed from argv), in order */
  guint32 uid, gid;
  char *cwd;
  GPtrArray *env_ops; /* "K=V" to set, "K" to unset, in order */
  bool clearenv;
  FbLogLevel log_level;
  char *run_dir;
  bool keep_run;
  /* --log-file-size, --log-max-size (borrowed from argv) */
  const char *log_file_size, *log_max_size;
  bool log_journal;
  /* --resolve NAME:ADDRESS (borrowed from argv): the network proxy's
   * names, for tests and debugging (ipc/ipc-proxy.h) */
  GPtrArray *resolve;
  /* --session NAME (borrowed from argv): the command runs in the view that
   * session keeps, started now if need be (launcher-cmd-session.c), which
   * closes after SESSION_IDLE_S without a command */
  const char *session;
  guint session_idle_s;
  char **command; /* borrowed from argv */
  /* the command line is `run --session NAME [--] COMMAND...`, the quick
   * client's (launcher-session-wire.h): the session learns what this
   * caller's command gets (launcher-session-daemon.c, "the quick client") */
  bool quick_shape;
} RunOptions;

typedef struct
{
  FbRun *run; /* the run directory, policy.json, run.json, the log */
  char **envp;
  char *cwd;
  /* the access log's budget */
  guint64 log_file_size, log_max_size;
} Run;

/* The effective policy of O's command: the spec, the command line's rules
 * and network, and a hide rule for fusebox's own state (the runs root,
 * RUN_DIR, the sessions' sockets). */
FbPolicy *fb_cmd_run_load_policy (const RunOptions *o, const FbPolicyVars *vars, const char *run_dir, GError **error);
/* The run (ipc/ipc.h, "one run") of O's command: its directory,
 * policy.json and run.json, its environment and working directory.  With
 * VIEW_RUN_DIR (`run --session`), the policy's ${RUN}, where its private
 * sources live, is that session's run directory, not the command's own,
 * and run.json names the session and VIEW_RUN_ID, its run, from the start.
 * -1, or the exit status after a message. */
int fb_cmd_run_prepare (const RunOptions *o, const char *view_run_dir, const char *view_run_id, Run *run);
/* The sandbox reported a failure (or died before it could): said with its
 * step, path and fix, recorded in run.json; returns the exit status.
 * SINGLE_THREADED: the prerequisite probes may fork in this process. */
int fb_cmd_run_report_failure (Run *run, FbLauncherChild *child, int exit_code, bool single_threaded);
/* The sandbox's plan for O's command in RUN (a FUSE root, prepared). */
void fb_cmd_run_plan (const RunOptions *o, const Run *run, FbLauncherPlan *plan);
/* The probes of `fusebox check` after a failure (in-process while
 * SINGLE_THREADED, else through a fresh `fusebox check`). */
void fb_cmd_run_probes (bool single_threaded);
/* SIGINT, SIGTERM, SIGHUP and SIGQUIT blocked, before the sandbox is
 * spawned (every thread started later inherits the mask, so none is lost
 * to one) and read from the returned signalfd (-1 on failure) instead:
 * the supervisor forwards them to the command. */
int fb_cmd_run_signalfd (void);

/* `run --session` (launcher-cmd-session.c): the command in O's session's
 * view; the exit status. */
int fb_cmd_run_session (const RunOptions *o, Run *run);

G_END_DECLS
