/* fusebox — the byte stream under each WebSocket connection: a GIOStream
 * over the accepted TCP socket that reads and writes in large chunks.
 *
 * libsoup's WebSocket connection reads its stream 1 KiB at a time until
 * the stream would block, and writes each frame with its own call: on a
 * plain socket stream that is a recv() per KiB of requests (six for a 4 KiB
 * fs/writeFile), one more that fails with EAGAIN per batch, and a send()
 * per answer (which TCP_CORK only made cheaper).  This stream gives libsoup
 * the same pollable interface over two buffers:
 *
 *   input   one nonblocking recv() of up to WSIO_IN_SIZE fills the buffer;
 *           libsoup's 1 KiB reads are served from it.  A short recv()
 *           means the socket was drained at that moment: the next read of
 *           an empty buffer says "would block" without asking the kernel,
 *           and the source libsoup then waits on polls the socket (so
 *           bytes that arrived meanwhile are seen at the next iteration).
 *   output  writes are appended to a buffer, which an idle of high
 *           priority sends in one send() at the next main-loop iteration,
 *           as the TCP_CORK/uncork pair did before: the answers to a batch
 *           of requests leave together.  Past WSIO_OUT_MAX bytes unsent
 *           (the kernel has no room), writes would block: libsoup then
 *           keeps the frame in its own queue and waits on this stream's
 *           source, and fb_rpc_ws_io_can_write() says no, so the
 *           connection's bounded queue holds the rest (ipc-rpc-conn.c).
 *
 * The HTTP request and the handshake go through the same stream (libsoup
 * parses them from it), so nothing read ahead is lost at the upgrade.
 *
 * What libsoup holds of an unfinished message (a frame not yet whole,
 * fragments not yet finished) it read from here since the last message it
 * completed, so the stream bounds it as bytes are handed over: per
 * connection (FB_RPC_WS_HELD_MAX) and for all the connections of a
 * listener together (FB_RPC_WS_HELD_TOTAL_MAX: past it the connection
 * holding the most is closed, 1013), and a connection that holds more than
 * FB_RPC_WS_STALL_MIN and sends nothing for FB_RPC_WS_STALL_S is closed
 * (1008): a set (FbRpcWsIoSet) keeps the listener's streams and sweeps
 * them every second.  A stream is failed by making its next read fail:
 * libsoup then closes it, from its own callbacks.
 *
 * Before the handshake anyone who reaches the port is a client, token or
 * not (another local user included): a connection that is not a WebSocket
 * within FB_RPC_WS_HANDSHAKE_S is closed, and past FB_RPC_WS_PENDING_MAX
 * such connections the oldest is, so that idle or half-sent requests can
 * neither take the server's descriptors nor keep a client out for long
 * (a client's handshake takes a round trip or two).
 * Loop thread only: close_async runs synchronously instead of in a thread. */
#include "ipc/ipc-transport-private.h"

#include <errno.h>
#include <glib-unix.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#define WSIO_IN_SIZE (256 * 1024)
#define WSIO_OUT_MAX (256 * 1024)

/* RFC 6455 7.4.1; libsoup 3.2 names neither. */
#define WS_CLOSE_TRY_AGAIN_LATER 1013

struct FbRpcWsIoSet
{
  GQueue pending;      /* WsIoState* before the handshake, oldest first */
  GQueue open;         /* WsIoState* past it */
  gsize held_total;    /* their held */
  guint sweep;         /* every second while there is one */
  gint64 stall_us;     /* FB_RPC_WS_STALL_S, or less for tests */
  gint64 handshake_us; /* FB_RPC_WS_HANDSHAKE_S, or less for tests */
};

/* --- the state the three objects share ----------------------------------------- */

