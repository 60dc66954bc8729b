/* fusebox — the view's steps on the host: one name below a held
 * descriptor, a node's host object (opened again by name, checked to be
 * the same), its attributes, and creating as the caller.
 *
 * Every host object is reached from a held O_PATH descriptor, one checked
 * name at a time (check_name), never by a host path string; a node that
 * holds no descriptor of its own is found again from its parent's and
 * compared with what it was (st_dev, st_ino, type): ESTALE when the host
 * put another object there.  Directories' descriptors are fs-view-fd.c's.
 */
#include "fs/fs-private.h"

#include <linux/openat2.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>

/* --- one name below a descriptor --------------------------------------------- */

void
proc_fd_path (char buf[static 32], int fd)
{
  g_snprintf (buf, 32, "/proc/self/fd/%d", fd);
}

static int openat2_state; /* 0 unknown, 1 works, -1 ENOSYS */
static int host_open_child_once (int parent_fd, const char *name);

/* One name below PARENT_FD as O_PATH, never following it.  openat2 adds the
 * kernel's own guarantee (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS) on top of the name check; plain openat with
 * O_NOFOLLOW is equivalent for a single checked name, and is the fallback on
 * kernels before 5.6. */
int
host_open_child (int parent_fd, const char *name)
{
  int fd = host_open_child_once (parent_fd, name);

  /* the limit may have been lowered (prlimit) or met by everything else
   * the process holds: the cache gives some back, once */
  if (fd == -EMFILE || fd == -ENFILE)
    {
      view_fd_pressure ();
      fd = host_open_child_once (parent_fd, name);
    }
  return fd;
}

