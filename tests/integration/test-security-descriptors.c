/* fusebox — one sandbox can't take the daemon's descriptors from another
 * (fs/fs-view-fd.c).  Through the real `fusebox serve`:
 *  - a sandbox's `find` over 102,551 directories (a tmpfs the test mounts)
 *    sees every one of them, and then, while the kernel still holds all of
 *    them, another session's fs/readFile and process/start are served;
 *  - a sandbox opening 20,000 files and holding them gets its own EMFILE
 *    (or opens them all), while another session's fs/readFile and
 *    process/start are served;
 *  - started with a soft limit below the hard one, the server raises it
 *    and says what it got.
 * The server starts with RLIMIT_NOFILE 30,000 (its sandboxes inherit it),
 * then the test lowers its limit to 4,096 with prlimit, as a smaller hard
 * limit would be: a server that gives one descriptor per directory or file
 * to whoever asks then runs out for everyone.  Needs root (the tmpfs, the
 * limits, the sandboxes). */
#include "tests/lib/test-run.h"
#include "tests/lib/test-serve.h"

#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#define SERVER_NOFILE 30000
#define LOWERED_NOFILE 4096
/* 50 x 50 x 40 leaves, plus 50 x 50 and 50 above them and the top */
#define TREE_A 50
#define TREE_B 50
#define TREE_C 40
#define TREE_DIRS (1 + TREE_A + TREE_A * TREE_B + TREE_A * TREE_B * TREE_C)
#define HOLD_FILES 20000

typedef struct
{
  RFx *rfx;
  /* the paths are the RFx's */
  const char *tmpfs; /* T/ws/big: a tmpfs of ours, unmounted in teardown */
  const char *err;   /* the server's stderr */
  TestServer *server;
  TestClient *a, *b;
} DFx;

static int
setup (void **state)
{
  DFx *fx = g_new0 (DFx, 1);

  fx->rfx = rfx_new ();
  *state = fx;
  return 0;
}

static int
teardown (void **state)
{
  DFx *fx = *state;

  test_client_free (fx->a);
  test_client_free (fx->b);
  if (fx->server != NULL)
    test_server_stop (fx->server);
  if (fx->tmpfs != NULL)
    umount2 (fx->tmpfs, MNT_DETACH);
  rfx_free (fx->rfx);
  g_free (fx);
  return 0;
}

/* As RFX_CASE, for a DFx: the RFx inside it names the test and is marked
 * passed when the body returns. */
static void
dfx_run_case (void **state, const char *name, void (*body) (DFx *fx))
{
  DFx *fx = *state;

  fx->rfx->test_name = name;
  body (fx);
  fx->rfx->passed = true;
}
#define DFX_CASE(name) TEST_CASE (DFx, dfx_run_case, name)
#define DFX_TEST(f) cmocka_unit_test_setup_teardown (f, setup, teardown)

/* T/ws/big: a tmpfs (100,000 directories cost no disk and go at unmount) */
static char *
mount_tmpfs (DFx *fx)
{
  const char *big = test_dir_mkdir (fx->rfx->dir, "ws/big", 0755);

  if (mount ("fusebox-test", big, "tmpfs", MS_NOSUID | MS_NODEV, "size=512m,nr_inodes=400000,mode=0755") < 0)
    {
      g_autofree char *why = g_strdup_printf ("can't mount a tmpfs at %s: %s", big, g_strerror (errno));
      test_skip_or_fail (why);
    }
  fx->tmpfs = big;
  return g_strdup (big);
}

typedef struct
{
  guint64 soft, hard;
  const char *err_path;
} Limits;

static void
server_child (gpointer data)
{
  const Limits *l = data;
  struct rlimit rl = { l->soft, l->hard };
  int fd;

  prctl (PR_SET_PDEATHSIG, SIGTERM);
  setrlimit (RLIMIT_NOFILE, &rl);
  fd = open (l->err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0)
    dup2 (fd, 2);
}

/* `fusebox serve` under T's policy with RLIMIT_NOFILE SOFT/HARD, stderr in
 * T/serve.err; returns once its URL is read. */
