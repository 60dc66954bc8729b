/* fusebox — the view's host descriptors: a budget out of RLIMIT_NOFILE, a
 * cache of directory descriptors, and each view's share of open files.
 *
 * Design (the contract is in fs/fs.h, Descriptors):
 *  - The budget.  At the first view the soft RLIMIT_NOFILE is raised to the
 *    hard one (the administrator's bound; the hard one is never raised).  Of
 *    that limit L, a reserve of L/4 (at least FD_RESERVE_MIN, at most
 *    FD_RESERVE_MAX) is left to everything that is not a view's: the API's
 *    connections, the access log, the pipes and sockets of process/start and
 *    its launch helper, /dev/fuse (one per FUSE worker), fanotify, the
 *    mounts' sources, and the descriptors an operation opens and closes
 *    before it answers.  Of the rest, a quarter is the directory cache (all
 *    views together) and three quarters are for what the sandboxes hold
 *    open.  The limit is read again every FD_REFRESH_EVERY uses and after
 *    an EMFILE, so that one lowered from outside (prlimit) is followed.
 *  - Directory descriptors are a cache.  A host directory node (not the root
 *    or a mount point: few, bounded by the policy, they keep theirs) holds
 *    its O_PATH descriptor while it is in its view's list.  Past the budget
 *    the least recently listed unheld one is closed (second chance: one held
 *    since the scan last passed goes to the back once), from the view that
 *    caches the most, so a sandbox's `find` evicts its own directories
 *    first.  node_fd_get() on a closed one opens it again walking down from
 *    the nearest ancestor that still has one, one name at a time with
 *    host_open_child() (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 *    RESOLVE_NO_MAGICLINKS, O_PATH | O_NOFOLLOW), each checked to be the
 *    node's st_dev, st_ino and type: a directory replaced on the host gives
 *    ESTALE (ENOENT when the name is gone), never the new object.  A
 *    directory renamed on the host is lost the same way once its descriptor
 *    was closed (the kernel looks it up again).
 *  - Holding.  node_fd_get() counts a hold in the node (fd_users, atomic and
 *    lock-free: a warm lookup pays an increment, two loads and a decrement
 *    on its parent).  An eviction first takes the descriptor out of the
 *    node, then reads the count and puts the descriptor back if someone
 *    holds it.  The atomics are sequentially consistent, so either the
 *    holder sees the descriptor gone (and opens it again) or the evictor
 *    sees the hold (and keeps it): a descriptor is never closed under a
 *    holder, whose *at() call would otherwise reach whatever the kernel gave
 *    that number to next.
 *  - Open files.  A descriptor a sandbox keeps (a file, a directory open
 *    for listing) is claimed before the host open by its owner: the view's
 *    own FUSE connection, or a session of the remote API (several may share
 *    a view).  An owner may hold at most half of what the others leave of
 *    the files' budget (EMFILE, to that caller), the process no more than
 *    the budget (ENFILE).  One greedy owner gets half, a second a quarter,
 *    and so on: every other keeps room, and the reserve keeps the rest.
 *  - Threads: any.  fd_lock (process-wide) guards the lists, the counts of
 *    cached directories, the budget and the list of views.  It is the
 *    innermost lock: it may be taken under view->lock or a node's lock,
 *    nothing is taken under it, and nothing is closed under it.
 */
#include "fs/fs-private.h"

#include <sys/resource.h>
#include <sys/stat.h>

#define FD_RESERVE_MIN 64
#define FD_RESERVE_MAX 65536
#define FD_DIRS_MIN 16
#define FD_FILES_MIN 16
#define FD_REFRESH_EVERY 1024
/* The most closed ancestors a reopen walks down (a path of FB_VIEW_PATH_MAX
 * has fewer components); past it, ESTALE. */
#define FD_REOPEN_DEPTH_MAX (FB_VIEW_PATH_MAX / 2)
/* Descriptors closed after one pass under the lock. */
#define FD_EVICT_BATCH 64
/* What view_fd_pressure() takes from the cache besides the budget's excess. */
#define FD_PRESSURE_EVICT 64

