/* fusebox — a view that several commands share, and whose each access is.
 *
 * A session's commands that run under one effective policy share one FUSE
 * view (`serve`'s processes: ipc-rpc-view.c; `run --session`:
 * launcher/launcher-session.c), so they share the kernel's dentry,
 * attribute and page caches and their private HOME and /tmp, as in a
 * shell.  What sharing must not lose is the attribution: each record still
 * names the command that made it, its `report`, `sandboxDenied` and
 * `log/subscribe` filters stay per command, and a command's records go
 * where that command's go (its tee and log share, its run's log).
 *
 * Who a FUSE caller is, is the kernel's to say, never guessed: every
 * process of a command lives in the command's own pid namespace (its pid 1
 * is the first process there; the seccomp filter refuses new namespaces,
 * so none is nested below), and FUSE gives the caller's pid in the
 * namespace of the view's mounter, the host's.  That pid is the calling
 * THREAD's id, which for any thread but a process's first is no process's
 * pid: pidfd_open(TID, 0) refuses it (EINVAL), and a thread's accesses
 * were no command's.  A member is registered by its pid namespace, an
 * nsfs descriptor it keeps while registered (so the namespace's inode
 * number can't be reused by another command's until the member has gone),
 * and a caller's thread id is mapped to it through its /proc/.../ns/pid,
 * read between a pidfd and a check that the pidfd's task is not reaped
 * yet: while it is not, the id still names it, so what was read is that
 * task's.  The pidfd is the thread's own (PIDFD_THREAD, Linux 6.9), or,
 * on an older kernel, its thread group's (the Tgid read from
 * /proc/TID/status, then /proc/TGID/task/TID/ns/pid: TID was a thread of
 * the group the pidfd pins when the link was opened; all threads of a
 * group share its pid namespace).  (The link is open to us: the
 * command's processes have our uid, or are in a user namespace we own.)
 * The answer is cached per id with that pidfd, and used again only while
 * the pidfd's task has not exited (a pidfd is readable from its exit on):
 * a reused id is never taken for its former owner.  A group's pidfd says
 * nothing of one thread's exit, so a thread that is not its group's first
 * is cached only with a thread pidfd.  A caller found in no member (none
 * should be: the launcher's own processes touch the view only before pid
 * 1 exists) is no command's: its records go to OTHERS, without "process",
 * which the owner bounds as a command's (a share of the log's budget of
 * their own: ipc-rpc-view.c, launcher-session-daemon.c).  What is left: a
 * caller killed while its request waited, reaped, and its id handed to a
 * task of another command before we read the link, which takes the pid
 * space wrapping around in that instant.
 *
 * The view asks (FbViewOwners) when it pushes an event, and when it opens
 * a file whose close it will log, since the opener may be gone by the
 * close; the file keeps a reference to the member.  So a member outlives
 * its command until the last such file is closed (fb_view_member_busy),
 * and what it sends records to (its sink, and whatever DESTROY frees) goes
 * with the last reference: a late close is still written as that
 * command's, never to a sink freed under it.  The owner that must act on
 * that last close (close the command's log: launcher-session-daemon.c) is
 * told by it (fb_view_member_end_notify): the kernel sends a file's
 * RELEASE when the file's last reference drops, asynchronously, so it may
 * come well after the command's processes are gone, and only the unref
 * that follows its close record knows the record is in.
 *
 * Threads: any (FUSE workers resolve and push; the owner's loop adds and
 * ends members).  share->lock guards the tables and each member's
 * registration; nothing blocks under it, and no push happens under it. */
#include "ipc/ipc-private.h"

#include "ipc/ipc-log-output.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Pids remembered with their pidfd: descriptors, so few. */
#define PID_CACHE_MAX 64

