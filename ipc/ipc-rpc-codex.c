/* fusebox — the remote API's `sandbox` parameter: Codex's
 * FileSystemSandboxContext translated into our policy format.
 *
 * Codex's exec-server takes a `sandbox` parameter on its fs and process
 * calls: a FileSystemSandboxContext (camelCase) holding a PermissionProfile
 * (snake_case, internally tagged by "type").  This file turns one into a
 * policy object in our format, for fb_policy_load_json(): it reads a wire
 * format, so it lives with the protocol, and only the policy's public
 * interface is asked.  It is pure: no file is opened and nothing on the host
 * is looked at; the only ambient input is $TMPDIR for the `tmpdir` special
 * path.
 *
 * Threat model: the context comes from a client over the network, so every
 * field is validated and anything unknown inside `permissions` (a key, a tag,
 * a kind, an access) is refused with its JSON path.  Codex itself ignores
 * unknown special paths for forward compatibility; we refuse them, because
 * silently dropping a "deny" entry would widen what the client asked for.
 * Unknown members of the context itself are the exception: newer clients add
 * some with every release (Codex 0.171 sends `policyContext`, the cwd and
 * roots it already sends at the top), and refusing them would refuse every
 * call of such a client.  Those are ignored (fb_rpc_codex_ignored_members
 * names them for the caller's debug log); the known ones keep strict types.
 * In the remote API the result only ever narrows the server's own policy,
 * which bounds what an ignored member could have narrowed further.
 *
 * Mapping (Codex → ours), same precedence on both sides: most components
 * wins, then deny > write > read; nothing matching means hide (Codex: no
 * access; its Linux sandbox does not mount such paths at all):
 *  - access read/write → read/write; deny and its legacy alias none → deny.
 *  - special root → "/"; minimal → /bin /sbin /usr /etc /lib /lib64 (read;
 *    a minimal "write" grants read only, as Codex's platform defaults do);
 *    project_roots → each workspaceRoots entry, else cwd, else the caller's
 *    ${CWD}, joined with the optional relative subpath (current_working_
 *    directory is Codex's alias of project_roots); tmpdir → each
 *    temporaryDirectories entry, else $TMPDIR, else /tmp; slash_tmp → /tmp.
 *  - glob_pattern: Codex enforces glob entries only when they deny and
 *    ignores them otherwise; so do we (dropping a grant can only narrow).
 *    A relative pattern is anchored at cwd as Codex does ("*.pem" means
 *    CWD + "/" + "*.pem": Codex's `*` never crosses "/"), "~/" at userHomeDir (else
 *    ${HOME}), and {a,b} alternations, which our globs lack, are expanded.
 *  - managed + unrestricted file system, disabled, external → "/" write with
 *    no protected names (Codex applies no filesystem sandbox then).
 *  - network restricted → none, enabled → host; disabled → host.
 *  - "$" is doubled on output: Codex has no variables, our "${NAME}" does.
 *  - Several entries naming one path merge into one rule with the access
 *    that wins by precedence, so the result never holds duplicates.
 *
 * Agent metadata (.git, .agents, .codex).  Codex keeps ROOT/.git, ROOT/.agents
 * and ROOT/.codex read-only under every writable root ROOT, unless an explicit
 * write entry covers the path in question: a write entry at ROOT/.git makes
 * all of .git writable, one at ROOT/.git/hooks only that subtree.  We express
 * that with a literal read rule at ROOT/NAME wherever the translated policy
 * would otherwise decide write there, and skip it when an entry names
 * ROOT/NAME itself (the explicit rule decides, as in Codex).  Deeper explicit
 * write rules keep winning by specificity.  Codex never hides these names, so
 * protected_names maps all three to "read": readable (git status works) but
 * not writable at any depth, which also covers nested repositories that Codex
 * leaves writable, so we are stricter there.  The names are protected
 * whether or not they exist, so they cannot be created either (older Codex
 * releases protected .git and .agents only when present).  Not translated:
 * Codex also protects the directory a ".git" pointer file names (gitdir:);
 * we read no file, so that directory keeps the access its entries give. */
#include "ipc/ipc-rpc-private.h"
#include "policy/util.h"

#include <stdarg.h>
#include <string.h>

/* Bound on what a hostile context can make us build: alternatives produced
 * by expanding one glob pattern's {a,b} groups. */
#define MAX_BRACE_EXPANSIONS 256

static const char *const minimal_paths[] = { "/bin", "/sbin", "/usr", "/etc", "/lib", "/lib64" };
static const char *const metadata_names[] = { ".git", ".agents", ".codex" };

/* Their strings are the translation's (Translation.strings). */
typedef struct
{
  const char *path;
  FbPolicyAccess access;
  const char *why;
} Rule;

typedef struct
{
  const char *pattern;
  const char *why;
} Glob;

typedef struct
{
  const FbPolicyVars *vars;
  /* from the context */
  char *cwd;          /* absolute, normalized, or NULL */
  GPtrArray *project; /* char*: workspaceRoots, else cwd */
  GPtrArray *tmpdirs; /* char*: temporaryDirectories, or NULL */
  char *home;         /* userHomeDir, or NULL */
  /* the translation */
  FbPolicyNetwork network;
  bool unrestricted;
  GPtrArray *rules;      /* Rule*, in entry order */
  GHashTable *by_path;   /* path → Rule* (borrowed from rules) */
  GPtrArray *globs;      /* Glob* */
  GHashTable *explicit;  /* paths an entry names (set) */
  GStringChunk *strings; /* the rules' and globs' paths, patterns and reasons */
} Translation;

static void
translation_clear (Translation *t)
{
  g_free (t->cwd);
  g_free (t->home);
  g_clear_pointer (&t->project, g_ptr_array_unref);
  g_clear_pointer (&t->tmpdirs, g_ptr_array_unref);
  g_clear_pointer (&t->by_path, g_hash_table_unref);
  g_clear_pointer (&t->rules, g_ptr_array_unref);
  g_clear_pointer (&t->globs, g_ptr_array_unref);
  g_clear_pointer (&t->explicit, g_hash_table_unref);
  g_clear_pointer (&t->strings, g_string_chunk_free);
}

