/* fusebox — gitignore-style globs over view paths.
 *
 * A pattern is split at "/" into components:
 *  - "/x/y" is anchored at the root; "x/y" (a "/" but not in front) is
 *    anchored too, as in gitignore; "x" (no "/" at all) floats: it matches the
 *    last component at any depth, as if written "**" + "/x";
 *  - "**" as a whole component: a leading or inner one matches zero or more
 *    components, a trailing one matches one or more (everything inside, not
 *    the directory itself, as gitignore reads "abc/" + "**");
 *  - in a component, "*" matches any run of characters, "?" one character,
 *    "[...]" one character of a set (ranges "a-z", negation "[!...]" or
 *    "[^...]", a "]" first is literal) and "\" escapes the next character.
 * "**" inside a component ("a**b"), empty, "." and ".." components, an
 * unclosed "[", a trailing "\" or "/" are errors, so that a pattern never
 * means something other than what it looks like.
 *
 * Matching is linear-ish: "*" and "**" use the classic backtrack-to-the-last
 * star scan (no recursion, no exponential blow-up).
 */
#include "policy/policy-private.h"

static bool
is_meta (char c)
{
  return c == '*' || c == '?' || c == '[' || c == '\\';
}

/* Decodes one character of S (a UTF-8 sequence, or one byte when invalid). */
static gunichar
next_char (const char **s, const char *end)
{
  const guchar *p = (const guchar *)*s;
  gunichar c = p[0];
  guint n = 1;

  if (c >= 0xc0 && c < 0xf8)
    {
      guint want = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;

      if ((gsize)(end - *s) >= want)
        {
          gunichar v = c & (0x3f >> (want - 1));
          guint i;

          for (i = 1; i < want && (p[i] & 0xc0) == 0x80; i++)
            v = (v << 6) | (p[i] & 0x3f);
          if (i == want)
            {
              c = v;
              n = want;
            }
        }
    }
  *s += n;
  return c;
}

/* Validates one component pattern; returns the offset of the problem within
 * it or -1, with a message. */
static gssize
check_component (const char *c, gsize n, const char **ret_what)
{
  for (gsize i = 0; i < n; i++)
    {
      if (c[i] == '\\')
        {
          if (i + 1 >= n)
            {
              *ret_what = "\"\\\" escapes nothing";
              return (gssize)i;
            }
          i++;
        }
      else if (c[i] == '*' && i + 1 < n && c[i + 1] == '*')
        {
          *ret_what = "\"**\" must be a whole component (a/**/b), not part of a name";
          return (gssize)i;
        }
      else if (c[i] == '[')
        {
          const char *q = c + i + 1;
          const char *end = c + n;
          bool first = true;

          if (q < end && (*q == '!' || *q == '^'))
            q++;
          while (q < end && (*q != ']' || first))
            {
              const char *item = q;
              gunichar lo;
              gunichar hi;

              first = false;
              if (*q == '\\' && ++q >= end)
                break;
              lo = next_char (&q, end);
              if (q + 1 < end && *q == '-' && q[1] != ']')
                {
                  q++;
                  if (*q == '\\' && ++q >= end)
                    break;
                  hi = next_char (&q, end);
                  if (hi < lo)
                    {
                      *ret_what = "empty range in \"[...]\"";
                      return (gssize)(item - c);
                    }
                }
            }
          if (q >= end)
            {
              *ret_what = "unclosed \"[\"";
              return (gssize)i;
            }
          i = (gsize)(q - c);
        }
    }
  return -1;
}

/* Whether the validated "[...]" whose items start at *Q is negated ("[!"
 * or "[^"); moves *Q past the mark. */
static bool
class_negated (const char **q, const char *pend)
{
  if (*q < pend && (**q == '!' || **q == '^'))
    {
      (*q)++;
      return true;
    }
  return false;
}

/* The item of a validated "[...]" at *Q, a character or a range, as LO to
 * HI; moves *Q past it. */
static void
class_item (const char **q, const char *pend, gunichar *ret_lo, gunichar *ret_hi)
{
  if (**q == '\\')
    (*q)++;
  *ret_lo = next_char (q, pend);
  *ret_hi = *ret_lo;
  if (*q + 1 < pend && **q == '-' && (*q)[1] != ']')
    {
      (*q)++;
      if (**q == '\\')
        (*q)++;
      *ret_hi = next_char (q, pend);
    }
}

/* Matches a "[...]" at *P (already validated) against character CH; moves
 * *P past the "]". */
