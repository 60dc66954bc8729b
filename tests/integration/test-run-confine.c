/* fusebox — the confinement table (docs/security.md), on the built-in default
 * policy through the real `fusebox run`, then the same table under a policy
 * widened to expose the stand-ins: exactly the checks of those stand-ins
 * must then fail, which shows the table can fail.
 *
 * Every stand-in is first shown to exist and be readable (or writable) on
 * the host.  The probe is this program run inside the sandbox with
 * `--probe OP ARG...`; it prints one result per operation.
 *
 * The access-log check is here too: a run's log holds the refusals of the
 * stand-in secrets with the deciding rule and its reason.
 */
#include <sys/ipc.h>
#include <sys/shm.h>

#include "tests/lib/test-log.h"
#include "tests/lib/test-run.h"

#include <dirent.h>

/* ---- inside the sandbox ---- */

static const char *
probe_create (const char *path)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return rfx_errname (errno);
  ssize_t n = write (fd, "probe\n", 6);
  int e = n < 0 ? errno : 0;
  if (close (fd) < 0 && e == 0)
    e = errno;
  return e ? rfx_errname (e) : "OK";
}

static char *
probe_count (const char *path)
{
  DIR *d = opendir (path);
  struct dirent *ent;
  int n = 0;
  if (d == NULL)
    return g_strdup (rfx_errname (errno));
  while ((ent = readdir (d)) != NULL)
    if (strcmp (ent->d_name, ".") != 0 && strcmp (ent->d_name, "..") != 0)
      n++;
  closedir (d);
  return g_strdup_printf ("%d", n);
}

static const char *
probe_lists (const char *path, const char *name)
{
  DIR *d = opendir (path);
  struct dirent *ent;
  bool found = false;
  if (d == NULL)
    return rfx_errname (errno);
  while ((ent = readdir (d)) != NULL)
    found = found || strcmp (ent->d_name, name) == 0;
  closedir (d);
  return found ? "YES" : "NO";
}

static char *
probe_exec (const char *path)
{
  pid_t pid = fork ();
  int status;
  if (pid == 0)
    {
      execl (path, path, (char *)NULL);
      _exit (100 + (errno & 0x1f));
    }
  if (pid < 0 || waitpid (pid, &status, 0) < 0)
    return g_strdup (rfx_errname (errno));
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    return g_strdup ("OK");
  return g_strdup_printf ("EXIT-%d", WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status));
}

/* Is the SysV segment (ID or KEY) listed in /proc/sysvipc/shm? */
static const char *
probe_shm_listed (const char *id, const char *key)
{
  g_autofree char *text = NULL;
  g_autoptr (GError) error = NULL;
  if (!g_file_get_contents ("/proc/sysvipc/shm", &text, NULL, &error))
    return rfx_errname (error->code == G_FILE_ERROR_NOENT ? ENOENT : EACCES);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 1; lines[i] != NULL; i++) /* line 0: the header */
    {
      g_auto (GStrv) f = g_strsplit_set (g_strstrip (lines[i]), " \t", -1);
      guint n = 0;
      const char *col[2] = { NULL, NULL };
      for (guint j = 0; f[j] != NULL && n < 2; j++)
        if (f[j][0] != '\0')
          col[n++] = f[j];
      if (n == 2 && (strcmp (col[0], key) == 0 || strcmp (col[1], id) == 0))
        return "YES";
    }
  return "NO";
}

