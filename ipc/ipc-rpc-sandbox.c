/* fusebox — a remote call's `sandbox`: from the parameter to a view.
 *
 * Every fs/... call and every process/start may carry a `sandbox`: Codex's
 * FileSystemSandboxContext (translated by fb_rpc_codex_translate), or
 * {"fuseboxPolicy": {...}} with a policy in our own format.  Either way the
 * result is applied with fb_policy_narrow() on top of the server's policy,
 * so a call can only narrow what the server allows, never widen it or remap
 * a host path (a `source` in the sandbox is refused by the narrowing).
 *
 * fs/... calls are served in this process through an FbView (never a helper
 * per call: that is what makes Codex's sandboxed fs calls slow), one view
 * per session and distinct sandbox, kept in an LRU of FB_RPC_VIEW_CACHE_MAX
 * entries keyed by the session's id and the sandbox's JSON text.  A
 * harness sends the same context with every call, so the cache turns each
 * call into a hash lookup.  A session's views show its own private HOME
 * and /tmp, those its processes share (ipc-rpc-view.c), not another
 * session's.
 *
 * Each view reports to a tee sink: it forwards every event to the access log
 * (so API accesses are logged exactly like FUSE accesses, with the session as
 * the caller) and, while a call runs, keeps the first denial of that call so
 * that the error answer can name the path, the rule and its reason (-32050).
 * The tee sink of a process's view (ipc-process.c) counts denials from the
 * FUSE threads for process/exited's sandboxDenied; that count is atomic.
 * A hidden name is neither counted nor kept (tee_push).
 * The capture is per thread: a view reports a call's events on the thread
 * that makes the call, and several threads (the loop thread, the workers
 * of different connections) may call through the same view at once.
 *
 * Threads: any.  The cache is guarded by the server's sandbox_lock; a
 * sandbox itself is immutable but for its atomic reference count. */
#include "ipc/ipc-rpc-private.h"
#include "policy/util.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

/* --- the tee sink ----------------------------------------------------------- */

struct FbRpcTeeSink
{
  FbAccessSink sink; /* first: the sink pointer is the tee pointer */
  FbAccessSink *next;
  gint denials;  /* atomic */
  char *session; /* set before the view is used, then read-only */
};

/* The call running on this thread: its tee and where its first denial goes
 * (fb_rpc_sandbox_begin .. _end). */
static __thread FbRpcTeeSink *capture_tee;
static __thread FbRpcDenial *capture;

static void
tee_push (FbAccessSink *sink, const FbAccessEvent *event)
{
  FbRpcTeeSink *tee = (FbRpcTeeSink *)sink;

  /* A hidden name is no denial to tell: the call answers as for a missing
   * name, and the view logs a hide only when the host holds the name, so
   * counting it (sandboxDenied) or keeping it as the call's denial (which
   * fs/remove's force then does not ignore) would tell the client, and
   * whoever it relays to, that the name exists.  The access log and
   * log/subscribe, the auditor's, still have the record. */
  if (fb_access_event_is_told_denial (event))
    {
      g_atomic_int_inc (&tee->denials);
      if (capture_tee == tee && !capture->denied)
        {
          FbRpcDenial *d = capture;
          char buf[16];
          d->denied = true;
          d->path = g_strdup (event->path);
          d->access = g_intern_string (event->access != NULL ? event->access : "");
          d->decision = event->decision;
          d->err = event->err;
          if (event->rule != NULL)
            {
              d->rule = g_strdup (fb_policy_rule_name (event->rule, buf));
              d->rule_origin = g_strdup (event->rule->origin);
              d->why = g_strdup (event->rule->why);
            }
        }
    }
  if (tee->session != NULL && event->session == NULL)
    {
      /* A process's accesses are its session's records (log/subscribe
       * shows a client its own session's). */
      FbAccessEvent e = *event;
      e.session = tee->session;
      fb_access_sink_push (tee->next, &e);
      return;
    }
  fb_access_sink_push (tee->next, event);
}

