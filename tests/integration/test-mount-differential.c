/* fusebox — randomized differential test of the view.
 *
 * A seeded random sequence of file operations is applied twice: through a
 * writable `fusebox mount` view of one host directory (T/mnt/T/h/v/…) and
 * directly to a second, plain directory (T/h/p/…).  Every result (return
 * value and errno, and what a read returned) must be the same on both sides;
 * after each mutation the objects it named are compared, and every
 * FUSEBOX_DIFF_CHECK operations (and at the end) the whole trees are: the
 * view's tree and the host's copy behind it, each against the plain one
 * (names, types, modes, sizes, link texts, contents by checksum, nlink, and
 * mtimes where the test set them explicitly).
 *
 * Why a differential and not a table: the kernel's caches (entries,
 * attributes, pages), the view's node table (one node per view path, moved
 * by rename) and the host each hold part of the truth, and the bugs live in
 * sequences (rename a directory, then write through an old handle; link,
 * write through one name, stat the other).  A plain directory on the same
 * host filesystem is the oracle.
 *
 * Names come from a pool of five ("a".."e"), up to three deep, so that
 * EEXIST, ENOENT, ENOTEMPTY, EISDIR, ENOTDIR and ELOOP happen often.  The
 * working roots sit three directories deep (…/v/w/w/w and …/p/w/w/w) so
 * that symlink texts may climb with up to three "..": such a link resolves
 * inside the compared trees on both sides wherever renames carry it.  Only
 * relative link texts are used: an absolute one resolves on the host in a
 * `fusebox mount`, by design (see `fusebox mount --help`).
 *
 * Deliberate differences left out of phase 1: setuid/setgid bits (the view
 * refuses them whatever the policy says), FIFOs and devices (not in the op
 * list: opening a FIFO would block the plain side), xattrs (the access
 * table test covers them), protected names (phase 2), st_ino/st_dev, atimes,
 * ctimes, directory sizes (ext4 grows directories by history) and mtimes
 * the test did not set (they are "now" on both sides, only checked as such).
 *
 * Three runs, each on its own mount: test_differential (every operation,
 * hard links included, kernel caches off: --cache-timeout=0),
 * test_differential_cached (the mount's default cache timeouts, as users
 * get them; hard links left out until the bug described there is fixed) and
 * test_protected (phase 2, short): a quarter of its operations name ".git",
 * ".codex" or ".agents" (or reach one through a symlink), are applied to the
 * view only and must get the policy's answer (ENOENT for a hidden name,
 * EACCES for creating one), with the host's own .git and .codex stand-ins
 * left exactly as they were and never shown; the rest stays differential.
 * Besides path operations there are four open-file slots (open, pwrite,
 * pread, ftruncate, fsync, fstat, close through a descriptor that outlives
 * renames and unlinks of its name).
 *
 * Environment: FUSEBOX_DIFF_SEED=N replays a run (each test draws its own
 * sequence from it), FUSEBOX_DIFF_OPS=N sets the number of operations
 * (default 10000; test_protected runs a sixth), FUSEBOX_DIFF_CHECK=N the
 * interval of whole-tree comparisons (default 500), FUSEBOX_DIFF_VERBOSE=1
 * prints every operation and its result, FUSEBOX_DIFF_CACHE_TIMEOUT=S mounts
 * every run with --cache-timeout=S.  Every run includes hard links. */
#include "tests/lib/test-log.h"
#include "tests/lib/test-mount.h"

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <time.h>

#define N_SLOTS 4
#define MAX_WRITE (300 * 1024)
#define MAX_READ (4 * 1024 * 1024)
#define PAD "w/w/w" /* the working root below v/ and p/ */

static const char *const pool[] = { "a", "b", "c", "d", "e" };
static const char *const protected_pool[] = { ".git", ".codex", ".agents" };

/* --- a small PRNG of our own, so a seed means the same run everywhere ---- */

typedef struct
{
  guint64 s;
} Rng;

