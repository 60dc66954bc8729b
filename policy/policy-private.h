/* fusebox — the policy engine's internals, shared by policy/policy-*.c and
 * the unit tests (which test the glob matcher and the position index through
 * these seams).  Nothing here is a contract for other modules.
 *
 * Layout of a loaded policy:
 *  - rules[]: the validated rules, strings expanded and owned by `strings`;
 *  - a trie of the literal paths (PolicyNode), one node per path component,
 *    annotated at load time with everything a decision needs (best literal
 *    rule, mount, reachable and mounted children), so that a decision is a
 *    walk down the trie plus a few hash probes for globs and protected names;
 *  - globs indexed by their last component (FbGlobIndex) so that a decision
 *    tests only the globs that can match the name at hand.
 */
#pragma once

#include "policy/policy.h"

#include <stdint.h>
#include <string.h>

G_BEGIN_DECLS

/* Bounds on what a policy can make us allocate (documented in
 * fusebox-policy(5)). */
#define FB_POLICY_MAX_SIZE (8 * 1024 * 1024) /* bytes of policy text */
#define FB_POLICY_MAX_JSON_DEPTH 32          /* nesting of arrays and objects */

/* ---- Name maps: open addressing keyed by (bytes, length) ----------------
 *
 * Decisions look names up inside a longer path without copying them, so the
 * maps take a length and a precomputed hash (one FNV-1a per component serves
 * every map).  Keys are borrowed: they live in the policy's string chunk. */
typedef struct
{
  const char *key;
  guint32 len;
  guint32 hash;
  gpointer value;
} FbNameEntry;

typedef struct
{
  FbNameEntry *entries; /* NULL while empty */
  guint32 mask;
  guint32 n;
} FbNameMap;

static inline guint32
fb_name_hash (const char *s, gsize len)
{
  guint32 h = 2166136261u;

  for (gsize i = 0; i < len; i++)
    {
      h ^= (guchar)s[i];
      h *= 16777619u;
    }
  return h;
}

static inline gpointer
fb_name_map_lookup (const FbNameMap *map, const char *key, gsize len, guint32 hash)
{
  if (map->entries == NULL)
    return NULL;
  for (guint32 i = hash & map->mask;; i = (i + 1) & map->mask)
    {
      const FbNameEntry *e = &map->entries[i];

      if (e->key == NULL)
        return NULL;
      if (e->hash == hash && e->len == len && memcmp (e->key, key, len) == 0)
        return e->value;
    }
}

/* Inserts or replaces; returns the previous value. */
gpointer fb_name_map_insert (FbNameMap *map, const char *key, gsize len, gpointer value);
void fb_name_map_clear (FbNameMap *map);

/* The children a decision names (reachable_children, mounted_children):
 * NULL-terminated, the names borrowed from the tree.  None is the one
 * shared empty list; fb_policy_names_new copies the pointers of NAMES (or
 * gives that list), fb_policy_names_free frees what it made. */
extern const char *const fb_policy_no_names[];
const char **fb_policy_names_new (GPtrArray *names);
void fb_policy_names_free (const char **names);

/* ---- Paths and variables (policy-vars.c) -------------------------------- */

/* One component of a view path, borrowed from the path string. */
typedef struct
{
  const char *s;
  guint32 len;
} FbPathComp;

/* Is PATH absolute and normalized (no "//", ".", "..", trailing "/")? */
bool fb_policy_path_is_normalized (const char *path);
/* The normalized form of an absolute path ("//" and "." folded, trailing "/"
 * dropped); NULL when it is relative or has a ".." component. */
char *fb_policy_path_normalize (const char *path);
/* Is ANCESTOR equal to PATH or one of its ancestors?  Both normalized. */
bool fb_policy_path_has_prefix (const char *path, const char *ancestor);
/* Split a normalized absolute path; returns the number of components, up to
 * max (the rest is not stored, the count still is). */
guint fb_policy_path_split (const char *path, FbPathComp *comps, guint max);

typedef enum
{
  FB_EXPAND_PATH, /* path or source: values are substituted as they are */
  FB_EXPAND_GLOB, /* glob: glob metacharacters of values are escaped */
} FbExpandMode;

/* Expand ${WORKSPACE} ${HOME} ${CWD} ${RUN} and "$$".  NULL with a message
 * (without position) when a variable is unknown or unavailable. */
char *fb_policy_vars_expand (const char *text, const FbPolicyVars *vars, FbExpandMode mode, char **ret_message);

/* ---- Globs (policy-glob.c) ---------------------------------------------- */