FbRpcTeeSink *
fb_rpc_tee_sink_new (FbAccessSink *next)
{
  FbRpcTeeSink *tee = g_new0 (FbRpcTeeSink, 1);

  tee->sink.push = tee_push;
  tee->next = next;
  return tee;
}

FbAccessSink *
fb_rpc_tee_sink_get (FbRpcTeeSink *tee)
{
  return &tee->sink;
}

guint
fb_rpc_tee_sink_get_denials (FbRpcTeeSink *tee)
{
  return (guint)g_atomic_int_get (&tee->denials);
}

void
fb_rpc_tee_sink_set_session (FbRpcTeeSink *tee, const char *session)
{
  g_free (tee->session);
  tee->session = g_strdup (session);
}

void
fb_rpc_tee_sink_free (FbRpcTeeSink *tee)
{
  if (tee == NULL)
    return;
  g_free (tee->session);
  g_free (tee);
}

void
fb_rpc_denial_clear (FbRpcDenial *denial)
{
  g_clear_pointer (&denial->path, g_free);
  g_clear_pointer (&denial->rule, g_free);
  g_clear_pointer (&denial->rule_origin, g_free);
  g_clear_pointer (&denial->why, g_free);
  denial->denied = false;
}

/* --- errors ----------------------------------------------------------------- */

void
fb_rpc_error_from_errno (FbRpcError *error, int err, const FbRpcDenial *denial, const char *what, const char *path)
{
  g_autofree char *os = fb_rpc_os_error_message (err);

  if (denial != NULL && denial->denied && fb_decision_info (denial->decision)->told &&
      (err == EACCES || err == EROFS || err == EPERM))
    {
      /* A policy denial: its own code, the OS wording kept in the message so
       * that a client classifying Codex's messages still understands it. */
      g_autoptr (JsonBuilder) b = json_builder_new ();
      json_builder_begin_object (b);
      fb_json_builder_add_string_member (b, "path", denial->path);
      fb_json_builder_add_string_member (b, "access", denial->access);
      fb_json_builder_add_string_member (b, "decision", fb_decision_to_string (denial->decision));
      fb_json_builder_add_string_member (b, "rule", denial->rule != NULL ? denial->rule : "");
      fb_json_builder_add_string_member (b, "ruleOrigin", denial->rule_origin != NULL ? denial->rule_origin : "");
      fb_json_builder_add_string_member (b, "why", denial->why != NULL ? denial->why : "");
      fb_json_builder_add_int_member (b, "errno", err);
      json_builder_end_object (b);
      fb_rpc_error_set (error, FB_RPC_ERROR_POLICY_DENIED, "%s", os);
      error->data = json_builder_get_root (b);
      return;
    }
  /* Codex's mapping of io::ErrorKind: NotFound → -32004, InvalidInput and
   * PermissionDenied → -32600, anything else → -32603. */
  switch (err)
    {
      case ENOENT:
        fb_rpc_error_set (error, FB_RPC_ERROR_NOT_FOUND, "%s", os);
        break;
      case EINVAL:
      case EACCES:
      case EPERM:
        fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "%s", os);
        break;
      default:
        fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "%s", os);
        break;
    }
}

/* --- sandboxes -------------------------------------------------------------- */

/* References (atomic, in its box): the cache holds one; each call and each
 * fs/open handle one (its view's sink is our tee). */
struct FbRpcSandbox
{
  char *key;  /* NULL for the server's own */
  gsize cost; /* strlen (key): what it counts in server->sandbox_bytes */
  FbPolicy *policy;
  FbView *view;
  FbRpcTeeSink *tee;
  FbAccessShare *log_share; /* its session's (a reference), which its records count against; or NULL */
  GList *lru_link;          /* server->sandbox_lock */
};

