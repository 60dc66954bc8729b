/* fusebox — reading an access log back: `fusebox log`, `fusebox report`.
 *
 * A log is its rotated files (STEM.<first>-<last>[.<n>].jsonl, in the order
 * written: fb_log_list_rotated) followed by the live STEM.jsonl.  Lines are parsed one by one with
 * json-glib; a line that isn't a JSON object is reported and skipped, and a
 * file that ends without a newline (the daemon died mid-write) has its last
 * line reported as truncated, never fatal.
 *
 * Follow mode (`tail -F`): the live file is read through one descriptor; at
 * its end the reader compares the path's inode with the descriptor's.  A
 * follower that starts while the live name holds no file of the owner's
 * follows the newest rotated file the same way.  When
 * the writer rotated, the old descriptor is drained (the writer flushed and
 * fsync'ed it before the rename), then every rotated file whose first seq
 * lies beyond the last one read (two rotations between polls leave one we
 * never had open), then the new live file.  Until a live file of the log's
 * owner is there, the old descriptor is followed on: the writer writes on
 * in the renamed file when it can't make a new one of its own (another
 * user may take the free name in that instant).  Two runs writing one log
 * at once each rename the live file the other writes in, and the other
 * writes on in it under its rotated name: a follower looks at the rotated
 * files it read (at each end of the live file and each listing:
 * queue_grown), reads one that grew on from where it stopped (ReadTo), and
 * comes back to the live file where it left it; another file at a name it
 * read is read from its start, and a live file cut in place is read again
 * from its start (cut_in_place).  (run, seq) de-duplicates what could be
 * read twice; a run's seqs missing are said once all there was has been
 * read (say_hole), never when a record jumps past them: a file read later
 * may hold them.  What a follower remembers of the rotated files (read,
 * skipped) is kept only for the names the directory still holds.  A reader that ends lists the rotated
 * files again only a few times (RELIST_MAX): names that keep coming must
 * not keep it reading.
 *
 * Every file is opened as ipc-readback.c opens fusebox's files: a regular
 * file, never through a symbolic link, never blocking (a FIFO or a device
 * in a log's place is refused, naming the path and what it is).  A file is
 * read only when it belongs to the log's owner: the writer refuses another
 * user's file, and one dropped beside a log in a shared directory (or at
 * the live name while it is free: before the first run, or between a
 * rotation's rename and the new file) would otherwise show its records as
 * the log's, or, with the log's run and higher seqs, have the real ones
 * dropped as duplicates.  The owner is ours when any of the log's files is
 * ours (no other user can make a file ours), else the one owner of all of
 * them (another user's log, read by root), else ours; files of several
 * other users are refused, naming them (log_owner).  A file of another owner, and
 * anything at a rotated name that is not a regular file on its directory's
 * filesystem, is skipped with a warning (FB_LOG_READ_SKIPPED) naming it.
 * Names are looked at only through what the kernel holds (fb_lstat_cached,
 * fb_open_path_on_dir_fs): another user's FUSE filesystem mounted at the
 * live name or a rotated one, whose server need never answer, is not
 * asked.  They are looked up in the log's directory as the reader's start
 * found it (open_dir), never through its path again: a follower of a log
 * in another user's directory, which that user swaps for a link into such
 * a filesystem, follows on in the directory it opened.  And every
 * line survives: one longer than MAX_LINE, one holding a NUL byte, one
 * nested deeper than FB_JSON_READ_DEPTH_MAX (json-glib recurses per level)
 * or not JSON is skipped and counted (bad_lines), never fatal.
 *
 * Single-threaded; the caller polls. */
#include "ipc/ipc-private.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* How many listings of the rotated files may add some, in a reader that
 * ends: the first, and rotations while it reads. */
#define RELIST_MAX 16

/* How often a follower walks its directory's path again, to say when it
 * leads elsewhere. */
#define DIR_LOOK_US (2 * G_USEC_PER_SEC)

/* A line longer than this is not ours: skipped as bad, so that a corrupt
 * file can't make the reader allocate without bound. */
#define MAX_LINE (4 * 1024 * 1024)

/* How many of a file's first bytes tell it from another file given its
 * inode number: a record's first bytes are its time, run and seq. */
#define HEAD_BYTES 128

/* A follower with more rotated files read than this looks at their sizes
 * once a second at most, not at every end of the live file. */
#define GROWN_LOOK_MANY 256
#define GROWN_LOOK_US G_USEC_PER_SEC

/* How many times a reader that ends goes back to rotated files that grew
 * while it read: files their owner keeps growing must not keep it
 * reading (each time it opens the live file again too: below RELIST_MAX,
 * which bounds that). */
#define GROWN_READS_MAX (RELIST_MAX / 2)

/* In FbLogReader.lines, a line that held a NUL byte (its text would end
 * there: what follows could not be seen).  Never freed. */
static char nul_line[] = "";

static void
line_free (gpointer line)
{
  if (line != nul_line)
    g_free (line);
}

/* --- records ------------------------------------------------------------- */

void
fb_log_record_free (FbLogRecord *record)
{
  if (record == NULL)
    return;
  g_free (record->line);
  if (record->root != NULL)
    json_node_unref (record->root);
  g_free (record->file);
  g_free (record);
}

/* --- the reader ------------------------------------------------------------ */

/* Where the reading of a file stopped: read again from there when it
 * grows (another run writes on in it), or when the reader comes back to it
 * (the live file, left to read a rotated file that grew). */
typedef struct
{
  dev_t dev;
  ino_t ino;
  off_t size; /* how much of it was read (a torn last line included) */
  struct timespec mtime;
  off_t offset; /* the end of its last complete line */
  guint64 line_no;
  char head[HEAD_BYTES]; /* its first bytes: not another file given its inode number */
  size_t head_len;
} ReadTo;

/* The seqs of a run returned, and how far its holes were said: a hole
 * is said once everything there was has been read (say_hole). */
typedef struct
{
  FbSeqSet *set;
  guint64 said_to; /* holes beginning at or below this were said (or were none) */
  gboolean grew;   /* in FbLogReader.grew */
} RunSeqs;

static void
run_seqs_free (gpointer p)
{
  RunSeqs *rs = p;

  fb_seq_set_free (rs->set);
  g_free (rs);
}

struct FbLogReader
{
  char *live_path;
  int dir_fd; /* its directory, as the walk at the start found it (O_PATH) */
  gboolean follow;
  gboolean single_file;   /* LOG_PATH was a rotated file: read it alone */
  gboolean done;          /* not following: the live file has been read */
  uid_t owner;            /* the log's (log_owner) */
  gboolean owner_known;   /* log_owner has decided it */
  GHashTable *runs_known; /* rotated files to read (paths) -> RunKnown* */
  dev_t foreign_dev;      /* the live file skipped as another's: not warned of again */
  ino_t foreign_ino;

  guint lists_adding;      /* listings of the rotated files that added some */
  gboolean relist_capped;  /* RELIST_MAX reached: not looked for any more */
  guint live_skips;        /* the live name skipped as another's (a reader that ends) */
  guint live_opens;        /* the live name opened (a reader that ends) */
  gboolean dir_gone_told;  /* a follower: the directory's removal said (FB_LOG_READ_NOTE) */
  gboolean dir_moved_told; /* a follower: the path no longer leading to it said */
  gint64 dir_looked_us;    /* a follower: when the path was last walked (monotonic) */
  gboolean capped_told;    /* a reader that ends: RELIST_MAX said, at its end (FB_LOG_READ_NOTE) */
  ReadTo read_live[8];     /* the last live files read to their end and renamed away */
  guint read_live_next;
  GHashTable *read_to;    /* rotated files read (path, as last listed) -> ReadTo* */
  ReadTo live_left;       /* the live file, left to read a rotated file that grew */
  gint64 grown_looked_us; /* a follower: when read_to's files were last looked at (monotonic) */
  guint grown_reads;      /* a reader that ends: times it went back to files that grew (queue_grown) */
  gboolean grown_none;    /* a follower: queue_grown found none grown since the last record read */
  GQueue pending;         /* rotated files still to read (char* paths), in order */
  GHashTable *seen;       /* rotated files queued once (paths, as last listed): never twice */
  GHashTable *skipped;    /* rotated files skipped (path -> Identity, as last listed) */