/* One operation of the probe (rfx_probe_main, which knows "read"). */
static const char *
probe_op (const char *op, const char *const *args, int *words, char **owned)
{
  const char *a = args[0], *b = args[1];
  const char *res;

  if (strcmp (op, "append") == 0)
    /* opening for writing is the check: no byte is written (the run's
     * own log is among the targets) */
    res = rfx_open_res (AT_FDCWD, a, O_WRONLY | O_APPEND), *words = 2;
  else if (strcmp (op, "create") == 0)
    res = probe_create (a), *words = 2;
  else if (strcmp (op, "stat") == 0)
    {
      struct stat st;
      res = rfx_res (lstat (a, &st)), *words = 2;
    }
  else if (strcmp (op, "count") == 0)
    res = *owned = probe_count (a), *words = 2;
  else if (strcmp (op, "lists") == 0)
    res = probe_lists (a, b), *words = 3;
  else if (strcmp (op, "env") == 0)
    res = g_getenv (a) ? g_getenv (a) : "(unset)", *words = 2;
  else if (strcmp (op, "exec") == 0)
    res = *owned = probe_exec (a), *words = 2;
  else if (strcmp (op, "shm") == 0)
    res = probe_shm_listed (a, b), *words = 3;
  else
    return NULL;
  return res;
}

/* ---- the table ---- */

typedef struct
{
  const char *name;
  const char *op;
  char *a, *b;
  char *expect; /* the result under the default policy */
  bool widened; /* the widened policy exposes its stand-in: the result must differ */
} Check;

typedef struct
{
  GArray *checks;   /* Check */
  char *secret_dir; /* /home/fusebox-test-XXXXXX */
  char *secret;
  char *other_ws;
  char *other_ws_file;
  char *home_key;
  char *other_run;
  char *other_run_log;
  char *shm_file;
  char *shm_name;
  int shm_id;
  char *shm_id_text, *shm_key_text;
  char *tmp_name;
} Table;

static void
add (Table *t, const char *name, const char *op, const char *a, const char *b, const char *expect, bool widened)
{
  Check c = { name, op, g_strdup (a), g_strdup (b), g_strdup (expect), widened };
  g_array_append_val (t->checks, c);
}

static void
checks_clear (Table *t)
{
  for (guint i = 0; t->checks && i < t->checks->len; i++)
    {
      Check *c = &g_array_index (t->checks, Check, i);
      g_free (c->a);
      g_free (c->b);
      g_free (c->expect);
    }
  g_clear_pointer (&t->checks, g_array_unref);
}

static void
table_clear (Table *t)
{
  checks_clear (t);
  g_free (t->secret_dir);
  g_free (t->secret);
  g_free (t->other_ws);
  g_free (t->other_ws_file);
  g_free (t->home_key);
  g_free (t->other_run);
  g_free (t->other_run_log);
  g_free (t->shm_file);
  g_free (t->shm_name);
  g_free (t->shm_id_text);
  g_free (t->shm_key_text);
  g_free (t->tmp_name);
}

