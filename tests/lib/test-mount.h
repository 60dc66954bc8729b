/* fusebox — the fixture of the tests that mount the real `fusebox mount`:
 * a temp directory per test with a host tree (T/h), a policy file, a mount
 * point (T/mnt) and the real binary mounted there; teardown unmounts
 * (fusermount3 -u, then umount -l as a last resort) and kills the daemon
 * even when the test failed, and prints a command that reproduces it.
 *
 * Paths: the mount shows the host's / at T/mnt, so the host's T/h/x is
 * T/mnt/T/h/x inside the mount; mfx_m() builds those.  The policy template
 * uses @H@ for T/h. */
#pragma once

#include "tests/lib/test-util.h"

typedef struct
{
  TestDir *dir; /* T, and the paths below it that the fixture hands out */
  char *tmp;    /* T */
  char *host;   /* T/h: the host tree under test */
  char *mnt;    /* T/mnt */
  char *policy_path;
  char *log_path;
  char *state_dir; /* XDG_STATE_HOME for the run directories */
  pid_t daemon;
  bool mounted;
  const char *test_name;
  char *mount_args; /* for the repro line */
} MFx;

/* Exit 77 (skip) when FUSE can't be used here, unless CI insists. */
void mfx_require (void);

MFx *mfx_new (const char *test_name);

/* Unmount (when mounted) and remove T unless FAILED; the repro line when
 * FAILED. */
void mfx_free (MFx *fx, bool failed);

/* T/h + REL */
char *mfx_h (MFx *fx, const char *rel);

/* The same object through the mount: T/mnt + T/h + REL */
char *mfx_m (MFx *fx, const char *rel);

/* mfx_h () and mfx_m (), freed with the fixture: for a path written where
 * it is used. */
const char *mfx_on_host (MFx *fx, const char *rel);
const char *mfx_in_mount (MFx *fx, const char *rel);

/* Write CONTENT to T/h + REL (parents made 0755). */
void mfx_write (MFx *fx, const char *rel, const char *content);

/* mkdir -p T/h + REL */
void mfx_mkdir (MFx *fx, const char *rel);

/* test_assert_host_readable() of T/h + REL */
void mfx_assert_host_readable (MFx *fx, const char *rel);

/* test_tree_sum() of the host tree T/h + REL. */
char *mfx_sum (MFx *fx, const char *rel);

/* Write the policy (TEMPLATE with @H@ = T/h) and mount; extra arguments
 * (NULL-terminated) go before the mount point. */
void mfx_mount (MFx *fx, const char *template, ...) G_GNUC_NULL_TERMINATED;

/* Unmount, and make sure that the daemon ends. */
void mfx_unmount (MFx *fx);

/* SIG to the daemon, then wait until it has ended; fails the test when it
 * lives on (the wait is bounded only so that a hung daemon fails). */
void mfx_kill_daemon (MFx *fx, int sig);

/* Wait until the mount is gone; fails the test when it stays. */
void mfx_wait_unmounted (MFx *fx);

/* The whole log as text (after unmount it is complete). */
char *mfx_log (MFx *fx);

/* cmocka: setup makes the fixture, teardown always unmounts and cleans up.
 * A test is an MFX_CASE (below), or opens with MFX_BEGIN (state) and marks
 * success with MFX_PASS () (what a test that marks a skip as passed needs),
 * so teardown knows whether to print the repro line. */
typedef struct
{
  MFx *fx;
  bool passed;
} MState;

int mfx_setup (void **state);
int mfx_teardown (void **state);

#define MFX_BEGIN(state)                                                                                               \
  MState *ms_ = *(state);                                                                                              \
  MFx *fx = ms_->fx;                                                                                                   \
  fx->test_name = __func__
#define MFX_PASS() (ms_->passed = true)
#define MFX_TEST(f) cmocka_unit_test_setup_teardown (f, mfx_setup, mfx_teardown)

/* A test as TEST_CASE (test-util.h) with FX an MFx: no MFX_BEGIN, MFX_PASS. */
void mfx_run_case (void **state, const char *name, void (*body) (MFx *fx));
#define MFX_CASE(name) TEST_CASE (MFx, mfx_run_case, name)

/* main() of a mount test program: mfx_require() and the N TESTS, with
 * FB_TEST_ONLY applied. */
int mfx_main (int argc, char **argv, const struct CMUnitTest *tests, size_t n);
#define MFX_MAIN(tests) mfx_main (argc, argv, tests, G_N_ELEMENTS (tests))

/* That main(), defined: its test cases (MFX_TEST entries). */
#define MFX_DEFINE_MAIN(...)                                                                                           \
  int main (int argc, char **argv)                                                                                     \
  {                                                                                                                    \
    const struct CMUnitTest tests_[] = { __VA_ARGS__ };                                                                \
    return MFX_MAIN (tests_);                                                                                          \
  }
