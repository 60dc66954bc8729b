/* fusebox — the access-log writer: every line valid JSON with the documented
 * fields; seq gap-free under 8 concurrent pushers that really block on a
 * 4-slot queue; loop-thread pushes never deadlock; rotation keeps seq
 * gap-free across files; hostile names stay valid, exact and terminal-safe;
 * a write error applies back-pressure and loses nothing; with write-through
 * a record is in the file when its push returns, a live subscriber or not. */
#include "tests/unit/test-ipc-util.h"
#include "tests/lib/test-logread.h"

#include "ipc/ipc-log-output.h"

#include "tests/lib/test-host.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/resource.h>

typedef TestLogFile Fixture;

static FbAccessLog *
open_log_with (const FbAccessLogOptions *opts, GMainContext *ctx)
{
  g_autoptr (GError) error = NULL;
  FbAccessLog *log = fb_access_log_new (opts, ctx, &error);

  if (log == NULL)
    fail_msg ("fb_access_log_new: %s", error->message);
  return log;
}

static FbAccessLog *
open_log (const char *path, guint capacity, guint64 rotate, GMainContext *ctx)
{
  FbAccessLogOptions opts = { .path = path, .run_id = "run-test", .rotate_bytes = rotate, .queue_capacity = capacity };

  return open_log_with (&opts, ctx);
}

/* --- every line valid JSON, fields as documented ---------------------- */

/* The members every record has, whatever it records. */
static const char *const always[] = { "op", "path", "access", "decision", "errno", "rule", "rule_origin", "why" };

static void
test_fields (void **state)
{
  Fixture *f = *state;
  FbAccessLog *log = open_log (f->path, 0, 0, NULL);
  FbAccessSink *sink = fb_access_log_get_sink (log);
  g_autoptr (GPtrArray) lines = NULL;
  g_autoptr (GRegex) ts_re = g_regex_new ("^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{6}Z$", 0, 0, NULL);

  FbAccessEvent e = test_event ("open", "/work/a.txt");
  fb_access_sink_push (sink, &e);

  e = test_event ("close", "/work/a.txt");
  e.access = "readwrite";
  e.bytes_read = 10;
  e.bytes_written = 20;
  fb_access_sink_push (sink, &e);

  e = test_event ("rename", "/work/a.tmp");
  e.target = "/work/a.txt";
  e.access = "write";
  e.session = "sess-1";
  fb_access_sink_push (sink, &e);

  e = test_event ("open", "/work/id.pem");
  e.decision = FB_DECISION_DENY;
  e.err = EACCES;
  e.rule = &test_rule_deny;
  e.comm = NULL;
  fb_access_sink_push (sink, &e);

  e = test_event ("lookup", "/work/.git");
  e.decision = FB_DECISION_HIDE;
  e.err = ENOENT;
  e.rule = &test_rule_protected;
  e.ts_us = 0; /* "now" */
  fb_access_sink_push (sink, &e);

  e = test_event ("lookup", "/nothing");
  e.decision = FB_DECISION_HIDE;
  e.err = ENOENT;
  e.rule = &test_rule_default;
  fb_access_sink_push (sink, &e);

  e = test_event ("unlink", "/etc/hosts");
  e.decision = FB_DECISION_READONLY;
  e.err = EROFS;
  e.rule = NULL; /* against the contract, still logged */
  fb_access_sink_push (sink, &e);

  /* Pushed from the creating thread: written synchronously. */
  assert_int_equal (fb_access_log_get_count (log), 7);
  test_close_log (log);

  lines = test_read_lines (f->path);
  assert_int_equal (lines->len, 7);
  for (guint i = 0; i < lines->len; i++)
    {
      g_autoptr (JsonObject) o = test_parse_object (lines->pdata[i]);
      const char *ts = test_json_str (o, "ts");

      assert_non_null (ts);
      if (!g_regex_match (ts_re, ts, 0, NULL))
        fail_msg ("ts '%s' is not RFC 3339 UTC with microseconds", ts);
      assert_string_equal (test_json_str (o, "run"), "run-test");
      assert_int_equal (json_object_get_int_member (o, "seq"), i + 1);
      assert_int_equal (json_object_get_int_member (o, "pid"), 4242);
      for (guint m = 0; m < G_N_ELEMENTS (always); m++)
        if (!json_object_has_member (o, always[m]))
          fail_msg ("record %u has no \"%s\": %s", i + 1, always[m], (const char *)lines->pdata[i]);
      /* error only with a non-zero errno; bytes only on close */
      assert_int_equal (json_object_has_member (o, "error"), json_object_get_int_member (o, "errno") != 0);
      assert_int_equal (json_object_has_member (o, "bytes_read"), strcmp (test_json_str (o, "op"), "close") == 0);
      assert_int_equal (json_object_has_member (o, "bytes_written"), strcmp (test_json_str (o, "op"), "close") == 0);
      assert_int_equal (json_object_has_member (o, "target"), i == 2);
      assert_int_equal (json_object_has_member (o, "session"), i == 2);
    }

  {
    g_autoptr (JsonObject) o = test_parse_object (lines->pdata[0]);
    assert_string_equal (test_json_str (o, "ts"), "2024-05-01T12:00:00.123456Z");
    assert_string_equal (test_json_str (o, "comm"), "tester");
    assert_int_equal (json_object_get_int_member (o, "uid"), 1000);
    assert_string_equal (test_json_str (o, "op"), "open");
    assert_string_equal (test_json_str (o, "path"), "/work/a.txt");
    assert_string_equal (test_json_str (o, "access"), "read");
    assert_string_equal (test_json_str (o, "decision"), "allow");
    assert_int_equal (json_object_get_int_member (o, "errno"), 0);
    assert_int_equal (json_object_get_int_member (o, "rule"), 3);
    assert_string_equal (test_json_str (o, "rule_origin"), "test.json:4:5");
    assert_string_equal (test_json_str (o, "why"), "the workspace is writable");
  }
  {
    g_autoptr (JsonObject) o = test_parse_object (lines->pdata[1]);
    assert_int_equal (json_object_get_int_member (o, "bytes_read"), 10);
    assert_int_equal (json_object_get_int_member (o, "bytes_written"), 20);
  }
  {
    g_autoptr (JsonObject) o = test_parse_object (lines->pdata[2]);
    assert_string_equal (test_json_str (o, "target"), "/work/a.txt");
    assert_string_equal (test_json_str (o, "session"), "sess-1");
  }
  {
    g_autoptr (JsonObject) o = test_parse_object (lines->pdata[3]);
    assert_string_equal (test_json_str (o, "decision"), "deny");
    assert_int_equal (json_object_get_int_member (o, "errno"), EACCES);
    assert_string_equal (test_json_str (o, "error"), "EACCES");
    assert_int_equal (json_object_get_int_member (o, "rule"), 7);
    assert_string_equal (test_json_str (o, "why"), "keys are off limits");
    assert_true (JSON_NODE_HOLDS_NULL (json_object_get_member (o, "comm")));
  }
  {
    g_autoptr (JsonObject) o = test_parse_object (lines->pdata[4]);
    gint64 us = 0;
    assert_string_equal (test_json_str (o, "rule"), "protected");
    assert_string_equal (test_json_str (o, "rule_origin"), "protected_names[.git]");
    assert_string_equal (test_json_str (o, "error"), "ENOENT");
    /* ts_us 0 means "now": this year, not 1970 */
    assert_true (fb_ipc_parse_time (test_json_str (o, "ts"), &us));
    assert_true (us > (gint64)1714564800 * G_USEC_PER_SEC);
  }
  {
    g_autoptr (JsonObject) o = test_parse_object (lines->pdata[5]);
    assert_string_equal (test_json_str (o, "rule"), "default");
    assert_string_equal (test_json_str (o, "why"), "no rule matched");
  }
  {
    g_autoptr (JsonObject) o = test_parse_object (lines->pdata[6]);
    assert_string_equal (test_json_str (o, "decision"), "readonly");
    assert_string_equal (test_json_str (o, "error"), "EROFS");
    assert_true (JSON_NODE_HOLDS_NULL (json_object_get_member (o, "rule")));
  }
}

