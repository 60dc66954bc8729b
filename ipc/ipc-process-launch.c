/* fusebox — the command a process/start hands to the launch helper: what
 * the client sent (argv, environment, cwd), carried as data in a sealed
 * memfd, never as the helper's own argv or environment
 * (ipc/ipc-process-launch.h has the protocol and the threat model).
 *
 * Compiled into the server (libfb_ipc) and into fusebox-launch, so that both
 * sides check the same bounds.  Needs only GLib and libc: the helper stays
 * small. */
#include "ipc/ipc-process-launch.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

/* What the helper demands before it trusts the contents not to change. */
#define REQUIRED_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

void
fb_launch_spec_clear (FbLaunchSpec *spec)
{
  g_clear_pointer (&spec->argv, g_strfreev);
  g_clear_pointer (&spec->envp, g_strfreev);
  g_clear_pointer (&spec->cwd, g_free);
  spec->network = 0;
  spec->uid = spec->gid = 0;
  spec->umask = 0;
}

static int
fail (const char **ret_why, const char *why, int err)
{
  if (ret_why != NULL)
    *ret_why = why;
  return -err;
}

int
fb_launch_spec_check (const FbLaunchSpec *spec, bool late, const char **ret_why)
{
  const char *const *argv = (const char *const *)spec->argv;
  const char *const *envp = (const char *const *)spec->envp;
  const char *cwd = spec->cwd;
  guint64 total = 0;
  guint n = 0;

  if (spec->network > 2)
    return fail (ret_why, "the network setting is none of none, host and an allowlist", EINVAL);
  if (spec->umask > 0777 && spec->umask != FB_LAUNCH_UMASK_KEEP)
    return fail (ret_why, "the umask is outside 0..0777", EINVAL);
  /* A late spec makes the sandbox only: its command comes later, in a
   * spec of its own, so nothing of one may hide in it. */
  if (late)
    {
      if ((argv != NULL && argv[0] != NULL) || (envp != NULL && envp[0] != NULL) || cwd != NULL)
        return fail (ret_why, "a late spec holds a command", EINVAL);
      return 0;
    }
  if (argv == NULL || argv[0] == NULL || argv[0][0] == '\0')
    return fail (ret_why, "argv[0] is missing or empty", EINVAL);
  if (cwd == NULL || cwd[0] != '/')
    return fail (ret_why, "the working directory is not an absolute path", EINVAL);
  if (strlen (cwd) >= FB_LAUNCH_CWD_MAX)
    return fail (ret_why, "the working directory is longer than 4095 bytes", E2BIG);
  total += strlen (cwd) + 1;
  for (guint i = 0; argv[i] != NULL; i++, n++)
    {
      gsize len = strlen (argv[i]);
      if (len >= FB_LAUNCH_STRING_MAX)
        return fail (ret_why, "an argument is longer than 131071 bytes (execve's limit)", E2BIG);
      total += len + 1;
    }
  for (guint i = 0; envp != NULL && envp[i] != NULL; i++, n++)
    {
      gsize len = strlen (envp[i]);
      const char *eq = strchr (envp[i], '=');
      if (eq == NULL || eq == envp[i])
        return fail (ret_why, "an environment entry is not NAME=VALUE", EINVAL);
      if (len >= FB_LAUNCH_STRING_MAX)
        return fail (ret_why, "an environment entry is longer than 131071 bytes (execve's limit)", E2BIG);
      total += len + 1;
    }
  if (n > FB_LAUNCH_STRINGS_MAX)
    return fail (ret_why, "argv and env hold more than 65536 entries together", E2BIG);
  if (total > FB_LAUNCH_SPEC_MAX - sizeof (FbLaunchSpecHeader))
    return fail (ret_why, "argv, env and cwd are larger than 2 MiB together", E2BIG);
  return 0;
}

