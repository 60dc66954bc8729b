/* Adversarial tests: nothing of the host's goes with a private source.
 *
 * A private source (/tmp and HOME under the built-in policies) is a host
 * directory in the run directory, removed when the run ends.  `mv proj
 * /tmp/proj` was one rename on the host, allowed since both ends are
 * writable: the hidden .git, a denied key and a hidden pem went with their
 * directory, and the run's own cleanup deleted them from the host, where
 * the sandbox could remove none of them itself.  Under builtin:agent, which
 * refuses `rm -rf sub/.git` (EROFS), `mv sub /tmp/sub` deleted that
 * repository.  Now a private source is a filesystem of its own: a rename
 * or link between it and another source answers EXDEV, logged as
 * fusebox's own refusal (fusebox:private-source), and mv copies what the
 * sandbox sees and removes what it may.  Inside `fusebox run`, each host
 * file first proven readable outside:
 *  - builtin:default plus a deny glob for .key files and a hide glob for
 *    .pem files, at any depth: rename(2) of a directory holding a hidden
 *    .git, a denied key and a hidden pem into /tmp and into HOME,
 *    RENAME_EXCHANGE across and link(2) across answer EXDEV; then mv(1) of
 *    each such directory into /tmp and HOME; after the run (its private
 *    sources removed) the .git, the key and the pem are on the host as they
 *    were;
 *  - builtin:agent: rm -rf sub/.git is refused, and mv sub /tmp/sub and mv
 *    sub ~/sub leave sub/.git on the host; so do they in a session, whose
 *    private sources `runs --prune` removes once it is over;
 *  - what still works: a plain file and a plain directory move into /tmp
 *    and HOME and between them with mv (copied, then removed), and a rename
 *    within a source is the host's.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include <sys/syscall.h>

#include <json-glib/json-glib.h>

#include "tests/lib/test-log.h"
#include "tests/lib/test-run.h"
#include "tests/lib/test-sec-files.h"

/* --- inside the sandbox --------------------------------------------------------- */

static const char *
probe_op (const char *op, const char *const *args, int *words, char **owned)
{
  (void)owned;
  *words = 3;
  if (strcmp (op, "rename") == 0)
    return rfx_res (syscall (SYS_renameat2, AT_FDCWD, args[0], AT_FDCWD, args[1], 0));
  if (strcmp (op, "exchange") == 0)
    return rfx_res (syscall (SYS_renameat2, AT_FDCWD, args[0], AT_FDCWD, args[1], RENAME_EXCHANGE));
  if (strcmp (op, "link") == 0)
    return rfx_res (link (args[0], args[1]));
  *words = 2;
  if (strcmp (op, "mkdir") == 0)
    return rfx_res (mkdir (args[0], 0755));
  return NULL;
}

/* --- the host side --------------------------------------------------------------- */

/* What the view hides or refuses to remove in a directory D of the
 * workspace: proven on the host and readable outside. */
static const TestSecFile kept_files[] = {
  { ".git/HEAD", "ref: refs/heads/precious\n" },
  { "id.key", "KEY-THE-SANDBOX-MAY-NOT-READ\n" },
  { "s.pem", "PEM-THE-SANDBOX-NEVER-SEES\n" },
};

static void
make_repo (RFx *fx, const char *dir, guint n)
{
  g_autofree char *repo = g_build_filename (fx->ws, dir, NULL);
  g_autofree char *visible = g_build_filename (repo, "file", NULL);

  test_write (visible, "a file the sandbox may move\n", 0644);
  test_sec_files_make (repo, kept_files, n);
}

/* Each of the first N kept files of DIR is on the host as it was. */
static void
assert_kept (RFx *fx, const char *dir, guint n, const RfxResult *r)
{
  g_autofree char *repo = g_build_filename (fx->ws, dir, NULL);
  g_autofree char *path = NULL, *data = NULL;

  if (test_sec_files_changed (repo, kept_files, n, &path, &data) != NULL)
    fail_msg ("%s is %s on the host after the run\nstdout:\n%s\nstderr:\n%s", path, data != NULL ? "changed" : "gone",
              r->out, r->err);
}

