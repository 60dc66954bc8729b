/* fusebox — the built-in policies for every kind of caller (root, a user, a
 * workspace under HOME or /tmp, HOME as the workspace...), their promises
 * checked over a matrix of HOME and WORKSPACE values, and fb_policy_to_json
 * round trips. */
#include "tests/unit/test-policy-util.h"

#include <glib/gstdio.h>

/* builtin:NAME for HOME and WS, its origin checked: every built-in names
 * itself as its spec. */
static FbPolicy *
builtin (const char *name, const char *home, const char *ws)
{
  FbPolicyVars vars = { .workspace = ws, .home = home, .cwd = ws, .run = "/run/fb/r" };
  g_autoptr (GError) error = NULL;
  g_autofree char *spec = g_strconcat ("builtin:", name, NULL);
  FbPolicy *policy = fb_policy_load_spec (spec, &vars, &error);

  if (policy == NULL)
    fail_msg ("%s for HOME=%s WORKSPACE=%s: %s", spec, home, ws, error->message);
  if (strcmp (fb_policy_get_origin (policy), spec) != 0)
    fail_msg ("%s for HOME=%s WORKSPACE=%s has origin %s", spec, home, ws, fb_policy_get_origin (policy));
  return policy;
}

/* The host path shown at VIEW_PATH (NULL for a private mount without RUN). */
static char *
host_of (const FbPolicyDecision *d, const char *view_path)
{
  const char *view = d->mount->view_path;
  const char *rest = strcmp (view, "/") == 0 ? view_path : view_path + strlen (view);

  if (d->mount->host_path == NULL)
    return NULL;
  if (rest[0] == '\0' || strcmp (rest, "/") == 0)
    return g_strdup (d->mount->host_path);
  if (strcmp (d->mount->host_path, "/") == 0)
    return g_strdup (rest);
  return g_strconcat (d->mount->host_path, rest, NULL);
}

static void
expect (FbPolicy *policy, const char *path, FbPolicyAccess access, const char *host)
{
  FbPolicyDecision d;
  g_autofree char *got_host = NULL;

  fb_policy_decide (policy, path, &d);
  got_host = host_of (&d, path);
  if (d.access != access)
    fail_msg ("%s: %s by %s (%s), expected %s", path, fb_policy_access_to_string (d.access), d.rule->origin,
              d.rule->why, fb_policy_access_to_string (access));
  if (host != NULL && g_strcmp0 (got_host, host) != 0)
    fail_msg ("%s shows host %s, expected %s", path, got_host, host);
}

static void
test_names (void **state)
{
  const char *const *names = fb_policy_builtin_names ();
  g_autofree char *joined = join_list (names);

  assert_string_equal (joined, "default,read-only,host,agent");
}

static void
test_user_workspace_under_home (void **state)
{
  g_autoptr (FbPolicy) p = builtin ("default", "/home/u", "/home/u/ws");
  FbPolicyDecision d;

  assert_int_equal (fb_policy_get_network (p), FB_POLICY_NETWORK_NONE);
  expect (p, "/", FB_POLICY_ACCESS_READ, "/");
  expect (p, "/usr/bin/sh", FB_POLICY_ACCESS_READ, "/usr/bin/sh");
  expect (p, "/home/other", FB_POLICY_ACCESS_HIDE, NULL);
  expect (p, "/root", FB_POLICY_ACCESS_HIDE, NULL);
  expect (p, "/home/u", FB_POLICY_ACCESS_WRITE, "/run/fb/r/private/%2Fhome%2Fu");
  expect (p, "/home/u/.bashrc", FB_POLICY_ACCESS_WRITE, "/run/fb/r/private/%2Fhome%2Fu/.bashrc");
  expect (p, "/home/u/ws", FB_POLICY_ACCESS_WRITE, "/home/u/ws");
  expect (p, "/home/u/ws/src/main.c", FB_POLICY_ACCESS_WRITE, "/home/u/ws/src/main.c");
  expect (p, "/home/u/ws/.git", FB_POLICY_ACCESS_HIDE, NULL);
  expect (p, "/tmp/x", FB_POLICY_ACCESS_WRITE, "/run/fb/r/private/%2Ftmp/x");

  fb_policy_decide (p, "/home", &d);
  assert_true (d.traversable);
  assert_string_equal (d.reachable_children[0], "u");
  assert_null (d.reachable_children[1]);
  fb_policy_decide (p, "/home/u/ws", &d);
  assert_true (d.is_mount_point);
  assert_string_equal (d.rule->origin, "builtin:default:rules[5]");
  assert_string_equal (d.rule->why, "the workspace");
}