/* Make the stand-ins on the host and prove each one is there. */
static void
make_stand_ins (RFx *fx, Table *t)
{
  g_autofree char *suffix = g_path_get_basename (fx->tmp); /* fusebox-run-XXXXXX */

  /* a secret in a place the default hides */
  t->secret_dir = g_build_filename ("/home", suffix, NULL);
  rfx_keep_path (fx, t->secret_dir);
  t->secret = g_build_filename (t->secret_dir, "secret.txt", NULL);
  test_write (t->secret, "stand-in secret\n", 0644);
  test_assert_host_readable (t->secret);

  /* the caller's HOME holds a key and another project's workspace */
  t->home_key = g_build_filename (fx->home, ".ssh", "id_ed25519", NULL);
  test_write (t->home_key, "stand-in key\n", 0600);
  test_assert_host_readable (t->home_key);
  t->other_ws = g_build_filename (fx->home, "src", "other", NULL);
  t->other_ws_file = g_build_filename (t->other_ws, "notes.txt", NULL);
  test_write (t->other_ws_file, "another workspace\n", 0644);
  test_assert_host_readable (t->other_ws_file);

  /* another run's directory, beside this run's */
  t->other_run = g_build_filename (fx->runs, "20260101-000000-other", NULL);
  t->other_run_log = g_build_filename (t->other_run, "access.jsonl", NULL);
  test_write (t->other_run_log, "{\"run\":\"20260101-000000-other\",\"seq\":1}\n", 0600);
  test_assert_host_readable (t->other_run_log);

  /* POSIX and SysV shared memory of the host */
  t->shm_name = g_strdup (suffix);
  t->shm_file = g_build_filename ("/dev/shm", suffix, NULL);
  rfx_keep_path (fx, t->shm_file);
  test_write (t->shm_file, "host shm\n", 0644);
  test_assert_host_readable (t->shm_file);
  key_t key = (key_t)(0x46420000 | (getpid () & 0xffff));
  t->shm_id = shmget (key, 4096, IPC_CREAT | IPC_EXCL | 0600);
  if (t->shm_id < 0)
    fail_msg ("shmget: %s", g_strerror (errno));
  rfx_keep_shm (fx, t->shm_id);
  struct shmid_ds ds;
  assert_int_equal (shmctl (t->shm_id, IPC_STAT, &ds), 0);
  t->shm_id_text = g_strdup_printf ("%d", t->shm_id);
  t->shm_key_text = g_strdup_printf ("%d", (int)key);
  {
    /* and the host lists it where the sandbox will look */
    g_autofree char *list = test_read_file ("/proc/sysvipc/shm");
    assert_non_null (list);
    assert_non_null (strstr (list, t->shm_key_text));
  }

  /* the places writes must not reach are writable on the host */
  assert_int_equal (access ("/", W_OK), 0);
  assert_int_equal (access (fx->tmp, W_OK), 0);
  assert_int_equal (access ("/usr", W_OK), 0);
  /* our own pid is on the host's /proc */
  g_autofree char *own = g_strdup_printf ("/proc/%d", (int)getpid ());
  test_assert_host_readable (own);
}

static void
build_table (RFx *fx, Table *t, const char *run_dir)
{
  g_autofree char *rnd = g_strdup_printf ("%08x", g_random_int ());
  g_autofree char *own_policy = g_build_filename (run_dir, "policy.json", NULL);
  g_autofree char *own_log = g_build_filename (run_dir, "access.jsonl", NULL);
  g_autofree char *own_pid = g_strdup_printf ("/proc/%d", (int)getpid ());
  g_autofree char *root_file = g_strdup_printf ("/fusebox-probe-%s", rnd);
  g_autofree char *beside = g_strdup_printf ("%s/beside-%s", fx->tmp, rnd);
  g_autofree char *usr_file = g_strdup_printf ("/usr/fusebox-probe-%s", rnd);
  g_autofree char *ws_file = g_strdup_printf ("%s/probe-%s", fx->ws, rnd);
  g_autofree char *shm_path = g_build_filename ("/dev/shm", t->shm_name, NULL);

  g_free (t->tmp_name);
  t->tmp_name = g_strdup_printf ("fusebox-probe-%s", rnd);
  g_autofree char *tmp_file = g_build_filename ("/tmp", t->tmp_name, NULL);

  checks_clear (t);
  t->checks = g_array_new (FALSE, FALSE, sizeof (Check));
  add (t, "HOME is the view's (private) HOME", "env", "HOME", NULL, fx->home, false);
  add (t, "HOME is empty", "count", fx->home, NULL, "0", true);
  add (t, "TMPDIR is /tmp", "env", "TMPDIR", NULL, "/tmp", false);
  add (t, "/tmp is writable", "create", tmp_file, NULL, "OK", false);
  add (t, "a secret in /home is unreadable", "read", t->secret, NULL, "ENOENT", true);
  add (t, "another workspace is unreadable", "read", t->other_ws_file, NULL, "ENOENT", true);
  /* the view reads as the caller: for root, "/" read showed the host's
   * credentials (the built-in policies hide them) */
  if (getuid () == 0 && g_file_test ("/etc/shadow", G_FILE_TEST_EXISTS))
    {
      test_assert_host_readable ("/etc/shadow");
      add (t, "the host's password hashes are unreadable", "read", "/etc/shadow", NULL, "ENOENT", false);
    }
  /* fusebox's own state stays hidden even when a rule shows it: the view
   * hides the run directories by host identity, whatever the policy */
  add (t, "another run's log is unreadable", "read", t->other_run_log, NULL, "ENOENT", false);
  add (t, "the run's policy is unreadable", "read", own_policy, NULL, "ENOENT", false);
  add (t, "the run's policy is unwritable", "append", own_policy, NULL, "ENOENT", false);
  add (t, "the run's log is unreadable", "read", own_log, NULL, "ENOENT", false);
  add (t, "the run's log is unwritable", "append", own_log, NULL, "ENOENT", false);
  add (t, "a host /dev/shm file is absent", "stat", shm_path, NULL, "ENOENT", false);
  add (t, "a host /dev/shm file is not listed", "lists", "/dev/shm", t->shm_name, "NO", false);
  add (t, "a host SysV segment is not listed", "shm", t->shm_id_text, t->shm_key_text, "NO", false);
  add (t, "the test's pid is absent from /proc", "stat", own_pid, NULL, "ENOENT", false);
  add (t, "/ is not writable", "create", root_file, NULL, "EROFS", false);
  add (t, "beside the workspace is not writable", "create", beside, NULL, "EROFS", true);
  add (t, "/usr is not writable", "create", usr_file, NULL, "EROFS", false);
  add (t, "the workspace is writable", "create", ws_file, NULL, "OK", false);
  add (t, "programs from /usr run", "exec", "/usr/bin/true", NULL, "OK", false);
}

