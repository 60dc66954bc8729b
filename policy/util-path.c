/* fusebox — whether a host path is out of other users' reach (policy/util.h). */
#include "policy/util.h"

#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* The uid that stands for the owners this user namespace does not map
 * (every one but the caller's, in most nested sandboxes: host root's
 * directories among them), or (uid_t)-1 in a namespace that maps every id
 * (the host's), where it is a real user's (nobody's) like any other. */
static uid_t
unmapped_uid (void)
{
  static gsize once = 0;
  static uid_t uid;

  if (g_once_init_enter (&once))
    {
      g_autofree char *map = NULL;
      g_autofree char *overflow = NULL;
      unsigned long inside, outside, count;

      uid = (uid_t)-1;
      if (g_file_get_contents ("/proc/self/uid_map", &map, NULL, NULL) &&
          !(sscanf (map, "%lu %lu %lu", &inside, &outside, &count) == 3 && inside == 0 && outside == 0 &&
            count == 4294967295UL) &&
          g_file_get_contents ("/proc/sys/kernel/overflowuid", &overflow, NULL, NULL))
        uid = (uid_t)g_ascii_strtoull (overflow, NULL, 10);
      g_once_init_leave (&once, 1);
    }
  return uid;
}

/* Whether GID is the caller's own group and no one else's: the caller's
 * group, of the caller's name, with no other member listed (user private
 * groups, where a umask of 002 makes every new directory group-writable;
 * as OpenSSH's StrictModes allows). */
static bool
group_is_private (gid_t gid)
{
  static gsize once = 0;
  static gid_t private_gid = (gid_t)-1;

  if (g_once_init_enter (&once))
    {
      struct passwd *pw = getpwuid (geteuid ());
      g_autofree char *user = pw != NULL ? g_strdup (pw->pw_name) : NULL;
      struct group *gr = getgrgid (getegid ());
      bool alone = gr != NULL && user != NULL && strcmp (gr->gr_name, user) == 0;

      for (char **m = gr != NULL ? gr->gr_mem : NULL; alone && m != NULL && *m != NULL; m++)
        if (strcmp (*m, user) != 0)
          alone = false;
      if (alone)
        private_gid = getegid ();
      g_once_init_leave (&once, 1);
    }
  return gid == private_gid;
}

/* What a step's owner and mode allow: NULL, or what is wrong with it. */
static const char *
step_problem (const struct stat *st, bool target, bool target_root_ok)
{
  uid_t me = geteuid ();
  /* root's, or an owner this namespace can't tell from root's */
  bool rootish = st->st_uid == 0 || st->st_uid == unmapped_uid ();

  if (S_ISLNK (st->st_mode))
    return "is a symbolic link of another user's";
  if (target && !target_root_ok && st->st_uid != me)
    return "is not yours";
  /* what the caller makes its own things in: sticky or not, another
   * user may make new names there (an empty directory refilled between
   * its check and its use) */
  if (target && !target_root_ok && S_ISDIR (st->st_mode) &&
      ((st->st_mode & S_IWOTH) != 0 || ((st->st_mode & S_IWGRP) != 0 && !group_is_private (st->st_gid))))
    return "is writable by other users";
  if (st->st_uid != me && !rootish)
    return "belongs to another user";
  /* a directory another user may write: they can rename or remove what
   * is in it, unless it is sticky (then only what is theirs, and each
   * step below is checked as its own) */
  if (S_ISDIR (st->st_mode) && (st->st_mode & S_ISVTX) == 0 &&
      ((st->st_mode & S_IWOTH) != 0 || ((st->st_mode & S_IWGRP) != 0 && !group_is_private (st->st_gid))))
    return "is writable by other users";
  return NULL;
}

/* The next component PART of a walk down a path, appended to WAY as the
 * kernel takes it (an empty one, of "//", is none: false). */
static bool
way_append (GString *way, const char *part)
{
  if (part[0] == '\0')
    return false;
  if (way->len > 1)
    g_string_append_c (way, '/');
  g_string_append (way, part);
  return true;
}

static gboolean check_private (const char *path, bool target_root_ok, bool must_exist, GError **error);

/* check_private, its problem put in one sentence with WHAT and FIX */
static gboolean
check_said (const char *path, bool target_root_ok, bool must_exist, const char *what, const char *fix, GError **error)
{
  g_autoptr (GError) local = NULL;

  if (check_private (path, target_root_ok, must_exist, &local))
    return TRUE;
  g_set_error (error, local->domain, local->code, "%s %s is not out of other users' reach: %s; %s", what, path,
               local->message, fix);
  return FALSE;
}

gboolean
fb_path_check_private (const char *path, bool target_root_ok, const char *what, const char *fix, GError **error)
{
  return check_said (path, target_root_ok, false, what, fix, error);
}

gboolean
fb_path_check_existing (const char *path, const char *what, const char *fix, GError **error)
{
  return check_said (path, true, true, what, fix, error);
}

/* Is the object FD (O_PATH, at PATH) on a mount that this process's mount
 * table holds and that is not another user's FUSE filesystem?  From what
 * the kernel holds (the lookup of a mount's root asks the mounted
 * filesystem nothing, a stat would, and its server may never answer):
 * FALSE with ERROR naming PATH.  A mount the table does not hold (another
 * mount namespace's, or one taken off, reached through a link in /proc)
 * can't be told: refused, but for a pipe, a socket or a device (a shell's
 * <(...) is a /proc link to a pipe).  Before Linux 5.8 (no mount id) a
 * device the table does not hold (a btrfs subvolume's) is taken as it is.
 * *RET_MODE, *RET_PROC (may be NULL): its type, and whether its mount is
 * a procfs. */
static gboolean
check_fd_mount (int fd, const char *path, mode_t *ret_mode, bool *ret_proc, GError **error)
{
  struct statx stx;
  bool by_id;
  gint64 owner;

  if (statx (fd, "", AT_EMPTY_PATH | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_MNT_ID, &stx) < 0)
    {
      int e = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e), "%s can't be looked at: %s", path, g_strerror (e));
      return FALSE;
    }
  by_id = (stx.stx_mask & STATX_MNT_ID) != 0;
  owner =
    fb_mount_untrusted_fuse (by_id ? stx.stx_mnt_id : makedev (stx.stx_dev_major, stx.stx_dev_minor), by_id, ret_proc);
  if (ret_mode != NULL)
    *ret_mode = stx.stx_mode;
  if (owner == -2 && by_id && !S_ISFIFO (stx.stx_mode) && !S_ISSOCK (stx.stx_mode) && !S_ISCHR (stx.stx_mode) &&
      !S_ISBLK (stx.stx_mode))
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_PERM,
                   "%s is on a mount that is not in this process's mount table (another mount namespace's, or one "
                   "taken off, reached through a link in /proc): fusebox can't tell whose filesystem it is, and its "
                   "server may never answer, so fusebox asks it nothing",
                   path);
      return FALSE;
    }
  if (owner < 0)
    return TRUE;
  g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_PERM,
               "%s is on a FUSE filesystem that another user (uid %" G_GINT64_FORMAT
               ") mounted: its server decides what fusebox would find there, and may never answer, so fusebox asks "
               "it nothing",
               path, owner);
  return FALSE;
}

