/* fusebox — the report's grouping on a hand-made log, and the people format
 * of `fusebox log`: aligned columns, errno names, colours, escaped hostile
 * names. */
#include "tests/unit/test-ipc-util.h"

/* A small run: created, written (two handles), renamed, deleted, read,
 * chmod'ed; denials by three rules from two processes; one host failure. */
/* One record per line reads better than wrapped JSON. */
/* clang-format off */
static const char *const hand_log[] = {
  "{\"ts\":\"2024-05-01T12:00:00.000000Z\",\"run\":\"R\",\"seq\":1,\"pid\":10,\"comm\":\"sh\",\"op\":\"create\",\"path\":\"/work/new.txt\",\"access\":\"create\",\"decision\":\"allow\",\"errno\":0,\"rule\":0,\"rule_origin\":\"p:1:1\",\"why\":\"workspace\"}",
  "{\"ts\":\"2024-05-01T12:00:01.000000Z\",\"run\":\"R\",\"seq\":2,\"pid\":10,\"comm\":\"sh\",\"op\":\"close\",\"path\":\"/work/new.txt\",\"access\":\"write\",\"decision\":\"allow\",\"errno\":0,\"rule\":0,\"rule_origin\":\"p:1:1\",\"why\":\"workspace\",\"bytes_read\":0,\"bytes_written\":100}",
  "{\"ts\":\"2024-05-01T12:00:02.000000Z\",\"run\":\"R\",\"seq\":3,\"pid\":11,\"comm\":\"sh\",\"op\":\"close\",\"path\":\"/work/new.txt\",\"access\":\"readwrite\",\"decision\":\"allow\",\"errno\":0,\"rule\":0,\"rule_origin\":\"p:1:1\",\"why\":\"workspace\",\"bytes_read\":5,\"bytes_written\":23}",
  "{\"ts\":\"2024-05-01T12:00:03.000000Z\",\"run\":\"R\",\"seq\":4,\"pid\":10,\"comm\":\"sh\",\"op\":\"rename\",\"path\":\"/work/a.tmp\",\"target\":\"/work/a.txt\",\"access\":\"write\",\"decision\":\"allow\",\"errno\":0,\"rule\":0,\"rule_origin\":\"p:1:1\",\"why\":\"workspace\"}",
  "{\"ts\":\"2024-05-01T12:00:04.000000Z\",\"run\":\"R\",\"seq\":5,\"pid\":10,\"comm\":\"sh\",\"op\":\"unlink\",\"path\":\"/work/old.txt\",\"access\":\"delete\",\"decision\":\"allow\",\"errno\":0,\"rule\":0,\"rule_origin\":\"p:1:1\",\"why\":\"workspace\"}",
  "{\"ts\":\"2024-05-01T12:00:05.000000Z\",\"run\":\"R\",\"seq\":6,\"pid\":12,\"comm\":\"cat\",\"op\":\"close\",\"path\":\"/etc/passwd\",\"access\":\"read\",\"decision\":\"allow\",\"errno\":0,\"rule\":1,\"rule_origin\":\"p:2:1\",\"why\":\"host readable\",\"bytes_read\":2048,\"bytes_written\":0}",
  "{\"ts\":\"2024-05-01T12:00:06.000000Z\",\"run\":\"R\",\"seq\":7,\"pid\":10,\"comm\":\"sh\",\"op\":\"setattr\",\"path\":\"/work/a.txt\",\"access\":\"write\",\"decision\":\"allow\",\"errno\":0,\"rule\":0,\"rule_origin\":\"p:1:1\",\"why\":\"workspace\"}",
  "{\"ts\":\"2024-05-01T12:00:07.000000Z\",\"run\":\"R\",\"seq\":8,\"pid\":12,\"comm\":\"cat\",\"op\":\"open\",\"path\":\"/home/u/.ssh/id_rsa\",\"access\":\"read\",\"decision\":\"deny\",\"errno\":13,\"error\":\"EACCES\",\"rule\":2,\"rule_origin\":\"p:3:1\",\"why\":\"keys are secret\"}",
  "{\"ts\":\"2024-05-01T12:00:08.000000Z\",\"run\":\"R\",\"seq\":9,\"pid\":12,\"comm\":\"cat\",\"op\":\"open\",\"path\":\"/home/u/.ssh/id_ed25519\",\"access\":\"read\",\"decision\":\"deny\",\"errno\":13,\"error\":\"EACCES\",\"rule\":2,\"rule_origin\":\"p:3:1\",\"why\":\"keys are secret\"}",
  "{\"ts\":\"2024-05-01T12:00:09.000000Z\",\"run\":\"R\",\"seq\":10,\"pid\":10,\"comm\":\"sh\",\"op\":\"open\",\"path\":\"/home/u/.ssh/id_rsa\",\"access\":\"read\",\"decision\":\"deny\",\"errno\":13,\"error\":\"EACCES\",\"rule\":2,\"rule_origin\":\"p:3:1\",\"why\":\"keys are secret\"}",
  "{\"ts\":\"2024-05-01T12:00:10.000000Z\",\"run\":\"R\",\"seq\":11,\"pid\":10,\"comm\":\"sh\",\"op\":\"lookup\",\"path\":\"/work/.git\",\"access\":\"stat\",\"decision\":\"hide\",\"errno\":2,\"error\":\"ENOENT\",\"rule\":\"protected\",\"rule_origin\":\"protected_names[.git]\",\"why\":\"repository metadata\"}",
  "{\"ts\":\"2024-05-01T12:00:11.000000Z\",\"run\":\"R\",\"seq\":12,\"pid\":10,\"comm\":\"sh\",\"op\":\"unlink\",\"path\":\"/etc/hosts\",\"access\":\"delete\",\"decision\":\"readonly\",\"errno\":30,\"error\":\"EROFS\",\"rule\":1,\"rule_origin\":\"p:2:1\",\"why\":\"host readable\"}",
  "{\"ts\":\"2024-05-01T12:00:12.000000Z\",\"run\":\"R\",\"seq\":13,\"pid\":10,\"comm\":\"sh\",\"op\":\"create\",\"path\":\"/work/exists\",\"access\":\"create\",\"decision\":\"allow\",\"errno\":17,\"error\":\"EEXIST\",\"rule\":0,\"rule_origin\":\"p:1:1\",\"why\":\"workspace\"}",
  "{\"ts\":\"2024-05-01T12:01:00.500000Z\",\"run\":\"R\",\"seq\":14,\"pid\":10,\"comm\":\"sh\",\"op\":\"mkdir\",\"path\":\"/work/dir\",\"access\":\"create\",\"decision\":\"allow\",\"errno\":0,\"rule\":0,\"rule_origin\":\"p:1:1\",\"why\":\"workspace\"}",
};
/* clang-format on */

