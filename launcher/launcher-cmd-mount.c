/* fusebox mount — show the host's / at a directory through the view.
 *
 *   fusebox mount [--policy FILE|builtin:NAME] [--workspace DIR] [--log FILE]
 *                 [--log-level L] [--foreground] MOUNTPOINT
 *
 * No namespaces: the same enforcement and the same access log as a
 * sandbox, for auditing a tool in place, for tests and for benchmarks.
 *
 * Process and threads.  Everything that can fail with a message a person
 * must see (options, the mount point, the policy, the run directory) is done
 * first, single-threaded.  Without --foreground the process then forks
 * before any thread exists (GLib's signal and worker threads, libfuse's
 * workers); the parent waits on a CLOEXEC pipe and exits 0 once the child
 * says the mount works, or 1 with the child's message.  The daemon runs the
 * GLib main loop on its main thread (signals; the access log's queue, for
 * when the file refuses data) and the FUSE session on worker threads, which
 * write their own access records before they answer (write-through).
 * The run directory, policy.json, run.json (the daemon is the run's
 * supervisor, so `fusebox runs` lists the mount while it lives), the log
 * and the end of the FUSE session are the run's, as for `run` and `serve`
 * (ipc/ipc.h, "one run").
 * SIGINT, SIGTERM and SIGHUP unmount lazily and stop; if files stay open in
 * the detached mount, the connection is aborted after a grace period (or at
 * a second signal).  An external `fusermount3 -u` ends the session the same
 * way.  At the end the log is drained, fsynced and closed; a normal stop
 * never leaves a mount behind, and the unmount watcher (below) covers a
 * killed one, which fusermount3's auto_unmount does not always see.
 */
#include "fs/fs.h"
#include "ipc/ipc.h"
#include "launcher/launcher-private.h"
#include "policy/policy.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_SPEC "builtin:default"
/* How long a stop waits for files still open in the detached mount. */
#define ABORT_GRACE_MS 2000

static int
usage_error (const char *message)
{
  return fb_cmd_usage_error ("mount", message);
}

/* The type of the filesystem mounted at PATH (for a message), or NULL. */
static char *
mounted_type (const char *path)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  char *type = NULL;

  if (!g_file_get_contents ("/proc/self/mountinfo", &text, NULL, NULL))
    return NULL;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      char mnt[4096], fstype[256];
      const char *sep = strstr (lines[i], " - ");
      if (sep != NULL && sscanf (lines[i], "%*u %*u %*u:%*u %*s %4095s", mnt) == 1 && strcmp (mnt, path) == 0 &&
          sscanf (sep + 3, "%255s", fstype) == 1)
        {
          g_free (type);
          type = g_strdup (fstype);
        }
    }
  return type;
}

/* Check the mount point before anything else, with a message naming the
 * path and the fix.  Returns its canonical path: the one the kernel gives
 * the directory checked, which was opened once without following any
 * link, so that the path mounted on is that directory's, not what a link
 * put in its place meanwhile leads to (fb_fuse_mount then checks that the
 * mount landed there). */
