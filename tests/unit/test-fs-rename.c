/* fusebox — the view's rules for names that move: rename (plain,
 * RENAME_NOREPLACE, RENAME_EXCHANGE), hard links with different decisions,
 * protected names existing and missing at every depth, ancestors of rules,
 * the nodes a rename moves (their paths and decisions follow), private
 * sources, between which and any other nothing moves, and how many renames
 * that may measure a tree wait for the view's rename lock. */
#include "fs/fs-private.h" /* FbView's rename lock and walkers */
#include "tests/unit/test-fs-util.h"

static const char policy_text[] =
  "{ \"version\": 1,\n"
  "  \"protected_names\": { \".git\": \"hide\", \".agents\": \"hide\", \".codex\": \"read\" },\n"
  "  \"rules\": [\n"
  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
  "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"ws\" },\n"
  "  { \"path\": \"@H@/ws/proj/secret\", \"access\": \"deny\", \"why\": \"secret\" },\n"
  "  { \"path\": \"@H@/ws/ro\", \"access\": \"read\", \"why\": \"ro\" },\n"
  "  { \"path\": \"@H@/ws/later/locked\", \"access\": \"deny\", \"why\": \"locked\" },\n"
  "  { \"path\": \"@H@/denied\", \"access\": \"deny\", \"why\": \"denied\" },\n"
  "  { \"glob\": \"**/*.pem\", \"access\": \"deny\", \"why\": \"keys\" },\n"
  "  { \"glob\": \"**/vault/*\", \"access\": \"deny\", \"why\": \"vaults\" } ] }\n";

static const TestHostFile host_tree[] = {
  { "host/ws/a", "a\n" },
  { "host/ws/b", "b\n" },
  { "host/ws/proj/secret", "S\n" },
  { "host/ws/proj/plain", "p\n" },
  { "host/ws/repo/.git/config", "c\n" },
  { "host/ws/repo/.codex/notes", "n\n" },
  { "host/ws/repo/file", "f\n" },
  { "host/ws/ro/r", "r\n" },
  { "host/ws/dir1/x", "x\n" },
  { "host/ws/dir2", NULL },
  { "host/denied/d", "d\n" },
  { "host/ws/vault/key", "K\n" },
  { "host/ws/holder/vault/key", "K\n" },
  { NULL },
};

static int
ren (Fx *fx, const char *from, const char *to, unsigned flags)
{
  const char *n1, *n2;
  g_autoptr (FbViewNode) p1 = fx_parent (fx, from, &n1);
  g_autoptr (FbViewNode) p2 = fx_parent (fx, to, &n2);

  return fb_view_rename (fx->view, &fx->caller, p1, n1, p2, n2, flags);
}

