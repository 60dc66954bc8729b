/* fusebox — the access log's systemd journal output: the native protocol's
 * encoder, and the output against a real socket the test binds where the
 * journal would be.
 *
 *  - A field is NAME=VALUE\n, or length-prefixed when its value holds a
 *    newline or a NUL; names journald refuses are never written.
 *  - One entry per record, in seq order, with MESSAGE, PRIORITY,
 *    SYSLOG_IDENTIFIER=fusebox and every member of the file's record as
 *    FUSEBOX_<NAME>, with the record's exact values.
 *  - Hostile names (a newline and a field after it, invalid UTF-8, an "=")
 *    forge no field: each field is there once, with the exact bytes.
 *  - An entry too large for a datagram goes as a sealed memfd.
 *  - A journal that is absent, or that takes nothing (a socket no one
 *    reads), costs the file no record; what the journal missed is counted
 *    in the log's last record. */
#include "tests/unit/test-ipc-util.h"

#include "ipc/ipc-log-output.h"
#include "tests/lib/test-journal.h"
#include "tests/lib/test-table.h"

#include <sys/socket.h>

typedef struct
{
  TestLogFile log; /* the temporary directory and the log's path */
  char *socket;    /* where the journal is said to be */
  int fd;          /* bound there, or -1 */
} Fixture;

static int
setup (void **state)
{
  Fixture *f = g_new0 (Fixture, 1);

  test_log_file_init (&f->log);
  f->socket = g_build_filename (f->log.dir, "journal.socket", NULL);
  f->fd = -1;
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  Fixture *f = *state;

  if (f->fd >= 0)
    close (f->fd);
  test_log_file_clear (&f->log);
  g_free (f->socket);
  g_free (f);
  return 0;
}

static void
bind_journal (Fixture *f)
{
  f->fd = test_journal_bind (f->socket);
  if (f->fd < 0)
    fail_msg ("binding %s: %s", f->socket, g_strerror (-f->fd));
}

static FbAccessLog *
open_journal_log (Fixture *f, gboolean through)
{
  FbAccessLogOptions opts = {
    .path = f->log.path, .run_id = "run-journal", .journal = TRUE, .journal_socket = f->socket, .write_through = through
  };
  g_autoptr (GError) error = NULL;
  FbAccessLog *log = fb_access_log_new (&opts, NULL, &error);

  if (log == NULL)
    fail_msg ("fb_access_log_new: %s", error->message);
  return log;
}

static void
close_log (FbAccessLog *log)
{
  g_autoptr (GError) error = NULL;

  if (!fb_access_log_close (log, &error))
    fail_msg ("fb_access_log_close: %s", error->message);
  fb_access_log_free (log);
}

/* The next entry on F's socket, parsed; fails the test when none comes. */
static GPtrArray *
next_entry (Fixture *f)
{
  GPtrArray *entry = test_journal_next (f->fd, 5000);

  if (entry == NULL)
    fail_msg ("no journal entry: nothing arrived");
  return entry;
}

static void
assert_field (GPtrArray *entry, const char *name, const char *value)
{
  g_autofree char *got = test_journal_get (entry, name);

  if (test_journal_count (entry, name) != 1)
    fail_msg ("%s is in the entry %u times", name, test_journal_count (entry, name));
  if (g_strcmp0 (got, value) != 0)
    fail_msg ("%s=%s, expected %s", name, got, value);
}

/* --- the encoder ------------------------------------------------------------ */

static void
test_field_plain (void **state)
{
  g_autoptr (GString) out = g_string_new (NULL);

  assert_true (fb_journal_append_field (out, "FUSEBOX_OP", "open", 4));
  assert_true (fb_journal_append_field (out, "FUSEBOX_WHY", "a=b c", 5));
  assert_int_equal (out->len, strlen ("FUSEBOX_OP=open\nFUSEBOX_WHY=a=b c\n"));
  assert_memory_equal (out->str, "FUSEBOX_OP=open\nFUSEBOX_WHY=a=b c\n", out->len);
}

