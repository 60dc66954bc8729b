/* fusebox — the remote API: a JSON-RPC server wire-compatible with Codex's
 * exec-server, so that an agent harness written for Codex can use fusebox as
 * its executor (docs/api.md is the user's version of this header).
 *
 * Layers, each in its own file:
 *   ipc-rpc.c            the server: what it holds, made and freed
 *   ipc-rpc-wire.c       messages: decoding, encoding, error codes, base64,
 *                        file URIs, typed parameters
 *   ipc-rpc-conn.c       connections: accepting, the bounded output queue,
 *                        answers and notifications, the end of one
 *   ipc-rpc-dispatch.c   the method table, the handshake, running one message
 *   ipc-rpc-log.c        log/subscribe and log/unsubscribe: live records
 *   ipc-rpc-pipeline.c   each connection's ordered queue of requests, the worker
 *                        pool that runs its fs/... requests, the answers' hand-back
 *   ipc-rpc-json.c       the JSON decoder (strict, and faster than json-glib's)
 *   ipc-rpc-sandbox.c    a call's `sandbox` → a narrowed policy → a cached FbView;
 *                        the tee sink that sees a call's policy denial
 *   ipc-fsapi.c          the fs/... methods, through FbView only
 *   ipc-session.c        sessions: attach, resume, detach timeout
 *   ipc-process.c        the process/... methods (sandboxes from fusebox-launch)
 *   ipc-transport.c      WebSocket (libsoup 3); ipc-transport-stream.c: unix, stdio
 *
 * Threads: everything here is called on the thread that owns the
 * GMainContext the server was made with (the main loop).  fs/... requests
 * run on a small pool of workers (one per CPU, shared by every connection,
 * ipc-rpc-pipeline.c), one request of a connection at a time and in the order
 * received; the answers leave from the loop thread in the order of the
 * requests.  The other threads are the FUSE workers of the sandboxes
 * started by process/start, which reach this code only through the access
 * log's sink (thread-safe) and the tee sink's atomic denial count.
 *
 * Bounds (everything a client can make the server hold):
 *   FB_RPC_MESSAGE_MAX          one incoming message; a bigger one gets an
 *                               error response and is discarded
 *   FB_RPC_WS_HELD_MAX          one WebSocket message as it arrives, frames
 *                               and fragments together: past it the
 *                               connection is closed (1009;
 *                               ipc-transport-private.h)
 *   FB_RPC_WS_HELD_TOTAL_MAX    unfinished WebSocket messages, all
 *                               connections together: past it the one
 *                               holding the most is closed (1013); one
 *                               stalled in a message for FB_RPC_WS_STALL_S
 *                               is closed (1008)
 *   FB_RPC_PENDING_MAX          requests of one connection received and not yet
 *                               answered; FB_RPC_PENDING_BYTES_MAX their bytes
 *                               (received, and answered but not yet sent): past
 *                               either the server reads no more from that
 *                               connection until its oldest requests are done
 *   FB_RPC_QUEUE_MAX            bytes waiting to be sent to one client: past
 *                               it the client is a slow reader and is
 *                               disconnected (its session detaches and can be
 *                               resumed; process output stays replayable)
 *   FB_RPC_READ_FILE_MAX        fs/readFile (bigger: use fs/open + fs/readBlock)
 *   FB_RPC_READ_BLOCK_MAX       one fs/readBlock
 *   FB_RPC_HANDLES_MAX          open fs/open handles per connection
 *   FB_RPC_DIR_ENTRIES_MAX      entries of one fs/readDirectory
 *   FB_RPC_TREE_MAX             entries one recursive fs/remove or fs/copy visits
 *   fs/walk                     Codex's limits: depth 64, 10,000 directories,
 *                               50,000 entries, 4 MiB of response
 *   FB_RPC_VIEW_CACHE_MAX       distinct sandboxes with a live view (LRU)
 *   FB_RPC_VIEW_CACHE_BYTES_MAX bytes of their texts (the keys; what they
 *                               compile to grows with them): a larger one
 *                               is used for its call and not kept
 *   FB_RPC_PROCESSES_MAX        processes per session
 *   FB_RPC_PROCESS_ID_MAX       bytes of a processId (in every record of
 *                               its process)
 *   FB_RPC_SANDBOX_WHY_MAX      bytes of a `why` in a call's sandbox (in
 *                               every record its rule decides)
 *   FB_RPC_SESSION_VIEWS_MAX    views a session's processes run in (one per
 *                               effective policy; ipc-rpc-view.c), and in the
 *                               whole server as many as running processes;
 *                               one without a process is closed after
 *                               FB_RPC_VIEW_IDLE_MS (`serve --view-idle-timeout`)
 *   FB_RPC_PROCESS_RETAIN       output bytes kept per process for process/read
 *   FB_RPC_SUBSCRIPTIONS_MAX    log subscriptions per connection
 *   FB_RPC_CLIENTS_MAX          connections at once (more are refused)
 *   FB_RPC_SESSIONS_MAX         sessions, attached or waiting out their detach timeout
 *   FB_RPC_HANDLES_TOTAL_MAX    fs/open handles, the whole server
 *   FB_RPC_PROCESSES_TOTAL_MAX  running processes, the whole server
 *   FB_RPC_RETAIN_TOTAL_MAX     process output kept for process/read, the
 *                               whole server (or `serve --output-max`, at
 *                               least FB_RPC_RETAIN_TOTAL_MIN): finished
 *                               processes' is forgotten past it, the oldest
 *                               of the session holding the most first
 *   FB_RPC_FORGOTTEN_MAX        ids of forgotten processes a session
 *                               remembers, to say so at process/read
 *   Server-wide budgets are smaller where the descriptor limit says so
 *   (ipc-rpc-share.c), and each client (a peer address: ws's IP, every
 *   local WebSocket client being 127.0.0.1; a unix peer's pid) holds at
 *   most 1/FB_RPC_CLIENT_SHARE of each: connections, sessions, fs/open
 *   handles, running processes, retained output.
 *   FB_RPC_LOG_QUEUE_MAX        bytes waiting to be sent to a log subscriber
 *                               when the next log/event comes: past it the
 *                               subscription ends (log/ended), not the
 *                               connection
 */
