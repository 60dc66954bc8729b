/* Integration tests: the real `fusebox` binary's global options and its
 * `policy` commands (check, explain, show), run with g_spawn in a temporary
 * workspace.  No mount and no privilege is needed.
 *
 * Each command run is printed as a one-line shell command when an assertion
 * about it fails, so a failure can be replayed by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "tests/lib/test-table.h"
#include "tests/lib/test-util.h"

/* HOME for the commands: a path that is not the test's own, so the built-in
 * default's private HOME and hidden /root and /home can be told apart. */
#define TEST_HOME "/home/fusebox-cli-test"

typedef struct
{
  TestDir *dir;    /* removed in teardown */
  char *workspace; /* dir/ws, realpath'd */
} Fixture;

/* Run fusebox with ARGV (NULL-terminated, without the program) in CWD. */
static void
run_fusebox (TestCmd *r, const char *cwd, const char *const *args)
{
  g_autoptr (GPtrArray) argv = test_fusebox_argv (args, NULL);
  g_auto (GStrv) envp = g_environ_setenv (g_get_environ (), "HOME", TEST_HOME, TRUE);

  test_cmd_run (r, cwd, envp, "HOME=" TEST_HOME, (char **)argv->pdata);
}

#define RUN(r, cwd, ...) run_fusebox (r, cwd, (const char *const[]){ __VA_ARGS__, NULL })

static void
check_status (const TestCmd *r, int expected, const char *file, int line)
{
  if (r->status != expected)
    fail_msg ("%s:%d: exit status %d, expected %d\nreproduce: %s\n--- stdout\n%s--- stderr\n%s", file, line, r->status,
              expected, r->command, r->out, r->err);
}

static void
check_contains (const TestCmd *r, const char *stream_name, const char *text, const char *needle, bool want,
                const char *file, int line)
{
  if ((strstr (text, needle) != NULL) != want)
    fail_msg ("%s:%d: %s %s \"%s\"\nreproduce: %s\n--- stdout\n%s--- stderr\n%s", file, line, stream_name,
              want ? "lacks" : "has", needle, r->command, r->out, r->err);
}

#define assert_status(r, s) check_status (r, s, __FILE__, __LINE__)
#define assert_out_has(r, s) check_contains (r, "stdout", (r)->out, s, true, __FILE__, __LINE__)
#define assert_err_has(r, s) check_contains (r, "stderr", (r)->err, s, true, __FILE__, __LINE__)
#define assert_out_lacks(r, s) check_contains (r, "stdout", (r)->out, s, false, __FILE__, __LINE__)
/* A refusal: exit status S and stderr saying NEEDLE. */
#define assert_refused(r, s, needle) (assert_status (r, s), assert_err_has (r, needle))

/* The block `explain` prints for PATH: from the line "PATH" to a blank line. */
static char *
explain_block (const TestCmd *r, const char *path)
{
  g_autofree char *head = g_strconcat (path, "\n", NULL);
  const char *p = r->out;

  while (p != NULL && *p != '\0')
    {
      if (g_str_has_prefix (p, head))
        {
          const char *end = strstr (p, "\n\n");
          return end != NULL ? g_strndup (p, end - p + 1) : g_strdup (p);
        }
      p = strchr (p, '\n');
      if (p != NULL)
        p++;
    }
  fail_msg ("explain printed no block for %s\nreproduce: %s\n--- stdout\n%s--- stderr\n%s", path, r->command, r->out,
            r->err);
  return NULL;
}

static void
check_block (const TestCmd *r, const char *path, const char *const *lines, const char *file, int line)
{
  g_autofree char *block = explain_block (r, path);

  for (guint i = 0; lines[i] != NULL; i++)
    if (strstr (block, lines[i]) == NULL)
      fail_msg ("%s:%d: the explanation of %s lacks \"%s\":\n%s\nreproduce: %s", file, line, path, lines[i], block,
                r->command);
}

#define assert_explains(r, path, ...)                                                                                  \
  check_block (r, path, (const char *const[]){ __VA_ARGS__, NULL }, __FILE__, __LINE__)

