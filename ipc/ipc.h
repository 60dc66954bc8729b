/* fusebox — the GLib side: the access log and run directories.
 * (The JSON-RPC server joins this header with the remote API.)
 *
 * Threads: fb_access_log_new/close/free run on the thread that owns
 * CONTEXT (the main loop).  The sink returned by fb_access_log_get_sink() may
 * be pushed to from any thread; a push copies the event into a bounded queue
 * and blocks while the queue is full, so no record is ever dropped (a log
 * with a budget counts the records past it instead of writing them). */
#pragma once

#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <sys/types.h>

#include "fs/fs.h"
#include "policy/policy.h"

G_BEGIN_DECLS

#define FB_IPC_ERROR (fb_ipc_error_quark ())
GQuark fb_ipc_error_quark (void);

typedef enum
{
  FB_IPC_ERROR_IO,
  FB_IPC_ERROR_PARSE,
  FB_IPC_ERROR_NOT_FOUND,
  FB_IPC_ERROR_INVALID,
} FbIpcError;

/* Called once when the log reaches its budget (FbAccessLogOptions.max_bytes),
 * from the thread that wrote the record that reached it, with no lock of
 * the log held: the owner stops what is writing (ipc-log.c). */
typedef void (*FbAccessLogFullFunc) (gpointer user_data);

typedef struct
{
  const char *path;     /* the log file, e.g. RUN_DIR/access.jsonl; created 0600, appended to */
  const char *run_id;   /* written into every record as "run" */
  guint64 rotate_bytes; /* rotate when the file passes this size; 0 = never */
  guint queue_capacity; /* events buffered between threads and the loop; 0 = default (4096) */
  /* A pusher on another thread than the loop's writes its record itself
   * (after whatever is queued), so that the record is in the kernel before
   * the push returns: before the FUSE reply that follows it, whether a
   * subscriber listens or not.  It queues as usual while the file refuses
   * data (then the queue's back-pressure applies). */
  gboolean write_through;
  /* Fold repeated refusals into counted records (ipc-log.c says which are
   * identical and how). */
  gboolean coalesce;
  guint64 fold_window_us; /* how long identical refusals are folded; 0 = default (1 s) */
  /* The budget: bytes of all of this log's files.  0 = none.  Reaching it
   * calls on_full; records past a margin are counted, not written. */
  guint64 max_bytes;
  FbAccessLogFullFunc on_full;
  gpointer on_full_data;
  /* Every record also to the systemd journal, as an entry with FUSEBOX_*
   * fields (ipc/ipc-log-journal.c), over the native protocol at
   * journal_socket (NULL: /run/systemd/journal/socket).  A journal that is
   * absent or refuses is said once and counted; the file never waits. */
  gboolean journal;
  const char *journal_socket;
  /* The file is made new (O_CREAT|O_EXCL, never an existing file or a
   * link's target) in DIR_FD, a directory the caller opened and checked,
   * not at whatever PATH's directory names when the log opens (PATH then
   * names it in messages, and its last part is the file's name): the
   * directory may be another process's to swap. */
  gboolean new_in_dir;
  int dir_fd;
} FbAccessLogOptions;

/* Defaults for every command that writes a log (run, mount, serve), when
 * neither the policy's "log" section nor the command line says otherwise;
 * documented in fusebox(1). */
#define FB_LOG_DEFAULT_FILE_SIZE ((guint64)16 * 1024 * 1024)
#define FB_LOG_DEFAULT_MAX_SIZE ((guint64)256 * 1024 * 1024)
#define FB_LOG_DEFAULT_MAX_SIZE_SERVE ((guint64)1024 * 1024 * 1024)

typedef struct FbAccessLog FbAccessLog;

FbAccessLog *fb_access_log_new (const FbAccessLogOptions *options, GMainContext *context, GError **error);
FbAccessSink *fb_access_log_get_sink (FbAccessLog *log);
/* Records written so far (the last seq). */
guint64 fb_access_log_get_count (FbAccessLog *log);
/* Has the log reached its budget?  *RET_NOT_WRITTEN (may be NULL): records
 * past its margin, counted and not written. */