static guint64
rng_next (Rng *r)
{
  /* splitmix64 */
  guint64 z = (r->s += 0x9e3779b97f4a7c15ULL);

  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static guint64
rng_below (Rng *r, guint64 n)
{
  return n == 0 ? 0 : rng_next (r) % n;
}

static bool
rng_chance (Rng *r, guint percent)
{
  return rng_below (r, 100) < percent;
}

/* --- operations ---------------------------------------------------------- */

typedef enum
{
  K_CREATE,
  K_WRITE,
  K_TRUNCATE,
  K_RENAME,
  K_LINK,
  K_UNLINK,
  K_MKDIR,
  K_RMDIR,
  K_SYMLINK,
  K_CHMOD,
  K_UTIMENS,
  K_FSYNC,
  K_READ,
  K_STAT,
  K_READLINK,
  K_READDIR,
  K_OPEN,
  K_HWRITE,
  K_HREAD,
  K_HTRUNCATE,
  K_HSYNC,
  K_HSTAT,
  K_CLOSE,
  K_COUNT
} Kind;

static const char *const kind_names[K_COUNT] = {
  "create",  "write",  "truncate", "rename",    "link",  "unlink", "mkdir",    "rmdir",
  "symlink", "chmod",  "utimens",  "fsync",     "read",  "stat",   "readlink", "readdir",
  "open",    "hwrite", "hread",    "htruncate", "hsync", "hstat",  "close",
};

/* Relative weights: creations and writes often enough to keep a tree of a
 * few dozen objects, removals often enough that it does not only grow. */
static const guint kind_weights[K_COUNT] = {
  [K_CREATE] = 9, [K_WRITE] = 11,    [K_TRUNCATE] = 4, [K_RENAME] = 10, [K_LINK] = 5,    [K_UNLINK] = 6,
  [K_MKDIR] = 7,  [K_RMDIR] = 5,     [K_SYMLINK] = 5,  [K_CHMOD] = 4,   [K_UTIMENS] = 4, [K_FSYNC] = 2,
  [K_READ] = 6,   [K_STAT] = 6,      [K_READLINK] = 2, [K_READDIR] = 4, [K_OPEN] = 7,    [K_HWRITE] = 4,
  [K_HREAD] = 3,  [K_HTRUNCATE] = 1, [K_HSYNC] = 1,    [K_HSTAT] = 2,   [K_CLOSE] = 2,
};

static bool
kind_mutates (Kind k)
{
  switch (k)
    {
      case K_READ:
      case K_STAT:
      case K_READLINK:
      case K_READDIR:
      case K_HREAD:
      case K_HSTAT:
        return false;
      default:
        return true;
    }
}

typedef struct
{
  Kind kind;
  char a[PATH_MAX];
  char b[PATH_MAX]; /* rename/link destination, symlink text */
  int flags;        /* open flags, rename flags, AT_SYMLINK_NOFOLLOW, datasync */
  mode_t mode;
  off_t off;
  gsize len;
  int slot;
  struct timespec ts[2];
  const guchar *data; /* len bytes to write (shared by both sides) */
} Op;

typedef struct
{
  long ret;
  int err;
  GString *detail; /* what a read, stat, readlink or readdir saw */
} Res;

/* One side: the plain directory or the view. */
typedef struct
{
  const char *label;
  char *root; /* the working root, an absolute path */
  int root_fd;
  int fds[N_SLOTS];
} Side;

typedef struct
{
  MFx *fx;
  guint64 seed;
  guint n_ops;
  guint check_every;
  bool verbose;
  bool protected_phase;
  bool links;                /* K_LINK in the mix */
  const char *cache_timeout; /* --cache-timeout, NULL: the mount's default */
  Rng rng;
  Side view, plain;
  /* the fixture's (freed with it) */
  const char *host_view_top; /* T/h/v: the host's copy behind the view, compared whole */
  const char *plain_top;     /* T/h/p */
  const char *view_top;      /* T/mnt/T/h/v */
  time_t started;
  guchar *buf; /* MAX_WRITE random bytes, refreshed per write */
  guint index;
  /* statistics, printed at the end: evidence that the pool makes collisions */
  guint results[K_COUNT][2];
  GHashTable *errnos; /* errno -> count */
  guint tree_checks;
  guint protected_ops;
} Diff;

static void
op_describe (const Op *op, GString *out)
{
  g_string_append (out, kind_names[op->kind]);
  switch (op->kind)
    {
      case K_CREATE:
        g_string_append_printf (out, "(\"%s\", %s%s%s, 0%o)", op->a, (op->flags & O_EXCL) ? "O_EXCL|" : "",
                                (op->flags & O_TRUNC) ? "O_TRUNC|" : "", "O_CREAT|O_WRONLY", op->mode);
        break;
      case K_WRITE:
        g_string_append_printf (out, "(\"%s\", off %lld, len %zu%s)", op->a, (long long)op->off, op->len,
                                (op->flags & O_APPEND) ? ", O_APPEND" : "");
        break;
      case K_TRUNCATE:
        g_string_append_printf (out, "(\"%s\", %lld)", op->a, (long long)op->off);
        break;
      case K_RENAME:
        g_string_append_printf (out, "(\"%s\", \"%s\", %s)", op->a, op->b,
                                op->flags == RENAME_NOREPLACE  ? "RENAME_NOREPLACE"
                                : op->flags == RENAME_EXCHANGE ? "RENAME_EXCHANGE"
                                                               : "0");
        break;
      case K_LINK:
        g_string_append_printf (out, "(\"%s\", \"%s\")", op->a, op->b);
        break;
      case K_SYMLINK:
        g_string_append_printf (out, "(text \"%s\", \"%s\")", op->b, op->a);
        break;
      case K_MKDIR:
      case K_CHMOD:
        g_string_append_printf (out, "(\"%s\", 0%o)", op->a, op->mode);
        break;
      case K_UTIMENS:
        g_string_append_printf (out, "(\"%s\", atime %lld.%09ld, mtime %lld.%09ld%s)", op->a,
                                (long long)op->ts[0].tv_sec, op->ts[0].tv_nsec, (long long)op->ts[1].tv_sec,
                                op->ts[1].tv_nsec, op->flags ? ", AT_SYMLINK_NOFOLLOW" : "");
        break;
      case K_FSYNC:
        g_string_append_printf (out, "(\"%s\", write 1 byte at %lld, %s)", op->a, (long long)op->off,
                                op->flags ? "fdatasync" : "fsync");
        break;
      case K_STAT:
        g_string_append_printf (out, "(\"%s\"%s)", op->a, op->flags ? ", AT_SYMLINK_NOFOLLOW" : "");
        break;
      case K_OPEN:
        g_string_append_printf (out, "(slot %d, \"%s\", flags 0%o, 0%o)", op->slot, op->a, op->flags, op->mode);
        break;
      case K_HWRITE:
        g_string_append_printf (out, "(slot %d, off %lld, len %zu)", op->slot, (long long)op->off, op->len);
        break;
      case K_HREAD:
        g_string_append_printf (out, "(slot %d, off %lld, len %zu)", op->slot, (long long)op->off, op->len);
        break;
      case K_HTRUNCATE:
        g_string_append_printf (out, "(slot %d, %lld)", op->slot, (long long)op->off);
        break;
      case K_HSYNC:
        g_string_append_printf (out, "(slot %d, %s)", op->slot, op->flags ? "fdatasync" : "fsync");
        break;
      case K_HSTAT:
      case K_CLOSE:
        g_string_append_printf (out, "(slot %d)", op->slot);
        break;
      default:
        g_string_append_printf (out, "(\"%s\")", op->a);
        break;
    }
}

/* --- what each side saw, as comparable text ------------------------------- */

/* mtimes: the test sets explicit ones between 2001 and 2008; anything else
 * is "now" on both sides (to the nanosecond it differs, so it is only
 * checked to be recent). */
static void
append_mtime (Diff *d, GString *out, const struct stat *st)
{
  if (st->st_mtim.tv_sec < 1300000000)
    g_string_append_printf (out, " mtime=%lld.%09ld", (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
  else if (st->st_mtim.tv_sec >= d->started - 5)
    g_string_append (out, " mtime=recent");
  else
    g_string_append_printf (out, " mtime=unexpected:%lld", (long long)st->st_mtim.tv_sec);
}

/* ST as OUT shows it; PLAIN: ST comes from the plain tree, read as the view
 * must show it: the view reports st_nlink 1 for every directory (the host's
 * count would reveal hidden subdirectories), and the view's own value is
 * compared as it is. */
static void
append_stat (Diff *d, GString *out, const struct stat *st, bool plain)
{
  nlink_t nlink = plain && S_ISDIR (st->st_mode) ? 1 : st->st_nlink;
  char type = S_ISREG (st->st_mode) ? 'f' : S_ISDIR (st->st_mode) ? 'd' : S_ISLNK (st->st_mode) ? 'l' : '?';

  g_string_append_printf (out, "%c mode=0%o nlink=%lu", type, (unsigned)(st->st_mode & 07777), (unsigned long)nlink);
  if (!S_ISDIR (st->st_mode))
    g_string_append_printf (out, " size=%lld", (long long)st->st_size);
  append_mtime (d, out, st);
}

static void
append_checksum (GString *out, const guchar *data, gsize len)
{
  g_autofree char *sum = g_compute_checksum_for_data (G_CHECKSUM_SHA1, data, len);

  g_string_append_printf (out, " len=%zu sha1=%s", len, sum);
}

/* Read FD to its end (at most MAX_READ) into a checksum. */
static int
append_contents (GString *out, int fd)
{
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA1);
  static __thread guchar chunk[256 * 1024];
  gsize total = 0;

  for (;;)
    {
      ssize_t n = read (fd, chunk, sizeof chunk);
      if (n < 0)
        return -errno;
      if (n == 0)
        break;
      g_checksum_update (sum, chunk, n);
      total += n;
      if (total > MAX_READ)
        break;
    }
  g_string_append_printf (out, " len=%zu sha1=%s", total, g_checksum_get_string (sum));
  return 0;
}

static int
cmp_strs (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

/* --- applying one operation to one side ----------------------------------- */

static char *
side_path (Side *s, const char *rel)
{
  return g_build_filename (s->root, rel, NULL);
}

#define SET(expr)                                                                                                      \
  do                                                                                                                   \
    {                                                                                                                  \
      errno = 0;                                                                                                       \
      res->ret = (long)(expr);                                                                                         \
      res->err = res->ret < 0 ? errno : 0;                                                                             \
    }                                                                                                                  \
  while (0)

static void
apply (Diff *d, Side *s, const Op *op, Res *res)
{
  struct stat st;
  int fd;

  res->ret = 0;
  res->err = 0;
  switch (op->kind)
    {
      case K_CREATE:
        SET (fd = openat (s->root_fd, op->a, O_CREAT | O_WRONLY | O_CLOEXEC | op->flags, op->mode));
        if (fd >= 0)
          {
            res->ret = 0;
            close (fd);
          }
        break;
      case K_WRITE:
        SET (fd = openat (s->root_fd, op->a, O_WRONLY | O_CLOEXEC | op->flags));
        if (fd >= 0)
          {
            SET (pwrite (fd, op->data, op->len, op->off));
            close (fd);
          }
        break;
      case K_TRUNCATE:
        {
          g_autofree char *p = side_path (s, op->a);
          SET (truncate (p, op->off));
        }
        break;
      case K_RENAME:
        SET (renameat2 (s->root_fd, op->a, s->root_fd, op->b, op->flags));
        break;
      case K_LINK:
        SET (linkat (s->root_fd, op->a, s->root_fd, op->b, 0));
        break;
      case K_UNLINK:
        SET (unlinkat (s->root_fd, op->a, 0));
        break;
      case K_MKDIR:
        SET (mkdirat (s->root_fd, op->a, op->mode));
        break;
      case K_RMDIR:
        SET (unlinkat (s->root_fd, op->a, AT_REMOVEDIR));
        break;
      case K_SYMLINK:
        SET (symlinkat (op->b, s->root_fd, op->a));
        break;
      case K_CHMOD:
        SET (fchmodat (s->root_fd, op->a, op->mode, 0));
        break;
      case K_UTIMENS:
        SET (utimensat (s->root_fd, op->a, op->ts, op->flags));
        break;
      case K_FSYNC:
        SET (fd = openat (s->root_fd, op->a, O_WRONLY | O_CLOEXEC));
        if (fd >= 0)
          {
            SET (pwrite (fd, "s", 1, op->off));
            if (res->ret == 1)
              SET (op->flags ? fdatasync (fd) : fsync (fd));
            close (fd);
          }
        break;
      case K_READ:
        SET (fd = openat (s->root_fd, op->a, O_RDONLY | O_CLOEXEC));
        if (fd >= 0)
          {
            int r = append_contents (res->detail, fd);
            res->ret = r;
            res->err = r < 0 ? -r : 0;
            close (fd);
          }
        break;
      case K_STAT:
        SET (fstatat (s->root_fd, op->a, &st, op->flags));
        if (res->ret == 0)
          append_stat (d, res->detail, &st, s == &d->plain);
        break;
      case K_READLINK:
        {
          char text[PATH_MAX];
          SET (readlinkat (s->root_fd, op->a, text, sizeof text));
          if (res->ret >= 0)
            g_string_append_len (res->detail, text, res->ret);
        }
        break;
      case K_READDIR:
        SET (fd = openat (s->root_fd, op->a, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (fd >= 0)
          {
            DIR *dir = fdopendir (fd);
            g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
            struct dirent *de;
            res->ret = 0;
            while ((de = readdir (dir)) != NULL)
              if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0)
                g_ptr_array_add (names, g_strdup_printf ("%s(%u)", de->d_name, (unsigned)de->d_type));
            closedir (dir);
            g_ptr_array_sort (names, cmp_strs);
            for (guint i = 0; i < names->len; i++)
              g_string_append_printf (res->detail, " %s", (char *)names->pdata[i]);
          }
        break;
      case K_OPEN:
        if (s->fds[op->slot] >= 0)
          close (s->fds[op->slot]);
        SET (s->fds[op->slot] = openat (s->root_fd, op->a, op->flags | O_CLOEXEC, op->mode));
        if (res->ret >= 0)
          res->ret = 0;
        break;
      case K_HWRITE:
        SET (pwrite (s->fds[op->slot], op->data, op->len, op->off));
        break;
      case K_HREAD:
        {
          g_autofree guchar *data = g_malloc (op->len + 1);
          SET (pread (s->fds[op->slot], data, op->len, op->off));
          if (res->ret >= 0)
            append_checksum (res->detail, data, res->ret);
        }
        break;
      case K_HTRUNCATE:
        SET (ftruncate (s->fds[op->slot], op->off));
        break;
      case K_HSYNC:
        SET (op->flags ? fdatasync (s->fds[op->slot]) : fsync (s->fds[op->slot]));
        break;
      case K_HSTAT:
        SET (fstat (s->fds[op->slot], &st));
        if (res->ret == 0)
          append_stat (d, res->detail, &st, s == &d->plain);
        break;
      case K_CLOSE:
        SET (close (s->fds[op->slot]));
        s->fds[op->slot] = -1;
        break;
      case K_COUNT:
        g_assert_not_reached ();
    }
}

/* --- whole trees ----------------------------------------------------------- */

/* How to read the view's or the host's tree in phase 2: the host's
 * protected stand-ins are left out.  Directories: the view reports st_nlink
 * 1 for every directory (a host count would reveal hidden subdirectories,
 * such as the .git stand-in), so the other trees are read with 1 in its
 * place and the view's own value is compared as it is: a directory of the
 * view that says anything but 1 is a mismatch. */
typedef struct
{
  const char *const *skip;
} WalkFixup;

/* One line per object below DIR_FD (relative path REL): the stat summary,
 * the link text, the contents' checksum. */
static void
walk (Diff *d, int dir_fd, const char *rel, const WalkFixup *fix, bool is_view, GPtrArray *out)
{
  DIR *dir;
  struct dirent *de;
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  int fd = openat (dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0 || (dir = fdopendir (fd)) == NULL)
    {
      g_ptr_array_add (out, g_strdup_printf ("%s: cannot list: %s", rel, g_strerror (errno)));
      if (fd >= 0)
        close (fd);
      return;
    }
  while ((de = readdir (dir)) != NULL)
    if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0)
      g_ptr_array_add (names, g_strdup (de->d_name));
  closedir (dir);
  g_ptr_array_sort (names, cmp_strs);
  for (guint i = 0; i < names->len; i++)
    {
      const char *name = names->pdata[i];
      g_autofree char *crel = rel[0] ? g_strconcat (rel, "/", name, NULL) : g_strdup (name);
      g_autoptr (GString) line = g_string_new (crel);
      struct stat st;
      bool skipped = false;

      for (guint j = 0; fix != NULL && fix->skip[j] != NULL; j++)
        if (strcmp (fix->skip[j], crel) == 0)
          skipped = true;
      if (skipped)
        continue;
      g_string_append_c (line, ' ');
      if (fstatat (dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        {
          g_string_append_printf (line, "lstat: %s", g_strerror (errno));
          g_ptr_array_add (out, g_string_free (g_steal_pointer (&line), FALSE));
          continue;
        }
      append_stat (d, line, &st, !is_view);
      if (S_ISLNK (st.st_mode))
        {
          char text[PATH_MAX];
          ssize_t n = readlinkat (dir_fd, name, text, sizeof text);
          if (n < 0)
            g_string_append_printf (line, " readlink: %s", g_strerror (errno));
          else
            g_string_append_printf (line, " -> %.*s", (int)n, text);
        }
      else if (S_ISREG (st.st_mode))
        {
          int ffd = openat (dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
          if (ffd < 0 || append_contents (line, ffd) < 0)
            g_string_append_printf (line, " read: %s", g_strerror (errno));
          if (ffd >= 0)
            close (ffd);
        }
      g_ptr_array_add (out, g_string_free (g_steal_pointer (&line), FALSE));
      if (S_ISDIR (st.st_mode))
        {
          int sub = openat (dir_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub < 0)
            g_ptr_array_add (out, g_strdup_printf ("%s: cannot open: %s", crel, g_strerror (errno)));
          else
            {
              walk (d, sub, crel, fix, is_view, out);
              close (sub);
            }
        }
    }
}

static GPtrArray *
tree_of (Diff *d, const char *top, const WalkFixup *fix, bool is_view)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);
  int fd = open (top, O_PATH | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0)
    fail_msg ("open %s: %s", top, g_strerror (errno));
  walk (d, fd, "", fix, is_view, out);
  close (fd);
  return out;
}

static void
repro_line (Diff *d, guint last)
{
  fprintf (stderr,
           "reproduce: FUSEBOX_BIN=%s FUSEBOX_DIFF_SEED=%" G_GUINT64_FORMAT " FUSEBOX_DIFF_OPS=%u FB_TEST_ONLY=%s %s\n",
           test_bin (), d->seed, last, d->fx->test_name,
           g_get_prgname () != NULL ? g_get_prgname () : "test-mount-differential");
}

/* The tree behind TOP_A against the plain one; fails on the first difference. */
static void
compare_trees (Diff *d, const char *what, const char *label, const char *top_a, const WalkFixup *fix, bool is_view)
{
  g_autoptr (GPtrArray) a = tree_of (d, top_a, fix, is_view);
  g_autoptr (GPtrArray) p = tree_of (d, d->plain_top, NULL, false);

  d->tree_checks++;
  for (guint i = 0; i < MAX (a->len, p->len); i++)
    {
      const char *la = i < a->len ? a->pdata[i] : "(nothing)";
      const char *lp = i < p->len ? p->pdata[i] : "(nothing)";
      if (strcmp (la, lp) != 0)
        {
          fprintf (stderr,
                   "TREE MISMATCH after op #%u (seed %" G_GUINT64_FORMAT "), %s against the plain tree:\n"
                   "  %-6s %s\n  %-6s %s\n",
                   d->index, d->seed, what, label, la, "plain:", lp);
          repro_line (d, d->index + 1);
          fail_msg ("the trees differ after op #%u: %s", d->index, what);
        }
    }
}

static void
compare_all_trees (Diff *d)
{
  static const char *const stand_ins[] = { PAD "/.git", PAD "/.codex", NULL };
  static const WalkFixup host_fix = { stand_ins };

  compare_trees (d, "the view", "view:", d->view_top, NULL, true);
  compare_trees (d, "the host's copy behind the view", "host:", d->host_view_top, d->protected_phase ? &host_fix : NULL,
                 false);
}

/* --- generating operations ------------------------------------------------- */

/* Every real directory and every object of the plain tree (relative
 * paths; "" is the working root); objects start with their type: 'd', 'f'
 * (regular) or 'l'. */
static void
list_plain (Diff *d, int dir_fd, const char *rel, GPtrArray *dirs, GPtrArray *objects)
{
  DIR *dir;
  struct dirent *de;
  int fd = openat (dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0 || (dir = fdopendir (fd)) == NULL)
    fail_msg ("list the plain tree at \"%s\": %s", rel, g_strerror (errno));
  g_ptr_array_add (dirs, g_strdup (rel));
  while ((de = readdir (dir)) != NULL)
    {
      g_autofree char *crel = NULL;
      struct stat st;
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      crel = rel[0] ? g_strconcat (rel, "/", de->d_name, NULL) : g_strdup (de->d_name);
      if (fstatat (dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      g_ptr_array_add (objects, g_strdup_printf ("%c%s",
                                                 S_ISDIR (st.st_mode)   ? 'd'
                                                 : S_ISLNK (st.st_mode) ? 'l'
                                                                        : 'f',
                                                 crel));
      if (S_ISDIR (st.st_mode))
        {
          int sub = openat (dir_fd, de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub >= 0)
            {
              list_plain (d, sub, crel, dirs, objects);
              close (sub);
            }
        }
    }
  closedir (dir);
}

/* An existing object of the plain tree whose type is in TYPES ("dfl"),
 * copied to OUT; false when there is none. */
static bool
pick_existing (Diff *d, GPtrArray *objects, const char *types, char *out)
{
  g_autoptr (GPtrArray) fit = g_ptr_array_new ();

  for (guint i = 0; i < objects->len; i++)
    if (strchr (types, ((char *)objects->pdata[i])[0]) != NULL)
      g_ptr_array_add (fit, objects->pdata[i]);
  if (fit->len == 0)
    return false;
  g_strlcpy (out, (char *)fit->pdata[rng_below (&d->rng, fit->len)] + 1, PATH_MAX);
  return true;
}

/* Half of the operations name an object that exists (of a type that makes
 * it likely to succeed), the rest a random pool path: enough successes to
 * exercise the data paths, enough misses for every errno. */
static void
gen_target (Diff *d, GPtrArray *objects, Kind kind, char *a)
{
  const char *types;

  switch (kind)
    {
      case K_WRITE:
      case K_TRUNCATE:
      case K_READ:
      case K_FSYNC:
      case K_OPEN:
      case K_LINK:
        types = rng_chance (&d->rng, 85) ? "f" : "l";
        break;
      case K_RMDIR:
      case K_READDIR:
        types = "d";
        break;
      case K_UNLINK:
      case K_READLINK:
        types = rng_chance (&d->rng, 60) ? "l" : "f";
        break;
      case K_RENAME:
      case K_CHMOD:
      case K_UTIMENS:
      case K_STAT:
        types = "dfl";
        break;
      default:
        return;
    }
  if (rng_chance (&d->rng, 55))
    pick_existing (d, objects, types, a);
}

static void
gen_name (Diff *d, GString *out)
{
  g_string_append (out, pool[rng_below (&d->rng, G_N_ELEMENTS (pool))]);
}

/* A relative path of 1 to 3 pool names, mostly short. */
static guint
gen_path (Diff *d, char *out)
{
  g_autoptr (GString) s = g_string_new (NULL);
  guint r = rng_below (&d->rng, 100);
  guint depth = r < 55 ? 1 : r < 88 ? 2 : 3;

  for (guint i = 0; i < depth; i++)
    {
      if (i > 0)
        g_string_append_c (s, '/');
      gen_name (d, s);
    }
  g_strlcpy (out, s->str, PATH_MAX);
  return depth;
}

static off_t
gen_offset (Diff *d)
{
  guint r = rng_below (&d->rng, 100);

  if (r < 60)
    return rng_below (&d->rng, 4096);
  if (r < 90)
    return rng_below (&d->rng, 200 * 1024);
  return rng_below (&d->rng, 1536 * 1024); /* sparse, across a 1 MiB request */
}

static gsize
gen_length (Diff *d)
{
  guint r = rng_below (&d->rng, 100);

  if (r < 70)
    return 1 + rng_below (&d->rng, 4096);
  if (r < 95)
    return 1 + rng_below (&d->rng, 64 * 1024);
  return 1 + rng_below (&d->rng, MAX_WRITE);
}

static void
gen_data (Diff *d, Op *op)
{
  Rng local = { rng_next (&d->rng) };

  op->len = gen_length (d);
  for (gsize i = 0; i < op->len; i += 8)
    {
      guint64 v = rng_next (&local);
      memcpy (d->buf + i, &v, MIN (8, op->len - i));
    }
  op->data = d->buf;
}

static mode_t
gen_mode (Diff *d, bool dir, bool creating)
{
  /* no setuid/setgid: the view refuses them on purpose (fs/fs.h) */
  static const mode_t common[] = { 0644, 0600, 0755, 0444, 0000, 0700, 0666, 01777, 0751 };
  mode_t mode;

  if (rng_chance (&d->rng, 70))
    mode = common[rng_below (&d->rng, G_N_ELEMENTS (common))];
  else
    mode = rng_below (&d->rng, 01000) | (rng_chance (&d->rng, 20) ? S_ISVTX : 0);
  /* KNOWN DIFFERENCE: creating a regular file through the view drops
   * S_ISVTX (fs/fs-view-io.c masks the mode with 0777); the host keeps it.
   * Harmless (Linux ignores the sticky bit on files), reported, left out. */
  if (creating && !dir)
    mode &= ~S_ISVTX;
  return mode;
}

static void
gen_time (Diff *d, struct timespec *ts)
{
  guint r = rng_below (&d->rng, 100);

  if (r < 10)
    {
      ts->tv_sec = 0;
      ts->tv_nsec = UTIME_NOW;
    }
  else if (r < 20)
    {
      ts->tv_sec = 0;
      ts->tv_nsec = UTIME_OMIT;
    }
  else
    {
      /* 2001..2008: never "now", so append_mtime can tell them apart */
      ts->tv_sec = 1000000000 + rng_below (&d->rng, 200000000);
      ts->tv_nsec = rng_chance (&d->rng, 50) ? 0 : rng_below (&d->rng, 1000000000);
    }
}

static void
gen_op (Diff *d, Op *op)
{
  g_autoptr (GPtrArray) dirs = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) objects = g_ptr_array_new_with_free_func (g_free);
  guint total = 0, pick;
  guint depth;

  memset (op, 0, sizeof *op);
  guint weights[K_COUNT];

  memcpy (weights, kind_weights, sizeof weights);
  if (!d->links)
    weights[K_LINK] = 0;
  for (guint k = 0; k < K_COUNT; k++)
    total += weights[k];
  pick = rng_below (&d->rng, total);
  for (op->kind = 0; pick >= weights[op->kind]; op->kind++)
    pick -= weights[op->kind];
  depth = gen_path (d, op->a);
  list_plain (d, d->plain.root_fd, "", dirs, objects);
  gen_target (d, objects, op->kind, op->a);
  op->slot = rng_below (&d->rng, N_SLOTS);
  switch (op->kind)
    {
      case K_CREATE:
        op->flags = (rng_chance (&d->rng, 40) ? O_EXCL : 0) | (rng_chance (&d->rng, 30) ? O_TRUNC : 0);
        op->mode = gen_mode (d, false, true);
        break;
      case K_WRITE:
      case K_HWRITE:
        op->off = gen_offset (d);
        op->flags = op->kind == K_WRITE && rng_chance (&d->rng, 15) ? O_APPEND : 0;
        gen_data (d, op);
        break;
      case K_TRUNCATE:
      case K_HTRUNCATE:
        op->off = rng_chance (&d->rng, 30) ? 0 : gen_offset (d);
        break;
      case K_RENAME:
        {
          guint r = rng_below (&d->rng, 100);
          gen_path (d, op->b);
          if (rng_chance (&d->rng, 30))
            pick_existing (d, objects, "dfl", op->b);
          op->flags = r < 60 ? 0 : r < 80 ? RENAME_NOREPLACE : RENAME_EXCHANGE;
        }
        break;
      case K_LINK:
        gen_path (d, op->b);
        break;
      case K_MKDIR:
        op->mode = rng_chance (&d->rng, 85) ? 0755 : gen_mode (d, true, true);
        break;
      case K_SYMLINK:
        {
          /* relative texts only; ".." no more than the three padding levels */
          g_autoptr (GString) t = g_string_new (NULL);
          guint r = rng_below (&d->rng, 100);
          if (r < 10)
            g_string_append (t, strrchr (op->a, '/') ? strrchr (op->a, '/') + 1 : op->a); /* itself: ELOOP */
          else if (r < 20)
            g_string_append (t, "missing");
          else
            {
              guint up = r < 40 ? 1 + rng_below (&d->rng, MIN (3, depth + 2)) : 0;
              for (guint i = 0; i < up; i++)
                g_string_append (t, "../");
              gen_name (d, t);
              if (rng_chance (&d->rng, 25))
                {
                  g_string_append_c (t, '/');
                  gen_name (d, t);
                }
            }
          g_strlcpy (op->b, t->str, PATH_MAX);
        }
        break;
      case K_CHMOD:
        op->mode = gen_mode (d, false, false);
        break;
      case K_UTIMENS:
        gen_time (d, &op->ts[0]);
        gen_time (d, &op->ts[1]);
        op->flags = rng_chance (&d->rng, 30) ? AT_SYMLINK_NOFOLLOW : 0;
        break;
      case K_FSYNC:
      case K_HSYNC:
        op->off = rng_below (&d->rng, 8192);
        op->flags = rng_chance (&d->rng, 50);
        break;
      case K_STAT:
        op->flags = rng_chance (&d->rng, 60) ? AT_SYMLINK_NOFOLLOW : 0;
        break;
      case K_OPEN:
        {
          static const int access_modes[] = { O_RDONLY, O_WRONLY, O_RDWR };
          op->flags = access_modes[rng_below (&d->rng, 3)];
          if (rng_chance (&d->rng, 40))
            op->flags |= O_CREAT;
          if (rng_chance (&d->rng, 10))
            op->flags |= O_EXCL;
          if (op->flags != O_RDONLY && rng_chance (&d->rng, 15))
            op->flags |= O_TRUNC;
          if (rng_chance (&d->rng, 15))
            op->flags |= O_APPEND;
          if (rng_chance (&d->rng, 5))
            op->flags |= O_NOFOLLOW;
          op->mode = gen_mode (d, false, true);
        }
        break;
      case K_HREAD:
        op->off = gen_offset (d);
        op->len = gen_length (d);
        break;
      default:
        break;
    }
}

/* --- running --------------------------------------------------------------- */

static void
res_format (const Res *r, GString *out)
{
  g_string_truncate (out, 0);
  if (r->ret < 0)
    g_string_append_printf (out, "-1 %s (%s)", strerrorname_np (r->err), g_strerror (r->err));
  else
    g_string_append_printf (out, "%ld%s%s", r->ret, r->detail->len ? " " : "", r->detail->str);
}

static void
count_result (Diff *d, Kind k, const Res *r)
{
  d->results[k][r->ret < 0]++;
  if (r->ret < 0)
    {
      gpointer key = GINT_TO_POINTER (r->err);
      g_hash_table_replace (d->errnos, key,
                            GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (d->errnos, key)) + 1));
    }
}

static void
mismatch (Diff *d, const Op *op, const char *what, const char *view, const char *plain)
{
  g_autoptr (GString) desc = g_string_new (NULL);

  op_describe (op, desc);
  fprintf (stderr, "MISMATCH at op #%u (seed %" G_GUINT64_FORMAT "): %s\n  %s\n  view:  %s\n  plain: %s\n", d->index,
           d->seed, desc->str, what, view, plain);
  repro_line (d, d->index + 1);
  fail_msg ("op #%u %s: %s", d->index, desc->str, what);
}

/* After a mutation, the objects it named (and their directories) must look
 * the same on both sides right away, through the kernel's caches. */
static void
compare_named (Diff *d, const Op *op)
{
  const char *paths[4] = { op->a, op->kind == K_RENAME || op->kind == K_LINK ? op->b : NULL, NULL, NULL };
  g_autofree char *pa = g_path_get_dirname (op->a);
  g_autofree char *pb = paths[1] != NULL ? g_path_get_dirname (op->b) : NULL;

  paths[2] = strcmp (pa, ".") != 0 ? pa : NULL;
  paths[3] = pb != NULL && strcmp (pb, ".") != 0 ? pb : NULL;
  for (guint i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      g_autoptr (GString) v = g_string_new (NULL), p = g_string_new (NULL);
      struct stat st;

      if (paths[i] == NULL)
        continue;
      if (fstatat (d->view.root_fd, paths[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
        g_string_append (v, g_strerror (errno));
      else
        append_stat (d, v, &st, false);
      if (fstatat (d->plain.root_fd, paths[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
        g_string_append (p, g_strerror (errno));
      else
        append_stat (d, p, &st, true);
      if (strcmp (v->str, p->str) != 0)
        {
          g_autofree char *what = g_strdup_printf ("afterwards, lstat(\"%s\") differs", paths[i]);
          mismatch (d, op, what, v->str, p->str);
        }
    }
}

static void
run_one (Diff *d, const Op *op)
{
  Res rv = { 0, 0, g_string_new (NULL) }, rp = { 0, 0, g_string_new (NULL) };
  g_autoptr (GString) sv = g_string_new (NULL), sp = g_string_new (NULL);

  apply (d, &d->view, op, &rv);
  apply (d, &d->plain, op, &rp);
  res_format (&rv, sv);
  res_format (&rp, sp);
  count_result (d, op->kind, &rp);
  if (d->verbose)
    {
      g_autoptr (GString) desc = g_string_new (NULL);
      op_describe (op, desc);
      fprintf (stderr, "#%u %s -> %s\n", d->index, desc->str, sp->str);
    }
  if (strcmp (sv->str, sp->str) != 0)
    mismatch (d, op, "the results differ", sv->str, sp->str);
  if (kind_mutates (op->kind))
    compare_named (d, op);
  g_string_free (rv.detail, TRUE);
  g_string_free (rp.detail, TRUE);
}

/* --- phase 2: protected names, against the policy's answer ----------------- */

typedef enum
{
  P_STAT,
  P_OPEN_READ,
  P_CREATE,
  P_MKDIR,
  P_UNLINK,
  P_RMDIR,
  P_CHMOD,
  P_UTIMENS,
  P_TRUNCATE,
  P_READDIR,
  P_READLINK,
  P_SYMLINK_AS,
  P_LINK_TO,
  P_LINK_FROM,
  P_RENAME_TO,
  P_RENAME_FROM,
  P_VIA_SYMLINK,
  P_COUNT
} PKind;

static char *
join (const char *dir, const char *name)
{
  return dir[0] ? g_strconcat (dir, "/", name, NULL) : g_strdup (name);
}

/* Expect errno WANT (0: success) from RET on the view; the plain side is
 * not touched. */
static void
expect_view (Diff *d, const char *desc, long ret, int err, int want)
{
  int got = ret < 0 ? err : 0;

  if (d->verbose)
    fprintf (stderr, "#%u (view only) %s -> %s\n", d->index, desc, got ? strerrorname_np (got) : "ok");
  if (got != want)
    {
      fprintf (stderr,
               "MISMATCH at op #%u (seed %" G_GUINT64_FORMAT "): %s (view only, protected name)\n"
               "  view:     %s\n  expected: %s (the policy's answer)\n",
               d->index, d->seed, desc, got ? strerrorname_np (got) : "success",
               want ? strerrorname_np (want) : "success");
      repro_line (d, d->index + 1);
      fail_msg ("op #%u %s: got %s, expected %s", d->index, desc, got ? strerrorname_np (got) : "success",
                want ? strerrorname_np (want) : "success");
    }
}

/* Run EXPR on the view, check its errno against WANT; with IS_FD, close
 * the descriptor it returned. */
#define VIEW_(expr, want, is_fd, ...)                                                                                  \
  do                                                                                                                   \
    {                                                                                                                  \
      g_autofree char *desc_ = g_strdup_printf (__VA_ARGS__);                                                          \
      long r_;                                                                                                         \
      errno = 0;                                                                                                       \
      r_ = (long)(expr);                                                                                               \
      expect_view (d, desc_, r_, errno, (want));                                                                       \
      if ((is_fd) && r_ >= 0)                                                                                          \
        close ((int)r_);                                                                                               \
    }                                                                                                                  \
  while (0)
#define VIEW(expr, want, ...) VIEW_ (expr, want, false, __VA_ARGS__)
#define VIEW_FD(expr, want, ...) VIEW_ (expr, want, true, __VA_ARGS__)

/* One operation that names a protected name (or reaches one through a
 * symlink), on the view only.  The answers: a hidden name does not exist
 * (ENOENT), for lookups and below it; creating it, by any of the five ways
 * (open O_CREAT, mkdir, symlink, link, rename), is EACCES; RENAME_EXCHANGE
 * with it is ENOENT (the kernel needs the target to exist). */
static void
run_protected (Diff *d)
{
  g_autoptr (GPtrArray) dirs = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) objects = g_ptr_array_new_with_free_func (g_free);
  const char *name = protected_pool[rng_below (&d->rng, G_N_ELEMENTS (protected_pool))];
  PKind kind = rng_below (&d->rng, P_COUNT);
  const char *dir;
  g_autofree char *path = NULL;
  g_autofree char *other = NULL; /* an existing object, for the two-name operations */
  bool other_is_dir = false;
  bool below;
  int fd = d->view.root_fd;
  struct stat st;
  char text[PATH_MAX];
  struct timespec ts[2] = { { 1000000000, 0 }, { 1000000000, 0 } };

  list_plain (d, d->plain.root_fd, "", dirs, objects);
  dir = dirs->pdata[rng_below (&d->rng, dirs->len)];
  /* the host's own stand-ins sit in the working root: aim there often */
  if (rng_chance (&d->rng, 40))
    dir = "";
  below = rng_chance (&d->rng, 25);
  {
    g_autofree char *p = join (dir, name);
    path = below ? g_strconcat (p, "/", pool[rng_below (&d->rng, G_N_ELEMENTS (pool))], NULL) : g_steal_pointer (&p);
  }
  /* the other end of link/rename: an object that is not DIR or above it
   * (moving a directory into itself is EINVAL before anything else) */
  for (guint tries = 0; tries < 8 && objects->len > 0 && other == NULL; tries++)
    {
      const char *o = objects->pdata[rng_below (&d->rng, objects->len)];
      gsize n = strlen (o + 1);
      if (o[0] == 'd' && (strcmp (o + 1, dir) == 0 || (strncmp (o + 1, dir, n) == 0 && dir[n] == '/')))
        continue;
      if (kind == P_LINK_TO && o[0] == 'd')
        continue;
      other = g_strdup (o + 1);
      other_is_dir = o[0] == 'd';
    }
  if (other == NULL && (kind == P_LINK_TO || kind == P_RENAME_TO))
    kind = P_STAT;
  (void)other_is_dir;
  d->protected_ops++;

  switch (kind)
    {
      case P_STAT:
        VIEW (fstatat (fd, path, &st, AT_SYMLINK_NOFOLLOW), ENOENT, "lstat(\"%s\")", path);
        break;
      case P_OPEN_READ:
        VIEW_FD (openat (fd, path, O_RDONLY | O_CLOEXEC), ENOENT, "open(\"%s\", O_RDONLY)", path);
        break;
      case P_CREATE:
        VIEW_FD (openat (fd, path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), below ? ENOENT : EACCES,
                 "open(\"%s\", O_CREAT|O_WRONLY)", path);
        break;
      case P_MKDIR:
        VIEW (mkdirat (fd, path, 0755), below ? ENOENT : EACCES, "mkdir(\"%s\")", path);
        break;
      case P_UNLINK:
        VIEW (unlinkat (fd, path, 0), ENOENT, "unlink(\"%s\")", path);
        break;
      case P_RMDIR:
        VIEW (unlinkat (fd, path, AT_REMOVEDIR), ENOENT, "rmdir(\"%s\")", path);
        break;
      case P_CHMOD:
        VIEW (fchmodat (fd, path, 0777, 0), ENOENT, "chmod(\"%s\", 0777)", path);
        break;
      case P_UTIMENS:
        VIEW (utimensat (fd, path, ts, AT_SYMLINK_NOFOLLOW), ENOENT, "utimensat(\"%s\")", path);
        break;
      case P_TRUNCATE:
        {
          g_autofree char *full = side_path (&d->view, path);
          VIEW (truncate (full, 0), ENOENT, "truncate(\"%s\", 0)", path);
        }
        break;
      case P_READDIR:
        VIEW_FD (openat (fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ENOENT, "opendir(\"%s\")", path);
        break;
      case P_READLINK:
        VIEW (readlinkat (fd, path, text, sizeof text), ENOENT, "readlink(\"%s\")", path);
        break;
      case P_SYMLINK_AS:
        VIEW (symlinkat ("a", fd, path), below ? ENOENT : EACCES, "symlink(text \"a\", \"%s\")", path);
        break;
      case P_LINK_TO:
        VIEW (linkat (fd, other, fd, path, 0), below ? ENOENT : EACCES, "link(\"%s\", \"%s\")", other, path);
        break;
      case P_LINK_FROM:
        VIEW (linkat (fd, path, fd, "zz-never", 0), ENOENT, "link(\"%s\", \"zz-never\")", path);
        break;
      case P_RENAME_TO:
        {
          guint r = rng_below (&d->rng, 3);
          unsigned flags = r == 0 ? 0 : r == 1 ? RENAME_NOREPLACE : RENAME_EXCHANGE;
          VIEW (renameat2 (fd, other, fd, path, flags), below || flags == RENAME_EXCHANGE ? ENOENT : EACCES,
                "rename(\"%s\", \"%s\", %s)", other, path,
                flags == 0                  ? "0"
                : flags == RENAME_NOREPLACE ? "RENAME_NOREPLACE"
                                            : "RENAME_EXCHANGE");
        }
        break;
      case P_RENAME_FROM:
        VIEW (renameat2 (fd, path, fd, "zz-never", 0), ENOENT, "rename(\"%s\", \"zz-never\")", path);
        break;
      case P_VIA_SYMLINK:
        {
          /* a symlink's text may name a protected object (it is only text);
           * the kernel resolves it inside the view, where it leads nowhere */
          g_autofree char *link = join (dir, "zz-link");
          const char *target = below ? ".git/HEAD" : name;
          VIEW (symlinkat (target, fd, link), 0, "symlink(text \"%s\", \"%s\")", target, link);
          VIEW (fstatat (fd, link, &st, 0), ENOENT, "stat(\"%s\") -> \"%s\"", link, target);
          VIEW_FD (openat (fd, link, O_RDONLY | O_CLOEXEC), ENOENT, "open(\"%s\" -> \"%s\", O_RDONLY)", link, target);
          VIEW_FD (openat (fd, link, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), below ? ENOENT : EACCES,
                   "open(\"%s\" -> \"%s\", O_CREAT|O_WRONLY)", link, target);
          VIEW (readlinkat (fd, link, text, sizeof text), (int)0, "readlink(\"%s\")", link);
          VIEW (unlinkat (fd, link, 0), 0, "unlink(\"%s\")", link);
          /* the same two changes to the plain directory, so that both
           * directories' mtimes moved (the follow-ups would create .git there) */
          if (symlinkat (target, d->plain.root_fd, link) < 0 || unlinkat (d->plain.root_fd, link, 0) < 0)
            fail_msg ("symlink and unlink %s in the plain tree: %s", link, g_strerror (errno));
        }
        break;
      case P_COUNT:
        g_assert_not_reached ();
    }
}

/* --- the two tests --------------------------------------------------------- */

static Diff *current; /* for teardown: close the handles before unmounting */

static guint
env_uint (const char *name, guint dflt)
{
  const char *v = g_getenv (name);

  return v != NULL && v[0] != '\0' ? (guint)g_ascii_strtoull (v, NULL, 10) : dflt;
}

/* STREAM tells the tests' sequences apart: one seed replays all three. */
static Diff *
diff_new (MFx *fx, guint64 stream, bool protected_phase)
{
  Diff *d = g_new0 (Diff, 1);
  const char *seed = g_getenv ("FUSEBOX_DIFF_SEED");

  d->fx = fx;
  d->protected_phase = protected_phase;
  d->seed = seed != NULL && seed[0] != '\0' ? g_ascii_strtoull (seed, NULL, 10)
                                            : ((guint64)g_random_int () << 32 | g_random_int ());
  d->n_ops = env_uint ("FUSEBOX_DIFF_OPS", 10000);
  if (protected_phase)
    d->n_ops = MAX (d->n_ops / 6, 1);
  d->check_every = MAX (env_uint ("FUSEBOX_DIFF_CHECK", 500), 1);
  d->verbose = g_strcmp0 (g_getenv ("FUSEBOX_DIFF_VERBOSE"), "1") == 0;
  d->rng.s = d->seed ^ stream;
  d->buf = g_malloc (MAX_WRITE + 8);
  d->errnos = g_hash_table_new (NULL, NULL);
  d->started = time (NULL);
  d->host_view_top = mfx_on_host (fx, "/v");
  d->plain_top = mfx_on_host (fx, "/p");
  d->view_top = mfx_in_mount (fx, "/v");
  assert_int_equal (g_mkdir_with_parents (mfx_on_host (fx, "/v/" PAD), 0755), 0);
  assert_int_equal (g_mkdir_with_parents (mfx_on_host (fx, "/p/" PAD), 0755), 0);
  for (guint i = 0; i < N_SLOTS; i++)
    d->view.fds[i] = d->plain.fds[i] = -1;
  d->view.root_fd = d->plain.root_fd = -1;
  fprintf (stderr, "%s: seed %" G_GUINT64_FORMAT ", %u operations (replay: FUSEBOX_DIFF_SEED=%" G_GUINT64_FORMAT ")\n",
           fx->test_name, d->seed, d->n_ops, d->seed);
  current = d;
  return d;
}

static void
diff_open_sides (Diff *d)
{
  d->view.label = "view";
  d->view.root = mfx_m (d->fx, "/v/" PAD);
  d->plain.label = "plain";
  d->plain.root = mfx_h (d->fx, "/p/" PAD);
  d->view.root_fd = open (d->view.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (d->view.root_fd < 0)
    fail_msg ("open %s (through the mount): %s", d->view.root, g_strerror (errno));
  d->plain.root_fd = open (d->plain.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true (d->plain.root_fd >= 0);
}

static void
side_close (Side *s)
{
  for (guint i = 0; i < N_SLOTS; i++)
    if (s->fds[i] >= 0)
      {
        close (s->fds[i]);
        s->fds[i] = -1;
      }
  if (s->root_fd >= 0)
    close (s->root_fd);
  s->root_fd = -1;
  g_clear_pointer (&s->root, g_free);
}

static void
diff_free (Diff *d)
{
  if (d == NULL)
    return;
  side_close (&d->view);
  side_close (&d->plain);
  g_free (d->buf);
  g_hash_table_unref (d->errnos);
  if (current == d)
    current = NULL;
  g_free (d);
}

static int
diff_teardown (void **state)
{
  diff_free (current);
  return mfx_teardown (state);
}

static const char policy_template[] =
  "{ \"version\": 1,\n"
  "  \"rules\": [\n"
  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"the system\" },\n"
  "  { \"path\": \"@H@/v\", \"access\": \"write\", \"why\": \"the view side\" } ] }\n";

/* FUSEBOX_DIFF_CACHE_TIMEOUT=S mounts with --cache-timeout=S, whatever the
 * test chose. */
static void
diff_mount (Diff *d)
{
  const char *t = g_getenv ("FUSEBOX_DIFF_CACHE_TIMEOUT");
  g_autofree char *arg = NULL;

  if (t != NULL && t[0] != '\0')
    d->cache_timeout = t;
  if (d->cache_timeout != NULL)
    arg = g_strconcat ("--cache-timeout=", d->cache_timeout, NULL);
  fprintf (stderr, "  kernel caches: %s%s; hard links %s\n", arg != NULL ? arg : "the mount's default",
           arg != NULL ? " s" : "", d->links ? "in the mix" : "left out");
  mfx_mount (d->fx, policy_template, arg, NULL);
}

static guint
errno_count (Diff *d, int e)
{
  return GPOINTER_TO_UINT (g_hash_table_lookup (d->errnos, GINT_TO_POINTER (e)));
}

static void
print_summary (Diff *d, gint64 t0)
{
  g_autoptr (GString) s = g_string_new (NULL);
  GHashTableIter it;
  gpointer k, v;

  g_string_append_printf (s, "%u operations in %.1f s, %u whole-tree comparisons", d->n_ops,
                          (g_get_monotonic_time () - t0) / 1e6, d->tree_checks);
  if (d->protected_phase)
    g_string_append_printf (s, ", %u on protected names (view only)", d->protected_ops);
  g_string_append (s, "\n  ok/failed per op:");
  for (guint i = 0; i < K_COUNT; i++)
    g_string_append_printf (s, " %s %u/%u", kind_names[i], d->results[i][0], d->results[i][1]);
  g_string_append (s, "\n  errnos (plain side):");
  g_hash_table_iter_init (&it, d->errnos);
  while (g_hash_table_iter_next (&it, &k, &v))
    g_string_append_printf (s, " %s %u", strerrorname_np (GPOINTER_TO_INT (k)), GPOINTER_TO_UINT (v));
  fprintf (stderr, "%s\n", s->str);
}

static void
run_sequence (Diff *d)
{
  gint64 t0 = g_get_monotonic_time ();

  for (d->index = 0; d->index < d->n_ops; d->index++)
    {
      Op op;
      if (d->protected_phase && rng_chance (&d->rng, 25))
        run_protected (d);
      else
        {
          gen_op (d, &op);
          run_one (d, &op);
        }
      if ((d->index + 1) % d->check_every == 0)
        compare_all_trees (d);
    }
  d->index = d->n_ops - 1;
  /* close the handles first: a file unlinked while open must be gone from
   * both trees too */
  for (guint i = 0; i < N_SLOTS; i++)
    {
      Op op = { .kind = K_CLOSE, .slot = (int)i };
      run_one (d, &op);
    }
  compare_all_trees (d);
  print_summary (d, t0);
}

/* The name pool must make collisions common, or the test proves little. */
static void
assert_collisions (Diff *d)
{
  static const int wanted[] = { ENOENT, EEXIST, ENOTEMPTY, EISDIR, ENOTDIR, ELOOP, EBADF };

  if (d->n_ops < 5000)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (wanted); i++)
    if (errno_count (d, wanted[i]) < 10)
      fail_msg ("only %u results were %s: the name pool no longer makes collisions", errno_count (d, wanted[i]),
                strerrorname_np (wanted[i]));
}

/* Mount D, compare both sides' trees, then run the whole sequence on
 * both. */
static void
run_differential (Diff *d)
{
  diff_mount (d);
  diff_open_sides (d);
  compare_all_trees (d);
  run_sequence (d);
}

/* Every operation, hard links included, with the kernel's name and
 * attribute caches off (--cache-timeout=0): the view's own semantics. */
MFX_CASE (test_differential)
{
  Diff *d = diff_new (fx, 0, false);

  d->links = true;
  d->cache_timeout = "0";
  run_differential (d);
  assert_collisions (d);
}

/* The same with the kernel's caches as users get them (the mount's default
 * timeouts, 60 s): what a process sees right after its own changes.  A
 * host inode reached by two names (a hard link) is two FUSE inodes, each
 * with its own cached attributes: after link(a, b), or a write, truncate or
 * utimens through one name, the view invalidates the other's at once, so
 * lstat(a) shows the new link count, size and mtime. */
MFX_CASE (test_differential_cached)
{
  Diff *d = diff_new (fx, 0x636163686564ULL, false);

  d->links = true;
  run_differential (d);
  assert_collisions (d);
}

MFX_CASE (test_protected)
{
  Diff *d = diff_new (fx, 0x70726f74656374ULL, true);
  g_autofree char *git_before = NULL, *codex_before = NULL;
  g_autofree char *git_after = NULL, *codex_after = NULL;
  g_autofree char *log = NULL;

  /* the host's own protected objects, in the view side's working root */
  mfx_write (fx, "/v/" PAD "/.git/HEAD", "ref: refs/heads/main\n");
  mfx_write (fx, "/v/" PAD "/.codex", "stand-in for an agent's private state\n");
  mfx_assert_host_readable (fx, "/v/" PAD "/.git/HEAD");
  mfx_assert_host_readable (fx, "/v/" PAD "/.codex");
  git_before = mfx_sum (fx, "/v/" PAD "/.git");
  codex_before = mfx_sum (fx, "/v/" PAD "/.codex");

  /* the default caches, hard links included (see test_differential_cached) */
  d->links = true;
  run_differential (d);
  assert_true (d->protected_ops > 0);

  git_after = mfx_sum (fx, "/v/" PAD "/.git");
  codex_after = mfx_sum (fx, "/v/" PAD "/.codex");
  assert_string_equal (git_before, git_after);
  assert_string_equal (codex_before, codex_after);
  /* the attempts to create a protected name were denied in the log */
  diff_free (d);
  mfx_unmount (fx);
  log = mfx_log (fx);
  if (!test_log_has (log, "/.git", "\"errno\":13", NULL) && !test_log_has (log, "/.codex", "\"errno\":13", NULL) &&
      !test_log_has (log, "/.agents", "\"errno\":13", NULL))
    fail_msg ("no EACCES for a protected name in the access log %s", fx->log_path);
}

MFX_DEFINE_MAIN (cmocka_unit_test_setup_teardown (test_differential, mfx_setup, diff_teardown),
                 cmocka_unit_test_setup_teardown (test_differential_cached, mfx_setup, diff_teardown),
                 cmocka_unit_test_setup_teardown (test_protected, mfx_setup, diff_teardown))
