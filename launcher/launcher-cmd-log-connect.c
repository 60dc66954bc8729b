/* fusebox log --follow --connect URL — a live server's access events.
 *
 * A small JSON-RPC client of `fusebox serve` (ipc-rpc-log.c): initialize,
 * initialized, log/subscribe {filter}, then one log/event notification per
 * access-log record, which the caller prints exactly as a record read from a
 * file.  Two transports, the server's: a WebSocket (ws://HOST:PORT, libsoup's
 * client, with a bearer token when the server wants one) and a unix stream
 * socket with newline-delimited JSON (unix:PATH).  Whoever answers is
 * checked before anything is sent, where this host can tell: on a unix
 * socket and on a loopback ws:// the peer must be the caller's uid or
 * root's (another user may hold the path or the port while the server is
 * down, to collect the token or feed forged records).
 *
 * Threads: everything here runs on the default main context of the
 * `fusebox` process (GLib's own worker thread only relays the signals to
 * it); nothing is forked.  SIGINT/SIGTERM are taken by g_unix_signal_add so that
 * the subscription is ended with log/unsubscribe and the connection closed
 * normally (exit 0); the server closing the connection is a failure (exit 1),
 * because the follower can no longer promise it shows every event.
 *
 * Bounds: one incoming message is at most FB_RPC_MESSAGE_MAX bytes (the
 * server's own limit; a longer line or frame ends the connection), and the
 * token file is read as serve reads it (fb_cmd_read_token: a regular file of
 * at most FB_CMD_TOKEN_MAX bytes, never a hang on a FIFO). */
#include "launcher/launcher-private.h"

#include <glib-unix.h>
#include <gio/gunixsocketaddress.h>
#include <libsoup/soup.h>
#include <signal.h>
#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/ipc-rpc.h"
#include "policy/util.h"

/* How long an interrupted follower waits for the answer to log/unsubscribe
 * before it closes anyway: a stopped or wedged server must not keep Ctrl-C
 * from working. */
#define UNSUBSCRIBE_WAIT_S 5

enum
{
  ID_INITIALIZE = 1,
  ID_SUBSCRIBE = 2,
  ID_UNSUBSCRIBE = 3,
};

typedef enum
{
  PHASE_CONNECTING,
  PHASE_INITIALIZING,
  PHASE_SUBSCRIBING,
  PHASE_STREAMING,
  PHASE_STOPPING,
  PHASE_DONE,
} Phase;

typedef struct
{
  const char *url;         /* for messages: the token, if the URL holds one, elided */
  const char *connect_url; /* as given */
  const char *token_file;
  JsonNode *filter;
  FbLogConnectFunc func;
  gpointer user_data;

  GMainLoop *loop;
  Phase phase;
  int status;
  char *subscription_id;

  /* ws:// */
  SoupSession *session;
  SoupMessage *msg;
  SoupWebsocketConnection *ws;
  gboolean have_token;

  /* unix: */
  GSocketConnection *conn;
  GDataInputStream *in;
  GCancellable *cancel;

  guint stop_timeout; /* PHASE_STOPPING: the bound on waiting for the answer */
} Client;

static void client_finish (Client *c, int status);

/* --- sending ----------------------------------------------------------------- */

static gboolean
client_send (Client *c, const char *text)
{
  if (c->ws != NULL)
    {
      if (soup_websocket_connection_get_state (c->ws) != SOUP_WEBSOCKET_STATE_OPEN)
        return FALSE;
      soup_websocket_connection_send_text (c->ws, text);
      return TRUE;
    }
  if (c->conn != NULL)
    {
      GOutputStream *out = g_io_stream_get_output_stream (G_IO_STREAM (c->conn));
      g_autofree char *line = g_strconcat (text, "\n", NULL);

      /* Our messages are a few hundred bytes: a blocking write is as good as
       * an asynchronous one and keeps their order obvious. */
      return g_output_stream_write_all (out, line, strlen (line), NULL, NULL, NULL);
    }
  return FALSE;
}

