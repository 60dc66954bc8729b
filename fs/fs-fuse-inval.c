/* fusebox — the libfuse adapter's invalidations: what the kernel caches
 * about objects changed other than through its mount (fs-fuse.c "Caching").
 *
 * Design:
 *  - Invalidation.  Every view reports the host objects it changes
 *    (fb_view_listen, fs/fs-view-notify.c).  For each change the listener
 *    of this session finds the nodes of its view that show the object (by
 *    st_dev/st_ino) and that its kernel knows, and queues
 *    fuse_lowlevel_notify_inval_inode for them (data and attributes for a
 *    write or truncate, attributes only otherwise), skipping the node the
 *    change was made through in this session; for a name made, removed or
 *    renamed through another view it queues inval_entry for that name in
 *    every node of the directory, and inval_inode for the directory (its
 *    attributes and cached listing).  The queue is bounded (INVAL_QUEUE_MAX
 *    entries, coalesced per inode and name; past it a change shows at the
 *    timeout) and drained by one notifier thread per session, never by a
 *    worker; an operation only appends to it.  fb_fuse_free() stops
 *    listening, then ends the thread; a connection that has ended answers
 *    a notification at once.
 *    Host changes by other processes come through the same listeners with
 *    no origin (fs-watch.c); nobody waits for their delivery.  A lost event
 *    (fanotify's queue overflowed: FB_VIEW_CHANGE_ALL), or this queue
 *    full, sets inval_all: the notifier then invalidates every inode the
 *    kernel knows and expires every name (inval_everything).
 *  - Moved directories (fs-view-node.c).  A name change that did not come
 *    through this view (the host's, another view's) may have taken a
 *    directory node from its name, and a node the kernel still uses (a
 *    working directory) would go on serving the directory under its old
 *    path's decision wherever it went.  The listener queues the directory
 *    node at that name (in each node of the parent); the notifier checks
 *    each against its name (view_node_recheck: one statx), marks those the
 *    name no longer shows, and drops the kernel's entry, attributes and
 *    listing of them.  Bounded (MOVED_CHECKS_MAX queued, coalesced per
 *    node); past it, and whenever host events were lost, every host
 *    directory of the view is checked.
 *  - Absences.  A name looked up and not found has no node; to give it the
 *    long timeout (inval_absence_timeout) we remember it (ABSENCES_MAX at
 *    most, forgotten when invalidated or expired), so that inval_everything
 *    can expire it too.  Two races with a name made meanwhile, both closed:
 *    an invalidation of that name queued while the LOOKUP was being
 *    answered makes the answer short (name_gen counts name invalidations;
 *    name_gens keeps, per slot of a hash of the name, the count at the
 *    last one, and all_gen the count at the last inval_everything); one
 *    that meets a remembered absence is sent again INVAL_AGAIN_US later
 *    (inval_later), because the kernel enters a LOOKUP's answer in its
 *    dcache after we reply, and an invalidation arriving in between finds
 *    nothing to invalidate.  Per name, not any name: while names come and
 *    go in any directory shown (a build in /tmp), a lookup was often
 *    answered while some other name was invalidated, and its absence got
 *    the short timeout; a slot shared with another name errs the same
 *    safe way, rarely (1 in INVAL_NAME_SLOTS).
 *  - Eviction.  The view keeps at most fb_view_get_node_max() nodes, and
 *    every name the kernel remembers is one.  Past three quarters of that,
 *    a reply asks (at most once a second) the notifier to invalidate the
 *    oldest names the kernel holds that have nothing known below them
 *    (fb_view_foreach_evictable), down to half: the kernel drops those
 *    dentries it is not using and FORGETs their inodes, which frees the
 *    nodes.  Mount points, /proc, /dev and names kept for the view's life
 *    are never invalidated (that would detach the sandbox's mounts there).
 */
#include "fs/fs-fuse-private.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>

FB_DEFINE_ATOMIC_REF (inval_sync, InvalSync)

void
inval_sync_unref (InvalSync *s)
{
  if (s != NULL && g_atomic_int_dec_and_test (&s->ref))
    {
      g_mutex_clear (&s->lock);
      g_cond_clear (&s->cond);
      g_free (s);
    }
}

