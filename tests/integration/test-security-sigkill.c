/* Adversarial tests: SIGKILL of any fusebox daemon leaves no mount.
 *
 * Each daemon is used for real first -- a file read, a directory listed
 * (after which the kernel opens directories without asking the daemon,
 * the case fusermount3's auto_unmount misses) -- then killed with SIGKILL,
 * and the test waits (bounded: it stops a hung test, it asserts no time)
 * until no mount of it is left:
 *  - `fusebox mount`, daemonized and in the foreground: the mount point
 *    leaves /proc/self/mountinfo; also when the daemon's process group is
 *    killed, when the daemon and its unmount watcher are killed together
 *    (`pkill -9 fusebox`), which leaves fusermount3's auto_unmount, and
 *    when the daemon and fusermount3 are, which leaves the watcher;
 *  - `fusebox run` and `fusebox serve`: the view is mounted in the
 *    sandbox's own mount namespace; once the daemon is gone, no process is
 *    left in that namespace and no mount table on the host holds the FUSE
 *    connection's device.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include "tests/lib/test-mount.h"
#include "tests/lib/test-run.h"
#include "tests/lib/test-serve.h"

#include <sys/sysmacros.h>

#define GONE_WAIT_MS 10000

/* --- fusebox mount ---------------------------------------------------------- */

static const char mount_policy[] = "{ \"version\": 1, \"rules\": [\n"
                                   "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" } ] }\n";

/* Read a file and list its directory through the mount. */
static void
use_mount (MFx *fx)
{
  g_autofree char *file = mfx_m (fx, "/d/f");
  g_autofree char *dir = mfx_m (fx, "/d");
  g_autofree char *data = NULL;
  g_autoptr (GDir) d = NULL;
  guint n = 0;

  assert_true (g_file_get_contents (file, &data, NULL, NULL));
  assert_string_equal (data, "hello\n");
  d = g_dir_open (dir, 0, NULL);
  assert_non_null (d);
  while (g_dir_read_name (d) != NULL)
    n++;
  assert_int_equal (n, 1);
}

MFX_CASE (test_mount_sigkill)
{

  mfx_write (fx, "/d/f", "hello\n");
  mfx_mount (fx, mount_policy, NULL);
  use_mount (fx);
  mfx_kill_daemon (fx, SIGKILL);
  mfx_wait_unmounted (fx);
}

static void
new_process_group (gpointer data)
{
  setpgid (0, 0);
}

/* A foreground daemon (in a process group of its own when GROUP), used,
 * then killed: alone, or with its whole process group (`kill -9 -PGID`,
 * which the watcher, in a session of its own, survives). */
static void
foreground_sigkill (MFx *fx, bool group)
{
  g_autoptr (GError) error = NULL;
  const char *argv[] = { test_bin (), "mount", "--foreground", "--policy", fx->policy_path, fx->mnt, NULL };
  g_autofree char *line = NULL;
  GPid pid;
  int out_fd = -1, status;

  mfx_write (fx, "/d/f", "hello\n");
  assert_true (g_file_set_contents (fx->policy_path, mount_policy, -1, NULL));
  fx->mount_args = g_strjoinv (" ", (char **)argv);
  if (!g_spawn_async_with_pipes (NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, group ? new_process_group : NULL,
                                 NULL, &pid, NULL, &out_fd, NULL, &error))
    fail_msg ("%s: %s", fx->mount_args, error->message);
  fx->daemon = pid;
  fx->mounted = true;
  /* its first line says the mount works */
  line = test_read_line (out_fd, GONE_WAIT_MS);
  assert_non_null (line);
  assert_true (test_is_mounted (fx->mnt));
  use_mount (fx);
  if (group)
    assert_int_equal (getpgid (pid), pid);
  assert_int_equal (kill (group ? -pid : pid, SIGKILL), 0);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  close (out_fd);
  if (!TEST_WAIT_FOR (!test_is_mounted (fx->mnt), GONE_WAIT_MS))
    fail_msg ("%s is still mounted after SIGKILL of its foreground daemon%s", fx->mnt, group ? "'s process group" : "");
  fx->mounted = false;
  fx->daemon = 0;
}

