/* Adversarial tests: what fusebox refuses on its own, whatever the policy,
 * is refused and logged as fusebox's decision.
 *
 * Through `fusebox mount` (the daemon is root, the policy makes the
 * workspace writable), against a file first proven to exist and be
 * writable on the host: a chown that gives it away, chmod 04755, chmod
 * 02755, chmod 02754 of a set-group-ID file without group-exec (which
 * would turn a harmless mark into a privilege), mknod of a character
 * device, setxattr of security.capability and of trusted.x.  Each answers
 * EPERM, changes nothing on the host, and leaves one record with
 * "decision":"deny", "errno":1, "rule":"fusebox", the refusal's own
 * rule_origin ("fusebox:no-chown", ...) and a why; `fusebox report` counts
 * them as denials grouped by that origin, and `fusebox log --denied` shows
 * them.  A chown that changes nothing still succeeds and is an "allow".
 *
 * Before, each of these read "decision":"allow","errno":1 with the
 * workspace's rule: an auditor took fusebox's refusal for a host error,
 * and `report` and `log --denied` did not count it.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include <sys/xattr.h>

#include "tests/lib/test-mount.h"

#include <json-glib/json-glib.h>
#include <linux/capability.h>
#include <sys/sysmacros.h>

static const char policy_text[] = "{ \"version\": 1,\n"
                                  "  \"rules\": [\n"
                                  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" },\n"
                                  "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"the workspace\" } ] }\n";

typedef struct
{
  const char *op;
  const char *rel; /* under T/h */
  const char *origin;
  guint count;
} Expected;

static const Expected expected[] = {
  { "chown", "/ws/file", "fusebox:no-chown", 1 },
  { "chmod", "/ws/file", "fusebox:no-setid", 2 },
  { "chmod", "/ws/lockmark", "fusebox:no-setid", 1 },
  { "mknod", "/ws/null", "fusebox:no-devices", 1 },
  { "setxattr", "/ws/file", "fusebox:no-privileged-xattrs", 2 },
};

/* The records of the log at PATH, parsed. */
static GPtrArray *
log_records (const char *path)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  GPtrArray *out = g_ptr_array_new_with_free_func ((GDestroyNotify)json_node_unref);

  if (!g_file_get_contents (path, &text, NULL, NULL))
    fail_msg ("no access log at %s", path);
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_autoptr (JsonParser) parser = json_parser_new ();
      if (lines[i][0] == '\0')
        continue;
      if (!json_parser_load_from_data (parser, lines[i], -1, NULL))
        fail_msg ("line %u of %s is not JSON: %s", i + 1, path, lines[i]);
      g_ptr_array_add (out, json_node_ref (json_parser_get_root (parser)));
    }
  return out;
}

static const char *
member_str (JsonObject *o, const char *name)
{
  JsonNode *n = json_object_get_member (o, name);

  return n != NULL && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING
           ? json_node_get_string (n)
           : NULL;
}

static gint64
member_int (JsonObject *o, const char *name)
{
  JsonNode *n = json_object_get_member (o, name);

  return n != NULL && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_INT64 ? json_node_get_int (n)
                                                                                                : -1;
}

/* How many records of OP on PATH have DECISION, ERRNO and (unless NULL)
 * rule "fusebox" with ORIGIN and a why. */
static guint
count_records (GPtrArray *records, const char *op, const char *path, const char *decision, gint64 err,
               const char *origin)
{
  guint n = 0;

  for (guint i = 0; i < records->len; i++)
    {
      JsonObject *o = json_node_get_object (records->pdata[i]);
      if (g_strcmp0 (member_str (o, "op"), op) != 0 || g_strcmp0 (member_str (o, "path"), path) != 0 ||
          g_strcmp0 (member_str (o, "decision"), decision) != 0 || member_int (o, "errno") != err)
        continue;
      if (origin != NULL && (g_strcmp0 (member_str (o, "rule"), "fusebox") != 0 ||
                             g_strcmp0 (member_str (o, "rule_origin"), origin) != 0 || member_str (o, "why") == NULL ||
                             member_str (o, "why")[0] == '\0'))
        continue;
      n++;
    }
  return n;
}