/* The longest a changing thread waits for its invalidations: they take
 * microseconds, but one for a directory waits in the kernel for that
 * directory's lock, whose holder may be waiting for an answer from this
 * very thread (two sessions changing each other's views at once). */
#define INVAL_WAIT_US (1000 * 1000)

typedef struct
{
  InvalSync *sync;
  guint64 seq;
} InvalWait;

static void
inval_wait (gpointer data, gpointer unused)
{
  InvalWait *w = data;
  gint64 until = g_get_monotonic_time () + INVAL_WAIT_US;

  g_mutex_lock (&w->sync->lock);
  while (w->sync->done < w->seq && !w->sync->stopped)
    if (!g_cond_wait_until (&w->sync->cond, &w->sync->lock, until))
      break;
  g_mutex_unlock (&w->sync->lock);
}

static void
inval_wait_free (gpointer data)
{
  InvalWait *w = data;

  inval_sync_unref (w->sync);
  g_free (w);
}

/* Most invalidations queued at once; past it they are dropped (the change
 * then shows when the cache times out).  Coalescing keeps a burst of writes
 * to one file at one entry. */
#define INVAL_QUEUE_MAX 4096

typedef struct
{
  guint64 seq;
  char *key; /* "i:INO" or "e:INO:NAME", for coalescing */
  fuse_ino_t ino;
  off_t off;  /* inodes: 0 drops cached data too, -1 attributes only */
  char *name; /* NULL: the inode; else the entry NAME in directory INO */
  gint64 due; /* inval_later: when to send it again (monotonic us) */
} Inval;

/* --- invalidation -------------------------------------------------------------- */

static void
inval_free (Inval *iv)
{
  g_free (iv->key);
  g_free (iv->name);
  g_free (iv);
}

/* The invalidation of a name given as a long absence is sent twice: at
 * once, and again INVAL_AGAIN_US later.  The second closes a race the
 * kernel leaves open: a LOOKUP answered "absent" (decided just before the
 * name was made) but not yet entered in the dcache is invisible to the
 * first invalidation, and would then stand for its whole timeout. */
#define INVAL_AGAIN_US (1000 * 1000)

/* Most absences given the long timeout at once (about 100 bytes each);
 * past it, absences get the short one. */
#define ABSENCES_MAX 65536

static bool inval_push_locked_later (FbFuse *f, const char *key, fuse_ino_t ino, const char *name, gint64 due);

/* The slot of name_gens for KEY ("e:INO:NAME"). */
static guint
name_slot (const char *key)
{
  return g_str_hash (key) % INVAL_NAME_SLOTS;
}

/* Was KEY's name invalidated (or everything) since a lookup began at GEN?
 * inval_lock held.  Another name of the same slot counts too: then the
 * absence is only given the short timeout. */
static bool
name_invalidated_since_locked (FbFuse *f, const char *key, guint64 gen)
{
  return f->all_gen > gen || f->name_gens[name_slot (key)] > gen;
}

/* A new entry at the tail of QUEUE (its key in PENDING), or NULL when
 * QUEUE is full: then everything is invalidated instead, rather than let a
 * change wait for a long timeout. */
static Inval *
inval_enqueue_locked (FbFuse *f, GQueue *queue, GHashTable *pending, const char *key, fuse_ino_t ino, const char *name)
{
  Inval *iv;

  if (queue->length >= INVAL_QUEUE_MAX)
    {
      f->inval_dropped++;
      f->inval_all = true;
      g_cond_signal (&f->inval_cond);
      return NULL;
    }
  iv = g_new0 (Inval, 1);
  iv->key = g_strdup (key);
  iv->ino = ino;
  iv->name = g_strdup (name);
  g_hash_table_insert (pending, iv->key, iv);
  g_queue_push_tail (queue, iv);
  g_cond_signal (&f->inval_cond);
  return iv;
}

/* Queue with inval_lock held.  AGAIN: a name's second sending (from
 * inval_later), not to be scheduled once more. */
