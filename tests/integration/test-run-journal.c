/* fusebox — the access log's journal output under the real `fusebox run`,
 * against the journal's native protocol: the test binds a SOCK_DGRAM
 * socket and tells the run it is the journal (FUSEBOX_JOURNAL_SOCKET, for
 * tests), then parses what arrives as journald would.
 *
 *  - With --log-journal, or the policy's "log": {"journal": true}, every
 *    record of the file arrives as one entry, in seq order, with every
 *    member as a FUSEBOX_ field, MESSAGE, PRIORITY and SYSLOG_IDENTIFIER;
 *    without either, nothing arrives.
 *  - No journal at the socket: the run works, says so once, and the file
 *    has every record, the last one counting what the journal missed.
 *  - A journal that takes nothing (a socket no one reads, its queue full):
 *    the same, and what did reach the socket is whole and in order.
 *  - `fusebox mount --log-journal` and `fusebox serve --log-journal` send
 *    their records too (a write through the mount, and a client's
 *    fs/writeFile and refused fs/readFile).
 *
 * The probe is this program inside the sandbox (`--probe MODE ...`). */
#include "tests/lib/test-run.h"

#include "tests/lib/test-journal.h"
#include "tests/lib/test-mount.h"
#include "tests/lib/test-serve.h"

/* ---- inside the sandbox ---- */

static int
probe_main (int argc, char **argv)
{
  const char *mode = argv[0];

  if (strcmp (mode, "read") == 0)
    {
      /* each path: its errno's name, or OK */
      for (int i = 1; i < argc; i++)
        {
          int fd = open (argv[i], O_RDONLY | O_CLOEXEC);
          printf ("%s\n", fd >= 0 ? "OK" : rfx_errname (errno));
          if (fd >= 0)
            close (fd);
        }
      return 0;
    }
  if (strcmp (mode, "many") == 0)
    {
      /* N files made and opened again: two records each, at least */
      int n = atoi (argv[2]);

      for (int i = 0; i < n; i++)
        {
          g_autofree char *path = g_strdup_printf ("%s/f%05d", argv[1], i);
          int fd = open (path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);

          if (fd < 0)
            return 1;
          close (fd);
        }
      printf ("made %d\n", n);
      return 0;
    }
  return 2;
}

/* ---- the checks ---- */

typedef struct
{
  char *socket; /* T/journal.socket */
  int fd;       /* bound there, or -1 */
  char *run_dir;
} Journal;

static void
journal_init (RFx *fx, Journal *j, gboolean bind_it)
{
  j->socket = g_build_filename (fx->tmp, "journal.socket", NULL);
  j->run_dir = g_build_filename (fx->runs, "journal-1", NULL);
  j->fd = -1;
  if (bind_it)
    {
      j->fd = test_journal_bind (j->socket);
      if (j->fd < 0)
        fail_msg ("binding %s: %s", j->socket, g_strerror (-j->fd));
    }
  g_setenv ("FUSEBOX_JOURNAL_SOCKET", j->socket, TRUE);
}

static void
journal_clear (Journal *j)
{
  g_unsetenv ("FUSEBOX_JOURNAL_SOCKET");
  if (j->fd >= 0)
    close (j->fd);
  g_free (j->socket);
  g_free (j->run_dir);
}

/* The records of the run's log, seq checked gap-free from 1. */
static GPtrArray *
read_records (const char *run_dir)
{
  g_autofree char *path = g_build_filename (run_dir, "access.jsonl", NULL);
  g_autofree char *text = test_read_file (path);
  GPtrArray *records;

  if (text == NULL)
    fail_msg ("%s is missing", path);
  records = test_parse_lines (text);
  for (guint i = 0; i < records->len; i++)
    if (json_object_get_int_member (records->pdata[i], "seq") != i + 1)
      fail_msg ("%s: seq %" G_GINT64_FORMAT " where %u was due", path,
                json_object_get_int_member (records->pdata[i], "seq"), i + 1);
  return records;
}

/* `fusebox run ARGS...` in the background, the journal's entries read while
 * it runs; its exit status. */
