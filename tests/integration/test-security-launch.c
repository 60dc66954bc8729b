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
#include <stdlib.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "tests/integration/test-serve-util.h"

typedef struct
{
  char *dir; /* T: state/, ws/ */
  char *ws;
  TestServer *server;
  TestClient *client;
} Fixture;

static Fixture *F;

static void
skip_or_fail (const char *why)
{
  if (g_strcmp0 (g_getenv ("FUSEBOX_TESTS_MUST_RUN"), "1") == 0)
    {
      fprintf (stderr, "FUSEBOX_TESTS_MUST_RUN=1 but %s\n", why);
      exit (1);
    }
  fprintf (stderr, "skipped: %s\n", why);
  exit (77);
}

static void
reproduce (void)
{
  fprintf (stderr, "reproduce the server with: %s\n", F->server != NULL ? F->server->command : "(no server)");
}

static JsonNode *call (const char *method, const char *format, ...) G_GNUC_PRINTF (2, 3);

static JsonNode *
call (const char *method, const char *format, ...)
{
  va_list ap;
  g_autofree char *params = NULL;
  JsonNode *r;

  va_start (ap, format);
  params = g_strdup_vprintf (format, ap);
  va_end (ap);
  r = test_client_call (F->client, method, params);
  if (r == NULL || answer_result (r) == NULL)
    {
      fprintf (stderr, "%s failed: %s\n", method, r != NULL ? answer_error_message (r) : "no answer");
      reproduce ();
    }
  assert_non_null (answer_result (r));
  return r;
}

static char *
json_quote (const char *s)
{
  g_autoptr (JsonNode) n = json_node_init_string (json_node_alloc (), s);
  return json_to_string (n, FALSE);
}

typedef struct
{
  GString *out;
  GString *err;
  gint64 exit_code;
} Collected;

static void
collected_clear (Collected *c)
{
  if (c->out != NULL)
    g_string_free (c->out, TRUE);
  if (c->err != NULL)
    g_string_free (c->err, TRUE);
}

/* The process's output until process/closed. */
static void
collect (const char *id, Collected *col)
{
  col->out = g_string_new (NULL);
  col->err = g_string_new (NULL);
  col->exit_code = -1;
  for (;;)
    {
      static const char *const methods[] = { "process/output", "process/exited", "process/closed" };
      JsonNode *n = NULL;
      JsonObject *p;
      const char *method;
      bool done;

      while (n == NULL)
        {
          for (guint i = 0; i < G_N_ELEMENTS (methods) && n == NULL; i++)
            {
              NoteMatch m = { methods[i], id };
              for (GList *l = F->client->inbox.head; l != NULL; l = l->next)
                if (match_note (json_node_get_object (l->data), &m))
                  {
                    n = l->data;
                    g_queue_delete_link (&F->client->inbox, l);
                    break;
                  }
            }
          if (n == NULL && F->client->closed)
            fail_msg ("the connection closed before process %s was over", id);
          if (n == NULL)
            g_main_context_iteration (NULL, TRUE);
        }
      method = json_object_get_string_member (json_node_get_object (n), "method");
      p = json_object_get_object_member (json_node_get_object (n), "params");
      if (strcmp (method, "process/output") == 0)
        {
          gsize len;
          g_autofree guchar *d = g_base64_decode (json_object_get_string_member (p, "chunk"), &len);
          bool is_err = strcmp (json_object_get_string_member (p, "stream"), "stderr") == 0;
          g_string_append_len (is_err ? col->err : col->out, (const char *)d, (gssize)len);
        }
      else if (strcmp (method, "process/exited") == 0)
        col->exit_code = json_object_get_int_member (p, "exitCode");
      done = strcmp (method, "process/closed") == 0;
      json_node_unref (n);
      if (done)
        return;
    }
}

/* process/start {processId: ID, argv: ARGV_JSON, cwd: CWD, env: ENV_JSON}
 * and its output to the end. */