static void
test_rename_rules (void **state)
{
  Fx *fx = *state;
  g_autofree char *before = NULL, *after = NULL;

  fx_make_tree (fx, host_tree);
  mkdir_host (fx, "host/ws/later");
  fx_start (fx, policy_text, NULL, -1);
  before = tree_sum (fx, "host");
  /* into read-only, out of read-only, from and to denied names */
  assert_errno (ren (fx, "/ws/a", "/ws/ro/a", 0), -EROFS);
  assert_errno (ren (fx, "/ws/ro/r", "/ws/r", 0), -EROFS);
  assert_errno (ren (fx, "/ws/proj/secret", "/ws/s2", 0), -EACCES);
  assert_errno (ren (fx, "/ws/a", "/ws/proj/secret", 0), -EACCES);
  assert_errno (ren (fx, "/ws/a", "/ws/new.pem", 0), -EACCES);
  /* exchange needs both ends writable */
  assert_errno (ren (fx, "/ws/a", "/ws/ro/r", RENAME_EXCHANGE), -EROFS);
  assert_errno (ren (fx, "/ws/ro/r", "/ws/a", RENAME_EXCHANGE), -EROFS);
  assert_errno (ren (fx, "/ws/a", "/ws/proj/secret", RENAME_EXCHANGE), -EACCES);
  /* protected names at any depth: can't be renamed to, exchanged into,
   * nor renamed from (a hidden source does not exist) */
  assert_errno (ren (fx, "/ws/a", "/ws/.git", 0), -EACCES);
  assert_errno (ren (fx, "/ws/a", "/ws/dir1/.agents", 0), -EACCES);
  assert_errno (ren (fx, "/ws/a", "/ws/repo/.git", RENAME_EXCHANGE), -EACCES);
  assert_errno (ren (fx, "/ws/repo/.git", "/ws/git2", 0), -ENOENT);
  assert_errno (ren (fx, "/ws/a", "/ws/repo/.codex", 0), -EROFS); /* .codex is read here */
  /* a directory under which another rule decides can't move, at either end */
  assert_errno (ren (fx, "/ws/proj", "/ws/proj2", 0), -EACCES);
  assert_errno (ren (fx, "/ws/proj", "/ws/dir2", RENAME_EXCHANGE), -EACCES);
  assert_errno (ren (fx, "/ws/dir2", "/ws/proj", RENAME_EXCHANGE), -EACCES);
  /* ... nor replace such a directory (later/ has a rule below it) */
  assert_errno (ren (fx, "/ws/dir2", "/ws/later", 0), -EACCES);
  /* a glob at any depth whose match takes in the directory's own name
   * ("**" + "/vault/" + "*"): vault/key would come out as v2/key, dir1/x
   * would go in as vault/x; at either end of an exchange too */
  assert_errno (ren (fx, "/ws/vault", "/ws/v2", 0), -EACCES);
  assert_errno (ren (fx, "/ws/dir1", "/ws/dir2/vault", 0), -EACCES);
  assert_errno (ren (fx, "/ws/dir1", "/ws/vault", RENAME_EXCHANGE), -EACCES);
  assert_errno (ren (fx, "/ws/vault", "/ws/dir1", RENAME_EXCHANGE), -EACCES);
  assert_errno (ren (fx, "/ws/b", "/ws/vault", RENAME_EXCHANGE), -EACCES); /* a file for a directory */
  /* the view's own checks come before the host's */
  assert_errno (ren (fx, "/ws/a", "/ws/b", RENAME_NOREPLACE | RENAME_EXCHANGE), -EINVAL);
  assert_errno (ren (fx, "/ws/a", "/ws/b", RENAME_NOREPLACE), -EEXIST);
  after = tree_sum (fx, "host");
  assert_string_equal (before, after);

  /* what is allowed works and shows on the host */
  assert_errno (ren (fx, "/ws/a", "/ws/b", RENAME_EXCHANGE), 0);
  {
    g_autofree char *a = read_host (fx, "host/ws/a");
    assert_string_equal (a, "b\n");
  }
  assert_errno (ren (fx, "/ws/a", "/ws/c", RENAME_NOREPLACE), 0);
  assert_false (host_exists (fx, "host/ws/a"));
  assert_true (host_exists (fx, "host/ws/c"));
  /* a directory holding a whole match of that glob moves, and the match
   * follows it */
  assert_errno (ren (fx, "/ws/holder", "/ws/holder2", 0), 0);
  {
    g_autoptr (FbViewNode) key = fx_node (fx, "/ws/holder2/vault/key");
    FbViewFile *file = NULL;
    assert_errno (fb_view_open (fx->view, &fx->caller, key, O_RDONLY, &file, NULL), -EACCES);
  }
  /* a directory without rules below moves; the protected .git inside
   * follows it and stays hidden */
  assert_errno (ren (fx, "/ws/repo", "/ws/repo2", 0), 0);
  {
    FbViewNode *n = NULL;
    assert_errno (fx_walk (fx, "/ws/repo2/.git", &n), -ENOENT);
    assert_true (host_exists (fx, "host/ws/repo2/.git/config"));
  }
  /* removing it leaves the hidden .git in place */
  {
    g_autoptr (FbViewNode) repo2 = fx_node (fx, "/ws/repo2");
    g_autoptr (FbViewNode) ws = fx_node (fx, "/ws");
    assert_errno (fb_view_unlink (fx->view, &fx->caller, repo2, "file"), 0);
    assert_errno (fb_view_unlink (fx->view, &fx->caller, repo2, ".git"), -ENOENT);
    assert_errno (fb_view_rmdir (fx->view, &fx->caller, repo2, ".git"), -ENOENT);
    assert_errno (fb_view_rmdir (fx->view, &fx->caller, ws, "repo2"), -ENOTEMPTY);
    assert_true (host_exists (fx, "host/ws/repo2/.git/config"));
  }
}

