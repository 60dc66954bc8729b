/* fusebox — a mount's source that left its host path.
 *
 * Design:
 *  - A mount's source (a rule's `source`, and the host directory of a rule
 *    below a mount that maps elsewhere: a workspace under a private HOME)
 *    is opened once, at start (fb_view_new), and its descriptor follows the
 *    directory wherever the host moves it or a directory above it, as a
 *    bind mount does.  The operator chose that directory by its host path,
 *    and where it went the policy may decide otherwise (`mv ~/proj
 *    ~/secret/`, then files made there).  So once the path no longer leads
 *    to it, the mount is refused for the view's life: its mount point's
 *    node is marked moved, and every path through it is decided as the
 *    view's refusal VIEW_REFUSAL_MOVED, as a moved directory's
 *    (fs-view-node.c "Moved directories"), under its view path.
 *  - The way: at start, the path the kernel gives the opened source
 *    (/proc/self/fd: no link on it) is walked again from /, a component at
 *    a time without following links, and each step is kept: its name and
 *    its identity; the last step must be the source.  A check walks it
 *    again the same way and compares (an O_PATH open per step, its
 *    identity from what the kernel holds): a step renamed, removed,
 *    exchanged, or covered or moved by a mount fails it.  No descriptor is
 *    kept: a view costs a few bytes per step, however many views a server
 *    keeps.
 *  - When: every walk of the remote API that crosses the mount point
 *    (fb_view_walk: a statx per step), and for a FUSE session from its
 *    notifier thread (fs-fuse-inval.c) when a name changes in a step's
 *    directory (the host watcher marks the steps for the view's life;
 *    another view's renames, and this view's, are reported alike), when the
 *    host's mount table changes (a mount moved or taken off makes no name
 *    event), when host events were lost, and once a second where a step is
 *    not marked (a network filesystem, the watcher's budget, or no watcher
 *    at all: FUSEBOX_NO_FANOTIFY, --cache-timeout).
 *  - Private sources are not checked: they are made in the run directory,
 *    fusebox's own state, which no view shows or moves.
 *  - Bounded: at most VIEW_SOURCE_STEPS_MAX steps in all (a policy with
 *    more sources, or deeper ones, is refused at start, saying so).
 */
#include "fs/fs-private.h"

#include <string.h>

#define VIEW_SOURCE_STEPS_MAX 4096

typedef struct
{
  dev_t dev;
  ino_t ino;
  char *name;  /* in the step above ("/" for the first) */
  bool marked; /* watch_dir_add placed or counted its mark */
} SourceStep;

struct SourceWay
{
  guint mount; /* its id */
  gint moved;  /* atomic: the path no longer leads to the source */
  guint n;     /* steps: "/" first, the source last */
  SourceStep *steps;
};

/* Walk W's first LIMIT steps from /, a name at a time (no link followed):
 * true when each still shows the object it showed at start.  FUNC (when
 * not NULL) is given each step and its descriptor (O_PATH, closed after
 * it), or -1 for a step that no longer shows its object; STOP: at the
 * first such step. */