static GMutex fd_lock;
static FbView *fd_views;         /* fd_lock: every live view */
static gint fd_dirs;             /* fd_lock to change, atomic to read: cached directories, all views */
static gint fd_files;            /* atomic: descriptors of open files, all views */
static gint fd_dir_max;          /* atomic */
static gint fd_file_max;         /* atomic */
static gint fd_uses;             /* atomic: towards the next refresh */
static FbViewFdBudget fd_budget; /* fd_lock */
static guint64 fd_override;      /* fd_lock: fb_view_fd_budget_override */
static gsize fd_once;

/* --- the budget -------------------------------------------------------------- */

static void
budget_compute_locked (void)
{
  struct rlimit rl;
  guint64 limit, reserve, pool;

  if (getrlimit (RLIMIT_NOFILE, &rl) < 0)
    rl.rlim_cur = rl.rlim_max = 1024;
  limit = fd_override != 0 ? fd_override : (guint64)rl.rlim_cur;
  limit = MIN (limit, (guint64)G_MAXINT / 2);
  reserve = CLAMP (limit / 4, FD_RESERVE_MIN, FD_RESERVE_MAX);
  pool = limit > reserve ? limit - reserve : 0;
  fd_budget.limit = limit;
  fd_budget.hard = rl.rlim_max == RLIM_INFINITY ? G_MAXUINT64 : (guint64)rl.rlim_max;
  fd_budget.reserve = (guint)reserve;
  fd_budget.dir_max = (guint)MAX (pool / 4, FD_DIRS_MIN);
  fd_budget.file_max = (guint)MAX (pool - pool / 4, FD_FILES_MIN);
  g_atomic_int_set (&fd_dir_max, (gint)fd_budget.dir_max);
  g_atomic_int_set (&fd_file_max, (gint)fd_budget.file_max);
}

static void
budget_init (void)
{
  if (g_once_init_enter (&fd_once))
    {
      struct rlimit rl;
      /* A `find` over a large tree and a build holding many files need more
       * than the usual soft limit of 1024; the hard limit is the
       * administrator's bound, and the budget's base. */
      if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max)
        {
          rl.rlim_cur = rl.rlim_max;
          (void)setrlimit (RLIMIT_NOFILE, &rl);
        }
      g_mutex_lock (&fd_lock);
      budget_compute_locked ();
      g_mutex_unlock (&fd_lock);
      g_once_init_leave (&fd_once, 1);
    }
}

void
fb_view_fd_budget (FbViewFdBudget *ret)
{
  budget_init ();
  g_mutex_lock (&fd_lock);
  *ret = fd_budget;
  ret->dirs = (guint)g_atomic_int_get (&fd_dirs);
  ret->files = (guint)g_atomic_int_get (&fd_files);
  g_mutex_unlock (&fd_lock);
}

void
fb_view_fd_count (FbView *view, guint *ret_dirs, guint *ret_files)
{
  if (ret_dirs != NULL)
    *ret_dirs = (guint)g_atomic_int_get (&view->n_dir_fds);
  if (ret_files != NULL)
    *ret_files = (guint)g_atomic_int_get (&view->n_file_fds);
}

/* --- the lists ----------------------------------------------------------------- */

static void
list_append_locked (FbView *view, FbViewNode *n)
{
  n->fd_next = NULL;
  n->fd_prev = view->fd_tail;
  if (view->fd_tail != NULL)
    view->fd_tail->fd_next = n;
  else
    view->fd_head = n;
  view->fd_tail = n;
}

static void
list_remove_locked (FbView *view, FbViewNode *n)
{
  if (n->fd_prev != NULL)
    n->fd_prev->fd_next = n->fd_next;
  else
    view->fd_head = n->fd_next;
  if (n->fd_next != NULL)
    n->fd_next->fd_prev = n->fd_prev;
  else
    view->fd_tail = n->fd_prev;
  n->fd_prev = n->fd_next = NULL;
}

static void
count_dirs_locked (FbView *view, int delta)
{
  g_atomic_int_add (&view->n_dir_fds, delta);
  g_atomic_int_add (&fd_dirs, delta);
}

void
view_fd_register (FbView *view)
{
  budget_init ();
  g_mutex_lock (&fd_lock);
  view->views_prev = NULL;
  view->views_next = fd_views;
  if (fd_views != NULL)
    fd_views->views_prev = view;
  fd_views = view;
  view->in_views = true;
  g_mutex_unlock (&fd_lock);
}

