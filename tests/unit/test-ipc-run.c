/* fusebox — run directories: ids, the XDG root, 0700 creation (parents
 * too), refusing a run directory that isn't plainly ours, and resolving what
 * a user typed (run id, run directory, file, nothing) to a log file. */
#include "tests/unit/test-ipc-util.h"

#include <linux/fs.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct
{
  char *dir;
  char *old_state;
  char *old_home;
} Fixture;

static int
setup (void **state)
{
  Fixture *f = g_new0 (Fixture, 1);
  g_autofree char *st = NULL;

  f->dir = test_tmpdir ("fusebox-ipc");
  f->old_state = g_strdup (g_getenv ("XDG_STATE_HOME"));
  f->old_home = g_strdup (g_getenv ("HOME"));
  st = g_build_filename (f->dir, "state", NULL);
  g_setenv ("XDG_STATE_HOME", st, TRUE);
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  Fixture *f = *state;

  if (f->old_state != NULL)
    g_setenv ("XDG_STATE_HOME", f->old_state, TRUE);
  else
    g_unsetenv ("XDG_STATE_HOME");
  if (f->old_home != NULL)
    g_setenv ("HOME", f->old_home, TRUE);
  test_rm_rf (f->dir);
  g_free (f->dir);
  g_free (f->old_state);
  g_free (f->old_home);
  g_free (f);
  return 0;
}