MFX_CASE (test_refusals_are_fusebox_decisions)
{
  const char *h_file = mfx_on_host (fx, "/ws/file");
  const char *h_lock = mfx_on_host (fx, "/ws/lockmark");
  const char *m_file = mfx_in_mount (fx, "/ws/file");
  const char *m_lock = mfx_in_mount (fx, "/ws/lockmark");

  mfx_write (fx, "/ws/file", "workspace file\n");
  mfx_write (fx, "/ws/lockmark", "a set-group-ID file without group-exec\n");
  assert_int_equal (chmod (h_lock, 02644), 0);
  mfx_assert_host_readable (fx, "/ws/file");
  assert_int_equal (access (h_file, W_OK), 0);
  assert_int_equal (test_mode_of (h_lock), 02644);
  mfx_mount (fx, policy_text, NULL);

  g_autofree char *before = mfx_sum (fx, "");
  assert_errno_is (chown (m_file, 1234, 1234), EPERM);
  assert_errno_is (chmod (m_file, 04755), EPERM);
  assert_errno_is (chmod (m_file, 02755), EPERM);
  assert_errno_is (chmod (m_lock, 02754), EPERM);
  assert_errno_is (mknod (mfx_in_mount (fx, "/ws/null"), S_IFCHR | 0666, makedev (1, 3)), EPERM);
  {
    struct vfs_cap_data cap = { 0 };
    cap.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE;
    cap.data[0].permitted = 1u << CAP_NET_RAW;
    assert_errno_is (setxattr (m_file, "security.capability", &cap, XATTR_CAPS_SZ_2, 0), EPERM);
  }
  assert_errno_is (setxattr (m_file, "trusted.x", "1", 1, 0), EPERM);
  g_autofree char *after = mfx_sum (fx, "");
  assert_string_equal (before, after);
  /* what the view lets through: a chown to the owner it has, and a chmod
   * that keeps the set-group-ID mark harmless */
  assert_int_equal (chown (m_file, 0, 0), 0);
  assert_int_equal (chmod (m_lock, 02640), 0);
  mfx_unmount (fx);

  g_autoptr (GPtrArray) records = log_records (fx->log_path);
  for (guint i = 0; i < G_N_ELEMENTS (expected); i++)
    {
      const char *path = mfx_on_host (fx, expected[i].rel);
      guint want = expected[i].count;
      guint got = count_records (records, expected[i].op, path, "deny", EPERM, expected[i].origin);
      if (got != want)
        {
          g_autofree char *log = mfx_log (fx);
          fail_msg ("%u records of %s %s as deny/EPERM/rule fusebox/%s with a why, not %u; the log:\n%s", got,
                    expected[i].op, path, expected[i].origin, want, log);
        }
    }
  /* nothing of these reads as an allowed access that failed on the host */
  for (guint i = 0; i < records->len; i++)
    {
      JsonObject *o = json_node_get_object (records->pdata[i]);
      if (member_int (o, "errno") == EPERM && g_strcmp0 (member_str (o, "decision"), "allow") == 0)
        fail_msg ("a refusal still logged as allowed: %s %s", member_str (o, "op"), member_str (o, "path"));
    }
  assert_int_equal (count_records (records, "chown", h_file, "allow", 0, NULL), 1);

  /* report counts them as denials, one group per refusal */
  {
    const char *argv[] = { test_bin (), "report", "--json", fx->log_path, NULL };
    g_autofree char *out = NULL, *err = NULL;
    g_autoptr (JsonParser) parser = json_parser_new ();
    JsonObject *o, *totals;
    JsonArray *groups;
    guint fusebox_groups = 0;

    assert_int_equal (test_run_cmd (argv, &out, &err), 0);
    if (!json_parser_load_from_data (parser, out, -1, NULL))
      fail_msg ("fusebox report --json %s is not JSON:\n%s%s", fx->log_path, out, err);
    o = json_node_get_object (json_parser_get_root (parser));
    totals = json_object_get_object_member (o, "totals");
    assert_int_equal (json_object_get_int_member (totals, "denied"), 7);
    groups = json_object_get_array_member (json_object_get_object_member (o, "denials"), "by_rule");
    for (guint i = 0; i < json_array_get_length (groups); i++)
      {
        JsonObject *g = json_array_get_object_element (groups, i);
        if (g_strcmp0 (member_str (g, "rule"), "fusebox") == 0)
          fusebox_groups++;
      }
    assert_int_equal (fusebox_groups, 4);
  }
  /* and `log --denied` shows them, with their origin */
  {
    const char *argv[] = { test_bin (), "log", "--denied", "--json", fx->log_path, NULL };
    g_autofree char *out = NULL, *err = NULL;
    guint lines = 0;

    assert_int_equal (test_run_cmd (argv, &out, &err), 0);
    for (const char *p = out; (p = strstr (p, "\"rule_origin\":\"fusebox:")) != NULL; p++)
      lines++;
    if (lines != 7)
      fail_msg ("fusebox log --denied --json %s shows %u of the 7 refusals:\n%s%s", fx->log_path, lines, out, err);
  }
}

MFX_DEFINE_MAIN (MFX_TEST (test_refusals_are_fusebox_decisions))
