/* fusebox — the remote API's internals, shared by ipc-rpc*.c, ipc-fsapi.c,
 * ipc-session.c, ipc-process.c and their unit tests.  Everything here runs
 * on the server's loop thread unless a comment says otherwise: the fs/...
 * methods run on a worker (ipc-rpc-pipeline.c), one request of a
 * connection at a time and never while the loop thread runs a request of
 * the same connection, so a connection's own state needs no lock for them;
 * what several connections share has its own (named beside each field).
 * Lock order: a connection's lock, then the server's ready_lock;
 * sandbox_lock alone. */
#pragma once

#include "fs/fs.h"
#include "ipc/ipc-private.h"
#include "ipc/ipc-rpc.h"

G_BEGIN_DECLS

typedef struct FbRpcSession FbRpcSession;
typedef struct FbRpcSandbox FbRpcSandbox;
typedef struct FbRpcProcess FbRpcProcess;
typedef struct FbRpcClient FbRpcClient;
typedef struct FbRpcView FbRpcView;
typedef struct FbRpcReady FbRpcReady;

/* The server-wide budgets (ipc-rpc-share.c): ipc-rpc.h's bounds, lowered
 * to what the descriptor limit allows; a client's share of each is
 * fb_rpc_share (). */
typedef struct
{
  guint conns;
  guint sessions;
  guint handles;
  guint processes; /* running */
  gsize retained;  /* bytes of process output kept for process/read */
  guint views;     /* views processes run in (ipc-rpc-view.c): as many as running processes */
  guint tunnels;   /* a running process's network proxy connections at once (FB_PROXY_CONN_FDS descriptors each) */
} FbRpcBudget;

/* Who a connection comes from, for fair shares: the peer's IP address
 * (ws), "unix:pidN" (unix), "stdio": what is known before the handshake,
 * and what a remote peer can't multiply.  Every local WebSocket client is
 * the one client 127.0.0.1.  Everything a client's connections and
 * sessions hold is counted here, against 1/FB_RPC_CLIENT_SHARE of each
 * budget; retained output is also counted per session, and forgotten from
 * the session that holds the most first (ipc-process.c), so that inside
 * one client the sessions are shared fairly too.  Loop thread, but
 * n_handles (workers run fs/open). */
struct FbRpcClient
{
  FbRpcServer *server;
  char *key;
  guint refs; /* its connections and sessions */
  guint n_conns;
  guint n_sessions;
  guint n_processes; /* running */
  gsize retained;    /* its sessions' processes' retained output */
  gint n_handles;    /* atomic */
};

/* An error answer under construction. */
typedef struct
{
  int code;
  char *message;
  JsonNode *data; /* owned, may be NULL */
} FbRpcError;

/* A node holding OBJECT, taking the caller's reference (unlike
 * json_node_init_object, which adds one: a result built with it leaks). */
JsonNode *fb_rpc_object_node (JsonObject *object);

void fb_rpc_error_set (FbRpcError *error, int code, const char *format, ...) G_GNUC_PRINTF (3, 4);
void fb_rpc_error_clear (FbRpcError *error);

/* One connection's last params.sandbox: its text and its tree (sealed),
 * reused while the next messages carry the same text.  The text is kept
 * only up to FB_RPC_JSON_REUSE_MAX bytes (the bound on what it holds). */
#define FB_RPC_JSON_REUSE_MAX (64 * 1024)
typedef struct
{
  char *text;
  gsize len;
  JsonNode *node;
} FbRpcJsonReuse;

/* A copy of the policy variables that outlives the caller's. */
typedef struct
{
  FbPolicyVars vars;
  char *owned[4];
} FbRpcVars;

struct FbRpcServer
{
  GMainContext *context;
  FbPolicy *policy;
  FbRpcVars vars;
  FbAccessLog *log;
  FbLogLevel log_level;
  guint detach_timeout_ms;
  char *launch_helper;
  char *run_dir;
  int run_dir_fd; /* options.run_dir_fd, duplicated, or -1 */
  char *cwd;
  char **hidden_paths; /* FbViewOptions.hidden_paths of every view */

