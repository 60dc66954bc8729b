/* fusebox — helpers shared by the ipc unit tests: temp directories, events,
 * reading a log file back line by line. */
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

static G_GNUC_UNUSED char *
test_tmpdir (void)
{
  g_autoptr (GError) error = NULL;
  char *dir = g_dir_make_tmp ("fusebox-ipc-XXXXXX", &error);

  assert_non_null (dir);
  return dir;
}

static G_GNUC_UNUSED void
test_rm_rf (const char *path)
{
  g_autofree char *cmd = NULL;

  if (path == NULL || !g_str_has_prefix (path, g_get_tmp_dir ()))
    return;
  cmd = g_strdup_printf ("rm -rf '%s'", path);
  if (system (cmd) != 0)
    fprintf (stderr, "could not remove %s\n", path);
}

/* The lines of a file (without newlines).  Fails the test if the file does
 * not end in a newline. */
static G_GNUC_UNUSED GPtrArray *
test_read_lines (const char *path)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  GPtrArray *lines = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) error = NULL;

  if (!g_file_get_contents (path, &text, &len, &error))
    fail_msg ("reading %s: %s", path, error->message);
  if (len == 0)
    return lines;
  if (text[len - 1] != '\n')
    fail_msg ("%s does not end in a newline (a torn record)", path);
  text[len - 1] = '\0';
  {
    g_auto (GStrv) parts = g_strsplit (text, "\n", -1);

    for (guint i = 0; parts[i] != NULL; i++)
      g_ptr_array_add (lines, g_strdup (parts[i]));
  }
  return lines;
}

/* Parse a line; fail the test when it is not a JSON object. */
static G_GNUC_UNUSED JsonObject *
test_parse_object (const char *line)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  JsonNode *root;

  if (!g_utf8_validate (line, -1, NULL))
    fail_msg ("not UTF-8: %s", line);
  if (!json_parser_load_from_data (parser, line, -1, &error))
    fail_msg ("not JSON (%s): %s", error->message, line);
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    fail_msg ("not a JSON object: %s", line);
  return json_object_ref (json_node_get_object (root));
}

static G_GNUC_UNUSED void
test_write_file (const char *path, const char *text)
{
  g_autoptr (GError) error = NULL;

  if (!g_file_set_contents (path, text, -1, &error))
    fail_msg ("writing %s: %s", path, error->message);
}
