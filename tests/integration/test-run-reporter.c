/* fusebox — two runs of the smoke reporter (fixtures/fb-smoke) through the
 * real `fusebox run`, as an agent harness would make them.
 *
 *  1. builtin:host, --network host, --uid 1000 --gid 1000: the connect to a
 *     host listener, the allowed write, and the read and write of the marker
 *     all succeed (nothing is denied: the policy is the host's).
 *  2. a policy with the workspace writable, the marker denied and network
 *     none, --exit-code 73: status 73; the connect fails and the host
 *     listener sees nothing within 200 ms; the allowed write lands on the
 *     host; the marker is neither readable nor writable and keeps its
 *     content; every namespace differs from the test's and from run 1's;
 *     /proc is a procfs of the reporter's pid namespace; uid/gid 1000, no
 *     capabilities, no_new_privs, seccomp filter mode; no .git, .agents or
 *     .codex appears in the workspace.
 *
 * The workspace and its files belong to root (the test's uid) with mode
 * 0644: with --uid 1000 inside, the writes of run 1 succeed only because
 * the view shows the caller's own files as the sandbox user's (the id
 * translation of fs/fs-fuse.c), and the files the sandbox creates belong to
 * the caller on the host, not to host uid 1000.
 */
#include <poll.h>
#include <signal.h>

#include "tests/lib/test-run.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

static const char *const ns_names[] = { "user", "mnt", "pid", "net", "ipc", "uts", "cgroup" };

