/* Integration tests: the real `fusebox log` and `fusebox report` on the
 * fixture logs in fixtures/logs/ (a run with every kind of record, a
 * truncated file, a seq gap, a run directory with a rotated file),
 * `log --follow` across a rotation done under its feet, and readers beside
 * a log rotating as fast as it can.  No privilege.
 *
 * Each failing command is printed as a shell line that replays it. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "tests/lib/test-util.h"

#define N_BASIC 12

typedef struct
{
  TestDir *dir; /* removed in teardown */
  GPid follower;
} Fixture;

static char *
fixture (const char *name)
{
  const char *root = g_getenv ("FUSEBOX_SOURCE_ROOT");

  return g_build_filename (root != NULL ? root : ".", "fixtures", "logs", name, NULL);
}

static char **
test_environ (const char *state_home)
{
  char **envp = g_get_environ ();

  envp = g_environ_setenv (envp, "TZ", "UTC", TRUE);
  envp = g_environ_unsetenv (envp, "NO_COLOR");
  if (state_home != NULL)
    envp = g_environ_setenv (envp, "XDG_STATE_HOME", state_home, TRUE);
  return envp;
}

/* What a command line shows of test_environ (STATE_HOME). */
static char *
environ_shown (const char *state_home)
{
  g_autofree char *q = state_home != NULL ? g_shell_quote (state_home) : NULL;

  return q != NULL ? g_strdup_printf ("TZ=UTC XDG_STATE_HOME=%s", q) : g_strdup ("TZ=UTC");
}

/* Run fusebox with ARGS (NULL-terminated) in test_environ (STATE_HOME,
 * which may be NULL); it must exit with STATUS. */
static void
run_fusebox (TestCmd *r, int status, const char *state_home, ...)
{
  g_autoptr (GPtrArray) argv = NULL;
  g_auto (GStrv) envp = test_environ (state_home);
  g_autofree char *shown = environ_shown (state_home);
  const char *first;
  va_list ap;

  va_start (ap, state_home);
  first = va_arg (ap, const char *);
  argv = test_fusebox_argv_va (first, ap);
  va_end (ap);
  test_cmd_run (r, NULL, envp, shown, (char **)argv->pdata);
  if (r->status != status)
    fail_msg ("exit %d, expected %d\n  replay: %s\n  stderr: %s", r->status, status, r->command, r->err);
}

#define expect_in(r, haystack, needle)                                                                                 \
  do                                                                                                                   \
    {                                                                                                                  \
      if (strstr ((haystack), (needle)) == NULL)                                                                       \
        fail_msg ("missing \"%s\"\n  replay: %s\n  got:\n%s", (needle), (r)->command, (haystack));                     \
    }                                                                                                                  \
  while (0)

static guint
count_lines (const char *s)
{
  guint n = 0;

  for (; *s != '\0'; s++)
    n += *s == '\n';
  return n;
}

static int
setup (void **state)
{
  Fixture *f = g_new0 (Fixture, 1);

  if (g_getenv ("FUSEBOX_BIN") == NULL)
    test_skip_or_fail ("FUSEBOX_BIN is not set (run through meson test)");
  f->dir = test_dir_new (test_tmpdir ("fusebox-cli-log"));
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  Fixture *f = *state;

  test_kill_child (&f->follower, SIGKILL);
  test_dir_free (f->dir, true);
  g_free (f);
  return 0;
}

#define LOG_TEST(f) cmocka_unit_test_setup_teardown (f, setup, teardown)

/* --- log ------------------------------------------------------------------ */

/* `fusebox COMMAND [OPTION]` over the fixture NAME, which exits 0. */
static void
run_on_fixture (TestCmd *r, const char *command, const char *option, const char *name)
{
  g_autofree char *file = fixture (name);

  if (option != NULL)
    run_fusebox (r, 0, NULL, command, option, file, NULL);
  else
    run_fusebox (r, 0, NULL, command, file, NULL);
}

/* The lines of `fusebox log OPTION` over the fixture NAME; R keeps the
 * whole output. */
static char **
log_lines (TestCmd *r, const char *option, const char *name)
{
  run_on_fixture (r, "log", option, name);
  return g_strsplit (r->out, "\n", -1);
}

static void
test_log_people (void **state)
{
  g_auto (TestCmd) r = { 0 };

  run_on_fixture (&r, "log", NULL, "basic.jsonl");
  assert_int_equal (count_lines (r.out), N_BASIC);
  /* not a terminal: no colour */
  assert_null (strchr (r.out, '\033'));
  expect_in (&r, r.out,
             "2024-05-01 12:00:06.007  cat[101]              open      /home/u/.ssh/id_rsa"
             "                       deny      EACCES   keys are secret\n");
  expect_in (&r, r.out, "rename    /work/a.tmp \u2192 /work/a.txt ");
  /* hostile names as escapes, exact bytes from path_b64 */
  expect_in (&r, r.out, "/work/esc\\x1b[31mred ");
  expect_in (&r, r.out, "/work/bad\\xff ");
  assert_string_equal (r.err, "");
}

static void
test_log_color (void **state)
{
  g_auto (TestCmd) r = { 0 };
  g_auto (GStrv) lines = log_lines (&r, "--color=always", "basic.jsonl");

  assert_true (g_str_has_prefix (lines[6], "\033[31m")); /* deny */
  assert_true (g_str_has_prefix (lines[7], "\033[31m")); /* hide */
  assert_true (g_str_has_prefix (lines[8], "\033[33m")); /* readonly */
  assert_null (strchr (lines[0], '\033'));               /* allow: plain */
}

static void
test_log_json_passthrough (void **state)
{
  g_autofree char *basic = fixture ("basic.jsonl");
  g_autofree char *text = NULL;
  g_auto (TestCmd) r = { 0 };

  assert_true (g_file_get_contents (basic, &text, NULL, NULL));
  run_fusebox (&r, 0, NULL, "log", "--json", basic, NULL);
  /* byte for byte */
  assert_string_equal (r.out, text);
}