  int fd;
  char *file;       /* path of fd's file */
  gboolean is_live; /* fd was opened as the live file */
  gboolean drained; /* the live file was seen replaced and read to its end again */
  dev_t dev;
  ino_t ino;
  off_t offset;     /* where fd's next read starts */
  off_t limit;      /* a reader that ends: fd is read up to here, no further */
  gboolean resumed; /* fd was opened where an earlier reading of it stopped (ReadTo) */
  gsize torn;       /* bytes of a last line said incomplete, not read again until it grows */
  off_t torn_at;    /* a follower: 1 + where a last line it said incomplete starts (0: none) */
  gboolean at_end;  /* the last read of fd found its end */
  /* a follower at the end of a rotated file it found the newest of the
   * log's: so it holds until newest_look_us (monotonic), when it looks
   * for a newer one again */
  gboolean newest;
  gint64 newest_look_us;
  char head[HEAD_BYTES]; /* a follower: fd's first bytes, as first seen (cut_in_place) */
  size_t head_len;
  guint64 line_no;
  GString *partial;  /* bytes after the last newline read */
  gboolean skipping; /* inside an over-long line: drop until its newline */
  GQueue lines;      /* complete lines read ahead (char*, NULL = over-long) */
  GQueue line_nos;   /* their line numbers */

  GHashTable *seqs; /* run (or "") -> RunSeqs*: the seqs returned */
  GPtrArray *grew;  /* runs (keys of seqs) returned a seq since their holes were looked for */
  FbLogReaderStats stats;
};

/* The name of PATH (the live file, or a rotated one listed beside it) in
 * the log's directory, where it is looked up: that directory's path is
 * never walked again (another user's, it may be a link into their silent
 * FUSE filesystem by the next look). */
static const char *
leaf (const char *path)
{
  const char *slash = strrchr (path, '/');

  return slash != NULL ? slash + 1 : path;
}

/* Is PATH the file we read to its end as the live one, since renamed?
 * The same file as it was then, or that file grown since (another run
 * writes on in it, or wrote between our last read and the rename: it is
 * read again where we stopped, once its first bytes show it is that file;
 * ReadTo). */
static const ReadTo *
was_read_as_live (FbLogReader *r, const char *path)
{
  struct stat st;

  if (fb_lstat_cached (r->dir_fd, leaf (path), &st) < 0 || !S_ISREG (st.st_mode))
    return NULL;
  for (guint i = 0; i <= G_N_ELEMENTS (r->read_live); i++)
    {
      /* (and the live file left for a while, renamed since) */
      const ReadTo *t = i < G_N_ELEMENTS (r->read_live) ? &r->read_live[i] : &r->live_left;

      if (t->ino == 0 || t->dev != st.st_dev || t->ino != st.st_ino)
        continue;
      if (t->size == st.st_size && t->mtime.tv_sec == st.st_mtim.tv_sec && t->mtime.tv_nsec == st.st_mtim.tv_nsec)
        return t;
      if (st.st_size > t->size)
        return t;
    }
  return NULL;
}

/* Where reading FD (r->file, opened as FILE) stopped: *TO. */
static void
read_to_set (FbLogReader *r, ReadTo *to)
{
  struct stat st;
  ssize_t n;

  memset (to, 0, sizeof *to);
  if (fstat (r->fd, &st) < 0)
    return;
  to->dev = st.st_dev;
  to->ino = st.st_ino;
  to->size = r->offset; /* what was looked at: more than that, more to read */
  to->mtime = st.st_mtim;
  /* a line said incomplete (or still being written) is read again from
   * its start: the writer may complete it */
  to->offset = r->offset - (off_t)r->partial->len - (off_t)r->torn;
  to->line_no = r->line_no - (r->torn > 0 ? 1 : 0);
  do
    n = pread (r->fd, to->head, sizeof to->head, 0);
  while (n < 0 && errno == EINTR);
  to->head_len = n > 0 ? (size_t)n : 0;
}

/* FD (attributes ST) just opened: is it the file TO says, where the
 * reading stopped?  Then read on from there. */
static bool
resume_at (FbLogReader *r, int fd, const struct stat *st, const ReadTo *to)
{
  char head[HEAD_BYTES];
  ssize_t n;

  if (to == NULL || to->ino == 0 || to->dev != st->st_dev || to->ino != st->st_ino || st->st_size < to->offset ||
      to->offset <= 0)
    return false;
  do
    n = pread (fd, head, to->head_len, 0);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)to->head_len || memcmp (head, to->head, to->head_len) != 0)
    return false;
  if (lseek (fd, to->offset, SEEK_SET) != to->offset)
    return false;
  r->offset = to->offset;
  r->line_no = to->line_no;
  return true;
}

/* A file skipped at a rotated name: while the same file is there, it is
 * not queued (nor warned of) again. */
typedef struct
{
  dev_t dev;
  ino_t ino;
  dev_t dir_dev;         /* its directory's */
  gboolean owners;       /* it was a regular file of the log's owner there */
  struct timespec ctime; /* its change time then */
} Identity;

/* Is PATH's attributes ST a regular file of the log's owner on the
 * filesystem of its directory (whose device is DIR_DEV)? */
static bool
owners_file (FbLogReader *r, const struct stat *st, dev_t dir_dev)
{
  return S_ISREG (st->st_mode) && st->st_uid == r->owner && st->st_dev == dir_dev;
}

/* Is what is at PATH still the file skipped there (R->skipped)?  Not once
 * it is a regular file of the log's owner on its directory's filesystem,
 * unless it was one already, unchanged since (a file of the owner's the
 * reader can't open: tried at each listing, a follower spun on it):
 * another user's file can't become the owner's (a mount there shows
 * another device), and its inode number may be given to the owner's next
 * (made later: another change time), as it may be when the owner's is
 * removed. */
static bool
still_skipped (FbLogReader *r, const char *path)
{
  Identity *id = g_hash_table_lookup (r->skipped, path);
  struct stat st;

  if (id == NULL || fb_lstat_cached (r->dir_fd, leaf (path), &st) < 0 || st.st_dev != id->dev || st.st_ino != id->ino)
    return false;
  if (!owners_file (r, &st, id->dir_dev))
    return true;
  return id->owners && st.st_ctim.tv_sec == id->ctime.tv_sec && st.st_ctim.tv_nsec == id->ctime.tv_nsec;
}

/* Keep of TABLE's paths only those LISTED (the rotated files' paths) has:
 * what a follower, which may run for months, remembers is bounded by what
 * the directory holds.  (A reader that ends keeps every name it saw, so
 * that no name is read twice.) */
static void
keep_listed (GHashTable *table, GHashTable *listed)
{
  GHashTableIter it;
  gpointer path;

  g_hash_table_iter_init (&it, table);
  while (g_hash_table_iter_next (&it, &path, NULL))
    if (!g_hash_table_contains (listed, path))
      g_hash_table_iter_remove (&it);
}

/* --- each run's rotated files in the order of its seqs ------------------- */

/* How much of a rotated file is read at a time, and the longest line
 * looked at: a record is a few hundred bytes, one with the longest names a
 * few kilobytes. */
#define RUN_CHUNK (64 * 1024)

/* The run ("" for none: the key parse_line counts its seqs under) and seq
 * of the record LEN bytes of TEXT hold; false when they are no record. */
static bool
line_run_seq (const char *text, size_t len, char **ret_run, guint64 *ret_seq)
{
  g_autoptr (JsonParser) parser = json_parser_new_immutable ();
  gboolean too_deep;
  JsonNode *root, *run, *seq;
  JsonObject *o;

  /* json-glib recurses per level (parse_line) */
  if (memchr (text, '\0', len) != NULL || !fb_json_is_plain (text, len, FB_JSON_READ_DEPTH_MAX, &too_deep) ||
      !json_parser_load_from_data (parser, text, (gssize)len, NULL))
    return false;
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return false;
  o = json_node_get_object (root);
  run = json_object_get_member (o, "run");
  seq = json_object_get_member (o, "seq");
  if (run != NULL && (!JSON_NODE_HOLDS_VALUE (run) || json_node_get_value_type (run) != G_TYPE_STRING))
    return false;
  if (seq == NULL || !JSON_NODE_HOLDS_VALUE (seq) || json_node_get_value_type (seq) != G_TYPE_INT64 ||
      json_node_get_int (seq) <= 0)
    return false;
  *ret_run = g_strdup (run != NULL ? json_node_get_string (run) : "");
  *ret_seq = (guint64)json_node_get_int (seq);
  return true;
}

/* What order_runs knew of a rotated file, while it is the same file. */
typedef struct
{
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
  char *run; /* one_run_of's answer */
} RunKnown;

static void
run_known_free (gpointer p)
{
  RunKnown *k = p;

  g_free (k->run);
  g_free (k);
}

/* Is the line TEXT (LEN bytes) the record of run *RUN (NULL: the first
 * line, which sets it) with seq SEQ?  The first is parsed; the others
 * must hold "run":RUN,"seq":SEQ as the first does (the run a plain
 * string: a quote in a JSON text outside a string is structure, so these
 * bytes are that record's members). */
static bool
line_is_of (const char *text, size_t len, char **run, guint64 seq)
{
  g_autofree char *needle = NULL;
  const char *at;

  if (*run == NULL)
    {
      guint64 got = 0;

      if (!line_run_seq (text, len, run, &got))
        return false;
      /* records without a run, or a run that JSON escapes: not looked into */
      return got == seq && **run != '\0' && strpbrk (*run, "\"\\") == NULL;
    }
  needle = g_strdup_printf ("\"run\":\"%s\",\"seq\":%" G_GUINT64_FORMAT, *run, seq);
  at = memmem (text, len, needle, strlen (needle));
  return at != NULL && at + strlen (needle) < text + len && (at[strlen (needle)] == ',' || at[strlen (needle)] == '}');
}

