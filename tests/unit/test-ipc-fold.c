/* fusebox — the access log's folds and budget: repeated refusals become
 * counted records (nothing disappears without a count), a log that reaches
 * its budget says so once and then writes only up to a margin, and so does
 * a share of it, and seq stays gap-free across folds, rotated files and the
 * budget's end. */
#include "tests/unit/test-ipc-util.h"

/* An on_full or share's callback: counts its calls in the int at DATA. */
static void
count_call (gpointer data)
{
  (*(int *)data)++;
}

/* WINDOW_US: long unless the window itself is tested, so that no result
 * depends on how fast the test runs.  FULL_CALLS (or NULL): where to count
 * the log's on_full calls. */
static FbAccessLog *
open_log_window (TestLogFile *f, guint64 rotate, guint64 max, guint64 window_us, int *full_calls)
{
  FbAccessLogOptions opts = {
    .fold_window_us = window_us,
    .path = f->path,
    .run_id = "fold",
    .rotate_bytes = rotate,
    .coalesce = TRUE,
    .max_bytes = max,
    .on_full = full_calls != NULL ? count_call : NULL,
    .on_full_data = full_calls,
  };
  g_autoptr (GError) error = NULL;
  FbAccessLog *log = fb_access_log_new (&opts, NULL, &error);

  if (log == NULL)
    fail_msg ("fb_access_log_new: %s", error->message);
  return log;
}

static FbAccessLog *
open_log (TestLogFile *f, guint64 rotate, guint64 max, int *full_calls)
{
  return open_log_window (f, rotate, max, (guint64)3600 * G_USEC_PER_SEC, full_calls);
}

static FbAccessEvent
refusal (const char *path)
{
  FbAccessEvent e = test_event ("mkdir", path);

  e.access = "create";
  e.decision = FB_DECISION_READONLY;
  e.err = EROFS;
  e.rule = &test_rule_deny;
  e.ts_us = 0; /* now */
  return e;
}

static void
push (FbAccessLog *log, const FbAccessEvent *e)
{
  fb_access_sink_push (fb_access_log_get_sink (log), e);
}

/* Every line of the log's files, rotated first, in seq order; seq checked
 * gap-free from 1. */
static GPtrArray *
all_records (TestLogFile *f)
{
  g_autoptr (GPtrArray) rotated = fb_log_list_rotated (f->path, NULL);
  GPtrArray *records = g_ptr_array_new_with_free_func ((GDestroyNotify)json_object_unref);
  gint64 want = 1;

  for (guint i = 0; i <= rotated->len; i++)
    {
      const char *file = i < rotated->len ? ((FbRotatedFile *)rotated->pdata[i])->path : f->path;
      g_autoptr (GPtrArray) lines = test_read_lines (file);

      for (guint j = 0; j < lines->len; j++)
        {
          JsonObject *o = test_parse_object (lines->pdata[j]);

          if (json_object_get_int_member (o, "seq") != want)
            fail_msg ("%s:%u: seq %" G_GINT64_FORMAT ", expected %" G_GINT64_FORMAT, file, j + 1,
                      json_object_get_int_member (o, "seq"), want);
          want++;
          g_ptr_array_add (records, o);
        }
    }
  return records;
}

/* How many accesses RECORDS stand for: a repeat record for its count. */
static guint64
represented (GPtrArray *records)
{
  guint64 n = 0;

  for (guint i = 0; i < records->len; i++)
    {
      JsonObject *o = records->pdata[i];

      if (json_object_has_member (o, "notice"))
        continue;
      if (json_object_has_member (o, "repeat"))
        n += (guint64)json_object_get_int_member (json_object_get_object_member (o, "repeat"), "count");
      else
        n++;
    }
  return n;
}

/* The notices among RECORDS (borrowed, in order), each checked to be a
 * share's "log-share-full", and how many records they say were not
 * written. */
static GPtrArray *
share_notices (GPtrArray *records, guint64 *ret_not_written)
{
  GPtrArray *notices = g_ptr_array_new ();
  guint64 not_written = 0;

  for (guint r = 0; r < records->len; r++)
    {
      JsonObject *o = records->pdata[r];
      const char *notice = json_object_get_string_member_with_default (o, "notice", NULL);

      if (notice == NULL)
        continue;
      assert_string_equal (notice, "log-share-full");
      not_written += (guint64)json_object_get_int_member (o, "records_not_written");
      g_ptr_array_add (notices, o);
    }
  *ret_not_written = not_written;
  return notices;
}

