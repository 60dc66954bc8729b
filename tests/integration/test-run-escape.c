/* fusebox — escapes from inside a real `fusebox run`, each with its expected
 * errno:
 *  - every entry of the seccomp filter (fixtures/fb-escape), TIOCSTI and
 *    TIOCLINUX with high bits set among them; the same prober on the host
 *    as an unprivileged user gives other answers, so the table can fail
 *    (a probe this host can't run, i386 `int 0x80` without 32-bit syscall
 *    emulation, is shown by the filter program's own decision in the unit
 *    test launcher-seccomp instead);
 *  - `kill -9 -1` inside leaves the host's processes alive;
 *  - /proc/1/root, /proc/self/root, /proc/self/fd and `..` chains, symlinks
 *    and O_PATH reopening reach nothing hidden or denied;
 *  - a setuid-root binary gives no privilege;
 *  - the FUSE root can't be unmounted, remounted or covered.
 * The probe is this program run inside the sandbox (`--probe OP ARG...`).
 */
#include <signal.h>

#include "tests/lib/test-run.h"

#include <grp.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>

/* ---- inside the sandbox ---- */

static char *
status_field (const char *key)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents ("/proc/self/status", &text, NULL, NULL))
    return g_strdup ("?");
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix (lines[i], key) && lines[i][strlen (key)] == ':')
      return g_strstrip (g_strdup (lines[i] + strlen (key) + 1));
  return g_strdup ("?");
}

/* The handle of the last "opendir", for the *at and /proc/self/fd probes. */
static int probe_dir_fd = -1;

/* One operation of the probe (rfx_probe_main, which knows "read"). */
static const char *
probe_op (const char *op, const char *const *args, int *words, char **owned)
{
  const char *a = args[0], *b = args[1];
  const char *res;

  if (strcmp (op, "opendir") == 0)
    {
      /* an O_PATH handle on a directory for the *at and /proc/self/fd probes */
      probe_dir_fd = open (a, O_PATH | O_DIRECTORY | O_CLOEXEC);
      res = probe_dir_fd < 0 ? rfx_errname (errno) : "OK";
      *words = 2;
    }
  else if (strcmp (op, "readat") == 0)
    {
      res = rfx_open_res (probe_dir_fd, a, O_RDONLY);
      *words = 2;
    }
  else if (strcmp (op, "readfd") == 0)
    {
      /* "/proc/self/fd/N" + A, with N the handle of "opendir" */
      g_autofree char *p = g_strdup_printf ("/proc/self/fd/%d%s", probe_dir_fd, a);
      res = rfx_open_res (AT_FDCWD, p, O_RDONLY);
      *words = 2;
    }
  else if (strcmp (op, "reopen") == 0)
    {
      /* an O_PATH handle (a lookup only), then a real open through
       * /proc/self/fd: the second must be decided like a plain open */
      int pfd = open (a, O_PATH | O_CLOEXEC);
      if (pfd < 0)
        res = *owned = g_strdup_printf ("PATH-%s", rfx_errname (errno));
      else
        {
          g_autofree char *p = g_strdup_printf ("/proc/self/fd/%d", pfd);
          res = rfx_open_res (AT_FDCWD, p, O_RDONLY);
          close (pfd);
        }
      *words = 2;
    }
  else if (strcmp (op, "link") == 0)
    res = rfx_res (link (a, b)), *words = 3;
  else if (strcmp (op, "rename") == 0)
    res = rfx_res (rename (a, b)), *words = 3;
  else if (strcmp (op, "kill") == 0)
    res = rfx_res (kill ((pid_t)atoi (a), 0)), *words = 2;
  else if (strcmp (op, "killall") == 0)
    {
      /* kill -9 -1: every process we may signal but init and ourselves;
       * a child of ours shows that it does reach the sandbox's own */
      int status;
      pid_t child = fork ();
      if (child == 0)
        {
          pause ();
          _exit (0);
        }
      if (kill (-1, SIGKILL) < 0)
        res = rfx_errname (errno);
      else
        res = waitpid (child, &status, 0) == child && WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL
                ? "OK"
                : "CHILD-SURVIVED";
      *words = 1;
    }
  else if (strcmp (op, "tty") == 0)
    res = rfx_open_res (AT_FDCWD, "/dev/tty", O_RDWR), *words = 1;
  else if (strcmp (op, "ids") == 0)
    {
      g_autofree char *eff = status_field ("CapEff");
      g_autofree char *prm = status_field ("CapPrm");
      g_autofree char *nnp = status_field ("NoNewPrivs");
      res = *owned = g_strdup_printf ("%u %u %s %s %s", (unsigned)geteuid (), (unsigned)getegid (), eff, prm, nnp);
      *words = 1;
    }
  else if (strcmp (op, "nosuid") == 0)
    {
      struct statvfs sv;
      res = statvfs (a, &sv) < 0 ? rfx_errname (errno) : (sv.f_flag & ST_NOSUID) ? "NOSUID" : "SUID";
      *words = 2;
    }
  else if (strcmp (op, "exec") == 0)
    {
      /* run A with "--probe" B (one operation), relay its line */
      int p[2];
      if (pipe2 (p, O_CLOEXEC) < 0)
        return rfx_errname (errno);
      pid_t pid = fork ();
      if (pid == 0)
        {
          dup2 (p[1], 1);
          execl (a, a, "--probe", b, (char *)NULL);
          _exit (127);
        }
      close (p[1]);
      char buf[256] = "";
      ssize_t n = read (p[0], buf, sizeof buf - 1);
      close (p[0]);
      waitpid (pid, NULL, 0);
      buf[n > 0 ? n : 0] = '\0';
      buf[strcspn (buf, "\n")] = '\0';
      res = *owned = g_strdup (n > 0 ? buf : "NO-OUTPUT");
      *words = 3;
    }
  else if (strcmp (op, "umount") == 0)
    res = rfx_res (umount2 ("/", 0)), *words = 1;
  else if (strcmp (op, "umount-detach") == 0)
    res = rfx_res (umount2 ("/", MNT_DETACH)), *words = 1;
  else if (strcmp (op, "cover") == 0)
    res = rfx_res (mount ("tmpfs", a, "tmpfs", 0, NULL)), *words = 2;
  else if (strcmp (op, "remount") == 0)
    res = rfx_res (mount (NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL)), *words = 1;
  else if (strcmp (op, "fsopen") == 0)
    res = rfx_res (syscall (__NR_fsopen, "tmpfs", 0)), *words = 1;
  else if (strcmp (op, "open_tree") == 0)
    res = rfx_res (syscall (__NR_open_tree, AT_FDCWD, "/", 0)), *words = 1;
  else
    return NULL;
  return res;
}

