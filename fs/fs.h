/* fusebox — the mediated view: the one place where the policy meets the host.
 *
 * `FbView` performs filesystem operations on *view paths* under an FbPolicy
 * and reports each decided access to an FbAccessSink.  The FUSE adapter
 * (fs/fs-fuse.c, below) and the remote API call the same functions, so every
 * check lives here and none only in an adapter.
 *
 * Nodes.  An FbViewNode is one view path: (parent node, name).  It holds
 * its parent, its name, the policy decision for its path and the host
 * object's type, st_ino and st_dev; the path itself is built from the
 * parents when an operation needs it (never stored: a node costs the same
 * at any depth, and a rename rewrites no string below it).  Two view paths to one host inode
 * (hard links, a directory seen through two mounts) are two nodes with their
 * own decisions; attributes still report the host's st_ino (the FUSE adapter
 * reports st_nlink 1 for every directory: the host's count would reveal
 * hidden subdirectories).  Nodes are plain
 * structs with atomic reference counts; the kernel's lookup count (FUSE) is a
 * separate counter (fb_view_node_kernel_ref/forget) that holds one reference
 * while it is non-zero.  A successful rename moves the nodes of the renamed
 * object and everything below it to their new view paths and re-decides them.
 *
 * Descriptors (fs/fs-view-fd.c), bounded and shared fairly between the
 * views of a process.  The root and each mount point hold an
 * O_PATH|O_NOFOLLOW descriptor of their host directory (or mounted file)
 * for their life; a synthetic node holds none.  Any other directory node's
 * descriptor is an entry of a cache: closed while unused once the
 * process's directory budget is full, and opened again on demand, walking
 * down by name from the nearest ancestor that has one (openat2 as below),
 * each step checked to show the node's st_dev, st_ino and type; a
 * directory replaced on the host answers ESTALE, and ENOENT when the name
 * is gone.  A non-directory node holds none: an operation that needs its
 * host object opens the node's name again from the parent's descriptor the
 * same way, and a getattr is one fstatat by name with the same check.
 * While files of it are open, their descriptors reach it (fstat of a file
 * unlinked or renamed on the host still works).  A file replaced on the
 * host under a name the kernel remembers turns stale (ESTALE) rather than
 * showing the new object under the old inode; the next lookup makes a new
 * node.  The budget: at the first view the soft RLIMIT_NOFILE is raised
 * to the hard one; a quarter of it (at least 64, at most 65536) is kept
 * for everything else the process holds (connections, logs, /dev/fuse,
 * process/start, the descriptors an operation opens and closes at once);
 * of the rest, a quarter caches directories (all views together, the view
 * that caches the most giving up its least recently used first) and three
 * quarters are for what sandboxes hold open: each file and each directory
 * open for listing is charged to an account (FbViewFdAccount): the view's
 * own FUSE connection's (FbViewOptions.fd_account), or the caller's
 * remote-API session's (FbViewCaller.session, one account in every view).
 * An account made with a floor has FB_VIEW_FD_FLOOR files nobody else can
 * take (under `serve`, each running process: enough to load a command and
 * its libraries); the floors are kept out of the budget beforehand
 * (fb_view_fd_set_floors, at most half of it), and an account asking for
 * one when all are taken is refused.  Above its floor an account draws on
 * the rest, shared between clients (the client named at
 * fb_view_fd_account_new; a session's account is a client of its own): a
 * client's accounts together hold at most half of what the other clients
 * leave (EMFILE for that caller past it; ENFILE when nothing is left).
 * Refusals are logged as fusebox's own.  So no sandbox or session can
 * take another's floor, and no client can multiply its part by starting
 * more sandboxes; fb_view_fd_budget() tells the budget.
 *
 * Resolution.  One name at a time, relative to the parent's O_PATH descriptor
 * (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
 * and O_NOFOLLOW), never a host path string.  Names containing "/", "." and
 * ".." are refused with EINVAL, longer than NAME_MAX with ENAMETOOLONG.  A
 * symlink's text is returned as is and never followed for the caller (except
 * by fb_view_walk(), which resolves it *inside the view*, as the kernel does).
 *
 * Access, for the node's own decision (policy/policy.h):
 *   write   everything
 *   read    reads; every mutation gets EROFS
 *   deny    the name is visible (lookup, getattr); open, list, read, readlink,
 *           xattr reads, lookups below it and every mutation get EACCES
 *   hide    ENOENT on lookup, never listed; creating the name gets EACCES
 * A traversable directory (hide or deny with a visible path below) can be
 * entered and lists only its reachable children.  Creating or removing a name
 * needs that name *and* its directory to be writable.  `rename` needs both
 * ends writable (RENAME_NOREPLACE and RENAME_EXCHANGE are supported) and is
 * refused with EACCES for a directory below which some rule decides
 * differently (fb_policy_subtree_has_rules(): each directory that moves, at
 * its old path and its new one, and the destination when it exists and is
 * replaced), so that moving an ancestor of a denied path can't carry that
 * path out of its rule, nor moving a directory carry its paths into
 * another's: a rename changes no decision below what it moves; `rmdir` of such a
 * directory is refused with EACCES too, whatever it holds, because the
 * host's answer (ENOTEMPTY or success) would tell whether the names those
 * rules hide exist.  `link` needs a
 * writable source and target.  A private source is a filesystem of its own:
 * `rename` (an exchange too) and `link` between it and any other source get
 * EXDEV, logged as the view's own refusal (rule "fusebox",
 * fusebox:private-source), so that no tree of the host's, with what the view
 * hides or keeps below it, is removed with the run's private directories.
 * Mount points and synthetic directories can't be removed or renamed
 * (EBUSY); synthetic directories can't be written (EROFS).  The view
 * paths /proc, /sys and /dev, and any host object on the host's procfs,
 * sysfs or devtmpfs, show as empty read-only directories: the host's are
 * never passed through (the launcher mounts fresh ones over them).
 *
 * Privilege.  The daemon may run as root for callers that are not: the FUSE
 * mount uses `default_permissions` so the kernel checks the host's modes
 * against the caller.  With FbViewOptions.act_as_caller the view creates
 * files, directories, symlinks and FIFOs under the caller's fsuid/fsgid
 * (per-thread setfsuid/setfsgid), so the host kernel applies its own checks
 * (sticky and setgid directories, quotas) to the caller's identity and the
 * new object belongs to the caller.  Supplementary groups are not switched:
 * a directory writable only through one of the caller's other groups refuses
 * the creation.  Whatever the policy says, the view refuses: chown that
 * changes the owner or group (EPERM; a no-op chown succeeds, as `tar` does
 * one); setting S_ISUID ever and S_ISGID on non-directories through setattr,
 * and a chmod that changes the mode of a file keeping S_ISUID, or S_ISGID
 * with group-exec (EPERM: a root-owned 04755 made 04777 would be root for
 * any host user who writes it through a shared mapping; on creation those
 * bits are stripped silently); setxattr and
 * removexattr of `security.*` and `trusted.*` (EPERM: a root daemon would
 * otherwise let the sandbox grant file capabilities; removing
 * security.capability is allowed, it only takes them away) and of `system.*`
 * (EOPNOTSUPP: ACLs are not passed through); mknod of devices (EPERM);
 * RENAME_WHITEOUT (EINVAL).  FIFOs and sockets can be made where writable.
 * Before a file's contents change (write, truncate, an open with O_TRUNC,
 * fallocate, copy_file_range) the view takes off its S_ISUID, its S_ISGID
 * when group-exec is set and its security.capability, for every caller, as
 * the kernel's kill-priv does for an unprivileged writer: a root daemon's
 * own writes would keep them (CAP_FSETID), and direct I/O and a shared
 * mmap's writeback never ask the daemon to clear anything.
 *
 * Opens.  Only regular files and directories are opened on the host (others
 * get ENXIO), always with O_NONBLOCK|O_NOCTTY|O_CLOEXEC, by reopening the
 * node's O_PATH descriptor through /proc/self/fd: the daemon never blocks on
 * a host FIFO or device and never re-resolves a path.  Bytes read and written
 * are counted per open file; fb_view_release() logs one "close" event with
 * both counters.
 *
 * Folding hosts.  In a directory whose host folds names (vfat, exfat,
 * ext4/f2fs/tmpfs casefold; "maybe" for FUSE, network and other
 * filesystems until a lookup shows which: fs/fs-view-fold.c) every name is
 * decided folded (fb_policy_decide_child_folded), a lookup, a removal or a
 * rename away succeeds only for an entry the host lists under exactly that
 * spelling (ENOENT otherwise: one scan of the directory per name the kernel
 * does not know yet), and a rename onto a name that reaches another entry
 * under another spelling gets EACCES; creating over one gets the host's
 * EEXIST.  So view paths are the host's spellings, and no spelling reaches
 * what a rule or a protected name keeps.
 *
 * Events.  Each operation fills an FbAccessEvent (fs/fs-event.h) with the
 * deciding rule and pushes it to the sink according to the log level:
 * mutations always, opens (at release) from FB_LOG_LEVEL_OPENS, lookups,
 * getattr, readdir, readlink, access, statfs and xattr reads at
 * FB_LOG_LEVEL_ALL; denials (EACCES, EROFS from the policy) always, and a
 * hidden name only when the host really holds something there.  Nothing is
 * pushed while a view lock is held.
 *
 * Bounds (everything a caller can make the view allocate):
 *   names FB_VIEW_NAME_MAX, view paths FB_VIEW_PATH_MAX, the longest the
 *   policy decides (a longer one gets ENAMETOOLONG: nothing is made, moved
 *   or looked up past it).  A rename that would move a directory's tree
 *   past it is refused with ENAMETOOLONG (the host tree is measured,
 *   fs-view-depth.c; EXDEV, as between filesystems, when it holds more than
 *   100,000 entries or changes while measured: `mv` then copies, name by
 *   checked name), logged as the view's own refusal (rule "fusebox",
 *   fusebox:path-too-long); so is a lookup past it in a host tree made
 *   deeper outside fusebox, which is followed down to the limit and no
 *   further.  Renames through one view go one at a time.  Symlink
 *   text FB_VIEW_SYMLINK_MAX, read/write sizes FB_VIEW_IO_MAX, one copy_file_range FB_VIEW_COPY_MAX, xattr names
 *   FB_VIEW_XATTR_NAME_MAX and values/lists FB_VIEW_XATTR_SIZE_MAX, a directory listing assembled in
 *   memory (only for directories with mount points or traversable ones)
 *   FB_VIEW_DIR_SNAPSHOT_MAX entries, symlinks followed by one walk
 *   FB_VIEW_WALK_MAX_LINKS.  Other directories are streamed from the host
 *   with a fixed buffer; the positions of listings without a handle are
 *   kept in a table of 1,024 per view, not in the nodes (fs-view-dir.c).
 *   Nodes live as long as someone (the kernel) holds them: one per
 *   looked-up view path, each at most FB_VIEW_NODE_BYTES whatever its
 *   depth (no path is stored); a view keeps at most
 *   FbViewOptions.node_max of them (FB_VIEW_NODES_MAX): past three quarters
 *   the FUSE adapter asks the kernel to forget its oldest names (they are
 *   freed at its FORGET), and past all of it a new name gets ENOMEM, logged
 *   as the view's refusal fusebox:too-many-nodes.  So a view's nodes take
 *   at most 512 MiB, 1 KiB each (about 700 bytes measured).
 *   Descriptors as under Descriptors
 *   (files a sandbox holds open: its view's share of the budget).
 *
 * Threads.  Every function may be called from any thread.  Locks: the view's
 * table lock (node table, parent/child links, decisions) is taken before a
 * node's extra lock (its open files, cache stamps and listings); a
 * directory handle has its own lock; the descriptor cache's
 * (fs-view-fd.c) is taken last, under either.  No
 * I/O, sink push or allocation-heavy work happens under the table lock.
 *
 * Errors are -errno, converted at the libc call.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "fs/fs-event.h"
#include "policy/policy.h"

G_BEGIN_DECLS

#define FB_VIEW_NAME_MAX 255
#define FB_VIEW_PATH_MAX 4096
#define FB_VIEW_SYMLINK_MAX 4095
#define FB_VIEW_IO_MAX (1024 * 1024)
#define FB_VIEW_COPY_MAX (64 * 1024 * 1024)
#define FB_VIEW_XATTR_NAME_MAX 255
#define FB_VIEW_XATTR_SIZE_MAX (64 * 1024)
#define FB_VIEW_DIR_SNAPSHOT_MAX (1024 * 1024)
#define FB_VIEW_WALK_MAX_LINKS 40
/* Memory (fs.h, Bounds): what one node costs the daemon at most (its struct,
 * name and table entries), and the most nodes one view keeps. */