static void
server_start (DFx *fx, guint64 soft, guint64 hard)
{
  RFx *r = fx->rfx;
  g_autofree char *policy = rfx_policy_ws (r);
  g_auto (GStrv) envp = g_environ_setenv (g_get_environ (), "XDG_STATE_HOME", r->state, TRUE);
  const char *argv[] = { test_bin (),   "serve", "--listen", "ws://127.0.0.1:0", "--policy", policy,
                         "--workspace", r->ws,   NULL };
  g_autoptr (GError) error = NULL;
  Limits l = { soft, hard, NULL };
  int out_fd = -1;

  fx->err = test_dir_path (r->dir, "serve.err");
  l.err_path = fx->err;
  fx->server = g_new0 (TestServer, 1);
  {
    g_autofree char *joined = g_strjoinv (" ", (char **)argv);
    fx->server->command =
      g_strdup_printf ("XDG_STATE_HOME=%s prlimit --nofile=%" G_GUINT64_FORMAT ":%" G_GUINT64_FORMAT " %s", r->state,
                       soft, hard, joined);
    g_free (r->repro);
    r->repro = g_strdup (fx->server->command);
  }
  if (!g_spawn_async_with_pipes (r->ws, (char **)argv, envp, G_SPAWN_DO_NOT_REAP_CHILD, server_child, &l,
                                 &fx->server->pid, NULL, &out_fd, NULL, &error))
    fail_msg ("can't start %s: %s", fx->server->command, error->message);
  fx->server->url = test_read_line (out_fd, -1);
  close (out_fd);
  if (fx->server->url == NULL || !g_str_has_prefix (fx->server->url, "ws://"))
    fail_msg ("the server did not print its URL; its stderr is in %s", fx->err);
}

static void
lower_server_limit (DFx *fx)
{
  struct rlimit rl = { LOWERED_NOFILE, LOWERED_NOFILE };

  assert_int_equal (prlimit (fx->server->pid, RLIMIT_NOFILE, &rl, NULL), 0);
}

/* Another session, while the first sandbox holds what it holds: its
 * fs/readFile and a process/start of its own are served. */
static void
assert_other_session_served (DFx *fx)
{
  g_autofree char *hello = g_build_filename (fx->rfx->ws, "hello.txt", NULL);
  g_autofree char *hello_json = test_json_quote (hello);
  g_autofree char *params = g_strdup_printf ("{\"path\":%s}", hello_json);
  g_autofree char *argv = g_strdup_printf ("[\"/bin/cat\",%s]", hello_json);
  g_autofree char *out = NULL;
  g_autoptr (JsonNode) r = NULL;
  JsonObject *res;
  int code;

  fx->b = test_client_open (fx->server->url);
  r = test_client_call (fx->b, "fs/readFile", params);
  res = test_answer_result (r);
  if (res == NULL)
    fail_msg ("the other session's fs/readFile %s failed: %s", hello, test_answer_error_message (r));
  {
    gsize len = 0;
    g_autofree guchar *data = g_base64_decode (json_object_get_string_member (res, "dataBase64"), &len);
    assert_int_equal (len, 6);
    assert_memory_equal (data, "hello\n", 6);
  }
  test_process_start (fx->b, "other", argv, fx->rfx->ws, true);
  out = test_process_read (fx->b, "other", NULL, &code, NULL);
  if (code != 0 || strcmp (out, "hello\n") != 0)
    fail_msg ("the other session's process/start: exit %d, output: %s", code, out);
}

/* While the first session's process ID holds what it holds: another
 * session is served and the server keeps within its limit; then ID is
 * told to end. */
static void
assert_served_meanwhile (DFx *fx, const char *id)
{
  assert_other_session_served (fx);
  assert_true (test_count_fds (fx->server->pid) <= LOWERED_NOFILE);
  test_process_write (fx->a, id, "", "end");
}

static void
write_hello (DFx *fx)
{
  g_autofree char *hello = g_build_filename (fx->rfx->ws, "hello.txt", NULL);

  test_write (hello, "hello\n", 0644);
}

/* what the tests need beyond rfx_require() (RFX_DEFINE_MAIN) */
static int
require_holdopen (void **state)
{
  g_autofree char *holdopen = test_fixture ("fb-holdopen");

  if (access (holdopen, X_OK) != 0)
    test_skip_or_fail ("fixtures/fb-holdopen is missing: build it with ninja");
  return 0;
}

/* TREE and the TREE_DIRS - 1 directories below it */
static void
mkdir_tree (const char *tree)
{
  char path[4096];

  assert_int_equal (mkdir (tree, 0755), 0);
  for (guint a = 0; a < TREE_A; a++)
    {
      g_snprintf (path, sizeof path, "%s/a%02u", tree, a);
      assert_int_equal (mkdir (path, 0755), 0);
      for (guint b = 0; b < TREE_B; b++)
        {
          g_snprintf (path, sizeof path, "%s/a%02u/b%02u", tree, a, b);
          assert_int_equal (mkdir (path, 0755), 0);
          for (guint c = 0; c < TREE_C; c++)
            {
              g_snprintf (path, sizeof path, "%s/a%02u/b%02u/c%02u", tree, a, b, c);
              assert_int_equal (mkdir (path, 0755), 0);
            }
        }
    }
}

/* A sandbox's find over 102,551 directories sees them all; with every one
 * of them still known to the kernel, another session is served. */
