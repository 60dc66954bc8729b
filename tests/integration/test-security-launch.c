/* Adversarial tests: nothing a client of `fusebox serve` sends runs outside
 * the sandbox.
 *
 * A real server and a real WebSocket client.  The client writes a shared
 * object (fixtures/fb-preload.c, whose constructor leaves a marker where it
 * is loaded) into the workspace with fs/writeFile, then starts processes
 * whose `env` names it in LD_PRELOAD or LD_AUDIT.  Before, that `env` was
 * the environment of the host-side launch helper, and the dynamic loader
 * ran the client's code on the host as the server's user.  Now:
 *  - the host marker (a path outside everything the sandbox may write,
 *    first proven writable on the host) never appears;
 *  - the workspace marker does appear, written from another mount
 *    namespace, and the command prints the variable: the client's env
 *    still reaches the command, and only the command;
 *  - while a command runs, the helper's own environment is empty, its
 *    argv is its path alone and its working directory "/";
 *  - an argv[0] and arguments spelled like the helper's old options
 *    ("--network host", "--cwd /") and a cwd named "--cwd" reach the
 *    command as they are, and the sandbox keeps its own network.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1).
 * A failure prints the command that starts the same server by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "tests/lib/test-serve.h"
#include "tests/lib/test-util.h"

static TestServe *F;

static void
reproduce (void)
{
  fprintf (stderr, "reproduce the server with: %s\n", F->server != NULL ? F->server->command : "(no server)");
}

/* The answer to call (METHOD, FORMAT, ...), params made by printf; an
 * error or no answer fails the test. */
#define call(method, ...) succeeded (method, test_client_callf (F->client, method, __VA_ARGS__))

static JsonNode *
succeeded (const char *method, JsonNode *r)
{
  if (r == NULL || test_answer_result (r) == NULL)
    {
      fprintf (stderr, "%s failed: %s\n", method, r != NULL ? test_answer_error_message (r) : "no answer");
      reproduce ();
    }
  assert_non_null (test_answer_result (r));
  return r;
}

/* process/start {processId: ID, argv: ARGV_JSON, cwd: CWD, env: ENV_JSON}
 * and its output to the end. */
static void
run_process (const char *id, const char *argv_json, const char *cwd, const char *env_json, TestProcessOutput *col)
{
  g_autofree char *qcwd = test_json_quote (cwd);
  g_autoptr (JsonNode) r =
    call ("process/start", "{\"processId\":\"%s\",\"argv\":%s,\"cwd\":%s,\"env\":%s,\"tty\":false}", id, argv_json,
          qcwd, env_json);
  test_process_collect (F->client, id, col);
  if (col->exit_code != 0)
    fprintf (stderr, "process %s exited %" G_GINT64_FORMAT "; stdout: %s; stderr: %s\n", id, col->exit_code,
             col->out->str, col->err->str);
}

/* A host path must be writable outside before a test shows that the
 * sandbox's code could not write it. */
static void
assert_host_writable_dir (const char *dir)
{
  g_autofree char *probe = g_build_filename (dir, "host-probe", NULL);

  assert_true (g_file_set_contents (probe, "x", 1, NULL));
  assert_int_equal (g_unlink (probe), 0);
}

/* --- fixture ----------------------------------------------------------------- */

static int
setup_group (void **state)
{
  test_host_require ("root", "process/start needs root");
  test_host_require ("fuse", "process/start needs a usable /dev/fuse");
  if (g_getenv ("FUSEBOX_BUILD_ROOT") == NULL)
    test_skip_or_fail ("FUSEBOX_BUILD_ROOT is not set: run with 'meson test'");
  /* not /tmp: the built-in default makes /tmp private, and the workspace
   * must be at the same path on the host and in the view */
  F = test_serve_new (test_workdir ("fusebox-sec-launch"));
  /* builtin:default: the workspace writable, the rest of / read-only */
  if (!test_serve_start (F, NULL))
    return -1;
  *state = F;
  return 0;
}

