/* Unit tests: Codex's FileSystemSandboxContext → our policy.
 *
 * Each profile under fixtures/codex/ is written as Codex's exec-server sends
 * it; the translation is loaded with the real, strict loader and judged by
 * the decisions it makes, not by the shape of the JSON.  Malformed contexts
 * must fail with the JSON path of the offending field. */
#include "ipc/ipc-rpc-private.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static const FbPolicyVars test_vars = {
  .workspace = "/srv/project",
  .home = "/home/alice",
  .cwd = "/srv/project",
  .run = NULL,
};

static JsonNode *
parse_json (const char *text)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;

  if (!json_parser_load_from_data (parser, text, -1, &error))
    fail_msg ("test JSON does not parse: %s\n%s", error->message, text);
  return json_node_copy (json_parser_get_root (parser));
}

static JsonNode *
load_fixture (const char *name)
{
  const char *root = g_getenv ("FUSEBOX_SOURCE_ROOT");
  g_autofree char *path = NULL;
  g_autofree char *text = NULL;
  g_autoptr (GError) error = NULL;

  if (root == NULL)
    root = ".";
  path = g_build_filename (root, "fixtures", "codex", name, NULL);
  if (!g_file_get_contents (path, &text, NULL, &error))
    fail_msg ("fixture %s: %s (run through meson test, which sets FUSEBOX_SOURCE_ROOT)", path, error->message);
  return parse_json (text);
}

static FbPolicy *
translate_and_load (JsonNode *context, const FbPolicyVars *vars)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) translated = fb_rpc_codex_translate (context, vars, &error);

  if (translated == NULL)
    fail_msg ("translation failed: %s", error->message);
  FbPolicy *policy = fb_policy_load_json (translated, "<sandbox>", vars, &error);
  if (policy == NULL)
    {
      g_autofree char *text = json_to_string (translated, TRUE);
      fail_msg ("the translation does not load: %s\n%s", error->message, text);
    }
  return policy;
}

static FbPolicy *
fixture_policy (const char *name)
{
  g_autoptr (JsonNode) context = load_fixture (name);
  return translate_and_load (context, &test_vars);
}

static void
check_decision (const FbPolicy *policy, const char *path, FbPolicyAccess expected, const char *why_part,
                const char *file, int line)
{
  FbPolicyDecision d;

  fb_policy_decide (policy, path, &d);
  if (d.access != expected)
    fail_msg ("%s:%d: %s decided %s by %s (%s), expected %s", file, line, path, fb_policy_access_to_string (d.access),
              d.rule->origin, d.rule->why, fb_policy_access_to_string (expected));
  if (why_part != NULL && strstr (d.rule->why, why_part) == NULL)
    fail_msg ("%s:%d: %s decided by %s whose why is \"%s\"; expected it to mention \"%s\"", file, line, path,
              d.rule->origin, d.rule->why, why_part);
}

#define assert_access(policy, path, access) check_decision (policy, path, access, NULL, __FILE__, __LINE__)
#define assert_decision(policy, path, access, why) check_decision (policy, path, access, why, __FILE__, __LINE__)

static FbPolicyRuleKind
rule_kind (const FbPolicy *policy, const char *path)
{
  FbPolicyDecision d;

  fb_policy_decide (policy, path, &d);
  return d.rule->kind;
}

/* ---- realistic profiles ---- */

/* Codex's workspace-write mode with a secret carved out, as an agent harness
 * sends it for a shell command. */