static FbReport *
build_report (const char *const *lines, guint n)
{
  FbReport *r = fb_report_new ();

  for (guint i = 0; i < n; i++)
    {
      g_autoptr (JsonObject) o = test_parse_object (lines[i]);
      fb_report_add_record (r, o);
    }
  return r;
}

static JsonObject *
member_obj (JsonObject *o, const char *name)
{
  return json_object_get_object_member (o, name);
}

static JsonArray *
member_arr (JsonObject *o, const char *name)
{
  return json_object_get_array_member (o, name);
}

static const char *
path_at (JsonArray *a, guint i)
{
  return json_object_get_string_member (json_array_get_object_element (a, i), "path");
}

static void
test_report_json (void **state)
{
  g_autoptr (FbReport) r = build_report (hand_log, G_N_ELEMENTS (hand_log));
  g_autoptr (JsonNode) root = fb_report_to_json (r);
  JsonObject *o = json_node_get_object (root);
  JsonObject *files = member_obj (o, "files");
  JsonObject *totals = member_obj (o, "totals");
  JsonArray *a;

  assert_int_equal (json_object_get_int_member (o, "version"), 1);

  a = member_arr (files, "created");
  assert_int_equal (json_array_get_length (a), 2); /* not the EEXIST one */
  assert_string_equal (path_at (a, 0), "/work/dir");
  assert_string_equal (path_at (a, 1), "/work/new.txt");

  a = member_arr (files, "written");
  assert_int_equal (json_array_get_length (a), 1);
  assert_string_equal (path_at (a, 0), "/work/new.txt");
  assert_int_equal (json_object_get_int_member (json_array_get_object_element (a, 0), "bytes"), 123);
  assert_int_equal (json_object_get_int_member (json_array_get_object_element (a, 0), "handles"), 2);

  a = member_arr (files, "renamed");
  assert_int_equal (json_array_get_length (a), 1);
  assert_string_equal (json_object_get_string_member (json_array_get_object_element (a, 0), "from"), "/work/a.tmp");
  assert_string_equal (json_object_get_string_member (json_array_get_object_element (a, 0), "to"), "/work/a.txt");

  a = member_arr (files, "deleted");
  assert_int_equal (json_array_get_length (a), 1); /* not the EROFS one */
  assert_string_equal (path_at (a, 0), "/work/old.txt");

  a = member_arr (files, "read");
  assert_int_equal (json_array_get_length (a), 2);
  assert_string_equal (path_at (a, 0), "/etc/passwd");
  assert_int_equal (json_object_get_int_member (json_array_get_object_element (a, 0), "bytes"), 2048);
  assert_string_equal (path_at (a, 1), "/work/new.txt");
  assert_int_equal (json_object_get_int_member (json_array_get_object_element (a, 1), "bytes"), 5);

  a = member_arr (files, "other");
  assert_int_equal (json_array_get_length (a), 1);
  assert_string_equal (path_at (a, 0), "/work/a.txt");

  /* denials by rule: most first */
  a = member_arr (member_obj (o, "denials"), "by_rule");
  assert_int_equal (json_array_get_length (a), 3);
  {
    JsonObject *g = json_array_get_object_element (a, 0);
    JsonArray *ex = member_arr (g, "examples");

    assert_int_equal (json_object_get_int_member (g, "rule"), 2);
    assert_string_equal (json_object_get_string_member (g, "rule_origin"), "p:3:1");
    assert_string_equal (json_object_get_string_member (g, "why"), "keys are secret");
    assert_int_equal (json_object_get_int_member (g, "count"), 3);
    assert_int_equal (json_object_get_int_member (member_obj (g, "decisions"), "deny"), 3);
    /* distinct examples */
    assert_int_equal (json_array_get_length (ex), 2);
  }
  {
    gboolean saw_protected = FALSE, saw_readonly = FALSE;

    for (guint i = 1; i < 3; i++)
      {
        JsonObject *g = json_array_get_object_element (a, i);
        JsonNode *rule = json_object_get_member (g, "rule");

        assert_int_equal (json_object_get_int_member (g, "count"), 1);
        if (json_node_get_value_type (rule) == G_TYPE_STRING)
          {
            assert_string_equal (json_node_get_string (rule), "protected");
            saw_protected = TRUE;
          }
        else
          {
            assert_int_equal (json_node_get_int (rule), 1);
            assert_int_equal (json_object_get_int_member (member_obj (g, "decisions"), "readonly"), 1);
            saw_readonly = TRUE;
          }
      }
    assert_true (saw_protected && saw_readonly);
  }

  /* by process: sh[10] 3 (id_rsa, .git, hosts), cat[12] 2 */
  a = member_arr (member_obj (o, "denials"), "by_process");
  assert_int_equal (json_array_get_length (a), 2);
  assert_string_equal (json_object_get_string_member (json_array_get_object_element (a, 0), "comm"), "sh");
  assert_int_equal (json_object_get_int_member (json_array_get_object_element (a, 0), "pid"), 10);
  assert_int_equal (json_object_get_int_member (json_array_get_object_element (a, 0), "count"), 3);
  assert_string_equal (json_object_get_string_member (json_array_get_object_element (a, 1), "comm"), "cat");
  assert_int_equal (json_object_get_int_member (json_array_get_object_element (a, 1), "count"), 2);

  assert_int_equal (json_object_get_int_member (totals, "records"), 14);
  assert_int_equal (json_object_get_int_member (totals, "allowed"), 9);
  assert_int_equal (json_object_get_int_member (totals, "denied"), 5);
  assert_int_equal (json_object_get_int_member (totals, "failed"), 1);
  assert_int_equal (json_object_get_int_member (totals, "gaps"), 0);
  assert_int_equal (json_object_get_int_member (member_obj (totals, "ops"), "open"), 3);
  assert_int_equal (json_object_get_int_member (member_obj (totals, "ops"), "close"), 3);
  assert_int_equal (json_object_get_int_member (member_obj (totals, "decisions"), "hide"), 1);
  assert_string_equal (json_object_get_string_member (totals, "first_ts"), "2024-05-01T12:00:00.000000Z");
  assert_string_equal (json_object_get_string_member (totals, "last_ts"), "2024-05-01T12:01:00.500000Z");
  assert_true (json_object_get_double_member (totals, "span_seconds") > 60.49);
  assert_true (json_object_get_double_member (totals, "span_seconds") < 60.51);

  {
    JsonObject *run = json_array_get_object_element (member_arr (o, "runs"), 0);
    assert_string_equal (json_object_get_string_member (run, "run"), "R");
    assert_int_equal (json_object_get_int_member (run, "seq_first"), 1);
    assert_int_equal (json_object_get_int_member (run, "seq_last"), 14);
  }
}