/* The one run whose records FD (a regular file, ST its attributes, named
 * NAME) holds, when it holds just the seqs its name says and nothing
 * else: line by line, the records of one run with the seqs from NAME's
 * first to its last.  NULL otherwise: a line no record, another run's
 * record among them (a run that went on in the live file another left
 * begins with the other's; when two runs write one log at once, each
 * names the file it renames after its own seqs, and the other may write
 * on in it), a seq missing or out of place. */
static char *
one_run_read (int fd, const struct stat *st, const FbRotatedFile *name)
{
  g_autofree char *buf = g_malloc (RUN_CHUNK);
  g_autoptr (GString) line = g_string_new (NULL);
  g_autofree char *run = NULL;
  guint64 next = name->first_seq;
  off_t off = 0;

  if (st->st_size < 2 || name->last_seq < name->first_seq)
    return NULL;
  while (off < st->st_size)
    {
      size_t want = st->st_size - off < RUN_CHUNK ? (size_t)(st->st_size - off) : RUN_CHUNK;
      ssize_t n;

      do
        n = pread (fd, buf, want, off);
      while (n < 0 && errno == EINTR);
      /* (a hole reads as NULs: refused, and its file read no further) */
      if (n != (ssize_t)want || memchr (buf, '\0', want) != NULL)
        return NULL;
      for (const char *p = buf, *end = buf + want; p < end;)
        {
          const char *nl = memchr (p, '\n', (size_t)(end - p));
          size_t len = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);

          if (line->len + len > RUN_CHUNK)
            return NULL;
          g_string_append_len (line, p, (gssize)len);
          if (nl == NULL)
            break;
          if (next > name->last_seq || !line_is_of (line->str, line->len, &run, next))
            return NULL;
          next++;
          g_string_truncate (line, 0);
          p = nl + 1;
        }
      off += (off_t)want;
    }
  if (line->len > 0 || next != name->last_seq + 1)
    return NULL;
  return g_steal_pointer (&run);
}

/* one_run_read of PATH, a rotated file of the log's owner (opened as
 * open_file opens it; NULL for anything else), read once while it is the
 * same file. */
static char *
one_run_of (FbLogReader *r, const char *path, const FbRotatedFile *name)
{
  g_autoptr (GError) local_error = NULL;
  _fb_cleanup_fd_ int fd = fb_ipc_open_regular (r->dir_fd, leaf (path), path, "the access log", &local_error);
  RunKnown *known;
  struct stat st;

  if (fd < 0 || fstat (fd, &st) < 0 || st.st_uid != r->owner)
    return NULL;
  known = g_hash_table_lookup (r->runs_known, path);
  if (known == NULL || known->dev != st.st_dev || known->ino != st.st_ino || known->size != st.st_size ||
      known->mtime.tv_sec != st.st_mtim.tv_sec || known->mtime.tv_nsec != st.st_mtim.tv_nsec)
    {
      known = g_new0 (RunKnown, 1);
      known->dev = st.st_dev;
      known->ino = st.st_ino;
      known->size = st.st_size;
      known->mtime = st.st_mtim;
      known->run = one_run_read (fd, &st, name);
      g_hash_table_replace (r->runs_known, g_strdup (path), known);
    }
  return g_strdup (known->run);
}

static int
seqs_cmp (const void *a, const void *b)
{
  return fb_log_rotated_seqs_cmp (a, b);
}

/* The rotated files still to read come in the order written, by their
 * time (fb_log_list_rotated); a clock set back between two rotations of
 * one run puts its later file first, and the reader would say the records
 * between them were missing, then show them.  So when one of the owner's
 * files to read is named with lower seqs than one before it (one run's
 * order broken, or two runs writing one log), and every one of the
 * owner's files to read holds one run's records and nothing else
 * (one_run_of), they are put in the order of their seqs, each run's in the
 * places its files had, another run's keeping theirs.  When one holds
 * more (a run that went on in the live file another left, two runs
 * writing at once), or is not known, none is moved: sorted around it, a
 * run's files would pass records of that run it holds, and the reader
 * would say records were missing that are not. */
static void
order_runs (FbLogReader *r)
{
  guint len = g_queue_get_length (&r->pending), i = 0;
  g_autofree FbRotatedFile *files = NULL;
  g_autofree GList **nodes = NULL;
  g_autoptr (GHashTable) runs = NULL; /* run -> GArray of indexes */
  guint64 top = 0;
  bool inverted = false;
  GHashTableIter it;
  gpointer value;

  if (len < 2 || r->single_file)
    return;
  files = g_new0 (FbRotatedFile, len);
  nodes = g_new0 (GList *, len);
  for (GList *l = r->pending.head; l != NULL; l = l->next, i++)
    {
      nodes[i] = l;
      if (!fb_log_rotated_name_parse (r->live_path, l->data, &files[i]))
        continue;
      files[i].path = l->data;
      inverted = inverted || files[i].last_seq < top;
      top = MAX (top, files[i].first_seq);
    }
  /* what is known of files no longer to read is forgotten */
  if (g_hash_table_size (r->runs_known) > 0)
    {
      g_autoptr (GHashTable) still = g_hash_table_new (g_str_hash, g_str_equal);

      for (GList *l = r->pending.head; l != NULL; l = l->next)
        g_hash_table_add (still, l->data);
      g_hash_table_iter_init (&it, r->runs_known);
      while (g_hash_table_iter_next (&it, &value, NULL))
        if (!g_hash_table_contains (still, value))
          g_hash_table_iter_remove (&it);
    }
  if (!inverted)
    return;
  /* the same among the owner's files (what the kernel holds): another
   * user's names do not make the owner's files read */
  inverted = false;
  top = 0;
  for (i = 0; i < len; i++)
    {
      struct stat st;

      if (files[i].path == NULL)
        continue;
      if (fb_lstat_cached (r->dir_fd, leaf (files[i].path), &st) < 0 || !S_ISREG (st.st_mode) || st.st_uid != r->owner)
        {
          files[i].path = NULL;
          continue;
        }
      inverted = inverted || files[i].last_seq < top;
      top = MAX (top, files[i].first_seq);
    }
  if (!inverted)
    return;
  runs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
  for (i = 0; i < len; i++)
    {
      char *run;
      GArray *at;

      if (files[i].path == NULL)
        continue;
      /* one file of the owner's holding more than one run's records, and
       * none is moved: sorted around it, one run's files would pass
       * records of theirs it holds (a run that went on in the live file
       * another left, two runs writing at once) */
      run = one_run_of (r, files[i].path, &files[i]);
      if (run == NULL)
        return;
      at = g_hash_table_lookup (runs, run);
      if (at == NULL)
        {
          at = g_array_new (FALSE, FALSE, sizeof (guint));
          g_hash_table_insert (runs, run, at);
        }
      else
        g_free (run);
      g_array_append_val (at, i);
    }
  g_hash_table_iter_init (&it, runs);
  while (g_hash_table_iter_next (&it, NULL, &value))
    {
      GArray *at = value;
      g_autofree FbRotatedFile *sorted = g_new (FbRotatedFile, at->len);

      for (guint k = 0; k < at->len; k++)
        sorted[k] = files[g_array_index (at, guint, k)];
      qsort (sorted, at->len, sizeof *sorted, seqs_cmp);
      for (guint k = 0; k < at->len; k++)
        nodes[g_array_index (at, guint, k)]->data = sorted[k].path;
    }
}

/* Is PATH among the rotated files still to read? */
static bool
is_pending (FbLogReader *r, const char *path)
{
  for (GList *l = r->pending.head; l != NULL; l = l->next)
    if (strcmp (l->data, path) == 0)
      return true;
  return false;
}

/* Queue again, first, the rotated files read that have grown since.  Two
 * runs writing one log at once each rename the live file the other writes
 * in, and the other writes on in it under its rotated name (ipc-log-file.c,
 * rotate), after the reader may have read it to its end: a follower's
 * records would never be shown, and a reader that ends would say them
 * missing.  Looked at by what the kernel holds: the same file of the
 * owner's, larger than when read, or changed.  Another file at the name
 * (the log removed and written again, a name made again before a follower
 * listed the directory) is read from its start.  A reader that ends goes
 * back GROWN_READS_MAX times at most, then says it may not have shown
 * everything (relist_capped).  Returns how many. */
