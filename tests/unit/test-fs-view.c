/* fusebox — the view core on a temp tree, without FUSE: every operation
 * against every access (write, read, deny, hide) with the expected errno,
 * the expected host effect (a checksum of the tree before and after) and the
 * event naming the deciding rule; then names, events and bytes, and the
 * refusals that hold whatever the policy says. */
#include <sys/prctl.h>
#include <sys/wait.h>
#include <signal.h>
#include <fcntl.h>
#include <unistd.h>
#include "tests/lib/test-access-table.h"
#include "tests/unit/test-fs-util.h"

#include <sys/sysmacros.h>

/* The access table's tree (tests/lib/test-access-table.h), made afresh
 * below TMP/host/t. */
static void
make_table_tree (Fx *fx)
{
  g_autofree char *t = fx_host (fx, "host/t");

  test_access_table_make (t);
}

/* The access table's tree and policy, and the view (logging LEVEL, as
 * fx_start). */
static void
start_table (Fx *fx, int level)
{
  g_autofree char *policy = test_access_table_policy (TEST_ACCESS_PROTECTED_NAMES);

  make_table_tree (fx);
  fx_start (fx, policy, NULL, level);
}

static bool
count_entry (const FbViewDirEntry *e, gpointer data)
{
  (*(guint *)data)++;
  return true;
}

static int
run_op (Fx *fx, TestAccessOp op, const char *a)
{
  FbView *v = fx->view;
  const FbViewCaller *c = &fx->caller;
  g_autofree char *dir = g_strdup_printf ("/t/%s", a);
  g_autofree char *fpath = g_strdup_printf ("/t/%s/f", a);
  g_autoptr (FbViewNode) d = fx_node (fx, dir);
  g_autoptr (FbViewNode) zone = fx_node (fx, "/t/zone");
  g_autoptr (FbViewNode) n = NULL;
  FbViewFile *file = NULL;
  FbViewSetattr sa = { 0 };
  struct stat st;
  char buf[64];
  int r;

  switch (op)
    {
      case TEST_ACCESS_OP_RENAME_ONTO:
        return fb_view_rename (v, c, zone, "x", d, "new", 0);
      case TEST_ACCESS_OP_EXCHANGE:
        return fb_view_rename (v, c, zone, "x", d, "f", RENAME_EXCHANGE);
      case TEST_ACCESS_OP_LINK_ONTO:
        {
          g_autoptr (FbViewNode) x = fx_node (fx, "/t/zone/x");
          return fb_view_link (v, c, x, d, "new", NULL, NULL);
        }
      case TEST_ACCESS_OP_CREATE:
        r = fb_view_create (v, c, d, "new", O_WRONLY | O_CREAT | O_EXCL, 0644, &file, NULL, NULL);
        if (r == 0)
          {
            assert_int_equal (fb_view_write (v, file, "x", 1, 0), 1);
            fb_view_release (v, file);
          }
        return r;
      case TEST_ACCESS_OP_MKDIR:
        return fb_view_mkdir (v, c, d, "new", 0755, NULL, NULL);
      case TEST_ACCESS_OP_SYMLINK:
        return fb_view_symlink (v, c, d, "new", "f", NULL, NULL);
      case TEST_ACCESS_OP_MKFIFO:
        return fb_view_mknod (v, c, d, "new", S_IFIFO | 0644, 0, NULL, NULL);
      case TEST_ACCESS_OP_UNLINK:
        return fb_view_unlink (v, c, d, "f");
      case TEST_ACCESS_OP_RENAME_AWAY:
        return fb_view_rename (v, c, d, "f", zone, "moved", 0);
      case TEST_ACCESS_OP_RMDIR:
        return fb_view_rmdir (v, c, d, "s");
      default:
        break;
    }

  /* the rest act on an object that must first be looked up */
  r = fb_view_lookup (v, c, d,
                      op == TEST_ACCESS_OP_READDIR || op == TEST_ACCESS_OP_MKDIR_IN ? "s"
                      : op == TEST_ACCESS_OP_READLINK                               ? "l"
                                                                                    : "f",
                      &n, &st);
  if (r < 0)
    return r;
  switch (op)
    {
      case TEST_ACCESS_OP_GETATTR:
        return fb_view_getattr (v, c, n, &st);
      case TEST_ACCESS_OP_OPEN_READ:
        r = fb_view_open (v, c, n, O_RDONLY, &file, NULL);
        if (r == 0)
          {
            assert_int_equal (fb_view_read (v, file, buf, sizeof buf, 0), 16);
            fb_view_release (v, file);
          }
        return r;
      case TEST_ACCESS_OP_OPEN_WRITE:
        r = fb_view_open (v, c, n, O_WRONLY | O_TRUNC, &file, NULL);
        if (r == 0)
          fb_view_release (v, file);
        return r;
      case TEST_ACCESS_OP_CHMOD:
        sa.valid = FB_VIEW_SET_MODE;
        sa.mode = 0600;
        return fb_view_setattr (v, c, n, NULL, &sa, &st);
      case TEST_ACCESS_OP_TRUNCATE:
        sa.valid = FB_VIEW_SET_SIZE;
        sa.size = 3;
        return fb_view_setattr (v, c, n, NULL, &sa, &st);
      case TEST_ACCESS_OP_UTIMENS:
        sa.valid = FB_VIEW_SET_MTIME | FB_VIEW_SET_ATIME;
        sa.mtime.tv_sec = sa.atime.tv_sec = 12345;
        return fb_view_setattr (v, c, n, NULL, &sa, &st);
      case TEST_ACCESS_OP_ACCESS_W:
        return fb_view_access (v, c, n, W_OK);
      case TEST_ACCESS_OP_SETXATTR:
        return fb_view_setxattr (v, c, n, "user.n", "1", 1, 0);
      case TEST_ACCESS_OP_GETXATTR:
        return (int)fb_view_getxattr (v, c, n, "user.t", buf, sizeof buf);
      case TEST_ACCESS_OP_REMOVEXATTR:
        return fb_view_removexattr (v, c, n, "user.t");
      case TEST_ACCESS_OP_LINK_AWAY:
        return fb_view_link (v, c, n, zone, "lnk", NULL, NULL);
      case TEST_ACCESS_OP_READDIR:
        {
          guint count = 0;
          r = fb_view_opendir (v, c, n, &file, NULL);
          if (r < 0)
            return r;
          r = fb_view_readdir (v, file, 0, true, count_entry, &count);
          fb_view_releasedir (v, file);
          assert_int_equal (count, 2); /* "." and ".." */
          return r;
        }
      case TEST_ACCESS_OP_MKDIR_IN:
        return fb_view_mkdir (v, c, n, "sub", 0755, NULL, NULL);
      case TEST_ACCESS_OP_READLINK:
        {
          g_autofree char *text = NULL;
          r = fb_view_readlink (v, c, n, &text);
          if (r == 0)
            assert_string_equal (text, "f");
          return r;
        }
      default:
        fail ();
    }
  return -EINVAL;
}

