/* fusebox — where each field of a policy's JSON text starts.
 *
 * json-glib builds the tree but forgets positions, and a message that names
 * the line and column of a mistake is worth more than any other.  So the text
 * is tokenized once more here, strictly (RFC 8259: no comments, no trailing
 * commas, no single quotes, valid UTF-8, no NUL), and the position of every
 * value and key is recorded under its JSON path.  This tokenizer runs before
 * json-glib sees the text: it is the syntax authority (its errors carry the
 * position), it bounds the nesting depth so that no recursive parser can be
 * driven into a stack overflow, and it refuses duplicate keys, which json-glib
 * would resolve silently (a typo must never weaken a policy).
 */
#include "policy/policy-private.h"
#include "policy/util.h"

struct FbPolicyPosIndex
{
  GHashTable *values; /* JSON path → FbPolicyPos */
  GHashTable *keys;   /* JSON path of a member → FbPolicyPos of its key */
};

typedef struct
{
  const char *p;
  const char *end;
  guint line;
  guint col;
  guint depth;
  const char *origin;
  FbPolicyPosIndex *index;
  GError **error;
} Lexer;

char *
fb_policy_json_path_member (const char *parent, const char *key)
{
  bool ident = g_ascii_isalpha (key[0]) || key[0] == '_';

  for (const char *k = key; ident && *k != '\0'; k++)
    ident = g_ascii_isalnum (*k) || *k == '_';
  if (!ident)
    return g_strdup_printf ("%s[%s]", parent, key);
  if (parent[0] == '\0')
    return g_strdup (key);
  return g_strdup_printf ("%s.%s", parent, key);
}

static bool G_GNUC_PRINTF (2, 3) fail (Lexer *lx, const char *format, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, format);
  msg = g_strdup_vprintf (format, ap);
  va_end (ap);
  g_set_error (lx->error, FB_POLICY_ERROR, FB_POLICY_ERROR_SYNTAX, "%s:%u:%u: invalid JSON: %s", lx->origin, lx->line,
               lx->col, msg);
  return false;
}

/* Consume one byte; columns count characters, so continuation bytes of a
 * UTF-8 sequence do not move the column. */
static void
advance (Lexer *lx)
{
  guchar c = (guchar)*lx->p++;

  if (c == '\n')
    {
      lx->line++;
      lx->col = 1;
    }
  else if ((c & 0xc0) != 0x80)
    lx->col++;
}

static void
skip_ws (Lexer *lx)
{
  while (lx->p < lx->end && (*lx->p == ' ' || *lx->p == '\t' || *lx->p == '\n' || *lx->p == '\r'))
    advance (lx);
}

static void
record (GHashTable *table, const char *path, const Lexer *lx)
{
  FbPolicyPos *pos = g_new (FbPolicyPos, 1);

  pos->line = lx->line;
  pos->col = lx->col;
  g_hash_table_replace (table, g_strdup (path), pos);
}

static const char *
describe (const Lexer *lx)
{
  static const char *const names[] = { "end of text", "an unexpected character" };

  return lx->p >= lx->end ? names[0] : names[1];
}

/* A string at lx->p (the opening quote); its decoded text goes to OUT when
 * not NULL.  The lexer moves to its end, or to the mistake. */
static bool
lex_string (Lexer *lx, GString *out)
{
  const char *at;
  FbJsonStringStatus st;

  advance (lx); /* " */
  st = fb_json_string_decode (lx->p, lx->end, true, out, &at);
  /* No raw newline in a string: the column moves, the line stays. */
  while (lx->p < at)
    advance (lx);
  switch (st)
    {
      case FB_JSON_STRING_OK:
        return true;
      case FB_JSON_STRING_CONTROL:
        return fail (lx, "control character U+%04X in a string; write it as an escape", (guchar)*lx->p);
      case FB_JSON_STRING_UNTERMINATED:
      case FB_JSON_STRING_BAD_HEX:
      case FB_JSON_STRING_UNPAIRED_HIGH:
      case FB_JSON_STRING_LONE_LOW:
      case FB_JSON_STRING_NUL:
      case FB_JSON_STRING_UNKNOWN_ESCAPE:
      case FB_JSON_STRING_BAD_UTF8:
        return fail (lx, "%s", fb_json_string_why[st].policy);
    }
  g_assert_not_reached ();
}

