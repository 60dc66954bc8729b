/* fusebox — directories whose host folds names.
 *
 * vfat and exfat, ext4, f2fs and tmpfs directories with casefold (+F), SMB
 * shares, HFS+ and case-insensitive FUSE or network filesystems resolve
 * ".GIT", "SECRET-DENY.TXT" or "secret-deny.txt." to the entry ".git" or
 * "secret-deny.txt" on disk (vfat also resolves its 8.3 alias
 * "SECRET~1.TXT"), while the policy matches bytes.  Without care a variant
 * spelling reads and writes what a rule denies or hides, and a name made
 * through the view (".GIT" where no ".git" is yet) later acts as a protected
 * one on the host.  So, per host directory node (cached in NodeDir.fold, set
 * once):
 *  - whether the host folds there: the filesystem type (vfat and exfat
 *    always; ext4, f2fs and tmpfs by the directory's FS_CASEFOLD_FL, and
 *    ext4 and tmpfs never on a kernel built without casefold; btrfs,
 *    squashfs, erofs, ramfs never), and for every other type -- FUSE, NFS,
 *    SMB (a Samba server may or may not), NTFS (ntfs3's nocase), HFS+ (HFSX
 *    is case-sensitive), XFS (ascii-ci), ZFS, overlay, 9p, ... -- "maybe"
 *    until a lookup of a name with ASCII letters that the host resolves
 *    settles it (fb_view_fold_probe): by the listing, the name or its other
 *    case reaching something not listed under it means yes, both listed
 *    means no, and the other case reaching nothing means no except on a
 *    server's filesystem, whose kernel may remember that spelling's absence
 *    from before.  "Maybe" counts as folding for everything below.
 *  - in a directory that folds (or may), the policy decides every name
 *    folded (fb_policy_decide_child_folded: the narrower of the name's own
 *    decision and those of every rule spelling, protected name and glob that
 *    folds equal to it), so ".GIT", "Absent-Secret" can't be made and
 *    "SECRET-DENY.TXT" is denied before the host is asked;
 *  - a lookup succeeds only for an entry the host lists under exactly that
 *    spelling (view_dir_lists: the directory's names, read with one scan
 *    and kept in its node while its mtime and ctime are unchanged; only in
 *    folding directories and only for a name the kernel does not know
 *    yet; readdirplus entries come from the listing and need none), so
 *    every view path is the host's own spelling and existing files are
 *    decided under their real names;
 *  - removing a name, or renaming one away, needs the same exact entry;
 *    renaming onto a name that reaches another entry under another spelling
 *    is refused (EACCES) -- the host would replace that entry -- and so is
 *    anything made over one: the host answers EEXIST itself (mkdir, link,
 *    symlink, mknod, and create, which is O_EXCL on the host).
 * Refusals of a spelling are logged as the view's own decisions, with a
 * why that says so (VIEW_REFUSAL_FOLD_SPELLING, VIEW_REFUSAL_FOLD_TAKEN).
 * On a directory that does not fold the cost is, the first time a name is
 * decided in it, one statfs per filesystem (see NodeDir.fold below) and on
 * f2fs, and on ext4 and tmpfs where the kernel can fold them
 * (kernel_folds), one ioctl (and an open, unless it is being listed).
 */
#include "fs/fs-private.h"

#include <dirent.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/vfs.h>

/* --- what the host does ------------------------------------------------------ */

typedef enum
{
  KIND_NO,    /* never folds */
  KIND_YES,   /* always folds */
  KIND_FLAG,  /* folds in directories with FS_CASEFOLD_FL */
  KIND_MAYBE, /* may fold: probe */
  /* may fold, in a server (FUSE, NFS, SMB, 9p, Ceph): the kernel keeps a
   * spelling's absence apart from the server's folding, so an absence
   * proves nothing (fb_view_fold_probe) */
  KIND_MAYBE_SERVER,
} TypeKind;