typedef struct
{
  FbRpcWsIoSet *set; /* NULL once closed, or once the set went */
  GList link;        /* on set->pending, then on set->open */
  GSocketConnection *conn;
  int fd;
  guint8 *in;        /* WSIO_IN_SIZE bytes */
  gsize in_off;      /* next byte to hand out */
  gsize in_len;      /* bytes held */
  bool drained;      /* the last recv() found the socket empty or short */
  gsize held;        /* handed to libsoup since its last whole message */
  bool upgraded;     /* libsoup reads WebSocket frames now, not HTTP */
  gint64 accepted;   /* monotonic */
  gint64 last_recv;  /* monotonic: the client's last bytes */
  GError *in_error;  /* failed: every later read fails so */
  GByteArray *out;   /* not yet sent */
  gsize out_off;     /* of which sent */
  guint flush_idle;  /* sends the output at the next iteration */
  guint out_watch;   /* waits for room in the kernel */
  GError *out_error; /* sending failed: every later write fails so */
  bool closed;
  void (*writable) (gpointer data); /* room again after a full buffer */
  gpointer writable_data;
} WsIoState;

static void set_unlink (WsIoState *st);

static void
state_free (gpointer data)
{
  WsIoState *st = data;

  set_unlink (st);
  g_clear_error (&st->in_error);

  g_assert (st->flush_idle == 0 && st->out_watch == 0);
  g_clear_object (&st->conn);
  g_free (st->in);
  g_byte_array_unref (st->out);
  g_clear_error (&st->out_error);
}

static WsIoState *
state_ref (WsIoState *st)
{
  return g_rc_box_acquire (st);
}

static void
state_unref (WsIoState *st)
{
  g_rc_box_release_full (st, state_free);
}

static gsize
out_pending (WsIoState *st)
{
  return st->out->len - st->out_off;
}

/* Send what the buffer holds without blocking; true when all of it left. */
static bool
flush_now (WsIoState *st)
{
  while (out_pending (st) > 0 && st->out_error == NULL)
    {
      ssize_t n = send (st->fd, st->out->data + st->out_off, out_pending (st), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n >= 0)
        {
          st->out_off += (gsize)n;
          continue;
        }
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return false;
      {
        int e = errno;
        g_set_error (&st->out_error, G_IO_ERROR, g_io_error_from_errno (e), "send: %s", g_strerror (e));
      }
    }
  g_byte_array_set_size (st->out, 0);
  st->out_off = 0;
  return true;
}

static gboolean on_out_room (int fd, GIOCondition cond, gpointer data);

/* Send the buffer; if the kernel has no room for all of it, send the rest
 * when it has.  True when all of it left.  Never calls st->writable (the
 * caller may be inside a write). */
static bool
flush_or_wait (WsIoState *st)
{
  if (flush_now (st))
    return true;
  if (st->out_watch == 0)
    st->out_watch =
      g_unix_fd_add_full (G_PRIORITY_HIGH, st->fd, G_IO_OUT, on_out_room, state_ref (st), (GDestroyNotify)state_unref);
  return false;
}

static gboolean
on_out_room (int fd, GIOCondition cond, gpointer data)
{
  WsIoState *st = data;
  bool done = flush_now (st);

  if (done)
    st->out_watch = 0; /* before the call below: a write then schedules the idle */
  /* From the main loop: the connection may hand over more now (a spurious
   * call is harmless). */
  if (st->writable != NULL && (st->out_error != NULL || out_pending (st) < WSIO_OUT_MAX))
    st->writable (st->writable_data);
  return done ? G_SOURCE_REMOVE : G_SOURCE_CONTINUE;
}

static gboolean
on_flush_idle (gpointer data)
{
  WsIoState *st = data;

  bool was_full = out_pending (st) >= WSIO_OUT_MAX;

  st->flush_idle = 0;
  flush_or_wait (st);
  if (st->writable != NULL && (st->out_error != NULL || (was_full && out_pending (st) < WSIO_OUT_MAX)))
    st->writable (st->writable_data);
  return G_SOURCE_REMOVE;
}

static void
state_close (WsIoState *st)
{
  if (st->closed)
    return;
  st->closed = true;
  /* Best effort, without blocking: whatever the kernel takes of the last
   * answers and the close frame.  A peer that stopped reading loses the
   * rest, as it would with any closed connection. */
  flush_now (st);
  g_clear_handle_id (&st->flush_idle, g_source_remove);
  g_clear_handle_id (&st->out_watch, g_source_remove);
  st->writable = NULL;
  set_unlink (st);
  g_io_stream_close (G_IO_STREAM (st->conn), NULL, NULL);
}

