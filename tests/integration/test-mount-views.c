/* fusebox — two FUSE mounts over two views of the same host directory, in
 * this process, with the default (long) cache timeouts: a change made
 * through one is seen through the other at once -- a new size and contents
 * after a write, a new name, a removed name, a truncation -- as the remote
 * API's in-process view and a sandbox's mount need; a directory one view
 * moves is refused through a descriptor the other holds.  Each mount is served
 * by its own FbFuse thread; the test's own system calls go through the
 * kernel like a sandboxed process's. */
#include "tests/lib/test-mount.h"

#include "fs/fs.h"

typedef struct
{
  TestDir *dir; /* T */
  char *host, *mnt_a, *mnt_b;
  FbPolicy *policy;
  FbView *view_a, *view_b;
  FbFuse *fuse_a, *fuse_b;
  bool passed;
} VFx;

static void
start_one (VFx *fx, FbView **ret_view, FbFuse **ret_fuse, const char *mnt)
{
  FbViewOptions vo;
  FbFuseOptions fo;

  fb_view_options_init (&vo);
  vo.create_private_dirs = false;
  assert_int_equal (fb_view_new (fx->policy, &vo, ret_view), 0);
  fb_fuse_options_init (&fo);
  /* the point: long caches, and only the views' own reports to end them
   * (fixed timeouts: no host watcher, whose events of this process would
   * be skipped anyway) */
  fo.entry_timeout = fo.attr_timeout = 60.0;
  assert_int_equal (fb_fuse_new (*ret_view, &fo, ret_fuse), 0);
  assert_int_equal (fb_fuse_mount (*ret_fuse, mnt), 0);
  assert_int_equal (fb_fuse_start (*ret_fuse, NULL, NULL), 0);
}

static int
vfx_setup (void **state)
{
  VFx *fx = g_new0 (VFx, 1);
  g_autoptr (GError) error = NULL;
  g_autofree char *text = NULL;

  mfx_require ();
  fx->dir = test_dir_new (test_tmpdir ("fusebox-views"));
  fx->host = test_dir_mkdir (fx->dir, "h", 0755);
  fx->mnt_a = test_dir_mkdir (fx->dir, "a", 0755);
  fx->mnt_b = test_dir_mkdir (fx->dir, "b", 0755);
  text = g_strdup_printf ("{ \"version\": 1, \"rules\": [\n"
                          "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system\" },\n"
                          "  { \"path\": \"%s\", \"access\": \"write\", \"why\": \"the workspace\" } ] }\n",
                          fx->host);
  fx->policy = fb_policy_load_data (text, -1, "views.json", NULL, &error);
  if (fx->policy == NULL)
    fail_msg ("policy: %s", error->message);
  *state = fx;
  start_one (fx, &fx->view_a, &fx->fuse_a, fx->mnt_a);
  start_one (fx, &fx->view_b, &fx->fuse_b, fx->mnt_b);
  return 0;
}

static void
stop_one (FbView *view, FbFuse *fuse)
{
  if (fuse != NULL)
    {
      fb_fuse_stop (fuse);
      fb_fuse_join (fuse);
      fb_fuse_free (fuse);
    }
  fb_view_unref (view);
}

static int
vfx_teardown (void **state)
{
  VFx *fx = *state;

  stop_one (fx->view_a, fx->fuse_a);
  stop_one (fx->view_b, fx->fuse_b);
  fb_policy_unref (fx->policy);
  if (!fx->passed)
    fprintf (stderr, "reproduce: FB_TEST_ONLY=<test> %s (the host tree is kept in %s)\n",
             g_get_prgname () != NULL ? g_get_prgname () : "test-mount-views", fx->dir->path);
  test_dir_free (fx->dir, fx->passed);
  g_free (fx);
  return 0;
}

/* The host's REL through mount A, or B (freed with the fixture). */
static const char *
in_a (VFx *fx, const char *rel)
{
  return test_dir_keep (fx->dir, g_strconcat (fx->mnt_a, fx->host, rel, NULL));
}

static const char *
in_b (VFx *fx, const char *rel)
{
  return test_dir_keep (fx->dir, g_strconcat (fx->mnt_b, fx->host, rel, NULL));
}

static char *
slurp (const char *path)
{
  g_autoptr (GError) error = NULL;
  char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, &error))
    fail_msg ("read %s: %s", path, error->message);
  return text;
}

static void
put (const char *path, const char *text)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true (fd >= 0);
  assert_int_equal (write (fd, text, strlen (text)), (ssize_t)strlen (text));
  assert_int_equal (close (fd), 0);
}

/* Write through A, then stat and read through B, whose kernel had cached
 * the old size, contents and names. */
