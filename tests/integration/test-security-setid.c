/* Adversarial tests: a chmod through the view never leaves a set-id bit
 * beside a mode it changed.
 *
 * On the host, in the workspace `fusebox run` writes: suid4, a copy of
 * /bin/true made 04755 and owned by root (proven so first), and beside it
 * a 04555 set-user-ID file, a 02755 set-group-ID file, a 04755 one to give
 * up its bit and a 02775 directory.  Inside the sandbox (this program,
 * `--probe`), `chmod 04777 suid4` answered 0 and left the host file
 * -rwsrwxrwx root: any host user could then write it through a shared
 * mapping, whose writeback the kernel does not strip the set-user-ID bit
 * for, and be root at its next run.  Now every chmod whose result keeps a
 * set-id bit (S_ISUID; S_ISGID with group-exec on a non-directory) and
 * changes the mode is EPERM, logged as fusebox's own refusal
 * (fusebox:no-setid): 04777, 04775, fchmod 04777, 04555 -> 04755, 02755 ->
 * 02775.  What passes: the mode as it is (cp -p, tar), taking the bit away,
 * and a directory's S_ISGID (group inheritance, no privilege).  Afterwards
 * the host modes are as the probe says, and uid 65534 still can't open
 * suid4 for writing on the host.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include "tests/lib/test-run.h"

#include <grp.h>

static const char expected[] = "chmod-04777 EPERM\n"
                               "chmod-04775 EPERM\n"
                               "fchmod-04777 EPERM\n"
                               "chmod-same OK\n"
                               "chmod-ro-gains-write EPERM\n"
                               "chmod-sgid-group-write EPERM\n"
                               "chmod-drop-suid OK\n"
                               "chmod-drop-sgid OK\n"
                               "chmod-dir-sgid OK\n";

/* --- inside the sandbox --------------------------------------------------------- */

static void
say (const char *name, int r)
{
  printf ("%s %s\n", name, rfx_res (r));
}

static int
probe_main (int argc, char **argv)
{
  int fd;

  setvbuf (stdout, NULL, _IOLBF, 0);
  say ("chmod-04777", chmod ("suid4", 04777));
  say ("chmod-04775", chmod ("suid4", 04775));
  fd = open ("suid4", O_RDONLY | O_CLOEXEC);
  say ("fchmod-04777", fd < 0 ? fd : fchmod (fd, 04777));
  if (fd >= 0)
    close (fd);
  say ("chmod-same", chmod ("suid4", 04755));
  say ("chmod-ro-gains-write", chmod ("suid-ro", 04755));
  say ("chmod-sgid-group-write", chmod ("sgid", 02775));
  say ("chmod-drop-suid", chmod ("suid-drop", 0777));
  say ("chmod-drop-sgid", chmod ("sgid", 0775));
  say ("chmod-dir-sgid", chmod ("sgid-dir", 02755));
  return 0;
}

/* --- the host side --------------------------------------------------------------- */

/* /bin/true at T/ws/REL, root's, with MODE. */
static void
copy_true (RFx *fx, const char *rel, mode_t mode)
{
  g_autofree char *path = g_build_filename (fx->ws, rel, NULL);
  g_autofree char *data = NULL;
  gsize len;
  struct stat st;

  if (!g_file_get_contents ("/bin/true", &data, &len, NULL))
    test_skip_or_fail ("/bin/true is not readable");
  if (!g_file_set_contents (path, data, (gssize)len, NULL))
    fail_msg ("can't write %s", path);
  assert_int_equal (chown (path, 0, 0), 0);
  assert_int_equal (chmod (path, mode), 0);
  assert_int_equal (lstat (path, &st), 0);
  /* the mode and the owner the test is about, proven on the host */
  if ((st.st_mode & 07777) != mode || st.st_uid != 0)
    fail_msg ("%s is %04o uid %u on the host, not %04o root", path, st.st_mode & 07777, (unsigned)st.st_uid, mode);
}

static mode_t
host_mode (RFx *fx, const char *rel)
{
  g_autofree char *path = g_build_filename (fx->ws, rel, NULL);

  return test_mode_of (path);
}