static void
test_report_examples_capped_and_gaps (void **state)
{
  g_autoptr (FbReport) r = fb_report_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *text = NULL;
  JsonObject *g;

  for (guint i = 1; i <= 9; i++)
    {
      /* seq 5 is missing */
      guint seq = i < 5 ? i : i + 1;
      g_autofree char *line = g_strdup_printf (
        "{\"ts\":\"2024-05-01T12:00:00.000000Z\",\"run\":\"G\",\"seq\":%u,\"pid\":1,\"comm\":\"x\",\"op\":\"open\","
        "\"path\":\"/secret/%u\",\"access\":\"read\",\"decision\":\"hide\",\"errno\":2,\"rule\":\"default\","
        "\"rule_origin\":\"default\",\"why\":\"no rule\"}",
        seq, i);
      g_autoptr (JsonObject) o = test_parse_object (line);
      fb_report_add_record (r, o);
    }
  root = fb_report_to_json (r);
  g = json_array_get_object_element (member_arr (member_obj (json_node_get_object (root), "denials"), "by_rule"), 0);
  assert_int_equal (json_object_get_int_member (g, "count"), 9);
  assert_int_equal (json_array_get_length (member_arr (g, "examples")), 5);
  assert_int_equal (json_object_get_int_member (member_obj (json_node_get_object (root), "totals"), "gaps"), 1);

  text = fb_report_to_text (r);
  test_assert_contains (text, "WARNING", "1 record missing", "      ...\n", NULL);
}

