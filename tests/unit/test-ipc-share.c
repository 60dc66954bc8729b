/* fusebox — who a FUSE caller of a shared view is: the pid namespace of
 * any thread, not only of a process's first (FUSE names the caller by
 * thread id, which pidfd_open(TID, 0) refuses for the others), through a
 * thread pidfd (PIDFD_THREAD, Linux 6.9) and, as on an older kernel,
 * through the thread group's; and never for an id that is gone. */
#include "tests/unit/test-ipc-util.h"

#include <pthread.h>
#include <sys/syscall.h>

typedef struct
{
  pid_t tid;
  int up[2]; /* the thread says it runs */
  int go[2]; /* and waits for a byte before it ends */
} Thread;

static void *
thread_main (void *data)
{
  Thread *t = data;
  char c;

  t->tid = (pid_t)syscall (SYS_gettid);
  if (write (t->up[1], "u", 1) != 1 || read (t->go[0], &c, 1) != 1)
    return NULL;
  return NULL;
}

static guint64
own_pidns (void)
{
  struct stat st;

  assert_int_equal (stat ("/proc/self/ns/pid", &st), 0);
  return (guint64)st.st_ino;
}

/* PIDFD_THREAD known to this kernel? */
static bool
thread_pidfds (void)
{
  int fd = (int)syscall (SYS_pidfd_open, getpid (), O_EXCL);

  if (fd < 0)
    return false;
  close (fd);
  return true;
}

static void
test_thread_of_group (void **state)
{
  Thread t = { 0 };
  pthread_t th;
  gboolean cacheable;
  char c, task[64];
  int pidfd;

  (void)state;
  assert_int_equal (pipe (t.up), 0);
  assert_int_equal (pipe (t.go), 0);
  assert_int_equal (pthread_create (&th, NULL, thread_main, &t), 0);
  assert_int_equal (read (t.up[0], &c, 1), 1);
  assert_true (t.tid > 0 && t.tid != getpid ());

  /* the group's pidfd: the thread is known, but its own exit is not the
   * pidfd's, so the answer is not kept */
  assert_int_equal (fb_view_share_task_pidns (t.tid, FALSE, &pidfd, &cacheable), own_pidns ());
  assert_true (pidfd >= 0);
  assert_false (cacheable);
  close (pidfd);
  /* the process's first thread: its exit is the group's pidfd's */
  assert_int_equal (fb_view_share_task_pidns (getpid (), FALSE, &pidfd, &cacheable), own_pidns ());
  assert_true (cacheable);
  close (pidfd);
  if (thread_pidfds ())
    {
      assert_int_equal (fb_view_share_task_pidns (t.tid, TRUE, &pidfd, &cacheable), own_pidns ());
      assert_true (pidfd >= 0 && cacheable);
      close (pidfd);
    }

  /* gone: no answer, by either way */
  assert_int_equal (write (t.go[1], "e", 1), 1);
  assert_int_equal (pthread_join (th, NULL), 0);
  g_snprintf (task, sizeof task, "/proc/%d/task/%d", (int)getpid (), (int)t.tid);
  for (int i = 0; i < 1000 && access (task, F_OK) == 0; i++) /* a bounded wait for its release */
    g_usleep (1000);
  assert_int_equal (fb_view_share_task_pidns (t.tid, FALSE, &pidfd, &cacheable), 0);
  assert_int_equal (pidfd, -1);
  if (thread_pidfds ())
    assert_int_equal (fb_view_share_task_pidns (t.tid, TRUE, &pidfd, &cacheable), 0);
  for (int i = 0; i < 2; i++)
    {
      close (t.up[i]);
      close (t.go[i]);
    }
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_thread_of_group))