/* The run's private sources are gone: its cleanup ran, so what is still on
 * the host was not handed to it. */
static void
assert_private_removed (const char *run_dir)
{
  g_autofree char *private = g_build_filename (run_dir, "private", NULL);
  if (g_file_test (private, G_FILE_TEST_EXISTS))
    fail_msg ("%s is still there: the run did not remove its private sources", private);
}

/* T/NAME: `fusebox policy show builtin:default` (for this workspace and
 * HOME) with a deny glob for keys and a hide glob for pems at any depth,
 * as a user adds them; its path. */
static char *
default_with_globs (RFx *fx, const char *name)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *text = NULL;
  char *path = g_build_filename (fx->tmp, name, NULL);
  RfxResult r = { 0 };
  JsonArray *rules;
  JsonObject *rule;

  rfx_fusebox (fx, &r, "policy", "show", "builtin:default", NULL);
  if (r.status != 0 || !json_parser_load_from_data (parser, r.out, -1, &error))
    fail_msg ("fusebox policy show builtin:default (exit %d): %s\n%s", r.status, error != NULL ? error->message : "",
              r.err);
  rfx_result_clear (&r);
  rules = json_object_get_array_member (json_node_get_object (json_parser_get_root (parser)), "rules");
  rule = json_object_new ();
  json_object_set_string_member (rule, "glob", "**/*.key");
  json_object_set_string_member (rule, "access", "deny");
  json_object_set_string_member (rule, "why", "keys");
  json_array_add_object_element (rules, rule);
  rule = json_object_new ();
  json_object_set_string_member (rule, "glob", "**/*.pem");
  json_object_set_string_member (rule, "access", "hide");
  json_object_set_string_member (rule, "why", "certificates");
  json_array_add_object_element (rules, rule);
  json_generator_set_root (gen, json_parser_get_root (parser));
  text = json_generator_to_data (gen, NULL);
  test_write (path, text, 0644);
  return path;
}

/* LOG holds a refused rename of WS/FROM to TO as fusebox's own, EXDEV. */
static void
assert_logged (RFx *fx, const char *log, const char *from, const char *to)
{
  g_autofree char *p = g_strdup_printf ("\"path\":\"%s/%s\"", fx->ws, from);
  g_autofree char *t = g_strdup_printf ("\"target\":\"%s\"", to);

  if (!test_log_has (log, "\"op\":\"rename\"", p, t, "\"decision\":\"deny\"", "\"errno\":18", "\"rule\":\"fusebox\"",
                     "\"rule_origin\":\"fusebox:private-source\"", NULL))
    fail_msg ("no rename of %s to %s refused by fusebox:private-source (EXDEV) in the log:\n%s", from, to, log);
}

