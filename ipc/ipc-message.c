/* fusebox — messages for people: what quotes a name is escaped where it is
 * printed.
 *
 * Error messages and warnings quote what others chose: a mount point or a
 * policy file given on the command line, a processId, a member name or a
 * client name a remote client sent, a path inside a sandbox, another
 * program's message.  A newline in one of them would end the message's
 * line and start a forged one ("fusebox: mounted"), an ESC or a C1 CSI
 * would drive the terminal, an RLO would turn the rest of the line around.
 * The message's format is fusebox's own text and its line breaks are the
 * message's; so fb_text_printf() escapes each %s argument, and nothing
 * else, with the log's escaping (fb_text_append_safe_full, FB_TEXT_INLINE:
 * line breaks too).  A message is escaped once, where it is printed: what
 * goes into an argument is built raw.
 *
 * GLib's own messages (g_warning, g_message, g_debug) get the same through
 * fb_log_writer_safe(): GLib escapes C0 and C1 controls, but neither a
 * newline nor a bidi control. */
#include "ipc/ipc-private.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One printf conversion of a format, from its '%' to its conversion
 * character: flags, width, precision and length, and where the conversion
 * ends. */
typedef struct
{
  char spec[32];   /* "%-08.3lld": the conversion as printf reads it */
  bool width_star; /* a '*' width */
  bool prec_star;  /* a '*' precision */
  int longs;       /* l: 1, ll/q: 2 */
  char length;     /* 'h' (h or hh), 'L', 'j', 'z', 't', or 0 */
  char conv;
  const char *next;
} Conversion;

static bool
parse_conversion (const char *p, Conversion *c)
{
  const char *start = p;
  gsize n;

  memset (c, 0, sizeof *c);
  p++; /* '%' */
  p += strspn (p, "-+ #0'");
  if (*p == '*')
    {
      c->width_star = true;
      p++;
    }
  else
    p += strspn (p, "0123456789");
  if (*p == '.')
    {
      p++;
      if (*p == '*')
        {
          c->prec_star = true;
          p++;
        }
      else
        p += strspn (p, "0123456789");
    }
  for (;; p++)
    {
      if (*p == 'l')
        c->longs++;
      else if (*p == 'q')
        c->longs = 2;
      else if (*p == 'h' || *p == 'L' || *p == 'j' || *p == 'z' || *p == 't')
        c->length = *p;
      else
        break;
    }
  c->conv = *p;
  if (c->conv == '\0')
    return false;
  n = (gsize)(p + 1 - start);
  if (n >= sizeof c->spec)
    return false;
  memcpy (c->spec, start, n);
  c->spec[n] = '\0';
  c->next = p + 1;
  return true;
}

/* SPEC is a conversion of FORMAT, which the compiler checked against the
 * arguments (G_GNUC_PRINTF): each is read with the type that conversion
 * names. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static void
append_conversion (GString *out, const Conversion *c, va_list *ap)
{
  int width = 0, prec = -1;

  if (c->width_star)
    width = va_arg (*ap, int);
  if (c->prec_star)
    prec = va_arg (*ap, int);

#define APPEND(type)                                                                                                   \
  do                                                                                                                   \
    {                                                                                                                  \
      type v_ = va_arg (*ap, type);                                                                                    \
      if (c->width_star && c->prec_star)                                                                               \
        g_string_append_printf (out, c->spec, width, prec, v_);                                                        \
      else if (c->width_star)                                                                                          \
        g_string_append_printf (out, c->spec, width, v_);                                                              \
      else if (c->prec_star)                                                                                           \
        g_string_append_printf (out, c->spec, prec, v_);                                                               \
      else                                                                                                             \
        g_string_append_printf (out, c->spec, v_);                                                                     \
    }                                                                                                                  \
  while (0)

/* The integer type the length modifier names: j, z, t, ll, l, none. */
#define APPEND_INTEGER(type_j, type_z, type_t, type_ll, type_l, type)                                                  \
  do                                                                                                                   \
    {                                                                                                                  \
      if (c->length == 'j')                                                                                            \
        APPEND (type_j);                                                                                               \
      else if (c->length == 'z')                                                                                       \
        APPEND (type_z);                                                                                               \
      else if (c->length == 't')                                                                                       \
        APPEND (type_t);                                                                                               \
      else if (c->longs >= 2)                                                                                          \
        APPEND (type_ll);                                                                                              \
      else if (c->longs == 1)                                                                                          \
        APPEND (type_l);                                                                                               \
      else                                                                                                             \
        APPEND (type);                                                                                                 \
    }                                                                                                                  \
  while (0)

  switch (c->conv)
    {
      case 'd':
      case 'i':
        APPEND_INTEGER (intmax_t, gssize, ptrdiff_t, long long, long, int);
        break;
      case 'u':
      case 'o':
      case 'x':
      case 'X':
        APPEND_INTEGER (uintmax_t, gsize, ptrdiff_t, unsigned long long, unsigned long, unsigned int);
        break;
      case 'c':
        APPEND (int);
        break;
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G':
      case 'a':
      case 'A':
        if (c->length == 'L')
          APPEND (long double);
        else
          APPEND (double);
        break;
      case 'p':
        APPEND (void *);
        break;
      case 'm':
        g_string_append (out, g_strerror (errno));
        break;
      default:
        /* %n, %ls, %S, %C and the unknown: never in fusebox's formats */
        g_string_append (out, "(?)");
        break;
    }