static void
test_field_binary (void **state)
{
  static const char value[] = "a\nFORGED=1\n";
  static const char nul[] = { 'x', '\0', 'y' };
  g_autoptr (GString) out = g_string_new (NULL);
  g_autoptr (GPtrArray) entry = NULL;
  g_autoptr (GBytes) got = NULL;
  g_autofree char *why = NULL;
  guint64 le = GUINT64_TO_LE ((guint64)strlen (value));

  assert_true (fb_journal_append_field (out, "FUSEBOX_PATH", value, strlen (value)));
  /* NAME\n, the length (little-endian 64 bits), the bytes, \n */
  assert_int_equal (out->len, strlen ("FUSEBOX_PATH\n") + 8 + strlen (value) + 1);
  assert_memory_equal (out->str, "FUSEBOX_PATH\n", strlen ("FUSEBOX_PATH\n"));
  assert_memory_equal (out->str + strlen ("FUSEBOX_PATH\n"), &le, 8);
  assert_int_equal (out->str[out->len - 1], '\n');

  assert_true (fb_journal_append_field (out, "FUSEBOX_COMM", nul, sizeof nul));
  entry = test_journal_parse (out->str, out->len, &why);
  if (entry == NULL)
    fail_msg ("%s", why);
  assert_int_equal (entry->len, 2);
  assert_int_equal (test_journal_count (entry, "FORGED"), 0);
  got = test_journal_get_bytes (entry, "FUSEBOX_PATH");
  assert_int_equal (g_bytes_get_size (got), strlen (value));
  assert_memory_equal (g_bytes_get_data (got, NULL), value, strlen (value));
  g_clear_pointer (&got, g_bytes_unref);
  got = test_journal_get_bytes (entry, "FUSEBOX_COMM");
  assert_int_equal (g_bytes_get_size (got), sizeof nul);
  assert_memory_equal (g_bytes_get_data (got, NULL), nul, sizeof nul);
}

static void
test_field_names (void **state)
{
  static const char *const refused[] = { "", "lower", "_PID", "1ST", "A=B", "A\nB", "A B", "FUSEBOX-OP" };
  g_autoptr (GString) out = g_string_new (NULL);
  char longest[66];

  for (guint i = 0; i < G_N_ELEMENTS (refused); i++)
    assert_false (fb_journal_append_field (out, refused[i], "x", 1));
  memset (longest, 'N', sizeof longest - 1);
  longest[sizeof longest - 1] = '\0';
  assert_false (fb_journal_append_field (out, longest, "x", 1)); /* 65 */
  assert_int_equal (out->len, 0);
  longest[64] = '\0';
  assert_true (fb_journal_append_field (out, longest, "x", 1)); /* 64 */
}

/* What the encoder makes of JSON it did not write itself: nested objects,
 * arrays kept as text, true, numbers, null left out, escapes decoded; and
 * anything but one object refused. */
