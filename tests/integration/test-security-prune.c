/* fusebox — `fusebox runs --prune` against what a kept run's sandbox can
 * leave in its private /tmp.
 *
 * A 1,500-deep directory chain (with a read-only and a mode-000 directory
 * at the bottom) is pruned by a `fusebox runs --prune` limited to 64 open
 * descriptors: a walk that holds one per level fails with EMFILE.  And a
 * prune that can't finish (a mount inside the run directory: rmdir says
 * EBUSY) leaves run.json in place, so the run still shows as over and the
 * next prune, once the obstacle is gone, removes it.
 *
 * The trees are made on the host in the kept run's private /tmp after the
 * run (what a sandbox could make there; a chain that deep is a loop of
 * mkdir and chdir).  The mount is a tmpfs, unmounted in teardown.
 */
#include "tests/lib/test-run.h"

#include <sys/mount.h>
#include <sys/resource.h>

#define DEPTH 1500

static char *mounted; /* to unmount in teardown, even after a failure */

static int
teardown (void **state)
{
  if (mounted != NULL)
    {
      umount2 (mounted, MNT_DETACH);
      g_clear_pointer (&mounted, g_free);
    }
  return rfx_teardown (state);
}

/* A kept run whose private /tmp exists; returns that directory. */
static char *
kept_run (RFx *fx, char **ret_run_dir)
{
  g_autofree char *id = g_strdup ("20240101-000000-prune");
  char *run_dir = g_build_filename (fx->runs, id, NULL);
  RfxResult r;

  assert_int_equal (g_mkdir_with_parents (fx->runs, 0700), 0);
  rfx_run (fx, &r, "--keep-run", "--run-dir", run_dir, "--", "/bin/sh", "-c", "echo kept > /tmp/kept", NULL);
  if (r.status != 0)
    fail_msg ("the run failed (%d): %s", r.status, r.err);
  rfx_result_clear (&r);
  *ret_run_dir = run_dir;
  char *tmp = g_build_filename (run_dir, "private", "%2Ftmp", NULL);
  g_autofree char *kept = g_build_filename (tmp, "kept", NULL);
  if (!g_file_test (kept, G_FILE_TEST_IS_REGULAR))
    fail_msg ("the run's private /tmp is not %s", tmp);
  return tmp;
}

/* DEPTH directories "d" one in the other below DIR, made with one
 * descriptor at a time. */
static void
make_chain (const char *dir)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  assert_true (fd >= 0);
  for (int i = 0; i < DEPTH; i++)
    {
      assert_int_equal (mkdirat (fd, "d", 0755), 0);
      int next = openat (fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      assert_true (next >= 0);
      close (fd);
      fd = next;
    }
  int f = openat (fd, "bottom", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  assert_true (f >= 0);
  close (f);
  assert_int_equal (mkdirat (fd, "ro", 0755), 0);
  f = openat (fd, "ro/file", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  assert_true (f >= 0);
  close (f);
  assert_int_equal (fchmodat (fd, "ro", 0555, 0), 0);
  assert_int_equal (mkdirat (fd, "none", 0), 0);
  close (fd);
}

/* `fusebox runs ARGS` with at most NOFILE descriptors. */
static int
runs (RFx *fx, rlim_t nofile, char **ret_out, char **ret_err, const char *arg)
{
  const char *argv[] = { test_bin (), "runs", arg, NULL };
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  struct rlimit old, lim;
  int status;
  gboolean ok;

  assert_int_equal (getrlimit (RLIMIT_NOFILE, &old), 0);
  lim = old;
  lim.rlim_cur = nofile;
  /* inherited by the child; ours again right after */
  assert_int_equal (setrlimit (RLIMIT_NOFILE, &lim), 0);
  rfx_set_repro (fx, (char **)argv);
  ok = g_spawn_sync (fx->ws, (char **)argv, env, G_SPAWN_DEFAULT, NULL, NULL, ret_out, ret_err, &status, &error);
  setrlimit (RLIMIT_NOFILE, &old);
  if (!ok)
    fail_msg ("spawn: %s", error->message);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

RFX_CASE (test_prune_deep_tree)
{
  g_autofree char *run_dir = NULL;
  g_autofree char *tmp = kept_run (fx, &run_dir);
  g_autofree char *out = NULL, *err = NULL;

  make_chain (tmp);
  int status = runs (fx, 64, &out, &err, "--prune");
  if (status != 0)
    fail_msg ("runs --prune exited %d:\n%s%s", status, out, err);
  assert_non_null (strstr (out, "removed"));
  assert_false (g_file_test (run_dir, G_FILE_TEST_EXISTS));
}

RFX_CASE (test_failed_prune_retries)
{
  g_autofree char *run_dir = NULL;
  g_autofree char *tmp = kept_run (fx, &run_dir);
  g_autofree char *busy = g_build_filename (tmp, "busy", NULL);
  g_autofree char *run_json = g_build_filename (run_dir, "run.json", NULL);
  g_autofree char *out = NULL, *err = NULL;

  make_chain (tmp);
  assert_int_equal (mkdir (busy, 0755), 0);
  if (mount ("fusebox-test", busy, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") < 0)
    {
      g_autofree char *why = g_strdup_printf ("can't mount a tmpfs on %s: %s", busy, g_strerror (errno));
      test_skip_or_fail (why);
    }
  mounted = g_strdup (busy);
  {
    g_autofree char *inside = g_build_filename (busy, "inside", NULL);
    test_write (inside, "not the prune's to remove\n", 0644);
  }

  /* the mount can't be removed: the prune fails, run.json stays */
  assert_int_equal (runs (fx, 64, &out, &err, "--prune"), 1);
  assert_non_null (strstr (err, run_dir));
  assert_true (g_file_test (run_json, G_FILE_TEST_IS_REGULAR));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  assert_int_equal (runs (fx, 64, &out, &err, "--json"), 0);
  {
    g_autoptr (JsonObject) o = test_parse_object (out);
    assert_string_equal (test_json_str (o, "state"), "over");
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* obstacle gone: the next prune finishes */
  assert_int_equal (umount2 (busy, 0), 0);
  g_clear_pointer (&mounted, g_free);
  int status = runs (fx, 64, &out, &err, "--prune");
  if (status != 0)
    fail_msg ("the second runs --prune exited %d:\n%s%s", status, out, err);
  assert_false (g_file_test (run_dir, G_FILE_TEST_EXISTS));
}

RFX_DEFINE_MAIN (NULL, NULL, cmocka_unit_test_setup_teardown (test_prune_deep_tree, rfx_setup, teardown),
                 cmocka_unit_test_setup_teardown (test_failed_prune_retries, rfx_setup, teardown))
