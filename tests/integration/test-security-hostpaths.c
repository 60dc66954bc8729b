/* Adversarial tests: the host paths fusebox writes in, creates in or mounts
 * over, when another user can change them.  A root caller given a path in
 * /tmp, or a state directory in a shared HOME, would otherwise write its
 * runs where that user chose, hand its sandbox their files as its private
 * /tmp, or mount the view over a directory a link of theirs names.
 *
 *  - run --run-dir: an empty directory another user made ready is refused,
 *    and so is one below a directory of theirs; nothing is written there.
 *  - The state directory (XDG_STATE_HOME) of another user: run, run
 *    --session and log (the newest run) refuse it; nothing is made there.
 *  - mount on a path through another user's directory, whose last part is
 *    their link to a directory of root's: refused, nothing mounted there.
 *  - mount on a path a sandbox exchanges with its link in a loop while
 *    fusebox mounts: a mount that landed on the link's target is taken off
 *    before it serves; the view is never left there.
 *  - mount --log in another user's directory: refused.
 *  - The same commands with directories of the caller's (and /tmp-like
 *    sticky ones) work: the checks refuse only what they should.
 * "Another user" is nobody (65534): the directories are made by root and
 * given to it, which is what its own mkdir would leave.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include "tests/lib/test-run.h"

#include <grp.h>
#include <pwd.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define OTHER_UID 65534

/* DIR, made with MODE and given to the other user. */
static char *
other_dir (RFx *fx, const char *name, mode_t mode)
{
  char *dir = g_build_filename (fx->tmp, name, NULL);

  assert_int_equal (g_mkdir_with_parents (dir, 0700), 0);
  assert_int_equal (chmod (dir, mode), 0);
  assert_int_equal (chown (dir, OTHER_UID, OTHER_UID), 0);
  test_assert_host_readable (dir);
  return dir;
}

/* Whether DIR is a mount point in our mount namespace; one found there is
 * detached (the test fails, and leaves no mount behind). */
static bool
was_mounted (const char *dir)
{
  g_autofree char *info = NULL;
  g_autofree char *needle = g_strdup_printf (" %s ", dir);
  bool mounted;

  assert_true (g_file_get_contents ("/proc/self/mountinfo", &info, NULL, NULL));
  mounted = strstr (info, needle) != NULL;
  if (mounted)
    umount2 (dir, MNT_DETACH);
  return mounted;
}

/* The same for NAME in the workspace, which may be a link: a mount on the
 * directory it names now is detached, never one where a link leads. */
static bool
was_mounted_nofollow (const char *name)
{
  g_autofree char *info = NULL;
  g_autofree char *needle = g_strdup_printf (" %s ", name);

  assert_true (g_file_get_contents ("/proc/self/mountinfo", &info, NULL, NULL));
  return strstr (info, needle) != NULL && umount2 (name, MNT_DETACH | UMOUNT_NOFOLLOW) == 0;
}

static void
assert_refused (RfxResult *res, int status, const char *needle)
{
  if (res->status != status || strstr (res->err, needle) == NULL)
    fail_msg ("exit %d, want %d, and stderr saying '%s'\nstderr:\n%s", res->status, status, needle, res->err);
}

RFX_CASE (test_run_dir_of_another_user)
{
  RfxResult made_ready = { 0 }, below = { 0 }, mine = { 0 };
  g_autofree char *ready = other_dir (fx, "ready", 0777);
  g_autofree char *theirs = other_dir (fx, "theirs", 0755);
  g_autofree char *below_dir = g_build_filename (theirs, "run", NULL);
  g_autofree char *mine_dir = g_build_filename (fx->tmp, "mine", NULL);
  g_autofree char *ready_policy = g_build_filename (ready, "policy.json", NULL);
  g_autofree char *mine_log = g_build_filename (mine_dir, "access.jsonl", NULL);
  g_autofree char *sticky_dir = g_build_filename (fx->tmp, "shared-scratch", NULL);
  RfxResult sticky = { 0 };

  /* an empty directory of theirs, 0777: root could chmod it, but it stays theirs */
  rfx_run (fx, &made_ready, "--run-dir", ready, "--", "true", NULL);
  assert_refused (&made_ready, 125, "is not yours (owner uid 65534");
  assert_false (g_file_test (ready_policy, G_FILE_TEST_EXISTS));

  /* below a directory of theirs: they could move the run directory away */
  assert_int_equal (mkdir (below_dir, 0700), 0);
  rfx_run (fx, &below, "--run-dir", below_dir, "--", "true", NULL);
  assert_refused (&below, 125, "belongs to another user");

  /* an empty sticky directory of root's, open to all (as /dev/shm): others
   * may make names in it between its check and its use */
  assert_int_equal (mkdir (sticky_dir, 01777), 0);
  assert_int_equal (chmod (sticky_dir, 01777), 0);
  rfx_run (fx, &sticky, "--run-dir", sticky_dir, "--", "true", NULL);
  assert_refused (&sticky, 125, "is writable by other users");

  /* the same with a directory of ours works */
  rfx_run (fx, &mine, "--run-dir", mine_dir, "--", "true", NULL);
  assert_int_equal (mine.status, 0);
  test_assert_host_readable (mine_log);

  rfx_result_clear (&made_ready);
  rfx_result_clear (&sticky);
  rfx_result_clear (&below);
  rfx_result_clear (&mine);
}

