/* fusebox — the set of nodes behind the view's table and index
 * (fs/fs-view-table.c), against a GHashTable doing the same: adds,
 * replacements, removals in any order (entries shifted back over long runs
 * of colliding keys, and in the set's own order), growth and shrinking, and
 * going through every node.
 * The nodes come from slabs (fs/fs-view-node-slab.c), as a view's do: the
 * set keeps their handles there. */
#include "fs/fs-private.h"
#include "tests/lib/test-util.h"

static guint
ino_hash (const FbViewNode *n)
{
  return (guint)n->ino;
}

/* every key in one of 8 hashes: long runs of probes */
static guint
clumped_hash (const FbViewNode *n)
{
  return (guint)(n->ino % 8);
}

static bool
ino_equal (const FbViewNode *a, const FbViewNode *b)
{
  return a->ino == b->ino;
}

static NodeSlabs slabs;

static FbViewNode *
node_with (ino_t ino)
{
  FbViewNode *n = node_slabs_alloc (&slabs, sizeof (FbViewNode));

  n->ino = ino;
  return n;
}

static int
slabs_setup (void **state)
{
  node_slabs_init (&slabs);
  return 0;
}

static int
slabs_teardown (void **state)
{
  assert_int_equal (node_slabs_bytes (&slabs), 0);
  node_slabs_clear (&slabs);
  return 0;
}

/* SET holds exactly what REF does (ino -> node). */
static void
assert_same (const NodeSet *set, GHashTable *ref)
{
  GHashTableIter iter;
  gpointer key, value;
  FbViewNode *n;
  guint pos = 0, seen = 0;

  assert_int_equal (set->len, g_hash_table_size (ref));
  g_hash_table_iter_init (&iter, ref);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      FbViewNode probe = { 0 };
      probe.ino = (ino_t)GPOINTER_TO_SIZE (key);
      assert_ptr_equal (node_set_find (set, &probe), value);
    }
  while ((n = node_set_next (set, &pos)) != NULL)
    {
      assert_ptr_equal (g_hash_table_lookup (ref, GSIZE_TO_POINTER (n->ino)), n);
      seen++;
    }
  assert_int_equal (seen, set->len);
}

static void
run_against_reference (NodeSetHash hash, guint keys, guint steps)
{
  g_autoptr (GHashTable) ref = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr (GPtrArray) all = g_ptr_array_new_with_free_func (node_slabs_free);
  g_autoptr (GRand) rand = g_rand_new_with_seed (4242);
  NodeSet set;

  node_set_init (&set, &slabs, hash, ino_equal);
  for (guint step = 0; step < steps; step++)
    {
      ino_t ino = 1 + g_rand_int_range (rand, 0, (gint32)keys);
      FbViewNode *in = g_hash_table_lookup (ref, GSIZE_TO_POINTER (ino));
      FbViewNode probe = { 0 };

      probe.ino = ino;
      /* growing for the first half of the steps, shrinking after */
      if (in == NULL || (step < steps / 2 && g_rand_int_range (rand, 0, 4) == 0))
        {
          FbViewNode *n = node_with (ino);
          g_ptr_array_add (all, n);
          if (in == NULL && step >= steps / 2 && g_rand_int_range (rand, 0, 3) != 0)
            {
              assert_null (node_set_find (&set, &probe));
              assert_false (node_set_remove (&set, n));
              continue;
            }
          node_set_add (&set, n); /* replaces IN when there is one */
          g_hash_table_insert (ref, GSIZE_TO_POINTER (ino), n);
        }
      else
        {
          /* an equal key that is not the node in the set: not removed */
          FbViewNode *other = node_with (ino);
          assert_false (node_set_remove (&set, other));
          node_slabs_free (other);
          assert_true (node_set_remove (&set, in));
          g_hash_table_remove (ref, GSIZE_TO_POINTER (ino));
        }
      if (step % 97 == 0)
        assert_same (&set, ref);
    }
  assert_same (&set, ref);
  node_set_clear (&set);
}

