/* bench-rpc — fs/writeFile + fs/readFile of 4 KiB through `fusebox serve`,
 * over one WebSocket connection, each call carrying a Codex sandbox
 * context (workspace-write), as an agent harness sends them.
 *
 *   bench-rpc [--calls N] [--window W] [--no-sandbox] [--policy SPEC]
 *
 * Starts the real server ($FUSEBOX_BIN, else the fusebox built beside this
 * benchmark), keeps W requests in flight (a harness pipelines; the protocol
 * answers by id), alternates a write and a read of one of 16 files in the
 * workspace, and checks every answer is a result.  Prints calls per second
 * (docs/performance.md records the figure).  The client parses nothing but
 * the answer's kind, so that the number is the server's. */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdlib.h>

#include "tests/integration/test-serve-util.h"

typedef struct
{
  guint64 answered;
  guint64 errors;
  char *first_error;
} Counts;

static void
on_bench_message (SoupWebsocketConnection *ws, int type, GBytes *message, gpointer user_data)
{
  Counts *c = user_data;
  gsize len;
  const char *d = g_bytes_get_data (message, &len);

  /* Answers start {"id":N,"result" or {"id":N,"error": no parse needed. */
  if (len > 8 && memmem (d, MIN (len, (gsize)40), "\"error\"", 7) != NULL)
    {
      c->errors++;
      if (c->first_error == NULL)
        c->first_error = g_strndup (d, MIN (len, (gsize)400));
    }
  c->answered++;
}

/* CPU seconds (user + system) the process PID has used so far. */
static double
cpu_seconds (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", (int)pid);
  g_autofree char *text = NULL;
  unsigned long ut = 0, st = 0;
  const char *p;

  if (!g_file_get_contents (path, &text, NULL, NULL) || (p = strrchr (text, ')')) == NULL)
    return 0;
  /* after "pid (comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
  if (sscanf (p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
    return 0;
  return (double)(ut + st) / (double)sysconf (_SC_CLK_TCK);
}

int
main (int argc, char **argv)
{
  gint64 calls = 200000;
  gint window = 32;
  gboolean no_sandbox = FALSE;
  g_autofree char *policy = NULL;
  const GOptionEntry entries[] = {
    { "calls", 0, 0, G_OPTION_ARG_INT64, &calls, "Calls to make (default 200000)", "N" },
    { "window", 0, 0, G_OPTION_ARG_INT, &window, "Requests in flight (default 32)", "W" },
    { "no-sandbox", 0, 0, G_OPTION_ARG_NONE, &no_sandbox, "Send the calls without a sandbox context", NULL },
    { "policy", 0, 0, G_OPTION_ARG_STRING, &policy, "The server's policy (default builtin:default)", "SPEC" },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new (NULL);
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("fusebox-bench-rpc-XXXXXX", NULL);
  g_autofree char *ws = g_build_filename (dir, "ws", NULL);
  g_autofree char *sandbox = NULL;
  g_autofree char *payload = NULL;
  g_autofree char *rm = g_strdup_printf ("rm -rf '%s'", dir);
  const char *args[8];
  guchar raw[4096];
  TestServer *server;
  TestClient *client;
  Counts counts = { 0 };
  gint64 sent = 0, t0, t1;
  double cpu0, cpu1;
  int status = 0;

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      g_printerr ("bench-rpc: %s\n", error->message);
      return 2;
    }
  if (g_getenv ("FUSEBOX_BIN") == NULL)
    {
      /* The fusebox of this build tree: bench/ is beside launcher/. */
      g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
      g_autofree char *bdir = g_path_get_dirname (self);
      g_autofree char *bin = g_build_filename (bdir, "..", "launcher", "fusebox", NULL);
      g_setenv ("FUSEBOX_BIN", bin, TRUE);
    }
  g_mkdir (ws, 0755);
  args[0] = "--workspace";
  args[1] = ws;
  args[2] = "--policy";
  args[3] = policy != NULL ? policy : "builtin:default";
  args[4] = "--log-level";
  args[5] = "opens";
  args[6] = NULL;
  server = test_server_start (dir, args);
  if (!g_str_has_prefix (server->url, "ws://"))
    {
      g_printerr ("bench-rpc: the server did not start: %s\n", server->command);
      return 1;
    }
  client = test_client_connect (server->url);
  if (client->ws == NULL || !test_client_handshake (client, NULL))
    {
      g_printerr ("bench-rpc: can't connect to %s\n", server->url);
      return 1;
    }
  /* From here on, answers are only counted. */
  g_signal_handlers_disconnect_by_data (client->ws, client);
  g_signal_connect (client->ws, "message", G_CALLBACK (on_bench_message), &counts);

  for (gsize i = 0; i < sizeof raw; i++)
    raw[i] = (guchar)g_random_int ();
  payload = g_base64_encode (raw, sizeof raw);
  sandbox =
    no_sandbox
      ? g_strdup ("")
      : g_strdup_printf (",\"sandbox\":{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":\"restricted\","
                         "\"entries\":[{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"root\"}},\"access\":"
                         "\"read\"},{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"project_roots\"}},"
                         "\"access\":\"write\"}]},\"network\":\"restricted\"},\"cwd\":\"file://%s\","
                         "\"workspaceRoots\":[\"file://%s\"],\"windowsSandboxLevel\":\"disabled\"}",
                         ws, ws);

  cpu0 = cpu_seconds (server->pid);
  t0 = g_get_monotonic_time ();
  while ((gint64)counts.answered < calls)
    {
      while (sent < calls && sent - (gint64)counts.answered < window)
        {
          g_autofree char *req = NULL;
          gint64 id = 100 + sent;
          int k = (int)((sent / 2) % 16);
          if (sent % 2 == 0)
            req = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"method\":\"fs/writeFile\",\"params\":{\"path\":"
                                   "\"file://%s/bench-%d.txt\",\"dataBase64\":\"%s\"%s}}",
                                   id, ws, k, payload, sandbox);
          else
            req = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"method\":\"fs/readFile\",\"params\":{\"path\":"
                                   "\"file://%s/bench-%d.txt\"%s}}",
                                   id, ws, k, sandbox);
          soup_websocket_connection_send_text (client->ws, req);
          sent++;
        }
      g_main_context_iteration (NULL, TRUE);
      if (client->closed)
        break;
    }
  t1 = g_get_monotonic_time ();
  cpu1 = cpu_seconds (server->pid);

  if (counts.errors > 0 || (gint64)counts.answered < calls)
    {
      g_printerr ("bench-rpc: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " answers were errors; first: %s\n",
                  counts.errors, counts.answered, counts.first_error != NULL ? counts.first_error : "(closed)");
      status = 1;
    }
  printf ("%" G_GUINT64_FORMAT " calls (fs/writeFile + fs/readFile, 4 KiB, %s) in %.3f s over one connection, "
          "window %d: %.0f calls/s\n",
          counts.answered, no_sandbox ? "no sandbox" : "Codex sandbox context", (t1 - t0) / 1e6, window,
          counts.answered / ((t1 - t0) / 1e6));
  /* The server's own CPU time per call: what the figure would be with a
   * core to itself, whatever else the machine runs. */
  if (cpu1 > cpu0)
    printf ("server CPU: %.3f s, %.1f us per call: %.0f calls per CPU-second\n", cpu1 - cpu0,
            (cpu1 - cpu0) * 1e6 / counts.answered, counts.answered / (cpu1 - cpu0));
  test_client_free (client);
  test_server_stop (server);
  if (system (rm) != 0)
    g_printerr ("bench-rpc: could not remove %s\n", dir);
  g_free (counts.first_error);
  return status;
}