/* --- 8 concurrent pushers, capacity 4 ---------------------------------- */

#define N_THREADS 8
#define PER_THREAD 2000

typedef struct
{
  FbAccessSink *sink;
  guint id;
} Pusher;

/* Push thread ID's record number I: path "/tID/I", pid 1000 + ID. */
static void
push_numbered (FbAccessSink *sink, guint id, guint i)
{
  char path[64];
  FbAccessEvent e;

  snprintf (path, sizeof path, "/t%u/%u", id, i);
  e = test_event ("open", path);
  e.pid = (pid_t)(1000 + id);
  fb_access_sink_push (sink, &e);
}

static gpointer
pusher_main (gpointer data)
{
  Pusher *p = data;

  for (guint i = 0; i < PER_THREAD; i++)
    push_numbered (p->sink, p->id, i);
  return NULL;
}

/* Wait (without a deadline that could fail on a slow machine: meson's
 * timeout is the bound) until COND holds. */
#define WAIT_FOR(cond)                                                                                                 \
  do                                                                                                                   \
    {                                                                                                                  \
      while (!(cond))                                                                                                  \
        g_usleep (1000);                                                                                               \
    }                                                                                                                  \
  while (0)

static void
check_gap_free_per_thread (GPtrArray *lines, guint n_threads, guint per_thread)
{
  g_autofree gint *next = g_new0 (gint, n_threads);

  assert_int_equal (lines->len, n_threads * per_thread);
  for (guint i = 0; i < lines->len; i++)
    {
      g_autoptr (JsonObject) o = test_parse_object (lines->pdata[i]);
      const char *path = test_json_str (o, "path");
      guint t, k;

      assert_int_equal (json_object_get_int_member (o, "seq"), i + 1);
      if (sscanf (path, "/t%u/%u", &t, &k) != 2 || t >= n_threads)
        fail_msg ("unexpected path %s", path);
      /* each thread's records appear in the order it pushed them */
      assert_int_equal (k, next[t]);
      next[t]++;
    }
}

static void
test_concurrent_pushers_block (void **state)
{
  Fixture *f = *state;
  g_autoptr (GMainContext) ctx = g_main_context_new ();
  FbAccessLog *log = open_log (f->path, 4, 0, ctx);
  Pusher pushers[N_THREADS];
  GThread *threads[N_THREADS];
  g_autoptr (GPtrArray) lines = NULL;

  for (guint i = 0; i < N_THREADS; i++)
    {
      pushers[i] = (Pusher){ fb_access_log_get_sink (log), i };
      threads[i] = g_thread_new ("pusher", pusher_main, &pushers[i]);
    }
  /* The loop is not running yet: the 4 slots fill and pushers must wait. */
  WAIT_FOR (fb_access_log_get_queued (log) == 4 && fb_access_log_get_blocked_pushes (log) >= 1);
  assert_int_equal (fb_access_log_get_count (log), 0);

  while (fb_access_log_get_count (log) < N_THREADS * PER_THREAD)
    g_main_context_iteration (ctx, TRUE);
  for (guint i = 0; i < N_THREADS; i++)
    g_thread_join (threads[i]);
  /* More than the first: pushers kept blocking while the loop ran. */
  assert_true (fb_access_log_get_blocked_pushes (log) > N_THREADS);
  test_close_log (log);

  lines = test_read_lines (f->path);
  check_gap_free_per_thread (lines, N_THREADS, PER_THREAD);
}