  GHashTable *sessions; /* id → FbRpcSession* (owned) */
  GList *conns;         /* FbRpcConn* */
  guint n_conns;

  /* ipc-rpc-sandbox.c: sandbox key → FbRpcSandbox*, least recently used
   * first.  Workers of different connections look sandboxes up at once:
   * sandbox_lock guards sandboxes, sandbox_lru, base and each cached
   * sandbox's lru_link (never held while a view is built or freed). */
  GMutex sandbox_lock;
  GHashTable *sandboxes;
  GQueue sandbox_lru;
  gsize sandbox_bytes; /* of the cached sandboxes' keys (FB_RPC_VIEW_CACHE_BYTES_MAX) */
  FbRpcSandbox *base;  /* no sandbox parameter: the server's policy */

  /* Pipelining (ipc-rpc-pipeline.c): the workers that run fs/... requests (NULL:
   * every request runs on the loop thread), and how they hand finished
   * requests back: a connection with answers to send goes on `ready`
   * (guarded by ready_lock, with a reference) and `wake` (a source on the
   * loop thread polling wake_fd, an eventfd) is made ready. */
  GThreadPool *pool;
  GSource *wake;
  int wake_fd;
  gint wake_signaled; /* atomic: wake_fd written since the loop thread last read it */
  GMutex ready_lock;
  GQueue ready; /* FbRpcConn* */

  /* log/subscribe: one subscription to the access log fans out */
  guint log_subscription;
  GList *subscriptions; /* FbRpcSubscription* */
  guint next_subscription;
  bool subscribe_all; /* the operator's --subscribe-all: a subscription sees every session's records */
  bool in_log_line;   /* on_log_line runs (the log's writer lock is held) */
  guint unsubscribe_idle;

  /* Fair shares (ipc-rpc-share.c).  clients, n_processes, retained and
   * finished: loop thread; n_handles: atomic. */
  FbRpcBudget budget;
  GHashTable *clients; /* key → FbRpcClient* (not owned: a client goes with its last reference) */
  gint n_handles;
  guint n_processes; /* running */
  gsize retained;    /* every process's retained output */
  GQueue finished;   /* FbRpcProcess*, finished ones, oldest first: forgotten first past a budget */
  guint retain_idle; /* enforces the retained-output budgets */

  /* The views processes run in (ipc-rpc-view.c), open ones, least
   * recently used first; closed after view_idle_ms without a process. */
  GQueue views;
  guint view_idle_ms;

  /* A launch helper started before its process/start (ipc-process.c,
   * "The spare helper"), loop thread: its pid (0: none), its socket, its
   * child watch while it waits, and the idle source that starts one. */
  GPid spare;
  int spare_sock;
  guint spare_watch;
  guint spare_idle;

  /* The ready sandbox (ipc-process-ready.c), loop thread: the one made
   * for the view last used (or NULL), the view the idle source makes the
   * next one for (a reference, or NULL), its network mode, and the timeout
   * that starts it. */
  FbRpcReady *ready_sandbox;
  FbRpcView *ready_sandbox_next;
  guint32 ready_sandbox_network;
  guint ready_sandbox_idle;
};

typedef struct
{
  char *id;
  FbRpcConn *conn;
  JsonObject *filter; /* NULL: everything */
  char *session;      /* the only session whose records it shows; NULL: every record (subscribe_all) */
} FbRpcSubscription;

/* References (atomic, in its box): the transport's (until
 * fb_rpc_conn_closed), the pool's while scheduled, `ready`'s. */
struct FbRpcConn
{
  FbRpcServer *server;
  const FbRpcTransportOps *ops;
  gpointer transport;
  uid_t peer_uid;
  gid_t peer_gid; /* the server's egid: creations happen as the server's group */
  char *peer_name;

