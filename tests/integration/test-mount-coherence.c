/* fusebox — changes made on the host by another process, seen through a
 * mount whose kernel caches entries and attributes for long (fs-watch.c):
 * after a file was read through the mount (its attributes and pages
 * cached), the test itself, outside the mount, appends to it, rewrites it
 * in place, truncates it, replaces it by rename, creates a name the mount
 * had looked up as missing (also with every event lost, as in an overflow),
 * and removes it; through the mount, stat and a
 * full read show the new state within 1 s (a bound on staleness for the
 * asynchronous delivery, below every cache timeout, not a speed check).
 * With FUSEBOX_NO_FANOTIFY=1 the mount says it runs with short timeouts, and
 * a change shows within them; with it, an absence is kept past them.
 * Writes on the host outside the directories
 * the mount has shown reach no mark of the daemon: it counts the events it
 * read, and prints the count at exit.  An unprivileged daemon (`fusebox
 * run` as uid 1000 with a 0666 FUSE node) watches too: a file grown on the
 * host shows inside the sandbox within 1 s (its timeouts would be 2 s). */
#include "tests/lib/test-caller.h"
#include "tests/lib/test-mount.h"

static const char policy_text[] = "{ \"version\": 1, \"rules\": [\n"
                                  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" },\n"
                                  "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"the workspace\" } ] }\n";

/* ~1 s: the event's delivery, with room for a loaded machine; every cache
 * timeout (600 s with the watcher, absences too; 2 s without) is longer. */
#define STALE_STEPS 100

static char *
mnt_read (MFx *fx, const char *rel)
{
  g_autofree char *path = mfx_m (fx, rel);

  return test_read_file (path);
}

static off_t
mnt_size (MFx *fx, const char *rel)
{
  g_autofree char *path = mfx_m (fx, rel);
  struct stat st;

  return stat (path, &st) == 0 ? st.st_size : -1;
}

/* stat and a full read through the mount show CONTENT (NULL: no such name) */
static bool
mnt_shows (MFx *fx, const char *rel, const char *content)
{
  g_autofree char *text = NULL;

  if (content == NULL)
    {
      g_autofree char *path = mfx_m (fx, rel);
      struct stat st;
      return stat (path, &st) < 0 && errno == ENOENT;
    }
  if (mnt_size (fx, rel) != (off_t)strlen (content))
    return false;
  text = mnt_read (fx, rel);
  return text != NULL && strcmp (text, content) == 0;
}

/* Read REL through the mount (caching its attributes and pages), check
 * it shows the host's CONTENT. */
static void
warm (MFx *fx, const char *rel, const char *content)
{
  assert_true (mnt_shows (fx, rel, content));
  assert_true (mnt_shows (fx, rel, content)); /* from the caches now */
}

static void
assert_shows_soon (MFx *fx, const char *rel, const char *content)
{
  if (!TEST_WAIT_FOR (mnt_shows (fx, rel, content), STALE_STEPS * 10))
    {
      g_autofree char *text = mnt_read (fx, rel);
      fail_msg ("the mount did not show %s as \"%s\" within 1 s (now: size %ld, \"%s\")", rel,
                content != NULL ? content : "(absent)", (long)mnt_size (fx, rel), text != NULL ? text : "(unreadable)");
    }
}

static void
host_append (MFx *fx, const char *rel, const char *text)
{
  g_autofree char *path = mfx_h (fx, rel);
  FILE *fp = fopen (path, "a");

  assert_non_null (fp);
  assert_int_equal (fputs (text, fp) >= 0, 1);
  assert_int_equal (fclose (fp), 0);
}

static void
mount_coherent (MFx *fx)
{
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  mfx_mount (fx, policy_text, NULL);
}

/* REL holding CONTENT on the host (NULL: absent, its directory made), the
 * coherent mount, and REL read through it: what the change made next on
 * the host must not hide behind. */
static void
mount_warm (MFx *fx, const char *rel, const char *content)
{
  if (content != NULL)
    {
      mfx_write (fx, rel, content);
      mfx_assert_host_readable (fx, rel);
    }
  else
    {
      g_autofree char *dir = g_path_get_dirname (rel);
      mfx_mkdir (fx, dir);
    }
  mount_coherent (fx);
  warm (fx, rel, content);
}