/* Every row × every access: errno, host effect, and the denial's event. */
static void
test_table (void **state)
{
  Fx *fx = *state;

  start_table (fx, FB_LOG_LEVEL_MUTATIONS);
  for (guint i = 0; i < G_N_ELEMENTS (test_access_rows); i++)
    for (guint j = 0; j < TEST_ACCESS_N; j++)
      {
        const TestAccessRow *row = &test_access_rows[i];
        int expect = -row->expect[j];
        g_autofree char *fhost = g_strdup_printf ("host/t/%s/f", test_access_names[j]);
        g_autofree char *before = NULL, *after = NULL;
        g_autofree char *why = g_strdup_printf ("%s %s", test_access_names[j], row->obj);
        int r;

        /* each case starts from the same tree, and the object is there */
        make_table_tree (fx);
        assert_true (host_exists (fx, fhost));
        fx_clear_events (fx);
        before = tree_sum (fx, "host");
        r = run_op (fx, row->op, test_access_names[j]);
        after = tree_sum (fx, "host");
        if (r != expect && !(expect == 0 && r > 0))
          fail_msg ("%s on %s: got %d (%s), expected %d (%s)", row->name, test_access_names[j], r, g_strerror (-r),
                    expect, g_strerror (-expect));
        if (row->mutation && r >= 0 && strcmp (before, after) == 0)
          fail_msg ("%s on %s succeeded but the host did not change", row->name, test_access_names[j]);
        if (r < 0 && strcmp (before, after) != 0)
          fail_msg ("%s on %s failed (%s) but the host changed", row->name, test_access_names[j], g_strerror (-r));
        if (!row->mutation && strcmp (before, after) != 0)
          fail_msg ("%s on %s changed the host", row->name, test_access_names[j]);
        if (r == -EACCES || r == -EROFS || (r == -ENOENT && j == 3))
          {
            bool found = false;
            for (guint k = 0; k < fx->sink.events->len && !found; k++)
              {
                TestEvent *e = fx->sink.events->pdata[k];
                found = e->decision != FB_DECISION_ALLOW && e->err == -r && strcmp (e->why, why) == 0;
              }
            if (!found)
              fail_msg ("%s on %s: no denial event with errno %d and why \"%s\"", row->name, test_access_names[j], -r,
                        why);
          }
      }
}

/* Names that would step out of a directory or past the bounds. */
static void
collect_ops (Fx *fx, GHashTable *seen)
{
  for (guint k = 0; k < fx->sink.events->len; k++)
    {
      TestEvent *e = fx->sink.events->pdata[k];
      g_hash_table_add (seen, g_strdup (e->op));
    }
  fx_clear_events (fx);
}

/* The view logs every operation of fs-event.c's table (so `report`, which
 * files records by the table, covers exactly what is logged): at level all,
 * the table's rows on writable objects, a refused open (an allowed one is
 * its close record), a no-op chown, statfs and listxattr log each at least
 * once. */
