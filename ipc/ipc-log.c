/* fusebox — the access log's core (FbAccessLog): stamping and queueing.
 *
 * Every decided access is logged and no record is lost, even when the
 * sandboxed process is killed or the daemon dies; a repeated refusal may be
 * logged as a count (folds) and a log past its budget counts what it no
 * longer writes (both below).  The core stamps each record (seq, ts, run)
 * and hands it, in seq order, to the outputs (ipc-log-output.h): the JSONL
 * file with rotation (ipc-log-file.c), the live subscribers
 * (ipc-log-subscribers.c) and, when asked for, the systemd journal
 * (ipc-log-journal.c).  The file is the durable one: the budget,
 * back-pressure and write-through are about it, it is flushed first, and no
 * other output can hold it back.  How:
 *  - A pusher (a FUSE worker, any thread) formats its event into a JSON body
 *    (a deep copy: nothing of the caller's is kept) and appends it to a
 *    bounded ring.  While the ring is full the pusher waits: the sandbox
 *    slows down instead of losing a record.  The bound is queue_capacity
 *    bodies and QUEUE_MAX_BYTES of them, whichever comes first: hostile
 *    names (every byte a control character: 6 bytes escaped, and invalid
 *    UTF-8 adds its base64) make a body many times its paths' length, and
 *    the sandbox chooses the names.  One body larger than the byte budget
 *    still passes when the ring is empty, so nothing waits forever.
 *  - The GLib main loop takes the ring.  A pusher wakes it through the ready
 *    time of a custom GSource (g_source_set_ready_time is thread-safe and
 *    wakes the context); the dispatch takes the whole batch, assigns seq in
 *    the order it writes, and flushes the batch to the file with write(2)
 *    before it returns.  A record that the loop has handled is therefore in
 *    the kernel's page cache: a SIGKILL of the daemon loses nothing that
 *    fb_access_log_get_count() reported.  fsync runs on rotation and close,
 *    not per batch (that would put a disk flush on the FUSE path).
 *  - A push from the loop's own thread (the remote API) can't wait for the
 *    loop: it writes synchronously, after whatever is queued, so seq order is
 *    still the order of arrival at the writer.
 *  - With write_through (fusebox run and mount), a pusher on any thread
 *    does the same: its record is in the kernel's page cache before the push
 *    returns, so before the FUSE reply that follows it, and a SIGKILL of the
 *    daemon can only lose the records of operations not yet answered.  The
 *    ring is then used only while the file refuses data (back-pressure as
 *    below).  A live subscriber changes nothing here: its output keeps the
 *    line for the loop's thread, where its callback runs.
 *  - A write error (ENOSPC, EIO) keeps the unwritten bytes (the file's
 *    buffer), stops taking new batches (pushers then block: back-pressure,
 *    not loss) and retries every second; close reports what could not be
 *    written.
 *  - Repeated refusals are folded (coalesce): a sandbox that repeats a
 *    refused mkdir writes a record per attempt, tens of MB a second.  Two
 *    refusals are identical when they have the same pid, uid, comm,
 *    session, process, op, access, decision, errno and rule (index and origin) and
 *    their path and target lie in the same directories: one process asked
 *    the same thing in the same place and was refused by the same rule.
 *    The first FOLD_AFTER of a kind in a second (fold_window_us) are
 *    written as usual; identical ones after them in that second are
 *    counted, not written, and then one record stands for them: the last
 *    one's members plus "repeat": {"count", "first_ts", "last_ts", "of":
 *    the first's seq} (a single one is written as itself).  Nothing is dropped without a count; what a fold loses is
 *    the names between its first and its last, of refusals that changed
 *    nothing.  At most MAX_FOLDS kinds are open (a new kind closes the
 *    oldest), each holding one record; a timer on the loop writes a fold
 *    when its window ends, and close writes every open one.  A fold's count
 *    is in memory until then: a SIGKILL of the daemon loses at most the last
 *    window's counts, never a record that was not a repeat.
 *  - The budget (max_bytes): the bytes of every file this writer wrote
 *    (live and rotated; an existing live file's bytes count too).  The
 *    record that reaches it calls on_full once, from its own thread: the
 *    owner stops the sandbox.  What its processes still do meanwhile is
 *    written up to a margin (BUDGET_SLACK); past that a record is counted
 *    and not written (it gets no seq: the seq stay gap-free), and close
 *    writes a last record {"notice": "log-full", "max_size",
 *    "records_not_written", "why"} whatever the budget, as it writes the
 *    open folds: the log says why it ends and how much it is missing.
 *  - Shares (FbAccessShare): one producer's part of the budget, a
 *    FB_LOG_SHARE_PART-th of it, so that one sandbox of `fusebox serve` can't
 *    spend what the others need: an open/close loop wrote 4.7 MB/s of
 *    allowed records, and at the budget the whole server stopped.  A push
 *    through the share's sink counts the bytes of its written records; the
 *    record that reaches the share calls its on_full once, on the loop's
 *    thread; past the share's own margin its records are counted and not
 *    written (no seq), and closing the share (or the log) writes
 *    {"notice": "log-share-full", "session", "process", "max_size",
 *    "records_not_written", "why"} for a share that was reached.  The
 *    log's own budget still applies to every record.  A share may be part
 *    of a group's (a process's and a view's of their session's), which
 *    counts its records too: a group's share also shrinks as the others
 *    write, so that no number of groups reaches the log's budget
 *    (share_admit): shares of a quarter each let five processes of one
 *    client, or one client's fs/... calls, which went to the log unshared,
 *    stop the server and every other client's processes.
 *  - The journal gets every record the file gets, and when it missed some
 *    (absent, refusing, too slow) close writes {"notice":
 *    "journal-incomplete", "records_not_sent", "why"}.
 *
 * Locks: writer_lock (seq, the outputs' write and flush, folds, the budget)
 * is taken before queue_lock (the ring); pushers take only queue_lock,
 * except the synchronous loop-thread path and write-through, which take
 * both in that order.  No file I/O happens under queue_lock.  The outputs'
 * own locks come after writer_lock.  The log file is never inside the FUSE
 * mount it records (run: the run directory on the host; mount: opened
 * before the mount covers it), so a write-through pusher never waits on its
 * own file system. */
