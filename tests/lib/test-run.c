/* fusebox — the `fusebox run` fixture of tests/lib/test-run.h. */
#include <signal.h>
#include <sys/ipc.h>
#include <sys/shm.h>

#include "tests/lib/test-run.h"

void
rfx_require (void)
{
  g_autofree char *out = NULL;
  const char *lacks;
  int status = 0;
  const char *argv[] = { test_bin (), "check", "--quiet", NULL };

  if (!g_file_test (test_bin (), G_FILE_TEST_IS_EXECUTABLE))
    test_skip_or_fail ("FUSEBOX_BIN is not an executable: run with 'meson test'");
  if (g_getenv ("FUSEBOX_BUILD_ROOT") == NULL)
    test_skip_or_fail ("FUSEBOX_BUILD_ROOT is not set: run with 'meson test'");
  test_host_require ("root", "these tests need root (stand-ins in /home, ids other than yours)");
  lacks = test_host_lacks ("sandbox");
  if (lacks != NULL)
    {
      g_autofree char *why = g_strdup_printf ("%s; '%s check' says how to fix it", lacks, test_bin ());
      test_skip_or_fail (why);
    }
  if (!g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL, &status, NULL) ||
      !g_spawn_check_wait_status (status, NULL))
    {
      fprintf (stderr,
               "FAIL: '%s check' fails although this host has what a sandbox needs (user, mount and pid namespaces, "
               "a fresh procfs, FUSE, seccomp): fusebox itself is broken.  It says:\n%s",
               test_bin (), out != NULL ? out : "");
      exit (1);
    }
}

RFx *
rfx_new (void)
{
  RFx *fx = g_new0 (RFx, 1);

  fx->dir = test_dir_new (test_workdir ("fusebox-run"));
  fx->tmp = fx->dir->path;
  fx->ws = test_dir_mkdir (fx->dir, "ws", 0755);
  fx->home = test_dir_mkdir (fx->dir, "home", 0755);
  /* not kept by the TestDir: a test may point it elsewhere */
  fx->state = g_strdup (test_dir_mkdir (fx->dir, "state", 0700));
  fx->runs = test_dir_path (fx->dir, "state/fusebox/runs");
  fx->remove_paths = g_ptr_array_new_with_free_func (g_free);
  fx->shm_ids = g_array_new (FALSE, FALSE, sizeof (int));
  fx->pids = g_array_new (FALSE, FALSE, sizeof (pid_t));
  return fx;
}

void
rfx_keep_path (RFx *fx, const char *path)
{
  g_ptr_array_add (fx->remove_paths, g_strdup (path));
}

void
rfx_keep_shm (RFx *fx, int id)
{
  g_array_append_val (fx->shm_ids, id);
}

void
rfx_keep_pid (RFx *fx, pid_t pid)
{
  g_array_append_val (fx->pids, pid);
}

void
rfx_forget_pid (RFx *fx, pid_t pid)
{
  for (guint i = 0; i < fx->pids->len; i++)
    if (g_array_index (fx->pids, pid_t, i) == pid)
      g_array_index (fx->pids, pid_t, i) = 0;
}

/* Undo what the test made outside T: processes, SysV segments, stand-ins. */
static void
clean_host (RFx *fx)
{
  for (guint i = 0; i < fx->pids->len; i++)
    test_kill_child (&g_array_index (fx->pids, pid_t, i), SIGKILL);
  g_array_unref (fx->pids);
  for (guint i = 0; i < fx->shm_ids->len; i++)
    shmctl (g_array_index (fx->shm_ids, int, i), IPC_RMID, NULL);
  g_array_unref (fx->shm_ids);
  for (guint i = 0; i < fx->remove_paths->len; i++)
    test_rm_rf (fx->remove_paths->pdata[i]);
  g_ptr_array_unref (fx->remove_paths);
}

