/* fusebox — one run: what `run`, `mount` and `serve` share (ipc/ipc.h,
 * "one run").
 *
 * Every kind has a run directory of its own, made 0700 (new, or an empty
 * --run-dir), holding policy.json, run.json and, unless --log says
 * otherwise, the access log; fusebox's state is hidden from every view of
 * the run by host identity, and no source may show it.  run.json is what
 * `fusebox runs` reads (launcher-cmd-runs.c) to list the runs of every
 * kind, and removes last when it prunes one.
 *
 * Single-threaded but for the counting sink, which the FUSE workers push
 * to (an atomic counter). */
#include "ipc/ipc-private.h"
#include "policy/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* run.json's "kind" */
static const struct
{
  const char *name;
} kind_table[] = {
  [FB_RUN_KIND_RUN] = { "run" },
  [FB_RUN_KIND_MOUNT] = { "mount" },
  [FB_RUN_KIND_SERVE] = { "serve" },
  [FB_RUN_KIND_SESSION] = { "session" },
};

FB_DEFINE_STRING_TABLE (fb_run_kind, FbRunKind, kind_table, G_N_ELEMENTS (kind_table))

/* Counts the denials on their way to the access log (for run.json). */
typedef struct
{
  FbAccessSink sink;
  FbAccessSink *inner;
  gint denials; /* atomic */
} CountingSink;

struct FbRun
{
  FbRunKind kind;
  char *id;
  char *dir;
  int dir_fd;           /* DIR, opened once it is made: its files are written through it */
  struct timespec made; /* CLOCK_REALTIME_COARSE before DIR was made (fb_run_get_made) */
  bool dir_given;       /* --run-dir */
  char *log_path;
  bool log_given; /* --log: a file of the caller's choice, maybe elsewhere */
  FbPolicyVarsStorage vars;
  FbPolicy *policy;
  char **state_paths;
  JsonObject *info; /* run.json */
  bool started;     /* run.json written */
  FbAccessLog *log;
  bool log_closed;
  guint64 log_max_size;
  CountingSink counter;
  bool counted; /* a view reports through COUNTER */
};

static void
counting_push (FbAccessSink *sink, const FbAccessEvent *event)
{
  CountingSink *c = (CountingSink *)((char *)sink - G_STRUCT_OFFSET (CountingSink, sink));

  if (fb_decision_info (event->decision)->refusal)
    g_atomic_int_inc (&c->denials);
  fb_access_sink_push (c->inner, event);
}

FbRun *
fb_run_new (const FbRunOptions *options)
{
  FbRun *run = g_new0 (FbRun, 1);

  run->kind = options->kind;
  run->dir_fd = -1;
  /* Known before it exists, so that the policy (which may use ${RUN}) is
   * checked before anything is created. */
  if (options->run_dir != NULL)
    {
      run->dir = g_canonicalize_filename (options->run_dir, NULL);
      run->id = g_path_get_basename (run->dir);
      run->dir_given = true;
    }
  else
    {
      g_autofree char *root = fb_run_dir_root ();
      run->id = fb_run_new_id ();
      run->dir = g_build_filename (root, run->id, NULL);
    }
  run->log_path = options->log_path != NULL ? g_canonicalize_filename (options->log_path, NULL)
                                            : g_build_filename (run->dir, "access.jsonl", NULL);
  run->log_given = options->log_path != NULL;
  fb_policy_vars_init_from_env (&run->vars, options->workspace, run->dir);
  run->info = json_object_new ();
  json_object_set_string_member (run->info, "run", run->id);
  json_object_set_string_member (run->info, "kind", fb_run_kind_to_string (run->kind));
  run->counter.sink.push = counting_push;
  return run;
}