#define AFTER FB_LOG_FOLD_AFTER

/* 1,000 refused mkdirs of different names in one directory by one
 * process: the first AFTER in full, then one record for the others. */
static void
test_fold_identical (void **state)
{
  TestLogFile *f = *state;
  FbAccessLog *log = open_log (f, 0, 0, NULL);
  g_autoptr (GPtrArray) records = NULL;
  JsonObject *first, *rep, *r;

  for (int i = 0; i < 1000; i++)
    {
      g_autofree char *path = g_strdup_printf ("/usr/name-%04d", i);
      FbAccessEvent e = refusal (path);
      push (log, &e);
    }
  test_close_log (log);
  records = all_records (f);
  assert_int_equal (records->len, AFTER + 1);
  first = records->pdata[0];
  rep = records->pdata[AFTER];
  assert_string_equal (json_object_get_string_member (first, "path"), "/usr/name-0000");
  for (guint i = 0; i < AFTER; i++)
    assert_false (json_object_has_member (records->pdata[i], "repeat"));
  /* the repeat: the last one's members, the count, the times, the first's seq */
  assert_string_equal (json_object_get_string_member (rep, "path"), "/usr/name-0999");
  assert_string_equal (json_object_get_string_member (rep, "decision"), "readonly");
  assert_string_equal (json_object_get_string_member (rep, "why"), test_rule_deny.why);
  r = json_object_get_object_member (rep, "repeat");
  assert_int_equal (json_object_get_int_member (r, "count"), 1000 - AFTER);
  assert_int_equal (json_object_get_int_member (r, "of"), 1);
  assert_true (strcmp (json_object_get_string_member (r, "first_ts"), json_object_get_string_member (r, "last_ts")) <=
               0);
  assert_string_equal (json_object_get_string_member (r, "last_ts"), json_object_get_string_member (rep, "ts"));
  assert_int_equal (represented (records), 1000);
}

/* What differs in anything but the name is not folded: another process,
 * operation, directory, rule; and an allowed access never is. */
static void
test_fold_distinct (void **state)
{
  TestLogFile *f = *state;
  FbAccessLog *log = open_log (f, 0, 0, NULL);
  g_autoptr (GPtrArray) records = NULL;
  FbAccessEvent base = refusal ("/usr/a");
  FbAccessEvent e;

  push (log, &base);
  e = base, e.pid = 4243, push (log, &e);
  e = base, e.op = FB_OP_CREATE, push (log, &e);
  e = base, e.path = "/etc/a", push (log, &e);
  e = base, e.rule = &test_rule_protected, push (log, &e);
  e = base, e.comm = "other", push (log, &e);
  e = base, e.decision = FB_DECISION_DENY, push (log, &e);
  e = base, e.session = "s-1", push (log, &e);
  e = base, e.target = "/tmp/b", e.op = FB_OP_RENAME, push (log, &e);
  e = base, e.target = "/var/b", e.op = FB_OP_RENAME, push (log, &e);
  for (int i = 0; i < 3; i++)
    {
      e = test_event ("mkdir", "/work/x");
      push (log, &e);
    }
  test_close_log (log);
  records = all_records (f);
  assert_int_equal (records->len, 13);
  for (guint i = 0; i < records->len; i++)
    assert_false (json_object_has_member (records->pdata[i], "repeat"));
}

/* A few repeats are written at once, each in full; a single one past them
 * is written as itself: no marker for a count of one. */
static void
test_fold_single (void **state)
{
  TestLogFile *f = *state;
  FbAccessLog *log = open_log (f, 0, 0, NULL);
  g_autoptr (GPtrArray) records = NULL;
  g_autoptr (GPtrArray) lines = NULL;

  for (int i = 0; i <= AFTER; i++)
    {
      g_autofree char *path = g_strdup_printf ("/usr/s%d", i);
      FbAccessEvent e = refusal (path);
      push (log, &e);
    }
  /* the first AFTER are in the file before the pushes return */
  lines = test_read_lines (f->path);
  assert_int_equal (lines->len, AFTER);
  test_close_log (log);
  records = all_records (f);
  assert_int_equal (records->len, AFTER + 1);
  for (guint i = 0; i < records->len; i++)
    assert_false (json_object_has_member (records->pdata[i], "repeat"));
  {
    g_autofree char *last = g_strdup_printf ("/usr/s%d", AFTER);
    assert_string_equal (json_object_get_string_member (records->pdata[AFTER], "path"), last);
  }
}

