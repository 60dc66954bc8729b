/* fusebox — the policy engine's public interface.
 *
 * A policy maps every path of the sandbox's view to one access: write, read,
 * deny or hide.  It is pure code: it reads its file (or a string) and answers
 * questions; it never touches the host filesystem otherwise.
 *
 * Semantics (see docs/fusebox-policy.5 for the user's version):
 *  - A literal rule at path P applies to P and everything below it, until a
 *    more specific rule (more path components) takes over.
 *  - A glob rule (deny or hide only) that matches a path P counts as if it
 *    were a literal rule at P: same specificity as a literal rule at P.
 *  - At equal specificity: hide > deny > write > read.
 *  - No matching rule at all means hide.
 *  - A protected name (default .git, .agents, .codex) at any depth narrows the
 *    decision of that path to the protected access (hide, deny or read), unless
 *    a literal rule names that exact path.  It never widens a decision.
 *  - A directory whose decision is hide or deny but below which some literal
 *    rule makes a path visible (read, write or deny) is "traversable": it can
 *    be looked up into and lists only the children leading to those paths.
 *  - A rule without "source" shows the host's object of the same path.  A rule
 *    with a source ("private" or a host directory) is a mount point: the view
 *    path shows that host directory.  A literal rule without source below a
 *    mount point whose host path differs is a mount point too (it shows the
 *    host's path again: a workspace under a private HOME stays the host's).
 *
 * Thread-safety: an FbPolicy is immutable once loaded; every query may run on
 * any thread concurrently.  Decisions point into the policy and stay valid as
 * long as the caller holds a reference.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>

#include "policy/util-table.h"

G_BEGIN_DECLS

/* The longest expanded path, glob or source a policy may hold, in bytes
 * (fusebox-policy(5)): longer ones are refused when it is loaded. */
#define FB_POLICY_MAX_PATH 4096

#define FB_POLICY_ERROR (fb_policy_error_quark ())
GQuark fb_policy_error_quark (void);

typedef enum
{
  FB_POLICY_ERROR_IO,     /* the file could not be read */
  FB_POLICY_ERROR_SYNTAX, /* not JSON */
  FB_POLICY_ERROR_SCHEMA, /* unknown key, wrong type, missing field */
  FB_POLICY_ERROR_VALUE,  /* a field's value is invalid (relative path, "..", unknown variable, bad glob, glob granting
                             access...) */
  FB_POLICY_ERROR_DUPLICATE, /* the same rule twice, or two sources for one path */
  FB_POLICY_ERROR_VERSION,   /* unknown or missing "version" */
  FB_POLICY_ERROR_NOT_FOUND, /* unknown built-in policy */
} FbPolicyError;

/* What a policy grants a path.  Every per-access fact (its name, which
 * rule wins at equal specificity, which side wins a narrowing, what it lets
 * the sandbox do) is a column of one table, fb_policy_access_table
 * (policy-access.c); code asks the table, never compares with a value, so
 * that a new access is an enum value and a row. */
typedef enum
{
  FB_POLICY_ACCESS_HIDE = 0,
  FB_POLICY_ACCESS_DENY = 1,
  FB_POLICY_ACCESS_READ = 2,
  FB_POLICY_ACCESS_WRITE = 3,
} FbPolicyAccess;
#define FB_POLICY_ACCESS_N (FB_POLICY_ACCESS_WRITE + 1) /* one past the last value */

typedef struct
{
  const char *name;       /* as policies, logs and the protocol spell it */
  guint8 precedence;      /* at equal specificity the higher wins: hide > deny > write > read */
  guint8 restrictiveness; /* a narrowing keeps the higher: hide > deny > read > write */
  bool visible;           /* the name can be seen: looked up, listed in its directory */
  bool readable;          /* contents can be read, a directory listed; a directory that is
                           * not readable may still be traversable (policy.h, top) */
  bool writable;          /* contents changed, names made and removed */
  /* As a protected name's access (protected_names): what is never done to
   * the name, for the rule's why ("modified"); NULL: it protects nothing. */
  const char *protects;
} FbPolicyAccessInfo;

/* fb_policy_access_info: a value outside the enum gets hide's row, the
 * narrowest. */
FB_DECLARE_INFO_TABLE (fb_policy_access, FbPolicyAccess, FbPolicyAccessInfo, fb_policy_access_table, FB_POLICY_ACCESS_N,
                       FB_POLICY_ACCESS_HIDE)
FB_DECLARE_STRING_TABLE (fb_policy_access, FbPolicyAccess);
/* Equal-specificity precedence: of two rules at one depth, the one whose
 * access has the higher precedence decides. */