static char *
check_mountpoint (const char *arg)
{
  struct statx stx;
  g_autofree char *real = NULL;
  g_autofree char *bare = g_strdup (arg);
  gsize len = strlen (bare);
  struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS };
  _fb_cleanup_fd_ int fd = -1;
  int err = 0;
  char proc[64];

  while (len > 1 && bare[len - 1] == '/')
    bare[--len] = '\0'; /* "link/" names the target: the link still decides */
  /* nothing on another user's FUSE filesystem: the stat below would ask it */
  {
    g_autoptr (GError) error = NULL;
    if (!fb_path_check_not_foreign_fuse (bare, "the mount point", "mount on a directory of yours", &error))
      {
        fb_cmd_error ("mount: %s", error->message);
        return NULL;
      }
  }
  /* No link anywhere on the way: one a sandbox made (in its workspace, its
   * links are the caller's) or later swapped in would choose the directory
   * mounted on, and any whose name matches the last part will do. */
  fd = (int)syscall (SYS_openat2, AT_FDCWD, bare, &how, sizeof how);
  if (fd < 0 || statx (fd, "", AT_EMPTY_PATH, STATX_TYPE, &stx) < 0)
    err = errno;
  if (err != 0 && err != ELOOP)
    {
      if (err == ENOENT)
        fb_cmd_error ("mount: the mount point %s does not exist; create it first (mkdir -p %s)", arg, arg);
      else if (err == ENOTCONN)
        fb_cmd_error ("mount: %s is a stale FUSE mount whose daemon is gone; unmount it with 'fusermount3 -u %s'", arg,
                      arg);
      else
        fb_cmd_error ("mount: can't use the mount point %s: %s", arg, g_strerror (err));
      return NULL;
    }
  /* The mount is made by path: no other user may change what it names
   * (a directory of theirs on the way, or the mount point itself, could
   * become a link to /etc between this check and the mount). */
  {
    g_autoptr (GError) error = NULL;
    if (!fb_path_check_private (arg, true, "the mount point",
                                "mount on a directory of yours where no other user may write on the way", &error))
      {
        fb_cmd_error ("mount: %s", error->message);
        return NULL;
      }
  }
  if (err == ELOOP)
    {
      struct stat lst;
      g_autofree char *canonical = fb_realpath (bare);

      /* A link as the mount point: the mount would cover where it leads,
       * and whoever could write where the link is (a sandbox, whose files
       * are the caller's) chose that: /etc, say. */
      if (lstat (bare, &lst) == 0 && S_ISLNK (lst.st_mode))
        {
          g_autofree char *target = g_file_read_link (bare, NULL);
          fb_cmd_error ("mount: the mount point %s is a symbolic link (to %s); give the directory itself (a link "
                        "where a sandbox could write may have been put there by it, to have the view cover what it "
                        "leads to)",
                        bare, target != NULL ? target : "?");
        }
      else
        fb_cmd_error ("mount: the way to the mount point %s passes through a symbolic link; whatever can write "
                      "where the link is (a sandbox whose workspace holds it) could make it lead the mount "
                      "elsewhere: give the path without links%s%s%s",
                      arg, canonical != NULL ? " (" : "", canonical != NULL ? canonical : "",
                      canonical != NULL ? ")" : "");
      return NULL;
    }
  if (!S_ISDIR (stx.stx_mode))
    {
      fb_cmd_error ("mount: the mount point %s is not a directory; give an (empty) directory to mount on", arg);
      return NULL;
    }
  g_snprintf (proc, sizeof proc, "/proc/self/fd/%d", fd);
  real = g_file_read_link (proc, NULL);
  if (real == NULL || real[0] != '/' || g_str_has_suffix (real, " (deleted)"))
    {
      fb_cmd_error ("mount: can't resolve the mount point %s: %s", arg,
                    real == NULL ? g_strerror (errno) : "it was removed meanwhile");
      return NULL;
    }
  /* still at the name given: a directory moved away meanwhile (and
   * something else put in its place) is not mounted on where it went */
  {
    g_autofree char *base = g_path_get_basename (bare);
    g_autofree char *dir = g_path_get_dirname (bare);
    g_autofree char *dir_real = NULL;
    g_autofree char *expected = NULL;

    if (strcmp (base, ".") != 0 && strcmp (base, "..") != 0 && strcmp (base, "/") != 0)
      {
        dir_real = fb_realpath (dir);
        expected = dir_real == NULL ? NULL : g_build_filename (dir_real, base, NULL);
        if (expected == NULL || strcmp (expected, real) != 0)
          {
            fb_cmd_error ("mount: the mount point %s was moved while it was checked (the directory is now %s); "
                          "something that can write beside it (a sandbox whose workspace holds it) is changing it: "
                          "mount where no sandbox runs",
                          arg, real);
            return NULL;
          }
      }
  }
  if ((stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) &&
      strcmp (real, "/") != 0)
    {
      g_autofree char *type = mounted_type (real);
      fb_cmd_error ("mount: %s is busy: a %s filesystem is already mounted there; unmount it first "
                    "(fusermount3 -u %s, or umount %s) or choose another directory",
                    real, type != NULL ? type : "", real, real);
      return NULL;
    }
  return g_steal_pointer (&real);
}

/* --- the unmount watcher ------------------------------------------------------ */

/* SIGKILL of the daemon must leave no mount.  Two processes outlive it to
 * see to that.  fusermount3's auto_unmount, since the root's attributes
 * are never cached (fb_fuse_mount): before, once the daemon had answered
 * ENOSYS to an OPENDIR, the kernel opened directories without asking it,
 * so the open() by which fusermount3 tells a dead filesystem from a live
 * one (libfuse's util/fusermount.c, should_auto_unmount) succeeded on the
 * dead one and the mount stayed, answering ENOTCONN.  And this watcher,
 * for when fusermount3 is killed with the daemon (a kill of the processes
 * whose command line names fusebox takes it: fsname=fusebox).  Each is in
 * a session of its own, so a kill of the daemon's process group takes
 * neither; only a kill of all three at once (a cgroup's) leaves the mount
 * (docs/security.md, "A killed daemon leaves no mount").  The daemon forks,
 * before any thread exists, a watcher: a small process holding the read
 * end of a pipe whose write end only the daemon holds (close-on-exec, so
 * fusermount3 and every other program the daemon starts lacks it).  The
 * daemon writes 'M' once mounted, with the mount's tag (its source in
 * mountinfo, fb_fuse_mount): the watcher notes the device number of the
 * mount with that tag and holds the mount point's parent, through which,
 * or by the tag, it finds the mount again wherever a sandbox moved it (its
 * parent renamed), as the daemon's own end does.  A daemon that ends its
 * session writes 'U' once its mount is gone (it unmounted, or someone did):
 * the watcher then touches nothing.  EOF without it means the daemon died:
 * if that same mount is still there, the watcher detaches it (umount2
 * MNT_DETACH, or `fusermount3 -u -z` without the privilege).  Not EOF
 * alone, as it was: a watcher slow to see its daemon end (a loaded host)
 * found the next `fusebox mount` at the same path with the same device
 * number (the kernel hands the freed number to the next mount) and
 * detached it.  It leaves the terminal's process group and ignores the
 * stop signals, so that a Ctrl-C meant for the daemon can't take it
 * first. */

