/* fusebox — the end of a FUSE session's workers (fs/fs-fuse-session.c).
 *
 * libfuse ends its workers with pthread_cancel(), and reports a failed read
 * of the device with perror(), which locks stderr without a cleanup handler:
 * a worker cancelled in that report left stderr locked by a thread that was
 * gone, and `fusebox run` then hung on its last message.  A worker must be
 * cancellable in its read and not after it: this test plays libfuse's
 * worker (cancellable around fuse_session_receive_buf, as
 * fuse_session_loop_mt's is) over a session served by fb_fuse_serve_fd,
 * on a descriptor whose read fails (a directory: EISDIR), with stderr a
 * full pipe, so that the report blocks in its write(2) until the test
 * drains the pipe, and is cancelled while it is there. */
#include "tests/unit/test-fs-util.h"

#include <pthread.h>
#include <sys/mman.h>
#include <wchar.h>
#include <sys/syscall.h>

#include "fs/fs-fuse-private.h"
#include "tests/lib/test-host.h"

static const char policy_text[] = "{ \"version\": 1,\n"
                                  "  \"rules\": [ { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" } ] }\n";

typedef struct
{
  struct fuse_session *se;
  gint tid;     /* atomic: the worker's, once it runs */
  gint reports; /* atomic: receives that returned */
  gint done;    /* atomic: it returned (was not cancelled) */
} Worker;

/* fuse_session_loop_mt's worker (lib/fuse_loop_mt.c, fuse_do_work), two
 * turns at most. */
static void
free_buf (void *data)
{
  free (((struct fuse_buf *)data)->mem);
}

static void *
worker_main (void *data)
{
  Worker *w = data;
  struct fuse_buf buf = { 0 };

  pthread_setcancelstate (PTHREAD_CANCEL_DISABLE, NULL);
  g_atomic_int_set (&w->tid, (gint)syscall (SYS_gettid));
  pthread_cleanup_push (free_buf, &buf);
  for (int i = 0; i < 2; i++)
    {
      pthread_setcancelstate (PTHREAD_CANCEL_ENABLE, NULL);
      fuse_session_receive_buf (w->se, &buf);
      pthread_setcancelstate (PTHREAD_CANCEL_DISABLE, NULL);
      g_atomic_int_inc (&w->reports);
    }
  pthread_cleanup_pop (1);
  g_atomic_int_set (&w->done, 1);
  return NULL;
}

/* Whether thread TID is in write(2).  (No failing here: stderr is a full
 * pipe meanwhile.) */
static bool
in_write (pid_t tid)
{
  g_autofree char *path = g_strdup_printf ("/proc/self/task/%d/syscall", (int)tid);
  g_autofree char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return false;
  return g_ascii_strtoll (text, NULL, 10) == SYS_write && g_ascii_isdigit (text[0]);
}

