/* fusebox — the remote API over byte streams: a unix socket and stdio.
 *
 *   unix:PATH   newline-delimited JSON, one message per line; the socket is
 *               created mode 0600 (under umask 0177, so there is no moment
 *               when it is wider) and every peer's uid is checked with
 *               SO_PEERCRED: a peer whose uid differs from the server's is
 *               closed before a byte is read.
 *   stdio       the same on stdin/stdout, one connection; EOF on stdin
 *               ends it (and `fusebox serve --listen stdio`) once what
 *               came before it is answered.  A unix client's EOF too.
 *
 * Bounds: a line longer than FB_RPC_MESSAGE_MAX is discarded up to its
 * newline and answered with an error (the connection stays usable); the
 * read buffer never holds more than that.  Output is written without
 * blocking; while a write is incomplete the connection's bounded queue
 * (ipc-rpc-conn.c) holds the rest.  Loop thread only. */
#include "ipc/ipc-transport-private.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <gio/gunixinputstream.h>
#include <gio/gunixoutputstream.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_SIZE (64 * 1024)

typedef struct
{
  FbRpcPeer base; /* on listener->streams */
  GIOStream *io;  /* unix: the connection; NULL for stdio */
  GInputStream *in;
  GOutputStream *out;
  GSource *in_source;
  GSource *out_source;
  GByteArray *buf;   /* an incomplete line */
  bool discarding;   /* inside an oversized line */
  guint64 discarded; /* its length so far */
  GBytes *pending;   /* the message being written (with its newline) */
  gsize pending_off;
  bool is_stdio;
  bool input_ended; /* EOF read: answering what came, then closing */
} StreamPeer;

static void stream_peer_close (StreamPeer *s);

static void
stream_peer_free (FbRpcPeer *peer)
{
  StreamPeer *s = container_of (peer, StreamPeer, base);

  /* stdio gone: the server has no client left to serve */
  if (s->is_stdio)
    peer->listener->finished = true;
  fb_source_clear (&s->in_source);
  fb_source_clear (&s->out_source);
  if (s->io != NULL)
    g_io_stream_close (s->io, NULL, NULL);
  g_clear_object (&s->io);
  g_clear_object (&s->in);
  g_clear_object (&s->out);
  g_byte_array_unref (s->buf);
  g_clear_pointer (&s->pending, g_bytes_unref);
  g_free (s);
}

static void
stream_peer_close (StreamPeer *s)
{
  fb_source_clear (&s->in_source);
  fb_rpc_peer_close_later (&s->base);
}

/* --- writing ----------------------------------------------------------------- */

static gboolean on_out_ready (GObject *stream, gpointer user_data);