static void
test_entry_members (void **state)
{
  static const char line[] = "{\"a\":\"x\\ty\\u00e9\\ud83d\\ude00\\u0000z\",\"n\":-12,\"t\":true,\"z\":null,"
                             "\"o\":{\"k\":1,\"deep\":{\"s\":\"v\"}},\"arr\":[1,\"]\",{\"q\":2}], \"e\" : \"\"}";
  static const char decoded[] = "x\ty\xc3\xa9\xf0\x9f\x98\x80\0z";
  /* in: a field of the entry; out: its one value (FUSEBOX_A is binary) */
  static const TestInOut fields[] = {
    { "FUSEBOX_N", "-12" },
    { "FUSEBOX_T", "true" },
    { "FUSEBOX_O_K", "1" },
    { "FUSEBOX_O_DEEP_S", "v" },
    { "FUSEBOX_ARR", "[1,\"]\",{\"q\":2}]" },
    { "FUSEBOX_E", "" },
    { "SYSLOG_IDENTIFIER", "fusebox" },
    { "PRIORITY", "6" },
  };
  g_autoptr (GString) out = g_string_new (NULL);
  g_autoptr (GPtrArray) entry = NULL;
  g_autoptr (GBytes) a = NULL;
  g_autofree char *why = NULL;
  static const char *const bad[] = { "",         "[]",          "{\"a\":}",  "{\"a\":\"x}",
                                     "{\"a\":1", "{\"a\":1} x", "{\"a\" 1}", "{\"a\":\"\\q\"}" };

  assert_true (fb_journal_entry_from_record (out, line, strlen (line)));
  entry = test_journal_parse (out->str, out->len, &why);
  if (entry == NULL)
    fail_msg ("%s", why);
  a = test_journal_get_bytes (entry, "FUSEBOX_A");
  assert_non_null (a);
  assert_int_equal (g_bytes_get_size (a), sizeof decoded - 1);
  assert_memory_equal (g_bytes_get_data (a, NULL), decoded, sizeof decoded - 1);
  for (guint i = 0; i < G_N_ELEMENTS (fields); i++)
    assert_field (entry, fields[i].in, fields[i].out);
  assert_int_equal (test_journal_count (entry, "FUSEBOX_Z"), 0);
  assert_int_equal (test_journal_count (entry, "MESSAGE"), 1);

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_string_truncate (out, 0);
      if (fb_journal_entry_from_record (out, bad[i], strlen (bad[i])))
        fail_msg ("took %s", bad[i]);
      assert_int_equal (out->len, 0);
    }
}

/* --- the output, on a socket -------------------------------------------------- */

static void
test_entry_per_record (void **state)
{
  Fixture *f = *state;
  FbAccessLog *log;
  g_autoptr (GPtrArray) lines = NULL;
  FbAccessEvent e;

  bind_journal (f);
  log = open_journal_log (f, FALSE);
  e = test_event ("open", "/work/a.txt");
  fb_access_sink_push (fb_access_log_get_sink (log), &e);
  e = test_event ("close", "/work/a.txt");
  e.access = "readwrite";
  e.bytes_read = 10;
  e.bytes_written = 20;
  fb_access_sink_push (fb_access_log_get_sink (log), &e);
  e = test_event ("rename", "/work/a.tmp");
  e.target = "/work/a.txt";
  e.session = "sess-1";
  fb_access_sink_push (fb_access_log_get_sink (log), &e);
  e = test_event ("open", "/work/id.pem");
  e.decision = FB_DECISION_DENY;
  e.err = EACCES;
  e.rule = &test_rule_deny;
  fb_access_sink_push (fb_access_log_get_sink (log), &e);
  e = test_event ("lookup", "/work/.git");
  e.decision = FB_DECISION_HIDE;
  e.err = ENOENT;
  e.rule = &test_rule_protected;
  e.comm = NULL;
  fb_access_sink_push (fb_access_log_get_sink (log), &e);
  close_log (log);

  lines = test_read_lines (f->log.path);
  assert_int_equal (lines->len, 5); /* no notice: the journal took all */
  for (guint i = 0; i < lines->len; i++)
    {
      g_autoptr (GPtrArray) entry = next_entry (f);
      g_autoptr (JsonObject) o = test_parse_object (lines->pdata[i]);
      g_autofree char *seq = g_strdup_printf ("%u", i + 1);
      g_autofree char *message = test_journal_get (entry, "MESSAGE");
      g_autofree char *why = test_journal_check_record (entry, o);

      if (why != NULL)
        fail_msg ("record %u: %s", i + 1, why);
      assert_field (entry, "FUSEBOX_SEQ", seq);
      assert_field (entry, "FUSEBOX_RUN", "run-journal");
      assert_field (entry, "PRIORITY", i < 3 ? "6" : "5");
      if (i == 3)
        assert_string_equal (message, "deny open /work/id.pem (EACCES) by tester[4242]: keys are off limits");
    }
  {
    g_autofree char *why = NULL;
    assert_null (test_journal_recv (f->fd, 0, &why)); /* one entry per record */
  }
}