/* --- the sources --------------------------------------------------------------- */

typedef struct
{
  GSource source;
  WsIoState *st;
  gpointer tag;
  bool output;
} WsIoSource;

static bool
source_ready (WsIoSource *s)
{
  WsIoState *st = s->st;

  if (st->closed || (!s->output && st->in_error != NULL))
    return true;
  if (s->output)
    return st->out_error != NULL || out_pending (st) < WSIO_OUT_MAX;
  return st->in_off < st->in_len;
}

static gboolean
wsio_source_prepare (GSource *source, int *timeout)
{
  WsIoSource *s = (WsIoSource *)source;

  *timeout = -1;
  if (source_ready (s))
    {
      *timeout = 0;
      return TRUE;
    }
  return FALSE;
}

static gboolean
wsio_source_check (GSource *source)
{
  WsIoSource *s = (WsIoSource *)source;
  GIOCondition cond = g_source_query_unix_fd (source, s->tag);

  if (source_ready (s))
    return TRUE;
  if (cond == 0)
    return FALSE;
  if (s->output)
    {
      /* Room in the kernel: send what waits, then tell whether there is
       * room here. */
      flush_or_wait (s->st);
      return source_ready (s) || (cond & (G_IO_ERR | G_IO_HUP)) != 0;
    }
  /* Bytes (or an end) on the socket: the next read asks the kernel. */
  s->st->drained = false;
  return TRUE;
}

static gboolean
wsio_source_dispatch (GSource *source, GSourceFunc callback, gpointer user_data)
{
  /* The parent (a GPollableSource) calls back: a child has no callback. */
  return callback != NULL ? callback (user_data) : G_SOURCE_CONTINUE;
}

static void
wsio_source_finalize (GSource *source)
{
  state_unref (((WsIoSource *)source)->st);
}

/* g_pollable_source_new_full gives its child a dummy closure. */
static gboolean
wsio_source_closure_callback (gpointer data)
{
  GValue result = G_VALUE_INIT;
  gboolean ret;

  g_value_init (&result, G_TYPE_BOOLEAN);
  g_closure_invoke (data, &result, 0, NULL, NULL);
  ret = g_value_get_boolean (&result);
  g_value_unset (&result);
  return ret;
}

static GSourceFuncs wsio_source_funcs = {
  wsio_source_prepare,          wsio_source_check,
  wsio_source_dispatch,         wsio_source_finalize,
  wsio_source_closure_callback, NULL,
};

/* A GPollableSource for STREAM (it carries the callback, closures
 * included) whose child watches the socket and the buffers. */
static GSource *
wsio_source_new (WsIoState *st, GObject *stream, bool output, GCancellable *cancellable)
{
  GSource *child = g_source_new (&wsio_source_funcs, sizeof (WsIoSource));
  WsIoSource *s = (WsIoSource *)child;
  GSource *source;

  g_source_set_static_name (child, output ? "fusebox ws output" : "fusebox ws input");
  s->st = state_ref (st);
  s->output = output;
  s->tag = g_source_add_unix_fd (child, st->fd, output ? G_IO_OUT : G_IO_IN);
  source = g_pollable_source_new_full (stream, child, cancellable);
  /* The parent holds it now.  A destroyed source stays in its context's
   * list until its last reference goes: keeping one made every main-loop
   * iteration walk every source ever created. */
  g_source_unref (child);
  return source;
}

/* --- input ----------------------------------------------------------------------- */

#define FB_TYPE_WS_IN (fb_ws_in_get_type ())
G_DECLARE_FINAL_TYPE (FbWsIn, fb_ws_in, FB, WS_IN, GInputStream)

struct _FbWsIn
{
  GInputStream parent;
  WsIoState *st;
};

static void fb_ws_in_pollable_init (GPollableInputStreamInterface *iface);

G_DEFINE_TYPE_WITH_CODE (FbWsIn, fb_ws_in, G_TYPE_INPUT_STREAM,
                         G_IMPLEMENT_INTERFACE (G_TYPE_POLLABLE_INPUT_STREAM, fb_ws_in_pollable_init))

