/* Adversarial tests: a listing's offsets tell nothing of hidden names.
 *
 * Through `fusebox mount`, ws/with and ws/without hold the same 300 names,
 * made in the same order, and ws/with also holds `secret` (made among
 * them, hidden by a rule; first proven to exist on the host).  The host's
 * getdents64 offsets (ext4's name hashes, tmpfs's creation counters) of the
 * visible entries differ between the two, because the hidden entry sits
 * between them; the view passed them through, so a sandbox could rebuild
 * the visible names in a scratch directory, compare the offsets and learn
 * that a hidden name is there (and, trying names, which).  Now the (name,
 * d_off) sequences a sandbox reads from ws/with, ws/without and a scratch
 * directory it fills with the visible names itself are identical, read a
 * page or a few entries at a time.
 *
 * And the view's own offsets still do what offsets must, over ws/big
 * (10,000 visible names, 100 hidden): one pass gives every visible name
 * once; seekdir to any telldir position gives the entry that followed it,
 * in shuffled order, from the kernel's cached listing and, in ws/big2
 * (the same names, never listed), from the daemon, which finds each
 * position itself; rewinddir starts over; `ls -f`, `find` and Python's
 * os.scandir list the same names.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include "tests/lib/test-mount.h"

#include <dirent.h>
#include <sys/syscall.h>

static const char policy_text[] =
  "{ \"version\": 1,\n"
  "  \"rules\": [\n"
  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" },\n"
  "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"the workspace\" },\n"
  "  { \"glob\": \"@H@/ws/*/secret\", \"access\": \"hide\", \"why\": \"a hidden stand-in\" },\n"
  "  { \"glob\": \"@H@/ws/*/hidden-*\", \"access\": \"hide\", \"why\": \"hidden entries\" } ] }\n";

struct dirent64_raw
{
  guint64 d_ino;
  gint64 d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

/* "name d_off" lines of PATH's entries, read BUFSIZE bytes at a time. */
static char *
dirents_of (const char *path, gsize bufsize)
{
  g_autofree char *buf = g_malloc (bufsize);
  GString *out = g_string_new (NULL);
  int fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0)
    fail_msg ("open %s: %s", path, g_strerror (errno));
  for (;;)
    {
      long n = syscall (SYS_getdents64, fd, buf, bufsize);
      if (n < 0)
        fail_msg ("getdents64 %s: %s", path, g_strerror (errno));
      if (n == 0)
        break;
      for (long pos = 0; pos < n;)
        {
          struct dirent64_raw *de = (struct dirent64_raw *)(buf + pos);
          g_string_append_printf (out, "%s %lld\n", de->d_name, (long long)de->d_off);
          pos += de->d_reclen;
        }
    }
  close (fd);
  return g_string_free (out, FALSE);
}

static void
make_names (MFx *fx, const char *dir, bool with_secret)
{
  for (int i = 0; i < 300; i++)
    {
      g_autofree char *rel = g_strdup_printf ("%s/n%04d", dir, i);
      mfx_write (fx, rel, "");
      if (with_secret && i == 150)
        {
          g_autofree char *secret = g_strdup_printf ("%s/secret", dir);
          mfx_write (fx, secret, "HIDDEN\n");
          mfx_assert_host_readable (fx, secret);
        }
    }
}