#define FB_VIEW_NODE_BYTES 1024
#define FB_VIEW_NODES_MAX (512 * 1024)

typedef struct FbView FbView;
typedef struct FbViewNode FbViewNode;
typedef struct FbViewFile FbViewFile; /* an open file or directory */

/* Who asks: copied into every event.  For FUSE callers umask is 0 (the
 * kernel applied it already). */
typedef struct
{
  pid_t pid; /* 0 if unknown */
  uid_t uid;
  gid_t gid;
  mode_t umask;        /* applied to the mode of created objects */
  const char *comm;    /* NULL: read from /proc/PID/comm when an event needs it */
  const char *session; /* remote-API session id, NULL for FUSE */
  /* If not NULL: set by fb_view_lookup when its -ENOENT is the policy's
   * (a hidden name, whether the host holds it or not), which FUSE does not
   * let the kernel cache: every attempt is asked, and logged when the host
   * holds the name, again; and the kernel's cache does not tell a hidden
   * name that is there from one that is not (what timing still tells:
   * fb_view_emit_deferred). */
  bool *ret_hidden;
  /* The adapter's own request (its refresher, fs-fuse-warm.c), made for no
   * process: decided as any, not logged. */
  bool unlogged;
  /* If not NULL: fb_view_lookup keeps the record of a hidden name here
   * instead of pushing it, for fb_view_emit_deferred once the answer is
   * out (see there). */
  struct FbViewDeferred *deferred;
} FbViewCaller;