/* A close frame (RFC 6455 5.5.1, unmasked: we are the server) queued
 * after whatever libsoup wrote, which is whole frames: the stream takes
 * every write whole or none of it. */
static void
queue_close_frame (WsIoState *st, gushort code, const char *reason)
{
  gsize len = MIN (strlen (reason), 123);
  guint8 head[4] = { 0x88, (guint8)(2 + len), code >> 8, code & 0xff };

  g_byte_array_append (st->out, head, sizeof head);
  g_byte_array_append (st->out, (const guint8 *)reason, (guint)len);
}

static void
held_release (WsIoState *st)
{
  if (st->set != NULL)
    st->set->held_total -= st->held;
  st->held = 0;
}

static void
set_unlink (WsIoState *st)
{
  if (st->set == NULL)
    return;
  held_release (st);
  g_queue_unlink (st->upgraded ? &st->set->open : &st->set->pending, &st->link);
  st->set = NULL;
}

/* ST's next read fails with CODE and MESSAGE, after a close frame of CODE
 * (0: none, before the upgrade); it leaves its set (it is going), and what
 * libsoup held of it counts no more. */
static void
state_fail (WsIoState *st, gushort code, int gcode, const char *message)
{
  if (st->in_error != NULL || st->closed)
    return;
  if (st->upgraded && code != 0)
    queue_close_frame (st, code, message);
  st->in_error = g_error_new_literal (G_IO_ERROR, gcode, message);
  set_unlink (st);
}

/* Room for N more bytes in the listener's budget: the connection holding
 * the most is failed (ST itself when that is it).  False when ST was. */
static bool
make_room (WsIoState *st, gsize n)
{
  FbRpcWsIoSet *set = st->set;
  WsIoState *victim = st;

  if (set == NULL || set->held_total + n <= FB_RPC_WS_HELD_TOTAL_MAX)
    return true;
  for (GList *l = set->pending.head; l != NULL; l = l->next)
    {
      WsIoState *o = l->data;
      if (o->held > victim->held)
        victim = o;
    }
  for (GList *l = set->open.head; l != NULL; l = l->next)
    {
      WsIoState *o = l->data;
      if (o->held > victim->held)
        victim = o;
    }
  /* The invariant held_total <= the budget makes a victim holding N
   * enough. */
  if (victim->held < n)
    victim = st;
  state_fail (victim, WS_CLOSE_TRY_AGAIN_LATER, G_IO_ERROR_NO_SPACE,
              "the server holds as much of unfinished messages as it may: retry");
  return victim != st;
}

/* Up to COUNT buffered bytes for libsoup, unless they would make what it
 * holds of an unfinished message pass FB_RPC_WS_HELD_MAX. */
static gssize
take_buffered (WsIoState *st, void *buffer, gsize count, GError **error)
{
  gsize n = MIN (count, st->in_len - st->in_off);

  /* libsoup bounds a frame, not a message: it appends continuation frames
   * to the message without limit, and keeps a frame's bytes until the
   * frame is whole.  Everything it holds it read from here since the last
   * message it completed (fb_rpc_ws_io_message_done), so counting those
   * bytes bounds both, as they arrive.  Control frames count too: a client
   * would need 16 MiB of pings between two messages to be refused. */
  if (st->held + n > FB_RPC_WS_HELD_MAX)
    {
      if (st->upgraded)
        queue_close_frame (st, SOUP_WEBSOCKET_CLOSE_TOO_BIG, "message over 16 MiB");
      /* libsoup closes the stream on a read error (the close frame is sent
       * with what it flushes); before the upgrade, no HTTP request is
       * that long. */
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE, "the client sent more than %u bytes of one message",
                   (guint)FB_RPC_WS_HELD_MAX);
      return -1;
    }
  if (!make_room (st, n))
    {
      g_propagate_error (error, g_error_copy (st->in_error));
      return -1;
    }
  memcpy (buffer, st->in + st->in_off, n);
  st->in_off += n;
  st->held += n;
  if (st->set != NULL)
    st->set->held_total += n;
  return (gssize)n;
}

