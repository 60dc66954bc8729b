/* fusebox — the network proxy outside the sandbox (ipc-proxy.h has the
 * contract and the bounds).
 *
 * Threat model: everything a connection sends came from the sandbox.  The
 * proxy decides on the name the client asked for, before any lookup (a
 * refused name is never resolved: nothing of it reaches the host's
 * resolver), resolves it itself (there is no resolver inside, and --resolve
 * entries stand in for tests), then checks each address again
 * (fb_policy_net_check_address(): a DNS answer can't turn an allowed name
 * into the host's loopback or private network unless the allowlist names
 * those addresses) and connects only to an address that passed.  A plain
 * HTTP request is forwarded with "Connection: close", its Host header the
 * host decided (ipc-proxy-parse.c), and only its Content-Length of body
 * after it, so that a second request on the same connection can't reach
 * another host undecided.  The name is resolved absolute, never through
 * resolv.conf's search list.  A request refused before any decision is
 * logged as a refusal all the same.
 *
 * Threads: everything runs on the main loop of the thread that made the
 * proxy (GIO's asynchronous calls; GResolver's lookup runs on GLib's
 * worker threads and answers on the loop).  Nothing here blocks the loop:
 * the proxy's own answers are a few hundred bytes sent without blocking on
 * a socket whose buffer holds nothing else, and every other write is
 * asynchronous or, once spliced, moved by splice(2) without blocking.
 * Records go to the run's sink from the loop (a synchronous write to the
 * log file, as every record written on the loop is).
 *
 * Memory and descriptors: a connection holds its handshake buffer
 * (FB_PROXY_HEAD_MAX) and its client's socket; once its name is allowed, a
 * pipe each way (FB_PROXY_CONN_FDS descriptors in all with the host's
 * socket, at most max_tunnels such at once); spliced, the bytes go from
 * socket to pipe to socket inside the kernel, and a direction is read
 * again only once its pipe was emptied; at most FB_PROXY_MAX_CONNECTIONS
 * at once (the proxy stops accepting past them).
 *
 * Lifetime: a Conn is reference-counted: the proxy's table holds one, and
 * each asynchronous call in flight or socket source waited on one.
 * conn_close() cancels, stops and closes everything once; the callbacks
 * that come back find it closed and only drop their reference.
 */
#include "ipc/ipc-proxy.h"
#include "ipc/ipc.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

struct FbProxy
{
  FbPolicy *policy;
  FbAccessSink *sink;
  uid_t uid;
  char *process;
  GHashTable *resolve; /* name -> GPtrArray of GInetAddress */
  GResolver *resolver;
  GSocket *listen;    /* non-blocking; NULL once freeing */
  GSource *accepting; /* readable LISTEN, while accepting */
  guint backoff;      /* a timer: accepting again after EMFILE or ENFILE */
  bool backoff_told;  /* its message, once */
  guint idle_s;       /* FB_PROXY_IDLE_S, or $FUSEBOX_TEST_PROXY_IDLE's */
  GSocketClient *client;
  GHashTable *conns; /* Conn* (a reference each) */
  bool stopped;      /* no accepting: at max_connections */
  guint max_connections;
  bool full_told; /* the limit's message, once */
  guint tunnels;  /* connections holding their pipes */
  guint max_tunnels;
  FbProxyFds own_fds;
  FbProxyFds *fds; /* own_fds, or the process's (FbProxyOptions.fds) */
  guint fds_used;  /* of fds->used, this proxy's */
  guint fds_cap;   /* what this proxy may hold: all of a share of its own, half of a shared one */
  bool fds_told;   /* the descriptors' message, once */
};

/* Whether N more descriptors fit in the proxies' share and in this
 * proxy's part of it. */
static bool
proxy_fds_room (const FbProxy *proxy, guint n)
{
  return proxy->fds->used + n <= proxy->fds->max && proxy->fds_used + n <= proxy->fds_cap;
}

static void
proxy_fds_take (FbProxy *proxy, guint n)
{
  proxy->fds->used += n;
  proxy->fds_used += n;
}

static void
proxy_fds_give (FbProxy *proxy, guint n)
{
  proxy->fds->used -= n;
  proxy->fds_used -= n;
}

typedef enum
{
  STATE_FIRST,          /* nothing read yet */
  STATE_SOCKS_GREETING, /* SOCKS5: methods */
  STATE_SOCKS_REQUEST,  /* SOCKS5: the request */
  STATE_HTTP_HEAD,      /* HTTP: the head */
  STATE_CONNECTING,     /* resolving and connecting */
  STATE_SPLICING,
} State;

typedef struct Conn Conn;

/* One direction of a spliced connection: spliced from IN_SOCKET into the
 * pipe FDS when it is empty, from it to OUT_SOCKET until it is, each
 * without blocking (pipe_pump); SOURCE waits for whichever comes next. */
typedef struct
{
  Conn *conn;
  GSocket *in_socket;
  GSocket *out_socket;
  int in_fd, out_fd; /* theirs */
  GSource *source;   /* the socket source waited on, or NULL */
  int fds[2];        /* the pipe (read end, write end), or -1 */
  gsize held;        /* bytes in the pipe, not yet sent on */
  GByteArray *first; /* the client's bytes that came with its request, or NULL once sent */
  gsize first_off;   /* of which sent */
  guint64 bytes;     /* sent on, counted as each send or splice returns */
  bool eof;
  bool limited; /* a plain request's body: LEFT more bytes pass, the rest is dropped */
  guint64 left;
} Pipe;

struct Conn
{
  gint ref;
  FbProxy *proxy; /* NULL once closed */
  GSocketConnection *client;
  GSocketConnection *upstream;
  GCancellable *cancel;
  guint timer;
  State state;
  guint8 head[FB_PROXY_HEAD_MAX + 1];
  gsize head_len;
  FbProxyRequest req;
  char *path; /* "host:port", the record's path */
  FbPolicyNetDecision by_name;
  GPtrArray *addresses; /* GInetAddress, resolved */
  guint next_address;
  char *address;                /* the one being tried or connected */
  FbPolicyNetDecision decision; /* for that address */
  bool connected_logged;        /* "connect" written: "disconnect" follows */
  gint64 start_us;              /* monotonic, at connect */
  gint64 moved_us;              /* monotonic, the last bytes spliced either way */
  bool piped;                   /* the pipes made: one of the proxy's tunnels */
  Pipe up, down;                /* client to host, host to client */
};