/* ---- JSON paths and helpers: every error names the field ---- */

/* Where a field sits in the context ("sandbox.permissions.file_system.
 * entries[2].access"), as a chain of stack frames: formatted only when an
 * error is raised, so that a valid context costs no string building. */
typedef struct Jp Jp;
struct Jp
{
  const Jp *parent;
  const char *key; /* ".key", or the root's name when parent is NULL */
  int index;       /* "[index]" when key is NULL */
};

#define JP_MEMBER(parent, key) ((Jp){ (parent), (key), -1 })
#define JP_INDEX(parent, i) ((Jp){ (parent), NULL, (int)(i) })

static void
jp_append (GString *out, const Jp *jp)
{
  if (jp->parent != NULL)
    jp_append (out, jp->parent);
  if (jp->key == NULL)
    g_string_append_printf (out, "[%d]", jp->index);
  else
    {
      if (jp->parent != NULL)
        g_string_append_c (out, '.');
      g_string_append (out, jp->key);
    }
}

static char *
jp_format (const Jp *jp)
{
  GString *out = g_string_sized_new (64);

  jp_append (out, jp);
  return g_string_free (out, FALSE);
}

static void set_error (GError **error, int code, const Jp *jp, const char *format, ...) G_GNUC_PRINTF (4, 5);

/* "JSON.PATH: message" */
static void
set_error (GError **error, int code, const Jp *jp, const char *format, ...)
{
  g_autofree char *where = jp_format (jp);
  g_autofree char *what = NULL;
  va_list ap;

  va_start (ap, format);
  what = g_strdup_vprintf (format, ap);
  va_end (ap);
  g_set_error (error, FB_POLICY_ERROR, code, "%s: %s", where, what);
}

static const char *
node_type_name (JsonNode *node)
{
  return fb_json_node_kind (node, "a number");
}

static JsonObject *
want_object (JsonNode *node, const Jp *jp, GError **error)
{
  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    {
      set_error (error, FB_POLICY_ERROR_SCHEMA, jp, "expected an object, found %s", node_type_name (node));
      return NULL;
    }
  return json_node_get_object (node);
}

/* A required member; its absence is an error naming it. */
static JsonNode *
want_member (JsonObject *obj, const Jp *jp, const char *key, GError **error)
{
  JsonNode *node = json_object_get_member (obj, key);

  if (node == NULL)
    {
      Jp field = JP_MEMBER (jp, key);
      set_error (error, FB_POLICY_ERROR_SCHEMA, &field, "missing; this field is required");
    }
  return node;
}

/* Refuse members outside ALLOWED (NULL-terminated): a misspelt key must not
 * be ignored, since it may have been meant to narrow. */
static bool
check_keys (JsonObject *obj, const Jp *jp, const char *const *allowed, GError **error)
{
  JsonObjectIter iter;
  const char *key;

  json_object_iter_init (&iter, obj);
  while (json_object_iter_next (&iter, &key, NULL))
    {
      if (g_strv_contains (allowed, key))
        continue;
      g_autofree char *valid = g_strjoinv (", ", (char **)allowed);
      set_error (error, FB_POLICY_ERROR_SCHEMA, jp, "unknown field \"%s\"; valid: %s", key, valid);
      return false;
    }
  return true;
}

/* A string member; absent or null gives *ret = NULL (error only if required). */
static bool
get_string (JsonObject *obj, const Jp *jp, const char *key, bool required, const char **ret, GError **error)
{
  JsonNode *node = json_object_get_member (obj, key);
  Jp field = JP_MEMBER (jp, key);

  *ret = NULL;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      if (!required)
        return true;
      set_error (error, FB_POLICY_ERROR_SCHEMA, &field, "missing; this field is required");
      return false;
    }
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    {
      set_error (error, FB_POLICY_ERROR_SCHEMA, &field, "expected a string, found %s", node_type_name (node));
      return false;
    }
  *ret = json_node_get_string (node);
  return true;
}

static bool
check_bool (JsonObject *obj, const Jp *jp, const char *key, GError **error)
{
  JsonNode *node = json_object_get_member (obj, key);
  Jp field = JP_MEMBER (jp, key);

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return true;
  if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_BOOLEAN)
    return true;
  set_error (error, FB_POLICY_ERROR_SCHEMA, &field, "expected a boolean, found %s", node_type_name (node));
  return false;
}

/* A string member that must be one of VALID (NULL when absent and optional). */
static bool
get_enum (JsonObject *obj, const Jp *jp, const char *key, bool required, const char *what, const char *const *valid,
          const char **ret, GError **error)
{
  if (!get_string (obj, jp, key, required, ret, error))
    return false;
  if (*ret == NULL || g_strv_contains (valid, *ret))
    return true;
  Jp field = JP_MEMBER (jp, key);
  g_autofree char *list = g_strjoinv (", ", (char **)valid);
  set_error (error, FB_POLICY_ERROR_VALUE, &field, "unknown %s \"%s\"; valid: %s", what, *ret, list);
  return false;
}

/* ---- paths ---- */

/* KEPT's components as an absolute path: "/" when there is none. */
static char *
join_absolute (GPtrArray *kept)
{
  GString *out;

  if (kept->len == 0)
    return g_strdup ("/");
  out = g_string_new (NULL);
  for (guint i = 0; i < kept->len; i++)
    {
      g_string_append_c (out, '/');
      g_string_append (out, kept->pdata[i]);
    }
  return g_string_free (out, FALSE);
}

/* No "//", ".", ".." or trailing "/".  ".." is resolved lexically (as
 * Codex's AbsolutePathBuf and file URIs do); it never climbs above "/". */