static GPtrArray *
run_collecting (RFx *fx, Journal *j, int *ret_status, const char *first, ...)
{
  va_list ap;
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  g_autofree char *why = NULL;
  GPtrArray *entries;
  GPid pid;

  va_start (ap, first);
  g_autoptr (GPtrArray) argv = rfx_argv_va (first, ap);
  va_end (ap);
  rfx_set_repro (fx, (char **)argv->pdata);
  if (!g_spawn_async (fx->ws, (char **)argv->pdata, env, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                      NULL, &pid, &error))
    fail_msg ("spawn %s: %s", test_bin (), error->message);
  rfx_keep_pid (fx, pid);
  entries = test_journal_collect (j->fd, pid, ret_status, &why);
  rfx_forget_pid (fx, pid);
  if (entries == NULL)
    fail_msg ("the journal socket got a malformed entry: %s", why);
  return entries;
}

/* T/policy.json denying SECRET; with JOURNAL, T/journal-policy.json that
 * also says "log": {"journal": true}. */
static char *
write_policy (RFx *fx, const char *secret, gboolean journal)
{
  if (journal)
    return rfx_policy_deny (fx, "journal-policy.json", secret, " \"log\": {\"journal\": true},");
  return rfx_policy_deny (fx, "policy.json", secret, NULL);
}

/* The probe reading SECRET under `fusebox run [--log-journal] --policy
 * POLICY --run-dir RUN_DIR`, J's socket read meanwhile: the run ends 0 and
 * its log holds more than the one denial.  The journal's entries, and the
 * log's records in *RET_RECORDS. */
static GPtrArray *
run_reading (RFx *fx, Journal *j, bool log_journal, const char *policy, const char *run_dir, const char *secret,
             GPtrArray **ret_records)
{
  g_autofree char *self = test_self ();
  GPtrArray *entries;
  int status = -1;

  if (log_journal)
    entries = run_collecting (fx, j, &status, "--log-journal", "--policy", policy, "--run-dir", run_dir, "--", self,
                              "--probe", "read", secret, NULL);
  else
    entries = run_collecting (fx, j, &status, "--policy", policy, "--run-dir", run_dir, "--", self, "--probe", "read",
                              secret, NULL);
  assert_int_equal (status, 0);
  *ret_records = read_records (run_dir);
  assert_true ((*ret_records)->len > 1);
  return entries;
}

RFX_CASE (test_every_record_an_entry)
{
  Journal j;
  g_autofree char *secret = rfx_stand_in_secret (fx);
  g_autofree char *policy = write_policy (fx, secret, FALSE);
  g_autoptr (GPtrArray) entries = NULL;
  g_autoptr (GPtrArray) records = NULL;
  guint denials = 0;

  journal_init (fx, &j, TRUE);
  entries = run_reading (fx, &j, true, policy, j.run_dir, secret, &records);
  test_journal_assert_records (entries, records, j.socket);
  for (guint i = 0; i < entries->len; i++)
    {
      g_autofree char *path = test_journal_get (entries->pdata[i], "FUSEBOX_PATH");
      g_autofree char *decision = test_journal_get (entries->pdata[i], "FUSEBOX_DECISION");
      g_autofree char *why = test_journal_get (entries->pdata[i], "FUSEBOX_WHY");

      if (g_strcmp0 (path, secret) != 0)
        continue;
      assert_string_equal (decision, "deny");
      assert_string_equal (why, "credentials stay on the host");
      denials++;
    }
  assert_int_equal (denials, 1);
  journal_clear (&j);
}

/* The policy asks for the journal: the same entries.  Neither the policy
 * nor the command line: none. */
RFX_CASE (test_policy_asks)
{
  Journal j;
  g_autofree char *secret = rfx_stand_in_secret (fx);
  g_autofree char *with = write_policy (fx, secret, TRUE);
  g_autofree char *without = write_policy (fx, secret, FALSE);
  g_autofree char *run2 = g_build_filename (fx->runs, "journal-2", NULL);
  g_autoptr (GPtrArray) entries = NULL;
  g_autoptr (GPtrArray) records = NULL;

  journal_init (fx, &j, TRUE);
  entries = run_reading (fx, &j, false, with, j.run_dir, secret, &records);
  test_journal_assert_records (entries, records, j.socket);
  g_ptr_array_unref (entries);
  g_ptr_array_unref (records);

  entries = run_reading (fx, &j, false, without, run2, secret, &records);
  assert_int_equal (entries->len, 0);
  journal_clear (&j);
}

