/* fusebox — the remote API's WebSocket transport (libsoup 3), and
 * fb_rpc_listen() for every transport.
 *
 *   ws://HOST:PORT   one JSON-RPC message per frame (text or binary), as
 *                    Codex's exec-server.  GET /readyz answers 200.
 *
 * Threat model: anyone who can reach the port, every other user of the
 * machine included (loopback is no boundary between local users), and a web
 * page in the user's browser, which can open a WebSocket to loopback (no
 * same-origin rule for WebSockets).  So every request must carry the
 * server's token, on loopback too: `fusebox serve` makes a new one at each
 * start (getrandom, 256 bits) and prints it in the URL it prints, or reads
 * it from --token-file; only --insecure-no-auth (loopback only, with a
 * warning) serves without one.  The token is accepted in either of the two
 * forms Codex's client can send: the query parameter `token=` of the
 * request (CODEX_EXEC_SERVER_URL is used as it is, query and all) and
 * `Authorization: Bearer` (environments.toml's auth_bearer_token); both
 * are compared in constant time.  A request without it is refused with 401
 * before the handshake and before anything else is looked at.  Any request
 * carrying an Origin header — which browsers always send and agent
 * harnesses don't — is refused with 403, token or not.  A non-loopback
 * address needs --allow-remote and --token-file, so the API is never open
 * to a network by accident.
 *
 * Bounds: one message, whatever its framing, is bounded as its bytes
 * arrive: past FB_RPC_WS_HELD_MAX (FB_RPC_MESSAGE_MAX and some framing)
 * the stream closes the connection with 1009 (ipc-transport-wsio.c; libsoup
 * bounds a frame only, and appends fragments without limit); a message
 * above FB_RPC_MESSAGE_MAX but below that gets an error answer and the
 * connection stays usable.  Output: libsoup keeps its own unbounded send
 * queue, so a message is handed to it only while the stream under it
 * (ipc-transport-wsio.c) holds less than its bound unsent (below it the
 * stream takes every write, hence libsoup's queue stays empty; past it a
 * write would block and libsoup keeps that one frame); the rest waits in
 * the connection's bounded queue (ipc-rpc-conn.c), and a client that lets it
 * fill is disconnected.
 *
 * Loop thread only. */
#include "ipc/ipc-rpc-private.h"
#include "ipc/ipc-transport-private.h"

#include <errno.h>
#include <glib-unix.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <libsoup/soup.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WS_IO_KEY "fusebox-ws-io"
#define WS_ACCEPT_BATCH 64
#define WS_ACCEPT_BACKOFF_MS 100

typedef struct
{
  FbRpcPeer base; /* on listener->peers */
  SoupWebsocketConnection *ws;
  FbRpcWsIo *io; /* the stream under ws (ipc-transport-wsio.c) */
} WsPeer;

static bool
ws_can_write (gpointer transport)
{
  WsPeer *peer = transport;

  /* The stream's buffer is below its bound, so libsoup's queue is empty:
   * libsoup queues a frame only when the stream would block. */
  return soup_websocket_connection_get_state (peer->ws) == SOUP_WEBSOCKET_STATE_OPEN &&
         fb_rpc_ws_io_can_write (peer->io);
}

static void
on_ws_writable (gpointer user_data)
{
  WsPeer *peer = user_data;

  if (peer->base.conn != NULL)
    fb_rpc_conn_writable (peer->base.conn);
}

static void
ws_write (gpointer transport, const char *text, gsize len)
{
  WsPeer *peer = transport;

  /* Answers to one batch of requests leave together: the stream buffers
   * them and sends them in one send() at the next main-loop iteration
   * (ipc-transport-wsio.c). */
  soup_websocket_connection_send_text (peer->ws, text);
}

static void
ws_close (gpointer transport, const char *reason)
{
  WsPeer *peer = transport;

  if (soup_websocket_connection_get_state (peer->ws) == SOUP_WEBSOCKET_STATE_OPEN)
    soup_websocket_connection_close (peer->ws, SOUP_WEBSOCKET_CLOSE_POLICY_VIOLATION, reason);
}

static const FbRpcTransportOps ws_ops = { ws_can_write, ws_write, ws_close };

/* --- a peer of either transport --------------------------------------------- */

