/* fusebox — the access log's file: JSON lines, rotated by size.
 *
 * The output the log's durability is about (ipc-log.c says how records
 * reach it before the answers of their operations).  Here:
 *  - write() appends the record's line to a buffer; flush() writes the
 *    buffer with write(2).  A record the core flushed is therefore in the
 *    kernel's page cache: a SIGKILL of the daemon loses nothing that
 *    fb_log_file_get_flushed_seq() reported.  fsync runs on rotation and
 *    close, not per flush (that would put a disk flush on the FUSE path).
 *  - Rotation by size: at a record boundary past rotate_bytes, flush, fsync,
 *    rename STEM.jsonl to STEM.<first-seq>-<last-seq>.jsonl (12-digit,
 *    zero-padded: `ls` order is seq order), fsync the directory, open a new
 *    STEM.jsonl.  seq continues across files.  The live file is opened
 *    relative to the directory's descriptor, made with O_EXCL, never
 *    through a link, and only when it is a regular file of ours with one
 *    name (open_live): whoever can write in the directory can't have the
 *    records written elsewhere by a link put at the name, at the start or
 *    in the instant after a rename.  When the new file is refused, records
 *    go on in the file just rotated, through its descriptor.
 *  - A write error (ENOSPC, EIO) keeps the unwritten bytes and says so once;
 *    the core then stops taking new batches (pushers block: back-pressure,
 *    not loss) and retries every second; close reports what could not be
 *    written.
 *
 * Locks: none of its own; every call is under the core's writer lock, but
 * fb_log_file_get_flushed_seq (atomic). */
#include "ipc/ipc-log-output.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Flush in the middle of a batch past this much buffered text. */
#define FLUSH_THRESHOLD (256 * 1024)

struct FbLogFile
{
  FbLogOutput output;
  int fd;     /* -1 while closed, or after a failed reopen */
  int dirfd;  /* the log's directory, for rename/fsync */
  char *name; /* live file's name in dirfd */
  char *path; /* for messages */
  guint64 rotate_bytes;
  guint64 file_bytes;     /* bytes in the live file (flushed) */
  guint64 file_first_seq; /* first seq written to this file by us, 0 = none yet */
  guint64 last_seq;       /* the last record's seq in buf (or written) */
  guint64 total_bytes;    /* in every file, flushed */
  GString *buf;           /* formatted, not yet written */
  GError *write_error;    /* the last write failure, kept until it clears */
  gboolean rotation_broken;
  _Atomic guint64 flushed_seq;
};

/* Why the live file can't be written: it is not a regular file of ours with
 * one name.  ST: what is there (fstat, or lstat when the open failed). */
static void
set_refused (FbLogFile *file, const struct stat *st, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (file->path);

  if (S_ISLNK (st->st_mode))
    g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                 "the access log %s is a symbolic link; fusebox never writes its log through a link (whoever can "
                 "write in %s may have put it there to have the records written elsewhere): remove it, or choose "
                 "another place for the log",
                 file->path, dir);
  else if (!S_ISREG (st->st_mode))
    g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                 "the access log %s is %s, not a regular file; fusebox writes its log only into a regular file: "
                 "remove it, or choose another place for the log",
                 file->path, fb_ipc_file_kind (st->st_mode));
  else if (st->st_uid != geteuid ())
    g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                 "the access log %s belongs to uid %u, not to fusebox's uid %u; fusebox writes its log only into "
                 "a file of its own (whoever made it could read and rewrite the records): remove it, or choose "
                 "another place for the log",
                 file->path, (unsigned)st->st_uid, (unsigned)geteuid ());
  else
    g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID,
                 "the access log %s has %lu names (hard links); fusebox writes its log only into a file with one "
                 "name (the records would also be another file's content): remove the others, or choose another "
                 "place for the log",
                 file->path, (unsigned long)st->st_nlink);
}

