/* fusebox — the remote API's JSON decoder.
 *
 * Why not json-glib's parser: it sets up a GScanner for every text it
 * parses, which costs tens of microseconds even for a 400-byte request (a
 * third of a whole fs call's budget, measured in docs/performance.md), and
 * it turns some invalid escapes ("\6") into raw bytes.  This is a plain
 * recursive-descent parser for RFC 8259 JSON that builds the same JsonNode
 * trees (integers as G_TYPE_INT64, other numbers as doubles, duplicate keys:
 * the last wins), strict where json-glib is lax: invalid escapes, unpaired
 * surrogates, control characters in strings, leading zeros, integers
 * outside int64, trailing text and nesting deeper than FB_RPC_JSON_DEPTH_MAX
 * are errors.
 *
 * Threat model: the text comes from a network client.  Every read is
 * bounds-checked against the length, recursion is bounded, and nothing is
 * allocated beyond the tree itself (whose size is bounded by the text's,
 * itself bounded by FB_RPC_MESSAGE_MAX).  Fuzzed (tests/fuzz/fuzz-rpc.c),
 * which also checks that whatever both parsers accept, they read the same.
 * No state: callable from any thread. */
#include "ipc/ipc-rpc-private.h"
#include "policy/util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FB_RPC_JSON_DEPTH_MAX 64

typedef struct
{
  const char *p;
  const char *end;
  const char *start;
  char *error;
  /* The text of the top-level object's params.sandbox value (the last one,
   * as in the tree: duplicate keys, the last wins), for the sandbox cache's
   * key: the same bytes always decode to the same tree. */
  bool in_params;
  const char *sandbox_start;
  const char *sandbox_end;
  /* A tree to reuse for params.sandbox when its text is this one again. */
  const FbRpcJsonReuse *reuse;
  bool reused;
} Parser;

static JsonNode *parse_value (Parser *ps, guint depth);

/* Bytes that stand for themselves in a string: not '"', '\\' or a
 * control character. */
static const bool plain_char[256] = {
#define R16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
  R16 (false), R16 (false), /* 0x00-0x1f */
  true,        true,        false,      true,       true,       true,       true,       true,
  true,        true,        true,       true,       true,       true,       true,       true, /* 0x20-0x2f */
  R16 (true),  R16 (true),                                                                    /* 0x30-0x4f */
  true,        true,        true,       true,       true,       true,       true,       true,
  true,        true,        true,       true,       false,      true,       true,       true, /* 0x50-0x5f */
  R16 (true),  R16 (true),  R16 (true), R16 (true), R16 (true), R16 (true), R16 (true), R16 (true),
  R16 (true),  R16 (true), /* 0x60-0xff */
#undef R16
};

static void
fail (Parser *ps, const char *what)
{
  if (ps->error == NULL)
    ps->error = g_strdup_printf ("%s at byte %" G_GSIZE_FORMAT, what, (gsize)(ps->p - ps->start));
}

static void
skip_ws (Parser *ps)
{
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
    ps->p++;
}

/* Consume C when it is next. */
static bool
take (Parser *ps, char c)
{
  if (ps->p < ps->end && *ps->p == c)
    {
      ps->p++;
      return true;
    }
  return false;
}

/* A string, the opening quote at ps->p; returns it NUL-terminated (a \u0000
 * escape is refused: C strings can't hold it).  The message's UTF-8 was
 * checked as a whole before parsing. */
