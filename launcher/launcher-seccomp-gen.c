/* fusebox — the sandbox's seccomp filter, compiled at build time.
 *
 *   fusebox-seccomp-gen OUTPUT.c
 *
 * Threat model: the command is hostile and holds no capability (dropped
 * before the filter is installed), so most of what the filter denies would
 * fail anyway.  The filter is the second wall: it removes kernel surface that
 * unprivileged code can still reach (user namespaces, keyrings, io_uring,
 * userfaultfd, bpf, ptrace-like introspection), the calls that would let code
 * step around the FUSE view (open_by_handle_at), TIOCSTI, and the paths by
 * which unprivileged code makes the kernel load a module (socket families
 * and protocols, line disciplines).
 *
 * The rules below are compiled by libseccomp into a BPF program once, when
 * fusebox is built: this program runs at build time on the machine (and
 * architecture) the build is for, and writes the program as a C array
 * (launcher-seccomp-bpf.c) that launcher-seccomp.c hands to seccomp(2).
 * Compiling the same filter for every `fusebox run` cost 0.6 ms of CPU, and
 * loading libseccomp into every run more (docs/performance.md, Startup).
 * Nothing in the program depends on the running kernel: syscall numbers are
 * the headers', and a syscall the kernel lacks is simply never matched.
 *
 * Default action: allow.  Denials return an errno so that programs fail
 * cleanly: EPERM where a privilege is missing, ENOSYS where libraries probe
 * and fall back (clone3, the new mount API, io_uring), EAFNOSUPPORT for
 * socket families and EPROTONOSUPPORT for their protocols.  Foreign architectures and the x32 ABI kill the process:
 * a filter written for one syscall table says nothing about another, so any
 * such call is an attack.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct
{
  long nr;
  int err;
  const char *why;
} Denial;

/* Syscalls that newer kernels have and older headers may lack.  Numbers of
 * syscalls added after 4.x are the same on every architecture but alpha. */
#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467
#endif

