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
 */
#include "launcher/launcher.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/prctl.h>
#include <linux/securebits.h>
#include <signal.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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