char *
fb_rpc_path_normalize (const char *path)
{
  g_auto (GStrv) parts = g_strsplit (path, "/", -1);
  g_autoptr (GPtrArray) kept = g_ptr_array_new ();

  for (guint i = 0; parts[i] != NULL; i++)
    {
      if (parts[i][0] == '\0' || strcmp (parts[i], ".") == 0)
        continue;
      if (strcmp (parts[i], "..") == 0)
        {
          if (kept->len > 0)
            g_ptr_array_remove_index (kept, kept->len - 1);
          continue;
        }
      g_ptr_array_add (kept, parts[i]);
    }
  return join_absolute (kept);
}

/* Our loader refuses paths longer than FB_POLICY_MAX_PATH; refuse them here,
 * where the field can be named.  Takes PATH; returns it or NULL. */
static char *
check_length (char *path, const Jp *jp, GError **error)
{
  if (strlen (path) <= FB_POLICY_MAX_PATH)
    return path;
  set_error (error, FB_POLICY_ERROR_VALUE, jp, "the path is longer than %d bytes", FB_POLICY_MAX_PATH);
  g_free (path);
  return NULL;
}

/* A Codex PathUri ("file:///abs/path", percent-encoded) or, as our API also
 * accepts, a plain absolute path. */
static char *
parse_path (const char *value, const Jp *jp, GError **error)
{
  g_autofree char *raw = NULL;

  if (g_ascii_strncasecmp (value, "file:", 5) == 0)
    {
      g_autofree char *host = NULL;

      /* GLib would keep "?query" as part of the name; in a URI it is not. */
      if (strchr (value, '?') != NULL || strchr (value, '#') != NULL)
        {
          set_error (error, FB_POLICY_ERROR_VALUE, jp,
                     "\"%s\" has a query or fragment; a file URI names a path only (percent-encode '?' and '#' in "
                     "names)",
                     value);
          return NULL;
        }
      raw = g_filename_from_uri (value, &host, NULL);
      if (raw == NULL)
        {
          set_error (error, FB_POLICY_ERROR_VALUE, jp,
                     "\"%s\" is not a valid file URI (bad percent-escape, or an encoded '/' or NUL); expected e.g. "
                     "file:///home/me/project",
                     value);
          return NULL;
        }
      if (host != NULL && g_ascii_strcasecmp (host, "localhost") != 0)
        {
          set_error (error, FB_POLICY_ERROR_VALUE, jp,
                     "\"%s\" names host \"%s\" (a Windows UNC path?); fusebox only sandboxes local paths: use "
                     "file:///PATH",
                     value, host);
          return NULL;
        }
    }
  else if (value[0] == '/')
    raw = g_strdup (value);
  else
    {
      set_error (error, FB_POLICY_ERROR_VALUE, jp,
                 "\"%s\" is neither a file:// URI nor an absolute path; expected e.g. file:///home/me/project", value);
      return NULL;
    }

  /* Codex reads file:///C:/x as a Windows drive path; it names nothing here. */
  if (g_ascii_isalpha (raw[1]) && raw[2] == ':' && (raw[3] == '/' || raw[3] == '\0'))
    {
      set_error (error, FB_POLICY_ERROR_VALUE, jp,
                 "\"%s\" is a Windows drive path; fusebox runs on Linux and needs a POSIX path", value);
      return NULL;
    }
  return check_length (fb_rpc_path_normalize (raw), jp, error);
}

/* Codex joins a project-roots subpath only when it is relative and has no
 * "." or ".." segment, so that a rule can never leave its root. */
static bool
check_subpath (const char *subpath, const Jp *jp, GError **error)
{
  if (subpath[0] == '\0' || subpath[0] == '/')
    {
      set_error (error, FB_POLICY_ERROR_VALUE, jp,
                 "\"%s\" must be a non-empty path relative to the project roots (e.g. \"docs\")", subpath);
      return false;
    }
  g_auto (GStrv) parts = g_strsplit (subpath, "/", -1);
  for (guint i = 0; parts[i] != NULL; i++)
    if (strcmp (parts[i], ".") == 0 || strcmp (parts[i], "..") == 0)
      {
        set_error (error, FB_POLICY_ERROR_VALUE, jp,
                   "\"%s\" has a \"%s\" segment; a subpath must stay inside each project root", subpath, parts[i]);
        return false;
      }
  return true;
}

static char *
join_path (const char *base, const char *rel)
{
  g_autofree char *joined = g_strconcat (base, "/", rel, NULL);
  return fb_rpc_path_normalize (joined);
}

/* ---- building the rule list ---- */

static void
add_rule (Translation *t, const char *path, FbPolicyAccess access, const char *why)
{
  Rule *r = g_hash_table_lookup (t->by_path, path);

  if (r != NULL)
    {
      /* Same path twice: keep what wins at equal specificity (Codex's
       * tie-break at one path is ours: deny beats write beats read), so the
       * merge decides exactly as the two rules would have. */
      if (fb_policy_access_precedence (access) > fb_policy_access_precedence (r->access))
        {
          r->access = access;
          r->why = g_string_chunk_insert_const (t->strings, why);
        }
      return;
    }
  r = g_new0 (Rule, 1);
  r->path = g_string_chunk_insert (t->strings, path);
  r->access = access;
  r->why = g_string_chunk_insert_const (t->strings, why);
  g_ptr_array_add (t->rules, r);
  g_hash_table_insert (t->by_path, (char *)r->path, r);
}

static void
add_glob (Translation *t, const char *pattern, const char *why)
{
  for (guint i = 0; i < t->globs->len; i++)
    if (strcmp (((Glob *)t->globs->pdata[i])->pattern, pattern) == 0)
      return;
  Glob *g = g_new0 (Glob, 1);
  g->pattern = g_string_chunk_insert (t->strings, pattern);
  g->why = g_string_chunk_insert_const (t->strings, why);
  g_ptr_array_add (t->globs, g);
}

