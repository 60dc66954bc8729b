/* fusebox — the general helpers of tests/lib/test-util.h. */
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <linux/fs.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/xattr.h>

#include "tests/lib/test-util.h"

/* ---- the build ---- */

const char *
test_bin (void)
{
  const char *bin = g_getenv ("FUSEBOX_BIN");
  return bin != NULL ? bin : "fusebox";
}

const char *
test_meson_bin (void)
{
  const char *bin = g_getenv ("FUSEBOX_BIN");

  if (bin == NULL)
    test_skip_or_fail ("FUSEBOX_BIN is not set: run with 'meson test'");
  return bin;
}

char *
test_fixture (const char *name)
{
  const char *root = g_getenv ("FUSEBOX_BUILD_ROOT");
  char *path;

  if (root == NULL)
    test_skip_or_fail ("FUSEBOX_BUILD_ROOT is not set: run with 'meson test'");
  path = g_build_filename (root, "fixtures", name, NULL);
  if (access (path, X_OK) != 0)
    fail_msg ("fixture %s is missing: build it with ninja", path);
  return path;
}

char *
test_self (void)
{
  char *self = g_file_read_link ("/proc/self/exe", NULL);
  assert_non_null (self);
  return self;
}

/* ---- directories and files ---- */

char *
test_tmpdir (const char *prefix)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *templ = g_strconcat (prefix, "-XXXXXX", NULL);
  char *dir = g_dir_make_tmp (templ, &error);

  if (dir == NULL)
    fail_msg ("can't make a temporary directory %s: %s", templ, error->message);
  return dir;
}

char *
test_workdir (const char *prefix)
{
  const char *base = g_getenv ("FUSEBOX_TEST_TMPDIR");
  g_autofree char *name = g_strconcat (prefix, "-XXXXXX", NULL);
  char *templ = g_build_filename (base != NULL ? base : "/var/tmp", name, NULL);

  if (g_mkdtemp_full (templ, 0755) == NULL)
    fail_msg ("can't make a temporary directory from %s: %s", templ, g_strerror (errno));
  return templ;
}

static int
rm_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  if (remove (path) < 0 && errno != ENOENT)
    {
      chmod (path, 0700);
      remove (path);
    }
  return 0;
}