static void pipe_close (Pipe *p);

static Conn *
conn_ref (Conn *c)
{
  g_atomic_int_inc (&c->ref);
  return c;
}

static void
conn_unref (Conn *c)
{
  if (!g_atomic_int_dec_and_test (&c->ref))
    return;
  g_clear_object (&c->client);
  g_clear_object (&c->upstream);
  g_clear_object (&c->cancel);
  fb_proxy_request_clear (&c->req);
  g_free (c->path);
  g_free (c->address);
  g_clear_pointer (&c->addresses, g_ptr_array_unref);
  g_clear_pointer (&c->up.first, g_byte_array_unref);
  g_clear_pointer (&c->down.first, g_byte_array_unref);
  pipe_close (&c->up);
  pipe_close (&c->down);
  g_free (c);
}

/* ---- records ---- */

static void
conn_log (Conn *c, FbOp op, FbDecision decision, int err, const FbPolicyNetDecision *d)
{
  FbAccessEvent e = {
    .uid = c->proxy->uid,
    .comm = NULL,
    .process = c->proxy->process,
    .op = op,
    .path = c->path,
    .access = fb_access_to_string (FB_ACCESS_CONNECT),
    .decision = decision,
    .err = err,
    .net_rule = d->rule,
    .host = c->req.host,
    .port = c->req.port,
    .address = c->address,
    .bytes_read = -1,
    .bytes_written = -1,
  };

  if (op == FB_OP_DISCONNECT)
    {
      /* the sandbox's view, as for a file's close: what it read and wrote */
      e.bytes_read = (int64_t)c->down.bytes;
      e.bytes_written = (int64_t)c->up.bytes;
      e.duration_us = g_get_monotonic_time () - c->start_us;
    }
  fb_access_sink_push (c->proxy->sink, &e);
}

/* A request the proxy refused on its own, not by a rule: a refused
 * connection all the same, by fusebox (rule NAME), for WHY, so that it
 * leaves a trace (folded as other repeated refusals).  The host is what
 * the parser took, if it got that far: a checked name or an address's
 * text. */
static void
conn_log_refused (Conn *c, const char *name, int err, const char *why)
{
  g_autofree char *origin = g_strdup_printf ("fusebox: %s", why);
  FbPolicyNetRule rule = {
    .kind = FB_POLICY_NET_RULE_DEFAULT,
    .index = -1,
    .name = name,
    .origin = origin,
    .text = name,
    .why = why,
  };
  FbPolicyNetDecision d = { .allowed = false, .rule = &rule };

  if (c->path == NULL)
    c->path = c->req.host != NULL
                ? g_strdup_printf (strchr (c->req.host, ':') != NULL ? "[%s]:%u" : "%s:%u", c->req.host, c->req.port)
                : g_strdup ("-");
  conn_log (c, FB_OP_CONNECT, FB_DECISION_DENY, err, &d);
}

/* A request refused before any decision (malformed, a SOCKS5 command or
 * address type the proxy does not take), so that a sandbox probing the
 * parser leaves a trace. */
static void
conn_log_refused_request (Conn *c, const char *why)
{
  conn_log_refused (c, "malformed", EINVAL, why);
}

/* ---- the end ---- */

static void proxy_resume (FbProxy *proxy);

static void
conn_close (Conn *c)
{
  FbProxy *proxy = c->proxy;

  if (proxy == NULL)
    return;
  if (c->connected_logged)
    conn_log (c, FB_OP_DISCONNECT, FB_DECISION_ALLOW, 0, &c->decision);
  c->proxy = NULL;
  g_cancellable_cancel (c->cancel);
  fb_source_clear (&c->up.source);
  fb_source_clear (&c->down.source);
  pipe_close (&c->up);
  pipe_close (&c->down);
  proxy_fds_give (proxy, 1 + (c->piped ? FB_PROXY_CONN_FDS - 1 : 0));
  if (c->piped)
    proxy->tunnels--;
  c->piped = false;
  if (c->timer != 0)
    g_source_remove (c->timer);
  c->timer = 0;
  if (c->client != NULL)
    g_io_stream_close (G_IO_STREAM (c->client), NULL, NULL);
  if (c->upstream != NULL)
    g_io_stream_close (G_IO_STREAM (c->upstream), NULL, NULL);
  g_hash_table_remove (proxy->conns, c); /* its reference */
  proxy_resume (proxy);
}

/* Send TEXT to the client without blocking (see the top of this file). */
static void
conn_answer (Conn *c, const void *data, gsize len)
{
  GSocket *s = g_socket_connection_get_socket (c->client);

  g_socket_send_with_blocking (s, data, len, FALSE, NULL, NULL);
}

/* Header values and the body carry the policy's text: control characters
 * and what is not ASCII become '?', so that nothing of it can end a header
 * line. */
static void
append_ascii (GString *out, const char *s)
{
  for (; s != NULL && *s != '\0'; s++)
    g_string_append_c (out, (guchar)*s >= 0x20 && (guchar)*s < 0x7f ? *s : '?');
}

static void
conn_answer_http (Conn *c, const char *status, const FbPolicyNetDecision *d, const char *text)
{
  g_autoptr (GString) body = g_string_new ("fusebox: ");
  g_autoptr (GString) head = g_string_new ("HTTP/1.1 ");

  if (d != NULL)
    {
      g_string_append (body, "connection to ");
      append_ascii (body, c->path);
      if (c->address != NULL && (c->req.host == NULL || strcmp (c->address, c->req.host) != 0))
        {
          g_string_append (body, " (");
          append_ascii (body, c->address);
          g_string_append_c (body, ')');
        }
      g_string_append (body, " refused by the network policy: rule ");
      append_ascii (body, d->rule->name);
      g_string_append (body, " (");
      append_ascii (body, d->rule->origin);
      g_string_append (body, "): ");
      append_ascii (body, d->rule->why);
    }
  else
    append_ascii (body, text);
  g_string_append_c (body, '\n');
  g_string_append (head, status);
  g_string_append (head, "\r\nContent-Type: text/plain\r\nConnection: close\r\n");
  if (d != NULL)
    {
      g_string_append (head, "Fusebox-Rule: ");
      append_ascii (head, d->rule->name);
      g_string_append (head, "\r\nFusebox-Why: ");
      append_ascii (head, d->rule->why);
      g_string_append (head, "\r\n");
    }
  g_string_append_printf (head, "Content-Length: %" G_GSIZE_FORMAT "\r\n\r\n", body->len);
  g_string_append_len (head, body->str, (gssize)body->len);
  conn_answer (c, head->str, head->len);
}