static int
write_all (int fd, const void *data, gsize len)
{
  const char *p = data;

  while (len > 0)
    {
      ssize_t n = write (fd, p, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return -errno;
      p += n;
      len -= (gsize)n;
    }
  return 0;
}

int
fb_launch_spec_seal (const FbLaunchSpec *spec, bool late, int *ret_fd, const char **ret_why)
{
  FbLaunchSpecHeader h = { 0 };
  GString *strings;
  _fb_cleanup_fd_ int fd = -1;
  int r;

  r = fb_launch_spec_check (spec, late, ret_why);
  if (r < 0)
    return r;
  strings = g_string_new (NULL);
  if (!late)
    {
      for (guint i = 0; spec->argv[i] != NULL; i++, h.argc++)
        g_string_append_len (strings, spec->argv[i], (gssize)strlen (spec->argv[i]) + 1);
      for (guint i = 0; spec->envp != NULL && spec->envp[i] != NULL; i++, h.envc++)
        g_string_append_len (strings, spec->envp[i], (gssize)strlen (spec->envp[i]) + 1);
      g_string_append_len (strings, spec->cwd, (gssize)strlen (spec->cwd) + 1);
    }
  h.magic = FB_LAUNCH_SPEC_MAGIC;
  h.network = spec->network;
  h.strings_size = strings->len;
  h.uid = spec->uid;
  h.gid = spec->gid;
  h.umask = spec->umask;

  /* Not executable where the kernel allows saying so (vm.memfd_noexec=2
   * refuses memfds that don't). */
  fd = memfd_create ("fusebox-launch-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
  if (fd < 0 && errno == EINVAL)
    fd = memfd_create ("fusebox-launch-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    {
      r = -errno;
      g_string_free (strings, TRUE);
      return fail (ret_why, "can't create the memfd for the command", -r);
    }
  r = write_all (fd, &h, sizeof h);
  if (r == 0)
    r = write_all (fd, strings->str, strings->len);
  g_string_free (strings, TRUE);
  if (r == 0 && fcntl (fd, F_ADD_SEALS, REQUIRED_SEALS) < 0)
    r = -errno;
  if (r < 0)
    return fail (ret_why, "can't write and seal the memfd for the command", -r);
  *ret_fd = fb_steal_fd (&fd);
  return 0;
}

FbLaunchSpec
fb_launch_spec_command (guint32 network, const char *const *argv, const char *const *envp, const char *cwd)
{
  FbLaunchSpec spec = {
    .network = network,
    .uid = FB_LAUNCH_ID_CALLER,
    .gid = FB_LAUNCH_ID_CALLER,
    .umask = FB_LAUNCH_UMASK_KEEP,
    .argv = (char **)argv,
    .envp = (char **)envp,
    .cwd = (char *)cwd,
  };

  return spec;
}

int
fb_launch_spec_encode (guint32 network, const char *const *argv, const char *const *envp, const char *cwd, int *ret_fd,
                       const char **ret_why)
{
  FbLaunchSpec spec = fb_launch_spec_command (network, argv, envp, cwd);

  return fb_launch_spec_seal (&spec, false, ret_fd, ret_why);
}

/* N NUL-terminated strings from *P (below END) into a new vector. */
static char **
take_strings (const char **p, const char *end, guint32 n)
{
  char **v = g_new0 (char *, (gsize)n + 1);

  for (guint32 i = 0; i < n; i++)
    {
      const char *nul = memchr (*p, '\0', (gsize)(end - *p));
      if (nul == NULL)
        {
          g_strfreev (v);
          return NULL;
        }
      v[i] = g_strndup (*p, (gsize)(nul - *p));
      *p = nul + 1;
    }
  return v;
}

int
fb_launch_spec_decode (int fd, bool late, FbLaunchSpec *ret_spec, const char **ret_why)
{
  g_auto (FbLaunchSpec) spec = { 0 };
  g_autofree char *buf = NULL;
  FbLaunchSpecHeader h;
  const char *p, *end;
  struct stat st;
  gsize size, got = 0;
  int seals, r;

  seals = fcntl (fd, F_GET_SEALS);
  if (seals < 0 || (seals & REQUIRED_SEALS) != REQUIRED_SEALS)
    return fail (ret_why, "the command did not come in a sealed memfd", EPROTO);
  if (fstat (fd, &st) < 0)
    return fail (ret_why, "can't stat the command's memfd", errno);
  if (st.st_size < (off_t)sizeof h || st.st_size > FB_LAUNCH_SPEC_MAX)
    return fail (ret_why, "the command's memfd has an impossible size", EPROTO);
  size = (gsize)st.st_size;
  buf = g_malloc (size);
  while (got < size)
    {
      ssize_t n = pread (fd, buf + got, size - got, (off_t)got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return fail (ret_why, "can't read the command's memfd", n < 0 ? errno : EPROTO);
      got += (gsize)n;
    }
  memcpy (&h, buf, sizeof h);
  if (h.magic != FB_LAUNCH_SPEC_MAGIC || h.strings_size != size - sizeof h || h.reserved != 0 ||
      (guint64)h.argc + h.envc > FB_LAUNCH_STRINGS_MAX)
    return fail (ret_why, "the command's memfd is malformed", EPROTO);
  spec.network = h.network;
  spec.uid = h.uid;
  spec.gid = h.gid;
  spec.umask = h.umask;
  /* A late spec is its header alone; a command has an argv. */
  if (late ? h.argc != 0 || h.envc != 0 || size != sizeof h : h.argc == 0)
    return fail (ret_why, late ? "the late spec holds a command" : "the command's memfd is malformed", EPROTO);
  if (late)
    {
      r = fb_launch_spec_check (&spec, true, ret_why);
      if (r < 0)
        return r;
      *ret_spec = spec;
      memset (&spec, 0, sizeof spec);
      return 0;
    }
  p = buf + sizeof h;
  end = buf + size;
  spec.argv = take_strings (&p, end, h.argc);
  spec.envp = spec.argv != NULL ? take_strings (&p, end, h.envc) : NULL;
  if (spec.envp != NULL)
    {
      char **cwd = take_strings (&p, end, 1);
      if (cwd != NULL)
        {
          spec.cwd = g_steal_pointer (&cwd[0]);
          g_free (cwd);
        }
    }
  if (spec.cwd == NULL || p != end)
    return fail (ret_why, "the command's memfd is malformed", EPROTO);
  r = fb_launch_spec_check (&spec, false, ret_why);
  if (r < 0)
    return r;
  *ret_spec = spec;
  memset (&spec, 0, sizeof spec);
  return 0;
}

ssize_t
fb_launch_recvmsg (int sock, void *buf, gsize size, int flags, int *fds, int max_fds, int *ret_nfds,
                   bool *ret_truncated)
{
  struct iovec iov = { buf, size };
  union
  {
    struct cmsghdr align;
    char buf[CMSG_SPACE (FB_LAUNCH_RECV_FDS_MAX * sizeof (int))];
  } control;
  struct msghdr msg = { 0 };
  ssize_t n;
  int k = 0;

  g_assert (max_fds > 0 && max_fds <= FB_LAUNCH_RECV_FDS_MAX);
  for (int i = 0; i < max_fds; i++)
    fds[i] = -1;
  *ret_nfds = 0;
  *ret_truncated = false;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  /* Room for MAX_FDS only: more are the kernel's to drop (MSG_CTRUNC). */
  msg.msg_controllen = CMSG_SPACE ((gsize)max_fds * sizeof (int));
  do
    n = recvmsg (sock, &msg, MSG_CMSG_CLOEXEC | flags);
  while (n < 0 && errno == EINTR && !(flags & MSG_DONTWAIT));
  if (n < 0)
    return -errno;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR (&msg); cm != NULL; cm = CMSG_NXTHDR (&msg, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
      for (gsize off = 0; off + sizeof (int) <= cm->cmsg_len - CMSG_LEN (0); off += sizeof (int))
        {
          int fd;
          memcpy (&fd, CMSG_DATA (cm) + off, sizeof fd);
          if (k < max_fds)
            fds[k] = fd;
          else
            close (fd);
          k++;
        }
  *ret_nfds = k;
  *ret_truncated = (msg.msg_flags & MSG_CTRUNC) != 0;
  return n;
}

ssize_t
fb_launch_recv (int sock, void *buf, gsize size, int flags, int fds[2])
{
  int nfds;
  bool truncated;
  ssize_t n = fb_launch_recvmsg (sock, buf, size, flags, fds, 2, &nfds, &truncated);

  if (n < 0)
    return n;
  if (n != 0 && ((gsize)n != size || truncated))
    {
      for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
          close (fds[i]);
      fds[0] = fds[1] = -1;
      return -EPROTO;
    }
  return n;
}

int
fb_launch_record_recv (int sock, FbLaunchRecord *rec, int fds[2])
{
  ssize_t n = fb_launch_recv (sock, rec, sizeof *rec, MSG_DONTWAIT, fds);

  if (n == -EINTR || n == -EAGAIN)
    return -EAGAIN;
  if (n <= 0)
    return (int)n;
  rec->text[sizeof rec->text - 1] = '\0';
  return 1;
}

GPid
fb_launch_helper_spawn (const char *path, int in, int out, int err, int sock, GError **error)
{
  char *const argv[] = { (char *)path, NULL };
  char *const envp[] = { NULL };
  const int from[] = { in, out, err, sock };
  int dups[G_N_ELEMENTS (from)];
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  sigset_t all, none;
  pid_t pid = 0;
  int r = 0;

  /* its stdin and stdout are never the server's own */
  if (in < 0 || out < 0)
    {
      g_set_error_literal (error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED, g_strerror (EBADF));
      return 0;
    }

  /* Copies above the targets first, so that no dup2 overwrites a source
   * before it is read; close-on-exec, so that the child keeps only the
   * targets. */
  for (guint i = 0; i < G_N_ELEMENTS (from); i++)
    {
      dups[i] = from[i] < 0 ? -1 : fcntl (from[i], F_DUPFD_CLOEXEC, FB_LAUNCH_FD + 1);
      if (from[i] >= 0 && dups[i] < 0 && r == 0)
        r = errno;
    }
  if (r == 0)
    r = posix_spawn_file_actions_init (&actions);
  if (r == 0)
    {
      for (guint i = 0; i < G_N_ELEMENTS (dups) && r == 0; i++)
        if (dups[i] >= 0)
          r = posix_spawn_file_actions_adddup2 (&actions, dups[i], (int)i);
      if (r == 0)
        r = posix_spawn_file_actions_addchdir_np (&actions, "/");
      if (r == 0)
        r = posix_spawn_file_actions_addclosefrom_np (&actions, FB_LAUNCH_FD + 1);
      /* Every signal's default action and none blocked, as after a
       * fork and exec: glibc's posix_spawn otherwise leaves its own two
       * (32, 33) ignored in the child, which its sigaction() can't undo
       * and the exec keeps, down to the command.  Filled by hand:
       * sigfillset() leaves those two out. */
      memset (&all, 0xff, sizeof all);
      sigemptyset (&none);
      if (r == 0 && (r = posix_spawnattr_init (&attr)) == 0)
        {
          r = posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
          if (r == 0)
            r = posix_spawnattr_setsigdefault (&attr, &all);
          if (r == 0)
            r = posix_spawnattr_setsigmask (&attr, &none);
          if (r == 0)
            r = posix_spawn (&pid, path, &actions, &attr, argv, envp);
          posix_spawnattr_destroy (&attr);
        }
      posix_spawn_file_actions_destroy (&actions);
    }
  for (guint i = 0; i < G_N_ELEMENTS (dups); i++)
    if (dups[i] >= 0)
      close (dups[i]);
  if (r != 0)
    {
      g_set_error_literal (error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED, g_strerror (r));
      return 0;
    }
  return pid;
}

GPid
fb_launch_helper_spawn_late (const char *path, guint32 network, guint32 uid, guint32 gid, const int view_ns[2],
                             int *ret_sock, GError **error)
{
  FbLaunchSpec late = { .network = network, .uid = uid, .gid = gid, .umask = FB_LAUNCH_UMASK_KEEP };
  FbLaunchRecord rec;
  const char *why = NULL;
  int sv[2], spec_fd = -1, null_fd, fds[3];
  GPid pid = 0;

  if (fb_launch_spec_seal (&late, true, &spec_fd, &why) < 0)
    {
      g_set_error (error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED, "%s", why);
      return 0;
    }
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    {
      int e = errno;
      close (spec_fd);
      g_set_error (error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED, "socketpair: %s", g_strerror (e));
      return 0;
    }
  /* /dev/null until its command brings its own streams */
  null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0)
    pid = fb_launch_helper_spawn (path, null_fd, null_fd, null_fd, sv[1], error);
  else
    g_set_error (error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED, "/dev/null: %s", g_strerror (errno));
  close (sv[1]);
  if (null_fd >= 0)
    close (null_fd);
  /* the socket is new and empty: this one message fits */
  memset (&rec, 0, sizeof rec);
  rec.type = FB_LAUNCH_SPEC;
  rec.value = FB_LAUNCH_SPEC_LATE;
  fds[0] = spec_fd;
  fds[1] = view_ns[0];
  fds[2] = view_ns[1];
  if (pid != 0 && fb_send_fds (sv[0], &rec, sizeof rec, fds, 3, MSG_DONTWAIT) < 0)
    {
      int e = errno;
      kill (pid, SIGKILL);
      while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
        ;
      g_spawn_close_pid (pid);
      pid = 0;
      g_set_error (error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED, "can't send the launch helper its sandbox: %s",
                   g_strerror (e));
    }
  close (spec_fd);
  if (pid == 0)
    {
      close (sv[0]);
      return 0;
    }
  *ret_sock = sv[0];
  return pid;
}
