/* Adversarial tests: a policy's `source` is an existing directory, or the
 * policy is refused.
 *
 * A source the view can't open as a directory used to show an empty
 * directory: a typo, a file, a FIFO, a device, a socket, a symbolic link
 * or a missing path all passed for "nothing there", and `policy check` and
 * `explain` said nothing.  Now:
 *  - `fusebox run` refuses each at load (exit 125) with the source's
 *    FILE:LINE:COL, the field and what the path is; the command never runs.
 *  - `fusebox policy check` and `policy explain` report the same refusal
 *    (exit 1).
 *  - A directory source is still shown (the control).
 *  - The view itself never shows an empty directory for a source that is
 *    no longer a directory when it opens it (a swap after the check).
 * Each object is first proven to exist on the host as what it is.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include "tests/lib/test-run.h"

#include "fs/fs.h"

#include <sys/mount.h>

/* A policy that shows SOURCE at /x, with the source alone on its line, so
 * that its position is known: *RET_LINE:*RET_COL is the value's quote. */
static char *
policy_text (const char *source, guint *ret_line, guint *ret_col)
{
  g_autofree char *line = g_strdup_printf ("   \"source\": \"%s\",", source);

  *ret_line = 4;
  *ret_col = (guint)strlen ("   \"source\": ") + 1;
  return g_strdup_printf ("{ \"version\": 1,\n"
                          "  \"rules\": [ { \"path\": \"/\", \"access\": \"read\", \"why\": \"the system\" },\n"
                          "  { \"path\": \"/x\", \"access\": \"read\",\n"
                          "%s\n"
                          "    \"why\": \"the data\" } ] }\n",
                          line);
}

typedef struct
{
  const char *name; /* in T, or an absolute path */
  const char *says; /* what the message says the path is */
  mode_t type;      /* S_IF* it is on the host; 0: missing */
} Case;

static const Case cases[] = {
  { "fifo", "is a FIFO, not a directory", S_IFIFO },
  { "file", "is a regular file, not a directory", S_IFREG },
  { "link", "is a symbolic link (to ", S_IFLNK },
  { "sock", "is a socket, not a directory", S_IFSOCK },
  { "/dev/null", "is a character device, not a directory", S_IFCHR },
  { "missing", "does not exist", 0 },
  { "file/below", "does not exist (a directory above it is a file)", 0 },
};

/* T/data (a directory with a file in it), and the objects of CASES. */
static void
make_objects (RFx *fx)
{
  test_write (test_dir_path (fx->dir, "data/inside"), "the data\n", 0644);
  test_write (test_dir_path (fx->dir, "file"), "a file\n", 0644);
  assert_int_equal (mkfifo (test_dir_path (fx->dir, "fifo"), 0644), 0);
  assert_int_equal (symlink (test_dir_path (fx->dir, "data"), test_dir_path (fx->dir, "link")), 0);
  test_make_socket (test_dir_path (fx->dir, "sock"));
}

static char *
case_path (RFx *fx, const Case *c)
{
  return c->name[0] == '/' ? g_strdup (c->name) : g_build_filename (fx->tmp, c->name, NULL);
}

/* The host holds PATH as C says (or nothing there). */
static void
assert_host_object (const char *path, const Case *c)
{
  struct stat st;

  if (c->type == 0)
    {
      if (lstat (path, &st) == 0)
        fail_msg ("%s should be missing on the host", path);
      return;
    }
  if (lstat (path, &st) < 0)
    fail_msg ("the stand-in %s does not exist on the host", path);
  if ((st.st_mode & S_IFMT) != c->type)
    fail_msg ("the stand-in %s is not of the type the case wants", path);
}

/* The refusal: the source's position, the field, the path and its type. */
static void
assert_refusal (const char *err, const char *policy_name, guint line, guint col, const char *path, const Case *c)
{
  g_autofree char *where =
    g_strdup_printf ("%s:%u:%u: rules[1].source: source %s: %s", policy_name, line, col, path, c->says);

  if (strstr (err, where) == NULL)
    fail_msg ("no refusal '%s...' in:\n%s", where, err);
}

/* COMMAND ended with STATUS and refused the policy (p.json) for C's
 * source PATH. */
static void
assert_refused (const RfxResult *r, const char *command, int status, guint line, guint col, const char *path,
                const Case *c)
{
  if (r->status != status)
    fail_msg ("source %s: %s exited %d, not %d; it printed:\n%s%s", path, command, r->status, status, r->out, r->err);
  assert_refusal (r->err, "p.json", line, col, path, c);
}

/* POLICY_PATH rewritten with C's object, proven to be on the host as C
 * says, as its source; the source's path, and where the text names it. */
static char *
write_case_policy (RFx *fx, const char *policy_path, const Case *c, guint *ret_line, guint *ret_col)
{
  char *path = case_path (fx, c);
  g_autofree char *text = policy_text (path, ret_line, ret_col);

  assert_host_object (path, c);
  unlink (policy_path); /* test_write writes in place: a shorter text would leave a tail */
  test_write (policy_path, text, 0644);
  return path;
}

/* What a test checks of one case: the policy at POLICY_PATH names C's
 * object PATH as its source, at LINE:COL. */
typedef void (*CaseCheck) (RFx *fx, const char *policy_path, const char *path, guint line, guint col, const Case *c);

/* CHECK of every case, the case's policy written first. */
static void
for_each_case (RFx *fx, CaseCheck check)
{
  const char *policy_path = test_dir_path (fx->dir, "ws/p.json");

  make_objects (fx);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      guint line, col;
      g_autofree char *path = write_case_policy (fx, policy_path, &cases[i], &line, &col);

      check (fx, policy_path, path, line, col, &cases[i]);
    }
}