/* Run the table in a sandbox with EXTRA options; returns the results. */
static GStrv
run_table (RFx *fx, Table *t, const char *run_dir, const char *const *extra)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *self = test_self ();
  RfxResult r;

  g_ptr_array_add (argv, (char *)test_bin ());
  g_ptr_array_add (argv, (char *)"run");
  g_ptr_array_add (argv, (char *)"--read"); /* see rfx_argv_va() */
  g_ptr_array_add (argv, (char *)g_getenv ("FUSEBOX_BUILD_ROOT"));
  g_ptr_array_add (argv, (char *)"--run-dir");
  g_ptr_array_add (argv, (char *)run_dir);
  g_ptr_array_add (argv, (char *)"--keep-run");
  for (; extra && *extra; extra++)
    g_ptr_array_add (argv, (char *)*extra);
  g_ptr_array_add (argv, (char *)"--");
  g_ptr_array_add (argv, self);
  g_ptr_array_add (argv, (char *)"--probe");
  for (guint i = 0; i < t->checks->len; i++)
    {
      Check *c = &g_array_index (t->checks, Check, i);
      g_ptr_array_add (argv, (char *)c->op);
      g_ptr_array_add (argv, c->a);
      if (c->b)
        g_ptr_array_add (argv, c->b);
    }
  g_ptr_array_add (argv, NULL);
  rfx_run_argv (fx, &r, (char **)argv->pdata);
  if (r.status != 0)
    fail_msg ("the probe's run exited %d:\n%s%s", r.status, r.out, r.err);
  GStrv lines = g_strsplit (r.out, "\n", -1);
  if (g_strv_length (lines) < t->checks->len)
    fail_msg ("the probe printed %u results for %u checks:\n%s%s", g_strv_length (lines), t->checks->len, r.out, r.err);
  rfx_result_clear (&r);
  return lines;
}

/* A file named NAME somewhere below DIR. */
static bool
find_below (const char *dir, const char *name)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *n;
  while (d != NULL && (n = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *p = g_build_filename (dir, n, NULL);
      if (strcmp (n, name) == 0)
        return true;
      if (g_file_test (p, G_FILE_TEST_IS_DIR) && !g_file_test (p, G_FILE_TEST_IS_SYMLINK) && find_below (p, name))
        return true;
    }
  return false;
}

