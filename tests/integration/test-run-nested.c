/* fusebox — `fusebox run` where docs/security.md says it works: unprivileged, and
 * nested in another sandbox (`unshare -Urmpf --mount-proc`, bubblewrap);
 * and, where it can't, that it says why and how to fix it.
 *
 * Unprivileged without a 0666 /dev/fuse on the host: the test's child (the
 * "outer" process, set up in g_spawn's child_setup) enters a private mount
 * namespace, makes a fresh FUSE node (char 10:229) with the mode under test
 * on a tmpfs that allows devices, binds it over /dev/fuse, and drops to
 * uid/gid 1000 with no groups and no capabilities before it execs.  That is
 * the field's usual case (fuse3 packages make /dev/fuse 0666) on a host
 * whose /dev/fuse is 0600, and nothing of it outlives the child.
 *
 * Every run that works runs the smoke reporter (fixtures/fb-smoke) under a
 * policy that writes the workspace and denies a stand-in secret; a shell
 * just outside fusebox first reads the secret (the outer sandbox and the
 * outer user can: the denial inside is fusebox's) and reports its uid and
 * CapEff.  The test then asserts the exit code passed back, the caller's
 * uid inside, the allowed write on the host, the denied read and write,
 * fresh namespaces, /proc of the sandbox's own pid namespace and no
 * capabilities.
 *
 * bubblewrap as root with its default uid covers /proc/irq and /proc/bus,
 * after which no user namespace may mount a procfs (mount_too_revealing):
 * fusebox then exits 125 and both it and `fusebox check` name the masks and
 * the invocation that works.  As root inside a user namespace that maps
 * root alone (`unshare -r`, `bwrap --unshare-user --uid 1000`), every uid
 * there is the host's root, which a sandbox never is: exit 125 at uid-map,
 * and check names the identity and the fix.
 */
#include "tests/lib/test-caller.h"
#include "tests/lib/test-run.h"

#define OUTER_UID TEST_CALLER_UID
#define OUTER_SECRET_UNREADABLE 98

/* The host's /dev/fuse as it is, or a fresh node of a mode over it. */
#define DEV_HOST 0
#define DEV_0666 0666
#define DEV_0600 0600 /* root:root */

/* One run of the reporter under an outer set-up, and what it left; its
 * strings are the fixture's (fx->dir keeps them). */
typedef struct
{
  const char *smoke;
  const char *policy;
  const char *secret;
  const char *allowed;
  const char *secret_before;
  TestCaller outer; /* who runs the outer sandbox and fusebox */
  RfxResult r;
} Case;

static void
case_clear (Case *c)
{
  test_caller_clear (&c->outer);
  rfx_result_clear (&c->r);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Case, case_clear)

/* The workspace, the secret, the policy; owned by OUTER_UID when DROP; the
 * outer caller with a FUSE node of mode DEV (DEV_HOST: the host's). */
static void
case_init (RFx *fx, Case *c, mode_t dev, bool drop)
{
  c->smoke = test_dir_keep (fx->dir, test_fixture ("fb-smoke"));
  c->policy = test_dir_path (fx->dir, "policy.json");
  c->secret = test_dir_path (fx->dir, "ws/secret.txt");
  c->allowed = test_dir_path (fx->dir, "ws/allowed.txt");
  test_caller_init (&c->outer, fx->tmp);
  c->outer.fuse_mode = dev;
  c->outer.drop = drop;
  test_write (c->secret, "the stand-in secret\n", 0644);
  test_assert_host_readable (c->secret);
  c->secret_before = test_dir_keep (fx->dir, test_read_file (c->secret));
  g_autofree char *text =
    g_strdup_printf ("{ \"version\": 1, \"network\": \"none\", \"rules\": [\n"
                     "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"tools\" },\n"
                     "  { \"path\": \"%s\", \"access\": \"write\", \"why\": \"the workspace\" },\n"
                     "  { \"path\": \"%s\", \"access\": \"deny\", \"why\": \"the stand-in secret\" } ] }\n",
                     fx->ws, c->secret);
  test_write (c->policy, text, 0644);
  if (drop)
    {
      const char *mine[] = { fx->ws, fx->home, fx->state, c->secret };
      for (size_t i = 0; i < G_N_ELEMENTS (mine); i++)
        if (chown (mine[i], TEST_CALLER_UID, TEST_CALLER_GID) < 0)
          fail_msg ("chown %s: %s", mine[i], g_strerror (errno));
    }
}