/* The device number of the topmost FUSE mount at PATH (canonical), or 0. */
static dev_t
fuse_mount_at (const char *path)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  dev_t dev = 0;

  if (!g_file_get_contents ("/proc/self/mountinfo", &text, NULL, NULL))
    return 0;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      unsigned maj, min;
      char mnt[4096];
      const char *sep = strstr (lines[i], " - ");
      if (sep == NULL || !g_str_has_prefix (sep + 3, "fuse") ||
          sscanf (lines[i], "%*u %*u %u:%u %*s %4095s", &maj, &min, mnt) != 3)
        continue;
      fb_fuse_mountinfo_unescape (mnt);
      if (strcmp (mnt, path) == 0)
        dev = makedev (maj, min); /* later lines are mounted on top */
    }
  return dev;
}

static void
watcher_unmount (const char *mountpoint, dev_t dev)
{
  /* Through a descriptor: a link a sandbox put on the way meanwhile is not
   * followed to another mount of the same name.  Unprivileged, the setuid
   * helper unmounts it by path, and checks that the mount is ours. */
  int err = -fb_fuse_take_off (mountpoint, NULL, dev);

  if (err == 0)
    return;
  /* fusermount3's auto_unmount sees the death too (fb_fuse_mount) and may
   * have been first: nothing to say then. */
  if (fuse_mount_at (mountpoint) != dev)
    return;
  if (err == EPERM)
    fb_cmd_print (stderr, "fusebox: mount: the daemon is gone and 'fusermount3 -u -z %s' failed\n", mountpoint);
  else
    fb_cmd_print (stderr, "fusebox: mount: the daemon is gone and %s could not be unmounted: %s\n", mountpoint,
                  g_strerror (err));
}

static G_GNUC_NORETURN void
watcher_main (int fd, const char *mountpoint, int err_fd)
{
  static const int ignored[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE };
  int null_fd, parent, early;
  g_autofree char *name = NULL;
  g_autofree char *early_dir = g_path_get_dirname (mountpoint);
  g_autofree char *early_name = g_path_get_basename (mountpoint);
  dev_t dev;
  char c, tag[256];
  gsize len = 0;
  ssize_t n;

  prctl (PR_SET_NAME, "fusebox-unmount");
  setsid ();
  for (guint i = 0; i < G_N_ELEMENTS (ignored); i++)
    signal (ignored[i], SIG_IGN);
  /* Hold nothing of the daemon's but the pipe: not the caller's terminal
   * or pipes (a reader waiting for EOF), not the ready pipe. */
  null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0)
    {
      dup2 (null_fd, STDIN_FILENO);
      dup2 (null_fd, STDOUT_FILENO);
      dup2 (err_fd >= 0 ? err_fd : null_fd, STDERR_FILENO);
    }
  if (dup2 (fd, 3) < 0)
    _exit (1);
  if (close_range (4, ~0U, 0) < 0)
    for (int i = 4; i < 65536; i++)
      close (i);
  /* The mount point's parent, held before the mount is made: a sandbox
   * may move it before this process has read the mount's tag, and past
   * PATH_MAX no path and no line of mountinfo leads to it any more.  Only
   * a mount of ours is ever taken off through it (fb_fuse_take_off_ours
   * checks the tag and the device), wherever the name under it leads. */
  early = open (early_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

  do
    n = read (3, &c, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1 || c != 'M')
    _exit (0); /* never mounted */
  /* then the mount's tag (its source in mountinfo), its device number
   * and a newline: they find the mount wherever a sandbox moved it since
   * (its parent renamed), and no other mount that shows the same tag */
  while (len < sizeof tag - 1 && ((n = read (3, &c, 1)) == 1 || (n < 0 && errno == EINTR)))
    {
      if (n != 1)
        continue;
      if (c == '\n')
        break;
      tag[len++] = c;
    }
  tag[len] = '\0';
  /* "TAG MAJ:MIN": the daemon's own mount, if it is still there */
  {
    char *sp = strchr (tag, ' ');
    unsigned maj, min;

    dev = 0;
    if (sp != NULL)
      {
        *sp = '\0';
        len = (size_t)(sp - tag);
        if (sscanf (sp + 1, "%u:%u", &maj, &min) == 2)
          dev = makedev (maj, min);
      }
    if (len == 0)
      dev = fuse_mount_at (mountpoint);
    else if (dev == 0)
      dev = fb_fuse_tagged_dev (tag); /* the daemon did not know it */
    else if (!fb_fuse_tagged_present (tag, dev))
      dev = 0;
  }
  if (dev == 0)
    _exit (0);
  /* and through its parent, held now (found by the tag when it was moved
   * already), as the daemon does: through any rename above it, however
   * long its path gets */
  parent = fb_fuse_hold_parent (mountpoint, len > 0 ? tag : NULL, dev, &name);
  if (parent < 0 && early >= 0)
    {
      parent = early;
      name = g_steal_pointer (&early_name);
    }
  else if (early >= 0)
    close (early);
  do
    {
      n = read (3, &c, 1);
      if (n == 1 && c == 'U')
        _exit (0); /* its mount is gone; what is there now is someone else's */
    }
  while (n > 0 || (n < 0 && errno == EINTR));
  /* The daemon died.  Only the mount it made, if it is still there
   * (fusermount3 may have unmounted it already), wherever it is now. */
  if (len > 0)
    {
      int r = fb_fuse_take_off_ours (parent, name, tag, dev);
      if (r < 0 && fb_fuse_tagged_present (tag, dev))
        fb_cmd_print (stderr,
                      "fusebox: mount: the daemon is gone and its mount (source %s) could not be unmounted: %s\n", tag,
                      g_strerror (-r));
    }
  else
    {
      if (parent >= 0)
        (void)fb_fuse_take_off_under (parent, name, NULL, dev);
      if (fuse_mount_at (mountpoint) == dev)
        watcher_unmount (mountpoint, dev);
    }
  _exit (0);
}