/* Open the live file, or make it, in the log's directory.  Whoever can
 * write in that directory (a --log or --run-dir in a shared place) chooses
 * what is at the name, and a rotation renames it away and makes it again,
 * so the name is never trusted:
 *  - a new file is made with O_CREAT|O_EXCL, which never follows a link;
 *  - an existing one (the same --log given again, or another run's writer
 *    that made it a moment ago) is opened with O_NOFOLLOW: a symbolic link
 *    there (to /etc/passwd, or dangling, to have its target made) is
 *    refused, not written through;
 *  - O_NONBLOCK (cleared after): a FIFO there can't block the open;
 *  - then fstat: only a regular file, of fusebox's own uid, with one name
 *    (a hard link would get the records into another file too). */
/* NAME in DIR_FD, there already, opened with FLAGS (O_NOFOLLOW among
 * them) only if it is on DIR_FD's filesystem: found first as O_PATH,
 * which asks no filesystem anything, then opened through that descriptor.
 * Whoever can write in the directory may have mounted a FUSE filesystem
 * of theirs at the name, whose server never answers an open: EXDEV. */
static int
open_existing (int dir_fd, const char *name, int flags)
{
  struct stat st;
  _fb_cleanup_fd_ int path = fb_open_path_on_dir_fs (dir_fd, name, &st);

  return path < 0 ? -1 : fb_reopen_path (path, flags);
}

static int
open_live (FbLogFile *file, bool must_be_new, GError **error)
{
  /* O_RDWR only to look at the last byte of an existing file (below). */
  const int flags = O_RDWR | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK;
  struct stat st;
  _fb_cleanup_fd_ int fd = -1;

  /* made, or there: twice, for a file removed between the two opens */
  for (int attempt = 0; attempt < 2 && fd < 0; attempt++)
    {
      fd = openat (file->dirfd, file->name, flags | O_CREAT | O_EXCL, 0600);
      if (fd >= 0)
        fb_state_mark (fd); /* made now: fusebox's own (policy/util.h) */
      if (fd < 0 && errno == EEXIST && must_be_new)
        break;
      if (fd < 0 && errno == EEXIST)
        fd = open_existing (file->dirfd, file->name, flags);
      if (fd < 0 && errno != ENOENT)
        break;
    }
  if (fd < 0)
    {
      int errsv = errno;

      /* ELOOP: a link (O_NOFOLLOW); ENXIO: a socket; EXDEV: a mount */
      if (errsv == EXDEV)
        g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO,
                     "the access log %s is refused: another filesystem is mounted at its name (its owner may "
                     "never answer)",
                     file->path);
      else if (fb_lstat_cached (file->dirfd, file->name, &st) == 0 && !S_ISREG (st.st_mode))
        set_refused (file, &st, error);
      else
        g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "can't open the access log %s: %s", file->path,
                     g_strerror (errsv));
      return -1;
    }
  if (fstat (fd, &st) < 0)
    {
      int errsv = errno;
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "can't look at the access log %s: %s", file->path,
                   g_strerror (errsv));
      return -1;
    }
  if (!S_ISREG (st.st_mode) || st.st_uid != geteuid () || st.st_nlink != 1)
    {
      set_refused (file, &st, error);
      return -1;
    }
  fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK);
  file->file_bytes = (guint64)st.st_size;
  file->file_first_seq = 0;

  /* A daemon killed mid-write may have left a partial last line; start ours
   * on a line of its own so that only that one line is damaged. */
  if (st.st_size > 0)
    {
      char last = '\n';

      if (pread (fd, &last, 1, st.st_size - 1) == 1 && last != '\n')
        {
          if (write (fd, "\n", 1) == 1)
            file->file_bytes++;
        }
    }
  file->fd = fb_steal_fd (&fd);
  return 0;
}