static guint64
inval_push_locked (FbFuse *f, fuse_ino_t ino, off_t off, const char *name, bool again)
{
  guint64 seq = 0;
  g_autofree char *key = name != NULL ? g_strdup_printf ("e:%" G_GUINT64_FORMAT ":%s", (guint64)ino, name)
                                      : g_strdup_printf ("i:%" G_GUINT64_FORMAT, (guint64)ino);
  bool queued = false;
  Inval *iv;

  if (f->inval_stop)
    return 0;
  if (name != NULL)
    f->name_gens[name_slot (key)] = __atomic_add_fetch (&f->name_gen, 1, __ATOMIC_RELEASE);
  if ((iv = g_hash_table_lookup (f->inval_pending, key)) != NULL)
    {
      if (off == 0)
        iv->off = 0; /* the data too */
      seq = iv->seq;
      queued = true;
    }
  else if (f->inval_all)
    ; /* everything goes anyway */
  else if ((iv = inval_enqueue_locked (f, &f->inval_queue, f->inval_pending, key, ino, name)) != NULL)
    {
      iv->off = off;
      iv->seq = seq = ++f->inval_seq;
      queued = true;
    }
  /* An absence we gave goes with this invalidation, and again in a while
   * (the answer may still be on its way into the dcache); no need to
   * expire it on overflow then.  Unless this one was not queued: then
   * inval_everything, which is coming, must still find it. */
  if (name != NULL && queued && g_hash_table_contains (f->absences, key) &&
      (again || inval_push_locked_later (f, key, ino, name, g_get_monotonic_time () + INVAL_AGAIN_US)))
    g_hash_table_remove (f->absences, key);
  return seq;
}

/* Schedule KEY's second sending at DUE (a later one moves it later).
 * FALSE: no room (everything is invalidated instead). */
static bool
inval_push_locked_later (FbFuse *f, const char *key, fuse_ino_t ino, const char *name, gint64 due)
{
  Inval *iv;

  if ((iv = g_hash_table_lookup (f->later_pending, key)) == NULL)
    iv = inval_enqueue_locked (f, &f->inval_later, f->later_pending, key, ino, name);
  if (iv == NULL)
    return false;
  iv->due = due; /* an entry moved later stays in its place: at worst sent one delay late */
  return true;
}

/* Called from the view's change listener (any thread): queue, never block.
 * Returns the sequence number to wait for (0: nothing to wait for). */
static guint64
inval_push (FbFuse *f, fuse_ino_t ino, off_t off, const char *name)
{
  guint64 seq;

  g_mutex_lock (&f->inval_lock);
  seq = inval_push_locked (f, ino, off, name, false);
  g_mutex_unlock (&f->inval_lock);
  return seq;
}

static gboolean
absence_expired (gpointer key, gpointer value, gpointer now_s)
{
  return GPOINTER_TO_UINT (value) <= GPOINTER_TO_UINT (now_s);
}

/* Before a lookup: the token inval_absence_timeout wants. */
guint64
inval_name_gen (FbFuse *f)
{
  /* written under inval_lock, read without it: every lookup asks */
  return __atomic_load_n (&f->name_gen, __ATOMIC_ACQUIRE);
}

/* The negative-entry timeout for NAME, absent from PARENT (FUSE inode
 * PARENT_INO), found so by a lookup that began at GEN (inval_name_gen):
 * long where the host watcher reports names made in PARENT (fs-fuse.c
 * "Caching"), provided NAME was not invalidated there since GEN and the absence
 * is remembered here, so that an overflow (events lost) can expire it;
 * short otherwise. */
double
inval_absence_timeout (FbFuse *f, guint64 gen, fuse_ino_t parent_ino, FbViewNode *parent, const char *name)
{
  struct stat dir = { .st_mode = S_IFDIR, .st_nlink = 1 };
  g_autofree char *key = NULL;
  gint64 now;
  bool kept = false;

  if (f->options.negative_timeout >= 0)
    return f->options.negative_timeout;
  if (!f->coherent || !fb_view_node_watched (parent, &dir))
    return FB_FUSE_TIMEOUT_SHORT;
  key = g_strdup_printf ("e:%" G_GUINT64_FORMAT ":%s", (guint64)parent_ino, name);
  now = g_get_monotonic_time ();
  g_mutex_lock (&f->inval_lock);
  if (g_hash_table_size (f->absences) >= ABSENCES_MAX && now - f->absences_purged > G_USEC_PER_SEC)
    {
      /* the kernel has forgotten these by now */
      f->absences_purged = now;
      g_hash_table_foreach_remove (f->absences, absence_expired, GUINT_TO_POINTER ((guint)(now / G_USEC_PER_SEC)));
    }
  if (!f->inval_stop && !name_invalidated_since_locked (f, key, gen) &&
      (g_hash_table_size (f->absences) < ABSENCES_MAX || g_hash_table_contains (f->absences, key)))
    {
      guint until = (guint)(now / G_USEC_PER_SEC) + (guint)FB_FUSE_TIMEOUT_COHERENT + 1;
      g_hash_table_replace (f->absences, g_steal_pointer (&key), GUINT_TO_POINTER (until));
      kept = true;
    }
  g_mutex_unlock (&f->inval_lock);
  return kept ? FB_FUSE_TIMEOUT_COHERENT : FB_FUSE_TIMEOUT_SHORT;
}

