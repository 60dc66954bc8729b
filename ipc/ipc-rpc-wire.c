/* fusebox — the remote API's wire format: messages decoded and encoded,
 * errors, base64, file URIs and typed parameters.
 *
 * Messages (Codex's exec-server, docs/api.md): JSON-RPC 2.0 without the
 * "jsonrpc" member, one per WebSocket frame or per line.  Requests {id,
 * method, params}, notifications {method, params}, answers {id, result} or
 * {id, error: {code, message, data?}}.  A message that can't be decoded is
 * answered on id -1, as Codex does, and the connection stays usable (Codex
 * closes it on some of these; we are more forgiving, never less).
 *
 * Threat model: the bytes come from a client.  Every message is bounded
 * (FB_RPC_MESSAGE_MAX) and every member is type-checked before use.  No
 * state but tables built once: callable from any thread (the workers decode
 * messages, ipc-rpc-pipeline.c). */
#include "ipc/ipc-rpc-private.h"

#include <stdarg.h>
#include <string.h>

/* --- errors ----------------------------------------------------------------- */

void
fb_rpc_error_set (FbRpcError *error, int code, const char *format, ...)
{
  va_list ap;

  if (error == NULL)
    return;
  fb_rpc_error_clear (error);
  error->code = code;
  va_start (ap, format);
  error->message = g_strdup_vprintf (format, ap);
  va_end (ap);
}

void
fb_rpc_error_clear (FbRpcError *error)
{
  g_clear_pointer (&error->message, g_free);
  g_clear_pointer (&error->data, json_node_unref);
  error->code = 0;
}

char *
fb_rpc_os_error_message (int err)
{
  /* Rust's io::Error Display: the C library's text and the number. */
  return g_strdup_printf ("%s (os error %d)", g_strerror (err), err);
}

JsonNode *
fb_rpc_object_node (JsonObject *object)
{
  JsonNode *node = json_node_init_object (json_node_alloc (), object);

  /* json_node_init_object took a reference of its own. */
  json_object_unref (object);
  return node;
}

/* --- decoding --------------------------------------------------------------- */

void
fb_rpc_message_clear (FbRpcMessage *message)
{
  g_clear_pointer (&message->root, json_node_unref);
  message->id = NULL;
  message->method = NULL;
  message->params = NULL;
}

static bool
id_is_valid (JsonNode *id)
{
  if (JSON_NODE_HOLDS_VALUE (id))
    {
      GType t = json_node_get_value_type (id);
      return t == G_TYPE_INT64 || t == G_TYPE_STRING;
    }
  return false;
}

bool fb_rpc_parse_fast = true;

bool
fb_rpc_message_parse (const char *data, gsize len, FbRpcMessage *ret, int *ret_code, char **ret_message,
                      JsonNode **ret_id)
{
  return fb_rpc_message_parse_reuse (data, len, false, NULL, ret, ret_code, ret_message, ret_id);
}