static void
sandbox_clear (FbRpcSandbox *sb)
{
  g_clear_pointer (&sb->view, fb_view_unref);
  g_clear_pointer (&sb->policy, fb_policy_unref);
  fb_rpc_tee_sink_free (sb->tee);
  g_clear_pointer (&sb->log_share, fb_access_share_unref);
  g_free (sb->key);
}

FB_DEFINE_REF_UNREF (fb_rpc_sandbox, FbRpcSandbox, sandbox_clear)

FbPolicy *
fb_rpc_sandbox_build_policy (FbRpcServer *server, JsonNode *sandbox, FbRpcError *error)
{
  g_autoptr (GError) gerr = NULL;
  g_autoptr (FbPolicy) narrow = NULL;
  g_autoptr (JsonNode) translated = NULL;
  JsonNode *policy_json;
  FbPolicy *result;

  if (sandbox == NULL || JSON_NODE_HOLDS_NULL (sandbox))
    return fb_policy_ref (server->policy);
  if (!JSON_NODE_HOLDS_OBJECT (sandbox))
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS,
                        "invalid params: `sandbox` must be a FileSystemSandboxContext object or {\"fuseboxPolicy\": "
                        "{...}}");
      return NULL;
    }
  policy_json = json_object_get_member (json_node_get_object (sandbox), "fuseboxPolicy");
  if (policy_json == NULL)
    {
      g_auto (GStrv) ignored = fb_rpc_codex_ignored_members (sandbox);
      translated = fb_rpc_codex_translate (sandbox, &server->vars.vars, &gerr);
      if (translated == NULL)
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: sandbox: %s", gerr->message);
          return NULL;
        }
      if (ignored != NULL)
        {
          /* A newer client's additions (Codex 0.171: policyContext): the
           * context is used without them.  Said when a sandbox is built,
           * not on every call that finds it in the cache. */
          g_autofree char *names = g_strjoinv (", ", ignored);
          g_debug ("sandbox: ignoring member(s) this server does not know: %s", names);
        }
      policy_json = translated;
    }
  narrow = fb_policy_load_json (policy_json, "<sandbox>", &server->vars.vars, &gerr);
  if (narrow == NULL)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: sandbox: %s", gerr->message);
      return NULL;
    }
  /* A rule's why is in every record the rule decides: a client's 12 MiB
   * one made each refusal a 12 MiB record. */
  {
    guint n;
    const FbPolicyRule *rules = fb_policy_get_rules (narrow, &n);

    for (guint i = 0; i < n; i++)
      if (strlen (rules[i].why) > FB_RPC_SANDBOX_WHY_MAX)
        {
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS,
                            "invalid params: sandbox: %s: `why` is %zu bytes long; at most %d", rules[i].origin,
                            strlen (rules[i].why), FB_RPC_SANDBOX_WHY_MAX);
          return NULL;
        }
  }
  result = fb_policy_narrow (server->policy, narrow, &gerr);
  if (result == NULL)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: sandbox: %s", gerr->message);
      return NULL;
    }
  return result;
}

