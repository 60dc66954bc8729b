/* fusebox — reading a log back: truncated last lines and bad lines are
 * reported and skipped, seq gaps and duplicates are caught, rotated files
 * come first in seq order, and follow mode survives rotations (several
 * between two polls included) without losing or repeating a record. */
#include "tests/unit/test-ipc-util.h"

typedef TestLogFile Fixture;

static char *
record_line (const char *run, guint64 seq)
{
  return g_strdup_printf ("{\"ts\":\"2024-05-01T12:00:%02u.000000Z\",\"run\":\"%s\",\"seq\":%" G_GUINT64_FORMAT
                          ",\"pid\":1,\"comm\":\"t\",\"op\":\"open\",\"path\":\"/p%" G_GUINT64_FORMAT
                          "\",\"access\":\"read\",\"decision\":\"allow\",\"errno\":0,\"rule\":0,\"rule_origin\":"
                          "\"x\",\"why\":\"y\"}",
                          (guint)(seq % 60), run, seq, seq);
}

/* Lines for seqs FIRST..LAST, newline-terminated. */
static char *
records (const char *run, guint64 first, guint64 last)
{
  GString *s = g_string_new (NULL);

  for (guint64 i = first; i <= last; i++)
    {
      g_autofree char *l = record_line (run, i);
      g_string_append_printf (s, "%s\n", l);
    }
  return g_string_free (s, FALSE);
}

/* Read until EOF; statuses as a string: R record, G gap, B bad, T truncated. */
static char *
drain (FbLogReader *reader, GArray *seqs)
{
  GString *trace = g_string_new (NULL);

  for (;;)
    {
      g_autoptr (FbLogRecord) rec = NULL;
      g_autoptr (GError) error = NULL;
      FbLogReadStatus st = fb_log_reader_next (reader, &rec, &error);

      switch (st)
        {
          case FB_LOG_READ_RECORD:
            g_string_append_c (trace, 'R');
            if (seqs != NULL)
              g_array_append_val (seqs, rec->seq);
            break;
          case FB_LOG_READ_GAP:
            assert_non_null (error);
            g_string_append_c (trace, 'G');
            break;
          case FB_LOG_READ_BAD_LINE:
            assert_non_null (error);
            g_string_append_c (trace, 'B');
            break;
          case FB_LOG_READ_TRUNCATED:
            assert_non_null (error);
            g_string_append_c (trace, 'T');
            break;
          case FB_LOG_READ_NOTE:
            assert_non_null (error);
            g_string_append_c (trace, 'N');
            break;
          case FB_LOG_READ_EOF:
            return g_string_free (trace, FALSE);
          case FB_LOG_READ_ERROR:
          default:
            fail_msg ("reader error: %s", error != NULL ? error->message : "?");
        }
    }
}

/* SEQS holds 1, 2, ... N, in that order. */
static void
assert_seqs_in_order (GArray *seqs, guint n)
{
  assert_int_equal (seqs->len, n);
  for (guint i = 0; i < seqs->len; i++)
    assert_int_equal (g_array_index (seqs, gint64, i), i + 1);
}

/* What READER gives until EOF (drain's trace) is WANT. */
static void
assert_drains (FbLogReader *reader, GArray *seqs, const char *want)
{
  g_autofree char *trace = drain (reader, seqs);

  if (strcmp (trace, want) != 0)
    fail_msg ("the reader gave \"%s\", expected \"%s\" (R record, G gap, B bad line, T truncated, N note)", trace,
              want);
}

/* LEN bytes of DATA appended to PATH, as a writer appends. */
static void
append (const char *path, const char *data, gsize len)
{
  int fd = open (path, O_WRONLY | O_APPEND | O_CLOEXEC);

  assert_true (fd >= 0);
  assert_int_equal (write (fd, data, len), (ssize_t)len);
  close (fd);
}

static void
test_truncated_last_line (void **state)
{
  Fixture *f = *state;
  g_autofree char *text = records ("r", 1, 3);
  g_autofree char *torn = g_strconcat (text, "{\"ts\":\"2024-05-01T12:00:04.000000Z\",\"run\":\"r\",\"se", NULL);
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogRecord) rec = NULL;
  g_autofree char *trace = NULL;
  FbLogReaderStats stats;
  int i;

  test_write_file (f->path, torn);
  reader = fb_log_reader_new (f->path, FALSE, &error);
  assert_non_null (reader);
  for (i = 0; i < 3; i++)
    {
      g_autoptr (FbLogRecord) r = NULL;
      assert_int_equal (fb_log_reader_next (reader, &r, &error), FB_LOG_READ_RECORD);
      assert_int_equal (r->seq, i + 1);
      assert_int_equal (r->line_no, i + 1);
      assert_string_equal (r->run, "r");
    }
  assert_int_equal (fb_log_reader_next (reader, &rec, &error), FB_LOG_READ_TRUNCATED);
  /* the message says where and what */
  assert_non_null (strstr (error->message, "access.jsonl:4:"));
  assert_non_null (strstr (error->message, "incomplete"));
  g_clear_error (&error);
  assert_int_equal (fb_log_reader_next (reader, &rec, &error), FB_LOG_READ_EOF);
  fb_log_reader_get_stats (reader, &stats);
  assert_int_equal (stats.records, 3);
  assert_int_equal (stats.truncated, 1);
  (void)trace;
}

/* TEXT as the log, read to its end: drain()'s trace, the records' seqs in
 * SEQS (unless NULL) and the reader's stats. */
static char *
read_whole (Fixture *f, const char *text, GArray *seqs, FbLogReaderStats *ret_stats)
{
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GError) error = NULL;
  char *trace;

  test_write_file (f->path, text);
  reader = fb_log_reader_new (f->path, FALSE, &error);
  if (reader == NULL)
    fail_msg ("fb_log_reader_new: %s", error->message);
  trace = drain (reader, seqs);
  fb_log_reader_get_stats (reader, ret_stats);
  return trace;
}

/* A log file with a second name (a hard link a sandbox made where it could
 * see the run directory): counted, and the report warns, since records
 * may have been rewritten through that name; one name, nothing said. */
static void
test_linked_file_counted (void **state)
{
  Fixture *f = *state;
  g_autofree char *text = records ("r", 1, 2);
  g_autofree char *other = g_build_filename (f->dir, "elsewhere.jsonl", NULL);
  FbLogReaderStats stats;
  g_autofree char *trace = read_whole (f, text, NULL, &stats);

  assert_string_equal (trace, "RR");
  assert_int_equal (stats.linked, 0);
  assert_int_equal (link (f->path, other), 0);
  {
    g_autoptr (FbLogReader) reader = fb_log_reader_new (f->path, FALSE, NULL);
    g_autoptr (FbReport) report = fb_report_new ();
    g_autofree char *report_text = NULL;
    g_autofree char *again = NULL;

    assert_non_null (reader);
    again = drain (reader, NULL);
    assert_string_equal (again, "RR");
    fb_log_reader_get_stats (reader, &stats);
    assert_int_equal (stats.linked, 1);
    fb_report_set_reader_stats (report, &stats);
    report_text = fb_report_to_text (report);
    assert_non_null (strstr (report_text, "WARNING: 1 of the log's files has another name"));
  }
}

