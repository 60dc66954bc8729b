/* fusebox — output that can't lie to the person reading it.
 *
 * A sandboxed command names itself (comm) and files with an ESC sequence, a
 * C1 CSI (U+009B), a right-to-left override, a line separator, a newline
 * followed by a fake record, and 254 spaces; its own argv (run.json's
 * command) carries the same.  Then `fusebox log`, `report`, `report --json`,
 * `runs`, `runs --json`, `policy explain` and an error message must show
 * every one of them escaped: no byte or character a terminal acts on or
 * hides reaches stdout or stderr raw, `log` prints exactly one line per
 * record, and nothing prints a long run of blanks that could wrap into a
 * line of its own.  The JSON outputs still carry the exact strings.
 *
 * The probe is this program inside the sandbox (`--probe DIR...`).
 */
#include "tests/lib/test-log.h"
#include "tests/lib/test-run.h"

#include <sys/prctl.h>

#define RUN_ID "20240101-000000-output"

/* The names, each at most 255 bytes (one path component). */
static const char *const hostile_names[] = {
  "esc\x1b]0;pwned\a\x1b[31mred",
  "csi\xc2\x9b"
  "31mx",
  "rlo\xe2\x80\xae"
  "txt.exe",
  "isolate\xe2\x81\xa6x\xe2\x81\xa9-zw\xe2\x80\x8b-bom\xef\xbb\xbf",
  "ls\xe2\x80\xa8ps\xe2\x80\xa9",
  "nl\n2024-01-01 00:00:00.000  fake[1]          open      etc-shadow        allow",
  NULL, /* spaces_name () */
};

/* 254 spaces and "x" */
static const char *
spaces_name (void)
{
  static char name[256];

  if (name[0] == '\0')
    {
      memset (name, ' ', 254);
      name[254] = 'x';
    }
  return name;
}

/* comm: 15 bytes at most */
#define HOSTILE_COMM "\x1b[2J\xc2\x9b\xe2\x80\xae\n"

/* ---- inside the sandbox ---- */

static int
probe_main (int argc, char **argv)
{
  prctl (PR_SET_NAME, HOSTILE_COMM, 0, 0, 0);
  /* DIR... up to "--" */
  for (int i = 0; i < argc && strcmp (argv[i], "--") != 0; i++)
    for (guint k = 0; k < G_N_ELEMENTS (hostile_names); k++)
      {
        g_autofree char *path = g_build_filename (argv[i], hostile_names[k] ? hostile_names[k] : spaces_name (), NULL);
        /* refused under /usr, made in the workspace: both logged */
        mkdir (path, 0755);
      }
  return 0;
}

/* ---- the checks ---- */

/* TEXT holds nothing a terminal acts on or hides: no C0 control but the
 * line ends, no DEL, no C1, no bidi or other format character, no line or
 * paragraph separator, no invalid UTF-8.  Written here from the Unicode
 * lists, not with fusebox's own classifier. */
static void
assert_terminal_safe (const char *what, const char *text)
{
  const char *end = text + strlen (text);

  for (const char *p = text; p < end;)
    {
      gunichar c = g_utf8_get_char_validated (p, end - p);
      if (c == (gunichar)-1 || c == (gunichar)-2)
        fail_msg ("%s: invalid UTF-8 byte 0x%02x at %td:\n%s", what, (guchar)*p, p - text, text);
      bool bad = (c < 0x20 && c != '\n') || c == 0x7f || (c >= 0x80 && c <= 0x9f) || (c >= 0x200b && c <= 0x200f) ||
                 (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) || c == 0x2028 || c == 0x2029 ||
                 c == 0xfeff || c == 0x061c;
      if (bad)
        fail_msg ("%s: raw U+%04X at byte %td:\n%s", what, c, p - text, text);
      p = g_utf8_next_char (p);
    }
}

/* No line holds a run of blanks wider than any column's padding (the
 * path column's 40): what would push the rest of a line onto a terminal
 * line of its own, where it reads as another record. */
static void
assert_no_blank_runs (const char *what, const char *text)
{
  g_autofree char *blanks = g_strnfill (48, ' ');

  if (strstr (text, blanks) != NULL)
    fail_msg ("%s: a run of 48 blanks:\n%s", what, text);
}

/* R's status; its output moved to *RET_OUT and *RET_ERR. */
static int
fusebox_result (RfxResult *r, char **ret_out, char **ret_err)
{
  int status = r->status;

  *ret_out = g_steal_pointer (&r->out);
  *ret_err = g_steal_pointer (&r->err);
  rfx_result_clear (r);
  return status;
}

