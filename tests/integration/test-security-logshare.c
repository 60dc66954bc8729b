/* fusebox — under `fusebox serve`, one process can't spend the access log's
 * budget of all the others.
 *
 * Every record of every sandbox of a server went to one budget, and what
 * reached it stopped the server and killed every other process: an
 * open/close loop in one sandbox wrote 4.7 MB/s of allowed records, which
 * nothing folds, and `serve --log-max-size 8M` stopped after 1.3 s.  Now
 * each process has a quarter of the budget of its own:
 *
 *  - session A's process makes directories of 255-byte names as fast as it
 *    can (allowed: each a record of its own);
 *  - session B's process runs beside it all along (a shell reading a line).
 * A's process is stopped (exit 125) with a message on its stderr naming its
 * share; B's still answers and exits 0, B's fs/readFile is served, and the
 * server runs on and stops normally when told (SIGTERM, status 0).  The
 * log stays within the budget, ends with no "log-full" notice but has A's
 * "log-share-full" one, and every directory A made on the host is in the
 * log or counted as not written; `fusebox report` says so.
 *
 * The probe is this program inside the sandbox (`--probe mkdirs DIR`). */
#include "test-run-util.h"
#include "test-serve-util.h"

#define NAME_LEN 255
#define BUDGET "8M"
#define BUDGET_BYTES (8 * 1024 * 1024)

/* ---- inside the sandbox ---- */

static int
probe_main (int argc, char **argv)
{
  const char *dir = argv[1];
  char name[NAME_LEN + 1];

  memset (name, 'n', NAME_LEN);
  name[NAME_LEN] = '\0';
  for (guint i = 0;; i++)
    {
      g_autofree char *path = NULL;

      g_snprintf (name + NAME_LEN - 10, 11, "%010u", i);
      path = g_build_filename (dir, name, NULL);
      if (mkdir (path, 0755) < 0)
        {
          printf ("mkdir %u: %s\n", i, rfx_errname (errno));
          return 1;
        }
    }
  return 0;
}

/* ---- the test side ---- */

static char *
json_str (const char *s)
{
  JsonNode *n = json_node_new (JSON_NODE_VALUE);
  char *out;

  json_node_set_string (n, s);
  out = json_to_string (n, FALSE);
  json_node_unref (n);
  return out;
}

static TestClient *
client (TestServer *server)
{
  TestClient *c = test_client_connect (server->url);

  if (c->ws == NULL || !test_client_handshake (c, NULL))
    fail_msg ("can't connect to %s", server->url);
  return c;
}

static void
start_process (RFx *fx, TestClient *c, const char *id, const char *argv_json)
{
  g_autofree char *cwd = json_str (fx->ws);
  g_autofree char *params =
    g_strdup_printf ("{\"processId\":\"%s\",\"argv\":%s,\"cwd\":%s,\"env\":{\"PATH\":\"/usr/bin:/bin\"},\"tty\":false,"
                     "\"pipeStdin\":true}",
                     id, argv_json, cwd);
  g_autoptr (JsonNode) r = test_client_call (c, "process/start", params);

  if (answer_result (r) == NULL)
    fail_msg ("process/start %s: %s", id, answer_error_message (r));
}

/* The output of process ID once it holds NEEDLE or was closed;
 * *ret_exit_code -1 while it runs, *ret_failure its failure (or NULL). */