/* A refused name the sandbox chose, and a comm: a newline and a field
 * after it, invalid UTF-8, "=" and control characters forge nothing. */
static void
test_hostile_values (void **state)
{
  Fixture *f = *state;
  static const char path[] = "/work/x\nFUSEBOX_DECISION=allow\nPRIORITY=7\n\xff\xfe=\x1b[31m";
  static const char comm[] = "c\nMESSAGE=forged";
  FbAccessLog *log;
  FbAccessEvent e;
  g_autoptr (GPtrArray) entry = NULL;
  g_autoptr (GBytes) got = NULL;
  g_autofree char *b64 = NULL;
  g_autofree char *message = NULL;
  g_autofree guchar *exact = NULL;
  gsize exact_len = 0;

  bind_journal (f);
  log = open_journal_log (f, FALSE);
  e = test_event ("open", path);
  e.comm = comm;
  e.decision = FB_DECISION_DENY;
  e.err = EACCES;
  e.rule = &test_rule_deny;
  fb_access_sink_push (fb_access_log_get_sink (log), &e);
  close_log (log);

  entry = next_entry (f);
  assert_field (entry, "FUSEBOX_DECISION", "deny");
  assert_field (entry, "PRIORITY", "5");
  assert_int_equal (test_journal_count (entry, "MESSAGE"), 1);
  assert_int_equal (test_journal_count (entry, "FUSEBOX_PATH"), 1);
  assert_int_equal (test_journal_count (entry, "FUSEBOX_COMM"), 1);
  /* as in the file: U+FFFD for the bytes that are not UTF-8 ... */
  got = test_journal_get_bytes (entry, "FUSEBOX_PATH");
  assert_true (g_utf8_validate (g_bytes_get_data (got, NULL), g_bytes_get_size (got), NULL));
  assert_non_null (memchr (g_bytes_get_data (got, NULL), '\n', g_bytes_get_size (got)));
  /* ... and the exact bytes in base64 */
  b64 = test_journal_get (entry, "FUSEBOX_PATH_B64");
  assert_non_null (b64);
  exact = g_base64_decode (b64, &exact_len);
  assert_int_equal (exact_len, strlen (path));
  assert_memory_equal (exact, path, exact_len);
  assert_field (entry, "FUSEBOX_COMM", comm);
  /* for people: one line, every control character escaped */
  message = test_journal_get (entry, "MESSAGE");
  for (const char *p = message; *p != '\0'; p++)
    assert_true ((guchar)*p >= 0x20 && *p != 0x7f);
  assert_non_null (strstr (message, "\\n"));
}

