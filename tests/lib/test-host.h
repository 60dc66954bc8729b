/* fusebox — what this host offers the tests, asked before a test relies on it.
 *
 * A test that needs a host feature asks test_host_lacks() first and, when
 * the answer is not NULL, says what the host lacks.  Whether it then skips,
 * fails or shows the same thing another way depends on who needs the
 * feature: a feature fusebox itself needs fails under
 * FUSEBOX_TESTS_MUST_RUN=1; one only the test needs (to reach a kernel path
 * the sandbox closes) never does.  test_skip_or_fail() and test_skip_test()
 * keep that rule in one place.
 *
 * The seam: FUSEBOX_TEST_HOST_LACKS, a comma-separated list of feature
 * names, makes the host look as if it lacked them, so the branch a test
 * takes on such a host runs on this one too.
 *
 * Features:
 *   x86-64  the CPU and kernel run x86-64 code (the x32 ABI's syscall
 *           numbers reach seccomp on every x86-64 kernel, whether or not
 *           it was built with CONFIG_X86_X32_ABI).
 *   ia32    32-bit syscall emulation: `int 0x80` reaches the kernel's i386
 *           syscall table.  A kernel built without CONFIG_IA32_EMULATION, or
 *           booted with ia32_emulation=0, turns `int 0x80` into a fault
 *           (SIGSEGV) before seccomp sees it.  fusebox does not need it: such
 *           a host has no i386 ABI to filter.
 *   root    the tests run as root (stand-ins in /home, other users' ids,
 *           allow_other mounts).
 *   fuse    /dev/fuse opens for reading and writing.
 *   sandbox what a sandbox needs, probed without fusebox in a forked
 *           child: a user namespace with our ids mapped, a mount namespace
 *           with a tmpfs, a pid namespace whose pid 1 mounts a fresh
 *           procfs, a FUSE mount of /dev/fuse and a seccomp filter.  The
 *           answer names the step that failed and its errno.  `fusebox
 *           check` can't decide this: a broken fusebox fails its own check
 *           too.
 */
#pragma once

#include <stdbool.h>

#include <glib.h>

/* Is FEATURE named in FUSEBOX_TEST_HOST_LACKS? */
bool test_host_pretends_lack (const char *feature);

/* Does `int 0x80` run i386 getpid here?  Asked in a child with no filter:
 * without ia32 emulation the child dies of SIGSEGV (no core: RLIMIT_CORE 0,
 * so nothing is left on the host).  The child does only async-signal-safe
 * work, so this is safe in a program that already runs threads. */
bool test_host_probe_ia32 (void);

/* NULL when the host has FEATURE; else a sentence naming what it lacks.
 * Each probe runs once per process.  A feature this file does not know is
 * a bug in the test: abort(). */
const char *test_host_lacks (const char *feature);

/* Is this a run that must not skip (FUSEBOX_TESTS_MUST_RUN=1, as in CI)? */
bool test_must_run (void);

/* The whole program can't run here for want of something fusebox needs:
 * exit 77 (skip) saying WHY, or exit 1 under FUSEBOX_TESTS_MUST_RUN=1. */
G_NORETURN void test_skip_or_fail (const char *why);

/* test_skip_or_fail() unless the host has FEATURE; FOR_WHAT says what
 * needs it ("these tests mount"). */
void test_host_require (const char *feature, const char *for_what);

/* This test case can't run here (cmocka skip(), so it never returns):
 * "skipped: <message>" on stderr.  Under FUSEBOX_TESTS_MUST_RUN=1 it fails
 * instead when FUSEBOX_NEEDS_IT; what only the test needs (root to act as
 * another user on the host, a kernel feature the sandbox closes anyway)
 * skips there too. */
void test_skip_test (bool fusebox_needs_it, const char *format, ...) G_GNUC_PRINTF (2, 3);
