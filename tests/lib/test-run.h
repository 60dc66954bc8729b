/* fusebox — the fixture of the tests that run the real `fusebox run`.
 *
 * Each test works in its own directory T (test_workdir(): under
 * $FUSEBOX_TEST_TMPDIR or /var/tmp, not /tmp: the built-in default makes
 * /tmp private, and a test needs its files at the same path on the host
 * and in the view): the workspace T/ws, a stand-in HOME T/home,
 * XDG_STATE_HOME T/state.  `fusebox run` is the real binary ($FUSEBOX_BIN),
 * started with cwd T/ws and that environment.  Everything a test makes
 * outside T (stand-ins in /home or /dev/shm, SysV segments, host
 * processes, sandboxes still running) is registered and removed in
 * teardown, even when an assertion failed; a failed test prints a command
 * that reproduces the failing run.
 *
 * Probes: the test programs run themselves inside the sandbox
 * (`TEST --probe ...`, see test_self()): their build path is visible under
 * every policy the tests use, and C gives the exact errno of each attempt.
 */
#pragma once

#include "tests/lib/test-util.h"

typedef struct
{
  TestDir *dir;     /* T, and the paths below it that the fixture hands out */
  char *tmp;        /* T */
  char *ws;         /* T/ws: the workspace and the working directory */
  char *home;       /* T/home: HOME for fusebox run */
  char *state;      /* T/state: XDG_STATE_HOME (a test may replace it: g_free, then a new string) */
  char *runs;       /* T/state/fusebox/runs */
  char *repro;      /* the last fusebox command, for the repro line */
  bool xdg_default; /* leave XDG_STATE_HOME unset: runs under T/home/.local/state */
  const char *test_name;
  bool passed;
  GPtrArray *remove_paths; /* char*: stand-ins outside T */
  GArray *shm_ids;         /* int: SysV segments to remove */
  GArray *pids;            /* pid_t: host processes to kill and reap (0: reaped) */
} RFx;

/* Exit 77 (skip) when the host can't run `fusebox run` (no root for the
 * stand-ins in /home and other ids, or a kernel feature missing), unless
 * CI insists.  When the host has everything, `fusebox check` must pass:
 * its failure is then fusebox's own (a broken lock-down, say), and the
 * test fails instead of hiding it behind a skip. */
void rfx_require (void);

RFx *rfx_new (void);
void rfx_free (RFx *fx);
void rfx_keep_path (RFx *fx, const char *path);
void rfx_keep_shm (RFx *fx, int id);
void rfx_keep_pid (RFx *fx, pid_t pid);
/* Forget PID (reaped by the caller). */
void rfx_forget_pid (RFx *fx, pid_t pid);

/* cmocka setup and teardown: *state is an RFx.  A test is an RFX_CASE
 * (below), or opens with RFX_BEGIN (state) and ends with RFX_PASS () (what
 * a test that marks a skip as passed needs), so that teardown knows
 * whether to print the repro line. */
int rfx_setup (void **state);
int rfx_teardown (void **state);

#define RFX_BEGIN(state)                                                                                               \
  RFx *fx = *(state);                                                                                                  \
  fx->test_name = __func__
#define RFX_PASS() (fx->passed = true)
#define RFX_TEST(f) cmocka_unit_test_setup_teardown (f, rfx_setup, rfx_teardown)

/* A test as TEST_CASE (test-util.h) with FX an RFx: no RFX_BEGIN, RFX_PASS. */
void rfx_run_case (void **state, const char *name, void (*body) (RFx *fx));
#define RFX_CASE(name) TEST_CASE (RFx, rfx_run_case, name)

/* main() of a run test program: `PROG --probe ARGS...` runs PROBE_MAIN
 * (when not NULL) inside the sandbox; otherwise rfx_require() and the N
 * TESTS, with FB_TEST_ONLY applied. */
int rfx_main (int argc, char **argv, int (*probe_main) (int argc, char **argv), const struct CMUnitTest *tests,
              size_t n, CMFixtureFunction group_setup);
#define RFX_MAIN(probe_main, tests, group_setup)                                                                       \
  rfx_main (argc, argv, probe_main, tests, G_N_ELEMENTS (tests), group_setup)

/* That main(), defined: its test cases (RFX_TEST entries) after PROBE_MAIN
 * and GROUP_SETUP. */