RFX_CASE (test_state_of_another_user)
{
  RfxResult run = { 0 }, session = { 0 }, log = { 0 }, sticky = { 0 };
  g_autofree char *theirs = other_dir (fx, "their-state", 0777);
  g_autofree char *tmp_like = g_build_filename (fx->tmp, "tmp-like", NULL);
  g_autofree char *group_other = g_build_filename (fx->tmp, "group-other", NULL);
  g_autofree char *group_mine = g_build_filename (fx->tmp, "group-mine", NULL);
  RfxResult grp = { 0 }, upg = { 0 };
  g_autofree char *made = g_build_filename (theirs, "fusebox", NULL);
  g_autofree char *inner = g_build_filename (theirs, "inner", NULL);
  g_autofree char *dotlink = g_build_filename (fx->tmp, "their-state-link", NULL);
  RfxResult dotdot = { 0 };

  g_free (fx->state);
  fx->state = g_strdup (theirs);
  rfx_run (fx, &run, "--", "true", NULL);
  assert_refused (&run, 125, "not out of other users' reach");
  rfx_run (fx, &session, "--session", "hostpaths", "--", "true", NULL);
  assert_refused (&session, 125, "not out of other users' reach");
  rfx_fusebox (fx, &log, "log", NULL);
  assert_refused (&log, 1, "not out of other users' reach");
  assert_false (g_file_test (made, G_FILE_TEST_EXISTS));

  /* their link, then "..": the state lands in the parent of the link's
   * target (theirs), whatever the text "LINK/.." seems to name */
  assert_int_equal (mkdir (inner, 0700), 0);
  assert_int_equal (chown (inner, OTHER_UID, OTHER_UID), 0);
  assert_int_equal (symlink (inner, dotlink), 0);
  assert_int_equal (lchown (dotlink, OTHER_UID, OTHER_UID), 0);
  g_free (fx->state);
  fx->state = g_build_filename (dotlink, "..", NULL);
  rfx_run (fx, &dotdot, "--", "true", NULL);
  assert_refused (&dotdot, 125, "is a symbolic link of another user's");
  assert_false (g_file_test (made, G_FILE_TEST_EXISTS));

  /* group-writable: refused when the group is another's, fine when it is
   * the caller's private group (a umask of 002 makes every directory so) */
  assert_int_equal (mkdir (group_other, 0775), 0);
  assert_int_equal (chmod (group_other, 0775), 0);
  assert_int_equal (chown (group_other, getuid (), OTHER_UID), 0);
  g_free (fx->state);
  fx->state = g_build_filename (group_other, "state", NULL);
  rfx_run (fx, &grp, "--", "true", NULL);
  assert_refused (&grp, 125, "is writable by other users");
  {
    struct passwd *pw = getpwuid (getuid ());
    struct group *gr = getgrgid (getgid ());
    bool private_group = pw != NULL && gr != NULL && strcmp (pw->pw_name, gr->gr_name) == 0 &&
                         (gr->gr_mem[0] == NULL || (strcmp (gr->gr_mem[0], pw->pw_name) == 0 && gr->gr_mem[1] == NULL));

    assert_int_equal (mkdir (group_mine, 0775), 0);
    assert_int_equal (chmod (group_mine, 0775), 0);
    assert_int_equal (chown (group_mine, getuid (), getgid ()), 0);
    g_free (fx->state);
    fx->state = g_build_filename (group_mine, "state", NULL);
    rfx_run (fx, &upg, "--", "true", NULL);
    if (private_group)
      assert_int_equal (upg.status, 0);
    else
      assert_refused (&upg, 125, "is writable by other users");
  }

  /* a sticky, world-writable directory of root's (as /tmp) holding ours: fine */
  assert_int_equal (mkdir (tmp_like, 01777), 0);
  assert_int_equal (chmod (tmp_like, 01777), 0);
  g_free (fx->state);
  fx->state = g_build_filename (tmp_like, "state", NULL);
  rfx_run (fx, &sticky, "--", "true", NULL);
  assert_int_equal (sticky.status, 0);

  rfx_result_clear (&run);
  rfx_result_clear (&dotdot);
  rfx_result_clear (&session);
  rfx_result_clear (&log);
  rfx_result_clear (&sticky);
  rfx_result_clear (&grp);
  rfx_result_clear (&upg);
}