/* At log level "opens" a handle shows as "open" then "close": one handle. */
static void
test_report_open_then_close (void **state)
{
  static const char *const lines[] = {
    "{\"seq\":1,\"op\":\"open\",\"path\":\"/w/f\",\"access\":\"write\",\"decision\":\"allow\",\"errno\":0}",
    "{\"seq\":2,\"op\":\"close\",\"path\":\"/w/f\",\"access\":\"write\",\"decision\":\"allow\",\"errno\":0,"
    "\"bytes_read\":0,\"bytes_written\":7}",
    "{\"seq\":3,\"op\":\"open\",\"path\":\"/w/g\",\"access\":\"exec\",\"decision\":\"allow\",\"errno\":0}",
  };
  g_autoptr (FbReport) r = build_report (lines, G_N_ELEMENTS (lines));
  g_autoptr (JsonNode) root = fb_report_to_json (r);
  JsonObject *files = member_obj (json_node_get_object (root), "files");
  JsonArray *w = member_arr (files, "written");
  JsonArray *rd = member_arr (files, "read");

  assert_int_equal (json_array_get_length (w), 1);
  assert_int_equal (json_object_get_int_member (json_array_get_object_element (w, 0), "handles"), 1);
  assert_int_equal (json_object_get_int_member (json_array_get_object_element (w, 0), "bytes"), 7);
  /* executed counts as read */
  assert_int_equal (json_array_get_length (rd), 1);
  assert_string_equal (path_at (rd, 0), "/w/g");
}