void
view_fd_unregister (FbView *view)
{
  g_mutex_lock (&fd_lock);
  if (view->in_views)
    {
      if (view->views_prev != NULL)
        view->views_prev->views_next = view->views_next;
      else
        fd_views = view->views_next;
      if (view->views_next != NULL)
        view->views_next->views_prev = view->views_prev;
      view->in_views = false;
    }
  g_clear_pointer (&view->fd_sessions, g_hash_table_destroy);
  g_mutex_unlock (&fd_lock);
}

/* --- eviction ------------------------------------------------------------------ */

/* Take one unheld descriptor out of VIEW's list (for the caller to close);
 * -1 when every one is held or was used since the scan last passed. */
static int
evict_one_locked (FbView *view)
{
  guint scan = 2 * (guint)g_atomic_int_get (&view->n_dir_fds) + 1;

  while (scan-- > 0 && view->fd_head != NULL)
    {
      FbViewNode *n = view->fd_head;
      int fd;

      list_remove_locked (view, n);
      if (g_atomic_int_get (&n->fd_hot) || g_atomic_int_get (&n->fd_users) > 0)
        {
          g_atomic_int_set (&n->fd_hot, 0);
          list_append_locked (view, n);
          continue;
        }
      /* Out first, then the holds (see "Holding" above). */
      fd = g_atomic_int_get (&n->host_fd);
      g_atomic_int_set (&n->host_fd, -1);
      if (g_atomic_int_get (&n->fd_users) > 0)
        {
          g_atomic_int_set (&n->host_fd, fd);
          list_append_locked (view, n);
          continue;
        }
      n->fd_listed = false;
      count_dirs_locked (view, -1);
      return fd;
    }
  return -1;
}

/* Close cached descriptors until the count is within the budget, and EXTRA
 * more, from the view that caches the most each time. */
static void
trim (guint extra)
{
  for (;;)
    {
      int closing[FD_EVICT_BATCH];
      guint n = 0;

      g_mutex_lock (&fd_lock);
      while (n < G_N_ELEMENTS (closing) && (g_atomic_int_get (&fd_dirs) > g_atomic_int_get (&fd_dir_max) || extra > 0))
        {
          FbView *big = NULL;
          int fd;
          for (FbView *v = fd_views; v != NULL; v = v->views_next)
            if (big == NULL || g_atomic_int_get (&v->n_dir_fds) > g_atomic_int_get (&big->n_dir_fds))
              big = v;
          fd = big != NULL ? evict_one_locked (big) : -1;
          if (fd < 0)
            {
              extra = 0;
              break; /* all held: over the budget for as long as they are */
            }
          closing[n++] = fd;
          if (extra > 0)
            extra--;
        }
      g_mutex_unlock (&fd_lock);
      for (guint i = 0; i < n; i++)
        close (closing[i]);
      if (n < G_N_ELEMENTS (closing))
        return;
    }
}

static void
budget_refresh (void)
{
  g_mutex_lock (&fd_lock);
  budget_compute_locked ();
  g_mutex_unlock (&fd_lock);
  trim (0);
}

/* Count one use; every FD_REFRESH_EVERY, read the limit again. */
static void
tick (void)
{
  if (g_atomic_int_add (&fd_uses, 1) % FD_REFRESH_EVERY == FD_REFRESH_EVERY - 1)
    budget_refresh ();
}

void
view_fd_pressure (void)
{
  budget_init ();
  g_mutex_lock (&fd_lock);
  budget_compute_locked ();
  g_mutex_unlock (&fd_lock);
  trim (FD_PRESSURE_EVICT);
}

void
fb_view_fd_budget_override (guint64 limit)
{
  budget_init ();
  g_mutex_lock (&fd_lock);
  fd_override = limit;
  g_mutex_unlock (&fd_lock);
  budget_refresh ();
}

/* --- holding a node's descriptor ---------------------------------------------------- */

bool
node_is_host_dir (const FbViewNode *node)
{
  return node->kind == NODE_HOST && S_ISDIR (node->type);
}

