/* fusebox — the name maps of the policy engine: open addressing keyed by a
 * byte range, so a decision can probe a component of a longer path without
 * copying it.  Built at load time, read-only afterwards (hence safe to read
 * from any thread). */
#include "policy/policy-private.h"

static void
grow (FbNameMap *map)
{
  guint32 old_size = map->entries != NULL ? map->mask + 1 : 0;
  guint32 size = old_size != 0 ? old_size * 2 : 8;
  FbNameEntry *old = map->entries;

  map->entries = g_new0 (FbNameEntry, size);
  map->mask = size - 1;
  for (guint32 i = 0; i < old_size; i++)
    if (old[i].key != NULL)
      {
        guint32 j = old[i].hash & map->mask;

        while (map->entries[j].key != NULL)
          j = (j + 1) & map->mask;
        map->entries[j] = old[i];
      }
  g_free (old);
}

gpointer
fb_name_map_insert (FbNameMap *map, const char *key, gsize len, gpointer value)
{
  guint32 hash = fb_name_hash (key, len);

  /* Keep the load at most 1/2 so that misses stop early. */
  if (map->entries == NULL || (map->n + 1) * 2 > map->mask + 1)
    grow (map);
  for (guint32 i = hash & map->mask;; i = (i + 1) & map->mask)
    {
      FbNameEntry *e = &map->entries[i];

      if (e->key == NULL)
        {
          e->key = key;
          e->len = (guint32)len;
          e->hash = hash;
          e->value = value;
          map->n++;
          return NULL;
        }
      if (e->hash == hash && e->len == len && memcmp (e->key, key, len) == 0)
        {
          gpointer old = e->value;

          e->value = value;
          return old;
        }
    }
}

void
fb_name_map_clear (FbNameMap *map)
{
  g_clear_pointer (&map->entries, g_free);
  map->mask = 0;
  map->n = 0;
}

const char *const fb_policy_no_names[] = { NULL };

const char **
fb_policy_names_new (GPtrArray *names)
{
  const char **out;

  if (names->len == 0)
    return (const char **)fb_policy_no_names;
  out = g_new (const char *, names->len + 1);
  memcpy (out, names->pdata, names->len * sizeof (char *));
  out[names->len] = NULL;
  return out;
}

void
fb_policy_names_free (const char **names)
{
  if (names != (const char **)fb_policy_no_names)
    g_free (names);
}
