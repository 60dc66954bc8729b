/* fusebox — the lock-down of a sandbox process, after its mounts are made.
 *
 * Runs in the cloned child (pid 1 of the sandbox), so everything here is
 * async-signal-safe: syscalls, prctl, and libcap calls on a cap_t prepared in
 * the parent (cap_set_proc, cap_drop_bound and cap_set_secbits are thin
 * wrappers over capset/prctl).  The order matters
 * and is the one docs/security.md explains:
 *   1. setsid: no controlling terminal, so no TIOCSTI or job-control signals
 *      into the caller's terminal session (CVE-2017-5226).
 *   2. PR_SET_PDEATHSIG(SIGKILL): if the supervisor dies, the outer child
 *      dies, then pid 1, and the kernel kills the whole pid namespace.  The
 *      children set it first thing after their clone; it is set again here
 *      so that this building block holds on its own (an euid or capability
 *      gain between the two would have cleared it).
 *   2b. PR_SET_DUMPABLE(0): pid 1 and the outer child run the supervisor's
 *      image (its memory and environment; /proc/PID/exe is the host's
 *      fusebox binary).  Not dumpable, their /proc/PID/{exe,cwd,root,fd,
 *      environ,mem,map_files} answer EACCES to the sandbox, whose processes
 *      have no capability in the namespace that owns that memory (the
 *      host's): CVE-2019-5736, the /proc/PID/mem family.  The command's
 *      execve makes a new, dumpable image of a file of the view.
 *   3. securebits: root inside the user namespace gets no capabilities on
 *      execve and can't re-enable that; ambient raising is locked off.
 *   4. all five capability sets emptied (bounding and ambient first: dropping
 *      the bounding set needs CAP_SETPCAP), then read back: a partial drop
 *      fails the launch instead of running the command half-privileged.
 *   5. PR_SET_NO_NEW_PRIVS: execve can't add privileges (setuid bits, file
 *      capabilities) and seccomp may be installed without CAP_SYS_ADMIN.
 *   6. every fd but 0-2 (and the status pipe, close-on-exec) closed: nothing
 *      of the supervisor — /dev/fuse, the log, sockets — leaks into the sandbox.
 *   7. seccomp last, so the steps above may use what it denies.
 *
 * Then pid 1, just before its command starts (its standard streams are
 * known only then for a late command), confines paths with Landlock
 * (fb_launcher_confine_paths): every access beneath the sandbox's "/" and
 * nothing elsewhere.  Every path of the sandbox is beneath it; what is not
 * is a host file or directory reached through a descriptor from outside:
 * a standard stream the caller gave, reopened through /proc/self/fd with
 * more access than it was given, or a directory given as one, below which
 * openat would walk the host past the view.  So each standard stream that
 * is a file or a device of a real file system may be reopened for what it
 * was opened for, and no more (`cat /dev/stdin`, `echo > /dev/stderr`);
 * a directory or a path handle fails the launch before (launcher-pid1.c);
 * pipes, sockets and memfds are on internal mounts, which Landlock does
 * not restrict; descriptors keep working as they were opened (read,
 * write, fstat, ioctl).  The filter above does not deny Landlock's calls.
 */
#include "launcher/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/prctl.h>
#include <linux/securebits.h>
#include <signal.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Upper bound on capability numbers we drop and check: the kernel has 41
 * today; PR_CAPBSET_DROP answers EINVAL past the last one. */
#define MAX_CAPS 64

struct FbLauncherLockdown
{
  cap_t empty; /* all three process sets clear */
};

int
fb_launcher_lockdown_new (FbLauncherLockdown **ret_lockdown)
{
  cap_t empty = cap_init ();
  if (!empty)
    return -errno;
  FbLauncherLockdown *lockdown = g_new0 (FbLauncherLockdown, 1);
  lockdown->empty = empty;
  *ret_lockdown = lockdown;
  return 0;
}

void
fb_launcher_lockdown_free (FbLauncherLockdown *lockdown)
{
  if (!lockdown)
    return;
  cap_free (lockdown->empty);
  g_free (lockdown);
}