/* A renamed node stands for its new path: its path and decision follow,
 * and so do those of the nodes below it. */
static void
test_rename_moves_nodes (void **state)
{
  Fx *fx = *state;
  g_autofree char *path = NULL;
  g_autofree char *want = NULL;
  FbPolicyDecision d;

  fx_make_tree (fx, host_tree);
  fx_start (fx, policy_text, NULL, -1);
  g_autoptr (FbViewNode) dir1 = fx_node (fx, "/ws/dir1");
  g_autoptr (FbViewNode) x = fx_node (fx, "/ws/dir1/x");
  g_autoptr (FbViewNode) a = fx_node (fx, "/ws/a");
  assert_errno (ren (fx, "/ws/dir1", "/ws/moved", 0), 0);
  path = fb_view_node_dup_path (x);
  want = fx_vpath (fx, "/ws/moved/x");
  assert_string_equal (path, want);
  /* a file renamed over another: the replaced node leaves the table */
  assert_errno (ren (fx, "/ws/a", "/ws/moved/x", 0), 0);
  {
    FbViewFile *file = NULL;
    /* x was replaced: its node is detached but still the old inode */
    g_autoptr (FbViewNode) nx = fx_node (fx, "/ws/moved/x");
    assert_ptr_not_equal (nx, x);
    assert_errno (fb_view_open (fx->view, &fx->caller, nx, O_RDONLY, &file, NULL), 0);
    fb_view_release (fx->view, file);
  }
  fb_view_node_get_decision (a, &d);
  assert_int_equal (d.access, FB_POLICY_ACCESS_WRITE);
  {
    /* A directory moved to where a rule below decides otherwise (later/
     * does not exist, nothing would be replaced) would change the
     * decisions below it: refused like a move away from such a place, and
     * the nodes below keep theirs. */
    g_autoptr (FbViewNode) locked = NULL;
    FbViewFile *file = NULL;
    write_host (fx, "host/ws/dir2/locked", "L\n");
    locked = fx_node (fx, "/ws/dir2/locked");
    assert_errno (ren (fx, "/ws/dir2", "/ws/later", 0), -EACCES);
    fb_view_node_get_decision (locked, &d);
    assert_int_equal (d.access, FB_POLICY_ACCESS_WRITE);
    assert_errno (fb_view_open (fx->view, &fx->caller, locked, O_RDONLY, &file, NULL), 0);
    fb_view_release (fx->view, file);
  }
}

/* Two view paths to one inode: each keeps its own decision; link needs a
 * writable source and a writable, visible target. */