static const struct
{
  unsigned long magic;
  const char *name;
  TypeKind kind;
  bool sysfs_says; /* KIND_FLAG: /sys/fs/NAME/features tells whether the kernel can fold */
} fs_types[] = {
  { 0x4d44, "vfat", KIND_YES },              /* MSDOS_SUPER_MAGIC: vfat and msdos */
  { 0x2011bab0, "exfat", KIND_YES },         /* EXFAT_SUPER_MAGIC */
  { 0xef53, "ext4", KIND_FLAG, true },       /* EXT4_SUPER_MAGIC (ext2, ext3) */
  { 0xf2f52010, "f2fs", KIND_FLAG },         /* F2FS_SUPER_MAGIC */
  { 0x01021994, "tmpfs", KIND_FLAG, true },  /* TMPFS_MAGIC (casefold since Linux 6.13) */
  { 0x9123683e, "btrfs", KIND_NO },          /* BTRFS_SUPER_MAGIC */
  { 0x73717368, "squashfs", KIND_NO },       /* SQUASHFS_MAGIC */
  { 0xe0f5e1e2, "erofs", KIND_NO },          /* EROFS_SUPER_MAGIC_V1 */
  { 0x858458f6, "ramfs", KIND_NO },          /* RAMFS_MAGIC */
  { 0x65735546, "fuse", KIND_MAYBE_SERVER }, /* FUSE_SUPER_MAGIC */
  { 0xff534d42, "cifs", KIND_MAYBE_SERVER }, /* CIFS_SUPER_MAGIC */
  { 0xfe534d42, "smb2", KIND_MAYBE_SERVER }, /* SMB2_SUPER_MAGIC */
  { 0x517b, "smb", KIND_MAYBE_SERVER },      /* SMB_SUPER_MAGIC */
  { 0x5346544e, "ntfs", KIND_MAYBE },        /* NTFS_SB_MAGIC */
  { 0x7366746e, "ntfs3", KIND_MAYBE },       /* ntfs3: case-insensitive with nocase */
  { 0x482b, "hfsplus", KIND_MAYBE },         /* HFSPLUS_SUPER_MAGIC (HFSX is case-sensitive) */
  { 0x4244, "hfs", KIND_MAYBE },             /* HFS_SUPER_MAGIC */
  { 0x6969, "nfs", KIND_MAYBE_SERVER },      /* NFS_SUPER_MAGIC */
  { 0x01021997, "9p", KIND_MAYBE_SERVER },   /* V9FS_MAGIC */
  { 0x00c36400, "ceph", KIND_MAYBE_SERVER }, /* CEPH_SUPER_MAGIC */
  { 0x58465342, "xfs", KIND_MAYBE },         /* XFS_SUPER_MAGIC (ascii-ci) */
  { 0x2fc12fc1, "zfs", KIND_MAYBE },         /* ZFS (casesensitivity=insensitive) */
  { 0xca451a4e, "bcachefs", KIND_MAYBE },    /* BCACHEFS_SUPER_MAGIC (casefold) */
  { 0x794c7630, "overlay", KIND_MAYBE },     /* OVERLAYFS_SUPER_MAGIC: its layers may fold */
  { 0x9660, "iso9660", KIND_MAYBE },         /* ISOFS_SUPER_MAGIC (check=relaxed) */
  { 0x3153464a, "jfs", KIND_MAYBE },         /* JFS_SUPER_MAGIC (OS/2 mode) */
};

/* Can the running kernel fold names on the filesystems of fs_types[I] at
 * all?  ext4's and tmpfs's casefold is a build option (CONFIG_UNICODE).  A
 * kernel built with it lists a "casefold" feature in /sys/fs/ext4/features
 * (every kernel fusebox runs on: openat2 came later) or
 * /sys/fs/tmpfs/features (with tmpfs's casefold itself, Linux 6.13).  One
 * built without it has no directory of that type that folds: ext4 refuses
 * to mount a filesystem with the casefold feature, tmpfs the casefold
 * option, and neither folds without the encoding only that option loads.
 * So only a features directory that sysfs itself serves, without that
 * file, says no; anything else -- no /sys, a /sys/fs masked by another
 * mount, a tmpfs older than its features directory -- says yes, and every
 * directory's flags are read.  The answer is the kernel's: learned once. */