/* A lookup's record of a hidden name the host holds, made (time, caller,
 * its command's name and command) but not pushed yet.  Zero-filled before
 * the lookup. */
typedef struct FbViewDeferred
{
  FbAccessEvent ev;
  char *path;
  char comm[32];
  void *owner; /* FbViewOwners' reference, or NULL */
} FbViewDeferred;

/* An account of open files (fs.h, Descriptors), reference-counted. */
typedef struct FbViewFdAccount FbViewFdAccount;

typedef struct
{
  FbAccessSink *sink;       /* may be NULL: nothing is logged */
  FbLogLevel log_level;     /* default FB_LOG_LEVEL_OPENS */
  bool act_as_caller;       /* create as the caller (needs root); default: geteuid () == 0 */
  bool create_private_dirs; /* mkdir -p (0700) the host directories of private mounts, each when a
                             * lookup first reaches it (the root's at once); default true */
  /* More view paths shown as empty read-only directories, like /proc:
   * `fusebox mount` passes its own mount point, which the view would
   * otherwise reach on the host and enter again, endlessly.  Copied. */
  const char *const *blank_paths;
  /* Host objects no view path ever shows, whatever the policy: fusebox's
   * own state (the runs root, run directories, access logs), recognized by
   * st_dev/st_ino so that no alias shows them either (fs-view-state.c).
   * Absolute paths, read once by fb_view_new(); missing ones are skipped. */
  const char *const *hidden_paths;
  guint node_max; /* the most nodes kept (fs.h, Bounds); 0: FB_VIEW_NODES_MAX */
  /* What the sandbox opens through the FUSE connection is charged to this
   * account (a reference is taken); NULL: one of the view's own, without a
   * floor, a client of its own. */
  FbViewFdAccount *fd_account;
  /* Private sources' host directories live here, each under the name it
   * has in ${RUN}/private (fb_policy_private_dir_name), instead of where
   * the policy says: `serve` gives each of its sessions its own HOME and
   * /tmp.  NULL: the policy's.  Copied. */
  const char *private_root;
  /* The run directory, as a descriptor taken when it was made
   * (fb_run_get_dir_fd), and the path it was made at: private directories
   * below that path are made and opened from the descriptor a step at a
   * time, never through the path, which a sandbox may have redirected (a
   * --run-dir in a workspace whose parent another sandbox replaced with a
   * link).  -1: none, the path is used.  Duplicated; the path copied. */
  int private_anchor_fd;
  const char *private_anchor;
  /* Several commands share the view (may be NULL); borrowed, must outlive
   * the view. */
  const struct FbViewOwners *owners;
} FbViewOptions;

/* When several commands share one view (ipc/ipc-view-share.c), which one a
 * FUSE caller belongs to is asked of OWNER_OF with the caller's pid,
 * decided from the kernel's facts, when an event is pushed and when a
 * file whose close will be logged is opened (its opener may be gone by
 * the close).  It returns a reference, or NULL for a caller of no command;
 * the view passes it in FbAccessEvent.owner and drops it with UNREF.
 * FD_ACCOUNT_OF: the account of open files the caller's command is
 * charged to (each keeps its own floor, Descriptors), a new reference, or
 * NULL for the view's own.  Called on any thread, with no view lock
 * held. */
typedef struct FbViewOwners
{
  void *(*owner_of) (void *data, pid_t pid);
  void (*unref) (void *owner);
  FbViewFdAccount *(*fd_account_of) (void *data, pid_t pid);
  void *data;
} FbViewOwners;

void fb_view_options_init (FbViewOptions *options);

/* Opens every mount of fb_policy_get_mounts() (O_PATH).  A mount whose host
 * directory is missing (or a private one whose host path is NULL because the
 * policy was loaded without ${RUN}) shows as an empty read-only directory.
 * Fails with -errno when the root can't be opened or a private directory
 * can't be created. */
int fb_view_new (FbPolicy *policy, const FbViewOptions *options, FbView **ret_view);
/* What fb_view_new's error R means and what to do, for a message that
 * follows "can't open the policy's directories: " (free it): a source that
 * its path no longer leads to (-ESTALE, named in a warning), too many
 * directories on the ways to the sources (-E2BIG), or else strerror's text
 * and which directories it was about.  PRIVATE_DIR, where private sources
 * are made, may be NULL. */
