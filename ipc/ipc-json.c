/* fusebox — the access log's JSON encoding.
 *
 * Records are built by hand rather than with JsonGenerator because their
 * strings come from the sandbox: a file name may hold any byte but NUL and
 * "/", and JSON text must be valid UTF-8.  The encoding (documented in
 * fusebox(1), "ACCESS LOG"):
 *  - valid UTF-8 is written as is, except what fb_unichar_is_unsafe() names
 *    (C0 and C1 controls, DEL, format characters such as the bidi overrides
 *    and zero-width ones, U+2028/U+2029, spaces other than U+0020,
 *    unassigned code points), which are \u-escaped: a raw line is then safe
 *    to `tail` on a terminal (a C1 CSI or an ESC in a file name can't drive
 *    it, an RLO can't reorder what follows it);
 *  - a string that is not valid UTF-8 is written lossily (each offending byte
 *    becomes U+FFFD) and the exact bytes follow in a NAME_b64 member, so that
 *    no two distinct names look alike in the log without a marker.  (A \u00XX
 *    per raw byte was rejected: it collides with the real U+00XX.)
 *
 * fb_json_append_node() writes any JSON tree with the same escaping: every
 * JSON document fusebox prints for people (report --json, runs --json,
 * policy explain --json) goes through it rather than json-glib's generator,
 * which writes C1 controls and U+2028 raw.
 *
 * Called from any thread; no state. */
#include "ipc/ipc-private.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* printf is most of the cost of a record: these run on every FUSE access. */
void
fb_json_append_int (GString *out, gint64 v)
{
  char buf[24];
  char *p = buf + sizeof buf;
  guint64 u = v < 0 ? -(guint64)v : (guint64)v;

  do
    {
      *--p = (char)('0' + u % 10);
      u /= 10;
    }
  while (u != 0);
  if (v < 0)
    *--p = '-';
  g_string_append_len (out, p, buf + sizeof buf - p);
}

bool
fb_unichar_is_unsafe (gunichar c)
{
  GUnicodeType t;

  if (c < 0x80)
    return c < 0x20 || c == 0x7f;
  t = g_unichar_type (c);
  return t == G_UNICODE_CONTROL                /* C1 (U+0080-U+009F): 0x9b is CSI on xterm/VTE */
         || t == G_UNICODE_FORMAT              /* bidi controls, zero-width characters, U+FEFF, U+061C */
         || t == G_UNICODE_LINE_SEPARATOR      /* U+2028: a line break to JavaScript and some viewers */
         || t == G_UNICODE_PARAGRAPH_SEPARATOR /* U+2029 */
         || t == G_UNICODE_SPACE_SEPARATOR     /* U+00A0, U+3000...: they pass for U+0020 */
         || t == G_UNICODE_UNASSIGNED          /* nobody knows how a terminal draws them */
         || t == G_UNICODE_SURROGATE;
}

static void
append_u_escape (GString *out, guint v)
{
  static const char hex[] = "0123456789abcdef";
  char u[6] = { '\\', 'u', hex[(v >> 12) & 0xf], hex[(v >> 8) & 0xf], hex[(v >> 4) & 0xf], hex[v & 0xf] };

  g_string_append_len (out, u, sizeof u);
}

static void
append_escaped_char (GString *out, gunichar c)
{
  switch (c)
    {
      case '"':
        g_string_append (out, "\\\"");
        break;
      case '\\':
        g_string_append (out, "\\\\");
        break;
      case '\n':
        g_string_append (out, "\\n");
        break;
      case '\r':
        g_string_append (out, "\\r");
        break;
      case '\t':
        g_string_append (out, "\\t");
        break;
      case '\b':
        g_string_append (out, "\\b");
        break;
      case '\f':
        g_string_append (out, "\\f");
        break;
      default:
        if (!fb_unichar_is_unsafe (c))
          g_string_append_unichar (out, c);
        else if (c > 0xffff)
          {
            /* JSON has only \uXXXX: a surrogate pair (format characters
             * such as the Unicode tags U+E0001... lie beyond the BMP). */
            append_u_escape (out, 0xd800 + ((c - 0x10000) >> 10));
            append_u_escape (out, 0xdc00 + ((c - 0x10000) & 0x3ff));
          }
        else
          append_u_escape (out, c);
        break;
    }
}

