/* fusebox log, fusebox report — read a run's access log.
 *
 * Both read through FbLogReader (ipc/), so rotated files come first, a
 * truncated last line (a daemon killed mid-write) is a warning and not an
 * error, and seq gaps are reported.  Warnings go to stderr; they don't change
 * the exit status, which is 0 when the log could be read, 1 when it could
 * not (not found, unreadable), 2 for a usage error.
 *
 * `fusebox log --follow --connect URL` reads a live server's log/subscribe
 * instead (launcher-cmd-log-connect.c) and prints through the same filter and
 * printer: 0 when interrupted, 1 when the server can't be reached or goes
 * away. */
#include "launcher/launcher-private.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "policy/util.h"

/* How often --follow looks for more.  Polling rather than inotify: it works
 * on every filesystem the log may live on, and a rotation is caught by the
 * inode check whatever the notification backend would have said. */
#define FOLLOW_POLL_USEC (200 * 1000)

typedef struct
{
  gboolean denied;
  GPtrArray *ops; /* char*; empty = all */
  char *path;     /* normalized prefix or NULL */
  gboolean has_since;
  gint64 since_us;
} Filter;

static void
filter_clear (Filter *f)
{
  if (f->ops != NULL)
    g_ptr_array_unref (f->ops);
  g_free (f->path);
}