static bool
kernel_folds (guint i)
{
  static gint known[G_N_ELEMENTS (fs_types)]; /* 0 not asked, 1 no, 2 yes */
  g_autofree char *dir = NULL, *file = NULL;
  struct statfs sfs;
  struct stat st;
  bool no;
  gint v = g_atomic_int_get (&known[i]);

  if (!fs_types[i].sysfs_says)
    return true;
  if (v != 0)
    return v == 2;
  dir = g_strdup_printf ("/sys/fs/%s/features", fs_types[i].name);
  file = g_strdup_printf ("%s/casefold", dir);
  no = statfs (dir, &sfs) == 0 && (unsigned long)(unsigned int)sfs.f_type == SYSFS_MAGIC && stat (dir, &st) == 0 &&
       S_ISDIR (st.st_mode) && lstat (file, &st) < 0 && errno == ENOENT;
  g_atomic_int_set (&known[i], no ? 1 : 2);
  return !no;
}

/* What the filesystem of DIR_FD does (a statfs); KIND_MAYBE when unknown. */
static TypeKind
fs_kind (int dir_fd, const char **ret_fstype)
{
  struct statfs sfs;
  TypeKind kind = KIND_MAYBE;
  const char *name = "unknown";

  if (fstatfs (dir_fd, &sfs) == 0)
    for (guint i = 0; i < G_N_ELEMENTS (fs_types); i++)
      if ((unsigned long)(unsigned int)sfs.f_type == fs_types[i].magic)
        {
          kind = fs_types[i].kind == KIND_FLAG && !kernel_folds (i) ? KIND_NO : fs_types[i].kind;
          name = fs_types[i].name;
        }
  if (ret_fstype != NULL)
    *ret_fstype = name;
  return kind;
}

/* Whether DIR_FD, on a filesystem of KIND, folds; READABLE: DIR_FD is open
 * for reading already. */