gboolean
fb_run_check_reachable (FbRun *run, GError **error)
{
  g_autofree char *root = fb_run_dir_root ();

  return fb_path_check_not_foreign_fuse (root, "fusebox's state directory",
                                         "set XDG_STATE_HOME to a directory of your own", error) &&
         fb_path_check_not_foreign_fuse (run->dir, run->dir_given ? "--run-dir" : "the run directory",
                                         "give a directory of your own", error) &&
         (!run->log_given ||
          fb_path_check_not_foreign_fuse (run->log_path, "--log", "give a file in a directory of your own", error));
}

const char *
fb_run_get_id (FbRun *run)
{
  return run->id;
}

const char *
fb_run_get_dir (FbRun *run)
{
  return run->dir;
}

int
fb_run_get_dir_fd (FbRun *run)
{
  return run->dir_fd;
}

const struct timespec *
fb_run_get_made (FbRun *run)
{
  return &run->made;
}

int
fb_run_open_new (FbRun *run, const char *name, mode_t mode)
{
  int fd;

  if (run->dir_fd < 0)
    return -EBADF;
  fd = openat (run->dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, mode);
  if (fd < 0)
    return -errno;
  fb_state_mark (fd);
  return fd;
}

void
fb_run_set_dir_fd (FbRun *run, int fd)
{
  run->dir_fd = fd;
}

const char *
fb_run_get_log_path (FbRun *run)
{
  return run->log_path;
}

const FbPolicyVars *
fb_run_get_vars (FbRun *run)
{
  return &run->vars.vars;
}

FbPolicy *
fb_run_get_policy (FbRun *run)
{
  return run->policy;
}

const char *const *
fb_run_get_state_paths (FbRun *run)
{
  return (const char *const *)run->state_paths;
}

JsonObject *
fb_run_get_info (FbRun *run)
{
  return run->info;
}

/* Write NAME in the run directory: a new one in place, an existing one
 * through a temporary file and renameat(2), so a reader never sees half of
 * it.  Always relative to the directory's descriptor, taken when it was
 * made: a run directory in a place a sandbox writes (a --run-dir in the
 * workspace) may have its parent renamed and a link put in its place while
 * the run goes on, and a path would then lead this process (root, say)
 * wherever the link points.  Neither file is fsynced: these files describe
 * the run, the access log is its record, and the log is fsynced when it is
 * closed (docs/design.md, promise 3).  An fsync here cost 1 to 20 ms each
 * on a busy disk, on the path of every run's start and end.  After a crash
 * run.json may be missing or older; `fusebox runs` then shows the run as
 * over or unknown, and the log still holds every record. */
static gboolean
write_run_file (FbRun *run, const char *name, const char *text, GError **error)
{
  g_autofree char *tmp = g_strconcat (name, ".tmp", NULL);
  struct stat st;
  const char *target = name;
  bool fresh;
  gsize len = strlen (text);
  int fd, e;

  if (run->dir_fd < 0)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT, "%s/%s: the run directory was not made", run->dir, name);
      return FALSE;
    }
  fresh = fstatat (run->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
  if (!fresh)
    {
      /* one left by a crash */
      (void)unlinkat (run->dir_fd, tmp, 0);
      target = tmp;
    }
  fd = openat (run->dir_fd, target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    goto fail;
  fb_state_mark (fd);
  for (gsize done = 0; done < len;)
    {
      ssize_t n = write (fd, text + done, len - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          e = n < 0 ? errno : EIO;
          close (fd);
          (void)unlinkat (run->dir_fd, target, 0);
          errno = e;
          goto fail;
        }
      done += (gsize)n;
    }
  if (close (fd) < 0 && errno != EINTR)
    {
      e = errno;
      (void)unlinkat (run->dir_fd, target, 0);
      errno = e;
      goto fail;
    }
  if (!fresh && renameat (run->dir_fd, tmp, run->dir_fd, name) < 0)
    {
      e = errno;
      (void)unlinkat (run->dir_fd, tmp, 0);
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e), "%s/%s: rename: %s", run->dir, name,
                   g_strerror (e));
      return FALSE;
    }
  return TRUE;

