/* fusebox — the view's directory listings.
 *
 * A listing shows the host's entries minus the hidden names (decided one by
 * one with fb_policy_decide_child), plus what the policy adds.  Two shapes:
 *  - Streamed: an ordinary host directory is read with getdents64, through
 *    a fixed buffer whatever its size, and offered with offsets of the
 *    view's own: an entry's is how many entries the view showed up to it.
 *    The host's offsets (ext4's name hashes, tmpfs's creation counters)
 *    never reach the sandbox: they skip over hidden names, so comparing
 *    them with a directory rebuilt from the visible names would tell that
 *    a hidden name is there, and which.  The host's position is kept
 *    beside the view's: in an open directory's handle, and for the FUSE
 *    adapter's calls without one in the view's table of positions (below;
 *    a call that continues from one of them goes on where it stopped,
 *    even if the directory changed meanwhile, as the host's own offsets
 *    would).  Any other offset is reached by reading again from
 *    the start, deciding each name as a listing does, and skipping that
 *    many shown entries (telldir, seekdir and rewinddir stay exact while
 *    the directory does not change).
 *  - Assembled: a directory whose listing is not the host's (synthetic,
 *    /proc-like blank, traversable, or holding mount points) is built as a
 *    list: "." and "..", then the reachable children that exist, or the
 *    host's visible entries with the mount points in place of whatever the
 *    host has under those names.  Offsets are indices.  At most
 *    FB_VIEW_DIR_SNAPSHOT_MAX entries; the list is kept in the node while the
 *    host directory's mtime and ctime are unchanged, and a listing goes on
 *    in the list it started with even when they changed (a list made anew
 *    would shift its indices; and a directory kept changing while it is
 *    listed would be made anew at every call).
 * Listings are served two ways: through an open directory (fb_view_opendir,
 * fb_view_readdir: a handle with its own position, for the remote API) or
 * statelessly from a node and an offset (fb_view_readdir_at: the FUSE
 * adapter, which lets the kernel skip OPENDIR and keep listings cached).
 * The policy is asked at every start: the directory must be listable.
 *
 * Attributes.  A listing with attributes (the kernel's READDIRPLUS, asked
 * for every directory's first batch) makes a node of each entry it gives
 * them for, as a lookup would.  Directories always get them: a walk enters
 * them next, and the listing's d_type lets the view open one at once
 * instead of stat'ing it first.  Non-directories get them only while the
 * callers have been seen to stat what they list (a name left bare, then
 * looked up: `ls -l`, `find -ls`, `du`), for the next PLUS_FILES_RUN
 * listings, then the view tries without again.  A `find` or `git status`
 * never stats the names it lists (git stats its index's names before it
 * lists anything): a node and a system call per file saved, and the
 * memory of a node the kernel would keep for each.  Either way the
 * entries are the same, decided as any listing's; attributes are only
 * given through a full lookup of the name (lookup_child_typed).
 */
#include "fs/fs-private.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#define DIR_BUF_SIZE (32 * 1024)

static void
dir_entry_clear (gpointer p)
{
  DirEntry *e = p;

  g_free (e->name);
}

static void
listing_add (GArray *entries, const char *name, ino_t ino, unsigned char type)
{
  DirEntry e;

  if (entries->len >= FB_VIEW_DIR_SNAPSHOT_MAX)
    {
      static gsize warned;
      if (g_once_init_enter (&warned))
        {
          g_warning ("a directory listing was cut at %d entries", FB_VIEW_DIR_SNAPSHOT_MAX);
          g_once_init_leave (&warned, 1);
        }
      return;
    }
  e.name = g_strdup (name);
  e.ino = ino;
  e.type = type;
  g_array_append_val (entries, e);
}

static ino_t
synthetic_ino (const char *path)
{
  return (ino_t)(0xfb00000000000000ULL | g_str_hash (path));
}

static bool
is_assembled (FbViewNode *node, const NodeState *st)
{
  return node->kind != NODE_HOST || st->decision.traversable ||
         (st->decision.mounted_children != NULL && st->decision.mounted_children[0] != NULL);
}

/* Build the list of an assembled directory; FD is the host directory open
 * for reading (or -1 when there is none). */