/* The shared object, written into the workspace the way a client would. */
static char *
upload_preload (const char *name)
{
  g_autofree char *so = g_build_filename (g_getenv ("FUSEBOX_BUILD_ROOT"), "fixtures", "fb-preload.so", NULL);
  g_autofree char *data = NULL;
  g_autofree char *b64 = NULL;
  g_autofree char *qpath = NULL;
  char *path = g_build_filename (F->ws, name, NULL);
  gsize len;

  if (!g_file_get_contents (so, &data, &len, NULL))
    fail_msg ("fixture %s is missing: build it with ninja", so);
  b64 = g_base64_encode ((const guchar *)data, len);
  qpath = test_json_quote (path);
  json_node_unref (call ("fs/writeFile", "{\"path\":%s,\"dataBase64\":\"%s\"}", qpath, b64));
  assert_true (g_file_test (path, G_FILE_TEST_IS_REGULAR));
  return path;
}

/* VAR=<the uploaded object> in the client's env: the code runs inside the
 * sandbox (the workspace marker, from another mount namespace), never on
 * the host (the host marker). */
static void
check_loader_variable (const char *var, const char *id)
{
  g_autofree char *so = upload_preload ("preload.so");
  g_autofree char *host_marker = g_build_filename (F->dir, "escaped", NULL);
  g_autofree char *inside_marker = g_build_filename (F->ws, "inside", NULL);
  g_autofree char *qso = test_json_quote (so);
  g_autofree char *qhost = test_json_quote (host_marker);
  g_autofree char *qinside = test_json_quote (inside_marker);
  g_autofree char *env = NULL;
  g_autofree char *argv = NULL;
  g_autofree char *inside = NULL;
  g_autofree char *own_ns = test_own_ns ("mnt");
  g_autofree char *want_out = NULL;
  TestProcessOutput col = { 0 };

  assert_host_writable_dir (F->dir);
  g_unlink (host_marker);
  g_unlink (inside_marker);
  env = g_strdup_printf ("{\"PATH\":\"/usr/bin:/bin\",\"%s\":%s,\"FB_PRELOAD_MARKER\":%s,"
                         "\"FB_PRELOAD_INSIDE_MARKER\":%s}",
                         var, qso, qhost, qinside);
  argv = g_strdup_printf ("[\"/bin/sh\",\"-c\",\"printf '%%s' \\\"$%s\\\"\"]", var);
  run_process (id, argv, F->ws, env, &col);

  if (g_file_test (host_marker, G_FILE_TEST_EXISTS))
    {
      g_autofree char *text = NULL;
      g_file_get_contents (host_marker, &text, NULL, NULL);
      reproduce ();
      fail_msg ("%s in a client's env ran the client's code on the host: %s holds '%s'", var, host_marker,
                text != NULL ? g_strstrip (text) : "");
    }
  assert_int_equal (col.exit_code, 0);
  /* the variable reached the command, unchanged */
  want_out = g_strdup (so);
  assert_string_equal (col.out->str, want_out);
  /* and the loader honoured it inside the sandbox */
  if (!g_file_get_contents (inside_marker, &inside, NULL, NULL))
    fail_msg ("%s did not reach the command inside: %s was not written", var, inside_marker);
  assert_null (strstr (inside, own_ns));
  assert_non_null (strstr (inside, "mnt=mnt:["));
  test_process_output_clear (&col);
}

static void
test_ld_preload_stays_inside (void **state)
{
  check_loader_variable ("LD_PRELOAD", "preload");
}

static void
test_ld_audit_stays_inside (void **state)
{
  check_loader_variable ("LD_AUDIT", "audit");
}

/* --- the helper's own process ------------------------------------------------- */

/* What PID's descriptor FD is, or NULL. */
static char *
fd_target (pid_t pid, int fd)
{
  g_autofree char *link = g_strdup_printf ("/proc/%d/fd/%d", (int)pid, fd);

  return g_file_read_link (link, NULL);
}

/* Whether C runs fusebox-launch; *RET_STDIN its stdin's target. */
static bool
is_launch_helper (pid_t c, char **ret_stdin)
{
  g_autofree char *exe_link = g_strdup_printf ("/proc/%d/exe", (int)c);
  g_autofree char *exe = g_file_read_link (exe_link, NULL);

  *ret_stdin = fd_target (c, 0);
  return exe != NULL && g_str_has_suffix (exe, "/fusebox-launch") && *ret_stdin != NULL;
}