static char *
parse_string (Parser *ps)
{
  const char *s;
  const char *at;
  GString *out;
  FbJsonStringStatus st;

  ps->p++; /* the quote */
  s = ps->p;
  /* The common case: no escape, copied at once.  Eight bytes at a time
   * while none is a quote, a backslash or a control character (base64
   * payloads of megabytes go through here), then a table lookup per byte. */
  while (ps->end - ps->p >= 8)
    {
      guint64 w, q, b;
      memcpy (&w, ps->p, 8);
      q = w ^ 0x2222222222222222ull; /* '"' -> 0 */
      b = w ^ 0x5c5c5c5c5c5c5c5cull; /* '\\' -> 0 */
      /* A byte below 0x20, or a zero byte of q or b, sets its high bit
       * here (bytes >= 0x80 never do: ~w clears it). */
      if ((((w - 0x2020202020202020ull) | (q - 0x0101010101010101ull) | (b - 0x0101010101010101ull)) & ~w &
           0x8080808080808080ull) != 0)
        break;
      ps->p += 8;
    }
  while (ps->p < ps->end && plain_char[(unsigned char)*ps->p])
    ps->p++;
  if (ps->p < ps->end && *ps->p == '"')
    {
      char *r = g_strndup (s, (gsize)(ps->p - s));
      ps->p++;
      return r;
    }
  /* An escape (or a mistake): the shared strict decoder from here on. */
  out = g_string_new_len (s, ps->p - s);
  st = fb_json_string_decode (ps->p, ps->end, false, out, &at);
  ps->p = at;
  if (st == FB_JSON_STRING_OK)
    return g_string_free (out, FALSE);
  fail (ps, fb_json_string_why[st].rpc);
  g_string_free (out, TRUE);
  return NULL;
}

/* One digit or more (an integer part's, a fraction's, an exponent's);
 * false, with the error, when there is none. */
static bool
take_digits (Parser *ps)
{
  if (ps->p >= ps->end || !g_ascii_isdigit (*ps->p))
    {
      fail (ps, "invalid number");
      return false;
    }
  while (ps->p < ps->end && g_ascii_isdigit (*ps->p))
    ps->p++;
  return true;
}

static JsonNode *
parse_number (Parser *ps)
{
  const char *s = ps->p;
  bool is_int = true;
  char buf[64];
  char *endp;
  gsize n;

  take (ps, '-');
  if (ps->p + 1 < ps->end && ps->p[0] == '0' && g_ascii_isdigit (ps->p[1]))
    {
      fail (ps, "leading zero in a number");
      return NULL;
    }
  if (!take_digits (ps))
    return NULL;
  if (take (ps, '.'))
    {
      is_int = false;
      if (!take_digits (ps))
        return NULL;
    }
  if (take (ps, 'e') || take (ps, 'E'))
    {
      is_int = false;
      if (!take (ps, '+'))
        take (ps, '-');
      if (!take_digits (ps))
        return NULL;
    }
  n = (gsize)(ps->p - s);
  if (n >= sizeof buf)
    {
      /* Longer than any number a message needs. */
      fail (ps, "number too long");
      return NULL;
    }
  memcpy (buf, s, n);
  buf[n] = '\0';
  if (is_int)
    {
      gint64 v;
      errno = 0;
      v = g_ascii_strtoll (buf, &endp, 10);
      if (errno == 0 && *endp == '\0')
        return json_node_init_int (json_node_alloc (), v);
      /* Out of int64's range.  json-glib 1.6 wraps such a literal to a
       * wrong integer and a double would lose digits: neither reads what
       * the client wrote, so refuse it. */
      fail (ps, "integer out of range");
      return NULL;
    }
  {
    double d = g_ascii_strtod (buf, &endp);
    if (*endp != '\0' || !isfinite (d))
      {
        fail (ps, "number out of range");
        return NULL;
      }
    return json_node_init_double (json_node_alloc (), d);
  }
}

static bool
literal (Parser *ps, const char *word)
{
  gsize n = strlen (word);

  if ((gsize)(ps->end - ps->p) < n || memcmp (ps->p, word, n) != 0)
    return false;
  ps->p += n;
  return true;
}

/* json_node_init_object/_array take a reference of their own: hand ours
 * over, or every object and array of every message stays allocated. */
static JsonNode *
object_node (JsonObject *obj)
{
  JsonNode *node = json_node_init_object (json_node_alloc (), obj);

  json_object_unref (obj);
  return node;
}

static JsonNode *
array_node (JsonArray *arr)
{
  JsonNode *node = json_node_init_array (json_node_alloc (), arr);

  json_array_unref (arr);
  return node;
}