static void
test_write_seen (void **state)
{
  VFx *fx = *state;
  const char *a = in_a (fx, "/f");
  const char *b = in_b (fx, "/f");
  g_autofree char *text = NULL;
  struct stat st;

  put (a, "old\n");
  /* B caches the old state: contents, the name, then the attributes (a
   * read marks the atime stale, so the stat comes last) */
  text = slurp (b);
  assert_string_equal (text, "old\n");
  g_clear_pointer (&text, g_free);
  assert_int_equal (stat (b, &st), 0);
  assert_int_equal (st.st_size, 4);

  put (a, "the new contents\n");
  assert_int_equal (stat (b, &st), 0);
  assert_int_equal (st.st_size, 17);
  text = slurp (b);
  assert_string_equal (text, "the new contents\n");
  g_clear_pointer (&text, g_free);

  /* a truncation, and the other way round */
  assert_int_equal (stat (a, &st), 0);
  assert_int_equal (st.st_size, 17);
  assert_int_equal (truncate (b, 3), 0);
  assert_int_equal (stat (a, &st), 0);
  assert_int_equal (st.st_size, 3);
  text = slurp (a);
  assert_string_equal (text, "the");
  fx->passed = true;
}

/* Names: made, removed and renamed through A show through B at once, also
 * where B had cached the absence (a negative entry) or the listing. */
static void
test_names_seen (void **state)
{
  VFx *fx = *state;
  struct stat st;
  DIR *dp;
  bool listed = false;

  assert_int_equal (stat (in_b (fx, "/new"), &st), -1);
  dp = opendir (in_b (fx, ""));
  assert_non_null (dp);
  while (readdir (dp) != NULL)
    ;
  closedir (dp);

  put (in_a (fx, "/new"), "n\n");
  assert_int_equal (stat (in_b (fx, "/new"), &st), 0);
  dp = opendir (in_b (fx, ""));
  assert_non_null (dp);
  for (struct dirent *de; (de = readdir (dp)) != NULL;)
    if (strcmp (de->d_name, "new") == 0)
      listed = true;
  closedir (dp);
  assert_true (listed);

  assert_int_equal (rename (in_a (fx, "/new"), in_a (fx, "/moved")), 0);
  assert_errno_is (stat (in_b (fx, "/new"), &st), ENOENT);
  assert_int_equal (stat (in_b (fx, "/moved"), &st), 0);
  assert_int_equal (unlink (in_a (fx, "/moved")), 0);
  assert_errno_is (stat (in_b (fx, "/moved"), &st), ENOENT);
  fx->passed = true;
}

/* A hard link's other name, in the same mount, shows the new size and
 * link count at once. */
static void
test_hard_link_seen (void **state)
{
  VFx *fx = *state;
  const char *one = in_a (fx, "/one");
  const char *two = in_a (fx, "/two");
  struct stat st;

  put (one, "1\n");
  assert_int_equal (stat (one, &st), 0);
  assert_int_equal (st.st_nlink, 1);
  assert_int_equal (link (one, two), 0);
  assert_int_equal (stat (one, &st), 0);
  assert_int_equal (st.st_nlink, 2);
  put (two, "longer now\n");
  assert_int_equal (stat (one, &st), 0);
  assert_int_equal (st.st_size, 11);
  fx->passed = true;
}

static bool
opens_at (int dir_fd, const char *name, int *ret_errno)
{
  int fd = openat (dir_fd, name, O_RDONLY | O_CLOEXEC);

  *ret_errno = fd < 0 ? errno : 0;
  if (fd >= 0)
    close (fd);
  return fd >= 0;
}

/* A directory B holds open (as a working directory would) that A renames:
 * B's nodes still stand for the old path, where the policy may decide
 * otherwise than where it went, so what B reaches through the held
 * descriptor is refused (EACCES, within 1 s: the check is made by B's
 * notifier thread), and the new path works through B at once. */
static void
test_held_dir_moved_by_other_view (void **state)
{
  VFx *fx = *state;
  struct stat st;
  int fd, err = 0;

  assert_int_equal (mkdir (in_a (fx, "/dir"), 0755), 0);
  put (in_a (fx, "/dir/f"), "f\n");
  fd = open (in_b (fx, "/dir"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (fd >= 0);
  assert_true (opens_at (fd, "f", &err));

  assert_int_equal (rename (in_a (fx, "/dir"), in_a (fx, "/dir2")), 0);
  if (!TEST_WAIT_FOR (!opens_at (fd, "f", &err) && err == EACCES, 1000))
    fail_msg ("f under the directory A moved still opens through B's held descriptor (%s)",
              err != 0 ? g_strerror (err) : "it opened");
  close (fd);
  assert_int_equal (stat (in_b (fx, "/dir2/f"), &st), 0);
  assert_errno_is (stat (in_b (fx, "/dir"), &st), ENOENT);
  fx->passed = true;
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test_setup_teardown (test_write_seen, vfx_setup, vfx_teardown),
                  cmocka_unit_test_setup_teardown (test_held_dir_moved_by_other_view, vfx_setup, vfx_teardown),
                  cmocka_unit_test_setup_teardown (test_names_seen, vfx_setup, vfx_teardown),
                  cmocka_unit_test_setup_teardown (test_hard_link_seen, vfx_setup, vfx_teardown))