void
fb_rpc_peer_add (FbRpcPeer *peer, FbRpcListener *l, GList **list, void (*free_func) (FbRpcPeer *peer))
{
  peer->listener = l;
  peer->list = list;
  peer->free = free_func;
  *list = g_list_prepend (*list, peer);
}

void
fb_rpc_peer_drop (FbRpcPeer *peer)
{
  g_clear_handle_id (&peer->closed_idle, g_source_remove);
  /* The answers fb_rpc_conn_closed still writes may meet the client's end
   * (EPIPE), and the transport then asks for a close (a stream's write,
   * libsoup's "closed"): that close is this one.  Scheduled, it ran on the
   * freed peer at the loop's next turn (a use after free: the server
   * crashed, or hung in a connection freed twice). */
  peer->dropping = true;
  /* Told first, cleared after (not g_clear_pointer's order): the answers
   * fb_rpc_conn_closed still writes reach the transport's write paths,
   * which look at the peer's conn. */
  if (peer->conn != NULL)
    fb_rpc_conn_closed (peer->conn);
  peer->conn = NULL;
  *peer->list = g_list_remove (*peer->list, peer);
  peer->free (peer);
}

static void
peer_closed_idle (gpointer data)
{
  FbRpcPeer *peer = data;

  peer->closed_idle = 0;
  fb_rpc_peer_drop (peer);
}

void
fb_rpc_peer_close_later (FbRpcPeer *peer)
{
  if (peer->closed_idle == 0 && !peer->dropping)
    peer->closed_idle = g_idle_add_once (peer_closed_idle, peer);
}

/* --- WebSocket ------------------------------------------------------------------ */

static void
ws_peer_free (FbRpcPeer *base)
{
  WsPeer *peer = container_of (base, WsPeer, base);

  if (peer->io != NULL)
    fb_rpc_ws_io_set_writable_func (peer->io, NULL, NULL);
  g_signal_handlers_disconnect_by_data (peer->ws, peer);
  if (soup_websocket_connection_get_state (peer->ws) == SOUP_WEBSOCKET_STATE_OPEN)
    soup_websocket_connection_close (peer->ws, SOUP_WEBSOCKET_CLOSE_GOING_AWAY, "server stopping");
  g_object_unref (peer->ws);
  g_clear_object (&peer->io);
  g_free (peer);
}

static void
on_ws_closed (SoupWebsocketConnection *ws, gpointer user_data)
{
  WsPeer *peer = user_data;

  /* Not from inside libsoup's emission: the peer and its ws go away. */
  fb_rpc_peer_close_later (&peer->base);
}

static void
on_ws_message (SoupWebsocketConnection *ws, int type, GBytes *message, gpointer user_data)
{
  WsPeer *peer = user_data;
  gsize len;
  const char *data = g_bytes_get_data (message, &len);

  /* libsoup holds nothing of it any more: the stream's count of what it
   * may hold starts again. */
  if (peer->io != NULL)
    fb_rpc_ws_io_message_done (peer->io);
  if (peer->base.conn == NULL)
    return;
  /* Text and binary frames alike carry one JSON message. */
  if (len > FB_RPC_MESSAGE_MAX)
    fb_rpc_conn_receive_oversized (peer->base.conn, len);
  else if (type == SOUP_WEBSOCKET_DATA_TEXT)
    fb_rpc_conn_receive_utf8 (peer->base.conn, data != NULL ? data : "", len);
  else
    fb_rpc_conn_receive (peer->base.conn, data != NULL ? data : "", len);
}

