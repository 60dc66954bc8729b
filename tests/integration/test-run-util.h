/* fusebox — helpers for the integration tests of `fusebox run` (header
 * only).
 *
 * Each test works in its own directory T (under $FUSEBOX_TEST_TMPDIR or
 * /var/tmp, not /tmp: the built-in default makes /tmp private, and a test
 * needs its files at the same path on the host and in the view): the
 * workspace T/ws, a stand-in HOME T/home, XDG_STATE_HOME T/state.  `fusebox
 * run` is the real binary ($FUSEBOX_BIN), started with cwd T/ws and that
 * environment.  Everything a test makes outside T (stand-ins in /home or
 * /dev/shm, SysV segments, host processes, sandboxes still running) is
 * registered and removed in teardown, even when an assertion failed; a
 * failed test prints a command that reproduces the failing run.
 *
 * Probes: the test programs run themselves inside the sandbox
 * (`TEST --probe ...`, see rfx_self()): their build path is visible under
 * every policy the tests use, and C gives the exact errno of each attempt.
 */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cmocka.h>
#include <glib.h>
#include <json-glib/json-glib.h>

#define RFX_MAX 16

typedef struct
{
  char *tmp;        /* T */
  char *ws;         /* T/ws: the workspace and the working directory */
  char *home;       /* T/home: HOME for fusebox run */
  char *state;      /* T/state: XDG_STATE_HOME */
  char *runs;       /* T/state/fusebox/runs */
  char *repro;      /* the last fusebox command, for the repro line */
  bool xdg_default; /* leave XDG_STATE_HOME unset: runs under T/home/.local/state */
  const char *test_name;
  bool passed;
  char *remove_paths[RFX_MAX]; /* stand-ins outside T */
  int shm_ids[RFX_MAX];
  pid_t pids[RFX_MAX]; /* host processes to kill and reap */
} RFx;

static G_GNUC_UNUSED const char *
rfx_bin (void)
{
  const char *bin = g_getenv ("FUSEBOX_BIN");
  return bin != NULL ? bin : "fusebox";
}

static G_GNUC_UNUSED void
rfx_skip_or_fail (const char *why)
{
  if (g_strcmp0 (g_getenv ("FUSEBOX_TESTS_MUST_RUN"), "1") == 0)
    {
      fprintf (stderr, "FUSEBOX_TESTS_MUST_RUN=1 but %s\n", why);
      exit (1);
    }
  fprintf (stderr, "skipped: %s\n", why);
  exit (77);
}

static G_GNUC_UNUSED int
rfx_write_file (const char *path, const char *data)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  ssize_t n;
  int e;

  if (fd < 0)
    return errno;
  n = write (fd, data, strlen (data));
  e = n < 0 ? errno : 0;
  close (fd);
  return e;
}

typedef struct
{
  int step; /* index into the step names below, -1: all passed */
  int err;
} RfxProbe;

static const char *const rfx_probe_steps[] = {
  "unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID)",
  "writing /proc/self/uid_map and gid_map",
  "making the mount tree private",
  "forking pid 1 of a new pid namespace",
  "mounting a tmpfs in the new mount namespace",
  "mounting a fresh procfs for the new pid namespace",
  "opening /dev/fuse",
  "mounting a FUSE file system in the user namespace",
  "setting PR_SET_NO_NEW_PRIVS",
  "installing a seccomp filter",
};