static gboolean
path_under (const char *path, const char *prefix)
{
  size_t n = strlen (prefix);

  if (path == NULL)
    return FALSE;
  if (strcmp (prefix, "/") == 0)
    return path[0] == '/';
  return strncmp (path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static gboolean
filter_match (const Filter *f, JsonObject *o)
{
  if (f->denied && !fb_decision_name_is_refusal (fb_json_member_string (o, "decision")))
    return FALSE;
  if (f->ops->len > 0)
    {
      const char *op = fb_json_member_string (o, "op");
      gboolean found = FALSE;

      for (guint i = 0; op != NULL && i < f->ops->len && !found; i++)
        found = strcmp (op, f->ops->pdata[i]) == 0;
      if (!found)
        return FALSE;
    }
  if (f->path != NULL && !path_under (fb_json_member_string (o, "path"), f->path) &&
      !path_under (fb_json_member_string (o, "target"), f->path))
    return FALSE;
  if (f->has_since)
    {
      gint64 us;

      /* A record without a readable time can't be shown to be recent. */
      if (!fb_ipc_parse_time (fb_json_member_string (o, "ts"), &us) || us < f->since_us)
        return FALSE;
    }
  return TRUE;
}

/* --since: RFC 3339 or an age ("90s", "10m", "2h", "1d", "1w"). */
static gboolean
parse_since (const char *s, gint64 *ret_us)
{
  char *end = NULL;
  guint64 n;
  gint64 unit;

  if (fb_ipc_parse_time (s, ret_us))
    return TRUE;
  if (!g_ascii_isdigit (s[0]))
    return FALSE;
  n = g_ascii_strtoull (s, &end, 10);
  if (end == NULL || end[0] == '\0' || end[1] != '\0')
    return FALSE;
  switch (end[0])
    {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = 60;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'd':
        unit = 86400;
        break;
      case 'w':
        unit = 7 * 86400;
        break;
      default:
        return FALSE;
    }
  if (n > (guint64)(G_MAXINT64 / G_USEC_PER_SEC / unit))
    return FALSE;
  *ret_us = g_get_real_time () - (gint64)n * unit * G_USEC_PER_SEC;
  return TRUE;
}

static char *
resolve (char **args, int nargs, gboolean follow, gboolean *ret_absent, GError **error)
{
  return fb_run_resolve_log (nargs > 0 ? args[0] : NULL, follow, ret_absent, error);
}

static gboolean
want_color (const char *when, gboolean *ret)
{
  if (when == NULL || strcmp (when, "auto") == 0)
    {
      const char *no_color = g_getenv ("NO_COLOR");
      const char *term = g_getenv ("TERM");

      /* https://no-color.org: set and not empty disables colour. */
      *ret = isatty (STDOUT_FILENO) && (no_color == NULL || no_color[0] == '\0') && g_strcmp0 (term, "dumb") != 0;
      return TRUE;
    }
  if (strcmp (when, "always") == 0)
    *ret = TRUE;
  else if (strcmp (when, "never") == 0)
    *ret = FALSE;
  else
    return FALSE;
  return TRUE;
}

typedef struct
{
  const Filter *filter;
  gboolean json;
  gboolean color;
} Printer;

/* One record, as --json or for people: the same for a file and a server. */
static void
print_record (const char *line, JsonObject *object, gpointer user_data)
{
  const Printer *p = user_data;

  if (!filter_match (p->filter, object))
    return;
  if (p->json)
    {
      /* The writer escapes what a terminal must not see raw; a line it did
       * not write (a server's, a damaged file's) is written again with the
       * same escaping rather than trusted. */
      if (fb_text_is_safe (line, -1))
        fputs (line, stdout);
      else
        {
          g_autoptr (JsonNode) node = json_node_init_object (json_node_alloc (), object);
          g_autofree char *text = fb_json_to_string (node, FALSE);

          fputs (text, stdout);
        }
    }
  else
    {
      g_autofree char *text = fb_log_record_format (object, p->color);

      fputs (text, stdout);
    }
  fputc ('\n', stdout);
}

/* What log/subscribe's `filter` can do for us (ipc-rpc-log.c: op, decision,
 * session, pathPrefix), so that the server sends less.  Everything is still
 * checked here too: --path also matches a rename's target, which pathPrefix
 * does not, so it stays local, and --since has no server equivalent. */
static JsonNode *
server_filter (const Filter *f)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();

  if (!f->denied && f->ops->len == 0)
    return NULL;
  json_builder_begin_object (b);
  if (f->denied)
    {
      json_builder_set_member_name (b, "decision");
      json_builder_begin_array (b);
      for (guint i = 0; i < FB_DECISION_N; i++)
        if (fb_decision_table[i].refusal)
          json_builder_add_string_value (b, fb_decision_table[i].name);
      json_builder_end_array (b);
    }
  if (f->ops->len > 0)
    {
      json_builder_set_member_name (b, "op");
      json_builder_begin_array (b);
      for (guint i = 0; i < f->ops->len; i++)
        json_builder_add_string_value (b, f->ops->pdata[i]);
      json_builder_end_array (b);
    }
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* COMMAND's options (ENTRIES) out of *ARGC, *ARGV; false after the usage
 * message. */
static bool
parse_options (GOptionContext *ctx, const GOptionEntry *entries, const char *command, int *argc, char ***argv)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *prgname = g_strconcat ("fusebox ", command, NULL);

  g_set_prgname (prgname); /* --help's "Usage: fusebox COMMAND" */
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, argc, argv, &error))
    {
      fb_cmd_error ("%s: %s; run 'fusebox %s --help'", command, error->message, command);
      return false;
    }
  return true;
}

/* The log that REST (a run id, a run directory or a file; none: the newest
 * run) names, open for reading; NULL after COMMAND's message. */
static FbLogReader *
open_reader (const char *command, char **rest, gboolean follow)
{
  g_autoptr (GError) error = NULL;
  gboolean absent = FALSE;
  g_autofree char *log_path = resolve (rest, rest != NULL ? (int)g_strv_length (rest) : 0, follow, &absent, &error);
  FbLogReader *reader = log_path != NULL ? fb_log_reader_new (log_path, follow, &error) : NULL;

  if (reader == NULL)
    fb_cmd_error ("%s: %s", command, error->message);
  else if (absent)
    /* as tail -F: the run may not have started yet, or not written */
    fb_cmd_error ("%s: note: no access log at %s yet: waiting for one (stop with Ctrl-C)", command, log_path);
  else if (fb_log_reader_get_owner (reader) != geteuid ())
    /* none of its files is ours: another user's log, as trustworthy as
     * that user (files of other users still are skipped) */
    fb_cmd_error ("%s: note: the log %s is uid %u's, not yours (uid %u): its records are what that user's files "
                  "hold",
                  command, log_path, (unsigned)fb_log_reader_get_owner (reader), (unsigned)geteuid ());
  return reader;
}