static bool
class_match (const char **p, const char *pend, gunichar ch)
{
  const char *q = *p + 1;
  bool negate = class_negated (&q, pend);
  bool matched = false;
  bool first = true;

  while (q < pend && (*q != ']' || first))
    {
      gunichar lo;
      gunichar hi;

      first = false;
      class_item (&q, pend, &lo, &hi);
      if (ch >= lo && ch <= hi)
        matched = true;
    }
  *p = q + 1;
  return matched != negate;
}

static bool
component_match (const char *p, const char *pend, const char *s, const char *send)
{
  const char *star_p = NULL;
  const char *star_s = NULL;

  while (s < send)
    {
      if (p < pend)
        {
          if (*p == '*')
            {
              star_p = ++p;
              star_s = s;
              continue;
            }
          if (*p == '?')
            {
              p++;
              next_char (&s, send);
              continue;
            }
          if (*p == '[')
            {
              const char *q = p;
              const char *t = s;

              if (class_match (&q, pend, next_char (&t, send)))
                {
                  p = q;
                  s = t;
                  continue;
                }
            }
          else
            {
              const char *q = p;

              if (*q == '\\')
                q++;
              if (*q == *s)
                {
                  p = q + 1;
                  s++;
                  continue;
                }
            }
        }
      if (star_p == NULL)
        return false;
      p = star_p;
      s = ++star_s;
    }
  while (p < pend && *p == '*')
    p++;
  return p == pend;
}

static bool
part_match (const FbGlobPart *part, const FbPathComp *c)
{
  guchar first;

  if (part->literal)
    return part->len == c->len && memcmp (part->text, c->s, c->len) == 0;
  if (c->len == 0)
    return false;
  first = (guchar)c->s[0];
  if (!part->first_any && (part->first_set[first >> 5] & (1u << (first & 31))) == 0)
    return false;
  if (part->has_last && (guchar)c->s[c->len - 1] != part->last)
    return false;
  return component_match (part->text, part->text + part->len, c->s, c->s + c->len);
}

static void
set_first (FbGlobPart *part, guchar b)
{
  part->first_set[b >> 5] |= 1u << (b & 31);
}

/* Fill the prefilters of a validated component pattern.  A literal byte
 * must appear as is (matching is bytewise); a "[...]" of ASCII items limits
 * the first byte to those; anything else ("*", "?", negated or non-ASCII
 * sets) allows any first byte.  The last byte is known when the pattern
 * ends in a literal byte. */
static void
compute_prefilters (FbGlobPart *part)
{
  const char *p = part->text;
  const char *end = p + part->len;
  bool first = true;

  part->first_any = false;
  part->has_last = false;
  memset (part->first_set, 0, sizeof part->first_set);
  while (p < end)
    {
      if (*p == '*' || *p == '?')
        {
          if (first)
            part->first_any = true;
          part->has_last = false;
          p++;
        }
      else if (*p == '[')
        {
          const char *q = p + 1;
          bool item_first = true;

          if (class_negated (&q, end) && first)
            part->first_any = true;
          while (q < end && (*q != ']' || item_first))
            {
              gunichar lo;
              gunichar hi;

              item_first = false;
              class_item (&q, end, &lo, &hi);
              if (first && !part->first_any)
                {
                  if (hi >= 0x80)
                    part->first_any = true;
                  else
                    for (gunichar ch = lo; ch <= hi; ch++)
                      set_first (part, (guchar)ch);
                }
            }
          part->has_last = false;
          p = q + 1;
        }
      else
        {
          if (*p == '\\')
            p++;
          if (first)
            set_first (part, (guchar)*p);
          part->has_last = true;
          part->last = (guchar)*p;
          p++;
        }
      first = false;
    }
}

void
fb_policy_glob_free (FbGlob *glob)
{
  if (glob == NULL)
    return;
  for (guint i = 0; i < glob->n_parts; i++)
    g_free (glob->parts[i].text);
  g_free (glob->parts);
  g_free (glob->pattern);
  g_free (glob);
}

static void
clear_part (gpointer data)
{
  FbGlobPart *part = data;

  g_clear_pointer (&part->text, g_free);
}

