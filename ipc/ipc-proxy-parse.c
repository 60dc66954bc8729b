/* fusebox — the network proxy's parsers: an HTTP proxy request's head and
 * SOCKS5's greeting and request (RFC 1928), from the bytes a sandboxed
 * client sent so far.
 *
 * Pure functions over a bounded buffer (ipc-proxy.c holds at most
 * FB_PROXY_HEAD_MAX bytes of a client's handshake): no I/O, no state, so
 * that the unit tests and a fuzzer drive them alone.  Everything here came
 * from inside the sandbox: each field is checked and a mistake is an
 * answer (400, a SOCKS reply code), never an assertion.  Hand-written
 * because `fusebox run` does not link libsoup (docs/performance.md,
 * Startup), and the part of HTTP a proxy must read is a request line and
 * header lines.
 */
#include "ipc/ipc-proxy.h"

#include <gio/gio.h>
#include <netinet/in.h>
#include <string.h>

/* A name as the proxy decides and resolves it: letters, digits, '-', '_'
 * and '.', at most 253 bytes, lower-cased, one trailing dot dropped; or an
 * IP address.  Anything else (a percent sign, a space, a NUL, a name made
 * to look like a path) is refused before the policy sees it. */
static bool
take_host (const char *s, gsize len, FbProxyRequest *req)
{
  if (len >= 2 && s[0] == '[' && s[len - 1] == ']')
    {
      /* an IPv6 literal, as URIs write it */
      char buf[INET6_ADDRSTRLEN + 1];
      g_autoptr (GInetAddress) a = NULL;

      if (len - 2 >= sizeof buf)
        return false;
      memcpy (buf, s + 1, len - 2);
      buf[len - 2] = '\0';
      a = g_inet_address_new_from_string (buf);
      if (a == NULL || g_inet_address_get_family (a) != G_SOCKET_FAMILY_IPV6)
        return false;
      g_free (req->host);
      req->host = g_inet_address_to_string (a);
      req->host_is_address = true;
      return true;
    }
  if (len > 0 && s[len - 1] == '.')
    len--;
  if (len == 0 || len > FB_PROXY_NAME_MAX)
    return false;
  for (gsize i = 0; i < len; i++)
    if (!g_ascii_isalnum (s[i]) && s[i] != '-' && s[i] != '.' && s[i] != '_')
      return false;
  g_free (req->host);
  req->host = g_ascii_strdown (s, (gssize)len);
  {
    g_autoptr (GInetAddress) a = g_inet_address_new_from_string (req->host);

    req->host_is_address = a != NULL;
  }
  return true;
}

static bool
take_port (const char *s, gsize len, guint16 *ret_port)
{
  guint v = 0;

  if (len == 0 || len > 5)
    return false;
  for (gsize i = 0; i < len; i++)
    {
      if (!g_ascii_isdigit (s[i]))
        return false;
      v = v * 10 + (guint)(s[i] - '0');
    }
  if (v == 0 || v > 65535)
    return false;
  *ret_port = (guint16)v;
  return true;
}

/* "host:port", "[v6]:port", or without the port when DEFAULT_PORT is not 0. */
static bool
take_authority (const char *s, gsize len, guint16 default_port, FbProxyRequest *req)
{
  const char *colon = NULL;

  if (len > 0 && s[0] == '[')
    {
      const char *close = memchr (s, ']', len);

      if (close == NULL)
        return false;
      if ((gsize)(close - s) + 1 < len)
        {
          if (close[1] != ':')
            return false;
          colon = close + 1;
        }
    }
  else
    colon = memrchr (s, ':', len);
  if (colon == NULL)
    {
      if (default_port == 0)
        return false;
      req->port = default_port;
      return take_host (s, len, req);
    }
  return take_port (colon + 1, len - (gsize)(colon + 1 - s), &req->port) && take_host (s, (gsize)(colon - s), req);
}

void
fb_proxy_request_clear (FbProxyRequest *req)
{
  g_clear_pointer (&req->host, g_free);
  if (req->forward != NULL)
    g_string_free (g_steal_pointer (&req->forward), TRUE);
  memset (req, 0, sizeof *req);
}

