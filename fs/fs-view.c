/* fusebox — the mediated view: its life, its mounts, and where each part
 * of it is.
 *
 * Design (the contract is in fs/fs.h):
 *  - Every host object is reached from a held O_PATH descriptor, one name at
 *    a time, without following symlinks or crossing into magic links, so the
 *    host path of a view path is never re-resolved from a string: a rename
 *    on the host can't redirect us, and a symlink planted by the sandbox is
 *    only ever text.
 *  - One node per view path: the node table is keyed by (parent node, name).
 *    A lookup that finds another host object at a known name (the host
 *    replaced it) makes a new node and detaches the old one, which keeps
 *    serving whoever still holds it.  Hard links reached by two names are two
 *    nodes, each with the decision of its own path.
 *  - The policy is asked on every operation, from the node's stored decision
 *    (or fb_policy_decide_child() for a new name); nothing is cached beyond
 *    the decision of a path, which is static for a run.
 *  - Pinned nodes: the root, mount points and synthetic directories are the
 *    same objects for the view's life (the policy is static, a mount point
 *    always shows the mount's own descriptor, a synthetic directory has no
 *    host object), so the view keeps their nodes once made instead of
 *    building them again (a dup and a fstat, or a failing openat2) on every
 *    walk.  Host directories on the way to mount points are kept too, but
 *    revalidated on each walk (reuse_known_node).  They are few: bounded
 *    by the policy's rules (and FB_VIEW_PINNED_MAX).  Each holds a
 *    reference to the view and the view one to each; fb_view_unref breaks
 *    that cycle when only pinned nodes are left holding the view.
 *  - Where each part is (the internals they share: fs/fs-private.h):
 *      fs-view-node.c    nodes, the node table, pins, the kernel's counts;
 *                        a node's view path and decision, built when
 *                        needed, and decided again when a rename moves it
 *      fs-view-check.c   the policy checks of an operation and of a name
 *      fs-view-lookup.c  the lookup of one name, the root, the walk
 *      fs-view-host.c    the steps on the host: one name below a
 *                        descriptor, a node's host object, its attributes
 *      fs-view-fd.c      host descriptors: who holds one, the budget, the
 *                        directory cache; read them with node_fd_get(),
 *                        never the field
 *      fs-view-name.c    operations on names: make, link, remove, rename
 *      fs-view-attr.c    operations on attributes, readlink, statfs, xattrs
 *      fs-view-io.c      open files; fs-view-dir.c: directory listings
 *      fs-view-event.c   access events and the view's own refusals
 *      fs-view-notify.c  changes told to listeners (the FUSE adapter)
 *      fs-view-fold.c    hosts that fold names; fs-view-state.c: fusebox's
 *                        own state; fs-view-depth.c: a tree's depth
 *  - Threads: any.  Lock order: view->lock (table and tree), then a node's
 *    extra lock (open files, stamps, listings: NodeExtra), then fd_lock
 *    (fs-view-fd.c), decisions_lock or cursor_lock (fs-view-dir.c), all
 *    innermost.  The sink is never called with any of them held.
 */
#include "fs/fs-private.h"

#include <string.h>

/* --- the view --------------------------------------------------------------- */

void
fb_view_options_init (FbViewOptions *options)
{
  memset (options, 0, sizeof *options);
  options->log_level = FB_LOG_LEVEL_OPENS;
  options->act_as_caller = geteuid () == 0;
  options->create_private_dirs = true;
  options->private_anchor_fd = -1;
}

/* Make the private directory HOST (parents too, 0700) and open it: from
 * the view's anchor (the run directory's descriptor) when HOST lies below
 * it, a step at a time, each step made or found and opened without
 * following a link; else by its path.  The descriptor (O_PATH) or -errno. */
