/* fusebox — the remote API's messages and connections.
 *
 * Wire format (Codex's exec-server, docs/api.md): JSON-RPC 2.0 messages
 * without the "jsonrpc" member, one per WebSocket frame or per line.
 * Requests {id, method, params}, notifications {method, params}, answers
 * {id, result} or {id, error: {code, message, data?}}.  A message that can't
 * be decoded is answered on id -1, as Codex does, and the connection stays
 * usable (Codex closes it on some of these; we are more forgiving, never
 * less).
 *
 * Threat model: a client that holds the server's token (ipc-transport.c)
 * sends arbitrary bytes, and may be hostile to the server's other clients.
 * Every message is bounded (FB_RPC_MESSAGE_MAX), every member is
 * type-checked before use, and nothing a client sends can make the server
 * hold unbounded memory: the output queue is bounded (a slow reader is
 * disconnected), and so is every table a client can fill (ipc-rpc.h lists
 * the bounds).  A session is its client's alone (ipc-session.c: resuming
 * takes a secret only that client saw), and log/subscribe shows a client
 * its own session's records (on_log_line).
 *
 * Threads: the loop thread receives and sends; a worker decodes the
 * messages and runs the fs/... methods (ipc-rpc-pipeline.c), the loop
 * thread every other method: two CPUs for one connection.  A connection's requests still take
 * effect one at a time in the order received, and their answers leave in
 * that order.  A connection's handshake state follows Codex: `initialize`
 * once, then the `initialized` notification, then the other methods. */
#include "ipc/ipc-rpc-private.h"

#include "fusebox-config.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

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
  if (result != NULL)
    append_node (out, result);
  else
    g_string_append (out, "{}");
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
  if (params != NULL)
    append_node (out, params);
  else
    g_string_append (out, "{}");
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

/* --- connections: the output queue ------------------------------------------ */

static void conn_close (FbRpcConn *conn, const char *reason);

static void
conn_flush (FbRpcConn *conn)
{
  while (!conn->closing && !g_queue_is_empty (&conn->out) && conn->ops->can_write (conn->transport))
    {
      g_autofree char *text = g_queue_pop_head (&conn->out);
      gsize len = strlen (text);
      conn->out_bytes -= len;
      conn->ops->write (conn->transport, text, len);
    }
  /* A refused resume's answer was the last: once it is handed over. */
  if (conn->close_after_answer && !conn->closing && g_queue_is_empty (&conn->out))
    conn_close (conn, "resume refused");
}

static void
conn_close (FbRpcConn *conn, const char *reason)
{
  if (conn->closing)
    return;
  conn->closing = true;
  g_queue_clear_full (&conn->out, g_free);
  conn->out_bytes = 0;
  conn->ops->close (conn->transport, reason);
}

static void conn_queue (FbRpcConn *conn, char *text);

void
fb_rpc_conn_send_utf8 (FbRpcConn *conn, char *text)
{
  if (fb_rpc_conn_capture_answer (conn, text))
    return;
  if (conn->closing)
    {
      g_free (text);
      return;
    }
  conn_queue (conn, text);
}

void
fb_rpc_conn_send (FbRpcConn *conn, char *text)
{
  if (!g_utf8_validate (text, -1, NULL))
    {
      /* A host file name need not be UTF-8, and json-glib turns some
       * invalid escapes into raw bytes: replace what is not UTF-8 with
       * U+FFFD (as Rust's to_string_lossy does for Codex) so that the
       * message stays JSON a client can parse.  JSON's own syntax is
       * ASCII, so only string contents change. */
      char *valid = g_utf8_make_valid (text, -1);
      g_free (text);
      text = valid;
    }
  fb_rpc_conn_send_utf8 (conn, text);
}

static void
conn_queue (FbRpcConn *conn, char *text)
{
  conn->out_bytes += strlen (text);
  g_queue_push_tail (&conn->out, text);
  conn_flush (conn);
  if (conn->out_bytes > FB_RPC_QUEUE_MAX)
    {
      /* A slow reader: rather than hold its output without bound, drop the
       * connection.  Its session detaches (processes keep running for the
       * detach timeout) and process output stays replayable through
       * process/read after a resume. */
      g_warning ("closing connection %s: it reads too slowly (%" G_GSIZE_FORMAT " bytes waiting, limit %d)",
                 conn->peer_name, conn->out_bytes, FB_RPC_QUEUE_MAX);
      conn_close (conn, "slow reader: output queue full");
    }
}

