/* fusebox — libFuzzer target for the network proxy's parsers
 * (ipc/ipc-proxy-parse.c): what a sandboxed client sends as an HTTP proxy
 * request or a SOCKS5 handshake.
 *
 * Input: bytes, fed as the proxy feeds them: the whole input and every
 * prefix of it.  A parse that is done names a host the policy could decide
 * (a lower-case name of letters, digits, '-', '_' and '.', or an address),
 * a port from 1 to 65535, and took no more than it was given; a forwarded
 * head ends its header block once, says "Connection: close", and holds no
 * control character but CRLF line ends and tabs.
 *
 *   build-fuzz/tests/fuzz/fuzz-ipc-proxy -max_total_time=600 CORPUS
 */
#include "ipc/ipc-proxy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
check_request (const FbProxyRequest *req, size_t len)
{
  if (req->host == NULL || req->host[0] == '\0' || req->port == 0 || req->consumed == 0 || req->consumed > len)
    abort ();
  if (!req->host_is_address)
    for (const char *p = req->host; *p != '\0'; p++)
      if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
        abort ();
  if (req->forward != NULL)
    {
      const char *end = strstr (req->forward->str, "\r\n\r\n");

      if (end == NULL || end[4] != '\0' || strstr (req->forward->str, "Connection: close\r\n\r\n") == NULL)
        abort ();
      /* only CRLF ends a line, and no other control character but a tab
       * reaches the host, which may read lines otherwise */
      for (const char *p = req->forward->str; *p != '\0'; p++)
        if ((*p == '\n' && (p == req->forward->str || p[-1] != '\r')) || (*p == '\r' && p[1] != '\n') ||
            ((unsigned char)*p < ' ' && *p != '\t' && *p != '\r' && *p != '\n') || *p == 0x7f)
          abort ();
    }
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *buf;

  if (size > FB_PROXY_HEAD_MAX + 64)
    return 0;
  buf = malloc (size + 1);
  memcpy (buf, data, size);
  for (size_t len = 0; len <= size; len++)
    {
      FbProxyRequest req = { 0 };
      const char *why = NULL;
      gsize used = 0;
      bool no_auth = false;
      guint8 reply = 0;
      char saved = buf[len];

      buf[len] = '\0';
      if (fb_proxy_parse_http (buf, len, &req, &why) == FB_PROXY_PARSE_DONE)
        check_request (&req, len);
      else if (why == NULL && len >= FB_PROXY_HEAD_MAX)
        abort (); /* past the bound: never "more" */
      fb_proxy_request_clear (&req);
      buf[len] = saved;

      if (fb_proxy_parse_socks_greeting (data, len, &used, &no_auth) == FB_PROXY_PARSE_DONE && used > len)
        abort ();
      if (fb_proxy_parse_socks_request (data, len, &req, &reply) == FB_PROXY_PARSE_DONE)
        check_request (&req, len);
      fb_proxy_request_clear (&req);
    }
  free (buf);
  return 0;
}