/* How often TEXT holds NEEDLE. */
static guint
count_in (const char *text, const char *needle)
{
  guint n = 0;

  for (const char *p = text; p != NULL && (p = strstr (p, needle)) != NULL; p += strlen (needle))
    n++;
  return n;
}

/* The last record counts what the journal missed, and stderr said why once
 * (and the count at the end). */
static void
check_incomplete (GPtrArray *records, const char *err, const char *why_part, guint64 *ret_not_sent)
{
  JsonObject *last = records->pdata[records->len - 1];

  assert_string_equal (test_json_str (last, "notice"), "journal-incomplete");
  *ret_not_sent = (guint64)json_object_get_int_member (last, "records_not_sent");
  assert_true (*ret_not_sent > 0 && *ret_not_sent <= records->len - 1);
  assert_non_null (strstr (test_json_str (last, "why"), why_part));
  if (count_in (err, why_part) != 2) /* the first refusal, and the count at the end */
    fail_msg ("expected \"%s\" said once when it happened and once in the count, stderr:\n%s", why_part, err);
}

/* `fusebox run --log-journal` making N files, the journal's socket as J
 * has it (bound and never read, or absent): the run works, every file it
 * made is in the log, and the log's last record counts what the journal
 * missed (*RET_NOT_SENT), which stderr said (WHY_PART). */
static GPtrArray *
run_without_journal (RFx *fx, Journal *j, guint n, const char *why_part, guint64 *ret_not_sent)
{
  g_autofree char *self = test_self ();
  g_autofree char *dir = g_build_filename (fx->ws, "made", NULL);
  g_autofree char *count = g_strdup_printf ("%u", n);
  g_autofree char *out = g_strdup_printf ("made %u\n", n);
  GPtrArray *records;
  guint made = 0;
  RfxResult r;

  g_mkdir (dir, 0755);
  rfx_run (fx, &r, "--log-journal", "--run-dir", j->run_dir, "--", self, "--probe", "many", dir, count, NULL);
  assert_int_equal (r.status, 0);
  assert_string_equal (r.out, out);
  records = read_records (j->run_dir);
  for (guint i = 0; i < records->len; i++)
    if (g_strcmp0 (test_json_str (records->pdata[i], "op"), "create") == 0 &&
        g_str_has_prefix (test_json_str (records->pdata[i], "path"), dir))
      made++;
  assert_int_equal (made, n);
  check_incomplete (records, r.err, why_part, ret_not_sent);
  rfx_result_clear (&r);
  return records;
}

RFX_CASE (test_journal_absent)
{
  Journal j;
  g_autofree char *why_part = NULL;
  g_autoptr (GPtrArray) records = NULL;
  guint64 not_sent = 0;

  journal_init (fx, &j, FALSE);
  why_part = g_strdup_printf ("no journal listens at %s", j.socket);
  records = run_without_journal (fx, &j, 50, why_part, &not_sent);
  /* nothing reached a journal: every record before the notice is counted */
  assert_int_equal (not_sent, records->len - 1);
  journal_clear (&j);
}

/* A socket that no one reads: its queue fills at once. */
RFX_CASE (test_journal_full)
{
  Journal j;
  g_autofree char *why_part = NULL;
  g_autoptr (GPtrArray) records = NULL;
  guint64 not_sent = 0;
  guint arrived = 0;

  journal_init (fx, &j, TRUE);
  why_part = g_strdup_printf ("the journal at %s took records slower than they came", j.socket);
  records = run_without_journal (fx, &j, 3000, why_part, &not_sent);
  /* what reached the socket: whole, in order, from the first */
  for (;;)
    {
      g_autoptr (GPtrArray) entry = test_journal_next (j.fd, 0);
      g_autofree char *check = NULL;

      if (entry == NULL)
        break;
      check = test_journal_check_record (entry, records->pdata[arrived]);
      if (check != NULL)
        fail_msg ("entry %u: %s", arrived + 1, check);
      arrived++;
    }
  assert_true (arrived > 0);
  assert_int_equal (arrived + not_sent, records->len - 1);
  journal_clear (&j);
}

/* The socket's entries so far (a few: fewer than its queue holds), each
 * checked against its record of LOG_TEXT, in order. */