/* One recv() into the empty buffer; returns what recv() did. */
static gssize
refill (WsIoState *st, bool blocking, GError **error)
{
  for (;;)
    {
      ssize_t n = recv (st->fd, st->in, WSIO_IN_SIZE, blocking ? 0 : MSG_DONTWAIT);
      if (n >= 0)
        {
          st->in_off = 0;
          st->in_len = (gsize)n;
          st->drained = n < WSIO_IN_SIZE;
          if (n > 0)
            st->last_recv = g_get_monotonic_time ();
          return n;
        }
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        {
          if (blocking)
            {
              struct pollfd pfd = { st->fd, POLLIN, 0 };
              (void)poll (&pfd, 1, -1);
              continue;
            }
          st->drained = true;
          g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK, g_strerror (EAGAIN));
          return -1;
        }
      {
        int e = errno;
        g_set_error (error, G_IO_ERROR, g_io_error_from_errno (e), "recv: %s", g_strerror (e));
      }
      return -1;
    }
}

/* A read for libsoup, BLOCKING or not: what is buffered, else one recv(). */
static gssize
in_read (WsIoState *st, void *buffer, gsize count, bool blocking, GError **error)
{
  gssize n;

  if (st->in_error != NULL)
    {
      g_propagate_error (error, g_error_copy (st->in_error));
      return -1;
    }
  if (st->in_off < st->in_len)
    return take_buffered (st, buffer, count, error);
  if (st->closed)
    return 0;
  if (!blocking && st->drained)
    {
      /* The socket had no more a moment ago; the source polls it. */
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK, g_strerror (EAGAIN));
      return -1;
    }
  n = refill (st, blocking, error);
  if (n <= 0)
    return n;
  return take_buffered (st, buffer, count, error);
}

static gssize
fb_ws_in_read_nonblocking (GPollableInputStream *stream, void *buffer, gsize count, GError **error)
{
  return in_read (FB_WS_IN (stream)->st, buffer, count, false, error);
}

static gssize
fb_ws_in_read (GInputStream *stream, void *buffer, gsize count, GCancellable *cancellable, GError **error)
{
  return in_read (FB_WS_IN (stream)->st, buffer, count, true, error);
}

static gboolean
fb_ws_in_is_readable (GPollableInputStream *stream)
{
  WsIoState *st = FB_WS_IN (stream)->st;
  struct pollfd pfd = { st->fd, POLLIN, 0 };

  if (st->in_off < st->in_len || st->closed || st->in_error != NULL)
    return TRUE;
  if (poll (&pfd, 1, 0) == 1)
    {
      st->drained = false;
      return TRUE;
    }
  return FALSE;
}

static GSource *
fb_ws_in_create_source (GPollableInputStream *stream, GCancellable *cancellable)
{
  return wsio_source_new (FB_WS_IN (stream)->st, G_OBJECT (stream), false, cancellable);
}

static void
fb_ws_in_finalize (GObject *object)
{
  state_unref (FB_WS_IN (object)->st);
  G_OBJECT_CLASS (fb_ws_in_parent_class)->finalize (object);
}

static void
fb_ws_in_pollable_init (GPollableInputStreamInterface *iface)
{
  iface->is_readable = fb_ws_in_is_readable;
  iface->create_source = fb_ws_in_create_source;
  iface->read_nonblocking = fb_ws_in_read_nonblocking;
}

static void
fb_ws_in_class_init (FbWsInClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = fb_ws_in_finalize;
  G_INPUT_STREAM_CLASS (klass)->read_fn = fb_ws_in_read;
}

static void
fb_ws_in_init (FbWsIn *self)
{
}

/* --- output ---------------------------------------------------------------------- */

#define FB_TYPE_WS_OUT (fb_ws_out_get_type ())
G_DECLARE_FINAL_TYPE (FbWsOut, fb_ws_out, FB, WS_OUT, GOutputStream)

struct _FbWsOut
{
  GOutputStream parent;
  WsIoState *st;
};

static void fb_ws_out_pollable_init (GPollableOutputStreamInterface *iface);

