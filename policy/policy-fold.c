/* fusebox — deciding names in directories whose host folds them.
 *
 * On vfat and exfat, on ext4, f2fs and tmpfs directories with casefold, on
 * SMB shares and case-insensitive FUSE or network filesystems, the host
 * resolves ".GIT", "SECRET.TXT" and "Secret.txt" to the one entry ".git" or
 * "secret.txt" that is on disk, while rules and protected names match bytes.
 * The view (fs/fs-view-fold.c) lists and resolves a folding directory's
 * entries only under their on-disk spelling, and decides every name there
 * with fb_policy_decide_child_folded(), which gives it the narrower of:
 *  - its own decision (fb_policy_decide_child);
 *  - the decision of every spelling the policy knows at that place -- a
 *    literal rule's component, a protected name -- that folds equal to it;
 *  - every glob that matches the path with both sides folded (globs only
 *    deny or hide, so a wider match only takes access away).
 * So ".GIT" can't be made where ".git" is protected, and "SECRET.TXT" is
 * denied like "secret.txt", whatever the disk holds.  The rules below such
 * a spelling can't follow a name whose spelling differs (the policy's trie
 * is keyed by bytes): when another spelling has rules below it, the name is
 * denied as a whole (the policy's fold rule), refused rather than guessed.
 * One exception keeps ordinary trees usable: in a directory known to fold
 * (CERTAIN), a name that differs from exactly one literal component by ASCII
 * case alone -- which every folding host resolves to the same entry -- is
 * decided *as* that component, so "DOCS/secret" follows "docs/secret"'s rule.
 * The fold is wider than any host's for the rest (compatibility
 * decomposition), so it never decides *as* another spelling on its own.
 *
 * fb_policy_fold_name(): compatibility decomposition (NFKD), simple upper
 * case then full case folding (both locale-free: a Turkish locale's
 * dotted/dotless i must not make ".git" and ".GIT" differ), NFKD again,
 * default-ignorable code points dropped (HFS+ and older ext4 casefold
 * ignore some: git's CVE-2014-9390), trailing dots and spaces dropped
 * (vfat, NTFS and Windows SMB servers strip them).  Bytes that are not UTF-8
 * count as Latin-1 characters.  A wider fold only refuses more.  Aliases no
 * fold describes (vfat's 8.3 short names) are the view's business: it never
 * resolves a name the host does not list under that very spelling.
 *
 * Pure and thread-safe like the rest of the policy: the folded globs are
 * compiled with the policy (fb_policy_compile).
 */
#include "policy/policy-private.h"

/* Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt). */
static bool
is_ignorable (gunichar c)
{
  return c == 0x00ad || c == 0x034f || c == 0x061c || (c >= 0x115f && c <= 0x1160) || (c >= 0x17b4 && c <= 0x17b5) ||
         (c >= 0x180b && c <= 0x180f) || (c >= 0x200b && c <= 0x200f) || (c >= 0x202a && c <= 0x202e) ||
         (c >= 0x2060 && c <= 0x206f) || c == 0x3164 || (c >= 0xfe00 && c <= 0xfe0f) || c == 0xfeff || c == 0xffa0 ||
         (c >= 0xfff0 && c <= 0xfff8) || (c >= 0x1bca0 && c <= 0x1bca3) || (c >= 0x1d173 && c <= 0x1d17a) ||
         (c >= 0xe0000 && c <= 0xe0fff);
}

void
fb_policy_fold_append (GString *out, const char *s, gsize len)
{
  g_autoptr (GString) valid = NULL;
  g_autoptr (GString) upper = NULL;
  g_autofree char *nfkd = NULL;
  g_autofree char *folded = NULL;
  g_autofree char *again = NULL;
  const char *p = s;
  const char *end = s + len;
  gsize i;

  /* Most names are ASCII, whose fold is lower case: no allocation.  (NFKD,
   * case folding and the ignorables leave ASCII as it is but for case.) */
  for (i = 0; i < len && (guchar)s[i] < 0x80 && s[i] != '\0'; i++)
    ;
  if (i == len)
    {
      for (i = 0; i < len; i++)
        g_string_append_c (out, g_ascii_tolower (s[i]));
      return;
    }
  /* Invalid sequences and NULs as Latin-1, byte by byte. */
  valid = g_string_sized_new (len);
  while (p < end)
    {
      const char *bad;

      if (g_utf8_validate (p, end - p, &bad))
        {
          g_string_append_len (valid, p, end - p);
          break;
        }
      g_string_append_len (valid, p, bad - p);
      g_string_append_unichar (valid, (guchar)*bad != 0 ? (guchar)*bad : 0xfffd);
      p = bad + 1;
    }
  nfkd = g_utf8_normalize (valid->str, (gssize)valid->len, G_NORMALIZE_NFKD);
  upper = g_string_sized_new (valid->len);
  for (const char *q = nfkd; *q != '\0'; q = g_utf8_next_char (q))
    g_string_append_unichar (upper, g_unichar_toupper (g_utf8_get_char (q)));
  folded = g_utf8_casefold (upper->str, (gssize)upper->len);
  again = g_utf8_normalize (folded, -1, G_NORMALIZE_NFKD);
  for (const char *q = again; *q != '\0'; q = g_utf8_next_char (q))
    {
      gunichar c = g_utf8_get_char (q);

      if (!is_ignorable (c))
        g_string_append_unichar (out, c);
    }
}

