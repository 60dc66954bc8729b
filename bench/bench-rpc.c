/* bench-rpc — fs/writeFile + fs/readFile of 4 KiB through `fusebox serve`,
 * over one WebSocket connection, each call carrying a Codex sandbox
 * context (workspace-write), as an agent harness sends them.
 *
 *   bench-rpc [--calls N] [--window W] [--no-sandbox] [--policy SPEC] [--libsoup]
 *
 * Starts the real server ($FUSEBOX_BIN, else the fusebox built beside this
 * benchmark), keeps W requests in flight (a harness pipelines; the protocol
 * answers by id), alternates a write and a read of one of 16 files in the
 * workspace, and checks every answer: it must be the result for the next id
 * in order, `{}` for a write and, for a read, the bytes written.  Prints
 * calls per second, and the CPU time per call of the server and of this
 * client (docs/performance.md records the figures).
 *
 * The client.  By default a small WebSocket client of its own over a plain
 * socket (RFC 6455: masked frames with a random key per frame, as clients
 * must send them; the server's frames parsed in place), which writes the
 * requests of a window in one send and reads answers in large chunks: the
 * client shares the machine's CPUs with the server, and libsoup's client
 * (one send per frame, 1 KiB reads, a GBytes and a signal emission per
 * message) costs 20-60 us of CPU per call against 5-9 us.  --libsoup runs the
 * same traffic through libsoup's client instead.  The server is the same
 * either way: libsoup's WebSocket server on the GLib main loop. */
#include <glib.h>
#include <glib/gstdio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "bench-exec.h"
#include "tests/lib/test-serve.h"

typedef struct
{
  guint64 answered;
  guint64 errors;
  char *first_error;
} Counts;

static void
count_error (Counts *c, const char *d, gsize len)
{
  c->errors++;
  if (c->first_error == NULL)
    c->first_error = g_strndup (d, MIN (len, (gsize)400));
}

/* --- the libsoup client ------------------------------------------------------- */

static void
on_bench_message (SoupWebsocketConnection *ws, int type, GBytes *message, gpointer user_data)
{
  Counts *c = user_data;
  gsize len;
  const char *d = g_bytes_get_data (message, &len);

  /* Answers start {"id":N,"result" or {"id":N,"error": no parse needed. */
  if (len > 8 && memmem (d, MIN (len, (gsize)40), "\"error\"", 7) != NULL)
    count_error (c, d, len);
  c->answered++;
}

/* --- the plain-socket client -------------------------------------------------- */

typedef struct
{
  int fd;
  GByteArray *in;  /* received, not yet parsed */
  GByteArray *out; /* framed, not yet sent */
  gsize out_sent;
} Raw;

/* Append one masked text frame carrying TEXT (RFC 6455 5.2, 5.3). */
static void
raw_frame (Raw *r, guint8 opcode, const char *text, gsize len)
{
  guint8 head[14];
  gsize h = 0, at;
  guint32 key = g_random_int ();
  guint8 *k = (guint8 *)&key;
  guint64 key64;

  head[h++] = 0x80 | opcode;
  if (len < 126)
    head[h++] = 0x80 | (guint8)len;
  else if (len <= 0xffff)
    {
      head[h++] = 0x80 | 126;
      head[h++] = (guint8)(len >> 8);
      head[h++] = (guint8)len;
    }
  else
    {
      head[h++] = 0x80 | 127;
      for (int i = 7; i >= 0; i--)
        head[h++] = (guint8)(len >> (8 * i));
    }
  memcpy (head + h, k, 4);
  h += 4;
  g_byte_array_append (r->out, head, (guint)h);
  at = r->out->len;
  g_byte_array_append (r->out, (const guint8 *)text, (guint)len);
  /* Eight bytes at a time: the key repeats every four. */
  memcpy (&key64, k, 4);
  memcpy ((guint8 *)&key64 + 4, k, 4);
  {
    guint8 *p = r->out->data + at;
    gsize i = 0;
    for (; i + 8 <= len; i += 8)
      {
        guint64 w;
        memcpy (&w, p + i, 8);
        w ^= key64;
        memcpy (p + i, &w, 8);
      }
    for (; i < len; i++)
      p[i] ^= k[i % 4];
  }
}

/* Send what is queued; false on a broken connection. */
static bool
raw_flush (Raw *r)
{
  while (r->out_sent < r->out->len)
    {
      ssize_t n = send (r->fd, r->out->data + r->out_sent, r->out->len - r->out_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0)
        return errno == EAGAIN || errno == EINTR;
      r->out_sent += (gsize)n;
    }
  g_byte_array_set_size (r->out, 0);
  r->out_sent = 0;
  return true;
}