gboolean
fb_fd_not_foreign_fuse (int fd, const char *path, GError **error)
{
  return check_fd_mount (fd, path, NULL, NULL, error);
}

/* How many links a walk follows, as the kernel (ELOOP past it). */
#define WALK_LINKS_MAX 40

/* PART opened O_PATH (with FLAGS) in DIR, for walk_open; SHOWN names it,
 * VERB what failed: the descriptor, -2 when it does not exist, -1 with
 * ERROR. */
static int
open_step (int dir, const char *part, int flags, const char *shown, const char *verb, GError **error)
{
  int fd = openat (dir, part, O_PATH | O_CLOEXEC | flags);
  int e = errno;

  if (fd >= 0)
    return fd;
  if (e == ENOENT || e == ENOTDIR)
    return -2;
  g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e), "%s can't be %s: %s", shown, verb, g_strerror (e));
  return -1;
}

/* PATH's object, opened O_PATH by a walk that resolves it as the kernel
 * does, a step at a time from / (or the working directory), each step
 * opened in the directory the walk holds (a name is looked up only in a
 * directory already found on a filesystem that answers) and looked at
 * (check_fd_mount) before anything goes below it.  A link's text is read
 * and walked, never followed by the kernel (whose walk through a link
 * would look up names below a mount's root before anything could see
 * them), but for a link in /proc, which may be magic (its text is not
 * where it leads): that one is followed, and where it landed looked at.
 * The descriptor; -2 when a step does not exist (ERROR unset: whoever
 * makes or refuses it says so); -1 with ERROR. */