FbGlob *
fb_policy_glob_compile (const char *pattern, char **ret_message)
{
  g_autoptr (FbGlob) glob = g_new0 (FbGlob, 1);
  g_autoptr (GArray) parts = g_array_new (FALSE, TRUE, sizeof (FbGlobPart));
  const char *p = pattern;
  bool anchored;

  g_array_set_clear_func (parts, clear_part);

  glob->pattern = g_strdup (pattern);
  if (pattern[0] == '\0')
    {
      *ret_message = g_strdup ("empty pattern");
      return NULL;
    }
  anchored = strchr (pattern, '/') != NULL;
  if (pattern[0] == '/')
    p++;
  if (*p == '\0')
    {
      *ret_message = g_strdup ("the pattern \"/\" names the root: write a path rule for \"/\"");
      return NULL;
    }
  if (!anchored)
    {
      FbGlobPart ds = { .doublestar = true };

      g_array_append_val (parts, ds);
    }
  for (;;)
    {
      const char *end = strchrnul (p, '/');
      gsize n = (gsize)(end - p);
      FbGlobPart part = { 0 };
      const char *what = NULL;
      gssize bad;

      if (n == 0)
        {
          *ret_message = g_strdup_printf ("%s at offset %zu; a pattern has no empty component",
                                          *end == '\0' ? "trailing \"/\"" : "\"//\"", (gsize)(p - pattern));
          return NULL;
        }
      if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
        {
          *ret_message =
            g_strdup_printf ("\"%.*s\" component at offset %zu; view paths have none", (int)n, p, (gsize)(p - pattern));
          return NULL;
        }
      if (n == 2 && p[0] == '*' && p[1] == '*')
        {
          part.doublestar = true;
          /* "**" + "/" + "**" is one "**" */
          if (parts->len == 0 || !g_array_index (parts, FbGlobPart, parts->len - 1).doublestar)
            g_array_append_val (parts, part);
        }
      else
        {
          bool literal = true;

          bad = check_component (p, n, &what);
          if (bad >= 0)
            {
              *ret_message = g_strdup_printf ("%s at offset %zu", what, (gsize)(p - pattern) + (gsize)bad);
              return NULL;
            }
          for (gsize i = 0; i < n; i++)
            if (is_meta (p[i]) && p[i] != '\\')
              literal = false;
          if (literal)
            {
              /* Only escapes: keep the unescaped name for memcmp. */
              GString *s = g_string_sized_new (n);

              for (gsize i = 0; i < n; i++)
                {
                  if (p[i] == '\\')
                    i++;
                  g_string_append_c (s, p[i]);
                }
              part.len = (guint32)s->len;
              part.text = g_string_free (s, FALSE);
            }
          else
            {
              part.len = (guint32)n;
              part.text = g_strndup (p, n);
              compute_prefilters (&part);
            }
          part.literal = literal;
          g_array_append_val (parts, part);
        }
      if (*end == '\0')
        break;
      p = end + 1;
    }

  /* A trailing "**" matches what is inside, not the directory itself:
   * "*" (one component) then "**". */
  if (g_array_index (parts, FbGlobPart, parts->len - 1).doublestar)
    {
      FbGlobPart one = { .literal = false, .len = 1, .text = g_strdup ("*"), .first_any = true };

      g_array_insert_val (parts, parts->len - 1, one);
    }

  glob->n_parts = parts->len;
  glob->parts = (FbGlobPart *)(void *)g_array_free (g_steal_pointer (&parts), FALSE);
  glob->floating = glob->parts[0].doublestar;
  glob->name_only = glob->floating && glob->n_parts == 2 && !glob->parts[1].doublestar;
  glob->max_depth = 0;
  for (guint i = 0; i < glob->n_parts; i++)
    {
      if (glob->parts[i].doublestar)
        glob->max_depth = G_MAXUINT;
      else
        {
          glob->min_depth++;
          if (glob->max_depth != G_MAXUINT)
            glob->max_depth++;
        }
    }
  return g_steal_pointer (&glob);
}

bool
fb_policy_glob_match (const FbGlob *glob, const FbPathComp *comps, guint n)
{
  const FbGlobPart *parts = glob->parts;
  guint np = glob->n_parts;
  guint pi = 0;
  guint ci = 0;
  guint star_pi = G_MAXUINT;
  guint star_ci = 0;

  if (n < glob->min_depth || n > glob->max_depth)
    return false;
  /* "**" matches any sequence of components, so the string-wildcard scan
   * works on components: on a mismatch, let the last "**" eat one more. */
  while (ci < n)
    {
      if (pi < np && parts[pi].doublestar)
        {
          star_pi = pi++;
          star_ci = ci;
          continue;
        }
      if (pi < np && part_match (&parts[pi], &comps[ci]))
        {
          pi++;
          ci++;
          continue;
        }
      if (star_pi == G_MAXUINT)
        return false;
      pi = star_pi + 1;
      ci = ++star_ci;
    }
  while (pi < np && parts[pi].doublestar)
    pi++;
  return pi == np;
}