void
fb_rpc_conn_writable (FbRpcConn *conn)
{
  conn_flush (conn);
}

bool
fb_rpc_conn_drain (FbRpcConn *conn)
{
  fb_rpc_conn_wait_idle (conn);
  conn_flush (conn);
  return conn->closing || g_queue_is_empty (&conn->out);
}

void
fb_rpc_conn_reply (FbRpcConn *conn, JsonNode *id, JsonNode *result)
{
  fb_rpc_conn_send (conn, fb_rpc_encode_result (id, result));
}

void
fb_rpc_conn_reply_error (FbRpcConn *conn, JsonNode *id, FbRpcError *error)
{
  fb_rpc_conn_send (conn, fb_rpc_encode_error (id, error->code, error->message, error->data));
}

void
fb_rpc_conn_notify (FbRpcConn *conn, const char *method, JsonNode *params)
{
  fb_rpc_conn_send (conn, fb_rpc_encode_notification (method, params));
}

void
fb_rpc_conn_get_caller (FbRpcConn *conn, FbViewCaller *ret_caller)
{
  memset (ret_caller, 0, sizeof *ret_caller);
  ret_caller->pid = 0;
  ret_caller->uid = conn->peer_uid;
  ret_caller->gid = conn->peer_gid;
  ret_caller->umask = 022;
  ret_caller->comm = conn->client_name != NULL ? conn->client_name : "rpc";
  ret_caller->session = conn->session != NULL ? conn->session->id : NULL;
}

/* --- the handshake ---------------------------------------------------------- */

static const char *
default_shell (void)
{
  if (g_file_test ("/bin/bash", G_FILE_TEST_IS_EXECUTABLE))
    return "/bin/bash";
  return "/bin/sh";
}

/* Optional features a Codex 0.171 executor advertises; fusebox implements
 * none of them (file streaming, fs watches, network proxies, ...). */
static const char *const codex_capabilities[] = {
  "capabilityDiscoverySandbox",
  "capabilityDiscoveryV2",
  "credentialMasking",
  "credentialMaskingCustomProviders",
  "environmentConfigRead",
  "fileWriteStreaming",
  "fsWatchMissing",
  "httpHeaderEnvVars",
  "linuxApprovedRootWritePreservesRestrictions",
  "linuxRootWritePreservesDevices",
  "networkProxyLaunch",
  "networkProxyReviewDomains",
  "networkProxyTransparentTcp",
  "sandboxedFileStreaming",
  "shellSnapshotV2",
  "windowsMxc",
};

static JsonNode *
environment_info (FbRpcServer *server)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  const char *shell = default_shell ();
  g_autofree char *name = g_path_get_basename (shell);
  g_autofree char *cwd_uri = fb_rpc_path_to_uri (server->cwd);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "shell");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, name);
  json_builder_set_member_name (b, "path");
  json_builder_add_string_value (b, shell);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "executorVersion");
  json_builder_add_string_value (b, "fusebox " FUSEBOX_VERSION);
  json_builder_set_member_name (b, "cwd");
  json_builder_add_string_value (b, cwd_uri);
  /* Members of Codex 0.171's environmentInfo, so that a harness reading
   * them finds them: the capabilities fusebox lacks say so. */
  json_builder_set_member_name (b, "platformOs");
  json_builder_add_string_value (b, "linux");
  /* Paths in environmentInfo are URIs, as everywhere in the protocol:
   * Codex parses them as such and, failing, treats the executor as
   * unusable. */
  json_builder_set_member_name (b, "tempDir");
  json_builder_add_string_value (b, "file:///tmp");
  json_builder_set_member_name (b, "temporaryDirectories");
  json_builder_begin_array (b);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "prependPathDirs");
  json_builder_begin_array (b);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "providerId");
  json_builder_add_string_value (b, "fusebox");
  if (server->vars.vars.home != NULL)
    {
      g_autofree char *home_uri = fb_rpc_path_to_uri (server->vars.vars.home);
      json_builder_set_member_name (b, "userHomeDir");
      json_builder_add_string_value (b, home_uri);
    }
  json_builder_set_member_name (b, "capabilities");
  json_builder_begin_object (b);
  for (guint i = 0; i < G_N_ELEMENTS (codex_capabilities); i++)
    {
      json_builder_set_member_name (b, codex_capabilities[i]);
      json_builder_add_boolean_value (b, FALSE);
    }
  json_builder_end_object (b);
  json_builder_set_member_name (b, "sandboxType");
  json_builder_add_string_value (b, "fusebox");
  json_builder_set_member_name (b, "policy");
  json_builder_add_string_value (b, fb_policy_get_origin (server->policy));
  if (server->run_dir != NULL)
    {
      json_builder_set_member_name (b, "runDir");
      json_builder_add_string_value (b, server->run_dir);
    }
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static JsonNode *
method_initialize (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  const char *client_name, *resume_id;
  FbRpcSession *session;
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autofree char *handle = NULL;

  if (conn->initialize_requested)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "initialize may only be sent once per connection");
      return NULL;
    }
  if (!fb_rpc_param_string (params, "clientName", true, &client_name, error) ||
      !fb_rpc_param_string (params, "resumeSessionId", false, &resume_id, error))
    return NULL;
  session = fb_rpc_session_attach (conn->server, conn, resume_id, error);
  if (session == NULL)
    return NULL;
  conn->initialize_requested = true;
  conn->session = session;
  g_free (conn->client_name);
  conn->client_name = g_strndup (client_name, 64);

  /* The secret is in what the client resumes with (ipc-session.c), and in
   * no other answer, record or message. */
  handle = fb_rpc_session_handle (session);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "sessionId");
  json_builder_add_string_value (b, handle);
  json_builder_set_member_name (b, "environmentInfo");
  json_builder_add_value (b, environment_info (conn->server));
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static JsonNode *
method_environment_info (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  return environment_info (conn->server);
}