  /* The output queue: char* messages, bounded by FB_RPC_QUEUE_MAX bytes. */
  GQueue out;
  gsize out_bytes;
  bool closing;

  bool initialize_requested;
  bool initialized;
  /* A refused resume: its answer is the connection's last; nothing after
   * it runs, and the connection closes once the answer is handed over. */
  bool close_after_answer;
  FbRpcClient *client;   /* a reference */
  FbRpcSession *session; /* attached session, or NULL */
  char *client_name;

  /* While a request runs: the text of its params.sandbox (in the received
   * frame, not NUL-terminated), or NULL. */
  const char *call_sandbox;
  gsize call_sandbox_len;
  FbRpcJsonReuse reuse; /* the last params.sandbox decoded (by whoever decodes the connection's messages) */

  /* Touched by whichever thread runs the connection's current request
   * (the pipeline's ordering makes that one thread at a time). */
  GHashTable *handles; /* handleId → FbRpcHandle* (fs/open) */
  GList *deferred;     /* FbRpcDeferred* (process/read long polls; loop thread) */
  guint n_subscriptions;

  /* The pipeline (ipc-rpc-pipeline.c).  `lock` guards jobs, job_bytes, answer_bytes,
   * scheduled and stopping; `cond` is signalled when a job finishes or the worker stops.
   * in_ready is guarded by the server's ready_lock. */
  GMutex lock;
  GCond cond;
  GQueue jobs;        /* FbRpcJob*, in the order received; finished ones leave from the head */
  gsize job_bytes;    /* received bytes of the jobs, and their answers not yet sent */
  gsize answer_bytes; /* the answers alone */
  bool scheduled;     /* on the pool, or running there */
  bool stopping;      /* the worker takes no further job */
  bool in_ready;
  guint cond_waiters; /* threads in g_cond_wait (&cond): broadcast only for them (lock) */
  bool gone;          /* loop thread: fb_rpc_conn_closed has run */
};

struct FbRpcSession
{
  FbRpcServer *server;
  char *id;              /* public: in the access log, log/event, the calls' records */
  char *secret;          /* FB_RPC_SESSION_SECRET_BYTES, hex: only the client that made it ever sees it */
  FbRpcClient *client;   /* the one that made it (a reference): its processes and output count there */
  FbRpcConn *conn;       /* NULL while detached */
  guint expire_id;       /* detach timer */
  GHashTable *processes; /* processId → FbRpcProcess* */
  gsize retained;        /* its processes' retained output (ipc-process.c) */
  /* The last FB_RPC_FORGOTTEN_MAX finished processes forgotten (for the
   * retained output's budget, or for a new one past FB_RPC_PROCESSES_MAX):
   * process/read says so and why, rather than "unknown". */
  GHashTable *forgotten;  /* processId (owned by forgotten_order) → why (ipc-process.c) */
  GQueue forgotten_order; /* char*, oldest first */
  /* The views its processes share, one per effective policy (its JSON
   * text → FbRpcView*, which holds the key): ipc-rpc-view.c */
  GHashTable *views;
  /* Its share of the log's budget (a group's: ipc-log.c), or NULL: its
   * fs/... calls' records, and its processes' and views' shares are its
   * parts.  Reached, its processes are stopped and its calls refused. */
  FbAccessShare *log_share;
  bool freeing; /* fb_rpc_session_free runs: its views' last records may reach the share */
};

/* Decode one JSON text (ipc-rpc-json.c); NULL with *ret_error (may be
 * NULL) naming what is wrong and where. */
JsonNode *fb_rpc_json_parse (const char *text, gsize len, char **ret_error);
void fb_rpc_json_reuse_clear (FbRpcJsonReuse *reuse);

/* The same, and *ret_sandbox / *ret_sandbox_len: the text of the value of
 * params.sandbox in TEXT (NULL when there is none), which the tree holds
 * decoded.  REUSE (may be NULL) is used and updated. */