/* A fold is written when its window ends, by the loop, without a close or
 * another record (the wait is bounded; nothing is timed). */
static void
test_fold_window (void **state)
{
  TestLogFile *f = *state;
  /* 2 s: the pushes fall in one window however slow the machine */
  FbAccessLog *log = open_log_window (f, 0, 0, 2 * G_USEC_PER_SEC, NULL);
  g_autoptr (GPtrArray) lines = NULL;
  gint64 until = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;

  for (int i = 0; i < AFTER + 6; i++)
    {
      g_autofree char *path = g_strdup_printf ("/usr/w%d", i);
      FbAccessEvent e = refusal (path);
      push (log, &e);
    }
  for (;;)
    {
      g_clear_pointer (&lines, g_ptr_array_unref);
      lines = test_read_lines (f->path);
      if (lines->len == AFTER + 1 || g_get_monotonic_time () > until)
        break;
      g_main_context_iteration (NULL, FALSE);
      g_usleep (10 * 1000);
    }
  assert_int_equal (lines->len, AFTER + 1);
  {
    g_autoptr (JsonObject) o = test_parse_object (lines->pdata[AFTER]);
    assert_int_equal (json_object_get_int_member (json_object_get_object_member (o, "repeat"), "count"), 6);
  }
  /* the window is over: the next one opens a new fold, in full */
  {
    FbAccessEvent e = refusal ("/usr/w9");
    push (log, &e);
  }
  test_close_log (log);
  {
    g_autoptr (GPtrArray) records = all_records (f);
    assert_int_equal (records->len, AFTER + 2);
    assert_false (json_object_has_member (records->pdata[AFTER + 1], "repeat"));
    assert_int_equal (represented (records), AFTER + 7);
  }
}

/* Many kinds interleaved: folded while the table holds them (256 kinds),
 * and every access still accounted for when it can't (a new kind closes
 * the oldest fold). */
static void
many_kinds (TestLogFile *f, int kinds, bool fewer)
{
  FbAccessLog *log = open_log (f, 0, 0, NULL);
  g_autoptr (GPtrArray) records = NULL;
  guint64 pushed = 0;

  for (int round = 0; round < AFTER + 4; round++)
    for (int k = 0; k < kinds; k++)
      {
        g_autofree char *path = g_strdup_printf ("/usr/d%03d/n%d", k, round);
        FbAccessEvent e = refusal (path);
        push (log, &e);
        pushed++;
      }
  test_close_log (log);
  records = all_records (f);
  assert_int_equal (represented (records), pushed);
  if (fewer)
    assert_int_equal (records->len, (AFTER + 1) * kinds);
}

static void
test_fold_many_kinds (void **state)
{
  many_kinds (*state, 200, true);
}

static void
test_fold_too_many_kinds (void **state)
{
  many_kinds (*state, 600, false);
}

static FbAccessEvent
allowed_big (int i, char *buf, gsize size)
{
  FbAccessEvent e = test_event ("mkdir", buf);

  g_snprintf (buf, size, "/work/%0900d", i); /* about 1 KB a record */
  e.access = "create";
  return e;
}

/* The budget: on_full once, the records of the margin written, the rest
 * counted, and a last record that says so. */
static void
test_budget (void **state)
{
  TestLogFile *f = *state;
  int full_calls = 0;
  const guint64 max = 64 * 1024;
  FbAccessLog *log = open_log (f, 0, max, &full_calls);
  g_autoptr (GPtrArray) records = NULL;
  JsonObject *notice;
  guint64 not_written = 0;
  struct stat st;
  const int pushed = 3000; /* about 3 MB: past the budget and its 1 MiB margin */

  for (int i = 0; i < pushed; i++)
    {
      char buf[1024];
      FbAccessEvent e = allowed_big (i, buf, sizeof buf);
      push (log, &e);
    }
  assert_true (fb_access_log_is_full (log, &not_written));
  assert_true (not_written > 0);
  test_close_log (log);
  assert_int_equal (full_calls, 1);
  assert_int_equal (stat (f->path, &st), 0);
  assert_true ((guint64)st.st_size <= max + 1024 * 1024 + 4096);
  records = all_records (f);
  notice = records->pdata[records->len - 1];
  assert_string_equal (json_object_get_string_member (notice, "notice"), "log-full");
  assert_int_equal (json_object_get_int_member (notice, "max_size"), max);
  assert_int_equal (json_object_get_int_member (notice, "records_not_written"), not_written);
  /* nothing disappears without a count */
  assert_int_equal (represented (records) + not_written, pushed);
}