static FbRpcSandbox *
sandbox_new (FbRpcServer *server, FbRpcSession *session, JsonNode *sandbox, FbRpcError *error)
{
  g_autoptr (FbPolicy) policy = fb_rpc_sandbox_build_policy (server, sandbox, error);
  g_autofree char *private_root = NULL;
  FbRpcSandbox *sb;
  FbViewOptions vo;
  int r;

  if (policy == NULL)
    return NULL;
  sb = g_atomic_rc_box_new0 (FbRpcSandbox);
  sb->policy = g_steal_pointer (&policy);
  /* A session's calls are its records: they count against its share of
   * the log's budget (they went to the log unshared, and one client's
   * fs/readFile loop stopped the server and every other client's
   * processes). */
  if (session != NULL && session->log_share != NULL)
    sb->log_share = fb_access_share_ref (session->log_share);
  sb->tee = fb_rpc_tee_sink_new (sb->log_share != NULL ? fb_access_share_get_sink (sb->log_share)
                                 : server->log != NULL ? fb_access_log_get_sink (server->log)
                                                       : NULL);
  fb_view_options_init (&vo);
  vo.sink = fb_rpc_tee_sink_get (sb->tee);
  vo.log_level = server->log_level;
  vo.hidden_paths = (const char *const *)server->hidden_paths;
  if (session != NULL && server->run_dir != NULL)
    vo.private_root = private_root = fb_rpc_session_private_root (session);
  vo.private_anchor_fd = server->run_dir_fd;
  vo.private_anchor = server->run_dir;
  r = fb_view_new (sb->policy, &vo, &sb->view);
  if (r < 0)
    {
      g_autofree char *why = fb_view_new_explain (r, server->run_dir);

      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL, "can't open the directories of the policy %s: %s",
                        fb_policy_get_origin (sb->policy), why);
      fb_rpc_sandbox_unref (sb);
      return NULL;
    }
  return sb;
}

FbRpcSandbox *
fb_rpc_sandbox_lookup (FbRpcServer *server, JsonNode *sandbox, FbRpcError *error)
{
  return fb_rpc_sandbox_lookup_text (server, NULL, sandbox, NULL, 0, error);
}

FbRpcSandbox *
fb_rpc_sandbox_lookup_text (FbRpcServer *server, FbRpcSession *session, JsonNode *sandbox, const char *text, gsize len,
                            FbRpcError *error)
{
  g_autofree char *key = NULL;
  FbRpcSandbox *sb, *made, *old = NULL;
  bool none = sandbox == NULL || JSON_NODE_HOLDS_NULL (sandbox);

  if (fb_rpc_session_log_refused (session, error))
    return NULL;
  if (none && session == NULL)
    {
      {
        g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&server->sandbox_lock);
        if (server->base != NULL)
          return fb_rpc_sandbox_ref (server->base);
      }
      made = sandbox_new (server, NULL, NULL, error);
      if (made == NULL)
        return NULL;
      g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&server->sandbox_lock);
      if (server->base == NULL)
        server->base = made;
      else
        old = made; /* another thread made it first */
      sb = fb_rpc_sandbox_ref (server->base);
      g_clear_pointer (&locker, g_mutex_locker_free);
      fb_rpc_sandbox_unref (old);
      return sb;
    }
  /* Two kinds of keys, kept apart by their first byte: the received text
   * ("t"), which decodes to exactly one tree, so equal texts are equal
   * sandboxes; or the tree serialized by json-glib ("j") when no text came
   * with it.  One sandbox may sit in the cache under both: two entries with
   * the same policy, never one entry for two policies.  A session's ("n":
   * no sandbox) come after its id, which holds no "\x1f". */
  if (none)
    key = g_strconcat (session->id, "\x1fn", NULL);
  else if (text != NULL)
    {
      gsize n = session != NULL ? strlen (session->id) + 1 : 0;
      key = g_malloc (n + len + 2);
      if (session != NULL)
        {
          memcpy (key, session->id, n - 1);
          key[n - 1] = '\x1f';
        }
      key[n] = 't';
      memcpy (key + n + 1, text, len);
      key[n + len + 1] = '\0';
    }
  else
    {
      g_autofree char *j = json_to_string (sandbox, FALSE);
      key = g_strconcat (session != NULL ? session->id : "", session != NULL ? "\x1f" : "", "j", j, NULL);
    }
  {
    g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&server->sandbox_lock);
    sb = g_hash_table_lookup (server->sandboxes, key);
    if (sb != NULL)
      {
        g_queue_unlink (&server->sandbox_lru, sb->lru_link);
        g_queue_push_tail_link (&server->sandbox_lru, sb->lru_link);
        return fb_rpc_sandbox_ref (sb);
      }
  }
  /* Built without the lock (it opens the policy's directories); another
   * thread may build the same one meanwhile, and then one of the two is
   * dropped. */
  made = sandbox_new (server, session, sandbox, error);
  if (made == NULL)
    return NULL;
  /* before the locker: freed after the lock is released */
  g_autoptr (GPtrArray) evicted = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_rpc_sandbox_unref);
  g_autoptr (GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new (&server->sandbox_lock);
  sb = g_hash_table_lookup (server->sandboxes, key);
  if (sb != NULL)
    old = made;
  else if (strlen (key) > FB_RPC_VIEW_CACHE_BYTES_MAX)
    {
      /* Its call (and its fs/open handles) use it; the cache does not
       * keep it, nor drop the others for it. */
      g_clear_pointer (&locker, g_mutex_locker_free);
      return made;
    }
  else
    {
      sb = made;
      sb->key = g_steal_pointer (&key);
      sb->cost = strlen (sb->key);
      /* The least recently used views leave the cache, for the count
       * and for the bytes (64 sandboxes of 4 MiB each took 540 MiB): the
       * calls and fs/open handles still using them hold their own
       * references. */
      while (server->sandbox_lru.length > 0 && (g_hash_table_size (server->sandboxes) >= FB_RPC_VIEW_CACHE_MAX ||
                                                server->sandbox_bytes + sb->cost > FB_RPC_VIEW_CACHE_BYTES_MAX))
        {
          FbRpcSandbox *lru = g_queue_pop_head (&server->sandbox_lru);
          g_hash_table_remove (server->sandboxes, lru->key);
          server->sandbox_bytes -= lru->cost;
          lru->lru_link = NULL;
          g_ptr_array_add (evicted, lru);
        }
      server->sandbox_bytes += sb->cost;
      g_queue_push_tail (&server->sandbox_lru, sb);
      sb->lru_link = g_queue_peek_tail_link (&server->sandbox_lru);
      g_hash_table_insert (server->sandboxes, sb->key, sb);
    }
  fb_rpc_sandbox_ref (sb);
  g_clear_pointer (&locker, g_mutex_locker_free);
  fb_rpc_sandbox_unref (old);
  return sb;
}

