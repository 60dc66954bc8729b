/* fusebox — fusebox's own state, out of every view by host identity.
 *
 * Run directories and access logs are the audit trail: no sandbox may read
 * what other sandboxes did, nor rewrite what it did itself.  Hide rules
 * match view paths, and a host object has as many view paths as there are
 * ways to it: a `source` showing one of its ancestors, a bind mount, a
 * --run-dir under the workspace, a log given with --log.  So the caller
 * names the objects (FbViewOptions.hidden_paths), the view records their
 * st_dev/st_ino once at start, and decides by identity:
 *  - a name in a directory that holds one of them (the directory's own
 *    st_dev/st_ino, recorded with them) is looked up on the host first
 *    (one fstatat, only in those directories) and, when it is one of them,
 *    decided "hide" with the view's own rule (VIEW_REFUSAL_OWN_STATE):
 *    every operation then treats it as a hidden name (ENOENT, EACCES to
 *    create, never listed), and the log says fusebox hid it;
 *  - any host object the view is about to make a node of is checked too,
 *    so that an alias the first check can't know of (a bind mount of one
 *    elsewhere, a directory the host moved since) is not found either;
 *  - a file among them (an access log: its rotation makes new files, new
 *    inodes no identity recorded at start could cover) is hidden by name
 *    as well, in its directory: its name, and every name its rotation
 *    gives (STEM.FIRST-LAST.jsonl, STEM.FIRST-LAST.N.jsonl, STEM its
 *    name less ".jsonl", as ipc/ipc-logread.c's fb_log_rotated_name);
 *  - every directory above one of them, up to /, is recorded too, and no
 *    rename moves one (fs-view-name.c): the objects are hidden, not the way
 *    to them, and a process whose policy writes, say, $XDG_STATE_HOME's
 *    parent moved it away for a link of its own, after which every later
 *    run of the user kept its state where that process saw it.
 * The sets are built before the view is used and never change: no lock. */
#include "fs/fs-private.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct
{
  dev_t dev;
  ino_t ino;
} HostId;

static int
host_id_cmp (const void *a, const void *b)
{
  const HostId *x = a, *y = b;

  if (x->dev != y->dev)
    return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino)
    return x->ino < y->ino ? -1 : 1;
  return 0;
}

typedef struct
{
  HostId dir;
  char *live; /* the file's name */
  char *stem; /* that name less ".jsonl" */
} StateLog;

static void
state_log_clear (gpointer p)
{
  g_free (((StateLog *)p)->live);
  g_free (((StateLog *)p)->stem);
}

/* NAME is LOG's live file or one of its rotated files. */
static bool
is_log_name (const StateLog *log, const char *name)
{
  gsize n = strlen (log->stem);
  const char *p;

  if (strcmp (name, log->live) == 0)
    return true;
  if (strncmp (name, log->stem, n) != 0 || name[n] != '.')
    return false;
  p = name + n + 1;
  /* FIRST-LAST, then .N maybe, then .jsonl */
  for (int part = 0; part < 3; part++)
    {
      if (!g_ascii_isdigit (*p))
        return false;
      while (g_ascii_isdigit (*p))
        p++;
      if (part == 0 && *p++ != '-')
        return false;
      if (part >= 1 && strcmp (p, ".jsonl") == 0)
        return true;
      if (part >= 1 && *p++ != '.')
        return false;
    }
  return false;
}

static void
add_id (GArray *set, const struct stat *st)
{
  HostId id = { st->st_dev, st->st_ino };

  g_array_append_val (set, id);
}

static bool
set_has (const GArray *set, dev_t dev, ino_t ino)
{
  HostId key = { dev, ino };

  return set != NULL && set->len > 0 && bsearch (&key, set->data, set->len, sizeof (HostId), host_id_cmp) != NULL;
}

/* Push PATH's names on TODO, the first last (TODO is a stack). */
static void
push_names (GPtrArray *todo, const char *path)
{
  g_auto (GStrv) names = g_strsplit (path, "/", -1);

  for (guint n = g_strv_length (names); n > 0; n--)
    if (names[n - 1][0] != '\0' && strcmp (names[n - 1], ".") != 0)
      g_ptr_array_add (todo, g_strdup (names[n - 1]));
}