fail:
  e = errno;
  g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e), "%s/%s: %s", run->dir, target, g_strerror (e));
  return FALSE;
}

/* --run-dir: made 0700, new or empty (runs never share a directory).  The
 * directory is opened once, without following a link, and everything after
 * (the emptiness, the mode) is done through that descriptor, which becomes
 * the run's: a path may be swapped for a link between two calls (an earlier
 * sandbox's RENAME_EXCHANGE in a workspace), and a chmod through it would
 * have changed the mode of whatever the link named.  The descriptor, or -1
 * with ERROR. */
static int
make_given_dir (const char *dir, GError **error)
{
  _fb_cleanup_fd_ int fd = -1;
  struct stat st;
  DIR *listing;
  int lfd, e;
  bool empty = true;

  /* the directory itself, not a link to one: a link at a path a sandbox
   * writes (a --run-dir in the workspace) may be one that an earlier
   * sandbox put there, to have this run's log and private files made
   * where it chose */
  if (fb_lstat_cached (AT_FDCWD, dir, &st) == 0 && S_ISLNK (st.st_mode))
    {
      g_autofree char *target = g_file_read_link (dir, NULL);
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                   "--run-dir %s is a symbolic link (to %s); give the directory itself, or a new name", dir,
                   target != NULL ? target : "?");
      return -1;
    }
  /* out of other users' reach, and made so: a directory of another
   * user's (an empty one made ready, one on the way to it, one made in
   * a race) would let them swap its private sources and its log */
  if (!fb_path_make_private (dir, "--run-dir", "give a directory of your own where no other user may write on the way",
                             error))
    return -1;
  fd = open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || fstat (fd, &st) < 0)
    {
      e = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e),
                   "--run-dir %s: %s; give a directory (not a link) you can read and write", dir,
                   e == ELOOP ? "a symbolic link (put there meanwhile?)" : g_strerror (e));
      return -1;
    }
  if (st.st_uid != geteuid ())
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_PERM,
                   "--run-dir %s is not yours (owner uid %u); give a directory of your own", dir, (unsigned)st.st_uid);
      return -1;
    }
  lfd = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  listing = lfd >= 0 ? fdopendir (lfd) : NULL;
  if (listing == NULL)
    {
      e = errno;
      if (lfd >= 0)
        close (lfd);
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e),
                   "--run-dir %s: %s; give a directory you can read and write", dir, g_strerror (e));
      return -1;
    }
  for (struct dirent *ent; empty && (ent = readdir (listing)) != NULL;)
    empty = strcmp (ent->d_name, ".") == 0 || strcmp (ent->d_name, "..") == 0;
  closedir (listing);
  if (!empty)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                   "--run-dir %s: not empty; give a new or empty directory (runs never share one)", dir);
      return -1;
    }
  if (fchmod (fd, 0700) < 0)
    {
      e = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e),
                   "--run-dir %s: chmod 0700: %s; give a directory of your own", dir, g_strerror (e));
      return -1;
    }
  return fb_steal_fd (&fd);
}

static gboolean
make_dir (FbRun *run, GError **error)
{
  g_autofree char *made = NULL;
  g_autoptr (GError) local = NULL;

  if (run->dir_given)
    {
      run->dir_fd = make_given_dir (run->dir, &local);
      if (run->dir_fd >= 0)
        {
          fb_state_mark (run->dir_fd);
          return TRUE;
        }
    }
  else if ((made = fb_run_dir_create (run->id, &local)) != NULL)
    {
      /* taken now, before any sandbox of this run can reach its parent
       * (the runs root, which every view hides) */
      run->dir_fd = open (run->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (run->dir_fd >= 0)
        {
          fb_state_mark (run->dir_fd);
          return TRUE;
        }
      int e = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e), "can't open the run directory %s: %s", run->dir,
                   g_strerror (e));
      return FALSE;
    }
  /* each message says what to give, --run-dir's and the state directory's */
  g_set_error (error, local->domain, local->code, "can't make the run directory: %s", local->message);
  return FALSE;
}