static void
test_root_caller (void **state)
{
  g_autoptr (FbPolicy) p = builtin ("default", "/root", "/root/proj");
  guint n = 0;
  const FbPolicyRule *rules = fb_policy_get_rules (p, &n);

  /* /root is HOME: no hide rule for it, HOME's private rule covers it */
  for (guint i = 0; i < n; i++)
    assert_false (rules[i].path != NULL && strcmp (rules[i].path, "/root") == 0 &&
                  rules[i].access == FB_POLICY_ACCESS_HIDE);
  expect (p, "/root", FB_POLICY_ACCESS_WRITE, "/run/fb/r/private/%2Froot");
  expect (p, "/root/.ssh/id_rsa", FB_POLICY_ACCESS_WRITE, "/run/fb/r/private/%2Froot/.ssh/id_rsa");
  expect (p, "/root/proj/Makefile", FB_POLICY_ACCESS_WRITE, "/root/proj/Makefile");
  expect (p, "/home/u", FB_POLICY_ACCESS_HIDE, NULL);

  {
    g_autoptr (FbPolicy) q = builtin ("default", "/root", "/srv/app");

    expect (q, "/root", FB_POLICY_ACCESS_WRITE, "/run/fb/r/private/%2Froot");
    expect (q, "/srv/app/x", FB_POLICY_ACCESS_WRITE, "/srv/app/x");
    expect (q, "/srv/other", FB_POLICY_ACCESS_READ, "/srv/other");
  }
  {
    /* root working in /root itself: it is the workspace, the host's */
    g_autoptr (FbPolicy) q = builtin ("default", "/root", "/root");

    expect (q, "/root/.profile", FB_POLICY_ACCESS_WRITE, "/root/.profile");
  }
}

static void
test_workspace_under_tmp (void **state)
{
  g_autoptr (FbPolicy) p = builtin ("default", "/home/u", "/tmp/build");
  FbPolicyDecision d;

  expect (p, "/tmp", FB_POLICY_ACCESS_WRITE, "/run/fb/r/private/%2Ftmp");
  expect (p, "/tmp/other", FB_POLICY_ACCESS_WRITE, "/run/fb/r/private/%2Ftmp/other");
  expect (p, "/tmp/build/out.o", FB_POLICY_ACCESS_WRITE, "/tmp/build/out.o");
  fb_policy_decide (p, "/tmp", &d);
  assert_string_equal (d.mounted_children[0], "build");
}

static void
test_workspace_is_home (void **state)
{
  g_autoptr (FbPolicy) p = builtin ("default", "/home/u", "/home/u");
  FbPolicyDecision d;

  expect (p, "/home/u/.bashrc", FB_POLICY_ACCESS_WRITE, "/home/u/.bashrc");
  expect (p, "/home/other", FB_POLICY_ACCESS_HIDE, NULL);
  fb_policy_decide (p, "/home/u", &d);
  assert_false (d.mount->is_private);
}

