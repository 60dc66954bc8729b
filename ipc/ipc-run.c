/* fusebox — run directories.
 *
 * A run directory holds one run's access log, its effective policy and the
 * private directories of "private" sources (a private HOME), so it is the
 * caller's alone: 0700, and so are the parents we create.  It lives under
 * $XDG_STATE_HOME/fusebox/runs (default ~/.local/state/fusebox/runs), which
 * the built-in policies hide from the sandbox.
 *
 * Run ids are "YYYYMMDD-HHMMSS-XXXXXX" in UTC, so that sorting names sorts
 * runs by start time whatever the time zone or DST did in between. */
#include "ipc/ipc-private.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

char *
fb_run_new_id (void)
{
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  guint8 rnd[6];
  char suffix[7];
  time_t now = time (NULL);
  struct tm tm;
  char stamp[32];

  /* getrandom can't fail for 6 bytes once the pool is ready; fall back to
   * GLib's generator if it does (uniqueness, not secrecy, is what matters). */
  if (getrandom (rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
    for (guint i = 0; i < sizeof rnd; i++)
      rnd[i] = (guint8)g_random_int ();
  for (guint i = 0; i < sizeof rnd; i++)
    suffix[i] = alphabet[rnd[i] % (sizeof alphabet - 1)];
  suffix[6] = '\0';

  gmtime_r (&now, &tm);
  strftime (stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return g_strdup_printf ("%s-%s", stamp, suffix);
}

char *
fb_run_dir_root (void)
{
  const char *state = g_getenv ("XDG_STATE_HOME");
  const char *home;

  /* The XDG spec says a relative value is invalid and must be ignored.  Read
   * the environment every time (g_get_user_state_dir caches the first). */
  if (state != NULL && g_path_is_absolute (state))
    return g_build_filename (state, "fusebox", "runs", NULL);
  home = g_getenv ("HOME");
  if (home == NULL || !g_path_is_absolute (home))
    {
      /* g_get_home_dir() is $HOME again when it is set: the user's entry
       * (a relative root would be hidden from no view: a view takes
       * only absolute paths) */
      struct passwd *pw = getpwuid (geteuid ());
      home = pw != NULL && pw->pw_dir != NULL && g_path_is_absolute (pw->pw_dir) ? pw->pw_dir : "/";
    }
  return g_build_filename (home, ".local", "state", "fusebox", "runs", NULL);
}

char *
fb_run_sessions_root (void)
{
  g_autofree char *runs = fb_run_dir_root ();
  g_autofree char *state = g_path_get_dirname (runs);

  return g_build_filename (state, "sessions", NULL);
}

/* NAME in DIR_FD (PATH), a directory of fusebox's state: not a link, and
 * when a directory, *RET_FD (O_PATH; else -1), checked to be on no other
 * user's FUSE filesystem before anything is looked up in it. */
static gboolean
state_step (int dir_fd, const char *name, const char *path, int *ret_fd, GError **error)
{
  struct stat st;
  _fb_cleanup_fd_ int fd = -1;

  *ret_fd = -1;
  if (fb_lstat_cached (dir_fd, name, &st) < 0)
    return TRUE;
  if (S_ISLNK (st.st_mode))
    {
      char target[4096];
      ssize_t n = readlinkat (dir_fd, name, target, sizeof target - 1);
      g_autofree char *parent = g_path_get_dirname (path);

      target[n > 0 ? n : 0] = '\0';
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                   "fusebox's state directory %s is a symbolic link (to %s): fusebox makes its state "
                   "directories itself and never as links, so someone else put it there (a sandbox that "
                   "could write %s makes files that are yours); remove the link, or set XDG_STATE_HOME to a "
                   "directory of your own that only you may write and that no sandbox sees",
                   path, n > 0 ? target : "?", parent);
      return FALSE;
    }
  fd = openat (dir_fd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return TRUE; /* no directory: the check of the way says what it is */
  if (!fb_fd_not_foreign_fuse (fd, path, error))
    return FALSE;
  *ret_fd = fb_steal_fd (&fd);
  return TRUE;
}

gboolean
fb_run_state_no_links (GError **error)
{
  g_autofree char *runs = fb_run_dir_root ();
  g_autofree char *state = g_path_get_dirname (runs);
  g_autofree char *above = g_path_get_dirname (state);
  g_autofree char *state_name = g_path_get_basename (state);
  g_autofree char *runs_name = g_path_get_basename (runs);
  g_autofree char *sessions = fb_run_sessions_root ();
  g_autofree char *sessions_name = g_path_get_basename (sessions);
  _fb_cleanup_fd_ int above_fd = -1;
  _fb_cleanup_fd_ int state_fd = -1;
  _fb_cleanup_fd_ int runs_fd = -1;
  _fb_cleanup_fd_ int sessions_fd = -1;

  /* nothing below another user's FUSE filesystem is looked up: its
   * server may never answer; and each of fusebox's directories is looked
   * at in the one above it as found, never by its path again (a link put
   * on the way meanwhile is not followed) */
  if (!fb_path_check_not_foreign_fuse (state, "fusebox's state directory",
                                       "set XDG_STATE_HOME to a directory of your own", error))
    return FALSE;
  above_fd = fb_path_open_not_foreign_fuse (above, "fusebox's state directory",
                                            "set XDG_STATE_HOME to a directory of your own", error);
  if (above_fd == -1)
    return FALSE;
  if (above_fd == -2)
    return TRUE; /* none yet: made a step at a time, never through a link */
  if (!state_step (above_fd, state_name, state, &state_fd, error))
    return FALSE;
  if (state_fd < 0)
    return TRUE;
  return state_step (state_fd, runs_name, runs, &runs_fd, error) &&
         state_step (state_fd, sessions_name, sessions, &sessions_fd, error);
}

gboolean
fb_run_state_first_way_ok (GError **error)
{
  g_autofree char *runs = fb_run_dir_root ();
  g_autofree char *state = g_path_get_dirname (runs);
  g_autofree char *cwd = g_path_is_absolute (state) ? NULL : g_get_current_dir ();
  g_autofree char *abs = cwd != NULL ? g_build_filename (cwd, state, NULL) : g_strdup (state);
  g_auto (GStrv) parts = NULL;
  g_autoptr (GString) way = g_string_new (NULL);
  struct stat st;

  if (lstat (abs, &st) == 0 || errno != ENOENT)
    return TRUE; /* made before (fb_run_state_no_links looks at it) */
  parts = g_strsplit (abs, "/", -1);
  for (guint i = 0; parts[i] != NULL; i++)
    {
      if (parts[i][0] == '\0')
        continue;
      g_string_append_c (way, '/');
      g_string_append (way, parts[i]);
      if (lstat (way->str, &st) < 0)
        return TRUE; /* the rest is made, a step at a time, never through a link */
      if (S_ISLNK (st.st_mode))
        {
          g_autofree char *link_real = fb_realpath (way->str);
          g_autofree char *real = link_real != NULL ? g_strconcat (link_real, abs + way->len, NULL) : NULL;
          g_autofree char *target = g_file_read_link (way->str, NULL);

          g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                       "fusebox's state directory %s does not exist yet, and the way to it passes the symbolic "
                       "link %s (to %s): fusebox makes its state the first time only on a way without links, since "
                       "a sandbox that could write where the link is may have put it there to choose where root "
                       "keeps its logs; if the link is yours, make the directory yourself (mkdir -p -m 700 %s), or set "
                       "XDG_STATE_HOME to a directory without links on its way",
                       abs, way->str, target != NULL ? target : "?", real != NULL ? real : abs);
          return FALSE;
        }
    }
  return TRUE;
}

/* fb_path_check_private of a directory of fusebox's state, with the fix */
static gboolean
state_path_ok (const char *dir, GError **error)
{
  return fb_run_state_no_links (error) &&
         fb_path_check_private (dir, false, "fusebox's state directory",
                                "set XDG_STATE_HOME to a directory of your own that only you may write", error);
}

gboolean
fb_run_state_dir_ok (GError **error)
{
  g_autofree char *root = fb_run_dir_root ();
  return state_path_ok (root, error);
}

static gboolean
valid_run_id (const char *id)
{
  return id != NULL && id[0] != '\0' && strchr (id, '/') == NULL && strcmp (id, ".") != 0 && strcmp (id, "..") != 0;
}

char *
fb_run_dir_create (const char *run_id, GError **error)
{
  g_autofree char *root = fb_run_dir_root ();
  g_autofree char *dir = NULL;
  struct stat st;

  if (!valid_run_id (run_id))
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                   "invalid run id '%s': it names a directory under %s, so it can't be empty or hold '/'",
                   run_id != NULL ? run_id : "(null)", root);
      return NULL;
    }
  /* 0700 for every directory we create on the way: the state directory may
   * not exist yet, and its contents are the caller's business only.  Out
   * of other users' reach before and once made (a directory of another
   * user on the way could swap a run directory, or the runs root, for one
   * of theirs: root would then write its runs there). */
  if (!state_path_ok (root, error) || !fb_run_state_first_way_ok (error) ||
      !fb_path_make_private (root, "fusebox's state directory",
                             "set XDG_STATE_HOME to a directory of your own that only you may write", error))
    return NULL;
  dir = g_build_filename (root, run_id, NULL);
  if (mkdir (dir, 0700) == 0)
    return g_steal_pointer (&dir);
  if (errno != EEXIST)
    {
      int errsv = errno;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO,
                   "can't create the run directory %s: %s; set XDG_STATE_HOME to a writable directory", dir,
                   g_strerror (errsv));
      return NULL;
    }
  /* An existing directory is reused only if it is plainly ours: a symlink or
   * someone else's directory there would redirect private files. */
  if (lstat (dir, &st) < 0 || !S_ISDIR (st.st_mode) || st.st_uid != geteuid () || (st.st_mode & 077) != 0)
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                   "the run directory %s already exists and is not a 0700 directory owned by uid %u; remove it "
                   "or choose another run id",
                   dir, (unsigned)geteuid ());
      return NULL;
    }
  return g_steal_pointer (&dir);
}

