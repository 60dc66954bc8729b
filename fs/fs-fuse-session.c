/* fusebox — the libfuse adapter's sessions: making one over a view,
 * mounting it or serving a descriptor, running its workers, stopping,
 * aborting and freeing it.  The operations are fs-fuse.c's. */
#include "fs/fs-fuse-private.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

/* How often the gate's watchdog looks for a request that waits behind busy
 * workers (fs-fuse-gate.c): the longest such a request waits. */
#define FB_FUSE_GATE_TICK_MS 5

/* The signal fb_fuse_abort() sends to the FUSE threads (see there). */
#define FB_FUSE_WAKE_SIGNAL (SIGRTMIN + 4)

/* --- the workers' reads -------------------------------------------------------------
 *
 * fuse_session_loop_mt ends its workers with pthread_cancel(), and a worker
 * is cancellable for the whole of fuse_session_receive_buf, not only for
 * its read(2): a read that fails with an errno libfuse does not expect is
 * reported there with perror(), which locks stderr without a cleanup
 * handler.  A cancel that lands in perror's write(2) leaves stderr locked
 * by a thread that is gone, and the next message on stderr waits forever
 * (run's "the access log ... reached its budget" did, under load, after a
 * worker's "fuse: reading device: Software caused connection abort"); the
 * main loop waits with it, and since the signals are read from the loop,
 * SIGTERM does nothing.  So the read is the only place where a worker can
 * be cancelled: cancellable for the read(2) itself, as libfuse wants (an
 * idle worker is ended so), and no longer once it has returned.
 *
 * ECONNABORTED is the kernel's answer to a worker whose read took a request
 * just as the connection was being shut down (fuse_dev_do_read, after
 * fuse_abort_conn disconnected the processing queues), which happens when
 * a sandbox's last process leaves its mount namespace with a release still
 * queued.  (The other ECONNABORTED, fusectl's abort with FUSE_ABORT_ERROR,
 * we never negotiate.)  Either way the kernel is done with the connection:
 * it reads as ENODEV, on which libfuse ends serving quietly, not as an
 * error to print, nor a failure of serving ("run: serving the view failed"
 * at the end of a finished sandbox, its status replaced by 125). */
static ssize_t
io_read (int fd, void *buf, size_t len, void *userdata)
{
  FbFuse *f = userdata;
  ssize_t n;
  int err;

  /* the gate exists while fb_fuse_run runs the workers, and sets the
   * cancellation state around the read itself; a read outside it (a
   * caller's own receive loop) is plain */
  if (f->gate != NULL)
    {
      n = fb_fuse_gate_read (f->gate, fd, buf, len);
      err = errno;
    }
  else
    {
      pthread_setcancelstate (PTHREAD_CANCEL_ENABLE, NULL);
      n = read (fd, buf, len);
      err = errno;
      pthread_setcancelstate (PTHREAD_CANCEL_DISABLE, NULL);
    }
  if (n < 0 && err == ECONNABORTED)
    err = ENODEV;
  errno = err;
  return n;
}

static ssize_t
io_writev (int fd, struct iovec *iov, int count, void *userdata)
{
  return writev (fd, iov, count);
}

static const struct fuse_custom_io fuse_io = { .writev = io_writev, .read = io_read };

/* --- sessions ------------------------------------------------------------------- */

static guint32
read_overflow_id (const char *path)
{
  g_autofree char *text = NULL;
  guint64 v;

  if (!g_file_get_contents (path, &text, NULL, NULL) ||
      !g_ascii_string_to_unsigned (g_strstrip (text), 10, 0, G_MAXUINT32 - 1, &v, NULL))
    return 65534;
  return (guint32)v;
}

int
fb_fuse_new (FbView *view, const FbFuseOptions *options, FbFuse **ret_fuse)
{
  FbFuse *f = g_new0 (FbFuse, 1);

  f->view = fb_view_ref (view);
  if (options != NULL)
    f->options = *options;
  else
    fb_fuse_options_init (&f->options);
  f->fsname = g_strdup (f->options.fsname != NULL ? f->options.fsname : "fusebox");
  f->options.fsname = f->fsname;
  if (f->options.max_threads == 0)
    f->options.max_threads = 16;
  if (f->options.id_map.enabled && f->options.id_map.overflow_uid == 0)
    f->options.id_map.overflow_uid = read_overflow_id ("/proc/sys/kernel/overflowuid");
  if (f->options.id_map.enabled && f->options.id_map.overflow_gid == 0)
    f->options.id_map.overflow_gid = read_overflow_id ("/proc/sys/kernel/overflowgid");
  /* --uid 65534: "someone else" must still not read as the caller; -1 is
   * unmapped in every namespace and shows as the overflow id too */
  if (f->options.id_map.enabled && f->options.id_map.overflow_uid == f->options.id_map.inside_uid)
    f->options.id_map.overflow_uid = (uid_t)-1;
  if (f->options.id_map.enabled && f->options.id_map.overflow_gid == f->options.id_map.inside_gid)
    f->options.id_map.overflow_gid = (gid_t)-1;
  f->root = fb_view_get_root (view);
  f->abort_fd = -1;
  f->mount_parent = -1;
  g_mutex_init (&f->files_lock);
  f->files = g_hash_table_new (g_direct_hash, g_direct_equal);
  inval_init (f);
  *ret_fuse = f;
  return 0;
}