static void
conn_answer_socks (Conn *c, guint8 code)
{
  guint8 reply[10] = { 5, code, 0, 1, 0, 0, 0, 0, 0, 0 };

  conn_answer (c, reply, sizeof reply);
}

/* The attempt failed before a connection: answered, closed. */
static void
conn_fail (Conn *c, const char *status, guint8 socks, const FbPolicyNetDecision *refused, const char *text)
{
  if (c->req.kind == FB_PROXY_SOCKS)
    conn_answer_socks (c, socks);
  else
    conn_answer_http (c, status, refused, text);
  conn_close (c);
}

static gboolean
on_timeout (gpointer data)
{
  Conn *c = data;

  c->timer = 0;
  if (c->state == STATE_CONNECTING)
    {
      conn_log (c, FB_OP_CONNECT, FB_DECISION_ALLOW, ETIMEDOUT, &c->decision);
      conn_fail (c, "504 Gateway Timeout", FB_SOCKS_HOST_UNREACHABLE, NULL, "connecting took too long");
    }
  else if (c->state == STATE_HTTP_HEAD)
    conn_fail (c, "408 Request Timeout", 0, NULL, "the request did not arrive in time");
  else if (c->state == STATE_SPLICING &&
           g_get_monotonic_time () - c->moved_us < (gint64)c->proxy->idle_s * G_USEC_PER_SEC)
    {
      /* bytes moved since: the idle bound counts from them */
      gint64 left = (gint64)c->proxy->idle_s * G_USEC_PER_SEC - (g_get_monotonic_time () - c->moved_us);

      c->timer = g_timeout_add_seconds ((guint)(left / G_USEC_PER_SEC) + 1, on_timeout, c);
    }
  else
    conn_close (c); /* a handshake past its bound, or a tunnel idle for idle_s */
  return G_SOURCE_REMOVE;
}

static void
conn_set_timer (Conn *c, guint seconds)
{
  if (c->timer != 0)
    g_source_remove (c->timer);
  c->timer = g_timeout_add_seconds (seconds, on_timeout, c);
}

/* ---- splicing ---- */

static gboolean on_pipe_ready (GSocket *socket, GIOCondition condition, gpointer data);

static void
pipe_unref_conn (gpointer data)
{
  conn_unref (((Pipe *)data)->conn);
}

/* Waits for SOCKET to be ready for CONDITION, then FN; the source holds a
 * reference to the connection. */
static void
pipe_wait (Pipe *p, GSocket *socket, GIOCondition condition, GSocketSourceFunc fn)
{
  p->source = g_socket_create_source (socket, condition | G_IO_HUP | G_IO_ERR, NULL);
  conn_ref (p->conn);
  g_source_set_callback (p->source, G_SOURCE_FUNC (fn), p, pipe_unref_conn);
  g_source_attach (p->source, NULL);
}

/* The pipe's descriptors, given back as soon as the connection ends (not
 * when its last callback drops it). */
static void
pipe_close (Pipe *p)
{
  fb_fd_close (&p->fds[0]);
  fb_fd_close (&p->fds[1]);
}

/* Moves bytes one way through the kernel: splice(2) from IN_SOCKET into
 * the pipe, and from the pipe to OUT_SOCKET, so that no byte is copied
 * into the proxy.  First the bytes the client sent with its request
 * (FIRST, sent as they are).  The pipe is filled only once it is empty:
 * a splice into it that would block then means IN_SOCKET has nothing yet
 * (never that the pipe is full), and what a reader that does not read
 * makes the proxy hold is one pipe's pages (a slow reader slows its
 * writer).  Each byte is counted as the send or splice that took it to
 * OUT_SOCKET returns: what the kernel took for the other end, never a
 * byte it refused (what a peer that resets without reading left in the
 * sockets' buffers is counted too, fusebox(1)), and so on until a socket would block; then it
 * waits for that one: OUT_SOCKET writable while the pipe holds bytes,
 * IN_SOCKET readable once it is empty.  After PIPE_ROUNDS fills it waits
 * anyway (the socket is ready: the loop comes back at once), so that one
 * fast connection does not starve the others.  Both sockets are
 * non-blocking (GSocket makes them so) and the pipe too, so no splice
 * blocks the loop; a splice to a socket the peer reset raises SIGPIPE,
 * which every program running a proxy ignores. */
#define PIPE_ROUNDS 16

/* TCP's urgent data (MSG_OOB): splice(2) stops at the urgent mark and
 * takes nothing more (tcp_read_sock never reads past it), while the socket
 * stays readable, so waiting for it to be readable would wake the loop
 * again at once, for ever.  Both sockets of a tunnel are SO_OOBINLINE
 * (pipe_init): the urgent byte is then an ordinary byte of the stream, read
 * here with recv(2) (which moves past the mark) and put into the empty
 * pipe, passed on and counted like any other; then splicing goes on. */
static bool
pipe_at_urgent_mark (Pipe *p)
{
  int at = 0;

  return ioctl (p->in_fd, SIOCATMARK, &at) == 0 && at > 0;
}

static ssize_t
pipe_take_urgent (Pipe *p)
{
  char b;
  ssize_t n = recv (p->in_fd, &b, 1, MSG_DONTWAIT);

  if (n == 1 && write (p->fds[1], &b, 1) != 1)
    {
      errno = EPIPE; /* an empty pipe takes a byte: never */
      return -1;
    }
  return n;
}
#define PIPE_SPLICE_MAX (1024 * 1024) /* a fill asks for this; the pipe takes what it holds */

/* After a send or splice of N bytes to OUT_SOCKET: true to go on; false
 * when the pump stops, waiting for OUT_SOCKET when it WOULD_BLOCK (the
 * other end can't take more yet: wait for it, not for more to read), or
 * with the connection closed when it failed or took nothing. */
static bool
pipe_sent (Pipe *p, gssize n, bool would_block)
{
  if (would_block)
    {
      pipe_wait (p, p->out_socket, G_IO_OUT, on_pipe_ready);
      return false;
    }
  if (n <= 0)
    {
      conn_close (p->conn);
      return false;
    }
  return true;
}