/* The same with the loop (DATA) on its own thread, as in the daemon. */
static gpointer
loop_main (gpointer data)
{
  GMainLoop *loop = data;
  GMainContext *ctx = g_main_loop_get_context (loop);

  g_main_context_push_thread_default (ctx);
  g_main_loop_run (loop);
  g_main_context_pop_thread_default (ctx);
  return NULL;
}

/* Runs on the loop thread, which did not create the log: with 4 slots, the
 * fifth push would wait for this very thread if it queued. */
static gboolean
push_from_loop_idle (gpointer data)
{
  Pusher *p = data;

  pusher_main (p);
  return G_SOURCE_REMOVE;
}

static gboolean
quit_idle (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

static void
test_concurrent_pushers_loop_thread (void **state)
{
  Fixture *f = *state;
  g_autoptr (GMainContext) ctx = g_main_context_new ();
  g_autoptr (GMainLoop) loop = g_main_loop_new (ctx, FALSE);
  FbAccessLog *log = open_log (f->path, 4, 0, ctx);
  Pusher pushers[N_THREADS + 1];
  GThread *threads[N_THREADS];
  GThread *looper;
  g_autoptr (GPtrArray) lines = NULL;
  GSource *idle;

  pushers[N_THREADS] = (Pusher){ fb_access_log_get_sink (log), N_THREADS };
  idle = g_idle_source_new ();
  g_source_set_callback (idle, push_from_loop_idle, &pushers[N_THREADS], NULL);
  g_source_attach (idle, ctx);
  g_source_unref (idle);
  looper = g_thread_new ("loop", loop_main, loop);
  for (guint i = 0; i < N_THREADS; i++)
    {
      pushers[i] = (Pusher){ fb_access_log_get_sink (log), i };
      threads[i] = g_thread_new ("pusher", pusher_main, &pushers[i]);
    }
  for (guint i = 0; i < N_THREADS; i++)
    g_thread_join (threads[i]);
  /* Every push returned; the loop still owns the file until it stops. */
  WAIT_FOR (fb_access_log_get_count (log) == (N_THREADS + 1) * PER_THREAD);
  idle = g_idle_source_new ();
  g_source_set_callback (idle, quit_idle, loop, NULL);
  g_source_attach (idle, ctx);
  g_source_unref (idle);
  g_thread_join (looper);
  test_close_log (log);

  lines = test_read_lines (f->path);
  check_gap_free_per_thread (lines, N_THREADS + 1, PER_THREAD);
}

/* --- the ring's byte budget: hostile names can't make it grow without bound */

#define BIG_RECORDS 2000

static gpointer
big_pusher_main (gpointer data)
{
  FbAccessSink *sink = data;
  /* 4000 control bytes: each escaped to 6, in path and target */
  g_autofree char *name = g_malloc (4002);

  name[0] = '/';
  memset (name + 1, '\x01', 4000);
  name[4001] = '\0';
  for (guint i = 0; i < BIG_RECORDS; i++)
    {
      FbAccessEvent e = test_event ("rename", name);

      e.target = name;
      fb_access_sink_push (sink, &e);
    }
  return NULL;
}

static void
test_queue_byte_budget (void **state)
{
  Fixture *f = *state;
  g_autoptr (GMainContext) ctx = g_main_context_new ();
  FbAccessLog *log = open_log (f->path, 0, 0, ctx); /* 4096 records */
  GThread *t;
  guint queued;
  struct stat st;

  t = g_thread_new ("big", big_pusher_main, fb_access_log_get_sink (log));
  WAIT_FOR (fb_access_log_get_blocked_pushes (log) >= 1);
  queued = fb_access_log_get_queued (log);
  /* ~48 KB a body: the 16 MiB budget stops it long before 4096 records */
  assert_true (queued >= 300);
  assert_true (queued <= 16 * 1024 * 1024 / 48000 + 1);

  while (fb_access_log_get_count (log) < BIG_RECORDS)
    g_main_context_iteration (ctx, TRUE);
  g_thread_join (t);
  test_close_log (log);
  assert_int_equal (stat (f->path, &st), 0);
  assert_true (st.st_size > (off_t)BIG_RECORDS * 48000);
}

/* --- a push from the loop's thread with a full queue ------------------- */

static gpointer
one_push_main (gpointer data)
{
  Pusher *p = data;
  FbAccessEvent e = test_event ("open", "/t0/0");

  fb_access_sink_push (p->sink, &e);
  e.path = "/t0/1";
  fb_access_sink_push (p->sink, &e); /* blocks: capacity 1 */
  return NULL;
}

typedef struct
{
  FbAccessLog *log;
  guint pushed;
} LoopPush;

static gboolean
push_from_dispatch (gpointer data)
{
  LoopPush *lp = data;
  FbAccessEvent e = test_event ("open", "/loop");

  /* Inside the loop's dispatch, with the queue full: must not wait. */
  for (guint i = 0; i < 50; i++)
    fb_access_sink_push (fb_access_log_get_sink (lp->log), &e);
  lp->pushed += 50;
  return G_SOURCE_REMOVE;
}

static void
test_loop_thread_push_never_deadlocks (void **state)
{
  Fixture *f = *state;
  g_autoptr (GMainContext) ctx = g_main_context_new ();
  FbAccessLog *log = open_log (f->path, 1, 0, ctx);
  Pusher p = { fb_access_log_get_sink (log), 0 };
  GThread *t;
  LoopPush lp = { log, 0 };
  GSource *idle;
  g_autoptr (GPtrArray) lines = NULL;

  t = g_thread_new ("pusher", one_push_main, &p);
  WAIT_FOR (fb_access_log_get_queued (log) == 1 && fb_access_log_get_blocked_pushes (log) == 1);

  /* 1. From the creating thread, loop not running: synchronous. */
  {
    FbAccessEvent e = test_event ("open", "/main");
    fb_access_sink_push (p.sink, &e);
  }
  /* It went after the one already queued (and maybe after the blocked one,
   * which the drain let in). */
  assert_true (fb_access_log_get_count (log) >= 2);

  /* 2. From a dispatch on the loop (the remote API's case). */
  idle = g_idle_source_new ();
  g_source_set_priority (idle, G_PRIORITY_HIGH);
  g_source_set_callback (idle, push_from_dispatch, &lp, NULL);
  g_source_attach (idle, ctx);
  g_source_unref (idle);
  while (lp.pushed == 0 || fb_access_log_get_count (log) < 53)
    g_main_context_iteration (ctx, TRUE);
  g_thread_join (t);
  test_close_log (log);

  lines = test_read_lines (f->path);
  assert_int_equal (lines->len, 53);
  guint main_at = 0;
  for (guint i = 0; i < lines->len; i++)
    {
      g_autoptr (JsonObject) o = test_parse_object (lines->pdata[i]);
      assert_int_equal (json_object_get_int_member (o, "seq"), i + 1);
      if (i == 0)
        assert_string_equal (test_json_str (o, "path"), "/t0/0");
      if (strcmp (test_json_str (o, "path"), "/main") == 0)
        main_at = i;
    }
  /* after the queued record, at the latest after the one the drain let in */
  assert_true (main_at == 1 || main_at == 2);
}

/* --- rotation ------------------------------------------------------------ */

static void
test_rotation_gap_free (void **state)
{
  Fixture *f = *state;
  const guint64 rotate = 4096;
  const guint n = 600;
  FbAccessLog *log = open_log (f->path, 0, rotate, NULL);
  g_autoptr (GPtrArray) rotated = NULL;
  g_autoptr (GError) error = NULL;
  guint64 expect = 1;
  FbLogReaderStats stats;

  test_push_paths (fb_access_log_get_sink (log), "/work/file-", n, NULL);
  test_close_log (log);

  rotated = fb_log_list_rotated (f->path, &error);
  assert_non_null (rotated);
  /* ~300 bytes a record, 600 records, 4 KiB files */
  assert_true (rotated->len >= 10);
  for (guint i = 0; i < rotated->len; i++)
    {
      FbRotatedFile *rf = rotated->pdata[i];
      g_autoptr (GPtrArray) lines = test_read_lines (rf->path);
      g_autofree char *base = g_path_get_basename (rf->path);
      g_autofree char *expect_name = fb_log_rotated_name ("access.jsonl", expect, expect + lines->len - 1, 0);
      struct stat st;

      /* The name says which records the file holds, and `ls` order is seq order. */
      assert_string_equal (base, expect_name);
      assert_int_equal (rf->first_seq, expect);
      assert_int_equal (rf->last_seq, expect + lines->len - 1);
      for (guint j = 0; j < lines->len; j++)
        {
          g_autoptr (JsonObject) o = test_parse_object (lines->pdata[j]);
          assert_int_equal (json_object_get_int_member (o, "seq"), expect + j);
        }
      expect += lines->len;
      /* rotated once past the size, at a record boundary */
      assert_int_equal (stat (rf->path, &st), 0);
      assert_true ((guint64)st.st_size >= rotate);
      assert_true ((guint64)st.st_size < rotate + 512);
      if (i > 0)
        assert_true (strcmp (((FbRotatedFile *)rotated->pdata[i - 1])->path, rf->path) < 0);
    }
  {
    g_autoptr (GPtrArray) lines = test_read_lines (f->path);
    for (guint j = 0; j < lines->len; j++)
      {
        g_autoptr (JsonObject) o = test_parse_object (lines->pdata[j]);
        assert_int_equal (json_object_get_int_member (o, "seq"), expect + j);
      }
    expect += lines->len;
  }
  assert_int_equal (expect, n + 1);

  /* The reader takes them in order. */
  assert_int_equal (test_log_read_back (f->path, "the rotated log", false, &stats), n);
  assert_int_equal (stats.files, rotated->len + 1);
  assert_int_equal (stats.gaps, 0);
  assert_int_equal (stats.duplicates, 0);
}

/* A second writer on the same file never overwrites a rotated file. */
static void
test_rotation_name_collision (void **state)
{
  Fixture *f = *state;
  g_autoptr (GPtrArray) rotated = NULL;

  for (int round = 0; round < 2; round++)
    {
      /* rotate after every record: names 1-1 .. 5-5 both rounds */
      FbAccessLog *log = open_log (f->path, 0, 1, NULL);

      for (guint i = 0; i < 5; i++)
        {
          FbAccessEvent e = test_event ("open", "/work/x");
          fb_access_sink_push (fb_access_log_get_sink (log), &e);
        }
      test_close_log (log);
      /* the remainder of round 0 would otherwise mix into round 1's names */
      if (round == 0)
        g_unlink (f->path);
    }
  rotated = fb_log_list_rotated (f->path, NULL);
  assert_non_null (rotated);
  assert_true (rotated->len >= 2);
  /* same seq range twice: the second got a ".1" suffix, and is listed
   * after the first (in the order written) */
  {
    int first = -1, second = -1;

    for (guint i = 0; i < rotated->len; i++)
      {
        FbRotatedFile *rf = rotated->pdata[i];

        if (rf->first_seq == 1 && rf->last_seq == 1 && rf->n == 0)
          first = (int)i;
        if (rf->first_seq == 1 && rf->last_seq == 1 && rf->n == 1)
          second = (int)i;
      }
    assert_true (first >= 0 && second > first);
  }
}

/* --- hostile names ------------------------------------------------------- */

static const struct
{
  const char *path;
  gboolean valid_utf8;
} hostile[] = {
  { "/work/quote\"back\\slash", TRUE },
  { "/work/nl\nret\rtab\tbell\a", TRUE },
  { "/work/\x1b]0;pwned\a\x1b[31mred", TRUE },
  { "/work/del\x7f", TRUE },
  { "/work/c1-csi\xc2\x9b"
    "31m",
    TRUE },
  { "/work/line-sep\xe2\x80\xa8para\xe2\x80\xa9", TRUE },
  { "/work/caf\xc3\xa9-\xe6\x97\xa5\xe6\x9c\xac-\xf0\x9f\x98\x80", TRUE },
  { "/work/bad\xff\xfe", FALSE },
  { "/work/overlong\xc0\xaf", FALSE },
  { "/work/surrogate\xed\xa0\x80", FALSE },
  { "/work/cut\xe6\x97", FALSE },
  { "/work/latin1-caf\xe9", FALSE },
};

static void
test_hostile_names (void **state)
{
  Fixture *f = *state;
  FbAccessLog *log = open_log (f->path, 0, 0, NULL);
  g_autoptr (GPtrArray) lines = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (hostile); i++)
    {
      FbAccessEvent e = test_event ("rename", hostile[i].path);

      e.target = hostile[i].path;
      e.comm = hostile[i].path + strlen ("/work/");
      fb_access_sink_push (fb_access_log_get_sink (log), &e);
    }
  test_close_log (log);

  lines = test_read_lines (f->path);
  assert_int_equal (lines->len, G_N_ELEMENTS (hostile));
  for (guint i = 0; i < lines->len; i++)
    {
      const char *line = lines->pdata[i];
      g_autoptr (JsonObject) o = test_parse_object (line);
      const char *fields[] = { "path", "target", "comm" };

      /* Terminal-safe raw line: no C0, DEL or C1 control, no U+2028/9. */
      for (const char *p = line; *p != '\0'; p++)
        {
          guchar b = (guchar)*p;
          if (b < 0x20 || b == 0x7f || (b == 0xc2 && (guchar)p[1] >= 0x80 && (guchar)p[1] <= 0x9f))
            fail_msg ("raw control byte 0x%02x in line %u: %s", b, i, line);
        }
      assert_null (strstr (line, "\xe2\x80\xa8"));
      assert_null (strstr (line, "\xe2\x80\xa9"));

      for (guint k = 0; k < G_N_ELEMENTS (fields); k++)
        {
          const char *expect = k == 2 ? hostile[i].path + strlen ("/work/") : hostile[i].path;
          g_autofree char *b64_name = g_strconcat (fields[k], "_b64", NULL);
          const char *value = test_json_str (o, fields[k]);

          assert_non_null (value);
          if (hostile[i].valid_utf8)
            {
              /* exact, and no marker */
              assert_string_equal (value, expect);
              assert_false (json_object_has_member (o, b64_name));
            }
          else
            {
              gsize len = 0;
              g_autofree guchar *raw = g_base64_decode (test_json_str (o, b64_name), &len);

              /* lossy with U+FFFD, and the exact bytes beside it */
              assert_non_null (strstr (value, "\xef\xbf\xbd"));
              assert_int_equal (len, strlen (expect));
              assert_memory_equal (raw, expect, len);
            }
        }
    }
}