static GArray *
listing_build (FbView *view, FbViewNode *node, const NodeState *st, int fd, int *ret_err)
{
  const FbPolicyDecision *d = &st->decision;
  GArray *entries = g_array_new (FALSE, FALSE, sizeof (DirEntry));

  *ret_err = 0;
  g_array_set_clear_func (entries, dir_entry_clear);
  listing_add (entries, ".", node->ino, DT_DIR);
  listing_add (entries, "..", 1, DT_DIR);
  if (node->kind == NODE_BLANK)
    return entries;
  if (d->traversable || node->kind != NODE_HOST)
    {
      _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
      int dfd = node->kind == NODE_HOST ? node_fd_get (node, &hold) : -1;
      for (guint i = 0; d->traversable && d->reachable_children != NULL && d->reachable_children[i] != NULL; i++)
        {
          const char *name = d->reachable_children[i];
          g_autofree char *path = join_path (st->path, name);
          struct stat cst;
          if (name_in (d->mounted_children, name))
            listing_add (entries, name, synthetic_ino (path), DT_DIR);
          else if (dfd >= 0 && host_statat (node, dfd, name, &cst) >= 0 && !view_state_hides (view, &cst) &&
                   (view_dir_fold (node) == FB_VIEW_FOLD_NO || view_dir_lists (node, dfd, name) == 1))
            /* (where the host folds names, only if it is spelt so on disk,
             * as a lookup wants it: fs-view-fold.c) */
            listing_add (entries, name, cst.st_ino, IFTODT (cst.st_mode));
        }
      for (guint i = 0; d->mounted_children != NULL && d->mounted_children[i] != NULL; i++)
        {
          const char *name = d->mounted_children[i];
          g_autofree char *path = join_path (st->path, name);
          if (!d->traversable || !name_in (d->reachable_children, name))
            listing_add (entries, name, synthetic_ino (path), DT_DIR);
        }
      return entries;
    }

  {
    g_autofree char *buf = g_malloc (DIR_BUF_SIZE);
    for (;;)
      {
        long n = syscall (SYS_getdents64, fd, buf, DIR_BUF_SIZE);
        if (n < 0)
          {
            *ret_err = -errno;
            g_array_unref (entries);
            return NULL;
          }
        if (n == 0)
          break;
        for (long pos = 0; pos < n;)
          {
            struct linux_dirent64 *de = (struct linux_dirent64 *)(buf + pos);
            FbPolicyDecision cd;
            pos += de->d_reclen;
            if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0 ||
                name_in (d->mounted_children, de->d_name))
              continue;
            view_decide_child (view, view_dir_fold (node), st, de->d_name, &cd);
            view_state_decide (view, node, st, de->d_name, &cd);
            if (decision_is_hidden (&cd))
              continue;
            listing_add (entries, de->d_name, de->d_ino, de->d_type);
          }
      }
  }
  for (guint i = 0; d->mounted_children != NULL && d->mounted_children[i] != NULL; i++)
    {
      g_autofree char *path = join_path (st->path, d->mounted_children[i]);
      listing_add (entries, d->mounted_children[i], synthetic_ino (path), DT_DIR);
    }
  return entries;
}

/* The node's assembled listing (a reference), rebuilt when the host
 * directory changed (mtime or ctime) since it was made. */
static GArray *
listing_get (FbView *view, FbViewNode *node, const NodeState *st, int fd, bool continuing, int *ret_err)
{
  struct stat hst = { 0 };
  GArray *list = NULL;

  *ret_err = 0;
  if (fd >= 0 && fstat (fd, &hst) < 0)
    {
      *ret_err = -errno;
      return NULL;
    }
  NodeExtra *x = node_extra (node);
  NodeExtraDir *xd;

  /* A listing goes on from the list it started with, changed or not (its
   * offsets are that list's indices; one built anew would repeat or skip
   * names): one build a listing, not one a call, however often the
   * directory changes meanwhile. */
  g_mutex_lock (&x->lock);
  xd = x->dir;
  if (xd != NULL && xd->listing != NULL &&
      (continuing ||
       (xd->listing_mtime.tv_sec == hst.st_mtim.tv_sec && xd->listing_mtime.tv_nsec == hst.st_mtim.tv_nsec &&
        xd->listing_ctime.tv_sec == hst.st_ctim.tv_sec && xd->listing_ctime.tv_nsec == hst.st_ctim.tv_nsec)))
    list = g_array_ref (xd->listing);
  g_mutex_unlock (&x->lock);
  if (list != NULL)
    return list;

  list = listing_build (view, node, st, fd, ret_err);
  if (list == NULL)
    return NULL;
  g_mutex_lock (&x->lock);
  xd = node_extra_dir (x);
  if (xd->listing != NULL)
    g_array_unref (xd->listing);
  xd->listing = g_array_ref (list);
  xd->listing_mtime = hst.st_mtim;
  xd->listing_ctime = hst.st_ctim;
  g_mutex_unlock (&x->lock);
  return list;
}

