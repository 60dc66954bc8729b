/* fusebox — escapes from inside: every entry of the seccomp filter denied
 * with its errno, TIOCSTI/TIOCLINUX with high bits set, socket families,
 * foreign ABIs killed; and the same prober outside a sandbox, as an
 * unprivileged user, to show that the probes tell the difference.
 *
 * A probe the host can't run (i386 `int 0x80` on a kernel without 32-bit
 * syscall emulation faults before seccomp sees it) is shown another way:
 * the filter program's own decision for that architecture and syscall
 * number, by interpreting the BPF program as the kernel would, an
 * interpreter that the kernel itself checks on the calls this host can run.
 * FUSEBOX_TEST_HOST_LACKS=ia32 takes that branch on any host
 * (tests/lib/test-host.h). */
#include "test-launcher-util.h"

#include <grp.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "fixtures/fb-escape-expected.h"
#include "launcher/launcher-private.h"
#include "tests/lib/test-host.h"

/* The host feature ROW needs to reach seccomp, and a note when it lacks it
 * (NULL: the probe's own answer counts). */
static const char *
row_unreachable (const Expect *row)
{
  const char *lacks = row->needs != NULL ? test_host_lacks (row->needs) : NULL;
  if (lacks != NULL)
    fprintf (stderr,
             "probe %s not shown by the kernel: %s; the filter's decision for it is shown by "
             "test_program_decisions instead\n",
             row->probe, lacks);
  return lacks;
}

static void
test_escapes_denied (void **state)
{
  TestState *s = *state;
  g_autoptr (JsonObject) o = test_run_fixture_json (s, "fb-escape", 1000, 1000);

  guint wrong = 0;
  for (size_t i = 0; i < G_N_ELEMENTS (expected); i++)
    {
      const char *got = json_object_has_member (o, expected[i].probe)
                          ? json_object_get_string_member (o, expected[i].probe)
                          : "(missing)";
      /* unreachable here: the probe must still not succeed */
      if (row_unreachable (&expected[i]) != NULL && strcmp (got, "OK") != 0)
        continue;
      if (strcmp (got, expected[i].inside) != 0)
        {
          fprintf (stderr, "probe %s: expected %s, got %s\n", expected[i].probe, expected[i].inside, got);
          wrong++;
        }
    }
  /* every probe of the fixture is in the table */
  assert_int_equal (json_object_get_size (o), G_N_ELEMENTS (expected));
  assert_int_equal (wrong, 0);
}

/* The same prober on the host, as nobody with no capabilities (it refuses
 * to run with any). */
static void
test_probes_discriminate (void **state)
{
  if (geteuid () != 0)
    test_skip_test (false, "becoming nobody on the host needs root");
  g_autofree char *escape = test_fixture ("fb-escape");
  g_autofree char *out = test_run_as_nobody (escape);
  g_autoptr (JsonObject) o = test_parse_object (out);

  for (size_t i = 0; i < G_N_ELEMENTS (escape_discriminating); i++)
    for (size_t j = 0; j < G_N_ELEMENTS (expected); j++)
      if (strcmp (expected[j].probe, escape_discriminating[i]) == 0)
        {
          const char *got = json_object_get_string_member (o, escape_discriminating[i]);
          if (strcmp (got, expected[j].inside) == 0)
            fail_msg ("probe %s gives %s outside the sandbox too: it proves nothing", escape_discriminating[i], got);
        }
}

/* ---- the program's own decisions ---- */

/* The action a classic BPF seccomp program returns for DATA, computed as
 * the kernel computes it (kernel/seccomp.c accepts only these instructions,
 * and loads only 32-bit words of struct seccomp_data at aligned offsets). */