/* --- log/subscribe ---------------------------------------------------------- */

static bool
filter_matches_member (JsonObject *filter, const char *name, JsonObject *record)
{
  JsonNode *want = json_object_get_member (filter, name);
  const char *have;

  if (want == NULL || JSON_NODE_HOLDS_NULL (want))
    return true;
  have = json_object_get_string_member_with_default (record, name, NULL);
  if (have == NULL)
    return false;
  if (JSON_NODE_HOLDS_ARRAY (want))
    {
      JsonArray *a = json_node_get_array (want);
      for (guint i = 0; i < json_array_get_length (a); i++)
        {
          const char *s = json_array_get_string_element (a, i);
          if (s != NULL && strcmp (s, have) == 0)
            return true;
        }
      return false;
    }
  return strcmp (json_node_get_string (want), have) == 0;
}

static bool
filter_matches (JsonObject *filter, JsonObject *record)
{
  const char *prefix = json_object_get_string_member_with_default (filter, "pathPrefix", NULL);

  if (!filter_matches_member (filter, "op", record) || !filter_matches_member (filter, "decision", record) ||
      !filter_matches_member (filter, "session", record) || !filter_matches_member (filter, "process", record))
    return false;
  if (prefix != NULL)
    {
      const char *path = json_object_get_string_member_with_default (record, "path", "");
      gsize n = strlen (prefix);
      if (strncmp (path, prefix, n) != 0 || (n > 1 && path[n] != '\0' && path[n] != '/'))
        return false;
    }
  return true;
}

static void subscription_remove (FbRpcServer *server, FbRpcSubscription *sub);

/* A subscription whose client lets the events pile up ends, with a last
 * notification saying why; the connection and its session go on. */
static void
subscription_end (FbRpcServer *server, FbRpcSubscription *sub, gsize queued)
{
  JsonObject *o = json_object_new ();
  g_autoptr (JsonNode) params = NULL;
  g_autofree char *reason =
    g_strdup_printf ("this connection has %" G_GSIZE_FORMAT " bytes waiting to be read, past the log subscriptions' "
                     "limit of %d: read faster, narrow the filter, and subscribe again",
                     queued, FB_RPC_LOG_QUEUE_MAX);

  g_warning ("ending log subscription %s of %s: its client reads too slowly (%" G_GSIZE_FORMAT " bytes waiting)",
             sub->id, sub->conn->peer_name, queued);
  json_object_set_string_member (o, "subscriptionId", sub->id);
  json_object_set_string_member (o, "reason", reason);
  params = fb_rpc_object_node (o);
  fb_rpc_conn_notify (sub->conn, "log/ended", params);
  subscription_remove (server, sub);
}

/* On the loop thread, from the log writer, with each record as written.
 * Whose records a subscription sees: its own session's (the records whose
 * "session" is its session's id: the session's calls and its processes'
 * accesses), unless the server shows every record (--subscribe-all).  A
 * record of another session is never sent, nor is its session id.  And no
 * subscriber's slowness reaches another session: its subscription ends
 * (FB_RPC_LOG_QUEUE_MAX) before its connection could be cut as a slow
 * reader, so that no flood of records, whoever makes them, disconnects a
 * client and frees its session for a resume. */
