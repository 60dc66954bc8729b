/* fusebox — the callers of tests/lib/test-caller.h. */
#include "tests/lib/test-caller.h"

#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>

void
test_caller_init (TestCaller *c, const char *dir)
{
  memset (c, 0, sizeof *c);
  c->stdin_fd = -1;
  c->devdir = g_build_filename (dir, "caller-dev", NULL);
  c->node = g_build_filename (c->devdir, "fuse", NULL);
  assert_int_equal (g_mkdir_with_parents (c->devdir, 0755), 0);
}

void
test_caller_clear (TestCaller *c)
{
  g_clear_pointer (&c->devdir, g_free);
  g_clear_pointer (&c->node, g_free);
}

static void
caller_die (const char *step)
{
  /* async-signal-safe: this runs between fork and exec */
  const char *msg = strerror (errno);
  (void)!write (2, "caller setup: ", 14);
  (void)!write (2, step, strlen (step));
  (void)!write (2, ": ", 2);
  (void)!write (2, msg, strlen (msg));
  (void)!write (2, "\n", 1);
  _exit (TEST_CALLER_SETUP_FAILED);
}

void
test_caller_setup (gpointer data)
{
  const TestCaller *c = data;

  if (c->stdin_fd >= 0 && dup2 (c->stdin_fd, 0) < 0)
    caller_die ("stdin");
  if (c->root_groups)
    {
      gid_t groups[] = { 0 };
      if (setgroups (1, groups) < 0)
        caller_die ("setgroups {0}");
    }
  if (c->fuse_mode != 0)
    {
      if (unshare (CLONE_NEWNS) < 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        caller_die ("private mount namespace");
      /* no MS_NODEV: the node must work */
      if (mount ("tmpfs", c->devdir, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=16k") < 0)
        caller_die ("tmpfs for the node");
      if (mknod (c->node, S_IFCHR | c->fuse_mode, makedev (10, 229)) < 0 || chmod (c->node, c->fuse_mode) < 0)
        caller_die ("mknod c 10 229");
      if (mount (c->node, "/dev/fuse", NULL, MS_BIND, NULL) < 0)
        caller_die ("bind over /dev/fuse");
    }
  if (c->drop)
    {
      /* from uid 0 to another uid: the kernel clears the permitted,
       * effective and ambient capability sets */
      if (setgroups (0, NULL) < 0 || setresgid (TEST_CALLER_GID, TEST_CALLER_GID, TEST_CALLER_GID) < 0 ||
          setresuid (TEST_CALLER_UID, TEST_CALLER_UID, TEST_CALLER_UID) < 0)
        caller_die ("drop to uid/gid 1000");
    }
}

char *
test_caller_describe (const TestCaller *c)
{
  g_autoptr (GString) s = g_string_new (NULL);

  if (c->root_groups)
    g_string_append (s, "setpriv --groups 0; ");
  if (c->fuse_mode != 0)
    g_string_append_printf (s, "unshare -m; a mode %04o FUSE node bound over /dev/fuse; ", (unsigned)c->fuse_mode);
  if (c->drop)
    g_string_append (s, "setpriv --reuid 1000 --regid 1000 --clear-groups; ");
  if (c->stdin_fd >= 0)
    g_string_append (s, "stdin a fresh pty; ");
  if (s->len == 0)
    return NULL;
  g_string_truncate (s, s->len - 2);
  return g_string_free (g_steal_pointer (&s), FALSE);
}

void
test_caller_annotate (const TestCaller *c, char **line)
{
  g_autofree char *as = test_caller_describe (c);
  g_autofree char *old = *line;

  if (as == NULL)
    {
      *line = g_steal_pointer (&old);
      return;
    }
  *line = g_strdup_printf ("%s   (as: %s)", old != NULL ? old : "", as);
}

void
test_caller_run (const TestCaller *c, const char *cwd, char **envp, char **argv, TestCmd *ret)
{
  g_autoptr (GError) error = NULL;
  int status = 0;

  test_cmd_clear (ret);
  if (!g_spawn_sync (cwd, argv, envp, G_SPAWN_DEFAULT, test_caller_setup, (gpointer)c, &ret->out, &ret->err, &status,
                     &error))
    fail_msg ("spawn %s: %s", argv[0], error->message);
  ret->status = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
  if (ret->status == TEST_CALLER_SETUP_FAILED)
    fail_msg ("the caller's set-up failed: %s", ret->err);
}

int
test_caller_check (const TestCaller *c, const char *cwd, char **envp, const char *const *prefix, char **ret_out)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  int status = 0;

  for (; prefix != NULL && *prefix != NULL; prefix++)
    g_ptr_array_add (argv, (char *)*prefix);
  g_ptr_array_add (argv, (char *)test_bin ());
  g_ptr_array_add (argv, (char *)"check");
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (cwd, (char **)argv->pdata, envp, G_SPAWN_STDERR_TO_DEV_NULL, test_caller_setup, (gpointer)c,
                     ret_out, NULL, &status, &error))
    fail_msg ("spawn %s: %s", (char *)argv->pdata[0], error->message);
  assert_true (WIFEXITED (status));
  assert_int_not_equal (WEXITSTATUS (status), TEST_CALLER_SETUP_FAILED);
  return WEXITSTATUS (status);
}

void
test_caller_require_sandboxes (const TestCaller *c, const char *cwd, char **envp)
{
  g_autofree char *out = NULL;

  if (test_caller_check (c, cwd, envp, NULL, &out) != 0)
    test_skip_test (true, "uid %d can't make sandboxes here:\n%s", TEST_CALLER_UID, out);
}
