/* Adversarial tests: set-id bits and file capabilities never survive a
 * write through the view.
 *
 * A root-owned file with mode 06755 and a security.capability attribute
 * (set on the host with a raw setxattr, as setcap does), first proven to
 * have both on the host, is changed through `fusebox mount` by every route
 * the kernel may take to the daemon:
 *  - write(2) on a read-write handle (the page cache, buffered),
 *  - write(2) on a write-only handle (served with direct I/O),
 *  - write(2) on an O_DIRECT handle,
 *  - an open with O_TRUNC (`printf x > suidbin` without the x),
 *  - a shared mmap, written and msync'ed (the kernel's writeback),
 *  - truncate(2) and ftruncate(2),
 *  - fallocate(2),
 *  - copy_file_range(2) into it;
 * afterwards the host's stat shows neither S_ISUID nor S_ISGID, the
 * attribute is gone, the contents did change, and the mount's own stat
 * agrees.  The caller is root, who holds CAP_FSETID: the kernel itself
 * would keep the bits for it, the view takes them off for every caller.
 * Also: as the kernel does, S_ISGID without group-exec (no privilege at
 * execve) stays; and an unprivileged caller's write clears them too.
 *
 * Before the view did this itself, the daemon (root) wrote with CAP_FSETID
 * and every route but the buffered write of an unprivileged caller kept
 * `-rwsr-sr-x root` on the host.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include <sys/mount.h>
#include <sys/xattr.h>

#include "tests/lib/test-mount.h"

#include <linux/capability.h>
#include <sys/mman.h>

static const char policy_text[] = "{ \"version\": 1,\n"
                                  "  \"rules\": [\n"
                                  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" },\n"
                                  "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"the workspace\" } ] }\n";

#define CONTENT "#!/bin/sh\necho original\n"

/* A file capability set (CAP_NET_BIND_SERVICE), as setcap writes it. */
static void
host_setcap (const char *path)
{
  struct vfs_cap_data cap = { 0 };

  cap.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE;
  cap.data[0].permitted = 1u << CAP_NET_BIND_SERVICE;
  if (setxattr (path, "security.capability", &cap, XATTR_CAPS_SZ_2, 0) < 0)
    fail_msg ("setting security.capability on the host's %s: %s", path, g_strerror (errno));
}

static bool
host_has_caps (const char *path)
{
  return getxattr (path, "security.capability", NULL, 0) >= 0;
}

/* Make ws/NAME on the host: root's, CONTENT, MODE, with a capability; and
 * prove it. */
static void
make_privileged (MFx *fx, const char *name, mode_t mode)
{
  g_autofree char *rel = g_strconcat ("/ws/", name, NULL);
  g_autofree char *h = mfx_h (fx, rel);
  struct stat st;

  mfx_write (fx, rel, CONTENT);
  assert_int_equal (chown (h, 0, 0), 0);
  assert_int_equal (chmod (h, mode), 0);
  host_setcap (h);
  assert_int_equal (lstat (h, &st), 0);
  if ((st.st_mode & 07777) != mode || st.st_uid != 0)
    fail_msg ("the stand-in %s is %o uid %u on the host, not %o root", h, st.st_mode & 07777, st.st_uid, mode);
  if (!host_has_caps (h))
    fail_msg ("the stand-in %s has no security.capability on the host", h);
}

/* After a route: what the host (and the mount) show of ws/NAME; what is
 * wrong is added to BAD, so that one run names every failing route. */
static void
check_unprivileged (MFx *fx, GString *bad, const char *route, const char *name, const char *content)
{
  g_autofree char *rel = g_strconcat ("/ws/", name, NULL);
  g_autofree char *h = mfx_h (fx, rel);
  g_autofree char *m = mfx_m (fx, rel);
  g_autofree char *data = NULL;
  gsize len = 0;
  struct stat st;

  assert_int_equal (lstat (h, &st), 0);
  if (st.st_mode & (S_ISUID | S_ISGID))
    g_string_append_printf (bad, "\n  %s: the host's %s is still %o", route, h, st.st_mode & 07777);
  else if ((st.st_mode & 0777) != 0755)
    g_string_append_printf (bad, "\n  %s: the host's %s lost more than its set-id bits: %o", route, h,
                            st.st_mode & 07777);
  if (host_has_caps (h))
    g_string_append_printf (bad, "\n  %s: the host's %s still has its security.capability", route, h);
  assert_true (g_file_get_contents (h, &data, &len, NULL));
  if (content != NULL && (len != strlen (content) || memcmp (data, content, len) != 0))
    g_string_append_printf (bad, "\n  %s: the host's %s holds %zu bytes, not what was written", route, h, (size_t)len);
  assert_int_equal (stat (m, &st), 0);
  if (st.st_mode & (S_ISUID | S_ISGID))
    g_string_append_printf (bad, "\n  %s: the mount still shows %s as %o", route, m, st.st_mode & 07777);
}