/* Unconditional denials, one reason each. */
static const Denial denials[] = {
  /* namespaces and mounts: the sandbox's shape is fixed once it runs */
  { __NR_unshare, EPERM,
    "new namespaces would undo the sandbox's view (and user namespaces are kernel attack surface)" },
  { __NR_setns, EPERM, "joining another namespace leaves the sandbox" },
  { __NR_mount, EPERM, "mounts could cover or replace the FUSE view" },
  { __NR_umount2, EPERM, "unmounting the view or /proc would expose what is below" },
#ifdef __NR_umount
  { __NR_umount, EPERM, "same as umount2 (old ABI)" },
#endif
  { __NR_pivot_root, EPERM, "the root is the view and stays so" },
  { __NR_chroot, EPERM, "chroot tricks can escape a changed root" },
  /* ENOSYS, not EPERM: glibc and friends fall back to clone/mount when a
   * syscall is missing, but treat EPERM as final */
  { __NR_clone3, ENOSYS, "its flags live in memory where seccomp can't check CLONE_NEW*; libc falls back to clone" },
  { __NR_open_tree, ENOSYS, "new mount API: can clone and attach mounts" },
  { __NR_move_mount, ENOSYS, "new mount API: attaches mounts" },
  { __NR_fsopen, ENOSYS, "new mount API: creates filesystems" },
  { __NR_fsconfig, ENOSYS, "new mount API: configures filesystems" },
  { __NR_fsmount, ENOSYS, "new mount API: makes mounts" },
  { __NR_fspick, ENOSYS, "new mount API: reconfigures existing mounts" },
  { __NR_mount_setattr, ENOSYS, "new mount API: changes mount flags (could drop read-only)" },
  { __NR_open_tree_attr, ENOSYS, "new mount API (6.15): clones mounts with new attributes" },
  /* keyrings: shared across the host per user, not namespaced */
  { __NR_add_key, EPERM, "keyrings are per user, shared with the host" },
  { __NR_keyctl, EPERM, "keyrings are per user, shared with the host" },
  { __NR_request_key, EPERM, "keyrings are per user, shared with the host (and can call upcalls)" },
  /* introspection of other processes */
  { __NR_ptrace, EPERM, "tracing lets one sandboxed process rewrite another (and its seccomp view)" },
  { __NR_process_vm_readv, EPERM, "reads another process's memory" },
  { __NR_process_vm_writev, EPERM, "writes another process's memory" },
  { __NR_kcmp, EPERM, "compares kernel objects across processes (address-layout leaks)" },
  { __NR_pidfd_getfd, EPERM, "steals file descriptors from another process" },
  { __NR_perf_event_open, EPERM, "kernel profiling: side channels and a long CVE history" },
  /* kernel attack surface with no use in a sandboxed command */
  { __NR_bpf, EPERM, "eBPF verifier and maps: a frequent privilege-escalation target" },
  { __NR_userfaultfd, EPERM, "lets an attacker stall the kernel mid-copy to win races (CVE-2016-5195 style exploits)" },
  { __NR_io_uring_setup, ENOSYS,
    "io_uring bypasses the syscall filter and has many CVEs; libraries fall back to read/write" },
  { __NR_io_uring_enter, ENOSYS, "io_uring bypasses the syscall filter" },
  { __NR_io_uring_register, ENOSYS, "io_uring bypasses the syscall filter" },
#ifdef __NR_modify_ldt
  { __NR_modify_ldt, EPERM, "16-bit segments: old exploit vector (CVE-2015-5157, CVE-2017-17053)" },
#endif
  /* file handles name inodes directly, around every path check of the view */
  { __NR_open_by_handle_at, EPERM, "opens a file by handle, bypassing path mediation" },
  { __NR_name_to_handle_at, EPERM, "produces handles for open_by_handle_at and leaks inode identities" },
  /* host administration */
  { __NR_init_module, EPERM, "loads kernel modules" },
  { __NR_finit_module, EPERM, "loads kernel modules" },
  { __NR_delete_module, EPERM, "unloads kernel modules" },
  { __NR_kexec_load, EPERM, "replaces the running kernel" },
#ifdef __NR_kexec_file_load
  { __NR_kexec_file_load, EPERM, "replaces the running kernel" },
#endif
  { __NR_reboot, EPERM, "reboots (in a pid namespace: kills its init)" },
  { __NR_swapon, EPERM, "host swap configuration" },
  { __NR_swapoff, EPERM, "host swap configuration" },
  { __NR_acct, EPERM, "process accounting writes to a host file" },
  { __NR_quotactl, EPERM, "host quota configuration" },
#ifdef __NR_quotactl_fd
  { __NR_quotactl_fd, EPERM, "host quota configuration" },
#endif
  { __NR_syslog, EPERM, "the kernel log leaks addresses and host activity" },
  { __NR_settimeofday, EPERM, "the clock is the host's" },
  { __NR_clock_settime, EPERM, "the clock is the host's" },
  { __NR_clock_adjtime, EPERM, "the clock is the host's" },
  { __NR_adjtimex, EPERM, "the clock is the host's" },
#ifdef __NR_stime
  { __NR_stime, EPERM, "the clock is the host's" },
#endif
};

/* clone(2)'s flags argument: arg 1 on s390 (stack first), arg 0 elsewhere. */
#if defined(__s390__) || defined(__s390x__) || defined(__CRIS__)
#define CLONE_FLAGS_ARG 1
#else
#define CLONE_FLAGS_ARG 0
#endif

static int
add_rule (scmp_filter_ctx ctx, long nr, int err, unsigned n, const struct scmp_arg_cmp *cmp)
{
  int r = seccomp_rule_add_array (ctx, SCMP_ACT_ERRNO (err), (int)nr, n, cmp);
  /* -EDOM/-EFAULT: the syscall does not exist on this architecture (e.g. a
   * number from newer headers); nothing to deny then. */
  if (r == -EDOM || r == -EFAULT)
    return 0;
  return r;
}

/* Deny every value of argument ARG but ALLOWED (ascending), where COND
 * holds too.  libseccomp can't put two comparisons on one argument in a
 * rule, so each gap between allowed values is cut into aligned blocks of a
 * power of two, one masked comparison each, and everything above the last
 * is one 64-bit comparison, which also catches any value with high bits set
 * (the kernel would read only the low 32, and might find an allowed one). */
