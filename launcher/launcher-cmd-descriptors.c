/* fusebox run, mount, serve — what the descriptor budget came to
 * (fs/fs-view-fd.c): the soft RLIMIT_NOFILE raised to the hard one, the
 * share of it the views may use, and a warning when a sandbox's share is
 * small enough for ordinary tools (a build, a language server) to meet. */
#include "fs/fs.h"
#include "launcher/launcher-private.h"

/* Below this many files for one sandbox, the budget is worth a warning. */
#define FD_SANDBOX_FILES_LOW 512

char *
fb_cmd_fd_budget_note (bool *ret_low)
{
  FbViewFdBudget b;

  /* raises the soft limit (once per process) */
  fb_view_fd_budget (&b);
  if (ret_low != NULL)
    *ret_low = b.shared / 2 < FD_SANDBOX_FILES_LOW;
  if (b.floors > 0)
    return g_strdup_printf ("descriptors: RLIMIT_NOFILE %" G_GUINT64_FORMAT "%s: up to %u directories cached and "
                            "%u files open, %u of them kept for each of up to %u running sandboxes and at most %u "
                            "more for one client (EMFILE past it); %u kept for the rest",
                            b.limit, b.limit == b.hard ? " (the hard limit)" : "", b.dir_max, b.file_max, b.floor,
                            b.floors, b.shared / 2, b.reserve);
  return g_strdup_printf ("descriptors: RLIMIT_NOFILE %" G_GUINT64_FORMAT "%s: up to %u directories cached and %u "
                          "files open, at most %u by one sandbox (EMFILE past it); %u kept for the rest",
                          b.limit, b.limit == b.hard ? " (the hard limit)" : "", b.dir_max, b.file_max, b.shared / 2,
                          b.reserve);
}

void
fb_cmd_fd_budget_warn (const char *command)
{
  bool low = false;
  g_autofree char *note = fb_cmd_fd_budget_note (&low);

  if (low)
    fb_cmd_print (stderr, "fusebox: %s: warning: %s; raise the hard limit (ulimit -Hn, LimitNOFILE=) for more\n",
                  command, note);
}
