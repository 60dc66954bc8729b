/* fusebox — who a FUSE caller of a shared view is: the pid namespace of
 * any thread, not only of a process's first (FUSE names the caller by
 * thread id, which pidfd_open(TID, 0) refuses for the others), through a
 * thread pidfd (PIDFD_THREAD, Linux 6.9) and, as on an older kernel,
 * through the thread group's; and never for an id that is gone.  And
 * the word that an ended member's files are all released: said once, by
 * whichever drops the last file's reference (a FUSE worker), never while
 * one is still open. */
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

typedef struct
{
  gint told;      /* atomic */
  pthread_t by;   /* the thread that told */
  gint file_refs; /* how many "files" were still open when it was told */
  gint open_now;  /* atomic: the files open, as the test counts them */
} Released;

static void
on_released (gpointer data)
{
  Released *r = data;

  r->by = pthread_self ();
  r->file_refs = g_atomic_int_get (&r->open_now);
  g_atomic_int_inc (&r->told);
}

/* A member of a share in our own pid namespace (a real nsfs descriptor). */
static FbViewMember *
member_new (FbViewShare *share)
{
  g_autoptr (GError) error = NULL;
  int fd = open ("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
  FbViewMember *m;

  assert_true (fd >= 0);
  m = fb_view_share_add (share, fd, "p", NULL, NULL, NULL, NULL, &error);
  assert_non_null (m);
  close (fd);
  return m;
}

static void *
release_file (void *data)
{
  fb_view_member_unref (data);
  return NULL;
}

static void
test_released_after_last_file (void **state)
{
  FbViewShare *share = fb_view_share_new (NULL);
  FbViewMember *m = member_new (share);
  Released r = { .open_now = 2 };
  pthread_t th;

  (void)state;
  /* two files it opened (each holds the member, as FbViewFile.owner does) */
  fb_view_member_ref (m);
  fb_view_member_ref (m);
  fb_view_member_end_notify (m, on_released, &r);
  assert_int_equal (g_atomic_int_get (&r.told), 0);
  /* the first release: one is still open */
  g_atomic_int_dec_and_test (&r.open_now);
  fb_view_member_unref (m);
  assert_int_equal (g_atomic_int_get (&r.told), 0);
  /* the last, on another thread (a FUSE worker's RELEASE): told there */
  g_atomic_int_dec_and_test (&r.open_now);
  assert_int_equal (pthread_create (&th, NULL, release_file, m), 0);
  assert_int_equal (pthread_join (th, NULL), 0);
  assert_int_equal (r.told, 1);
  assert_int_equal (r.file_refs, 0);
  assert_true (pthread_equal (r.by, th));
  fb_view_member_unref (m);
  assert_int_equal (r.told, 1);
  fb_view_share_free (share);
}

static void
test_released_none_open (void **state)
{
  FbViewShare *share = fb_view_share_new (NULL);
  FbViewMember *m = member_new (share);
  Released r = { 0 };

  (void)state;
  /* nothing of it is open: told at once, on the caller's thread */
  fb_view_member_end_notify (m, on_released, &r);
  assert_int_equal (r.told, 1);
  assert_true (pthread_equal (r.by, pthread_self ()));
  fb_view_member_unref (m);
  fb_view_share_free (share);
}

/* The end and a last release at the same moment, many times: told once
 * each time, never missed, never twice. */
static void
test_released_race (void **state)
{
  FbViewShare *share = fb_view_share_new (NULL);

  (void)state;
  for (int i = 0; i < 2000; i++)
    {
      FbViewMember *m = member_new (share);
      Released r = { 0 };
      pthread_t th;

      fb_view_member_ref (m);
      assert_int_equal (pthread_create (&th, NULL, release_file, m), 0);
      fb_view_member_end_notify (m, on_released, &r);
      assert_int_equal (pthread_join (th, NULL), 0);
      assert_int_equal (r.told, 1);
      fb_view_member_unref (m);
    }
  fb_view_share_free (share);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_thread_of_group), cmocka_unit_test (test_released_after_last_file),
                  cmocka_unit_test (test_released_none_open), cmocka_unit_test (test_released_race))