bool
fb_json_append_string (GString *out, const char *s)
{
  bool valid = true;

  if (s == NULL)
    {
      g_string_append (out, "null");
      return true;
    }

  g_string_append_c (out, '"');
  for (const char *p = s; *p != '\0';)
    {
      guchar b = (guchar)*p;
      const char *run = p;

      /* ASCII fast path: most paths are plain; append them in one go. */
      while (b >= 0x20 && b < 0x7f && b != '"' && b != '\\')
        b = (guchar) * ++p;
      if (p > run)
        {
          g_string_append_len (out, run, p - run);
          continue;
        }
      if (b < 0x80)
        {
          append_escaped_char (out, b);
          p++;
          continue;
        }

      gunichar c = g_utf8_get_char_validated (p, -1);
      if (c == (gunichar)-1 || c == (gunichar)-2)
        {
          g_string_append (out, "\\ufffd");
          valid = false;
          p++;
          continue;
        }
      append_escaped_char (out, c);
      p = g_utf8_next_char (p);
    }
  g_string_append_c (out, '"');
  return valid;
}

void
fb_json_append_string_member (GString *out, const char *name, const char *value)
{
  g_string_append_c (out, '"');
  g_string_append (out, name);
  g_string_append (out, "\":");
  if (!fb_json_append_string (out, value))
    {
      g_autofree char *b64 = g_base64_encode ((const guchar *)value, strlen (value));

      g_string_append (out, ",\"");
      g_string_append (out, name);
      g_string_append (out, "_b64\":\"");
      g_string_append (out, b64);
      g_string_append_c (out, '"');
    }
}

static void
append_newline_indent (GString *out, gboolean pretty, guint depth)
{
  if (!pretty)
    return;
  g_string_append_c (out, '\n');
  for (guint i = 0; i < depth; i++)
    g_string_append (out, "  ");
}

/* Recursion follows the tree's depth, which json-glib's own parser (also
 * recursive) has already walked to build it. */
static void
append_node (GString *out, JsonNode *node, gboolean pretty, guint depth)
{
  switch (node != NULL ? JSON_NODE_TYPE (node) : JSON_NODE_NULL)
    {
      case JSON_NODE_OBJECT:
        {
          JsonObjectIter it;
          const char *name;
          JsonNode *member;
          gboolean first = TRUE;

          g_string_append_c (out, '{');
          /* in the members' order, as json-glib's generator writes them */
          json_object_iter_init_ordered (&it, json_node_get_object (node));
          while (json_object_iter_next_ordered (&it, &name, &member))
            {
              if (!first)
                g_string_append_c (out, ',');
              first = FALSE;
              append_newline_indent (out, pretty, depth + 1);
              fb_json_append_string (out, name);
              g_string_append (out, pretty ? " : " : ":");
              append_node (out, member, pretty, depth + 1);
            }
          if (!first)
            append_newline_indent (out, pretty, depth);
          g_string_append_c (out, '}');
          return;
        }
      case JSON_NODE_ARRAY:
        {
          JsonArray *a = json_node_get_array (node);
          guint n = json_array_get_length (a);

          g_string_append_c (out, '[');
          for (guint i = 0; i < n; i++)
            {
              if (i > 0)
                g_string_append_c (out, ',');
              append_newline_indent (out, pretty, depth + 1);
              append_node (out, json_array_get_element (a, i), pretty, depth + 1);
            }
          if (n > 0)
            append_newline_indent (out, pretty, depth);
          g_string_append_c (out, ']');
          return;
        }
      case JSON_NODE_VALUE:
        {
          GType type = json_node_get_value_type (node);

          if (type == G_TYPE_STRING)
            fb_json_append_string (out, json_node_get_string (node));
          else if (type == G_TYPE_INT64)
            fb_json_append_int (out, json_node_get_int (node));
          else if (type == G_TYPE_BOOLEAN)
            g_string_append (out, json_node_get_boolean (node) ? "true" : "false");
          else if (type == G_TYPE_DOUBLE)
            {
              double d = json_node_get_double (node);
              char buf[G_ASCII_DTOSTR_BUF_SIZE];

              if (!isfinite (d))
                {
                  g_string_append (out, "null"); /* JSON has no NaN or infinity */
                  return;
                }
              g_ascii_dtostr (buf, sizeof buf, d);
              g_string_append (out, buf);
              /* still a double when read back */
              if (strpbrk (buf, ".eEn") == NULL)
                g_string_append (out, ".0");
            }
          else
            g_string_append (out, "null");
          return;
        }
      case JSON_NODE_NULL:
        g_string_append (out, "null");
        return;
    }
}

void
fb_json_append_node (GString *out, JsonNode *node, gboolean pretty)
{
  append_node (out, node, pretty, 0);
}

char *
fb_json_to_string (JsonNode *node, gboolean pretty)
{
  GString *out = g_string_new (NULL);

  append_node (out, node, pretty, 0);
  return g_string_free (out, FALSE);
}