/* The budget of the log the shares below are made of: 8 MiB, each share a
 * FB_LOG_SHARE_PART-th of it (2 MiB). */
#define SHARED_MAX ((guint64)8 * 1024 * 1024)

/* A share of the budget (a process of serve): on_full once, on this thread
 * (the loop's), its margin written and the rest counted, its notice when it
 * is closed (or when the log is, for one left open); the other shares and
 * the log's own sink go on, and the log itself never reaches its budget. */
static void
test_share (void **state)
{
  TestLogFile *f = *state;
  int full_calls = 0;
  FbAccessLog *log = open_log (f, 0, SHARED_MAX, &full_calls);
  int full_a = 0, full_b = 0, full_c = 0;
  g_autoptr (FbAccessShare) a = fb_access_log_share_new (log, NULL, "s1", "a", count_call, &full_a);
  g_autoptr (FbAccessShare) b = fb_access_log_share_new (log, NULL, "s2", "b", count_call, &full_b);
  g_autoptr (FbAccessShare) c = fb_access_log_share_new (log, NULL, NULL, "c", count_call, &full_c);
  g_autoptr (GPtrArray) records = NULL;
  g_autoptr (GPtrArray) notices = NULL;
  JsonObject *o;
  guint64 not_written = 0, counted;
  const int pushed = 3000; /* about 3 MB: past a 2 MiB share and its margin */
  int i;

  assert_int_equal (fb_access_share_get_max_bytes (a), SHARED_MAX / FB_LOG_SHARE_PART);
  for (i = 0; i < pushed; i++)
    {
      char buf[1024];
      FbAccessEvent e = allowed_big (i, buf, sizeof buf);
      fb_access_sink_push (fb_access_share_get_sink (a), &e);
      if (i % 100 == 0)
        {
          /* the others go on meanwhile */
          fb_access_sink_push (fb_access_share_get_sink (b), &e);
          push (log, &e);
        }
    }
  assert_int_equal (full_a, 1);
  assert_int_equal (full_b, 0);
  assert_true (fb_access_share_is_full (a, &not_written));
  assert_true (not_written > 0);
  assert_false (fb_access_share_is_full (b, NULL));
  assert_false (fb_access_log_is_full (log, NULL));
  fb_access_share_close (a);
  fb_access_share_close (b);
  /* C reaches its share and is left open: the log's close writes its notice */
  for (i = 0; i < pushed; i++)
    {
      char buf[1024];
      FbAccessEvent e = allowed_big (i, buf, sizeof buf);
      fb_access_sink_push (fb_access_share_get_sink (c), &e);
    }
  assert_int_equal (full_c, 1);
  test_close_log (log);
  assert_int_equal (full_calls, 0);

  records = all_records (f);
  notices = share_notices (records, &counted);
  assert_int_equal (notices->len, 2);
  for (guint n = 0; n < notices->len; n++)
    assert_int_equal (json_object_get_int_member (notices->pdata[n], "max_size"), SHARED_MAX / FB_LOG_SHARE_PART);
  /* A's, when it was closed */
  o = notices->pdata[0];
  assert_string_equal (json_object_get_string_member (o, "process"), "a");
  assert_string_equal (json_object_get_string_member (o, "session"), "s1");
  assert_int_equal (json_object_get_int_member (o, "records_not_written"), not_written);
  /* C's, by the log's close: the last record */
  o = notices->pdata[1];
  assert_string_equal (json_object_get_string_member (o, "process"), "c");
  assert_false (json_object_has_member (o, "session"));
  assert_ptr_equal (o, records->pdata[records->len - 1]);
  /* nothing disappears without a count: A's and C's, B's 30 and the log's own 30 */
  assert_int_equal (represented (records) + counted, 2 * pushed + 2 * (pushed / 100));
}

/* Groups (sessions of serve) whose members (processes) each stay within
 * their own shares: eight groups of three members each, all writing, never
 * reach the log's budget (members of a quarter each did, and the server
 * stopped); each group is reached, once, and its records past its margin
 * are counted; a member's records count against its group. */
