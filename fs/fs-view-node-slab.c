/* fusebox — where a view's nodes live: blocks of a few sizes in pages of
 * their own.
 *
 * A node is one block (fs-private.h, FbViewNode: a directory's part, the
 * struct, the name), one per name the kernel remembers, so what surrounds
 * it counts as much as the node: malloc adds an 8-byte header and rounds
 * to 16, and the nodes of a walk, freed when the kernel forgets, leave
 * holes among everything else the workers allocated.  Here a page (a
 * slab) holds blocks of one size, a multiple of 8 (a size class), with no
 * header of their own; the slab's header says whose it is, so a node finds
 * its view from its address (node_slabs_of).
 *
 * Memory goes back to the system when the kernel forgets: a slab whose
 * last block is freed is released (madvise MADV_DONTNEED: the page is
 * zero-filled if used again) unless it is its class's only slab with room
 * (kept, so that a block made and freed at once, as a lookup that lost a
 * race does, costs no page fault); slabs come from regions of
 * REGION_SLABS pages mapped apart, and a region with no slab in use is
 * unmapped.  Pages never used are never touched: a region's slabs are
 * handed out in address order first, then from its list of released ones.
 *
 * A block also has a 32-bit handle (node_slabs_handle: its region's number
 * and its offset there), which the node sets keep instead of a pointer:
 * regions are numbered up to NODE_SLABS_REGIONS_MAX, 4 GiB of blocks, where
 * a view's nodes take at most FB_VIEW_NODES_MAX * NODE_BLOCK_MAX (188 MiB;
 * 2 GiB were each in a slab of its own).
 *
 * One lock per view (NodeSlabs.lock), taken by node_new and node_free on
 * any worker; it is the innermost lock: nothing else is taken under it.
 */
#include "fs/fs-private.h"

#include <string.h>
#include <sys/mman.h>

#define SLAB_SIZE 4096
#define REGION_SLABS 256
/* A handle: a region's number, then the block's offset in it in 8-byte
 * units (17 bits: a region is 1 MiB). */
#define REGION_SHIFT 17
G_STATIC_ASSERT ((gsize)REGION_SLABS *SLAB_SIZE == (gsize)8 << REGION_SHIFT);
G_STATIC_ASSERT (((guint64)NODE_SLABS_REGIONS_MAX << REGION_SHIFT) <= ((guint64)1 << NODE_HANDLE_BITS));

/* A page of blocks of one size. */
typedef struct Slab
{
  NodeSlabs *owner;
  struct Region *region;
  struct Slab *prev, *next; /* in owner->partial[class]: slabs with a free block */
  guint16 size;             /* of each block */
  guint16 used;             /* blocks handed out */
  guint16 bump;             /* offset of the first block never handed out */
  guint16 free;             /* offset of the last freed block (which holds the next's), 0: none */
} Slab;

G_STATIC_ASSERT (sizeof (Slab) % 8 == 0);
G_STATIC_ASSERT (sizeof (Slab) + NODE_BLOCK_MAX <= SLAB_SIZE);

typedef struct Region
{
  char *base;   /* REGION_SLABS slabs, mapped */
  guint number; /* in owner->bases */
  guint bump;   /* slabs from bump on were never used */
  guint used;   /* slabs holding blocks (or kept for their class) */
  guint n_free; /* released slabs, in free */
  guint16 free[REGION_SLABS];
} Region;

static inline Slab *
slab_of (const void *p)
{
  return (Slab *)((guintptr)p & ~(guintptr)(SLAB_SIZE - 1));
}

NodeSlabs *
node_slabs_of (const void *block)
{
  return slab_of (block)->owner;
}

guint32
node_slabs_handle (const void *p)
{
  const Region *r = slab_of (p)->region;
  gsize offset = (gsize)((const char *)p - r->base);

  g_assert (offset % 8 == 0);
  return (guint32)(r->number << REGION_SHIFT | offset / 8);
}

void *
node_slabs_at (NodeSlabs *s, guint32 handle)
{
  return s->bases[handle >> REGION_SHIFT] + (gsize)(handle & ((1u << REGION_SHIFT) - 1)) * 8;
}

void
node_slabs_init (NodeSlabs *s)
{
  memset (s, 0, sizeof *s);
  g_mutex_init (&s->lock);
  s->bases = g_new0 (char *, NODE_SLABS_REGIONS_MAX);
  s->regions = g_ptr_array_new ();
  /* only pages the size of a slab can be released one at a time */
  s->release_pages = sysconf (_SC_PAGESIZE) == SLAB_SIZE;
}

void
node_slabs_clear (NodeSlabs *s)
{
  for (guint i = 0; i < s->regions->len; i++)
    {
      Region *r = s->regions->pdata[i];
      munmap (r->base, (gsize)REGION_SLABS * SLAB_SIZE);
      g_free (r);
    }
  g_ptr_array_unref (s->regions);
  g_free (s->bases);
  g_mutex_clear (&s->lock);
}