gboolean
fb_text_is_safe (const char *s, gssize len)
{
  const char *end = len < 0 ? s + strlen (s) : s + len;

  for (const char *p = s; p < end;)
    {
      guchar b = (guchar)*p;
      gunichar c;

      if (b < 0x80)
        {
          if (b < 0x20 || b == 0x7f)
            return FALSE;
          p++;
          continue;
        }
      c = g_utf8_get_char_validated (p, end - p);
      if (c == (gunichar)-1 || c == (gunichar)-2 || fb_unichar_is_unsafe (c))
        return FALSE;
      p = g_utf8_next_char (p);
    }
  return TRUE;
}

void
fb_format_ts (gint64 ts_us, char buf[FB_TS_BUF])
{
  time_t secs = (time_t)(ts_us / G_USEC_PER_SEC);
  long usec = (long)(ts_us % G_USEC_PER_SEC);
  struct tm tm;

  if (usec < 0)
    {
      secs--;
      usec += G_USEC_PER_SEC;
    }
  if (gmtime_r (&secs, &tm) == NULL)
    memset (&tm, 0, sizeof tm);
  if (tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999)
    {
      snprintf (buf, FB_TS_BUF, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, usec);
      return;
    }
  {
    /* The common case without snprintf: this runs for every record. */
    int fields[] = { tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec };
    static const int widths[] = { 4, 2, 2, 2, 2, 2 };
    static const char seps[] = "--T::.";
    char *p = buf;

    for (guint i = 0; i < G_N_ELEMENTS (fields); i++)
      {
        for (int w = widths[i] - 1, v = fields[i]; w >= 0; w--, v /= 10)
          p[w] = (char)('0' + v % 10);
        p += widths[i];
        *p++ = seps[i];
      }
    for (int w = 5, v = (int)usec; w >= 0; w--, v /= 10)
      p[w] = (char)('0' + v % 10);
    p += 6;
    *p++ = 'Z';
    *p = '\0';
  }
}

GTimeZone *
fb_ipc_local_time_zone (void)
{
  static GTimeZone *tz;
  static gsize done;

  if (g_once_init_enter (&done))
    {
      tz = g_time_zone_new_local ();
      g_once_init_leave (&done, 1);
    }
  return tz;
}

/* N digits of S as a number, or -1. */
static int
digits (const char *s, int n)
{
  int v = 0;

  for (int i = 0; i < n; i++)
    {
      if (!g_ascii_isdigit (s[i]))
        return -1;
      v = v * 10 + (s[i] - '0');
    }
  return v;
}

/* The writer's own form, "YYYY-MM-DDTHH:MM:SS[.ffffff]Z", without GLib's
 * parser (a reader parses one a record); false for anything else, which
 * GLib's parser then takes. */
static bool
parse_writer_time (const char *s, gint64 *ret_us)
{
  static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
  int y = digits (s, 4), mo = digits (s + 5, 2), d = digits (s + 8, 2);
  int h = digits (s + 11, 2), mi = digits (s + 14, 2), sec = digits (s + 17, 2);
  int frac = 0, leap, yy, era, yoe, doy, doe;
  gint64 days;

  if (y < 1 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 ||
      s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':')
    return false;
  if (s[19] == '.')
    {
      frac = digits (s + 20, 6);
      if (frac < 0 || strcmp (s + 26, "Z") != 0)
        return false;
    }
  else if (strcmp (s + 19, "Z") != 0)
    return false;
  leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (d > mdays[mo - 1] + (mo == 2 && leap))
    return false;
  /* days since 1970-01-01 of a proleptic Gregorian date (civil calendar
   * arithmetic: years from March, eras of 400 years) */
  yy = mo <= 2 ? y - 1 : y;
  era = yy / 400;
  yoe = yy - era * 400;
  doy = (153 * (mo > 2 ? mo - 3 : mo + 9) + 2) / 5 + d - 1;
  doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  days = (gint64)era * 146097 + doe - 719468;
  *ret_us = ((days * 24 + h) * 60 + mi) * G_GINT64_CONSTANT (60000000) + (gint64)sec * G_USEC_PER_SEC + frac;
  return true;
}