static FbViewFold
kind_fold (TypeKind kind, int dir_fd, bool readable)
{
  switch (kind)
    {
      case KIND_NO:
        return FB_VIEW_FOLD_NO;
      case KIND_YES:
        return FB_VIEW_FOLD_YES;
      case KIND_MAYBE:
      case KIND_MAYBE_SERVER:
        return FB_VIEW_FOLD_MAYBE;
      case KIND_FLAG:
        {
          /* FS_IOC_GETFLAGS needs a descriptor opened for reading; O_PATH
           * is refused with EBADF */
          _fb_cleanup_fd_ int fd =
            readable ? -1 : openat (dir_fd, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
          unsigned int flags = 0;

          if ((!readable && fd < 0) || ioctl (readable ? dir_fd : fd, FS_IOC_GETFLAGS, &flags) < 0)
            return FB_VIEW_FOLD_MAYBE;
          return (flags & FS_CASEFOLD_FL) ? FB_VIEW_FOLD_YES : FB_VIEW_FOLD_NO;
        }
    }
  return FB_VIEW_FOLD_MAYBE;
}

FbViewFold
fb_view_fold_detect (int dir_fd, const char **ret_fstype)
{
  return kind_fold (fs_kind (dir_fd, ret_fstype), dir_fd, false);
}

/* Call FN with each name DIR_FD lists, until it returns false.  0, or
 * -errno. */
static int
names_each (int dir_fd, bool (*fn) (const char *name, gpointer data), gpointer data)
{
  _fb_cleanup_fd_ int fd = openat (dir_fd, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
  g_autofree char *buf = NULL;

  if (fd < 0)
    return -errno;
  buf = g_malloc (32 * 1024);
  for (;;)
    {
      long n = syscall (SYS_getdents64, fd, buf, 32 * 1024);

      if (n < 0)
        return -errno;
      if (n == 0)
        return 0;
      for (long pos = 0; pos < n;)
        {
          struct linux_dirent64 *de = (struct linux_dirent64 *)(buf + pos);

          if (!fn (de->d_name, data))
            return 0;
          pos += de->d_reclen;
        }
    }
}

typedef struct
{
  const char *a, *b; /* B may be NULL */
  bool has_a, has_b;
} Wanted;

static bool
wanted_seen (const char *name, gpointer data)
{
  Wanted *w = data;

  w->has_a = w->has_a || strcmp (name, w->a) == 0;
  w->has_b = w->has_b || (w->b != NULL && strcmp (name, w->b) == 0);
  return !(w->has_a && (w->b == NULL || w->has_b));
}

/* Does DIR_FD list A, and B (may be NULL), under exactly those spellings?
 * Through DIR's kept names when DIR is not NULL (view_dir_lists), else by
 * one scan.  0, or -errno. */
static int
lists (FbViewNode *dir, int dir_fd, const char *a, const char *b, bool *ret_a, bool *ret_b)
{
  Wanted w = { a, b, false, false };
  int r;

  if (dir == NULL)
    r = names_each (dir_fd, wanted_seen, &w);
  else
    {
      int ra = view_dir_lists (dir, dir_fd, a), rb = b != NULL ? view_dir_lists (dir, dir_fd, b) : 0;

      r = ra < 0 ? ra : rb < 0 ? rb : 0;
      w.has_a = ra == 1;
      w.has_b = rb == 1;
    }
  *ret_a = w.has_a;
  *ret_b = w.has_b;
  return r;
}

/* fb_view_fold_probe(), through DIR's kept names when DIR is not NULL */
static FbViewFold
probe (int dir_fd, const char *name, bool absence_proves, FbViewNode *dir)
{
  g_autofree char *other = g_strdup (name);
  struct stat st;
  bool letters = false, has_name, has_other, other_there;
  int r;

  for (char *p = other; *p != '\0'; p++)
    if (g_ascii_isalpha (*p))
      {
        *p = g_ascii_isupper (*p) ? g_ascii_tolower (*p) : g_ascii_toupper (*p);
        letters = true;
      }
  if (!letters || host_statat (dir, dir_fd, name, &st) < 0)
    return FB_VIEW_FOLD_MAYBE;
  r = host_statat (dir, dir_fd, other, &st);
  other_there = r >= 0;
  if (!other_there && r != -ENOENT)
    return FB_VIEW_FOLD_MAYBE;
  /* Told by the listing, not by comparing what the spellings reach: a
   * FUSE filesystem without use_ino numbers each spelling apart, an SMB
   * mount without server inode numbers too, and either may be a mount
   * point.  A spelling that reaches something the directory does not list
   * under it means the host folds (or aliases); an entry of its own under
   * each means the host keeps them apart. */
  if (lists (dir, dir_fd, name, other_there ? other : NULL, &has_name, &has_other) < 0)
    return FB_VIEW_FOLD_MAYBE;
  if (!has_name || (other_there && !has_other))
    return FB_VIEW_FOLD_YES;
  if (other_there)
    return FB_VIEW_FOLD_NO;
  /* OTHER reaches nothing: proof where the kernel's memory of absences
   * folds as its filesystem does, not on a server's filesystem */
  return absence_proves ? FB_VIEW_FOLD_NO : FB_VIEW_FOLD_MAYBE;
}

FbViewFold
fb_view_fold_probe (int dir_fd, const char *name, bool absence_proves)
{
  return probe (dir_fd, name, absence_proves, NULL);
}

int
fb_view_fold_listed (int dir_fd, const char *name)
{
  bool has, unused;
  int r = lists (NULL, dir_fd, name, NULL, &has, &unused);

  return r < 0 ? r : has ? 1 : 0;
}

/* --- per directory node --------------------------------------------------------- */

/* NodeDir.fold holds, in its low four bits, FbViewFold + 1 once asked (0
 * before), and above them TypeKind + 1 once the filesystem's kind is known
 * (0 before).  The kind is learned with a statfs, or from the parent: a
 * directory found in a directory node whose device it shares is on the
 * same filesystem (a device number names one mounted filesystem while
 * anything on it is open, and the parent's descriptor is, for the whole
 * lookup), so a walk makes one statfs per filesystem where it made one per
 * directory.  Whether the directory itself folds is asked of each still
 * (ext4, f2fs and tmpfs: its FS_CASEFOLD_FL; may-fold kinds: a probe). */
#define FOLD_MASK 0xf
/* The names kept (view_dir_lists): a directory listing more than
 * FOLD_SPELLINGS_MAX, or one whose names would take the view's kept names
 * past FOLD_SPELLINGS_VIEW_MAX, is scanned for each name asked instead;
 * and a name the kept ones lack, the directory unchanged, is read again at
 * most once every FOLD_REREAD_US in a directory (a caller that asks for
 * many spellings the host resolves and does not list would have it read
 * once for each). */
#define FOLD_SPELLINGS_MAX 20000
#define FOLD_SPELLINGS_VIEW_MAX 500000
#define FOLD_REREAD_US (100 * 1000)
#define KIND_SHIFT 4

/* The kind in V, KIND_MAYBE_SERVER when not known yet (no absence trusted) */
static TypeKind
fold_kind_of (int v)
{
  return (v >> KIND_SHIFT) == 0 ? KIND_MAYBE_SERVER : (TypeKind)((v >> KIND_SHIFT) - 1);
}

static FbViewFold
fold_of (int v)
{
  return (v & FOLD_MASK) == 0 ? FB_VIEW_FOLD_MAYBE : (FbViewFold)((v & FOLD_MASK) - 1);
}

/* Learn DIR's fold through FD, the kind from DIR's node when known. */
static FbViewFold
fold_learn (FbViewNode *dir, int fd, bool readable)
{
  gint *slot = &node_dir (dir)->fold;
  int v = g_atomic_int_get (slot);
  TypeKind kind = (v >> KIND_SHIFT) != 0 ? (TypeKind)((v >> KIND_SHIFT) - 1) : fs_kind (fd, NULL);
  FbViewFold f = kind_fold (kind, fd, readable);

  /* (only where no other thread set it first) */
  while ((v & FOLD_MASK) == 0 &&
         !g_atomic_int_compare_and_exchange (slot, v, ((int)kind + 1) << KIND_SHIFT | ((int)f + 1)))
    v = g_atomic_int_get (slot);
  return fold_of (g_atomic_int_get (slot));
}

FbViewFold
view_dir_fold_known (FbViewNode *dir)
{
  if (!node_is_host_dir (dir))
    return FB_VIEW_FOLD_NO;
  return fold_of (g_atomic_int_get (&node_dir (dir)->fold));
}

FbViewFold
view_dir_fold (FbViewNode *dir)
{
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  int fd, v;

  if (!node_is_host_dir (dir))
    return FB_VIEW_FOLD_NO;
  v = g_atomic_int_get (&node_dir (dir)->fold);
  if ((v & FOLD_MASK) != 0)
    return fold_of (v);
  fd = node_fd_get (dir, &hold);
  if (fd < 0)
    return FB_VIEW_FOLD_MAYBE; /* asked again next time */
  return fold_learn (dir, fd, false);
}

void
view_dir_fold_listing (FbViewNode *dir, int read_fd)
{
  if (node_is_host_dir (dir) && (g_atomic_int_get (&node_dir (dir)->fold) & FOLD_MASK) == 0)
    fold_learn (dir, read_fd, true);
}

void
view_dir_fold_inherit (FbViewNode *dir, FbViewNode *parent)
{
  int kind;

  if (parent == NULL || !node_is_host_dir (dir) || !node_is_host_dir (parent) || dir->dev != parent->dev)
    return;
  kind = g_atomic_int_get (&node_dir (parent)->fold) >> KIND_SHIFT;
  if (kind != 0)
    g_atomic_int_compare_and_exchange (&node_dir (dir)->fold, 0, kind << KIND_SHIFT);
}

void
view_fold_settle (FbViewNode *dir, const char *name)
{
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  FbViewFold f;
  int fd;

  if (view_dir_fold (dir) != FB_VIEW_FOLD_MAYBE)
    return;
  fd = node_fd_get (dir, &hold);
  if (fd < 0)
    return;
  /* a directory that stays "maybe" (a server's that keeps spellings
   * apart) is probed again at each new name: through its kept names */
  f = probe (fd, name, fold_kind_of (g_atomic_int_get (&node_dir (dir)->fold)) != KIND_MAYBE_SERVER, dir);
  if (f != FB_VIEW_FOLD_MAYBE)
    {
      gint *slot = &node_dir (dir)->fold;
      int v = g_atomic_int_get (slot);
      /* (the kind kept) */
      while ((v & FOLD_MASK) == (int)FB_VIEW_FOLD_MAYBE + 1 &&
             !g_atomic_int_compare_and_exchange (slot, v, (v & ~FOLD_MASK) | ((int)f + 1)))
        v = g_atomic_int_get (slot);
    }
}

void
view_decide_child (FbView *view, FbViewFold fold, const NodeState *pst, const char *name, FbPolicyDecision *ret)
{
  if (fold == FB_VIEW_FOLD_NO)
    fb_policy_decide_child (view->policy, &pst->decision, pst->path, name, ret);
  else
    fb_policy_decide_child_folded (view->policy, &pst->decision, pst->path, name, fold == FB_VIEW_FOLD_YES, ret);
}

bool
view_subtree_has_rules (FbView *view, const FbPolicyDecision *decision, const char *path)
{
  return fb_policy_subtree_has_rules_folded (view->policy, decision, path);
}

static bool
spelling_kept (const char *name, gpointer data)
{
  GHashTable *names = data;

  g_hash_table_add (names, g_strdup (name));
  return g_hash_table_size (names) <= FOLD_SPELLINGS_MAX;
}

/* The names DIR_FD lists, spelt as on disk; NULL when it can't be read,
 * or lists more than FOLD_SPELLINGS_MAX (*RET_ERR: -errno or -E2BIG). */
static GHashTable *
spellings_read (int dir_fd, int *ret_err)
{
  g_autoptr (GHashTable) names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  *ret_err = names_each (dir_fd, spelling_kept, names);
  if (*ret_err == 0 && g_hash_table_size (names) > FOLD_SPELLINGS_MAX)
    *ret_err = -E2BIG;
  return *ret_err == 0 ? g_steal_pointer (&names) : NULL;
}

static bool
same_time (const struct timespec *a, const struct timespec *b)
{
  return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

int
view_dir_lists (FbViewNode *dir, int dir_fd, const char *name)
{
  NodeExtra *x = node_extra (dir);
  NodeExtraDir *xd;
  FbView *view = node_view (dir);
  g_autoptr (GHashTable) fresh = NULL;
  struct stat st;
  gint kept;
  int r = 0;

  /* the directory's times before its names are read: a change meanwhile
   * shows as new times at the next question */
  if (fstat (dir_fd, &st) < 0)
    return -errno;
  /* Kept names answer while the directory's times are unchanged; a name
   * they lack is read again, at most every FOLD_REREAD_US (a name made
   * within the clock tick of the last reading leaves the times as they
   * were: refused meanwhile, not let through).  A name kept after it went
   * (in that tick) is no risk: where the host folds, it is decided folded
   * anyway. */
  g_mutex_lock (&x->lock);
  xd = x->dir;
  if (xd != NULL && xd->spellings != NULL && same_time (&xd->spellings_mtime, &st.st_mtim) &&
      same_time (&xd->spellings_ctime, &st.st_ctim) &&
      (g_hash_table_contains (xd->spellings, name) || g_get_monotonic_time () - xd->spellings_read_at < FOLD_REREAD_US))
    {
      r = g_hash_table_contains (xd->spellings, name) ? 1 : 0;
      g_mutex_unlock (&x->lock);
      return r;
    }
  g_mutex_unlock (&x->lock);
  fresh = spellings_read (dir_fd, &r);
  if (fresh == NULL)
    /* too many to keep: this question alone, by a scan */
    return r == -E2BIG ? fb_view_fold_listed (dir_fd, name) : r;
  r = g_hash_table_contains (fresh, name) ? 1 : 0;
  kept = (gint)g_hash_table_size (fresh);
  if (g_atomic_int_add (&view->spellings_kept, kept) + kept > FOLD_SPELLINGS_VIEW_MAX)
    {
      /* the view keeps enough: answered, not kept */
      g_atomic_int_add (&view->spellings_kept, -kept);
      return r;
    }
  g_mutex_lock (&x->lock);
  xd = node_extra_dir (x);
  if (xd->spellings != NULL)
    {
      g_atomic_int_add (&view->spellings_kept, -(gint)g_hash_table_size (xd->spellings));
      g_hash_table_destroy (xd->spellings);
    }
  xd->spellings = g_steal_pointer (&fresh);
  xd->spellings_mtime = st.st_mtim;
  xd->spellings_ctime = st.st_ctim;
  xd->spellings_read_at = g_get_monotonic_time ();
  g_mutex_unlock (&x->lock);
  return r;
}

/* Was DIR's kind one that may fold (its "no" from a probe, not the
 * kernel)? */
static bool
may_alias (FbViewNode *dir)
{
  TypeKind kind;

  if (!node_is_host_dir (dir))
    return false;
  kind = fold_kind_of (g_atomic_int_get (&node_dir (dir)->fold));
  return kind == KIND_MAYBE || kind == KIND_MAYBE_SERVER;
}

FbViewFold
view_dir_fold_new (FbViewNode *dir)
{
  FbViewFold f = view_dir_fold (dir);

  /* a probe's "no" (two spellings listed side by side, as a casefold
   * directory also shows names that are not UTF-8) does not make a new
   * ".GIT" harmless where the filesystem may fold */
  return f == FB_VIEW_FOLD_NO && may_alias (dir) ? FB_VIEW_FOLD_MAYBE : f;
}

/* Is NAME, which the host resolves in DIR, listed under that very
 * spelling?  True where the host does not fold. */
static bool
spelt_as_listed (FbViewNode *dir, int dir_fd, const char *name)
{
  if (view_dir_fold (dir) == FB_VIEW_FOLD_NO)
    return true;
  /* an error reading the directory is a refusal: the view can't tell */
  return view_dir_lists (dir, dir_fd, name) == 1;
}

int
view_fold_admit (FbView *view, const FbViewCaller *caller, FbViewNode *dir, const char *name, FbOp op, FbAccess access,
                 const char *path, const char *target)
{
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  FbViewFold fold = view_dir_fold (dir);
  FbViewNode *known;
  struct stat st;
  bool same = false;
  int fd;

  /* A probe's "no" on a filesystem that may fold says only that ASCII
   * case is kept apart: such a host may still resolve names it does not
   * list (NTFS's and SMB's short 8.3 names, Unicode normalisation) --
   * spelling checked there too, the kept names first (one table lookup in
   * the common case), and a directory that can't be read keeps the probe's
   * word.  Filesystems whose folding the kernel does (ext4, f2fs, tmpfs)
   * or that never fold are taken at their word. */
  if (fold == FB_VIEW_FOLD_NO && !may_alias (dir))
    return 0;
  fd = node_fd_get (dir, &hold);
  if (fd < 0 || (fold == FB_VIEW_FOLD_NO && view_dir_lists (dir, fd, name) != 0))
    return 0;
  if (host_statat (dir, fd, name, &st) < 0)
    return 0; /* nothing there: the operation finds that out itself */
  /* a name the view made a node for was checked then; if the host still
   * shows that object there, it was not respelt since */
  g_mutex_lock (&view->lock);
  known = table_find_locked (view, dir, name);
  same = known != NULL && known->kind == NODE_HOST && known->ino == st.st_ino && known->dev == st.st_dev;
  g_mutex_unlock (&view->lock);
  if (same || (fold != FB_VIEW_FOLD_NO && view_dir_lists (dir, fd, name) == 1))
    return 0;
  view_emit (view, caller, op, path, target, access, FB_DECISION_HIDE, ENOENT,
             view_refusal_rule (VIEW_REFUSAL_FOLD_SPELLING));
  return -ENOENT;
}

int
view_fold_check_target (FbView *view, const FbViewCaller *caller, FbViewNode *dir, const char *name,
                        const struct stat *src, const char *src_path, const char *path)
{
  _fb_cleanup_node_fd_ NodeFd hold = NODE_FD_INIT;
  struct stat st;
  int fd;

  if (view_dir_fold (dir) == FB_VIEW_FOLD_NO)
    return 0;
  fd = node_fd_get (dir, &hold);
  if (fd < 0 || host_statat (dir, fd, name, &st) < 0)
    return 0;
  /* a new spelling of the source itself (foo to FOO) only respells it */
  if (src != NULL && st.st_dev == src->st_dev && st.st_ino == src->st_ino)
    return 0;
  if (spelt_as_listed (dir, fd, name))
    return 0;
  view_emit (view, caller, FB_OP_RENAME, src_path, path, FB_ACCESS_CREATE, FB_DECISION_DENY, EACCES,
             view_refusal_rule (VIEW_REFUSAL_FOLD_TAKEN));
  return -EACCES;
}
