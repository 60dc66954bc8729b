/* fusebox — the access event: the narrow interface from the view (fs/) to
 * the access log (ipc/).
 *
 * The view fills one FbAccessEvent per decided access and hands it to an
 * FbAccessSink.  The sink copies what it keeps before returning (strings
 * included), may block when its queue is full (a record is never dropped),
 * and is called from any thread (FUSE workers, the main loop).  `seq`, `run`
 * and `ts` formatting are the sink's business.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/policy.h"

G_BEGIN_DECLS

/* What gets logged.  Denials are always logged, whatever the level. */
typedef enum
{
  FB_LOG_LEVEL_MUTATIONS = 0, /* create, write-open, unlink, rename, link, mkdir, setattr, ... */
  FB_LOG_LEVEL_OPENS = 1,     /* + every open, logged once at release with bytes read/written (default) */
  FB_LOG_LEVEL_ALL = 2,       /* + lookup, getattr, readdir, readlink, access, statfs, xattr reads */
} FbLogLevel;

FB_DECLARE_STRING_TABLE (fb_log_level, FbLogLevel);

/* What an operation does to the file at its path, for what gets logged at
 * which level and how `fusebox report` files it. */
typedef enum
{
  FB_OP_EFFECT_OBSERVE, /* reads a name, metadata or a listing (logged at level all) */
  FB_OP_EFFECT_HANDLE,  /* opens or closes a handle: what it read and wrote is its access and bytes (level opens) */
  FB_OP_EFFECT_CREATE,  /* makes the name at path */
  FB_OP_EFFECT_LINK,    /* makes the name at target, another name of path's object */
  FB_OP_EFFECT_DELETE,  /* removes the name at path */
  FB_OP_EFFECT_RENAME,  /* moves path to target */
  FB_OP_EFFECT_WRITE,   /* changes path's contents */
  FB_OP_EFFECT_ATTR,    /* changes path's metadata: mode, owner, times, extended attributes */
  FB_OP_EFFECT_CONNECT, /* a connection through the network proxy (ipc/ipc-proxy.h), not a file: always logged */
} FbOpEffect;

/* The operations the view logs, each with one row of fb_op_table
 * (fs-event.c): the log's "op" and what it does; and the network proxy's,
 * whose path is "HOST:PORT". */
typedef enum
{
  FB_OP_LOOKUP,
  FB_OP_GETATTR,
  FB_OP_ACCESS,
  FB_OP_READLINK,
  FB_OP_STATFS,
  FB_OP_READDIR,
  FB_OP_GETXATTR,
  FB_OP_LISTXATTR,
  FB_OP_OPEN,
  FB_OP_CLOSE,
  FB_OP_CREATE,
  FB_OP_MKDIR,
  FB_OP_MKNOD,
  FB_OP_SYMLINK,
  FB_OP_LINK,
  FB_OP_UNLINK,
  FB_OP_RMDIR,
  FB_OP_RENAME,
  FB_OP_TRUNCATE,
  FB_OP_CHMOD,
  FB_OP_CHOWN,
  FB_OP_UTIMENS,
  FB_OP_SETXATTR,
  FB_OP_REMOVEXATTR,
  FB_OP_CONNECT,    /* the proxy decided a connection: refused, failed or made */
  FB_OP_DISCONNECT, /* a connection made has ended: bytes each way, duration */
} FbOp;
#define FB_OP_N (FB_OP_DISCONNECT + 1) /* one past the last value */

typedef struct
{
  const char *name; /* the log's "op" */
  FbOpEffect effect;
} FbOpInfo;

/* fb_op_info: a value outside the enum gets lookup's row. */
FB_DECLARE_INFO_TABLE (fb_op, FbOp, FbOpInfo, fb_op_table, FB_OP_N, FB_OP_LOOKUP)
FB_DECLARE_STRING_TABLE (fb_op, FbOp);
/* The least level at which an allowed OP is logged (a refusal always is). */
FbLogLevel fb_op_level (FbOp op);

/* What an access asked for, each with one row of fb_access_table
 * (fs-event.c): the log's "access", and which operations ask it. */
typedef enum
{
  FB_ACCESS_STAT,
  FB_ACCESS_READ,
  FB_ACCESS_WRITE,
  FB_ACCESS_READWRITE,
  FB_ACCESS_EXEC,
  FB_ACCESS_LIST,
  FB_ACCESS_CREATE,
  FB_ACCESS_DELETE,
  FB_ACCESS_CONNECT,
} FbAccess;
#define FB_ACCESS_N (FB_ACCESS_CONNECT + 1) /* one past the last value */