static void
test_hard_links (void **state)
{
  Fx *fx = *state;
  g_autofree char *h_secret = NULL, *h_alias = NULL;
  g_autoptr (FbViewNode) made = NULL;
  FbViewFile *file = NULL;
  struct stat s1, s2;
  char buf[8];

  fx_make_tree (fx, host_tree);
  h_secret = fx_host (fx, "host/ws/proj/secret");
  h_alias = fx_host (fx, "host/ws/alias");
  assert_int_equal (link (h_secret, h_alias), 0);
  fx_start (fx, policy_text, NULL, -1);
  g_autoptr (FbViewNode) alias = fx_node (fx, "/ws/alias");
  g_autoptr (FbViewNode) secret = fx_node (fx, "/ws/proj/secret");
  g_autoptr (FbViewNode) ws = fx_node (fx, "/ws");
  assert_ptr_not_equal (alias, secret);
  assert_errno (fb_view_getattr (fx->view, &fx->caller, alias, &s1), 0);
  assert_errno (fb_view_getattr (fx->view, &fx->caller, secret, &s2), 0);
  assert_int_equal (s1.st_ino, s2.st_ino);
  assert_errno (fb_view_open (fx->view, &fx->caller, alias, O_RDWR, &file, NULL), 0);
  assert_int_equal (fb_view_read (fx->view, file, buf, sizeof buf, 0), 2);
  fb_view_release (fx->view, file);
  assert_errno (fb_view_open (fx->view, &fx->caller, secret, O_RDONLY, &file, NULL), -EACCES);
  /* link from a denied or read-only path: refused */
  assert_errno (fb_view_link (fx->view, &fx->caller, secret, ws, "l1", NULL, NULL), -EACCES);
  g_autoptr (FbViewNode) ro = fx_node (fx, "/ws/ro");
  g_autoptr (FbViewNode) r = fx_node (fx, "/ws/ro/r");
  assert_errno (fb_view_link (fx->view, &fx->caller, r, ws, "l2", NULL, NULL), -EROFS);
  /* link into a read-only, denied or protected name: refused */
  assert_errno (fb_view_link (fx->view, &fx->caller, alias, ro, "l3", NULL, NULL), -EROFS);
  assert_errno (fb_view_link (fx->view, &fx->caller, alias, ws, "k.pem", NULL, NULL), -EACCES);
  assert_errno (fb_view_link (fx->view, &fx->caller, alias, ws, ".git", NULL, NULL), -EACCES);
  assert_false (host_exists (fx, "host/ws/l1"));
  assert_false (host_exists (fx, "host/ws/.git"));
  /* a writable link gets its own node and decision */
  assert_errno (fb_view_link (fx->view, &fx->caller, alias, ws, "alias2", &made, &s2), 0);
  assert_int_equal (s2.st_ino, s1.st_ino);
  assert_int_equal (s2.st_nlink, 3);
}

/* Protected names, existing and missing, at every depth, for every call
 * that takes a name; and the events that report them. */
static void
test_protected_names (void **state)
{
  Fx *fx = *state;
  static const char *const dirs[] = { "/ws", "/ws/repo", "/ws/dir1" };
  static const char *const names[] = { ".git", ".agents" };
  g_autofree char *before = NULL, *after = NULL;

  fx_make_tree (fx, host_tree);
  write_host (fx, "host/ws/.git/HEAD", "ref\n");
  fx_start (fx, policy_text, NULL, FB_LOG_LEVEL_MUTATIONS);
  before = tree_sum (fx, "host");
  for (guint i = 0; i < G_N_ELEMENTS (dirs); i++)
    for (guint j = 0; j < G_N_ELEMENTS (names); j++)
      {
        g_autoptr (FbViewNode) dir = fx_node (fx, dirs[i]);
        g_autoptr (FbViewNode) a = fx_node (fx, "/ws/b");
        const char *n = names[j];
        FbViewNode *out = NULL;
        FbViewFile *file = NULL;

        assert_errno (fb_view_lookup (fx->view, &fx->caller, dir, n, &out, NULL), -ENOENT);
        assert_errno (fb_view_mkdir (fx->view, &fx->caller, dir, n, 0755, NULL, NULL), -EACCES);
        assert_errno (fb_view_mknod (fx->view, &fx->caller, dir, n, S_IFIFO | 0644, 0, NULL, NULL), -EACCES);
        assert_errno (fb_view_symlink (fx->view, &fx->caller, dir, n, "x", NULL, NULL), -EACCES);
        assert_errno (fb_view_create (fx->view, &fx->caller, dir, n, O_WRONLY | O_CREAT, 0644, &file, NULL, NULL),
                      -EACCES);
        assert_errno (fb_view_link (fx->view, &fx->caller, a, dir, n, NULL, NULL), -EACCES);
        assert_errno (fb_view_unlink (fx->view, &fx->caller, dir, n), -ENOENT);
        assert_errno (fb_view_rmdir (fx->view, &fx->caller, dir, n), -ENOENT);
      }
  after = tree_sum (fx, "host");
  assert_string_equal (before, after);
  /* the existing ones were reported (with the protected rule), the missing
   * ones only where something tried to make them */
  {
    g_autofree char *git = fx_vpath (fx, "/ws/.git");
    g_autofree char *agents = fx_vpath (fx, "/ws/dir1/.agents");
    bool seen_git = false, seen_agents_mkdir = false, seen_agents_lookup = false;
    for (guint k = 0; k < fx->sink.events->len; k++)
      {
        TestEvent *e = fx->sink.events->pdata[k];
        if (strcmp (e->path, git) == 0 && strcmp (e->op, "lookup") == 0 && e->decision == FB_DECISION_HIDE)
          seen_git = true;
        if (strcmp (e->path, agents) == 0 && strcmp (e->op, "mkdir") == 0 && e->err == EACCES)
          seen_agents_mkdir = true;
        if (strcmp (e->path, agents) == 0 && strcmp (e->op, "lookup") == 0)
          seen_agents_lookup = true;
      }
    assert_true (seen_git);
    assert_true (seen_agents_mkdir);
    assert_false (seen_agents_lookup);
  }
  /* a "read" protected name shows, read-only */
  {
    g_autoptr (FbViewNode) codex = fx_node (fx, "/ws/repo/.codex");
    g_autoptr (FbViewNode) notes = fx_node (fx, "/ws/repo/.codex/notes");
    FbViewFile *file = NULL;
    assert_errno (fb_view_open (fx->view, &fx->caller, notes, O_RDONLY, &file, NULL), 0);
    fb_view_release (fx->view, file);
    assert_errno (fb_view_open (fx->view, &fx->caller, notes, O_WRONLY, &file, NULL), -EROFS);
    assert_errno (fb_view_mkdir (fx->view, &fx->caller, codex, "x", 0755, NULL, NULL), -EROFS);
  }
}