static int
walk_open (const char *path, GError **error)
{
  g_autoptr (GPtrArray) pending = g_ptr_array_new_with_free_func (g_free); /* the steps left, the next last */
  g_autoptr (GString) shown = g_string_new (NULL);                         /* for messages */
  g_auto (GStrv) parts = g_strsplit (path, "/", -1);
  _fb_cleanup_fd_ int dir = -1;
  guint links = 0;

  if (path[0] == '/')
    g_string_assign (shown, "/");
  else
    {
      char cwd[PATH_MAX];
      /* (the name of a working directory that is gone is not a way to it) */
      g_string_assign (shown, getcwd (cwd, sizeof cwd) != NULL ? cwd : "the working directory");
    }
  dir = open (path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    {
      int e = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e), "%s can't be opened: %s", shown->str,
                   g_strerror (e));
      return -1;
    }
  if (!check_fd_mount (dir, shown->str, NULL, NULL, error))
    return -1;
  for (guint n = g_strv_length (parts); n > 0; n--)
    g_ptr_array_add (pending, g_strdup (parts[n - 1]));
  while (pending->len > 0)
    {
      g_autofree char *part = g_ptr_array_steal_index (pending, pending->len - 1);
      _fb_cleanup_fd_ int fd = -1;
      mode_t mode = 0;
      bool proc = false;
      gsize len = shown->len;

      if (part[0] == '\0' || strcmp (part, ".") == 0)
        continue;
      way_append (shown, part);
      fd = open_step (dir, part, O_NOFOLLOW, shown->str, "looked up", error);
      if (fd < 0)
        return fd;
      if (!check_fd_mount (fd, shown->str, &mode, &proc, error))
        return -1;
      if (!S_ISLNK (mode))
        {
          fb_fd_close (&dir);
          dir = fb_steal_fd (&fd);
          continue;
        }
      if (++links > WALK_LINKS_MAX)
        {
          g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_LOOP, "%s: more than %d symbolic links on the way", shown->str,
                       WALK_LINKS_MAX);
          return -1;
        }
      if (proc)
        {
          /* a magic link leads where its text may not say: followed (it
           * jumps, asking nothing), and where it landed looked at */
          int to = open_step (dir, part, 0, shown->str, "followed", error);
          if (to < 0)
            return to;
          fb_fd_close (&dir);
          dir = to;
          if (!check_fd_mount (dir, shown->str, NULL, NULL, error))
            return -1;
          continue;
        }
      {
        char target[PATH_MAX];
        ssize_t t = readlinkat (fd, "", target, sizeof target - 1);
        g_auto (GStrv) steps = NULL;

        if (t < 0)
          {
            int e = errno;
            g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e), "%s can't be read: %s", shown->str,
                         g_strerror (e));
            return -1;
          }
        target[t] = '\0';
        g_string_truncate (shown, len);
        if (target[0] == '/')
          {
            g_string_assign (shown, "/");
            fb_fd_close (&dir);
            dir = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (dir < 0 || !check_fd_mount (dir, "/", NULL, NULL, error))
              {
                if (dir < 0)
                  g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "/ can't be opened");
                return -1;
              }
          }
        steps = g_strsplit (target, "/", -1);
        for (guint n = g_strv_length (steps); n > 0; n--)
          g_ptr_array_add (pending, g_strdup (steps[n - 1]));
      }
    }
  return fb_steal_fd (&dir);
}