static void
pipe_pump (Pipe *p)
{
  Conn *c = p->conn;

  for (int round = 0; round < PIPE_ROUNDS; round++)
    {
      bool drop;
      ssize_t n;

      while (p->first != NULL)
        {
          g_autoptr (GError) send_error = NULL;
          gssize sent = g_socket_send_with_blocking (p->out_socket, (const char *)p->first->data + p->first_off,
                                                     p->first->len - p->first_off, FALSE, NULL, &send_error);

          if (!pipe_sent (p, sent, sent < 0 && g_error_matches (send_error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK)))
            return;
          p->bytes += (guint64)sent;
          p->first_off += (gsize)sent;
          if (p->first_off == p->first->len)
            g_clear_pointer (&p->first, g_byte_array_unref);
        }
      while (p->held > 0)
        {
          n = splice (p->fds[0], NULL, p->out_fd, NULL, p->held, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
          if (n < 0 && errno == EINTR)
            continue;
          if (!pipe_sent (p, n, n < 0 && errno == EAGAIN))
            return;
          p->bytes += (guint64)n;
          p->held -= (gsize)n;
        }
      /* past a plain request's body: dropped, never a second request
       * (MSG_TRUNC: TCP discards the bytes without copying them, tcp(7)) */
      drop = p->limited && p->left == 0;
      if (drop)
        n = recv (p->in_fd, NULL, PIPE_SPLICE_MAX, MSG_TRUNC | MSG_DONTWAIT);
      else
        n = splice (p->in_fd, NULL, p->fds[1], NULL,
                    p->limited ? (size_t)MIN (p->left, PIPE_SPLICE_MAX) : PIPE_SPLICE_MAX,
                    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN && !drop && pipe_at_urgent_mark (p))
        n = pipe_take_urgent (p);
      if (n < 0 && errno == EAGAIN)
        break;
      if (n < 0)
        {
          conn_close (c);
          return;
        }
      if (n == 0)
        {
          /* end of this direction, its pipe empty: passed on as such (a
           * client that half-closes after its request still gets the
           * answer) */
          p->eof = true;
          g_socket_shutdown (p->out_socket, FALSE, TRUE, NULL);
          if (c->up.eof && c->down.eof)
            conn_close (c);
          return;
        }
      c->moved_us = g_get_monotonic_time ();
      if (!drop)
        {
          p->held = (gsize)n;
          p->left -= p->limited ? (guint64)n : 0;
        }
    }
  if (p->first != NULL || p->held > 0)
    pipe_wait (p, p->out_socket, G_IO_OUT, on_pipe_ready);
  else
    pipe_wait (p, p->in_socket, G_IO_IN, on_pipe_ready);
}

/* The socket a pipe waited on is ready (to read or to write, whichever
 * pipe_pump waits for): pump again. */
static gboolean
on_pipe_ready (G_GNUC_UNUSED GSocket *socket, G_GNUC_UNUSED GIOCondition condition, gpointer data)
{
  Pipe *p = data;

  g_clear_pointer (&p->source, g_source_unref);
  if (p->conn->proxy != NULL)
    pipe_pump (p);
  return G_SOURCE_REMOVE;
}

static void
pipe_init (Pipe *p, Conn *c, GSocketConnection *from, GSocketConnection *to)
{
  p->conn = c;
  p->in_socket = g_socket_connection_get_socket (from);
  p->out_socket = g_socket_connection_get_socket (to);
  p->in_fd = g_socket_get_fd (p->in_socket);
  p->out_fd = g_socket_get_fd (p->out_socket);
  /* the urgent byte inline (see pipe_at_urgent_mark) */
  g_socket_set_option (p->in_socket, SOL_SOCKET, SO_OOBINLINE, 1, NULL);
}

static void
conn_splice (Conn *c)
{
  gsize rest = c->head_len - c->req.consumed;
  g_autoptr (GByteArray) first = g_byte_array_new ();

  c->state = STATE_SPLICING;
  c->moved_us = g_get_monotonic_time ();
  conn_set_timer (c, c->proxy->idle_s);
  pipe_init (&c->up, c, c->client, c->upstream);
  pipe_init (&c->down, c, c->upstream, c->client);
  /* what the client sent past its request (a TLS hello right after
   * CONNECT, a plain request's body) goes first, after a plain request's
   * rewritten head: at most FB_PROXY_HEAD_MAX each */
  if (c->req.forward != NULL)
    g_byte_array_append (first, (const guint8 *)c->req.forward->str, (guint)c->req.forward->len);
  if (c->req.kind == FB_PROXY_HTTP_FORWARD)
    {
      /* one request: its body, and not what a client pipelines after it */
      c->up.limited = true;
      c->up.left = c->req.body - MIN (c->req.body, (guint64)rest);
      rest = (gsize)MIN (c->req.body, (guint64)rest);
    }
  g_byte_array_append (first, c->head + c->req.consumed, (guint)rest);
  if (first->len > 0)
    c->up.first = g_steal_pointer (&first);
  pipe_wait (&c->down, c->down.in_socket, G_IO_IN, on_pipe_ready);
  pipe_pump (&c->up); /* what FIRST holds first */
}

/* The tunnel's two pipes (with its two sockets, FB_PROXY_CONN_FDS
 * descriptors), made once its name is allowed and before anything is
 * resolved or connected: a proxy at its tunnels' share of the
 * descriptors, or out of descriptors (EMFILE, ENFILE), refuses the
 * request with its reason (503, SOCKS5 1; a refused "connect" record)
 * rather than leaving a tunnel half made, and the other tunnels go on.
 * FALSE when refused (answered, logged, closed). */
static char *
proxy_fds_why (const FbProxy *proxy)
{
  return g_strdup_printf ("the network proxies hold %u of the %u descriptors the supervisor gives them, this "
                          "command's %u of the %u it may hold (a connection takes one, a tunnel %d); retry when "
                          "some connections have closed",
                          proxy->fds->used, proxy->fds->max, proxy->fds_used, proxy->fds_cap, FB_PROXY_CONN_FDS);
}

static bool
conn_make_pipes (Conn *c)
{
  FbProxy *proxy = c->proxy;
  Pipe *pipes[] = { &c->up, &c->down };
  g_autofree char *why = NULL;
  int err = EMFILE;

  if (proxy->tunnels >= proxy->max_tunnels)
    why = g_strdup_printf ("the proxy has %u tunnels open, as many as the supervisor's descriptors allow (%d each); "
                           "retry when some have closed",
                           proxy->tunnels, FB_PROXY_CONN_FDS);
  else if (!proxy_fds_room (proxy, FB_PROXY_CONN_FDS - 1))
    why = proxy_fds_why (proxy);
  for (gsize i = 0; why == NULL && i < G_N_ELEMENTS (pipes); i++)
    {
      if (pipe2 (pipes[i]->fds, O_CLOEXEC | O_NONBLOCK) < 0)
        {
          err = errno;
          why = g_strdup_printf ("no descriptors left for the tunnel's pipes (%s); retry when some have closed",
                                 g_strerror (err));
          break;
        }
      /* best effort: a smaller pipe (past fs.pipe-max-size, or the user's
       * fs.pipe-user-pages-soft) only takes more rounds */
      (void)fcntl (pipes[i]->fds[1], F_SETPIPE_SZ, FB_PROXY_PIPE);
    }
  if (why != NULL)
    {
      pipe_close (&c->up);
      pipe_close (&c->down);
      conn_log_refused (c, "descriptors", err, why);
      conn_fail (c, "503 Service Unavailable", FB_SOCKS_GENERAL_FAILURE, NULL, why);
      return false;
    }
  c->piped = true;
  proxy->tunnels++;
  proxy_fds_take (proxy, FB_PROXY_CONN_FDS - 1);
  return true;
}

/* ---- connecting ---- */

static void conn_try_next (Conn *c);

static void
on_connected (GObject *source, GAsyncResult *res, gpointer data)
{
  Conn *c = data;
  g_autoptr (GError) error = NULL;
  GSocketConnection *s = g_socket_client_connect_finish (G_SOCKET_CLIENT (source), res, &error);

  if (c->proxy == NULL)
    {
      g_clear_object (&s);
      conn_unref (c);
      return;
    }
  if (s == NULL)
    {
      int err = error->domain == G_IO_ERROR && error->code == G_IO_ERROR_CONNECTION_REFUSED    ? ECONNREFUSED
                : error->domain == G_IO_ERROR && error->code == G_IO_ERROR_TIMED_OUT           ? ETIMEDOUT
                : error->domain == G_IO_ERROR && error->code == G_IO_ERROR_NETWORK_UNREACHABLE ? ENETUNREACH
                : error->domain == G_IO_ERROR && error->code == G_IO_ERROR_HOST_UNREACHABLE    ? EHOSTUNREACH
                                                                                               : EIO;
      conn_log (c, FB_OP_CONNECT, FB_DECISION_ALLOW, err, &c->decision);
      if (c->next_address < c->addresses->len)
        conn_try_next (c);
      else
        conn_fail (c, "502 Bad Gateway",
                   err == ECONNREFUSED  ? FB_SOCKS_CONNECTION_REFUSED
                   : err == ENETUNREACH ? FB_SOCKS_NETWORK_UNREACHABLE
                                        : FB_SOCKS_HOST_UNREACHABLE,
                   NULL, error->message);
      conn_unref (c);
      return;
    }
  c->upstream = s;
  g_socket_set_option (g_socket_connection_get_socket (s), IPPROTO_TCP, TCP_NODELAY, 1, NULL);
  c->start_us = g_get_monotonic_time ();
  c->connected_logged = true;
  conn_log (c, FB_OP_CONNECT, FB_DECISION_ALLOW, 0, &c->decision);
  if (c->req.kind == FB_PROXY_SOCKS)
    {
      /* the address we connected from, as RFC 1928 asks; the client
       * only needs the code */
      conn_answer_socks (c, FB_SOCKS_SUCCEEDED);
    }
  else if (c->req.kind == FB_PROXY_HTTP_CONNECT)
    conn_answer (c, "HTTP/1.1 200 Connection established\r\n\r\n", 39);
  conn_splice (c);
  conn_unref (c);
}

/* The next resolved address the policy allows, connected to; the first
 * refusal when none is. */
static void
conn_try_next (Conn *c)
{
  FbPolicyNetDecision first_refusal = { 0 };
  g_autofree char *first_address = NULL;

  while (c->next_address < c->addresses->len)
    {
      GInetAddress *a = c->addresses->pdata[c->next_address++];
      GSocketFamily family = g_inet_address_get_family (a);
      FbPolicyNetDecision d;

      fb_policy_net_check_address (c->proxy->policy, &c->by_name, family == G_SOCKET_FAMILY_IPV4 ? AF_INET : AF_INET6,
                                   g_inet_address_to_bytes (a), c->req.port, &d);
      g_free (c->address);
      c->address = g_inet_address_to_string (a);
      if (!d.allowed)
        {
          if (first_refusal.rule == NULL)
            {
              first_refusal = d;
              first_address = g_strdup (c->address);
            }
          continue;
        }
      c->decision = d;
      {
        g_autoptr (GSocketAddress) sa = g_inet_socket_address_new (a, c->req.port);

        g_socket_client_connect_async (c->proxy->client, G_SOCKET_CONNECTABLE (sa), c->cancel, on_connected,
                                       conn_ref (c));
      }
      return;
    }
  if (first_refusal.rule == NULL)
    {
      conn_log (c, FB_OP_CONNECT, FB_DECISION_ALLOW, EHOSTUNREACH, &c->by_name);
      conn_fail (c, "502 Bad Gateway", FB_SOCKS_HOST_UNREACHABLE, NULL, "the name has no address");
      return;
    }
  g_free (c->address);
  c->address = g_steal_pointer (&first_address);
  c->decision = first_refusal;
  conn_log (c, FB_OP_CONNECT, FB_DECISION_DENY, EACCES, &first_refusal);
  conn_fail (c, "403 Forbidden", FB_SOCKS_NOT_ALLOWED, &first_refusal, NULL);
}

static void
conn_addresses (Conn *c, GList *list)
{
  c->addresses = g_ptr_array_new_with_free_func (g_object_unref);
  for (GList *l = list; l != NULL && c->addresses->len < 16; l = l->next)
    g_ptr_array_add (c->addresses, g_object_ref (l->data));
  c->next_address = 0;
}

static void
on_resolved (GObject *source, GAsyncResult *res, gpointer data)
{
  Conn *c = data;
  g_autoptr (GError) error = NULL;
  GList *list = g_resolver_lookup_by_name_finish (G_RESOLVER (source), res, &error);

  if (c->proxy != NULL)
    {
      if (list == NULL)
        {
          conn_log (c, FB_OP_CONNECT, FB_DECISION_ALLOW, EHOSTUNREACH, &c->by_name);
          conn_fail (c, "502 Bad Gateway", FB_SOCKS_HOST_UNREACHABLE, NULL, error->message);
        }
      else
        {
          conn_addresses (c, list);
          conn_try_next (c);
        }
    }
  g_resolver_free_addresses (list);
  conn_unref (c);
}

/* A complete request: decide on the name, then resolve it. */
static void
conn_request (Conn *c)
{
  FbProxy *proxy = c->proxy;
  GPtrArray *mapped;

  c->state = STATE_CONNECTING;
  conn_set_timer (c, FB_PROXY_CONNECT_S);
  if (strchr (c->req.host, ':') != NULL)
    c->path = g_strdup_printf ("[%s]:%u", c->req.host, c->req.port);
  else
    c->path = g_strdup_printf ("%s:%u", c->req.host, c->req.port);
  fb_policy_net_decide (proxy->policy, c->req.host, c->req.port, &c->by_name);
  c->decision = c->by_name;
  if (!c->by_name.allowed)
    {
      /* refused by its name: never resolved */
      conn_log (c, FB_OP_CONNECT, FB_DECISION_DENY, EACCES, &c->by_name);
      conn_fail (c, "403 Forbidden", FB_SOCKS_NOT_ALLOWED, &c->by_name, NULL);
      return;
    }
  if (!conn_make_pipes (c))
    return;
  if (c->req.host_is_address)
    {
      g_autoptr (GInetAddress) a = g_inet_address_new_from_string (c->req.host);
      GList one = { .data = a };

      conn_addresses (c, &one);
      conn_try_next (c);
      return;
    }
  mapped = g_hash_table_lookup (proxy->resolve, c->req.host);
  if (mapped != NULL)
    {
      g_autoptr (GList) list = NULL;

      for (guint i = mapped->len; i > 0; i--)
        list = g_list_prepend (list, mapped->pdata[i - 1]);
      conn_addresses (c, list);
      conn_try_next (c);
      return;
    }
  {
    /* the absolute name: a relative one would take resolv.conf's search
     * list, and "foo.example.com" decided would be looked up as
     * "foo.example.com.corp.example" */
    g_autofree char *absolute = g_strconcat (c->req.host, ".", NULL);

    g_resolver_lookup_by_name_async (proxy->resolver, absolute, c->cancel, on_resolved, conn_ref (c));
  }
}

/* ---- the handshake ---- */

static void conn_read_head (Conn *c);

/* Drop the first N bytes of the handshake buffer. */
static void
head_consume (Conn *c, gsize n)
{
  memmove (c->head, c->head + n, c->head_len - n);
  c->head_len -= n;
  c->head[c->head_len] = '\0';
}

/* What the buffer holds now, by the state; reads more when incomplete. */
static void
conn_parse (Conn *c)
{
  for (;;)
    switch (c->state)
      {
        case STATE_FIRST:
          if (c->head_len == 0)
            {
              conn_read_head (c);
              return;
            }
          c->state = c->head[0] == 5 ? STATE_SOCKS_GREETING : STATE_HTTP_HEAD;
          if (c->state == STATE_SOCKS_GREETING)
            c->req.kind = FB_PROXY_SOCKS;
          break;
        case STATE_SOCKS_GREETING:
          {
            gsize used = 0;
            bool no_auth = false;

            switch (fb_proxy_parse_socks_greeting (c->head, c->head_len, &used, &no_auth))
              {
                case FB_PROXY_PARSE_MORE:
                  conn_read_head (c);
                  return;
                case FB_PROXY_PARSE_ERROR:
                  conn_log_refused_request (c, "a malformed SOCKS5 greeting");
                  conn_close (c);
                  return;
                case FB_PROXY_PARSE_DONE:
                  break;
              }
            /* "no acceptable methods" (RFC 1928, 3) */
            conn_answer (c, no_auth ? "\x05\x00" : "\x05\xff", 2);
            if (!no_auth)
              {
                conn_log_refused_request (c, "a SOCKS5 greeting without \"no authentication\"");
                conn_close (c);
                return;
              }
            head_consume (c, used);
            c->state = STATE_SOCKS_REQUEST;
            break;
          }
        case STATE_SOCKS_REQUEST:
          {
            guint8 reply = FB_SOCKS_GENERAL_FAILURE;

            switch (fb_proxy_parse_socks_request (c->head, c->head_len, &c->req, &reply))
              {
                case FB_PROXY_PARSE_MORE:
                  conn_read_head (c);
                  return;
                case FB_PROXY_PARSE_ERROR:
                  conn_log_refused_request (c, reply == FB_SOCKS_COMMAND_NOT_SUPPORTED
                                                 ? "a SOCKS5 command other than CONNECT"
                                               : reply == FB_SOCKS_ADDRESS_TYPE_NOT_SUPPORTED
                                                 ? "a SOCKS5 address type other than IPv4, IPv6 and a name"
                                                 : "a malformed SOCKS5 request (its name, or port 0)");
                  conn_answer_socks (c, reply);
                  conn_close (c);
                  return;
                case FB_PROXY_PARSE_DONE:
                  conn_request (c);
                  return;
              }
            return;
          }
        case STATE_HTTP_HEAD:
          {
            const char *why = NULL;

            switch (fb_proxy_parse_http ((const char *)c->head, c->head_len, &c->req, &why))
              {
                case FB_PROXY_PARSE_MORE:
                  conn_read_head (c);
                  return;
                case FB_PROXY_PARSE_ERROR:
                  conn_log_refused_request (c, why);
                  conn_fail (c, "400 Bad Request", 0, NULL, why);
                  return;
                case FB_PROXY_PARSE_DONE:
                  conn_request (c);
                  return;
              }
            return;
          }
        case STATE_CONNECTING:
        case STATE_SPLICING:
          return;
      }
}

static void
on_head_read (GObject *source, GAsyncResult *res, gpointer data)
{
  Conn *c = data;
  gssize n = g_input_stream_read_finish (G_INPUT_STREAM (source), res, NULL);

  if (c->proxy != NULL)
    {
      if (n <= 0)
        conn_close (c); /* gone, or an error: nothing was decided */
      else
        {
          c->head_len += (gsize)n;
          c->head[c->head_len] = '\0';
          conn_parse (c);
        }
    }
  conn_unref (c);
}

static void
conn_read_head (Conn *c)
{
  GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (c->client));

  if (c->head_len >= FB_PROXY_HEAD_MAX)
    {
      /* a parser that wants more than the buffer holds: too long */
      conn_log_refused_request (c, "the request's head is longer than the proxy takes");
      if (c->req.kind == FB_PROXY_SOCKS)
        conn_close (c);
      else
        conn_fail (c, "400 Bad Request", 0, NULL, "the request's head is longer than the proxy takes");
      return;
    }
  g_input_stream_read_async (in, c->head + c->head_len, FB_PROXY_HEAD_MAX - c->head_len, G_PRIORITY_DEFAULT, c->cancel,
                             on_head_read, conn_ref (c));
}