RFX_CASE (test_mount_through_another_users_link)
{
  RfxResult linked = { 0 }, log_there = { 0 };
  g_autofree char *theirs = other_dir (fx, "their-dir", 0755);
  g_autofree char *target = g_build_filename (fx->tmp, "roots", NULL);
  g_autofree char *kept = g_build_filename (target, "kept", NULL);
  g_autofree char *link = g_build_filename (theirs, "mnt", NULL);
  g_autofree char *mnt = g_build_filename (fx->tmp, "mnt", NULL);
  g_autofree char *their_log = g_build_filename (theirs, "x.jsonl", NULL);
  g_autofree char *sub = g_build_filename (target, "sub", NULL);
  g_autofree char *dotlink = g_build_filename (fx->tmp, "their-dotlink", NULL);
  g_autofree char *dotdot_path = g_build_filename (dotlink, "..", NULL);
  RfxResult dotdot = { 0 };

  /* a directory of root's, and their link to it where root was told to mount */
  assert_int_equal (mkdir (target, 0700), 0);
  test_write (kept, "root's\n", 0600);
  test_assert_host_readable (kept);
  assert_int_equal (symlink (target, link), 0);
  assert_int_equal (lchown (link, OTHER_UID, OTHER_UID), 0);

  rfx_fusebox (fx, &linked, "mount", link, NULL);
  assert_false (was_mounted (target));
  assert_refused (&linked, 1, "not out of other users' reach");
  test_assert_host_readable (kept);

  /* their link and "..": the kernel takes it to the link's target's
   * parent, not to the directory that holds the link */
  assert_int_equal (mkdir (sub, 0700), 0);
  assert_int_equal (symlink (sub, dotlink), 0);
  assert_int_equal (lchown (dotlink, OTHER_UID, OTHER_UID), 0);
  rfx_fusebox (fx, &dotdot, "mount", dotdot_path, NULL);
  assert_false (was_mounted (target));
  assert_refused (&dotdot, 1, "is a symbolic link of another user's");

  /* --log in a directory not made yet: one made after the check could be theirs */
  {
    g_autofree char *missing_log = g_build_filename (fx->tmp, "not-made", "x.jsonl", NULL);
    RfxResult missing = { 0 };

    assert_int_equal (mkdir (mnt, 0700), 0);
    rfx_fusebox (fx, &missing, "mount", "--log", missing_log, mnt, NULL);
    assert_false (was_mounted (mnt));
    assert_refused (&missing, 1, "No such file or directory; give a file in a directory that exists");
    rfx_result_clear (&missing);
  }

  /* --log in their directory: they could swap its rotated files */
  rfx_fusebox (fx, &log_there, "mount", "--log", their_log, mnt, NULL);
  assert_false (was_mounted (mnt));
  assert_refused (&log_there, 1, "no other user may write on the way");
  assert_false (g_file_test (their_log, G_FILE_TEST_EXISTS));

  rfx_result_clear (&linked);
  rfx_result_clear (&dotdot);
  rfx_result_clear (&log_there);
}

/* A sandbox makes NAME in its workspace a link to TO; root's `fusebox
 * mount MNT` is then refused, saying WHY, and COVERED (a root-only
 * directory of root's file "kept") is left as it was, not mounted over. */
static void
refused_through_planted_link (RFx *fx, const char *name, const char *to, const char *mnt, const char *covered,
                              const char *why)
{
  g_autofree char *kept = g_build_filename (covered, "kept", NULL);
  g_autofree char *plant = g_strdup_printf ("ln -s %s %s && echo planted", to, name);
  RfxResult r = { 0 };

  test_write (kept, "root's\n", 0600);
  test_assert_host_readable (kept);
  rfx_run (fx, &r, "--", "/bin/sh", "-c", plant, NULL);
  assert_string_equal (r.out, "planted\n");
  rfx_result_clear (&r);
  rfx_fusebox (fx, &r, "mount", mnt, NULL);
  assert_false (was_mounted (covered));
  assert_refused (&r, 1, why);
  rfx_result_clear (&r);
  test_assert_host_readable (kept);
}

/* A mount point that a sandbox made a link (to a root-only directory,
 * standing in for /etc): the link is the caller's, as a sandbox's files
 * are, so its owner says nothing.  The mount would have covered the
 * directory it leads to; a link as the mount point is refused. */
RFX_CASE (test_mount_point_link_from_a_sandbox)
{
  g_autofree char *target = g_build_filename (fx->tmp, "root-only", NULL);
  g_autofree char *link = g_build_filename (fx->ws, "view", NULL);
  RfxResult r = { 0 };

  assert_int_equal (mkdir (target, 0700), 0);
  refused_through_planted_link (fx, "view", target, link, target, "is a symbolic link (to");
  /* a link on the way instead, to a root-only directory holding one of the
   * mount point's name: refused, nothing mounted there */
  {
    g_autofree char *parent = g_build_filename (fx->tmp, "root-only-parent", NULL);
    g_autofree char *covered = g_build_filename (parent, "mnt", NULL);
    g_autofree char *through = g_build_filename (fx->ws, "sub", "mnt", NULL);

    assert_int_equal (mkdir (parent, 0700), 0);
    assert_int_equal (mkdir (covered, 0700), 0);
    refused_through_planted_link (fx, "sub", parent, through, covered, "passes through a symbolic link");
  }
  /* the same with a trailing slash, which names the link's target */
  {
    g_autofree char *slashed = g_strconcat (link, "/", NULL);
    rfx_fusebox (fx, &r, "mount", slashed, NULL);
    assert_false (was_mounted (target));
    assert_refused (&r, 1, "is a symbolic link (to");
    rfx_result_clear (&r);
  }
}

/* The same link, put in place of the mount point between fusebox's checks
 * and the mount: a sandbox that sees the mount point's directory exchanges
 * it with its link in a loop (here the test does, as the sandbox's daemon
 * would for it).  The mount is made by path (by fusermount3), so some
 * attempts land on the directory the link leads to: fusebox finds its
 * mount there before it serves anything, takes it off and says so.  No
 * attempt may leave the view over that directory. */