static fuse_ino_t
node_ino (FbFuse *f, FbViewNode *node)
{
  return node == f->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)node;
}

/* Does this session's kernel know NODE? */
static bool
kernel_knows (FbFuse *f, FbViewNode *node)
{
  return node == f->root || fb_view_node_get_kernel_count (node) > 0;
}

typedef struct
{
  FbFuse *f;
  FbViewNode *skip; /* the node the change was made through, in our view: the kernel knows already */
  off_t off;
  const char *name;
  guint64 seq; /* the highest queued */
} Collect;

static void
collect_inode (FbViewNode *node, gpointer data)
{
  Collect *c = data;

  if (node != c->skip && kernel_knows (c->f, node))
    c->seq = MAX (c->seq, inval_push (c->f, node_ino (c->f, node), c->off, NULL));
}

/* --- moved directories ----------------------------------------------------------- */

/* Most directories waiting for their check at once; past it, every
 * directory of the view is checked (as after lost events). */
#define MOVED_CHECKS_MAX 4096

/* Move the queued checks' references into NODES (inval_lock held). */
static void
moved_take_locked (FbFuse *f, GPtrArray *nodes)
{
  GHashTableIter iter;
  gpointer key;

  g_hash_table_iter_init (&iter, f->moved_checks);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    g_ptr_array_add (nodes, key);
  g_hash_table_steal_all (f->moved_checks);
}

/* Queue the check of NODE (a reference, or NULL), inval_lock held and the
 * view's lock too (fb_view_find_object): the set's reference is NODE's,
 * and a node already in it keeps the one it has (ours is then not the
 * last, and its drop takes no lock). */
static void
moved_add_locked (FbFuse *f, FbViewNode *node)
{
  if (node == NULL)
    return;
  if (g_hash_table_contains (f->moved_checks, node))
    fb_view_node_unref (node);
  else
    g_hash_table_add (f->moved_checks, node);
  g_cond_signal (&f->inval_cond);
}

/* Room for one more check?  Else every directory is checked (inval_lock
 * held). */
static bool
moved_room_locked (FbFuse *f)
{
  if (f->inval_stop || f->moved_all)
    return false;
  if (g_hash_table_size (f->moved_checks) < MOVED_CHECKS_MAX)
    return true;
  f->moved_all = true;
  g_cond_signal (&f->inval_cond);
  return false;
}

/* Check the queued directories (fs-view-node.c "Moved directories"); for
 * each one marked moved, the kernel's attributes and listing of it and its
 * name go.  The notifier thread, no lock held. */
static void
moved_settle (FbFuse *f)
{
  g_autoptr (GPtrArray) nodes = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);
  bool all, mounts;

  g_mutex_lock (&f->inval_lock);
  all = f->moved_all;
  mounts = f->moved_mounts;
  f->moved_all = false;
  f->moved_mounts = false;
  moved_take_locked (f, nodes);
  g_mutex_unlock (&f->inval_lock);
  if (all || mounts)
    view_host_dirs_ref (f->view, !all, nodes);
  for (guint i = 0; i < nodes->len; i++)
    {
      FbViewNode *node = nodes->pdata[i];
      g_autoptr (FbViewNode) parent = NULL;
      g_autofree char *name = NULL;

      if (!view_node_recheck (node, &parent, &name))
        continue;
      g_mutex_lock (&f->inval_lock);
      if (kernel_knows (f, node))
        (void)inval_push_locked (f, node_ino (f, node), 0, NULL, false);
      if (kernel_knows (f, parent))
        (void)inval_push_locked (f, node_ino (f, parent), -1, name, false);
      g_mutex_unlock (&f->inval_lock);
    }
}

