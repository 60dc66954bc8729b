/* Adversarial tests: renaming a directory does not carry a path out of a
 * glob's reach, nor into one.
 *
 * A policy reads `/`, writes the workspace T/ws and a private /tmp, and has
 * globs at any depth: "**" + "/secrets/" + "**" hide, "**" + "/vault/" +
 * "*" deny, "**" + "/.aws/credentials" deny.  On the host (each proven readable
 * first) ws/secrets/key, ws/vault/key, ws/proj/.aws/credentials and
 * ws/proj/secrets/key exist.  Inside the sandbox (this program, `--probe`):
 *  - `mv secrets x` then reading x/key printed the hidden key; so did
 *    vault -> v2 and proj/.aws -> proj/aws2.  Now each rename is EACCES,
 *    logged as fusebox's own refusal (fusebox:ruled-directory), and the
 *    keys stay out of reach under every name;
 *  - the other way, a directory moved to where a glob would decide below
 *    it (plain -> a/vault), and RENAME_EXCHANGE at either end (a
 *    directory, or a file exchanged with one): EACCES too;
 *  - what such a glob matches wholly inside a directory follows it: `mv
 *    proj proj2` works, and proj2/secrets/key stays hidden,
 *    proj2/.aws/credentials denied.
 * The same through the shell as the review ran it (`mv secrets x && cat
 * x/key`), and through `fusebox serve`: process/start with the globs split
 * between the server's policy and the call's own `sandbox` (a narrowed
 * policy).  Nothing on the host moves.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include <sys/syscall.h>

#include "tests/lib/test-run.h"
#include "tests/lib/test-sec-files.h"
#include "tests/lib/test-serve.h"

#define RULE_SECRETS "{\"glob\":\"**/secrets/**\",\"access\":\"hide\",\"why\":\"secrets, at any depth\"}"
#define RULE_VAULT "{\"glob\":\"**/vault/*\",\"access\":\"deny\",\"why\":\"what vaults hold\"}"
#define RULE_AWS "{\"glob\":\"**/.aws/credentials\",\"access\":\"deny\",\"why\":\"cloud keys\"}"

/* What the probe says when every rename that would move a decision is
 * refused and the keys stay out of reach. */
static const char expected[] = "mv-secrets EACCES\n"
                               "read-x-key ENOENT\n"
                               "read-secrets-key ENOENT\n"
                               "mv-vault EACCES\n"
                               "read-v2-key ENOENT\n"
                               "mv-aws EACCES\n"
                               "read-aws2 ENOENT\n"
                               "into-vault EACCES\n"
                               "read-into ENOENT\n"
                               "xchg-secrets EACCES\n"
                               "xchg-aws EACCES\n"
                               "xchg-file EACCES\n"
                               "mv-proj OK\n"
                               "read-proj2-secret ENOENT\n"
                               "read-proj2-aws EACCES\n"
                               "mv-back OK\n";

/* --- inside the sandbox --------------------------------------------------------- */

/* "NAME OK|ERRNO" for a rename. */
static void
say_rename (const char *name, const char *from, const char *to, unsigned flags)
{
  int r = (int)syscall (SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
  printf ("%s %s\n", name, rfx_res (r));
}

/* "NAME ERRNO", or "NAME LEAKED:<contents>" when PATH could be read. */
static void
say_read (const char *name, const char *path)
{
  char buf[256];
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  if (fd < 0)
    {
      printf ("%s %s\n", name, rfx_errname (errno));
      return;
    }
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n < 0)
    {
      printf ("%s %s\n", name, rfx_errname (errno));
      return;
    }
  buf[n] = '\0';
  printf ("%s LEAKED:%s\n", name, g_strstrip (buf));
}

static int
probe_main (int argc, char **argv)
{
  setvbuf (stdout, NULL, _IOLBF, 0);
  /* out of a glob's reach, under the old name and the new */
  say_rename ("mv-secrets", "secrets", "x", 0);
  say_read ("read-x-key", "x/key");
  say_read ("read-secrets-key", "secrets/key");
  say_rename ("mv-vault", "vault", "v2", 0);
  say_read ("read-v2-key", "v2/key");
  say_rename ("mv-aws", "proj/.aws", "proj/aws2", 0);
  say_read ("read-aws2", "proj/aws2/credentials");
  /* into one: plain/note would become a/vault/note */
  say_rename ("into-vault", "plain", "a/vault", 0);
  say_read ("read-into", "a/vault/note");
  /* an exchange moves both ends */
  say_rename ("xchg-secrets", "plain", "secrets", RENAME_EXCHANGE);
  say_rename ("xchg-aws", "proj/.aws", "plain", RENAME_EXCHANGE);
  say_rename ("xchg-file", "plain/note", "vault", RENAME_EXCHANGE);
  /* a match wholly inside the moved directory follows it */
  say_rename ("mv-proj", "proj", "proj2", 0);
  say_read ("read-proj2-secret", "proj2/secrets/key");
  say_read ("read-proj2-aws", "proj2/.aws/credentials");
  say_rename ("mv-back", "proj2", "proj", 0);
  return 0;
}