/* walk_open's verdict alone: TRUE unless it refused (ERROR). */
static gboolean
walk_not_foreign (const char *path, GError **error)
{
  int fd = walk_open (path, error);

  if (fd == -1)
    return FALSE;
  if (fd >= 0)
    close (fd);
  return TRUE;
}

int
fb_path_open_not_foreign_fuse (const char *path, const char *what, const char *fix, GError **error)
{
  g_autoptr (GError) local = NULL;
  int fd = walk_open (path, &local);

  if (fd == -1)
    g_set_error (error, local->domain, local->code, "%s %s: %s; %s", what, path, local->message, fix);
  return fd;
}

gboolean
fb_path_check_not_foreign_fuse (const char *path, const char *what, const char *fix, GError **error)
{
  g_autoptr (GError) local = NULL;

  if (walk_not_foreign (path, &local))
    return TRUE;
  g_set_error (error, local->domain, local->code, "%s %s: %s; %s", what, path, local->message, fix);
  return FALSE;
}

static gboolean
check_private (const char *path, bool target_root_ok, bool must_exist, GError **error)
{
  /* PATH as the kernel will take it: made absolute, but not canonicalized
   * as text ("LINK/.." is the link's target's parent, not the link's) */
  g_autofree char *cwd = g_path_is_absolute (path) ? NULL : g_get_current_dir ();
  g_autofree char *abs = cwd != NULL ? g_strconcat (cwd, "/", path, NULL) : g_strdup (path);
  g_auto (GStrv) parts = g_strsplit (abs, "/", -1);
  g_autoptr (GString) existing = g_string_new ("/");
  g_autofree char *real = NULL;
  g_autoptr (GString) walked = g_string_new ("/");
  g_auto (GStrv) steps = NULL;
  _fb_cleanup_fd_ int fd = -1;
  struct stat st;
  bool whole = true;
  guint last = 0;

  for (guint i = 0; parts[i] != NULL; i++)
    if (parts[i][0] != '\0')
      last = i;

  /* nothing below is looked at on another user's FUSE filesystem */
  if (!walk_not_foreign (path, error))
    return FALSE;
  /* The way as written, a step at a time, each as the kernel reaches it:
   * a link on it (a directory of another user's that holds one, or a link
   * of theirs in /tmp) decides where it leads.  Up to the part of PATH that
   * exists: what is missing, the caller creates (and checks again). */
  for (guint i = 0; parts[i] != NULL; i++)
    {
      gsize len = existing->len;
      const char *problem;

      if (!way_append (existing, parts[i]))
        continue;
      if (lstat (existing->str, &st) < 0)
        {
          int e = errno;
          if (e == ENOENT && !must_exist)
            {
              g_string_truncate (existing, len);
              whole = false;
              break;
            }
          g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e), "%s: %s", existing->str, g_strerror (e));
          return FALSE;
        }
      /* a link of root's or ours is followed (realpath, below) */
      problem = S_ISLNK (st.st_mode) && (st.st_uid == 0 || st.st_uid == geteuid () || st.st_uid == unmapped_uid ())
                  ? NULL
                  : step_problem (&st, i == last, target_root_ok);
      if (problem != NULL)
        {
          g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_PERM,
                       "%s %s (owner uid %u, mode %04o): another user could put something else in its place",
                       existing->str, problem, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
          return FALSE;
        }
    }

  real = fb_realpath (existing->str);
  if (real == NULL)
    {
      int e = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e), "%s: %s", existing->str, g_strerror (e));
      return FALSE;
    }

  /* Each step from /, opened without following a link (realpath resolved
   * them all: a link now is one put there since), owned by the caller or
   * root, and writable by no one else. */
  steps = g_strsplit (real + 1, "/", -1);
  fd = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  for (guint i = 0;; i++)
    {
      bool target = steps[i] == NULL || steps[i][0] == '\0';
      const char *problem;

      if (fd >= 0 && !check_fd_mount (fd, walked->str, NULL, NULL, error))
        return FALSE;
      if (fd < 0 || fstat (fd, &st) < 0)
        {
          int e = errno;
          g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e), "%s: %s", walked->str, g_strerror (e));
          return FALSE;
        }
      problem = S_ISLNK (st.st_mode) ? "became a symbolic link while it was checked"
                                     : step_problem (&st, target && whole, target_root_ok);
      if (problem != NULL)
        {
          g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_PERM,
                       "%s %s (owner uid %u, mode %04o): another user could put something else in its place",
                       walked->str, problem, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
          return FALSE;
        }
      if (target)
        return TRUE;
      if (walked->len > 1)
        g_string_append_c (walked, '/');
      g_string_append (walked, steps[i]);
      {
        int next = openat (fd, steps[i], O_PATH | O_NOFOLLOW | O_CLOEXEC);
        fb_fd_close (&fd);
        fd = next;
      }
    }
}