/* A listening TCP socket on 127.0.0.1, port in *ret_port. */
static int
listener (int *ret_port)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof a;
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

  assert_true (fd >= 0);
  assert_int_equal (bind (fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal (listen (fd, 8), 0);
  assert_int_equal (getsockname (fd, (struct sockaddr *)&a, &len), 0);
  *ret_port = ntohs (a.sin_port);
  return fd;
}

/* Open every namespace of a process in the pid namespace PID_NS: while the
 * descriptors are open, the namespaces (and their inode numbers) live. */
static void
hold_namespaces (const char *pid_ns, int held[])
{
  g_autoptr (GArray) pids = test_proc_pids ();
  for (guint k = 0; k < pids->len; k++)
    {
      int pid = g_array_index (pids, pid_t, k);
      g_autofree char *path = g_strdup_printf ("/proc/%d/ns/pid", pid);
      g_autofree char *link = g_file_read_link (path, NULL);
      if (g_strcmp0 (link, pid_ns) != 0)
        continue;
      for (size_t i = 0; i < G_N_ELEMENTS (ns_names); i++)
        {
          g_autofree char *p = g_strdup_printf ("/proc/%d/ns/%s", pid, ns_names[i]);
          held[i] = open (p, O_RDONLY | O_CLOEXEC);
          if (held[i] < 0)
            fail_msg ("can't hold %s: %s", p, g_strerror (errno));
        }
      return;
    }
  fail_msg ("no process of run 1 (%s) is left to hold its namespaces", pid_ns);
}

static JsonObject *
smoke_output (const RfxResult *r)
{
  /* the reporter prints one line; fusebox prints nothing on stdout */
  return test_parse_object (r->out);
}

RFX_CASE (test_two_reporter_runs)
{
  g_autofree char *smoke = test_fixture ("fb-smoke");
  g_autofree char *allowed = g_build_filename (fx->ws, "allowed.txt", NULL);
  g_autofree char *marker = g_build_filename (fx->ws, "marker.txt", NULL);
  g_autofree char *created = g_build_filename (fx->ws, "created.txt", NULL);
  g_autofree char *policy = g_build_filename (fx->tmp, "policy.json", NULL);
  RfxResult r1 = { 0 }, r2 = { 0 };
  int port;
  int lfd = listener (&port);
  g_autofree char *target = g_strdup_printf ("127.0.0.1:%d", port);
  struct stat st;

  test_write (allowed, "allowed\n", 0644);
  test_write (marker, "the marker's content\n", 0644);
  test_assert_host_readable (marker);

  /* 1: the host's policy and network, other ids inside.  The reporter runs
   * under a shell that then waits, so that run 1's namespaces are still
   * alive while run 2 starts: the kernel reuses a dead namespace's inode
   * number, and "differs from run 1's" must compare live namespaces. */
  int out1;
  pid_t sup1 = rfx_start (fx, &out1, "--policy", "builtin:host", "--network", "host", "--uid", "1000", "--gid", "1000",
                          "--", "/bin/sh", "-c", "\"$0\" \"$@\"; echo \"exit $?\"; exec sleep 1000", smoke, "--connect",
                          target, "--allowed-write", created, "--denied-write", marker, NULL);
  r1.out = test_read_line (out1, 10000);
  g_autofree char *exit1 = test_read_line (out1, 10000);
  if (r1.out == NULL || g_strcmp0 (exit1, "exit 0") != 0)
    fail_msg ("run 1's reporter did not report (output '%s', then '%s')", r1.out ? r1.out : "", exit1 ? exit1 : "");
  g_autoptr (JsonObject) o1 = smoke_output (&r1);
  assert_string_equal (test_json_str (o1, "connect"), "OK");
  assert_string_equal (test_json_str (o1, "allowed_write"), "OK");
  assert_string_equal (test_json_str (o1, "denied_read"), "OK");
  assert_string_equal (test_json_str (o1, "denied_write"), "OK");
  assert_int_equal (json_object_get_int_member (o1, "euid"), 1000);
  assert_int_equal (json_object_get_int_member (o1, "egid"), 1000);
  /* the listener saw run 1's connection */
  {
    int c = accept4 (lfd, NULL, NULL, SOCK_CLOEXEC);
    assert_true (c >= 0);
    close (c);
  }
  /* what the sandbox created belongs to the caller (root), not to host
   * uid 1000: the view translated the sandbox's ids back */
  assert_int_equal (stat (created, &st), 0);
  assert_int_equal (st.st_uid, 0);
  assert_int_equal (st.st_gid, 0);
  JsonObject *ns1 = json_object_get_object_member (o1, "ns");
  /* hold run 1's namespaces (through its waiting shell) until the end */
  int held[G_N_ELEMENTS (ns_names)];
  hold_namespaces (json_object_get_string_member (ns1, "pid"), held);
  /* network host: the same network namespace as the test's */
  {
    g_autofree char *net = test_own_ns ("net");
    assert_string_equal (json_object_get_string_member (ns1, "net"), net);
  }

  g_autofree char *marker_before = test_read_file (marker);
  assert_non_null (strstr (marker_before, "fb-smoke was here")); /* run 1 did write it */

  /* 2: the workspace writable, the marker denied, no network */
  g_autofree char *policy_text =
    g_strdup_printf ("{ \"version\": 1, \"network\": \"none\", \"rules\": [\n"
                     "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"tools\" },\n"
                     "  { \"path\": \"%s\", \"access\": \"write\", \"why\": \"the workspace\" },\n"
                     "  { \"path\": \"%s\", \"access\": \"deny\", \"why\": \"the marker\" } ] }\n",
                     fx->ws, marker);
  test_write (policy, policy_text, 0644);
  g_autofree char *allowed2 = g_build_filename (fx->ws, "allowed2.txt", NULL);
  rfx_run (fx, &r2, "--policy", policy, "--uid", "1000", "--gid", "1000", "--", smoke, "--connect", target,
           "--allowed-write", allowed2, "--denied-write", marker, "--exit-code", "73", NULL);
  assert_int_equal (r2.status, 73);
  g_autoptr (JsonObject) o2 = smoke_output (&r2);

  /* the connect failed, and nothing reached the host's listener */
  assert_true (test_json_str (o2, "connect") != NULL);
  assert_string_not_equal (test_json_str (o2, "connect"), "OK");
  {
    struct pollfd p = { .fd = lfd, .events = POLLIN };
    assert_int_equal (poll (&p, 1, 200), 0);
  }
  close (lfd);

  /* the allowed write landed on the host */
  assert_string_equal (test_json_str (o2, "allowed_write"), "OK");
  g_autofree char *allowed_text = test_read_file (allowed2);
  assert_non_null (allowed_text);
  assert_non_null (strstr (allowed_text, "fb-smoke was here"));

  /* the denied read and write failed and the marker kept its content */
  assert_string_equal (test_json_str (o2, "denied_read"), "EACCES");
  assert_string_equal (test_json_str (o2, "denied_write"), "EACCES");
  g_autofree char *marker_after = test_read_file (marker);
  assert_string_equal (marker_after, marker_before);

  /* every namespace is new: not the test's, not run 1's */
  /* (and /proc is a procfs of the reporter's own pid namespace) */
  test_assert_own_namespaces (o2, "run 2");
  JsonObject *ns2 = json_object_get_object_member (o2, "ns");
  for (size_t i = 0; i < G_N_ELEMENTS (ns_names); i++)
    {
      const char *theirs = json_object_get_string_member (ns2, ns_names[i]);
      if (strcmp (theirs, json_object_get_string_member (ns1, ns_names[i])) == 0)
        fail_msg ("run 2's %s namespace is run 1's (%s)", ns_names[i], theirs);
    }
  assert_int_equal (json_object_get_int_member (o2, "euid"), 1000);
  assert_int_equal (json_object_get_int_member (o2, "egid"), 1000);
  static const char *const caps[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
  for (size_t i = 0; i < G_N_ELEMENTS (caps); i++)
    assert_string_equal (test_json_str (o2, caps[i]), "0000000000000000");
  assert_int_equal (json_object_get_int_member (o2, "NoNewPrivs"), 1);
  assert_int_equal (json_object_get_int_member (o2, "Seccomp"), 2);

  /* no protected name appeared in the workspace, from either run */
  static const char *const protected_names[] = { ".git", ".agents", ".codex" };
  for (size_t i = 0; i < G_N_ELEMENTS (protected_names); i++)
    {
      g_autofree char *p = g_build_filename (fx->ws, protected_names[i], NULL);
      if (lstat (p, &st) == 0)
        fail_msg ("%s exists on the host after the runs", p);
    }

  for (size_t i = 0; i < G_N_ELEMENTS (held); i++)
    close (held[i]);
  assert_int_equal (kill (sup1, SIGTERM), 0);
  assert_int_equal (rfx_wait (fx, sup1, 10000), 128 + SIGTERM); /* the waiting shell's end */
  close (out1);
  rfx_result_clear (&r1);
  rfx_result_clear (&r2);
}

RFX_DEFINE_MAIN (NULL, NULL, RFX_TEST (test_two_reporter_runs))
