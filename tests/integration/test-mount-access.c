/* fusebox — `fusebox mount` end to end: every operation, by real system
 * calls through a real mount, against every access (write, read, deny,
 * hide) with the expected errno, the expected host effect (a checksum of the
 * host tree before and after), a stand-in that exists and is readable on
 * the host first, and the denial in the access log with its rule's why.
 * Also: the built-in default policy's private /tmp and HOME, refused
 * lookups in the log at the default level, and what `fusebox report` counts
 * as written. */
#include <sys/xattr.h>

#include "tests/lib/test-access-table.h"
#include "tests/lib/test-log.h"
#include "tests/lib/test-mount.h"

#include <dirent.h>
#include <sys/sysmacros.h>

static void
make_tree (MFx *fx)
{
  g_autofree char *t = mfx_h (fx, "/t");

  test_access_table_make (t);
}

/* What ROW gets through a mount under access J: the table's, but where the
 * kernel answers before asking the view (an exchange with a name it was told
 * does not exist is ENOENT). */
static int
mount_expect (const TestAccessRow *row, guint j)
{
  if (row->op == TEST_ACCESS_OP_EXCHANGE && strcmp (test_access_names[j], "hide") == 0)
    return ENOENT;
  return row->expect[j];
}

static int
err_of (long r)
{
  return r < 0 ? errno : 0;
}