MFX_CASE (test_append)
{
  mount_warm (fx, "/ws/a.txt", "hello");
  host_append (fx, "/ws/a.txt", ", world");
  assert_shows_soon (fx, "/ws/a.txt", "hello, world");
}

/* Same size, new bytes: the pages kept across opens must go too. */
MFX_CASE (test_rewrite_in_place)
{
  g_autofree char *path = NULL;
  int fd;

  mount_warm (fx, "/ws/b.txt", "aaaa");
  path = mfx_h (fx, "/ws/b.txt");
  fd = open (path, O_WRONLY | O_CLOEXEC);
  assert_true (fd >= 0);
  assert_int_equal (pwrite (fd, "bbbb", 4, 0), 4);
  close (fd);
  assert_shows_soon (fx, "/ws/b.txt", "bbbb");
}

MFX_CASE (test_truncate)
{
  g_autofree char *path = NULL;

  mount_warm (fx, "/ws/c.txt", "0123456789");
  path = mfx_h (fx, "/ws/c.txt");
  assert_int_equal (truncate (path, 3), 0);
  assert_shows_soon (fx, "/ws/c.txt", "012");
}

/* g_file_set_contents writes a new file and renames it over the name. */
MFX_CASE (test_replace_by_rename)
{
  mount_warm (fx, "/ws/d.txt", "old");
  mfx_write (fx, "/ws/d.txt", "the new version");
  assert_shows_soon (fx, "/ws/d.txt", "the new version");
}

/* A name looked up as missing (a negative entry) then made on the host. */
MFX_CASE (test_create_missing)
{
  mount_warm (fx, "/ws/new.txt", NULL);
  mfx_write (fx, "/ws/new.txt", "made outside");
  assert_shows_soon (fx, "/ws/new.txt", "made outside");
}

/* The same with every host event lost (FUSEBOX_TEST_LOSE_EVENTS=1 takes
 * the path of a fanotify queue overflow): the absence, which no node
 * stands for, must still be expired. */
MFX_CASE (test_create_missing_lost)
{
  g_setenv ("FUSEBOX_TEST_LOSE_EVENTS", "1", TRUE);
  mount_warm (fx, "/ws/lost.txt", NULL);
  g_unsetenv ("FUSEBOX_TEST_LOSE_EVENTS");
  mfx_write (fx, "/ws/lost.txt", "made outside, event lost");
  assert_shows_soon (fx, "/ws/lost.txt", "made outside, event lost");
}

static unsigned
count_lines (const char *log, const char *frag1, const char *frag2)
{
  g_auto (GStrv) lines = g_strsplit (log, "\n", -1);
  unsigned n = 0;

  for (guint i = 0; lines[i] != NULL; i++)
    if (strstr (lines[i], frag1) != NULL && strstr (lines[i], frag2) != NULL)
      n++;
  return n;
}

/* How many times anyone asked the kernel to drop its caches of names and
 * inodes (`echo 2 > /proc/sys/vm/drop_caches`), from /proc/vmstat; -1 when
 * it does not tell. */
static gint64
drop_slabs (void)
{
  g_autofree char *text = test_read_file ("/proc/vmstat");
  const char *p = text != NULL ? strstr (text, "\ndrop_slab ") : NULL;

  return p != NULL ? g_ascii_strtoll (p + strlen ("\ndrop_slab "), NULL, 10) : -1;
}

#define ABSENCE_TRIES 5

/* Where the host is watched, an absence is kept as long as a name (600 s,
 * not the 2 s it was): a present name and a missing one, looked up once,
 * then asked for again after 2.5 s, the daemon saw one lookup of each (the
 * log at level all records each).  Unless the kernel dropped its cached
 * names meanwhile, whatever their timeouts: anyone's drop_caches (as
 * benchmarks do before cold runs), memory pressure (the oldest first: the
 * present name, looked up first, goes too).  The present name shows it:
 * such a try tells nothing, and is made again, with a new mount and new
 * names.  Only when the names were dropped in every try and nobody asked
 * for it (drop_slab) are they not kept at all. */
