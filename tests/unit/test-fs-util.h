/* fusebox — helpers shared by the view's unit tests (header only): a temp
 * tree per test, policies built from JSON with @T@ standing for the temp
 * directory, a sink that records events, a checksum of a host tree
 * (test_tree_sum of tests/lib). */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "fs/fs.h"
#include "tests/lib/test-util.h"

typedef struct
{
  const char *op, *path, *target, *access, *why, *comm; /* in the sink's strings */
  FbDecision decision;
  int err;
  gint64 bytes_read, bytes_written;
  pid_t pid;
} TestEvent;

typedef struct
{
  FbAccessSink sink; /* first: the view gets &sink */
  GMutex lock;
  GPtrArray *events;     /* TestEvent, under lock */
  GStringChunk *strings; /* the events' strings, kept for the sink's life; under lock */
} TestSink;

/* S (or NULL) kept in TS's strings; TS's lock held. */
static G_GNUC_UNUSED const char *
test_sink_keep (TestSink *ts, const char *s)
{
  return s != NULL ? g_string_chunk_insert_const (ts->strings, s) : NULL;
}

static G_GNUC_UNUSED void
test_sink_push (FbAccessSink *sink, const FbAccessEvent *ev)
{
  TestSink *ts = (TestSink *)sink;
  TestEvent *e = g_new0 (TestEvent, 1);

  /* The contract: rule is never NULL for a decided access. */
  if (ev->rule == NULL)
    fail_msg ("event %s %s without a rule", fb_op_to_string (ev->op), ev->path);
  e->decision = ev->decision;
  e->err = ev->err;
  e->bytes_read = ev->bytes_read;
  e->bytes_written = ev->bytes_written;
  e->pid = ev->pid;
  g_mutex_lock (&ts->lock);
  e->op = test_sink_keep (ts, fb_op_to_string (ev->op));
  e->path = test_sink_keep (ts, ev->path);
  e->target = test_sink_keep (ts, ev->target);
  e->access = test_sink_keep (ts, ev->access);
  e->why = test_sink_keep (ts, ev->rule->why);
  e->comm = test_sink_keep (ts, ev->comm);
  g_ptr_array_add (ts->events, e);
  g_mutex_unlock (&ts->lock);
}

typedef struct
{
  char *tmp;   /* the test's temp directory */
  char *vroot; /* TMP/host: view paths in the tests are relative to it */
  FbPolicy *policy;
  FbView *view;
  TestSink sink;
  FbViewCaller caller;
  const char *const *hidden_paths; /* FbViewOptions.hidden_paths for fx_start, or NULL */
} Fx;

static G_GNUC_UNUSED char *
fx_host (Fx *fx, const char *rel)
{
  return g_build_filename (fx->tmp, rel, NULL);
}

static G_GNUC_UNUSED void
rm_rf (const char *path)
{
  test_rm_rf (path);
}

static G_GNUC_UNUSED void
write_host (Fx *fx, const char *rel, const char *content)
{
  g_autofree char *path = fx_host (fx, rel);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autoptr (GError) error = NULL;

  assert_int_equal (g_mkdir_with_parents (dir, 0755), 0);
  if (!g_file_set_contents (path, content, -1, &error))
    fail_msg ("%s", error->message);
}

static G_GNUC_UNUSED void
mkdir_host (Fx *fx, const char *rel)
{
  g_autofree char *path = fx_host (fx, rel);

  assert_int_equal (g_mkdir_with_parents (path, 0755), 0);
}

/* A file of a test's host tree, below TMP. */
typedef struct
{
  const char *rel;
  const char *content; /* NULL: an empty directory */
} TestHostFile;

/* Make every file of TREE (ended by a { NULL } row) below TMP. */
static G_GNUC_UNUSED void
fx_make_tree (Fx *fx, const TestHostFile *tree)
{
  for (const TestHostFile *f = tree; f->rel != NULL; f++)
    {
      if (f->content != NULL)
        write_host (fx, f->rel, f->content);
      else
        mkdir_host (fx, f->rel);
    }
}

static G_GNUC_UNUSED bool
host_exists (Fx *fx, const char *rel)
{
  g_autofree char *path = fx_host (fx, rel);
  struct stat st;

  return lstat (path, &st) == 0;
}

static G_GNUC_UNUSED char *
read_host (Fx *fx, const char *rel)
{
  g_autofree char *path = fx_host (fx, rel);
  char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  return text;
}

/* test_tree_sum() of TMP + REL */
static G_GNUC_UNUSED char *
tree_sum (Fx *fx, const char *rel)
{
  g_autofree char *path = fx_host (fx, rel);

  return test_tree_sum (path, rel);
}

/* The policy TEMPLATE with @T@ replaced by the temp directory. */
static G_GNUC_UNUSED FbPolicy *
fx_load_policy (Fx *fx, const char *template, const char *run_rel)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) text = g_string_new (template);
  g_autofree char *run = run_rel != NULL ? fx_host (fx, run_rel) : NULL;
  FbPolicyVars vars = { 0 };
  FbPolicy *policy;

  g_string_replace (text, "@H@", fx->vroot, 0);
  g_string_replace (text, "@T@", fx->tmp, 0);
  vars.run = run;
  vars.home = fx->tmp;
  vars.workspace = fx->tmp;
  vars.cwd = fx->tmp;
  policy = fb_policy_load_data (text->str, -1, "test.json", &vars, &error);
  if (policy == NULL)
    fail_msg ("policy did not load: %s\n%s", error->message, text->str);
  return policy;
}

