/* fusebox — what every test program does the same way: find the build's
 * binaries and fixtures, make and remove its temporary directories, read
 * and write files, run a command and keep its output, parse JSON, wait for
 * an event with a bound, and the cmocka plumbing of main().
 *
 * A helper that checks something fails the test itself (a cmocka
 * assertion or fail_msg()), exactly as the same check written in the test
 * would: moving a check here never turns a failure into a pass.
 *
 * Waits are bounded only so that a broken fusebox fails a test instead of
 * hanging it; nothing here asserts how long anything takes. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "tests/lib/test-host.h"

/* ---- the build ---- */

/* $FUSEBOX_BIN (set by meson), else "fusebox" from PATH. */
const char *test_bin (void);

/* $FUSEBOX_BIN; the program is skipped (failed under
 * FUSEBOX_TESTS_MUST_RUN=1) when meson did not set it. */
const char *test_meson_bin (void);

/* $FUSEBOX_BUILD_ROOT/fixtures/NAME; the test fails when it is not built,
 * and is skipped (failed under FUSEBOX_TESTS_MUST_RUN=1) when the
 * program runs outside meson. */
char *test_fixture (const char *name);

/* This program's own path (the run tests run themselves as probes). */
char *test_self (void);

/* ---- directories and files ---- */

/* A new directory under /tmp (g_get_tmp_dir()), PREFIX-XXXXXX. */
char *test_tmpdir (const char *prefix);

/* A new directory, mode 0755, under $FUSEBOX_TEST_TMPDIR or /var/tmp:
 * not /tmp, which the built-in default policy makes private, while a
 * sandbox must see its workspace at the path the host does. */
char *test_workdir (const char *prefix);

/* Remove PATH and everything below it, never crossing into a mount that
 * is still there; a no-op for NULL, "" and "/". */
void test_rm_rf (const char *path);
/* Remove the tree DIR_FD/NAME however deep (test_rm_rf's nftw stops at
 * PATH_MAX), with two descriptors: down by name to a directory with no
 * subdirectory, then up by "..", never into another filesystem. */
void test_rm_deep (int dir_fd, const char *name);

/* A fixture's temporary directory T and the strings it hands out: each
 * lives until test_dir_free(), so that a fixture keeps its paths in plain
 * fields and a test writes them inline, with nothing of its own to free. */
typedef struct
{
  char *path;         /* T */
  GPtrArray *strings; /* what test_dir_keep() took */
} TestDir;

/* A TestDir of PATH (from test_tmpdir() or test_workdir()), which it takes. */
TestDir *test_dir_new (char *path);

/* S, freed with D. */
char *test_dir_keep (TestDir *d, char *s);

/* T + "/" + REL, freed with D. */
char *test_dir_path (TestDir *d, const char *rel);

/* test_dir_path (D, REL), made (with its parents) with MODE. */
char *test_dir_mkdir (TestDir *d, const char *rel, mode_t mode);

/* Free D and every string it took; remove T (test_rm_rf()) when REMOVE. */
void test_dir_free (TestDir *d, bool remove);

/* Write TEXT to PATH (as g_file_set_contents); fails the test on error. */
void test_write_file (const char *path, const char *text);

/* Write CONTENT to PATH with MODE, its parents made 0755. */
void test_write (const char *path, const char *content, mode_t mode);

/* PATH's contents, or NULL when it can't be read. */
char *test_read_file (const char *path);

/* The lines of PATH (without newlines); fails the test when PATH can't be
 * read or does not end in a newline (a torn record). */
GPtrArray *test_read_lines (const char *path);

/* A digest of everything an operation could change under PATH: names,
 * types, modes, owners, sizes, contents, link texts, xattrs and mtimes
 * (not atimes: reads change those).  REL names PATH in the digest.
 * FB_TEST_DUMP_SUM=1 prints what goes in. */
char *test_tree_sum (const char *path, const char *rel);

/* g_ptr_array_sort() comparator for arrays of strings. */
int test_cmp_names (gconstpointer a, gconstpointer b);

/* A stand-in that must exist and be readable on the host before a test
 * shows that the sandbox can't reach it: a denial of something absent
 * proves nothing. */
void test_assert_host_readable (const char *path);

/* A bound AF_UNIX socket at PATH (its descriptor closed). */
void test_make_socket (const char *path);

/* How many entries directory PATH has (fails the test when it can't be
 * read). */
guint test_count_entries (const char *path);

/* TEXT has each of the NULL-terminated fragments; fails the test naming
 * the first it lacks, with TEXT. */