static guint
queue_grown (FbLogReader *r)
{
  GHashTableIter it;
  gpointer path, value;
  guint added = 0;

  if (g_hash_table_size (r->read_to) == 0)
    {
      r->grown_none = TRUE;
      return 0;
    }
  r->grown_looked_us = g_get_monotonic_time ();
  g_hash_table_iter_init (&it, r->read_to);
  while (g_hash_table_iter_next (&it, &path, &value))
    {
      ReadTo *to = value;
      g_autofree char *name = NULL;
      struct stat st;

      if (r->file != NULL && strcmp (r->file, path) == 0)
        continue;
      if (fb_lstat_cached (r->dir_fd, leaf (path), &st) < 0 || !S_ISREG (st.st_mode) || st.st_uid != r->owner)
        continue;
      if (st.st_dev == to->dev && st.st_ino == to->ino && st.st_size == to->size &&
          st.st_mtim.tv_sec == to->mtime.tv_sec && st.st_mtim.tv_nsec == to->mtime.tv_nsec)
        continue;
      if (is_pending (r, path))
        continue;
      if (!r->follow && r->grown_reads >= GROWN_READS_MAX)
        {
          r->relist_capped = TRUE;
          break;
        }
      name = g_strdup (path);
      /* (resume_at tells the same file grown from another by its first
       * bytes; one smaller than what was read, or on another inode, is
       * another) */
      if (st.st_dev != to->dev || st.st_ino != to->ino || st.st_size < to->size)
        g_hash_table_iter_remove (&it);
      g_queue_push_head (&r->pending, g_steal_pointer (&name));
      added++;
    }
  if (added > 0 && !r->follow)
    r->grown_reads++;
  if (added == 0)
    r->grown_none = TRUE;
  return added;
}

/* Queue the rotated files not queued before.  The writer never renames a
 * rotated file again, so a name read is not read twice (but read on in,
 * once grown: queue_grown); a name skipped
 * (another user's file, or no regular file) is remembered as that file:
 * removed, its name may be the writer's next rotated file. */
static gboolean
queue_rotated (FbLogReader *r, guint *ret_added, GError **error)
{
  g_autoptr (GPtrArray) rotated = fb_log_list_rotated_settled_at (r->dir_fd, r->live_path, error);
  g_autoptr (GHashTable) listed = g_hash_table_new (g_str_hash, g_str_equal);
  guint added = 0;

  if (rotated == NULL)
    return FALSE;
  if (ret_added != NULL)
    *ret_added = 0;
  /* A reader that ends looks again only a few times: a rotation while it
   * reads adds a file or two, and names that keep coming (someone making
   * one after another) must not keep it reading. */
  if (!r->follow && r->lists_adding >= RELIST_MAX)
    {
      r->relist_capped = TRUE;
      return TRUE;
    }
  for (guint i = 0; i < rotated->len; i++)
    g_hash_table_add (listed, ((FbRotatedFile *)rotated->pdata[i])->path);
  if (r->follow)
    {
      keep_listed (r->seen, listed);
      keep_listed (r->skipped, listed);
      keep_listed (r->read_to, listed);
    }
  for (guint i = 0; i < rotated->len; i++)
    {
      FbRotatedFile *f = rotated->pdata[i];
      const ReadTo *read;

      /* (still remembered above: only its reading waits) */
      if (f->later)
        continue;
      if (g_hash_table_contains (r->seen, f->path))
        continue;
      if (still_skipped (r, f->path))
        continue;
      g_hash_table_remove (r->skipped, f->path);
      /* The file we were reading as the live one, under its rotated name:
       * already read to its end.  Known by what it is, not by its name's
       * seqs: the next run's first rotated file has seqs below ours. */
      if ((read = was_read_as_live (r, f->path)) != NULL)
        {
          g_hash_table_add (r->seen, g_strdup (f->path));
          /* grown since: read on in it with the others that grew
           * (queue_grown, below) */
          g_hash_table_replace (r->read_to, g_strdup (f->path), g_memdup2 (read, sizeof *read));
          continue;
        }
      g_hash_table_add (r->seen, g_strdup (f->path));
      g_queue_push_tail (&r->pending, g_strdup (f->path));
      added++;
    }
  if (added > 0)
    r->lists_adding++;
  added += queue_grown (r);
  if (added > 0 && r->owner_known)
    order_runs (r);
  if (ret_added != NULL)
    *ret_added = added;
  return TRUE;
}

static gboolean
is_rotated_name (const char *base)
{
  return g_regex_match_simple ("\\.[0-9]+-[0-9]+(\\.[0-9]+)?\\.jsonl$", base, 0, 0);
}

/* Is PATH (in the log's directory) a regular file on that directory's
 * filesystem?  *RET_ST its stat, from what the kernel holds.  A mount at
 * the name is not: the root of another user's FUSE filesystem over a file,
 * never answered, shows as root's regular file, and would make root's
 * reader take the log for root's. */
static bool
regular_on_dir_fs (FbLogReader *r, const char *path, struct stat *ret_st)
{
  _fb_cleanup_fd_ int fd = fb_open_path_on_dir_fs (r->dir_fd, leaf (path), ret_st);

  return fd >= 0 && S_ISREG (ret_st->st_mode);
}

/* Whose log R is (the top of this file): ours when the live file or a
 * queued rotated file is ours, else the one owner of them all; none, ours.
 * Files of several others: nobody can tell whose log it is (another user
 * may have taken the free live name, or put rotated names beside it), and
 * it is refused, saying whose files are there. */
static bool
log_owner (FbLogReader *r, uid_t *ret_owner, GError **error)
{
  uid_t me = geteuid ();
  g_autoptr (GArray) uids = g_array_new (FALSE, FALSE, sizeof (uid_t));
  g_autoptr (GString) listed = g_string_new (NULL);
  struct stat st;
  bool several = false;

  if (regular_on_dir_fs (r, r->live_path, &st))
    g_array_append_val (uids, st.st_uid);
  for (GList *l = r->pending.head; l != NULL; l = l->next)
    if (regular_on_dir_fs (r, l->data, &st))
      g_array_append_val (uids, st.st_uid);
  *ret_owner = uids->len > 0 ? g_array_index (uids, uid_t, 0) : me;
  for (guint i = 0; i < uids->len; i++)
    {
      uid_t uid = g_array_index (uids, uid_t, i);

      if (uid == me)
        {
          *ret_owner = me;
          return true;
        }
      several = several || uid != *ret_owner;
    }
  if (!several)
    return true;
  for (guint i = 0; i < uids->len; i++)
    {
      uid_t uid = g_array_index (uids, uid_t, i);
      bool dup = false;

      for (guint k = 0; k < i && !dup; k++)
        dup = g_array_index (uids, uid_t, k) == uid;
      if (!dup)
        g_string_append_printf (listed, "%s%u", listed->len > 0 ? ", " : "", (unsigned)uid);
    }
  {
    g_autofree char *dir = g_path_get_dirname (r->live_path);

    g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                 "the files of the log %s belong to several users (uids %s), none of them you: fusebox can't tell "
                 "whose log it is (whoever can write in %s may have put some of them there), and reads none; look "
                 "at them (ls -ln %s), or read one file at a time (fusebox log FILE)",
                 r->live_path, listed->str, dir, dir);
  }
  return false;
}

uid_t
fb_log_reader_get_owner (FbLogReader *r)
{
  return r->owner;
}

/* The log's directory, walked once (another user's FUSE filesystem on
 * the way is refused, not asked) and kept open: every later look, a
 * follower's included, is relative to it. */
static bool
open_dir (FbLogReader *r, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (r->live_path);

  if (*leaf (r->live_path) == '\0')
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID, "%s names a directory, not an access log", r->live_path);
      return false;
    }
  r->dir_fd = fb_path_open_not_foreign_fuse (
    dir, "the access log's directory", "fusebox does not read a log there: copy it to a directory of yours", error);
  if (r->dir_fd == -2)
    g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND, "no access log at %s: its directory %s is not there",
                 r->live_path, dir);
  return r->dir_fd >= 0;
}

FbLogReader *
fb_log_reader_new (const char *log_path, gboolean follow, GError **error)
{
  g_autoptr (FbLogReader) r = g_new0 (FbLogReader, 1);
  g_autofree char *base = g_path_get_basename (log_path);
  struct stat st;

  r->fd = -1;
  r->dir_fd = -1;
  r->follow = follow;
  r->live_path = g_strdup (log_path);
  r->partial = g_string_new (NULL);
  r->seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  r->skipped = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  r->seqs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, run_seqs_free);
  r->grew = g_ptr_array_new ();
  r->runs_known = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, run_known_free);
  r->read_to = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_queue_init (&r->pending);
  g_queue_init (&r->lines);
  g_queue_init (&r->line_nos);
  r->owner = geteuid ();
  if (!open_dir (r, error))
    return NULL;

  /* A rotated file named directly: just that file (it no longer changes). */
  if (is_rotated_name (base))
    {
      _fb_cleanup_fd_ int fd = fb_ipc_open_regular (r->dir_fd, leaf (log_path), log_path, "the access log", error);

      if (fd < 0)
        return NULL;
      r->single_file = TRUE;
      r->follow = FALSE;
      g_queue_push_tail (&r->pending, g_strdup (log_path));
      return g_steal_pointer (&r);
    }

  if (!queue_rotated (r, NULL, error))
    return NULL;
  if (!log_owner (r, &r->owner, error))
    return NULL;
  r->owner_known = TRUE;
  order_runs (r);
  /* (anything there is there, and refused when opened) */
  if (!follow && g_queue_is_empty (&r->pending) && fb_lstat_cached (r->dir_fd, leaf (log_path), &st) < 0)
    {
      g_autofree char *dir = g_path_get_dirname (log_path);

      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND,
                   "no access log at %s (and no rotated files beside it in %s)", log_path, dir);
      return NULL;
    }
  return g_steal_pointer (&r);
}