/* A harness sends the same sandbox with every call: ~30 nodes, a third of
 * the decoding.  When the text at ps->p is the previous sandbox's text T,
 * followed by ',' or '}', the value here is exactly T (T is a complete JSON
 * value, and only a number could run on into what follows, which neither
 * character can continue), and T always decodes to the same tree: share it.
 * It is sealed, so nothing can change it under another message. */
static JsonNode *
reuse_sandbox (Parser *ps)
{
  const FbRpcJsonReuse *r = ps->reuse;
  const char *after;

  if (r == NULL || r->node == NULL || (gsize)(ps->end - ps->p) <= r->len || memcmp (ps->p, r->text, r->len) != 0)
    return NULL;
  after = ps->p + r->len;
  while (after < ps->end && (*after == ' ' || *after == '\t' || *after == '\n' || *after == '\r'))
    after++;
  if (after >= ps->end || (*after != ',' && *after != '}'))
    return NULL;
  ps->p += r->len;
  ps->reused = true;
  return json_node_ref (r->node);
}

/* After a member or an element: a ',' (another follows), CLOSE (the
 * object or array ends) or a mistake. */
typedef enum
{
  LIST_NEXT,
  LIST_END,
  LIST_ERROR,
} ListStep;

/* Past the opening bracket at ps->p: LIST_END for an empty object or
 * array (CLOSE follows), else LIST_NEXT. */
static ListStep
list_open (Parser *ps, char close)
{
  ps->p++;
  skip_ws (ps);
  return take (ps, close) ? LIST_END : LIST_NEXT;
}