/* What a listing gives attributes for ("Attributes" above). */
typedef enum
{
  PLUS_NONE, /* nothing: names and types */
  PLUS_DIRS, /* directories, and entries of unknown type */
  PLUS_ALL,  /* every entry */
} Plus;

/* Listings given every entry's attributes after a caller stat'ed a name
 * left bare */
#define PLUS_FILES_RUN 64

static Plus
plus_for_listing (FbView *view, bool plus)
{
  int left;

  if (!plus)
    return PLUS_NONE;
  left = g_atomic_int_get (&view->plus_files);
  while (left > 0 && !g_atomic_int_compare_and_exchange (&view->plus_files, left, left - 1))
    left = g_atomic_int_get (&view->plus_files);
  return left > 0 ? PLUS_ALL : PLUS_DIRS;
}

void
view_dir_child_stated (FbView *view, FbViewNode *dir)
{
  /* once per bare listing: the next ones may show the callers changed */
  if ((node_dir_state (dir) & DIR_LISTED_BARE) && (node_dir_clear (dir, DIR_LISTED_BARE) & DIR_LISTED_BARE))
    g_atomic_int_set (&view->plus_files, PLUS_FILES_RUN);
}

/* Offer one entry; false when the consumer is full.  *RET_SKIP: the entry
 * vanished (or is not ours to show) and was not offered. */
static bool
offer (FbView *view, FbViewNode *dir, NodeState *dst, const char *name, ino_t ino, unsigned char type, off_t next,
       Plus plus, FbViewDirFunc func, gpointer user_data, bool *ret_skip)
{
  FbViewDirEntry e = { 0 };
  g_autoptr (FbViewNode) child = NULL;
  struct stat st;

  *ret_skip = false;
  e.name = name;
  e.ino = ino;
  e.type = type;
  e.next_offset = next;
  if (plus != PLUS_NONE)
    {
      if (strcmp (name, ".") == 0 || strcmp (name, "..") == 0 ||
          (plus == PLUS_DIRS && type != DT_DIR && type != DT_UNKNOWN))
        {
          if (plus == PLUS_DIRS && !(node_dir_state (dir) & DIR_LISTED_BARE))
            node_dir_set (dir, DIR_LISTED_BARE);
          memset (&st, 0, sizeof st);
          st.st_ino = ino;
          st.st_mode = DTTOIF (type);
        }
      else
        {
          g_auto (ChildInfo) ci = { 0 };
          if (decide_child_checked (view, dir, dst, name, &ci) < 0 || decision_is_hidden (&ci.decision) ||
              lookup_child_typed (view, dir, dst, name, type, &ci, &child, &st) < 0)
            {
              *ret_skip = true;
              return true;
            }
          e.ino = st.st_ino;
          e.type = IFTODT (st.st_mode);
        }
      e.node = child;
      e.st = &st;
    }
  return func (&e, user_data);
}

static void
offer_listing (FbView *view, FbViewNode *node, NodeState *dst, GArray *list, off_t offset, Plus plus,
               FbViewDirFunc func, gpointer user_data)
{
  for (guint i = (guint)MIN ((guint64)offset, (guint64)list->len); i < list->len; i++)
    {
      const DirEntry *e = &g_array_index (list, DirEntry, i);
      bool skip;
      if (!offer (view, node, dst, e->name, e->ino, e->type, (off_t)i + 1, plus, func, user_data, &skip))
        break;
    }
}

/* --- streamed listings ---------------------------------------------------------- */

/* The next entry of S (read from FD) that the view shows, in *RET (NULL at
 * the end), not consumed; hidden ones before it are consumed. */
