/* Integration tests: `fusebox log --follow --connect URL` against a real
 * `fusebox serve`, over ws:// and unix:PATH.
 *
 * A follower is the real binary as a child; the server is made to log
 * accesses by a client (fs/writeFile allowed, fs/readFile of a denied file
 * that exists and is readable on the host), and the follower's output is
 * checked record by record.  A follower only sees events after its
 * log/subscribe was answered, which it does not announce: each test first
 * reads a denied "ping" file until the follower shows it.  Every wait is
 * bounded (TEST_WAIT_LIMIT_S) only so that a broken build fails instead of
 * hanging; nothing asserts how long anything takes. */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>
#include <gio/gunixsocketaddress.h>
#include <glib-unix.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "tests/lib/test-serve.h"
#include "tests/lib/test-util.h"

typedef struct
{
  TestDir *dir; /* temporary root: state/, ws/ */
  char *ws;
  char *policy;
  char *secret;
  char *ping;
  GArray *children; /* GPid: servers and followers not reaped yet */
} Fixture;

static Fixture *F;

/* Children are tracked so that a failed test still kills and reaps them in
 * its teardown, instead of leaving a server behind until the test exits. */
static void
track (GPid pid)
{
  g_array_append_val (F->children, pid);
}

static void
untrack (GPid pid)
{
  for (guint i = 0; i < F->children->len; i++)
    if (g_array_index (F->children, GPid, i) == pid)
      {
        g_array_remove_index (F->children, i);
        return;
      }
}

/* --- a server on any address -------------------------------------------------------- */

/* `fusebox serve --listen LISTEN --workspace WS --policy POLICY
 * [--subscribe-all] ARGS...`; returns once its first line (the address) is
 * read.  A follower sees other sessions' records only with
 * --subscribe-all. */
static TestServer *
server_start_full (const char *listen, bool subscribe_all, const char *const *args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  TestServer *s;

  g_ptr_array_add (argv, (char *)"--workspace");
  g_ptr_array_add (argv, F->ws);
  g_ptr_array_add (argv, (char *)"--policy");
  g_ptr_array_add (argv, F->policy);
  if (subscribe_all)
    g_ptr_array_add (argv, (char *)"--subscribe-all");
  for (guint i = 0; args != NULL && args[i] != NULL; i++)
    g_ptr_array_add (argv, (char *)args[i]);
  g_ptr_array_add (argv, NULL);
  s = test_server_start_on (F->dir->path, listen, (const char *const *)argv->pdata);
  if (s->pid <= 0)
    fail_msg ("can't start %s", s->command);
  track (s->pid);
  if (s->url[0] == '\0')
    fail_msg ("the server did not print its address; reproduce with: %s", s->command);
  return s;
}

static TestServer *
server_start (const char *listen, const char *const *args)
{
  return server_start_full (listen, true, args);
}

static int
server_stop (TestServer *s)
{
  untrack (s->pid);
  return test_server_stop (s);
}

/* --- clients: ws:// (tests/lib/test-serve.h) or unix: (newline-delimited) ------------ */

typedef struct
{
  TestClient *ws;
  GSocketConnection *conn;
  GDataInputStream *in;
  gint64 next_id;
} Rpc;

static Rpc *
rpc_connect (const char *url)
{
  Rpc *r = g_new0 (Rpc, 1);

  r->next_id = 1;
  if (g_str_has_prefix (url, "unix:"))
    {
      g_autoptr (GSocketClient) sc = g_socket_client_new ();
      g_autoptr (GSocketAddress) addr = g_unix_socket_address_new (url + 5);
      g_autoptr (GError) error = NULL;

      r->conn = g_socket_client_connect (sc, G_SOCKET_CONNECTABLE (addr), NULL, &error);
      if (r->conn == NULL)
        fail_msg ("can't connect to %s: %s", url, error->message);
      /* Bounded: a server that stops answering fails the read. */
      g_socket_set_timeout (g_socket_connection_get_socket (r->conn), TEST_WAIT_LIMIT_S);
      r->in = g_data_input_stream_new (g_io_stream_get_input_stream (G_IO_STREAM (r->conn)));
    }
  else
    {
      r->ws = test_client_connect (url);
      assert_non_null (r->ws->ws);
    }
  return r;
}

static void
rpc_free (Rpc *r)
{
  if (r == NULL)
    return;
  if (r->ws != NULL)
    test_client_free (r->ws);
  g_clear_object (&r->in);
  g_clear_object (&r->conn);
  g_free (r);
}