/* ---- the seccomp table, through the real binary ---- */

#include "fixtures/fb-escape-expected.h"
#include "tests/lib/test-host.h"

/* fb-escape on the host as nobody (it refuses to run with capabilities). */
static JsonObject *
escape_on_host (const char *escape)
{
  g_autofree char *out = test_run_as_nobody (escape);

  return test_parse_object (out);
}

RFX_CASE (test_seccomp_table)
{
  g_autofree char *escape = test_fixture ("fb-escape");
  RfxResult r;

  rfx_run (fx, &r, "--uid", "1000", "--gid", "1000", "--", escape, NULL);
  if (r.status != 0)
    fail_msg ("fb-escape exited %d: %s", r.status, r.err);
  g_autoptr (JsonObject) got = test_parse_object (r.out);
  g_autoptr (GString) bad = g_string_new (NULL);
  for (size_t i = 0; i < G_N_ELEMENTS (expected); i++)
    {
      const char *v = test_json_str (got, expected[i].probe);
      const char *lacks = expected[i].needs != NULL ? test_host_lacks (expected[i].needs) : NULL;
      /* a probe that can't reach seccomp here must still not succeed; the
       * filter's decision for it is shown by the unit test
       * launcher-seccomp (test_program_decisions) */
      if (lacks != NULL && g_strcmp0 (v, "OK") != 0)
        {
          fprintf (stderr, "probe %s not shown by the kernel: %s\n", expected[i].probe, lacks);
          continue;
        }
      if (g_strcmp0 (v, expected[i].inside) != 0)
        g_string_append_printf (bad, "  %s: %s, expected %s\n", expected[i].probe, v ? v : "(missing)",
                                expected[i].inside);
    }
  if (bad->len)
    fail_msg ("inside fusebox run:\n%s", bad->str);

  g_autoptr (JsonObject) host = escape_on_host (escape);
  for (size_t i = 0; i < G_N_ELEMENTS (escape_discriminating); i++)
    {
      const char *in = test_json_str (got, escape_discriminating[i]);
      const char *out = test_json_str (host, escape_discriminating[i]);
      if (g_strcmp0 (in, out) == 0)
        fail_msg ("%s gives %s both inside and on the host: the probe tells nothing", escape_discriminating[i], in);
    }
  rfx_result_clear (&r);
}