static guint32
program_decide (const struct sock_filter *prog, size_t len, const struct seccomp_data *data)
{
  guint32 a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };

  for (size_t pc = 0; pc < len; pc++)
    {
      const struct sock_filter *f = &prog[pc];
      guint32 k = f->k;
      size_t next = pc;

      switch (f->code)
        {
          case BPF_LD | BPF_W | BPF_ABS:
            if (k % 4 != 0 || k + 4 > sizeof *data)
              fail_msg ("instruction %zu loads offset %u, outside struct seccomp_data", pc, k);
            memcpy (&a, (const char *)data + k, 4);
            break;
          case BPF_LD | BPF_W | BPF_LEN:
            a = sizeof *data;
            break;
          case BPF_LDX | BPF_W | BPF_LEN:
            x = sizeof *data;
            break;
          case BPF_LD | BPF_IMM:
            a = k;
            break;
          case BPF_LDX | BPF_IMM:
            x = k;
            break;
          case BPF_LD | BPF_MEM:
          case BPF_LDX | BPF_MEM:
          case BPF_ST:
          case BPF_STX:
            if (k >= BPF_MEMWORDS)
              fail_msg ("instruction %zu: scratch word %u", pc, k);
            if (f->code == (BPF_LD | BPF_MEM))
              a = mem[k];
            else if (f->code == (BPF_LDX | BPF_MEM))
              x = mem[k];
            else
              mem[k] = f->code == BPF_ST ? a : x;
            break;
          case BPF_ALU | BPF_ADD | BPF_K:
            a += k;
            break;
          case BPF_ALU | BPF_ADD | BPF_X:
            a += x;
            break;
          case BPF_ALU | BPF_SUB | BPF_K:
            a -= k;
            break;
          case BPF_ALU | BPF_SUB | BPF_X:
            a -= x;
            break;
          case BPF_ALU | BPF_AND | BPF_K:
            a &= k;
            break;
          case BPF_ALU | BPF_AND | BPF_X:
            a &= x;
            break;
          case BPF_ALU | BPF_OR | BPF_K:
            a |= k;
            break;
          case BPF_ALU | BPF_OR | BPF_X:
            a |= x;
            break;
          case BPF_ALU | BPF_XOR | BPF_K:
            a ^= k;
            break;
          case BPF_ALU | BPF_XOR | BPF_X:
            a ^= x;
            break;
          case BPF_ALU | BPF_LSH | BPF_K:
            a = k < 32 ? a << k : 0;
            break;
          case BPF_ALU | BPF_RSH | BPF_K:
            a = k < 32 ? a >> k : 0;
            break;
          case BPF_ALU | BPF_NEG:
            a = -a;
            break;
          case BPF_MISC | BPF_TAX:
            x = a;
            break;
          case BPF_MISC | BPF_TXA:
            a = x;
            break;
          case BPF_JMP | BPF_JA:
            next = pc + k;
            break;
          case BPF_JMP | BPF_JEQ | BPF_K:
            next = pc + (a == k ? f->jt : f->jf);
            break;
          case BPF_JMP | BPF_JEQ | BPF_X:
            next = pc + (a == x ? f->jt : f->jf);
            break;
          case BPF_JMP | BPF_JGT | BPF_K:
            next = pc + (a > k ? f->jt : f->jf);
            break;
          case BPF_JMP | BPF_JGT | BPF_X:
            next = pc + (a > x ? f->jt : f->jf);
            break;
          case BPF_JMP | BPF_JGE | BPF_K:
            next = pc + (a >= k ? f->jt : f->jf);
            break;
          case BPF_JMP | BPF_JGE | BPF_X:
            next = pc + (a >= x ? f->jt : f->jf);
            break;
          case BPF_JMP | BPF_JSET | BPF_K:
            next = pc + ((a & k) ? f->jt : f->jf);
            break;
          case BPF_JMP | BPF_JSET | BPF_X:
            next = pc + ((a & x) ? f->jt : f->jf);
            break;
          case BPF_RET | BPF_K:
            return k;
          case BPF_RET | BPF_A:
            return a;
          default:
            fail_msg ("instruction %zu: code 0x%04x is not one this interpreter knows", pc, f->code);
        }
      /* jumps go forward only, and stay inside the program */
      if (next + 1 >= len)
        fail_msg ("instruction %zu jumps past the program's end", pc);
      pc = next;
    }
  fail_msg ("the program runs off its end without a return");
  return 0;
}

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef NATIVE_ARCH
typedef enum
{
  ABI_NATIVE,
  ABI_X32,  /* x86-64's x32 numbers: the native arch with bit 30 set */
  ABI_I386, /* int 0x80 on x86-64 */
} Abi;

/* Calls with harmless effects should the filter let them through: each is
 * run for real under the filter where the host can, and its outcome must
 * match the program's decision. */
typedef struct
{
  const char *name;
  Abi abi;
  long nr;
  guint64 args[6];
  guint32 action;
} Call;

