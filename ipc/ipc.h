/* fusebox — the GLib side: the access log and run directories.
 * (The JSON-RPC server joins this header with the remote API.)
 *
 * Threads: fb_access_log_new/close/free run on the thread that owns
 * CONTEXT (the main loop).  The sink returned by fb_access_log_get_sink() may
 * be pushed to from any thread; a push copies the event into a bounded queue
 * and blocks while the queue is full, so no record is ever dropped. */
#pragma once

#include <gio/gio.h>
#include <glib.h>

#include "fs/fs-event.h"

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

typedef struct
{
  const char *path;     /* the log file, e.g. RUN_DIR/access.jsonl; created 0600, appended to */
  const char *run_id;   /* written into every record as "run" */
  guint64 rotate_bytes; /* rotate when the file passes this size; 0 = never */
  guint queue_capacity; /* events buffered between threads and the loop; 0 = default (4096) */
} FbAccessLogOptions;

typedef struct FbAccessLog FbAccessLog;

FbAccessLog *fb_access_log_new (const FbAccessLogOptions *options, GMainContext *context, GError **error);
FbAccessSink *fb_access_log_get_sink (FbAccessLog *log);
/* Records written so far (the last seq). */
guint64 fb_access_log_get_count (FbAccessLog *log);
/* Drain the queue, write, fsync and close.  Call once, after every pusher
 * has stopped. */
gboolean fb_access_log_close (FbAccessLog *log, GError **error);
void fb_access_log_free (FbAccessLog *log);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbAccessLog, fb_access_log_free)

/* Run directories: $XDG_STATE_HOME/fusebox/runs/<run-id> (XDG_STATE_HOME
 * defaults to ~/.local/state).  A run id is "YYYYMMDD-HHMMSS-XXXXXX". */
char *fb_run_new_id (void);
char *fb_run_dir_root (void);
/* Create (0700, parents too) the run directory for ID; returns its path. */
char *fb_run_dir_create (const char *run_id, GError **error);
/* Resolve what a user typed (a run id, a run directory, or a log file) to a
 * log file path. */
char *fb_run_resolve_log (const char *run_or_file, GError **error);

G_END_DECLS