#undef APPEND
#undef APPEND_INTEGER
}
#pragma GCC diagnostic pop

char *
fb_text_vprintf (const char *format, va_list ap)
{
  GString *out = g_string_new (NULL);
  va_list args;

  va_copy (args, ap);
  for (const char *p = format; *p != '\0';)
    {
      const char *pct = strchr (p, '%');
      Conversion c;

      if (pct == NULL)
        {
          g_string_append (out, p);
          break;
        }
      g_string_append_len (out, p, pct - p);
      if (pct[1] == '%')
        {
          g_string_append_c (out, '%');
          p = pct + 2;
          continue;
        }
      if (!parse_conversion (pct, &c))
        {
          /* a format the compiler would have refused: shown as it is */
          g_string_append (out, pct);
          break;
        }
      if (c.conv == 's' && c.length == 0 && c.longs == 0)
        {
          int width = c.width_star ? va_arg (args, int) : 0;
          int prec = c.prec_star ? va_arg (args, int) : -1;
          const char *s = va_arg (args, const char *);
          const char *dot = strchr (c.spec, '.');
          g_autoptr (GString) shown = g_string_new (NULL);
          gsize len;

          if (!c.width_star)
            width = atoi (c.spec + 1 + strspn (c.spec + 1, "-+ #0'"));
          if (dot != NULL && !c.prec_star)
            prec = atoi (dot + 1);
          if (s == NULL)
            s = "(null)";
          /* a precision counts the argument's bytes, as printf's */
          len = prec >= 0 ? strnlen (s, (gsize)prec) : strlen (s);
          fb_text_append_safe_full (shown, s, len, FB_TEXT_INLINE | FB_TEXT_ELIDE);
          if (strchr (c.spec, '-') != NULL)
            g_string_append_printf (out, "%-*s", MAX (width, 0), shown->str);
          else
            g_string_append_printf (out, "%*s", MAX (width, 0), shown->str);
        }
      else
        append_conversion (out, &c, &args);
      p = c.next;
    }
  va_end (args);
  return g_string_free (out, FALSE);
}

char *
fb_text_printf (const char *format, ...)
{
  va_list ap;
  char *s;

  va_start (ap, format);
  s = fb_text_vprintf (format, ap);
  va_end (ap);
  return s;
}

GLogWriterOutput
fb_log_writer_safe (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data)
{
  g_autofree GLogField *copy = NULL;
  g_autofree char *message = NULL;
  const char *domain = NULL;

  /* what GLib drops (debug, unless G_MESSAGES_DEBUG asks) costs no escaping */
  for (gsize i = 0; i < n_fields; i++)
    if (strcmp (fields[i].key, "GLIB_DOMAIN") == 0 && fields[i].length < 0)
      domain = fields[i].value;
  if (g_log_writer_default_would_drop (level, domain))
    return G_LOG_WRITER_HANDLED;
  copy = g_new (GLogField, n_fields);
  for (gsize i = 0; i < n_fields; i++)
    {
      copy[i] = fields[i];
      if (message == NULL && strcmp (fields[i].key, "MESSAGE") == 0 && fields[i].value != NULL)
        {
          const char *s = fields[i].value;
          gsize len = fields[i].length < 0 ? strlen (s) : (gsize)fields[i].length;
          GString *shown = g_string_new (NULL);

          fb_text_append_safe_full (shown, s, len, FB_TEXT_INLINE | FB_TEXT_ELIDE);
          message = g_string_free (shown, FALSE);
          copy[i].value = message;
          copy[i].length = -1;
        }
    }
  return g_log_writer_default (level, copy, n_fields, user_data);
}