gboolean fb_access_log_is_full (FbAccessLog *log, guint64 *ret_not_written);
/* A share of the log's budget for one producer (a sandbox of `fusebox
 * serve`): a FB_LOG_SHARE_PART-th of max_bytes (none without a budget).
 * Events pushed through its sink are the log's like any other, and their
 * written bytes count against the share too: the record that reaches it
 * calls ON_FULL once, on the loop's thread (no lock held), and records past
 * its margin are counted, not written.  Closing it (the producer stopped)
 * writes what is queued and, if it was reached, a "log-share-full" notice
 * with SESSION and PROCESS (either may be NULL) and the count.  Close it
 * before the log is freed; the log's close closes those left open. */
#define FB_LOG_SHARE_PART 4
typedef struct FbAccessShare FbAccessShare;
/* PARENT (may be NULL): a group's share the records count against too. */
FbAccessShare *fb_access_log_share_new (FbAccessLog *log, FbAccessShare *parent, const char *session,
                                        const char *process, FbAccessLogFullFunc on_full, gpointer on_full_data);
/* A group's share (a session of `fusebox serve`, whose processes' shares
 * are its parts): a member's share and twice its margin, and at most a
 * third of what the other records left of the budget, its margin included;
 * a record is written only while it fits.  So no number of groups reaches
 * the log's budget. */
FbAccessShare *fb_access_log_group_share_new (FbAccessLog *log, const char *session, FbAccessLogFullFunc on_full,
                                              gpointer on_full_data);
FbAccessSink *fb_access_share_get_sink (FbAccessShare *share);
/* The share's bound: the one it reached, once it did (a group's shrinks). */
guint64 fb_access_share_get_max_bytes (FbAccessShare *share);
gboolean fb_access_share_is_full (FbAccessShare *share, guint64 *ret_not_written);
void fb_access_share_close (FbAccessShare *share);
FbAccessShare *fb_access_share_ref (FbAccessShare *share);
void fb_access_share_unref (FbAccessShare *share);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbAccessShare, fb_access_share_unref)

/* Drain the queue, write, fsync and close.  Call once, after every pusher
 * has stopped. */
gboolean fb_access_log_close (FbAccessLog *log, GError **error);
void fb_access_log_free (FbAccessLog *log);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbAccessLog, fb_access_log_free)
/* Loop thread: write what is queued now and flush it to the file (no
 * fsync).  For callers that must know a record reached the file. */
gboolean fb_access_log_drain (FbAccessLog *log, GError **error);
/* Live subscribers (the remote API's log/subscribe): FUNC runs on the loop
 * thread, with no lock of the log held, with each record's JSON line (no
 * newline) written while it is subscribed, in seq order: at once for a
 * record written on the loop's thread, at the loop's next turn for one a
 * write-through pusher wrote.  Returns an id > 0.  Unsubscribing on the
 * loop's thread first delivers what was written before. */
typedef void (*FbAccessLogFunc) (const char *line, gpointer user_data);
guint fb_access_log_subscribe (FbAccessLog *log, FbAccessLogFunc func, gpointer user_data, GDestroyNotify destroy);
void fb_access_log_unsubscribe (FbAccessLog *log, guint id);

/* Run directories: $XDG_STATE_HOME/fusebox/runs/<run-id> (XDG_STATE_HOME
 * defaults to ~/.local/state).  A run id is "YYYYMMDD-HHMMSS-XXXXXX". */
char *fb_run_new_id (void);
char *fb_run_dir_root (void);
/* Where `run --session` keeps each session's control socket:
 * $XDG_STATE_HOME/fusebox/sessions, beside the runs root, hidden from
 * every view as fusebox's state (fb_run_state_paths). */
char *fb_run_sessions_root (void);
/* Whether the runs root is out of other users' reach (fb_path_check_private:
 * the caller's, on a way no other user may write); FALSE with the fix. */