static void
on_log_line (const char *line, gpointer user_data)
{
  FbRpcServer *server = user_data;
  g_autoptr (JsonNode) parsed = NULL;
  g_autofree char *text = NULL;
  gsize text_len = 0;
  bool unparsable = false;

  server->in_log_line = true;
  for (GList *l = server->subscriptions; l != NULL;)
    {
      FbRpcSubscription *sub = l->data;
      l = l->next;
      if (sub->filter != NULL || sub->session != NULL)
        {
          JsonObject *record;
          JsonNode *session;

          if (parsed == NULL && !unparsable)
            {
              parsed = json_from_string (line, NULL);
              unparsable = parsed == NULL || !JSON_NODE_HOLDS_OBJECT (parsed);
            }
          if (unparsable)
            continue;
          record = json_node_get_object (parsed);
          session = json_object_get_member (record, "session");
          if (sub->session != NULL && (session == NULL || !JSON_NODE_HOLDS_VALUE (session) ||
                                       json_node_get_value_type (session) != G_TYPE_STRING ||
                                       strcmp (json_node_get_string (session), sub->session) != 0))
            continue;
          if (sub->filter != NULL && !filter_matches (sub->filter, record))
            continue;
        }
      if (text == NULL)
        {
          /* The params are the log line itself, byte for byte. */
          text = g_strconcat ("{\"method\":\"log/event\",\"params\":", line, "}", NULL);
          text_len = strlen (text);
        }
      if (sub->conn->out_bytes + text_len > FB_RPC_LOG_QUEUE_MAX)
        {
          subscription_end (server, sub, sub->conn->out_bytes);
          continue;
        }
      fb_rpc_conn_send (sub->conn, g_strdup (text));
    }
  server->in_log_line = false;
}

static void
subscription_free (FbRpcSubscription *sub)
{
  g_free (sub->id);
  g_clear_pointer (&sub->filter, json_object_unref);
  g_free (sub->session);
  g_free (sub);
}

static gboolean
unsubscribe_idle (gpointer data)
{
  FbRpcServer *server = data;

  server->unsubscribe_idle = 0;
  if (server->subscriptions == NULL && server->log_subscription != 0)
    {
      fb_access_log_unsubscribe (server->log, server->log_subscription);
      server->log_subscription = 0;
    }
  return G_SOURCE_REMOVE;
}

static void
subscription_remove (FbRpcServer *server, FbRpcSubscription *sub)
{
  server->subscriptions = g_list_remove (server->subscriptions, sub);
  sub->conn->n_subscriptions--;
  subscription_free (sub);
  if (server->subscriptions == NULL && server->log_subscription != 0)
    {
      /* From on_log_line the log's writer lock is held, and
       * fb_access_log_unsubscribe takes it: later, from the loop. */
      if (server->in_log_line)
        {
          if (server->unsubscribe_idle == 0)
            server->unsubscribe_idle = g_idle_add (unsubscribe_idle, server);
          return;
        }
      fb_access_log_unsubscribe (server->log, server->log_subscription);
      server->log_subscription = 0;
    }
}

