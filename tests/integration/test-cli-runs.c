/* fusebox — `fusebox runs` lists every kind of run: a mount and a server
 * while they live (running) and once they have stopped (over, with their
 * exit status), beside a `run`, each with its kind, in the text and the
 * --json output; and a run.json written before runs had a kind is still
 * read, as a `run`'s. */
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
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>
#include <json-glib/json-glib.h>

#define OLD_RUN "20200101-000000-oldrun"

typedef struct
{
  char *tmp;
  char *state; /* XDG_STATE_HOME */
  char *mnt;
  char *sock;
  GStrv env;
  pid_t mount_daemon;
  GPid server;
  bool mounted;
  const char *step; /* for the repro line */
} Fx;

static const char *
fusebox_bin (void)
{
  const char *bin = g_getenv ("FUSEBOX_BIN");

  return bin != NULL ? bin : "fusebox";
}

static void
require_fuse (void)
{
  const char *why = NULL;

  if (access ("/dev/fuse", R_OK | W_OK) < 0)
    why = "/dev/fuse is missing or not usable";
  else if (geteuid () != 0)
    why = "these tests need root (a mount, and a sandbox of each kind)";
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

static bool
pid_alive (pid_t pid)
{
  return pid > 0 && kill (pid, 0) == 0;
}

static bool
wait_gone (pid_t pid, guint tenths)
{
  for (guint i = 0; i < tenths; i++)
    {
      if (!pid_alive (pid))
        return true;
      g_usleep (100 * 1000);
    }
  return !pid_alive (pid);
}

/* fusebox ARGS... (NULL-terminated) with the fixture's environment. */
static int
fusebox (Fx *fx, char **ret_out, char **ret_err, const char *first, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  va_list ap;
  int status;

  g_ptr_array_add (argv, (char *)fusebox_bin ());
  va_start (ap, first);
  for (const char *a = first; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (argv, (char *)a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (fx->tmp, (char **)argv->pdata, fx->env, G_SPAWN_DEFAULT, NULL, NULL, ret_out, ret_err, &status,
                     &error))
    fail_msg ("spawn: %s", error->message);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

static int
rm_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  remove (path);
  return 0;
}

static int
setup (void **state)
{
  Fx *fx = g_new0 (Fx, 1);
  g_autoptr (GError) error = NULL;

  fx->tmp = g_dir_make_tmp ("fusebox-runs-XXXXXX", &error);
  assert_non_null (fx->tmp);
  chmod (fx->tmp, 0755);
  fx->state = g_build_filename (fx->tmp, "state", NULL);
  fx->mnt = g_build_filename (fx->tmp, "mnt", NULL);
  fx->sock = g_build_filename (fx->tmp, "api.sock", NULL);
  assert_int_equal (g_mkdir_with_parents (fx->mnt, 0755), 0);
  fx->env = g_environ_setenv (g_get_environ (), "XDG_STATE_HOME", fx->state, TRUE);
  *state = fx;
  return 0;
}

static int
teardown (void **state)
{
  Fx *fx = *state;
  const char *umount_argv[] = { "fusermount3", "-u", "-q", fx->mnt, NULL };
  bool left = false;

  if (fx->mounted)
    {
      if (!g_spawn_sync (NULL, (char **)umount_argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL, NULL))
        umount2 (fx->mnt, MNT_DETACH);
    }
  if (fx->mount_daemon > 0 && !wait_gone (fx->mount_daemon, 100))
    kill (fx->mount_daemon, SIGKILL);
  if (fx->server > 0)
    {
      kill (fx->server, SIGKILL);
      waitpid (fx->server, NULL, 0);
    }
  if (fx->step != NULL)
    {
      fprintf (stderr,
               "reproduce: XDG_STATE_HOME=%s %s runs --json (after: %s); the runs are kept in %s\n"
               "   or rerun this test alone: FUSEBOX_BIN=%s %s\n",
               fx->state, fusebox_bin (), fx->step, fx->tmp, fusebox_bin (), g_get_prgname ());
      left = true;
    }
  if (!left)
    nftw (fx->tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  g_free (fx->tmp);
  g_free (fx->state);
  g_free (fx->mnt);
  g_free (fx->sock);
  g_strfreev (fx->env);
  g_free (fx);
  return 0;
}

/* `fusebox runs --json`: the entry of run ID, or NULL. */
static JsonObject *
runs_json_entry (Fx *fx, const char *id)
{
  g_autofree char *out = NULL, *err = NULL;
  g_auto (GStrv) lines = NULL;

  assert_int_equal (fusebox (fx, &out, &err, "runs", "--json", NULL), 0);
  lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_autoptr (JsonParser) p = json_parser_new ();
      JsonObject *o;

      if (lines[i][0] == '\0')
        continue;
      if (!json_parser_load_from_data (p, lines[i], -1, NULL))
        fail_msg ("runs --json: not JSON: %s", lines[i]);
      o = json_node_get_object (json_parser_get_root (p));
      if (g_strcmp0 (json_object_get_string_member_with_default (o, "run", NULL), id) == 0)
        return json_object_ref (o);
    }
  return NULL;
}

/* `fusebox runs --json` says run ID ended with exit status 0 and counted
 * its records, and its denials when COUNTS_DENIALS. */
static void
assert_ended_cleanly (Fx *fx, const char *id, bool counts_denials)
{
  g_autoptr (JsonObject) entry = runs_json_entry (fx, id);
  JsonObject *info;

  if (entry == NULL)
    fail_msg ("runs --json: no run %s", id);
  info = json_object_get_object_member (entry, "info");
  assert_true (json_object_has_member (info, "ended"));
  assert_int_equal (json_object_get_int_member (info, "exit_status"), 0);
  assert_true (json_object_has_member (info, "records"));
  assert_int_equal (json_object_has_member (info, "denials"), counts_denials);
}

/* `fusebox runs`: the line of run ID split at blanks, or NULL. */
static GStrv
runs_text_fields (Fx *fx, const char *id)
{
  g_autofree char *out = NULL, *err = NULL;
  g_auto (GStrv) lines = NULL;

  assert_int_equal (fusebox (fx, &out, &err, "runs", NULL), 0);
  lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix (lines[i], id) && lines[i][strlen (id)] == ' ')
      {
        GStrv fields = g_strsplit_set (lines[i], " ", -1);
        GPtrArray *kept = g_ptr_array_new ();

        for (guint j = 0; fields[j] != NULL; j++)
          if (fields[j][0] != '\0')
            g_ptr_array_add (kept, g_strdup (fields[j]));
        g_strfreev (fields);
        g_ptr_array_add (kept, NULL);
        return (GStrv)g_ptr_array_free (kept, FALSE);
      }
  fail_msg ("runs: no line for %s:\n%s", id, out);
  return NULL;
}

/* Run ID is listed with KIND and STATE in both outputs; WHAT (may be
 * NULL) is in its text line. */
static void
assert_listed (Fx *fx, const char *id, const char *kind, const char *state, const char *what)
{
  g_autoptr (JsonObject) entry = runs_json_entry (fx, id);
  g_auto (GStrv) fields = runs_text_fields (fx, id);
  JsonObject *info;

  if (entry == NULL)
    fail_msg ("runs --json: no entry for %s", id);
  assert_string_equal (json_object_get_string_member_with_default (entry, "kind", "(none)"), kind);
  assert_string_equal (json_object_get_string_member (entry, "state"), state);
  info = json_object_get_object_member (entry, "info");
  assert_non_null (info);
  if (json_object_has_member (info, "kind"))
    assert_string_equal (json_object_get_string_member (info, "kind"), kind);
  assert_true (g_strv_length (fields) >= 3);
  assert_string_equal (fields[1], kind);
  assert_string_equal (fields[2], state);
  if (what != NULL)
    {
      g_autofree char *line = g_strjoinv (" ", fields);
      if (strstr (line, what) == NULL)
        fail_msg ("runs: the line of %s does not show %s: %s", id, what, line);
    }
}

/* The run directory a command printed ("run directory DIR"), as an id. */
static char *
printed_run_id (const char *text)
{
  const char *p = strstr (text, "run directory ");
  g_autofree char *dir = NULL;

  if (p == NULL)
    fail_msg ("no run directory in:\n%s", text);
  p += strlen ("run directory ");
  dir = g_strndup (p, strcspn (p, ";\n"));
  return g_path_get_basename (dir);
}

static char *
start_mount (Fx *fx)
{
  g_autofree char *out = NULL, *err = NULL;
  const char *pid;

  fx->step = "fusebox mount";
  if (fusebox (fx, &out, &err, "mount", "--policy", "builtin:default", fx->mnt, NULL) != 0)
    fail_msg ("mount failed:\n%s%s", out, err);
  fx->mounted = true;
  pid = strstr (out, "daemon pid ");
  assert_non_null (pid);
  fx->mount_daemon = (pid_t)atoi (pid + strlen ("daemon pid "));
  return printed_run_id (out);
}

/* `fusebox serve --listen unix:SOCK`: its id, once it listens (stderr's
 * "serving ... run directory DIR" line comes after the address). */
static char *
start_server (Fx *fx)
{
  g_autofree char *listen = g_strconcat ("unix:", fx->sock, NULL);
  const char *argv[] = { fusebox_bin (), "serve", "--listen", listen, NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) err_text = g_string_new (NULL);
  int out_fd, err_fd;
  char buf[4096];
  ssize_t n;

  fx->step = "fusebox serve";
  if (!g_spawn_async_with_pipes (fx->tmp, (char **)argv, fx->env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &fx->server,
                                 NULL, &out_fd, &err_fd, &error))
    fail_msg ("spawn serve: %s", error->message);
  close (out_fd);
  /* stderr up to the line naming the run directory */
  while (strstr (err_text->str, "run directory ") == NULL ||
         strchr (strstr (err_text->str, "run directory "), '\n') == NULL)
    {
      n = read (err_fd, buf, sizeof buf);
      if (n <= 0)
        fail_msg ("serve ended before it listened:\n%s", err_text->str);
      g_string_append_len (err_text, buf, n);
    }
  close (err_fd);
  return printed_run_id (err_text->str);
}

/* A run.json as `fusebox run` wrote it before runs had a kind. */
static void
write_old_run (Fx *fx)
{
  g_autofree char *dir = g_build_filename (fx->state, "fusebox", "runs", OLD_RUN, NULL);
  g_autofree char *path = g_build_filename (dir, "run.json", NULL);
  const char *text = "{\n  \"run\" : \"" OLD_RUN "\",\n  \"command\" : [\n    \"/bin/true\"\n  ],\n"
                     "  \"cwd\" : \"/\",\n  \"policy\" : \"builtin:default\",\n  \"network\" : \"none\",\n"
                     "  \"uid\" : 0,\n  \"gid\" : 0,\n  \"started\" : \"2020-01-01T00:00:00Z\",\n"
                     "  \"supervisor\" : {\n    \"pid\" : 1,\n    \"start_time\" : 1\n  },\n"
                     "  \"ended\" : \"2020-01-01T00:00:01Z\",\n  \"exit_status\" : 0,\n  \"records\" : 0,\n"
                     "  \"denials\" : 0\n}\n";

  assert_int_equal (g_mkdir_with_parents (dir, 0700), 0);
  assert_true (g_file_set_contents (path, text, -1, NULL));
}

static void
test_every_kind (void **state)
{
  Fx *fx = *state;
  g_autofree char *mount_id = NULL, *serve_id = NULL;
  g_autofree char *out = NULL, *err = NULL;
  const char *umount_argv[] = { "fusermount3", "-u", fx->mnt, NULL };
  int status;

  require_fuse ();
  write_old_run (fx);
  mount_id = start_mount (fx);
  serve_id = start_server (fx);
  fx->step = "fusebox run";
  if (fusebox (fx, &out, &err, "run", "--", "/bin/true", NULL) != 0)
    fail_msg ("run failed:\n%s%s", out, err);

  /* alive: running, each with its kind and what it shows */
  fx->step = "a mount, a server and a run, listed";
  assert_listed (fx, mount_id, "mount", "running", fx->mnt);
  assert_listed (fx, serve_id, "serve", "running", fx->sock);
  assert_listed (fx, OLD_RUN, "run", "over", "/bin/true");
  {
    g_auto (GStrv) lines = NULL;
    guint runs = 0;

    g_clear_pointer (&out, g_free);
    g_clear_pointer (&err, g_free);
    assert_int_equal (fusebox (fx, &out, &err, "runs", NULL), 0);
    lines = g_strsplit (out, "\n", -1);
    for (guint i = 0; lines[i] != NULL; i++)
      if (strstr (lines[i], " run ") != NULL && strstr (lines[i], " over ") != NULL &&
          !g_str_has_prefix (lines[i], OLD_RUN))
        runs++;
    assert_int_equal (runs, 1);
    /* nothing is unknown */
    if (strstr (out, "unknown") != NULL)
      fail_msg ("runs: a run shows as unknown:\n%s", out);
  }

  /* stopped: over, with their exit status */
  fx->step = "the mount unmounted, the server stopped";
  assert_true (
    g_spawn_sync (NULL, (char **)umount_argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, &status, NULL));
  fx->mounted = false;
  assert_true (wait_gone (fx->mount_daemon, 300));
  kill (fx->server, SIGTERM);
  assert_int_equal (waitpid (fx->server, &status, 0), fx->server);
  fx->server = 0;
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  assert_listed (fx, mount_id, "mount", "over", fx->mnt);
  assert_listed (fx, serve_id, "serve", "over", fx->sock);
  assert_ended_cleanly (fx, mount_id, true);
  /* a server's views count their own denials: no count that saw none of them */
  assert_ended_cleanly (fx, serve_id, false);
  fx->step = NULL;
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_every_kind, setup, teardown),
  };

  g_set_prgname (argv[0]);
  return cmocka_run_group_tests (tests, NULL, NULL);
}