char *fb_view_new_explain (int r, const char *private_dir);
FbView *fb_view_ref (FbView *view);
/* Nodes and files hold a reference to their view. */
void fb_view_unref (FbView *view);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbView, fb_view_unref)

FbPolicy *fb_view_get_policy (FbView *view);
FbLogLevel fb_view_get_log_level (FbView *view);
/* Number of live nodes besides those the view keeps for its life (the root,
 * mount points, synthetic directories): for tests and statistics. */
guint fb_view_count_nodes (FbView *view);
/* The most nodes VIEW keeps (FbViewOptions.node_max): past it a new name
 * gets ENOMEM; past three quarters of it the FUSE adapter asks the kernel
 * to forget the oldest names (fb_view_foreach_evictable). */
guint fb_view_get_node_max (FbView *view);

/* The process's descriptor budget (fs.h, Descriptors).  The first call
 * (or the first view) raises the soft RLIMIT_NOFILE to the hard one. */
typedef struct
{
  guint64 limit;  /* the soft RLIMIT_NOFILE it is computed from */
  guint64 hard;   /* the hard one */
  guint reserve;  /* left to everything but the views */
  guint dir_max;  /* directory descriptors cached, all views together */
  guint file_max; /* files and directories open for sandboxes, all views together */
  guint dirs;     /* cached now */
  guint files;    /* open now */
  guint floor;    /* files an account with a floor always may hold: FB_VIEW_FD_FLOOR */
  guint floors;   /* floors kept out of file_max: fb_view_fd_set_floors, as many as fit in half of it */
  /* accounts with a floor now */
  guint floors_taken;
  /* the rest of file_max, shared between clients above their floors */
  guint shared;
} FbViewFdBudget;
void fb_view_fd_budget (FbViewFdBudget *ret);
/* For tests: the budget as if RLIMIT_NOFILE were LIMIT (0: the real one). */
void fb_view_fd_budget_override (guint64 limit);

/* Files an account with a floor may always hold open: a command, its
 * loader and libraries and its locale files, a pipeline of a few. */
#define FB_VIEW_FD_FLOOR 64
/* Keep room for N floors (default 0: none); returns how many fit in
 * half of the files' budget now.  A limit lowered later keeps fewer. */
guint fb_view_fd_set_floors (guint n);
/* A new account for CLIENT (NULL: a client of its own), with a floor if
 * FLOOR: -ENFILE when every floor is taken. */
int fb_view_fd_account_new (const char *client, bool floor, FbViewFdAccount **ret_account);
FbViewFdAccount *fb_view_fd_account_ref (FbViewFdAccount *account);
/* The floor goes back with the last reference (a view and each file
 * charged to the account hold one). */
void fb_view_fd_account_unref (FbViewFdAccount *account);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbViewFdAccount, fb_view_fd_account_unref)
/* What ACCOUNT holds open now. */
guint fb_view_fd_account_held (FbViewFdAccount *account);
/* What VIEW holds now: cached directory descriptors, open files. */
void fb_view_fd_count (FbView *view, guint *ret_dirs, guint *ret_files);

/* --- nodes ---------------------------------------------------------------- */

FbViewNode *fb_view_get_root (FbView *view); /* a new reference */
/* The device number of the view's own FUSE mount on the host (`fusebox
 * mount`): wherever it is reached from inside the view (its parent renamed
 * since, so that the path blanked for it no longer leads there), it shows
 * blank, as /proc does, instead of the view serving its own mount through
 * itself, a worker per level, until every worker waits on itself.  Set
 * before the view serves. */
void fb_view_blank_own_mount (FbView *view, dev_t dev);
FbViewNode *fb_view_node_ref (FbViewNode *node);
void fb_view_node_unref (FbViewNode *node);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbViewNode, fb_view_node_unref)

/* The node's current view path (it changes when the node is renamed). */
char *fb_view_node_dup_path (FbViewNode *node);
void fb_view_node_get_decision (FbViewNode *node, FbPolicyDecision *ret_decision);
mode_t fb_view_node_get_type (FbViewNode *node); /* S_IFMT bits */
/* True for synthetic and blank (/proc, /sys, /dev) directories. */
bool fb_view_node_is_synthetic (FbViewNode *node);
/* Distinguishes nodes that reused an address (FUSE generation numbers). */
guint64 fb_view_node_get_generation (FbViewNode *node);

/* The kernel's lookup count, kept apart from references: the first
 * kernel_ref takes a reference that the forget bringing it to zero drops. */
void fb_view_node_kernel_ref (FbViewNode *node);
void fb_view_node_kernel_forget (FbViewNode *node, guint64 nlookup);
/* The kernel is gone (the session ended): forget every lookup count. */
void fb_view_drop_kernel_refs (FbView *view);

/* --- names ---------------------------------------------------------------- */

/* Push the record D holds (none: nothing), after the answer to the lookup
 * that made it.  A hidden name the host holds is logged, one it does not
 * hold is not, and that record's making and pushing took the daemon 8-12 µs
 * more before it answered: a sandbox timing two lookups told whether a
 * hidden .git was there.  Now the work before the answer is the same for
 * both (the caller's command name and command are asked either way), and
 * the push comes after. */
void fb_view_emit_deferred (FbView *view, FbViewDeferred *d);

/* NAME inside directory PARENT.  *ret_st (may be NULL) gets its attributes. */
int fb_view_lookup (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name,
                    FbViewNode **ret_node, struct stat *ret_st);

typedef enum
{
  FB_VIEW_WALK_NOFOLLOW = 1 << 0, /* don't follow a symlink in the last component */
} FbViewWalkFlags;

/* An absolute view path to a node, one component at a time through lookup.
 * Empty and "." components are skipped, ".." goes to the parent *view* path
 * (at "/" it stays), symlinks are resolved inside the view (absolute ones
 * from the view's root), at most FB_VIEW_WALK_MAX_LINKS of them (ELOOP).
 * A relative path is EINVAL.  Logs like the lookups it makes. */
int fb_view_walk (FbView *view, const FbViewCaller *caller, const char *path, FbViewWalkFlags flags,
                  FbViewNode **ret_node);

/* --- attributes ----------------------------------------------------------- */