static void
run_refuses (RFx *fx, const char *policy_path, const char *path, guint line, guint col, const Case *c)
{
  RfxResult res = { 0 };

  /* the command would list /x: what it shows, if it ran */
  rfx_run (fx, &res, "--policy", policy_path, "--", "/bin/ls", "-a", "/x", NULL);
  assert_refused (&res, "run", 125 /* a refused policy */, line, col, path, c);
  assert_string_equal (res.out, "");
  rfx_result_clear (&res);
}

RFX_CASE (test_run_refuses_a_source_that_is_not_a_directory)
{
  for_each_case (fx, run_refuses);
}

static void
check_and_explain_refuse (RFx *fx, const char *policy_path, const char *path, guint line, guint col, const Case *c)
{
  RfxResult check = { 0 }, explain = { 0 };

  rfx_fusebox (fx, &check, "policy", "check", "p.json", NULL);
  assert_refused (&check, "policy check", 1, line, col, path, c);
  assert_null (strstr (check.out, "ok"));
  rfx_fusebox (fx, &explain, "policy", "explain", "--policy", "p.json", "/x", NULL);
  assert_refused (&explain, "policy explain", 1, line, col, path, c);
  rfx_result_clear (&check);
  rfx_result_clear (&explain);
}

RFX_CASE (test_check_and_explain_report_the_refusal)
{
  for_each_case (fx, check_and_explain_refuse);
}

/* The control: a directory source is shown, and checks clean. */
RFX_CASE (test_a_directory_source_is_shown)
{
  const char *policy_path = test_dir_path (fx->dir, "ws/p.json");
  guint line, col;
  g_autofree char *text = policy_text (test_dir_path (fx->dir, "data"), &line, &col);
  RfxResult res = { 0 }, check = { 0 };

  make_objects (fx);
  test_write (policy_path, text, 0644);
  rfx_run (fx, &res, "--policy", policy_path, "--", "/bin/cat", "/x/inside", NULL);
  if (res.status != 0)
    fail_msg ("run exited %d: %s", res.status, res.err);
  assert_string_equal (res.out, "the data\n");
  rfx_fusebox (fx, &check, "policy", "check", "p.json", NULL);
  assert_int_equal (check.status, 0);
  assert_string_equal (check.out, "p.json: ok (2 rules)\n");
  rfx_result_clear (&res);
  rfx_result_clear (&check);
}

/* A source checked at load and swapped for a FIFO before the view opens it
 * (the check and the open are two looks at one path): the view refuses to
 * start rather than show an empty directory. */
RFX_CASE (test_view_refuses_a_swapped_source)
{
  const char *data = test_dir_path (fx->dir, "data");
  guint line, col;
  g_autofree char *text = policy_text (data, &line, &col);
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) policy = NULL;
  FbViewOptions vo;
  FbView *view = NULL;
  int r;

  make_objects (fx);
  policy = fb_policy_load_data (text, -1, "p.json", NULL, &error);
  if (policy == NULL)
    fail_msg ("%s", error->message);
  /* the swap */
  assert_int_equal (rename (data, test_dir_path (fx->dir, "data.moved")), 0);
  assert_int_equal (rename (test_dir_path (fx->dir, "fifo"), data), 0);
  fb_view_options_init (&vo);
  r = fb_view_new (policy, &vo, &view);
  if (r == 0)
    {
      fb_view_unref (view);
      fail_msg ("the view was made with a FIFO for the source %s (it would show an empty directory)", data);
    }
  assert_int_equal (r, -ENOTDIR);
}

/* `fusebox mount` over a policy's source: the mount would cover it, and
 * the view, checking that the source is still where its path leads, would
 * find itself there and refuse every path below it as moved.  Refused
 * before anything is mounted, naming the source and the mount point:
 * mounted on the source itself, and on a directory above it. */
RFX_CASE (test_mount_over_a_source_refused)
{
  const char *data = test_dir_path (fx->dir, "data");
  const char *policy_path = test_dir_path (fx->dir, "ws/p.json");
  guint line, col;
  g_autofree char *text = policy_text (data, &line, &col);
  const char *const mounts[] = { data, fx->tmp };

  make_objects (fx);
  test_assert_host_readable (test_dir_path (fx->dir, "data/inside"));
  test_write (policy_path, text, 0644);
  for (guint i = 0; i < G_N_ELEMENTS (mounts); i++)
    {
      RfxResult r = { 0 };
      g_autofree char *says = g_strdup_printf (
        "the source %s of /x lies at or below the mount point %s: the view would cover it", data, mounts[i]);

      rfx_fusebox (fx, &r, "mount", "--policy", policy_path, mounts[i], NULL);
      if (test_is_mounted (mounts[i]))
        {
          /* taken off (its daemon ends with it) before the test fails */
          umount2 (mounts[i], MNT_DETACH);
          fail_msg ("the view was mounted on %s, over its source %s", mounts[i], data);
        }
      if (r.status != 1 || strstr (r.err, says) == NULL)
        fail_msg ("mount on %s: exited %d, and no '%s' in:\n%s", mounts[i], r.status, says, r.err);
      rfx_result_clear (&r);
    }
  test_assert_host_readable (test_dir_path (fx->dir, "data/inside"));
}

RFX_DEFINE_MAIN (NULL, NULL, RFX_TEST (test_run_refuses_a_source_that_is_not_a_directory),
                 RFX_TEST (test_check_and_explain_report_the_refusal), RFX_TEST (test_a_directory_source_is_shown),
                 RFX_TEST (test_view_refuses_a_swapped_source), RFX_TEST (test_mount_over_a_source_refused))
