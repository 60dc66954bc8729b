/* fusebox — the access log's JSON encoding.
 *
 * Records are built by hand rather than with JsonGenerator because their
 * strings come from the sandbox: a file name may hold any byte but NUL and
 * "/", and JSON text must be valid UTF-8.  The encoding (documented in
 * fusebox(1), "ACCESS LOG"):
 *  - valid UTF-8 is written as is, except C0 controls, DEL, C1 controls and
 *    U+2028/U+2029, which are \u-escaped: a raw line is then safe to `tail`
 *    on a terminal (a C1 CSI or an ESC in a file name can't drive it);
 *  - a string that is not valid UTF-8 is written lossily (each offending byte
 *    becomes U+FFFD) and the exact bytes follow in a NAME_b64 member, so that
 *    no two distinct names look alike in the log without a marker.  (A \u00XX
 *    per raw byte was rejected: it collides with the real U+00XX.)
 *
 * Called from any thread; no state. */
#include "ipc/ipc-private.h"

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
        if (c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0x9f) || c == 0x2028 || c == 0x2029)
          {
            static const char hex[] = "0123456789abcdef";
            char u[6] = { '\\', 'u', hex[(c >> 12) & 0xf], hex[(c >> 8) & 0xf], hex[(c >> 4) & 0xf], hex[c & 0xf] };

            g_string_append_len (out, u, sizeof u);
          }
        else
          g_string_append_unichar (out, c);
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

gboolean
fb_ipc_parse_time (const char *s, gint64 *ret_us)
{
  g_autoptr (GTimeZone) local = g_time_zone_new_local ();
  g_autoptr (GDateTime) dt = NULL;

  if (s == NULL)
    return false;
  dt = g_date_time_new_from_iso8601 (s, local);
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

static const char *
rule_kind_name (FbPolicyRuleKind kind)
{
  switch (kind)
    {
      case FB_POLICY_RULE_PROTECTED:
        return "protected";
      case FB_POLICY_RULE_DEFAULT:
        return "default";
      case FB_POLICY_RULE_PATH:
      case FB_POLICY_RULE_GLOB:
      default:
        return NULL;
    }
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
  g_string_append_c (out, ',');
  fb_json_append_string_member (out, "comm", e->comm);
  if (e->session != NULL)
    {
      g_string_append_c (out, ',');
      fb_json_append_string_member (out, "session", e->session);
    }
  g_string_append_c (out, ',');
  fb_json_append_string_member (out, "op", e->op);
  g_string_append_c (out, ',');
  fb_json_append_string_member (out, "path", e->path);
  if (e->target != NULL)
    {
      g_string_append_c (out, ',');
      fb_json_append_string_member (out, "target", e->target);
    }
  g_string_append_c (out, ',');
  fb_json_append_string_member (out, "access", e->access);
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

  if (e->rule != NULL)
    {
      const char *kind = rule_kind_name (e->rule->kind);

      g_string_append (out, ",\"rule\":");
      if (kind != NULL)
        {
          g_string_append_c (out, '"');
          g_string_append (out, kind);
          g_string_append (out, "\",");
        }
      else
        {
          fb_json_append_int (out, e->rule->index);
          g_string_append_c (out, ',');
        }
      fb_json_append_string_member (out, "rule_origin", e->rule->origin);
      g_string_append_c (out, ',');
      fb_json_append_string_member (out, "why", e->rule->why);
    }
  else
    {
      /* The contract says a decided access always has a rule; an event
       * without one is still logged rather than dropped. */
      g_string_append (out, ",\"rule\":null,\"rule_origin\":null,\"why\":null");
    }

  if ((e->op != NULL && strcmp (e->op, "close") == 0) || e->bytes_read >= 0 || e->bytes_written >= 0)
    {
      g_string_append (out, ",\"bytes_read\":");
      fb_json_append_int (out, MAX (e->bytes_read, 0));
      g_string_append (out, ",\"bytes_written\":");
      fb_json_append_int (out, MAX (e->bytes_written, 0));
    }
  g_string_append_c (out, '}');
  return g_string_free (out, FALSE);
}
