/* fusebox — helpers shared by the ipc unit tests: rules and events to log
 * (temp directories, files and logs: tests/lib). */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "ipc/ipc-private.h"
#include "ipc/ipc.h"
#include "tests/lib/test-log.h"
#include "tests/lib/test-util.h"

static G_GNUC_UNUSED const FbPolicyRule test_rule_write = {
  .kind = FB_POLICY_RULE_PATH,
  .index = 3,
  .origin = "test.json:4:5",
  .path = "/work",
  .access = FB_POLICY_ACCESS_WRITE,
  .why = "the workspace is writable",
};

static G_GNUC_UNUSED const FbPolicyRule test_rule_deny = {
  .kind = FB_POLICY_RULE_GLOB,
  .index = 7,
  .origin = "test.json:9:5",
  .glob = "*.pem",
  .access = FB_POLICY_ACCESS_DENY,
  .why = "keys are off limits",
};

static G_GNUC_UNUSED const FbPolicyRule test_rule_protected = {
  .kind = FB_POLICY_RULE_PROTECTED,
  .index = -1,
  .origin = "protected_names[.git]",
  .glob = ".git",
  .access = FB_POLICY_ACCESS_HIDE,
  .why = "repository metadata is protected",
};

static G_GNUC_UNUSED const FbPolicyRule test_rule_default = {
  .kind = FB_POLICY_RULE_DEFAULT,
  .index = -1,
  .origin = "default",
  .access = FB_POLICY_ACCESS_HIDE,
  .why = "no rule matched",
};

static G_GNUC_UNUSED FbAccessEvent
test_event (const char *op_name, const char *path)
{
  FbOp op = FB_OP_LOOKUP;
  FbAccessEvent e;

  if (!fb_op_from_string (op_name, &op))
    fail_msg ("no operation is called %s (fs/fs-event.c)", op_name);
  e = (FbAccessEvent){
    .ts_us = 1714564800123456, /* 2024-05-01T12:00:00.123456Z */
    .pid = 4242,
    .uid = 1000,
    .comm = "tester",
    .op = op,
    .path = path,
    .access = "read",
    .decision = FB_DECISION_ALLOW,
    .rule = &test_rule_write,
    .bytes_read = -1,
    .bytes_written = -1,
  };
  return e;
}

/* Push N "open" events of the paths PREFIX0, PREFIX1, ... to SINK; with
 * LOG (SINK's), the number of pushes that returned before LOG counted
 * their record. */
static G_GNUC_UNUSED guint
test_push_paths (FbAccessSink *sink, const char *prefix, guint n, FbAccessLog *log)
{
  guint late = 0;

  for (guint i = 0; i < n; i++)
    {
      g_autofree char *path = g_strdup_printf ("%s%u", prefix, i);
      FbAccessEvent e = test_event ("open", path);

      fb_access_sink_push (sink, &e);
      if (log != NULL && fb_access_log_get_count (log) < i + 1)
        late++;
    }
  return late;
}

/* LINES (a log's) are N records, seq gap-free from 1, of the paths
 * PREFIX0, PREFIX1, ... in order. */
static G_GNUC_UNUSED void
test_assert_seq_paths (GPtrArray *lines, guint n, const char *prefix)
{
  assert_int_equal (lines->len, n);
  for (guint i = 0; i < lines->len; i++)
    {
      g_autoptr (JsonObject) o = test_parse_object (lines->pdata[i]);
      g_autofree char *expect = g_strdup_printf ("%s%u", prefix, i);
      const char *path = json_object_get_string_member_with_default (o, "path", NULL);

      assert_int_equal (json_object_get_int_member (o, "seq"), i + 1);
      if (g_strcmp0 (path, expect) != 0)
        fail_msg ("record %u has path %s, expected %s", i + 1, path != NULL ? path : "(none)", expect);
    }
}

/* Close LOG (failing the test on an error) and free it. */
static G_GNUC_UNUSED void
test_close_log (FbAccessLog *log)
{
  g_autoptr (GError) error = NULL;

  if (!fb_access_log_close (log, &error))
    fail_msg ("fb_access_log_close: %s", error->message);
  fb_access_log_free (log);
}