gboolean fb_run_state_dir_ok (GError **error);
/* Neither fusebox/ nor its runs/ and sessions/ is a symbolic link (where
 * they exist): fusebox makes them, never as links, so a link there was
 * put by someone else (a sandbox makes files that are the caller's, and
 * root's own links are followed elsewhere); FALSE naming it and the fix. */
gboolean fb_run_state_no_links (GError **error);
/* fusebox/ exists, or the way to where it would be made passes no
 * symbolic link: its first making goes through none (one a sandbox put in
 * a workspace would choose where root keeps its state); FALSE naming the
 * link and the fix (make the directory yourself). */
gboolean fb_run_state_first_way_ok (GError **error);
/* Create (0700, parents too) the run directory for ID; returns its path. */
char *fb_run_dir_create (const char *run_id, GError **error);
/* Resolve what a user typed (a run id, a run directory, or a log file) to a
 * log file path.  FOLLOW: a log not there yet is the answer too (`log
 * --follow` waits for it, as tail -F does), in a run directory or any
 * directory that is there; *RET_ABSENT (may be NULL) says so. */
char *fb_run_resolve_log (const char *run_or_file, gboolean follow, gboolean *ret_absent, GError **error);
/* Parse an RFC 3339 time ("...Z" or an offset; without a zone: local time),
 * as in the log's "ts", into microseconds since the epoch. */
gboolean fb_ipc_parse_time (const char *s, gint64 *ret_us);
/* The local time zone, looked up once for the process (GLib looks it up
 * again at each g_time_zone_new_local: three system calls). */
GTimeZone *fb_ipc_local_time_zone (void);
/* The newest run directory under fb_run_dir_root() (run ids sort by time). */
char *fb_run_find_latest (GError **error);

/* Fusebox's own state, which no sandbox may see (FbViewOptions.hidden_paths):
 * the runs root, the sessions root (made 0700 if it is missing), RUN_DIR,
 * LOG_PATH and its rotated files (either may be
 * NULL), and when RUN_DIR is not under the root (--run-dir), the run
 * directories fusebox made beside it (0700, ours, holding policy.json; at
 * most FB_RUN_SIBLINGS_MAX entries looked at).  NULL-terminated. */
#define FB_RUN_SIBLINGS_MAX 65536
char **fb_run_state_paths (const char *run_dir, const char *log_path);
/* FALSE, with a message naming the rule, when a `source` of POLICY is not
 * an existing directory ("FILE:LINE:COL: rules[1].source: source /x: is a
 * FIFO, not a directory; ..."; a symbolic link is refused too), or is one of
 * STATE_PATHS or lies inside one (compared by st_dev/st_ino, each
 * directory up from the source as the host resolves it).  A source that
 * holds one is fine: the view hides it.  Private sources are not looked at. */
gboolean fb_run_check_sources (FbPolicy *policy, const char *const *state_paths, GError **error);

/* --- one run (ipc-run-object.c) ------------------------------------------
 *
 * What `run`, `mount` and `serve` share: the run directory (a new one
 * under fb_run_dir_root(), or --run-dir: new or empty), its policy.json
 * (the effective policy) and run.json, fusebox's state that no view shows
 * (fb_run_state_paths, hidden by identity; no source may show it), the
 * access log and the count of denials on their way to it.
 *
 * run.json: "run", "kind" ("run", "mount", "serve", "session": the view
 * `run --session` keeps; a file without it was
 * written by `run`), the kind's own members (fb_run_get_info: `run`'s
 * command, cwd, network, uid, gid; `mount`'s mountpoint; `serve`'s
 * listen), "workspace", "policy" (its origin), "log" (the access log's
 * path), "started", "supervisor" {"pid", "start_time"}; when over
 * "ended", "exit_status", "records", "denials" (not `serve`'s: its views
 * report through the remote API's sinks), on a failure "error" (and
 * `run`'s "failed_step"), on a log that could not be completed
 * "log_error".  A run is over when "ended" is set or its supervisor (pid
 * and start time, so a reused pid does not count) is gone.
 *
 * The order: fb_run_new plans the directory (the policy, which may say
 * ${RUN}, is loaded with fb_run_get_vars before anything is made);
 * fb_run_create makes it and writes policy.json; fb_run_start writes
 * run.json as this process's (after a fork, in the child that
 * supervises); fb_run_open_log; ... fb_run_close_log; fb_run_end. */