static void
test_workspace_write (void **state)
{
  g_setenv ("TMPDIR", "/var/tmp/codex-run", TRUE);
  g_autoptr (FbPolicy) p = fixture_policy ("workspace-write.json");

  assert_int_equal (fb_policy_get_network (p), FB_POLICY_NETWORK_NONE);
  assert_decision (p, "/srv/project", FB_POLICY_ACCESS_WRITE, "codex: special project_roots (write)");
  assert_access (p, "/srv/project/src/main.c", FB_POLICY_ACCESS_WRITE);
  assert_decision (p, "/srv/project/secrets/api-token.txt", FB_POLICY_ACCESS_DENY, "codex: path (deny)");
  assert_access (p, "/srv/project/secrets/api-token.txt/x", FB_POLICY_ACCESS_DENY);
  assert_access (p, "/srv/project/secrets/other.txt", FB_POLICY_ACCESS_WRITE);
  assert_decision (p, "/etc/passwd", FB_POLICY_ACCESS_READ,
                   "codex: special root (read), from sandbox.permissions.file_system.entries[0]");
  assert_access (p, "/home/alice/.bashrc", FB_POLICY_ACCESS_READ);
  assert_decision (p, "/tmp/build.log", FB_POLICY_ACCESS_WRITE, "codex: special slash_tmp (write)");
  assert_decision (p, "/var/tmp/codex-run/x", FB_POLICY_ACCESS_WRITE, "codex: special tmpdir (write)");
  assert_access (p, "/var/tmp/other", FB_POLICY_ACCESS_READ);

  /* Codex's metadata rule: readable, not writable, under each writable root. */
  assert_decision (p, "/srv/project/.git", FB_POLICY_ACCESS_READ, ".git under the writable root /srv/project");
  assert_access (p, "/srv/project/.git/config", FB_POLICY_ACCESS_READ);
  assert_access (p, "/srv/project/.agents/skills/x.md", FB_POLICY_ACCESS_READ);
  assert_access (p, "/srv/project/.codex", FB_POLICY_ACCESS_READ);
  assert_access (p, "/tmp/.git", FB_POLICY_ACCESS_READ);
  /* Elsewhere the protected names narrow to read, never hide. */
  assert_access (p, "/srv/project/vendor/lib/.git/HEAD", FB_POLICY_ACCESS_READ);
  assert_int_equal (rule_kind (p, "/srv/project/vendor/lib/.git"), FB_POLICY_RULE_PROTECTED);
  assert_access (p, "/srv/project/.github/workflows/ci.yml", FB_POLICY_ACCESS_WRITE);
  g_unsetenv ("TMPDIR");
}

/* The context Codex 0.171 sends with every command and patch of a
 * workspace-write session, as captured on the wire: its policyContext (new
 * in 0.171) is ignored, the rest translated, so the result is exactly the
 * policy of the same context without it. */
static void
test_agent_context (void **state)
{
  g_autoptr (JsonNode) context = load_fixture ("agent-0.171.json");
  g_autoptr (JsonNode) bare = json_node_copy (context);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) with = NULL;
  g_autoptr (JsonNode) without = NULL;
  g_autoptr (FbPolicy) p = NULL;
  g_auto (GStrv) ignored = fb_rpc_codex_ignored_members (context);
  g_auto (GStrv) none = NULL;
  g_autofree char *a = NULL;
  g_autofree char *b = NULL;

  assert_non_null (ignored);
  assert_string_equal (ignored[0], "policyContext");
  assert_null (ignored[1]);
  json_object_remove_member (json_node_get_object (bare), "policyContext");
  none = fb_rpc_codex_ignored_members (bare);
  assert_null (none);
  with = fb_rpc_codex_translate (context, &test_vars, &error);
  assert_non_null (with);
  without = fb_rpc_codex_translate (bare, &test_vars, &error);
  assert_non_null (without);
  a = json_to_string (with, FALSE);
  b = json_to_string (without, FALSE);
  assert_string_equal (a, b);

  p = translate_and_load (context, &test_vars);
  assert_int_equal (fb_policy_get_network (p), FB_POLICY_NETWORK_NONE);
  assert_access (p, "/srv/project/src/main.c", FB_POLICY_ACCESS_WRITE);
  assert_access (p, "/srv/project/.git/HEAD", FB_POLICY_ACCESS_READ);
  assert_access (p, "/srv/project/.aws/credentials", FB_POLICY_ACCESS_READ);
  assert_access (p, "/etc/passwd", FB_POLICY_ACCESS_READ);

  /* An unknown member is ignored whatever it holds; a known one still has
   * its type checked. */
  {
    g_autoptr (JsonNode) odd = parse_json ("{\"permissions\": {\"type\": \"disabled\"}, \"sandboxPolicy\": 7, "
                                           "\"cwd\": 7}");
    g_autoptr (GError) e = NULL;
    g_autoptr (JsonNode) out = fb_rpc_codex_translate (odd, &test_vars, &e);
    assert_null (out);
    assert_non_null (strstr (e->message, "sandbox.cwd: expected a string"));
  }
}

