/* fusebox — the access log's journal output against a real
 * systemd-journald: `fusebox run --log-journal` under a journald of the
 * test's own, and `journalctl FUSEBOX_DECISION=deny` finds the refusal.
 *
 * The journald is private: this program enters a mount namespace of its
 * own, where /run/systemd and /run/log are empty tmpfs (the host's journal
 * and its sockets are not touched), gives journald a configuration there
 * (volatile storage, nothing forwarded, the kernel's ring buffer neither
 * read nor written) and starts it; `fusebox run` finds it at the usual
 * /run/systemd/journal/socket.  Everything goes with the namespace when the
 * program ends.  Without a journald, journalctl or /etc/machine-id (which
 * journald needs) the program is skipped (77) and says what is missing:
 * only this test needs them; fusebox's journal output works without them
 * and test-run-journal shows it against the protocol's socket.
 *
 * The command in the sandbox is cat(1), refused the file it reads. */
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>

#include "tests/lib/test-run.h"

#include "tests/lib/test-journal.h"

#define JOURNAL_SOCKET "/run/systemd/journal/socket"

static const char *journald;
static pid_t journald_pid;

/* ---- a journald of our own ---- */

static void
skip_program (const char *why)
{
  /* the test's own need, not fusebox's: a skip even under
   * FUSEBOX_TESTS_MUST_RUN (tests/lib/test-host.h) */
  fprintf (stderr, "skipped: %s\n", why);
  exit (77);
}

/* Whatever this host lacks for a private journald, or skip. */
static void
require_journald (void)
{
  static const char *const candidates[] = { "/lib/systemd/systemd-journald", "/usr/lib/systemd/systemd-journald" };
  g_autofree char *journalctl = g_find_program_in_path ("journalctl");

  for (guint i = 0; i < G_N_ELEMENTS (candidates) && journald == NULL; i++)
    if (access (candidates[i], X_OK) == 0)
      journald = candidates[i];
  if (journald == NULL)
    skip_program ("no systemd-journald (/lib/systemd/systemd-journald): install systemd to run this test");
  if (journalctl == NULL)
    skip_program ("no journalctl in PATH: install systemd to run this test");
  if (access ("/etc/machine-id", R_OK) != 0)
    skip_program ("no /etc/machine-id, which systemd-journald needs: run systemd-machine-id-setup");
  if (unshare (CLONE_NEWNS) < 0)
    {
      g_autofree char *why =
        g_strdup_printf ("can't make a mount namespace for a private journald: %s", g_strerror (errno));
      skip_program (why);
    }
  /* our mounts stay ours, and the host's do not reach us */
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    fail_msg ("making the mount tree private: %s", g_strerror (errno));
}

static void
mount_tmpfs (const char *path)
{
  if (g_mkdir_with_parents (path, 0755) < 0 || mount ("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
    fail_msg ("mounting a tmpfs at %s in the test's mount namespace: %s", path, g_strerror (errno));
}

static int
start_journald (void **state)
{
  static const char conf[] = "[Journal]\n"
                             "Storage=volatile\n"
                             "ReadKMsg=no\n"
                             "ForwardToSyslog=no\n"
                             "ForwardToKMsg=no\n"
                             "ForwardToConsole=no\n"
                             "ForwardToWall=no\n"
                             "RateLimitBurst=0\n";
  char *const argv[] = { (char *)journald, NULL };
  /* journald's own messages to our stderr, not to the kernel's ring buffer */
  const char *const envp[] = { "SYSTEMD_LOG_TARGET=console", "SYSTEMD_LOG_LEVEL=warning", "PATH=/usr/bin:/bin", NULL };

  mount_tmpfs ("/run/systemd");
  mount_tmpfs ("/run/log");
  g_mkdir_with_parents ("/run/systemd/journald.conf.d", 0755);
  test_write ("/run/systemd/journald.conf.d/99-fusebox-test.conf", conf, 0644);
  journald_pid = fork ();
  if (journald_pid < 0)
    fail_msg ("fork: %s", g_strerror (errno));
  if (journald_pid == 0)
    {
      prctl (PR_SET_PDEATHSIG, SIGTERM);
      execve (journald, argv, (char *const *)envp);
      _exit (127);
    }
  /* a bound on a wait, not a timed assertion */
  for (int i = 0; i < 1000 && access (JOURNAL_SOCKET, F_OK) != 0; i++)
    {
      if (waitpid (journald_pid, NULL, WNOHANG) == journald_pid)
        fail_msg ("%s ended before it made %s", journald, JOURNAL_SOCKET);
      g_usleep (10 * 1000);
    }
  if (access (JOURNAL_SOCKET, F_OK) != 0)
    fail_msg ("%s made no %s in 10 s", journald, JOURNAL_SOCKET);
  return 0;
}

static int
stop_journald (void **state)
{
  test_kill_child (&journald_pid, SIGTERM);
  umount2 ("/run/systemd", MNT_DETACH);
  umount2 ("/run/log", MNT_DETACH);
  return 0;
}

/* journalctl's entries matching MATCH (FIELD=VALUE), as fields the way
 * the journal's client sent them (journald's own, "_..." and "__...",
 * left out), sorted by FUSEBOX_SEQ. */
static GPtrArray *
journalctl (const char *match)
{
  const char *argv[] = { "journalctl", "--no-pager", "--output=json", "--all", match, NULL };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_auto (GStrv) lines = NULL;
  GPtrArray *entries = g_ptr_array_new_with_free_func ((GDestroyNotify)g_ptr_array_unref);
  int status = 0;
  g_autoptr (GError) error = NULL;

  if (!g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err, &status, &error))
    fail_msg ("journalctl: %s", error->message);
  if (!g_spawn_check_wait_status (status, NULL))
    fail_msg ("journalctl %s failed: %s", match, err);
  lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_autoptr (JsonObject) o = NULL;
      g_autoptr (GList) members = NULL;
      GPtrArray *entry;

      if (lines[i][0] == '\0')
        continue;
      o = test_parse_object (lines[i]);
      members = json_object_get_members (o);
      entry = g_ptr_array_new_with_free_func ((GDestroyNotify)test_journal_field_free);
      for (GList *l = members; l != NULL; l = l->next)
        {
          TestJournalField *f;
          const char *v;

          if (((const char *)l->data)[0] == '_')
            continue;
          v = json_object_get_string_member (o, l->data);
          if (v == NULL)
            fail_msg ("journalctl gave %s as binary data: %s", (const char *)l->data, lines[i]);
          f = g_new0 (TestJournalField, 1);
          f->name = g_strdup (l->data);
          f->value = g_bytes_new (v, strlen (v));
          g_ptr_array_add (entry, f);
        }
      g_ptr_array_add (entries, entry);
    }
  return entries;
}