typedef enum
{
  FB_RUN_KIND_RUN,
  FB_RUN_KIND_MOUNT,
  FB_RUN_KIND_SERVE,
  FB_RUN_KIND_SESSION,
} FbRunKind;
const char *fb_run_kind_to_string (FbRunKind kind);
bool fb_run_kind_from_string (const char *s, FbRunKind *ret_kind);

typedef struct
{
  FbRunKind kind;
  const char *run_dir;   /* --run-dir, or NULL: a new id under fb_run_dir_root() */
  const char *workspace; /* ${WORKSPACE} (an existing directory), or NULL: the current directory */
  const char *log_path;  /* --log, or NULL: access.jsonl in the run directory */
} FbRunOptions;

typedef struct FbRun FbRun;
FbRun *fb_run_new (const FbRunOptions *options);
/* Before anything looks at the paths RUN will use (its directory, the
 * state directory, --log): none lies on another user's FUSE filesystem
 * (fb_path_check_not_foreign_fuse), whose server may never answer the
 * realpath or stat that comes next. */
gboolean fb_run_check_reachable (FbRun *run, GError **error);
const char *fb_run_get_id (FbRun *run);
const char *fb_run_get_dir (FbRun *run);
/* The run directory's descriptor (O_RDONLY, taken when fb_run_create made
 * it), or -1 before: what is done in the directory later goes through it,
 * never through its path, which a sandbox may have redirected. */
int fb_run_get_dir_fd (FbRun *run);
/* NAME made new in the run directory through its descriptor, opened for
 * appending (O_CLOEXEC): the descriptor, or -errno (-EEXIST when NAME is
 * there already: put there by another, never taken). */
int fb_run_open_new (FbRun *run, const char *name, mode_t mode);
/* When fb_run_create began (CLOCK_REALTIME_COARSE, the clock of files'
 * birth times): what the run made in its directory was born at or after
 * it; anything born before was moved in (fb_cmd_remove_tree_since). */
const struct timespec *fb_run_get_made (FbRun *run);
/* After a fork that closed descriptors: the run directory's is now FD
 * (a duplicate made before; the one it had is not closed here). */
void fb_run_set_dir_fd (FbRun *run, int fd);
const char *fb_run_get_log_path (FbRun *run);
const FbPolicyVars *fb_run_get_vars (FbRun *run);
/* After fb_run_create: */
FbPolicy *fb_run_get_policy (FbRun *run);
const char *const *fb_run_get_state_paths (FbRun *run);
/* run.json, for the kind's own members (written by fb_run_start or
 * fb_run_save). */
JsonObject *fb_run_get_info (FbRun *run);
/* Make the run directory, write POLICY (referenced) to policy.json, and
 * refuse a source that shows fusebox's state (fb_run_check_sources). */
gboolean fb_run_create (FbRun *run, FbPolicy *policy, GError **error);
/* Write run.json with this process as the run's supervisor. */
gboolean fb_run_start (FbRun *run, GError **error);
/* The same with SUPERVISOR (a process of ours, alive) as the run's
 * supervisor: a quick client's run, which the session's daemon makes.
 * "workspace" and "policy" already in run.json are kept. */
gboolean fb_run_start_as (FbRun *run, pid_t supervisor, GError **error);
gboolean fb_run_save (FbRun *run, GError **error);
/* run.json's "error" (and FAILED_STEP, unless NULL). */
void fb_run_set_error (FbRun *run, const char *message, const char *failed_step);
/* The access log, at fb_run_get_log_path(): OPTIONS' path and run id are
 * the run's, repeated refusals are folded; the rest (write-through, the
 * budget and what reaching it does) is the caller's.  Borrowed. */