int fb_view_getattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, struct stat *ret_st);
/* What a directory's stat may not tell about the names in it, hidden ones
 * included: st_nlink (2 + subdirectories), st_size and st_blocks (which
 * grow with the names on tmpfs, btrfs, and past a block everywhere).  Every
 * directory shows st_nlink 1, 4096 bytes and 8 blocks; others are left as
 * they are.  fb_view_getattr applies it; so does the FUSE adapter to every
 * attribute it gives the kernel. */
void fb_view_stat_mask_dir (struct stat *st);

typedef enum
{
  FB_VIEW_SET_MODE = 1 << 0,
  FB_VIEW_SET_UID = 1 << 1,
  FB_VIEW_SET_GID = 1 << 2,
  FB_VIEW_SET_SIZE = 1 << 3,
  FB_VIEW_SET_ATIME = 1 << 4,
  FB_VIEW_SET_MTIME = 1 << 5,
  FB_VIEW_SET_ATIME_NOW = 1 << 6,
  FB_VIEW_SET_MTIME_NOW = 1 << 7,
} FbViewSetFlags;

typedef struct
{
  FbViewSetFlags valid;
  mode_t mode;
  uid_t uid;
  gid_t gid;
  off_t size;
  struct timespec atime;
  struct timespec mtime;
} FbViewSetattr;

/* chmod, chown (only as a no-op), truncate, utimens.  FILE (may be NULL) is
 * an open file of NODE to use for truncate (ftruncate). */
int fb_view_setattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, FbViewFile *file,
                     const FbViewSetattr *attr, struct stat *ret_st);
/* F_OK, R_OK, W_OK, X_OK: the policy's answer, then the host's for the daemon */
int fb_view_access (FbView *view, const FbViewCaller *caller, FbViewNode *node, int mask);
int fb_view_readlink (FbView *view, const FbViewCaller *caller, FbViewNode *node, char **ret_text);
int fb_view_statfs (FbView *view, const FbViewCaller *caller, FbViewNode *node, struct statvfs *ret_st);

/* --- creating and removing names ------------------------------------------ */

/* For each: *ret_node and *ret_st (both may be NULL) describe the new name. */
int fb_view_mkdir (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, mode_t mode,
                   FbViewNode **ret_node, struct stat *ret_st);
/* Regular files, FIFOs and sockets; devices get EPERM. */
int fb_view_mknod (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, mode_t mode,
                   dev_t rdev, FbViewNode **ret_node, struct stat *ret_st);
int fb_view_symlink (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, const char *target,
                     FbViewNode **ret_node, struct stat *ret_st);
/* A hard link to NODE (not a directory) as NEWPARENT/NEWNAME. */
int fb_view_link (FbView *view, const FbViewCaller *caller, FbViewNode *node, FbViewNode *newparent,
                  const char *newname, FbViewNode **ret_node, struct stat *ret_st);
int fb_view_unlink (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name);
int fb_view_rmdir (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name);
/* flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE */
int fb_view_rename (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name,
                    FbViewNode *newparent, const char *newname, unsigned int flags);

/* --- open files ----------------------------------------------------------- */

/* FLAGS as open(2); O_CREAT/O_EXCL/O_NOFOLLOW are ignored (use create).
 * *ret_keep_cache (may be NULL) is true when the host file's size and mtime
 * are the ones seen at this node's previous open: cached pages still hold. */
int fb_view_open (FbView *view, const FbViewCaller *caller, FbViewNode *node, int flags, FbViewFile **ret_file,
                  bool *ret_keep_cache);
/* Create and open NAME in PARENT (O_CREAT, honouring O_EXCL). */
int fb_view_create (FbView *view, const FbViewCaller *caller, FbViewNode *parent, const char *name, int flags,
                    mode_t mode, FbViewFile **ret_file, FbViewNode **ret_node, struct stat *ret_st);
/* SIZE above FB_VIEW_IO_MAX is clamped. */
gssize fb_view_read (FbView *view, FbViewFile *file, void *buf, gsize size, off_t offset);
gssize fb_view_write (FbView *view, FbViewFile *file, const void *buf, gsize size, off_t offset);
/* Write through a caller-supplied transfer (the FUSE adapter copies the
 * request's buffer with fuse_buf_copy; splicing is off, fs/fs-fuse.c): the
 * view checks that FILE is open for writing, calls FUNC with the host
 * descriptor, and counts what it reports. */
typedef gssize (*FbViewWriteFunc) (int host_fd, off_t offset, gpointer user_data);
gssize fb_view_write_with (FbView *view, FbViewFile *file, off_t offset, FbViewWriteFunc func, gpointer user_data);
int fb_view_flush (FbView *view, FbViewFile *file);
int fb_view_fsync (FbView *view, FbViewFile *file, bool datasync);
int fb_view_fallocate (FbView *view, FbViewFile *file, int mode, off_t offset, off_t length);
off_t fb_view_lseek (FbView *view, FbViewFile *file, off_t offset, int whence);
/* LENGTH above FB_VIEW_COPY_MAX is clamped; FLAGS must be 0. */
gssize fb_view_copy_file_range (FbView *view, FbViewFile *in, off_t offset_in, FbViewFile *out, off_t offset_out,
                                gsize length, unsigned int flags);
FbViewNode *fb_view_file_get_node (FbViewFile *file); /* borrowed */
bool fb_view_file_is_dir (FbViewFile *file);
int fb_view_file_fstat (FbView *view, FbViewFile *file, struct stat *ret_st);
/* Logs the "close" event with the bytes read and written, closes, frees. */
void fb_view_release (FbView *view, FbViewFile *file);

/* --- directories ---------------------------------------------------------- */

int fb_view_opendir (FbView *view, const FbViewCaller *caller, FbViewNode *node, FbViewFile **ret_dir,
                     bool *ret_keep_cache);

typedef struct
{
  const char *name;
  ino_t ino;
  unsigned char type;    /* DT_* */
  off_t next_offset;     /* pass it back to continue after this entry: the view's own
                          * offset (how many entries it showed up to this one), never the host's */
  FbViewNode *node;      /* plus mode: the entry's node (borrowed; ref it to keep it), NULL for "." and ".." and
                          * an entry given without attributes */
  const struct stat *st; /* plus mode: its attributes (without a node: st_ino and the type only) */
} FbViewDirEntry;

