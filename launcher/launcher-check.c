/* fusebox — `fusebox check`: can `fusebox run` work here, and if not, why.
 *
 * Each prerequisite is probed in its own forked child with a timeout (a
 * probe that hangs — a FUSE mount waiting on a dead server, say — must not
 * hang the check), and gets one line: OK, or the problem and its fix.  The
 * probes go from the general to the specific (user namespaces, then maps,
 * then mounts inside one), so the first failing line is the cause and the
 * later ones its consequences.
 *
 * Runs single-threaded (the probes fork).  Sysctls are read from
 * options->sysctl_root so tests can feed other values; the kernel probes
 * always use the real kernel.
 */
#include "ipc/ipc-proxy.h"
#include "launcher/launcher.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct
{
  const char *fuse_path;
  const char *sysctl_root;
  guint timeout_ms;
  uid_t uid;
  gid_t gid;
  FbLauncherSeccomp *seccomp; /* NULL if it could not be built */
  int seccomp_error;
} Ctx;

/* A probe returns 0 or an errno; it runs in a forked child. */
typedef int (*ProbeFn) (const Ctx *ctx);

static int
write_file (const char *path, const char *data)
{
  _fb_cleanup_fd_ int fd = open (path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return errno;
  return write (fd, data, strlen (data)) < 0 ? errno : 0;
}

/* unshare a user namespace (plus EXTRA) and map our ids 1:1 */
static int
enter_userns (const Ctx *ctx, int extra)
{
  char line[64];
  int e;
  if (unshare (CLONE_NEWUSER | extra) < 0)
    return errno;
  if ((e = write_file ("/proc/self/setgroups", "deny")) != 0 && e != ENOENT)
    return e;
  snprintf (line, sizeof line, "%u %u 1\n", (unsigned)ctx->uid, (unsigned)ctx->uid);
  if ((e = write_file ("/proc/self/uid_map", line)) != 0)
    return e;
  snprintf (line, sizeof line, "%u %u 1\n", (unsigned)ctx->gid, (unsigned)ctx->gid);
  return write_file ("/proc/self/gid_map", line);
}

static int
probe_userns (const Ctx *ctx)
{
  return unshare (CLONE_NEWUSER) < 0 ? errno : 0;
}

static int
probe_maps (const Ctx *ctx)
{
  return enter_userns (ctx, 0);
}

/* A mount namespace with a private tmpfs: what the staging step does. */
static int
probe_userns_mount (const Ctx *ctx)
{
  int e = enter_userns (ctx, CLONE_NEWNS);
  if (e)
    return e;
  if (mount (NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
    return errno;
  if (mount ("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=16k") < 0)
    return errno;
  return 0;
}

static int
probe_fuse_device (const Ctx *ctx)
{
  struct stat st;
  if (stat (ctx->fuse_path, &st) < 0)
    return errno;
  if (!S_ISCHR (st.st_mode) || major (st.st_rdev) != 10 || minor (st.st_rdev) != 229)
    return ENODEV;
  _fb_cleanup_fd_ int fd = open (ctx->fuse_path, O_RDWR | O_CLOEXEC);
  return fd < 0 ? errno : 0;
}

/* The launcher's FUSE step, without a server: open the device inside the
 * user namespace, mount it on a private tmpfs, unmount.  mount(2) returns
 * before FUSE_INIT is answered, so nothing waits for a server. */
static int
probe_fuse_mount (const Ctx *ctx)
{
  int e = probe_userns_mount (ctx);
  if (e)
    return e;
  if (mkdir ("/tmp/m", 0700) < 0)
    return errno;
  _fb_cleanup_fd_ int fd = open (ctx->fuse_path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return errno;
  char opts[128];
  snprintf (opts, sizeof opts, "fd=%d,rootmode=40000,user_id=%u,group_id=%u", fd, (unsigned)ctx->uid,
            (unsigned)ctx->gid);
  if (mount ("fuse", "/tmp/m", "fuse", MS_NOSUID | MS_NODEV, opts) < 0)
    return errno;
  if (umount2 ("/tmp/m", MNT_DETACH) < 0)
    return errno;
  return 0;
}

/* A procfs for a new pid namespace, mounted by its pid 1. */
static int
probe_procfs (const Ctx *ctx)
{
  int e = enter_userns (ctx, CLONE_NEWNS | CLONE_NEWPID);
  if (e)
    return e;
  int p[2];
  if (pipe2 (p, O_CLOEXEC) < 0)
    return errno;
  pid_t pid = fork ();
  if (pid < 0)
    return errno;
  if (pid == 0)
    {
      int r = 0;
      if (mount (NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0 || mount ("tmpfs", "/tmp", "tmpfs", 0, "size=16k") < 0 ||
          mkdir ("/tmp/proc", 0755) < 0)
        r = errno;
      else if (mount ("proc", "/tmp/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        r = errno;
      (void)!write (p[1], &r, sizeof r);
      _exit (0);
    }
  close (p[1]);
  int r = EIO;
  if (read (p[0], &r, sizeof r) != sizeof r)
    r = EIO;
  waitpid (pid, NULL, 0);
  return r;
}

/* Why a fresh procfs is refused with EPERM, from the caller's mount table.
 *
 * In a user namespace the kernel mounts a procfs only while a procfs of the
 * same mount namespace is "fully visible" (fs/namespace.c,
 * mount_too_revealing() -> mnt_already_visible()): mounted at its root,
 * with nothing mounted over any of its entries except the permanently
 * empty directories (binfmt_misc), because a new procfs would uncover what
 * those mounts hide.  Every mount inherited by a new user namespace is
 * locked, so a procfs with anything on it does not count.  This lists what
 * covers each procfs here (one per line of /proc/self/mountinfo whose
 * parent is a procfs mounted at its root), so the message can name the
 * masks.  Returns NULL when no procfs is visible, "" when one is fully
 * visible (then EPERM has another cause: an LSM, a read-only /proc...). */
static char *
proc_covers (const char *mountinfo_path)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents (mountinfo_path, &text, NULL, NULL))
    return NULL;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  /* the mount ids of procfs mounts at their root, and of those covered */
  g_autoptr (GHashTable) procs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GHashTable) covered = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GPtrArray) covers = g_ptr_array_new_with_free_func (g_free);

  /* id parent maj:min root mountpoint options... - fstype source superoptions */
  for (char **l = lines; *l; l++)
    {
      g_auto (GStrv) f = g_strsplit (*l, " ", 6);
      const char *sep = strstr (*l, " - ");
      if (g_strv_length (f) == 6 && sep && strncmp (sep, " - proc ", 8) == 0 && strcmp (f[3], "/") == 0)
        g_hash_table_add (procs, g_strdup (f[0]));
    }
  if (g_hash_table_size (procs) == 0)
    return NULL;
  for (char **l = lines; *l; l++)
    {
      g_auto (GStrv) f = g_strsplit (*l, " ", 6);
      if (g_strv_length (f) < 6 || !g_hash_table_contains (procs, f[1]))
        continue;
      /* the kernel exempts permanently empty directories: binfmt_misc */
      if (g_str_has_suffix (f[4], "/sys/fs/binfmt_misc"))
        continue;
      g_hash_table_add (covered, g_strdup (f[1]));
      if (!g_ptr_array_find_with_equal_func (covers, f[4], g_str_equal, NULL))
        g_ptr_array_add (covers, g_strdup (f[4]));
    }
  if (g_hash_table_size (covered) < g_hash_table_size (procs))
    return g_strdup ("");
  g_ptr_array_add (covers, NULL);
  return g_strjoinv (", ", (char **)covers->pdata);
}

static int
probe_seccomp (const Ctx *ctx)
{
  if (!ctx->seccomp)
    return ctx->seccomp_error;
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return errno;
  int r = fb_launcher_seccomp_install (ctx->seccomp);
  if (r < 0)
    return -r;
  /* the filter must be in force: unshare(0) is harmless and denied */
  if (unshare (0) == 0 || errno != EPERM)
    return ENOTSUP;
  return 0;
}

/* The whole launch, with the host's "/" read-only as root; with PROXY, a
 * network allowlist's too: the socket listening at 127.0.0.1:FB_PROXY_PORT
 * in the sandbox's own network namespace must reach us (ENOTCONN when it
 * did not). */
static int
launch_probe (const Ctx *ctx, bool proxy)
{
  g_autofree char *true_path = g_find_program_in_path ("true");
  const char *argv[] = { true_path ? true_path : "/bin/true", NULL };
  FbLauncherPlan plan;
  fb_launcher_plan_init (&plan);
  plan.root_kind = FB_LAUNCHER_ROOT_HOST_DIR;
  plan.root_dir = "/";
  plan.argv = argv;
  plan.proxy_port = proxy ? FB_PROXY_PORT : 0;
  int devnull = open ("/dev/null", O_RDWR | O_CLOEXEC);
  plan.stdin_fd = plan.stdout_fd = plan.stderr_fd = devnull;
  FbLauncherChild *child = NULL;
  int r = fb_launcher_spawn (&plan, &child);
  if (r < 0)
    return -r;
  int code = 0;
  r = fb_launcher_child_wait_exec (child);
  int err = 0;
  if (r == 0 && proxy)
    {
      _fb_cleanup_fd_ int fd = fb_launcher_child_take_proxy_fd (child);
      int listening = 0;
      socklen_t len = sizeof listening;

      if (fd < 0 || getsockopt (fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 || !listening)
        err = ENOTCONN;
    }
  if (r < 0)
    {
      const FbLauncherFailure *f = fb_launcher_child_get_failure (child);
      /* step in the high byte, errno below: the parent decodes it */
      err = f ? (int)(f->step << 16) | (f->error & 0xffff) : ECHILD;
    }
  fb_launcher_child_wait (child, &code);
  fb_launcher_child_free (child);
  if (!err && code != 0)
    err = ECHILD;
  return err;
}

static int
probe_sandbox (const Ctx *ctx)
{
  return launch_probe (ctx, false);
}

static int
probe_proxy (const Ctx *ctx)
{
  return launch_probe (ctx, true);
}

/* Fork, run FN, wait up to the timeout.  Returns 0, the probe's errno, or
 * ETIMEDOUT. */
static int
run_probe (const Ctx *ctx, ProbeFn fn)
{
  int p[2];
  if (pipe2 (p, O_CLOEXEC) < 0)
    return errno;
  fflush (NULL); /* nothing buffered may be written twice */
  pid_t pid = fork ();
  if (pid < 0)
    {
      int e = errno;
      close (p[0]);
      close (p[1]);
      return e;
    }
  if (pid == 0)
    {
      close (p[0]);
      /* a probe left behind by a killed check must not live on */
      prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      int r = fn (ctx);
      (void)!write (p[1], &r, sizeof r);
      _exit (0);
    }
  close (p[1]);
  struct pollfd pfd = { .fd = p[0], .events = POLLIN };
  int r;
  int n;
  do
    n = poll (&pfd, 1, (int)ctx->timeout_ms);
  while (n < 0 && errno == EINTR);
  if (n == 0)
    {
      kill (pid, SIGKILL);
      r = ETIMEDOUT;
    }
  else if (read (p[0], &r, sizeof r) != sizeof r)
    r = ECHILD; /* died without an answer */
  close (p[0]);
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
  return r;
}

/* Whether ID is mapped in this process's user namespace (MAP_PATH:
 * /proc/self/uid_map or gid_map, lines "inside outside count"). */
static bool
id_is_mapped (const char *map_path, guint32 id)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents (map_path, &text, NULL, NULL))
    return true; /* no way to tell: the launch will */
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (char **l = lines; *l; l++)
    {
      guint64 first, count;
      char *end;
      first = g_ascii_strtoull (*l, &end, 10);
      if (end == *l)
        continue;
      g_ascii_strtoull (end, &end, 10);
      count = g_ascii_strtoull (end, NULL, 10);
      if (id >= first && id - first < count)
        return true;
    }
  return false;
}

/* "crw-rw-rw- root:root (0666)" for a message. */
static char *
describe_mode (const struct stat *st)
{
  static const char rwx[] = "rwxrwxrwx";
  char bits[10];
  for (int i = 0; i < 9; i++)
    bits[i] = st->st_mode & (0400 >> i) ? rwx[i] : '-';
  bits[9] = 0;
  g_autofree char *user = NULL, *group = NULL;
  struct passwd *pw = getpwuid (st->st_uid);
  struct group *gr = getgrgid (st->st_gid);
  user = pw ? g_strdup (pw->pw_name) : g_strdup_printf ("%u", (unsigned)st->st_uid);
  group = gr ? g_strdup (gr->gr_name) : g_strdup_printf ("%u", (unsigned)st->st_gid);
  return g_strdup_printf ("c%s %s:%s (%04o)", bits, user, group, (unsigned)(st->st_mode & 07777));
}

static char *
read_sysctl (const Ctx *ctx, const char *name)
{
  g_autofree char *path = g_build_filename (ctx->sysctl_root, name, NULL);
  char *value = NULL;
  if (!g_file_get_contents (path, &value, NULL, NULL))
    return NULL;
  return g_strstrip (value);
}

typedef struct
{
  FILE *out;
  bool quiet_ok;
  int failures;
} Report;

static void
line_ok (Report *rep, const char *what, const char *detail)
{
  if (rep->quiet_ok)
    return;
  fprintf (rep->out, "OK    %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
}

static void G_GNUC_PRINTF (3, 4) line_fail (Report *rep, const char *what, const char *format, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;
  va_start (ap, format);
  msg = g_strdup_vprintf (format, ap);
  va_end (ap);
  fprintf (rep->out, "FAIL  %s: %s\n", what, msg);
  rep->failures++;
}

/* A launch probe's line: E is 0, an errno, or a failed step in its high
 * bits (launch_probe). */
static void
launch_line (Report *rep, const char *what, int e)
{
  FbLauncherFailure f = { .step = (FbLauncherStep)(e >> 16), .error = e & 0xffff };

  if (e == 0)
    line_ok (rep, what, NULL);
  else if (f.step == FB_LAUNCHER_STEP_NONE)
    line_fail (rep, what, "%s", g_strerror (f.error));
  else
    {
      const char *argv[] = { "true", NULL };
      FbLauncherPlan plan;
      g_autofree char *msg = NULL;

      fb_launcher_plan_init (&plan);
      plan.root_dir = "/";
      plan.argv = argv;
      msg = fb_launcher_describe_failure (&plan, &f);
      line_fail (rep, what, "%s", msg);
    }
}

static char *
apparmor_fix (void)
{
  g_autofree char *exe = g_file_read_link ("/proc/self/exe", NULL);
  return g_strdup_printf ("install an AppArmor profile that lets fusebox use user namespaces: printf 'abi <abi/4.0>,\\n"
                          "include <tunables/global>\\nprofile fusebox %s flags=(unconfined) {\\n  userns,\\n}\\n' | "
                          "sudo tee /etc/apparmor.d/fusebox && sudo apparmor_parser -r /etc/apparmor.d/fusebox "
                          "(or, for the whole host: sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0)",
                          exe ? exe : "/usr/bin/fusebox");
}

int
fb_launcher_check_run (const FbLauncherCheckOptions *options, FILE *out)
{
  Ctx ctx = {
    .fuse_path = options && options->fuse_path ? options->fuse_path : "/dev/fuse",
    .sysctl_root = options && options->sysctl_root ? options->sysctl_root : "/proc/sys",
    .timeout_ms = options && options->timeout_ms ? options->timeout_ms : 5000,
    .uid = geteuid (),
    .gid = getegid (),
  };
  Report rep = { .out = out, .quiet_ok = options && options->quiet_ok };
  int e;

  ctx.seccomp_error = -fb_launcher_seccomp_new (&ctx.seccomp);

  /* -- user namespaces: the sysctls first, they explain the probe -- */
  g_autofree char *max_userns = read_sysctl (&ctx, "user/max_user_namespaces");
  g_autofree char *apparmor = read_sysctl (&ctx, "kernel/apparmor_restrict_unprivileged_userns");
  g_autofree char *debian_clone = read_sysctl (&ctx, "kernel/unprivileged_userns_clone");
  bool max_zero = max_userns && strcmp (max_userns, "0") == 0;
  bool apparmor_on = apparmor && strcmp (apparmor, "1") == 0 && ctx.uid != 0;
  bool debian_off = debian_clone && strcmp (debian_clone, "0") == 0 && ctx.uid != 0;

  if (max_zero)
    line_fail (&rep, "user.max_user_namespaces",
               "is 0, so no user namespace can be made; fix: sudo sysctl "
               "user.max_user_namespaces=15000 (and in /etc/sysctl.d/ to keep it)");
  else
    line_ok (&rep, "user.max_user_namespaces", max_userns);

  e = run_probe (&ctx, probe_userns);
  if (e == 0)
    line_ok (&rep, "user namespaces", NULL);
  else if (debian_off)
    line_fail (&rep, "user namespaces",
               "unshare(CLONE_NEWUSER): %s: kernel.unprivileged_userns_clone is 0; fix: sudo "
               "sysctl kernel.unprivileged_userns_clone=1",
               g_strerror (e));
  else if (e == ENOSPC || e == EUSERS)
    line_fail (&rep, "user namespaces",
               "unshare(CLONE_NEWUSER): %s: the user.max_user_namespaces limit is reached "
               "(or nesting is too deep); fix: raise it with sysctl",
               g_strerror (e));
  else
    line_fail (&rep, "user namespaces",
               "unshare(CLONE_NEWUSER): %s: something forbids them here (a container's "
               "seccomp profile, e.g. docker's default: run it with --security-opt "
               "seccomp=unconfined, or use podman/bwrap which allow them)",
               g_strerror (e));

  e = run_probe (&ctx, probe_maps);
  if (e == 0)
    line_ok (&rep, "uid/gid maps", NULL);
  else
    line_fail (&rep, "uid/gid maps",
               "writing /proc/self/uid_map, gid_map (mapping %u and %u to themselves): %s; fix: %s", (unsigned)ctx.uid,
               (unsigned)ctx.gid, g_strerror (e),
               e == EACCES ? "the files could not be written at all: a Landlock domain this program runs in (an "
                             "agent's own sandbox, often) lets it write no file outside its own: run fusebox outside "
                             "it; in a container, /proc must not be read-only"
                           : "see the user namespace line above; in a container, /proc must not be read-only");

  /* Who the sandbox is on the host (docs/security.md, "Identity"). */
  FbLauncherIdentity identity;
  fb_launcher_identity_get (&identity);
  if (!identity.root_caller)
    line_ok (&rep, "sandbox identity", "your own uid and gid on the host");
  else if (id_is_mapped ("/proc/self/uid_map", identity.host_uid) &&
           id_is_mapped ("/proc/self/gid_map", identity.host_gid))
    {
      g_autofree char *detail = g_strdup_printf (
        "uid %u and gid %u (nobody) on the host, never root: you are the host's root; what the command creates "
        "in the view is still yours",
        identity.host_uid, identity.host_gid);
      line_ok (&rep, "sandbox identity", detail);
    }
  else
    line_fail (&rep, "sandbox identity",
               "you are the host's root, whose sandboxes run as the overflow ids %u:%u (nobody), never as root, "
               "but this user namespace maps no such ids (unshare -r and bwrap --unshare-user run as root map "
               "root alone); fix: run fusebox outside it, or run the outer sandbox as a normal user",
               identity.host_uid, identity.host_gid);

  int mount_e = run_probe (&ctx, probe_userns_mount);
  if (apparmor)
    {
      if (!apparmor_on || mount_e == 0)
        line_ok (&rep, "kernel.apparmor_restrict_unprivileged_userns",
                 apparmor_on ? "1, but this program may use user namespaces" : apparmor);
      else
        {
          g_autofree char *fix = apparmor_fix ();
          line_fail (&rep, "kernel.apparmor_restrict_unprivileged_userns",
                     "is 1: AppArmor strips unprivileged user namespaces of their capabilities (mount: %s); fix: %s",
                     g_strerror (mount_e), fix);
        }
    }
  if (mount_e == 0)
    line_ok (&rep, "mounts in a user namespace", NULL);
  else
    line_fail (&rep, "mounts in a user namespace", "a tmpfs in a new user+mount namespace: %s; fix: %s",
               g_strerror (mount_e),
               mount_e == EPERM && !(apparmor && apparmor_on)
                 ? "something this program runs under forbids mounts: a Landlock domain does, whatever it allows "
                   "(an agent's own sandbox, such as Codex's, is often one: run fusebox outside it), and so may "
                   "SELinux or a container's profile"
                 : "see the lines above");

  e = run_probe (&ctx, probe_fuse_device);
  bool fuse_ok = e == 0;
  struct stat fuse_st;
  if (e == 0 && stat (ctx.fuse_path, &fuse_st) == 0)
    {
      /* Its mode decides who can run sandboxes; what fusebox does with it
       * is the same either way. */
      g_autofree char *mode = describe_mode (&fuse_st);
      g_autofree char *detail = g_strdup_printf (
        "%s: %s; each sandbox opens it once, inside its own user namespace and before it takes its ids there, and "
        "keeps no copy once fusebox serves the connection",
        mode,
        (fuse_st.st_mode & 0006) == 0006 ? "every user may open it (the fuse3 packages' default), so normal users "
                                           "can run sandboxes too"
                                         : "only those its mode names may open it (usually root alone), and so run "
                                           "sandboxes");
      line_ok (&rep, ctx.fuse_path, detail);
    }
  else if (e == 0)
    line_ok (&rep, ctx.fuse_path, NULL);
  else if (e == ENOENT)
    line_fail (&rep, ctx.fuse_path,
               "missing; fix: sudo modprobe fuse (package fuse3), or in a container pass the "
               "device (docker/podman --device /dev/fuse, bwrap --dev-bind /dev/fuse /dev/fuse)");
  else if (e == EACCES || e == EPERM)
    line_fail (&rep, ctx.fuse_path,
               "not openable for read and write (%s); fix: sudo chmod 0666 %s (the fuse3 "
               "package's default), or a container's device cgroup must allow it",
               g_strerror (e), ctx.fuse_path);
  else
    line_fail (&rep, ctx.fuse_path,
               "not the FUSE device (char 10:229) or unusable: %s; fix: recreate it with sudo "
               "mknod -m 0666 /dev/fuse c 10 229",
               g_strerror (e));

  if (!fuse_ok)
    line_fail (&rep, "FUSE mount in a user namespace", "not tried: %s is unusable", ctx.fuse_path);
  else if ((e = run_probe (&ctx, probe_fuse_mount)) == 0)
    line_ok (&rep, "FUSE mount in a user namespace", NULL);
  else
    line_fail (&rep, "FUSE mount in a user namespace", "%s; fix: %s", g_strerror (e),
               e == ENODEV  ? "sudo modprobe fuse"
               : e == EPERM ? "the kernel must allow FUSE in user namespaces (Linux 4.18 or later) and nothing "
                              "(AppArmor, SELinux, a container profile) may deny the mount"
                            : "see the lines above");

  e = run_probe (&ctx, probe_procfs);
  g_autofree char *covers = e == EPERM ? proc_covers ("/proc/self/mountinfo") : NULL;
  if (e == 0)
    line_ok (&rep, "fresh procfs", NULL);
  else if (e == EPERM && covers && covers[0])
    /* Checked with bwrap 0.8 on Linux 6.18: its --proc covers whichever of
     * /proc/sys, /proc/sysrq-trigger, /proc/irq and /proc/bus pass
     * access(W_OK) with read-only binds; that needs uid 0 with
     * CAP_DAC_OVERRIDE over the host's /proc, i.e. bwrap run as root with
     * its default uid (then /proc/irq and /proc/bus are covered).  As a
     * normal user every access() fails, nothing is covered, and fusebox
     * runs inside it (tests/integration/test-run-nested.c).  As root with
     * --unshare-user --uid 1000 nothing is covered either, but that uid is
     * the host's root, which the identity line refuses. */
    line_fail (&rep, "fresh procfs",
               "mounting /proc for a new pid namespace: %s: the kernel lets a user namespace mount a procfs "
               "only while one with nothing mounted over its entries is visible, and every procfs here has "
               "mounts over it (%s); fix: bwrap makes these when it runs as root with uid 0 inside: run bwrap as "
               "a normal user (as root with --unshare-user, its uids are all the host's root, which fusebox "
               "refuses to run a sandbox as); a container must unmask /proc (docker --security-opt "
               "systempaths=unconfined, podman --security-opt unmask=/proc/*)",
               g_strerror (e), covers);
  else
    line_fail (&rep, "fresh procfs", "mounting /proc for a new pid namespace: %s; fix: %s", g_strerror (e),
               e != EPERM ? "see the lines above"
               : !covers  ? "no procfs is mounted here: mount one on /proc (bwrap --proc /proc, or mount -t "
                            "proc proc /proc), which the kernel requires before a user namespace may mount its own"
                          : "a procfs is fully visible, so masks are not the cause: the kernel also wants the "
                            "new mount no less restricted than that one (a read-only /proc, or one with atime "
                            "flags other than relatime, refuses it), or a security module (AppArmor, SELinux) "
                            "forbids the mount");

  e = run_probe (&ctx, probe_seccomp);
  if (e == 0)
    line_ok (&rep, "seccomp filters", NULL);
  else
    line_fail (&rep, "seccomp filters",
               "installing the sandbox's filter: %s; fix: the kernel needs CONFIG_SECCOMP and "
               "CONFIG_SECCOMP_FILTER",
               g_strerror (e));

  /* not a prerequisite: what a command can do with the streams it is given */
  {
    int abi = fb_launcher_landlock_abi ();
    g_autofree char *detail =
      abi >= 2 ? g_strdup_printf ("ABI %d: a command opens a file or device given as one of its standard streams "
                                  "again (/proc/self/fd, /dev/stdin) only for what it was given",
                                  abi)
               : g_strdup_printf ("not used (%s): a command may open a file or directory given as one of its "
                                  "standard streams again through /proc/self/fd as far as the sandbox's host id "
                                  "may; give commands pipes, or use Linux 5.19 or later with \"landlock\" in "
                                  "the lsm= boot parameter",
                                  abi == 1 ? "ABI 1, which would refuse every rename into another directory"
                                           : "the kernel has none");
    line_ok (&rep, "Landlock", detail);
  }

  launch_line (&rep, "a whole sandbox (host / read-only as root)", run_probe (&ctx, probe_sandbox));
  /* a network allowlist's way out (ipc/ipc-proxy.h) */
  launch_line (&rep, "the network proxy's socket in the sandbox", run_probe (&ctx, probe_proxy));

  fb_launcher_seccomp_free (ctx.seccomp);
  return rep.failures;
}