static void
close_current (FbLogReader *r)
{
  fb_fd_close (&r->fd);
  g_clear_pointer (&r->file, g_free);
  g_string_truncate (r->partial, 0);
  r->skipping = FALSE;
  r->line_no = 0;
  r->is_live = FALSE;
  r->drained = FALSE;
  r->offset = 0;
  r->limit = 0;
  r->resumed = FALSE;
  r->torn = 0;
  r->torn_at = 0;
  r->at_end = FALSE;
  r->newest = FALSE;
  r->head_len = 0;
}

void
fb_log_reader_free (FbLogReader *r)
{
  if (r == NULL)
    return;
  close_current (r);
  g_queue_clear_full (&r->pending, g_free);
  g_queue_clear_full (&r->lines, line_free);
  g_queue_clear (&r->line_nos);
  g_string_free (r->partial, TRUE);
  g_hash_table_unref (r->seen);
  g_hash_table_unref (r->skipped);
  g_ptr_array_unref (r->grew);
  g_hash_table_unref (r->seqs);
  g_hash_table_unref (r->runs_known);
  g_hash_table_unref (r->read_to);
  fb_fd_close (&r->dir_fd);
  g_free (r->live_path);
  g_free (r);
}

void
fb_log_reader_get_stats (FbLogReader *r, FbLogReaderStats *ret_stats)
{
  *ret_stats = r->stats;
}

/* A reader that took the log for another user's (none of its files was
 * the caller's at the start) meets a file of the caller's: by the rule of
 * log_owner, no other user can make one, so the log is the caller's from
 * now on (the caller's writer may have started after the reader). */
static void
adopt_if_ours (FbLogReader *r, const struct stat *st)
{
  if (!r->single_file && r->owner != geteuid () && S_ISREG (st->st_mode) && st->st_uid == geteuid ())
    r->owner = geteuid ();
}

/* PATH (attributes ST) is another owner's than the log's. */
static void
set_foreign_error (FbLogReader *r, const char *path, const struct stat *st, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (path);

  g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
               "%s belongs to uid %u, not to uid %u, whose log %s is; skipped: fusebox reads a log's files only "
               "from its owner (whoever can write in %s may have put it there to pass its records off as the "
               "log's): look at it, then remove it",
               path, (unsigned)st->st_uid, (unsigned)r->owner, r->live_path, dir);
}

/* 1 opened, 0 not there (ENOENT), -1 error (anything but a regular file
 * included: a FIFO would block the open, a link would show another file),
 * OPEN_FOREIGN a rotated file of another owner (ERROR says which; not
 * opened). */
#define OPEN_FOREIGN 2
static int
open_file (FbLogReader *r, const char *path, gboolean is_live, GError **error)
{
  g_autoptr (GError) local_error = NULL;
  struct stat st;
  _fb_cleanup_fd_ int fd = fb_ipc_open_regular (r->dir_fd, leaf (path), path, "the access log", &local_error);

  if (fd < 0)
    {
      if (g_error_matches (local_error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND))
        return 0;
      /* a link, a FIFO, another filesystem... at a rotated name: not the
       * writer's (it makes regular files only), and whoever can write in
       * the directory may have put it there; the rest of the log is read */
      if (!is_live && !r->single_file)
        {
          g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID, "%s; skipped, the rest of the log is read",
                       local_error->message);
          return OPEN_FOREIGN;
        }
      g_propagate_error (error, g_steal_pointer (&local_error));
      return -1;
    }
  if (fstat (fd, &st) < 0)
    {
      int errsv = errno;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "can't look at the access log %s: %s", path,
                   g_strerror (errsv));
      return -1;
    }
  adopt_if_ours (r, &st);
  if (!r->single_file && st.st_uid != r->owner)
    {
      if (is_live)
        {
          r->foreign_dev = st.st_dev;
          r->foreign_ino = st.st_ino;
        }
      set_foreign_error (r, path, &st, error);
      return OPEN_FOREIGN;
    }
  close_current (r);
  /* back at a file read in part: on from there */
  r->resumed = resume_at (r, fd, &st, is_live ? &r->live_left : g_hash_table_lookup (r->read_to, path));
  r->fd = fb_steal_fd (&fd);
  r->file = g_strdup (path);
  r->is_live = is_live;
  r->dev = st.st_dev;
  r->ino = st.st_ino;
  /* a reader that ends reads the file as large as it is now: one that
   * grows without end (its owner appending) must not keep it reading */
  r->limit = r->follow ? G_MAXINT64 : st.st_size;
  if (r->resumed)
    return 1;
  r->stats.files++;
  /* fusebox writes a log file under one name only (open_live refuses
   * another): one more was made since, by whoever could write where it
   * is, and through it the records could have been rewritten */
  if (st.st_nlink > 1)
    r->stats.linked++;
  return 1;
}

/* Is one of the rotated files still to read a regular file of the log's
 * owner?  Not, the one being read is the newest of the log's: another
 * user's name after it (skipped when its turn comes) does not make it
 * done. */
static bool
owner_file_pending (FbLogReader *r)
{
  struct stat st;

  for (GList *l = r->pending.head; l != NULL; l = l->next)
    if (regular_on_dir_fs (r, l->data, &st) && st.st_uid == r->owner)
      return true;
  return false;
}

/* The file we followed as the live one was renamed away: is there a new
 * live file of the log's owner?  Until there is, the writer writes on in
 * the renamed file, through its descriptor (ipc-log-file.c, rotate: it
 * refuses a file of another owner, or anything but a regular file, at the
 * name, and may find the name taken in the instant after its rename).
 * 1 yes, or something that is no regular file (opening it refuses it,
 * naming it); 0 not yet; OPEN_FOREIGN another user's file, met for the
 * first time (ERROR says so, as open_file does). */
static int
successor_status (FbLogReader *r, GError **error)
{
  struct stat st;
  _fb_cleanup_fd_ int fd = fb_open_path_on_dir_fs (r->dir_fd, leaf (r->live_path), &st);

  if (fd < 0 && errno == ENOENT)
    return 0;
  if (fd >= 0 && S_ISREG (st.st_mode))
    adopt_if_ours (r, &st);
  if (fd >= 0 && S_ISREG (st.st_mode) && st.st_uid == r->owner)
    return 1;
  /* another user's file, or no regular file: refused by the writer too;
   * said once (what the kernel holds names it: a mount there is not
   * asked) */
  if (fd < 0 && fb_lstat_cached (r->dir_fd, leaf (r->live_path), &st) < 0)
    return 0;
  if (st.st_dev == r->foreign_dev && st.st_ino == r->foreign_ino)
    return 0;
  r->foreign_dev = st.st_dev;
  r->foreign_ino = st.st_ino;
  if (fd >= 0 && S_ISREG (st.st_mode))
    set_foreign_error (r, r->live_path, &st, error);
  else
    {
      g_autoptr (GError) local_error = NULL;
      _fb_cleanup_fd_ int file =
        fb_ipc_open_regular (r->dir_fd, leaf (r->live_path), r->live_path, "the access log", &local_error);

      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                   "%s; skipped: the writer refuses it too, and writes on in %s, which is followed",
                   local_error != NULL ? local_error->message : r->live_path, r->file);
    }
  return OPEN_FOREIGN;
}

/* PATH, a rotated file, was skipped.  A follower remembers the file, not
 * the name: removed, the name may be the writer's next rotated file.  A
 * reader that ends keeps the name, so that nobody can keep it reading by
 * putting one file after another there. */
static void
remember_skipped (FbLogReader *r, const char *path)
{
  struct stat st, dir_st;
  Identity *id;

  if (!r->follow || fb_lstat_cached (r->dir_fd, leaf (path), &st) < 0 || fb_lstat_cached (r->dir_fd, "", &dir_st) < 0)
    return;
  g_hash_table_remove (r->seen, path);
  id = g_new (Identity, 1);
  id->dev = st.st_dev;
  id->ino = st.st_ino;
  id->dir_dev = dir_st.st_dev;
  id->owners = owners_file (r, &st, dir_st.st_dev);
  id->ctime = st.st_ctim;
  g_hash_table_replace (r->skipped, g_strdup (path), id);
}