static void
test_escape_function (void **state)
{
  g_autoptr (GString) s = g_string_new (NULL);

  assert_true (fb_json_append_string (s, "a\"b\\c\x01\x1f\x7f"));
  assert_string_equal (s->str, "\"a\\\"b\\\\c\\u0001\\u001f\\u007f\"");
  g_string_truncate (s, 0);
  assert_false (fb_json_append_string (s, "x\xff"));
  assert_string_equal (s->str, "\"x\\ufffd\"");
  g_string_truncate (s, 0);
  assert_true (fb_json_append_string (s, NULL));
  assert_string_equal (s->str, "null");
}

/* --- a torn line left by a crash doesn't swallow our first record ----- */

static void
test_repairs_partial_last_line (void **state)
{
  Fixture *f = *state;
  FbAccessLog *log;
  g_autoptr (GPtrArray) lines = NULL;

  test_write_file (f->path, "{\"ts\":\"2024-05-01T00:00:00.000000Z\",\"run\":\"old\",\"se");
  log = open_log (f->path, 0, 0, NULL);
  {
    FbAccessEvent e = test_event ("open", "/work/after-crash");
    fb_access_sink_push (fb_access_log_get_sink (log), &e);
  }
  test_close_log (log);
  lines = test_read_lines (f->path);
  assert_int_equal (lines->len, 2);
  {
    g_autoptr (JsonObject) o = test_parse_object (lines->pdata[1]);
    assert_string_equal (test_json_str (o, "path"), "/work/after-crash");
  }
}

