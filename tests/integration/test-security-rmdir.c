/* Adversarial tests: removing or replacing a directory does not tell
 * whether a hidden name exists in it.
 *
 * Through `fusebox mount`, in a writable workspace:
 *  - ws/with and ws/without each have a hide rule for a name below them
 *    ("secret"); on the host ws/with/secret exists (first proven so) and
 *    ws/without is empty.  Both look empty through the view.  rmdir of
 *    each, and rename of another directory onto each, give the same answer
 *    (EACCES: a directory below which other rules decide is neither
 *    removed nor replaced, as it is not renamed), both directories and the
 *    hidden file stay on the host, and each refusal is logged as
 *    fusebox's own (rule "fusebox", fusebox:ruled-directory).  Before, rmdir
 *    answered ENOTEMPTY for the first and removed the second.
 *  - What stays (docs/security.md, "Hidden names"): a name hidden wherever
 *    it is (a protected name like .git, a glob at any depth) may be in any
 *    directory, so the same uniform answer would refuse every rmdir; there
 *    a directory holding only a hidden .git answers ENOTEMPTY while an
 *    empty one goes.  The test holds that line: ENOTEMPTY, and the hidden
 *    .git is still there on the host, never removed with its directory.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include "tests/lib/test-log.h"
#include "tests/lib/test-mount.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char policy_text[] =
  "{ \"version\": 1,\n"
  "  \"protected_names\": { \".git\": \"hide\" },\n"
  "  \"rules\": [\n"
  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" },\n"
  "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"the workspace\" },\n"
  "  { \"path\": \"@H@/ws/with/secret\", \"access\": \"hide\", \"why\": \"a hidden stand-in that exists\" },\n"
  "  { \"path\": \"@H@/ws/without/secret\", \"access\": \"hide\", \"why\": \"a hidden stand-in that does not\" },\n"
  "  { \"path\": \"@H@/ws/veil\", \"access\": \"hide\", \"why\": \"a hidden directory\" },\n"
  "  { \"path\": \"@H@/ws/veil/open\", \"access\": \"read\", \"why\": \"shown through it\" } ] }\n";

static int
errno_of (int r)
{
  return r < 0 ? errno : 0;
}

MFX_CASE (test_rules_below_answer_alike)
{
  const char *h_with = mfx_on_host (fx, "/ws/with");
  const char *h_without = mfx_on_host (fx, "/ws/without");
  const char *m_with = mfx_in_mount (fx, "/ws/with");
  const char *m_without = mfx_in_mount (fx, "/ws/without");
  g_autofree char *log = NULL;
  int with, without;

  mfx_write (fx, "/ws/with/secret", "HIDDEN\n");
  mfx_mkdir (fx, "/ws/without");
  mfx_mkdir (fx, "/ws/src");
  mfx_assert_host_readable (fx, "/ws/with/secret");
  mfx_mount (fx, policy_text, NULL);
  /* both look empty through the view */
  {
    g_autoptr (GDir) a = g_dir_open (m_with, 0, NULL);
    g_autoptr (GDir) b = g_dir_open (m_without, 0, NULL);
    assert_non_null (a);
    assert_non_null (b);
    assert_null (g_dir_read_name (a));
    assert_null (g_dir_read_name (b));
  }

  with = errno_of (rmdir (m_with));
  without = errno_of (rmdir (m_without));
  if (with != without)
    fail_msg ("rmdir answers %s for a directory holding a hidden name, %s for an empty one",
              with ? g_strerror (with) : "success", without ? g_strerror (without) : "success");
  assert_int_equal (with, EACCES);
  with = errno_of (rename (mfx_in_mount (fx, "/ws/src"), m_with));
  without = errno_of (rename (mfx_in_mount (fx, "/ws/src"), m_without));
  if (with != without)
    fail_msg ("rename onto them answers %s for a directory holding a hidden name, %s for an empty one",
              with ? g_strerror (with) : "success", without ? g_strerror (without) : "success");
  assert_int_equal (with, EACCES);
  assert_true (g_file_test (mfx_on_host (fx, "/ws/with/secret"), G_FILE_TEST_IS_REGULAR));
  assert_true (g_file_test (h_with, G_FILE_TEST_IS_DIR));
  assert_true (g_file_test (h_without, G_FILE_TEST_IS_DIR));
  mfx_unmount (fx);

  log = mfx_log (fx);
  {
    g_autofree char *p_with = g_strdup_printf ("\"path\":\"%s\"", h_with);
    g_autofree char *p_without = g_strdup_printf ("\"path\":\"%s\"", h_without);
    g_autofree char *t_with = g_strdup_printf ("\"target\":\"%s\"", h_with);
    const char *refusal = "\"rule\":\"fusebox\",\"rule_origin\":\"fusebox:ruled-directory\"";
    if (!test_log_has (log, "\"op\":\"rmdir\"", p_with, "\"decision\":\"deny\"", "\"errno\":13", refusal, NULL) ||
        !test_log_has (log, "\"op\":\"rmdir\"", p_without, "\"decision\":\"deny\"", "\"errno\":13", refusal, NULL) ||
        !test_log_has (log, "\"op\":\"rename\"", t_with, "\"decision\":\"deny\"", refusal, NULL))
      fail_msg ("the refusals are not in the log as fusebox's own:\n%s", log);
  }
}

