/* fusebox — the remote API's dispatch: the method table, the handshake
 * (`initialize` once, then the `initialized` notification, then the other
 * methods, as Codex's exec-server wants), and running one decoded request
 * or notification.
 *
 * Runs on the thread that runs the connection's current request: the loop
 * thread, or a worker for the methods that run there (ipc-rpc-pipeline.c). */
#include "ipc/ipc-rpc-private.h"
#include "policy/util.h"

#include "fusebox-config.h"

#include <string.h>

/* --- the handshake ---------------------------------------------------------- */

static const char *
default_shell (void)
{
  if (g_file_test ("/bin/bash", G_FILE_TEST_IS_EXECUTABLE))
    return "/bin/bash";
  return "/bin/sh";
}

/* Optional features a Codex 0.171 executor advertises; fusebox implements
 * none of them (file streaming, fs watches, network proxies, ...). */
static const char *const codex_capabilities[] = {
  "capabilityDiscoverySandbox",
  "capabilityDiscoveryV2",
  "credentialMasking",
  "credentialMaskingCustomProviders",
  "environmentConfigRead",
  "fileWriteStreaming",
  "fsWatchMissing",
  "httpHeaderEnvVars",
  "linuxApprovedRootWritePreservesRestrictions",
  "linuxRootWritePreservesDevices",
  "networkProxyLaunch",
  "networkProxyReviewDomains",
  "networkProxyTransparentTcp",
  "sandboxedFileStreaming",
  "shellSnapshotV2",
  "windowsMxc",
};

static JsonNode *
environment_info (FbRpcServer *server)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  const char *shell = default_shell ();
  g_autofree char *name = g_path_get_basename (shell);
  g_autofree char *cwd_uri = fb_rpc_path_to_uri (server->cwd);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "shell");
  json_builder_begin_object (b);
  fb_json_builder_add_string_member (b, "name", name);
  fb_json_builder_add_string_member (b, "path", shell);
  json_builder_end_object (b);
  fb_json_builder_add_string_member (b, "executorVersion", "fusebox " FUSEBOX_VERSION);
  fb_json_builder_add_string_member (b, "cwd", cwd_uri);
  /* Members of Codex 0.171's environmentInfo, so that a harness reading
   * them finds them: the capabilities fusebox lacks say so. */
  fb_json_builder_add_string_member (b, "platformOs", "linux");
  /* Paths in environmentInfo are URIs, as everywhere in the protocol:
   * Codex parses them as such and, failing, treats the executor as
   * unusable. */
  fb_json_builder_add_string_member (b, "tempDir", "file:///tmp");
  json_builder_set_member_name (b, "temporaryDirectories");
  json_builder_begin_array (b);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "prependPathDirs");
  json_builder_begin_array (b);
  json_builder_end_array (b);
  fb_json_builder_add_string_member (b, "providerId", "fusebox");
  if (server->vars.vars.home != NULL)
    {
      g_autofree char *home_uri = fb_rpc_path_to_uri (server->vars.vars.home);
      fb_json_builder_add_string_member (b, "userHomeDir", home_uri);
    }
  json_builder_set_member_name (b, "capabilities");
  json_builder_begin_object (b);
  for (guint i = 0; i < G_N_ELEMENTS (codex_capabilities); i++)
    {
      json_builder_set_member_name (b, codex_capabilities[i]);
      json_builder_add_boolean_value (b, FALSE);
    }
  json_builder_end_object (b);
  fb_json_builder_add_string_member (b, "sandboxType", "fusebox");
  fb_json_builder_add_string_member (b, "policy", fb_policy_get_origin (server->policy));
  if (server->run_dir != NULL)
    fb_json_builder_add_string_member (b, "runDir", server->run_dir);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static JsonNode *
method_initialize (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  const char *client_name, *resume_id;
  FbRpcSession *session;
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autofree char *handle = NULL;

  if (conn->initialize_requested)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "initialize may only be sent once per connection");
      return NULL;
    }
  if (!fb_rpc_param_string (params, "clientName", true, &client_name, error) ||
      !fb_rpc_param_string (params, "resumeSessionId", false, &resume_id, error))
    return NULL;
  session = fb_rpc_session_attach (conn->server, conn, resume_id, error);
  if (session == NULL)
    return NULL;
  conn->initialize_requested = true;
  conn->session = session;
  g_free (conn->client_name);
  conn->client_name = g_strndup (client_name, 64);

  /* The secret is in what the client resumes with (ipc-session.c), and in
   * no other answer, record or message. */
  handle = fb_rpc_session_handle (session);
  json_builder_begin_object (b);
  fb_json_builder_add_string_member (b, "sessionId", handle);
  json_builder_set_member_name (b, "environmentInfo");
  json_builder_add_value (b, environment_info (conn->server));
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static JsonNode *
method_environment_info (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  return environment_info (conn->server);
}

/* --- dispatch --------------------------------------------------------------- */

/* Which thread runs a method (ipc-rpc-pipeline.c).  ON_WORKER: it touches
 * only the view and the connection's own fs/open handles.  ON_LOOP: it
 * touches the loop's sources, the transports or the server's tables. */
typedef enum
{
  ON_LOOP,
  ON_WORKER,
} MethodThread;

typedef struct
{
  const char *name;
  FbRpcMethodFunc func;
  const char *family;        /* for "must initialize" messages; NULL: callable before */
  MethodThread thread;       /* where it runs */
  const char *const *params; /* the members of params it reads */
} Method;

/* The members a method reads, NULL-terminated. */
#define P(...) ((const char *const[]){ __VA_ARGS__ })