#define ERRNO(e) (SECCOMP_RET_ERRNO | (e))
static const Call calls[] = {
  { "getpid", ABI_NATIVE, __NR_getpid, { 0 }, SECCOMP_RET_ALLOW },
  { "unshare(CLONE_NEWUSER)", ABI_NATIVE, __NR_unshare, { CLONE_NEWUSER }, ERRNO (EPERM) },
  { "ioctl(-1, TIOCSTI | 1 << 32)", ABI_NATIVE, __NR_ioctl, { -1, TIOCSTI | (1ULL << 32) }, ERRNO (EPERM) },
  { "ioctl(-1, TIOCGWINSZ)", ABI_NATIVE, __NR_ioctl, { -1, TIOCGWINSZ }, SECCOMP_RET_ALLOW },
  { "personality(PER_LINUX32)", ABI_NATIVE, __NR_personality, { PER_LINUX32 }, ERRNO (EPERM) },
  { "personality(0xffffffff)", ABI_NATIVE, __NR_personality, { 0xffffffff }, SECCOMP_RET_ALLOW },
  { "socket(AF_PACKET)", ABI_NATIVE, __NR_socket, { AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC }, ERRNO (EAFNOSUPPORT) },
  { "socket(netlink audit)", ABI_NATIVE, __NR_socket, { AF_NETLINK, SOCK_DGRAM, NETLINK_AUDIT }, ERRNO (EAFNOSUPPORT) },
  { "keyctl", ABI_NATIVE, __NR_keyctl, { 0 }, ERRNO (EPERM) },
  { "io_uring_setup", ABI_NATIVE, __NR_io_uring_setup, { 0 }, ERRNO (ENOSYS) },
  { "ioctl(-1, TIOCSETD)", ABI_NATIVE, __NR_ioctl, { -1, TIOCSETD }, ERRNO (EPERM) },
  { "ioctl(-1, TIOCSETD | 1 << 32)", ABI_NATIVE, __NR_ioctl, { -1, TIOCSETD | (1ULL << 32) }, ERRNO (EPERM) },
  /* the protocols commands use stay; a module's (SCTP, L2TP, SMC, DCCP)
   * never reaches inet_create(), nor a value with high bits set */
  { "socket inet stream 0", ABI_NATIVE, __NR_socket, { AF_INET, SOCK_STREAM, 0 }, SECCOMP_RET_ALLOW },
  { "socket inet TCP", ABI_NATIVE, __NR_socket, { AF_INET, SOCK_STREAM, IPPROTO_TCP }, SECCOMP_RET_ALLOW },
  { "socket inet UDP", ABI_NATIVE, __NR_socket, { AF_INET, SOCK_DGRAM, IPPROTO_UDP }, SECCOMP_RET_ALLOW },
  { "socket inet ICMP", ABI_NATIVE, __NR_socket, { AF_INET, SOCK_DGRAM, IPPROTO_ICMP }, SECCOMP_RET_ALLOW },
  { "socket inet MPTCP", ABI_NATIVE, __NR_socket, { AF_INET, SOCK_STREAM, IPPROTO_MPTCP }, SECCOMP_RET_ALLOW },
  { "socket inet6 TCP", ABI_NATIVE, __NR_socket, { AF_INET6, SOCK_STREAM, IPPROTO_TCP }, SECCOMP_RET_ALLOW },
  { "socket inet6 UDP", ABI_NATIVE, __NR_socket, { AF_INET6, SOCK_DGRAM, IPPROTO_UDP }, SECCOMP_RET_ALLOW },
  { "socket inet6 ICMPv6", ABI_NATIVE, __NR_socket, { AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6 }, SECCOMP_RET_ALLOW },
  { "socket inet6 MPTCP", ABI_NATIVE, __NR_socket, { AF_INET6, SOCK_STREAM, IPPROTO_MPTCP }, SECCOMP_RET_ALLOW },
  { "socket unix stream 0", ABI_NATIVE, __NR_socket, { AF_UNIX, SOCK_STREAM, 0 }, SECCOMP_RET_ALLOW },
  { "socket inet SCTP", ABI_NATIVE, __NR_socket, { AF_INET, SOCK_STREAM, IPPROTO_SCTP }, ERRNO (EPROTONOSUPPORT) },
  { "socket inet6 SCTP", ABI_NATIVE, __NR_socket, { AF_INET6, SOCK_STREAM, IPPROTO_SCTP }, ERRNO (EPROTONOSUPPORT) },
  { "socket inet L2TP", ABI_NATIVE, __NR_socket, { AF_INET, SOCK_DGRAM, 115 /* L2TP */ }, ERRNO (EPROTONOSUPPORT) },
  { "socket inet SMC", ABI_NATIVE, __NR_socket, { AF_INET, SOCK_STREAM, 256 /* SMC */ }, ERRNO (EPROTONOSUPPORT) },
  { "socket inet DCCP", ABI_NATIVE, __NR_socket, { AF_INET, SOCK_DCCP, IPPROTO_DCCP }, ERRNO (EPROTONOSUPPORT) },
  { "socket inet6 ICMP", ABI_NATIVE, __NR_socket, { AF_INET6, SOCK_DGRAM, IPPROTO_ICMP }, ERRNO (EPROTONOSUPPORT) },
  { "socket inet TCP | 1 << 32",
    ABI_NATIVE,
    __NR_socket,
    { AF_INET, SOCK_STREAM, IPPROTO_TCP | (1ULL << 32) },
    ERRNO (EPROTONOSUPPORT) },
  { "socket inet -1", ABI_NATIVE, __NR_socket, { AF_INET, SOCK_STREAM, (guint64)-1 }, ERRNO (EPROTONOSUPPORT) },
  { "socketpair inet SCTP",
    ABI_NATIVE,
    __NR_socketpair,
    { AF_INET, SOCK_STREAM, IPPROTO_SCTP },
    ERRNO (EPROTONOSUPPORT) },
  { "setsockopt TCP_ULP", ABI_NATIVE, __NR_setsockopt, { -1, SOL_TCP, TCP_ULP }, ERRNO (EPERM) },
  { "setsockopt TCP_ULP | 1 << 32",
    ABI_NATIVE,
    __NR_setsockopt,
    { -1, SOL_TCP, TCP_ULP | (1ULL << 32) },
    ERRNO (EPERM) },
  { "setsockopt TCP_NODELAY", ABI_NATIVE, __NR_setsockopt, { -1, SOL_TCP, TCP_NODELAY }, SECCOMP_RET_ALLOW },
#if defined(__x86_64__)
  /* 39: x86-64's getpid; 20, 310: i386's getpid and unshare */
  { "x32 getpid", ABI_X32, 39, { 0 }, SECCOMP_RET_KILL_PROCESS },
  { "i386 getpid (int 0x80)", ABI_I386, 20, { 0 }, SECCOMP_RET_KILL_PROCESS },
  { "i386 unshare(CLONE_NEWUSER) (int 0x80)", ABI_I386, 310, { CLONE_NEWUSER }, SECCOMP_RET_KILL_PROCESS },
#endif
};