static int
drop_caps (const FbLauncherLockdown *lockdown)
{
  for (int c = 0; c < MAX_CAPS; c++)
    if (cap_drop_bound ((cap_value_t)c) < 0)
      {
        if (errno == EINVAL)
          break; /* past the last capability */
        return -errno;
      }
  /* One call: libcap's cap_reset_ambient() first asks about each
   * capability in turn (41 more system calls in each of three processes
   * per run).  EINVAL: a kernel without ambient capabilities (before 4.3). */
  if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return -errno;
  if (cap_set_proc (lockdown->empty) < 0)
    return -errno;
  return 0;
}

static int
verify_caps (void)
{
  struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
  struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { { 0 } };

  /* raw capget: libcap's cap_get_proc() allocates */
  if (syscall (__NR_capget, &hdr, data) < 0)
    return -errno;
  for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
    if (data[i].effective || data[i].permitted || data[i].inheritable)
      return -EPERM;
  /* The ambient set needs no reading: the kernel keeps it within the
   * permitted and inheritable sets, both empty now (cap_capset()). */
  for (int c = 0; c < MAX_CAPS; c++)
    {
      int r = prctl (PR_CAPBSET_READ, (unsigned long)c, 0, 0, 0);
      if (r < 0)
        break; /* EINVAL: past the last capability */
      if (r != 0)
        return -EPERM;
    }
  return 0;
}

static int
close_fds (int keep_fd)
{
  /* close_range (5.9); on older kernels a loop up to the fd limit. */
  unsigned int first = 3;
  int r = 0;

  if (keep_fd >= 3)
    {
      if (keep_fd > 3 && syscall (__NR_close_range, 3U, (unsigned)keep_fd - 1, 0U) < 0)
        r = -errno;
      first = (unsigned)keep_fd + 1;
    }
  if (r == 0 && syscall (__NR_close_range, first, ~0U, 0U) < 0)
    r = -errno;
  if (r == -ENOSYS)
    {
      struct rlimit rl;
      int max = getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (int)rl.rlim_cur : 65536;
      for (int fd = 3; fd < max; fd++)
        if (fd != keep_fd)
          close (fd);
      r = 0;
    }
  return r;
}

/* Landlock, from its uapi (linux/landlock.h), spelled out here so that
 * the build does not depend on how new the headers are: the numbers are
 * the kernel's ABI and the same on every architecture. */
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif
#define FB_LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#define FB_LANDLOCK_RULE_PATH_BENEATH 1
/* ABI 1: execute ... make_sym, the first 13 bits */
#define FB_LANDLOCK_ACCESS_FS_READ_FILE (1ULL << 2)
#define FB_LANDLOCK_ACCESS_FS_WRITE_FILE (1ULL << 1)
#define FB_LANDLOCK_ACCESS_FS_V1 ((1ULL << 13) - 1)
#define FB_LANDLOCK_ACCESS_FS_REFER (1ULL << 13)     /* ABI 2 */
#define FB_LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)  /* ABI 3 */
#define FB_LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */

struct fb_landlock_ruleset_attr
{
  guint64 handled_access_fs; /* the leading member of every ABI's; the kernel takes a prefix */
};

struct fb_landlock_path_beneath_attr
{
  guint64 allowed_access;
  gint32 parent_fd;
} __attribute__ ((packed));

int
fb_launcher_landlock_abi (void)
{
  long v = syscall (__NR_landlock_create_ruleset, NULL, 0, FB_LANDLOCK_CREATE_RULESET_VERSION);

  return v > 0 ? (int)MIN (v, G_MAXINT) : 0;
}

/* What standard stream FD may be opened again for, in *RET (the rights
 * of every ABI; the caller keeps those it handles): nothing for a socket
 * (and a pipe is on an internal mount, which a rule refuses with EBADFD).
 * -EISDIR for a directory or a path handle (O_PATH), which is no stream. */