JsonNode *fb_rpc_json_parse_message (const char *text, gsize len, FbRpcJsonReuse *reuse, const char **ret_sandbox,
                                     gsize *ret_sandbox_len, char **ret_error);
/* Test seam (the fuzzer compares both): messages are decoded by
 * fb_rpc_json_parse, else by json-glib's parser.  Default true. */
extern bool fb_rpc_parse_fast;

/* --- messages (ipc-rpc-wire.c), running them (ipc-rpc-dispatch.c) ----------- */

/* fb_rpc_message_parse, with DATA known to be UTF-8 when UTF8_CHECKED, and
 * REUSE (may be NULL) used and updated for params.sandbox. */
bool fb_rpc_message_parse_reuse (const char *data, gsize len, bool utf8_checked, FbRpcJsonReuse *reuse,
                                 FbRpcMessage *ret, int *ret_code, char **ret_message, JsonNode **ret_id);
/* Run (and answer) a decoded request or notification, on the thread that
 * called. */
void fb_rpc_conn_run_message (FbRpcConn *conn, FbRpcMessage *msg);
/* Does the method NAME run on a worker (the method table says)?  Any
 * thread. */
bool fb_rpc_method_on_worker (const char *name);

/* --- the pipeline (ipc-rpc-pipeline.c) ------------------------------------- */

/* Loop thread: run (and answer) every request CONN received so far, waiting
 * for its worker as needed.  For tests and the fuzzer, which want answers
 * at once; the server itself waits only at the bound on queued requests. */
/* Wait on conn->cond, under conn->lock (the worker signals only waiters). */
void fb_rpc_conn_cond_wait_locked (FbRpcConn *conn);
void fb_rpc_conn_wait_idle (FbRpcConn *conn);
/* On a worker running one of CONN's requests: keep TEXT (taken) with the
 * request and return true; anywhere else false. */
bool fb_rpc_conn_capture_answer (FbRpcConn *conn, char *text);
/* A reference more; dropping the last frees CONN (fb_rpc_conn_closed has
 * run). */
FbRpcConn *fb_rpc_conn_ref (FbRpcConn *conn);
void fb_rpc_conn_unref (FbRpcConn *conn);
/* fb_rpc_server_new / _free: the ready queue, the wake source and the
 * worker pool. */
void fb_rpc_server_pipeline_init (FbRpcServer *server);
void fb_rpc_server_pipeline_clear (FbRpcServer *server);

/* --- replies (ipc-rpc-conn.c), parameters (ipc-rpc-wire.c) ------------------ */

/* Queue TEXT (taken) for CONN; a client whose queue passes FB_RPC_QUEUE_MAX
 * is disconnected as a slow reader.  On a worker, while it runs one of
 * CONN's requests, the text is kept with the request and sent in its turn
 * by the loop thread. */
void fb_rpc_conn_send (FbRpcConn *conn, char *text);
/* The same for TEXT known to be UTF-8 (fb_rpc_encode_result_base64's):
 * not scanned again. */
void fb_rpc_conn_send_utf8 (FbRpcConn *conn, char *text);
void fb_rpc_conn_reply (FbRpcConn *conn, JsonNode *id, JsonNode *result);
void fb_rpc_conn_reply_error (FbRpcConn *conn, JsonNode *id, FbRpcError *error);
void fb_rpc_conn_notify (FbRpcConn *conn, const char *method, JsonNode *params);
/* The caller the view logs for CONN's calls. */
void fb_rpc_conn_get_caller (FbRpcConn *conn, FbViewCaller *ret_caller);

/* A method: returns the result (owned), or NULL with ERROR set, or NULL
 * with *ret_deferred = true when it will answer later itself (which it
 * may also do at once, with fb_rpc_conn_reply*, to skip building a
 * JsonNode for a large answer). */