static void
write_file (const char *dir, const char *name, const char *text)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr (GError) error = NULL;

  if (!g_file_set_contents (path, text, -1, &error))
    fail_msg ("cannot write %s: %s", path, error->message);
}

static int
setup (void **state)
{
  Fixture *f = g_new0 (Fixture, 1);

  f->dir = test_dir_new (test_tmpdir ("fusebox-cli-policy"));
  char *real = realpath (test_dir_mkdir (f->dir, "ws", 0700), NULL);
  f->workspace = test_dir_keep (f->dir, g_strdup (real));
  free (real);
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  Fixture *f = *state;

  test_dir_free (f->dir, true);
  g_free (f);
  return 0;
}

/* ---- global options and help ---- */

static void
test_help_and_version (void **state)
{
  Fixture *f = *state;
  g_auto (TestCmd) help = { 0 }, version = { 0 }, bad = { 0 }, none = { 0 };

  RUN (&help, f->workspace, "--help");
  assert_status (&help, 0);
  assert_out_has (&help, "Usage: fusebox COMMAND");
  assert_out_has (&help, "policy");
  assert_out_has (&help, "Exit status");

  RUN (&version, f->workspace, "--version");
  assert_status (&version, 0);
  assert_true (g_str_has_prefix (version.out, "fusebox "));
  assert_true (g_ascii_isdigit (version.out[strlen ("fusebox ")]));

  RUN (&bad, f->workspace, "no-such-command");
  assert_refused (&bad, 2, "unknown command 'no-such-command'");

  RUN (&none, f->workspace, "--help-me");
  assert_status (&none, 2);
}

/* Every command's --help names it as it is typed ("Usage: fusebox log"),
 * tells the truth about defaults, and is help wherever it stands. */
static void
test_commands_help (void **state)
{
  Fixture *f = *state;
  static const char *const commands[] = { "check", "mount", "runs", "serve", "log", "report", "session" };
  g_auto (TestCmd) stop_help = { 0 }, mount_help = { 0 }, no_ws = { 0 }, run_dir = { 0 };
  const char *full_dir = test_dir_path (f->dir, "full-run-dir");
  g_autofree char *in_it = g_build_filename (full_dir, "something", NULL);

  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    {
      g_auto (TestCmd) r = { 0 };
      g_autofree char *usage = g_strdup_printf ("fusebox %s", commands[i]);

      RUN (&r, f->workspace, commands[i], "--help");
      assert_status (&r, 0);
      assert_out_has (&r, usage);
    }

  /* `session stop --help` asks for help; it does not look for a session "--help" */
  RUN (&stop_help, f->workspace, "session", "stop", "--help");
  assert_status (&stop_help, 0);
  assert_out_has (&stop_help, "Usage: fusebox session list");

  /* the caches' defaults as the view applies them (fs/fs.h), not older ones */
  RUN (&mount_help, f->workspace, "mount", "--help");
  assert_out_has (&mount_help, "600 where the host's changes are watched, 2 elsewhere");
  assert_out_lacks (&mount_help, "60, 60 and 2");

  /* check refuses a workspace that is not there, as every other command does */
  RUN (&no_ws, f->workspace, "check", "--quiet", "--workspace", "/nonexistent-fusebox-workspace");
  assert_refused (&no_ws, 2, "--workspace /nonexistent-fusebox-workspace: No such file or directory");

  /* a --run-dir that is not empty: one fix, the one that applies */
  assert_int_equal (g_mkdir_with_parents (full_dir, 0700), 0);
  assert_true (g_file_set_contents (in_it, "x", -1, NULL));
  RUN (&run_dir, f->workspace, "run", "--run-dir", full_dir, "--", "true");
  assert_refused (&run_dir, 125, "not empty; give a new or empty directory");
  check_contains (&run_dir, "stderr", run_dir.err, "writable filesystem", false, __FILE__, __LINE__);
}