/* Warnings about the log's integrity: on stderr, never fatal. */
static void
warn (GError *error)
{
  fb_cmd_error ("warning: %s", error->message);
}

int
fb_cmd_log (int argc, char **argv)
{
  gboolean follow = FALSE, json = FALSE, denied = FALSE, color = FALSE;
  g_auto (GStrv) ops = NULL;
  g_autofree char *path = NULL, *since = NULL, *color_when = NULL;
  g_autofree char *connect = NULL, *token_file = NULL;
  g_auto (GStrv) rest = NULL;
  g_autoptr (GOptionContext) ctx = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = NULL;
  Filter filter = { 0 };
  int status = FB_EXIT_OK;
  const GOptionEntry entries[] = {
    { "follow", 'f', 0, G_OPTION_ARG_NONE, &follow, "Keep printing as the log grows, across rotation (like tail -F)",
      NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print the records' JSON lines as they are", NULL },
    { "denied", 0, 0, G_OPTION_ARG_NONE, &denied, "Only denials (deny, hide, readonly)", NULL },
    { "op", 0, 0, G_OPTION_ARG_STRING_ARRAY, &ops, "Only operation OP (repeat, or separate with commas)", "OP" },
    { "path", 0, 0, G_OPTION_ARG_FILENAME, &path, "Only records whose path or target is PREFIX or below it", "PREFIX" },
    { "since", 0, 0, G_OPTION_ARG_STRING, &since,
      "Only records at or after TIME: RFC 3339 (no zone: local time) or an age such as 90s, 10m, 2h, 1d, 1w", "TIME" },
    { "color", 0, 0, G_OPTION_ARG_STRING, &color_when, "Colour: auto (a terminal, unless NO_COLOR), always, never",
      "WHEN" },
    { "connect", 0, 0, G_OPTION_ARG_STRING, &connect,
      "With --follow: show a live `fusebox serve`'s events (log/subscribe) instead of a file",
      "ws://HOST:PORT|unix:PATH" },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
      "With --connect ws://: the bearer token the server was given with --token-file", "FILE" },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &rest, NULL, "[RUN|FILE]" },
    { NULL },
  };

  ctx = fb_cmd_option_context ("- print an access log",
                               "RUN is a run id, a run directory or a log file; without it, the newest run.\n"
                               "For people: one line per record (local time, process[pid], op, path, "
                               "decision, errno, the rule's reason),\ncoloured on a terminal.\n"
                               "--follow --connect URL shows a live `fusebox serve --listen URL` instead, as\n"
                               "it happens (filters alike), until Ctrl-C or the server stops (exit 1).",
                               NULL);
  if (!parse_options (ctx, entries, "log", &argc, &argv))
    return FB_EXIT_USAGE;
  if (rest != NULL && g_strv_length (rest) > 1)
    {
      fb_cmd_error ("log: one RUN or FILE at most, got %u; run 'fusebox log --help'", g_strv_length (rest));
      return FB_EXIT_USAGE;
    }
  if (connect != NULL && !follow)
    {
      /* Not an implicit --follow: a server has no past to print, and a
       * command that would never end without saying so is a surprise. */
      fb_cmd_error ("log: --connect shows a live server's events and needs --follow; run 'fusebox log --follow "
                    "--connect %s'",
                    connect);
      return FB_EXIT_USAGE;
    }
  if (connect != NULL && rest != NULL && rest[0] != NULL)
    {
      fb_cmd_error ("log: --connect reads a server, not '%s'; give one of them", rest[0]);
      return FB_EXIT_USAGE;
    }
  if (token_file != NULL && connect == NULL)
    {
      fb_cmd_error ("log: --token-file is for --connect ws://...");
      return FB_EXIT_USAGE;
    }
  if (!want_color (color_when, &color))
    {
      fb_cmd_error ("log: --color must be auto, always or never, not '%s'", color_when);
      return FB_EXIT_USAGE;
    }

  filter.denied = denied;
  filter.ops = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; ops != NULL && ops[i] != NULL; i++)
    {
      g_auto (GStrv) parts = g_strsplit (ops[i], ",", -1);

      for (guint j = 0; parts[j] != NULL; j++)
        if (parts[j][0] != '\0')
          g_ptr_array_add (filter.ops, g_strdup (g_strstrip (parts[j])));
    }
  if (path != NULL)
    {
      gsize n = strlen (path);

      /* "/work/" and "/work" mean the same subtree. */
      while (n > 1 && path[n - 1] == '/')
        n--;
      filter.path = g_strndup (path, n);
      if (filter.path[0] != '/')
        {
          fb_cmd_error ("log: --path takes a view path starting with '/', not '%s'", path);
          filter_clear (&filter);
          return FB_EXIT_USAGE;
        }
    }
  if (since != NULL)
    {
      if (!parse_since (since, &filter.since_us))
        {
          fb_cmd_error ("log: --since '%s' is neither an RFC 3339 time (2024-05-01T12:00:00Z) nor an age (10m, "
                        "2h, 1d)",
                        since);
          filter_clear (&filter);
          return FB_EXIT_USAGE;
        }
      filter.has_since = TRUE;
    }

  if (connect != NULL)
    {
      Printer printer = { &filter, json, color };
      g_autoptr (JsonNode) sf = server_filter (&filter);

      /* Each event is shown as it arrives, not when a buffer fills. */
      setvbuf (stdout, NULL, _IOLBF, 0);
      status = fb_log_connect_follow (connect, token_file, sf, print_record, &printer);
      if (fflush (stdout) != 0)
        status = FB_EXIT_FAILURE;
      filter_clear (&filter);
      return status;
    }

  reader = open_reader ("log", rest, follow);
  if (reader == NULL)
    {
      filter_clear (&filter);
      return FB_EXIT_FAILURE;
    }

  for (;;)
    {
      g_autoptr (FbLogRecord) rec = NULL;
      FbLogReadStatus st = fb_log_reader_next (reader, &rec, &error);

      switch (st)
        {
          case FB_LOG_READ_RECORD:
            {
              Printer printer = { &filter, json, color };

              print_record (rec->line, rec->object, &printer);
            }
            break;
          case FB_LOG_READ_EOF:
            if (!follow)
              goto out;
            /* Someone tailing sees each batch as soon as it is read. */
            fflush (stdout);
            g_usleep (FOLLOW_POLL_USEC);
            break;
          case FB_LOG_READ_GAP:
          case FB_LOG_READ_BAD_LINE:
          case FB_LOG_READ_TRUNCATED:
          case FB_LOG_READ_SKIPPED:
          case FB_LOG_READ_NOTE:
            fflush (stdout);
            warn (error);
            g_clear_error (&error);
            break;
          case FB_LOG_READ_ERROR:
          default:
            fb_cmd_error ("log: %s", error->message);
            status = FB_EXIT_FAILURE;
            goto out;
        }
    }