/* A private source is a filesystem of its own: nothing is renamed, exchanged
 * or linked between it and another source (EXDEV, logged as the view's own
 * refusal), so no host tree goes with the run's private directories, with
 * the .git the view hides in it; within one source renames are the host's. */
static void
test_private_sources (void **state)
{
  Fx *fx = *state;
  static const char pol[] =
    "{ \"version\": 1,\n"
    "  \"protected_names\": { \".git\": \"hide\" },\n"
    "  \"rules\": [\n"
    "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
    "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"ws\" },\n"
    "  { \"path\": \"@H@/tmp\", \"access\": \"write\", \"source\": \"private\", \"why\": \"tmp\" },\n"
    "  { \"path\": \"@H@/home\", \"access\": \"write\", \"source\": \"private\", \"why\": \"home\" } ] }\n";
  g_autofree char *before = NULL, *after = NULL;
  g_autofree char *proj = NULL, *to = NULL;
  bool logged = false;

  write_host (fx, "host/ws/proj/.git/HEAD", "ref\n");
  write_host (fx, "host/ws/proj/file", "f\n");
  write_host (fx, "host/ws/f", "f\n");
  fx_start (fx, pol, "run", -1);
  {
    g_autoptr (FbViewNode) tmp = fx_node (fx, "/tmp");
    g_autoptr (FbViewNode) home = fx_node (fx, "/home");
    assert_errno (fb_view_mkdir (fx->view, &fx->caller, tmp, "d", 0755, NULL, NULL), 0);
    assert_errno (fb_view_mkdir (fx->view, &fx->caller, home, "e", 0755, NULL, NULL), 0);
  }
  before = tree_sum (fx, "host");
  /* into a private source, out of one, between two; an exchange; a link */
  assert_errno (ren (fx, "/ws/proj", "/tmp/proj", 0), -EXDEV);
  assert_errno (ren (fx, "/ws/f", "/home/f", RENAME_NOREPLACE), -EXDEV);
  assert_errno (ren (fx, "/tmp/d", "/ws/d", 0), -EXDEV);
  assert_errno (ren (fx, "/tmp/d", "/home/d", 0), -EXDEV);
  assert_errno (ren (fx, "/ws/proj", "/tmp/d", RENAME_EXCHANGE), -EXDEV);
  assert_errno (ren (fx, "/home/e", "/ws/proj", RENAME_EXCHANGE), -EXDEV);
  {
    g_autoptr (FbViewNode) f = fx_node (fx, "/ws/f");
    g_autoptr (FbViewNode) tmp = fx_node (fx, "/tmp");
    assert_errno (fb_view_link (fx->view, &fx->caller, f, tmp, "l", NULL, NULL), -EXDEV);
  }
  after = tree_sum (fx, "host");
  assert_string_equal (before, after);
  assert_true (host_exists (fx, "host/ws/proj/.git/HEAD"));
  /* within one source: the host's */
  assert_errno (ren (fx, "/tmp/d", "/tmp/d2", 0), 0);
  assert_errno (ren (fx, "/ws/proj", "/ws/proj2", 0), 0);
  assert_true (host_exists (fx, "host/ws/proj2/.git/HEAD"));
  /* the refusal is the view's own, with its why */
  proj = fx_vpath (fx, "/ws/proj");
  to = fx_vpath (fx, "/tmp/proj");
  for (guint k = 0; k < fx->sink.events->len; k++)
    {
      TestEvent *e = fx->sink.events->pdata[k];
      if (strcmp (e->op, "rename") == 0 && strcmp (e->path, proj) == 0 && g_strcmp0 (e->target, to) == 0 &&
          e->decision == FB_DECISION_DENY && e->err == EXDEV && e->why != NULL &&
          strstr (e->why, "private source") != NULL)
        logged = true;
    }
  assert_true (logged);
}