/* --- subscribers --------------------------------------------------------- */

static void
collect_line (const char *line, gpointer data)
{
  g_ptr_array_add (data, g_strdup (line));
}

static void
test_subscribers (void **state)
{
  Fixture *f = *state;
  FbAccessLog *log = open_log (f->path, 0, 0, NULL);
  g_autoptr (GPtrArray) seen = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) lines = NULL;
  guint id = fb_access_log_subscribe (log, collect_line, seen, NULL);

  for (guint i = 0; i < 3; i++)
    {
      FbAccessEvent e = test_event ("open", "/work/s");
      fb_access_sink_push (fb_access_log_get_sink (log), &e);
    }
  fb_access_log_unsubscribe (log, id);
  {
    FbAccessEvent e = test_event ("open", "/work/after");
    fb_access_sink_push (fb_access_log_get_sink (log), &e);
  }
  test_close_log (log);
  lines = test_read_lines (f->path);
  assert_int_equal (seen->len, 3);
  for (guint i = 0; i < seen->len; i++)
    assert_string_equal (seen->pdata[i], lines->pdata[i]);
}

/* --- a write error: back-pressure, then everything arrives ------------ */

static void
test_write_error_loses_nothing (void **state)
{
  Fixture *f = *state;
  struct rlimit old, small;
  FbAccessLog *log;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) lines = NULL;
  const guint n = 200;

  /* RLIMIT_FSIZE makes write(2) fail with EFBIG past 4 KiB (SIGXFSZ
   * ignored): a full disk without a special filesystem. */
  signal (SIGXFSZ, SIG_IGN);
  assert_int_equal (getrlimit (RLIMIT_FSIZE, &old), 0);
  small = old;
  small.rlim_cur = 4096;
  assert_int_equal (setrlimit (RLIMIT_FSIZE, &small), 0);

  log = open_log (f->path, 0, 0, NULL);
  test_push_paths (fb_access_log_get_sink (log), "/work/f", n, NULL);
  /* Only what fitted is reported as written. */
  assert_true (fb_access_log_get_count (log) < n);
  assert_false (fb_access_log_drain (log, &error));
  assert_non_null (error);
  assert_non_null (strstr (error->message, f->path));
  g_clear_error (&error);

  assert_int_equal (setrlimit (RLIMIT_FSIZE, &old), 0);
  assert_true (fb_access_log_drain (log, &error));
  assert_int_equal (fb_access_log_get_count (log), n);
  test_close_log (log);
  signal (SIGXFSZ, SIG_DFL);

  lines = test_read_lines (f->path);
  assert_int_equal (lines->len, n);
  for (guint i = 0; i < lines->len; i++)
    {
      g_autoptr (JsonObject) o = test_parse_object (lines->pdata[i]);
      assert_int_equal (json_object_get_int_member (o, "seq"), i + 1);
    }
}