DFX_CASE (test_find_many_directories)
{
  g_autofree char *big = NULL, *tree = NULL, *tree_json = NULL, *argv = NULL, *out = NULL, *expect = NULL;
  int code;

  big = mount_tmpfs (fx);
  tree = g_build_filename (big, "tree", NULL);
  mkdir_tree (tree);
  write_hello (fx);

  server_start (fx, SERVER_NOFILE, SERVER_NOFILE);
  fx->a = test_client_open (fx->server->url);
  lower_server_limit (fx);
  /* the count, then the sandbox stays (and its kernel keeps every name)
   * until its stdin ends */
  tree_json = test_json_quote (tree);
  argv = g_strdup_printf ("[\"/bin/sh\",\"-c\",\"find \\\"$0\\\" -type d | wc -l; echo found; cat >/dev/null\",%s]",
                          tree_json);
  test_process_start (fx->a, "find", argv, fx->rfx->ws, true);
  out = test_process_read (fx->a, "find", "found", &code, NULL);
  expect = g_strdup_printf ("%u\nfound\n", TREE_DIRS);
  if (strcmp (out, expect) != 0)
    fail_msg ("find in the sandbox (exit %d) printed:\n%s\nexpected:\n%s", code, out, expect);

  assert_served_meanwhile (fx, "find");
}

/* A sandbox holding as many files open as it can gets its own EMFILE (or
 * holds all 20,000), and another session is served meanwhile. */
DFX_CASE (test_hold_many_files)
{
  g_autofree char *big = NULL, *many = NULL, *argv = NULL, *out = NULL, *probe = NULL;
  g_autofree char *probe_json = NULL, *many_json = NULL;
  long opened = -1;
  char err[64] = "";
  int code;

  big = mount_tmpfs (fx);
  many = g_build_filename (big, "many", NULL);
  assert_int_equal (mkdir (many, 0755), 0);
  for (guint i = 0; i < HOLD_FILES; i++)
    {
      g_autofree char *f = g_strdup_printf ("%s/f%05u", many, i);
      int fd = open (f, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      assert_true (fd >= 0);
      close (fd);
    }
  write_hello (fx);

  server_start (fx, SERVER_NOFILE, SERVER_NOFILE);
  fx->a = test_client_open (fx->server->url);
  probe = test_fixture ("fb-holdopen");
  probe_json = test_json_quote (probe);
  many_json = test_json_quote (many);
  argv = g_strdup_printf ("[%s,%s,\"%u\"]", probe_json, many_json, HOLD_FILES);
  /* started with the server's limit, which the sandbox keeps; then the
   * server's is lowered */
  test_process_start (fx->a, "hold", argv, fx->rfx->ws, true);
  g_free (test_process_read (fx->a, "hold", "ready\n", &code, NULL));
  assert_int_equal (code, -1);
  lower_server_limit (fx);
  test_process_write (fx->a, "hold", "go\n", "go");
  out = test_process_read (fx->a, "hold", "opened", &code, NULL);
  {
    const char *p = strstr (out, "opened ");
    if (p == NULL || sscanf (p, "opened %ld %63s", &opened, err) != 2)
      fail_msg ("fb-holdopen (exit %d) printed: %s", code, out);
  }
  print_message ("the sandbox held %ld files open, then %s\n", opened, err);
  /* all of them, or as many as its share, and the refusal its own */
  if (!(opened == HOLD_FILES && strcmp (err, "none") == 0) &&
      !(opened > 0 && (strcmp (err, "EMFILE") == 0 || strcmp (err, "ENFILE") == 0)))
    fail_msg ("the sandbox opened %ld files and then got %s", opened, err);

  assert_served_meanwhile (fx, "hold");
}

/* Started with a soft limit below the hard one, the server raises it and
 * says what it came to. */
DFX_CASE (test_limit_raised_and_said)
{
  g_autofree char *expect = g_strdup_printf ("descriptors: RLIMIT_NOFILE %u", LOWERED_NOFILE);
  g_autofree char *limits_path = NULL, *limits = NULL, *err = NULL;
  bool said = false;

  server_start (fx, 1024, LOWERED_NOFILE);
  /* the line comes right after the URL */
  said =
    TEST_WAIT_FOR ((err = (g_free (err), test_read_file (fx->err))) != NULL && strstr (err, expect) != NULL, 10000);
  if (!said)
    fail_msg ("the server's stderr does not say \"%s\":\n%s", expect, err != NULL ? err : "");
  limits_path = g_strdup_printf ("/proc/%d/limits", (int)fx->server->pid);
  limits = test_read_file (limits_path);
  assert_non_null (limits);
  {
    g_autofree char *row =
      g_strdup_printf ("Max open files            %u                 %u", LOWERED_NOFILE, LOWERED_NOFILE);
    if (strstr (limits, row) == NULL)
      fail_msg ("the soft limit was not raised to the hard one:\n%s", limits);
  }
}

RFX_DEFINE_MAIN (NULL, require_holdopen, DFX_TEST (test_limit_raised_and_said), DFX_TEST (test_hold_many_files),
                 DFX_TEST (test_find_many_directories))