static void
run_process (const char *id, const char *argv_json, const char *cwd, const char *env_json, Collected *col)
{
  g_autofree char *qcwd = json_quote (cwd);
  g_autoptr (JsonNode) r =
    call ("process/start", "{\"processId\":\"%s\",\"argv\":%s,\"cwd\":%s,\"env\":%s,\"tty\":false}", id, argv_json,
          qcwd, env_json);
  collect (id, col);
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

static char *
self_mnt_ns (void)
{
  char *ns = g_file_read_link ("/proc/self/ns/mnt", NULL);
  assert_non_null (ns);
  return ns;
}

/* --- fixture ----------------------------------------------------------------- */

static int
setup_group (void **state)
{
  const char *base = g_getenv ("FUSEBOX_TEST_TMPDIR");
  /* not /tmp: the built-in default makes /tmp private, and the workspace
   * must be at the same path on the host and in the view */
  g_autofree char *templ = g_build_filename (base != NULL ? base : "/var/tmp", "fusebox-sec-launch-XXXXXX", NULL);
  const char *args[4];

  if (geteuid () != 0 || access ("/dev/fuse", R_OK | W_OK) != 0)
    skip_or_fail ("process/start needs root and a usable /dev/fuse");
  if (g_getenv ("FUSEBOX_BUILD_ROOT") == NULL)
    skip_or_fail ("FUSEBOX_BUILD_ROOT is not set: run with 'meson test'");
  F = g_new0 (Fixture, 1);
  F->dir = g_strdup (g_mkdtemp_full (templ, 0755));
  assert_non_null (F->dir);
  F->ws = g_build_filename (F->dir, "ws", NULL);
  assert_int_equal (g_mkdir (F->ws, 0755), 0);
  /* builtin:default: the workspace writable, the rest of / read-only */
  args[0] = "--workspace";
  args[1] = F->ws;
  args[2] = NULL;
  F->server = test_server_start (F->dir, args);
  if (!g_str_has_prefix (F->server->url, "ws://"))
    return -1;
  *state = F;
  return 0;
}

static int
teardown_group (void **state)
{
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", F->dir);

  test_server_stop (F->server);
  if (system (cmd) != 0)
    fprintf (stderr, "could not remove %s\n", F->dir);
  g_free (F->dir);
  g_free (F->ws);
  g_free (F);
  return 0;
}

static int
setup (void **state)
{
  F->client = test_client_connect (F->server->url);
  if (F->client->ws == NULL)
    return -1;
  return test_client_handshake (F->client, NULL) ? 0 : -1;
}

static int
teardown (void **state)
{
  g_clear_pointer (&F->client, test_client_free);
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
  qpath = json_quote (path);
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
  g_autofree char *qso = json_quote (so);
  g_autofree char *qhost = json_quote (host_marker);
  g_autofree char *qinside = json_quote (inside_marker);
  g_autofree char *env = NULL;
  g_autofree char *argv = NULL;
  g_autofree char *inside = NULL;
  g_autofree char *own_ns = self_mnt_ns ();
  g_autofree char *want_out = NULL;
  Collected col = { 0 };

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
  collected_clear (&col);
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

/* Children of PID (every thread's), as pids. */
static GArray *
children_of (pid_t pid)
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

static pid_t
find_helper (pid_t server)
{
  g_autoptr (GArray) kids = children_of (server);

  for (guint i = 0; i < kids->len; i++)
    {
      pid_t c = g_array_index (kids, pid_t, i);
      g_autofree char *exe_link = g_strdup_printf ("/proc/%d/exe", (int)c);
      g_autofree char *exe = g_file_read_link (exe_link, NULL);
      if (exe != NULL && g_str_has_suffix (exe, "/fusebox-launch"))
        return c;
    }
  return 0;
}

static void
test_helper_gets_nothing_of_the_client (void **state)
{
  g_autofree char *so = upload_preload ("preload.so");
  g_autofree char *qso = json_quote (so);
  g_autofree char *qws = json_quote (F->ws);
  g_autofree char *environ_path = NULL;
  g_autofree char *cmdline_path = NULL;
  g_autofree char *cwd_path = NULL;
  g_autofree char *environ_text = NULL;
  g_autofree char *cmdline = NULL;
  g_autofree char *cwd = NULL;
  g_autoptr (JsonNode) start = NULL;
  g_autoptr (JsonNode) term = NULL;
  gsize environ_len = 0, cmdline_len = 0;
  pid_t helper = 0;
  Collected col = { 0 };

  /* A command that waits on its stdin while the helper is looked at; the
   * client's env carries a loader variable the helper must not have (the
   * object itself is harmless here: the marker variables are unset). */
  start = call ("process/start",
                "{\"processId\":\"waiter\",\"argv\":[\"/bin/cat\"],\"cwd\":%s,"
                "\"env\":{\"PATH\":\"/usr/bin:/bin\",\"CLIENT_SECRET_VAR\":\"from the client\",\"LD_PRELOAD\":%s},"
                "\"tty\":false,\"pipeStdin\":true}",
                qws, qso);
  for (int i = 0; i < 5000 && helper == 0; i += 10)
    {
      helper = find_helper (F->server->pid);
      if (helper == 0)
        g_usleep (10 * 1000);
    }
  if (helper == 0)
    fail_msg ("no fusebox-launch child of the server (pid %d) was found", (int)F->server->pid);
  environ_path = g_strdup_printf ("/proc/%d/environ", (int)helper);
  cmdline_path = g_strdup_printf ("/proc/%d/cmdline", (int)helper);
  cwd_path = g_strdup_printf ("/proc/%d/cwd", (int)helper);
  assert_true (g_file_get_contents (environ_path, &environ_text, &environ_len, NULL));
  assert_true (g_file_get_contents (cmdline_path, &cmdline, &cmdline_len, NULL));
  cwd = g_file_read_link (cwd_path, NULL);
  term = call ("process/terminate", "{\"processId\":\"waiter\"}");
  collect ("waiter", &col);

  if (environ_len != 0)
    {
      for (gsize i = 0; i + 1 < environ_len; i++)
        if (environ_text[i] == '\0')
          environ_text[i] = ' ';
      fail_msg ("the launch helper's environment is not empty: %s", environ_text);
    }
  /* argv: its own path, one string */
  assert_true (cmdline_len > 0);
  assert_int_equal (strlen (cmdline) + 1, cmdline_len);
  assert_true (g_str_has_suffix (cmdline, "fusebox-launch"));
  assert_non_null (cwd);
  assert_string_equal (cwd, "/");
  collected_clear (&col);
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
  g_autofree char *qpath = json_quote (path);
  g_autofree char *env = g_strdup_printf ("{\"PATH\":%s}", qpath);
  g_autofree char *want = NULL;
  Collected col = { 0 };
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
  collected_clear (&col);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_ld_preload_stays_inside, setup, teardown),
    cmocka_unit_test_setup_teardown (test_ld_audit_stays_inside, setup, teardown),
    cmocka_unit_test_setup_teardown (test_helper_gets_nothing_of_the_client, setup, teardown),
    cmocka_unit_test_setup_teardown (test_option_lookalikes_reach_the_command, setup, teardown),
  };

  return cmocka_run_group_tests (tests, setup_group, teardown_group);
}
