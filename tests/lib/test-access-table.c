/* fusebox — the access table's tree and policy (tests/lib/test-access-table.h). */
#include "tests/lib/test-access-table.h"

#include <sys/xattr.h>

const char *const test_access_names[TEST_ACCESS_N] = { "write", "read", "deny", "hide" };

char *
test_access_table_policy (const char *protected_names)
{
  static const char *const objs[][2] = { { "f", "file" }, { "s", "dir" }, { "l", "link" }, { "new", "new" } };
  GString *s = g_string_new (NULL);

  g_string_append_printf (s,
                          "{ \"version\": 1,\n"
                          "  \"protected_names\": { %s },\n"
                          "  \"rules\": [\n"
                          "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
                          "  { \"path\": \"@H@/t\", \"access\": \"write\", \"why\": \"table\" }",
                          protected_names);
  for (guint i = 0; i < TEST_ACCESS_N; i++)
    for (guint j = 0; j < G_N_ELEMENTS (objs); j++)
      g_string_append_printf (s, ",\n  { \"path\": \"@H@/t/%s/%s\", \"access\": \"%s\", \"why\": \"%s %s\" }",
                              test_access_names[i], objs[j][0], test_access_names[i], test_access_names[i], objs[j][1]);
  g_string_append (s, " ] }\n");
  return g_string_free (s, FALSE);
}

void
test_access_table_make (const char *t)
{
  g_autofree char *zone = g_build_filename (t, "zone", "x", NULL);

  test_rm_rf (t);
  for (guint i = 0; i < TEST_ACCESS_N; i++)
    {
      g_autofree char *f = g_build_filename (t, test_access_names[i], "f", NULL);
      g_autofree char *s = g_build_filename (t, test_access_names[i], "s", NULL);
      g_autofree char *l = g_build_filename (t, test_access_names[i], "l", NULL);

      test_write (f, "the file's data\n", 0644);
      assert_int_equal (g_mkdir_with_parents (s, 0755), 0);
      assert_int_equal (symlink ("f", l), 0);
      assert_int_equal (setxattr (f, "user.t", "v", 1, 0), 0);
    }
  test_write (zone, "zone data\n", 0644);
}