FbAccessLog *fb_run_open_log (FbRun *run, FbAccessLogOptions *options, GError **error);
FbAccessLog *fb_run_get_log (FbRun *run);
/* The sink a view of the run reports to: the log's, counting denials
 * (refusals, fb_decision_info) for run.json, which has "denials" only
 * when this sink was asked for. */
FbAccessSink *fb_run_get_sink (FbRun *run);
/* A view's options for this run: its sink, and fusebox's state hidden by
 * identity. */
void fb_run_view_options (FbRun *run, FbViewOptions *options);
/* Drain, fsync and close the log; its records and the denials go to
 * run.json (a failure as "log_error" too).  Then whether the log reached
 * its budget, *RET_NOT_WRITTEN the records past it, and the budget. */
gboolean fb_run_close_log (FbRun *run, GError **error);
gboolean fb_run_log_is_full (FbRun *run, guint64 *ret_not_written);
guint64 fb_run_get_log_max_size (FbRun *run);
/* "ended" and "exit_status" (kept when set already), and run.json written;
 * nothing when run.json was never started. */
gboolean fb_run_end (FbRun *run, int exit_status, GError **error);
void fb_run_free (FbRun *run);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbRun, fb_run_free)
/* The start time of PID in clock ticks since boot (/proc/PID/stat field
 * 22), or 0: with the pid it names one process for good. */
guint64 fb_run_process_start_time (pid_t pid);

/* Serving a view's FUSE session, and ending it (ipc-run-fuse.c), for
 * `run`, `mount` and `serve`'s processes.  fb_run_fuse_new takes FUSE
 * (mounted, or serving a descriptor); LOG (may be NULL) is drained while
 * fb_run_fuse_finish waits.  fb_run_fuse_start serves it on a thread;
 * ON_END (may be NULL) runs on the main loop once serving has ended, with
 * fb_fuse_run's result.  fb_run_fuse_end asks for the end: if serving has
 * not ended GRACE_MS later (0: at once), the connection is aborted, again
 * every FB_RUN_FUSE_RETRY_MS until it ends; a second call aborts at once.
 * (A mount's owner unmounts it with fb_fuse_stop first.)
 * fb_run_fuse_finish waits for the end (aborting the connection if it has
 * not ended), joins the serving thread and returns its result;
 * fb_run_fuse_free finishes and frees FUSE. */
#define FB_RUN_FUSE_RETRY_MS 500
typedef struct FbRunFuse FbRunFuse;
typedef void (*FbRunFuseEndFunc) (int result, gpointer user_data);
FbRunFuse *fb_run_fuse_new (FbFuse *fuse, FbAccessLog *log);
FbFuse *fb_run_fuse_get_fuse (FbRunFuse *rf);
int fb_run_fuse_start (FbRunFuse *rf, FbRunFuseEndFunc on_end, gpointer user_data);
gboolean fb_run_fuse_is_over (FbRunFuse *rf);
gboolean fb_run_fuse_is_ending (FbRunFuse *rf);
void fb_run_fuse_end (FbRunFuse *rf, guint grace_ms);
int fb_run_fuse_finish (FbRunFuse *rf);
void fb_run_fuse_free (FbRunFuse *rf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbRunFuse, fb_run_fuse_free)

/* A view several commands share (ipc-view-share.c: how a caller is
 * mapped to its command, from the kernel's facts).  The view takes
 * fb_view_share_get_owners() as FbViewOptions.owners and
 * fb_view_share_get_sink() as its sink: each event goes to its command's
 * member's SINK with "process" set to the member's PROCESS, an event of no
 * command to OTHERS.  fb_view_share_add registers a command by its pid
 * namespace (an nsfs descriptor; a copy is kept while it is registered),
 * what its processes open charged to FD_ACCOUNT (may be NULL: the view's
 * own), and returns a reference; DESTROY (DESTROY_DATA) runs when the member's
 * last reference goes, which may be a file closed after the command
 * ended: whatever SINK needs lives until then.  fb_view_member_end: the
 * command has ended (its processes are gone), the namespace is forgotten.
 * fb_view_member_busy: files it opened are still open in the view.
 * fb_view_member_end_notify: fb_view_member_end, then RELEASED (DATA) runs
 * once when no file of the member's is open any more (the last one's
 * close record pushed), on the thread that released it (a FUSE worker:
 * tell the owner's loop, nothing more) or at once on the caller's; the
 * caller's reference must be its only one, kept until then.
 * Free the share after the view. */
