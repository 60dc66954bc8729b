/* fusebox — escapes through `fusebox mount`, each against a stand-in that
 * first exists and is readable on the host:
 *  - a symlink (made in the view or planted on the host) to a hidden or
 *    denied file leads nowhere; ".." chains reach nothing hidden;
 *  - a hard link does not share a decision, and link needs a writable source;
 *  - a hidden name (existing or not, at any depth) is rejected by every
 *    operation that takes a name, and a directory holding a hidden
 *    subdirectory shows no sign of it in its stat (st_nlink);
 *  - renaming or removing an ancestor of a denied or protected path does not
 *    expose it;
 *  - a host FIFO does not hang the daemon; oversized names, paths, xattrs
 *    and I/O get an errno and the daemon stays up and bounded;
 *  - a root daemon does not read for a caller what the host would refuse
 *    (default_permissions), nor give away files, set-id bits or capabilities.
 */
#include <signal.h>
#include <sys/mount.h>
#include <sys/xattr.h>

#include "tests/lib/test-log.h"
#include "tests/lib/test-mount.h"

#include <dirent.h>
#include <linux/capability.h>
#include <sys/sysmacros.h>

static const char policy_text[] =
  "{ \"version\": 1,\n"
  "  \"protected_names\": { \".git\": \"hide\", \".agents\": \"hide\", \".codex\": \"hide\" },\n"
  "  \"rules\": [\n"
  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" },\n"
  "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"the workspace\" },\n"
  "  { \"path\": \"@H@/ws/proj/secret\", \"access\": \"deny\", \"why\": \"a secret inside the workspace\" },\n"
  "  { \"path\": \"@H@/hidden\", \"access\": \"hide\", \"why\": \"hidden stand-in\" },\n"
  "  { \"path\": \"@H@/denied\", \"access\": \"deny\", \"why\": \"denied stand-in\" },\n"
  "  { \"glob\": \"**/*.pem\", \"access\": \"deny\", \"why\": \"key material\" } ] }\n";

static void
make_tree (MFx *fx)
{
  mfx_write (fx, "/ws/file", "workspace file\n");
  mfx_write (fx, "/ws/proj/secret", "SECRET in ws\n");
  mfx_write (fx, "/ws/proj/plain", "plain\n");
  mfx_write (fx, "/ws/repo/.git/config", "[core]\n");
  mfx_write (fx, "/ws/repo/src.c", "int x;\n");
  mfx_write (fx, "/ws/sub/.git/HEAD", "ref: x\n");
  mfx_write (fx, "/ws/key.pem", "-----BEGIN KEY-----\n");
  mfx_write (fx, "/hidden/secret", "HIDDEN SECRET\n");
  mfx_write (fx, "/denied/secret", "DENIED SECRET\n");
  mfx_mkdir (fx, "/ro");
  mfx_write (fx, "/ro/readonly", "read only\n");
}

static void
mount_it (MFx *fx)
{
  make_tree (fx);
  mfx_mount (fx, policy_text, "--log-level", "all", NULL);
}

static char *
read_through (MFx *fx, const char *rel, int *ret_errno)
{
  g_autofree char *path = mfx_m (fx, rel);
  char buf[256];
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  *ret_errno = 0;
  if (fd < 0)
    {
      *ret_errno = errno;
      return NULL;
    }
  n = read (fd, buf, sizeof buf - 1);
  if (n < 0)
    *ret_errno = errno;
  close (fd);
  if (n < 0)
    return NULL;
  buf[n] = '\0';
  return g_strdup (buf);
}

/* Reading REL through the mount fails with ERR. */
static void
assert_read_refused (MFx *fx, const char *rel, int err)
{
  int e;
  g_autofree char *data = read_through (fx, rel, &e);

  if (data != NULL)
    fail_msg ("%s: read \"%s\" through the mount, expected %s", rel, data, g_strerror (err));
  if (e != err)
    fail_msg ("%s: %s through the mount, expected %s", rel, g_strerror (e), g_strerror (err));
}