/* Expand the first top-level {a,b,...} group of PATTERN (globset syntax,
 * where "\" escapes), recursively, into OUT.  Returns false past the bound. */
static bool
expand_braces (const char *pattern, GPtrArray *out)
{
  const char *open = NULL, *close = NULL;
  int depth = 0;

  for (const char *p = pattern; *p != '\0'; p++)
    {
      if (*p == '\\' && p[1] != '\0')
        {
          p++;
          continue;
        }
      if (*p == '{')
        {
          if (depth++ == 0)
            open = p;
        }
      else if (*p == '}' && depth > 0)
        {
          if (--depth == 0)
            {
              close = p;
              break;
            }
        }
    }
  if (open == NULL || close == NULL)
    {
      if (out->len >= MAX_BRACE_EXPANSIONS)
        return false;
      g_ptr_array_add (out, g_strdup (pattern));
      return true;
    }

  g_autofree char *prefix = g_strndup (pattern, open - pattern);
  const char *suffix = close + 1;
  const char *start = open + 1;
  depth = 0;
  for (const char *p = open + 1; p <= close; p++)
    {
      if (*p == '\\' && p < close - 1)
        {
          p++;
          continue;
        }
      if (*p == '{')
        depth++;
      else if (*p == '}' && depth > 0 && p != close)
        depth--;
      else if ((*p == ',' && depth == 0) || p == close)
        {
          g_autofree char *alt = g_strndup (start, p - start);
          g_autofree char *next = g_strconcat (prefix, alt, suffix, NULL);
          if (!expand_braces (next, out))
            return false;
          start = p + 1;
        }
    }
  return true;
}

static bool
parse_access (JsonObject *entry, const Jp *jp, FbPolicyAccess *ret, const char **ret_name, GError **error)
{
  static const char *const valid[] = { "read", "write", "deny", "none", NULL };
  const char *access;

  if (!get_enum (entry, jp, "access", true, "access", valid, &access, error))
    return false;
  if (strcmp (access, "read") == 0)
    *ret = FB_POLICY_ACCESS_READ;
  else if (strcmp (access, "write") == 0)
    *ret = FB_POLICY_ACCESS_WRITE;
  else
    *ret = FB_POLICY_ACCESS_DENY; /* "none" is Codex's legacy spelling of deny */
  *ret_name = access;
  return true;
}

static bool
need_cwd (Translation *t, const Jp *jp, const char *what, GError **error)
{
  if (t->cwd != NULL)
    return true;
  set_error (error, FB_POLICY_ERROR_VALUE, jp,
             "%s needs a working directory, but the context has no \"cwd\" and none is known here; add \"cwd\": "
             "\"file:///PATH\"",
             what);
  return false;
}

/* ENTRY_AT names the entry in each rule's why ("from sandbox....entries[3]"). */
static bool
translate_special (Translation *t, JsonObject *value, const Jp *jp, FbPolicyAccess access, const char *access_name,
                   const char *entry_at, GError **error)
{
  static const char *const kinds[] = { "root",      "minimal", "project_roots", "current_working_directory", "tmpdir",
                                       "slash_tmp", NULL };
  static const char *const kind_only[] = { "kind", NULL };
  static const char *const with_subpath[] = { "kind", "subpath", NULL };
  const char *kind;
  Jp kind_jp = JP_MEMBER (jp, "kind");

  if (!get_enum (value, jp, "kind", true, "special path kind", kinds, &kind, error))
    return false;

  if (strcmp (kind, "project_roots") == 0 || strcmp (kind, "current_working_directory") == 0)
    {
      const char *subpath;
      Jp sub_jp = JP_MEMBER (jp, "subpath");
      if (!check_keys (value, jp, with_subpath, error) || !get_string (value, jp, "subpath", false, &subpath, error))
        return false;
      if (subpath != NULL && !check_subpath (subpath, &sub_jp, error))
        return false;
      if (t->project->len == 0 && !need_cwd (t, &kind_jp, "project_roots", error))
        return false;
      g_autofree char *why =
        subpath != NULL
          ? g_strdup_printf ("codex: special project_roots subpath %s (%s), from %s", subpath, access_name, entry_at)
          : g_strdup_printf ("codex: special project_roots (%s), from %s", access_name, entry_at);
      for (guint i = 0; i < t->project->len; i++)
        {
          const char *root = t->project->pdata[i];
          g_autofree char *path = subpath != NULL ? join_path (root, subpath) : g_strdup (root);
          if ((path = check_length (g_steal_pointer (&path), &sub_jp, error)) == NULL)
            return false;
          add_rule (t, path, access, why);
          g_hash_table_add (t->explicit, g_steal_pointer (&path));
        }
      return true;
    }

  if (!check_keys (value, jp, kind_only, error))
    return false;
  g_autofree char *why = g_strdup_printf ("codex: special %s (%s), from %s", kind, access_name, entry_at);

  if (strcmp (kind, "root") == 0)
    {
      add_rule (t, "/", access, why);
      g_hash_table_add (t->explicit, g_strdup ("/"));
    }
  else if (strcmp (kind, "minimal") == 0)
    {
      /* Codex's platform defaults are read-only whatever the entry says; a
       * deny is kept as a deny (Codex drops it, but honouring it narrows). */
      FbPolicyAccess a = access == FB_POLICY_ACCESS_DENY ? FB_POLICY_ACCESS_DENY : FB_POLICY_ACCESS_READ;
      for (guint i = 0; i < G_N_ELEMENTS (minimal_paths); i++)
        {
          add_rule (t, minimal_paths[i], a, why);
          g_hash_table_add (t->explicit, g_strdup (minimal_paths[i]));
        }
    }
  else if (strcmp (kind, "tmpdir") == 0)
    {
      if (t->tmpdirs != NULL && t->tmpdirs->len > 0)
        for (guint i = 0; i < t->tmpdirs->len; i++)
          {
            add_rule (t, t->tmpdirs->pdata[i], access, why);
            g_hash_table_add (t->explicit, g_strdup (t->tmpdirs->pdata[i]));
          }
      else
        {
          const char *env = g_getenv ("TMPDIR");
          g_autofree char *dir = env != NULL && env[0] == '/' ? fb_rpc_path_normalize (env) : g_strdup ("/tmp");
          add_rule (t, dir, access, why);
          g_hash_table_add (t->explicit, g_steal_pointer (&dir));
        }
    }
  else /* slash_tmp */
    {
      add_rule (t, "/tmp", access, why);
      g_hash_table_add (t->explicit, g_strdup ("/tmp"));
    }
  return true;
}