void test_assert_contains (const char *text, ...) G_GNUC_NULL_TERMINATED;

/* PATH's permission bits (mode & 07777, PATH itself when a link); fails
 * the test when PATH is missing. */
mode_t test_mode_of (const char *path);

/* ---- processes ---- */

/* test_bin () and the arguments FIRST... up to NULL, as a NULL-terminated
 * argv (the strings are not copied). */
GPtrArray *test_fusebox_argv_va (const char *first, va_list ap);

/* test_bin (), the arguments of ARGS, then those of EXTRA (both
 * NULL-terminated; EXTRA may be NULL), as a NULL-terminated argv (the
 * strings are not copied). */
GPtrArray *test_fusebox_argv (const char *const *args, const char *const *extra);

/* Run ARGV (searched in PATH) to completion; stdout and stderr kept when
 * asked for.  Returns the exit status, 128+N for a signal. */
int test_run_cmd (const char *const *argv, char **ret_out, char **ret_err);

/* A command run to completion, and how to run it again by hand. */
typedef struct
{
  int status; /* exit status, or 128+N for a signal */
  char *out;
  char *err;
  char *command; /* a shell line that reproduces the run */
} TestCmd;

void test_cmd_clear (TestCmd *cmd);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (TestCmd, test_cmd_clear)

/* ARGV as a shell line that runs it again: "cd CWD && ENV_SHOWN ARGV..."
 * (CWD and ENV_SHOWN may be NULL), each argument quoted. */
char *test_shell_line (const char *cwd, const char *env_shown, char *const *argv);

/* Run ARGV (argv[0] a path) in CWD (NULL: ours) with ENVP (NULL: ours);
 * ENV_SHOWN (or NULL) is what the command line shows of ENVP
 * ("TZ=UTC HOME=/x").  Fails the test when ARGV can't be started. */
void test_cmd_run (TestCmd *ret, const char *cwd, char **envp, const char *env_shown, char **argv);

/* How many descriptors process PID holds. */
guint test_count_fds (pid_t pid);

/* The children of PID (of every thread of it), as pid_t, from /proc; empty
 * when PID is gone. */
GArray *test_proc_children (pid_t pid);

/* What PID's descriptors from FIRST on are ("pipe:[N]", "/dev/null"...),
 * keyed by their numbers as text, from /proc; empty when PID is gone. */
GHashTable *test_proc_fd_targets (pid_t pid, int first);

/* Every process on the host, as pid_t, from /proc (any of them may be gone
 * by the time it is looked at). */
GArray *test_proc_pids (void);

/* Is ARG one of process PID's arguments (argv[0] included)? */
bool test_proc_has_arg (pid_t pid, const char *arg);

/* PATH (no arguments) run on the host as nobody (uid and gid 65534, no
 * supplementary groups: fixtures that refuse to run with capabilities);
 * its stdout.  Fails the test unless it exits 0. */
char *test_run_as_nobody (const char *path);

/* Read FD to EOF. */
char *test_read_all (int fd);

/* One line from FD (without "\n"), byte by byte so that the rest stays in
 * the pipe.  NULL at EOF, or after CAP_MS without a full line (CAP_MS < 0:
 * no bound). */
char *test_read_line (int fd, int cap_ms);

/* SIG to *PID, a child of ours, when there is one (> 0), which is then
 * reaped and forgotten (*PID 0); its wait status, -1 when there was none. */
int test_kill_child (pid_t *pid, int sig);

/* Is PID alive (a zombie is not)? */
bool test_pid_alive (pid_t pid);

/* Is something mounted at PATH (in this mount namespace)? */
bool test_is_mounted (const char *path);

/* Abort the FUSE connection of the mount whose device is DEV, through
 * fusectl (mounted for it if need be): what a test leaves of a FUSE
 * server that waits, or is never answered, so that nothing stays hung. */
void test_fuse_abort (dev_t dev);

/* A thread that exchanges A and B (renameat2 RENAME_EXCHANGE) in a loop,
 * as a sandbox racing a check would, until test_exchanger_stop. */
typedef struct TestExchanger TestExchanger;
TestExchanger *test_exchanger_start (const char *a, const char *b);
void test_exchanger_stop (TestExchanger *x);

/* This process's namespace NAME ("mnt", "pid", ...), as its link reads. */
char *test_own_ns (const char *name);

/* O, what fixtures/fb-smoke reports, shows a process in namespaces of
 * its own: each of "ns" (user, mnt, pid, net, ipc, uts, cgroup) is there
 * and is not this process's, and its /proc is a procfs of its own pid
 * namespace.  WHAT names the process in a failure. */
