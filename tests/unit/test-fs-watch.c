/* fusebox — the host watcher (fs/fs-watch.c) lets go of a filesystem once
 * no directory on it is marked: a descriptor it kept there would hold the
 * filesystem busy for the daemon's life (umount: EBUSY), as a tmpfs at
 * /run/user/UID whose user logged out (shown on a tmpfs treated as a
 * filesystem whose file ids must be opened to be told, as xfs's); it
 * marks a directory while a node holds it, and no longer, as the kernel's
 * own list of the marks shows; and on a tmpfs it reads the inode number
 * from another process's event's file id itself, keeping no descriptor
 * there.  Needs root (fanotify, a tmpfs). */
#include "fs/fs-private.h"
#include "tests/lib/test-host.h"
#include "tests/lib/test-util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>

/* The tmpfs a test mounted, for its teardown: a test that fails midway
 * leaves nothing mounted. */
static char *test_tmpfs;

static int
tmpfs_teardown (void **state)
{
  (void)state;
  watch_test_ids_unread (false);
  if (test_tmpfs != NULL)
    {
      umount2 (test_tmpfs, MNT_DETACH);
      rmdir (test_tmpfs);
      g_clear_pointer (&test_tmpfs, g_free);
    }
  return 0;
}

/* As root, with the watcher started: a new tmpfs at a temporary directory
 * (returned; NAME its prefix) and a directory "sub" on it (*RET_SUB);
 * skips the test where that can't be had.  The test's teardown must be
 * tmpfs_teardown. */
static char *
tmpfs_with_sub (const char *name, char **ret_sub)
{
  char *dir;

  if (geteuid () != 0)
    test_skip_test (false, "fanotify and a tmpfs need root");
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  if (!fb_watch_start ())
    test_skip_test (false, "fanotify does not start here");
  dir = test_tmpdir (name);
  *ret_sub = g_build_filename (dir, "sub", NULL);
  assert_int_equal (mount ("fusebox-test", dir, "tmpfs", 0, NULL), 0);
  test_tmpfs = g_strdup (dir);
  assert_int_equal (mkdir (*ret_sub, 0755), 0);
  return dir;
}

