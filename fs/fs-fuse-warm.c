/* fusebox — the libfuse adapter's refresher: a view that outlives its
 * commands keeps the attributes of the directories they listed valid for
 * the next one.
 *
 * Why.  The kernel marks a FUSE directory's atime stale after every listing
 * it could not serve from its cache (fuse_readdir_uncached calls
 * fuse_invalidate_atime; only a read-only superblock is spared, and a
 * read-only mount would refuse writes before the view could log them), and
 * a stale attribute is asked again by the next stat that wants it: glibc's
 * opendir fstat()s every directory it opens.  A cached listing does not
 * mark it.  So in a kept view (a `run --session` session's, a `serve`
 * session's) every directory the last command listed first would cost the
 * next command one GETATTR round trip, and nothing else would: its
 * listings come from the kernel's cache.
 *
 * What.  Every listing the view serves queues its directory (warm_listed,
 * from do_readdir).  Once no listing has been served for WARM_QUIET_MS (the
 * kernel marks a directory when the answer arrives, a few microseconds
 * after we send it; and a walk's own round trips are not to be slowed by
 * ours), or at once when the view's last command has ended
 * (fb_fuse_warm_flush), the warm thread sends the queued directories' view
 * paths to the refresher, a process of ours in the view's user and mount
 * namespaces (the launcher's keeper, which stays for this), which stats
 * each through the mount; the kernel's GETATTR brings the attributes back
 * for their timeout, and the next command finds them valid.  The daemon
 * can't stat through the mount itself: the kernel lets only processes in
 * the mount's user namespace (or, without allow_other, its owner) in
 * (fuse_allow_current_process), and a thread can't enter a user namespace.
 * Only directories whose attributes are kept long are queued (warm_worth:
 * a watched one, or a configured timeout of WARM_MIN_TIMEOUT or more);
 * elsewhere they expire before anyone gains.
 *
 * The refresher's GETATTR is not any process's access: op_getattr knows it
 * by its pid (the refresher's, as the connection's pid namespace names it)
 * and the view does not log it (FbViewCaller.unlogged).  A pid is a number
 * that is used again once its process is gone and reaped, and a process of
 * a sandbox that got the refresher's would go unlogged: so a request with
 * that pid is the refresher's only while a pidfd of the refresher, taken
 * while it could not have been reaped, still signals (pidfd_send_signal of
 * 0: a zombie holds its pid, a reaped process's pidfd answers ESRCH).  What
 * the refresher may do is the launcher's to bound (launcher-ns.c,
 * refresh_view): only stat, only through names the kernel has cached,
 * never out of the view's mount.
 *
 * Bounds: WARM_QUEUE_MAX directories queued, each holding a node
 * reference; past it a listing is not queued, and its directory costs the
 * next command a GETATTR, as without the refresher.  A message holds at
 * most FB_FUSE_WARM_MSG_MAX bytes of paths; the thread waits while the
 * socket is full.
 *
 * Ending.  The refresher lives in the mount's namespace, so the connection
 * ends only once it has left: fb_fuse_warm_stop() comes first in every
 * ending (fb_fuse_stop, fb_fuse_abort, fb_run_fuse_end), shuts the socket
 * down (the refresher reads its end and exits; a send waiting on a full
 * socket returns) and joins the thread.
 *
 * Threads and locks: warm_listed runs on FUSE workers, the thread on its
 * own; Warm.lock guards the queue and the flag, and is never held across a
 * system call or a view call. */
#include "fs/fs-fuse-private.h"

#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How long no listing must have been served before the queue is sent,
 * and how many directories a message holds at most: a listing that comes
 * meanwhile waits for one message, not for the queue. */
#define WARM_QUIET_MS 50
#define WARM_BATCH 64
#define WARM_QUEUE_MAX 65536
/* Shorter attribute timeouts expire before the next command gains. */
#define WARM_MIN_TIMEOUT 10.0

G_STATIC_ASSERT (FB_FUSE_WARM_MSG_MAX > FB_VIEW_PATH_MAX);

