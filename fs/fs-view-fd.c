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
 *  - Holding.  node_fd_get() counts a hold in the node (NodeDir.state, atomic and
 *    lock-free: a warm lookup pays an increment, two loads and a decrement
 *    on its parent).  An eviction first takes the descriptor out of the
 *    node, then reads the count and puts the descriptor back if someone
 *    holds it.  The atomics are sequentially consistent, so either the
 *    holder sees the descriptor gone (and opens it again) or the evictor
 *    sees the hold (and keeps it): a descriptor is never closed under a
 *    holder, whose *at() call would otherwise reach whatever the kernel gave
 *    that number to next.
 *  - Open files.  A descriptor a sandbox keeps (a file, a directory open
 *    for listing) is claimed before the host open on an account: the
 *    view's own (FbViewOptions.fd_account: under `serve`, the process's),
 *    or the caller's session's (one per session, in whatever view, a
 *    client of its own: the remote API bounds a client's sessions by its
 *    share of fs/open handles, ipc/ipc-rpc-share.c).
 *    Threat: a client of `serve` starting process after process, each
 *    holding all it can, when each owner could hold half of what the
 *    others left: the holders took 559, 278, 138 ... of 1,125, and the
 *    next process, the client's or another's, could not open its libc.
 *    So, in two tiers:
 *     1. Floors.  An account made with one may always hold
 *        FB_VIEW_FD_FLOOR files.  The floors are kept out of the files'
 *        budget beforehand (fb_view_fd_set_floors: the server's running
 *        processes, as many as fit in half of it), whether taken or not,
 *        so no one's use can take a floor from an account made later;
 *        with all taken, a new account with a floor is refused (ENFILE),
 *        and process/start says so instead of starting a sandbox that
 *        can't load its libraries.
 *     2. Clients.  Above its floor an account draws on the rest (the
 *        files' budget less every floor kept), where its client's
 *        accounts together hold at most half of what the other clients
 *        leave: more processes don't make a bigger part.  An account
 *        without a client is a client of its own (`run`, `mount`, a
 *        session, a view of the tests).  Between one client's own
 *        sandboxes, the part is first come: each keeps its floor.
 *    Past its part: EMFILE for that caller; nothing shared left: ENFILE;
 *    either is logged as fusebox's refusal (VIEW_REFUSAL_FILES).  A
 *    greedy client gets half of what is shared, a second a quarter, and
 *    every sandbox its floor.  Claims take fd_lock (an open costs host
 *    syscalls besides; a lock-free count could not check a floor, a
 *    client and the total at once).
 *  - Threads: any.  fd_lock (process-wide) guards the lists, the counts of
 *    cached directories, the budget, the list of views and the accounts'
 *    counts.  It is the innermost lock: it may be taken under view->lock
 *    or a node's lock, nothing is taken under it, and nothing is closed or
 *    freed under it.
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
static guint fd_floors_wanted;   /* fd_lock: fb_view_fd_set_floors */
static guint fd_floors_taken;    /* fd_lock: accounts with a floor */
static gsize fd_once;

static gint shared_max_locked (void);

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
  /* the floors: at most half of the files' budget, so that what is
   * shared stays at least as large */
  fd_budget.floor = FB_VIEW_FD_FLOOR;
  fd_budget.floors = MIN (fd_floors_wanted, fd_budget.file_max / 2 / FB_VIEW_FD_FLOOR);
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
  ret->floors_taken = fd_floors_taken;
  ret->shared = (guint)shared_max_locked ();
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
  NodeDir *d = node_dir (n);

  d->fd_next = NULL;
  d->fd_prev = view->fd_tail;
  if (view->fd_tail != NULL)
    node_dir (view->fd_tail)->fd_next = n;
  else
    view->fd_head = n;
  view->fd_tail = n;
}