typedef struct
{
  Fx *fx;
  const char *from, *to;
  int r;
} RenameCall;

static gpointer
rename_call (gpointer data)
{
  RenameCall *c = data;

  c->r = ren (c->fx, c->from, c->to, 0);
  return NULL;
}

/* Renames that may measure a tree (to a longer path) wait for the view's
 * rename lock two at a time; a third is answered EXDEV at once, logged as
 * the view's own refusal, so that no command's renames of big trees keep
 * every worker of a shared view waiting.  The lock is held here as a long
 * walk holds it. */
static void
test_renames_that_measure_wait_bounded (void **state)
{
  Fx *fx = *state;
  RenameCall calls[3] = {
    { fx, "/ws/d1", "/ws/d1-now-longer", 1 },
    { fx, "/ws/d2", "/ws/d2-now-longer", 1 },
    { fx, "/ws/d3", "/ws/d3-now-longer", 1 },
  };
  GThread *threads[3] = { NULL };
  g_autofree char *from = NULL;
  bool logged = false;

  write_host (fx, "host/ws/d1/f", "1\n");
  write_host (fx, "host/ws/d2/f", "2\n");
  write_host (fx, "host/ws/d3/f", "3\n");
  fx_start (fx, policy_text, NULL, -1);
  g_mutex_lock (&fx->view->rename_lock);
  for (int i = 0; i < 2; i++)
    threads[i] = g_thread_new ("rename", rename_call, &calls[i]);
  for (int n = 0; g_atomic_int_get (&fx->view->rename_walkers) < 2 && n < 30000; n++)
    g_usleep (1000);
  assert_int_equal (g_atomic_int_get (&fx->view->rename_walkers), 2);
  /* the third, in a thread too: a view without the bound would block on
   * the lock, and the test must end to say so */
  threads[2] = g_thread_new ("rename", rename_call, &calls[2]);
  for (int n = 0; calls[2].r == 1 && n < 30000; n++)
    g_usleep (1000);
  g_mutex_unlock (&fx->view->rename_lock);
  for (int i = 0; i < 3; i++)
    g_thread_join (threads[i]);
  assert_errno (calls[2].r, -EXDEV);
  assert_errno (calls[0].r, 0);
  assert_errno (calls[1].r, 0);
  assert_int_equal (g_atomic_int_get (&fx->view->rename_walkers), 0);
  assert_true (host_exists (fx, "host/ws/d3/f"));
  from = fx_vpath (fx, "/ws/d3");
  for (guint k = 0; k < fx->sink.events->len; k++)
    {
      TestEvent *e = fx->sink.events->pdata[k];
      if (strcmp (e->op, "rename") == 0 && strcmp (e->path, from) == 0 && e->decision == FB_DECISION_DENY &&
          e->err == EXDEV && e->why != NULL && strstr (e->why, "one at a time") != NULL)
        logged = true;
    }
  assert_true (logged);
  /* and with the lock free again, it goes */
  assert_errno (ren (fx, "/ws/d3", "/ws/d3-now-longer", 0), 0);
}