static void
test_report_not_cancelled (void **state)
{
  Fx *fx = *state;
  FbFuse *fuse = NULL;
  Worker w = { 0 };
  pthread_t thread;
  void *ret = NULL;
  int pipe_fds[2], saved_stderr, dir_fd;
  char chunk[4096];
  g_autoptr (GString) said = g_string_new (NULL);
  ssize_t n;

  if (!g_file_test ("/proc/thread-self/syscall", G_FILE_TEST_EXISTS))
    test_skip_or_fail ("/proc/thread-self/syscall is missing (a kernel without CONFIG_HAVE_ARCH_TRACEHOOK): "
                       "the test can't see its worker wait in write(2)");
  assert_int_equal (g_mkdir_with_parents (fx->vroot, 0755), 0);
  fx_start (fx, policy_text, NULL, -1);
  assert_int_equal (fb_fuse_new (fx->view, NULL, &fuse), 0);
  /* a descriptor whose read fails with an errno libfuse reports */
  dir_fd = open (fx->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (dir_fd >= 0);
  assert_int_equal (fb_fuse_serve_fd (fuse, dir_fd), 0);
  w.se = fuse->se;

  /* stderr: used already (as fusebox's is), and a full pipe */
  fwide (stderr, -1);
  assert_int_equal (pipe2 (pipe_fds, O_CLOEXEC), 0);
  fcntl (pipe_fds[1], F_SETPIPE_SZ, 4096);
  fcntl (pipe_fds[1], F_SETFL, O_NONBLOCK);
  memset (chunk, 'x', sizeof chunk);
  while (write (pipe_fds[1], chunk, sizeof chunk) > 0 || errno == EINTR)
    ;
  while (write (pipe_fds[1], chunk, 1) > 0 || errno == EINTR)
    ;
  assert_int_equal (errno, EAGAIN);
  fcntl (pipe_fds[1], F_SETFL, 0);
  fflush (stderr);
  saved_stderr = fcntl (STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  assert_true (saved_stderr >= 0);
  assert_int_equal (dup2 (pipe_fds[1], STDERR_FILENO), STDERR_FILENO);

  assert_int_equal (pthread_create (&thread, NULL, worker_main, &w), 0);
  /* until its report of the failed read waits for room in the pipe (or,
   * broken, it did not report and returned: found below) */
  while ((g_atomic_int_get (&w.tid) == 0 || !in_write (g_atomic_int_get (&w.tid))) && !g_atomic_int_get (&w.done))
    g_usleep (1000);
  /* the serving thread's end of the workers, while the report is written */
  pthread_cancel (thread);
  fcntl (pipe_fds[0], F_SETFL, O_NONBLOCK);
  while ((n = read (pipe_fds[0], chunk, sizeof chunk)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0)
      g_string_append_len (said, chunk, n);
  fcntl (pipe_fds[0], F_SETFL, 0);
  /* the report completes; the next read is where the cancel ends it */
  pthread_join (thread, &ret);
  dup2 (saved_stderr, STDERR_FILENO);
  close (saved_stderr);
  close (pipe_fds[1]);
  while ((n = read (pipe_fds[0], chunk, sizeof chunk)) > 0)
    g_string_append_len (said, chunk, n);
  close (pipe_fds[0]);

  /* stderr is not left locked: the next message can be written (if it
   * is, cmocka's report of a failure would wait for it forever: this one
   * goes to stdout) */
  if (ftrylockfile (stderr) != 0)
    {
      printf ("FAILED: stderr is still locked by the cancelled worker: the next message on stderr waits forever\n");
      fflush (stdout);
      _exit (1);
    }
  funlockfile (stderr);
  assert_int_equal (g_atomic_int_get (&w.reports), 1);
  assert_non_null (strstr (said->str, "fuse: reading device"));
  /* an idle worker is still ended by the cancel, in its read */
  assert_ptr_equal (ret, PTHREAD_CANCELED);

  fb_fuse_free (fuse);
}

/* What libfuse and fusermount3 print while mounting goes on to the
 * operator's terminal: a mount point's name in it (a directory a sandbox
 * named, say) shows its escape sequences, carriage returns and C1 controls
 * as \xHH, never as what they would do; lines, tabs and UTF-8 stay. */
static void
test_messages_shown_safe (void **state)
{
  static const char said[] = "fusermount3: failed to access mountpoint /w/\x1b[31mred\x1b[0m\rfake\x7f:\t\xc2\x9b"
                             "2J "
                             "\xc3\xa9t\xc3\xa9\nsecond line\n";
  static const char shown[] = "fusermount3: failed to access mountpoint "
                              "/w/\\x1b[31mred\\x1b[0m\\x0dfake\\x7f:\t\\xc2\\x9b2J \xc3\xa9t\xc3\xa9\nsecond line\n";
  int in = memfd_create ("said", MFD_CLOEXEC), out = memfd_create ("shown", MFD_CLOEXEC);
  char buf[512];
  ssize_t n;

  (void)state;
  assert_true (in >= 0 && out >= 0);
  assert_int_equal (write (in, said, sizeof said - 1), sizeof said - 1);
  assert_int_equal (lseek (in, 0, SEEK_SET), 0);
  fb_fuse_copy_shown (in, out);
  assert_int_equal (lseek (out, 0, SEEK_SET), 0);
  n = read (out, buf, sizeof buf - 1);
  assert_true (n >= 0);
  buf[n] = '\0';
  assert_string_equal (buf, shown);
  close (in);
  close (out);
}

TEST_DEFINE_MAIN (NULL, NULL, FX_TEST (test_report_not_cancelled), cmocka_unit_test (test_messages_shown_safe))