static void
test_read_only (void **state)
{
  g_autoptr (FbPolicy) p = builtin ("read-only", "/home/u", "/home/u/ws");

  expect (p, "/home/u/ws/src", FB_POLICY_ACCESS_READ, "/home/u/ws/src");
  expect (p, "/home/u/.cache", FB_POLICY_ACCESS_WRITE, "/run/fb/r/private/%2Fhome%2Fu/.cache");
  expect (p, "/tmp/x", FB_POLICY_ACCESS_WRITE, NULL);
  expect (p, "/home/u/ws/.git", FB_POLICY_ACCESS_HIDE, NULL);
  {
    /* a workspace of "/" is already read by the first rule */
    g_autoptr (FbPolicy) q = builtin ("read-only", "/home/u", "/");

    expect (q, "/etc/passwd", FB_POLICY_ACCESS_READ, "/etc/passwd");
  }
}

static void
test_host (void **state)
{
  g_autoptr (FbPolicy) p = builtin ("host", "/home/u", "/home/u/ws");
  guint n = 0;

  fb_policy_get_rules (p, &n);
  assert_int_equal (n, 1);
  assert_int_equal (fb_policy_get_network (p), FB_POLICY_NETWORK_HOST);
  expect (p, "/home/other/x", FB_POLICY_ACCESS_WRITE, "/home/other/x");
  expect (p, "/home/u/ws/.git", FB_POLICY_ACCESS_HIDE, NULL);
  fb_policy_get_mounts (p, &n);
  assert_int_equal (n, 1);
}

/* agent: the default's promises, with .git, .agents and .codex readable at
 * every depth but never writable (a commit is refused, git status works). */
static void
test_agent (void **state)
{
  g_autoptr (FbPolicy) p = builtin ("agent", "/home/u", "/home/u/ws");
  g_autoptr (FbPolicy) d = builtin ("default", "/home/u", "/home/u/ws");
  static const char *const same[] = { "/",       "/usr/bin/sh",  "/home/other", "/root/x",
                                      "/home/u", "/home/u/.ssh", "/tmp/x",      "/home/u/ws/src/main.c" };

  assert_int_equal (fb_policy_get_network (p), FB_POLICY_NETWORK_NONE);
  expect (p, "/home/u/ws/.git", FB_POLICY_ACCESS_READ, "/home/u/ws/.git");
  expect (p, "/home/u/ws/.git/HEAD", FB_POLICY_ACCESS_READ, "/home/u/ws/.git/HEAD");
  expect (p, "/home/u/ws/.git/index.lock", FB_POLICY_ACCESS_READ, NULL);
  expect (p, "/home/u/ws/.agents/skills", FB_POLICY_ACCESS_READ, NULL);
  expect (p, "/home/u/ws/.codex/config.toml", FB_POLICY_ACCESS_READ, NULL);
  expect (p, "/home/u/ws/vendor/lib/.git/config", FB_POLICY_ACCESS_READ, NULL);
  expect (p, "/home/u/ws/src/main.c", FB_POLICY_ACCESS_WRITE, "/home/u/ws/src/main.c");
  expect (p, "/home/u/.gitconfig", FB_POLICY_ACCESS_WRITE, "/run/fb/r/private/%2Fhome%2Fu/.gitconfig");
  expect (p, "/usr/bin/git", FB_POLICY_ACCESS_READ, "/usr/bin/git");
  /* Everything else is decided as in the default. */
  for (guint i = 0; i < G_N_ELEMENTS (same); i++)
    {
      FbPolicyDecision a, b;
      fb_policy_decide (p, same[i], &a);
      fb_policy_decide (d, same[i], &b);
      assert_int_equal (a.access, b.access);
      assert_string_equal (a.mount->view_path, b.mount->view_path);
      assert_true (a.mount->is_private == b.mount->is_private);
    }
}

/* The promises over a matrix of callers: every combination loads, and
 *  - the workspace is the host's, writable (read in read-only);
 *  - HOME is private unless the workspace is or contains it, or it is "/";
 *  - /tmp is private unless the workspace is or contains it;
 *  - other people's files stay hidden unless the workspace contains them;
 *  - system files are read. */