static void
test_bad_lines_gaps_duplicates (void **state)
{
  Fixture *f = *state;
  g_autofree char *l1 = record_line ("r", 1);
  g_autofree char *l2 = record_line ("r", 2);
  g_autofree char *l5 = record_line ("r", 5);
  g_autofree char *l6 = record_line ("r", 6);
  g_autofree char *o1 = record_line ("other", 1);
  g_autofree char *o2 = record_line ("other", 2);
  g_autofree char *text =
    g_strdup_printf ("%s\nnot json at all\n%s\n[1,2]\n%s\n%s\n%s\n%s\n\n%s\n%s\n", l1, o1, l2, l2, l5, o2, l6, l5);
  g_autoptr (GArray) seqs = g_array_new (FALSE, FALSE, sizeof (gint64));
  FbLogReaderStats stats;
  g_autofree char *trace = read_whole (f, text, seqs, &stats);

  /* l1 B o1 B l2 (l2 dup) l5 o2 B(empty) l6 (l5 dup), then the gap
   * (3..4), said once all is read */
  assert_string_equal (trace, "RBRBRRRBRG");
  assert_int_equal (stats.records, 6);
  assert_int_equal (stats.duplicates, 2);
  assert_int_equal (stats.gaps, 1);
  assert_int_equal (stats.missing, 2);
  assert_int_equal (stats.bad_lines, 3);
  assert_int_equal (g_array_index (seqs, gint64, 3), 5);
}

/* A lone surrogate escape parses in json-glib 1.6 into bytes that are not
 * UTF-8: the line is bad, not a record whose strings would reach reports
 * (found by fuzz-ipc-log: the report's JSON was not UTF-8). */
static void
test_lone_surrogate (void **state)
{
  Fixture *f = *state;
  g_autofree char *l1 = record_line ("r", 1);
  g_autofree char *text = g_strdup_printf ("%s\n{\"run\":\"r\",\"seq\":2,\"path\":\"/a\\udc80b\"}\n"
                                           "{\"run\":\"r\",\"seq\":3,\"why\":\"\\ud800x\"}\n",
                                           l1);
  FbLogReaderStats stats;
  g_autofree char *trace = read_whole (f, text, NULL, &stats);

  assert_string_equal (trace, "RBB");
  assert_int_equal (stats.records, 1);
  assert_int_equal (stats.bad_lines, 2);
}

static void
test_gap_message (void **state)
{
  Fixture *f = *state;
  g_autofree char *a = records ("r", 1, 2);
  g_autofree char *b = records ("r", 10, 10);
  g_autofree char *text = g_strconcat (a, b, NULL);
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogRecord) rec = NULL;

  test_write_file (f->path, text);
  reader = fb_log_reader_new (f->path, FALSE, &error);
  for (int i = 0; i < 3; i++)
    {
      g_autoptr (FbLogRecord) r = NULL;
      assert_int_equal (fb_log_reader_next (reader, &r, &error), FB_LOG_READ_RECORD);
      assert_int_equal (r->seq, i < 2 ? i + 1 : 10);
    }
  /* said once all is read, naming the log, the run, the seqs around the
   * hole and how many */
  assert_int_equal (fb_log_reader_next (reader, &rec, &error), FB_LOG_READ_GAP);
  {
    g_autofree char *want = g_strdup_printf ("%s: run r: seq jumps from 2 to 10: 7 records missing", f->path);

    assert_string_equal (error->message, want);
  }
  g_clear_error (&error);
  assert_int_equal (fb_log_reader_next (reader, &rec, &error), FB_LOG_READ_EOF);
}

static void
write_rotated (const char *dir, guint64 first, guint64 last, guint n)
{
  g_autofree char *name = fb_log_rotated_name ("access.jsonl", first, last, n);
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree char *text = records ("r", first, last);
  /* one time for all: within one clock tick the seqs order them (files
   * apart in time are read in the order written: fb_log_list_rotated) */
  struct timespec times[2] = { { 1700000000, 0 }, { 1700000000, 0 } };

  test_write_file (path, text);
  assert_int_equal (utimensat (AT_FDCWD, path, times, 0), 0);
}

static void
test_rotated_order (void **state)
{
  Fixture *f = *state;
  g_autoptr (GPtrArray) rotated = NULL;
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) seqs = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_autofree char *trace = NULL;
  g_autofree char *live = records ("r", 112, 115);
  g_autofree char *decoy1 = g_build_filename (f->dir, "access.old.jsonl", NULL);
  g_autofree char *decoy2 = g_build_filename (f->dir, "other.000000000001-000000000002.jsonl", NULL);
  g_autofree char *decoy3 = g_build_filename (f->dir, "access.1-2.jsonl.bak", NULL);

  /* written out of order on purpose, with one time; 100..111 sorts after
   * 4..99 only by number */
  write_rotated (f->dir, 100, 111, 0);
  write_rotated (f->dir, 1, 3, 0);
  write_rotated (f->dir, 4, 99, 0);
  test_write_file (f->path, live);
  test_write_file (decoy1, "garbage\n");
  test_write_file (decoy2, "garbage\n");
  test_write_file (decoy3, "garbage\n");

  rotated = fb_log_list_rotated (f->path, &error);
  assert_non_null (rotated);
  assert_int_equal (rotated->len, 3);
  assert_int_equal (((FbRotatedFile *)rotated->pdata[0])->first_seq, 1);
  assert_int_equal (((FbRotatedFile *)rotated->pdata[1])->first_seq, 4);
  assert_int_equal (((FbRotatedFile *)rotated->pdata[2])->first_seq, 100);
  assert_int_equal (((FbRotatedFile *)rotated->pdata[2])->last_seq, 111);

  reader = fb_log_reader_new (f->path, FALSE, &error);
  assert_non_null (reader);
  trace = drain (reader, seqs);
  assert_seqs_in_order (seqs, 115);
  assert_null (strchr (trace, 'B'));

  /* A rotated file named on its own is read alone. */
  {
    g_autofree char *name = fb_log_rotated_name ("access.jsonl", 4, 99, 0);
    g_autofree char *path = g_build_filename (f->dir, name, NULL);
    g_autoptr (FbLogReader) one = fb_log_reader_new (path, FALSE, &error);
    g_autoptr (GArray) s = g_array_new (FALSE, FALSE, sizeof (gint64));
    g_autofree char *t = NULL;

    assert_non_null (one);
    t = drain (one, s);
    assert_int_equal (s->len, 96);
    assert_int_equal (g_array_index (s, gint64, 0), 4);
  }
}

/* The rotated file FIRST..LAST in DIR holding TEXT, last written SEC
 * seconds after a day in 2023 (a clock set back writes a later file with
 * an earlier time). */
static void
write_rotated_text (const char *dir, guint64 first, guint64 last, const char *text, time_t sec)
{
  g_autofree char *name = fb_log_rotated_name ("access.jsonl", first, last, 0);
  g_autofree char *path = g_build_filename (dir, name, NULL);
  struct timespec times[2] = { { 1700000000 + sec, 0 }, { 1700000000 + sec, 0 } };

  test_write_file (path, text);
  assert_int_equal (utimensat (AT_FDCWD, path, times, 0), 0);
}

/* RUN's rotated file FIRST..LAST in DIR, after the lines BEFORE (another
 * run's, left in the live file it went on in; NULL: none), dated as
 * write_rotated_text dates it. */
static void
write_rotated_at (const char *dir, const char *before, const char *run, guint64 first, guint64 last, time_t sec)
{
  g_autofree char *own = records (run, first, last);
  g_autofree char *text = g_strconcat (before != NULL ? before : "", own, NULL);

  write_rotated_text (dir, first, last, text, sec);
}

/* What READER gives until EOF: "RUN:SEQ" for each record, "gap" for each
 * gap said, space-separated; *RET_GAPS the gaps' messages. */