void
fb_rpc_server_clear_sandboxes (FbRpcServer *server)
{
  FbRpcSandbox *sb;

  /* At the end: no worker runs any more. */
  while ((sb = g_queue_pop_head (&server->sandbox_lru)) != NULL)
    {
      g_hash_table_remove (server->sandboxes, sb->key);
      fb_rpc_sandbox_unref (sb);
    }
  g_clear_pointer (&server->base, fb_rpc_sandbox_unref);
}

FbView *
fb_rpc_sandbox_get_view (FbRpcSandbox *sandbox)
{
  return sandbox->view;
}

FbPolicy *
fb_rpc_sandbox_get_policy (FbRpcSandbox *sandbox)
{
  return sandbox->policy;
}

void
fb_rpc_sandbox_begin (FbRpcSandbox *sandbox, FbRpcDenial *denial)
{
  capture_tee = sandbox->tee;
  capture = denial;
}

void
fb_rpc_sandbox_end (FbRpcSandbox *sandbox)
{
  capture_tee = NULL;
  capture = NULL;
}

/* --- policy/explain --------------------------------------------------------- */

/* {host, port?}: how the network decides a connection there, the
 * allowlist's entry and its why (the call's sandbox narrows as for paths:
 * both sides must allow). */
static JsonNode *
explain_host (FbRpcSandbox *sb, JsonObject *params, FbRpcError *error)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  const char *host = NULL;
  guint64 port = 443;
  FbPolicyNetDecision d;

  if (!fb_rpc_param_string (params, "host", true, &host, error) ||
      !fb_rpc_param_uint (params, "port", false, 443, &port, error))
    return NULL;
  fb_policy_net_decide (sb->policy, host, port <= 65535 ? (guint)port : 0, &d);
  if (d.allowed && fb_policy_get_network (sb->policy) == FB_POLICY_NETWORK_ALLOWLIST)
    {
      /* an address is checked as the proxy checks it: 0.0.0.0/0 allows
       * 127.0.0.1 by its entry, the address check refuses it (loopback) */
      g_autofree char *norm = fb_policy_net_host_normalize (host);
      g_autoptr (GInetAddress) a = norm != NULL ? g_inet_address_new_from_string (norm) : NULL;

      if (a != NULL)
        {
          FbPolicyNetDecision by_name = d;

          fb_policy_net_check_address (sb->policy, &by_name,
                                       g_inet_address_get_family (a) == G_SOCKET_FAMILY_IPV4 ? AF_INET : AF_INET6,
                                       g_inet_address_to_bytes (a), (guint)port, &d);
        }
    }
  json_builder_begin_object (b);
  fb_json_builder_add_string_member (b, "host", host);
  fb_json_builder_add_int_member (b, "port", (gint64)port);
  fb_json_builder_add_string_member (b, "network", fb_policy_network_to_string (fb_policy_get_network (sb->policy)));
  fb_json_builder_add_string_member (b, "decision", d.allowed ? "allow" : "deny");
  fb_json_builder_add_string_member (b, "rule", d.rule->name);
  fb_json_builder_add_string_member (b, "ruleOrigin", d.rule->origin);
  fb_json_builder_add_string_member (b, "ruleText", d.rule->text);
  fb_json_builder_add_string_member (b, "why", d.rule->why);
  fb_json_builder_add_string_member (b, "policy", fb_policy_get_origin (sb->policy));
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