/* --- the host side --------------------------------------------------------------- */

static const TestSecFile host_files[] = {
  { "secrets/key", "HIDDEN-KEY-1" },    { "vault/key", "VAULT-KEY-2" }, { "proj/.aws/credentials", "AWS-KEY-3" },
  { "proj/secrets/key", "PROJ-KEY-4" }, { "plain/note", "a note" },
};

static void
make_tree (RFx *fx)
{
  g_autofree char *a = g_build_filename (fx->ws, "a", NULL);

  test_sec_files_make (fx->ws, host_files, G_N_ELEMENTS (host_files));
  assert_int_equal (g_mkdir_with_parents (a, 0755), 0);
}

/* Every host file is where it was, as it was, and no key shows in OUT. */
static void
assert_host_unchanged (RFx *fx, const char *out)
{
  g_autofree char *path = NULL, *data = NULL;

  if (test_sec_files_changed (fx->ws, host_files, G_N_ELEMENTS (host_files), &path, &data) != NULL)
    fail_msg ("%s moved or changed on the host (now: %s)", path, data != NULL ? data : "missing");
  for (guint i = 0; i < 4; i++)
    if (strstr (out, host_files[i].contents) != NULL)
      fail_msg ("the sandbox printed %s's contents:\n%s", host_files[i].rel, out);
}

static char *
write_policy (RFx *fx, const char *name, const char *globs, bool build_root)
{
  char *path = g_build_filename (fx->tmp, name, NULL);
  /* serve has no --read for the probe as rfx_run gives run: a build under
   * /tmp would be behind the private /tmp */
  g_autofree char *probe_rule = build_root
                                  ? g_strdup_printf ("{\"path\":\"%s\",\"access\":\"read\",\"why\":\"the probe\"},",
                                                     g_getenv ("FUSEBOX_BUILD_ROOT"))
                                  : g_strdup ("");
  g_autofree char *text = g_strdup_printf ("{\"version\":1,\"rules\":["
                                           "{\"path\":\"/\",\"access\":\"read\",\"why\":\"the system\"},"
                                           "{\"path\":\"/tmp\",\"access\":\"write\",\"source\":\"private\","
                                           "\"why\":\"scratch\"},"
                                           "%s{\"path\":\"%s\",\"access\":\"write\",\"why\":\"the workspace\"}%s%s]}",
                                           probe_rule, fx->ws, globs[0] != '\0' ? "," : "", globs);

  test_write (path, text, 0644);
  return path;
}

RFX_CASE (test_run)
{
  g_autofree char *self = test_self ();
  g_autofree char *policy = write_policy (fx, "policy.json", RULE_SECRETS "," RULE_VAULT "," RULE_AWS, false);
  g_autofree char *run_dir = g_build_filename (fx->tmp, "run", NULL);
  g_autofree char *log_path = g_build_filename (run_dir, "access.jsonl", NULL);
  g_autofree char *log = NULL;
  RfxResult r = { 0 };

  make_tree (fx);
  rfx_run (fx, &r, "--policy", policy, "--run-dir", run_dir, "--", self, "--probe", NULL);
  if (r.status != 0 || strcmp (r.out, expected) != 0)
    fail_msg ("the probe (exit %d) said:\n%s\nwant:\n%s\nstderr:\n%s", r.status, r.out, expected, r.err);
  assert_host_unchanged (fx, r.out);
  /* the refusals are fusebox's own in the log */
  log = test_read_file (log_path);
  assert_non_null (log);
  {
    g_autofree char *from = g_strdup_printf ("\"path\":\"%s/secrets\"", fx->ws);
    g_autofree char *to = g_strdup_printf ("\"target\":\"%s/x\"", fx->ws);
    g_auto (GStrv) lines = g_strsplit (log, "\n", -1);
    bool found = false;
    for (guint i = 0; lines[i] != NULL && !found; i++)
      found = strstr (lines[i], "\"op\":\"rename\"") != NULL && strstr (lines[i], from) != NULL &&
              strstr (lines[i], to) != NULL && strstr (lines[i], "\"decision\":\"deny\"") != NULL &&
              strstr (lines[i], "\"rule_origin\":\"fusebox:ruled-directory\"") != NULL;
    if (!found)
      fail_msg ("no refused rename of secrets to x by fusebox:ruled-directory in the log:\n%s", log);
  }
  rfx_result_clear (&r);

  /* as the review ran it, through the shell and mv(1) */
  rfx_run (fx, &r, "--policy", policy, "--", "/bin/sh", "-c",
           "mv secrets x && cat x/key; mv x secrets; "
           "mv vault v2 && cat v2/key; mv v2 vault; "
           "mv proj/.aws proj/aws2 && cat proj/aws2/credentials; mv proj/aws2 proj/.aws; "
           "mv proj proj2 && cat proj2/secrets/key proj2/.aws/credentials; mv proj2 proj; true",
           NULL);
  assert_int_equal (r.status, 0);
  assert_host_unchanged (fx, r.out);
  if (strstr (r.err, "Permission denied") == NULL)
    fail_msg ("mv was not refused:\n%s", r.err);
  rfx_result_clear (&r);
}