static void
test_tmpdir_falls_back_to_slash_tmp (void **state)
{
  g_unsetenv ("TMPDIR");
  g_autoptr (FbPolicy) p = fixture_policy ("workspace-write.json");

  assert_access (p, "/tmp/x", FB_POLICY_ACCESS_WRITE);
  assert_access (p, "/var/tmp/codex-run/x", FB_POLICY_ACCESS_READ);
}

static void
test_read_only_root (void **state)
{
  g_autoptr (FbPolicy) p = fixture_policy ("read-only.json");

  assert_int_equal (fb_policy_get_network (p), FB_POLICY_NETWORK_NONE);
  assert_access (p, "/", FB_POLICY_ACCESS_READ);
  assert_access (p, "/etc/shadow", FB_POLICY_ACCESS_READ);
  assert_access (p, "/srv/project/src/main.c", FB_POLICY_ACCESS_READ);
  assert_access (p, "/srv/project/.git/config", FB_POLICY_ACCESS_READ);
  assert_access (p, "/tmp/x", FB_POLICY_ACCESS_READ);
}

static void
test_minimal_and_project_roots (void **state)
{
  g_autoptr (FbPolicy) p = fixture_policy ("minimal-project.json");
  FbPolicyDecision d;

  assert_int_equal (fb_policy_get_network (p), FB_POLICY_NETWORK_HOST);
  for (const char *const *sys = (const char *const[]){ "/bin/sh", "/sbin/ldconfig", "/usr/bin/ls", "/etc/hosts",
                                                       "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld.so", NULL };
       *sys != NULL; sys++)
    assert_decision (p, *sys, FB_POLICY_ACCESS_READ, "codex: special minimal (read)");
  /* both workspace roots, not only the cwd */
  assert_access (p, "/srv/app/main.py", FB_POLICY_ACCESS_WRITE);
  assert_access (p, "/srv/lib/util.py", FB_POLICY_ACCESS_WRITE);
  /* the subpath entry applies under every root */
  assert_decision (p, "/srv/app/node_modules/left-pad/index.js", FB_POLICY_ACCESS_READ,
                   "codex: special project_roots subpath node_modules (read)");
  assert_access (p, "/srv/lib/node_modules", FB_POLICY_ACCESS_READ);
  /* nothing else exists */
  assert_access (p, "/home/alice", FB_POLICY_ACCESS_HIDE);
  assert_access (p, "/opt/tool", FB_POLICY_ACCESS_HIDE);
  assert_access (p, "/srv/other", FB_POLICY_ACCESS_HIDE);
  assert_access (p, "/tmp", FB_POLICY_ACCESS_HIDE);
  assert_int_equal (rule_kind (p, "/opt"), FB_POLICY_RULE_DEFAULT);
  /* ...except the way to the roots */
  fb_policy_decide (p, "/srv", &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_HIDE);
  assert_true (d.traversable);
  assert_true (g_strv_contains ((const char *const *)d.reachable_children, "app"));
  assert_true (g_strv_contains ((const char *const *)d.reachable_children, "lib"));
  assert_false (g_strv_contains ((const char *const *)d.reachable_children, "other"));
  assert_access (p, "/srv/app/.git/index", FB_POLICY_ACCESS_READ);
}

static void
test_unrestricted (void **state)
{
  g_autoptr (FbPolicy) p = fixture_policy ("unrestricted.json");

  assert_int_equal (fb_policy_get_network (p), FB_POLICY_NETWORK_HOST);
  assert_decision (p, "/etc/passwd", FB_POLICY_ACCESS_WRITE, "codex: unrestricted file system (write)");
  /* Codex protects no metadata without a filesystem sandbox */
  assert_access (p, "/srv/project/.git/config", FB_POLICY_ACCESS_WRITE);
  assert_access (p, "/a/b/.codex/config.toml", FB_POLICY_ACCESS_WRITE);
}

static void
test_disabled_and_external (void **state)
{
  g_autoptr (FbPolicy) disabled = fixture_policy ("disabled.json");
  assert_int_equal (fb_policy_get_network (disabled), FB_POLICY_NETWORK_HOST);
  assert_access (disabled, "/root/.ssh/id_rsa", FB_POLICY_ACCESS_WRITE);

  g_autoptr (JsonNode) ctx =
    parse_json ("{\"permissions\": {\"type\": \"external\", \"network\": \"restricted\"}, \"windowsSandboxLevel\": "
                "\"disabled\"}");
  g_autoptr (FbPolicy) external = translate_and_load (ctx, &test_vars);
  assert_int_equal (fb_policy_get_network (external), FB_POLICY_NETWORK_NONE);
  assert_access (external, "/usr/bin/env", FB_POLICY_ACCESS_WRITE);
}