static int
add_deny_all_but (scmp_filter_ctx ctx, long nr, int err, const struct scmp_arg_cmp *cond, unsigned arg,
                  const uint64_t *allowed, size_t n)
{
  uint64_t lo = 0;
  int r;

  for (size_t i = 0; i < n; i++)
    {
      while (lo < allowed[i])
        {
          uint64_t size = 1;
          while (lo % (size * 2) == 0 && lo + size * 2 <= allowed[i])
            size *= 2;
          struct scmp_arg_cmp cmp[2] = { *cond, SCMP_CMP (arg, SCMP_CMP_MASKED_EQ, ~(size - 1), lo) };
          if ((r = add_rule (ctx, nr, err, 2, cmp)) < 0)
            return r;
          lo += size;
        }
      lo = allowed[i] + 1;
    }
  struct scmp_arg_cmp above[2] = { *cond, SCMP_CMP (arg, SCMP_CMP_GE, lo) };
  return add_rule (ctx, nr, err, 2, above);
}

static int
add_clone_rules (scmp_filter_ctx ctx)
{
  /* clone() with any CLONE_NEW* flag: one rule per flag because libseccomp
   * can't test "mask != 0" in one comparison.  CLONE_NEWTIME (0x80) is not
   * among them: in clone() that bit is part of the exit signal, and the
   * time namespace is reachable only through unshare/clone3, both denied. */
  static const unsigned long flags[] = {
    CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
  };
  for (size_t i = 0; i < G_N_ELEMENTS (flags); i++)
    {
      struct scmp_arg_cmp cmp = SCMP_CMP (CLONE_FLAGS_ARG, SCMP_CMP_MASKED_EQ, flags[i], flags[i]);
      int r = add_rule (ctx, __NR_clone, EPERM, 1, &cmp);
      if (r < 0)
        return r;
    }
  return 0;
}

static int
add_personality_rules (scmp_filter_ctx ctx)
{
  /* Allowed: PER_LINUX (0) and the query 0xffffffff.  Other personalities
   * turn on READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE and the like: weaker
   * exploit mitigations for the process and what it execs.  The kernel reads
   * an unsigned int, so high bits must not smuggle a value past the filter:
   * anything above 32 bits is denied outright.  libseccomp can't AND two
   * comparisons on one argument, so "low 32 bits neither all 0 nor all 1"
   * is written as "some bit i is 1 and bit i+1 (mod 32) is 0": a cyclic bit
   * string has such a 1→0 step exactly when it is not constant. */
  struct scmp_arg_cmp high = SCMP_A0 (SCMP_CMP_GT, 0xffffffffULL);
  int r = add_rule (ctx, __NR_personality, EPERM, 1, &high);
  if (r < 0)
    return r;
  for (unsigned i = 0; i < 32; i++)
    {
      uint64_t one = 1ULL << i;
      uint64_t next = 1ULL << ((i + 1) % 32);
      struct scmp_arg_cmp cmp = SCMP_A0 (SCMP_CMP_MASKED_EQ, one | next, one);
      r = add_rule (ctx, __NR_personality, EPERM, 1, &cmp);
      if (r < 0)
        return r;
    }
  return 0;
}

static int
add_ioctl_rules (scmp_filter_ctx ctx)
{
  /* The kernel reads ioctl's request as an unsigned int: match the low 32
   * bits, or TIOCSTI | (1 << 32) would pass the filter and still push
   * characters into the terminal's input (CVE-2017-5226 for bubblewrap). */
  static const unsigned long requests[] = {
    TIOCSTI,   /* fakes input on a terminal the sandbox shares with the caller */
    TIOCLINUX, /* on a virtual console: paste buffer (TIOCL_PASTESEL) is input injection too */
    /* A terminal's line discipline outlives the run: N_NULL (27) left the
     * caller's terminal answering every write with EOPNOTSUPP; and the
     * kernel loads the module of a discipline it lacks (tty-ldisc-N:
     * N_GSM0710, N_HDLC...; dev.tty.ldisc_autoload).  Only slattach, pppd
     * and the like set one: none belongs in a sandbox. */
    TIOCSETD,
  };
  for (size_t i = 0; i < G_N_ELEMENTS (requests); i++)
    {
      struct scmp_arg_cmp cmp = SCMP_A1 (SCMP_CMP_MASKED_EQ, 0xffffffffULL, requests[i]);
      int r = add_rule (ctx, __NR_ioctl, EPERM, 1, &cmp);
      if (r < 0)
        return r;
    }
  return 0;
}