static JsonNode *
rpc_call (Rpc *r, const char *method, const char *params)
{
  gint64 id;
  g_autofree char *text = NULL;

  if (r->ws != NULL)
    return test_client_call (r->ws, method, params);
  id = r->next_id++;
  text = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"method\":\"%s\",\"params\":%s}\n", id, method, params);
  assert_true (g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (r->conn)), text, strlen (text),
                                          NULL, NULL, NULL));
  for (;;)
    {
      g_autofree char *line = g_data_input_stream_read_line (r->in, NULL, NULL, NULL);
      JsonNode *n;
      JsonObject *o;

      if (line == NULL)
        return NULL;
      n = json_from_string (line, NULL);
      if (n == NULL || !JSON_NODE_HOLDS_OBJECT (n))
        {
          if (n != NULL)
            json_node_unref (n);
          continue;
        }
      o = json_node_get_object (n);
      if (!json_object_has_member (o, "method") && json_object_has_member (o, "id") &&
          json_object_get_int_member (o, "id") == id)
        return n;
      json_node_unref (n);
    }
}

static void
rpc_handshake (Rpc *r)
{
  if (r->ws != NULL)
    {
      assert_true (test_client_handshake (r->ws, NULL));
      return;
    }
  {
    g_autoptr (JsonNode) a = rpc_call (r, "initialize", "{\"clientName\":\"test-logc\"}");
    const char *note = "{\"method\":\"initialized\",\"params\":{}}\n";

    assert_non_null (test_answer_result (a));
    assert_true (g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (r->conn)), note, strlen (note),
                                            NULL, NULL, NULL));
  }
}

static void
rpc_write_file (Rpc *r, const char *path, const char *text)
{
  g_autofree char *data = g_base64_encode ((const guchar *)text, strlen (text));
  g_autofree char *params = g_strdup_printf ("{\"path\":\"%s\",\"dataBase64\":\"%s\"}", path, data);
  g_autoptr (JsonNode) a = rpc_call (r, "fs/writeFile", params);

  assert_non_null (test_answer_result (a));
}

/* Reads a denied file: the answer must be the policy denial. */
static void
rpc_read_denied (Rpc *r, const char *path)
{
  g_autofree char *params = g_strdup_printf ("{\"path\":\"%s\"}", path);
  g_autoptr (JsonNode) a = rpc_call (r, "fs/readFile", params);

  if (test_answer_error_code (a) != -32050)
    fail_msg ("fs/readFile %s was not denied: %s", path, test_answer_error_message (a));
}

/* --- the follower ---------------------------------------------------------------- */

typedef struct
{
  GPid pid;
  int out_fd;
  int err_fd;
  GString *out;
  GString *err;
  char *command;
  bool reaped;
  int status;
} Follower;

static Follower *
follower_start (const char *url, const char *const *extra)
{
  const char *const follow[] = { "log", "--follow", "--connect", url, NULL };
  g_autoptr (GPtrArray) argv = test_fusebox_argv (follow, extra);
  g_autoptr (GError) error = NULL;
  Follower *f = g_new0 (Follower, 1);

  f->command = g_strjoinv (" ", (char **)argv->pdata);
  f->out = g_string_new (NULL);
  f->err = g_string_new (NULL);
  if (!g_spawn_async_with_pipes (NULL, (char **)argv->pdata, NULL, G_SPAWN_DO_NOT_REAP_CHILD, test_die_with_parent,
                                 NULL, &f->pid, NULL, &f->out_fd, &f->err_fd, &error))
    fail_msg ("can't start %s: %s", f->command, error->message);
  track (f->pid);
  g_unix_set_fd_nonblocking (f->out_fd, TRUE, NULL);
  g_unix_set_fd_nonblocking (f->err_fd, TRUE, NULL);
  return f;
}

/* Reads what is there, waiting up to WAIT_MS for something. */
static void
follower_drain (Follower *f, int wait_ms)
{
  struct pollfd p[2] = { { f->out_fd, POLLIN, 0 }, { f->err_fd, POLLIN, 0 } };

  if (poll (p, 2, wait_ms) <= 0)
    return;
  for (int i = 0; i < 2; i++)
    for (;;)
      {
        char buf[4096];
        ssize_t n = read (p[i].fd, buf, sizeof buf);
        if (n <= 0)
          break;
        g_string_append_len (i == 0 ? f->out : f->err, buf, n);
      }
}

/* Until the output has NEEDLE; false at the limit. */
static bool
follower_wait_for (Follower *f, const char *needle)
{
  gint64 limit = g_get_monotonic_time () + TEST_WAIT_LIMIT_S * G_USEC_PER_SEC;

  while (strstr (f->out->str, needle) == NULL && g_get_monotonic_time () < limit)
    follower_drain (f, 100);
  return strstr (f->out->str, needle) != NULL;
}