static inline int
fb_policy_access_precedence (FbPolicyAccess a)
{
  return fb_policy_access_info (a)->precedence;
}
/* true when the access lets the name be seen (read, write, deny) */
static inline bool
fb_policy_access_visible (FbPolicyAccess a)
{
  return fb_policy_access_info (a)->visible;
}

/* The sandbox's network (policy-net.h has the allowlist's API). */
typedef enum
{
  FB_POLICY_NETWORK_NONE = 0,      /* its own network namespace, only loopback */
  FB_POLICY_NETWORK_HOST = 1,      /* the host's network namespace */
  FB_POLICY_NETWORK_ALLOWLIST = 2, /* its own namespace; a proxy outside connects to what
                                    * fb_policy_net_decide() allows */
} FbPolicyNetwork;
#define FB_POLICY_NETWORK_N (FB_POLICY_NETWORK_ALLOWLIST + 1) /* one past the last value */

FB_DECLARE_STRING_TABLE (fb_policy_network, FbPolicyNetwork);
/* The narrower of two networks (none < allowlist < host): a narrowed
 * policy's, whose allowlist decisions need both sides to allow. */
FbPolicyNetwork fb_policy_network_narrow (FbPolicyNetwork a, FbPolicyNetwork b);

/* Values of the variables a policy may use.  Every member is an absolute,
 * normalized host path or NULL ("not available here": a policy that uses it
 * fails to load with an error naming the variable and the field). */
typedef struct
{
  const char *workspace; /* ${WORKSPACE}; the workspace directory */
  const char *home;      /* ${HOME}; the caller's home directory */
  const char *cwd;       /* ${CWD}; the caller's working directory */
  const char *run;       /* ${RUN}; the run directory; private sources live under it */
} FbPolicyVars;

/* Fill vars from the process: HOME from $HOME (else the passwd entry), CWD
 * from getcwd(), WORKSPACE = workspace argument or CWD, RUN = run argument
 * (may be NULL).  Strings are owned by *storage; free with
 * fb_policy_vars_clear(). */
typedef struct
{
  FbPolicyVars vars;
  char *owned[4];
} FbPolicyVarsStorage;
void fb_policy_vars_init_from_env (FbPolicyVarsStorage *storage, const char *workspace, const char *run);
void fb_policy_vars_clear (FbPolicyVarsStorage *storage);
/* TEXT for a policy's path, glob or source: "$" doubled, so that expanding
 * the variables gives TEXT back (a literal "$" from elsewhere, e.g. Codex). */
char *fb_policy_vars_escape (const char *text);

typedef enum
{
  FB_POLICY_RULE_PATH,      /* a literal "path" rule from the policy */
  FB_POLICY_RULE_GLOB,      /* a "glob" rule from the policy */
  FB_POLICY_RULE_PROTECTED, /* a protected name (synthetic) */
  FB_POLICY_RULE_DEFAULT,   /* nothing matched (synthetic; access hide) */
  FB_POLICY_RULE_FUSEBOX,   /* a refusal of fusebox's own, whatever the policy (synthetic, made by fs/) */
} FbPolicyRuleKind;
#define FB_POLICY_RULE_KIND_N (FB_POLICY_RULE_FUSEBOX + 1) /* one past the last value */

typedef struct
{
  const char *name; /* `policy explain --json`'s "kind"; the log's and the API's "rule" unless numbered */
  bool numbered;    /* a rule of the policy's "rules": the log and the API name it by its index */
} FbPolicyRuleKindInfo;

/* fb_policy_rule_kind_info: a value outside the enum gets the default
 * rule's row. */
FB_DECLARE_INFO_TABLE (fb_policy_rule_kind, FbPolicyRuleKind, FbPolicyRuleKindInfo, fb_policy_rule_kind_table,
                       FB_POLICY_RULE_KIND_N, FB_POLICY_RULE_DEFAULT)

typedef struct
{
  FbPolicyRuleKind kind;
  int index;          /* position in "rules" (0-based); -1 for synthetic rules */
  const char *origin; /* for people: "FILE:LINE:COL" of the rule, "builtin:NAME:rules[3]",
                       * "protected_names[.git]", "default" or "fusebox:no-chown" */
  const char *path;   /* expanded view path (PATH rules), NULL otherwise */
  const char *glob;   /* expanded pattern (GLOB rules), the name (PROTECTED), else NULL */
  FbPolicyAccess access;
  const char *why;    /* never NULL */
  const char *source; /* NULL, "private", or an absolute host path (PATH rules only) */
  /* Where the source is, to prefix a message about it as load errors are
   * prefixed: "FILE:LINE:COL: rules[3].source" (NULL without a source). */
  const char *source_at;
} FbPolicyRule;

/* How the access log and the remote API name RULE: its index in "rules"
 * (written into BUF) for a numbered kind, else its kind's name. */