static void
test_glob_deny (void **state)
{
  g_autoptr (FbPolicy) p = fixture_policy ("glob-deny.json");

  /* a relative pattern is anchored at cwd, and "**" also matches no directory */
  assert_decision (p, "/srv/project/certs/server.pem", FB_POLICY_ACCESS_DENY, "codex: glob_pattern **/*.pem (deny)");
  assert_int_equal (rule_kind (p, "/srv/project/certs/server.pem"), FB_POLICY_RULE_GLOB);
  assert_access (p, "/srv/project/server.pem", FB_POLICY_ACCESS_DENY);
  assert_access (p, "/home/alice/key.pem", FB_POLICY_ACCESS_READ);
  assert_access (p, "/srv/project/certs/server.pem.txt", FB_POLICY_ACCESS_WRITE);
  /* absolute patterns stay where they are */
  assert_access (p, "/etc/ssl/private/site.key", FB_POLICY_ACCESS_DENY);
  assert_access (p, "/etc/ssl/certs/ca.crt", FB_POLICY_ACCESS_READ);
  /* {a,b} alternations are expanded */
  assert_access (p, "/srv/project/.env", FB_POLICY_ACCESS_DENY);
  assert_access (p, "/srv/project/app/.env.local", FB_POLICY_ACCESS_DENY);
  assert_access (p, "/srv/project/.envrc", FB_POLICY_ACCESS_WRITE);
  /* a glob that grants is ignored, as Codex ignores it */
  assert_access (p, "/srv/project/README.md", FB_POLICY_ACCESS_WRITE);
  /* "none" is Codex's legacy spelling of deny */
  assert_decision (p, "/srv/project/build/out.o", FB_POLICY_ACCESS_DENY, "codex: path (none)");
  assert_access (p, "/srv/project/.git/config", FB_POLICY_ACCESS_READ);
}

/* A write entry under .git opens that subtree only (Codex's
 * has_explicit_write_entry_for_metadata_path); the rest stays read-only. */
static void
test_git_write_below (void **state)
{
  g_autoptr (FbPolicy) p = fixture_policy ("git-hooks-write.json");

  assert_access (p, "/srv/project/.git/hooks", FB_POLICY_ACCESS_WRITE);
  assert_access (p, "/srv/project/.git/hooks/pre-commit", FB_POLICY_ACCESS_WRITE);
  assert_access (p, "/srv/project/.git/config", FB_POLICY_ACCESS_READ);
  assert_access (p, "/srv/project/.git", FB_POLICY_ACCESS_READ);
  assert_access (p, "/srv/project/.agents", FB_POLICY_ACCESS_READ);
}

/* A write entry naming ROOT/.git itself: no read-only carve-out there. */
static void
test_git_write_at (void **state)
{
  g_autoptr (FbPolicy) p = fixture_policy ("git-write.json");

  assert_access (p, "/srv/project/.git", FB_POLICY_ACCESS_WRITE);
  assert_access (p, "/srv/project/.git/config", FB_POLICY_ACCESS_WRITE);
  assert_access (p, "/srv/project/.git/objects/ab/cdef", FB_POLICY_ACCESS_WRITE);
  assert_access (p, "/srv/project/.codex/config.toml", FB_POLICY_ACCESS_READ);
  assert_access (p, "/srv/project/sub/.git/config", FB_POLICY_ACCESS_READ);
}

/* temporaryDirectories replace $TMPDIR; "~/" globs use userHomeDir. */
static void
test_home_and_temporary_directories (void **state)
{
  g_setenv ("TMPDIR", "/var/tmp/ignored", TRUE);
  g_autoptr (FbPolicy) p = fixture_policy ("home-and-tmp.json");

  assert_access (p, "/run/user/1000/codex-tmp/a.txt", FB_POLICY_ACCESS_WRITE);
  assert_access (p, "/var/tmp/ignored/a.txt", FB_POLICY_ACCESS_READ);
  assert_access (p, "/tmp/a.txt", FB_POLICY_ACCESS_READ);
  assert_access (p, "/home/alice/.ssh/id_ed25519", FB_POLICY_ACCESS_DENY);
  assert_access (p, "/home/alice/.sshrc", FB_POLICY_ACCESS_READ);
  /* current_working_directory is Codex's alias of project_roots */
  assert_access (p, "/home/alice/code/main.c", FB_POLICY_ACCESS_WRITE);
  assert_access (p, "/home/alice/code/.git/HEAD", FB_POLICY_ACCESS_READ);
  g_unsetenv ("TMPDIR");
}

