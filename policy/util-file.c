/* fusebox — reading a file whole (policy/util-file.h).
 *
 * Whoever chose what is at a name fusebox reads (a policy from a cloned
 * repository, a token file, a log in a shared directory) must not be able
 * to hang fusebox or make it allocate without bound:
 *  - The open can't block: a FIFO blocks open(2) until a writer comes, and
 *    a device's open may wait on hardware.  O_NONBLOCK, then fstat on the
 *    descriptor itself, which is what would be read: anything but a regular
 *    file is refused, whatever the name held a moment before (a link to
 *    /dev/zero is a character device here, never read).  O_NONBLOCK is
 *    cleared after (it means nothing for a regular file, but the descriptor
 *    should not carry it).  O_NOCTTY: a terminal opened by mistake never
 *    becomes ours.  (A device is opened before it is refused; only someone
 *    who may make device nodes can put one there.)
 *  - fusebox's own files are opened with O_NOFOLLOW: a link would show
 *    another file as the log.  A file someone named may be a link to a
 *    regular file.
 *  - A whole file read here has a size limit: its size is checked before
 *    the read, and the read stops past the limit (the file may grow).
 *
 * No state; any thread. */
#include "policy/util-file.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *
fb_file_kind (mode_t mode)
{
  switch (mode & S_IFMT)
    {
      case S_IFREG:
        return "a regular file";
      case S_IFDIR:
        return "a directory";
      case S_IFLNK:
        return "a symbolic link";
      case S_IFIFO:
        return "a FIFO";
      case S_IFSOCK:
        return "a socket";
      case S_IFCHR:
        return "a character device";
      case S_IFBLK:
        return "a block device";
      default:
        return "a file of unknown type";
    }
}

/* DIR_FD/NAME is not a regular file: ST is what the descriptor (or, when the
 * open failed, the name itself) is. */
static void
set_not_regular (int dir_fd, const char *name, const char *what, const char *path, FbFileFlags flags,
                 const struct stat *st, GError **error)
{
  char target[4096];
  ssize_t n = readlinkat (dir_fd, name, target, sizeof target - 1);

  target[n > 0 ? n : 0] = '\0';
  if ((flags & FB_FILE_OWN) && S_ISLNK (st->st_mode))
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                 "%s %s is a symbolic link (to %s), not a regular file; fusebox never reads it through a link: "
                 "name the file itself, or, if you did not make the link, look at it and remove it",
                 what, path, n > 0 ? target : "?");
  else if (flags & FB_FILE_OWN)
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                 "%s %s is %s, not a regular file; fusebox reads it only from a regular file, and did not put that "
                 "there: look at it, then remove it",
                 what, path, fb_file_kind (st->st_mode));
  else
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                 "%s %s is %s%s%s%s, not a regular file; fusebox reads it only from a regular file (a FIFO or a "
                 "device could keep it waiting, or reading, for good): save what it should hold in a regular file "
                 "and name that",
                 what, path, fb_file_kind (st->st_mode), n > 0 ? " (through a symbolic link to " : "",
                 n > 0 ? target : "", n > 0 ? ")" : "");
}

/* FB_FILE_OWN's open of DIR_FD/NAME: found first as O_PATH, never
 * through a link (which asks no filesystem anything, not even a FUSE
 * mount's server), and opened through that descriptor only when it is a
 * regular file on its directory's filesystem.  Another user's FUSE mount
 * at the name (over a file of theirs, beside a log in a shared directory)
 * whose server never answers held the open, and `fusebox log`, for good.
 * The descriptor, or -1 with errno (nothing said), or -2 (refused, said). */
static int
open_own (int dir_fd, const char *name, const char *what, const char *path, GError **error)
{
  struct stat st;
  _fb_cleanup_fd_ int pfd = fb_open_path_on_dir_fs (dir_fd, name, &st);

  if (pfd < 0 && errno == EXDEV)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                   "%s %s is not on its directory's filesystem: another filesystem is mounted at its name, which "
                   "fusebox did not put there, and it is not read (its server may never answer); find it in "
                   "/proc/self/mountinfo, and take it off",
                   what, path);
      return -2;
    }
  if ((pfd < 0 && errno == ELOOP) || (pfd >= 0 && !S_ISREG (st.st_mode)))
    {
      set_not_regular (dir_fd, name, what, path, FB_FILE_OWN, &st, error);
      return -2;
    }
  if (pfd < 0)
    return -1;
  return fb_reopen_path (pfd, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
}