static int
stream_peek (FbView *view, FbViewNode *node, NodeState *dst, int fd, DirStream *s, struct linux_dirent64 **ret)
{
  for (;;)
    {
      struct linux_dirent64 *de;

      if (s->pos >= s->len)
        {
          long n;
          *ret = NULL;
          if (s->eof)
            return 0;
          n = syscall (SYS_getdents64, fd, s->buf, DIR_BUF_SIZE);
          if (n < 0)
            return -errno;
          if (n == 0)
            {
              s->eof = true;
              return 0;
            }
          s->len = (gsize)n;
          s->pos = 0;
        }
      de = (struct linux_dirent64 *)(s->buf + s->pos);
      if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0)
        {
          FbPolicyDecision cd;
          /* a directory that may fold names is probed with its first
           * entry that can tell (fs-view-fold.c), before entries are decided
           * and, with PLUS, made nodes */
          view_fold_settle (node, de->d_name);
          view_decide_child (view, view_dir_fold (node), dst, de->d_name, &cd);
          view_state_decide (view, node, dst, de->d_name, &cd);
          if (decision_is_hidden (&cd))
            {
              /* read past, uncounted: the view's offsets don't know it */
              s->pos += de->d_reclen;
              s->host = de->d_off;
              continue;
            }
        }
      *ret = de;
      return 0;
    }
}

/* Consume DE, the entry stream_peek gave: one more the view showed. */
static void
stream_consume (DirStream *s, const struct linux_dirent64 *de)
{
  s->pos += de->d_reclen;
  s->host = de->d_off;
  s->index++;
}

/* Start S over from the host position HOST, the view's INDEX. */
static int
stream_restart (int fd, DirStream *s, off_t index, off_t host)
{
  if (lseek (fd, host, SEEK_SET) < 0)
    return -errno;
  s->len = s->pos = 0;
  s->eof = false;
  s->index = index;
  s->host = host;
  return 0;
}

/* Bring S to the view's OFFSET: on from where it is, or again from the
 * start when OFFSET is behind it, skipping what the view shows as a
 * listing would (an offset past the end leaves it at the end). */
static int
stream_seek (FbView *view, FbViewNode *node, NodeState *dst, int fd, DirStream *s, off_t offset)
{
  int r;

  if (offset < s->index)
    {
      r = stream_restart (fd, s, 0, 0);
      if (r < 0)
        return r;
    }
  while (s->index < offset)
    {
      struct linux_dirent64 *de;
      r = stream_peek (view, node, dst, fd, s, &de);
      if (r < 0 || de == NULL)
        return r;
      stream_consume (s, de);
    }
  return 0;
}

/* The buffer of a listing served from a node (fb_view_readdir_at), kept
 * by each thread that served one (at most one per FUSE worker): a walk
 * lists every directory, each a malloc and a free of DIR_BUF_SIZE
 * otherwise.  Nothing that runs during a listing lists another. */
static GPrivate stream_buf_key = G_PRIVATE_INIT (g_free);

static char *
stream_buf (void)
{
  char *buf = g_private_get (&stream_buf_key);

  if (buf == NULL)
    {
      buf = g_malloc (DIR_BUF_SIZE);
      g_private_set (&stream_buf_key, buf);
    }
  return buf;
}

/* Offer the entries of S from where it stands until FUNC is full (the
 * entry stays for next time) or the end. */
static int
offer_stream (FbView *view, FbViewNode *node, NodeState *dst, int fd, DirStream *s, Plus plus, FbViewDirFunc func,
              gpointer user_data)
{
  for (;;)
    {
      struct linux_dirent64 *de;
      bool skip;
      int r = stream_peek (view, node, dst, fd, s, &de);

      if (r < 0 || de == NULL)
        return r;
      /* (an entry gone by the time PLUS looks it up keeps its offset, as
       * in the count of stream_seek) */
      if (!offer (view, node, dst, de->d_name, de->d_ino, de->d_type, s->index + 1, plus, func, user_data, &skip))
        return 0;
      stream_consume (s, de);
    }
}

