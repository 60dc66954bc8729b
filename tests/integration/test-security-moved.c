/* fusebox — a directory the host moves while a caller holds it.
 *
 * A directory's node keeps a descriptor that follows the directory
 * wherever the host moves it, and a process keeps using that node through
 * its working directory or an open descriptor.  The threat: the host (an
 * operator, a build, another tool) moves a workspace directory into a
 * place the policy denies, and keeps putting files there; the sandbox, still
 * holding the directory, reads them under the old path's decision.  Before,
 * `mv ws/inbox secret/inbox` then a file made there after the move was read
 * through the held descriptor.
 *
 * Each test holds a directory of the real `fusebox mount` open (as a
 * working directory would), proves it works through it and that the host
 * file exists and is readable outside, moves the directory on the host,
 * and then: what the descriptor reaches is refused (EACCES, logged with the
 * rule fusebox:moved-on-host) within 1 s, a bound for the watcher's
 * asynchronous delivery; the directory's new path is decided as that path
 * (denied in "secret", usable in the workspace); and a rename made through
 * the mount itself keeps the held directory working.  Also with every host
 * event lost (the path of a fanotify queue overflow). */
#include "tests/lib/test-mount.h"

#include <sys/mount.h>

static const char policy_text[] =
  "{ \"version\": 1, \"rules\": [\n"
  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" },\n"
  "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"the workspace\" },\n"
  "  { \"path\": \"@H@/secret\", \"access\": \"deny\", \"why\": \"credentials\" } ] }\n";

static const char moved_rule[] = "\"rule_origin\":\"fusebox:moved-on-host\"";

/* Open REL through the mount as a held directory. */
static int
hold_dir (MFx *fx, const char *rel)
{
  int fd = open (mfx_in_mount (fx, rel), O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0)
    fail_msg ("open %s through the mount: %s", rel, g_strerror (errno));
  return fd;
}

