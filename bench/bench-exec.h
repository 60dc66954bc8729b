/* fusebox — running the programs a benchmark times (header only): a
 * command forked, run and reaped with its times, and the fusebox of this
 * build tree as the default FUSEBOX_BIN. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

/* ARGV (found on this process's PATH unless it names a path) run in DIR
 * with ENVP, its output to /dev/null, timed from just before fork to the
 * reaped exit (CLOCK_MONOTONIC): the wall time in ms, or a negative value when it could
 * not run or did not exit 0.  *RET_CPU_MS (when not NULL): the user + system
 * time of it and the children it reaped. */
static G_GNUC_UNUSED double
bench_time_exec (char **argv, char **envp, const char *dir, double *ret_cpu_ms)
{
  struct timespec t0, t1;
  struct rusage ru;
  int status;
  pid_t pid;

  clock_gettime (CLOCK_MONOTONIC, &t0);
  pid = fork ();
  if (pid < 0)
    return -1;
  if (pid == 0)
    {
      int null = open ("/dev/null", O_RDWR);
      if (null >= 0)
        {
          dup2 (null, 1);
          dup2 (null, 2);
        }
      if (chdir (dir) < 0)
        _exit (126);
      execvpe (argv[0], argv, envp);
      _exit (127);
    }
  while (wait4 (pid, &status, 0, &ru) < 0)
    if (errno != EINTR)
      return -1;
  clock_gettime (CLOCK_MONOTONIC, &t1);
  if (ret_cpu_ms != NULL)
    *ret_cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    return -1;
  return (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
}

/* FUSEBOX_BIN, when unset, is the fusebox of this build tree (bench/ is
 * beside launcher/): what tests/lib's server runs. */
static G_GNUC_UNUSED void
bench_default_fusebox_bin (void)
{
  g_autofree char *self = NULL;
  g_autofree char *bdir = NULL;
  g_autofree char *bin = NULL;

  if (g_getenv ("FUSEBOX_BIN") != NULL)
    return;
  self = g_file_read_link ("/proc/self/exe", NULL);
  if (self == NULL)
    return;
  bdir = g_path_get_dirname (self);
  bin = g_build_filename (bdir, "..", "launcher", "fusebox", NULL);
  g_setenv ("FUSEBOX_BIN", bin, TRUE);
}
