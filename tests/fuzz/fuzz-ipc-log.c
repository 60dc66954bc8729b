/* fusebox — libFuzzer target for the access-log reader, the people format
 * and the report, and a round-trip check of the writer's JSON escaping.
 *
 * Input: bytes.  (1) As a log file (through a memfd, so the reader's real
 * read/split code runs): every record is formatted for people (with and
 * without colour: the output must hold no raw control byte) and folded into
 * a report rendered as text and JSON.  (2) As a string up to its first NUL:
 * fb_json_append_string must produce valid UTF-8 JSON that parses back to
 * the same string when the input was valid UTF-8.  Seed corpus:
 * fixtures/logs/.
 *
 *   build-fuzz/tests/fuzz/fuzz-ipc-log -max_total_time=600 CORPUS fixtures/logs fixtures/logs/rotated
 */
#include "ipc/ipc-private.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void
check_safe_text (const char *s, bool multiline)
{
  for (const char *p = s; *p != '\0'; p++)
    {
      unsigned char b = (unsigned char)*p;

      /* ESC only as our own SGR colour codes */
      if (b == 0x1b &&
          (strncmp (p, "\033[31m", 5) == 0 || strncmp (p, "\033[33m", 5) == 0 || strncmp (p, "\033[0m", 4) == 0))
        continue;
      if (b == '\n' && multiline)
        continue;
      if (b < 0x20 || b == 0x7f)
        {
          fprintf (stderr, "raw control byte 0x%02x in output for people: %s\n", b, s);
          abort ();
        }
    }
}

static void
fuzz_reader (const uint8_t *data, size_t size)
{
  int fd = memfd_create ("fuzz-log", MFD_CLOEXEC);
  char path[64];
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (FbReport) report = fb_report_new ();
  FbLogReaderStats stats;

  if (fd < 0)
    return;
  if (size > 0 && write (fd, data, size) != (ssize_t)size)
    {
      close (fd);
      return;
    }
  snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
  reader = fb_log_reader_new (path, FALSE, NULL);
  if (reader != NULL)
    {
      for (int guard = 0; guard < 100000; guard++)
        {
          g_autoptr (FbLogRecord) rec = NULL;
          g_autoptr (GError) error = NULL;
          FbLogReadStatus st = fb_log_reader_next (reader, &rec, &error);

          if (st == FB_LOG_READ_EOF || st == FB_LOG_READ_ERROR)
            break;
          if (st != FB_LOG_READ_RECORD)
            {
              if (error == NULL)
                abort (); /* every warning says what and where */
              continue;
            }
          {
            g_autofree char *plain = fb_log_record_format (rec->object, FALSE);
            g_autofree char *color = fb_log_record_format (rec->object, TRUE);

            check_safe_text (plain, false);
            check_safe_text (color, false);
          }
          fb_report_add_record (report, rec->object);
        }
      fb_log_reader_get_stats (reader, &stats);
      fb_report_set_reader_stats (report, &stats);
    }
  {
    g_autoptr (JsonNode) root = fb_report_to_json (report);
    g_autofree char *json = json_to_string (root, FALSE);
    g_autofree char *text = fb_report_to_text (report);

    check_safe_text (text, true);
    if (!g_utf8_validate (json, -1, NULL))
      abort ();
  }
  close (fd);
}

static void
fuzz_escape (const uint8_t *data, size_t size)
{
  g_autofree char *s = g_strndup ((const char *)data, size);
  g_autoptr (GString) out = g_string_new (NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  bool valid = fb_json_append_string (out, s);

  if (!g_utf8_validate (out->str, (gssize)out->len, NULL))
    abort ();
  for (gsize i = 0; i < out->len; i++)
    if ((unsigned char)out->str[i] < 0x20)
      abort ();
  if (!json_parser_load_from_data (parser, out->str, (gssize)out->len, NULL))
    abort ();
  if (valid != (bool)g_utf8_validate (s, -1, NULL))
    abort ();
  if (valid && strcmp (json_node_get_string (json_parser_get_root (parser)), s) != 0)
    abort ();
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (size > 1 << 20)
    return 0;
  fuzz_reader (data, size);
  fuzz_escape (data, size);
  return 0;
}