/* RUN_DIR/mount.log, where the daemon's and the watcher's warnings go once
 * no terminal is theirs: made new through the run directory's descriptor
 * (a sandbox that sees the run directory could have put a link there, or
 * moved the directory and put a link in its place; root would then have
 * created or appended to the file of its choice).  -1, after a warning,
 * when it can't be made: the warnings then go nowhere. */
static int
open_errlog (FbRun *run, const char *run_dir)
{
  int fd = fb_run_open_new (run, "mount.log", 0600);

  if (fd < 0)
    fb_cmd_print (stderr,
                  "fusebox: mount: warning: can't make %s/mount.log (%s); the daemon's later warnings are lost\n",
                  run_dir, g_strerror (-fd));
  return fd < 0 ? -1 : fd;
}

/* Fork the watcher (single-threaded, before the daemon starts any
 * thread).  Returns the daemon's end of the pipe, or -1 (no watcher: a
 * warning, the mount still works). */
static int
start_unmount_watcher (const char *mountpoint, int err_fd)
{
  int fds[2];
  pid_t pid;

  if (pipe2 (fds, O_CLOEXEC) < 0)
    {
      fb_cmd_print (stderr,
                    "fusebox: mount: warning: no unmount watcher (pipe: %s); a killed daemon may leave the mount\n",
                    g_strerror (errno));
      return -1;
    }
  fflush (stdout);
  fflush (stderr);
  pid = fork ();
  if (pid < 0)
    {
      fb_cmd_print (stderr,
                    "fusebox: mount: warning: no unmount watcher (fork: %s); a killed daemon may leave the mount\n",
                    g_strerror (errno));
      close (fds[0]);
      close (fds[1]);
      return -1;
    }
  if (pid == 0)
    {
      close (fds[1]);
      watcher_main (fds[0], mountpoint, err_fd);
    }
  /* Not reaped: the daemon's parent (init, or the caller) does, once the
   * daemon is gone and the watcher is orphaned. */
  close (fds[0]);
  return fds[1];
}

/* --- the daemon ------------------------------------------------------------- */

typedef struct
{
  FbRun *run;
  FbLogLevel level;
  const char *mountpoint;
  const char *run_dir;
  const char *log_path;
  double cache_timeout;
  bool foreground;
  int watch_fd;  /* the unmount watcher's pipe (-1: none) */
  int errlog_fd; /* RUN_DIR/mount.log (open_errlog), or -1 */
  /* the access log's budget, and the journal */
  guint64 log_file_size, log_max_size;
  gboolean log_journal;
} MountArgs;

typedef struct
{
  GMainLoop *loop;
  FbView *view;
  FbRunFuse *serving;
} Daemon;

/* The session is over: unmounted by us or by someone else. */
static void
serving_ended (int result, gpointer data)
{
  Daemon *d = data;

  g_main_loop_quit (d->loop);
}

/* SIGINT, SIGTERM, SIGHUP: unmount lazily; files still open in the
 * detached mount keep the connection for the grace period, or until a
 * second signal (ipc-run-fuse.c). */
static gboolean
on_signal (gpointer data)
{
  Daemon *d = data;

  if (!fb_run_fuse_is_ending (d->serving))
    fb_fuse_stop (fb_run_fuse_get_fuse (d->serving));
  fb_run_fuse_end (d->serving, ABORT_GRACE_MS);
  return G_SOURCE_CONTINUE;
}

/* The access log reached its budget, on the FUSE thread that wrote the
 * record: unmount as a SIGTERM would, from the main loop (the message
 * comes at the end of run_daemon).  What is asked meanwhile is written up
 * to the log's margin. */
static void
stop_for_budget (gpointer data)
{
  Daemon *d = data;

  if (!fb_run_fuse_is_ending (d->serving))
    on_signal (d);
}

static void
on_log_full (gpointer data)
{
  g_idle_add_once (stop_for_budget, data);
}

/* Tell the waiting parent how it went (a line), then detach from it. */
static void
report_ready (int ready_fd, const char *message)
{
  if (ready_fd < 0)
    return;
  if (write (ready_fd, message, strlen (message)) < 0)
    {
      /* the parent is gone; nothing to tell */
    }
  close (ready_fd);
}

static void
detach_stdio (int err_fd)
{
  _fb_cleanup_fd_ int null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);

  /* Warnings after the mount go to the run directory, not to a terminal
   * that may be gone. */
  if (null_fd >= 0)
    {
      dup2 (null_fd, STDIN_FILENO);
      dup2 (null_fd, STDOUT_FILENO);
      dup2 (err_fd >= 0 ? err_fd : null_fd, STDERR_FILENO);
    }
}

