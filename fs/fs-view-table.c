/* fusebox — a set of nodes by a key of theirs: the node table and the
 * index of host objects (fs-view-node.c).
 *
 * Every name the kernel remembers is in both, so the sets are made for
 * size: open addressing with linear probing, 4 bytes per slot, 3/8 to 3/4
 * full while they grow, so that a node costs a set 5 to 11 bytes (a
 * GHashTable keeps a 4-byte hash beside each pointer and is 3/8 to 15/16
 * full: 13 to 32 bytes).  A slot holds the node's handle among the view's
 * slabs (node_slabs_handle(): 29 bits, as the nodes live there) and, in
 * its low 3 bits, bits of the key's hash, so that most probes past other
 * nodes don't read them.  Deletions shift the following entries back (no
 * tombstones), and a set less than an eighth full shrinks by half.  Not
 * locked: the view's lock is held.
 */
#include "fs/fs-private.h"

#include <string.h>
#include <sys/mman.h>

#define TAG_MASK ((guint32)7)
#define SET_MIN_BITS 4
/* Slot arrays from this size on are mapped apart, not malloc'd: freeing a
 * block malloc mapped for itself raises its thresholds to that block's size
 * (M_MMAP_THRESHOLD, and M_TRIM_THRESHOLD to twice it), after which every
 * arena keeps up to that much freed memory: megabytes more after the
 * kernel forgot a walk's names. */
#define SLOTS_MAP_MIN (64 * 1024)

G_STATIC_ASSERT (NODE_HANDLE_BITS + 3 <= 32);

static inline FbViewNode *
slot_node (const NodeSet *set, guint32 slot)
{
  return node_slabs_at (set->slabs, slot >> 3);
}

static inline guint32
slot_of (FbViewNode *node, guint32 tag)
{
  return node_slabs_handle (node) << 3 | tag;
}

/* The hash mixed (keys such as inode numbers come in runs, which linear
 * probing would turn into long clusters; murmur3's finalizer, whose every
 * output bit depends on every input bit): the home slot from its low bits,
 * the tag from its top ones.
 *
 * Low bits, not the top ones a multiplicative hash would use, for the
 * shrinking: halving the set then lays its two halves over each other
 * (slot I and slot I + size/2 go to I), so nodes left where the removals
 * did not reach keep the density they had.  With the top bits it would
 * halve their span instead (slots I and I + 1 go to I / 2): removing
 * nodes in the order of their slots, as a view's end does, left the rest
 * at one end of the set, squeezed at the first shrink into one run as long
 * as they were many, and each later removal walked that run: 11 s to end a
 * view after a walk of 160,000 names. */