static void
test_policy_help (void **state)
{
  Fixture *f = *state;
  static const TestInOut cases[] = {
    /* in: a command; out: an option its --help names */
    { "check", "--workspace" },
    { "explain", "--policy" },
    { "explain", "--json" },
    { "show", "--effective" },
  };
  g_auto (TestCmd) overview = { 0 }, bare = { 0 }, unknown = { 0 };

  RUN (&overview, f->workspace, "policy", "--help");
  assert_status (&overview, 0);
  assert_out_has (&overview, "check FILE...");
  assert_out_has (&overview, "explain PATH...");
  assert_out_has (&overview, "show [NAME]");

  RUN (&bare, f->workspace, "policy");
  assert_refused (&bare, 2, "Usage: fusebox policy COMMAND");

  RUN (&unknown, f->workspace, "policy", "verify");
  assert_refused (&unknown, 2, "unknown command 'verify'");

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_auto (TestCmd) r = { 0 };
      g_autofree char *usage = g_strdup_printf ("fusebox policy %s", cases[i].in);

      RUN (&r, f->workspace, "policy", cases[i].in, "--help");
      assert_status (&r, 0);
      assert_out_has (&r, usage);
      assert_out_has (&r, cases[i].out);
      assert_out_has (&r, "Exit status");
    }
}

/* ---- check ---- */

static const char good_policy[] =
  "{ \"version\": 1,\n"
  "  \"network\": \"none\",\n"
  "  \"rules\": [\n"
  "    { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" },\n"
  "    { \"path\": \"${WORKSPACE}\", \"access\": \"write\", \"why\": \"the work\" } ] }\n";

/* "acess" sits on line 4, column 20. */
static const char bad_policy[] = "{ \"version\": 1,\n"
                                 "  \"network\": \"none\",\n"
                                 "  \"rules\": [\n"
                                 "    { \"path\": \"/\", \"acess\": \"read\", \"why\": \"system files\" } ] }\n";

static void
test_check (void **state)
{
  Fixture *f = *state;
  g_auto (TestCmd) good = { 0 }, bad = { 0 }, both = { 0 }, missing = { 0 }, none = { 0 }, option = { 0 };

  write_file (f->workspace, "good.json", good_policy);
  write_file (f->workspace, "bad.json", bad_policy);

  RUN (&good, f->workspace, "policy", "check", "good.json");
  assert_status (&good, 0);
  assert_string_equal (good.out, "good.json: ok (2 rules)\n");

  RUN (&bad, f->workspace, "policy", "check", "bad.json");
  assert_status (&bad, 1);
  assert_string_equal (bad.out, "");
  assert_err_has (&bad, "bad.json:4:20: rules[0].acess: unknown key");
  assert_err_has (&bad, "access");

  /* every file is checked even after one failed */
  RUN (&both, f->workspace, "policy", "check", "bad.json", "good.json");
  assert_status (&both, 1);
  assert_out_has (&both, "good.json: ok (2 rules)");
  assert_err_has (&both, "bad.json:4:20:");

  RUN (&missing, f->workspace, "policy", "check", "absent.json");
  assert_refused (&missing, 1, "absent.json");

  RUN (&none, f->workspace, "policy", "check");
  assert_refused (&none, 2, "no FILE given");

  RUN (&option, f->workspace, "policy", "check", "--frobnicate", "good.json");
  assert_refused (&option, 2, "--frobnicate");
}

/* ---- explain ---- */

static void
test_explain_default (void **state)
{
  Fixture *f = *state;
  g_auto (TestCmd) r = { 0 };
  g_autofree char *src = g_build_filename (f->workspace, "src", "main.c", NULL);
  g_autofree char *git = g_build_filename (f->workspace, ".git", NULL);
  g_autofree char *ws_line = g_strdup_printf ("rule:        builtin:default:rules[");
  g_autofree char *host_src = g_strdup_printf ("host path:   %s", src);

  /* relative paths are taken from the current directory (the workspace) */
  RUN (&r, f->workspace, "policy", "explain", "--workspace", f->workspace, "/etc/passwd", "/root/x", "/home",
       TEST_HOME "/notes.txt", "src/main.c", ".git", "/tmp/scratch", "/proc/self/environ");
  assert_status (&r, 0);

  assert_explains (&r, "/etc/passwd", "access:      read", "rule:        builtin:default:rules[0] (path /, read)",
                   "why:         system files and tools", "host path:   /etc/passwd");
  assert_explains (&r, "/root/x", "access:      hide", "host path:   none (hidden)");
  assert_explains (&r, "/home", "access:      hide", "traversable: yes; lists only: fusebox-cli-test");
  /* HOME is private: writable, but not the host's */
  assert_explains (&r, TEST_HOME "/notes.txt", "access:      write", "mount:       inside " TEST_HOME,
                   "(private, made for each run)");
  assert_out_lacks (&r, "host path:   " TEST_HOME "/notes.txt");
  /* the workspace is the host's own, writable */
  assert_explains (&r, src, "access:      write", ws_line, "why:         the workspace", host_src);
  /* its metadata is hidden */
  assert_explains (&r, git, "access:      hide", "rule:        protected_names[.git]", "host path:   none (hidden)");
  assert_explains (&r, "/tmp/scratch", "access:      write", "(private, made for each run)");
  /* the view never shows the host's /proc, whatever the policy says */
  assert_explains (&r, "/proc/self/environ", "access:      read", "host path:   none: the view shows an empty /proc");
}