struct FbViewMember
{
  gint ref; /* atomic: the share's while registered, the owner's, each file's */
  FbViewShare *share;
  char *process;
  guint64 pidns; /* the inode of its pid namespace */
  int pidns_fd;  /* share->lock: held while registered */
  /* share->lock: what its processes open is charged to (a reference)
   * while it is registered, or NULL */
  FbViewFdAccount *fd_account;
  gint refusals; /* atomic: its records that are refusals */
  FbAccessSink *sink;
  GDestroyNotify destroy;
  gpointer destroy_data;
  /* fb_view_member_end_notify: RELEASED_* (atomic), then the callback,
   * written before the state is armed */
  gint released_state;
  FbViewMemberFunc released;
  gpointer released_data;
};

enum
{
  RELEASED_NONE,
  RELEASED_ARMED, /* ended, the owner waits for its files' release */
  RELEASED_TOLD,
};

typedef struct
{
  pid_t pid;
  int pidfd;
  FbViewMember *member; /* a reference, or NULL: no command's */
} PidEntry;

struct FbViewShare
{
  FbAccessSink sink;
  FbViewOwners owners;
  FbAccessSink *others;
  GMutex lock;
  GHashTable *members; /* share->lock: pidns inode (guint64*) → FbViewMember* */
  GHashTable *pids;    /* share->lock: pid → PidEntry* */
  GQueue pid_order;    /* share->lock: PidEntry*, oldest first */
};

static void
pid_entry_free (PidEntry *e)
{
  fb_fd_close (&e->pidfd);
  fb_view_member_unref (e->member);
  g_free (e);
}

static guint64
ns_inode (int fd)
{
  struct stat st;

  return fstat (fd, &st) == 0 ? (guint64)st.st_ino : 0;
}

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* linux/pidfd.h, Linux 6.9 */
#endif

/* Does this kernel give a thread's own pidfd?  -1 not known yet, 0, 1. */
static gint thread_pidfds = -1;

/* TID's thread group id, from /proc/TID/status; 0 if it is gone. */
static pid_t
tgid_of (pid_t tid)
{
  char path[64], buf[512];
  const char *line;
  ssize_t n;
  _fb_cleanup_fd_ int fd = -1;

  g_snprintf (path, sizeof path, "/proc/%d/status", (int)tid);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  do
    n = read (fd, buf, sizeof buf - 1);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  line = strstr (buf, "\nTgid:");
  return line != NULL ? (pid_t)strtol (line + 6, NULL, 10) : 0;
}

