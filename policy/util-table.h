/* fusebox — an enum's table: one row per value, the value's name a member
 * of the row, every other per-value fact a column, as systemd writes its
 * string tables.  The header declares (FB_DECLARE_*), one .c file defines
 * the table and FB_DEFINE_STRING_TABLE. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <string.h>

/* String tables (one row per value of an enum, its name a member of the
 * row): the index of the row of TABLE, N rows of SIZE bytes, whose name (a
 * const char * at OFFSET in each row) is S; -1 when none is, or S is NULL.
 * FB_TABLE_FIND (table, n, member, s) for an array of structs. */
static inline int
fb_table_find (const void *table, gsize n, gsize size, gsize offset, const char *s)
{
  for (gsize i = 0; s != NULL && i < n; i++)
    {
      const char *name = *(const char *const *)(const void *)((const char *)table + i * size + offset);

      if (name != NULL && strcmp (name, s) == 0)
        return (int)i;
    }
  return -1;
}
#define FB_TABLE_FIND(table, n, member, s)                                                                             \
  fb_table_find ((table), (n), sizeof (table)[0], G_STRUCT_OFFSET (__typeof__ ((table)[0]), member), (s))
/* PREFIX_to_string (TYPE) and PREFIX_from_string (const char *, TYPE *),
 * declared in a header, for TABLE of N rows with a `name` member, as systemd
 * defines its string tables: "invalid" for a value outside the table, false
 * for a name it does not hold. */
#define FB_DEFINE_STRING_TABLE(prefix, Type, table, n)                                                                 \
  const char *prefix##_to_string (Type value)                                                                          \
  {                                                                                                                    \
    return (guint)value < (n) ? (table)[value].name : "invalid";                                                       \
  }                                                                                                                    \
  bool prefix##_from_string (const char *s, Type *ret_value)                                                           \
  {                                                                                                                    \
    int i = FB_TABLE_FIND (table, n, name, s);                                                                         \
                                                                                                                       \
    if (i < 0)                                                                                                         \
      return false;                                                                                                    \
    if (ret_value != NULL)                                                                                             \
      *ret_value = (Type)i;                                                                                            \
    return true;                                                                                                       \
  }

/* The row of a table that holds nothing but the value's name. */
typedef struct
{
  const char *name;
} FbNameRow;

/* The declarations FB_DEFINE_STRING_TABLE defines: PREFIX_to_string and
 * PREFIX_from_string. */
#define FB_DECLARE_STRING_TABLE(prefix, Type)                                                                          \
  const char *prefix##_to_string (Type value);                                                                         \
  bool prefix##_from_string (const char *s, Type *ret_value)

/* TABLE, N rows of INFO defined in a .c file, and PREFIX_info: the row of a
 * TYPE value, FALLBACK's for a value outside the enum (the caller picks the
 * safe one: the narrowest access, a refusal). */
#define FB_DECLARE_INFO_TABLE(prefix, Type, Info, table, n, fallback)                                                  \
  extern const Info table[n];                                                                                          \
  static inline const Info *prefix##_info (Type value)                                                                 \
  {                                                                                                                    \
    return &table[(guint)value < (n) ? value : (fallback)];                                                            \
  }