bool
fb_rpc_message_parse_reuse (const char *data, gsize len, bool utf8_checked, FbRpcJsonReuse *reuse, FbRpcMessage *ret,
                            int *ret_code, char **ret_message, JsonNode **ret_id)
{
  g_autoptr (JsonNode) root = NULL;
  JsonObject *obj;
  JsonNode *id = NULL, *method, *params;
  const char *sandbox_text = NULL;
  gsize sandbox_len = 0;

  *ret_id = NULL;
  memset (ret, 0, sizeof *ret);
  /* an empty message may come as NULL (an empty frame or line): memchr
   * and the parsers want a pointer */
  if (data == NULL)
    data = "";
  if (len > FB_RPC_MESSAGE_MAX)
    {
      *ret_code = FB_RPC_ERROR_INVALID_REQUEST;
      *ret_message =
        g_strdup_printf ("message of %" G_GSIZE_FORMAT " bytes is over the limit of %d bytes", len, FB_RPC_MESSAGE_MAX);
      return false;
    }
  /* JSON text is UTF-8, and a NUL byte has no place in it (it would end
   * a C string early). */
  if (memchr (data, '\0', len) != NULL || (!utf8_checked && !g_utf8_validate (data, len, NULL)))
    {
      *ret_code = FB_RPC_ERROR_INVALID_REQUEST;
      *ret_message = g_strdup ("malformed message: not UTF-8 JSON text");
      return false;
    }
  if (fb_rpc_parse_fast)
    {
      g_autofree char *why = NULL;
      root = fb_rpc_json_parse_message (data, len, reuse, &sandbox_text, &sandbox_len, &why);
      if (root == NULL)
        {
          *ret_code = FB_RPC_ERROR_INVALID_REQUEST;
          *ret_message = g_strdup_printf ("malformed message: %s", why != NULL ? why : "not JSON");
          return false;
        }
    }
  else
    {
      /* json-glib, for the fuzzer to compare with. */
      g_autoptr (JsonParser) parser = json_parser_new ();
      g_autoptr (GError) error = NULL;
      if (!json_parser_load_from_data (parser, data, (gssize)len, &error))
        {
          *ret_code = FB_RPC_ERROR_INVALID_REQUEST;
          /* json-glib 1.6 may fail without setting the error */
          *ret_message = g_strdup_printf ("malformed message: %s", error != NULL ? error->message : "not JSON");
          return false;
        }
      root = json_parser_get_root (parser) != NULL ? json_node_ref (json_parser_get_root (parser)) : NULL;
    }
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      *ret_code = FB_RPC_ERROR_INVALID_REQUEST;
      *ret_message = g_strdup (root != NULL && JSON_NODE_HOLDS_ARRAY (root)
                                 ? "batches are not supported: send one message per frame or line"
                                 : "malformed message: not a JSON object");
      return false;
    }
  obj = json_node_get_object (root);
  if (json_object_has_member (obj, "id"))
    {
      id = json_object_get_member (obj, "id");
      if (!id_is_valid (id))
        {
          *ret_code = FB_RPC_ERROR_INVALID_REQUEST;
          *ret_message = g_strdup ("invalid request: `id` must be an integer or a string");
          return false;
        }
    }
  method = json_object_get_member (obj, "method");
  if (method == NULL)
    {
      if (id != NULL && (json_object_has_member (obj, "result") || json_object_has_member (obj, "error")))
        {
          /* The server never sends requests: a response is a client bug,
           * answered rather than dropped so that it shows. */
          *ret_id = json_node_copy (id);
          *ret_code = FB_RPC_ERROR_INVALID_REQUEST;
          *ret_message = g_strdup ("unexpected response: the server sends no requests");
          return false;
        }
      if (id != NULL)
        *ret_id = json_node_copy (id);
      *ret_code = FB_RPC_ERROR_INVALID_REQUEST;
      *ret_message = g_strdup ("invalid request: missing `method`");
      return false;
    }
  if (!JSON_NODE_HOLDS_VALUE (method) || json_node_get_value_type (method) != G_TYPE_STRING)
    {
      if (id != NULL)
        *ret_id = json_node_copy (id);
      *ret_code = FB_RPC_ERROR_INVALID_REQUEST;
      *ret_message = g_strdup ("invalid request: `method` must be a string");
      return false;
    }
  params = json_object_get_member (obj, "params");
  if (params != NULL && !JSON_NODE_HOLDS_NULL (params) && !JSON_NODE_HOLDS_OBJECT (params))
    {
      if (id != NULL)
        *ret_id = json_node_copy (id);
      *ret_code = FB_RPC_ERROR_INVALID_PARAMS;
      *ret_message =
        g_strdup_printf ("invalid params for %s: `params` must be an object", json_node_get_string (method));
      return false;
    }

  ret->root = json_node_ref (root);
  ret->kind = id != NULL ? FB_RPC_MESSAGE_REQUEST : FB_RPC_MESSAGE_NOTIFICATION;
  ret->id = id;
  ret->method = json_node_get_string (method);
  ret->params = params != NULL && JSON_NODE_HOLDS_OBJECT (params) ? json_node_get_object (params) : NULL;
  if (ret->params != NULL && sandbox_text != NULL)
    {
      ret->sandbox_text = sandbox_text;
      ret->sandbox_len = sandbox_len;
    }
  return true;
}