static JsonNode *
method_log_subscribe (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  FbRpcServer *server = conn->server;
  JsonNode *filter = params != NULL ? json_object_get_member (params, "filter") : NULL;
  FbRpcSubscription *sub;
  g_autoptr (JsonBuilder) b = json_builder_new ();
  static const char *const known[] = { "op", "decision", "session", "process", "pathPrefix" };

  if (server->log == NULL)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "this server keeps no access log");
      return NULL;
    }
  if (filter != NULL && !JSON_NODE_HOLDS_NULL (filter))
    {
      JsonObject *f;
      g_autoptr (GList) names = NULL;
      if (!JSON_NODE_HOLDS_OBJECT (filter))
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `filter` must be an object");
          return NULL;
        }
      f = json_node_get_object (filter);
      names = json_object_get_members (f);
      for (GList *l = names; l != NULL; l = l->next)
        {
          JsonNode *v = json_object_get_member (f, l->data);
          bool ok = false;
          for (guint i = 0; i < G_N_ELEMENTS (known); i++)
            ok = ok || strcmp (l->data, known[i]) == 0;
          if (!ok)
            {
              fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS,
                                "invalid params: unknown filter field `%s` (known: op, decision, session, process, "
                                "pathPrefix)",
                                (const char *)l->data);
              return NULL;
            }
          if (JSON_NODE_HOLDS_ARRAY (v) && strcmp (l->data, "pathPrefix") != 0)
            {
              JsonArray *a = json_node_get_array (v);
              for (guint i = 0; i < json_array_get_length (a); i++)
                {
                  JsonNode *e = json_array_get_element (a, i);
                  ok = ok && JSON_NODE_HOLDS_VALUE (e) && json_node_get_value_type (e) == G_TYPE_STRING;
                }
            }
          else
            ok =
              JSON_NODE_HOLDS_NULL (v) || (JSON_NODE_HOLDS_VALUE (v) && json_node_get_value_type (v) == G_TYPE_STRING);
          if (!ok)
            {
              fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS,
                                "invalid params: filter field `%s` must be a string%s", (const char *)l->data,
                                strcmp (l->data, "pathPrefix") != 0 ? " or an array of strings" : "");
              return NULL;
            }
        }
    }
  if (conn->n_subscriptions >= FB_RPC_SUBSCRIPTIONS_MAX)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "too many log subscriptions on this connection (limit %d)",
                        FB_RPC_SUBSCRIPTIONS_MAX);
      return NULL;
    }
  sub = g_new0 (FbRpcSubscription, 1);
  sub->id = g_strdup_printf ("log-%u", ++server->next_subscription);
  sub->conn = conn;
  /* Its own session's records only, unless the operator said otherwise. */
  sub->session = server->subscribe_all ? NULL : g_strdup (conn->session->id);
  if (filter != NULL && JSON_NODE_HOLDS_OBJECT (filter))
    sub->filter = json_object_ref (json_node_get_object (filter));
  if (server->log_subscription == 0)
    server->log_subscription = fb_access_log_subscribe (server->log, on_log_line, server, NULL);
  server->subscriptions = g_list_append (server->subscriptions, sub);
  conn->n_subscriptions++;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "subscriptionId");
  json_builder_add_string_value (b, sub->id);
  json_builder_set_member_name (b, "scope");
  json_builder_add_string_value (b, sub->session != NULL ? "session" : "all");
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static JsonNode *
method_log_unsubscribe (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  const char *sid;

  if (!fb_rpc_param_string (params, "subscriptionId", true, &sid, error))
    return NULL;
  for (GList *l = conn->server->subscriptions; l != NULL; l = l->next)
    {
      FbRpcSubscription *sub = l->data;
      if (sub->conn == conn && strcmp (sub->id, sid) == 0)
        {
          subscription_remove (conn->server, sub);
          return fb_rpc_object_node (json_object_new ());
        }
    }
  fb_rpc_error_set (error, FB_RPC_ERROR_NOT_FOUND, "unknown subscription `%s`", sid);
  return NULL;
}

/* --- dispatch --------------------------------------------------------------- */

typedef struct
{
  const char *name;
  FbRpcMethodFunc func;
  const char *family;        /* for "must initialize" messages; NULL: callable before */
  const char *const *params; /* the members of params it reads */
} Method;

/* The members a method reads, NULL-terminated. */
#define P(...) ((const char *const[]){ __VA_ARGS__ })

