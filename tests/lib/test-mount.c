/* fusebox — the `fusebox mount` fixture of tests/lib/test-mount.h. */
#include <signal.h>
#include <sys/mount.h>

#include "tests/lib/test-mount.h"

void
mfx_require (void)
{
  test_host_require ("fuse", "these tests mount");
  test_host_require ("root", "these tests need root (allow_other, mounting as other users)");
  if (!g_file_test (test_bin (), G_FILE_TEST_IS_EXECUTABLE))
    test_skip_or_fail ("FUSEBOX_BIN is not an executable");
}

char *
mfx_h (MFx *fx, const char *rel)
{
  return g_strconcat (fx->host, rel, NULL);
}

char *
mfx_m (MFx *fx, const char *rel)
{
  return g_strconcat (fx->mnt, fx->host, rel, NULL);
}

const char *
mfx_on_host (MFx *fx, const char *rel)
{
  return test_dir_keep (fx->dir, mfx_h (fx, rel));
}

const char *
mfx_in_mount (MFx *fx, const char *rel)
{
  return test_dir_keep (fx->dir, mfx_m (fx, rel));
}

void
mfx_write (MFx *fx, const char *rel, const char *content)
{
  g_autofree char *path = mfx_h (fx, rel);
  g_autofree char *dir = g_path_get_dirname (path);

  assert_int_equal (g_mkdir_with_parents (dir, 0755), 0);
  test_write_file (path, content);
}

void
mfx_mkdir (MFx *fx, const char *rel)
{
  g_autofree char *path = mfx_h (fx, rel);

  assert_int_equal (g_mkdir_with_parents (path, 0755), 0);
}

void
mfx_assert_host_readable (MFx *fx, const char *rel)
{
  g_autofree char *path = mfx_h (fx, rel);

  test_assert_host_readable (path);
}

char *
mfx_sum (MFx *fx, const char *rel)
{
  g_autofree char *path = mfx_h (fx, rel);

  return test_tree_sum (path, rel);
}

MFx *
mfx_new (const char *test_name)
{
  MFx *fx = g_new0 (MFx, 1);

  fx->dir = test_dir_new (test_tmpdir ("fusebox-mount"));
  fx->tmp = fx->dir->path;
  chmod (fx->tmp, 0755);
  fx->host = test_dir_mkdir (fx->dir, "h", 0755);
  fx->mnt = test_dir_mkdir (fx->dir, "mnt", 0755);
  fx->policy_path = test_dir_path (fx->dir, "policy.json");
  fx->log_path = test_dir_path (fx->dir, "access.jsonl");
  fx->state_dir = test_dir_path (fx->dir, "state");
  fx->test_name = test_name;
  g_setenv ("XDG_STATE_HOME", fx->state_dir, TRUE);
  return fx;
}

void
mfx_mount (MFx *fx, const char *template, ...)
{
  g_autoptr (GString) text = g_string_new (template);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *out = NULL, *err = NULL;
  const char *arg;
  const char *pidstr;
  va_list ap;
  int status;

  g_string_replace (text, "@H@", fx->host, 0);
  test_write_file (fx->policy_path, text->str);
  g_ptr_array_add (argv, (char *)test_bin ());
  g_ptr_array_add (argv, (char *)"mount");
  g_ptr_array_add (argv, (char *)"--policy");
  g_ptr_array_add (argv, fx->policy_path);
  g_ptr_array_add (argv, (char *)"--log");
  g_ptr_array_add (argv, fx->log_path);
  va_start (ap, template);
  while ((arg = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, (char *)arg);
  va_end (ap);
  g_ptr_array_add (argv, fx->mnt);
  g_ptr_array_add (argv, NULL);
  g_free (fx->mount_args);
  fx->mount_args = g_strjoinv (" ", (char **)argv->pdata);
  status = test_run_cmd ((const char *const *)argv->pdata, &out, &err);
  if (status != 0)
    fail_msg ("%s failed (%d):\n%s%s", fx->mount_args, status, out, err);
  fx->mounted = true;
  pidstr = strstr (out, "daemon pid ");
  if (pidstr == NULL)
    fail_msg ("no daemon pid in the output of %s:\n%s", fx->mount_args, out);
  fx->daemon = (pid_t)atoi (pidstr + strlen ("daemon pid "));
  assert_true (test_is_mounted (fx->mnt));
}

void
mfx_unmount (MFx *fx)
{
  const char *argv[] = { "fusermount3", "-u", "-q", fx->mnt, NULL };

  if (fx->mounted && test_is_mounted (fx->mnt))
    {
      if (test_run_cmd (argv, NULL, NULL) != 0)
        umount2 (fx->mnt, MNT_DETACH);
    }
  fx->mounted = false;
  if (fx->daemon > 0)
    {
      /* the daemon ends by itself once unmounted; make sure it does */
      if (!TEST_WAIT_FOR (!test_pid_alive (fx->daemon), 10000))
        {
          kill (fx->daemon, SIGTERM);
          if (!TEST_WAIT_FOR (!test_pid_alive (fx->daemon), 3000))
            kill (fx->daemon, SIGKILL);
        }
    }
  fx->daemon = 0;
}

void
mfx_kill_daemon (MFx *fx, int sig)
{
  assert_int_equal (kill (fx->daemon, sig), 0);
  if (!TEST_WAIT_FOR (!test_pid_alive (fx->daemon), 30000))
    fail_msg ("the daemon (pid %d) lives on 30 s after signal %d", (int)fx->daemon, sig);
}

void
mfx_wait_unmounted (MFx *fx)
{
  if (!TEST_WAIT_FOR (!test_is_mounted (fx->mnt), 30000))
    fail_msg ("%s is still mounted 30 s later (daemon pid %d)", fx->mnt, (int)fx->daemon);
  fx->mounted = false;
}

char *
mfx_log (MFx *fx)
{
  char *text = test_read_file (fx->log_path);

  return text != NULL ? text : g_strdup ("");
}

void
mfx_free (MFx *fx, bool failed)
{
  mfx_unmount (fx);
  if (failed)
    fprintf (stderr,
             "reproduce: %s (the host tree, policy and log are kept in %s; repeat the failing step of %s there)\n"
             "   or rerun this test alone: FUSEBOX_BIN=%s FB_TEST_ONLY=%s %s\n",
             fx->mount_args != NULL ? fx->mount_args : "(nothing was mounted)", fx->tmp, fx->test_name, test_bin (),
             fx->test_name, g_get_prgname () != NULL ? g_get_prgname () : "the test program");
  /* never descend into a mount that is somehow still there */
  test_dir_free (fx->dir, !failed && !test_is_mounted (fx->mnt));
  g_free (fx->mount_args);
  g_free (fx);
}

int
mfx_setup (void **state)
{
  MState *ms = g_new0 (MState, 1);

  ms->fx = mfx_new ("?");
  *state = ms;
  return 0;
}

int
mfx_teardown (void **state)
{
  MState *ms = *state;

  mfx_free (ms->fx, !ms->passed);
  g_free (ms);
  return 0;
}

void
mfx_run_case (void **state, const char *name, void (*body) (MFx *fx))
{
  MState *ms = *state;

  ms->fx->test_name = name;
  body (ms->fx);
  ms->passed = true;
}

int
mfx_main (int argc, char **argv, const struct CMUnitTest *tests, size_t n)
{
  mfx_require ();
  return test_run_group (argv[0], tests, n, NULL, NULL);
}