typedef struct
{
  bool doublestar; /* "**": any number of components */
  bool literal;    /* no metacharacter: `text` is the unescaped name */
  guint32 len;     /* of text */
  char *text;      /* the component pattern (escapes kept unless literal) */
  /* Cheap rejections before matching a pattern: the bytes a matching name
   * may start with (when first_any is false) and the byte it must end with
   * (when has_last). */
  bool first_any;
  bool has_last;
  guchar last;
  guint32 first_set[8];
} FbGlobPart;

typedef struct
{
  char *pattern; /* as written (after variable expansion) */
  FbGlobPart *parts;
  guint n_parts;
  guint min_depth; /* components a matching path has at least */
  guint max_depth; /* ... at most; G_MAXUINT with "**" */
  bool floating;   /* starts with "**": matches at any depth */
  bool name_only;  /* "**" + "/X" with one component X: only the last name matters */
} FbGlob;

/* NULL with a message naming the problem and its byte offset in PATTERN. */
FbGlob *fb_policy_glob_compile (const char *pattern, char **ret_message);
void fb_policy_glob_free (FbGlob *glob);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbGlob, fb_policy_glob_free)
bool fb_policy_glob_match (const FbGlob *glob, const FbPathComp *comps, guint n);
/* For name_only globs: does the last component NAME match? */
bool fb_policy_glob_match_name (const FbGlob *glob, const char *name, guint32 len);
/* Convenience for tests: match a normalized absolute path ("/" never matches). */
bool fb_policy_glob_match_path (const FbGlob *glob, const char *path);
/* Could a path strictly below COMPS match? */
bool fb_policy_glob_could_match_below (const FbGlob *glob, const FbPathComp *comps, guint n);
/* Could a path strictly below COMPS match with a part of GLOB other than a
 * leading "**" on a component of COMPS?  Then renaming COMPS can change that
 * path's match.  Every part of an anchored glob counts; a floating glob's
 * match that lies wholly below COMPS follows the renamed directory ("**"
 * + "/secrets/key" below a "proj" does; below ".../secrets" it does not). */
bool fb_policy_glob_could_match_through (const FbGlob *glob, const FbPathComp *comps, guint n);
/* GLOB with every literal character folded as fb_policy_fold_name folds
 * names (a "[...]" only lowers ASCII letters), for matching folded paths
 * (policy-fold.c). */
FbGlob *fb_policy_glob_fold (const FbGlob *glob);

typedef struct
{
  const FbGlob *glob;
  const FbPolicyRule *rule;
} FbGlobEntry;

/* Globs grouped by the kind of their last component. */
typedef struct
{
  FbNameMap by_name;      /* literal last component → GPtrArray of FbGlobEntry */
  FbNameMap by_extension; /* "*.EXT" → GPtrArray of FbGlobEntry, keyed by EXT */
  GPtrArray *other;       /* everything else, tested at every depth */
  GPtrArray *all;         /* owns the entries */
  GPtrArray *lists;       /* owns the lists the maps point to */
  guint n_extension_dots; /* most dots in an indexed EXT (bounds the probes) */
} FbGlobIndex;

void fb_policy_glob_index_init (FbGlobIndex *index);
void fb_policy_glob_index_add (FbGlobIndex *index, const FbGlob *glob, const FbPolicyRule *rule);
void fb_policy_glob_index_clear (FbGlobIndex *index);

/* ---- The position index (policy-pos.c) ---------------------------------- */

/* Where each value and key of a JSON text starts, keyed by its JSON path:
 * "" is the top level, members "network" or "rules[3].access", arrays
 * "rules[3]"; a key that is not an identifier is written in brackets
 * ("protected_names[.git]").  Lines and columns count from 1; columns count
 * characters (UTF-8 code points), a tab is one. */
typedef struct FbPolicyPosIndex FbPolicyPosIndex;

typedef struct
{
  guint line;
  guint col;
} FbPolicyPos;

/* Tokenizes TEXT strictly (RFC 8259, UTF-8, no NUL, no duplicate keys, depth
 * at most FB_POLICY_MAX_JSON_DEPTH).  On failure returns NULL and the error's
 * message starts with "ORIGIN:LINE:COL: ". */
FbPolicyPosIndex *fb_policy_pos_index_build (const char *text, gsize len, const char *origin, GError **error);
void fb_policy_pos_index_free (FbPolicyPosIndex *index);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FbPolicyPosIndex, fb_policy_pos_index_free)
bool fb_policy_pos_index_lookup (const FbPolicyPosIndex *index, const char *json_path, bool key, FbPolicyPos *ret);
/* The JSON path of member KEY of PARENT, as the index spells it. */
char *fb_policy_json_path_member (const char *parent, const char *key);

/* ---- The loaded policy -------------------------------------------------- */