/* Wait for input (and for room to send while output is queued), then read
 * what there is.  False on EOF, an error or TEST_WAIT_LIMIT_S without progress. */
static bool
raw_pump (Raw *r)
{
  struct pollfd pfd = { r->fd, POLLIN | (r->out_sent < r->out->len ? POLLOUT : 0), 0 };

  if (poll (&pfd, 1, TEST_WAIT_LIMIT_S * 1000) <= 0)
    return false;
  if ((pfd.revents & POLLOUT) && !raw_flush (r))
    return false;
  if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
    {
      gsize old = r->in->len;
      ssize_t n;
      g_byte_array_set_size (r->in, (guint)(old + 256 * 1024));
      n = recv (r->fd, r->in->data + old, 256 * 1024, MSG_DONTWAIT);
      g_byte_array_set_size (r->in, (guint)(old + (n > 0 ? (gsize)n : 0)));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return false;
    }
  return true;
}

/* The next complete frame from the server: its payload, in place; a ping
 * is answered, a close or a fragment is an error.  0: need more input,
 * -1: protocol error, else the bytes the frame takes in r->in. */
static gssize
raw_next (Raw *r, const char **ret_data, gsize *ret_len)
{
  const guint8 *p = r->in->data;
  gsize n = r->in->len, at = 2;
  guint64 len;

  if (n < 2)
    return 0;
  if ((p[0] & 0x80) == 0 || (p[1] & 0x80) != 0 || (p[0] & 0x0f) == 0x8)
    return -1; /* a fragment, a masked frame from a server, or a close */
  len = p[1] & 0x7f;
  if (len == 126)
    {
      if (n < 4)
        return 0;
      len = (guint64)p[2] << 8 | p[3];
      at = 4;
    }
  else if (len == 127)
    {
      if (n < 10)
        return 0;
      len = 0;
      for (int i = 0; i < 8; i++)
        len = len << 8 | p[2 + i];
      at = 10;
    }
  if (n < at + len)
    return 0;
  if ((p[0] & 0x0f) == 0x9)
    raw_frame (r, 0xA, (const char *)p + at, (gsize)len);
  *ret_data = (const char *)p + at;
  *ret_len = (gsize)len;
  return (gssize)(at + len);
}

static void
raw_consume (Raw *r, gsize n)
{
  g_byte_array_remove_range (r->in, 0, (guint)n);
}

/* TCP connect to URL (ws://127.0.0.1:PORT/?token=TOKEN, as serve prints
 * it) and the HTTP upgrade, for the URL's path and query. */
static bool
raw_connect (Raw *r, const char *url)
{
  struct sockaddr_in sa = { .sin_family = AF_INET };
  const char *colon = strrchr (url, ':');
  const char *path = strchr (url + strlen ("ws://"), '/');
  guint8 nonce[16];
  g_autofree char *key = NULL;
  g_autofree char *req = NULL;
  g_autofree char *expect = NULL;
  g_autofree char *concat = NULL;
  guint8 digest[20];
  gsize dlen = sizeof digest;
  const guint8 *end = NULL;
  int one = 1;

  if (colon == NULL)
    return false;
  sa.sin_port = htons ((guint16)atoi (colon + 1));
  sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  r->fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (r->fd < 0 || connect (r->fd, (struct sockaddr *)&sa, sizeof sa) < 0)
    return false;
  setsockopt (r->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  for (guint i = 0; i < sizeof nonce; i++)
    nonce[i] = (guint8)g_random_int ();
  key = g_base64_encode (nonce, sizeof nonce);
  req = g_strdup_printf ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
                         path != NULL ? path : "/", atoi (colon + 1), key);
  r->in = g_byte_array_new ();
  r->out = g_byte_array_new ();
  g_byte_array_append (r->out, (const guint8 *)req, (guint)strlen (req));
  if (!raw_flush (r))
    return false;
  while (end == NULL)
    {
      if (!raw_pump (r))
        return false;
      end = memmem (r->in->data, r->in->len, "\r\n\r\n", 4);
    }
  /* 101, and the accept value RFC 6455 4.2.2 derives from our key. */
  concat = g_strconcat (key, "258EAFA5-E914-47DA-95CA-C5AB0DC85B11", NULL);
  {
    g_autoptr (GChecksum) sha = g_checksum_new (G_CHECKSUM_SHA1);
    g_checksum_update (sha, (const guchar *)concat, -1);
    g_checksum_get_digest (sha, digest, &dlen);
  }
  expect = g_base64_encode (digest, dlen);
  {
    g_autofree char *head = g_strndup ((const char *)r->in->data, (gsize)(end - r->in->data));
    if (!g_str_has_prefix (head, "HTTP/1.1 101") || strstr (head, expect) == NULL)
      {
        g_printerr ("bench-rpc: the upgrade failed:\n%s\n", head);
        return false;
      }
  }
  raw_consume (r, (gsize)(end + 4 - r->in->data));
  return true;
}

