/* fusebox run, mount, serve — the access log's budget: what the command
 * line says (--log-file-size, --log-max-size), else the policy's "log"
 * section, else the command's default (ipc/ipc.h, documented in
 * fusebox(1)).  The log rotates past the file size and, when all of its
 * files reach the max size, the command stops what writes it with
 * fb_cmd_log_full_message(); ipc/ipc-log.c enforces it.  And whether the
 * systemd journal gets the records too (--log-journal, or the policy's
 * "log": {"journal": true}; ipc/ipc-log-journal.c).  And the workspace
 * the three take. */
#include "ipc/ipc.h"
#include "launcher/launcher-private.h"
#include "policy/policy.h"
#include "policy/util.h"

#include <errno.h>

static bool
parse_arg (const char *command, const char *option, const char *arg, guint64 min, guint64 *ret)
{
  if (arg == NULL)
    return true;
  if (!fb_policy_parse_size (arg, ret))
    {
      fb_cmd_error ("%s: %s %s: give a size in bytes, or with K, M or G (256M)\nRun 'fusebox %s --help' for usage.",
                    command, option, arg, command);
      return false;
    }
  if (*ret < min)
    {
      fb_cmd_error ("%s: %s %s: below the least this fusebox accepts, %" G_GUINT64_FORMAT
                    " bytes\nRun 'fusebox %s --help' for usage.",
                    command, option, arg, min, command);
      return false;
    }
  return true;
}

bool
fb_cmd_log_budget (const char *command, const char *file_arg, const char *max_arg, const FbPolicy *policy,
                   guint64 default_max, guint64 *ret_file_size, guint64 *ret_max_size)
{
  FbPolicyLogLimits limits = { 0 };
  guint64 file = 0, max = 0;

  if (policy != NULL)
    fb_policy_get_log_limits (policy, &limits);
  if (!parse_arg (command, "--log-file-size", file_arg, FB_POLICY_LOG_MIN_FILE_SIZE, &file) ||
      !parse_arg (command, "--log-max-size", max_arg, FB_POLICY_LOG_MIN_MAX_SIZE, &max))
    return false;
  if (file == 0)
    file = limits.file_size != 0 ? limits.file_size : FB_LOG_DEFAULT_FILE_SIZE;
  if (max == 0)
    max = limits.max_size != 0 ? limits.max_size : default_max;
  if (file > max)
    {
      /* a default file size above a small budget follows the budget */
      if (file_arg == NULL && limits.file_size == 0)
        file = max;
      else
        {
          fb_cmd_error ("%s: the log's file size (%" G_GUINT64_FORMAT
                        " bytes) is above its max size (%" G_GUINT64_FORMAT
                        " bytes): give --log-file-size at most --log-max-size",
                        command, file, max);
          return false;
        }
    }
  *ret_file_size = file;
  *ret_max_size = max;
  return true;
}

gboolean
fb_cmd_log_journal (gboolean asked, const FbPolicy *policy, const char **ret_socket)
{
  FbPolicyLogLimits limits = { 0 };
  const char *socket = g_getenv ("FUSEBOX_JOURNAL_SOCKET");

  if (policy != NULL)
    fb_policy_get_log_limits (policy, &limits);
  *ret_socket = socket != NULL && socket[0] != '\0' ? socket : NULL;
  return asked || limits.journal;
}

/* "256 MiB", or bytes when not a whole number of KiB (not g_format_size:
 * its U+00A0 is escaped on the way to a terminal). */
static char *
size_text (guint64 bytes)
{
  static const char *const units[] = { "GiB", "MiB", "KiB" };

  for (guint i = 0; i < G_N_ELEMENTS (units); i++)
    {
      guint64 unit = (guint64)1 << (10 * (G_N_ELEMENTS (units) - i));
      if (bytes >= unit && bytes % unit == 0)
        return g_strdup_printf ("%" G_GUINT64_FORMAT " %s", bytes / unit, units[i]);
    }
  return g_strdup_printf ("%" G_GUINT64_FORMAT " bytes", bytes);
}