RFX_CASE (test_default_globs)
{
  g_autofree char *self = test_self ();
  g_autofree char *policy = default_with_globs (fx, "policy.json");
  g_autofree char *run1 = g_build_filename (fx->tmp, "run1", NULL);
  g_autofree char *run2 = g_build_filename (fx->tmp, "run2", NULL);
  g_autofree char *home_b = g_build_filename (fx->home, "b", NULL);
  g_autofree char *home_d = g_build_filename (fx->home, "d", NULL);
  g_autofree char *home_e = g_build_filename (fx->home, "e", NULL);
  g_autofree char *home_l = g_build_filename (fx->home, "l", NULL);
  g_autofree char *plain = g_build_filename (fx->ws, "plain.txt", NULL);
  g_autofree char *plaindir = g_build_filename (fx->ws, "plaindir", NULL);
  g_autofree char *plainfile = g_build_filename (plaindir, "f", NULL);
  g_autofree char *log = NULL;
  RfxResult r = { 0 };
  /* a hidden .git, a denied key and a hidden pem in a and b; across
   * sources EXDEV, within one the host's answer */
  const char *want = "rename-a-tmp EXDEV\n"
                     "rename-b-home EXDEV\n"
                     "mkdir-home-d OK\n"
                     "exchange-a-home EXDEV\n"
                     "link-tmp EXDEV\n"
                     "link-home EXDEV\n"
                     "rename-home-tmp EXDEV\n"
                     "rename-in-home OK\n"
                     "rename-in-ws OK\n"
                     "rename-back OK\n";
  g_autofree char *out = NULL;

  make_repo (fx, "a", G_N_ELEMENTS (kept_files));
  make_repo (fx, "b", G_N_ELEMENTS (kept_files));
  test_write (plain, "plain file\n", 0644);
  test_write (plainfile, "plain directory\n", 0644);

  rfx_run (fx, &r, "--policy", policy, "--run-dir", run1, "--", self, "--probe", "rename", "a", "/tmp/a", "rename", "b",
           home_b, "mkdir", home_d, "exchange", "a", home_d, "link", "a/file", "/tmp/l", "link", "a/file", home_l,
           "rename", home_d, "/tmp/d", "rename", home_d, home_e, "rename", "plain.txt", "plain2.txt", "rename",
           "plain2.txt", "plain.txt", NULL);
  {
    /* the probe prints results only; name them for the message */
    static const char *const names[] = { "rename-a-tmp", "rename-b-home", "mkdir-home-d",    "exchange-a-home",
                                         "link-tmp",     "link-home",     "rename-home-tmp", "rename-in-home",
                                         "rename-in-ws", "rename-back" };
    g_auto (GStrv) lines = g_strsplit (r.out, "\n", -1);
    GString *s = g_string_new (NULL);
    for (guint i = 0; lines[i] != NULL && lines[i][0] != '\0'; i++)
      g_string_append_printf (s, "%s %s\n", i < G_N_ELEMENTS (names) ? names[i] : "extra", lines[i]);
    out = g_string_free (s, FALSE);
  }
  assert_private_removed (run1);
  assert_kept (fx, "a", G_N_ELEMENTS (kept_files), &r);
  assert_kept (fx, "b", G_N_ELEMENTS (kept_files), &r);
  if (r.status != 0 || strcmp (out, want) != 0)
    fail_msg ("the probe (exit %d) said:\n%s\nwant:\n%s\nstderr:\n%s", r.status, out, want, r.err);
  log = test_log_text (run1);
  assert_logged (fx, log, "a", "/tmp/a");
  assert_logged (fx, log, "b", home_b);
  if (!test_log_has (log, "\"op\":\"link\"", "\"target\":\"/tmp/l\"", "\"errno\":18",
                     "\"rule_origin\":\"fusebox:private-source\"", NULL))
    fail_msg ("no link into /tmp refused by fusebox:private-source in the log:\n%s", log);
  rfx_result_clear (&r);
  g_clear_pointer (&log, g_free);

  /* as the review ran it, through mv(1): what the sandbox sees is copied,
   * what it may not remove stays; a plain file and directory still move */
  rfx_run (fx, &r, "--policy", policy, "--run-dir", run2, "--", "/bin/sh", "-c",
           "mv a /tmp/a; mv b \"$HOME\"/b; "
           "mv plain.txt /tmp/ && test ! -e plain.txt && mv /tmp/plain.txt \"$HOME\"/ && cat \"$HOME\"/plain.txt; "
           "mv plaindir \"$HOME\"/ && test ! -e plaindir && mv \"$HOME\"/plaindir /tmp/ && cat /tmp/plaindir/f",
           NULL);
  if (r.status != 0 || strcmp (r.out, "plain file\nplain directory\n") != 0)
    fail_msg ("a plain file and directory did not move into /tmp and HOME (exit %d):\n%s\nstderr:\n%s", r.status, r.out,
              r.err);
  assert_private_removed (run2);
  assert_kept (fx, "a", G_N_ELEMENTS (kept_files), &r);
  assert_kept (fx, "b", G_N_ELEMENTS (kept_files), &r);
  /* moved, so gone with the run: mv copied and removed them */
  assert_false (g_file_test (plain, G_FILE_TEST_EXISTS));
  assert_false (g_file_test (plaindir, G_FILE_TEST_EXISTS));
  log = test_log_text (run2);
  assert_logged (fx, log, "a", "/tmp/a");
  assert_logged (fx, log, "b", home_b);
  rfx_result_clear (&r);
}