MFX_CASE (test_symlinks_lead_nowhere)
{
  const char *l1 = mfx_in_mount (fx, "/ws/to-hidden");
  char buf[256];
  ssize_t n;

  mount_it (fx);
  mfx_assert_host_readable (fx, "/hidden/secret");
  mfx_assert_host_readable (fx, "/denied/secret");
  mfx_assert_host_readable (fx, "/ws/proj/secret");

  /* made through the view: relative links to the hidden and denied files */
  assert_int_equal (symlink ("../hidden/secret", l1), 0);
  assert_int_equal (symlink ("../denied/secret", mfx_in_mount (fx, "/ws/to-denied")), 0);
  assert_int_equal (symlink ("proj/secret", mfx_in_mount (fx, "/ws/to-secret")), 0);
  /* the text is stored and returned as is */
  n = readlink (l1, buf, sizeof buf);
  assert_int_equal (n, strlen ("../hidden/secret"));
  assert_memory_equal (buf, "../hidden/secret", n);
  assert_read_refused (fx, "/ws/to-hidden", ENOENT);
  assert_read_refused (fx, "/ws/to-denied", EACCES);
  assert_read_refused (fx, "/ws/to-secret", EACCES);

  /* planted on the host */
  assert_int_equal (symlink ("../hidden/secret", mfx_on_host (fx, "/ws/planted")), 0);
  assert_read_refused (fx, "/ws/planted", ENOENT);

  /* ".." chains go through the view's own directories */
  assert_read_refused (fx, "/ws/proj/../../hidden/secret", ENOENT);
  assert_read_refused (fx, "/ws/../denied/secret", EACCES);
  /* and the glob deny holds through a link as well */
  assert_int_equal (symlink ("key.pem", mfx_in_mount (fx, "/ws/to-pem")), 0);
  assert_read_refused (fx, "/ws/to-pem", EACCES);
}

MFX_CASE (test_hard_links)
{
  const char *m_denied = mfx_in_mount (fx, "/ws/proj/secret");
  const char *m_new = mfx_in_mount (fx, "/ws/new-link");
  const char *file = mfx_in_mount (fx, "/ws/file");
  g_autofree char *data = NULL;
  g_autofree char *before = NULL, *after = NULL;
  struct stat hs, ms1, ms2;
  int e;

  make_tree (fx);
  /* a host hard link: the same inode under a writable and a denied path */
  assert_int_equal (link (mfx_on_host (fx, "/ws/proj/secret"), mfx_on_host (fx, "/ws/alias")), 0);
  mfx_mount (fx, policy_text, NULL);
  mfx_assert_host_readable (fx, "/ws/proj/secret");

  /* the decision is the one of the path it is reached by */
  data = read_through (fx, "/ws/alias", &e);
  assert_string_equal (data, "SECRET in ws\n");
  g_clear_pointer (&data, g_free);
  assert_read_refused (fx, "/ws/proj/secret", EACCES);
  /* both report the host's inode */
  assert_int_equal (lstat (mfx_on_host (fx, "/ws/proj/secret"), &hs), 0);
  assert_int_equal (lstat (mfx_in_mount (fx, "/ws/alias"), &ms1), 0);
  assert_int_equal (lstat (m_denied, &ms2), 0);
  assert_int_equal (ms1.st_ino, hs.st_ino);
  assert_int_equal (ms2.st_ino, hs.st_ino);

  /* link needs a writable source: not from a denied or a read-only path */
  before = mfx_sum (fx, "");
  assert_errno_is (link (m_denied, m_new), EACCES);
  assert_errno_is (link (mfx_in_mount (fx, "/ro/readonly"), m_new), EROFS);
  after = mfx_sum (fx, "");
  assert_string_equal (before, after);
  /* nor into a hidden or denied name */
  assert_errno_is (link (file, mfx_in_mount (fx, "/ws/repo/.git/x")), ENOENT);
  assert_errno_is (link (file, mfx_in_mount (fx, "/ws/.git")), EACCES);
  assert_errno_is (link (file, mfx_in_mount (fx, "/ws/new.pem")), EACCES);
  g_free (after);
  after = mfx_sum (fx, "");
  assert_string_equal (before, after);
}