/* NAME under the held DIR_FD, read whole; NULL with errno on failure. */
static char *
read_at (int dir_fd, const char *name)
{
  g_autoptr (GString) s = g_string_new (NULL);
  char buf[256];
  ssize_t n;
  int fd = openat (dir_fd, name, O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return NULL;
  while ((n = read (fd, buf, sizeof buf)) > 0)
    g_string_append_len (s, buf, n);
  close (fd);
  return n < 0 ? NULL : g_string_free (g_steal_pointer (&s), FALSE);
}

static bool
refused_at (int dir_fd, const char *name)
{
  g_autofree char *text = read_at (dir_fd, name);

  return text == NULL && errno == EACCES;
}

static void
host_rename (MFx *fx, const char *from, const char *to)
{
  g_autofree char *a = mfx_h (fx, from);
  g_autofree char *b = mfx_h (fx, to);

  if (rename (a, b) != 0)
    fail_msg ("rename %s %s on the host: %s", a, b, g_strerror (errno));
}

/* The held directory's files are refused within 1 s, NAME among them. */
static void
assert_refused_soon (int dir_fd, const char *name)
{
  if (!TEST_WAIT_FOR (refused_at (dir_fd, name), 1000))
    {
      g_autofree char *text = read_at (dir_fd, name);
      fail_msg ("%s under the moved directory was not refused within 1 s (%s)", name,
                text != NULL ? "it read" : g_strerror (errno));
    }
}

/* REL held through the mount, and its f.txt read through the held
 * descriptor: CONTENT. */
static int
hold_reading (MFx *fx, const char *rel, const char *content)
{
  g_autofree char *text = NULL;
  int fd = hold_dir (fx, rel);

  text = read_at (fd, "f.txt");
  assert_non_null (text);
  assert_string_equal (text, content);
  return fd;
}

/* The coherent mount, after REL/f.txt was written on the host with
 * CONTENT; REL held through it, and f.txt read through the held
 * descriptor. */
static int
mount_holding (MFx *fx, const char *rel, const char *content)
{
  g_autofree char *file = g_strconcat (rel, "/f.txt", NULL);

  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  mfx_write (fx, file, content);
  mfx_mount (fx, policy_text, NULL);
  return hold_reading (fx, rel, content);
}

/* ws/inbox, held; the host moves it into secret/ and writes creds2 there. */
static void
moved_into_denied (MFx *fx)
{
  g_autofree char *log = NULL;
  g_autofree char *text = NULL;
  struct stat st;
  int fd;

  mfx_write (fx, "/ws/inbox/a.txt", "before");
  mfx_mkdir (fx, "/secret");
  mfx_mount (fx, policy_text, "--log-level", "all", NULL);
  fd = hold_dir (fx, "/ws/inbox");
  text = read_at (fd, "a.txt");
  assert_non_null (text);
  assert_string_equal (text, "before");

  host_rename (fx, "/ws/inbox", "/secret/inbox");
  mfx_write (fx, "/secret/inbox/creds2", "the host's secret");
  mfx_assert_host_readable (fx, "/secret/inbox/creds2");

  assert_refused_soon (fd, "creds2");
  assert_true (refused_at (fd, "a.txt"));
  /* nothing is made there either, and the listing is refused */
  assert_errno_is (mkdirat (fd, "planted", 0755), EACCES);
  assert_errno_is (lstat (mfx_on_host (fx, "/secret/inbox/planted"), &st), ENOENT);
  {
    int lfd = openat (fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dp = lfd >= 0 ? fdopendir (lfd) : NULL;
    errno = 0;
    if (dp != NULL)
      {
        assert_null (readdir (dp));
        assert_int_equal (errno, EACCES);
        closedir (dp);
      }
    else
      assert_int_equal (errno, EACCES);
  }
  /* its new path is the policy's: denied */
  assert_errno_is (open (mfx_in_mount (fx, "/secret/inbox/creds2"), O_RDONLY | O_CLOEXEC), EACCES);
  close (fd);

  mfx_unmount (fx);
  log = mfx_log (fx);
  if (strstr (log, moved_rule) == NULL || strstr (log, "/ws/inbox/creds2\"") == NULL)
    fail_msg ("no refusal of ws/inbox/creds2 with %s in the log:\n%s", moved_rule, log);
}

MFX_CASE (test_moved_into_denied)
{
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  moved_into_denied (fx);
}

/* The same with every host event lost: the daemon checks every directory. */
MFX_CASE (test_moved_into_denied_events_lost)
{
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  g_setenv ("FUSEBOX_TEST_LOSE_EVENTS", "1", TRUE);
  moved_into_denied (fx);
  g_unsetenv ("FUSEBOX_TEST_LOSE_EVENTS");
}

/* The same past the watcher's budget of marked directories (lowered to
 * one for the test): the workspace is not marked, so no event tells of the
 * move, and the held directory is checked against its name when it is
 * used. */
MFX_CASE (test_moved_past_the_watchers_budget)
{
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  g_setenv ("FUSEBOX_TEST_WATCH_DIRS_MAX", "1", TRUE);
  moved_into_denied (fx);
  g_unsetenv ("FUSEBOX_TEST_WATCH_DIRS_MAX");
}

/* Past the budget, a directory held 20 levels below the one the host
 * moves: every directory on its way is checked, however deep. */
MFX_CASE (test_moved_far_above_past_the_watchers_budget)
{
  g_autoptr (GString) rel = g_string_new ("/ws");
  g_autoptr (GString) moved = g_string_new ("/secret/c3");
  int fd;

  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  g_setenv ("FUSEBOX_TEST_WATCH_DIRS_MAX", "1", TRUE);
  for (int i = 1; i <= 20; i++)
    {
      g_string_append_printf (rel, "/c%d", i);
      if (i > 3)
        g_string_append_printf (moved, "/c%d", i);
    }
  mfx_mkdir (fx, "/secret");
  fd = mount_holding (fx, rel->str, "deep");
  g_unsetenv ("FUSEBOX_TEST_WATCH_DIRS_MAX");
  host_rename (fx, "/ws/c1/c2/c3", "/secret/c3");
  g_string_append (moved, "/creds");
  mfx_write (fx, moved->str, "the host's secret");
  mfx_assert_host_readable (fx, moved->str);
  assert_refused_soon (fd, "creds");
  close (fd);
}

/* Within the workspace: the held descriptor is refused too (the view does
 * not follow the host's moves), and the new path works at once. */
MFX_CASE (test_moved_within_workspace)
{
  g_autofree char *text = NULL;
  struct stat st;
  int fd = mount_holding (fx, "/ws/a", "kept");

  host_rename (fx, "/ws/a", "/ws/b");
  assert_refused_soon (fd, "f.txt");
  close (fd);
  assert_errno_is (stat (mfx_in_mount (fx, "/ws/a"), &st), ENOENT);
  fd = hold_dir (fx, "/ws/b");
  text = read_at (fd, "f.txt");
  assert_non_null (text);
  assert_string_equal (text, "kept");
  assert_int_equal (mkdirat (fd, "made", 0755), 0);
  assert_int_equal (lstat (mfx_on_host (fx, "/ws/b/made"), &st), 0);
  close (fd);
}

/* A rename through the mount moves the view's nodes with it: the held
 * directory keeps working, also after the host makes a new directory at
 * its old name (a host change there, which has the daemon check that name). */
MFX_CASE (test_own_rename_keeps_held)
{
  g_autofree char *text = NULL;
  int fd = mount_holding (fx, "/ws/c", "mine");

  assert_int_equal (rename (mfx_in_mount (fx, "/ws/c"), mfx_in_mount (fx, "/ws/d")), 0);
  mfx_mkdir (fx, "/ws/c");
  mfx_write (fx, "/ws/c/other.txt", "new");
  /* the new directory shows at the old name: the host's change was seen */
  assert_true (TEST_WAIT_FOR (access (mfx_in_mount (fx, "/ws/c/other.txt"), F_OK) == 0, 1000));
  g_usleep (100 * 1000);
  text = read_at (fd, "f.txt");
  if (text == NULL)
    fail_msg ("the directory renamed through the mount was refused: %s", g_strerror (errno));
  assert_string_equal (text, "mine");
  assert_int_equal (mkdirat (fd, "made", 0755), 0);
  close (fd);
}

/* --- a mount's source -------------------------------------------------------

 * A mount's source is opened once and followed like a bind mount: a
 * workspace below a private HOME (a mount of the host's directory of that
 * path) and a rule's own `source` shown at another path. */
static const char sources_policy[] =
  "{ \"version\": 1, \"rules\": [\n"
  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" },\n"
  "  { \"path\": \"@H@/home\", \"access\": \"write\", \"source\": \"private\", \"why\": \"a private HOME\" },\n"
  "  { \"path\": \"@H@/home/ws\", \"access\": \"write\", \"why\": \"the workspace, below it\" },\n"
  "  { \"path\": \"@H@/src\", \"access\": \"write\", \"why\": \"where the alias comes from\" },\n"
  "  { \"path\": \"@H@/alias\", \"access\": \"write\", \"source\": \"@H@/src/inner\", \"why\": \"an alias\" },\n"
  "  { \"path\": \"@H@/secret\", \"access\": \"deny\", \"why\": \"credentials\" } ] }\n";

static const char source_rule[] = "\"rule_origin\":\"fusebox:source-moved-on-host\"";

/* The sources' mount with REL (a mount point) held, f.txt written with
 * CONTENT on the host in its source HOST_REL and read through the held
 * descriptor. */
static int
mount_sources_holding (MFx *fx, const char *rel, const char *host_rel, const char *content)
{
  g_autofree char *file = g_strconcat (host_rel, "/f.txt", NULL);

  mfx_mkdir (fx, "/home/ws");
  mfx_mkdir (fx, "/src/inner");
  mfx_mkdir (fx, "/secret");
  mfx_write (fx, file, content);
  mfx_mount (fx, sources_policy, "--log-level", "all", NULL);
  return hold_reading (fx, rel, content);
}

/* After REL's source moved (and the host wrote creds there, at HOST_NEW):
 * the held descriptor and REL's path are refused, and logged so. */
static void
assert_source_refused (MFx *fx, int fd, const char *rel, const char *host_new)
{
  g_autofree char *creds = g_strconcat (host_new, "/creds", NULL);
  g_autofree char *in_view = g_strconcat (rel, "/creds", NULL);
  g_autofree char *logged = NULL;
  g_autofree char *log = NULL;

  mfx_write (fx, creds, "the host's secret");
  mfx_assert_host_readable (fx, creds);
  assert_refused_soon (fd, "creds");
  assert_true (refused_at (fd, "f.txt"));
  assert_errno_is (open (mfx_in_mount (fx, in_view), O_RDONLY | O_CLOEXEC), EACCES);
  assert_errno_is (mkdirat (fd, "planted", 0755), EACCES);
  close (fd);
  mfx_unmount (fx);
  log = mfx_log (fx);
  logged = g_strdup_printf ("%s\"", in_view);
  if (strstr (log, source_rule) == NULL || strstr (log, logged) == NULL)
    fail_msg ("no refusal of %s with %s in the log:\n%s", in_view, source_rule, log);
}

/* Every host event lost has the daemon check every directory; a mount
 * point's name in its view parent (a private HOME, which holds no "ws")
 * is not its source's, and is not taken for a move: the workspace held
 * below the private HOME, and the HOME itself, keep working. */
MFX_CASE (test_lost_events_keep_mount_points)
{
  g_autofree char *text = NULL;
  int ws, home;

  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  g_setenv ("FUSEBOX_TEST_LOSE_EVENTS", "1", TRUE);
  ws = mount_sources_holding (fx, "/home/ws", "/home/ws", "work");
  g_unsetenv ("FUSEBOX_TEST_LOSE_EVENTS");
  home = hold_dir (fx, "/home");
  test_write_file (mfx_in_mount (fx, "/home/note"), "private");
  /* a host change in the held workspace: lost, so everything is checked */
  mfx_write (fx, "/home/ws/later.txt", "seen");
  assert_true (TEST_WAIT_FOR (access (mfx_in_mount (fx, "/home/ws/later.txt"), F_OK) == 0, 1000));
  g_usleep (200 * 1000);
  text = read_at (ws, "f.txt");
  if (text == NULL)
    fail_msg ("the workspace held below the private HOME was refused: %s", g_strerror (errno));
  assert_string_equal (text, "work");
  g_free (text);
  text = read_at (home, "note");
  if (text == NULL)
    fail_msg ("the private HOME held was refused: %s", g_strerror (errno));
  assert_string_equal (text, "private");
  close (ws);
  close (home);
}

/* `mv ~/ws ~/secret/` on the host with a workspace below a private HOME. */
MFX_CASE (test_source_moved_into_denied)
{
  int fd;

  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  fd = mount_sources_holding (fx, "/home/ws", "/home/ws", "work");
  host_rename (fx, "/home/ws", "/secret/ws");
  assert_source_refused (fx, fd, "/home/ws", "/secret/ws");
}

/* A directory above a rule's own source moved, every event lost. */
MFX_CASE (test_source_ancestor_moved_events_lost)
{
  int fd;

  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  g_setenv ("FUSEBOX_TEST_LOSE_EVENTS", "1", TRUE);
  fd = mount_sources_holding (fx, "/alias", "/src/inner", "aliased");
  g_unsetenv ("FUSEBOX_TEST_LOSE_EVENTS");
  host_rename (fx, "/src", "/secret/src");
  assert_source_refused (fx, fd, "/alias", "/secret/src/inner");
}

/* A directory above a rule's source moved into a denied place and a
 * symbolic link to it left at its name: the path, followed, would still
 * lead to the source; the source is refused all the same. */
MFX_CASE (test_source_ancestor_replaced_by_link)
{
  g_autofree char *link = NULL;
  int fd;

  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  fd = mount_sources_holding (fx, "/alias", "/src/inner", "aliased");
  host_rename (fx, "/src", "/secret/src");
  link = mfx_h (fx, "/src");
  assert_int_equal (symlink ("secret/src", link), 0);
  assert_source_refused (fx, fd, "/alias", "/secret/src/inner");
}

/* With no host watcher the sources are checked now and then (once a
 * second): refused within 3 s. */
MFX_CASE (test_source_moved_unwatched)
{
  g_autofree char *text = NULL;
  int fd;

  g_setenv ("FUSEBOX_NO_FANOTIFY", "1", TRUE);
  fd = mount_sources_holding (fx, "/alias", "/src/inner", "aliased");
  host_rename (fx, "/src/inner", "/secret/inner");
  mfx_write (fx, "/secret/inner/creds", "the host's secret");
  mfx_assert_host_readable (fx, "/secret/inner/creds");
  if (!TEST_WAIT_FOR (refused_at (fd, "creds"), 3000))
    {
      text = read_at (fd, "creds");
      fail_msg ("creds below the moved source was not refused within 3 s (%s)",
                text != NULL ? "it read" : g_strerror (errno));
    }
  close (fd);
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
}

/* The sandbox renames the source's directory itself, through the mount:
 * the alias is refused (the view reports its own renames), and the
 * directory works at its new path. */
MFX_CASE (test_source_moved_through_the_view)
{
  g_autofree char *text = NULL;
  int fd;

  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  fd = mount_sources_holding (fx, "/alias", "/src/inner", "aliased");
  assert_int_equal (rename (mfx_in_mount (fx, "/src/inner"), mfx_in_mount (fx, "/src/moved")), 0);
  assert_refused_soon (fd, "f.txt");
  close (fd);
  text = test_read_file (mfx_in_mount (fx, "/src/moved/f.txt"));
  assert_non_null (text);
  assert_string_equal (text, "aliased");
}

/* The source moves before anything looked at its mount: the first
 * lookup, once the check has run, is refused too. */
MFX_CASE (test_source_moved_before_first_use)
{
  g_autofree char *log = NULL;
  struct stat st;

  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  mfx_mkdir (fx, "/home/ws");
  mfx_mkdir (fx, "/secret");
  mfx_write (fx, "/src/inner/f.txt", "aliased");
  mfx_mount (fx, sources_policy, NULL);
  host_rename (fx, "/src/inner", "/secret/inner");
  mfx_write (fx, "/secret/inner/creds", "the host's secret");
  mfx_assert_host_readable (fx, "/secret/inner/creds");
  /* the check runs on the watcher's event (the directories on the way are
   * watched from the start); give it the time a delivery takes */
  g_usleep (500 * 1000);
  assert_errno_is (open (mfx_in_mount (fx, "/alias/creds"), O_RDONLY | O_CLOEXEC), EACCES);
  assert_errno_is (stat (mfx_in_mount (fx, "/alias/f.txt"), &st), EACCES);
  mfx_unmount (fx);
  log = mfx_log (fx);
  if (strstr (log, source_rule) == NULL)
    fail_msg ("no refusal with %s in the log:\n%s", source_rule, log);
}

/* --- mounts the host moves ----------------------------------------------------

 * A mount moved (mount --move), or taken off and made elsewhere, makes no
 * name event.  The test's host tree becomes a private bind mount of
 * itself (a mount below a shared one can't be moved), a tmpfs is mounted
 * at FROM and filled, the mount made with POLICY, REL held (its f.txt
 * read); then the tmpfs moves to TO and the host writes creds there: the
 * held descriptor is refused within 1 s.  Every mount is taken off again,
 * also when it fails. */
static void
mount_moved (MFx *fx, const char *policy, const char *rel, const char *from, const char *to)
{
  g_autofree char *h = mfx_h (fx, "");
  g_autofree char *src = mfx_h (fx, from);
  g_autofree char *dst = mfx_h (fx, to);
  g_autofree char *file = g_strconcat (from, "/f.txt", NULL);
  g_autofree char *creds = g_strconcat (to, "/creds", NULL);
  bool refused;
  int fd;

  mfx_mkdir (fx, "/home/ws");
  mfx_mkdir (fx, from);
  mfx_mkdir (fx, to);
  if (mount (h, h, NULL, MS_BIND, NULL) != 0)
    fail_msg ("bind-mount %s on itself: %s", h, g_strerror (errno));
  if (mount (NULL, h, NULL, MS_PRIVATE, NULL) != 0 || mount ("tmpfs", src, "tmpfs", 0, "size=1m") != 0)
    {
      int e = errno;
      umount2 (h, MNT_DETACH);
      fail_msg ("a private tmpfs at %s: %s", src, g_strerror (e));
    }
  mfx_write (fx, file, "mounted");
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  mfx_mount (fx, policy, NULL);
  fd = hold_reading (fx, rel, "mounted");
  refused = mount (src, dst, NULL, MS_MOVE, NULL) == 0;
  if (refused)
    {
      mfx_write (fx, creds, "the host's secret");
      mfx_assert_host_readable (fx, creds);
      refused = TEST_WAIT_FOR (refused_at (fd, "creds"), 1000);
    }
  else
    g_printerr ("mount --move %s %s: %s\n", src, dst, g_strerror (errno));
  close (fd);
  mfx_unmount (fx);
  umount2 (dst, MNT_DETACH);
  umount2 (src, MNT_DETACH);
  umount2 (h, MNT_DETACH);
  if (!refused)
    fail_msg ("%s still read what the host wrote in %s after its mount moved there", rel, to);
}

/* A bind mount of a directory of the same filesystem (its root has its
 * parent's device number) in the workspace, held, then taken off by the
 * host (umount -l): the held directory is the hidden one it showed, where
 * the host writes next. */
MFX_CASE (test_workspace_bind_mount_taken_off)
{
  g_autofree char *store = mfx_h (fx, "/secret/store");
  g_autofree char *bm = mfx_h (fx, "/ws/bm");
  bool refused;
  int fd;

  mfx_mkdir (fx, "/ws/bm");
  mfx_write (fx, "/secret/store/f.txt", "bound");
  if (mount (store, bm, NULL, MS_BIND, NULL) != 0)
    fail_msg ("bind-mount %s at %s: %s", store, bm, g_strerror (errno));
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  mfx_mount (fx, policy_text, NULL);
  fd = hold_reading (fx, "/ws/bm", "bound");
  refused = umount2 (bm, MNT_DETACH) == 0;
  if (refused)
    {
      mfx_write (fx, "/secret/store/creds", "the host's secret");
      mfx_assert_host_readable (fx, "/secret/store/creds");
      refused = TEST_WAIT_FOR (refused_at (fd, "creds"), 1000);
    }
  close (fd);
  mfx_unmount (fx);
  umount2 (bm, MNT_DETACH);
  if (!refused)
    fail_msg ("the held bind mount's directory still read what the host wrote in secret/store after it was taken off");
}

/* The mount a rule's source is moved into a denied place. */
MFX_CASE (test_source_mount_moved)
{
  mount_moved (fx, sources_policy, "/alias", "/src/inner", "/secret/inner");
}

/* A mount in the workspace (not a source: a mount's root the view shows
 * below its parent) moved into a denied place. */
MFX_CASE (test_workspace_mount_moved)
{
  mount_moved (fx, policy_text, "/ws/data", "/ws/data", "/secret/data");
}

MFX_DEFINE_MAIN (MFX_TEST (test_moved_into_denied), MFX_TEST (test_moved_into_denied_events_lost),
                 MFX_TEST (test_moved_past_the_watchers_budget), MFX_TEST (test_moved_within_workspace),
                 MFX_TEST (test_own_rename_keeps_held), MFX_TEST (test_lost_events_keep_mount_points),
                 MFX_TEST (test_source_moved_into_denied), MFX_TEST (test_source_ancestor_moved_events_lost),
                 MFX_TEST (test_source_moved_unwatched), MFX_TEST (test_source_moved_through_the_view),
                 MFX_TEST (test_source_moved_before_first_use), MFX_TEST (test_source_mount_moved),
                 MFX_TEST (test_workspace_mount_moved), MFX_TEST (test_source_ancestor_replaced_by_link),
                 MFX_TEST (test_moved_far_above_past_the_watchers_budget),
                 MFX_TEST (test_workspace_bind_mount_taken_off))