static bool
is_token_char (char c)
{
  return g_ascii_isalnum (c) || strchr ("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Hop-by-hop headers, and the ones meant for the proxy: not forwarded. */
static bool
header_is_dropped (const char *name, gsize len)
{
  static const char *const dropped[] = {
    "connection", "proxy-connection", "keep-alive", "proxy-authorization", "proxy-authenticate",
    "te",         "trailer",          "upgrade"
  };

  for (gsize i = 0; i < G_N_ELEMENTS (dropped); i++)
    if (strlen (dropped[i]) == len && g_ascii_strncasecmp (name, dropped[i], len) == 0)
      return true;
  return false;
}

/* A header's value from START to END (at its CRLF), without the spaces
 * around it. */
static void
header_value (const char **start, const char **end)
{
  while (*start < *end && (**start == ' ' || **start == '\t'))
    (*start)++;
  while (*end > *start && ((*end)[-1] == ' ' || (*end)[-1] == '\t'))
    (*end)--;
}

/* A Host header's value names REQ's host, and its port if it gives one
 * (a host is reached on the URI's port whatever the header says). */
static bool
host_is_authority (const char *start, const char *end, const FbProxyRequest *req)
{
  FbProxyRequest h = { 0 };
  bool same;

  header_value (&start, &end);
  same = take_authority (start, (gsize)(end - start), req->port, &h) && strcmp (h.host, req->host) == 0 &&
         h.port == req->port;
  fb_proxy_request_clear (&h);
  return same;
}

/* A Content-Length's value: digits, the same each time it is given. */
static bool
take_content_length (const char *start, const char *end, bool again, FbProxyRequest *req)
{
  guint64 v = 0;

  header_value (&start, &end);
  if (start == end || end - start > 15)
    return false;
  for (const char *q = start; q < end; q++)
    {
      if (!g_ascii_isdigit (*q))
        return false;
      v = v * 10 + (guint64)(*q - '0');
    }
  if (again && v != req->body)
    return false;
  req->body = v;
  return true;
}

/* Where the head ends (after its CRLF CRLF), or NULL when BUF's LEN bytes
 * hold no end yet; *RET_WHY set when a byte of the head is one HTTP/1.1
 * forbids there.  Only CRLF ends a line (RFC 9112, 2.2): a bare LF or CR
 * is refused, not read either way, because the host behind the proxy may
 * read it otherwise (Python's http.server and nginx end a line at a bare
 * LF), and a header that the proxy read as part of another's value would
 * reach the host undecided: a second Host, a Transfer-Encoding.  A NUL
 * ends C strings early.  Bytes after the head are the client's data (a
 * body, a tunnel's TLS) and are not looked at. */
static const char *
head_end (const char *buf, gsize len, const char **ret_why)
{
  for (gsize i = 0; i < len; i++)
    switch (buf[i])
      {
        case '\0':
          *ret_why = "a NUL byte in the request's head";
          return NULL;
        case '\r':
          if (i + 1 < len && buf[i + 1] != '\n')
            {
              *ret_why = "a CR not followed by LF in the request's head (only CRLF ends a line)";
              return NULL;
            }
          break;
        case '\n':
          if (i == 0 || buf[i - 1] != '\r')
            {
              *ret_why = "an LF not preceded by CR in the request's head (only CRLF ends a line)";
              return NULL;
            }
          if (i >= 3 && buf[i - 2] == '\n')
            return buf + i - 3;
          break;
        default:
          break;
      }
  return NULL;
}

/* A header line from P to EOL (its CRLF), both kinds of request: a name
 * that is a token, a colon, a value of visible characters, spaces, tabs
 * and obs-text (RFC 9110, 5.5).  A control character in a value (a VT,
 * an ESC, a DEL; CR, LF and NUL never get here) is refused, not
 * forwarded: a host may read it as the end of the line or of the name. */
static bool
header_line_ok (const char *p, const char *eol, const char **ret_why)
{
  const char *colon;

  if (*p == ' ' || *p == '\t')
    {
      /* obs-fold (RFC 9112, 5.2): a proxy refuses it or unfolds it; a host
       * that reads it otherwise would see another header */
      *ret_why = "a header line folded onto the one before it (obs-fold)";
      return false;
    }
  colon = memchr (p, ':', (gsize)(eol - p));
  if (colon == NULL || colon == p)
    {
      *ret_why = "a header line without a name";
      return false;
    }
  for (const char *q = p; q < colon; q++)
    if (!is_token_char (*q))
      {
        *ret_why = "a header's name is not a token";
        return false;
      }
  for (const char *q = colon + 1; q < eol; q++)
    if (((guchar)*q < ' ' && *q != '\t') || (guchar)*q == 0x7f)
      {
        *ret_why = "a control character in a header's value";
        return false;
      }
  return true;
}

FbProxyParse
fb_proxy_parse_http (const char *buf, gsize len, FbProxyRequest *req, const char **ret_why)
{
  const char *end;
  const char *line_end, *sp1, *sp2, *p;
  gsize mlen, tlen;
  bool has_host = false, has_length = false;

  *ret_why = NULL;
  end = head_end (buf, MIN (len, FB_PROXY_HEAD_MAX), ret_why);
  if (*ret_why != NULL)
    return FB_PROXY_PARSE_ERROR;
  if (end == NULL)
    {
      if (len >= FB_PROXY_HEAD_MAX)
        {
          *ret_why = "the request's head is longer than the proxy takes";
          return FB_PROXY_PARSE_ERROR;
        }
      return FB_PROXY_PARSE_MORE;
    }
  if ((gsize)(end - buf) + 4 > FB_PROXY_HEAD_MAX)
    {
      *ret_why = "the request's head is longer than the proxy takes";
      return FB_PROXY_PARSE_ERROR;
    }
  line_end = strstr (buf, "\r\n");
  /* METHOD SP TARGET SP HTTP/1.x */
  sp1 = memchr (buf, ' ', (gsize)(line_end - buf));
  sp2 = sp1 != NULL ? memchr (sp1 + 1, ' ', (gsize)(line_end - sp1 - 1)) : NULL;
  if (sp1 == NULL || sp2 == NULL || sp1 == buf || sp2 == sp1 + 1 ||
      !(line_end - sp2 - 1 == 8 && (strncmp (sp2 + 1, "HTTP/1.1", 8) == 0 || strncmp (sp2 + 1, "HTTP/1.0", 8) == 0)))
    {
      *ret_why = "not an HTTP/1.x request line";
      return FB_PROXY_PARSE_ERROR;
    }
  mlen = (gsize)(sp1 - buf);
  for (gsize i = 0; i < mlen; i++)
    if (!is_token_char (buf[i]))
      {
        *ret_why = "not an HTTP method";
        return FB_PROXY_PARSE_ERROR;
      }
  tlen = (gsize)(sp2 - sp1 - 1);
  for (p = sp1 + 1; p < sp2; p++)
    if ((guchar)*p <= ' ' || (guchar)*p >= 0x7f)
      {
        *ret_why = "a control character or a space in the request's target";
        return FB_PROXY_PARSE_ERROR;
      }
  /* Every header line well formed, a CONNECT's too: they are not
   * forwarded, but a head refused as a plain request is no tunnel's. */
  for (p = line_end + 2; p < end + 2; p = strstr (p, "\r\n") + 2)
    if (!header_line_ok (p, strstr (p, "\r\n"), ret_why))
      return FB_PROXY_PARSE_ERROR;

  if (mlen == 7 && strncmp (buf, "CONNECT", 7) == 0)
    {
      req->kind = FB_PROXY_HTTP_CONNECT;
      if (!take_authority (sp1 + 1, tlen, 0, req))
        {
          *ret_why = "CONNECT wants host:port";
          return FB_PROXY_PARSE_ERROR;
        }
      /* the headers mean nothing to the host: the tunnel starts after them */
      req->consumed = (gsize)(end - buf) + 4;
      return FB_PROXY_PARSE_DONE;
    }

  /* A plain request: an absolute http:// URI, forwarded with its path */
  {
    const char *t = sp1 + 1, *auth, *auth_end;

    if (tlen < 7 || g_ascii_strncasecmp (t, "http://", 7) != 0)
      {
        *ret_why = "a plain request through the proxy wants an absolute http:// URI (https goes through CONNECT)";
        return FB_PROXY_PARSE_ERROR;
      }
    if (memchr (t, '#', tlen) != NULL)
      {
        /* a client never sends one; an upstream that parses the target
         * loosely would read what follows it, which nothing decided */
        *ret_why = "a fragment (#) in the request's target";
        return FB_PROXY_PARSE_ERROR;
      }
    auth = t + 7;
    for (auth_end = auth; auth_end < sp2 && *auth_end != '/' && *auth_end != '?'; auth_end++)
      ;
    if (memchr (auth, '@', (gsize)(auth_end - auth)) != NULL ||
        !take_authority (auth, (gsize)(auth_end - auth), 80, req))
      {
        *ret_why = "the URI's host is not a host name or an address, with an optional port";
        return FB_PROXY_PARSE_ERROR;
      }
    req->kind = FB_PROXY_HTTP_FORWARD;
    req->forward = g_string_sized_new ((gsize)(end - buf) + 64);
    g_string_append_len (req->forward, buf, (gssize)mlen);
    g_string_append_c (req->forward, ' ');
    if (auth_end == sp2 || *auth_end != '/')
      g_string_append_c (req->forward, '/');
    g_string_append_len (req->forward, auth_end, sp2 - auth_end);
    g_string_append_len (req->forward, sp2, line_end - sp2);
    g_string_append (req->forward, "\r\n");

    /* Header lines: kept but for the hop-by-hop ones; one request per
     * connection (Connection: close), so that a second request on the
     * same connection can't reach another host without a decision. */
    for (p = line_end + 2; p < end + 2;)
      {
        const char *eol = strstr (p, "\r\n");
        const char *colon = memchr (p, ':', (gsize)(eol - p)); /* header_line_ok() */
        gsize nlen = (gsize)(colon - p);

        if (nlen == 4 && g_ascii_strncasecmp (p, "host", 4) == 0)
          {
            if (has_host || !host_is_authority (colon + 1, eol, req))
              {
                /* the host would route on it: it must be what was decided */
                *ret_why = "the Host header names another host than the request's URI";
                return FB_PROXY_PARSE_ERROR;
              }
            has_host = true;
          }
        if (nlen == 17 && g_ascii_strncasecmp (p, "transfer-encoding", 17) == 0)
          {
            /* one request per connection: the body's end must be known
             * without decoding chunks (and no Content-Length to disagree) */
            *ret_why = "a plain request's body wants a Content-Length, not a Transfer-Encoding";
            return FB_PROXY_PARSE_ERROR;
          }
        if (nlen == 14 && g_ascii_strncasecmp (p, "content-length", 14) == 0 &&
            !take_content_length (colon + 1, eol, has_length, req))
          {
            *ret_why = "a Content-Length that is not one number";
            return FB_PROXY_PARSE_ERROR;
          }
        if (nlen == 14 && g_ascii_strncasecmp (p, "content-length", 14) == 0)
          has_length = true;
        if (!header_is_dropped (p, nlen))
          g_string_append_len (req->forward, p, eol - p + 2);
        p = eol + 2;
      }
    if (!has_host)
      {
        g_string_append (req->forward, "Host: ");
        g_string_append_len (req->forward, auth, auth_end - auth);
        g_string_append (req->forward, "\r\n");
      }
    g_string_append (req->forward, "Connection: close\r\n\r\n");
    req->consumed = (gsize)(end - buf) + 4;
    return FB_PROXY_PARSE_DONE;
  }
}

FbProxyParse
fb_proxy_parse_socks_greeting (const guint8 *buf, gsize len, gsize *ret_consumed, bool *ret_no_auth)
{
  if (len < 2)
    return FB_PROXY_PARSE_MORE;
  if (buf[0] != 5 || buf[1] == 0)
    return FB_PROXY_PARSE_ERROR;
  if (len < 2 + (gsize)buf[1])
    return FB_PROXY_PARSE_MORE;
  *ret_no_auth = memchr (buf + 2, 0x00, buf[1]) != NULL;
  *ret_consumed = 2 + (gsize)buf[1];
  return FB_PROXY_PARSE_DONE;
}

FbProxyParse
fb_proxy_parse_socks_request (const guint8 *buf, gsize len, FbProxyRequest *req, guint8 *ret_reply)
{
  gsize need;

  *ret_reply = FB_SOCKS_GENERAL_FAILURE;
  if (len < 5)
    return FB_PROXY_PARSE_MORE;
  if (buf[0] != 5)
    return FB_PROXY_PARSE_ERROR;
  switch (buf[3])
    {
      case 1:
        need = 4 + 4 + 2;
        break;
      case 3:
        need = 4 + 1 + (gsize)buf[4] + 2;
        break;
      case 4:
        need = 4 + 16 + 2;
        break;
      default:
        *ret_reply = FB_SOCKS_ADDRESS_TYPE_NOT_SUPPORTED;
        return FB_PROXY_PARSE_ERROR;
    }
  if (buf[1] != 1)
    {
      /* BIND and UDP ASSOCIATE would open ways in and out that no request
       * names a host for */
      *ret_reply = FB_SOCKS_COMMAND_NOT_SUPPORTED;
      return FB_PROXY_PARSE_ERROR;
    }
  if (len < need)
    return FB_PROXY_PARSE_MORE;
  req->kind = FB_PROXY_SOCKS;
  if (buf[3] == 3)
    {
      if (buf[4] == 0 || memchr (buf + 5, '\0', buf[4]) != NULL || !take_host ((const char *)buf + 5, buf[4], req))
        return FB_PROXY_PARSE_ERROR;
    }
  else
    {
      g_autoptr (GInetAddress) a =
        g_inet_address_new_from_bytes (buf + 4, buf[3] == 1 ? G_SOCKET_FAMILY_IPV4 : G_SOCKET_FAMILY_IPV6);
      g_free (req->host);
      req->host = g_inet_address_to_string (a);
      req->host_is_address = true;
    }
  req->port = (guint16)((buf[need - 2] << 8) | buf[need - 1]);
  if (req->port == 0)
    return FB_PROXY_PARSE_ERROR;
  req->consumed = need;
  return FB_PROXY_PARSE_DONE;
}
