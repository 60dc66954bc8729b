/* fusebox — the real `fusebox serve` for the tests and the benchmark: the
 * server, and a WebSocket client on libsoup 3 whose synchronous call() is
 * driven by the default main context.
 *
 * Waits are bounded (TEST_WAIT_LIMIT_S) only so that a broken server fails
 * the test instead of hanging it; nothing asserts how long anything takes.
 *
 * test-serve.c (the server and the client) needs no cmocka: bench/ builds
 * it too.  The helpers below "cmocka" fail the test on an error answer. */
#pragma once

#include <stdbool.h>

#include <glib.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#define TEST_WAIT_LIMIT_S 60

typedef struct
{
  GPid pid;
  char *url;
  char *dir;
  char *command; /* for people: how to start it by hand */
  int err_fd;
} TestServer;

/* `fusebox serve --listen ws://127.0.0.1:0 ARGS...` with XDG_STATE_HOME
 * under DIR; returns once the URL line is read (url does not start with
 * "ws://" when the server did not start). */
TestServer *test_server_start (const char *dir, const char *const *args);

/* The same on address LISTEN; url is "" when the server did not start. */
TestServer *test_server_start_on (const char *dir, const char *listen, const char *const *args);

/* g_spawn child setup: the child gets SIGTERM when the test dies, so that a
 * test or benchmark killed midway leaves no server behind. */
void test_die_with_parent (gpointer data);

/* SIGTERM, reap, free; returns the wait status (-1 for NULL). */
int test_server_stop (TestServer *s);

typedef struct
{
  SoupSession *session;
  SoupWebsocketConnection *ws;
  GQueue inbox; /* JsonNode*: messages not consumed yet */
  bool closed;
  bool failed;
  gint64 next_id;
  /* as initialize answered (in STRINGS, freed with the client) */
  const char *session_id;  /* "ID.SECRET", what a resume takes */
  const char *log_session; /* ID: the session in the access log and log/event */
  const char *run_dir;
  GStringChunk *strings;
} TestClient;

/* Connect without an async wait per client (for many at once): call
 * test_client_wait_connected after starting them all.  ORIGIN: an Origin
 * header, or NULL for none. */
TestClient *test_client_start (const char *url, const char *origin);

/* The same with request header NAME: VALUE (NAME NULL: none). */
TestClient *test_client_start_header (const char *url, const char *name, const char *value);
bool test_client_wait_connected (TestClient *c);

/* Connected (ws not NULL) or not (ws NULL). */
TestClient *test_client_connect (const char *url);
void test_client_free (TestClient *c);
void test_client_send (TestClient *c, const char *text);

/* The first queued message for which MATCH holds (removed from the inbox),
 * waiting for it; NULL at the limit or when the connection closes. */
typedef bool (*TestMatch) (JsonObject *msg, gconstpointer data);
JsonNode *test_client_take (TestClient *c, TestMatch match, gconstpointer data);

/* TestMatch for the answer to the call with id *(const gint64 *)DATA. */
bool test_match_id (JsonObject *msg, gconstpointer data);

/* TestMatch for a notification: DATA is a TestNoteMatch. */
typedef struct
{
  const char *method;
  const char *process_id; /* NULL: any */
} TestNoteMatch;
bool test_match_note (JsonObject *msg, gconstpointer data);

/* The next notification METHOD (for PROCESS_ID when not NULL). */
JsonNode *test_client_note (TestClient *c, const char *method, const char *process_id);

/* Send {id, method, params: PARAMS_JSON} and wait for its answer (the whole
 * message: {id, result} or {id, error}). */
JsonNode *test_client_call (TestClient *c, const char *method, const char *params_json);

/* The same with the params made by printf (FORMAT, ...). */
JsonNode *test_client_callf (TestClient *c, const char *method, const char *format, ...) G_GNUC_PRINTF (3, 4);

/* initialize + initialized; keeps the session id and the run directory.
 * A resume may race with the server noticing that the session's previous
 * connection closed (it answers -32010 until then): retried a while. */
bool test_client_handshake (TestClient *c, const char *resume);

/* result member of an answer, or NULL when it is an error. */
JsonObject *test_answer_result (JsonNode *answer);
/* error code of an answer, 0 when it is a result */
gint64 test_answer_error_code (JsonNode *answer);
/* error message of an answer, "" when it is a result */
const char *test_answer_error_message (JsonNode *answer);

/* ---- cmocka ---- */

/* A client of URL, connected and initialized; fails the test when it
 * can't be. */
TestClient *test_client_open (const char *url);

/* process/start {processId: ID, argv: ARGV_JSON, cwd: CWD, env: PATH
 * only, tty: false, pipeStdin: PIPE_STDIN}; fails the test on an error. */
void test_process_start (TestClient *c, const char *id, const char *argv_json, const char *cwd, bool pipe_stdin);

/* process/read of ID (stdout and stderr together) until the output holds
 * NEEDLE (when not NULL) or the process is closed; *ret_exit_code -1 while
 * it runs, *ret_failure (when asked for) its failure or left as it was. */
char *test_process_read (TestClient *c, const char *id, const char *needle, int *ret_exit_code, char **ret_failure);

/* process/write TEXT to ID's stdin. */
void test_process_write (TestClient *c, const char *id, const char *text, const char *write_id);

/* The next process/output, process/exited or process/closed notification
 * of process ID (in that order of preference among those queued); fails
 * the test when the connection closes first. */
JsonNode *test_process_note (TestClient *c, const char *id);

typedef struct
{
  GString *out;
  GString *err;
  gint64 exit_code; /* -1 until process/exited */
  bool denied;      /* process/exited's sandboxDenied */
  bool ordered;     /* seq grew, every output came before exited, exited before closed */
} TestProcessOutput;

/* The notifications of process ID until process/closed. */
void test_process_collect (TestClient *c, const char *id, TestProcessOutput *ret);
void test_process_output_clear (TestProcessOutput *o);

/* ---- a group of tests against one server ---- */

typedef struct
{
  char *dir; /* T: state/, ws/ */
  char *ws;  /* T/ws, made 0755 */
  TestServer *server;
  TestClient *client; /* each test's own (test_serve_client_setup) */
} TestServe;

/* T is DIR (taken: test_workdir() or test_tmpdir()). */
TestServe *test_serve_new (char *dir);

/* test_server_start (T, --workspace T/ws ARGS...); false when the server
 * did not start. */
bool test_serve_start (TestServe *t, const char *const *args);

/* Stops the server, removes T; returns the server's wait status. */
int test_serve_free (TestServe *t);

/* cmocka group teardown: test_serve_free (*state). */
int test_serve_group_teardown (void **state);

/* cmocka setup and teardown of a test: *state is the group's TestServe;
 * client is connected and initialized. */
int test_serve_client_setup (void **state);
int test_serve_client_teardown (void **state);
#define TEST_SERVE_TEST(f) cmocka_unit_test_setup_teardown (f, test_serve_client_setup, test_serve_client_teardown)
