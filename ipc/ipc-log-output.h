/* fusebox — the access log's outputs, behind one interface.
 *
 * The core (ipc-log.c) stamps each record (seq, ts, run), keeps the order,
 * the back-pressure, the folds and the budget, and hands every stamped
 * record to each output in seq order:
 *  - the JSONL file with rotation (ipc-log-file.c): the durable one, always
 *    there; the budget and write-through are about its bytes;
 *  - the live subscribers (ipc-log-subscribers.c): the remote API's
 *    log/subscribe, called on the loop's thread.
 * An output never blocks in write() or flush() and never fails the core:
 * what it can't pass on yet it keeps (within its own bound) or counts.
 * Only the file's flush result matters to the core (back-pressure, retry);
 * the file is flushed first, so no other output delays its records.
 *
 * Threads: write() and flush() run under the core's writer lock, on any
 * thread (a write-through pusher, the loop); close() and free() on the
 * loop's thread, after the last write(). */
#pragma once

#include <stddef.h>

#include "ipc/ipc-private.h"

G_BEGIN_DECLS

#ifndef container_of
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof (type, member)))
#endif

typedef struct
{
  guint64 seq;
  gint64 ts_us;
  const char *line; /* the record's JSON object, without the newline */
  gsize len;
} FbLogLine;

typedef struct FbLogOutput FbLogOutput;
typedef struct
{
  /* Take one stamped record. */
  void (*write) (FbLogOutput *output, const FbLogLine *record);
  /* Pass on what write() kept.  FALSE: some of it is still kept. */
  gboolean (*flush) (FbLogOutput *output);
  /* The last flush (bounded), and release what the output holds outside
   * memory.  FALSE (with ERROR): it could not pass on everything. */
  gboolean (*close) (FbLogOutput *output, GError **error);
  void (*free) (FbLogOutput *output);
} FbLogOutputOps;

struct FbLogOutput
{
  const FbLogOutputOps *ops;
};

/* --- the file (ipc-log-file.c) ------------------------------------------- */

typedef struct FbLogFile FbLogFile;
/* Open (or make) PATH as the live file, rotated past ROTATE_BYTES (0:
 * never).  Its existing bytes count as written. */
FbLogFile *fb_log_file_open (const char *path, guint64 rotate_bytes, GError **error);
FbLogOutput *fb_log_file_output (FbLogFile *file);
const char *fb_log_file_get_path (FbLogFile *file);
/* The bytes of every file it wrote (live and rotated), and those buffered. */
guint64 fb_log_file_get_bytes (FbLogFile *file);
/* Bytes buffered, not yet written. */
gsize fb_log_file_get_pending (FbLogFile *file);
/* The last write failure, kept until a write succeeds; or NULL. */
const GError *fb_log_file_get_error (FbLogFile *file);
/* The last seq that reached the file (any thread). */
guint64 fb_log_file_get_flushed_seq (FbLogFile *file);

/* --- live subscribers (ipc-log-subscribers.c) ------------------------------ */

/* At most this many lines wait for the loop's thread (and their bytes at
 * most FB_LOG_SUBSCRIBERS_MAX_BYTES); a pusher on another thread waits for
 * room after its record is in the file. */
#define FB_LOG_SUBSCRIBERS_MAX_LINES 4096
#define FB_LOG_SUBSCRIBERS_MAX_BYTES (16 * 1024 * 1024)

typedef struct FbLogSubscribers FbLogSubscribers;
FbLogSubscribers *fb_log_subscribers_new (GMainContext *context);
FbLogOutput *fb_log_subscribers_output (FbLogSubscribers *subs);
guint fb_log_subscribers_add (FbLogSubscribers *subs, FbAccessLogFunc func, gpointer user_data, GDestroyNotify destroy);
void fb_log_subscribers_remove (FbLogSubscribers *subs, guint id);
/* Loop thread, no lock of the core held: call the subscribers with the
 * lines written since, in seq order. */
void fb_log_subscribers_deliver (FbLogSubscribers *subs);
/* Any other thread, no lock of the core held: wait while the lines for
 * the loop are past their bound (back-pressure, as the core's queue). */
void fb_log_subscribers_wait_room (FbLogSubscribers *subs);

G_END_DECLS
