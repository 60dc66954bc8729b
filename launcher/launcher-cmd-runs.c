/* fusebox runs — list and prune run directories.
 *
 *   fusebox runs [--prune] [--json]
 *
 * Reads each run directory's run.json (written by `fusebox run`, `mount`
 * and `serve`: ipc/ipc.h, "one run", documents its fields): a run is over
 * when "ended" is set or its supervisor (pid + start time, so a reused pid
 * does not count) is gone; without a readable run.json its state is
 * unknown and --prune leaves it alone.  A run.json without "kind" was
 * written by `run`.  Single-threaded; removing never follows a
 * symlink, holds a bounded number of descriptors whatever the depth, and
 * removes run.json last (see "removing a tree").
 */
#include "ipc/ipc.h"
#include "launcher/launcher-private.h"
#include "policy/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

typedef struct
{
  char *id;
  char *dir;
  JsonObject *info; /* NULL without a readable run.json */
  const char *kind; /* "run", "mount", "serve" (in INFO), or NULL: unknown */
  bool over;
} RunEntry;

static void
run_entry_free (RunEntry *e)
{
  g_free (e->id);
  g_free (e->dir);
  if (e->info)
    json_object_unref (e->info);
  g_free (e);
}

static bool
supervisor_alive (JsonObject *info)
{
  JsonObject *sup = json_object_get_object_member (info, "supervisor");
  if (!sup)
    return false;
  pid_t pid = (pid_t)json_object_get_int_member_with_default (sup, "pid", 0);
  guint64 start = (guint64)json_object_get_int_member_with_default (sup, "start_time", 0);
  return pid > 0 && start != 0 && fb_run_process_start_time (pid) == start;
}

/* run.json is written by `fusebox run`, `mount` and `serve` (a few KiB:
 * the command, times, counts); anything larger is not one of ours. */
#define RUN_JSON_MAX (16 * 1024 * 1024)

/* DIR's run.json, or NULL: missing (a run that failed before writing it)
 * silently, anything else with a warning, never a hang (a FIFO in its
 * place), a crash (nesting json-glib would recurse through) or an
 * unbounded read. */