void
test_rm_rf (const char *path)
{
  if (path == NULL || path[0] == '\0' || strcmp (path, "/") == 0)
    return;
  /* FTW_MOUNT: never descend into a mount, should one be there */
  nftw (path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

void
test_rm_deep (int dir_fd, const char *name)
{
  struct stat top, self;
  int fd;

  if (fstatat (dir_fd, name, &top, AT_SYMLINK_NOFOLLOW) < 0)
    return;
  fd = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  while (fd >= 0)
    {
      g_autofree char *sub = NULL;
      DIR *d = fdopendir (fcntl (fd, F_DUPFD_CLOEXEC, 3));
      struct dirent *e;
      int up;

      while (d != NULL && (e = readdir (d)) != NULL)
        if (strcmp (e->d_name, ".") != 0 && strcmp (e->d_name, "..") != 0 && unlinkat (fd, e->d_name, 0) < 0 &&
            sub == NULL)
          sub = g_strdup (e->d_name);
      if (d != NULL)
        closedir (d);
      if (sub != NULL)
        {
          int down = openat (fd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          struct stat there;
          close (fd);
          /* never into another filesystem (a mount left behind) */
          if (down >= 0 && (fstat (down, &there) < 0 || there.st_dev != top.st_dev))
            {
              close (down);
              return;
            }
          fd = down;
          continue;
        }
      if (fstat (fd, &self) < 0 || (self.st_dev == top.st_dev && self.st_ino == top.st_ino))
        {
          close (fd);
          unlinkat (dir_fd, name, AT_REMOVEDIR);
          return;
        }
      /* empty: up, and remove it there (found by its inode) */
      up = openat (fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      close (fd);
      fd = up;
      if (fd < 0)
        return;
      d = fdopendir (fcntl (fd, F_DUPFD_CLOEXEC, 3));
      while (d != NULL && (e = readdir (d)) != NULL)
        if (e->d_ino == self.st_ino)
          {
            unlinkat (fd, e->d_name, AT_REMOVEDIR);
            break;
          }
      if (d != NULL)
        closedir (d);
    }
}

TestDir *
test_dir_new (char *path)
{
  TestDir *d = g_new0 (TestDir, 1);

  d->strings = g_ptr_array_new_with_free_func (g_free);
  d->path = test_dir_keep (d, path);
  return d;
}

char *
test_dir_keep (TestDir *d, char *s)
{
  g_ptr_array_add (d->strings, s);
  return s;
}

char *
test_dir_path (TestDir *d, const char *rel)
{
  return test_dir_keep (d, g_build_filename (d->path, rel, NULL));
}

char *
test_dir_mkdir (TestDir *d, const char *rel, mode_t mode)
{
  char *path = test_dir_path (d, rel);

  if (g_mkdir_with_parents (path, mode) != 0)
    fail_msg ("can't make the directory %s: %s", path, g_strerror (errno));
  return path;
}

void
test_dir_free (TestDir *d, bool remove)
{
  if (d == NULL)
    return;
  if (remove)
    test_rm_rf (d->path);
  g_ptr_array_unref (d->strings);
  g_free (d);
}

void
test_write_file (const char *path, const char *text)
{
  g_autoptr (GError) error = NULL;

  if (!g_file_set_contents (path, text, -1, &error))
    fail_msg ("writing %s: %s", path, error->message);
}

void
test_write (const char *path, const char *content, mode_t mode)
{
  g_autofree char *dir = g_path_get_dirname (path);
  gsize len = strlen (content), done = 0;
  int fd;

  assert_int_equal (g_mkdir_with_parents (dir, 0755), 0);
  /* truncated: GLib's in-place g_file_set_contents_full (flags NONE) leaves
   * the tail of a longer file it overwrites */
  fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0)
    fail_msg ("writing %s: %s", path, g_strerror (errno));
  while (done < len)
    {
      ssize_t n = write (fd, content + done, len - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        fail_msg ("writing %s: %s", path, g_strerror (errno));
      done += (gsize)n;
    }
  if (fchmod (fd, mode) < 0)
    fail_msg ("chmod %s: %s", path, g_strerror (errno));
  close (fd);
}

char *
test_read_file (const char *path)
{
  char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  return text;
}

GPtrArray *
test_read_lines (const char *path)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  GPtrArray *lines = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) parts = NULL;

  if (!g_file_get_contents (path, &text, &len, &error))
    fail_msg ("reading %s: %s", path, error->message);
  if (len == 0)
    return lines;
  if (text[len - 1] != '\n')
    fail_msg ("%s does not end in a newline (a torn record)", path);
  text[len - 1] = '\0';
  parts = g_strsplit (text, "\n", -1);
  for (guint i = 0; parts[i] != NULL; i++)
    g_ptr_array_add (lines, g_strdup (parts[i]));
  return lines;
}

int
test_cmp_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

static int
sum_one (GChecksum *sum, const char *path, const char *rel)
{
  struct stat st;
  char buf[4096];

  if (lstat (path, &st) < 0)
    return -1;
  g_checksum_update (sum, (const guchar *)rel, -1);
  g_snprintf (buf, sizeof buf, "|%o|%u|%u|%lld|%lld.%09ld|", st.st_mode, st.st_uid, st.st_gid, (long long)st.st_size,
              (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  g_checksum_update (sum, (const guchar *)buf, -1);
  if (g_getenv ("FB_TEST_DUMP_SUM") != NULL)
    g_printerr ("sum: %s %s\n", rel, buf);
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
  if (!S_ISLNK (st.st_mode))
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
      g_ptr_array_sort (names, test_cmp_names);
      for (guint i = 0; i < names->len; i++)
        {
          g_autofree char *child = g_build_filename (path, (char *)names->pdata[i], NULL);
          g_autofree char *crel = g_build_filename (rel, (char *)names->pdata[i], NULL);
          sum_one (sum, child, crel);
        }
    }
  return 0;
}

char *
test_tree_sum (const char *path, const char *rel)
{
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);

  if (sum_one (sum, path, rel) < 0)
    g_checksum_update (sum, (const guchar *)"missing", -1);
  return g_strdup (g_checksum_get_string (sum));
}

void
test_assert_host_readable (const char *path)
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

void
test_make_socket (const char *path)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  assert_true (fd >= 0);
  assert_true (strlen (path) < sizeof sa.sun_path);
  strcpy (sa.sun_path, path);
  assert_int_equal (bind (fd, (struct sockaddr *)&sa, sizeof sa), 0);
  close (fd);
}

guint
test_count_entries (const char *path)
{
  g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
  guint n = 0;

  if (dir == NULL)
    fail_msg ("can't read the directory %s", path);
  while (g_dir_read_name (dir) != NULL)
    n++;
  return n;
}

void
test_assert_contains (const char *text, ...)
{
  va_list ap;
  const char *frag;

  va_start (ap, text);
  while ((frag = va_arg (ap, const char *)) != NULL)
    if (strstr (text, frag) == NULL)
      fail_msg ("no \"%s\" in:\n%s", frag, text);
  va_end (ap);
}

mode_t
test_mode_of (const char *path)
{
  struct stat st;

  if (lstat (path, &st) != 0)
    fail_msg ("%s: %s", path, g_strerror (errno));
  return st.st_mode & 07777;
}

/* ---- processes ---- */

void
test_cmd_clear (TestCmd *cmd)
{
  g_free (cmd->out);
  g_free (cmd->err);
  g_free (cmd->command);
  memset (cmd, 0, sizeof *cmd);
}

char *
test_shell_line (const char *cwd, const char *env_shown, char *const *argv)
{
  GString *line = g_string_new (NULL);

  if (cwd != NULL)
    {
      g_autofree char *q = g_shell_quote (cwd);
      g_string_append_printf (line, "cd %s && ", q);
    }
  if (env_shown != NULL)
    g_string_append_printf (line, "%s ", env_shown);
  for (guint i = 0; argv[i] != NULL; i++)
    {
      g_autofree char *q = g_shell_quote (argv[i]);
      g_string_append_printf (line, i == 0 ? "%s" : " %s", q);
    }
  return g_string_free (line, FALSE);
}

void
test_cmd_run (TestCmd *ret, const char *cwd, char **envp, const char *env_shown, char **argv)
{
  g_autoptr (GError) error = NULL;
  int status = 0;

  memset (ret, 0, sizeof *ret);
  ret->command = test_shell_line (cwd, env_shown, argv);
  if (!g_spawn_sync (cwd, argv, envp, G_SPAWN_DEFAULT, NULL, NULL, &ret->out, &ret->err, &status, &error))
    fail_msg ("can't run %s: %s", ret->command, error->message);
  ret->status = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

guint
test_count_fds (pid_t pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/fd", (int)pid);

  return test_count_entries (path);
}

int
test_kill_child (pid_t *pid, int sig)
{
  int status = -1;

  if (*pid <= 0)
    return -1;
  kill (*pid, sig);
  while (waitpid (*pid, &status, 0) < 0 && errno == EINTR)
    ;
  *pid = 0;
  return status;
}

GArray *
test_proc_pids (void)
{
  GArray *out = g_array_new (FALSE, FALSE, sizeof (pid_t));
  g_autoptr (GDir) d = g_dir_open ("/proc", 0, NULL);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    if (g_ascii_isdigit (name[0]))
      {
        pid_t pid = (pid_t)atoi (name);
        g_array_append_val (out, pid);
      }
  return out;
}

bool
test_proc_has_arg (pid_t pid, const char *arg)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/cmdline", (int)pid);
  g_autofree char *text = NULL;
  gsize len = 0;

  if (!g_file_get_contents (path, &text, &len, NULL))
    return false;
  for (gsize off = 0; off < len; off += strlen (text + off) + 1)
    if (strcmp (text + off, arg) == 0)
      return true;
  return false;
}

GPtrArray *
test_fusebox_argv_va (const char *first, va_list ap)
{
  GPtrArray *argv = g_ptr_array_new ();

  g_ptr_array_add (argv, (char *)test_bin ());
  for (const char *a = first; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (argv, (char *)a);
  g_ptr_array_add (argv, NULL);
  return argv;
}

GPtrArray *
test_fusebox_argv (const char *const *args, const char *const *extra)
{
  GPtrArray *argv = g_ptr_array_new ();

  g_ptr_array_add (argv, (char *)test_bin ());
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (char *)args[i]);
  for (guint i = 0; extra != NULL && extra[i] != NULL; i++)
    g_ptr_array_add (argv, (char *)extra[i]);
  g_ptr_array_add (argv, NULL);
  return argv;
}

GHashTable *
test_proc_fd_targets (pid_t pid, int first)
{
  g_autofree char *dir_path = g_strdup_printf ("/proc/%d/fd", (int)pid);
  g_autoptr (GDir) dir = g_dir_open (dir_path, 0, NULL);
  GHashTable *targets = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir_path, name, NULL);
      char *target = atoi (name) >= first ? g_file_read_link (path, NULL) : NULL;
      if (target != NULL)
        g_hash_table_insert (targets, g_strdup (name), target);
    }
  return targets;
}