#pragma once

#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>

#include "fs/fs-event.h"
#include "ipc/ipc.h"
#include "policy/policy.h"

G_BEGIN_DECLS

/* Error codes: JSON-RPC's and Codex's, plus our policy denial. */
#define FB_RPC_ERROR_INVALID_REQUEST (-32600)
#define FB_RPC_ERROR_METHOD_NOT_FOUND (-32601)
#define FB_RPC_ERROR_INVALID_PARAMS (-32602)
#define FB_RPC_ERROR_INTERNAL (-32603)
#define FB_RPC_ERROR_NOT_FOUND (-32004)
#define FB_RPC_ERROR_SESSION_ATTACHED (-32010)
#define FB_RPC_ERROR_POLICY_DENIED (-32050)

#define FB_RPC_MESSAGE_MAX (16 * 1024 * 1024)
#define FB_RPC_QUEUE_MAX (32 * 1024 * 1024)
#define FB_RPC_PENDING_MAX 64
#define FB_RPC_PENDING_BYTES_MAX (32 * 1024 * 1024)
#define FB_RPC_READ_FILE_MAX (8 * 1024 * 1024)
#define FB_RPC_READ_BLOCK_MAX (4 * 1024 * 1024)
#define FB_RPC_HANDLES_MAX 256
#define FB_RPC_HANDLE_ID_MAX 32
#define FB_RPC_DIR_ENTRIES_MAX 100000
#define FB_RPC_TREE_MAX 100000
#define FB_RPC_TREE_DEPTH_MAX 128
#define FB_RPC_VIEW_CACHE_MAX 64
#define FB_RPC_VIEW_CACHE_BYTES_MAX (16 * 1024 * 1024)
#define FB_RPC_PROCESSES_MAX 64
#define FB_RPC_PROCESS_ID_MAX 256
#define FB_RPC_SANDBOX_WHY_MAX 1024
#define FB_RPC_PROCESS_RETAIN (1024 * 1024)
#define FB_RPC_SUBSCRIPTIONS_MAX 16
#define FB_RPC_CLIENTS_MAX 1024
#define FB_RPC_SESSIONS_MAX 4096
#define FB_RPC_HANDLES_TOTAL_MAX 4096
#define FB_RPC_PROCESSES_TOTAL_MAX 256
#define FB_RPC_RETAIN_TOTAL_MAX (256 * 1024 * 1024)
#define FB_RPC_RETAIN_TOTAL_MIN (FB_RPC_CLIENT_SHARE * FB_RPC_PROCESS_RETAIN)
#define FB_RPC_FORGOTTEN_MAX 256
#define FB_RPC_CLIENT_SHARE 4
#define FB_RPC_DEFAULT_DETACH_TIMEOUT_MS 30000
#define FB_RPC_SESSION_SECRET_BYTES 16
#define FB_RPC_LOG_QUEUE_MAX (FB_RPC_QUEUE_MAX / 4)
#define FB_RPC_SESSION_VIEWS_MAX 8
#define FB_RPC_VIEW_IDLE_MS (5 * 60 * 1000)