static void
list_remove_locked (FbView *view, FbViewNode *n)
{
  NodeDir *d = node_dir (n);

  if (d->fd_prev != NULL)
    node_dir (d->fd_prev)->fd_next = d->fd_next;
  else
    view->fd_head = d->fd_next;
  if (d->fd_next != NULL)
    node_dir (d->fd_next)->fd_prev = d->fd_prev;
  else
    view->fd_tail = d->fd_prev;
  d->fd_prev = d->fd_next = NULL;
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
  if (view->options.fd_account != NULL)
    view->fd_account = fb_view_fd_account_ref (view->options.fd_account);
  else
    (void)fb_view_fd_account_new (NULL, false, &view->fd_account); /* no floor: can't fail */
  view->options.fd_account = NULL;
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
  g_mutex_unlock (&fd_lock);
  g_clear_pointer (&view->fd_account, fb_view_fd_account_unref);
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
      if ((node_dir_state (n) & (DIR_FD_HOT | DIR_FD_USERS)) != 0)
        {
          node_dir_clear (n, DIR_FD_HOT);
          list_append_locked (view, n);
          continue;
        }
      /* Out first, then the holds (see "Holding" above). */
      fd = g_atomic_int_get (&n->host_fd);
      g_atomic_int_set (&n->host_fd, -1);
      if ((node_dir_state (n) & DIR_FD_USERS) != 0)
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

  node_dir_hold (node, 1);
  fd = g_atomic_int_get (&node->host_fd);
  if (G_UNLIKELY (fd < 0))
    {
      node_dir_hold (node, -1);
      return false;
    }
  if (!(node_dir_state (node) & DIR_FD_HOT))
    node_dir_set (node, DIR_FD_HOT);
  hold->node = node;
  hold->fd = fd;
  return true;
}

/* Give NODE the descriptor FD (its object, just opened and checked), unless
 * another thread did first (FD is then closed), and hold it. */
static void
install (FbViewNode *node, int fd, NodeFd *hold)
{
  FbView *view = node_view (node);
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
  node_dir_hold (node, 1);
  node_dir_set (node, DIR_FD_HOT);
  g_mutex_unlock (&fd_lock);
  if (spare >= 0)
    close (spare);
  hold->node = node;
  hold->fd = cur;
  tick ();
  if (g_atomic_int_get (&fd_dirs) > g_atomic_int_get (&fd_dir_max))
    trim (0);
}

/* NODE's descriptor was closed: open it again from the nearest ancestor
 * that has one (see "Directory descriptors are a cache" above). */
static int
reopen (FbViewNode *node, NodeFd *hold)
{
  FbView *view = node_view (node);
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
      g_ptr_array_add (names, g_strdup (node_name (n)));
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
      r = node_check_fd (n, fd);
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
    node_dir_hold (hold->node, -1);
  hold->node = NULL;
  hold->fd = -1;
}

void
node_fd_cached (FbViewNode *node)
{
  FbView *view = node_view (node);

  g_mutex_lock (&fd_lock);
  if (!node->fd_listed && g_atomic_int_get (&node->host_fd) >= 0)
    {
      list_append_locked (view, node);
      node->fd_listed = true;
      count_dirs_locked (view, 1);
      node_dir_set (node, DIR_FD_HOT);
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
      list_remove_locked (node_view (node), node);
      node->fd_listed = false;
      count_dirs_locked (node_view (node), -1);
    }
  fd = g_atomic_int_get (&node->host_fd);
  g_atomic_int_set (&node->host_fd, -1);
  g_mutex_unlock (&fd_lock);
  return fd;
}

/* --- open files ------------------------------------------------------------------ */

/* A client: the accounts of one client of the remote API, or one account
 * alone (a view's own without a client, a session without one). */
typedef struct
{
  char *key;  /* NULL: an account's own */
  guint refs; /* fd_lock: its accounts */
  gint over;  /* fd_lock: files its accounts hold above their floors */
} FdClient;

struct FbViewFdAccount
{
  gint ref;         /* atomic */
  FdClient *client; /* immutable; its fields under fd_lock */
  guint floor;      /* immutable: 0 or FB_VIEW_FD_FLOOR */
  gint held;        /* fd_lock to change, atomic to read */
  char *session;    /* a session's: its key in fd_session_accounts */
};

static GHashTable *fd_clients;          /* fd_lock: key -> FdClient, those with a key */
static GHashTable *fd_session_accounts; /* fd_lock: session id -> FbViewFdAccount (a reference) */
static gint fd_over;                    /* fd_lock: files held above floors, all accounts */

