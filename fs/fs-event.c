/* fusebox — the access event's vocabulary: one table per enum (operations,
 * accesses, decisions, levels), as written in the access log; every
 * per-value fact derives from them. */
#include "fs/fs-event.h"
#include "policy/util.h"

#include <errno.h>
#include <string.h>

static const FbNameRow level_table[] = {
  [FB_LOG_LEVEL_MUTATIONS] = { "mutations" },
  [FB_LOG_LEVEL_OPENS] = { "opens" },
  [FB_LOG_LEVEL_ALL] = { "all" },
};

const FbOpInfo fb_op_table[FB_OP_N] = {
  [FB_OP_LOOKUP] = { "lookup", FB_OP_EFFECT_OBSERVE },
  [FB_OP_GETATTR] = { "getattr", FB_OP_EFFECT_OBSERVE },
  [FB_OP_ACCESS] = { "access", FB_OP_EFFECT_OBSERVE },
  [FB_OP_READLINK] = { "readlink", FB_OP_EFFECT_OBSERVE },
  [FB_OP_STATFS] = { "statfs", FB_OP_EFFECT_OBSERVE },
  [FB_OP_READDIR] = { "readdir", FB_OP_EFFECT_OBSERVE },
  [FB_OP_GETXATTR] = { "getxattr", FB_OP_EFFECT_OBSERVE },
  [FB_OP_LISTXATTR] = { "listxattr", FB_OP_EFFECT_OBSERVE },
  [FB_OP_OPEN] = { "open", FB_OP_EFFECT_HANDLE },
  [FB_OP_CLOSE] = { "close", FB_OP_EFFECT_HANDLE },
  [FB_OP_CREATE] = { "create", FB_OP_EFFECT_CREATE },
  [FB_OP_MKDIR] = { "mkdir", FB_OP_EFFECT_CREATE },
  [FB_OP_MKNOD] = { "mknod", FB_OP_EFFECT_CREATE },
  [FB_OP_SYMLINK] = { "symlink", FB_OP_EFFECT_CREATE },
  [FB_OP_LINK] = { "link", FB_OP_EFFECT_LINK },
  [FB_OP_UNLINK] = { "unlink", FB_OP_EFFECT_DELETE },
  [FB_OP_RMDIR] = { "rmdir", FB_OP_EFFECT_DELETE },
  [FB_OP_RENAME] = { "rename", FB_OP_EFFECT_RENAME },
  [FB_OP_TRUNCATE] = { "truncate", FB_OP_EFFECT_WRITE },
  [FB_OP_CHMOD] = { "chmod", FB_OP_EFFECT_ATTR },
  [FB_OP_CHOWN] = { "chown", FB_OP_EFFECT_ATTR },
  [FB_OP_UTIMENS] = { "utimens", FB_OP_EFFECT_ATTR },
  [FB_OP_SETXATTR] = { "setxattr", FB_OP_EFFECT_ATTR },
  [FB_OP_REMOVEXATTR] = { "removexattr", FB_OP_EFFECT_ATTR },
  [FB_OP_CONNECT] = { "connect", FB_OP_EFFECT_CONNECT },
  [FB_OP_DISCONNECT] = { "disconnect", FB_OP_EFFECT_CONNECT },
};

const FbAccessInfo fb_access_table[FB_ACCESS_N] = {
  [FB_ACCESS_STAT] = { .name = "stat" },                       /* a lookup, the attributes, statfs */
  [FB_ACCESS_READ] = { .name = "read", .handle_reads = true }, /* a read-only open, readlink, attribute reads */
  [FB_ACCESS_WRITE] = { .name = "write",
                        .changes = true,
                        .handle_writes = true }, /* a write-only or truncating open, changed attributes, a rename */
  [FB_ACCESS_READWRITE] = { .name = "readwrite", .changes = true }, /* an open for reading and writing */
  [FB_ACCESS_EXEC] = { .name = "exec", .handle_reads = true },      /* an open for execve() */
  [FB_ACCESS_LIST] = { .name = "list" },                            /* a listing */
  [FB_ACCESS_CREATE] = { .name = "create", .changes = true }, /* a name made: create, mkdir, mknod, symlink, link */
  [FB_ACCESS_DELETE] = { .name = "delete", .changes = true }, /* a name removed: unlink, rmdir */
  [FB_ACCESS_CONNECT] = { .name = "connect" },                /* a connection through the network proxy */
};

const FbDecisionInfo fb_decision_table[FB_DECISION_N] = {
  [FB_DECISION_ALLOW] = { .name = "allow" },
  [FB_DECISION_DENY] = { .name = "deny", .err = EACCES, .refusal = true, .told = true },
  [FB_DECISION_HIDE] = { .name = "hide", .err = ENOENT, .refusal = true },
  [FB_DECISION_READONLY] = { .name = "readonly", .err = EROFS, .refusal = true, .told = true },
};

FB_DEFINE_STRING_TABLE (fb_log_level, FbLogLevel, level_table, G_N_ELEMENTS (level_table))

FB_DEFINE_STRING_TABLE (fb_decision, FbDecision, fb_decision_table, FB_DECISION_N)

bool
fb_decision_name_is_refusal (const char *name)
{
  FbDecision d;

  return !fb_decision_from_string (name, &d) || fb_decision_table[d].refusal;
}

FB_DEFINE_STRING_TABLE (fb_op, FbOp, fb_op_table, FB_OP_N)

FB_DEFINE_STRING_TABLE (fb_access, FbAccess, fb_access_table, FB_ACCESS_N)

FbLogLevel
fb_op_level (FbOp op)
{
  switch (fb_op_info (op)->effect)
    {
      case FB_OP_EFFECT_OBSERVE:
        return FB_LOG_LEVEL_ALL;
      case FB_OP_EFFECT_HANDLE:
        return FB_LOG_LEVEL_OPENS;
      case FB_OP_EFFECT_CREATE:
      case FB_OP_EFFECT_LINK:
      case FB_OP_EFFECT_DELETE:
      case FB_OP_EFFECT_RENAME:
      case FB_OP_EFFECT_WRITE:
      case FB_OP_EFFECT_ATTR:
      case FB_OP_EFFECT_CONNECT:
        return FB_LOG_LEVEL_MUTATIONS;
    }
  return FB_LOG_LEVEL_MUTATIONS;
}
