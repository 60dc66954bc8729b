/* fusebox — the life of `fusebox mount`: clear refusals for a missing, a
 * non-directory and a busy mount point; a clean end on SIGTERM, SIGINT and
 * an external `fusermount3 -u`, with no mount left behind and the access
 * log complete; files still open at the stop; SIGKILL of the daemon (and
 * the records of what it had answered kept); the
 * default run directory; a tree with more names than the daemon's
 * RLIMIT_NOFILE. */
#include <signal.h>

#include "tests/lib/test-log.h"
#include "tests/lib/test-mount.h"

#include <ftw.h>
#include <sys/resource.h>

static const char policy_text[] = "{ \"version\": 1, \"rules\": [\n"
                                  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" },\n"
                                  "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"the workspace\" } ] }\n";

static void
write_policy (MFx *fx)
{
  g_autoptr (GString) text = g_string_new (policy_text);

  g_string_replace (text, "@H@", fx->host, 0);
  assert_true (g_file_set_contents (fx->policy_path, text->str, -1, NULL));
}

static int
mount_expect_fail (MFx *fx, const char *mountpoint, char **ret_err)
{
  const char *argv[] = { test_bin (), "mount", "--policy", fx->policy_path, mountpoint, NULL };

  return test_run_cmd (argv, NULL, ret_err);
}

static guint walk_count;

static int
count_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  if (flag == FTW_NS || flag == FTW_DNR)
    fail_msg ("walk: %s: %s", path, g_strerror (errno));
  walk_count++;
  return 0;
}

/* The daemon holds descriptors for directories and open files, not for
 * every name the kernel remembers: with RLIMIT_NOFILE 512 (hard and soft),
 * a walk that stats 2,000 files lists them all, and the mount still works
 * afterwards. */
MFX_CASE (test_many_names)
{
  enum
  {
    DIRS = 20,
    FILES = 100,
    LIMIT = 512
  };
  g_autofree char *top = NULL, *sub = NULL;
  struct rlimit low = { LIMIT, LIMIT };
  int fds[64];
  DIR *dp;
  guint listed = 0;

  for (guint i = 0; i < DIRS; i++)
    for (guint j = 0; j < FILES; j++)
      {
        g_autofree char *rel = g_strdup_printf ("/ws/d%02u/f%03u", i, j);
        mfx_write (fx, rel, "x\n");
      }
  mfx_mount (fx, policy_text, NULL);
  /* the daemon raised its soft limit to the hard one at start: lower both
   * under it, as an administrator's hard limit would be */
  assert_int_equal (prlimit (fx->daemon, RLIMIT_NOFILE, &low, NULL), 0);

  top = mfx_m (fx, "/ws");
  walk_count = 0;
  assert_int_equal (nftw (top, count_one, 16, FTW_PHYS), 0);
  assert_int_equal (walk_count, 1 + DIRS + DIRS * FILES);
  /* everything is looked up and kept by the kernel, yet the daemon is far
   * from its limit */
  assert_true (test_count_fds (fx->daemon) < LIMIT / 2);
  /* open files hold descriptors while open */
  for (guint j = 0; j < G_N_ELEMENTS (fds); j++)
    {
      g_autofree char *p = g_strdup_printf ("%s/d01/f%03u", top, j);
      char c;
      fds[j] = open (p, O_RDONLY | O_CLOEXEC);
      assert_true (fds[j] >= 0);
      assert_int_equal (read (fds[j], &c, 1), 1);
    }
  for (guint j = 0; j < G_N_ELEMENTS (fds); j++)
    close (fds[j]);
  /* and a listing still works */
  sub = mfx_m (fx, "/ws/d07");
  dp = opendir (sub);
  assert_non_null (dp);
  for (struct dirent *de; (de = readdir (dp)) != NULL;)
    if (de->d_name[0] != '.')
      listed++;
  closedir (dp);
  assert_int_equal (listed, FILES);
  mfx_unmount (fx);
}