static void
test_log_filters (void **state)
{
  g_autofree char *basic = fixture ("basic.jsonl");

  {
    g_auto (TestCmd) r = { 0 };
    g_auto (GStrv) lines = NULL;

    run_fusebox (&r, 0, NULL, "log", "--json", "--denied", basic, NULL);
    assert_int_equal (count_lines (r.out), 4);
    lines = g_strsplit (r.out, "\n", -1);
    for (guint i = 0; i < 4; i++)
      assert_null (strstr (lines[i], "\"decision\":\"allow\""));
  }
  {
    g_auto (TestCmd) r = { 0 };
    run_fusebox (&r, 0, NULL, "log", "--op", "rename", basic, NULL);
    assert_int_equal (count_lines (r.out), 1);
    expect_in (&r, r.out, "/work/a.tmp");
  }
  {
    g_auto (TestCmd) r = { 0 };
    run_fusebox (&r, 0, NULL, "log", "--op", "unlink,create", "--op", "close", basic, NULL);
    assert_int_equal (count_lines (r.out), 5); /* 1 create, 2 unlink (one refused), 2 close */
  }
  {
    /* /work and below, not /workspace; target counts */
    g_auto (TestCmd) r = { 0 };
    run_fusebox (&r, 0, NULL, "log", "--path", "/work/", basic, NULL);
    assert_int_equal (count_lines (r.out), 7);
    assert_null (strstr (r.out, "/workspace"));
  }
  {
    g_auto (TestCmd) r = { 0 };
    run_fusebox (&r, 0, NULL, "log", "--path", "/work/a.txt", basic, NULL);
    assert_int_equal (count_lines (r.out), 1);
  }
  {
    g_auto (TestCmd) r = { 0 };
    run_fusebox (&r, 0, NULL, "log", "--since", "2024-05-01T12:00:09Z", basic, NULL);
    assert_int_equal (count_lines (r.out), 3);
  }
  {
    /* a zone offset */
    g_auto (TestCmd) r = { 0 };
    run_fusebox (&r, 0, NULL, "log", "--since", "2024-05-01T14:00:09+02:00", basic, NULL);
    assert_int_equal (count_lines (r.out), 3);
  }
  {
    /* an age: the fixture is from 2024 */
    g_auto (TestCmd) r = { 0 };
    run_fusebox (&r, 0, NULL, "log", "--since", "10m", basic, NULL);
    assert_string_equal (r.out, "");
  }
  {
    g_auto (TestCmd) r = { 0 };
    run_fusebox (&r, 0, NULL, "log", "--since", "100000w", basic, NULL);
    assert_int_equal (count_lines (r.out), N_BASIC);
  }
}

static void
test_log_usage_errors (void **state)
{
  g_autofree char *basic = fixture ("basic.jsonl");
  const char *bad[][4] = {
    { "log", "--since", "yesterday", NULL },
    { "log", "--bogus", NULL, NULL },
    { "log", "--color=sometimes", NULL, NULL },
    { "log", "--path", "relative", NULL },
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_auto (TestCmd) r = { 0 };

      if (bad[i][2] != NULL)
        run_fusebox (&r, 2, NULL, bad[i][0], bad[i][1], bad[i][2], basic, NULL);
      else
        run_fusebox (&r, 2, NULL, bad[i][0], bad[i][1], basic, NULL);
      assert_string_equal (r.out, "");
      expect_in (&r, r.err, "fusebox: log: ");
    }
  {
    g_auto (TestCmd) r = { 0 };
    run_fusebox (&r, 2, NULL, "log", basic, basic, NULL);
  }
}

static void
test_log_missing (void **state)
{
  Fixture *f = *state;
  const char *missing = test_dir_path (f->dir, "nope.jsonl");
  g_auto (TestCmd) r = { 0 };

  run_fusebox (&r, 1, f->dir->path, "log", missing, NULL);
  expect_in (&r, r.err, "nope.jsonl");
  {
    /* no runs at all */
    g_auto (TestCmd) r2 = { 0 };
    run_fusebox (&r2, 1, f->dir->path, "log", NULL);
    expect_in (&r2, r2.err, "no runs in");
  }
}

static void
test_log_truncated_and_gap (void **state)
{
  g_auto (TestCmd) r = { 0 };
  g_auto (TestCmd) g = { 0 };

  run_on_fixture (&r, "log", NULL, "truncated.jsonl");
  assert_int_equal (count_lines (r.out), 3);
  expect_in (&r, r.err, "truncated.jsonl:4: the last line is incomplete");

  run_on_fixture (&g, "log", NULL, "gap.jsonl");
  assert_int_equal (count_lines (g.out), 3);
  expect_in (&g, g.err, "seq jumps from 2 to 5: 2 records missing");
}

static void
test_log_rotated_run_dir (void **state)
{
  g_auto (TestCmd) r = { 0 };
  g_auto (GStrv) lines = log_lines (&r, "--json", "rotated");

  assert_int_equal (g_strv_length (lines), 9); /* 8 + the empty tail */
  for (guint i = 0; i < 8; i++)
    {
      g_autofree char *seq = g_strdup_printf ("\"seq\":%u,", i + 1);
      expect_in (&r, lines[i], seq);
    }
}

/* Copy the rotated fixture into RUNS/ID (a run directory). */
static char *
make_run (const char *state_home, const char *id)
{
  g_autofree char *src = fixture ("rotated");
  char *dst = g_build_filename (state_home, "fusebox", "runs", id, NULL);
  const char *names[] = { "access.000000000001-000000000004.jsonl", "access.jsonl" };

  assert_int_equal (g_mkdir_with_parents (dst, 0700), 0);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *from = g_build_filename (src, names[i], NULL);
      g_autofree char *to = g_build_filename (dst, names[i], NULL);
      g_autofree char *text = NULL;
      gsize len = 0;

      assert_true (g_file_get_contents (from, &text, &len, NULL));
      assert_true (g_file_set_contents (to, text, (gssize)len, NULL));
    }
  return dst;
}