/* Write what is pending; true when all of it is out. */
static bool
flush_pending (StreamPeer *s)
{
  while (s->pending != NULL)
    {
      gsize len;
      const char *d = g_bytes_get_data (s->pending, &len);
      g_autoptr (GError) error = NULL;
      gssize n = g_pollable_output_stream_write_nonblocking (G_POLLABLE_OUTPUT_STREAM (s->out), d + s->pending_off,
                                                             len - s->pending_off, NULL, &error);
      if (n < 0 && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
        {
          if (s->out_source == NULL)
            {
              s->out_source = g_pollable_output_stream_create_source (G_POLLABLE_OUTPUT_STREAM (s->out), NULL);
              g_source_set_callback (s->out_source, G_SOURCE_FUNC (on_out_ready), s, NULL);
              g_source_attach (s->out_source, NULL);
            }
          return false;
        }
      if (n < 0)
        {
          /* The peer is gone: drop what we had and close. */
          g_clear_pointer (&s->pending, g_bytes_unref);
          stream_peer_close (s);
          return false;
        }
      s->pending_off += (gsize)n;
      if (s->pending_off == len)
        {
          g_clear_pointer (&s->pending, g_bytes_unref);
          s->pending_off = 0;
        }
    }
  return true;
}

/* After EOF: close once every answer is out. */
static void
close_when_drained (StreamPeer *s)
{
  if (s->base.closed_idle == 0 && (s->base.conn == NULL || (fb_rpc_conn_drain (s->base.conn) && s->pending == NULL)))
    stream_peer_close (s);
}

static gboolean
on_out_ready (GObject *stream, gpointer user_data)
{
  StreamPeer *s = user_data;

  g_clear_pointer (&s->out_source, g_source_unref);
  if (flush_pending (s) && s->base.conn != NULL)
    {
      fb_rpc_conn_writable (s->base.conn);
      if (s->input_ended)
        close_when_drained (s);
    }
  return G_SOURCE_REMOVE;
}

static bool
stream_can_write (gpointer transport)
{
  StreamPeer *s = transport;
  return s->pending == NULL && s->base.closed_idle == 0;
}

static void
stream_write (gpointer transport, const char *text, gsize len)
{
  StreamPeer *s = transport;
  char *line = g_malloc (len + 1);

  memcpy (line, text, len);
  line[len] = '\n';
  s->pending = g_bytes_new_take (line, len + 1);
  s->pending_off = 0;
  flush_pending (s);
}

static void
stream_close_op (gpointer transport, const char *reason)
{
  stream_peer_close (transport);
}

static const FbRpcTransportOps stream_ops = { stream_can_write, stream_write, stream_close_op };

/* --- reading ----------------------------------------------------------------- */

static void
take_lines (StreamPeer *s, const guint8 *data, gsize len)
{
  while (len > 0 && s->base.conn != NULL && s->base.closed_idle == 0)
    {
      const guint8 *nl = memchr (data, '\n', len);
      gsize take = nl != NULL ? (gsize)(nl - data) : len;

      if (s->discarding)
        s->discarded += take;
      else if (s->buf->len + take > FB_RPC_MESSAGE_MAX)
        {
          /* Too long to keep: skip to its end, then answer. */
          s->discarding = true;
          s->discarded = s->buf->len + take;
          g_byte_array_set_size (s->buf, 0);
        }
      else
        g_byte_array_append (s->buf, data, (guint)take);
      if (nl == NULL)
        return;
      data += take + 1;
      len -= take + 1;
      if (s->discarding)
        {
          s->discarding = false;
          fb_rpc_conn_receive_oversized (s->base.conn, s->discarded);
          continue;
        }
      if (s->buf->len > 0 && s->buf->data[s->buf->len - 1] == '\r')
        g_byte_array_set_size (s->buf, s->buf->len - 1);
      if (s->buf->len > 0)
        fb_rpc_conn_receive (s->base.conn, (const char *)s->buf->data, s->buf->len);
      g_byte_array_set_size (s->buf, 0);
    }
}

static gboolean
on_in_ready (GObject *stream, gpointer user_data)
{
  StreamPeer *s = user_data;
  guint8 data[READ_SIZE];

  for (int i = 0; i < 16; i++)
    {
      g_autoptr (GError) error = NULL;
      gssize n =
        g_pollable_input_stream_read_nonblocking (G_POLLABLE_INPUT_STREAM (s->in), data, sizeof data, NULL, &error);
      if (n < 0 && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
        return G_SOURCE_CONTINUE;
      if (n == 0)
        {
          /* EOF: the client sent all it will (`printf ... | fusebox serve
           * --listen stdio`, or a unix client's shutdown(SHUT_WR)).  What
           * it sent is answered before the connection closes; closing at
           * once dropped the answers still being worked on, and for stdio
           * ended the server before they were written. */
          g_clear_pointer (&s->in_source, g_source_unref);
          if (s->buf->len > 0 && !s->discarding && s->base.conn != NULL)
            take_lines (s, (const guint8 *)"\n", 1); /* a last line without its newline */
          s->input_ended = true;
          close_when_drained (s);
          return G_SOURCE_REMOVE;
        }
      if (n < 0)
        {
          g_clear_pointer (&s->in_source, g_source_unref);
          stream_peer_close (s);
          return G_SOURCE_REMOVE;
        }
      take_lines (s, data, (gsize)n);
      if (s->base.closed_idle != 0)
        {
          g_clear_pointer (&s->in_source, g_source_unref);
          return G_SOURCE_REMOVE;
        }
    }
  return G_SOURCE_CONTINUE;
}

static StreamPeer *
stream_peer_new (FbRpcListener *l, GIOStream *io, GInputStream *in, GOutputStream *out, uid_t uid, const char *name)
{
  StreamPeer *s = g_new0 (StreamPeer, 1);
  g_autofree char *why = NULL;

  fb_rpc_peer_add (&s->base, l, &l->streams, stream_peer_free);
  s->io = io != NULL ? g_object_ref (io) : NULL;
  s->in = g_object_ref (in);
  s->out = g_object_ref (out);
  s->buf = g_byte_array_new ();
  /* NAME ("unix:pidN", "stdio") is the client its share counts against
   * (ipc-rpc-share.c). */
  s->base.conn = fb_rpc_server_accept_client (l->server, &stream_ops, s, uid, name, name, &why);
  if (s->base.conn == NULL)
    {
      g_autofree char *busy = fb_rpc_encode_error (NULL, FB_RPC_ERROR_INTERNAL, why, NULL);
      g_autofree char *line = g_strconcat (busy, "\n", NULL);
      g_output_stream_write (out, line, strlen (line), NULL, NULL);
      stream_peer_close (s);
      return s;
    }
  s->in_source = g_pollable_input_stream_create_source (G_POLLABLE_INPUT_STREAM (in), NULL);
  g_source_set_callback (s->in_source, G_SOURCE_FUNC (on_in_ready), s, NULL);
  g_source_attach (s->in_source, NULL);
  return s;
}

/* --- unix -------------------------------------------------------------------- */

static gboolean
on_incoming (GSocketService *service, GSocketConnection *connection, GObject *source, gpointer user_data)
{
  FbRpcListener *l = user_data;
  GSocket *sock = g_socket_connection_get_socket (connection);
  g_autoptr (GCredentials) cred = g_socket_get_credentials (sock, NULL);
  uid_t uid = cred != NULL ? g_credentials_get_unix_user (cred, NULL) : (uid_t)-1;
  g_autofree char *name = NULL;

  if (uid != geteuid ())
    {
      /* Only the server's own user may drive it: the socket's mode says so
       * already, this holds even if someone loosened the mode. */
      g_warning ("refusing a unix-socket client with uid %d (the server runs as %d)", (int)uid, (int)geteuid ());
      g_io_stream_close (G_IO_STREAM (connection), NULL, NULL);
      return TRUE;
    }
  name = g_strdup_printf ("unix:pid%d", cred != NULL ? (int)g_credentials_get_unix_pid (cred, NULL) : 0);
  g_socket_set_blocking (sock, FALSE);
  stream_peer_new (l, G_IO_STREAM (connection), g_io_stream_get_input_stream (G_IO_STREAM (connection)),
                   g_io_stream_get_output_stream (G_IO_STREAM (connection)), uid, name);
  return TRUE;
}

bool
fb_rpc_listen_unix (FbRpcListener *l, const char *path, GError **error)
{
  g_autoptr (GSocket) sock = NULL;
  g_autoptr (GSocketAddress) addr = NULL;
  g_autoptr (GError) local = NULL;
  struct stat st;
  mode_t old;
  bool ok;

  if (path[0] == '\0' || strlen (path) >= 108)
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                   "--listen unix:%s: give a socket path shorter than 108 bytes", path);
      return false;
    }
  if (lstat (path, &st) == 0)
    {
      g_autoptr (GSocketClient) client = NULL;
      g_autoptr (GSocketConnection) c = NULL;
      g_autoptr (GSocketAddress) probe = g_unix_socket_address_new (path);
      if (!S_ISSOCK (st.st_mode))
        {
          g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                       "--listen unix:%s: that path exists and is not a socket; remove it or choose another path",
                       path);
          return false;
        }
      client = g_socket_client_new ();
      c = g_socket_client_connect (client, G_SOCKET_CONNECTABLE (probe), NULL, NULL);
      if (c != NULL)
        {
          g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO,
                       "--listen unix:%s: another server is listening there; stop it or choose another path", path);
          return false;
        }
      /* A stale socket of a server that died: replace it. */
      unlink (path);
    }
  sock = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT, &local);
  if (sock == NULL)
    goto fail;
  addr = g_unix_socket_address_new (path);
  /* Created 0600 from the start: no window where others could connect. */
  old = umask (0177);
  ok = g_socket_bind (sock, addr, FALSE, &local);
  umask (old);
  g_socket_set_listen_backlog (sock, FB_RPC_LISTEN_BACKLOG);
  if (!ok || !g_socket_listen (sock, &local))
    goto fail;
  l->service = g_socket_service_new ();
  if (!g_socket_listener_add_socket (G_SOCKET_LISTENER (l->service), sock, NULL, &local))
    goto fail;
  l->unix_path = g_strdup (path);
  g_signal_connect (l->service, "incoming", G_CALLBACK (on_incoming), l);
  g_socket_service_start (l->service);
  return true;

