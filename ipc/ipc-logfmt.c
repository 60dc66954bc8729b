/* fusebox — access-log records for people (`fusebox log` without --json).
 *
 * Everything printed comes from the log, and the log's strings come from the
 * sandbox: a file named "\e]0;pwned\a" must not retitle the operator's
 * terminal.  So every string goes through fb_text_append_safe, which shows
 * control characters, backslashes and invalid UTF-8 as C escapes. */
#include "ipc/ipc-private.h"

#include <string.h>

#define COL_TIME 23 /* "2024-05-01 12:34:56.789" */
#define COL_PROC 20
#define COL_OP 8
#define COL_PATH 40
#define COL_DECISION 8
#define COL_ERRNO 7

gsize
fb_text_append_safe (GString *out, const char *s, gsize len)
{
  gsize cols = 0;
  const char *end = s + len;

  for (const char *p = s; p < end;)
    {
      guchar b = (guchar)*p;
      gunichar c;

      if (b == '\\')
        {
          g_string_append (out, "\\\\");
          cols += 2;
          p++;
          continue;
        }
      if (b < 0x20 || b == 0x7f)
        {
          switch (b)
            {
              case '\n':
                g_string_append (out, "\\n");
                cols += 2;
                break;
              case '\t':
                g_string_append (out, "\\t");
                cols += 2;
                break;
              case '\r':
                g_string_append (out, "\\r");
                cols += 2;
                break;
              default:
                g_string_append_printf (out, "\\x%02x", b);
                cols += 4;
                break;
            }
          p++;
          continue;
        }
      if (b < 0x80)
        {
          g_string_append_c (out, (char)b);
          cols++;
          p++;
          continue;
        }
      c = g_utf8_get_char_validated (p, end - p);
      if (c == (gunichar)-1 || c == (gunichar)-2 || (c >= 0x80 && c <= 0x9f))
        {
          /* Invalid UTF-8 byte, or a C1 control (0x9b is CSI on some
           * terminals): escape the bytes. */
          const char *next = (c == (gunichar)-1 || c == (gunichar)-2) ? p + 1 : g_utf8_next_char (p);

          for (; p < next; p++)
            {
              g_string_append_printf (out, "\\x%02x", (guchar)*p);
              cols += 4;
            }
          continue;
        }
      g_string_append_len (out, p, g_utf8_next_char (p) - p);
      cols += g_unichar_iswide (c) ? 2 : g_unichar_iszerowidth (c) ? 0 : 1;
      p = g_utf8_next_char (p);
    }
  return cols;
}

static const char *
get_str (JsonObject *o, const char *name)
{
  JsonNode *n = json_object_get_member (o, name);

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (n);
}

static gint64
get_int (JsonObject *o, const char *name, gint64 dflt)
{
  JsonNode *n = json_object_get_member (o, name);

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64)
    return dflt;
  return json_node_get_int (n);
}

/* A string member's exact bytes: NAME_b64 when the writer had to write NAME
 * lossily, else NAME.  Returns a new string or NULL. */
static char *
get_bytes (JsonObject *o, const char *name, gsize *ret_len)
{
  g_autofree char *b64_name = g_strconcat (name, "_b64", NULL);
  const char *b64 = get_str (o, b64_name);
  const char *s;

  if (b64 != NULL)
    {
      gsize len = 0;
      guchar *raw = g_base64_decode (b64, &len);
      char *z = g_malloc (len + 1);

      memcpy (z, raw, len);
      z[len] = '\0';
      g_free (raw);
      *ret_len = strnlen (z, len);
      return z;
    }
  s = get_str (o, name);
  if (s == NULL)
    return NULL;
  *ret_len = strlen (s);
  return g_strdup (s);
}

static void
pad (GString *out, gsize cols, gsize width)
{
  for (; cols < width; cols++)
    g_string_append_c (out, ' ');
}

static gsize
append_member (GString *out, JsonObject *o, const char *name, const char *dflt)
{
  gsize len = 0;
  g_autofree char *s = get_bytes (o, name, &len);

  if (s == NULL)
    return fb_text_append_safe (out, dflt, strlen (dflt));
  return fb_text_append_safe (out, s, len);
}

char *
fb_log_record_format (JsonObject *o, gboolean color)
{
  GString *out = g_string_sized_new (160);
  const char *decision = get_str (o, "decision");
  const char *ts = get_str (o, "ts");
  const char *error = get_str (o, "error");
  gint64 err = get_int (o, "errno", 0);
  gint64 us;
  gsize cols;
  const char *sgr = NULL;

  if (color && decision != NULL)
    {
      if (strcmp (decision, "readonly") == 0)
        sgr = "\033[33m";
      else if (strcmp (decision, "allow") != 0)
        sgr = "\033[31m";
    }
  if (sgr != NULL)
    g_string_append (out, sgr);

  /* local time, milliseconds */
  if (fb_ipc_parse_time (ts, &us))
    {
      g_autoptr (GDateTime) dt = g_date_time_new_from_unix_local (us / G_USEC_PER_SEC);
      g_autofree char *hms = dt != NULL ? g_date_time_format (dt, "%Y-%m-%d %H:%M:%S") : NULL;

      g_string_append_printf (out, "%s.%03d", hms != NULL ? hms : "?", (int)((us % G_USEC_PER_SEC) / 1000));
    }
  else
    {
      cols = fb_text_append_safe (out, ts != NULL ? ts : "-", ts != NULL ? strlen (ts) : 1);
      pad (out, cols, COL_TIME);
    }
  g_string_append (out, "  ");

  /* comm[pid] */
  {
    GString *proc = g_string_new (NULL);
    gsize pcols = 0;

    if (get_str (o, "comm") != NULL || get_str (o, "comm_b64") != NULL)
      pcols = append_member (proc, o, "comm", "?");
    else if (get_str (o, "session") != NULL)
      pcols = append_member (proc, o, "session", "?");
    else
      {
        g_string_append_c (proc, '?');
        pcols = 1;
      }
    {
      g_autofree char *pid = g_strdup_printf ("[%" G_GINT64_FORMAT "]", get_int (o, "pid", 0));

      g_string_append (proc, pid);
      pcols += strlen (pid);
    }
    g_string_append (out, proc->str);
    pad (out, pcols, COL_PROC);
    g_string_free (proc, TRUE);
  }
  g_string_append (out, "  ");

  cols = append_member (out, o, "op", "?");
  pad (out, cols, COL_OP);
  g_string_append (out, "  ");

  cols = append_member (out, o, "path", "?");
  if (get_str (o, "target") != NULL)
    {
      g_string_append (out, " \u2192 ");
      cols += 3 + append_member (out, o, "target", "");
    }
  pad (out, cols, COL_PATH);
  g_string_append (out, "  ");

  cols = append_member (out, o, "decision", "?");
  pad (out, cols, COL_DECISION);
  g_string_append (out, "  ");

  if (err == 0)
    cols = fb_text_append_safe (out, "-", 1);
  else if (error != NULL)
    cols = fb_text_append_safe (out, error, strlen (error));
  else
    {
      char buf[16];
      const char *name = fb_errno_name ((int)err, buf);
      cols = fb_text_append_safe (out, name, strlen (name));
    }
  pad (out, cols, COL_ERRNO);
  g_string_append (out, "  ");

  append_member (out, o, "why", "");
  /* No trailing blanks from padding when why is empty. */
  while (out->len > 0 && out->str[out->len - 1] == ' ')
    g_string_truncate (out, out->len - 1);
  if (sgr != NULL)
    g_string_append (out, "\033[0m");
  return g_string_free (out, FALSE);
}
