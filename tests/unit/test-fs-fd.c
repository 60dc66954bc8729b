/* fusebox — the view's descriptor budget (fs/fs-view-fd.c): directory
 * descriptors are a bounded cache whatever the number of directories held,
 * a closed one opens again by name and only onto the same host object
 * (ESTALE for a directory replaced or swapped for a symlink on the host,
 * ENOENT for one gone), holders never see a descriptor closed under them,
 * and each view (each remote-API session in a view) gets its share of
 * open files (EMFILE past it) while the others keep theirs: a floor kept
 * for each process, and a client's processes together no more than their
 * client's part.  The budget is computed as if RLIMIT_NOFILE were
 * small (fb_view_fd_budget_override), so the bounds are reached with a few
 * hundred directories. */
#include "tests/unit/test-fs-util.h"

#include "tests/lib/test-host.h"

#include <pthread.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>

static const char policy_text[] = "{ \"version\": 1, \"rules\": [\n"
                                  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
                                  "  { \"path\": \"@H@/ws\", \"access\": \"write\", \"why\": \"workspace\" } ] }\n";

/* the budget of RLIMIT_NOFILE 256: reserve 64, 48 directories, 144 files */
#define LIMIT 256
#define NDIRS 400

static int
setup (void **state)
{
  fb_view_fd_budget_override (LIMIT);
  return fx_setup (state);
}

static int
teardown (void **state)
{
  int r = fx_teardown (state);
  fb_view_fd_set_floors (0);
  fb_view_fd_budget_override (0);
  return r;
}

static guint
count_own_fds (void)
{
  g_autoptr (GDir) dir = g_dir_open ("/proc/self/fd", 0, NULL);
  guint n = 0;

  assert_non_null (dir);
  while (g_dir_read_name (dir) != NULL)
    n++;
  return n;
}

static void
make_dirs (Fx *fx, guint n)
{
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *rel = g_strdup_printf ("host/ws/d%03u/f", i);
      write_host (fx, rel, "x\n");
    }
}

static FbViewNode *
dir_node (Fx *fx, guint i)
{
  g_autofree char *rel = g_strdup_printf ("/ws/d%03u", i);
  return fx_node (fx, rel);
}

/* Every directory node held at once (as the kernel holds what it looked
 * up), yet the process holds no more descriptors than the budget allows;
 * each of them still works: a getattr, a lookup below it, a file created
 * in it. */
static void
test_directories_bounded (void **state)
{
  Fx *fx = *state;
  g_autoptr (GPtrArray) nodes = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);
  FbViewFdBudget b;
  guint before, dirs;

  make_dirs (fx, NDIRS);
  fx_start (fx, policy_text, NULL, FB_LOG_LEVEL_OPENS);
  fb_view_fd_budget (&b);
  assert_int_equal (b.limit, LIMIT);
  assert_true (b.dir_max < NDIRS / 4);
  before = count_own_fds ();
  for (guint i = 0; i < NDIRS; i++)
    g_ptr_array_add (nodes, dir_node (fx, i));
  fb_view_fd_count (fx->view, &dirs, NULL);
  assert_true (dirs <= b.dir_max);
  /* the directories on the way (/, the test's own) are held once each */
  assert_true (count_own_fds () <= before + b.dir_max + 16);

  for (guint i = 0; i < NDIRS; i++)
    {
      FbViewNode *dir = nodes->pdata[i];
      g_autoptr (FbViewNode) child = NULL;
      g_autofree char *name = g_strdup_printf ("new%u", i);
      FbViewFile *file = NULL;
      struct stat st;

      assert_errno (fb_view_getattr (fx->view, &fx->caller, dir, &st), 0);
      assert_true (S_ISDIR (st.st_mode));
      assert_errno (fb_view_lookup (fx->view, &fx->caller, dir, "f", &child, &st), 0);
      assert_true (S_ISREG (st.st_mode));
      assert_errno (fb_view_create (fx->view, &fx->caller, dir, name, O_WRONLY, 0644, &file, NULL, NULL), 0);
      fb_view_release (fx->view, file);
    }
  for (guint i = 0; i < NDIRS; i++)
    {
      g_autofree char *rel = g_strdup_printf ("host/ws/d%03u/new%u", i, i);
      assert_true (host_exists (fx, rel));
    }
  fb_view_fd_count (fx->view, &dirs, NULL);
  assert_true (dirs <= b.dir_max);
  assert_true (count_own_fds () <= before + b.dir_max + 16);
}