typedef JsonNode *(*FbRpcMethodFunc) (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error,
                                      bool *ret_deferred);

/* Parameter readers: false with ERROR set (-32602 naming the member) when
 * the member has the wrong type, or is missing and REQUIRED. */
bool fb_rpc_param_string (JsonObject *params, const char *name, bool required, const char **ret, FbRpcError *error);
bool fb_rpc_param_bool (JsonObject *params, const char *name, bool fallback, bool *ret, FbRpcError *error);
bool fb_rpc_param_uint (JsonObject *params, const char *name, bool required, guint64 fallback, guint64 *ret,
                        FbRpcError *error);
/* A path member: a file:// URI or an absolute path. */
bool fb_rpc_param_path (JsonObject *params, const char *name, char **ret, FbRpcError *error);
/* Decode standard base64 strictly (Rust's STANDARD engine: padding
 * required, no whitespace). */
bool fb_rpc_base64_decode (const char *text, guint8 **ret, gsize *ret_len);
/* Standard padded base64 of DATA into OUT (room for 4 * ceil(LEN / 3)
 * bytes); returns the length written. */
gsize fb_rpc_base64_encode_to (const guint8 *data, gsize len, char *out);

/* --- log/... (ipc-rpc-log.c) ------------------------------------------------ */

JsonNode *fb_rpc_log_subscribe (FbRpcConn *, JsonNode *, JsonObject *, FbRpcError *, bool *);
JsonNode *fb_rpc_log_unsubscribe (FbRpcConn *, JsonNode *, JsonObject *, FbRpcError *, bool *);
/* A connection is gone: end its subscriptions. */
void fb_rpc_log_conn_closed (FbRpcConn *conn);

/* --- sandboxes (ipc-rpc-sandbox.c) ------------------------------------------ */

/* What the view decided against a call: filled by the tee sink while the
 * call runs, from the events of the calling thread. */
typedef struct
{
  bool denied;
  char *path;
  const char *access;
  FbDecision decision;
  int err;
  char *rule; /* "3", "protected", "default" */
  char *rule_origin;
  char *why;
} FbRpcDenial;

void fb_rpc_denial_clear (FbRpcDenial *denial);

/* The view for a call's `sandbox` member (NULL: the server's own policy):
 * cached per distinct sandbox.  A new reference (fb_rpc_sandbox_unref):
 * another thread's lookup may evict it from the cache meanwhile.  Any
 * thread.  Its private sources are the server's. */
FbRpcSandbox *fb_rpc_sandbox_lookup (FbRpcServer *server, JsonNode *sandbox, FbRpcError *error);
/* The same for SESSION's calls (NULL: as above): its private sources are
 * the session's, and the cache keeps its views apart; with TEXT (LEN
 * bytes): the JSON text SANDBOX was decoded from, or NULL.  The cache is
 * then keyed by the text itself instead of the tree serialized again
 * (which cost 5% of an fs call). */
FbRpcSandbox *fb_rpc_sandbox_lookup_text (FbRpcServer *server, FbRpcSession *session, JsonNode *sandbox,
                                          const char *text, gsize len, FbRpcError *error);
FbView *fb_rpc_sandbox_get_view (FbRpcSandbox *sandbox);
FbPolicy *fb_rpc_sandbox_get_policy (FbRpcSandbox *sandbox);
/* Capture the first denial of the view's events on this thread until end. */
void fb_rpc_sandbox_begin (FbRpcSandbox *sandbox, FbRpcDenial *denial);
void fb_rpc_sandbox_end (FbRpcSandbox *sandbox);
/* The server's policy narrowed by SANDBOX (new reference; NULL + ERROR). */
FbPolicy *fb_rpc_sandbox_build_policy (FbRpcServer *server, JsonNode *sandbox, FbRpcError *error);
/* Sandboxes are reference-counted: the cache may drop one that an fs/open
 * handle still reads through.  _unref drops a reference. */