static void
test_log_run_id_and_latest (void **state)
{
  Fixture *f = *state;
  g_autofree char *older = make_run (f->dir->path, "20240101-000000-aaaaaa");
  g_autofree char *newer = make_run (f->dir->path, "20240501-120000-bbbbbb");
  g_autofree char *newer_log = g_build_filename (newer, "access.jsonl", NULL);

  /* make the newer run distinguishable: drop its live file's last record */
  {
    g_auto (GStrv) keep = NULL;
    g_autofree char *text = NULL;
    g_autofree char *joined = NULL;

    assert_true (g_file_get_contents (newer_log, &text, NULL, NULL));
    keep = g_strsplit (text, "\n", -1);
    assert_int_equal (g_strv_length (keep), 5); /* 4 records and the empty tail */
    g_free (keep[3]);
    g_free (keep[4]);
    keep[3] = NULL;
    joined = g_strjoinv ("\n", keep);
    g_autofree char *with_nl = g_strconcat (joined, "\n", NULL);
    assert_true (g_file_set_contents (newer_log, with_nl, -1, NULL));
  }
  {
    g_auto (TestCmd) r = { 0 };
    run_fusebox (&r, 0, f->dir->path, "log", "20240101-000000-aaaaaa", NULL);
    assert_int_equal (count_lines (r.out), 8);
  }
  {
    g_auto (TestCmd) r = { 0 };
    run_fusebox (&r, 0, f->dir->path, "log", NULL);
    assert_int_equal (count_lines (r.out), 7);
  }
  {
    g_auto (TestCmd) r = { 0 };
    run_fusebox (&r, 0, f->dir->path, "report", "--json", NULL);
    expect_in (&r, r.out, "\"records\" : 7");
  }
}

/* --- follow ------------------------------------------------------------- */

static void
on_alarm (int sig)
{
  static const char msg[] = "test-cli-log: fusebox log --follow produced no more output for 60 s\n";

  if (write (STDERR_FILENO, msg, sizeof msg - 1) < 0)
    _exit (1);
  _exit (1);
}

/* Read one line from FD (blocking; a watchdog turns a hang into a failure). */
static char *
read_line (int fd, GString *buf)
{
  for (;;)
    {
      char *nl = memchr (buf->str, '\n', buf->len);
      char chunk[4096];
      ssize_t n;

      if (nl != NULL)
        {
          char *line = g_strndup (buf->str, (gsize)(nl - buf->str));
          g_string_erase (buf, 0, nl - buf->str + 1);
          return line;
        }
      alarm (60);
      n = read (fd, chunk, sizeof chunk);
      alarm (0);
      if (n <= 0)
        return NULL;
      g_string_append_len (buf, chunk, n);
    }
}

static void
test_log_follow_rotation (void **state)
{
  Fixture *f = *state;
  g_autofree char *run = make_run (f->dir->path, "20240501-120000-follow");
  g_autofree char *live = g_build_filename (run, "access.jsonl", NULL);
  g_autofree char *rotated = g_build_filename (run, "access.000000000005-000000000008.jsonl", NULL);
  g_autofree char *basic = fixture ("basic.jsonl");
  g_autofree char *basic_text = NULL;
  g_auto (GStrv) basic_lines = NULL;
  g_auto (GStrv) envp = test_environ (f->dir->path);
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) buf = g_string_new (NULL);
  char *argv[] = { (char *)g_getenv ("FUSEBOX_BIN"), (char *)"log", (char *)"--follow", (char *)"--json", run, NULL };
  g_autofree char *shown = environ_shown (f->dir->path);
  g_autofree char *cmd = test_shell_line (NULL, shown, argv);
  int out_fd = -1;
  guint seen = 0;

  signal (SIGALRM, on_alarm);
  assert_true (g_file_get_contents (basic, &basic_text, NULL, NULL));
  basic_lines = g_strsplit (basic_text, "\n", -1);

  if (!g_spawn_async_with_pipes (NULL, argv, envp, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &f->follower, NULL, &out_fd,
                                 NULL, &error))
    fail_msg ("can't run %s: %s", cmd, error->message);

  for (; seen < 8; seen++)
    {
      g_autofree char *line = read_line (out_fd, buf);

      if (line == NULL)
        fail_msg ("follower ended early\n  replay: %s", cmd);
      assert_string_equal (line, basic_lines[seen]);
    }

  /* Rotate as the writer does: append, rename away, start a new file. */
  {
    g_autofree char *more = g_strdup_printf ("%s\n", basic_lines[8]);
    g_autofree char *fresh = g_strdup_printf ("%s\n%s\n", basic_lines[9], basic_lines[10]);
    int fd = open (live, O_WRONLY | O_APPEND | O_CLOEXEC);

    assert_true (fd >= 0);
    assert_int_equal (write (fd, more, strlen (more)), (ssize_t)strlen (more));
    close (fd);
    assert_int_equal (rename (live, rotated), 0);
    assert_true (g_file_set_contents (live, fresh, -1, NULL));
  }
  for (; seen < 11; seen++)
    {
      g_autofree char *line = read_line (out_fd, buf);

      if (line == NULL)
        fail_msg ("follower ended early\n  replay: %s", cmd);
      /* each record once, in order: no loss, no repeat */
      assert_string_equal (line, basic_lines[seen]);
    }
  test_kill_child (&f->follower, SIGTERM);
  close (out_fd);
}

/* Start ARGV (a follower) with its output written to OUT_PATH and its
 * errors to ERR_PATH (a pipe could fill while the test does something
 * else, and hold it); F->follower is its pid, CMD its replay line. */