/* ---- accepting ---- */

static gboolean on_acceptable (GSocket *socket, GIOCondition condition, gpointer data);

/* Accepting, unless stopped at the limit or backing off. */
static void
proxy_listen (FbProxy *proxy)
{
  if (proxy->listen == NULL || proxy->accepting != NULL || proxy->stopped || proxy->backoff != 0)
    return;
  proxy->accepting = g_socket_create_source (proxy->listen, G_IO_IN, NULL);
  g_source_set_callback (proxy->accepting, G_SOURCE_FUNC (on_acceptable), proxy, NULL);
  g_source_attach (proxy->accepting, g_main_context_get_thread_default ());
}

static void
proxy_unlisten (FbProxy *proxy)
{
  fb_source_clear (&proxy->accepting);
}

static void
proxy_resume (FbProxy *proxy)
{
  if (proxy->stopped && g_hash_table_size (proxy->conns) < proxy->max_connections)
    {
      proxy->stopped = false;
      proxy_listen (proxy);
    }
}

static gboolean
on_backoff_end (gpointer data)
{
  FbProxy *proxy = data;

  proxy->backoff = 0;
  proxy_listen (proxy);
  return G_SOURCE_REMOVE;
}

static void
proxy_incoming (FbProxy *proxy, GSocketConnection *connection)
{
  Conn *c = g_new0 (Conn, 1);
  g_autofree char *why = proxy_fds_room (proxy, 1) ? NULL : proxy_fds_why (proxy);

  proxy_fds_take (proxy, 1);
  c->ref = 1;
  c->proxy = proxy;
  c->client = g_object_ref (connection);
  c->cancel = g_cancellable_new ();
  c->state = STATE_FIRST;
  c->up.fds[0] = c->up.fds[1] = c->down.fds[0] = c->down.fds[1] = -1;
  g_hash_table_add (proxy->conns, c);
  if (why != NULL)
    {
      /* closed unanswered (nothing is read yet: no protocol to answer
       * in), its descriptor being one the views need; recorded, so that
       * the command whose connection it was sees why */
      if (!proxy->fds_told)
        g_message ("%s%snetwork proxy: %s; new connections are closed until some end",
                   proxy->process != NULL ? "process " : "", proxy->process != NULL ? proxy->process : "", why);
      proxy->fds_told = true;
      conn_log_refused (c, "descriptors", EMFILE, why);
      conn_close (c);
      return;
    }
  g_socket_set_option (g_socket_connection_get_socket (connection), IPPROTO_TCP, TCP_NODELAY, 1, NULL);
  if (g_hash_table_size (proxy->conns) >= proxy->max_connections)
    {
      if (!proxy->full_told)
        g_message ("%s%snetwork proxy: %u connections open, its limit: more wait until some end",
                   proxy->process != NULL ? "process " : "", proxy->process != NULL ? proxy->process : "",
                   proxy->max_connections);
      proxy->full_told = true;
      proxy->stopped = true;
      proxy_unlisten (proxy);
    }
  conn_set_timer (c, FB_PROXY_HANDSHAKE_S);
  conn_parse (c);
}

