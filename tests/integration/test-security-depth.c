/* Adversarial tests: no tree deeper than the view decides, and a bounded
 * daemon under deep and wide trees.
 *
 * Through `fusebox mount`, in a writable workspace:
 *  - A chain of directories made as deep as the view allows (mkdir stops
 *    at FB_VIEW_PATH_MAX with ENAMETOOLONG) can't be moved under another
 *    chain: the rename answers ENAMETOOLONG, nothing moves on the host,
 *    and the refusal is logged as fusebox's own (rule "fusebox",
 *    fusebox:path-too-long).  Before, a rename checked only its new name,
 *    and repeating it built trees of any depth.  Renames that keep every
 *    path within the limit still work.
 *  - A chain made on the host, outside fusebox, deeper than the limit is
 *    walked through the mount down to the limit and no further
 *    (ENAMETOOLONG), and the refused lookup is logged.
 *  - The memory the daemon takes for the attack (the deepest chains
 *    renames can build, round after round, and a wide directory) stays
 *    within the documented budget of FB_VIEW_NODE_BYTES per node (fs/fs.h),
 *    read from the daemon's VmHWM.  Before, each node kept its whole view
 *    path, rebuilt for every node below a moved directory: memory grew with
 *    the square of the depth.
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include "tests/lib/test-log.h"
#include "tests/lib/test-mount.h"

#include "fs/fs.h"

#include <dirent.h>

static const char policy_text[] = "{ \"version\": 1,\n"
                                  "  \"rules\": [\n"
                                  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"system files\" },\n"
                                  "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"the workspace\" } ] }\n";

static const char refusal[] = "\"rule\":\"fusebox\",\"rule_origin\":\"fusebox:path-too-long\"";

/* Make NAME in DIR_FD, then "d" below it, level after level, until MAX
 * levels or a refusal (its errno in *RET_ERRNO, 0 when MAX was reached).
 * Returns the levels made below NAME. */