/* Enough other directories held at once that every descriptor not in use
 * was closed. */
static void
evict_all (Fx *fx)
{
  g_autoptr (GPtrArray) nodes = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);

  for (guint i = 0; i < NDIRS; i++)
    g_ptr_array_add (nodes, dir_node (fx, i));
}

/* A directory whose descriptor was closed is opened again by name only
 * onto the object it showed: one replaced on the host, or swapped for a
 * symlink to it, is ESTALE (never the new object), one removed is
 * ENOENT; one left alone works. */
static void
test_reopen_checks_the_object (void **state)
{
  Fx *fx = *state;
  g_autoptr (FbViewNode) b = NULL, c = NULL, keep = NULL, child = NULL;
  g_autofree char *a_host = NULL, *old_host = NULL, *c_host = NULL;
  struct stat st;

  make_dirs (fx, NDIRS);
  write_host (fx, "host/ws/a/b/inner", "the original\n");
  write_host (fx, "host/ws/c/inner", "c\n");
  write_host (fx, "host/ws/k/inner", "k\n");
  fx_start (fx, policy_text, NULL, FB_LOG_LEVEL_OPENS);
  b = fx_node (fx, "/ws/a/b");
  c = fx_node (fx, "/ws/c");
  keep = fx_node (fx, "/ws/k");
  evict_all (fx);

  /* left alone: opened again, and it is the same */
  assert_errno (fb_view_lookup (fx->view, &fx->caller, keep, "inner", &child, &st), 0);
  g_clear_pointer (&child, fb_view_node_unref);

  /* /ws/a moved away and another a/b made in its place */
  a_host = fx_host (fx, "host/ws/a");
  old_host = fx_host (fx, "host/ws/a-old");
  assert_int_equal (rename (a_host, old_host), 0);
  write_host (fx, "host/ws/a/b/inner", "an impostor\n");
  assert_errno (fb_view_getattr (fx->view, &fx->caller, b, &st), -ESTALE);
  assert_errno (fb_view_lookup (fx->view, &fx->caller, b, "inner", &child, &st), -ESTALE);

  /* ... or a symlink to the original in its place: not followed */
  rm_rf (a_host);
  assert_int_equal (symlink ("a-old", a_host), 0);
  evict_all (fx);
  assert_errno (fb_view_getattr (fx->view, &fx->caller, b, &st), -ESTALE);

  /* gone */
  c_host = fx_host (fx, "host/ws/c");
  rm_rf (c_host);
  evict_all (fx);
  assert_errno (fb_view_getattr (fx->view, &fx->caller, c, &st), -ENOENT);
}

typedef struct
{
  Fx *fx;
  GPtrArray *nodes;
  ino_t *inos;
  guint seed;
  guint errors;
  guint wrong;
} Hammer;

static gpointer
hammer (gpointer data)
{
  Hammer *h = data;
  GRand *rand = g_rand_new_with_seed (h->seed);

  for (guint i = 0; i < 4000; i++)
    {
      guint k = (guint)g_rand_int_range (rand, 0, (gint32)h->nodes->len);
      struct stat st;
      if (fb_view_getattr (h->fx->view, &h->fx->caller, h->nodes->pdata[k], &st) < 0)
        h->errors++;
      else if (st.st_ino != h->inos[k])
        h->wrong++; /* a descriptor closed under us, its number reused */
    }
  g_rand_free (rand);
  return NULL;
}

/* Threads stat directories at random while each stat evicts another's
 * descriptor: no error, and never another directory's attributes. */
