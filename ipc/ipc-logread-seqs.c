/* fusebox — the seqs of a run a log reader returned (ipc/ipc-private.h). */
#include "ipc/ipc-private.h"

/* Ranges [lo, hi] of the seqs returned for one run, apart, in a balanced
 * tree by lo: one while the records come in order, one more for each hole.
 * Records may come out of order (rotated files are read in the order
 * written, and two runs writing one log interleave), so a record is a
 * repeat only when its seq was returned, never merely for being below the
 * highest.  A log's owner controls its seqs (root may read another user's
 * log): every step is logarithmic in the ranges, whatever their order. */
typedef struct
{
  guint64 lo, hi;
} SeqRange;

struct FbSeqSet
{
  GTree *ranges;  /* SeqRange* -> itself, by lo */
  SeqRange *last; /* the highest */
};

static gint
seq_range_cmp (gconstpointer a, gconstpointer b, gpointer unused)
{
  guint64 x = ((const SeqRange *)a)->lo, y = ((const SeqRange *)b)->lo;

  return x < y ? -1 : x > y;
}

FbSeqSet *
fb_seq_set_new (void)
{
  FbSeqSet *set = g_new0 (FbSeqSet, 1);

  set->ranges = g_tree_new_full (seq_range_cmp, NULL, g_free, NULL);
  return set;
}

void
fb_seq_set_free (FbSeqSet *set)
{
  g_tree_destroy (set->ranges);
  g_free (set);
}

/* The range that starts at or below SEQ (the highest such), or NULL. */
static GTreeNode *
seq_set_floor (FbSeqSet *set, guint64 seq)
{
  SeqRange key = { seq, seq };
  GTreeNode *above = g_tree_upper_bound (set->ranges, &key);

  return above != NULL ? g_tree_node_previous (above) : g_tree_node_last (set->ranges);
}

bool
fb_seq_set_has (FbSeqSet *set, guint64 seq)
{
  GTreeNode *n;

  if (set->last != NULL && seq >= set->last->lo)
    return seq <= set->last->hi;
  n = seq_set_floor (set, seq);
  return n != NULL && seq <= ((SeqRange *)g_tree_node_key (n))->hi;
}

bool
fb_seq_set_max (FbSeqSet *set, guint64 *ret_max)
{
  if (set->last == NULL)
    return false;
  *ret_max = set->last->hi;
  return true;
}

void
fb_seq_set_add (FbSeqSet *set, guint64 seq)
{
  GTreeNode *n;
  SeqRange *prev, *next, *r;

  if (set->last != NULL && seq == set->last->hi + 1)
    {
      set->last->hi = seq; /* in order: the usual case */
      return;
    }
  n = seq_set_floor (set, seq);
  prev = n != NULL ? g_tree_node_key (n) : NULL;
  n = n != NULL ? g_tree_node_next (n) : g_tree_node_first (set->ranges);
  next = n != NULL ? g_tree_node_key (n) : NULL;
  if (prev != NULL && prev->hi + 1 == seq)
    {
      prev->hi = seq;
      if (next != NULL && next->lo == seq + 1)
        {
          prev->hi = next->hi;
          if (set->last == next)
            set->last = prev;
          g_tree_remove (set->ranges, next);
        }
      return;
    }
  if (next != NULL && next->lo == seq + 1)
    {
      /* its key goes down, past no other range's */
      next->lo = seq;
      return;
    }
  r = g_new (SeqRange, 1);
  r->lo = r->hi = seq;
  g_tree_insert (set->ranges, r, r);
  if (set->last == NULL || seq > set->last->hi)
    set->last = r;
}

bool
fb_seq_set_hole_above (FbSeqSet *set, guint64 above, guint64 *ret_lo, guint64 *ret_hi)
{
  GTreeNode *n = seq_set_floor (set, above);

  for (n = n != NULL ? n : g_tree_node_first (set->ranges); n != NULL; n = g_tree_node_next (n))
    {
      GTreeNode *m = g_tree_node_next (n);
      const SeqRange *a = g_tree_node_key (n);

      if (m == NULL)
        return false;
      /* (ranges apart: adding merges those that touch) */
      if (a->hi + 1 > above)
        {
          *ret_lo = a->hi + 1;
          *ret_hi = ((const SeqRange *)g_tree_node_key (m))->lo - 1;
          return true;
        }
    }
  return false;
}