/* Without cwd and workspaceRoots the caller's CWD is the project root, as
 * the exec-server uses its own. */
static void
test_cwd_from_vars (void **state)
{
  g_autoptr (JsonNode) ctx = parse_json (
    "{\"permissions\": {\"type\": \"managed\", \"network\": \"restricted\", \"file_system\": {\"type\": "
    "\"restricted\", "
    "\"entries\": [{\"path\": {\"type\": \"special\", \"value\": {\"kind\": \"project_roots\"}}, \"access\": "
    "\"write\"}]}}, \"windowsSandboxLevel\": \"disabled\"}");
  const FbPolicyVars vars = { .workspace = "/w", .home = "/home/alice", .cwd = "/work/dir", .run = NULL };
  g_autoptr (FbPolicy) p = translate_and_load (ctx, &vars);

  assert_access (p, "/work/dir/x", FB_POLICY_ACCESS_WRITE);
  assert_access (p, "/w/x", FB_POLICY_ACCESS_HIDE);
}

/* Entries naming one path merge with Codex's tie-break (deny > write > read),
 * and file URIs are decoded, normalized, and kept literal ("$" included). */
static void
test_merge_and_uris (void **state)
{
  g_autoptr (JsonNode) ctx = parse_json (
    "{\"permissions\": {\"type\": \"managed\", \"network\": \"restricted\", \"file_system\": {\"type\": "
    "\"restricted\", "
    "\"entries\": ["
    "{\"path\": {\"type\": \"special\", \"value\": {\"kind\": \"root\"}}, \"access\": \"read\"},"
    "{\"path\": {\"type\": \"path\", \"path\": \"file:///\"}, \"access\": \"write\"},"
    "{\"path\": {\"type\": \"path\", \"path\": \"file:///srv/data\"}, \"access\": \"deny\"},"
    "{\"path\": {\"type\": \"path\", \"path\": \"/srv/./data/\"}, \"access\": \"write\"},"
    "{\"path\": {\"type\": \"path\", \"path\": \"file://localhost/srv/My%20Docs\"}, \"access\": \"read\"},"
    "{\"path\": {\"type\": \"path\", \"path\": \"file:///srv/a$%7BHOME%7D/../cost$\"}, \"access\": \"read\"},"
    "{\"path\": {\"type\": \"path\", \"path\": \"file:///srv/a$%7BHOME%7D\"}, \"access\": \"deny\"}"
    "]}}, \"cwd\": \"/srv\", \"windowsSandboxLevel\": \"disabled\"}");
  g_autoptr (FbPolicy) p = translate_and_load (ctx, &test_vars);

  assert_access (p, "/etc/hosts", FB_POLICY_ACCESS_WRITE);
  assert_access (p, "/srv/data/x", FB_POLICY_ACCESS_DENY);
  assert_access (p, "/srv/My Docs/cv.odt", FB_POLICY_ACCESS_READ);
  assert_access (p, "/srv/cost$/bill", FB_POLICY_ACCESS_READ);
  /* "${HOME}" in a Codex path is a name, not our variable */
  assert_access (p, "/srv/a${HOME}/f", FB_POLICY_ACCESS_DENY);
  assert_access (p, "/home/alice/x", FB_POLICY_ACCESS_WRITE);
}

/* The translation satisfies the strict loader and every rule says where it
 * came from. */
