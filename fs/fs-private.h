/* fusebox — internals shared by the view's files (fs-view*.c). */
#pragma once

#include "fs/fs.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

G_BEGIN_DECLS

typedef enum
{
  NODE_HOST,      /* an O_PATH descriptor of a host object */
  NODE_SYNTHETIC, /* a directory that leads to mount points, or a missing mount's source */
  NODE_BLANK,     /* /proc, /sys, /dev and objects on the host's procfs, sysfs, devtmpfs: empty */
} NodeKind;

/* A node's view path and decision, immutable once built: an operation takes
 * a reference and works on a consistent pair even if a rename moves the
 * node meanwhile.  Built on demand (node_get_state): a node keeps only its
 * parent, name and decision, never its path (fs-view-node.c, "Paths"). */
typedef struct
{
  gint ref;
  char *path;
  FbPolicyDecision decision;
  /* the path is past FB_VIEW_PATH_MAX (a host tree moved deeper than the
   * view decides): PATH is "…" and its last components, DECISION the
   * view's refusal VIEW_REFUSAL_TOO_LONG; nothing below it is looked up */
  bool too_long;
} NodeState;

NodeState *node_state_new (const char *path, const FbPolicyDecision *decision);
NodeState *node_state_ref (NodeState *st);
void node_state_unref (NodeState *st);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NodeState, node_state_unref)

/* A view path the kernel (or an operation) holds.  One per name the
 * kernel remembers, so every byte counts (fs.h, Bounds): one block from
 * the view's slabs (fs-view-node-slab.c, which also say whose view it is:
 * node_view()), fields ordered to leave no padding, what only directories
 * need before the struct in the same block (NodeDir), the name right after
 * its last field; the decision is shared, and what only opened or listed
 * nodes need is apart (NodeExtra). */
struct FbViewNode
{
  gint ref; /* atomic; reaches 0 only under view->lock (see fb_view_node_unref) */
  /* view->lock: in the table (in_table), among the live nodes that
   * entered it (in_all: in the table, or view->detached), held by the view
   * for its life (pinned, view->pinned); the name is not in name_buf but in
   * a string of its own, whose pointer name_buf holds (name_apart: a
   * rename, or a name too long for a block; node_name()); a host
   * directory no longer at its view path (moved: fs-view-node.c, "Moved
   * directories").  Bits of one byte, written only under that lock: no
   * other field shares the byte. */
  guint8 in_table : 1;
  guint8 in_all : 1;
  guint8 pinned : 1;
  guint8 name_apart : 1;
  guint8 moved : 1;
  /* atomic (__atomic_*): 1 when host changes are watched (fs-watch.c
   * "Coverage"; a directory then holds a mark), set before the kernel first
   * gets the node (or at fb_watch_view); -1 while a mark is being placed */
  gint8 watched;
  /* immutable once the node is in the table (set by its maker before) */
  guint8 kind : 2;   /* NodeKind */
  guint8 reopen : 1; /* a host non-directory holding no descriptor: node_host_fd() */
  /* a host directory whose host_fd is a cache entry (fs-view-fd.c): closed
   * while unused past the budget, opened again by node_fd_get(); host_fd is
   * then atomic, and changes only under fd_lock */
  guint8 evictable : 1;
  /* on a filesystem that may answer a stat from a cache (HOST_FS_ASKS) */
  guint8 asks : 1;
  /* a host object on another device than its parent's, or a directory the
   * kernel says is a mount's root (a bind mount of the same filesystem):
   * another mount may take its identity when it is gone (node_check_fd),
   * and a mount moved takes it from its name (fs-fuse-inval.c) */
  guint8 mount_root : 1;
  bool fd_listed;  /* directories, fd_lock: in the list of NodeDir.fd_prev */
  guint64 nlookup; /* atomic; the kernel's lookup count */

  /* view->lock: the table key (parent, node_name()) and the tree of nodes
   * in the table (a directory's first child is in its NodeDir) */
  FbViewNode *parent; /* a reference; NULL for the root */
  FbViewNode *next_sibling, *prev_sibling;

  /* view->lock: the decision of the node's view path, kept current by
   * renames (fs-view-node.c, "Paths"), shared by the nodes with the same one
   * (fs-view-node.c, "Decisions") */
  const FbPolicyDecision *decision;
  /* atomic: what an opened or listed node keeps (node_extra()), NULL
   * until then: most nodes never are */
  struct NodeExtra *extra;
  /* immutable */
  ino_t ino;

  /* immutable */
  /* O_PATH|O_NOFOLLOW; -1 unless NODE_HOST, and for reopened nodes.  Never
   * read directly: node_fd_get() (a directory's may be closed while unused,
   * fs-view-fd.c) or node_host_fd(). */
  int host_fd;
  guint32 dev;        /* immutable: st_dev: the kernel's are 32 bits (new_encode_dev) */
  guint32 generation; /* immutable: FUSE's, of which the kernel keeps 32 bits */
  guint16 type;       /* immutable: the S_IFMT bits of st_mode */
  char name_buf[];    /* at least sizeof (char *) bytes */
};

/* What only directory nodes have (S_ISDIR (type): synthetic ones too), in
 * the node's block before the struct: most nodes are files, and a file's
 * node is this much smaller. */
