/* fusebox — internals shared by the libfuse adapter's files (fs-fuse*.c). */
#pragma once

#include "fs/fs-private.h"

#include <fuse_lowlevel.h>

G_BEGIN_DECLS

/* Slots of FbFuse.name_gens (a name's slot: its key's hash modulo this). */
#define INVAL_NAME_SLOTS 1024

/* Who waits for the next request (fs-fuse-gate.c). */
typedef struct FbFuseGate FbFuseGate;

/* The refresher's state (fs-fuse-warm.c). */
typedef struct Warm Warm;

struct FbFuse
{
  FbView *view;
  FbViewNode *root; /* FUSE_ROOT_ID */
  FbFuseOptions options;
  char *fsname;
  struct fuse_session *se;
  char *mountpoint;    /* set by fb_fuse_mount (not for /dev/fd/N) */
  bool unmounted;      /* we unmounted it (fb_fuse_stop) */
  char *mount_source;  /* its tagged source in mountinfo (fb_fuse_mount) */
  dev_t mount_dev;     /* its device number, found at mountpoint; 0 unknown */
  int mount_parent;    /* the mount point's parent (O_PATH), found holding our mount; -1 */
  char *mount_name;    /* the mount point's name in it */
  int abort_fd;        /* /sys/fs/fuse/connections/<minor>/abort of our mount, opened while it was ours; -1 */
  bool stateless_dirs; /* the kernel opens directories without asking us */
  bool root_uncached;  /* the root's attributes are never cached (fb_fuse_mount) */
  GMutex files_lock;
  GHashTable *files; /* files_lock: FbViewFile* the kernel holds open */
  GThread *thread;
  FbFuseGate *gate; /* set by fb_fuse_run while its workers run */
  FbFuseDoneFunc done;
  gpointer done_data;
  int result;

  /* Invalidations for the kernel (fs-fuse-inval.c) */
  GMutex inval_lock;
  GCond inval_cond;
  GQueue inval_queue;        /* inval_lock: Inval* */
  GHashTable *inval_pending; /* inval_lock: keys of the queued ones */
  bool inval_stop;           /* inval_lock */
  guint64 inval_dropped;     /* inval_lock: queue full */
  GThread *inval_thread;
  bool listening;
  bool inval_all;            /* inval_lock: invalidate everything the kernel knows (host events lost) */
  bool coherent;             /* host changes are watched (fs-watch.c): long timeouts where covered */
  guint64 inval_seq;         /* inval_lock: the last one queued */
  struct InvalSync *sync;    /* delivery progress, for the threads that wait on it */
  GQueue inval_later;        /* inval_lock: Inval* sent again at their due time (a name's second invalidation) */
  GHashTable *later_pending; /* inval_lock: keys of inval_later */
  GHashTable *absences;      /* inval_lock: "e:INO:NAME" -> expiry (monotonic us) of the long negative entries given */
  gint64 absences_purged;    /* inval_lock: when the expired ones were last dropped */
  guint64 name_gen;          /* inval_lock: name invalidations queued so far */
  guint64 all_gen;           /* inval_lock: name_gen when everything was last invalidated */
  bool inval_evict;          /* inval_lock: ask the kernel to forget the oldest names (inval_evict_request) */
  gint64 evict_asked;        /* atomic: when it was last asked (monotonic us) */
  /* inval_lock: host directories whose names may no longer show them
   * (fs-view-node.c "Moved directories"), a set of references; check them
   * all (moved_all: changes lost, or too many) */
  GHashTable *moved_checks;
  bool moved_all;
  bool moved_mounts; /* inval_lock: check the directories that are mounts' roots (the mount table changed) */
  /* inval_lock: check the mounts' sources (fs-view-source.c): a name
   * changed on the way to one, or changes were lost; and when, where some
   * way is not watched (monotonic us, 0: never) */
  bool sources_check;
  gint64 sources_due;
  /* inval_lock: name_gen at the last invalidation of a name in each slot */
  guint64 name_gens[INVAL_NAME_SLOTS];

  /* atomic: the refresher (fs-fuse-warm.c), set once by fb_fuse_keep_warm
   * (workers may be serving), freed by fb_fuse_free after them */
  Warm *warm;
};

/* How far the notifier got, shared with waiting threads (which may outlive
 * the FbFuse, hence the reference count). */
typedef struct InvalSync
{
  gint ref;
  GMutex lock;
  GCond cond;
  guint64 done; /* lock: the last one delivered */
  bool stopped; /* lock */
} InvalSync;

/* fs-fuse-gate.c: one worker at a time waits for the next request */
int fb_fuse_gate_new (int fd, unsigned spread, unsigned tick_ms, FbFuseGate **ret_gate);
ssize_t fb_fuse_gate_read (FbFuseGate *g, int fd, void *buf, size_t len);
void fb_fuse_gate_stop (FbFuseGate *g);
unsigned fb_fuse_gate_waiting (FbFuseGate *g);
void fb_fuse_gate_free (FbFuseGate *g);

/* fs-fuse-session.c: another program's messages (libfuse's, fusermount3's,
 * which quote the mount point) from FROM to TO as a terminal may show
 * them: their lines as they are, every control character but a tab and a
 * newline (an escape sequence, a carriage return that would write over a
 * line; C0, DEL, and C1 as UTF-8 writes it) as \xHH. */
void fb_fuse_copy_shown (int from, int to);

/* fs-fuse.c: the operations, for fs-fuse-session.c */
extern const struct fuse_lowlevel_ops fb_fuse_ops;

/* fs-fuse-inval.c */
InvalSync *inval_sync_ref (InvalSync *s);
void inval_sync_unref (InvalSync *s);
int inval_start (FbFuse *f);
void inval_init (FbFuse *f);
void inval_clear (FbFuse *f);
guint64 inval_name_gen (FbFuse *f);
double inval_absence_timeout (FbFuse *f, guint64 gen, fuse_ino_t parent_ino, FbViewNode *parent, const char *name);
void inval_finish (FbFuse *f);
void inval_evict_request (FbFuse *f);

/* fs-fuse-warm.c: a directory's listing was served (from a worker); is PID
 * the refresher's (a request of ours, not an access); the refresher's end
 * and its state's, in fb_fuse_free. */
void warm_listed (FbFuse *f, FbViewNode *node);
bool warm_is_refresher (FbFuse *f, pid_t pid);
void warm_free (FbFuse *f);

G_END_DECLS