/* fusebox ARGS... (NULL-terminated) to completion, with TZ=UTC (main sets
 * it); its status, its output in *RET_OUT and *RET_ERR. */
#define fusebox(fx, ret_out, ret_err, ...)                                                                             \
  ({                                                                                                                   \
    RfxResult r_ = { 0 };                                                                                              \
    rfx_fusebox (fx, &r_, __VA_ARGS__);                                                                                \
    fusebox_result (&r_, ret_out, ret_err);                                                                            \
  })

static guint
count_lines (const char *text)
{
  guint n = 0;

  for (const char *p = text; *p != '\0'; p++)
    n += *p == '\n';
  return n;
}

/* The run the other checks read: returns its directory. */
static char *
hostile_run (RFx *fx)
{
  g_autofree char *self = test_self ();
  char *run_dir = g_build_filename (fx->runs, RUN_ID, NULL);
  RfxResult r;

  assert_int_equal (g_mkdir_with_parents (fx->runs, 0700), 0);
  /* /usr exists and is readable on the host: the refusals there are the
   * policy's, not an absent directory's */
  test_assert_host_readable ("/usr");
  rfx_run (fx, &r, "--run-dir", run_dir, "--", self, "--probe", "/usr", fx->ws,
           /* run.json's command: the same names, ignored by the probe */
           "--", hostile_names[0], hostile_names[1], hostile_names[2], hostile_names[5], NULL);
  if (r.status != 0)
    fail_msg ("the run failed (%d): %s", r.status, r.err);
  rfx_result_clear (&r);
  return run_dir;
}