static char *
drain_runs (FbLogReader *reader, GString *ret_gaps)
{
  GString *out = g_string_new (NULL);

  for (;;)
    {
      g_autoptr (FbLogRecord) rec = NULL;
      g_autoptr (GError) error = NULL;
      FbLogReadStatus st = fb_log_reader_next (reader, &rec, &error);

      if (st == FB_LOG_READ_EOF)
        return g_string_free (out, FALSE);
      if (out->len > 0)
        g_string_append_c (out, ' ');
      if (st == FB_LOG_READ_GAP)
        {
          g_string_append (out, "gap");
          g_string_append_printf (ret_gaps, "%s\n", error->message);
          continue;
        }
      if (st != FB_LOG_READ_RECORD)
        fail_msg ("reader status %d: %s", st, error != NULL ? error->message : "?");
      g_string_append_printf (out, "%s:%" G_GINT64_FORMAT, rec->run, rec->seq);
    }
}

/* Holes of several runs: each said once, after every record, the runs in
 * the order of their names. */
static void
test_gaps_of_several_runs (void **state)
{
  Fixture *f = *state;
  g_autofree char *b1 = records ("b", 1, 1), *a1 = records ("a", 1, 1), *b3 = records ("b", 3, 3);
  g_autofree char *a4 = records ("a", 4, 5), *c1 = records ("c", 1, 2);
  g_autofree char *text = g_strconcat (b1, a1, b3, c1, a4, NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GString) gaps = g_string_new (NULL);
  g_autofree char *got = NULL;
  g_autofree char *want = NULL;

  test_write_file (f->path, text);
  reader = fb_log_reader_new (f->path, FALSE, &error);
  assert_non_null (reader);
  got = drain_runs (reader, gaps);
  assert_string_equal (got, "b:1 a:1 b:3 c:1 c:2 a:4 a:5 gap gap");
  want = g_strdup_printf ("%s: run a: seq jumps from 1 to 4: 2 records missing\n"
                          "%s: run b: seq jumps from 1 to 3: 1 record missing\n",
                          f->path, f->path);
  assert_string_equal (gaps->str, want);
}

/* WANT with each "RUN:A-B" written out as "RUN:A RUN:A+1 ... RUN:B". */
static char *
expand_runs (const char *want)
{
  g_auto (GStrv) words = g_strsplit (want, " ", -1);
  GString *out = g_string_new (NULL);

  for (guint i = 0; words[i] != NULL; i++)
    {
      char *colon = strchr (words[i], ':');
      char *dash = colon != NULL ? strchr (colon, '-') : NULL;
      guint64 lo, hi;

      if (dash == NULL)
        {
          g_string_append_printf (out, "%s%s", out->len > 0 ? " " : "", words[i]);
          continue;
        }
      lo = g_ascii_strtoull (colon + 1, NULL, 10);
      hi = g_ascii_strtoull (dash + 1, NULL, 10);
      for (guint64 seq = lo; seq <= hi; seq++)
        g_string_append_printf (out, "%s%.*s:%" G_GUINT64_FORMAT, out->len > 0 ? " " : "", (int)(colon - words[i]),
                                words[i], seq);
    }
  return g_string_free (out, FALSE);
}

/* A reader (FOLLOW: a follower) of the log at PATH gives the records WANT
 * (expand_runs) and says no gap. */
static void
assert_reads (const char *path, gboolean follow, const char *want)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = fb_log_reader_new (path, follow, &error);
  g_autoptr (GString) gaps = g_string_new (NULL);
  g_autofree char *expanded = expand_runs (want);
  g_autofree char *got = NULL;

  if (reader == NULL)
    fail_msg ("%s: %s", path, error->message);
  got = drain_runs (reader, gaps);
  if (gaps->len > 0)
    fail_msg ("%s said records were missing:\n%s", follow ? "a follower" : "a reader", gaps->str);
  assert_string_equal (got, expanded);
}

/* The clock set back between two rotations of one run dates its later
 * file before the earlier one: the run's files are still read in the
 * order of its seqs, with no gap said and none shown out of order, while
 * another run's file written between them keeps its place in time; and a
 * file really missing is still said, where the order of the times alone
 * hid it (the later file read first, the earlier one only filled in). */
static void
test_rotated_order_clock_set_back (void **state)
{
  Fixture *f = *state;
  g_autofree char *live = records ("r", 10, 11);
  g_autofree char *missing = g_build_filename (f->dir, "access.000000000004-000000000006.jsonl", NULL);
  g_autoptr (GError) error = NULL;

  write_rotated_at (f->dir, NULL, "r", 1, 3, 1000);
  write_rotated_at (f->dir, NULL, "r", 4, 6, 3000);
  write_rotated_at (f->dir, NULL, "r", 7, 9, 2000); /* the clock went back an hour */
  write_rotated_at (f->dir, NULL, "q", 1, 2, 2500); /* another run, between */
  test_write_file (f->path, live);
  for (int follow = 0; follow < 2; follow++)
    assert_reads (f->path, follow, "r:1-6 q:1-2 r:7-11");

  /* 4..6 gone, 7..9 dated before 1..3: said missing */
  assert_int_equal (unlink (missing), 0);
  write_rotated_at (f->dir, NULL, "r", 7, 9, 500);
  {
    g_autoptr (FbLogReader) reader = fb_log_reader_new (f->path, FALSE, &error);
    g_autoptr (GString) gaps = g_string_new (NULL);
    g_autofree char *got = NULL;

    assert_non_null (reader);
    got = drain_runs (reader, gaps);
    assert_string_equal (got, "r:1 r:2 r:3 r:7 r:8 r:9 q:1 q:2 r:10 r:11 gap");
    assert_non_null (strstr (gaps->str, "run r: seq jumps from 3 to 7: 3 records missing"));
  }
}

/* Run x's second file dated first (the clock set back), and run y going
 * on in the live file x left: x's files sorted around the file that
 * holds x's 21..25 and y's 1..5 put it after x's 1..10 and before x's
 * 11..20, and "seq jumps from 10 to 21" was said of records all there.
 * With a file of two runs' records to read, none is moved: the order of
 * the times, x's 11..20 first, filled in below, nothing said. */
static void
test_rotated_order_not_around_a_mixed_file (void **state)
{
  Fixture *f = *state;
  g_autofree char *left = records ("x", 21, 25);
  g_autofree char *live = records ("y", 6, 7);

  write_rotated_at (f->dir, NULL, "x", 1, 10, 400);
  write_rotated_at (f->dir, NULL, "x", 11, 20, 100);
  write_rotated_at (f->dir, left, "y", 1, 5, 300);
  test_write_file (f->path, live);
  assert_reads (f->path, FALSE, "x:11-25 y:1-5 x:1-10 y:6-7");
}

/* Two runs writing one log at once: y renamed the file x was writing in,
 * and named it after y's seqs (10..12), though it holds x's 4..6 alone;
 * x's second file was dated first (the clock set back).  Taken for x's by
 * its records and sorted by its name, it went after x's 7..9, and "seq
 * jumps from 3 to 7" was said.  A file whose records are not the seqs its
 * name says is no one run's: nothing is moved, nothing said. */
static void
test_rotated_order_file_named_by_another_run (void **state)
{
  Fixture *f = *state;
  g_autofree char *text = records ("x", 4, 6);
  g_autofree char *live = records ("y", 10, 11);

  write_rotated_at (f->dir, NULL, "x", 7, 9, 50);
  write_rotated_at (f->dir, NULL, "x", 1, 3, 100);
  write_rotated_text (f->dir, 10, 12, text, 200);
  write_rotated_at (f->dir, NULL, "y", 1, 9, 300);
  test_write_file (f->path, live);
  assert_reads (f->path, FALSE, "x:7-9 x:1-6 y:1-11");
}