/* Until the follower exits by itself; false at the limit. */
static bool
follower_wait_exit (Follower *f)
{
  gint64 limit = g_get_monotonic_time () + TEST_WAIT_LIMIT_S * G_USEC_PER_SEC;

  while (!f->reaped && g_get_monotonic_time () < limit)
    {
      pid_t p = waitpid (f->pid, &f->status, WNOHANG);
      if (p == f->pid)
        {
          f->reaped = true;
          untrack (f->pid);
        }
      else
        follower_drain (f, 50);
    }
  follower_drain (f, 0);
  return f->reaped;
}

static void
follower_free (Follower *f)
{
  if (f == NULL)
    return;
  if (!f->reaped)
    {
      kill (f->pid, SIGKILL);
      waitpid (f->pid, &f->status, 0);
      untrack (f->pid);
    }
  g_spawn_close_pid (f->pid);
  close (f->out_fd);
  close (f->err_fd);
  g_string_free (f->out, TRUE);
  g_string_free (f->err, TRUE);
  g_free (f->command);
  g_free (f);
}

static void
follower_fail (Follower *f, const char *what)
{
  fprintf (stderr, "%s\nreproduce with: %s\nstdout:\n%s\nstderr:\n%s\n", what, f->command, f->out->str, f->err->str);
  fail ();
}

/* F ends by itself with exit CODE; else the test fails with WHAT. */
static void
assert_follower_exits (Follower *f, int code, const char *what)
{
  assert_true (follower_wait_exit (f));
  if (!(WIFEXITED (f->status) && WEXITSTATUS (f->status) == code))
    follower_fail (f, what);
}

/* Reads the denied ping file until the follower shows it: from then on its
 * subscription is live. */
static void
follower_sync (Follower *f, Rpc *r)
{
  for (guint i = 0; i < 100 && strstr (f->out->str, "ping.txt") == NULL; i++)
    {
      gint64 limit = g_get_monotonic_time () + G_USEC_PER_SEC / 2;

      rpc_read_denied (r, F->ping);
      while (strstr (f->out->str, "ping.txt") == NULL && g_get_monotonic_time () < limit)
        follower_drain (f, 50);
    }
  if (strstr (f->out->str, "ping.txt") == NULL)
    follower_fail (f, "the follower never showed an event");
}

/* The follower's --json lines, each parsed (a line that isn't JSON fails). */
static GPtrArray *
json_records (Follower *f)
{
  g_auto (GStrv) lines = g_strsplit (f->out->str, "\n", -1);
  GPtrArray *recs = g_ptr_array_new_with_free_func ((GDestroyNotify)json_node_unref);

  for (guint i = 0; lines[i] != NULL; i++)
    {
      JsonNode *n;

      if (lines[i][0] == '\0')
        continue;
      n = json_from_string (lines[i], NULL);
      if (n == NULL || !JSON_NODE_HOLDS_OBJECT (n))
        follower_fail (f, "a --json line is not a JSON object");
      g_ptr_array_add (recs, n);
    }
  return recs;
}

static const char *
str (JsonNode *n, const char *name)
{
  return json_object_get_string_member_with_default (json_node_get_object (n), name, NULL);
}

/* The secret exists and is readable on the host: its denial is the policy's. */
static void
assert_secret_on_host (void)
{
  g_autofree char *text = NULL;

  assert_true (g_file_get_contents (F->secret, &text, NULL, NULL));
  assert_string_equal (text, "top secret\n");
}

/* --- fixture ------------------------------------------------------------------------ */

static int
setup_group (void **state)
{
  g_autofree char *policy = NULL;

  F = g_new0 (Fixture, 1);
  F->dir = test_dir_new (test_tmpdir ("fusebox-logc"));
  F->ws = test_dir_mkdir (F->dir, "ws", 0755);
  F->secret = test_dir_path (F->dir, "ws/secret.txt");
  F->ping = test_dir_path (F->dir, "ws/ping.txt");
  test_write_file (F->secret, "top secret\n");
  test_write_file (F->ping, "ping\n");
  policy = g_strdup ("{\"version\":1,\"network\":\"none\",\"rules\":["
                     "{\"path\":\"/\",\"access\":\"read\",\"why\":\"system files\"},"
                     "{\"path\":\"${WORKSPACE}\",\"access\":\"write\",\"why\":\"the workspace\"},"
                     "{\"path\":\"${WORKSPACE}/secret.txt\",\"access\":\"deny\",\"why\":\"the secret stays secret\"},"
                     "{\"path\":\"${WORKSPACE}/ping.txt\",\"access\":\"deny\",\"why\":\"the test's ping\"}]}");
  F->policy = test_dir_path (F->dir, "policy.json");
  test_write_file (F->policy, policy);
  F->children = g_array_new (FALSE, FALSE, sizeof (GPid));
  *state = F;
  return 0;
}