const char *fb_policy_rule_name (const FbPolicyRule *rule, char buf[16]);

/* A mapping from a view subtree to a host directory.  Mount 0 is always the
 * root: view "/" shows host "/" (or the root rule's source).  The host path of
 * view path V below a mount M is M.host_path + (V - M.view_path). */
typedef struct
{
  guint id;              /* index in fb_policy_get_mounts() */
  const char *view_path; /* where the mapping starts in the view */
  const char *host_path; /* the host directory shown there; for private
                          * sources ${RUN}/private/<escaped view path>, or NULL
                          * when the policy was loaded without ${RUN} */
  bool is_private;       /* source "private": the run must create host_path (0700) */
  const FbPolicyRule *rule;
} FbPolicyMount;

typedef struct
{
  FbPolicyAccess access;      /* the effective access of this exact path */
  const FbPolicyRule *rule;   /* the deciding rule; never NULL */
  bool traversable;           /* access is hide or deny, but a visible path lies below:
                               * the directory may be entered and lists only
                               * fb_policy_decision_reachable_children() */
  bool is_mount_point;        /* mount->view_path is exactly this path */
  const FbPolicyMount *mount; /* the mapping in force; never NULL */
  /* Names of children that exist in the view whatever the host holds: mount
   * points and directories leading to one (NULL-terminated, owned by the
   * policy, never NULL). */
  const char *const *mounted_children;
  /* For traversable decisions: the only children that may be listed or looked
   * up (NULL-terminated, owned by the policy, never NULL). */
  const char *const *reachable_children;

  /* private to the policy: the matching trie node or NULL below it; depth */
  const void *priv_node;
  guint priv_depth;
  /* private to a narrowed policy (fb_policy_narrow): the other side's rule */
  const void *priv_other;
} FbPolicyDecision;

typedef struct FbPolicy FbPolicy;

FbPolicy *fb_policy_ref (FbPolicy *policy);
void fb_policy_unref (FbPolicy *policy);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbPolicy, fb_policy_unref)

/* Load and validate.  Errors are FB_POLICY_ERROR, and their message reads
 * "FILE:LINE:COL: FIELD: what is wrong; what would be valid". */
FbPolicy *fb_policy_load_file (const char *path, const FbPolicyVars *vars, GError **error);
/* origin names the data in messages (a file name, "builtin:default", "<sandbox>") */
FbPolicy *fb_policy_load_data (const char *data, gssize len, const char *origin, const FbPolicyVars *vars,
                               GError **error);
/* A parsed JSON object in the policy format (positions are not known: messages
 * name the JSON path of the field instead of line:column). */
FbPolicy *fb_policy_load_json (JsonNode *root, const char *origin, const FbPolicyVars *vars, GError **error);
/* "builtin:NAME" or a file path */
FbPolicy *fb_policy_load_spec (const char *spec, const FbPolicyVars *vars, GError **error);

/* Built-ins: "default", "read-only", "host", "agent".  Their JSON depends on vars (for
 * root, HOME is /root, which the default otherwise hides), so it is generated. */
const char *const *fb_policy_builtin_names (void);
/* JSON text of a built-in for these vars, or NULL with FB_POLICY_ERROR_NOT_FOUND */
char *fb_policy_builtin_json (const char *name, const FbPolicyVars *vars, GError **error);

FbPolicyNetwork fb_policy_get_network (const FbPolicy *policy);

/* The policy's "log" section: the access log's budget, and its outputs.
 * 0 = not set (the command's default applies; fusebox(1) lists them).  A
 * narrowed policy has its base's. */
typedef struct
{
  guint64 file_size; /* rotate the live file past this many bytes */
  guint64 max_size;  /* all of the log's files together: past it the run is stopped */
  bool journal;      /* every record to the systemd journal too */
} FbPolicyLogLimits;
void fb_policy_get_log_limits (const FbPolicy *policy, FbPolicyLogLimits *ret_limits);
/* A size as policies and command lines write it: a number of bytes, or a
 * number with K, M or G (powers of 1024; "KiB", "MB"... mean the same),
 * e.g. "256M".  FALSE for anything else, zero and overflow. */
bool fb_policy_parse_size (const char *text, guint64 *ret_bytes);
#define FB_POLICY_LOG_MIN_FILE_SIZE (4 * 1024)
#define FB_POLICY_LOG_MIN_MAX_SIZE (64 * 1024)
const char *fb_policy_get_origin (const FbPolicy *policy);
/* A policy rebuilt from FROM's JSON (fb_policy_to_json, entries added:
 * `run`'s command line and state rules) names its rules by their JSON
 * paths ("ORIGIN:rules[3]"); give each rule and network entry that is
 * FROM's, at the same place and the same, FROM's origin again
 * ("FILE:LINE:COL").  Before POLICY is shared. */