/* The report files a record by what its operation does (fs-event.c's
 * table), so it covers exactly the operations the view logs: each one,
 * allowed, lands where its effect says; an operation the table does not
 * know is filed by its access alone. */
static void
test_report_every_op (void **state)
{
  static const char *const lists[] = { "created", "written", "renamed", "deleted", "read", "other" };

  for (guint i = 0; i <= FB_OP_N; i++)
    {
      FbOpEffect effect = i < FB_OP_N ? fb_op_table[i].effect : FB_OP_EFFECT_ATTR;
      const char *name = i < FB_OP_N ? fb_op_table[i].name : "fallocate";
      const char *want = NULL;
      g_autofree char *line = NULL;
      g_autoptr (FbReport) r = NULL;
      g_autoptr (JsonNode) root = NULL;
      JsonObject *files;

      switch (effect)
        {
          case FB_OP_EFFECT_OBSERVE:
            break;
          case FB_OP_EFFECT_CREATE:
          case FB_OP_EFFECT_LINK:
            want = "created";
            break;
          case FB_OP_EFFECT_HANDLE:
          case FB_OP_EFFECT_WRITE:
            want = "written";
            break;
          case FB_OP_EFFECT_RENAME:
            want = "renamed";
            break;
          case FB_OP_EFFECT_DELETE:
            want = "deleted";
            break;
          case FB_OP_EFFECT_ATTR:
            want = "other";
            break;
          case FB_OP_EFFECT_CONNECT:
            break; /* no file */
        }
      line = g_strdup_printf ("{\"seq\":1,\"op\":\"%s\",\"path\":\"/w/p\",\"target\":\"/w/t\",\"access\":\"%s\","
                              "\"decision\":\"allow\",\"errno\":0}",
                              name, effect == FB_OP_EFFECT_OBSERVE ? "stat" : "write");
      r = build_report ((const char *const[]){ line }, 1);
      root = fb_report_to_json (r);
      files = member_obj (json_node_get_object (root), "files");
      for (guint j = 0; j < G_N_ELEMENTS (lists); j++)
        {
          guint n = json_array_get_length (member_arr (files, lists[j]));

          if (n != (g_strcmp0 (want, lists[j]) == 0 ? 1u : 0u))
            fail_msg ("%s: %u under %s, expected it under %s only", name, n, lists[j], want ? want : "nothing");
        }
      if (g_strcmp0 (want, "created") == 0)
        assert_string_equal (path_at (member_arr (files, "created"), 0), effect == FB_OP_EFFECT_LINK ? "/w/t" : "/w/p");
    }
}

/* The network proxy's records: per host, the connections made, failed and
 * refused (a fold's count included), and the bytes of their ends; no file. */
static void
test_report_network (void **state)
{
  static const char *const lines[] = {
    "{\"seq\":1,\"op\":\"connect\",\"path\":\"a.test:443\",\"access\":\"connect\",\"decision\":\"allow\","
    "\"errno\":0,\"host\":\"a.test\",\"port\":443}",
    "{\"seq\":2,\"op\":\"disconnect\",\"path\":\"a.test:443\",\"access\":\"connect\",\"decision\":\"allow\","
    "\"errno\":0,\"host\":\"a.test\",\"port\":443,\"bytes_read\":2048,\"bytes_written\":100}",
    "{\"seq\":3,\"op\":\"connect\",\"path\":\"a.test:443\",\"access\":\"connect\",\"decision\":\"allow\","
    "\"errno\":111,\"host\":\"a.test\",\"port\":443}",
    "{\"seq\":4,\"op\":\"connect\",\"path\":\"b.test:80\",\"access\":\"connect\",\"decision\":\"deny\","
    "\"errno\":13,\"host\":\"b.test\",\"port\":80,\"rule\":\"default\",\"repeat\":{\"count\":3}}",
  };
  g_autoptr (FbReport) r = build_report (lines, G_N_ELEMENTS (lines));
  g_autoptr (JsonNode) root = fb_report_to_json (r);
  g_autofree char *text = fb_report_to_text (r);
  JsonArray *net = member_arr (json_node_get_object (root), "network");
  JsonObject *a, *b;

  assert_int_equal (json_array_get_length (net), 2);
  a = json_array_get_object_element (net, 0);
  b = json_array_get_object_element (net, 1);
  assert_string_equal (json_object_get_string_member (a, "host"), "a.test");
  assert_int_equal (json_object_get_int_member (a, "connections"), 1);
  assert_int_equal (json_object_get_int_member (a, "failed"), 1);
  assert_int_equal (json_object_get_int_member (a, "bytes_received"), 2048);
  assert_int_equal (json_object_get_int_member (a, "bytes_sent"), 100);
  assert_string_equal (json_object_get_string_member (b, "host"), "b.test");
  assert_int_equal (json_object_get_int_member (b, "denials"), 3);
  assert_int_equal (json_object_get_int_member (b, "connections"), 0);
  assert_int_equal (json_array_get_length (member_arr (member_obj (json_node_get_object (root), "files"), "read")), 0);
  test_assert_contains (text, "Network (2 hosts)", "a.test: 1 connection, 1 failed", "b.test: 0 connections, 3 denied",
                        NULL);
}