/* Run OP on /t/A through the mount; 0 or the errno. */
static int
run_op (MFx *fx, TestAccessOp op, const char *a)
{
  g_autofree char *d = g_strdup_printf ("/t/%s", a);
  g_autofree char *dir = mfx_m (fx, d);
  g_autofree char *f = g_build_filename (dir, "f", NULL);
  g_autofree char *s = g_build_filename (dir, "s", NULL);
  g_autofree char *l = g_build_filename (dir, "l", NULL);
  g_autofree char *nw = g_build_filename (dir, "new", NULL);
  g_autofree char *x = mfx_m (fx, "/t/zone/x");
  g_autofree char *moved = mfx_m (fx, "/t/zone/moved");
  g_autofree char *lnk = mfx_m (fx, "/t/zone/lnk");
  struct timespec ts[2] = { { 12345, 0 }, { 12345, 0 } };
  struct stat st;
  char buf[128];
  int fd, e;

  errno = 0;
  switch (op)
    {
      case TEST_ACCESS_OP_GETATTR:
        return err_of (lstat (f, &st));
      case TEST_ACCESS_OP_OPEN_READ:
        fd = open (f, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
          return errno;
        assert_int_equal (read (fd, buf, sizeof buf), 16);
        close (fd);
        return 0;
      case TEST_ACCESS_OP_OPEN_WRITE:
        fd = open (f, O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (fd < 0)
          return errno;
        close (fd);
        return 0;
      case TEST_ACCESS_OP_CHMOD:
        return err_of (chmod (f, 0600));
      case TEST_ACCESS_OP_TRUNCATE:
        return err_of (truncate (f, 3));
      case TEST_ACCESS_OP_UTIMENS:
        return err_of (utimensat (AT_FDCWD, f, ts, AT_SYMLINK_NOFOLLOW));
      case TEST_ACCESS_OP_ACCESS_W:
        /* not run through a mount: see test_table */
        break;
      case TEST_ACCESS_OP_SETXATTR:
        return err_of (lsetxattr (f, "user.n", "1", 1, 0));
      case TEST_ACCESS_OP_GETXATTR:
        return err_of (lgetxattr (f, "user.t", buf, sizeof buf));
      case TEST_ACCESS_OP_REMOVEXATTR:
        return err_of (lremovexattr (f, "user.t"));
      case TEST_ACCESS_OP_UNLINK:
        return err_of (unlink (f));
      case TEST_ACCESS_OP_RENAME_AWAY:
        return err_of (rename (f, moved));
      case TEST_ACCESS_OP_RENAME_ONTO:
        return err_of (rename (x, nw));
      case TEST_ACCESS_OP_EXCHANGE:
        return err_of (renameat2 (AT_FDCWD, x, AT_FDCWD, f, RENAME_EXCHANGE));
      case TEST_ACCESS_OP_LINK_AWAY:
        return err_of (link (f, lnk));
      case TEST_ACCESS_OP_LINK_ONTO:
        return err_of (link (x, nw));
      case TEST_ACCESS_OP_CREATE:
        fd = open (nw, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
          return errno;
        assert_int_equal (write (fd, "x", 1), 1);
        close (fd);
        return 0;
      case TEST_ACCESS_OP_MKDIR:
        return err_of (mkdir (nw, 0755));
      case TEST_ACCESS_OP_SYMLINK:
        return err_of (symlink ("f", nw));
      case TEST_ACCESS_OP_MKFIFO:
        return err_of (mkfifo (nw, 0644));
      case TEST_ACCESS_OP_READDIR:
        {
          DIR *dp = opendir (s);
          struct dirent *de;
          guint n = 0;
          if (dp == NULL)
            return errno;
          errno = 0;
          while ((de = readdir (dp)) != NULL)
            n++;
          e = errno;
          closedir (dp);
          /* the kernel may open a directory without asking the view (no
           * OPENDIR): the refusal then comes with the first readdir */
          if (e != 0)
            return e;
          assert_int_equal (n, 2);
          return 0;
        }
      case TEST_ACCESS_OP_RMDIR:
        return err_of (rmdir (s));
      case TEST_ACCESS_OP_MKDIR_IN:
        {
          g_autofree char *sub = g_build_filename (s, "sub", NULL);
          return err_of (mkdir (sub, 0755));
        }
      case TEST_ACCESS_OP_READLINK:
        {
          ssize_t n = readlink (l, buf, sizeof buf);
          if (n < 0)
            return errno;
          assert_int_equal (n, 1);
          assert_int_equal (buf[0], 'f');
          return 0;
        }
    }
  return EINVAL;
}

MFX_CASE (test_table)
{
  g_autofree char *policy = test_access_table_policy (TEST_ACCESS_PROTECTED_NAMES);
  g_autofree char *log = NULL;
  guint denials = 0;

  make_tree (fx);
  /* a fresh mount for each access keeps the kernel's caches out of the way
   * of the host tree being rebuilt between cases */
  for (guint j = 0; j < TEST_ACCESS_N; j++)
    for (guint i = 0; i < G_N_ELEMENTS (test_access_rows); i++)
      {
        const TestAccessRow *row = &test_access_rows[i];
        int expect = mount_expect (row, j);
        g_autofree char *before = NULL, *after = NULL;
        g_autofree char *frel = g_strdup_printf ("/t/%s/f", test_access_names[j]);
        int r;

        /* the kernel answers access(2) itself (default_permissions) */
        if (row->op == TEST_ACCESS_OP_ACCESS_W)
          continue;
        make_tree (fx);
        mfx_assert_host_readable (fx, frel);
        mfx_mount (fx, policy, "--log-level", "mutations", "--cache-timeout", "0", NULL);
        before = mfx_sum (fx, "/t");
        r = run_op (fx, row->op, test_access_names[j]);
        after = mfx_sum (fx, "/t");
        mfx_unmount (fx);
        if (r != expect)
          fail_msg ("%s on %s: got %s, expected %s", row->name, test_access_names[j], r ? g_strerror (r) : "success",
                    expect ? g_strerror (expect) : "success");
        if (row->mutation && r == 0 && strcmp (before, after) == 0)
          fail_msg ("%s on %s succeeded but the host did not change", row->name, test_access_names[j]);
        if ((r != 0 || !row->mutation) && strcmp (before, after) != 0)
          fail_msg ("%s on %s (%s) changed the host", row->name, test_access_names[j], r ? g_strerror (r) : "success");
        if (r == EACCES || r == EROFS)
          {
            g_autofree char *why = g_strdup_printf ("\"why\":\"%s %s\"", test_access_names[j], row->obj);
            g_autofree char *errno_field = g_strdup_printf ("\"errno\":%d", r);
            g_free (log);
            log = mfx_log (fx);
            if (!test_log_has (log, why, errno_field, NULL))
              fail_msg ("%s on %s: the log has no denial with errno %d and %s:\n%s", row->name, test_access_names[j], r,
                        why, log);
            denials++;
          }
      }
  assert_true (denials > 30);
}

/* The built-in default policy: the workspace writable, / read-only, /tmp
 * and HOME private (in the run directory), other people's files hidden. */
MFX_CASE (test_default_private)
{
  g_autofree char *ws = mfx_h (fx, "/ws");
  g_autofree char *in_ws = mfx_m (fx, "/ws/made-in-view");
  g_autofree char *tmpfile = NULL;
  g_autofree char *marker = g_strdup_printf ("fusebox-test-%d", (int)getpid ());
  g_autofree char *host_tmp_marker = g_build_filename ("/tmp", marker, NULL);
  g_autofree char *view_tmp_marker = NULL;
  g_autofree char *runs = NULL;
  g_autofree char *etc = NULL;
  g_autofree char *found = NULL;
  struct stat st;
  int fd;

  mfx_mkdir (fx, "/ws");
  {
    const char *argv[] = { test_bin (), "mount", "--workspace", ws, "--log", fx->log_path, fx->mnt, NULL };
    g_autofree char *out = NULL, *err = NULL;
    fx->mount_args = g_strjoinv (" ", (char **)argv);
    if (test_run_cmd (argv, &out, &err) != 0)
      fail_msg ("%s:\n%s%s", fx->mount_args, out, err);
    fx->mounted = true;
    fx->daemon = atoi (strstr (out, "daemon pid ") + strlen ("daemon pid "));
  }
  /* the workspace is the host's and writable */
  fd = open (in_ws, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  assert_true (fd >= 0);
  close (fd);
  {
    g_autofree char *h = mfx_h (fx, "/ws/made-in-view");
    assert_int_equal (stat (h, &st), 0);
  }
  /* / is read-only */
  etc = g_build_filename (fx->mnt, "etc", marker, NULL);
  assert_errno_is (open (etc, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), EROFS);
  assert_errno_is (stat ("/etc/hostname", &st), 0);
  /* /tmp is private: a file made there lands in the run directory, not in
   * the host's /tmp */
  view_tmp_marker = g_build_filename (fx->mnt, "tmp", marker, NULL);
  fd = open (view_tmp_marker, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  assert_true (fd >= 0);
  assert_int_equal (write (fd, "private", 7), 7);
  close (fd);
  assert_errno_is (stat (host_tmp_marker, &st), ENOENT);
  runs = g_build_filename (fx->state_dir, "fusebox", "runs", NULL);
  {
    const char *argv[] = { "find", runs, "-name", marker, NULL };
    g_autofree char *out = NULL;
    assert_int_equal (test_run_cmd (argv, &out, NULL), 0);
    found = g_strstrip (g_strdup (out));
  }
  assert_true (strstr (found, "/private/") != NULL);
  {
    g_autofree char *data = NULL;
    assert_true (g_file_get_contents (found, &data, NULL, NULL));
    assert_string_equal (data, "private");
  }
  /* the host's /tmp content is not visible in the view's /tmp */
  {
    g_autofree char *host_side = g_build_filename ("/tmp", "fusebox-host-only-XXXXXX", NULL);
    int hfd = g_mkstemp (host_side);
    g_autofree char *through = g_build_filename (fx->mnt, host_side, NULL);
    assert_true (hfd >= 0);
    close (hfd);
    assert_errno_is (stat (through, &st), ENOENT);
    unlink (host_side);
  }
  /* /proc, /sys and /dev are empty directories */
  {
    g_autofree char *proc = g_build_filename (fx->mnt, "proc", NULL);
    g_autofree char *self = g_build_filename (fx->mnt, "proc", "self", "status", NULL);
    g_autofree char *null = g_build_filename (fx->mnt, "dev", "null", NULL);
    g_autoptr (GDir) d = NULL;
    assert_int_equal (stat ("/proc/self/status", &st), 0);
    assert_int_equal (stat (proc, &st), 0);
    assert_true (S_ISDIR (st.st_mode));
    d = g_dir_open (proc, 0, NULL);
    assert_non_null (d);
    assert_null (g_dir_read_name (d));
    assert_errno_is (stat (self, &st), ENOENT);
    assert_errno_is (stat (null, &st), ENOENT);
  }
  unlink (host_tmp_marker);
}

/* A lookup refused on the way to a path is logged at the default level
 * with its decision and the rule that refused it: under a denied
 * directory, and for a name that is not on the way to the visible path
 * inside a traversable (denied or hidden) directory.  The kernel looks a
 * name up before any other operation on it, so this record is the only one
 * an auditor gets of a stat(2) or open(2) under a denied directory. */
MFX_CASE (test_refused_lookup)
{
  static const struct
  {
    const char *rel;
    int expect;
    const char *decision;
    int rule;
    const char *why;
  } cases[] = {
    { "/lk/denied/file.txt", EACCES, "deny", 1, "a denied directory" },
    { "/lk/denied/sub/deeper.txt", EACCES, "deny", 1, "a denied directory" },
    { "/lk/tdeny/other.txt", EACCES, "deny", 2, "a denied directory with a way through" },
    { "/lk/thide/other.txt", ENOENT, "hide", 4, "a hidden directory with a way through" },
  };
  g_autofree char *log = NULL;
  struct stat st;

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      mfx_write (fx, cases[i].rel, "host data\n");
      mfx_assert_host_readable (fx, cases[i].rel);
    }
  mfx_write (fx, "/lk/tdeny/pub/ok.txt", "host data\n");
  mfx_write (fx, "/lk/thide/pub/ok.txt", "host data\n");
  /* no --log-level: the default */
  mfx_mount (
    fx,
    "{ \"version\": 1, \"rules\": [\n"
    "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
    "  { \"path\": \"@H@/lk/denied\", \"access\": \"deny\", \"why\": \"a denied directory\" },\n"
    "  { \"path\": \"@H@/lk/tdeny\", \"access\": \"deny\", \"why\": \"a denied directory with a way through\" },\n"
    "  { \"path\": \"@H@/lk/tdeny/pub\", \"access\": \"read\", \"why\": \"the way through\" },\n"
    "  { \"path\": \"@H@/lk/thide\", \"access\": \"hide\", \"why\": \"a hidden directory with a way through\" },\n"
    "  { \"path\": \"@H@/lk/thide/pub\", \"access\": \"read\", \"why\": \"the other way through\" } ] }\n",
    NULL);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *m = mfx_m (fx, cases[i].rel);
      assert_errno_is (stat (m, &st), cases[i].expect);
    }
  /* the ways through are open */
  {
    g_autofree char *m1 = mfx_m (fx, "/lk/tdeny/pub/ok.txt");
    g_autofree char *m2 = mfx_m (fx, "/lk/thide/pub/ok.txt");
    assert_errno_is (stat (m1, &st), 0);
    assert_errno_is (stat (m2, &st), 0);
  }
  mfx_unmount (fx);
  log = mfx_log (fx);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      /* the refused name is the first component below the directory */
      const char *rel = cases[i].rel;
      const char *below = strchr (strchr (rel + 1, '/') + 1, '/') + 1;
      const char *end = strchrnul (below, '/');
      g_autofree char *refused = g_strndup (rel, (gsize)(end - rel));
      g_autofree char *path = g_strdup_printf ("\"path\":\"%s%s\"", fx->host, refused);
      g_autofree char *decision = g_strdup_printf ("\"decision\":\"%s\"", cases[i].decision);
      g_autofree char *err = g_strdup_printf ("\"errno\":%d", cases[i].expect);
      g_autofree char *rule = g_strdup_printf ("\"rule\":%d,", cases[i].rule);
      g_autofree char *why = g_strdup_printf ("\"why\":\"%s\"", cases[i].why);

      if (!test_log_has (log, "\"op\":\"lookup\"", path, decision, err, rule, why, NULL))
        fail_msg ("stat %s: no lookup record with %s %s %s %s %s in the log:\n%s", rel, path, decision, err, rule, why,
                  log);
    }
}

/* What `fusebox report` counts as written: every handle that could write,
 * by its "close" record.  fallocate and copy_file_range are not logged per
 * call (nor is write): a file changed only by fallocate is listed with 0
 * bytes, and the bytes copy_file_range copies count as read from the source
 * handle and written through the destination's.  docs/fusebox.1, REPORT. */
MFX_CASE (test_report_written)
{
  g_autofree char *src = mfx_m (fx, "/src");
  g_autofree char *dst = mfx_m (fx, "/dst");
  g_autofree char *grown = mfx_m (fx, "/grown");
  g_autofree char *out = NULL, *err = NULL, *log = NULL;
  struct stat st;
  loff_t off_in = 0;
  int in, fd;

  mfx_write (fx, "/src", "hello world");
  mfx_write (fx, "/dst", "");
  mfx_write (fx, "/grown", "");
  mfx_mount (fx,
             "{ \"version\": 1, \"rules\": [ { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
             "  { \"path\": \"@H@\", \"access\": \"write\", \"why\": \"tree\" } ] }",
             NULL);
  in = open (src, O_RDONLY | O_CLOEXEC);
  assert_true (in >= 0);
  fd = open (dst, O_WRONLY | O_CLOEXEC);
  assert_true (fd >= 0);
  assert_int_equal (copy_file_range (in, &off_in, fd, NULL, 11, 0), 11);
  close (fd);
  close (in);
  fd = open (grown, O_WRONLY | O_CLOEXEC);
  assert_true (fd >= 0);
  assert_int_equal (fallocate (fd, 0, 0, 4096), 0);
  close (fd);
  mfx_unmount (fx);
  {
    g_autofree char *h = mfx_h (fx, "/grown");
    g_autofree char *data = NULL;
    g_autofree char *d = mfx_h (fx, "/dst");
    assert_int_equal (stat (h, &st), 0);
    assert_int_equal (st.st_size, 4096);
    assert_true (g_file_get_contents (d, &data, NULL, NULL));
    assert_string_equal (data, "hello world");
  }

  log = mfx_log (fx);
  if (test_log_has (log, "\"op\":\"fallocate\"", NULL) || test_log_has (log, "\"op\":\"copy_file_range\"", NULL))
    fail_msg ("fallocate or copy_file_range logged per call; docs/fusebox.1 says they are not:\n%s", log);
  {
    const char *argv[] = { test_bin (), "report", fx->log_path, NULL };
    g_autofree char *written = NULL, *read = NULL;
    g_autofree char *h_src = mfx_h (fx, "/src");
    g_autofree char *h_dst = mfx_h (fx, "/dst");
    g_autofree char *h_grown = mfx_h (fx, "/grown");
    if (test_run_cmd (argv, &out, &err) != 0)
      fail_msg ("fusebox report %s:\n%s%s", fx->log_path, out, err);
    written = g_strdup_printf ("\nFiles written (2)\n        11 B  %s\n         0 B  %s\n", h_dst, h_grown);
    read = g_strdup_printf ("\nFiles read (1)\n        11 B  %s\n", h_src);
    if (strstr (out, written) == NULL || strstr (out, read) == NULL)
      fail_msg ("fusebox report %s: expected%s and%s in:\n%s\nThe log:\n%s", fx->log_path, written, read, out, log);
  }
}

MFX_DEFINE_MAIN (MFX_TEST (test_table), MFX_TEST (test_default_private), MFX_TEST (test_refused_lookup),
                 MFX_TEST (test_report_written))
