/* fusebox — the blocks a view's nodes live in (fs/fs-view-node-slab.c):
 * blocks of every size are zero-filled, 8-byte aligned, apart from each
 * other and name their allocator from any byte inside; blocks freed and
 * made again in any order keep the others intact; and the memory goes
 * back to the system once they are freed, as a view's does when the
 * kernel forgets its names. */
#include "fs/fs-private.h"
#include "tests/lib/test-util.h"

#include <string.h>

typedef struct
{
  guint8 *p;
  gsize size;
  guint8 fill;
} Block;

static void
block_check (NodeSlabs *s, const Block *b)
{
  assert_int_equal ((guintptr)b->p % 8, 0);
  assert_ptr_equal (node_slabs_of (b->p), s);
  assert_ptr_equal (node_slabs_of (b->p + b->size - 1), s);
  for (gsize i = 0; i < b->size; i++)
    assert_int_equal (b->p[i], b->fill);
}

static void
block_make (NodeSlabs *s, Block *b, GRand *rand, guint8 fill)
{
  b->size = (gsize)g_rand_int_range (rand, 1, (gint32)NODE_BLOCK_MAX + 1);
  b->p = node_slabs_alloc (s, b->size);
  for (gsize i = 0; i < b->size; i++)
    assert_int_equal (b->p[i], 0);
  b->fill = fill;
  memset (b->p, fill, b->size);
}

/* Built with AddressSanitizer. */
static bool
sanitized (void)
{
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#endif
#endif
  return false;
}

/* The process's resident anonymous memory, in KiB. */
static gsize
rss_anon_kib (void)
{
  g_autofree char *status = NULL;
  const char *line;

  assert_true (g_file_get_contents ("/proc/self/status", &status, NULL, NULL));
  line = strstr (status, "\nRssAnon:");
  assert_non_null (line);
  return (gsize)g_ascii_strtoull (line + strlen ("\nRssAnon:"), NULL, 10);
}

static void
test_blocks_apart (void **state)
{
  g_autoptr (GRand) rand = g_rand_new_with_seed (77);
  g_autofree Block *blocks = g_new0 (Block, 20000);
  NodeSlabs s;

  node_slabs_init (&s);
  for (guint i = 0; i < 20000; i++)
    block_make (&s, &blocks[i], rand, (guint8)(i % 251 + 1));
  for (guint i = 0; i < 20000; i++)
    block_check (&s, &blocks[i]);
  /* freed and made again at random, over slabs emptied and released */
  for (guint round = 0; round < 60000; round++)
    {
      Block *b = &blocks[g_rand_int_range (rand, 0, 20000)];
      if (b->p != NULL)
        {
          block_check (&s, b);
          node_slabs_free (b->p);
          b->p = NULL;
        }
      else
        block_make (&s, b, rand, (guint8)(round % 251 + 1));
    }
  for (guint i = 0; i < 20000; i++)
    if (blocks[i].p != NULL)
      {
        block_check (&s, &blocks[i]);
        node_slabs_free (blocks[i].p);
      }
  assert_int_equal (node_slabs_bytes (&s), 0);
  node_slabs_clear (&s);
}

static void
test_memory_returns (void **state)
{
  g_autoptr (GRand) rand = g_rand_new_with_seed (5);
  const guint n = 200000; /* about 40 MiB of blocks */
  g_autofree Block *blocks = g_new0 (Block, n);
  g_autofree guint *order = g_new (guint, n);
  gsize before, full, after;
  NodeSlabs s;

  node_slabs_init (&s);
  before = rss_anon_kib ();
  for (guint i = 0; i < n; i++)
    {
      block_make (&s, &blocks[i], rand, 0x5a);
      order[i] = i;
    }
  full = rss_anon_kib ();
  assert_true (full - before > 30 * 1024);
  /* freed in an order unrelated to the addresses, as a kernel forgets */
  for (guint i = n; i > 1; i--)
    {
      guint j = (guint)g_rand_int_range (rand, 0, (gint32)i), t = order[i - 1];
      order[i - 1] = order[j];
      order[j] = t;
    }
  for (guint i = 0; i < n; i++)
    node_slabs_free (blocks[order[i]].p);
  after = rss_anon_kib ();
  /* what is left: at most a kept slab per size class (AddressSanitizer's
   * shadow of the blocks, an eighth of them, stays resident) */
  if (sysconf (_SC_PAGESIZE) == 4096)
    assert_in_range (after, 0, before + 1024 + (sanitized () ? (full - before) / 8 + 1024 : 0));
  node_slabs_clear (&s);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_blocks_apart), cmocka_unit_test (test_memory_returns))
