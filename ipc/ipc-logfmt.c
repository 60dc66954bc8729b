/* fusebox — access-log records for people (`fusebox log` without --json).
 *
 * Everything printed comes from the log, and the log's strings come from the
 * sandbox: a file named "\e]0;pwned\a" must not retitle the operator's
 * terminal, an RLO in it must not reorder the columns after it, and 255
 * spaces must not wrap the rest of the line into a fake record.  So every
 * string goes through fb_text_append_safe, which shows backslashes, control
 * and format characters, invisible spaces, blanks that could pass for column
 * separators and invalid UTF-8 as escapes, and elides what is longer than
 * FB_TEXT_MAX_COLS columns in the middle.  The same characters are escaped
 * in JSON (fb_unichar_is_unsafe, ipc-json.c). */
#include "ipc/ipc-private.h"

#include <string.h>

#define COL_TIME 23 /* "2024-05-01 12:34:56.789" */
#define COL_PROC 20
#define COL_OP 8
#define COL_PATH 40
#define COL_DECISION 8
#define COL_ERRNO 7

/* One character of S at P (END its end) as it is shown: appended to OUT;
 * returns the columns it takes and sets *ret_next. */
static gsize
append_unit (GString *out, const char *s, const char *p, const char *end, FbTextFlags flags, const char **ret_next)
{
  guchar b = (guchar)*p;
  gunichar c;

  *ret_next = p + 1;
  if (b == '\\')
    {
      g_string_append (out, "\\\\");
      return 2;
    }
  if (b == ' ')
    {
      /* Runs of blanks and blanks at either end are what a name uses to
       * fake columns or push text onto a line of its own when it wraps;
       * inside a message, the message's own text is around it. */
      if ((flags & FB_TEXT_INLINE) || (p > s && p + 1 < end && p[-1] != ' ' && p[1] != ' '))
        {
          g_string_append_c (out, ' ');
          return 1;
        }
      g_string_append (out, "\\x20");
      return 4;
    }
  if (b < 0x20 || b == 0x7f)
    {
      switch (b)
        {
          case '\n':
            g_string_append (out, "\\n");
            return 2;
          case '\t':
            g_string_append (out, "\\t");
            return 2;
          case '\r':
            g_string_append (out, "\\r");
            return 2;
          default:
            g_string_append_printf (out, "\\x%02x", b);
            return 4;
        }
    }
  if (b < 0x80)
    {
      g_string_append_c (out, (char)b);
      return 1;
    }
  c = g_utf8_get_char_validated (p, end - p);
  if (c == (gunichar)-1 || c == (gunichar)-2)
    {
      /* not UTF-8: the byte itself */
      g_string_append_printf (out, "\\x%02x", b);
      return 4;
    }
  *ret_next = g_utf8_next_char (p);
  /* The elision mark is never a name's own. */
  if (fb_unichar_is_unsafe (c) || c == FB_TEXT_ELISION)
    {
      if (c > 0xffff)
        {
          g_string_append_printf (out, "\\U%08x", c);
          return 10;
        }
      g_string_append_printf (out, "\\u%04x", c);
      return 6;
    }
  g_string_append_len (out, p, *ret_next - p);
  return g_unichar_iswide (c) ? 2 : g_unichar_iszerowidth (c) ? 0 : 1;
}

gsize
fb_text_append_safe_full (GString *out, const char *s, gsize len, FbTextFlags flags)
{
  const char *end = s + len;
  const gsize max_cols = (flags & FB_TEXT_INLINE) ? FB_TEXT_INLINE_MAX_COLS : FB_TEXT_MAX_COLS;
  gsize cols = 0;
  /* Each character shown: where its text starts in OUT and the columns
   * before it.  Kept only when the text may need eliding. */
  g_autoptr (GArray) units = NULL;
  typedef struct
  {
    gsize offset;
    gsize col;
  } Unit;

  /* No character takes more than 10 columns (\UXXXXXXXX) per byte. */
  if ((flags & FB_TEXT_ELIDE) && len > max_cols / 10)
    units = g_array_new (FALSE, FALSE, sizeof (Unit));
  for (const char *p = s; p < end;)
    {
      Unit u = { out->len, cols };

      if (units != NULL)
        g_array_append_val (units, u);
      cols += append_unit (out, s, p, end, flags, &p);
    }
  if (units == NULL || cols <= max_cols)
    return cols;

  {
    /* Keep the start and the end: a path's head says where, its tail what. */
    const gsize head_max = (max_cols - 1) / 2;
    const gsize tail_max = max_cols - 1 - head_max;
    guint head = 0, tail = units->len;
    g_autofree char *tail_text = NULL;

    while (head + 1 < units->len && g_array_index (units, Unit, head + 1).col <= head_max)
      head++;
    /* head: the first unit not kept at the start */
    while (tail > head + 1 && cols - g_array_index (units, Unit, tail - 1).col <= tail_max)
      tail--;
    tail_text = g_strdup (tail < units->len ? out->str + g_array_index (units, Unit, tail).offset : "");
    g_string_truncate (out, g_array_index (units, Unit, head).offset);
    g_string_append_unichar (out, FB_TEXT_ELISION);
    g_string_append (out, tail_text);
    return g_array_index (units, Unit, head).col + 1 +
           (tail < units->len ? cols - g_array_index (units, Unit, tail).col : 0);
  }
}