/* Does DIR (open as DIR_FD) hold a log, its live file or rotated ones?
 * *RET_LIVE: its live file's path. */
static gboolean
dir_has_log (int dir_fd, const char *dir, char **ret_live)
{
  g_autofree char *live = g_build_filename (dir, "access.jsonl", NULL);
  g_autoptr (GPtrArray) rotated = NULL;
  struct stat st;

  /* Whatever is there (what the kernel holds: a mount there is not
   * asked): the reader refuses what is not a regular file, and says what
   * it is. */
  rotated = fb_log_list_rotated_at (dir_fd, live, NULL);
  if (fb_lstat_cached (dir_fd, "access.jsonl", &st) == 0 || (rotated != NULL && rotated->len > 0))
    {
      *ret_live = g_steal_pointer (&live);
      return TRUE;
    }
  return FALSE;
}

char *
fb_run_find_latest (GError **error)
{
  g_autofree char *root = fb_run_dir_root ();
  g_autoptr (GDir) d = NULL;
  g_autofree char *best = NULL;
  const char *name;

  /* the newest run of a root another user can write could be theirs */
  if (!state_path_ok (root, error))
    return NULL;
  d = g_dir_open (root, 0, NULL);
  if (d != NULL)
    while ((name = g_dir_read_name (d)) != NULL)
      {
        g_autofree char *path = g_build_filename (root, name, NULL);

        if (!g_file_test (path, G_FILE_TEST_IS_DIR))
          continue;
        if (best == NULL || strcmp (name, best) > 0)
          {
            g_free (best);
            best = g_strdup (name);
          }
      }
  if (best == NULL)
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND,
                   "no runs in %s; name a run id, a run directory or a log file (XDG_STATE_HOME moves the root)", root);
      return NULL;
    }
  return g_build_filename (root, best, NULL);
}