MFX_CASE (test_hidden_name_leaves_no_offset)
{
  const char *m_scratch = mfx_in_mount (fx, "/ws/scratch");
  g_autofree char *host_with = NULL, *host_without = NULL;

  make_names (fx, "/ws/with", true);
  make_names (fx, "/ws/without", false);
  /* the oracle the host offers, for the record (not every filesystem) */
  host_with = dirents_of (mfx_on_host (fx, "/ws/with"), 32768);
  host_without = dirents_of (mfx_on_host (fx, "/ws/without"), 32768);
  if (strcmp (host_with, host_without) == 0)
    fprintf (stderr, "note: this host's offsets do not tell the hidden entry; the view's must not either\n");
  mfx_mount (fx, policy_text, NULL);

  /* the scratch directory a sandbox fills with the names it sees */
  assert_int_equal (mkdir (m_scratch, 0755), 0);
  for (int i = 0; i < 300; i++)
    {
      g_autofree char *p = g_strdup_printf ("%s/n%04d", m_scratch, i);
      int fd = open (p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      assert_true (fd >= 0);
      close (fd);
    }
  for (gsize bufsize = 256; bufsize <= 65536; bufsize *= 16)
    {
      g_autofree char *with = dirents_of (mfx_in_mount (fx, "/ws/with"), bufsize);
      g_autofree char *without = dirents_of (mfx_in_mount (fx, "/ws/without"), bufsize);
      g_autofree char *scratch = dirents_of (m_scratch, bufsize);
      if (strstr (with, "secret ") != NULL)
        fail_msg ("the hidden name is listed:\n%s", with);
      if (strcmp (with, without) != 0 || strcmp (with, scratch) != 0)
        fail_msg ("a %zu-byte getdents64: the directory holding a hidden name lists other (name, d_off) pairs than "
                  "the one without and the scratch copy:\n--- with\n%s--- without\n%s--- scratch\n%s",
                  bufsize, with, without, scratch);
    }
}

/* Shuffle A (of N) with a fixed seed: the same order every run. */
static void
shuffle (guint *a, guint n)
{
  g_autoptr (GRand) rand = g_rand_new_with_seed (42);

  for (guint i = n; i > 1; i--)
    {
      guint j = (guint)g_rand_int_range (rand, 0, (gint32)i);
      guint t = a[i - 1];
      a[i - 1] = a[j];
      a[j] = t;
    }
}

/* A seekdir to the position telldir gave before entry I leads to entry I,
 * for COUNT of them; then rewinddir starts over. */
static void
check_seeks (DIR *d, GPtrArray *names, const long *pos, guint count, const char *when)
{
  g_autofree guint *order = g_new (guint, names->len);

  for (guint i = 0; i < names->len; i++)
    order[i] = i;
  shuffle (order, names->len);
  for (guint k = 0; k < MIN (names->len, count); k++)
    {
      guint i = order[k];
      struct dirent *e;
      seekdir (d, pos[i]);
      errno = 0;
      e = readdir (d);
      if (e == NULL || strcmp (e->d_name, names->pdata[i]) != 0)
        fail_msg ("%s: seekdir to the position before entry %u (%s) read %s", when, i, (char *)names->pdata[i],
                  e != NULL ? e->d_name : "nothing");
    }
  rewinddir (d);
  {
    struct dirent *e = readdir (d);
    if (e == NULL || strcmp (e->d_name, names->pdata[0]) != 0)
      fail_msg ("%s: rewinddir then readdir read %s, not %s", when, e != NULL ? e->d_name : "nothing",
                (char *)names->pdata[0]);
  }
}

/* The names COMMAND (argv) prints, one a line, sorted. */
static char *
sorted_output (const char *const *argv)
{
  g_autofree char *out = NULL, *err = NULL;
  g_auto (GStrv) lines = NULL;
  g_autoptr (GPtrArray) names = g_ptr_array_new ();

  if (test_run_cmd (argv, &out, &err) != 0)
    fail_msg ("%s failed:\n%s", argv[0], err);
  lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    if (lines[i][0] != '\0')
      {
        const char *slash = strrchr (lines[i], '/');
        g_ptr_array_add (names, slash != NULL ? (char *)slash + 1 : lines[i]);
      }
  g_ptr_array_sort (names, test_cmp_names);
  g_ptr_array_add (names, NULL);
  return g_strjoinv ("\n", (char **)names->pdata);
}

MFX_CASE (test_large_directory)
{
  const char *h_big = mfx_on_host (fx, "/ws/big");
  const char *h_big2 = mfx_on_host (fx, "/ws/big2");
  const char *m_big = mfx_in_mount (fx, "/ws/big");
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) expect = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *want = NULL;
  g_autofree long *pos = NULL;
  DIR *d;

  /* big2 is big again: the same names, made in the same order */
  mfx_mkdir (fx, "/ws/big");
  mfx_mkdir (fx, "/ws/big2");
  for (int i = 0; i < 10100; i++)
    {
      g_autofree char *name = i < 100 ? g_strdup_printf ("hidden-%03d", i) : g_strdup_printf ("f%05d", i - 100);
      g_autofree char *p = g_build_filename (h_big, name, NULL);
      g_autofree char *p2 = g_build_filename (h_big2, name, NULL);
      int fd = open (p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      int fd2 = open (p2, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      assert_true (fd >= 0 && fd2 >= 0);
      close (fd);
      close (fd2);
      if (i >= 100)
        g_ptr_array_add (expect, g_steal_pointer (&name));
    }
  mfx_assert_host_readable (fx, "/ws/big/hidden-042");
  g_ptr_array_sort (expect, test_cmp_names);
  g_ptr_array_add (expect, NULL);
  want = g_strjoinv ("\n", (char **)expect->pdata);
  g_ptr_array_remove_index (expect, expect->len - 1);
  mfx_mount (fx, policy_text, NULL);

  /* one pass: every visible name once, with the position before it */
  d = opendir (m_big);
  assert_non_null (d);
  pos = g_new (long, 10100 + 2);
  for (;;)
    {
      long p = telldir (d);
      struct dirent *e = readdir (d);
      if (e == NULL)
        break;
      assert_true (names->len < 10100 + 2);
      pos[names->len] = p;
      g_ptr_array_add (names, g_strdup (e->d_name));
    }
  {
    g_autoptr (GPtrArray) sorted = g_ptr_array_new ();
    g_autofree char *got = NULL;
    for (guint i = 0; i < names->len; i++)
      if (strcmp (names->pdata[i], ".") != 0 && strcmp (names->pdata[i], "..") != 0)
        g_ptr_array_add (sorted, names->pdata[i]);
    g_ptr_array_sort (sorted, test_cmp_names);
    g_ptr_array_add (sorted, NULL);
    got = g_strjoinv ("\n", (char **)sorted->pdata);
    if (strcmp (got, want) != 0)
      fail_msg ("one pass over %s did not list each of the %u visible names once", m_big, expect->len);
  }
  /* the kernel answers these from the listing it keeps */
  check_seeks (d, names, pos, 500, "seekdir in big, listed");
  closedir (d);
  /* big2 was never listed: the kernel has nothing of it and asks the
   * daemon at each position (which big's are too, the names being the
   * same), in shuffled order */
  d = opendir (mfx_in_mount (fx, "/ws/big2"));
  assert_non_null (d);
  check_seeks (d, names, pos, 200, "seekdir in big2, never listed");
  closedir (d);

  /* the tools */
  {
    const char *ls[] = { "/bin/ls", "-f", "-A", m_big, NULL };
    const char *find[] = { "/usr/bin/find", m_big, "-mindepth", "1", NULL };
    const char *py[] = { "/usr/bin/python3", "-c", "import os, sys\nfor e in os.scandir(sys.argv[1]): print(e.name)\n",
                         m_big, NULL };
    g_autofree char *a = sorted_output (ls);
    g_autofree char *b = sorted_output (find);
    assert_string_equal (a, want);
    assert_string_equal (b, want);
    if (g_file_test (py[0], G_FILE_TEST_IS_EXECUTABLE))
      {
        g_autofree char *c = sorted_output (py);
        assert_string_equal (c, want);
      }
  }
}

MFX_DEFINE_MAIN (MFX_TEST (test_hidden_name_leaves_no_offset), MFX_TEST (test_large_directory))