#include "ipc/ipc-log-output.h"
#include "policy/util.h"

#include <string.h>

#define DEFAULT_CAPACITY 4096
#define RETRY_USEC (1 * G_USEC_PER_SEC)
/* Bytes of formatted bodies the ring may hold (see above). */
#define QUEUE_MAX_BYTES (16 * 1024 * 1024)
/* Folding repeated refusals (see above). */
#define DEFAULT_FOLD_WINDOW_US (1 * G_USEC_PER_SEC)
#define MAX_FOLDS 256
/* Identical refusals written in full in a window before the rest are
 * counted: a few repeats (a command retried, a tool probing) stay records
 * of their own, written at once; a flood is folded. */
#define FOLD_AFTER FB_LOG_FOLD_AFTER
/* How far past the budget the records of a sandbox being stopped are still
 * written: what it can do between the record that reached the budget and
 * its end, a few ms.  At least 1 MiB, at most a sixteenth of the budget
 * more. */
#define BUDGET_SLACK(max) MAX ((guint64)1024 * 1024, (max) / 16)
/* The same for a share: at least 256 KiB, a sixteenth of the share. */
#define SHARE_SLACK(max) MAX ((guint64)256 * 1024, (max) / 16)
/* A group's share is at most this part of what the others left of the
 * budget (its margin of a sixteenth included: 17/48 < 1). */
#define GROUP_PART 3

G_DEFINE_QUARK (fb - ipc - error - quark, fb_ipc_error)

typedef struct
{
  gint64 ts_us;
  char *body;           /* from fb_access_event_format_body */
  char *fold_key;       /* a refusal's kind (fold_key()), or NULL */
  FbAccessShare *share; /* a reference, or NULL */
} Queued;

struct FbAccessShare
{
  FbAccessSink sink; /* pushes to the log, counted here */
  FbAccessLog *log;
  FbAccessShare *parent; /* a reference, or NULL: its records count there too */
  char *label;           /* `"session":...,"process":...,` pre-escaped, for the notice */
  guint64 max_bytes;     /* 0: no share of a log without a budget */
  gboolean group;        /* a group's (fb_access_log_group_share_new): max_bytes, and less as others write */
  FbAccessLogFullFunc on_full;
  gpointer on_full_data;
  /* writer_lock: */
  guint64 bytes;       /* of its records written */
  gboolean full;       /* max_bytes reached */
  gboolean notify;     /* on_full to call (from the loop) */
  guint64 not_written; /* its records past its margin */
  guint64 reached_at;  /* the limit it reached (a group's shrinks) */
  gboolean closed;     /* its notice written if it was full; no more on_full */
};

/* One kind of refusal being folded.  writer_lock. */
typedef struct
{
  char *key;
  gint64 deadline_us; /* real time: the window's end */
  guint64 of_seq;     /* the seq of the record written in full */
  guint written;      /* written in full in this window (at most FOLD_AFTER) */
  guint64 count;      /* identical refusals since, not written yet */
  gint64 first_us;    /* the first of them */
  gint64 last_us;     /* the last of them */
  char *last_body;    /* the last of them */
  const void *share;  /* the share its first came through (compared, never followed), or NULL */
} Fold;

/* The loop's two jobs on the log: writing what is queued, and writing
 * the folds whose window ended.  Each runs under writer_lock while the log
 * is open (writer_source_dispatch). */
typedef struct
{
  GSource source;
  FbAccessLog *log;
  void (*work) (FbAccessLog *log, GSource *source);
} WriterSource;

struct FbAccessLog
{
  FbAccessSink sink; /* first: the sink pointer is the log pointer */

  GMainContext *context;
  GThread *owner; /* the thread that created the log (owns context) */
  GSource *source;

  /* The ring.  queue_lock guards every field in this group. */
  GMutex queue_lock;
  GCond not_full;
  Queued *ring;
  guint capacity;
  guint head;  /* index of the oldest entry */
  guint count; /* entries in the ring */
  gsize bytes; /* strlen of the bodies in the ring */
  gboolean wake_pending;
  gboolean closed;
  guint64 blocked_pushes;

  /* writer_lock guards every field in this group. */
  GMutex writer_lock;
  char *run_json;  /* `"run":"...",` pre-escaped */
  guint64 seq;     /* the last record's */
  GString *line;   /* the record being stamped */
  FbLogFile *file; /* outputs: the file (always, first) */
  FbLogSubscribers *subscribers;
  FbLogJournal *journal; /* or NULL */
  GPtrArray *outputs;    /* FbLogOutput*, owned: the file, the subscribers, the journal */

  gboolean is_open;       /* FALSE after close */
  gboolean write_through; /* set once at creation */

  /* Folds and the budget: writer_lock. */
  gboolean coalesce; /* set once at creation */
  gint64 fold_window_us;
  GHashTable *folds;   /* key -> Fold* (owned by fold_order) */
  GQueue fold_order;   /* Fold*, oldest first */
  GSource *fold_timer; /* writes folds whose window ended */
  guint64 max_bytes;   /* 0: no budget */
  gboolean full;       /* the budget was reached */
  guint64 not_written; /* records past the budget's margin */
  FbAccessLogFullFunc on_full;
  gpointer on_full_data;
  gint full_notify;  /* atomic: 1 = on_full to call, 2 = called */
  GPtrArray *shares; /* FbAccessShare* not closed (weak: a share leaves it when closed) */
  gint share_notify; /* atomic: some share's on_full is to be called */
};