FbRpcSandbox *fb_rpc_sandbox_ref (FbRpcSandbox *sandbox);
void fb_rpc_sandbox_unref (FbRpcSandbox *sandbox);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbRpcSandbox, fb_rpc_sandbox_unref)
void fb_rpc_server_clear_sandboxes (FbRpcServer *server);

/* A sink that forwards to NEXT and counts denials (any thread). */
typedef struct FbRpcTeeSink FbRpcTeeSink;
FbRpcTeeSink *fb_rpc_tee_sink_new (FbAccessSink *next);
/* Events without a session get SESSION (copied; set before the view is
 * used): a process's accesses are its session's records. */
void fb_rpc_tee_sink_set_session (FbRpcTeeSink *tee, const char *session);
FbAccessSink *fb_rpc_tee_sink_get (FbRpcTeeSink *tee);
guint fb_rpc_tee_sink_get_denials (FbRpcTeeSink *tee);
void fb_rpc_tee_sink_free (FbRpcTeeSink *tee);

/* Turn a view errno (+ the denial seen) into an error answer. */
void fb_rpc_error_from_errno (FbRpcError *error, int err, const FbRpcDenial *denial, const char *what,
                              const char *path);

/* policy/explain */
JsonNode *fb_rpc_policy_explain (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error,
                                 bool *ret_deferred);

/* --- fs/... (ipc-fsapi.c) ----------------------------------------------------- */

/* The fs/... methods, one X (wire name, handler's name after fb_rpc_fs_,
 * the members of params it reads) each.  The one list declares the
 * handlers here and fills the dispatch table (ipc-rpc-dispatch.c), where
 * all of them are the "filesystem" family and run on a worker: they touch
 * only the view and the connection's own fs/open handles. */
#define FB_RPC_FS_METHODS(X)                                                                                           \
  X ("fs/readFile", read_file, "path", "sandbox")                                                                      \
  X ("fs/writeFile", write_file, "path", "dataBase64", "sandbox")                                                      \
  X ("fs/createDirectory", create_directory, "path", "recursive", "sandbox")                                           \
  X ("fs/getMetadata", get_metadata, "path", "sandbox")                                                                \
  X ("fs/canonicalize", canonicalize, "path", "sandbox")                                                               \
  X ("fs/readDirectory", read_directory, "path", "sandbox")                                                            \
  X ("fs/walk", walk, "path", "options", "sandbox")                                                                    \
  X ("fs/remove", remove, "path", "recursive", "force", "sandbox")                                                     \
  X ("fs/copy", copy, "sourcePath", "destinationPath", "recursive", "sandbox")                                         \
  X ("fs/open", open, "handleId", "path", "sandbox")                                                                   \
  X ("fs/readBlock", read_block, "handleId", "offset", "len")                                                          \
  X ("fs/close", close, "handleId")

#define FB_RPC_FS_DECLARE(wire, name, ...)                                                                             \
  JsonNode *fb_rpc_fs_##name (FbRpcConn *, JsonNode *, JsonObject *, FbRpcError *, bool *);
FB_RPC_FS_METHODS (FB_RPC_FS_DECLARE)
#undef FB_RPC_FS_DECLARE

/* Close every fs/open handle of CONN. */
void fb_rpc_fs_close_all (FbRpcConn *conn);

/* --- fair shares (ipc-rpc-share.c) ------------------------------------------ */

/* The server's budgets, from ipc-rpc.h's bounds and the descriptor limit. */
void fb_rpc_server_budget_init (FbRpcServer *server);
/* A client's share of TOTAL: 1/FB_RPC_CLIENT_SHARE of it, at least 1. */
guint fb_rpc_share (guint total);
/* KEY's client, made at its first use; a new reference. */
FbRpcClient *fb_rpc_client_get (FbRpcServer *server, const char *key);
void fb_rpc_client_unref (FbRpcClient *client);
/* May KEY open one more connection?  false with *RET_WHY (for people: the
 * limit and what to do) when it or the server is at its bound. */
