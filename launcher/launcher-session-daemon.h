/* fusebox run --session — what the session daemon's files share
 * (launcher-session-daemon.c, and the quick client's side of it,
 * launcher-session-quick.c): the daemon, its connections, and the calls
 * each file makes into the other.  Not for anything else: the session's
 * public face is launcher-session.h. */
#pragma once

#include "ipc/ipc-proxy.h"
#include "ipc/ipc.h"
#include "launcher/launcher-private.h"
#include "launcher/launcher-session.h"

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdarg.h>
#include <stdbool.h>

G_BEGIN_DECLS

/* Commands at once in a session. */
#define SESSION_COMMANDS_MAX 64
/* How long after a command took the ready sandbox the next is made
 * (fb_session_daemon_ready_later). */
#define READY_AFTER_MS 50

/* What a full client settled, for the quick client
 * (launcher-session-quick.c). */
typedef struct Quick Quick;

typedef struct Daemon Daemon;

/* One client: a command's supervisor, or `session list|stop`. */
typedef struct
{
  Daemon *d;
  int fd; /* -1 once it hung up */
  guint watch;
  char *run_id;
  FbAccessLog *log;      /* its command's, from JOIN until it is closed */
  FbViewMember *member;  /* from REGISTER */
  FbProxy *proxy;        /* a network allowlist's, from REGISTER until its command ends */
  FbSessionReady *ready; /* the ready sandbox its command runs in (JOIN answered STARTED) */
  int proof;             /* a memfd of the daemon's own, for this connection, until its JOIN (run_ready) */
  bool ended;            /* ENDED, or EOF: its command is over */
  bool answered;         /* CLOSED sent (or no one to send it to) */
  guint linger_id;       /* LINGER_MS after its end, while files of it are open */
  bool stop_waits;       /* `session stop`: hung up on once the session's run has ended */
  bool stopped;          /* the session stopped before its command exited: the stop ended it */
  /* QUICK (launcher-front.c): the command's run, which the daemon made
   * and ends; its status and why it did not start, from EXITED */
  FbRun *quick_run;
  int quick_status;
  bool exited; /* EXITED told: QUICK_STATUS is the command's own */
  char *quick_failure;
  guint64 quick_log_max;
  /* a JOIN with its command or a QUICK that waits for the sandbox being
   * made (park): the message, its descriptors, the wait's end */
  Msg *parked;
  int parked_fds[MSG_FDS_MAX];
  guint park_id;
  bool waited; /* parked once: not again */
} Conn;

struct Daemon
{
  char *name;
  char *sock_path;
  guint idle_s;
  FbRun *run; /* the session's: its directory (the private sources), its log (records of no command) */
  FbPolicy *policy;
  char digest[65];
  guint32 uid, gid;
  FbLogLevel level;
  FbViewShare *share;
  FbView *view;
  FbRunFuse *serving;
  FbLauncherChild *keeper; /* the view's refresher (launcher.h, KEEP_VIEW) */
  int ns[2];
  int listen_fd;
  guint listen_watch;
  GList *conns; /* Conn* */
  guint idle_id;
  GMainLoop *loop;
  bool stopping;
  guint64 log_file, log_max; /* the session's log: rotation and budget (its first command's) */
  char *stop_why;            /* why it stops, if not asked to: told to its commands (STOPPING) */
  dev_t sock_dev;            /* the socket's directory entry, as bound */
  ino_t sock_ino;
  FbProxyFds proxy_fds;  /* the descriptors its commands' network proxies hold together (max 0: not yet set) */
  char *launch_helper;   /* fusebox-launch, which makes the ready sandbox */
  FbSessionReady *ready; /* the next command's sandbox, made ahead (launcher-session-ready.c) */
  char *ready_why;       /* why the last one is gone */
  guint ready_idle;
  bool ready_timed;  /* ready_idle is READY_AFTER_MS's timer */
  GPtrArray *quicks; /* Quick*: what full clients settled, the newest last */
  GQueue parked;     /* Conn*, oldest first: waiting for the sandbox being made */
  guint unpark_idle;
};

/* launcher-session-daemon.c */

/* How many of D's commands run. */
guint fb_session_daemon_running (Daemon *d);
/* No command runs: the idle timeout starts (a stop ends it at once). */
void fb_session_daemon_maybe_idle (Daemon *d);
/* The next ready sandbox made AFTER_MS from now (0: at once). */
void fb_session_daemon_ready_later (Daemon *d, guint after_ms);
/* Whether C may have the ready sandbox, having opened the proof PROOF;
 * false with *RET_WHY. */
bool fb_session_daemon_ready_for (Conn *c, int proof, char **ret_why);
/* C's command (FDS) into the ready sandbox that
 * fb_session_daemon_ready_for granted; false with *RET_WHY. */
bool fb_session_daemon_run_ready_granted (Conn *c, int fds[MSG_FDS_MAX], const char *resolve, char **ret_why);
/* A message of TYPE to C whose text is FORMAT's. */
void fb_session_daemon_send_text (Conn *c, MsgType type, const char *format, va_list ap) G_GNUC_PRINTF (3, 0);
/* A command's log reached its budget (FbAccessLogOptions.on_full, DATA
 * its Conn). */
void fb_session_daemon_on_log_full (gpointer data);

/* launcher-session-quick.c */

void fb_session_quick_free (Quick *q);
/* A full client's JOIN went to the ready sandbox: learn it for the quick
 * clients that come with the same environment and directory. */
void fb_session_quick_learn (Daemon *d, const Msg *m, int spec_fd, int own_fd, JsonObject *info);
/* QUICK: its command into the ready sandbox, or NOT_QUICK. */
void fb_session_quick_start (Conn *c, int fds[MSG_FDS_MAX]);
/* A quick client's run ends: into CLOSED (M). */
void fb_session_quick_end (Conn *c, Msg *m);

G_END_DECLS