static gboolean
on_acceptable (GSocket *socket, GIOCondition condition, gpointer data)
{
  FbProxy *proxy = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (GSocket) s = g_socket_accept (socket, NULL, &error);
  g_autoptr (GSocketConnection) connection = NULL;

  if (s == NULL)
    {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_TOO_MANY_OPEN_FILES) ||
          g_error_matches (error, G_IO_ERROR, G_IO_ERROR_NO_SPACE))
        {
          /* out of descriptors (EMFILE, ENFILE) or memory: what waits
           * stays in the backlog; accepting again at once would only spin */
          if (!proxy->backoff_told)
            g_warning ("network proxy: %s: accepting again in %d s", error->message, FB_PROXY_BACKOFF_S);
          proxy->backoff_told = true;
          proxy_unlisten (proxy);
          proxy->backoff = g_timeout_add_seconds (FB_PROXY_BACKOFF_S, on_backoff_end, proxy);
          return G_SOURCE_REMOVE;
        }
      return G_SOURCE_CONTINUE; /* EAGAIN, a client gone before its accept */
    }
  connection = g_socket_connection_factory_create_connection (s);
  proxy_incoming (proxy, connection);
  return G_SOURCE_CONTINUE;
}

/* ---- public ---- */

static gboolean
parse_resolve (const char *entry, char **ret_name, GInetAddress **ret_address)
{
  const char *colon = strchr (entry, ':');
  g_autofree char *name = NULL;
  const char *addr;
  GInetAddress *a;

  if (colon == NULL)
    return FALSE;
  name = g_strndup (entry, colon - entry);
  addr = colon + 1;
  if (addr[0] == '[' && addr[strlen (addr) - 1] == ']')
    {
      g_autofree char *inner = g_strndup (addr + 1, strlen (addr) - 2);

      a = g_inet_address_new_from_string (inner);
    }
  else
    a = g_inet_address_new_from_string (addr);
  if (a == NULL)
    return FALSE;
  {
    g_autofree char *norm = fb_policy_net_host_normalize (name);

    if (norm == NULL)
      {
        g_object_unref (a);
        return FALSE;
      }
    *ret_name = g_steal_pointer (&norm);
  }
  *ret_address = a;
  return TRUE;
}