RFX_CASE (test_confinement_table)
{
  Table t = { 0 };
  g_autofree char *run1 = g_build_filename (fx->runs, "confine-1", NULL);
  g_autofree char *run2 = g_build_filename (fx->runs, "confine-2", NULL);
  g_autoptr (GString) failures = g_string_new (NULL);

  make_stand_ins (fx, &t);

  /* 1: the built-in default: every check holds */
  build_table (fx, &t, run1);
  g_auto (GStrv) res1 = run_table (fx, &t, run1, NULL);
  for (guint i = 0; i < t.checks->len; i++)
    {
      Check *c = &g_array_index (t.checks, Check, i);
      if (strcmp (res1[i], c->expect) != 0)
        g_string_append_printf (failures, "  %s: %s %s gave %s, expected %s\n", c->name, c->op, c->a, res1[i],
                                c->expect);
    }
  if (failures->len)
    fail_msg ("under the built-in default:\n%s", failures->str);

  /* the run's own policy and log exist and are readable on the host: their
   * checks above were about the view, not about missing files */
  g_autofree char *p1 = g_build_filename (run1, "policy.json", NULL);
  g_autofree char *l1 = g_build_filename (run1, "access.jsonl", NULL);
  test_assert_host_readable (p1);
  test_assert_host_readable (l1);
  /* the file written to /tmp is in the run directory, not in the host's /tmp */
  g_autofree char *host_tmp = g_build_filename ("/tmp", t.tmp_name, NULL);
  assert_false (g_file_test (host_tmp, G_FILE_TEST_EXISTS));
  g_autofree char *priv1 = g_build_filename (run1, "private", NULL);
  if (!find_below (priv1, t.tmp_name))
    fail_msg ("the file the sandbox wrote to /tmp (%s) is not in the run's private sources %s", t.tmp_name, priv1);
  /* and the failed writes left nothing */
  for (guint i = 0; i < t.checks->len; i++)
    {
      Check *c = &g_array_index (t.checks, Check, i);
      if (strcmp (c->op, "create") == 0 && strcmp (c->expect, "OK") != 0 && g_file_test (c->a, G_FILE_TEST_EXISTS))
        fail_msg ("%s exists on the host after a refused write", c->a);
    }

  /* 2: widened to expose the stand-ins: exactly their checks fail */
  g_autofree char *own_policy2 = g_build_filename (run2, "policy.json", NULL);
  g_autofree char *own_log2 = g_build_filename (run2, "access.jsonl", NULL);
  g_autofree char *ssh = g_build_filename (fx->home, ".ssh", NULL);
  const char *extra[] = { "--read",  t.secret_dir, "--read",  t.other_ws, "--read",  ssh,     "--read", t.other_run,
                          "--write", own_policy2,  "--write", own_log2,   "--write", fx->tmp, NULL };
  build_table (fx, &t, run2);
  g_auto (GStrv) res2 = run_table (fx, &t, run2, extra);
  for (guint i = 0; i < t.checks->len; i++)
    {
      Check *c = &g_array_index (t.checks, Check, i);
      bool held = strcmp (res2[i], c->expect) == 0;
      if (c->widened && held)
        g_string_append_printf (failures, "  %s: still %s with its stand-in exposed\n", c->name, res2[i]);
      else if (!c->widened && !held)
        g_string_append_printf (failures, "  %s: %s %s gave %s, expected %s (the widening does not expose it)\n",
                                c->name, c->op, c->a, res2[i], c->expect);
    }
  if (failures->len)
    fail_msg ("under the widened policy:\n%s", failures->str);

  /* the log holds the refusals of the stand-ins, with the rule and its why */
  g_autofree char *log = test_read_file (l1);
  assert_non_null (log);
  g_autoptr (GPtrArray) records = test_parse_lines (log);
  bool home_hidden = false, run_hidden = false;
  for (guint i = 0; i < records->len; i++)
    {
      JsonObject *rec = records->pdata[i];
      const char *path = test_json_str (rec, "path");
      const char *decision = test_json_str (rec, "decision");
      const char *why = test_json_str (rec, "why");
      if (g_strcmp0 (path, "/home") == 0 && g_strcmp0 (decision, "hide") == 0 &&
          g_strcmp0 (why, "other people's files") == 0 && json_object_has_member (rec, "rule"))
        home_hidden = true;
      if (g_strcmp0 (path, fx->runs) == 0 && g_strcmp0 (decision, "hide") == 0 &&
          g_strcmp0 (why, "fusebox's own run directories") == 0)
        run_hidden = true;
    }
  if (!home_hidden)
    fail_msg ("the log %s has no hide record for /home (the secret's hidden place) with its reason", l1);
  if (!run_hidden)
    fail_msg ("the log %s has no hide record for %s with the run directories' reason", l1, fx->runs);

  table_clear (&t);
}