/* What NAME in DIR_FD (PATH, as given) leads to, through the caller's or
 * root's links, from what the kernel holds (another user's FUSE filesystem
 * mounted at a name in a shared directory is not asked: its server need
 * never answer): 0 no directory, 1 a directory (*RET_FD, O_PATH), 2 the
 * root of a mount (another filesystem than the directory above it), -1
 * a link that leads through another user's FUSE filesystem (ERROR). */
static int
dir_kind_at (int dir_fd, const char *name, const char *path, int *ret_fd, GError **error)
{
  struct statx stx;
  struct stat st, up;
  _fb_cleanup_fd_ int fd = -1;

  /* another user's link is not followed (its target may be a name in their
   * FUSE filesystem, whose lookup would wait for good): a log file's name,
   * whose reader refuses links */
  if (fb_lstat_cached (dir_fd, name, &st) < 0 || (S_ISLNK (st.st_mode) && st.st_uid != geteuid () && st.st_uid != 0))
    return 0;
  if (S_ISLNK (st.st_mode))
    {
      /* ours or root's: followed by the walk, step by step */
      fd = fb_path_open_not_foreign_fuse (path, "the log", "give a log on a filesystem of yours or root's", error);
      if (fd == -1)
        return -1;
    }
  else
    fd = openat (dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || statx (fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &stx) < 0 || !S_ISDIR (stx.stx_mode))
    return 0;
  if ((stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0)
    {
      if ((stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0)
        return 2;
    }
  /* (before Linux 5.8) another device than the directory above it */
  else if (!S_ISLNK (st.st_mode) && fb_lstat_cached (dir_fd, "", &up) == 0 && up.st_dev != st.st_dev)
    return 2;
  *ret_fd = fb_steal_fd (&fd);
  return 1;
}

/* Are there rotated files of a log at PATH beside it (in DIR_FD, its
 * directory)?  *RET_OURS (may be NULL): is one of them a regular file of the
 * caller's on that directory's filesystem (a mount at the name is none:
 * the root of a FUSE filesystem never answered shows as root's file)? */
static bool
has_rotated (int dir_fd, const char *path, bool *ret_ours)
{
  g_autoptr (GPtrArray) rotated = fb_log_list_rotated_at (dir_fd, path, NULL);
  struct stat st;

  if (ret_ours != NULL)
    {
      *ret_ours = false;
      for (guint i = 0; rotated != NULL && i < rotated->len && !*ret_ours; i++)
        {
          g_autofree char *name = g_path_get_basename (((FbRotatedFile *)rotated->pdata[i])->path);
          _fb_cleanup_fd_ int fd = fb_open_path_on_dir_fs (dir_fd, name, &st);

          *ret_ours = fd >= 0 && S_ISREG (st.st_mode) && st.st_uid == geteuid ();
        }
    }
  return rotated != NULL && rotated->len > 0;
}

/* What PATH, a directory (RUN_FD; PARENT_FD the directory it is named
 * in), is: 1 a run directory, 0 a log file's name, -1 nobody can tell
 * (ERROR says why).  A name ending in .jsonl is a log file's (fusebox's
 * own), whatever is there: another user who can write beside a log could
 * put a directory, or a link to one, at its free live name and have their
 * records read in its place.  A directory with rotated files beside it (a
 * --log named otherwise, or names someone put beside a run directory in a
 * shared place) is the caller's run directory when it is theirs and none of
 * those files is, and a log's name when one of the files is theirs and the
 * directory is not; otherwise it is refused. */
static int
dir_is_run_dir (int parent_fd, int run_fd, const char *path, GError **error)
{
  struct stat st;
  bool ours_rotated = false, ours_dir;

  if (g_str_has_suffix (path, ".jsonl"))
    return 0;
  if (!has_rotated (parent_fd, path, &ours_rotated))
    return 1;
  ours_dir = fb_lstat_cached (run_fd, "", &st) == 0 && st.st_uid == geteuid ();
  if (ours_dir && !ours_rotated)
    return 1;
  if (ours_rotated && !ours_dir)
    return 0;
  g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
               "%s is a directory, and there are rotated log files beside it (%s.<first>-<last>.jsonl): fusebox "
               "can't tell the run directory from the log of that name (whoever can write beside it may have put "
               "one there); name the log's file (%s/access.jsonl) or a rotated file",
               path, path, path);
  return -1;
}

/* Is ID a run of ours (a directory in ROOT)?  Its directory's path. */
static char *
our_run (const char *root, const char *id)
{
  _fb_cleanup_fd_ int root_fd = fb_path_open_not_foreign_fuse (root, "the runs' directory", "", NULL);
  _fb_cleanup_fd_ int run_fd = -1;
  g_autofree char *dir = g_build_filename (root, id, NULL);

  if (root_fd < 0 || dir_kind_at (root_fd, id, dir, &run_fd, NULL) != 1)
    return NULL;
  return g_steal_pointer (&dir);
}

char *
fb_run_resolve_log (const char *arg, gboolean follow, gboolean *ret_absent, GError **error)
{
  g_autofree char *root = fb_run_dir_root ();
  g_autofree char *live = NULL;
  g_autofree char *run_or_file = g_strdup (arg);
  g_autofree char *parent = NULL;
  g_autofree char *name = NULL;
  _fb_cleanup_fd_ int parent_fd = -1;
  _fb_cleanup_fd_ int run_fd = -1;
  struct stat st;
  int kind;

  if (ret_absent != NULL)
    *ret_absent = FALSE;
  /* "DIR/" as DIR (a shell's completion adds the slash): the rules below
   * look at the name, and beside it, not inside it */
  for (gsize n = run_or_file != NULL ? strlen (run_or_file) : 0; n > 1 && run_or_file[n - 1] == '/'; n--)
    run_or_file[n - 1] = '\0';
  if (run_or_file == NULL || run_or_file[0] == '\0')
    {
      g_autofree char *latest = fb_run_find_latest (error);

      if (latest == NULL)
        return NULL;
      return g_build_filename (latest, "access.jsonl", NULL);
    }
  /* the way to it, walked once (nothing on another user's FUSE filesystem,
   * nor a link into one, is looked up), and every look after it made in
   * the directory that walk found: a name there is not walked again, so
   * another user who swaps a directory on the way for a link into their
   * silent FUSE filesystem meanwhile is not asked either */
  parent = g_path_get_dirname (run_or_file);
  name = g_path_get_basename (run_or_file);
  parent_fd = fb_path_open_not_foreign_fuse (parent, "the log's directory",
                                             "give a log on a filesystem of yours or root's", error);
  if (parent_fd == -1)
    return NULL;

  /* 0. a run id: one of our runs first, before a name in the current
   * directory (which another user may be able to write) */
  if (valid_run_id (run_or_file))
    {
      g_autofree char *dir = our_run (root, run_or_file);

      if (dir != NULL)
        return g_build_filename (dir, "access.jsonl", NULL);
    }
  /* 1. a run directory (the caller may name it through a link); never a
   * log file's name: another user who can write beside a log could put a
   * directory, or a link to one, at its free live name, and have their
   * records read in its place; never a mount's root, which is not looked
   * into (whoever mounted it may never answer) */
  kind = parent_fd >= 0 ? dir_kind_at (parent_fd, name, run_or_file, &run_fd, error) : 0;
  if (kind < 0)
    return NULL;
  if (kind == 2)
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                   "%s is the root of another filesystem mounted there: fusebox does not look into it for an "
                   "access log (whoever mounted it may never answer); name the log file itself",
                   run_or_file);
      return NULL;
    }
  if (kind == 1)
    {
      int is_run = dir_is_run_dir (parent_fd, run_fd, run_or_file, error);

      if (is_run < 0)
        return NULL;
      if (is_run == 0)
        return g_strdup (run_or_file); /* the reader refuses the directory, naming it */
      if (dir_has_log (run_fd, run_or_file, &live))
        return g_steal_pointer (&live);
      if (follow)
        {
          if (ret_absent != NULL)
            *ret_absent = TRUE;
          return g_build_filename (run_or_file, "access.jsonl", NULL);
        }
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND,
                   "%s is a directory without an access log (looked for %s/access.jsonl and its rotated files)",
                   run_or_file, run_or_file);
      return NULL;
    }
  /* 2. a log file: anything else there is one to the reader, which opens
   * only a regular file (not a FIFO, not through a link) and says what
   * else it found */
  if (parent_fd >= 0 && fb_lstat_cached (parent_fd, name, &st) == 0)
    return g_strdup (run_or_file);
  /* or a log whose live file is not there (yet, or any more): its rotated
   * files are */
  if (parent_fd >= 0 && has_rotated (parent_fd, run_or_file, NULL))
    return g_strdup (run_or_file);
  /* 3. a run id */
  if (valid_run_id (run_or_file))
    {
      g_autofree char *dir = our_run (root, run_or_file);

      if (dir != NULL)
        {
          /* A run that has just started may not have written yet: the live
           * file's path is still the answer (`log --follow` waits for it). */
          return g_build_filename (dir, "access.jsonl", NULL);
        }
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND,
                   "no access log for '%s': it is not a file, not a directory, and not a run in %s", run_or_file, root);
      return NULL;
    }
  /* 4. followed: a log not written yet, in a directory that is there */
  if (follow && parent_fd >= 0)
    {
      if (ret_absent != NULL)
        *ret_absent = TRUE;
      return g_strdup (run_or_file);
    }
  g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND,
               "no access log at '%s': it is neither a file nor a directory", run_or_file);
  return NULL;
}