/* A file whose first and last lines are one run's records with the seqs
 * its name says, and as many lines, but another run's record among them
 * (y's 2 where x's 5 should be): no one run's, so nothing is moved; taken
 * for x's and moved after y's 3, it had y's 2 said missing, where only x's
 * 5 is. */
static void
test_rotated_order_middle_line_looked_at (void **state)
{
  Fixture *f = *state;
  g_autofree char *x4 = record_line ("x", 4), *y2 = record_line ("y", 2), *x6 = record_line ("x", 6);
  g_autofree char *text = g_strdup_printf ("%s\n%s\n%s\n", x4, y2, x6);
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GString) gaps = g_string_new (NULL);
  g_autofree char *got = NULL;

  write_rotated_at (f->dir, NULL, "y", 1, 1, 50);
  write_rotated_text (f->dir, 4, 6, text, 100);
  write_rotated_at (f->dir, NULL, "y", 3, 3, 200);
  write_rotated_at (f->dir, NULL, "x", 1, 3, 300); /* the clock set back */
  test_write_file (f->path, "");
  reader = fb_log_reader_new (f->path, FALSE, &error);
  assert_non_null (reader);
  got = drain_runs (reader, gaps);
  assert_string_equal (got, "y:1 x:4 y:2 x:6 y:3 x:1 x:2 x:3 gap");
  assert_non_null (strstr (gaps->str, "run x: seq jumps from 4 to 6: 1 record missing"));
  assert_null (strstr (gaps->str, "run y:"));
}

/* A file of one run's records bigger than what is read at a time, its
 * last line across the boundary of the last read: still known for that
 * run's alone, and put back in order after a clock set back. */
static void
test_rotated_order_big_file (void **state)
{
  Fixture *f = *state;
  g_autoptr (GString) text = g_string_new (NULL);
  g_autofree char *live = records ("r", 303, 303);
  gsize rest;

  for (guint64 seq = 2; seq <= 300; seq++)
    g_string_append_printf (text, "{\"run\":\"r\",\"seq\":%" G_GUINT64_FORMAT ",\"path\":\"/p\"}\n", seq);
  /* the first line padded: 20 bytes past 64 KiB in all, where the last
   * line (30 bytes) begins */
  rest = 64 * 1024 + 20 - text->len - strlen ("{\"run\":\"r\",\"seq\":1,\"path\":\"/\"}\n");
  {
    g_autofree char *pad = g_strnfill (rest, 'p');
    g_autofree char *first = g_strdup_printf ("{\"run\":\"r\",\"seq\":1,\"path\":\"/%s\"}\n", pad);

    g_string_prepend (text, first);
  }
  assert_int_equal (text->len, 64 * 1024 + 20);
  write_rotated_text (f->dir, 1, 300, text->str, 2000);
  write_rotated_at (f->dir, NULL, "r", 301, 302, 1000); /* the clock set back */
  test_write_file (f->path, live);
  assert_reads (f->path, FALSE, "r:1-303");
}

/* Only a file that holds one run's records and just the seqs its name
 * says is moved: run b went on in the live file run a left (so b's first
 * file begins with a's last records), and the clock was set back before
 * b's second file.  Put in b's places by its name, b's first file came
 * before a's second, and a's 11..20 were said missing; it keeps its place
 * in time, and nothing is said missing. */
static void
test_rotated_order_mixed_file_stays (void **state)
{
  Fixture *f = *state;
  g_autofree char *live = records ("b", 11, 12);
  g_autofree char *left = records ("a", 21, 25);

  write_rotated_at (f->dir, NULL, "a", 1, 10, 100);
  write_rotated_at (f->dir, NULL, "a", 11, 20, 300);
  write_rotated_at (f->dir, left, "b", 1, 5, 400);
  write_rotated_at (f->dir, NULL, "b", 6, 10, 200); /* the clock set back */
  test_write_file (f->path, live);
  /* in the order of the times: b's 6..10 before its 1..5, filled in */
  assert_reads (f->path, FALSE, "a:1-10 b:6-10 a:11-25 b:1-5 b:11-12");
}

static void
test_missing_log (void **state)
{
  Fixture *f = *state;
  g_autoptr (GError) error = NULL;
  FbLogReader *reader = fb_log_reader_new (f->path, FALSE, &error);

  assert_null (reader);
  assert_true (g_error_matches (error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND));
  assert_non_null (strstr (error->message, f->path));
}

/* --- follow ------------------------------------------------------------ */

static void
push_n (FbAccessLog *log, guint n, guint *counter)
{
  for (guint i = 0; i < n; i++)
    {
      char path[64];
      FbAccessEvent e = test_event ("open", path);

      snprintf (path, sizeof path, "/work/%06u", (*counter)++);
      fb_access_sink_push (fb_access_log_get_sink (log), &e);
    }
}

static guint
count_rotated (const char *path)
{
  g_autoptr (GPtrArray) r = fb_log_list_rotated (path, NULL);
  return r != NULL ? r->len : 0;
}

/* A file whose first and last records are one run's, as its name says,
 * with another run's record between them (two runs writing one log at
 * once), dated before a file of its run's lower seqs: it keeps its place.
 * Moved after that file, it took run y's 2 past y's 3, and y's 2 was
 * said missing. */
static void
test_rotated_order_interleaved_file_stays (void **state)
{
  Fixture *f = *state;
  g_autofree char *x4 = record_line ("x", 4), *y2 = record_line ("y", 2);
  g_autofree char *x5 = record_line ("x", 5), *x6 = record_line ("x", 6);
  g_autofree char *text = g_strdup_printf ("%s\n%s\n%s\n%s\n", x4, y2, x5, x6);

  write_rotated_at (f->dir, NULL, "y", 1, 1, 50);
  write_rotated_text (f->dir, 4, 6, text, 100);
  write_rotated_at (f->dir, NULL, "y", 3, 3, 200);
  write_rotated_at (f->dir, NULL, "x", 1, 3, 300); /* the clock set back */
  assert_reads (f->path, FALSE, "y:1 x:4 y:2 x:5 x:6 y:3 x:1-3");
}

/* Two runs writing one log at once (two writers on one --log, each
 * rotating it, bursts of ten records from one and one from the other):
 * each names the file it renames after its own seqs, and the other writes
 * on in it, so a file's name says little of what it holds.  Every record
 * is read, and no gap is said (sorted by the names, 26 were). */