typedef struct
{
  const char *name;   /* the log's and the remote API's "access" */
  bool changes;       /* asks to change a file or a name (a report's "other changes" when nothing else says how) */
  bool handle_reads;  /* a handle opened for it counts as a read in a report, even with no bytes read */
  bool handle_writes; /* ... as a write, even with no bytes written */
} FbAccessInfo;

extern const FbAccessInfo fb_access_table[FB_ACCESS_N];
FB_DECLARE_STRING_TABLE (fb_access, FbAccess);

/* What the view made of an access.  Every per-decision fact is a column of
 * fb_decision_table (fs-event.c): code asks the table, so that a new
 * decision is an enum value and a row. */
typedef enum
{
  FB_DECISION_ALLOW = 0,
  FB_DECISION_DENY = 1,     /* EACCES from a deny rule (or a hidden name being created) */
  FB_DECISION_HIDE = 2,     /* ENOENT from a hide rule */
  FB_DECISION_READONLY = 3, /* EROFS from a read rule */
} FbDecision;
#define FB_DECISION_N (FB_DECISION_READONLY + 1) /* one past the last value */

typedef struct
{
  const char *name; /* the log's and the remote API's "decision" */
  int err;          /* the errno the view answers with (a refusal of fusebox's own may answer another: EPERM) */
  /* A refusal: the access did not happen as asked.  Always logged; what
   * `log --denied`, `report` and run.json's "denials" count. */
  bool refusal;
  /* A refusal the caller may be told about (the remote API's
   * sandboxDenied and its policy-denial error).  A hide is not: the caller
   * answers as for a missing name, and telling it would say the name
   * exists. */
  bool told;
} FbDecisionInfo;

/* fb_decision_info: a value outside the enum gets deny's row. */
FB_DECLARE_INFO_TABLE (fb_decision, FbDecision, FbDecisionInfo, fb_decision_table, FB_DECISION_N, FB_DECISION_DENY)
FB_DECLARE_STRING_TABLE (fb_decision, FbDecision);
/* A record's "decision" as read back (the log, a subscription): a refusal
 * unless it names a decision that is none.  A missing or unknown one counts
 * as a refusal, so that what reads records never takes one for allowed. */
bool fb_decision_name_is_refusal (const char *name);

typedef struct
{
  int64_t ts_us; /* CLOCK_REALTIME, microseconds, when the access was decided */
  pid_t pid;     /* caller's pid as the kernel gave it (0 if unknown) */
  uid_t uid;
  const char *comm;    /* caller's /proc/PID/comm, or NULL */
  const char *session; /* remote-API session id, or NULL for FUSE callers */
  /* When several commands share the view: the caller's command, from
   * FbViewOptions.owners (fs/fs.h), or NULL.  The view fills OWNER; a sink
   * that knows what it is may fill PROCESS, the record's "process". */
  void *owner;
  const char *process;
  FbOp op;
  const char *path;   /* view path */
  const char *target; /* second view path for rename/link/symlink, else NULL */
  const char *access; /* what was asked: fb_access_to_string() of an FbAccess */
  FbDecision decision;
  int err;                  /* errno returned to the caller, 0 on success */
  const FbPolicyRule *rule; /* the deciding rule (never NULL for decided accesses) */
  int64_t bytes_read;       /* on "close": bytes read through the handle; else -1 */
  int64_t bytes_written;
  /* connect and disconnect (the network proxy): the name or address the
   * sandbox asked for, its port, the address connected to or refused (or
   * NULL), the allowlist's deciding entry (instead of RULE), and on
   * disconnect how long the connection lasted */
  const char *host;
  guint port;
  const char *address;
  const FbPolicyNetRule *net_rule;
  int64_t duration_us;
} FbAccessEvent;

typedef struct FbAccessSink FbAccessSink;
struct FbAccessSink
{
  /* Must not drop; may block; callable from any thread. */
  void (*push) (FbAccessSink *sink, const FbAccessEvent *event);
};

/* A denial to tell the caller about (FbDecisionInfo.told) that failed
 * the access. */
static inline bool
fb_access_event_is_told_denial (const FbAccessEvent *e)
{
  return fb_decision_info (e->decision)->told && e->err != 0;
}

static inline void
fb_access_sink_push (FbAccessSink *sink, const FbAccessEvent *event)
{
  if (sink != NULL)
    sink->push (sink, event);
}

G_END_DECLS