JsonNode *
fb_rpc_policy_explain (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  g_autofree char *raw = NULL;
  g_autofree char *path = NULL;
  g_autofree char *uri = NULL;
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (FbRpcSandbox) sb = NULL;
  FbPolicyDecision d;
  char buf[16];

  if (json_object_has_member (params, "host") && json_object_has_member (params, "path"))
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: give \"path\" or \"host\", not both");
      return NULL;
    }
  if (!json_object_has_member (params, "host") && !fb_rpc_param_path (params, "path", &raw, error))
    return NULL;
  sb = fb_rpc_sandbox_lookup_text (conn->server, conn->session, json_object_get_member (params, "sandbox"),
                                   conn->call_sandbox, conn->call_sandbox_len, error);
  if (sb == NULL)
    return NULL;
  if (raw == NULL)
    return explain_host (sb, params, error);
  path = fb_rpc_path_normalize (raw);
  fb_policy_decide (sb->policy, path, &d);
  uri = fb_rpc_path_to_uri (path);

  json_builder_begin_object (b);
  fb_json_builder_add_string_member (b, "path", uri);
  fb_json_builder_add_string_member (b, "access", fb_policy_access_to_string (d.access));
  json_builder_set_member_name (b, "traversable");
  json_builder_add_boolean_value (b, d.traversable);
  fb_json_builder_add_string_member (b, "rule", fb_policy_rule_name (d.rule, buf));
  fb_json_builder_add_string_member (b, "ruleOrigin", d.rule->origin != NULL ? d.rule->origin : "");
  json_builder_set_member_name (b, "rulePath");
  if (d.rule->path != NULL)
    json_builder_add_string_value (b, d.rule->path);
  else if (d.rule->glob != NULL)
    json_builder_add_string_value (b, d.rule->glob);
  else
    json_builder_add_null_value (b);
  fb_json_builder_add_string_member (b, "why", d.rule->why);
  json_builder_set_member_name (b, "mount");
  json_builder_begin_object (b);
  fb_json_builder_add_string_member (b, "viewPath", d.mount->view_path);
  fb_json_builder_add_string_member (b, "hostPath", d.mount->host_path);
  json_builder_end_object (b);
  fb_json_builder_add_string_member (b, "policy", fb_policy_get_origin (sb->policy));
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