MFX_CASE (test_mount_foreground_sigkill)
{

  foreground_sigkill (fx, false);
}

MFX_CASE (test_mount_group_sigkill)
{

  foreground_sigkill (fx, true);
}

/* The pipe and socket inodes PID holds ("pipe:[N]", "socket:[N]"). */
static GHashTable *
held_inodes (pid_t pid)
{
  g_autoptr (GHashTable) targets = test_proc_fd_targets (pid, 0);
  GHashTable *inodes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  GHashTableIter it;
  gpointer target;

  g_hash_table_iter_init (&it, targets);
  while (g_hash_table_iter_next (&it, NULL, &target))
    if (g_str_has_prefix (target, "pipe:") || g_str_has_prefix (target, "socket:"))
      g_hash_table_add (inodes, g_strdup (target));
  return inodes;
}

/* The process named COMM that shares a pipe with the daemon (the unmount
 * watcher) or whose last argument is the mount point (fusermount3's
 * auto_unmount), wherever it is in the process tree; 0 if none. */
static pid_t
find_helper (MFx *fx, const char *comm)
{
  g_autoptr (GHashTable) daemon_inodes = held_inodes (fx->daemon);
  g_autoptr (GArray) pids = test_proc_pids ();

  for (guint i = 0; i < pids->len; i++)
    {
      pid_t pid = g_array_index (pids, pid_t, i);
      g_autofree char *comm_path = g_strdup_printf ("/proc/%d/comm", (int)pid);
      g_autofree char *cmdline_path = g_strdup_printf ("/proc/%d/cmdline", (int)pid);
      g_autofree char *text = NULL;
      gsize len = 0;

      if (pid <= 0 || pid == fx->daemon || !g_file_get_contents (comm_path, &text, NULL, NULL) ||
          strcmp (g_strstrip (text), comm) != 0)
        continue;
      g_clear_pointer (&text, g_free);
      if (g_file_get_contents (cmdline_path, &text, &len, NULL) && len > 1)
        {
          /* the last NUL-terminated argument */
          const char *last = text + len - 1;
          while (last > text && last[-1] != '\0')
            last--;
          if (strcmp (last, fx->mnt) == 0)
            return pid;
        }
      {
        g_autoptr (GHashTable) mine = held_inodes (pid);
        GHashTableIter it;
        gpointer key;
        g_hash_table_iter_init (&it, mine);
        while (g_hash_table_iter_next (&it, &key, NULL))
          if (g_str_has_prefix (key, "pipe:") && g_hash_table_contains (daemon_inodes, key))
            return pid;
      }
    }
  return 0;
}

/* SIGKILL of the daemon and of its helper named COMM together (the helper
 * first, so that it can't act): the other must still unmount. */
static void
kill_daemon_with (MFx *fx, const char *comm)
{
  pid_t helper;

  mfx_write (fx, "/d/f", "hello\n");
  mfx_mount (fx, mount_policy, NULL);
  use_mount (fx);
  helper = find_helper (fx, comm);
  if (helper == 0)
    fail_msg ("no %s for the mount at %s (daemon pid %d)", comm, fx->mnt, (int)fx->daemon);
  assert_int_equal (kill (helper, SIGKILL), 0);
  assert_int_equal (kill (fx->daemon, SIGKILL), 0);
  assert_true (TEST_WAIT_FOR (!test_pid_alive (helper) && !test_pid_alive (fx->daemon), GONE_WAIT_MS));
  if (!TEST_WAIT_FOR (!test_is_mounted (fx->mnt), GONE_WAIT_MS))
    fail_msg ("%s is still mounted after SIGKILL of its daemon (pid %d) and %s (pid %d)", fx->mnt, (int)fx->daemon,
              comm, (int)helper);
  fx->mounted = false;
}

/* `pkill -9 fusebox` takes the daemon and its unmount watcher; fusermount3's
 * auto_unmount is left, and its liveness check passed on the dead mount
 * once a directory had been listed. */
MFX_CASE (test_mount_sigkill_with_watcher)
{

  kill_daemon_with (fx, "fusebox-unmount");
}