static void
test_absence_kept (void **state)
{
  gint64 drops = drop_slabs ();

  MFX_BEGIN (state);
  mfx_mkdir (fx, "/ws");
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  for (guint i = 0; i < ABSENCE_TRIES; i++)
    {
      g_autofree char *absent = g_strdup_printf ("/ws/absent%u.txt", i);
      g_autofree char *present = g_strdup_printf ("/ws/present%u.txt", i);
      g_autofree char *absent_path = mfx_m (fx, absent), *present_path = mfx_m (fx, present);
      g_autofree char *absent_tail = g_strdup_printf ("%s\"", absent), *present_tail = NULL;
      g_autofree char *log = NULL;
      struct stat st;

      present_tail = g_strdup_printf ("%s\"", present);
      mfx_write (fx, present, "here");
      mfx_mount (fx, policy_text, "--log-level", "all", NULL);
      assert_int_equal (stat (present_path, &st), 0);
      assert_int_equal (stat (absent_path, &st), -1);
      assert_int_equal (errno, ENOENT);
      g_usleep (2500 * 1000);
      assert_int_equal (stat (present_path, &st), 0);
      assert_int_equal (stat (absent_path, &st), -1);
      assert_int_equal (errno, ENOENT);
      mfx_unmount (fx);
      log = mfx_log (fx);
      if (count_lines (log, "\"op\":\"lookup\"", present_tail) != 1)
        {
          print_message ("try %u: %s was looked up %u times: the kernel dropped its cached names; again\n", i + 1,
                         present, count_lines (log, "\"op\":\"lookup\"", present_tail));
          continue;
        }
      if (count_lines (log, "\"op\":\"lookup\"", absent_tail) != 1)
        fail_msg ("expected one lookup of %s in the log, as of %s, found %u:\n%s", absent, present,
                  count_lines (log, "\"op\":\"lookup\"", absent_tail), log);
      MFX_PASS ();
      return;
    }
  if (drop_slabs () == drops)
    fail_msg ("in each of %u tries a present name was looked up again after 2.5 s, and nobody dropped the "
              "kernel's caches: names are not kept",
              ABSENCE_TRIES);
  MFX_PASS ();
  test_skip_test (false,
                  "the kernel's cached names were dropped (drop_caches) during each of %u tries: a second "
                  "lookup would not tell a short timeout",
                  ABSENCE_TRIES);
}

MFX_CASE (test_remove)
{
  g_autofree char *path = NULL;

  mount_warm (fx, "/ws/gone.txt", "here");
  path = mfx_h (fx, "/ws/gone.txt");
  assert_int_equal (unlink (path), 0);
  assert_shows_soon (fx, "/ws/gone.txt", NULL);
}

/* `fusebox mount --foreground` in the background; returns its pid, and
 * its first lines up to the one about caches in *RET_CACHES. */
static FILE *mount_out; /* the last mount_foreground's output */

static pid_t
mount_foreground (MFx *fx, char **ret_caches)
{
  g_autoptr (GString) text = g_string_new (policy_text);
  g_autoptr (GError) error = NULL;
  const char *argv[] = { test_bin (), "mount",      "--foreground", "--policy", fx->policy_path,
                         "--log",     fx->log_path, fx->mnt,        NULL };
  GPid pid;
  int out_fd;
  FILE *out;
  char line[512];

  g_string_replace (text, "@H@", fx->host, 0);
  assert_true (g_file_set_contents (fx->policy_path, text->str, -1, NULL));
  g_free (fx->mount_args);
  fx->mount_args = g_strjoinv (" ", (char **)argv);
  if (!g_spawn_async_with_pipes (NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, NULL, &out_fd,
                                 NULL, &error))
    fail_msg ("%s", error->message);
  fx->daemon = pid;
  fx->mounted = true;
  out = fdopen (out_fd, "r");
  assert_non_null (out);
  *ret_caches = NULL;
  while (fgets (line, sizeof line, out) != NULL)
    if (strstr (line, "caches:") != NULL)
      {
        *ret_caches = g_strdup (line);
        break;
      }
  /* OUT stays open (a descriptor of the test process until it ends), so
   * the daemon's last line at unmount does not meet a closed pipe */
  mount_out = out;
  if (*ret_caches == NULL)
    fail_msg ("%s printed no \"caches:\" line", fx->mount_args);
  assert_true (test_is_mounted (fx->mnt));
  return pid;
}

/* Without the watcher: the mount says so, and a change shows within the
 * short timeouts (2 s; 3.5 s allowed). */