bool fb_rpc_client_may_connect (FbRpcServer *server, const char *key, char **ret_why);
/* An fs/open handle for CONN (any thread): false with ERROR naming the
 * limit past the connection's, its client's or the server's bound. */
bool fb_rpc_handle_claim (FbRpcConn *conn, FbRpcError *error);
void fb_rpc_handle_release (FbRpcClient *client);
/* A running process for SESSION: false with ERROR past its client's or the
 * server's bound. */
bool fb_rpc_process_claim (FbRpcSession *session, FbRpcError *error);
void fb_rpc_process_release (FbRpcClient *client);
/* The account of open files for a process SESSION starts, with its floor,
 * in its client's part (fs.h, Descriptors): false with ERROR naming the
 * limit when every floor the server keeps is taken. */
bool fb_rpc_process_fd_account (FbRpcSession *session, FbViewFdAccount **ret_account, FbRpcError *error);

/* --- sessions (ipc-session.c) ----------------------------------------------- */

/* initialize: a new session, or the one RESUME_ID ("ID.SECRET", as
 * fb_rpc_session_handle gave it) names when it is detached.  A refused
 * resume sets conn->close_after_answer. */
FbRpcSession *fb_rpc_session_attach (FbRpcServer *server, FbRpcConn *conn, const char *resume_id, FbRpcError *error);
/* What initialize tells the client as its sessionId: "ID.SECRET" (new). */
char *fb_rpc_session_handle (FbRpcSession *session);
/* The connection is gone: keep the session for the detach timeout. */
void fb_rpc_session_detach (FbRpcSession *session);
/* Has SESSION used up its share of the log's budget?  Then *ERROR says so:
 * its calls that log are refused. */
bool fb_rpc_session_log_refused (FbRpcSession *session, FbRpcError *error);
void fb_rpc_session_free (FbRpcSession *session);

/* --- a session's views (ipc-rpc-view.c) ----------------------------------------- */

/* SESSION's view for processes under POLICY (their effective policy): the
 * one they share, or a new one, whose keeper starts now; a new reference.
 * NULL with ERROR past the session's or the server's bound. */
FbRpcView *fb_rpc_view_get (FbRpcSession *session, FbPolicy *policy, FbRpcError *error);
FbRpcView *fb_rpc_view_ref (FbRpcView *view);
void fb_rpc_view_unref (FbRpcView *view);
/* Ready: processes may join it (fb_rpc_view_get_namespaces: its user and
 * mount namespaces).  Failed: why, for a process that can't. */
bool fb_rpc_view_is_ready (FbRpcView *view);
const char *fb_rpc_view_get_failure (FbRpcView *view);
const int *fb_rpc_view_get_namespaces (FbRpcView *view);
/* P waits for VIEW to be ready or to fail, then fb_rpc_process_launch (P)
 * runs; unwait when P goes first. */
void fb_rpc_view_wait (FbRpcView *view, FbRpcProcess *p);
void fb_rpc_view_unwait (FbRpcView *view, FbRpcProcess *p);
/* A running process uses it (no idle timeout), until it releases it. */
void fb_rpc_view_use (FbRpcView *view);
void fb_rpc_view_release (FbRpcView *view);
/* The command in pid namespace PIDNS_FD is PROCESS_ID (fb_view_share_add). */
FbViewMember *fb_rpc_view_add_member (FbRpcView *view, int pidns_fd, const char *process_id,
                                      FbViewFdAccount *fd_account, FbAccessSink *sink, GDestroyNotify destroy,
                                      gpointer destroy_data, GError **error);
/* The session's client left: a ready sandbox for one of its views is
 * killed (the next may be long in coming, if ever). */