static int
stream_access (int fd, guint64 *ret)
{
  struct stat st;
  int flags = fcntl (fd, F_GETFL);

  *ret = 0;
  if (flags < 0 || fstat (fd, &st) < 0)
    return 0; /* closed: nothing to open again */
  if ((flags & O_PATH) || S_ISDIR (st.st_mode))
    return -EISDIR;
  if (S_ISSOCK (st.st_mode))
    return 0;
  if ((flags & O_ACCMODE) == O_RDONLY || (flags & O_ACCMODE) == O_RDWR)
    *ret |= FB_LANDLOCK_ACCESS_FS_READ_FILE;
  /* truncation with writing: the descriptor itself may be truncated, and
   * its O_APPEND cleared (F_SETFL), whatever a rule says */
  if ((flags & O_ACCMODE) == O_WRONLY || (flags & O_ACCMODE) == O_RDWR)
    *ret |= FB_LANDLOCK_ACCESS_FS_WRITE_FILE | FB_LANDLOCK_ACCESS_FS_TRUNCATE;
  if (S_ISCHR (st.st_mode) || S_ISBLK (st.st_mode))
    *ret |= FB_LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return 0;
}

int
fb_launcher_confine_paths (const int stdio[3], int *ret_stream)
{
  int abi = fb_launcher_landlock_abi ();
  guint64 access = FB_LANDLOCK_ACCESS_FS_V1 | FB_LANDLOCK_ACCESS_FS_REFER, given[3];
  struct fb_landlock_ruleset_attr attr;
  struct fb_landlock_path_beneath_attr beneath;
  int ruleset, root, r = 0;

  /* the streams first, with Landlock or without */
  for (int i = 0; i < 3; i++)
    if ((r = stream_access (stdio[i], &given[i])) < 0)
      {
        *ret_stream = i;
        return r;
      }
  /* ABI 1 is passed over: it refuses every rename or link into another
   * directory, which no rule can allow */
  if (abi < 2)
    return 0;
  if (abi >= 3)
    access |= FB_LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5)
    access |= FB_LANDLOCK_ACCESS_FS_IOCTL_DEV;
  attr.handled_access_fs = access;
  ruleset = (int)syscall (__NR_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (ruleset < 0)
    return -errno;
  root = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0)
    r = -errno;
  beneath.allowed_access = access;
  beneath.parent_fd = root;
  if (r == 0 && syscall (__NR_landlock_add_rule, ruleset, FB_LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) < 0)
    r = -errno;
  for (int i = 0; r == 0 && i < 3; i++)
    {
      beneath.allowed_access = given[i] & access;
      beneath.parent_fd = stdio[i];
      if (beneath.allowed_access != 0 &&
          syscall (__NR_landlock_add_rule, ruleset, FB_LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) < 0 && errno != EBADFD)
        r = -errno;
    }
  if (r == 0 && syscall (__NR_landlock_restrict_self, ruleset, 0) < 0)
    r = -errno;
  if (root >= 0)
    close (root);
  close (ruleset);
  return r;
}

int
fb_launcher_lockdown_apply (const FbLauncherLockdown *lockdown, const FbLauncherSeccomp *seccomp, int keep_fd,
                            FbLauncherStep *ret_step)
{
  int r;

  if (setsid () < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_SETSID;
      return -errno;
    }
  if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_PDEATHSIG;
      return -errno;
    }
  if (prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_DUMPABLE;
      return -errno;
    }
  /* root in the user namespace must not get capabilities back on execve */
  if (cap_set_secbits (SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                       SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED | SECBIT_KEEP_CAPS_LOCKED) < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_SECUREBITS;
      return -errno;
    }
  if ((r = drop_caps (lockdown)) < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_DROP_CAPS;
      return r;
    }
  if ((r = verify_caps ()) < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_VERIFY_CAPS;
      return r;
    }
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_NO_NEW_PRIVS;
      return -errno;
    }
  if ((r = close_fds (keep_fd)) < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_CLOSE_FDS;
      return r;
    }
  if (seccomp && (r = fb_launcher_seccomp_install (seccomp)) < 0)
    {
      *ret_step = FB_LAUNCHER_STEP_SECCOMP;
      return r;
    }
  return 0;
}