static void
on_websocket (SoupServer *server, SoupServerMessage *msg, const char *path, SoupWebsocketConnection *ws,
              gpointer user_data)
{
  FbRpcListener *l = user_data;
  WsPeer *peer = g_new0 (WsPeer, 1);
  GSocketAddress *remote = soup_server_message_get_remote_address (msg);
  /* The stream ws reads and writes (soup_server_accept_iostream keeps the
   * address object on_ws_incoming gave it). */
  FbRpcWsIo *io = remote != NULL ? g_object_get_data (G_OBJECT (remote), WS_IO_KEY) : NULL;
  g_autofree char *name = NULL;
  g_autofree char *ip = NULL;
  g_autofree char *why = NULL;

  if (remote != NULL && G_IS_INET_SOCKET_ADDRESS (remote))
    {
      ip = g_inet_address_to_string (g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (remote)));
      name = g_strdup_printf ("ws:%s:%u", ip, g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (remote)));
    }
  peer->ws = g_object_ref (ws);
  peer->io = io != NULL ? g_object_ref (io) : NULL;
  if (io != NULL)
    {
      g_object_set_data (G_OBJECT (remote), WS_IO_KEY, NULL);
      fb_rpc_ws_io_set_writable_func (io, on_ws_writable, peer);
      fb_rpc_ws_io_set_upgraded (io);
    }
  /* A frame announced past the stream's bound is refused at its header,
   * before its payload is read. */
  soup_websocket_connection_set_max_incoming_payload_size (ws, FB_RPC_WS_HELD_MAX);
  soup_websocket_connection_set_keepalive_interval (ws, 0);
  fb_rpc_peer_add (&peer->base, l, &l->peers, ws_peer_free);
  g_signal_connect (ws, "message", G_CALLBACK (on_ws_message), peer);
  g_signal_connect (ws, "closed", G_CALLBACK (on_ws_closed), peer);
  if (peer->io == NULL)
    {
      soup_websocket_connection_close (ws, SOUP_WEBSOCKET_CLOSE_SERVER_ERROR, "no socket");
      return;
    }
  /* Counted against its address's share (ipc-rpc-share.c); the early
   * handler refused it with the reason when it was already at its bound. */
  peer->base.conn = fb_rpc_server_accept_client (l->server, &ws_ops, peer, geteuid (), name, ip, &why);
  if (peer->base.conn == NULL)
    soup_websocket_connection_close (ws, SOUP_WEBSOCKET_CLOSE_SERVER_ERROR, "too many connections: retry later");
}

/* Every TCP connection: libsoup serves HTTP (the early handler, /readyz,
 * the handshake) and then the WebSocket over our stream. */
static void
ws_serve (FbRpcListener *l, GSocketConnection *connection)
{
  g_autoptr (GSocketAddress) local = g_socket_connection_get_local_address (connection, NULL);
  g_autoptr (GSocketAddress) remote = g_socket_connection_get_remote_address (connection, NULL);
  g_autoptr (FbRpcWsIo) io = NULL;
  g_autoptr (GError) error = NULL;

  if (local == NULL || remote == NULL)
    {
      g_io_stream_close (G_IO_STREAM (connection), NULL, NULL);
      return;
    }
  /* One message per frame, answered at once: Nagle's algorithm would
   * hold a small answer back until the client's delayed ACK (40 ms). */
  g_socket_set_option (g_socket_connection_get_socket (connection), IPPROTO_TCP, TCP_NODELAY, 1, NULL);
  io = fb_rpc_ws_io_new (l->ws_ios, connection);
  /* Until on_websocket takes it (or the connection ends without one). */
  g_object_set_data_full (G_OBJECT (remote), WS_IO_KEY, g_object_ref (io), g_object_unref);
  if (!soup_server_accept_iostream (l->soup, G_IO_STREAM (io), local, remote, &error))
    {
      g_warning ("can't serve a WebSocket client: %s", error->message);
      g_object_set_data (G_OBJECT (remote), WS_IO_KEY, NULL);
      g_io_stream_close (G_IO_STREAM (io), NULL, NULL);
    }
}

static void ws_accept_watch (FbRpcListener *l);

static void
on_ws_accept_again (gpointer data)
{
  FbRpcListener *l = data;

  l->ws_accept_again = 0;
  ws_accept_watch (l);
}

/* Accepts what the kernel queued, WS_ACCEPT_BATCH at most a wakeup.  Out
 * of descriptors (or memory), the connection stays in the kernel's queue:
 * a watch on the listening socket would fire again at once, so it stops
 * for WS_ACCEPT_BACKOFF_MS (GSocketService retried at once, a warning each
 * time: 1,000 a second at full CPU).  The descriptors come back as
 * connections end, those before their handshake within
 * FB_RPC_WS_HANDSHAKE_S (ipc-transport-wsio.c). */
