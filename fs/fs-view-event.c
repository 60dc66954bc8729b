/* fusebox — the view's access events and the caller's identity.
 *
 * Events are filled on the calling thread and pushed to the sink with no
 * view lock held (the sink may block while its queue is full).  The caller's
 * /proc/PID/comm is read only when an event is really pushed.
 */
#include "fs/fs-private.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* --- events ---------------------------------------------------------------- */

/* /proc/PID/comm of the caller, read afresh for every event: a cache keyed
 * by pid would name the program from before an exec (the launcher or a
 * shell) for the accesses of the program it became, and the auditor wants
 * the latter.  Only pushed events pay for it (one open/read/close). */
static void
caller_comm (FbView *view, pid_t pid, char *buf, gsize size)
{
  char path[64];
  ssize_t n;
  int fd;

  buf[0] = '\0';
  if (pid <= 0 || size < 2)
    return;
  g_snprintf (path, sizeof path, "/proc/%d/comm", (int)pid);
  fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return;
  do
    n = read (fd, buf, size - 1);
  while (n < 0 && errno == EINTR);
  close (fd);
  if (n <= 0)
    {
      buf[0] = '\0';
      return;
    }
  buf[n] = '\0';
  if (n > 0 && buf[n - 1] == '\n')
    buf[n - 1] = '\0';
}

void
view_caller_comm (FbView *view, pid_t pid, char *buf, gsize size)
{
  caller_comm (view, pid, buf, size);
}

static bool
level_wants (FbView *view, FbOp op)
{
  return view->options.log_level >= fb_op_level (op);
}

/* What an event says of its caller beyond its pid: *COMM, its command's
 * name, read into BUF (SIZE bytes) when NULL; and with ASK_OWNER, for a
 * FUSE caller of a shared view, its command (FbViewOwners: a reference,
 * for drop_owner), else NULL. */
static void *
caller_facts (FbView *view, pid_t pid, const char *session, const char **comm, char *buf, gsize size, bool ask_owner)
{
  const FbViewOwners *owners = view->options.owners;

  if (*comm == NULL)
    {
      caller_comm (view, pid, buf, size);
      *comm = buf[0] != '\0' ? buf : NULL;
    }
  if (ask_owner && owners != NULL && pid > 0 && session == NULL)
    return owners->owner_of (owners->data, pid);
  return NULL;
}

static void
drop_owner (FbView *view, void *owner)
{
  if (owner != NULL && view->options.owners != NULL)
    view->options.owners->unref (owner);
}

/* OWNER: the caller's command (FbViewOwners), if known already; else it is
 * asked here, for a FUSE caller of a shared view. */
static void
push_event (FbView *view, FbAccessEvent *ev, pid_t pid, const char *comm, void *owner)
{
  char buf[32];
  void *asked = caller_facts (view, pid, ev->session, &comm, buf, sizeof buf, owner == NULL);

  ev->comm = comm;
  ev->owner = owner != NULL ? owner : asked;
  fb_access_sink_push (view->options.sink, ev);
  drop_owner (view, asked);
}

/* EV for CALLER's OP on PATH (TARGET), decided DECISION by RULE, failed
 * with ERR (0: done), made now; no bytes counted, no comm or owner yet. */
static void
event_fill (FbAccessEvent *ev, const FbViewCaller *caller, FbOp op, const char *path, const char *target,
            FbAccess access, FbDecision decision, int err, const FbPolicyRule *rule)
{
  memset (ev, 0, sizeof *ev);
  ev->ts_us = g_get_real_time ();
  ev->pid = caller != NULL ? caller->pid : 0;
  ev->uid = caller != NULL ? caller->uid : 0;
  ev->session = caller != NULL ? caller->session : NULL;
  ev->op = op;
  ev->path = path;
  ev->target = target;
  ev->access = fb_access_to_string (access);
  ev->decision = decision;
  ev->err = err;
  ev->rule = rule;
  ev->bytes_read = -1;
  ev->bytes_written = -1;
}

/* A rule of fusebox's own: no policy line (index -1); ORIGIN is
 * "fusebox:<name>", ACCESS what it does (DENY or HIDE), WHY the reason
 * the log and `policy explain` give. */
