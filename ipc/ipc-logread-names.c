/* fusebox — an access log's rotated files, by name (ipc/ipc-private.h).
 *
 * A log at STEM.jsonl rotates to STEM.<first>-<last>.jsonl, the first and
 * last seq it holds (twelve digits at least), with ".<n>" before ".jsonl"
 * when that name was taken.  The listing sorts them in the order written:
 * their modification time, then their seqs.
 *
 * A reader's listing is settled (fb_log_list_rotated_settled_at).  One pass
 * of readdir is not to be gone by while the writer rotates: ext4 returns a
 * big directory's entries in hash order, and a name added during the pass
 * is returned or not depending on where its hash falls, so a pass can hold
 * a rotated file without the one renamed in just before it; a reader would
 * read the newer first and say the older one's records were missing.  What
 * holds is that a name there for the whole of a pass is returned.  A
 * rename sets the file's change time (ctime, from the kernel's clock, which
 * no one can set back for one file), so a file whose ctime is before the
 * coarse clock read just before the pass was renamed in before the pass
 * began, and so was every file written before it: the pass holds them
 * all.  A file changed at that tick or later may have come during the
 * pass, or been written to since its rename (the writer writes on in the
 * file it renamed when another user's object holds the live name), and
 * when a pass holds one, a second pass settles it: once the coarse clock
 * is past the exact time the first pass ended (a ctime may come from the
 * exact clock, never ahead of the time), the second takes every file the
 * first held, whatever its ctime, and every file changed before that
 * clock.  A file the first held was there when the second began, and so
 * was every file renamed in before it; a file changed before the clock
 * was renamed in before the second began.  What is left, renamed in
 * during the second, is marked for the next listing (FbRotatedFile.later).
 * A file changed more than CTIME_AHEAD_S after the clock (the clock was
 * set back since) can't have come during a pass, and is taken. */
#include "ipc/ipc-private.h"
#include "policy/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

bool
fb_log_rotated_name_parse (const char *live_path, const char *path, FbRotatedFile *ret)
{
  g_autofree char *base = g_path_get_basename (live_path);
  g_autofree char *stem =
    g_str_has_suffix (base, ".jsonl") ? g_strndup (base, strlen (base) - strlen (".jsonl")) : g_strdup (base);
  g_autofree char *name = g_path_get_basename (path);

  return parse_rotated_name (name, stem, ret);
}

static void
rotated_free (gpointer p)
{
  FbRotatedFile *f = p;

  g_free (f->path);
  g_free (f);
}

int
fb_log_rotated_seqs_cmp (const FbRotatedFile *x, const FbRotatedFile *y)
{
  if (x->first_seq != y->first_seq)
    return x->first_seq < y->first_seq ? -1 : 1;
  if (x->last_seq != y->last_seq)
    return x->last_seq < y->last_seq ? -1 : 1;
  return x->n < y->n ? -1 : x->n > y->n;
}

static int
rotated_cmp (gconstpointer a, gconstpointer b)
{
  const FbRotatedFile *x = *(FbRotatedFile *const *)a;
  const FbRotatedFile *y = *(FbRotatedFile *const *)b;

  if (x->mtime_ns != y->mtime_ns)
    return x->mtime_ns < y->mtime_ns ? -1 : 1;
  return fb_log_rotated_seqs_cmp (x, y);
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

/* How far past the clock a file's ctime may be and still be taken for
 * one renamed during the pass: beyond, the clock was set back since. */
#define CTIME_AHEAD_S 1

static bool
ts_before (const struct timespec *a, const struct timespec *b)
{
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* One pass.  BEFORE non-NULL: files changed at BEFORE or later (but not
 * more than CTIME_AHEAD_S after it) are marked later, unless TAKEN (a set
 * of paths, or NULL) holds theirs; *RET_LATER set when some were. */
static GPtrArray *
list_pass (int dir_fd, const char *live_path, const struct timespec *before, GHashTable *taken, bool *ret_later,
           GError **error)
{
  g_autofree char *dir = g_path_get_dirname (live_path);
  g_autofree char *base = g_path_get_basename (live_path);
  g_autofree char *stem =
    g_str_has_suffix (base, ".jsonl") ? g_strndup (base, strlen (base) - strlen (".jsonl")) : g_strdup (base);
  g_autoptr (GPtrArray) files = g_ptr_array_new_with_free_func (rotated_free);
  DIR *d = open_listing (dir_fd, dir);
  struct dirent *e;

  if (d == NULL)
    {
      int errsv = errno;

      if (errsv == ENOENT)
        return g_steal_pointer (&files);
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "can't list %s for rotated logs: %s", dir, g_strerror (errsv));
      return NULL;
    }
  while ((e = readdir (d)) != NULL)
    {
      FbRotatedFile f = { 0 };
      struct stat st;

      if (!parse_rotated_name (e->d_name, stem, &f))
        continue;
      f.path = g_build_filename (dir, e->d_name, NULL);
      /* what the kernel holds: another user's mount there is not asked */
      if (fb_lstat_cached (dir_fd, dir_fd == AT_FDCWD ? f.path : e->d_name, &st) == 0)
        {
          f.mtime_ns = (gint64)st.st_mtim.tv_sec * G_GINT64_CONSTANT (1000000000) + st.st_mtim.tv_nsec;
          if (before != NULL && !ts_before (&st.st_ctim, before) &&
              !ts_before (&(struct timespec){ before->tv_sec + CTIME_AHEAD_S, before->tv_nsec }, &st.st_ctim) &&
              (taken == NULL || !g_hash_table_contains (taken, f.path)))
            f.later = *ret_later = true;
        }
      g_ptr_array_add (files, g_memdup2 (&f, sizeof f));
    }
  closedir (d);
  g_ptr_array_sort (files, rotated_cmp);
  return g_steal_pointer (&files);
}

GPtrArray *
fb_log_list_rotated_at (int dir_fd, const char *live_path, GError **error)
{
  return list_pass (dir_fd, live_path, NULL, NULL, NULL, error);
}

GPtrArray *
fb_log_list_rotated_settled_at (int dir_fd, const char *live_path, GError **error)
{
  struct timespec asked, ended, now;
  bool later = false;
  g_autoptr (GPtrArray) first = NULL;
  g_autoptr (GHashTable) taken = NULL;

  clock_gettime (CLOCK_REALTIME_COARSE, &asked);
  first = list_pass (dir_fd, live_path, &asked, NULL, &later, error);
  if (first == NULL || !later)
    return g_steal_pointer (&first);
  /* the second pass (the top of this file); a clock set back meanwhile is
   * not waited for past 50 ms */
  clock_gettime (CLOCK_REALTIME, &ended);
  taken = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint i = 0; i < first->len; i++)
    g_hash_table_add (taken, ((FbRotatedFile *)first->pdata[i])->path);
  for (int i = 0; i < 50; i++)
    {
      clock_gettime (CLOCK_REALTIME_COARSE, &now);
      if (ts_before (&ended, &now))
        break;
      g_usleep (1000);
    }
  later = false;
  return list_pass (dir_fd, live_path, &now, taken, &later, error);
}

GPtrArray *
fb_log_list_rotated (const char *live_path, GError **error)
{
  return fb_log_list_rotated_at (AT_FDCWD, live_path, error);
}