gsize
fb_text_append_safe (GString *out, const char *s, gsize len)
{
  return fb_text_append_safe_full (out, s, len, FB_TEXT_ELIDE);
}

char *
fb_text_safe (const char *s, FbTextFlags flags)
{
  GString *out = g_string_new (NULL);

  if (s == NULL)
    s = "(null)";
  fb_text_append_safe_full (out, s, strlen (s), flags);
  return g_string_free (out, FALSE);
}

/* A string member's exact bytes: NAME_b64 when the writer had to write NAME
 * lossily, else NAME.  Returns a new string or NULL. */
static char *
get_bytes (JsonObject *o, const char *name, gsize *ret_len)
{
  g_autofree char *b64_name = g_strconcat (name, "_b64", NULL);
  const char *b64 = fb_json_member_string (o, b64_name);
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
  s = fb_json_member_string (o, name);
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

/* "HH:MM:SS.mmm" in local time, or the text as it is. */
static void
append_local_time (GString *out, const char *ts, gboolean with_date)
{
  gint64 us;

  if (fb_ipc_parse_time (ts, &us))
    {
      g_autoptr (GDateTime) utc = g_date_time_new_from_unix_utc (us / G_USEC_PER_SEC);
      g_autoptr (GDateTime) dt = utc != NULL ? g_date_time_to_timezone (utc, fb_ipc_local_time_zone ()) : NULL;
      g_autofree char *text = dt != NULL ? g_date_time_format (dt, with_date ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S") : NULL;

      g_string_append_printf (out, "%s.%03d", text != NULL ? text : "?", (int)((us % G_USEC_PER_SEC) / 1000));
    }
  else
    fb_text_append_safe (out, ts != NULL ? ts : "-", ts != NULL ? strlen (ts) : 1);
}

/* A record that stands for repeated refusals (ipc-log.c): how many, since
 * when. */
static void
append_repeat (GString *out, JsonObject *o)
{
  JsonNode *n = json_object_get_member (o, "repeat");
  JsonObject *r;

  if (n == NULL || !JSON_NODE_HOLDS_OBJECT (n))
    return;
  r = json_node_get_object (n);
  g_string_append_printf (out, "  [%" G_GINT64_FORMAT " like this, ", fb_json_member_int (r, "count", 0));
  append_local_time (out, fb_json_member_string (r, "first_ts"), FALSE);
  g_string_append (out, " to ");
  append_local_time (out, fb_json_member_string (r, "last_ts"), FALSE);
  g_string_append_c (out, ']');
}

/* The writer's own word ("log-full"): time, NOTICE, what, why. */
static char *
format_notice (JsonObject *o, const char *notice)
{
  GString *out = g_string_sized_new (160);
  const char *why = fb_json_member_string (o, "why");

  append_local_time (out, fb_json_member_string (o, "ts"), TRUE);
  g_string_append (out, "  NOTICE  ");
  fb_text_append_safe (out, notice, strlen (notice));
  if (why != NULL)
    {
      g_string_append (out, ": ");
      fb_text_append_safe (out, why, strlen (why));
    }
  if (json_object_has_member (o, "records_not_written"))
    g_string_append_printf (out, " (%" G_GINT64_FORMAT " records not written)",
                            fb_json_member_int (o, "records_not_written", 0));
  return g_string_free (out, FALSE);
}

char *
fb_log_record_format (JsonObject *o, gboolean color)
{
  GString *out = g_string_sized_new (160);
  const char *decision = fb_json_member_string (o, "decision");
  const char *ts = fb_json_member_string (o, "ts");
  const char *error = fb_json_member_string (o, "error");
  gint64 err = fb_json_member_int (o, "errno", 0);
  gint64 us;
  gsize cols;
  const char *sgr = NULL;

  if (fb_json_member_string (o, "notice") != NULL)
    {
      g_string_free (out, TRUE);
      return format_notice (o, fb_json_member_string (o, "notice"));
    }

  if (color && decision != NULL)
    {
      if (strcmp (decision, "readonly") == 0)
        sgr = "\033[33m";
      else if (fb_decision_name_is_refusal (decision))
        sgr = "\033[31m";
    }
  if (sgr != NULL)
    g_string_append (out, sgr);

  /* local time, milliseconds */
  if (fb_ipc_parse_time (ts, &us))
    {
      g_autoptr (GDateTime) utc = g_date_time_new_from_unix_utc (us / G_USEC_PER_SEC);
      g_autoptr (GDateTime) dt = utc != NULL ? g_date_time_to_timezone (utc, fb_ipc_local_time_zone ()) : NULL;
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

    if (fb_json_member_string (o, "comm") != NULL || fb_json_member_string (o, "comm_b64") != NULL)
      pcols = append_member (proc, o, "comm", "?");
    else if (fb_json_member_string (o, "session") != NULL)
      pcols = append_member (proc, o, "session", "?");
    else
      {
        g_string_append_c (proc, '?');
        pcols = 1;
      }
    {
      g_autofree char *pid = g_strdup_printf ("[%" G_GINT64_FORMAT "]", fb_json_member_int (o, "pid", 0));

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
  if (fb_json_member_string (o, "target") != NULL)
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
  append_repeat (out, o);
  if (sgr != NULL)
    g_string_append (out, "\033[0m");
  return g_string_free (out, FALSE);
}