/* Write buf to the file.  On failure the unwritten rest stays in buf. */
static gboolean
flush_buf (FbLogFile *file)
{
  gsize done = 0;

  if (file->fd < 0)
    {
      g_autoptr (GError) error = NULL;

      if (open_live (file, false, &error) < 0)
        {
          g_clear_error (&file->write_error);
          file->write_error = g_steal_pointer (&error);
          return FALSE;
        }
    }
  while (done < file->buf->len)
    {
      ssize_t n = write (file->fd, file->buf->str + done, file->buf->len - done);

      if (n < 0)
        {
          int errsv = errno;

          if (errsv == EINTR)
            continue;
          if (file->write_error == NULL)
            g_warning ("access log %s: write failed: %s; retrying, pushers wait meanwhile", file->path,
                       g_strerror (errsv));
          g_clear_error (&file->write_error);
          g_set_error (&file->write_error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "writing the access log %s: %s", file->path,
                       g_strerror (errsv));
          g_string_erase (file->buf, 0, (gssize)done);
          file->file_bytes += done;
          file->total_bytes += done;
          return FALSE;
        }
      done += (gsize)n;
    }
  file->file_bytes += done;
  file->total_bytes += done;
  g_string_truncate (file->buf, 0);
  if (file->write_error != NULL)
    {
      g_message ("access log %s: writing again", file->path);
      g_clear_error (&file->write_error);
    }
  atomic_store (&file->flushed_seq, file->last_seq);
  return TRUE;
}

static gboolean
fsync_dir (FbLogFile *file)
{
  /* O_PATH descriptors can't be fsync'ed: open the directory for reading. */
  _fb_cleanup_fd_ int fd = openat (file->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  return fd >= 0 && fsync (fd) == 0;
}

static void
rotate (FbLogFile *file)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *rotated = NULL;
  int r = -1;
  int old_fd;
  guint64 old_bytes, old_first_seq;

  if (!flush_buf (file))
    return; /* retried with the next batch */
  if (fsync (file->fd) < 0)
    g_warning ("access log %s: fsync before rotation failed: %s", file->path, g_strerror (errno));

  /* RENAME_NOREPLACE: two runs sharing one log file must not overwrite each
   * other's rotated files; a collision gets a ".N" suffix. */
  for (guint n = 0; n < 1000; n++)
    {
      g_free (rotated);
      rotated = fb_log_rotated_name (file->name, file->file_first_seq, file->last_seq, n);
      r = renameat2 (file->dirfd, file->name, file->dirfd, rotated, RENAME_NOREPLACE);
      if (r == 0 || errno != EEXIST)
        break;
    }
  if (r < 0)
    {
      g_warning ("access log %s: rotation to %s failed: %s; writing on without rotating", file->path, rotated,
                 g_strerror (errno));
      file->rotation_broken = TRUE;
      return;
    }
  fsync_dir (file);
  old_fd = file->fd;
  old_bytes = file->file_bytes;
  old_first_seq = file->file_first_seq;
  file->fd = -1;
  if (open_live (file, false, &error) < 0)
    {
      /* Something was put at the name since the rename (or it can't be
       * made): records keep going into the file just rotated, through the
       * descriptor still open on it, never by its name (which could be
       * swapped as well), and no rotation is tried again. */
      g_warning ("%s; writing on in %s, without rotating", error->message, rotated);
      file->fd = old_fd;
      file->file_bytes = old_bytes;
      file->file_first_seq = old_first_seq;
      file->rotation_broken = TRUE;
      return;
    }
  close (old_fd);
  fsync_dir (file);
}

static void
file_write (FbLogOutput *output, const FbLogLine *record)
{
  FbLogFile *file = container_of (output, FbLogFile, output);

  if (file->file_first_seq == 0)
    file->file_first_seq = record->seq;
  g_string_append_len (file->buf, record->line, (gssize)record->len);
  g_string_append_c (file->buf, '\n');
  file->last_seq = record->seq;

  if (file->rotate_bytes > 0 && !file->rotation_broken && file->file_bytes + file->buf->len >= file->rotate_bytes)
    rotate (file);
  else if (file->buf->len >= FLUSH_THRESHOLD)
    flush_buf (file);
}

static gboolean
file_flush (FbLogOutput *output)
{
  return flush_buf (container_of (output, FbLogFile, output));
}