typedef struct PolicyNode PolicyNode;
struct PolicyNode
{
  const char *name; /* component ("" for the root) */
  const char *path; /* the whole view path */
  guint32 name_len;
  guint depth;
  PolicyNode *parent;
  FbNameMap children;              /* name → PolicyNode */
  GPtrArray *child_list;           /* sorted by name, for deterministic mount order */
  const FbPolicyRule *literal;     /* best literal rule at exactly this path */
  const FbPolicyRule *source_rule; /* the rule giving this path a source */
  const FbPolicyMount *mount;      /* the mapping that starts here, or NULL */
  bool visible_below;              /* a literal with a visible access strictly below */
  bool literal_below;              /* any literal rule strictly below */
  bool mount_below;                /* a mount point strictly below */
  const char **reachable;          /* NULL-terminated, children leading to a visible literal */
  const char **mounted;            /* NULL-terminated, children leading to a mount point */
};

struct FbPolicy
{
  char *origin;
  FbPolicyNetwork network;
  /* network.allow's entries, then network.deny's (policy-net.c); each
   * rule's ports are its own allocation, its strings in `strings` */
  FbPolicyNetRule *net_rules;
  guint n_net_rules;
  FbPolicyLogLimits log; /* the "log" section; zeros when absent */
  const char *run;       /* ${RUN} at load time (private sources live under it) or NULL */
  GStringChunk *strings; /* every string the rules, mounts and nodes point to */

  FbPolicyRule *rules;
  guint n_rules;
  FbGlob **globs; /* per rule: the compiled glob, NULL for path rules */
  /* per rule: the glob folded (fb_policy_glob_fold) for directories whose
   * host folds names, NULL for path rules; made by fb_policy_compile */
  FbGlob **fold_globs;

  FbPolicyRule *protected_rules;
  guint n_protected;
  FbNameMap protected_map; /* name → FbPolicyRule in protected_rules */

  FbPolicyRule default_rule;   /* nothing matched */
  FbPolicyRule malformed_rule; /* the path asked about is not a view path */
  FbPolicyRule fold_rule;      /* a folded name whose spellings' rules can't be told apart (policy-fold.c) */

  PolicyNode *root;
  GPtrArray *nodes; /* owns every PolicyNode */
  GArray *mounts;   /* FbPolicyMount */
  FbGlobIndex glob_index;

  /* A narrowed policy (fb_policy_narrow) decides with its two sides and owns
   * none of the fields above but origin, network, strings and protected_map
   * (the union of both sides' protected names). */
  FbPolicy *base;
  FbPolicy *narrow;
  struct NarrowNode *nroot;
  GPtrArray *nnodes; /* owns every NarrowNode */
};

/* ---- Deciding, step by step (policy-match.c; policy-narrow.c combines two
 * policies with the same steps) ------------------------------------------ */

/* The components of the path being decided, produced only when a glob needs
 * them (decide_child has only the parent's path string). */
typedef struct
{
  const FbPathComp *comps; /* set when known */
  guint n;
  const char *parent_path; /* else built from these */
  const char *name;
  guint32 name_len;
  FbPathComp *buf; /* caller's uninitialized buffer of buf_len (zeroing it would cost more than a decision) */
  guint buf_len;
  FbPathComp *heap;
} FbPolicyComps;

void fb_policy_decide_root (const FbPolicy *policy, FbPolicyDecision *ret);
void fb_policy_decide_malformed (const FbPolicy *policy, const FbPolicyMount *mount, guint depth,
                                 FbPolicyDecision *ret);
/* One component: NAME (LEN bytes) below PARENT, a decision of POLICY.  RET
 * may alias PARENT.  The caller frees comps->heap. */
void fb_policy_step (const FbPolicy *policy, const FbPolicyDecision *parent, const char *name, guint32 len,
                     FbPolicyComps *comps, FbPolicyDecision *ret);
/* Split VIEW_PATH while checking that it is normalized. */
bool fb_policy_split_normalized (const char *view_path, FbPathComp *comps, guint max, guint *ret_n);
bool fb_policy_subtree_has_rules_at (const FbPolicy *policy, const PolicyNode *node, const char *view_path);

/* policy-narrow.c: the queries of a narrowed policy (policy->narrow != NULL) */
void fb_policy_narrowed_decide (const FbPolicy *policy, const char *view_path, FbPolicyDecision *ret);
void fb_policy_narrowed_decide_child (const FbPolicy *policy, const FbPolicyDecision *parent, const char *parent_path,
                                      const char *name, FbPolicyDecision *ret);
bool fb_policy_narrowed_subtree_has_rules (const FbPolicy *policy, const FbPolicyDecision *decision,
                                           const char *view_path);
void fb_policy_narrowed_clear (FbPolicy *policy);
char *fb_policy_narrowed_to_json (const FbPolicy *policy);