static int
make_chain (int dir_fd, const char *name, int max, int *ret_errno)
{
  int fd, made = 0;

  *ret_errno = 0;
  if (mkdirat (dir_fd, name, 0755) < 0)
    fail_msg ("mkdir %s: %s", name, g_strerror (errno));
  fd = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (fd >= 0);
  while (made < max)
    {
      int next;
      if (mkdirat (fd, "d", 0755) < 0)
        {
          *ret_errno = errno;
          break;
        }
      next = openat (fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (next < 0)
        fail_msg ("open the new level %d: %s", made + 1, g_strerror (errno));
      close (fd);
      fd = next;
      made++;
    }
  close (fd);
  return made;
}

/* The directory LEVELS "d" below DIR_FD/NAME, opened one name at a time. */
static int
open_level (int dir_fd, const char *name, int levels)
{
  int fd = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  for (int i = 0; fd >= 0 && i < levels; i++)
    {
      int next = openat (fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      close (fd);
      fd = next;
    }
  return fd;
}

static long
status_kb (pid_t pid, const char *field)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", (int)pid);
  g_autofree char *text = NULL;
  const char *p;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    fail_msg ("can't read %s", path);
  p = strstr (text, field);
  if (p == NULL)
    fail_msg ("no %s in %s", field, path);
  return strtol (p + strlen (field), NULL, 10);
}

/* Once unmounted, the log holds fusebox's own refusal (ENAMETOOLONG) of
 * OP (its "op" field) on a path with PATH in it; else fail with WHAT. */
static void
assert_refusal_logged (MFx *fx, const char *op, const char *path, const char *what)
{
  g_autofree char *log = NULL;

  mfx_unmount (fx);
  log = mfx_log (fx);
  if (!test_log_has (log, op, path, "\"decision\":\"deny\"", "\"errno\":36", refusal, NULL))
    fail_msg ("%s:\n%.2000s", what, log);
}

MFX_CASE (test_rename_chain_refused)
{
  g_autofree char *m_ws = mfx_m (fx, "/ws");
  g_autofree char *h_ws = mfx_h (fx, "/ws");
  int ws, target, e, n1, n2, h;

  mfx_mkdir (fx, "/ws");
  mfx_mount (fx, policy_text, NULL);
  ws = open (m_ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (ws >= 0);

  /* two chains as deep as the view lets mkdir go: it stops at the limit */
  n1 = make_chain (ws, "c1", 4096, &e);
  assert_int_equal (e, ENAMETOOLONG);
  n2 = make_chain (ws, "c2", 100, &e);
  assert_int_equal (n2, 100);
  assert_true (n1 > 1000);

  /* c1 below c2's 100th level: its new name fits, the tree below does not */
  target = open_level (ws, "c2", 100);
  assert_true (target >= 0);
  assert_errno_is (renameat (ws, "c1", target, "x"), ENAMETOOLONG);
  /* the same with a name one byte longer, in place */
  assert_errno_is (renameat (ws, "c1", ws, "c1xy"), ENAMETOOLONG);
  /* nothing moved on the host */
  h = open (h_ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (h >= 0);
  assert_int_equal (faccessat (h, "c1", F_OK, AT_SYMLINK_NOFOLLOW), 0);
  assert_int_equal (faccessat (h, "c1xy", F_OK, AT_SYMLINK_NOFOLLOW), -1);

  /* what fits still moves: the chain to a name no longer, and the short
   * chain's top below the long one's first levels */
  assert_errno_is (renameat (ws, "c1", ws, "c3"), 0);
  assert_errno_is (renameat (ws, "c3", ws, "c1"), 0);
  {
    int shallow = open_level (ws, "c1", 10);
    assert_true (shallow >= 0);
    assert_errno_is (renameat (ws, "c2", shallow, "y"), 0);
    assert_errno_is (renameat (shallow, "y", ws, "c2"), 0);
    close (shallow);
  }
  close (target);
  close (ws);
  assert_refusal_logged (fx, "\"op\":\"rename\"", "/ws/c1\"", "the refused rename was not logged as fusebox's own");
  test_rm_deep (h, "c1");
  test_rm_deep (h, "c2");
  close (h);
}

MFX_CASE (test_host_tree_deeper_reported)
{
  g_autofree char *m_ws = mfx_m (fx, "/ws");
  g_autofree char *h_ws = mfx_h (fx, "/ws");
  gsize view_len = strlen (h_ws) + strlen ("/deep");
  int h, ws, fd, e, made, reached = 0;

  mfx_mkdir (fx, "/ws");
  h = open (h_ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (h >= 0);
  /* on the host, outside fusebox: view paths past the limit (mkdirat by
   * descriptor goes past PATH_MAX) */
  made = make_chain (h, "deep", (FB_VIEW_PATH_MAX - (int)view_len) / 2 + 200, &e);
  assert_int_equal (e, 0);
  assert_true (view_len + 2 * (gsize)made > FB_VIEW_PATH_MAX + 300);

  mfx_mount (fx, policy_text, NULL);
  ws = open (m_ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (ws >= 0);
  fd = openat (ws, "deep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (fd >= 0);
  for (;;)
    {
      int next = openat (fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (next < 0)
        {
          e = errno;
          break;
        }
      close (fd);
      fd = next;
      reached++;
    }
  /* followed down to the limit, not past it */
  assert_int_equal (e, ENAMETOOLONG);
  assert_true (view_len + 2 * (gsize)reached <= FB_VIEW_PATH_MAX);
  assert_true (view_len + 2 * (gsize)(reached + 1) > FB_VIEW_PATH_MAX);
  close (fd);
  close (ws);
  assert_refusal_logged (fx, "\"op\":\"lookup\"", "/deep/d/d", "the host tree deeper than the limit was not reported");
  test_rm_deep (h, "deep");
  close (h);
}

/* Rounds of the attack: each makes a fresh chain to the limit and moves
 * everything made so far below its 100th level. */
#define ROUNDS 8
#define WIDE 10000
/* Thread stacks touched, malloc's per-thread arenas, the log writer's
 * buffers: what the daemon may take besides its nodes. */
#define SLACK_KB (32 * 1024)

MFX_CASE (test_memory_budget)
{
  g_autofree char *m_ws = mfx_m (fx, "/ws");
  g_autofree char *h_ws = mfx_h (fx, "/ws");
  g_autofree char *top = g_strdup ("r0");
  long base_kb, hwm_kb, budget_kb;
  guint64 nodes = 0;
  int ws, h, e;

  mfx_mkdir (fx, "/ws");
  mfx_mount (fx, policy_text, NULL);
  ws = open (m_ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (ws >= 0);
  /* the daemon at rest, once it has served a little */
  {
    int warm = make_chain (ws, "warm", 10, &e);
    nodes += warm + 1;
  }
  base_kb = status_kb (fx->daemon, "VmRSS:");

  nodes += make_chain (ws, top, 4096, &e) + 1;
  for (int i = 1; i < ROUNDS; i++)
    {
      g_autofree char *name = g_strdup_printf ("r%d", i);
      int target;

      nodes += make_chain (ws, name, 4096, &e) + 1;
      target = open_level (ws, name, 100);
      assert_true (target >= 0);
      /* the attack: everything so far below this chain */
      if (renameat (ws, top, target, "x") == 0)
        {
          g_free (top);
          top = g_strdup (name);
        }
      close (target);
    }
  /* and a wide directory: a node per name */
  assert_int_equal (mkdirat (ws, "wide", 0755), 0);
  {
    int wide = openat (ws, "wide", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true (wide >= 0);
    for (int i = 0; i < WIDE; i++)
      {
        char name[32];
        int fd;
        g_snprintf (name, sizeof name, "file-%05d", i);
        fd = openat (wide, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        assert_true (fd >= 0);
        close (fd);
      }
    close (wide);
    nodes += WIDE + 1;
  }
  hwm_kb = status_kb (fx->daemon, "VmHWM:");
  budget_kb = (long)(nodes * FB_VIEW_NODE_BYTES / 1024) + SLACK_KB;
  fprintf (stderr, "daemon: VmRSS %ld kB at rest, VmHWM %ld kB after %" G_GUINT64_FORMAT " nodes (budget %ld kB)\n",
           base_kb, hwm_kb, nodes, budget_kb);
  if (hwm_kb - base_kb > budget_kb)
    fail_msg ("the daemon grew by %ld kB for %" G_GUINT64_FORMAT " nodes: past the budget of %d bytes a node (%ld kB)",
              hwm_kb - base_kb, nodes, FB_VIEW_NODE_BYTES, budget_kb);
  close (ws);
  mfx_unmount (fx);

  h = open (h_ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (h >= 0);
  for (int i = 0; i < ROUNDS; i++)
    {
      g_autofree char *name = g_strdup_printf ("r%d", i);
      test_rm_deep (h, name);
    }
  close (h);
}

MFX_DEFINE_MAIN (MFX_TEST (test_rename_chain_refused), MFX_TEST (test_host_tree_deeper_reported),
                 MFX_TEST (test_memory_budget))