/* A view's steps on a node, in a thread: the node's attributes, then a
 * lookup of its name again. */
typedef struct
{
  Fx *fx;
  FbViewNode *node, *parent;
  int getattr, lookup;
  bool lookup_blank;
  gint done;
} Steps;

static void *
steps_run (void *p)
{
  Steps *s = p;
  g_autoptr (FbViewNode) again = NULL;
  struct stat st;

  s->getattr = fb_view_getattr (s->fx->view, &s->fx->caller, s->node, &st);
  s->lookup = fb_view_lookup (s->fx->view, &s->fx->caller, s->parent, "t", &again, &st);
  /* a blank: an empty directory of the view's own, not the mount's root */
  s->lookup_blank = s->lookup == 0 && again != s->node && st.st_ino != 1;
  g_atomic_int_set (&s->done, 1);
  return NULL;
}

/* A mount's root whose descriptor was closed, the mount then taken off (as
 * logind takes off /run/user/UID) and another user's FUSE filesystem
 * mounted there, which the kernel gives the same device number (the lowest
 * free) and root inode number (1): the node is not opened again onto it
 * (ESTALE), a lookup of the name shows a blank, and nothing asks it (its
 * server never answers: the steps run in a thread, and a connection still
 * asked after 10 s is aborted through fusectl).  Needs root and
 * /dev/fuse. */
static void
test_reopen_checks_the_mount (void **state)
{
  Fx *fx = *state;
  g_autoptr (FbViewNode) t = NULL, ws = NULL;
  g_autofree char *t_host = NULL, *opts = NULL;
  struct statx was, now;
  Steps s = { 0 };
  pthread_t thread;
  int fd;

  if (geteuid () != 0 || test_host_lacks ("fuse") != NULL)
    test_skip_test (false, "mounting a tmpfs and another user's FUSE filesystem needs root and /dev/fuse");
  make_dirs (fx, NDIRS);
  write_host (fx, "host/ws/t/.keep", "");
  t_host = fx_host (fx, "host/ws/t");
  assert_int_equal (mount ("fusebox-test", t_host, "tmpfs", 0, NULL), 0);
  assert_int_equal (statx (AT_FDCWD, t_host, AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &was), 0);
  fx_start (fx, policy_text, NULL, FB_LOG_LEVEL_OPENS);
  ws = fx_node (fx, "/ws");
  t = fx_node (fx, "/ws/t");
  evict_all (fx);
  assert_int_equal (umount2 (t_host, 0), 0);

  fd = open ("/dev/fuse", O_RDWR | O_CLOEXEC);
  assert_true (fd >= 0);
  opts = g_strdup_printf ("fd=%d,rootmode=40000,user_id=1000,group_id=1000,allow_other", fd);
  assert_int_equal (mount ("fusebox-test", t_host, "fuse", MS_NOSUID | MS_NODEV, opts), 0);
  assert_int_equal (statx (AT_FDCWD, t_host, AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &now), 0);
  print_message ("the tmpfs was %u:%u inode %llu, the FUSE filesystem after it %u:%u inode %llu\n", was.stx_dev_major,
                 was.stx_dev_minor, (unsigned long long)was.stx_ino, now.stx_dev_major, now.stx_dev_minor,
                 (unsigned long long)now.stx_ino);

  s.fx = fx;
  s.node = t;
  s.parent = ws;
  assert_int_equal (pthread_create (&thread, NULL, steps_run, &s), 0);
  for (int waited = 0; waited < 10000 && !g_atomic_int_get (&s.done); waited += 20)
    g_usleep (20 * 1000);
  if (!g_atomic_int_get (&s.done))
    test_fuse_abort (makedev (now.stx_dev_major, now.stx_dev_minor));
  pthread_join (thread, NULL);
  assert_int_equal (umount2 (t_host, MNT_DETACH), 0);
  close (fd);
  if (!g_atomic_int_get (&s.done))
    fail_msg ("the view asked the FUSE filesystem mounted where its tmpfs was (still waiting after 10 s)");
  assert_errno (s.getattr, -ESTALE);
  assert_errno (s.lookup, 0);
  assert_true (s.lookup_blank);
}