static int
add_socket_rules (scmp_filter_ctx ctx, long nr)
{
  /* Families: AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK (route only) are all
   * a command needs; the others (packet, vsock, bluetooth, alg, rds, tipc...)
   * reach rarely used kernel code with a long CVE record.  The deny set is
   * "every value but 1, 2, 10 and 16", as 64-bit comparisons: a value with
   * high bits set never equals an allowed family, so it is denied even though
   * the kernel would only read the low 32 bits. */
  static const uint64_t allowed[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };
  uint64_t lo = 0;
  for (size_t i = 0; i < G_N_ELEMENTS (allowed); i++)
    {
      for (uint64_t f = lo; f < allowed[i]; f++)
        {
          struct scmp_arg_cmp cmp = SCMP_A0 (SCMP_CMP_EQ, f);
          int r = add_rule (ctx, nr, EAFNOSUPPORT, 1, &cmp);
          if (r < 0)
            return r;
        }
      lo = allowed[i] + 1;
    }
  struct scmp_arg_cmp above = SCMP_A0 (SCMP_CMP_GE, lo);
  int r = add_rule (ctx, nr, EAFNOSUPPORT, 1, &above);
  if (r < 0)
    return r;

  /* Netlink: only NETLINK_ROUTE (0), for `ip addr` and getaddrinfo's
   * interface checks; audit, uevent, netfilter, xfrm... stay out. */
  struct scmp_arg_cmp netlink[2] = {
    SCMP_A0 (SCMP_CMP_EQ, AF_NETLINK),
    SCMP_A2 (SCMP_CMP_NE, NETLINK_ROUTE),
  };
  r = add_rule (ctx, nr, EAFNOSUPPORT, 2, netlink);
  if (r < 0)
    return r;

  /* Protocols of AF_INET and AF_INET6: inet_create() loads the module of a
   * protocol the kernel lacks (net-pf-2-proto-132: SCTP; 115: L2TP; 256:
   * SMC; 33: DCCP), which is the family filter's reason again, one level
   * down.  What commands use is built in: 0 (the type's default), TCP, UDP,
   * ICMP and ICMPv6 (ping sockets; raw ones need CAP_NET_RAW anyway) and
   * MPTCP (Go's listeners try it first, and it is never a module).  Anything
   * else gets the kernel's own answer for an unknown protocol. */
  static const uint64_t inet[] = { 0, IPPROTO_ICMP, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_MPTCP };
  static const uint64_t inet6[] = { 0, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMPV6, IPPROTO_MPTCP };
  struct scmp_arg_cmp is_inet = SCMP_A0 (SCMP_CMP_EQ, AF_INET);
  struct scmp_arg_cmp is_inet6 = SCMP_A0 (SCMP_CMP_EQ, AF_INET6);
  if ((r = add_deny_all_but (ctx, nr, EPROTONOSUPPORT, &is_inet, 2, inet, G_N_ELEMENTS (inet))) < 0)
    return r;
  return add_deny_all_but (ctx, nr, EPROTONOSUPPORT, &is_inet6, 2, inet6, G_N_ELEMENTS (inet6));
}

static int
add_setsockopt_rules (scmp_filter_ctx ctx)
{
  /* TCP_ULP attaches an upper-layer protocol to a TCP socket: "tls" is
   * kTLS, a large parser reached from a socket (CVE-2023-0461 was a
   * privilege escalation through it), and a kernel with modules loads the
   * ULP's (tcp-ulp-NAME) for a caller it deems privileged.  Libraries that
   * offer kTLS (OpenSSL, GnuTLS) fall back to user-space TLS when it fails.
   * level and optname are ints to the kernel: the low 32 bits decide. */
  struct scmp_arg_cmp ulp[2] = {
    SCMP_A1 (SCMP_CMP_MASKED_EQ, 0xffffffffULL, SOL_TCP),
    SCMP_A2 (SCMP_CMP_MASKED_EQ, 0xffffffffULL, TCP_ULP),
  };
  return add_rule (ctx, __NR_setsockopt, EPERM, 2, ulp);
}