/* Return false when the entry did not fit: it is offered again next time. */
typedef bool (*FbViewDirFunc) (const FbViewDirEntry *entry, gpointer user_data);

/* Entries after OFFSET (0: from the start), hidden names left out.  With
 * PLUS, entries are looked up (node and attributes): directories always,
 * other entries while callers stat what they list (fs-view-dir.c,
 * "Attributes"); the others come as without PLUS. */
int fb_view_readdir (FbView *view, FbViewFile *dir, off_t offset, bool plus, FbViewDirFunc func, gpointer user_data);
void fb_view_releasedir (FbView *view, FbViewFile *dir);
/* The same without an open directory: entries of NODE after OFFSET (the
 * offsets fb_view_readdir hands out are valid here too).  The policy is
 * asked at every call; a call at offset 0 is logged as a listing. */
int fb_view_readdir_at (FbView *view, const FbViewCaller *caller, FbViewNode *node, off_t offset, bool plus,
                        FbViewDirFunc func, gpointer user_data);
int fb_view_fsyncdir_at (FbView *view, FbViewNode *node, bool datasync);

/* --- extended attributes -------------------------------------------------- */

/* SIZE 0: returns the size needed.  Sizes are clamped to FB_VIEW_XATTR_SIZE_MAX. */
gssize fb_view_getxattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, const char *name, void *buf,
                         gsize size);
gssize fb_view_listxattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, char *buf, gsize size);
int fb_view_setxattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, const char *name, const void *value,
                      gsize size, int flags);
int fb_view_removexattr (FbView *view, const FbViewCaller *caller, FbViewNode *node, const char *name);

/* --- changes ---------------------------------------------------------------- */

/* Every successful operation that changes a host object (write, truncate and
 * every setattr, fallocate, copy_file_range, create, mknod, mkdir, symlink,
 * link, unlink, rmdir, rename, setxattr, removexattr) is reported,
 * process-wide, to the listeners of every view (fs/fs-view-notify.c): the
 * FUSE adapter uses it to drop what its kernel caches about the object, so
 * that a change made through another view (the remote API, another
 * sandbox) or another name of the same inode shows at once. */
typedef enum
{
  FB_VIEW_CHANGE_DATA = 1 << 0,   /* contents (and size, mtime) */
  FB_VIEW_CHANGE_ATTR = 1 << 1,   /* attributes only (mode, times, link count, xattrs) */
  FB_VIEW_CHANGE_NAME = 1 << 2,   /* NAME in the directory (parent_dev, parent_ino) came, went or moved */
  FB_VIEW_CHANGE_ALL = 1 << 3,    /* anything may have changed (the host watcher lost events) */
  FB_VIEW_CHANGE_MOUNTS = 1 << 4, /* the host's mount table changed: a mount came, went or moved */
} FbViewChangeWhat;

typedef struct
{
  guint what; /* FbViewChangeWhat */
  dev_t dev;  /* the object (0, 0 when only a name changed) */
  ino_t ino;
  dev_t parent_dev; /* FB_VIEW_CHANGE_NAME */
  ino_t parent_ino;
  const char *name;
} FbViewChange;

/* Called on the thread that made the change, with the registry lock held:
 * look up, queue, return; never block or call back into a view operation.
 * LISTENER_VIEW is the view it was registered for; ORIGIN the view (and
 * ORIGIN_NODE the node: the object, or for a name its directory) the
 * change was made through. */
typedef void (*FbViewChangeFunc) (FbView *listener_view, FbView *origin, FbViewNode *origin_node,
                                  const FbViewChange *change, gpointer user_data);
void fb_view_listen (FbView *view, FbViewChangeFunc func, gpointer user_data);
/* From inside a listener: run FUNC (then DESTROY) on the same thread once
 * every listener has run and the registry lock is released, before the
 * view operation returns -- a listener that delivers on another thread
 * waits there (bounded) for its delivery, so that the caller's next request
 * sees the change. */
void fb_view_change_defer (GFunc func, gpointer data, GDestroyNotify destroy);
/* After it returns, FUNC is not running and won't be called again. */
void fb_view_unlisten (FbView *view, FbViewChangeFunc func, gpointer user_data);
/* Every node of VIEW showing host object (DEV, INO), for a
 * listener: calls FUNC under the view's table lock. */
typedef void (*FbViewNodeFunc) (FbViewNode *node, gpointer user_data);
void fb_view_find_object (FbView *view, dev_t dev, ino_t ino, FbViewNodeFunc func, gpointer user_data);
/* The kernel's lookup count, for a listener (zero: the kernel does not know it). */
guint64 fb_view_node_get_kernel_count (FbViewNode *node);
/* Every node the kernel knows (lookup count above zero), with its parent
 * (NULL for the root) and name: calls FUNC under the view's table lock. */
typedef void (*FbViewKnownFunc) (FbViewNode *node, FbViewNode *parent, const char *name, gpointer user_data);
void fb_view_foreach_known (FbView *view, FbViewKnownFunc func, gpointer user_data);
/* Up to MAX nodes the kernel knows that it could forget without harm, the
 * oldest first: host names with nothing known below them, neither mount
 * points nor kept for the view's life.  Calls FUNC under the table lock. */
void fb_view_foreach_evictable (FbView *view, guint max, FbViewKnownFunc func, gpointer user_data);

/* --- changes made on the host by other processes (fs/fs-watch.c) ----------- */

/* Start the process-wide fanotify watcher (once); false when it can't run:
 * FUSEBOX_NO_FANOTIFY=1, fanotify_init failed (before Linux 5.13 it needs
 * CAP_SYS_ADMIN).  Once it runs, every view marks each local host directory
 * it holds a node for (an inode mark, fs-watch.c), and the watcher reports
 * changes made there by other processes to the change listeners (origin
 * NULL; FB_VIEW_CHANGE_ALL when the kernel's queue overflowed).
 * fb_watch_view() marks the directories VIEW has nodes for already. */