static void
start_follower_to_files (Fixture *f, char **argv, char **envp, const char *out_path, const char *err_path,
                         const char *cmd)
{
  g_autoptr (GError) error = NULL;
  int out_fd = open (out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int err_fd = open (err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

  assert_true (out_fd >= 0 && err_fd >= 0);
  if (!g_spawn_async_with_pipes_and_fds (NULL, (const char *const *)argv, (const char *const *)envp,
                                         G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, -1, out_fd, err_fd, NULL, NULL, 0,
                                         &f->follower, NULL, NULL, NULL, &error))
    fail_msg ("can't run %s: %s", cmd, error->message);
  close (out_fd);
  close (err_fd);
}

/* Wait (30 s at most) until the follower CMD has written N lines to
 * OUT_PATH. */
static void
wait_for_lines (const char *out_path, guint n, const char *cmd)
{
  for (guint waited = 0;; waited++)
    {
      g_autofree char *out = test_read_file (out_path);

      if (count_lines (out) == n)
        return;
      if (waited == 300)
        fail_msg ("the follower showed %u records in 30 s, not %u\n  replay: %s", count_lines (out), n, cmd);
      g_usleep (100 * 1000);
    }
}

/* The writer's rotation, done as fast as it goes, one record a file (a
 * child process): each record written to access.jsonl, which is then
 * renamed to its rotated name, until STOP_FD reports the end (closed) and
 * MIN files were made, or MAX were; then one record left in the live file,
 * and its seq written to DONE_FD.  *WRITTEN (shared) is the last seq written
 * so far. */
static void
fast_writer (const char *dir, int stop_fd, int done_fd, guint64 min, guint64 max, volatile guint64 *written)
{
  g_autofree char *live = g_build_filename (dir, "access.jsonl", NULL);
  guint64 seq = 0;

  for (;;)
    {
      g_autofree char *rec = g_strdup_printf (
        "{\"ts\":\"2024-05-01T12:00:00.001000Z\",\"run\":\"20240501-120000-fast01\",\"seq\":%" G_GUINT64_FORMAT
        ",\"pid\":100,\"uid\":0,\"comm\":\"sh\",\"op\":\"open\",\"path\":\"/work/a\",\"access\":\"read\","
        "\"decision\":\"allow\",\"errno\":0,\"rule\":0,\"rule_origin\":\"p.json:1:1\",\"why\":\"w\"}\n",
        ++seq);
      int fd = open (live, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      char byte;

      if (fd < 0 || write (fd, rec, strlen (rec)) != (ssize_t)strlen (rec))
        _exit (2);
      close (fd);
      *written = seq;
      if (seq > max || (seq > min && (seq % 32) == 0 && read (stop_fd, &byte, 1) == 0))
        break;
      {
        g_autofree char *name =
          g_strdup_printf ("access.%012" G_GUINT64_FORMAT "-%012" G_GUINT64_FORMAT ".jsonl", seq, seq);
        g_autofree char *rotated = g_build_filename (dir, name, NULL);

        if (rename (live, rotated) < 0)
          _exit (3);
      }
    }
  if (write (done_fd, &seq, sizeof seq) != sizeof seq)
    _exit (4);
  _exit (0);
}

/* The seqs of the records in TEXT (`log --json`), in the order shown. */
static GArray *
seqs_of (const char *text)
{
  GArray *seqs = g_array_new (FALSE, FALSE, sizeof (guint64));

  for (const char *p = strstr (text, "\"seq\":"); p != NULL; p = strstr (p + 1, "\"seq\":"))
    {
      guint64 seq = g_ascii_strtoull (p + strlen ("\"seq\":"), NULL, 10);
      g_array_append_val (seqs, seq);
    }
  return seqs;
}

/* In DIR, the file NAME holding run 20240501-120000-clock1's records
 * FIRST..LAST, last written SEC seconds after a day in 2023. */
static void
write_records_at (const char *dir, const char *name, guint64 first, guint64 last, time_t sec)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr (GString) text = g_string_new (NULL);
  struct timespec times[2] = { { 1700000000 + sec, 0 }, { 1700000000 + sec, 0 } };

  for (guint64 seq = first; seq <= last; seq++)
    g_string_append_printf (
      text,
      "{\"ts\":\"2024-05-01T12:00:00.001000Z\",\"run\":\"20240501-120000-clock1\",\"seq\":%" G_GUINT64_FORMAT
      ",\"pid\":100,\"uid\":0,\"comm\":\"sh\",\"op\":\"open\",\"path\":\"/work/a\",\"access\":"
      "\"read\",\"decision\":\"allow\",\"errno\":0,\"rule\":0,\"rule_origin\":\"p.json:1:1\","
      "\"why\":\"w\"}\n",
      seq);
  test_write_file (path, text->str);
  assert_int_equal (utimensat (AT_FDCWD, path, times, 0), 0);
}

/* The clock set back an hour between two rotations (an NTP step, a
 * virtual machine resumed): the later rotated file is dated before the
 * earlier one.  `log` shows the records in the order of their seqs and
 * says nothing is missing, and `report` agrees; it said "seq jumps from 3
 * to 7: 3 records missing" and showed 4..6 last. */
static void
test_log_clock_set_back (void **state)
{
  Fixture *f = *state;
  const char *dir = test_dir_path (f->dir, "clock");
  g_autofree char *live = g_build_filename (dir, "access.jsonl", NULL);

  assert_int_equal (g_mkdir (dir, 0700), 0);
  write_records_at (dir, "access.000000000001-000000000003.jsonl", 1, 3, 1000);
  write_records_at (dir, "access.000000000004-000000000006.jsonl", 4, 6, 7200);
  write_records_at (dir, "access.000000000007-000000000009.jsonl", 7, 9, 3600);
  write_records_at (dir, "access.jsonl", 10, 11, 3700);
  {
    g_auto (TestCmd) r = { 0 };
    g_autoptr (GArray) seqs = NULL;

    run_fusebox (&r, 0, NULL, "log", "--json", live, NULL);
    seqs = seqs_of (r.out);
    assert_int_equal (seqs->len, 11);
    for (guint i = 0; i < seqs->len; i++)
      if (g_array_index (seqs, guint64, i) != i + 1)
        fail_msg ("record %u shown has seq %" G_GUINT64_FORMAT "\n  replay: %s\n  got:\n%s", i,
                  g_array_index (seqs, guint64, i), r.command, r.out);
    assert_string_equal (r.err, "");
  }
  {
    g_auto (TestCmd) r = { 0 };

    run_fusebox (&r, 0, NULL, "report", "--json", live, NULL);
    expect_in (&r, r.out, "\"records\" : 11");
    expect_in (&r, r.out, "\"gaps\" : 0");
    if (strstr (r.err, "seq jumps") != NULL)
      fail_msg ("a gap said\n  replay: %s\n  stderr:\n%s", r.command, r.err);
  }
}

/* A log rotating all the while it is read, one record a file, in a
 * directory of thousands of them, with an empty rotated file dated in 2100
 * beside them: a follower shows every record once, in order, and neither
 * it nor a reader that ends says a record is missing.
 * (ext4 lists a big directory in hash order, and one pass over it taken
 * while names are renamed in may hold a newer rotated file and not the
 * older one: read first, it made the reader warn of missing records it
 * then showed.) */
static void
test_log_fast_rotation_nothing_missing (void **state)
{
  Fixture *f = *state;
  const char *run = test_dir_mkdir (f->dir, "fast", 0700);
  g_autofree char *live = g_build_filename (run, "access.jsonl", NULL);
  const char *out_path = test_dir_path (f->dir, "follower.out");
  const char *err_path = test_dir_path (f->dir, "follower.err");
  g_auto (GStrv) envp = test_environ (f->dir->path);
  g_autofree char *shown = environ_shown (f->dir->path);
  char *argv[] = {
    (char *)g_getenv ("FUSEBOX_BIN"), (char *)"log", (char *)"--follow", (char *)"--json", (char *)run, NULL
  };
  g_autofree char *cmd = test_shell_line (NULL, shown, argv);
  int stop[2], done[2];
  pid_t writer;
  guint64 last = 0;
  guint readers = 0;
  volatile guint64 *written;

  test_write_file (live, "");
  /* and a file at a rotated name that sorts after every other (written in
   * 2100, no record in it): how far a listing may be taken is not to be
   * told by the order of the names it holds */
  {
    g_autofree char *dated = g_build_filename (run, "access.999999999999-999999999999.jsonl", NULL);
    struct timespec times[2] = { { 4102444800, 0 }, { 4102444800, 0 } };

    test_write_file (dated, "");
    assert_int_equal (utimensat (AT_FDCWD, dated, times, 0), 0);
  }
  start_follower_to_files (f, argv, envp, out_path, err_path, cmd);

  written = mmap (NULL, sizeof *written, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true (written != MAP_FAILED);
  *written = 0;
  assert_int_equal (pipe2 (stop, O_CLOEXEC), 0);
  assert_int_equal (pipe2 (done, O_CLOEXEC), 0);
  writer = fork ();
  assert_true (writer >= 0);
  if (writer == 0)
    {
      close (stop[1]);
      close (done[0]);
      if (fcntl (stop[0], F_SETFL, O_NONBLOCK) < 0)
        _exit (5);
      fast_writer (run, stop[0], done[1], 2000, 20000, written);
    }
  close (stop[0]);
  close (done[1]);

  /* Readers that end, one after the other while it rotates: each shows
   * seqs only upward, never says "missing", and shows every record
   * written before it started, or says that it may not have (it stops
   * looking for rotated files after a few listings). */
  for (; readers < 6; readers++)
    {
      struct pollfd writer_done = { .fd = done[0], .events = POLLIN };
      g_auto (TestCmd) r = { 0 };
      char *largv[] = { (char *)g_getenv ("FUSEBOX_BIN"), (char *)"log", (char *)"--json", (char *)run, NULL };
      g_autoptr (GArray) seqs = NULL;

      guint64 before;

      if (poll (&writer_done, 1, 0) != 0)
        break; /* at its MAX */
      before = *written;
      test_cmd_run (&r, NULL, envp, shown, largv);
      if (r.status != 0)
        fail_msg ("exit %d\n  replay: %s\n  stderr: %s", r.status, r.command, r.err);
      if (strstr (r.err, " missing") != NULL)
        fail_msg ("a reader that ends said records were missing while the log rotated\n  replay: %s\n  stderr: %s",
                  r.command, r.err);
      seqs = seqs_of (r.out);
      for (guint i = 1; i < seqs->len; i++)
        if (g_array_index (seqs, guint64, i) <= g_array_index (seqs, guint64, i - 1))
          fail_msg ("seq %" G_GUINT64_FORMAT " shown after %" G_GUINT64_FORMAT "\n  replay: %s",
                    g_array_index (seqs, guint64, i), g_array_index (seqs, guint64, i - 1), r.command);
      if (before > 0 && (seqs->len < before || g_array_index (seqs, guint64, before - 1) != before) &&
          strstr (r.err, "may not have been shown") == NULL)
        fail_msg ("a reader that ends started after seq %" G_GUINT64_FORMAT " was written, showed %u records, and "
                  "did not say some may not have been shown\n  replay: %s\n  stderr: %s",
                  before, seqs->len, r.command, r.err);
    }
  if (readers == 0)
    fail_msg ("the writer made its 20,000 files before a reader that ends could start: nothing was read beside it");
  close (stop[1]);
  assert_int_equal (read (done[0], &last, sizeof last), (ssize_t)sizeof last);
  close (done[0]);
  munmap ((void *)written, sizeof *written);
  {
    int status;

    assert_int_equal (waitpid (writer, &status, 0), writer);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  }

  /* The follower: every seq from 1 to the last, once, in order. */
  for (guint waited = 0;; waited++)
    {
      g_autofree char *out = test_read_file (out_path);
      g_autoptr (GArray) seqs = seqs_of (out);

      if (seqs->len > 0 && g_array_index (seqs, guint64, seqs->len - 1) == last)
        {
          g_autofree char *err = NULL;

          test_kill_child (&f->follower, SIGTERM);
          err = test_read_file (err_path);
          if (strstr (err, "seq jumps") != NULL)
            fail_msg ("the follower warned of a gap while the log rotated\n  replay: %s\n  stderr:\n%s", cmd, err);
          assert_int_equal (seqs->len, last);
          for (guint i = 0; i < seqs->len; i++)
            if (g_array_index (seqs, guint64, i) != i + 1)
              fail_msg ("record %u shown is seq %" G_GUINT64_FORMAT "\n  replay: %s", i + 1,
                        g_array_index (seqs, guint64, i), cmd);
          break;
        }
      if (waited == 600)
        fail_msg ("the follower showed %u records in 60 s, not up to seq %" G_GUINT64_FORMAT "\n  replay: %s",
                  seqs->len, last, cmd);
      g_usleep (100 * 1000);
    }
}

/* The writer renamed the live file away and could not make a new one
 * (another user's object held the name), so it writes on in the renamed
 * file: its change time is current all the while.  A reader that ends
 * left such a file for a later listing it never made, and ended without
 * its records and without a word.  Each read shows them all, up to what
 * the file held when it was read. */
static void
test_log_written_on_after_rename_read (void **state)
{
  Fixture *f = *state;
  const char *run = test_dir_mkdir (f->dir, "on", 0700);
  g_autofree char *live = g_build_filename (run, "access.jsonl", NULL);
  g_auto (GStrv) envp = test_environ (f->dir->path);
  g_autofree char *shown = environ_shown (f->dir->path);
  char *argv[] = { (char *)g_getenv ("FUSEBOX_BIN"), (char *)"log", (char *)"--json", (char *)run, NULL };
  int stop[2];
  pid_t writer;

  assert_int_equal (pipe2 (stop, O_CLOEXEC), 0);
  writer = fork ();
  assert_true (writer >= 0);
  if (writer == 0)
    {
      guint64 seq = 0;
      int fd = -1;
      char byte;

      close (stop[1]);
      if (fcntl (stop[0], F_SETFL, O_NONBLOCK) < 0)
        _exit (5);
      /* one record a file up to 200, the 200th renamed with no new live
       * file after it, then a record a millisecond in the renamed file */
      for (;;)
        {
          g_autofree char *rec = g_strdup_printf (
            "{\"ts\":\"2024-05-01T12:00:00.001000Z\",\"run\":\"20240501-120000-on0001\",\"seq\":%" G_GUINT64_FORMAT
            ",\"pid\":100,\"uid\":0,\"comm\":\"sh\",\"op\":\"open\",\"path\":\"/work/a\",\"access\":\"read\","
            "\"decision\":\"allow\",\"errno\":0,\"rule\":0,\"rule_origin\":\"p.json:1:1\",\"why\":\"w\"}\n",
            ++seq);

          if (fd < 0 && (fd = open (live, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0)
            _exit (2);
          if (write (fd, rec, strlen (rec)) != (ssize_t)strlen (rec))
            _exit (3);
          if (seq <= 200)
            {
              g_autofree char *name =
                g_strdup_printf ("%s/access.%012" G_GUINT64_FORMAT "-%012" G_GUINT64_FORMAT ".jsonl", run, seq, seq);

              if (rename (live, name) < 0)
                _exit (4);
              if (seq < 200)
                {
                  close (fd);
                  fd = -1;
                }
            }
          else
            {
              if (read (stop[0], &byte, 1) == 0)
                _exit (0);
              g_usleep (1000);
            }
        }
    }
  close (stop[0]);
  /* the 200th file there, written on */
  {
    g_autofree char *last = g_build_filename (run, "access.000000000200-000000000200.jsonl", NULL);
    guint waited = 0;

    while (!g_file_test (last, G_FILE_TEST_EXISTS) && waited++ < 3000)
      g_usleep (10 * 1000);
    assert_true (g_file_test (last, G_FILE_TEST_EXISTS));
  }
  for (guint i = 0; i < 20; i++)
    {
      g_auto (TestCmd) r = { 0 };
      g_autoptr (GArray) seqs = NULL;

      g_usleep (50 * 1000);
      test_cmd_run (&r, NULL, envp, shown, argv);
      if (r.status != 0)
        fail_msg ("exit %d\n  replay: %s\n  stderr: %s", r.status, r.command, r.err);
      seqs = seqs_of (r.out);
      for (guint k = 0; k < seqs->len; k++)
        if (g_array_index (seqs, guint64, k) != k + 1)
          fail_msg ("read %u: record %u shown is seq %" G_GUINT64_FORMAT "\n  replay: %s", i, k + 1,
                    g_array_index (seqs, guint64, k), r.command);
      if (seqs->len < 201)
        fail_msg ("read %u: %u records, where the renamed file written on held 201 or more already\n  replay: "
                  "%s\n  stderr: %s",
                  i, seqs->len, r.command, r.err);
    }
  close (stop[1]);
  {
    int status;

    assert_int_equal (waitpid (writer, &status, 0), writer);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  }
}

/* Rotated files that keep coming while a reader that ends reads (here
 * empty ones, made as fast as a child can): it stops looking for them
 * after a few listings, and then says, at its end, that some records may
 * not have been shown (a rotation after it stopped looking may have taken
 * away records that were in the live file when it started, and no later
 * record need show the gap).  It ended without a word. */
static void
test_log_capped_reader_says_so (void **state)
{
  Fixture *f = *state;
  const char *run = test_dir_mkdir (f->dir, "capped", 0700);
  g_autofree char *live = g_build_filename (run, "access.jsonl", NULL);
  g_auto (GStrv) envp = test_environ (f->dir->path);
  g_autofree char *shown = environ_shown (f->dir->path);
  char *argv[] = { (char *)g_getenv ("FUSEBOX_BIN"), (char *)"log", (char *)"--json", (char *)run, NULL };
  g_auto (TestCmd) r = { 0 };
  pid_t maker;

  test_write_file (live, "{\"ts\":\"2024-05-01T12:00:00.001000Z\",\"run\":\"20240501-120000-cap001\",\"seq\":1,"
                         "\"pid\":100,\"uid\":0,\"comm\":\"sh\",\"op\":\"open\",\"path\":\"/work/a\",\"access\":"
                         "\"read\",\"decision\":\"allow\",\"errno\":0,\"rule\":0,\"rule_origin\":\"p.json:1:1\","
                         "\"why\":\"w\"}\n");
  maker = fork ();
  assert_true (maker >= 0);
  if (maker == 0)
    for (guint64 n = 1000;; n++)
      {
        g_autofree char *name =
          g_strdup_printf ("%s/access.%012" G_GUINT64_FORMAT "-%012" G_GUINT64_FORMAT ".jsonl", run, n, n);
        int fd = open (name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

        if (fd < 0 || n > 1000 + 20000)
          _exit (fd < 0 ? 1 : 0);
        close (fd);
        /* past the first 2,000, ten every 2 ms: each listing of so many
         * names takes long enough for some to come, and the names grow
         * slowly enough for the reader to list 16 times before the last
         * (a loaded machine slows the reader more than this pace) */
        if (n >= 1000 + 2000 && n % 10 == 0)
          g_usleep (2000);
      }
  /* the first 2,000 there before it starts */
  for (guint waited = 0; test_count_entries (run) < 2000 && waited < 10000; waited++)
    g_usleep (1000);
  test_cmd_run (&r, NULL, envp, shown, argv);
  kill (maker, SIGKILL);
  assert_int_equal (waitpid (maker, NULL, 0), maker);
  if (r.status != 0)
    fail_msg ("exit %d\n  replay: %s\n  stderr: %s", r.status, r.command, r.err);
  if (strstr (r.err, "may not have been shown") == NULL)
    fail_msg ("a reader that stopped looking for rotated files did not say records may not have been shown\n  "
              "replay: %s\n  stderr: %.2000s",
              r.command, r.err);
}

/* A follower of a log whose directory is removed says so, once, and goes
 * on: everything the directory held was shown, and nothing more will come
 * there (it follows the directory it opened, never the path again). */
static void
test_log_follow_removed_directory (void **state)
{
  Fixture *f = *state;
  g_autofree char *run = make_run (f->dir->path, "20240501-120000-gone");
  const char *out_path = test_dir_path (f->dir, "gone.out");
  const char *err_path = test_dir_path (f->dir, "gone.err");
  g_auto (GStrv) envp = test_environ (f->dir->path);
  g_autofree char *shown = environ_shown (f->dir->path);
  char *argv[] = { (char *)g_getenv ("FUSEBOX_BIN"), (char *)"log", (char *)"--follow", (char *)"--json", run, NULL };
  g_autofree char *cmd = test_shell_line (NULL, shown, argv);
  guint waited = 0;

  start_follower_to_files (f, argv, envp, out_path, err_path, cmd);
  /* the fixture's 8 records shown, then the directory removed */
  wait_for_lines (out_path, 8, cmd);
  test_rm_rf (run);
  for (waited = 0;; waited++)
    {
      g_autofree char *err = test_read_file (err_path);

      if (strstr (err, "was removed") != NULL)
        break;
      if (waited == 100)
        fail_msg ("no word from the follower 10 s after its log's directory was removed\n  replay: %s\n  stderr: %s",
                  cmd, err);
      g_usleep (100 * 1000);
    }
  g_usleep (1000 * 1000);
  {
    g_autofree char *err = test_read_file (err_path);
    g_autofree char *said = g_strdup_printf ("the log's directory %s was removed", run);
    const char *first = strstr (err, said);

    /* said once, naming it, and the follower goes on */
    if (first == NULL || strstr (first + strlen (said), "was removed") != NULL)
      fail_msg ("the removal not said once, naming %s\n  replay: %s\n  stderr: %s", run, cmd, err);
    assert_true (test_pid_alive (f->follower));
  }
  test_kill_child (&f->follower, SIGTERM);
}

/* `log --follow` of a log not written yet (the run not started, or its
 * --log not made), like tail -F: it says it waits, and shows the records
 * once the file is there.  It exited 1, "no access log". */
static void
test_log_follow_waits_for_log (void **state)
{
  Fixture *f = *state;
  const char *dir = test_dir_path (f->dir, "waiting");
  g_autofree char *live = g_build_filename (dir, "later.jsonl", NULL);
  const char *out_path = test_dir_path (f->dir, "waiting.out");
  const char *err_path = test_dir_path (f->dir, "waiting.err");
  g_auto (GStrv) envp = test_environ (NULL);
  g_autofree char *shown = environ_shown (NULL);
  char *argv[] = { (char *)g_getenv ("FUSEBOX_BIN"), (char *)"log", (char *)"--follow", (char *)"--json", live, NULL };
  g_autofree char *cmd = test_shell_line (NULL, shown, argv);
  g_autofree char *said = g_strdup_printf ("no access log at %s yet: waiting for one", live);

  assert_int_equal (g_mkdir (dir, 0700), 0);
  start_follower_to_files (f, argv, envp, out_path, err_path, cmd);
  for (guint waited = 0;; waited++)
    {
      g_autofree char *err = test_read_file (err_path);

      if (strstr (err, said) != NULL)
        break;
      if (waited == 300 || !test_pid_alive (f->follower))
        fail_msg ("the follower did not say it waits\n  replay: %s\n  stderr: %s", cmd, err);
      g_usleep (100 * 1000);
    }
  write_records_at (dir, "later.jsonl", 1, 3, 0);
  for (guint waited = 0;; waited++)
    {
      g_autofree char *out = test_read_file (out_path);
      g_autoptr (GArray) seqs = seqs_of (out);

      if (seqs->len == 3 && g_array_index (seqs, guint64, 0) == 1 && g_array_index (seqs, guint64, 2) == 3)
        break;
      if (waited == 300)
        fail_msg ("the follower showed %u records in 30 s, not 3\n  replay: %s\n  got:\n%s", seqs->len, cmd, out);
      g_usleep (100 * 1000);
    }
  test_kill_child (&f->follower, SIGTERM);
  {
    /* without --follow, still an error */
    g_autofree char *other = g_build_filename (dir, "never.jsonl", NULL);
    g_auto (TestCmd) r = { 0 };

    run_fusebox (&r, 1, NULL, "log", other, NULL);
    expect_in (&r, r.err, "no access log at");
  }
}

/* A follower whose log's directory is renamed away and another made at
 * its path (a new run written there) says so, once: it goes on in the one
 * it opened, and would otherwise show nothing more without a word. */
static void
test_log_follow_directory_replaced (void **state)
{
  Fixture *f = *state;
  g_autofree char *run = make_run (f->dir->path, "20240501-120000-moved");
  g_autofree char *old = g_strconcat (run, ".old", NULL);
  const char *out_path = test_dir_path (f->dir, "moved.out");
  const char *err_path = test_dir_path (f->dir, "moved.err");
  g_auto (GStrv) envp = test_environ (f->dir->path);
  g_autofree char *shown = environ_shown (f->dir->path);
  char *argv[] = { (char *)g_getenv ("FUSEBOX_BIN"), (char *)"log", (char *)"--follow", (char *)"--json", run, NULL };
  g_autofree char *cmd = test_shell_line (NULL, shown, argv);
  g_autofree char *said = g_strdup_printf ("%s is another directory now, not the directory this follower opened", run);

  start_follower_to_files (f, argv, envp, out_path, err_path, cmd);
  wait_for_lines (out_path, 8, cmd);
  assert_int_equal (rename (run, old), 0);
  assert_int_equal (g_mkdir (run, 0700), 0);
  write_records_at (run, "access.jsonl", 1, 2, 0);
  for (guint waited = 0;; waited++)
    {
      g_autofree char *err = test_read_file (err_path);

      if (strstr (err, said) != NULL)
        break;
      if (waited == 100)
        fail_msg ("no word from the follower 10 s after its directory was replaced\n  replay: %s\n  stderr: %s", cmd,
                  err);
      g_usleep (100 * 1000);
    }
  g_usleep (2500 * 1000);
  {
    g_autofree char *err = test_read_file (err_path);
    const char *first = strstr (err, said);

    /* once, and the follower goes on */
    if (strstr (first + strlen (said), "this follower opened") != NULL)
      fail_msg ("the replacement said more than once\n  replay: %s\n  stderr: %s", cmd, err);
    assert_true (test_pid_alive (f->follower));
  }
  test_kill_child (&f->follower, SIGTERM);
  test_rm_rf (old);
}

/* --- report ----------------------------------------------------------- */

static void
test_report_text (void **state)
{
  g_auto (TestCmd) r = { 0 };

  run_on_fixture (&r, "report", NULL, "basic.jsonl");
  expect_in (&r, r.out, "run 20240501-120000-fixt01: 12 records, seq 1-12\n");
  expect_in (&r, r.out, "\nFiles created (1)\n  /work/new.txt  (create)\n");
  expect_in (&r, r.out, "\nFiles written (1)\n        11 B  /work/new.txt\n");
  expect_in (&r, r.out, "\nFiles renamed (1)\n  /work/a.tmp \u2192 /work/a.txt\n");
  expect_in (&r, r.out, "\nFiles deleted (1)\n  /work/old.txt  (unlink)\n");
  expect_in (&r, r.out, "     2.0 KiB  /etc/passwd\n");
  expect_in (&r, r.out, "       2  rule 2 at policy.json:4:5: keys are secret  [deny 2]\n");
  expect_in (&r, r.out, "      /work/esc\\x1b[31mred\n");
  expect_in (&r, r.out, "  denied      4 (deny 2, hide 1, readonly 1)\n");
  expect_in (&r, r.out, "  seq gaps    0\n");
  assert_null (strstr (r.out, "WARNING"));
  assert_null (strchr (r.out, '\033'));
}

static void
test_report_json (void **state)
{
  g_auto (TestCmd) r = { 0 };
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  JsonObject *o, *totals;

  run_on_fixture (&r, "report", "--json", "basic.jsonl");
  if (!json_parser_load_from_data (parser, r.out, -1, &error))
    fail_msg ("report --json is not JSON: %s\n  replay: %s", error->message, r.command);
  o = json_node_get_object (json_parser_get_root (parser));
  assert_int_equal (json_object_get_int_member (o, "version"), 1);
  totals = json_object_get_object_member (o, "totals");
  assert_int_equal (json_object_get_int_member (totals, "records"), N_BASIC);
  assert_int_equal (json_object_get_int_member (totals, "denied"), 4);
  assert_int_equal (json_object_get_int_member (totals, "gaps"), 0);
  assert_int_equal (
    json_array_get_length (json_object_get_array_member (json_object_get_object_member (o, "denials"), "by_rule")), 3);
  assert_int_equal (
    json_array_get_length (json_object_get_array_member (json_object_get_object_member (o, "files"), "read")), 3);
}

static void
test_report_damaged (void **state)
{
  g_auto (TestCmd) r = { 0 };
  g_auto (TestCmd) t = { 0 };

  run_on_fixture (&r, "report", NULL, "gap.jsonl");
  expect_in (&r, r.out, "WARNING: the log is not whole: 2 records missing");
  expect_in (&r, r.out, "  seq gaps    2 (records are missing)\n");
  expect_in (&r, r.err, "seq jumps from 2 to 5");

  run_on_fixture (&t, "report", "--json", "truncated.jsonl");
  expect_in (&t, t.out, "\"truncated_lines\" : 1");
  expect_in (&t, t.err, "incomplete");
}

static void
test_report_usage (void **state)
{
  Fixture *f = *state;
  g_auto (TestCmd) r = { 0 };
  g_auto (TestCmd) m = { 0 };
  const char *missing = test_dir_path (f->dir, "none");

  run_fusebox (&r, 2, NULL, "report", "--bogus", NULL);
  run_fusebox (&m, 1, f->dir->path, "report", missing, NULL);
  expect_in (&m, m.err, missing);
}

TEST_DEFINE_MAIN (NULL, NULL, LOG_TEST (test_log_people), LOG_TEST (test_log_color),
                  LOG_TEST (test_log_json_passthrough), LOG_TEST (test_log_filters), LOG_TEST (test_log_usage_errors),
                  LOG_TEST (test_log_missing), LOG_TEST (test_log_truncated_and_gap),
                  LOG_TEST (test_log_rotated_run_dir), LOG_TEST (test_log_run_id_and_latest),
                  LOG_TEST (test_log_follow_rotation), LOG_TEST (test_log_fast_rotation_nothing_missing),
                  LOG_TEST (test_log_follow_removed_directory), LOG_TEST (test_log_written_on_after_rename_read),
                  LOG_TEST (test_log_capped_reader_says_so), LOG_TEST (test_log_clock_set_back),
                  LOG_TEST (test_log_follow_waits_for_log), LOG_TEST (test_log_follow_directory_replaced),
                  LOG_TEST (test_report_text), LOG_TEST (test_report_json), LOG_TEST (test_report_damaged),
                  LOG_TEST (test_report_usage))
