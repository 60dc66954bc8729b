/* fusebox — the command line: dispatch to a subcommand.
 *
 * The program is one command with subcommands.  This file only parses the
 * global options and hands argv to the subcommand; each subcommand parses its
 * own options (GOptionContext) and prints its own --help.
 *
 * It is built twice.  `fusebox` has every subcommand but the remote API's
 * two, `serve` and `log --connect`: they need libsoup, whose fifteen shared
 * libraries took about 2 ms to load at the start of every `fusebox run`
 * (docs/performance.md, Startup).  For those two, `fusebox` execs
 * `fusebox-serve` (this file with FB_MAIN_REMOTE) from its own directory,
 * with the same arguments; nothing else differs. */
#include "fusebox-config.h"
#include "ipc/ipc.h"
#include "launcher/launcher-private.h"

#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FB_MAIN_REMOTE
/* The program that has serve and log --connect: beside this one, unless
 * $FUSEBOX_SERVE names one (tests, or an installation that splits bindir). */
static char *
remote_program (void)
{
  return fb_cmd_sibling_program ("FUSEBOX_SERVE", "fusebox-serve");
}

/* argv[0] is "fusebox" (or its path), argv[1] the subcommand: exec the
 * remote program with exactly these arguments.  Returns only on failure. */
static int
exec_remote (char **argv)
{
  g_autofree char *program = remote_program ();

  if (program == NULL && getenv ("FUSEBOX_SERVE") != NULL && getenv ("FUSEBOX_SERVE")[0] != '\0')
    return FB_EXIT_FAILURE; /* said */
  if (program != NULL)
    execv (program, argv);
  fb_cmd_error ("%s: can't start %s: %s; it is installed beside fusebox (or named by $FUSEBOX_SERVE): reinstall "
                "fusebox",
                argv[1], program != NULL ? program : "fusebox-serve",
                program != NULL ? g_strerror (errno) : "/proc/self/exe is unreadable");
  return FB_EXIT_FAILURE;
}

/* `fusebox log` reads files itself; only --connect needs the remote
 * program.  Any argument that spells the option sends the whole command
 * there: fusebox-serve's `log` is the same code, so a false alarm (a file
 * named --connect after "--") costs an exec, never a different answer. */
static bool
log_wants_remote (int argc, char **argv)
{
  for (int i = 2; i < argc; i++)
    if (strcmp (argv[i], "--connect") == 0 || g_str_has_prefix (argv[i], "--connect="))
      return true;
  return false;
}

/* launcher-cmd-log.c calls this only for --connect, which main() has sent
 * to fusebox-serve: unreachable here, and linking the real one would bring
 * libsoup back. */
int
fb_log_connect_follow (const char *url, const char *token_file, JsonNode *server_filter, FbLogConnectFunc func,
                       gpointer user_data)
{
  fb_cmd_error ("log: --connect is served by fusebox-serve; run it as 'fusebox log --follow --connect %s'", url);
  return FB_EXIT_FAILURE;
}
#endif

typedef struct
{
  const char *name;
  int (*run) (int argc, char **argv);
  const char *summary;
} Command;

#ifdef FB_MAIN_REMOTE
#define SERVE fb_cmd_serve
#else
#define SERVE NULL /* exec fusebox-serve */
#endif

static const Command commands[] = {
  { "policy", fb_cmd_policy, "check, explain or show a policy" },
  { "check", fb_cmd_check, "check that sandboxes can be made on this host" },
  { "run", fb_cmd_run, "run a command in a sandbox whose filesystem is the policy's view, logged" },
  { "runs", fb_cmd_runs, "list run directories, or prune those of runs that are over" },
  { "session", fb_cmd_session, "list the sessions of 'run --session', or stop one" },
  { "log", fb_cmd_log, "print a run's access log, or follow it" },
  { "report", fb_cmd_report, "summarise a run's access log for an auditor" },
  { "serve", SERVE, "serve the remote API (Codex's exec-server protocol) to agent harnesses" },
  { "mount", fb_cmd_mount, "show the host's / at a directory through the policy, logged" },
};

/* Messages quote paths, commands, names and other programs' messages
 * that may come from a sandbox, a client or anyone: each argument escaped
 * like a log's names, the format's own line breaks kept
 * (fb_text_printf). */
