/* fusebox — the access event's vocabulary (fs-event.c): every decision and
 * operation has a unique name that reads back to it, and the columns say
 * what the log, the report and the remote API make of each. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fs/fs-event.h"
#include "tests/unit/test-table-util.h"
#include "tests/lib/test-util.h"

/* A: names round trip, for every row and nothing else. */
static void
test_decision_names (void **state)
{
  assert_string_table (fb_decision, FbDecision, fb_decision_table, FB_DECISION_N);
  /* the levels' names (fusebox(1), --log-level) */
  for (guint i = 0; i <= FB_LOG_LEVEL_ALL; i++)
    {
      static const char *const names[] = { "mutations", "opens", "all" };
      FbLogLevel level;

      assert_string_equal (fb_log_level_to_string ((FbLogLevel)i), names[i]);
      assert_true (fb_log_level_from_string (names[i], &level));
      assert_int_equal (level, i);
    }
  assert_false (fb_log_level_from_string ("everything", NULL));
  /* the log's strings (fusebox(1), ACCESS LOG) */
  assert_string_equal (fb_decision_to_string (FB_DECISION_ALLOW), "allow");
  assert_string_equal (fb_decision_to_string (FB_DECISION_DENY), "deny");
  assert_string_equal (fb_decision_to_string (FB_DECISION_HIDE), "hide");
  assert_string_equal (fb_decision_to_string (FB_DECISION_READONLY), "readonly");
}

/* B: a refusal has an errno of its own; the caller is told of a refusal
 * unless it is a hide (which would say the name exists); a record read
 * back is a refusal unless it names allow. */
static void
test_decision_columns (void **state)
{
  FbAccessEvent e = { .err = EACCES };

  for (guint i = 0; i < FB_DECISION_N; i++)
    {
      const FbDecisionInfo *d = &fb_decision_table[i];

      assert_int_equal (d->refusal, d->err != 0);
      if (d->told)
        assert_true (d->refusal);
      for (guint j = 0; j < i; j++)
        assert_int_not_equal (d->err, fb_decision_table[j].err);
      assert_int_equal (fb_decision_name_is_refusal (d->name), d->refusal);
      e.decision = (FbDecision)i;
      assert_int_equal (fb_access_event_is_told_denial (&e), d->told);
    }
  assert_int_equal (fb_decision_info (FB_DECISION_DENY)->err, EACCES);
  assert_int_equal (fb_decision_info (FB_DECISION_HIDE)->err, ENOENT);
  assert_int_equal (fb_decision_info (FB_DECISION_READONLY)->err, EROFS);
  assert_false (fb_decision_info (FB_DECISION_ALLOW)->refusal);
  assert_true (fb_decision_info (FB_DECISION_HIDE)->refusal);
  assert_false (fb_decision_info (FB_DECISION_HIDE)->told);
  assert_true (fb_decision_info (FB_DECISION_DENY)->told);
  assert_true (fb_decision_info (FB_DECISION_READONLY)->told);
  /* a refusal that did not fail the access (none today) is not told */
  e.decision = FB_DECISION_DENY;
  e.err = 0;
  assert_false (fb_access_event_is_told_denial (&e));
  /* what a record may hold that no decision names */
  assert_true (fb_decision_name_is_refusal (NULL));
  assert_true (fb_decision_name_is_refusal ("?"));
  assert_true (fb_decision_name_is_refusal ("Allow"));
}

/* C: operations: unique names that read back; an allowed one is logged
 * at the level fusebox(1) names for it (mutations: changes; opens: + open
 * and close; all: + lookups, metadata and listings). */
static void
test_op_names (void **state)
{
  static const char *const observe[] = { "lookup", "getattr", "access",   "readlink",
                                         "statfs", "readdir", "getxattr", "listxattr" };

  assert_string_table (fb_op, FbOp, fb_op_table, FB_OP_N);
  assert_false (fb_op_from_string ("write", NULL));
  assert_false (fb_op_from_string (NULL, NULL));

  for (guint i = 0; i < FB_OP_N; i++)
    {
      FbLogLevel want = FB_LOG_LEVEL_MUTATIONS;

      for (guint j = 0; j < G_N_ELEMENTS (observe); j++)
        if (strcmp (fb_op_table[i].name, observe[j]) == 0)
          want = FB_LOG_LEVEL_ALL;
      if (i == FB_OP_OPEN || i == FB_OP_CLOSE)
        want = FB_LOG_LEVEL_OPENS;
      assert_int_equal (fb_op_level ((FbOp)i), want);
    }
}

/* D: what was asked: unique names that read back, each the log's string
 * (fusebox(1), ACCESS LOG), which readers of old logs still match. */
static void
test_access_names (void **state)
{
  static const char *const names[FB_ACCESS_N] = {
    [FB_ACCESS_STAT] = "stat",           [FB_ACCESS_READ] = "read",     [FB_ACCESS_WRITE] = "write",
    [FB_ACCESS_READWRITE] = "readwrite", [FB_ACCESS_EXEC] = "exec",     [FB_ACCESS_LIST] = "list",
    [FB_ACCESS_CREATE] = "create",       [FB_ACCESS_DELETE] = "delete", [FB_ACCESS_CONNECT] = "connect",
  };

  assert_string_table (fb_access, FbAccess, fb_access_table, FB_ACCESS_N);
  for (guint i = 0; i < FB_ACCESS_N; i++)
    assert_string_equal (fb_access_to_string ((FbAccess)i), names[i]);
}

/* What a report makes of each access (ipc-report.c): which change a file
 * or a name, and which a handle opened for counts as a read or a write. */
static void
test_access_columns (void **state)
{
  for (guint i = 0; i < FB_ACCESS_N; i++)
    {
      FbAccess a = (FbAccess)i;
      const FbAccessInfo *ai = &fb_access_table[a];

      assert_int_equal (ai->changes, a == FB_ACCESS_WRITE || a == FB_ACCESS_READWRITE || a == FB_ACCESS_CREATE ||
                                       a == FB_ACCESS_DELETE);
      assert_int_equal (ai->handle_reads, a == FB_ACCESS_READ || a == FB_ACCESS_EXEC);
      assert_int_equal (ai->handle_writes, a == FB_ACCESS_WRITE);
    }
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_decision_names), cmocka_unit_test (test_decision_columns),
                  cmocka_unit_test (test_op_names), cmocka_unit_test (test_access_names),
                  cmocka_unit_test (test_access_columns))