static void
test_matrix (void **state)
{
  static const char *const homes[] = { "/root", "/home/u", "/", "/tmp", "/home", "/var/lib/svc", NULL };
  static const char *const workspaces[] = { "/",    "/home",  "/home/u", "/home/u/ws", "/root", "/root/p",
                                            "/tmp", "/tmp/b", "/srv/p",  "/home/zz/p", "/usr",  NULL };
  const char *names[] = { "default", "read-only", "agent" };

  for (guint h = 0; h < G_N_ELEMENTS (homes); h++)
    for (guint w = 0; w < G_N_ELEMENTS (workspaces); w++)
      for (guint k = 0; k < G_N_ELEMENTS (names); k++)
        {
          const char *home = homes[h];
          const char *ws = workspaces[w];
          bool writable = k != 1;
          g_autoptr (FbPolicy) p = builtin (names[k], home, ws);
          g_autoptr (FbPolicy) host = builtin ("host", home, ws);
          FbPolicyDecision d;

          if (ws != NULL)
            {
              FbPolicyAccess want = writable ? FB_POLICY_ACCESS_WRITE : FB_POLICY_ACCESS_READ;
              g_autofree char *inside = strcmp (ws, "/") == 0 ? g_strdup ("/x") : g_strconcat (ws, "/x", NULL);

              expect (p, ws, want, ws);
              expect (p, inside, want, inside);
            }
          if (home != NULL && strcmp (home, "/") != 0 && (ws == NULL || !fb_policy_path_has_prefix (home, ws)))
            {
              fb_policy_decide (p, home, &d);
              if (!d.mount->is_private || strcmp (d.mount->view_path, home) != 0)
                fail_msg ("%s HOME=%s WS=%s: HOME is not private", names[k], home, ws);
              assert_int_equal (d.access, FB_POLICY_ACCESS_WRITE);
            }
          if (ws == NULL || !fb_policy_path_has_prefix ("/tmp", ws))
            {
              fb_policy_decide (p, "/tmp/f", &d);
              if (!d.mount->is_private)
                fail_msg ("%s HOME=%s WS=%s: /tmp is not private", names[k], home, ws);
            }
          {
            const char *others[] = { "/home/zzz-other/f", "/root/f" };

            for (guint o = 0; o < G_N_ELEMENTS (others); o++)
              if ((ws == NULL || !fb_policy_path_has_prefix (others[o], ws)) &&
                  (home == NULL || !fb_policy_path_has_prefix (others[o], home)))
                expect (p, others[o], FB_POLICY_ACCESS_HIDE, NULL);
          }
          if (ws == NULL || !fb_policy_path_has_prefix ("/usr/bin/sh", ws))
            expect (p, "/usr/bin/sh", FB_POLICY_ACCESS_READ, "/usr/bin/sh");
          expect (host, "/usr/bin/sh", FB_POLICY_ACCESS_WRITE, "/usr/bin/sh");
        }
}