RFX_CASE (test_mount_point_swapped_while_mounting)
{
  g_autofree char *target = g_build_filename (fx->tmp, "root-only", NULL);
  g_autofree char *kept = g_build_filename (target, "kept", NULL);
  g_autofree char *view = g_build_filename (fx->ws, "view", NULL);
  g_autofree char *alt = g_build_filename (fx->ws, "alt", NULL);
  guint mounted = 0, moved = 0, refused = 0;

  assert_int_equal (mkdir (target, 0700), 0);
  test_write (kept, "root's\n", 0600);
  test_assert_host_readable (kept);
  assert_int_equal (mkdir (view, 0755), 0);
  assert_int_equal (symlink (target, alt), 0);

  for (int i = 0; i < 200; i++)
    {
      RfxResult r = { 0 };
      TestExchanger *x = test_exchanger_start (view, alt);
      struct stat st;

      rfx_fusebox (fx, &r, "mount", view, NULL);
      test_exchanger_stop (x);
      if (was_mounted (target))
        fail_msg ("attempt %d: the view was left over %s (exit %d)\nstderr:\n%s", i, target, r.status, r.err);
      test_assert_host_readable (kept);
      if (r.status == 0)
        {
          /* on the directory checked: at its name, or at the other one when
           * an exchange begun before the mount (the kernel looks for a mount
           * point as a rename starts) ended after it */
          if (!was_mounted_nofollow (view) && !was_mounted_nofollow (alt))
            fail_msg ("attempt %d: exit 0, but mounted neither at %s nor at %s", i, view, alt);
          mounted++;
        }
      else if (strstr (r.err, "was replaced while it was being mounted (said above)") != NULL)
        {
          assert_int_equal (r.status, 1);
          moved++;
        }
      else
        {
          /* the checks saw the link ("is a symbolic link", "became a
           * symbolic link while it was checked") or the directory gone, or
           * fusermount3 failed on what it found */
          if (r.status != 1 || strstr (r.err, "fusebox: mount: ") == NULL)
            fail_msg ("attempt %d: exit %d, want 1 and fusebox's refusal\nstderr:\n%s", i, r.status, r.err);
          refused++;
        }
      /* the directory back at its name for the next attempt */
      if (lstat (view, &st) == 0 && S_ISLNK (st.st_mode))
        assert_int_equal (syscall (SYS_renameat2, AT_FDCWD, view, AT_FDCWD, alt, RENAME_EXCHANGE), 0);
      rfx_result_clear (&r);
    }
  print_message ("# 200 attempts: %u mounted, %u landed elsewhere and taken off, %u refused\n", mounted, moved,
                 refused);
}

/* `fusebox mount MNT`, which must work: its daemon's pid, from the
 * command's "kill PID" hint.  R keeps the command's output. */
static int
mount_daemon (RFx *fx, RfxResult *r, const char *mnt)
{
  const char *kill_at;
  int pid = 0;

  rfx_fusebox (fx, r, "mount", mnt, NULL);
  assert_int_equal (r->status, 0);
  kill_at = strstr (r->out, "'kill ");
  assert_non_null (kill_at);
  assert_int_equal (sscanf (kill_at, "'kill %d'", &pid), 1);
  assert_true (test_is_mounted (mnt));
  return pid;
}

/* A mount's parent moved while it was mounted (a directory holding a mount
 * point may be renamed), a link put in its place to a directory holding a
 * mount of the same name (a tmpfs here): fusebox's end takes off its own
 * mount, where it went, and not that one. */
RFX_CASE (test_mount_stopped_after_its_parent_moved)
{
  g_autofree char *sub = g_build_filename (fx->ws, "sub", NULL);
  g_autofree char *moved = g_build_filename (fx->ws, "moved", NULL);
  g_autofree char *mnt = g_build_filename (sub, "mnt", NULL);
  g_autofree char *moved_mnt = g_build_filename (moved, "mnt", NULL);
  g_autofree char *victim = g_build_filename (fx->tmp, "victim", NULL);
  g_autofree char *victim_mnt = g_build_filename (victim, "mnt", NULL);
  RfxResult r = { 0 };
  int pid;

  assert_int_equal (g_mkdir_with_parents (mnt, 0755), 0);
  assert_int_equal (g_mkdir_with_parents (victim_mnt, 0700), 0);
  /* the view first: a failed mount then leaves no tmpfs behind */
  pid = mount_daemon (fx, &r, mnt);
  assert_int_equal (mount ("tmpfs", victim_mnt, "tmpfs", 0, "size=1m"), 0);
  assert_true (test_is_mounted (victim_mnt));

  /* what the sandbox's daemon does for it on the host */
  assert_int_equal (rename (sub, moved), 0);
  assert_int_equal (symlink (victim, sub), 0);
  assert_true (test_is_mounted (moved_mnt));

  assert_int_equal (kill (pid, SIGTERM), 0);
  for (int i = 0; i < 200 && test_pid_alive (pid); i++)
    g_usleep (50 * 1000);
  assert_false (test_pid_alive (pid));
  {
    bool victim_kept = test_is_mounted (victim_mnt), own_left = test_is_mounted (moved_mnt);

    /* nothing left behind, whatever failed */
    umount2 (moved_mnt, MNT_DETACH);
    umount2 (victim_mnt, MNT_DETACH);
    if (!victim_kept)
      fail_msg ("fusebox's end detached the tmpfs at %s, which the link led to", victim_mnt);
    if (own_left)
      fail_msg ("fusebox's end left its own mount at %s", moved_mnt);
  }
  rfx_result_clear (&r);
}

/* The same move, then the daemon killed (SIGKILL): the unmount watcher
 * finds the mount where it went, by its tag, and takes it off; fusermount3
 * looks only where it mounted.  Before, a dead mount stayed in the
 * workspace (ENOTCONN) with nothing left to remove it. */
RFX_CASE (test_mount_killed_after_its_parent_moved)
{
  g_autofree char *a = g_build_filename (fx->ws, "a", NULL);
  g_autofree char *b = g_build_filename (fx->ws, "b", NULL);
  g_autofree char *mnt = g_build_filename (a, "mnt", NULL);
  g_autofree char *moved_mnt = g_build_filename (b, "mnt", NULL);
  RfxResult r = { 0 };
  bool left = true;
  int pid;

  assert_int_equal (g_mkdir_with_parents (mnt, 0755), 0);
  pid = mount_daemon (fx, &r, mnt);
  /* what the sandbox's daemon does for it on the host */
  assert_int_equal (rename (a, b), 0);
  assert_true (test_is_mounted (moved_mnt));

  assert_int_equal (kill (pid, SIGKILL), 0);
  for (int i = 0; i < 200 && left; i++)
    {
      g_usleep (50 * 1000);
      left = test_is_mounted (moved_mnt);
    }
  if (left)
    {
      umount2 (moved_mnt, MNT_DETACH);
      fail_msg ("the killed daemon's mount stayed at %s, where its parent was moved", moved_mnt);
    }
  rfx_result_clear (&r);
}