/* Found by fuzz-ipc-log: records missing "op", and op/decision names with
 * control characters, must neither crash the report nor reach the terminal. */
static void
test_report_malformed_records (void **state)
{
  static const char *const lines[] = {
    "{\"seq\":1,\"path\":\"/w/f\",\"decision\":\"allow\",\"bytes_written\":3}",
    "{\"seq\":2,\"op\":\"ev\\u001b[2Jil\",\"path\":\"/w/g\",\"access\":\"write\",\"decision\":\"allow\"}",
    "{\"seq\":3,\"op\":\"open\",\"path\":\"/w/h\",\"decision\":\"al\\u0014w\",\"errno\":13}",
    "{\"seq\":\"x\",\"op\":7,\"path\":[],\"decision\":null,\"ts\":\"\\u001b\"}",
  };
  g_autoptr (FbReport) r = build_report (lines, G_N_ELEMENTS (lines));
  g_autofree char *text = fb_report_to_text (r);
  g_autoptr (JsonNode) root = fb_report_to_json (r);

  for (const char *p = text; *p != '\0'; p++)
    if ((guchar)*p < 0x20 && *p != '\n')
      fail_msg ("raw control byte 0x%02x in the report:\n%s", (guchar)*p, text);
  test_assert_contains (text, "ev\\x1b[2Jil", "al\\x14w 1", NULL);
  assert_int_equal (json_object_get_int_member (member_obj (json_node_get_object (root), "totals"), "records"), 4);
}

static void
test_report_text (void **state)
{
  g_autoptr (FbReport) r = build_report (hand_log, G_N_ELEMENTS (hand_log));
  g_autofree char *text = fb_report_to_text (r);
  static const char *const sections[] = {
    "\nFiles created (2)\n  /work/dir  (mkdir)\n  /work/new.txt  (create)\n",
    "\nFiles written (1)\n       123 B  /work/new.txt\n",
    "\nFiles renamed (1)\n  /work/a.tmp \u2192 /work/a.txt\n",
    "\nFiles deleted (1)\n  /work/old.txt  (unlink)\n",
    "\n     2.0 KiB  /etc/passwd\n",
    "\nOther changes (1)\n  /work/a.txt  (setattr)\n",
    "\nDenials by rule (5 denials, 3 rules)\n"
    "       3  rule 2 at p:3:1: keys are secret  [deny 3]\n"
    "      /home/u/.ssh/id_rsa\n"
    "      /home/u/.ssh/id_ed25519\n",
    "\nDenials by process (2)\n       3  sh[10]  [deny 1, hide 1, readonly 1]\n",
    "  records     14\n",
    "  denied      5 (deny 3, hide 1, readonly 1)\n",
    "  seq gaps    0\n",
    "(1m 00s)",
  };

  assert_non_null (strstr (text, "run R: 14 records, seq 1-14\n"));
  assert_null (strstr (text, "WARNING"));
  for (guint i = 0; i < G_N_ELEMENTS (sections); i++)
    test_assert_contains (text, sections[i], NULL);
}

/* --- people format ------------------------------------------------------- */