/* load → to_json → load gives the same rules and the same decisions. */
static void
assert_round_trip (FbPolicy *a, const FbPolicyVars *vars)
{
  g_autofree char *json = fb_policy_to_json (a);
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) b = fb_policy_load_data (json, -1, "dump.json", vars, &error);
  static const char *const paths[] = { "/",
                                       "/home/u",
                                       "/home/u/ws/.git",
                                       "/tmp/a.pem",
                                       "/etc/passwd",
                                       "/srv/app/secrets",
                                       "/srv/app/secrets/README",
                                       "/srv/app/logs/x",
                                       "/données/été/a.clé",
                                       "/home/u/ws/x.o",
                                       "/lit$eral",
                                       "/srv/[x]*/a.o" };
  guint na = 0;
  guint nb = 0;
  const FbPolicyRule *ra = fb_policy_get_rules (a, &na);
  const FbPolicyRule *rb;

  if (b == NULL)
    fail_msg ("to_json output does not load: %s\n%s", error->message, json);
  rb = fb_policy_get_rules (b, &nb);
  assert_int_equal (na, nb);
  assert_int_equal (fb_policy_get_network (a), fb_policy_get_network (b));
  for (guint i = 0; i < na; i++)
    {
      assert_int_equal (ra[i].kind, rb[i].kind);
      assert_int_equal (ra[i].access, rb[i].access);
      assert_string_equal (ra[i].why, rb[i].why);
      assert_true (g_strcmp0 (ra[i].path, rb[i].path) == 0);
      assert_true (g_strcmp0 (ra[i].glob, rb[i].glob) == 0);
      assert_true (g_strcmp0 (ra[i].source, rb[i].source) == 0);
    }
  for (guint i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      FbPolicyDecision da;
      FbPolicyDecision db;

      fb_policy_decide (a, paths[i], &da);
      fb_policy_decide (b, paths[i], &db);
      assert_int_equal (da.access, db.access);
      assert_int_equal (da.rule->index, db.rule->index);
      assert_int_equal (da.traversable, db.traversable);
      assert_string_equal (da.mount->view_path, db.mount->view_path);
      assert_true (g_strcmp0 (da.mount->host_path, db.mount->host_path) == 0);
    }
}

static void
test_to_json_round_trip (void **state)
{
  FbPolicyVars reload_vars = { .run = "/run/fb/r" }; /* no other variable is needed again */
  const char *root = g_getenv ("FUSEBOX_SOURCE_ROOT");
  const char *const *names = fb_policy_builtin_names ();

  for (guint i = 0; names[i] != NULL; i++)
    {
      g_autoptr (FbPolicy) p = builtin (names[i], "/home/u", "/home/u/ws");

      assert_round_trip (p, &reload_vars);
    }
  {
    FbPolicyVars vars = { .workspace = "/srv/[x]*", .home = "/home/u", .cwd = "/", .run = "/run/fb/r" };
    g_autoptr (FbPolicy) p =
      load_ok ("{ \"version\": 1, \"network\": \"host\", \"protected_names\": { \".env\": \"deny\" },\n"
               "  \"rules\": [ { \"path\": \"/\", \"access\": \"read\", \"why\": \"r\" },\n"
               "  { \"path\": \"/lit$$eral\", \"access\": \"write\", \"why\": \"a dollar\" },\n"
               "  { \"path\": \"/data\", \"access\": \"write\", \"source\": \"/srv/$$x\", \"why\": \"s\" },\n"
               "  { \"glob\": \"${WORKSPACE}/*.o\", \"access\": \"hide\", \"why\": \"escaped\" } ] }",
               &vars);
    g_autofree char *json = fb_policy_to_json (p);

    assert_contains (json, "\"/lit$$eral\"");
    assert_contains (json, "\".env\" : \"deny\"");
    assert_round_trip (p, &reload_vars);
  }
  if (root != NULL)
    {
      g_autofree char *dir_path = g_build_filename (root, "fixtures", "policies", NULL);
      g_autoptr (GDir) dir = g_dir_open (dir_path, 0, NULL);
      const char *name;

      assert_non_null (dir);
      while ((name = g_dir_read_name (dir)) != NULL)
        if (g_str_has_prefix (name, "good-") && g_str_has_suffix (name, ".json"))
          {
            g_autofree char *path = g_build_filename (dir_path, name, NULL);
            g_autoptr (GError) error = NULL;
            g_autoptr (FbPolicy) p = fb_policy_load_file (path, &test_vars, &error);

            FbPolicyVars fixture_reload_vars = { .run = test_vars.run };

            if (p == NULL)
              fail_msg ("%s: %s", name, error->message);
            assert_round_trip (p, &fixture_reload_vars);
          }
    }
}

/* A built-in's JSON is a policy a person can read and copy: variables, not
 * the caller's paths. */