/* fsname goes into a comma-separated option string: keep it to safe bytes. */
static char *
safe_fsname (const char *name)
{
  char *s = g_strdup (name);

  for (char *p = s; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && *p != '-' && *p != '_' && *p != '.' && *p != ':')
      *p = '_';
  return s;
}

/* SOURCE, the mount's fsname as mountinfo shows it: for a mount by path,
 * FSNAME and a random tag, by which fb_fuse_mount finds where its mount
 * landed (mount_landed). */
static int
session_new (FbFuse *f, bool mount_options, char **ret_source)
{
  g_autofree char *fsname = safe_fsname (f->fsname);
  g_autofree char *opts = NULL;
  char *argv[4];
  struct fuse_args args;

  if (f->se != NULL)
    return -EALREADY;
  /* default_permissions: the kernel checks the host's modes and owners
   * against the caller, so a root daemon can't be used to read what the
   * caller couldn't (/etc/shadow).  allow_other: callers other than the
   * daemon's user may use the mount (the sandbox's uid, root's callers). */
  if (mount_options)
    {
      char *tagged = g_strdup_printf ("%s:%08x%08x", fsname, g_random_int (), g_random_int ());
      g_free (fsname);
      fsname = tagged;
    }
  if (ret_source != NULL)
    *ret_source = g_strdup (fsname);
  opts = g_strdup_printf ("default_permissions,fsname=%s,subtype=fusebox%s%s", fsname,
                          mount_options && f->options.allow_other ? ",allow_other" : "",
                          mount_options && f->options.auto_unmount ? ",auto_unmount" : "");
  argv[0] = (char *)"fusebox";
  argv[1] = (char *)"-o";
  argv[2] = opts;
  argv[3] = NULL;
  args = (struct fuse_args)FUSE_ARGS_INIT (3, argv);
  f->se = fuse_session_new (&args, &fb_fuse_ops, sizeof fb_fuse_ops, f);
  fuse_opt_free_args (&args);
  if (f->se == NULL)
    return -EINVAL;
  return 0;
}

/* --- where a mount by path landed ------------------------------------------------
 *
 * fuse_session_mount mounts by path (fusermount3 resolves it again and
 * mounts there), some time after `fusebox mount` checked that path.  A
 * sandbox that sees the mount point's directory can exchange it with a
 * link in that time (RENAME_EXCHANGE in a loop): the view then covered
 * whatever the link named, a root-only directory (an outside review won on
 * its fifth try).  fusermount3 takes no descriptor, and it is the guard
 * that unmounts a killed daemon's mount, so the mount stays by path and is
 * checked after: each mount by path carries a random tag in its source
 * (session_new), mountinfo says where the mount with that source landed,
 * and a mount that is not at the path checked is taken off before the
 * daemon serves a request: until then every access to it waits for FUSE's
 * INIT, and none is answered. */

void
fb_fuse_mountinfo_unescape (char *s)
{
  char *w = s;

  for (const char *r = s; *r != '\0'; w++)
    if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7')
      {
        *w = (char)(((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
        r += 4;
      }
    else
      *w = *r++;
  *w = '\0';
}

/* Where the mounts whose source is SOURCE are, from our mountinfo: the
 * device number of the one at REAL (0: none there), and in *RET_ELSEWHERE
 * (NULL: none) the mount points of the others, with their device numbers
 * in *RET_DEVS.  A stat would ask our own filesystem, which does not serve
 * yet, and hang. */
/* How often mountinfo is read again while the paths it shows go stale
 * before they are opened (a sandbox's rename loop). */
#define MOUNTINFO_ROUNDS 32

/* Whether mountinfo's LINE is a FUSE mount with SOURCE (its tag) made by
 * our user.  The tag is random but not secret: anyone reads it in
 * mountinfo, and any user who may mount FUSE can give a mount of theirs
 * the same source (fusermount3 -o fsname=...).  The owner FUSE records
 * (user_id=, from the mounting process: fusermount3 writes its caller's
 * uid, libfuse's own mount getuid()) is not theirs to choose, so a mount
 * of another user never passes for ours: neither its stop nor a message
 * nor the unmount watcher takes it for the view's. */
static bool
line_tagged (const char *line, const char *source)
{
  const char *sep = strstr (line, " - ");
  g_autofree char *owner = NULL;
  g_auto (GStrv) tail = NULL;
  g_auto (GStrv) opts = NULL;

  if (sep == NULL)
    return false;
  tail = g_strsplit (sep + 3, " ", 3);
  if (g_strv_length (tail) < 3 || !g_str_has_prefix (tail[0], "fuse") || strcmp (tail[1], source) != 0)
    return false;
  owner = g_strdup_printf ("user_id=%u", (unsigned)getuid ());
  opts = g_strsplit (tail[2], ",", -1);
  return g_strv_contains ((const char *const *)opts, owner);
}

static dev_t
mount_landed (const char *real, const char *source, GPtrArray **ret_elsewhere, GArray **ret_devs)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  dev_t dev = 0;

  *ret_elsewhere = NULL;
  *ret_devs = NULL;
  if (!g_file_get_contents ("/proc/self/mountinfo", &text, NULL, NULL))
    return 0;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      /* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER" */
      g_auto (GStrv) head = NULL;
      unsigned maj, min;

      if (!line_tagged (lines[i], source))
        continue;
      head = g_strsplit (lines[i], " ", 6);
      if (g_strv_length (head) < 5 || sscanf (head[2], "%u:%u", &maj, &min) != 2)
        continue;
      fb_fuse_mountinfo_unescape (head[4]);
      if (strcmp (head[4], real) == 0)
        dev = makedev (maj, min); /* the last one is on top */
      else
        {
          dev_t other = makedev (maj, min);
          if (*ret_elsewhere == NULL)
            {
              *ret_elsewhere = g_ptr_array_new_with_free_func (g_free);
              *ret_devs = g_array_new (FALSE, FALSE, sizeof (dev_t));
            }
          g_ptr_array_add (*ret_elsewhere, g_strdup (head[4]));
          g_array_append_val (*ret_devs, other);
        }
    }
  return dev;
}

/* Whether mountinfo's mount ID is a FUSE mount with SOURCE (its tag). */
static bool
mount_id_tagged (guint64 id, const char *source)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;

  if (!g_file_get_contents ("/proc/self/mountinfo", &text, NULL, NULL))
    return false;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      guint64 line_id;

      if (sscanf (lines[i], "%" G_GUINT64_FORMAT " ", &line_id) == 1 && line_id == id)
        return line_tagged (lines[i], source);
    }
  return false;
}