static gboolean
on_ws_accept (int lfd, GIOCondition cond, gpointer data)
{
  FbRpcListener *l = data;

  for (guint i = 0; i < WS_ACCEPT_BATCH; i++)
    {
      int fd = accept4 (lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      g_autoptr (GSocket) sock = NULL;
      g_autoptr (GSocketConnection) conn = NULL;

      if (fd < 0)
        {
          int e = errno;
          if (e == EAGAIN || e == EWOULDBLOCK)
            break;
          if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM)
            {
              gint64 now = g_get_monotonic_time ();
              if (l->ws_accept_warned == 0 || now - l->ws_accept_warned > 60 * G_USEC_PER_SEC)
                {
                  g_warning ("ws://: can't accept a connection: %s; trying again every %d ms while it lasts (said "
                             "once a minute)",
                             g_strerror (e), WS_ACCEPT_BACKOFF_MS);
                  l->ws_accept_warned = now;
                }
              l->ws_accept_watch = 0;
              l->ws_accept_again = g_timeout_add_once (WS_ACCEPT_BACKOFF_MS, on_ws_accept_again, l);
              return G_SOURCE_REMOVE;
            }
          /* ECONNABORTED, EPROTO, EINTR...: that connection only. */
          continue;
        }
      sock = g_socket_new_from_fd (fd, NULL);
      if (sock == NULL)
        {
          close (fd);
          continue;
        }
      conn = g_socket_connection_factory_create_connection (sock);
      ws_serve (l, conn);
    }
  return G_SOURCE_CONTINUE;
}

static void
ws_accept_watch (FbRpcListener *l)
{
  l->ws_accept_watch = g_unix_fd_add (g_socket_get_fd (l->ws_socket), G_IO_IN, on_ws_accept, l);
}

static bool
token_equal (const char *a, gsize la, const char *b)
{
  gsize lb = strlen (b);
  unsigned char diff = la != lb;

  /* Constant time in the length of the presented token. */
  for (gsize i = 0; i < la; i++)
    diff |= (unsigned char)a[i] ^ (unsigned char)b[lb > 0 ? i % lb : 0];
  return diff == 0;
}

/* The query's token=TOKEN matches: read from the raw query, because the
 * table libsoup decodes into C strings would cut `TOKEN%00junk` at the NUL
 * and keep only the last of two tokens.  A token given twice, or one that
 * decodes to a NUL, matches nothing. */
static bool
query_token_equal (GUri *uri, const char *token)
{
  const char *query = uri != NULL ? g_uri_get_query (uri) : NULL;
  g_auto (GStrv) params = NULL;
  guint found = 0;
  bool ok = false;

  if (query == NULL)
    return false;
  params = g_strsplit (query, "&", -1);
  for (char **p = params; *p != NULL; p++)
    {
      const char *eq = strchr (*p, '=');
      g_autoptr (GBytes) name = g_uri_unescape_bytes (*p, eq != NULL ? eq - *p : -1, NULL, NULL);
      g_autoptr (GBytes) value = NULL;
      gsize n = 0;
      const char *v;

      if (name == NULL || g_bytes_get_size (name) != 5 || memcmp (g_bytes_get_data (name, NULL), "token", 5) != 0)
        continue;
      found++;
      value = eq != NULL ? g_uri_unescape_bytes (eq + 1, -1, NULL, NULL) : NULL;
      v = value != NULL ? g_bytes_get_data (value, &n) : NULL;
      ok = v != NULL && memchr (v, '\0', n) == NULL && token_equal (v, n, token);
    }
  return found == 1 && ok;
}

/* The request carries the token: as `Authorization: Bearer TOKEN`, or as
 * the query parameter token=TOKEN of URI. */
static bool
has_token (FbRpcListener *l, SoupMessageHeaders *h, GUri *uri)
{
  const char *auth = soup_message_headers_get_one (h, "Authorization");
  bool ok = false;

  if (auth != NULL && g_ascii_strncasecmp (auth, "Bearer ", 7) == 0)
    ok = token_equal (auth + 7, strlen (auth + 7), l->token);
  return query_token_equal (uri, l->token) || ok;
}

/* Before the body and the handshake: refuse browsers and, when a token is
 * set, anyone without it.  A status set here ends the request. */