static void
send_request (Client *c, int id, const char *method, JsonNode *params)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *text = NULL;

  json_builder_begin_object (b);
  fb_json_builder_add_int_member (b, "id", id);
  fb_json_builder_add_string_member (b, "method", method);
  json_builder_set_member_name (b, "params");
  json_builder_add_value (b, params);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  text = json_to_string (root, FALSE);
  if (!client_send (c, text))
    {
      fb_cmd_error ("log: could not send %s to %s: the connection is closed", method, c->url);
      client_finish (c, FB_EXIT_FAILURE);
    }
}

static JsonNode *
object_node (const char *first, ...)
{
  JsonObject *o = json_object_new ();
  JsonNode *n = json_node_new (JSON_NODE_OBJECT);
  va_list ap;

  va_start (ap, first);
  for (const char *name = first; name != NULL; name = va_arg (ap, const char *))
    json_object_set_member (o, name, va_arg (ap, JsonNode *));
  va_end (ap);
  json_node_take_object (n, o);
  return n;
}

static void
send_subscribe (Client *c)
{
  JsonNode *params = c->filter != NULL ? object_node ("filter", json_node_copy (c->filter), NULL) : object_node (NULL);

  c->phase = PHASE_SUBSCRIBING;
  send_request (c, ID_SUBSCRIBE, "log/subscribe", params);
}

/* --- receiving ----------------------------------------------------------------- */

static const char *
error_message (JsonObject *msg)
{
  JsonNode *e = json_object_get_member (msg, "error");

  if (e == NULL || !JSON_NODE_HOLDS_OBJECT (e))
    return NULL;
  return json_object_get_string_member_with_default (json_node_get_object (e), "message", "(no message)");
}

static void
on_answer (Client *c, gint64 id, JsonObject *msg)
{
  const char *err = error_message (msg);

  if (id == ID_INITIALIZE && c->phase == PHASE_INITIALIZING)
    {
      if (err != NULL)
        {
          fb_cmd_error ("log: %s refused initialize: %s", c->url, err);
          client_finish (c, FB_EXIT_FAILURE);
          return;
        }
      if (!client_send (c, "{\"method\":\"initialized\",\"params\":{}}"))
        {
          client_finish (c, FB_EXIT_FAILURE);
          return;
        }
      send_subscribe (c);
    }
  else if (id == ID_SUBSCRIBE && c->phase == PHASE_SUBSCRIBING)
    {
      JsonNode *r = json_object_get_member (msg, "result");

      if (err != NULL || r == NULL || !JSON_NODE_HOLDS_OBJECT (r))
        {
          fb_cmd_error ("log: %s refused log/subscribe: %s", c->url, err != NULL ? err : "no result");
          client_finish (c, FB_EXIT_FAILURE);
          return;
        }
      c->subscription_id =
        g_strdup (json_object_get_string_member_with_default (json_node_get_object (r), "subscriptionId", ""));
      if (g_strcmp0 (json_object_get_string_member_with_default (json_node_get_object (r), "scope", NULL), "session") ==
          0)
        {
          /* It would show our own session's records: none, forever. */
          fb_cmd_error ("log: %s shows each client only its own session's records; start `fusebox serve` with "
                        "--subscribe-all to follow it from here, or follow its log file (`fusebox log --follow RUN`)",
                        c->url);
          client_finish (c, FB_EXIT_FAILURE);
          return;
        }
      c->phase = PHASE_STREAMING;
    }
  else if (id == ID_UNSUBSCRIBE && c->phase == PHASE_STOPPING)
    /* Answered, error or not: the server has forgotten us either way. */
    client_finish (c, FB_EXIT_OK);
}

/* PARAMS_TEXT: the record's bytes as the server wrote them into its log,
 * when the message had the server's own shape; otherwise NULL. */
static void
on_event (Client *c, JsonObject *msg, const char *params_text)
{
  JsonNode *p = json_object_get_member (msg, "params");
  g_autofree char *owned = NULL;

  if (p == NULL || !JSON_NODE_HOLDS_OBJECT (p))
    return;
  if (params_text == NULL)
    params_text = owned = json_to_string (p, FALSE);
  c->func (params_text, json_node_get_object (p), c->user_data);
}