static struct seccomp_data
call_data (const Call *call)
{
  struct seccomp_data d = { .nr = (int)call->nr, .arch = NATIVE_ARCH };
  if (call->abi == ABI_X32)
    d.nr |= 0x40000000; /* __X32_SYSCALL_BIT */
  if (call->abi == ABI_I386)
    d.arch = AUDIT_ARCH_I386;
  for (int i = 0; i < 6; i++)
    d.args[i] = call->abi == ABI_I386 ? (guint32)call->args[i] : call->args[i];
  return d;
}

static char *
describe_action (guint32 action)
{
  switch (action & SECCOMP_RET_ACTION_FULL)
    {
      case SECCOMP_RET_ALLOW:
        return g_strdup ("allow");
      case SECCOMP_RET_KILL_PROCESS:
        return g_strdup ("kill the process (SIGSYS)");
      case SECCOMP_RET_KILL_THREAD:
        return g_strdup ("kill the thread (SIGSYS)");
      case SECCOMP_RET_ERRNO:
        return g_strdup_printf ("fail with %s", strerrorname_np (action & SECCOMP_RET_DATA));
    }
  return g_strdup_printf ("action 0x%08x", action);
}

/* The program fusebox installs decides each call as its rules say, for the
 * native ABI and for the foreign ones (which no host needs to run). */
static void
test_program_decisions (void **state)
{
  g_autoptr (GString) bad = g_string_new (NULL);
  for (size_t i = 0; i < G_N_ELEMENTS (calls); i++)
    {
      struct seccomp_data d = call_data (&calls[i]);
      guint32 got = program_decide (fb_launcher_seccomp_program, fb_launcher_seccomp_program_len, &d);
      if (got != calls[i].action)
        {
          g_autofree char *want = describe_action (calls[i].action);
          g_autofree char *was = describe_action (got);
          g_string_append_printf (bad, "  %s: the program would %s, not %s\n", calls[i].name, was, want);
        }
    }
  if (bad->len)
    fail_msg ("the seccomp program decides:\n%s", bad->str);
}

/* In a child under the filter: make CALL, and exit with its errno (0 when
 * it returned), or die of the filter's signal. */