static int
private_dir_open (FbView *view, const char *host)
{
  gsize n = view->private_anchor != NULL ? strlen (view->private_anchor) : 0;
  g_auto (GStrv) steps = NULL;
  _fb_cleanup_fd_ int fd = -1;

  if (view->private_anchor_fd < 0 || n == 0 || strncmp (host, view->private_anchor, n) != 0 || host[n] != '/')
    {
      if (g_mkdir_with_parents (host, 0700) < 0)
        return -errno;
      fd = open (host, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      return fd >= 0 ? fb_steal_fd (&fd) : -errno;
    }
  fd = fcntl (view->private_anchor_fd, F_DUPFD_CLOEXEC, 3);
  if (fd < 0)
    return -errno;
  steps = g_strsplit (host + n + 1, "/", -1);
  for (guint i = 0; steps[i] != NULL; i++)
    {
      int next;

      if (steps[i][0] == '\0' || strcmp (steps[i], ".") == 0)
        continue;
      if (strcmp (steps[i], "..") == 0)
        return -EINVAL;
      bool made = mkdirat (fd, steps[i], 0700) == 0;

      if (!made && errno != EEXIST)
        return -errno;
      next = openat (fd, steps[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next < 0)
        return -errno;
      if (made)
        fb_state_mark (next); /* fusebox's own: hidden from every view */
      else if (!fb_state_marked (next, NULL) && fb_state_marked (view->private_anchor_fd, NULL))
        {
          /* there already, but not made by fusebox (which marks what it
           * makes, and does here: the anchor is marked): a sandbox that had
           * the run directory open before the run made it, to share the
           * run's /tmp or HOME */
          close (next);
          return -EEXIST;
        }
      fb_fd_close (&fd);
      fd = next;
    }
  return fb_steal_fd (&fd);
}

/* Private directories are made on first use: view->mount_fds[] holds
 * MOUNT_FD_UNMADE for one not made yet, and mount_fd_dup() makes it when a
 * lookup first reaches its mount point.  A run whose command never looks at
 * its HOME or /tmp then makes no directory for them, and its supervisor
 * removes none at the end: two or three inodes made and freed per run, which
 * on ext4 without a journal costs a scan past every inode freed in the last
 * minute (docs/performance.md, Startup).  The root's mount is made at once:
 * a view needs it to exist.  A failure shows as the lookup's error (and a
 * warning), not at fb_view_new(); the run directory was just written, so it
 * is rare (a full disk). */
#define MOUNT_FD_UNMADE (-2)
static GMutex private_lock; /* making a private directory: its mount_fds[] slot */

/* The host directory of MOUNT: for a private one under
 * options.private_root, the same name it has under the policy's
 * ${RUN}/private. */
static char *
mount_host_path (FbView *view, const FbPolicyMount *mount)
{
  g_autofree char *name = NULL;

  if (!mount->is_private || view->private_root == NULL || mount->host_path == NULL)
    return g_strdup (mount->host_path);
  name = g_path_get_basename (mount->host_path);
  return g_build_filename (view->private_root, name, NULL);
}

int
fb_view_new (FbPolicy *policy, const FbViewOptions *options, FbView **ret_view)
{
  g_autoptr (FbView) view = NULL;
  const FbPolicyMount *mounts;
  struct stat root_st;
  static const char *const blank_paths[] = { "/proc", "/sys", "/dev" };

  g_return_val_if_fail (policy != NULL, -EINVAL);

  view = g_new0 (FbView, 1);
  view->ref = 1;
  view->policy = fb_policy_ref (policy);
  if (options != NULL)
    view->options = *options;
  else
    fb_view_options_init (&view->options);
  g_mutex_init (&view->rename_lock);
  g_mutex_init (&view->moves_lock);
  view_table_init (view);
  {
    GPtrArray *blank = g_ptr_array_new ();
    g_ptr_array_add (blank, g_strdup ("/proc"));
    g_ptr_array_add (blank, g_strdup ("/sys"));
    g_ptr_array_add (blank, g_strdup ("/dev"));
    for (guint i = 0; view->options.blank_paths != NULL && view->options.blank_paths[i] != NULL; i++)
      g_ptr_array_add (blank, g_strdup (view->options.blank_paths[i]));
    g_ptr_array_add (blank, NULL);
    view->blank_paths = (char **)g_ptr_array_free (blank, FALSE);
    view->options.blank_paths = NULL;
  }
  view->private_root = g_strdup (view->options.private_root);
  view->options.private_root = NULL;
  view->private_anchor_fd =
    view->options.private_anchor_fd >= 0 ? fcntl (view->options.private_anchor_fd, F_DUPFD_CLOEXEC, 3) : -1;
  view->private_anchor = view->private_anchor_fd >= 0 ? g_strdup (view->options.private_anchor) : NULL;
  view->options.private_anchor_fd = -1;
  view->options.private_anchor = NULL;
  view_state_init (view);
  clock_gettime (CLOCK_REALTIME, &view->started);
  view->can_empty_path_link = 1;

  mounts = fb_policy_get_mounts (policy, &view->n_mounts);
  view->mount_fds = g_new (int, MAX (view->n_mounts, 1));
  for (guint i = 0; i < view->n_mounts; i++)
    view->mount_fds[i] = -1;
  for (guint i = 0; i < view->n_mounts; i++)
    {
      g_autofree char *host = mount_host_path (view, &mounts[i]);
      int fd;

      if (host == NULL)
        continue;
      if (mounts[i].is_private && view->options.create_private_dirs && i > 0)
        {
          view->mount_fds[i] = MOUNT_FD_UNMADE; /* on first use */
          continue;
        }
      if (mounts[i].is_private && view->options.create_private_dirs)
        {
          fd = private_dir_open (view, host);
          if (fd < 0)
            return fd;
          view->mount_fds[i] = fd;
          continue;
        }
      /* O_DIRECTORY|O_NOFOLLOW: a mount's source must be a real directory;
       * the policy's own paths are trusted text, so this is the one place a
       * host path string is resolved, once, at start (a private directory
       * is made and opened from the run directory's descriptor:
       * private_dir_open). */
      fd = open (host, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0)
        {
          /* The root, and a rule's own source (which a run checks when it
           * loads the policy: fb_run_check_sources), are never replaced by
           * an empty directory; a mount that a rule without a source starts
           * shows the host's path again, which need not exist. */
          if (i == 0 || (mounts[i].rule != NULL && mounts[i].rule->source != NULL && !mounts[i].is_private))
            return -errno;
          continue;
        }
      view->mount_fds[i] = fd;
    }
  if (view->n_mounts == 0 || view->mount_fds[0] < 0)
    return -ENOENT;
  {
    int r = view_sources_init (view);
    if (r < 0)
      return r;
  }

  /* Host procfs, sysfs and devtmpfs are recognized by device number, so
   * that no path to them (a bind mount elsewhere, a source rule) passes
   * them through.  Only when they are separate filesystems from "/". */
  if (stat ("/", &root_st) == 0)
    for (guint i = 0; i < G_N_ELEMENTS (blank_paths); i++)
      {
        struct stat st;
        if (stat (blank_paths[i], &st) == 0 && st.st_dev != root_st.st_dev)
          view->blank_devs[i] = st.st_dev;
      }

  view_fd_register (view);
  *ret_view = g_steal_pointer (&view);
  return 0;
}

FB_DEFINE_ATOMIC_REF (fb_view, FbView)

/* Drop the view's references on its pinned nodes: they are freed unless
 * someone else holds one (that one keeps the view alive until it lets go). */
static void
view_unpin_all (FbView *view)
{
  g_autoptr (GPtrArray) pinned = NULL;

  g_mutex_lock (&view->lock);
  pinned = g_steal_pointer (&view->pinned);
  view->pinned = g_ptr_array_new ();
  g_atomic_int_set (&view->n_pinned, 0);
  for (guint i = 0; i < pinned->len; i++)
    ((FbViewNode *)pinned->pdata[i])->pinned = false;
  g_mutex_unlock (&view->lock);
  for (guint i = 0; i < pinned->len; i++)
    fb_view_node_unref (pinned->pdata[i]);
}

void
fb_view_unref (FbView *view)
{
  int left;

  if (view == NULL)
    return;
  left = g_atomic_int_add (&view->ref, -1) - 1;
  if (left > 0)
    {
      /* Only the pinned nodes hold the view now: nobody else can reach
       * it (a pin is made by a caller holding a reference, so the count
       * never equals n_pinned while one is being made). */
      if (left == g_atomic_int_get (&view->n_pinned))
        view_unpin_all (view);
      return;
    }
  view_sources_clear (view);
  for (guint i = 0; i < view->n_mounts; i++)
    if (view->mount_fds[i] >= 0)
      close (view->mount_fds[i]);
  g_free (view->mount_fds);
  view_table_clear (view);
  g_strfreev (view->blank_paths);
  g_free (view->private_root);
  if (view->private_anchor_fd >= 0)
    close (view->private_anchor_fd);
  g_free (view->private_anchor);
  view_state_clear (view);
  view_fd_unregister (view);
  g_mutex_clear (&view->rename_lock);
  g_mutex_clear (&view->moves_lock);
  fb_policy_unref (view->policy);
  g_free (view);
}

FbPolicy *
fb_view_get_policy (FbView *view)
{
  return view->policy;
}

FbLogLevel
fb_view_get_log_level (FbView *view)
{
  return view->options.log_level;
}

guint
fb_view_count_nodes (FbView *view)
{
  return (guint)(g_atomic_int_get (&view->n_nodes) - g_atomic_int_get (&view->n_pinned));
}

guint
fb_view_get_node_max (FbView *view)
{
  return view->node_max;
}

/* --- mounts' descriptors ---------------------------------------------------- */

/* Make MOUNT's private directory and open it, once (see MOUNT_FD_UNMADE);
 * the descriptor (still the view's) or -errno. */
static int
private_dir_make (FbView *view, const FbPolicyMount *mount)
{
  int *slot = &view->mount_fds[mount->id];
  int fd, r = 0;

  g_mutex_lock (&private_lock);
  fd = g_atomic_int_get (slot);
  if (fd == MOUNT_FD_UNMADE)
    {
      g_autofree char *host = mount_host_path (view, mount);
      fd = private_dir_open (view, host);
      r = fd < 0 ? fd : 0;
      if (r == 0)
        g_atomic_int_set (slot, fd);
      else
        g_warning ("the private directory %s could not be made: %s", host, g_strerror (-r));
    }
  g_mutex_unlock (&private_lock);
  return r < 0 ? r : fd;
}

int
mount_fd_dup (FbView *view, const FbPolicyMount *mount)
{
  int fd;

  if (mount == NULL || mount->id >= view->n_mounts)
    return -ENOENT;
  fd = g_atomic_int_get (&view->mount_fds[mount->id]);
  if (fd == MOUNT_FD_UNMADE)
    fd = private_dir_make (view, mount);
  if (fd == -1)
    return -ENOENT;
  if (fd < 0)
    return fd;
  fd = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  return fd >= 0 ? fd : -errno;
}
