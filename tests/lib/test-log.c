/* fusebox — the log readers of tests/lib/test-log.h. */
#include "tests/lib/test-log.h"

void
test_log_read (const char *run_dir, TestLog *ret)
{
  g_autoptr (GDir) d = g_dir_open (run_dir, 0, NULL);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;
  gint64 want = 1;

  if (d == NULL)
    fail_msg ("no run directory %s", run_dir);
  memset (ret, 0, sizeof *ret);
  ret->records = g_ptr_array_new_with_free_func ((GDestroyNotify)json_object_unref);
  while ((name = g_dir_read_name (d)) != NULL)
    if (g_str_has_prefix (name, "access.") && g_str_has_suffix (name, ".jsonl") && strcmp (name, "access.jsonl") != 0)
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, test_cmp_names);
  g_ptr_array_add (names, g_strdup ("access.jsonl"));
  for (guint i = 0; i < names->len; i++)
    {
      g_autofree char *path = g_build_filename (run_dir, names->pdata[i], NULL);
      g_autofree char *text = test_read_file (path);
      g_auto (GStrv) lines = NULL;

      if (text == NULL)
        continue;
      ret->files++;
      ret->bytes += strlen (text);
      lines = g_strsplit (text, "\n", -1);
      for (guint j = 0; lines[j] != NULL; j++)
        {
          JsonObject *o;

          if (lines[j][0] == '\0')
            continue;
          o = test_parse_object (lines[j]);
          if (json_object_get_int_member (o, "seq") != want)
            fail_msg ("%s:%u: seq %" G_GINT64_FORMAT ", expected %" G_GINT64_FORMAT, path, j + 1,
                      json_object_get_int_member (o, "seq"), want);
          want++;
          g_ptr_array_add (ret->records, o);
        }
    }
}

void
test_log_clear (TestLog *log)
{
  g_clear_pointer (&log->records, g_ptr_array_unref);
}

char *
test_log_text (const char *run_dir)
{
  g_autofree char *path = g_build_filename (run_dir, "access.jsonl", NULL);
  char *text = test_read_file (path);

  if (text == NULL)
    fail_msg ("the access log %s can't be read", path);
  return text;
}

void
test_log_file_init (TestLogFile *f)
{
  f->dir = test_tmpdir ("fusebox-log");
  f->path = g_build_filename (f->dir, "access.jsonl", NULL);
}

void
test_log_file_clear (TestLogFile *f)
{
  test_rm_rf (f->dir);
  g_clear_pointer (&f->dir, g_free);
  g_clear_pointer (&f->path, g_free);
}

int
test_log_file_setup (void **state)
{
  TestLogFile *f = g_new0 (TestLogFile, 1);

  test_log_file_init (f);
  *state = f;
  return 0;
}

int
test_log_file_teardown (void **state)
{
  TestLogFile *f = *state;

  test_log_file_clear (f);
  g_free (f);
  return 0;
}

bool
test_log_has (const char *log, ...)
{
  g_auto (GStrv) lines = g_strsplit (log, "\n", -1);

  for (guint i = 0; lines[i] != NULL; i++)
    {
      va_list ap;
      const char *frag;
      bool all = true;
      va_start (ap, log);
      while ((frag = va_arg (ap, const char *)) != NULL)
        if (strstr (lines[i], frag) == NULL)
          all = false;
      va_end (ap);
      if (all && lines[i][0] != '\0')
        return true;
    }
  return false;
}
