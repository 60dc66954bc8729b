/* fusebox — what the transports (ipc-transport.c, ipc-transport-stream.c,
 * ipc-transport-wsio.c) share. */
#pragma once

#include <libsoup/soup.h>

#include "ipc/ipc-rpc-private.h"

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
  GSocketService *ws_service; /* accepts; libsoup serves each connection */
  char *token;
  GList *peers; /* WsPeer* */

  /* unix, stdio (ipc-transport-stream.c) */
  GSocketService *service;
  char *unix_path;
  GList *streams; /* StreamPeer* */
};

/* A peer's connection *CONN told that the peer is gone (nothing when it
 * had none), then cleared.  In that order, not g_clear_pointer's: the
 * answers fb_rpc_conn_closed still writes reach the peer's write paths,
 * which look at the peer's conn. */
static inline void
fb_rpc_peer_conn_closed (FbRpcConn **conn)
{
  if (*conn != NULL)
    fb_rpc_conn_closed (*conn);
  *conn = NULL;
}

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

FbRpcWsIo *fb_rpc_ws_io_new (GSocketConnection *conn);
int fb_rpc_ws_io_get_fd (FbRpcWsIo *io);
/* Below its output bound and not failed. */
bool fb_rpc_ws_io_can_write (FbRpcWsIo *io);
/* FUNC runs from the main loop when output left after the bound was
 * reached (or sending failed). */
void fb_rpc_ws_io_set_writable_func (FbRpcWsIo *io, void (*func) (gpointer data), gpointer data);

G_END_DECLS