fail:
  g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO,
               "--listen unix:%s: %s; check that the directory exists and is "
               "writable",
               path, local != NULL ? local->message : "failed");
  return false;
}

/* --- stdio ------------------------------------------------------------------- */

bool
fb_rpc_listen_stdio (FbRpcListener *l, GError **error)
{
  g_autoptr (GInputStream) in = NULL;
  g_autoptr (GOutputStream) out = NULL;
  int in_fd, out_fd;

  /* Our own copies, so that nothing else writing to fd 1 (a library's
   * printf) can interleave with a message: fd 1 is pointed at stderr. */
  in_fd = fcntl (STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  out_fd = fcntl (STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (in_fd < 0 || out_fd < 0 || dup2 (STDERR_FILENO, STDOUT_FILENO) < 0)
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "--listen stdio: can't take over stdin/stdout: %s",
                   g_strerror (errno));
      return false;
    }
  g_unix_set_fd_nonblocking (in_fd, TRUE, NULL);
  g_unix_set_fd_nonblocking (out_fd, TRUE, NULL);
  in = g_unix_input_stream_new (in_fd, TRUE);
  out = g_unix_output_stream_new (out_fd, TRUE);
  {
    StreamPeer *s = stream_peer_new (l, NULL, in, out, geteuid (), "stdio");
    s->is_stdio = true;
  }
  return true;
}

void
fb_rpc_stream_listener_clear (FbRpcListener *l)
{
  fb_rpc_service_clear (&l->service);
  while (l->streams != NULL)
    fb_rpc_peer_drop (l->streams->data);
  if (l->unix_path != NULL)
    unlink (l->unix_path);
  g_clear_pointer (&l->unix_path, g_free);
}