static void
test_holders_never_lose_their_descriptor (void **state)
{
  Fx *fx = *state;
  g_autoptr (GPtrArray) nodes = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);
  g_autofree ino_t *inos = g_new0 (ino_t, NDIRS);
  Hammer h[6];
  GThread *threads[G_N_ELEMENTS (h)];

  make_dirs (fx, NDIRS);
  fx_start (fx, policy_text, NULL, FB_LOG_LEVEL_OPENS);
  for (guint i = 0; i < NDIRS; i++)
    {
      g_autofree char *rel = g_strdup_printf ("host/ws/d%03u", i);
      g_autofree char *path = fx_host (fx, rel);
      struct stat st;
      assert_int_equal (stat (path, &st), 0);
      inos[i] = st.st_ino;
      g_ptr_array_add (nodes, dir_node (fx, i));
    }
  for (guint t = 0; t < G_N_ELEMENTS (h); t++)
    {
      h[t] = (Hammer){ fx, nodes, inos, t + 1, 0, 0 };
      threads[t] = g_thread_new ("hammer", hammer, &h[t]);
    }
  for (guint t = 0; t < G_N_ELEMENTS (h); t++)
    {
      g_thread_join (threads[t]);
      assert_int_equal (h[t].errors, 0);
      assert_int_equal (h[t].wrong, 0);
    }
}

static FbView *
new_view (Fx *fx)
{
  FbViewOptions options;
  FbView *view = NULL;

  fb_view_options_init (&options);
  options.sink = &fx->sink.sink;
  assert_int_equal (fb_view_new (fx->policy, &options, &view), 0);
  return view;
}

/* Open FILE in VIEW as CALLER until it fails: the files opened go to
 * OPEN, and the failure is returned. */
static int
open_as_until_refused (FbView *view, const FbViewCaller *caller, FbViewNode *file, GPtrArray *open)
{
  for (;;)
    {
      FbViewFile *f = NULL;
      int r = fb_view_open (view, caller, file, O_RDONLY, &f, NULL);
      if (r < 0)
        return r;
      g_ptr_array_add (open, f);
    }
}

static int
open_until_refused (Fx *fx, FbView *view, FbViewNode *file, GPtrArray *open)
{
  return open_as_until_refused (view, &fx->caller, file, open);
}

static void
release_all (FbView *view, GPtrArray *open)
{
  for (guint i = 0; i < open->len; i++)
    fb_view_release (view, open->pdata[i]);
  g_ptr_array_set_size (open, 0);
}

/* A view holds at most half of what the others leave of the files'
 * budget: past it the caller gets EMFILE (and the refusal is logged), and
 * another view still opens its own share; what one gives back, the other
 * may take. */
static void
test_open_files_shared (void **state)
{
  Fx *fx = *state;
  g_autoptr (FbView) other = NULL;
  g_autoptr (FbViewNode) f1 = NULL, f2 = NULL;
  g_autoptr (GPtrArray) open1 = g_ptr_array_new ();
  g_autoptr (GPtrArray) open2 = g_ptr_array_new ();
  FbViewFdBudget b;
  guint files;

  write_host (fx, "host/ws/file", "data\n");
  fx_start (fx, policy_text, NULL, FB_LOG_LEVEL_OPENS);
  other = new_view (fx);
  fb_view_fd_budget (&b);
  f1 = fx_node (fx, "/ws/file");
  {
    g_autofree char *path = fx_vpath (fx, "/ws/file");
    assert_errno (fb_view_walk (other, &fx->caller, path, 0, &f2), 0);
  }

  assert_errno (open_until_refused (fx, fx->view, f1, open1), -EMFILE);
  assert_int_equal (open1->len, b.file_max / 2);
  fb_view_fd_count (fx->view, NULL, &files);
  assert_int_equal (files, open1->len);
  {
    TestEvent *e = fx_find_event (fx, "open", "/ws/file");
    assert_non_null (e);
    assert_int_equal (e->err, EMFILE);
  }
  /* the other view: half of what is left */
  assert_errno (open_until_refused (fx, other, f2, open2), -EMFILE);
  assert_int_equal (open2->len, (b.file_max - open1->len) / 2);
  /* given back: taken by the other */
  release_all (fx->view, open1);
  release_all (other, open2);
  assert_errno (open_until_refused (fx, other, f2, open2), -EMFILE);
  assert_int_equal (open2->len, b.file_max / 2);
  release_all (other, open2);
  fb_view_fd_count (other, NULL, &files);
  assert_int_equal (files, 0);
}

