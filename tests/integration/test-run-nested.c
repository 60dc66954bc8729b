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
#include "tests/lib/test-run.h"

#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>

#define OUTER_UID 1000
#define OUTER_GID 1000
#define OUTER_SETUP_FAILED 99
#define OUTER_SECRET_UNREADABLE 98

typedef enum
{
  DEV_HOST, /* the host's /dev/fuse as it is */
  DEV_0666, /* a fresh node, mode 0666, over /dev/fuse */
  DEV_0600, /* a fresh node, mode 0600 root:root, over /dev/fuse */
} DevMode;

typedef struct
{
  DevMode dev;
  bool drop; /* to OUTER_UID/OUTER_GID */
  char *devdir;
  char *node;
} Outer;

static void
outer_die (const char *step)
{
  /* async-signal-safe: this runs between fork and exec */
  const char *msg = strerror (errno);
  (void)!write (2, "outer setup: ", 13);
  (void)!write (2, step, strlen (step));
  (void)!write (2, ": ", 2);
  (void)!write (2, msg, strlen (msg));
  (void)!write (2, "\n", 1);
  _exit (OUTER_SETUP_FAILED);
}

static void
outer_setup (gpointer data)
{
  const Outer *o = data;

  if (o->dev != DEV_HOST)
    {
      if (unshare (CLONE_NEWNS) < 0)
        outer_die ("unshare(CLONE_NEWNS)");
      if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        outer_die ("make / private");
      /* no MS_NODEV: the node must work */
      if (mount ("tmpfs", o->devdir, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=16k") < 0)
        outer_die ("tmpfs for the node");
      mode_t mode = o->dev == DEV_0666 ? 0666 : 0600;
      if (mknod (o->node, S_IFCHR | mode, makedev (10, 229)) < 0 || chmod (o->node, mode) < 0)
        outer_die ("mknod c 10 229");
      if (mount (o->node, "/dev/fuse", NULL, MS_BIND, NULL) < 0)
        outer_die ("bind over /dev/fuse");
    }
  if (o->drop)
    {
      /* from uid 0 to another uid: the kernel clears the permitted,
       * effective and ambient capability sets */
      if (setgroups (0, NULL) < 0 || setresgid (OUTER_GID, OUTER_GID, OUTER_GID) < 0 ||
          setresuid (OUTER_UID, OUTER_UID, OUTER_UID) < 0)
        outer_die ("drop to uid/gid 1000");
    }
}

typedef struct
{
  char *smoke;
  char *policy;
  char *secret;
  char *allowed;
  char *secret_before;
} Case;

static void
case_clear (Case *c)
{
  g_free (c->smoke);
  g_free (c->policy);
  g_free (c->secret);
  g_free (c->allowed);
  g_free (c->secret_before);
}

/* The workspace, the secret, the policy; owned by OUTER_UID when DROP. */
static void
case_init (RFx *fx, Case *c, bool drop)
{
  c->smoke = test_fixture ("fb-smoke");
  c->policy = g_build_filename (fx->tmp, "policy.json", NULL);
  c->secret = g_build_filename (fx->ws, "secret.txt", NULL);
  c->allowed = g_build_filename (fx->ws, "allowed.txt", NULL);
  test_write (c->secret, "the stand-in secret\n", 0644);
  test_assert_host_readable (c->secret);
  c->secret_before = test_read_file (c->secret);
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
        if (chown (mine[i], OUTER_UID, OUTER_GID) < 0)
          fail_msg ("chown %s: %s", mine[i], g_strerror (errno));
    }
}

/* A program the case needs: its path, or a skip (a failure in CI). */
static char *
need_program (const char *name)
{
  char *path = g_find_program_in_path (name);
  if (path == NULL)
    {
      if (g_strcmp0 (g_getenv ("FUSEBOX_TESTS_MUST_RUN"), "1") == 0)
        fail_msg ("FUSEBOX_TESTS_MUST_RUN=1 but %s is not installed", name);
      fprintf (stderr, "skipped: %s is not installed\n", name);
      skip ();
    }
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
 * run` of the reporter, spawned with DEV and DROP applied first. */
static void
run_outer (RFx *fx, RfxResult *ret, const Case *c, DevMode dev, bool drop, const char *const *prefix)
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

  Outer o = { .dev = dev, .drop = drop };
  o.devdir = g_build_filename (fx->tmp, "outer-dev", NULL);
  o.node = g_build_filename (o.devdir, "fuse", NULL);
  assert_int_equal (g_mkdir_with_parents (o.devdir, 0755), 0);

  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  int status = 0;
  rfx_set_repro (fx, (char **)argv->pdata);
  if (dev != DEV_HOST || drop)
    {
      /* the repro line can't show the outer set-up: say it */
      g_autofree char *old = fx->repro;
      fx->repro = g_strdup_printf ("%s   (after: unshare -m; a mode %s FUSE node bound over /dev/fuse%s)", old,
                                   dev == DEV_0666   ? "0666"
                                   : dev == DEV_0600 ? "0600"
                                                     : "host",
                                   drop ? "; setpriv --reuid 1000 --regid 1000 --clear-groups" : "");
    }
  memset (ret, 0, sizeof *ret);
  if (!g_spawn_sync (fx->ws, (char **)argv->pdata, env, G_SPAWN_DEFAULT, outer_setup, &o, &ret->out, &ret->err, &status,
                     &error))
    fail_msg ("spawn %s: %s", (char *)argv->pdata[0], error->message);
  ret->status = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
  g_free (o.devdir);
  g_free (o.node);
  if (ret->status == OUTER_SETUP_FAILED)
    fail_msg ("the outer set-up failed: %s", ret->err);
  if (ret->status == OUTER_SECRET_UNREADABLE)
    fail_msg ("the secret %s is not readable just outside fusebox, so its denial inside would prove nothing: %s",
              c->secret, ret->err);
}

/* `fusebox check` under the same outer set-up; its stdout in *ret_out. */
static int
check_outer (RFx *fx, DevMode dev, bool drop, const char *const *prefix, char **ret_out)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  for (; prefix && *prefix; prefix++)
    g_ptr_array_add (argv, (char *)*prefix);
  g_ptr_array_add (argv, (char *)test_bin ());
  g_ptr_array_add (argv, (char *)"check");
  g_ptr_array_add (argv, NULL);
  Outer o = { .dev = dev, .drop = drop };
  o.devdir = g_build_filename (fx->tmp, "outer-dev", NULL);
  o.node = g_build_filename (o.devdir, "fuse", NULL);
  assert_int_equal (g_mkdir_with_parents (o.devdir, 0755), 0);
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  int status = 0;
  if (!g_spawn_sync (fx->ws, (char **)argv->pdata, env, G_SPAWN_STDERR_TO_DEV_NULL, outer_setup, &o, ret_out, NULL,
                     &status, &error))
    fail_msg ("spawn %s: %s", (char *)argv->pdata[0], error->message);
  g_free (o.devdir);
  g_free (o.node);
  assert_true (WIFEXITED (status));
  assert_int_not_equal (WEXITSTATUS (status), OUTER_SETUP_FAILED);
  return WEXITSTATUS (status);
}

/* check agrees that run works under this outer set-up */
static void
assert_check_ok (RFx *fx, DevMode dev, bool drop, const char *const *prefix)
{
  g_autofree char *out = NULL;
  int status = check_outer (fx, dev, drop, prefix, &out);
  if (status != 0 || !g_str_has_suffix (out, "'fusebox run' can work here.\n"))
    fail_msg ("fusebox check (exit %d) disagrees with the run that worked:\n%s", status, out);
}

/* The unprivileged cases need a host that lets uid 1000 make user
 * namespaces (Ubuntu's AppArmor restriction, a zero sysctl may forbid
 * it): skip where check says it can't, unless CI insists. */
static void
need_unprivileged (RFx *fx)
{
  g_autofree char *out = NULL;
  if (check_outer (fx, DEV_0666, true, NULL, &out) == 0)
    return;
  if (g_strcmp0 (g_getenv ("FUSEBOX_TESTS_MUST_RUN"), "1") == 0)
    fail_msg ("FUSEBOX_TESTS_MUST_RUN=1 but uid 1000 can't make sandboxes here:\n%s", out);
  fprintf (stderr, "skipped: uid 1000 can't make sandboxes here:\n%s", out);
  skip ();
}

/* The reporter ran confined: see the file's comment.  OUTER_* is who the
 * shell outside fusebox was, INSIDE_UID the uid fusebox's caller had in its
 * own user namespace (the sandbox keeps it), HOST_UID the owner on the
 * host of what the sandbox created. */
static void
assert_confined (const RfxResult *r, const Case *c, const char *outer, guint inside_uid, uid_t host_uid)
{
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

/* (a) a normal user with a 0666 /dev/fuse */
static void
test_unprivileged (void **state)
{
  RFX_BEGIN (state);
  Case c = { 0 };
  RfxResult r = { 0 };
  case_init (fx, &c, true);
  need_unprivileged (fx);
  run_outer (fx, &r, &c, DEV_0666, true, NULL);
  assert_confined (&r, &c, OUTER_UNPRIVILEGED, OUTER_UID, OUTER_UID);
  rfx_result_clear (&r);
  case_clear (&c);
  RFX_PASS ();
}

/* (b) a normal user with a 0600 /dev/fuse: nothing runs, and both run and
 * check name the device and the fix */
static void
test_unprivileged_fuse_0600 (void **state)
{
  RFX_BEGIN (state);
  Case c = { 0 };
  RfxResult r = { 0 };
  case_init (fx, &c, true);
  need_unprivileged (fx);
  run_outer (fx, &r, &c, DEV_0600, true, NULL);
  if (r.status != 125)
    fail_msg ("exit status %d, not 125; stderr:\n%s", r.status, r.err);
  assert_non_null (strstr (r.err, OUTER_UNPRIVILEGED));
  assert_non_null (strstr (r.err, "open-fuse: /dev/fuse: "));
  assert_non_null (strstr (r.err, "Permission denied"));
  assert_non_null (strstr (r.err, "chmod 0666 /dev/fuse"));
  /* run's own probes said it too */
  assert_non_null (strstr (r.err, "FAIL  /dev/fuse: not openable for read and write"));
  assert_string_equal (r.out, "");
  assert_false (g_file_test (c.allowed, G_FILE_TEST_EXISTS)); /* nothing ran */

  g_autofree char *out = NULL;
  assert_int_equal (check_outer (fx, DEV_0600, true, NULL, &out), 1);
  if (!strstr (out, "FAIL  /dev/fuse: not openable for read and write (Permission denied); fix: sudo chmod 0666 "
                    "/dev/fuse"))
    fail_msg ("check does not name /dev/fuse and its fix:\n%s", out);
  rfx_result_clear (&r);
  case_clear (&c);
  RFX_PASS ();
}

/* The host's root in a user namespace that maps root alone: its sandbox
 * would be the host's root (no other host id is there to map it to), so
 * nothing runs, and run and check say why and what to do. */
static void
assert_root_alone_refused (RFx *fx, const Case *c, const RfxResult *r, const char *outer, const char *const *prefix)
{
  if (r->status != 125)
    fail_msg ("exit status %d, not 125; stderr:\n%s", r->status, r->err);
  assert_non_null (strstr (r->err, outer));
  assert_non_null (strstr (r->err, "uid-map: "));
  assert_non_null (strstr (r->err, "never as root"));
  assert_non_null (strstr (r->err, "run the outer sandbox as a normal user"));
  assert_string_equal (r->out, "");
  assert_false (g_file_test (c->allowed, G_FILE_TEST_EXISTS)); /* nothing ran */

  g_autofree char *out = NULL;
  assert_int_equal (check_outer (fx, DEV_HOST, false, prefix, &out), 1);
  if (!strstr (out, "FAIL  sandbox identity: you are the host's root"))
    fail_msg ("check does not explain the identity:\n%s", out);
}

/* (c) nested in unshare -Urmpf --mount-proc.  As a normal user the caller
 * is uid 0 of unshare's user namespace and runs as such; as root, that uid
 * 0 is the host's root and the namespace maps nothing else (before, the
 * sandbox ran as the host's root). */
static void
test_nested_unshare (void **state)
{
  RFX_BEGIN (state);
  g_autofree char *unshare = need_program ("unshare");
  const char *prefix[] = { unshare, "-Urmpf", "--mount-proc", NULL };
  Case c = { 0 };
  RfxResult r = { 0 };
  case_init (fx, &c, false);
  run_outer (fx, &r, &c, DEV_HOST, false, prefix);
  assert_root_alone_refused (fx, &c, &r, "outer: uid=0 CapEff:", prefix);
  rfx_result_clear (&r);
  case_clear (&c);
  RFX_PASS ();
}

static void
test_nested_unshare_unprivileged (void **state)
{
  RFX_BEGIN (state);
  g_autofree char *unshare = need_program ("unshare");
  const char *prefix[] = { unshare, "-Urmpf", "--mount-proc", NULL };
  Case c = { 0 };
  RfxResult r = { 0 };
  case_init (fx, &c, true);
  need_unprivileged (fx);
  run_outer (fx, &r, &c, DEV_0666, true, prefix);
  assert_confined (&r, &c, "outer: uid=0 CapEff:", 0, OUTER_UID);
  assert_check_ok (fx, DEV_0666, true, prefix);
  rfx_result_clear (&r);
  case_clear (&c);
  RFX_PASS ();
}

/* (d) nested in bubblewrap exposing /dev/fuse, as a normal user: the
 * locked-down outer sandbox an agent harness would use (its own root
 * read-only, its own /dev and /proc, the test directory bound writable) */
static void
test_nested_bwrap (void **state)
{
  RFX_BEGIN (state);
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
  Case c = { 0 };
  RfxResult r = { 0 };
  case_init (fx, &c, true);
  need_unprivileged (fx);
  run_outer (fx, &r, &c, DEV_0666, true, prefix);
  assert_confined (&r, &c, OUTER_UNPRIVILEGED, OUTER_UID, OUTER_UID);
  assert_check_ok (fx, DEV_0666, true, prefix);
  rfx_result_clear (&r);
  case_clear (&c);
  RFX_PASS ();
}

/* bubblewrap as root with its default uid 0 inside: /proc/irq and /proc/bus
 * are covered, no fresh procfs can be mounted; exit 125, and run and check
 * give the masks and the invocations that work */
static void
test_nested_bwrap_root_refused (void **state)
{
  RFX_BEGIN (state);
  g_autofree char *bwrap = need_program ("bwrap");
  const char *prefix[] = { bwrap,    "--unshare-pid", "--die-with-parent", "--dev-bind", "/",         "/",
                           "--proc", "/proc",         "--dev-bind",        "/dev/fuse",  "/dev/fuse", NULL };
  Case c = { 0 };
  RfxResult r = { 0 };
  case_init (fx, &c, false);
  run_outer (fx, &r, &c, DEV_HOST, false, prefix);
  if (r.status != 125)
    fail_msg ("exit status %d, not 125; stderr:\n%s", r.status, r.err);
  assert_non_null (strstr (r.err, "mount-proc: /proc: "));
  assert_non_null (strstr (r.err, "every procfs here has mounts over it ("));
  assert_non_null (strstr (r.err, "run bwrap as a normal user ("));
  assert_string_equal (r.out, "");
  assert_false (g_file_test (c.allowed, G_FILE_TEST_EXISTS)); /* nothing ran */

  g_autofree char *out = NULL;
  assert_int_equal (check_outer (fx, DEV_HOST, false, prefix, &out), 1);
  if (!strstr (out, "FAIL  fresh procfs: ") || !strstr (out, "run bwrap as a normal user"))
    fail_msg ("check does not explain the procfs:\n%s", out);
  rfx_result_clear (&r);
  case_clear (&c);
  RFX_PASS ();
}

/* ...and as root with a uid other than 0 inside: that uid 1000 of bwrap's
 * namespace is the host's root, the only id mapped there (before, the
 * sandbox ran as the host's root) */
static void
test_nested_bwrap_root_uid (void **state)
{
  RFX_BEGIN (state);
  g_autofree char *bwrap = need_program ("bwrap");
  const char *prefix[] = { bwrap,           "--unshare-user",    "--uid",      "1000",      "--gid", "1000",
                           "--unshare-pid", "--die-with-parent", "--dev-bind", "/",         "/",     "--proc",
                           "/proc",         "--dev-bind",        "/dev/fuse",  "/dev/fuse", NULL };
  Case c = { 0 };
  RfxResult r = { 0 };
  case_init (fx, &c, false);
  run_outer (fx, &r, &c, DEV_HOST, false, prefix);
  assert_root_alone_refused (fx, &c, &r, "outer: uid=1000 CapEff:0000000000000000", prefix);
  rfx_result_clear (&r);
  case_clear (&c);
  RFX_PASS ();
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