static void
test_group_shares (void **state)
{
  TestLogFile *f = *state;
  int full_calls = 0;
  FbAccessLog *log = open_log (f, 0, SHARED_MAX, &full_calls);
  enum
  {
    GROUPS = 8,
    MEMBERS = 3
  };
  FbAccessShare *groups[GROUPS], *members[GROUPS][MEMBERS];
  int group_full[GROUPS] = { 0 }, member_full[GROUPS][MEMBERS] = { { 0 } };
  g_autoptr (GPtrArray) records = NULL;
  g_autoptr (GPtrArray) notices = NULL;
  guint64 counted;
  const int rounds = 1500; /* 1 KB records: 36 MB offered, 4.5 times the budget */

  for (int g = 0; g < GROUPS; g++)
    {
      char session[16];
      g_snprintf (session, sizeof session, "s%d", g);
      groups[g] = fb_access_log_group_share_new (log, session, count_call, &group_full[g]);
      for (int m = 0; m < MEMBERS; m++)
        {
          char process[16];
          g_snprintf (process, sizeof process, "p%d", m);
          members[g][m] = fb_access_log_share_new (log, groups[g], session, process, count_call, &member_full[g][m]);
        }
    }
  for (int i = 0; i < rounds; i++)
    for (int g = 0; g < GROUPS; g++)
      for (int m = 0; m < MEMBERS; m++)
        {
          char buf[1024];
          FbAccessEvent e = allowed_big (i, buf, sizeof buf);
          fb_access_sink_push (fb_access_share_get_sink (members[g][m]), &e);
        }
  assert_false (fb_access_log_is_full (log, NULL));
  for (int g = 0; g < GROUPS; g++)
    {
      guint64 not_written = 0;
      assert_int_equal (group_full[g], 1);
      assert_true (fb_access_share_is_full (groups[g], &not_written));
      assert_true (not_written > 0);
      /* 1.5 MB each at most: no member reached its own 2 MiB share */
      for (int m = 0; m < MEMBERS; m++)
        assert_int_equal (member_full[g][m], 0);
    }
  for (int g = 0; g < GROUPS; g++)
    {
      for (int m = 0; m < MEMBERS; m++)
        {
          fb_access_share_close (members[g][m]);
          fb_access_share_unref (members[g][m]);
        }
      fb_access_share_close (groups[g]);
      fb_access_share_unref (groups[g]);
    }
  test_close_log (log);
  assert_int_equal (full_calls, 0);
  records = all_records (f);
  notices = share_notices (records, &counted);
  /* only the groups' notices: their members' records count against them */
  for (guint n = 0; n < notices->len; n++)
    assert_false (json_object_has_member (notices->pdata[n], "process"));
  /* nothing disappears without a count */
  assert_int_equal (represented (records) + counted, (guint64)rounds * GROUPS * MEMBERS);
}

/* Rotated files within the budget: seq gap-free across them. */
static void
test_budget_rotation (void **state)
{
  TestLogFile *f = *state;
  int full_calls = 0;
  FbAccessLog *log = open_log (f, 16 * 1024, 8 * 1024 * 1024, &full_calls);
  g_autoptr (GPtrArray) records = NULL;
  g_autoptr (GPtrArray) rotated = NULL;

  for (int i = 0; i < 500; i++)
    {
      char buf[1024];
      FbAccessEvent e = allowed_big (i, buf, sizeof buf);
      push (log, &e);
    }
  test_close_log (log);
  rotated = fb_log_list_rotated (f->path, NULL);
  assert_true (rotated->len >= 20);
  records = all_records (f);
  assert_int_equal (records->len, 500);
  assert_int_equal (full_calls, 0);
}

TEST_DEFINE_MAIN (NULL, NULL, TEST_LOG_FILE_TEST (test_fold_identical), TEST_LOG_FILE_TEST (test_fold_distinct),
                  TEST_LOG_FILE_TEST (test_fold_single), TEST_LOG_FILE_TEST (test_fold_window),
                  TEST_LOG_FILE_TEST (test_fold_many_kinds), TEST_LOG_FILE_TEST (test_fold_too_many_kinds),
                  TEST_LOG_FILE_TEST (test_budget), TEST_LOG_FILE_TEST (test_budget_rotation),
                  TEST_LOG_FILE_TEST (test_share), TEST_LOG_FILE_TEST (test_group_shares))
