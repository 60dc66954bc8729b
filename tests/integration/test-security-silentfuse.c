/* Adversarial tests: another user's FUSE filesystem whose server never
 * answers, mounted where a view reaches it.
 *
 * A view serves the host's tree, mounts included.  Another user who may
 * mount FUSE with allow_other (uid 1000 here) mounts a filesystem whose
 * server never answers (here a connection nobody reads): anything that
 * asks it (a stat not answered from the kernel's cache, a statfs, an
 * extended attribute, an open) waits for good.  A daemon's worker that
 * asked it held the lookups behind it, the whole view was seen to stop,
 * and the daemon could not end until the other server let go.
 *
 * Such a mount must be blank inside the view (an empty directory, as the
 * view's own mount), found from mountinfo without asking it anything; its
 * parent is listed and served as before; a rename whose tree holds it is
 * refused as between filesystems (EXDEV) rather than measured; and the
 * daemon ends as usual while it is still there.  Each step runs in a child
 * with a bound of 10 s, and a test that fails aborts both connections
 * (fusectl): nothing stays hung.
 *
 * What the view does serve it still shows as it is: a FUSE filesystem of
 * the daemon's own user (a server in this test, whose file changes size
 * and whose attributes may be cached for no time) is asked again, so the
 * view never shows the first stat's cached attributes in place of the new.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include "tests/lib/test-mount.h"

#include <dirent.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

static const char policy_text[] = "{ \"version\": 1,\n"
                                  "  \"rules\": [\n"
                                  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" },\n"
                                  "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"the workspace\" } ] }\n";

/* The silent mount of the running test, taken off by the teardown whatever
 * failed (a tree holding it could not be removed: rm would wait on it). */
static struct
{
  char *path;
  int fd;
  dev_t dev;
  dev_t view_dev;
} silent = { NULL, -1, 0, 0 };

static void
silent_take_off (void)
{
  if (silent.path == NULL)
    return;
  test_fuse_abort (silent.dev);
  if (silent.view_dev != 0)
    test_fuse_abort (silent.view_dev);
  if (umount2 (silent.path, MNT_DETACH) < 0)
    print_error ("could not take off the silent mount at %s: %s\n", silent.path, g_strerror (errno));
  close (silent.fd);
  g_clear_pointer (&silent.path, g_free);
  silent.fd = -1;
  silent.dev = silent.view_dev = 0;
}

/* Another user's FUSE filesystem (uid 1000, allow_other) at PATH, whose
 * server never answers: /dev/fuse stays open, and no one reads it. */
static void
silent_mount_as (MFx *fx, const char *path, const char *rootmode)
{
  g_autofree char *opts = NULL;
  struct statx stx;
  struct stat st;

  assert_int_equal (stat (fx->mnt, &st), 0);
  silent.view_dev = st.st_dev;
  silent.fd = open ("/dev/fuse", O_RDWR | O_CLOEXEC);
  assert_true (silent.fd >= 0);
  opts = g_strdup_printf ("fd=%d,rootmode=%s,user_id=1000,group_id=1000,allow_other", silent.fd, rootmode);
  if (mount ("silent", path, "fuse", MS_NOSUID | MS_NODEV, opts) < 0)
    fail_msg ("mount a FUSE filesystem at %s: %s", path, g_strerror (errno));
  silent.path = g_strdup (path);
  /* from what the kernel holds: a stat that asks would wait */
  assert_int_equal (statx (AT_FDCWD, path, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_BASIC_STATS, &stx), 0);
  silent.dev = makedev (stx.stx_dev_major, stx.stx_dev_minor);
}

static void
silent_mount (MFx *fx, const char *path)
{
  silent_mount_as (fx, path, "40000");
}

static void race_release (void);
static void more_abort (void);

static bool
ended_within (pid_t pid, int *status, int ms)
{
  for (int waited = 0; waited < ms; waited += 20)
    {
      if (waitpid (pid, status, WNOHANG) == pid)
        return true;
      g_usleep (20 * 1000);
    }
  return waitpid (pid, status, WNOHANG) == pid;
}

/* FN (ARG) in a child: its exit status, or -1 when it has not ended within
 * MS.  It is then killed; a child whose request a daemon already took
 * waits for the answer even killed, so when it lingers both connections
 * are aborted before it is reaped. */
static int
bounded (int (*fn) (const char *arg), const char *arg, int ms)
{
  pid_t pid = fork ();
  int status = 0;

  assert_true (pid >= 0);
  if (pid == 0)
    _exit (fn (arg));
  if (ended_within (pid, &status, ms))
    return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
  kill (pid, SIGKILL);
  if (!ended_within (pid, &status, 1000))
    {
      test_fuse_abort (silent.dev);
      test_fuse_abort (silent.view_dev);
      more_abort ();
      race_release ();
      waitpid (pid, &status, 0);
    }
  return -1;
}

static int
host_stat (const char *path)
{
  struct stat st;
  return stat (path, &st) == 0 ? 0 : 1;
}

/* Through the view (ARG: the workspace in it): the silent mount is an
 * empty directory, nothing is found below it, and the workspace around it
 * is listed and read. */