static void
test_rotated_order_two_writers_at_once (void **state)
{
  Fixture *f = *state;
  FbAccessLogOptions one = { .path = f->path, .run_id = "one", .rotate_bytes = 4096 };
  FbAccessLogOptions two = { .path = f->path, .run_id = "two", .rotate_bytes = 4096 };
  g_autoptr (GError) error = NULL;
  FbAccessLog *a = fb_access_log_new (&one, NULL, &error);
  FbAccessLog *b = NULL;
  guint counter = 0;

  assert_non_null (a);
  b = fb_access_log_new (&two, NULL, &error);
  assert_non_null (b);
  for (guint round = 0; round < 40; round++)
    {
      push_n (a, 10, &counter);
      push_n (b, 1, &counter);
    }
  assert_true (fb_access_log_close (a, &error));
  assert_true (fb_access_log_close (b, &error));
  fb_access_log_free (a);
  fb_access_log_free (b);
  /* the test did what it claims: rotations, one run's records in a file
   * named after the other's seqs */
  assert_true (count_rotated (f->path) >= 20);
  for (int follow = 0; follow < 2; follow++)
    {
      g_autoptr (FbLogReader) reader = fb_log_reader_new (f->path, follow, &error);
      g_autoptr (GString) gaps = g_string_new (NULL);
      g_autofree char *got = NULL;
      g_auto (GStrv) shown = NULL;
      guint ones = 0, twos = 0;

      assert_non_null (reader);
      got = drain_runs (reader, gaps);
      if (gaps->len > 0)
        fail_msg ("%s said records were missing:\n%s", follow ? "a follower" : "a reader", gaps->str);
      shown = g_strsplit (got, " ", -1);
      for (guint i = 0; shown[i] != NULL; i++)
        {
          ones += g_str_has_prefix (shown[i], "one:");
          twos += g_str_has_prefix (shown[i], "two:");
        }
      assert_int_equal (ones, 400);
      assert_int_equal (twos, 40);
    }
}

/* Each record's "RUN:SEQ" in SHOWN (drain_runs' text), counted: every one
 * of NA records of run "one" and NB of "two", each once. */
static void
assert_each_once (const char *shown, guint na, guint nb)
{
  g_auto (GStrv) words = g_strsplit (shown, " ", -1);
  g_autoptr (GHashTable) got = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  for (guint i = 0; words[i] != NULL; i++)
    if (*words[i] != '\0' && !g_hash_table_add (got, g_strdup (words[i])))
      fail_msg ("%s shown twice", words[i]);
  for (guint i = 1; i <= na + nb; i++)
    {
      g_autofree char *want = g_strdup_printf ("%s:%u", i <= na ? "one" : "two", i <= na ? i : i - na);

      if (!g_hash_table_contains (got, want))
        fail_msg ("%s never shown (%u of %u shown)", want, g_hash_table_size (got), na + nb);
    }
  assert_int_equal (g_hash_table_size (got), na + nb);
}

/* Two runs writing one log at once, a follower reading between bursts:
 * each run writes on in the file the other renamed away, after the
 * follower has read it to its end.  Every record is shown, once, with no
 * gap said (the follower showed 177 of run one's 600 before it looked at
 * the files it had read again). */
static void
test_follow_two_writers_at_once (void **state)
{
  Fixture *f = *state;
  FbAccessLogOptions one = { .path = f->path, .run_id = "one", .rotate_bytes = 4096 };
  FbAccessLogOptions two = { .path = f->path, .run_id = "two", .rotate_bytes = 4096 };
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = fb_log_reader_new (f->path, TRUE, &error);
  g_autoptr (GString) shown = g_string_new (NULL);
  g_autoptr (GString) gaps = g_string_new (NULL);
  FbAccessLog *a, *b;
  guint counter = 0;

  assert_non_null (reader);
  a = fb_access_log_new (&one, NULL, &error);
  assert_non_null (a);
  b = fb_access_log_new (&two, NULL, &error);
  assert_non_null (b);
  for (guint round = 0; round < 60; round++)
    {
      g_autofree char *got = NULL;

      push_n (a, 10, &counter);
      push_n (b, 1 + round % 3, &counter);
      got = drain_runs (reader, gaps);
      g_string_append_printf (shown, " %s", got);
    }
  assert_true (fb_access_log_close (a, &error));
  assert_true (fb_access_log_close (b, &error));
  fb_access_log_free (a);
  fb_access_log_free (b);
  {
    g_autofree char *got = drain_runs (reader, gaps);

    g_string_append_printf (shown, " %s", got);
  }
  /* the test did what it claims: rotations by both */
  assert_true (count_rotated (f->path) >= 20);
  if (gaps->len > 0)
    fail_msg ("the follower said records were missing:\n%s", gaps->str);
  assert_each_once (shown->str, 600, 60 + 60);
  /* and read no record twice: each file read on from where it stopped */
  {
    FbLogReaderStats stats;

    fb_log_reader_get_stats (reader, &stats);
    assert_int_equal (stats.duplicates, 0);
  }
}

/* A rotated file whose last line was incomplete when the follower read
 * it (another run writing on in it, mid-write): said so, then, once the
 * line is complete, its record is shown, and the next after it. */
static void
test_follow_rotated_line_completed (void **state)
{
  Fixture *f = *state;
  g_autofree char *x1 = record_line ("x", 1), *x2 = record_line ("x", 2), *x3 = record_line ("x", 3);
  int half = (int)strlen (x2) / 2;
  g_autofree char *text = g_strdup_printf ("%s\n%.*s", x1, half, x2);
  g_autofree char *name = fb_log_rotated_name ("access.jsonl", 1, 1, 0);
  g_autofree char *rotated = g_build_filename (f->dir, name, NULL);
  g_autoptr (GArray) seqs = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = NULL;
  FbLogReaderStats stats;

  write_rotated_text (f->dir, 1, 1, text, 100);
  test_write_file (f->path, "");
  reader = fb_log_reader_new (f->path, TRUE, &error);
  assert_non_null (reader);
  assert_drains (reader, seqs, "RT");
  append (rotated, x2 + half, strlen (x2) - half);
  append (rotated, "\n", 1);
  assert_drains (reader, seqs, "R");
  append (rotated, x3, strlen (x3));
  append (rotated, "\n", 1);
  assert_drains (reader, seqs, "R");
  assert_seqs_in_order (seqs, 3);
  fb_log_reader_get_stats (reader, &stats);
  assert_int_equal (stats.bad_lines, 0);
  assert_int_equal (stats.duplicates, 0);
}

/* A rotated file the follower read, then written over in place with
 * other records (as a file given the first's inode number would be): it
 * is read from its start, not from where the first one ended. */
static void
test_follow_rotated_file_rewritten (void **state)
{
  Fixture *f = *state;
  g_autofree char *name = fb_log_rotated_name ("access.jsonl", 1, 2, 0);
  g_autofree char *rotated = g_build_filename (f->dir, name, NULL);
  g_autofree char *other = records ("y", 1, 5);
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GString) gaps = g_string_new (NULL);
  struct stat before, after;
  int fd;

  write_rotated_at (f->dir, NULL, "x", 1, 2, 100);
  test_write_file (f->path, "");
  reader = fb_log_reader_new (f->path, TRUE, &error);
  assert_non_null (reader);
  {
    g_autofree char *got = drain_runs (reader, gaps);

    assert_string_equal (got, "x:1 x:2");
  }
  assert_int_equal (stat (rotated, &before), 0);
  fd = open (rotated, O_WRONLY | O_TRUNC | O_CLOEXEC);
  assert_true (fd >= 0);
  assert_int_equal (write (fd, other, strlen (other)), (ssize_t)strlen (other));
  close (fd);
  assert_int_equal (stat (rotated, &after), 0);
  /* the test did what it claims: the same inode, larger */
  assert_true (after.st_ino == before.st_ino && after.st_size > before.st_size);
  {
    g_autofree char *got = drain_runs (reader, gaps);

    assert_string_equal (got, "y:1 y:2 y:3 y:4 y:5");
  }
  assert_int_equal (gaps->len, 0);
}

/* A run writing on in a file another rotated away, after the follower
 * read it, and nothing rotating after: its record is shown at the
 * follower's next look, not at the next rotation. */