/* Whether FD (O_PATH) is the root of a mount of device DEV, and (SOURCE
 * not NULL) that very mount carries our tag: 0, -ESTALE when not.  The
 * device number alone is not enough: once our mount is gone (unmounted by
 * someone else) the kernel hands it to the next mount, which may be made
 * at the same place.  The mount's ID names the mount FD holds, which
 * can't go away meanwhile.  No attributes are asked, so the kernel
 * answers without our daemon (alive or dead). */
static int
is_mount_root (int fd, const char *source, dev_t dev)
{
  struct statx stx;

  if (statx (fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, source != NULL ? STATX_MNT_ID : 0, &stx) < 0)
    return -errno;
  if (makedev (stx.stx_dev_major, stx.stx_dev_minor) != dev || !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
      !(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
    return -ESTALE;
  if (source != NULL && (!(stx.stx_mask & STATX_MNT_ID) || !mount_id_tagged (stx.stx_mnt_id, source)))
    return -ESTALE;
  return 0;
}

static int
run_fusermount_unmount (const char *mountpoint)
{
  const char *argv[] = { "fusermount3", "-u", "-q", "-z", "--", mountpoint, NULL };
  int status = 0;

  if (!g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                     NULL, &status, NULL))
    return -ENOENT;
  return g_spawn_check_wait_status (status, NULL) ? 0 : -EIO;
}

/* Take off our mount (device DEV) through FD, found to be its root:
 * umount2 of /proc/self/fd/N, which names that mount whatever its path is
 * now (and however long).  Without the privilege, fusermount3 unmounts it
 * by path (AT; NULL: the path the kernel gives FD), and checks that the
 * mount is ours. */
static int
take_off_fd (int fd, const char *source, dev_t dev, const char *at)
{
  g_autofree char *named = NULL;
  char proc[64];
  int r = is_mount_root (fd, source, dev);

  if (r < 0)
    return r;
  g_snprintf (proc, sizeof proc, "/proc/self/fd/%d", fd);
  if (umount2 (proc, MNT_DETACH) == 0)
    return 0;
  if (errno != EPERM)
    return -errno;
  if (at == NULL && (at = named = g_file_read_link (proc, NULL)) == NULL)
    return -EPERM;
  return run_fusermount_unmount (at) == 0 ? 0 : -EPERM;
}

/* Take off our mount (device DEV) at AT, which the kernel named: reached
 * without following a link (AT could be changed meanwhile as the mount
 * point was), found to be a mount's root of device DEV, and unmounted
 * through that descriptor, not by path again. */
/* The directory PATH (an O_PATH descriptor), reached without following a
 * link: from the root or the working directory (AT_FDCWD), or beneath the
 * directory AT. */
static int
open_dir_nofollow (int at, const char *path)
{
  struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                          .resolve =
                            RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | (at != AT_FDCWD ? RESOLVE_BENEATH : 0) };
  int fd = (int)syscall (SYS_openat2, at, path, &how, sizeof how);

  return fd < 0 ? -errno : fd;
}

int
fb_fuse_take_off (const char *at, const char *source, dev_t dev)
{
  _fb_cleanup_fd_ int fd = open_dir_nofollow (AT_FDCWD, at);

  if (fd < 0)
    return fd;
  return take_off_fd (fd, source, dev, at);
}