guint64
fb_view_share_task_pidns (pid_t tid, gboolean thread_pidfd, int *ret_pidfd, gboolean *ret_cacheable)
{
  char path[96];
  guint64 ino = 0;
  pid_t tgid = tid;
  _fb_cleanup_fd_ int pidfd = -1;
  _fb_cleanup_fd_ int fd = -1;

  *ret_pidfd = -1;
  *ret_cacheable = FALSE;
  if (tid <= 0)
    return 0;
  if (thread_pidfd)
    {
      pidfd = (int)syscall (SYS_pidfd_open, tid, PIDFD_THREAD);
      g_snprintf (path, sizeof path, "/proc/%d/ns/pid", (int)tid);
    }
  else
    {
      /* the group's pidfd, and the link through the group's task list:
       * TID must be one of its threads when it is opened */
      tgid = tgid_of (tid);
      pidfd = tgid > 0 ? (int)syscall (SYS_pidfd_open, tgid, 0) : -1;
      g_snprintf (path, sizeof path, "/proc/%d/task/%d/ns/pid", (int)tgid, (int)tid);
    }
  if (pidfd < 0)
    return 0;
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0)
    ino = ns_inode (fd);
  /* still the task the pidfd names (not reaped: its id not reused)? */
  if (ino == 0 || syscall (SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
    return 0;
  *ret_pidfd = fb_steal_fd (&pidfd);
  *ret_cacheable = thread_pidfd || tgid == tid;
  return ino;
}

/* The inode of the pid namespace of the thread TID, as the top of this
 * file says, with *RET_PIDFD the pidfd that pins that answer and
 * *RET_CACHEABLE whether its exit is that thread's; 0 when TID is gone or
 * its namespace can't be read. */
static guint64
pid_namespace_of (pid_t tid, int *ret_pidfd, gboolean *ret_cacheable)
{
  int known = g_atomic_int_get (&thread_pidfds);

  if (known < 0)
    {
      _fb_cleanup_fd_ int fd = (int)syscall (SYS_pidfd_open, tid, PIDFD_THREAD);

      /* EINVAL for a live id: a kernel without PIDFD_THREAD (6.9) */
      if (fd >= 0 || errno == EINVAL)
        g_atomic_int_set (&thread_pidfds, known = fd >= 0 ? 1 : 0);
    }
  return fb_view_share_task_pidns (tid, known != 0, ret_pidfd, ret_cacheable);
}

static bool
pidfd_exited (int pidfd)
{
  struct pollfd p = { .fd = pidfd, .events = POLLIN };

  return poll (&p, 1, 0) != 0;
}

static void *
owner_of (void *data, pid_t pid)
{
  FbViewShare *share = data;
  FbViewMember *m = NULL;
  PidEntry *e;
  gboolean cacheable;
  guint64 ino;
  int pidfd;

  g_mutex_lock (&share->lock);
  e = g_hash_table_lookup (share->pids, GINT_TO_POINTER (pid));
  if (e != NULL && !pidfd_exited (e->pidfd))
    {
      m = e->member != NULL ? fb_view_member_ref (e->member) : NULL;
      g_mutex_unlock (&share->lock);
      return m;
    }
  if (e != NULL)
    {
      g_queue_remove (&share->pid_order, e);
      g_hash_table_remove (share->pids, GINT_TO_POINTER (pid));
    }
  g_mutex_unlock (&share->lock);

  ino = pid_namespace_of (pid, &pidfd, &cacheable);
  if (ino == 0)
    return NULL;
  g_mutex_lock (&share->lock);
  m = g_hash_table_lookup (share->members, &ino);
  if (m != NULL)
    fb_view_member_ref (m);
  if (cacheable && !g_hash_table_contains (share->pids, GINT_TO_POINTER (pid)))
    {
      if (share->pid_order.length >= PID_CACHE_MAX)
        {
          PidEntry *old = g_queue_pop_head (&share->pid_order);
          g_hash_table_remove (share->pids, GINT_TO_POINTER (old->pid));
        }
      e = g_new0 (PidEntry, 1);
      e->pid = pid;
      e->pidfd = g_steal_fd (&pidfd);
      e->member = m != NULL ? fb_view_member_ref (m) : NULL;
      g_hash_table_insert (share->pids, GINT_TO_POINTER (pid), e);
      g_queue_push_tail (&share->pid_order, e);
    }
  g_mutex_unlock (&share->lock);
  if (pidfd >= 0)
    close (pidfd);
  return m;
}

static void
owner_unref (void *owner)
{
  fb_view_member_unref (owner);
}

static FbViewFdAccount *
fd_account_of (void *data, pid_t pid)
{
  FbViewShare *share = data;
  g_autoptr (FbViewMember) m = owner_of (data, pid);
  FbViewFdAccount *a = NULL;

  if (m == NULL)
    return NULL;
  g_mutex_lock (&share->lock);
  if (m->fd_account != NULL)
    a = fb_view_fd_account_ref (m->fd_account);
  g_mutex_unlock (&share->lock);
  return a;
}

/* The view's sink: each event to its command's sink, named; the others'
 * to OTHERS. */
static void
share_push (FbAccessSink *sink, const FbAccessEvent *event)
{
  FbViewShare *share = container_of (sink, FbViewShare, sink);
  FbViewMember *m = event->owner;
  FbAccessEvent e;

  if (m == NULL)
    {
      fb_access_sink_push (share->others, event);
      return;
    }
  e = *event;
  e.process = m->process;
  if (fb_decision_info (e.decision)->refusal)
    g_atomic_int_inc (&m->refusals);
  fb_access_sink_push (m->sink, &e);
}

FbViewShare *
fb_view_share_new (FbAccessSink *others)
{
  FbViewShare *share = g_new0 (FbViewShare, 1);

  share->sink.push = share_push;
  share->owners.owner_of = owner_of;
  share->owners.unref = owner_unref;
  share->owners.fd_account_of = fd_account_of;
  share->owners.data = share;
  share->others = others;
  g_mutex_init (&share->lock);
  share->members = g_hash_table_new (g_int64_hash, g_int64_equal);
  share->pids = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)pid_entry_free);
  g_queue_init (&share->pid_order);
  return share;
}

