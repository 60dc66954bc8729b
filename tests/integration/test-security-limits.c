/* fusebox — a sandbox can't take the host's share of per-user kernel
 * objects.
 *
 * The kernel counts inotify instances and fanotify groups per user, at
 * every user-namespace level up to each namespace's owner, and a sandbox's
 * new namespace had no limit of its own: one `fusebox run` of a root caller
 * made inotify instances until root's 128 were gone, after which root's own
 * inotify_init1 (and fanotify_init: fusebox's watcher of every other run)
 * failed with EMFILE.  Now a sandbox makes instances and groups until it is
 * refused and holds them: it got at most its own limit (an eighth of the
 * caller's, which it reads in its /proc/sys/user), and the host's root
 * still gets both.
 *
 * The probe is this program inside the sandbox (`--probe hold`): it prints
 * "HELD <inotify> <fanotify> <its limit>" (fanotify -1 where the kernel
 * refuses fanotify_init to the sandbox for another reason than a count)
 * and waits for the end of the run. */
#include <signal.h>

#include "tests/lib/test-run.h"

#include <sys/fanotify.h>
#include <sys/inotify.h>

#define HOLD_MAX 100000

/* ---- inside the sandbox ---- */

static int
probe_main (int argc, char **argv)
{
  g_autofree char *limit = NULL;
  int inotify = 0, fanotify = 0;

  while (inotify < HOLD_MAX && inotify_init1 (IN_CLOEXEC) >= 0)
    inotify++;
  if (errno != EMFILE)
    {
      printf ("inotify_init1: %s\n", rfx_errname (errno));
      return 1;
    }
  while (fanotify < HOLD_MAX && fanotify_init (FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_CLOEXEC, O_RDONLY) >= 0)
    fanotify++;
  if (errno != EMFILE)
    fanotify = -1; /* not offered to the sandbox at all */
  if (!g_file_get_contents ("/proc/sys/user/max_inotify_instances", &limit, NULL, NULL))
    limit = g_strdup ("unreadable");
  printf ("HELD %d %d %s\n", inotify, fanotify, g_strstrip (limit));
  fflush (stdout);
  pause ();
  return 0;
}

/* ---- the test side ---- */

static int
host_limit (const char *name)
{
  g_autofree char *path = g_build_filename ("/proc/sys/user", name, NULL);
  g_autofree char *text = test_read_file (path);
  if (text == NULL)
    fail_msg ("%s is not readable on the host", path);
  return atoi (text);
}

typedef struct
{
  pid_t pid;
  int out;
  int inotify, fanotify, limit;
} Holder;

static void
hold_start (RFx *fx, Holder *h)
{
  g_autofree char *self = test_self ();
  h->pid = rfx_start (fx, &h->out, "--", self, "--probe", "hold", NULL);
}

static void
hold_wait (Holder *h)
{
  g_autofree char *line = test_read_line (h->out, 120000);
  if (line == NULL || sscanf (line, "HELD %d %d %d", &h->inotify, &h->fanotify, &h->limit) != 3)
    fail_msg ("the sandbox did not say what it holds: %s", line != NULL ? line : "(nothing)");
}

static void
hold_end (RFx *fx, Holder *h)
{
  assert_int_equal (kill (h->pid, SIGTERM), 0);
  assert_int_equal (rfx_wait (fx, h->pid, 60000), 128 + SIGTERM);
  close (h->out);
}

/* The host's root makes one of each, as fusebox's own watcher would. */
static void
assert_root_still_gets_them (bool fanotify_too, const char *after)
{
  int fd = inotify_init1 (IN_CLOEXEC);
  if (fd < 0)
    fail_msg ("the host's root can't make an inotify instance after %s: %s", after, g_strerror (errno));
  close (fd);
  if (!fanotify_too)
    return;
  fd = fanotify_init (FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_CLOEXEC, O_RDONLY);
  if (fd < 0)
    fail_msg ("the host's root can't make a fanotify group after %s: %s", after, g_strerror (errno));
  close (fd);
}

RFX_CASE (test_one_sandbox)
{
  int host = host_limit ("max_inotify_instances");
  int share = MAX (host / 8, 1);
  Holder h = { 0 };

  /* the host's root can make them to begin with */
  assert_root_still_gets_them (true, "nothing");
  hold_start (fx, &h);
  hold_wait (&h);
  fprintf (stderr,
           "the sandbox holds %d inotify instances and %d fanotify groups; its limit reads %d (the host's %d)\n",
           h.inotify, h.fanotify, h.limit, host);
  if (h.limit != share)
    fail_msg ("the sandbox's max_inotify_instances is %d, not an eighth of the host's %d", h.limit, host);
  if (h.inotify < 1 || h.inotify > share)
    fail_msg ("the sandbox made %d inotify instances; its share is %d", h.inotify, share);
  if (h.fanotify > MAX (host_limit ("max_fanotify_groups") / 8, 1))
    fail_msg ("the sandbox made %d fanotify groups; its share is an eighth of %d", h.fanotify,
              host_limit ("max_fanotify_groups"));
  assert_root_still_gets_them (h.fanotify >= 0, "one sandbox took all it could");
  hold_end (fx, &h);
}

RFX_DEFINE_MAIN (probe_main, NULL, RFX_TEST (test_one_sandbox))