static void
test_explain_json_and_cwd_workspace (void **state)
{
  Fixture *f = *state;
  g_auto (TestCmd) r = { 0 };
  g_autofree char *expected_path = g_strdup_printf ("\"path\" : \"%s\"", f->workspace);

  /* no --workspace: the current directory is the workspace */
  RUN (&r, f->workspace, "policy", "explain", "--json", ".", "/home");
  assert_status (&r, 0);
  assert_true (g_str_has_prefix (r.out, "["));
  assert_out_has (&r, expected_path);
  assert_out_has (&r, "\"access\" : \"write\"");
  assert_out_has (&r, "\"why\" : \"the workspace\"");
  assert_out_has (&r, "\"path\" : \"/home\"");
  assert_out_has (&r, "\"traversable\" : true");
  assert_out_has (&r, "\"origin\" : \"builtin:default:rules[1]\"");
}

/* A policy file's rule is named by FILE:LINE:COL. */
static void
test_explain_file_policy (void **state)
{
  Fixture *f = *state;
  g_auto (TestCmd) r = { 0 }, other = { 0 };

  write_file (f->workspace, "good.json", good_policy);
  RUN (&r, f->workspace, "policy", "explain", "--policy", "good.json", "/usr/bin/env", "/nowhere/../etc//hosts");
  assert_status (&r, 0);
  assert_explains (&r, "/usr/bin/env", "access:      read", "rule:        good.json:4:5 (path /, read)",
                   "why:         system files");
  /* "..", "." and "//" are folded as the kernel would inside the view */
  assert_explains (&r, "/etc/hosts", "access:      read");

  /* "--" ends the options: a path may then start with "-" */
  g_auto (TestCmd) dash = { 0 };
  g_autofree char *dash_path = g_build_filename (f->workspace, "-n", NULL);
  RUN (&dash, f->workspace, "policy", "explain", "--", "-n");
  assert_status (&dash, 0);
  assert_explains (&dash, dash_path, "access:      write");

  RUN (&other, f->workspace, "policy", "explain", "--policy", "builtin:read-only", "--workspace", f->workspace,
       "/etc/passwd");
  assert_status (&other, 0);
  assert_explains (&other, "/etc/passwd", "rule:        builtin:read-only:rules[");
}

static void
test_explain_errors (void **state)
{
  Fixture *f = *state;
  g_auto (TestCmd) bad = { 0 }, builtin = { 0 }, nopath = { 0 }, ws = { 0 };

  write_file (f->workspace, "bad.json", bad_policy);
  RUN (&bad, f->workspace, "policy", "explain", "--policy", "bad.json", "/etc");
  assert_refused (&bad, 1, "bad.json:4:20:");
  assert_string_equal (bad.out, "");

  RUN (&builtin, f->workspace, "policy", "explain", "--policy", "builtin:nope", "/etc");
  assert_refused (&builtin, 1, "nope");
  assert_err_has (&builtin, "default");

  RUN (&nopath, f->workspace, "policy", "explain");
  assert_refused (&nopath, 2, "no PATH given");

  RUN (&ws, f->workspace, "policy", "explain", "--workspace", "does/not/exist", "/etc");
  assert_refused (&ws, 1, "--workspace does/not/exist: no such directory");
}