static void
on_text (Client *c, const char *text, gsize len)
{
  /* ipc-rpc-log.c sends a log/event as this prefix, the log line byte for byte,
   * and '}': keep those bytes, so that --json prints what the file has. */
  static const char prefix[] = "{\"method\":\"log/event\",\"params\":";
  g_autofree char *raw = NULL;
  g_autoptr (JsonNode) node = NULL;
  JsonObject *msg;
  JsonNode *id;
  const char *method;

  while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
    len--;
  node = json_from_string (text, NULL);
  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    return;
  msg = json_node_get_object (node);
  method = json_object_get_string_member_with_default (msg, "method", NULL);
  id = json_object_get_member (msg, "id");
  if (method != NULL && id == NULL)
    {
      if (strcmp (method, "log/event") == 0 && c->phase >= PHASE_STREAMING)
        {
          if (len > sizeof prefix && strncmp (text, prefix, sizeof prefix - 1) == 0 && text[len - 1] == '}')
            raw = g_strndup (text + sizeof prefix - 1, len - sizeof prefix);
          on_event (c, msg, raw);
        }
      else if (strcmp (method, "log/ended") == 0 && c->phase == PHASE_STREAMING)
        {
          /* The server ended our subscription (we read too slowly): what
           * follows would have gaps, so stop here and say so. */
          JsonObject *p = json_object_get_object_member (msg, "params");
          fb_cmd_error ("log: %s ended the subscription: %s", c->url,
                        p != NULL ? json_object_get_string_member_with_default (p, "reason", "no reason given")
                                  : "no reason given");
          client_finish (c, FB_EXIT_FAILURE);
        }
      return;
    }
  if (method == NULL && id != NULL && JSON_NODE_HOLDS_VALUE (id) && json_node_get_value_type (id) == G_TYPE_INT64)
    on_answer (c, json_node_get_int (id), msg);
}

static void
on_closed_by_server (Client *c, const char *why)
{
  if (c->phase == PHASE_DONE)
    return;
  if (c->phase == PHASE_STOPPING)
    {
      /* We asked to stop and the server closed first: that is a stop too. */
      client_finish (c, FB_EXIT_OK);
      return;
    }
  fb_cmd_error ("log: the server at %s went away%s%s; no more events will be shown", c->url, why != NULL ? ": " : "",
                why != NULL ? why : "");
  client_finish (c, FB_EXIT_FAILURE);
}

/* --- ws:// ----------------------------------------------------------------------- */

static void
on_ws_message (SoupWebsocketConnection *ws, int type, GBytes *message, gpointer user_data)
{
  gsize len;
  const char *data = g_bytes_get_data (message, &len);
  g_autofree char *text = g_strndup (data, len);

  on_text (user_data, text, strlen (text));
}

static void
on_ws_closed (SoupWebsocketConnection *ws, gpointer user_data)
{
  Client *c = user_data;
  g_autofree char *why = NULL;
  gushort code = soup_websocket_connection_get_close_code (ws);
  const char *reason = soup_websocket_connection_get_close_data (ws);

  if (code != 0)
    why = g_strdup_printf ("closed with code %u%s%s", code, reason != NULL && reason[0] != '\0' ? ", " : "",
                           reason != NULL ? reason : "");
  on_closed_by_server (c, why);
}