/* --- write-through: the record is in the file when the push returns ---- */

static FbAccessLog *
open_log_through (const char *path, guint capacity, GMainContext *ctx)
{
  FbAccessLogOptions opts = { .path = path, .run_id = "run-test", .queue_capacity = capacity, .write_through = TRUE };

  return open_log_with (&opts, ctx);
}

/* Fewer than the queue's 4096 slots in all: without write-through the
 * pushes would all be queued (and the test fail) rather than block. */
#define THROUGH_PER_THREAD 400

/* A thread that pushes N records /tID/0.. into LOG, then sets DONE and
 * wakes CTX (if any) for a loop that waits for it. */
typedef struct
{
  FbAccessLog *log;
  guint id;
  guint n;
  guint late; /* pushes that returned before their record was counted */
  gint done;  /* atomic */
  GMainContext *ctx;
} ThroughPusher;

static gpointer
through_pusher_main (gpointer data)
{
  ThroughPusher *p = data;
  g_autofree char *prefix = g_strdup_printf ("/t%u/", p->id);

  /* Late: this thread's i + 1 records are in the file by the time its push
   * of the last returns, so at least that many in all. */
  p->late = test_push_paths (fb_access_log_get_sink (p->log), prefix, p->n, p->log);
  g_atomic_int_set (&p->done, 1);
  if (p->ctx != NULL)
    g_main_context_wakeup (p->ctx);
  return NULL;
}

/* 8 threads push with the loop never run: every record is written by its
 * pusher before the push returns, seq gap-free, each thread's in order,
 * nothing queued. */
static void
test_write_through (void **state)
{
  Fixture *f = *state;
  g_autoptr (GMainContext) ctx = g_main_context_new ();
  FbAccessLog *log = open_log_through (f->path, 0, ctx);
  ThroughPusher pushers[N_THREADS];
  GThread *threads[N_THREADS];
  g_autoptr (GPtrArray) lines = NULL;

  for (guint i = 0; i < N_THREADS; i++)
    {
      pushers[i] = (ThroughPusher){ .log = log, .id = i, .n = THROUGH_PER_THREAD };
      threads[i] = g_thread_new ("pusher", through_pusher_main, &pushers[i]);
    }
  for (guint i = 0; i < N_THREADS; i++)
    g_thread_join (threads[i]);
  for (guint i = 0; i < N_THREADS; i++)
    assert_int_equal (pushers[i].late, 0);
  assert_int_equal (fb_access_log_get_count (log), N_THREADS * THROUGH_PER_THREAD);
  assert_int_equal (fb_access_log_get_queued (log), 0);
  lines = test_read_lines (f->path); /* before close: already in the file */
  check_gap_free_per_thread (lines, N_THREADS, THROUGH_PER_THREAD);
  test_close_log (log);
}

static gpointer
push_one_main (gpointer data)
{
  ThroughPusher *p = data;
  char path[64];
  FbAccessEvent e;

  snprintf (path, sizeof path, "/one/%u", p->id);
  e = test_event ("open", path);
  fb_access_sink_push (fb_access_log_get_sink (p->log), &e);
  return NULL;
}

static void
push_one_from_thread (FbAccessLog *log, guint id)
{
  ThroughPusher p = { .log = log, .id = id };

  g_thread_join (g_thread_new ("one", push_one_main, &p));
}

/* A subscriber does not turn write-through off: a push from another
 * thread has its record in the file when it returns, subscriber or not;
 * the subscriber gets the line on the loop's thread at its next turn, and
 * one that left gets nothing more. */
static void
test_write_through_subscriber (void **state)
{
  Fixture *f = *state;
  g_autoptr (GMainContext) ctx = g_main_context_new ();
  FbAccessLog *log = open_log_through (f->path, 0, ctx);
  g_autoptr (GPtrArray) seen = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) lines = NULL;
  guint id = fb_access_log_subscribe (log, collect_line, seen, NULL);

  push_one_from_thread (log, 0);
  assert_int_equal (fb_access_log_get_count (log), 1);
  assert_int_equal (fb_access_log_get_queued (log), 0);
  assert_int_equal (seen->len, 0); /* its callback runs on the loop's thread */
  while (seen->len < 1)
    g_main_context_iteration (ctx, TRUE);

  push_one_from_thread (log, 1);
  assert_int_equal (fb_access_log_get_count (log), 2);
  assert_int_equal (fb_access_log_get_queued (log), 0);
  fb_access_log_unsubscribe (log, id); /* gets /one/1 first */
  assert_int_equal (seen->len, 2);
  push_one_from_thread (log, 2);
  assert_int_equal (fb_access_log_get_count (log), 3);
  assert_int_equal (fb_access_log_get_queued (log), 0);
  while (g_main_context_iteration (ctx, FALSE))
    ;
  assert_int_equal (seen->len, 2);

  lines = test_read_lines (f->path);
  test_assert_seq_paths (lines, 3, "/one/");
  assert_string_equal (seen->pdata[0], lines->pdata[0]);
  assert_string_equal (seen->pdata[1], lines->pdata[1]);
  test_close_log (log);
}