/* Codex compiles globs with globset (literal separator, unclosed "[" kept
 * literal, "\\" escaping); our globs are stricter about spelling.  Rewrite
 * the few constructs that differ so that the pattern matches what Codex
 * matches: "."/".."/empty components folded as Codex folds the anchored
 * pattern, "**" inside a name (globset reads it as "*") made "*", and an
 * unclosed "[" escaped. */
static char *
codex_glob_to_ours (const char *anchored)
{
  g_auto (GStrv) parts = g_strsplit (anchored, "/", -1);
  g_autoptr (GPtrArray) kept = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; parts[i] != NULL; i++)
    {
      const char *c = parts[i];
      gsize n = strlen (c);

      if (n == 0 || strcmp (c, ".") == 0)
        continue;
      if (strcmp (c, "..") == 0)
        {
          if (kept->len > 0)
            g_ptr_array_remove_index (kept, kept->len - 1);
          continue;
        }
      if (strcmp (c, "**") == 0)
        {
          g_ptr_array_add (kept, g_strdup (c));
          continue;
        }
      GString *out = g_string_sized_new (n + 4);
      for (gsize j = 0; j < n; j++)
        {
          if (c[j] == '\\')
            {
              if (j + 1 < n)
                g_string_append_len (out, c + j++, 2);
              else
                g_string_append (out, "\\\\"); /* a trailing "\\" is a literal backslash */
            }
          else if (c[j] == '*')
            {
              g_string_append_c (out, '*');
              while (j + 1 < n && c[j + 1] == '*')
                j++;
            }
          else if (c[j] == '[')
            {
              gsize k = j + 1;
              if (k < n && (c[k] == '!' || c[k] == '^'))
                k++;
              if (k < n && c[k] == ']')
                k++;
              while (k < n && c[k] != ']')
                k += (c[k] == '\\' && k + 1 < n) ? 2 : 1;
              if (k >= n)
                g_string_append (out, "\\[");
              else
                {
                  g_string_append_len (out, c + j, k - j + 1);
                  j = k;
                }
            }
          else
            g_string_append_c (out, c[j]);
        }
      g_ptr_array_add (kept, g_string_free (out, FALSE));
    }
  return join_absolute (kept);
}

static bool
translate_glob (Translation *t, const char *pattern, const Jp *jp, FbPolicyAccess access, const char *access_name,
                const char *entry_at, GError **error)
{
  g_autofree char *anchored = NULL;

  if (pattern[0] == '\0')
    {
      set_error (error, FB_POLICY_ERROR_VALUE, jp, "empty glob pattern");
      return false;
    }
  /* Codex matches glob entries only to deny; read or write globs have no
   * effect there, so they have none here (dropping a grant never widens). */
  if (access != FB_POLICY_ACCESS_DENY)
    return true;

  if (pattern[0] == '/')
    anchored = g_strdup (pattern);
  else if (pattern[0] == '~' && (pattern[1] == '/' || pattern[1] == '\0'))
    {
      const char *home = t->home != NULL ? t->home : (t->vars != NULL ? t->vars->home : NULL);
      if (home == NULL)
        {
          set_error (error, FB_POLICY_ERROR_VALUE, jp,
                     "\"%s\" is relative to the home directory, but the context has no \"userHomeDir\" and none is "
                     "known here",
                     pattern);
          return false;
        }
      anchored = g_strconcat (home, strcmp (home, "/") == 0 ? "" : "/", pattern[1] == '/' ? pattern + 2 : "", NULL);
    }
  else
    {
      if (!need_cwd (t, jp, "a relative glob pattern", error))
        return false;
      anchored = g_strconcat (t->cwd, strcmp (t->cwd, "/") == 0 ? "" : "/", pattern, NULL);
    }

  g_autoptr (GPtrArray) alternatives = g_ptr_array_new_with_free_func (g_free);
  if (!expand_braces (anchored, alternatives))
    {
      set_error (error, FB_POLICY_ERROR_VALUE, jp,
                 "\"%s\" expands to more than %d patterns; split it into several "
                 "entries",
                 pattern, MAX_BRACE_EXPANSIONS);
      return false;
    }
  g_autofree char *why = g_strdup_printf ("codex: glob_pattern %s (%s), from %s", pattern, access_name, entry_at);
  for (guint i = 0; i < alternatives->len; i++)
    {
      g_autofree char *ours = check_length (codex_glob_to_ours (alternatives->pdata[i]), jp, error);
      if (ours == NULL)
        return false;
      /* A pattern that folds to "/" names the root itself. */
      if (strcmp (ours, "/") == 0)
        add_rule (t, "/", FB_POLICY_ACCESS_DENY, why);
      else
        add_glob (t, ours, why);
    }
  return true;
}