void fb_rpc_session_drop_ready (FbRpcSession *session);
/* The session is over: its views close. */
void fb_rpc_session_close_views (FbRpcSession *session);
/* Where SESSION's private sources live: RUN_DIR/sessions/ID. */
char *fb_rpc_session_private_root (FbRpcSession *session);

/* --- process/... (ipc-process.c) ---------------------------------------------- */

/* P's view is ready, or failed (fb_rpc_view_wait): start its sandbox, or
 * end it with the view's failure. */
void fb_rpc_process_launch (FbRpcProcess *p);
/* The spare launch helper, killed and reaped (the server's end). */
void fb_rpc_process_spare_stop (FbRpcServer *server);

/* --- the ready sandbox (ipc-process-ready.c) ---------------------------------- */

/* A little later, unless a process starts meanwhile (fb_rpc_ready_take): a
 * ready sandbox for VIEW and NETWORK (the spec's 0 none, 1 host, 2
 * allowlist), in place of one for another. */
void fb_rpc_ready_schedule (FbRpcServer *server, FbRpcView *view, guint32 network);
/* The ready sandbox for VIEW and NETWORK, if one said READY and lives: its
 * helper's pid and socket, its pid namespace and its proxy's socket (or
 * -1), no longer the server's.  False: none; one that died, is for
 * another view or network mode, or is not made yet is killed. */
bool fb_rpc_ready_take (FbRpcServer *server, FbRpcView *view, guint32 network, GPid *ret_pid, int *ret_sock,
                        int *ret_pidns, int *ret_proxy_fd);
/* VIEW ends: its ready sandbox, if any, killed and reaped. */
void fb_rpc_ready_drop_view (FbRpcServer *server, FbRpcView *view);
/* The server's end: no ready sandbox, and none to come. */
void fb_rpc_ready_stop (FbRpcServer *server);

JsonNode *fb_rpc_process_start (FbRpcConn *, JsonNode *, JsonObject *, FbRpcError *, bool *);
JsonNode *fb_rpc_process_read (FbRpcConn *, JsonNode *, JsonObject *, FbRpcError *, bool *);
JsonNode *fb_rpc_process_write (FbRpcConn *, JsonNode *, JsonObject *, FbRpcError *, bool *);
JsonNode *fb_rpc_process_signal (FbRpcConn *, JsonNode *, JsonObject *, FbRpcError *, bool *);
JsonNode *fb_rpc_process_terminate (FbRpcConn *, JsonNode *, JsonObject *, FbRpcError *, bool *);
/* Stop every running process of SESSION in VIEW (its records of no
 * process are past their share; NULL: in every view, the session's are),
 * each saying WHY on its stderr. */
void fb_rpc_process_stop_view (FbRpcSession *session, FbRpcView *view, const char *why);
/* Kill and forget a process (session end). */
void fb_rpc_process_free (FbRpcProcess *process);
/* A connection is gone: cancel its long polls. */
void fb_rpc_process_cancel_deferred (FbRpcConn *conn);

/* --- the `sandbox` parameter (ipc-rpc-codex.c) --------------------------------- */

/* Codex's FileSystemSandboxContext (the exec-server's "sandbox" parameter)
 * translated into a policy object in our format, ready for
 * fb_policy_load_json().  Errors (FB_POLICY_ERROR) name the JSON path of the
 * offending field. */
JsonNode *fb_rpc_codex_translate (JsonNode *sandbox_context, const FbPolicyVars *vars, GError **error);
/* The members of a context the translation ignores (a newer client's, such
 * as Codex 0.171's policyContext), NULL-terminated, or NULL when there are
 * none.  Members inside `permissions` are never ignored: an unknown one is an
 * error of fb_rpc_codex_translate. */
char **fb_rpc_codex_ignored_members (JsonNode *sandbox_context);
/* Lexical normalization of an absolute path ("/a//b/./c/../d" → "/a/b/d"),
 * the form fb_policy_decide() wants: ".." never climbs above "/". */
char *fb_rpc_path_normalize (const char *path);

G_END_DECLS
