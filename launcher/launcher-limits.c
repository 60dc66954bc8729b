/* fusebox — the sandbox's share of what the kernel counts per user.
 *
 * Inotify instances and watches, fanotify groups and marks and namespaces
 * are counted per user namespace and per uid, and a new user namespace
 * starts with no limit of its own (INT_MAX): kernel/ucount.c, inc_ucount()
 * charges a count to the uid in the namespace that made the object and
 * then, level by level up, to each namespace's owner, checking each level's
 * limit.  So every object a sandbox makes counts against the limit of the
 * caller on the host, the owner of the sandbox's namespace (for a root
 * caller: root, whatever id the sandbox runs as), and before this a sandbox
 * could take all of it: `fusebox run -- ./ino 1500` made 128 inotify
 * instances, after which the host's root got EMFILE from inotify_init1 and
 * fanotify_init, the latter being fusebox's own watcher of every other run.
 *
 * The owner stays the caller: another owner (the overflow id a root
 * caller's sandbox runs as) would move the charge, but an owner holds every
 * capability over the namespace, and any host process of that id could
 * then enter the sandbox and read through its view (docs/security.md,
 * "Identity").  So each sandbox is bounded instead.
 *
 * The limits of the sandbox's own namespace are the /proc/sys/user/max_*
 * files as seen from inside it (their set is the writer's user namespace;
 * CAP_SYS_RESOURCE in it may write them, and nothing inside keeps that
 * capability).  pid 1 writes them, with every capability of the namespace,
 * through the fresh procfs it just mounted and before /proc/sys is covered
 * read-only (launcher-mount.c): the procfs it inherited may be read-only
 * already (bubblewrap covers /proc/sys).  They are set before the command
 * exists, so nothing in the sandbox ever had more.
 *
 * The values (docs/security.md, "Per-user kernel objects"): an eighth of the
 * caller's own limit, read in the parent, for the objects tools use
 * (inotifywait, editors, language servers, file watchers: 16 inotify
 * instances of the default 128), and no namespace (the seccomp filter
 * refuses them already; this tells the kernel too).  A limit the kernel
 * lacks (fanotify's before Linux 5.11) is skipped.
 */
#include "launcher/launcher.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

typedef enum
{
  SHARE_EIGHTH, /* an eighth of the caller's, at least 1 */
  SHARE_NONE,   /* 0 */
} Share;

static const struct
{
  const char *name;
  Share share;
} limits[] = {
  { "max_inotify_instances", SHARE_EIGHTH },
  { "max_inotify_watches", SHARE_EIGHTH },
  { "max_fanotify_groups", SHARE_EIGHTH },
  { "max_fanotify_marks", SHARE_EIGHTH },
  { "max_user_namespaces", SHARE_NONE },
  /* not max_mnt_namespaces: each cover of /proc made after this is a
   * detached tree, which is an anonymous mount namespace (open_tree) */
  { "max_pid_namespaces", SHARE_NONE },
  { "max_net_namespaces", SHARE_NONE },
  { "max_ipc_namespaces", SHARE_NONE },
  { "max_uts_namespaces", SHARE_NONE },
  { "max_cgroup_namespaces", SHARE_NONE },
  { "max_time_namespaces", SHARE_NONE },
};
#define N_LIMITS G_N_ELEMENTS (limits)

struct FbLauncherLimits
{
  char *paths[N_LIMITS];  /* "sys/user/NAME", relative to a procfs */
  char *values[N_LIMITS]; /* NULL: not set (the caller's could not be read) */
};

int
fb_launcher_limits_new (FbLauncherLimits **ret_limits)
{
  FbLauncherLimits *l = g_new0 (FbLauncherLimits, 1);

  for (size_t i = 0; i < N_LIMITS; i++)
    {
      g_autofree char *host = g_strconcat ("/proc/sys/user/", limits[i].name, NULL);
      g_autofree char *text = NULL;
      guint64 v;

      l->paths[i] = g_strconcat ("sys/user/", limits[i].name, NULL);
      if (limits[i].share == SHARE_NONE)
        {
          l->values[i] = g_strdup ("0\n");
          continue;
        }
      /* The caller's own limit, in its own user namespace. */
      if (!g_file_get_contents (host, &text, NULL, NULL) ||
          !g_ascii_string_to_unsigned (g_strstrip (text), 10, 0, G_MAXINT, &v, NULL))
        continue;
      l->values[i] = g_strdup_printf ("%" G_GUINT64_FORMAT "\n", MAX (v / 8, 1));
    }
  *ret_limits = l;
  return 0;
}

const char *
fb_launcher_limits_name (int detail)
{
  if (detail < 0 || (size_t)detail >= N_LIMITS)
    return NULL;
  return limits[detail].name;
}

int
fb_launcher_limits_apply (const FbLauncherLimits *l, int proc_fd, FbLauncherFailure *ret_failure)
{
  for (size_t i = 0; i < N_LIMITS; i++)
    {
      if (l->values[i] == NULL)
        continue;
      _fb_cleanup_fd_ int fd = openat (proc_fd, l->paths[i], O_WRONLY | O_CLOEXEC);
      if (fd < 0 && errno == ENOENT)
        continue; /* not in this kernel */
      size_t len = strlen (l->values[i]);
      ssize_t n = fd < 0 ? -1 : write (fd, l->values[i], len);
      int e = fd < 0 || n < 0 ? errno : (size_t)n != len ? EIO : 0;
      if (e != 0)
        {
          ret_failure->step = FB_LAUNCHER_STEP_LIMITS;
          ret_failure->error = e;
          ret_failure->detail = (int)i;
          return -e;
        }
    }
  return 0;
}

void
fb_launcher_limits_free (FbLauncherLimits *l)
{
  if (!l)
    return;
  for (size_t i = 0; i < N_LIMITS; i++)
    {
      g_free (l->paths[i]);
      g_free (l->values[i]);
    }
  g_free (l);
}