static G_GNUC_UNUSED Fx *
fx_new (void)
{
  Fx *fx = g_new0 (Fx, 1);
  g_autoptr (GError) error = NULL;

  fx->tmp = g_dir_make_tmp ("fusebox-fs-XXXXXX", &error);
  if (fx->tmp == NULL)
    fail_msg ("%s", error->message);
  fx->vroot = g_build_filename (fx->tmp, "host", NULL);
  fx->sink.sink.push = test_sink_push;
  g_mutex_init (&fx->sink.lock);
  fx->sink.events = g_ptr_array_new_with_free_func (g_free);
  fx->sink.strings = g_string_chunk_new (4096);
  fx->caller.pid = getpid ();
  fx->caller.uid = getuid ();
  fx->caller.gid = getgid ();
  fx->caller.comm = "unit-test";
  return fx;
}

/* Load the policy and make the view (log level ALL unless LEVEL >= 0). */
static G_GNUC_UNUSED void
fx_start (Fx *fx, const char *template, const char *run_rel, int level)
{
  FbViewOptions options;

  fx->policy = fx_load_policy (fx, template, run_rel);
  fb_view_options_init (&options);
  options.sink = &fx->sink.sink;
  options.log_level = level >= 0 ? (FbLogLevel)level : FB_LOG_LEVEL_ALL;
  options.hidden_paths = fx->hidden_paths;
  assert_int_equal (fb_view_new (fx->policy, &options, &fx->view), 0);
}

static G_GNUC_UNUSED void
fx_free (Fx *fx)
{
  if (fx->view != NULL)
    {
      /* Every node was released: the table is empty. */
      assert_int_equal (fb_view_count_nodes (fx->view), 0);
      fb_view_unref (fx->view);
    }
  if (fx->policy != NULL)
    fb_policy_unref (fx->policy);
  rm_rf (fx->tmp);
  g_free (fx->tmp);
  g_free (fx->vroot);
  g_ptr_array_unref (fx->sink.events);
  g_string_chunk_free (fx->sink.strings);
  g_mutex_clear (&fx->sink.lock);
  g_free (fx);
}

/* cmocka setup and teardown: the teardown runs after the test's own
 * g_autoptr cleanups, so it can check that every node was released. */
static G_GNUC_UNUSED int
fx_setup (void **state)
{
  *state = fx_new ();
  return 0;
}

static G_GNUC_UNUSED int
fx_teardown (void **state)
{
  fx_free (*state);
  return 0;
}

/* A test with an Fx of its own as its state. */
#define FX_TEST(test) cmocka_unit_test_setup_teardown (test, fx_setup, fx_teardown)

static G_GNUC_UNUSED void
fx_clear_events (Fx *fx)
{
  g_mutex_lock (&fx->sink.lock);
  g_ptr_array_set_size (fx->sink.events, 0);
  g_mutex_unlock (&fx->sink.lock);
}

/* The view path of REL (a path below TMP/host, starting with "/"). */
static G_GNUC_UNUSED char *
fx_vpath (Fx *fx, const char *rel)
{
  return g_strconcat (fx->vroot, rel, NULL);
}

/* The last event with OP and PATH (relative to TMP/host), or NULL. */
static G_GNUC_UNUSED TestEvent *
fx_find_event (Fx *fx, const char *op, const char *rel)
{
  g_autofree char *path = fx_vpath (fx, rel);

  for (guint i = fx->sink.events->len; i-- > 0;)
    {
      TestEvent *e = fx->sink.events->pdata[i];
      if (g_strcmp0 (e->op, op) == 0 && g_strcmp0 (e->path, path) == 0)
        return e;
    }
  return NULL;
}

/* Walk REL (relative to TMP/host). */
static G_GNUC_UNUSED int
fx_walk (Fx *fx, const char *rel, FbViewNode **ret)
{
  g_autofree char *path = fx_vpath (fx, rel);

  return fb_view_walk (fx->view, &fx->caller, path, FB_VIEW_WALK_NOFOLLOW, ret);
}

static G_GNUC_UNUSED FbViewNode *
fx_node (Fx *fx, const char *path)
{
  FbViewNode *node = NULL;
  int r = fx_walk (fx, path, &node);

  if (r < 0)
    fail_msg ("walk %s: %s", path, g_strerror (-r));
  return node;
}

/* PATH's directory node (a new reference) and its last component. */
static G_GNUC_UNUSED FbViewNode *
fx_parent (Fx *fx, const char *path, const char **ret_name)
{
  g_autofree char *dir = g_path_get_dirname (path);

  *ret_name = strrchr (path, '/') + 1;
  return fx_node (fx, dir);
}

#define assert_errno(expr, expected)                                                                                   \
  do                                                                                                                   \
    {                                                                                                                  \
      long r_ = (long)(expr);                                                                                          \
      long e_ = (long)(expected);                                                                                      \
      if (!((e_ == 0 && r_ >= 0) || r_ == e_))                                                                         \
        fail_msg ("%s: got %ld (%s), expected %ld (%s)", #expr, r_, r_ < 0 ? g_strerror ((int)-r_) : "ok", e_,         \
                  e_ < 0 ? g_strerror ((int)-e_) : "ok");                                                              \
    }                                                                                                                  \
  while (0)