static inline guint32
mix (guint32 h)
{
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

static inline guint
home (const NodeSet *set, guint32 m)
{
  return m & ((1u << set->bits) - 1);
}

static inline guint32
tag (guint32 m)
{
  return (m >> 29) & TAG_MASK;
}

static guint32 *
slots_new (guint bits)
{
  gsize size = sizeof (guint32) << bits;
  void *p;

  if (size < SLOTS_MAP_MIN)
    return g_malloc0 (size);
  p = mmap (NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    g_error ("%s: failed to allocate %" G_GSIZE_FORMAT " bytes", G_STRLOC, size); /* as g_malloc */
  return p;
}

static void
slots_free (guint32 *slots, guint bits)
{
  gsize size = sizeof (guint32) << bits;

  if (slots == NULL)
    return;
  if (size < SLOTS_MAP_MIN)
    g_free (slots);
  else
    munmap (slots, size);
}

void
node_set_init (NodeSet *set, NodeSlabs *slabs, NodeSetHash hash, NodeSetEqual equal)
{
  memset (set, 0, sizeof *set);
  set->slabs = slabs;
  set->hash = hash;
  set->equal = equal;
}

void
node_set_clear (NodeSet *set)
{
  slots_free (set->slots, set->bits);
  set->slots = NULL;
  set->bits = 0;
  set->len = 0;
}

static void
place (NodeSet *set, FbViewNode *node)
{
  guint32 m = mix (set->hash (node));
  guint mask = (1u << set->bits) - 1;
  guint i = home (set, m);

  while (set->slots[i] != 0)
    i = (i + 1) & mask;
  set->slots[i] = slot_of (node, tag (m));
}

static void
resize (NodeSet *set, guint bits)
{
  guint32 *old = set->slots;
  guint old_bits = set->bits;
  guint old_size = old_bits == 0 ? 0 : 1u << old_bits;

  set->slots = slots_new (bits);
  set->bits = bits;
  for (guint i = 0; i < old_size; i++)
    if (old[i] != 0)
      place (set, slot_node (set, old[i]));
  slots_free (old, old_bits);
}

FbViewNode *
node_set_find_by (const NodeSet *set, guint hash, NodeSetMatch match, gconstpointer key)
{
  guint32 m;
  guint mask, i;
  guint32 t;

  if (set->len == 0)
    return NULL;
  m = mix (hash);
  mask = (1u << set->bits) - 1;
  t = tag (m);
  for (i = home (set, m); set->slots[i] != 0; i = (i + 1) & mask)
    if ((set->slots[i] & TAG_MASK) == t && match (slot_node (set, set->slots[i]), key))
      return slot_node (set, set->slots[i]);
  return NULL;
}

/* find's key when it is a node: the set's own equality, through a match */
typedef struct
{
  const NodeSet *set;
  const FbViewNode *node;
} EqualKey;

static bool
match_equal (const FbViewNode *node, gconstpointer key)
{
  const EqualKey *k = key;

  return k->set->equal (node, k->node);
}

FbViewNode *
node_set_find (const NodeSet *set, const FbViewNode *key)
{
  EqualKey k = { set, key };

  if (set->len == 0)
    return NULL;
  return node_set_find_by (set, set->hash (key), match_equal, &k);
}

void
node_set_add (NodeSet *set, FbViewNode *node)
{
  guint32 m;
  guint mask, i;

  if (set->bits == 0 || (set->len + 1) * 4 > (3u << set->bits))
    resize (set, set->bits == 0 ? SET_MIN_BITS : set->bits + 1);
  m = mix (set->hash (node));
  mask = (1u << set->bits) - 1;
  for (i = home (set, m); set->slots[i] != 0; i = (i + 1) & mask)
    if ((set->slots[i] & TAG_MASK) == tag (m) && set->equal (slot_node (set, set->slots[i]), node))
      {
        /* an equal key: NODE takes its place, as g_hash_table_add */
        set->slots[i] = slot_of (node, tag (m));
        return;
      }
  set->slots[i] = slot_of (node, tag (m));
  set->len++;
}

bool
node_set_remove (NodeSet *set, FbViewNode *node)
{
  guint32 m, want;
  guint mask, i, j;

  if (set->len == 0)
    return false;
  m = mix (set->hash (node));
  mask = (1u << set->bits) - 1;
  want = slot_of (node, tag (m));
  for (i = home (set, m); set->slots[i] != 0 && set->slots[i] != want; i = (i + 1) & mask)
    ;
  if (set->slots[i] == 0)
    return false;
  /* shift back each following entry that may sit at I: its home is not
   * cyclically in (I, J] */
  for (j = (i + 1) & mask; set->slots[j] != 0; j = (j + 1) & mask)
    {
      guint k = home (set, mix (set->hash (slot_node (set, set->slots[j]))));
      if (((j - k) & mask) >= ((j - i) & mask))
        {
          set->slots[i] = set->slots[j];
          i = j;
        }
    }
  set->slots[i] = 0;
  set->len--;
  if (set->bits > SET_MIN_BITS && (gsize)set->len * 8 < ((gsize)1 << set->bits))
    resize (set, set->bits - 1);
  return true;
}

FbViewNode *
node_set_next (const NodeSet *set, guint *pos)
{
  guint size = set->bits == 0 ? 0 : 1u << set->bits;

  while (*pos < size)
    {
      guint32 s = set->slots[(*pos)++];
      if (s != 0)
        return slot_node (set, s);
    }
  return NULL;
}
