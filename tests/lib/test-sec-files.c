/* fusebox — tests/lib/test-sec-files.h: stand-in files made and found again. */
#include "tests/lib/test-sec-files.h"

void
test_sec_files_make (const char *dir, const TestSecFile *files, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      g_autofree char *path = g_build_filename (dir, files[i].rel, NULL);

      test_write (path, files[i].contents, 0644);
      test_assert_host_readable (path);
    }
}

const TestSecFile *
test_sec_files_changed (const char *dir, const TestSecFile *files, size_t n, char **ret_path, char **ret_now)
{
  for (size_t i = 0; i < n; i++)
    {
      g_autofree char *path = g_build_filename (dir, files[i].rel, NULL);
      g_autofree char *now = test_read_file (path);

      if (now == NULL || strcmp (now, files[i].contents) != 0)
        {
          *ret_path = g_steal_pointer (&path);
          *ret_now = g_steal_pointer (&now);
          return &files[i];
        }
    }
  return NULL;
}