/* The lock-free hold of an evictable node's cached descriptor. */
static bool
try_hold (FbViewNode *node, NodeFd *hold)
{
  int fd;

  g_atomic_int_inc (&node->fd_users);
  fd = g_atomic_int_get (&node->host_fd);
  if (G_UNLIKELY (fd < 0))
    {
      g_atomic_int_add (&node->fd_users, -1);
      return false;
    }
  if (!g_atomic_int_get (&node->fd_hot))
    g_atomic_int_set (&node->fd_hot, 1);
  hold->node = node;
  hold->fd = fd;
  return true;
}

/* Give NODE the descriptor FD (its object, just opened and checked), unless
 * another thread did first (FD is then closed), and hold it. */
static void
install (FbViewNode *node, int fd, NodeFd *hold)
{
  FbView *view = node->view;
  int spare = -1, cur;

  g_mutex_lock (&fd_lock);
  cur = g_atomic_int_get (&node->host_fd);
  if (cur >= 0)
    spare = fd;
  else
    {
      cur = fd;
      g_atomic_int_set (&node->host_fd, fd);
      list_append_locked (view, node);
      node->fd_listed = true;
      count_dirs_locked (view, 1);
    }
  /* under the lock: no eviction can come between */
  g_atomic_int_inc (&node->fd_users);
  g_atomic_int_set (&node->fd_hot, 1);
  g_mutex_unlock (&fd_lock);
  if (spare >= 0)
    close (spare);
  hold->node = node;
  hold->fd = cur;
  tick ();
  if (g_atomic_int_get (&fd_dirs) > g_atomic_int_get (&fd_dir_max))
    trim (0);
}

static int
check_object (FbViewNode *node, int fd)
{
  struct stat st;

  if (fstat (fd, &st) < 0)
    return -errno;
  if (st.st_ino != node->ino || st.st_dev != node->dev || (st.st_mode & S_IFMT) != node->type)
    return -ESTALE;
  return 0;
}

/* NODE's descriptor was closed: open it again from the nearest ancestor
 * that has one (see "Directory descriptors are a cache" above). */
static int
reopen (FbViewNode *node, NodeFd *hold)
{
  FbView *view = node->view;
  g_autoptr (GPtrArray) chain = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  _fb_cleanup_node_fd_ NodeFd cur = NODE_FD_INIT;
  int r = 0;

  /* Under the table lock the chain of parents and names can't change (a
   * rename through the view moves nodes under it); the walk down below runs
   * without it, on nodes referenced here. */
  g_mutex_lock (&view->lock);
  for (FbViewNode *n = node;; n = n->parent)
    {
      if (n == NULL || chain->len >= FD_REOPEN_DEPTH_MAX)
        {
          r = -ESTALE;
          break;
        }
      if (!n->evictable)
        {
          /* the root or a mount point: its descriptor stays for its life */
          if (n->host_fd < 0)
            r = -ESTALE;
          cur.fd = n->host_fd;
          break;
        }
      if (try_hold (n, &cur))
        break;
      g_ptr_array_add (chain, fb_view_node_ref (n));
      g_ptr_array_add (names, g_strdup (n->name));
    }
  g_mutex_unlock (&view->lock);

  for (guint i = chain->len; r == 0 && i-- > 0;)
    {
      FbViewNode *n = chain->pdata[i];
      NodeFd next = NODE_FD_INIT;
      int fd = host_open_child (cur.fd, names->pdata[i]);

      if (fd < 0)
        {
          r = fd;
          break;
        }
      r = check_object (n, fd);
      if (r < 0)
        {
          close (fd);
          break;
        }
      install (n, fd, &next);
      node_fd_put (&cur);
      cur = next;
    }
  if (r < 0)
    return r;
  *hold = cur;
  cur = NODE_FD_INIT;
  return hold->fd;
}

int
node_fd_get (FbViewNode *node, NodeFd *hold)
{
  hold->node = NULL;
  hold->fd = -1;
  if (!node->evictable)
    {
      /* immutable: the root, mount points, a file mounted alone */
      if (node->kind != NODE_HOST || node->host_fd < 0)
        return -EBADF;
      hold->fd = node->host_fd;
      return hold->fd;
    }
  if (G_LIKELY (try_hold (node, hold)))
    return hold->fd;
  return reopen (node, hold);
}

void
node_fd_put (NodeFd *hold)
{
  if (hold->node != NULL)
    g_atomic_int_add (&hold->node->fd_users, -1);
  hold->node = NULL;
  hold->fd = -1;
}