bool
fb_policy_glob_match_name (const FbGlob *glob, const char *name, guint32 len)
{
  FbPathComp c = { .s = name, .len = len };

  return part_match (&glob->parts[glob->n_parts - 1], &c);
}

bool
fb_policy_glob_match_path (const FbGlob *glob, const char *path)
{
  FbPathComp stack[64];
  g_autofree FbPathComp *heap = NULL;
  FbPathComp *comps = stack;
  guint n = fb_policy_path_split (path, stack, G_N_ELEMENTS (stack));

  if (n > G_N_ELEMENTS (stack))
    {
      comps = heap = g_new (FbPathComp, n);
      fb_policy_path_split (path, comps, n);
    }
  return n > 0 && fb_policy_glob_match (glob, comps, n);
}

/* Simulate the pattern as an automaton over components: state i means
 * "parts[0..i) matched".  A path strictly below COMPS can match when, after
 * COMPS, some state from FIRST on still has parts left (each part can match
 * at least one more component). */
static bool
live_below (const FbGlob *glob, const FbPathComp *comps, guint n, guint first)
{
  guint np = glob->n_parts;
  g_autofree bool *cur = g_new0 (bool, np + 1);
  g_autofree bool *next = g_new0 (bool, np + 1);

  cur[0] = true;
  for (guint i = 0; i < np; i++)
    if (cur[i] && glob->parts[i].doublestar)
      cur[i + 1] = true;
  for (guint ci = 0; ci < n; ci++)
    {
      bool any = false;

      memset (next, 0, (np + 1) * sizeof (bool));
      for (guint i = 0; i < np; i++)
        {
          if (!cur[i])
            continue;
          if (glob->parts[i].doublestar)
            next[i] = true;
          else if (part_match (&glob->parts[i], &comps[ci]))
            next[i + 1] = true;
        }
      for (guint i = 0; i < np; i++)
        if (next[i] && glob->parts[i].doublestar)
          next[i + 1] = true;
      for (guint i = 0; i <= np; i++)
        any = any || next[i];
      if (!any)
        return false;
      memcpy (cur, next, (np + 1) * sizeof (bool));
    }
  for (guint i = first; i < np; i++)
    if (cur[i])
      return true;
  return false;
}

bool
fb_policy_glob_could_match_below (const FbGlob *glob, const FbPathComp *comps, guint n)
{
  return live_below (glob, comps, n, 0);
}

bool
fb_policy_glob_could_match_through (const FbGlob *glob, const FbPathComp *comps, guint n)
{
  /* State 0 of a floating glob is its leading "**" and state 1 follows it
   * by an empty step alone ("**" + "/" + "**" is one part): a state from 2
   * on has matched a part after the "**" to a component of COMPS.  Below
   * states 0 and 1 only, whatever matches does so wholly below COMPS. */
  return live_below (glob, comps, n, glob->floating ? 2 : 0);
}

/* ---- Folded copies (policy-fold.c) --------------------------------------- */

/* Append RUN (literal characters) folded, each metacharacter escaped. */
static void
flush_run (GString *out, GString *run, bool at_end)
{
  g_autoptr (GString) folded = g_string_new (NULL);

  if (run->len == 0)
    return;
  fb_policy_fold_append (folded, run->str, run->len);
  if (at_end)
    fb_policy_fold_strip_tail (folded, 0);
  for (gsize i = 0; i < folded->len; i++)
    {
      if (is_meta (folded->str[i]))
        g_string_append_c (out, '\\');
      g_string_append_c (out, folded->str[i]);
    }
  g_string_truncate (run, 0);
}

/* A "[...]" at *P (validated) copied to OUT with ASCII letters lowered
 * (folded names hold no ASCII capitals); other characters as they are, so a
 * set of non-ASCII letters matches their folded forms only when the
 * pattern spells them so (the unfolded match still applies).  A range whose
 * ends would swap (Z-a) stays as written. */
static void
copy_class (const char **p, const char *pend, GString *out)
{
  const char *q = *p + 1;
  bool first = true;

  g_string_append_c (out, '[');
  if (q < pend && (*q == '!' || *q == '^'))
    g_string_append_c (out, *q++);
  while (q < pend && (*q != ']' || first))
    {
      const char *item = q;
      gunichar lo;
      gunichar hi;

      first = false;
      if (*q == '\\')
        q++;
      lo = next_char (&q, pend);
      hi = lo;
      if (q + 1 < pend && *q == '-' && q[1] != ']')
        {
          q++;
          if (*q == '\\')
            q++;
          hi = next_char (&q, pend);
        }
      if (lo < 0x80 && hi < 0x80 && g_ascii_tolower ((gchar)lo) <= g_ascii_tolower ((gchar)hi))
        for (const char *c = item; c < q; c++)
          g_string_append_c (out, g_ascii_tolower (*c));
      else
        g_string_append_len (out, item, q - item);
    }
  g_string_append_c (out, ']');
  *p = q + 1;
}