out:
  if (fflush (stdout) != 0)
    status = FB_EXIT_FAILURE;
  filter_clear (&filter);
  return status;
}

/* The count of records the run's run.json says were written, when the log
 * read is a run directory's and the run is over: the report compares it
 * with the log (a log rewritten through a name a sandbox could reach, or
 * cut short, has no gap to show).  A run.json of another owner than the
 * log's (OWNER) is not taken: a --log named access.jsonl in a shared
 * directory has whatever another user put beside it, which would make the
 * real log look changed, or vouch for it.  Names are looked at only
 * through what the kernel holds: a mount there is not asked. */
static void
expect_from_run_json (FbReport *report, char **rest, uid_t owner)
{
  g_autofree char *log_path = resolve (rest, rest != NULL ? (int)g_strv_length (rest) : 0, FALSE, NULL, NULL);
  g_autofree char *base = log_path != NULL ? g_path_get_basename (log_path) : NULL;
  g_autofree char *dir = log_path != NULL ? g_path_get_dirname (log_path) : NULL;
  g_autoptr (JsonObject) info = NULL;
  const char *run;
  gint64 records;

  /* a run directory's log (a --log elsewhere has no run.json beside it) */
  if (base == NULL || !g_str_has_prefix (base, "access.") || !g_str_has_suffix (base, ".jsonl"))
    return;
  {
    g_autofree char *json_path = g_build_filename (dir, "run.json", NULL);
    /* the directory walked (another user may have swapped it for a link
     * into their FUSE filesystem since the log was read), the name looked
     * at in what the walk found */
    _fb_cleanup_fd_ int dir_fd = fb_path_open_not_foreign_fuse (dir, "the log's directory", "", NULL);
    struct stat st;
    int r = dir_fd >= 0 ? fb_lstat_cached (dir_fd, "run.json", &st) : -1;

    if (r == 0 && S_ISREG (st.st_mode) && st.st_uid != owner)
      {
        fb_cmd_error ("report: warning: %s belongs to uid %u, not to uid %u, whose log it is beside; skipped, the log "
                      "is not checked against it (whoever can write in %s may have put it there)",
                      json_path, (unsigned)st.st_uid, (unsigned)owner, dir);
        fb_report_expect_none (report, dir, "unreadable");
        return;
      }
    info = r == 0 ? fb_cmd_read_run_json (dir, "report") : NULL;
    if (info == NULL)
      {
        /* missing, or unreadable (said by fb_cmd_read_run_json) */
        fb_report_expect_none (report, dir, r < 0 && errno == ENOENT ? "missing" : "unreadable");
        return;
      }
  }
  run = fb_json_member_string (info, "run");
  records = fb_json_member_int (info, "records", -1);
  if (!json_object_has_member (info, "ended") || records < 0)
    fb_report_expect_none (report, dir, "not-ended");
  else if (run != NULL)
    fb_report_expect (report, run, records);
}

