/* fusebox — how deep a host tree goes, for a rename that would move it
 * deeper (fs.h, Bounds).
 *
 * A rename's new name is checked like any name (FB_VIEW_PATH_MAX), but a
 * directory carries its whole tree along: moving a chain under another,
 * again and again, built host trees of any depth, each level a path the
 * view could not decide.  So before a directory moves to a longer path,
 * view_tree_fits() measures the longest path below it on the host, and the
 * rename is refused when that would pass the limit.
 *
 * The walk is bounded three ways, whatever the sandbox made:
 *  - descriptors: at most two of its own (the directory it reads and, for
 *    a moment, the next one).  It goes down by name and back up by "..",
 *    checked to be the directory it came from (st_dev, st_ino); of the
 *    directories above, only their identity and the offset to go on
 *    reading from are kept.  A directory moved meanwhile ends the walk
 *    (EXDEV).
 *  - depth: it never goes past the room the new path leaves
 *    (ENAMETOOLONG as soon as one name does not fit), so at most
 *    FB_VIEW_PATH_MAX / 2 levels are kept.
 *  - time: at most VIEW_DEPTH_WALK_MAX entries are read; past that the
 *    rename gets EXDEV, as between filesystems: mv then copies, and each
 *    name it makes is checked on its own.
 * Symlinks are never followed (a link's text is not part of the path). */
#include "fs/fs-private.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

typedef struct
{
  dev_t dev;
  ino_t ino;
  off_t resume; /* where to go on reading it when the walk comes back up */
  gsize len;    /* bytes of its path below the walk's top ("/a/b"; 0 for the top) */
} DepthLevel;

/* The directory NAME below PARENT_FD, opened to be read, with its identity
 * in RET_ST; -EXDEV when it is on another device than DEV (not 0): another
 * filesystem is not opened, nor asked anything (another user's FUSE
 * filesystem may never answer), and the rename is refused as between
 * filesystems. */
static int
open_dir (int parent_fd, const char *name, dev_t dev, struct stat *ret_st)
{
  _fb_cleanup_fd_ int path = openat (parent_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  int fd, r;

  if (path < 0)
    return -errno;
  r = host_identity_fd (path, ret_st);
  if (r < 0)
    return r;
  if (!S_ISDIR (ret_st->st_mode))
    return -ENOTDIR;
  if (dev != 0 && ret_st->st_dev != dev)
    return -EXDEV;
  fd = openat (path, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
  return fd >= 0 ? fd : -errno;
}

int
view_tree_fits (int parent_fd, const char *name, gsize room)
{
  g_autoptr (GArray) stack = g_array_new (FALSE, FALSE, sizeof (DepthLevel));
  _fb_cleanup_fd_ int fd = -1;
  char buf[16 * 1024];
  guint entries = 0;
  struct stat st;
  DepthLevel top = { 0 };
  int r = host_identity_fd (parent_fd, &st);

  if (r < 0)
    return r;
  /* (a mount point is not renamed: the host says EBUSY) */
  fd = open_dir (parent_fd, name, st.st_dev, &st);
  if (fd < 0)
    return fd == -ENOTDIR ? 0 : fd;
  top.dev = st.st_dev;
  top.ino = st.st_ino;
  g_array_append_val (stack, top);
  for (;;)
    {
      DepthLevel *cur = &g_array_index (stack, DepthLevel, stack->len - 1);
      bool descended = false;
      long n;

      if (lseek (fd, cur->resume, SEEK_SET) < 0)
        return -EXDEV;
      while (!descended && (n = syscall (SYS_getdents64, fd, buf, sizeof buf)) > 0)
        for (long off = 0; off < n;)
          {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            gsize len;
            int child;

            off += d->d_reclen;
            if (strcmp (d->d_name, ".") == 0 || strcmp (d->d_name, "..") == 0)
              continue;
            if (++entries > VIEW_DEPTH_WALK_MAX)
              return -EXDEV;
            len = cur->len + 1 + strlen (d->d_name);
            if (len > room)
              return -ENAMETOOLONG;
            if (d->d_type != DT_DIR && d->d_type != DT_UNKNOWN)
              continue;
            child = open_dir (fd, d->d_name, top.dev, &st);
            if (child == -ENOTDIR || child == -ENOENT || child == -ELOOP)
              continue; /* not a directory after all, or gone */
            if (child < 0)
              return -EXDEV; /* can't be measured: refused as too far to move */
            /* go down; come back after this entry */
            cur->resume = d->d_off;
            close (fd);
            fd = child;
            {
              DepthLevel next = { .dev = st.st_dev, .ino = st.st_ino, .resume = 0, .len = len };
              g_array_append_val (stack, next);
            }
            descended = true;
            break;
          }
      if (descended)
        continue;
      if (n < 0)
        return errno == ENOENT ? -EXDEV : -errno;
      /* this directory is done: back up */
      g_array_set_size (stack, stack->len - 1);
      if (stack->len == 0)
        return 0;
      {
        DepthLevel *up = &g_array_index (stack, DepthLevel, stack->len - 1);
        int parent = open_dir (fd, "..", up->dev, &st);
        if (parent < 0)
          return -EXDEV;
        close (fd);
        fd = parent;
        if (st.st_dev != up->dev || st.st_ino != up->ino)
          return -EXDEV; /* moved meanwhile */
      }
    }
}