/* --- messages (ipc-rpc-wire.c) ---------------------------------------------- */

typedef enum
{
  FB_RPC_MESSAGE_REQUEST,      /* {id, method, params?} */
  FB_RPC_MESSAGE_NOTIFICATION, /* {method, params?} */
  FB_RPC_MESSAGE_RESPONSE,     /* {id, result} or {id, error}: the server never asks, so unexpected */
} FbRpcMessageKind;

/* A decoded message.  `id` and `params` point into `root`. */
typedef struct
{
  FbRpcMessageKind kind;
  JsonNode *root;
  JsonNode *id;       /* integer or string; NULL for notifications */
  const char *method; /* NULL for responses */
  JsonObject *params; /* NULL when absent or null */
  /* The text params.sandbox was decoded from (inside the caller's DATA,
   * not NUL-terminated), or NULL. */
  const char *sandbox_text;
  gsize sandbox_len;
} FbRpcMessage;

void fb_rpc_message_clear (FbRpcMessage *message);

/* Decode one message.  On failure returns false with *ret_code (-32600:
 * not JSON, not an object, bad member types; -32602: params not an
 * object), *ret_message (for people; free it) and *ret_id (the message's
 * id when one could be read, else NULL: the error then goes to id -1, as
 * Codex does).  Never crashes on any input (fuzzed: tests/fuzz/fuzz-rpc.c). */
bool fb_rpc_message_parse (const char *data, gsize len, FbRpcMessage *ret, int *ret_code, char **ret_message,
                           JsonNode **ret_id);

/* Encoders: one JSON text without a newline.  ID may be NULL (→ -1). */
char *fb_rpc_encode_result (JsonNode *id, JsonNode *result);
/* RESULT_JSON is already JSON text (a hot path builds it by hand). */
char *fb_rpc_encode_result_text (JsonNode *id, const char *result_json);
/* {"id":ID,"result":{"MEMBER":"<DATA in standard base64>"}}: UTF-8 (ASCII
 * but for the id's text); built in one buffer. */
char *fb_rpc_encode_result_base64 (JsonNode *id, const char *member, const guint8 *data, gsize len);
char *fb_rpc_encode_error (JsonNode *id, int code, const char *message, JsonNode *data);
char *fb_rpc_encode_notification (const char *method, JsonNode *params);

/* file:// URIs (or plain absolute paths) to an absolute path with every
 * percent-escape decoded.  Refuses relative paths, other schemes, a host
 * other than "" or "localhost", bad escapes and NUL bytes, with a message. */
char *fb_rpc_path_from_uri (const char *uri, char **ret_message);
/* "file://" + the path with what RFC 8089 needs escaped. */
char *fb_rpc_path_to_uri (const char *path);

/* "Permission denied (os error 13)": Rust's io::Error wording, which
 * clients that classify Codex's messages look for. */
char *fb_rpc_os_error_message (int err);

/* --- the server ------------------------------------------------------------- */

typedef struct FbRpcServer FbRpcServer;

typedef struct
{
  FbPolicy *policy;         /* the server's policy; every call can only narrow it */
  const FbPolicyVars *vars; /* for sandboxes given with a call (copied) */
  FbAccessLog *log;         /* where every decided access goes; may be NULL (tests) */
  FbLogLevel log_level;     /* the views' level; default FB_LOG_LEVEL_OPENS */
  /* log/subscribe shows every session's records, not only the caller's
   * own (the operator's choice: `fusebox serve --subscribe-all`). */
  bool subscribe_all;
  guint detach_timeout_ms;   /* 0 = FB_RPC_DEFAULT_DETACH_TIMEOUT_MS */
  const char *launch_helper; /* the fusebox-launch binary; NULL: process/start fails with -32603 */
  const char *run_dir;       /* shown in environmentInfo; may be NULL */
  /* RUN_DIR's descriptor (fb_run_get_dir_fd), or NULL: the sessions'
   * private directories are made from it (FbViewOptions.private_anchor_fd);
   * duplicated */
  const int *run_dir_fd;
  /* fusebox's own state, hidden from every view (FbViewOptions.hidden_paths; copied) */
  const char *const *hidden_paths;
  /* process output kept for process/read, all processes together; 0:
   * FB_RPC_RETAIN_TOTAL_MAX; at least FB_RPC_RETAIN_TOTAL_MIN */
  gsize retained_max;
  /* a view without a running process is closed this long after its last
   * ends (ipc-rpc-view.c); 0: FB_RPC_VIEW_IDLE_MS */
  guint view_idle_ms;
} FbRpcServerOptions;

