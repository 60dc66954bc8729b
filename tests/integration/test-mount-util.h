/* fusebox — helpers for the integration tests of `fusebox mount` (header
 * only): a temp directory per test with a host tree (T/h), a policy file, a
 * mount point (T/mnt) and the real binary mounted there; teardown unmounts
 * (fusermount3 -u, then umount -l as a last resort) and kills the daemon
 * even when the test failed, and prints a command that reproduces it.
 *
 * Paths: the mount shows the host's / at T/mnt, so the host's T/h/x is
 * T/mnt/T/h/x inside the mount; fx_m() builds those.  The policy template
 * uses @H@ for T/h. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>

typedef struct
{
  char *tmp;  /* T */
  char *host; /* T/h: the host tree under test */
  char *mnt;  /* T/mnt */
  char *policy_path;
  char *log_path;
  char *state_dir; /* XDG_STATE_HOME for the run directories */
  pid_t daemon;
  bool mounted;
  const char *test_name;
  char *mount_args; /* for the repro line */
} MFx;

static G_GNUC_UNUSED const char *
fusebox_bin (void)
{
  const char *bin = g_getenv ("FUSEBOX_BIN");

  return bin != NULL ? bin : "fusebox";
}

/* Exit 77 (skip) when FUSE can't be used here, unless CI insists. */
static G_GNUC_UNUSED void
require_fuse (void)
{
  const char *why = NULL;

  if (access ("/dev/fuse", R_OK | W_OK) < 0)
    why = "/dev/fuse is missing or not usable";
  else if (geteuid () != 0)
    why = "these tests need root (allow_other, mounting as other users)";
  else if (!g_file_test (fusebox_bin (), G_FILE_TEST_IS_EXECUTABLE))
    why = "FUSEBOX_BIN is not an executable";
  if (why == NULL)
    return;
  if (g_strcmp0 (g_getenv ("FUSEBOX_TESTS_MUST_RUN"), "1") == 0)
    {
      fprintf (stderr, "FUSEBOX_TESTS_MUST_RUN=1 but %s\n", why);
      exit (1);
    }
  fprintf (stderr, "skipped: %s\n", why);
  exit (77);
}

static G_GNUC_UNUSED int
mfx_rm_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  if (remove (path) < 0 && errno != ENOENT)
    {
      chmod (path, 0700);
      remove (path);
    }
  return 0;
}

