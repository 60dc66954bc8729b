/* fusebox — an agent's command through `fusebox serve`, first and second in
 * a session, against the same command on the host (the target,
 * docs/performance.md: the second process/start within 1.3x of the host).
 *
 *   bench-serve-warm --dir DIR [--runs N] [--policy POLICY] [--pause MS] -- ARGV...
 *
 * Starts the real `fusebox serve` (FUSEBOX_BIN, else this build tree's)
 * with --workspace DIR and --policy POLICY (default builtin:default), the
 * access log at its default level.  Each round, in turn: ARGV on the host
 * (in DIR, forked and reaped here), then a new client session whose first
 * process/start of ARGV (cwd DIR, PATH only) meets a fresh view, and whose
 * second and third run in the view the first left: its dentries, attributes
 * and pages.  A process is timed from the process/start call to its
 * process/exited notification (what a client waiting for the exit status
 * sees, with the sandbox's start); the host from fork to the reaped exit.
 * --pause MS waits that long between a session's processes, as an agent's
 * turn does between its commands (default 0: back to back); the server's
 * work in that pause (a kept view's refresher, fs/fs-fuse-warm.c) is then
 * not in the next process's time, as it is not in an agent's.
 * A process that fails (exit status not 0) fails the benchmark.  Rounds are
 * interleaved so that a change of load hits every column alike; the output
 * is the median, min and max of each column and the ratios to the host.
 *
 * The session is left (its connection closed) at the end of its round; its
 * view is closed by the server when idle, as any. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-exec.h"
#include "tests/lib/test-serve.h"

#define PROCESSES 3 /* per session: the first, then warm ones */