typedef struct FbViewShare FbViewShare;
typedef struct FbViewMember FbViewMember;
FbViewShare *fb_view_share_new (FbAccessSink *others);
const FbViewOwners *fb_view_share_get_owners (FbViewShare *share);
FbAccessSink *fb_view_share_get_sink (FbViewShare *share);
guint fb_view_share_count (FbViewShare *share);
FbViewMember *fb_view_share_add (FbViewShare *share, int pidns_fd, const char *process, FbViewFdAccount *fd_account,
                                 FbAccessSink *sink, GDestroyNotify destroy, gpointer destroy_data, GError **error);
void fb_view_share_free (FbViewShare *share);
typedef void (*FbViewMemberFunc) (gpointer data);
void fb_view_member_end (FbViewMember *member);
void fb_view_member_end_notify (FbViewMember *member, FbViewMemberFunc released, gpointer data);
gboolean fb_view_member_busy (FbViewMember *member);
const char *fb_view_member_get_process (FbViewMember *member);
/* Its records that are refusals (fb_decision_info), so far. */
guint fb_view_member_get_refusals (FbViewMember *member);
FbViewMember *fb_view_member_ref (FbViewMember *member);
void fb_view_member_unref (FbViewMember *member);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbViewMember, fb_view_member_unref)

/* Reading fusebox's own files back (ipc-readback.c): never through a
 * symbolic link, never blocking in open(2) on a FIFO or a device.
 * fb_ipc_open_regular opens NAME in DIR_FD (AT_FDCWD: a path) for reading
 * when it is a regular file and returns the descriptor (blocking, CLOEXEC),
 * or -1: FB_IPC_ERROR_NOT_FOUND when nothing is there, FB_IPC_ERROR_INVALID
 * ("WHAT PATH is a FIFO, not a regular file; ...") when it is anything else,
 * a symbolic link included; FB_IPC_ERROR_IO.  PATH names the file in
 * messages (NULL: NAME); WHAT says what it is ("the access log").
 * fb_ipc_read_regular reads all of such a file, at most MAX bytes (more is
 * FB_IPC_ERROR_INVALID).  fb_ipc_file_kind: "a FIFO", "a socket"... */
int fb_ipc_open_regular (int dir_fd, const char *name, const char *path, const char *what, GError **error);
char *fb_ipc_read_regular (const char *path, const char *what, gsize max, gsize *ret_len, GError **error);
const char *fb_ipc_file_kind (mode_t mode);
/* TRUE when the LEN bytes of TEXT hold only plain JSON's tokens outside
 * strings (no comments or single-quoted strings, which json-glib also takes)
 * and nest at most MAX_DEPTH arrays and objects: then json-glib, whose
 * parser recurses per level, may parse it.  *RET_TOO_DEEP: FALSE because of
 * the nesting. */
gboolean fb_json_is_plain (const char *text, gsize len, guint max_depth, gboolean *ret_too_deep);
/* The deepest nesting fusebox's readers parse: a record nests 3. */
#define FB_JSON_READ_DEPTH_MAX 64

/* Reading a log: the rotated files first (oldest first), then the live file.
 * Each line is parsed with json-glib.  Records are de-duplicated by (run,
 * seq): a record whose seq is not above the last one read for its run is
 * skipped and counted. */
typedef struct
{
  char *line;         /* the JSON text, without the newline */
  JsonNode *root;     /* the parsed line */
  JsonObject *object; /* root's object (borrowed from root) */
  char *file;         /* the file it was read from */
  guint64 line_no;    /* 1-based line number in that file */
  const char *run;    /* "run" or NULL (borrowed from object) */
  gint64 seq;         /* "seq", or -1 when missing */
} FbLogRecord;
void fb_log_record_free (FbLogRecord *record);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbLogRecord, fb_log_record_free)