/* Record in WAYS every object the kernel passes to reach PATH (absolute):
 * each directory from /, and each link, whose target is then walked the
 * same way, as path resolution does (at most 40 links, as the kernel).  So
 * no link or directory on it, as written or as any link leads, is left
 * out: a link between two others (~/.local/state -> a link -> a
 * directory), or one left by "..", could otherwise be swapped. */
static void
record_way (GArray *ways, const char *path)
{
  g_autoptr (GPtrArray) todo = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GString) at = g_string_new ("/");
  guint links = 0;
  struct stat st;

  if (stat ("/", &st) == 0)
    add_id (ways, &st);
  push_names (todo, path);
  for (guint steps = 0; todo->len > 0 && steps < 4096; steps++)
    {
      g_autofree char *name = g_ptr_array_steal_index (todo, todo->len - 1);
      gsize len = at->len;

      if (strcmp (name, "..") == 0)
        {
          /* AT is resolved (no link on it): its parent is the text's */
          char *slash = strrchr (at->str, '/');
          g_string_truncate (at, slash != NULL && slash != at->str ? (gsize)(slash - at->str) : 1);
          continue;
        }
      if (at->len > 1)
        g_string_append_c (at, '/');
      g_string_append (at, name);
      if (fb_lstat_cached (AT_FDCWD, at->str, &st) < 0)
        return;
      add_id (ways, &st);
      if (S_ISLNK (st.st_mode))
        {
          g_autofree char *target = g_file_read_link (at->str, NULL);

          if (target == NULL || ++links > 40)
            return;
          g_string_truncate (at, len);
          if (target[0] == '/')
            g_string_assign (at, "/");
          push_names (todo, target);
        }
    }
}

void
view_state_init (FbView *view)
{
  const char *const *paths = view->options.hidden_paths;

  g_autofree char *last_parent = NULL;
  view->options.hidden_paths = NULL; /* not kept: the caller's strings */
  for (guint i = 0; paths != NULL && paths[i] != NULL; i++)
    {
      g_autofree char *parent = NULL;
      struct stat st, pst;

      /* the object itself, not what a symlink there points to; a path that
       * does not exist (yet) hides nothing */
      if (paths[i][0] != '/' || fb_lstat_cached (AT_FDCWD, paths[i], &st) < 0)
        continue;
      if (view->state_ids == NULL)
        {
          view->state_ids = g_array_new (FALSE, FALSE, sizeof (HostId));
          view->state_parents = g_array_new (FALSE, FALSE, sizeof (HostId));
        }
      add_id (view->state_ids, &st);
      /* everything the kernel passes on the way to it (once for a run of
       * them in one directory: the runs beside a --run-dir) */
      parent = g_path_get_dirname (paths[i]);
      if (g_strcmp0 (parent, last_parent) != 0)
        {
          if (view->state_ways == NULL)
            view->state_ways = g_array_new (FALSE, FALSE, sizeof (HostId));
          record_way (view->state_ways, parent);
          g_free (last_parent);
          last_parent = g_strdup (parent);
        }
      if (stat (parent, &pst) == 0 && S_ISDIR (pst.st_mode))
        {
          g_autofree char *base = g_path_get_basename (paths[i]);

          add_id (view->state_parents, &pst);
          if (S_ISREG (st.st_mode))
            {
              StateLog log = { { pst.st_dev, pst.st_ino },
                               g_strdup (base),
                               g_str_has_suffix (base, ".jsonl") ? g_strndup (base, strlen (base) - strlen (".jsonl"))
                                                                 : g_strdup (base) };

              if (view->state_logs == NULL)
                {
                  view->state_logs = g_array_new (FALSE, FALSE, sizeof (StateLog));
                  g_array_set_clear_func (view->state_logs, state_log_clear);
                }
              g_array_append_val (view->state_logs, log);
            }
        }
    }
  if (view->state_ids != NULL)
    {
      g_array_sort (view->state_ids, host_id_cmp);
      g_array_sort (view->state_parents, host_id_cmp);
      if (view->state_ways != NULL)
        g_array_sort (view->state_ways, host_id_cmp);
    }
}

void
view_state_clear (FbView *view)
{
  g_clear_pointer (&view->state_ids, g_array_unref);
  g_clear_pointer (&view->state_parents, g_array_unref);
  g_clear_pointer (&view->state_ways, g_array_unref);
  g_clear_pointer (&view->state_logs, g_array_unref);
}

