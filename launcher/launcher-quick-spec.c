/* fusebox — the quick client's command, in the memfd the launch helper
 * takes (ipc/ipc-launch-spec.h), and the signals a supervisor forwards,
 * written with libc alone. */
#include "launcher/launcher-quick-spec.h"

#include "ipc/ipc-launch-spec.h"

#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

static bool
append (int fd, const char *s, uint64_t *size)
{
  size_t len = strlen (s) + 1;

  *size += len;
  return *size <= FB_LAUNCH_SPEC_MAX && write (fd, s, len) == (ssize_t)len;
}

int
fb_quick_command_memfd (const char *const *command, const char *const *envp)
{
  FbLaunchSpecHeader h;
  char cwd[PATH_MAX];
  mode_t mask = umask (0);
  uint64_t size = 0;
  int fd = memfd_create ("fusebox-launch-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  bool ok = fd >= 0 && getcwd (cwd, sizeof cwd) != NULL;

  umask (mask);
  memset (&h, 0, sizeof h);
  h.magic = FB_LAUNCH_SPEC_MAGIC;
  h.uid = h.gid = FB_LAUNCH_ID_CALLER;
  h.umask = (uint32_t)mask;
  ok = ok && write (fd, &h, sizeof h) == (ssize_t)sizeof h;
  for (const char *const *a = command; ok && *a != NULL; a++, h.argc++)
    ok = append (fd, *a, &size);
  for (const char *const *e = envp; ok && *e != NULL; e++, h.envc++)
    ok = append (fd, *e, &size);
  ok = ok && append (fd, cwd, &size);
  h.strings_size = size;
  ok = ok && pwrite (fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
       fcntl (fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) == 0;
  if (!ok && fd >= 0)
    {
      close (fd);
      fd = -1;
    }
  return fd;
}

int
fb_forwarded_signalfd (void)
{
  sigset_t sigs;

  sigemptyset (&sigs);
  sigaddset (&sigs, SIGINT);
  sigaddset (&sigs, SIGTERM);
  sigaddset (&sigs, SIGHUP);
  sigaddset (&sigs, SIGQUIT);
  sigprocmask (SIG_BLOCK, &sigs, NULL);
  return signalfd (-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
}