void test_assert_own_namespaces (JsonObject *o, const char *what);

/* Is any live process on the host in namespace LINK ("pid:[4026532...]")
 * of kind NS?  Proof that a sandbox is gone when none is. */
bool test_ns_has_processes (const char *ns, const char *link);

/* Wait (bounded, in 10 ms steps) for COND: a wait for an event, not a
 * timing assertion; the bound only stops a hung test. */
#define TEST_WAIT_FOR(cond, cap_ms)                                                                                    \
  ({                                                                                                                   \
    bool ok_ = false;                                                                                                  \
    for (int i_ = 0; i_ <= (cap_ms) / 10; i_++)                                                                        \
      {                                                                                                                \
        if (cond)                                                                                                      \
          {                                                                                                            \
            ok_ = true;                                                                                                \
            break;                                                                                                     \
          }                                                                                                            \
        g_usleep (10 * 1000);                                                                                          \
      }                                                                                                                \
    ok_;                                                                                                               \
  })

/* ---- JSON ---- */

/* TEXT as a JSON object (a new reference); fails the test when TEXT is
 * NULL, not UTF-8, not JSON or not an object. */
JsonObject *test_parse_object (const char *text);

/* Each non-empty line of TEXT (JSON Lines: an access log, journalctl -o
 * json) as a JSON object, in order, in an array that owns them; fails the
 * test at a line that is not an object. */
GPtrArray *test_parse_lines (const char *text);

/* MEMBER of O as a string; NULL when absent or null. */
const char *test_json_str (JsonObject *o, const char *member);

/* S as a JSON string literal, quotes included. */
char *test_json_quote (const char *s);

/* ---- cmocka ---- */

/* errno after EXPR (a libc call: < 0 on failure) is EXPECTED (0: success). */
#define assert_errno_is(expr, expected)                                                                                \
  do                                                                                                                   \
    {                                                                                                                  \
      errno = 0;                                                                                                       \
      long r_ = (long)(expr);                                                                                          \
      int e_ = (expected);                                                                                             \
      int got_ = r_ < 0 ? errno : 0;                                                                                   \
      if (got_ != e_)                                                                                                  \
        fail_msg ("%s: got %s, expected %s", #expr, got_ ? g_strerror (got_) : "success",                              \
                  e_ ? g_strerror (e_) : "success");                                                                   \
    }                                                                                                                  \
  while (0)

/* Run the tests named by FB_TEST_ONLY (a glob), or all; ARGV0 names the
 * program in the lines that say how to rerun a failed test. */
void test_filter_tests (const char *argv0);

/* The tests of TESTS (N of them) with FB_TEST_ONLY applied, as
 * cmocka_run_group_tests() runs them. */
int test_run_group (const char *argv0, const struct CMUnitTest *tests, size_t n, CMFixtureFunction group_setup,
                    CMFixtureFunction group_teardown);
#define TEST_RUN_GROUP(tests, group_setup, group_teardown)                                                             \
  test_run_group (argv[0], tests, G_N_ELEMENTS (tests), group_setup, group_teardown)

/* A test written as systemd's TEST(), through a fixture's own macro
 * (RFX_CASE (test_x) { ... } is TEST_CASE (RFx, rfx_run_case, test_x)):
 * defines test_x for cmocka around a body whose FX is the fixture.
 * RUN_CASE (state, "test_x", body) names the test in the fixture, runs the
 * body and marks the test passed when the body returns (a failed check
 * never does), so that teardown prints the repro line only for a failure. */
#define TEST_CASE(Fixture, run_case, name)                                                                             \
  static void name##_body (Fixture *fx);                                                                               \
  static void name (void **state)                                                                                      \
  {                                                                                                                    \
    run_case (state, #name, name##_body);                                                                              \
  }                                                                                                                    \
  static void name##_body (Fixture *fx)

/* The main() of a test program whose main does nothing else, as systemd's
 * DEFINE_TEST_MAIN: its test cases (cmocka_unit_test... entries) and the
 * group's setup and teardown. */
#define TEST_DEFINE_MAIN(group_setup, group_teardown, ...)                                                             \
  int main (int argc, char **argv)                                                                                     \
  {                                                                                                                    \
    const struct CMUnitTest tests_[] = { __VA_ARGS__ };                                                                \
    return test_run_group (argv[0], tests_, G_N_ELEMENTS (tests_), group_setup, group_teardown);                       \
  }