static bool
translate_entry (Translation *t, JsonNode *node, const Jp *jp, GError **error)
{
  static const char *const entry_keys[] = { "path", "access", "missing_path_behavior", NULL };
  static const char *const path_types[] = { "path", "glob_pattern", "special", NULL };
  static const char *const path_keys[] = { "type", "path", NULL };
  static const char *const glob_keys[] = { "type", "pattern", NULL };
  static const char *const special_keys[] = { "type", "value", NULL };
  static const char *const missing_values[] = { "skip", NULL };
  JsonObject *entry, *path_obj;
  JsonNode *member;
  FbPolicyAccess access;
  const char *access_name, *type, *missing;
  Jp path_jp = JP_MEMBER (jp, "path");

  if ((entry = want_object (node, jp, error)) == NULL || !check_keys (entry, jp, entry_keys, error) ||
      !parse_access (entry, jp, &access, &access_name, error))
    return false;
  /* "skip" tells Codex to drop the entry when the path is missing on the
   * host; a rule for a missing path decides nothing, so keeping it is the
   * same and needs no look at the host. */
  if (!get_enum (entry, jp, "missing_path_behavior", false, "missing_path_behavior", missing_values, &missing, error))
    return false;
  if ((member = want_member (entry, jp, "path", error)) == NULL ||
      (path_obj = want_object (member, &path_jp, error)) == NULL ||
      !get_enum (path_obj, &path_jp, "type", true, "path type", path_types, &type, error))
    return false;

  /* The entry's place, quoted in each rule's why. */
  g_autofree char *entry_at = jp_format (jp);

  if (strcmp (type, "path") == 0)
    {
      const char *value;
      Jp value_jp = JP_MEMBER (&path_jp, "path");
      if (!check_keys (path_obj, &path_jp, path_keys, error) ||
          !get_string (path_obj, &path_jp, "path", true, &value, error))
        return false;
      g_autofree char *path = parse_path (value, &value_jp, error);
      if (path == NULL)
        return false;
      g_autofree char *why = g_strdup_printf ("codex: path (%s), from %s", access_name, entry_at);
      add_rule (t, path, access, why);
      g_hash_table_add (t->explicit, g_steal_pointer (&path));
      return true;
    }
  if (strcmp (type, "glob_pattern") == 0)
    {
      const char *pattern;
      Jp pattern_jp = JP_MEMBER (&path_jp, "pattern");
      if (!check_keys (path_obj, &path_jp, glob_keys, error) ||
          !get_string (path_obj, &path_jp, "pattern", true, &pattern, error))
        return false;
      return translate_glob (t, pattern, &pattern_jp, access, access_name, entry_at, error);
    }

  /* special */
  Jp value_jp = JP_MEMBER (&path_jp, "value");
  JsonObject *value;
  if (!check_keys (path_obj, &path_jp, special_keys, error) ||
      (member = want_member (path_obj, &path_jp, "value", error)) == NULL ||
      (value = want_object (member, &value_jp, error)) == NULL)
    return false;
  return translate_special (t, value, &value_jp, access, access_name, entry_at, error);
}

static bool
parse_network (JsonObject *obj, const Jp *jp, FbPolicyNetwork *ret, GError **error)
{
  static const char *const valid[] = { "restricted", "enabled", NULL };
  const char *network;

  if (!get_enum (obj, jp, "network", true, "network policy", valid, &network, error))
    return false;
  *ret = strcmp (network, "enabled") == 0 ? FB_POLICY_NETWORK_HOST : FB_POLICY_NETWORK_NONE;
  return true;
}

static bool
translate_file_system (Translation *t, JsonNode *node, const Jp *jp, GError **error)
{
  static const char *const types[] = { "restricted", "unrestricted", NULL };
  static const char *const restricted_keys[] = { "type", "entries", "glob_scan_max_depth", NULL };
  static const char *const unrestricted_keys[] = { "type", NULL };
  JsonObject *fs;
  JsonNode *entries;
  const char *type;
  Jp entries_jp = JP_MEMBER (jp, "entries");

  if ((fs = want_object (node, jp, error)) == NULL ||
      !get_enum (fs, jp, "type", true, "file_system type", types, &type, error))
    return false;
  if (strcmp (type, "unrestricted") == 0)
    {
      if (!check_keys (fs, jp, unrestricted_keys, error))
        return false;
      t->unrestricted = true;
      return true;
    }

  if (!check_keys (fs, jp, restricted_keys, error))
    return false;
  /* glob_scan_max_depth bounds Codex's up-front scan for glob matches; our
   * globs are matched at lookup time, so it only needs to be well formed. */
  JsonNode *depth = json_object_get_member (fs, "glob_scan_max_depth");
  if (depth != NULL && !JSON_NODE_HOLDS_NULL (depth) &&
      (!JSON_NODE_HOLDS_VALUE (depth) || json_node_get_value_type (depth) != G_TYPE_INT64 ||
       json_node_get_int (depth) < 1))
    {
      Jp depth_jp = JP_MEMBER (jp, "glob_scan_max_depth");
      set_error (error, FB_POLICY_ERROR_SCHEMA, &depth_jp, "expected a positive integer, found %s",
                 node_type_name (depth));
      return false;
    }
  if ((entries = want_member (fs, jp, "entries", error)) == NULL)
    return false;
  if (!JSON_NODE_HOLDS_ARRAY (entries))
    {
      set_error (error, FB_POLICY_ERROR_SCHEMA, &entries_jp, "expected an array, found %s", node_type_name (entries));
      return false;
    }
  JsonArray *array = json_node_get_array (entries);
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      Jp entry_jp = JP_INDEX (&entries_jp, i);
      if (!translate_entry (t, json_array_get_element (array, i), &entry_jp, error))
        return false;
    }
  return true;
}

