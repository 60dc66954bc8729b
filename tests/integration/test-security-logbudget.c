/* fusebox — the access log has a budget: a sandbox can't fill the disk with
 * its own audit trail.
 *
 *  - A flood of refused mkdirs of 255-byte names (each one a record of
 *    about 700 bytes before) is folded into counted records: the log stays
 *    small, every refusal is counted, and with allowed records enough to
 *    rotate the log, seq runs gap-free across the rotated files.
 *  - A flood that folding can't shrink (distinct allowed mkdirs) reaches the
 *    budget, set in the policy's "log" section: the sandbox is stopped
 *    (125) with a message, the log's files stay within the budget and its
 *    margin, its last record says why, and every mkdir that happened on
 *    the host is either in the log or counted as not written.
 *
 * The probe is this program inside the sandbox (`--probe MODE DIR N`).
 */
#include "tests/lib/test-log.h"
#include "tests/lib/test-run.h"

#define NAME_LEN 255

/* ---- inside the sandbox ---- */

static char *
long_name (const char *dir, int i)
{
  char name[NAME_LEN + 1];

  memset (name, 'n', NAME_LEN);
  name[NAME_LEN] = '\0';
  g_snprintf (name + NAME_LEN - 8, 9, "%08d", i);
  return g_build_filename (dir, name, NULL);
}

static int
probe_main (int argc, char **argv)
{
  const char *mode, *dir;
  int n, done = 0;

  if (argc != 3)
    return 2;
  mode = argv[0];
  dir = argv[1];
  n = atoi (argv[2]);
  for (int i = 0; i < n; i++)
    {
      g_autofree char *path = long_name (dir, i);
      int r = mkdir (path, 0755);

      if (strcmp (mode, "refused") == 0 ? r < 0 && errno == EROFS : r == 0)
        done++;
    }
  printf ("%s %d\n", mode, done);
  return 0;
}

/* ---- the checks ---- */

/* How many mkdirs under PREFIX with DECISION the records stand for, and in
 * how many records. */
static guint64
count_mkdirs (TestLog *l, const char *prefix, const char *decision, guint *ret_records)
{
  guint64 n = 0;
  guint records = 0;

  for (guint i = 0; i < l->records->len; i++)
    {
      JsonObject *o = l->records->pdata[i];
      const char *path = test_json_str (o, "path");

      if (g_strcmp0 (test_json_str (o, "op"), "mkdir") != 0 || path == NULL || !g_str_has_prefix (path, prefix) ||
          g_strcmp0 (test_json_str (o, "decision"), decision) != 0)
        continue;
      records++;
      if (json_object_has_member (o, "repeat"))
        n += (guint64)json_object_get_int_member (json_object_get_object_member (o, "repeat"), "count");
      else
        n++;
    }
  if (ret_records)
    *ret_records = records;
  return n;
}

RFX_CASE (test_refusal_flood_folded)
{
  g_autofree char *self = test_self ();
  const char *run_dir = test_dir_path (fx->dir, "run");
  const char *ws_dir = test_dir_mkdir (fx->dir, "ws/made", 0755);
  const int refused = 5000, allowed = 400;
  guint refusal_records = 0;
  TestLog l;
  RfxResult r;

  /* /usr is there and readable on the host: the refusals are the policy's */
  test_assert_host_readable ("/usr");
  rfx_run (fx, &r, "--run-dir", run_dir, "--log-max-size", "1M", "--log-file-size", "64K", "--", "/bin/sh", "-c",
           "\"$0\" --probe refused /usr \"$1\" && \"$0\" --probe allowed \"$2\" \"$3\"", self, "5000", ws_dir, "400",
           NULL);
  if (r.status != 0)
    fail_msg ("the run failed (%d):\n%s%s", r.status, r.out, r.err);
  test_assert_contains (r.out, "refused 5000\n", "allowed 400\n", NULL);
  rfx_result_clear (&r);

  test_log_read (run_dir, &l);
  /* within the budget, rotated, and every refusal counted */
  assert_true (l.bytes <= 1024 * 1024);
  assert_true (l.files >= 3);
  assert_int_equal (count_mkdirs (&l, "/usr/", "readonly", &refusal_records), refused);
  assert_true (refusal_records < refused / 10);
  assert_int_equal (count_mkdirs (&l, ws_dir, "allow", NULL), allowed);
  /* the readers see one log without gaps */
  rfx_fusebox (fx, &r, "log", run_dir, NULL);
  assert_int_equal (r.status, 0);
  assert_null (strstr (r.err, "seq jumps"));
  rfx_result_clear (&r);
  test_log_clear (&l);
}