GArray *
test_proc_children (pid_t pid)
{
  GArray *out = g_array_new (FALSE, FALSE, sizeof (pid_t));
  g_autofree char *task = g_strdup_printf ("/proc/%d/task", (int)pid);
  g_autoptr (GDir) d = g_dir_open (task, 0, NULL);
  const char *tid;

  while (d != NULL && (tid = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_strdup_printf ("%s/%s/children", task, tid);
      g_autofree char *text = NULL;
      g_auto (GStrv) pids = NULL;

      if (!g_file_get_contents (path, &text, NULL, NULL))
        continue;
      pids = g_strsplit (g_strstrip (text), " ", -1);
      for (guint i = 0; pids[i] != NULL; i++)
        if (pids[i][0] != '\0')
          {
            pid_t c = (pid_t)atoi (pids[i]);
            g_array_append_val (out, c);
          }
    }
  return out;
}

int
test_run_cmd (const char *const *argv, char **ret_out, char **ret_err)
{
  g_autoptr (GError) error = NULL;
  int status = 0;

  if (!g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, ret_out, ret_err, &status, &error))
    fail_msg ("spawn %s: %s", argv[0], error->message);
  if (WIFEXITED (status))
    return WEXITSTATUS (status);
  return 128 + WTERMSIG (status);
}