#define OWN_RULE(origin_, access_, why_)                                                                               \
  {                                                                                                                    \
    .kind = FB_POLICY_RULE_FUSEBOX, .index = -1, .origin = origin_, .access = FB_POLICY_ACCESS_##access_, .why = why_, \
  }

/* One rule per refusal of the view's own (see ViewRefusal). */
static const FbPolicyRule refusal_rules[] = {
  [VIEW_REFUSAL_CHOWN] =
    OWN_RULE ("fusebox:no-chown", DENY,
              "files keep their owner and group: through a root daemon a chown would give host files away"),
  [VIEW_REFUSAL_SETID] = OWN_RULE ("fusebox:no-setid", DENY,
                                   "no new set-user-ID or set-group-ID bit, and none kept through a chmod that changes "
                                   "the mode: it would outlive the sandbox as a privilege on the host"),
  [VIEW_REFUSAL_DEVICE] =
    OWN_RULE ("fusebox:no-devices", DENY, "no device nodes: one would open a host device for whoever finds it later"),
  [VIEW_REFUSAL_XATTR] =
    OWN_RULE ("fusebox:no-privileged-xattrs", DENY,
              "no security.* or trusted.* attributes: file capabilities and labels are privileges on the host"),
  [VIEW_REFUSAL_RULED_DIR] =
    OWN_RULE ("fusebox:ruled-directory", DENY,
              "a directory below which other rules decide is neither renamed, replaced nor removed: the paths below "
              "would leave their rules, or the answer would tell what those rules hide"),
  [VIEW_REFUSAL_FOLD_SPELLING] =
    OWN_RULE ("fusebox:folded-spelling", HIDE,
              "the host resolves this name here but lists no entry under it (it folds names, case-insensitive, or "
              "gives entries aliases such as short 8.3 names): fusebox resolves each entry under its own spelling "
              "alone"),
  [VIEW_REFUSAL_FOLD_TAKEN] = OWN_RULE ("fusebox:folded-name-taken", DENY,
                                        "the host folds names here (case-insensitive) and another entry answers to "
                                        "this name: the host would replace that entry"),
  [VIEW_REFUSAL_OWN_STATE] = OWN_RULE (
    "fusebox:own-state", HIDE,
    "fusebox's own run directories and access logs: no sandbox reads what others did or rewrites its own audit trail"),
  [VIEW_REFUSAL_TOO_LONG] = OWN_RULE (
    "fusebox:path-too-long", DENY,
    "view paths end at 4096 bytes, the longest the view decides: nothing is moved, made or followed past them"),
  [VIEW_REFUSAL_NODES] = OWN_RULE ("fusebox:too-many-nodes", DENY,
                                   "the view keeps at most so many names in memory, and the kernel holds on to all of "
                                   "them: a new one waits until it forgets some"),
  [VIEW_REFUSAL_FILES] =
    OWN_RULE ("fusebox:too-many-open-files", DENY,
              "each sandbox holds at most its share of the files fusebox keeps open for sandboxes (its floor, and part "
              "of the rest, shared fairly between clients): close some, and the others keep theirs"),
  [VIEW_REFUSAL_PRIVATE_SOURCE] = OWN_RULE (
    "fusebox:private-source", DENY,
    "a private source is a filesystem of its own, removed with its run: nothing is renamed or linked into or out of it "
    "(EXDEV), so a move copies what the sandbox sees, and what it can't see or remove stays on the host"),
  [VIEW_REFUSAL_RENAMES_BUSY] =
    OWN_RULE ("fusebox:renames-busy", DENY,
              "renames that must measure the tree they move go one at a time; while two wait, another is answered as "
              "between filesystems (mv then copies), so that no command's renames keep the view's workers waiting"),
  [VIEW_REFUSAL_MOVED] =
    OWN_RULE ("fusebox:moved-on-host", DENY,
              "the host (or another sandbox) moved or removed this directory, or one above it, while this sandbox "
              "held it: where it went, the policy may decide otherwise, so nothing in it is reached through the old "
              "path; look it up again by the path it has now"),
  [VIEW_REFUSAL_SOURCE_MOVED] =
    OWN_RULE ("fusebox:source-moved-on-host", DENY,
              "the policy shows this mount's source directory by its host path, and the host (or a sandbox) moved "
              "or removed that directory, or one above it: where it went, the policy may decide otherwise, so "
              "nothing is reached through this mount any more; start the sandbox again to show what the path holds "
              "now"),
};