static void
test_every_op_logged (void **state)
{
  Fx *fx = *state;
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  start_table (fx, FB_LOG_LEVEL_ALL);
  for (guint i = 0; i < G_N_ELEMENTS (test_access_rows); i++)
    {
      int r;

      make_table_tree (fx);
      r = run_op (fx, test_access_rows[i].op, "write");
      if (r < 0)
        fail_msg ("%s on write: %s", test_access_rows[i].name, g_strerror (-r));
      collect_ops (fx, seen);
    }
  {
    g_autoptr (FbViewNode) f = fx_node (fx, "/t/write/f");
    FbViewSetattr sa = { .valid = FB_VIEW_SET_UID | FB_VIEW_SET_GID };
    struct stat st;
    struct statvfs sv;
    char buf[256];

    assert_errno (fb_view_getattr (fx->view, &fx->caller, f, &st), 0);
    sa.uid = st.st_uid;
    sa.gid = st.st_gid;
    assert_errno (fb_view_setattr (fx->view, &fx->caller, f, NULL, &sa, &st), 0);
    assert_errno (fb_view_statfs (fx->view, &fx->caller, f, &sv), 0);
    assert_true (fb_view_listxattr (fx->view, &fx->caller, f, buf, sizeof buf) >= 0);
    assert_errno (run_op (fx, TEST_ACCESS_OP_OPEN_READ, "deny"), -EACCES);
    collect_ops (fx, seen);
  }
  {
    guint n = 0;

    /* the network proxy's operations are not the view's */
    for (guint i = 0; i < FB_OP_N; i++)
      if (fb_op_table[i].effect != FB_OP_EFFECT_CONNECT && ++n && !g_hash_table_contains (seen, fb_op_table[i].name))
        fail_msg ("\"%s\" is in fs-event.c's table, but no operation logged it", fb_op_table[i].name);
    assert_int_equal (g_hash_table_size (seen), n);
  }
}

/* listxattr does not list trusted.* names: the host's kernel lists them
 * only to a caller with CAP_SYS_ADMIN, and the daemon (root) passed them
 * on to a sandbox that has none.  The size asked first is the size of the
 * list shown. */
static void
test_listxattr_no_trusted (void **state)
{
  Fx *fx = *state;
  g_autofree char *host = NULL;
  g_autoptr (FbViewNode) f = NULL;
  char buf[4096];
  gssize n, need;

  start_table (fx, -1);
  host = fx_host (fx, "host/t/write/f");
  if (setxattr (host, "trusted.secret", "v", 1, 0) < 0 || setxattr (host, "user.shown", "v", 1, 0) < 0)
    {
      printf ("skipped: %s takes no trusted.* and user.* attributes (%s): root on a filesystem that does\n", host,
              g_strerror (errno));
      return;
    }
  /* the host lists both (to root) */
  n = listxattr (host, buf, sizeof buf);
  assert_true (n > 0);
  assert_non_null (memmem (buf, (gsize)n, "trusted.secret", sizeof "trusted.secret"));
  f = fx_node (fx, "/t/write/f");
  need = fb_view_listxattr (fx->view, &fx->caller, f, NULL, 0);
  n = fb_view_listxattr (fx->view, &fx->caller, f, buf, sizeof buf);
  assert_int_equal (n, need);
  assert_non_null (memmem (buf, (gsize)n, "user.shown", sizeof "user.shown"));
  assert_null (memmem (buf, (gsize)n, "trusted.", strlen ("trusted.")));
  /* a buffer one byte short of the list is too small */
  assert_errno (fb_view_listxattr (fx->view, &fx->caller, f, buf, (gsize)n - 1), -ERANGE);
}

/* A lookup that defers (FbViewCaller.deferred, as the FUSE adapter asks)
 * keeps the record of a hidden name the host holds until
 * fb_view_emit_deferred, after the answer, and records nothing for one
 * the host does not hold; without the slot the record is pushed at once,
 * as before. */
static void
test_hidden_record_deferred (void **state)
{
  Fx *fx = *state;
  g_autofree char *git = NULL;
  g_autoptr (FbViewNode) there = NULL;
  g_autoptr (FbViewNode) bare = NULL;
  FbViewDeferred deferred = { 0 };
  FbViewCaller caller;
  FbViewNode *n = NULL;

  start_table (fx, -1);
  git = fx_host (fx, "host/t/write/.git");
  assert_int_equal (g_mkdir_with_parents (git, 0755), 0);
  test_assert_host_readable (git);
  there = fx_node (fx, "/t/write");
  bare = fx_node (fx, "/t/read");
  caller = fx->caller;
  caller.deferred = &deferred;
  fx_clear_events (fx);

  assert_errno (fb_view_lookup (fx->view, &caller, there, ".git", &n, NULL), -ENOENT);
  assert_null (fx_find_event (fx, "lookup", "/t/write/.git"));
  assert_non_null (deferred.path);
  fb_view_emit_deferred (fx->view, &deferred);
  assert_null (deferred.path);
  {
    TestEvent *e = fx_find_event (fx, "lookup", "/t/write/.git");

    assert_non_null (e);
    assert_int_equal (e->decision, FB_DECISION_HIDE);
  }
  /* nothing to push twice */
  fx_clear_events (fx);
  fb_view_emit_deferred (fx->view, &deferred);
  assert_int_equal (fx->sink.events->len, 0);

  /* the host holds no .git here: nothing kept, nothing recorded */
  assert_errno (fb_view_lookup (fx->view, &caller, bare, ".git", &n, NULL), -ENOENT);
  assert_null (deferred.path);
  assert_int_equal (fx->sink.events->len, 0);

  /* without the slot: at once */
  assert_errno (fb_view_lookup (fx->view, &fx->caller, there, ".git", &n, NULL), -ENOENT);
  assert_non_null (fx_find_event (fx, "lookup", "/t/write/.git"));
}