/* run.json, the log, the view, the mount and its FUSE threads.  NULL, or
 * the message for the person who mounted. */
static char *
start_daemon (const MountArgs *a, Daemon *d)
{
  g_autoptr (GError) error = NULL;
  const char *blank[] = { a->mountpoint, NULL };
  FbAccessLogOptions lo = { 0 };
  FbViewOptions vo;
  FbFuseOptions fo;
  FbFuse *fuse = NULL;
  int r;

  /* This process is the run's supervisor: `fusebox runs` shows it running
   * while it lives. */
  json_object_set_string_member (fb_run_get_info (a->run), "mountpoint", a->mountpoint);
  if (!fb_run_start (a->run, &error))
    return g_strdup_printf ("can't write run.json: %s", error->message);
  /* Each record reaches the file before its FUSE reply; the budget
   * unmounts (ipc/ipc-log.c). */
  lo.write_through = TRUE;
  lo.rotate_bytes = a->log_file_size;
  lo.max_bytes = a->log_max_size;
  lo.on_full = on_log_full;
  lo.on_full_data = d;
  lo.journal = fb_cmd_log_journal (a->log_journal, fb_run_get_policy (a->run), &lo.journal_socket);
  if (fb_run_open_log (a->run, &lo, &error) == NULL)
    return g_strdup_printf ("can't open the access log %s: %s; give a --log FILE you can write, in a directory "
                            "only you can write",
                            a->log_path, error->message);

  fb_run_view_options (a->run, &vo);
  vo.log_level = a->level;
  vo.blank_paths = blank;
  r = fb_view_new (fb_run_get_policy (a->run), &vo, &d->view);
  if (r < 0)
    {
      g_autofree char *why = fb_view_new_explain (r, a->run_dir);

      return g_strdup_printf ("can't open the policy's directories: %s", why);
    }

  fb_fuse_options_init (&fo);
  if (a->cache_timeout >= 0) /* else fb_fuse_options_init's defaults */
    fo.entry_timeout = fo.attr_timeout = fo.negative_timeout = a->cache_timeout;
  fb_fuse_new (d->view, &fo, &fuse);
  d->serving = fb_run_fuse_new (fuse, fb_run_get_log (a->run));
  r = fb_fuse_mount (fuse, a->mountpoint);
  if (r == -ESTALE)
    return g_strdup_printf ("the mount point %s was replaced while it was being mounted (said above), and nothing "
                            "stays mounted; a sandbox that can write beside the mount point can do that: mount where "
                            "no sandbox runs",
                            a->mountpoint);
  if (r == -EBUSY)
    {
      /* the unmount watcher holds the mount point's parent since before the
       * mount, wherever it was moved: it takes that mount off once we are
       * gone (its tag and device, as for a mount that serves) */
      const char *left = fb_fuse_get_mount_source (fuse);
      dev_t ldev = fb_fuse_get_mount_dev (fuse);
      if (left != NULL && ldev != 0 && a->watch_fd >= 0)
        {
          g_autofree char *word = g_strdup_printf ("M%s %u:%u\n", left, major (ldev), minor (ldev));
          (void)!write (a->watch_fd, word, strlen (word));
        }
      return g_strdup_printf ("the mount point %s was replaced while it was being mounted, and the view that landed "
                              "elsewhere could not be taken off (said above, with how to remove it); a sandbox that "
                              "can write beside the mount point can do that: mount where no sandbox runs",
                              a->mountpoint);
    }
  if (r < 0)
    return g_strdup_printf ("mounting at %s failed (libfuse said why above); check that /dev/fuse is usable "
                            "and that fusermount3 is installed (package fuse3), or run as root",
                            a->mountpoint);
  const char *source = fb_fuse_get_mount_source (fuse);
  dev_t mdev = fb_fuse_get_mount_dev (fuse);
  /* the tag and the device number of our own mount: another mount with
   * the same tag (ours from libfuse's first attempt, or a copy) is not it */
  g_autofree char *word = g_strdup_printf ("M%s %u:%u\n", source != NULL ? source : "", major (mdev), minor (mdev));
  if (a->watch_fd >= 0 && write (a->watch_fd, word, strlen (word)) != (ssize_t)strlen (word))
    g_printerr ("fusebox: mount: warning: the unmount watcher is gone; a killed daemon may leave the mount\n");
  r = fb_run_fuse_start (d->serving, serving_ended, d);
  if (r < 0)
    return g_strdup_printf ("can't start the FUSE threads: %s", g_strerror (-r));
  return NULL;
}