MFX_CASE (test_bad_mountpoints)
{
  g_autofree char *missing = g_build_filename (fx->tmp, "no-such-dir", NULL);
  g_autofree char *file = g_build_filename (fx->tmp, "a-file", NULL);
  g_autofree char *err = NULL;
  g_autofree char *data = NULL;
  g_autofree char *through = NULL;

  write_policy (fx);
  mfx_write (fx, "/ws/f", "f\n");
  assert_int_equal (mount_expect_fail (fx, missing, &err), 1);
  test_assert_contains (err, missing, "does not exist", "mkdir -p", NULL);
  g_clear_pointer (&err, g_free);

  assert_true (g_file_set_contents (file, "x", -1, NULL));
  assert_int_equal (mount_expect_fail (fx, file, &err), 1);
  test_assert_contains (err, file, "not a directory", NULL);
  g_clear_pointer (&err, g_free);

  /* busy: something is mounted there already (our own first mount) */
  mfx_mount (fx, policy_text, NULL);
  assert_int_equal (mount_expect_fail (fx, fx->mnt, &err), 1);
  test_assert_contains (err, fx->mnt, "busy", "fusermount3 -u", NULL);
  /* and the first mount is untouched */
  through = mfx_m (fx, "/ws/f");
  assert_true (g_file_get_contents (through, &data, NULL, NULL));
  assert_string_equal (data, "f\n");

  /* usage errors exit 2 */
  {
    const char *argv[] = { test_bin (), "mount", "--log-level", "verbose", fx->mnt, NULL };
    g_autofree char *e2 = NULL;
    assert_int_equal (test_run_cmd (argv, NULL, &e2), 2);
    assert_non_null (strstr (e2, "mutations, opens or all"));
  }
  {
    const char *argv[] = { test_bin (), "mount", NULL };
    assert_int_equal (test_run_cmd (argv, NULL, NULL), 2);
  }
}

/* Read a file through the mount so that the log has a record to check. */
static void
touch_through (MFx *fx)
{
  g_autofree char *p = mfx_m (fx, "/ws/f");
  g_autofree char *data = NULL;

  assert_true (g_file_get_contents (p, &data, NULL, NULL));
  assert_string_equal (data, "hello\n");
}

static void
assert_log_complete (MFx *fx)
{
  g_autofree char *log = mfx_log (fx);
  g_autofree char *path = mfx_h (fx, "/ws/f");
  g_autofree char *frag = g_strdup_printf ("\"path\":\"%s\"", path);

  assert_true (strlen (log) > 0);
  assert_true (g_str_has_suffix (log, "}\n"));
  if (!test_log_has (log, "\"op\":\"close\"", frag, "\"bytes_read\":6", NULL))
    fail_msg ("no close record with the bytes read in:\n%s", log);
}

/* /ws/f mounted and read through the mount. */
static void
mount_and_touch (MFx *fx)
{
  mfx_write (fx, "/ws/f", "hello\n");
  mfx_mount (fx, policy_text, NULL);
  touch_through (fx);
}

MFX_CASE (test_sigterm)
{

  mount_and_touch (fx);
  mfx_kill_daemon (fx, SIGTERM);
  assert_false (test_is_mounted (fx->mnt));
  assert_log_complete (fx);
}

/* A foreground mount as our child: its exit status is ours to see. */
static GPid
spawn_foreground (MFx *fx, int *ret_stdout)
{
  const char *argv[] = {
    test_bin (), "mount", "--foreground", "--policy", fx->policy_path, "--log", fx->log_path, fx->mnt, NULL,
  };
  g_autoptr (GError) error = NULL;
  GString *out = g_string_new (NULL);
  char buf[256];
  GPid pid;

  write_policy (fx);
  fx->mount_args = g_strjoinv (" ", (char **)argv);
  if (!g_spawn_async_with_pipes (NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, NULL,
                                 ret_stdout, NULL, &error))
    fail_msg ("%s", error->message);
  /* it prints the access log's path once the mount works */
  while (strstr (out->str, "access log") == NULL)
    {
      ssize_t n = read (*ret_stdout, buf, sizeof buf);
      if (n <= 0)
        fail_msg ("the foreground mount ended before it was ready:\n%s", out->str);
      g_string_append_len (out, buf, n);
    }
  g_string_free (out, TRUE);
  fx->mounted = true;
  assert_true (test_is_mounted (fx->mnt));
  return pid;
}