/* A directory the host moved (here, into a denied place) while the view
 * holds its node: the check of its name marks it moved, and what is
 * reached through it is refused with the view's rule, whatever the policy
 * says of the old path.  The check does not wait for rename_lock, which a
 * rename holds while it measures a tree (renames back to back kept it
 * away for tens of seconds): it runs while a rename holds it.  A name the
 * host gave another directory marks the old node when it is looked up. */
static void
test_moved_directory (void **state)
{
  Fx *fx = *state;
  g_autofree char *from = NULL, *to = NULL;
  g_autoptr (FbViewNode) mparent = NULL;
  g_autofree char *mname = NULL;
  FbViewFile *file = NULL;
  FbPolicyDecision d;

  fx_make_tree (fx, host_tree);
  fx_start (fx, policy_text, NULL, -1);
  g_autoptr (FbViewNode) dir1 = fx_node (fx, "/ws/dir1");
  g_autoptr (FbViewNode) x = fx_node (fx, "/ws/dir1/x");
  g_autoptr (FbViewNode) dir2 = fx_node (fx, "/ws/dir2");
  assert_errno (fb_view_open (fx->view, &fx->caller, x, O_RDONLY, &file, NULL), 0);
  fb_view_release (fx->view, file);

  from = fx_host (fx, "host/ws/dir1");
  to = fx_host (fx, "host/denied/dir1");
  assert_int_equal (rename (from, to), 0);
  assert_false (view_node_recheck (dir2, &mparent, &mname)); /* still where it was */
  g_mutex_lock (&fx->view->rename_lock);
  assert_true (view_node_recheck (dir1, &mparent, &mname));
  g_mutex_unlock (&fx->view->rename_lock);
  assert_string_equal (mname, "dir1");
  g_clear_pointer (&mparent, fb_view_node_unref);
  g_clear_pointer (&mname, g_free);
  assert_false (view_node_recheck (dir1, &mparent, &mname)); /* once */
  assert_errno (fb_view_open (fx->view, &fx->caller, x, O_RDONLY, &file, NULL), -EACCES);
  fb_view_node_get_decision (x, &d);
  assert_string_equal (d.rule->origin, "fusebox:moved-on-host");

  /* the host replaced ws/dir2: a lookup of the name finds the new one */
  {
    g_autofree char *old_dir2 = fx_host (fx, "host/ws/dir2");
    assert_int_equal (rmdir (old_dir2), 0);
  }
  mkdir_host (fx, "host/ws/dir2");
  {
    g_autoptr (FbViewNode) fresh = fx_node (fx, "/ws/dir2");
    assert_ptr_not_equal (fresh, dir2);
    fb_view_node_get_decision (fresh, &d);
    assert_int_equal (d.access, FB_POLICY_ACCESS_WRITE);
    fb_view_node_get_decision (dir2, &d);
    assert_string_equal (d.rule->origin, "fusebox:moved-on-host");
  }
}

TEST_DEFINE_MAIN (NULL, NULL, FX_TEST (test_rename_rules), FX_TEST (test_rename_moves_nodes), FX_TEST (test_hard_links),
                  FX_TEST (test_moved_directory), FX_TEST (test_protected_names), FX_TEST (test_private_sources),
                  FX_TEST (test_renames_that_measure_wait_bounded))
