/* fusebox — changes made through one view, told to every listener.
 *
 * Design:
 *  - The kernel caches entries and attributes of a FUSE mount for long
 *    (fs-fuse.c): a change made through the mount itself updates those
 *    caches with the reply, but a change made through another view over
 *    the same host files (the remote API's in-process view, another
 *    sandbox's mount) or through another name of the same inode (a hard
 *    link) would show only when they expire.  So every view operation that
 *    changes a host object reports it here, after it succeeded and with no
 *    view lock held: the object's st_dev/st_ino, and for a name made,
 *    removed or renamed, its directory's st_dev/st_ino and the name.
 *  - Listeners are registered process-wide, one per view (the FUSE adapter
 *    registers its session's view).  Each is called on the thread that made
 *    the change, with the registry lock held; it must only look up what it
 *    knows (view_find_object) and queue work, never block: the FUSE adapter
 *    delivers its invalidations from its own notifier thread.
 *  - Lock order: the registry lock, then a view's table lock (in the
 *    listener's lookups).  Nothing takes the registry lock under a view lock.
 */
#include "fs/fs-private.h"

#include <string.h>

typedef struct
{
  FbView *view; /* not a reference: unlisten comes before the view goes */
  FbViewChangeFunc func;
  gpointer user_data;
} Listener;

static GMutex registry_lock;
static GArray *listeners; /* registry_lock: Listener */
static gint n_listeners;  /* atomic: a change with nobody listening costs one load */

void
fb_view_listen (FbView *view, FbViewChangeFunc func, gpointer user_data)
{
  Listener l = { view, func, user_data };

  g_mutex_lock (&registry_lock);
  if (listeners == NULL)
    listeners = g_array_new (FALSE, FALSE, sizeof (Listener));
  g_array_append_val (listeners, l);
  g_atomic_int_inc (&n_listeners);
  g_mutex_unlock (&registry_lock);
}

void
fb_view_unlisten (FbView *view, FbViewChangeFunc func, gpointer user_data)
{
  g_mutex_lock (&registry_lock);
  for (guint i = 0; listeners != NULL && i < listeners->len; i++)
    {
      Listener *l = &g_array_index (listeners, Listener, i);
      if (l->view == view && l->func == func && l->user_data == user_data)
        {
          g_array_remove_index_fast (listeners, i);
          g_atomic_int_add (&n_listeners, -1);
          break;
        }
    }
  g_mutex_unlock (&registry_lock);
}

typedef struct
{
  GFunc func;
  gpointer data;
  GDestroyNotify destroy;
} Deferred;

static void
deferred_free (gpointer p)
{
  g_array_unref (p);
}

static GPrivate deferred_key = G_PRIVATE_INIT (deferred_free); /* GArray of Deferred, per thread */

void
fb_view_change_defer (GFunc func, gpointer data, GDestroyNotify destroy)
{
  GArray *a = g_private_get (&deferred_key);
  Deferred d = { func, data, destroy };

  if (a == NULL)
    {
      a = g_array_new (FALSE, FALSE, sizeof (Deferred));
      g_private_set (&deferred_key, a);
    }
  g_array_append_val (a, d);
}

void
view_changed (FbView *view, FbViewNode *node, const FbViewChange *change)
{
  GArray *a;

  if (g_atomic_int_get (&n_listeners) == 0)
    return;
  g_mutex_lock (&registry_lock);
  for (guint i = 0; i < listeners->len; i++)
    {
      Listener *l = &g_array_index (listeners, Listener, i);
      l->func (l->view, view, node, change, l->user_data);
    }
  g_mutex_unlock (&registry_lock);
  a = g_private_get (&deferred_key);
  while (a != NULL && a->len > 0)
    {
      Deferred d = g_array_index (a, Deferred, a->len - 1);
      g_array_set_size (a, a->len - 1);
      d.func (d.data, NULL);
      if (d.destroy != NULL)
        d.destroy (d.data);
    }
}

void
view_changed_object (FbView *view, FbViewNode *node, guint what)
{
  if (node != NULL && node->kind == NODE_HOST)
    view_changed (view, node, &(FbViewChange){ .what = what, .dev = node->dev, .ino = node->ino });
}

void
view_changed_name (FbView *view, FbViewNode *parent, const char *name, const struct stat *object)
{
  FbViewChange c = { 0 };

  if (parent == NULL || parent->kind != NODE_HOST)
    return;
  c.what = FB_VIEW_CHANGE_NAME;
  c.parent_dev = parent->dev;
  c.parent_ino = parent->ino;
  c.name = name;
  if (object != NULL)
    {
      /* the object's link count and ctime changed too */
      c.what |= FB_VIEW_CHANGE_ATTR;
      c.dev = object->st_dev;
      c.ino = object->st_ino;
    }
  view_changed (view, parent, &c);
}