static bool
lex_number (Lexer *lx)
{
  Lexer start = *lx;
  guint digits = 0;

  if (*lx->p == '-')
    advance (lx);
  if (lx->p >= lx->end || !g_ascii_isdigit (*lx->p))
    return fail (lx, "a number needs a digit here");
  if (*lx->p == '0')
    {
      advance (lx);
      if (lx->p < lx->end && g_ascii_isdigit (*lx->p))
        return fail (lx, "a number does not start with 0");
    }
  while (lx->p < lx->end && g_ascii_isdigit (*lx->p))
    {
      advance (lx);
      digits++;
    }
  /* json-glib would wrap an integer beyond 64 bits; no policy field needs one. */
  if (digits >= 18)
    {
      *lx = start;
      return fail (lx, "the number is too large");
    }
  if (lx->p < lx->end && *lx->p == '.')
    {
      advance (lx);
      if (lx->p >= lx->end || !g_ascii_isdigit (*lx->p))
        return fail (lx, "a number needs a digit after \".\"");
      while (lx->p < lx->end && g_ascii_isdigit (*lx->p))
        advance (lx);
    }
  if (lx->p < lx->end && (*lx->p == 'e' || *lx->p == 'E'))
    {
      advance (lx);
      if (lx->p < lx->end && (*lx->p == '+' || *lx->p == '-'))
        advance (lx);
      if (lx->p >= lx->end || !g_ascii_isdigit (*lx->p))
        return fail (lx, "a number needs a digit in its exponent");
      while (lx->p < lx->end && g_ascii_isdigit (*lx->p))
        advance (lx);
    }
  return true;
}

static bool lex_value (Lexer *lx, const char *path);

/* Where an object or array goes on: past a ',' to the next member or
 * element, past CLOSE at its end, or a mistake (failed). */
typedef enum
{
  LIST_NEXT,
  LIST_END,
  LIST_FAILED,
} ListStep;

/* Past the opening bracket: LIST_END when CLOSE follows (empty). */
static ListStep
list_open (Lexer *lx, char close)
{
  advance (lx);
  skip_ws (lx);
  if (lx->p < lx->end && *lx->p == close)
    {
      advance (lx);
      return LIST_END;
    }
  return LIST_NEXT;
}

/* A member's value or an element at PATH, and what follows it (ITEM, for
 * the message). */
static ListStep
list_item (Lexer *lx, const char *path, char close, const char *item)
{
  if (!lex_value (lx, path))
    return LIST_FAILED;
  skip_ws (lx);
  if (lx->p < lx->end && *lx->p == ',')
    {
      advance (lx);
      skip_ws (lx);
      if (lx->p < lx->end && *lx->p == close)
        {
          fail (lx, "trailing comma before \"%c\"", close);
          return LIST_FAILED;
        }
      return LIST_NEXT;
    }
  if (lx->p < lx->end && *lx->p == close)
    {
      advance (lx);
      return LIST_END;
    }
  fail (lx, "expected \",\" or \"%c\" after %s, found %s", close, item, describe (lx));
  return LIST_FAILED;
}