/* --- the host positions of listings without a handle -------------------------
 *
 * The FUSE adapter's listings come as a node and an offset, the next call
 * of a listing from wherever the kernel is (fb_view_readdir_at).  Where
 * each stopped is kept in the view's table (DirCursor), not in the node:
 * a walk lists thousands of directories, each read to its end in a call
 * or two and never again while the kernel keeps the listing, and a
 * position per directory for its life would be most of what a walk
 * leaves behind.  A node's positions are in the set its address picks,
 * the least recently kept of the set giving way; the end of a listing,
 * once the kernel has asked past it and found nothing changed, is let go
 * at once.  A position that is gone is found again from the start (the
 * same entries while the directory does not change).  Every position of
 * a node goes with the node (view_dir_forget), before its block can be
 * another's. */

static DirCursor *
cursor_set (FbView *view, FbViewNode *node)
{
  guint64 h = ((guint64)(guintptr)node >> 3) * G_GUINT64_CONSTANT (0x9e3779b97f4a7c15);

  return &view->cursors[(h >> 32) % DIR_CURSOR_SETS * DIR_CURSOR_WAYS];
}

/* The slot of NODE's position at INDEX in its set, or NULL; cursor_lock. */
static DirCursor *
cursor_slot_locked (FbView *view, FbViewNode *node, off_t index)
{
  DirCursor *set;

  if (view->cursors == NULL)
    return NULL;
  set = cursor_set (view, node);
  for (guint i = 0; i < DIR_CURSOR_WAYS; i++)
    if (set[i].node == node && set[i].index == index)
      return &set[i];
  return NULL;
}

/* The host position kept for the view's offset INDEX of NODE's listing. */
static bool
cursor_find (FbViewNode *node, off_t index, off_t *ret_host)
{
  FbView *view = node_view (node);
  DirCursor *c;

  g_mutex_lock (&view->cursor_lock);
  c = cursor_slot_locked (view, node, index);
  if (c != NULL)
    *ret_host = c->host;
  g_mutex_unlock (&view->cursor_lock);
  return c != NULL;
}

/* Keep where S stands, in place of the same offset's, a free slot or the
 * least recently kept; END_CTIME: S read to the end, and the directory's
 * ctime before it read (NULL when unknown). */
static void
cursor_keep (FbViewNode *node, const DirStream *s, const struct timespec *end_ctime)
{
  FbView *view = node_view (node);
  DirCursor *c, *set;

  if (s->index == 0)
    return; /* the start needs none */
  g_mutex_lock (&view->cursor_lock);
  if (view->cursors == NULL)
    view->cursors = g_new0 (DirCursor, DIR_CURSOR_SETS * DIR_CURSOR_WAYS);
  c = cursor_slot_locked (view, node, s->index);
  set = cursor_set (view, node);
  for (guint i = 0; i < DIR_CURSOR_WAYS && c == NULL; i++)
    if (set[i].node == NULL)
      c = &set[i];
  if (c == NULL)
    {
      c = &set[0];
      for (guint i = 1; i < DIR_CURSOR_WAYS; i++)
        if ((gint32)(set[i].used - c->used) < 0)
          c = &set[i];
    }
  c->node = node;
  c->index = s->index;
  c->host = s->host;
  c->used = ++view->cursor_clock;
  c->at_end = s->eof && end_ctime != NULL;
  if (c->at_end)
    c->end_ctime = *end_ctime;
  g_mutex_unlock (&view->cursor_lock);
}

/* Is OFFSET where NODE's listing ended, with nothing changed in the
 * directory since?  The kernel asks once more past every listing's last
 * entry (its end is an empty answer): answered without opening the
 * directory, and the position let go (the kernel has the whole listing).
 * Every change of an entry moves the directory's ctime, which was read
 * before the listing was (a change in the same clock tick as that read, on
 * a kernel without fine-grained timestamps, is one the listing may show or
 * not, as any made while a directory is read). */
static bool
cursor_at_end (FbViewNode *node, off_t offset)
{
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  FbView *view = node_view (node);
  struct timespec end = { 0 };
  bool at_end = false;
  struct stat st;
  DirCursor *c;
  int fd;

  if (offset == 0)
    return false;
  g_mutex_lock (&view->cursor_lock);
  c = cursor_slot_locked (view, node, offset);
  if (c != NULL && c->at_end)
    {
      at_end = true;
      end = c->end_ctime;
    }
  g_mutex_unlock (&view->cursor_lock);
  if (!at_end)
    return false;
  fd = node_fd_get (node, &hold);
  if (fd < 0 || fstat (fd, &st) != 0 || st.st_ctim.tv_sec != end.tv_sec || st.st_ctim.tv_nsec != end.tv_nsec)
    return false;
  g_mutex_lock (&view->cursor_lock);
  c = cursor_slot_locked (view, node, offset);
  if (c != NULL && c->at_end)
    c->node = NULL;
  g_mutex_unlock (&view->cursor_lock);
  return true;
}