static G_GNUC_UNUSED void
mfx_rm_rf (const char *path)
{
  nftw (path, mfx_rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* T/h + REL */
static G_GNUC_UNUSED char *
fx_h (MFx *fx, const char *rel)
{
  return g_strconcat (fx->host, rel, NULL);
}

/* The same object through the mount: T/mnt + T/h + REL */
static G_GNUC_UNUSED char *
fx_m (MFx *fx, const char *rel)
{
  return g_strconcat (fx->mnt, fx->host, rel, NULL);
}

static G_GNUC_UNUSED void
host_write (MFx *fx, const char *rel, const char *content)
{
  g_autofree char *path = fx_h (fx, rel);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autoptr (GError) error = NULL;

  assert_int_equal (g_mkdir_with_parents (dir, 0755), 0);
  if (!g_file_set_contents (path, content, -1, &error))
    fail_msg ("%s", error->message);
}

static G_GNUC_UNUSED void
host_mkdir (MFx *fx, const char *rel)
{
  g_autofree char *path = fx_h (fx, rel);

  assert_int_equal (g_mkdir_with_parents (path, 0755), 0);
}

/* Prove a stand-in exists and is readable on the host before a test shows
 * that the view refuses it: a denial of something absent proves nothing. */
static G_GNUC_UNUSED void
assert_host_readable (MFx *fx, const char *rel)
{
  g_autofree char *path = fx_h (fx, rel);
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

static G_GNUC_UNUSED int
cmp_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

static G_GNUC_UNUSED void
sum_tree (GChecksum *sum, const char *path, const char *rel)
{
  struct stat st;
  char buf[4096];

  if (lstat (path, &st) < 0)
    return;
  g_checksum_update (sum, (const guchar *)rel, -1);
  g_snprintf (buf, sizeof buf, "|%o|%u|%u|%lld|%lld.%09ld|", st.st_mode, st.st_uid, st.st_gid, (long long)st.st_size,
              (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  g_checksum_update (sum, (const guchar *)buf, -1);
  if (S_ISREG (st.st_mode))
    {
      g_autofree char *data = NULL;
      gsize len = 0;
      if (g_file_get_contents (path, &data, &len, NULL))
        g_checksum_update (sum, (const guchar *)data, len);
    }
  else if (S_ISLNK (st.st_mode))
    {
      ssize_t n = readlink (path, buf, sizeof buf - 1);
      if (n >= 0)
        g_checksum_update (sum, (const guchar *)buf, n);
    }
  if (!S_ISLNK (st.st_mode) && !S_ISFIFO (st.st_mode))
    {
      ssize_t n = listxattr (path, buf, sizeof buf);
      for (ssize_t i = 0; i < n; i += strlen (buf + i) + 1)
        {
          char val[1024];
          ssize_t m = getxattr (path, buf + i, val, sizeof val);
          g_checksum_update (sum, (const guchar *)(buf + i), -1);
          if (m > 0)
            g_checksum_update (sum, (const guchar *)val, m);
        }
    }
  if (S_ISDIR (st.st_mode))
    {
      g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
      g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
      const char *name;
      while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
        g_ptr_array_add (names, g_strdup (name));
      g_ptr_array_sort (names, cmp_names);
      for (guint i = 0; i < names->len; i++)
        {
          g_autofree char *child = g_build_filename (path, (char *)names->pdata[i], NULL);
          g_autofree char *crel = g_build_filename (rel, (char *)names->pdata[i], NULL);
          sum_tree (sum, child, crel);
        }
    }
}

/* A digest of the host tree T/h + REL: names, modes, owners, sizes,
 * contents, link texts, xattrs and mtimes (not atimes). */
static G_GNUC_UNUSED char *
host_sum (MFx *fx, const char *rel)
{
  g_autofree char *path = fx_h (fx, rel);
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);

  sum_tree (sum, path, rel);
  return g_strdup (g_checksum_get_string (sum));
}

static G_GNUC_UNUSED bool
is_mounted (const char *path)
{
  g_autofree char *text = NULL;
  g_autofree char *needle = g_strconcat (" ", path, " ", NULL);

  if (!g_file_get_contents ("/proc/self/mountinfo", &text, NULL, NULL))
    return false;
  return strstr (text, needle) != NULL;
}

static G_GNUC_UNUSED bool
pid_alive (pid_t pid)
{
  char path[64];
  g_autofree char *stat = NULL;

  if (pid <= 0 || kill (pid, 0) < 0)
    return false;
  /* a zombie is dead for our purposes */
  g_snprintf (path, sizeof path, "/proc/%d/stat", (int)pid);
  if (g_file_get_contents (path, &stat, NULL, NULL))
    {
      const char *p = strrchr (stat, ')');
      if (p != NULL && p[1] == ' ' && p[2] == 'Z')
        return false;
    }
  return true;
}

/* Wait (a bounded number of 10 ms steps) for COND; this is a wait for an
 * event, not a timing assertion: the bound only stops a hung test. */
#define WAIT_FOR(cond, steps)                                                                                          \
  ({                                                                                                                   \
    bool ok_ = false;                                                                                                  \
    for (int i_ = 0; i_ < (steps); i_++)                                                                               \
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

static G_GNUC_UNUSED int
run_cmd (const char *const *argv, char **ret_out, char **ret_err)
{
  g_autoptr (GError) error = NULL;
  int status = 0;

  if (!g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, ret_out, ret_err, &status, &error))
    fail_msg ("spawn %s: %s", argv[0], error->message);
  if (WIFEXITED (status))
    return WEXITSTATUS (status);
  return 128 + WTERMSIG (status);
}

static G_GNUC_UNUSED MFx *
mfx_new (const char *test_name)
{
  MFx *fx = g_new0 (MFx, 1);
  g_autoptr (GError) error = NULL;

  fx->tmp = g_dir_make_tmp ("fusebox-mount-XXXXXX", &error);
  if (fx->tmp == NULL)
    fail_msg ("%s", error->message);
  chmod (fx->tmp, 0755);
  fx->host = g_build_filename (fx->tmp, "h", NULL);
  fx->mnt = g_build_filename (fx->tmp, "mnt", NULL);
  fx->policy_path = g_build_filename (fx->tmp, "policy.json", NULL);
  fx->log_path = g_build_filename (fx->tmp, "access.jsonl", NULL);
  fx->state_dir = g_build_filename (fx->tmp, "state", NULL);
  fx->test_name = test_name;
  g_mkdir_with_parents (fx->host, 0755);
  g_mkdir_with_parents (fx->mnt, 0755);
  g_setenv ("XDG_STATE_HOME", fx->state_dir, TRUE);
  return fx;
}

/* Write the policy (TEMPLATE with @H@ = T/h) and mount; extra arguments
 * (NULL-terminated) go before the mount point. */
static G_GNUC_UNUSED void
mfx_mount (MFx *fx, const char *template, ...)
{
  g_autoptr (GString) text = g_string_new (template);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (GError) error = NULL;
  const char *arg;
  const char *pidstr;
  va_list ap;
  int status;

  g_string_replace (text, "@H@", fx->host, 0);
  if (!g_file_set_contents (fx->policy_path, text->str, -1, &error))
    fail_msg ("%s", error->message);
  g_ptr_array_add (argv, (char *)fusebox_bin ());
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
  status = run_cmd ((const char *const *)argv->pdata, &out, &err);
  if (status != 0)
    fail_msg ("%s failed (%d):\n%s%s", fx->mount_args, status, out, err);
  fx->mounted = true;
  pidstr = strstr (out, "daemon pid ");
  if (pidstr == NULL)
    fail_msg ("no daemon pid in the output of %s:\n%s", fx->mount_args, out);
  fx->daemon = (pid_t)atoi (pidstr + strlen ("daemon pid "));
  assert_true (is_mounted (fx->mnt));
}

static G_GNUC_UNUSED void
mfx_unmount (MFx *fx)
{
  const char *argv[] = { "fusermount3", "-u", "-q", fx->mnt, NULL };

  if (fx->mounted && is_mounted (fx->mnt))
    {
      if (run_cmd (argv, NULL, NULL) != 0)
        umount2 (fx->mnt, MNT_DETACH);
    }
  fx->mounted = false;
  if (fx->daemon > 0)
    {
      /* the daemon ends by itself once unmounted; make sure it does */
      if (!WAIT_FOR (!pid_alive (fx->daemon), 1000))
        {
          kill (fx->daemon, SIGTERM);
          if (!WAIT_FOR (!pid_alive (fx->daemon), 300))
            kill (fx->daemon, SIGKILL);
        }
    }
  fx->daemon = 0;
}

/* The whole log as text (after unmount it is complete). */
static G_GNUC_UNUSED char *
mfx_log (MFx *fx)
{
  char *text = NULL;

  if (!g_file_get_contents (fx->log_path, &text, NULL, NULL))
    return g_strdup ("");
  return text;
}

/* A log line that contains every given fragment (NULL-terminated). */
static G_GNUC_UNUSED bool
log_has (const char *log, ...)
{
  g_auto (GStrv) lines = g_strsplit (log, "\n", -1);

  for (guint i = 0; lines[i] != NULL; i++)
    {
      va_list ap;
      const char *frag;
      bool all = true;
      va_start (ap, log);
      while ((frag = va_arg (ap, const char *)) != NULL)
        if (strstr (lines[i], frag) == NULL)
          all = false;
      va_end (ap);
      if (all && lines[i][0] != '\0')
        return true;
    }
  return false;
}

static G_GNUC_UNUSED void
mfx_free (MFx *fx, bool failed)
{
  mfx_unmount (fx);
  if (failed)
    fprintf (stderr,
             "reproduce: %s (the host tree, policy and log are kept in %s; repeat the failing step of %s there)\n"
             "   or rerun this test alone: FUSEBOX_BIN=%s FB_TEST_ONLY=%s %s\n",
             fx->mount_args != NULL ? fx->mount_args : "(nothing was mounted)", fx->tmp, fx->test_name, fusebox_bin (),
             fx->test_name, g_get_prgname () != NULL ? g_get_prgname () : "the test program");
  /* never descend into a mount that is somehow still there */
  else if (!is_mounted (fx->mnt))
    mfx_rm_rf (fx->tmp);
  g_free (fx->tmp);
  g_free (fx->host);
  g_free (fx->mnt);
  g_free (fx->policy_path);
  g_free (fx->log_path);
  g_free (fx->state_dir);
  g_free (fx->mount_args);
  g_free (fx);
}

/* cmocka: setup makes the fixture, teardown always unmounts and cleans up.
 * A test marks success with mfx_pass() as its last statement, so teardown
 * knows whether to print the repro line. */
typedef struct
{
  MFx *fx;
  bool passed;
} MState;

static G_GNUC_UNUSED int
mfx_setup (void **state)
{
  MState *ms = g_new0 (MState, 1);

  ms->fx = mfx_new ("?");
  *state = ms;
  return 0;
}

static G_GNUC_UNUSED int
mfx_teardown (void **state)
{
  MState *ms = *state;

  mfx_free (ms->fx, !ms->passed);
  g_free (ms);
  return 0;
}

#define MFX_BEGIN(state)                                                                                               \
  MState *ms_ = *(state);                                                                                              \
  MFx *fx = ms_->fx;                                                                                                   \
  fx->test_name = __func__
#define MFX_PASS() (ms_->passed = true)

/* Run the tests named by FB_TEST_ONLY (a glob), or all. */
static G_GNUC_UNUSED void
mfx_filter_tests (const char *argv0)
{
  const char *only = g_getenv ("FB_TEST_ONLY");

  g_set_prgname (argv0);
  if (only != NULL && only[0] != '\0')
    cmocka_set_test_filter (only);
}

#define assert_errno_is(expr, expected)                                                                                \
  do                                                                                                                   \
    {                                                                                                                  \
      errno = 0;                                                                                                       \
      long r_ = (long)(expr);                                                                                          \
      int e_ = (expected);                                                                                             \
      int got_ = r_ < 0 ? errno : 0;                                                                                   \
      if (got_ != e_)                                                                                                  \
        fail_msg ("%s: got %s, expected %s", #expr, got_ ? g_strerror (got_) : "success",                              \
                  e_ ? g_strerror (e_) : "success");                                                                   \
    }                                                                                                                  \
  while (0)