/* AT's parent, if it holds at AT's last name the root of our mount. */
static int
hold_parent_at (const char *at, const char *source, dev_t dev, char **ret_name)
{
  g_autofree char *dir = g_path_get_dirname (at);
  _fb_cleanup_fd_ int parent = open_dir_nofollow (AT_FDCWD, dir);
  _fb_cleanup_fd_ int fd = -1;
  g_autofree char *name = g_path_get_basename (at);
  int r;

  if (parent < 0)
    return parent;
  if ((fd = open_dir_nofollow (parent, name)) < 0)
    return fd;
  if ((r = is_mount_root (fd, source, dev)) < 0)
    return r;
  *ret_name = g_steal_pointer (&name);
  return fb_steal_fd (&parent);
}

int
fb_fuse_hold_parent (const char *mountpoint, const char *source, dev_t dev, char **ret_name)
{
  int r = hold_parent_at (mountpoint, source, dev, ret_name);

  /* Moved already (renamed since, or by an exchange the kernel began
   * before the mount was attached): where mountinfo shows it now, read
   * again while what it shows goes stale before it is opened (a rename
   * loop), up to a bound. */
  for (int round = 0; r < 0 && source != NULL && round < MOUNTINFO_ROUNDS; round++)
    {
      g_autoptr (GPtrArray) at = NULL;
      g_autoptr (GArray) devs = NULL;

      mount_landed ("", source, &at, &devs);
      if (at == NULL)
        break;
      for (guint i = 0; r < 0 && i < at->len; i++)
        if (g_array_index (devs, dev_t, i) == dev)
          r = hold_parent_at (g_ptr_array_index (at, i), source, dev, ret_name);
    }
  return r;
}

int
fb_fuse_take_off_under (int parent, const char *name, const char *source, dev_t dev)
{
  _fb_cleanup_fd_ int fd = open_dir_nofollow (parent, name);

  if (fd < 0)
    return fd;
  return take_off_fd (fd, source, dev, NULL);
}

/* After a mount by path: our mount (source SOURCE) must be at REAL.  Any
 * other mount with that source is taken off, with a message naming where
 * it landed: one that landed elsewhere, and one left by libfuse's first
 * attempt, which failed after mounting (its retry then landed at REAL);
 * not the mount at REAL as it propagated to a peer (the same device).
 * What is gone from one place may take its peers with it, and a path read
 * from mountinfo may be stale when it is opened (a rename loop): mountinfo
 * is read again, up to a bound.  *RET_ERROR: -EBUSY when one could not be
 * taken off (said, with how to remove it; *RET_LEFT: its device number),
 * else -ESTALE when none is at REAL.  Returns the device number of the
 * mount at REAL. */
static dev_t
mount_check_landed (const char *real, const char *source, int *ret_error, dev_t *ret_left)
{
  dev_t dev = 0;
  bool strays = false;
  guint left = 0;

  *ret_left = 0;

  for (int round = 0; round < MOUNTINFO_ROUNDS; round++)
    {
      g_autoptr (GPtrArray) elsewhere = NULL;
      g_autoptr (GArray) devs = NULL;

      left = 0;
      dev = mount_landed (real, source, &elsewhere, &devs);
      for (guint i = 0; elsewhere != NULL && i < elsewhere->len; i++)
        {
          const char *at = g_ptr_array_index (elsewhere, i);
          dev_t other = g_array_index (devs, dev_t, i);
          int r;

          if (other == dev)
            continue; /* the mount at REAL, seen from a peer */
          strays = true;
          r = fb_fuse_take_off (at, source, other);
          if (r == 0 || round == MOUNTINFO_ROUNDS - 1)
            {
              /* a sandbox chose these names: escaped, so that no control
               * character of theirs reaches the operator's terminal */
              g_autofree char *at_text = g_strescape (at, NULL);
              g_autofree char *real_text = g_strescape (real, NULL);

              if (r == 0)
                g_printerr ("fusebox: the view was mounted on \"%s\", not on \"%s\": the mount point was replaced on "
                            "the way (a link put in its place while it was being mounted); it was taken off again "
                            "before serving anything\n",
                            at_text, real_text);
              else
                g_printerr ("fusebox: the view was mounted on \"%s\", not on \"%s\": the mount point was replaced on "
                            "the way, and it could not be taken off (%s): it serves nothing; find it in "
                            "/proc/self/mountinfo by its source %s and remove it with 'umount -l' once no sandbox "
                            "can change the way to it\n",
                            at_text, real_text, g_strerror (-r), source);
            }
          if (r < 0)
            {
              left++;
              *ret_left = other;
            }
        }
      if (left == 0)
        break;
    }
  *ret_error = left > 0 ? -EBUSY : dev == 0 && strays ? -ESTALE : 0;
  return dev;
}

/* fusermount3's auto_unmount wakes when the socket libfuse keeps to it
 * closes, and then asks the mount whether it lives (fb_fuse_mount).  The
 * kernel releases a dead process's files one at a time, by number, from the
 * highest down on current kernels: when the socket goes before the last
 * /dev/fuse descriptor, fusermount3's question can reach the connection
 * before the kernel has ended it, and is then answered ECONNABORTED,
 * where ENOTCONN unmounts: the dead mount stayed (1 kill in about 100
 * under load).  So the socket moves to LOW, a number taken before the
 * mount and below every /dev/fuse descriptor: it goes last.  The socket is
 * the one socket among the descriptors above LOW (the mount made it; no
 * other thread runs yet); without it, LOW is closed. */