bool fb_watch_start (void);
bool fb_watch_active (void);
void fb_watch_view (FbView *view);
/* For a process done serving every view (`fusebox run` once its sandbox's
 * connection has ended): stop watching for good.  fb_watch_active() is
 * false from here on (short timeouts, no new marks) and every mark goes at
 * once, so that the process's exit does not wait for the kernel to free
 * them (fs-watch.c "Stopping"). */
void fb_watch_stop (void);
/* The number of fanotify events of other processes the watcher read, and
 * overflows (a diagnostic). */
guint64 fb_watch_events_read (void);
/* Are host changes to NODE (ST: its current attributes) reported by the
 * watcher?  Synthetic nodes (static) count as reported. */
bool fb_view_node_watched (FbViewNode *node, const struct stat *st);

/* --- hosts that fold names (fs/fs-view-fold.c) ----------------------------- */

typedef enum
{
  FB_VIEW_FOLD_NO,    /* names match byte for byte */
  FB_VIEW_FOLD_MAYBE, /* a filesystem that may fold (FUSE, NFS, SMB, NTFS, XFS, ...), not known yet */
  FB_VIEW_FOLD_YES,   /* the host resolves names case-insensitively here */
} FbViewFold;

/* Does the host fold names in directory DIR_FD (any descriptor of it,
 * O_PATH too)?  From its filesystem type and, on ext4, f2fs and tmpfs, its
 * FS_CASEFOLD_FL.  *ret_fstype (may be NULL): the type's name ("vfat",
 * "fuse", "unknown"). */
FbViewFold fb_view_fold_detect (int dir_fd, const char **ret_fstype);
/* Settle MAYBE by trying NAME (a name DIR_FD resolves, with ASCII
 * letters) and its other case: YES when either reaches something DIR_FD
 * does not list under that spelling; NO when both are listed, or NAME is
 * and the other reaches nothing (only where ABSENCE_PROVES: not on a
 * server's filesystem); MAYBE when it can't tell. */
FbViewFold fb_view_fold_probe (int dir_fd, const char *name, bool absence_proves);
/* Does DIR_FD list NAME under exactly that spelling?  1 or 0, or -errno. */
int fb_view_fold_listed (int dir_fd, const char *name);

/* --- the FUSE adapter (fs/fs-fuse.c) --------------------------------------- */

typedef struct FbFuse FbFuse;

/* Ids across a user namespace.  A sandbox's FUSE connection belongs to its
 * user namespace: the kernel puts the caller's ids *in that namespace* in
 * each request and reads the owners we return in it.  When the namespace
 * maps the daemon's user to other ids (`fusebox run --uid/--gid`), ids must
 * be translated both ways, or a request from inside uid 1000 would create
 * host files owned by host uid 1000 (another user), the caller's own files
 * would look foreign inside, and a file of host user 1000 would look like
 * the sandbox user's own (with default_permissions, its owner's rights).
 * With ENABLED:
 *  - a request's inside_uid/inside_gid reach the view as host_uid/host_gid
 *    (act_as_caller then creates as the host user); an id the namespace
 *    does not map can't come from inside, and becomes the overflow id;
 *  - returned attributes show host_uid/host_gid as inside_uid/inside_gid
 *    and every other owner as overflow_uid/overflow_gid, as the kernel shows
 *    an unmapped id: the only ids the namespace maps are the caller's;
 *  - a chown's inside ids are translated like a request's, any other id
 *    becomes (uid_t) -1 so the view sees a change of owner and refuses it.
 * overflow_uid/gid 0: /proc/sys/kernel/overflow{u,g}id, read by
 * fb_fuse_new() (65534 when unreadable). */
typedef struct
{
  bool enabled;
  uid_t inside_uid, host_uid, overflow_uid;
  gid_t inside_gid, host_gid, overflow_gid;
} FbFuseIdMap;

/* The translations of FbFuseIdMap (identity when disabled), for the
 * adapter and its tests. */
uid_t fb_fuse_id_map_uid_to_host (const FbFuseIdMap *map, uid_t inside);
gid_t fb_fuse_id_map_gid_to_host (const FbFuseIdMap *map, gid_t inside);
void fb_fuse_id_map_attr (const FbFuseIdMap *map, struct stat *st);

typedef struct
{
  /* Kernel cache lifetimes in seconds.  The policy is static during a run,
   * so these only bound how long a change made on the host by someone else
   * (not through any view of this process, and not seen by the host
   * watcher) takes to show: a new or removed name after entry_timeout
   * (negative_timeout for names that did not exist), new attributes after
   * attr_timeout.  Changes made through a view show at once.  Defaults:
   * FB_FUSE_TIMEOUT_AUTO for all three. */
  double entry_timeout;
  double attr_timeout;
  double negative_timeout;
  guint max_threads;  /* FUSE worker threads; default 16 */
  bool allow_other;   /* let other users in (needs root or user_allow_other); default: geteuid () == 0 */
  bool auto_unmount;  /* fusermount3 unmounts if the daemon dies (the root's attributes are then never cached,
                         so that it sees the death); default true */
  const char *fsname; /* shown in /proc/mounts; default "fusebox" */
  FbFuseIdMap id_map; /* default: disabled (ids pass through) */
} FbFuseOptions;

void fb_fuse_options_init (FbFuseOptions *options);

/* FB_FUSE_TIMEOUT_AUTO: FB_FUSE_TIMEOUT_COHERENT for objects whose host
 * changes the watcher reports (fb_view_node_watched), and for absences in
 * a directory it watches; FB_FUSE_TIMEOUT_SHORT elsewhere. */
#define FB_FUSE_TIMEOUT_AUTO (-1.0)
#define FB_FUSE_TIMEOUT_COHERENT 600.0
#define FB_FUSE_TIMEOUT_SHORT 2.0

/* The session over VIEW (which it references). */
int fb_fuse_new (FbView *view, const FbFuseOptions *options, FbFuse **ret_fuse);
/* Mount at MOUNTPOINT (a directory, its canonical path: absolute, without
 * links, "." or "..") with default_permissions (and allow_other when
 * asked).  A mount that landed elsewhere (a link was put on the way) is
 * taken off again before it serves anything, and -ESTALE returned
 * (-EBUSY when it could not be: said, with how to remove it).  Also
 * accepts "/dev/fd/N". */
