/* fusebox — libFuzzer target for a command's spec (ipc/ipc-process-launch.h):
 * the sealed memfd a server or a session's daemon sends the launch helper,
 * read by the helper (fb_launch_spec_decode) and, for a late command, by
 * pid 1 inside the sandbox (fb_launcher_late_command_check, the same
 * parse pid 1 makes without allocating).
 *
 * Input: bytes, written to a memfd and sealed as a sender seals it.  The
 * helper's reading of a command and pid 1's must agree: what the helper
 * takes, pid 1 takes, with the same argv[0] and working directory (pid 1
 * may refuse more, never less); a late spec has no strings.
 *
 *   build-fuzz/tests/fuzz/fuzz-launch-spec -max_total_time=600 CORPUS
 */
#include "ipc/ipc-process-launch.h"
#include "launcher/launcher.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int
sealed (const uint8_t *data, size_t size)
{
  int fd = memfd_create ("fuzz-launch-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);

  if (fd < 0)
    abort ();
  if (size > 0 && write (fd, data, size) != (ssize_t)size)
    abort ();
  if (fcntl (fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
    abort ();
  return fd;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  int fd;

  if (size > FB_LAUNCH_SPEC_MAX + 1)
    return 0;
  fd = sealed (data, size);
  for (int late = 0; late < 2; late++)
    {
      FbLaunchSpec spec = { 0 };
      const char *why = NULL;

      if (fb_launch_spec_decode (fd, late, &spec, &why) == 0)
        {
          if (late && (spec.argv != NULL || spec.envp != NULL || spec.cwd != NULL))
            abort ();
          if (!late)
            {
              char *argv0 = NULL, *cwd = NULL, *path = NULL;

              if (spec.argv == NULL || spec.argv[0] == NULL || spec.cwd == NULL)
                abort ();
              if (fb_launcher_late_command_check (fd, &argv0, &cwd, &path) != 0 || strcmp (argv0, spec.argv[0]) != 0 ||
                  strcmp (cwd, spec.cwd) != 0)
                abort ();
              free (argv0);
              free (cwd);
              free (path);
            }
        }
      else if (why == NULL)
        abort ();
      fb_launch_spec_clear (&spec);
    }
  close (fd);
  return 0;
}