G_DEFINE_TYPE_WITH_CODE (FbWsOut, fb_ws_out, G_TYPE_OUTPUT_STREAM,
                         G_IMPLEMENT_INTERFACE (G_TYPE_POLLABLE_OUTPUT_STREAM, fb_ws_out_pollable_init))

static gssize
fb_ws_out_write_nonblocking (GPollableOutputStream *stream, const void *buffer, gsize count, GError **error)
{
  WsIoState *st = FB_WS_OUT (stream)->st;

  if (st->out_error != NULL)
    {
      g_propagate_error (error, g_error_copy (st->out_error));
      return -1;
    }
  if (st->closed)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_CLOSED, "closed");
      return -1;
    }
  if (out_pending (st) >= WSIO_OUT_MAX)
    {
      flush_or_wait (st);
      if (st->out_error != NULL)
        {
          g_propagate_error (error, g_error_copy (st->out_error));
          return -1;
        }
      if (out_pending (st) >= WSIO_OUT_MAX)
        {
          g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK, g_strerror (EAGAIN));
          return -1;
        }
    }
  if (st->out_off > 0 && st->out_off >= st->out->len / 2)
    {
      g_byte_array_remove_range (st->out, 0, (guint)st->out_off);
      st->out_off = 0;
    }
  g_byte_array_append (st->out, buffer, (guint)count);
  if (st->flush_idle == 0 && st->out_watch == 0)
    st->flush_idle = g_idle_add_full (G_PRIORITY_HIGH, on_flush_idle, state_ref (st), (GDestroyNotify)state_unref);
  return (gssize)count;
}

static gssize
fb_ws_out_write (GOutputStream *stream, const void *buffer, gsize count, GCancellable *cancellable, GError **error)
{
  WsIoState *st = FB_WS_OUT (stream)->st;

  /* Blocking: wait for room, then queue like a nonblocking write. */
  while (st->out_error == NULL && !st->closed && out_pending (st) >= WSIO_OUT_MAX)
    {
      struct pollfd pfd = { st->fd, POLLOUT, 0 };
      if (flush_now (st))
        break;
      (void)poll (&pfd, 1, -1);
    }
  return fb_ws_out_write_nonblocking (G_POLLABLE_OUTPUT_STREAM (stream), buffer, count, error);
}

static gboolean
fb_ws_out_flush (GOutputStream *stream, GCancellable *cancellable, GError **error)
{
  WsIoState *st = FB_WS_OUT (stream)->st;

  while (st->out_error == NULL && !flush_now (st))
    {
      struct pollfd pfd = { st->fd, POLLOUT, 0 };
      (void)poll (&pfd, 1, -1);
    }
  if (st->out_error != NULL)
    {
      g_propagate_error (error, g_error_copy (st->out_error));
      return FALSE;
    }
  return TRUE;
}

static gboolean
fb_ws_out_is_writable (GPollableOutputStream *stream)
{
  WsIoState *st = FB_WS_OUT (stream)->st;
  return st->out_error != NULL || st->closed || out_pending (st) < WSIO_OUT_MAX;
}

static GSource *
fb_ws_out_create_source (GPollableOutputStream *stream, GCancellable *cancellable)
{
  return wsio_source_new (FB_WS_OUT (stream)->st, G_OBJECT (stream), true, cancellable);
}

static void
fb_ws_out_finalize (GObject *object)
{
  state_unref (FB_WS_OUT (object)->st);
  G_OBJECT_CLASS (fb_ws_out_parent_class)->finalize (object);
}

static void
fb_ws_out_pollable_init (GPollableOutputStreamInterface *iface)
{
  iface->is_writable = fb_ws_out_is_writable;
  iface->create_source = fb_ws_out_create_source;
  iface->write_nonblocking = fb_ws_out_write_nonblocking;
}

static void
fb_ws_out_class_init (FbWsOutClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = fb_ws_out_finalize;
  G_OUTPUT_STREAM_CLASS (klass)->write_fn = fb_ws_out_write;
  G_OUTPUT_STREAM_CLASS (klass)->flush = fb_ws_out_flush;
}

static void
fb_ws_out_init (FbWsOut *self)
{
}