static void
test_new_id (void **state)
{
  g_autofree char *a = fb_run_new_id ();
  g_autofree char *b = fb_run_new_id ();
  g_autoptr (GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *today = g_date_time_format (now, "%Y%m%d");

  assert_true (g_regex_match_simple ("^[0-9]{8}-[0-9]{6}-[a-z0-9]{6}$", a, 0, 0));
  assert_string_not_equal (a, b);
  /* UTC date first, so names sort by start time (allow a midnight tick) */
  if (!g_str_has_prefix (a, today))
    {
      g_autoptr (GDateTime) before = g_date_time_add_days (now, -1);
      g_autofree char *yesterday = g_date_time_format (before, "%Y%m%d");
      assert_true (g_str_has_prefix (a, yesterday));
    }
}

static void
test_root (void **state)
{
  Fixture *f = *state;
  g_autofree char *expect = g_build_filename (f->dir, "state", "fusebox", "runs", NULL);
  g_autofree char *root = fb_run_dir_root ();

  assert_string_equal (root, expect);

  /* a relative XDG_STATE_HOME is invalid per the spec: ignored */
  g_setenv ("XDG_STATE_HOME", "relative/state", TRUE);
  g_setenv ("HOME", "/root", TRUE);
  g_free (root);
  root = fb_run_dir_root ();
  assert_string_equal (root, "/root/.local/state/fusebox/runs");

  g_unsetenv ("XDG_STATE_HOME");
  g_setenv ("HOME", "/home/someone", TRUE);
  g_free (root);
  root = fb_run_dir_root ();
  assert_string_equal (root, "/home/someone/.local/state/fusebox/runs");

  /* a relative HOME is not taken either: the user's entry is (a relative
   * root would be hidden from no view, which takes only absolute paths) */
  g_setenv ("HOME", "relative/home", TRUE);
  g_free (root);
  root = fb_run_dir_root ();
  assert_true (g_path_is_absolute (root));
  assert_true (g_str_has_suffix (root, "/.local/state/fusebox/runs"));
}

static void
test_create (void **state)
{
  Fixture *f = *state;
  g_autoptr (GError) error = NULL;
  mode_t old_umask = umask (0); /* 0700 must not come from the umask */
  g_autofree char *dir = fb_run_dir_create ("20240501-120000-abcdef", &error);
  g_autofree char *state_dir = g_build_filename (f->dir, "state", NULL);
  g_autofree char *fusebox_dir = g_build_filename (f->dir, "state", "fusebox", NULL);
  g_autofree char *runs = g_build_filename (f->dir, "state", "fusebox", "runs", NULL);
  g_autofree char *expect = g_build_filename (runs, "20240501-120000-abcdef", NULL);

  umask (old_umask);
  assert_non_null (dir);
  assert_string_equal (dir, expect);
  assert_int_equal (test_mode_of (dir), 0700);
  assert_int_equal (test_mode_of (runs), 0700);
  assert_int_equal (test_mode_of (fusebox_dir), 0700);
  assert_int_equal (test_mode_of (state_dir), 0700);

  /* again: our own 0700 directory is reused */
  {
    g_autofree char *again = fb_run_dir_create ("20240501-120000-abcdef", &error);
    assert_non_null (again);
  }
  /* a directory others can enter is refused, naming it */
  assert_int_equal (chmod (dir, 0755), 0);
  {
    g_autofree char *again = fb_run_dir_create ("20240501-120000-abcdef", &error);
    assert_null (again);
    assert_non_null (strstr (error->message, dir));
    g_clear_error (&error);
  }
  /* a symlink in its place is refused */
  {
    g_autofree char *link = g_build_filename (runs, "linked", NULL);
    g_autofree char *again = NULL;

    assert_int_equal (symlink (f->dir, link), 0);
    again = fb_run_dir_create ("linked", &error);
    assert_null (again);
    assert_non_null (error);
    g_clear_error (&error);
  }
  /* ids that are not one name */
  {
    const char *bad[] = { "", "a/b", "..", "." };

    for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
      {
        g_autofree char *d = fb_run_dir_create (bad[i], &error);
        assert_null (d);
        assert_true (g_error_matches (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID));
        g_clear_error (&error);
      }
  }
}

/* A run's files are written through its directory's descriptor: once a
 * sandbox has renamed the directory's parent and put a link in its place
 * (a --run-dir in a workspace), run.json still goes to the run's own
 * directory, never where the link leads.  A --run-dir that is a link
 * (one an earlier sandbox may have put there) is refused. */
static void
test_written_through_descriptor (void **state)
{
  Fixture *f = *state;
  g_autofree char *ws = g_build_filename (f->dir, "ws", NULL);
  g_autofree char *parent = g_build_filename (ws, "a", NULL);
  g_autofree char *run_dir = g_build_filename (parent, "b", NULL);
  g_autofree char *moved = g_build_filename (ws, "a.old", "b", "run.json", NULL);
  g_autofree char *victim = g_build_filename (f->dir, "victim", NULL);
  g_autofree char *victim_b = g_build_filename (victim, "b", NULL);
  g_autofree char *victim_json = g_build_filename (victim_b, "run.json", NULL);
  g_autofree char *link = g_build_filename (ws, "link", NULL);
  g_autofree char *text = NULL;
  g_autoptr (GError) error = NULL;
  FbRunOptions ro = { .kind = FB_RUN_KIND_RUN, .run_dir = run_dir, .workspace = f->dir };
  FbPolicyVars vars = { .workspace = f->dir, .home = "/root", .run = run_dir };
  g_autoptr (FbPolicy) policy = fb_policy_load_data (
    "{\"version\":1,\"rules\":[{\"path\":\"/\",\"access\":\"read\",\"why\":\"t\"}]}", -1, "test", &vars, &error);
  FbRun *run = fb_run_new (&ro);

  assert_non_null (policy);
  assert_int_equal (g_mkdir_with_parents (victim_b, 0700), 0);
  assert_true (fb_run_create (run, policy, &error));
  assert_true (fb_run_start (run, &error));
  /* the sandbox's move */
  {
    g_autofree char *old = g_build_filename (ws, "a.old", NULL);
    assert_int_equal (rename (parent, old), 0);
    assert_int_equal (symlink (victim, parent), 0);
  }
  /* the log too: opened once the sandbox runs */
  {
    FbAccessLogOptions lo = { 0 };
    assert_non_null (fb_run_open_log (run, &lo, &error));
    assert_true (fb_run_close_log (run, &error));
  }
  /* and mount's mount.log: made new, never one that is there already */
  {
    g_autofree char *moved_err = g_build_filename (ws, "a.old", "b", "mount.log", NULL);
    g_autofree char *victim_err = g_build_filename (victim_b, "mount.log", NULL);
    int fd = fb_run_open_new (run, "mount.log", 0600);
    struct stat st;

    assert_true (fd >= 0);
    close (fd);
    assert_int_equal (stat (moved_err, &st), 0);
    assert_int_equal (st.st_mode & 07777, 0600);
    assert_false (g_file_test (victim_err, G_FILE_TEST_EXISTS));
    assert_int_equal (fb_run_open_new (run, "mount.log", 0600), -EEXIST);
  }
  assert_true (fb_run_end (run, 3, &error));
  fb_run_free (run);
  assert_false (g_file_test (victim_json, G_FILE_TEST_EXISTS));
  assert_true (g_file_get_contents (moved, &text, NULL, NULL));
  assert_non_null (strstr (text, "\"exit_status\" : 3"));
  {
    g_autofree char *moved_log = g_build_filename (ws, "a.old", "b", "access.jsonl", NULL);
    g_autofree char *victim_log = g_build_filename (victim_b, "access.jsonl", NULL);
    assert_true (g_file_test (moved_log, G_FILE_TEST_IS_REGULAR));
    assert_false (g_file_test (victim_log, G_FILE_TEST_EXISTS));
  }

  /* a link as --run-dir, to an empty directory */
  {
    g_autofree char *empty = g_build_filename (f->dir, "empty", NULL);
    FbRunOptions lo = { .kind = FB_RUN_KIND_RUN, .run_dir = link, .workspace = f->dir };
    FbRun *linked = fb_run_new (&lo);

    assert_int_equal (mkdir (empty, 0700), 0);
    assert_int_equal (symlink (empty, link), 0);
    assert_false (fb_run_create (linked, policy, &error));
    assert_non_null (strstr (error->message, "is a symbolic link"));
    fb_run_free (linked);
    {
      g_autoptr (GDir) d = g_dir_open (empty, 0, NULL);
      assert_non_null (d);
      assert_null (g_dir_read_name (d));
    }
  }
}

/* A --run-dir whose name another process keeps exchanging with a link to a
 * host directory (an earlier sandbox, in a workspace): whatever the run
 * does to its directory after the first look (the emptiness, the chmod to
 * 0700) is done through the one descriptor it opened without following a
 * link.  By path, root's chmod changed the link's target: a host
 * directory (or a set-uid file) made 0700. */
static void
test_run_dir_exchanged (void **state)
{
  Fixture *f = *state;
  g_autofree char *target = g_build_filename (f->dir, "target", NULL);
  g_autofree char *ws = g_build_filename (f->dir, "ws", NULL);
  FbPolicyVars vars = { .workspace = f->dir, .home = "/root", .run = ws };
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) policy = fb_policy_load_data (
    "{\"version\":1,\"rules\":[{\"path\":\"/\",\"access\":\"read\",\"why\":\"t\"}]}", -1, "test", &vars, &error);
  guint made = 0;

  assert_non_null (policy);
  assert_int_equal (mkdir (target, 0755), 0);
  assert_int_equal (chmod (target, 0755), 0);
  assert_int_equal (mkdir (ws, 0755), 0);
  for (guint i = 0; i < 300; i++)
    {
      g_autofree char *dir = g_strdup_printf ("%s/run-%u", ws, i);
      g_autofree char *link = g_strdup_printf ("%s/link-%u", ws, i);
      FbRunOptions ro = { .kind = FB_RUN_KIND_RUN, .run_dir = dir, .workspace = f->dir };
      TestExchanger *x;
      FbRun *run;

      assert_int_equal (mkdir (dir, 0755), 0);
      assert_int_equal (symlink (target, link), 0);
      /* a run directory to be (an empty directory) and a link to a
       * directory of the host's, swapped by name */
      x = test_exchanger_start (dir, link);
      run = fb_run_new (&ro);
      if (fb_run_create (run, policy, &error))
        made++;
      g_clear_error (&error);
      fb_run_free (run);
      test_exchanger_stop (x);
      assert_int_equal (test_mode_of (target), 0755);
    }
  /* the race was run: some runs found their directory in place */
  assert_true (made > 0);
}