static const Method methods[] = {
  { "initialize", method_initialize, NULL, P ("clientName", "resumeSessionId", NULL) },
  { "environment/info", method_environment_info, "environment", P (NULL) },
  { "fs/readFile", fb_rpc_fs_read_file, "filesystem", P ("path", "sandbox", NULL) },
  { "fs/writeFile", fb_rpc_fs_write_file, "filesystem", P ("path", "dataBase64", "sandbox", NULL) },
  { "fs/createDirectory", fb_rpc_fs_create_directory, "filesystem", P ("path", "recursive", "sandbox", NULL) },
  { "fs/getMetadata", fb_rpc_fs_get_metadata, "filesystem", P ("path", "sandbox", NULL) },
  { "fs/canonicalize", fb_rpc_fs_canonicalize, "filesystem", P ("path", "sandbox", NULL) },
  { "fs/readDirectory", fb_rpc_fs_read_directory, "filesystem", P ("path", "sandbox", NULL) },
  { "fs/walk", fb_rpc_fs_walk, "filesystem", P ("path", "options", "sandbox", NULL) },
  { "fs/remove", fb_rpc_fs_remove, "filesystem", P ("path", "recursive", "force", "sandbox", NULL) },
  { "fs/copy", fb_rpc_fs_copy, "filesystem", P ("sourcePath", "destinationPath", "recursive", "sandbox", NULL) },
  { "fs/open", fb_rpc_fs_open, "filesystem", P ("handleId", "path", "sandbox", NULL) },
  { "fs/readBlock", fb_rpc_fs_read_block, "filesystem", P ("handleId", "offset", "len", NULL) },
  { "fs/close", fb_rpc_fs_close, "filesystem", P ("handleId", NULL) },
  { "process/start", fb_rpc_process_start, "exec",
    P ("processId", "argv", "cwd", "env", "envPolicy", "tty", "pipeStdin", "arg0", "sandbox", "enforceManagedNetwork",
       "managedNetwork", NULL) },
  { "process/read", fb_rpc_process_read, "exec", P ("processId", "afterSeq", "maxBytes", "waitMs", NULL) },
  { "process/write", fb_rpc_process_write, "exec", P ("processId", "chunk", "writeId", NULL) },
  { "process/signal", fb_rpc_process_signal, "exec", P ("processId", "signal", NULL) },
  { "process/terminate", fb_rpc_process_terminate, "exec", P ("processId", NULL) },
  { "log/subscribe", method_log_subscribe, "log", P ("filter", NULL) },
  { "log/unsubscribe", method_log_unsubscribe, "log", P ("subscriptionId", NULL) },
  { "policy/explain", fb_rpc_policy_explain, "policy", P ("path", "sandbox", NULL) },
};

#undef P

static const Method *
find_method (const char *name)
{
  for (guint i = 0; i < G_N_ELEMENTS (methods); i++)
    if (strcmp (methods[i].name, name) == 0)
      return &methods[i];
  return NULL;
}

/* A newer client may send members this server does not know (Codex 0.171:
 * process/start's `metadata`): they are ignored, as Codex's own serde
 * structs ignore them, and said so at debug level (G_MESSAGES_DEBUG=fusebox).
 * The members it knows keep their strict types. */
static void
debug_unknown_params (const Method *m, JsonObject *params)
{
  JsonObjectIter iter;
  const char *key;

  if (params == NULL || g_log_writer_default_would_drop (G_LOG_LEVEL_DEBUG, G_LOG_DOMAIN))
    return;
  json_object_iter_init (&iter, params);
  while (json_object_iter_next (&iter, &key, NULL))
    if (!g_strv_contains (m->params, key))
      g_debug ("%s: ignoring the member `%s` of its params (not known to this server)", m->name, key);
}

static void
handle_request (FbRpcConn *conn, FbRpcMessage *msg)
{
  const Method *m = find_method (msg->method);
  FbRpcError error = { 0 };
  JsonNode *result = NULL;
  bool deferred = false;

  /* After a refused resume nothing runs: what the client sent behind it
   * (it may have sent initialized and calls at once) goes unanswered. */
  if (conn->close_after_answer)
    return;
  if (m == NULL)
    fb_rpc_error_set (&error, FB_RPC_ERROR_METHOD_NOT_FOUND, "unknown method `%s`", msg->method);
  else if (m->family != NULL && !conn->initialize_requested)
    fb_rpc_error_set (&error, FB_RPC_ERROR_INVALID_REQUEST, "client must call initialize before using %s methods",
                      m->family);
  else if (m->family != NULL && (conn->session == NULL || conn->session->conn != conn))
    fb_rpc_error_set (&error, FB_RPC_ERROR_INVALID_REQUEST, "session has been resumed by another connection");
  else if (m->family != NULL && !conn->initialized)
    fb_rpc_error_set (&error, FB_RPC_ERROR_INVALID_REQUEST, "client must send initialized before using %s methods",
                      m->family);
  else
    {
      debug_unknown_params (m, msg->params);
      conn->call_sandbox = msg->sandbox_text;
      conn->call_sandbox_len = msg->sandbox_len;
      result = m->func (conn, msg->id, msg->params, &error, &deferred);
      conn->call_sandbox = NULL;
      conn->call_sandbox_len = 0;
      if (result == NULL && !deferred && error.code == 0)
        fb_rpc_error_set (&error, FB_RPC_ERROR_INTERNAL, "%s failed", msg->method);
    }
  if (result != NULL)
    {
      fb_rpc_conn_reply (conn, msg->id, result);
      json_node_unref (result);
    }
  else if (!deferred)
    fb_rpc_conn_reply_error (conn, msg->id, &error);
  fb_rpc_error_clear (&error);
}