void
fb_policy_fold_strip_tail (GString *s, gsize from)
{
  while (s->len > from && (s->str[s->len - 1] == '.' || s->str[s->len - 1] == ' '))
    g_string_truncate (s, s->len - 1);
}

char *
fb_policy_fold_name (const char *name)
{
  GString *out = g_string_new (NULL);

  fb_policy_fold_append (out, name, strlen (name));
  fb_policy_fold_strip_tail (out, 0);
  return g_string_free (out, FALSE);
}

/* Do A and B differ in ASCII letter case alone? */
static bool
ascii_case_twins (const char *a, const char *b)
{
  return strlen (a) == strlen (b) && g_ascii_strcasecmp (a, b) == 0;
}

/* Below the decision D of PATH, does some rule decide differently, or does
 * the view show a mount? */
static bool
has_subtree (const FbPolicy *policy, const FbPolicyDecision *d, const char *path)
{
  return d->is_mount_point || (d->mounted_children != NULL && d->mounted_children[0] != NULL) ||
         fb_policy_subtree_has_rules_folded (policy, d, path);
}

static char *
child_path (const char *parent_path, const char *name)
{
  return strcmp (parent_path, "/") == 0 ? g_strconcat ("/", name, NULL) : g_strconcat (parent_path, "/", name, NULL);
}

/* The components of PARENT_PATH + NAME, each folded (strings in *RET_KEEP). */
static FbPathComp *
folded_comps (const char *parent_path, const char *key, guint *ret_n, GPtrArray *keep)
{
  guint n = fb_policy_path_split (parent_path, NULL, 0);
  FbPathComp *raw = g_new (FbPathComp, n + 1);
  FbPathComp *out = g_new (FbPathComp, n + 1);

  fb_policy_path_split (parent_path, raw, n);
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *c = g_strndup (raw[i].s, raw[i].len);
      char *f = fb_policy_fold_name (c);

      g_ptr_array_add (keep, f);
      out[i].s = f;
      out[i].len = (guint32)strlen (f);
    }
  out[n].s = key;
  out[n].len = (guint32)strlen (key);
  g_free (raw);
  *ret_n = n + 1;
  return out;
}

/* A path being decided, folded: its components made only when a glob
 * that is not a name alone needs them. */
typedef struct
{
  const char *parent_path;
  const char *key; /* the last component, folded */
  guint n;         /* components, the last included */
  FbPathComp *comps;
  GPtrArray *keep;
} FoldedPath;

static const FbPathComp *
folded_path_comps (FoldedPath *fp)
{
  if (fp->comps == NULL)
    fp->comps = folded_comps (fp->parent_path, fp->key, &fp->n, fp->keep);
  return fp->comps;
}

/* Restrict D by every folded glob of POLICY's SIDE (both sides of a
 * narrowed one) that matches FP. */
static void
restrict_by_globs (const FbPolicy *policy, const FbPolicy *side, FoldedPath *fp, FbPolicyDecision *d)
{
  for (guint i = 0; side->fold_globs != NULL && i < side->n_rules; i++)
    {
      const FbGlob *g = side->fold_globs[i];

      if (g == NULL || fp->n < g->min_depth || fp->n > g->max_depth)
        continue;
      if (g->name_only ? fb_policy_glob_match_name (g, fp->key, (guint32)strlen (fp->key))
                       : fb_policy_glob_match (g, folded_path_comps (fp), fp->n))
        fb_policy_restrict (policy, d, &side->rules[i]);
    }
}

static bool
has_globs (const FbPolicy *side)
{
  return side->fold_globs != NULL && side->glob_index.all != NULL && side->glob_index.all->len > 0;
}