static void
unmount_socket_last (int low)
{
  g_autoptr (GDir) dir = g_dir_open ("/proc/self/fd", 0, NULL);
  const char *name;
  int sock = -1, n = 0;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      int fd = atoi (name);
      struct stat st;

      if (fd > low && fstat (fd, &st) == 0 && S_ISSOCK (st.st_mode))
        {
          sock = fd;
          n++;
        }
    }
  if (n == 1 && dup3 (sock, low, O_CLOEXEC) == low)
    close (sock);
  else
    close (low);
}

/* fusermount3 inherits our standard output and error, and with
 * auto_unmount it stays, holding them, as long as the mount does: a caller
 * that reads them to their end (`fusebox mount DIR 2>&1 | cat`, a test
 * harness) waits that long.  libfuse's first attempt gives it /dev/null,
 * but its retry without the subtype (after a failure: a mount point
 * changed under it) gives it ours.  So while mounting they are a memfd,
 * whose text goes on to the real standard error afterwards. */
typedef struct
{
  int memfd, out, err;
} Capture;

static void
close_clear (int *fd)
{
  if (*fd >= 0)
    close (*fd);
  *fd = -1;
}

static void
capture_begin (Capture *c)
{
  c->out = c->err = -1;
  c->memfd = memfd_create ("fusebox-mount-messages", MFD_CLOEXEC);
  if (c->memfd < 0)
    return;
  fflush (stdout);
  fflush (stderr);
  c->out = fcntl (STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  c->err = fcntl (STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  if (c->out < 0 || c->err < 0 || dup2 (c->memfd, STDOUT_FILENO) < 0 || dup2 (c->memfd, STDERR_FILENO) < 0)
    {
      if (c->out >= 0)
        dup2 (c->out, STDOUT_FILENO);
      if (c->err >= 0)
        dup2 (c->err, STDERR_FILENO);
      close_clear (&c->out);
      close_clear (&c->err);
      close_clear (&c->memfd);
    }
}

void
fb_fuse_copy_shown (int from, int to)
{
  g_autoptr (GString) in = g_string_new (NULL);
  g_autoptr (GString) out = g_string_new (NULL);
  char buf[4096];
  ssize_t n;

  while ((n = read (from, buf, sizeof buf)) > 0)
    g_string_append_len (in, buf, n);
  for (gsize i = 0; i < in->len; i++)
    {
      guchar c = (guchar)in->str[i];

      if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f)
        g_string_append_printf (out, "\\x%02x", c);
      else if (c == 0xc2 && i + 1 < in->len && (guchar)in->str[i + 1] >= 0x80 && (guchar)in->str[i + 1] <= 0x9f)
        {
          g_string_append_printf (out, "\\x%02x\\x%02x", c, (guchar)in->str[i + 1]);
          i++;
        }
      else
        g_string_append_c (out, (char)c);
    }
  for (gsize done = 0; done < out->len; done += (gsize)n)
    {
      n = write (to, out->str + done, out->len - done);
      if (n <= 0)
        break;
    }
}

static void
capture_end (Capture *c)
{
  if (c->memfd < 0)
    return;
  fflush (stdout);
  fflush (stderr);
  dup2 (c->out, STDOUT_FILENO);
  dup2 (c->err, STDERR_FILENO);
  close_clear (&c->out);
  close_clear (&c->err);
  if (lseek (c->memfd, 0, SEEK_SET) == 0)
    fb_fuse_copy_shown (c->memfd, STDERR_FILENO);
  close_clear (&c->memfd);
}

int
fb_fuse_mount (FbFuse *f, const char *mountpoint)
{
  bool is_fd = g_str_has_prefix (mountpoint, "/dev/fd/");
  /* canonical already (fs.h): resolved again here, a link put in its
   * place since the caller resolved it would be taken for the mount point */
  const char *real = is_fd ? NULL : mountpoint;
  g_autofree char *source = NULL;
  Capture capture;
  int low = -1;
  int r;

  if (!is_fd && mountpoint[0] != '/')
    return -EINVAL;
  r = session_new (f, !is_fd, &source);
  if (r < 0)
    return r;
  if (!is_fd && f->options.auto_unmount)
    low = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  capture_begin (&capture);
  r = fuse_session_mount (f->se, mountpoint);
  capture_end (&capture);
  if (r != 0)
    {
      if (low >= 0)
        close (low);
      fuse_session_destroy (f->se);
      f->se = NULL;
      return -EIO;
    }
  if (low >= 0)
    unmount_socket_last (low);
  /* the session's descriptor, read and written through fuse_io (above) */
  r = fuse_session_custom_io (f->se, &fuse_io, fuse_session_fd (f->se));
  if (r < 0)
    {
      fuse_session_unmount (f->se);
      fuse_session_destroy (f->se);
      f->se = NULL;
      return r;
    }
  if (!is_fd)
    {
      dev_t left, dev;
      const char *delay = g_getenv ("FUSEBOX_TEST_MOUNT_CHECK_DELAY_MS");

      /* for the tests: time to move the mount point's parent in between */
      if (delay != NULL)
        g_usleep ((gulong)MIN (g_ascii_strtoull (delay, NULL, 10), 10000) * 1000);
      dev = mount_check_landed (real, source, &r, &left);
      /* ours is at REAL, a stray left elsewhere was said: it serves */
      if (r == -EBUSY && dev != 0)
        r = 0;
      if (r < 0)
        {
          fuse_session_destroy (f->se);
          f->se = NULL;
          /* the one left, for the caller's unmount watcher to find: its tag
           * and device number (nothing is served, nor unmounted, by us) */
          if (r == -EBUSY)
            {
              f->mount_source = g_steal_pointer (&source);
              f->mount_dev = left;
            }
          return r;
        }

      f->mountpoint = g_strdup (real);
      f->mount_source = g_steal_pointer (&source);
      f->mount_dev = dev;
      /* What finds the mount at its stop whatever a sandbox renames above
       * it, and however long its path gets (unmount_ours).  None when the
       * mount is no longer there: then its tag finds it. */
      if (dev != 0)
        {
          fb_view_blank_own_mount (f->view, dev);
          f->mount_parent = fb_fuse_hold_parent (real, f->mount_source, dev, &f->mount_name);
        }
      /* The connection's abort switch, opened now, while the number is
       * surely our connection's: it is the superblock's anonymous device
       * number, which the kernel hands to the next mount (of any
       * filesystem) as soon as ours is gone, possibly before our workers
       * have seen the end.  Opened by number later, it could abort that
       * other mount (another sandbox's); once ours is gone, a write to
       * this descriptor does nothing (fuse_ctl_remove_conn).  Absent
       * without fusectl: fb_fuse_abort() wakes the workers instead. */
      if (dev != 0)
        {
          g_autofree char *path = g_strdup_printf ("/sys/fs/fuse/connections/%u/abort", minor (dev));
          f->abort_fd = open (path, O_WRONLY | O_CLOEXEC);
        }
      /* A mount on the host must go when the daemon dies, however it dies.
       * fusermount3's auto_unmount (which survives a kill of the daemon's
       * process group or of everything named fusebox: its own session, its
       * own name) unmounts only when an open() of the mount point fails
       * with ENOTCONN, and once the kernel opens directories without us
       * (stateless_dirs) that open asks us nothing: the dead mount stayed.
       * With default_permissions the kernel checks the root's mode before
       * the open and refreshes attributes that have expired; a timeout of 0
       * keeps them expired, so the check asks the daemon, and a dead one
       * answers ENOTCONN.  It costs one GETATTR per path walk that starts
       * above the mount point (docs/performance.md). */
      f->root_uncached = f->options.auto_unmount;
    }
  return inval_start (f);
}

int
fb_fuse_serve_fd (FbFuse *f, int fd)
{
  g_autofree char *path = g_strdup_printf ("/dev/fd/%d", fd);

  return fb_fuse_mount (f, path);
}

char *
fb_fuse_kernel_mount_options (int fd, uid_t uid, gid_t gid, bool allow_other)
{
  return g_strdup_printf ("fd=%d,rootmode=40000,user_id=%u,group_id=%u,default_permissions%s", fd, (unsigned)uid,
                          (unsigned)gid, allow_other ? ",allow_other" : "");
}

/* How many workers may be busy before a queued request no longer wakes
 * one more (fs-fuse-gate.c): half the CPUs we may run on, the other half
 * left to the callers, whose requests these are.  Past it, the gate's
 * watchdog still adds workers to requests queued behind long ones. */
static unsigned
gate_spread (void)
{
  cpu_set_t set;

  if (sched_getaffinity (0, sizeof set, &set) < 0)
    return 1;
  return MAX (CPU_COUNT (&set) / 2, 1);
}

int
fb_fuse_run (FbFuse *f)
{
  struct fuse_loop_config *cfg;
  int r;

  if (f->se == NULL)
    return -ENOTCONN;
  /* one worker at a time waits for the next request (fs-fuse-gate.c) */
  r = fb_fuse_gate_new (fuse_session_fd (f->se), gate_spread (), FB_FUSE_GATE_TICK_MS, &f->gate);
  if (r < 0)
    return r;
  cfg = fuse_loop_cfg_create ();
  fuse_loop_cfg_set_max_threads (cfg, f->options.max_threads);
  /* Idle workers wait in the gate at no cost, and libfuse would end the
   * worker that just answered (the one the gate seats next) whenever more
   * than this many wait: never. */
  fuse_loop_cfg_set_idle_threads (cfg, f->options.max_threads);
  /* one /dev/fuse descriptor per worker: no contention on a single one */
  fuse_loop_cfg_set_clone_fd (cfg, 1);
  r = fuse_session_loop_mt (f->se, cfg);
  fuse_loop_cfg_destroy (cfg);
  fb_fuse_gate_free (g_steal_pointer (&f->gate));
  /* ECONNABORTED ended it quietly, as ENODEV (io_read) */
  return r < 0 ? r : (r > 0 ? -EIO : 0);
}

static gpointer
serve_thread (gpointer data)
{
  FbFuse *f = data;

  f->result = fb_fuse_run (f);
  if (f->done != NULL)
    f->done (f->result, f->done_data);
  return NULL;
}

int
fb_fuse_start (FbFuse *f, FbFuseDoneFunc done, gpointer user_data)
{
  sigset_t block, old;
  g_autoptr (GError) error = NULL;

  if (f->se == NULL)
    return -ENOTCONN;
  if (f->thread != NULL)
    return -EALREADY;
  f->done = done;
  f->done_data = user_data;
  /* Workers inherit the mask: signals go to the main loop. */
  sigemptyset (&block);
  sigaddset (&block, SIGINT);
  sigaddset (&block, SIGTERM);
  sigaddset (&block, SIGHUP);
  sigaddset (&block, SIGQUIT);
  sigaddset (&block, SIGPIPE);
  pthread_sigmask (SIG_BLOCK, &block, &old);
  f->thread = g_thread_try_new ("fusebox-fuse", serve_thread, f, &error);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  return f->thread != NULL ? 0 : -EAGAIN;
}

int
fb_fuse_join (FbFuse *f)
{
  if (f->thread == NULL)
    return -ECHILD;
  g_thread_join (f->thread);
  f->thread = NULL;
  return f->result;
}

bool
fb_fuse_tagged_present (const char *source, dev_t dev)
{
  g_autoptr (GPtrArray) at = NULL;
  g_autoptr (GArray) devs = NULL;

  mount_landed ("", source, &at, &devs);
  for (guint i = 0; devs != NULL && i < devs->len; i++)
    if (g_array_index (devs, dev_t, i) == dev)
      return true;
  return false;
}

dev_t
fb_fuse_get_mount_dev (FbFuse *f)
{
  return f->mount_dev;
}

dev_t
fb_fuse_tagged_dev (const char *source)
{
  g_autoptr (GPtrArray) at = NULL;
  g_autoptr (GArray) devs = NULL;

  /* no path is "" in mountinfo: every mount with SOURCE is elsewhere */
  mount_landed ("", source, &at, &devs);
  return devs != NULL && devs->len > 0 ? g_array_index (devs, dev_t, devs->len - 1) : 0;
}

int
fb_fuse_take_off_tagged (const char *source, dev_t dev)
{
  int err = -EBUSY;

  /* A path read from mountinfo can be stale by the time it is opened (a
   * rename meanwhile; then it names nothing, or another directory): only
   * mountinfo read again, without it, says it is gone.  Three tries. */
  for (int round = 0;; round++)
    {
      g_autoptr (GPtrArray) at = NULL;
      g_autoptr (GArray) devs = NULL;
      guint found = 0;

      mount_landed ("", source, &at, &devs);
      for (guint i = 0; at != NULL && i < at->len; i++)
        if (g_array_index (devs, dev_t, i) == dev)
          {
            found++;
            if (round < 3)
              {
                int r = fb_fuse_take_off (g_ptr_array_index (at, i), source, dev);
                if (r < 0)
                  err = r;
              }
          }
      if (found == 0)
        return 0;
      if (round == 3)
        return err;
    }
}

int
fb_fuse_take_off_ours (int parent, const char *name, const char *source, dev_t dev)
{
  if (parent >= 0)
    (void)fb_fuse_take_off_under (parent, name, source, dev);
  return fb_fuse_take_off_tagged (source, dev);
}

/* Take our mount off wherever it is now, never by the path it was made
 * at.  A sandbox that sees the mount point's parent can rename it (a
 * directory holding a mount point can be moved) and put a link in its
 * place: an unmount by path followed the link and detached another mount
 * of the same name, and left ours.  First through the parent's descriptor
 * held since the mount (the mount point itself can't be renamed or removed
 * while it is one): that reaches it through any rename above it, in a loop
 * or not, and at a path longer than PATH_MAX.  Then any mount with its tag
 * and device number left in mountinfo (fb_fuse_take_off_tagged).  0 when
 * none of ours is left; otherwise the last error.  Without the device
 * number (mountinfo did not show it when mounted), by path as before. */
static int
unmount_ours (FbFuse *f)
{
  if (f->mount_dev == 0 || f->mount_source == NULL)
    {
      if (umount2 (f->mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW) == 0 || errno == EINVAL ||
          run_fusermount_unmount (f->mountpoint) == 0)
        return 0;
      return -EIO;
    }
  return fb_fuse_take_off_ours (f->mount_parent, f->mount_name, f->mount_source, f->mount_dev);
}

const char *
fb_fuse_get_mount_source (FbFuse *f)
{
  return f->mount_source;
}

void
fb_fuse_stop (FbFuse *f)
{
  /* first: its root descriptor would keep the mount, and so the
   * connection, alive */
  fb_fuse_warm_stop (f);
  if (f->se == NULL)
    return;
  /* The session is not marked as exited: the workers keep answering (the
   * RELEASE of a file closed just now, the files still open in the detached
   * mount) until the kernel ends the connection and they read ENODEV. */
  if (f->mountpoint != NULL && !f->unmounted)
    {
      /* Lazily: the mount leaves the namespace now, the connection ends
       * when the last file open in it is closed. */
      if (unmount_ours (f) == 0)
        f->unmounted = true;
    }
  else if (f->mountpoint == NULL)
    {
      /* A served descriptor: the mount is in the sandbox's namespace and
       * ends with it; mark the session so that the workers leave at their
       * next request (fb_fuse_abort() wakes them now). */
      fuse_session_exit (f->se);
    }
}

static void
wake_handler (int sig)
{
  /* nothing: the point is the EINTR it causes */
}

/* Interrupt every FUSE thread's blocking read(): with the session marked as
 * exited, each worker then leaves its loop instead of waiting for a request
 * that may never come (a detached mount with a file still open in it).
 * The threads are found by name: all inherit "fusebox-fuse" from the
 * serving thread.  The signal's handler does nothing and is installed
 * without SA_RESTART. */
static int
interrupt_workers (void)
{
  struct sigaction sa = { 0 };
  g_autoptr (GDir) dir = NULL;
  const char *name;
  int n = 0;

  sa.sa_handler = wake_handler;
  sigemptyset (&sa.sa_mask);
  if (sigaction (FB_FUSE_WAKE_SIGNAL, &sa, NULL) < 0)
    return -errno;
  dir = g_dir_open ("/proc/self/task", 0, NULL);
  if (dir == NULL)
    return -ENOENT;
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *comm_path = g_build_filename ("/proc/self/task", name, "comm", NULL);
      g_autofree char *comm = NULL;
      pid_t tid = (pid_t)atoi (name);
      if (!g_file_get_contents (comm_path, &comm, NULL, NULL) || strcmp (g_strchomp (comm), "fusebox-fuse") != 0)
        continue;
      if (syscall (SYS_tgkill, getpid (), tid, FB_FUSE_WAKE_SIGNAL) == 0)
        n++;
    }
  return n > 0 ? 0 : -ESRCH;
}

