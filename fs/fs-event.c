/* fusebox — names of the access event's enums, as written in the access log. */
#include "fs/fs-event.h"

#include <errno.h>
#include <string.h>

static const char *const level_names[] = {
  [FB_LOG_LEVEL_MUTATIONS] = "mutations",
  [FB_LOG_LEVEL_OPENS] = "opens",
  [FB_LOG_LEVEL_ALL] = "all",
};

const FbDecisionInfo fb_decision_table[FB_DECISION_N] = {
  [FB_DECISION_ALLOW] = { .name = "allow" },
  [FB_DECISION_DENY] = { .name = "deny", .err = EACCES, .refusal = true, .told = true },
  [FB_DECISION_HIDE] = { .name = "hide", .err = ENOENT, .refusal = true },
  [FB_DECISION_READONLY] = { .name = "readonly", .err = EROFS, .refusal = true, .told = true },
};

static int
lookup_name (const char *const *names, guint n, const char *s)
{
  for (guint i = 0; s != NULL && i < n; i++)
    if (strcmp (s, names[i]) == 0)
      return (int) i;
  return -1;
}

const char *
fb_log_level_to_string (FbLogLevel level)
{
  return (guint) level < G_N_ELEMENTS (level_names) ? level_names[level] : "invalid";
}

bool
fb_log_level_from_string (const char *s, FbLogLevel *ret_level)
{
  int i = lookup_name (level_names, G_N_ELEMENTS (level_names), s);

  if (i < 0)
    return false;
  if (ret_level != NULL)
    *ret_level = (FbLogLevel) i;
  return true;
}

const char *
fb_decision_to_string (FbDecision d)
{
  return (guint)d < FB_DECISION_N ? fb_decision_table[d].name : "invalid";
}

bool
fb_decision_from_string (const char *s, FbDecision *ret_decision)
{
  for (guint i = 0; s != NULL && i < FB_DECISION_N; i++)
    if (strcmp (s, fb_decision_table[i].name) == 0)
      {
        if (ret_decision != NULL)
          *ret_decision = (FbDecision)i;
        return true;
      }
  return false;
}

bool
fb_decision_name_is_refusal (const char *name)
{
  FbDecision d;

  return !fb_decision_from_string (name, &d) || fb_decision_table[d].refusal;
}