void
fb_cmd_error (const char *format, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, format);
  msg = fb_text_vprintf (format, ap);
  va_end (ap);
  fprintf (stderr, "fusebox: %s%s", msg, g_str_has_suffix (msg, "\n") ? "" : "\n");
}

void
fb_cmd_print (FILE *out, const char *format, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, format);
  msg = fb_text_vprintf (format, ap);
  va_end (ap);
  fputs (msg, out);
}

int
fb_cmd_usage_error (const char *command, const char *message)
{
  fb_cmd_error ("%s: %s\nRun 'fusebox %s --help' for usage.", command, message, command);
  return FB_EXIT_USAGE;
}

GOptionContext *
fb_cmd_option_context (const char *parameters, const char *summary, const char *description)
{
  GOptionContext *ctx = g_option_context_new (parameters);

  g_option_context_set_summary (ctx, summary);
  g_option_context_set_description (ctx, description);
  return ctx;
}

bool
fb_cmd_parse_options (GOptionContext *ctx, const GOptionEntry *entries, const char *command, int *argc, char ***argv)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *prgname = g_strconcat ("fusebox ", command, NULL);

  /* --help's "Usage: fusebox COMMAND", not the bare argv[0] of the command */
  g_set_prgname (prgname);
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, argc, argv, &error))
    {
      fb_cmd_usage_error (command, error->message);
      return false;
    }
  return true;
}

bool
fb_cmd_options_only (const char *command, int argc, char **argv)
{
  if (argc <= 1)
    return true;
  fb_cmd_error ("%s: unexpected argument '%s'\nRun 'fusebox %s --help' for usage.", command, argv[1], command);
  return false;
}

int
fb_cmd_usage_or_help (int argc, char **argv, void (*usage) (FILE *out))
{
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
  return -1;
}

static void
usage (FILE *out)
{
  fprintf (out, "Usage: fusebox COMMAND [OPTION...]\n"
                "\n"
                "A Linux sandbox whose whole view of the host's files is a FUSE filesystem\n"
                "that enforces a per-path policy and logs every access.\n"
                "\n"
                "Commands:\n");
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    fprintf (out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf (out, "\n"
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
  int status;

  /* A standard stream the caller closed is /dev/null here, before anything
   * is opened: else the first socket or file would take its number, and
   * what this process hands on as its stream (a ready sandbox's command
   * gets fds 0-2, launcher-cmd-session.c) or writes there (a message on
   * stderr) would be that: a session's control connection given to a
   * sandboxed command once let it stop the session. */
  for (int fd = 0; fd < 3; fd++)
    if (fcntl (fd, F_GETFD) < 0 && errno == EBADF)
      {
        int null = open ("/dev/null", O_RDWR);
        if (null != fd)
          return FB_EXIT_FAILURE;
      }

  /* The caller's character set (GLib converts what it prints to it) and
   * its language for the system's messages; not LC_ALL: fusebox formats
   * nothing by locale (numbers, times and JSON are its own, and a locale's
   * decimal comma must never reach a JSON number), and loading the other
   * eleven categories cost every command about 0.4 ms. */
  setlocale (LC_CTYPE, "");
  setlocale (LC_MESSAGES, "");
  /* GLib's messages (g_warning...) quote names too: escaped the same. */
  g_log_set_writer_func (fb_log_writer_safe, NULL, NULL);

  if ((status = fb_cmd_usage_or_help (argc, argv, usage)) >= 0)
    return status;
  if (strcmp (argv[1], "--version") == 0)
    {
      printf ("fusebox %s\n", FUSEBOX_VERSION);
      return FB_EXIT_OK;
    }
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    if (strcmp (argv[1], commands[i].name) == 0)
      {
#ifndef FB_MAIN_REMOTE
        if (commands[i].run == NULL || (commands[i].run == fb_cmd_log && log_wants_remote (argc, argv)))
          return exec_remote (argv);
#endif
        return commands[i].run (argc - 1, argv + 1);
      }

  fb_cmd_error ("unknown command '%s'; run 'fusebox --help' for the list", argv[1]);
  return FB_EXIT_USAGE;
}
