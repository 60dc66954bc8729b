/* fusebox — ipc/ internals shared by its files and its unit tests. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "ipc/ipc.h"

G_BEGIN_DECLS

/* Append S as a JSON string literal (quotes included) to OUT.  NULL appends
 * `null`.  Control characters (C0, DEL and C1) and U+2028/U+2029 are
 * \u-escaped so that a raw log line is safe to print on a terminal.  Bytes
 * that are not valid UTF-8 become U+FFFD (escaped as \ufffd); the return value
 * is then false and the caller should also write the exact bytes as base64
 * (fb_json_append_string_member does). */
bool fb_json_append_string (GString *out, const char *s);
/* Characters a terminal must never get raw from a name: C0 and C1 controls,
 * DEL, format characters (bidi overrides and isolates, zero-width ones,
 * U+FEFF...), U+2028/U+2029, spaces other than U+0020, unassigned code
 * points.  The one list both the JSON and the people formats escape. */
bool fb_unichar_is_unsafe (gunichar c);
/* Append `"NAME":"value"` and, when VALUE is not valid UTF-8,
 * `,"NAME_b64":"exact bytes in base64"`.  No leading comma. */
void fb_json_append_string_member (GString *out, const char *name, const char *value);

/* Append V in decimal. */
void fb_json_append_int (GString *out, gint64 v);

/* "2024-05-01T12:34:56.123456Z" for a CLOCK_REALTIME time in microseconds;
 * BUF must hold FB_TS_BUF bytes. */
#define FB_TS_BUF 64
void fb_format_ts (gint64 ts_us, char buf[FB_TS_BUF]);

/* "EACCES" for EACCES; "E<number>" for numbers glibc has no name for. */
const char *fb_errno_name (int err, char buf[16]);

/* The JSON line of EVENT without the leading `{"ts":...,"run":...,"seq":N,`
 * part that the writer adds when it assigns seq: starts with `"pid":` and
 * ends with `}`. */
char *fb_access_event_format_body (const FbAccessEvent *event);

/* Rotated files of the log at LIVE_PATH: STEM.<first>-<last>[.<n>].jsonl in
 * the same directory, STEM being the live file's name without ".jsonl". */
typedef struct
{
  char *path;
  guint64 first_seq;
  guint64 last_seq;
  guint n;
  gint64 mtime_ns; /* when it was last written (0: not known) */
  bool later;      /* a settled listing's: it may have come during the listing, to be
                    * taken by the next (the files written before it may be missing) */
} FbRotatedFile;
/* Sorted by (mtime_ns, first_seq, last_seq, n): in the order they were
 * written.  The name's seqs are those of the run that rotated the file,
 * and a run that goes on in a log another one left (one --log for several
 * runs) rotates a file that begins with the other's last records, and
 * names it after its own first seq; the time tells them apart, and within
 * one clock tick (several rotations by one run) the seqs do.  A clock set
 * back between two rotations orders one run's files wrongly: when every
 * file to read holds one run's records alone, a reader puts each run's
 * back in the order of its seqs (ipc-logread.c, order_runs).  A
 * missing directory is an empty list.
 * Elements are FbRotatedFile*, freed with the array. */
GPtrArray *fb_log_list_rotated (const char *live_path, GError **error);
/* The same in DIR_FD, live_path's directory as opened (O_PATH will do):
 * listed and looked at there, its path never walked again. */
GPtrArray *fb_log_list_rotated_at (int dir_fd, const char *live_path, GError **error);
/* The same for a reader, while the writer may rotate: every rotated file
 * renamed in before the call, and every file written before any it holds
 * but those marked later (renamed in during the listing, they are for the
 * next one; see ipc-logread-names.c). */
GPtrArray *fb_log_list_rotated_settled_at (int dir_fd, const char *live_path, GError **error);
/* The rotated name for FIRST..LAST (N > 0: a collision suffix). */
char *fb_log_rotated_name (const char *live_name, guint64 first_seq, guint64 last_seq, guint n);
/* PATH's seqs and collision suffix, when its name is a rotated name of the
 * log at LIVE_PATH (RET's path and times untouched). */
bool fb_log_rotated_name_parse (const char *live_path, const char *path, FbRotatedFile *ret);
/* By the seqs in their names, then the collision suffix (qsort's order). */
int fb_log_rotated_seqs_cmp (const FbRotatedFile *x, const FbRotatedFile *y);

/* ipc-logread-seqs.c: the seqs of one run a reader returned, as ranges in a
 * balanced tree (a repeat is a seq returned, whatever the order). */
typedef struct FbSeqSet FbSeqSet;
FbSeqSet *fb_seq_set_new (void);
void fb_seq_set_free (FbSeqSet *set);
bool fb_seq_set_has (FbSeqSet *set, guint64 seq);
/* Add SEQ, not in SET. */
void fb_seq_set_add (FbSeqSet *set, guint64 seq);
/* The highest seq in SET: false when it holds none. */
bool fb_seq_set_max (FbSeqSet *set, guint64 *ret_max);
/* The lowest run of seqs missing between two of SET's, [*RET_LO, *RET_HI],
 * that begins above ABOVE: false when there is none. */
bool fb_seq_set_hole_above (FbSeqSet *set, guint64 above, guint64 *ret_lo, guint64 *ret_hi);

/* Identical refusals a log folding them (FbAccessLogOptions.coalesce)
 * writes in full in a window before it counts the rest (ipc-log.c). */
#define FB_LOG_FOLD_AFTER 8

/* Test seams: how many pushes had to wait for room in the queue, and how
 * many events are queued right now. */
guint64 fb_access_log_get_blocked_pushes (FbAccessLog *log);
guint fb_access_log_get_queued (FbAccessLog *log);

/* The inode of the pid namespace of the thread TID (any thread, not only a
 * process's first), with *RET_PIDFD the pidfd that pins the answer: the
 * thread's own (THREAD_PIDFD: PIDFD_THREAD, Linux 6.9) or its thread
 * group's, *RET_CACHEABLE whether that pidfd's exit is TID's; 0 when TID
 * is gone or its namespace can't be read (ipc-view-share.c). */
guint64 fb_view_share_task_pidns (pid_t tid, gboolean thread_pidfd, int *ret_pidfd, gboolean *ret_cacheable);

G_END_DECLS