static void
test_every_rule_explains_itself (void **state)
{
  static const char *const fixtures[] = { "workspace-write.json", "read-only.json", "minimal-project.json",
                                          "unrestricted.json",    "disabled.json",  "glob-deny.json",
                                          "git-hooks-write.json", "git-write.json", "home-and-tmp.json",
                                          "agent-0.171.json" };

  for (guint i = 0; i < G_N_ELEMENTS (fixtures); i++)
    {
      g_autoptr (FbPolicy) p = fixture_policy (fixtures[i]);
      guint n = 0;
      const FbPolicyRule *rules = fb_policy_get_rules (p, &n);

      assert_true (n > 0);
      for (guint r = 0; r < n; r++)
        if (!g_str_has_prefix (rules[r].why, "codex: "))
          fail_msg ("%s: rule %u (%s) has why \"%s\"", fixtures[i], r, rules[r].origin, rules[r].why);
    }
}

/* ---- malformed contexts: each error names its JSON path ---- */

#define ENTRY_CONTEXT(entry)                                                                                           \
  "{\"permissions\": {\"type\": \"managed\", \"network\": \"restricted\", \"file_system\": {\"type\": "                \
  "\"restricted\", \"entries\": ["                                                                                     \
  "{\"path\": {\"type\": \"special\", \"value\": {\"kind\": \"root\"}}, \"access\": \"read\"},"                        \
  "{\"path\": {\"type\": \"special\", \"value\": {\"kind\": \"project_roots\"}}, \"access\": \"write\"}," entry        \
  "]}}, \"cwd\": \"file:///srv/project\", \"windowsSandboxLevel\": \"disabled\"}"

/* The JSON path of the entry ENTRY_CONTEXT adds (after its two own). */
#define ENTRY_PATH "sandbox.permissions.file_system.entries[2]"

typedef struct
{
  const char *json;
  int code;
  const char *message; /* expected prefix of the message */
} BadCase;