static void
queued_clear (Queued *q)
{
  g_clear_pointer (&q->body, g_free);
  g_clear_pointer (&q->fold_key, g_free);
  g_clear_pointer (&q->share, fb_access_share_unref);
}

static void
fold_free (Fold *f)
{
  g_free (f->key);
  g_free (f->last_body);
  g_free (f);
}

/* --- outputs ----------------------------------------------------------------- */

/* Stamp one record and hand it to every output.  writer_lock held.
 * Returns its length in the file. */
static gsize
write_record (FbAccessLog *log, gint64 ts_us, const char *body)
{
  char ts[FB_TS_BUF];
  FbLogLine record;

  fb_format_ts (ts_us, ts);
  log->seq++;
  g_string_assign (log->line, "{\"ts\":\"");
  g_string_append (log->line, ts);
  g_string_append (log->line, "\",");
  g_string_append (log->line, log->run_json);
  g_string_append (log->line, "\"seq\":");
  fb_json_append_int (log->line, (gint64)log->seq);
  g_string_append_c (log->line, ',');
  g_string_append (log->line, body);
  record = (FbLogLine){ log->seq, ts_us, log->line->str, log->line->len };
  for (guint i = 0; i < log->outputs->len; i++)
    {
      FbLogOutput *output = log->outputs->pdata[i];
      output->ops->write (output, &record);
    }
  return log->line->len + 1;
}

/* Flush every output, the file first.  writer_lock held.  Returns
 * whether the file took everything: the others never hold it back. */
static gboolean
flush_outputs (FbAccessLog *log)
{
  gboolean ok = TRUE;

  for (guint i = 0; i < log->outputs->len; i++)
    {
      FbLogOutput *output = log->outputs->pdata[i];
      gboolean done = output->ops->flush (output);

      if (output == fb_log_file_output (log->file))
        ok = done;
    }
  return ok;
}

/* --- folds and the budget ------------------------------------------------ */

/* Write what FOLD stands for, if anything.  writer_lock held.  Exempt from
 * the budget's margin: at most MAX_FOLDS records, each a count. */
static void
write_fold (FbAccessLog *log, Fold *f)
{
  GString *body;
  char first[FB_TS_BUF], last[FB_TS_BUF];

  if (f->count == 0)
    return;
  if (f->count == 1)
    {
      /* one repeat is its own record */
      write_record (log, f->last_us, f->last_body);
      f->count = 0;
      return;
    }
  body = g_string_new (f->last_body);
  /* the body ends with its object's '}' */
  if (body->len > 0 && body->str[body->len - 1] == '}')
    g_string_truncate (body, body->len - 1);
  fb_format_ts (f->first_us, first);
  fb_format_ts (f->last_us, last);
  g_string_append (body, ",\"repeat\":{\"count\":");
  fb_json_append_int (body, (gint64)f->count);
  g_string_append (body, ",\"first_ts\":\"");
  g_string_append (body, first);
  g_string_append (body, "\",\"last_ts\":\"");
  g_string_append (body, last);
  g_string_append (body, "\",\"of\":");
  fb_json_append_int (body, (gint64)f->of_seq);
  g_string_append (body, "}}");
  write_record (log, f->last_us, body->str);
  g_string_free (body, TRUE);
  f->count = 0;
}

static void
close_fold (FbAccessLog *log, Fold *f)
{
  write_fold (log, f);
  g_hash_table_remove (log->folds, f->key);
  g_queue_remove (&log->fold_order, f);
  fold_free (f);
}

/* Wake the loop when the oldest open fold's window ends.  writer_lock. */
static void
schedule_folds (FbAccessLog *log)
{
  Fold *f = g_queue_peek_head (&log->fold_order);
  gint64 wait;

  if (f == NULL || log->fold_timer == NULL)
    return;
  wait = f->deadline_us - g_get_real_time ();
  g_source_set_ready_time (log->fold_timer, g_get_monotonic_time () + MAX (wait, 0));
}

/* Close the folds whose window ended by NOW (real time).  writer_lock. */
static void
expire_folds (FbAccessLog *log, gint64 now)
{
  Fold *f;

  while ((f = g_queue_peek_head (&log->fold_order)) != NULL && f->deadline_us <= now)
    close_fold (log, f);
}

/* No more of SHARE: its notice if it was reached (exempt from every
 * budget, like a fold: one record per share).  writer_lock held. */
static void
close_share (FbAccessLog *log, FbAccessShare *share)
{
  if (share->closed)
    return;
  share->closed = TRUE;
  share->on_full = NULL;
  g_ptr_array_remove_fast (log->shares, share);
  if (share->full && log->is_open)
    {
      GString *notice = g_string_new ("\"notice\":\"log-share-full\",");

      g_string_append (notice, share->label);
      g_string_append (notice, "\"max_size\":");
      fb_json_append_int (notice, (gint64)share->reached_at);
      g_string_append (notice, ",\"records_not_written\":");
      fb_json_append_int (notice, (gint64)share->not_written);
      g_string_append (notice, share->group
                                 ? ",\"why\":\"the session used up its share of the access log's budget (max_size); "
                                   "its processes were stopped and its calls refused\"}"
                                 : ",\"why\":\"the process used up its share of the access log's budget (max_size); "
                                   "it was stopped\"}");
      write_record (log, g_get_real_time (), notice->str);
      g_string_free (notice, TRUE);
    }
}

/* SHARE has reached LIMIT: its owner hears of it from the loop, whichever
 * path got here.  writer_lock held. */
static void
share_reached (FbAccessLog *log, FbAccessShare *share, guint64 limit)
{
  if (share->full)
    return;
  share->full = TRUE;
  share->notify = TRUE;
  share->reached_at = limit;
  g_atomic_int_set (&log->share_notify, 1);
  if (log->source != NULL)
    g_source_set_ready_time (log->source, 0);
}