static void
fold_pattern (const FbGlobPart *part, FbGlobPart *ret)
{
  g_autoptr (GString) out = g_string_sized_new (part->len);
  g_autoptr (GString) run = g_string_new (NULL);
  const char *p = part->text;
  const char *end = p + part->len;

  while (p < end)
    {
      if (*p == '*' || *p == '?')
        {
          flush_run (out, run, false);
          g_string_append_c (out, *p++);
        }
      else if (*p == '[')
        {
          flush_run (out, run, false);
          copy_class (&p, end, out);
        }
      else
        {
          const char *c;

          if (*p == '\\')
            p++;
          c = p;
          next_char (&p, end);
          g_string_append_len (run, c, p - c);
        }
    }
  flush_run (out, run, true);
  ret->len = (guint32)out->len;
  ret->text = g_string_free (g_steal_pointer (&out), FALSE);
  compute_prefilters (ret);
}

FbGlob *
fb_policy_glob_fold (const FbGlob *glob)
{
  FbGlob *f = g_new0 (FbGlob, 1);

  *f = *glob;
  f->pattern = g_strdup (glob->pattern);
  f->parts = g_new0 (FbGlobPart, glob->n_parts);
  for (guint i = 0; i < glob->n_parts; i++)
    {
      const FbGlobPart *part = &glob->parts[i];
      FbGlobPart *fp = &f->parts[i];

      *fp = *part;
      fp->text = NULL;
      if (part->doublestar)
        continue;
      if (part->literal)
        {
          g_autofree char *text = g_strndup (part->text, part->len);
          fp->text = fb_policy_fold_name (text);
          fp->len = (guint32)strlen (fp->text);
        }
      else
        fold_pattern (part, fp);
    }
  return f;
}

/* ---- The index ----------------------------------------------------------- */

void
fb_policy_glob_index_init (FbGlobIndex *index)
{
  memset (index, 0, sizeof *index);
  index->other = g_ptr_array_new ();
  index->all = g_ptr_array_new_with_free_func (g_free);
  index->lists = g_ptr_array_new_with_free_func ((GDestroyNotify)g_ptr_array_unref);
}

static void
add_to (FbNameMap *map, GPtrArray *owners, const char *key, gsize len, FbGlobEntry *entry)
{
  GPtrArray *list = fb_name_map_lookup (map, key, len, fb_name_hash (key, len));

  if (list == NULL)
    {
      list = g_ptr_array_new ();
      g_ptr_array_add (owners, list);
      fb_name_map_insert (map, key, len, list);
    }
  g_ptr_array_add (list, entry);
}

void
fb_policy_glob_index_add (FbGlobIndex *index, const FbGlob *glob, const FbPolicyRule *rule)
{
  FbGlobEntry *entry = g_new (FbGlobEntry, 1);
  const FbGlobPart *last = &glob->parts[glob->n_parts - 1];

  entry->glob = glob;
  entry->rule = rule;
  g_ptr_array_add (index->all, entry);

  if (last->literal)
    {
      add_to (&index->by_name, index->lists, last->text, last->len, entry);
      return;
    }
  /* "*.EXT" with a literal EXT: probe the name's suffixes after each dot. */
  if (!last->doublestar && last->len >= 3 && last->text[0] == '*' && last->text[1] == '.')
    {
      bool literal = true;
      guint dots = 0;

      for (guint i = 2; i < last->len; i++)
        {
          if (is_meta (last->text[i]))
            literal = false;
          if (last->text[i] == '.')
            dots++;
        }
      if (literal)
        {
          add_to (&index->by_extension, index->lists, last->text + 2, last->len - 2, entry);
          index->n_extension_dots = MAX (index->n_extension_dots, dots + 1);
          return;
        }
    }
  g_ptr_array_add (index->other, entry);
}

void
fb_policy_glob_index_clear (FbGlobIndex *index)
{
  fb_name_map_clear (&index->by_name);
  fb_name_map_clear (&index->by_extension);
  g_clear_pointer (&index->other, g_ptr_array_unref);
  g_clear_pointer (&index->all, g_ptr_array_unref);
  g_clear_pointer (&index->lists, g_ptr_array_unref);
}