MFX_CASE (test_fallback_short)
{
  g_autofree char *caches = NULL;

  mfx_write (fx, "/ws/f.txt", "one");
  g_setenv ("FUSEBOX_NO_FANOTIFY", "1", TRUE);
  mount_foreground (fx, &caches);
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  if (strstr (caches, "caches: short") == NULL)
    fail_msg ("FUSEBOX_NO_FANOTIFY=1 but the mount said: %s", caches);
  warm (fx, "/ws/f.txt", "one");
  host_append (fx, "/ws/f.txt", " two");
  if (!TEST_WAIT_FOR (mnt_shows (fx, "/ws/f.txt", "one two"), 3500))
    fail_msg ("the short timeouts did not end after 3.5 s");
}

/* With the watcher: the mount says it is coherent. */
MFX_CASE (test_mode_coherent)
{
  g_autofree char *caches = NULL;

  mfx_mkdir (fx, "/ws");
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  mount_foreground (fx, &caches);
  if (strstr (caches, "caches: coherent") == NULL)
    fail_msg ("as root the mount should watch the host, but said: %s", caches);
}

/* 1000 files made and written in a host directory the mount never showed
 * (made before the mount, in a directory it shows) reach the daemon as no
 * event; one append in a directory it showed does (the counter counts).
 * Other processes on the machine may add a few events in directories
 * shown (/, /tmp), never 1000.  With a filesystem-wide mark the count is
 * above 1000 (distinct files: fanotify merges only events on one object). */
MFX_CASE (test_outside_no_events)
{
  g_autofree char *caches = NULL;
  char line[512];
  long long events = -1;

  mfx_write (fx, "/ws/f.txt", "one");
  mfx_mkdir (fx, "/outside");
  g_unsetenv ("FUSEBOX_NO_FANOTIFY");
  mount_foreground (fx, &caches);
  if (strstr (caches, "caches: coherent") == NULL)
    fail_msg ("the mount should watch the host, but said: %s", caches);
  warm (fx, "/ws/f.txt", "one");
  for (int i = 0; i < 1000; i++)
    {
      g_autofree char *rel = g_strdup_printf ("/outside/x%d", i);
      mfx_write (fx, rel, "0123456789abcdef");
    }
  host_append (fx, "/ws/f.txt", " two");
  assert_shows_soon (fx, "/ws/f.txt", "one two");
  mfx_unmount (fx);
  while (fgets (line, sizeof line, mount_out) != NULL)
    {
      const char *p = strstr (line, " host events read");
      if (strstr (line, "fusebox: unmounted") != NULL && p != NULL)
        {
          while (p > line && g_ascii_isdigit (p[-1]))
            p--;
          events = g_ascii_strtoll (p, NULL, 10);
        }
    }
  if (events < 1)
    fail_msg ("the daemon read no event for the append in the workspace (count %lld)", events);
  print_message ("the daemon read %lld host events\n", events);
  if (events >= 1000)
    fail_msg ("the daemon read %lld events: writes outside the shown directories reach it", events);
}

#define UNPRIV_UID TEST_CALLER_UID

/* The sandbox's script: read f.txt, say ready, wait for a line on stdin
 * (written by the test after it appended on the host; not a polled file:
 * the test is about the append), then print the size stat shows
 * within 1 s of that (polled; the 2 s timeouts of a daemon that doesn't
 * watch have not ended by then: the attributes were cached by the first
 * stat, before ready) and the contents. */
static const char unpriv_script[] =
  "echo \"in1 $(stat -c %s f.txt) $(cat f.txt)\"\n"
  ": > ready\n"
  "read go\n"
  "end=$(( $(date +%s%N) + 1000000000 ))\n"
  "while [ $(stat -c %s f.txt) != 7 ] && [ $(date +%s%N) -lt $end ]; do sleep 0.01; done\n"
  "echo \"in2 $(stat -c %s f.txt) $(cat f.txt)\"\n";

static void
unpriv_chown (const char *path)
{
  assert_int_equal (chown (path, UNPRIV_UID, UNPRIV_UID), 0);
}