static bool
way_walk (SourceWay *w, guint limit, void (*func) (SourceStep *s, int fd), bool stop)
{
  _fb_cleanup_fd_ int fd = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  bool holds = true;

  for (guint k = 0; k < limit; k++)
    {
      struct stat st;

      if (k > 0 && fd >= 0)
        {
          int next = openat (fd, w->steps[k].name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          close (fd);
          fd = next;
        }
      /* any failure counts: the path no longer leads there for sure */
      if (fd < 0 || host_identity_fd (fd, &st) < 0 || st.st_dev != w->steps[k].dev || st.st_ino != w->steps[k].ino)
        {
          holds = false;
          if (stop)
            return false;
          if (func != NULL)
            func (&w->steps[k], -1);
          continue;
        }
      if (func != NULL)
        func (&w->steps[k], fd);
    }
  return holds;
}

static void
way_clear (SourceWay *w)
{
  for (guint k = 0; k < w->n; k++)
    g_free (w->steps[k].name);
  g_free (w->steps);
}

/* The way to the source SOURCE_FD (mount ID): 0, or -errno; -ESTALE when
 * the path the kernel gives it leads elsewhere (moved while starting, or
 * reachable by no path from here). */
static int
way_record (SourceWay *w, guint id, int source_fd, guint *budget)
{
  g_auto (GStrv) parts = NULL;
  g_autofree char *path = NULL;
  struct stat want, st;
  char proc[32];
  int r;

  w->mount = id;
  proc_fd_path (proc, source_fd);
  path = g_file_read_link (proc, NULL);
  if (path == NULL || path[0] != '/')
    return -ESTALE;
  if ((r = host_identity_fd (source_fd, &want)) < 0)
    return r;
  parts = g_strsplit (path, "/", -1);
  w->steps = g_new0 (SourceStep, g_strv_length (parts) + 1);
  {
    _fb_cleanup_fd_ int fd = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0)
      return -errno;
    for (guint i = 0;; i++)
      {
        SourceStep *s = &w->steps[w->n];

        if (*budget == 0)
          return -E2BIG;
        (*budget)--;
        s->name = g_strdup (w->n == 0 ? "/" : parts[i]);
        w->n++;
        if ((r = host_identity_fd (fd, &st)) < 0)
          return r;
        s->dev = st.st_dev;
        s->ino = st.st_ino;
        while (parts[i + 1] != NULL && parts[i + 1][0] == '\0')
          i++;
        if (parts[i + 1] == NULL)
          break;
        {
          int next = openat (fd, parts[i + 1], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          close (fd);
          fd = next;
        }
        if (fd < 0)
          return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? -ESTALE : -errno;
      }
  }
  if (st.st_dev != want.st_dev || st.st_ino != want.st_ino)
    return -ESTALE;
  return 0;
}

int
view_sources_init (FbView *view)
{
  const FbPolicyMount *mounts;
  guint n, budget = VIEW_SOURCE_STEPS_MAX;
  GArray *ways = g_array_new (FALSE, TRUE, sizeof (SourceWay));

  mounts = fb_policy_get_mounts (view->policy, &n);
  /* the root too, when its rule gives it a source (a way of one step, "/",
   * is none) */
  for (guint i = 0; i < n && i < view->n_mounts; i++)
    {
      SourceWay w = { 0 };
      int r;

      if (mounts[i].is_private || view->mount_fds[i] < 0)
        continue;
      r = way_record (&w, i, view->mount_fds[i], &budget);
      if (r == 0 && w.n > 1)
        {
          g_array_append_val (ways, w);
          continue;
        }
      way_clear (&w);
      if (r < 0)
        {
          g_warning ("the source %s of %s: %s", mounts[i].host_path, mounts[i].view_path,
                     r == -ESTALE  ? "its path no longer leads to it (moved while the view started)"
                     : r == -E2BIG ? "more than 4,096 directories on the ways to the policy's sources, in all"
                                   : g_strerror (-r));
          for (guint j = 0; j < ways->len; j++)
            way_clear (&g_array_index (ways, SourceWay, j));
          g_array_unref (ways);
          return r;
        }
    }
  view->n_source_ways = ways->len;
  view->source_ways = (SourceWay *)(void *)g_array_free (ways, FALSE);
  return 0;
}

static bool marks_all;

static void
step_mark (SourceStep *s, int fd)
{
  s->marked = fd >= 0 && watch_dir_add (s->dev, s->ino, fd);
  marks_all = marks_all && s->marked;
}

static void
step_unmark (SourceStep *s, int fd)
{
  if (s->marked)
    watch_dir_remove (s->dev, s->ino, fd); /* -1: moved; its mark goes with it, or at the end */
  s->marked = false;
}

void
view_sources_clear (FbView *view)
{
  for (guint i = 0; i < view->n_source_ways; i++)
    {
      SourceWay *w = &view->source_ways[i];

      if (g_atomic_int_get (&view->sources_watched))
        (void)way_walk (w, w->n - 1, step_unmark, false);
      way_clear (w);
    }
  g_clear_pointer (&view->source_ways, g_free);
  view->n_source_ways = 0;
}

bool
view_sources_watch (FbView *view)
{
  static GMutex lock; /* marks_all */
  bool all = true;

  if (!g_atomic_int_compare_and_exchange (&view->sources_watched, 0, 1))
    return !g_atomic_int_get (&view->sources_unmarked);
  g_mutex_lock (&lock);
  for (guint i = 0; i < view->n_source_ways; i++)
    {
      SourceWay *w = &view->source_ways[i];

      /* a name changes in the step above: the steps but the source */
      marks_all = true;
      (void)way_walk (w, w->n - 1, step_mark, false);
      all = all && marks_all;
    }
  g_mutex_unlock (&lock);
  if (!all)
    g_atomic_int_set (&view->sources_unmarked, 1);
  return all;
}

bool
view_sources_on_the_way (FbView *view, dev_t dev, ino_t ino)
{
  for (guint i = 0; i < view->n_source_ways; i++)
    {
      const SourceWay *w = &view->source_ways[i];

      for (guint k = 0; k + 1 < w->n; k++)
        if (w->steps[k].ino == ino && w->steps[k].dev == dev && !g_atomic_int_get (&w->moved))
          return true;
    }
  return false;
}

static bool
way_holds (SourceWay *w)
{
  return way_walk (w, w->n, NULL, true);
}

/* Check W; when it no longer holds, mark its mount's nodes (into
 * RET_NODES, referenced, when not NULL). */
static bool
way_check (FbView *view, SourceWay *w, GPtrArray *ret_nodes)
{
  if (g_atomic_int_get (&w->moved) || way_holds (w))
    return false;
  if (!g_atomic_int_compare_and_exchange (&w->moved, 0, 1))
    return false;
  view_mount_mark_moved (view, w->mount, ret_nodes);
  return true;
}

guint
view_sources_check (FbView *view, GPtrArray *ret_nodes)
{
  guint moved = 0;

  for (guint i = 0; i < view->n_source_ways; i++)
    moved += way_check (view, &view->source_ways[i], ret_nodes) ? 1 : 0;
  return moved;
}

void
view_source_check_mount (FbView *view, guint mount)
{
  for (guint i = 0; i < view->n_source_ways; i++)
    if (view->source_ways[i].mount == mount)
      (void)way_check (view, &view->source_ways[i], NULL);
}

bool
view_source_moved (FbView *view, guint mount)
{
  for (guint i = 0; i < view->n_source_ways; i++)
    if (view->source_ways[i].mount == mount)
      return g_atomic_int_get (&view->source_ways[i].moved) != 0;
  return false;
}

bool
view_sources_polled (FbView *view)
{
  return view->n_source_ways > 0 &&
         (!g_atomic_int_get (&view->sources_watched) || g_atomic_int_get (&view->sources_unmarked));
}

char *
fb_view_new_explain (int r, const char *private_dir)
{
  G_STATIC_ASSERT (VIEW_SOURCE_STEPS_MAX == 4096); /* as the text says */

  if (r == -ESTALE)
    return g_strdup ("a rule's source is no longer where its path led a moment before (it moved while the view was "
                     "made: fusebox's warning names it); try again once it stays in place");
  if (r == -E2BIG)
    return g_strdup ("the ways to the policy's sources pass more than 4,096 directories in all; give fewer rules a "
                     "source, or sources with shorter paths");
  if (private_dir != NULL)
    return g_strdup_printf ("%s: a private source under %s, or a rule's source directory, could not be created "
                            "or opened",
                            g_strerror (-r), private_dir);
  return g_strdup_printf ("%s: a private source, or a rule's source directory, could not be created or opened",
                          g_strerror (-r));
}