/* Sessions of the remote API sharing one view are owners of their own:
 * one session's handles leave another session, and the view's own FUSE
 * connection, their share. */
static void
test_open_files_by_session (void **state)
{
  Fx *fx = *state;
  g_autoptr (FbViewNode) f = NULL;
  g_autoptr (GPtrArray) open1 = g_ptr_array_new ();
  g_autoptr (GPtrArray) open2 = g_ptr_array_new ();
  g_autoptr (GPtrArray) open3 = g_ptr_array_new ();
  FbViewCaller s1 = fx->caller, s2 = fx->caller;
  FbViewFdBudget b;
  guint files;

  s1.session = "session-1";
  s2.session = "session-2";
  write_host (fx, "host/ws/file", "data\n");
  fx_start (fx, policy_text, NULL, FB_LOG_LEVEL_OPENS);
  fb_view_fd_budget (&b);
  f = fx_node (fx, "/ws/file");
  assert_errno (open_as_until_refused (fx->view, &s1, f, open1), -EMFILE);
  assert_int_equal (open1->len, b.file_max / 2);
  assert_errno (open_as_until_refused (fx->view, &s2, f, open2), -EMFILE);
  assert_int_equal (open2->len, (b.file_max - open1->len) / 2);
  assert_errno (open_until_refused (fx, fx->view, f, open3), -EMFILE);
  assert_int_equal (open3->len, (b.file_max - open1->len - open2->len) / 2);
  fb_view_fd_count (fx->view, NULL, &files);
  assert_int_equal (files, open1->len + open2->len + open3->len);
  release_all (fx->view, open1);
  release_all (fx->view, open2);
  release_all (fx->view, open3);
  fb_view_fd_count (fx->view, NULL, &files);
  assert_int_equal (files, 0);
}

/* a view whose FUSE connection's opens are charged to ACCOUNT */
static FbView *
new_view_charged (Fx *fx, FbViewFdAccount *account)
{
  FbViewOptions options;
  FbView *view = NULL;

  fb_view_options_init (&options);
  options.sink = &fx->sink.sink;
  options.fd_account = account;
  assert_int_equal (fb_view_new (fx->policy, &options, &view), 0);
  return view;
}

static FbViewNode *
walk_in (Fx *fx, FbView *view, const char *rel)
{
  g_autofree char *path = fx_vpath (fx, rel);
  FbViewNode *node = NULL;

  assert_errno (fb_view_walk (view, &fx->caller, path, 0, &node), 0);
  return node;
}

/* the budget of RLIMIT_NOFILE 1024: reserve 256, 576 files, room for 4
 * floors of 64 in half of them, 320 shared */
#define CLIENTS_LIMIT 1024
#define GREEDY 3

/* A client starting process after process, each holding all it can: its
 * processes together get half of what is shared, each at least its
 * floor; another client's process still gets its floor and half of what
 * the greedy one leaves; a floor more than are kept is refused.  The
 * refusals are fusebox's, logged with why. */