/* The daemon and fusermount3 (`pkill -9 fusermount3` too): the watcher
 * is left. */
MFX_CASE (test_mount_sigkill_with_fusermount)
{

  kill_daemon_with (fx, "fusermount3");
}

/* --- run and serve: the sandbox's mount namespace ------------------------------ */

typedef struct
{
  char *mnt_ns; /* "mnt:[...]" of the process that holds the view as / */
  char *dev;    /* "MAJ:MIN" of the FUSE connection */
  /* that namespace, held open: one that ended would give its number to
   * the next one made, anyone's */
  int mnt_ns_fd;
} SandboxMount;

static void
sandbox_mount_clear (SandboxMount *m)
{
  g_free (m->mnt_ns);
  g_free (m->dev);
  if (m->mnt_ns_fd > 0)
    close (m->mnt_ns_fd);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (SandboxMount, sandbox_mount_clear)

/* The FUSE root of the first descendant of PID mounted as "/" (breadth
 * first); false if none. */
static bool
find_sandbox_mount (pid_t pid, SandboxMount *ret)
{
  g_autoptr (GArray) queue = g_array_new (FALSE, FALSE, sizeof (pid_t));

  g_array_append_val (queue, pid);
  for (guint q = 0; q < queue->len && q < 4096; q++)
    {
      pid_t p = g_array_index (queue, pid_t, q);
      g_autofree char *mi_path = g_strdup_printf ("/proc/%d/mountinfo", (int)p);
      g_autofree char *mi = NULL;
      g_autoptr (GArray) kids = NULL;

      if (p != pid && g_file_get_contents (mi_path, &mi, NULL, NULL))
        {
          g_auto (GStrv) lines = g_strsplit (mi, "\n", -1);
          for (guint i = 0; lines[i] != NULL; i++)
            {
              unsigned maj, min;
              char root[16], mnt[16];
              if (strstr (lines[i], " - fuse") != NULL &&
                  sscanf (lines[i], "%*u %*u %u:%u %15s %15s", &maj, &min, root, mnt) == 4 && strcmp (mnt, "/") == 0)
                {
                  g_autofree char *ns_path = g_strdup_printf ("/proc/%d/ns/mnt", (int)p);
                  ret->mnt_ns_fd = open (ns_path, O_RDONLY | O_CLOEXEC);
                  ret->mnt_ns = g_file_read_link (ns_path, NULL);
                  ret->dev = g_strdup_printf ("%u:%u", maj, min);
                  return ret->mnt_ns != NULL && ret->mnt_ns_fd > 0;
                }
            }
        }
      kids = test_proc_children (p);
      g_array_append_vals (queue, kids->data, kids->len);
    }
  return false;
}

/* True while some mount table on the host lists the FUSE device DEV. */
static bool
device_still_mounted (const char *dev)
{
  g_autoptr (GArray) pids = test_proc_pids ();
  g_autofree char *needle = g_strdup_printf (" %s ", dev);

  for (guint k = 0; k < pids->len; k++)
    {
      g_autofree char *path = g_strdup_printf ("/proc/%d/mountinfo", (int)g_array_index (pids, pid_t, k));
      g_autofree char *text = NULL;
      g_auto (GStrv) lines = NULL;

      if (!g_file_get_contents (path, &text, NULL, NULL))
        continue;
      lines = g_strsplit (text, "\n", -1);
      for (guint i = 0; lines[i] != NULL; i++)
        if (strstr (lines[i], needle) != NULL && strstr (lines[i], " - fuse") != NULL)
          return true;
    }
  return false;
}

/* After the daemon's SIGKILL: the namespace empties and the device is in
 * no mount table. */
static void
assert_sandbox_mount_goes (const SandboxMount *m, const char *who)
{
  if (!TEST_WAIT_FOR (!test_ns_has_processes ("mnt", m->mnt_ns), GONE_WAIT_MS))
    fail_msg ("processes of %s's sandbox (%s) outlived its SIGKILL", who, m->mnt_ns);
  if (!TEST_WAIT_FOR (!device_still_mounted (m->dev), GONE_WAIT_MS))
    fail_msg ("the view of %s (FUSE device %s) is still mounted somewhere after its SIGKILL", who, m->dev);
}

/* A command that reads T/ws/f ("hello") and lists T/ws through the view,
 * says "ready" and sleeps; the file made. */
static char *
ready_script (RFx *fx)
{
  g_autofree char *file = g_build_filename (fx->ws, "f", NULL);

  test_write (file, "hello\n", 0644);
  return g_strdup_printf ("cat %s && ls %s >/dev/null && echo ready && exec sleep 600", file, fx->ws);
}

RFX_CASE (test_run_sigkill)
{
  g_auto (SandboxMount) m = { 0 };
  g_autofree char *script = ready_script (fx);
  g_autofree char *line = NULL;
  int out_fd = -1;
  pid_t pid;

  pid = rfx_start (fx, &out_fd, "--", "/bin/sh", "-c", script, NULL);
  line = test_read_line (out_fd, GONE_WAIT_MS);
  assert_non_null (line);
  assert_string_equal (line, "hello");
  g_free (line);
  line = test_read_line (out_fd, GONE_WAIT_MS);
  assert_non_null (line);
  assert_string_equal (line, "ready");
  if (!find_sandbox_mount (pid, &m))
    fail_msg ("no FUSE root in any process below the run's supervisor (pid %d)", (int)pid);
  assert_int_equal (kill (pid, SIGKILL), 0);
  assert_int_equal (rfx_wait (fx, pid, GONE_WAIT_MS), 128 + SIGKILL);
  close (out_fd);
  assert_sandbox_mount_goes (&m, "fusebox run");
}

RFX_CASE (test_serve_sigkill)
{
  g_auto (SandboxMount) m = { 0 };
  g_autofree char *script = ready_script (fx);
  g_autofree char *qscript = test_json_quote (script);
  g_autofree char *argv_json = g_strdup_printf ("[\"/bin/sh\",\"-c\",%s]", qscript);
  const char *args[] = { "--workspace", fx->ws, NULL };
  TestServer *server;
  TestClient *client;
  int status;

  server = test_server_start (fx->tmp, args);
  assert_true (g_str_has_prefix (server->url, "ws://"));
  rfx_keep_pid (fx, server->pid);
  client = test_client_connect (server->url);
  assert_true (test_client_handshake (client, NULL));
  test_process_start (client, "p", argv_json, fx->ws, false);
  /* "hello\nready\n", in one chunk or two */
  {
    g_autoptr (GString) got = g_string_new (NULL);
    while (strstr (got->str, "ready\n") == NULL)
      {
        g_autoptr (JsonNode) n = test_client_note (client, "process/output", "p");
        gsize len;
        g_autofree guchar *d = NULL;
        assert_non_null (n);
        d = g_base64_decode (
          json_object_get_string_member (json_object_get_object_member (json_node_get_object (n), "params"), "chunk"),
          &len);
        g_string_append_len (got, (const char *)d, (gssize)len);
      }
    assert_string_equal (got->str, "hello\nready\n");
  }
  if (!find_sandbox_mount (server->pid, &m))
    fail_msg ("no FUSE root in any process below the server (pid %d)", (int)server->pid);
  assert_int_equal (kill (server->pid, SIGKILL), 0);
  assert_int_equal (waitpid (server->pid, &status, 0), server->pid);
  rfx_forget_pid (fx, server->pid);
  server->pid = 0;
  assert_true (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
  assert_sandbox_mount_goes (&m, "fusebox serve");
  test_client_free (client);
  test_server_stop (server);
}

static int
mount_group_setup (void **state)
{
  mfx_require ();
  return 0;
}

RFX_DEFINE_MAIN (NULL, mount_group_setup, MFX_TEST (test_mount_sigkill), MFX_TEST (test_mount_foreground_sigkill),
                 MFX_TEST (test_mount_sigkill_with_watcher), MFX_TEST (test_mount_sigkill_with_fusermount),
                 MFX_TEST (test_mount_group_sigkill), RFX_TEST (test_run_sigkill), RFX_TEST (test_serve_sigkill))