/* A denied stand-in: the refusal is logged with the path, the rule and its
 * reason, from a policy file the way a user writes one. */
RFX_CASE (test_log_holds_denial)
{
  g_autofree char *secret = rfx_stand_in_secret (fx);
  g_autofree char *policy = rfx_policy_deny (fx, "policy.json", secret, NULL);
  g_autofree char *run_dir = g_build_filename (fx->runs, "log-1", NULL);
  g_autofree char *self = test_self ();
  /* the rule as the file has it (rfx_policy_deny writes it on line 4),
   * though the run adds rules of its own to the policy */
  g_autofree char *origin = g_strdup_printf ("%s:4:3", policy);
  RfxResult r;

  rfx_run (fx, &r, "--policy", policy, "--run-dir", run_dir, "--", self, "--probe", "read", secret, "append", secret,
           NULL);
  assert_int_equal (r.status, 0);
  assert_string_equal (r.out, "EACCES\nEACCES\n");
  rfx_result_clear (&r);

  g_autofree char *log = test_log_text (run_dir);
  g_autoptr (GPtrArray) records = test_parse_lines (log);
  int denials = 0;
  for (guint i = 0; i < records->len; i++)
    {
      JsonObject *rec = records->pdata[i];
      if (g_strcmp0 (test_json_str (rec, "path"), secret) != 0)
        continue;
      assert_string_equal (test_json_str (rec, "decision"), "deny");
      assert_int_equal (json_object_get_int_member (rec, "errno"), EACCES);
      assert_int_equal (json_object_get_int_member (rec, "rule"), 2);
      assert_string_equal (test_json_str (rec, "rule_origin"), origin);
      assert_string_equal (test_json_str (rec, "why"), "credentials stay on the host");
      denials++;
    }
  if (denials < 2)
    fail_msg ("expected the denied read and write of %s in %s/access.jsonl, found %d records", secret, run_dir,
              denials);

  /* run.json counts them */
  g_autofree char *info_path = g_build_filename (run_dir, "run.json", NULL);
  g_autofree char *info_text = test_read_file (info_path);
  g_autoptr (JsonObject) info = test_parse_object (info_text);
  assert_int_equal (json_object_get_int_member (info, "exit_status"), 0);
  assert_true (json_object_get_int_member (info, "denials") >= 2);
  assert_true (json_object_get_int_member (info, "records") >= 2);

  /* the log rewritten without its refusals, seq renumbered (what a sandbox
   * that reaches it through another name can do): no gap shows it, the
   * count in run.json does */
  rfx_fusebox (fx, &r, "report", run_dir, NULL);
  assert_int_equal (r.status, 0);
  assert_null (strstr (r.out, "WARNING"));
  rfx_result_clear (&r);
  {
    g_autofree char *log_path = g_build_filename (run_dir, "access.jsonl", NULL);
    g_autoptr (GString) kept = g_string_new (NULL);
    g_autofree char *whole = test_read_file (log_path);
    g_auto (GStrv) lines = g_strsplit (whole, "\n", -1);
    g_autoptr (GRegex) seq_re = g_regex_new ("\"seq\":[0-9]+", 0, 0, NULL);
    guint seq = 0;

    for (guint i = 0; lines[i] != NULL; i++)
      {
        g_autofree char *renumbered = NULL;
        g_autofree char *with = NULL;

        if (lines[i][0] == '\0' || strstr (lines[i], "\"decision\":\"deny\"") != NULL)
          continue;
        with = g_strdup_printf ("\"seq\":%u", ++seq);
        renumbered = g_regex_replace_literal (seq_re, lines[i], -1, 0, with, 0, NULL);
        g_string_append_printf (kept, "%s\n", renumbered);
      }
    test_write (log_path, kept->str, 0600);
  }
  rfx_fusebox (fx, &r, "report", run_dir, NULL);
  assert_int_equal (r.status, 0);
  assert_null (strstr (r.out, "seq gaps    0 (records"));
  assert_non_null (strstr (r.out, "WARNING: run.json of run"));
  assert_non_null (strstr (r.out, "it was changed after it was written"));
  rfx_result_clear (&r);
  rfx_fusebox (fx, &r, "report", "--json", run_dir, NULL);
  assert_non_null (strstr (r.out, "\"run_json_mismatch\" : true"));
  rfx_result_clear (&r);
  /* and with run.json removed to hide it: said too */
  assert_int_equal (unlink (info_path), 0);
  rfx_fusebox (fx, &r, "report", run_dir, NULL);
  assert_int_equal (r.status, 0);
  assert_non_null (strstr (r.out, "has no run.json"));
  rfx_result_clear (&r);
  rfx_fusebox (fx, &r, "report", "--json", run_dir, NULL);
  assert_non_null (strstr (r.out, "\"run_json_check\" : \"missing\""));
  rfx_result_clear (&r);
}