/* Can uid 65534 open PATH for writing on the host?  0 or the errno. */
static int
nobody_opens_for_writing (const char *path)
{
  int p[2];
  int err = EIO;
  pid_t pid;

  assert_int_equal (pipe2 (p, O_CLOEXEC), 0);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0)
    {
      int e = 0;
      if (setgroups (0, NULL) < 0 || setgid (65534) < 0 || setuid (65534) < 0)
        e = EPERM + 1000;
      else
        {
          int fd = open (path, O_RDWR | O_CLOEXEC);
          e = fd < 0 ? errno : 0;
        }
      (void)!write (p[1], &e, sizeof e);
      _exit (0);
    }
  close (p[1]);
  if (read (p[0], &err, sizeof err) != sizeof err)
    err = EIO;
  close (p[0]);
  waitpid (pid, NULL, 0);
  if (err == EPERM + 1000)
    fail_msg ("could not become uid 65534 to check the host's modes");
  return err;
}

RFX_CASE (test_chmod_keeps_no_setid)
{
  g_autofree char *self = test_self ();
  g_autofree char *policy = rfx_policy_ws (fx);
  const char *suid4 = test_dir_path (fx->dir, "ws/suid4");
  const char *sgid_dir = test_dir_path (fx->dir, "ws/sgid-dir");
  const char *run_dir = test_dir_path (fx->dir, "run");
  g_autofree char *log = NULL;
  RfxResult r = { 0 };
  guint refusals = 0;

  copy_true (fx, "suid4", 04755);
  copy_true (fx, "suid-ro", 04555);
  copy_true (fx, "suid-drop", 04755);
  copy_true (fx, "sgid", 02755);
  assert_int_equal (mkdir (sgid_dir, 0775), 0);
  assert_int_equal (chmod (sgid_dir, 02775), 0);
  assert_int_equal (host_mode (fx, "sgid-dir"), 02775);
  /* before: nobody can't write the program */
  assert_int_equal (nobody_opens_for_writing (suid4), EACCES);

  rfx_run (fx, &r, "--policy", policy, "--run-dir", run_dir, "--", self, "--probe", NULL);
  if (r.status != 0 || strcmp (r.out, expected) != 0)
    fail_msg ("the probe (exit %d) said:\n%s\nwant:\n%s\nstderr:\n%s", r.status, r.out, expected, r.err);
  rfx_result_clear (&r);

  /* the host's modes are what the probe was told */
  if (host_mode (fx, "suid4") != 04755)
    fail_msg ("suid4 is %04o on the host after the sandbox's chmods, not 04755", host_mode (fx, "suid4"));
  assert_int_equal (host_mode (fx, "suid-ro"), 04555);
  assert_int_equal (host_mode (fx, "suid-drop"), 0777);
  assert_int_equal (host_mode (fx, "sgid"), 0775);
  assert_int_equal (host_mode (fx, "sgid-dir"), 02755);
  assert_int_equal (nobody_opens_for_writing (suid4), EACCES);

  /* each refusal is fusebox's own in the log */
  log = test_read_file (test_dir_path (fx->dir, "run/access.jsonl"));
  assert_non_null (log);
  {
    g_autoptr (GPtrArray) records = test_parse_lines (log);
    for (guint i = 0; i < records->len; i++)
      {
        JsonObject *o = records->pdata[i];
        if (g_strcmp0 (test_json_str (o, "op"), "chmod") == 0 &&
            g_strcmp0 (test_json_str (o, "decision"), "deny") == 0 &&
            json_object_get_int_member_with_default (o, "errno", 0) == EPERM &&
            g_strcmp0 (test_json_str (o, "rule"), "fusebox") == 0 &&
            g_strcmp0 (test_json_str (o, "rule_origin"), "fusebox:no-setid") == 0)
          refusals++;
      }
  }
  if (refusals != 5)
    fail_msg ("%u chmod refusals by fusebox:no-setid in the log, not 5:\n%s", refusals, log);
}

RFX_DEFINE_MAIN (probe_main, NULL, RFX_TEST (test_chmod_keeps_no_setid))