/* A step of a route that must succeed: a failure is added to BAD. */
#define STEP(bad, route, expr, want)                                                                                   \
  ({                                                                                                                   \
    errno = 0;                                                                                                         \
    long got_ = (long)(expr);                                                                                          \
    if (got_ != (long)(want))                                                                                          \
      g_string_append_printf ((bad), "\n  %s: %s gave %ld (%s), not %ld", (route), #expr, got_,                        \
                              got_ < 0 ? g_strerror (errno) : "short", (long)(want));                                  \
    got_ == (long)(want);                                                                                              \
  })

static int
open_m (MFx *fx, const char *name, int flags)
{
  g_autofree char *rel = g_strconcat ("/ws/", name, NULL);
  g_autofree char *m = mfx_m (fx, rel);
  int fd = open (m, flags | O_CLOEXEC);

  if (fd < 0)
    fail_msg ("open %s (flags %o) through the mount: %s", m, flags, g_strerror (errno));
  return fd;
}

MFX_CASE (test_every_route)
{
  static const char *const routes[] = { "write-rdwr", "write-wronly", "write-odirect", "open-trunc", "mmap",
                                        "truncate",   "ftruncate",    "fallocate",     "copy" };
  g_autoptr (GString) bad = g_string_new (NULL);
  bool odirect = true;

  mfx_write (fx, "/ws/source", "copied in\n");
  for (guint i = 0; i < G_N_ELEMENTS (routes); i++)
    make_privileged (fx, routes[i], 06755);
  {
    /* O_DIRECT is the host filesystem's to support (tmpfs before 6.6 not) */
    g_autofree char *h = mfx_h (fx, "/ws/write-odirect");
    int fd = open (h, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0 && errno == EINVAL)
      {
        odirect = false;
        fprintf (stderr, "note: the host's %s takes no O_DIRECT: that route is not tried\n", fx->host);
      }
    if (fd >= 0)
      close (fd);
  }
  mfx_mount (fx, policy_text, NULL);

  {
    int fd = open_m (fx, "write-rdwr", O_RDWR);
    STEP (bad, "write(2), O_RDWR", pwrite (fd, "echo x\n", 7, 0), 7);
    close (fd);
    check_unprivileged (fx, bad, "write(2), O_RDWR", "write-rdwr", "echo x\nsh\necho original\n");
  }
  {
    int fd = open_m (fx, "write-wronly", O_WRONLY | O_APPEND);
    STEP (bad, "write(2), O_WRONLY", write (fd, "echo y\n", 7), 7);
    close (fd);
    check_unprivileged (fx, bad, "write(2), O_WRONLY (direct I/O)", "write-wronly", CONTENT "echo y\n");
  }
  if (odirect)
    {
      int fd = open_m (fx, "write-odirect", O_RDWR | O_DIRECT);
      void *buf = NULL;
      assert_int_equal (posix_memalign (&buf, 4096, 4096), 0);
      memset (buf, '#', 4096);
      STEP (bad, "write(2), O_DIRECT", pwrite (fd, buf, 4096, 0), 4096);
      STEP (bad, "read(2), O_DIRECT", pread (fd, buf, 4096, 0), 4096);
      free (buf);
      close (fd);
      check_unprivileged (fx, bad, "write(2), O_DIRECT", "write-odirect", NULL);
    }
  {
    int fd = open_m (fx, "open-trunc", O_WRONLY | O_TRUNC);
    close (fd);
    check_unprivileged (fx, bad, "open(O_TRUNC)", "open-trunc", "");
  }
  {
    int fd = open_m (fx, "mmap", O_RDWR);
    char *p = mmap (NULL, strlen (CONTENT), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      fail_msg ("a shared mmap through the mount: %s", g_strerror (errno));
    memcpy (p, "#!", 2);
    p[2] = 'X';
    STEP (bad, "shared mmap + msync", msync (p, strlen (CONTENT), MS_SYNC), 0);
    munmap (p, strlen (CONTENT));
    close (fd);
    check_unprivileged (fx, bad, "shared mmap + msync", "mmap", "#!Xbin/sh\necho original\n");
  }
  {
    g_autofree char *m = mfx_m (fx, "/ws/truncate");
    STEP (bad, "truncate(2)", truncate (m, 3), 0);
    check_unprivileged (fx, bad, "truncate(2)", "truncate", "#!/");
  }
  {
    int fd = open_m (fx, "ftruncate", O_RDWR);
    STEP (bad, "ftruncate(2)", ftruncate (fd, 4), 0);
    close (fd);
    check_unprivileged (fx, bad, "ftruncate(2)", "ftruncate", "#!/b");
  }
  {
    int fd = open_m (fx, "fallocate", O_RDWR);
    int r = fallocate (fd, 0, 0, 8192);
    int err = errno;
    struct stat st;
    if (r < 0 && err == EOPNOTSUPP)
      fprintf (stderr, "note: the host's filesystem takes no fallocate: that route is not tried\n");
    else
      {
        if (r < 0)
          g_string_append_printf (bad, "\n  fallocate(2): %s", g_strerror (err));
        else if (fstat (fd, &st) == 0 && st.st_size != 8192)
          g_string_append_printf (bad, "\n  fallocate(2): the file is %lld bytes, not 8192", (long long)st.st_size);
        check_unprivileged (fx, bad, "fallocate(2)", "fallocate", NULL);
      }
    close (fd);
  }
  {
    int in = open_m (fx, "source", O_RDONLY);
    int out = open_m (fx, "copy", O_WRONLY);
    loff_t oi = 0, oo = 0;
    STEP (bad, "copy_file_range(2)", copy_file_range (in, &oi, out, &oo, 10, 0), 10);
    close (in);
    close (out);
    check_unprivileged (fx, bad, "copy_file_range(2)", "copy", "copied in\necho original\n");
  }
  if (bad->len > 0)
    {
      fprintf (stderr, "privileges that survived a write through the view:%s\n", bad->str);
      fail_msg ("set-id bits or capabilities survived a write (the list is above)");
    }
}

/* As the kernel: S_ISGID without group-exec grants nothing at execve (it
 * was the mandatory-locking mark) and stays; with it, it goes. */
MFX_CASE (test_setgid_without_group_exec_stays)
{
  static const struct
  {
    const char *name;     /* in /ws */
    mode_t made, written; /* its mode as made, and after a write through the view */
  } files[] = {
    { "lockmark", 02644, 02644 },
    { "sgid", 02755, 0755 },
  };
  const char *h[G_N_ELEMENTS (files)];

  for (guint i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_autofree char *rel = g_strconcat ("/ws/", files[i].name, NULL);

      h[i] = mfx_on_host (fx, rel);
      mfx_write (fx, rel, "data\n");
      assert_int_equal (chmod (h[i], files[i].made), 0);
      assert_int_equal (test_mode_of (h[i]), files[i].made);
    }
  mfx_mount (fx, policy_text, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (files); i++)
    {
      int fd = open_m (fx, files[i].name, O_WRONLY | O_APPEND);
      assert_int_equal (write (fd, "more\n", 5), 5);
      close (fd);
    }
  for (guint i = 0; i < G_N_ELEMENTS (files); i++)
    if (test_mode_of (h[i]) != files[i].written)
      fail_msg ("%s is %04o after a write through the view, not %04o", h[i], test_mode_of (h[i]), files[i].written);
}

/* Not only root: an unprivileged caller's write-only (direct I/O) write,
 * which the kernel flags for the daemon and the daemon used to ignore. */
MFX_CASE (test_unprivileged_caller)
{
  const char *m = mfx_in_mount (fx, "/ws/shared");
  const char *h = mfx_on_host (fx, "/ws/shared");
  pid_t child;
  int status;
  struct stat st;

  make_privileged (fx, "shared", 06777);
  mfx_mount (fx, policy_text, NULL);
  child = fork ();
  if (child == 0)
    {
      int fd;
      if (setgid (65534) < 0 || setuid (65534) < 0)
        _exit (99);
      fd = open (m, O_WRONLY | O_APPEND | O_CLOEXEC);
      if (fd < 0 || write (fd, "echo nobody\n", 12) != 12)
        _exit (1);
      _exit (close (fd) == 0 ? 0 : 2);
    }
  assert_int_equal (waitpid (child, &status, 0), child);
  assert_true (WIFEXITED (status));
  if (WEXITSTATUS (status) != 0)
    fail_msg ("as uid 65534, writing %s failed (%d)", m, WEXITSTATUS (status));
  assert_int_equal (lstat (h, &st), 0);
  if (st.st_mode & (S_ISUID | S_ISGID))
    fail_msg ("written by uid 65534, the host's %s is still %o", h, st.st_mode & 07777);
  assert_int_equal (st.st_mode & 0777, 0777);
  assert_false (host_has_caps (h));
}

MFX_DEFINE_MAIN (MFX_TEST (test_every_route), MFX_TEST (test_setgid_without_group_exec_stays),
                 MFX_TEST (test_unprivileged_caller))