/* A program the case needs: its path, or a skip (a failure in CI). */
static char *
need_program (const char *name)
{
  char *path = g_find_program_in_path (name);
  if (path == NULL)
    test_skip_test (true, "%s is not installed", name);
  return path;
}

/* The shell between the outer sandbox and fusebox: proves the secret is
 * readable there, says who it runs as, then execs the rest. */
static const char outer_script[] =
  "s=$1; shift\n"
  "head -c1 -- \"$s\" >/dev/null || exit 98\n"
  "printf 'outer: uid=%s %s\\n' \"$(id -u)\" \"$(grep '^CapEff:' /proc/self/status | tr -d '[:space:]')\" >&2\n"
  "exec \"$@\"\n";

/* PREFIX... (the outer sandbox, NULL-terminated) + the shell + `fusebox
 * run` of the reporter, spawned as the case's outer caller; into C->r. */
static void
run_outer (RFx *fx, Case *c, const char *const *prefix)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  for (; prefix && *prefix; prefix++)
    g_ptr_array_add (argv, (char *)*prefix);
  const char *rest[] = { "/bin/sh",
                         "-c",
                         outer_script,
                         "sh",
                         c->secret,
                         test_bin (),
                         "run",
                         "--read",
                         g_getenv ("FUSEBOX_BUILD_ROOT"),
                         "--policy",
                         c->policy,
                         "--",
                         c->smoke,
                         "--allowed-write",
                         c->allowed,
                         "--denied-write",
                         c->secret,
                         "--exit-code",
                         "7" };
  for (size_t i = 0; i < G_N_ELEMENTS (rest); i++)
    g_ptr_array_add (argv, (char *)rest[i]);
  g_ptr_array_add (argv, NULL);

  g_auto (GStrv) env = rfx_env (fx);

  rfx_set_repro (fx, (char **)argv->pdata);
  test_caller_annotate (&c->outer, &fx->repro);
  test_caller_run (&c->outer, fx->ws, env, (char **)argv->pdata, &c->r);
  if (c->r.status == OUTER_SECRET_UNREADABLE)
    fail_msg ("the secret %s is not readable just outside fusebox, so its denial inside would prove nothing: %s",
              c->secret, c->r.err);
}

/* `fusebox check` under the case's outer set-up; its stdout in *ret_out. */
static int
check_outer (RFx *fx, const Case *c, const char *const *prefix, char **ret_out)
{
  g_auto (GStrv) env = rfx_env (fx);

  return test_caller_check (&c->outer, fx->ws, env, prefix, ret_out);
}

/* check agrees that run works under this outer set-up */
static void
assert_check_ok (RFx *fx, const Case *c, const char *const *prefix)
{
  g_autofree char *out = NULL;
  int status = check_outer (fx, c, prefix, &out);
  if (status != 0 || !g_str_has_suffix (out, "'fusebox run' can work here.\n"))
    fail_msg ("fusebox check (exit %d) disagrees with the run that worked:\n%s", status, out);
}

/* The unprivileged cases need a host that lets uid 1000 make user
 * namespaces: skip where check says it can't, unless CI insists. */