static void
test_follow_writer_in_rotated_file (void **state)
{
  Fixture *f = *state;
  FbAccessLogOptions one = { .path = f->path, .run_id = "one", .rotate_bytes = 4096 };
  FbAccessLogOptions two = { .path = f->path, .run_id = "two", .rotate_bytes = 1 << 30 };
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = fb_log_reader_new (f->path, TRUE, &error);
  g_autoptr (GString) gaps = g_string_new (NULL);
  FbAccessLog *a, *b;
  guint counter = 0, na = 0;

  assert_non_null (reader);
  a = fb_access_log_new (&one, NULL, &error);
  assert_non_null (a);
  b = fb_access_log_new (&two, NULL, &error);
  assert_non_null (b);
  /* run two's descriptor is on the first live file; run one rotates it */
  while (count_rotated (f->path) == 0)
    {
      push_n (a, 1, &counter);
      na++;
    }
  {
    g_autofree char *got = drain_runs (reader, gaps);
    g_autofree char *want = g_strdup_printf ("one:1-%u", na);
    g_autofree char *expanded = expand_runs (want);

    assert_string_equal (got, expanded);
  }
  push_n (b, 1, &counter);
  {
    g_autofree char *got = drain_runs (reader, gaps);

    assert_string_equal (got, "two:1");
  }
  assert_int_equal (gaps->len, 0);
  assert_true (fb_access_log_close (a, &error));
  assert_true (fb_access_log_close (b, &error));
  fb_access_log_free (a);
  fb_access_log_free (b);
}

/* A second run joins the live file a first one writes, and writes on in
 * it after the first has renamed it away and rotated again: that file is
 * changed last, and read after the first run's later file.  No gap is
 * said, by a reader that ends or a follower: the first run's records in
 * it were said missing ("seq jumps from 5 to 11") before they were read. */
static void
test_second_run_joined_no_false_gap (void **state)
{
  Fixture *f = *state;
  g_auto (GStrv) lines = g_new0 (char *, 9);
  g_autofree char *shared = NULL;
  g_autofree char *live = records ("a", 16, 17);
  const char *order[] = { "a6", "a7", "b1", "a8", "b2", "a9", "a10", "b3" };

  for (guint i = 0; i < G_N_ELEMENTS (order); i++)
    lines[i] = record_line (order[i][0] == 'a' ? "a" : "b", g_ascii_strtoull (order[i] + 1, NULL, 10));
  shared = g_strjoinv ("\n", lines);
  write_rotated_at (f->dir, NULL, "a", 1, 5, 100);
  {
    g_autofree char *text = g_strconcat (shared, "\n", NULL);

    write_rotated_text (f->dir, 6, 10, text, 400); /* b wrote on in it last */
  }
  write_rotated_at (f->dir, NULL, "a", 11, 15, 300);
  test_write_file (f->path, live);
  for (int follow = 0; follow < 2; follow++)
    assert_reads (f->path, follow, "a:1-5 a:11-15 a:6-7 b:1 a:8 b:2 a:9-10 b:3 a:16-17");
}

/* A follower says a gap once it has read all there is, and once: more
 * records after it, or the hole filled later, do not say it again; a new
 * hole is said. */
static void
test_follow_gap_said_once (void **state)
{
  Fixture *f = *state;
  g_autofree char *one_two = records ("r", 1, 2), *five = records ("r", 5, 5);
  g_autofree char *first = g_strconcat (one_two, five, NULL);
  g_autofree char *more = records ("r", 6, 7);
  g_autofree char *filled = records ("r", 3, 4);
  g_autofree char *later = records ("r", 10, 10);
  g_autoptr (GArray) seqs = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = NULL;
  FbLogReaderStats stats;

  test_write_file (f->path, first);
  reader = fb_log_reader_new (f->path, TRUE, &error);
  assert_non_null (reader);
  assert_drains (reader, seqs, "RRRG");
  append (f->path, more, strlen (more));
  assert_drains (reader, seqs, "RR");
  append (f->path, filled, strlen (filled));
  assert_drains (reader, seqs, "RR");
  append (f->path, later, strlen (later));
  assert_drains (reader, seqs, "RG");
  fb_log_reader_get_stats (reader, &stats);
  assert_int_equal (stats.gaps, 2);
  assert_int_equal (stats.missing, 4);
}

/* Two runs on one log while a reader that ends reads it: after the reader
 * has read the file the first renamed away, the second writes on in it,
 * then rotates, and its next record is in the new live file.  The reader
 * goes back to the file that grew: every record shown, none said missing
 * (it said "seq jumps from 1 to 5" of records the file held, never shown). */
static void
test_reader_reads_on_in_grown_file (void **state)
{
  Fixture *f = *state;
  g_autofree char *name = fb_log_rotated_name ("access.jsonl", 1, 3, 0);
  g_autofree char *shared = g_build_filename (f->dir, name, NULL);
  g_autofree char *moved_name = fb_log_rotated_name ("access.jsonl", 2, 4, 0);
  g_autofree char *moved = g_build_filename (f->dir, moved_name, NULL);
  g_autofree char *a13 = records ("a", 1, 3), *b1 = records ("b", 1, 1), *a46 = records ("a", 4, 6);
  g_autofree char *b24 = records ("b", 2, 4), *b5 = records ("b", 5, 5);
  g_autofree char *first = g_strconcat (a13, b1, NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GString) shown = g_string_new (NULL);
  g_autoptr (GString) gaps = g_string_new (NULL);
  g_autofree char *rest = NULL;

  write_rotated_text (f->dir, 1, 3, first, 100);
  test_write_file (f->path, a46);
  reader = fb_log_reader_new (f->path, FALSE, &error);
  assert_non_null (reader);
  /* read up to the live file's first record */
  for (guint i = 0; i < 5; i++)
    {
      g_autoptr (FbLogRecord) rec = NULL;

      assert_int_equal (fb_log_reader_next (reader, &rec, &error), FB_LOG_READ_RECORD);
      g_string_append_printf (shown, "%s:%" G_GINT64_FORMAT " ", rec->run, rec->seq);
    }
  assert_string_equal (shown->str, "a:1 a:2 a:3 b:1 a:4 ");
  /* run b writes on in the renamed file, and rotates the live one */
  append (shared, b24, strlen (b24));
  assert_int_equal (rename (f->path, moved), 0);
  test_write_file (f->path, b5);
  rest = drain_runs (reader, gaps);
  if (gaps->len > 0)
    fail_msg ("a reader that ends said records were missing:\n%s", gaps->str);
  assert_string_equal (rest, "a:5 a:6 b:2 b:3 b:4 b:5");
}

/* A rotated file that grows each time a reader that ends reads from it
 * (its owner appending without end): the reader goes back to it a few
 * times only, then ends, saying it may not have shown everything. */
static void
test_reader_grown_file_bounded (void **state)
{
  Fixture *f = *state;
  g_autofree char *name = fb_log_rotated_name ("access.jsonl", 1, 2, 0);
  g_autofree char *rotated = g_build_filename (f->dir, name, NULL);
  g_autofree char *y1 = records ("y", 1, 1);
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GError) error = NULL;
  guint64 next_x = 3;
  guint calls, xs = 0, notes = 0;

  write_rotated_at (f->dir, NULL, "x", 1, 2, 100);
  test_write_file (f->path, y1);
  reader = fb_log_reader_new (f->path, FALSE, &error);
  assert_non_null (reader);
  for (calls = 0; calls < 10000; calls++)
    {
      g_autoptr (FbLogRecord) rec = NULL;
      g_autoptr (GError) local_error = NULL;
      FbLogReadStatus st = fb_log_reader_next (reader, &rec, &local_error);

      if (st == FB_LOG_READ_EOF)
        break;
      if (st == FB_LOG_READ_NOTE)
        {
          assert_non_null (strstr (local_error->message, "may not have been shown"));
          notes++;
          continue;
        }
      assert_int_equal (st, FB_LOG_READ_RECORD);
      if (g_strcmp0 (rec->run, "x") == 0)
        {
          g_autofree char *more = records ("x", next_x, next_x);

          xs++;
          append (rotated, more, strlen (more));
          next_x++;
        }
    }
  assert_true (calls < 10000);
  assert_int_equal (notes, 1);
  /* it went back for more, a few times */
  assert_true (xs > 2 && xs < 100);
}