struct Warm
{
  int sock;        /* to the refresher */
  int pidfd;       /* the refresher's */
  pid_t pid;       /* the refresher's, while pidfd signals */
  GThread *thread; /* until fb_fuse_warm_stop */
  GMutex lock;
  GCond cond;
  GQueue queue;       /* lock: WarmItem*, oldest first */
  GHashTable *set;    /* lock: FbViewNode* -> its WarmItem */
  gint64 last_listed; /* lock: monotonic us of the last listing served */
  bool stop;          /* lock */
};

typedef struct
{
  GList link;       /* in Warm.queue; data points here */
  FbViewNode *node; /* a reference */
} WarmItem;

static void
item_free (WarmItem *it)
{
  fb_view_node_unref (it->node);
  g_free (it);
}

/* Append NODE's view path, relative to the root and NUL-terminated, to
 * BUF (of FB_FUSE_WARM_MSG_MAX bytes, *LEN used): false when it does not
 * fit (nothing appended). */
static bool
append_path (char *buf, gsize *len, FbViewNode *node)
{
  g_autoptr (NodeState) st = node_get_state (node);
  const char *rel;
  gsize n;

  if (st->too_long || st->path[0] != '/')
    return true; /* nothing to refresh: skipped */
  rel = st->path + 1;
  n = strlen (rel) + 1;
  if (*len + n > FB_FUSE_WARM_MSG_MAX)
    return false;
  memcpy (buf + *len, rel, n);
  *len += n;
  return true;
}

/* Send the queued directories to the refresher, a message at a time,
 * whenever listings have been quiet for WARM_QUIET_MS. */
static gpointer
warm_thread (gpointer data)
{
  Warm *w = data;
  g_autofree char *buf = g_malloc (FB_FUSE_WARM_MSG_MAX);

  g_mutex_lock (&w->lock);
  while (!w->stop)
    {
      gint64 quiet = w->last_listed + WARM_QUIET_MS * 1000;
      guint count = 0;
      GList *link;
      gsize len = 0;
      ssize_t n;

      if (w->queue.length == 0)
        {
          g_cond_wait (&w->cond, &w->lock);
          continue;
        }
      if (g_get_monotonic_time () < quiet)
        {
          g_cond_wait_until (&w->cond, &w->lock, quiet);
          continue;
        }
      /* a message's worth, oldest first */
      while (count++ < WARM_BATCH && (link = g_queue_peek_head_link (&w->queue)) != NULL)
        {
          WarmItem *it = link->data;
          bool fits;

          g_queue_unlink (&w->queue, link);
          g_hash_table_remove (w->set, it->node);
          g_mutex_unlock (&w->lock);
          fits = append_path (buf, &len, it->node);
          g_mutex_lock (&w->lock);
          if (!fits)
            {
              /* the next message's first */
              g_queue_push_head_link (&w->queue, link);
              g_hash_table_insert (w->set, it->node, it);
              break;
            }
          item_free (it);
        }
      if (len == 0)
        continue;
      g_mutex_unlock (&w->lock);
      n = send (w->sock, buf, len, MSG_NOSIGNAL);
      g_mutex_lock (&w->lock);
      if (n < 0 && errno != EINTR)
        break; /* the refresher is gone: the view is ending */
    }
  g_mutex_unlock (&w->lock);
  return NULL;
}

/* Are NODE's attributes kept long enough for a refresh to pay? */
static bool
warm_worth (FbFuse *f, FbViewNode *node)
{
  struct stat st = { .st_mode = S_IFDIR, .st_nlink = 1 };

  if (f->options.attr_timeout >= 0)
    return f->options.attr_timeout >= WARM_MIN_TIMEOUT;
  return f->coherent && fb_view_node_watched (node, &st);
}