static int
build (scmp_filter_ctx ctx)
{
  int r;

  /* A syscall from another ABI (i386 via int 0x80, x32) is checked against
   * no rule at all: kill the whole process, not just the thread. */
  r = seccomp_attr_set (ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (r < 0)
    return r;
  /* All threads get the filter (the launcher's child has one thread, but a
   * reused building block must not leave a thread unfiltered). */
  r = seccomp_attr_set (ctx, SCMP_FLTATR_CTL_TSYNC, 1);
  if (r < 0)
    return r;

  for (size_t i = 0; i < G_N_ELEMENTS (denials); i++)
    {
      r = add_rule (ctx, denials[i].nr, denials[i].err, 0, NULL);
      if (r < 0)
        return r;
    }
  if ((r = add_clone_rules (ctx)) < 0)
    return r;
  if ((r = add_personality_rules (ctx)) < 0)
    return r;
  if ((r = add_ioctl_rules (ctx)) < 0)
    return r;
  if ((r = add_socket_rules (ctx, __NR_socket)) < 0)
    return r;
  /* socketpair with other families is either useless or the same surface */
  if ((r = add_socket_rules (ctx, __NR_socketpair)) < 0)
    return r;
  if ((r = add_setsockopt_rules (ctx)) < 0)
    return r;
  return 0;
}

static int
fail (const char *what, int r)
{
  fprintf (stderr, "fusebox-seccomp-gen: %s: %s\n", what, g_strerror (-r));
  return 1;
}

int
main (int argc, char **argv)
{
  scmp_filter_ctx ctx;
  struct stat st;
  FILE *out;
  int fd, r;

  if (argc != 2)
    {
      fprintf (stderr, "usage: fusebox-seccomp-gen OUTPUT.c\n");
      return 2;
    }
  ctx = seccomp_init (SCMP_ACT_ALLOW);
  if (!ctx)
    return fail ("seccomp_init", -ENOMEM);
  r = build (ctx);
  if (r < 0)
    return fail ("building the filter", r);
  /* libseccomp 2.5 exports only to an fd */
  fd = memfd_create ("fusebox-seccomp", MFD_CLOEXEC);
  if (fd < 0)
    return fail ("memfd_create", -errno);
  r = seccomp_export_bpf (ctx, fd);
  seccomp_release (ctx);
  if (r < 0)
    return fail ("seccomp_export_bpf", r);
  if (fstat (fd, &st) < 0)
    return fail ("fstat", -errno);
  if (st.st_size <= 0 || st.st_size % sizeof (struct sock_filter) != 0 ||
      st.st_size / sizeof (struct sock_filter) > BPF_MAXINSNS)
    return fail ("the exported program's size", -E2BIG);

  g_autofree struct sock_filter *insns = g_malloc (st.st_size);
  if (pread (fd, insns, st.st_size, 0) != st.st_size)
    return fail ("reading the exported program", -EIO);
  close (fd);

  size_t n = (size_t)st.st_size / sizeof (struct sock_filter);
  out = fopen (argv[1], "w");
  if (!out)
    return fail (argv[1], -errno);
  fprintf (out,
           "/* Generated by fusebox-seccomp-gen (launcher/launcher-seccomp-gen.c) with\n"
           " * libseccomp %u.%u.%u: the sandbox's seccomp program.  Do not edit. */\n"
           "#include \"launcher/launcher-private.h\"\n\n"
           "const struct sock_filter fb_launcher_seccomp_program[%zu] = {\n",
           seccomp_version ()->major, seccomp_version ()->minor, seccomp_version ()->micro, n);
  for (size_t i = 0; i < n; i++)
    fprintf (out, "  { 0x%04x, %u, %u, 0x%08x },\n", insns[i].code, insns[i].jt, insns[i].jf, insns[i].k);
  fprintf (out, "};\nconst unsigned short fb_launcher_seccomp_program_len = %zu;\n", n);
  if (fclose (out) != 0)
    return fail (argv[1], -errno);
  return 0;
}