/* More records than wait for the subscribers' loop (its bound): every
 * record in the file before its push returns, the subscriber gets every
 * one in seq order, and the pusher, not memory, waits for the loop. */
static void
test_write_through_subscriber_bound (void **state)
{
  Fixture *f = *state;
  g_autoptr (GMainContext) ctx = g_main_context_new ();
  FbAccessLog *log = open_log_through (f->path, 0, ctx);
  g_autoptr (GPtrArray) seen = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) lines = NULL;
  ThroughPusher p = { .log = log, .n = 2 * FB_LOG_SUBSCRIBERS_MAX_LINES + 100, .ctx = ctx };
  GThread *thread;

  fb_access_log_subscribe (log, collect_line, seen, NULL);
  thread = g_thread_new ("pusher", through_pusher_main, &p);
  while (!g_atomic_int_get (&p.done) || seen->len < p.n)
    g_main_context_iteration (ctx, TRUE);
  g_thread_join (thread);
  assert_int_equal (p.late, 0);
  lines = test_read_lines (f->path);
  check_gap_free_per_thread (lines, 1, p.n);
  assert_int_equal (seen->len, p.n);
  for (guint i = 0; i < seen->len; i++)
    assert_string_equal (seen->pdata[i], lines->pdata[i]);
  test_close_log (log);
}

typedef struct
{
  FbAccessLog *log;
  guint n;
} ManyPushes;

static gpointer
push_many_main (gpointer data)
{
  ManyPushes *m = data;

  test_push_paths (fb_access_log_get_sink (m->log), "/t0/", m->n, NULL);
  return NULL;
}

/* A write error under write-through: what did not fit stays queued or
 * buffered (the pushers fall back to the queue), and all of it arrives
 * once the file takes data again. */
static void
test_write_through_error_loses_nothing (void **state)
{
  Fixture *f = *state;
  struct rlimit old, small;
  g_autoptr (GMainContext) ctx = g_main_context_new ();
  FbAccessLog *log;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) lines = NULL;
  ManyPushes m = { NULL, 200 };

  signal (SIGXFSZ, SIG_IGN);
  assert_int_equal (getrlimit (RLIMIT_FSIZE, &old), 0);
  small = old;
  small.rlim_cur = 4096;
  assert_int_equal (setrlimit (RLIMIT_FSIZE, &small), 0);

  log = open_log_through (f->path, 0, ctx);
  m.log = log;
  g_thread_join (g_thread_new ("many", push_many_main, &m));
  assert_true (fb_access_log_get_count (log) > 0);
  assert_true (fb_access_log_get_count (log) < m.n);
  assert_true (fb_access_log_get_queued (log) > 0); /* the fallback */
  assert_false (fb_access_log_drain (log, &error));
  g_clear_error (&error);

  assert_int_equal (setrlimit (RLIMIT_FSIZE, &old), 0);
  assert_true (fb_access_log_drain (log, &error));
  assert_int_equal (fb_access_log_get_count (log), m.n);
  test_close_log (log);
  signal (SIGXFSZ, SIG_DFL);

  lines = test_read_lines (f->path);
  test_assert_seq_paths (lines, m.n, "/t0/");
}

static void
test_bad_paths (void **state)
{
  Fixture *f = *state;
  g_autofree char *missing = g_build_filename (f->dir, "no", "such", "access.jsonl", NULL);
  FbAccessLogOptions opts = { .path = missing, .run_id = "r" };
  g_autoptr (GError) error = NULL;
  FbAccessLog *log = fb_access_log_new (&opts, NULL, &error);

  assert_null (log);
  assert_true (g_error_matches (error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND));
  assert_non_null (strstr (error->message, "no/such"));
  g_clear_error (&error);

  opts.path = f->dir; /* a directory */
  log = fb_access_log_new (&opts, NULL, &error);
  assert_null (log);
  assert_non_null (error);
}

/* The log opened at a name where another user mounted a FUSE filesystem
 * whose server never answers (in a directory others may write, such as a
 * sticky /var/tmp; or right after a rotation moved the live file away): it
 * is refused, saying why, and nothing is asked of the mount.  The open
 * runs in a thread; a connection still asked after 10 s is aborted. */
typedef struct
{
  const char *path;
  FbLogFile *file;
  GError *error;
  gint done;
} LogOpen;

static void *
log_open_run (void *p)
{
  LogOpen *o = p;

  o->file = fb_log_file_open (o->path, 0, &o->error);
  g_atomic_int_set (&o->done, 1);
  return NULL;
}

