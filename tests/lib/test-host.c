/* fusebox — the host probes of tests/lib/test-host.h and the rule for a
 * missing feature (skip, or fail in CI when fusebox needs it). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cmocka.h>

#include "tests/lib/test-host.h"

bool
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

bool
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

/* ---- the sandbox probe ---- */

typedef struct
{
  int step; /* index into probe_steps, -1: all passed */
  int err;
} Probe;

static const char *const probe_steps[] = {
  "unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID)",
  "writing /proc/self/uid_map and gid_map",
  "making the mount tree private",
  "forking pid 1 of a new pid namespace",
  "mounting a tmpfs in the new mount namespace",
  "mounting a fresh procfs for the new pid namespace",
  "opening /dev/fuse",
  "mounting a FUSE file system in the user namespace",
  "setting PR_SET_NO_NEW_PRIVS",
  "installing a seccomp filter",
};

static int
write_proc (const char *path, const char *data)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  ssize_t n;
  int e;

  if (fd < 0)
    return errno;
  n = write (fd, data, strlen (data));
  e = n < 0 ? errno : 0;
  close (fd);
  return e;
}

/* pid 1 of the new pid namespace; only system calls, then _exit */
static Probe
probe_pid1 (void)
{
  struct sock_filter allow[] = { BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
  struct sock_fprog prog = { .len = 1, .filter = allow };
  char opts[128];
  int fd;

  if (mount ("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") < 0)
    return (Probe){ 4, errno };
  if (mkdir ("/tmp/proc", 0755) < 0 || mount ("proc", "/tmp/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return (Probe){ 5, errno };
  fd = open ("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return (Probe){ 6, errno };
  snprintf (opts, sizeof opts, "fd=%d,rootmode=40000,user_id=0,group_id=0", fd);
  if (mkdir ("/tmp/m", 0700) < 0 || mount ("fuse", "/tmp/m", "fuse", MS_NOSUID | MS_NODEV, opts) < 0)
    return (Probe){ 7, errno };
  umount2 ("/tmp/m", MNT_DETACH);
  close (fd);
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return (Probe){ 8, errno };
  if (syscall (__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
    return (Probe){ 9, errno };
  return (Probe){ -1, 0 };
}

/* Runs PROBE in a forked child and reads its answer from a pipe. */
static Probe
probe_in_child (Probe (*probe) (void))
{
  Probe r = { 3, EIO };
  int p[2];
  pid_t pid;

  if (pipe2 (p, O_CLOEXEC) < 0)
    return (Probe){ 3, errno };
  pid = fork ();
  if (pid < 0)
    {
      r = (Probe){ 3, errno };
      close (p[0]);
      close (p[1]);
      return r;
    }
  if (pid == 0)
    {
      Probe mine = probe ();
      (void)!write (p[1], &mine, sizeof mine);
      _exit (0);
    }
  close (p[1]);
  if (read (p[0], &r, sizeof r) != sizeof r)
    r = (Probe){ 3, ECHILD };
  close (p[0]);
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
  return r;
}

static Probe
probe_namespaces (void)
{
  /* our ids before unshare: inside, until mapped, they are the overflow ids */
  uid_t uid = geteuid ();
  gid_t gid = getegid ();
  char map[64];
  int err;

  if (unshare (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) < 0)
    return (Probe){ 0, errno };
  snprintf (map, sizeof map, "0 %u 1\n", (unsigned)uid);
  if ((err = write_proc ("/proc/self/setgroups", "deny")) != 0 && err != ENOENT)
    return (Probe){ 1, err };
  if ((err = write_proc ("/proc/self/uid_map", map)) != 0)
    return (Probe){ 1, err };
  snprintf (map, sizeof map, "0 %u 1\n", (unsigned)gid);
  if ((err = write_proc ("/proc/self/gid_map", map)) != 0)
    return (Probe){ 1, err };
  if (mount (NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
    return (Probe){ 2, errno };
  return probe_in_child (probe_pid1);
}

/* ---- features ---- */

const char *
test_host_lacks (const char *feature)
{
  static int ia32 = -1; /* unknown, lacks (0), has (1) */
  static char *sandbox = NULL;
  static bool sandbox_asked = false;

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
  if (strcmp (feature, "root") == 0)
    {
      if (test_host_pretends_lack (feature))
        return "the tests do not run as root (FUSEBOX_TEST_HOST_LACKS=root)";
      return geteuid () == 0 ? NULL : "the tests do not run as root";
    }
  if (strcmp (feature, "fuse") == 0)
    {
      if (test_host_pretends_lack (feature))
        return "/dev/fuse is missing or not usable (FUSEBOX_TEST_HOST_LACKS=fuse)";
      return access ("/dev/fuse", R_OK | W_OK) == 0 ? NULL : "/dev/fuse is missing or not usable";
    }
  if (strcmp (feature, "sandbox") == 0)
    {
      if (test_host_pretends_lack (feature))
        return "this host can't make sandboxes (FUSEBOX_TEST_HOST_LACKS=sandbox)";
      if (!sandbox_asked)
        {
          Probe r = probe_in_child (probe_namespaces);
          sandbox_asked = true;
          if (r.step >= 0)
            sandbox =
              g_strdup_printf ("this host can't make sandboxes (%s: %s)", probe_steps[r.step], g_strerror (r.err));
        }
      return sandbox;
    }
  /* a test asked for a feature this file does not know: a bug in the test */
  abort ();
}

bool
test_must_run (void)
{
  return g_strcmp0 (g_getenv ("FUSEBOX_TESTS_MUST_RUN"), "1") == 0;
}

void
test_skip_or_fail (const char *why)
{
  if (test_must_run ())
    {
      fprintf (stderr, "FUSEBOX_TESTS_MUST_RUN=1 but %s\n", why);
      exit (1);
    }
  fprintf (stderr, "skipped: %s\n", why);
  exit (77);
}

void
test_host_require (const char *feature, const char *for_what)
{
  const char *lacks = test_host_lacks (feature);

  if (lacks != NULL)
    {
      g_autofree char *why = g_strdup_printf ("%s: %s", lacks, for_what);
      test_skip_or_fail (why);
    }
}

void
test_skip_test (bool fusebox_needs_it, const char *format, ...)
{
  g_autofree char *message = NULL;
  va_list ap;

  va_start (ap, format);
  message = g_strdup_vprintf (format, ap);
  va_end (ap);
  if (fusebox_needs_it && test_must_run ())
    fail_msg ("FUSEBOX_TESTS_MUST_RUN=1 but %s", message);
  fprintf (stderr, "skipped: %s\n", message);
  skip ();
}