void
view_dir_forget (FbView *view, FbViewNode *node)
{
  DirCursor *set;

  g_mutex_lock (&view->cursor_lock);
  if (view->cursors != NULL)
    {
      set = cursor_set (view, node);
      for (guint i = 0; i < DIR_CURSOR_WAYS; i++)
        if (set[i].node == node)
          set[i].node = NULL;
    }
  g_mutex_unlock (&view->cursor_lock);
}

void
view_dir_clear (FbView *view)
{
  g_free (view->cursors);
  view->cursors = NULL;
  g_mutex_clear (&view->cursor_lock);
}

/* NODE's host directory open for reading: "." of its own descriptor, the
 * directory itself.  Where the daemon may read the directory but not
 * search it (an unprivileged daemon, mode r--), through /proc/self/fd,
 * which asks for no search. */
static int
dir_open (FbViewNode *node)
{
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK;
  int fd = node_fd_get (node, &hold);

  if (fd >= 0)
    {
      fd = openat (fd, ".", flags);
      if (fd >= 0 || errno != EACCES)
        return fd >= 0 ? fd : -errno;
    }
  return node_reopen (node, flags);
}

/* The policy's answer for listing NODE (logged), and its host directory
 * open for reading (or -1 for synthetic ones). */
static int
start_listing (FbView *view, const FbViewCaller *caller, FbViewNode *node, NodeState *st, int *ret_fd)
{
  FbDecision d;
  int r, fd = -1;

  *ret_fd = -1;
  if (!S_ISDIR (node->type))
    return -ENOTDIR;
  r = check_access (st, NEED_LIST, &d);
  if (r < 0)
    {
      view_emit (view, caller, FB_OP_READDIR, st->path, NULL, FB_ACCESS_LIST, d, -r, st->decision.rule);
      return r;
    }
  if (node->kind == NODE_HOST)
    {
      fd = dir_open (node);
      if (fd < 0)
        {
          view_emit (view, caller, FB_OP_READDIR, st->path, NULL, FB_ACCESS_LIST, FB_DECISION_ALLOW, -fd,
                     st->decision.rule);
          return fd;
        }
      /* whether the host folds names here, asked through this descriptor
       * before the first name is decided */
      view_dir_fold_listing (node, fd);
    }
  view_emit (view, caller, FB_OP_READDIR, st->path, NULL, FB_ACCESS_LIST, FB_DECISION_ALLOW, 0, st->decision.rule);
  *ret_fd = fd;
  return 0;
}

/* --- through an open directory -------------------------------------------- */

int
fb_view_opendir (FbView *view, const FbViewCaller *caller, FbViewNode *node, FbViewFile **ret_dir, bool *ret_keep_cache)
{
  g_autoptr (NodeState) st = node_get_state (node);
  FbViewFdAccount *account = NULL;
  FbViewFile *dir;
  int r, fd;

  if (ret_keep_cache != NULL)
    *ret_keep_cache = false;
  /* an open directory is held like an open file (fs-view-fd.c) */
  r = node->kind == NODE_HOST ? view_file_claim (view, caller, FB_OP_READDIR, st->path, FB_ACCESS_LIST, &account) : 0;
  if (r == 0)
    {
      r = start_listing (view, caller, node, st, &fd);
      if (r < 0 && account != NULL)
        view_file_unclaim (view, account);
    }
  if (r < 0)
    return r;
  dir = view_file_new (node, st, fd, account, O_RDONLY | O_DIRECTORY, FB_ACCESS_LIST, caller);
  dir->is_dir = true;
  dir->can_write = false;
  if (is_assembled (node, st))
    {
      dir->snapshot = listing_get (view, node, st, fd, false, &r);
      if (dir->snapshot == NULL)
        {
          view_file_free (dir);
          return r;
        }
    }
  else
    {
      struct stat hst;
      dir->stream.buf = g_malloc (DIR_BUF_SIZE);
      /* The kernel may keep its cached listing while the directory's mtime
       * is the one of the previous opendir. */
      if (ret_keep_cache != NULL)
        *ret_keep_cache = fstat (fd, &hst) == 0 && node_stamp_compare (node, &hst);
    }
  *ret_dir = dir;
  return 0;
}

