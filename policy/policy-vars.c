/* fusebox — view paths and policy variables.
 *
 * Paths here are strings only: nothing is resolved against the host (the
 * policy is pure).  A path is "normalized" when it is absolute and has no
 * empty, "." or ".." component and no trailing "/" ("/" itself excepted);
 * decisions, rules and variable values are all normalized, so that one
 * object has one spelling.
 */
#include "policy/policy-private.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

bool
fb_policy_path_is_normalized (const char *path)
{
  if (path == NULL || path[0] != '/')
    return false;
  if (path[1] == '\0')
    return true;
  for (const char *p = path; *p != '\0';)
    {
      const char *c = p + 1;
      const char *end = strchrnul (c, '/');
      gsize n = (gsize)(end - c);

      if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
        return false;
      p = end;
    }
  return true;
}

char *
fb_policy_path_normalize (const char *path)
{
  GString *out;

  if (path == NULL || path[0] != '/')
    return NULL;
  out = g_string_sized_new (strlen (path));
  for (const char *p = path; *p != '\0';)
    {
      const char *c = p;
      const char *end;
      gsize n;

      while (*c == '/')
        c++;
      end = strchrnul (c, '/');
      n = (gsize)(end - c);
      p = end;
      if (n == 0 || (n == 1 && c[0] == '.'))
        continue;
      if (n == 2 && c[0] == '.' && c[1] == '.')
        {
          /* ".." is not folded: a lexical fold disagrees with the kernel as
           * soon as a component is a symlink, so the user must say which
           * path they mean. */
          g_string_free (out, TRUE);
          return NULL;
        }
      g_string_append_c (out, '/');
      g_string_append_len (out, c, (gssize)n);
    }
  if (out->len == 0)
    g_string_append_c (out, '/');
  return g_string_free (out, FALSE);
}