typedef struct
{
  FbViewNode *first_child; /* view->lock */
  /* atomic (__atomic_*, node_dir_state() and the others below): the holds
   * of host_fd (node_fd_get) in the bits of DIR_FD_USERS; DIR_FD_HOT: held
   * since the eviction scan last passed; DIR_LISTED_BARE: a listing with
   * attributes left out some non-directories' (fs-view-dir.c,
   * "Attributes").  One word: a walk keeps a NodeDir a directory. */
  guint state;
  /* atomic: FbViewFold + 1 once known, 0 before: does the host fold names
   * here (fs-view-fold.c) */
  gint fold;
  /* fd_lock: in the view's list of cached directory descriptors */
  FbViewNode *fd_prev, *fd_next;
} NodeDir;

G_STATIC_ASSERT (sizeof (NodeDir) % 8 == 0);

#define DIR_FD_USERS 0x0fffffffu
#define DIR_FD_HOT 0x10000000u
#define DIR_LISTED_BARE 0x20000000u
G_STATIC_ASSERT (NODE_HOST < 4 && NODE_SYNTHETIC < 4 && NODE_BLANK < 4); /* FbViewNode.kind's 2 bits */

/* Names up to this long are in the node's block; longer ones apart. */
#define NODE_NAME_IN_BLOCK_MAX 255
/* The largest block a node takes. */
#define NODE_BLOCK_MAX (sizeof (NodeDir) + G_STRUCT_OFFSET (FbViewNode, name_buf) + NODE_NAME_IN_BLOCK_MAX + 1)

/* NODE's directory part: NODE must be a directory. */
static inline NodeDir *
node_dir (FbViewNode *node)
{
  g_assert (S_ISDIR (node->type));
  return (NodeDir *)(void *)((char *)node - sizeof (NodeDir));
}

/* NODE's directory state (NodeDir.state), read; BITS set or cleared (the
 * word before); DELTA holds more or fewer. */
static inline guint
node_dir_state (FbViewNode *node)
{
  return __atomic_load_n (&node_dir (node)->state, __ATOMIC_SEQ_CST);
}

static inline guint
node_dir_set (FbViewNode *node, guint bits)
{
  return __atomic_fetch_or (&node_dir (node)->state, bits, __ATOMIC_SEQ_CST);
}

static inline guint
node_dir_clear (FbViewNode *node, guint bits)
{
  return __atomic_fetch_and (&node_dir (node)->state, ~bits, __ATOMIC_SEQ_CST);
}

static inline void
node_dir_hold (FbViewNode *node, int delta)
{
  __atomic_fetch_add (&node_dir (node)->state, (guint)delta, __ATOMIC_SEQ_CST);
}

/* NODE's name ("" for the root): view->lock held, or NODE not shared yet. */
static inline const char *
node_name (const FbViewNode *node)
{
  const char *apart;

  if (!node->name_apart)
    return node->name_buf;
  memcpy (&apart, node->name_buf, sizeof apart);
  return apart;
}

/* fs-view-node-slab.c: blocks of a few sizes (up to NODE_BLOCK_MAX) for a
 * view's nodes, zero-filled; node_slabs_of() the allocator of a block, from
 * any address inside it; node_slabs_bytes(): the bytes of the blocks in use.
 * node_slabs_handle(): a number of NODE_HANDLE_BITS bits, never 0, for an
 * 8-byte aligned address in a block, which node_slabs_at() turns back into
 * the address while the block lives (what the node sets keep). */
#define NODE_HANDLE_BITS 29
/* regions of 1 MiB: at most 4 GiB of blocks a view */
#define NODE_SLABS_REGIONS_MAX 4096
typedef struct NodeSlabs
{
  GMutex lock; /* all below but bases; innermost */
  struct Slab *partial[NODE_BLOCK_MAX / 8 + 2];
  GPtrArray *regions;
  /* each region's address by its number, NULL for none: written under
   * lock, read without it by node_slabs_at() */
  char **bases;
  gsize bytes;
  bool release_pages;
} NodeSlabs;
void node_slabs_init (NodeSlabs *s);
void node_slabs_clear (NodeSlabs *s);
void *node_slabs_alloc (NodeSlabs *s, gsize size);
void node_slabs_free (void *block);
NodeSlabs *node_slabs_of (const void *block);
guint32 node_slabs_handle (const void *p);
void *node_slabs_at (NodeSlabs *s, guint32 handle);
gsize node_slabs_bytes (NodeSlabs *s);

/* What a node keeps once it was opened or listed. */
/* The part of a node's extra that only some directories use, made at its
 * first use (node_extra_dir): a plain directory, listed as a stream, keeps
 * none of it, and its extra stays small (a walk keeps one per directory
 * it listed). */
typedef struct NodeExtraDir
{
  /* an assembled directory listing (fs-view-dir.c), valid while the host
   * directory's mtime and ctime are these */
  GArray *listing; /* DirEntry, refcounted */
  struct timespec listing_mtime, listing_ctime;
  /* a directory that folds or may: the names it lists, spelt as on disk
   * (fs-view-fold.c), valid while its mtime and ctime are these */
  GHashTable *spellings;
  struct timespec spellings_mtime, spellings_ctime;
  gint64 spellings_read_at; /* monotonic us */
} NodeExtraDir;

typedef struct NodeExtra
{
  GMutex lock; /* all below */
  /* reopened nodes: the files open on it, whose descriptors reach the
   * object when its name no longer does (fstat of a file unlinked or
   * renamed away while open) */
  FbViewFile *open_files;
  bool have_stamp; /* size and mtime seen at the last open (keep_cache) */
  off_t stamp_size;
  struct timespec stamp_mtime;
  /* what only some directories keep (below): NULL until one of them
   * keeps something */
  struct NodeExtraDir *dir;
} NodeExtra;