static int
teardown (void **state)
{
  for (guint i = 0; i < F->children->len; i++)
    {
      GPid pid = g_array_index (F->children, GPid, i);

      fprintf (stderr, "killing child %d left by a failed test\n", (int)pid);
      test_kill_child (&pid, SIGKILL);
    }
  g_array_set_size (F->children, 0);
  return 0;
}

static int
teardown_group (void **state)
{
  test_dir_free (F->dir, true);
  g_array_unref (F->children);
  g_free (F);
  return 0;
}

/* --- the tests ------------------------------------------------------------------------ */

/* Everything, then --denied, then SIGTERM, on one server at URL. */
static void
check_follow (TestServer *server)
{
  Rpc *r = rpc_connect (server->url);
  const char *const json_args[] = { "--json", NULL };
  const char *const denied_args[] = { "--json", "--denied", NULL };
  g_autofree char *written = g_build_filename (F->ws, "written.txt", NULL);
  g_autofree char *written2 = g_build_filename (F->ws, "written-again.txt", NULL);
  g_autoptr (GPtrArray) recs = NULL;
  Follower *all, *denied;
  guint n_written = 0, n_secret = 0;

  rpc_handshake (r);
  all = follower_start (server->url, json_args);
  follower_sync (all, r);

  assert_secret_on_host ();
  rpc_write_file (r, written, "hello");
  rpc_read_denied (r, F->secret);
  if (!follower_wait_for (all, "secret.txt"))
    follower_fail (all, "the follower did not show the denial");
  if (!follower_wait_for (all, "written.txt"))
    follower_fail (all, "the follower did not show the write");

  recs = json_records (all);
  for (guint i = 0; i < recs->len; i++)
    {
      JsonNode *n = recs->pdata[i];

      if (g_strcmp0 (str (n, "path"), written) == 0)
        {
          assert_string_equal (str (n, "decision"), "allow");
          n_written++;
        }
      if (g_strcmp0 (str (n, "path"), F->secret) == 0)
        {
          assert_string_equal (str (n, "decision"), "deny");
          assert_string_equal (str (n, "why"), "the secret stays secret");
          assert_true (json_object_has_member (json_node_get_object (n), "rule"));
          assert_false (JSON_NODE_HOLDS_NULL (json_object_get_member (json_node_get_object (n), "rule")));
          n_secret++;
        }
    }
  assert_true (n_written >= 1);
  assert_int_equal (n_secret, 1);

  /* --denied: the allowed write is left out, the denial shown.  The server
   * logs in call order, so once the later denial is shown the earlier write
   * would have been too. */
  denied = follower_start (server->url, denied_args);
  follower_sync (denied, r);
  rpc_write_file (r, written2, "hello again");
  rpc_read_denied (r, F->secret);
  if (!follower_wait_for (denied, "secret.txt"))
    follower_fail (denied, "the --denied follower did not show the denial");
  assert_null (strstr (denied->out->str, "written-again.txt"));
  assert_null (strstr (denied->out->str, "\"decision\":\"allow\""));
  /* ...which the unfiltered follower did see. */
  if (!follower_wait_for (all, "written-again.txt"))
    follower_fail (all, "the follower did not show the second write");

  /* SIGTERM: unsubscribe, close, exit 0. */
  kill (all->pid, SIGTERM);
  kill (denied->pid, SIGTERM);
  assert_follower_exits (all, 0, "SIGTERM did not end the follower with exit 0");
  assert_follower_exits (denied, 0, "SIGTERM did not end the --denied follower with exit 0");

  follower_free (all);
  follower_free (denied);
  rpc_free (r);
}

static void
test_follow_ws (void **state)
{
  TestServer *server = server_start ("ws://127.0.0.1:0", NULL);
  g_autofree char *url = g_strdup (server->url);
  const char *const args[] = { "--json", NULL };
  Follower *dead;
  int status;

  assert_true (g_str_has_prefix (server->url, "ws://"));
  check_follow (server);
  status = server_stop (server);
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);

  /* Nobody listens there any more. */
  dead = follower_start (url, args);
  assert_follower_exits (dead, 1, "a dead URL did not exit 1");
  {
    /* The URL, but not the token it carries. */
    g_autofree char *bare = g_strndup (url, strcspn (url, "?"));
    const char *token = strstr (url, "token=");
    assert_non_null (token);
    assert_non_null (strstr (dead->err->str, bare));
    assert_null (strstr (dead->err->str, token));
  }
  assert_non_null (strstr (dead->err->str, "is `fusebox serve --listen"));
  follower_free (dead);
}