/* One request and its answer, outside the measured loop. */
static bool
raw_call (Raw *r, const char *text, const char *expect_prefix)
{
  const char *d;
  gsize len;
  gssize n;

  raw_frame (r, 0x1, text, strlen (text));
  if (!raw_flush (r))
    return false;
  while ((n = raw_next (r, &d, &len)) == 0)
    if (!raw_pump (r))
      return false;
  if (n < 0 || len < strlen (expect_prefix) || memcmp (d, expect_prefix, strlen (expect_prefix)) != 0)
    return false;
  raw_consume (r, (gsize)n);
  return true;
}

/* --- the benchmark ------------------------------------------------------------ */

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

static double
self_cpu_seconds (void)
{
  struct rusage ru;

  getrusage (RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

typedef struct
{
  const char *ws;
  const char *payload;
  const char *sandbox;
  GString *req;
} Requests;

/* Request number SENT: a write of file k, then a read of it. */
static const char *
make_request (Requests *q, gint64 sent)
{
  gint64 id = 100 + sent;
  int k = (int)((sent / 2) % 16);

  g_string_truncate (q->req, 0);
  if (sent % 2 == 0)
    g_string_printf (q->req,
                     "{\"id\":%" G_GINT64_FORMAT ",\"method\":\"fs/writeFile\",\"params\":{\"path\":"
                     "\"file://%s/bench-%d.txt\",\"dataBase64\":\"%s\"%s}}",
                     id, q->ws, k, q->payload, q->sandbox);
  else
    g_string_printf (q->req,
                     "{\"id\":%" G_GINT64_FORMAT ",\"method\":\"fs/readFile\",\"params\":{\"path\":"
                     "\"file://%s/bench-%d.txt\"%s}}",
                     id, q->ws, k, q->sandbox);
  return q->req->str;
}

/* Is D the answer to request number N: the next id, a result, and for a
 * read the payload? */
static bool
answer_ok (const char *d, gsize len, gint64 n, const char *payload, gsize payload_len)
{
  char head[64];
  int h;

  if (n % 2 == 0)
    {
      h = g_snprintf (head, sizeof head, "{\"id\":%" G_GINT64_FORMAT ",\"result\":{}}", 100 + n);
      return len == (gsize)h && memcmp (d, head, len) == 0;
    }
  h = g_snprintf (head, sizeof head, "{\"id\":%" G_GINT64_FORMAT ",\"result\":{\"dataBase64\":\"", 100 + n);
  return len == (gsize)h + payload_len + 3 && memcmp (d, head, (gsize)h) == 0 &&
         memcmp (d + h, payload, payload_len) == 0 && memcmp (d + h + payload_len, "\"}}", 3) == 0;
}

static bool
run_raw (const char *url, Requests *q, gint64 calls, gint window, Counts *counts, gint64 *ret_t0, double *ret_cpu0,
         GPid server_pid)
{
  Raw r = { -1 };
  gint64 sent = 0;
  gsize payload_len = strlen (q->payload);
  bool ok = true;

  if (!raw_connect (&r, url) ||
      !raw_call (&r, "{\"id\":1,\"method\":\"initialize\",\"params\":{\"clientName\":\"bench-rpc\"}}",
                 "{\"id\":1,\"result\""))
    {
      g_printerr ("bench-rpc: can't connect to %s\n", url);
      return false;
    }
  raw_frame (&r, 0x1, "{\"method\":\"initialized\",\"params\":{}}", 36);
  *ret_cpu0 = cpu_seconds (server_pid);
  *ret_t0 = g_get_monotonic_time ();
  while ((gint64)counts->answered < calls && ok)
    {
      const char *d;
      gsize len;
      gssize n;

      while (sent < calls && sent - (gint64)counts->answered < window)
        {
          const char *text = make_request (q, sent);
          raw_frame (&r, 0x1, text, q->req->len);
          sent++;
        }
      if (!raw_flush (&r) || !raw_pump (&r))
        {
          ok = false;
          break;
        }
      while ((n = raw_next (&r, &d, &len)) != 0)
        {
          if (n < 0)
            {
              count_error (counts, (const char *)r.in->data, r.in->len);
              ok = false;
              break;
            }
          if (!(r.in->data[0] == 0x81 || r.in->data[0] == 0x82))
            {
              raw_consume (&r, (gsize)n); /* a ping: answered by raw_next */
              continue;
            }
          if (!answer_ok (d, len, (gint64)counts->answered, q->payload, payload_len))
            count_error (counts, d, len);
          counts->answered++;
          raw_consume (&r, (gsize)n);
        }
    }
  close (r.fd);
  g_byte_array_unref (r.in);
  g_byte_array_unref (r.out);
  return ok;
}

static bool
run_libsoup (const char *url, Requests *q, gint64 calls, gint window, Counts *counts, gint64 *ret_t0, double *ret_cpu0,
             GPid server_pid)
{
  TestClient *client = test_client_connect (url);
  gint64 sent = 0;

  if (client->ws == NULL || !test_client_handshake (client, NULL))
    {
      g_printerr ("bench-rpc: can't connect to %s\n", url);
      return false;
    }
  /* From here on, answers are only counted. */
  g_signal_handlers_disconnect_by_data (client->ws, client);
  g_signal_connect (client->ws, "message", G_CALLBACK (on_bench_message), counts);
  *ret_cpu0 = cpu_seconds (server_pid);
  *ret_t0 = g_get_monotonic_time ();
  while ((gint64)counts->answered < calls)
    {
      while (sent < calls && sent - (gint64)counts->answered < window)
        {
          soup_websocket_connection_send_text (client->ws, make_request (q, sent));
          sent++;
        }
      g_main_context_iteration (NULL, TRUE);
      if (client->closed)
        break;
    }
  test_client_free (client);
  return true;
}

int
main (int argc, char **argv)
{
  gint64 calls = 200000;
  gint window = 32;
  gboolean no_sandbox = FALSE, libsoup = FALSE;
  g_autofree char *policy = NULL;
  const GOptionEntry entries[] = {
    { "calls", 0, 0, G_OPTION_ARG_INT64, &calls, "Calls to make (default 200000)", "N" },
    { "window", 0, 0, G_OPTION_ARG_INT, &window, "Requests in flight (default 32)", "W" },
    { "no-sandbox", 0, 0, G_OPTION_ARG_NONE, &no_sandbox, "Send the calls without a sandbox context", NULL },
    { "policy", 0, 0, G_OPTION_ARG_STRING, &policy, "The server's policy (default builtin:default)", "SPEC" },
    { "libsoup", 0, 0, G_OPTION_ARG_NONE, &libsoup, "Use libsoup's WebSocket client (answers only counted)", NULL },
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
  Counts counts = { 0 };
  Requests q;
  gint64 t0 = 0, t1;
  double cpu0 = 0, cpu1, self0, self1;
  int status = 0;
  bool ok;

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      g_printerr ("bench-rpc: %s\n", error->message);
      return 2;
    }
  bench_default_fusebox_bin ();
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
  q.ws = ws;
  q.payload = payload;
  q.sandbox = sandbox;
  q.req = g_string_sized_new (8192);

  self0 = self_cpu_seconds ();
  ok = libsoup ? run_libsoup (server->url, &q, calls, window, &counts, &t0, &cpu0, server->pid)
               : run_raw (server->url, &q, calls, window, &counts, &t0, &cpu0, server->pid);
  t1 = g_get_monotonic_time ();
  cpu1 = cpu_seconds (server->pid);
  self1 = self_cpu_seconds ();

  if (!ok || counts.errors > 0 || (gint64)counts.answered < calls)
    {
      g_printerr ("bench-rpc: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " answers were wrong; first: %s\n",
                  counts.errors, counts.answered, counts.first_error != NULL ? counts.first_error : "(closed)");
      status = 1;
    }
  if (counts.answered > 0 && t1 > t0)
    {
      printf ("%" G_GUINT64_FORMAT " calls (fs/writeFile + fs/readFile, 4 KiB, %s) in %.3f s over one connection, "
              "window %d, %s client: %.0f calls/s\n",
              counts.answered, no_sandbox ? "no sandbox" : "Codex sandbox context", (t1 - t0) / 1e6, window,
              libsoup ? "libsoup" : "plain-socket", counts.answered / ((t1 - t0) / 1e6));
      /* The server's own CPU time per call: what the figure would be with a
       * core to itself, whatever else the machine runs. */
      if (cpu1 > cpu0)
        printf ("server CPU: %.3f s, %.1f us per call: %.0f calls per CPU-second; client CPU: %.1f us per call\n",
                cpu1 - cpu0, (cpu1 - cpu0) * 1e6 / counts.answered, counts.answered / (cpu1 - cpu0),
                (self1 - self0) * 1e6 / counts.answered);
    }
  test_server_stop (server);
  if (system (rm) != 0)
    g_printerr ("bench-rpc: could not remove %s\n", dir);
  g_free (counts.first_error);
  g_string_free (q.req, TRUE);
  return status;
}