static const Method methods[] = {
  { "initialize", method_initialize, NULL, ON_LOOP, P ("clientName", "resumeSessionId", NULL) },
  { "environment/info", method_environment_info, "environment", ON_LOOP, P (NULL) },
  { "process/start", fb_rpc_process_start, "exec", ON_LOOP,
    P ("processId", "argv", "cwd", "env", "envPolicy", "tty", "pipeStdin", "arg0", "sandbox", "enforceManagedNetwork",
       "managedNetwork", NULL) },
  { "process/read", fb_rpc_process_read, "exec", ON_LOOP, P ("processId", "afterSeq", "maxBytes", "waitMs", NULL) },
  { "process/write", fb_rpc_process_write, "exec", ON_LOOP, P ("processId", "chunk", "writeId", NULL) },
  { "process/signal", fb_rpc_process_signal, "exec", ON_LOOP, P ("processId", "signal", NULL) },
  { "process/terminate", fb_rpc_process_terminate, "exec", ON_LOOP, P ("processId", NULL) },
  { "log/subscribe", fb_rpc_log_subscribe, "log", ON_LOOP, P ("filter", NULL) },
  { "log/unsubscribe", fb_rpc_log_unsubscribe, "log", ON_LOOP, P ("subscriptionId", NULL) },
  { "policy/explain", fb_rpc_policy_explain, "policy", ON_LOOP, P ("path", "host", "port", "sandbox", NULL) },
#define FS_METHOD(wire, name, ...) { wire, fb_rpc_fs_##name, "filesystem", ON_WORKER, P (__VA_ARGS__, NULL) },
  FB_RPC_FS_METHODS (FS_METHOD)
#undef FS_METHOD
};

#undef P

static const Method *
find_method (const char *name)
{
  for (guint i = 0; i < G_N_ELEMENTS (methods); i++)
    if (strcmp (methods[i].name, name) == 0)
      return &methods[i];
  return NULL;
}

bool
fb_rpc_method_on_worker (const char *name)
{
  const Method *m = find_method (name);

  return m != NULL && m->thread == ON_WORKER;
}

/* A newer client may send members this server does not know (Codex 0.171:
 * process/start's `metadata`): they are ignored, as Codex's own serde
 * structs ignore them, and said so at debug level (G_MESSAGES_DEBUG=fusebox).
 * The members it knows keep their strict types. */
static void
debug_unknown_params (const Method *m, JsonObject *params)
{
  JsonObjectIter iter;
  const char *key;

  if (params == NULL || g_log_writer_default_would_drop (G_LOG_LEVEL_DEBUG, G_LOG_DOMAIN))
    return;
  json_object_iter_init (&iter, params);
  while (json_object_iter_next (&iter, &key, NULL))
    if (!g_strv_contains (m->params, key))
      g_debug ("%s: ignoring the member `%s` of its params (not known to this server)", m->name, key);
}

static void
handle_request (FbRpcConn *conn, FbRpcMessage *msg)
{
  const Method *m = find_method (msg->method);
  FbRpcError error = { 0 };
  JsonNode *result = NULL;
  bool deferred = false;

  /* After a refused resume nothing runs: what the client sent behind it
   * (it may have sent initialized and calls at once) goes unanswered. */
  if (conn->close_after_answer)
    return;
  if (m == NULL)
    fb_rpc_error_set (&error, FB_RPC_ERROR_METHOD_NOT_FOUND, "unknown method `%s`", msg->method);
  else if (m->family != NULL && !conn->initialize_requested)
    fb_rpc_error_set (&error, FB_RPC_ERROR_INVALID_REQUEST, "client must call initialize before using %s methods",
                      m->family);
  else if (m->family != NULL && (conn->session == NULL || conn->session->conn != conn))
    fb_rpc_error_set (&error, FB_RPC_ERROR_INVALID_REQUEST, "session has been resumed by another connection");
  else if (m->family != NULL && !conn->initialized)
    fb_rpc_error_set (&error, FB_RPC_ERROR_INVALID_REQUEST, "client must send initialized before using %s methods",
                      m->family);
  else
    {
      debug_unknown_params (m, msg->params);
      conn->call_sandbox = msg->sandbox_text;
      conn->call_sandbox_len = msg->sandbox_len;
      result = m->func (conn, msg->id, msg->params, &error, &deferred);
      conn->call_sandbox = NULL;
      conn->call_sandbox_len = 0;
      if (result == NULL && !deferred && error.code == 0)
        fb_rpc_error_set (&error, FB_RPC_ERROR_INTERNAL, "%s failed", msg->method);
    }
  if (result != NULL)
    {
      fb_rpc_conn_reply (conn, msg->id, result);
      json_node_unref (result);
    }
  else if (!deferred)
    fb_rpc_conn_reply_error (conn, msg->id, &error);
  fb_rpc_error_clear (&error);
}

static void
handle_notification (FbRpcConn *conn, FbRpcMessage *msg)
{
  FbRpcError error = { 0 };

  if (conn->close_after_answer)
    return;
  if (strcmp (msg->method, "initialized") == 0)
    {
      if (!conn->initialize_requested)
        fb_rpc_error_set (&error, FB_RPC_ERROR_INVALID_REQUEST,
                          "received `initialized` notification before `initialize`");
      else
        conn->initialized = true;
    }
  else
    fb_rpc_error_set (&error, FB_RPC_ERROR_INVALID_REQUEST, "unexpected notification `%s`", msg->method);
  if (error.code != 0)
    fb_rpc_conn_reply_error (conn, NULL, &error);
  fb_rpc_error_clear (&error);
}

void
fb_rpc_conn_run_message (FbRpcConn *conn, FbRpcMessage *msg)
{
  if (msg->kind == FB_RPC_MESSAGE_REQUEST)
    handle_request (conn, msg);
  else
    handle_notification (conn, msg);
}