bool
fb_policy_path_has_prefix (const char *path, const char *ancestor)
{
  gsize n = strlen (ancestor);

  if (strcmp (ancestor, "/") == 0)
    return path[0] == '/';
  return strncmp (path, ancestor, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

guint
fb_policy_path_split (const char *path, FbPathComp *comps, guint max)
{
  guint n = 0;

  for (const char *p = path; *p == '/' && p[1] != '\0';)
    {
      const char *c = p + 1;
      const char *end = strchrnul (c, '/');

      if (n < max)
        {
          comps[n].s = c;
          comps[n].len = (guint32)(end - c);
        }
      n++;
      p = end;
    }
  return n;
}

static const char *const var_names[] = { "WORKSPACE", "HOME", "CWD", "RUN" };

static const char *
var_value (const FbPolicyVars *vars, guint i)
{
  if (vars == NULL)
    return NULL;
  switch (i)
    {
      case 0:
        return vars->workspace;
      case 1:
        return vars->home;
      case 2:
        return vars->cwd;
      default:
        return vars->run;
    }
}

static void
append_glob_escaped (GString *out, const char *s, gsize n)
{
  for (gsize i = 0; i < n; i++)
    {
      if (strchr ("*?[]\\", s[i]) != NULL)
        g_string_append_c (out, '\\');
      g_string_append_c (out, s[i]);
    }
}

char *
fb_policy_vars_expand (const char *text, const FbPolicyVars *vars, FbExpandMode mode, char **ret_message)
{
  g_autoptr (GString) out = g_string_sized_new (strlen (text) + 32);

  for (const char *p = text; *p != '\0';)
    {
      const char *close;
      const char *value = NULL;
      g_autofree char *normalized = NULL;
      gsize name_len;
      gint found = -1;

      if (p[0] != '$')
        {
          g_string_append_c (out, *p++);
          continue;
        }
      if (p[1] == '$')
        {
          g_string_append_c (out, '$');
          p += 2;
          continue;
        }
      if (p[1] != '{')
        {
          g_string_append_c (out, *p++);
          continue;
        }
      close = strchr (p + 2, '}');
      if (close == NULL)
        {
          *ret_message =
            g_strdup_printf ("unclosed \"${\" at offset %zu; write ${NAME} (or $$ for a literal $)", (gsize)(p - text));
          return NULL;
        }
      name_len = (gsize)(close - (p + 2));
      for (guint i = 0; i < G_N_ELEMENTS (var_names); i++)
        if (strlen (var_names[i]) == name_len && memcmp (var_names[i], p + 2, name_len) == 0)
          found = (gint)i;
      if (found < 0)
        {
          *ret_message = g_strdup_printf ("unknown variable ${%.*s}; valid: ${WORKSPACE}, ${HOME}, ${CWD}, ${RUN}",
                                          (int)name_len, p + 2);
          return NULL;
        }
      value = var_value (vars, (guint)found);
      if (value == NULL)
        {
          *ret_message = g_strdup_printf ("${%s} is not available here", var_names[found]);
          return NULL;
        }
      /* Values are normalized here (a workspace given as "/ws/" is /ws) so
       * that "${WORKSPACE}/x" is a normalized path whenever the text is. */
      normalized = fb_policy_path_normalize (value);
      if (normalized == NULL)
        {
          *ret_message =
            g_strdup_printf ("${%s} is \"%s\", which is not an absolute path without \"..\"", var_names[found], value);
          return NULL;
        }
      p = close + 1;
      /* "/" followed by "/x" would give "//x": the root contributes nothing
       * before a slash. */
      if (strcmp (normalized, "/") == 0 && *p == '/')
        continue;
      if (mode == FB_EXPAND_GLOB)
        append_glob_escaped (out, normalized, strlen (normalized));
      else
        g_string_append (out, normalized);
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

char *
fb_policy_vars_escape (const char *text)
{
  GString *out = g_string_sized_new (strlen (text) + 8);

  for (const char *p = text; *p != '\0'; p++)
    {
      if (*p == '$')
        g_string_append_c (out, '$');
      g_string_append_c (out, *p);
    }
  return g_string_free (out, FALSE);
}

static char *
absolute_normalized (const char *path, const char *cwd)
{
  g_autofree char *abs = NULL;

  if (path == NULL || path[0] == '\0')
    return NULL;
  if (path[0] != '/' && cwd == NULL)
    return NULL;
  /* Arguments from the command line may be relative or contain ".."; a
   * shell folds ".." lexically too, so this does the same. */
  abs = g_canonicalize_filename (path, cwd);
  return fb_policy_path_normalize (abs);
}

void
fb_policy_vars_init_from_env (FbPolicyVarsStorage *storage, const char *workspace, const char *run)
{
  g_autofree char *cwd_raw = NULL;
  const char *home_env = g_getenv ("HOME");
  char *home = NULL;
  char *cwd = NULL;

  memset (storage, 0, sizeof *storage);

  cwd_raw = getcwd (NULL, 0);
  if (cwd_raw != NULL)
    cwd = fb_policy_path_normalize (cwd_raw);

  if (home_env != NULL && home_env[0] == '/')
    home = fb_policy_path_normalize (home_env);
  if (home == NULL)
    {
      struct passwd pwbuf;
      struct passwd *pw = NULL;
      char buf[4096];

      if (getpwuid_r (getuid (), &pwbuf, buf, sizeof buf, &pw) == 0 && pw != NULL && pw->pw_dir != NULL)
        home = fb_policy_path_normalize (pw->pw_dir);
    }

  storage->owned[0] = workspace != NULL ? absolute_normalized (workspace, cwd) : g_strdup (cwd);
  storage->owned[1] = home;
  storage->owned[2] = cwd;
  storage->owned[3] = absolute_normalized (run, cwd);

  storage->vars.workspace = storage->owned[0];
  storage->vars.home = storage->owned[1];
  storage->vars.cwd = storage->owned[2];
  storage->vars.run = storage->owned[3];
}

void
fb_policy_vars_clear (FbPolicyVarsStorage *storage)
{
  for (guint i = 0; i < G_N_ELEMENTS (storage->owned); i++)
    g_clear_pointer (&storage->owned[i], g_free);
  memset (&storage->vars, 0, sizeof storage->vars);
}
