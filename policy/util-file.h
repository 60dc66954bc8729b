/* fusebox — reading a file whole without letting what is at its name hang
 * or exhaust us (util-file.c).  In the lowest library, beside util.h, so
 * that the policy loader, the log readers and the token readers share it. */
#pragma once

#include <glib.h>
#include <sys/types.h>

typedef enum
{
  FB_FILE_NAMED = 0,
  /* One of fusebox's own files (a log, run.json): never opened through a
   * symbolic link, and a refusal says fusebox did not put that there.
   * Without it, a file someone named (a policy, a token file): links are
   * followed, and a refusal says what to name instead. */
  FB_FILE_OWN = 1 << 0,
} FbFileFlags;

/* "a regular file", "a FIFO", "a character device"... for MODE's type. */
const char *fb_file_kind (mode_t mode);

/* Opens NAME in DIR_FD (AT_FDCWD: a path) for reading when what it opens is
 * a regular file, and returns the descriptor (blocking, CLOEXEC), or -1 with
 * ERROR in G_FILE_ERROR: NOENT when nothing is there, INVAL when it is
 * anything but a regular file ("WHAT PATH is a FIFO, not a regular file;
 * ..."), another code from errno otherwise.  The open can't block (a FIFO,
 * a device).  PATH names the file in messages (NULL: NAME); WHAT says what
 * it is ("the policy"). */
int fb_file_open_regular (int dir_fd, const char *name, const char *path, const char *what, FbFileFlags flags,
                          GError **error);

/* All of the file at PATH, opened as fb_file_open_regular opens it, NUL
 * terminated, at most MAX bytes (a larger one is G_FILE_ERROR_INVAL, its
 * size and MAX in the message); *RET_LEN its length. */
char *fb_file_read_regular (const char *path, const char *what, FbFileFlags flags, gsize max, gsize *ret_len,
                            GError **error);