void fb_policy_keep_origins (FbPolicy *policy, const FbPolicy *from);
const FbPolicyRule *fb_policy_get_rules (const FbPolicy *policy, guint *ret_n);
const FbPolicyMount *fb_policy_get_mounts (const FbPolicy *policy, guint *ret_n);
/* The effective policy as JSON in the policy format, variables expanded (for
 * the run directory and `fusebox policy show`). */
char *fb_policy_to_json (const FbPolicy *policy);

/* Decide a view path: absolute, normalized (no "//", ".", ".." or trailing
 * "/", except "/" itself).  Never fails: a malformed path decides hide. */
void fb_policy_decide (const FbPolicy *policy, const char *view_path, FbPolicyDecision *ret);
/* Decide NAME inside the directory PARENT_PATH already decided as PARENT,
 * without re-walking the path.  NAME must be one component (no "/", not "."
 * or ".."); otherwise the result is hide. */
void fb_policy_decide_child (const FbPolicy *policy, const FbPolicyDecision *parent, const char *parent_path,
                             const char *name, FbPolicyDecision *ret);
/* True when some rule could decide a path strictly below VIEW_PATH (decided
 * as DECISION) differently from VIEW_PATH itself, or differently once
 * VIEW_PATH has another name: a literal rule below it, a glob anchored at
 * or through it, or a glob led by "**" whose parts after the "**" can match
 * one of VIEW_PATH's components and then reach below ("**" + "/secrets/" +
 * "**" at ".../secrets", "**" + "/.aws/credentials" at ".../.aws").
 * Renaming such a directory, or one to such a path, could carry a path out
 * of its rule's reach or into another's, so the view refuses both; without
 * any, every path below is decided alike at the old and the new place.
 * What a glob led by "**" matches wholly below VIEW_PATH ("*.pem", "**" +
 * "/x", "**" + "/secrets/key" below ".../proj") and protected names do not
 * count: they follow the file. */
bool fb_policy_subtree_has_rules (const FbPolicy *policy, const FbPolicyDecision *decision, const char *view_path);
/* Directories whose host folds names (vfat, exfat, SMB, ext4/f2fs/tmpfs
 * casefold, case-insensitive FUSE or network filesystems): the host resolves
 * every spelling that folds equal to an entry's to that entry.  NAME's fold
 * key (allocated): what any such host could take for the same name, and
 * more (policy-fold.c). */
char *fb_policy_fold_name (const char *name);
/* fb_policy_decide_child for a directory whose host folds names (or may):
 * the narrower of NAME's decision and those of every literal component,
 * protected name and (folded) glob that folds equal to it; NAME is denied as
 * a whole when another spelling has rules below it.  CERTAIN: the host is
 * known to fold here, so a name that differs from one literal component by
 * ASCII case alone is decided as that component (its rules below follow). */
void fb_policy_decide_child_folded (const FbPolicy *policy, const FbPolicyDecision *parent, const char *parent_path,
                                    const char *name, bool certain, FbPolicyDecision *ret);
/* fb_policy_subtree_has_rules, with globs matched folded as well. */
bool fb_policy_subtree_has_rules_folded (const FbPolicy *policy, const FbPolicyDecision *decision,
                                         const char *view_path);
/* Is NAME protected?  Then *ret_access (may be NULL) is its protected access. */
bool fb_policy_is_protected_name (const FbPolicy *policy, const char *name, FbPolicyAccess *ret_access);

/* A policy whose every decision is the narrower (fb_policy_access_narrow) of
 * BASE's and NARROW's for the same view path: how the remote API applies a
 * call's `sandbox` on top of the server's policy (it can only narrow).
 * Mounts and sources are BASE's (NARROW giving a `source` is an error: a
 * call can't remap host paths); network is the narrower of the two
 * (allowlists intersect: a host must be allowed by both);
 * protected names are the union, each with the narrower access.  The
 * deciding rule is the more restrictive side's (BASE's on a tie).  A
 * directory is traversable when the combined access is hide or deny and a
 * path visible under both lies below it; reachable_children and
 * mounted_children follow.  fb_policy_decide_child works on the result as on
 * any policy (the decision carries both sides' state). */
FbPolicy *fb_policy_narrow (FbPolicy *base, FbPolicy *narrow, GError **error);

/* Narrowing: the decision of NARROW applied on top of BASE can only be as
 * permissive as both: the access of higher restrictiveness (A on a tie).
 * Used by the remote API (a call's sandbox narrows the server's policy)
 * and by protected names.  Most restrictive first: hide, deny, read, write. */
FbPolicyAccess fb_policy_access_narrow (FbPolicyAccess a, FbPolicyAccess b);

G_END_DECLS

#include "policy/policy-net.h"
