/* fusebox — listings with attributes (the kernel's READDIRPLUS): which
 * entries the view looks up (fs-view-dir.c, "Attributes").  Directories
 * always; other entries only while callers stat what they list (a name
 * given bare, then looked up), and for a while; the entries themselves are
 * the same either way, and a hidden name never comes. */
#include "tests/unit/test-fs-util.h"

#include <dirent.h>

static const char policy_text[] = "{ \"version\": 1,\n"
                                  "  \"rules\": [\n"
                                  "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" },\n"
                                  "  { \"glob\": \"@H@/*/hidden-*\", \"access\": \"hide\", \"why\": \"hidden\" } ] }\n";

typedef struct
{
  GString *names;   /* "name:n" (with a node) or "name:-", in the host's order */
  GPtrArray *nodes; /* references taken */
} Listed;

static bool
collect (const FbViewDirEntry *e, gpointer data)
{
  Listed *l = data;

  if (strcmp (e->name, ".") == 0 || strcmp (e->name, "..") == 0)
    return true;
  /* without a node, the type and inode number still come */
  assert_non_null (e->st);
  assert_int_equal (IFTODT (e->st->st_mode), e->type);
  assert_int_equal (e->st->st_ino, e->ino);
  if (e->node != NULL)
    {
      assert_int_equal (e->node != NULL && S_ISDIR (fb_view_node_get_type (e->node)), e->type == DT_DIR);
      g_ptr_array_add (l->nodes, fb_view_node_ref (e->node));
    }
  g_string_append_printf (l->names, "%s%s:%s", l->names->len > 0 ? " " : "", e->name, e->node != NULL ? "n" : "-");
  return true;
}

static gint
cmp_words (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

/* The entries of DIR listed with attributes, sorted: "a:- sub:n". */
static char *
list_plus (Fx *fx, FbViewNode *dir)
{
  Listed l = { g_string_new (NULL), g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref) };
  g_auto (GStrv) words = NULL;

  assert_errno (fb_view_readdir_at (fx->view, &fx->caller, dir, 0, true, collect, &l), 0);
  g_ptr_array_unref (l.nodes);
  words = g_strsplit (l.names->str, " ", -1);
  g_string_free (l.names, TRUE);
  qsort (words, g_strv_length (words), sizeof *words, cmp_words);
  return g_strjoinv (" ", words);
}

static void
test_plus_follows_callers (void **state)
{
  Fx *fx = *state;
  g_autofree char *first = NULL, *again = NULL, *other = NULL, *bare = NULL;
  g_autofree char *link = NULL;
  g_autoptr (FbViewNode) d1 = NULL, d2 = NULL, a = NULL;
  guint n;

  write_host (fx, "host/d1/a", "a\n");
  write_host (fx, "host/d1/hidden-x", "never shown\n");
  mkdir_host (fx, "host/d1/sub");
  write_host (fx, "host/d2/b", "b\n");
  write_host (fx, "host/d2/hidden-y", "never shown\n");
  mkdir_host (fx, "host/d2/sub");
  link = fx_host (fx, "host/d2/l");
  assert_int_equal (symlink ("b", link), 0);
  fx_start (fx, policy_text, NULL, -1);
  /* held, as the kernel holds the directories it lists */
  d1 = fx_node (fx, "/d1");
  d2 = fx_node (fx, "/d2");

  /* a walk enters directories: theirs come; the files' do not */
  first = list_plus (fx, d1);
  assert_string_equal (first, "a:- sub:n");
  /* nor again, while nobody stats a name listed bare */
  again = list_plus (fx, d1);
  assert_string_equal (again, "a:- sub:n");

  /* a caller stats a file it was given bare (`ls -l`): the next listings
   * give every entry's attributes, hidden names still left out */
  assert_errno (fb_view_lookup (fx->view, &fx->caller, d1, "a", &a, NULL), 0);
  other = list_plus (fx, d2);
  assert_string_equal (other, "b:n l:n sub:n");

  /* for a while only: then bare again, until a caller stats one again */
  for (n = 0; n < 1000; n++)
    {
      g_autofree char *s = list_plus (fx, d2);
      if (strcmp (s, "b:- l:- sub:n") == 0)
        break;
      assert_string_equal (s, "b:n l:n sub:n");
    }
  assert_true (n > 0 && n < 1000);
  bare = list_plus (fx, d2);
  assert_string_equal (bare, "b:- l:- sub:n");
}

TEST_DEFINE_MAIN (NULL, NULL, FX_TEST (test_plus_follows_callers))