void
fb_policy_decide_child_folded (const FbPolicy *policy, const FbPolicyDecision *parent, const char *parent_path,
                               const char *name, bool certain, FbPolicyDecision *ret)
{
  g_autoptr (GPtrArray) children = g_ptr_array_new ();
  g_autoptr (GPtrArray) others = g_ptr_array_new ();
  g_autofree char *key = NULL;
  const char *twin = NULL;
  FbPolicyDecision exact;
  FbPolicyDecision d;
  bool own_literal = false;
  bool conflict = false;

  fb_policy_decide_child (policy, parent, parent_path, name, &exact);
  if (name == NULL || name[0] == '\0' || strchr (name, '/') != NULL || strcmp (name, ".") == 0 ||
      strcmp (name, "..") == 0 || parent_path == NULL || parent_path[0] != '/')
    {
      *ret = exact; /* malformed: hidden already */
      return;
    }
  key = fb_policy_fold_name (name);

  /* The literal components at this place that fold equal to NAME. */
  fb_policy_literal_children (policy, parent, children);
  for (guint i = 0; i < children->len; i++)
    {
      const char *c = children->pdata[i];
      g_autofree char *ckey = NULL;

      if (strcmp (c, name) == 0)
        {
          own_literal = true;
          continue;
        }
      ckey = fb_policy_fold_name (c);
      if (strcmp (ckey, key) == 0)
        g_ptr_array_add (others, (gpointer)c);
    }
  if (certain && !own_literal)
    for (guint i = 0; i < others->len; i++)
      if (ascii_case_twins (others->pdata[i], name))
        {
          if (twin != NULL)
            {
              twin = NULL; /* two of them: neither is the one */
              break;
            }
          twin = others->pdata[i];
        }

  d = exact;
  if (twin != NULL)
    {
      fb_policy_decide_child (policy, parent, parent_path, twin, &d);
      /* NAME's own decision still narrows it, unless that is only what the
       * directory passes down (the twin's literal rule takes over there, as
       * it does at the twin's own path) */
      if (exact.rule != parent->rule)
        fb_policy_restrict (policy, &d, exact.rule);
    }
  for (guint i = 0; i < others->len; i++)
    {
      const char *o = others->pdata[i];
      g_autofree char *opath = NULL;
      FbPolicyDecision od;

      if (o == twin)
        continue;
      opath = child_path (parent_path, o);
      fb_policy_decide_child (policy, parent, parent_path, o, &od);
      if (has_subtree (policy, &od, opath))
        conflict = true;
      fb_policy_restrict (policy, &d, od.rule);
    }

  /* Protected names that fold equal (those that are literal components are
   * in OTHERS already). */
  for (guint32 i = 0; policy->protected_map.entries != NULL && i <= policy->protected_map.mask; i++)
    {
      const FbNameEntry *e = &policy->protected_map.entries[i];
      g_autofree char *pname = NULL;
      g_autofree char *pkey = NULL;
      bool listed = false;
      FbPolicyDecision pd;

      if (e->key == NULL)
        continue;
      pname = g_strndup (e->key, e->len);
      if (strcmp (pname, name) == 0)
        continue;
      for (guint j = 0; j < others->len && !listed; j++)
        listed = strcmp (others->pdata[j], pname) == 0;
      pkey = fb_policy_fold_name (pname);
      if (listed || strcmp (pkey, key) != 0)
        continue;
      fb_policy_decide_child (policy, parent, parent_path, pname, &pd);
      fb_policy_restrict (policy, &d, pd.rule);
    }

  /* Globs, with the path and the patterns folded. */
  if (has_globs (policy) || (policy->narrow != NULL && (has_globs (policy->base) || has_globs (policy->narrow))))
    {
      g_autoptr (GPtrArray) keep = g_ptr_array_new_with_free_func (g_free);
      FoldedPath fp = {
        .parent_path = parent_path,
        .key = key,
        .n = fb_policy_path_split (parent_path, NULL, 0) + 1,
        .keep = keep,
      };

      if (policy->narrow != NULL)
        {
          restrict_by_globs (policy, policy->base, &fp, &d);
          restrict_by_globs (policy, policy->narrow, &fp, &d);
        }
      else
        restrict_by_globs (policy, policy, &fp, &d);
      g_free (fp.comps);
    }

  if (conflict)
    fb_policy_close_folded (policy, &d);
  *ret = d;
}

/* One side: globs, folded, whose match below the folded COMPS could take
 * in one of them (as fb_policy_subtree_has_rules_at asks unfolded). */
static bool
globs_below (const FbPolicy *side, const FbPathComp *comps, guint n)
{
  for (guint i = 0; side->fold_globs != NULL && i < side->n_rules; i++)
    {
      const FbGlob *g = side->fold_globs[i];

      if (g != NULL && g->max_depth > n && fb_policy_glob_could_match_through (g, comps, n))
        return true;
    }
  return false;
}

bool
fb_policy_subtree_has_rules_folded (const FbPolicy *policy, const FbPolicyDecision *decision, const char *view_path)
{
  g_autoptr (GPtrArray) keep = g_ptr_array_new_with_free_func (g_free);
  g_autofree FbPathComp *comps = NULL;
  g_autofree char *parent = NULL;
  g_autofree char *key = NULL;
  const char *slash;
  guint n;

  if (fb_policy_subtree_has_rules (policy, decision, view_path))
    return true;
  if (!fb_policy_path_is_normalized (view_path) || strcmp (view_path, "/") == 0)
    return false;
  slash = strrchr (view_path, '/');
  parent = slash == view_path ? g_strdup ("/") : g_strndup (view_path, slash - view_path);
  key = fb_policy_fold_name (slash + 1);
  comps = folded_comps (parent, key, &n, keep);
  if (policy->narrow != NULL)
    return globs_below (policy->base, comps, n) || globs_below (policy->narrow, comps, n);
  return globs_below (policy, comps, n);
}