void
warm_listed (FbFuse *f, FbViewNode *node)
{
  Warm *w = g_atomic_pointer_get (&f->warm);
  WarmItem *it;

  if (w == NULL || !warm_worth (f, node))
    return;
  g_mutex_lock (&w->lock);
  w->last_listed = g_get_monotonic_time ();
  if (!w->stop && w->queue.length < WARM_QUEUE_MAX && g_hash_table_lookup (w->set, node) == NULL)
    {
      it = g_new0 (WarmItem, 1);
      it->link.data = it;
      it->node = fb_view_node_ref (node);
      g_queue_push_tail_link (&w->queue, &it->link);
      g_hash_table_insert (w->set, node, it);
      if (w->queue.length == 1)
        g_cond_signal (&w->cond);
    }
  g_mutex_unlock (&w->lock);
}

bool
warm_is_refresher (FbFuse *f, pid_t pid)
{
  Warm *w = g_atomic_pointer_get (&f->warm);

  /* the number first (most requests are not its), then the process */
  return w != NULL && pid > 0 && pid == w->pid && syscall (SYS_pidfd_send_signal, w->pidfd, 0, NULL, 0) == 0;
}

/* The pid of PIDFD, as our /proc names it; -1 if unknown. */
static pid_t
pidfd_pid (int pidfd)
{
  g_autofree char *path = g_strdup_printf ("/proc/self/fdinfo/%d", pidfd);
  g_autofree char *text = NULL;
  const char *line;
  gint64 pid;

  if (!g_file_get_contents (path, &text, NULL, NULL) || (line = strstr (text, "\nPid:\t")) == NULL)
    return -1;
  pid = g_ascii_strtoll (line + 6, NULL, 10);
  return pid > 0 && pid <= G_MAXINT ? (pid_t)pid : -1;
}

int
fb_fuse_keep_warm (FbFuse *f, int sock, int pidfd)
{
  g_autoptr (GError) error = NULL;
  pid_t pid = pidfd >= 0 ? pidfd_pid (pidfd) : -1;
  Warm *w;

  if (sock < 0 || pid <= 0 || f->warm != NULL)
    {
      if (sock >= 0)
        close (sock);
      if (pidfd >= 0)
        close (pidfd);
      return f->warm != NULL ? -EALREADY : -EINVAL;
    }
  w = g_new0 (Warm, 1);
  w->sock = sock;
  w->pidfd = pidfd;
  w->pid = pid;
  g_mutex_init (&w->lock);
  g_cond_init (&w->cond);
  w->set = g_hash_table_new (NULL, NULL);
  w->thread = g_thread_try_new ("fusebox-warm", warm_thread, w, &error);
  if (w->thread == NULL)
    {
      f->warm = w;
      warm_free (f);
      return -EAGAIN;
    }
  /* published whole: workers may be serving already */
  g_atomic_pointer_set (&f->warm, w);
  return 0;
}

void
fb_fuse_warm_flush (FbFuse *f)
{
  Warm *w = f->warm;

  if (w == NULL)
    return;
  g_mutex_lock (&w->lock);
  w->last_listed = 0;
  g_cond_broadcast (&w->cond);
  g_mutex_unlock (&w->lock);
}

void
fb_fuse_warm_stop (FbFuse *f)
{
  Warm *w = f->warm;

  if (w == NULL || w->thread == NULL)
    return;
  g_mutex_lock (&w->lock);
  w->stop = true;
  g_cond_broadcast (&w->cond);
  g_mutex_unlock (&w->lock);
  /* wakes a send waiting on a full socket; the refresher reads the end */
  shutdown (w->sock, SHUT_RDWR);
  g_thread_join (g_steal_pointer (&w->thread));
}

/* After the workers: nothing reads f->warm any more. */
void
warm_free (FbFuse *f)
{
  Warm *w = f->warm;

  GList *link;

  if (w == NULL)
    return;
  fb_fuse_warm_stop (f);
  while ((link = g_queue_pop_head_link (&w->queue)) != NULL)
    item_free (link->data);
  g_hash_table_destroy (w->set);
  g_mutex_clear (&w->lock);
  g_cond_clear (&w->cond);
  close (w->sock);
  close (w->pidfd);
  g_free (w);
  f->warm = NULL;
}