static void
test_filesystem_let_go (void **state)
{
  g_autofree char *dir = NULL, *sub = NULL;
  struct stat st;
  int fd;

  (void)state;
  dir = tmpfs_with_sub ("fusebox-watch", &sub);
  /* the tmpfs is treated as a filesystem whose ids must be opened */
  watch_test_ids_unread (true);

  fd = open (sub, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true (fd >= 0);
  assert_int_equal (fstat (fd, &st), 0);
  assert_true (watch_dir_add (st.st_dev, st.st_ino, fd));
  close (fd);
  /* marked: the watcher keeps a directory of the tmpfs open, to tell
   * its events' objects (the check can fail) */
  if (umount2 (dir, 0) == 0)
    fail_msg ("the tmpfs at %s came off while a directory on it was marked: the test shows nothing", dir);
  assert_int_equal (errno, EBUSY);

  fd = open (sub, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true (fd >= 0);
  watch_dir_remove (st.st_dev, st.st_ino, fd);
  close (fd);
  if (umount2 (dir, 0) < 0)
    {
      int e = errno;
      umount2 (dir, MNT_DETACH);
      fail_msg ("no directory on the tmpfs at %s is marked, and it can't be taken off: %s", dir, g_strerror (e));
    }
  assert_int_equal (rmdir (dir), 0);
  watch_test_ids_unread (false);
  fb_watch_stop ();
}

typedef struct
{
  GMutex lock;
  GArray *changes; /* FbViewChange, names dropped */
} Seen;

static void
on_change (FbView *listener_view, FbView *origin, FbViewNode *origin_node, const FbViewChange *change,
           gpointer user_data)
{
  Seen *seen = user_data;
  FbViewChange c = *change;

  c.name = NULL;
  g_mutex_lock (&seen->lock);
  g_array_append_val (seen->changes, c);
  g_mutex_unlock (&seen->lock);
}

static bool
seen_object (Seen *seen, const struct stat *st)
{
  bool found = false;

  g_mutex_lock (&seen->lock);
  for (guint i = 0; i < seen->changes->len && !found; i++)
    {
      const FbViewChange *c = &g_array_index (seen->changes, FbViewChange, i);
      found = c->dev == st->st_dev && c->ino == st->st_ino;
    }
  g_mutex_unlock (&seen->lock);
  return found;
}

/* Descriptors of this process on device DEV. */
static guint
fds_on (dev_t dev)
{
  g_autoptr (GDir) fds = g_dir_open ("/proc/self/fd", 0, NULL);
  const char *name;
  guint n = 0;

  assert_non_null (fds);
  while ((name = g_dir_read_name (fds)) != NULL)
    {
      struct stat st;
      if (fstat (atoi (name), &st) == 0 && st.st_dev == dev)
        n++;
    }
  return n;
}

/* A file another process writes in a marked tmpfs directory is reported
 * with its own inode number, read from its file id (tmpfs's hold it): no
 * descriptor on the tmpfs is kept to open ids by, which is also what an
 * unprivileged daemon (no open_by_handle_at) needs to cover its files. */
static void
test_tmpfs_ids_read (void **state)
{
  g_autofree char *dir = NULL, *sub = NULL, *file = NULL;
  Seen seen = { 0 };
  int token = 0;
  struct stat st, fst;
  pid_t child;
  int fd, status;

  (void)state;
  dir = tmpfs_with_sub ("fusebox-watch-ids", &sub);
  file = g_build_filename (sub, "f", NULL);
  g_mutex_init (&seen.lock);
  seen.changes = g_array_new (FALSE, FALSE, sizeof (FbViewChange));
  fb_view_listen ((FbView *)&token, on_change, &seen);

  fd = open (sub, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true (fd >= 0);
  assert_int_equal (fstat (fd, &st), 0);
  assert_true (watch_dir_add (st.st_dev, st.st_ino, fd));
  assert_true (watch_children_decode (st.st_dev));
  close (fd);
  assert_int_equal (fds_on (st.st_dev), 0);

  /* another process: the watcher skips its own */
  child = fork ();
  assert_true (child >= 0);
  if (child == 0)
    {
      int wfd = open (file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      _exit (wfd >= 0 && write (wfd, "x", 1) == 1 && close (wfd) == 0 ? 0 : 1);
    }
  assert_int_equal (waitpid (child, &status, 0), child);
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  assert_int_equal (stat (file, &fst), 0);
  if (!TEST_WAIT_FOR (seen_object (&seen, &fst), 1000))
    fail_msg ("the write to %s (inode %llu) was not reported with its inode within 1 s", file,
              (unsigned long long)fst.st_ino);
  assert_int_equal (fds_on (st.st_dev), 0);

  fb_view_unlisten ((FbView *)&token, on_change, &seen);
  fd = open (sub, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true (fd >= 0);
  watch_dir_remove (st.st_dev, st.st_ino, fd);
  close (fd);
  assert_int_equal (umount2 (dir, 0), 0);
  assert_int_equal (rmdir (dir), 0);
  g_array_unref (seen.changes);
  g_mutex_clear (&seen.lock);
}

/* The inode numbers of the directories the watcher's fanotify group marks,
 * from the kernel's list of them (/proc/self/fdinfo). */
static GHashTable *
marked_inodes (void)
{
  GHashTable *inos = g_hash_table_new (g_int64_hash, g_int64_equal);
  g_autoptr (GDir) fds = g_dir_open ("/proc/self/fd", 0, NULL);
  const char *name;
  bool found = false;

  assert_non_null (fds);
  while ((name = g_dir_read_name (fds)) != NULL)
    {
      g_autofree char *link = g_strdup_printf ("/proc/self/fd/%s", name);
      g_autofree char *target = g_file_read_link (link, NULL);
      g_autofree char *info_path = g_strdup_printf ("/proc/self/fdinfo/%s", name);
      g_autofree char *info = NULL;
      g_auto (GStrv) lines = NULL;

      if (target == NULL || strcmp (target, "anon_inode:[fanotify]") != 0 ||
          !g_file_get_contents (info_path, &info, NULL, NULL))
        continue;
      found = true;
      lines = g_strsplit (info, "\n", -1);
      for (guint i = 0; lines[i] != NULL; i++)
        {
          const char *p = strstr (lines[i], "fanotify ino:");
          if (p != NULL)
            {
              gint64 *ino = g_new (gint64, 1);
              *ino = (gint64)g_ascii_strtoull (p + strlen ("fanotify ino:"), NULL, 16);
              g_hash_table_add (inos, ino);
            }
        }
    }
  if (!found)
    fail_msg ("the watcher's fanotify group is not among this process's descriptors");
  return inos;
}

/* The marks of DIRS (N of them) that MARKED says, one byte each. */
static void
assert_marked (const struct stat *sts, const bool *want, guint n, const char *when)
{
  g_autoptr (GHashTable) inos = marked_inodes ();
  guint wanted = 0;

  for (guint i = 0; i < n; i++)
    {
      gint64 ino = (gint64)sts[i].st_ino;
      bool is = g_hash_table_contains (inos, &ino);
      if (is != want[i])
        fail_msg ("%s: directory %u (inode %lld) is %smarked", when, i, (long long)ino, is ? "" : "not ");
      wanted += want[i];
    }
  if (g_hash_table_size (inos) != wanted)
    fail_msg ("%s: %u marks, %u wanted", when, g_hash_table_size (inos), wanted);
}

static void
shuffle (guint *order, guint n, GRand *rand)
{
  for (guint i = 0; i < n; i++)
    order[i] = i;
  for (guint i = n - 1; i > 0; i--)
    {
      guint j = g_rand_int_range (rand, 0, (gint32)i + 1), t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
}

/* The watcher started, or the test skipped, saying what is missing. */
static void
require_watcher (void)
{
  if (geteuid () != 0)
    test_skip_test (false, "fanotify needs root");
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  if (!fb_watch_start ())
    test_skip_test (false, "fanotify does not start here");
}

/* A record outlives its directory while a node holds it, the kernel's
 * mark does not, and the filesystem may give the directory's number to a
 * new one: a directory added under a number already marked is marked
 * itself (played here by giving A's number with B's descriptor). */
static void
test_reused_number_marked (void **state)
{
  g_autofree char *dir = NULL;
  g_autofree char *a = NULL, *b = NULL;
  struct stat sa, sb;
  int fa, fb;

  (void)state;
  require_watcher ();
  dir = test_tmpdir ("fusebox-watch-reuse");
  a = g_build_filename (dir, "a", NULL);
  b = g_build_filename (dir, "b", NULL);
  assert_int_equal (mkdir (a, 0755), 0);
  assert_int_equal (mkdir (b, 0755), 0);
  fa = open (a, O_PATH | O_DIRECTORY | O_CLOEXEC);
  fb = open (b, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true (fa >= 0 && fb >= 0);
  assert_int_equal (fstat (fa, &sa), 0);
  assert_int_equal (fstat (fb, &sb), 0);
  assert_true (watch_dir_add (sa.st_dev, sa.st_ino, fa));
  assert_true (watch_dir_add (sa.st_dev, sa.st_ino, fb));
  {
    g_autoptr (GHashTable) inos = marked_inodes ();
    gint64 ino = (gint64)sb.st_ino;
    if (!g_hash_table_contains (inos, &ino))
      fail_msg ("a directory added under a number already marked has no mark of its own");
  }
  watch_dir_remove (sa.st_dev, sa.st_ino, fb);
  watch_dir_remove (sa.st_dev, sa.st_ino, fa);
  close (fa);
  close (fb);
  /* the removal frees what the kernel still marks there */
  assert_int_equal (rmdir (a), 0);
  assert_int_equal (rmdir (b), 0);
  assert_int_equal (rmdir (dir), 0);
}

/* Thousands of directories marked, each by two holders, then let go in
 * random orders: a directory is marked as long as one holder is left, and
 * the kernel's list of the marks is always exactly what is held (on ext4,
 * where the watcher keeps such directories in a table of its own, by
 * inode). */
static void
test_marks_follow_holders (void **state)
{
#define N 3000
  g_autofree char *dir = NULL;
  g_autoptr (GRand) rand = g_rand_new_with_seed (20261204);
  struct stat *sts = g_new0 (struct stat, N);
  bool *want = g_new0 (bool, N);
  guint *order = g_new0 (guint, N);
  int *fds = g_new0 (int, N);
  struct statfs sfs;

  (void)state;
  require_watcher ();
  dir = test_tmpdir ("fusebox-watch-many");
  assert_int_equal (statfs (dir, &sfs), 0);
  if (sfs.f_type != 0xEF53)
    test_skip_test (false, "the temporary directory is not on ext4, whose file ids the watcher decodes");
  for (guint i = 0; i < N; i++)
    {
      g_autofree char *sub = g_strdup_printf ("%s/d%04u", dir, i);
      assert_int_equal (mkdir (sub, 0755), 0);
      fds[i] = open (sub, O_PATH | O_DIRECTORY | O_CLOEXEC);
      assert_true (fds[i] >= 0);
      assert_int_equal (fstat (fds[i], &sts[i]), 0);
      assert_true (watch_dir_add (sts[i].st_dev, sts[i].st_ino, fds[i]));
      assert_true (watch_dir_add (sts[i].st_dev, sts[i].st_ino, fds[i]));
      want[i] = true;
    }
  assert_marked (sts, want, N, "each held twice");

  shuffle (order, N, rand);
  for (guint i = 0; i < N; i++)
    watch_dir_remove (sts[order[i]].st_dev, sts[order[i]].st_ino, fds[order[i]]);
  assert_marked (sts, want, N, "each held once");

  shuffle (order, N, rand);
  for (guint i = 0; i < N / 2; i++)
    {
      watch_dir_remove (sts[order[i]].st_dev, sts[order[i]].st_ino, fds[order[i]]);
      want[order[i]] = false;
    }
  assert_marked (sts, want, N, "half let go");

  /* a quarter of those held again, then all let go */
  for (guint i = 0; i < N / 4; i++)
    {
      assert_true (watch_dir_add (sts[order[i]].st_dev, sts[order[i]].st_ino, fds[order[i]]));
      want[order[i]] = true;
    }
  assert_marked (sts, want, N, "a quarter held again");
  shuffle (order, N, rand);
  for (guint i = 0; i < N; i++)
    if (want[order[i]])
      {
        watch_dir_remove (sts[order[i]].st_dev, sts[order[i]].st_ino, fds[order[i]]);
        want[order[i]] = false;
      }
  assert_marked (sts, want, N, "all let go");

  for (guint i = 0; i < N; i++)
    {
      g_autofree char *sub = g_strdup_printf ("%s/d%04u", dir, i);
      close (fds[i]);
      rmdir (sub);
    }
  assert_int_equal (rmdir (dir), 0);
  g_free (fds);
  g_free (order);
  g_free (want);
  g_free (sts);
  /* (the watcher stays: it starts once a process, and the next test
   * stops it) */
#undef N
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_marks_follow_holders),
                  cmocka_unit_test (test_reused_number_marked),
                  cmocka_unit_test_teardown (test_tmpfs_ids_read, tmpfs_teardown),
                  cmocka_unit_test_teardown (test_filesystem_let_go, tmpfs_teardown))