static void
check_socket_has_log (int fd, const char *log_text)
{
  g_autoptr (GPtrArray) records = test_parse_lines (log_text);
  guint n = 0;

  for (guint i = 0; i < records->len; i++)
    {
      JsonObject *o = records->pdata[i];
      g_autofree char *check = NULL;
      g_autoptr (GPtrArray) entry = test_journal_next (fd, 5000);

      if (entry == NULL)
        fail_msg ("record %u has no journal entry: nothing arrived", n + 1);
      check = test_journal_check_record (entry, o);
      if (check != NULL)
        fail_msg ("record %u: %s", n + 1, check);
      n++;
    }
  assert_true (n > 0);
  {
    g_autofree char *why = NULL;
    g_autoptr (GBytes) more = test_journal_recv (fd, 0, &why);
    assert_null (more); /* one entry per record */
  }
}

static const char mount_policy[] = "{ \"version\": 1, \"rules\": [\n"
                                   "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" },\n"
                                   "  { \"path\": \"@H@\", \"access\": \"write\", \"why\": \"the tree\" } ] }\n";

MFX_CASE (test_mount)
{
  g_autofree char *socket = g_build_filename (fx->tmp, "journal.socket", NULL);
  g_autofree char *through = NULL;
  g_autofree char *log = NULL;
  int fd = test_journal_bind (socket);

  if (fd < 0)
    fail_msg ("binding %s: %s", socket, g_strerror (-fd));
  g_setenv ("FUSEBOX_JOURNAL_SOCKET", socket, TRUE);
  mfx_mkdir (fx, "/d");
  mfx_mount (fx, mount_policy, "--log-journal", "--log-level", "mutations", NULL);
  through = mfx_m (fx, "/d/new.txt");
  test_write (through, "written through the mount\n", 0644);
  mfx_unmount (fx);
  g_unsetenv ("FUSEBOX_JOURNAL_SOCKET");
  log = mfx_log (fx);
  assert_non_null (strstr (log, "new.txt"));
  check_socket_has_log (fd, log);
  close (fd);
}

RFX_CASE (test_serve)
{
  g_autofree char *socket = g_build_filename (fx->tmp, "journal.socket", NULL);
  g_autofree char *log_path = g_build_filename (fx->tmp, "serve.jsonl", NULL);
  g_autofree char *secret = rfx_stand_in_secret (fx);
  g_autofree char *file = g_build_filename (fx->ws, "from-client.txt", NULL);
  g_autofree char *policy = write_policy (fx, secret, FALSE);
  g_autofree char *secret_json = test_json_quote (secret);
  g_autofree char *file_json = test_json_quote (file);
  g_autofree char *params = NULL;
  g_autofree char *log = NULL;
  const char *args[] = { "--policy", policy,        "--workspace", fx->ws,          "--log",
                         log_path,   "--log-level", "mutations",   "--log-journal", NULL };
  TestServer *server;
  TestClient *c;
  int fd = test_journal_bind (socket);

  if (fd < 0)
    fail_msg ("binding %s: %s", socket, g_strerror (-fd));
  g_setenv ("FUSEBOX_JOURNAL_SOCKET", socket, TRUE);
  server = test_server_start (fx->tmp, args);
  g_unsetenv ("FUSEBOX_JOURNAL_SOCKET");
  fx->repro = g_strdup (server->command);
  if (!g_str_has_prefix (server->url, "ws://"))
    fail_msg ("the server did not start: %s", server->command);
  c = test_client_open (server->url);
  params = g_strdup_printf ("{\"path\":%s,\"dataBase64\":\"aGk=\"}", file_json);
  {
    g_autoptr (JsonNode) r = test_client_call (c, "fs/writeFile", params);
    if (test_answer_result (r) == NULL)
      fail_msg ("fs/writeFile: %s", test_answer_error_message (r));
  }
  g_free (params);
  params = g_strdup_printf ("{\"path\":%s}", secret_json);
  {
    g_autoptr (JsonNode) r = test_client_call (c, "fs/readFile", params);
    assert_null (test_answer_result (r));
  }
  test_client_free (c);
  test_server_stop (server);
  log = test_read_file (log_path);
  assert_non_null (log);
  assert_non_null (strstr (log, "\"decision\":\"deny\""));
  check_socket_has_log (fd, log);
  close (fd);
}

RFX_DEFINE_MAIN (probe_main, NULL, RFX_TEST (test_every_record_an_entry), RFX_TEST (test_policy_asks),
                 RFX_TEST (test_journal_absent), RFX_TEST (test_journal_full), MFX_TEST (test_mount),
                 RFX_TEST (test_serve))