/* The files above floors, all clients together (fd_lock): the files'
 * budget less every floor kept, or taken when a lowered limit keeps
 * fewer than are taken. */
static gint
shared_max_locked (void)
{
  gint64 floors = (gint64)MAX (fd_budget.floors, fd_floors_taken) * FB_VIEW_FD_FLOOR;

  return (gint)MAX ((gint64)fd_budget.file_max - floors, 0);
}

/* One file more for A (fd_lock).  Within its floor: always.  Above it,
 * from what is shared: its client's files above floors at most half of
 * what the other clients leave (see "Open files" above). */
static int
claim_locked (FbViewFdAccount *a)
{
  FdClient *c = a->client;
  gint shared;

  if (g_atomic_int_get (&a->held) < (gint)a->floor)
    {
      g_atomic_int_inc (&a->held);
      return 0;
    }
  shared = shared_max_locked ();
  if (fd_over + 1 > shared)
    return -ENFILE;
  if ((gint64)(c->over + 1) * 2 > (gint64)shared - (fd_over - c->over))
    return -EMFILE;
  g_atomic_int_inc (&a->held);
  c->over++;
  fd_over++;
  return 0;
}

static void
unclaim_locked (FbViewFdAccount *a)
{
  if (g_atomic_int_get (&a->held) > (gint)a->floor)
    {
      a->client->over--;
      fd_over--;
    }
  g_atomic_int_add (&a->held, -1);
}

guint
fb_view_fd_set_floors (guint n)
{
  guint fit;

  budget_init ();
  g_mutex_lock (&fd_lock);
  fd_floors_wanted = n;
  budget_compute_locked ();
  fit = fd_budget.floors;
  g_mutex_unlock (&fd_lock);
  return fit;
}

int
fb_view_fd_account_new (const char *client, bool floor, FbViewFdAccount **ret_account)
{
  FbViewFdAccount *a;
  FdClient *c = NULL;

  budget_init ();
  /* a floor is kept for as long as the account lives: counted against the
   * limit as it is now, not as it was (prlimit) */
  if (floor)
    budget_refresh ();
  g_mutex_lock (&fd_lock);
  if (floor && fd_floors_taken >= fd_budget.floors)
    {
      g_mutex_unlock (&fd_lock);
      return -ENFILE;
    }
  if (client != NULL)
    {
      if (fd_clients == NULL)
        fd_clients = g_hash_table_new (g_str_hash, g_str_equal);
      c = g_hash_table_lookup (fd_clients, client);
    }
  if (c == NULL)
    {
      c = g_new0 (FdClient, 1);
      c->key = g_strdup (client);
      if (client != NULL)
        g_hash_table_insert (fd_clients, c->key, c);
    }
  c->refs++;
  a = g_new0 (FbViewFdAccount, 1);
  a->ref = 1;
  a->client = c;
  if (floor)
    {
      a->floor = FB_VIEW_FD_FLOOR;
      fd_floors_taken++;
    }
  g_mutex_unlock (&fd_lock);
  *ret_account = a;
  return 0;
}

FB_DEFINE_ATOMIC_REF (fb_view_fd_account, FbViewFdAccount)

void
fb_view_fd_account_unref (FbViewFdAccount *account)
{
  FdClient *c;

  if (account == NULL || !g_atomic_int_dec_and_test (&account->ref))
    return;
  c = account->client;
  g_mutex_lock (&fd_lock);
  /* a file holds a reference: none is left held */
  g_warn_if_fail (account->held == 0);
  if (account->floor > 0)
    fd_floors_taken--;
  if (--c->refs == 0 && c->key != NULL)
    g_hash_table_remove (fd_clients, c->key);
  else if (c->refs > 0)
    c = NULL;
  g_mutex_unlock (&fd_lock);
  if (c != NULL)
    {
      g_free (c->key);
      g_free (c);
    }
  g_free (account->session);
  g_free (account);
}

guint
fb_view_fd_account_held (FbViewFdAccount *account)
{
  return (guint)g_atomic_int_get (&account->held);
}

/* The account of CALLER's session: found, or made.  A client of its own:
 * what a client's sessions hold is bounded by the remote API's shares of
 * handles (ipc/ipc-rpc-share.c) and by what a call opens and closes, and
 * a sandbox of the same client (on loopback, every local one) that takes
 * its client's part must not fail its harness's fs/readFile.  Kept while
 * it holds files. */