int
fb_cmd_report (int argc, char **argv)
{
  gboolean json = FALSE;
  g_auto (GStrv) rest = NULL;
  g_autoptr (GOptionContext) ctx = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (FbLogReader) reader = NULL;
  g_autoptr (FbReport) report = fb_report_new ();
  FbLogReaderStats stats;
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print the summary as one JSON object (shape in fusebox(1))", NULL },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &rest, NULL, "[RUN|FILE]" },
    { NULL },
  };

  ctx = fb_cmd_option_context ("- summarise a run's access log",
                               "Files created, written, renamed, deleted and read; denials by rule and by\n"
                               "process; totals and the log's integrity (seq gaps).  RUN is a run id, a run\n"
                               "directory or a log file; without it, the newest run.",
                               NULL);
  if (!parse_options (ctx, entries, "report", &argc, &argv))
    return FB_EXIT_USAGE;
  if (rest != NULL && g_strv_length (rest) > 1)
    {
      fb_cmd_error ("report: one RUN or FILE at most, got %u", g_strv_length (rest));
      return FB_EXIT_USAGE;
    }
  reader = open_reader ("report", rest, FALSE);
  if (reader == NULL)
    return FB_EXIT_FAILURE;
  for (;;)
    {
      g_autoptr (FbLogRecord) rec = NULL;
      FbLogReadStatus st = fb_log_reader_next (reader, &rec, &error);

      if (st == FB_LOG_READ_EOF)
        break;
      if (st == FB_LOG_READ_RECORD)
        fb_report_add_record (report, rec->object);
      else if (st == FB_LOG_READ_ERROR)
        {
          fb_cmd_error ("report: %s", error->message);
          return FB_EXIT_FAILURE;
        }
      else
        {
          warn (error);
          g_clear_error (&error);
        }
    }
  fb_log_reader_get_stats (reader, &stats);
  fb_report_set_reader_stats (report, &stats);
  expect_from_run_json (report, rest, fb_log_reader_get_owner (reader));

  if (json)
    {
      g_autoptr (JsonNode) root = fb_report_to_json (report);
      /* Not json-glib's generator: it writes C1 controls and U+2028 raw. */
      g_autofree char *text = fb_json_to_string (root, TRUE);

      fputs (text, stdout);
      fputc ('\n', stdout);
    }
  else
    {
      g_autofree char *text = fb_report_to_text (report);

      fputs (text, stdout);
    }
  return fflush (stdout) == 0 ? FB_EXIT_OK : FB_EXIT_FAILURE;
}
