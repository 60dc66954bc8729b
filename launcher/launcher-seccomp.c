/* fusebox — installing the sandbox's seccomp filter.
 *
 * The filter's rules and the reason for each are in launcher-seccomp-gen.c,
 * which libseccomp compiles into a BPF program when fusebox is built
 * (launcher-seccomp-bpf.c, generated).  Here the parent copies that program,
 * and the child installs it with one seccomp(2) call, which is
 * async-signal-safe.  No libseccomp at run time: compiling the same filter
 * for every run cost 0.6 ms of CPU, and the library's loading more.
 */
#include "launcher/launcher-private.h"
#include "launcher/launcher.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

struct FbLauncherSeccomp
{
  struct sock_fprog prog;
};

int
fb_launcher_seccomp_new (FbLauncherSeccomp **ret_seccomp)
{
  FbLauncherSeccomp *seccomp = g_new0 (FbLauncherSeccomp, 1);

  /* a copy: the kernel reads the program through a non-const pointer */
  seccomp->prog.len = fb_launcher_seccomp_program_len;
  seccomp->prog.filter =
    g_memdup2 (fb_launcher_seccomp_program, fb_launcher_seccomp_program_len * sizeof (struct sock_filter));
  *ret_seccomp = seccomp;
  return 0;
}

int
fb_launcher_seccomp_install (const FbLauncherSeccomp *seccomp)
{
  long r = syscall (__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &seccomp->prog);
  if (r < 0)
    return -errno;
  /* TSYNC returns the id of a thread that could not be synchronized */
  if (r > 0)
    return -EAGAIN;
  return 0;
}

void
fb_launcher_seccomp_free (FbLauncherSeccomp *seccomp)
{
  if (!seccomp)
    return;
  g_free (seccomp->prog.filter);
  g_free (seccomp);
}
