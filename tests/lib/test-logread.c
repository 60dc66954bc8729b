/* fusebox — an access log read back by fusebox's reader (test-logread.h). */
#include "tests/lib/test-logread.h"
#include "tests/lib/test-util.h"

guint64
test_log_read_back (const char *path, const char *what, bool allow_truncated, FbLogReaderStats *ret_stats)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = fb_log_reader_new (path, FALSE, &error);
  guint64 next = 1;

  if (reader == NULL)
    fail_msg ("%s: reading %s back: %s", what, path, error->message);
  for (;;)
    {
      g_autoptr (FbLogRecord) rec = NULL;
      FbLogReadStatus st = fb_log_reader_next (reader, &rec, &error);

      if (st == FB_LOG_READ_EOF)
        break;
      if (st == FB_LOG_READ_TRUNCATED && allow_truncated)
        {
          g_clear_error (&error);
          continue;
        }
      if (st != FB_LOG_READ_RECORD)
        fail_msg ("%s: reading %s back: status %d: %s", what, path, st, error != NULL ? error->message : "?");
      if (rec->seq != (gint64)next)
        fail_msg ("%s: record %" G_GINT64_FORMAT " where %" G_GUINT64_FORMAT " was due", what, rec->seq, next);
      next++;
    }
  fb_log_reader_get_stats (reader, ret_stats);
  return next - 1;
}