/* --- encoding --------------------------------------------------------------- */

static void
append_node (GString *out, JsonNode *node)
{
  g_autofree char *text = json_to_string (node, FALSE);
  g_string_append (out, text);
}

/* NODE, or an empty object where there is none. */
static void
append_object (GString *out, JsonNode *node)
{
  if (node != NULL)
    append_node (out, node);
  else
    g_string_append (out, "{}");
}

static void
append_id (GString *out, JsonNode *id)
{
  g_string_append (out, "{\"id\":");
  if (id != NULL)
    append_node (out, id);
  else
    g_string_append (out, "-1");
}

char *
fb_rpc_encode_result (JsonNode *id, JsonNode *result)
{
  GString *out = g_string_sized_new (128);

  append_id (out, id);
  g_string_append (out, ",\"result\":");
  append_object (out, result);
  g_string_append_c (out, '}');
  return g_string_free (out, FALSE);
}

char *
fb_rpc_encode_result_text (JsonNode *id, const char *result_json)
{
  GString *out = g_string_sized_new (strlen (result_json) + 32);

  append_id (out, id);
  g_string_append (out, ",\"result\":");
  g_string_append (out, result_json);
  g_string_append_c (out, '}');
  return g_string_free (out, FALSE);
}

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Two base64 characters for every 12-bit value; built once. */
static char b64_pairs[4096][2];

static void
b64_pairs_init (void)
{
  static gsize done = 0;

  if (g_once_init_enter (&done))
    {
      for (guint i = 0; i < 4096; i++)
        {
          b64_pairs[i][0] = b64_alphabet[i >> 6];
          b64_pairs[i][1] = b64_alphabet[i & 0x3f];
        }
      g_once_init_leave (&done, 1);
    }
}

/* Standard padded base64 of DATA into OUT (room for 4 * ceil(LEN / 3)
 * bytes); returns the length written.  Two table lookups per three bytes:
 * g_base64_encode_step was the first of the worker's own functions in a
 * profile of fs/readFile. */
gsize
fb_rpc_base64_encode_to (const guint8 *data, gsize len, char *out)
{
  char *o = out;
  gsize i = 0;

  b64_pairs_init ();
  for (; i + 3 <= len; i += 3)
    {
      guint32 v = (guint32)data[i] << 16 | (guint32)data[i + 1] << 8 | data[i + 2];
      memcpy (o, b64_pairs[v >> 12], 2);
      memcpy (o + 2, b64_pairs[v & 0xfff], 2);
      o += 4;
    }
  if (len - i == 1)
    {
      guint32 v = (guint32)data[i] << 16;
      memcpy (o, b64_pairs[v >> 12], 2);
      o[2] = '=';
      o[3] = '=';
      o += 4;
    }
  else if (len - i == 2)
    {
      guint32 v = (guint32)data[i] << 16 | (guint32)data[i + 1] << 8;
      memcpy (o, b64_pairs[v >> 12], 2);
      o[2] = b64_alphabet[(v >> 6) & 0x3f];
      o[3] = '=';
      o += 4;
    }
  return (gsize)(o - out);
}

char *
fb_rpc_encode_result_base64 (JsonNode *id, const char *member, const guint8 *data, gsize len)
{
  gsize b64_max = (len / 3 + 1) * 4 + 4;
  GString *out = g_string_sized_new (b64_max + strlen (member) + 64);
  gsize n;

  append_id (out, id);
  if (!g_utf8_validate (out->str, (gssize)out->len, NULL))
    {
      /* Not from a message we decoded (those are UTF-8): as fb_rpc_conn_send
       * would, replace what is not UTF-8. */
      char *valid = g_utf8_make_valid (out->str, (gssize)out->len);
      g_string_assign (out, valid);
      g_free (valid);
    }
  g_string_append (out, ",\"result\":{\"");
  g_string_append (out, member);
  g_string_append (out, "\":\"");
  /* Encoded in place: no intermediate string to allocate and copy. */
  n = out->len;
  g_string_set_size (out, n + b64_max);
  n += fb_rpc_base64_encode_to (data, len, out->str + n);
  g_string_set_size (out, n);
  g_string_append (out, "\"}}");
  return g_string_free (out, FALSE);
}