static void
need_unprivileged (RFx *fx)
{
  g_auto (TestCaller) outer = { 0 };
  g_auto (GStrv) env = rfx_env (fx);

  test_caller_init (&outer, fx->tmp);
  outer.fuse_mode = DEV_0666;
  outer.drop = true;
  test_caller_require_sandboxes (&outer, fx->ws, env);
}

/* The reporter ran confined: see the file's comment.  OUTER is who the
 * shell outside fusebox was, INSIDE_UID the uid fusebox's caller had in its
 * own user namespace (the sandbox keeps it), HOST_UID the owner on the
 * host of what the sandbox created. */
static void
assert_confined (const Case *c, const char *outer, guint inside_uid, uid_t host_uid)
{
  const RfxResult *r = &c->r;

  if (r->status != 7)
    fail_msg ("exit status %d, not the reporter's 7; stderr:\n%s", r->status, r->err);
  if (strstr (r->err, outer) == NULL)
    fail_msg ("the shell outside fusebox was not \"%s\":\n%s", outer, r->err);
  g_autoptr (JsonObject) o = test_parse_object (r->out);

  assert_int_equal (json_object_get_int_member (o, "euid"), inside_uid);
  assert_string_equal (test_json_str (o, "allowed_write"), "OK");
  assert_string_equal (test_json_str (o, "denied_read"), "EACCES");
  assert_string_equal (test_json_str (o, "denied_write"), "EACCES");

  /* on the host: the allowed write landed, the secret kept its content */
  g_autofree char *allowed_text = test_read_file (c->allowed);
  assert_non_null (allowed_text);
  assert_non_null (strstr (allowed_text, "fb-smoke was here"));
  struct stat st;
  assert_int_equal (stat (c->allowed, &st), 0);
  assert_int_equal (st.st_uid, host_uid);
  g_autofree char *secret_after = test_read_file (c->secret);
  assert_string_equal (secret_after, c->secret_before);

  /* the sandbox's own namespaces and /proc, no capabilities */
  JsonObject *ns = json_object_get_object_member (o, "ns");
  static const char *const fresh[] = { "user", "mnt", "pid", "net", "ipc", "uts" };
  for (size_t i = 0; i < G_N_ELEMENTS (fresh); i++)
    {
      g_autofree char *mine = test_own_ns (fresh[i]);
      assert_string_not_equal (json_object_get_string_member (ns, fresh[i]), mine);
    }
  assert_string_equal (test_json_str (o, "proc_pid_ns"), json_object_get_string_member (ns, "pid"));
  assert_string_equal (test_json_str (o, "proc_fstype"), "proc");
  static const char *const caps[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
  for (size_t i = 0; i < G_N_ELEMENTS (caps); i++)
    assert_string_equal (test_json_str (o, caps[i]), "0000000000000000");
  assert_int_equal (json_object_get_int_member (o, "NoNewPrivs"), 1);
  assert_int_equal (json_object_get_int_member (o, "Seccomp"), 2);
}

#define OUTER_UNPRIVILEGED "outer: uid=1000 CapEff:0000000000000000"

/* A normal user with a 0666 /dev/fuse, after the outer sandbox PREFIX (or
 * none): the reporter runs confined, as the user OUTER says it was, with
 * INSIDE_UID; and check agrees (without an outer sandbox, the run is what
 * check's own probe is). */
static void
assert_unprivileged_confined (RFx *fx, const char *const *prefix, const char *outer, guint inside_uid)
{
  g_auto (Case) c = { 0 };

  case_init (fx, &c, DEV_0666, true);
  need_unprivileged (fx);
  run_outer (fx, &c, prefix);
  assert_confined (&c, outer, inside_uid, OUTER_UID);
  if (prefix != NULL)
    assert_check_ok (fx, &c, prefix);
}

/* (a) a normal user with a 0666 /dev/fuse */
RFX_CASE (test_unprivileged)
{
  assert_unprivileged_confined (fx, NULL, OUTER_UNPRIVILEGED, OUTER_UID);
}

/* (b) a normal user with a 0600 /dev/fuse: nothing runs, and both run and
 * check name the device and the fix */
RFX_CASE (test_unprivileged_fuse_0600)
{
  g_auto (Case) c = { 0 };
  case_init (fx, &c, DEV_0600, true);
  need_unprivileged (fx);
  run_outer (fx, &c, NULL);
  if (c.r.status != 125)
    fail_msg ("exit status %d, not 125; stderr:\n%s", c.r.status, c.r.err);
  test_assert_contains (c.r.err, OUTER_UNPRIVILEGED, "open-fuse: /dev/fuse: ", "Permission denied",
                        "chmod 0666 /dev/fuse", NULL);
  /* run's own probes said it too */
  assert_non_null (strstr (c.r.err, "FAIL  /dev/fuse: not openable for read and write"));
  assert_string_equal (c.r.out, "");
  assert_false (g_file_test (c.allowed, G_FILE_TEST_EXISTS)); /* nothing ran */

  g_autofree char *out = NULL;
  assert_int_equal (check_outer (fx, &c, NULL, &out), 1);
  if (!strstr (out, "FAIL  /dev/fuse: not openable for read and write (Permission denied); fix: sudo chmod 0666 "
                    "/dev/fuse"))
    fail_msg ("check does not name /dev/fuse and its fix:\n%s", out);
}

/* The host's root after the outer sandbox PREFIX runs the reporter: it
 * exits 125, says why (its stderr has OUTER, who the shell outside fusebox
 * was, when not NULL, and each of WANT), runs nothing, and check's output has each of
 * CHECK_SAYS (both lists NULL-terminated). */
static void
assert_root_refused (RFx *fx, const char *const *prefix, const char *outer, const char *const *want,
                     const char *const *check_says)
{
  g_auto (Case) c = { 0 };

  case_init (fx, &c, DEV_HOST, false);
  run_outer (fx, &c, prefix);
  if (c.r.status != 125)
    fail_msg ("exit status %d, not 125; stderr:\n%s", c.r.status, c.r.err);
  if (outer != NULL)
    assert_non_null (strstr (c.r.err, outer));
  for (; *want != NULL; want++)
    if (strstr (c.r.err, *want) == NULL)
      fail_msg ("no \"%s\" in stderr:\n%s", *want, c.r.err);
  assert_string_equal (c.r.out, "");
  assert_false (g_file_test (c.allowed, G_FILE_TEST_EXISTS)); /* nothing ran */

  g_autofree char *out = NULL;
  assert_int_equal (check_outer (fx, &c, prefix, &out), 1);
  for (; *check_says != NULL; check_says++)
    if (strstr (out, *check_says) == NULL)
      fail_msg ("check does not say \"%s\":\n%s", *check_says, out);
}

/* The host's root in a user namespace that maps root alone: its sandbox
 * would be the host's root (no other host id is there to map it to), so
 * nothing runs, and run and check say why and what to do. */
static void
assert_root_alone_refused (RFx *fx, const char *const *prefix, const char *outer)
{
  static const char *const want[] = { "uid-map: ", "never as root", "run the outer sandbox as a normal user", NULL };
  static const char *const check_says[] = { "FAIL  sandbox identity: you are the host's root", NULL };

  assert_root_refused (fx, prefix, outer, want, check_says);
}

/* (c) nested in unshare -Urmpf --mount-proc.  As a normal user the caller
 * is uid 0 of unshare's user namespace and runs as such; as root, that uid
 * 0 is the host's root and the namespace maps nothing else (before, the
 * sandbox ran as the host's root). */
RFX_CASE (test_nested_unshare)
{
  g_autofree char *unshare = need_program ("unshare");
  const char *prefix[] = { unshare, "-Urmpf", "--mount-proc", NULL };
  assert_root_alone_refused (fx, prefix, "outer: uid=0 CapEff:");
}

RFX_CASE (test_nested_unshare_unprivileged)
{
  g_autofree char *unshare = need_program ("unshare");
  const char *prefix[] = { unshare, "-Urmpf", "--mount-proc", NULL };
  assert_unprivileged_confined (fx, prefix, "outer: uid=0 CapEff:", 0);
}

/* (d) nested in bubblewrap exposing /dev/fuse, as a normal user: the
 * locked-down outer sandbox an agent harness would use (its own root
 * read-only, its own /dev and /proc, the test directory bound writable) */
RFX_CASE (test_nested_bwrap)
{
  g_autofree char *bwrap = need_program ("bwrap");
  /* the build tree (fusebox and the reporter) stays visible even when it
   * lives under /tmp, which bwrap replaces with a tmpfs */
  const char *build = g_getenv ("FUSEBOX_BUILD_ROOT");
  assert_non_null (build);
  const char *prefix[] = { bwrap,
                           "--unshare-all",
                           "--die-with-parent",
                           "--ro-bind",
                           "/",
                           "/",
                           "--dev",
                           "/dev",
                           "--dev-bind",
                           "/dev/fuse",
                           "/dev/fuse",
                           "--proc",
                           "/proc",
                           "--tmpfs",
                           "/tmp",
                           "--ro-bind",
                           build,
                           build,
                           "--bind",
                           fx->tmp,
                           fx->tmp,
                           "--chdir",
                           fx->ws,
                           NULL };
  assert_unprivileged_confined (fx, prefix, OUTER_UNPRIVILEGED, OUTER_UID);
}

/* bubblewrap as root with its default uid 0 inside: /proc/irq and /proc/bus
 * are covered, no fresh procfs can be mounted; exit 125, and run and check
 * give the masks and the invocations that work */
RFX_CASE (test_nested_bwrap_root_refused)
{
  g_autofree char *bwrap = need_program ("bwrap");
  const char *prefix[] = { bwrap,    "--unshare-pid", "--die-with-parent", "--dev-bind", "/",         "/",
                           "--proc", "/proc",         "--dev-bind",        "/dev/fuse",  "/dev/fuse", NULL };
  static const char *const want[] = { "mount-proc: /proc: ", "every procfs here has mounts over it (",
                                      "run bwrap as a normal user (", NULL };
  static const char *const check_says[] = { "FAIL  fresh procfs: ", "run bwrap as a normal user", NULL };
  assert_root_refused (fx, prefix, NULL, want, check_says);
}

/* ...and as root with a uid other than 0 inside: that uid 1000 of bwrap's
 * namespace is the host's root, the only id mapped there (before, the
 * sandbox ran as the host's root) */
RFX_CASE (test_nested_bwrap_root_uid)
{
  g_autofree char *bwrap = need_program ("bwrap");
  const char *prefix[] = { bwrap,           "--unshare-user",    "--uid",      "1000",      "--gid", "1000",
                           "--unshare-pid", "--die-with-parent", "--dev-bind", "/",         "/",     "--proc",
                           "/proc",         "--dev-bind",        "/dev/fuse",  "/dev/fuse", NULL };
  assert_root_alone_refused (fx, prefix, "outer: uid=1000 CapEff:0000000000000000");
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    RFX_TEST (test_unprivileged),          RFX_TEST (test_unprivileged_fuse_0600),
    RFX_TEST (test_nested_unshare),        RFX_TEST (test_nested_unshare_unprivileged),
    RFX_TEST (test_nested_bwrap),          RFX_TEST (test_nested_bwrap_root_refused),
    RFX_TEST (test_nested_bwrap_root_uid),
  };

  rfx_require ();
  if (access ("/dev/fuse", F_OK) != 0)
    test_skip_or_fail ("/dev/fuse is missing: the unprivileged cases bind a fresh node over it");
  test_filter_tests (argv[0]);
  return cmocka_run_group_tests (tests, NULL, NULL);
}