/* A fusebox-launch child of SERVER: one that runs a command (its stdin is
 * the command's, not /dev/null), or with SPARE one started before its
 * command, which still waits for it (/dev/null there, no sandbox yet). */
static pid_t
find_launch_child (pid_t server, bool spare, pid_t except)
{
  g_autoptr (GArray) kids = test_proc_children (server);

  for (guint i = 0; i < kids->len; i++)
    {
      pid_t c = g_array_index (kids, pid_t, i);
      g_autofree char *in = NULL;
      g_autoptr (GArray) sandbox = NULL;
      if (c == except || !is_launch_helper (c, &in))
        continue;
      if (!spare && strcmp (in, "/dev/null") != 0)
        return c;
      sandbox = test_proc_children (c);
      if (spare && strcmp (in, "/dev/null") == 0 && sandbox->len == 0)
        return c;
    }
  return 0;
}

static pid_t
find_helper (pid_t server)
{
  return find_launch_child (server, false, 0);
}

/* Until the server started a spare helper other than EXCEPT (a bounded
 * wait). */
static pid_t
wait_for_spare (pid_t server, pid_t except)
{
  for (int ms = 0; ms < 10000; ms += 10)
    {
      pid_t spare = find_launch_child (server, true, except);
      if (spare != 0)
        return spare;
      g_usleep (10 * 1000);
    }
  fail_msg ("the server (pid %d) started no spare fusebox-launch (other than %d)", (int)server, (int)except);
  return 0;
}

/* A field of /proc/PID/status, or NULL. */
static char *
status_field (pid_t pid, const char *name)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", (int)pid);
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  gsize n = strlen (name);

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    if (strncmp (lines[i], name, n) == 0 && lines[i][n] == ':')
      return g_strstrip (g_strdup (lines[i] + n + 1));
  return NULL;
}

/* PID or one of its descendants runs in a pid namespace of its own under
 * a seccomp filter: a sandbox made and locked down. */
static bool
holds_locked_sandbox (pid_t pid)
{
  g_autoptr (GArray) kids = test_proc_children (pid);
  g_autofree char *nspid = status_field (pid, "NSpid");
  g_autofree char *seccomp = status_field (pid, "Seccomp");

  if (nspid != NULL && strchr (nspid, '\t') != NULL && g_strcmp0 (seccomp, "2") == 0)
    return true;
  for (guint i = 0; i < kids->len; i++)
    if (holds_locked_sandbox (g_array_index (kids, pid_t, i)))
      return true;
  return false;
}

/* The ready sandbox the server made ahead after a process/start: a
 * fusebox-launch child with /dev/null as its stdin whose sandbox is
 * locked down (a bounded wait; 0 if none came). */
static pid_t
wait_for_ready (pid_t server)
{
  for (int ms = 0; ms < 10000; ms += 10)
    {
      g_autoptr (GArray) kids = test_proc_children (server);
      for (guint i = 0; i < kids->len; i++)
        {
          pid_t c = g_array_index (kids, pid_t, i);
          g_autofree char *in = NULL;
          if (is_launch_helper (c, &in) && strcmp (in, "/dev/null") == 0 && holds_locked_sandbox (c))
            return c;
        }
      g_usleep (10 * 1000);
    }
  return 0;
}

static bool exited (pid_t pid);

/* The ready sandbox killed from outside, and gone: the next process/start
 * passes it over. */
static void
kill_ready (pid_t server)
{
  pid_t ready = wait_for_ready (server);

  if (ready == 0)
    fail_msg ("the server (pid %d) made no ready sandbox", (int)server);
  assert_int_equal (kill (ready, SIGKILL), 0);
  for (int ms = 0; ms < 10000 && !exited (ready); ms += 10)
    g_usleep (10 * 1000);
}

/* PID has exited: gone, or a zombie not yet reaped. */
static bool
exited (pid_t pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", (int)pid);
  g_autofree char *stat = NULL;
  const char *end;

  if (!g_file_get_contents (path, &stat, NULL, NULL))
    return true;
  end = strrchr (stat, ')');
  return end != NULL && end[1] == ' ' && end[2] == 'Z';
}