gboolean
fb_run_create (FbRun *run, FbPolicy *policy, GError **error)
{
  g_autofree char *json = NULL;
  g_autofree char *policy_path = NULL;

  /* the clock the kernel stamps files' birth times with: whatever the run
   * makes is born at or after it */
  clock_gettime (CLOCK_REALTIME_COARSE, &run->made);
  if (!make_dir (run, error))
    return FALSE;
  /* --log: its directory out of other users' reach, as the run
   * directory's (the log rotates there, by name) */
  if (run->log_given)
    {
      g_autofree char *log_dir = g_path_get_dirname (run->log_path);

      /* there already (one made after this check could be another's), and
       * out of other users' reach */
      if (!fb_path_check_existing (log_dir, "the access log's directory",
                                   "give a file in a directory that exists, where no other user may write on the way",
                                   error))
        return FALSE;
    }
  run->policy = fb_policy_ref (policy);
  /* The effective policy beside the log, for whoever audits the run; it
   * also marks the directory as one of fusebox's runs (fb_run_state_paths
   * hides such a directory beside a --run-dir). */
  json = fb_policy_to_json (policy);
  policy_path = g_build_filename (run->dir, "policy.json", NULL);
  if (json == NULL)
    {
      g_set_error (error, FB_IPC_ERROR, FB_IPC_ERROR_IO, "%s: the policy could not be written", policy_path);
      return FALSE;
    }
  if (!write_run_file (run, "policy.json", json, error))
    return FALSE;
  /* The view hides these by host identity, whatever path or source leads
   * to them, and a source may not show one at all. */
  run->state_paths = fb_run_state_paths (run->dir, run->log_path);
  return fb_run_check_sources (policy, (const char *const *)run->state_paths, error);
}

static char *
now_rfc3339 (void)
{
  g_autoptr (GDateTime) now = g_date_time_new_now_local ();
  return g_date_time_format_iso8601 (now);
}

guint64
fb_run_process_start_time (pid_t pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", (int)pid);
  g_autofree char *stat = NULL;
  g_auto (GStrv) fields = NULL;
  const char *p;

  if (!g_file_get_contents (path, &stat, NULL, NULL))
    return 0;
  p = strrchr (stat, ')'); /* comm may hold spaces and parens */
  if (p == NULL)
    return 0;
  fields = g_strsplit (p + 2, " ", 0);
  /* fields[0] is field 3 (state); field 22 is fields[19] */
  if (g_strv_length (fields) < 20)
    return 0;
  return g_ascii_strtoull (fields[19], NULL, 10);
}

gboolean
fb_run_save (FbRun *run, GError **error)
{
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autofree char *text = NULL;
  g_autofree char *with_nl = NULL;

  json_node_set_object (node, run->info);
  json_generator_set_pretty (gen, TRUE);
  json_generator_set_root (gen, node);
  text = json_generator_to_data (gen, NULL);
  with_nl = g_strconcat (text, "\n", NULL);
  return write_run_file (run, "run.json", with_nl, error);
}

gboolean
fb_run_start (FbRun *run, GError **error)
{
  return fb_run_start_as (run, getpid (), error);
}

gboolean
fb_run_start_as (FbRun *run, pid_t supervisor, GError **error)
{
  g_autofree char *started = now_rfc3339 ();
  JsonObject *sup = json_object_new ();

  if (run->vars.vars.workspace != NULL && !json_object_has_member (run->info, "workspace"))
    json_object_set_string_member (run->info, "workspace", run->vars.vars.workspace);
  if (!json_object_has_member (run->info, "policy"))
    json_object_set_string_member (run->info, "policy", fb_policy_get_origin (run->policy));
  json_object_set_string_member (run->info, "log", run->log_path);
  json_object_set_string_member (run->info, "started", started);
  json_object_set_int_member (sup, "pid", supervisor);
  json_object_set_int_member (sup, "start_time", (gint64)fb_run_process_start_time (supervisor));
  json_object_set_object_member (run->info, "supervisor", sup);
  run->started = true;
  return fb_run_save (run, error);
}