static char *
fmt (const char *line, gboolean color)
{
  g_autoptr (JsonObject) o = test_parse_object (line);
  return fb_log_record_format (o, color);
}

/* Byte offset where the N-th column (0-based) starts: columns are separated
 * by runs of two or more spaces. */
static gssize
column_start (const char *s, guint n)
{
  guint col = 0;

  for (gssize i = 0; s[i] != '\0'; i++)
    if (s[i] == ' ' && s[i + 1] == ' ')
      {
        while (s[i] == ' ')
          i++;
        if (++col == n)
          return i;
      }
  return -1;
}

static void
test_people_columns (void **state)
{
  g_autofree char *a = fmt (hand_log[0], FALSE);
  g_autofree char *b = fmt (hand_log[3], FALSE);
  g_autofree char *c = fmt (hand_log[7], FALSE);

  g_setenv ("TZ", "UTC", TRUE);
  /* time, comm[pid], op, path, decision, errno, why */
  assert_string_equal (a, "2024-05-01 12:00:00.000  sh[10]                create    /work/new.txt"
                          "                             allow     -        workspace");
  assert_string_equal (b, "2024-05-01 12:00:03.000  sh[10]                rename    /work/a.tmp \u2192 /work/a.txt"
                          "                 allow     -        workspace");
  assert_string_equal (c, "2024-05-01 12:00:07.000  cat[12]               open      /home/u/.ssh/id_rsa"
                          "                       deny      EACCES   keys are secret");
  /* the columns line up (ASCII lines) */
  for (guint col = 1; col <= 6; col++)
    if (col != 4) /* b's path holds a 3-byte arrow */
      assert_int_equal (column_start (a, col), column_start (c, col));
}

static void
test_people_colors (void **state)
{
  g_autofree char *allow = fmt (hand_log[0], TRUE);
  g_autofree char *deny = fmt (hand_log[7], TRUE);
  g_autofree char *hide = fmt (hand_log[10], TRUE);
  g_autofree char *ro = fmt (hand_log[11], TRUE);
  g_autofree char *plain = fmt (hand_log[7], FALSE);

  assert_null (strchr (allow, '\033'));
  assert_true (g_str_has_prefix (deny, "\033[31m") && g_str_has_suffix (deny, "\033[0m"));
  assert_true (g_str_has_prefix (hide, "\033[31m"));
  assert_true (g_str_has_prefix (ro, "\033[33m") && g_str_has_suffix (ro, "\033[0m"));
  assert_null (strchr (plain, '\033'));
}

static void
test_people_hostile (void **state)
{
  /* What the writer makes of a hostile name: escapes in JSON, plus _b64
   * for invalid UTF-8. */
  FbAccessEvent e = test_event ("open", "/w/\x1b]0;pwned\a\n\\x\xff");
  g_autofree char *body = NULL;
  g_autofree char *line = NULL;
  g_autofree char *out = NULL;

  e.comm = "evil\x1b[2J";
  body = fb_access_event_format_body (&e);
  line = g_strdup_printf ("{\"ts\":\"2024-05-01T12:00:00.000000Z\",\"run\":\"h\",\"seq\":1,%s", body);
  out = fmt (line, FALSE);
  for (const char *p = out; *p != '\0'; p++)
    if ((guchar)*p < 0x20 || *p == 0x7f)
      fail_msg ("raw control byte 0x%02x in: %s", (guchar)*p, out);
  /* exact bytes shown as escapes; a literal backslash doubled */
  test_assert_contains (out, "/w/\\x1b]0;pwned\\x07\\n\\\\x\\xff", "evil\\x1b[2J[4242]", NULL);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_report_json),
    cmocka_unit_test (test_report_examples_capped_and_gaps),
    cmocka_unit_test (test_report_open_then_close),
    cmocka_unit_test (test_report_every_op),
    cmocka_unit_test (test_report_malformed_records),
    cmocka_unit_test (test_report_network),
    cmocka_unit_test (test_report_text),
    cmocka_unit_test (test_people_columns),
    cmocka_unit_test (test_people_colors),
    cmocka_unit_test (test_people_hostile),
  };

  g_setenv ("TZ", "UTC", TRUE);
  return cmocka_run_group_tests (tests, NULL, NULL);
}