/* builtin:agent: a nested repository's .git is read-only ("never
 * written"); moving its directory into /tmp or HOME leaves it on the host. */
RFX_CASE (test_agent)
{
  g_autofree char *run_dir = g_build_filename (fx->tmp, "run", NULL);
  g_autofree char *home_sub = g_build_filename (fx->home, "sub", NULL);
  g_autofree char *log = NULL;
  RfxResult r = { 0 };

  make_repo (fx, "sub", 1);
  rfx_run (fx, &r, "--policy", "builtin:agent", "--run-dir", run_dir, "--", "/bin/sh", "-c",
           "rm -rf sub/.git; echo rm $?; mv sub /tmp/sub; mv sub \"$HOME\"/sub; test -e sub/.git/HEAD; echo kept $?",
           NULL);
  assert_private_removed (run_dir);
  assert_kept (fx, "sub", 1, &r);
  if (r.status != 0 || strcmp (r.out, "rm 1\nkept 0\n") != 0 || strstr (r.err, "Read-only file system") == NULL)
    fail_msg ("under builtin:agent (exit %d):\n%s\nstderr:\n%s", r.status, r.out, r.err);
  log = test_log_text (run_dir);
  assert_logged (fx, log, "sub", "/tmp/sub");
  assert_logged (fx, log, "sub", home_sub);
  rfx_result_clear (&r);
}

/* A session's view outlives each command, and so do its private /tmp and
 * HOME, until `runs --prune` removes them once the session is over. */
#define SESSION "private-move"

static int
session_teardown (void **state)
{
  RFx *fx = *state;
  RfxResult r = { 0 };

  rfx_fusebox (fx, &r, "session", "stop", SESSION, NULL);
  rfx_result_clear (&r);
  return rfx_teardown (state);
}

RFX_CASE (test_session)
{
  RfxResult r = { 0 }, stop = { 0 }, prune = { 0 };
  g_autoptr (GDir) runs = NULL;
  const char *id;

  make_repo (fx, "sub", 1);
  rfx_run (fx, &r, "--session", SESSION, "--policy", "builtin:agent", "--", "/bin/sh", "-c",
           "mv sub /tmp/sub; mv sub \"$HOME\"/sub; test -e sub/.git/HEAD; echo kept $?", NULL);
  rfx_fusebox (fx, &stop, "session", "stop", SESSION, NULL);
  rfx_fusebox (fx, &prune, "runs", "--prune", NULL);
  if (stop.status != 0 || prune.status != 0)
    fail_msg ("session stop (exit %d: %s) or runs --prune (exit %d: %s) failed", stop.status, stop.err, prune.status,
              prune.err);
  /* the session's private sources are gone: what is on the host was not
   * handed to them */
  runs = g_dir_open (fx->runs, 0, NULL);
  while (runs != NULL && (id = g_dir_read_name (runs)) != NULL)
    {
      g_autofree char *private = g_build_filename (fx->runs, id, "private", NULL);
      if (g_file_test (private, G_FILE_TEST_EXISTS))
        fail_msg ("%s is still there after runs --prune", private);
    }
  assert_kept (fx, "sub", 1, &r);
  if (r.status != 0 || strcmp (r.out, "kept 0\n") != 0)
    fail_msg ("in a session (exit %d):\n%s\nstderr:\n%s", r.status, r.out, r.err);
  rfx_result_clear (&r);
  rfx_result_clear (&stop);
  rfx_result_clear (&prune);
}

RFX_DEFINE_PROBE_MAIN (probe_op, NULL, RFX_TEST (test_default_globs), RFX_TEST (test_agent),
                       cmocka_unit_test_setup_teardown (test_session, rfx_setup, session_teardown))