gboolean
fb_proxy_check_resolve (const char *const *resolve, GError **error)
{
  for (; resolve != NULL && *resolve != NULL; resolve++)
    {
      g_autofree char *name = NULL;
      g_autoptr (GInetAddress) a = NULL;

      if (!parse_resolve (*resolve, &name, &a))
        {
          g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                       "--resolve %s: give NAME:ADDRESS, a host name and an IPv4 or IPv6 address", *resolve);
          return FALSE;
        }
    }
  return TRUE;
}

/* FB_PROXY_IDLE_S, or less for tests ($FUSEBOX_TEST_PROXY_IDLE, fusebox(1)):
 * never more. */
static guint
proxy_idle_s (void)
{
  const char *value = g_getenv ("FUSEBOX_TEST_PROXY_IDLE");
  guint64 s = FB_PROXY_IDLE_S;

  if (value != NULL && !g_ascii_string_to_unsigned (value, 10, 1, FB_PROXY_IDLE_S, &s, NULL))
    g_warning ("FUSEBOX_TEST_PROXY_IDLE=%s: not 1 to %d seconds; a tunnel idle for %d s is closed", value,
               FB_PROXY_IDLE_S, FB_PROXY_IDLE_S);
  return (guint)s;
}

/* Tunnels at once: at most MAX_CONNECTIONS, and at most what the
 * descriptors the proxy may hold (FbProxyFds) make at FB_PROXY_CONN_FDS
 * each; the descriptors themselves are counted as they are taken, with the
 * connections still in their handshake.  serve's processes have their
 * part of the reserve counted already (ipc-rpc-share.c); under `run` this
 * is what bounds them at a low RLIMIT_NOFILE (256 tunnels from 12,288 up). */