/* The live file rotated away while its last line was being written: the
 * follower says the line incomplete, and the writer completes it before
 * the follower reads again.  The line is read from its start: its record
 * is shown, and nothing is said missing.  The follower read on from the
 * end of the incomplete part: the rest of the line was "not JSON", the
 * record lost and said missing. */
static void
test_follow_torn_line_completed_after_warning (void **state)
{
  Fixture *f = *state;
  g_autofree char *r1 = record_line ("r", 1), *r2 = record_line ("r", 2), *r3 = records ("r", 3, 3);
  int half = (int)strlen (r2) / 2;
  g_autofree char *text = g_strdup_printf ("%s\n%.*s", r1, half, r2);
  g_autofree char *name = fb_log_rotated_name ("access.jsonl", 1, 2, 0);
  g_autofree char *rotated = g_build_filename (f->dir, name, NULL);
  g_autoptr (GArray) seqs = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (FbLogRecord) rec = NULL;
  FbLogReaderStats stats;

  test_write_file (f->path, text);
  reader = fb_log_reader_new (f->path, TRUE, &error);
  assert_non_null (reader);
  assert_drains (reader, seqs, "R");
  assert_int_equal (rename (f->path, rotated), 0);
  test_write_file (f->path, r3);
  assert_int_equal (fb_log_reader_next (reader, &rec, &error), FB_LOG_READ_TRUNCATED);
  g_clear_error (&error);
  /* the writer completes the line before the follower reads again */
  append (rotated, r2 + half, strlen (r2) - half);
  append (rotated, "\n", 1);
  assert_drains (reader, seqs, "RR");
  assert_seqs_in_order (seqs, 3);
  fb_log_reader_get_stats (reader, &stats);
  assert_int_equal (stats.bad_lines, 0);
  assert_int_equal (stats.gaps, 0);
}

/* A follower that has read more than GROWN_LOOK_MANY rotated files looks
 * at their sizes once a second: a run writing on in one of them, and in
 * the live file, is not said to miss records the file holds before the
 * follower has looked again (it said "seq jumps" three times in six). */
static void
test_follow_many_files_no_false_gap (void **state)
{
  Fixture *f = *state;
  g_autofree char *name = fb_log_rotated_name ("access.jsonl", 1, 2, 0);
  g_autofree char *shared = g_build_filename (f->dir, name, NULL);
  g_autofree char *r301 = records ("r", 301, 301);
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GString) gaps = g_string_new (NULL);
  g_autoptr (GString) shown = g_string_new (NULL);

  for (guint64 i = 1; i <= 300; i++)
    write_rotated_at (f->dir, NULL, "r", i, i, (time_t)i);
  write_rotated_at (f->dir, NULL, "a", 1, 2, 1000);
  test_write_file (f->path, r301);
  reader = fb_log_reader_new (f->path, TRUE, &error);
  assert_non_null (reader);
  {
    g_autofree char *got = drain_runs (reader, gaps);

    g_string_append (shown, got);
  }
  for (guint64 k = 3; k <= 13; k += 2)
    {
      g_autofree char *in_shared = records ("a", k, k), *in_live = records ("a", k + 1, k + 1);
      g_autofree char *got = NULL;

      append (shared, in_shared, strlen (in_shared));
      append (f->path, in_live, strlen (in_live));
      got = drain_runs (reader, gaps);
      g_string_append_printf (shown, " %s", got);
    }
  /* once a second: what the shared file holds comes */
  g_usleep (1100 * 1000);
  {
    g_autofree char *got = drain_runs (reader, gaps);

    g_string_append_printf (shown, " %s", got);
  }
  if (gaps->len > 0)
    fail_msg ("the follower said records were missing:\n%s", gaps->str);
  for (guint k = 1; k <= 14; k++)
    {
      g_autofree char *want = g_strdup_printf ("a:%u", k);
      g_auto (GStrv) words = g_strsplit (shown->str, " ", -1);

      if (!g_strv_contains ((const char *const *)words, want))
        fail_msg ("%s never shown: %s", want, shown->str);
    }
}

/* A writer in this thread (synchronous pushes), a follower polling between
 * bursts of random size: small bursts rotate now and then, big ones rotate
 * several times between two polls. */
static void
test_follow_across_rotation (void **state)
{
  Fixture *f = *state;
  FbAccessLogOptions opts = { .path = f->path, .run_id = "follow", .rotate_bytes = 3000 };
  g_autoptr (GError) error = NULL;
  FbAccessLog *log;
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GArray) seqs = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_autoptr (GRand) rand = g_rand_new_with_seed (20240501);
  guint counter = 0, multi_rotations = 0;

  /* The follower starts before the log exists. */
  reader = fb_log_reader_new (f->path, TRUE, &error);
  assert_non_null (reader);
  assert_drains (reader, seqs, "");
  log = fb_access_log_new (&opts, NULL, &error);
  assert_non_null (log);

  for (guint round = 0; round < 60; round++)
    {
      guint before = count_rotated (f->path);
      guint n = g_rand_int_range (rand, 0, 8) == 0 ? g_rand_int_range (rand, 30, 80) : g_rand_int_range (rand, 0, 6);
      g_autofree char *t = NULL;

      push_n (log, n, &counter);
      if (count_rotated (f->path) >= before + 2)
        multi_rotations++;
      t = drain (reader, seqs);
      /* nothing but records: no gap, no torn line, no bad line */
      for (const char *p = t; *p != '\0'; p++)
        if (*p != 'R')
          fail_msg ("round %u: unexpected status trace %s", round, t);
      assert_int_equal (seqs->len, counter);
    }
  assert_true (fb_access_log_close (log, &error));
  fb_access_log_free (log);
  assert_drains (reader, seqs, "");

  /* every record once, in order */
  assert_seqs_in_order (seqs, counter);
  /* the test did what it claims */
  assert_true (count_rotated (f->path) >= 10);
  assert_true (multi_rotations >= 2);
  {
    FbLogReaderStats stats;
    fb_log_reader_get_stats (reader, &stats);
    assert_int_equal (stats.gaps, 0);
  }
}

/* A partial line at the end of the live file is waited for in follow mode,
 * not reported, and read once the writer completes it. */
static void
test_follow_partial_line (void **state)
{
  Fixture *f = *state;
  g_autofree char *l1 = record_line ("r", 1);
  g_autofree char *l2 = record_line ("r", 2);
  g_autofree char *first = g_strdup_printf ("%s\n", l1);
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) seqs = g_array_new (FALSE, FALSE, sizeof (gint64));
  gsize half = strlen (l2) / 2;

  test_write_file (f->path, first);
  reader = fb_log_reader_new (f->path, TRUE, &error);
  assert_drains (reader, seqs, "R");
  append (f->path, l2, half);
  assert_drains (reader, seqs, ""); /* waiting, not "T" */
  append (f->path, l2 + half, strlen (l2) - half);
  append (f->path, "\n", 1);
  assert_drains (reader, seqs, "R");
  assert_int_equal (g_array_index (seqs, gint64, 1), 2);
}