static bool
lex_object (Lexer *lx, const char *path)
{
  ListStep step = list_open (lx, '}');

  while (step == LIST_NEXT)
    {
      g_autoptr (GString) key = g_string_new (NULL);
      g_autofree char *member = NULL;
      Lexer at_key;

      if (lx->p >= lx->end || *lx->p != '"')
        return fail (lx, "expected a key in double quotes, found %s", describe (lx));
      at_key = *lx;
      if (!lex_string (lx, key))
        return false;
      member = fb_policy_json_path_member (path, key->str);
      if (g_hash_table_contains (lx->index->keys, member))
        {
          /* Valid JSON, but json-glib would keep one of the two silently. */
          g_set_error (lx->error, FB_POLICY_ERROR, FB_POLICY_ERROR_SCHEMA,
                       "%s:%u:%u: %s: duplicate key; write each key once per object", lx->origin, at_key.line,
                       at_key.col, member);
          return false;
        }
      record (lx->index->keys, member, &at_key);
      skip_ws (lx);
      if (lx->p >= lx->end || *lx->p != ':')
        return fail (lx, "expected \":\" after the key \"%s\"", key->str);
      advance (lx);
      step = list_item (lx, member, '}', "a member");
    }
  return step == LIST_END;
}

static bool
lex_array (Lexer *lx, const char *path)
{
  ListStep step = list_open (lx, ']');

  for (guint i = 0; step == LIST_NEXT; i++)
    {
      g_autofree char *element = g_strdup_printf ("%s[%u]", path, i);

      step = list_item (lx, element, ']', "an element");
    }
  return step == LIST_END;
}

static bool
lex_word (Lexer *lx, const char *word)
{
  gsize n = strlen (word);

  if ((gsize)(lx->end - lx->p) < n || memcmp (lx->p, word, n) != 0)
    return fail (lx, "expected a value (object, array, string, number, true, false or null)");
  for (gsize i = 0; i < n; i++)
    advance (lx);
  return true;
}

static bool
lex_value (Lexer *lx, const char *path)
{
  bool ok;

  skip_ws (lx);
  if (lx->p >= lx->end)
    return fail (lx, "expected a value, found the end of the text");
  record (lx->index->values, path, lx);
  switch (*lx->p)
    {
      case '{':
      case '[':
        if (++lx->depth > FB_POLICY_MAX_JSON_DEPTH)
          return fail (lx, "nested deeper than %d levels", FB_POLICY_MAX_JSON_DEPTH);
        ok = *lx->p == '{' ? lex_object (lx, path) : lex_array (lx, path);
        lx->depth--;
        return ok;
      case '"':
        return lex_string (lx, NULL);
      case 't':
        return lex_word (lx, "true");
      case 'f':
        return lex_word (lx, "false");
      case 'n':
        return lex_word (lx, "null");
      default:
        if (*lx->p == '-' || g_ascii_isdigit (*lx->p))
          return lex_number (lx);
        return fail (lx, "expected a value (object, array, string, number, true, false or null)");
    }
}

FbPolicyPosIndex *
fb_policy_pos_index_build (const char *text, gsize len, const char *origin, GError **error)
{
  g_autoptr (FbPolicyPosIndex) index = g_new0 (FbPolicyPosIndex, 1);
  Lexer lx = {
    .p = text,
    .end = text + len,
    .line = 1,
    .col = 1,
    .origin = origin != NULL ? origin : "<data>",
    .index = index,
    .error = error,
  };

  index->values = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  index->keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  skip_ws (&lx);
  if (lx.p >= lx.end)
    {
      fail (&lx, "the text is empty; a policy is a JSON object");
      return NULL;
    }
  if (!lex_value (&lx, ""))
    return NULL;
  skip_ws (&lx);
  if (lx.p < lx.end)
    {
      fail (&lx, "unexpected text after the end of the policy");
      return NULL;
    }
  return g_steal_pointer (&index);
}

void
fb_policy_pos_index_free (FbPolicyPosIndex *index)
{
  if (index == NULL)
    return;
  g_clear_pointer (&index->values, g_hash_table_unref);
  g_clear_pointer (&index->keys, g_hash_table_unref);
  g_free (index);
}

bool
fb_policy_pos_index_lookup (const FbPolicyPosIndex *index, const char *json_path, bool key, FbPolicyPos *ret)
{
  const FbPolicyPos *pos;

  if (index == NULL)
    return false;
  pos = g_hash_table_lookup (key ? index->keys : index->values, json_path);
  if (pos == NULL)
    return false;
  *ret = *pos;
  return true;
}