/* ---- the others ---- */

RFX_CASE (test_kill_all_inside)
{
  g_autofree char *self = test_self ();
  g_autofree char *host_pid = NULL;
  RfxResult r;
  pid_t victim = fork ();

  assert_true (victim >= 0);
  if (victim == 0)
    {
      /* a host process of the sandbox's user (root here, uid 0 inside) */
      execl ("/bin/sleep", "sleep", "1000", (char *)NULL);
      _exit (127);
    }
  rfx_keep_pid (fx, victim);
  host_pid = g_strdup_printf ("%d", (int)victim);

  rfx_run (fx, &r, "--", self, "--probe", "kill", host_pid, "killall", "kill", host_pid, NULL);
  assert_int_equal (r.status, 0);
  /* not even visible; kill -1 killed the sandbox's own process */
  assert_string_equal (r.out, "ESRCH\nOK\nESRCH\n");
  int status;
  assert_int_equal (waitpid (victim, &status, WNOHANG), 0); /* still running */
  assert_int_equal (kill (victim, 0), 0);
  rfx_result_clear (&r);
}

RFX_CASE (test_paths_reach_nothing_hidden)
{
  g_autofree char *self = test_self ();
  g_autofree char *suffix = g_path_get_basename (fx->tmp);
  g_autofree char *secret_dir = g_build_filename ("/home", suffix, NULL);
  g_autofree char *secret = g_build_filename (secret_dir, "secret.txt", NULL);
  g_autofree char *denied = g_build_filename (fx->ws, "denied.txt", NULL);
  g_autofree char *link_secret = g_build_filename (fx->ws, "to-secret", NULL);
  g_autofree char *link_runs = g_build_filename (fx->ws, "to-runs", NULL);
  g_autofree char *other_log = g_build_filename (fx->runs, "20260101-000000-other", "access.jsonl", NULL);
  RfxResult r;

  rfx_keep_path (fx, secret_dir);
  test_write (secret, "stand-in secret\n", 0644);
  test_assert_host_readable (secret);
  test_write (denied, "denied\n", 0644);
  test_write (other_log, "{}\n", 0600);
  test_assert_host_readable (other_log);
  assert_int_equal (symlink (secret, link_secret), 0);
  assert_int_equal (symlink (fx->runs, link_runs), 0);
  g_autofree char *via_root1 = g_strconcat ("/proc/1/root", secret, NULL);
  g_autofree char *via_self = g_strconcat ("/proc/self/root", secret, NULL);
  g_autofree char *via_cwd = g_strconcat ("/proc/1/cwd/../../../../../../../..", secret, NULL);
  g_autofree char *dotdot_tmp = g_strconcat ("/tmp/../..", secret, NULL);
  g_autofree char *dotdot_ws = g_strconcat (fx->ws, "/../../../../../../..", secret, NULL);
  g_autofree char *rel = g_strconcat ("../../../../../../../..", secret, NULL);
  g_autofree char *fd_rel = g_strconcat ("/../../../../../../../..", secret, NULL);
  g_autofree char *link_target = g_build_filename (fx->ws, "linked.txt", NULL);
  g_autofree char *moved = g_build_filename (fx->ws, "moved.txt", NULL);
  g_autofree char *runs_log = g_build_filename (link_runs, "20260101-000000-other", "access.jsonl", NULL);

  rfx_run (fx, &r, "--deny", denied, "--", self, "--probe",
           /* each line: the expected answer */
           "read", secret,              /* ENOENT: /home is hidden */
           "read", via_root1,           /* EACCES: pid 1 is not dumpable, its /proc entry closed */
           "read", via_self,            /* ENOENT */
           "read", via_cwd,             /* EACCES: the same */
           "read", dotdot_tmp,          /* ENOENT */
           "read", dotdot_ws,           /* ENOENT */
           "read", link_secret,         /* ENOENT: the link resolves in the view */
           "read", runs_log,            /* ENOENT: the run directories are hidden */
           "read", other_log,           /* ENOENT */
           "opendir", fx->ws,           /* OK */
           "readat", rel,               /* ENOENT */
           "readfd", fd_rel,            /* ENOENT */
           "read", denied,              /* EACCES */
           "reopen", denied,            /* EACCES: O_PATH works (deny shows the name), the reopen is decided */
           "link", denied, link_target, /* EACCES: a new name for a denied file */
           "rename", denied, moved,     /* EACCES: moving it out of its rule */
           "tty",                       /* ENXIO: no controlling terminal (setsid) */
           NULL);
  assert_int_equal (r.status, 0);
  g_auto (GStrv) got = g_strsplit (r.out, "\n", -1);
  static const char *const want[] = { "ENOENT", "EACCES", "ENOENT", "EACCES", "ENOENT", "ENOENT",
                                      "ENOENT", "ENOENT", "ENOENT", "OK",     "ENOENT", "ENOENT",
                                      "EACCES", "EACCES", "EACCES", "EACCES", "ENXIO" };
  g_autoptr (GString) bad = g_string_new (NULL);
  for (size_t i = 0; i < G_N_ELEMENTS (want); i++)
    if (g_strcmp0 (got[i], want[i]) != 0)
      g_string_append_printf (bad, "  probe %zu: %s, expected %s\n", i, got[i] ? got[i] : "(missing)", want[i]);
  if (bad->len)
    fail_msg ("escapes through paths:\n%s(output:\n%s%s)", bad->str, r.out, r.err);
  /* the host is unchanged: no new name for the denied file, still there */
  assert_false (g_file_test (link_target, G_FILE_TEST_EXISTS));
  assert_false (g_file_test (moved, G_FILE_TEST_EXISTS));
  assert_true (g_file_test (denied, G_FILE_TEST_IS_REGULAR));
  rfx_result_clear (&r);
}