void
rfx_free (RFx *fx)
{
  clean_host (fx);
  if (!fx->passed)
    fprintf (stderr,
             "reproduce: cd %s && %s\n"
             "   (the test's files are kept in %s; rerun this test alone: FB_TEST_ONLY=%s FUSEBOX_BIN=%s "
             "FUSEBOX_BUILD_ROOT=%s %s)\n",
             fx->ws, fx->repro != NULL ? fx->repro : "(fusebox was not run)", fx->tmp, fx->test_name, test_bin (),
             g_getenv ("FUSEBOX_BUILD_ROOT"), g_get_prgname () ? g_get_prgname () : "the test program");
  test_dir_free (fx->dir, fx->passed);
  g_free (fx->state);
  g_free (fx->repro);
  g_free (fx);
}

int
rfx_setup (void **state)
{
  *state = rfx_new ();
  return 0;
}

int
rfx_teardown (void **state)
{
  rfx_free (*state);
  return 0;
}

void
rfx_run_case (void **state, const char *name, void (*body) (RFx *fx))
{
  RFx *fx = *state;

  fx->test_name = name;
  body (fx);
  fx->passed = true;
}

int
rfx_main (int argc, char **argv, int (*probe_main) (int argc, char **argv), const struct CMUnitTest *tests, size_t n,
          CMFixtureFunction group_setup)
{
  if (probe_main != NULL && argc > 1 && strcmp (argv[1], "--probe") == 0)
    return probe_main (argc - 2, argv + 2);
  rfx_require ();
  return test_run_group (argv[0], tests, n, group_setup, NULL);
}

char *
rfx_policy_ws (RFx *fx)
{
  char *path = g_build_filename (fx->tmp, "policy.json", NULL);
  g_autofree char *text =
    g_strdup_printf ("{ \"version\": 1, \"rules\": [\n"
                     "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"the system\" },\n"
                     "  { \"path\": \"%s\", \"access\": \"write\", \"why\": \"the workspace\" } ] }\n",
                     fx->ws);

  test_write (path, text, 0644);
  return path;
}

char *
rfx_stand_in_secret (RFx *fx)
{
  char *secret = g_build_filename (fx->ws, "credentials.txt", NULL);

  test_write (secret, "stand-in credentials\n", 0644);
  test_assert_host_readable (secret);
  return secret;
}

char *
rfx_policy_deny (RFx *fx, const char *name, const char *secret, const char *extra)
{
  char *path = g_build_filename (fx->tmp, name, NULL);
  g_autofree char *text =
    g_strdup_printf ("{ \"version\": 1,%s \"rules\": [\n"
                     "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"tools\" },\n"
                     "  { \"path\": \"%s\", \"access\": \"write\", \"why\": \"the workspace\" },\n"
                     "  { \"path\": \"%s\", \"access\": \"deny\", \"why\": \"credentials stay on the host\" } ] }\n",
                     extra != NULL ? extra : "", fx->ws, secret);

  test_write (path, text, 0644);
  return path;
}

char **
rfx_env (RFx *fx)
{
  char **env = g_get_environ ();
  env = g_environ_setenv (env, "HOME", fx->home, TRUE);
  if (fx->xdg_default)
    env = g_environ_unsetenv (env, "XDG_STATE_HOME");
  else
    env = g_environ_setenv (env, "XDG_STATE_HOME", fx->state, TRUE);
  return env;
}

void
rfx_set_repro (RFx *fx, char **argv)
{
  g_autoptr (GString) s = g_string_new (NULL);
  if (fx->xdg_default)
    g_string_append_printf (s, "HOME=%s XDG_STATE_HOME=", fx->home);
  else
    g_string_append_printf (s, "HOME=%s XDG_STATE_HOME=%s", fx->home, fx->state);
  for (char **a = argv; *a != NULL; a++)
    {
      g_autofree char *q = g_shell_quote (*a);
      g_string_append_c (s, ' ');
      g_string_append (s, q);
    }
  g_free (fx->repro);
  fx->repro = g_string_free (g_steal_pointer (&s), FALSE);
}