/* pid 1 of the new pid namespace; only system calls, then _exit */
static G_GNUC_UNUSED RfxProbe
rfx_probe_pid1 (void)
{
  struct sock_filter allow[] = { BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
  struct sock_fprog prog = { .len = 1, .filter = allow };
  char opts[128];
  int fd;

  if (mount ("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") < 0)
    return (RfxProbe){ 4, errno };
  if (mkdir ("/tmp/proc", 0755) < 0 || mount ("proc", "/tmp/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return (RfxProbe){ 5, errno };
  fd = open ("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return (RfxProbe){ 6, errno };
  snprintf (opts, sizeof opts, "fd=%d,rootmode=40000,user_id=0,group_id=0", fd);
  if (mkdir ("/tmp/m", 0700) < 0 || mount ("fuse", "/tmp/m", "fuse", MS_NOSUID | MS_NODEV, opts) < 0)
    return (RfxProbe){ 7, errno };
  umount2 ("/tmp/m", MNT_DETACH);
  close (fd);
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return (RfxProbe){ 8, errno };
  if (syscall (__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
    return (RfxProbe){ 9, errno };
  return (RfxProbe){ -1, 0 };
}

static G_GNUC_UNUSED RfxProbe
rfx_probe_child (void)
{
  char map[64];
  int p[2];
  pid_t pid;
  RfxProbe r = { 3, EIO };
  uid_t uid = geteuid ();
  gid_t gid = getegid ();

  if (unshare (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) < 0)
    return (RfxProbe){ 0, errno };
  snprintf (map, sizeof map, "0 %u 1\n", (unsigned)uid);
  if ((r.err = rfx_write_file ("/proc/self/setgroups", "deny")) != 0 && r.err != ENOENT)
    return (RfxProbe){ 1, r.err };
  if ((r.err = rfx_write_file ("/proc/self/uid_map", map)) != 0)
    return (RfxProbe){ 1, r.err };
  snprintf (map, sizeof map, "0 %u 1\n", (unsigned)gid);
  if ((r.err = rfx_write_file ("/proc/self/gid_map", map)) != 0)
    return (RfxProbe){ 1, r.err };
  if (mount (NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
    return (RfxProbe){ 2, errno };
  if (pipe2 (p, O_CLOEXEC) < 0)
    return (RfxProbe){ 3, errno };
  pid = fork ();
  if (pid < 0)
    return (RfxProbe){ 3, errno };
  if (pid == 0)
    {
      RfxProbe mine = rfx_probe_pid1 ();
      (void)!write (p[1], &mine, sizeof mine);
      _exit (0);
    }
  close (p[1]);
  r = (RfxProbe){ 3, ECHILD };
  if (read (p[0], &r, sizeof r) != sizeof r)
    r = (RfxProbe){ 3, ECHILD };
  waitpid (pid, NULL, 0);
  return r;
}

/* Can this host make a sandbox?  Probed here, without fusebox, in a forked
 * child: a user namespace with our ids mapped, a mount namespace with a
 * tmpfs, a pid namespace whose pid 1 mounts a fresh procfs, a FUSE mount of
 * /dev/fuse, and a seccomp filter.  Returns NULL, or what is missing (the
 * step and its errno).  This decides whether the run tests skip: `fusebox
 * check` can't, since a broken fusebox fails its own check too. */
static G_GNUC_UNUSED char *
rfx_host_lacks (void)
{
  RfxProbe r = { 3, EIO };
  int p[2];
  pid_t pid;

  if (pipe2 (p, O_CLOEXEC) < 0)
    return g_strdup_printf ("pipe2: %s", g_strerror (errno));
  pid = fork ();
  if (pid < 0)
    return g_strdup_printf ("fork: %s", g_strerror (errno));
  if (pid == 0)
    {
      RfxProbe mine = rfx_probe_child ();
      (void)!write (p[1], &mine, sizeof mine);
      _exit (0);
    }
  close (p[1]);
  if (read (p[0], &r, sizeof r) != sizeof r)
    r = (RfxProbe){ 3, ECHILD };
  close (p[0]);
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
  if (r.step < 0)
    return NULL;
  return g_strdup_printf ("%s: %s", rfx_probe_steps[r.step], g_strerror (r.err));
}

/* Exit 77 (skip) when the host can't run `fusebox run` (no root for the
 * stand-ins in /home and other ids, or a kernel feature missing), unless
 * CI insists.  When the host has everything, `fusebox check` must pass:
 * its failure is then fusebox's own (a broken lock-down, say), and the
 * test fails instead of hiding it behind a skip. */
static G_GNUC_UNUSED void
rfx_require (void)
{
  g_autofree char *out = NULL;
  g_autofree char *lacks = NULL;
  int status = 0;
  const char *argv[] = { rfx_bin (), "check", "--quiet", NULL };

  if (!g_file_test (rfx_bin (), G_FILE_TEST_IS_EXECUTABLE))
    rfx_skip_or_fail ("FUSEBOX_BIN is not an executable: run with 'meson test'");
  if (g_getenv ("FUSEBOX_BUILD_ROOT") == NULL)
    rfx_skip_or_fail ("FUSEBOX_BUILD_ROOT is not set: run with 'meson test'");
  if (geteuid () != 0)
    rfx_skip_or_fail ("these tests need root (stand-ins in /home, ids other than yours)");
  lacks = rfx_host_lacks ();
  if (lacks != NULL)
    {
      g_autofree char *why =
        g_strdup_printf ("this host can't make sandboxes (%s); '%s check' says how to fix it", lacks, rfx_bin ());
      rfx_skip_or_fail (why);
    }
  if (!g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL, &status, NULL) ||
      !g_spawn_check_wait_status (status, NULL))
    {
      fprintf (stderr,
               "FAIL: '%s check' fails although this host has what a sandbox needs (user, mount and pid namespaces, "
               "a fresh procfs, FUSE, seccomp): fusebox itself is broken.  It says:\n%s",
               rfx_bin (), out != NULL ? out : "");
      exit (1);
    }
}

/* This test program's own path (it runs itself inside the sandbox). */
static G_GNUC_UNUSED char *
rfx_self (void)
{
  char *self = g_file_read_link ("/proc/self/exe", NULL);
  assert_non_null (self);
  return self;
}

static G_GNUC_UNUSED char *
rfx_fixture (const char *name)
{
  char *path = g_build_filename (g_getenv ("FUSEBOX_BUILD_ROOT"), "fixtures", name, NULL);
  if (access (path, X_OK) != 0)
    fail_msg ("fixture %s is missing: build it with ninja", path);
  return path;
}

static G_GNUC_UNUSED int
rfx_rm_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  if (remove (path) < 0 && errno != ENOENT)
    {
      chmod (path, 0700);
      remove (path);
    }
  return 0;
}

static G_GNUC_UNUSED void
rfx_rm_rf (const char *path)
{
  /* FTW_MOUNT: never descend into a mount, should one be there */
  nftw (path, rfx_rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static G_GNUC_UNUSED RFx *
rfx_new (void)
{
  RFx *fx = g_new0 (RFx, 1);
  const char *base = g_getenv ("FUSEBOX_TEST_TMPDIR");
  g_autofree char *templ = g_build_filename (base != NULL ? base : "/var/tmp", "fusebox-run-XXXXXX", NULL);

  fx->tmp = g_mkdtemp_full (templ, 0755) != NULL ? g_strdup (templ) : NULL;
  if (fx->tmp == NULL)
    fail_msg ("can't make a temporary directory from %s: %s", templ, g_strerror (errno));
  fx->ws = g_build_filename (fx->tmp, "ws", NULL);
  fx->home = g_build_filename (fx->tmp, "home", NULL);
  fx->state = g_build_filename (fx->tmp, "state", NULL);
  fx->runs = g_build_filename (fx->state, "fusebox", "runs", NULL);
  g_mkdir_with_parents (fx->ws, 0755);
  g_mkdir_with_parents (fx->home, 0755);
  g_mkdir_with_parents (fx->state, 0700);
  for (int i = 0; i < RFX_MAX; i++)
    fx->shm_ids[i] = -1;
  return fx;
}

static G_GNUC_UNUSED void
rfx_keep_path (RFx *fx, const char *path)
{
  for (int i = 0; i < RFX_MAX; i++)
    if (fx->remove_paths[i] == NULL)
      {
        fx->remove_paths[i] = g_strdup (path);
        return;
      }
  fail_msg ("too many stand-ins outside the test directory");
}

static G_GNUC_UNUSED void
rfx_keep_shm (RFx *fx, int id)
{
  for (int i = 0; i < RFX_MAX; i++)
    if (fx->shm_ids[i] < 0)
      {
        fx->shm_ids[i] = id;
        return;
      }
  fail_msg ("too many SysV segments");
}

static G_GNUC_UNUSED void
rfx_keep_pid (RFx *fx, pid_t pid)
{
  for (int i = 0; i < RFX_MAX; i++)
    if (fx->pids[i] <= 0)
      {
        fx->pids[i] = pid;
        return;
      }
  fail_msg ("too many processes");
}

/* Reap PID if it is ours, then forget it. */
static G_GNUC_UNUSED void
rfx_forget_pid (RFx *fx, pid_t pid)
{
  for (int i = 0; i < RFX_MAX; i++)
    if (fx->pids[i] == pid)
      fx->pids[i] = 0;
}

static G_GNUC_UNUSED void
rfx_free (RFx *fx)
{
  for (int i = 0; i < RFX_MAX; i++)
    {
      if (fx->pids[i] > 0)
        {
          kill (fx->pids[i], SIGKILL);
          waitpid (fx->pids[i], NULL, 0);
        }
      if (fx->shm_ids[i] >= 0)
        shmctl (fx->shm_ids[i], IPC_RMID, NULL);
      if (fx->remove_paths[i] != NULL)
        {
          rfx_rm_rf (fx->remove_paths[i]);
          g_free (fx->remove_paths[i]);
        }
    }
  if (!fx->passed)
    fprintf (stderr,
             "reproduce: cd %s && %s\n"
             "   (the test's files are kept in %s; rerun this test alone: FB_TEST_ONLY=%s FUSEBOX_BIN=%s "
             "FUSEBOX_BUILD_ROOT=%s %s)\n",
             fx->ws, fx->repro != NULL ? fx->repro : "(fusebox was not run)", fx->tmp, fx->test_name, rfx_bin (),
             g_getenv ("FUSEBOX_BUILD_ROOT"), g_get_prgname () ? g_get_prgname () : "the test program");
  else
    rfx_rm_rf (fx->tmp);
  g_free (fx->tmp);
  g_free (fx->ws);
  g_free (fx->home);
  g_free (fx->state);
  g_free (fx->runs);
  g_free (fx->repro);
  g_free (fx);
}

static G_GNUC_UNUSED int
rfx_setup (void **state)
{
  *state = rfx_new ();
  return 0;
}

static G_GNUC_UNUSED int
rfx_teardown (void **state)
{
  rfx_free (*state);
  return 0;
}

#define RFX_BEGIN(state)                                                                                               \
  RFx *fx = *(state);                                                                                                  \
  fx->test_name = __func__
#define RFX_PASS() (fx->passed = true)

/* Run the tests named by FB_TEST_ONLY (a glob), or all. */
static G_GNUC_UNUSED void
rfx_filter_tests (const char *argv0)
{
  const char *only = g_getenv ("FB_TEST_ONLY");

  g_set_prgname (argv0);
  if (only != NULL && only[0] != '\0')
    cmocka_set_test_filter (only);
}

/* The environment fusebox runs with: the caller's, HOME and XDG_STATE_HOME
 * in T. */
static G_GNUC_UNUSED char **
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

/* A shell-quoted command line for the repro message. */
static G_GNUC_UNUSED void
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

static G_GNUC_UNUSED GPtrArray *
rfx_argv_va (const char *first, va_list ap)
{
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);
  const char *a;
  g_ptr_array_add (argv, g_strdup (rfx_bin ()));
  g_ptr_array_add (argv, g_strdup ("run"));
  /* the fixtures and the probes (this program) live in the build tree,
   * which a policy may hide or make private (a build under /tmp, /home) */
  g_ptr_array_add (argv, g_strdup ("--read"));
  g_ptr_array_add (argv, g_strdup (g_getenv ("FUSEBOX_BUILD_ROOT")));
  for (a = first; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (argv, g_strdup (a));
  g_ptr_array_add (argv, NULL);
  return argv;
}

typedef struct
{
  int status; /* exit status, or 128+N for a signal */
  char *out;
  char *err;
} RfxResult;

static G_GNUC_UNUSED void
rfx_result_clear (RfxResult *r)
{
  g_free (r->out);
  g_free (r->err);
  memset (r, 0, sizeof *r);
}

/* `fusebox run ARGS...` (NULL-terminated) to completion, stdout and
 * stderr captured. */
static G_GNUC_UNUSED void
rfx_run_argv (RFx *fx, RfxResult *ret, char **argv)
{
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  int status = 0;

  rfx_set_repro (fx, argv);
  memset (ret, 0, sizeof *ret);
  if (!g_spawn_sync (fx->ws, argv, env, G_SPAWN_DEFAULT, NULL, NULL, &ret->out, &ret->err, &status, &error))
    fail_msg ("spawn %s: %s", argv[0], error->message);
  ret->status = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

static G_GNUC_UNUSED void
rfx_run (RFx *fx, RfxResult *ret, const char *first, ...)
{
  va_list ap;
  va_start (ap, first);
  g_autoptr (GPtrArray) argv = rfx_argv_va (first, ap);
  va_end (ap);
  rfx_run_argv (fx, ret, (char **)argv->pdata);
}

/* `fusebox run ARGS...` in the background with stdout on a pipe;
 * registered for teardown.  Returns the supervisor's pid. */
static G_GNUC_UNUSED pid_t
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
    fail_msg ("spawn %s: %s", rfx_bin (), error->message);
  rfx_keep_pid (fx, pid);
  return pid;
}

/* Wait for PID (ours) with a generous cap: a hung run fails the test
 * instead of hanging it.  This bounds a wait for an event; it asserts no
 * timing.  Returns the exit status (128+N for a signal), -1 on timeout. */
static G_GNUC_UNUSED int
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

/* One line from FD (without "\n"), byte by byte so the rest stays in the
 * pipe; NULL at EOF or after CAP_MS without a full line. */
static G_GNUC_UNUSED char *
rfx_read_line (int fd, int cap_ms)
{
  g_autoptr (GString) s = g_string_new (NULL);
  for (;;)
    {
      struct pollfd p = { .fd = fd, .events = POLLIN };
      char c;
      if (poll (&p, 1, cap_ms) <= 0)
        return NULL;
      ssize_t n = read (fd, &c, 1);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return NULL;
      if (c == '\n')
        return g_string_free (g_steal_pointer (&s), FALSE);
      g_string_append_c (s, c);
    }
}

static G_GNUC_UNUSED JsonObject *
rfx_parse_object (const char *text)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  if (text == NULL || !json_parser_load_from_data (parser, text, -1, &error))
    fail_msg ("not JSON (%s): %s", error ? error->message : "no text", text ? text : "");
  JsonNode *root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    fail_msg ("not a JSON object: %s", text);
  return json_object_ref (json_node_get_object (root));
}

static G_GNUC_UNUSED const char *
rfx_str (JsonObject *o, const char *member)
{
  if (!json_object_has_member (o, member) || json_object_get_null_member (o, member))
    return NULL;
  return json_object_get_string_member (o, member);
}

/* Write CONTENT to PATH (parents made 0755). */
static G_GNUC_UNUSED void
rfx_write (const char *path, const char *content, mode_t mode)
{
  g_autofree char *dir = g_path_get_dirname (path);
  g_autoptr (GError) error = NULL;

  assert_int_equal (g_mkdir_with_parents (dir, 0755), 0);
  if (!g_file_set_contents_full (path, content, -1, G_FILE_SET_CONTENTS_NONE, mode, &error))
    fail_msg ("%s", error->message);
}

/* A stand-in must exist and be readable on the host before a test shows
 * that the sandbox can't reach it: a denial of something absent proves
 * nothing. */
static G_GNUC_UNUSED void
rfx_assert_host_readable (const char *path)
{
  struct stat st;

  if (lstat (path, &st) < 0)
    fail_msg ("the stand-in %s does not exist on the host", path);
  if (S_ISREG (st.st_mode))
    {
      g_autofree char *data = NULL;
      if (!g_file_get_contents (path, &data, NULL, NULL))
        fail_msg ("the stand-in %s is not readable on the host", path);
    }
  else if (S_ISDIR (st.st_mode))
    {
      g_autoptr (GDir) d = g_dir_open (path, 0, NULL);
      if (d == NULL)
        fail_msg ("the stand-in directory %s is not readable on the host", path);
    }
}

static G_GNUC_UNUSED char *
rfx_file (const char *path)
{
  char *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  return text;
}

/* True when some process on the host is in the namespace LINK
 * ("pid:[4026532...]") of kind NS: proof that a sandbox is gone when
 * none is. */
static G_GNUC_UNUSED bool
rfx_ns_has_processes (const char *ns, const char *link)
{
  g_autoptr (GDir) d = g_dir_open ("/proc", 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      if (!g_ascii_isdigit (name[0]))
        continue;
      g_autofree char *path = g_strdup_printf ("/proc/%s/ns/%s", name, ns);
      g_autofree char *l = g_file_read_link (path, NULL);
      if (l != NULL && strcmp (l, link) == 0)
        {
          /* a zombie is gone for our purposes (its parent reaps it) */
          g_autofree char *stat_path = g_strdup_printf ("/proc/%s/stat", name);
          g_autofree char *stat = NULL;
          if (g_file_get_contents (stat_path, &stat, NULL, NULL))
            {
              const char *p = strrchr (stat, ')');
              if (p != NULL && p[1] == ' ' && p[2] == 'Z')
                continue;
            }
          return true;
        }
    }
  return false;
}

/* Wait (bounded, in 10 ms steps) for COND: a wait for an event, not a
 * timing assertion; the bound only stops a hung test. */
#define RFX_WAIT_FOR(cond, cap_ms)                                                                                     \
  ({                                                                                                                   \
    bool ok_ = false;                                                                                                  \
    for (int i_ = 0; i_ <= (cap_ms) / 10; i_++)                                                                        \
      {                                                                                                                \
        if (cond)                                                                                                      \
          {                                                                                                            \
            ok_ = true;                                                                                                \
            break;                                                                                                     \
          }                                                                                                            \
        g_usleep (10 * 1000);                                                                                          \
      }                                                                                                                \
    ok_;                                                                                                               \
  })

/* ---- the probe side (inside the sandbox) ---- */

static G_GNUC_UNUSED const char *
rfx_errname (int e)
{
  const char *n = strerrorname_np (e);
  return n != NULL ? n : "EUNKNOWN";
}

/* Result of a probe: "OK" or the errno name. */
static G_GNUC_UNUSED const char *
rfx_res (long r)
{
  return r < 0 ? rfx_errname (errno) : "OK";
}