static void
handle_notification (FbRpcConn *conn, FbRpcMessage *msg)
{
  FbRpcError error = { 0 };

  if (conn->close_after_answer)
    return;
  if (strcmp (msg->method, "initialized") == 0)
    {
      if (!conn->initialize_requested)
        fb_rpc_error_set (&error, FB_RPC_ERROR_INVALID_REQUEST,
                          "received `initialized` notification before `initialize`");
      else
        conn->initialized = true;
    }
  else
    fb_rpc_error_set (&error, FB_RPC_ERROR_INVALID_REQUEST, "unexpected notification `%s`", msg->method);
  if (error.code != 0)
    fb_rpc_conn_reply_error (conn, NULL, &error);
  fb_rpc_error_clear (&error);
}

void
fb_rpc_conn_run_message (FbRpcConn *conn, FbRpcMessage *msg)
{
  if (msg->kind == FB_RPC_MESSAGE_REQUEST)
    handle_request (conn, msg);
  else
    handle_notification (conn, msg);
}

/* --- the server ------------------------------------------------------------- */

FbRpcConn *
fb_rpc_server_accept (FbRpcServer *server, const FbRpcTransportOps *ops, gpointer transport, uid_t peer_uid,
                      const char *peer_name)
{
  return fb_rpc_server_accept_client (server, ops, transport, peer_uid, peer_name, peer_name, NULL);
}

FbRpcConn *
fb_rpc_server_accept_client (FbRpcServer *server, const FbRpcTransportOps *ops, gpointer transport, uid_t peer_uid,
                             const char *peer_name, const char *client, char **ret_why)
{
  FbRpcConn *conn;
  g_autofree char *why = NULL;

  if (client == NULL)
    client = peer_name != NULL ? peer_name : "client";
  if (!fb_rpc_client_may_connect (server, client, &why))
    {
      g_message ("refusing a connection from %s: %s", client, why);
      if (ret_why != NULL)
        *ret_why = g_steal_pointer (&why);
      return NULL;
    }
  conn = g_new0 (FbRpcConn, 1);
  conn->ref = 1;
  g_mutex_init (&conn->lock);
  g_cond_init (&conn->cond);
  g_queue_init (&conn->jobs);
  conn->server = server;
  conn->ops = ops;
  conn->transport = transport;
  conn->peer_uid = peer_uid;
  conn->peer_gid = getegid ();
  conn->peer_name = g_strdup (peer_name != NULL ? peer_name : "client");
  g_queue_init (&conn->out);
  server->conns = g_list_prepend (server->conns, conn);
  server->n_conns++;
  conn->client = fb_rpc_client_get (server, client);
  conn->client->n_conns++;
  return conn;
}

void
fb_rpc_conn_closed (FbRpcConn *conn)
{
  FbRpcServer *server = conn->server;

  /* What the client sent before it went takes effect (it did on receipt
   * before the pipeline), and is answered while the transport can. */
  fb_rpc_conn_wait_idle (conn);
  {
    /* The worker may still be on its way out, or not yet started. */
    g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&conn->lock);
    conn->stopping = true;
    while (conn->scheduled)
      fb_rpc_conn_cond_wait_locked (conn);
  }
  conn->closing = true;
  fb_rpc_process_cancel_deferred (conn);
  fb_rpc_fs_close_all (conn);
  for (GList *l = server->subscriptions; l != NULL;)
    {
      FbRpcSubscription *sub = l->data;
      l = l->next;
      if (sub->conn == conn)
        subscription_remove (server, sub);
    }
  if (conn->session != NULL && conn->session->conn == conn)
    fb_rpc_session_detach (conn->session);
  conn->session = NULL;
  g_queue_clear_full (&conn->out, g_free);
  fb_rpc_json_reuse_clear (&conn->reuse);
  server->conns = g_list_remove (server->conns, conn);
  server->n_conns--;
  conn->client->n_conns--;
  g_clear_pointer (&conn->client, fb_rpc_client_unref);
  g_free (conn->peer_name);
  g_free (conn->client_name);
  /* A wake-up still queued for it does nothing. */
  conn->gone = true;
  fb_rpc_conn_unref (conn);
}

guint
fb_rpc_server_count_connections (FbRpcServer *server)
{
  return server->n_conns;
}