typedef enum
{
  FB_LOG_READ_RECORD,    /* *ret_record is the next record */
  FB_LOG_READ_EOF,       /* nothing more (follow mode: for now; call again later) */
  FB_LOG_READ_GAP,       /* a run's seqs are missing: said once all there was has been read
                          * (before EOF; a follower, each time it has caught up), once each;
                          * error says the log, the run, the seqs around them and how many */
  FB_LOG_READ_BAD_LINE,  /* a line that is not a JSON object: error says FILE:LINE; reading goes on */
  FB_LOG_READ_TRUNCATED, /* a file ends in a line without a newline (a crash mid-write):
                          * error says FILE:LINE and its length; reading goes on */
  FB_LOG_READ_SKIPPED,   /* a file of another owner than the log's, or something at a rotated
                          * name that is not a regular file: not read, error says which;
                          * reading goes on */
  FB_LOG_READ_ERROR,     /* an I/O error: error says what; stop */
  FB_LOG_READ_NOTE,      /* something to tell whoever reads, once (the log's directory removed
                          * under a follower; a reader that ends stopped looking for rotated
                          * files): error says what; reading goes on */
} FbLogReadStatus;

typedef struct
{
  guint64 records;    /* returned as FB_LOG_READ_RECORD */
  guint64 duplicates; /* skipped: a seq of its run already returned */
  guint64 gaps;       /* FB_LOG_READ_GAP returned */
  guint64 missing;    /* seq numbers those gaps said missing */
  guint64 bad_lines;
  guint64 truncated;
  guint64 files;  /* files opened */
  guint64 linked; /* of them, files with more than one name (hard links) */
} FbLogReaderStats;

typedef struct FbLogReader FbLogReader;
/* LOG_PATH is the live file (RUN_DIR/access.jsonl).  When it is itself a
 * rotated file, only that file is read.  FOLLOW: at the end of the live file
 * wait for more (the caller calls next again), survive rotation like
 * `tail -F`, and don't count a partial last line until the file is rotated
 * away. */
FbLogReader *fb_log_reader_new (const char *log_path, gboolean follow, GError **error);
FbLogReadStatus fb_log_reader_next (FbLogReader *reader, FbLogRecord **ret_record, GError **error);
void fb_log_reader_get_stats (FbLogReader *reader, FbLogReaderStats *ret_stats);
/* Whose log READER reads: ours when any of its files is ours, else its
 * live file's owner (another user's log), else ours.  Files of other
 * owners are skipped (FB_LOG_READ_SKIPPED). */
uid_t fb_log_reader_get_owner (FbLogReader *reader);
void fb_log_reader_free (FbLogReader *reader);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbLogReader, fb_log_reader_free)

/* Showing strings from a log, a run.json or a policy to people.
 *
 * fb_text_append_safe_full() appends S (LEN bytes, not necessarily UTF-8)
 * to OUT with everything that could drive or fool a terminal shown as an
 * escape: a backslash as \\, \n \t \r, other C0 controls and DEL as \xHH,
 * a byte that is not UTF-8 as \xHH, a character fb_unichar_is_unsafe()
 * names (C1, bidi and other format characters, U+2028/9, odd spaces) as
 * \uXXXX or \UXXXXXXXX, U+2026 (the elision mark) as \u2026, and a space
 * that starts or ends S or stands next to another space as \x20.  With
 * FB_TEXT_ELIDE, text wider than FB_TEXT_MAX_COLS columns keeps its start and
 * its end around one U+2026.  FB_TEXT_INLINE (a string quoted in a message,
 * or a whole message of one line): blanks stay as they are, the elision
 * is past FB_TEXT_INLINE_MAX_COLS; line breaks and tabs are escaped as
 * always, so that what a message quotes can't end its line.
 * Returns the display columns appended. */