FbRpcServer *fb_rpc_server_new (const FbRpcServerOptions *options, GError **error);
/* Terminates every process, closes every connection. */
void fb_rpc_server_free (FbRpcServer *server);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbRpcServer, fb_rpc_server_free)
guint fb_rpc_server_count_connections (FbRpcServer *server);

/* A transport's side of one connection.  The server calls these on the loop
 * thread; TEXT is one complete message. */
typedef struct
{
  /* May the next message be handed over now?  false: the transport calls
   * fb_rpc_conn_writable() when it may. */
  bool (*can_write) (gpointer transport);
  void (*write) (gpointer transport, const char *text, gsize len);
  /* Close the connection; the transport calls fb_rpc_conn_closed() once it
   * is closed (possibly from inside this call). */
  void (*close) (gpointer transport, const char *reason);
} FbRpcTransportOps;

typedef struct FbRpcConn FbRpcConn;

/* PEER_UID: the client's uid when the transport knows it (unix sockets),
 * else the server's own.  NULL when the server is at its bound on
 * connections. */
FbRpcConn *fb_rpc_server_accept (FbRpcServer *server, const FbRpcTransportOps *ops, gpointer transport, uid_t peer_uid,
                                 const char *peer_name);
/* The same, counted against CLIENT (ipc-rpc-share.c: the peer's address;
 * NULL: PEER_NAME).  NULL, with *RET_WHY (may be NULL) for the client, when
 * it or the server is at its bound on connections. */
FbRpcConn *fb_rpc_server_accept_client (FbRpcServer *server, const FbRpcTransportOps *ops, gpointer transport,
                                        uid_t peer_uid, const char *peer_name, const char *client, char **ret_why);
/* May a connection from CLIENT be accepted now?  false with *RET_WHY. */
bool fb_rpc_server_may_accept (FbRpcServer *server, const char *client, char **ret_why);
/* One incoming message (a WebSocket frame, a line).  Handles it and queues
 * the answer. */
void fb_rpc_conn_receive (FbRpcConn *conn, const char *data, gsize len);
/* The same for DATA the transport has already found to be UTF-8 (a
 * WebSocket text frame: libsoup closes the connection with 1007 on one
 * that is not, as RFC 6455 8.1 asks): not scanned again. */
void fb_rpc_conn_receive_utf8 (FbRpcConn *conn, const char *data, gsize len);
/* An incoming message that was too big to keep: answer with an error. */
void fb_rpc_conn_receive_oversized (FbRpcConn *conn, guint64 len);
void fb_rpc_conn_writable (FbRpcConn *conn);
/* The client's input ended but the transport can still write (EOF on
 * stdin, a unix peer's shutdown of its sending side): run and answer what
 * CONN received.  true once every answer has been handed to write();
 * false while some wait for the transport's fb_rpc_conn_writable(), after
 * which it may be asked again. */
bool fb_rpc_conn_drain (FbRpcConn *conn);
/* The transport is gone: detach the session, free CONN. */
void fb_rpc_conn_closed (FbRpcConn *conn);

/* --- transports (ipc-transport*.c) ------------------------------------------ */

typedef struct FbRpcListener FbRpcListener;

typedef struct
{
  const char *listen; /* "ws://HOST:PORT", "unix:PATH" or "stdio" */
  bool allow_remote;  /* ws on a non-loopback address */
  /* The token a ws:// client must present (ipc-transport.c says how); a
   * non-loopback address needs one.  NULL: a new one is made for this
   * listener, and *ret_url carries it, unless no_auth: an open listener is
   * never a default. */
  const char *token;
  bool no_auth; /* ws:// on loopback without a token */
} FbRpcListenOptions;

/* A new random secret: N_BYTES from getrandom(2), as lowercase hex (2 *
 * N_BYTES characters, safe in a URL).  NULL (errno set) when the kernel's
 * generator fails: never a weaker secret. */
char *fb_rpc_random_hex (gsize n_bytes);
#define FB_RPC_TOKEN_BYTES 32

/* Start listening.  *ret_url (may be NULL) is what to tell clients: the
 * bound ws:// URL (port 0 resolved; with ?token=TOKEN when the token was
 * made here), unix:PATH or "stdio".  Errors are FB_IPC_ERROR with a
 * message naming the address and the fix. */
FbRpcListener *fb_rpc_listen (FbRpcServer *server, const FbRpcListenOptions *options, char **ret_url, GError **error);
/* stdio: true once stdin reached EOF (the serve command then stops). */
bool fb_rpc_listener_is_finished (FbRpcListener *listener);
void fb_rpc_listener_free (FbRpcListener *listener);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbRpcListener, fb_rpc_listener_free)

G_END_DECLS