static void
early_handler (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer user_data)
{
  FbRpcListener *l = user_data;
  SoupMessageHeaders *h = soup_server_message_get_request_headers (msg);

  if (soup_message_headers_get_one (h, "Origin") != NULL)
    {
      /* Refusals also close the connection: a WebSocket client that was
       * refused half-closes and waits for us, and libsoup would otherwise
       * keep the connection for another request. */
      soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
      soup_server_message_set_status (msg, SOUP_STATUS_FORBIDDEN, NULL);
      soup_server_message_set_response (msg, "text/plain", SOUP_MEMORY_STATIC, "browser origins are not allowed\n", 32);
      return;
    }
  if (l->token != NULL && !has_token (l, h, soup_server_message_get_uri (msg)))
    {
      static const char why[] = "this server wants its token: use the URL `fusebox serve` printed (with "
                                "?token=), or send Authorization: Bearer TOKEN\n";
      soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
      soup_server_message_set_status (msg, SOUP_STATUS_UNAUTHORIZED, NULL);
      soup_message_headers_append (soup_server_message_get_response_headers (msg), "WWW-Authenticate", "Bearer");
      soup_server_message_set_response (msg, "text/plain", SOUP_MEMORY_STATIC, why, sizeof why - 1);
      return;
    }
  if (strcmp (path, "/readyz") != 0)
    {
      /* A client at its share of connections, or a server at its bound,
       * hears why before the handshake (ipc-rpc-share.c). */
      GSocketAddress *remote = soup_server_message_get_remote_address (msg);
      g_autofree char *ip = NULL;
      char *why = NULL;

      if (remote != NULL && G_IS_INET_SOCKET_ADDRESS (remote))
        ip = g_inet_address_to_string (g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (remote)));
      if (ip != NULL && !fb_rpc_server_may_accept (l->server, ip, &why))
        {
          char *body = g_strconcat (why, "\n", NULL);
          g_free (why);
          soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection", "close");
          soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Retry-After", "1");
          soup_server_message_set_status (msg, SOUP_STATUS_SERVICE_UNAVAILABLE, NULL);
          soup_server_message_set_response (msg, "text/plain", SOUP_MEMORY_TAKE, body, strlen (body));
          return;
        }
    }
}

static void
readyz_handler (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer user_data)
{
  if (soup_server_message_get_status (msg) != 0)
    return;
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (msg, "text/plain", SOUP_MEMORY_STATIC, "ok\n", 3);
}

static bool
listen_ws (FbRpcListener *l, const char *spec, const FbRpcListenOptions *options, char **ret_url, GError **error)
{
  g_autofree char *host = NULL;
  g_autoptr (GInetAddress) addr = NULL;
  g_autoptr (GSocketAddress) sa = NULL;
  g_autoptr (GSocketAddress) effective = NULL;
  g_autoptr (GError) local = NULL;
  const char *hp = spec + 5, *colon;
  char *end;
  guint64 port;
  bool made_token = false;

  /* ws://HOST:PORT, HOST a literal address ([v6]) or "localhost". */
  if (hp[0] == '[')
    {
      const char *close_b = strchr (hp, ']');
      if (close_b == NULL || close_b[1] != ':')
        goto bad;
      host = g_strndup (hp + 1, close_b - hp - 1);
      colon = close_b + 1;
    }
  else
    {
      colon = strrchr (hp, ':');
      if (colon == NULL)
        goto bad;
      host = g_strndup (hp, colon - hp);
    }
  port = g_ascii_strtoull (colon + 1, &end, 10);
  if (end == colon + 1 || (*end != '\0' && strcmp (end, "/") != 0) || port > 65535)
    goto bad;
  if (strcmp (host, "localhost") == 0)
    {
      g_free (host);
      host = g_strdup ("127.0.0.1");
    }
  addr = g_inet_address_new_from_string (host);
  if (addr == NULL)
    goto bad;
  if (!g_inet_address_get_is_loopback (addr))
    {
      if (!options->allow_remote)
        {
          g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                       "--listen %s: %s is not a loopback address; anyone who can reach it could run commands and "
                       "read files under the policy.  Add --allow-remote and --token-file FILE to accept remote "
                       "clients with a bearer token",
                       spec, host);
          return false;
        }
      if (options->token == NULL)
        {
          g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                       "--listen %s: a non-loopback address needs --token-file FILE (a bearer token clients must "
                       "send)",
                       spec);
          return false;
        }
    }
  if (options->token != NULL)
    l->token = g_strdup (options->token);
  else if (!options->no_auth)
    {
      /* A new token for this listener, told in the URL. */
      l->token = fb_rpc_random_hex (FB_RPC_TOKEN_BYTES);
      if (l->token == NULL)
        {
          g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO,
                       "--listen %s: can't make a token: getrandom: %s; give one with --token-file FILE", spec,
                       g_strerror (errno));
          return false;
        }
      made_token = true;
    }
  l->soup = soup_server_new ("server-header", "fusebox-serve", NULL);
  l->ws_ios = fb_rpc_ws_io_set_new ();
  /* libsoup keeps one handler entry per path and runs the early callback
   * of the most specific one: /readyz needs its own. */
  soup_server_add_early_handler (l->soup, NULL, early_handler, l, NULL);
  soup_server_add_early_handler (l->soup, "/readyz", early_handler, l, NULL);
  soup_server_add_handler (l->soup, "/readyz", readyz_handler, l, NULL);
  soup_server_add_websocket_handler (l->soup, NULL, NULL, NULL, on_websocket, l, NULL);
  sa = g_inet_socket_address_new (addr, (guint16)port);
  /* We accept (on_ws_accept) and hand each connection to libsoup with our
   * own stream under it (ipc-transport-wsio.c). */
  l->ws_socket = g_socket_new (g_inet_address_get_family (addr), G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &local);
  if (l->ws_socket != NULL)
    g_socket_set_listen_backlog (l->ws_socket, FB_RPC_LISTEN_BACKLOG);
  if (l->ws_socket == NULL || !g_socket_bind (l->ws_socket, sa, TRUE, &local) ||
      !g_socket_listen (l->ws_socket, &local) ||
      (effective = g_socket_get_local_address (l->ws_socket, &local)) == NULL)
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO,
                   "--listen %s: can't listen there: %s; pick a free port (0 picks one)", spec, local->message);
      return false;
    }
  ws_accept_watch (l);
  if (ret_url != NULL)
    {
      GInetSocketAddress *isa = G_INET_SOCKET_ADDRESS (effective);
      g_autofree char *h = g_inet_address_to_string (g_inet_socket_address_get_address (isa));
      GString *u = g_string_new ("ws://");
      if (strchr (h, ':') != NULL)
        g_string_append_printf (u, "[%s]:%u", h, g_inet_socket_address_get_port (isa));
      else
        g_string_append_printf (u, "%s:%u", h, g_inet_socket_address_get_port (isa));
      if (made_token)
        g_string_append_printf (u, "/?token=%s", l->token);
      *ret_url = g_string_free (u, FALSE);
    }
  return true;