static void
test_log_at_a_mount (void **state)
{
  g_autofree char *dir = NULL, *path = NULL, *opts = NULL;
  struct statx stx;
  LogOpen o = { 0 };
  pthread_t thread;
  int fd;

  (void)state;
  if (geteuid () != 0 || test_host_lacks ("fuse") != NULL)
    test_skip_test (false, "another user's FUSE mount needs root and /dev/fuse");
  dir = test_tmpdir ("fusebox-logmount");
  path = g_build_filename (dir, "access.jsonl", NULL);
  test_write (path, "", 0644);
  fd = open ("/dev/fuse", O_RDWR | O_CLOEXEC);
  assert_true (fd >= 0);
  opts = g_strdup_printf ("fd=%d,rootmode=100000,user_id=1000,group_id=1000,allow_other", fd);
  assert_int_equal (mount ("fusebox-test", path, "fuse", MS_NOSUID | MS_NODEV, opts), 0);
  assert_int_equal (statx (AT_FDCWD, path, AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &stx), 0);

  o.path = path;
  assert_int_equal (pthread_create (&thread, NULL, log_open_run, &o), 0);
  for (int waited = 0; waited < 10000 && !g_atomic_int_get (&o.done); waited += 20)
    g_usleep (20 * 1000);
  if (!g_atomic_int_get (&o.done))
    test_fuse_abort (makedev (stx.stx_dev_major, stx.stx_dev_minor));
  pthread_join (thread, NULL);
  umount2 (path, MNT_DETACH);
  close (fd);
  unlink (path);
  rmdir (dir);
  if (o.file != NULL)
    {
      FbLogOutput *out = fb_log_file_output (o.file);
      out->ops->close (out, NULL);
      out->ops->free (out);
      fail_msg ("the log was opened at another user's mount");
    }
  assert_non_null (o.error);
  if (strstr (o.error->message, "another filesystem is mounted at its name") == NULL)
    fail_msg ("the log at a mount was refused, but not for that (%s), or only after asking it", o.error->message);
  g_clear_error (&o.error);
}

/* fb_ipc_parse_time reads the writer's own form itself, and must give
 * what GLib's parser gives for it (and for every other form, which GLib
 * reads): times across the calendar, leap days, the ends of months and
 * years, with and without microseconds; dates that are none refused by
 * both; offsets and a time without a zone (local) left to GLib. */
static void
test_parse_time_like_glib (void **state)
{
  g_autoptr (GTimeZone) local = g_time_zone_new_local ();
  g_autoptr (GRand) rand = g_rand_new_with_seed (20261205);
  g_autoptr (GPtrArray) texts = g_ptr_array_new_with_free_func (g_free);
  const char *fixed[] = {
    "1970-01-01T00:00:00Z",         "1969-12-31T23:59:59.999999Z",  "2000-02-29T12:00:00.000001Z",
    "2024-02-29T23:59:59Z",         "2100-02-28T00:00:00Z",         "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999Z",  "2023-02-29T00:00:00Z",         "2100-02-29T00:00:00Z",
    "2024-13-01T00:00:00Z",         "2024-04-31T00:00:00Z",         "2024-05-01T24:00:00Z",
    "2024-05-01T12:60:00Z",         "2024-05-01T12:00:60Z",         "2024-05-01T12:00:00.5Z",
    "2024-05-01T12:00:00.1234567Z", "2024-05-01T12:00:00+02:00",    "2024-05-01T12:00:00",
    "2024-05-01 12:00:00Z",         "2024-05-01T12:00:00.000000ZZ", "2024-05-01T12:00:00.00000xZ",
    "0000-01-01T00:00:00Z",
  };

  for (guint i = 0; i < G_N_ELEMENTS (fixed); i++)
    g_ptr_array_add (texts, g_strdup (fixed[i]));
  for (guint i = 0; i < 20000; i++)
    {
      int y = g_rand_int_range (rand, 1, 10000), mo = g_rand_int_range (rand, 1, 13);
      int d = g_rand_int_range (rand, 1, 32), h = g_rand_int_range (rand, 0, 24);
      int mi = g_rand_int_range (rand, 0, 60), sec = g_rand_int_range (rand, 0, 60);

      if (g_rand_boolean (rand))
        g_ptr_array_add (texts, g_strdup_printf ("%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", y, mo, d, h, mi, sec,
                                                 g_rand_int_range (rand, 0, 1000000)));
      else
        g_ptr_array_add (texts, g_strdup_printf ("%04d-%02d-%02dT%02d:%02d:%02dZ", y, mo, d, h, mi, sec));
    }
  for (guint i = 0; i < texts->len; i++)
    {
      const char *text = texts->pdata[i];
      g_autoptr (GDateTime) dt = g_date_time_new_from_iso8601 (text, local);
      gint64 us = 0;
      gboolean ok = fb_ipc_parse_time (text, &us);

      if (ok != (dt != NULL))
        fail_msg ("%s: fusebox %s it, GLib %s", text, ok ? "takes" : "refuses", dt != NULL ? "takes" : "refuses");
      if (dt != NULL && us != g_date_time_to_unix (dt) * G_USEC_PER_SEC + g_date_time_get_microsecond (dt))
        fail_msg ("%s: %" G_GINT64_FORMAT " us, GLib %" G_GINT64_FORMAT, text, us,
                  g_date_time_to_unix (dt) * G_USEC_PER_SEC + g_date_time_get_microsecond (dt));
    }
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_log_at_a_mount), cmocka_unit_test (test_parse_time_like_glib),
                  TEST_LOG_FILE_TEST (test_fields), TEST_LOG_FILE_TEST (test_concurrent_pushers_block),
                  TEST_LOG_FILE_TEST (test_concurrent_pushers_loop_thread),
                  TEST_LOG_FILE_TEST (test_loop_thread_push_never_deadlocks),
                  TEST_LOG_FILE_TEST (test_queue_byte_budget), TEST_LOG_FILE_TEST (test_rotation_gap_free),
                  TEST_LOG_FILE_TEST (test_rotation_name_collision), TEST_LOG_FILE_TEST (test_hostile_names),
                  cmocka_unit_test (test_escape_function), TEST_LOG_FILE_TEST (test_repairs_partial_last_line),
                  TEST_LOG_FILE_TEST (test_subscribers), TEST_LOG_FILE_TEST (test_write_error_loses_nothing),
                  TEST_LOG_FILE_TEST (test_bad_paths), TEST_LOG_FILE_TEST (test_write_through),
                  TEST_LOG_FILE_TEST (test_write_through_subscriber),
                  TEST_LOG_FILE_TEST (test_write_through_subscriber_bound),
                  TEST_LOG_FILE_TEST (test_write_through_error_loses_nothing))