#define RFX_DEFINE_MAIN(probe_main, group_setup, ...)                                                                  \
  int main (int argc, char **argv)                                                                                     \
  {                                                                                                                    \
    const struct CMUnitTest tests_[] = { __VA_ARGS__ };                                                                \
    return RFX_MAIN (probe_main, tests_, group_setup);                                                                 \
  }

/* The same for a probe of operations: PROBE_OP (an RfxProbeOp) run by
 * rfx_probe_main(). */
#define RFX_DEFINE_PROBE_MAIN(probe_op, group_setup, ...)                                                              \
  static int probe_main_ (int argc, char **argv)                                                                       \
  {                                                                                                                    \
    return rfx_probe_main (argc, argv, probe_op);                                                                      \
  }                                                                                                                    \
  RFX_DEFINE_MAIN (probe_main_, group_setup, __VA_ARGS__)

/* T/policy.json: the host's / readable, T/ws writable; its path. */
char *rfx_policy_ws (RFx *fx);

/* T/ws/credentials.txt, a stand-in secret, made and proven readable on the
 * host first (its denial in the sandbox must prove something); its path. */
char *rfx_stand_in_secret (RFx *fx);

/* T/NAME: the host's / readable (rule 0), T/ws writable (rule 1), SECRET
 * denied "credentials stay on the host" (rule 2); EXTRA (or NULL), members
 * of the policy's object with their commas, comes first.  Its path. */
char *rfx_policy_deny (RFx *fx, const char *name, const char *secret, const char *extra);

/* The environment fusebox runs with: the caller's, HOME and XDG_STATE_HOME
 * in T. */
char **rfx_env (RFx *fx);

/* ARGV, shell-quoted, as the command the repro line prints. */
void rfx_set_repro (RFx *fx, char **argv);

/* fusebox run --read $FUSEBOX_BUILD_ROOT FIRST... (NULL-terminated): the
 * fixtures and the probes (this program) live in the build tree, which a
 * policy may hide or make private (a build under /tmp, /home). */
GPtrArray *rfx_argv_va (const char *first, va_list ap);

/* status, out, err (and command) */
typedef TestCmd RfxResult;

void rfx_result_clear (RfxResult *r);

/* `fusebox run ARGS...` (NULL-terminated) to completion, stdout and
 * stderr captured. */
void rfx_run_argv (RFx *fx, RfxResult *ret, char **argv);
void rfx_run (RFx *fx, RfxResult *ret, const char *first, ...) G_GNUC_NULL_TERMINATED;

/* `fusebox ARGS...` (any command, FIRST its name) the same way. */
void rfx_fusebox (RFx *fx, RfxResult *ret, const char *first, ...) G_GNUC_NULL_TERMINATED;

/* `fusebox run ARGS...` in the background with stdout on a pipe;
 * registered for teardown.  Returns the supervisor's pid. */
pid_t rfx_start (RFx *fx, int *ret_stdout, const char *first, ...) G_GNUC_NULL_TERMINATED;

/* Wait for PID (ours) with a generous cap: a hung run fails the test
 * instead of hanging it.  This bounds a wait for an event; it asserts no
 * timing.  Returns the exit status (128+N for a signal), -1 on timeout. */
int rfx_wait (RFx *fx, pid_t pid, int cap_ms);

/* ---- the probe side (inside the sandbox) ---- */

/* One operation of a probe: OP with its arguments ARGS[0..2] ("" past the
 * end of the command line) gives the line it prints, sets *RET_WORDS to
 * the words of the command line it took (OP included) and may leave what
 * it allocated in *RET_OWNED (freed once printed).  NULL: no such OP. */
typedef const char *(*RfxProbeOp) (const char *op, const char *const *args, int *ret_words, char **ret_owned);

/* A probe's main(): ARGV is OP ARGS... OP ARGS...; one line per operation,
 * flushed at once (a test may read them as they come); exit 2 at an
 * unknown operation.  Every probe knows "read PATH" (rfx_read_res); OP
 * gives the rest. */
int rfx_probe_main (int argc, char **argv, RfxProbeOp op);

/* errno E's name ("EACCES"). */
const char *rfx_errname (int e);

/* Result of a probe: "OK" or the errno name. */
const char *rfx_res (long r);

/* PATH opened at DIRFD (AT_FDCWD: as a path) with FLAGS | O_CLOEXEC (mode
 * 0644 when it creates) and closed again: "OK" or the open's errno name. */
const char *rfx_open_res (int dirfd, const char *path, int flags);

/* PATH opened for reading and its first byte read: "OK" or the errno name
 * of the open or of the read. */
const char *rfx_read_res (const char *path);