RFX_CASE (test_over_budget_stops)
{
  g_autofree char *self = test_self ();
  const char *run_dir = test_dir_path (fx->dir, "run");
  const char *ws_dir = test_dir_mkdir (fx->dir, "ws/made", 0755);
  const char *policy_path = test_dir_path (fx->dir, "budget.json");
  const guint64 max = 128 * 1024;
  guint64 made = 0, logged, not_written;
  JsonObject *last;
  TestLog l;
  RfxResult r;

  /* the default policy with a small budget in its "log" section */
  {
    g_auto (TestCmd) shown = { 0 };
    g_autoptr (JsonObject) policy = NULL;
    g_autoptr (JsonNode) node = NULL;
    JsonObject *log = json_object_new ();

    rfx_fusebox (fx, &shown, "policy", "show", "default", NULL);
    assert_int_equal (shown.status, 0);
    policy = test_parse_object (shown.out);
    json_object_set_string_member (log, "max_size", "128K");
    json_object_set_string_member (log, "file_size", "32K");
    json_object_set_object_member (policy, "log", log);
    node = json_node_init_object (json_node_alloc (), policy);
    g_autofree char *out = json_to_string (node, TRUE);
    test_write (policy_path, out, 0644);
  }
  rfx_run (fx, &r, "--policy", policy_path, "--run-dir", run_dir, "--", self, "--probe", "allowed", ws_dir, "10000",
           NULL);
  if (r.status != 125)
    fail_msg ("the run was not stopped (exit %d):\n%s%s", r.status, r.out, r.err);
  assert_non_null (strstr (r.err, "reached its budget of 128 KiB"));
  /* killed: the probe never got to say how many it made */
  assert_null (strstr (r.out, "allowed "));
  rfx_result_clear (&r);
  {
    g_autofree char *text = test_read_file (test_dir_path (fx->dir, "run/run.json"));
    g_autoptr (JsonObject) info = test_parse_object (text);
    assert_non_null (strstr (test_json_str (info, "error"), "reached its budget"));
  }

  test_log_read (run_dir, &l);
  /* the budget and the margin of a stopping sandbox (1 MiB at least) */
  assert_true (l.bytes <= max + 1024 * 1024 + 4096);
  assert_true (l.files >= 2);
  last = l.records->pdata[l.records->len - 1];
  assert_string_equal (test_json_str (last, "notice"), "log-full");
  assert_int_equal (json_object_get_int_member (last, "max_size"), max);
  not_written = (guint64)json_object_get_int_member (last, "records_not_written");
  /* what happened on the host is in the log or counted */
  {
    g_autoptr (GDir) d = g_dir_open (ws_dir, 0, NULL);
    while (g_dir_read_name (d) != NULL)
      made++;
  }
  logged = count_mkdirs (&l, ws_dir, "allow", NULL);
  assert_true (made > 0);
  assert_true (logged <= made);
  assert_true (made <= logged + not_written);
  assert_true (made < 10000);
  test_log_clear (&l);
}

RFX_DEFINE_MAIN (probe_main, NULL, RFX_TEST (test_refusal_flood_folded), RFX_TEST (test_over_budget_stops))
