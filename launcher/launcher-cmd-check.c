/* fusebox check — tell whether `fusebox run` can work on this host, and if
 * not, what to change.
 *
 *   fusebox check [--quiet] [--fuse-device PATH] [--timeout MS]
 *
 * One line per prerequisite: "OK    WHAT" or "FAIL  WHAT: problem; fix: ...".
 * The probes themselves live in launcher/launcher-check.c (fusebox run uses
 * them to explain its own failures).  Single-threaded: the probes fork.
 *
 * Exit status: 0 when every probe passed, 1 otherwise, 2 usage error.
 */
#include "launcher/launcher-private.h"
#include "launcher/launcher.h"

#include <stdio.h>

int
fb_cmd_check (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = NULL;
  g_autoptr (GError) error = NULL;
  gboolean quiet = FALSE;
  g_autofree char *fuse_device = NULL;
  int timeout_ms = 5000;
  GOptionEntry entries[] = {
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "Print only the problems", NULL },
    { "fuse-device", 0, 0, G_OPTION_ARG_FILENAME, &fuse_device, "The FUSE device to probe (default /dev/fuse)",
      "PATH" },
    { "timeout", 0, 0, G_OPTION_ARG_INT, &timeout_ms, "Give each probe this long (default 5000)", "MS" },
    { NULL },
  };

  g_set_prgname ("fusebox check");
  ctx = g_option_context_new ("- check that sandboxes can be made here");
  g_option_context_set_summary (ctx, "Probes each prerequisite of 'fusebox run' in a child process: user namespaces,\n"
                                     "uid/gid maps, mounts in a user namespace, /dev/fuse, a FUSE mount in a user\n"
                                     "namespace, a fresh procfs, seccomp filters, and one whole sandbox.  Prints one\n"
                                     "line each: OK, or the problem and its fix.");
  g_option_context_set_description (ctx, "Exit status: 0 run can work, 1 a prerequisite is missing, 2 usage error.\n"
                                         "Manual: fusebox(1).");
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      fb_cmd_error ("check: %s\nRun 'fusebox check --help' for usage.", error->message);
      return FB_EXIT_USAGE;
    }
  if (argc > 1)
    {
      fb_cmd_error ("check: unexpected argument '%s'\nRun 'fusebox check --help' for usage.", argv[1]);
      return FB_EXIT_USAGE;
    }
  if (timeout_ms <= 0)
    {
      fb_cmd_error ("check: --timeout %d: give a positive number of milliseconds", timeout_ms);
      return FB_EXIT_USAGE;
    }

  FbLauncherCheckOptions options = {
    .fuse_path = fuse_device,
    .timeout_ms = (guint)timeout_ms,
    .quiet_ok = quiet,
  };
  fflush (stdout);
  int failures = fb_launcher_check_run (&options, stdout);
  if (failures > 0)
    {
      fprintf (stdout, "%d prerequisite%s missing: 'fusebox run' will not work until %s fixed.\n", failures,
               failures == 1 ? " is" : "s are", failures == 1 ? "it is" : "they are");
      return FB_EXIT_FAILURE;
    }
  if (!quiet)
    printf ("'fusebox run' can work here.\n");
  return FB_EXIT_OK;
}