/* The source (the mount's tag, "fusebox:HEX") of the mount at MNT, from
 * mountinfo: what finds it wherever it goes. */
static char *
mount_tag (const char *mnt)
{
  g_autofree char *info = NULL;
  g_autofree char *needle = g_strdup_printf (" %s ", mnt);
  const char *line, *sep;
  char tag[128];

  assert_true (g_file_get_contents ("/proc/self/mountinfo", &info, NULL, NULL));
  line = strstr (info, needle);
  assert_non_null (line);
  sep = strstr (line, " - fuse");
  assert_non_null (sep);
  assert_int_equal (sscanf (sep, " - %*s %127s", tag), 1);
  assert_true (g_str_has_prefix (tag, "fusebox:"));
  return g_strdup (tag);
}

static bool
tag_mounted (const char *tag)
{
  g_autofree char *info = NULL;
  g_autofree char *needle = g_strdup_printf (" %s ", tag);

  assert_true (g_file_get_contents ("/proc/self/mountinfo", &info, NULL, NULL));
  return strstr (info, needle) != NULL;
}

/* The daemon's own end took its mount off: its run directory's mount.log
 * (where a detached daemon's messages go; R: what `fusebox mount` said)
 * says nothing of a mount it could not take off, which the unmount watcher
 * would then have taken off after it. */
static void
assert_daemon_took_it_off (const RfxResult *r)
{
  const char *at = strstr (r->out, "run directory ");
  g_autofree char *dir = NULL, *log_path = NULL, *log = NULL;

  assert_non_null (at);
  at += strlen ("run directory ");
  dir = g_strndup (at, strcspn (at, "\n"));
  log_path = g_build_filename (dir, "mount.log", NULL);
  if (g_file_get_contents (log_path, &log, NULL, NULL) &&
      (strstr (log, "could not be taken off") != NULL || strstr (log, "still mounted") != NULL))
    fail_msg ("the daemon's end left its mount to the watcher:\n%s", log);
}

/* Wait for PID to end, then for TAG's mount to go (the watcher's work
 * after a SIGKILL): whether it is still mounted 10 s on. */
static bool
left_after_end (int pid, const char *tag)
{
  for (int i = 0; i < 200 && test_pid_alive (pid); i++)
    g_usleep (50 * 1000);
  assert_false (test_pid_alive (pid));
  for (int i = 0; i < 200 && tag_mounted (tag); i++)
    g_usleep (50 * 1000);
  return tag_mounted (tag);
}

/* A chain of directories below DEEP, its path longer than PATH_MAX (20
 * names of 250 bytes): the last one's descriptor. */