static int
view_walk (const char *ws)
{
  g_autofree char *m_silent = g_build_filename (ws, "silent", NULL);
  g_autofree char *m_below = g_build_filename (ws, "silent", "x", NULL);
  g_autofree char *m_beside = g_build_filename (ws, "beside", NULL);
  g_autofree char *text = NULL;
  struct stat st;
  struct dirent *d;
  bool saw_silent = false, saw_beside = false;
  int entries = 0;
  DIR *dir;

  if (stat (m_silent, &st) < 0 || !S_ISDIR (st.st_mode))
    return 2;
  dir = opendir (m_silent);
  if (dir == NULL)
    return 3;
  while ((d = readdir (dir)) != NULL)
    entries += strcmp (d->d_name, ".") != 0 && strcmp (d->d_name, "..") != 0;
  closedir (dir);
  if (entries != 0)
    return 3;
  if (stat (m_below, &st) == 0 || errno != ENOENT)
    return 4;
  /* ls -l of the workspace: each name listed, then stat'ed */
  dir = opendir (ws);
  if (dir == NULL)
    return 5;
  while ((d = readdir (dir)) != NULL)
    {
      if (fstatat (dirfd (dir), d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 5;
      saw_silent |= strcmp (d->d_name, "silent") == 0;
      saw_beside |= strcmp (d->d_name, "beside") == 0;
    }
  closedir (dir);
  if (!saw_silent || !saw_beside)
    return 5;
  if (!g_file_get_contents (m_beside, &text, NULL, NULL) || strcmp (text, "served\n") != 0)
    return 6;
  return 0;
}

/* The host's own stat of the silent mount waits: the threat is real here
 * (a check that can fail). */
static void
assert_silent (MFx *fx)
{
  if (bounded (host_stat, silent.path, 300) != -1)
    fail_msg ("the FUSE mount at %s answered a stat: the test would prove nothing", silent.path);
  (void)fx;
}

MFX_CASE (test_silent_fuse_shown_blank)
{
  g_autofree char *m_ws = NULL;
  int r;

  mfx_write (fx, "/ws/beside", "served\n");
  mfx_mkdir (fx, "/ws/silent");
  mfx_mount (fx, policy_text, NULL);
  silent_mount (fx, mfx_on_host (fx, "/ws/silent"));
  assert_silent (fx);
  m_ws = mfx_m (fx, "/ws");

  r = bounded (view_walk, m_ws, 10000);
  if (r == -1)
    fail_msg ("a walk of %s through the view still waits after 10 s: the view asked the silent mount", m_ws);
  if (r != 0)
    fail_msg ("the walk of %s through the view failed at step %d (2: stat, 3: an empty listing, 4: nothing below, "
              "5: the workspace listed, 6: a file beside it read)",
              m_ws, r);
  /* asked twice: the kernel asks the daemon again (a revalidation) */
  assert_int_equal (bounded (view_walk, m_ws, 10000), 0);

  /* the daemon ends while the silent mount is still there */
  mfx_unmount (fx);
  assert_true (test_is_mounted (silent.path));
  silent_take_off ();
}

static int
view_rename (const char *ws)
{
  g_autofree char *from = g_build_filename (ws, "tree", NULL);
  g_autofree char *to = g_build_filename (ws, "tree-moved-to-a-longer-name", NULL);

  if (rename (from, to) == 0)
    return 2;
  return errno == EXDEV ? 0 : 10 + errno;
}

/* A directory that moves to a longer path is measured first (how deep its
 * tree goes); a tree that holds another filesystem is not measured there
 * (nothing is asked of it): the rename is refused as between filesystems. */
MFX_CASE (test_silent_fuse_in_a_moved_tree)
{
  g_autofree char *m_ws = NULL;
  g_autofree char *h_tree = NULL;
  int r;

  mfx_mkdir (fx, "/ws/tree/sub/silent");
  mfx_write (fx, "/ws/tree/sub/file", "kept\n");
  mfx_mount (fx, policy_text, NULL);
  silent_mount (fx, mfx_on_host (fx, "/ws/tree/sub/silent"));
  assert_silent (fx);
  m_ws = mfx_m (fx, "/ws");
  h_tree = mfx_h (fx, "/ws/tree/sub/file");

  r = bounded (view_rename, m_ws, 10000);
  if (r == -1)
    fail_msg ("a rename of %s/tree through the view still waits after 10 s: the view asked the silent mount", m_ws);
  if (r == 2)
    fail_msg ("%s/tree, holding another user's mount, was renamed", m_ws);
  if (r != 0)
    fail_msg ("the rename of %s/tree failed other than with EXDEV: %s", m_ws, g_strerror (r - 10));
  assert_true (g_file_test (h_tree, G_FILE_TEST_IS_REGULAR));

  mfx_unmount (fx);
  silent_take_off ();
}

static int
view_rename_mounts (const char *ws)
{
  g_autofree char *d = g_build_filename (ws, "r", "d", NULL);
  g_autofree char *silent_at = g_build_filename (ws, "r", "silent", NULL);
  g_autofree char *away = g_build_filename (ws, "r", "away", NULL);

  /* onto the mount point, and the mount point away: both refused as the
   * host would (EBUSY), neither asked */
  if (rename (d, silent_at) == 0)
    return 2;
  if (errno != EBUSY)
    return 10 + errno;
  if (rename (silent_at, away) == 0)
    return 3;
  if (errno != EBUSY)
    return 10 + errno;
  return 0;
}

/* A rename from or onto another user's mount is refused before its fusebox
 * mark (an extended attribute of a directory whose mode is 0700 or less, as
 * a FUSE root's 0000) is read from it. */
MFX_CASE (test_silent_fuse_not_renamed)
{
  g_autofree char *m_ws = NULL;
  g_autofree char *h_d = NULL;
  int r;

  mfx_mkdir (fx, "/ws/r/d");
  mfx_mkdir (fx, "/ws/r/silent");
  mfx_mount (fx, policy_text, NULL);
  silent_mount (fx, mfx_on_host (fx, "/ws/r/silent"));
  assert_silent (fx);
  m_ws = mfx_m (fx, "/ws");
  h_d = mfx_h (fx, "/ws/r/d");

  r = bounded (view_rename_mounts, m_ws, 10000);
  if (r == -1)
    fail_msg ("a rename onto or of %s/r/silent still waits after 10 s: the view asked the silent mount", m_ws);
  if (r == 2 || r == 3)
    fail_msg ("a rename %s %s/r/silent succeeded", r == 2 ? "onto" : "of", m_ws);
  if (r != 0)
    fail_msg ("a rename onto or of %s/r/silent failed with %s, not EBUSY", m_ws, g_strerror (r - 10));
  assert_true (g_file_test (h_d, G_FILE_TEST_IS_DIR));
  mfx_unmount (fx);
  silent_take_off ();
}

/* --- a FUSE filesystem of the daemon's own user ---------------------------- */

/* One file, "f", of own_size bytes and two links; its attributes may be
 * cached for no time, its name for an hour (a lookup of the name does not
 * refresh them: only a stat that asks does). */
static gint own_size = 5;

static void
own_attr (fuse_ino_t ino, struct stat *st)
{
  memset (st, 0, sizeof *st);
  st->st_ino = ino;
  st->st_mode = ino == FUSE_ROOT_ID ? S_IFDIR | 0755 : S_IFREG | 0644;
  /* two links: the view reads the file's fusebox mark (fs-view-state.c) */
  st->st_nlink = 2;
  st->st_size = ino == FUSE_ROOT_ID ? 0 : g_atomic_int_get (&own_size);
}

static void
own_lookup (fuse_req_t req, fuse_ino_t parent, const char *name)
{
  struct fuse_entry_param e = { 0 };

  if (parent != FUSE_ROOT_ID || strcmp (name, "f") != 0)
    {
      fuse_reply_err (req, ENOENT);
      return;
    }
  e.ino = 2;
  e.entry_timeout = 3600;
  e.attr_timeout = 0;
  own_attr (e.ino, &e.attr);
  fuse_reply_entry (req, &e);
}

static void
own_getattr (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
  struct stat st;

  (void)fi;
  if (ino != FUSE_ROOT_ID && ino != 2)
    {
      fuse_reply_err (req, ENOENT);
      return;
    }
  own_attr (ino, &st);
  fuse_reply_attr (req, &st, 0);
}

/* the listing: ".", ".." and "f" (a FUSE filesystem may fold names, so the
 * view checks that a name it resolves is listed) */
static void
own_readdir (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
  static const char *const names[] = { ".", "..", "f" };
  char buf[512];
  size_t used = 0;

  (void)fi;
  if (ino != FUSE_ROOT_ID)
    {
      fuse_reply_err (req, ENOTDIR);
      return;
    }
  for (off_t i = off; i < (off_t)G_N_ELEMENTS (names); i++)
    {
      struct stat st;
      size_t n;
      own_attr (i == 2 ? 2 : FUSE_ROOT_ID, &st);
      n = fuse_add_direntry (req, buf + used, MIN (size, sizeof buf) - used, names[i], &st, i + 1);
      if (used + n > MIN (size, sizeof buf))
        break;
      used += n;
    }
  fuse_reply_buf (req, buf, used);
}

static const struct fuse_lowlevel_ops own_ops = { .lookup = own_lookup,
                                                  .getattr = own_getattr,
                                                  .readdir = own_readdir };

static void *
own_loop (void *se)
{
  fuse_session_loop (se);
  return NULL;
}

/* The server of the running test, stopped by the teardown whatever failed. */
static struct
{
  struct fuse_session *se;
  pthread_t loop;
  dev_t dev;
} own = { NULL, 0, 0 };

static void
own_start (const char *path)
{
  char *args_v[] = { (char *)"fusebox-test-own", NULL };
  struct fuse_args args = FUSE_ARGS_INIT (1, args_v);
  struct statx stx;

  own.se = fuse_session_new (&args, &own_ops, sizeof own_ops, NULL);
  fuse_opt_free_args (&args);
  assert_non_null (own.se);
  assert_int_equal (fuse_session_mount (own.se, path), 0);
  assert_int_equal (statx (AT_FDCWD, path, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_BASIC_STATS, &stx), 0);
  own.dev = makedev (stx.stx_dev_major, stx.stx_dev_minor);
  assert_int_equal (pthread_create (&own.loop, NULL, own_loop, own.se), 0);
}

/* The loop waits in read() until the connection ends: the view's daemon,
 * if still there, holds the filesystem past its unmount, so the connection
 * is aborted. */
static void
own_stop (void)
{
  if (own.se == NULL)
    return;
  fuse_session_exit (own.se);
  fuse_session_unmount (own.se);
  test_fuse_abort (own.dev);
  pthread_join (own.loop, NULL);
  fuse_session_destroy (own.se);
  own.se = NULL;
}

static int
view_size (const char *path)
{
  struct stat st;
  /* the size (below 100), or 100 + the error */
  return stat (path, &st) == 0 ? (int)MIN (st.st_size, 99) : 100 + errno;
}

MFX_CASE (test_own_fuse_attributes_fresh)
{
  g_autofree char *m_file = NULL;
  int before, after;

  mfx_mkdir (fx, "/ws/own");
  /* every stat through the view reaches the daemon */
  mfx_mount (fx, policy_text, "--cache-timeout", "0", NULL);
  own_start (mfx_on_host (fx, "/ws/own"));
  m_file = mfx_m (fx, "/ws/own/f");

  g_atomic_int_set (&own_size, 5);
  before = bounded (view_size, m_file, 10000);
  g_atomic_int_set (&own_size, 10);
  after = bounded (view_size, m_file, 10000);

  if (before >= 100 || after >= 100)
    fail_msg ("stat of %s through the view: %s", m_file, g_strerror (MAX (before, after) - 100));
  assert_int_equal (before, 5);
  if (after == 5)
    fail_msg ("the view showed %s at the size its filesystem had cached (5), not the new one (10)", m_file);
  assert_int_equal (after, 10);
  mfx_unmount (fx);
  own_stop ();
}

/* --- another user's mount put over a served name, again and again -------- */

/* Silent mounts put over the own filesystem's file and taken off again,
 * each for 6 ms, past a clock tick (a FUSE root's attributes are then
 * stale, and a stat that is not from the cache asks), until told to stop:
 * their connections stay open until the end (race_end), so a view that
 * asked one of them waits. */
static struct
{
  char *path;
  const char *rootmode;
  int fds[4000];
  guint n, mounted;
  gint stop;
  bool running;
  pthread_t thread;
} race = { .path = NULL };

static void *
race_loop (void *arg)
{
  (void)arg;
  while (!g_atomic_int_get (&race.stop) && race.n < G_N_ELEMENTS (race.fds))
    {
      g_autofree char *opts = NULL;
      int fd = open ("/dev/fuse", O_RDWR | O_CLOEXEC);

      if (fd < 0)
        break;
      race.fds[race.n++] = fd;
      opts = g_strdup_printf ("fd=%d,rootmode=%s,user_id=1000,group_id=1000,allow_other", fd, race.rootmode);
      if (mount ("silent", race.path, "fuse", MS_NOSUID | MS_NODEV, opts) == 0)
        {
          race.mounted++;
          g_usleep (6000);
          umount2 (race.path, MNT_DETACH);
        }
      g_usleep (1000);
    }
  return NULL;
}

static void
race_start (const char *path, const char *rootmode)
{
  race.path = g_strdup (path);
  race.rootmode = rootmode;
  race.n = race.mounted = 0;
  g_atomic_int_set (&race.stop, 0);
  assert_int_equal (pthread_create (&race.thread, NULL, race_loop, NULL), 0);
  race.running = true;
}

static void
race_stop (void)
{
  g_atomic_int_set (&race.stop, 1);
  if (race.running)
    pthread_join (race.thread, NULL);
  race.running = false;
}

/* Stops the loop and closes the silent connections: whatever still waits
 * on one ends. */
static void
race_release (void)
{
  race_stop ();
  for (guint i = 0; i < race.n; i++)
    close (race.fds[i]);
  race.n = 0;
}

static void
race_end (void)
{
  if (race.path == NULL)
    return;
  race_release ();
  /* the loop's last mount, if it was stopped between its two steps (not
   * the own filesystem's, when that is what the loop mounted over) */
  for (;;)
    {
      struct statx stx;

      if (statx (AT_FDCWD, race.path, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_BASIC_STATS, &stx) < 0 ||
          makedev (stx.stx_dev_major, stx.stx_dev_minor) == own.dev || umount2 (race.path, MNT_DETACH) < 0)
        break;
    }
  g_clear_pointer (&race.path, g_free);
}

/* Stats of PATH through the view for three seconds: any answer will do
 * (the file, the blank of a mount, a name gone), not none. */
static int
view_stat_loop (const char *path)
{
  gint64 end = g_get_monotonic_time () + 3 * G_USEC_PER_SEC;
  struct stat st;
  int n = 0;

  while (g_get_monotonic_time () < end)
    n += stat (path, &st) == 0;
  return n > 0 ? 0 : 2;
}

/* Through a view of the own filesystem at /ws/own: another user's silent
 * mounts come and go at host OVER (its root of type ROOTMODE) while the
 * file is stat'ed through the view; every stat answers, and then the file
 * is served as before. */
static void
raced (MFx *fx, const char *over, const char *rootmode)
{
  g_autofree char *m_file = NULL;
  int r;

  g_atomic_int_set (&own_size, 5);
  mfx_mkdir (fx, "/ws/own");
  mfx_mount (fx, policy_text, "--cache-timeout", "0", NULL);
  own_start (mfx_on_host (fx, "/ws/own"));
  m_file = mfx_m (fx, "/ws/own/f");
  assert_int_equal (bounded (view_size, m_file, 10000), 5);
  /* a silent mount there holds a stat on the host */
  silent_mount_as (fx, mfx_on_host (fx, over), rootmode);
  assert_silent (fx);
  silent.view_dev = 0; /* the view is not waiting: it goes on */
  silent_take_off ();

  race_start (mfx_on_host (fx, over), rootmode);
  r = bounded (view_stat_loop, m_file, 15000);
  race_stop ();
  print_message ("silent mounts put at %s: %u\n", race.path, race.mounted);
  if (r == -1)
    {
      race_end ();
      fail_msg ("stats of %s through the view, while another user's silent mounts came and went at %s, still "
                "waited after 15 s: the view asked one of them",
                m_file, over);
    }
  assert_int_equal (r, 0);
  assert_true (race.mounted > 100);
  race_end ();
  assert_int_equal (bounded (view_size, m_file, 10000), 5);
  mfx_unmount (fx);
  own_stop ();
}

/* A file with two links is read for fusebox's mark (and a name on a
 * filesystem that may answer a stat from its cache is stat'ed again):
 * from the object the first stat found, never by its name again, where
 * another user may have put a mount of theirs since. */
MFX_CASE (test_silent_fuse_raced_over_a_file)
{
  raced (fx, "/ws/own/f", "100000");
}

/* A mount point of a filesystem that may answer from its cache (the own
 * one at /ws/own: its kind read from mountinfo first, which the race keeps
 * changing) is stat'ed again through the object the first stat found: a
 * silent mount stacked on it since is not asked. */
MFX_CASE (test_silent_fuse_raced_over_a_mount)
{
  raced (fx, "/ws/own", "40000");
}

/* `fusebox mount --log` of a file in a directory others may write (sticky,
 * as /var/tmp), where another user has mounted a silent FUSE filesystem at
 * the log's name before the command runs.  The command finds that the log
 * can't be made there and ends, with a message; it never asks the silent
 * mount (its check that no source shows fusebox's own state takes what the
 * kernel holds of each name). */
static struct
{
  const char *policy, *log, *mnt, *state, *err, *out; /* out: NULL, /dev/null */
} log_cmd;

static int
mount_with_log (const char *unused)
{
  int null = open ("/dev/null", O_WRONLY | O_CLOEXEC);
  int err = open (log_cmd.err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

  (void)unused;
  dup2 (null, STDOUT_FILENO);
  dup2 (err, STDERR_FILENO);
  g_setenv ("XDG_STATE_HOME", log_cmd.state, TRUE);
  execl (test_bin (), "fusebox", "mount", "--policy", log_cmd.policy, "--log", log_cmd.log, log_cmd.mnt, (char *)NULL);
  _exit (127);
}

MFX_CASE (test_silent_fuse_at_the_log_name)
{
  g_autofree char *logs = g_build_filename (fx->tmp, "logs", NULL);
  g_autofree char *log = g_build_filename (logs, "access.jsonl", NULL);
  g_autofree char *mnt2 = g_build_filename (fx->tmp, "mnt2", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "mount-err.txt", NULL);
  g_autofree char *said = NULL;
  bool mounted;
  int r;

  mfx_mkdir (fx, "/ws");
  mfx_mount (fx, policy_text, NULL); /* (the silent mount's helper tells the view's device) */
  assert_int_equal (mkdir (logs, 0755), 0);
  assert_int_equal (chmod (logs, 01777), 0);
  assert_int_equal (mkdir (log, 0755), 0);
  assert_int_equal (chown (log, 1000, 1000), 0);
  assert_int_equal (mkdir (mnt2, 0755), 0);
  silent_mount (fx, log);
  assert_silent (fx);

  log_cmd.policy = fx->policy_path;
  log_cmd.log = log;
  log_cmd.mnt = mnt2;
  log_cmd.state = fx->state_dir;
  log_cmd.err = err;
  r = bounded (mount_with_log, NULL, 10000);
  mounted = test_is_mounted (mnt2);
  if (mounted)
    umount2 (mnt2, MNT_DETACH);
  if (r == -1)
    fail_msg ("fusebox mount --log %s still waits after 10 s: it asked the silent mount at the log's name", log);
  assert_false (mounted);
  assert_int_not_equal (r, 0);
  /* and says which file, and why */
  assert_true (g_file_get_contents (err, &said, NULL, NULL));
  if (strstr (said, log) == NULL)
    fail_msg ("fusebox mount failed without naming the log %s:\n%s", log, said);
  silent_take_off ();
}

/* The fusebox command ARGV (after "fusebox") with XDG_STATE_HOME
 * log_cmd.state, its stderr in log_cmd.err (for bounded: ARG is unused). */
static const char *const *paths_argv;
static const char *paths_cwd_gone; /* run in this directory, removed first */

static int
run_given_paths (const char *unused)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  int null = open ("/dev/null", O_RDWR | O_CLOEXEC);
  int err = open (log_cmd.err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

  (void)unused;
  dup2 (null, STDIN_FILENO);
  dup2 (null, STDOUT_FILENO);
  dup2 (err, STDERR_FILENO);
  g_setenv ("XDG_STATE_HOME", log_cmd.state, TRUE);
  if (paths_cwd_gone != NULL)
    {
      /* in a directory that is then removed (by its owner, while root is
       * in it): getcwd fails, and "/" is not where ".." leads */
      if (mkdir (paths_cwd_gone, 0755) < 0 || chdir (paths_cwd_gone) < 0 || rmdir (paths_cwd_gone) < 0)
        _exit (126);
    }
  g_ptr_array_add (argv, (gpointer) "fusebox");
  for (const char *const *a = paths_argv; *a != NULL; a++)
    g_ptr_array_add (argv, (gpointer)*a);
  g_ptr_array_add (argv, NULL);
  execv (test_bin (), (char **)argv->pdata);
  _exit (127);
}

/* Other silent mounts of the running test (a file's, a detached one's),
 * taken off by the teardown whatever failed: their paths (or NULL) and
 * their connections. */
static struct
{
  char *path;
  int fd, held;
  dev_t dev;
} more[2] = { { NULL, -1, -1, 0 }, { NULL, -1, -1, 0 } };

/* (a child that waits on one is then released) */
static void
more_abort (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (more); i++)
    if (more[i].dev != 0)
      test_fuse_abort (more[i].dev);
}

static void
more_take_off (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (more); i++)
    {
      if (more[i].dev != 0)
        test_fuse_abort (more[i].dev);
      if (more[i].path != NULL && umount2 (more[i].path, MNT_DETACH) == 0 && i == 0)
        unlink (more[i].path); /* the file it was mounted over */
      if (more[i].held >= 0)
        close (more[i].held);
      if (more[i].fd >= 0)
        close (more[i].fd);
      g_clear_pointer (&more[i].path, g_free);
      more[i].fd = more[i].held = -1;
      more[i].dev = 0;
    }
}

/* Another user's silent FUSE filesystem at PATH (ROOTMODE 40000 or 100000)
 * as more[I]. */
static void
more_mount (guint i, const char *path, const char *rootmode)
{
  g_autofree char *opts = NULL;
  struct statx stx;

  more[i].fd = open ("/dev/fuse", O_RDWR | O_CLOEXEC);
  assert_true (more[i].fd >= 0);
  opts = g_strdup_printf ("fd=%d,rootmode=%s,user_id=1000,group_id=1000,allow_other", more[i].fd, rootmode);
  assert_int_equal (mount ("silent", path, "fuse", MS_NOSUID | MS_NODEV, opts), 0);
  more[i].path = g_strdup (path);
  assert_int_equal (statx (AT_FDCWD, path, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_BASIC_STATS, &stx), 0);
  more[i].dev = makedev (stx.stx_dev_major, stx.stx_dev_minor);
}

/* `fusebox ARGV...` with XDG_STATE_HOME STATE (in CWD_GONE, made and
 * removed, when not NULL) ends within 10 s with STATUS, naming NAMED and
 * saying SAYS. */
static void
refused_within (const char *const *argv, const char *state, const char *cwd_gone, const char *named, const char *says,
                int status)
{
  g_autofree char *said = NULL;
  g_autofree char *shown = g_strjoinv (" ", (char **)argv);
  int r;

  log_cmd.state = state;
  paths_argv = argv;
  paths_cwd_gone = cwd_gone;
  r = bounded (run_given_paths, NULL, 10000);
  paths_cwd_gone = NULL;
  if (r == -1)
    fail_msg ("fusebox %s (XDG_STATE_HOME %s) still waits after 10 s: it asked a silent mount", shown, state);
  assert_true (g_file_get_contents (log_cmd.err, &said, NULL, NULL));
  if (r != status || strstr (said, named) == NULL || strstr (said, says) == NULL)
    fail_msg ("fusebox %s (XDG_STATE_HOME %s) ended with %d, not %d saying that %s %s:\n%s", shown, state, r, status,
              named, says, said);
}

/* Another user's directory in a directory of root's, a silent FUSE
 * filesystem mounted over it (they may write the directory, so they may
 * mount there), and a file of theirs in sticky /tmp with one over it;
 * root's commands are given paths on them: as a run directory, the parent
 * of one, through a link of root's that leads into the mount and through
 * a link of theirs, as XDG_STATE_HOME (to run, runs, session list and
 * stop, run --session), as a workspace (also to policy explain), a
 * policy file and a rule's source, a token file, a mount point, a
 * socket's name to serve and to log --connect, a relative path from a
 * working directory that is gone, and through a link to /proc/PID/fd/N
 * that holds a detached silent mount's root (its text says "/").  The
 * realpath and stat of the paths they were given (or of a link's target,
 * in the check itself) waited for good, before any check of whose they
 * are.  Each ends now within 10 s, saying which step is on whose
 * filesystem; nothing is made there. */
MFX_CASE (test_silent_fuse_as_a_run_directory)
{
  g_autofree char *dir = g_build_filename (fx->tmp, "theirs", NULL);
  g_autofree char *below = g_build_filename (dir, "run", NULL);
  g_autofree char *link = g_build_filename (fx->tmp, "link", NULL);
  g_autofree char *through = g_build_filename (link, "run", NULL);
  g_autofree char *deep_link = g_build_filename (fx->tmp, "deep", NULL);
  g_autofree char *their_link = g_build_filename (fx->tmp, "their-link", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "run-err.txt", NULL);
  g_autofree char *token = g_build_filename (dir, "token", NULL);
  g_autofree char *policy = g_build_filename (fx->tmp, "source-policy.json", NULL);
  g_autofree char *deep_run = g_build_filename (deep_link, "r", NULL);
  g_autofree char *their_run = g_build_filename (their_link, "r", NULL);
  g_autofree char *policy_text_source =
    g_strdup_printf ("{ \"version\": 1, \"rules\": [ { \"path\": \"/\", \"access\": \"read\", \"why\": \"r\" },\n"
                     "  { \"path\": \"/data\", \"access\": \"read\", \"source\": \"%s\", \"why\": \"d\" } ] }\n",
                     dir);
  const char *state = fx->state_dir;
  g_autofree char *tmp_file_path = g_strdup_printf ("/tmp/fusebox-silent-%d", (int)getpid ());
  g_autofree char *file_socket = g_strconcat ("unix:", tmp_file_path, NULL);
  g_autofree char *connect_socket = g_strconcat ("unix:", dir, "/api.sock", NULL);
  g_autofree char *gone = g_build_filename (fx->tmp, "gone", NULL);
  g_autofree char *detached = g_build_filename (fx->tmp, "theirs-detached", NULL);
  g_autofree char *magic_link = g_build_filename (fx->tmp, "magic", NULL);
  g_autofree char *magic_target = NULL;
  g_autofree char *magic_policy = g_build_filename (magic_link, "p.json", NULL);
  g_autofree char *magic_log = g_build_filename (magic_link, "access.jsonl", NULL);
  const char *const run_dir[] = { "run", "--run-dir", dir, "--", "true", NULL };
  const char *const run_below[] = { "run", "--run-dir", below, "--", "true", NULL };
  const char *const run_through[] = { "run", "--run-dir", through, "--", "true", NULL };
  const char *const run_deep[] = { "run", "--run-dir", deep_run, "--", "true", NULL };
  const char *const run_theirs[] = { "run", "--run-dir", their_run, "--", "true", NULL };
  const char *const run_plain[] = { "run", "--", "true", NULL };
  const char *const run_session[] = { "run", "--session", "s1", "--", "true", NULL };
  const char *const runs[] = { "runs", NULL };
  const char *const session_list[] = { "session", "list", NULL };
  const char *const session_stop[] = { "session", "stop", "s1", NULL };
  const char *const run_workspace[] = { "run", "--workspace", dir, "--", "true", NULL };
  const char *const run_source[] = { "run", "--policy", policy, "--", "true", NULL };
  const char *const policy_file[] = { "policy", "check", tmp_file_path, NULL };
  const char *const serve_token[] = { "serve", "--token-file", token, NULL };
  const char *const mount_point[] = { "mount", dir, NULL };
  const char *const serve_socket[] = { "serve", "--listen", file_socket, NULL };
  const char *const policy_workspace[] = { "policy", "explain", "--workspace", dir, "/etc", NULL };
  const char *const log_connect[] = { "log", "--follow", "--connect", connect_socket, NULL };
  const char *const policy_up[] = { "policy", "check", "../theirs/p.json", NULL };
  const char *const magic_check[] = { "policy", "check", magic_policy, NULL };
  const char *const magic_read[] = { "log", magic_log, NULL };
  const char *const on = "FUSE filesystem that another user (uid 1000)";
  const char *const elsewhere = "not in this process's mount table";
  struct
  {
    const char *const *argv;
    const char *state, *named;
    int status;
  } cases[] = {
    { run_dir, state, dir, 125 },
    { run_below, state, dir, 125 },
    { run_through, state, dir, 125 },
    { run_deep, state, dir, 125 },
    { run_theirs, state, dir, 125 },
    { run_plain, dir, dir, 125 },
    { run_plain, deep_link, dir, 125 },
    { run_session, dir, dir, 125 },
    { runs, dir, dir, 1 },
    { session_list, dir, dir, 1 },
    { session_stop, dir, dir, 1 },
    { run_workspace, state, dir, 125 },
    { run_source, state, dir, 125 },
    { policy_file, state, tmp_file_path, 1 },
    { serve_token, state, dir, 1 },
    { mount_point, state, dir, 1 },
    { serve_socket, state, tmp_file_path, 1 },
    { policy_workspace, state, dir, 1 },
    { log_connect, state, dir, 1 },
  };

  mfx_mkdir (fx, "/ws");
  mfx_mount (fx, policy_text, NULL); /* (the silent mount's helper tells the view's device) */
  assert_int_equal (mkdir (dir, 0755), 0);
  assert_int_equal (chown (dir, 1000, 1000), 0);
  assert_int_equal (symlink (dir, link), 0);
  assert_int_equal (symlink ("theirs/sub/deeper", deep_link), 0);
  assert_int_equal (symlink ("theirs/x", their_link), 0);
  assert_int_equal (lchown (their_link, 1000, 1000), 0);
  test_write_file (policy, policy_text_source);
  silent_mount (fx, dir);
  assert_silent (fx);
  /* a file of theirs in sticky /tmp, a mount over it */
  test_write_file (tmp_file_path, "");
  assert_int_equal (chown (tmp_file_path, 1000, 1000), 0);
  more_mount (0, tmp_file_path, "100000");
  /* a mount of theirs whose root is held (O_PATH asks it nothing), then
   * taken off: only /proc/PID/fd/N still leads there, and its text is "/" */
  assert_int_equal (mkdir (detached, 0755), 0);
  assert_int_equal (chown (detached, 1000, 1000), 0);
  more_mount (1, detached, "40000");
  more[1].held = open (detached, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true (more[1].held >= 0);
  assert_int_equal (umount2 (detached, MNT_DETACH), 0);
  g_clear_pointer (&more[1].path, g_free);
  magic_target = g_strdup_printf ("/proc/%d/fd/%d", (int)getpid (), more[1].held);
  assert_int_equal (symlink (magic_target, magic_link), 0);
  assert_int_equal (lchown (magic_link, 1000, 1000), 0);

  log_cmd.err = err;
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    refused_within (cases[i].argv, cases[i].state, NULL, cases[i].named, on, cases[i].status);
  refused_within (policy_up, state, gone, "../theirs", on, 1);
  refused_within (magic_check, state, NULL, magic_target, elsewhere, 1);
  refused_within (magic_read, state, NULL, magic_target, elsewhere, 1);

  more_take_off ();
  assert_int_equal (access (tmp_file_path, F_OK), -1);
  silent_take_off ();
  /* nothing was made in their directories */
  assert_int_equal (rmdir (dir), 0);
  assert_int_equal (rmdir (detached), 0);
}

/* `fusebox COMMAND log_cmd.log`, its stderr in log_cmd.err and its stdout
 * in log_cmd.out (for bounded). */
static int
read_log_with (const char *command)
{
  int out = log_cmd.out != NULL ? open (log_cmd.out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)
                                : open ("/dev/null", O_WRONLY | O_CLOEXEC);
  int err = open (log_cmd.err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

  dup2 (out, STDOUT_FILENO);
  dup2 (err, STDERR_FILENO);
  execl (test_bin (), "fusebox", command, log_cmd.log, (char *)NULL);
  _exit (127);
}

/* A view mounted (the silent mount's helper tells its device) and
 * T/logs, sticky and world-writable as /var/tmp: its path. */
static char *
shared_logs (MFx *fx)
{
  char *logs = g_build_filename (fx->tmp, "logs", NULL);

  mfx_mkdir (fx, "/ws");
  mfx_mount (fx, policy_text, NULL);
  assert_int_equal (mkdir (logs, 0755), 0);
  assert_int_equal (chmod (logs, 01777), 0);
  return logs;
}

/* Another user's empty file at PATH, a silent FUSE filesystem over it. */
static void
silent_over_a_file (MFx *fx, const char *path)
{
  test_write_file (path, "");
  assert_int_equal (chown (path, 1000, 1000), 0);
  silent_mount_as (fx, path, "100000");
  assert_silent (fx);
}

/* `fusebox COMMAND LOG` ends within 10 s and names NAMED on its stderr
 * (kept in ERR): its exit status. */
static int
reader_ends_naming (const char *command, const char *log, const char *named, const char *err)
{
  g_autofree char *said = NULL;
  int r;

  log_cmd.log = log;
  log_cmd.err = err;
  r = bounded (read_log_with, command, 10000);
  if (r == -1)
    fail_msg ("fusebox %s %s still waits after 10 s: it asked the silent mount at %s", command, log, named);
  assert_true (g_file_get_contents (err, &said, NULL, NULL));
  if (strstr (said, named) == NULL)
    fail_msg ("fusebox %s %s did not name %s:\n%s", command, log, named, said);
  return r;
}

/* Another user puts a file with a rotated log's name beside a log in a
 * shared directory (sticky /var/tmp) and mounts a silent FUSE filesystem
 * over it: `fusebox log` reads the log to its end, and says it skipped that
 * name; it never asks the mount (it waited before, unkillable). */
MFX_CASE (test_silent_fuse_at_a_rotated_log_name)
{
  g_autofree char *logs = shared_logs (fx);
  g_autofree char *log = g_build_filename (logs, "access.jsonl", NULL);
  g_autofree char *rotated = g_build_filename (logs, "access.000000000001-000000000001.jsonl", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "log-err.txt", NULL);

  test_write_file (log, "{\"ts\":\"2026-12-04T00:00:00Z\",\"run\":\"r\",\"seq\":2,\"op\":\"open\",\"path\":\"/x\","
                        "\"decision\":\"allow\"}\n");
  silent_over_a_file (fx, rotated);
  (void)reader_ends_naming ("log", log, rotated, err);
  silent_take_off ();
}

/* Another user's directory in a shared place, a silent FUSE filesystem
 * mounted over it, named to `fusebox log` and `report` as a run directory
 * (with and without the slash a shell's completion adds): they looked
 * into it for access.jsonl and waited for good, Ctrl-C or not.  A mount's
 * root is not looked into: they end, naming it. */
MFX_CASE (test_silent_fuse_named_as_a_run_directory)
{
  g_autofree char *logs = shared_logs (fx);
  g_autofree char *dir = g_build_filename (logs, "xdir", NULL);
  g_autofree char *slash = g_strconcat (dir, "/", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "log-err.txt", NULL);
  const char *const commands[] = { "log", "report" };

  assert_int_equal (mkdir (dir, 0755), 0);
  assert_int_equal (chown (dir, 1000, 1000), 0);
  silent_mount (fx, dir);
  assert_silent (fx);
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    {
      assert_int_equal (reader_ends_naming (commands[i], dir, dir, err), 1);
      assert_int_equal (reader_ends_naming (commands[i], slash, dir, err), 1);
    }
  silent_take_off ();
}

/* Another user's link at a log's free live name, into a name in their
 * silent FUSE filesystem (in a shared directory that is not sticky, where
 * the kernel follows others' links): the look at whether the name was a
 * run directory followed it, and the lookup in their filesystem held
 * `log` and `report` for good.  Another user's link is not followed: it
 * is a log file's name, and the reader refuses the link, naming it. */
MFX_CASE (test_silent_fuse_behind_a_link_at_a_log_name)
{
  g_autofree char *logs = shared_logs (fx);
  g_autofree char *open_dir = g_build_filename (logs, "open", NULL);
  g_autofree char *mnt = g_build_filename (open_dir, "mnt", NULL);
  g_autofree char *log = g_build_filename (open_dir, "log.jsonl", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "log-err.txt", NULL);
  const char *const commands[] = { "log", "report" };

  assert_int_equal (mkdir (open_dir, 0777), 0);
  assert_int_equal (chmod (open_dir, 0777), 0);
  assert_int_equal (mkdir (mnt, 0755), 0);
  assert_int_equal (chown (mnt, 1000, 1000), 0);
  assert_int_equal (symlink ("mnt/x", log), 0);
  assert_int_equal (lchown (log, 1000, 1000), 0);
  silent_mount (fx, mnt);
  assert_silent (fx);
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    {
      g_autofree char *said = NULL;

      assert_int_equal (reader_ends_naming (commands[i], log, log, err), 1);
      /* refused as a link, not followed to whatever it leads to */
      assert_true (g_file_get_contents (err, &said, NULL, NULL));
      if (strstr (said, "is a symbolic link") == NULL)
        fail_msg ("fusebox %s %s did not refuse another user's link as a link:\n%s", commands[i], log, said);
    }
  silent_take_off ();
}

/* The same at the live log's name, which is free before a log's first run
 * (or between a rotation's rename and the new file): beside root's rotated
 * file, another user's file there with a silent FUSE filesystem mounted
 * over it.  `fusebox log` and `fusebox report` end, naming the live file;
 * they never ask the mount (both waited before, and Ctrl-C did not end
 * them: the look at whose the log is was an lstat(2) by name). */
MFX_CASE (test_silent_fuse_at_the_live_log_name)
{
  g_autofree char *logs = shared_logs (fx);
  g_autofree char *log = g_build_filename (logs, "access.jsonl", NULL);
  g_autofree char *rotated = g_build_filename (logs, "access.000000000001-000000000001.jsonl", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "log-err.txt", NULL);
  const char *const commands[] = { "log", "report" };

  test_write_file (rotated, "{\"ts\":\"2026-12-04T00:00:00Z\",\"run\":\"r\",\"seq\":1,\"op\":\"open\","
                            "\"path\":\"/x\",\"decision\":\"allow\"}\n");
  silent_over_a_file (fx, log);
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    (void)reader_ends_naming (commands[i], log, log, err);
  silent_take_off ();
}

/* A run.json beside a log named access.jsonl in a shared directory (a
 * --log there), another user's file with a silent FUSE filesystem over
 * it: `fusebox report` says it does not take it and reports the log; it
 * waited for good before (a look at the name to tell "missing" from
 * "unreadable"). */
MFX_CASE (test_silent_fuse_at_a_run_json_beside_the_log)
{
  g_autofree char *logs = shared_logs (fx);
  g_autofree char *log = g_build_filename (logs, "access.jsonl", NULL);
  g_autofree char *json = g_build_filename (logs, "run.json", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "report-err.txt", NULL);

  test_write_file (log, "{\"ts\":\"2026-12-04T00:00:00Z\",\"run\":\"r\",\"seq\":1,\"op\":\"open\",\"path\":\"/x\","
                        "\"decision\":\"allow\"}\n");
  silent_over_a_file (fx, json);
  assert_int_equal (reader_ends_naming ("report", log, json, err), 0);
  silent_take_off ();
}

/* `fusebox log --follow --json LOG`, its stdout in OUT and stderr in ERR:
 * its pid. */
static pid_t
start_follower (const char *log, const char *out, const char *err)
{
  pid_t pid = fork ();

  assert_true (pid >= 0);
  if (pid == 0)
    {
      int o = open (out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      int e = open (err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

      dup2 (o, STDOUT_FILENO);
      dup2 (e, STDERR_FILENO);
      execl (test_bin (), "fusebox", "log", "--follow", "--json", log, (char *)NULL);
      _exit (127);
    }
  return pid;
}

/* Has FILE come to hold NEEDLE within MS?  Not: the follower PID is killed
 * and the test fails, saying WHAT. */
static void
follower_shows (pid_t pid, const char *file, const char *needle, int ms, const char *what)
{
  int status = 0;

  if (TEST_WAIT_FOR (({
                       g_autofree char *t = NULL;
                       g_file_get_contents (file, &t, NULL, NULL) && strstr (t, needle) != NULL;
                     }),
                     ms))
    return;
  kill (pid, SIGKILL);
  (void)ended_within (pid, &status, 5000);
  fail_msg ("fusebox log --follow %s", what);
}

/* Seq 2 of run r appended to FILE. */
static void
append_second_record (const char *file)
{
  FILE *f = fopen (file, "a");

  assert_non_null (f);
  fputs ("{\"ts\":\"2026-12-04T00:00:01Z\",\"run\":\"r\",\"seq\":2,\"op\":\"open\",\"path\":\"/y\","
         "\"decision\":\"allow\"}\n",
         f);
  fclose (f);
}

/* The follower PID ends on SIGINT within 10 s. */
static void
follower_ends (pid_t pid)
{
  int status = 0;

  kill (pid, SIGINT);
  if (ended_within (pid, &status, 10000))
    return;
  kill (pid, SIGKILL);
  (void)ended_within (pid, &status, 5000);
  fail_msg ("fusebox log --follow did not end on SIGINT within 10 s (blocked in the mount?)");
}

static const char first_record[] = "{\"ts\":\"2026-12-04T00:00:00Z\",\"run\":\"r\",\"seq\":1,\"op\":\"open\","
                                   "\"path\":\"/x\",\"decision\":\"allow\"}\n";

/* `fusebox log --follow` of root's live log, and the live file renamed away
 * (as a rotation does) and another user's file put at the free name with
 * a silent FUSE filesystem over it: the follower waited for good in its
 * look at whether the live file was replaced (an lstat(2) by name).  The
 * writer refuses such a name and writes on in the renamed file, so the
 * follower names the mount once and follows that file on: a record
 * appended to it is shown, nothing asked of the mount. */
MFX_CASE (test_silent_fuse_under_a_follower)
{
  g_autofree char *logs = shared_logs (fx);
  g_autofree char *log = g_build_filename (logs, "access.jsonl", NULL);
  g_autofree char *rotated = g_build_filename (logs, "access.000000000001-000000000001.jsonl", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "follow-err.txt", NULL);
  g_autofree char *out = g_build_filename (fx->tmp, "follow-out.txt", NULL);
  int status = 0;
  pid_t pid;

  test_write_file (log, first_record);
  pid = start_follower (log, out, err);
  g_usleep (500 * 1000); /* most likely following by now; either way it must go on */
  assert_int_equal (rename (log, rotated), 0);
  silent_over_a_file (fx, log);
  follower_shows (pid, err, log, 10000, "did not name the silent mount at the live name within 10 s");
  if (ended_within (pid, &status, 0))
    fail_msg ("fusebox log --follow ended (status %d) when the live name was taken", status);
  append_second_record (rotated);
  follower_shows (pid, out, "\"seq\":2,", 10000, "did not show the record appended to the renamed file within 10 s");
  follower_ends (pid);
  silent_take_off ();
}

/* Root follows another user's log in that user's directory, and the user
 * renames the directory away and puts a link to their silent FUSE
 * filesystem at its name: the follower's next look at the live name by
 * its path went through the link and waited for good in the lookup.  It
 * looks in the directory it opened at its start: the record appended to
 * the log in the renamed directory is shown, then the records of a
 * rotation there, and SIGINT ends it. */
MFX_CASE (test_silent_fuse_behind_a_followed_directory)
{
  g_autofree char *logs = shared_logs (fx);
  g_autofree char *home = g_build_filename (logs, "home", NULL);
  g_autofree char *dir = g_build_filename (home, "d", NULL);
  g_autofree char *moved = g_build_filename (home, "d.old", NULL);
  g_autofree char *mnt = g_build_filename (home, "mnt", NULL);
  g_autofree char *log = g_build_filename (dir, "access.jsonl", NULL);
  g_autofree char *moved_log = g_build_filename (moved, "access.jsonl", NULL);
  g_autofree char *moved_rotated = g_build_filename (moved, "access.000000000001-000000000002.jsonl", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "follow-err.txt", NULL);
  g_autofree char *out = g_build_filename (fx->tmp, "follow-out.txt", NULL);
  pid_t pid;

  /* uid 1000's: their directory, in it the log's, in that their log */
  assert_int_equal (mkdir (home, 0755), 0);
  assert_int_equal (mkdir (dir, 0755), 0);
  assert_int_equal (mkdir (mnt, 0755), 0);
  test_write_file (log, first_record);
  assert_int_equal (chown (home, 1000, 1000), 0);
  assert_int_equal (chown (dir, 1000, 1000), 0);
  assert_int_equal (chown (mnt, 1000, 1000), 0);
  assert_int_equal (chown (log, 1000, 1000), 0);
  silent_mount (fx, mnt);
  assert_silent (fx);

  pid = start_follower (log, out, err);
  follower_shows (pid, out, "\"seq\":1,", 10000, "did not show the log's first record within 10 s");
  assert_int_equal (rename (dir, moved), 0);
  assert_int_equal (symlink ("mnt", dir), 0);
  assert_int_equal (lchown (dir, 1000, 1000), 0);
  g_usleep (300 * 1000); /* a follower's look at the live name or two */
  append_second_record (moved_log);
  follower_shows (pid, out, "\"seq\":2,", 10000,
                  "did not show the record appended to the log in the renamed directory within 10 s (it looked "
                  "through the link into the silent mount?)");
  /* and a rotation there: listed, and the new live file opened, there */
  assert_int_equal (rename (moved_log, moved_rotated), 0);
  test_write_file (moved_log, "{\"ts\":\"2026-12-04T00:00:02Z\",\"run\":\"r\",\"seq\":3,\"op\":\"open\","
                              "\"path\":\"/z\",\"decision\":\"allow\"}\n");
  assert_int_equal (chown (moved_log, 1000, 1000), 0);
  follower_shows (pid, out, "\"seq\":3,", 10000,
                  "did not follow the rotation in the renamed directory within 10 s (it listed the directory or "
                  "opened the new live file through the link?)");
  follower_ends (pid);
  silent_take_off ();
}

/* Another user's log (uid 1001's) in a shared directory, and uid 1000's
 * silent FUSE filesystem mounted over a file of theirs at a rotated name
 * beside it: its root, never answered, shows as root's regular file, and
 * root's `fusebox log` took the log for root's, skipped each of uid 1001's
 * files as another's and showed none of its records.  A mount at a name is
 * not the writer's file: the log is uid 1001's, said, its records shown,
 * the mount skipped, named. */
MFX_CASE (test_silent_fuse_at_a_rotated_name_beside_anothers_log)
{
  g_autofree char *logs = shared_logs (fx);
  g_autofree char *log = g_build_filename (logs, "bob.jsonl", NULL);
  g_autofree char *rotated = g_build_filename (logs, "bob.000000000001-000000000001.jsonl", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "log-err.txt", NULL);
  g_autofree char *out = g_build_filename (fx->tmp, "log-out.txt", NULL);
  g_autofree char *shown = NULL;

  test_write_file (log, first_record);
  assert_int_equal (chown (log, 1001, 1001), 0);
  silent_over_a_file (fx, rotated);
  log_cmd.out = out;
  assert_int_equal (reader_ends_naming ("log", log, rotated, err), 0);
  log_cmd.out = NULL;
  assert_true (g_file_get_contents (out, &shown, NULL, NULL));
  if (strstr (shown, "/x") == NULL)
    fail_msg ("fusebox log %s did not show uid 1001's record beside the mount:\n%s", log, shown);
  {
    g_autofree char *said = NULL;

    assert_true (g_file_get_contents (err, &said, NULL, NULL));
    if (strstr (said, "uid 1001's") == NULL)
      fail_msg ("fusebox log %s did not say the log is uid 1001's:\n%s", log, said);
  }
  silent_take_off ();
}

/* The exchanger: the names A and B in DIR swapped (RENAME_EXCHANGE) until
 * told to stop. */
static struct
{
  int dir_fd;
  const char *a, *b;
  gint stop;
  guint64 swaps;
  pthread_t thread;
} exchanger;

static void *
exchange_loop (void *arg)
{
  (void)arg;
  while (!g_atomic_int_get (&exchanger.stop))
    if (syscall (SYS_renameat2, exchanger.dir_fd, exchanger.a, exchanger.dir_fd, exchanger.b, RENAME_EXCHANGE) == 0)
      exchanger.swaps++;
  return NULL;
}

static void
exchanger_start (const char *dir, const char *a, const char *b)
{
  exchanger.dir_fd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true (exchanger.dir_fd >= 0);
  exchanger.a = a;
  exchanger.b = b;
  exchanger.swaps = 0;
  g_atomic_int_set (&exchanger.stop, 0);
  assert_int_equal (pthread_create (&exchanger.thread, NULL, exchange_loop, NULL), 0);
}

/* The loop stopped, and A back at its name (a directory, B a link); how
 * many swaps it made. */
static guint64
exchanger_stop (void)
{
  struct stat st;

  g_atomic_int_set (&exchanger.stop, 1);
  pthread_join (exchanger.thread, NULL);
  if (fstatat (exchanger.dir_fd, exchanger.a, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK (st.st_mode))
    (void)syscall (SYS_renameat2, exchanger.dir_fd, exchanger.a, exchanger.dir_fd, exchanger.b, RENAME_EXCHANGE);
  close (exchanger.dir_fd);
  print_message ("swaps while the commands ran: %" G_GUINT64_FORMAT "\n", exchanger.swaps);
  return exchanger.swaps;
}

/* uid 1000's directory holds their log's directory and a link into their
 * silent FUSE filesystem, and swaps the two in a loop while root reads the
 * log (by its file, and by its directory as a run directory): the walk of
 * the way found the directory, and the looks after it by path went through
 * the link and waited for good (an outside review hung 12 of 20 `log`s).
 * Every look after the walk is made in what the walk found: each command
 * ends, reading the log or refusing the link, naming the step. */
MFX_CASE (test_silent_fuse_swapped_in_after_the_walk)
{
  g_autofree char *logs = shared_logs (fx);
  g_autofree char *home = g_build_filename (logs, "home", NULL);
  g_autofree char *dir = g_build_filename (home, "logs", NULL);
  g_autofree char *mnt = g_build_filename (home, "mnt", NULL);
  g_autofree char *link = g_build_filename (home, "lnk", NULL);
  g_autofree char *log = g_build_filename (dir, "access.jsonl", NULL);
  g_autofree char *json = g_build_filename (dir, "run.json", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "log-err.txt", NULL);

  assert_int_equal (mkdir (home, 0755), 0);
  assert_int_equal (mkdir (dir, 0700), 0);
  assert_int_equal (mkdir (mnt, 0755), 0);
  test_write_file (log, first_record);
  test_write_file (json, "{\"run\":\"r\",\"records\":1,\"ended\":\"2026-12-04T00:00:01Z\"}\n");
  assert_int_equal (symlink ("mnt", link), 0);
  assert_int_equal (chown (home, 1000, 1000), 0);
  assert_int_equal (chown (dir, 1000, 1000), 0);
  assert_int_equal (chown (mnt, 1000, 1000), 0);
  assert_int_equal (chown (log, 1000, 1000), 0);
  assert_int_equal (chown (json, 1000, 1000), 0);
  assert_int_equal (lchown (link, 1000, 1000), 0);
  silent_mount (fx, mnt);
  assert_silent (fx);

  exchanger_start (home, "logs", "lnk");
  /* a report's look at run.json comes after two walks that may each be
   * refused by the swap: more of them */
  for (guint i = 0; i < 90; i++)
    {
      const char *command = i % 3 == 0 ? "log" : "report";
      const char *named = i % 6 < 3 ? log : dir;
      int r;

      log_cmd.log = named;
      log_cmd.err = err;
      r = bounded (read_log_with, command, 10000);
      if (r == -1)
        {
          (void)exchanger_stop ();
          fail_msg ("fusebox %s %s still waits after 10 s (try %u): it looked through the link swapped in after its "
                    "walk",
                    command, named, i + 1);
        }
    }
  assert_true (exchanger_stop () > 1000);
  silent_take_off ();
}

/* Root's `log`, `report` (the newest run) and `runs` with a state directory
 * in a tree another user can write (sudo -E, their HOME): they swap
 * fusebox's directory there for a link into their silent FUSE filesystem
 * in a loop.  The look for links in fusebox's state directories walked the
 * way, then looked at each directory by its path (an lstat below the
 * link), and `runs` listed its directory by path: each waited for good
 * within a try or three.  Each now ends, refusing the state directory. */
MFX_CASE (test_silent_fuse_swapped_into_the_state_way)
{
  g_autofree char *logs = shared_logs (fx);
  g_autofree char *xdg = g_build_filename (logs, "state", NULL);
  g_autofree char *ours = g_build_filename (xdg, "fusebox", NULL);
  g_autofree char *mnt = g_build_filename (logs, "mnt", NULL);
  g_autofree char *link = g_build_filename (xdg, "lnk", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "state-err.txt", NULL);
  const char *const commands[][2] = { { "log", NULL }, { "report", NULL }, { "runs", NULL } };

  assert_int_equal (mkdir (xdg, 0755), 0);
  assert_int_equal (mkdir (ours, 0755), 0);
  assert_int_equal (mkdir (mnt, 0755), 0);
  assert_int_equal (symlink (mnt, link), 0);
  assert_int_equal (chown (xdg, 1000, 1000), 0);
  assert_int_equal (chown (ours, 1000, 1000), 0);
  assert_int_equal (chown (mnt, 1000, 1000), 0);
  assert_int_equal (lchown (link, 1000, 1000), 0);
  silent_mount (fx, mnt);
  assert_silent (fx);

  exchanger_start (xdg, "fusebox", "lnk");
  log_cmd.state = xdg;
  log_cmd.err = err;
  for (guint i = 0; i < 60; i++)
    {
      paths_argv = commands[i % 3];
      if (bounded (run_given_paths, NULL, 10000) == -1)
        {
          (void)exchanger_stop ();
          fail_msg ("fusebox %s with XDG_STATE_HOME=%s still waits after 10 s (try %u): it looked through the link "
                    "swapped in after its walk",
                    commands[i % 3][0], xdg, i + 1);
        }
    }
  paths_argv = NULL;
  assert_true (exchanger_stop () > 1000);
  silent_take_off ();
}

static int
silent_teardown (void **state)
{
  race_end ();
  more_take_off ();
  silent_take_off ();
  own_stop ();
  return mfx_teardown (state);
}

#define SILENT_TEST(f) cmocka_unit_test_setup_teardown (f, mfx_setup, silent_teardown)

MFX_DEFINE_MAIN (
  SILENT_TEST (test_silent_fuse_shown_blank), SILENT_TEST (test_silent_fuse_in_a_moved_tree),
  SILENT_TEST (test_silent_fuse_not_renamed), SILENT_TEST (test_own_fuse_attributes_fresh),
  SILENT_TEST (test_silent_fuse_raced_over_a_file), SILENT_TEST (test_silent_fuse_raced_over_a_mount),
  SILENT_TEST (test_silent_fuse_at_the_log_name), SILENT_TEST (test_silent_fuse_at_a_rotated_log_name),
  SILENT_TEST (test_silent_fuse_at_the_live_log_name), SILENT_TEST (test_silent_fuse_named_as_a_run_directory),
  SILENT_TEST (test_silent_fuse_as_a_run_directory), SILENT_TEST (test_silent_fuse_behind_a_link_at_a_log_name),
  SILENT_TEST (test_silent_fuse_under_a_follower), SILENT_TEST (test_silent_fuse_behind_a_followed_directory),
  SILENT_TEST (test_silent_fuse_at_a_rotated_name_beside_anothers_log),
  SILENT_TEST (test_silent_fuse_swapped_in_after_the_walk), SILENT_TEST (test_silent_fuse_swapped_into_the_state_way),
  SILENT_TEST (test_silent_fuse_at_a_run_json_beside_the_log))
