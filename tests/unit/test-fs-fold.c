/* fusebox — the view's questions to a host that may fold names
 * (fs/fs-view-fold.c), asked of real directories through their
 * descriptors: which filesystems fold, the probe that settles "maybe", and
 * whether a directory lists a name under exactly that spelling.  The views
 * over a folding host are tested end to end in test-security-fold. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "fs/fs-private.h"
#include "tests/lib/test-util.h"

typedef struct
{
  char *dir;
  int fd;
} Fx;

static int
setup (void **state)
{
  Fx *fx = g_new0 (Fx, 1);

  fx->dir = g_dir_make_tmp ("fusebox-fold-XXXXXX", NULL);
  assert_non_null (fx->dir);
  fx->fd = open (fx->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true (fx->fd >= 0);
  *state = fx;
  return 0;
}

static int
teardown (void **state)
{
  Fx *fx = *state;
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", fx->dir);

  close (fx->fd);
  if (system (cmd) != 0)
    fprintf (stderr, "could not remove %s\n", fx->dir);
  g_free (fx->dir);
  g_free (fx);
  return 0;
}

static void
touch (Fx *fx, const char *name)
{
  g_autofree char *p = g_build_filename (fx->dir, name, NULL);
  assert_true (g_file_set_contents (p, "x", 1, NULL));
}

/* The temporary directory's filesystem: ext4 and tmpfs without casefold
 * (as in CI) say no, from the kernel's features or the directory's flags;
 * a filesystem this table does not know may fold. */
