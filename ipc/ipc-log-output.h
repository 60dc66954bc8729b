/* fusebox — the access log's outputs, behind one interface.
 *
 * The core (ipc-log.c) stamps each record (seq, ts, run), keeps the order,
 * the back-pressure, the folds and the budget, and hands every stamped
 * record to each output in seq order:
 *  - the JSONL file with rotation (ipc-log-file.c): the durable one, always
 *    there; the budget and write-through are about its bytes;
 *  - the live subscribers (ipc-log-subscribers.c): the remote API's
 *    log/subscribe, called on the loop's thread;
 *  - the systemd journal (ipc-log-journal.c), when asked for: one entry per
 *    record over the journal's native protocol.
 * An output never blocks in write() or flush() and never fails the core:
 * what it can't pass on yet it keeps (within its own bound) or counts.
 * Only the file's flush result matters to the core (back-pressure, retry);
 * the file is flushed first, so no other output delays its records.
 *
 * Threads: write() and flush() run under the core's writer lock, on any
 * thread (a write-through pusher, the loop); close() and free() on the
 * loop's thread, after the last write(). */
#pragma once

#include "ipc/ipc-private.h"
#include "policy/util.h"

G_BEGIN_DECLS

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
/* The same, the file made new in DIR_FD (duplicated), PATH's directory
 * not opened again (FbAccessLogOptions.new_in_dir). */
FbLogFile *fb_log_file_open_new_in (const char *path, int dir_fd, guint64 rotate_bytes, GError **error);
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

/* --- the systemd journal (ipc-log-journal.c) ------------------------------- */

#define FB_LOG_JOURNAL_SOCKET "/run/systemd/journal/socket"
/* What waits for a journal that takes data slower than the log writes it;
 * past either bound a record is counted, not sent. */
#define FB_LOG_JOURNAL_MAX_ENTRIES 4096
#define FB_LOG_JOURNAL_MAX_BYTES (8 * 1024 * 1024)

typedef struct FbLogJournal FbLogJournal;
/* SOCKET_PATH: the journal's native socket.  Never fails: a journal that is
 * absent is said once, on standard error, and its records counted. */
FbLogJournal *fb_log_journal_new (const char *socket_path, GMainContext *context);
FbLogOutput *fb_log_journal_output (FbLogJournal *journal);
/* Send what waits (for at most a moment when the journal takes nothing),
 * then the records the journal did not get, and in *RET_WHY (may be NULL)
 * why, for people. */
guint64 fb_log_journal_finish (FbLogJournal *journal, char **ret_why);

/* The native protocol (systemd's "Native Journal Protocol"): one datagram
 * per entry, a field per line, NAME=VALUE\n; a value that holds a newline
 * (or a NUL) is NAME\n, its length as a little-endian 64-bit number, the
 * bytes, \n.  NAME: A-Z, 0-9 and _, not first a digit or _, at most 64.
 * FALSE (nothing appended) for a name the journal would refuse. */
gboolean fb_journal_append_field (GString *out, const char *name, const char *value, gsize len);
/* The entry for one record (the JSON object the core wrote): MESSAGE (the
 * record for people, every string escaped), PRIORITY, SYSLOG_IDENTIFIER
 * "fusebox", and every member as FUSEBOX_<NAME> (a nested object's as
 * FUSEBOX_<NAME>_<MEMBER>), strings with their exact value, numbers as
 * written, null left out.  FALSE for a line that is not one JSON object. */
gboolean fb_journal_entry_from_record (GString *out, const char *line, gsize len);
/* Send one entry on FD (a socket connected to the journal) without
 * waiting: a datagram, or when it is too large for one (EMSGSIZE) a sealed
 * memfd passed with SCM_RIGHTS.  0 or -errno (-EAGAIN: the journal's queue
 * is full). */
int fb_journal_send (int fd, const char *data, gsize len);

G_END_DECLS