static gint
by_seq (gconstpointer a, gconstpointer b)
{
  g_autofree char *x = test_journal_get (*(GPtrArray *const *)a, "FUSEBOX_SEQ");
  g_autofree char *y = test_journal_get (*(GPtrArray *const *)b, "FUSEBOX_SEQ");

  return (gint)(g_ascii_strtoll (x, NULL, 10) - g_ascii_strtoll (y, NULL, 10));
}

/* ---- the checks ---- */

RFX_CASE (test_journalctl_finds_the_refusal)
{
  g_autofree char *secret = rfx_stand_in_secret (fx);
  g_autofree char *policy = rfx_policy_deny (fx, "policy.json", secret, NULL);
  g_autofree char *run_dir = g_build_filename (fx->runs, "journald-1", NULL);
  g_autofree char *log_path = g_build_filename (run_dir, "access.jsonl", NULL);
  g_autofree char *cat = g_find_program_in_path ("cat");
  g_autofree char *log = NULL;
  g_autofree char *run_match = NULL;
  g_autoptr (GPtrArray) records = NULL;
  g_autoptr (GPtrArray) entries = NULL;
  g_autoptr (GPtrArray) denials = NULL;
  RfxResult r;

  g_unsetenv ("FUSEBOX_JOURNAL_SOCKET"); /* the journal's own place */
  assert_non_null (cat);
  rfx_run (fx, &r, "--log-journal", "--policy", policy, "--run-dir", run_dir, "--", cat, secret, NULL);
  assert_int_equal (r.status, 1);
  assert_non_null (strstr (r.err, "Permission denied"));
  /* the journal took everything: nothing to say */
  if (strstr (r.err, "journal") != NULL)
    fail_msg ("the run said something of the journal:\n%s", r.err);
  rfx_result_clear (&r);

  log = test_read_file (log_path);
  assert_non_null (log);
  records = test_parse_lines (log);
  assert_true (records->len > 1);

  /* journald writes each entry as it takes it; a bound on the wait */
  run_match = g_strdup_printf ("FUSEBOX_RUN=%s", test_json_str (records->pdata[0], "run"));
  for (int i = 0; i < 500; i++)
    {
      g_clear_pointer (&entries, g_ptr_array_unref);
      entries = journalctl (run_match);
      if (entries->len >= records->len)
        break;
      g_usleep (20 * 1000);
    }
  g_ptr_array_sort (entries, by_seq);
  {
    g_autofree char *what = g_strdup_printf ("journalctl %s", run_match);
    test_journal_assert_records (entries, records, what);
  }

  /* what an operator types */
  denials = journalctl ("FUSEBOX_DECISION=deny");
  assert_int_equal (denials->len, 1);
  {
    g_autofree char *path = test_journal_get (denials->pdata[0], "FUSEBOX_PATH");
    g_autofree char *why = test_journal_get (denials->pdata[0], "FUSEBOX_WHY");
    g_autofree char *rule = test_journal_get (denials->pdata[0], "FUSEBOX_RULE");
    g_autofree char *ident = test_journal_get (denials->pdata[0], "SYSLOG_IDENTIFIER");

    assert_string_equal (path, secret);
    assert_string_equal (why, "credentials stay on the host");
    assert_string_equal (rule, "2");
    assert_string_equal (ident, "fusebox");
  }
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    RFX_TEST (test_journalctl_finds_the_refusal),
  };

  rfx_require ();
  require_journald ();
  test_filter_tests (argv[0]);
  return cmocka_run_group_tests (tests, start_journald, stop_journald);
}