static void
test_names (void **state)
{
  Fx *fx = *state;
  g_autoptr (FbViewNode) zone = NULL;
  FbViewNode *n = NULL;
  char longname[FB_VIEW_NAME_MAX + 2];

  start_table (fx, -1);
  zone = fx_node (fx, "/t/zone");
  memset (longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  assert_errno (fb_view_lookup (fx->view, &fx->caller, zone, "..", &n, NULL), -EINVAL);
  assert_errno (fb_view_lookup (fx->view, &fx->caller, zone, ".", &n, NULL), -EINVAL);
  assert_errno (fb_view_lookup (fx->view, &fx->caller, zone, "", &n, NULL), -EINVAL);
  assert_errno (fb_view_lookup (fx->view, &fx->caller, zone, "../x", &n, NULL), -EINVAL);
  assert_errno (fb_view_lookup (fx->view, &fx->caller, zone, "a/b", &n, NULL), -EINVAL);
  assert_errno (fb_view_lookup (fx->view, &fx->caller, zone, longname, &n, NULL), -ENAMETOOLONG);
  assert_errno (fb_view_mkdir (fx->view, &fx->caller, zone, "..", 0755, NULL, NULL), -EINVAL);
  assert_errno (fb_view_mkdir (fx->view, &fx->caller, zone, longname, 0755, NULL, NULL), -ENAMETOOLONG);
  assert_errno (fb_view_rename (fx->view, &fx->caller, zone, "x", zone, "../x", 0), -EINVAL);
  assert_errno (fb_view_symlink (fx->view, &fx->caller, zone, "ok", "", NULL, NULL), -ENOENT);
  {
    g_autofree char *huge = g_strnfill (FB_VIEW_SYMLINK_MAX + 1, 'x');
    assert_errno (fb_view_symlink (fx->view, &fx->caller, zone, "ok", huge, NULL, NULL), -ENAMETOOLONG);
  }
  /* a lookup below a file */
  {
    g_autoptr (FbViewNode) x = fx_node (fx, "/t/zone/x");
    assert_errno (fb_view_lookup (fx->view, &fx->caller, x, "y", &n, NULL), -ENOTDIR);
  }
  assert_false (host_exists (fx, "host/t/zone/ok"));
  assert_false (host_exists (fx, "host/x"));
}

/* Refusals that hold whatever the policy says: ownership, set-id bits,
 * security and trusted xattrs, devices, whiteouts, opening FIFOs. */
static void
test_privilege_refusals (void **state)
{
  Fx *fx = *state;
  g_autoptr (FbViewNode) fifo = NULL;
  g_autofree char *before = NULL, *after = NULL;
  FbViewSetattr sa = { 0 };
  FbViewFile *file = NULL;
  struct stat st;

  start_table (fx, -1);
  g_autoptr (FbViewNode) zone = fx_node (fx, "/t/zone");
  g_autoptr (FbViewNode) x = fx_node (fx, "/t/zone/x");
  before = tree_sum (fx, "host");

  assert_int_equal (fb_view_getattr (fx->view, &fx->caller, x, &st), 0);
  sa.valid = FB_VIEW_SET_UID;
  sa.uid = st.st_uid + 1;
  assert_errno (fb_view_setattr (fx->view, &fx->caller, x, NULL, &sa, NULL), -EPERM);
  sa.valid = FB_VIEW_SET_GID;
  sa.gid = st.st_gid + 1;
  assert_errno (fb_view_setattr (fx->view, &fx->caller, x, NULL, &sa, NULL), -EPERM);
  sa.valid = FB_VIEW_SET_MODE;
  sa.mode = 04755;
  assert_errno (fb_view_setattr (fx->view, &fx->caller, x, NULL, &sa, NULL), -EPERM);
  sa.mode = 02755;
  assert_errno (fb_view_setattr (fx->view, &fx->caller, x, NULL, &sa, NULL), -EPERM);
  assert_errno (fb_view_setxattr (fx->view, &fx->caller, x, "security.capability", "\1", 1, 0), -EPERM);
  assert_errno (fb_view_setxattr (fx->view, &fx->caller, x, "trusted.x", "1", 1, 0), -EPERM);
  assert_errno (fb_view_removexattr (fx->view, &fx->caller, x, "security.selinux"), -EPERM);
  /* taking capabilities away is allowed (the kernel's kill-priv asks for it) */
  assert_errno (fb_view_removexattr (fx->view, &fx->caller, x, "security.capability"), -ENODATA);
  assert_errno (fb_view_setxattr (fx->view, &fx->caller, x, "system.posix_acl_access", "1", 1, 0), -EOPNOTSUPP);
  assert_errno (fb_view_mknod (fx->view, &fx->caller, zone, "null", S_IFCHR | 0666, makedev (1, 3), NULL, NULL),
                -EPERM);
  assert_errno (fb_view_mknod (fx->view, &fx->caller, zone, "sda", S_IFBLK | 0666, makedev (8, 0), NULL, NULL), -EPERM);
  assert_errno (fb_view_rename (fx->view, &fx->caller, zone, "x", zone, "y", RENAME_WHITEOUT), -EINVAL);
  after = tree_sum (fx, "host");
  assert_string_equal (before, after);

  /* A chown to the owner it has is a no-op that tar and cp -p rely on. */
  sa.valid = FB_VIEW_SET_UID | FB_VIEW_SET_GID;
  sa.uid = st.st_uid;
  sa.gid = st.st_gid;
  assert_errno (fb_view_setattr (fx->view, &fx->caller, x, NULL, &sa, NULL), 0);
  /* set-gid on a directory is allowed (group inheritance) */
  {
    g_autoptr (FbViewNode) dir = NULL;
    assert_errno (fb_view_mkdir (fx->view, &fx->caller, zone, "g", 0755, &dir, NULL), 0);
    sa.valid = FB_VIEW_SET_MODE;
    sa.mode = 02755;
    assert_errno (fb_view_setattr (fx->view, &fx->caller, dir, NULL, &sa, &st), 0);
    assert_true (st.st_mode & S_ISGID);
  }
  /* mkdir and create strip S_ISUID (and S_ISGID on files) silently */
  {
    g_autoptr (FbViewNode) f = NULL;
    assert_errno (fb_view_create (fx->view, &fx->caller, zone, "suid", O_WRONLY | O_CREAT, 06755, &file, &f, &st), 0);
    fb_view_release (fx->view, file);
    assert_false (st.st_mode & (S_ISUID | S_ISGID));
  }

  /* A FIFO (made through the view where writable) is never opened by the
   * view: the daemon would block on it. */
  assert_errno (fb_view_mknod (fx->view, &fx->caller, zone, "fifo", S_IFIFO | 0644, 0, &fifo, &st), 0);
  assert_true (S_ISFIFO (st.st_mode));
  assert_errno (fb_view_open (fx->view, &fx->caller, fifo, O_RDONLY, &file, NULL), -ENXIO);
  assert_errno (fb_view_open (fx->view, &fx->caller, fifo, O_WRONLY, &file, NULL), -ENXIO);
  /* and creating over it does not open it either */
  assert_errno (fb_view_create (fx->view, &fx->caller, zone, "fifo", O_RDONLY | O_CREAT, 0644, &file, NULL, NULL),
                -ENXIO);
}

/* One "close" event per handle with the bytes read and written, the rule's
 * why, and the opener's pid; nothing per read or write. */
static void
test_close_event_bytes (void **state)
{
  Fx *fx = *state;
  g_autoptr (FbViewNode) x = NULL;
  FbViewFile *file = NULL;
  TestEvent *e;
  char buf[64];

  start_table (fx, FB_LOG_LEVEL_OPENS);
  x = fx_node (fx, "/t/zone/x");
  fx_clear_events (fx);
  assert_errno (fb_view_open (fx->view, &fx->caller, x, O_RDWR, &file, NULL), 0);
  assert_int_equal (fb_view_read (fx->view, file, buf, 4, 0), 4);
  assert_int_equal (fb_view_read (fx->view, file, buf, 64, 4), 6);
  assert_int_equal (fb_view_write (fx->view, file, "hello", 5, 10), 5);
  assert_int_equal (fx->sink.events->len, 0);
  fb_view_release (fx->view, file);
  assert_int_equal (fx->sink.events->len, 1);
  e = fx->sink.events->pdata[0];
  assert_string_equal (e->op, "close");
  {
    g_autofree char *vp = fx_vpath (fx, "/t/zone/x");
    assert_string_equal (e->path, vp);
  }
  assert_string_equal (e->access, "readwrite");
  assert_string_equal (e->why, "table");
  assert_int_equal (e->decision, FB_DECISION_ALLOW);
  assert_int_equal (e->bytes_read, 10);
  assert_int_equal (e->bytes_written, 5);
  assert_int_equal (e->pid, getpid ());
  {
    g_autofree char *text = read_host (fx, "host/t/zone/x");
    assert_string_equal (text, "zone data\nhello");
  }

  /* At "mutations", a read-only handle is not logged, a writing one is. */
  fb_view_unref (fx->view);
  fx->view = NULL;
  {
    FbViewOptions options;
    fb_view_options_init (&options);
    options.sink = &fx->sink.sink;
    options.log_level = FB_LOG_LEVEL_MUTATIONS;
    g_clear_pointer (&x, fb_view_node_unref);
    assert_int_equal (fb_view_new (fx->policy, &options, &fx->view), 0);
  }
  x = fx_node (fx, "/t/zone/x");
  fx_clear_events (fx);
  assert_errno (fb_view_open (fx->view, &fx->caller, x, O_RDONLY, &file, NULL), 0);
  fb_view_release (fx->view, file);
  assert_int_equal (fx->sink.events->len, 0);
  assert_errno (fb_view_open (fx->view, &fx->caller, x, O_WRONLY, &file, NULL), 0);
  fb_view_release (fx->view, file);
  assert_int_equal (fx->sink.events->len, 1);
  /* denials are logged at every level, with the rule */
  {
    g_autoptr (FbViewNode) f = fx_node (fx, "/t/deny/f");
    assert_errno (fb_view_open (fx->view, &fx->caller, f, O_RDONLY, &file, NULL), -EACCES);
    e = fx_find_event (fx, "open", "/t/deny/f");
    assert_non_null (e);
    assert_int_equal (e->decision, FB_DECISION_DENY);
    assert_int_equal (e->err, EACCES);
    assert_string_equal (e->why, "deny file");
  }
}

/* Lookups, getattr and readdir are logged only at "all". */
static void
test_levels (void **state)
{
  Fx *fx = *state;
  FbViewFile *dir = NULL;
  struct stat st;

  start_table (fx, FB_LOG_LEVEL_ALL);
  {
    g_autoptr (FbViewNode) x = fx_node (fx, "/t/zone/x");
    g_autoptr (FbViewNode) zone = fx_node (fx, "/t/zone");
    assert_non_null (fx_find_event (fx, "lookup", "/t/zone/x"));
    assert_errno (fb_view_getattr (fx->view, &fx->caller, x, &st), 0);
    assert_non_null (fx_find_event (fx, "getattr", "/t/zone/x"));
    assert_errno (fb_view_opendir (fx->view, &fx->caller, zone, &dir, NULL), 0);
    fb_view_releasedir (fx->view, dir);
    assert_non_null (fx_find_event (fx, "readdir", "/t/zone"));
  }
  fb_view_unref (fx->view);
  fx->view = NULL;
  fx_clear_events (fx);
  {
    FbViewOptions options;
    fb_view_options_init (&options);
    options.sink = &fx->sink.sink;
    assert_int_equal (options.log_level, FB_LOG_LEVEL_OPENS);
    assert_int_equal (fb_view_new (fx->policy, &options, &fx->view), 0);
  }
  {
    g_autoptr (FbViewNode) x = fx_node (fx, "/t/zone/x");
    assert_errno (fb_view_getattr (fx->view, &fx->caller, x, &st), 0);
    assert_int_equal (fx->sink.events->len, 0);
  }
}

/* copy_file_range, fallocate, lseek, fsync and flush go through handles:
 * the view checks each handle's mode and counts the bytes on both. */
static void
test_handle_io (void **state)
{
  Fx *fx = *state;
  g_autoptr (FbViewNode) y = NULL;
  FbViewFile *in = NULL, *out = NULL, *ro = NULL;
  TestEvent *e;
  struct stat st;

  start_table (fx, FB_LOG_LEVEL_OPENS);
  g_autoptr (FbViewNode) x = fx_node (fx, "/t/zone/x");
  g_autoptr (FbViewNode) zone = fx_node (fx, "/t/zone");
  assert_errno (fb_view_open (fx->view, &fx->caller, x, O_RDONLY, &in, NULL), 0);
  assert_errno (fb_view_create (fx->view, &fx->caller, zone, "y", O_RDWR | O_CREAT | O_EXCL, 0644, &out, &y, NULL), 0);
  /* a read-only handle can't be written to, nor be the target of a copy */
  assert_errno (fb_view_write (fx->view, in, "z", 1, 0), -EBADF);
  assert_errno (fb_view_copy_file_range (fx->view, out, 0, in, 0, 4, 0), -EBADF);
  assert_errno (fb_view_copy_file_range (fx->view, in, 0, out, 0, 4, 1), -EINVAL);
  assert_errno (fb_view_fallocate (fx->view, in, 0, 0, 4096), -EBADF);
  assert_errno (fb_view_copy_file_range (fx->view, in, 0, out, 0, 10, 0), 10);
  assert_errno (fb_view_fallocate (fx->view, out, 0, 0, 8192), 0);
  assert_errno (fb_view_file_fstat (fx->view, out, &st), 0);
  assert_int_equal (st.st_size, 8192);
  assert_errno (fb_view_lseek (fx->view, out, 0, SEEK_DATA), 0);
  assert_errno (fb_view_lseek (fx->view, out, 0, 42), -EINVAL);
  assert_errno (fb_view_fsync (fx->view, out, true), 0);
  assert_errno (fb_view_flush (fx->view, out), 0);
  fx_clear_events (fx);
  fb_view_release (fx->view, in);
  fb_view_release (fx->view, out);
  e = fx_find_event (fx, "close", "/t/zone/x");
  assert_non_null (e);
  assert_int_equal (e->bytes_read, 10);
  assert_int_equal (e->bytes_written, 0);
  e = fx_find_event (fx, "close", "/t/zone/y");
  assert_non_null (e);
  assert_int_equal (e->bytes_written, 10);
  {
    g_autofree char *data = read_host (fx, "host/t/zone/y");
    assert_memory_equal (data, "zone data\n", 10);
  }
  /* a read-only path can't even be opened for writing to get a handle */
  {
    g_autoptr (FbViewNode) rf = fx_node (fx, "/t/read/f");
    assert_errno (fb_view_open (fx->view, &fx->caller, rf, O_RDWR, &ro, NULL), -EROFS);
  }
}

/* Creating as the caller: a root daemon makes the caller's files. */
static void
test_act_as_caller (void **state)
{
  Fx *fx = *state;
  g_autofree char *policy = test_access_table_policy (TEST_ACCESS_PROTECTED_NAMES);
  g_autoptr (FbViewNode) zone = NULL;
  g_autoptr (FbViewNode) node = NULL;
  g_autofree char *host = NULL;
  FbViewFile *file = NULL;
  struct stat st;

  if (geteuid () != 0)
    {
      fprintf (stderr, "skipped: acting as other callers needs root\n");
      skip ();
    }
  make_table_tree (fx);
  host = fx_host (fx, "host/t/zone");
  assert_int_equal (chmod (host, 0777), 0);
  assert_int_equal (chmod (fx->tmp, 0755), 0);
  fx_start (fx, policy, NULL, -1);
  zone = fx_node (fx, "/t/zone");
  fx->caller.uid = 4242;
  fx->caller.gid = 4243;
  assert_errno (fb_view_create (fx->view, &fx->caller, zone, "mine", O_WRONLY | O_CREAT, 0644, &file, &node, &st), 0);
  fb_view_release (fx->view, file);
  assert_int_equal (st.st_uid, 4242);
  assert_int_equal (st.st_gid, 4243);
  g_clear_pointer (&node, fb_view_node_unref);
  assert_errno (fb_view_mkdir (fx->view, &fx->caller, zone, "d", 0755, &node, &st), 0);
  assert_int_equal (st.st_uid, 4242);
  /* the thread is root again afterwards */
  {
    g_autofree char *p = fx_host (fx, "host/t/zone/rootfile");
    int fd = open (p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    assert_true (fd >= 0);
    assert_int_equal (fstat (fd, &st), 0);
    assert_int_equal (st.st_uid, 0);
    close (fd);
  }
}

/* The event names the program the caller runs *now*: after an exec, the
 * new program's name, not the one from before (a cache keyed by pid got
 * this wrong and logged sandboxed commands as their launcher). */
/* Wait (bounded: the bound only stops a hung test) until the process whose
 * /proc/PID/comm is COMM_PATH has a name starting with PREFIX. */
static void
wait_comm (const char *comm_path, const char *prefix)
{
  for (int i = 0; i < 500; i++)
    {
      g_autofree char *c = NULL;
      if (g_file_get_contents (comm_path, &c, NULL, NULL) && g_str_has_prefix (c, prefix))
        return;
      g_usleep (10000);
    }
}

static void
test_comm_after_exec (void **state)
{
  Fx *fx = *state;
  int go[2];
  pid_t child;
  struct stat st;
  TestEvent *e;

  start_table (fx, FB_LOG_LEVEL_ALL);
  assert_int_equal (pipe2 (go, O_CLOEXEC), 0);
  child = fork ();
  assert_true (child >= 0);
  if (child == 0)
    {
      char c;
      prctl (PR_SET_NAME, "before-exec");
      if (read (go[0], &c, 1) != 1)
        _exit (1);
      execl ("/bin/sleep", "sleep", "30", (char *)NULL);
      _exit (127);
    }
  close (go[0]);

  g_autoptr (FbViewNode) x = fx_node (fx, "/t/zone/x");
  FbViewCaller caller = fx->caller;
  caller.pid = child;
  caller.comm = NULL;

  /* before the exec: wait until the child has renamed itself */
  g_autofree char *comm_path = g_strdup_printf ("/proc/%d/comm", (int)child);
  wait_comm (comm_path, "before-exec");
  fx_clear_events (fx);
  assert_errno (fb_view_getattr (fx->view, &caller, x, &st), 0);
  e = fx_find_event (fx, "getattr", "/t/zone/x");
  assert_non_null (e);
  assert_string_equal (e->comm, "before-exec");

  /* after it */
  assert_int_equal (write (go[1], "g", 1), 1);
  close (go[1]);
  wait_comm (comm_path, "sleep");
  fx_clear_events (fx);
  assert_errno (fb_view_getattr (fx->view, &caller, x, &st), 0);
  e = fx_find_event (fx, "getattr", "/t/zone/x");
  assert_non_null (e);
  kill (child, SIGKILL);
  waitpid (child, NULL, 0);
  assert_string_equal (e->comm, "sleep");
}

/* An access log the view hides (FbViewOptions.hidden_paths) in a directory
 * the policy shows: the live file and every file its rotation makes later,
 * new inodes the view never saw, are hidden by name there; a sandbox can
 * neither read the new live log nor plant a rotated file beside it.  Other
 * names of that directory stay visible. */
static void
test_rotated_log_hidden (void **state)
{
  Fx *fx = *state;
  static const char pol[] = "{ \"version\": 1,\n"
                            "  \"rules\": [\n"
                            "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
                            "  { \"path\": \"@H@/logs\", \"access\": \"write\", \"why\": \"logs\" } ] }\n";
  g_autofree char *live = NULL;
  g_autofree char *rotated = NULL;
  g_autofree char *other = NULL;
  const char *hidden[3] = { NULL, NULL, NULL };
  static const char *const shown[] = { "other.jsonl", "a.jsonl.bak", "a.x-1.jsonl", "ab.jsonl" };

  write_host (fx, "host/logs/a.jsonl", "{\"seq\":1}\n");
  for (guint i = 0; i < G_N_ELEMENTS (shown); i++)
    {
      g_autofree char *rel = g_strconcat ("host/logs/", shown[i], NULL);
      write_host (fx, rel, "x\n");
    }
  write_host (fx, "host/logs/b.log", "{\"seq\":1}\n");
  live = g_build_filename (fx->vroot, "logs", "a.jsonl", NULL);
  other = g_build_filename (fx->vroot, "logs", "b.log", NULL);
  hidden[0] = live;
  hidden[1] = other; /* a log whose name is not STEM.jsonl rotates as NAME.FIRST-LAST.jsonl */
  fx->hidden_paths = hidden;
  fx_start (fx, pol, NULL, -1);
  {
    g_autoptr (FbViewNode) logs = fx_node (fx, "/logs");
    FbViewNode *node = NULL;

    assert_errno (fb_view_lookup (fx->view, &fx->caller, logs, "a.jsonl", &node, NULL), -ENOENT);
    /* the writer rotates: the live file renamed, a new one made */
    rotated = g_build_filename (fx->vroot, "logs", "a.000000000001-000000000001.jsonl", NULL);
    assert_int_equal (rename (live, rotated), 0);
    write_host (fx, "host/logs/a.jsonl", "{\"seq\":2}\n");
    test_assert_host_readable (live);
    test_assert_host_readable (rotated);
    assert_errno (fb_view_lookup (fx->view, &fx->caller, logs, "a.jsonl", &node, NULL), -ENOENT);
    assert_errno (fb_view_lookup (fx->view, &fx->caller, logs, "a.000000000001-000000000001.jsonl", &node, NULL),
                  -ENOENT);
    /* a rotated file planted from inside: refused as a hidden name */
    assert_errno (fb_view_create (fx->view, &fx->caller, logs, "a.000000000009-000000000009.2.jsonl",
                                  O_WRONLY | O_CREAT | O_EXCL, 0644, NULL, NULL, NULL),
                  -EACCES);
    assert_false (host_exists (fx, "host/logs/a.000000000009-000000000009.2.jsonl"));
    {
      g_autofree char *b_rotated = g_build_filename (fx->vroot, "logs", "b.log.000000000001-000000000001.jsonl", NULL);

      assert_int_equal (rename (other, b_rotated), 0);
      write_host (fx, "host/logs/b.log", "{\"seq\":2}\n");
      test_assert_host_readable (b_rotated);
      assert_errno (fb_view_lookup (fx->view, &fx->caller, logs, "b.log", &node, NULL), -ENOENT);
      assert_errno (fb_view_lookup (fx->view, &fx->caller, logs, "b.log.000000000001-000000000001.jsonl", &node, NULL),
                    -ENOENT);
    }
    for (guint i = 0; i < G_N_ELEMENTS (shown); i++)
      {
        assert_errno (fb_view_lookup (fx->view, &fx->caller, logs, shown[i], &node, NULL), 0);
        g_clear_pointer (&node, fb_view_node_unref);
      }
  }
}

TEST_DEFINE_MAIN (NULL, NULL, FX_TEST (test_table), FX_TEST (test_every_op_logged), FX_TEST (test_listxattr_no_trusted),
                  FX_TEST (test_hidden_record_deferred), FX_TEST (test_names), FX_TEST (test_privilege_refusals),
                  FX_TEST (test_close_event_bytes), FX_TEST (test_levels), FX_TEST (test_handle_io),
                  FX_TEST (test_act_as_caller), FX_TEST (test_comm_after_exec), FX_TEST (test_rotated_log_hidden))