MFX_CASE (test_protected_name_stays)
{
  mfx_write (fx, "/ws/gitonly/.git/HEAD", "ref: refs/heads/main\n");
  mfx_mkdir (fx, "/ws/empty");
  mfx_assert_host_readable (fx, "/ws/gitonly/.git/HEAD");
  mfx_mount (fx, policy_text, NULL);
  assert_errno_is (rmdir (mfx_in_mount (fx, "/ws/gitonly")), ENOTEMPTY);
  assert_true (g_file_test (mfx_on_host (fx, "/ws/gitonly/.git/HEAD"), G_FILE_TEST_IS_REGULAR));
  assert_errno_is (rmdir (mfx_in_mount (fx, "/ws/empty")), 0);
  assert_false (g_file_test (mfx_on_host (fx, "/ws/empty"), G_FILE_TEST_EXISTS));
}

/* What the kernel remembers of NAME in DIR (a path in the mount): 0 when
 * it holds NAME, ENOENT when it holds its absence, EAGAIN when it holds
 * nothing and would have to ask the view (openat2 RESOLVE_CACHED). */
static int
cached (const char *dir, const char *name)
{
  struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_CACHED };
  int dfd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  int fd, errsv;

  assert_true (dfd >= 0);
  fd = (int)syscall (SYS_openat2, dfd, name, &how, sizeof how);
  errsv = fd < 0 ? errno : 0;
  if (fd >= 0)
    close (fd);
  close (dfd);
  return errsv;
}

/* How fast a second lookup is answered does not tell whether a hidden name
 * exists.  A hidden name the host does not hold was answered as an absence
 * the kernel remembers, and the next lookup took 2-4 µs against the 35-40
 * of one the host holds, which the kernel asks the view about each time: a
 * sandbox timing two stat() calls knew which .git, which hidden file was
 * there.  Now neither is remembered (the kernel holds nothing of either
 * after two lookups), while a name that is merely missing still is (the
 * probe sees what the kernel remembers). */
MFX_CASE (test_hidden_absence_not_remembered)
{
  static const struct
  {
    const char *dir, *name;
    int cached; /* what the kernel holds after two lookups */
  } names[] = {
    { "/ws/with", "secret", EAGAIN },    /* a hide rule, the host holds it */
    { "/ws/without", "secret", EAGAIN }, /* a hide rule, the host does not */
    { "/ws/repo", ".git", EAGAIN },      /* a protected name, there */
    { "/ws/plain", ".git", EAGAIN },     /* a protected name, not there */
    { "/ws/veil", "there", EAGAIN },     /* in a hidden directory walked through, there */
    { "/ws/veil", "nothere", EAGAIN },   /* and not there */
    { "/ws/plain", "missing", ENOENT },  /* a name merely missing: remembered */
  };

  mfx_write (fx, "/ws/with/secret", "HIDDEN\n");
  mfx_mkdir (fx, "/ws/without");
  mfx_write (fx, "/ws/repo/.git/HEAD", "ref: refs/heads/main\n");
  mfx_mkdir (fx, "/ws/plain");
  mfx_write (fx, "/ws/veil/there", "HIDDEN\n");
  mfx_mkdir (fx, "/ws/veil/open");
  mfx_assert_host_readable (fx, "/ws/with/secret");
  mfx_assert_host_readable (fx, "/ws/veil/there");
  mfx_assert_host_readable (fx, "/ws/repo/.git/HEAD");
  mfx_mount (fx, policy_text, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *rel = g_strdup_printf ("%s/%s", names[i].dir, names[i].name);
      const char *dir = mfx_in_mount (fx, names[i].dir);
      int got;

      for (int k = 0; k < 2; k++)
        assert_errno_is (access (mfx_in_mount (fx, rel), F_OK), ENOENT);
      got = cached (dir, names[i].name);
      if (got != names[i].cached)
        fail_msg ("after two lookups of %s the kernel holds %s, not %s", rel,
                  got == ENOENT   ? "its absence"
                  : got == EAGAIN ? "nothing"
                                  : g_strerror (got),
                  names[i].cached == ENOENT ? "its absence" : "nothing");
    }
}

MFX_DEFINE_MAIN (MFX_TEST (test_rules_below_answer_alike), MFX_TEST (test_protected_name_stays),
                 MFX_TEST (test_hidden_absence_not_remembered))