int fb_fuse_mount (FbFuse *fuse, const char *mountpoint);
/* Serve an already-mounted /dev/fuse descriptor (the launcher opened
 * /dev/fuse and mounted it inside the sandbox with the options from
 * fb_fuse_kernel_mount_options()).  Takes ownership of FD. */
int fb_fuse_serve_fd (FbFuse *fuse, int fd);
/* Detach the mount of device DEV at AT: AT reached without following a
 * link, found to be a mount's root of device DEV and (SOURCE not NULL) to
 * carry the tag SOURCE, and unmounted through that descriptor, never by
 * path again (fusermount3 by path without the privilege).  -ESTALE when
 * AT is not that mount. */
int fb_fuse_take_off (const char *at, const char *source, dev_t dev);
/* The mount point's parent directory (an O_PATH descriptor), reached
 * without following a link and found to hold, at a name (*RET_NAME), the
 * root of the mount of device DEV that carries the tag SOURCE (not
 * checked when NULL): MOUNTPOINT's, or where mountinfo shows that mount
 * when it was moved; -errno, -ESTALE when
 * none does.  A mount point can't be renamed or removed, but its parent
 * can be moved, and with it the mount: fb_fuse_take_off_under(PARENT,
 * NAME, DEV) finds it there whatever its path has become (however long),
 * and detaches it as fb_fuse_take_off does. */
int fb_fuse_hold_parent (const char *mountpoint, const char *source, dev_t dev, char **ret_name);
int fb_fuse_take_off_under (int parent, const char *name, const char *source, dev_t dev);
/* A mount by path carries a random tag as its source (mountinfo's), which
 * finds it wherever it was moved to.  The tag of FUSE's mount (NULL: not
 * mounted by path); the device number of the mount with SOURCE (0: none);
 * and every mount with SOURCE and device DEV taken off through
 * fb_fuse_take_off (0 when none is left). */
/* mountinfo's octal escapes (\040 for a space...) undone in place. */
void fb_fuse_mountinfo_unescape (char *s);
const char *fb_fuse_get_mount_source (FbFuse *fuse);
dev_t fb_fuse_tagged_dev (const char *source);
/* Whether a mount of ours with SOURCE (its tag) and device DEV is still
 * in mountinfo, wherever it is now. */
bool fb_fuse_tagged_present (const char *source, dev_t dev);
/* The device number of FUSE's mount (0: unknown). */
dev_t fb_fuse_get_mount_dev (FbFuse *fuse);
int fb_fuse_take_off_tagged (const char *source, dev_t dev);
/* Both, as a stop does: through PARENT (fb_fuse_hold_parent; -1: none
 * held), then by the tag.  0 when none of ours is left. */
int fb_fuse_take_off_ours (int parent, const char *name, const char *source, dev_t dev);
/* mount(2) data for mounting a /dev/fuse descriptor FD by hand:
 * "fd=N,rootmode=40000,user_id=U,group_id=G,default_permissions[,allow_other]" */
char *fb_fuse_kernel_mount_options (int fd, uid_t uid, gid_t gid, bool allow_other);
/* Serve on the calling thread (worker threads are started) until the
 * filesystem is unmounted or fb_fuse_stop() is called. */
int fb_fuse_run (FbFuse *fuse);
/* Serve on a new thread (signals blocked there); DONE runs on that thread
 * when serving has ended, with the result of fb_fuse_run(). */
typedef void (*FbFuseDoneFunc) (int result, gpointer user_data);
int fb_fuse_start (FbFuse *fuse, FbFuseDoneFunc done, gpointer user_data);
/* Wait for the thread of fb_fuse_start(); returns its result. */
int fb_fuse_join (FbFuse *fuse);
/* Ask serving to end: unmount (lazily) a mount made by fb_fuse_mount().
 * The workers keep answering until the kernel ends the connection (at once,
 * or when the last file open in the detached mount is closed);
 * fb_fuse_abort() ends it earlier.  Callable from any thread except a FUSE
 * worker.  Files the kernel never released are released (and logged) by
 * fb_fuse_free(). */
void fb_fuse_stop (FbFuse *fuse);
/* End serving now, even with files open in a detached mount: through
 * /sys/fs/fuse/connections/N/abort when fusectl is mounted, else by waking
 * the FUSE threads (a real-time signal, SIGRTMIN+4, with a no-op handler)
 * so they see the session has exited; fb_fuse_free() then closes the
 * device and the kernel fails every later request with ENOTCONN.  A wake
 * can race with a worker about to block: call again until serving ends. */
int fb_fuse_abort (FbFuse *fuse);
/* Keep the attributes of the directories the kernel lists valid for the
 * next command of a view that outlives its commands (fs-fuse-warm.c).  SOCK
 * (a SOCK_SEQPACKET socket) reaches the refresher, the process of PIDFD
 * (a pidfd taken while it could not have been reaped), which stats each
 * path a message holds through the mount: view paths relative to the root
 * (the root itself is ""), each NUL-terminated, FB_FUSE_WARM_MSG_MAX bytes
 * at most; it exits when SOCK is shut down.  Its requests, while PIDFD
 * shows it is there, are not logged.  Owns both descriptors from here.  At
 * most once; serving may have started. */
#define FB_FUSE_WARM_MSG_MAX (64 * 1024)
int fb_fuse_keep_warm (FbFuse *fuse, int sock, int pidfd);
/* The view's last command has ended: refresh what is queued now, without
 * waiting for listings to be quiet.  From the owner's thread. */
void fb_fuse_warm_flush (FbFuse *fuse);
/* Shut the refresher's socket down and end the thread that feeds it:
 * called by fb_fuse_stop, fb_fuse_abort and fb_fuse_free (the refresher is
 * in the mount's namespace, whose end ends the connection); from any
 * thread but a FUSE worker, more than once. */
void fb_fuse_warm_stop (FbFuse *fuse);
/* Unmount if still mounted and free.  Call after serving has ended. */
void fb_fuse_free (FbFuse *fuse);
/* The caching mode, once mounted: "coherent" (host changes are watched;
 * long timeouts on the filesystems covered, short elsewhere), "short"
 * (no watcher: short timeouts) or "fixed" (the options' timeouts). */
const char *fb_fuse_cache_mode (FbFuse *fuse);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbFuse, fb_fuse_free)

G_END_DECLS