bad:
  g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
               "--listen %s: expected ws://HOST:PORT with HOST an IP address or localhost (e.g. ws://127.0.0.1:0)",
               spec);
  return false;
}

FbRpcListener *
fb_rpc_listen (FbRpcServer *server, const FbRpcListenOptions *options, char **ret_url, GError **error)
{
  g_autoptr (FbRpcListener) l = g_new0 (FbRpcListener, 1);
  const char *spec = options->listen;

  l->server = server;
  if (g_str_has_prefix (spec, "ws://"))
    {
      if (!listen_ws (l, spec, options, ret_url, error))
        return NULL;
    }
  else if (g_str_has_prefix (spec, "unix:"))
    {
      if (!fb_rpc_listen_unix (l, spec + 5, error))
        return NULL;
      if (ret_url != NULL)
        *ret_url = g_strdup (spec);
    }
  else if (strcmp (spec, "stdio") == 0)
    {
      if (!fb_rpc_listen_stdio (l, error))
        return NULL;
      if (ret_url != NULL)
        *ret_url = g_strdup ("stdio");
    }
  else
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                   "--listen %s: unknown transport; use ws://HOST:PORT, unix:PATH or stdio", spec);
      return NULL;
    }
  return g_steal_pointer (&l);
}

bool
fb_rpc_listener_is_finished (FbRpcListener *listener)
{
  return listener->finished;
}

void
fb_rpc_listener_free (FbRpcListener *l)
{
  if (l == NULL)
    return;
  g_clear_handle_id (&l->ws_accept_watch, g_source_remove);
  g_clear_handle_id (&l->ws_accept_again, g_source_remove);
  if (l->ws_socket != NULL)
    g_socket_close (l->ws_socket, NULL);
  g_clear_object (&l->ws_socket);
  if (l->soup != NULL)
    soup_server_disconnect (l->soup);
  while (l->peers != NULL)
    fb_rpc_peer_drop (l->peers->data);
  g_clear_object (&l->soup);
  g_clear_pointer (&l->ws_ios, fb_rpc_ws_io_set_free);
  fb_rpc_stream_listener_clear (l);
  g_free (l->token);
  g_free (l);
}
