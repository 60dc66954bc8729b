/* fusebox — the one strict decoder of a JSON string's body, shared by the
 * policy's tokenizer (which turns its status into a message at line:column)
 * and the remote API's parser (which names the byte); and the members every
 * layer writes with a JsonBuilder.
 *
 * Called from any thread; no state. */
#include "policy/util.h"

#include <string.h>

static int
hex_digit (char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Four hexadecimal digits at *P, which moves past them; on failure *P is at
 * the first that is not one. */
static bool
hex4 (const char **p, const char *end, gunichar *ret)
{
  gunichar v = 0;

  for (int i = 0; i < 4; i++, (*p)++)
    {
      int d = *p < end ? hex_digit (**p) : -1;

      if (d < 0)
        return false;
      v = (v << 4) | (gunichar)d;
    }
  *ret = v;
  return true;
}

/* A \u escape, P just past its "u". */
static FbJsonStringStatus
decode_u (const char **p, const char *end, const char *backslash, gunichar *ret)
{
  gunichar u;

  if (!hex4 (p, end, &u))
    return FB_JSON_STRING_BAD_HEX;
  if (u >= 0xd800 && u <= 0xdbff)
    {
      gunichar low;

      if (end - *p < 2 || (*p)[0] != '\\' || (*p)[1] != 'u')
        return FB_JSON_STRING_UNPAIRED_HIGH;
      *p += 2;
      if (!hex4 (p, end, &low))
        return FB_JSON_STRING_BAD_HEX;
      if (low < 0xdc00 || low > 0xdfff)
        return FB_JSON_STRING_UNPAIRED_HIGH;
      u = 0x10000 + ((u - 0xd800) << 10) + (low - 0xdc00);
    }
  else if (u >= 0xdc00 && u <= 0xdfff)
    return FB_JSON_STRING_LONE_LOW;
  if (u == 0)
    {
      *p = backslash;
      return FB_JSON_STRING_NUL;
    }
  *ret = u;
  return FB_JSON_STRING_OK;
}

const FbJsonStringWhy fb_json_string_why[] = {
  [FB_JSON_STRING_UNTERMINATED] = { "unterminated string", "unterminated string" },
  [FB_JSON_STRING_CONTROL] = { "control character in a string", NULL },
  [FB_JSON_STRING_BAD_HEX] = { "invalid \\u escape", "\\u needs four hexadecimal digits" },
  [FB_JSON_STRING_UNPAIRED_HIGH] = { "unpaired surrogate in a \\u escape",
                                     "a \\u high surrogate must be followed by a \\u low surrogate" },
  [FB_JSON_STRING_LONE_LOW] = { "unpaired surrogate in a \\u escape", "lone \\u low surrogate" },
  [FB_JSON_STRING_NUL] = { "\\u0000 in a string", "\\u0000 is not allowed: paths and names cannot hold NUL" },
  [FB_JSON_STRING_UNKNOWN_ESCAPE] = { "invalid escape in a string",
                                      "unknown escape; valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX" },
  [FB_JSON_STRING_BAD_UTF8] = { "invalid UTF-8 in a string", "invalid UTF-8" },
};

FbJsonStringStatus
fb_json_string_decode (const char *p, const char *end, bool check_utf8, GString *out, const char **ret_at)
{
  static const char from[] = "\"\\/bfnrt";
  static const char to[] = "\"\\/\b\f\n\r\t";
  FbJsonStringStatus st = FB_JSON_STRING_UNTERMINATED;

  while (p < end)
    {
      guchar c = (guchar)*p;
      const char *plain = p;

      /* A run of bytes that stand for themselves, copied at once. */
      while (p < end && (guchar)*p >= 0x20 && *p != '"' && *p != '\\' && (!check_utf8 || (guchar)*p < 0x80))
        p++;
      if (p > plain)
        {
          if (out != NULL)
            g_string_append_len (out, plain, p - plain);
          continue;
        }
      if (c == '"')
        {
          *ret_at = p + 1;
          return FB_JSON_STRING_OK;
        }
      if (c < 0x20)
        {
          st = FB_JSON_STRING_CONTROL;
          break;
        }
      if (c == '\\')
        {
          const char *backslash = p++;
          const char *e;
          gunichar u;

          if (p >= end)
            break;
          if (*p == 'u')
            {
              p++;
              FbJsonStringStatus escape = decode_u (&p, end, backslash, &u);

              if (escape != FB_JSON_STRING_OK)
                {
                  st = escape;
                  break;
                }
              if (out != NULL)
                g_string_append_unichar (out, u);
              continue;
            }
          e = *p != '\0' ? strchr (from, *p) : NULL;
          if (e == NULL)
            {
              p = backslash;
              st = FB_JSON_STRING_UNKNOWN_ESCAPE;
              break;
            }
          if (out != NULL)
            g_string_append_c (out, to[e - from]);
          p++;
          continue;
        }
      /* c >= 0x80 and check_utf8 */
      {
        gunichar u = g_utf8_get_char_validated (p, MIN (end - p, 4));
        int n;

        if (u == (gunichar)-1 || u == (gunichar)-2)
          {
            st = FB_JSON_STRING_BAD_UTF8;
            break;
          }
        n = g_unichar_to_utf8 (u, NULL);
        if (out != NULL)
          g_string_append_len (out, p, n);
        p += n;
      }
    }
  *ret_at = p;
  return st;
}

void
fb_json_builder_add_int_member (JsonBuilder *b, const char *name, gint64 value)
{
  json_builder_set_member_name (b, name);
  json_builder_add_int_value (b, value);
}

void
fb_json_builder_add_string_member (JsonBuilder *b, const char *name, const char *value)
{
  json_builder_set_member_name (b, name);
  if (value != NULL)
    json_builder_add_string_value (b, value);
  else
    json_builder_add_null_value (b);
}

void
fb_json_builder_add_strings_member (JsonBuilder *b, const char *name, const char *const *strv, gssize n)
{
  json_builder_set_member_name (b, name);
  json_builder_begin_array (b);
  for (gssize i = 0; strv != NULL && (n < 0 ? strv[i] != NULL : i < n); i++)
    json_builder_add_string_value (b, strv[i]);
  json_builder_end_array (b);
}

const char *
fb_json_node_kind (JsonNode *node, const char *integer)
{
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return "null";
  if (JSON_NODE_HOLDS_OBJECT (node))
    return "an object";
  if (JSON_NODE_HOLDS_ARRAY (node))
    return "an array";
  switch (json_node_get_value_type (node))
    {
      case G_TYPE_STRING:
        return "a string";
      case G_TYPE_BOOLEAN:
        return "a boolean";
      case G_TYPE_INT64:
        return integer;
      case G_TYPE_DOUBLE:
        return "a number";
      default:
        return "a value";
    }
}