int
fb_view_readdir (FbView *view, FbViewFile *dir, off_t offset, bool plus, FbViewDirFunc func, gpointer user_data)
{
  /* The directory's current path: it may have been renamed since opendir,
   * and its entries are decided (and looked up) under the new one. */
  g_autoptr (NodeState) dst = node_get_state (dir->node);
  int r = 0;

  if (!dir->is_dir)
    return -ENOTDIR;
  if (offset < 0)
    return -EINVAL;
  g_mutex_lock (&dir->dir_lock);
  if (dir->snapshot != NULL)
    offer_listing (view, dir->node, dst, dir->snapshot, offset, plus_for_listing (view, plus), func, user_data);
  else
    {
      /* the handle keeps its own position; another offset is found again
       * from the start */
      r = stream_seek (view, dir->node, dst, dir->fd, &dir->stream, offset);
      if (r == 0)
        r = offer_stream (view, dir->node, dst, dir->fd, &dir->stream, plus_for_listing (view, plus), func, user_data);
    }
  g_mutex_unlock (&dir->dir_lock);
  return r;
}

void
fb_view_releasedir (FbView *view, FbViewFile *dir)
{
  if (dir != NULL)
    view_file_free (dir);
}

/* --- from a node and an offset ---------------------------------------------- */

int
fb_view_readdir_at (FbView *view, const FbViewCaller *caller, FbViewNode *node, off_t offset, bool plus,
                    FbViewDirFunc func, gpointer user_data)
{
  g_autoptr (NodeState) st = node_get_state (node);
  _fb_cleanup_fd_ int fd = -1;
  int r;

  if (offset < 0)
    return -EINVAL;
  /* Every call decides anew (the kernel asks again only when its cached
   * listing is gone); a start is logged, continuations are not. */
  if (offset == 0)
    r = start_listing (view, caller, node, st, &fd);
  else
    {
      FbDecision d;
      r = !S_ISDIR (node->type) ? -ENOTDIR : check_access (st, NEED_LIST, &d);
      if (r == 0 && node->kind == NODE_HOST && !is_assembled (node, st) && cursor_at_end (node, offset))
        return 0;
      if (r == 0 && node->kind == NODE_HOST)
        {
          fd = dir_open (node);
          if (fd < 0)
            r = fd;
        }
    }
  if (r < 0)
    return r;
  if (is_assembled (node, st))
    {
      g_autoptr (GArray) list = listing_get (view, node, st, fd, offset > 0, &r);
      if (list == NULL)
        return r;
      offer_listing (view, node, st, list, offset, plus_for_listing (view, plus), func, user_data);
      return 0;
    }
  {
    DirStream s = { .buf = stream_buf () };
    off_t host;
    struct stat hst;
    /* the directory's ctime before it is read: if the listing ends in
     * this call, the next one past it may find nothing changed */
    bool stamped = fstat (fd, &hst) == 0;
    /* a call that goes on from where one stopped continues at the host's
     * position kept for it; any other offset is found from the start */
    r = -ENOENT;
    if (offset != 0 && cursor_find (node, offset, &host))
      r = stream_restart (fd, &s, offset, host);
    if (r < 0)
      r = stream_seek (view, node, st, fd, &s, offset);
    if (r == 0)
      r = offer_stream (view, node, st, fd, &s, plus_for_listing (view, plus), func, user_data);
    cursor_keep (node, &s, r == 0 && stamped ? &hst.st_ctim : NULL);
    return r;
  }
}

int
fb_view_fsyncdir_at (FbView *view, FbViewNode *node, bool datasync)
{
  _fb_cleanup_fd_ int fd = -1;

  if (node->kind != NODE_HOST)
    return 0;
  fd = S_ISDIR (node->type) ? dir_open (node) : node_reopen (node, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return fd;
  if ((datasync ? fdatasync (fd) : fsync (fd)) < 0)
    return -errno;
  return 0;
}
