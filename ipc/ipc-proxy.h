/* fusebox — the network proxy outside the sandbox (ipc-proxy.c), and its
 * parsers (ipc-proxy-parse.c).
 *
 * A sandbox whose policy's network is an allowlist has its own network
 * namespace with only "lo".  Its outer process listens there at
 * 127.0.0.1:FB_PROXY_PORT and hands the listening socket to the supervisor
 * (launcher.h, FbLauncherPlan.proxy_port), which accepts on it in its main
 * loop: the proxy runs in the supervisor's network namespace, the host's,
 * and connects only where the policy allows.  One port speaks both HTTP
 * (CONNECT host:port, and plain requests with an absolute http:// URI) and
 * SOCKS5 (no authentication, CONNECT, IPv4, IPv6 and domain names): a
 * first byte 0x05 is SOCKS.  The command gets HTTP_PROXY, HTTPS_PROXY,
 * ALL_PROXY (socks5h://) and NO_PROXY (fb_proxy_environ()).
 *
 * Every connection attempt is an access record of the run's log, op
 * "connect"; its end, op "disconnect", with bytes each way and duration.
 *
 * Who runs one: `fusebox run`'s supervisor (launcher-cmd-run.c), the
 * daemon of a `run --session` for each of its commands
 * (launcher-session-daemon.c), and `fusebox serve` for each process/start
 * (ipc-process.c); each on its main loop, with the sink of the command's
 * or the process's records.
 */
#pragma once

#include "fs/fs-event.h"
#include "policy/policy.h"

#include <gio/gio.h>
#include <stdbool.h>

G_BEGIN_DECLS

/* Where the sandbox finds the proxy, in its own network namespace. */
#define FB_PROXY_PORT 3128

/* Bounds (docs/fusebox.1, NETWORK), per sandbox:
 *  - a client has FB_PROXY_HANDSHAKE_S seconds from its connection to a
 *    complete request (an HTTP head, a SOCKS greeting and request) and
 *    FB_PROXY_HEAD_MAX bytes for it; then it is closed (408, 400, a SOCKS
 *    failure);
 *  - resolving the name and connecting take at most FB_PROXY_CONNECT_S
 *    seconds (then 504, SOCKS 0x04);
 *  - at most FB_PROXY_MAX_CONNECTIONS connections at once: past them the
 *    proxy stops accepting until one ends (the others wait in the
 *    kernel's backlog); and at most what the proxies' share of the
 *    descriptors holds (FbProxyFds, counted from each accept; a proxy
 *    that shares it with a session's other commands, half of it): past it
 *    a new connection is closed at once, with a refused record;
 *  - a tunnel costs FB_PROXY_CONN_FDS descriptors: its two sockets and a
 *    pipe each way; at most as many tunnels at once as half the
 *    descriptors outside the views hold (fs.h: 256 from RLIMIT_NOFILE
 *    12,288 up), past them, or out of descriptors, a request is refused
 *    (503, SOCKS5 1) with a record saying why;
 *  - bytes move through the pipes (splice(2)), never through the proxy's
 *    memory; a pipe (FB_PROXY_PIPE) is filled again only once it was
 *    emptied: a slow reader slows its writer, never grows memory;
 *  - a connection that moved no byte either way for FB_PROXY_IDLE_S
 *    seconds is closed (its descriptors are the supervisor's); tests make
 *    it shorter with $FUSEBOX_TEST_PROXY_IDLE. */
#define FB_PROXY_HANDSHAKE_S 10
#define FB_PROXY_CONNECT_S 30
#define FB_PROXY_HEAD_MAX (16 * 1024)
#define FB_PROXY_MAX_CONNECTIONS 256
/* A tunnel's descriptors: the client's socket, the host's, and a pipe
 * (two descriptors) each way. */
#define FB_PROXY_CONN_FDS 6
/* Each pipe's size (F_SETPIPE_SZ, best effort): the kernel's default. */
#define FB_PROXY_PIPE (64 * 1024)
#define FB_PROXY_IDLE_S 600
/* Out of descriptors (EMFILE, ENFILE), the proxy stops accepting for this
 * long, its connections waiting in the kernel's backlog. */
#define FB_PROXY_BACKOFF_S 1
#define FB_PROXY_NAME_MAX 253

typedef struct FbProxy FbProxy;

/* The descriptors the network proxies of one process may hold together: a
 * connection holds one from its accept, a tunnel FB_PROXY_CONN_FDS once
 * its pipes are made.  fb_proxy_fds_init() sets MAX to half of what the
 * views leave to the rest of the process (their reserve, fs.h), so that
 * no flood of connections, however split among a session's commands,
 * takes the descriptors the views and the log need.  Past it a new
 * connection is closed at once and a tunnel refused (503, SOCKS5 1).  Used
 * from the loop's thread only. */
