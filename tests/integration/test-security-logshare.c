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
#include "tests/lib/test-log.h"
#include "tests/lib/test-run.h"
#include "tests/lib/test-serve.h"

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

RFX_CASE (test_one_process_stopped)
{
  g_autofree char *policy = rfx_policy_ws (fx);
  g_autofree char *flood_dir = g_build_filename (fx->ws, "flood", NULL);
  g_autofree char *hello = g_build_filename (fx->ws, "hello.txt", NULL);
  g_autofree char *self = test_self ();
  g_autofree char *self_json = test_json_quote (self);
  g_autofree char *dir_json = test_json_quote (flood_dir);
  g_autofree char *hello_json = test_json_quote (hello);
  g_autofree char *flood_argv = g_strdup_printf ("[%s,\"--probe\",\"mkdirs\",%s]", self_json, dir_json);
  g_autofree char *out = NULL, *failure = NULL, *read_params = NULL, *run_dir = NULL;
  const char *args[] = { "--policy", policy, "--workspace", fx->ws, "--log-max-size", BUDGET, NULL };
  TestServer *server;
  TestClient *a, *b;
  int code = -1, status;
  guint dirs, records = 0;
  guint64 mkdirs = 0, share_not_written = 0, not_written = 0;
  JsonObject *notice = NULL;
  TestLog log;

  test_write (hello, "hello\n", 0644);
  assert_int_equal (mkdir (flood_dir, 0755), 0);
  server = test_server_start (fx->tmp, args);
  fx->repro = g_strdup (server->command);
  if (!g_str_has_prefix (server->url, "ws://"))
    fail_msg ("the server did not start: %s", server->command);
  a = test_client_open (server->url);
  b = test_client_open (server->url);
  run_dir = g_strdup (a->run_dir);

  /* B's process runs all along */
  test_process_start (b, "steady", "[\"/bin/sh\",\"-c\",\"read line; echo \\\"got $line\\\"\"]", fx->ws, true);
  /* A floods */
  test_process_start (a, "flood", flood_argv, fx->ws, true);
  out = test_process_read (a, "flood", NULL, &code, &failure);
  if (code != 125 || strstr (out, "share of the access log") == NULL)
    fail_msg ("the flooding process exited %d, saying: %s (failure: %s)", code, out, failure ? failure : "none");
  if (failure == NULL || strstr (failure, "share of the access log") == NULL)
    fail_msg ("process/read's failure for the stopped process: %s", failure ? failure : "none");
  g_clear_pointer (&out, g_free);

  /* the server and B go on */
  if (kill (server->pid, 0) != 0)
    fail_msg ("the server is gone after one process used up its share");
  test_process_write (b, "steady", "still here\n", "w1");
  out = test_process_read (b, "steady", NULL, &code, NULL);
  if (strstr (out, "got still here") == NULL || code != 0)
    fail_msg ("the other session's process exited %d, saying: %s", code, out);
  read_params = g_strdup_printf ("{\"path\":%s}", hello_json);
  {
    g_autoptr (JsonNode) r = test_client_call (b, "fs/readFile", read_params);
    if (test_answer_result (r) == NULL)
      fail_msg ("the other session's fs/readFile: %s", test_answer_error_message (r));
  }
  test_client_free (a);
  test_client_free (b);

  /* a normal stop: not the budget's */
  status = test_kill_child (&server->pid, SIGTERM);
  test_server_stop (server);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    fail_msg ("the server ended with status 0x%x, not 0: did it reach its global budget?", status);

  test_log_read (run_dir, &log);
  if (log.bytes > BUDGET_BYTES)
    fail_msg ("the log holds %" G_GUINT64_FORMAT " bytes, past its budget of %d", log.bytes, BUDGET_BYTES);
  for (guint i = 0; i < log.records->len; i++)
    {
      JsonObject *o = log.records->pdata[i];
      const char *path = test_json_str (o, "path");

      if (g_strcmp0 (test_json_str (o, "notice"), "log-full") == 0)
        not_written += (guint64)json_object_get_int_member (o, "records_not_written");
      if (g_strcmp0 (test_json_str (o, "notice"), "log-share-full") == 0)
        {
          notice = o;
          share_not_written += (guint64)json_object_get_int_member (o, "records_not_written");
        }
      if (g_strcmp0 (test_json_str (o, "op"), "mkdir") == 0 &&
          g_strcmp0 (test_json_str (o, "decision"), "allow") == 0 && path != NULL && g_str_has_prefix (path, flood_dir))
        {
          records++;
          mkdirs += json_object_has_member (o, "repeat")
                      ? (guint64)json_object_get_int_member (json_object_get_object_member (o, "repeat"), "count")
                      : 1;
        }
    }
  if (notice == NULL)
    fail_msg ("the log has no log-share-full notice for the stopped process");
  assert_string_equal (test_json_str (notice, "process"), "flood");
  dirs = test_count_entries (flood_dir);
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
    const char *argv[] = { test_bin (), "report", run_dir, NULL };
    g_autofree char *report = NULL;

    if (!g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &report, NULL, &status,
                       NULL) ||
        strstr (report, "WARNING: 1 process used up its share of the log's budget") == NULL)
      fail_msg ("fusebox report does not say that a process was stopped:\n%s", report != NULL ? report : "");
  }
}

RFX_DEFINE_MAIN (probe_main, NULL, RFX_TEST (test_one_process_stopped))