/* How often the sources are checked where some way is not watched. */
#define SOURCES_POLL_US G_USEC_PER_SEC

/* Check the mounts' sources (fs-view-source.c); for a mount point marked
 * now, the kernel's attributes and listing of it go.  The notifier thread,
 * no lock held. */
static void
sources_settle (FbFuse *f)
{
  g_autoptr (GPtrArray) nodes = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);

  g_mutex_lock (&f->inval_lock);
  f->sources_check = false;
  if (f->sources_due != 0)
    f->sources_due = g_get_monotonic_time () + SOURCES_POLL_US;
  g_mutex_unlock (&f->inval_lock);
  if (view_sources_check (f->view, nodes) == 0)
    return;
  g_mutex_lock (&f->inval_lock);
  for (guint i = 0; i < nodes->len; i++)
    if (kernel_knows (f, nodes->pdata[i]))
      (void)inval_push_locked (f, node_ino (f, nodes->pdata[i]), 0, NULL, false);
  g_mutex_unlock (&f->inval_lock);
}

static void
collect_entry (FbViewNode *node, gpointer data)
{
  Collect *c = data;

  /* the directory that had the name may have left it (a change made
   * through this view moved its nodes already) */
  g_mutex_lock (&c->f->inval_lock);
  if (moved_room_locked (c->f))
    moved_add_locked (c->f, view_child_dir_ref_locked (c->f->view, node, c->name));
  g_mutex_unlock (&c->f->inval_lock);
  if (!S_ISDIR (fb_view_node_get_type (node)) || !kernel_knows (c->f, node))
    return;
  /* the name (a negative entry too), the directory's attributes and listing */
  c->seq = MAX (c->seq, inval_push (c->f, node_ino (c->f, node), 0, c->name));
  c->seq = MAX (c->seq, inval_push (c->f, node_ino (c->f, node), 0, NULL));
}

/* A view (ours or another over the same host files) changed a host object.
 * Changes made through our own mount reach the kernel with the reply,
 * except for the other names of a hard-linked inode (other FUSE inodes). */
static void
on_view_change (FbView *listener_view, FbView *origin, FbViewNode *origin_node, const FbViewChange *change,
                gpointer user_data)
{
  FbFuse *f = user_data;
  Collect c = { f, origin == listener_view ? origin_node : NULL, -1, NULL, 0 };

  if (change->what & FB_VIEW_CHANGE_MOUNTS)
    {
      /* a mount moved or taken off: the sources, and the directories that
       * are mounts' roots, may have left their names */
      g_mutex_lock (&f->inval_lock);
      f->sources_check = true;
      f->moved_mounts = true;
      g_cond_signal (&f->inval_cond);
      g_mutex_unlock (&f->inval_lock);
      return;
    }
  if (change->what & FB_VIEW_CHANGE_ALL)
    {
      g_mutex_lock (&f->inval_lock);
      f->inval_all = true;
      f->moved_all = true;
      f->sources_check = true;
      g_cond_signal (&f->inval_cond);
      g_mutex_unlock (&f->inval_lock);
      return;
    }

  if (change->ino != 0 && (change->what & (FB_VIEW_CHANGE_DATA | FB_VIEW_CHANGE_ATTR)))
    {
      c.off = (change->what & FB_VIEW_CHANGE_DATA) ? 0 : -1;
      fb_view_find_object (listener_view, change->dev, change->ino, collect_inode, &c);
    }
  /* a name on the way to a mount's source: this view's own renames too */
  if ((change->what & FB_VIEW_CHANGE_NAME) &&
      view_sources_on_the_way (listener_view, change->parent_dev, change->parent_ino))
    {
      g_mutex_lock (&f->inval_lock);
      f->sources_check = true;
      g_cond_signal (&f->inval_cond);
      g_mutex_unlock (&f->inval_lock);
    }
  if ((change->what & FB_VIEW_CHANGE_NAME) && origin != listener_view && change->name != NULL)
    {
      c.name = change->name;
      fb_view_find_object (listener_view, change->parent_dev, change->parent_ino, collect_entry, &c);
    }
  if (c.seq != 0 && origin != NULL)
    {
      /* the changing thread waits (outside every lock) for the delivery */
      InvalWait *w = g_new0 (InvalWait, 1);
      w->sync = inval_sync_ref (f->sync);
      w->seq = c.seq;
      fb_view_change_defer (inval_wait, w, inval_wait_free);
    }
}