/* Mounted: say so (in the foreground) or tell the parent, and detach. */
static void
announce (const MountArgs *a, Daemon *d, int ready_fd)
{
  if (a->foreground)
    {
      const char *mode = fb_fuse_cache_mode (fb_run_fuse_get_fuse (d->serving));
      g_autofree char *fd_note = NULL;

      fb_cmd_print (stdout,
                    "fusebox: %s shows / through the policy %s\nfusebox: run directory %s\nfusebox: access log %s\n",
                    a->mountpoint, fb_policy_get_origin (fb_run_get_policy (a->run)), a->run_dir, a->log_path);
      if (strcmp (mode, "coherent") == 0)
        printf ("fusebox: caches: coherent: host changes show at once (fanotify marks on the directories shown); "
                "entries and attributes kept %.0f s where watched, %.0f s elsewhere\n",
                FB_FUSE_TIMEOUT_COHERENT, FB_FUSE_TIMEOUT_SHORT);
      else if (strcmp (mode, "short") == 0)
        printf ("fusebox: caches: short: host changes are not watched (no fanotify: Linux < 5.13 unprivileged, or "
                "FUSEBOX_NO_FANOTIFY=1); they show within %.0f s\n",
                FB_FUSE_TIMEOUT_SHORT);
      else
        printf ("fusebox: caches: fixed by --cache-timeout %g: host changes show within %g s\n", a->cache_timeout,
                a->cache_timeout);
      fd_note = fb_cmd_fd_budget_note (NULL);
      fb_cmd_print (stdout, "fusebox: %s\n", fd_note);
    }
  else
    {
      fb_cmd_fd_budget_warn ("mount");
      report_ready (ready_fd, "OK");
      detach_stdio (a->errlog_fd);
    }
  fflush (stdout);
}

static int
run_daemon (const MountArgs *a, int ready_fd)
{
  g_autoptr (GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autoptr (GError) error = NULL;
  g_autofree char *msg = NULL;
  Daemon d = { .loop = loop };
  guint sig_ids[3];
  int status = FB_EXIT_OK;

  sig_ids[0] = g_unix_signal_add (SIGINT, on_signal, &d);
  sig_ids[1] = g_unix_signal_add (SIGTERM, on_signal, &d);
  sig_ids[2] = g_unix_signal_add (SIGHUP, on_signal, &d);
  signal (SIGPIPE, SIG_IGN);

  msg = start_daemon (a, &d);
  if (msg == NULL)
    {
      announce (a, &d, ready_fd);
      ready_fd = -1;
      g_main_loop_run (loop);
      /* the session has ended (unmounted by us or by someone else) */
      int r = fb_run_fuse_finish (d.serving);
      if (r < 0)
        {
          fb_cmd_print (stderr, "fusebox: mount: the FUSE session ended with an error: %s\n", g_strerror (-r));
          status = FB_EXIT_FAILURE;
        }
    }
  /* Frees the session, unmounting our mount if it is still there (it says
   * so when it could not).  The watcher is told only when none of ours is
   * left: otherwise it tries again once we are gone. */
  {
    g_autofree char *tag = NULL;
    dev_t dev = 0;
    /* our own mount, by its device: not whichever mount shows the tag last */
    if (d.serving != NULL && (tag = g_strdup (fb_fuse_get_mount_source (fb_run_fuse_get_fuse (d.serving)))) != NULL)
      dev = fb_fuse_get_mount_dev (fb_run_fuse_get_fuse (d.serving));
    g_clear_pointer (&d.serving, fb_run_fuse_free);
    if (dev != 0 && fb_fuse_tagged_present (tag, dev))
      {
        fb_cmd_print (stderr,
                      "fusebox: mount: the view's mount (source %s) is still mounted after the daemon's end; the "
                      "unmount watcher tries again once the daemon is gone\n",
                      tag);
        status = FB_EXIT_FAILURE;
      }
    else if (a->watch_fd >= 0)
      (void)!write (a->watch_fd, "U", 1); /* to the unmount watcher: no mount of ours is left */
  }
  g_clear_pointer (&d.view, fb_view_unref);
  if (!fb_cmd_close_run_log (a->run, "mount", "the mount"))
    status = FB_EXIT_FAILURE;
  else if (msg == NULL && a->foreground)
    fb_cmd_print (
      stdout, "fusebox: unmounted %s; %" G_GUINT64_FORMAT " records in %s; %" G_GUINT64_FORMAT " host events read\n",
      a->mountpoint, fb_access_log_get_count (fb_run_get_log (a->run)), a->log_path, fb_watch_events_read ());
  if (msg != NULL)
    {
      fb_run_set_error (a->run, msg, NULL);
      if (ready_fd >= 0)
        {
          g_autofree char *line = g_strconcat ("ERR mount: ", msg, NULL);
          report_ready (ready_fd, line);
        }
      else
        fb_cmd_error ("mount: %s", msg);
      status = FB_EXIT_FAILURE;
    }
  if (!fb_run_end (a->run, status, &error))
    fb_cmd_error ("mount: can't write run.json: %s", error->message);
  for (guint i = 0; i < G_N_ELEMENTS (sig_ids); i++)
    g_source_remove (sig_ids[i]);
  return status;
}

/* The parent of a daemonizing mount: wait for the child's word. */
static int
wait_ready (int fd, pid_t child, const MountArgs *a)
{
  GString *msg = g_string_new (NULL);
  char buf[512];
  ssize_t n;
  int status;

  while ((n = read (fd, buf, sizeof buf)) != 0)
    {
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          break;
        }
      g_string_append_len (msg, buf, n);
    }
  close (fd);
  if (strcmp (msg->str, "OK") == 0)
    {
      fb_cmd_print (stdout,
                    "fusebox: %s shows / through the policy %s (daemon pid %d)\n"
                    "fusebox: run directory %s\nfusebox: access log %s\n"
                    "fusebox: stop it with 'kill %d' (or 'fusermount3 -u %s', which follows the path: not "
                    "once a sandbox could have changed the way to it)\n",
                    a->mountpoint, fb_policy_get_origin (fb_run_get_policy (a->run)), (int)child, a->run_dir,
                    a->log_path, (int)child, a->mountpoint);
      g_string_free (msg, TRUE);
      return FB_EXIT_OK;
    }
  if (g_str_has_prefix (msg->str, "ERR "))
    fb_cmd_error ("%s", msg->str + 4);
  else
    {
      waitpid (child, &status, 0);
      fb_cmd_error ("mount: the daemon exited before the mount was ready (%s); run with --foreground to see why",
                    WIFSIGNALED (status) ? g_strsignal (WTERMSIG (status)) : "no message");
    }
  g_string_free (msg, TRUE);
  return FB_EXIT_FAILURE;
}