static void
test_builtin_json_text (void **state)
{
  FbPolicyVars vars = { .workspace = "/home/u/ws", .home = "/home/u" };
  g_autoptr (GError) error = NULL;
  g_autofree char *json = fb_policy_builtin_json ("default", &vars, &error);

  assert_non_null (json);
  assert_contains (json, "\"${HOME}\"");
  assert_contains (json, "\"${WORKSPACE}\"");
  assert_contains (json, "\"private\"");
  assert_contains (json, "\"network\" : \"none\"");
}

/* The host's credentials, which "/" read showed a root caller (the view
 * reads as the caller): hidden by every built-in that reads "/", unless the
 * workspace is one of them or holds it; "host" shows the host as it is. */
static void
test_host_secrets_hidden (void **state)
{
  static const char *const secret[] = { "/etc/shadow",
                                        "/etc/shadow-",
                                        "/etc/shadow~",
                                        "/etc/shadow.bak",
                                        "/etc/gshadow",
                                        "/etc/gshadow-",
                                        "/etc/gshadow.old",
                                        "/var/backups/shadow.bak",
                                        "/var/backups/gshadow.bak",
                                        "/etc/security/opasswd",
                                        "/var/cache/debconf/passwords.dat",
                                        "/etc/ssh/ssh_host_ed25519_key",
                                        "/etc/ssh/ssh_host_rsa_key",
                                        "/etc/ssh/ssh_host_rsa_key.old",
                                        "/etc/ssl/private/site.key",
                                        "/etc/letsencrypt/live/site/privkey.pem" };
  static const char *const names[] = { "default", "read-only", "agent" };

  for (gsize n = 0; n < G_N_ELEMENTS (names); n++)
    {
      g_autoptr (FbPolicy) p = builtin (names[n], "/root", "/srv/app");

      for (gsize i = 0; i < G_N_ELEMENTS (secret); i++)
        expect (p, secret[i], FB_POLICY_ACCESS_HIDE, NULL);
      /* what is beside them is read as before */
      expect (p, "/etc/passwd", FB_POLICY_ACCESS_READ, "/etc/passwd");
      expect (p, "/etc/ssh/ssh_config", FB_POLICY_ACCESS_READ, "/etc/ssh/ssh_config");
      expect (p, "/etc/shadowsocks", FB_POLICY_ACCESS_READ, "/etc/shadowsocks");
      expect (p, "/var/backups/passwd.bak", FB_POLICY_ACCESS_READ, "/var/backups/passwd.bak");
      expect (p, "/var/cache/debconf/config.dat", FB_POLICY_ACCESS_READ, "/var/cache/debconf/config.dat");
      expect (p, "/etc/ssl/certs", FB_POLICY_ACCESS_READ, "/etc/ssl/certs");
    }
  {
    /* the caller works in /etc: its files are the workspace's, the host's */
    g_autoptr (FbPolicy) p = builtin ("default", "/root", "/etc");

    expect (p, "/etc/shadow", FB_POLICY_ACCESS_WRITE, "/etc/shadow");
    expect (p, "/etc/ssh/ssh_host_rsa_key", FB_POLICY_ACCESS_WRITE, "/etc/ssh/ssh_host_rsa_key");
  }
  {
    g_autoptr (FbPolicy) p = builtin ("host", "/root", "/srv/app");

    expect (p, "/etc/shadow", FB_POLICY_ACCESS_WRITE, "/etc/shadow");
  }
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_names), cmocka_unit_test (test_user_workspace_under_home),
                  cmocka_unit_test (test_root_caller), cmocka_unit_test (test_workspace_under_tmp),
                  cmocka_unit_test (test_workspace_is_home), cmocka_unit_test (test_read_only),
                  cmocka_unit_test (test_host), cmocka_unit_test (test_agent), cmocka_unit_test (test_matrix),
                  cmocka_unit_test (test_to_json_round_trip), cmocka_unit_test (test_builtin_json_text),
                  cmocka_unit_test (test_host_secrets_hidden))