typedef struct
{
  fuse_ino_t ino;
  fuse_ino_t parent; /* 0 for the root */
  char *name;
} Known;

static void
collect_known (FbViewNode *node, FbViewNode *parent, const char *name, gpointer data)
{
  GArray *a = data;
  Known k = { 0 };

  k.ino = (fuse_ino_t)(uintptr_t)node;
  if (parent != NULL)
    {
      k.parent = (fuse_ino_t)(uintptr_t)parent;
      k.name = g_strdup (name);
    }
  g_array_append_val (a, k);
}

static void
known_clear (gpointer p)
{
  g_free (((Known *)p)->name);
}

/* Host events were lost (the kernel's fanotify queue or ours overflowed):
 * drop the attributes and data of every inode the kernel knows, and let
 * every name it knows expire (revalidated at the next use; expiring rather
 * than invalidating keeps mounts made on them in the sandbox), and every
 * absence given the long timeout.  Bounded by the node count and
 * ABSENCES_MAX; the lists are made under the locks, delivered outside them
 * (an address forgotten meanwhile is answered ENOENT, one reused gets a
 * needless invalidation). */
static void
inval_everything (FbFuse *f)
{
  g_autoptr (GArray) known = g_array_new (FALSE, FALSE, sizeof (Known));
  g_autoptr (GHashTable) absences = NULL;
  GHashTableIter iter;
  gpointer key;

  g_mutex_lock (&f->inval_lock);
  absences = g_steal_pointer (&f->absences);
  f->absences = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_mutex_unlock (&f->inval_lock);
  g_array_set_clear_func (known, known_clear);
  fb_view_foreach_known (f->view, collect_known, known);
  for (guint i = 0; i < known->len; i++)
    {
      Known *k = &g_array_index (known, Known, i);
      fuse_ino_t ino = k->parent == 0 ? FUSE_ROOT_ID : k->ino;
      fuse_ino_t parent = (FbViewNode *)(uintptr_t)k->parent == f->root ? FUSE_ROOT_ID : k->parent;
      (void)fuse_lowlevel_notify_inval_inode (f->se, ino, 0, 0);
      if (k->name != NULL)
        (void)fuse_lowlevel_notify_expire_entry (f->se, parent, k->name, strlen (k->name), FUSE_LL_EXPIRE_ONLY);
    }
  g_hash_table_iter_init (&iter, absences);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    {
      /* "e:INO:NAME" (inval_absence_timeout) */
      char *end = NULL;
      guint64 ino = g_ascii_strtoull ((const char *)key + 2, &end, 10);
      if (end != NULL && *end == ':')
        (void)fuse_lowlevel_notify_expire_entry (f->se, (fuse_ino_t)ino, end + 1, strlen (end + 1),
                                                 FUSE_LL_EXPIRE_ONLY);
    }
}