/* Read what is there and split it into complete lines.  Returns bytes read,
 * 0 at end of file, -1 on error. */
static gssize
fill (FbLogReader *r, GError **error)
{
  char buf[64 * 1024];
  size_t want = sizeof buf;
  ssize_t n;

  if (r->offset >= r->limit)
    return 0;
  if ((guint64)(r->limit - r->offset) < want)
    want = (size_t)(r->limit - r->offset);
  do
    n = read (r->fd, buf, want);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    {
      int errsv = errno;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "reading %s: %s", r->file, g_strerror (errsv));
      return -1;
    }
  r->offset += n;
  /* A log holds no NUL byte, but a hole reads as NULs: a sparse file of
   * terabytes (truncate -s) would keep a reader busy for hours.  The line
   * in a hole is bad whatever follows (it holds a NUL): its hole is
   * skipped to the next data, or to the end. */
  if (n > 0 && buf[n - 1] == '\0')
    {
      off_t data = lseek (r->fd, r->offset, SEEK_DATA);

      if (data < 0 && errno == ENXIO)
        data = lseek (r->fd, 0, SEEK_END);
      if (data > r->offset)
        r->offset = data < r->limit ? data : r->limit;
      if (lseek (r->fd, r->offset, SEEK_SET) < 0)
        {
          int errsv = errno;
          g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "reading %s: %s", r->file, g_strerror (errsv));
          return -1;
        }
    }
  for (ssize_t i = 0; i < n;)
    {
      char *nl = memchr (buf + i, '\n', (size_t)(n - i));
      size_t len = nl != NULL ? (size_t)(nl - (buf + i)) : (size_t)(n - i);

      if (!r->skipping)
        {
          g_string_append_len (r->partial, buf + i, (gssize)len);
          if (r->partial->len > MAX_LINE)
            {
              g_string_truncate (r->partial, 0);
              r->skipping = TRUE;
            }
        }
      if (nl == NULL)
        break;
      r->line_no++;
      g_queue_push_tail (&r->line_nos, GSIZE_TO_POINTER ((gsize)r->line_no));
      /* NULL marks an over-long line for parse_line to report. */
      if (r->skipping)
        g_queue_push_tail (&r->lines, NULL);
      else if (memchr (r->partial->str, '\0', r->partial->len) != NULL)
        g_queue_push_tail (&r->lines, nul_line);
      else
        g_queue_push_tail (&r->lines, g_strndup (r->partial->str, r->partial->len));
      r->skipping = FALSE;
      g_string_truncate (r->partial, 0);
      i += (ssize_t)len + 1;
    }
  return n;
}

/* Leave the live file (r->fd) for rotated files to read first, and keep
 * where it was left: opened again, it is read on from there (resume_at). */
static void
leave_live (FbLogReader *r)
{
  read_to_set (r, &r->live_left);
  close_current (r);
}

/* A follower at the end of what it has read of r->fd: was the file cut
 * in place (shorter than what was read, or other first bytes: written
 * again past where the follower was before it looked)?  Its first bytes
 * are kept when first seen. */
static bool
cut_in_place (FbLogReader *r)
{
  char head[HEAD_BYTES];
  struct stat st;
  ssize_t n;

  if (fstat (r->fd, &st) < 0)
    return false;
  if (st.st_size < r->offset)
    return true;
  do
    n = pread (r->fd, head, sizeof head, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return false;
  if (r->head_len == 0)
    {
      memcpy (r->head, head, (size_t)n);
      r->head_len = (size_t)n;
      return false;
    }
  return (size_t)n < r->head_len || memcmp (head, r->head, r->head_len) != 0;
}

/* Has the live path been replaced (rotated) or removed since we opened it?
 * (What the kernel holds: a link or a mount put in its place replaces it,
 * and is refused when opened; a mount there is not asked.) */
static gboolean
live_replaced (FbLogReader *r)
{
  struct stat st;

  if (fb_lstat_cached (r->dir_fd, leaf (r->live_path), &st) < 0)
    return errno == ENOENT;
  return st.st_dev != r->dev || st.st_ino != r->ino;
}

typedef enum
{
  LINE_RECORD,
  LINE_SKIP,
  LINE_BAD,
} LineResult;

/* json-glib 1.6 turns a lone surrogate escape ("\\udc80", or "\\ud800"
 * before a plain character) into bytes that are not UTF-8; such a record
 * would carry them into reports and re-encoded JSON.  Every string and
 * member name must be valid (depth is bounded by the line length). */
static bool
node_is_utf8 (JsonNode *node)
{
  switch (JSON_NODE_TYPE (node))
    {
      case JSON_NODE_OBJECT:
        {
          JsonObjectIter it;
          const char *name;
          JsonNode *member;
          json_object_iter_init (&it, json_node_get_object (node));
          while (json_object_iter_next (&it, &name, &member))
            if (!g_utf8_validate (name, -1, NULL) || !node_is_utf8 (member))
              return false;
          return true;
        }
      case JSON_NODE_ARRAY:
        {
          JsonArray *a = json_node_get_array (node);
          for (guint i = 0; i < json_array_get_length (a); i++)
            if (!node_is_utf8 (json_array_get_element (a, i)))
              return false;
          return true;
        }
      case JSON_NODE_VALUE:
        return json_node_get_value_type (node) != G_TYPE_STRING ||
               g_utf8_validate (json_node_get_string (node), -1, NULL);
      case JSON_NODE_NULL:
      default:
        return true;
    }
}

static LineResult
parse_line (FbLogReader *r, char *line, guint64 line_no, FbLogRecord **ret_record, GError **error)
{
  g_autoptr (JsonParser) parser = NULL;
  g_autoptr (GError) local_error = NULL;
  g_autoptr (FbLogRecord) rec = NULL;
  JsonNode *root;
  gboolean too_deep;

  if (line == NULL)
    {
      r->stats.bad_lines++;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_PARSE,
                   "%s:%" G_GUINT64_FORMAT ": line longer than %d bytes; skipped", r->file, line_no, MAX_LINE);
      return LINE_BAD;
    }
  if (line == nul_line)
    {
      r->stats.bad_lines++;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_PARSE,
                   "%s:%" G_GUINT64_FORMAT ": a NUL byte in the line (not JSON text); skipped", r->file, line_no);
      return LINE_BAD;
    }
  /* Before json-glib, whose parser and tree destructor recurse once per
   * level: a line of a few hundred thousand '[' overflowed the stack. */
  if (!fb_json_is_plain (line, strlen (line), FB_JSON_READ_DEPTH_MAX, &too_deep))
    {
      r->stats.bad_lines++;
      if (too_deep)
        g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_PARSE,
                     "%s:%" G_GUINT64_FORMAT ": nested deeper than %d levels (a record nests 3); skipped", r->file,
                     line_no, FB_JSON_READ_DEPTH_MAX);
      else
        g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_PARSE,
                     "%s:%" G_GUINT64_FORMAT ": not JSON (outside a string, a byte plain JSON has no use for); skipped",
                     r->file, line_no);
      g_free (line);
      return LINE_BAD;
    }
  rec = g_new0 (FbLogRecord, 1);
  rec->line = line;
  rec->file = g_strdup (r->file);
  rec->line_no = line_no;
  rec->seq = -1;

  parser = json_parser_new_immutable ();
  if (!json_parser_load_from_data (parser, line, -1, &local_error))
    {
      r->stats.bad_lines++;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_PARSE, "%s:%" G_GUINT64_FORMAT ": not JSON (%s); skipped", r->file,
                   line_no, local_error->message);
      return LINE_BAD;
    }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      r->stats.bad_lines++;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_PARSE, "%s:%" G_GUINT64_FORMAT ": not a JSON object; skipped",
                   r->file, line_no);
      return LINE_BAD;
    }
  if (!node_is_utf8 (root))
    {
      r->stats.bad_lines++;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_PARSE,
                   "%s:%" G_GUINT64_FORMAT ": a string is not UTF-8 (a lone surrogate escape); skipped", r->file,
                   line_no);
      return LINE_BAD;
    }
  rec->root = json_node_ref (root);
  rec->object = json_node_get_object (root);
  {
    JsonNode *run = json_object_get_member (rec->object, "run");
    JsonNode *seq = json_object_get_member (rec->object, "seq");

    if (run != NULL && JSON_NODE_HOLDS_VALUE (run) && json_node_get_value_type (run) == G_TYPE_STRING)
      rec->run = json_node_get_string (run);
    if (seq != NULL && JSON_NODE_HOLDS_VALUE (seq) && json_node_get_value_type (seq) == G_TYPE_INT64 &&
        json_node_get_int (seq) > 0)
      rec->seq = json_node_get_int (seq);
  }

  if (rec->seq > 0)
    {
      const char *run_key = rec->run != NULL ? rec->run : "";
      guint64 seq = (guint64)rec->seq;
      RunSeqs *rs = g_hash_table_lookup (r->seqs, run_key);

      if (rs != NULL && fb_seq_set_has (rs->set, seq))
        {
          r->stats.duplicates++;
          return LINE_SKIP;
        }
      if (rs == NULL)
        {
          rs = g_new0 (RunSeqs, 1);
          rs->set = fb_seq_set_new ();
          g_hash_table_insert (r->seqs, g_strdup (run_key), rs);
        }
      /* (a seq missing is said once all there was is read: say_hole) */
      fb_seq_set_add (rs->set, seq);
      r->grown_none = FALSE;
      if (!rs->grew)
        {
          char *key = NULL;

          g_hash_table_lookup_extended (r->seqs, run_key, (gpointer *)&key, NULL);
          g_ptr_array_add (r->grew, key);
          rs->grew = TRUE;
        }
    }
  r->stats.records++;
  *ret_record = g_steal_pointer (&rec);
  return LINE_RECORD;
}