static char *
wait_output (TestClient *c, const char *id, const char *needle, int *ret_exit_code, char **ret_failure)
{
  g_autoptr (GString) out = g_string_new (NULL);
  gint64 after = 0;

  *ret_exit_code = -1;
  for (guint round = 0; round < 600; round++)
    {
      g_autofree char *params =
        g_strdup_printf ("{\"processId\":\"%s\",\"afterSeq\":%" G_GINT64_FORMAT ",\"waitMs\":1000}", id, after);
      g_autoptr (JsonNode) r = test_client_call (c, "process/read", params);
      JsonObject *res = answer_result (r);
      JsonArray *chunks;

      if (res == NULL)
        fail_msg ("process/read %s: %s", id, answer_error_message (r));
      chunks = json_object_get_array_member (res, "chunks");
      for (guint i = 0; i < json_array_get_length (chunks); i++)
        {
          JsonObject *ch = json_array_get_object_element (chunks, i);
          gsize len = 0;
          g_autofree guchar *data = g_base64_decode (json_object_get_string_member (ch, "chunk"), &len);
          g_string_append_len (out, (const char *)data, (gssize)len);
          after = MAX (after, json_object_get_int_member (ch, "seq"));
        }
      if (json_object_get_boolean_member (res, "exited"))
        *ret_exit_code = (int)json_object_get_int_member (res, "exitCode");
      if (ret_failure != NULL && json_object_has_member (res, "failure") &&
          !json_object_get_null_member (res, "failure"))
        {
          g_free (*ret_failure);
          *ret_failure = g_strdup (json_object_get_string_member (res, "failure"));
        }
      if ((needle != NULL && strstr (out->str, needle) != NULL) || json_object_get_boolean_member (res, "closed"))
        break;
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static void
write_stdin (TestClient *c, const char *id, const char *text, const char *write_id)
{
  g_autofree char *b64 = g_base64_encode ((const guchar *)text, strlen (text));
  g_autofree char *params =
    g_strdup_printf ("{\"processId\":\"%s\",\"chunk\":\"%s\",\"writeId\":\"%s\"}", id, b64, write_id);
  g_autoptr (JsonNode) r = test_client_call (c, "process/write", params);

  if (answer_result (r) == NULL)
    fail_msg ("process/write %s: %s", id, answer_error_message (r));
}

typedef struct
{
  GPtrArray *records; /* JsonObject* */
  guint64 bytes;
} Log;

static int
cmp_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

/* Every record of the server's log (rotated files first), seq gap-free. */
static void
read_log (const char *run_dir, Log *ret)
{
  g_autoptr (GDir) d = g_dir_open (run_dir, 0, NULL);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;
  gint64 want = 1;

  assert_non_null (d);
  ret->records = g_ptr_array_new_with_free_func ((GDestroyNotify)json_object_unref);
  ret->bytes = 0;
  while ((name = g_dir_read_name (d)) != NULL)
    if (g_str_has_prefix (name, "access.") && g_str_has_suffix (name, ".jsonl") && strcmp (name, "access.jsonl") != 0)
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, cmp_names);
  g_ptr_array_add (names, g_strdup ("access.jsonl"));
  for (guint i = 0; i < names->len; i++)
    {
      g_autofree char *path = g_build_filename (run_dir, names->pdata[i], NULL);
      g_autofree char *text = rfx_file (path);
      g_auto (GStrv) lines = NULL;

      if (text == NULL)
        continue;
      ret->bytes += strlen (text);
      lines = g_strsplit (text, "\n", -1);
      for (guint j = 0; lines[j] != NULL; j++)
        {
          JsonObject *o;
          if (lines[j][0] == '\0')
            continue;
          o = rfx_parse_object (lines[j]);
          if (json_object_get_int_member (o, "seq") != want)
            fail_msg ("%s:%u: seq %" G_GINT64_FORMAT ", expected %" G_GINT64_FORMAT, path, j + 1,
                      json_object_get_int_member (o, "seq"), want);
          want++;
          g_ptr_array_add (ret->records, o);
        }
    }
}

static guint
count_dirs (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  guint n = 0;

  assert_non_null (d);
  while (g_dir_read_name (d) != NULL)
    n++;
  return n;
}

static void
test_one_process_stopped (void **state)
{
  RFX_BEGIN (state);
  g_autofree char *policy = g_build_filename (fx->tmp, "policy.json", NULL);
  g_autofree char *policy_text =
    g_strdup_printf ("{ \"version\": 1, \"rules\": [\n"
                     "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"the system\" },\n"
                     "  { \"path\": \"%s\", \"access\": \"write\", \"why\": \"the workspace\" } ] }\n",
                     fx->ws);
  g_autofree char *flood_dir = g_build_filename (fx->ws, "flood", NULL);
  g_autofree char *hello = g_build_filename (fx->ws, "hello.txt", NULL);
  g_autofree char *self = rfx_self ();
  g_autofree char *self_json = json_str (self);
  g_autofree char *dir_json = json_str (flood_dir);
  g_autofree char *hello_json = json_str (hello);
  g_autofree char *flood_argv = g_strdup_printf ("[%s,\"--probe\",\"mkdirs\",%s]", self_json, dir_json);
  g_autofree char *out = NULL, *failure = NULL, *read_params = NULL, *run_dir = NULL;
  const char *args[] = { "--policy", policy, "--workspace", fx->ws, "--log-max-size", BUDGET, NULL };
  TestServer *server;
  TestClient *a, *b;
  int code = -1, status;
  guint dirs, records = 0;
  guint64 mkdirs = 0, share_not_written = 0, not_written = 0;
  JsonObject *notice = NULL;
  Log log;

  rfx_write (policy, policy_text, 0644);
  rfx_write (hello, "hello\n", 0644);
  assert_int_equal (mkdir (flood_dir, 0755), 0);
  server = test_server_start (fx->tmp, args);
  fx->repro = g_strdup (server->command);
  if (!g_str_has_prefix (server->url, "ws://"))
    fail_msg ("the server did not start: %s", server->command);
  a = client (server);
  b = client (server);
  run_dir = g_strdup (a->run_dir);

  /* B's process runs all along */
  start_process (fx, b, "steady", "[\"/bin/sh\",\"-c\",\"read line; echo \\\"got $line\\\"\"]");
  /* A floods */
  start_process (fx, a, "flood", flood_argv);
  out = wait_output (a, "flood", NULL, &code, &failure);
  if (code != 125 || strstr (out, "share of the access log") == NULL)
    fail_msg ("the flooding process exited %d, saying: %s (failure: %s)", code, out, failure ? failure : "none");
  if (failure == NULL || strstr (failure, "share of the access log") == NULL)
    fail_msg ("process/read's failure for the stopped process: %s", failure ? failure : "none");
  g_clear_pointer (&out, g_free);

  /* the server and B go on */
  if (kill (server->pid, 0) != 0)
    fail_msg ("the server is gone after one process used up its share");
  write_stdin (b, "steady", "still here\n", "w1");
  out = wait_output (b, "steady", NULL, &code, NULL);
  if (strstr (out, "got still here") == NULL || code != 0)
    fail_msg ("the other session's process exited %d, saying: %s", code, out);
  read_params = g_strdup_printf ("{\"path\":%s}", hello_json);
  {
    g_autoptr (JsonNode) r = test_client_call (b, "fs/readFile", read_params);
    if (answer_result (r) == NULL)
      fail_msg ("the other session's fs/readFile: %s", answer_error_message (r));
  }
  test_client_free (a);
  test_client_free (b);

  /* a normal stop: not the budget's */
  kill (server->pid, SIGTERM);
  while (waitpid (server->pid, &status, 0) < 0 && errno == EINTR)
    ;
  server->pid = 0;
  test_server_stop (server);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    fail_msg ("the server ended with status 0x%x, not 0: did it reach its global budget?", status);

  read_log (run_dir, &log);
  if (log.bytes > BUDGET_BYTES)
    fail_msg ("the log holds %" G_GUINT64_FORMAT " bytes, past its budget of %d", log.bytes, BUDGET_BYTES);
  for (guint i = 0; i < log.records->len; i++)
    {
      JsonObject *o = log.records->pdata[i];
      const char *path = rfx_str (o, "path");

      if (g_strcmp0 (rfx_str (o, "notice"), "log-full") == 0)
        not_written += (guint64)json_object_get_int_member (o, "records_not_written");
      if (g_strcmp0 (rfx_str (o, "notice"), "log-share-full") == 0)
        {
          notice = o;
          share_not_written += (guint64)json_object_get_int_member (o, "records_not_written");
        }
      if (g_strcmp0 (rfx_str (o, "op"), "mkdir") == 0 && g_strcmp0 (rfx_str (o, "decision"), "allow") == 0 &&
          path != NULL && g_str_has_prefix (path, flood_dir))
        {
          records++;
          mkdirs += json_object_has_member (o, "repeat")
                      ? (guint64)json_object_get_int_member (json_object_get_object_member (o, "repeat"), "count")
                      : 1;
        }
    }
  if (notice == NULL)
    fail_msg ("the log has no log-share-full notice for the stopped process");
  assert_string_equal (rfx_str (notice, "process"), "flood");
  dirs = count_dirs (flood_dir);
  fprintf (stderr,
           "%u directories made on the host; %u records of them (%" G_GUINT64_FORMAT " mkdirs), %" G_GUINT64_FORMAT
           " counted as not written by the share, %" G_GUINT64_FORMAT " by the log; the log: %" G_GUINT64_FORMAT
           " bytes\n",
           dirs, records, mkdirs, share_not_written, not_written, log.bytes);
  if (mkdirs + share_not_written + not_written < dirs)
    fail_msg ("%u directories were made but only %" G_GUINT64_FORMAT " are in the log or counted", dirs,
              mkdirs + share_not_written + not_written);
  g_ptr_array_unref (log.records);

  /* and the report says so */
  {
    const char *argv[] = { rfx_bin (), "report", run_dir, NULL };
    g_autofree char *report = NULL;

    if (!g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &report, NULL, &status,
                       NULL) ||
        strstr (report, "WARNING: 1 process used up its share of the log's budget") == NULL)
      fail_msg ("fusebox report does not say that a process was stopped:\n%s", report != NULL ? report : "");
  }
  RFX_PASS ();
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_one_process_stopped, rfx_setup, rfx_teardown),
  };

  if (argc > 1 && strcmp (argv[1], "--probe") == 0)
    return probe_main (argc - 2, argv + 2);
  rfx_require ();
  rfx_filter_tests (argv[0]);
  return cmocka_run_group_tests (tests, NULL, NULL);
}
