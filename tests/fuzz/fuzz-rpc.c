/* fusebox — libFuzzer target for the remote API's message decoder and
 * dispatch.  Input: one message, or several separated by newlines (as on
 * the unix and stdio transports).  Each is decoded (fb_rpc_message_parse
 * must never crash and, on failure, name a code and a reason; what it
 * accepts, json-glib's parser must read the same when it accepts it), its strings
 * are run through the URI and base64 decoders, and the message is handed to
 * a connection of a real server (initialized, with a transport seam that
 * keeps nothing) so that every method's parameter checking runs, and the
 * fs methods run through the view.  The server's policy hides the whole
 * host but a small temporary tree, read-only, so the fuzzer can't write
 * anywhere or wander the disk; there is no launch helper (process/start
 * answers an error).  Seed corpus: fixtures/rpc/.
 *
 *   build-fuzz/tests/fuzz/fuzz-rpc -max_total_time=600 CORPUS fixtures/rpc
 */
#include "ipc/ipc-rpc-private.h"

#include <glib/gstdio.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FbRpcServer *server;
static FbRpcConn *conn;
static char *root;

static bool
seam_can_write (gpointer t)
{
  return true;
}

static void
seam_write (gpointer t, const char *text, gsize len)
{
  /* Every answer must be JSON text a client can parse. */
  g_autoptr (JsonNode) n = json_from_string (text, NULL);
  if (n == NULL || !JSON_NODE_HOLDS_OBJECT (n))
    abort ();
}

static void
seam_close (gpointer t, const char *reason)
{
}

static const FbRpcTransportOps seam_ops = { seam_can_write, seam_write, seam_close };

/* The fuzz tree goes with the process (libFuzzer ends by exit()): the
 * policy lets nothing be written in it, so it holds what setup made. */
static void
remove_tree (void)
{
  g_autofree char *file = g_build_filename (root, "a.txt", NULL);
  g_autofree char *sub = g_build_filename (root, "d", NULL);

  g_remove (file);
  g_rmdir (sub);
  g_rmdir (root);
}

static void
setup (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *policy_text = NULL;
  g_autofree char *file = NULL;
  g_autofree char *sub = NULL;
  g_autoptr (FbPolicy) policy = NULL;
  FbPolicyVars vars = { 0 };
  FbRpcServerOptions so = { 0 };
  static const char init[] = "{\"id\":0,\"method\":\"initialize\",\"params\":{\"clientName\":\"fuzz\"}}";
  static const char done[] = "{\"method\":\"initialized\"}";

  root = g_dir_make_tmp ("fusebox-fuzz-rpc-XXXXXX", NULL);
  if (root == NULL)
    abort ();
  atexit (remove_tree);
  file = g_build_filename (root, "a.txt", NULL);
  sub = g_build_filename (root, "d", NULL);
  g_file_set_contents (file, "fuzz", -1, NULL);
  g_mkdir (sub, 0755);
  vars.workspace = vars.cwd = vars.home = vars.run = root;
  policy_text = g_strdup_printf ("{\"version\":1,\"network\":\"none\",\"rules\":["
                                 "{\"path\":\"/\",\"access\":\"hide\",\"why\":\"nothing of the host\"},"
                                 "{\"path\":\"%s\",\"access\":\"read\",\"why\":\"the fuzz tree\"}]}",
                                 root);
  policy = fb_policy_load_data (policy_text, -1, "fuzz", &vars, &error);
  if (policy == NULL)
    {
      fprintf (stderr, "fuzz-rpc: %s\n", error->message);
      abort ();
    }
  so.policy = policy;
  so.vars = &vars;
  server = fb_rpc_server_new (&so, &error);
  if (server == NULL)
    abort ();
  conn = fb_rpc_server_accept (server, &seam_ops, NULL, getuid (), "fuzz");
  fb_rpc_conn_receive (conn, init, sizeof init - 1);
  fb_rpc_conn_receive (conn, done, sizeof done - 1);
  fb_rpc_conn_wait_idle (conn);
}

static void
visit_strings (JsonNode *node, guint depth)
{
  if (node == NULL || depth > 16)
    return;
  if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING)
    {
      const char *s = json_node_get_string (node);
      g_autofree char *why = NULL;
      g_autofree char *path = fb_rpc_path_from_uri (s, &why);
      g_autofree guint8 *bytes = NULL;
      gsize len;
      if (path == NULL && why == NULL)
        abort ();
      if (path != NULL)
        {
          g_autofree char *uri = fb_rpc_path_to_uri (path);
          g_autofree char *why2 = NULL;
          g_autofree char *back = fb_rpc_path_from_uri (uri, &why2);
          /* Encoding a path and decoding it again gives the path back. */
          if (back == NULL || strcmp (back, path) != 0)
            abort ();
        }
      if (fb_rpc_base64_decode (s, &bytes, &len))
        {
          g_autofree char *again = g_base64_encode (bytes, len);
          /* Only canonical base64 is accepted: it encodes back the same. */
          if (strcmp (again, s) != 0)
            abort ();
        }
    }
  else if (JSON_NODE_HOLDS_OBJECT (node))
    {
      g_autoptr (GList) members = json_object_get_values (json_node_get_object (node));
      for (GList *l = members; l != NULL; l = l->next)
        visit_strings (l->data, depth + 1);
    }
  else if (JSON_NODE_HOLDS_ARRAY (node))
    {
      JsonArray *a = json_node_get_array (node);
      for (guint i = 0; i < json_array_get_length (a); i++)
        visit_strings (json_array_get_element (a, i), depth + 1);
    }
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const char *p = (const char *)data;
  const char *end = p + size;

  if (server == NULL)
    setup ();
  while (p <= end)
    {
      const char *nl = memchr (p, '\n', (size_t)(end - p));
      size_t len = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
      FbRpcMessage msg;
      int code = 0;
      g_autofree char *why = NULL;
      g_autoptr (JsonNode) id = NULL;

      if (fb_rpc_message_parse (p, len, &msg, &code, &why, &id))
        {
          FbRpcMessage other;
          int code2 = 0;
          g_autofree char *why2 = NULL;
          g_autoptr (JsonNode) id2 = NULL;

          visit_strings (msg.root, 0);
          /* Our decoder and json-glib's must read the same message
           * whenever both accept it (ours is the stricter).  The switch is
           * global: no worker may be decoding meanwhile. */
          fb_rpc_conn_wait_idle (conn);
          fb_rpc_parse_fast = false;
          if (fb_rpc_message_parse (p, len, &other, &code2, &why2, &id2))
            {
              if (!json_node_equal (msg.root, other.root))
                abort ();
              fb_rpc_message_clear (&other);
            }
          fb_rpc_parse_fast = true;
          fb_rpc_message_clear (&msg);
        }
      else if (why == NULL || (code != FB_RPC_ERROR_INVALID_REQUEST && code != FB_RPC_ERROR_INVALID_PARAMS))
        abort ();
      fb_rpc_conn_receive (conn, p, len);
      if (nl == NULL)
        break;
      p = nl + 1;
    }
  /* Keep state from piling up across inputs: handles and subscriptions
   * live on the connection, sessions on the server. */
  fb_rpc_conn_wait_idle (conn); /* fs/... requests run on a worker; their handles are the worker's until then */
  fb_rpc_fs_close_all (conn);
  while (g_main_context_iteration (NULL, FALSE))
    ;
  return 0;
}