static void
test_unprivileged_run (void **state)
{
  g_autofree char *base = NULL, *ws = NULL, *file = NULL, *script = NULL, *ready = NULL;
  g_autofree char *state_dir = NULL, *out = NULL;
  g_auto (TestCaller) caller = { 0 };
  g_autoptr (GString) text = g_string_new (NULL);
  int pipefd[2], infd[2];
  int status;
  pid_t pid;
  char buf[512];
  ssize_t n;

  MFX_BEGIN (state);
  base = g_build_filename (fx->tmp, "unpriv", NULL);
  ws = g_build_filename (base, "ws", NULL);
  state_dir = g_build_filename (base, "state", NULL);
  file = g_build_filename (ws, "f.txt", NULL);
  script = g_build_filename (ws, "inner.sh", NULL);
  ready = g_build_filename (ws, "ready", NULL);
  test_caller_init (&caller, fx->tmp);
  caller.fuse_mode = 0666; /* the usual host's */
  caller.drop = true;
  assert_int_equal (g_mkdir_with_parents (ws, 0755), 0);
  assert_int_equal (g_mkdir_with_parents (state_dir, 0755), 0);
  assert_true (g_file_set_contents (file, "one", -1, NULL));
  assert_true (g_file_set_contents (script, unpriv_script, -1, NULL));
  unpriv_chown (base);
  unpriv_chown (ws);
  unpriv_chown (state_dir);
  unpriv_chown (file);
  unpriv_chown (script);
  assert_int_equal (pipe2 (pipefd, O_CLOEXEC), 0);
  assert_int_equal (pipe2 (infd, O_CLOEXEC), 0);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0)
    {
      const char *argv[] = { test_bin (), "run", "--workspace", ws, "--cwd", ws, "--", "sh", "inner.sh", NULL };
      dup2 (infd[0], 0);
      dup2 (pipefd[1], 1);
      dup2 (pipefd[1], 2);
      test_caller_setup (&caller);
      setenv ("HOME", base, 1);
      setenv ("XDG_STATE_HOME", state_dir, 1);
      execv (argv[0], (char **)argv);
      _exit (127);
    }
  close (pipefd[1]);
  close (infd[0]);
  if (!TEST_WAIT_FOR (g_file_test (ready, G_FILE_TEST_EXISTS) || !test_pid_alive (pid), 10000))
    fail_msg ("the sandbox did not start within 10 s");
  if (g_file_test (ready, G_FILE_TEST_EXISTS))
    {
      FILE *fp = fopen (file, "a");
      assert_non_null (fp);
      assert_int_equal (fputs (" two", fp) >= 0, 1);
      assert_int_equal (fclose (fp), 0);
      assert_int_equal (write (infd[1], "go\n", 3), 3);
    }
  close (infd[1]);
  while ((n = read (pipefd[0], buf, sizeof buf)) > 0)
    g_string_append_len (text, buf, n);
  close (pipefd[0]);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  print_message ("%s", text->str);
  if (WIFEXITED (status) && WEXITSTATUS (status) == 125 && strstr (text->str, "in1 ") == NULL &&
      getenv ("FUSEBOX_TESTS_MUST_RUN") == NULL)
    {
      /* uid 1000 can't make sandboxes on this host (test-run-nested.c
       * tells why) */
      fprintf (stderr, "skipped: uid 1000 can't run fusebox here:\n%s", text->str);
      MFX_PASS ();
      skip ();
    }
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    fail_msg ("fusebox run as uid 1000 failed (status 0x%x):\n%s", status, text->str);
  if (strstr (text->str, "in1 3 one\n") == NULL)
    fail_msg ("the sandbox did not read the file first:\n%s", text->str);
  if (strstr (text->str, "in2 7 one two\n") == NULL)
    fail_msg ("an unprivileged daemon did not show the host's append within 1 s:\n%s", text->str);
  MFX_PASS ();
}

MFX_DEFINE_MAIN (MFX_TEST (test_append), MFX_TEST (test_rewrite_in_place), MFX_TEST (test_truncate),
                 MFX_TEST (test_replace_by_rename), MFX_TEST (test_create_missing), MFX_TEST (test_create_missing_lost),
                 MFX_TEST (test_absence_kept), MFX_TEST (test_remove), MFX_TEST (test_fallback_short),
                 MFX_TEST (test_mode_coherent), MFX_TEST (test_outside_no_events), MFX_TEST (test_unprivileged_run))