gboolean
fb_path_make_private (const char *path, const char *what, const char *fix, GError **error)
{
  g_autofree char *cwd = g_path_is_absolute (path) ? NULL : g_get_current_dir ();
  g_autofree char *abs = cwd != NULL ? g_strconcat (cwd, "/", path, NULL) : g_strdup (path);
  g_auto (GStrv) parts = g_strsplit (abs, "/", -1);
  g_autoptr (GString) have = g_string_new ("/");
  _fb_cleanup_fd_ int fd = -1;
  guint i;

  if (!fb_path_check_private (path, false, what, fix, error))
    return FALSE;
  /* the part that exists, checked just now: nothing on it can change */
  for (i = 0; parts[i] != NULL; i++)
    {
      struct stat st;
      gsize len = have->len;

      if (!way_append (have, parts[i]))
        continue;
      if (lstat (have->str, &st) < 0)
        {
          g_string_truncate (have, len);
          break;
        }
    }
  fd = open (have->str, O_PATH | O_DIRECTORY | O_CLOEXEC);
  /* the rest, made a step at a time below the part checked, never
   * through a link: each made 0700, or found made (by another too, in a
   * race) and then taken only when it is the caller's and no one else's */
  for (; parts[i] != NULL; i++)
    {
      struct stat st;
      int next;

      if (parts[i][0] == '\0' || strcmp (parts[i], ".") == 0)
        continue;
      if (fd < 0 || strcmp (parts[i], "..") == 0 || (mkdirat (fd, parts[i], 0700) < 0 && errno != EEXIST))
        {
          int e = fd < 0 || strcmp (parts[i], "..") != 0 ? errno : EINVAL;
          g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e), "%s %s: can't make %s in %s: %s; %s", what,
                       path, parts[i], have->str, g_strerror (e), fix);
          return FALSE;
        }
      next = openat (fd, parts[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      fb_fd_close (&fd);
      fd = next;
      if (have->len > 1)
        g_string_append_c (have, '/');
      g_string_append (have, parts[i]);
      if (fd < 0 || fstat (fd, &st) < 0 || st.st_uid != geteuid () || (st.st_mode & 022) != 0)
        {
          g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_PERM,
                       "%s %s is not out of other users' reach: %s was made by someone else meanwhile, or is not a "
                       "directory of yours that only you may write; %s",
                       what, path, have->str, fix);
          return FALSE;
        }
    }
  return fb_path_check_private (path, false, what, fix, error);
}