static const BadCase bad_cases[] = {
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"special\", \"value\": {\"kind\": \"rooot\"}}, \"access\": \"read\"}"),
    FB_POLICY_ERROR_VALUE,
    ENTRY_PATH ".path.value.kind: unknown special path kind \"rooot\"; valid: root, "
               "minimal, project_roots" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"special\", \"value\": {\"kind\": \"root\", \"subpath\": \"x\"}}, "
                   "\"access\": \"read\"}"),
    FB_POLICY_ERROR_SCHEMA, ENTRY_PATH ".path.value: unknown field \"subpath\"" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"special\", \"value\": {\"kind\": \"project_roots\", \"subpath\": "
                   "\"../etc\"}}, \"access\": \"write\"}"),
    FB_POLICY_ERROR_VALUE, ENTRY_PATH ".path.value.subpath: \"../etc\" has a \"..\"" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"special\", \"value\": {\"kind\": \"project_roots\", \"subpath\": "
                   "\"/etc\"}}, \"access\": \"write\"}"),
    FB_POLICY_ERROR_VALUE, ENTRY_PATH ".path.value.subpath: \"/etc\" must be" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"path\", \"path\": \"file:///x\"}, \"access\": \"execute\"}"),
    FB_POLICY_ERROR_VALUE, ENTRY_PATH ".access: unknown access \"execute\"" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"path\", \"path\": \"file:///x\"}}"), FB_POLICY_ERROR_SCHEMA,
    ENTRY_PATH ".access: missing" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"path\", \"path\": \"srv/project\"}, \"access\": \"read\"}"),
    FB_POLICY_ERROR_VALUE,
    ENTRY_PATH ".path.path: \"srv/project\" is neither a file:// URI nor an absolute "
               "path" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"path\", \"path\": \"https://example.com/x\"}, \"access\": \"read\"}"),
    FB_POLICY_ERROR_VALUE, ENTRY_PATH ".path.path: \"https://example.com/x\" is neither" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"path\", \"path\": \"file://fileserver/share/x\"}, \"access\": \"read\"}"),
    FB_POLICY_ERROR_VALUE,
    ENTRY_PATH ".path.path: \"file://fileserver/share/x\" names "
               "host \"fileserver\"" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"path\", \"path\": \"file:///C:/src\"}, \"access\": \"read\"}"),
    FB_POLICY_ERROR_VALUE, ENTRY_PATH ".path.path: \"file:///C:/src\" is a Windows" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"path\", \"path\": \"file:///a%2Fb\"}, \"access\": \"read\"}"),
    FB_POLICY_ERROR_VALUE, ENTRY_PATH ".path.path: \"file:///a%2Fb\" is not a valid" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"path\", \"path\": \"file:///a?b\"}, \"access\": \"read\"}"),
    FB_POLICY_ERROR_VALUE, ENTRY_PATH ".path.path: \"file:///a?b\" has a query" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"regex\", \"pattern\": \".*\"}, \"access\": \"deny\"}"),
    FB_POLICY_ERROR_VALUE,
    ENTRY_PATH ".path.type: unknown path type \"regex\"; valid: path, glob_pattern, "
               "special" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"glob_pattern\", \"glob\": \"*.pem\"}, \"access\": \"deny\"}"),
    FB_POLICY_ERROR_SCHEMA, ENTRY_PATH ".path: unknown field \"glob\"" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"glob_pattern\", \"pattern\": 7}, \"access\": \"deny\"}"),
    FB_POLICY_ERROR_SCHEMA, ENTRY_PATH ".path.pattern: expected a string, found a number" },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"glob_pattern\", \"pattern\": "
                   "\"{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}\"}, \"access\": \"deny\"}"),
    FB_POLICY_ERROR_VALUE, ENTRY_PATH ".path.pattern: " },
  { ENTRY_CONTEXT ("{\"path\": {\"type\": \"path\", \"path\": \"file:///x\"}, \"access\": \"read\", "
                   "\"missing_path_behavior\": \"create\"}"),
    FB_POLICY_ERROR_VALUE, ENTRY_PATH ".missing_path_behavior: unknown missing_path_behavior \"create\"" },
  { ENTRY_CONTEXT ("\"root\""), FB_POLICY_ERROR_SCHEMA, ENTRY_PATH ": expected an object, found a string" },
  { "[1, 2]", FB_POLICY_ERROR_SCHEMA, "sandbox: expected an object, found an array" },
  { "{\"windowsSandboxLevel\": \"disabled\"}", FB_POLICY_ERROR_SCHEMA, "sandbox.permissions: missing" },
  { "{\"permissions\": {\"type\": \"danger-full-access\"}}", FB_POLICY_ERROR_VALUE,
    "sandbox.permissions.type: unknown permission profile type \"danger-full-access\"; valid: managed, disabled, "
    "external" },
  { "{\"permissions\": {\"type\": \"managed\", \"file_system\": {\"type\": \"unrestricted\"}}}", FB_POLICY_ERROR_SCHEMA,
    "sandbox.permissions.network: missing" },
  { "{\"permissions\": {\"type\": \"managed\", \"network\": \"offline\", \"file_system\": {\"type\": "
    "\"unrestricted\"}}}",
    FB_POLICY_ERROR_VALUE,
    "sandbox.permissions.network: unknown network policy \"offline\"; valid: restricted, enabled" },
  { "{\"permissions\": {\"type\": \"managed\", \"network\": \"enabled\", \"file_system\": {\"type\": \"restricted\", "
    "\"entries\": {}}}}",
    FB_POLICY_ERROR_SCHEMA, "sandbox.permissions.file_system.entries: expected an array, found an object" },
  { "{\"permissions\": {\"type\": \"managed\", \"network\": \"enabled\", \"file_system\": {\"type\": \"restricted\", "
    "\"entries\": [], \"glob_scan_max_depth\": 0}}}",
    FB_POLICY_ERROR_SCHEMA, "sandbox.permissions.file_system.glob_scan_max_depth: expected a positive integer" },
  { "{\"permissions\": {\"type\": \"managed\", \"network\": \"enabled\", \"file_system\": {\"type\": \"partial\"}}}",
    FB_POLICY_ERROR_VALUE, "sandbox.permissions.file_system.type: unknown file_system type \"partial\"" },
  { "{\"permissions\": {\"type\": \"disabled\", \"network\": \"enabled\"}}", FB_POLICY_ERROR_SCHEMA,
    "sandbox.permissions: unknown field \"network\"" },
  { "{\"permissions\": {\"type\": \"disabled\"}, \"windowsSandboxLevel\": \"max\"}", FB_POLICY_ERROR_VALUE,
    "sandbox.windowsSandboxLevel: unknown Windows sandbox level \"max\"" },
  { "{\"permissions\": {\"type\": \"disabled\"}, \"useLegacyLandlock\": \"yes\"}", FB_POLICY_ERROR_SCHEMA,
    "sandbox.useLegacyLandlock: expected a boolean, found a string" },
  { "{\"permissions\": {\"type\": \"disabled\"}, \"cwd\": \"relative/dir\"}", FB_POLICY_ERROR_VALUE,
    "sandbox.cwd: \"relative/dir\" is neither" },
  { "{\"permissions\": {\"type\": \"disabled\"}, \"workspaceRoots\": [\"file:///a\", 3]}", FB_POLICY_ERROR_SCHEMA,
    "sandbox.workspaceRoots[1]: expected a file URI string, found a number" },
  { "{\"permissions\": {\"type\": \"disabled\"}, \"temporaryDirectories\": \"file:///tmp\"}", FB_POLICY_ERROR_SCHEMA,
    "sandbox.temporaryDirectories: expected an array of file URIs, found a string" },
};