/* Every operation that takes a name, on a hidden name that exists on the
 * host (.git) and one that does not (.codex), at the top of the workspace
 * and deeper. */
static void
check_hidden_name (MFx *fx, const char *rel, bool exists)
{
  g_autofree char *p = mfx_m (fx, rel);
  g_autofree char *inside = g_strconcat (p, "/HEAD", NULL);
  g_autofree char *file = mfx_m (fx, "/ws/file");
  g_autofree char *other = mfx_m (fx, "/ws/other");
  struct timespec ts[2] = { { 1, 0 }, { 1, 0 } };
  struct stat st;
  char buf[64];

  if (exists)
    mfx_assert_host_readable (fx, rel);
  assert_errno_is (lstat (p, &st), ENOENT);
  assert_errno_is (stat (inside, &st), ENOENT);
  assert_errno_is (open (p, O_RDONLY | O_CLOEXEC), ENOENT);
  assert_errno_is (open (p, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ENOENT);
  assert_errno_is (open (p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), EACCES);
  assert_errno_is (open (p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), EACCES);
  assert_errno_is (mkdir (p, 0755), EACCES);
  assert_errno_is (mkfifo (p, 0644), EACCES);
  assert_errno_is (mknod (p, S_IFREG | 0644, 0), EACCES);
  assert_errno_is (symlink ("file", p), EACCES);
  assert_errno_is (link (file, p), EACCES);
  assert_errno_is (rename (file, p), EACCES);
  assert_errno_is (renameat2 (AT_FDCWD, file, AT_FDCWD, p, RENAME_NOREPLACE), EACCES);
  assert_errno_is (renameat2 (AT_FDCWD, file, AT_FDCWD, p, RENAME_EXCHANGE), ENOENT);
  assert_errno_is (rename (p, other), ENOENT);
  assert_errno_is (unlink (p), ENOENT);
  assert_errno_is (rmdir (p), ENOENT);
  assert_errno_is (chmod (p, 0777), ENOENT);
  assert_errno_is (truncate (p, 0), ENOENT);
  assert_errno_is (utimensat (AT_FDCWD, p, ts, 0), ENOENT);
  assert_errno_is (lgetxattr (p, "user.x", buf, sizeof buf), ENOENT);
  assert_errno_is (lsetxattr (p, "user.x", "1", 1, 0), ENOENT);
  assert_errno_is (llistxattr (p, buf, sizeof buf), ENOENT);
  assert_errno_is (readlink (p, buf, sizeof buf), ENOENT);
  assert_errno_is (access (p, F_OK), ENOENT);
  {
    g_autofree char *dir = g_path_get_dirname (p);
    g_autofree char *base = g_path_get_basename (p);
    DIR *dp = opendir (dir);
    struct dirent *de;
    assert_non_null (dp);
    while ((de = readdir (dp)) != NULL)
      if (strcmp (de->d_name, base) == 0)
        fail_msg ("%s is listed in %s", base, dir);
    closedir (dp);
  }
}

MFX_CASE (test_hidden_names)
{
  g_autofree char *before = NULL, *after = NULL;
  g_autofree char *log = NULL;

  mount_it (fx);
  before = mfx_sum (fx, "");
  check_hidden_name (fx, "/ws/repo/.git", true);
  check_hidden_name (fx, "/ws/sub/.git", true);
  check_hidden_name (fx, "/ws/.codex", false);
  check_hidden_name (fx, "/ws/sub/.agents", false);
  check_hidden_name (fx, "/hidden", true);
  after = mfx_sum (fx, "");
  /* nothing changed on the host: no .codex or .agents were made */
  assert_string_equal (before, after);
  mfx_unmount (fx);
  log = mfx_log (fx);
  /* the attempts on the existing hidden names are in the log, with why */
  assert_true (test_log_has (log, "/ws/repo/.git\"", "\"decision\":\"hide\"", NULL));
  assert_true (test_log_has (log, "\"op\":\"mkdir\"", "/ws/.codex\"", "\"decision\":\"deny\"", "\"errno\":13", NULL));
  assert_true (test_log_has (log, "\"why\":\"hidden stand-in\"", NULL));
}

/* A directory holding a hidden subdirectory looks like one that does not:
 * the host's st_nlink counts the hidden child's "..", the view's does not. */
MFX_CASE (test_hidden_subdir_stat)
{
  struct stat hw, ho, vw, vo;

  mfx_mkdir (fx, "/ws/twin");
  mfx_write (fx, "/ws/twin/src.c", "int x;\n");
  mount_it (fx);
  mfx_assert_host_readable (fx, "/ws/repo/.git/config");
  /* on the host the two differ by the hidden .git */
  assert_int_equal (stat (mfx_on_host (fx, "/ws/repo"), &hw), 0);
  assert_int_equal (stat (mfx_on_host (fx, "/ws/twin"), &ho), 0);
  assert_int_equal (hw.st_nlink, ho.st_nlink + 1);
  /* through the view they are alike, whether asked by lookup or getattr */
  assert_int_equal (stat (mfx_in_mount (fx, "/ws/repo"), &vw), 0);
  assert_int_equal (stat (mfx_in_mount (fx, "/ws/twin"), &vo), 0);
  assert_int_equal (vw.st_nlink, 1);
  assert_int_equal (vw.st_nlink, vo.st_nlink);
  assert_int_equal (vw.st_mode, vo.st_mode);
  assert_int_equal (stat (mfx_in_mount (fx, "/ws/repo/."), &vw), 0);
  assert_int_equal (vw.st_nlink, 1);
}

/* Nor its size: on tmpfs (as on btrfs) a directory's st_size grows with
 * every name in it, hidden ones included.  Two directories on a tmpfs that
 * differ by a hidden .git only: their host sizes differ, the view's not. */
MFX_CASE (test_hidden_name_dir_size)
{
  const char *t = mfx_on_host (fx, "/ws/t");
  struct stat ha, hb, va, vb;
  int ra, rb;

  mfx_mkdir (fx, "/ws/t");
  assert_int_equal (mount ("tmpfs", t, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755"), 0);
  mfx_write (fx, "/ws/t/a/x", "x");
  mfx_mkdir (fx, "/ws/t/a/.git");
  mfx_write (fx, "/ws/t/a/.git/HEAD", "ref: refs/heads/main\n");
  mfx_write (fx, "/ws/t/b/x", "x");
  mount_it (fx);
  mfx_assert_host_readable (fx, "/ws/t/a/.git/HEAD");
  ra = stat (mfx_on_host (fx, "/ws/t/a"), &ha);
  rb = stat (mfx_on_host (fx, "/ws/t/b"), &hb);
  assert_int_equal (stat (mfx_in_mount (fx, "/ws/t/a"), &va), 0);
  assert_int_equal (stat (mfx_in_mount (fx, "/ws/t/b"), &vb), 0);
  mfx_unmount (fx);
  (void)umount2 (t, MNT_DETACH);
  /* on the host they differ by the hidden name */
  assert_int_equal (ra, 0);
  assert_int_equal (rb, 0);
  assert_true (ha.st_size != hb.st_size);
  /* through the view they are alike */
  assert_int_equal (va.st_size, vb.st_size);
  assert_int_equal (va.st_blocks, vb.st_blocks);
}

/* create keeps every mode bit the caller may set: the sticky bit survives,
 * set-user-ID and set-group-ID on a file are stripped, the umask applies. */
MFX_CASE (test_create_modes)
{
  const char *sticky = mfx_in_mount (fx, "/ws/sticky");
  mode_t old;
  int fd;

  mount_it (fx);
  old = umask (0);
  fd = open (sticky, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 01640);
  assert_true (fd >= 0);
  close (fd);
  fd = open (mfx_in_mount (fx, "/ws/setid"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 06755);
  assert_true (fd >= 0);
  close (fd);
  umask (027);
  fd = open (mfx_in_mount (fx, "/ws/masked"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 01777);
  umask (old);
  assert_true (fd >= 0);
  close (fd);
  assert_int_equal (test_mode_of (mfx_on_host (fx, "/ws/sticky")), 01640);
  assert_int_equal (test_mode_of (mfx_on_host (fx, "/ws/setid")), 0755);
  assert_int_equal (test_mode_of (mfx_on_host (fx, "/ws/masked")), 01750);
  /* and the view says the same */
  assert_int_equal (test_mode_of (sticky), 01640);
}

MFX_CASE (test_ancestor_renames)
{
  const char *proj = mfx_in_mount (fx, "/ws/proj");
  const char *repo2 = mfx_in_mount (fx, "/ws/repo2");
  const char *other = mfx_in_mount (fx, "/ws/otherdir");
  const char *hgit2 = mfx_on_host (fx, "/ws/repo2/.git/config");
  g_autofree char *before = NULL, *after = NULL;
  struct stat st;

  mount_it (fx);
  mfx_assert_host_readable (fx, "/ws/proj/secret");
  assert_int_equal (mkdir (other, 0755), 0);
  before = mfx_sum (fx, "");
  /* proj holds a path with its own rule (secret: deny) */
  assert_errno_is (rename (proj, mfx_in_mount (fx, "/ws/proj2")), EACCES);
  assert_errno_is (renameat2 (AT_FDCWD, proj, AT_FDCWD, other, RENAME_EXCHANGE), EACCES);
  assert_errno_is (renameat2 (AT_FDCWD, other, AT_FDCWD, proj, RENAME_EXCHANGE), EACCES);
  /* the secret stays denied, removing its directory fails (EACCES
   * whatever it holds, as for renaming it: test-security-rmdir) */
  assert_errno_is (unlink (mfx_in_mount (fx, "/ws/proj/secret")), EACCES);
  assert_errno_is (rmdir (proj), EACCES);
  after = mfx_sum (fx, "");
  assert_string_equal (before, after);
  assert_read_refused (fx, "/ws/proj/secret", EACCES);

  /* a protected name follows its directory: renaming the repository is
   * allowed, and its .git stays hidden under the new name */
  assert_int_equal (rename (mfx_in_mount (fx, "/ws/repo"), repo2), 0);
  assert_errno_is (stat (mfx_in_mount (fx, "/ws/repo2/.git"), &st), ENOENT);
  assert_int_equal (stat (hgit2, &st), 0);
  /* rm -r of the visible content leaves the hidden one in place */
  assert_int_equal (unlink (mfx_in_mount (fx, "/ws/repo2/src.c")), 0);
  assert_errno_is (rmdir (repo2), ENOTEMPTY);
  assert_int_equal (stat (hgit2, &st), 0);
}

MFX_CASE (test_fifo_does_not_hang)
{
  const char *m_fifo = mfx_in_mount (fx, "/ws/host-fifo");
  const char *m_made = mfx_in_mount (fx, "/ws/made-fifo");
  g_autofree char *data = NULL;
  pid_t child;
  struct stat st;
  int e, fd;

  make_tree (fx);
  assert_int_equal (mkfifo (mfx_on_host (fx, "/ws/host-fifo"), 0666), 0);
  mfx_mount (fx, policy_text, NULL);
  assert_int_equal (stat (m_fifo, &st), 0);
  assert_true (S_ISFIFO (st.st_mode));
  /* a reader that blocks (in its own process) ... */
  child = fork ();
  if (child == 0)
    {
      int cfd = open (m_fifo, O_RDONLY | O_CLOEXEC);
      _exit (cfd >= 0 ? 0 : 1);
    }
  /* ... and another one that doesn't wait */
  fd = open (m_fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  assert_true (fd >= 0);
  close (fd);
  /* the daemon keeps answering: every worker is free */
  for (int i = 0; i < 40; i++)
    {
      g_free (data);
      data = read_through (fx, "/ws/file", &e);
      assert_string_equal (data, "workspace file\n");
    }
  /* FIFOs made through the view work the same */
  assert_int_equal (mkfifo (m_made, 0644), 0);
  fd = open (m_made, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  assert_true (fd >= 0);
  close (fd);
  test_kill_child (&child, SIGKILL);
}

static long
vm_rss_kb (pid_t pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", (int)pid);
  g_autofree char *text = NULL;
  const char *p;

  if (!g_file_get_contents (path, &text, NULL, NULL) || (p = strstr (text, "VmRSS:")) == NULL)
    return -1;
  return atol (p + 6);
}

MFX_CASE (test_oversized)
{
  const char *ws = mfx_in_mount (fx, "/ws");
  const char *file = mfx_in_mount (fx, "/ws/file");
  g_autofree char *name256 = g_strnfill (256, 'n');
  g_autofree char *name255 = g_strnfill (255, 'n');
  g_autofree char *p256 = g_build_filename (ws, name256, NULL);
  g_autofree char *p255 = g_build_filename (ws, name255, NULL);
  g_autofree char *big = g_malloc (16 * 1024 * 1024);
  g_autofree char *xval = g_malloc (70 * 1024);
  g_autofree char *xname = g_strconcat ("user.", name255, NULL);
  struct stat st;
  long rss;
  int fd, depth = 0;

  mount_it (fx);
  /* names */
  assert_errno_is (mkdir (p256, 0755), ENAMETOOLONG);
  assert_errno_is (stat (p256, &st), ENAMETOOLONG);
  assert_int_equal (mkdir (p255, 0755), 0);
  /* xattrs: names and values past the kernel's bounds */
  memset (xval, 'v', 70 * 1024);
  assert_errno_is (setxattr (file, xname, "1", 1, 0), ERANGE);
  assert_errno_is (setxattr (file, "user.big", xval, 70 * 1024, 0), E2BIG);
  assert_int_equal (setxattr (file, "user.ok", xval, 2000, 0), 0);
  /* one 16 MiB write arrives in 1 MiB requests and lands whole */
  memset (big, 'b', 16 * 1024 * 1024);
  fd = open (mfx_in_mount (fx, "/ws/big"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true (fd >= 0);
  assert_int_equal (write (fd, big, 16 * 1024 * 1024), 16 * 1024 * 1024);
  close (fd);
  assert_int_equal (stat (mfx_on_host (fx, "/ws/big"), &st), 0);
  assert_int_equal (st.st_size, 16 * 1024 * 1024);
  /* a deep tree, walked with relative names so that only the view's own
   * path bound (FB_VIEW_PATH_MAX) can stop it: ENAMETOOLONG, not a crash */
  {
    int dfd = open (ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const char *seg = "dddddddddddddddddddddddddddddddddddddddddddddddd";
    assert_true (dfd >= 0);
    for (;;)
      {
        int next;
        if (mkdirat (dfd, seg, 0755) < 0)
          {
            assert_int_equal (errno, ENAMETOOLONG);
            break;
          }
        next = openat (dfd, seg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true (next >= 0);
        close (dfd);
        dfd = next;
        depth++;
        assert_true (depth < 200);
      }
    close (dfd);
  }
  assert_true (depth > 50);
  /* a directory of 5000 entries lists completely */
  {
    const char *many = mfx_on_host (fx, "/ws/many");
    DIR *dp;
    struct dirent *de;
    int n = 0;
    mkdir (many, 0755);
    for (int i = 0; i < 5000; i++)
      {
        g_autofree char *p = g_strdup_printf ("%s/entry-%05d", many, i);
        int hfd = open (p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        close (hfd);
      }
    dp = opendir (mfx_in_mount (fx, "/ws/many"));
    assert_non_null (dp);
    while ((de = readdir (dp)) != NULL)
      n++;
    closedir (dp);
    assert_int_equal (n, 5002);
  }
  /* and the daemon is alive and small */
  assert_true (test_pid_alive (fx->daemon));
  rss = vm_rss_kb (fx->daemon);
  assert_true (rss > 0 && rss < 256 * 1024);
}

MFX_CASE (test_root_daemon_refusals)
{
  const char *m_private = mfx_in_mount (fx, "/ws/root-only");
  const char *m_file = mfx_in_mount (fx, "/ws/file");
  const char *m_ws = mfx_in_mount (fx, "/ws");
  g_autofree char *shadow = g_build_filename (fx->mnt, "etc", "shadow", NULL);
  g_autofree char *before = NULL, *after = NULL;
  pid_t child;
  int status;

  make_tree (fx);
  mfx_write (fx, "/ws/root-only", "root's eyes only\n");
  assert_int_equal (chmod (mfx_on_host (fx, "/ws/root-only"), 0600), 0);
  mfx_mount (fx, policy_text, NULL);
  mfx_assert_host_readable (fx, "/ws/root-only");

  /* an unprivileged caller: the kernel checks the host's modes for it */
  child = fork ();
  if (child == 0)
    {
      int fails = 0;
      if (setgid (65534) < 0 || setuid (65534) < 0)
        _exit (99);
      if (open (m_private, O_RDONLY | O_CLOEXEC) >= 0 || errno != EACCES)
        fails |= 1;
      if (access ("/etc/shadow", F_OK) == 0 && (open (shadow, O_RDONLY | O_CLOEXEC) >= 0 || errno != EACCES))
        fails |= 2;
      /* the workspace directory is root's 0755: no creating in it either */
      {
        g_autofree char *p = g_build_filename (m_ws, "by-nobody", NULL);
        if (open (p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) >= 0 || errno != EACCES)
          fails |= 4;
      }
      _exit (fails);
    }
  assert_int_equal (waitpid (child, &status, 0), child);
  assert_true (WIFEXITED (status));
  if (WEXITSTATUS (status) != 0)
    fail_msg ("as uid 65534 through a root daemon: failures %d (1 root-only file, 2 /etc/shadow, 4 create)",
              WEXITSTATUS (status));

  /* whatever the policy allows, no giving away, no set-id, no capabilities */
  before = mfx_sum (fx, "");
  assert_errno_is (chown (m_file, 1234, 1234), EPERM);
  assert_errno_is (chmod (m_file, 04755), EPERM);
  assert_errno_is (chmod (m_file, 02755), EPERM);
  {
    /* a well-formed capability set, so the kernel passes it on to us */
    struct vfs_cap_data cap = { 0 };
    cap.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE;
    cap.data[0].permitted = 1u << CAP_NET_RAW;
    assert_errno_is (setxattr (m_file, "security.capability", &cap, XATTR_CAPS_SZ_2, 0), EPERM);
  }
  assert_errno_is (setxattr (m_file, "trusted.x", "1", 1, 0), EPERM);
  assert_errno_is (mknod (mfx_in_mount (fx, "/ws/null"), S_IFCHR | 0666, makedev (1, 3)), EPERM);
  after = mfx_sum (fx, "");
  assert_string_equal (before, after);
  /* a chown that changes nothing is fine (tar does them) */
  assert_int_equal (chown (m_file, 0, 0), 0);
}

MFX_DEFINE_MAIN (MFX_TEST (test_symlinks_lead_nowhere), MFX_TEST (test_hard_links), MFX_TEST (test_hidden_names),
                 MFX_TEST (test_hidden_subdir_stat), MFX_TEST (test_hidden_name_dir_size), MFX_TEST (test_create_modes),
                 MFX_TEST (test_ancestor_renames), MFX_TEST (test_fifo_does_not_hang), MFX_TEST (test_oversized),
                 MFX_TEST (test_root_daemon_refusals))
