/* fusebox — who runs fusebox in a test: the host's root as the test runs,
 * or a normal user (uid/gid 1000, no groups, hence no capabilities) with a
 * fresh FUSE node of a chosen mode bound over /dev/fuse.  That is the
 * field's usual case (fuse3 packages make /dev/fuse 0666) on a host whose
 * /dev/fuse is 0600.
 *
 * The set-up runs in the spawned child (g_spawn's child_setup), between
 * fork and exec, in a private mount namespace: nothing of it outlives the
 * child. */
#pragma once

#include "tests/lib/test-util.h"

#define TEST_CALLER_UID 1000
#define TEST_CALLER_GID 1000
/* The child's exit status when its set-up failed; stderr names the step. */
#define TEST_CALLER_SETUP_FAILED 99

typedef struct
{
  mode_t fuse_mode; /* 0: the host's /dev/fuse as it is; else a fresh node
                     * (char 10:229) of this mode over it */
  bool drop;        /* to TEST_CALLER_UID/GID with no groups */
  bool root_groups; /* supplementary group 0, as under sudo */
  int stdin_fd;     /* -1: the test's */
  char *devdir;     /* the tmpfs the node is made on */
  char *node;
} TestCaller;

/* The host's root as the test runs; the node's tmpfs goes under DIR
 * (made). */
void test_caller_init (TestCaller *c, const char *dir);
void test_caller_clear (TestCaller *c);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (TestCaller, test_caller_clear)

/* A g_spawn child_setup: DATA is a TestCaller.  Async-signal-safe; a step
 * that fails is named on stderr and the child exits
 * TEST_CALLER_SETUP_FAILED. */
void test_caller_setup (gpointer data);

/* What the caller's set-up does ("unshare -m; a mode 0666 FUSE node
 * ..."); NULL when it does nothing. */
char *test_caller_describe (const TestCaller *c);

/* *LINE, a command that reproduces a run, with what the caller's set-up
 * does after it ("   (as: ...)"), which the command can't show. */
void test_caller_annotate (const TestCaller *c, char **line);

/* ARGV run to completion in CWD with ENVP (NULL: ours) as C: its status
 * (128+N for a signal) and output in *RET (RET->command not set).  Fails
 * the test when ARGV can't be started or the caller's set-up failed. */
void test_caller_run (const TestCaller *c, const char *cwd, char **envp, char **argv, TestCmd *ret);

/* `fusebox check` run in CWD as C (with ENVP, NULL: ours), after PREFIX
 * (an outer sandbox's command, NULL-terminated, or NULL); its exit status
 * and, when RET_OUT is not NULL, its stdout.  Fails the test when the
 * caller's set-up fails. */
int test_caller_check (const TestCaller *c, const char *cwd, char **envp, const char *const *prefix, char **ret_out);

/* Skip the test (fail under FUSEBOX_TESTS_MUST_RUN=1) unless `fusebox
 * check` passes for C: a host may forbid uid 1000 to make user namespaces
 * (Ubuntu's AppArmor restriction, a zero sysctl). */
void test_caller_require_sandboxes (const TestCaller *c, const char *cwd, char **envp);
