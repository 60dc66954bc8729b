/* fusebox — the network proxy's parsers (ipc-proxy-parse.c): what a
 * sandboxed client may send as an HTTP proxy request or a SOCKS5
 * handshake, and what each becomes: a host, a port, a head to forward, or a
 * refusal.  Table-driven; every row also fed one byte at a time, as a slow
 * client sends it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ipc/ipc-proxy.h"
#include "tests/lib/test-util.h"

typedef struct
{
  const char *head;
  FbProxyParse want;
  FbProxyKind kind;
  const char *host;
  guint16 port;
  const char *forward; /* FORWARD's head, or NULL */
} HttpRow;

static const HttpRow http_rows[] = {
  { "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n", FB_PROXY_PARSE_DONE, FB_PROXY_HTTP_CONNECT,
    "allowed.test", 443, NULL },
  { "CONNECT Allowed.TEST.:8080 HTTP/1.0\r\n\r\n", FB_PROXY_PARSE_DONE, FB_PROXY_HTTP_CONNECT, "allowed.test", 8080,
    NULL },
  { "CONNECT [::1]:443 HTTP/1.1\r\n\r\n", FB_PROXY_PARSE_DONE, FB_PROXY_HTTP_CONNECT, "::1", 443, NULL },
  { "CONNECT 127.0.0.1:22 HTTP/1.1\r\n\r\n", FB_PROXY_PARSE_DONE, FB_PROXY_HTTP_CONNECT, "127.0.0.1", 22, NULL },
  { "GET http://allowed.test/a?b HTTP/1.1\r\nHost: allowed.test\r\nProxy-Connection: keep-alive\r\n"
    "Accept: */*\r\n\r\n",
    FB_PROXY_PARSE_DONE, FB_PROXY_HTTP_FORWARD, "allowed.test", 80,
    "GET /a?b HTTP/1.1\r\nHost: allowed.test\r\nAccept: */*\r\nConnection: close\r\n\r\n" },
  { "POST http://allowed.test:8080 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", FB_PROXY_PARSE_DONE,
    FB_PROXY_HTTP_FORWARD, "allowed.test", 8080,
    "POST / HTTP/1.0\r\nHost: allowed.test:8080\r\nConnection: close\r\n\r\n" },
  /* incomplete */
  { "CONNECT allowed.test:443 HTTP/1.1\r\nHost: x\r\n", FB_PROXY_PARSE_MORE },
  /* refused */
  { "CONNECT allowed.test HTTP/1.1\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "CONNECT allowed.test:0 HTTP/1.1\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "CONNECT allowed.test:65536 HTTP/1.1\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "CONNECT allowed%2etest:443 HTTP/1.1\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "CONNECT [not-v6]:443 HTTP/1.1\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET /relative HTTP/1.1\r\nHost: allowed.test\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET https://allowed.test/ HTTP/1.1\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://user@allowed.test/ HTTP/1.1\r\n\r\n", FB_PROXY_PARSE_ERROR },
  /* a fragment: what follows it was never decided */
  { "GET http://allowed.test:8080#@127.0.0.1:8081/ HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/page#part HTTP/1.1\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/2.0\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\nno colon\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "\x16\x03\x01\x02\x01garbage\r\n\r\n", FB_PROXY_PARSE_ERROR },
  /* the Host header is what was decided, or the request is refused */
  { "GET http://allowed.test/ HTTP/1.1\r\nHost: Allowed.Test.:80 \r\n\r\n", FB_PROXY_PARSE_DONE, FB_PROXY_HTTP_FORWARD,
    "allowed.test", 80, "GET / HTTP/1.1\r\nHost: Allowed.Test.:80 \r\nConnection: close\r\n\r\n" },
  { "GET http://allowed.test/ HTTP/1.1\r\nHost: forbidden.internal\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nHost: forbidden.internal\r\n\r\n",
    FB_PROXY_PARSE_ERROR },
  /* one request: a body's end known without decoding it */
  { "POST http://allowed.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "POST http://allowed.test/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", FB_PROXY_PARSE_ERROR },
  /* only CRLF ends a line: a host that ends one at a bare LF or CR would
   * read a header the proxy took for part of another's value */
  { "GET http://allowed.test:18080/ HTTP/1.1\r\nX-A: 1\nHost: forbidden.internal\r\nHost: allowed.test:18080\r\n\r\n",
    FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\nX-A: 1\rHost: forbidden.internal\r\nHost: allowed.test\r\n\r\n",
    FB_PROXY_PARSE_ERROR },
  { "POST http://allowed.test/ HTTP/1.1\r\nX-A: 1\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
    FB_PROXY_PARSE_ERROR },
  { "POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 0\r\nX-A: 1\nContent-Length: 40\r\n\r\n",
    FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\nHost: forbidden.internal\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\n\nGET http://forbidden.internal/ HTTP/1.1\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\n\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "\nGET http://allowed.test/ HTTP/1.1\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "CONNECT allowed.test:443 HTTP/1.1\nHost: allowed.test:443\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "CONNECT allowed.test:443 HTTP/1.1\r\nX-A: 1\nHost: x\r\n\r\n", FB_PROXY_PARSE_ERROR },
  /* other controls in a value or a name; folded lines (obs-fold) */
  { "GET http://allowed.test/ HTTP/1.1\r\nX-A: 1\x0bHost: forbidden.internal\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\nX-A: 1\x0cHost: forbidden.internal\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\nX-A: \x1b[1m\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\nX-A: \x7f\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\nX\x01-A: 1\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\nHost : forbidden.internal\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\nX-A: 1\r\n Host: forbidden.internal\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\nX-A: 1\r\n\tTransfer-Encoding: chunked\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "GET http://allowed.test/ HTTP/1.1\r\n Host: allowed.test\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "CONNECT allowed.test:443 HTTP/1.1\r\nX-A: \x1b\r\n\r\n", FB_PROXY_PARSE_ERROR },
  { "CONNECT allowed.test:443 HTTP/1.1\r\nX-A: 1\r\n Host: x\r\n\r\n", FB_PROXY_PARSE_ERROR },
  /* what a value may hold: spaces, tabs, visible characters, obs-text */
  { "GET http://allowed.test/ HTTP/1.1\r\nX-A: a\tb c\xc3\xa9~\r\n\r\n", FB_PROXY_PARSE_DONE, FB_PROXY_HTTP_FORWARD,
    "allowed.test", 80, "GET / HTTP/1.1\r\nX-A: a\tb c\xc3\xa9~\r\nHost: allowed.test\r\nConnection: close\r\n\r\n" },
};

static void
check_http (const HttpRow *row, gsize len)
{
  g_autofree char *buf = g_strndup (row->head, len);
  FbProxyRequest req = { 0 };
  const char *why = NULL;
  FbProxyParse got = fb_proxy_parse_http (buf, len, &req, &why);

  if (len < strlen (row->head))
    {
      /* a prefix of a complete head is never an answer but "more", and a
       * prefix of a refused one is "more" or the same refusal */
      if (row->want == FB_PROXY_PARSE_DONE)
        assert_int_equal (got, FB_PROXY_PARSE_MORE);
      else if (got == FB_PROXY_PARSE_DONE)
        fail_msg ("%s: a prefix of %zu bytes was taken", row->head, len);
      fb_proxy_request_clear (&req);
      return;
    }
  if (got != row->want)
    fail_msg ("%s: %d, want %d (%s)", row->head, got, row->want, why ? why : "");
  if (got == FB_PROXY_PARSE_ERROR)
    assert_non_null (why);
  if (got == FB_PROXY_PARSE_DONE)
    {
      assert_int_equal (req.kind, row->kind);
      assert_string_equal (req.host, row->host);
      assert_int_equal (req.port, row->port);
      assert_int_equal (req.consumed, strlen (row->head));
      if (row->forward)
        assert_string_equal (req.forward->str, row->forward);
      else
        assert_null (req.forward);
    }
  fb_proxy_request_clear (&req);
}

static void
test_http (void **state)
{
  for (gsize i = 0; i < G_N_ELEMENTS (http_rows); i++)
    for (gsize len = 1; len <= strlen (http_rows[i].head); len++)
      check_http (&http_rows[i], len);
}

/* A head past the bound is refused, complete or not. */
static void
test_http_bound (void **state)
{
  g_autoptr (GString) head = g_string_new ("GET http://allowed.test/ HTTP/1.1\r\n");
  FbProxyRequest req = { 0 };
  const char *why = NULL;

  while (head->len < FB_PROXY_HEAD_MAX)
    g_string_append (head, "X-Filler: 0123456789abcdef0123456789abcdef\r\n");
  assert_int_equal (fb_proxy_parse_http (head->str, head->len, &req, &why), FB_PROXY_PARSE_ERROR);
  g_string_append (head, "\r\n");
  assert_int_equal (fb_proxy_parse_http (head->str, head->len, &req, &why), FB_PROXY_PARSE_ERROR);
  fb_proxy_request_clear (&req);
}

/* A NUL in the head is refused; bytes after the head (a tunnel's TLS, a
 * body) are the client's data, whatever they hold. */
static void
test_http_bytes (void **state)
{
  static const char nul_value[] = "GET http://allowed.test/ HTTP/1.1\r\nX-A: 1\0Host: forbidden.internal\r\n\r\n";
  static const char connect_tls[] = "CONNECT allowed.test:443 HTTP/1.1\r\n\r\n\x16\x03\x01\0\n\r\0";
  static const char post_body[] = "POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 4\r\n\r\n\0\n\r\x7f";
  FbProxyRequest req = { 0 };
  const char *why = NULL;

  assert_int_equal (fb_proxy_parse_http (nul_value, sizeof nul_value - 1, &req, &why), FB_PROXY_PARSE_ERROR);
  assert_non_null (why);
  fb_proxy_request_clear (&req);
  assert_int_equal (fb_proxy_parse_http (connect_tls, sizeof connect_tls - 1, &req, &why), FB_PROXY_PARSE_DONE);
  assert_int_equal (req.kind, FB_PROXY_HTTP_CONNECT);
  assert_int_equal (req.consumed, strlen ("CONNECT allowed.test:443 HTTP/1.1\r\n\r\n"));
  fb_proxy_request_clear (&req);
  assert_int_equal (fb_proxy_parse_http (post_body, sizeof post_body - 1, &req, &why), FB_PROXY_PARSE_DONE);
  assert_int_equal (req.body, 4);
  assert_int_equal (req.consumed, sizeof post_body - 1 - 4);
  fb_proxy_request_clear (&req);
}

typedef struct
{
  const char *bytes;
  gsize len;
  FbProxyParse want;
  guint8 reply; /* on ERROR */
  const char *host;
  guint16 port;
} SocksRow;

#define S(s) s, sizeof s - 1
static const SocksRow socks_rows[] = {
  { S ("\x05\x01\x00\x03\x0c"
       "allowed.test\x01\xbb"),
    FB_PROXY_PARSE_DONE, 0, "allowed.test", 443 },
  { S ("\x05\x01\x00\x01\x7f\x00\x00\x01\x1f\x90"), FB_PROXY_PARSE_DONE, 0, "127.0.0.1", 8080 },
  { S ("\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x50"), FB_PROXY_PARSE_DONE,
    0, "::1", 80 },
  { S ("\x05\x01\x00\x03\x04"
       "a/..\x00\x50"),
    FB_PROXY_PARSE_ERROR, FB_SOCKS_GENERAL_FAILURE },
  { S ("\x05\x01\x00\x03\x03"
       "a\x00"
       "b\x00\x50"),
    FB_PROXY_PARSE_ERROR, FB_SOCKS_GENERAL_FAILURE },
  { S ("\x05\x02\x00\x01\x7f\x00\x00\x01\x1f\x90"), FB_PROXY_PARSE_ERROR, FB_SOCKS_COMMAND_NOT_SUPPORTED },
  { S ("\x05\x03\x00\x01\x7f\x00\x00\x01\x1f\x90"), FB_PROXY_PARSE_ERROR, FB_SOCKS_COMMAND_NOT_SUPPORTED },
  { S ("\x05\x01\x00\x09\x7f\x00\x00\x01\x1f\x90"), FB_PROXY_PARSE_ERROR, FB_SOCKS_ADDRESS_TYPE_NOT_SUPPORTED },
  { S ("\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x00"), FB_PROXY_PARSE_ERROR, FB_SOCKS_GENERAL_FAILURE },
  { S ("\x04\x01\x00\x01\x7f\x00\x00\x01\x1f\x90"), FB_PROXY_PARSE_ERROR, FB_SOCKS_GENERAL_FAILURE },
};

static void
test_socks_request (void **state)
{
  for (gsize i = 0; i < G_N_ELEMENTS (socks_rows); i++)
    {
      const SocksRow *row = &socks_rows[i];

      for (gsize len = 0; len <= row->len; len++)
        {
          FbProxyRequest req = { 0 };
          guint8 reply = 0xff;
          FbProxyParse got = fb_proxy_parse_socks_request ((const guint8 *)row->bytes, len, &req, &reply);

          if (len < row->len && row->want == FB_PROXY_PARSE_DONE)
            assert_int_equal (got, FB_PROXY_PARSE_MORE);
          else if (len == row->len)
            {
              if (got != row->want)
                fail_msg ("row %zu: %d, want %d", i, got, row->want);
              if (got == FB_PROXY_PARSE_ERROR)
                assert_int_equal (reply, row->reply);
              else
                {
                  assert_int_equal (req.kind, FB_PROXY_SOCKS);
                  assert_string_equal (req.host, row->host);
                  assert_int_equal (req.port, row->port);
                  assert_int_equal (req.consumed, row->len);
                }
            }
          fb_proxy_request_clear (&req);
        }
    }
}

static void
test_socks_greeting (void **state)
{
  gsize used = 0;
  bool no_auth = false;

  assert_int_equal (fb_proxy_parse_socks_greeting ((const guint8 *)"\x05", 1, &used, &no_auth), FB_PROXY_PARSE_MORE);
  assert_int_equal (fb_proxy_parse_socks_greeting ((const guint8 *)"\x05\x02\x02", 3, &used, &no_auth),
                    FB_PROXY_PARSE_MORE);
  assert_int_equal (fb_proxy_parse_socks_greeting ((const guint8 *)"\x05\x02\x02\x00", 4, &used, &no_auth),
                    FB_PROXY_PARSE_DONE);
  assert_true (no_auth);
  assert_int_equal (used, 4);
  /* only username/password offered: done, without "no authentication" */
  assert_int_equal (fb_proxy_parse_socks_greeting ((const guint8 *)"\x05\x01\x02", 3, &used, &no_auth),
                    FB_PROXY_PARSE_DONE);
  assert_false (no_auth);
  assert_int_equal (fb_proxy_parse_socks_greeting ((const guint8 *)"\x05\x00", 2, &used, &no_auth),
                    FB_PROXY_PARSE_ERROR);
  assert_int_equal (fb_proxy_parse_socks_greeting ((const guint8 *)"\x04\x01\x00", 3, &used, &no_auth),
                    FB_PROXY_PARSE_ERROR);
}

/* The variables the clients read, in both cases. */
static void
test_environ (void **state)
{
  g_auto (GStrv) env = fb_proxy_environ (g_new0 (char *, 1));

  assert_string_equal (g_environ_getenv (env, "HTTP_PROXY"), "http://127.0.0.1:3128");
  assert_string_equal (g_environ_getenv (env, "https_proxy"), "http://127.0.0.1:3128");
  assert_string_equal (g_environ_getenv (env, "ALL_PROXY"), "socks5h://127.0.0.1:3128");
  assert_string_equal (g_environ_getenv (env, "no_proxy"), "localhost,127.0.0.1,::1");
  assert_int_equal (g_strv_length (env), 8);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_http), cmocka_unit_test (test_http_bound),
                  cmocka_unit_test (test_http_bytes), cmocka_unit_test (test_socks_request),
                  cmocka_unit_test (test_socks_greeting), cmocka_unit_test (test_environ))
