/* fusebox — "no record is lost even when the daemon dies": a child process
 * runs a real FbAccessLog (pusher thread + main loop), reports how many
 * records the loop has written, and is SIGKILLed; the file must then hold at
 * least those records, complete and gap-free.  Each test forks before it
 * starts any thread of its own (the child is a fresh single-threaded copy). */
#include "tests/unit/test-ipc-util.h"
#include "tests/lib/test-logread.h"

#include <signal.h>
#include <sys/wait.h>

#define N_EVENTS 5000

typedef struct
{
  TestLogFile log; /* the temporary directory and the log's path */
  pid_t child;
} Fixture;

static int
setup (void **state)
{
  Fixture *f = g_new0 (Fixture, 1);

  test_log_file_init (&f->log);
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  Fixture *f = *state;

  if (f->child > 0)
    {
      kill (f->child, SIGKILL);
      waitpid (f->child, NULL, 0);
    }
  test_log_file_clear (&f->log);
  g_free (f);
  return 0;
}

static gpointer
pusher_main (gpointer data)
{
  test_push_paths (data, "/work/f", N_EVENTS, NULL);
  return NULL;
}

static void
write_all (int fd, const void *buf, size_t len)
{
  if (write (fd, buf, len) != (ssize_t)len)
    _exit (3);
}

/* The child: log, one pusher thread, the loop on the main thread.  After
 * every batch it tells the parent the written count; once REPORT_AT records
 * are written it stops reporting and waits for its SIGKILL, the pusher still
 * going when REPORT_AT < N_EVENTS. */
static void G_GNUC_NORETURN
child_main (const char *path, int report_fd, guint64 report_at)
{
  g_autoptr (GError) error = NULL;
  FbAccessLogOptions opts = { .path = path, .run_id = "killed", .queue_capacity = 16 };
  FbAccessLog *log = fb_access_log_new (&opts, NULL, &error);
  guint64 n = 0;

  if (log == NULL)
    _exit (2);
  g_thread_new ("pusher", pusher_main, fb_access_log_get_sink (log));
  while (n < report_at)
    {
      g_main_context_iteration (NULL, TRUE);
      n = fb_access_log_get_count (log);
    }
  write_all (report_fd, &n, sizeof n);
  /* Don't close the log: the point is dying without a goodbye. */
  for (;;)
    pause ();
}

static guint64
run_and_kill (Fixture *f, guint64 report_at)
{
  int pipefd[2];
  guint64 written = 0;
  int status = 0;

  assert_int_equal (pipe2 (pipefd, O_CLOEXEC), 0);
  f->child = fork ();
  assert_true (f->child >= 0);
  if (f->child == 0)
    {
      close (pipefd[0]);
      child_main (f->log.path, pipefd[1], report_at);
    }
  close (pipefd[1]);
  if (read (pipefd[0], &written, sizeof written) != (ssize_t)sizeof written)
    fail_msg ("the child died before reporting (see its stderr)");
  close (pipefd[0]);
  assert_int_equal (kill (f->child, SIGKILL), 0);
  assert_int_equal (waitpid (f->child, &status, 0), f->child);
  f->child = 0;
  assert_true (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
  return written;
}

/* Everything the loop wrote is in the file after SIGKILL: N complete lines. */
static void
test_killed_after_all_written (void **state)
{
  Fixture *f = *state;
  guint64 written = run_and_kill (f, N_EVENTS);
  g_autoptr (GPtrArray) lines = NULL;

  assert_int_equal (written, N_EVENTS);
  lines = test_read_lines (f->log.path); /* fails on a torn last line */
  test_assert_seq_paths (lines, N_EVENTS, "/work/f");
}

/* Killed while the pusher is still pushing: at least what was reported is
 * there, gap-free from 1; whatever follows is at most one torn line, which
 * the reader reports and skips. */
static void
test_killed_mid_stream (void **state)
{
  Fixture *f = *state;
  guint64 written = run_and_kill (f, N_EVENTS / 3);
  FbLogReaderStats stats;

  assert_true (written >= N_EVENTS / 3);
  /* the line cut by the kill, if any, is reported and skipped */
  assert_true (test_log_read_back (f->log.path, "the killed writer's log", true, &stats) >= written);
  assert_true (stats.truncated <= 1);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test_setup_teardown (test_killed_after_all_written, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_killed_mid_stream, setup, teardown))