/* May a record of about LEN bytes be written through SHARE (open, with a
 * budget)?  When not, it is counted there.  writer_lock held.
 *
 * A share of its own (a process's, a view's) is max_bytes: reached there,
 * written up to its margin.  A group's (a session's) is max_bytes too, but
 * also at most a GROUP_PART-th of what the others left of the budget, its
 * margin included, and its records are written only while they fit: so the
 * groups together never reach the log's budget, however many there are (n
 * groups that all write stop at n/(n+2) of it at most), and one client's
 * records can't stop the server the others use. */
static gboolean
share_admit (FbAccessLog *log, FbAccessShare *share, gsize len)
{
  guint64 limit, hard;

  if (!share->group)
    {
      if (share->bytes >= share->max_bytes)
        share_reached (log, share, share->max_bytes);
      if (share->bytes < share->max_bytes + SHARE_SLACK (share->max_bytes))
        return TRUE;
      share->not_written++;
      return FALSE;
    }
  {
    guint64 file = fb_log_file_get_bytes (log->file);
    guint64 others = file > share->bytes ? file - share->bytes : 0;
    guint64 room = log->max_bytes > others ? (log->max_bytes - others) / GROUP_PART : 0;

    limit = MIN (share->max_bytes, room);
    hard = limit + limit / 16;
  }
  if (share->bytes + len > limit)
    share_reached (log, share, limit);
  if (share->bytes + len <= hard)
    return TRUE;
  share->not_written++;
  return FALSE;
}

/* A record of LEN bytes was written through SHARE (may be NULL) and its
 * PARENT (may be NULL). */
static void
share_charge (FbAccessShare *share, FbAccessShare *parent, gsize len)
{
  if (share != NULL)
    share->bytes += len;
  if (parent != NULL)
    parent->bytes += len;
}

/* A record reaching the file: budget, fold, or written.  writer_lock held.
 * KEY: the refusal's kind (fold_key()), NULL for anything else; SHARE: the
 * share it was pushed through, or NULL. */
static void
take_record (FbAccessLog *log, gint64 ts_us, const char *body, const char *key, FbAccessShare *share)
{
  FbAccessShare *parent;
  const void *origin = share;
  Fold *f = NULL;
  gsize len;

  if (log->max_bytes > 0)
    {
      guint64 bytes = fb_log_file_get_bytes (log->file);

      if (bytes >= log->max_bytes && !log->full)
        {
          log->full = TRUE;
          g_atomic_int_set (&log->full_notify, 1);
        }
      if (bytes >= log->max_bytes + BUDGET_SLACK (log->max_bytes))
        {
          log->not_written++;
          return;
        }
    }
  if (share != NULL && (share->max_bytes == 0 || share->closed))
    share = NULL;
  parent = share != NULL && share->parent != NULL && !share->parent->closed ? share->parent : NULL;
  if (share != NULL)
    {
      /* what the record will take in the file: its body, and the stamp
       * write_record puts before it */
      gsize estimate = strlen (body) + strlen (log->run_json) + FB_TS_BUF + 32;

      if (!share_admit (log, share, estimate) || (parent != NULL && !share_admit (log, parent, estimate)))
        return;
    }
  if (log->coalesce)
    {
      gint64 now = g_get_real_time ();

      expire_folds (log, now);
      if (key != NULL)
        {
          f = g_hash_table_lookup (log->folds, key);
          if (f != NULL && f->written < FOLD_AFTER)
            {
              f->written++;
              len = write_record (log, ts_us, body);
              share_charge (share, parent, len);
              return;
            }
          if (f != NULL)
            {
              if (f->count == 0)
                f->first_us = ts_us;
              f->count++;
              f->last_us = ts_us;
              g_free (f->last_body);
              f->last_body = g_strdup (body);
              return;
            }
          if (g_hash_table_size (log->folds) >= MAX_FOLDS)
            close_fold (log, g_queue_peek_head (&log->fold_order));
          f = g_new0 (Fold, 1);
          f->key = g_strdup (key);
          f->share = origin;
          f->deadline_us = now + log->fold_window_us;
          f->written = 1;
          g_hash_table_insert (log->folds, f->key, f);
          g_queue_push_tail (&log->fold_order, f);
          if (g_queue_get_length (&log->fold_order) == 1)
            schedule_folds (log);
        }
    }
  len = write_record (log, ts_us, body);
  share_charge (share, parent, len);
  if (f != NULL)
    f->of_seq = log->seq;
}

static gboolean on_loop_thread (FbAccessLog *log);

/* The owners of shares reached since, on the loop's thread. */
static void
notify_shares (FbAccessLog *log)
{
  g_autoptr (GPtrArray) reached = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_access_share_unref);

  g_mutex_lock (&log->writer_lock);
  g_atomic_int_set (&log->share_notify, 0);
  for (guint i = 0; i < log->shares->len; i++)
    {
      FbAccessShare *share = log->shares->pdata[i];
      if (share->notify)
        {
          share->notify = FALSE;
          g_ptr_array_add (reached, fb_access_share_ref (share));
        }
    }
  g_mutex_unlock (&log->writer_lock);
  /* A callback may close any share: on this thread, so the others' closed
   * flags are read after it. */
  for (guint i = 0; i < reached->len; i++)
    {
      FbAccessShare *share = reached->pdata[i];
      if (!share->closed && share->on_full != NULL)
        share->on_full (share->on_full_data);
    }
}

/* After the locks are released: tell the owner, once, that the budget was
 * reached; and the owners of reached shares, from the loop (a pusher on
 * another thread wakes it). */
