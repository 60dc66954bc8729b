/* fusebox — the view's access events and the caller's identity.
 *
 * Events are filled on the calling thread and pushed to the sink with no
 * view lock held (the sink may block while its queue is full).  The caller's
 * /proc/PID/comm is read only when an event is really pushed, and cached.
 */
#include "fs/fs-private.h"

#include <string.h>
#include <sys/fsuid.h>

typedef struct
{
  char comm[32];
  gint64 when;
} CommEntry;

/* --- acting as the caller ----------------------------------------------------- */

void
creds_enter (FbView *view, const FbViewCaller *caller, CallerCreds *saved)
{
  memset (saved, 0, sizeof *saved);
  if (!view->options.act_as_caller || caller == NULL || (caller->uid == 0 && caller->gid == 0))
    return;
  /* setfsuid/setfsgid are per thread (the raw syscalls, unlike setuid in
   * glibc): only this FUSE worker creates as the caller, and only until
   * creds_leave.  Group first: after the uid switch we may lack the right. */
  saved->old_gid = (gid_t)setfsgid (caller->gid);
  saved->old_uid = (uid_t)setfsuid (caller->uid);
  saved->switched = true;
}

void
creds_leave (CallerCreds *saved)
{
  if (!saved->switched)
    return;
  setfsuid (saved->old_uid);
  setfsgid (saved->old_gid);
  saved->switched = false;
}

/* --- events ---------------------------------------------------------------- */

static void
read_comm (pid_t pid, char *buf, gsize size)
{
  char path[64];
  g_autofree char *text = NULL;
  gsize len = 0;

  buf[0] = '\0';
  g_snprintf (path, sizeof path, "/proc/%d/comm", (int)pid);
  if (!g_file_get_contents (path, &text, &len, NULL))
    return;
  g_strchomp (text);
  g_strlcpy (buf, text, size);
}

/* /proc/PID/comm of the caller, cached per pid for a second (pids are
 * reused), at most FB_VIEW_COMM_CACHE_MAX entries. */
static void
caller_comm (FbView *view, pid_t pid, char *buf, gsize size)
{
  gint64 now = g_get_monotonic_time ();
  CommEntry *e;

  buf[0] = '\0';
  if (pid <= 0)
    return;
  g_mutex_lock (&view->comm_lock);
  e = g_hash_table_lookup (view->comm_cache, GINT_TO_POINTER (pid));
  if (e != NULL && now - e->when < G_USEC_PER_SEC)
    {
      g_strlcpy (buf, e->comm, size);
      g_mutex_unlock (&view->comm_lock);
      return;
    }
  g_mutex_unlock (&view->comm_lock);

  read_comm (pid, buf, size);

  g_mutex_lock (&view->comm_lock);
  if (g_hash_table_size (view->comm_cache) >= FB_VIEW_COMM_CACHE_MAX)
    g_hash_table_remove_all (view->comm_cache);
  e = g_new0 (CommEntry, 1);
  g_strlcpy (e->comm, buf, sizeof e->comm);
  e->when = now;
  g_hash_table_replace (view->comm_cache, GINT_TO_POINTER (pid), e);
  g_mutex_unlock (&view->comm_lock);
}

void
view_caller_comm (FbView *view, pid_t pid, char *buf, gsize size)
{
  caller_comm (view, pid, buf, size);
}

static bool
level_wants (FbView *view, EventClass cls)
{
  switch (cls)
    {
      case EV_MUTATION:
        return true;
      case EV_OPEN:
        return view->options.log_level >= FB_LOG_LEVEL_OPENS;
      case EV_OBSERVE:
      default:
        return view->options.log_level >= FB_LOG_LEVEL_ALL;
    }
}

static void
push_event (FbView *view, FbAccessEvent *ev, pid_t pid, const char *comm)
{
  char buf[32];

  if (comm == NULL)
    {
      caller_comm (view, pid, buf, sizeof buf);
      comm = buf[0] != '\0' ? buf : NULL;
    }
  ev->comm = comm;
  fb_access_sink_push (view->options.sink, ev);
}

void
view_emit (FbView *view, const FbViewCaller *caller, EventClass cls, const char *op, const char *path,
           const char *target, const char *access, FbDecision decision, int err, const FbPolicyRule *rule)
{
  FbAccessEvent ev = { 0 };

  if (view->options.sink == NULL)
    return;
  if (decision == FB_DECISION_ALLOW && !level_wants (view, cls))
    return;
  ev.ts_us = g_get_real_time ();
  ev.pid = caller != NULL ? caller->pid : 0;
  ev.uid = caller != NULL ? caller->uid : 0;
  ev.session = caller != NULL ? caller->session : NULL;
  ev.op = op;
  ev.path = path;
  ev.target = target;
  ev.access = access;
  ev.decision = decision;
  ev.err = err;
  ev.rule = rule;
  ev.bytes_read = -1;
  ev.bytes_written = -1;
  push_event (view, &ev, ev.pid, caller != NULL ? caller->comm : NULL);
}

void
view_emit_close (FbView *view, FbViewFile *file)
{
  FbAccessEvent ev = { 0 };

  if (view->options.sink == NULL)
    return;
  /* At "mutations" only handles that could write are logged. */
  if (!level_wants (view, EV_OPEN) && !file->can_write)
    return;
  ev.ts_us = g_get_real_time ();
  ev.pid = file->pid;
  ev.uid = file->uid;
  ev.session = file->session;
  ev.op = "close";
  ev.path = file->state->path;
  ev.access = file->access;
  ev.decision = FB_DECISION_ALLOW;
  ev.rule = file->state->decision.rule;
  ev.bytes_read = __atomic_load_n (&file->bytes_read, __ATOMIC_RELAXED);
  ev.bytes_written = __atomic_load_n (&file->bytes_written, __ATOMIC_RELAXED);
  push_event (view, &ev, file->pid, file->comm);
}