/* --- the stream ------------------------------------------------------------------ */

struct _FbRpcWsIo
{
  GIOStream parent;
  WsIoState *st;
  GInputStream *in;
  GOutputStream *out;
};

G_DEFINE_TYPE (FbRpcWsIo, fb_rpc_ws_io, G_TYPE_IO_STREAM)

static GInputStream *
fb_rpc_ws_io_get_input_stream (GIOStream *stream)
{
  return FB_RPC_WS_IO (stream)->in;
}

static GOutputStream *
fb_rpc_ws_io_get_output_stream (GIOStream *stream)
{
  return FB_RPC_WS_IO (stream)->out;
}

static gboolean
fb_rpc_ws_io_close_fn (GIOStream *stream, GCancellable *cancellable, GError **error)
{
  FbRpcWsIo *self = FB_RPC_WS_IO (stream);

  state_close (self->st);
  /* Mark the two halves closed too (nothing left for them to do). */
  g_input_stream_close (self->in, NULL, NULL);
  g_output_stream_close (self->out, NULL, NULL);
  return TRUE;
}

static void
fb_rpc_ws_io_close_async (GIOStream *stream, int io_priority, GCancellable *cancellable, GAsyncReadyCallback callback,
                          gpointer user_data)
{
  g_autoptr (GTask) task = g_task_new (stream, cancellable, callback, user_data);

  /* Nothing here blocks: no thread needed (and the state is the loop
   * thread's). */
  fb_rpc_ws_io_close_fn (stream, cancellable, NULL);
  g_task_return_boolean (task, TRUE);
}