const FbPolicyRule *
view_refusal_rule (ViewRefusal refusal)
{
  g_return_val_if_fail ((guint)refusal < G_N_ELEMENTS (refusal_rules), &refusal_rules[VIEW_REFUSAL_CHOWN]);
  return &refusal_rules[refusal];
}

void
view_emit (FbView *view, const FbViewCaller *caller, FbOp op, const char *path, const char *target, FbAccess access,
           FbDecision decision, int err, const FbPolicyRule *rule)
{
  FbAccessEvent ev;

  if (view->options.sink == NULL || (caller != NULL && caller->unlogged))
    return;
  if (!fb_decision_info (decision)->refusal && !level_wants (view, op))
    return;
  event_fill (&ev, caller, op, path, target, access, decision, err, rule);
  push_event (view, &ev, ev.pid, caller != NULL ? caller->comm : NULL, NULL);
}

/* The record of a lookup refused as hidden: only when the host holds the
 * name (EXISTS), as view_emit would; with CALLER's deferred slot, the same
 * work for a name it does not hold, and the record kept for
 * fb_view_emit_deferred (fs.h). */
void
view_emit_hidden (FbView *view, const FbViewCaller *caller, const char *path, FbDecision decision, int err,
                  const FbPolicyRule *rule, bool exists)
{
  FbViewDeferred *d = caller != NULL ? caller->deferred : NULL;
  const char *comm;
  char buf[32];
  void *owner;

  if (d == NULL || d->path != NULL)
    {
      if (exists)
        view_emit (view, caller, FB_OP_LOOKUP, path, NULL, FB_ACCESS_STAT, decision, err, rule);
      return;
    }
  if (view->options.sink == NULL || caller->unlogged)
    return;
  comm = caller->comm;
  owner = caller_facts (view, caller->pid, caller->session, &comm, buf, sizeof buf, true);
  if (!exists)
    {
      drop_owner (view, owner);
      return;
    }
  d->path = g_strdup (path);
  event_fill (&d->ev, caller, FB_OP_LOOKUP, d->path, NULL, FB_ACCESS_STAT, decision, err, rule);
  g_strlcpy (d->comm, comm != NULL ? comm : "", sizeof d->comm);
  d->ev.comm = d->comm[0] != '\0' ? d->comm : NULL;
  d->owner = d->ev.owner = owner;
}

void
fb_view_emit_deferred (FbView *view, FbViewDeferred *d)
{
  if (d->path == NULL)
    return;
  fb_access_sink_push (view->options.sink, &d->ev);
  drop_owner (view, d->owner);
  g_clear_pointer (&d->path, g_free);
  d->owner = NULL;
}

void
view_emit_close (FbView *view, FbViewFile *file)
{
  FbAccessEvent ev = { 0 };

  if (view->options.sink == NULL)
    return;
  /* At "mutations" only handles that could write are logged. */
  if (!level_wants (view, FB_OP_CLOSE) && !file->can_write)
    return;
  ev.ts_us = g_get_real_time ();
  ev.pid = file->pid;
  ev.uid = file->uid;
  ev.session = file->session;
  ev.op = FB_OP_CLOSE;
  ev.path = file->state->path;
  ev.access = fb_access_to_string (file->access);
  ev.decision = FB_DECISION_ALLOW;
  ev.rule = file->state->decision.rule;
  ev.bytes_read = __atomic_load_n (&file->bytes_read, __ATOMIC_RELAXED);
  ev.bytes_written = __atomic_load_n (&file->bytes_written, __ATOMIC_RELAXED);
  push_event (view, &ev, file->pid, file->comm, file->owner);
}