const FbViewOwners *
fb_view_share_get_owners (FbViewShare *share)
{
  return &share->owners;
}

FbAccessSink *
fb_view_share_get_sink (FbViewShare *share)
{
  return &share->sink;
}

guint
fb_view_share_count (FbViewShare *share)
{
  guint n;

  g_mutex_lock (&share->lock);
  n = g_hash_table_size (share->members);
  g_mutex_unlock (&share->lock);
  return n;
}

static void forget_pids (FbViewShare *share, FbViewMember *m);

FbViewMember *
fb_view_share_add (FbViewShare *share, int pidns_fd, const char *process, FbViewFdAccount *fd_account,
                   FbAccessSink *sink, GDestroyNotify destroy, gpointer destroy_data, GError **error)
{
  FbViewMember *m;
  guint64 ino;
  int fd;

  /* an nsfs descriptor of a pid namespace: the kernel's word, not a
   * number anyone could name */
  if (ioctl (pidns_fd, NS_GET_NSTYPE) != CLONE_NEWPID || (ino = ns_inode (pidns_fd)) == 0)
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID, "the command's pid namespace is not one");
      return NULL;
    }
  fd = fcntl (pidns_fd, F_DUPFD_CLOEXEC, 3);
  if (fd < 0)
    {
      int e = errno;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "can't keep the command's pid namespace: %s", g_strerror (e));
      return NULL;
    }
  m = g_new0 (FbViewMember, 1);
  m->ref = 2; /* the share's, the caller's */
  m->share = share;
  m->process = g_strdup (process);
  m->pidns = ino;
  m->pidns_fd = fd;
  m->fd_account = fd_account != NULL ? fb_view_fd_account_ref (fd_account) : NULL;
  m->sink = sink;
  m->destroy = destroy;
  m->destroy_data = destroy_data;
  g_mutex_lock (&share->lock);
  if (g_hash_table_contains (share->members, &ino))
    {
      g_mutex_unlock (&share->lock);
      close (fd);
      m->pidns_fd = -1;
      m->destroy = NULL;
      m->ref = 1;
      fb_view_member_unref (m);
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID, "the command's pid namespace is another's");
      return NULL;
    }
  g_hash_table_insert (share->members, &m->pidns, m);
  /* a pid cached as no command's may be in this namespace: a sandbox
   * made ahead of its command (launcher-session-ready.c) touches the view
   * before it is anyone's, and is this command's from now on */
  forget_pids (share, NULL);
  g_mutex_unlock (&share->lock);
  return m;
}

/* share->lock held: forget the pids cached for M (NULL: those cached as
 * no command's). */
static void
forget_pids (FbViewShare *share, FbViewMember *m)
{
  for (GList *l = share->pid_order.head; l != NULL;)
    {
      PidEntry *e = l->data;
      GList *next = l->next;

      if (e->member == m)
        {
          g_queue_delete_link (&share->pid_order, l);
          g_hash_table_remove (share->pids, GINT_TO_POINTER (e->pid));
        }
      l = next;
    }
}

