/* fusebox — the access log's live subscribers (the remote API's
 * log/subscribe).
 *
 * A subscriber's callback runs on the loop's thread, with no lock of the log
 * held, with each record's line in seq order.  write() (under the core's
 * writer lock, any thread) only keeps a copy of the line for the loop; so a
 * record written through by a FUSE worker is in the file before the worker
 * answers, subscriber or not: a listener never turns write-through off.
 * The loop delivers the lines at its next turn (at once when the record was
 * written on its own thread: the core calls fb_log_subscribers_deliver after
 * releasing its lock).
 *
 * Each line goes to the subscribers that were there when it was written
 * (ids grow, so a line keeps the last id given then), and a subscriber that
 * leaves on the loop's thread first gets the lines written before it left.
 *
 * Bound: at most FB_LOG_SUBSCRIBERS_MAX_LINES lines and
 * FB_LOG_SUBSCRIBERS_MAX_BYTES of them wait for the loop; past that a pusher
 * on another thread waits after its write (fb_log_subscribers_wait_room),
 * as it would for room in the core's queue: the sandbox slows down, no
 * subscriber misses a record, and the memory the sandbox can make us hold
 * stays bounded.
 *
 * Locks: lock (every field below it) is taken after the core's writer lock
 * or alone; no callback runs under it.  A log no one listens to takes it
 * for no record: three counters mirror what the pushers need to know. */
#include "ipc/ipc-log-output.h"
#include "policy/util.h"

#include <string.h>

typedef struct
{
  guint id;
  FbAccessLogFunc func;
  gpointer user_data;
  GDestroyNotify destroy;
} Subscriber;

typedef struct
{
  char *line;
  gsize len;
  guint last_id; /* subscribers with an id up to this one were there */
} Pending;

typedef struct
{
  GSource source;
  FbLogSubscribers *subs;
} DeliverSource;

struct FbLogSubscribers
{
  FbLogOutput output;
  GSource *source;     /* wakes the loop to deliver */
  gboolean delivering; /* loop thread only: a callback that pushes does not deliver again */
  /* Read without the lock, so that a log no one listens to pays nothing
   * here; written under it. */
  gint listening; /* atomic: subscribers */
  gint waiting;   /* atomic: lines pending */
  gint over;      /* atomic: pending past the bound */

  GMutex lock;
  GCond room;
  GArray *subscribers; /* Subscriber */
  guint next_id;
  GQueue pending; /* Pending*, oldest first */
  gsize pending_bytes;
  gboolean closed;
};

static void
pending_free (Pending *p)
{
  g_free (p->line);
  g_free (p);
}

/* lock held */
static void
update_counts (FbLogSubscribers *subs)
{
  g_atomic_int_set (&subs->listening, (gint)subs->subscribers->len);
  g_atomic_int_set (&subs->waiting, (gint)subs->pending.length);
  g_atomic_int_set (&subs->over, subs->pending.length > FB_LOG_SUBSCRIBERS_MAX_LINES ||
                                   subs->pending_bytes > FB_LOG_SUBSCRIBERS_MAX_BYTES);
}

static void
subs_write (FbLogOutput *output, const FbLogLine *record)
{
  FbLogSubscribers *subs = container_of (output, FbLogSubscribers, output);
  Pending *p;

  if (!g_atomic_int_get (&subs->listening))
    return;
  g_mutex_lock (&subs->lock);
  if (subs->subscribers->len > 0 && !subs->closed)
    {
      p = g_new (Pending, 1);
      p->line = g_strndup (record->line, record->len);
      p->len = record->len;
      p->last_id = subs->next_id;
      g_queue_push_tail (&subs->pending, p);
      subs->pending_bytes += p->len;
      update_counts (subs);
    }
  g_mutex_unlock (&subs->lock);
}

static gboolean
subs_flush (FbLogOutput *output)
{
  FbLogSubscribers *subs = container_of (output, FbLogSubscribers, output);

  /* thread-safe, and wakes the loop */
  if (g_atomic_int_get (&subs->waiting) > 0 && subs->source != NULL)
    g_source_set_ready_time (subs->source, 0);
  return TRUE;
}

/* Is subscriber ID still there?  Its entry then, copied.  lock held. */
static gboolean
find_locked (FbLogSubscribers *subs, guint id, Subscriber *ret)
{
  for (guint i = 0; i < subs->subscribers->len; i++)
    if (g_array_index (subs->subscribers, Subscriber, i).id == id)
      {
        *ret = g_array_index (subs->subscribers, Subscriber, i);
        return TRUE;
      }
  return FALSE;
}