/* ---- Hosts that fold names (policy-fold.c) ------------------------------- */

/* Append S (LEN bytes) to OUT folded, without dropping trailing dots and
 * spaces; fb_policy_fold_strip_tail drops those after OUT[FROM]. */
void fb_policy_fold_append (GString *out, const char *s, gsize len);
void fb_policy_fold_strip_tail (GString *s, gsize from);
/* The literal components the policy knows right below decision D (borrowed
 * names, any order); none below a path the trie does not reach. */
void fb_policy_literal_children (const FbPolicy *policy, const FbPolicyDecision *d, GPtrArray *names);
/* Narrow D to RULE's access (and RULE as the deciding rule) when that is
 * narrower; traversal follows the new access. */
void fb_policy_restrict (const FbPolicy *policy, FbPolicyDecision *d, const FbPolicyRule *rule);
/* D can't follow one subtree of rules: deny it (fold_rule) unless it is
 * hidden, as a whole, with nothing below it reachable. */
void fb_policy_close_folded (const FbPolicy *policy, FbPolicyDecision *d);
/* policy-narrow.c: the same three for a narrowed policy */
void fb_policy_narrowed_literal_children (const FbPolicy *policy, const FbPolicyDecision *d, GPtrArray *names);
void fb_policy_narrowed_restrict (const FbPolicy *policy, FbPolicyDecision *d, const FbPolicyRule *rule);
void fb_policy_narrowed_close_folded (const FbPolicy *policy, FbPolicyDecision *d);

/* policy-match.c: build the trie, the mounts and the glob index of a policy
 * whose rules are validated.  Fails (FB_POLICY_ERROR_DUPLICATE) only on two
 * sources for one path, which the loader checks first. */
bool fb_policy_compile (FbPolicy *policy, GError **error);
void fb_policy_compiled_clear (FbPolicy *policy);

/* policy-load.c: a policy with no rules yet (the loader and tests fill it). */
FbPolicy *fb_policy_new_empty (const char *origin);

/* ---- Loading, shared by policy-load.c and policy-net.c ---------------------- */

typedef struct
{
  const char *origin; /* NULL when the JsonNode came without a name */
  const FbPolicyPosIndex *index;
  bool builtin; /* no positions: fields are named by their JSON path */
  GError **error;
} FbPolicyLoadCtx;

/* Set CTX's error to "ORIGIN:LINE:COL: FIELD_PATH: message", the position
 * that of POS_PATH's value (or key, AT_KEY); returns false. */
bool fb_policy_load_fail (const FbPolicyLoadCtx *ctx, FbPolicyError code, const char *field_path, const char *pos_path,
                          bool at_key, const char *format, ...) G_GNUC_PRINTF (6, 7);
/* Refuse members of OBJECT (at PATH) outside VALID (NULL-terminated). */
bool fb_policy_load_check_keys (const FbPolicyLoadCtx *ctx, JsonObject *object, const char *path,
                                const char *const *valid);
/* "a string", "an array"...: for messages. */
const char *fb_policy_load_node_type (JsonNode *node);
/* How a rule at JSON path PATH is named for people: "FILE:LINE:COL", or
 * "ORIGIN:PATH" without positions. */
char *fb_policy_load_origin (const FbPolicyLoadCtx *ctx, const char *path);

/* ---- The network allowlist (policy-net.c) ------------------------------------ */

/* Load the "network" member (NODE, NULL when absent) into POLICY. */
bool fb_policy_net_load (const FbPolicyLoadCtx *ctx, FbPolicy *policy, JsonNode *node);
void fb_policy_net_clear (FbPolicy *policy);
/* The "network" member's value, as fb_policy_net_load reads it. */
void fb_policy_net_build_json (const FbPolicy *policy, JsonBuilder *b);
/* An address literal (no brackets, no zone) in the canonical form (IPv4
 * v4-mapped). */
bool fb_policy_net_parse_address (const char *text, guint8 ret[16], bool *ret_v4);
/* Check and normalize a host name of ASCII in place (lower case, the
 * trailing dot dropped): NULL, or what is wrong. */
const char *fb_policy_net_check_name (char *name);
/* NULL, or what is wrong with TEXT as a "cidr" */
char *fb_policy_net_parse_cidr (const char *text, guint8 ret_addr[16], guint *ret_prefix);
char *fb_policy_net_format_cidr (const guint8 addr[16], guint prefix);
/* Does rule A decide over rule B when both match? (the precedence) */
bool fb_policy_net_rule_beats (const FbPolicyNetRule *a, const FbPolicyNetRule *b);

/* policy-builtin.c: the escaped host directory name of a private view path */
char *fb_policy_private_dir_name (const char *view_path);

G_END_DECLS