char *
fb_rpc_encode_error (JsonNode *id, int code, const char *message, JsonNode *data)
{
  GString *out = g_string_sized_new (128);
  g_autoptr (JsonNode) msg = json_node_init_string (json_node_alloc (), message != NULL ? message : "");

  append_id (out, id);
  g_string_append_printf (out, ",\"error\":{\"code\":%d,\"message\":", code);
  append_node (out, msg);
  if (data != NULL)
    {
      g_string_append (out, ",\"data\":");
      append_node (out, data);
    }
  g_string_append (out, "}}");
  return g_string_free (out, FALSE);
}

char *
fb_rpc_encode_notification (const char *method, JsonNode *params)
{
  GString *out = g_string_sized_new (128);
  g_autoptr (JsonNode) m = json_node_init_string (json_node_alloc (), method);

  g_string_append (out, "{\"method\":");
  append_node (out, m);
  g_string_append (out, ",\"params\":");
  append_object (out, params);
  g_string_append_c (out, '}');
  return g_string_free (out, FALSE);
}

/* --- paths and bytes -------------------------------------------------------- */

char *
fb_rpc_path_from_uri (const char *uri, char **ret_message)
{
  g_autofree char *path = NULL;
  const char *p;

  if (uri[0] == '/')
    {
      /* A plain absolute path, taken as is (no escapes to decode). */
      return g_strdup (uri);
    }
  if (g_ascii_strncasecmp (uri, "file://", 7) != 0)
    {
      *ret_message = g_strdup_printf ("`%s` is neither a file:// URI nor an absolute path", uri);
      return NULL;
    }
  p = uri + 7;
  if (*p != '/')
    {
      const char *slash = strchr (p, '/');
      gsize host_len = slash != NULL ? (gsize)(slash - p) : strlen (p);
      if (!(host_len == 9 && g_ascii_strncasecmp (p, "localhost", 9) == 0) || slash == NULL)
        {
          *ret_message = g_strdup_printf ("`%s`: only local file:// URIs are served (no host)", uri);
          return NULL;
        }
      p = slash;
    }
  if (strchr (p, '?') != NULL || strchr (p, '#') != NULL)
    {
      *ret_message = g_strdup_printf ("`%s`: a file URI has no query or fragment", uri);
      return NULL;
    }
  path = g_uri_unescape_string (p, NULL);
  if (path == NULL)
    {
      /* g_uri_unescape_string refuses bad escapes and an escaped NUL. */
      *ret_message = g_strdup_printf ("`%s`: invalid percent-escape", uri);
      return NULL;
    }
  return g_steal_pointer (&path);
}

char *
fb_rpc_path_to_uri (const char *path)
{
  g_autofree char *escaped = g_uri_escape_string (path, "/!$&'()*+,;=:@", FALSE);
  return g_strconcat ("file://", escaped, NULL);
}

/* Standard base64 alphabet → value, 0xff for anything else, and the same
 * value pre-shifted to its place in a quantum's 24 bits (b64_dec[k]: the
 * k-th character of four), anything else 0xff000000; built once. */
static guint8 b64_table[256];
static guint32 b64_dec[4][256];

static void
b64_table_init (void)
{
  static gsize done = 0;

  if (g_once_init_enter (&done))
    {
      memset (b64_table, 0xff, sizeof b64_table);
      for (guint i = 0; i < 64; i++)
        b64_table[(guint8)b64_alphabet[i]] = (guint8)i;
      for (guint c = 0; c < 256; c++)
        for (guint k = 0; k < 4; k++)
          b64_dec[k][c] = b64_table[c] == 0xff ? 0xff000000u : (guint32)b64_table[c] << (18 - 6 * k);
      g_once_init_leave (&done, 1);
    }
}