void
fb_log_subscribers_deliver (FbLogSubscribers *subs)
{
  if (subs->delivering)
    return; /* the outer call goes on with what was added */
  subs->delivering = TRUE;
  for (;;)
    {
      Pending *p;
      g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint));

      g_mutex_lock (&subs->lock);
      p = g_queue_pop_head (&subs->pending);
      if (p != NULL)
        {
          subs->pending_bytes -= p->len;
          update_counts (subs);
          g_cond_broadcast (&subs->room);
          for (guint i = 0; i < subs->subscribers->len; i++)
            {
              guint id = g_array_index (subs->subscribers, Subscriber, i).id;
              if (id <= p->last_id)
                g_array_append_val (ids, id);
            }
        }
      g_mutex_unlock (&subs->lock);
      if (p == NULL)
        break;
      /* A callback may unsubscribe anyone (itself too): each is looked up
       * again before it is called. */
      for (guint i = 0; i < ids->len; i++)
        {
          Subscriber s;
          gboolean there;

          g_mutex_lock (&subs->lock);
          there = find_locked (subs, g_array_index (ids, guint, i), &s);
          g_mutex_unlock (&subs->lock);
          if (there)
            s.func (p->line, s.user_data);
        }
      pending_free (p);
    }
  subs->delivering = FALSE;
}

void
fb_log_subscribers_wait_room (FbLogSubscribers *subs)
{
  if (!g_atomic_int_get (&subs->over))
    return;
  g_mutex_lock (&subs->lock);
  while ((subs->pending.length > FB_LOG_SUBSCRIBERS_MAX_LINES || subs->pending_bytes > FB_LOG_SUBSCRIBERS_MAX_BYTES) &&
         !subs->closed)
    g_cond_wait (&subs->room, &subs->lock);
  g_mutex_unlock (&subs->lock);
}

static gboolean
deliver_dispatch (GSource *source, GSourceFunc callback, gpointer user_data)
{
  g_source_set_ready_time (source, -1);
  fb_log_subscribers_deliver (((DeliverSource *)source)->subs);
  return G_SOURCE_CONTINUE;
}

static GSourceFuncs deliver_funcs = {
  .dispatch = deliver_dispatch,
};

/* Nothing more is written; pushers waiting for room go on.  The core
 * delivered what was pending (on the loop's thread) before. */
static gboolean
subs_close (FbLogOutput *output, GError **error)
{
  FbLogSubscribers *subs = container_of (output, FbLogSubscribers, output);

  g_mutex_lock (&subs->lock);
  subs->closed = TRUE;
  g_cond_broadcast (&subs->room);
  g_mutex_unlock (&subs->lock);
  fb_source_clear (&subs->source);
  return TRUE;
}

static void
subs_free (FbLogOutput *output)
{
  FbLogSubscribers *subs = container_of (output, FbLogSubscribers, output);

  subs_close (output, NULL);
  for (guint i = 0; i < subs->subscribers->len; i++)
    {
      Subscriber *s = &g_array_index (subs->subscribers, Subscriber, i);
      if (s->destroy != NULL)
        s->destroy (s->user_data);
    }
  g_array_unref (subs->subscribers);
  g_queue_clear_full (&subs->pending, (GDestroyNotify)pending_free);
  g_mutex_clear (&subs->lock);
  g_cond_clear (&subs->room);
  g_free (subs);
}

static const FbLogOutputOps subs_ops = {
  .write = subs_write,
  .flush = subs_flush,
  .close = subs_close,
  .free = subs_free,
};

FbLogSubscribers *
fb_log_subscribers_new (GMainContext *context)
{
  FbLogSubscribers *subs = g_new0 (FbLogSubscribers, 1);

  subs->output.ops = &subs_ops;
  g_mutex_init (&subs->lock);
  g_cond_init (&subs->room);
  g_queue_init (&subs->pending);
  subs->subscribers = g_array_new (FALSE, FALSE, sizeof (Subscriber));
  subs->source = g_source_new (&deliver_funcs, sizeof (DeliverSource));
  ((DeliverSource *)subs->source)->subs = subs;
  g_source_set_name (subs->source, "fusebox access log subscribers");
  g_source_attach (subs->source, context);
  return subs;
}

FbLogOutput *
fb_log_subscribers_output (FbLogSubscribers *subs)
{
  return &subs->output;
}

guint
fb_log_subscribers_add (FbLogSubscribers *subs, FbAccessLogFunc func, gpointer user_data, GDestroyNotify destroy)
{
  Subscriber s = { 0, func, user_data, destroy };

  g_mutex_lock (&subs->lock);
  s.id = ++subs->next_id;
  g_array_append_val (subs->subscribers, s);
  update_counts (subs);
  g_mutex_unlock (&subs->lock);
  return s.id;
}

void
fb_log_subscribers_remove (FbLogSubscribers *subs, guint id)
{
  Subscriber found = { 0 };

  g_mutex_lock (&subs->lock);
  for (guint i = 0; i < subs->subscribers->len; i++)
    if (g_array_index (subs->subscribers, Subscriber, i).id == id)
      {
        found = g_array_index (subs->subscribers, Subscriber, i);
        g_array_remove_index (subs->subscribers, i);
        break;
      }
  /* The lines no one is left to read */
  if (subs->subscribers->len == 0)
    {
      g_queue_clear_full (&subs->pending, (GDestroyNotify)pending_free);
      subs->pending_bytes = 0;
      g_cond_broadcast (&subs->room);
    }
  update_counts (subs);
  g_mutex_unlock (&subs->lock);
  /* Outside the lock: a destroy notify may do anything. */
  if (found.destroy != NULL)
    found.destroy (found.user_data);
}
