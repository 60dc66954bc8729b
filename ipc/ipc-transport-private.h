/* fusebox — what the transports (ipc-transport.c, ipc-transport-stream.c)
 * share. */
#pragma once

#include <libsoup/soup.h>

#include "ipc/ipc-rpc-private.h"

G_BEGIN_DECLS

struct FbRpcListener
{
  FbRpcServer *server;
  bool finished; /* stdio reached EOF */

  /* ws */
  SoupServer *soup;
  char *token;
  GList *peers; /* WsPeer* */

  /* unix, stdio (ipc-transport-stream.c) */
  GSocketService *service;
  char *unix_path;
  GList *streams; /* StreamPeer* */
};

bool fb_rpc_listen_unix (FbRpcListener *listener, const char *path, GError **error);
bool fb_rpc_listen_stdio (FbRpcListener *listener, GError **error);
void fb_rpc_stream_listener_clear (FbRpcListener *listener);

G_END_DECLS