static FbLogReadStatus next (FbLogReader *r, FbLogRecord **ret_record, GError **error);

/* Names last first: say_hole takes them from the end. */
static int
str_ptr_cmp_down (const void *a, const void *b)
{
  return strcmp (*(const char *const *)b, *(const char *const *)a);
}

/* Everything there was has been read (the end of a reader that ends, a
 * follower caught up): is a run's seq missing that was not said?  The
 * lowest such hole of the first run (by name) that has one, said once
 * (*ERROR).  Said only now, not when a record jumps past it: records are
 * not read in the order written wherever two runs write one log at once
 * (each writes on in the file the other renamed, which may be read last)
 * or the clock was set back, and later files fill what earlier ones
 * skipped.  The first record of a run read need not be its seq 1 (older
 * rotated files may have been removed): only seqs between its lowest and
 * highest read are missing, as `report` counts them. */
static bool
say_hole (FbLogReader *r, GError **error)
{
  if (r->grew->len == 0)
    return false;
  /* only the runs that grew since: a log of many runs is not gone through
   * at each catch-up */
  g_ptr_array_sort (r->grew, str_ptr_cmp_down);
  while (r->grew->len > 0)
    {
      const char *run = g_ptr_array_index (r->grew, r->grew->len - 1);
      RunSeqs *rs = g_hash_table_lookup (r->seqs, run);
      guint64 lo, hi, missing;

      if (!fb_seq_set_hole_above (rs->set, rs->said_to, &lo, &hi))
        {
          /* none now: a later one begins above what there is */
          if (!fb_seq_set_max (rs->set, &rs->said_to))
            rs->said_to = 0;
          rs->grew = FALSE;
          g_ptr_array_remove_index (r->grew, r->grew->len - 1);
          continue;
        }
      rs->said_to = hi;
      missing = hi - lo + 1;
      r->stats.gaps++;
      r->stats.missing = r->stats.missing > G_MAXUINT64 - missing ? G_MAXUINT64 : r->stats.missing + missing;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_PARSE,
                   "%s: run %s: seq jumps from %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT ": %" G_GUINT64_FORMAT
                   " record%s %s",
                   r->live_path, run, lo - 1, hi + 1, missing, missing == 1 ? "" : "s",
                   r->relist_capped ? "not read: rotated files kept appearing while the log was read, and were "
                                      "no longer looked for; read it again"
                                    : "missing");
      return true;
    }
  return false;
}

/* Said once, at the end of what was read (FB_LOG_READ_NOTE):
 * - to a follower, which goes on in the directory it opened (the top of
 *   this file), that the directory was removed: nothing will be written
 *   there again, and what was written there since it last looked (a
 *   rotation and a new live file, then the removal) is out of its reach;
 * - to a follower, that the directory's path leads elsewhere now, or
 *   nowhere (the directory renamed, another made in its place): it goes
 *   on in the one it opened, and what is written at the path is not
 *   shown.  The path is walked again (as open_dir walks it: nothing on
 *   another user's FUSE filesystem is asked) every DIR_LOOK_US at most;
 * - by a reader that ends and stopped looking for rotated files
 *   (RELIST_MAX), that it may not have shown some records, even some that
 *   were in the live file when it started (rotated away while it read):
 *   no later record need show the gap. */
FbLogReadStatus
fb_log_reader_next (FbLogReader *r, FbLogRecord **ret_record, GError **error)
{
  FbLogReadStatus st = next (r, ret_record, error);
  struct stat st_dir;

  /* (a follower past GROWN_LOOK_MANY files looks at them once a second:
   * a hole is said only once a look found none grown since the last
   * record, which such a file might hold) */
  if (st == FB_LOG_READ_EOF && (!r->follow || r->grown_none) && say_hole (r, error))
    return FB_LOG_READ_GAP;
  if (st == FB_LOG_READ_EOF && r->follow && !r->dir_gone_told && fstat (r->dir_fd, &st_dir) == 0 &&
      st_dir.st_nlink == 0)
    {
      g_autofree char *dir = g_path_get_dirname (r->live_path);

      r->dir_gone_told = TRUE;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND,
                   "the log's directory %s was removed: no more will come there, and records written there since "
                   "this follower last looked (up to 0.2 s before the removal) may not have been shown; a log "
                   "written at that path from now on is in another directory, which this follower does not read "
                   "(stop it, and read or follow the path again)",
                   dir);
      return FB_LOG_READ_NOTE;
    }
  if (st == FB_LOG_READ_EOF && r->follow && !r->dir_gone_told && !r->dir_moved_told &&
      g_get_monotonic_time () - r->dir_looked_us >= DIR_LOOK_US)
    {
      g_autofree char *dir = g_path_get_dirname (r->live_path);
      _fb_cleanup_fd_ int now = fb_path_open_not_foreign_fuse (dir, "the access log's directory", "", NULL);
      struct stat st_now;

      r->dir_looked_us = g_get_monotonic_time ();
      /* (-1: refused, another user's FUSE filesystem on the way: not
       * known, looked at again) */
      if (now == -2 || (now >= 0 && fstat (now, &st_now) == 0 && fstat (r->dir_fd, &st_dir) == 0 &&
                        (st_now.st_dev != st_dir.st_dev || st_now.st_ino != st_dir.st_ino)))
        {
          r->dir_moved_told = TRUE;
          g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND,
                       "%s is %s the directory this follower opened (renamed, or replaced): it goes on in that "
                       "one, and does not show a log written at that path (stop it, and read or follow the path "
                       "again)",
                       dir, now == -2 ? "no longer" : "another directory now, not");
          return FB_LOG_READ_NOTE;
        }
    }
  if (st == FB_LOG_READ_EOF && !r->follow && r->relist_capped && !r->capped_told)
    {
      r->capped_told = TRUE;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                   "rotated files kept appearing (or growing) while %s was read, and were no longer looked for "
                   "after %u listings (or %u reads of those that grew): records written meanwhile, and some that "
                   "were in its live file when this read began, may not have been shown; read the log again, or "
                   "follow it (--follow)",
                   r->live_path, (guint)RELIST_MAX, (guint)GROWN_READS_MAX);
      return FB_LOG_READ_NOTE;
    }
  return st;
}

