/* fusebox — the command line: dispatch to a subcommand.
 *
 * The program is one binary with subcommands.  This file only parses the
 * global options and hands argv to the subcommand; each subcommand parses its
 * own options (GOptionContext) and prints its own --help. */
#include "fusebox-config.h"
#include "launcher/launcher-private.h"

#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct
{
  const char *name;
  int (*run) (int argc, char **argv);
  const char *summary;
} Command;

static const Command commands[] = {
  { "policy", fb_cmd_policy, "check, explain or show a policy" },
  { "check", fb_cmd_check, "check that sandboxes can be made on this host" },
  { "run", fb_cmd_run, "run a command in a sandbox whose filesystem is the policy's view, logged" },
  { "runs", fb_cmd_runs, "list run directories, or prune those of runs that are over" },
  { "log", fb_cmd_log, "print a run's access log, or follow it" },
  { "report", fb_cmd_report, "summarise a run's access log for an auditor" },
  { "serve", fb_cmd_serve, "serve the remote API (Codex's exec-server protocol) to agent harnesses" },
  { "mount", fb_cmd_mount, "show the host's / at a directory through the policy, logged" },
};

void
fb_cmd_error (const char *format, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, format);
  msg = g_strdup_vprintf (format, ap);
  va_end (ap);
  fprintf (stderr, "fusebox: %s%s", msg, g_str_has_suffix (msg, "\n") ? "" : "\n");
}

static void
usage (FILE *out)
{
  fprintf (out,
           "Usage: fusebox COMMAND [OPTION...]\n"
           "\n"
           "A Linux sandbox whose whole view of the host's files is a FUSE filesystem\n"
           "that enforces a per-path policy and logs every access.\n"
           "\n"
           "Commands:\n");
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    fprintf (out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf (out,
           "\n"
           "Options:\n"
           "  -h, --help     show this help\n"
           "  --version      print the version\n"
           "\n"
           "Run 'fusebox COMMAND --help' for a command's options.\n"
           "Exit status: 0 success, 1 failure, 2 usage error.\n"
           "Manual: fusebox(1), fusebox-policy(5).\n");
}

int
main (int argc, char **argv)
{
  setlocale (LC_ALL, "");

  if (argc < 2)
    {
      usage (stderr);
      return FB_EXIT_USAGE;
    }
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0 || strcmp (argv[1], "help") == 0)
    {
      usage (stdout);
      return FB_EXIT_OK;
    }
  if (strcmp (argv[1], "--version") == 0)
    {
      printf ("fusebox %s\n", FUSEBOX_VERSION);
      return FB_EXIT_OK;
    }
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    if (strcmp (argv[1], commands[i].name) == 0)
      return commands[i].run (argc - 1, argv + 1);

  fb_cmd_error ("unknown command '%s'; run 'fusebox --help' for the list", argv[1]);
  return FB_EXIT_USAGE;
}
