/* fusebox — what a host mount's filesystem asks of a stat, from the mount
 * table as it is now (fs/fs-view-host.c): another user's FUSE filesystem,
 * or another fusebox view, is never served; root's and the daemon's own
 * user's are asked; a mount that is gone is not asked (not "asked to be
 * sure"); and a mount id and device that the kernel gives again to the
 * next mount are never taken for the mount they were.
 *
 * Mounts as root (a tmpfs, and FUSE connections nobody reads: nothing here
 * asks them anything); skipped without root or /dev/fuse. */
#include "fs/fs-private.h"
#include "tests/lib/test-host.h"
#include "tests/lib/test-util.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* The mount at PATH, from what the kernel holds (nothing is asked). */
static guint64
mount_at (const char *path, dev_t *ret_dev)
{
  struct statx stx;

  assert_int_equal (statx (AT_FDCWD, path, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_MNT_ID, &stx), 0);
  assert_true (stx.stx_mask & STATX_MNT_ID);
  *ret_dev = makedev (stx.stx_dev_major, stx.stx_dev_minor);
  return stx.stx_mnt_id;
}

/* A FUSE filesystem of type TYPE whose owner is OWNER at PATH: the
 * connection's descriptor, kept open until the test unmounts it. */
static int
fuse_at (const char *path, const char *type, guint owner)
{
  int fd = open ("/dev/fuse", O_RDWR | O_CLOEXEC);
  g_autofree char *opts = NULL;

  assert_true (fd >= 0);
  opts = g_strdup_printf ("fd=%d,rootmode=40000,user_id=%u,group_id=%u,allow_other", fd, owner, owner);
  if (mount ("fusebox-test", path, type, MS_NOSUID | MS_NODEV, opts) < 0)
    fail_msg ("mount %s at %s: %s", type, path, g_strerror (errno));
  return fd;
}

static void
fuse_off (const char *path, int fd)
{
  assert_int_equal (umount2 (path, MNT_DETACH), 0);
  close (fd);
}

static void
test_kinds (void **state)
{
  g_autofree char *dir = test_tmpdir ("fusebox-host");
  guint64 tmpfs_id, fuse_id, id;
  dev_t tmpfs_dev, fuse_dev, dev;
  int fd;

  (void)state;
  if (geteuid () != 0 || test_host_lacks ("fuse") != NULL)
    test_skip_test (false, "mounting a tmpfs and FUSE connections needs root and /dev/fuse");

  /* a tmpfs answers from memory: one stat */
  assert_int_equal (mount ("fusebox-test", dir, "tmpfs", 0, NULL), 0);
  tmpfs_id = mount_at (dir, &tmpfs_dev);
  assert_int_equal (host_fs_of_mount (tmpfs_id, tmpfs_dev), HOST_FS_LOCAL);
  assert_int_equal (umount2 (dir, 0), 0);

  /* another user's FUSE filesystem where it was: never served, whether
   * or not the kernel gave it the tmpfs's id and device (it gives the
   * lowest free one) */
  fd = fuse_at (dir, "fuse", 1000);
  fuse_id = mount_at (dir, &fuse_dev);
  print_message ("the tmpfs was mount %" G_GUINT64_FORMAT " (%u:%u), the FUSE filesystem after it %" G_GUINT64_FORMAT
                 " (%u:%u)\n",
                 tmpfs_id, major (tmpfs_dev), minor (tmpfs_dev), fuse_id, major (fuse_dev), minor (fuse_dev));
  assert_int_equal (host_fs_of_mount (fuse_id, fuse_dev), HOST_FS_UNSERVED);
  if (fuse_id != tmpfs_id)
    assert_int_equal (host_fs_of_mount (tmpfs_id, tmpfs_dev), -EIO);
  fuse_off (dir, fd);
  /* gone: not asked, and not a kind at all */
  assert_int_equal (host_fs_of_mount (fuse_id, fuse_dev), -EIO);

  /* root's: asked (the daemon's user here is root too) */
  fd = fuse_at (dir, "fuse", 0);
  id = mount_at (dir, &dev);
  assert_int_equal (host_fs_of_mount (id, dev), HOST_FS_ASKS);
  fuse_off (dir, fd);

  /* another fusebox view, even root's: never served */
  fd = fuse_at (dir, "fuse.fusebox", 0);
  id = mount_at (dir, &dev);
  assert_int_equal (host_fs_of_mount (id, dev), HOST_FS_UNSERVED);
  fuse_off (dir, fd);

  /* a kernel without mount ids: by device (this process's /proc) */
  id = mount_at ("/proc/self", &dev);
  assert_int_equal (host_fs_of_mount (0, dev), HOST_FS_LOCAL);
  assert_int_equal (rmdir (dir), 0);
}

/* Mounts and unmounts at one place between two questions, as many as a
 * busy host makes: each answer is the table's as it is then. */
static void
test_table_followed (void **state)
{
  g_autofree char *dir = test_tmpdir ("fusebox-host");

  (void)state;
  if (geteuid () != 0 || test_host_lacks ("fuse") != NULL)
    test_skip_test (false, "mounting a tmpfs and FUSE connections needs root and /dev/fuse");
  for (int i = 0; i < 50; i++)
    {
      bool foreign = i % 2 == 1;
      int fd = foreign ? fuse_at (dir, "fuse", 1000) : -1;
      guint64 id;
      dev_t dev;

      if (!foreign)
        assert_int_equal (mount ("fusebox-test", dir, "tmpfs", 0, NULL), 0);
      id = mount_at (dir, &dev);
      assert_int_equal (host_fs_of_mount (id, dev), foreign ? HOST_FS_UNSERVED : HOST_FS_LOCAL);
      if (foreign)
        fuse_off (dir, fd);
      else
        assert_int_equal (umount2 (dir, 0), 0);
    }
  assert_int_equal (rmdir (dir), 0);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_kinds), cmocka_unit_test (test_table_followed))