typedef struct
{
  guint max;
  guint used;
} FbProxyFds;

void fb_proxy_fds_init (FbProxyFds *fds);

typedef struct
{
  const FbPolicy *policy; /* a reference is taken */
  FbAccessSink *sink;     /* the run's log; records are pushed from the loop's thread */
  uid_t uid;              /* the sandbox's uid, for the records */
  const char *process;    /* the records' "process" (serve's process id), or NULL; copied */
  /* "NAME:ADDR" entries (--resolve, for tests and debugging): NAME
   * resolves to ADDR (several entries for one name add addresses) and
   * never through the host's resolver. */
  const char *const *resolve;
  /* connections at once, at most FB_PROXY_MAX_CONNECTIONS (0: that): serve
   * gives each process its part of the descriptors it keeps for them */
  guint max_connections;
  /* the descriptors this proxy shares with the other proxies of the
   * process (a session's commands); NULL: its own, from fb_proxy_fds_init() */
  FbProxyFds *fds;
} FbProxyOptions;

/* Checks OPTIONS->resolve; FALSE with a message naming the entry. */
gboolean fb_proxy_check_resolve (const char *const *resolve, GError **error);

/* A proxy accepting on LISTEN_FD (a listening TCP socket, taken), on the
 * thread-default main context.  NULL with ERROR when the socket is not
 * one. */
FbProxy *fb_proxy_new (const FbProxyOptions *options, int listen_fd, GError **error);
/* Closes the listener and every connection, each logged as ended. */
void fb_proxy_free (FbProxy *proxy);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbProxy, fb_proxy_free)

/* ENVP with the proxy's variables set (and the lower-case forms): what
 * curl, git, pip, npm and Python's urllib read. */
char **fb_proxy_environ (char **envp);

/* ---- parsers (ipc-proxy-parse.c) ---- */

typedef enum
{
  FB_PROXY_PARSE_MORE,  /* not yet complete: read more */
  FB_PROXY_PARSE_DONE,  /* complete */
  FB_PROXY_PARSE_ERROR, /* malformed or unsupported */
} FbProxyParse;

typedef enum
{
  FB_PROXY_HTTP_CONNECT, /* CONNECT host:port: a tunnel */
  FB_PROXY_HTTP_FORWARD, /* GET http://host/...: the request forwarded with its path */
  FB_PROXY_SOCKS,        /* SOCKS5 CONNECT */
} FbProxyKind;

/* SOCKS5 reply codes (RFC 1928, 6). */
#define FB_SOCKS_SUCCEEDED 0x00
#define FB_SOCKS_GENERAL_FAILURE 0x01
#define FB_SOCKS_NOT_ALLOWED 0x02 /* connection not allowed by ruleset */
#define FB_SOCKS_NETWORK_UNREACHABLE 0x03
#define FB_SOCKS_HOST_UNREACHABLE 0x04
#define FB_SOCKS_CONNECTION_REFUSED 0x05
#define FB_SOCKS_TTL_EXPIRED 0x06
#define FB_SOCKS_COMMAND_NOT_SUPPORTED 0x07
#define FB_SOCKS_ADDRESS_TYPE_NOT_SUPPORTED 0x08

typedef struct
{
  FbProxyKind kind;
  char *host;           /* lower-case name without a trailing dot, or an address's canonical text */
  bool host_is_address; /* an IP literal */
  guint16 port;
  GString *forward; /* FORWARD: the head to send to the host (origin-form, Connection: close) */
  gsize consumed;   /* bytes of the buffer the request took; what follows is the client's data */
  guint64 body;     /* FORWARD: its Content-Length (0 without); what follows is dropped */
} FbProxyRequest;

void fb_proxy_request_clear (FbProxyRequest *req);

/* An HTTP proxy request's head in BUF (LEN bytes, BUF[LEN] == '\0').  On
 * ERROR, *RET_WHY says what is wrong, for the 400's body. */
FbProxyParse fb_proxy_parse_http (const char *buf, gsize len, FbProxyRequest *req, const char **ret_why);
/* SOCKS5's greeting: *RET_NO_AUTH when the client offers "no
 * authentication" (the only method the proxy takes). */
FbProxyParse fb_proxy_parse_socks_greeting (const guint8 *buf, gsize len, gsize *ret_consumed, bool *ret_no_auth);
/* SOCKS5's request; on ERROR, *RET_REPLY is the reply code to send. */
FbProxyParse fb_proxy_parse_socks_request (const guint8 *buf, gsize len, FbProxyRequest *req, guint8 *ret_reply);

G_END_DECLS