/* The log removed while followed and written again (the same run's
 * rotation sizes give the same names): the file at a name the follower
 * read before is another now, on another inode or on the same one, and
 * is read.  It had been taken for the one read (by its name), its records
 * never shown, nothing said. */
static void
test_follow_name_made_again (void **state)
{
  Fixture *f = *state;
  g_autofree char *name = fb_log_rotated_name ("access.jsonl", 1, 3, 0);
  g_autofree char *rotated = g_build_filename (f->dir, name, NULL);
  g_autofree char *x4 = records ("x", 4, 4), *y4 = records ("y", 4, 4), *z4 = records ("z", 4, 4);
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GString) gaps = g_string_new (NULL);

  write_rotated_at (f->dir, NULL, "x", 1, 3, 100);
  test_write_file (f->path, x4);
  reader = fb_log_reader_new (f->path, TRUE, &error);
  assert_non_null (reader);
  {
    g_autofree char *got = drain_runs (reader, gaps);

    assert_string_equal (got, "x:1 x:2 x:3 x:4");
  }
  /* another file at the name (a new inode: made before the old is gone) */
  {
    g_autofree char *aside = g_build_filename (f->dir, "aside", NULL);
    struct stat before, after;

    assert_int_equal (stat (rotated, &before), 0);
    assert_int_equal (rename (rotated, aside), 0);
    write_rotated_at (f->dir, NULL, "y", 1, 3, 200);
    assert_int_equal (unlink (aside), 0);
    assert_int_equal (unlink (f->path), 0);
    test_write_file (f->path, y4);
    assert_int_equal (stat (rotated, &after), 0);
    assert_true (after.st_ino != before.st_ino);
  }
  {
    g_autofree char *got = drain_runs (reader, gaps);

    assert_string_equal (got, "y:1 y:2 y:3 y:4");
  }
  /* and again, the old removed first (its inode number may be given to
   * the new file: told apart by its first bytes) */
  assert_int_equal (unlink (rotated), 0);
  assert_int_equal (unlink (f->path), 0);
  write_rotated_at (f->dir, NULL, "z", 1, 3, 300);
  test_write_file (f->path, z4);
  {
    g_autofree char *got = drain_runs (reader, gaps);

    assert_string_equal (got, "z:1 z:2 z:3 z:4");
  }
  assert_int_equal (gaps->len, 0);
}

/* The live file cut in place while followed (logrotate's copytruncate)
 * and written on: said, and read again from its start, whether what is
 * written after the cut is shorter than what was read or longer.  The
 * follower waited for the file to pass its old length, then read from
 * there: a piece of a line, and a jump over records that were there. */
static void
test_follow_live_cut_in_place (void **state)
{
  Fixture *f = *state;
  g_autoptr (GArray) seqs = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_autofree char *first = records ("x", 1, 10);
  g_autofree char *shorter = records ("x", 11, 13);
  g_autofree char *longer = records ("x", 14, 40);
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = NULL;
  FbLogReaderStats stats;
  int fd;

  test_write_file (f->path, first);
  reader = fb_log_reader_new (f->path, TRUE, &error);
  assert_non_null (reader);
  assert_drains (reader, seqs, "RRRRRRRRRR");
  /* cut, and less written than was read */
  assert_int_equal (truncate (f->path, 0), 0);
  append (f->path, shorter, strlen (shorter));
  assert_drains (reader, seqs, "NRRR");
  /* cut, and more written than was read before the follower looks */
  fd = open (f->path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  assert_true (fd >= 0);
  assert_int_equal (write (fd, longer, strlen (longer)), (ssize_t)strlen (longer));
  close (fd);
  assert_true (strlen (longer) > strlen (first));
  assert_drains (reader, seqs, "NRRRRRRRRRRRRRRRRRRRRRRRRRRR");
  assert_seqs_in_order (seqs, 40);
  fb_log_reader_get_stats (reader, &stats);
  assert_int_equal (stats.bad_lines, 0);
  assert_int_equal (stats.gaps, 0);
}

/* A writer that rotated while we held the old file and then appended more
 * before our next poll: the old file is read to its end, the new one from
 * its start. */
static void
test_follow_manual_rotation (void **state)
{
  Fixture *f = *state;
  g_autofree char *a = records ("r", 1, 3);
  g_autofree char *b = records ("r", 4, 5);
  g_autofree char *c = records ("r", 6, 9);
  g_autofree char *rot = fb_log_rotated_name ("access.jsonl", 1, 5, 0);
  g_autofree char *rot_path = g_build_filename (f->dir, rot, NULL);
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) seqs = g_array_new (FALSE, FALSE, sizeof (gint64));

  test_write_file (f->path, a);
  reader = fb_log_reader_new (f->path, TRUE, &error);
  assert_drains (reader, seqs, "RRR");
  append (f->path, b, strlen (b));
  assert_int_equal (rename (f->path, rot_path), 0);
  test_write_file (f->path, c);
  assert_drains (reader, seqs, "RRRRRR");
  assert_seqs_in_order (seqs, 9);
}

TEST_DEFINE_MAIN (
  NULL, NULL, TEST_LOG_FILE_TEST (test_truncated_last_line), TEST_LOG_FILE_TEST (test_linked_file_counted),
  TEST_LOG_FILE_TEST (test_bad_lines_gaps_duplicates), TEST_LOG_FILE_TEST (test_lone_surrogate),
  TEST_LOG_FILE_TEST (test_gap_message), TEST_LOG_FILE_TEST (test_gaps_of_several_runs),
  TEST_LOG_FILE_TEST (test_rotated_order), TEST_LOG_FILE_TEST (test_rotated_order_clock_set_back),
  TEST_LOG_FILE_TEST (test_rotated_order_mixed_file_stays),
  TEST_LOG_FILE_TEST (test_rotated_order_not_around_a_mixed_file),
  TEST_LOG_FILE_TEST (test_rotated_order_file_named_by_another_run),
  TEST_LOG_FILE_TEST (test_rotated_order_middle_line_looked_at), TEST_LOG_FILE_TEST (test_rotated_order_big_file),
  TEST_LOG_FILE_TEST (test_rotated_order_interleaved_file_stays),
  TEST_LOG_FILE_TEST (test_rotated_order_two_writers_at_once), TEST_LOG_FILE_TEST (test_missing_log),
  TEST_LOG_FILE_TEST (test_follow_across_rotation), TEST_LOG_FILE_TEST (test_follow_two_writers_at_once),
  TEST_LOG_FILE_TEST (test_follow_writer_in_rotated_file), TEST_LOG_FILE_TEST (test_follow_rotated_line_completed),
  TEST_LOG_FILE_TEST (test_follow_rotated_file_rewritten), TEST_LOG_FILE_TEST (test_follow_name_made_again),
  TEST_LOG_FILE_TEST (test_follow_live_cut_in_place), TEST_LOG_FILE_TEST (test_second_run_joined_no_false_gap),
  TEST_LOG_FILE_TEST (test_follow_gap_said_once), TEST_LOG_FILE_TEST (test_reader_reads_on_in_grown_file),
  TEST_LOG_FILE_TEST (test_reader_grown_file_bounded),
  TEST_LOG_FILE_TEST (test_follow_torn_line_completed_after_warning),
  TEST_LOG_FILE_TEST (test_follow_many_files_no_false_gap), TEST_LOG_FILE_TEST (test_follow_partial_line),
  TEST_LOG_FILE_TEST (test_follow_manual_rotation))