char *
test_read_all (int fd)
{
  GString *out = g_string_new (NULL);
  char buf[4096];

  for (;;)
    {
      ssize_t n = read (fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      g_string_append_len (out, buf, n);
    }
  return g_string_free (out, FALSE);
}

char *
test_read_line (int fd, int cap_ms)
{
  g_autoptr (GString) s = g_string_new (NULL);

  for (;;)
    {
      struct pollfd p = { .fd = fd, .events = POLLIN };
      ssize_t n;
      char c;

      if (cap_ms >= 0 && poll (&p, 1, cap_ms) <= 0)
        return NULL;
      n = read (fd, &c, 1);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return NULL;
      if (c == '\n')
        return g_string_free (g_steal_pointer (&s), FALSE);
      g_string_append_c (s, c);
    }
}

char *
test_run_as_nobody (const char *path)
{
  char *out;
  int p[2];
  pid_t pid;
  int status;

  assert_int_equal (pipe2 (p, O_CLOEXEC), 0);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0)
    {
      /* only async-signal-safe calls between fork and exec */
      dup2 (p[1], 1);
      if (setgroups (0, NULL) < 0 || setresgid (65534, 65534, 65534) < 0 || setresuid (65534, 65534, 65534) < 0)
        _exit (126);
      execl (path, path, (char *)NULL);
      _exit (127);
    }
  close (p[1]);
  out = test_read_all (p[0]);
  close (p[0]);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 0);
  return out;
}

/* A zombie (state Z in /proc/PID/stat) is gone for our purposes: its
 * parent reaps it. */
static bool
is_zombie (const char *pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%s/stat", pid);
  g_autofree char *stat = NULL;

  if (g_file_get_contents (path, &stat, NULL, NULL))
    {
      const char *p = strrchr (stat, ')');
      if (p != NULL && p[1] == ' ' && p[2] == 'Z')
        return true;
    }
  return false;
}

bool
test_pid_alive (pid_t pid)
{
  char name[32];

  if (pid <= 0 || kill (pid, 0) < 0)
    return false;
  g_snprintf (name, sizeof name, "%d", (int)pid);
  return !is_zombie (name);
}

bool
test_is_mounted (const char *path)
{
  g_autofree char *text = NULL;
  g_autofree char *needle = g_strconcat (" ", path, " ", NULL);

  if (!g_file_get_contents ("/proc/self/mountinfo", &text, NULL, NULL))
    return false;
  return strstr (text, needle) != NULL;
}