/* fs-view-node.c: NODE's extra part, made now if it has none (for the node's
 * life); node_extra_peek(): NULL when it has none (nothing was kept). */
NodeExtra *node_extra (FbViewNode *node);
NodeExtra *node_extra_peek (FbViewNode *node);
/* X's directory part, made now if it has none; called with X's lock. */
NodeExtraDir *node_extra_dir (NodeExtra *x);

typedef struct
{
  char *name;
  ino_t ino;
  unsigned char type;
} DirEntry;

/* A record of getdents64(2), read from a host directory by listings
 * (fs-view-dir.c), the fold probe (fs-view-fold.c) and the depth walk
 * (fs-view-depth.c). */
struct linux_dirent64
{
  guint64 d_ino;
  gint64 d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

/* Where a streamed listing stands (fs-view-dir.c): the view's offset, which
 * counts the entries the view showed, and the host's, which lseek takes.
 * The FUSE adapter's listings, which have no handle, keep theirs in the
 * view's table of DIR_CURSOR_SETS sets of DIR_CURSOR_WAYS, a node's in
 * the set its address picks. */
#define DIR_CURSOR_SETS 128
#define DIR_CURSOR_WAYS 8
typedef struct DirCursor
{
  FbViewNode *node; /* NULL: a free slot */
  off_t index;
  off_t host;
  /* AT_END: the listing read to the end there, and END_CTIME was the
   * directory's ctime before it read */
  struct timespec end_ctime;
  guint32 used; /* view->cursor_clock when last kept */
  bool at_end;
} DirCursor;

/* A host directory read with getdents64 through a fixed buffer. */
typedef struct
{
  char *buf;      /* fs-view-dir.c's DIR_BUF_SIZE bytes */
  gsize len, pos; /* bytes in buf; the next entry's */
  off_t index;    /* the view's offset of the next entry: how many the view showed before it */
  off_t host;     /* the host's offset after the last entry read (hidden ones too) */
  bool eof;
} DirStream;

struct FbViewFile
{
  FbViewNode *node;
  NodeState *state; /* the decision it was opened under */
  int fd;           /* the host file; -1 for synthetic directories */
  int flags;
  bool is_dir;
  bool can_read;
  bool can_write;
  FbAccess access; /* read, write, readwrite, exec; list for a directory */
  pid_t pid;
  uid_t uid;
  char *comm;
  char *session;
  void *owner; /* its opener's command, when several share the view (FbViewOwners), or NULL */
  /* the account its descriptor is charged to (a reference), or NULL */
  FbViewFdAccount *fd_account;
  gint64 bytes_read;                 /* atomic */
  gint64 bytes_written;              /* atomic */
  FbViewFile *open_prev, *open_next; /* node extra's lock: its open_files (reopened nodes) */
  gint caps_killed;                  /* atomic: view_kill_priv found no file capability left */

  /* directories: lock for what follows */
  GMutex dir_lock;
  GArray *snapshot; /* DirEntry (a reference), or NULL when streaming from the host */
  DirStream stream; /* when streaming */
};

/* fs-view-table.c: a set of nodes by a key of theirs, for the view's
 * table and index (view->lock held).  node_set_add() replaces an equal
 * node; node_set_remove() removes NODE itself (false when it is not in);
 * node_set_next() goes through the set from *POS = 0 until NULL. */
typedef guint (*NodeSetHash) (const FbViewNode *node);
typedef bool (*NodeSetEqual) (const FbViewNode *a, const FbViewNode *b);
typedef bool (*NodeSetMatch) (const FbViewNode *node, gconstpointer key);
typedef struct
{
  guint32 *slots; /* a node's handle (node_slabs_handle) and bits of its hash; 0: empty */
  guint bits;     /* 1 << bits slots; 0 before the first add */
  guint len;
  NodeSlabs *slabs; /* where the nodes are */
  NodeSetHash hash;
  NodeSetEqual equal;
} NodeSet;
void node_set_init (NodeSet *set, NodeSlabs *slabs, NodeSetHash hash, NodeSetEqual equal);
void node_set_clear (NodeSet *set);
FbViewNode *node_set_find (const NodeSet *set, const FbViewNode *key);
/* the node whose key is KEY, of any type, when HASH is what the set's hash
 * gives for it and MATCH says which node has it */
FbViewNode *node_set_find_by (const NodeSet *set, guint hash, NodeSetMatch match, gconstpointer key);
void node_set_add (NodeSet *set, FbViewNode *node);
bool node_set_remove (NodeSet *set, FbViewNode *node);
FbViewNode *node_set_next (const NodeSet *set, guint *pos);

struct FbView
{
  gint ref;
  FbPolicy *policy;
  FbViewOptions options;
  int *mount_fds; /* per fb_policy_get_mounts(); -1 when missing, -2 for a private
                   * directory not made yet (fs-view.c, MOUNT_FD_UNMADE) */
  guint n_mounts;
  dev_t blank_devs[4];   /* host st_dev of /proc, /sys, /dev (0 when they are on /'s device); the view's own
                          * mount on the host (fb_view_blank_own_mount) */
  char **blank_paths;    /* /proc, /sys, /dev and options.blank_paths */
  char *private_root;    /* options.private_root, copied */
  int private_anchor_fd; /* options.private_anchor_fd, duplicated, or -1 */
  char *private_anchor;  /* options.private_anchor, copied */
  /* fusebox's own state (fs-view-state.c), HostId sorted, immutable after
   * fb_view_new: the objects, and the directories that hold them */
  GArray *state_ids;
  GArray *state_parents;
  /* and every directory on the way to them, up to / (HostId sorted): none
   * of them may be moved (view_state_on_the_way) */
  GArray *state_ways;
  /* and the access logs among them, by their directory and name (a log's
   * rotation makes new files there, which no identity recorded at start
   * covers): StateLog */
  GArray *state_logs;
  /* the ways to the mounts' host sources (fs-view-source.c), immutable
   * after fb_view_new but for their atomic flags */
  struct SourceWay *source_ways;
  guint n_source_ways;
  gint sources_watched;  /* atomic: view_sources_watch() ran */
  gint sources_unmarked; /* atomic: a step of theirs could not be marked */
  struct timespec started;
  guint64 generation;       /* atomic */
  gint can_empty_path_link; /* atomic: linkat (AT_EMPTY_PATH) works for us */
  gint trim_mark;           /* atomic: the most nodes since malloc was last trimmed (fs-view-node.c) */
  gint plus_files;          /* atomic: listings left that give files' attributes too (fs-view-dir.c) */
  gint spellings_kept;      /* atomic: names kept in all directories' NodeExtra.spellings (fs-view-fold.c) */
  /* fs-view-dir.c, cursor_lock (innermost): the host positions of the
   * FUSE adapter's streamed listings (DirCursor), made at the first one
   * kept; a node's go with it (view_dir_forget) */
  GMutex cursor_lock;
  struct DirCursor *cursors;
  guint32 cursor_clock;