/* process/start with SANDBOX (a JSON object or NULL): the probe's output. */
static char *
serve_probe (RFx *fx, TestServer *server, TestClient *client, const char *id, const char *sandbox)
{
  g_autofree char *self = test_self ();
  g_autofree char *sself = test_json_quote (self);
  g_autofree char *sws = test_json_quote (fx->ws);
  g_autofree char *params =
    g_strdup_printf ("{\"processId\":\"%s\",\"argv\":[%s,\"--probe\"],\"cwd\":%s,"
                     "\"env\":{\"PATH\":\"/usr/bin:/bin\"},\"tty\":false%s%s}",
                     id, sself, sws, sandbox != NULL ? ",\"sandbox\":" : "", sandbox != NULL ? sandbox : "");
  g_autoptr (JsonNode) start = test_client_call (client, "process/start", params);
  g_autoptr (JsonNode) exited = NULL;
  g_autoptr (GPtrArray) chunks = g_ptr_array_new_with_free_func ((GDestroyNotify)json_node_unref);
  GString *out = g_string_new (NULL);

  if (test_answer_result (start) == NULL)
    fail_msg ("process/start failed: %s; reproduce the server with: %s", test_answer_error_message (start),
              server->command);
  exited = test_client_note (client, "process/exited", id);
  if (exited == NULL)
    fail_msg ("no process/exited for %s; reproduce the server with: %s", id, server->command);
  /* every output notification came before process/exited: in the inbox */
  for (GList *l = client->inbox.head; l != NULL;)
    {
      GList *next = l->next;
      JsonObject *m = JSON_NODE_HOLDS_OBJECT (l->data) ? json_node_get_object (l->data) : NULL;
      JsonObject *p = m != NULL ? json_object_get_object_member (m, "params") : NULL;
      if (m != NULL && p != NULL &&
          g_strcmp0 (json_object_get_string_member_with_default (m, "method", NULL), "process/output") == 0 &&
          g_strcmp0 (json_object_get_string_member_with_default (p, "processId", NULL), id) == 0)
        {
          g_ptr_array_add (chunks, l->data);
          g_queue_delete_link (&client->inbox, l);
        }
      l = next;
    }
  for (guint i = 0; i < chunks->len; i++)
    {
      JsonObject *p = json_object_get_object_member (json_node_get_object (chunks->pdata[i]), "params");
      gsize len;
      g_autofree guchar *d = NULL;
      if (g_strcmp0 (json_object_get_string_member (p, "stream"), "stdout") != 0)
        continue;
      d = g_base64_decode (json_object_get_string_member (p, "chunk"), &len);
      g_string_append_len (out, (const char *)d, (gssize)len);
    }
  return g_string_free (out, FALSE);
}

RFX_CASE (test_serve)
{
  /* the server's policy hides secrets; the call's sandbox adds the rest */
  g_autofree char *policy = write_policy (fx, "server.json", RULE_SECRETS, true);
  const char *args[] = { "--workspace", fx->ws, "--policy", policy, NULL };
  const char *narrowing =
    "{\"fuseboxPolicy\":{\"version\":1,\"rules\":["
    "{\"path\":\"/\",\"access\":\"write\",\"why\":\"the server's policy bounds it\"}," RULE_VAULT "," RULE_AWS "]}}";
  TestServer *server = NULL;
  TestClient *client = NULL;
  g_autofree char *out = NULL;

  make_tree (fx);
  server = test_server_start (fx->tmp, args);
  assert_true (g_str_has_prefix (server->url, "ws://"));
  rfx_keep_pid (fx, server->pid);
  client = test_client_open (server->url);
  out = serve_probe (fx, server, client, "narrowed", narrowing);
  if (strcmp (out, expected) != 0)
    fail_msg ("the probe under a narrowed policy said:\n%s\nwant:\n%s\nreproduce the server with: %s", out, expected,
              server->command);
  assert_host_unchanged (fx, out);
  test_client_free (client);
  rfx_forget_pid (fx, server->pid);
  test_server_stop (server);
}

RFX_DEFINE_MAIN (probe_main, NULL, RFX_TEST (test_run), RFX_TEST (test_serve))