/* ---- show ---- */

static void
test_show (void **state)
{
  Fixture *f = *state;
  g_auto (TestCmd) list = { 0 }, def = { 0 }, host = { 0 }, eff = { 0 }, nope = { 0 }, two = { 0 };
  g_autofree char *ws_json = g_strdup_printf ("\"path\" : \"%s\"", f->workspace);

  RUN (&list, f->workspace, "policy", "show");
  assert_status (&list, 0);
  assert_out_has (&list, "builtin:default\n");
  assert_out_has (&list, "builtin:read-only\n");
  assert_out_has (&list, "builtin:host\n");
  assert_out_has (&list, "builtin:agent\n");

  RUN (&def, f->workspace, "policy", "show", "default");
  assert_status (&def, 0);
  assert_true (g_str_has_prefix (def.out, "{"));
  assert_out_has (&def, "\"version\" : 1");
  assert_out_has (&def, "\"/home\"");

  RUN (&host, f->workspace, "policy", "show", "builtin:host");
  assert_status (&host, 0);
  assert_out_has (&host, "\"network\" : \"host\"");

  /* --effective expands the variables for this caller */
  RUN (&eff, f->workspace, "policy", "show", "--effective", "--workspace", f->workspace, "default");
  assert_status (&eff, 0);
  assert_out_has (&eff, ws_json);
  assert_out_lacks (&eff, "${WORKSPACE}");

  RUN (&nope, f->workspace, "policy", "show", "nope");
  assert_refused (&nope, 1, "nope");

  RUN (&two, f->workspace, "policy", "show", "default", "host");
  assert_status (&two, 2);
}

/* ---- explain net:HOST:PORT ---- */

static const char net_policy[] = "{ \"version\": 1, \"rules\": [],\n"
                                 "  \"network\": { \"allow\": [\n"
                                 "    { \"host\": \"api.openai.com\", \"port\": 443, \"why\": \"the model's API\" },\n"
                                 "    { \"host\": \"*.example.com\", \"why\": \"examples\" },\n"
                                 "    { \"cidr\": \"127.0.0.1\", \"port\": 8080, \"why\": \"the local model\" } ],\n"
                                 "  \"deny\": [ { \"host\": \"evil.example.com\", \"why\": \"known bad\" } ] } }\n";

static void
test_explain_network (void **state)
{
  Fixture *f = *state;
  g_auto (TestCmd) r = { 0 }, json = { 0 }, bad = { 0 };

  write_file (f->workspace, "net.json", net_policy);
  {
    g_auto (TestCmd) check = { 0 };

    RUN (&check, f->workspace, "policy", "check", "net.json");
    assert_status (&check, 0);
    assert_out_has (&check, "net.json: ok (0 rules, 4 network entries)");
  }
  RUN (&r, f->workspace, "policy", "explain", "--policy", "net.json", "net:api.openai.com:443",
       "net:API.OpenAI.com.:80", "net:a.b.example.com", "net:evil.example.com:443", "net:example.com",
       "net:127.0.0.1:8080", "net:127.0.0.1:22", "net:[::1]:8080", "net:a..b");
  assert_status (&r, 0);
  assert_explains (&r, "net:api.openai.com:443", "  connect:     allow", "net.json:3:5 (allow[0] api.openai.com:443)",
                   "  why:         the model's API", "  network:     allowlist");
  assert_explains (&r, "net:API.OpenAI.com.:80", "  connect:     deny", "  rule:        default",
                   "no network entry allows this host and port");
  assert_explains (&r, "net:a.b.example.com:443", "  connect:     allow", "net.json:4:5 (allow[1] *.example.com)",
                   "examples");
  assert_explains (&r, "net:evil.example.com:443", "  connect:     deny", "net.json:6:13 (deny[0] evil.example.com)",
                   "known bad");
  assert_explains (&r, "net:example.com:443", "  connect:     deny", "  rule:        default");
  assert_explains (&r, "net:127.0.0.1:8080", "  connect:     allow", "(allow[2] 127.0.0.1:8080)", "the local model",
                   "  address:     127.0.0.1 (loopback)");
  assert_explains (&r, "net:127.0.0.1:22", "  connect:     deny", "  address:     127.0.0.1 (loopback)");
  assert_explains (&r, "net:[::1]:8080", "  connect:     deny", "  address:     ::1 (loopback)");
  assert_explains (&r, "net:a..b:443", "  connect:     deny", "(malformed)");

  /* --network as run takes it, and the JSON form */
  RUN (&json, f->workspace, "policy", "explain", "--json", "--network", "allow:registry.npmjs.org:443",
       "net:registry.npmjs.org", "net:github.com");
  assert_status (&json, 0);
  assert_out_has (&json, "\"host\" : \"registry.npmjs.org\"");
  assert_out_has (&json, "\"decision\" : \"allow\"");
  assert_out_has (&json, "\"why\" : \"--network allow:registry.npmjs.org:443 on the command line\"");
  assert_out_has (&json, "\"host\" : \"github.com\"");
  assert_out_has (&json, "\"decision\" : \"deny\"");
  assert_out_has (&json, "\"name\" : \"default\"");

  RUN (&bad, f->workspace, "policy", "explain", "--network", "allow:a.example:http", "net:a.example");
  assert_refused (&bad, 2, "\"http\" is not a port");
}