static int
host_open_child_once (int parent_fd, const char *name)
{
  int fd;

  if (g_atomic_int_get (&openat2_state) >= 0)
    {
      struct open_how how = {
        .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
      };
      fd = (int)syscall (SYS_openat2, parent_fd, name, &how, sizeof how);
      if (fd >= 0)
        return fd;
      if (errno != ENOSYS)
        return -errno;
      g_atomic_int_set (&openat2_state, -1);
    }
  fd = openat (parent_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  return fd >= 0 ? fd : -errno;
}

bool
host_name_exists (FbViewNode *parent, const char *name)
{
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  struct stat st;
  int pfd;

  if (!node_is_host_dir (parent))
    return false;
  pfd = node_fd_get (parent, &hold);
  return pfd >= 0 && fstatat (pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* --- a node's host object --------------------------------------------------- */

/* The parent and name of a reopened node, as they are now (a rename
 * through the view moves them). */
static FbViewNode *
node_parent_name (FbViewNode *node, char **ret_name)
{
  FbView *view = node_view (node);
  FbViewNode *parent;

  g_mutex_lock (&view->lock);
  parent = node->parent != NULL ? fb_view_node_ref (node->parent) : NULL;
  *ret_name = g_strdup (node_name (node));
  g_mutex_unlock (&view->lock);
  return parent;
}

static int
same_host_object (FbViewNode *node, const struct stat *st)
{
  if (st->st_ino != node->ino || st->st_dev != node->dev || (st->st_mode & S_IFMT) != node->type)
    return -ESTALE;
  return 0;
}

int
node_check_fd (FbViewNode *node, int fd)
{
  struct stat st;

  if (fstat (fd, &st) < 0)
    return -errno;
  return same_host_object (node, &st);
}

/* One fstatat by name from the parent's descriptor: no descriptor opened
 * for a getattr (the common case of a reopened node). */
static int
host_stat_child (FbViewNode *node, struct stat *ret_st)
{
  g_autofree char *name = NULL;
  g_autoptr (FbViewNode) parent = node_parent_name (node, &name);
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  int pfd;

  if (parent == NULL || !node_is_host_dir (parent))
    return -ESTALE;
  pfd = node_fd_get (parent, &hold);
  if (pfd < 0)
    return pfd;
  if (fstatat (pfd, name, ret_st, AT_SYMLINK_NOFOLLOW) < 0)
    return -errno;
  return same_host_object (node, ret_st);
}

int
node_host_fd (FbViewNode *node, int *tmp)
{
  g_autofree char *name = NULL;
  g_autoptr (FbViewNode) parent = NULL;
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  NodeExtra *x;
  int fd, pfd, r;

  *tmp = -1;
  if (node->evictable)
    {
      /* the caller may keep it past any eviction */
      _fb_cleanup_node_fd_ NodeFd own = NODE_FD_INIT;
      fd = node_fd_get (node, &own);
      if (fd < 0)
        return fd;
      *tmp = fcntl (fd, F_DUPFD_CLOEXEC, 3);
      return *tmp >= 0 ? *tmp : -errno;
    }
  if (!node->reopen)
    return node->host_fd;
  x = node_extra_peek (node);
  if (x != NULL)
    {
      g_mutex_lock (&x->lock);
      if (x->open_files != NULL)
        *tmp = fcntl (x->open_files->fd, F_DUPFD_CLOEXEC, 3);
      g_mutex_unlock (&x->lock);
    }
  if (*tmp >= 0)
    return *tmp;
  parent = node_parent_name (node, &name);
  if (parent == NULL || !node_is_host_dir (parent))
    return -ESTALE;
  pfd = node_fd_get (parent, &hold);
  if (pfd < 0)
    return pfd;
  /* check_name() held when the node was made, and the name is only ever
   * replaced by another checked one (rename) */
  fd = host_open_child (pfd, name);
  if (fd < 0)
    return fd;
  r = node_check_fd (node, fd);
  if (r < 0)
    {
      close (fd);
      return r;
    }
  *tmp = fd;
  return fd;
}

int
node_proc_path (FbViewNode *node, char proc[static 32], int *tmp)
{
  int fd = node_host_fd (node, tmp);

  if (fd < 0)
    return fd == -1 ? -EBADF : fd;
  proc_fd_path (proc, fd);
  return 0;
}

int
node_stat (FbView *view, FbViewNode *node, struct stat *ret_st)
{
  if (node->reopen)
    {
      NodeExtra *x = node_extra_peek (node);
      int r = 1;
      if (x != NULL)
        {
          g_mutex_lock (&x->lock);
          if (x->open_files != NULL)
            r = fstat (x->open_files->fd, ret_st) < 0 ? -errno : 0;
          g_mutex_unlock (&x->lock);
        }
      return r <= 0 ? r : host_stat_child (node, ret_st);
    }
  if (node->kind == NODE_HOST)
    {
      _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
      int fd = node_fd_get (node, &hold);
      if (fd < 0)
        return fd;
      if (fstatat (fd, "", ret_st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
      return 0;
    }
  memset (ret_st, 0, sizeof *ret_st);
  ret_st->st_mode = S_IFDIR | 0555;
  ret_st->st_nlink = 2;
  ret_st->st_ino = node->ino;
  ret_st->st_blksize = 4096;
  ret_st->st_atim = ret_st->st_mtim = ret_st->st_ctim = view->started;
  return 0;
}

int
node_reopen (FbViewNode *node, int flags)
{
  _fb_cleanup_fd_ int tmp = -1;
  char proc[32];
  int fd;

  fd = node_proc_path (node, proc, &tmp);
  if (fd < 0)
    return fd;
  fd = open (proc, flags);
  return fd >= 0 ? fd : -errno;
}

/* --- acting as the caller ----------------------------------------------------- */

void
creds_enter (FbView *view, const FbViewCaller *caller, CallerCreds *saved)
{
  memset (saved, 0, sizeof *saved);
  if (!view->options.act_as_caller || caller == NULL || (caller->uid == 0 && caller->gid == 0))
    return;
  /* setfsuid/setfsgid are per thread (the raw syscalls, unlike setuid in
   * glibc): only this FUSE worker creates as the caller, and only until
   * creds_leave.  Group first: after the uid switch we may lack the right. */
  saved->old_gid = (gid_t)setfsgid (caller->gid);
  saved->old_uid = (uid_t)setfsuid (caller->uid);
  saved->switched = true;
}

void
creds_leave (CallerCreds *saved)
{
  if (!saved->switched)
    return;
  setfsuid (saved->old_uid);
  setfsgid (saved->old_gid);
  saved->switched = false;
}