void
inval_evict_request (FbFuse *f)
{
  gint64 now = g_get_monotonic_time ();
  gint64 last = __atomic_load_n (&f->evict_asked, __ATOMIC_RELAXED);

  if (now - last < G_USEC_PER_SEC ||
      !__atomic_compare_exchange_n (&f->evict_asked, &last, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    return;
  g_mutex_lock (&f->inval_lock);
  f->inval_evict = true;
  g_cond_signal (&f->inval_cond);
  g_mutex_unlock (&f->inval_lock);
}

/* See "Eviction" above. */
static void
inval_evict (FbFuse *f)
{
  g_autoptr (GArray) known = g_array_new (FALSE, FALSE, sizeof (Known));
  guint count = fb_view_count_nodes (f->view), keep = fb_view_get_node_max (f->view) / 2;

  if (count <= keep)
    return;
  g_array_set_clear_func (known, known_clear);
  fb_view_foreach_evictable (f->view, count - keep, collect_known, known);
  for (guint i = 0; i < known->len; i++)
    {
      Known *k = &g_array_index (known, Known, i);
      fuse_ino_t parent = (FbViewNode *)(uintptr_t)k->parent == f->root ? FUSE_ROOT_ID : k->parent;
      (void)fuse_lowlevel_notify_inval_entry (f->se, parent, k->name, strlen (k->name));
    }
}

/* Move the second sendings that are due into the queue; returns when the
 * next one is due (0: none waits). */
static gint64
inval_later_due_locked (FbFuse *f)
{
  gint64 now = g_get_monotonic_time ();
  Inval *iv;

  while ((iv = g_queue_peek_head (&f->inval_later)) != NULL)
    {
      if (iv->due > now)
        return iv->due;
      g_queue_pop_head (&f->inval_later);
      g_hash_table_remove (f->later_pending, iv->key);
      (void)inval_push_locked (f, iv->ino, 0, iv->name, true);
      inval_free (iv);
    }
  return 0;
}

/* The notifier thread: delivers the queued invalidations outside every FUSE
 * operation (fs.h: never from inside one, where the kernel may hold the
 * directory lock that an invalidation needs).  A thread of its own rather
 * than the main loop: fs/ serves sessions with no main loop of its own
 * (`fusebox mount`), and an invalidation may wait in the kernel for a
 * directory lock until a worker answers the request holding it, which
 * would stall the log writer and the API if it ran on the loop.  A
 * connection that has ended answers at once (ENODEV/ENOENT, ignored). */
static gpointer
inval_thread (gpointer data)
{
  FbFuse *f = data;

  g_mutex_lock (&f->inval_lock);
  for (;;)
    {
      Inval *iv;
      gint64 next = inval_later_due_locked (f);
      bool moved = f->moved_all || f->moved_mounts || g_hash_table_size (f->moved_checks) > 0;
      bool sources = f->sources_check || (f->sources_due != 0 && f->sources_due <= g_get_monotonic_time ());

      if (f->sources_due != 0 && (next == 0 || f->sources_due < next))
        next = f->sources_due;
      if (f->inval_queue.length == 0 && !f->inval_all && !f->inval_evict && !f->inval_stop && !moved && !sources)
        {
          if (next != 0)
            g_cond_wait_until (&f->inval_cond, &f->inval_lock, next);
          else
            g_cond_wait (&f->inval_cond, &f->inval_lock);
          continue;
        }
      if (f->inval_stop)
        break;
      if (f->inval_all)
        {
          guint64 seq = f->inval_seq;
          f->inval_all = false;
          g_hash_table_remove_all (f->inval_pending);
          g_queue_clear_full (&f->inval_queue, (GDestroyNotify)inval_free);
          /* inval_later stays: those absences left the table already */
          /* a lookup under way may have decided before the lost change:
           * its absence gets the short timeout */
          f->all_gen = __atomic_add_fetch (&f->name_gen, 1, __ATOMIC_RELEASE);
          g_mutex_unlock (&f->inval_lock);
          inval_everything (f);
          g_mutex_lock (&f->sync->lock);
          f->sync->done = MAX (f->sync->done, seq);
          g_cond_broadcast (&f->sync->cond);
          g_mutex_unlock (&f->sync->lock);
          g_mutex_lock (&f->inval_lock);
          continue;
        }
      if (sources)
        {
          g_mutex_unlock (&f->inval_lock);
          sources_settle (f);
          g_mutex_lock (&f->inval_lock);
          continue;
        }
      if (moved)
        {
          g_mutex_unlock (&f->inval_lock);
          moved_settle (f);
          g_mutex_lock (&f->inval_lock);
          continue;
        }
      if (f->inval_evict)
        {
          f->inval_evict = false;
          g_mutex_unlock (&f->inval_lock);
          inval_evict (f);
          g_mutex_lock (&f->inval_lock);
          continue;
        }
      iv = g_queue_pop_head (&f->inval_queue);
      g_hash_table_remove (f->inval_pending, iv->key);
      g_mutex_unlock (&f->inval_lock);
      if (iv->name != NULL)
        (void)fuse_lowlevel_notify_inval_entry (f->se, iv->ino, iv->name, strlen (iv->name));
      else
        (void)fuse_lowlevel_notify_inval_inode (f->se, iv->ino, iv->off, 0);
      g_mutex_lock (&f->sync->lock);
      f->sync->done = iv->seq;
      g_cond_broadcast (&f->sync->cond);
      g_mutex_unlock (&f->sync->lock);
      inval_free (iv);
      g_mutex_lock (&f->inval_lock);
    }
  g_mutex_unlock (&f->inval_lock);
  g_mutex_lock (&f->sync->lock);
  f->sync->stopped = true;
  g_cond_broadcast (&f->sync->cond);
  g_mutex_unlock (&f->sync->lock);
  return NULL;
}

/* Start listening once the session exists (fb_fuse_mount). */
int
inval_start (FbFuse *f)
{
  g_autoptr (GError) error = NULL;
  sigset_t block, old;

  if (f->listening)
    return 0;
  sigfillset (&block);
  pthread_sigmask (SIG_BLOCK, &block, &old);
  f->inval_thread = g_thread_try_new ("fusebox-inval", inval_thread, f, &error);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  if (f->inval_thread == NULL)
    return -EAGAIN;
  /* host changes: only when we choose the timeouts (fs-fuse.c "Caching") */
  if ((f->options.entry_timeout < 0 || f->options.attr_timeout < 0) && fb_watch_start ())
    {
      f->coherent = true;
      fb_watch_view (f->view);
      (void)view_sources_watch (f->view);
    }
  /* the sources' ways unwatched (no watcher, or a step not marked): checked
   * now and then, and once now (fs-view-source.c) */
  g_mutex_lock (&f->inval_lock);
  f->sources_check = true;
  if (view_sources_polled (f->view))
    f->sources_due = g_get_monotonic_time () + SOURCES_POLL_US;
  g_cond_signal (&f->inval_cond);
  g_mutex_unlock (&f->inval_lock);
  fb_view_listen (f->view, on_view_change, f);
  f->listening = true;
  return 0;
}

/* Before the session goes: no more changes come in, the thread ends, what
 * is left in the queue is dropped (the kernel's caches go with the
 * connection). */
void
inval_finish (FbFuse *f)
{
  if (f->listening)
    {
      fb_view_unlisten (f->view, on_view_change, f);
      f->listening = false;
    }
  g_mutex_lock (&f->inval_lock);
  f->inval_stop = true;
  g_cond_signal (&f->inval_cond);
  g_mutex_unlock (&f->inval_lock);
  if (f->inval_thread != NULL)
    {
      g_thread_join (f->inval_thread);
      f->inval_thread = NULL;
    }
  g_queue_clear_full (&f->inval_queue, (GDestroyNotify)inval_free);
  g_hash_table_remove_all (f->inval_pending);
  g_queue_clear_full (&f->inval_later, (GDestroyNotify)inval_free);
  g_hash_table_remove_all (f->later_pending);
  g_hash_table_remove_all (f->absences);
  {
    /* the checks' references go outside every lock */
    g_autoptr (GPtrArray) nodes = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);

    g_mutex_lock (&f->inval_lock);
    moved_take_locked (f, nodes);
    f->moved_all = false;
    g_mutex_unlock (&f->inval_lock);
  }
  g_mutex_lock (&f->sync->lock);
  f->sync->stopped = true;
  g_cond_broadcast (&f->sync->cond);
  g_mutex_unlock (&f->sync->lock);
}

void
inval_init (FbFuse *f)
{
  g_mutex_init (&f->inval_lock);
  g_cond_init (&f->inval_cond);
  g_queue_init (&f->inval_queue);
  f->inval_pending = g_hash_table_new (g_str_hash, g_str_equal);
  g_queue_init (&f->inval_later);
  f->later_pending = g_hash_table_new (g_str_hash, g_str_equal);
  f->absences = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  f->moved_checks = g_hash_table_new (g_direct_hash, g_direct_equal);
  f->sync = g_new0 (InvalSync, 1);
  f->sync->ref = 1;
  g_mutex_init (&f->sync->lock);
  g_cond_init (&f->sync->cond);
}

/* After inval_finish (or when the session never started). */
void
inval_clear (FbFuse *f)
{
  g_queue_clear_full (&f->inval_queue, (GDestroyNotify)inval_free);
  g_queue_clear_full (&f->inval_later, (GDestroyNotify)inval_free);
  g_hash_table_destroy (f->inval_pending);
  g_hash_table_destroy (f->later_pending);
  g_hash_table_destroy (f->absences);
  g_hash_table_destroy (f->moved_checks); /* emptied by inval_finish */
  inval_sync_unref (f->sync);
  g_cond_clear (&f->inval_cond);
  g_mutex_clear (&f->inval_lock);
}