static void
test_open_files_by_client (void **state)
{
  Fx *fx = *state;
  GPtrArray *open[GREEDY + 1];
  FbViewFdAccount *greedy[GREEDY], *victim = NULL, *refused = NULL;
  FbView *gviews[GREEDY], *vview;
  FbViewNode *gfiles[GREEDY], *vfile;
  guint got[GREEDY], vgot, sum = 0;
  FbViewFdBudget b;

  fb_view_fd_budget_override (CLIENTS_LIMIT);
  assert_int_equal (fb_view_fd_set_floors (100), 4);
  write_host (fx, "host/ws/file", "data\n");
  fx_start (fx, policy_text, NULL, FB_LOG_LEVEL_OPENS);
  fb_view_fd_budget (&b);
  assert_int_equal (b.floor, FB_VIEW_FD_FLOOR);
  assert_int_equal (b.floors, 4);
  assert_int_equal (b.shared, b.file_max - 4 * FB_VIEW_FD_FLOOR);

  for (guint i = 0; i < GREEDY; i++)
    {
      assert_errno (fb_view_fd_account_new ("greedy", true, &greedy[i]), 0);
      gviews[i] = new_view_charged (fx, greedy[i]);
      gfiles[i] = walk_in (fx, gviews[i], "/ws/file");
      open[i] = g_ptr_array_new ();
      assert_errno (open_until_refused (fx, gviews[i], gfiles[i], open[i]), -EMFILE);
      got[i] = open[i]->len;
      assert_int_equal (fb_view_fd_account_held (greedy[i]), got[i]);
      sum += got[i];
      print_message ("greedy process %u: %u files\n", i, got[i]);
    }
  /* the first: its floor and half of what is shared; the others, their
   * floors: the client's part is taken, and more processes make it no
   * bigger */
  assert_int_equal (got[0], FB_VIEW_FD_FLOOR + b.shared / 2);
  for (guint i = 1; i < GREEDY; i++)
    assert_int_equal (got[i], FB_VIEW_FD_FLOOR);
  {
    TestEvent *e = fx_find_event (fx, "open", "/ws/file");
    assert_non_null (e);
    assert_int_equal (e->err, EMFILE);
    assert_int_equal (e->decision, FB_DECISION_DENY);
    assert_non_null (strstr (e->why, "share of the files fusebox keeps open"));
  }

  /* another client's process: its floor, and half of what is left */
  assert_errno (fb_view_fd_account_new ("victim", true, &victim), 0);
  vview = new_view_charged (fx, victim);
  vfile = walk_in (fx, vview, "/ws/file");
  open[GREEDY] = g_ptr_array_new ();
  assert_errno (open_until_refused (fx, vview, vfile, open[GREEDY]), -EMFILE);
  vgot = open[GREEDY]->len;
  print_message ("the other client's process: %u files\n", vgot);
  assert_int_equal (vgot, FB_VIEW_FD_FLOOR + (b.shared - b.shared / 2) / 2);
  assert_true (sum + vgot <= b.file_max);

  /* every floor kept is taken: no fifth */
  assert_errno (fb_view_fd_account_new ("victim", true, &refused), -ENFILE);
  assert_null (refused);
  fb_view_fd_budget (&b);
  assert_int_equal (b.floors_taken, 4);

  /* all given back: the floors too, with the accounts */
  release_all (vview, open[GREEDY]);
  g_ptr_array_unref (open[GREEDY]);
  for (guint i = 0; i < GREEDY; i++)
    {
      release_all (gviews[i], open[i]);
      g_ptr_array_unref (open[i]);
      fb_view_node_unref (gfiles[i]);
      fb_view_unref (gviews[i]);
      fb_view_fd_account_unref (greedy[i]);
    }
  fb_view_node_unref (vfile);
  fb_view_unref (vview);
  fb_view_fd_account_unref (victim);
  fb_view_fd_budget (&b);
  assert_int_equal (b.floors_taken, 0);
  assert_int_equal (b.files, 0);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test_setup_teardown (test_directories_bounded, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_reopen_checks_the_object, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_reopen_checks_the_mount, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_holders_never_lose_their_descriptor, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_open_files_shared, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_open_files_by_session, setup, teardown),
                  cmocka_unit_test_setup_teardown (test_open_files_by_client, setup, teardown))
