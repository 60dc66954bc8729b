/* fusebox — what the transports (ipc-transport.c, ipc-transport-stream.c,
 * ipc-transport-wsio.c) share. */
#pragma once

#include <libsoup/soup.h>

#include "ipc/ipc-rpc-private.h"
#include "policy/util.h"

G_BEGIN_DECLS

/* The listening sockets' accept queue.  GLib's default is 10: a harness
 * that opens a few dozen connections at once overflows it while the loop
 * thread sets up the first ones, and the kernel then drops the overflow's
 * handshakes, which the clients retry after 1, 3, 7 s...  The kernel caps
 * it at net.core.somaxconn; a pending connection costs the kernel a socket
 * and us nothing until it is accepted. */
#define FB_RPC_LISTEN_BACKLOG 1024

struct FbRpcListener
{
  FbRpcServer *server;
  bool finished; /* stdio reached EOF */

  /* ws */
  SoupServer *soup;
  GSocket *ws_socket;          /* listening; libsoup serves each connection */
  guint ws_accept_watch;       /* on ws_socket, unless out of descriptors */
  guint ws_accept_again;       /* while out of them */
  gint64 ws_accept_warned;     /* monotonic: when that was last said */
  struct FbRpcWsIoSet *ws_ios; /* the streams under the connections */
  char *token;
  GList *peers; /* FbRpcPeer* of WsPeers */

  /* unix, stdio (ipc-transport-stream.c) */
  GSocketService *service;
  char *unix_path;
  GList *streams; /* FbRpcPeer* of StreamPeers */
};

/* A client of the server on either transport, embedded in the
 * transport's own peer (a WebSocket's, a stream's) and found back from it
 * with container_of: the listener and the list of it that hold it, its
 * connection, and the idle that lets it go from the loop, never from
 * inside the transport's own callbacks. */
typedef struct FbRpcPeer FbRpcPeer;
struct FbRpcPeer
{
  FbRpcListener *listener;
  GList **list;    /* the listener's list of its transport: FbRpcPeer* */
  FbRpcConn *conn; /* NULL once it went, or when the server refused it */
  guint closed_idle;
  bool dropping;                  /* in fb_rpc_peer_drop: no close is scheduled any more */
  void (*free) (FbRpcPeer *peer); /* the transport's part of letting it go */
};

/* PEER on L's LIST, let go by FREE_FUNC. */
void fb_rpc_peer_add (FbRpcPeer *peer, FbRpcListener *l, GList **list, void (*free_func) (FbRpcPeer *peer));
/* PEER let go at the loop's next turn (once, however often it is asked). */
void fb_rpc_peer_close_later (FbRpcPeer *peer);
/* PEER let go now: its connection told that it is gone, then PEER off its
 * list and freed. */
void fb_rpc_peer_drop (FbRpcPeer *peer);

/* *SERVICE stopped, its sockets closed, and released (NULL: nothing). */
static inline void
fb_rpc_service_clear (GSocketService **service)
{
  if (*service == NULL)
    return;
  g_socket_service_stop (*service);
  g_socket_listener_close (G_SOCKET_LISTENER (*service));
  g_clear_object (service);
}

bool fb_rpc_listen_unix (FbRpcListener *listener, const char *path, GError **error);
bool fb_rpc_listen_stdio (FbRpcListener *listener, GError **error);
void fb_rpc_stream_listener_clear (FbRpcListener *listener);

/* The stream under a WebSocket connection (ipc-transport-wsio.c). */
#define FB_TYPE_RPC_WS_IO (fb_rpc_ws_io_get_type ())
G_DECLARE_FINAL_TYPE (FbRpcWsIo, fb_rpc_ws_io, FB, RPC_WS_IO, GIOStream)

/* A listener's streams, and what they hold together. */
typedef struct FbRpcWsIoSet FbRpcWsIoSet;
FbRpcWsIoSet *fb_rpc_ws_io_set_new (void);
void fb_rpc_ws_io_set_free (FbRpcWsIoSet *set);

FbRpcWsIo *fb_rpc_ws_io_new (FbRpcWsIoSet *set, GSocketConnection *conn);
int fb_rpc_ws_io_get_fd (FbRpcWsIo *io);
/* What libsoup may hold of one incoming WebSocket message, frames and
 * fragments together: FB_RPC_MESSAGE_MAX and the headers of a few thousand
 * fragments.  Past it the connection is closed with 1009 as the bytes
 * arrive (ipc-transport-wsio.c). */
#define FB_RPC_WS_HELD_MAX (FB_RPC_MESSAGE_MAX + 64 * 1024)
/* What all the connections of a listener may hold of unfinished messages
 * together: past it the one holding the most is closed (1013).  Sixteen
 * connections at their bound; 1,024 of them could hold 16 GiB. */
#define FB_RPC_WS_HELD_TOTAL_MAX (256 * 1024 * 1024)
/* A connection holding more than FB_RPC_WS_STALL_MIN of an unfinished
 * message (more than control frames between two messages amount to) that
 * sends nothing for FB_RPC_WS_STALL_S is closed (1008). */
#define FB_RPC_WS_STALL_MIN (64 * 1024)
#define FB_RPC_WS_STALL_S 30
/* Connections before their WebSocket handshake (anyone's: the token is
 * in the handshake): one is closed after FB_RPC_WS_HANDSHAKE_S, and past
 * FB_RPC_WS_PENDING_MAX of them the oldest is. */
#define FB_RPC_WS_HANDSHAKE_S 10
#define FB_RPC_WS_PENDING_MAX 256
/* libsoup reads frames from IO now (the handshake is done). */
void fb_rpc_ws_io_set_upgraded (FbRpcWsIo *io);
/* libsoup completed a message it read from IO: it holds none of it now. */
void fb_rpc_ws_io_message_done (FbRpcWsIo *io);
/* Below its output bound and not failed. */
bool fb_rpc_ws_io_can_write (FbRpcWsIo *io);
/* FUNC runs from the main loop when output left after the bound was
 * reached (or sending failed). */
void fb_rpc_ws_io_set_writable_func (FbRpcWsIo *io, void (*func) (gpointer data), gpointer data);

G_END_DECLS