static double
now_s (void)
{
  return g_get_monotonic_time () / 1e6;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* process/start of ARGV_JSON in DIR as ID, until its process/exited: the
 * wall time, or < 0. */
static double
time_process (TestClient *c, const char *id, const char *argv_json, const char *qdir)
{
  double t0 = now_s ();
  g_autoptr (JsonNode) r = test_client_callf (
    c, "process/start",
    "{\"processId\":\"%s\",\"argv\":%s,\"cwd\":%s,\"env\":{\"PATH\":\"/usr/bin:/bin\"},\"tty\":false}", id, argv_json,
    qdir);
  g_autoptr (JsonNode) exited = NULL;
  double t;
  gint64 code;

  if (r == NULL || test_answer_result (r) == NULL)
    {
      g_printerr ("bench-serve-warm: process/start: %s\n", r != NULL ? test_answer_error_message (r) : "no answer");
      return -1;
    }
  exited = test_client_note (c, "process/exited", id);
  t = now_s () - t0;
  if (exited == NULL)
    return -1;
  code =
    json_object_get_int_member (json_object_get_object_member (json_node_get_object (exited), "params"), "exitCode");
  if (code != 0)
    {
      g_printerr ("bench-serve-warm: process %s exited %" G_GINT64_FORMAT "\n", id, code);
      return -1;
    }
  g_autoptr (JsonNode) closed = test_client_note (c, "process/closed", id);
  return t;
}

static void
report (const char *label, double *v, int n, double host)
{
  qsort (v, n, sizeof *v, cmp_double);
  printf ("  %-28s median %7.3f s  min %7.3f  max %7.3f", label, v[n / 2], v[0], v[n - 1]);
  if (host > 0)
    printf ("   (x%.2f of the host)", v[n / 2] / host);
  printf ("\n");
}

int
main (int argc, char **argv)
{
  int runs = 5, pause_ms = 0;
  const char *dir = NULL;
  const char *policy = "builtin:default";
  char **cmd = NULL;
  int status = 0;

  for (int i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "--runs") == 0 && i + 1 < argc)
        runs = atoi (argv[++i]);
      else if (strcmp (argv[i], "--dir") == 0 && i + 1 < argc)
        dir = argv[++i];
      else if (strcmp (argv[i], "--policy") == 0 && i + 1 < argc)
        policy = argv[++i];
      else if (strcmp (argv[i], "--pause") == 0 && i + 1 < argc)
        pause_ms = atoi (argv[++i]);
      else if (strcmp (argv[i], "--") == 0 && i + 1 < argc)
        {
          cmd = argv + i + 1;
          break;
        }
      else
        break;
    }
  if (runs < 1 || dir == NULL || cmd == NULL || pause_ms < 0)
    {
      fprintf (stderr, "usage: bench-serve-warm --dir DIR [--runs N] [--policy POLICY] [--pause MS] -- ARGV...\n");
      return 2;
    }
  bench_default_fusebox_bin ();

  const char *base = g_getenv ("TMPDIR") ? g_getenv ("TMPDIR") : "/var/tmp";
  g_autofree char *tmp = g_build_filename (base, "fusebox-bench-XXXXXX", NULL);
  if (g_mkdtemp (tmp) == NULL)
    {
      fprintf (stderr, "bench-serve-warm: mkdtemp in %s: %s\n", base, g_strerror (errno));
      return 1;
    }
  g_autofree char *rm = g_strdup_printf ("rm -rf '%s'", tmp);
  const char *args[] = { "--workspace", dir, "--policy", policy, NULL };
  TestServer *server = test_server_start (tmp, args);
  if (!g_str_has_prefix (server->url, "ws://"))
    {
      fprintf (stderr, "bench-serve-warm: the server did not start: %s\n", server->command);
      test_server_stop (server);
      return 1;
    }

  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_array (b);
  for (char **a = cmd; *a != NULL; a++)
    json_builder_add_string_value (b, *a);
  json_builder_end_array (b);
  g_autoptr (JsonNode) argv_node = json_builder_get_root (b);
  g_autofree char *argv_json = json_to_string (argv_node, FALSE);
  g_autoptr (JsonNode) dir_node = json_node_init_string (json_node_alloc (), dir);
  g_autofree char *qdir = json_to_string (dir_node, FALSE);

  double *host = g_new (double, runs);
  double *proc[PROCESSES];
  for (int p = 0; p < PROCESSES; p++)
    proc[p] = g_new (double, runs);

  /* one untimed round first: the host's page cache holds DIR for every column */
  for (int r = -1; r < runs && status == 0; r++)
    {
      TestClient *c = test_client_connect (server->url);
      double h;

      if (c->ws == NULL || !test_client_handshake (c, NULL))
        {
          fprintf (stderr, "bench-serve-warm: can't connect to %s\n", server->url);
          status = 1;
          test_client_free (c);
          break;
        }
      h = bench_time_exec (cmd, environ, dir, NULL) / 1e3;
      if (h < 0)
        {
          fprintf (stderr, "bench-serve-warm: %s failed on the host\n", cmd[0]);
          status = 1;
        }
      for (int p = 0; p < PROCESSES && status == 0; p++)
        {
          g_autofree char *id = g_strdup_printf ("r%d-p%d", r, p);
          double t;

          if (p > 0 && pause_ms > 0)
            g_usleep ((gulong)pause_ms * 1000);
          t = time_process (c, id, argv_json, qdir);
          if (t < 0)
            status = 1;
          else if (r >= 0)
            proc[p][r] = t;
        }
      if (r >= 0)
        host[r] = h;
      test_client_free (c);
    }
  test_server_stop (server);
  if (system (rm) != 0)
    fprintf (stderr, "bench-serve-warm: could not remove %s\n", tmp);

  if (status == 0)
    {
      g_autofree char *line = g_strjoinv (" ", cmd);
      double h;

      printf ("%d rounds, interleaved: `%s` in %s; policy %s (wall clock; a process from process/start to "
              "process/exited; %d ms between a session's processes)\n",
              runs, line, dir, policy, pause_ms);
      report ("host", host, runs, 0);
      h = host[runs / 2];
      report ("first process/start (fresh)", proc[0], runs, h);
      report ("second process/start (warm)", proc[1], runs, h);
      report ("third process/start (warm)", proc[2], runs, h);
      printf ("  target: the second within x1.30 of the host (median)\n");
    }
  g_free (host);
  for (int p = 0; p < PROCESSES; p++)
    g_free (proc[p]);
  return status;
}