static void
notify_full (FbAccessLog *log)
{
  if (g_atomic_int_get (&log->full_notify) == 1 && g_atomic_int_compare_and_exchange (&log->full_notify, 1, 2) &&
      log->on_full != NULL)
    log->on_full (log->on_full_data);
  if (g_atomic_int_get (&log->share_notify))
    {
      if (on_loop_thread (log))
        notify_shares (log);
      else if (log->source != NULL)
        g_source_set_ready_time (log->source, 0);
    }
}

/* After the writer lock is released: notify_full, and the subscribers
 * given what was written since, on the loop's thread; a pusher on another
 * thread waits while too much waits for the loop (their back-pressure). */
static void
after_write (FbAccessLog *log)
{
  notify_full (log);
  if (on_loop_thread (log))
    fb_log_subscribers_deliver (log->subscribers);
  else
    fb_log_subscribers_wait_room (log->subscribers);
}

/* The kind of a refusal, for folding: NULL for an allowed access. */
static char *
fold_key (const FbAccessEvent *e)
{
  GString *k;
  const char *slash;

  if (!fb_decision_info (e->decision)->refusal)
    return NULL;
  k = g_string_sized_new (128);
  g_string_append_printf (k, "%d\x1f%u\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%d\x1f%d\x1f", (int)e->pid, (unsigned)e->uid,
                          e->comm != NULL ? e->comm : "", e->session != NULL ? e->session : "",
                          e->process != NULL ? e->process : "", fb_op_to_string (e->op),
                          e->access != NULL ? e->access : "", (int)e->decision, e->err);
  if (e->rule != NULL)
    g_string_append_printf (k, "%d\x1f%d\x1f%s", (int)e->rule->kind, e->rule->index,
                            e->rule->origin != NULL ? e->rule->origin : "");
  /* a refused connection: its entry and its host, whole */
  if (e->net_rule != NULL)
    g_string_append_printf (k, "%s\x1f%s\x1f%s\x1f", e->net_rule->name, e->net_rule->origin,
                            e->host != NULL ? e->host : "");
  g_string_append_c (k, '\x1f');
  /* the directories, not the names */
  slash = e->path != NULL ? strrchr (e->path, '/') : NULL;
  if (slash != NULL)
    g_string_append_len (k, e->path, slash - e->path + 1);
  g_string_append_c (k, '\x1f');
  slash = e->target != NULL ? strrchr (e->target, '/') : NULL;
  if (slash != NULL)
    g_string_append_len (k, e->target, slash - e->target + 1);
  return g_string_free (k, FALSE);
}

/* The fold timer's work.  writer_lock held. */
static void
write_folds_due (FbAccessLog *log, GSource *source)
{
  expire_folds (log, g_get_real_time ());
  if (fb_log_file_get_pending (log->file) > 0)
    flush_outputs (log);
  schedule_folds (log);
}

/* Take everything queued and write it.  writer_lock held.  Returns FALSE
 * when a write error blocks progress. */
static gboolean
write_queued (FbAccessLog *log, gboolean clear_wake)
{
  /* While the file refuses data, leave the batch in the ring: pushers block
   * and nothing grows without bound. */
  if (fb_log_file_get_pending (log->file) > 0 && !flush_outputs (log))
    return FALSE;

  for (;;)
    {
      g_autofree Queued *batch = NULL;
      guint n;

      g_mutex_lock (&log->queue_lock);
      if (clear_wake)
        log->wake_pending = FALSE;
      n = log->count;
      if (n > 0)
        {
          batch = g_new (Queued, n);
          for (guint i = 0; i < n; i++)
            {
              batch[i] = log->ring[(log->head + i) % log->capacity];
              log->ring[(log->head + i) % log->capacity].body = NULL;
              log->ring[(log->head + i) % log->capacity].fold_key = NULL;
              log->ring[(log->head + i) % log->capacity].share = NULL;
            }
          log->head = (log->head + n) % log->capacity;
          log->count = 0;
          log->bytes = 0;
          g_cond_broadcast (&log->not_full);
        }
      g_mutex_unlock (&log->queue_lock);

      if (n == 0)
        break;
      for (guint i = 0; i < n; i++)
        {
          take_record (log, batch[i].ts_us, batch[i].body, batch[i].fold_key, batch[i].share);
          queued_clear (&batch[i]);
        }
      /* One batch is what the loop took in one go; pushers that refilled the
       * ring meanwhile get the next dispatch, so other sources get a turn. */
      if (clear_wake)
        break;
    }
  return flush_outputs (log);
}

/* The writer's work.  writer_lock held. */
static void
write_queue (FbAccessLog *log, GSource *source)
{
  if (!write_queued (log, TRUE))
    g_source_set_ready_time (source, g_get_monotonic_time () + RETRY_USEC);
}

static gboolean
writer_source_dispatch (GSource *source, GSourceFunc callback, gpointer user_data)
{
  WriterSource *ws = container_of (source, WriterSource, source);
  FbAccessLog *log = ws->log;

  /* Reset before the work: a push after this point sets it again. */
  g_source_set_ready_time (source, -1);
  g_mutex_lock (&log->writer_lock);
  if (log->is_open)
    ws->work (log, source);
  g_mutex_unlock (&log->writer_lock);
  after_write (log);
  return G_SOURCE_CONTINUE;
}

static GSourceFuncs writer_source_funcs = {
  .dispatch = writer_source_dispatch,
};

static GSource *
writer_source_new (FbAccessLog *log, const char *name, void (*work) (FbAccessLog *log, GSource *source))
{
  GSource *source = g_source_new (&writer_source_funcs, sizeof (WriterSource));
  WriterSource *ws = container_of (source, WriterSource, source);

  ws->log = log;
  ws->work = work;
  g_source_set_name (source, name);
  g_source_attach (source, log->context);
  return source;
}

/* --- pushing ---------------------------------------------------------- */