static void
on_ws_connected (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Client *c = user_data;
  g_autoptr (GError) error = NULL;
  guint http = 0;

  c->ws = soup_session_websocket_connect_finish (SOUP_SESSION (source), res, &error);
  if (c->phase == PHASE_DONE)
    return;
  if (c->ws == NULL)
    {
      http = soup_message_get_status (c->msg);
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        client_finish (c, FB_EXIT_OK);
      else if ((http == SOUP_STATUS_UNAUTHORIZED || http == SOUP_STATUS_FORBIDDEN) && !c->have_token)
        {
          fb_cmd_error ("log: %s answered %u %s: the server wants its token; use the URL `fusebox serve` printed "
                        "(with ?token=), or pass --token-file FILE with the token given to `fusebox serve "
                        "--token-file`",
                        c->url, http, soup_message_get_reason_phrase (c->msg));
          client_finish (c, FB_EXIT_FAILURE);
        }
      else if (http == SOUP_STATUS_UNAUTHORIZED || http == SOUP_STATUS_FORBIDDEN)
        {
          fb_cmd_error ("log: %s answered %u %s: it refused the token %s%s; use the URL `fusebox serve` printed, or "
                        "the file given to `fusebox serve --token-file`",
                        c->url, http, soup_message_get_reason_phrase (c->msg),
                        c->token_file != NULL ? "in " : "of the URL", c->token_file != NULL ? c->token_file : "");
          client_finish (c, FB_EXIT_FAILURE);
        }
      else if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED))
        {
          fb_cmd_error ("log: can't connect to %s: connection refused; is `fusebox serve --listen %s` running?", c->url,
                        c->url);
          client_finish (c, FB_EXIT_FAILURE);
        }
      else
        {
          fb_cmd_error ("log: can't connect to %s: %s; is `fusebox serve --listen %s` running there?", c->url,
                        error->message, c->url);
          client_finish (c, FB_EXIT_FAILURE);
        }
      return;
    }
  /* The server's own limit on a message; libsoup's default (128 KiB) would
   * close the connection on a long path. */
  soup_websocket_connection_set_max_incoming_payload_size (c->ws, FB_RPC_MESSAGE_MAX);
  g_signal_connect (c->ws, "message", G_CALLBACK (on_ws_message), c);
  g_signal_connect (c->ws, "closed", G_CALLBACK (on_ws_closed), c);
  c->phase = PHASE_INITIALIZING;
  send_request (c, ID_INITIALIZE, "initialize",
                object_node ("clientName", json_node_init_string (json_node_alloc (), "fusebox-log"), NULL));
}

/* --- who listens on a loopback port -------------------------------------------- */

/* The state of a connection the server has not accepted yet: a request
 * socket, which inet_diag reports with uid 0 whoever listens. */
#define DIAG_TCP_NEW_SYN_RECV 12
/* How often a request socket is asked about again before /proc is read. */
#define DIAG_ATTEMPTS 50

/* The address of SA (AF_INET or AF_INET6) as inet_diag holds it. */
static void
diag_addr (const struct sockaddr_storage *sa, __be32 ret_addr[4], __be16 *ret_port)
{
  if (sa->ss_family == AF_INET)
    {
      const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;

      ret_addr[0] = in->sin_addr.s_addr;
      *ret_port = in->sin_port;
    }
  else
    {
      const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;

      memcpy (ret_addr, &in6->sin6_addr, 16);
      *ret_port = in6->sin6_port;
    }
}

/* The uid and state of the TCP socket whose source is SRC and destination
 * DST (NETLINK_SOCK_DIAG, an exact lookup); -errno. */