gboolean
fb_ipc_parse_time (const char *s, gint64 *ret_us)
{
  g_autoptr (GDateTime) dt = NULL;
  gint64 us;

  if (s == NULL)
    return false;
  if (strlen (s) >= 20 && parse_writer_time (s, &us))
    {
      if (ret_us != NULL)
        *ret_us = us;
      return true;
    }
  /* (GLib's g_time_zone_new_local reads /etc/localtime's link and stats
   * it at every call: once is enough) */
  dt = g_date_time_new_from_iso8601 (s, fb_ipc_local_time_zone ());
  if (dt == NULL)
    return false;
  /* GLib 2.74 has no g_date_time_to_unix_usec (2.80). */
  if (ret_us != NULL)
    *ret_us = g_date_time_to_unix (dt) * G_USEC_PER_SEC + g_date_time_get_microsecond (dt);
  return true;
}

const char *
fb_errno_name (int err, char buf[16])
{
  const char *name = err > 0 ? strerrorname_np (err) : NULL;

  if (name != NULL)
    return name;
  snprintf (buf, 16, "E%d", err);
  return buf;
}

/* ",NAME:VALUE" after an earlier member (as fb_json_append_string_member). */
static void
append_next_member (GString *out, const char *name, const char *value)
{
  g_string_append_c (out, ',');
  fb_json_append_string_member (out, name, value);
}

char *
fb_access_event_format_body (const FbAccessEvent *e)
{
  GString *out = g_string_sized_new (256);
  char errbuf[16];

  g_string_append (out, "\"pid\":");
  fb_json_append_int (out, e->pid);
  g_string_append (out, ",\"uid\":");
  fb_json_append_int (out, e->uid);
  append_next_member (out, "comm", e->comm);
  if (e->session != NULL)
    append_next_member (out, "session", e->session);
  if (e->process != NULL)
    append_next_member (out, "process", e->process);
  append_next_member (out, "op", fb_op_to_string (e->op));
  append_next_member (out, "path", e->path);
  if (e->target != NULL)
    append_next_member (out, "target", e->target);
  append_next_member (out, "access", e->access);
  g_string_append (out, ",\"decision\":\"");
  g_string_append (out, fb_decision_to_string (e->decision));
  g_string_append (out, "\",\"errno\":");
  fb_json_append_int (out, e->err);
  if (e->err != 0)
    {
      g_string_append (out, ",\"error\":\"");
      g_string_append (out, fb_errno_name (e->err, errbuf));
      g_string_append_c (out, '"');
    }

  if (e->net_rule != NULL)
    {
      /* an allowlist's entry is named as the policy names it: "allow[0]",
       * "deny[2]", or a synthetic rule's name ("default", "loopback") */
      append_next_member (out, "rule", e->net_rule->name);
      append_next_member (out, "rule_origin", e->net_rule->origin);
      append_next_member (out, "why", e->net_rule->why);
    }
  else if (e->rule != NULL)
    {
      const FbPolicyRuleKindInfo *kind = fb_policy_rule_kind_info (e->rule->kind);

      g_string_append (out, ",\"rule\":");
      if (!kind->numbered)
        {
          g_string_append_c (out, '"');
          g_string_append (out, kind->name);
          g_string_append_c (out, '"');
        }
      else
        fb_json_append_int (out, e->rule->index);
      append_next_member (out, "rule_origin", e->rule->origin);
      append_next_member (out, "why", e->rule->why);
    }
  else
    {
      /* The contract says a decided access always has a rule; an event
       * without one is still logged rather than dropped. */
      g_string_append (out, ",\"rule\":null,\"rule_origin\":null,\"why\":null");
    }

  if (e->op == FB_OP_CLOSE || e->bytes_read >= 0 || e->bytes_written >= 0)
    {
      g_string_append (out, ",\"bytes_read\":");
      fb_json_append_int (out, MAX (e->bytes_read, 0));
      g_string_append (out, ",\"bytes_written\":");
      fb_json_append_int (out, MAX (e->bytes_written, 0));
    }
  if (e->host != NULL)
    {
      append_next_member (out, "host", e->host);
      g_string_append (out, ",\"port\":");
      fb_json_append_int (out, e->port);
      append_next_member (out, "address", e->address);
      if (e->op == FB_OP_DISCONNECT)
        {
          g_string_append (out, ",\"duration_us\":");
          fb_json_append_int (out, MAX (e->duration_us, 0));
        }
    }
  g_string_append_c (out, '}');
  return g_string_free (out, FALSE);
}

/* A member read leniently, for what is read back from disk (a log line,
 * run.json): any member may be missing or of another type. */
const char *
fb_json_member_string (JsonObject *o, const char *name)
{
  JsonNode *n = json_object_get_member (o, name);

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (n);
}

gint64
fb_json_member_int (JsonObject *o, const char *name, gint64 dflt)
{
  JsonNode *n = json_object_get_member (o, name);

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64)
    return dflt;
  return json_node_get_int (n);
}
