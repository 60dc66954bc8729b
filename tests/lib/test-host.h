/* fusebox — what this host offers the tests, asked before a test relies on it.
 *
 * A test that needs a host feature asks test_host_lacks() first and, when
 * the answer is not NULL, says what the host lacks.  Whether it then skips,
 * fails or shows the same thing another way depends on who needs the
 * feature: a feature fusebox itself needs fails under
 * FUSEBOX_TESTS_MUST_RUN=1; one only the test needs (to reach a kernel path
 * the sandbox closes) never does.
 *
 * The seam: FUSEBOX_TEST_HOST_LACKS, a comma-separated list of feature
 * names, makes the host look as if it lacked them, so the branch a test
 * takes on such a host runs on this one too.
 *
 * Features:
 *   x86-64  the CPU and kernel run x86-64 code (the x32 ABI's syscall
 *           numbers reach seccomp on every x86-64 kernel, whether or not
 *           it was built with CONFIG_X86_X32_ABI).
 *   ia32    32-bit syscall emulation: `int 0x80` reaches the kernel's i386
 *           syscall table.  A kernel built without CONFIG_IA32_EMULATION, or
 *           booted with ia32_emulation=0, turns `int 0x80` into a fault
 *           (SIGSEGV) before seccomp sees it.  fusebox does not need it: such
 *           a host has no i386 ABI to filter.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Is FEATURE named in FUSEBOX_TEST_HOST_LACKS? */
static inline bool
test_host_pretends_lack (const char *feature)
{
  const char *list = getenv ("FUSEBOX_TEST_HOST_LACKS");
  size_t n = strlen (feature);
  for (const char *p = list; p != NULL && *p != '\0';)
    {
      size_t len = strcspn (p, ",");
      if (len == n && strncmp (p, feature, n) == 0)
        return true;
      p += len;
      if (*p == ',')
        p++;
    }
  return false;
}

/* Does `int 0x80` run i386 getpid here?  Asked in a child with no filter:
 * without ia32 emulation the child dies of SIGSEGV (no core: RLIMIT_CORE 0,
 * so nothing is left on the host).  The child does only async-signal-safe
 * work, so this is safe in a program that already runs threads. */
static inline bool
test_host_probe_ia32 (void)
{
#if defined(__x86_64__)
  pid_t pid = fork ();
  int status;

  if (pid < 0)
    return false;
  if (pid == 0)
    {
      struct rlimit none = { 0, 0 };
      long r;
      setrlimit (RLIMIT_CORE, &none);
      __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L /* i386 getpid */) : "memory");
      _exit (r == (long)getpid () ? 0 : 1);
    }
  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      return false;
  return WIFEXITED (status) && WEXITSTATUS (status) == 0;
#else
  return false;
#endif
}

/* NULL when the host has FEATURE; else a sentence naming what it lacks.
 * Each probe runs once per process. */
static inline const char *
test_host_lacks (const char *feature)
{
  static int ia32 = -1; /* unknown, lacks (0), has (1) */

  if (strcmp (feature, "x86-64") == 0)
    {
      if (test_host_pretends_lack (feature))
        return "this host is not x86-64 (FUSEBOX_TEST_HOST_LACKS=x86-64)";
#if defined(__x86_64__)
      return NULL;
#else
      return "this host is not x86-64";
#endif
    }
  if (strcmp (feature, "ia32") == 0)
    {
      if (test_host_pretends_lack (feature))
        return "this host lacks 32-bit syscall emulation (FUSEBOX_TEST_HOST_LACKS=ia32)";
      if (ia32 < 0)
        ia32 = test_host_probe_ia32 ();
      return ia32 ? NULL
                  : "this host lacks 32-bit syscall emulation (CONFIG_IA32_EMULATION off or ia32_emulation=0): "
                    "int 0x80 faults before seccomp sees it";
    }
  /* a test asked for a feature this file does not know: a bug in the test */
  abort ();
}