static FbLogReadStatus
next (FbLogReader *r, FbLogRecord **ret_record, GError **error)
{
  for (;;)
    {
      /* 1. Complete lines already read. */
      while (!g_queue_is_empty (&r->lines))
        {
          char *line = g_queue_pop_head (&r->lines);
          guint64 line_no = GPOINTER_TO_SIZE (g_queue_pop_head (&r->line_nos));

          switch (parse_line (r, line, line_no, ret_record, error))
            {
              case LINE_RECORD:
                return FB_LOG_READ_RECORD;
              case LINE_BAD:
                return FB_LOG_READ_BAD_LINE;
              case LINE_SKIP:
              default:
                continue;
            }
        }

      /* 2. More of the current file. */
      if (r->fd >= 0)
        {
          gssize n;
          gboolean replaced, newest;

          /* Cut in place while followed (logrotate's copytruncate, `: >
           * FILE`): read again from its start, where the writer goes on
           * (O_APPEND); the records shown before are not shown twice (run,
           * seq).  Looked at before reading on from an end, where what
           * follows may be the start of what was written after the cut. */
          if (r->follow && r->at_end && cut_in_place (r))
            {
              struct stat st;
              off_t had = r->offset;

              if (lseek (r->fd, 0, SEEK_SET) != 0)
                {
                  int errsv = errno;
                  g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "reading %s: %s", r->file, g_strerror (errsv));
                  return FB_LOG_READ_ERROR;
                }
              r->offset = 0;
              r->line_no = 0;
              r->torn = 0;
              r->head_len = 0;
              r->skipping = FALSE;
              g_string_truncate (r->partial, 0);
              if (fstat (r->fd, &st) < 0)
                st.st_size = 0;
              g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                           "%s was cut in place while followed (%" G_GINT64_FORMAT
                           " bytes had been read, it holds %" G_GINT64_FORMAT
                           " now): read again from its start; records cut away before they were read are not in it "
                           "(logrotate's copytruncate loses them: fusebox rotates its logs itself)",
                           r->file, (gint64)had, (gint64)st.st_size);
              return FB_LOG_READ_NOTE;
            }

          n = fill (r, error);
          if (n < 0)
            return FB_LOG_READ_ERROR;
          r->at_end = n == 0;
          if (n > 0)
            continue;
          /* At its end.  The live file, still in place, may grow: */
          replaced = r->is_live && live_replaced (r);
          if (r->is_live && !replaced && r->follow)
            {
              /* a rotated file read before, grown since (queue_grown): read
               * on in it, then come back here */
              if ((g_hash_table_size (r->read_to) <= GROWN_LOOK_MANY ||
                   g_get_monotonic_time () - r->grown_looked_us >= GROWN_LOOK_US) &&
                  queue_grown (r) > 0)
                {
                  leave_live (r);
                  continue;
                }
              return FB_LOG_READ_EOF; /* a partial line may yet be completed */
            }
          /* and so may the one rotated away, and the newest rotated file,
           * until the writer has a new live file of its own */
          newest = false;
          if (r->follow && !r->is_live)
            {
              gint64 began = g_get_monotonic_time (), ended;

              /* A look costs as much as the directory holds names (a
               * listing, and each queued name's owner asked): it takes a
               * twentieth of the time at most, or a follower left at the
               * end of the newest file of a directory where somebody put
               * thousands of names would spin on it.  A new live file is
               * looked for at each call (successor_status). */
              if (r->newest && began < r->newest_look_us)
                newest = true;
              else if (!owner_file_pending (r))
                {
                  /* the last of the owner's files queued: any newer one? */
                  if (!queue_rotated (r, NULL, error))
                    return FB_LOG_READ_ERROR;
                  newest = !owner_file_pending (r);
                  ended = g_get_monotonic_time ();
                  r->newest_look_us = ended + 20 * (ended - began);
                }
              r->newest = newest;
            }
          if (r->follow && (replaced || newest))
            {
              int o = successor_status (r, error);

              if (o != 1)
                {
                  r->drained = FALSE; /* read to its end again once there is one */
                  return o == OPEN_FOREIGN ? FB_LOG_READ_SKIPPED : FB_LOG_READ_EOF;
                }
            }
          if ((replaced || newest) && !r->drained)
            {
              /* The writer may have appended between our read and its
               * rename, or its new live file: read to the end once more,
               * now that it is final (a reader that ends: to the end it has
               * now). */
              struct stat st;

              r->drained = TRUE;
              if (!r->follow && fstat (r->fd, &st) == 0 && st.st_size > r->limit)
                r->limit = st.st_size;
              continue;
            }
          /* a follower said this line incomplete already, and went back
           * to its start: it waits for the writer (read_to_set keeps where
           * it starts) */
          if (r->follow && !r->skipping && r->partial->len > 0 && r->torn_at == r->offset - (off_t)r->partial->len + 1)
            ;
          else if (r->partial->len > 0 || r->skipping)
            {
              gsize len = r->partial->len;

              /* a follower reads the line again from its start: the
               * writer may complete it (another run writing on in this
               * file, mid-write when it was read), and what follows would
               * be read as a line of its own */
              if (r->follow && !r->skipping)
                {
                  off_t start = r->offset - (off_t)len;

                  if (lseek (r->fd, start, SEEK_SET) != start)
                    {
                      int errsv = errno;
                      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "reading %s: %s", r->file, g_strerror (errsv));
                      return FB_LOG_READ_ERROR;
                    }
                  r->offset = start;
                  r->torn_at = start + 1;
                  g_string_truncate (r->partial, 0);
                  r->stats.truncated++;
                  g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_PARSE,
                               "%s:%" G_GUINT64_FORMAT ": the last line is incomplete (%" G_GSIZE_FORMAT
                               " bytes without a newline: the writer stopped mid-record, or is writing it); its "
                               "record is shown if the line is completed",
                               r->file, r->line_no + 1, len);
                  return FB_LOG_READ_TRUNCATED;
                }
              g_string_truncate (r->partial, 0);
              r->skipping = FALSE;
              r->line_no++;
              r->torn = len;
              r->stats.truncated++;
              g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_PARSE,
                           "%s:%" G_GUINT64_FORMAT ": the last line is incomplete (%" G_GSIZE_FORMAT
                           " bytes without a newline: the writer stopped mid-record); ignored",
                           r->file, r->line_no, len);
              return FB_LOG_READ_TRUNCATED;
            }
          if (r->is_live && !replaced)
            {
              /* a rotated file read before, grown since (queue_grown):
               * read on in it, and come back */
              if (queue_grown (r) > 0)
                {
                  leave_live (r);
                  continue;
                }
              close_current (r);
              r->done = TRUE;
              return FB_LOG_READ_EOF;
            }
          /* A rotated file done, or the live one rotated away: go on with
           * the rotated files that appeared meanwhile, then the live file. */
          /* its size, time and first bytes too: its inode number may go
           * to a file made after it is removed */
          if (replaced)
            read_to_set (r, &r->read_live[r->read_live_next++ % G_N_ELEMENTS (r->read_live)]);
          else if (!r->is_live && !r->single_file)
            {
              ReadTo *to = g_new (ReadTo, 1);

              read_to_set (r, to);
              g_hash_table_replace (r->read_to, g_strdup (r->file), to);
            }
          close_current (r);
          /* look for rotated files that appeared meanwhile only when none
           * of the log's is left to read (listing after each one made a
           * log of many files quadratic); step 4 looks again anyway */
          if (!replaced && owner_file_pending (r))
            continue;
          if (!queue_rotated (r, NULL, error))
            return FB_LOG_READ_ERROR;
          continue;
        }

      /* 3. The next rotated file. */
      if (!g_queue_is_empty (&r->pending))
        {
          g_autofree char *path = g_queue_pop_head (&r->pending);
          /* A rotated file removed before we got to it is skipped; its seq
           * numbers show as a gap. */
          int o = open_file (r, path, FALSE, error);

          if (o < 0)
            return FB_LOG_READ_ERROR;
          if (o == OPEN_FOREIGN)
            {
              remember_skipped (r, path);
              /* skipped: no longer one to read on in when it grows (a
               * file of the owner's the reader can't open, tried again at
               * each look, had a follower spin) */
              g_hash_table_remove (r->read_to, path);
              return FB_LOG_READ_SKIPPED;
            }
          /* gone: a file made at the name later is another, to read */
          if (o == 0 && r->follow)
            g_hash_table_remove (r->seen, path);
          continue;
        }
      if (r->single_file || r->done)
        return FB_LOG_READ_EOF;

      /* 4. The live file.  A rotation between our last listing and this open
       * leaves a rotated file we haven't seen: the writer renames before it
       * creates the new live file, so listing again after the open finds it;
       * then read it first and open the live file again. */
      {
        guint added = 0;
        struct stat st;
        int o;

        /* a reader that ends opens the live name a few times only: a live
         * file swapped for another each time it is read to its end (its
         * owner exchanging two files there) must not keep it reading */
        if (!r->follow && r->live_opens >= RELIST_MAX)
          {
            r->done = TRUE;
            g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                         "%s was another file each of the %u times it was read to its end (the log rotates faster "
                         "than it is read, or whoever can write in its directory keeps replacing it): not read again; "
                         "read the log again, or follow it (--follow)",
                         r->live_path, r->live_opens);
            return FB_LOG_READ_SKIPPED;
          }
        /* the live file skipped as another's, still there: as if none */
        if (r->foreign_ino != 0 && fb_lstat_cached (r->dir_fd, leaf (r->live_path), &st) == 0 &&
            st.st_dev == r->foreign_dev && st.st_ino == r->foreign_ino &&
            !(S_ISREG (st.st_mode) && st.st_uid == r->owner))
          o = 0;
        else
          o = open_file (r, r->live_path, TRUE, error);
        if (o < 0)
          return FB_LOG_READ_ERROR;
        if (o == 1)
          r->live_opens++;
        if (o == OPEN_FOREIGN)
          {
            /* a reader that ends tries the live name a few times only:
             * another user swapping files there must not keep it reading */
            if (!r->follow && ++r->live_skips >= RELIST_MAX)
              r->done = TRUE;
            return FB_LOG_READ_SKIPPED;
          }
        if (!queue_rotated (r, &added, error))
          return FB_LOG_READ_ERROR;
        if (added > 0)
          {
            if (o > 0)
              {
                if (!r->resumed)
                  r->stats.files--;
                leave_live (r);
              }
            continue;
          }
        if (o == 0)
          {
            if (r->follow)
              return FB_LOG_READ_EOF; /* not created yet: wait */
            r->done = TRUE;
            return FB_LOG_READ_EOF;
          }
        continue;
      }
    }
}
