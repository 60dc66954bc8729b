/* fusebox — what a host mount's filesystem asks of a stat, from the mount
 * table as it is now (fs/fs-view-host.c): another user's FUSE filesystem,
 * or another fusebox view, is never served; root's and the daemon's own
 * user's are asked; a mount that is gone is not asked (not "asked to be
 * sure"); and a mount id and device that the kernel gives again to the
 * next mount are never taken for the mount they were.  Each test runs
 * twice: by statmount and the mounts' unique ids (Linux 6.8 on; where the
 * kernel tells a FUSE mount's options and subtype, 6.13, mountinfo is not
 * read at all, whatever the host's mounts do), and by mountinfo alone, as
 * on older kernels.
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
#include <sys/utsname.h>

/* The mount at PATH, from what the kernel holds (nothing is asked). */
static struct statx
mount_at (const char *path)
{
  struct statx stx;

  assert_int_equal (statx (AT_FDCWD, path, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, host_statx_mount_mask (), &stx), 0);
  assert_true (stx.stx_mask & (STATX_MNT_ID | 0x4000U));
  return stx;
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

/* The test's mount point: whatever a failed test left mounted there is
 * taken off by the teardown (the connections ended with their
 * descriptors, at the program's end at the latest). */
static char *dir;
static bool by_statmount = true, by_table = false;

static int
setup (void **state)
{
  if (geteuid () != 0 || test_host_lacks ("fuse") != NULL)
    return 0;
  dir = test_tmpdir ("fusebox-host");
  host_fs_use_statmount (*(bool *)*state);
  return 0;
}

static int
teardown (void **state)
{
  (void)state;
  host_fs_use_statmount (true);
  if (dir == NULL)
    return 0;
  while (umount2 (dir, MNT_DETACH) == 0)
    ;
  rmdir (dir);
  g_clear_pointer (&dir, g_free);
  return 0;
}

/* Does this kernel tell all a view needs by statmount (6.13 on)? */
static bool
statmount_complete (void)
{
  struct utsname u;
  guint major = 0, minor = 0;

  return uname (&u) == 0 && sscanf (u.release, "%u.%u", &major, &minor) == 2 &&
         (major > 6 || (major == 6 && minor >= 13));
}

static void
test_kinds (void **state)
{
  bool statmount = *(bool *)*state;
  guint reads = host_fs_table_reads ();
  struct statx tmpfs, fuse, other;
  int fd;

  if (dir == NULL)
    test_skip_test (false, "mounting a tmpfs and FUSE connections needs root and /dev/fuse");

  /* a tmpfs answers from memory: one stat */
  assert_int_equal (mount ("fusebox-test", dir, "tmpfs", 0, NULL), 0);
  tmpfs = mount_at (dir);
  assert_int_equal (host_fs_of_statx (&tmpfs), HOST_FS_LOCAL);
  assert_int_equal (umount2 (dir, 0), 0);

  /* another user's FUSE filesystem where it was: never served, though
   * the kernel gives it the tmpfs's device number and, in mountinfo, its
   * id (the lowest free ones) */
  fd = fuse_at (dir, "fuse", 1000);
  fuse = mount_at (dir);
  print_message ("%s: the tmpfs was mount %llu (%u:%u), the FUSE filesystem after it %llu (%u:%u)\n",
                 statmount ? "statmount" : "mountinfo", (unsigned long long)tmpfs.stx_mnt_id, tmpfs.stx_dev_major,
                 tmpfs.stx_dev_minor, (unsigned long long)fuse.stx_mnt_id, fuse.stx_dev_major, fuse.stx_dev_minor);
  assert_int_equal (host_fs_of_statx (&fuse), HOST_FS_UNSERVED);
  /* the tmpfs's own stat: its own unique id still names the tmpfs; its
   * mountinfo id, a mount that is gone, or the FUSE filesystem now */
  if (tmpfs.stx_mnt_id != fuse.stx_mnt_id)
    assert_int_equal (host_fs_of_statx (&tmpfs), statmount ? HOST_FS_LOCAL : -EIO);
  else
    assert_int_equal (host_fs_of_statx (&tmpfs), HOST_FS_UNSERVED);
  fuse_off (dir, fd);
  /* gone: not asked (known as not served, or not a kind at all) */
  assert_int_equal (host_fs_of_statx (&fuse), statmount ? HOST_FS_UNSERVED : -EIO);
  fd = fuse_at (dir, "fuse", 1000);
  other = mount_at (dir);
  fuse_off (dir, fd);
  assert_int_equal (host_fs_of_statx (&other), -EIO);

  /* root's: asked (the daemon's user here is root too), whatever its
   * subtype but fusebox */
  fd = fuse_at (dir, "fuse", 0);
  other = mount_at (dir);
  assert_int_equal (host_fs_of_statx (&other), HOST_FS_ASKS);
  fuse_off (dir, fd);
  fd = fuse_at (dir, "fuse.sshfs", 0);
  other = mount_at (dir);
  assert_int_equal (host_fs_of_statx (&other), HOST_FS_ASKS);
  fuse_off (dir, fd);

  /* another fusebox view, even root's: never served */
  fd = fuse_at (dir, "fuse.fusebox", 0);
  other = mount_at (dir);
  assert_int_equal (host_fs_of_statx (&other), HOST_FS_UNSERVED);
  fuse_off (dir, fd);

  /* by statmount, the table was not read */
  if (statmount && statmount_complete ())
    assert_int_equal (host_fs_table_reads (), reads);
  else if (!statmount)
    assert_true (host_fs_table_reads () > reads);

  /* a kernel without mount ids: by device (this process's /proc) */
  other = mount_at ("/proc/self");
  assert_int_equal (host_fs_of_mount (0, false, makedev (other.stx_dev_major, other.stx_dev_minor)), HOST_FS_LOCAL);
}

/* Mounts and unmounts at one place between two questions, as many as a
 * busy host makes: each answer is the table's as it is then. */
static void
test_table_followed (void **state)
{
  (void)state;
  if (dir == NULL)
    test_skip_test (false, "mounting a tmpfs and FUSE connections needs root and /dev/fuse");
  for (int i = 0; i < 50; i++)
    {
      bool foreign = i % 2 == 1;
      int fd = foreign ? fuse_at (dir, "fuse", 1000) : -1;
      struct statx stx;

      if (!foreign)
        assert_int_equal (mount ("fusebox-test", dir, "tmpfs", 0, NULL), 0);
      stx = mount_at (dir);
      assert_int_equal (host_fs_of_statx (&stx), foreign ? HOST_FS_UNSERVED : HOST_FS_LOCAL);
      if (foreign)
        fuse_off (dir, fd);
      else
        assert_int_equal (umount2 (dir, 0), 0);
    }
}

#define BOTH(f)                                                                                                        \
  cmocka_unit_test_prestate_setup_teardown (f, setup, teardown, &by_statmount),                                        \
    cmocka_unit_test_prestate_setup_teardown (f, setup, teardown, &by_table)

TEST_DEFINE_MAIN (NULL, NULL, BOTH (test_kinds), BOTH (test_table_followed))