static void
vars_copy (FbRpcVars *dst, const FbPolicyVars *src)
{
  memset (dst, 0, sizeof *dst);
  if (src == NULL)
    return;
  dst->vars.workspace = dst->owned[0] = g_strdup (src->workspace);
  dst->vars.home = dst->owned[1] = g_strdup (src->home);
  dst->vars.cwd = dst->owned[2] = g_strdup (src->cwd);
  dst->vars.run = dst->owned[3] = g_strdup (src->run);
}

FbRpcServer *
fb_rpc_server_new (const FbRpcServerOptions *options, GError **error)
{
  FbRpcServer *server;

  g_return_val_if_fail (options != NULL && options->policy != NULL, NULL);
  server = g_new0 (FbRpcServer, 1);
  server->context = g_main_context_ref_thread_default ();
  server->policy = fb_policy_ref (options->policy);
  vars_copy (&server->vars, options->vars);
  server->log = options->log;
  server->log_level = options->log_level;
  server->detach_timeout_ms =
    options->detach_timeout_ms != 0 ? options->detach_timeout_ms : FB_RPC_DEFAULT_DETACH_TIMEOUT_MS;
  server->subscribe_all = options->subscribe_all;
  server->view_idle_ms = options->view_idle_ms != 0 ? options->view_idle_ms : FB_RPC_VIEW_IDLE_MS;
  g_queue_init (&server->views);
  server->resume_tokens = FB_RPC_RESUME_REFUSALS_BURST;
  server->resume_refill_us = g_get_monotonic_time ();
  server->launch_helper = g_strdup (options->launch_helper);
  server->run_dir = g_strdup (options->run_dir);
  server->hidden_paths = g_strdupv ((char **)options->hidden_paths);
  server->cwd = g_strdup (server->vars.vars.workspace != NULL ? server->vars.vars.workspace
                          : server->vars.vars.cwd != NULL     ? server->vars.vars.cwd
                                                              : "/");
  server->sessions = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify)fb_rpc_session_free);
  server->clients = g_hash_table_new (g_str_hash, g_str_equal);
  g_queue_init (&server->finished);
  g_mutex_init (&server->sandbox_lock);
  server->sandboxes = g_hash_table_new (g_str_hash, g_str_equal);
  g_queue_init (&server->sandbox_lru);
  fb_rpc_server_pipeline_init (server);
  {
    /* The server's own view up front: a policy whose private directories
     * can't be made fails here, with its message, not at the first call. */
    FbRpcError e = { 0 };
    g_autoptr (FbRpcSandbox) base = fb_rpc_sandbox_lookup (server, NULL, &e);
    if (base == NULL)
      {
        g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "%s", e.message);
        fb_rpc_error_clear (&e);
        fb_rpc_server_free (server);
        return NULL;
      }
  }
  /* After the first view: it raised the descriptor limit. */
  server->budget.retained = options->retained_max != 0 ? MAX (options->retained_max, FB_RPC_RETAIN_TOTAL_MIN) : 0;
  fb_rpc_server_budget_init (server);
  /* a view (its FUSE session's workers and descriptors) for each running
   * process at most */
  server->budget.views = server->budget.processes;
  return server;
}

void
fb_rpc_server_free (FbRpcServer *server)
{
  if (server == NULL)
    return;
  while (server->conns != NULL)
    {
      FbRpcConn *conn = server->conns->data;
      /* The transports outlive nothing of ours: forget them here, and
       * send them nothing more. */
      conn->closing = true;
      fb_rpc_conn_closed (conn);
    }
  fb_rpc_server_pipeline_clear (server);
  g_hash_table_destroy (server->sessions);
  if (server->retain_idle != 0)
    g_source_remove (server->retain_idle);
  /* Every connection and session has let its client go. */
  g_hash_table_destroy (server->clients);
  fb_rpc_server_clear_sandboxes (server);
  g_hash_table_destroy (server->sandboxes);
  g_mutex_clear (&server->sandbox_lock);
  if (server->unsubscribe_idle != 0)
    g_source_remove (server->unsubscribe_idle);
  if (server->log_subscription != 0)
    fb_access_log_unsubscribe (server->log, server->log_subscription);
  fb_policy_unref (server->policy);
  for (guint i = 0; i < G_N_ELEMENTS (server->vars.owned); i++)
    g_free (server->vars.owned[i]);
  g_free (server->launch_helper);
  g_free (server->run_dir);
  g_free (server->cwd);
  g_strfreev (server->hidden_paths);
  g_main_context_unref (server->context);
  g_free (server);
}