int
fb_fuse_abort (FbFuse *f)
{
  fb_fuse_warm_stop (f);
  if (f->se == NULL)
    return -ENOTCONN;
  fuse_session_exit (f->se);
  /* The kernel's own switch when fusectl is mounted: pending requests fail
   * at once.  Otherwise the workers are woken and leave; closing the last
   * /dev/fuse descriptor (fb_fuse_free) then ends the connection. */
  if (f->abort_fd >= 0 && write (f->abort_fd, "1", 1) == 1)
    return 0;
  return interrupt_workers ();
}

void
fb_fuse_free (FbFuse *f)
{
  if (f == NULL)
    return;
  fb_fuse_warm_stop (f);
  if (f->thread != NULL)
    fb_fuse_join (f);
  inval_finish (f);
  warm_free (f);
  if (f->se != NULL)
    {
      /* Unmount only what we mounted and did not unmount already: after a
       * lazy unmount the path may hold someone else's mount by now.  When
       * the connection is over (POLLERR), fuse_session_unmount only frees
       * its copy of the path. */
      struct pollfd pfd = { .fd = fuse_session_fd (f->se), .events = 0 };
      if (f->mountpoint != NULL && !f->unmounted && f->mount_dev != 0)
        {
          /* not by path (unmount_ours); libfuse's copy of it only freed */
          int r = unmount_ours (f);
          if (r < 0)
            g_printerr ("fusebox: the view's mount (source %s, device %u:%u) could not be taken off: %s; it serves "
                        "nothing: find it in /proc/self/mountinfo by that source and remove it with 'umount -l "
                        "PATH'\n",
                        f->mount_source, major (f->mount_dev), minor (f->mount_dev), g_strerror (-r));
        }
      else if ((f->mountpoint != NULL && !f->unmounted) ||
               (f->mountpoint != NULL && poll (&pfd, 1, 0) == 1 && (pfd.revents & POLLERR)))
        fuse_session_unmount (f->se);
      fuse_session_destroy (f->se);
    }
  /* Files whose RELEASE never came (see files_add) */
  {
    GHashTableIter iter;
    gpointer key;
    g_hash_table_iter_init (&iter, f->files);
    while (g_hash_table_iter_next (&iter, &key, NULL))
      {
        FbViewFile *file = key;
        if (fb_view_file_is_dir (file))
          fb_view_releasedir (f->view, file);
        else
          fb_view_release (f->view, file);
      }
    g_hash_table_destroy (f->files);
    g_mutex_clear (&f->files_lock);
  }
  inval_clear (f);
  fb_view_drop_kernel_refs (f->view);
  fb_view_node_unref (f->root);
  fb_view_unref (f->view);
  if (f->abort_fd >= 0)
    close (f->abort_fd);
  if (f->mount_parent >= 0)
    close (f->mount_parent);
  g_free (f->mountpoint);
  g_free (f->mount_name);
  g_free (f->mount_source);
  g_free (f->fsname);
  g_free (f);
}