static bool
translate_permissions (Translation *t, JsonNode *node, const Jp *jp, GError **error)
{
  static const char *const types[] = { "managed", "disabled", "external", NULL };
  static const char *const managed_keys[] = { "type", "file_system", "network", NULL };
  static const char *const disabled_keys[] = { "type", NULL };
  static const char *const external_keys[] = { "type", "network", NULL };
  JsonObject *perm;
  JsonNode *fs;
  const char *type;
  Jp fs_jp = JP_MEMBER (jp, "file_system");

  if ((perm = want_object (node, jp, error)) == NULL ||
      !get_enum (perm, jp, "type", true, "permission profile type", types, &type, error))
    return false;

  if (strcmp (type, "disabled") == 0)
    {
      /* Codex's danger-full-access: no sandbox at all, network included. */
      if (!check_keys (perm, jp, disabled_keys, error))
        return false;
      t->unrestricted = true;
      t->network = FB_POLICY_NETWORK_HOST;
      return true;
    }
  if (strcmp (type, "external") == 0)
    {
      /* Someone else isolates the filesystem; we only carry the network. */
      if (!check_keys (perm, jp, external_keys, error) || !parse_network (perm, jp, &t->network, error))
        return false;
      t->unrestricted = true;
      return true;
    }

  if (!check_keys (perm, jp, managed_keys, error) || !parse_network (perm, jp, &t->network, error) ||
      (fs = want_member (perm, jp, "file_system", error)) == NULL)
    return false;
  return translate_file_system (t, fs, &fs_jp, error);
}

/* A list of PathUri strings (workspaceRoots, temporaryDirectories). */
static bool
parse_path_list (JsonObject *ctx, const Jp *jp, const char *key, GPtrArray **ret, GError **error)
{
  JsonNode *node = json_object_get_member (ctx, key);
  Jp list_jp = JP_MEMBER (jp, key);

  *ret = NULL;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return true;
  if (!JSON_NODE_HOLDS_ARRAY (node))
    {
      set_error (error, FB_POLICY_ERROR_SCHEMA, &list_jp, "expected an array of file URIs, found %s",
                 node_type_name (node));
      return false;
    }
  g_autoptr (GPtrArray) list = g_ptr_array_new_with_free_func (g_free);
  JsonArray *array = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      JsonNode *el = json_array_get_element (array, i);
      Jp el_jp = JP_INDEX (&list_jp, i);
      if (!JSON_NODE_HOLDS_VALUE (el) || json_node_get_value_type (el) != G_TYPE_STRING)
        {
          set_error (error, FB_POLICY_ERROR_SCHEMA, &el_jp, "expected a file URI string, found %s",
                     node_type_name (el));
          return false;
        }
      char *path = parse_path (json_node_get_string (el), &el_jp, error);
      if (path == NULL)
        return false;
      g_ptr_array_add (list, path);
    }
  *ret = g_steal_pointer (&list);
  return true;
}

/* The members of a FileSystemSandboxContext the translation reads. */
static const char *const context_keys[] = { "permissions",
                                            "cwd",
                                            "workspaceRoots",
                                            "userHomeDir",
                                            "temporaryDirectories",
                                            "windowsSandboxLevel",
                                            "windowsSandboxPrivateDesktop",
                                            "windowsSandboxProxySettingsMode",
                                            "useLegacyLandlock",
                                            NULL };

char **
fb_rpc_codex_ignored_members (JsonNode *sandbox_context)
{
  g_autoptr (GPtrArray) names = g_ptr_array_new ();
  JsonObjectIter iter;
  const char *key;

  if (sandbox_context == NULL || !JSON_NODE_HOLDS_OBJECT (sandbox_context))
    return NULL;
  json_object_iter_init (&iter, json_node_get_object (sandbox_context));
  while (json_object_iter_next (&iter, &key, NULL))
    if (!g_strv_contains (context_keys, key))
      g_ptr_array_add (names, g_strdup (key));
  if (names->len == 0)
    return NULL;
  g_ptr_array_add (names, NULL);
  return (char **)g_ptr_array_free (g_steal_pointer (&names), FALSE);
}

static bool
parse_context (Translation *t, JsonNode *sandbox, GError **error)
{
  static const char *const windows_levels[] = { "disabled", "restricted-token", "elevated", NULL };
  const Jp root = { NULL, "sandbox", -1 };
  const Jp cwd_jp = JP_MEMBER (&root, "cwd");
  const Jp home_jp = JP_MEMBER (&root, "userHomeDir");
  const Jp permissions_jp = JP_MEMBER (&root, "permissions");
  const char *cwd, *home, *level, *proxy;
  JsonObject *ctx;
  JsonNode *permissions;

  /* Unknown members are ignored here (see the top of this file). */
  if ((ctx = want_object (sandbox, &root, error)) == NULL ||
      (permissions = want_member (ctx, &root, "permissions", error)) == NULL)
    return false;
  /* The Windows knobs mean nothing on Linux; they are checked, not used. */
  if (!get_enum (ctx, &root, "windowsSandboxLevel", false, "Windows sandbox level", windows_levels, &level, error) ||
      !get_string (ctx, &root, "windowsSandboxProxySettingsMode", false, &proxy, error) ||
      !check_bool (ctx, &root, "windowsSandboxPrivateDesktop", error) ||
      !check_bool (ctx, &root, "useLegacyLandlock", error))
    return false;

  if (!get_string (ctx, &root, "cwd", false, &cwd, error) ||
      !get_string (ctx, &root, "userHomeDir", false, &home, error))
    return false;
  if (cwd != NULL && (t->cwd = parse_path (cwd, &cwd_jp, error)) == NULL)
    return false;
  if (cwd == NULL && t->vars != NULL && t->vars->cwd != NULL)
    t->cwd = fb_rpc_path_normalize (t->vars->cwd); /* the exec-server falls back to its own cwd */
  if (home != NULL && (t->home = parse_path (home, &home_jp, error)) == NULL)
    return false;
  if (!parse_path_list (ctx, &root, "workspaceRoots", &t->project, error) ||
      !parse_path_list (ctx, &root, "temporaryDirectories", &t->tmpdirs, error))
    return false;
  if (t->project == NULL)
    t->project = g_ptr_array_new_with_free_func (g_free);
  if (t->project->len == 0 && t->cwd != NULL)
    g_ptr_array_add (t->project, g_strdup (t->cwd));

  return translate_permissions (t, permissions, &permissions_jp, error);
}

/* ---- output ---- */