/* --- fusebox's own state, out of every sandbox's reach --------------------- */

/* A run directory fusebox made: a 0700 directory of ours holding the
 * policy.json that run, mount and serve all write first. */
static gboolean
is_run_dir_at (int dir_fd, const char *name)
{
  struct stat st;
  _fb_cleanup_fd_ int fd = -1;

  if (fstatat (dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR (st.st_mode) || st.st_uid != geteuid () ||
      (st.st_mode & 07777) != 0700)
    return FALSE;
  fd = openat (dir_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return fd >= 0 && fstatat (fd, "policy.json", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG (st.st_mode);
}

char **
fb_run_state_paths (const char *run_dir, const char *log_path)
{
  GPtrArray *out = g_ptr_array_new ();
  g_autofree char *root = fb_run_dir_root ();
  g_autofree char *sessions = fb_run_sessions_root ();

  g_ptr_array_add (out, g_strdup (root));
  /* the control sockets of `run --session`: made now, if need be, so that
   * a view started before the first session hides it too (by identity) */
  if (fb_run_state_no_links (NULL) && fb_path_make_private (sessions, "the sessions' directory", "", NULL))
    g_ptr_array_add (out, g_strdup (sessions));
  if (run_dir != NULL)
    {
      g_autofree char *parent = g_path_get_dirname (run_dir);
      g_autofree char *base = g_path_get_basename (run_dir);

      g_ptr_array_add (out, g_strdup (run_dir));
      /* --run-dir elsewhere: the runs fusebox made beside it are as private
       * as the ones under the root (a bound, not a walk: one directory) */
      if (strcmp (parent, root) != 0)
        {
          _fb_cleanup_fd_ int dir_fd = open (parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
          GDir *d = dir_fd >= 0 ? g_dir_open (parent, 0, NULL) : NULL;
          const char *name;
          guint seen = 0;

          while (d != NULL && (name = g_dir_read_name (d)) != NULL && seen++ < FB_RUN_SIBLINGS_MAX)
            if (strcmp (name, base) != 0 && is_run_dir_at (dir_fd, name))
              g_ptr_array_add (out, g_build_filename (parent, name, NULL));
          if (d != NULL)
            g_dir_close (d);
        }
    }
  if (log_path != NULL)
    {
      /* a --log elsewhere, and the rotated files beside it */
      g_autoptr (GPtrArray) rotated = fb_log_list_rotated (log_path, NULL);
      g_ptr_array_add (out, g_strdup (log_path));
      for (guint i = 0; rotated != NULL && i < rotated->len; i++)
        g_ptr_array_add (out, g_strdup (rotated->pdata[i]));
    }
  g_ptr_array_add (out, NULL);
  return (char **)g_ptr_array_free (out, FALSE);
}

/* A `source` names an existing directory.  The view opens it once, at
 * start, with O_DIRECTORY|O_NOFOLLOW (fs/fs-view.c), and a mount whose
 * source can't be opened would show an empty directory: a typo, a file, a
 * FIFO or a link would then pass for "nothing there".  A symbolic link is
 * refused rather than resolved: the link could be changed between this
 * check and the view's open (and after it, for the next run), and the
 * directory a policy shows should be the one it names.  Links in the
 * directories above the source are followed, once, by the view's open. */
static gboolean
check_source_is_dir (const FbPolicyMount *mount, GError **error)
{
  const char *at = mount->rule->source_at != NULL ? mount->rule->source_at : mount->rule->origin;
  const char *host = mount->host_path;
  struct stat st;

  if (lstat (host, &st) < 0)
    {
      int errsv = errno;
      const char *why = errsv == ENOENT    ? "does not exist"
                        : errsv == ENOTDIR ? "does not exist (a directory above it is a file)"
                        : errsv == EACCES  ? "can't be looked up (permission denied on a directory above it)"
                                           : g_strerror (errsv);

      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                   "%s: source %s: %s; a source must be an existing directory (\"private\" makes an empty one "
                   "for each run)",
                   at, host, why);
      return FALSE;
    }
  if (S_ISLNK (st.st_mode))
    {
      g_autofree char *target = g_file_read_link (host, NULL);

      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                   "%s: source %s: is a symbolic link (to %s), not a directory; a source must be an existing "
                   "directory, named as itself: write the directory the link points to",
                   at, host, target != NULL ? target : "?");
      return FALSE;
    }
  if (!S_ISDIR (st.st_mode))
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                   "%s: source %s: is %s, not a directory; a source must be an existing directory", at, host,
                   fb_ipc_file_kind (st.st_mode));
      return FALSE;
    }
  return TRUE;
}