static int
session_account (const FbViewCaller *caller, FbViewFdAccount **ret_account)
{
  FbViewFdAccount *a;
  int r;

  g_mutex_lock (&fd_lock);
  a = fd_session_accounts != NULL ? g_hash_table_lookup (fd_session_accounts, caller->session) : NULL;
  if (a != NULL)
    fb_view_fd_account_ref (a);
  g_mutex_unlock (&fd_lock);
  if (a != NULL)
    {
      *ret_account = a;
      return 0;
    }
  r = fb_view_fd_account_new (NULL, false, &a);
  if (r < 0)
    return r;
  a->session = g_strdup (caller->session);
  g_mutex_lock (&fd_lock);
  if (fd_session_accounts == NULL)
    fd_session_accounts = g_hash_table_new (g_str_hash, g_str_equal);
  {
    FbViewFdAccount *other = g_hash_table_lookup (fd_session_accounts, caller->session);
    if (other != NULL)
      {
        /* another thread made it first: that one */
        fb_view_fd_account_ref (other);
        g_mutex_unlock (&fd_lock);
        fb_view_fd_account_unref (a);
        *ret_account = other;
        return 0;
      }
  }
  g_hash_table_insert (fd_session_accounts, a->session, fb_view_fd_account_ref (a));
  g_mutex_unlock (&fd_lock);
  *ret_account = a;
  return 0;
}

/* Forget a session's account that holds nothing any more (fd_lock): its
 * table reference, for the caller to drop without the lock. */
static FbViewFdAccount *
session_account_idle_locked (FbViewFdAccount *a)
{
  /* references are taken from the table under the lock only: two are
   * the table's and the caller's, and nobody is about to claim */
  if (a->session == NULL || g_atomic_int_get (&a->held) > 0 || g_atomic_int_get (&a->ref) > 2 ||
      fd_session_accounts == NULL || g_hash_table_lookup (fd_session_accounts, a->session) != a)
    return NULL;
  g_hash_table_remove (fd_session_accounts, a->session);
  return a;
}

int
view_file_claim (FbView *view, const FbViewCaller *caller, FbOp op, const char *path, FbAccess access,
                 FbViewFdAccount **ret_account)
{
  g_autoptr (FbViewFdAccount) a = NULL;
  FbViewFdAccount *idle = NULL;
  int r;

  tick ();
  if (caller != NULL && caller->session != NULL)
    {
      /* A session of the remote API is an account of its own, in every
       * view it calls through (the same sandbox context shares a view),
       * so that its fs/open handles leave the sandbox and the other
       * sessions theirs. */
      r = session_account (caller, &a);
      if (r < 0)
        return r;
    }
  /* several commands sharing the view: the caller's command's, if any */
  else if (caller == NULL || caller->pid <= 0 || view->options.owners == NULL ||
           (a = view->options.owners->fd_account_of (view->options.owners->data, caller->pid)) == NULL)
    a = fb_view_fd_account_ref (view->fd_account);
  g_mutex_lock (&fd_lock);
  r = claim_locked (a);
  if (r < 0)
    idle = session_account_idle_locked (a);
  g_mutex_unlock (&fd_lock);
  fb_view_fd_account_unref (idle);
  if (r < 0)
    {
      view_emit (view, caller, op, path, NULL, access, FB_DECISION_DENY, -r, view_refusal_rule (VIEW_REFUSAL_FILES));
      return r;
    }
  g_atomic_int_inc (&view->n_file_fds);
  g_atomic_int_inc (&fd_files);
  *ret_account = g_steal_pointer (&a);
  return 0;
}

void
view_file_unclaim (FbView *view, FbViewFdAccount *account)
{
  FbViewFdAccount *idle;

  g_mutex_lock (&fd_lock);
  unclaim_locked (account);
  idle = session_account_idle_locked (account);
  g_mutex_unlock (&fd_lock);
  g_atomic_int_add (&view->n_file_fds, -1);
  g_atomic_int_add (&fd_files, -1);
  fb_view_fd_account_unref (idle);
  fb_view_fd_account_unref (account);
}