static G_GNUC_NORETURN void
make_call (const FbLauncherSeccomp *seccomp, const Call *call)
{
  struct rlimit none = { 0, 0 };
  long r = 0;
  setrlimit (RLIMIT_CORE, &none);
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || fb_launcher_seccomp_install (seccomp) < 0)
    _exit (255);
  errno = 0;
  switch (call->abi)
    {
      case ABI_NATIVE:
      case ABI_X32:
        r = syscall (call->nr | (call->abi == ABI_X32 ? 0x40000000 : 0), call->args[0], call->args[1], call->args[2],
                     call->args[3], call->args[4], call->args[5]);
        _exit (r < 0 ? errno : 0);
      case ABI_I386:
#if defined(__x86_64__)
        __asm__ volatile("int $0x80" : "=a"(r) : "a"(call->nr), "b"(call->args[0]) : "memory");
#endif
        _exit (r < 0 && r > -4096 ? (int)-r : 0);
    }
  _exit (254);
}

/* The interpreter is checked against the kernel: each call the host can run
 * is made under the real filter, with the outcome the program decided.  A
 * call the host can't run says what the host lacks; its row in
 * test_program_decisions stands for it. */
static void
test_kernel_agrees (void **state)
{
  g_autoptr (FbLauncherSeccomp) seccomp = NULL;
  g_autoptr (GString) bad = g_string_new (NULL);
  guint made = 0;

  assert_int_equal (fb_launcher_seccomp_new (&seccomp), 0);
  for (size_t i = 0; i < G_N_ELEMENTS (calls); i++)
    {
      const Call *call = &calls[i];
      const char *needs = call->abi == ABI_I386 ? "ia32" : call->abi == ABI_X32 ? "x86-64" : NULL;
      const char *lacks = needs != NULL ? test_host_lacks (needs) : NULL;
      if (lacks != NULL)
        {
          fprintf (stderr, "%s not made: %s; the program's decision stands for it\n", call->name, lacks);
          continue;
        }
      pid_t pid = fork ();
      assert_true (pid >= 0);
      if (pid == 0)
        make_call (seccomp, call);
      int status;
      assert_int_equal (waitpid (pid, &status, 0), pid);
      made++;
      struct seccomp_data d = call_data (call);
      guint32 decided = program_decide (fb_launcher_seccomp_program, fb_launcher_seccomp_program_len, &d);
      guint32 action = decided & SECCOMP_RET_ACTION_FULL;
      bool ok = false;
      if (WIFEXITED (status) && WEXITSTATUS (status) == 255)
        fail_msg ("%s: could not install the filter in the child", call->name);
      if (action == SECCOMP_RET_KILL_PROCESS || action == SECCOMP_RET_KILL_THREAD)
        ok = WIFSIGNALED (status) && WTERMSIG (status) == SIGSYS;
      else if (action == SECCOMP_RET_ERRNO)
        ok = WIFEXITED (status) && WEXITSTATUS (status) == (int)(decided & SECCOMP_RET_DATA);
      else /* allowed: whatever the kernel answers, it is not the filter's */
        ok = WIFEXITED (status) && WEXITSTATUS (status) != EPERM && WEXITSTATUS (status) != EAFNOSUPPORT &&
             WEXITSTATUS (status) != ENOSYS;
      if (!ok)
        {
          g_autofree char *want = describe_action (decided);
          if (WIFSIGNALED (status))
            g_string_append_printf (bad, "  %s: killed by %s, but the program says %s\n", call->name,
                                    sigabbrev_np (WTERMSIG (status)), want);
          else
            g_string_append_printf (bad, "  %s: errno %s, but the program says %s\n", call->name,
                                    strerrorname_np (WEXITSTATUS (status)) ?: "0", want);
        }
    }
  if (bad->len)
    fail_msg ("the kernel and the program's interpretation disagree:\n%s", bad->str);
  assert_true (made > 0);
}
#endif

/* The filter program builds and is a sane size (one of its rules, the
 * personality one, expands to 33 comparisons). */
static void
test_filter_builds (void **state)
{
  g_autoptr (FbLauncherSeccomp) seccomp = NULL;
  assert_int_equal (fb_launcher_seccomp_new (&seccomp), 0);
  assert_non_null (seccomp);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_escapes_denied, test_setup, test_teardown),
    cmocka_unit_test_setup_teardown (test_probes_discriminate, test_setup, test_teardown),
    cmocka_unit_test (test_filter_builds),
#ifdef NATIVE_ARCH
    cmocka_unit_test (test_program_decisions),
    cmocka_unit_test (test_kernel_agrees),
#endif
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