static int
diag_lookup (const struct sockaddr_storage *src, const struct sockaddr_storage *dst, uid_t *ret_uid, guint *ret_state)
{
  struct
  {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 req;
  } msg = {
    .nlh = { .nlmsg_len = sizeof msg, .nlmsg_type = SOCK_DIAG_BY_FAMILY, .nlmsg_flags = NLM_F_REQUEST },
    .req = { .sdiag_family = src->ss_family, .sdiag_protocol = IPPROTO_TCP, .idiag_states = ~0U },
  };
  struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
  union
  {
    struct nlmsghdr align;
    char buf[8192];
  } answer;
  _fb_cleanup_fd_ int nl = socket (AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  ssize_t n;

  if (nl < 0)
    return -errno;
  diag_addr (src, msg.req.id.idiag_src, &msg.req.id.idiag_sport);
  diag_addr (dst, msg.req.id.idiag_dst, &msg.req.id.idiag_dport);
  msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  if (sendto (nl, &msg, sizeof msg, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0)
    return -errno;
  do
    n = recv (nl, answer.buf, sizeof answer.buf, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return -errno;
  for (struct nlmsghdr *h = &answer.align; NLMSG_OK (h, (size_t)n); h = NLMSG_NEXT (h, n))
    {
      if (h->nlmsg_type == NLMSG_ERROR)
        {
          const struct nlmsgerr *e = NLMSG_DATA (h);
          return e->error < 0 ? e->error : -EIO;
        }
      if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY && h->nlmsg_len >= NLMSG_LENGTH (sizeof (struct inet_diag_msg)))
        {
          const struct inet_diag_msg *m = NLMSG_DATA (h);

          *ret_uid = m->idiag_uid;
          *ret_state = m->idiag_state;
          return 0;
        }
    }
  return -ENOENT;
}

/* The same from /proc/net/tcp or tcp6, which shows a request socket with
 * its listener's uid; -errno. */
static int
proc_lookup (const struct sockaddr_storage *src, const struct sockaddr_storage *dst, uid_t *ret_uid)
{
  const char *file = src->ss_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6";
  g_autofree char *want_src = NULL, *want_dst = NULL;
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;

  for (int i = 0; i < 2; i++)
    {
      const struct sockaddr_storage *sa = i == 0 ? src : dst;
      __be32 a[4] = { 0 };
      __be16 port;
      char *hex;

      diag_addr (sa, a, &port);
      /* the kernel prints each 32-bit word of the address as a number */
      if (sa->ss_family == AF_INET)
        hex = g_strdup_printf ("%08X:%04X", a[0], ntohs (port));
      else
        hex = g_strdup_printf ("%08X%08X%08X%08X:%04X", a[0], a[1], a[2], a[3], ntohs (port));
      if (i == 0)
        want_src = hex;
      else
        want_dst = hex;
    }
  if (!g_file_get_contents (file, &text, NULL, NULL))
    return -ENOENT;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 1; lines[i] != NULL; i++)
    {
      char local[64], remote[64];
      unsigned uid;

      /* sl local_address rem_address st tx:rx tr:when retrnsmt uid */
      if (sscanf (lines[i], "%*s %63s %63s %*s %*s %*s %*s %u", local, remote, &uid) == 3 &&
          strcmp (local, want_src) == 0 && strcmp (remote, want_dst) == 0)
        {
          *ret_uid = uid;
          return 0;
        }
    }
  return -ENOENT;
}

static gboolean
is_loopback (const struct sockaddr_storage *sa)
{
  if (sa->ss_family == AF_INET)
    return (ntohl (((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->ss_family == AF_INET6)
    {
      const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;

      return IN6_IS_ADDR_LOOPBACK (a) || (IN6_IS_ADDR_V4MAPPED (a) && a->s6_addr[12] == 127);
    }
  return FALSE;
}

/* FD is a TCP connection; when it goes to this host's loopback, the uid of
 * the socket that answers it (the server's side: its source is our peer,
 * its destination us) in *RET_UID and 1.  0 when FD goes elsewhere (nothing
 * on this host can say who answers), -1 when the kernel would not say. */
static int
loopback_peer_uid (int fd, uid_t *ret_uid)
{
  struct sockaddr_storage local = { 0 }, peer = { 0 };
  socklen_t llen = sizeof local, plen = sizeof peer;
  guint state = 0;

  if (getsockname (fd, (struct sockaddr *)&local, &llen) < 0 || getpeername (fd, (struct sockaddr *)&peer, &plen) < 0 ||
      local.ss_family != peer.ss_family || !is_loopback (&peer))
    return 0;
  /* On loopback the server's side exists once connect() returns, as a
   * request socket until the kernel has taken our ACK; wait that out. */
  for (int i = 0; i < DIAG_ATTEMPTS; i++)
    {
      if (diag_lookup (&peer, &local, ret_uid, &state) < 0)
        break;
      if (state != DIAG_TCP_NEW_SYN_RECV)
        return 1;
      g_usleep (1000);
    }
  return proc_lookup (&peer, &local, ret_uid) == 0 ? 1 : -1;
}

/* libsoup's connection to a ws:// server is made (G_SOCKET_CLIENT_CONNECTED),
 * and nothing is written yet: the upgrade request that follows carries the
 * token.  On loopback the listener is another local process, and while
 * `fusebox serve` is down (a restart, a crash) another user can hold its
 * port; whoever answers must be the caller's uid or root's, as for unix:
 * (unix_peer_is_ours).  Otherwise the socket is shut before a byte goes out. */
static void
on_ws_network_event (SoupMessage *msg, GSocketClientEvent event, GIOStream *connection, gpointer user_data)
{
  Client *c = user_data;
  g_autofree char *ours = NULL;
  uid_t uid = 0;
  int fd, found;

  if (event != G_SOCKET_CLIENT_CONNECTED || !G_IS_SOCKET_CONNECTION (connection))
    return;
  fd = g_socket_get_fd (g_socket_connection_get_socket (G_SOCKET_CONNECTION (connection)));
  found = loopback_peer_uid (fd, &uid);
  if (found == 0 || (found > 0 && (uid == geteuid () || uid == 0)))
    return;
  shutdown (fd, SHUT_RDWR);
  client_finish (c, FB_EXIT_FAILURE);
  g_cancellable_cancel (c->cancel);
  if (found < 0)
    {
      fb_cmd_error ("log: can't tell which user listens at %s (neither NETLINK_SOCK_DIAG nor /proc/net/tcp says): "
                    "nothing was sent to it; connect with --connect unix:PATH (`fusebox serve --listen unix:PATH`), "
                    "whose peer can be checked",
                    c->url);
      return;
    }
  ours = geteuid () == 0 ? g_strdup ("root's") : g_strdup_printf ("your uid %u's or root's", (unsigned)geteuid ());
  fb_cmd_error ("log: %s is answered by a process of uid %u, not %s: nothing was sent to it (no token, no request); "
                "if that is the server you meant, run `fusebox log --connect` as uid %u; if not, `fusebox serve` is "
                "not running there, and uid %u holds its port",
                c->url, (unsigned)uid, ours, (unsigned)uid, (unsigned)uid);
}

static gboolean
start_ws (Client *c)
{
  g_autoptr (GError) error = NULL;

  c->msg = soup_message_new ("GET", c->connect_url);
  if (c->msg == NULL)
    {
      fb_cmd_error ("log: --connect %s is not a valid ws:// URL (ws://HOST:PORT)", c->url);
      return FALSE;
    }
  if (c->token_file != NULL)
    {
      g_autofree char *token = fb_cmd_read_token (c->token_file, &error);
      g_autofree char *header = NULL;

      if (token == NULL)
        {
          fb_cmd_error ("log: --token-file: %s", error->message);
          return FALSE;
        }
      header = g_strconcat ("Bearer ", token, NULL);
      soup_message_headers_replace (soup_message_get_request_headers (c->msg), "Authorization", header);
      c->have_token = TRUE;
    }
  if (strcmp (c->url, c->connect_url) != 0)
    c->have_token = TRUE; /* in the URL's query */
  g_signal_connect (c->msg, "network-event", G_CALLBACK (on_ws_network_event), c);
  c->session = soup_session_new ();
  /* No Origin: the server refuses any request that carries one (a browser). */
  soup_session_websocket_connect_async (c->session, c->msg, NULL, NULL, G_PRIORITY_DEFAULT, c->cancel, on_ws_connected,
                                        c);
  return TRUE;
}

/* --- unix: ---------------------------------------------------------------------- */

static void on_unix_line (GObject *source, GAsyncResult *res, gpointer user_data);

static void
read_next_line (Client *c)
{
  g_data_input_stream_read_line_async (c->in, G_PRIORITY_DEFAULT, c->cancel, on_unix_line, c);
}

static void
on_unix_line (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Client *c = user_data;
  g_autoptr (GError) error = NULL;
  gsize len = 0;
  g_autofree char *line = g_data_input_stream_read_line_finish (G_DATA_INPUT_STREAM (source), res, &len, &error);

  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  if (line == NULL)
    {
      on_closed_by_server (c, error != NULL ? error->message : NULL);
      return;
    }
  if (len > FB_RPC_MESSAGE_MAX)
    {
      fb_cmd_error ("log: %s sent a message longer than %d bytes; giving up", c->url, FB_RPC_MESSAGE_MAX);
      client_finish (c, FB_EXIT_FAILURE);
      return;
    }
  on_text (c, line, len);
  if (c->phase != PHASE_DONE)
    read_next_line (c);
}

/* Whoever answers at PATH is taken at its word: every record it sends is
 * printed as the server's.  In a shared directory anyone who can make a
 * socket there can stand in for `fusebox serve` (before it starts, or after
 * it ends), so the uid the kernel saw listen (SO_PEERCRED) must be ours or
 * root's (a server root runs for others), as run --session checks its
 * daemon; checked before anything is sent. */
static gboolean
unix_peer_is_ours (Client *c, const char *path)
{
  struct ucred cred = { 0 };
  socklen_t len = sizeof cred;
  int fd = g_socket_get_fd (g_socket_connection_get_socket (c->conn));
  g_autofree char *ours = NULL;
  int uid;

  if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof cred &&
      (cred.uid == geteuid () || cred.uid == 0))
    return TRUE;
  uid = len == sizeof cred ? (int)cred.uid : -1;
  ours = geteuid () == 0 ? g_strdup ("root's") : g_strdup_printf ("your uid %u's or root's", (unsigned)geteuid ());
  fb_cmd_error ("log: %s is answered by a process of uid %d, not %s: nothing was sent to it and nothing it sends is "
                "shown; if that is the server you meant, run `fusebox log --connect` as uid %d; if not, remove %s "
                "(whoever can write in its directory may have put it there)",
                c->url, uid, ours, uid, path);
  return FALSE;
}

static gboolean
start_unix (Client *c, const char *path)
{
  g_autoptr (GSocketClient) sc = g_socket_client_new ();
  g_autoptr (GSocketAddress) addr = NULL;
  g_autoptr (GError) error = NULL;
  _fb_cleanup_fd_ int pfd = -1;
  g_autofree char *proc = NULL;

  if (path[0] == '\0')
    {
      fb_cmd_error ("log: --connect %s names no socket; use unix:PATH", c->url);
      return FALSE;
    }
  /* the socket the walk found (nothing on another user's FUSE filesystem
   * is asked: the lookup of its name would wait for good), reached through
   * its descriptor, not the path again */
  pfd = fb_path_open_not_foreign_fuse (path, "--connect", "give a socket on a filesystem of yours or root's", &error);
  if (pfd == -1)
    {
      fb_cmd_error ("log: %s", error->message);
      return FALSE;
    }
  if (pfd >= 0)
    proc = g_strdup_printf ("/proc/self/fd/%d", pfd);
  addr = g_unix_socket_address_new (proc != NULL ? proc : path);
  /* GSocket creates its sockets with SOCK_CLOEXEC. */
  c->conn = g_socket_client_connect (sc, G_SOCKET_CONNECTABLE (addr), NULL, &error);
  if (c->conn == NULL)
    {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED) ||
          g_error_matches (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
        fb_cmd_error ("log: can't connect to %s: %s; is `fusebox serve --listen %s` running?", c->url, error->message,
                      c->url);
      else
        fb_cmd_error ("log: can't connect to %s: %s", c->url, error->message);
      return FALSE;
    }
  if (!unix_peer_is_ours (c, path))
    return FALSE;
  c->in = g_data_input_stream_new (g_io_stream_get_input_stream (G_IO_STREAM (c->conn)));
  g_data_input_stream_set_newline_type (c->in, G_DATA_STREAM_NEWLINE_TYPE_LF);
  c->phase = PHASE_INITIALIZING;
  read_next_line (c);
  send_request (c, ID_INITIALIZE, "initialize",
                object_node ("clientName", json_node_init_string (json_node_alloc (), "fusebox-log"), NULL));
  return c->phase != PHASE_DONE;
}

/* --- stopping ------------------------------------------------------------------- */

static void
client_finish (Client *c, int status)
{
  if (c->phase == PHASE_DONE)
    return;
  c->phase = PHASE_DONE;
  c->status = status;
  g_main_loop_quit (c->loop);
}

static gboolean
on_unsubscribe_timeout (gpointer user_data)
{
  Client *c = user_data;

  c->stop_timeout = 0;
  client_finish (c, FB_EXIT_OK);
  return G_SOURCE_REMOVE;
}

static gboolean
on_close_limit (gpointer user_data)
{
  *(gboolean *)user_data = TRUE;
  return G_SOURCE_REMOVE;
}

static gboolean
on_signal (gpointer user_data)
{
  Client *c = user_data;

  if (c->phase == PHASE_STREAMING && c->subscription_id != NULL)
    {
      c->phase = PHASE_STOPPING;
      send_request (
        c, ID_UNSUBSCRIBE, "log/unsubscribe",
        object_node ("subscriptionId", json_node_init_string (json_node_alloc (), c->subscription_id), NULL));
      c->stop_timeout = g_timeout_add_seconds (UNSUBSCRIBE_WAIT_S, on_unsubscribe_timeout, c);
    }
  else
    client_finish (c, FB_EXIT_OK);
  return G_SOURCE_CONTINUE;
}

/* URL with the value of its query parameter token= elided: a token is
 * not for messages (they end up in terminals' scrollback and CI logs). */
static char *
url_without_token (const char *url)
{
  GString *out = g_string_new (NULL);
  const char *q = strchr (url, '?');

  if (q == NULL)
    return g_string_free (g_string_append (out, url), FALSE);
  g_string_append_len (out, url, q - url);
  for (const char *p = q; *p != '\0';)
    {
      const char *end = strchr (p + 1, '&');
      gsize len = end != NULL ? (gsize)(end - p) : strlen (p);
      if (strncmp (p + 1, "token=", 6) == 0)
        g_string_append_printf (out, "%ctoken=...", *p);
      else
        g_string_append_len (out, p, (gssize)len);
      p += len;
    }
  return g_string_free (out, FALSE);
}

int
fb_log_connect_follow (const char *url, const char *token_file, JsonNode *server_filter, FbLogConnectFunc func,
                       gpointer user_data)
{
  Client c = { 0 };
  guint sigint, sigterm;
  gboolean started;
  g_autofree char *shown = url_without_token (url);

  c.url = shown;
  c.connect_url = url;
  c.token_file = token_file;
  c.filter = server_filter;
  c.func = func;
  c.user_data = user_data;
  c.loop = g_main_loop_new (NULL, FALSE);
  c.cancel = g_cancellable_new ();
  c.phase = PHASE_CONNECTING;
  c.status = FB_EXIT_OK;
  /* SIGPIPE keeps its default: GSocket sends with MSG_NOSIGNAL, so only a
   * closed stdout raises it, and that should end us as it ends
   * `fusebox log --follow FILE | head`. */
  sigint = g_unix_signal_add (SIGINT, on_signal, &c);
  sigterm = g_unix_signal_add (SIGTERM, on_signal, &c);

  if (g_str_has_prefix (url, "unix:"))
    {
      if (token_file != NULL)
        {
          fb_cmd_error ("log: --token-file is for ws:// URLs; a unix socket checks the peer's uid instead");
          c.status = FB_EXIT_USAGE;
          started = FALSE;
        }
      else
        {
          started = start_unix (&c, url + strlen ("unix:"));
          if (!started && c.phase != PHASE_DONE)
            c.status = FB_EXIT_FAILURE;
        }
    }
  else if (g_str_has_prefix (url, "ws://") || g_str_has_prefix (url, "wss://"))
    {
      started = start_ws (&c);
      if (!started)
        c.status = FB_EXIT_FAILURE;
    }
  else
    {
      fb_cmd_error ("log: --connect takes ws://HOST:PORT or unix:PATH (what `fusebox serve --listen` was given), "
                    "not '%s'",
                    shown);
      c.status = FB_EXIT_USAGE;
      started = FALSE;
    }

  if (started && c.phase != PHASE_DONE)
    g_main_loop_run (c.loop);

  g_source_remove (sigint);
  g_source_remove (sigterm);
  g_clear_handle_id (&c.stop_timeout, g_source_remove);
  g_cancellable_cancel (c.cancel);
  if (c.ws != NULL)
    {
      g_signal_handlers_disconnect_by_data (c.ws, &c);
      if (soup_websocket_connection_get_state (c.ws) == SOUP_WEBSOCKET_STATE_OPEN)
        {
          gboolean expired = FALSE;
          guint limit = g_timeout_add_seconds (UNSUBSCRIBE_WAIT_S, on_close_limit, &expired);

          /* A normal close (1000), and wait (bounded) for the server's close
           * frame so that it sees a clean end rather than a dropped
           * connection. */
          soup_websocket_connection_close (c.ws, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
          while (soup_websocket_connection_get_state (c.ws) != SOUP_WEBSOCKET_STATE_CLOSED && !expired)
            g_main_context_iteration (NULL, TRUE);
          if (!expired)
            g_source_remove (limit);
        }
      g_object_unref (c.ws);
    }
  if (c.conn != NULL)
    g_io_stream_close (G_IO_STREAM (c.conn), NULL, NULL);
  g_clear_object (&c.in);
  g_clear_object (&c.conn);
  g_clear_object (&c.msg);
  g_clear_object (&c.session);
  g_clear_object (&c.cancel);
  g_main_loop_unref (c.loop);
  g_free (c.subscription_id);
  return c.status;
}