static JsonNode *
build_policy (Translation *t, GPtrArray *extra_rules, bool with_protected_names)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  fb_json_builder_add_int_member (b, "version", 1);
  fb_json_builder_add_string_member (b, "network", fb_policy_network_to_string (t->network));
  json_builder_set_member_name (b, "protected_names");
  json_builder_begin_object (b);
  if (with_protected_names)
    for (guint i = 0; i < G_N_ELEMENTS (metadata_names); i++)
      fb_json_builder_add_string_member (b, metadata_names[i], "read");
  json_builder_end_object (b);
  json_builder_set_member_name (b, "rules");
  json_builder_begin_array (b);
  for (guint pass = 0; pass < 2; pass++)
    {
      GPtrArray *rules = pass == 0 ? t->rules : extra_rules;
      for (guint i = 0; rules != NULL && i < rules->len; i++)
        {
          Rule *r = rules->pdata[i];
          json_builder_begin_object (b);
          g_autofree char *path = fb_policy_vars_escape (r->path);
          fb_json_builder_add_string_member (b, "path", path);
          fb_json_builder_add_string_member (b, "access", fb_policy_access_to_string (r->access));
          fb_json_builder_add_string_member (b, "why", r->why);
          json_builder_end_object (b);
        }
    }
  for (guint i = 0; i < t->globs->len; i++)
    {
      Glob *g = t->globs->pdata[i];
      json_builder_begin_object (b);
      g_autofree char *pattern = fb_policy_vars_escape (g->pattern);
      fb_json_builder_add_string_member (b, "glob", pattern);
      fb_json_builder_add_string_member (b, "access", "deny");
      fb_json_builder_add_string_member (b, "why", g->why);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* The access the literal rules alone give PATH: the rule with most
 * components at or above it, else hide. */
static FbPolicyAccess
literal_access (Translation *t, const char *path)
{
  g_autofree char *p = g_strdup (path);

  for (;;)
    {
      Rule *r = g_hash_table_lookup (t->by_path, p);
      if (r != NULL)
        return r->access;
      if (strcmp (p, "/") == 0)
        return FB_POLICY_ACCESS_HIDE;
      char *slash = strrchr (p, '/');
      if (slash == p)
        p[1] = '\0';
      else
        *slash = '\0';
    }
}

/* The metadata rule: ROOT/.git, ROOT/.agents and ROOT/.codex read-only under
 * each writable root, where the policy would otherwise let them be written. */
static bool
add_metadata_rules (Translation *t, GPtrArray *extra, GError **error)
{
  g_autoptr (FbPolicy) first = NULL;
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  /* Deny globs can decide a path too; only the engine can say whether one
   * matches, so then ask a first-pass policy (without protected names). */
  if (t->globs->len > 0)
    {
      g_autoptr (JsonNode) node = build_policy (t, NULL, false);
      g_autoptr (GError) local = NULL;
      first = fb_policy_load_json (node, "<sandbox>", t->vars, &local);
      if (first == NULL)
        {
          g_set_error (error, FB_POLICY_ERROR, local->code, "sandbox: the translated policy was refused: %s",
                       local->message);
          return false;
        }
    }

  for (guint i = 0; i < t->rules->len; i++)
    {
      Rule *root = t->rules->pdata[i];
      if (root->access != FB_POLICY_ACCESS_WRITE)
        continue;
      for (guint n = 0; n < G_N_ELEMENTS (metadata_names); n++)
        {
          g_autofree char *path = join_path (root->path, metadata_names[n]);
          FbPolicyAccess access;

          if (g_hash_table_contains (t->explicit, path) || g_hash_table_contains (seen, path))
            continue;
          if (first != NULL)
            {
              FbPolicyDecision d;
              fb_policy_decide (first, path, &d);
              access = d.access;
            }
          else
            access = literal_access (t, path);
          if (access != FB_POLICY_ACCESS_WRITE)
            continue; /* a read rule there would widen a deny or hide */

          g_autofree char *why =
            g_strdup_printf ("codex: %s under the writable root %s stays read-only unless a write entry "
                             "names it (Codex's metadata rule)",
                             metadata_names[n], root->path);
          Rule *r = g_new0 (Rule, 1);
          r->path = g_string_chunk_insert (t->strings, path);
          r->access = FB_POLICY_ACCESS_READ;
          r->why = g_string_chunk_insert (t->strings, why);
          g_ptr_array_add (extra, r);
          g_hash_table_add (seen, g_steal_pointer (&path));
        }
    }
  return true;
}

static JsonNode *
translate (Translation *t, JsonNode *sandbox_context, GError **error)
{
  if (!parse_context (t, sandbox_context, error))
    return NULL;

  if (t->unrestricted)
    {
      /* Codex applies no filesystem sandbox and protects no metadata. */
      g_hash_table_remove_all (t->by_path);
      g_ptr_array_set_size (t->rules, 0);
      g_ptr_array_set_size (t->globs, 0);
      add_rule (t, "/", FB_POLICY_ACCESS_WRITE, "codex: unrestricted file system (write)");
      return build_policy (t, NULL, false);
    }

  g_autoptr (GPtrArray) extra = g_ptr_array_new_with_free_func (g_free);
  if (!add_metadata_rules (t, extra, error))
    return NULL;
  return build_policy (t, extra, true);
}

JsonNode *
fb_rpc_codex_translate (JsonNode *sandbox_context, const FbPolicyVars *vars, GError **error)
{
  Translation t = { 0 };

  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  t.vars = vars;
  t.network = FB_POLICY_NETWORK_NONE;
  t.rules = g_ptr_array_new_with_free_func (g_free);
  t.by_path = g_hash_table_new (g_str_hash, g_str_equal);
  t.globs = g_ptr_array_new_with_free_func (g_free);
  t.explicit = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  t.strings = g_string_chunk_new (1024);

  JsonNode *result = translate (&t, sandbox_context, error);
  translation_clear (&t);
  return result;
}