static void
test_malformed (void **state)
{
  for (guint i = 0; i < G_N_ELEMENTS (bad_cases); i++)
    {
      g_autoptr (JsonNode) ctx = parse_json (bad_cases[i].json);
      g_autoptr (GError) error = NULL;
      g_autoptr (JsonNode) out = fb_rpc_codex_translate (ctx, &test_vars, &error);

      if (out != NULL)
        fail_msg ("case %u translated although malformed: %s", i, bad_cases[i].json);
      if (!g_error_matches (error, FB_POLICY_ERROR, bad_cases[i].code) ||
          !g_str_has_prefix (error->message, bad_cases[i].message))
        fail_msg ("case %u: got [%s %d] \"%s\"\nexpected [%d] \"%s...\"", i, g_quark_to_string (error->domain),
                  error->code, error->message, bad_cases[i].code, bad_cases[i].message);
    }
}

/* project_roots with no cwd anywhere cannot be resolved: say which field. */
static void
test_missing_cwd (void **state)
{
  g_autoptr (JsonNode) ctx = parse_json (
    "{\"permissions\": {\"type\": \"managed\", \"network\": \"restricted\", \"file_system\": {\"type\": "
    "\"restricted\", "
    "\"entries\": [{\"path\": {\"type\": \"glob_pattern\", \"pattern\": \"*.key\"}, \"access\": \"deny\"}]}}}");
  const FbPolicyVars no_cwd = { .home = "/home/alice" };
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) out = fb_rpc_codex_translate (ctx, &no_cwd, &error);

  assert_null (out);
  assert_true (g_error_matches (error, FB_POLICY_ERROR, FB_POLICY_ERROR_VALUE));
  assert_true (g_str_has_prefix (error->message, "sandbox.permissions.file_system.entries[0].path.pattern: a "
                                                 "relative glob pattern needs a working directory"));
  assert_non_null (strstr (error->message, "\"cwd\""));
}

/* Paths past the loader's bound fail here, naming the field. */
static void
test_too_long (void **state)
{
  g_autofree char *name = g_strnfill (5000, 'x');
  g_autofree char *json = g_strdup_printf (ENTRY_CONTEXT ("{\"path\": {\"type\": \"path\", \"path\": \"file:///%s\"}, "
                                                          "\"access\": \"deny\"}"),
                                           name);
  g_autoptr (JsonNode) ctx = parse_json (json);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) out = fb_rpc_codex_translate (ctx, &test_vars, &error);

  assert_null (out);
  assert_true (g_error_matches (error, FB_POLICY_ERROR, FB_POLICY_ERROR_VALUE));
  assert_string_equal (error->message, ENTRY_PATH ".path.path: the path is longer than 4096 bytes");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_workspace_write),
    cmocka_unit_test (test_agent_context),
    cmocka_unit_test (test_tmpdir_falls_back_to_slash_tmp),
    cmocka_unit_test (test_read_only_root),
    cmocka_unit_test (test_minimal_and_project_roots),
    cmocka_unit_test (test_unrestricted),
    cmocka_unit_test (test_disabled_and_external),
    cmocka_unit_test (test_glob_deny),
    cmocka_unit_test (test_git_write_below),
    cmocka_unit_test (test_git_write_at),
    cmocka_unit_test (test_home_and_temporary_directories),
    cmocka_unit_test (test_cwd_from_vars),
    cmocka_unit_test (test_merge_and_uris),
    cmocka_unit_test (test_every_rule_explains_itself),
    cmocka_unit_test (test_malformed),
    cmocka_unit_test (test_missing_cwd),
    cmocka_unit_test (test_too_long),
  };

  return cmocka_run_group_tests_name ("ipc-codex", tests, NULL, NULL);
}