void
node_fd_cached (FbViewNode *node)
{
  FbView *view = node->view;

  g_mutex_lock (&fd_lock);
  if (!node->fd_listed && g_atomic_int_get (&node->host_fd) >= 0)
    {
      list_append_locked (view, node);
      node->fd_listed = true;
      count_dirs_locked (view, 1);
      g_atomic_int_set (&node->fd_hot, 1);
    }
  g_mutex_unlock (&fd_lock);
  tick ();
  if (g_atomic_int_get (&fd_dirs) > g_atomic_int_get (&fd_dir_max))
    trim (0);
}

int
node_fd_forget (FbViewNode *node)
{
  int fd;

  if (!node->evictable)
    {
      fd = node->host_fd;
      node->host_fd = -1;
      return fd;
    }
  /* nobody holds it: holding takes a reference to the node, and this is
   * its last one going */
  g_mutex_lock (&fd_lock);
  if (node->fd_listed)
    {
      list_remove_locked (node->view, node);
      node->fd_listed = false;
      count_dirs_locked (node->view, -1);
    }
  fd = g_atomic_int_get (&node->host_fd);
  g_atomic_int_set (&node->host_fd, -1);
  g_mutex_unlock (&fd_lock);
  return fd;
}

/* --- open files ------------------------------------------------------------------ */

/* Past OWNER's share with MINE of TOTAL open (both counting the new one)?
 * At most half of what the others leave (see "Open files" above). */
static int
share_check (gint max, gint total, gint mine)
{
  if (total > max)
    return -ENFILE;
  if ((gint64)mine * 2 > (gint64)max - (total - mine))
    return -EMFILE;
  return 0;
}

/* A remote-API session's count of files open through VIEW (fd_lock). */
static gint *
session_count_locked (FbView *view, const char *session)
{
  gint *count;

  if (view->fd_sessions == NULL)
    view->fd_sessions = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  count = g_hash_table_lookup (view->fd_sessions, session);
  if (count == NULL)
    {
      count = g_new0 (gint, 1);
      g_hash_table_insert (view->fd_sessions, g_strdup (session), count);
    }
  return count;
}

int
view_file_claim (FbView *view, const char *session)
{
  gint max, total, mine;
  int r;

  tick ();
  max = g_atomic_int_get (&fd_file_max);
  if (session != NULL)
    {
      /* Sessions of the remote API may share a view (the same sandbox
       * context): each is an owner of its own, so that one session's
       * fs/open handles leave the others their share. */
      gint *count;
      g_mutex_lock (&fd_lock);
      count = session_count_locked (view, session);
      total = g_atomic_int_add (&fd_files, 1) + 1;
      mine = ++*count;
      r = share_check (max, total, mine);
      if (r < 0)
        {
          g_atomic_int_add (&fd_files, -1);
          if (--*count == 0)
            g_hash_table_remove (view->fd_sessions, session);
        }
      else
        g_atomic_int_inc (&view->n_file_fds);
      g_mutex_unlock (&fd_lock);
      return r;
    }
  /* The sandbox's own files, through its FUSE connection: lock-free.  Two
   * claims at once may both count the other: a refusal at the edge, never
   * more than the budget. */
  total = g_atomic_int_add (&fd_files, 1) + 1;
  mine = g_atomic_int_add (&view->n_own_files, 1) + 1;
  r = share_check (max, total, mine);
  if (r < 0)
    {
      g_atomic_int_add (&view->n_own_files, -1);
      g_atomic_int_add (&fd_files, -1);
      return r;
    }
  g_atomic_int_inc (&view->n_file_fds);
  return 0;
}

void
view_file_unclaim (FbView *view, const char *session)
{
  if (session != NULL)
    {
      gint *count;
      g_mutex_lock (&fd_lock);
      count = view->fd_sessions != NULL ? g_hash_table_lookup (view->fd_sessions, session) : NULL;
      if (count != NULL && --*count == 0)
        g_hash_table_remove (view->fd_sessions, session);
      g_mutex_unlock (&fd_lock);
    }
  else
    g_atomic_int_add (&view->n_own_files, -1);
  g_atomic_int_add (&view->n_file_fds, -1);
  g_atomic_int_add (&fd_files, -1);
}