char *
fb_cmd_log_full_message (const char *what, const char *log_path, guint64 max_size, guint64 not_written)
{
  g_autofree char *size = size_text (max_size);

  g_autofree char *lost =
    not_written > 0 ? g_strdup_printf (" (%" G_GUINT64_FORMAT " record%s past it not written, and counted in its last "
                                       "record)",
                                       not_written, not_written == 1 ? "" : "s")
                    : g_strdup ("");

  return g_strdup_printf ("the access log %s reached its budget of %s, so %s was stopped%s; raise the budget with "
                          "--log-max-size or the policy's \"log\": {\"max_size\": ...}, or see what filled it with "
                          "'fusebox report'",
                          log_path, size, what, lost);
}

bool
fb_cmd_close_run_log (FbRun *run, const char *command, const char *what)
{
  g_autoptr (GError) error = NULL;
  guint64 not_written = 0;
  bool ok = true;

  if (!fb_run_close_log (run, &error))
    {
      fb_cmd_error ("%s: the access log %s could not be completed: %s", command, fb_run_get_log_path (run),
                    error->message);
      ok = false;
    }
  if (fb_run_log_is_full (run, &not_written))
    {
      g_autofree char *msg =
        fb_cmd_log_full_message (what, fb_run_get_log_path (run), fb_run_get_log_max_size (run), not_written);
      fb_cmd_error ("%s: %s", command, msg);
      fb_run_set_error (run, msg, NULL);
      ok = false;
    }
  return ok;
}

void
fb_cmd_run_args_clear (FbCmdRunArgs *args)
{
  g_free (args->policy);
  g_free (args->workspace);
  g_free (args->log);
  g_free (args->level);
  g_free (args->log_file_size);
  g_free (args->log_max_size);
  g_free (args->workspace_real);
}

int
fb_cmd_run_args_create_run (const FbCmdRunArgs *args, const char *command, const char *default_spec, FbRun *run,
                            guint64 default_max, guint64 *ret_file_size, guint64 *ret_max_size)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) policy = NULL;

  if (fb_run_check_reachable (run, &error))
    policy = fb_policy_load_spec (args->policy != NULL ? args->policy : default_spec, fb_run_get_vars (run), &error);
  if (policy == NULL)
    {
      fb_cmd_error ("%s: %s", command, error->message);
      return FB_EXIT_FAILURE;
    }
  return fb_cmd_create_run (command, run, policy, args->log_file_size, args->log_max_size, default_max, ret_file_size,
                            ret_max_size);
}

bool
fb_cmd_workspace_reachable (const char *command, const char *dir)
{
  g_autoptr (GError) error = NULL;

  /* its realpath would wait for good on such a filesystem's server */
  if (fb_path_check_not_foreign_fuse (dir, "--workspace", "give a directory on a filesystem of yours or root's",
                                      &error))
    return true;
  fb_cmd_error ("%s: %s", command, error->message);
  return false;
}

char *
fb_cmd_resolve_workspace (const char *command, const char *dir)
{
  g_autofree char *real = NULL;

  if (!fb_cmd_workspace_reachable (command, dir))
    return NULL;
  real = fb_realpath (dir);

  if (real == NULL || !g_file_test (real, G_FILE_TEST_IS_DIR))
    {
      fb_cmd_error ("%s: --workspace %s: %s; give the path of an existing directory", command, dir,
                    real == NULL ? g_strerror (errno) : "not a directory");
      return NULL;
    }
  return g_steal_pointer (&real);
}

int
fb_cmd_create_run (const char *command, FbRun *run, FbPolicy *policy, const char *file_arg, const char *max_arg,
                   guint64 default_max, guint64 *ret_file_size, guint64 *ret_max_size)
{
  g_autoptr (GError) error = NULL;

  if (!fb_cmd_log_budget (command, file_arg, max_arg, policy, default_max, ret_file_size, ret_max_size))
    return FB_EXIT_USAGE;
  if (!fb_run_create (run, policy, &error))
    {
      fb_cmd_error ("%s: %s", command, error->message);
      return FB_EXIT_FAILURE;
    }
  return -1;
}
