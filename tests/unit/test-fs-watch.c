/* fusebox — the host watcher (fs/fs-watch.c) lets go of a filesystem once
 * no directory on it is marked: a descriptor it kept there would hold the
 * filesystem busy for the daemon's life (umount: EBUSY), as a tmpfs at
 * /run/user/UID whose user logged out.  Needs root (fanotify, a tmpfs). */
#include "fs/fs-private.h"
#include "tests/lib/test-host.h"
#include "tests/lib/test-util.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

static void
test_filesystem_let_go (void **state)
{
  g_autofree char *dir = NULL, *sub = NULL;
  struct stat st;
  int fd;

  (void)state;
  if (geteuid () != 0)
    test_skip_test (false, "fanotify and a tmpfs need root");
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  if (!fb_watch_start ())
    test_skip_test (false, "fanotify does not start here");
  dir = test_tmpdir ("fusebox-watch");
  sub = g_build_filename (dir, "sub", NULL);
  assert_int_equal (mount ("fusebox-test", dir, "tmpfs", 0, NULL), 0);
  assert_int_equal (mkdir (sub, 0755), 0);

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
  fb_watch_stop ();
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_filesystem_let_go))
