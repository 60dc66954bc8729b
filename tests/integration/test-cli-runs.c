/* fusebox — `fusebox runs` lists every kind of run: a mount and a server
 * while they live (running) and once they have stopped (over, with their
 * exit status), beside a `run`, each with its kind, in the text and the
 * --json output; and a run.json written before runs had a kind is still
 * read, as a `run`'s. */
#include <signal.h>

#include "tests/lib/test-mount.h"

#define OLD_RUN "20200101-000000-oldrun"

/* `fusebox serve`, killed in teardown when the test ended before it did */
static GPid server;

static int
runs_teardown (void **state)
{
  test_kill_child (&server, SIGKILL);
  return mfx_teardown (state);
}

/* T/api.sock: where the server listens */
static char *
server_sock (MFx *fx)
{
  return g_build_filename (fx->tmp, "api.sock", NULL);
}

/* fusebox ARGS... (NULL-terminated) in T, with the fixture's XDG_STATE_HOME;
 * the repro line shows it. */
static int
fusebox (MFx *fx, char **ret_out, char **ret_err, const char *first, ...)
{
  g_autoptr (GPtrArray) argv = NULL;
  g_auto (TestCmd) cmd = { 0 };
  g_autofree char *env_shown = g_strdup_printf ("XDG_STATE_HOME=%s", fx->state_dir);
  va_list ap;

  va_start (ap, first);
  argv = test_fusebox_argv_va (first, ap);
  va_end (ap);
  test_cmd_run (&cmd, fx->tmp, NULL, env_shown, (char **)argv->pdata);
  g_free (fx->mount_args);
  fx->mount_args = g_steal_pointer (&cmd.command);
  *ret_out = g_steal_pointer (&cmd.out);
  *ret_err = g_steal_pointer (&cmd.err);
  return cmd.status;
}

/* `fusebox runs --json`: the entry of run ID, or NULL. */
static JsonObject *
runs_json_entry (MFx *fx, const char *id)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (GPtrArray) entries = NULL;

  assert_int_equal (fusebox (fx, &out, &err, "runs", "--json", NULL), 0);
  entries = test_parse_lines (out);
  for (guint i = 0; i < entries->len; i++)
    if (g_strcmp0 (test_json_str (entries->pdata[i], "run"), id) == 0)
      return json_object_ref (entries->pdata[i]);
  return NULL;
}

/* `fusebox runs --json` says run ID ended with exit status 0 and counted
 * its records, and its denials when COUNTS_DENIALS. */
static void
assert_ended_cleanly (MFx *fx, const char *id, bool counts_denials)
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
runs_text_fields (MFx *fx, const char *id)
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
assert_listed (MFx *fx, const char *id, const char *kind, const char *state, const char *what)
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
start_mount (MFx *fx)
{
  g_autofree char *out = NULL, *err = NULL;
  const char *pid;

  if (fusebox (fx, &out, &err, "mount", "--policy", "builtin:default", fx->mnt, NULL) != 0)
    fail_msg ("mount failed:\n%s%s", out, err);
  fx->mounted = true;
  pid = strstr (out, "daemon pid ");
  assert_non_null (pid);
  fx->daemon = (pid_t)atoi (pid + strlen ("daemon pid "));
  return printed_run_id (out);
}

/* `fusebox serve --listen unix:SOCK`: its id, once it listens (stderr's
 * "serving ... run directory DIR" line comes after the address). */
static char *
start_server (MFx *fx)
{
  g_autofree char *sock = server_sock (fx);
  g_autofree char *listen = g_strconcat ("unix:", sock, NULL);
  const char *argv[] = { test_bin (), "serve", "--listen", listen, NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) err_text = g_string_new (NULL);
  int out_fd, err_fd;
  char buf[4096];
  ssize_t n;

  g_free (fx->mount_args);
  fx->mount_args = g_strdup_printf ("XDG_STATE_HOME=%s %s serve --listen %s", fx->state_dir, test_bin (), listen);
  if (!g_spawn_async_with_pipes (fx->tmp, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &server, NULL,
                                 &out_fd, &err_fd, &error))
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
write_old_run (MFx *fx)
{
  g_autofree char *dir = g_build_filename (fx->state_dir, "fusebox", "runs", OLD_RUN, NULL);
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

MFX_CASE (test_every_kind)
{
  g_autofree char *mount_id = NULL, *serve_id = NULL;
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *sock = server_sock (fx);
  const char *umount_argv[] = { "fusermount3", "-u", fx->mnt, NULL };
  int status;

  write_old_run (fx);
  mount_id = start_mount (fx);
  serve_id = start_server (fx);
  if (fusebox (fx, &out, &err, "run", "--", "/bin/true", NULL) != 0)
    fail_msg ("run failed:\n%s%s", out, err);

  /* alive: running, each with its kind and what it shows */
  assert_listed (fx, mount_id, "mount", "running", fx->mnt);
  assert_listed (fx, serve_id, "serve", "running", sock);
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

  /* stopped: over, with their exit status; the daemon ends by itself */
  assert_int_equal (test_run_cmd (umount_argv, NULL, NULL), 0);
  fx->mounted = false;
  assert_true (TEST_WAIT_FOR (!test_pid_alive (fx->daemon), 30000));
  fx->daemon = 0;
  status = test_kill_child (&server, SIGTERM);
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  assert_listed (fx, mount_id, "mount", "over", fx->mnt);
  assert_listed (fx, serve_id, "serve", "over", sock);
  assert_ended_cleanly (fx, mount_id, true);
  /* a server's views count their own denials: no count that saw none of them */
  assert_ended_cleanly (fx, serve_id, false);
}

MFX_DEFINE_MAIN (cmocka_unit_test_setup_teardown (test_every_kind, mfx_setup, runs_teardown))