static void
test_spread_keys (void **state)
{
  run_against_reference (ino_hash, 5000, 60000);
}

static void
test_clumped_keys (void **state)
{
  run_against_reference (clumped_hash, 300, 6000);
}

/* A set shrinks back once emptied, and works again after. */
static void
test_empty_and_refill (void **state)
{
  g_autoptr (GPtrArray) all = g_ptr_array_new_with_free_func (node_slabs_free);
  NodeSet set;
  guint bits;

  node_set_init (&set, &slabs, ino_hash, ino_equal);
  for (guint i = 0; i < 10000; i++)
    {
      g_ptr_array_add (all, node_with (i));
      node_set_add (&set, all->pdata[i]);
    }
  bits = set.bits;
  for (guint i = 0; i < 10000; i++)
    assert_true (node_set_remove (&set, all->pdata[i]));
  assert_int_equal (set.len, 0);
  assert_true (set.bits < bits - 8);
  node_set_add (&set, all->pdata[7]);
  {
    FbViewNode probe = { 0 };
    probe.ino = 7;
    assert_ptr_equal (node_set_find (&set, &probe), all->pdata[7]);
  }
  node_set_clear (&set);
}

/* The longest run of taken slots in SET (linear probing walks one to the
 * end to find a free slot or to remove a node). */
static guint
longest_run (const NodeSet *set)
{
  guint size = 1u << set->bits, run = 0, longest = 0;

  for (guint i = 0; i < 2 * size; i++) /* twice: a run may wrap */
    {
      run = set->slots[i % size] != 0 ? run + 1 : 0;
      longest = MAX (longest, run);
    }
  return MIN (longest, set->len);
}

/* Emptied in the order of its own slots, as a view's end does: at every
 * shrink, what is left still lies spread over the smaller set, in short
 * runs.  (Halving by the hash's top bits squeezed what was left into one
 * run as long as the nodes left, and every removal after walked it.) */
static void
test_removed_in_slot_order (void **state)
{
  g_autoptr (GPtrArray) all = g_ptr_array_new_with_free_func (node_slabs_free);
  g_autoptr (GPtrArray) order = g_ptr_array_new ();
  NodeSet set;
  FbViewNode *n;
  guint pos = 0, bits, shrinks = 0, worst = 0;

  node_set_init (&set, &slabs, ino_hash, ino_equal);
  for (guint i = 0; i < 100000; i++)
    {
      g_ptr_array_add (all, node_with (1000 + i));
      node_set_add (&set, all->pdata[i]);
    }
  while ((n = node_set_next (&set, &pos)) != NULL)
    g_ptr_array_add (order, n);
  assert_int_equal (order->len, 100000);
  bits = set.bits;
  for (guint i = 0; i < order->len; i++)
    {
      assert_true (node_set_remove (&set, order->pdata[i]));
      if (set.bits < bits)
        {
          guint run = longest_run (&set);
          bits = set.bits;
          shrinks++;
          worst = MAX (worst, run);
          if (run > 64)
            fail_msg ("after shrinking to %u slots with %u nodes left, a run of %u taken slots", 1u << set.bits,
                      set.len, run);
        }
    }
  assert_int_equal (set.len, 0);
  assert_true (shrinks >= 8);
  fprintf (stderr, "(%u shrinks, the longest run after one: %u slots)\n", shrinks, worst);
  node_set_clear (&set);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test_setup_teardown (test_spread_keys, slabs_setup, slabs_teardown),
                  cmocka_unit_test_setup_teardown (test_clumped_keys, slabs_setup, slabs_teardown),
                  cmocka_unit_test_setup_teardown (test_empty_and_refill, slabs_setup, slabs_teardown),
                  cmocka_unit_test_setup_teardown (test_removed_in_slot_order, slabs_setup, slabs_teardown))