void
test_fuse_abort (dev_t dev)
{
  g_autofree char *abort_path = g_strdup_printf ("/sys/fs/fuse/connections/%u/abort", minor (dev));
  bool mounted_ctl = !g_file_test (abort_path, G_FILE_TEST_EXISTS) &&
                     mount ("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, NULL) == 0;
  int ctl = open (abort_path, O_WRONLY | O_CLOEXEC);

  if (ctl >= 0)
    {
      (void)!write (ctl, "1", 1);
      close (ctl);
    }
  if (mounted_ctl)
    umount2 ("/sys/fs/fuse/connections", 0);
}

char *
test_own_ns (const char *name)
{
  g_autofree char *path = g_strdup_printf ("/proc/self/ns/%s", name);
  char *link = g_file_read_link (path, NULL);

  assert_non_null (link);
  return link;
}

void
test_assert_own_namespaces (JsonObject *o, const char *what)
{
  static const char *const names[] = { "user", "mnt", "pid", "net", "ipc", "uts", "cgroup" };
  JsonObject *ns = json_object_get_object_member (o, "ns");

  if (ns == NULL)
    fail_msg ("%s: no namespaces in its report", what);
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *ours = test_own_ns (names[i]);
      const char *theirs = test_json_str (ns, names[i]);

      if (theirs == NULL)
        fail_msg ("%s: no %s namespace in its report", what, names[i]);
      if (strcmp (theirs, ours) == 0)
        fail_msg ("%s: its %s namespace is the test's (%s)", what, names[i], ours);
    }
  assert_string_equal (test_json_str (o, "proc_pid_ns"), test_json_str (ns, "pid"));
  assert_string_equal (test_json_str (o, "proc_fstype"), "proc");
}

bool
test_ns_has_processes (const char *ns, const char *link)
{
  g_autoptr (GArray) pids = test_proc_pids ();

  for (guint i = 0; i < pids->len; i++)
    {
      g_autofree char *name = g_strdup_printf ("%d", (int)g_array_index (pids, pid_t, i));
      g_autofree char *path = g_strdup_printf ("/proc/%s/ns/%s", name, ns);
      g_autofree char *l = g_file_read_link (path, NULL);
      if (l != NULL && strcmp (l, link) == 0 && !is_zombie (name))
        return true;
    }
  return false;
}

/* ---- JSON ---- */

JsonObject *
test_parse_object (const char *text)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  JsonNode *root;

  if (text == NULL)
    fail_msg ("not JSON (no text)");
  if (!g_utf8_validate (text, -1, NULL))
    fail_msg ("not UTF-8: %s", text);
  if (!json_parser_load_from_data (parser, text, -1, &error))
    fail_msg ("not JSON (%s): %s", error->message, text);
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    fail_msg ("not a JSON object: %s", text);
  return json_object_ref (json_node_get_object (root));
}

GPtrArray *
test_parse_lines (const char *text)
{
  GPtrArray *objects = g_ptr_array_new_with_free_func ((GDestroyNotify)json_object_unref);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);

  for (guint i = 0; lines[i] != NULL; i++)
    if (lines[i][0] != '\0')
      g_ptr_array_add (objects, test_parse_object (lines[i]));
  return objects;
}

const char *
test_json_str (JsonObject *o, const char *member)
{
  if (!json_object_has_member (o, member) || json_object_get_null_member (o, member))
    return NULL;
  return json_object_get_string_member (o, member);
}

char *
test_json_quote (const char *s)
{
  g_autoptr (JsonNode) n = json_node_init_string (json_node_alloc (), s);
  return json_to_string (n, FALSE);
}

/* ---- cmocka ---- */

void
test_filter_tests (const char *argv0)
{
  const char *only = g_getenv ("FB_TEST_ONLY");

  g_set_prgname (argv0);
  if (only != NULL && only[0] != '\0')
    cmocka_set_test_filter (only);
}

int
test_run_group (const char *argv0, const struct CMUnitTest *tests, size_t n, CMFixtureFunction group_setup,
                CMFixtureFunction group_teardown)
{
  test_filter_tests (argv0);
  /* "tests": the name cmocka_run_group_tests (tests, ...) prints */
  return _cmocka_run_group_tests ("tests", tests, n, group_setup, group_teardown);
}

struct TestExchanger
{
  char *a, *b;
  gint stop;
  GThread *thread;
};

static gpointer
exchange_loop (gpointer data)
{
  TestExchanger *x = data;

  while (!g_atomic_int_get (&x->stop))
    syscall (SYS_renameat2, AT_FDCWD, x->a, AT_FDCWD, x->b, RENAME_EXCHANGE);
  return NULL;
}

TestExchanger *
test_exchanger_start (const char *a, const char *b)
{
  TestExchanger *x = g_new0 (TestExchanger, 1);

  x->a = g_strdup (a);
  x->b = g_strdup (b);
  x->thread = g_thread_new ("exchange", exchange_loop, x);
  return x;
}

void
test_exchanger_stop (TestExchanger *x)
{
  g_atomic_int_set (&x->stop, 1);
  g_thread_join (x->thread);
  g_free (x->a);
  g_free (x->b);
  g_free (x);
}