typedef struct
{
  FbCmdRunArgs run;
  gboolean foreground;
  double cache_timeout;
  char *mountpoint; /* canonical */
} MountCommandLine;

static void
mount_command_line_clear (MountCommandLine *c)
{
  fb_cmd_run_args_clear (&c->run);
  g_free (c->mountpoint);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (MountCommandLine, mount_command_line_clear)

/* The options, the mount point, the workspace and /dev/fuse, each with a
 * message naming what is wrong.  -1, or the exit status. */
static int
parse_mount_args (int argc, char **argv, MountCommandLine *c, MountArgs *a)
{
  const GOptionEntry entries[] = {
    { "policy", 'p', 0, G_OPTION_ARG_STRING, &c->run.policy,
      "The policy: a file, or builtin:NAME (default builtin:default)", "FILE|builtin:NAME" },
    FB_CMD_RUN_ARGS_ENTRIES (&c->run),
    { "foreground", 'f', 0, G_OPTION_ARG_NONE, &c->foreground, "Stay in the foreground until stopped", NULL },
    { "cache-timeout", 0, 0, G_OPTION_ARG_DOUBLE, &c->cache_timeout,
      "Seconds the kernel keeps names, attributes and absences (default: 600 where the host's changes are "
      "watched, 2 elsewhere): how long a change made on the host outside fusebox may take to show",
      "SECONDS" },
    FB_CMD_RUN_ARGS_FILE_SIZE_ENTRY (&c->run),
    { "log-max-size", 0, 0, G_OPTION_ARG_STRING, &c->run.log_max_size,
      "The budget of all the log's files (default 256M, or the policy's log.max_size): past it, unmount", "SIZE" },
    FB_CMD_RUN_ARGS_JOURNAL_ENTRY (&c->run),
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = NULL;

  c->cache_timeout = -1; /* the view's defaults */
  a->level = FB_LOG_LEVEL_OPENS;
  ctx = fb_cmd_option_context (
    "MOUNTPOINT",
    "Show the host's / at MOUNTPOINT through the view: every access decided by the "
    "policy and logged.",
    "MOUNTPOINT is an existing directory, named without a symbolic link on its way: a link that a sandbox\n"
    "could change (one in its workspace) would choose where the view goes, so a path through one is\n"
    "refused, with the path to give instead.  Nor may it be one of the policy's sources or lie above one\n"
    "(or above the run directory, which holds private sources): the view would cover what it shows.\n"
    "\n"
    "No namespaces are made: this is the sandbox's view and log for a tool run in place, for tests and for\n"
    "benchmarks.  Absolute symlinks inside MOUNTPOINT resolve on the host, not in the view (only\n"
    "'fusebox run' makes the view the root).  Without --foreground the command returns once the mount\n"
    "works and prints the daemon's pid and run directory.  Stop it with Ctrl-C (foreground),\n"
    "SIGTERM/SIGHUP (the daemon finds its mount wherever a sandbox moved it), or 'fusermount3 -u\n"
    "MOUNTPOINT' (by path: a link a sandbox put on the way leads it to another mount); the log is then\n"
    "complete and fsynced.\n"
    "\n"
    "Exit status: 0 mounted (or, in the foreground, stopped cleanly), 1 failure, 2 usage error.");
  if (!fb_cmd_parse_options (ctx, entries, "mount", &argc, &argv))
    return FB_EXIT_USAGE;
  if (argc != 2)
    return usage_error (argc < 2 ? "no MOUNTPOINT given" : "more than one MOUNTPOINT given");
  if (c->run.level != NULL && !fb_log_level_from_string (c->run.level, &a->level))
    {
      g_autofree char *m = g_strdup_printf ("--log-level %s: unknown level; use mutations, opens or all", c->run.level);
      return usage_error (m);
    }
  if (!(c->cache_timeout == -1 || (c->cache_timeout >= 0 && c->cache_timeout <= 86400)))
    return usage_error ("--cache-timeout: give seconds between 0 and 86400");

  c->mountpoint = check_mountpoint (argv[1]);
  if (c->mountpoint == NULL)
    return FB_EXIT_FAILURE;
  if (c->run.workspace != NULL &&
      (c->run.workspace_real = fb_cmd_resolve_workspace ("mount", c->run.workspace)) == NULL)
    return FB_EXIT_FAILURE;
  if (access ("/dev/fuse", R_OK | W_OK) < 0 && geteuid () == 0)
    {
      fb_cmd_error ("mount: /dev/fuse is missing or unusable (%s); load the fuse module (modprobe fuse) or, in a "
                    "container, pass the device (--device /dev/fuse)",
                    g_strerror (errno));
      return FB_EXIT_FAILURE;
    }
  a->mountpoint = c->mountpoint;
  a->cache_timeout = c->cache_timeout;
  a->foreground = c->foreground;
  a->log_journal = c->run.log_journal;
  return -1;
}

/* The run (ipc/ipc.h, "one run"): the policy (loaded before anything is
 * made: it may say ${RUN}), the log's budget, the run directory with
 * policy.json, fusebox's state hidden by identity and never a source.
 * run.json is the daemon's (start_daemon).  -1, or the exit status. */
static int
prepare_run (const MountCommandLine *c, MountArgs *a)
{
  FbRunOptions ro = { .kind = FB_RUN_KIND_MOUNT, .workspace = c->run.workspace_real, .log_path = c->run.log };

  a->run = fb_run_new (&ro);
  a->run_dir = fb_run_get_dir (a->run);
  a->log_path = fb_run_get_log_path (a->run);
  return fb_cmd_run_args_create_run (&c->run, "mount", DEFAULT_SPEC, a->run, FB_LOG_DEFAULT_MAX_SIZE, &a->log_file_size,
                                     &a->log_max_size);
}

/* Is PATH MOUNTPOINT or below it (both canonical or literal)? */
static bool
path_under (const char *path, const char *mountpoint)
{
  gsize n = strlen (mountpoint);

  if (strcmp (mountpoint, "/") == 0)
    return true;
  return strncmp (path, mountpoint, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* No source of the policy may lie at or below the mount point: the mount
 * would cover it, and the view's check that each source is still where its
 * path leads (fs-view-source.c) would then find the view itself there and
 * refuse every path below it as moved.  Said now, naming the source and
 * the fix.  -1, or the exit status. */
static int
check_sources_outside (const MountArgs *a)
{
  guint n;
  const FbPolicyMount *mounts = fb_policy_get_mounts (fb_run_get_policy (a->run), &n);

  for (guint i = 0; i < n; i++)
    {
      const char *host = mounts[i].host_path;
      g_autofree char *real = host != NULL ? fb_realpath (host) : NULL;

      if (host == NULL || !(path_under (host, a->mountpoint) || (real != NULL && path_under (real, a->mountpoint))))
        continue;
      if (mounts[i].is_private)
        fb_cmd_error ("mount: the private source of %s is made in the run directory %s, which lies below the mount "
                      "point %s: the view would cover it; mount elsewhere, or keep fusebox's state out of it "
                      "(XDG_STATE_HOME)",
                      mounts[i].view_path, a->run_dir, a->mountpoint);
      else
        {
          /* the path as the policy gives it, and where it leads when that differs */
          g_autofree char *named =
            real != NULL && strcmp (real, host) != 0 ? g_strdup_printf ("%s (%s)", host, real) : g_strdup (host);

          fb_cmd_error ("mount: the source %s of %s lies at or below the mount point %s: the view would cover it; "
                        "mount outside the policy's sources",
                        named, mounts[i].view_path, a->mountpoint);
        }
      return FB_EXIT_FAILURE;
    }
  return -1;
}

int
fb_cmd_mount (int argc, char **argv)
{
  g_auto (MountCommandLine) c = { 0 };
  g_autoptr (FbRun) run = NULL;
  MountArgs a = { .watch_fd = -1, .errlog_fd = -1 };
  int pipefd[2];
  pid_t pid;
  int status;

  g_set_prgname ("fusebox mount");
  status = parse_mount_args (argc, argv, &c, &a);
  if (status < 0)
    status = prepare_run (&c, &a);
  run = a.run;
  if (status < 0)
    status = check_sources_outside (&a);
  if (status >= 0)
    return status;

  /* Created objects get exactly the modes the caller asked for: the kernel
   * applied the caller's umask already. */
  umask (0);

  if (a.foreground)
    {
      a.errlog_fd = open_errlog (a.run, a.run_dir);
      a.watch_fd = start_unmount_watcher (a.mountpoint, a.errlog_fd);
      return run_daemon (&a, -1);
    }

  /* Fork now, single-threaded; the parent only waits for the word. */
  if (pipe2 (pipefd, O_CLOEXEC) < 0)
    {
      fb_cmd_error ("mount: pipe: %s", g_strerror (errno));
      return FB_EXIT_FAILURE;
    }
  fflush (stdout);
  fflush (stderr);
  pid = fork ();
  if (pid < 0)
    {
      fb_cmd_error ("mount: fork: %s", g_strerror (errno));
      return FB_EXIT_FAILURE;
    }
  if (pid > 0)
    {
      close (pipefd[1]);
      return wait_ready (pipefd[0], pid, &a);
    }
  close (pipefd[0]);
  setsid ();
  if (chdir ("/") < 0)
    {
      /* stay where we are; nothing depends on it */
    }
  a.errlog_fd = open_errlog (a.run, a.run_dir);
  a.watch_fd = start_unmount_watcher (a.mountpoint, a.errlog_fd);
  status = run_daemon (&a, pipefd[1]);
  _exit (status);
}