typedef enum
{
  FB_TEXT_PLAIN = 0,
  FB_TEXT_ELIDE = 1 << 0,
  FB_TEXT_INLINE = 1 << 1,
} FbTextFlags;
#define FB_TEXT_MAX_COLS 200
/* Wider than any message fusebox writes, narrow enough that a name of
 * PATH_MAX bytes can't fill a screen. */
#define FB_TEXT_INLINE_MAX_COLS 1000
#define FB_TEXT_ELISION 0x2026
gsize fb_text_append_safe_full (GString *out, const char *s, gsize len, FbTextFlags flags);
/* FLAGS = FB_TEXT_ELIDE */
gsize fb_text_append_safe (GString *out, const char *s, gsize len);
/* A new string; NULL shows as "(null)". */
char *fb_text_safe (const char *s, FbTextFlags flags);
/* Messages for people (ipc-message.c): FORMAT, fusebox's own text, as it
 * is; each %s argument (a path, a name, a client's string, another
 * program's message: whatever it holds) shown with FB_TEXT_INLINE |
 * FB_TEXT_ELIDE; the other conversions as printf's.  One message is as
 * many lines as FORMAT has, whatever its arguments hold.  Escape once:
 * build what goes into an argument raw. */
char *fb_text_printf (const char *format, ...) G_GNUC_PRINTF (1, 2);
char *fb_text_vprintf (const char *format, va_list ap) G_GNUC_PRINTF (1, 0);
/* A GLib log writer (g_log_set_writer_func) that shows each message as
 * fb_text_safe (MESSAGE, FB_TEXT_INLINE | FB_TEXT_ELIDE) would, then writes
 * it as g_log_writer_default does: g_warning and friends quote peers,
 * clients' names and paths. */
GLogWriterOutput fb_log_writer_safe (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data);
/* TRUE when S (LEN bytes, or up to its NUL when LEN < 0) holds nothing
 * fb_text_append_safe_full would escape but backslashes and blanks: valid
 * UTF-8 without control, format or other unsafe characters.  A JSON line
 * that passes prints as is. */
gboolean fb_text_is_safe (const char *s, gssize len);
/* NODE as JSON text with the log's escaping (fb_unichar_is_unsafe: no C1,
 * bidi control or U+2028 raw, whatever json-glib would write); PRETTY:
 * indented by two spaces, as json-glib does. */
char *fb_json_to_string (JsonNode *node, gboolean pretty);
void fb_json_append_node (GString *out, JsonNode *node, gboolean pretty);
/* A string (or whole-number) member of O, or NULL (DFLT) when it is missing
 * or of another type: for JSON read back from disk. */
const char *fb_json_member_string (JsonObject *o, const char *name);
gint64 fb_json_member_int (JsonObject *o, const char *name, gint64 dflt);

/* One aligned line for people (no newline): local time, comm[pid], op,
 * path (→ target), decision, errno name, the rule's why.  Every string
 * goes through fb_text_append_safe: one record is one line.  COLOR: denials red, readonly
 * yellow (ANSI SGR). */
char *fb_log_record_format (JsonObject *record, gboolean color);

/* The auditor's summary of one or more runs' records. */
typedef struct FbReport FbReport;
FbReport *fb_report_new (void);
void fb_report_add_record (FbReport *report, JsonObject *record);
/* Fold in the reader's counts (bad lines, truncated lines, duplicates). */
void fb_report_set_reader_stats (FbReport *report, const FbLogReaderStats *stats);
/* RUN's run.json counts RECORDS written (its writer's last seq): the
 * report warns when the log holds other than that of RUN. */
void fb_report_expect (FbReport *report, const char *run, gint64 records);
/* Nothing to check the log against in the run directory DIR, and WHY:
 * "missing" (no run.json: a warning) or "not-ended" (a note). */
void fb_report_expect_none (FbReport *report, const char *dir, const char *why);
/* Stable JSON shape, documented in fusebox(1) under "report". */
JsonNode *fb_report_to_json (FbReport *report);
char *fb_report_to_text (FbReport *report);
void fb_report_free (FbReport *report);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbReport, fb_report_free)

G_END_DECLS