  NodeSlabs slabs;      /* the nodes' blocks */
  GMutex lock;          /* the node table */
  NodeSet table;        /* key: parent, name */
  NodeSet by_ino;       /* the first node of each host object (key: dev, ino) */
  GHashTable *ino_more; /* of a first node whose host object has more: a GPtrArray of the others */
  GHashTable *detached; /* the nodes that left the table (in_all, not in_table), for fb_view_drop_kernel_refs() */
  guint n_nodes;        /* atomic */
  guint node_max;       /* options.node_max, or FB_VIEW_NODES_MAX */
  /* view->lock: the nodes the view keeps for its life (the root, mount
   * points, synthetic directories: fs-view.c "Pinned nodes"); each holds
   * a reference to the view, and the view one to each */
  GPtrArray *pinned;
  gint n_pinned; /* atomic: pinned->len, read by fb_view_unref */
  /* a rename through this view, from its depth check to the moved nodes'
   * new decisions (fs-view-name.c): taken before view->lock */
  GMutex rename_lock;
  /* a rename through this view from the host's rename to the nodes' move,
   * and nothing else (microseconds: no tree measured, nothing waited for),
   * so that view_node_recheck never sees one half done: taken after
   * rename_lock, before view->lock */
  GMutex moves_lock;
  /* renames waiting for rename_lock, or holding it, that may measure a
   * tree (a name moving to a longer path): at most VIEW_RENAME_WALKERS_MAX */
  gint rename_walkers;
  /* the decisions nodes share (fs-view-node.c, "Decisions"): each an
   * FbPolicyDecision, its own key, freed with its last node */
  GMutex decisions_lock;
  GHashTable *decisions;