/* What /proc shows of a process: its environment and command line (each
 * NUL-separated, with its length) and its cwd. */
typedef struct
{
  char *environ_text;
  gsize environ_len;
  char *cmdline;
  gsize cmdline_len;
  char *cwd;
} ProcShown;

static void
proc_shown_clear (ProcShown *p)
{
  g_clear_pointer (&p->environ_text, g_free);
  g_clear_pointer (&p->cmdline, g_free);
  g_clear_pointer (&p->cwd, g_free);
  p->environ_len = p->cmdline_len = 0;
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (ProcShown, proc_shown_clear)

/* PID's cwd, environment and command line, read in that order into P:
 * false (P cleared) unless the command line is not empty.  A process
 * read while it exits shows an empty environment and command line (its
 * memory is gone), which proves nothing; the command line comes last, so
 * a non-empty one shows that the environment was read from a live one. */
static bool
proc_shown_read (pid_t pid, ProcShown *p)
{
  g_autofree char *environ_path = g_strdup_printf ("/proc/%d/environ", (int)pid);
  g_autofree char *cmdline_path = g_strdup_printf ("/proc/%d/cmdline", (int)pid);
  g_autofree char *cwd_path = g_strdup_printf ("/proc/%d/cwd", (int)pid);

  proc_shown_clear (p);
  p->cwd = g_file_read_link (cwd_path, NULL);
  if (g_file_get_contents (environ_path, &p->environ_text, &p->environ_len, NULL) &&
      g_file_get_contents (cmdline_path, &p->cmdline, &p->cmdline_len, NULL) && p->cmdline_len > 0)
    return true;
  proc_shown_clear (p);
  return false;
}

/* Nothing the server holds reaches the helper beyond its fd 0-3: no
 * socket, pipe or file of the server's (its listening socket, a
 * client's connection, a log), and no FUSE device.  Anonymous inodes
 * (pidfds, eventfds) have no identity to compare and are left out. */
static void
assert_helper_holds_nothing_of_the_server (pid_t helper, pid_t server)
{
  g_autoptr (GHashTable) mine = test_proc_fd_targets (helper, 4) /* past its socket, fd 3 */;
  g_autoptr (GHashTable) theirs = test_proc_fd_targets (server, 0);
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter it;
  gpointer name, target;

  g_hash_table_iter_init (&it, theirs);
  while (g_hash_table_iter_next (&it, NULL, &target))
    g_hash_table_add (seen, target);
  g_hash_table_iter_init (&it, mine);
  while (g_hash_table_iter_next (&it, &name, &target))
    {
      if (g_str_has_prefix (target, "anon_inode:"))
        continue;
      if (strcmp (target, "/dev/fuse") == 0 || g_hash_table_contains (seen, target))
        fail_msg ("the launch helper (pid %d) holds the server's %s as fd %s", (int)helper, (char *)target,
                  (char *)name);
    }
}

static void
test_helper_gets_nothing_of_the_client (void **state)
{
  g_autofree char *so = upload_preload ("preload.so");
  g_autofree char *qso = test_json_quote (so);
  g_autofree char *qws = test_json_quote (F->ws);
  g_auto (ProcShown) helper_shown = { 0 };
  pid_t helper = 0;
  TestProcessOutput col = { 0 };

  g_autofree char *seen = NULL, *failure = NULL;
  int code;

  /* A command that waits on its stdin while the helper is looked at; the
   * client's env carries a loader variable the helper must not have (the
   * object itself is harmless here: the marker variables are unset). */
  g_autoptr (JsonNode) start =
    call ("process/start",
          "{\"processId\":\"waiter\",\"argv\":[\"/bin/sh\",\"-c\",\"echo ready; exec cat\"],\"cwd\":%s,"
          "\"env\":{\"PATH\":\"/usr/bin:/bin\",\"CLIENT_SECRET_VAR\":\"from the client\",\"LD_PRELOAD\":%s},"
          "\"tty\":false,\"pipeStdin\":true}",
          qws, qso);
  /* The command runs: its helper has made the sandbox and let go of the
   * view's namespaces, which it held to join them. */
  seen = test_process_read (F->client, "waiter", "ready", &code, &failure);
  if (seen == NULL || strstr (seen, "ready") == NULL)
    fail_msg ("the waiter never said it was ready: %s", failure != NULL ? failure : "(no failure)");
  /* The view's keeper's helper and the spare are fusebox-launch children
   * too, with /dev/null as stdin: find_helper passes them by.  One read
   * while the helper exits sends the search on. */
  for (int i = 0; i < 5000; i += 10)
    {
      helper = find_helper (F->server->pid);
      if (helper != 0 && proc_shown_read (helper, &helper_shown))
        break;
      g_usleep (10 * 1000);
    }
  if (helper == 0 || helper_shown.cmdline_len == 0)
    fail_msg ("no live fusebox-launch child of the server (pid %d) was found", (int)F->server->pid);
  assert_helper_holds_nothing_of_the_server (helper, F->server->pid);
  g_autoptr (JsonNode) term = call ("process/terminate", "{\"processId\":\"waiter\"}");
  test_process_collect (F->client, "waiter", &col);

  if (helper_shown.environ_len != 0)
    {
      for (gsize i = 0; i + 1 < helper_shown.environ_len; i++)
        if (helper_shown.environ_text[i] == '\0')
          helper_shown.environ_text[i] = ' ';
      fail_msg ("the launch helper's environment is not empty: %s", helper_shown.environ_text);
    }
  /* argv: its own path, one string */
  assert_int_equal (strlen (helper_shown.cmdline) + 1, helper_shown.cmdline_len);
  assert_true (g_str_has_suffix (helper_shown.cmdline, "fusebox-launch"));
  assert_non_null (helper_shown.cwd);
  assert_string_equal (helper_shown.cwd, "/");
  test_process_output_clear (&col);
}

/* The helper the server starts before its process/start (the spare):
 * nothing of anyone's until its command comes, then the command's own
 * streams and exit status; one that died is not used. */
static void
test_spare_helper (void **state)
{
  g_auto (ProcShown) shown = { 0 };
  TestProcessOutput first = { 0 }, next = { 0 }, after = { 0 }, dying = { 0 };
  pid_t server = F->server->pid, spare, dead;
  bool ran_in_spare = false;

  /* a process/start: the server starts a spare for the next.  Its
   * command starts with no signal ignored, whatever the server's and the
   * spawn's own (glibc's posix_spawn leaves 32 and 33 ignored unless told) */
  run_process ("spare-first", "[\"/bin/grep\",\"^SigIgn\",\"/proc/self/status\"]", F->ws,
               "{\"PATH\":\"/usr/bin:/bin\"}", &first);
  assert_int_equal (first.exit_code, 0);
  assert_string_equal (first.out->str, "SigIgn:\t0000000000000000\n");
  spare = wait_for_spare (server, 0);
  if (!proc_shown_read (spare, &shown))
    fail_msg ("the spare helper (pid %d) ended while it waited", (int)spare);
  assert_int_equal (shown.environ_len, 0);
  assert_true (g_str_has_suffix (shown.cmdline, "fusebox-launch"));
  assert_string_equal (shown.cwd, "/");
  assert_helper_holds_nothing_of_the_server (spare, server);

  /* the next runs in it, with its own stdin, stdout, stderr and status,
   * once the ready sandbox made for this view after the first is gone
   * (killed from outside: passed over) */
  kill_ready (server);
  test_process_start (F->client, "spare-next", "[\"/bin/sh\",\"-c\",\"read x; echo out:$x; echo err:$x >&2; exit 3\"]",
                      F->ws, true);
  for (int ms = 0; ms < 10000 && !ran_in_spare; ms += 10)
    {
      g_autofree char *in = fd_target (spare, 0);
      g_autoptr (GArray) sandbox = test_proc_children (spare);
      ran_in_spare = in != NULL && g_str_has_prefix (in, "pipe:") && sandbox->len > 0;
      if (!ran_in_spare)
        g_usleep (10 * 1000);
    }
  if (!ran_in_spare)
    fail_msg ("the second process/start did not run in the spare helper (pid %d)", (int)spare);
  test_process_write (F->client, "spare-next", "hi\n", "spare-w1");
  test_process_collect (F->client, "spare-next", &next);
  assert_string_equal (next.out->str, "out:hi\n");
  assert_string_equal (next.err->str, "err:hi\n");
  assert_int_equal (next.exit_code, 3);

  /* a spare that died is not used: the process gets a helper of its own */
  dead = wait_for_spare (server, spare);
  assert_int_equal (kill (dead, SIGKILL), 0);
  for (int ms = 0; ms < 10000 && !exited (dead); ms += 10)
    g_usleep (10 * 1000);
  kill_ready (server);
  run_process ("spare-after", "[\"/bin/grep\",\"^SigIgn\",\"/proc/self/status\"]", F->ws,
               "{\"PATH\":\"/usr/bin:/bin\"}", &after);
  assert_string_equal (after.out->str, "SigIgn:\t0000000000000000\n");
  assert_int_equal (after.exit_code, 0);

  /* nor one that dies once it was given the command but before it said a
   * word (stopped, so that the command waits in its socket, then killed):
   * the command never ran, and it runs in a helper of its own */
  dead = wait_for_spare (server, 0);
  assert_int_equal (kill (dead, SIGSTOP), 0);
  kill_ready (server);
  test_process_start (F->client, "spare-dying", "[\"/bin/sh\",\"-c\",\"echo once\"]", F->ws, false);
  /* taken: the server starts the next spare */
  wait_for_spare (server, dead);
  assert_int_equal (kill (dead, SIGKILL), 0);
  test_process_collect (F->client, "spare-dying", &dying);
  assert_string_equal (dying.out->str, "once\n");
  assert_int_equal (dying.exit_code, 0);
  test_process_output_clear (&dying);
  test_process_output_clear (&first);
  test_process_output_clear (&next);
  test_process_output_clear (&after);
}

/* Strings the helper once parsed as its own options reach the command as
 * they are: argv[0] "--network" (a script in the workspace, found through
 * the client's PATH), arguments "host --cwd /", a cwd named "--cwd". */
static void
test_option_lookalikes_reach_the_command (void **state)
{
  g_autofree char *script = g_build_filename (F->ws, "--network", NULL);
  g_autofree char *odd_cwd = g_build_filename (F->ws, "--cwd", NULL);
  g_autofree char *path = g_strconcat (F->ws, ":/usr/bin:/bin", NULL);
  g_autofree char *qpath = test_json_quote (path);
  g_autofree char *env = g_strdup_printf ("{\"PATH\":%s}", qpath);
  g_autofree char *want = NULL;
  TestProcessOutput col = { 0 };
  g_auto (GStrv) lines = NULL;
  guint ifaces = 0;

  assert_true (g_file_set_contents (script,
                                    "#!/bin/sh\n"
                                    "printf '%s|' \"${0##*/}\" \"$@\"; pwd\n"
                                    "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '\n",
                                    -1, NULL));
  assert_int_equal (chmod (script, 0755), 0);
  assert_int_equal (g_mkdir (odd_cwd, 0755), 0);
  run_process ("lookalike", "[\"--network\",\"host\",\"--cwd\",\"/\",\"--\",\"-x\"]", odd_cwd, env, &col);
  assert_int_equal (col.exit_code, 0);
  lines = g_strsplit (col.out->str, "\n", -1);
  want = g_strdup_printf ("--network|host|--cwd|/|--|-x|%s", odd_cwd);
  assert_string_equal (lines[0], want);
  /* the sandbox's own network namespace (network none): loopback only */
  for (guint i = 1; lines[i] != NULL; i++)
    if (lines[i][0] != '\0')
      {
        assert_string_equal (lines[i], "lo");
        ifaces++;
      }
  assert_int_equal (ifaces, 1);
  test_process_output_clear (&col);
}

TEST_DEFINE_MAIN (setup_group, test_serve_group_teardown, TEST_SERVE_TEST (test_ld_preload_stays_inside),
                  TEST_SERVE_TEST (test_ld_audit_stays_inside),
                  TEST_SERVE_TEST (test_helper_gets_nothing_of_the_client), TEST_SERVE_TEST (test_spare_helper),
                  TEST_SERVE_TEST (test_option_lookalikes_reach_the_command))