static int
wait_child (GPid pid, int out_fd, char **ret_rest)
{
  GString *rest = g_string_new (NULL);
  char buf[256];
  ssize_t n;
  int status;

  while ((n = read (out_fd, buf, sizeof buf)) > 0)
    g_string_append_len (rest, buf, n);
  close (out_fd);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  *ret_rest = g_string_free (rest, FALSE);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

/* A foreground mount of /ws/f, read through it. */
static GPid
foreground_and_touch (MFx *fx, int *ret_stdout)
{
  GPid pid;

  mfx_write (fx, "/ws/f", "hello\n");
  pid = spawn_foreground (fx, ret_stdout);
  touch_through (fx);
  return pid;
}

/* The foreground mount PID exits 0, unmounted, its log complete; the rest
 * of its output in *RET_REST. */
static void
assert_foreground_ended (MFx *fx, GPid pid, int out_fd, char **ret_rest)
{
  assert_int_equal (wait_child (pid, out_fd, ret_rest), 0);
  fx->mounted = false;
  assert_false (test_is_mounted (fx->mnt));
  assert_log_complete (fx);
}

MFX_CASE (test_sigint_foreground)
{
  g_autofree char *rest = NULL;
  int out_fd;
  GPid pid = foreground_and_touch (fx, &out_fd);

  assert_int_equal (kill (pid, SIGINT), 0);
  assert_foreground_ended (fx, pid, out_fd, &rest);
  assert_non_null (strstr (rest, "unmounted"));
}

MFX_CASE (test_external_fusermount)
{
  const char *argv[] = { "fusermount3", "-u", fx->mnt, NULL };
  g_autofree char *rest = NULL;
  int out_fd;
  GPid pid = foreground_and_touch (fx, &out_fd);

  assert_int_equal (test_run_cmd (argv, NULL, NULL), 0);
  assert_foreground_ended (fx, pid, out_fd, &rest);
}

/* A file still open in the mount at SIGTERM: the mount leaves the
 * namespace at once, the daemon ends after its grace period (aborting the
 * connection), and the open descriptor gets ENOTCONN. */
MFX_CASE (test_open_file_at_stop)
{
  g_autofree char *p = NULL;
  char buf[16];
  int fd;

  mfx_write (fx, "/ws/f", "hello\n");
  mfx_mount (fx, policy_text, NULL);
  p = mfx_m (fx, "/ws/f");
  fd = open (p, O_RDONLY | O_CLOEXEC);
  assert_true (fd >= 0);
  assert_int_equal (kill (fx->daemon, SIGTERM), 0);
  mfx_wait_unmounted (fx); /* at once, while the daemon waits out its grace */
  assert_true (TEST_WAIT_FOR (!test_pid_alive (fx->daemon), 30000));
  assert_errno_is (pread (fd, buf, sizeof buf, 0), ENOTCONN);
  close (fd);
  assert_false (test_is_mounted (fx->mnt));
}

/* SIGKILL: no clean stop, but fusermount3's auto_unmount removes the mount. */
MFX_CASE (test_sigkill)
{

  mount_and_touch (fx);
  mfx_kill_daemon (fx, SIGKILL);
  mfx_wait_unmounted (fx);
}

/* SIGKILL right after a change returns: its record is in the log.  The
 * daemon writes each record before it answers the kernel (write-through,
 * ipc/ipc-log.c), so once mkdir(2) has returned, killing the daemon can't
 * lose it.  Twenty mounts, each killed right after one mkdir; each run
 * appends to the same log. */
MFX_CASE (test_sigkill_keeps_answered_records)
{

  mfx_mkdir (fx, "/ws");
  for (int i = 0; i < 20; i++)
    {
      g_autofree char *rel = g_strdup_printf ("/ws/d%02d", i);
      g_autofree char *dir = mfx_m (fx, rel);

      mfx_mount (fx, policy_text, NULL);
      assert_int_equal (mkdir (dir, 0755), 0);
      mfx_kill_daemon (fx, SIGKILL);
      mfx_wait_unmounted (fx);
    }
  g_autofree char *log = mfx_log (fx);
  for (int i = 0; i < 20; i++)
    {
      g_autofree char *rel = g_strdup_printf ("/ws/d%02d", i);
      g_autofree char *host = mfx_h (fx, rel);
      g_autofree char *frag = g_strdup_printf ("\"path\":\"%s\"", host);
      struct stat st;

      assert_int_equal (stat (host, &st), 0); /* it was made on the host */
      if (!test_log_has (log, "\"op\":\"mkdir\"", frag, NULL))
        fail_msg ("mkdir %s returned, the daemon was then killed, and its record is missing:\n%s", host, log);
    }
}

/* A mount whose daemon is gone (the auto_unmount helper killed first, so
 * nothing cleans up): `fusebox mount` names it stale and says how to clear
 * it. */
MFX_CASE (test_stale_mountpoint)
{
  g_autofree char *children = NULL;
  g_autofree char *err = NULL;
  struct stat st;
  int out_fd;
  GPid pid;

  mfx_write (fx, "/ws/f", "hello\n");
  pid = spawn_foreground (fx, &out_fd);
  {
    /* fusermount3 stays as the daemon's child to unmount after it */
    g_autofree char *path = g_strdup_printf ("/proc/%d/task/%d/children", (int)pid, (int)pid);
    assert_true (g_file_get_contents (path, &children, NULL, NULL));
  }
  {
    g_auto (GStrv) ids = g_strsplit (g_strstrip (children), " ", -1);
    for (guint i = 0; ids[i] != NULL; i++)
      if (ids[i][0] != '\0')
        kill (atoi (ids[i]), SIGKILL);
  }
  assert_int_equal (kill (pid, SIGKILL), 0);
  {
    g_autofree char *rest = NULL;
    wait_child (pid, out_fd, &rest);
  }
  assert_true (test_is_mounted (fx->mnt));
  assert_errno_is (stat (fx->mnt, &st), ENOTCONN);
  assert_int_equal (mount_expect_fail (fx, fx->mnt, &err), 1);
  test_assert_contains (err, "stale", "fusermount3 -u", NULL);
}

/* Without --log: a new run directory under $XDG_STATE_HOME, printed, with
 * the log and the effective policy in it. */
MFX_CASE (test_default_run_dir)
{
  const char *argv_tmpl[] = { test_bin (), "mount", "--policy", fx->policy_path, fx->mnt, NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *run_dir = NULL;
  g_autofree char *log = NULL;
  g_autofree char *pol = NULL;
  const char *p;
  struct stat st;

  write_policy (fx);
  mfx_write (fx, "/ws/f", "hello\n");
  fx->mount_args = g_strjoinv (" ", (char **)argv_tmpl);
  assert_int_equal (test_run_cmd (argv_tmpl, &out, &err), 0);
  fx->mounted = true;
  fx->daemon = atoi (strstr (out, "daemon pid ") + strlen ("daemon pid "));
  p = strstr (out, "run directory ");
  assert_non_null (p);
  run_dir = g_strndup (p + strlen ("run directory "), strcspn (p + strlen ("run directory "), "\n"));
  assert_true (g_str_has_prefix (run_dir, fx->state_dir));
  assert_int_equal (stat (run_dir, &st), 0);
  assert_int_equal (st.st_mode & 0777, 0700);
  touch_through (fx);
  mfx_unmount (fx);
  log = g_build_filename (run_dir, "access.jsonl", NULL);
  pol = g_build_filename (run_dir, "policy.json", NULL);
  assert_int_equal (stat (pol, &st), 0);
  {
    g_autofree char *text = NULL;
    assert_true (g_file_get_contents (log, &text, NULL, NULL));
    assert_true (test_log_has (text, "\"op\":\"close\"", "\"bytes_read\":6", NULL));
  }
}

/* A client killed while it holds a file open leaves a complete log: the
 * kernel releases its handle, the view logs the close with every byte the
 * client wrote, and the records are gap-free, one JSON object per line. */
MFX_CASE (test_killed_client)
{
  int ready[2];
  pid_t client;
  int status;

  mfx_write (fx, "/ws/f", "hello\n");
  mfx_mount (fx, policy_text, NULL);
  assert_int_equal (pipe2 (ready, O_CLOEXEC), 0);
  client = fork ();
  assert_true (client >= 0);
  if (client == 0)
    {
      g_autofree char *p = mfx_m (fx, "/ws/big");
      char block[4096];
      int fd = open (p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      memset (block, 'x', sizeof block);
      for (int i = 0; fd >= 0 && i < 3; i++)
        if (write (fd, block, sizeof block) != (ssize_t)sizeof block)
          _exit (2);
      if (fd < 0 || write (ready[1], "r", 1) != 1)
        _exit (1);
      for (;;)
        pause ();
    }
  close (ready[1]);
  {
    char c;
    assert_int_equal (read (ready[0], &c, 1), 1);
  }
  close (ready[0]);
  assert_int_equal (kill (client, SIGKILL), 0);
  assert_int_equal (waitpid (client, &status, 0), client);
  assert_true (WIFSIGNALED (status));
  mfx_unmount (fx);

  {
    g_autofree char *host = mfx_h (fx, "/ws/big");
    struct stat st;
    assert_int_equal (stat (host, &st), 0);
    assert_int_equal (st.st_size, 3 * 4096);
  }
  g_autofree char *log = mfx_log (fx);
  g_autofree char *path = mfx_h (fx, "/ws/big");
  g_autofree char *frag = g_strdup_printf ("\"path\":\"%s\"", path);
  if (!test_log_has (log, "\"op\":\"close\"", frag, "\"bytes_written\":12288", NULL))
    fail_msg ("no close record with the 12288 bytes the killed client wrote:\n%s", log);
  if (!test_log_has (log, "\"op\":\"create\"", frag, NULL))
    fail_msg ("no create record for the killed client's file:\n%s", log);
  /* every line one object, seq 1..N without a gap */
  g_auto (GStrv) lines = g_strsplit (log, "\n", -1);
  guint64 expect = 1;
  for (guint i = 0; lines[i] != NULL && lines[i][0] != '\0'; i++)
    {
      const char *q = strstr (lines[i], "\"seq\":");
      if (lines[i][0] != '{' || !g_str_has_suffix (lines[i], "}") || q == NULL)
        fail_msg ("line %u is not a record: %s", i + 1, lines[i]);
      if (g_ascii_strtoull (q + strlen ("\"seq\":"), NULL, 10) != expect)
        fail_msg ("line %u: seq is not %" G_GUINT64_FORMAT ": %s", i + 1, expect, lines[i]);
      expect++;
    }
  assert_true (expect > 2);
}

/* The second mount and the follower of test_two_mounts_one_log_followed,
 * for its teardown to end even when it failed. */
static MFx *second_fx;
static pid_t follower_pid;

static int
teardown_two (void **state)
{
  MState *ms = *state;

  if (follower_pid > 0)
    test_kill_child (&follower_pid, SIGKILL);
  if (second_fx != NULL)
    mfx_free (second_fx, !ms->passed);
  second_fx = NULL;
  return mfx_teardown (state);
}

static guint
rotated_beside (const char *log_path)
{
  g_autofree char *dir = g_path_get_dirname (log_path);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  guint n = 0;

  assert_non_null (d);
  while ((name = g_dir_read_name (d)) != NULL)
    n += g_regex_match_simple ("^access\\.[0-9]{12}-[0-9]{12}(\\.[0-9]+)?\\.jsonl$", name, 0, 0);
  return n;
}

/* Each "RUN SEQ" of the records in TEXT (`log --json`). */
static GHashTable *
records_of (const char *text)
{
  GHashTable *got = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);

  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_autoptr (JsonParser) parser = json_parser_new ();
      JsonObject *o;

      if (*lines[i] == '\0' || !json_parser_load_from_data (parser, lines[i], -1, NULL))
        continue;
      o = json_node_get_object (json_parser_get_root (parser));
      if (json_object_has_member (o, "run") && json_object_has_member (o, "seq"))
        g_hash_table_add (got, g_strdup_printf ("%s %" G_GINT64_FORMAT, json_object_get_string_member (o, "run"),
                                                json_object_get_int_member (o, "seq")));
    }
  return got;
}

/* Two mounts write one log (--log), the second joining the first's live
 * file, each rotating it: each renames the live file the other writes in,
 * and the other writes on in it under its rotated name.  A follower (`log
 * --follow`), started before either, shows every record the log holds,
 * each once, and says no record is missing; it had shown 1,100 of 1,200,
 * without a word.  And `log` read afterwards says none is missing: it said
 * "seq jumps" of records it showed afterwards. */
MFX_CASE (test_two_mounts_one_log_followed)
{
  MFx *fx2 = second_fx = mfx_new (fx->test_name);
  const char *out_path = test_dir_path (fx->dir, "follower.out");
  const char *err_path = test_dir_path (fx->dir, "follower.err");
  g_autofree char *ended = NULL;
  g_autoptr (GHashTable) all = NULL;
  guint rotated = 0, runs = 0;
  pid_t *follower = &follower_pid;

  for (guint i = 0; i < 40; i++)
    {
      g_autofree char *rel = g_strdup_printf ("/ws/f%02u", i);
      mfx_write (fx, rel, "x\n");
      mfx_write (fx2, rel, "x\n");
    }
  fx2->log_path = fx->log_path;
  *follower = fork ();
  assert_true (*follower >= 0);
  if (*follower == 0)
    {
      int out = open (out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      int err = open (err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

      if (out < 0 || err < 0 || dup2 (out, 1) < 0 || dup2 (err, 2) < 0)
        _exit (127);
      execl (test_bin (), test_bin (), "log", "--follow", "--json", fx->log_path, (char *)NULL);
      _exit (127);
    }
  /* the first mount alone for a while (its log rotates), then the second
   * joins the live file, and opens go through one, then the other, the
   * follower reading along */
  mfx_mount (fx, policy_text, "--log-file-size", "4K", NULL);
  for (guint round = 0; round < 30; round++)
    for (guint i = 0; i < 40; i++)
      {
        MFx *on = round >= 2 && (round + i / 10) % 2 ? fx2 : fx;
        g_autofree char *rel = g_strdup_printf ("/ws/f%02u", (round * 7 + i) % 40);
        g_autofree char *p = NULL;
        g_autofree char *text = NULL;

        if (round == 2 && i == 0)
          mfx_mount (fx2, policy_text, "--log-file-size", "4K", NULL);
        p = mfx_m (on, rel);
        text = test_read_file (p);
        assert_string_equal (text, "x\n");
        if (i % 10 == 9)
          g_usleep (20 * 1000);
      }
  mfx_unmount (fx);
  mfx_unmount (fx2);
  /* what the log holds, read once it is complete, and nothing said
   * missing (the second run's writes into files the first renamed are
   * read after the first run's later files) */
  {
    const char *argv[] = { test_bin (), "log", "--json", fx->log_path, NULL };
    g_autofree char *err = NULL;

    assert_int_equal (test_run_cmd (argv, &ended, &err), 0);
    if (strstr (err, "seq jumps") != NULL)
      fail_msg ("log said records were missing:\n%s", err);
    all = records_of (ended);
  }
  {
    g_autoptr (GHashTable) run_ids = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
    GHashTableIter it;
    gpointer key;

    rotated = rotated_beside (fx->log_path);
    g_hash_table_iter_init (&it, all);
    while (g_hash_table_iter_next (&it, &key, NULL))
      g_hash_table_add (run_ids, g_strndup (key, strchr (key, ' ') - (char *)key));
    runs = g_hash_table_size (run_ids);
  }
  /* the test did what it claims: two runs, each rotating */
  assert_int_equal (runs, 2);
  assert_true (rotated >= 20);
  assert_true (g_hash_table_size (all) >= 1200);
  {
    g_autoptr (GHashTable) shown = NULL;
    g_autofree char *said = NULL;

    if (!TEST_WAIT_FOR (({
                          g_autofree char *text = test_read_file (out_path);
                          g_autoptr (GHashTable) now = records_of (text != NULL ? text : "");
                          g_hash_table_size (now) >= g_hash_table_size (all);
                        }),
                        20000))
      {
        g_autofree char *text = test_read_file (out_path);

        shown = records_of (text != NULL ? text : "");
        fail_msg ("the follower showed %u of the log's %u records", g_hash_table_size (shown), g_hash_table_size (all));
      }
    test_kill_child (follower, SIGTERM);
    said = test_read_file (err_path);
    {
      g_autofree char *text = test_read_file (out_path);
      GHashTableIter it;
      gpointer key;

      shown = records_of (text);
      /* each once */
      {
        guint lines = 0;

        for (const char *c = text; *c != '\0'; c++)
          lines += *c == '\n';
        assert_int_equal (lines, g_hash_table_size (all));
      }
      g_hash_table_iter_init (&it, all);
      while (g_hash_table_iter_next (&it, &key, NULL))
        if (!g_hash_table_contains (shown, key))
          fail_msg ("the follower never showed the record %s", (char *)key);
    }
    if (strstr (said, "seq jumps") != NULL)
      fail_msg ("the follower said records were missing:\n%s", said);
  }
  second_fx = NULL;
  mfx_free (fx2, false);
}

/* Reads through FX's mount until the log beside it has AT_LEAST rotated
 * files. */
static void
read_until_rotated (MFx *fx, guint at_least)
{
  for (guint i = 0; rotated_beside (fx->log_path) < at_least; i++)
    {
      g_autofree char *rel = g_strdup_printf ("/ws/f%02u", i % 40);
      g_autofree char *p = mfx_m (fx, rel);
      g_autofree char *text = test_read_file (p);

      assert_string_equal (text, "x\n");
      if (i == 2000)
        fail_msg ("%s: no rotation after 2,000 reads", fx->log_path);
    }
}

/* A second mount joins the live file of a first one's log; the first
 * rotates it and rotates again, and the second writes on in the file the
 * first renamed: that file is changed last, and read after the first's
 * later files.  `log` and `report` show every record
 * once and say none is missing ("seq jumps" of the first's records in it,
 * which they then showed). */
MFX_CASE (test_second_mount_joins_no_false_gap)
{
  MFx *fx2 = second_fx = mfx_new (fx->test_name);
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (GHashTable) all = NULL;

  for (guint i = 0; i < 40; i++)
    {
      g_autofree char *rel = g_strdup_printf ("/ws/f%02u", i);
      mfx_write (fx, rel, "x\n");
      mfx_write (fx2, rel, "x\n");
    }
  fx2->log_path = fx->log_path;
  mfx_mount (fx, policy_text, "--log-file-size", "4K", NULL);
  read_until_rotated (fx, 1);
  mfx_mount (fx2, policy_text, "--log-file-size", "4K", NULL);
  read_until_rotated (fx, 3);
  /* a clock tick apart: the file the second writes on in is changed last */
  g_usleep (50 * 1000);
  {
    g_autofree char *p = mfx_m (fx2, "/ws/f00");
    g_autofree char *text = test_read_file (p);

    assert_string_equal (text, "x\n");
  }
  mfx_unmount (fx);
  mfx_unmount (fx2);
  {
    const char *argv[] = { test_bin (), "log", "--json", fx->log_path, NULL };

    assert_int_equal (test_run_cmd (argv, &out, &err), 0);
    if (strstr (err, "seq jumps") != NULL || strstr (err, "missing") != NULL)
      fail_msg ("log said records were missing:\n%s", err);
    all = records_of (out);
  }
  /* the test did what it claims: two runs, the first rotating three times */
  {
    g_autoptr (GHashTable) run_ids = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
    GHashTableIter it;
    gpointer key;

    g_hash_table_iter_init (&it, all);
    while (g_hash_table_iter_next (&it, &key, NULL))
      g_hash_table_add (run_ids, g_strndup (key, strchr (key, ' ') - (char *)key));
    assert_int_equal (g_hash_table_size (run_ids), 2);
    assert_true (rotated_beside (fx->log_path) >= 3);
  }
  {
    const char *argv[] = { test_bin (), "report", fx->log_path, NULL };
    g_autofree char *rout = NULL, *rerr = NULL;

    assert_int_equal (test_run_cmd (argv, &rout, &rerr), 0);
    if (strstr (rerr, "seq jumps") != NULL)
      fail_msg ("report said records were missing:\n%s", rerr);
    test_assert_contains (rout, "seq gaps    0\n", NULL);
  }
  second_fx = NULL;
  mfx_free (fx2, false);
}

MFX_DEFINE_MAIN (MFX_TEST (test_bad_mountpoints), MFX_TEST (test_sigterm), MFX_TEST (test_killed_client),
                 MFX_TEST (test_sigint_foreground), MFX_TEST (test_external_fusermount),
                 MFX_TEST (test_open_file_at_stop), MFX_TEST (test_sigkill),
                 MFX_TEST (test_sigkill_keeps_answered_records), MFX_TEST (test_stale_mountpoint),
                 MFX_TEST (test_default_run_dir), MFX_TEST (test_many_names),
                 cmocka_unit_test_setup_teardown (test_two_mounts_one_log_followed, mfx_setup, teardown_two),
                 cmocka_unit_test_setup_teardown (test_second_mount_joins_no_false_gap, mfx_setup, teardown_two))