/* The built-in policies' network: none, and an explanation that says so. */
static void
test_explain_network_builtin (void **state)
{
  Fixture *f = *state;
  g_auto (TestCmd) r = { 0 }, agent = { 0 }, bad = { 0 };

  RUN (&r, f->workspace, "policy", "explain", "--policy", "builtin:agent", "net:api.openai.com:443");
  assert_status (&r, 0);
  assert_explains (&r, "net:api.openai.com:443", "  connect:     deny", "  network:     none",
                   "the policy's network is none");

  /* the documented way to give the agent its model's API */
  RUN (&agent, f->workspace, "policy", "explain", "--policy", "builtin:agent", "--network", "allow:api.openai.com:443",
       "net:api.openai.com:443", "net:api.openai.com:80", "net:169.254.169.254:443");
  assert_status (&agent, 0);
  assert_explains (&agent, "net:api.openai.com:443", "  connect:     allow",
                   "builtin:agent + command line:network.allow[0]");
  assert_explains (&agent, "net:api.openai.com:80", "  connect:     deny");
  assert_explains (&agent, "net:169.254.169.254:443", "  connect:     deny", "(link-local)");

  write_file (f->workspace, "bad.json",
              "{ \"version\": 1, \"rules\": [],\n  \"network\": { \"allow\": [ { \"cidr\": \"10.1.2.0/16\", "
              "\"why\": \"x\" } ] } }\n");
  RUN (&bad, f->workspace, "policy", "explain", "--policy", "bad.json", "net:a.example");
  assert_status (&bad, 1);
  assert_err_has (&bad, "bad.json:2:37: network.allow[0].cidr: \"10.1.2.0/16\" has bits set past its prefix; did you "
                        "mean 10.1.0.0/16?");
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_help_and_version, setup, teardown),
    cmocka_unit_test_setup_teardown (test_policy_help, setup, teardown),
    cmocka_unit_test_setup_teardown (test_commands_help, setup, teardown),
    cmocka_unit_test_setup_teardown (test_check, setup, teardown),
    cmocka_unit_test_setup_teardown (test_explain_default, setup, teardown),
    cmocka_unit_test_setup_teardown (test_explain_json_and_cwd_workspace, setup, teardown),
    cmocka_unit_test_setup_teardown (test_explain_file_policy, setup, teardown),
    cmocka_unit_test_setup_teardown (test_explain_errors, setup, teardown),
    cmocka_unit_test_setup_teardown (test_show, setup, teardown),
    cmocka_unit_test_setup_teardown (test_explain_network, setup, teardown),
    cmocka_unit_test_setup_teardown (test_explain_network_builtin, setup, teardown),
  };

  if (!g_file_test (test_bin (), G_FILE_TEST_IS_EXECUTABLE))
    test_skip_or_fail ("FUSEBOX_BIN is not set to the fusebox binary (run through meson test)");
  return TEST_RUN_GROUP (tests, NULL, NULL);
}