void
fb_run_set_error (FbRun *run, const char *message, const char *failed_step)
{
  json_object_set_string_member (run->info, "error", message);
  if (failed_step != NULL)
    json_object_set_string_member (run->info, "failed_step", failed_step);
}

FbAccessLog *
fb_run_open_log (FbRun *run, FbAccessLogOptions *options, GError **error)
{
  options->path = run->log_path;
  options->run_id = run->id;
  options->coalesce = TRUE;
  /* the log in the run directory is made new there, through the
   * descriptor taken when the directory was made: the sandbox runs by now,
   * and a --run-dir's parent may be another sandbox's to swap for a link
   * (a --log of the caller's is opened where the caller said) */
  if (!run->log_given && run->dir_fd >= 0)
    {
      options->new_in_dir = TRUE;
      options->dir_fd = run->dir_fd;
    }
  run->log = fb_access_log_new (options, NULL, error);
  if (run->log == NULL)
    return NULL;
  run->log_max_size = options->max_bytes;
  run->counter.inner = fb_access_log_get_sink (run->log);
  return run->log;
}

FbAccessLog *
fb_run_get_log (FbRun *run)
{
  return run->log;
}

FbAccessSink *
fb_run_get_sink (FbRun *run)
{
  run->counted = true;
  return &run->counter.sink;
}

void
fb_run_view_options (FbRun *run, FbViewOptions *options)
{
  fb_view_options_init (options);
  options->sink = fb_run_get_sink (run);
  options->hidden_paths = fb_run_get_state_paths (run);
  options->private_anchor_fd = run->dir_fd;
  options->private_anchor = run->dir;
}

gboolean
fb_run_close_log (FbRun *run, GError **error)
{
  g_autoptr (GError) close_error = NULL;

  if (run->log == NULL || run->log_closed)
    return TRUE;
  run->log_closed = true;
  if (!fb_access_log_close (run->log, &close_error))
    json_object_set_string_member (run->info, "log_error", close_error->message);
  json_object_set_int_member (run->info, "records", (gint64)fb_access_log_get_count (run->log));
  /* only a count that saw every record: serve's views report through the
   * remote API's own sinks (ipc-rpc-sandbox.c) */
  if (run->counted)
    json_object_set_int_member (run->info, "denials", g_atomic_int_get (&run->counter.denials));
  if (close_error != NULL)
    {
      g_propagate_error (error, g_steal_pointer (&close_error));
      return FALSE;
    }
  return TRUE;
}

gboolean
fb_run_log_is_full (FbRun *run, guint64 *ret_not_written)
{
  return run->log != NULL && fb_access_log_is_full (run->log, ret_not_written);
}

guint64
fb_run_get_log_max_size (FbRun *run)
{
  return run->log_max_size;
}

gboolean
fb_run_end (FbRun *run, int exit_status, GError **error)
{
  g_autofree char *ended = NULL;

  if (!run->started)
    return TRUE;
  ended = now_rfc3339 ();
  json_object_set_string_member (run->info, "ended", ended);
  if (!json_object_has_member (run->info, "exit_status"))
    json_object_set_int_member (run->info, "exit_status", exit_status);
  return fb_run_save (run, error);
}

void
fb_run_free (FbRun *run)
{
  if (run == NULL)
    return;
  if (run->log != NULL)
    {
      if (!run->log_closed)
        fb_access_log_close (run->log, NULL);
      fb_access_log_free (run->log);
    }
  g_free (run->id);
  fb_fd_close (&run->dir_fd);
  g_free (run->dir);
  g_free (run->log_path);
  fb_policy_vars_clear (&run->vars);
  if (run->policy != NULL)
    fb_policy_unref (run->policy);
  g_strfreev (run->state_paths);
  json_object_unref (run->info);
  g_free (run);
}