static ListStep
list_step (Parser *ps, char close)
{
  skip_ws (ps);
  if (take (ps, ','))
    return LIST_NEXT;
  if (take (ps, close))
    return LIST_END;
  fail (ps, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
  return LIST_ERROR;
}

/* One member of an object, "name": value, added to OBJ; false on a
 * mistake.  The top-level object's params.sandbox text is noted for the
 * sandbox cache. */
static bool
parse_member (Parser *ps, guint depth, JsonObject *obj)
{
  g_autofree char *key = NULL;
  JsonNode *value;

  skip_ws (ps);
  if (ps->p >= ps->end || *ps->p != '"')
    {
      fail (ps, "expected a member name");
      return false;
    }
  key = parse_string (ps);
  if (key == NULL)
    return false;
  skip_ws (ps);
  if (!take (ps, ':'))
    {
      fail (ps, "expected ':'");
      return false;
    }
  if (depth == 0 && strcmp (key, "params") == 0)
    {
      ps->in_params = true;
      ps->sandbox_start = ps->sandbox_end = NULL;
      value = parse_value (ps, depth + 1);
      ps->in_params = false;
    }
  else if (depth == 1 && ps->in_params && strcmp (key, "sandbox") == 0)
    {
      skip_ws (ps);
      ps->sandbox_start = ps->p;
      value = reuse_sandbox (ps);
      if (value == NULL)
        value = parse_value (ps, depth + 1);
      ps->sandbox_end = ps->p;
    }
  else
    value = parse_value (ps, depth + 1);
  if (value == NULL)
    return false;
  json_object_set_member (obj, key, value);
  return true;
}

/* One element of an array, added to ARR; false on a mistake. */
static bool
parse_element (Parser *ps, guint depth, JsonArray *arr)
{
  JsonNode *element = parse_value (ps, depth + 1);

  if (element == NULL)
    return false;
  json_array_add_element (arr, element);
  return true;
}

/* An object ('{', CLOSE '}') or an array ('[', CLOSE ']'), the opening
 * bracket at ps->p: its members or elements, a ',' between two, up to
 * CLOSE; NULL, and what was read dropped, on a mistake. */
static JsonNode *
parse_list (Parser *ps, guint depth, char close)
{
  JsonNode *node = close == '}' ? object_node (json_object_new ()) : array_node (json_array_new ());
  ListStep step = list_open (ps, close);

  while (step == LIST_NEXT)
    {
      bool ok = close == '}' ? parse_member (ps, depth, json_node_get_object (node))
                             : parse_element (ps, depth, json_node_get_array (node));
      if (!ok)
        break;
      step = list_step (ps, close);
    }
  if (step == LIST_END)
    return node;
  json_node_unref (node);
  return NULL;
}

static JsonNode *
parse_value (Parser *ps, guint depth)
{
  skip_ws (ps);
  if (depth > FB_RPC_JSON_DEPTH_MAX)
    {
      fail (ps, "nested too deeply");
      return NULL;
    }
  if (ps->p >= ps->end)
    {
      fail (ps, "unexpected end of text");
      return NULL;
    }
  switch (*ps->p)
    {
      case '{':
        return parse_list (ps, depth, '}');
      case '[':
        return parse_list (ps, depth, ']');
      case '"':
        {
          char *s = parse_string (ps);
          JsonNode *n;
          if (s == NULL)
            return NULL;
          n = json_node_init_string (json_node_alloc (), s);
          g_free (s);
          return n;
        }
      case 't':
        if (literal (ps, "true"))
          return json_node_init_boolean (json_node_alloc (), TRUE);
        break;
      case 'f':
        if (literal (ps, "false"))
          return json_node_init_boolean (json_node_alloc (), FALSE);
        break;
      case 'n':
        if (literal (ps, "null"))
          return json_node_init_null (json_node_alloc ());
        break;
      default:
        if (*ps->p == '-' || g_ascii_isdigit (*ps->p))
          return parse_number (ps);
        break;
    }
  fail (ps, "unexpected character");
  return NULL;
}

JsonNode *
fb_rpc_json_parse (const char *text, gsize len, char **ret_error)
{
  return fb_rpc_json_parse_message (text, len, NULL, NULL, NULL, ret_error);
}

void
fb_rpc_json_reuse_clear (FbRpcJsonReuse *reuse)
{
  g_clear_pointer (&reuse->text, g_free);
  g_clear_pointer (&reuse->node, json_node_unref);
  reuse->len = 0;
}

/* Keep params.sandbox of ROOT (its text at TEXT) for the next message. */
static void
reuse_keep (FbRpcJsonReuse *reuse, JsonNode *root, const char *text, gsize len)
{
  JsonObject *params;
  JsonNode *node;

  fb_rpc_json_reuse_clear (reuse);
  if (len > FB_RPC_JSON_REUSE_MAX ||
      (params = json_object_get_object_member (json_node_get_object (root), "params")) == NULL ||
      (node = json_object_get_member (params, "sandbox")) == NULL)
    return;
  json_node_seal (node);
  reuse->node = json_node_ref (node);
  reuse->text = g_strndup (text, len);
  reuse->len = len;
}

JsonNode *
fb_rpc_json_parse_message (const char *text, gsize len, FbRpcJsonReuse *reuse, const char **ret_sandbox,
                           gsize *ret_sandbox_len, char **ret_error)
{
  Parser ps = { text, text + len, text, NULL, false, NULL, NULL, reuse, false };
  JsonNode *root = parse_value (&ps, 0);
  const char *sandbox = NULL;

  if (root != NULL && JSON_NODE_HOLDS_OBJECT (root) && ps.sandbox_start != NULL)
    sandbox = ps.sandbox_start;
  if (ret_sandbox != NULL)
    {
      *ret_sandbox = sandbox;
      *ret_sandbox_len = sandbox != NULL ? (gsize)(ps.sandbox_end - ps.sandbox_start) : 0;
    }
  if (reuse != NULL && sandbox != NULL && !ps.reused && ps.error == NULL)
    {
      skip_ws (&ps);
      if (ps.p == ps.end)
        reuse_keep (reuse, root, sandbox, (gsize)(ps.sandbox_end - ps.sandbox_start));
    }

  if (root != NULL)
    {
      skip_ws (&ps);
      if (ps.p != ps.end)
        {
          fail (&ps, "unexpected text after the value");
          json_node_unref (root);
          root = NULL;
        }
    }
  if (root == NULL)
    {
      if (ret_error != NULL)
        *ret_error = g_steal_pointer (&ps.error);
      g_free (ps.error);
    }
  return root;
}