/* fb_run_resolve_log finds WANT for WHAT. */
static void
assert_resolves (const char *what, const char *want)
{
  g_autoptr (GError) error = NULL;
  gboolean absent = TRUE;
  g_autofree char *got = fb_run_resolve_log (what, FALSE, &absent, &error);

  if (got == NULL)
    fail_msg ("%s: %s", what != NULL ? what : "(the newest run)", error->message);
  assert_string_equal (got, want);
  assert_false (absent);
}

/* Followed, fb_run_resolve_log finds WANT for WHAT, said absent or not. */
static void
assert_follow_resolves (const char *what, const char *want, gboolean absent)
{
  g_autoptr (GError) error = NULL;
  gboolean got_absent = !absent;
  g_autofree char *got = fb_run_resolve_log (what, TRUE, &got_absent, &error);

  if (got == NULL)
    fail_msg ("%s, followed: %s", what, error->message);
  assert_string_equal (got, want);
  assert_int_equal (got_absent, absent);
}

static void
test_resolve (void **state)
{
  Fixture *f = *state;
  g_autoptr (GError) error = NULL;
  g_autofree char *r1 = fb_run_dir_create ("20240501-120000-aaaaaa", &error);
  g_autofree char *r2 = fb_run_dir_create ("20240502-090000-bbbbbb", &error);
  g_autofree char *log1 = g_build_filename (r1, "access.jsonl", NULL);
  g_autofree char *log2 = g_build_filename (r2, "access.jsonl", NULL);
  g_autofree char *file = g_build_filename (f->dir, "some.jsonl", NULL);
  g_autofree char *empty_dir = g_build_filename (f->dir, "empty", NULL);
  char *got;

  test_write_file (log1, "");
  test_write_file (file, "");
  assert_int_equal (mkdir (empty_dir, 0700), 0);

  assert_resolves (file, file);                     /* a file */
  assert_resolves (r1, log1);                       /* a run directory */
  assert_resolves ("20240501-120000-aaaaaa", log1); /* a run id */
  assert_resolves ("20240502-090000-bbbbbb", log2); /* a run id whose log isn't written yet: the path to follow */
  assert_resolves (NULL, log2);                     /* nothing: the newest run */

  /* errors name what was tried */
  got = fb_run_resolve_log ("20990101-000000-nosuch", FALSE, NULL, &error);
  assert_null (got);
  assert_true (g_error_matches (error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND));
  assert_non_null (strstr (error->message, "20990101-000000-nosuch"));
  assert_non_null (strstr (error->message, "fusebox/runs"));
  g_clear_error (&error);

  got = fb_run_resolve_log (empty_dir, FALSE, NULL, &error);
  assert_null (got);
  assert_non_null (strstr (error->message, "access.jsonl"));
  g_clear_error (&error);

  got = fb_run_resolve_log ("/no/such/dir/x.jsonl", FALSE, NULL, &error);
  assert_null (got);
  assert_non_null (strstr (error->message, "/no/such/dir/x.jsonl"));
  g_clear_error (&error);

  /* followed, a log not written yet is the answer, said absent: in a
   * directory without one, and at a name not there; a directory that is
   * not there is still an error */
  {
    g_autofree char *in_empty = g_build_filename (empty_dir, "access.jsonl", NULL);
    g_autofree char *later = g_build_filename (f->dir, "later.jsonl", NULL);

    assert_follow_resolves (empty_dir, in_empty, TRUE);
    assert_follow_resolves (later, later, TRUE);
    assert_follow_resolves (file, file, FALSE);
    got = fb_run_resolve_log ("/no/such/dir/x.jsonl", TRUE, NULL, &error);
    assert_null (got);
    assert_non_null (strstr (error->message, "/no/such/dir/x.jsonl"));
    g_clear_error (&error);
  }
}

static void
test_no_runs (void **state)
{
  g_autoptr (GError) error = NULL;
  char *got = fb_run_resolve_log (NULL, TRUE, NULL, &error);

  assert_null (got);
  assert_true (g_error_matches (error, FB_IPC_ERROR, FB_IPC_ERROR_NOT_FOUND));
  assert_non_null (strstr (error->message, "no runs in"));
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_new_id),
                  cmocka_unit_test_setup_teardown (test_root, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_create, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_written_through_descriptor, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_run_dir_exchanged, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_resolve, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_no_runs, setup, teardown))