bool
fb_rpc_base64_decode (const char *text, guint8 **ret, gsize *ret_len)
{
  const guint8 *in = (const guint8 *)text;
  gsize len = strlen (text), pad = 0, full, out_len = 0;
  g_autofree guint8 *out = NULL;

  /* Rust's STANDARD engine, which Codex uses: canonical padded base64. */
  b64_table_init ();
  if (len % 4 != 0)
    return false;
  if (len > 0 && text[len - 1] == '=')
    pad++;
  if (len > 1 && text[len - 2] == '=')
    pad++;
  out = g_malloc (len / 4 * 3 + 1);
  /* Every quantum but a padded last one: four alphabet characters, one
   * lookup each, one check per quantum. */
  full = pad > 0 ? len - 4 : len;
  for (gsize i = 0; i < full; i += 4)
    {
      guint32 v = b64_dec[0][in[i]] | b64_dec[1][in[i + 1]] | b64_dec[2][in[i + 2]] | b64_dec[3][in[i + 3]];
      if (v & 0xff000000u)
        return false;
      out[out_len] = (guint8)(v >> 16);
      out[out_len + 1] = (guint8)(v >> 8);
      out[out_len + 2] = (guint8)v;
      out_len += 3;
    }
  if (pad > 0)
    {
      guint8 a = b64_table[in[full]], b = b64_table[in[full + 1]];
      guint8 c = pad == 1 ? b64_table[in[full + 2]] : 0;
      if ((a | b | c) & 0x80)
        return false;
      out[out_len++] = (guint8)(a << 2 | b >> 4);
      if (pad == 2 && (b & 0xf) != 0)
        return false; /* non-canonical trailing bits */
      if (pad == 1)
        {
          if ((c & 0x3) != 0)
            return false;
          out[out_len++] = (guint8)(b << 4 | c >> 2);
        }
    }
  *ret = g_steal_pointer (&out);
  *ret_len = out_len;
  return true;
}

/* --- parameters ------------------------------------------------------------- */

static JsonNode *
member (JsonObject *params, const char *name)
{
  JsonNode *n = params != NULL ? json_object_get_member (params, name) : NULL;
  return n != NULL && JSON_NODE_HOLDS_NULL (n) ? NULL : n;
}

bool
fb_rpc_param_string (JsonObject *params, const char *name, bool required, const char **ret, FbRpcError *error)
{
  JsonNode *n = member (params, name);

  *ret = NULL;
  if (n == NULL)
    {
      if (required)
        fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: missing field `%s`", name);
      return !required;
    }
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `%s` must be a string", name);
      return false;
    }
  *ret = json_node_get_string (n);
  return true;
}

bool
fb_rpc_param_bool (JsonObject *params, const char *name, bool fallback, bool *ret, FbRpcError *error)
{
  JsonNode *n = member (params, name);

  if (n == NULL)
    {
      *ret = fallback;
      return true;
    }
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_BOOLEAN)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `%s` must be a boolean", name);
      return false;
    }
  *ret = json_node_get_boolean (n);
  return true;
}

bool
fb_rpc_param_uint (JsonObject *params, const char *name, bool required, guint64 fallback, guint64 *ret,
                   FbRpcError *error)
{
  JsonNode *n = member (params, name);

  if (n == NULL)
    {
      if (required)
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: missing field `%s`", name);
          return false;
        }
      *ret = fallback;
      return true;
    }
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64 || json_node_get_int (n) < 0)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `%s` must be a non-negative integer",
                        name);
      return false;
    }
  *ret = (guint64)json_node_get_int (n);
  return true;
}

bool
fb_rpc_param_path (JsonObject *params, const char *name, char **ret, FbRpcError *error)
{
  const char *uri;
  g_autofree char *why = NULL;

  if (!fb_rpc_param_string (params, name, true, &uri, error))
    return false;
  *ret = fb_rpc_path_from_uri (uri, &why);
  if (*ret == NULL)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `%s`: %s", name, why);
      return false;
    }
  return true;
}