/* write_through: write the record now, after whatever is queued (seq
 * follows arrival), unless the file refuses data; then FALSE and the
 * caller queues it.  Subscribers or not: their output keeps the line for
 * the loop's thread. */
static gboolean
write_now (FbAccessLog *log, gint64 ts_us, const char *body, const char *key, FbAccessShare *share)
{
  gboolean done = FALSE;

  g_mutex_lock (&log->writer_lock);
  if (log->is_open && fb_log_file_get_error (log->file) == NULL && write_queued (log, FALSE))
    {
      take_record (log, ts_us, body, key, share);
      /* On failure the record stays in the file's buffer (not lost); later
       * pushes queue (the file has an error) and the loop retries. */
      if (!flush_outputs (log))
        g_source_set_ready_time (log->source, g_get_monotonic_time () + RETRY_USEC);
      done = TRUE;
    }
  g_mutex_unlock (&log->writer_lock);
  after_write (log);
  return done;
}

static gboolean
on_loop_thread (FbAccessLog *log)
{
  return g_thread_self () == log->owner || g_main_context_is_owner (log->context);
}

/* A push, through the log's own sink or through SHARE's. */
static void
log_push (FbAccessLog *log, FbAccessShare *share, const FbAccessEvent *event)
{
  gint64 ts_us = event->ts_us != 0 ? event->ts_us : g_get_real_time ();
  char *body = fb_access_event_format_body (event);
  char *key = log->coalesce ? fold_key (event) : NULL;
  gsize len = strlen (body);
  gboolean wake = FALSE;

  if (on_loop_thread (log))
    {
      /* Waiting here would wait for ourselves: write now, after what is
       * already queued so that seq follows arrival. */
      g_mutex_lock (&log->writer_lock);
      if (log->is_open)
        {
          write_queued (log, FALSE);
          take_record (log, ts_us, body, key, share);
          flush_outputs (log);
        }
      else
        g_critical ("access log %s: push after close; record lost: %s", fb_log_file_get_path (log->file), body);
      g_mutex_unlock (&log->writer_lock);
      after_write (log);
      g_free (body);
      g_free (key);
      return;
    }

  if (log->write_through && write_now (log, ts_us, body, key, share))
    {
      g_free (body);
      g_free (key);
      return;
    }

  g_mutex_lock (&log->queue_lock);
#define RING_FULL(log, len)                                                                                            \
  ((log)->count == (log)->capacity || ((log)->count > 0 && (log)->bytes + (len) > QUEUE_MAX_BYTES))
  if (RING_FULL (log, len))
    log->blocked_pushes++;
  while (RING_FULL (log, len) && !log->closed)
    g_cond_wait (&log->not_full, &log->queue_lock);
#undef RING_FULL
  if (log->closed)
    {
      g_mutex_unlock (&log->queue_lock);
      g_critical ("access log %s: push after close; record lost: %s", fb_log_file_get_path (log->file), body);
      g_free (body);
      g_free (key);
      return;
    }
  log->ring[(log->head + log->count) % log->capacity] =
    (Queued){ ts_us, body, key, share != NULL ? fb_access_share_ref (share) : NULL };
  log->count++;
  log->bytes += len;
  if (!log->wake_pending)
    {
      log->wake_pending = TRUE;
      wake = TRUE;
    }
  g_mutex_unlock (&log->queue_lock);

  if (wake)
    g_source_set_ready_time (log->source, 0);
}

static void
sink_push (FbAccessSink *sink, const FbAccessEvent *event)
{
  log_push ((FbAccessLog *)sink, NULL, event);
}

/* --- public ------------------------------------------------------------ */

FbAccessLog *
fb_access_log_new (const FbAccessLogOptions *options, GMainContext *context, GError **error)
{
  g_autoptr (FbAccessLog) log = NULL;
  GString *run = g_string_new ("\"run\":");

  g_return_val_if_fail (options != NULL && options->path != NULL, NULL);

  log = g_new0 (FbAccessLog, 1);
  log->sink.push = sink_push;
  log->context = g_main_context_ref (context != NULL ? context : g_main_context_default ());
  log->owner = g_thread_self ();
  g_mutex_init (&log->queue_lock);
  g_cond_init (&log->not_full);
  g_mutex_init (&log->writer_lock);
  log->capacity = options->queue_capacity > 0 ? options->queue_capacity : DEFAULT_CAPACITY;
  log->ring = g_new0 (Queued, log->capacity);
  log->write_through = options->write_through;
  log->coalesce = options->coalesce;
  log->fold_window_us = options->fold_window_us > 0 ? (gint64)options->fold_window_us : DEFAULT_FOLD_WINDOW_US;
  log->max_bytes = options->max_bytes;
  log->on_full = options->on_full;
  log->on_full_data = options->on_full_data;
  log->folds = g_hash_table_new (g_str_hash, g_str_equal);
  log->shares = g_ptr_array_new ();
  g_queue_init (&log->fold_order);
  log->line = g_string_sized_new (1024);
  fb_json_append_string (run, options->run_id);
  g_string_append_c (run, ',');
  log->run_json = g_string_free (run, FALSE);
  log->outputs = g_ptr_array_new ();

  log->file = options->new_in_dir
                ? fb_log_file_open_new_in (options->path, options->dir_fd, options->rotate_bytes, error)
                : fb_log_file_open (options->path, options->rotate_bytes, error);
  if (log->file == NULL)
    return NULL;
  g_ptr_array_add (log->outputs, fb_log_file_output (log->file));
  log->subscribers = fb_log_subscribers_new (log->context);
  g_ptr_array_add (log->outputs, fb_log_subscribers_output (log->subscribers));
  if (options->journal)
    {
      log->journal = fb_log_journal_new (options->journal_socket, log->context);
      g_ptr_array_add (log->outputs, fb_log_journal_output (log->journal));
    }
  log->is_open = TRUE;

  log->source = writer_source_new (log, "fusebox access log", write_queue);
  if (log->coalesce)
    log->fold_timer = writer_source_new (log, "fusebox access log folds", write_folds_due);
  return g_steal_pointer (&log);
}