/* The core flushed last (and reports what that left); fsync, then close. */
static gboolean
file_close (FbLogOutput *output, GError **error)
{
  FbLogFile *file = container_of (output, FbLogFile, output);
  gboolean ok = file->buf->len == 0 && file->write_error == NULL;

  if (ok && file->fd >= 0 && fsync (file->fd) < 0)
    {
      int errsv = errno;
      ok = FALSE;
      g_clear_error (&file->write_error);
      g_set_error (&file->write_error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "fsync of the access log %s: %s", file->path,
                   g_strerror (errsv));
    }
  if (!ok)
    g_set_error_literal (error, FB_IPC_ERROR, FB_IPC_ERROR_IO,
                         file->write_error != NULL ? file->write_error->message
                                                   : "the access log could not be written");
  fb_fd_close (&file->fd);
  return ok;
}

static void
file_free (FbLogOutput *output)
{
  FbLogFile *file = container_of (output, FbLogFile, output);

  fb_fd_close (&file->fd);
  fb_fd_close (&file->dirfd);
  g_string_free (file->buf, TRUE);
  g_clear_error (&file->write_error);
  g_free (file->path);
  g_free (file->name);
  g_free (file);
}

static const FbLogOutputOps file_ops = {
  .write = file_write,
  .flush = file_flush,
  .close = file_close,
  .free = file_free,
};

static FbLogFile *
log_file_open (const char *path, int dir_fd, guint64 rotate_bytes, GError **error)
{
  FbLogFile *file = g_new0 (FbLogFile, 1);
  g_autofree char *dir = g_path_get_dirname (path);

  file->output.ops = &file_ops;
  file->fd = -1;
  file->rotate_bytes = rotate_bytes;
  file->buf = g_string_sized_new (64 * 1024);
  file->path = g_strdup (path);
  file->name = g_path_get_basename (path);
  file->dirfd = dir_fd >= 0 ? fcntl (dir_fd, F_DUPFD_CLOEXEC, 3) : open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (file->dirfd < 0)
    {
      int errsv = errno;
      g_set_error (error, FB_IPC_ERROR, errsv == ENOENT ? FB_IPC_ERROR_NOT_FOUND : FB_IPC_ERROR_IO,
                   "can't open the access log's directory %s: %s", dir, g_strerror (errsv));
      file_free (&file->output);
      return NULL;
    }
  if (strcmp (file->name, "/") == 0 || strcmp (file->name, ".") == 0 || strcmp (file->name, "..") == 0)
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_INVALID, "the access log path %s names a directory", path);
      file_free (&file->output);
      return NULL;
    }
  if (open_live (file, dir_fd >= 0, error) < 0)
    {
      file_free (&file->output);
      return NULL;
    }
  /* an existing file (--log FILE given again) counts against the budget */
  file->total_bytes = file->file_bytes;
  return file;
}

FbLogFile *
fb_log_file_open (const char *path, guint64 rotate_bytes, GError **error)
{
  return log_file_open (path, -1, rotate_bytes, error);
}

FbLogFile *
fb_log_file_open_new_in (const char *path, int dir_fd, guint64 rotate_bytes, GError **error)
{
  g_return_val_if_fail (dir_fd >= 0, NULL);
  return log_file_open (path, dir_fd, rotate_bytes, error);
}

FbLogOutput *
fb_log_file_output (FbLogFile *file)
{
  return &file->output;
}

const char *
fb_log_file_get_path (FbLogFile *file)
{
  return file->path;
}

guint64
fb_log_file_get_bytes (FbLogFile *file)
{
  return file->total_bytes + file->buf->len;
}

gsize
fb_log_file_get_pending (FbLogFile *file)
{
  return file->buf->len;
}

const GError *
fb_log_file_get_error (FbLogFile *file)
{
  return file->write_error;
}

guint64
fb_log_file_get_flushed_seq (FbLogFile *file)
{
  return atomic_load (&file->flushed_seq);
}
