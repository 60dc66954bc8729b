/* fusebox — small helpers every layer uses.
 *
 * They live in the lowest library (policy ← fs ← ipc ← launcher), so that
 * each is written once and every layer can reach it. */
#pragma once

#include <sys/stat.h>

#include <errno.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* The struct of TYPE whose MEMBER PTR points to (an embedded interface or
 * base back to its implementation). */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof (type, member)))

/* A descriptor closed when it goes out of scope (GLib 2.74 has no
 * g_autofd): `_fb_cleanup_fd_ int fd = open (...)`; errno survives the
 * close; fb_steal_fd hands it on. */
typedef int FbFd;
static inline void
fb_fd_close (FbFd *fd)
{
  if (*fd >= 0)
    {
      int saved = errno;
      close (*fd);
      errno = saved;
    }
  *fd = -1;
}
#define _fb_cleanup_fd_ __attribute__ ((cleanup (fb_fd_close)))
static inline int
fb_steal_fd (int *fd)
{
  int r = *fd;
  *fd = -1;
  return r;
}

/* *SOURCE destroyed (it dispatches no more) and its reference dropped;
 * NULL after, and nothing to do when it is NULL already. */
static inline void
fb_source_clear (GSource **source)
{
  if (*source == NULL)
    return;
  g_source_destroy (*source);
  g_clear_pointer (source, g_source_unref);
}

/* realpath(3) of PATH, to free with g_free; NULL with errno set. */
static inline char *
fb_realpath (const char *path)
{
  char *real = realpath (path, NULL);
  char *ret;

  if (real == NULL)
    return NULL;
  ret = g_strdup (real);
  free (real);
  return ret;
}

/* Whether no other user can change what the absolute PATH names (it need
 * not exist yet): each directory from / down to the last part of PATH that
 * exists (as realpath(3) resolves it) belongs to the caller or root and no
 * other user may write it, unless it is sticky (/tmp: there no one moves
 * or removes what is not theirs); and PATH itself, where it exists, is the
 * caller's (or root's, with TARGET_ROOT_OK).  What is missing the caller
 * makes after, and checks again once made.  FALSE with ERROR: "WHAT PATH is
 * not out of other users' reach: " the step, its owner and its mode, then
 * "; FIX".  For the host paths a root caller writes
 * in: another user's directory on the way could swap what fusebox then
 * writes, creates in or mounts over for something of theirs. */
gboolean fb_path_check_private (const char *path, bool target_root_ok, const char *what, const char *fix,
                                GError **error);
/* mkdir -p of PATH for the caller's own use, out of other users' reach:
 * what exists is checked (fb_path_check_private, the caller's at the end),
 * the rest made 0700 a step at a time below it, never through a link, and
 * each step found made taken only when it is the caller's alone. */
gboolean fb_path_make_private (const char *path, const char *what, const char *fix, GError **error);
/* Is any existing step of PATH (and where a link of the caller's or
 * root's on it leads) on a FUSE filesystem that another user mounted?
 * Looked at from mountinfo and what the kernel holds, asking that
 * filesystem nothing: its server may never answer, and whatever asks it
 * (a stat, realpath, the lookup of a name in it) waits for good.  For a
 * path a command is given, before anything else looks at it.  FALSE with
 * ERROR: "WHAT PATH: " the step and who mounted it, then "; FIX". */
gboolean fb_path_check_not_foreign_fuse (const char *path, const char *what, const char *fix, GError **error);
/* The same, and PATH's object opened O_PATH by that walk (reopen it with
 * fb_reopen_path: the path may lead elsewhere by then); -2 when a step
 * does not exist (nothing said), -1 with ERROR. */
int fb_path_open_not_foreign_fuse (const char *path, const char *what, const char *fix, GError **error);
/* Is FD's object (opened O_PATH without following a link, at PATH) on no
 * FUSE filesystem of another user's, nor on a mount this process can't
 * see?  The check of one step of that walk; FALSE with ERROR naming PATH. */