FbAccessSink *
fb_access_log_get_sink (FbAccessLog *log)
{
  return &log->sink;
}

guint64
fb_access_log_get_count (FbAccessLog *log)
{
  return fb_log_file_get_flushed_seq (log->file);
}

gboolean
fb_access_log_drain (FbAccessLog *log, GError **error)
{
  gboolean ok;

  g_mutex_lock (&log->writer_lock);
  ok = log->is_open && write_queued (log, FALSE);
  if (!ok)
    {
      if (fb_log_file_get_error (log->file) != NULL)
        g_propagate_error (error, g_error_copy (fb_log_file_get_error (log->file)));
      else
        g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID, "the access log %s is closed",
                     fb_log_file_get_path (log->file));
    }
  g_mutex_unlock (&log->writer_lock);
  if (on_loop_thread (log))
    fb_log_subscribers_deliver (log->subscribers);
  return ok;
}

/* The notice that the journal missed records, if it did.  writer_lock. */
static void
write_journal_notice (FbAccessLog *log)
{
  g_autofree char *why = NULL;
  guint64 not_sent = fb_log_journal_finish (log->journal, &why);
  GString *notice;

  if (not_sent == 0)
    return;
  notice = g_string_new ("\"notice\":\"journal-incomplete\",\"records_not_sent\":");
  fb_json_append_int (notice, (gint64)not_sent);
  g_string_append_c (notice, ',');
  fb_json_append_string_member (notice, "why", why != NULL ? why : "the journal refused them");
  g_string_append_c (notice, '}');
  write_record (log, g_get_real_time (), notice->str);
  g_string_free (notice, TRUE);
}

gboolean
fb_access_log_close (FbAccessLog *log, GError **error)
{
  g_autoptr (GError) file_error = NULL;
  gboolean ok = TRUE;

  g_mutex_lock (&log->writer_lock);
  if (!log->is_open)
    {
      g_mutex_unlock (&log->writer_lock);
      return TRUE;
    }
  /* The caller stopped every pusher, so one drain takes everything.  A disk
   * that stays full is retried a few times, then reported. */
  for (int attempt = 0; attempt < 5; attempt++)
    {
      ok = write_queued (log, FALSE);
      if (ok)
        break;
      g_usleep (200 * 1000);
    }
  if (ok)
    {
      /* the open folds' counts, then why the log ends early */
      Fold *f;

      while ((f = g_queue_peek_head (&log->fold_order)) != NULL)
        close_fold (log, f);
      while (log->shares->len > 0)
        close_share (log, log->shares->pdata[log->shares->len - 1]);
      if (log->full)
        {
          GString *notice = g_string_new ("\"notice\":\"log-full\",\"max_size\":");

          fb_json_append_int (notice, (gint64)log->max_bytes);
          g_string_append (notice, ",\"records_not_written\":");
          fb_json_append_int (notice, (gint64)log->not_written);
          g_string_append (notice, ",\"why\":\"the access log reached its budget (max_size); the run was stopped\"}");
          write_record (log, g_get_real_time (), notice->str);
          g_string_free (notice, TRUE);
        }
      if (log->journal != NULL)
        {
          /* what waits for the journal goes now (bounded), after the file
           * has every record */
          ok = flush_outputs (log);
          write_journal_notice (log);
        }
      ok = flush_outputs (log);
    }
  /* fsync, and close: the file's error says what it could not write */
  if (!fb_log_file_output (log->file)->ops->close (fb_log_file_output (log->file), &file_error) || !ok)
    {
      guint64 lost = log->seq - fb_access_log_get_count (log) + fb_access_log_get_queued (log);
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "%s (%" G_GUINT64_FORMAT " records not written)",
                   file_error != NULL ? file_error->message : "the access log could not be written", lost);
      ok = FALSE;
    }
  for (guint i = 0; i < log->outputs->len; i++)
    {
      FbLogOutput *output = log->outputs->pdata[i];
      if (output != fb_log_file_output (log->file))
        output->ops->close (output, NULL);
    }
  log->is_open = FALSE;

  g_mutex_lock (&log->queue_lock);
  log->closed = TRUE;
  g_cond_broadcast (&log->not_full);
  g_mutex_unlock (&log->queue_lock);
  g_mutex_unlock (&log->writer_lock);

  fb_source_clear (&log->source);
  fb_source_clear (&log->fold_timer);
  after_write (log);
  return ok;
}

void
fb_access_log_free (FbAccessLog *log)
{
  g_autoptr (GError) error = NULL;

  if (log == NULL)
    return;
  /* Still open: closed first; a failed close can only be told here. */
  if (log->is_open && !fb_access_log_close (log, &error))
    g_warning ("%s", error->message);
  fb_source_clear (&log->source);
  fb_source_clear (&log->fold_timer);
  g_queue_clear_full (&log->fold_order, (GDestroyNotify)fold_free);
  if (log->folds != NULL)
    g_hash_table_unref (log->folds);
  if (log->shares != NULL)
    {
      /* owners that outlive the log find their shares closed */
      for (guint i = 0; i < log->shares->len; i++)
        ((FbAccessShare *)log->shares->pdata[i])->closed = TRUE;
      g_ptr_array_unref (log->shares);
    }
  for (guint i = 0; i < log->count; i++)
    queued_clear (&log->ring[(log->head + i) % log->capacity]);
  g_free (log->ring);
  /* the subscribers' destroy notifies run here */
  for (guint i = 0; log->outputs != NULL && i < log->outputs->len; i++)
    {
      FbLogOutput *output = log->outputs->pdata[i];
      output->ops->free (output);
    }
  if (log->outputs != NULL)
    g_ptr_array_unref (log->outputs);
  if (log->line != NULL)
    g_string_free (log->line, TRUE);
  g_free (log->run_json);
  g_mutex_clear (&log->queue_lock);
  g_cond_clear (&log->not_full);
  g_mutex_clear (&log->writer_lock);
  g_main_context_unref (log->context);
  g_free (log);
}