JsonObject *
fb_cmd_read_run_json (const char *dir, const char *command)
{
  /* what the caller makes of a run.json it can't take */
  const char *consequence =
    strcmp (command, "report") == 0 ? "the log is not checked against it" : "the run shows as unknown";
  g_autofree char *path = g_build_filename (dir, "run.json", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autofree char *text = NULL;
  gsize len = 0;
  JsonNode *root;
  const char *why = NULL;
  gboolean too_deep;

  text = fb_ipc_read_regular (path, "run.json", RUN_JSON_MAX, &len, &error);
  if (text == NULL)
    {
      if (!g_error_matches (error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND))
        fb_cmd_error ("%s: warning: %s; %s", command, error->message, consequence);
      return NULL;
    }
  if (memchr (text, '\0', len) != NULL)
    why = "holds a NUL byte";
  else if (!fb_json_is_plain (text, len, FB_JSON_READ_DEPTH_MAX, &too_deep))
    why = too_deep ? "nests deeper than fusebox reads" : "is not JSON";
  else if (!json_parser_load_from_data (parser, text, (gssize)len, NULL))
    why = "is not JSON";
  else if ((root = json_parser_get_root (parser)) == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    why = "is not a JSON object";
  if (why != NULL)
    {
      fb_cmd_error ("%s: warning: %s %s; %s", command, path, why, consequence);
      return NULL;
    }
  return json_object_ref (json_node_get_object (root));
}

/* The runs in ROOT, as ROOT_FD (O_PATH) holds it: listed and looked at
 * there, never by ROOT's path (a link put on its way meanwhile is not
 * followed). */
static GPtrArray *
list_runs (int root_fd, const char *root)
{
  GPtrArray *runs = g_ptr_array_new_with_free_func ((GDestroyNotify)run_entry_free);
  int fd = root_fd >= 0 ? fb_reopen_path (root_fd, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  DIR *d = fd >= 0 ? fdopendir (fd) : NULL;
  struct dirent *de;

  if (d == NULL)
    {
      if (fd >= 0)
        close (fd);
      return runs;
    }
  while ((de = readdir (d)) != NULL)
    {
      const char *name = de->d_name;
      struct stat st;

      if (strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
        continue;
      if (fb_lstat_cached (root_fd, name, &st) < 0 || !S_ISDIR (st.st_mode))
        continue;
      RunEntry *e = g_new0 (RunEntry, 1);
      e->id = g_strdup (name);
      e->dir = g_build_filename (root, name, NULL);
      e->info = fb_cmd_read_run_json (e->dir, "runs");
      if (e->info)
        {
          e->over = json_object_has_member (e->info, "ended") || !supervisor_alive (e->info);
          e->kind = fb_json_member_string (e->info, "kind");
          if (e->kind == NULL)
            e->kind = fb_run_kind_to_string (FB_RUN_KIND_RUN);
        }
      g_ptr_array_add (runs, e);
    }
  closedir (d);
  return runs;
}

/* Blanks up to WIDTH columns, then the column separator. */
static void
pad_to (GString *line, gsize cols, gsize width)
{
  for (; cols < width; cols++)
    g_string_append_c (line, ' ');
  g_string_append_c (line, ' ');
}

static gint
compare_entries (gconstpointer a, gconstpointer b)
{
  const RunEntry *const *x = a, *const *y = b;
  return strcmp ((*x)->id, (*y)->id);
}

/* ---- removing a tree ----
 *
 * A run's private directories hold whatever its sandbox made: trees of any
 * depth (a 1,500-deep chain is a loop of mkdir and chdir), read-only and
 * mode-000 directories, symlinks to anywhere.  The walk below never
 * follows a symlink (O_NOFOLLOW; unlinkat removes a link itself), makes a
 * directory the sandbox made read-only writable before emptying it, and
 * holds at most two descriptors of its own whatever the depth: the
 * directory it empties and, while it climbs back, that directory's parent.
 * Only the names and identities (st_dev, st_ino) of the directories above
 * are kept, in memory.  Climbing opens ".." and checks it is the directory
 * it descended from; should someone have moved a directory meanwhile, the
 * walk stops there with ESTALE instead of removing anything outside the
 * tree (a later prune starts again from the top).  Another mount inside the
 * tree is not entered (EXDEV).  An entry that can't be removed is
 * remembered in its directory's level and skipped when the directory is
 * read again, so every pass removes something or gives up: the walk ends.
 * After a subdirectory is removed its parent is read again from the start:
 * what was removed is gone, so that costs little. */

typedef struct
{
  char *name; /* in the parent level's directory */
  dev_t dev;
  ino_t ino;
  guint64 mnt_id;     /* 0: unknown (statx without STATX_MNT_ID) */
  GHashTable *failed; /* names in this directory that could not be removed */
} TreeLevel;

static void
tree_level_clear (TreeLevel *l)
{
  g_free (l->name);
  if (l->failed)
    g_hash_table_unref (l->failed);
}

/* Open the directory PARENT_FD/NAME for reading, never through a symlink,
 * made 0700 first if the sandbox left it unreadable.  -errno on failure. */
static int
open_dir_nofollow (int parent_fd, const char *name, TreeLevel *ret_level)
{
  _fb_cleanup_fd_ int fd = openat (parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct statx stx;

  if (fd < 0 && errno == EACCES)
    {
      /* A mode-000 directory of another owner's making, for a caller that
       * is not root: chmod it through an O_PATH descriptor (no symlink
       * followed), then open it. */
      _fb_cleanup_fd_ int path_fd = openat (parent_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (path_fd >= 0)
        {
          char proc[64];
          snprintf (proc, sizeof proc, "/proc/self/fd/%d", path_fd);
          chmod (proc, 0700);
          fd = openat (parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
      else
        errno = EACCES;
    }
  if (fd < 0)
    return -errno;
  if (statx (fd, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID, &stx) < 0)
    return -errno;
  /* a directory the sandbox made read-only (or 000) */
  if ((stx.stx_mode & 0700) != 0700)
    fchmod (fd, (stx.stx_mode & 07777) | 0700);
  ret_level->name = g_strdup (name);
  ret_level->dev = makedev (stx.stx_dev_major, stx.stx_dev_minor);
  ret_level->ino = stx.stx_ino;
  ret_level->mnt_id = (stx.stx_mask & STATX_MNT_ID) ? stx.stx_mnt_id : 0;
  ret_level->failed = NULL;
  return fb_steal_fd (&fd);
}

static void
level_failed (TreeLevel *l, const char *name, int err, int *r)
{
  if (!l->failed)
    l->failed = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_hash_table_add (l->failed, g_strdup (name));
  if (*r == 0)
    *r = err;
}

/* rm -rf of the directory PARENT_FD/NAME (see above).  0 or the first
 * -errno. */
/* Whether PARENT_FD/NAME was born before SINCE (its birth time known). */
static bool
born_before (int parent_fd, const char *name, const struct timespec *since)
{
  struct statx stx;

  if (since == NULL || statx (parent_fd, name, AT_SYMLINK_NOFOLLOW, STATX_BTIME, &stx) < 0 ||
      (stx.stx_mask & STATX_BTIME) == 0)
    return false;
  return stx.stx_btime.tv_sec < since->tv_sec ||
         (stx.stx_btime.tv_sec == since->tv_sec && stx.stx_btime.tv_nsec < (guint32)since->tv_nsec);
}

static int
remove_dir_tree (int parent_fd, const char *name, const struct timespec *since)
{
  g_autoptr (GArray) stack = g_array_new (FALSE, TRUE, sizeof (TreeLevel));
  TreeLevel top = { 0 };
  int r = 0;
  int fd = open_dir_nofollow (parent_fd, name, &top);

  if (fd < 0)
    return fd == -ENOENT ? 0 : fd;
  g_array_set_clear_func (stack, (GDestroyNotify)tree_level_clear);
  g_array_append_val (stack, top);

  for (;;)
    {
      TreeLevel *cur = &g_array_index (stack, TreeLevel, stack->len - 1);
      DIR *d = fdopendir (fd);
      struct dirent *ent;
      int child = -1;

      if (!d)
        {
          int e = -errno;
          close (fd);
          return r ? r : e;
        }
      while (child < 0 && (ent = readdir (d)))
        {
          TreeLevel next = { 0 };

          if (strcmp (ent->d_name, ".") == 0 || strcmp (ent->d_name, "..") == 0)
            continue;
          if (cur->failed && g_hash_table_contains (cur->failed, ent->d_name))
            continue;
          if (born_before (dirfd (d), ent->d_name, since))
            {
              /* moved in: not the run's to remove */
              level_failed (cur, ent->d_name, -EEXIST, &r);
              continue;
            }
          if (unlinkat (dirfd (d), ent->d_name, 0) == 0 || errno == ENOENT)
            continue;
          if (errno != EISDIR)
            {
              level_failed (cur, ent->d_name, -errno, &r);
              continue;
            }
          child = open_dir_nofollow (dirfd (d), ent->d_name, &next);
          if (child >= 0 && next.mnt_id != cur->mnt_id)
            {
              /* another mount: not ours to empty */
              close (child);
              tree_level_clear (&next);
              child = -EXDEV;
            }
          if (child < 0)
            {
              if (child != -ENOENT)
                level_failed (cur, ent->d_name, child, &r);
              child = -1;
              continue;
            }
          g_array_append_val (stack, next);
        }
      if (child >= 0)
        {
          /* down one level: only the child stays open */
          closedir (d);
          fd = child;
          continue;
        }

      /* CUR is as empty as it gets. */
      if (stack->len == 1)
        {
          closedir (d);
          if (unlinkat (parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
            r = -errno;
          return r;
        }
      {
        TreeLevel *up = &g_array_index (stack, TreeLevel, stack->len - 2);
        int parent = openat (dirfd (d), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat st;

        closedir (d);
        if (parent < 0 || fstat (parent, &st) < 0 || st.st_dev != up->dev || st.st_ino != up->ino)
          {
            /* moved under our feet: stop rather than remove elsewhere */
            if (parent >= 0)
              close (parent);
            return r ? r : -ESTALE;
          }
        if (unlinkat (parent, cur->name, AT_REMOVEDIR) < 0 && errno != ENOENT)
          level_failed (up, cur->name, -errno, &r);
        g_array_set_size (stack, stack->len - 1);
        fd = parent; /* read again from the start */
      }
    }
}

/* rm -rf below DIRFD/NAME without following symlinks (see above). */
int
fb_cmd_remove_tree_at (int parent_fd, const char *name)
{
  return fb_cmd_remove_tree_since (parent_fd, name, NULL);
}

int
fb_cmd_remove_tree_since (int parent_fd, const char *name, const struct timespec *since)
{
  if (born_before (parent_fd, name, since))
    return -EEXIST;
  if (unlinkat (parent_fd, name, 0) == 0)
    return 0;
  if (errno != EISDIR)
    return errno == ENOENT ? 0 : -errno;
  return remove_dir_tree (parent_fd, name, since);
}

/* Prune one run directory: everything but run.json first, then run.json,
 * then the directory.  A prune that fails halfway leaves run.json, so the
 * run still shows as over and the next prune tries again (without it the
 * run would show as unknown, which prune never touches). */
static int
prune_run (int root_fd, const char *id)
{
  TreeLevel level = { 0 };
  int fd = open_dir_nofollow (root_fd, id, &level);
  int r = 0;

  tree_level_clear (&level);
  if (fd < 0)
    return fd == -ENOENT ? 0 : fd;
  DIR *d = fdopendir (fd);
  if (!d)
    {
      int e = -errno;
      close (fd);
      return e;
    }
  struct dirent *ent;
  while ((ent = readdir (d)))
    {
      if (strcmp (ent->d_name, ".") == 0 || strcmp (ent->d_name, "..") == 0 || strcmp (ent->d_name, "run.json") == 0)
        continue;
      int rr = fb_cmd_remove_tree_at (dirfd (d), ent->d_name);
      if (rr < 0 && r == 0)
        r = rr;
    }
  if (r == 0 && unlinkat (dirfd (d), "run.json", 0) < 0 && errno != ENOENT)
    r = -errno;
  closedir (d);
  if (r == 0 && unlinkat (root_fd, id, AT_REMOVEDIR) < 0 && errno != ENOENT)
    r = -errno;
  return r;
}

int
fb_cmd_runs (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = NULL;
  gboolean prune = FALSE, json = FALSE;
  GOptionEntry entries[] = {
    { "prune", 0, 0, G_OPTION_ARG_NONE, &prune, "Remove the directories of runs that are over", NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print one JSON object per run", NULL },
    { NULL },
  };
  ctx = fb_cmd_option_context ("- list the run directories",
                               "Lists the runs under $XDG_STATE_HOME/fusebox/runs/ (run, mount and serve) with\n"
                               "their state: running (the supervisor is alive), over, or unknown (no readable\n"
                               "run.json).\n"
                               "--prune removes the directories of runs that are over, logs included.",
                               "Exit status: 0 success, 1 a directory could not be removed, 2 usage error.");
  if (!fb_cmd_parse_options (ctx, entries, "runs", &argc, &argv) || !fb_cmd_options_only ("runs", argc, argv))
    return FB_EXIT_USAGE;

  g_autofree char *root = fb_run_dir_root ();
  g_autoptr (GError) error = NULL;
  /* runs another user could have put there are not listed as ours, nor
   * pruned; nothing on another user's FUSE filesystem is looked at */
  _fb_cleanup_fd_ int runs_fd = fb_path_open_not_foreign_fuse (root, "fusebox's state directory",
                                                               "set XDG_STATE_HOME to a directory of your own", &error);
  if (runs_fd == -1 || (runs_fd >= 0 && !fb_run_state_dir_ok (&error)))
    {
      fb_cmd_error ("runs: %s", error->message);
      return FB_EXIT_FAILURE;
    }
  g_autoptr (GPtrArray) runs = list_runs (runs_fd, root);
  /* run ids start with the date: name order is time order */
  g_ptr_array_sort (runs, compare_entries);
  int status = FB_EXIT_OK;
  _fb_cleanup_fd_ int root_fd =
    prune && runs_fd >= 0 ? fb_reopen_path (runs_fd, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

  for (guint i = 0; i < runs->len; i++)
    {
      RunEntry *e = runs->pdata[i];
      const char *state = !e->info ? "unknown" : e->over ? "over" : "running";
      const char *action = "";
      if (prune && e->info && e->over)
        {
          int r = root_fd < 0 ? -errno : prune_run (root_fd, e->id);
          if (r < 0)
            {
              fb_cmd_error ("runs: removing %s: %s; its run.json stays, so the next 'fusebox runs --prune' "
                            "tries again",
                            e->dir, g_strerror (-r));
              status = FB_EXIT_FAILURE;
            }
          else
            action = "removed";
        }
      if (json)
        {
          g_autoptr (JsonBuilder) b = json_builder_new ();
          json_builder_begin_object (b);
          fb_json_builder_add_string_member (b, "run", e->id);
          fb_json_builder_add_string_member (b, "dir", e->dir);
          fb_json_builder_add_string_member (b, "state", state);
          if (e->kind != NULL)
            fb_json_builder_add_string_member (b, "kind", e->kind);
          if (*action)
            {
              json_builder_set_member_name (b, "pruned");
              json_builder_add_boolean_value (b, TRUE);
            }
          if (e->info)
            {
              json_builder_set_member_name (b, "info");
              g_autoptr (JsonNode) n = json_node_new (JSON_NODE_OBJECT);
              json_node_set_object (n, e->info);
              json_builder_add_value (b, json_node_copy (n));
            }
          json_builder_end_object (b);
          g_autoptr (JsonNode) out = json_builder_get_root (b);
          /* The log's escaping: run.json holds the command as given. */
          g_autofree char *text = fb_json_to_string (out, FALSE);
          printf ("%s\n", text);
          continue;
        }
      /* Everything but the state comes from the directory's name and its
       * run.json (the command as the caller gave it, a failure's message):
       * shown escaped, so that an ESC, an RLO or a newline in them can't
       * drive the terminal or forge a line. */
      GString *line = g_string_new (NULL);
      gsize cols = fb_text_append_safe (line, e->id, strlen (e->id));
      pad_to (line, cols, 24);
      cols = e->kind != NULL ? fb_text_append_safe (line, e->kind, strlen (e->kind)) : 0;
      pad_to (line, cols, 5);
      g_string_append_printf (line, "%-8s ", state);
      if (e->info)
        {
          const char *started = fb_json_member_string (e->info, "started");
          JsonNode *cmd = json_object_get_member (e->info, "command");
          JsonNode *exit_status = json_object_get_member (e->info, "exit_status");
          const char *failure = fb_json_member_string (e->info, "error");

          cols = started ? fb_text_append_safe (line, started, strlen (started)) : 0;
          pad_to (line, cols, 26);
          cols = 0;
          if (exit_status && JSON_NODE_HOLDS_VALUE (exit_status) &&
              json_node_get_value_type (exit_status) == G_TYPE_INT64)
            {
              g_autofree char *t = g_strdup_printf ("exit %" G_GINT64_FORMAT, json_node_get_int (exit_status));
              g_string_append (line, t);
              cols = strlen (t);
            }
          else if (failure)
            {
              g_string_append (line, "error: ");
              cols = strlen ("error: ") + fb_text_append_safe (line, failure, strlen (failure));
            }
          pad_to (line, cols, 12);
          if (cmd && JSON_NODE_HOLDS_ARRAY (cmd))
            {
              JsonArray *a = json_node_get_array (cmd);
              for (guint j = 0; j < json_array_get_length (a); j++)
                {
                  JsonNode *arg = json_array_get_element (a, j);
                  if (j > 0)
                    g_string_append_c (line, ' ');
                  if (JSON_NODE_HOLDS_VALUE (arg) && json_node_get_value_type (arg) == G_TYPE_STRING)
                    fb_text_append_safe (line, json_node_get_string (arg), strlen (json_node_get_string (arg)));
                  else
                    g_string_append_c (line, '?');
                }
            }
          else
            {
              /* a mount's mount point, a server's address */
              const char *what = fb_json_member_string (e->info, "mountpoint");
              if (what == NULL)
                what = fb_json_member_string (e->info, "listen");
              if (what != NULL)
                fb_text_append_safe (line, what, strlen (what));
            }
        }
      else
        {
          pad_to (line, 0, 26);
          pad_to (line, 0, 12);
        }
      if (*action)
        g_string_append_printf (line, "  -- %s", action);
      while (line->len > 0 && line->str[line->len - 1] == ' ')
        g_string_truncate (line, line->len - 1);
      printf ("%s\n", line->str);
      g_string_free (line, TRUE);
    }
  return status;
}