RFX_CASE (test_setuid_gives_nothing)
{
  g_autofree char *self = test_self ();
  g_autofree char *suid = g_build_filename (fx->ws, "suid-probe", NULL);
  g_autofree char *data = NULL;
  gsize len;
  RfxResult r;

  /* a setuid-root copy of the probe, owned by root on the host */
  assert_true (g_file_get_contents (self, &data, &len, NULL));
  assert_true (g_file_set_contents (suid, data, len, NULL));
  assert_int_equal (chown (suid, 0, 0), 0);
  assert_int_equal (chmod (suid, 04755), 0);
  struct stat st;
  assert_int_equal (stat (suid, &st), 0);
  assert_true (st.st_mode & S_ISUID);

  /* uid 1000 inside: the euid stays 1000, no capability appears */
  rfx_run (fx, &r, "--uid", "1000", "--gid", "1000", "--", self, "--probe", "ids", "exec", suid, "ids", "nosuid", "/",
           NULL);
  assert_int_equal (r.status, 0);
  assert_string_equal (r.out, "1000 1000 0000000000000000 0000000000000000 1\n"
                              "1000 1000 0000000000000000 0000000000000000 1\n"
                              "NOSUID\n");
  rfx_result_clear (&r);
  /* uid 0 inside (the caller's own): still no capability after the exec */
  rfx_run (fx, &r, "--", self, "--probe", "exec", suid, "ids", NULL);
  assert_int_equal (r.status, 0);
  assert_string_equal (r.out, "0 0 0000000000000000 0000000000000000 1\n");
  rfx_result_clear (&r);
}

RFX_CASE (test_root_stays)
{
  g_autofree char *self = test_self ();
  g_autofree char *file = g_build_filename (fx->ws, "still-here.txt", NULL);
  RfxResult r;

  test_write (file, "x\n", 0644);
  rfx_run (fx, &r, "--", self, "--probe", "umount", "umount-detach", "remount", "cover", "/", "cover", fx->ws, "fsopen",
           "open_tree", "read", file, NULL);
  assert_int_equal (r.status, 0);
  assert_string_equal (r.out, "EPERM\nEPERM\nEPERM\nEPERM\nEPERM\nENOSYS\nENOSYS\nOK\n");
  rfx_result_clear (&r);
}

RFX_DEFINE_PROBE_MAIN (probe_op, NULL, RFX_TEST (test_seccomp_table), RFX_TEST (test_kill_all_inside),
                       RFX_TEST (test_paths_reach_nothing_hidden), RFX_TEST (test_setuid_gives_nothing),
                       RFX_TEST (test_root_stays))