static void
partial_link (NodeSlabs *s, Slab *slab)
{
  Slab **head = &s->partial[slab->size / 8];

  slab->prev = NULL;
  slab->next = *head;
  if (*head != NULL)
    (*head)->prev = slab;
  *head = slab;
}

static void
partial_unlink (NodeSlabs *s, Slab *slab)
{
  if (slab->prev != NULL)
    slab->prev->next = slab->next;
  else
    s->partial[slab->size / 8] = slab->next;
  if (slab->next != NULL)
    slab->next->prev = slab->prev;
  slab->prev = slab->next = NULL;
}

/* A slab not in use, from a region with one, or from a new region. */
static Slab *
slab_new (NodeSlabs *s, guint16 size)
{
  Region *r = NULL;
  Slab *slab;
  guint index;

  for (guint i = 0; i < s->regions->len && r == NULL; i++)
    {
      Region *c = s->regions->pdata[i];
      if (c->n_free > 0 || c->bump < REGION_SLABS)
        r = c;
    }
  if (r == NULL)
    {
      guint number = 0;
      void *base = MAP_FAILED;

      while (number < NODE_SLABS_REGIONS_MAX && s->bases[number] != NULL)
        number++;
      if (number < NODE_SLABS_REGIONS_MAX)
        base = mmap (NULL, (gsize)REGION_SLABS * SLAB_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (base == MAP_FAILED)
        g_error ("%s: failed to allocate %d bytes", G_STRLOC, REGION_SLABS * SLAB_SIZE); /* as g_malloc */
      r = g_new0 (Region, 1);
      r->base = base;
      r->number = number;
      /* read without the lock by node_slabs_at(), for blocks of this
       * region once they exist, which orders it before */
      s->bases[number] = base;
      g_ptr_array_add (s->regions, r);
    }
  index = r->n_free > 0 ? r->free[--r->n_free] : r->bump++;
  r->used++;
  slab = (Slab *)(void *)(r->base + (gsize)index * SLAB_SIZE);
  slab->owner = s;
  slab->region = r;
  slab->prev = slab->next = NULL;
  slab->size = size;
  slab->used = 0;
  slab->bump = sizeof (Slab);
  slab->free = 0;
  return slab;
}

/* SLAB has no block in use: its page goes back to the system, and its
 * region too when no other slab of it is used. */
static void
slab_release (NodeSlabs *s, Slab *slab)
{
  Region *r = slab->region;
  guint index = (guint)(((char *)slab - r->base) / SLAB_SIZE);

  r->used--;
  if (r->used == 0)
    {
      s->bases[r->number] = NULL;
      munmap (r->base, (gsize)REGION_SLABS * SLAB_SIZE);
      g_ptr_array_remove_fast (s->regions, r);
      g_free (r);
      return;
    }
  if (s->release_pages)
    madvise (slab, SLAB_SIZE, MADV_DONTNEED);
  r->free[r->n_free++] = (guint16)index;
}

void *
node_slabs_alloc (NodeSlabs *s, gsize size)
{
  guint16 bsize = (guint16)((size + 7) & ~(gsize)7);
  Slab *slab;
  char *block;

  g_assert (size > 0 && size <= NODE_BLOCK_MAX);
  g_mutex_lock (&s->lock);
  slab = s->partial[bsize / 8];
  if (slab == NULL)
    {
      slab = slab_new (s, bsize);
      partial_link (s, slab);
    }
  if (slab->free != 0)
    {
      block = (char *)slab + slab->free;
      memcpy (&slab->free, block, sizeof slab->free);
    }
  else
    {
      block = (char *)slab + slab->bump;
      slab->bump += bsize;
    }
  slab->used++;
  if (slab->free == 0 && slab->bump + bsize > SLAB_SIZE)
    partial_unlink (s, slab); /* full */
  s->bytes += bsize;
  g_mutex_unlock (&s->lock);
  return memset (block, 0, bsize);
}

void
node_slabs_free (void *block)
{
  Slab *slab = slab_of (block);
  NodeSlabs *s = slab->owner;
  guint16 offset = (guint16)((char *)block - (char *)slab);
  bool was_full;

  g_mutex_lock (&s->lock);
  was_full = slab->free == 0 && slab->bump + slab->size > SLAB_SIZE;
  memcpy (block, &slab->free, sizeof slab->free);
  slab->free = offset;
  slab->used--;
  s->bytes -= slab->size;
  if (was_full)
    partial_link (s, slab);
  if (slab->used == 0 && (slab->prev != NULL || slab->next != NULL))
    {
      /* not its class's only slab with room: released */
      partial_unlink (s, slab);
      slab_release (s, slab);
    }
  g_mutex_unlock (&s->lock);
}

gsize
node_slabs_bytes (NodeSlabs *s)
{
  gsize n;

  g_mutex_lock (&s->lock);
  n = s->bytes;
  g_mutex_unlock (&s->lock);
  return n;
}