gboolean
fb_run_check_sources (FbPolicy *policy, const char *const *state_paths, GError **error)
{
  const FbPolicyMount *mounts;
  guint n;
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (struct stat));
  g_autoptr (GPtrArray) names = g_ptr_array_new ();

  /* what the kernel holds of each: a name there may be another user's
   * mount (an access log's, in a sticky directory), whose server, asked,
   * might never answer */
  for (guint i = 0; state_paths != NULL && state_paths[i] != NULL; i++)
    {
      struct stat st;
      if (fb_lstat_cached (AT_FDCWD, state_paths[i], &st) == 0)
        {
          g_array_append_val (ids, st);
          g_ptr_array_add (names, (gpointer)state_paths[i]);
        }
    }
  mounts = fb_policy_get_mounts (policy, &n);
  for (guint m = 0; m < n; m++)
    {
      g_autofree char *path = NULL;
      g_autoptr (GError) local = NULL;

      if (mounts[m].is_private || mounts[m].host_path == NULL)
        continue;
      /* on another user's FUSE filesystem nothing is looked at (its server
       * may never answer): a source there is refused; a rule's path there
       * the view shows blank */
      if (!fb_path_check_not_foreign_fuse (mounts[m].host_path, "the source", "choose a directory of yours or root's",
                                           &local))
        {
          if (mounts[m].rule != NULL && mounts[m].rule->source != NULL)
            {
              g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID, "%s: %s",
                           mounts[m].rule->source_at != NULL ? mounts[m].rule->source_at : mounts[m].rule->origin,
                           local->message);
              return FALSE;
            }
          g_clear_error (&local);
          continue;
        }
      /* a rule's own source (a rule without one shows the host's path) */
      if (mounts[m].rule != NULL && mounts[m].rule->source != NULL && !check_source_is_dir (&mounts[m], error))
        return FALSE;
      /* the source and each directory above it, as the host resolves them */
      path = fb_realpath (mounts[m].host_path);
      if (path == NULL)
        path = g_strdup (mounts[m].host_path);
      for (gboolean itself = TRUE;; itself = FALSE)
        {
          struct stat st;
          char *up;

          if (stat (path, &st) == 0)
            for (guint k = 0; k < ids->len; k++)
              {
                const struct stat *s = &g_array_index (ids, struct stat, k);
                if (s->st_dev == st.st_dev && s->st_ino == st.st_ino)
                  {
                    g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                                 "%s: the source %s (shown at %s) is %s%s, fusebox's own state: run directories and "
                                 "access logs are never shown to a sandbox; choose a source outside it",
                                 mounts[m].rule != NULL ? mounts[m].rule->origin : fb_policy_get_origin (policy),
                                 mounts[m].host_path, mounts[m].view_path, itself ? "" : "inside ",
                                 (const char *)names->pdata[k]);
                    return FALSE;
                  }
              }
          if (strcmp (path, "/") == 0)
            break;
          up = g_path_get_dirname (path);
          g_free (path);
          path = up;
        }
    }
  return TRUE;
}