bool
view_state_on_the_way (FbView *view, const struct stat *st)
{
  return set_has (view->state_ways, st->st_dev, st->st_ino);
}

/* NAME in the directory (DEV, INO) is one of the logs' files */
static bool
state_log_named (FbView *view, dev_t dev, ino_t ino, const char *name)
{
  for (guint i = 0; view->state_logs != NULL && i < view->state_logs->len; i++)
    {
      const StateLog *log = &g_array_index (view->state_logs, StateLog, i);

      if (log->dir.dev == dev && log->dir.ino == ino && is_log_name (log, name))
        return true;
    }
  return false;
}

/* A regular file's name that fusebox gives a run's files (access.jsonl
 * and its rotations, a --log's *.jsonl, run.json, policy.json and their
 * .tmp, mount.log): only those, and files with another name (a hard link
 * to one), are looked at for the mark. */
static bool
state_file_name (const char *name)
{
  static const char *const names[] = { "run.json", "policy.json", "run.json.tmp", "policy.json.tmp", "mount.log" };

  if (g_str_has_suffix (name, ".jsonl"))
    return true;
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    if (strcmp (name, names[i]) == 0)
      return true;
  return false;
}

bool
view_state_marked (FbViewNode *parent, const char *name, int fd, const struct stat *st)
{
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  _fb_cleanup_fd_ int obj = -1;
  struct stat id;
  int pfd;

  /* a run directory, its private/ and the private sources are 0700 */
  if (S_ISDIR (st->st_mode) && fd >= 0)
    return (st->st_mode & 077) == 0 && fb_state_marked (fd, NULL);
  if (S_ISDIR (st->st_mode) ? (st->st_mode & 077) != 0
                            : !S_ISREG (st->st_mode) || (st->st_nlink < 2 && !state_file_name (name)))
    return false;
  if (parent == NULL || !node_is_host_dir (parent))
    return false;
  pfd = node_fd_get (parent, &hold);
  if (pfd < 0)
    return false;
  /* read from the object ST is (its filesystem's kind is known), not by
   * name: a mount put over the name since would be asked; another object
   * there since is taken for marked, not found */
  obj = host_open_child (pfd, name);
  if (obj < 0)
    return obj != -ENOENT;
  return host_identity_fd (obj, &id) < 0 || id.st_dev != st->st_dev || id.st_ino != st->st_ino ||
         fb_state_marked (obj, NULL);
}

bool
view_state_dir_marked (FbViewNode *dir, const NodeState *st)
{
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  struct stat dst;
  int fd;

  /* a mount's source is fusebox's (a run's own private /tmp is marked) */
  if (st->decision.is_mount_point || !node_is_host_dir (dir))
    return false;
  fd = node_fd_get (dir, &hold);
  /* a marked directory stays 0700: no view changes its mode */
  return fd >= 0 && fstat (fd, &dst) == 0 && S_ISDIR (dst.st_mode) && (dst.st_mode & 077) == 0 &&
         fb_state_marked (fd, NULL);
}

bool
view_state_hides (FbView *view, const struct stat *st)
{
  return set_has (view->state_ids, st->st_dev, st->st_ino);
}

void
view_state_decide (FbView *view, FbViewNode *parent, const NodeState *pst, const char *name, FbPolicyDecision *decision)
{
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  struct stat st;
  int fd;

  /* hidden already (the policy's own rule for fusebox's run directories
   * says so in the log): no host lookup */
  if (view->state_ids == NULL || decision_is_hidden (decision) || !node_is_host_dir (parent) ||
      !set_has (view->state_parents, parent->dev, parent->ino))
    return;
  /* A mount point shows its source, not what the host has at the name. */
  if (decision->is_mount_point || name_in (pst->decision.mounted_children, name))
    return;
  if (!state_log_named (view, parent->dev, parent->ino, name))
    {
      fd = node_fd_get (parent, &hold);
      if (fd < 0 || host_statat (parent, fd, name, &st) < 0 || !view_state_hides (view, &st))
        return;
    }
  decision->access = FB_POLICY_ACCESS_HIDE;
  decision->traversable = false;
  decision->rule = view_refusal_rule (VIEW_REFUSAL_OWN_STATE);
}