GPtrArray *
rfx_argv_va (const char *first, va_list ap)
{
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);
  const char *a;
  g_ptr_array_add (argv, g_strdup (test_bin ()));
  g_ptr_array_add (argv, g_strdup ("run"));
  g_ptr_array_add (argv, g_strdup ("--read"));
  g_ptr_array_add (argv, g_strdup (g_getenv ("FUSEBOX_BUILD_ROOT")));
  for (a = first; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (argv, g_strdup (a));
  g_ptr_array_add (argv, NULL);
  return argv;
}

void
rfx_result_clear (RfxResult *r)
{
  test_cmd_clear (r);
}

void
rfx_run_argv (RFx *fx, RfxResult *ret, char **argv)
{
  g_auto (GStrv) env = rfx_env (fx);

  rfx_set_repro (fx, argv);
  test_cmd_run (ret, fx->ws, env, NULL, argv);
}

void
rfx_run (RFx *fx, RfxResult *ret, const char *first, ...)
{
  va_list ap;
  va_start (ap, first);
  g_autoptr (GPtrArray) argv = rfx_argv_va (first, ap);
  va_end (ap);
  rfx_run_argv (fx, ret, (char **)argv->pdata);
}

void
rfx_fusebox (RFx *fx, RfxResult *ret, const char *first, ...)
{
  g_autoptr (GPtrArray) argv = NULL;
  va_list ap;

  va_start (ap, first);
  argv = test_fusebox_argv_va (first, ap);
  va_end (ap);
  rfx_run_argv (fx, ret, (char **)argv->pdata);
}

pid_t
rfx_start (RFx *fx, int *ret_stdout, const char *first, ...)
{
  va_list ap;
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  GPid pid;

  va_start (ap, first);
  g_autoptr (GPtrArray) argv = rfx_argv_va (first, ap);
  va_end (ap);
  rfx_set_repro (fx, (char **)argv->pdata);
  if (!g_spawn_async_with_pipes (fx->ws, (char **)argv->pdata, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, NULL,
                                 ret_stdout, NULL, &error))
    fail_msg ("spawn %s: %s", test_bin (), error->message);
  rfx_keep_pid (fx, pid);
  return pid;
}

int
rfx_wait (RFx *fx, pid_t pid, int cap_ms)
{
  for (int waited = 0; waited <= cap_ms; waited += 10)
    {
      int status;
      pid_t w = waitpid (pid, &status, WNOHANG);
      if (w == pid)
        {
          rfx_forget_pid (fx, pid);
          return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
        }
      g_usleep (10 * 1000);
    }
  return -1;
}

const char *
rfx_errname (int e)
{
  const char *n = strerrorname_np (e);
  return n != NULL ? n : "EUNKNOWN";
}

const char *
rfx_res (long r)
{
  return r < 0 ? rfx_errname (errno) : "OK";
}

int
rfx_probe_main (int argc, char **argv, RfxProbeOp op)
{
  for (int i = 0; i < argc;)
    {
      const char *args[3];
      g_autofree char *owned = NULL;
      int words = 0;
      const char *res;

      for (int j = 0; j < 3; j++)
        args[j] = i + 1 + j < argc ? argv[i + 1 + j] : "";
      if (strcmp (argv[i], "read") == 0)
        res = rfx_read_res (args[0]), words = 2;
      else
        res = op (argv[i], args, &words, &owned);
      if (res == NULL)
        {
          fprintf (stderr, "probe: unknown operation %s\n", argv[i]);
          return 2;
        }
      g_assert (words >= 1); /* an operation takes at least its name */
      printf ("%s\n", res);
      fflush (stdout);
      i += words;
    }
  return 0;
}

const char *
rfx_open_res (int dirfd, const char *path, int flags)
{
  int fd = openat (dirfd, path, flags | O_CLOEXEC, 0644);
  const char *res = rfx_res (fd);

  if (fd >= 0)
    close (fd);
  return res;
}

const char *
rfx_read_res (const char *path)
{
  char c;
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t n;
  int e;

  if (fd < 0)
    return rfx_errname (errno);
  n = read (fd, &c, 1);
  e = errno;
  close (fd);
  return n < 0 ? rfx_errname (e) : "OK";
}
