/* fusebox check — tell whether `fusebox run` can work on this host, and if
 * not, what to change.
 *
 *   fusebox check [--quiet] [--fuse-device PATH] [--timeout MS] [--workspace DIR]
 *
 * One line per prerequisite: "OK    WHAT" or "FAIL  WHAT: problem; fix: ...".
 * Then, never as a failure, whether the host folds names in the workspace
 * or in a filesystem mounted below it (report_folding).
 * The probes themselves live in launcher/launcher-check.c (fusebox run uses
 * them to explain its own failures).  Single-threaded: the probes fork.
 *
 * Exit status: 0 when every probe passed, 1 otherwise, 2 usage error.
 */
#include "launcher/launcher-private.h"
#include "launcher/launcher.h"
#include "fs/fs.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* At most this many mounts under the workspace are reported. */
#define FOLD_MAX_PATHS 64

/* /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo. */
static char *
unescape_mountinfo (const char *s)
{
  GString *out = g_string_new (NULL);

  for (; *s != '\0'; s++)
    if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7')
      {
        g_string_append_c (out, (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0')));
        s += 3;
      }
    else
      g_string_append_c (out, *s);
  return g_string_free (out, FALSE);
}

/* WORKSPACE and every mount point below it (PATHS), with the type of the
 * filesystem each is on (TYPES), from /proc/self/mountinfo. */
static void
fold_paths (const char *workspace, GPtrArray *paths, GPtrArray *types)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  g_autofree char *ws_type = g_strdup ("?");
  gsize best = 0;
  gsize wlen = strlen (workspace);

  g_ptr_array_add (paths, g_strdup (workspace));
  if (!g_file_get_contents ("/proc/self/mountinfo", &text, NULL, NULL))
    {
      g_ptr_array_add (types, g_steal_pointer (&ws_type));
      return;
    }
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_auto (GStrv) f = g_strsplit (lines[i], " ", -1);
      g_autofree char *mnt = NULL;
      const char *type = NULL;
      gsize mlen;
      guint n = g_strv_length (f);

      for (guint j = 6; j + 1 < n; j++)
        if (strcmp (f[j], "-") == 0)
          type = f[j + 1];
      if (n < 5 || type == NULL)
        continue;
      mnt = unescape_mountinfo (f[4]);
      mlen = strlen (mnt);
      /* the mount the workspace is on: the longest mount point above it */
      if ((strcmp (mnt, "/") == 0 ||
           (strncmp (workspace, mnt, mlen) == 0 && (workspace[mlen] == '/' || workspace[mlen] == '\0'))) &&
          mlen >= best)
        {
          best = mlen;
          g_free (ws_type);
          ws_type = g_strdup (type);
        }
      if (mlen > wlen && strncmp (mnt, workspace, wlen) == 0 && (mnt[wlen] == '/' || wlen == 1) &&
          paths->len < FOLD_MAX_PATHS)
        {
          g_ptr_array_add (paths, g_steal_pointer (&mnt));
          g_ptr_array_add (types, g_strdup (type));
        }
    }
  g_ptr_array_insert (types, 0, g_steal_pointer (&ws_type));
}

/* Whether the host folds names in the workspace or in a filesystem mounted
 * below it, and what fusebox does about it (fs/fs-view-fold.c): one "OK"
 * line each, never a failure.  The questions (a statfs, an ioctl) go to
 * the filesystems from a child given TIMEOUT_MS, as the probes do: a FUSE
 * server that hangs must not hang the check. */