guint
fb_access_log_subscribe (FbAccessLog *log, FbAccessLogFunc func, gpointer user_data, GDestroyNotify destroy)
{
  return fb_log_subscribers_add (log->subscribers, func, user_data, destroy);
}

void
fb_access_log_unsubscribe (FbAccessLog *log, guint id)
{
  /* the lines written while it listened, first */
  if (on_loop_thread (log))
    fb_log_subscribers_deliver (log->subscribers);
  fb_log_subscribers_remove (log->subscribers, id);
}

guint64
fb_access_log_get_blocked_pushes (FbAccessLog *log)
{
  g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&log->queue_lock);

  return log->blocked_pushes;
}

guint
fb_access_log_get_queued (FbAccessLog *log)
{
  g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&log->queue_lock);

  return log->count;
}

gboolean
fb_access_log_is_full (FbAccessLog *log, guint64 *ret_not_written)
{
  g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&log->writer_lock);

  if (ret_not_written != NULL)
    *ret_not_written = log->not_written;
  return log->full;
}

/* --- shares ---------------------------------------------------------------- */

static void
share_push (FbAccessSink *sink, const FbAccessEvent *event)
{
  FbAccessShare *share = (FbAccessShare *)((char *)sink - G_STRUCT_OFFSET (FbAccessShare, sink));

  log_push (share->log, share, event);
}

static FbAccessShare *
share_new (FbAccessLog *log, FbAccessShare *parent, const char *session, const char *process,
           FbAccessLogFullFunc on_full, gpointer on_full_data)
{
  FbAccessShare *share = g_atomic_rc_box_new0 (FbAccessShare);
  GString *label = g_string_new (NULL);

  share->sink.push = share_push;
  share->log = log;
  share->parent = parent != NULL ? fb_access_share_ref (parent) : NULL;
  share->max_bytes = log->max_bytes / FB_LOG_SHARE_PART;
  share->on_full = on_full;
  share->on_full_data = on_full_data;
  if (session != NULL)
    {
      g_string_append (label, "\"session\":");
      fb_json_append_string (label, session);
      g_string_append_c (label, ',');
    }
  if (process != NULL)
    {
      g_string_append (label, "\"process\":");
      fb_json_append_string (label, process);
      g_string_append_c (label, ',');
    }
  share->label = g_string_free (label, FALSE);
  return share;
}

static FbAccessShare *
share_open (FbAccessLog *log, FbAccessShare *share)
{
  g_mutex_lock (&log->writer_lock);
  if (log->is_open)
    g_ptr_array_add (log->shares, share);
  else
    share->closed = TRUE;
  g_mutex_unlock (&log->writer_lock);
  return share;
}

FbAccessShare *
fb_access_log_share_new (FbAccessLog *log, FbAccessShare *parent, const char *session, const char *process,
                         FbAccessLogFullFunc on_full, gpointer on_full_data)
{
  return share_open (log, share_new (log, parent, session, process, on_full, on_full_data));
}

FbAccessShare *
fb_access_log_group_share_new (FbAccessLog *log, const char *session, FbAccessLogFullFunc on_full,
                               gpointer on_full_data)
{
  FbAccessShare *share = share_new (log, NULL, session, NULL, on_full, on_full_data);

  /* room for a member's share and its margin, so that one process alone
   * is stopped at its own share, as before there were groups */
  share->max_bytes += 2 * SHARE_SLACK (share->max_bytes);
  share->group = TRUE;
  return share_open (log, share);
}

FbAccessSink *
fb_access_share_get_sink (FbAccessShare *share)
{
  return &share->sink;
}

guint64
fb_access_share_get_max_bytes (FbAccessShare *share)
{
  guint64 max;

  g_mutex_lock (&share->log->writer_lock);
  max = share->full ? share->reached_at : share->max_bytes;
  g_mutex_unlock (&share->log->writer_lock);
  return max;
}

gboolean
fb_access_share_is_full (FbAccessShare *share, guint64 *ret_not_written)
{
  gboolean full;

  g_mutex_lock (&share->log->writer_lock);
  full = share->full;
  if (ret_not_written != NULL)
    *ret_not_written = share->not_written;
  g_mutex_unlock (&share->log->writer_lock);
  return full;
}

void
fb_access_share_close (FbAccessShare *share)
{
  FbAccessLog *log = share->log;

  g_mutex_lock (&log->writer_lock);
  if (!share->closed && log->is_open)
    {
      /* its records still queued first, and its open folds (a count of
       * refusals repeated until its end), so that the notice is its last
       * and its owner's end comes after all of them */
      write_queued (log, FALSE);
      for (GList *l = log->fold_order.head; l != NULL;)
        {
          Fold *f = l->data;

          l = l->next;
          if (f->share == share)
            close_fold (log, f);
        }
      schedule_folds (log);
      close_share (log, share);
      flush_outputs (log);
    }
  share->closed = TRUE;
  share->on_full = NULL;
  g_mutex_unlock (&log->writer_lock);
  /* and to the subscribers now, before what the owner says next */
  if (on_loop_thread (log))
    fb_log_subscribers_deliver (log->subscribers);
}

static void
share_clear (FbAccessShare *share)
{
  g_free (share->label);
  g_clear_pointer (&share->parent, fb_access_share_unref);
}

FB_DEFINE_REF_UNREF (fb_access_share, FbAccessShare, share_clear)
