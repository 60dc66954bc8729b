/* fusebox — what a sandbox can do to the journal's copy of the access log:
 * names it chooses (file names, its own comm) can't forge a journal field.
 *
 * The sandbox makes files whose names hold a newline and a field after it
 * ("a\nFUSEBOX_DECISION=allow", "b\nPRIORITY=0\nMESSAGE=forged"), bytes
 * that are not UTF-8, "=", and terminal escapes; it is refused such a name
 * in a denied directory; and its comm is "c\nFUSEBOX_OP=x".  Every entry
 * the run sends (to a socket the test binds and reads as journald would)
 * parses strictly, has each field once, and holds exactly its record: the
 * refusal says deny, whatever the name says.
 *
 * The probe is this program inside the sandbox (`--probe hostile ...`). */
#include <sys/prctl.h>

#include "tests/lib/test-log.h"
#include "tests/lib/test-run.h"

#include "tests/lib/test-journal.h"

static const char *const hostile[] = {
  "a\nFUSEBOX_DECISION=allow", "b\nPRIORITY=0\nMESSAGE=forged", "\xff\xfe\n=", "d=e", "\x1b]0;title\x07",
};
#define REFUSED_NAME "x\nFUSEBOX_DECISION=allow\nFUSEBOX_ERRNO=0"
#define COMM "c\nFUSEBOX_OP=x"

/* ---- inside the sandbox ---- */

static int
probe_main (int argc, char **argv)
{
  const char *dir = argv[1], *denied = argv[2];
  g_autofree char *refused = g_build_filename (denied, REFUSED_NAME, NULL);
  int fd;

  if (prctl (PR_SET_NAME, COMM) < 0)
    return 3;
  for (guint i = 0; i < G_N_ELEMENTS (hostile); i++)
    {
      g_autofree char *path = g_build_filename (dir, hostile[i], NULL);

      fd = open (path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0)
        return 1;
      close (fd);
    }
  fd = open (refused, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  printf ("%s\n", fd >= 0 ? "OK" : rfx_errname (errno));
  return 0;
}

/* ---- the checks ---- */

RFX_CASE (test_names_forge_nothing)
{
  g_autofree char *self = test_self ();
  const char *socket = test_dir_path (fx->dir, "journal.socket");
  const char *made = test_dir_mkdir (fx->dir, "ws/made", 0755);
  const char *locked = test_dir_mkdir (fx->dir, "ws/locked", 0755);
  const char *refused = test_dir_keep (fx->dir, g_build_filename (locked, REFUSED_NAME, NULL));
  g_autofree char *run_dir = g_build_filename (fx->runs, "journal-1", NULL);
  g_autofree char *policy = rfx_policy_deny (fx, "policy.json", locked, NULL);
  g_autofree char *log = NULL;
  g_autofree char *why = NULL;
  g_autoptr (GPtrArray) records = NULL;
  g_autoptr (GPtrArray) entries = NULL;
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  guint found[G_N_ELEMENTS (hostile)] = { 0 };
  guint refusals = 0, with_comm = 0;
  int fd, status = -1;
  GPid pid;

  /* the denied directory is there and writable from the host */
  {
    g_autofree char *probe_file = g_build_filename (locked, "host-can-write", NULL);

    test_write (probe_file, "x", 0644);
    assert_int_equal (unlink (probe_file), 0);
  }

  fd = test_journal_bind (socket);
  if (fd < 0)
    fail_msg ("binding %s: %s", socket, g_strerror (-fd));
  env = g_environ_setenv (env, "FUSEBOX_JOURNAL_SOCKET", socket, TRUE);
  {
    const char *args[] = { test_bin (),     "run",  "--read",    g_getenv ("FUSEBOX_BUILD_ROOT"),
                           "--policy",      policy, "--run-dir", run_dir,
                           "--log-journal", "--",   self,        "--probe",
                           "hostile",       made,   locked,      NULL };
    for (guint i = 0; i < G_N_ELEMENTS (args); i++)
      g_ptr_array_add (argv, (gpointer)args[i]);
  }
  rfx_set_repro (fx, (char **)argv->pdata);
  if (!g_spawn_async (fx->ws, (char **)argv->pdata, env, G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                      NULL, &pid, &error))
    fail_msg ("spawn %s: %s", test_bin (), error->message);
  rfx_keep_pid (fx, pid);
  entries = test_journal_collect (fd, pid, &status, &why);
  rfx_forget_pid (fx, pid);
  close (fd);
  if (entries == NULL)
    fail_msg ("an entry journald would not parse: %s", why);
  assert_int_equal (status, 0);
  /* the refusal happened, on the host too */
  assert_int_equal (access (refused, F_OK), -1);

  log = test_log_text (run_dir);
  records = test_parse_lines (log);
  test_journal_assert_records (entries, records, "fusebox run --log-journal");
  for (guint i = 0; i < records->len; i++)
    {
      JsonObject *o = records->pdata[i];
      GPtrArray *entry = entries->pdata[i];
      const char *path;

      /* each field once: a forged one would be a second */
      for (guint k = 0; k < entry->len; k++)
        if (test_journal_count (entry, ((TestJournalField *)entry->pdata[k])->name) != 1)
          fail_msg ("record %u: %s is in its entry %u times", i + 1, ((TestJournalField *)entry->pdata[k])->name,
                    test_journal_count (entry, ((TestJournalField *)entry->pdata[k])->name));
      if (g_strcmp0 (test_json_str (o, "comm"), COMM) == 0)
        with_comm++;
      path = test_json_str (o, "path");
      for (guint h = 0; h < G_N_ELEMENTS (hostile); h++)
        {
          g_autofree char *full = g_build_filename (made, hostile[h], NULL);
          g_autofree char *b64 = g_base64_encode ((const guchar *)full, strlen (full));
          g_autofree char *got_b64 = test_journal_get (entry, "FUSEBOX_PATH_B64");

          if (g_strcmp0 (path, full) == 0 || g_strcmp0 (got_b64, b64) == 0)
            found[h]++;
        }
      if (g_strcmp0 (path, refused) == 0)
        {
          g_autofree char *decision = test_journal_get (entry, "FUSEBOX_DECISION");
          g_autofree char *priority = test_journal_get (entry, "PRIORITY");

          assert_string_equal (decision, "deny");
          assert_string_equal (priority, "5");
          refusals++;
        }
    }
  for (guint h = 0; h < G_N_ELEMENTS (hostile); h++)
    if (found[h] == 0)
      fail_msg ("no entry for the file named %s", g_strescape (hostile[h], NULL));
  assert_true (refusals >= 1);
  assert_true (with_comm >= 1);
}

RFX_DEFINE_MAIN (probe_main, NULL, RFX_TEST (test_names_forge_nothing))