gboolean fb_fd_not_foreign_fuse (int fd, const char *path, GError **error);
/* fb_path_check_private of a directory that must exist already (one made
 * after the check could be another user's): PATH itself the caller's or
 * root's. */
gboolean fb_path_check_existing (const char *path, const char *what, const char *fix, GError **error);

/* Sends LEN bytes of BUF on the socket SOCK in one sendmsg (MSG_NOSIGNAL
 * and FLAGS), again after EINTR, with the N_FDS descriptors of FDS as
 * SCM_RIGHTS (none when N_FDS is 0; at most FB_SEND_FDS_MAX).  0 or -errno.
 * Async-signal-safe: a cloned child reports its descriptors with it. */
#define FB_SEND_FDS_MAX 6
int fb_send_fds (int sock, const void *buf, size_t len, const int *fds, int n_fds, int flags);

/* fusebox's mark on what it makes for a run (its directory, private
 * sources, log files, run.json, policy.json): an extended attribute no
 * view lets a sandbox set or remove, by which every view hides such an
 * object wherever it is, whichever view it was made for.  fb_state_mark
 * marks FD (any descriptor, O_PATH too): false where the filesystem keeps
 * no user attributes (then only the views that know the object by its
 * identity hide it).  fb_state_marked says whether NAME in DIR_FD (NULL:
 * DIR_FD itself; a link is not followed) carries it. */
#define FB_STATE_XATTR "user.fusebox"
bool fb_state_mark (int fd);
/* lstat(2) of NAME below DIR_FD (AT_FDCWD: a path) from what the kernel
 * holds (statx AT_STATX_DONT_SYNC, no automount): another user's FUSE
 * filesystem mounted there, whose server may never answer, is not asked.
 * -1 and errno as lstat's. */
int fb_lstat_cached (int dir_fd, const char *name, struct stat *ret_st);
/* NAME below DIR_FD (AT_FDCWD: a path) as an O_PATH descriptor, found
 * without asking any filesystem anything: -1 and errno for a symbolic
 * link (ELOOP, not followed) and for an object not on its directory's
 * filesystem (EXDEV: another filesystem mounted at the name, a FUSE one of
 * another user's whose server may never answer an open).  *RET_ST: what
 * was found (also for ELOOP and EXDEV), from what the kernel holds.
 * fb_reopen_path(): open such a descriptor's object with FLAGS (no path
 * walk: nothing mounted at the name since is reached). */
int fb_open_path_on_dir_fs (int dir_fd, const char *name, struct stat *ret_st);
int fb_reopen_path (int path_fd, int flags);
/* Is a FUSE mount with superblock options OPTS (mountinfo's, comma
 * separated) the caller's or root's?  Its user_id= is FUSE's owner record,
 * written by the kernel or fusermount3, not chosen by the mounter. */
bool fb_fuse_opts_trusted (const char *opts);
/* The uid that mounted the FUSE filesystem of device DEV when it is
 * neither the caller nor root, else -1 (not FUSE, or not in the mount
 * table).  From /proc/self/mountinfo, asking the filesystem nothing: its
 * server may never answer, and whoever asks it waits for good. */
gint64 fb_dev_untrusted_fuse (dev_t dev);
/* The same by the mount's id (statx's STATX_MNT_ID) when BY_ID, else by
 * device: -2 when this process's mount table does not hold it (another
 * mount namespace's, or one taken off: reached through /proc); *RET_PROC
 * (may be NULL): a procfs, whose links may be magic. */
gint64 fb_mount_untrusted_fuse (guint64 key, bool by_id, bool *ret_proc);
/* STX's basic fields as a struct stat (the rest 0). */
void fb_stat_from_statx (const struct statx *stx, struct stat *ret_st);
bool fb_state_marked (int dir_fd, const char *name);

/* String tables: fb_table_find, FB_DEFINE_STRING_TABLE and their
 * declarations. */
#include "policy/util-table.h"

/* PREFIX_ref and PREFIX_unref for a TYPE allocated with
 * g_atomic_rc_box_new0, declared in a header, as systemd defines its
 * trivial ref/unref pairs: the box counts the references atomically, unref
 * accepts NULL, and CLEAR (a void function of a TYPE *) frees what the
 * struct holds when the last one goes, before the box frees the struct. */