/* A policy that shows the host, writable (builtin:host), with the run
 * directories where they are by default (HOME/.local/state, and HOME is not
 * private under this policy): the run's own policy and log and another
 * run's log stay out of reach, by the hide rule every run gets. */
RFX_CASE (test_host_policy_hides_runs)
{
  g_autofree char *self = test_self ();
  g_autofree char *runs = g_build_filename (fx->home, ".local", "state", "fusebox", "runs", NULL);
  g_autofree char *run_dir = g_build_filename (runs, "host-1", NULL);
  g_autofree char *own_policy = g_build_filename (run_dir, "policy.json", NULL);
  g_autofree char *own_log = g_build_filename (run_dir, "access.jsonl", NULL);
  g_autofree char *other_log = g_build_filename (runs, "20260101-000000-other", "access.jsonl", NULL);
  g_autofree char *home_file = g_build_filename (fx->home, "notes.txt", NULL);
  RfxResult r;

  fx->xdg_default = true;
  test_write (other_log, "{}\n", 0600);
  test_assert_host_readable (other_log);
  test_write (home_file, "visible\n", 0644);
  rfx_run (fx, &r, "--policy", "builtin:host", "--run-dir", run_dir, "--", self, "--probe", "read", own_policy,
           "append", own_policy, "read", own_log, "append", own_log, "read", other_log, "count", runs, "read",
           home_file, NULL);
  if (r.status != 0)
    fail_msg ("the run exited %d: %s", r.status, r.err);
  /* the rest of HOME is the host's: only the run directories are hidden */
  assert_string_equal (r.out, "ENOENT\nENOENT\nENOENT\nENOENT\nENOENT\nENOENT\nOK\n");
  test_assert_host_readable (own_policy);
  test_assert_host_readable (own_log);
  g_autofree char *policy = test_read_file (own_policy);
  assert_non_null (strstr (policy, "fusebox's own run directories"));
  rfx_result_clear (&r);
}

RFX_DEFINE_PROBE_MAIN (probe_op, NULL, RFX_TEST (test_confinement_table), RFX_TEST (test_log_holds_denial),
                       RFX_TEST (test_host_policy_hides_runs))