static guint
proxy_max_tunnels (guint fds_cap, guint max_connections)
{
  return CLAMP (fds_cap / FB_PROXY_CONN_FDS, 1u, max_connections);
}

void
fb_proxy_fds_init (FbProxyFds *fds)
{
  FbViewFdBudget fd;

  const char *value = g_getenv ("FUSEBOX_TEST_PROXY_FDS");
  guint64 n = 0;

  fb_view_fd_budget (&fd);
  fds->max = MAX (fd.reserve / 2, (guint)FB_PROXY_CONN_FDS);
  fds->used = 0;
  /* tests: a share larger than the process's descriptors (fusebox(1)) */
  if (value != NULL && g_ascii_string_to_unsigned (value, 10, FB_PROXY_CONN_FDS, 65536, &n, NULL))
    fds->max = (guint)n;
  else if (value != NULL)
    g_warning ("FUSEBOX_TEST_PROXY_FDS=%s: not %d to 65536 descriptors; the proxies hold at most %u", value,
               FB_PROXY_CONN_FDS, fds->max);
}

FbProxy *
fb_proxy_new (const FbProxyOptions *options, int listen_fd, GError **error)
{
  g_autoptr (FbProxy) proxy = g_new0 (FbProxy, 1);

  proxy->policy = fb_policy_ref ((FbPolicy *)options->policy);
  proxy->sink = options->sink;
  proxy->uid = options->uid;
  proxy->process = g_strdup (options->process);
  proxy->max_connections =
    options->max_connections != 0 ? MIN (options->max_connections, FB_PROXY_MAX_CONNECTIONS) : FB_PROXY_MAX_CONNECTIONS;
  if (options->fds != NULL)
    {
      /* shared by a session's commands: half of it at most, so that one
       * command's flood leaves the others' connections room */
      proxy->fds = options->fds;
      proxy->fds_cap = MAX (proxy->fds->max / 2, (guint)FB_PROXY_CONN_FDS);
    }
  else
    {
      fb_proxy_fds_init (&proxy->own_fds);
      proxy->fds = &proxy->own_fds;
      proxy->fds_cap = proxy->fds->max;
    }
  proxy->max_tunnels = proxy_max_tunnels (proxy->fds_cap, proxy->max_connections);
  proxy->idle_s = proxy_idle_s ();
  proxy->conns = g_hash_table_new_full (NULL, NULL, (GDestroyNotify)conn_unref, NULL);
  proxy->resolve = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_ptr_array_unref);
  for (const char *const *r = options->resolve; r != NULL && *r != NULL; r++)
    {
      char *name = NULL;
      GInetAddress *a = NULL;
      GPtrArray *list;

      if (!parse_resolve (*r, &name, &a))
        {
          close (listen_fd);
          fb_proxy_check_resolve (options->resolve, error);
          return NULL;
        }
      list = g_hash_table_lookup (proxy->resolve, name);
      if (list == NULL)
        {
          list = g_ptr_array_new_with_free_func (g_object_unref);
          g_hash_table_insert (proxy->resolve, name, list);
        }
      else
        g_free (name);
      g_ptr_array_add (list, a);
    }
  proxy->resolver = g_resolver_get_default ();
  proxy->client = g_socket_client_new ();
  /* the host's proxy settings (http_proxy in our environment) are not the
   * sandbox's way out: connect directly */
  g_socket_client_set_enable_proxy (proxy->client, FALSE);
  proxy->listen = g_socket_new_from_fd (listen_fd, error);
  if (proxy->listen == NULL)
    {
      close (listen_fd);
      return NULL;
    }
  g_socket_set_blocking (proxy->listen, FALSE);
  proxy_listen (proxy);
  return g_steal_pointer (&proxy);
}

void
fb_proxy_free (FbProxy *proxy)
{
  GHashTableIter it;
  gpointer key;
  g_autoptr (GPtrArray) all = g_ptr_array_new ();

  if (proxy == NULL)
    return;
  proxy_unlisten (proxy);
  if (proxy->backoff != 0)
    g_source_remove (proxy->backoff);
  proxy->backoff = 0;
  if (proxy->listen != NULL)
    g_socket_close (proxy->listen, NULL);
  g_clear_object (&proxy->listen); /* closing the connections must not start it again */
  g_hash_table_iter_init (&it, proxy->conns);
  while (g_hash_table_iter_next (&it, &key, NULL))
    g_ptr_array_add (all, key);
  for (guint i = 0; i < all->len; i++)
    conn_close (all->pdata[i]);
  g_clear_object (&proxy->client);
  g_clear_object (&proxy->resolver);
  g_hash_table_unref (proxy->conns);
  g_hash_table_unref (proxy->resolve);
  g_clear_pointer (&proxy->policy, fb_policy_unref);
  g_free (proxy->process);
  g_free (proxy);
}

char **
fb_proxy_environ (char **envp)
{
  static const char *const names[] = { "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY" };
  g_autofree char *http = g_strdup_printf ("http://127.0.0.1:%d", FB_PROXY_PORT);
  g_autofree char *socks = g_strdup_printf ("socks5h://127.0.0.1:%d", FB_PROXY_PORT);
  const char *values[] = { http, http, socks, "localhost,127.0.0.1,::1" };

  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *lower = g_ascii_strdown (names[i], -1);

      envp = g_environ_setenv (envp, names[i], values[i], TRUE);
      envp = g_environ_setenv (envp, lower, values[i], TRUE);
    }
  return envp;
}
