/* fusebox — an access log's rotated files, by name (ipc/ipc-private.h).
 *
 * A log at STEM.jsonl rotates to STEM.<first>-<last>.jsonl, the first and
 * last seq it holds (twelve digits at least), with ".<n>" before ".jsonl"
 * when that name was taken.  The listing sorts them in the order written:
 * their modification time, then their seqs.
 *
 * One pass of readdir is not a listing to go by while the writer rotates:
 * ext4 returns a big directory's entries in hash order, and a name added
 * during the pass is returned or not depending on where its hash falls, so
 * a pass can hold a rotated file without the one renamed in just before
 * it, and a reader would read the newer first and say the older one's
 * records were missing.  What holds is that a name there for the whole of
 * a pass is returned.  So the directory is read twice, and the second
 * pass is taken up to the newest file (in the order written) that the
 * first pass held too.  That file was there when the second pass began,
 * so every file written before it was, and the second pass holds them
 * all; what came after it is left to the next listing, which will hold it
 * in both of its passes.  And every file there before the listing began is
 * in both passes: in what the listing gives. */
#include "ipc/ipc-private.h"
#include "policy/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *
fb_log_rotated_name (const char *live_name, guint64 first_seq, guint64 last_seq, guint n)
{
  g_autofree char *stem = g_str_has_suffix (live_name, ".jsonl")
                            ? g_strndup (live_name, strlen (live_name) - strlen (".jsonl"))
                            : g_strdup (live_name);

  if (n == 0)
    return g_strdup_printf ("%s.%012" G_GUINT64_FORMAT "-%012" G_GUINT64_FORMAT ".jsonl", stem, first_seq, last_seq);
  return g_strdup_printf ("%s.%012" G_GUINT64_FORMAT "-%012" G_GUINT64_FORMAT ".%u.jsonl", stem, first_seq, last_seq,
                          n);
}

static gboolean
parse_u64 (const char **p, guint64 *ret)
{
  const char *s = *p;
  guint64 v = 0;

  if (!g_ascii_isdigit (*s))
    return FALSE;
  for (; g_ascii_isdigit (*s); s++)
    {
      if (v > (G_MAXUINT64 - 9) / 10)
        return FALSE;
      v = v * 10 + (guint64)(*s - '0');
    }
  *p = s;
  *ret = v;
  return TRUE;
}

/* NAME = STEM "." FIRST "-" LAST ["." N] ".jsonl" */
static gboolean
parse_rotated_name (const char *name, const char *stem, FbRotatedFile *ret)
{
  const char *p;
  guint64 n = 0;

  if (!g_str_has_prefix (name, stem) || name[strlen (stem)] != '.')
    return FALSE;
  p = name + strlen (stem) + 1;
  if (!parse_u64 (&p, &ret->first_seq) || *p++ != '-' || !parse_u64 (&p, &ret->last_seq))
    return FALSE;
  if (*p == '.' && g_ascii_isdigit (p[1]))
    {
      p++;
      if (!parse_u64 (&p, &n) || n > G_MAXUINT)
        return FALSE;
    }
  if (strcmp (p, ".jsonl") != 0)
    return FALSE;
  ret->n = (guint)n;
  return TRUE;
}

static void
rotated_free (gpointer p)
{
  FbRotatedFile *f = p;

  g_free (f->path);
  g_free (f);
}

static int
rotated_cmp (gconstpointer a, gconstpointer b)
{
  const FbRotatedFile *x = *(FbRotatedFile *const *)a;
  const FbRotatedFile *y = *(FbRotatedFile *const *)b;

  if (x->mtime_ns != y->mtime_ns)
    return x->mtime_ns < y->mtime_ns ? -1 : 1;
  if (x->first_seq != y->first_seq)
    return x->first_seq < y->first_seq ? -1 : 1;
  if (x->last_seq != y->last_seq)
    return x->last_seq < y->last_seq ? -1 : 1;
  return x->n < y->n ? -1 : x->n > y->n;
}

/* The listing: DIR_FD's directory reopened (AT_FDCWD: DIR by name). */
static DIR *
open_listing (int dir_fd, const char *dir)
{
  int fd = dir_fd == AT_FDCWD ? open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                              : fb_reopen_path (dir_fd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir (fd) : NULL;

  if (fd >= 0 && d == NULL)
    {
      int errsv = errno;
      close (fd);
      errno = errsv;
    }
  return d;
}

/* One pass: the names of STEM's rotated files in DIR (a set), or NULL and
 * errno when it can't be listed. */
static GHashTable *
list_pass (int dir_fd, const char *dir, const char *stem)
{
  GHashTable *names = NULL;
  DIR *d = open_listing (dir_fd, dir);
  struct dirent *e;

  if (d == NULL)
    return NULL;
  names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  while ((e = readdir (d)) != NULL)
    {
      FbRotatedFile f = { 0 };

      if (parse_rotated_name (e->d_name, stem, &f))
        g_hash_table_add (names, g_strdup (e->d_name));
    }
  closedir (d);
  return names;
}

GPtrArray *
fb_log_list_rotated_at (int dir_fd, const char *live_path, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (live_path);
  g_autofree char *base = g_path_get_basename (live_path);
  g_autofree char *stem =
    g_str_has_suffix (base, ".jsonl") ? g_strndup (base, strlen (base) - strlen (".jsonl")) : g_strdup (base);
  g_autoptr (GPtrArray) files = g_ptr_array_new_with_free_func (rotated_free);
  g_autoptr (GHashTable) first = NULL;
  g_autoptr (GHashTable) second = NULL;
  GHashTableIter it;
  gpointer name;
  guint keep = 0;

  /* the two passes (the top of this file) */
  first = list_pass (dir_fd, dir, stem);
  if (first != NULL)
    second = list_pass (dir_fd, dir, stem);
  if (second == NULL)
    {
      int errsv = errno;

      if (errsv == ENOENT)
        return g_steal_pointer (&files);
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "can't list %s for rotated logs: %s", dir, g_strerror (errsv));
      return NULL;
    }
  g_hash_table_iter_init (&it, second);
  while (g_hash_table_iter_next (&it, &name, NULL))
    {
      FbRotatedFile f = { 0 };
      struct stat st;

      parse_rotated_name (name, stem, &f);
      f.path = g_build_filename (dir, name, NULL);
      /* what the kernel holds: another user's mount there is not asked */
      if (fb_lstat_cached (dir_fd, dir_fd == AT_FDCWD ? f.path : name, &st) == 0)
        f.mtime_ns = (gint64)st.st_mtim.tv_sec * G_GINT64_CONSTANT (1000000000) + st.st_mtim.tv_nsec;
      g_ptr_array_add (files, g_memdup2 (&f, sizeof f));
    }
  g_ptr_array_sort (files, rotated_cmp);
  for (guint i = 0; i < files->len; i++)
    if (g_hash_table_contains (first, strrchr (((FbRotatedFile *)files->pdata[i])->path, '/') + 1))
      keep = i + 1;
  g_ptr_array_set_size (files, keep);
  return g_steal_pointer (&files);
}

GPtrArray *
fb_log_list_rotated (const char *live_path, GError **error)
{
  return fb_log_list_rotated_at (AT_FDCWD, live_path, error);
}