static void
report_folding (const char *workspace, guint timeout_ms, FILE *out)
{
  g_autoptr (GPtrArray) paths = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) types = g_ptr_array_new_with_free_func (g_free);
  int answers[FOLD_MAX_PATHS];
  guint got = 0;
  bool any = false;
  int p[2];
  pid_t pid;

  fold_paths (workspace, paths, types);
  if (pipe2 (p, O_CLOEXEC) < 0)
    return;
  fflush (out);
  pid = fork ();
  if (pid < 0)
    {
      close (p[0]);
      close (p[1]);
      return;
    }
  if (pid == 0)
    {
      /* only system calls here: open, fstatfs, ioctl, write */
      close (p[0]);
      for (guint i = 0; i < paths->len; i++)
        {
          _fb_cleanup_fd_ int fd = open (paths->pdata[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
          int f = fd < 0 ? -1 : (int)fb_view_fold_detect (fd, NULL);
          if (write (p[1], &f, sizeof f) != sizeof f)
            _exit (1);
        }
      _exit (0);
    }
  close (p[1]);
  while (got < paths->len)
    {
      struct pollfd pfd = { .fd = p[0], .events = POLLIN };
      int n = poll (&pfd, 1, (int)timeout_ms);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0 || read (p[0], &answers[got], sizeof answers[got]) != sizeof answers[got])
        break;
      got++;
    }
  close (p[0]);
  kill (pid, SIGKILL);
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;

  for (guint i = 0; i < paths->len; i++)
    {
      const char *path = paths->pdata[i];
      const char *type = types->pdata[i];

      if (i >= got)
        fprintf (out,
                 "OK    case-folding names: %s (%s) did not answer in %u ms (a FUSE or network server that hangs?); "
                 "fusebox treats a filesystem it can't ask as one that may fold names\n",
                 path, type, timeout_ms);
      else if (answers[i] == FB_VIEW_FOLD_YES)
        fprintf (out,
                 "OK    case-folding names: %s (%s) folds names (case-insensitive): fusebox shows each entry there "
                 "only under its on-disk spelling and refuses names that fold equal to a rule's or a protected "
                 "name's\n",
                 path, type);
      else if (answers[i] == FB_VIEW_FOLD_MAYBE || answers[i] < 0)
        fprintf (out,
                 "OK    case-folding names: %s (%s) may fold names: fusebox tries each directory there at its first "
                 "lookup and, where it folds or can't tell, shows each entry only under its on-disk spelling and "
                 "refuses names that fold equal to a rule's or a protected name's\n",
                 path, type);
      else
        continue;
      any = true;
    }
  if (!any)
    fprintf (out, "OK    case-folding names: nothing under %s folds names (%s)\n", workspace,
             (const char *)types->pdata[0]);
}

int
fb_cmd_check (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = NULL;
  gboolean quiet = FALSE;
  g_autofree char *fuse_device = NULL;
  g_autofree char *workspace = NULL;
  int timeout_ms = 5000;
  GOptionEntry entries[] = {
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "Print only the problems", NULL },
    { "fuse-device", 0, 0, G_OPTION_ARG_FILENAME, &fuse_device, "The FUSE device to probe (default /dev/fuse)",
      "PATH" },
    { "timeout", 0, 0, G_OPTION_ARG_INT, &timeout_ms, "Give each probe this long (default 5000)", "MS" },
    { "workspace", 0, 0, G_OPTION_ARG_FILENAME, &workspace,
      "Report case-folding filesystems in and under DIR (default: the current directory)", "DIR" },
    { NULL },
  };

  ctx = fb_cmd_option_context ("- check that sandboxes can be made here",
                               "Probes each prerequisite of 'fusebox run' in a child process: user namespaces,\n"
                               "uid/gid maps, mounts in a user namespace, /dev/fuse, a FUSE mount in a user\n"
                               "namespace, a fresh procfs, seccomp filters, and one whole sandbox.  Prints one\n"
                               "line each: OK, or the problem and its fix.",
                               "Exit status: 0 run can work, 1 a prerequisite is missing, 2 usage error.\n"
                               "Manual: fusebox(1).");
  if (!fb_cmd_parse_options (ctx, entries, "check", &argc, &argv) || !fb_cmd_options_only ("check", argc, argv))
    return FB_EXIT_USAGE;
  if (timeout_ms <= 0)
    {
      fb_cmd_error ("check: --timeout %d: give a positive number of milliseconds", timeout_ms);
      return FB_EXIT_USAGE;
    }
  /* a workspace that is not there is the caller's mistake, as for run */
  if (workspace != NULL)
    {
      char *real = fb_cmd_resolve_workspace ("check", workspace);
      if (real == NULL)
        return FB_EXIT_USAGE;
      g_free (workspace);
      workspace = real;
    }

  FbLauncherCheckOptions options = {
    .fuse_path = fuse_device,
    .timeout_ms = (guint)timeout_ms,
    .quiet_ok = quiet,
  };
  fflush (stdout);
  int failures = fb_launcher_check_run (&options, stdout);
  if (!quiet)
    {
      g_autofree char *cwd = g_get_current_dir ();
      g_autofree char *ws = g_canonicalize_filename (workspace != NULL ? workspace : cwd, cwd);
      report_folding (ws, (guint)timeout_ms, stdout);
    }
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