int
fb_file_open_regular (int dir_fd, const char *name, const char *path, const char *what, FbFileFlags flags,
                      GError **error)
{
  struct stat st;
  _fb_cleanup_fd_ int fd = -1;
  _fb_cleanup_fd_ int way = -1;
  g_autofree char *base = NULL;
  int fl;

  if (path == NULL)
    path = name;
  /* fusebox's own file by its path: the directory walked first (another
   * user's FUSE filesystem on the way, or a link into one that they swap
   * in, is refused, not asked), the name opened in what the walk found */
  if ((flags & FB_FILE_OWN) && dir_fd == AT_FDCWD && strchr (name, '/') != NULL)
    {
      g_autofree char *dir = g_path_get_dirname (name);
      g_autofree char *dir_what = g_strdup_printf ("the directory of %s", what);

      way = fb_path_open_not_foreign_fuse (dir, dir_what, "give a file on a filesystem of yours or root's", error);
      if (way == -1)
        return -1;
      if (way == -2)
        {
          g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT, "can't open %s %s: %s", what, path,
                       g_strerror (ENOENT));
          return -1;
        }
      base = g_path_get_basename (name);
      dir_fd = way;
      name = base;
    }
  if (flags & FB_FILE_OWN)
    fd = open_own (dir_fd, name, what, path, error);
  else if (dir_fd == AT_FDCWD)
    {
      /* the object the walk found (one on another user's FUSE filesystem
       * is refused: its open would wait for good), not the path again */
      _fb_cleanup_fd_ int pfd =
        fb_path_open_not_foreign_fuse (name, what, "give a file on a filesystem of yours or root's", error);

      if (pfd == -1)
        return -1;
      if (pfd >= 0)
        fd = fb_reopen_path (pfd, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      else
        {
          errno = ENOENT;
          fd = -1;
        }
    }
  else
    fd = openat (dir_fd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd == -2)
    return -1; /* refused, said */
  if (fd < 0)
    {
      int errsv = errno;
      /* ELOOP: a symbolic link (O_NOFOLLOW); ENXIO: a socket, or a device
       * without a driver.  Say what is there. */
      if (errsv != ENOENT && fstatat (dir_fd, name, &st, (flags & FB_FILE_OWN) ? AT_SYMLINK_NOFOLLOW : 0) == 0 &&
          !S_ISREG (st.st_mode))
        set_not_regular (dir_fd, name, what, path, flags, &st, error);
      else
        g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "can't open %s %s: %s", what, path,
                     g_strerror (errsv));
      return -1;
    }
  if (fstat (fd, &st) < 0)
    {
      int errsv = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "can't look at %s %s: %s", what, path,
                   g_strerror (errsv));
      return -1;
    }
  if (!S_ISREG (st.st_mode))
    {
      set_not_regular (dir_fd, name, what, path, flags, &st, error);
      return -1;
    }
  fl = fcntl (fd, F_GETFL);
  if (fl >= 0)
    fcntl (fd, F_SETFL, fl & ~O_NONBLOCK);
  return fb_steal_fd (&fd);
}

static void
set_too_large (const char *what, const char *path, FbFileFlags flags, const char *size, gsize max, GError **error)
{
  if (flags & FB_FILE_OWN)
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                 "%s %s is larger than %" G_GSIZE_FORMAT " bytes; fusebox never writes one that large", what, path,
                 max);
  else
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                 "%s %s is too large: %s bytes, and fusebox reads at most %" G_GSIZE_FORMAT
                 " bytes of it: check that it is the file you meant",
                 what, path, size, max);
}

char *
fb_file_read_regular (const char *path, const char *what, FbFileFlags flags, gsize max, gsize *ret_len, GError **error)
{
  g_autoptr (GString) text = NULL;
  char buf[64 * 1024];
  struct stat st = { 0 };
  _fb_cleanup_fd_ int fd = fb_file_open_regular (AT_FDCWD, path, path, what, flags, error);

  if (fd < 0)
    return NULL;
  if (fstat (fd, &st) == 0 && (guint64)st.st_size > max)
    {
      g_autofree char *size = g_strdup_printf ("%" G_GUINT64_FORMAT, (guint64)st.st_size);

      set_too_large (what, path, flags, size, max, error);
      return NULL;
    }
  text = g_string_sized_new (st.st_size > 0 ? (gsize)st.st_size + 1 : 64);
  for (;;)
    {
      ssize_t n = read (fd, buf, sizeof buf);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int errsv = errno;
          g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "reading %s %s: %s", what, path,
                       g_strerror (errsv));
          return NULL;
        }
      if (n == 0)
        break;
      if (text->len + (gsize)n > max)
        {
          g_autofree char *size = g_strdup_printf ("more than %" G_GSIZE_FORMAT, max);

          /* it grew while we read */
          set_too_large (what, path, flags, size, max, error);
          return NULL;
        }
      g_string_append_len (text, buf, n);
    }
  if (ret_len != NULL)
    *ret_len = text->len;
  return g_string_free (g_steal_pointer (&text), FALSE);
}