  /* fs-view-fd.c, fd_lock: the cached directory descriptors, least
   * recently listed first, and the list of live views */
  FbViewNode *fd_head, *fd_tail;
  gint n_dir_fds;  /* fd_lock to change, atomic to read */
  gint n_file_fds; /* atomic: descriptors of files open through this view */
  /* what the FUSE connection opens is charged to; immutable */
  FbViewFdAccount *fd_account;
  FbView *views_prev, *views_next;
  bool in_views;
};

/* The view NODE belongs to (its block's allocator is the view's). */
static inline FbView *
node_view (const FbViewNode *node)
{
  return (FbView *)(void *)((char *)node_slabs_of (node) - G_STRUCT_OFFSET (FbView, slabs));
}

/* fs-watch.c: mark the host directory DEV/INO (DIR_FD: a descriptor of it)
 * if the watcher runs, or count one more node holding its mark; false when
 * it isn't marked (short timeouts there).  watch_dir_remove() undoes one
 * successful watch_dir_add(), with a descriptor of the directory still
 * open (or -1 when none could be had).  watch_children_decode(): events on DEV's non-directories can be
 * mapped to their st_ino. */
bool watch_dir_add (dev_t dev, ino_t ino, int dir_fd);
void watch_dir_remove (dev_t dev, ino_t ino, int dir_fd);
bool watch_children_decode (dev_t dev);
/* For tests: filesystems met from now on are treated as if their file ids
 * did not hold the inode number (as xfs's, btrfs's), so that what the
 * watcher does there can be shown on a tmpfs. */
void watch_test_ids_unread (bool unread);

/* fs-view-event.c: log OP (an allowed one only at its level or above,
 * fb_op_level; a refusal always) */
void view_emit (FbView *view, const FbViewCaller *caller, FbOp op, const char *path, const char *target,
                FbAccess access, FbDecision decision, int err, const FbPolicyRule *rule);
void view_emit_hidden (FbView *view, const FbViewCaller *caller, const char *path, FbDecision decision, int err,
                       const FbPolicyRule *rule, bool exists);
void view_emit_close (FbView *view, FbViewFile *file);
/* Refusals that are fusebox's own, whatever the policy (fs.h, Privilege):
 * logged as decision "deny" with one of these rules (kind
 * FB_POLICY_RULE_FUSEBOX, "rule":"fusebox" in the log), so that an auditor
 * tells them from the host's errors and from the policy's denials. */
typedef enum
{
  VIEW_REFUSAL_CHOWN,
  VIEW_REFUSAL_SETID,
  VIEW_REFUSAL_DEVICE,
  VIEW_REFUSAL_XATTR,
  VIEW_REFUSAL_RULED_DIR,
  VIEW_REFUSAL_FOLD_SPELLING,  /* the host resolves this name but lists no entry under it */
  VIEW_REFUSAL_FOLD_TAKEN,     /* the host folds names and another entry answers to this one */
  VIEW_REFUSAL_OWN_STATE,      /* fusebox's run directories and logs (fs-view-state.c) */
  VIEW_REFUSAL_TOO_LONG,       /* a view path past FB_VIEW_PATH_MAX: a rename that would make one, a host tree deeper */
  VIEW_REFUSAL_NODES,          /* the view keeps FbView.node_max nodes already */
  VIEW_REFUSAL_FILES,          /* the caller's account holds its share of open files (fs-view-fd.c) */
  VIEW_REFUSAL_PRIVATE_SOURCE, /* a rename or link between a private source and another source (fs-view-name.c) */
  VIEW_REFUSAL_RENAMES_BUSY,   /* VIEW_RENAME_WALKERS_MAX renames that may measure a tree wait already */
  VIEW_REFUSAL_MOVED,          /* a directory taken from its view path by the host or another view (fs-view-node.c) */
  VIEW_REFUSAL_SOURCE_MOVED,   /* a mount whose source left its host path (fs-view-source.c) */
} ViewRefusal;
const FbPolicyRule *view_refusal_rule (ViewRefusal refusal);
/* The caller's /proc/PID/comm, read now, for events logged later. */
void view_caller_comm (FbView *view, pid_t pid, char *buf, gsize size);

/* fs-view-check.c: names and the policy's checks. */
int check_name (const char *name);
char *join_path (const char *dir, const char *name);
bool name_in (const char *const *names, const char *name);

typedef enum
{
  NEED_STAT,
  NEED_READ,
  NEED_LIST,
  NEED_WRITE,
} Need;
int check_access (const NodeState *st, Need need, FbDecision *ret_decision);

/* The caller's decision for a name in a directory, with the checks common to
 * every operation that takes a name. */
typedef struct
{
  char *path;
  FbPolicyDecision decision;
} ChildInfo;
void child_info_clear (ChildInfo *ci);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (ChildInfo, child_info_clear)
int decide_child_checked (FbView *view, FbViewNode *parent, const NodeState *pst, const char *name, ChildInfo *ret);
/* The same for a name to be made (created, linked, renamed onto): decided
 * folded where a probe said the host keeps case apart but the filesystem
 * may fold all the same (view_dir_fold_new), so that no name is made that
 * may act as a protected or ruled one on the host. */
int decide_new_child_checked (FbView *view, FbViewNode *parent, const NodeState *pst, const char *name, ChildInfo *ret);
/* What an existing NAME needs to be entered from its directory (PST). */
int check_enter (const NodeState *pst, const char *name, FbDecision *ret_decision);
int check_create (const NodeState *pst, const ChildInfo *ci, FbDecision *ret_decision, const FbPolicyRule **ret_rule);
bool child_is_structural (FbView *view, const NodeState *pst, const ChildInfo *ci, const char *name);
bool is_blank_path (FbView *view, const char *path);
bool decision_is_hidden (const FbPolicyDecision *d);
/* The checks before making NAME in PARENT (decided as CI): the policy, EEXIST
 * for names the view already shows, EROFS for synthetic parents.  Logs
 * denials as OP. */
int create_precheck (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const NodeState *pst,
                     const char *name, const ChildInfo *ci, FbOp op, const char *target_path);
/* The checks before removing NAME of PARENT (or renaming it away to
 * TARGET_PATH).  A refusal is only reported for something the host really
 * holds; otherwise ENOENT. */
int remove_precheck (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const NodeState *pst,
                     const char *name, const ChildInfo *ci, FbOp op, const char *target_path);

/* fs-view-node.c: the node table (view->lock held for table_find_locked).
 * view_table_init() at fb_view_new, view_table_clear() when the view is
 * freed.  node_get_state(): NODE's view path and decision, built now (a
 * reference). */
void view_table_init (FbView *view);
void view_table_clear (FbView *view);
NodeState *node_get_state (FbViewNode *node);
FbViewNode *node_new (FbView *view, NodeKind kind, int fd, const struct stat *st, const FbPolicyDecision *decision,
                      const char *name);
FbViewNode *table_find_locked (FbView *view, FbViewNode *parent, const char *name);
FbViewNode *table_insert (FbView *view, FbViewNode *parent, FbViewNode *fresh);
void node_pin (FbView *view, FbViewNode *node);
FbViewNode *pinned_find (FbView *view, FbViewNode *parent, const char *name, bool mount_point);
void view_detach_name (FbView *view, FbViewNode *parent, const char *name);
/* Moved directories (fs-view-node.c): PARENT's child NAME when it is a
 * host directory node that may have been taken from its name (in the
 * table, not marked yet), referenced, or NULL (view->lock held, as in
 * fb_view_find_object's callbacks); every such node of VIEW (only those
 * that are a mount's root, on another device than their parent, when
 * MOUNT_ROOTS), into RET_NODES. */
FbViewNode *view_child_dir_ref_locked (FbView *view, FbViewNode *parent, const char *name);
void view_host_dirs_ref (FbView *view, bool mount_roots, GPtrArray *ret_nodes);
/* Does NODE's name still show NODE's directory?  False: yes (or NODE has
 * left the table already); true: no, and NODE is marked moved now
 * (*RET_PARENT, referenced, and *RET_NAME: the name the kernel may still
 * have it under). */
bool view_node_recheck (FbViewNode *node, FbViewNode **ret_parent, char **ret_name);
void view_rehome_after_rename (FbView *view, FbViewNode *parent, const char *name, FbViewNode *newparent,
                               const char *newname, bool exchange);

/* fs-view-source.c: a mount's source that left its host path.
 * view_sources_init() at fb_view_new (0, or -errno: a source that its path
 * no longer leads to, or too many steps), view_sources_clear() when the
 * view is freed.  view_sources_watch(): mark the ways' directories with
 * the host watcher, once (false: some could not be, and the sources are
 * to be checked now and then: view_sources_polled()).
 * view_sources_on_the_way(): a name change in DEV/INO may have moved a
 * source.  view_sources_check(): check every source, and for each that
 * left its path mark its mount's nodes (into RET_NODES, referenced, when
 * not NULL); how many left.  view_source_check_mount(): the same for one
 * mount.  view_source_moved(): MOUNT's source left its path. */
typedef struct SourceWay SourceWay;
int view_sources_init (FbView *view);
void view_sources_clear (FbView *view);
bool view_sources_watch (FbView *view);
bool view_sources_polled (FbView *view);
bool view_sources_on_the_way (FbView *view, dev_t dev, ino_t ino);
guint view_sources_check (FbView *view, GPtrArray *ret_nodes);
void view_source_check_mount (FbView *view, guint mount);
bool view_source_moved (FbView *view, guint mount);
/* fs-view-node.c: mark the mount point nodes of MOUNT moved (into
 * RET_NODES, referenced, when not NULL); view_mount_node_new(): NODE, a
 * mount point's just entered, is marked too when its source left. */
void view_mount_mark_moved (FbView *view, guint mount, GPtrArray *ret_nodes);
void view_mount_node_new (FbView *view, FbViewNode *node);

/* fs-view.c: a descriptor of MOUNT's source for the caller to close (a
 * private directory is made on first use). */
int mount_fd_dup (FbView *view, const FbPolicyMount *mount);

/* fs-view-lookup.c: NAME in PARENT (decided as CI, checked). */
int lookup_child (FbView *view, FbViewNode *parent, NodeState *pst, const char *name, const ChildInfo *ci,
                  FbViewNode **ret_node, struct stat *ret_st);
/* The same, when a listing said what type NAME has (TYPE_HINT, a d_type:
 * DT_DIR is opened at once); only a hint, the host's object is checked */
int lookup_child_typed (FbView *view, FbViewNode *parent, NodeState *pst, const char *name, unsigned char type_hint,
                        const ChildInfo *ci, FbViewNode **ret_node, struct stat *ret_st);
/* A node for a host object just opened (FD, O_PATH, taken) at NAME in
 * PARENT. */
int node_from_host_fd (FbView *view, FbViewNode *parent, const char *name, const ChildInfo *ci, int fd,
                       FbViewNode **ret_node, struct stat *ret_st);

/* fs-view-host.c: one checked name below PARENT_FD as O_PATH, never
 * followed; whether the host holds NAME in PARENT; whether FD, just
 * opened, shows NODE's host object (st_dev, st_ino, type: 0, or -ESTALE
 * for another object, or fstat's error). */
int host_open_child (int parent_fd, const char *name);
/* What a host object's filesystem asks of a stat (host_statat). */
typedef enum
{
  HOST_FS_LOCAL,    /* nothing: one stat */
  HOST_FS_ASKS,     /* may answer from a cache (NFS, SMB, one's own FUSE): stat'ed again */
  HOST_FS_UNSERVED, /* FUSE of a user not the daemon's nor root, a fusebox view: never asked, blank */
} HostFs;
/* What the mount MNT_ID (statx's: STATX_MNT_ID_UNIQUE's when UNIQUE, else
 * STATX_MNT_ID's; 0: the mount of device DEV) asks of a stat, from the
 * mount table as it is now: a HostFs, or -EIO when the table can't be read
 * or has no such mount.  host_fs_of_statx: of what STX (asked with
 * host_statx_mount_mask()) found.  host_fs_use_statmount(false): mountinfo
 * only, as before Linux 6.8 (for the tests). */
int host_fs_of_mount (guint64 mnt_id, bool unique, dev_t dev);
int host_fs_of_statx (const struct statx *stx);
guint host_statx_mount_mask (void);
void host_fs_use_statmount (bool use);
/* How many times mountinfo was read (for the tests). */
guint host_fs_table_reads (void);
/* The attributes of NAME below DIR_FD, DIR's descriptor (DIR NULL, or any
 * node: only a host directory's device and kind are used), asking no
 * filesystem that is not served: a HostFs, or -errno.  host_stat_fd: FD's
 * own, an object just opened in or below NEAR. */
int host_statat (FbViewNode *dir, int dir_fd, const char *name, struct stat *ret_st);
int host_stat_fd (FbViewNode *near, int fd, struct stat *ret_st);
/* Which object FD is (st_dev, st_ino and the type in st_mode; the rest 0),
 * asking its filesystem nothing. */
int host_identity_fd (int fd, struct stat *ret_st);
/* Is FD (a directory) a mount's root, a bind mount of its own filesystem
 * too?  Asks its filesystem nothing. */
bool host_is_mount_root (int fd);
bool host_name_exists (FbViewNode *parent, const char *name);
int node_check_fd (FbViewNode *node, int fd);
void proc_fd_path (char buf[static 32], int fd);
/* NODE's host object as an O_PATH descriptor: its own (directories, mount
 * sources), or for a reopened node one opened now from its parent's
 * descriptor and its name, checked to show the same st_dev/st_ino/type, and
 * left in *TMP for the caller to close (declare it _fb_cleanup_fd_).  Gives
 * -ENOENT when the name is gone, -ESTALE when it holds another object, -1
 * (no error) for synthetic nodes: callers check the kind first. */
int node_host_fd (FbViewNode *node, int *tmp);
/* The same as a /proc/self/fd path in PROC. */
int node_proc_path (FbViewNode *node, char proc[static 32], int *tmp);
int node_stat (FbView *view, FbViewNode *node, struct stat *ret_st);
/* Open NODE's host object again (through /proc/self/fd) with FLAGS. */
int node_reopen (FbViewNode *node, int flags);

/* Run FUNC with the caller's fsuid/fsgid when act_as_caller asks for it. */
typedef struct
{
  bool switched;
  uid_t old_uid;
  gid_t old_gid;
} CallerCreds;
void creds_enter (FbView *view, const FbViewCaller *caller, CallerCreds *saved);
void creds_leave (CallerCreds *saved);

/* fs-view-fd.c: holding a node's descriptor. */
/* A host directory node: it has a descriptor, now or on demand
 * (node_fd_get), and names below it are looked up on the host. */
bool node_is_host_dir (const FbViewNode *node);
/* NODE's descriptor, held until node_fd_put() (declare HOLD with
 * _fb_cleanup_node_fd_): a directory's or a mount source's, for *at()
 * calls by name below it or on itself.  -EBADF for nodes without one
 * (synthetic, blank, reopened non-directories: see node_host_fd()). */
typedef struct
{
  FbViewNode *node; /* set while a descriptor is held */
  int fd;
} NodeFd;
#define NODE_FD_INIT ((NodeFd){ .node = NULL, .fd = -1 })
int node_fd_get (FbViewNode *node, NodeFd *hold);
void node_fd_put (NodeFd *hold);
#define _fb_cleanup_node_fd_ __attribute__ ((cleanup (node_fd_put)))
/* fs-view-fd.c: the descriptor budget.  view_fd_register() at
 * fb_view_new, view_fd_unregister() when the view is freed.
 * node_fd_cached(): a new evictable node with its descriptor entered the
 * table (it joins the cache).  node_fd_forget(): a node is being freed;
 * returns its descriptor (-1 if none) for the caller to close.
 * view_file_claim() before opening a file the sandbox will hold, for
 * CALLER's account (its session's, or the view's own for FUSE): 0 and
 * *ret_account (a reference, for view_file_new), or -EMFILE past that
 * account's client's part, -ENFILE past the budget, logged (OP,
 * PATH, ACCESS) as fusebox's refusal; view_file_unclaim() when it is
 * closed, or its open failed.
 * view_fd_pressure(): an open failed with EMFILE or ENFILE: the limit is
 * read again and the cache shrunk. */
void view_fd_register (FbView *view);
void view_fd_unregister (FbView *view);
void node_fd_cached (FbViewNode *node);
int node_fd_forget (FbViewNode *node);
int view_file_claim (FbView *view, const FbViewCaller *caller, FbOp op, const char *path, FbAccess access,
                     FbViewFdAccount **ret_account);
void view_file_unclaim (FbView *view, FbViewFdAccount *account);
void view_fd_pressure (void);

/* fs-view-fold.c: directories whose host folds names.  view_dir_fold()
 * asks once per directory, view_dir_fold_known() never asks
 * (MAYBE until someone did: for callers holding the table lock);
 * view_fold_settle() probes a directory that may fold with NAME, an
 * existing name with ASCII letters. */
FbViewFold view_dir_fold (FbViewNode *dir);
/* view_dir_fold() for a name to be made: MAYBE where a probe said NO on a
 * filesystem whose folding is not the kernel's. */
FbViewFold view_dir_fold_new (FbViewNode *dir);
FbViewFold view_dir_fold_known (FbViewNode *dir);
/* The same asked through READ_FD (DIR open for reading, for a listing):
 * no descriptor of its own opened for FS_IOC_GETFLAGS. */
void view_dir_fold_listing (FbViewNode *dir, int read_fd);
/* DIR, a new directory node in PARENT: on PARENT's device, the kind of
 * filesystem PARENT's is, without a statfs. */
void view_dir_fold_inherit (FbViewNode *dir, FbViewNode *parent);
void view_fold_settle (FbViewNode *dir, const char *name);
/* Does DIR (through DIR_FD) list NAME under exactly that spelling?  1 or
 * 0, or -errno: one scan of the directory while it does not change. */
int view_dir_lists (FbViewNode *dir, int dir_fd, const char *name);
/* The policy's decision for NAME in a directory decided as PST, folded
 * unless FOLD is NO. */
void view_decide_child (FbView *view, FbViewFold fold, const NodeState *pst, const char *name, FbPolicyDecision *ret);
/* fb_policy_subtree_has_rules, with names folded as well, wherever PATH is:
 * the directory there, or one below it, may fold names where its parent
 * does not (casefold is a directory's own flag on ext4, f2fs and tmpfs),
 * and its paths are then decided folded. */
bool view_subtree_has_rules (FbView *view, const FbPolicyDecision *decision, const char *path);
/* Before OP on the existing NAME in DIR: -ENOENT (logged as the view's
 * refusal VIEW_REFUSAL_FOLD_SPELLING, decision hide, with ACCESS, PATH and
 * TARGET) when the host reaches it only through another spelling; 0
 * otherwise, and when nothing is there. */
int view_fold_admit (FbView *view, const FbViewCaller *caller, FbViewNode *dir, const char *name, FbOp op,
                     FbAccess access, const char *path, const char *target);
/* Before renaming SRC (at SRC_PATH) onto NAME in DIR (PATH): -EACCES
 * (logged, VIEW_REFUSAL_FOLD_TAKEN) when NAME reaches another entry under
 * another spelling. */
int view_fold_check_target (FbView *view, const FbViewCaller *caller, FbViewNode *dir, const char *name,
                            const struct stat *src, const char *src_path, const char *path);

/* fs-view-depth.c: does every path below the host directory PARENT_FD/NAME
 * fit in ROOM bytes (its path relative to NAME, "/a/b")?  0 when it does
 * (or NAME is not a directory), -ENAMETOOLONG when one does not, -EXDEV
 * when the walk can't tell: more than VIEW_DEPTH_WALK_MAX entries, a
 * directory it can't read, or one moved while it was read.  At most two
 * descriptors of its own. */
#define VIEW_DEPTH_WALK_MAX 100000
/* Renames that may measure a tree and wait for the view's rename lock (or
 * hold it): one more is refused with EXDEV (mv then copies).  Each walk
 * holds the lock while it reads up to VIEW_DEPTH_WALK_MAX entries; without
 * a bound, one command's renames of large trees kept every FUSE worker
 * waiting on the lock, and the view's other commands with them. */
#define VIEW_RENAME_WALKERS_MAX 2
int view_tree_fits (int parent_fd, const char *name, gsize room);

/* fs-view-notify.c: report a change to the listeners (no view lock held).
 * NODE is the node it was made through (for a name: the directory). */
void view_changed (FbView *view, FbViewNode *node, const FbViewChange *change);
void view_changed_object (FbView *view, FbViewNode *node, guint what);
/* NAME in PARENT was made, removed or renamed; OBJECT (may be NULL): the
 * host object whose link count changed. */
void view_changed_name (FbView *view, FbViewNode *parent, const char *name, const struct stat *object);

/* fs-view-dir.c: NAME, just looked up in DIR by a caller, is not a
 * directory: a caller stats what it lists (see "Attributes" there). */
void view_dir_child_stated (FbView *view, FbViewNode *dir);
/* fs-view-dir.c: the listing positions kept for NODE go (its block is
 * about to be freed, and may be another node's next); view_dir_clear()
 * frees VIEW's table, every node gone. */
void view_dir_forget (FbView *view, FbViewNode *node);
void view_dir_clear (FbView *view);

/* fs-view-io.c, shared with fs-view-dir.c */
/* ACCOUNT: what FD was claimed on (view_file_claim), taken; NULL when none. */
FbViewFile *view_file_new (FbViewNode *node, NodeState *st, int fd, FbViewFdAccount *account, int flags,
                           FbAccess access, const FbViewCaller *caller);
void view_file_free (FbViewFile *file);
/* True when NODE's host size and mtime are those seen last time (keep_cache);
 * records them. */
bool node_stamp_compare (FbViewNode *node, const struct stat *st);
/* What the kernel's kill-priv does before a write, done by the view for
 * every caller (fs.h, Privilege): S_ISUID, S_ISGID with group-exec and the
 * security.capability attribute of NODE come off.  Through FILE's
 * descriptor when FILE is not NULL, else NODE's.  0, or -errno: nothing
 * may be written then. */
int view_kill_priv (FbView *view, FbViewNode *node, FbViewFile *file);

/* fs-view-state.c: fusebox's own state, hidden by host identity.
 * view_state_init() reads options.hidden_paths (fb_view_new);
 * view_state_hides() says whether a host object is one of them;
 * view_state_decide() turns DECISION (of NAME in PARENT, decided as PST)
 * into a hide by the view's own rule when the host object there is one;
 * view_state_on_the_way() says whether a directory is one of those above
 * them (which no rename may move). */
void view_state_init (FbView *view);
void view_state_clear (FbView *view);
bool view_state_hides (FbView *view, const struct stat *st);
bool view_state_on_the_way (FbView *view, const struct stat *st);
/* The host object NAME in PARENT (FD: its O_PATH descriptor, or -1: then
 * looked at through PARENT's) whose attributes are ST carries fusebox's mark
 * (FB_STATE_XATTR): a run's own object, of a run this view may know
 * nothing of.  Looked at only where it may be one (a 0700 directory; a
 * file named as a run's files are, or with another name). */
bool view_state_marked (FbViewNode *parent, const char *name, int fd, const struct stat *st);
/* DIR (decided as ST) is a directory that carries fusebox's mark, found by
 * a view before it was marked (a run directory a harness made and a
 * sandbox had open): nothing is made, removed or renamed in it, nor is it
 * renamed or its mode or owner changed.  A mount's source is not one. */
bool view_state_dir_marked (FbViewNode *dir, const NodeState *st);
void view_state_decide (FbView *view, FbViewNode *parent, const NodeState *pst, const char *name,
                        FbPolicyDecision *decision);

G_END_DECLS