void
fb_view_member_end (FbViewMember *m)
{
  FbViewFdAccount *account;
  FbViewShare *share;
  bool registered;

  if (m == NULL || m->share == NULL)
    return;
  share = m->share;
  g_mutex_lock (&share->lock);
  registered = m->pidns_fd >= 0;
  if (registered)
    {
      g_hash_table_remove (share->members, &m->pidns);
      forget_pids (share, m);
      /* from here its pid namespace's number may be another's */
      close (m->pidns_fd);
      m->pidns_fd = -1;
    }
  /* nothing of it opens anything any more: its floor may go back (each
   * file still open holds the account itself) */
  account = g_steal_pointer (&m->fd_account);
  /* and it is no member: the share may go before it (a view closed) */
  m->share = NULL;
  g_mutex_unlock (&share->lock);
  if (account != NULL)
    fb_view_fd_account_unref (account);
  if (registered)
    fb_view_member_unref (m); /* the share's */
}

/* The owner's reference alone is left of an ended member: tell it, once
 * (whoever of the owner arming it and the last file's unref sees the
 * other's write first; both are sequentially consistent, so one does). */
static void
maybe_released (FbViewMember *m)
{
  if (g_atomic_int_compare_and_exchange (&m->released_state, RELEASED_ARMED, RELEASED_TOLD))
    m->released (m->released_data);
}

void
fb_view_member_end_notify (FbViewMember *m, FbViewMemberFunc released, gpointer data)
{
  fb_view_member_end (m);
  m->released = released;
  m->released_data = data;
  g_atomic_int_set (&m->released_state, RELEASED_ARMED);
  /* no file of it open (nor one ever to be: it has no namespace to be
   * found by any more) */
  if (g_atomic_int_get (&m->ref) == 1)
    maybe_released (m);
}

FbViewMember *
fb_view_member_ref (FbViewMember *m)
{
  g_atomic_int_inc (&m->ref);
  return m;
}

void
fb_view_member_unref (FbViewMember *m)
{
  gint old;

  if (m == NULL)
    return;
  old = g_atomic_int_add (&m->ref, -1);
  /* a file's (or a request's) reference, dropped after its record was
   * pushed: the last but the owner's, of an ended member, says its
   * records are all in */
  if (old == 2 && g_atomic_int_get (&m->released_state) == RELEASED_ARMED)
    maybe_released (m);
  if (old != 1)
    return;
  if (m->destroy != NULL)
    m->destroy (m->destroy_data);
  if (m->fd_account != NULL)
    fb_view_fd_account_unref (m->fd_account); /* never ended */
  g_free (m->process);
  g_free (m);
}

gboolean
fb_view_member_busy (FbViewMember *m)
{
  FbViewShare *share = m->share;
  bool registered = false;

  if (share != NULL)
    {
      g_mutex_lock (&share->lock);
      registered = m->pidns_fd >= 0;
      g_mutex_unlock (&share->lock);
    }
  /* more than the caller's reference, and the share's while registered */
  return g_atomic_int_get (&m->ref) > (registered ? 2 : 1);
}

const char *
fb_view_member_get_process (FbViewMember *m)
{
  return m->process;
}

guint
fb_view_member_get_refusals (FbViewMember *m)
{
  return (guint)g_atomic_int_get (&m->refusals);
}

void
fb_view_share_free (FbViewShare *share)
{
  GHashTableIter it;
  gpointer v;

  if (share == NULL)
    return;
  /* the view is gone: no file holds a member through it any more */
  g_queue_clear (&share->pid_order);
  g_hash_table_destroy (share->pids);
  g_hash_table_iter_init (&it, share->members);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      FbViewMember *m = v;
      close (m->pidns_fd);
      m->pidns_fd = -1;
      m->share = NULL;
      g_hash_table_iter_steal (&it);
      fb_view_member_unref (m);
    }
  g_hash_table_destroy (share->members);
  g_mutex_clear (&share->lock);
  g_free (share);
}