static void
test_follow_unix (void **state)
{
  g_autofree char *listen = g_strconcat ("unix:", test_dir_path (F->dir, "api.sock"), NULL);
  TestServer *server = server_start (listen, NULL);
  const char *const people_args[] = { "--color", "never", NULL };
  Rpc *r;
  Follower *people;
  int status;

  assert_string_equal (server->url, listen);
  check_follow (server);

  /* For people: the same records, with the rule's reason. */
  r = rpc_connect (server->url);
  rpc_handshake (r);
  people = follower_start (server->url, people_args);
  follower_sync (people, r);
  rpc_read_denied (r, F->secret);
  if (!follower_wait_for (people, "the secret stays secret"))
    follower_fail (people, "the people format did not show the rule's reason");
  assert_non_null (strstr (people->out->str, "secret.txt"));
  assert_null (strstr (people->out->str, "{\""));
  rpc_free (r);

  /* The server going away ends the follower with exit 1 and the URL. */
  status = server_stop (server);
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  assert_follower_exits (people, 1, "a server that went away did not end the follower with exit 1");
  assert_non_null (strstr (people->err->str, listen));
  assert_non_null (strstr (people->err->str, "went away"));
  follower_free (people);
}

/* A server with a bearer token: without it, a message naming the fix;
 * with it, events. */
static void
test_follow_token (void **state)
{
  const char *token_file = test_dir_path (F->dir, "token");
  const char *const server_args[] = { "--token-file", token_file, NULL };
  const char *const no_token[] = { "--json", NULL };
  const char *const with_token[] = { "--json", "--token-file", token_file, NULL };
  TestServer *server;
  Follower *f;

  test_write_file (token_file, "s3cret-token\n");
  g_chmod (token_file, 0600);
  server = server_start ("ws://127.0.0.1:0", server_args);

  f = follower_start (server->url, no_token);
  assert_follower_exits (f, 1, "a missing token did not exit 1");
  assert_non_null (strstr (f->err->str, "--token-file"));
  assert_non_null (strstr (f->err->str, server->url));
  follower_free (f);

  f = follower_start (server->url, with_token);
  /* The events come from a client that presents the token too
   * (test_client_connect sends none). */
  {
    TestClient *c = test_client_start_header (server->url, "Authorization", "Bearer s3cret-token");
    Rpc *r = g_new0 (Rpc, 1);

    assert_true (test_client_wait_connected (c));
    r->ws = c;
    rpc_handshake (r);
    follower_sync (f, r);
    rpc_free (r);
  }
  kill (f->pid, SIGTERM);
  assert_follower_exits (f, 0, "SIGTERM did not end the follower with exit 0");
  follower_free (f);
  server_stop (server);
}

/* By default a server shows each client its own session's records: a
 * follower would see nothing, and says so instead of waiting. */
static void
test_follow_needs_subscribe_all (void **state)
{
  TestServer *server = server_start_full ("ws://127.0.0.1:0", false, NULL);
  const char *const args[] = { "--json", NULL };
  Follower *f = follower_start (server->url, args);

  assert_follower_exits (f, 1, "a follower of a server without --subscribe-all did not exit 1");
  assert_non_null (strstr (f->err->str, "--subscribe-all"));
  follower_free (f);
  server_stop (server);
}

static void
test_usage (void **state)
{
  g_autofree char *err = NULL;
  int status = -1;
  const char *argv[] = { test_bin (), "log", "--connect", "ws://127.0.0.1:1", NULL };

  /* Without --follow it is a usage error that says how to write it. */
  assert_true (
    g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err, &status, NULL));
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 2);
  assert_non_null (strstr (err, "--follow --connect ws://127.0.0.1:1"));
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_usage),
    cmocka_unit_test_teardown (test_follow_ws, teardown),
    cmocka_unit_test_teardown (test_follow_unix, teardown),
    cmocka_unit_test_teardown (test_follow_token, teardown),
    cmocka_unit_test_teardown (test_follow_needs_subscribe_all, teardown),
  };

  signal (SIGPIPE, SIG_IGN);
  return TEST_RUN_GROUP (tests, setup_group, teardown_group);
}