RFX_CASE (test_log_and_report)
{
  g_autofree char *run_dir = hostile_run (fx);
  g_autofree char *raw = test_log_text (run_dir);
  g_autofree char *out = NULL, *err = NULL;
  guint records = count_lines (raw);
  guint hostile_records = 0;

  /* the log holds the names: refused under /usr, made in the workspace */
  {
    g_auto (GStrv) lines = g_strsplit (raw, "\n", -1);
    for (guint i = 0; lines[i] != NULL; i++)
      if (strstr (lines[i], "\"mkdir\"") != NULL && strstr (lines[i], "\\u001b[2J") != NULL)
        hostile_records++;
  }
  assert_int_equal (hostile_records, 2 * G_N_ELEMENTS (hostile_names));

  /* log: one line per record, each a record (it starts with its time) */
  assert_int_equal (fusebox (fx, &out, &err, "log", "--color", "never", RUN_ID, NULL), 0);
  assert_terminal_safe ("fusebox log", out);
  assert_terminal_safe ("fusebox log (stderr)", err);
  assert_no_blank_runs ("fusebox log", out);
  assert_int_equal (count_lines (out), records);
  {
    g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
    for (guint i = 0; lines[i] != NULL && lines[i][0] != '\0'; i++)
      if (!g_regex_match_simple ("^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]{12}  ", lines[i], 0, 0))
        fail_msg ("line %u of `fusebox log` is not a record:\n%s", i, lines[i]);
  }
  {
    /* each hostile name, escaped */
    static const char *const escaped[] = {
      "esc\\x1b]0;pwned\\x07\\x1b[31mred",
      "csi\\u009b31mx",
      "rlo\\u202etxt.exe",
      "isolate\\u2066x\\u2069-zw\\u200b-bom\\ufeff",
      "ls\\u2028ps\\u2029",
      "nl\\n2024-01-01",
      "\\x1b[2J\\u009b\\u202e\\n[",
    };
    for (guint i = 0; i < G_N_ELEMENTS (escaped); i++)
      if (strstr (out, escaped[i]) == NULL)
        fail_msg ("`fusebox log` does not show %s:\n%s", escaped[i], out);
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* report, for people */
  assert_int_equal (fusebox (fx, &out, &err, "report", RUN_ID, NULL), 0);
  assert_terminal_safe ("fusebox report", out);
  assert_no_blank_runs ("fusebox report", out);
  assert_non_null (strstr (out, "rlo\\u202etxt.exe"));
  assert_null (strstr (out, "\n2024-01-01"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* report --json: escaped text, exact strings once parsed */
  assert_int_equal (fusebox (fx, &out, &err, "report", "--json", RUN_ID, NULL), 0);
  {
    g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
    for (guint i = 0; lines[i] != NULL; i++)
      assert_terminal_safe ("fusebox report --json", lines[i]);
  }
  {
    g_autoptr (JsonObject) report = test_parse_object (out);
    JsonArray *created = json_object_get_array_member (json_object_get_object_member (report, "files"), "created");
    JsonArray *procs = json_object_get_array_member (json_object_get_object_member (report, "denials"), "by_process");
    guint found = 0;

    for (guint i = 0; i < json_array_get_length (created); i++)
      {
        const char *path = json_object_get_string_member (json_array_get_object_element (created, i), "path");
        for (guint k = 0; k < G_N_ELEMENTS (hostile_names); k++)
          {
            g_autofree char *want =
              g_build_filename (fx->ws, hostile_names[k] ? hostile_names[k] : spaces_name (), NULL);
            found += strcmp (path, want) == 0;
          }
      }
    assert_int_equal (found, G_N_ELEMENTS (hostile_names));
    assert_true (json_array_get_length (procs) >= 1);
    assert_string_equal (json_object_get_string_member (json_array_get_object_element (procs, 0), "comm"),
                         HOSTILE_COMM);
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* log --json: the writer's lines, already safe */
  assert_int_equal (fusebox (fx, &out, &err, "log", "--json", RUN_ID, NULL), 0);
  assert_terminal_safe ("fusebox log --json", out);
  assert_int_equal (count_lines (out), records);
}

RFX_CASE (test_runs)
{
  g_autofree char *run_dir = hostile_run (fx);
  g_autofree char *out = NULL, *err = NULL;

  assert_int_equal (fusebox (fx, &out, &err, "runs", NULL), 0);
  assert_terminal_safe ("fusebox runs", out);
  assert_no_blank_runs ("fusebox runs", out);
  /* one run, one line: the newline in the command forges none */
  assert_int_equal (count_lines (out), 1);
  assert_true (g_str_has_prefix (out, RUN_ID " "));
  assert_non_null (strstr (out, "esc\\x1b]0;pwned\\x07\\x1b[31mred csi\\u009b31mx rlo\\u202etxt.exe nl\\n2024"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  assert_int_equal (fusebox (fx, &out, &err, "runs", "--json", NULL), 0);
  assert_terminal_safe ("fusebox runs --json", out);
  assert_int_equal (count_lines (out), 1);
  {
    g_autoptr (JsonObject) o = test_parse_object (out);
    JsonArray *cmd = json_object_get_array_member (json_object_get_object_member (o, "info"), "command");
    guint n = json_array_get_length (cmd);

    assert_true (n >= 4);
    assert_string_equal (json_array_get_string_element (cmd, n - 4), hostile_names[0]);
    assert_string_equal (json_array_get_string_element (cmd, n - 3), hostile_names[1]);
    assert_string_equal (json_array_get_string_element (cmd, n - 2), hostile_names[2]);
    assert_string_equal (json_array_get_string_element (cmd, n - 1), hostile_names[5]);
  }
}

/* policy explain (text and JSON) and an error message naming a path */
RFX_CASE (test_explain_and_errors)
{
  const char *path = "/usr/rlo\xe2\x80\xae"
                     "exe.txt-esc\x1b[2J-csi\xc2\x9b-ls\xe2\x80\xa8";
  g_autofree char *out = NULL, *err = NULL;

  assert_int_equal (fusebox (fx, &out, &err, "policy", "explain", path, NULL), 0);
  assert_terminal_safe ("fusebox policy explain", out);
  assert_non_null (strstr (out, "/usr/rlo\\u202eexe.txt-esc\\x1b[2J-csi\\u009b-ls\\u2028\n"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  assert_int_equal (fusebox (fx, &out, &err, "policy", "explain", "--json", path, NULL), 0);
  {
    g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
    for (guint i = 0; lines[i] != NULL; i++)
      assert_terminal_safe ("fusebox policy explain --json", lines[i]);
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* an error message quotes what it could not find */
  assert_int_not_equal (fusebox (fx, &out, &err, "log", path, NULL), 0);
  assert_terminal_safe ("fusebox log NONEXISTENT (stderr)", err);
  assert_non_null (strstr (err, "\\u202e"));
}

/* the times `fusebox log` and `report` print, alike on every host */
static int
times_in_utc (void **state)
{
  g_setenv ("TZ", "UTC", TRUE);
  return 0;
}

RFX_DEFINE_MAIN (probe_main, times_in_utc, RFX_TEST (test_log_and_report), RFX_TEST (test_runs),
                 RFX_TEST (test_explain_and_errors))