static void
test_detect_by_type (void **state)
{
  Fx *fx = *state;
  struct statfs sfs;
  const char *type = NULL;
  FbViewFold f;

  assert_int_equal (fstatfs (fx->fd, &sfs), 0);
  f = fb_view_fold_detect (fx->fd, &type);
  assert_non_null (type);
  switch ((unsigned int)sfs.f_type)
    {
      case 0xef53:     /* ext4 */
      case 0x01021994: /* tmpfs */
      case 0x9123683e: /* btrfs */
        assert_int_equal (f, FB_VIEW_FOLD_NO);
        break;
      case 0x65735546: /* fuse */
      case 0x794c7630: /* overlay */
        assert_int_equal (f, FB_VIEW_FOLD_MAYBE);
        break;
      default:
        fprintf (stderr, "(the temporary directory is on %s, %#lx: %d)\n", type, (unsigned long)sfs.f_type, f);
        break;
    }
  /* /dev/shm is a tmpfs almost everywhere: its flags are read (no casefold
   * there: it is mounted without it) */
  {
    int shm = open ("/dev/shm", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (shm >= 0 && fstatfs (shm, &sfs) == 0 && sfs.f_type == 0x01021994)
      {
        assert_int_equal (fb_view_fold_detect (shm, &type), FB_VIEW_FOLD_NO);
        assert_string_equal (type, "tmpfs");
      }
    if (shm >= 0)
      close (shm);
  }
}

/* Does this kernel say, in sysfs, that it can't fold names on TYPE (a
 * features directory without "casefold")? */
static bool
sysfs_says_no_casefold (const char *type)
{
  g_autofree char *dir = g_strdup_printf ("/sys/fs/%s/features", type);
  g_autofree char *file = g_strdup_printf ("%s/casefold", dir);

  return g_file_test (dir, G_FILE_TEST_IS_DIR) && !g_file_test (file, G_FILE_TEST_EXISTS);
}

/* On ext4 and tmpfs, a kernel built without casefold has no directory
 * that folds, and the view does not read each directory's flags to learn
 * it: so a directory it can't open for reading (mode 0311, asked by a
 * user who does not own it) is still known not to fold.  Where the kernel
 * can fold (or sysfs does not say), that directory's flags can't be read
 * and it may fold. */
static void
test_detect_kernel_without_casefold (void **state)
{
  Fx *fx = *state;
  g_autofree char *path = g_build_filename (fx->dir, "search-only", NULL);
  struct statfs sfs;
  const char *type = NULL;
  bool no_casefold;
  int fd, status;
  pid_t pid;

  assert_int_equal (g_mkdir (path, 0311), 0);
  assert_int_equal (chmod (path, 0311), 0);
  fd = open (path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true (fd >= 0);
  assert_int_equal (fstatfs (fd, &sfs), 0);
  if (sfs.f_type != 0xef53 && sfs.f_type != 0x01021994)
    {
      fprintf (stderr, "(the temporary directory is on %#lx, neither ext4 nor tmpfs: not asked)\n",
               (unsigned long)sfs.f_type);
      close (fd);
      return;
    }
  no_casefold = sysfs_says_no_casefold (sfs.f_type == 0xef53 ? "ext4" : "tmpfs");
  fprintf (stderr, "(%s: the kernel %s)\n", sfs.f_type == 0xef53 ? "ext4" : "tmpfs",
           no_casefold ? "can't fold names there" : "may fold names there");
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0)
    {
      int readable;

      /* root reads any directory: become a user that does not own it */
      if (geteuid () == 0 &&
          (setgroups (0, NULL) < 0 || setresgid (65534, 65534, 65534) < 0 || setresuid (65534, 65534, 65534) < 0))
        _exit (10);
      readable = openat (fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (readable >= 0)
        _exit (11); /* the directory is readable after all: nothing asked */
      _exit (fb_view_fold_detect (fd, &type) == (no_casefold ? FB_VIEW_FOLD_NO : FB_VIEW_FOLD_MAYBE) ? 0 : 12);
    }
  assert_int_equal (waitpid (pid, &status, 0), pid);
  close (fd);
  assert_true (WIFEXITED (status));
  switch (WEXITSTATUS (status))
    {
      case 0:
        break;
      case 10:
        fail_msg ("could not become user 65534 to be refused the directory");
      case 11:
        fail_msg ("%s (mode 0311) could be opened for reading: nothing was asked", path);
      default:
        fail_msg ("%s: the view did not say %s", path, no_casefold ? "no" : "maybe");
    }
}

/* On a directory that does not fold, the probe says so for every kind of
 * name it can try: the other spelling reaches nothing, or an entry listed
 * under it (two hard links spelt alike are two entries: not a folding
 * host).  On a server's filesystem (FUSE, NFS, SMB) an absence proves
 * nothing: the kernel may remember the other spelling's absence from
 * before the server made this one. */
static void
test_probe (void **state)
{
  Fx *fx = *state;
  g_autofree char *a = g_build_filename (fx->dir, "Linked", NULL);
  g_autofree char *b = g_build_filename (fx->dir, "lINKED", NULL);
  g_autofree char *d = g_build_filename (fx->dir, "Dir", NULL);
  g_autofree char *d2 = g_build_filename (fx->dir, "dIR", NULL);

  touch (fx, "Name.txt");
  touch (fx, "123");
  assert_int_equal (fb_view_fold_probe (fx->fd, "Name.txt", true), FB_VIEW_FOLD_NO);
  assert_int_equal (fb_view_fold_probe (fx->fd, "Name.txt", false), FB_VIEW_FOLD_MAYBE);
  /* nothing to try in another case */
  assert_int_equal (fb_view_fold_probe (fx->fd, "123", true), FB_VIEW_FOLD_MAYBE);
  /* a name that is not there tells nothing */
  assert_int_equal (fb_view_fold_probe (fx->fd, "absent", true), FB_VIEW_FOLD_MAYBE);
  /* "Linked" and "lINKED", one file with two links, both listed */
  touch (fx, "Linked");
  assert_int_equal (link (a, b), 0);
  assert_int_equal (fb_view_fold_probe (fx->fd, "Linked", true), FB_VIEW_FOLD_NO);
  assert_int_equal (fb_view_fold_probe (fx->fd, "Linked", false), FB_VIEW_FOLD_NO);
  /* two directories, one per spelling */
  assert_int_equal (g_mkdir (d, 0755), 0);
  assert_int_equal (g_mkdir (d2, 0755), 0);
  assert_int_equal (fb_view_fold_probe (fx->fd, "Dir", false), FB_VIEW_FOLD_NO);
}

/* A directory node's kept names (view_dir_lists): a name the directory
 * lists under exactly that spelling, read once and kept while the
 * directory does not change; a name made since is found (made within the
 * clock tick of the reading, which leaves the directory's times as they
 * were, at the latest once the directory may be read again: 100 ms);
 * another spelling is not. */
static void
test_kept_spellings (void **state)
{
  Fx *fx = *state;
  /* a node of a view's slabs (node_view() finds the view by them); only
   * the count of kept names is used */
  g_autofree FbView *view = g_new0 (FbView, 1);
  FbViewNode *dir;
  NodeExtra *x;

  node_slabs_init (&view->slabs);
  dir = node_slabs_alloc (&view->slabs, sizeof (FbViewNode));
  touch (fx, "Alpha");
  assert_int_equal (view_dir_lists (dir, fx->fd, "Alpha"), 1);
  assert_int_equal (view_dir_lists (dir, fx->fd, "alpha"), 0);
  x = node_extra_peek (dir);
  assert_non_null (x);
  assert_non_null (x->dir);
  assert_non_null (x->dir->spellings);
  for (int i = 0; i < 50; i++)
    {
      g_autofree char *name = g_strdup_printf ("Made%d", i);
      g_autofree char *lower = g_ascii_strdown (name, -1);

      touch (fx, name);
      if (view_dir_lists (dir, fx->fd, name) != 1)
        {
          g_usleep (150 * 1000);
          assert_int_equal (view_dir_lists (dir, fx->fd, name), 1);
        }
      assert_int_equal (view_dir_lists (dir, fx->fd, lower), 0);
      assert_int_equal (view_dir_lists (dir, fx->fd, "Alpha"), 1);
    }
  assert_int_equal (g_atomic_int_get (&view->spellings_kept), (gint)g_hash_table_size (x->dir->spellings));
  g_hash_table_destroy (x->dir->spellings);
  g_free (x->dir);
  g_mutex_clear (&x->lock);
  g_free (x);
  node_slabs_free (dir);
  node_slabs_clear (&view->slabs);
}

static void
test_listed (void **state)
{
  Fx *fx = *state;

  touch (fx, "Secret.TXT");
  touch (fx, "cafe\xcc\x81");
  assert_int_equal (fb_view_fold_listed (fx->fd, "Secret.TXT"), 1);
  assert_int_equal (fb_view_fold_listed (fx->fd, "secret.txt"), 0);
  assert_int_equal (fb_view_fold_listed (fx->fd, "Secret.TXT."), 0);
  assert_int_equal (fb_view_fold_listed (fx->fd, "cafe\xcc\x81"), 1);
  assert_int_equal (fb_view_fold_listed (fx->fd, "caf\xc3\xa9"), 0);
  /* a directory bigger than one read of entries */
  for (int i = 0; i < 2000; i++)
    {
      g_autofree char *n = g_strdup_printf ("entry-with-a-long-name-%04d", i);
      touch (fx, n);
    }
  assert_int_equal (fb_view_fold_listed (fx->fd, "entry-with-a-long-name-1999"), 1);
  assert_int_equal (fb_view_fold_listed (fx->fd, "ENTRY-WITH-A-LONG-NAME-1999"), 0);
  assert_int_equal (fb_view_fold_listed (fx->fd, "Secret.TXT"), 1);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test_setup_teardown (test_detect_by_type, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_detect_kernel_without_casefold, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_probe, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_kept_spellings, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_listed, setup, teardown))
