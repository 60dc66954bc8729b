/* fusebox — whether a host path is out of other users' reach (policy/util.h). */
#include "policy/util.h"

#include <fcntl.h>
#include <grp.h>
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

/* Is PATH (DIR_FD and NAME) on a FUSE filesystem of another user's (as
 * fb_dev_untrusted_fuse)?  Looked at only where the device changes from
 * *LAST_DEV's, from what the kernel holds; FALSE with ERROR naming PATH
 * and who mounted it.  Called before anything asks for PATH's attributes:
 * the lookup of a mount's root asks its filesystem nothing, a stat would,
 * and its server may never answer (every later step would wait for good).
 * A name that can't be stat'ed is left to the caller's own stat. */
static gboolean
check_not_foreign_fuse (int dir_fd, const char *name, const char *path, dev_t *last_dev, GError **error)
{
  struct statx stx;
  dev_t dev;
  gint64 owner;
  int flags = AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC | AT_SYMLINK_NOFOLLOW | (name[0] == '\0' ? AT_EMPTY_PATH : 0);

  if (statx (dir_fd, name, flags, STATX_TYPE, &stx) < 0)
    return TRUE;
  dev = makedev (stx.stx_dev_major, stx.stx_dev_minor);
  if (dev == *last_dev)
    return TRUE;
  *last_dev = dev;
  if ((owner = fb_dev_untrusted_fuse (dev)) < 0)
    return TRUE;
  g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_PERM,
               "%s is on a FUSE filesystem that another user (uid %" G_GINT64_FORMAT
               ") mounted: its server decides what "
               "fusebox would find there, and may never answer, so fusebox asks it nothing",
               path, owner);
  return FALSE;
}

/* How many links a walk follows, as the kernel (ELOOP past it). */
#define WALK_LINKS_MAX 40

/* PATH walked as the kernel resolves it, a step at a time, each step
 * looked at (check_not_foreign_fuse) before anything goes below it: a
 * name is looked up only in a directory already found on a filesystem
 * that answers, and the lookup of a mount's root asks the mounted one
 * nothing.  Links (anyone's: where they lead is what is looked at next)
 * are read, never followed by the kernel, whose walk through a link would
 * look up names below a mount's root before anything could see it.
 * Where a step does not exist (or can't be looked at), the rest is left
 * to whoever makes or refuses it. */
static gboolean
walk_not_foreign (const char *path, GError **error)
{
  g_autofree char *cwd = g_path_is_absolute (path) ? NULL : g_get_current_dir ();
  g_autofree char *abs = cwd != NULL ? g_strconcat (cwd, "/", path, NULL) : g_strdup (path);
  g_autoptr (GPtrArray) pending = g_ptr_array_new_with_free_func (g_free); /* the steps left, the next last */
  g_autoptr (GString) way = g_string_new ("/");
  dev_t last_dev = 0;
  guint links = 0;
  g_auto (GStrv) parts = g_strsplit (abs, "/", -1);

  for (guint n = g_strv_length (parts); n > 0; n--)
    g_ptr_array_add (pending, g_strdup (parts[n - 1]));
  if (!check_not_foreign_fuse (AT_FDCWD, "/", "/", &last_dev, error))
    return FALSE;
  while (pending->len > 0)
    {
      g_autofree char *part = g_ptr_array_steal_index (pending, pending->len - 1);
      gsize len = way->len;
      struct stat st;
      g_autofree char *target = NULL;

      if (part[0] == '\0' || strcmp (part, ".") == 0)
        continue;
      if (strcmp (part, "..") == 0)
        {
          /* WAY holds no link: its parent is the text's */
          char *slash = strrchr (way->str, '/');
          g_string_truncate (way, slash != NULL && slash != way->str ? (gsize)(slash - way->str) : 1);
          continue;
        }
      way_append (way, part);
      if (!check_not_foreign_fuse (AT_FDCWD, way->str, way->str, &last_dev, error))
        return FALSE;
      if (fb_lstat_cached (AT_FDCWD, way->str, &st) < 0)
        return TRUE;
      if (!S_ISLNK (st.st_mode))
        continue;
      if (++links > WALK_LINKS_MAX || (target = g_file_read_link (way->str, NULL)) == NULL)
        return TRUE;
      g_string_truncate (way, len);
      if (target[0] == '/')
        g_string_assign (way, "/");
      {
        g_auto (GStrv) steps = g_strsplit (target, "/", -1);
        for (guint n = g_strv_length (steps); n > 0; n--)
          g_ptr_array_add (pending, g_strdup (steps[n - 1]));
      }
    }
  return TRUE;
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
  dev_t last_dev = 0;

  for (guint i = 0; parts[i] != NULL; i++)
    if (parts[i][0] != '\0')
      last = i;

  /* nothing below is looked at on another user's FUSE filesystem */
  if (!walk_not_foreign (abs, error))
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

      if (fd >= 0 && !check_not_foreign_fuse (fd, "", walked->str, &last_dev, error))
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
