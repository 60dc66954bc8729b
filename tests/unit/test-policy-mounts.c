/* fusebox — whose FUSE filesystem a device is, from mountinfo alone
 * (fb_dev_untrusted_fuse), and the walk that refuses a path on another
 * user's (fb_path_check_not_foreign_fuse): real mounts, a FUSE
 * filesystem whose server never answers (nobody reads its connection).
 *
 * Needs root and /dev/fuse (skipped without). */
#include "policy/util.h"
#include "tests/lib/test-util.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cmocka.h>

/* The device at PATH, from what the kernel holds (a stat that asks a
 * silent mount would wait). */
static dev_t
dev_at (const char *path)
{
  struct statx stx;

  assert_int_equal (statx (AT_FDCWD, path, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_TYPE, &stx), 0);
  return makedev (stx.stx_dev_major, stx.stx_dev_minor);
}

/* A FUSE filesystem of USER_ID at PATH that nobody answers: its fd. */
static int
silent_mount (const char *path, unsigned user_id)
{
  g_autofree char *opts = NULL;
  int fd = open ("/dev/fuse", O_RDWR | O_CLOEXEC);

  assert_true (fd >= 0);
  opts = g_strdup_printf ("fd=%d,rootmode=40000,user_id=%u,group_id=%u,allow_other", fd, user_id, user_id);
  if (mount ("silent", path, "fuse", MS_NOSUID | MS_NODEV, opts) < 0)
    fail_msg ("mount a FUSE filesystem at %s: %s", path, g_strerror (errno));
  return fd;
}

static void
silent_take_off (const char *path, int fd)
{
  assert_int_equal (umount2 (path, MNT_DETACH), 0);
  close (fd);
}

/* A tmpfs taken off and another user's FUSE filesystem mounted at the same
 * place, which the kernel most often gives the tmpfs's freed device
 * number: the table read for the tmpfs is read again (the mount table
 * changed), and the device is said to be uid 1000's.  Root's FUSE
 * filesystems and the caller's are not another user's. */
static void
test_device_owners (void **state)
{
  g_autofree char *dir = NULL, *at = NULL, *below = NULL, *link = NULL, *through = NULL;
  g_autoptr (GError) error = NULL;
  dev_t tmpfs_dev, fuse_dev;
  int fd;

  (void)state;
  if (geteuid () != 0 || test_host_lacks ("fuse") != NULL)
    test_skip_test (false, "mounting another user's FUSE filesystem needs root and /dev/fuse");
  dir = test_tmpdir ("fusebox-mounts");
  at = g_build_filename (dir, "at", NULL);
  below = g_build_filename (at, "below", NULL);
  link = g_build_filename (dir, "link", NULL);
  through = g_build_filename (link, "x", NULL);
  assert_int_equal (mkdir (at, 0755), 0);
  assert_int_equal (symlink ("at/below", link), 0);

  assert_int_equal (mount ("tmpfs", at, "tmpfs", 0, "size=1m"), 0);
  tmpfs_dev = dev_at (at);
  assert_int_equal (fb_dev_untrusted_fuse (tmpfs_dev), -1);
  assert_true (fb_path_check_not_foreign_fuse (at, "the test path", "no fix", &error));
  assert_int_equal (umount2 (at, MNT_DETACH), 0);

  fd = silent_mount (at, 1000);
  fuse_dev = dev_at (at);
  print_message ("tmpfs %u:%u, then uid 1000's FUSE filesystem %u:%u at the same place%s\n", major (tmpfs_dev),
                 minor (tmpfs_dev), major (fuse_dev), minor (fuse_dev),
                 fuse_dev == tmpfs_dev ? " (the same device number)" : "");
  if (fb_dev_untrusted_fuse (fuse_dev) != 1000)
    {
      silent_take_off (at, fd);
      fail_msg ("uid 1000's FUSE filesystem at %u:%u was not taken for another user's", major (fuse_dev),
                minor (fuse_dev));
    }
  /* a path below it, and through a link that leads below it: refused
   * without asking it (this would wait for good otherwise) */
  assert_false (fb_path_check_not_foreign_fuse (below, "the test path", "no fix", &error));
  assert_non_null (strstr (error->message, at));
  assert_non_null (strstr (error->message, "uid 1000"));
  g_clear_error (&error);
  assert_false (fb_path_check_not_foreign_fuse (through, "the test path", "no fix", &error));
  assert_non_null (strstr (error->message, at));
  g_clear_error (&error);
  silent_take_off (at, fd);

  /* root's own, and one whose owner is the caller (root here too) */
  fd = silent_mount (at, 0);
  assert_int_equal (fb_dev_untrusted_fuse (dev_at (at)), -1);
  assert_true (fb_path_check_not_foreign_fuse (at, "the test path", "no fix", &error));
  silent_take_off (at, fd);

  unlink (link);
  assert_int_equal (rmdir (at), 0);
  assert_int_equal (rmdir (dir), 0);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_device_owners))