static int
deep_chain (const char *deep)
{
  char name[251];
  int dir = open (deep, O_PATH | O_DIRECTORY | O_CLOEXEC);

  assert_true (dir >= 0);
  memset (name, 'd', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  for (int i = 0; i < 20; i++)
    {
      int next;
      assert_int_equal (mkdirat (dir, name, 0755), 0);
      next = openat (dir, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
      assert_true (next >= 0);
      close (dir);
      dir = next;
    }
  return dir;
}

/* A sandbox moved the mount's parent below a chain of directories, so
 * that the mount's path is longer than PATH_MAX (4096): no path reaches it
 * and mountinfo's can't be opened.  The daemon's end (SIG: SIGTERM), or
 * the watcher after its death (SIGKILL), still takes it off. */
static void
mount_moved_past_path_max (RFx *fx, int sig)
{
  g_autofree char *a = g_build_filename (fx->ws, "a", NULL);
  g_autofree char *mnt = g_build_filename (a, "mnt", NULL);
  g_autofree char *deep = g_build_filename (fx->ws, "deep", NULL);
  g_autofree char *tag = NULL;
  RfxResult r = { 0 };
  int pid, dir;

  assert_int_equal (g_mkdir_with_parents (mnt, 0755), 0);
  assert_int_equal (g_mkdir_with_parents (deep, 0755), 0);
  pid = mount_daemon (fx, &r, mnt);
  tag = mount_tag (mnt);
  dir = deep_chain (deep);
  /* what the sandbox's daemon does for it on the host */
  assert_int_equal (renameat (AT_FDCWD, a, dir, "a"), 0);
  assert_true (tag_mounted (tag));

  assert_int_equal (kill (pid, sig), 0);
  if (left_after_end (pid, tag))
    {
      int fd = openat (dir, "a/mnt", O_PATH | O_DIRECTORY | O_CLOEXEC);
      g_autofree char *proc = g_strdup_printf ("/proc/self/fd/%d", fd);
      umount2 (proc, MNT_DETACH);
      close (fd);
      fail_msg ("the mount (%s) was left where its parent was moved, at a path longer than PATH_MAX (after %s)", tag,
                sig == SIGKILL ? "SIGKILL: the watcher" : "SIGTERM: the daemon");
    }
  if (sig != SIGKILL)
    assert_daemon_took_it_off (&r);
  close (dir);
  rfx_result_clear (&r);
  /* the chain is longer than the fixture's removal reaches */
  {
    int ws = open (fx->ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true (ws >= 0);
    test_rm_deep (ws, "deep");
    close (ws);
  }
}

RFX_CASE (test_mount_stopped_past_path_max)
{
  mount_moved_past_path_max (fx, SIGTERM);
}

RFX_CASE (test_mount_killed_past_path_max)
{
  mount_moved_past_path_max (fx, SIGKILL);
}

/* A sandbox moves the mount point's parent past PATH_MAX between the mount
 * and the daemon's check of where it landed (a delay the daemon takes for
 * the tests): the check finds the mount elsewhere and can't take it off by
 * path, and the command fails; the unmount watcher, which holds the parent
 * since before the mount, takes it off once the daemon is gone. */
RFX_CASE (test_mount_moved_before_its_landing_check)
{
  g_autofree char *a = g_build_filename (fx->ws, "a", NULL);
  g_autofree char *mnt = g_build_filename (a, "mnt", NULL);
  g_autofree char *deep = g_build_filename (fx->ws, "deep", NULL);
  g_autofree char *needle = g_strdup_printf (" %s ", mnt);
  g_autofree char *tag = NULL;
  g_autoptr (GPtrArray) argv = NULL;
  /* the test's HOME and state, as every rfx command's (not the caller's) */
  g_auto (GStrv) env = g_environ_setenv (rfx_env (fx), "FUSEBOX_TEST_MOUNT_CHECK_DELAY_MS", "2000", TRUE);
  g_autoptr (GError) error = NULL;
  GPid child;
  int dir, status = 0;

  assert_int_equal (g_mkdir_with_parents (mnt, 0755), 0);
  assert_int_equal (g_mkdir_with_parents (deep, 0755), 0);
  dir = deep_chain (deep);
  argv = test_fusebox_argv ((const char *const[]){ "mount", mnt, NULL }, NULL);
  if (!g_spawn_async (NULL, (char **)argv->pdata, env,
                      G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                      &child, &error))
    fail_msg ("can't start fusebox mount: %s", error->message);
  /* mounted, not checked yet */
  for (int i = 0; i < 200 && tag == NULL; i++)
    {
      g_autofree char *info = NULL;
      if (g_file_get_contents ("/proc/self/mountinfo", &info, NULL, NULL) && strstr (info, needle) != NULL)
        tag = mount_tag (mnt);
      else
        g_usleep (10 * 1000);
    }
  if (tag == NULL)
    fail_msg ("fusebox mount never mounted %s", mnt);
  assert_int_equal (renameat (AT_FDCWD, a, dir, "a"), 0);
  assert_int_equal (waitpid (child, &status, 0), child);
  g_spawn_close_pid (child);
  /* the command says it failed */
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) != 0);
  for (int i = 0; i < 200 && tag_mounted (tag); i++)
    g_usleep (50 * 1000);
  if (tag_mounted (tag))
    {
      int fd = openat (dir, "a/mnt", O_PATH | O_DIRECTORY | O_CLOEXEC);
      g_autofree char *proc = g_strdup_printf ("/proc/self/fd/%d", fd);
      umount2 (proc, MNT_DETACH);
      close (fd);
      fail_msg ("the mount (%s) moved past PATH_MAX before the daemon's landing check was left 10 s after", tag);
    }
  close (dir);
  {
    int ws = open (fx->ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true (ws >= 0);
    test_rm_deep (ws, "deep");
    close (ws);
  }
}

/* The daemon stopped (SIGTERM) while a sandbox exchanges the mount's
 * parent with an empty directory in a tight loop: whatever path mountinfo
 * shows names nothing half the time it is opened.  Ten rounds; none may
 * leave its mount, to the watcher or for good. */
RFX_CASE (test_mount_stopped_while_its_parent_is_exchanged)
{
  g_autofree char *p = g_build_filename (fx->ws, "p", NULL);
  g_autofree char *q = g_build_filename (fx->ws, "q", NULL);
  g_autofree char *mnt = g_build_filename (p, "mnt", NULL);
  g_autofree char *q_mnt = g_build_filename (q, "mnt", NULL);
  guint left = 0;

  assert_int_equal (g_mkdir_with_parents (mnt, 0755), 0);
  assert_int_equal (g_mkdir_with_parents (q, 0755), 0);
  for (int round = 0; round < 10; round++)
    {
      g_autofree char *tag = NULL;
      TestExchanger *x;
      RfxResult r = { 0 };
      int pid = mount_daemon (fx, &r, mnt);

      tag = mount_tag (mnt);
      x = test_exchanger_start (p, q);
      g_usleep (20 * 1000);
      assert_int_equal (kill (pid, SIGTERM), 0);
      for (int i = 0; i < 200 && test_pid_alive (pid); i++)
        g_usleep (50 * 1000);
      test_exchanger_stop (x);
      if (left_after_end (pid, tag))
        {
          left++;
          umount2 (mnt, MNT_DETACH);
          umount2 (q_mnt, MNT_DETACH);
        }
      assert_daemon_took_it_off (&r);
      /* the mount point back at its name for the next round */
      if (!g_file_test (mnt, G_FILE_TEST_IS_DIR))
        assert_int_equal (syscall (SYS_renameat2, AT_FDCWD, p, AT_FDCWD, q, RENAME_EXCHANGE), 0);
      rfx_result_clear (&r);
    }
  if (left > 0)
    fail_msg ("%u of 10 stops left their mount while the parent was being exchanged", left);
}

/* Someone else unmounts the view (root's `umount`, as `fusermount3 -u`
 * does) and mounts a tmpfs on the same directory at once: the kernel hands
 * the freed device number to the next mount, so the tmpfs mostly has the
 * view's.  The daemon's end, which finds its mount through the parent it
 * holds, must not take the tmpfs for it.  Ten rounds. */
RFX_CASE (test_mount_unmounted_and_replaced)
{
  g_autofree char *mnt = g_build_filename (fx->ws, "a", "mnt", NULL);
  guint same_dev = 0;

  assert_int_equal (g_mkdir_with_parents (mnt, 0755), 0);
  for (int round = 0; round < 10; round++)
    {
      RfxResult r = { 0 };
      int pid = mount_daemon (fx, &r, mnt);
      struct stat before, after;

      assert_int_equal (stat (mnt, &before), 0);
      assert_int_equal (umount2 (mnt, 0), 0);
      assert_int_equal (mount ("fusebox-test-tmpfs", mnt, "tmpfs", 0, "size=1m"), 0);
      assert_int_equal (stat (mnt, &after), 0);
      same_dev += before.st_dev == after.st_dev;
      for (int i = 0; i < 200 && test_pid_alive (pid); i++)
        g_usleep (50 * 1000);
      assert_false (test_pid_alive (pid));
      g_usleep (200 * 1000); /* the watcher, told or not */
      if (!test_is_mounted (mnt))
        fail_msg ("round %d: the tmpfs mounted after the view was unmounted was detached by fusebox (%s device)", round,
                  before.st_dev == after.st_dev ? "the view's" : "another");
      assert_int_equal (umount2 (mnt, 0), 0);
      rfx_result_clear (&r);
    }
  print_message ("# 10 rounds: the tmpfs had the view's device number in %u\n", same_dev);
}

/* A view's tag is random but not secret: anyone reads it in mountinfo,
 * and a user who may mount FUSE can give a mount of theirs the same source
 * (`fusermount3 -o fsname=TAG`).  Such a copy, another user's (uid 1000
 * here; its connection ended at once, so that nothing waits on it), is not
 * the view: the daemon's end takes the view off, leaves the copy, and says
 * nothing of a mount left behind (it said "still mounted" and ended with
 * status 1, pointing the operator at the copy). */
RFX_CASE (test_mount_stop_ignores_a_copied_tag)
{
  g_autofree char *mnt = g_build_filename (fx->ws, "a", "mnt", NULL);
  g_autofree char *copy = g_build_filename (fx->tmp, "copy", NULL);
  g_autofree char *tag = NULL;
  g_autofree char *opts = NULL;
  RfxResult r = { 0 };
  int pid, fuse_fd;

  assert_int_equal (g_mkdir_with_parents (mnt, 0755), 0);
  assert_int_equal (g_mkdir_with_parents (copy, 0755), 0);
  pid = mount_daemon (fx, &r, mnt);
  tag = mount_tag (mnt);
  fuse_fd = open ("/dev/fuse", O_RDWR | O_CLOEXEC);
  assert_true (fuse_fd >= 0);
  opts = g_strdup_printf ("fd=%d,rootmode=40000,user_id=1000,group_id=1000", fuse_fd);
  assert_int_equal (mount (tag, copy, "fuse.fusebox", MS_NOSUID | MS_NODEV, opts), 0);
  close (fuse_fd);
  assert_true (test_is_mounted (copy));
  assert_int_equal (kill (pid, SIGTERM), 0);
  for (int i = 0; i < 200 && test_pid_alive (pid); i++)
    g_usleep (50 * 1000);
  assert_false (test_pid_alive (pid));
  g_usleep (200 * 1000); /* the watcher, told or not */
  if (test_is_mounted (mnt))
    {
      umount2 (mnt, MNT_DETACH);
      umount2 (copy, MNT_DETACH);
      fail_msg ("the view stayed mounted at %s", mnt);
    }
  if (!test_is_mounted (copy))
    fail_msg ("the other user's mount with the view's tag was taken off");
  assert_int_equal (umount2 (copy, MNT_DETACH), 0);
  assert_daemon_took_it_off (&r);
  rfx_result_clear (&r);
}

/* The view hides its own mount point by the path it was made at.  A
 * sandbox renames the parent (`mv a b`), and a host process walks into the
 * mount through the new name, again and again (WS/b/mnt/WS/b/mnt/...):
 * each level was the daemon looking up its own mount on the host, a worker
 * per level waiting on the next, until every worker waited on itself and
 * not even a SIGTERM could end the daemon (on a host without fusectl, as
 * here when it is not mounted).  Its own mount must show blank wherever it
 * is reached, and the daemon stop as usual. */
RFX_CASE (test_mount_not_served_through_itself)
{
  g_autofree char *a = g_build_filename (fx->ws, "a", NULL);
  g_autofree char *b = g_build_filename (fx->ws, "b", NULL);
  g_autofree char *mnt = g_build_filename (a, "mnt", NULL);
  g_autofree char *b_mnt = g_build_filename (b, "mnt", NULL);
  g_autoptr (GString) deep = g_string_new (b_mnt);
  g_autofree char *tag = NULL;
  RfxResult r = { 0 };
  struct stat view_st;
  int pid, status = 0;
  pid_t walker;

  assert_int_equal (g_mkdir_with_parents (mnt, 0755), 0);
  pid = mount_daemon (fx, &r, mnt);
  tag = mount_tag (mnt);
  assert_int_equal (stat (mnt, &view_st), 0);
  /* what the sandbox's daemon does for it on the host */
  assert_int_equal (rename (a, b), 0);
  for (int i = 0; i < 20; i++)
    g_string_append (deep, b_mnt);
  g_string_append (deep, "/etc/hostname");

  /* the walk, in a child: it must end (ENOENT) within 10 s */
  walker = fork ();
  assert_true (walker >= 0);
  if (walker == 0)
    {
      struct stat st;
      _exit (stat (deep->str, &st) == 0 ? 0 : errno == ENOENT ? 3 : 4);
    }
  for (int i = 0; i < 200 && waitpid (walker, &status, WNOHANG) == 0; i++)
    g_usleep (50 * 1000);
  if (waitpid (walker, &status, WNOHANG) == 0)
    {
      /* a daemon whose workers wait on themselves */
      test_fuse_abort (view_st.st_dev);
      umount2 (b_mnt, MNT_DETACH);
      kill (pid, SIGKILL);
      kill (walker, SIGKILL);
      fail_msg ("a walk of %s through the view's own mount, renamed, still waits after 10 s", b_mnt);
    }
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 3); /* the mount, reached inside the view, is blank */

  assert_int_equal (kill (pid, SIGTERM), 0);
  if (left_after_end (pid, tag))
    {
      umount2 (b_mnt, MNT_DETACH);
      fail_msg ("the mount stayed at %s", b_mnt);
    }
  rfx_result_clear (&r);
}

/* Two views, each of the host's /, each reaching the other's mount point:
 * any local user walked A/B/A/B/...: each level took a worker of each
 * daemon, waiting on the other's, until none was left and neither daemon
 * could end, not even killed (without fusectl).  Another view's mount,
 * reached inside a view, is blank, as the view's own is; B itself still
 * serves. */
RFX_CASE (test_mount_not_served_through_another_view)
{
  g_autofree char *a_mnt = g_build_filename (fx->ws, "a", "mnt", NULL);
  g_autofree char *b_mnt = g_build_filename (fx->ws, "b", "mnt", NULL);
  g_autofree char *b_file = g_build_filename (b_mnt, "etc", "hostname", NULL);
  g_autofree char *tag_a = NULL, *tag_b = NULL;
  g_autoptr (GString) deep = g_string_new (a_mnt);
  RfxResult ra = { 0 }, rb = { 0 };
  struct stat a_st, b_st, st;
  int pid_a, pid_b, status = 0;
  pid_t walker;

  assert_int_equal (g_mkdir_with_parents (a_mnt, 0755), 0);
  assert_int_equal (g_mkdir_with_parents (b_mnt, 0755), 0);
  pid_a = mount_daemon (fx, &ra, a_mnt);
  pid_b = mount_daemon (fx, &rb, b_mnt);
  tag_a = mount_tag (a_mnt);
  tag_b = mount_tag (b_mnt);
  assert_int_equal (stat (a_mnt, &a_st), 0);
  assert_int_equal (stat (b_mnt, &b_st), 0);
  assert_int_equal (stat (b_file, &st), 0); /* B serves the host's file */
  for (int i = 0; i < 10; i++)
    {
      g_string_append (deep, b_mnt);
      g_string_append (deep, a_mnt);
    }
  g_string_append (deep, "/etc/hostname");

  walker = fork ();
  assert_true (walker >= 0);
  if (walker == 0)
    _exit (stat (deep->str, &st) == 0 ? 0 : errno == ENOENT ? 3 : 4);
  for (int i = 0; i < 200 && waitpid (walker, &status, WNOHANG) == 0; i++)
    g_usleep (50 * 1000);
  if (waitpid (walker, &status, WNOHANG) == 0)
    {
      test_fuse_abort (a_st.st_dev);
      test_fuse_abort (b_st.st_dev);
      umount2 (a_mnt, MNT_DETACH);
      umount2 (b_mnt, MNT_DETACH);
      kill (pid_a, SIGKILL);
      kill (pid_b, SIGKILL);
      kill (walker, SIGKILL);
      fail_msg ("a walk through two views that reach each other still waits after 10 s");
    }
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 3); /* B, reached inside A, is blank */
  assert_int_equal (stat (b_file, &st), 0);   /* and B still serves */

  assert_int_equal (kill (pid_a, SIGTERM), 0);
  assert_int_equal (kill (pid_b, SIGTERM), 0);
  if (left_after_end (pid_a, tag_a) | left_after_end (pid_b, tag_b))
    {
      umount2 (a_mnt, MNT_DETACH);
      umount2 (b_mnt, MNT_DETACH);
      fail_msg ("a view stayed mounted");
    }
  rfx_result_clear (&ra);
  rfx_result_clear (&rb);
}

RFX_DEFINE_MAIN (NULL, NULL, RFX_TEST (test_run_dir_of_another_user), RFX_TEST (test_mount_point_link_from_a_sandbox),
                 RFX_TEST (test_mount_point_swapped_while_mounting),
                 RFX_TEST (test_mount_stopped_after_its_parent_moved),
                 RFX_TEST (test_mount_killed_after_its_parent_moved), RFX_TEST (test_mount_stopped_past_path_max),
                 RFX_TEST (test_mount_killed_past_path_max), RFX_TEST (test_mount_moved_before_its_landing_check),
                 RFX_TEST (test_mount_stopped_while_its_parent_is_exchanged),
                 RFX_TEST (test_mount_unmounted_and_replaced), RFX_TEST (test_mount_stop_ignores_a_copied_tag),
                 RFX_TEST (test_mount_not_served_through_itself), RFX_TEST (test_mount_not_served_through_another_view),
                 RFX_TEST (test_state_of_another_user), RFX_TEST (test_mount_through_another_users_link))