#define FB_DEFINE_REF_UNREF(prefix, Type, clear)                                                                       \
  Type *prefix##_ref (Type *p)                                                                                         \
  {                                                                                                                    \
    return g_atomic_rc_box_acquire (p);                                                                                \
  }                                                                                                                    \
  void prefix##_unref (Type *p)                                                                                        \
  {                                                                                                                    \
    if (p != NULL)                                                                                                     \
      g_atomic_rc_box_release_full (p, (GDestroyNotify)(void (*) (Type *)) (clear));                                   \
  }

/* PREFIX_ref for a TYPE that counts its references itself, in an atomic
 * `ref` member, because its unref does more than free it (tells an owner,
 * drops a parent, returns a share), as systemd's DEFINE_TRIVIAL_REF_FUNC:
 * the unref is written beside it. */
#define FB_DEFINE_ATOMIC_REF(prefix, Type)                                                                             \
  Type *prefix##_ref (Type *p)                                                                                         \
  {                                                                                                                    \
    g_atomic_int_inc (&p->ref);                                                                                        \
    return p;                                                                                                          \
  }

/* A JSON string's body, strictly (RFC 8259): how decoding it ended. */
typedef enum
{
  FB_JSON_STRING_OK,
  FB_JSON_STRING_UNTERMINATED,   /* the text ended before the closing quote */
  FB_JSON_STRING_CONTROL,        /* a raw byte below 0x20 */
  FB_JSON_STRING_BAD_HEX,        /* \u without four hexadecimal digits */
  FB_JSON_STRING_UNPAIRED_HIGH,  /* a \u high surrogate with no \u low one after it */
  FB_JSON_STRING_LONE_LOW,       /* a \u low surrogate with no high one before it */
  FB_JSON_STRING_NUL,            /* \u0000: C strings, paths and names can't hold it */
  FB_JSON_STRING_UNKNOWN_ESCAPE, /* a backslash before anything but "\/bfnrtu */
  FB_JSON_STRING_BAD_UTF8,       /* invalid UTF-8 (only when asked to check) */
} FbJsonStringStatus;

/* What a status other than FB_JSON_STRING_OK says: RPC in the remote API's
 * parse errors, as short as Codex's own; POLICY to the person fixing a
 * policy file, with how to fix it (NULL for FB_JSON_STRING_CONTROL: the
 * policy names the character itself). */
typedef struct
{
  const char *rpc;
  const char *policy;
} FbJsonStringWhy;
extern const FbJsonStringWhy fb_json_string_why[];

/* Decodes the string whose body starts at P (just after its opening quote),
 * appending the text to OUT when OUT is not NULL.  On FB_JSON_STRING_OK,
 * *RET_AT is just past the closing quote; otherwise it is where the mistake
 * is: the offending byte, the backslash of a bad escape or of \u0000, the
 * first non-hexadecimal digit, or END.  CHECK_UTF8 refuses invalid UTF-8
 * (the caller may have checked the whole text already). */
FbJsonStringStatus fb_json_string_decode (const char *p, const char *end, bool check_utf8, GString *out,
                                          const char **ret_at);

/* A member NAME of the object B is building: an integer; a string, or null
 * where VALUE is NULL; an array of the N strings of STRV (up to its NULL
 * where N is -1; none where STRV is NULL). */
void fb_json_builder_add_int_member (JsonBuilder *b, const char *name, gint64 value);
void fb_json_builder_add_string_member (JsonBuilder *b, const char *name, const char *value);
void fb_json_builder_add_strings_member (JsonBuilder *b, const char *name, const char *const *strv, gssize n);

/* What NODE is, in the words of a message ("expected a string, found an
 * array"): "null" (NULL too), "an object", "an array", "a string", "a
 * boolean", INTEGER for an integer (the policy says "an integer", Codex's
 * schema "a number"), "a number" for a fraction. */
const char *fb_json_node_kind (JsonNode *node, const char *integer);