/* An entry larger than the socket takes as a datagram: a sealed memfd. */
static void
test_large_entry_memfd (void **state)
{
  int sv[2];
  int small = 4096;
  gsize len = 256 * 1024;
  g_autofree char *data = g_malloc (len);
  g_autofree char *why = NULL;
  g_autoptr (GBytes) got = NULL;

  assert_int_equal (socketpair (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
  assert_int_equal (setsockopt (sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
  memset (data, 'x', len);
  /* a datagram this large is refused outright, so the memfd is the way */
  assert_true (send (sv[0], data, len, MSG_DONTWAIT) < 0 && errno == EMSGSIZE);
  assert_int_equal (fb_journal_send (sv[0], data, len), 0);
  got = test_journal_recv (sv[1], 5000, &why);
  if (got == NULL)
    fail_msg ("%s", why != NULL ? why : "nothing arrived");
  assert_int_equal (g_bytes_get_size (got), len);
  assert_memory_equal (g_bytes_get_data (got, NULL), data, len);
  close (sv[0]);
  close (sv[1]);
}

/* Records of the file as JSON objects, and its last one's notice. */
static GPtrArray *
read_records (const char *path)
{
  g_autoptr (GPtrArray) lines = test_read_lines (path);
  GPtrArray *records = g_ptr_array_new_with_free_func ((GDestroyNotify)json_object_unref);

  for (guint i = 0; i < lines->len; i++)
    {
      JsonObject *o = test_parse_object (lines->pdata[i]);
      assert_int_equal (json_object_get_int_member (o, "seq"), i + 1);
      g_ptr_array_add (records, o);
    }
  return records;
}

/* No journal at the socket: every record in the file, and the last one
 * counts what the journal missed. */
static void
test_journal_absent (void **state)
{
  Fixture *f = *state;
  FbAccessLog *log = open_journal_log (f, FALSE);
  g_autoptr (GPtrArray) records = NULL;
  JsonObject *last;

  test_push_paths (fb_access_log_get_sink (log), "/work/f", 100, NULL);
  assert_int_equal (fb_access_log_get_count (log), 100);
  close_log (log);
  records = read_records (f->log.path);
  assert_int_equal (records->len, 101);
  last = records->pdata[100];
  assert_string_equal (json_object_get_string_member (last, "notice"), "journal-incomplete");
  assert_int_equal (json_object_get_int_member (last, "records_not_sent"), 100);
  assert_non_null (strstr (json_object_get_string_member (last, "why"), f->socket));
}

typedef struct
{
  FbAccessLog *log;
  guint n;
  guint late;
} Pusher;

static gpointer
pusher_main (gpointer data)
{
  Pusher *p = data;

  p->late = test_push_paths (fb_access_log_get_sink (p->log), "/work/t", p->n, p->log);
  return NULL;
}

/* A journal that takes nothing (a socket no one reads): with
 * write-through, each record is still in the file when its push returns;
 * what reached the socket is whole and in order, and the rest is counted. */
static void
test_journal_full (void **state)
{
  Fixture *f = *state;
  const guint n = FB_LOG_JOURNAL_MAX_ENTRIES + 1000;
  g_autoptr (GMainContext) ctx = g_main_context_new ();
  FbAccessLogOptions opts = {
    .path = f->log.path, .run_id = "run-journal", .journal = TRUE, .journal_socket = f->socket, .write_through = TRUE
  };
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) records = NULL;
  FbAccessLog *log;
  Pusher p;
  JsonObject *last;
  guint64 not_sent;
  guint got = 0;

  bind_journal (f);
  log = fb_access_log_new (&opts, ctx, &error);
  assert_non_null (log);
  p = (Pusher){ log, n, 0 };
  g_thread_join (g_thread_new ("pusher", pusher_main, &p));
  assert_int_equal (p.late, 0);
  assert_int_equal (fb_access_log_get_count (log), n);
  close_log (log);

  records = read_records (f->log.path);
  assert_int_equal (records->len, n + 1);
  last = records->pdata[n];
  assert_string_equal (json_object_get_string_member (last, "notice"), "journal-incomplete");
  not_sent = (guint64)json_object_get_int_member (last, "records_not_sent");
  assert_true (not_sent > 0 && not_sent <= n);
  for (;;)
    {
      g_autoptr (GPtrArray) entry = test_journal_next (f->fd, 0);
      g_autofree char *seq = NULL;

      if (entry == NULL)
        break;
      got++;
      seq = g_strdup_printf ("%u", got);
      assert_field (entry, "FUSEBOX_SEQ", seq); /* the first ones, in order */
    }
  assert_int_equal (got + not_sent, n);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_field_plain), cmocka_unit_test (test_field_binary),
                  cmocka_unit_test (test_field_names), cmocka_unit_test (test_entry_members),
                  cmocka_unit_test_setup_teardown (test_entry_per_record, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_hostile_values, setup, teardown),
                  cmocka_unit_test (test_large_entry_memfd),
                  cmocka_unit_test_setup_teardown (test_journal_absent, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_journal_full, setup, teardown))
