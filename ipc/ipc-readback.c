/* fusebox — reading fusebox's own files back: access logs and run.json.
 *
 * `fusebox log`, `report` and `runs` read files in run directories, and
 * whoever can write there (a sandbox under a policy that showed them, before
 * they were hidden by identity; another user, for a --run-dir or --log in a
 * shared place) chooses what is at each name.  So:
 *  - A name is opened only when it is a regular file, and never through a
 *    symbolic link (O_NOFOLLOW): a link would show another file as the log.
 *  - The open can't block: a FIFO blocks open(2) until a writer comes (a
 *    sandbox that replaced its log with one hung `fusebox log` for good),
 *    and a device's open may wait on hardware.  O_NONBLOCK, then fstat on
 *    the descriptor itself, which is what would be read: anything but a
 *    regular file is refused, whatever the name held a moment before.
 *    O_NONBLOCK is cleared after (it means nothing for a regular file, but
 *    the descriptor should not carry it).  O_NOCTTY: a terminal opened by
 *    mistake never becomes ours.  (A device is opened before it is refused;
 *    only someone who may make device nodes can put one there.)
 *  - Content is bounded: a whole file read here has a size limit, and JSON
 *    text is measured for nesting before json-glib parses it (its parser
 *    and its tree's destructor recurse once per level: a line of a few
 *    hundred thousand '[' overflowed the stack of `fusebox log`).
 *
 * No state; any thread. */
#include "ipc/ipc-private.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *
fb_ipc_file_kind (mode_t mode)
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

/* DIR_FD/NAME is not a regular file (ST: a link is a link). */
static void
set_not_regular (int dir_fd, const char *name, const char *what, const char *path, const struct stat *st,
                 GError **error)
{
  if (S_ISLNK (st->st_mode))
    {
      char target[4096];
      ssize_t n = readlinkat (dir_fd, name, target, sizeof target - 1);

      target[n > 0 ? n : 0] = '\0';
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                   "%s %s is a symbolic link (to %s), not a regular file; fusebox never reads it through a link: "
                   "name the file itself, or, if you did not make the link, look at it and remove it",
                   what, path, n > 0 ? target : "?");
      return;
    }
  g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
               "%s %s is %s, not a regular file; fusebox reads it only from a regular file, and did not put that "
               "there: look at it, then remove it",
               what, path, fb_ipc_file_kind (st->st_mode));
}

int
fb_ipc_open_regular (int dir_fd, const char *name, const char *path, const char *what, GError **error)
{
  struct stat st;
  _fb_cleanup_fd_ int fd = -1;
  int flags;

  if (path == NULL)
    path = name;
  fd = openat (dir_fd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    {
      int errsv = errno;
      /* ELOOP: a symbolic link (O_NOFOLLOW); ENXIO: a socket, or a device
       * without a driver.  Say what is there. */
      if (errsv != ENOENT && fstatat (dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG (st.st_mode))
        set_not_regular (dir_fd, name, what, path, &st, error);
      else
        g_set_error (error, FB_IPC_ERROR, errsv == ENOENT ? FB_IPC_ERROR_NOT_FOUND : FB_IPC_ERROR_IO,
                     "can't open %s %s: %s", what, path, g_strerror (errsv));
      return -1;
    }
  if (fstat (fd, &st) < 0)
    {
      int errsv = errno;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "can't look at %s %s: %s", what, path, g_strerror (errsv));
      return -1;
    }
  if (!S_ISREG (st.st_mode))
    {
      set_not_regular (dir_fd, name, what, path, &st, error);
      return -1;
    }
  flags = fcntl (fd, F_GETFL);
  if (flags >= 0)
    fcntl (fd, F_SETFL, flags & ~O_NONBLOCK);
  return fb_steal_fd (&fd);
}

char *
fb_ipc_read_regular (const char *path, const char *what, gsize max, gsize *ret_len, GError **error)
{
  g_autoptr (GString) text = NULL;
  char buf[64 * 1024];
  _fb_cleanup_fd_ int fd = fb_ipc_open_regular (AT_FDCWD, path, path, what, error);

  if (fd < 0)
    return NULL;
  text = g_string_new (NULL);
  for (;;)
    {
      ssize_t n = read (fd, buf, sizeof buf);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int errsv = errno;
          g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "reading %s %s: %s", what, path, g_strerror (errsv));
          return NULL;
        }
      if (n == 0)
        break;
      if (text->len + (gsize)n > max)
        {
          g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                       "%s %s is larger than %" G_GSIZE_FORMAT " bytes; fusebox never writes one that large", what,
                       path, max);
          return NULL;
        }
      g_string_append_len (text, buf, n);
    }
  if (ret_len != NULL)
    *ret_len = text->len;
  return g_string_free (g_steal_pointer (&text), FALSE);
}

gboolean
fb_json_is_plain (const char *text, gsize len, guint max_depth, gboolean *ret_too_deep)
{
  guint depth = 0;
  gboolean in_string = FALSE;

  *ret_too_deep = FALSE;
  for (gsize i = 0; i < len; i++)
    {
      char c = text[i];

      if (in_string)
        {
          if (c == '\\')
            i++; /* the escaped character, whatever it is */
          else if (c == '"')
            in_string = FALSE;
          continue;
        }
      /* Outside strings, only what plain JSON writes: json-glib also takes
       * comments and single-quoted strings, inside which brackets would not
       * count here but a '"' would. */
      if (c == '"')
        in_string = TRUE;
      else if (c == '[' || c == '{')
        {
          if (++depth > max_depth)
            {
              *ret_too_deep = TRUE;
              return FALSE;
            }
        }
      else if (c == ']' || c == '}')
        {
          if (depth > 0)
            depth--;
        }
      else if (strchr (" \t\r\n:,-+.0123456789eEtrufalsn", c) == NULL || c == '\0')
        return FALSE;
    }
  return TRUE;
}