static gboolean
fb_rpc_ws_io_close_finish (GIOStream *stream, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

static void
fb_rpc_ws_io_finalize (GObject *object)
{
  FbRpcWsIo *self = FB_RPC_WS_IO (object);

  state_close (self->st);
  g_clear_object (&self->in);
  g_clear_object (&self->out);
  state_unref (self->st);
  G_OBJECT_CLASS (fb_rpc_ws_io_parent_class)->finalize (object);
}

static void
fb_rpc_ws_io_class_init (FbRpcWsIoClass *klass)
{
  GIOStreamClass *io_class = G_IO_STREAM_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = fb_rpc_ws_io_finalize;
  io_class->get_input_stream = fb_rpc_ws_io_get_input_stream;
  io_class->get_output_stream = fb_rpc_ws_io_get_output_stream;
  io_class->close_fn = fb_rpc_ws_io_close_fn;
  io_class->close_async = fb_rpc_ws_io_close_async;
  io_class->close_finish = fb_rpc_ws_io_close_finish;
}

static void
fb_rpc_ws_io_init (FbRpcWsIo *self)
{
}

/* --- the listener's set of streams ----------------------------------------------- */

static gboolean
on_sweep (gpointer data)
{
  FbRpcWsIoSet *set = data;
  gint64 now = g_get_monotonic_time ();

  /* Oldest first: the rest are younger. */
  while (set->pending.head != NULL)
    {
      WsIoState *st = set->pending.head->data;

      if (now - st->accepted <= set->handshake_us)
        break;
      state_fail (st, 0, G_IO_ERROR_TIMED_OUT, "no WebSocket handshake in time");
    }
  for (GList *l = set->open.head, *next; l != NULL; l = next)
    {
      WsIoState *st = l->data;

      next = l->next; /* failing it unlinks it */

      /* A client that stops in the middle of a message keeps what it
       * sent; a trickle keeps it too, but within the budget. */
      if (st->upgraded && st->held > FB_RPC_WS_STALL_MIN && now - st->last_recv > set->stall_us)
        state_fail (st, SOUP_WEBSOCKET_CLOSE_POLICY_VIOLATION, G_IO_ERROR_TIMED_OUT,
                    "stalled in the middle of a message");
    }
  if (set->pending.length + set->open.length > 0)
    return G_SOURCE_CONTINUE;
  set->sweep = 0;
  return G_SOURCE_REMOVE;
}

/* MAX seconds, or less for tests ($VAR, fusebox(1)): never more. */
static gint64
timeout_us (const char *var, guint max)
{
  const char *value = g_getenv (var);
  guint64 s = max;

  if (value != NULL && !g_ascii_string_to_unsigned (value, 10, 1, max, &s, NULL))
    g_warning ("%s=%s: not 1 to %u seconds; %u s it is", var, value, max, max);
  return (gint64)s * G_USEC_PER_SEC;
}

FbRpcWsIoSet *
fb_rpc_ws_io_set_new (void)
{
  FbRpcWsIoSet *set = g_new0 (FbRpcWsIoSet, 1);

  g_queue_init (&set->pending);
  g_queue_init (&set->open);
  set->stall_us = timeout_us ("FUSEBOX_TEST_WS_STALL", FB_RPC_WS_STALL_S);
  set->handshake_us = timeout_us ("FUSEBOX_TEST_WS_HANDSHAKE", FB_RPC_WS_HANDSHAKE_S);
  return set;
}

void
fb_rpc_ws_io_set_free (FbRpcWsIoSet *set)
{
  if (set == NULL)
    return;
  /* Streams libsoup still holds outlive the listener: they leave the set. */
  while (set->pending.head != NULL)
    set_unlink (set->pending.head->data);
  while (set->open.head != NULL)
    set_unlink (set->open.head->data);
  g_clear_handle_id (&set->sweep, g_source_remove);
  g_free (set);
}

static void
set_add (FbRpcWsIoSet *set, WsIoState *st)
{
  /* The oldest connection still in its handshake makes room: a client
   * that is one completes it long before 256 others came. */
  if (set->pending.length >= FB_RPC_WS_PENDING_MAX)
    {
      g_debug ("ws://: %d connections before their handshake: the oldest closed", FB_RPC_WS_PENDING_MAX);
      state_fail (set->pending.head->data, 0, G_IO_ERROR_TOO_MANY_OPEN_FILES,
                  "too many connections before their handshake");
    }
  st->set = set;
  st->link.data = st;
  st->accepted = st->last_recv = g_get_monotonic_time ();
  g_queue_push_tail_link (&set->pending, &st->link);
  if (set->sweep == 0)
    set->sweep = g_timeout_add_seconds (1, on_sweep, set);
}

FbRpcWsIo *
fb_rpc_ws_io_new (FbRpcWsIoSet *set, GSocketConnection *conn)
{
  FbRpcWsIo *self = g_object_new (FB_TYPE_RPC_WS_IO, NULL);
  WsIoState *st = g_rc_box_new0 (WsIoState);
  FbWsIn *in = g_object_new (FB_TYPE_WS_IN, NULL);
  FbWsOut *out = g_object_new (FB_TYPE_WS_OUT, NULL);

  st->conn = g_object_ref (conn);
  st->fd = g_socket_get_fd (g_socket_connection_get_socket (conn));
  st->in = g_malloc (WSIO_IN_SIZE);
  st->out = g_byte_array_new ();
  in->st = state_ref (st);
  out->st = state_ref (st);
  set_add (set, st);
  self->st = st;
  self->in = G_INPUT_STREAM (in);
  self->out = G_OUTPUT_STREAM (out);
  return self;
}

int
fb_rpc_ws_io_get_fd (FbRpcWsIo *io)
{
  return io->st->fd;
}

void
fb_rpc_ws_io_set_upgraded (FbRpcWsIo *io)
{
  WsIoState *st = io->st;

  if (st->upgraded)
    return;
  if (st->set != NULL)
    {
      g_queue_unlink (&st->set->pending, &st->link);
      g_queue_push_tail_link (&st->set->open, &st->link);
    }
  st->upgraded = true;
}

void
fb_rpc_ws_io_message_done (FbRpcWsIo *io)
{
  held_release (io->st);
}

bool
fb_rpc_ws_io_can_write (FbRpcWsIo *io)
{
  WsIoState *st = io->st;
  return !st->closed && st->out_error == NULL && out_pending (st) < WSIO_OUT_MAX;
}

void
fb_rpc_ws_io_set_writable_func (FbRpcWsIo *io, void (*func) (gpointer data), gpointer data)
{
  io->st->writable = func;
  io->st->writable_data = data;
}
