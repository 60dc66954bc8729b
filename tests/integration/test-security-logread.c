/* Adversarial tests: `fusebox log`, `log --follow`, `report` and `runs` read
 * run directories that someone else may have written.
 *
 *  - A FIFO, a socket, a device or a symbolic link in place of access.jsonl,
 *    of a rotated file or of run.json: each command refuses it, naming the
 *    path and what it is, and ends (`runs` shows the run as unknown); none
 *    blocks in open(2), none reads through the link.
 *  - Any content: a line of three million '[' (json-glib recursed once per
 *    level and crashed the reader), deep objects, nesting hidden behind a
 *    single-quoted string or a comment (which json-glib takes), binary
 *    junk, invalid UTF-8, a NUL byte, a 200 MB line, a truncated last line:
 *    each is skipped with a warning and counted, the records around it are
 *    read; a run.json that is junk, too deep or too large shows its run as
 *    unknown with a warning.
 *  - A rotated file of another owner beside the log (a --log in a shared
 *    directory, where anyone may drop STEM.1-1.jsonl): `log` and `report`
 *    skip it with a warning naming it and its uid; neither its forged
 *    records nor, through its higher seqs, the loss of the real ones as
 *    duplicates reach the output.
 * Each object is first proven to exist on the host as what it is.  Every
 * command is waited for with a generous bound: a hang fails the test, it is
 * not a timing assertion.
 *
 * Needs nothing but the fusebox binary (no sandbox is made). */
#include <grp.h>
#include <poll.h>
#include <signal.h>

#include "tests/lib/test-run.h"

#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#define RUN "20240101-000000-logread"
/* bound on each command: far above what one takes; only a hang reaches it */
#define CAP_MS (60 * 1000)

static char *
record (guint64 seq, const char *path)
{
  return g_strdup_printf ("{\"ts\":\"2024-01-01T00:00:00.%06" G_GUINT64_FORMAT "Z\",\"run\":\"" RUN
                          "\",\"seq\":%" G_GUINT64_FORMAT ",\"pid\":7,\"uid\":0,\"comm\":\"cat\",\"op\":\"open\","
                          "\"path\":\"%s\",\"access\":\"read\",\"decision\":\"allow\",\"errno\":0,\"rule\":0,"
                          "\"rule_origin\":\"p.json:1:1\",\"why\":\"test\"}\n",
                          seq, seq, path);
}

/* T/state/fusebox/runs/RUN/NAME: its path, the run directory made. */
static char *
run_file (RFx *fx, const char *name)
{
  g_autofree char *dir = g_build_filename (fx->runs, RUN, NULL);

  assert_int_equal (g_mkdir_with_parents (dir, 0700), 0);
  return g_build_filename (dir, name, NULL);
}

/* T/NAME, made a sticky world-writable directory (a shared place, as
 * /tmp is): its path. */
static char *
shared_dir (RFx *fx, const char *name)
{
  char *dir = g_build_filename (fx->tmp, name, NULL);

  assert_int_equal (g_mkdir_with_parents (dir, 01777), 0);
  assert_int_equal (chmod (dir, 01777), 0);
  return dir;
}

typedef struct
{
  int status; /* -1: still running at the bound (killed) */
  char *out;
  char *err;
} Res;

static void
res_clear (Res *r)
{
  g_free (r->out);
  g_free (r->err);
  memset (r, 0, sizeof *r);
}

/* fusebox ARGV... (NULL-terminated, without the program) with stdin from
 * /dev/null and its output in files: waited for at most CAP_MS. */
static void
fusebox (RFx *fx, Res *ret, const char *const *args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *out = g_build_filename (fx->tmp, "out", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "err", NULL);
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  GPid pid;

  g_ptr_array_add (argv, g_strdup ("/bin/sh"));
  g_ptr_array_add (argv, g_strdup ("-c"));
  g_ptr_array_add (argv, g_strdup_printf ("exec \"$@\" </dev/null >%s 2>%s", out, err));
  g_ptr_array_add (argv, g_strdup ("sh"));
  g_ptr_array_add (argv, g_strdup (test_bin ()));
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (args[i]));
  g_ptr_array_add (argv, NULL);
  rfx_set_repro (fx, (char **)argv->pdata + 4);
  if (!g_spawn_async (fx->ws, (char **)argv->pdata, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, &error))
    fail_msg ("spawn: %s", error->message);
  rfx_keep_pid (fx, pid);
  memset (ret, 0, sizeof *ret);
  ret->status = rfx_wait (fx, pid, CAP_MS);
  if (ret->status < 0)
    {
      rfx_forget_pid (fx, pid);
      test_kill_child (&pid, SIGKILL);
    }
  ret->out = test_read_file (out);
  ret->err = test_read_file (err);
}
#define FUSEBOX(fx, r, ...) fusebox (fx, r, (const char *const[]){ __VA_ARGS__, NULL })

static void
assert_refused (const Res *r, const char *what, const char *path, const char *kind)
{
  g_autofree char *want = g_strdup_printf ("%s is %s", path, kind);

  if (r->status < 0)
    fail_msg ("%s: still blocked after %d s (in open(2) on %s?)", what, CAP_MS / 1000, path);
  if (r->status != 1)
    fail_msg ("%s: exit %d, not 1; stderr:\n%s", what, r->status, r->err);
  if (strstr (r->err, want) == NULL || strstr (r->err, "not a regular file") == NULL)
    fail_msg ("%s: no '%s..., not a regular file' in:\n%s", what, want, r->err);
}

typedef enum
{
  OBJ_FIFO,
  OBJ_SOCKET,
  OBJ_DEVICE,
  OBJ_LINK,
} Obj;

static const struct
{
  const char *kind;
  mode_t type;
} objs[] = {
  [OBJ_FIFO] = { "a FIFO", S_IFIFO },
  [OBJ_SOCKET] = { "a socket", S_IFSOCK },
  [OBJ_DEVICE] = { "a character device", S_IFCHR },
  [OBJ_LINK] = { "a symbolic link (to ", S_IFLNK },
};

/* A unix socket at PATH: bound at a short name (sun_path holds 108 bytes),
 * then moved there. */
static void
make_socket_at (const char *path)
{
  g_autofree char *dir = g_dir_make_tmp ("fusebox-sock-XXXXXX", NULL);
  g_autofree char *tmp = g_build_filename (dir, "s", NULL);

  assert_non_null (dir);
  test_make_socket (tmp);
  assert_int_equal (rename (tmp, path), 0);
  rmdir (dir);
}

/* OBJ at PATH (a link points to SECRET), proven to be there. */
static void
make_obj (Obj obj, const char *path, const char *secret)
{
  struct stat st;

  switch (obj)
    {
      case OBJ_FIFO:
        assert_int_equal (mkfifo (path, 0600), 0);
        break;
      case OBJ_SOCKET:
        make_socket_at (path);
        break;
      case OBJ_DEVICE:
        /* /dev/null's numbers: harmless should anything open it */
        assert_int_equal (mknod (path, S_IFCHR | 0600, makedev (1, 3)), 0);
        break;
      case OBJ_LINK:
        assert_int_equal (symlink (secret, path), 0);
        break;
    }
  assert_int_equal (lstat (path, &st), 0);
  assert_int_equal (st.st_mode & S_IFMT, objs[obj].type);
}

/* T/NAME holding TEXT (with "the-secret" in it), proven readable on the
 * host; its path.  A link to it must not show it. */
static char *
write_secret (RFx *fx, const char *name, const char *text)
{
  char *secret = g_build_filename (fx->tmp, name, NULL);

  test_write (secret, text, 0600);
  test_assert_host_readable (secret);
  return secret;
}

/* `fusebox runs` ends, lists RUN as unknown, warns with each of SAYS
 * (NULL-terminated) and shows nothing of the secret; WHAT names the case. */
static void
assert_runs_unknown (RFx *fx, const char *what, const char *const *says)
{
  Res r;

  FUSEBOX (fx, &r, "runs");
  if (r.status != 0)
    fail_msg ("runs (%s): exit %d (%s); stderr:\n%.2000s", what, r.status, r.status > 128 ? "killed by a signal" : "",
              r.err);
  for (; *says != NULL; says++)
    if (strstr (r.err, *says) == NULL)
      fail_msg ("runs (%s): no '%s' in:\n%s", what, *says, r.err);
  if (strstr (r.out, RUN) == NULL || strstr (r.out, "unknown") == NULL)
    fail_msg ("runs (%s): the run is not listed as unknown:\n%s", what, r.out);
  assert_null (strstr (r.out, "the-secret"));
  res_clear (&r);
}

/* NAME in the run directory made each kind of object in turn (a link to a
 * stand-in secret): log, log --follow and report of RUN, log of the file
 * itself and, when NEWEST, log of the newest run each refuse it, say what
 * it is, and show nothing of the secret. */
static void
assert_refused_as_each_obj (RFx *fx, const char *name, bool newest)
{
  g_autofree char *path = run_file (fx, name);
  g_autofree char *secret = write_secret (fx, "secret", "{\"secret\":\"the-secret\"}\n");
  const char *const cmds[][3] = {
    { "log", RUN, NULL },  { "log", "--follow", RUN }, { "report", RUN, NULL },
    { "log", path, NULL }, { "log", NULL, NULL }, /* the newest run: last, for NEWEST only */
  };
  guint n = G_N_ELEMENTS (cmds) - (newest ? 0 : 1);

  for (Obj o = OBJ_FIFO; o <= OBJ_LINK; o++)
    {
      make_obj (o, path, secret);
      for (guint c = 0; c < n; c++)
        {
          Res r;
          g_autofree char *what = g_strdup_printf ("%s %s %s, %s (%s)", cmds[c][0], cmds[c][1] ? cmds[c][1] : "",
                                                   cmds[c][2] ? cmds[c][2] : "", path, objs[o].kind);
          const char *args[4] = { cmds[c][0], cmds[c][1], cmds[c][2], NULL };

          fusebox (fx, &r, args);
          assert_refused (&r, what, path, objs[o].kind);
          assert_null (strstr (r.out, "the-secret"));
          res_clear (&r);
        }
      assert_int_equal (unlink (path), 0);
    }
}

/* A FIFO, a socket, a device or a link in place of access.jsonl: log, log
 * --follow, report, and log of the newest run, each refuse it and end. */
RFX_CASE (test_live_log_not_a_file)
{
  assert_refused_as_each_obj (fx, "access.jsonl", true);
}

/* The same in place of a rotated file, with a live file beside it: the
 * writer makes only regular files, and whoever can write beside a log (a
 * shared directory) can put anything at a rotated name, so log and report
 * of the run skip it, say what it is, and read the rest of the log; named
 * itself, it is refused. */
RFX_CASE (test_rotated_log_not_a_file)
{
  g_autofree char *live = run_file (fx, "access.jsonl");
  g_autofree char *rec = record (2, "/b");
  g_autofree char *path = run_file (fx, "access.000000000001-000000000001.jsonl");
  g_autofree char *secret = write_secret (fx, "secret", "{\"secret\":\"the-secret\"}\n");
  const char *const cmds[][2] = { { "log", RUN }, { "report", RUN } };

  test_write (live, rec, 0600);
  for (Obj o = OBJ_FIFO; o <= OBJ_LINK; o++)
    {
      g_autofree char *want = g_strdup_printf ("%s is %s", path, objs[o].kind);

      make_obj (o, path, secret);
      for (guint c = 0; c < G_N_ELEMENTS (cmds); c++)
        {
          Res r;

          FUSEBOX (fx, &r, cmds[c][0], cmds[c][1]);
          if (r.status != 0 || strstr (r.err, want) == NULL || strstr (r.err, "skipped") == NULL)
            fail_msg ("%s %s (%s): exit %d; no '%s ...; skipped' in:\n%s", cmds[c][0], cmds[c][1], objs[o].kind,
                      r.status, want, r.err);
          if (strstr (r.out, "/b") == NULL)
            fail_msg ("%s %s (%s): the live file's record was not read:\n%s", cmds[c][0], cmds[c][1], objs[o].kind,
                      r.out);
          assert_null (strstr (r.out, "the-secret"));
          res_clear (&r);
        }
      {
        Res r;
        g_autofree char *what = g_strdup_printf ("log %s (%s)", path, objs[o].kind);

        FUSEBOX (fx, &r, "log", path);
        assert_refused (&r, what, path, objs[o].kind);
        assert_null (strstr (r.out, "the-secret"));
        res_clear (&r);
      }
      assert_int_equal (unlink (path), 0);
    }
}

/* run.json a FIFO, a socket, a device or a link: `runs` ends, shows the run
 * as unknown and says why. */
RFX_CASE (test_run_json_not_a_file)
{
  g_autofree char *json = run_file (fx, "run.json");
  g_autofree char *secret =
    write_secret (fx, "secret.json", "{\"run\":\"x\",\"command\":[\"the-secret\"],\"ended\":\"x\"}\n");

  for (Obj o = OBJ_FIFO; o <= OBJ_LINK; o++)
    {
      g_autofree char *want = g_strdup_printf ("%s is %s", json, objs[o].kind);
      const char *says[] = { want, NULL };

      make_obj (o, json, secret);
      assert_runs_unknown (fx, objs[o].kind, says);
      assert_int_equal (unlink (json), 0);
    }
}

/* Append LEN bytes of C to FD. */
static void
write_fill (int fd, char c, gsize len)
{
  char buf[64 * 1024];

  memset (buf, c, sizeof buf);
  while (len > 0)
    {
      gsize n = MIN (len, sizeof buf);
      assert_int_equal (write (fd, buf, n), (ssize_t)n);
      len -= n;
    }
}

static void
write_str (int fd, const char *s)
{
  assert_int_equal (write (fd, s, strlen (s)), (ssize_t)strlen (s));
}

/* Records 1..9 between lines of every kind of junk; the last line is cut.
 * Returns the number of junk lines (each a warning and a bad line). */
static guint
write_junk_log (const char *path)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  guint junk = 0;
  guint64 seq = 1;
  char rnd[4096];

  assert_true (fd >= 0);
#define REC()                                                                                                          \
  do                                                                                                                   \
    {                                                                                                                  \
      g_autofree char *r_ = record (seq, "/ok");                                                                       \
      write_str (fd, r_);                                                                                              \
      seq++;                                                                                                           \
    }                                                                                                                  \
  while (0)
  REC ();
  /* three million '[': json-glib recursed once per level */
  write_fill (fd, '[', 3 * 1000 * 1000);
  write_str (fd, "\n");
  junk++;
  REC ();
  /* deep objects, closed */
  for (int i = 0; i < 200000; i++)
    write_str (fd, "{\"a\":");
  write_str (fd, "1");
  write_fill (fd, '}', 200000);
  write_str (fd, "\n");
  junk++;
  REC ();
  /* nesting behind a single-quoted string and a comment holding '"' */
  write_str (fd, "['\"', ");
  write_fill (fd, '[', 500000);
  write_str (fd, "\n/* \" */ ");
  write_fill (fd, '[', 500000);
  write_str (fd, "\n");
  junk += 2;
  REC ();
  /* binary junk (no newline in it) */
  for (guint i = 0; i < sizeof rnd; i++)
    rnd[i] = (char)(g_random_int_range (0, 256));
  for (guint i = 0; i < sizeof rnd; i++)
    if (rnd[i] == '\n')
      rnd[i] = '\x01';
  assert_int_equal (write (fd, rnd, sizeof rnd), (ssize_t)sizeof rnd);
  write_str (fd, "\n");
  junk++;
  REC ();
  /* invalid UTF-8 in a string, and a NUL byte before a record's end */
  write_str (fd, "{\"ts\":\"x\",\"path\":\"/\xff\xfe\"}\n");
  assert_int_equal (write (fd, "{\"a\":1}\0{\"b\":2}\n", 16), 16);
  junk += 2;
  REC ();
  /* 5 MB of one line, then 200 MB of NUL bytes (sparse: no disk) */
  write_fill (fd, 'a', 5 * 1024 * 1024);
  write_str (fd, "\n");
  {
    off_t end = lseek (fd, 0, SEEK_END);
    assert_int_equal (ftruncate (fd, end + (off_t)200 * 1024 * 1024), 0);
    assert_true (lseek (fd, 0, SEEK_END) > end);
  }
  write_str (fd, "\n");
  junk += 2;
  REC ();
  REC ();
  REC ();
  /* cut short */
  write_str (fd, "{\"ts\":\"2024-01-01T00:00:00Z\",\"run\":\"" RUN "\",\"seq\":10,\"op\":\"op");
  close (fd);
#undef REC
  assert_int_equal (seq, 10);
  return junk;
}

/* The records of OUT (`log --json`): seq 1..9, in order. */
static void
assert_records (const char *out, const char *what)
{
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  guint64 want = 1;

  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_autofree char *needle = NULL;

      if (lines[i][0] == '\0')
        continue;
      needle = g_strdup_printf ("\"seq\":%" G_GUINT64_FORMAT ",", want);
      if (strstr (lines[i], needle) == NULL)
        fail_msg ("%s: line %u is not record %" G_GUINT64_FORMAT ": %.200s", what, i + 1, want, lines[i]);
      want++;
    }
  if (want != 10)
    fail_msg ("%s: %" G_GUINT64_FORMAT " records, not 9:\n%.2000s", what, want - 1, out);
}

static guint
count (const char *text, const char *needle)
{
  guint n = 0;

  for (const char *p = text; (p = strstr (p, needle)) != NULL; p++)
    n++;
  return n;
}

RFX_CASE (test_any_content)
{
  g_autofree char *live = run_file (fx, "access.jsonl");
  guint junk = write_junk_log (live);
  g_autofree char *bad = g_strdup_printf ("\"bad_lines\" : %u", junk);
  Res r;

  test_assert_host_readable (live);
  FUSEBOX (fx, &r, "log", "--json", RUN);
  if (r.status != 0)
    fail_msg ("log --json: exit %d (%s); stderr:\n%.3000s", r.status, r.status > 128 ? "killed by a signal" : "",
              r.err);
  assert_records (r.out, "log --json");
  /* one warning per junk line, and one for the cut line */
  if (count (r.err, "warning:") != junk + 1)
    fail_msg ("log: %u warnings, not %u:\n%.3000s", count (r.err, "warning:"), junk + 1, r.err);
  assert_non_null (strstr (r.err, "incomplete"));
  res_clear (&r);

  FUSEBOX (fx, &r, "log", RUN);
  assert_int_equal (r.status, 0);
  assert_int_equal (count (r.out, "\n"), 9);
  res_clear (&r);

  FUSEBOX (fx, &r, "report", "--json", RUN);
  if (r.status != 0)
    fail_msg ("report --json: exit %d; stderr:\n%.3000s", r.status, r.err);
  if (strstr (r.out, bad) == NULL || strstr (r.out, "\"truncated_lines\" : 1") == NULL)
    fail_msg ("report --json: not %u bad lines and 1 truncated:\n%s", junk, r.out);
  res_clear (&r);

  FUSEBOX (fx, &r, "report", RUN);
  assert_int_equal (r.status, 0);
  res_clear (&r);
}

/* --follow reads through the same junk to the last record, and waits. */
RFX_CASE (test_follow_any_content)
{
  g_autofree char *live = run_file (fx, "access.jsonl");
  g_autofree char *out = g_build_filename (fx->tmp, "follow.out", NULL);
  g_autofree char *cmd = g_strdup_printf ("exec '%s' log --follow --json " RUN " >%s 2>/dev/null", test_bin (), out);
  const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  GPid pid;
  int status;

  write_junk_log (live);
  rfx_set_repro (fx, (char **)argv);
  if (!g_spawn_async (fx->ws, (char **)argv, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, &error))
    fail_msg ("spawn: %s", error->message);
  rfx_keep_pid (fx, pid);
  if (!TEST_WAIT_FOR (({
                        g_autofree char *t = test_read_file (out);
                        t != NULL &&strstr (t, "\"seq\":9,") != NULL;
                      }),
                      CAP_MS))
    {
      g_autofree char *t = test_read_file (out);
      fail_msg ("log --follow did not reach record 9 (crashed or hung?); it printed:\n%.2000s", t ? t : "");
    }
  /* still running: following, not dead */
  assert_int_equal (waitpid (pid, &status, WNOHANG), 0);
  kill (pid, SIGINT);
  assert_true (rfx_wait (fx, pid, CAP_MS) >= 0);
  {
    g_autofree char *t = test_read_file (out);
    assert_records (t, "log --follow --json");
  }
}

/* run.json: junk, nesting json-glib would recurse through, too large. */
RFX_CASE (test_run_json_any_content)
{
  g_autofree char *json = run_file (fx, "run.json");
  struct
  {
    const char *what;
    char c;
    gsize len;
    const char *says;
  } cases[] = {
    { "three million '['", '[', 3 * 1000 * 1000, "nests deeper than fusebox reads" },
    { "junk", '\x01', 4096, "is not JSON" },
    { "200 MB (sparse)", 0, 0, "is larger than" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      int fd = open (json, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

      assert_true (fd >= 0);
      if (cases[i].len > 0)
        write_fill (fd, cases[i].c, cases[i].len);
      else
        {
          write_str (fd, "{\"command\":[\"");
          assert_int_equal (ftruncate (fd, (off_t)200 * 1024 * 1024), 0);
        }
      close (fd);
      test_assert_host_readable (json);
      {
        const char *says[] = { json, cases[i].says, NULL };

        assert_runs_unknown (fx, cases[i].what, says);
      }
    }
}

/* T/shared/audit.jsonl (root's, seq 2) and its rotated file (root's, seq 1)
 * in a sticky world-writable directory; another user's rotated file, named
 * to be read first, with the log's run and seqs 1-99 of forged records.
 * Owned by root it would be read (which proves the reader takes the name),
 * and the real records dropped as duplicates; owned by uid 65534, `log` and
 * `report` skip it, say so, and show the real records only. */
RFX_CASE (test_rotated_of_another_owner)
{
  g_autofree char *dir = shared_dir (fx, "shared");
  g_autofree char *live = g_build_filename (dir, "audit.jsonl", NULL);
  g_autofree char *part = g_build_filename (dir, "audit.000000000001-000000000001.jsonl", NULL);
  g_autofree char *forged = g_build_filename (dir, "audit.000000000000-000000000099.jsonl", NULL);
  g_autofree char *rec1 = record (1, "/real-a");
  g_autofree char *rec2 = record (2, "/real-b");
  g_autofree char *says =
    g_strdup_printf ("%s belongs to uid 65534, not to uid 0, whose log %s is; skipped", forged, live);
  g_autoptr (GString) fake = g_string_new (NULL);
  Res r;

  test_write (part, rec1, 0600);
  test_write (live, rec2, 0600);
  for (guint64 seq = 1; seq <= 99; seq++)
    {
      g_autofree char *f = record (seq, "/FORGED");
      g_string_append (fake, f);
    }
  test_write (forged, fake->str, 0644);

  /* root's: read, and the real records are lost as duplicates */
  FUSEBOX (fx, &r, "log", live);
  if (r.status != 0 || strstr (r.out, "/FORGED") == NULL)
    fail_msg ("log %s: the planted file, root's, was not read (exit %d):\n%s", live, r.status, r.err);
  res_clear (&r);

  assert_int_equal (chown (forged, 65534, 65534), 0);
  FUSEBOX (fx, &r, "log", live);
  if (r.status != 0 || strstr (r.err, says) == NULL)
    fail_msg ("log %s: exit %d; no '%s' in:\n%s", live, r.status, says, r.err);
  assert_null (strstr (r.out, "/FORGED"));
  test_assert_contains (r.out, "/real-a", "/real-b", NULL);
  res_clear (&r);

  FUSEBOX (fx, &r, "report", "--json", live);
  if (r.status != 0 || strstr (r.err, says) == NULL)
    fail_msg ("report %s: exit %d; no '%s' in:\n%s", live, r.status, says, r.err);
  assert_null (strstr (r.out, "/FORGED"));
  test_assert_contains (r.out, "/real-a", "/real-b", "\"duplicates\" : 0,", NULL);
  res_clear (&r);
}

/* The live name taken by another user while it was free (before a log's
 * first run, or between a rotation's rename and the new file), in a sticky
 * world-writable directory: root's rotated file (seq 1) beside another
 * user's live file and rotated file, both forged.  The live file's owner
 * used to be the log's: root's real file was skipped as foreign and the
 * forged ones shown.  Now the log is root's, since one of its files is:
 * log and report show the real record, skip both forged files, naming
 * each.  And a log whose files are all another user's (root reading
 * someone else's log) is read, with a note whose it is. */
RFX_CASE (test_live_of_another_owner)
{
  g_autofree char *dir = shared_dir (fx, "shared");
  g_autofree char *live = g_build_filename (dir, "audit.jsonl", NULL);
  g_autofree char *part = g_build_filename (dir, "audit.000000000001-000000000001.jsonl", NULL);
  g_autofree char *forged = g_build_filename (dir, "audit.000000000000-000000000099.jsonl", NULL);
  g_autofree char *rec1 = record (1, "/real-a");
  g_autofree char *fake_live = record (2, "/FORGED-LIVE");
  g_autofree char *fake_part = record (0, "/FORGED-PART");
  const char *const skipped[] = { live, forged };
  const char *const cmds[][3] = { { "log", live, NULL }, { "report", "--json", live } };

  test_write (part, rec1, 0600);
  test_write (live, fake_live, 0644);
  test_write (forged, fake_part, 0644);
  assert_int_equal (chown (live, 65534, 65534), 0);
  assert_int_equal (chown (forged, 65534, 65534), 0);
  for (guint c = 0; c < G_N_ELEMENTS (cmds); c++)
    {
      Res r;

      FUSEBOX (fx, &r, cmds[c][0], cmds[c][1], cmds[c][2]);
      if (r.status != 0 || strstr (r.out, "/real-a") == NULL)
        fail_msg ("%s %s: exit %d, the real record not shown:\n%s\n%s", cmds[c][0], live, r.status, r.out, r.err);
      assert_null (strstr (r.out, "FORGED"));
      for (guint k = 0; k < G_N_ELEMENTS (skipped); k++)
        {
          g_autofree char *says =
            g_strdup_printf ("%s belongs to uid 65534, not to uid 0, whose log %s is; skipped", skipped[k], live);
          if (strstr (r.err, says) == NULL)
            fail_msg ("%s %s: no '%s' in:\n%s", cmds[c][0], live, says, r.err);
        }
      res_clear (&r);
    }

  /* all of them another user's: read as that user's, and said so */
  assert_int_equal (chown (part, 65534, 65534), 0);
  {
    Res r;
    g_autofree char *note = g_strdup_printf ("the log %s is uid 65534's, not yours (uid 0)", live);

    FUSEBOX (fx, &r, "log", live);
    if (r.status != 0 || strstr (r.err, note) == NULL)
      fail_msg ("log %s: exit %d; no '%s' in:\n%s", live, r.status, note, r.err);
    test_assert_contains (r.out, "/real-a", "/FORGED-LIVE", "/FORGED-PART", NULL);
    res_clear (&r);
  }
}

/* Another user's run.json beside root's log named access.jsonl in a shared
 * directory (a --log there), claiming 5,000 records written: `report` took
 * it, and said root's real log had been changed.  Now it says the file is
 * another user's and does not check the log against it. */
RFX_CASE (test_run_json_of_another_owner)
{
  g_autofree char *dir = shared_dir (fx, "shared");
  g_autofree char *live = g_build_filename (dir, "access.jsonl", NULL);
  g_autofree char *json = g_build_filename (dir, "run.json", NULL);
  g_autofree char *rec1 = record (1, "/real-a");
  g_autofree char *says = g_strdup_printf ("%s belongs to uid 65534, not to uid 0", json);
  Res r;

  test_write (live, rec1, 0600);
  test_write (json, "{\"run\":\"" RUN "\",\"records\":5000,\"ended\":\"2026-12-04T19:00:01Z\"}\n", 0644);
  /* root's, it is taken: the log looks changed (which proves the file is read) */
  FUSEBOX (fx, &r, "report", live);
  if (strstr (r.out, "5000") == NULL && strstr (r.err, "5000") == NULL)
    fail_msg ("report %s: root's run.json was not taken:\n%s\n%s", live, r.out, r.err);
  res_clear (&r);

  assert_int_equal (chown (json, 65534, 65534), 0);
  FUSEBOX (fx, &r, "report", live);
  if (r.status != 0 || strstr (r.err, says) == NULL)
    fail_msg ("report %s: exit %d; no '%s' in:\n%s", live, r.status, says, r.err);
  assert_null (strstr (r.out, "5000"));
  assert_null (strstr (r.err, "5000"));
  test_assert_contains (r.out, "/real-a", NULL);
  res_clear (&r);
}

/* `fusebox log --follow --json LIVE`, its output in OUT and its warnings in
 * ERR (paths in fx->tmp); returns its pid, kept for the fixture to end. */
static GPid
start_follower (RFx *fx, const char *live, char **ret_out, char **ret_err)
{
  g_autofree char *out = g_build_filename (fx->tmp, "follow.out", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "follow.err", NULL);
  g_autofree char *cmd = g_strdup_printf ("exec '%s' log --follow --json '%s' >%s 2>%s", test_bin (), live, out, err);
  const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  GPid pid;

  rfx_set_repro (fx, (char **)argv);
  if (!g_spawn_async (fx->ws, (char **)argv, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, &error))
    fail_msg ("spawn: %s", error->message);
  rfx_keep_pid (fx, pid);
  *ret_out = g_steal_pointer (&out);
  *ret_err = g_steal_pointer (&err);
  return pid;
}

/* Wait (a bound only a hang reaches) until FILE holds TEXT. */
static void
wait_for_text (const char *file, const char *text, const char *what)
{
  if (!TEST_WAIT_FOR (({
                        g_autofree char *t = test_read_file (file);
                        t != NULL &&strstr (t, text) != NULL;
                      }),
                      CAP_MS))
    {
      g_autofree char *t = test_read_file (file);
      fail_msg ("%s: no '%s' in %s:\n%.2000s", what, text, file, t ? t : "");
    }
}

/* Append record SEQ to FD. */
static void
append_record (int fd, guint64 seq, const char *path)
{
  g_autofree char *rec = record (seq, path);

  write_str (fd, rec);
}

/* A rotation whose new live file can't be made: the writer renames
 * audit.jsonl to its rotated name, finds another user's file at the live
 * name (taken in that instant, in a sticky shared directory), refuses it,
 * and writes on in the rotated file through its descriptor (these are the
 * writer's steps, made here on the files).  `log --follow` took the rotated
 * file as read to its end (its name says seqs 1-2), skipped the live one as
 * another's, and waited for ever: records 3 and 4 were never shown, and
 * nothing said so.  Now it follows the rotated file until a live file of
 * the log's owner is there, warns of the other one, and shows 3 and 4. */
RFX_CASE (test_follow_writer_kept_on_after_rotation)
{
  g_autofree char *dir = shared_dir (fx, "shared");
  g_autofree char *live = g_build_filename (dir, "audit.jsonl", NULL);
  g_autofree char *rotated = g_build_filename (dir, "audit.000000000001-000000000002.jsonl", NULL);
  g_autofree char *forged = record (90, "/FORGED");
  g_autofree char *says = NULL;
  g_autofree char *out = NULL, *err = NULL;
  int fd;

  fd = open (live, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true (fd >= 0);
  append_record (fd, 1, "/real-1");
  append_record (fd, 2, "/real-2");
  start_follower (fx, live, &out, &err);
  wait_for_text (out, "\"seq\":2,", "log --follow before the rotation");

  assert_int_equal (rename (live, rotated), 0);
  test_write (live, forged, 0644);
  assert_int_equal (chown (live, 65534, 65534), 0);
  test_assert_host_readable (live);
  /* the follower has met the other file: what comes now, only the
   * renamed file has */
  says = g_strdup_printf ("%s belongs to uid 65534, not to uid 0, whose log %s is; skipped", live, live);
  wait_for_text (err, says, "log --follow's warning");
  append_record (fd, 3, "/real-3");
  append_record (fd, 4, "/real-4");
  close (fd);

  wait_for_text (out, "\"seq\":4,", "log --follow after a rotation whose live file was refused");
  {
    g_autofree char *t = test_read_file (out);

    test_assert_contains (t, "/real-1", "/real-2", "/real-3", NULL);
    assert_null (strstr (t, "FORGED"));
  }
}

/* A rotated name taken first by another user's file, which the follower
 * skips (with a warning), then removed, and made by the writer: two
 * rotations between the follower's looks (seqs 3-4 read through the live
 * file, 5-6 under the name the other file had, 7 live).  The follower
 * remembered the name as seen and never read the writer's file: 5 and 6
 * were missing.  A skipped file is now remembered as that file, not its
 * name, and the writer's is read. */
RFX_CASE (test_follow_rotated_name_taken_before)
{
  g_autofree char *dir = shared_dir (fx, "shared");
  g_autofree char *live = g_build_filename (dir, "audit.jsonl", NULL);
  g_autofree char *first = g_build_filename (dir, "audit.000000000001-000000000002.jsonl", NULL);
  g_autofree char *second = g_build_filename (dir, "audit.000000000003-000000000004.jsonl", NULL);
  g_autofree char *taken = g_build_filename (dir, "audit.000000000005-000000000006.jsonl", NULL);
  g_autofree char *forged = record (5, "/FORGED");
  g_autofree char *says =
    g_strdup_printf ("%s belongs to uid 65534, not to uid 0, whose log %s is; skipped", taken, live);
  g_autofree char *out = NULL, *err = NULL;
  int fd;

  fd = open (live, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true (fd >= 0);
  append_record (fd, 1, "/real-1");
  append_record (fd, 2, "/real-2");
  start_follower (fx, live, &out, &err);
  wait_for_text (out, "\"seq\":2,", "log --follow before the rotations");

  /* the other user's file, then a rotation: the follower lists and skips it */
  test_write (taken, forged, 0644);
  assert_int_equal (chown (taken, 65534, 65534), 0);
  test_assert_host_readable (taken);
  assert_int_equal (rename (live, first), 0);
  close (fd);
  fd = open (live, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true (fd >= 0);
  append_record (fd, 3, "/real-3");
  wait_for_text (out, "\"seq\":3,", "log --follow after the first rotation");
  wait_for_text (err, says, "log --follow's warning");

  /* removed by its owner; two rotations, the second to the name it had */
  assert_int_equal (unlink (taken), 0);
  append_record (fd, 4, "/real-4");
  assert_int_equal (rename (live, second), 0);
  close (fd);
  fd = open (live, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true (fd >= 0);
  append_record (fd, 5, "/real-5");
  append_record (fd, 6, "/real-6");
  assert_int_equal (rename (live, taken), 0);
  close (fd);
  fd = open (live, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true (fd >= 0);
  append_record (fd, 7, "/real-7");
  close (fd);

  wait_for_text (out, "\"seq\":7,", "log --follow after two more rotations");
  {
    g_autofree char *t = test_read_file (out);

    test_assert_contains (t, "/real-4", "/real-5", "/real-6", NULL);
    assert_null (strstr (t, "FORGED"));
  }
}

/* As the writer leaves it when the live name was taken right after its
 * rename: in DIR (a shared directory), audit.000000000001-000000000002.jsonl,
 * still written through FD (returned), and another user's forged file at
 * the live name. */
static int
rotated_and_refused (const char *dir, const char *live)
{
  g_autofree char *rotated = g_build_filename (dir, "audit.000000000001-000000000002.jsonl", NULL);
  g_autofree char *forged = record (90, "/FORGED");
  int fd;

  fd = open (live, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true (fd >= 0);
  append_record (fd, 1, "/real-1");
  append_record (fd, 2, "/real-2");
  assert_int_equal (rename (live, rotated), 0);
  test_write (live, forged, 0644);
  assert_int_equal (chown (live, 65534, 65534), 0);
  test_assert_host_readable (live);
  test_assert_host_readable (rotated);
  return fd;
}

/* The same, with the follower started after it: it read the rotated file
 * once, as done, skipped the other user's, and waited for ever, while the
 * writer wrote on in the rotated file.  The newest rotated file is now
 * followed until the log's owner has a live file. */
RFX_CASE (test_follow_started_after_a_refused_rotation)
{
  g_autofree char *dir = shared_dir (fx, "shared");
  g_autofree char *live = g_build_filename (dir, "audit.jsonl", NULL);
  g_autofree char *says =
    g_strdup_printf ("%s belongs to uid 65534, not to uid 0, whose log %s is; skipped", live, live);
  g_autofree char *out = NULL, *err = NULL;
  int fd = rotated_and_refused (dir, live);

  append_record (fd, 3, "/real-3");
  start_follower (fx, live, &out, &err);
  wait_for_text (out, "\"seq\":3,", "log --follow started after the rotation");
  wait_for_text (err, says, "log --follow's warning");
  append_record (fd, 4, "/real-4");
  append_record (fd, 5, "/real-5");
  close (fd);
  wait_for_text (out, "\"seq\":5,", "log --follow, the writer writing on in the rotated file");
  {
    g_autofree char *t = test_read_file (out);

    assert_null (strstr (t, "FORGED"));
  }
}

/* The other user's file at the live name, skipped by the follower, and
 * then a file of the log's owner there with the same device and inode
 * number (ext4 gives a removed file's number to the next; here root takes
 * the file over, which is the same to the reader): the follower took it
 * for the skipped one and never read it. */
RFX_CASE (test_follow_skipped_live_number_reused)
{
  g_autofree char *dir = shared_dir (fx, "shared");
  g_autofree char *live = g_build_filename (dir, "audit.jsonl", NULL);
  g_autofree char *rotated = g_build_filename (dir, "audit.000000000001-000000000002.jsonl", NULL);
  g_autofree char *says =
    g_strdup_printf ("%s belongs to uid 65534, not to uid 0, whose log %s is; skipped", live, live);
  g_autofree char *out = NULL, *err = NULL;
  int fd = rotated_and_refused (dir, live);

  close (fd);
  start_follower (fx, live, &out, &err);
  wait_for_text (out, "\"seq\":2,", "log --follow");
  wait_for_text (err, says, "log --follow's warning");
  /* the writer's next run: the file at the live name is now the owner's */
  assert_int_equal (unlink (rotated), 0);
  assert_int_equal (truncate (live, 0), 0);
  assert_int_equal (chown (live, 0, 0), 0);
  assert_int_equal (chmod (live, 0600), 0);
  fd = open (live, O_WRONLY | O_APPEND | O_CLOEXEC);
  assert_true (fd >= 0);
  append_record (fd, 3, "/real-3");
  close (fd);
  wait_for_text (out, "\"seq\":3,", "log --follow, the owner's file at the live name");
}

/* Another user making rotated names one after another beside the log,
 * 20,000 kept (the oldest removed): `report` and `log` listed the
 * directory again after each round of skipped files, found new names each
 * time, and never ended, their memory growing.  A reader that ends now
 * looks again only a few times. */
RFX_CASE (test_names_made_one_after_another)
{
  g_autofree char *dir = shared_dir (fx, "shared");
  g_autofree char *live = g_build_filename (dir, "audit.jsonl", NULL);
  g_autofree char *rec1 = record (1, "/real-a");
  const char *const cmds[][3] = { { "report", "--json", live }, { "log", live, NULL } };
  int ready[2];
  char c;
  pid_t maker;

  test_write (live, rec1, 0600);
  assert_int_equal (pipe (ready), 0);
  maker = fork ();
  assert_true (maker >= 0);
  if (maker == 0)
    {
      const guint64 kept = 20000;

      if (setgroups (0, NULL) < 0 || setgid (65534) < 0 || setuid (65534) < 0)
        _exit (1);
      for (guint64 i = 1;; i++)
        {
          char name[128];

          g_snprintf (name, sizeof name, "%s/audit.%012" G_GUINT64_FORMAT "-%012" G_GUINT64_FORMAT ".jsonl", dir, i, i);
          (void)mknod (name, S_IFREG | 0644, 0);
          if (i > kept)
            {
              g_snprintf (name, sizeof name, "%s/audit.%012" G_GUINT64_FORMAT "-%012" G_GUINT64_FORMAT ".jsonl", dir,
                          i - kept, i - kept);
              (void)unlink (name);
            }
          if (i == kept)
            (void)!write (ready[1], "r", 1);
        }
    }
  close (ready[1]);
  rfx_keep_pid (fx, maker);
  assert_int_equal (read (ready[0], &c, 1), 1);
  close (ready[0]);
  for (guint k = 0; k < G_N_ELEMENTS (cmds); k++)
    {
      Res r;

      FUSEBOX (fx, &r, cmds[k][0], cmds[k][1], cmds[k][2]);
      if (r.status < 0)
        fail_msg ("%s %s: still reading after %d s while names keep coming", cmds[k][0], live, CAP_MS / 1000);
      if (r.status != 0 || strstr (r.out, "/real-a") == NULL)
        fail_msg ("%s %s: exit %d, the real record not shown:\n%.2000s", cmds[k][0], live, r.status, r.err);
      res_clear (&r);
    }
  kill (maker, SIGKILL);
}

/* User 12345's log (a rotated file, seqs 1-2) and user 65534's forged file
 * at its live name, read by root: the live file's owner was taken for the
 * log's, the forged records shown as the log, and the real file skipped
 * with the advice to remove it.  Files of several users, none root's: the
 * log is refused, naming the uids; each file can still be read alone. */
RFX_CASE (test_log_of_several_owners)
{
  g_autofree char *dir = shared_dir (fx, "shared");
  g_autofree char *live = g_build_filename (dir, "audit.jsonl", NULL);
  g_autofree char *part = g_build_filename (dir, "audit.000000000001-000000000002.jsonl", NULL);
  g_autofree char *real1 = record (1, "/real-1"), *real2 = record (2, "/real-2");
  g_autofree char *forged1 = record (1, "/FORGED-1"), *forged2 = record (2, "/FORGED-2");
  g_autofree char *real = g_strconcat (real1, real2, NULL);
  g_autofree char *forged = g_strconcat (forged1, forged2, NULL);
  g_autofree char *says =
    g_strdup_printf ("the files of the log %s belong to several users (uids 65534, 12345), none of them you", live);
  const char *const cmds[][3] = { { "log", live, NULL }, { "report", "--json", live } };
  Res r;

  test_write (part, real, 0600);
  test_write (live, forged, 0644);
  assert_int_equal (chown (part, 12345, 12345), 0);
  assert_int_equal (chown (live, 65534, 65534), 0);
  test_assert_host_readable (part);
  test_assert_host_readable (live);
  for (guint k = 0; k < G_N_ELEMENTS (cmds); k++)
    {
      FUSEBOX (fx, &r, cmds[k][0], cmds[k][1], cmds[k][2]);
      if (r.status != 1 || strstr (r.err, says) == NULL)
        fail_msg ("%s %s: exit %d; no '%s' in:\n%s", cmds[k][0], live, r.status, says, r.err);
      assert_null (strstr (r.out, "FORGED"));
      assert_null (strstr (r.out, "/real-"));
      res_clear (&r);
    }
  FUSEBOX (fx, &r, "log", part);
  if (r.status != 0 || strstr (r.out, "/real-2") == NULL)
    fail_msg ("log %s: exit %d:\n%s", part, r.status, r.err);
  res_clear (&r);
}

/* The writer writing on in its renamed file, another user's files at the
 * live name and at a rotated name after it: the follower took the other
 * name for the log's newer file, closed the one being written, and showed
 * nothing more. */
RFX_CASE (test_follow_newest_before_another_users_name)
{
  g_autofree char *dir = shared_dir (fx, "shared");
  g_autofree char *live = g_build_filename (dir, "audit.jsonl", NULL);
  g_autofree char *later = g_build_filename (dir, "audit.999999999999-999999999999.jsonl", NULL);
  g_autofree char *forged = record (90, "/FORGED-LATER");
  g_autofree char *out = NULL, *err = NULL;
  int fd = rotated_and_refused (dir, live);

  test_write (later, forged, 0644);
  assert_int_equal (chown (later, 65534, 65534), 0);
  test_assert_host_readable (later);
  start_follower (fx, live, &out, &err);
  wait_for_text (out, "\"seq\":2,", "log --follow");
  append_record (fd, 3, "/real-3");
  append_record (fd, 4, "/real-4");
  close (fd);
  wait_for_text (out, "\"seq\":4,", "log --follow, another user's rotated name after the written file");
  {
    g_autofree char *t = test_read_file (out);

    assert_null (strstr (t, "FORGED"));
  }
}

/* Something that is no file at the live name after a rotation (another
 * user's symbolic link): the writer refuses it and writes on in the renamed
 * file; the follower ended, exit 1, and no follower could follow the log
 * while it was there.  It now says what is there once and follows on. */
RFX_CASE (test_follow_past_a_link_at_the_live_name)
{
  g_autofree char *dir = shared_dir (fx, "shared");
  g_autofree char *live = g_build_filename (dir, "audit.jsonl", NULL);
  g_autofree char *rotated = g_build_filename (dir, "audit.000000000001-000000000002.jsonl", NULL);
  g_autofree char *says = g_strdup_printf ("%s is a symbolic link", live);
  g_autofree char *out = NULL, *err = NULL;
  GPid pid;
  int fd, status;

  fd = open (live, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true (fd >= 0);
  append_record (fd, 1, "/real-1");
  append_record (fd, 2, "/real-2");
  pid = start_follower (fx, live, &out, &err);
  wait_for_text (out, "\"seq\":2,", "log --follow");
  assert_int_equal (rename (live, rotated), 0);
  assert_int_equal (symlink ("/etc/hostname", live), 0);
  assert_int_equal (lchown (live, 65534, 65534), 0);
  wait_for_text (err, says, "log --follow's warning");
  append_record (fd, 3, "/real-3");
  close (fd);
  wait_for_text (out, "\"seq\":3,", "log --follow, a link at the live name");
  assert_int_equal (waitpid (pid, &status, WNOHANG), 0);
}

/* One --log for two runs, each rotating: run B goes on in the live file
 * run A left (A's seqs 31-40), and names that file after its own first
 * seq (1-5), so that by name it came first: A's 31 was read first and A's
 * 1-30 dropped as duplicates, without a warning.  (The writer's steps,
 * made here with the times it gives.)  The files are read in the order
 * written, and a record is a repeat only when its seq was shown: every
 * record is shown, and `report` counts no gap and no duplicate, whether
 * the files' times are apart, all within one clock tick (then the seqs
 * order them: a jump is said, and then filled), or out of order (a clock
 * set back between two rotations). */
RFX_CASE (test_two_runs_one_log)
{
  g_autofree char *dir = g_build_filename (fx->tmp, "two", NULL);
  g_autofree char *live = g_build_filename (dir, "audit.jsonl", NULL);
  struct
  {
    const char *name;
    const char *run;
    guint64 first, last;
    const char *run2;
    guint64 first2, last2;
  } files[] = {
    { "audit.000000000001-000000000015.jsonl", "A", 1, 15, NULL, 0, 0 },
    { "audit.000000000016-000000000030.jsonl", "A", 16, 30, NULL, 0, 0 },
    { "audit.000000000001-000000000005.jsonl", "A", 31, 40, "B", 1, 5 },
    { "audit.jsonl", "B", 6, 8, NULL, 0, 0 },
  };
  /* each file's time, in minutes: apart, in one tick, the second set back */
  const int minutes[][4] = { { 0, 1, 2, 3 }, { 0, 0, 0, 0 }, { 5, 1, 6, 7 } };
  const char *const cmds[][3] = { { "log", "--json", live }, { "report", "--json", live } };

  assert_int_equal (g_mkdir_with_parents (dir, 0700), 0);
  for (guint t = 0; t < G_N_ELEMENTS (minutes); t++)
    {
      for (guint i = 0; i < G_N_ELEMENTS (files); i++)
        {
          g_autofree char *path = g_build_filename (dir, files[i].name, NULL);
          g_autoptr (GString) text = g_string_new (NULL);
          time_t when = 1700000000 + (time_t)minutes[t][i] * 60;
          struct timespec times[2] = { { when, 0 }, { when, 0 } };

          for (int part = 0; part < 2; part++)
            {
              const char *run = part == 0 ? files[i].run : files[i].run2;

              for (guint64 seq = part == 0 ? files[i].first : files[i].first2;
                   run != NULL && seq <= (part == 0 ? files[i].last : files[i].last2); seq++)
                g_string_append_printf (text,
                                        "{\"ts\":\"2024-01-01T00:00:00Z\",\"run\":\"%s\",\"seq\":%" G_GUINT64_FORMAT
                                        ",\"op\":\"open\",\"path\":\"/%s-%" G_GUINT64_FORMAT
                                        "\",\"access\":\"read\",\"decision\":\"allow\",\"errno\":0}\n",
                                        run, seq, run, seq);
            }
          test_write (path, text->str, 0600);
          assert_int_equal (utimensat (AT_FDCWD, path, times, 0), 0);
        }
      for (guint k = 0; k < G_N_ELEMENTS (cmds); k++)
        {
          Res r;

          FUSEBOX (fx, &r, cmds[k][0], cmds[k][1], cmds[k][2]);
          if (r.status != 0)
            fail_msg ("times %u: %s %s: exit %d:\n%s", t, cmds[k][0], live, r.status, r.err);
          if (k == 0)
            {
              if (count (r.out, "\"run\":\"A\"") != 40 || count (r.out, "\"run\":\"B\"") != 8)
                fail_msg ("times %u: log %s: %u of A's 40 records, %u of B's 8:\n%s", t, live,
                          count (r.out, "\"run\":\"A\""), count (r.out, "\"run\":\"B\""), r.err);
              /* apart: in the order written */
              if (t == 0 && strstr (r.out, "\"/A-1\"") > strstr (r.out, "\"/A-31\""))
                fail_msg ("log %s: A's 31 shown before A's 1:\n%s", live, r.out);
            }
          else if (strstr (r.out, "\"duplicates\" : 0,") == NULL || count (r.out, "\"gaps\" :") < 2 ||
                   count (r.out, "\"gaps\" : 0") != count (r.out, "\"gaps\" :"))
            fail_msg ("times %u: report %s: gaps or duplicates counted:\n%s", t, live, r.out);
          res_clear (&r);
        }
    }
}

/* Another user's directory (holding an access.jsonl of forged records) or
 * link at the free live name of a log that has only rotated files: the
 * name was taken for a run directory and the forged log read in place of
 * the real one, whose files were not mentioned.  A log file's name (one
 * ending in .jsonl, or any with rotated files beside it: a --log named
 * audit.log) is never a run directory: the rotated files are read, and
 * what is at the live name refused, named.  With nothing at the live name,
 * the rotated files are read (the name was "no access log"). */
RFX_CASE (test_no_run_directory_at_a_log_name)
{
  const char *const names[] = { "audit.jsonl", "audit.log" };
  g_autofree char *rec1 = record (1, "/real-a");
  g_autofree char *forged = record (1, "/FORGED");

  for (guint n = 0; n < G_N_ELEMENTS (names); n++)
    {
      g_autofree char *dir = shared_dir (fx, n == 0 ? "shared" : "shared2");
      g_autofree char *live = g_build_filename (dir, names[n], NULL);
      g_autofree char *part_name =
        g_strdup_printf ("%.*s.000000000001-000000000001.jsonl", (int)(strlen (names[n]) - (n == 0 ? 6 : 0)), names[n]);
      g_autofree char *part = g_build_filename (dir, part_name, NULL);
      g_autofree char *inner = g_build_filename (live, "access.jsonl", NULL);
      g_autofree char *other = g_build_filename (dir, "other", NULL);
      g_autofree char *other_log = g_build_filename (other, "access.jsonl", NULL);
      Res r;

      test_write (part, rec1, 0600);

      FUSEBOX (fx, &r, "log", live);
      if (r.status != 0 || strstr (r.out, "/real-a") == NULL)
        fail_msg ("log %s, no live file: exit %d:\n%s", live, r.status, r.err);
      res_clear (&r);

      assert_int_equal (mkdir (live, 0755), 0);
      test_write (inner, forged, 0644);
      assert_int_equal (chown (inner, 65534, 65534), 0);
      assert_int_equal (chown (live, 65534, 65534), 0);
      test_assert_host_readable (inner);
      for (int slash = 0; slash < 2; slash++)
        {
          /* with the slash a shell's completion adds */
          g_autofree char *named = g_strconcat (live, slash ? "/" : "", NULL);

          FUSEBOX (fx, &r, "log", named);
          assert_null (strstr (r.out, "FORGED"));
          if (strstr (r.out, "/real-a") == NULL || strstr (r.err, live) == NULL)
            fail_msg ("log %s, a directory there: exit %d:\n%s\n%s", named, r.status, r.out, r.err);
          res_clear (&r);
        }
      assert_int_equal (unlink (inner), 0);
      assert_int_equal (rmdir (live), 0);

      assert_int_equal (mkdir (other, 0755), 0);
      test_write (other_log, forged, 0644);
      assert_int_equal (chown (other_log, 65534, 65534), 0);
      assert_int_equal (chown (other, 65534, 65534), 0);
      assert_int_equal (symlink (other, live), 0);
      assert_int_equal (lchown (live, 65534, 65534), 0);
      FUSEBOX (fx, &r, "log", live);
      assert_null (strstr (r.out, "FORGED"));
      if (strstr (r.out, "/real-a") == NULL || strstr (r.err, live) == NULL)
        fail_msg ("log %s, a link there: exit %d:\n%s\n%s", live, r.status, r.out, r.err);
      res_clear (&r);
    }
}

/* Another user's file named as a rotated file of a run directory, beside
 * it in a shared place (a --run-dir there): the directory was taken for a
 * log's live name, its access.jsonl never read, and their file shown as
 * the log.  The caller's directory is its run directory; another user's,
 * with such names beside it, is refused, naming both. */
RFX_CASE (test_rotated_names_beside_a_run_directory)
{
  g_autofree char *shared = shared_dir (fx, "shared");
  g_autofree char *run = g_build_filename (shared, "run", NULL);
  g_autofree char *log = g_build_filename (run, "access.jsonl", NULL);
  g_autofree char *planted = g_build_filename (shared, "run.000000000001-000000000001.jsonl", NULL);
  g_autofree char *rec1 = record (1, "/real-a");
  g_autofree char *forged = record (1, "/FORGED");
  g_autofree char *says = NULL;
  Res r;

  assert_int_equal (g_mkdir_with_parents (run, 0700), 0);
  test_write (log, rec1, 0600);
  test_write (planted, forged, 0644);
  assert_int_equal (chown (planted, 65534, 65534), 0);
  test_assert_host_readable (planted);

  FUSEBOX (fx, &r, "log", run);
  if (r.status != 0 || strstr (r.out, "/real-a") == NULL)
    fail_msg ("log %s: exit %d, the run's record not shown:\n%s\n%s", run, r.status, r.out, r.err);
  assert_null (strstr (r.out, "FORGED"));
  res_clear (&r);

  /* another user's run directory, read by root */
  assert_int_equal (chown (log, 12345, 12345), 0);
  assert_int_equal (chown (run, 12345, 12345), 0);
  says = g_strdup_printf ("%s is a directory, and there are rotated log files beside it", run);
  FUSEBOX (fx, &r, "log", run);
  if (r.status != 1 || strstr (r.err, says) == NULL)
    fail_msg ("log %s: exit %d; no '%s' in:\n%s", run, r.status, says, r.err);
  assert_null (strstr (r.out, "FORGED"));
  res_clear (&r);
}

/* A log whose runs' seqs span nearly 2^63 each: the report's total of
 * missing seqs wrapped to 0 and said the log was whole. */
RFX_CASE (test_report_gaps_do_not_wrap)
{
  g_autofree char *live = run_file (fx, "access.jsonl");
  g_autoptr (GString) text = g_string_new (NULL);
  const struct
  {
    const char *run;
    gint64 seq;
  } recs[] = { { "A", 1 }, { "A", G_MAXINT64 }, { "B", 1 }, { "B", G_MAXINT64 }, { "C", 1 }, { "C", 8 } };
  Res r;

  for (guint i = 0; i < G_N_ELEMENTS (recs); i++)
    g_string_append_printf (
      text,
      "{\"ts\":\"2024-01-01T00:00:00Z\",\"run\":\"%s\",\"seq\":%" G_GINT64_FORMAT
      ",\"op\":\"open\",\"path\":\"/x\",\"access\":\"read\",\"decision\":\"allow\",\"errno\":0}\n",
      recs[i].run, recs[i].seq);
  test_write (live, text->str, 0600);
  FUSEBOX (fx, &r, "report", live);
  if (strstr (r.out, "the log is not whole") == NULL && strstr (r.err, "the log is not whole") == NULL)
    fail_msg ("report %s: no 'the log is not whole':\n%s\n%s", live, r.out, r.err);
  res_clear (&r);
}

/* A run id typed in a directory another user can write (the commands'
 * working directory here), where they made a directory of that name with
 * their own access.jsonl: it was read in place of the run's log.  A run
 * id names one of the caller's runs first. */
RFX_CASE (test_run_id_before_a_name_here)
{
  g_autofree char *real = run_file (fx, "access.jsonl");
  g_autofree char *here = g_build_filename (fx->ws, RUN, NULL);
  g_autofree char *fake = g_build_filename (here, "access.jsonl", NULL);
  g_autofree char *rec1 = record (1, "/real-a");
  g_autofree char *forged = record (1, "/FORGED");
  Res r;

  test_write (real, rec1, 0600);
  assert_int_equal (g_mkdir_with_parents (here, 0755), 0);
  test_write (fake, forged, 0644);
  assert_int_equal (chown (fake, 65534, 65534), 0);
  assert_int_equal (chown (here, 65534, 65534), 0);
  test_assert_host_readable (fake);
  FUSEBOX (fx, &r, "log", RUN);
  if (r.status != 0 || strstr (r.out, "/real-a") == NULL)
    fail_msg ("log %s: exit %d, the run's record not shown:\n%s\n%s", RUN, r.status, r.out, r.err);
  assert_null (strstr (r.out, "FORGED"));
  res_clear (&r);
}

/* Another user's rotated file is all there is when the follower starts
 * (the log is then taken for theirs, with a note); the caller's writer
 * starts next and makes the live file.  The follower skipped the caller's
 * own live file as "another owner's" and advised removing it: every real
 * record was missed.  A file of the caller's makes the log theirs. */
RFX_CASE (test_follow_adopts_the_callers_file)
{
  g_autofree char *dir = shared_dir (fx, "shared");
  g_autofree char *live = g_build_filename (dir, "audit.jsonl", NULL);
  g_autofree char *planted = g_build_filename (dir, "audit.000000000001-000000000001.jsonl", NULL);
  g_autofree char *forged = record (1, "/FORGED");
  g_autofree char *out = NULL, *err = NULL;
  int fd;

  test_write (planted, forged, 0644);
  assert_int_equal (chown (planted, 65534, 65534), 0);
  test_assert_host_readable (planted);
  start_follower (fx, live, &out, &err);
  wait_for_text (err, "is uid 65534's", "log --follow's note");
  fd = open (live, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true (fd >= 0);
  append_record (fd, 2, "/real-2");
  append_record (fd, 3, "/real-3");
  close (fd);
  wait_for_text (out, "/real-3", "log --follow, the caller's live file");
}

/* `fusebox log --json LIVE`, its output into a pipe nobody reads yet: once
 * it has printed (and so listed the log's files), it waits in write(2),
 * partway through the log, like a reader behind a pager.  Returns its pid;
 * *RET_FD the pipe's end to read. */
static GPid
start_stalled_reader (RFx *fx, const char *live, int *ret_fd)
{
  const char *argv[] = { test_bin (), "log", "--json", live, NULL };
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  struct pollfd p;
  GPid pid;

  rfx_set_repro (fx, (char **)argv);
  if (!g_spawn_async_with_pipes (fx->ws, (char **)argv, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, NULL, ret_fd,
                                 NULL, &error))
    fail_msg ("spawn: %s", error->message);
  rfx_keep_pid (fx, pid);
  p.fd = *ret_fd;
  p.events = POLLIN;
  assert_int_equal (poll (&p, 1, CAP_MS), 1);
  return pid;
}

/* All that comes out of FD until its end (a bound only a hang reaches). */
static char *
drain (RFx *fx, GPid pid, int fd)
{
  GString *out = g_string_new (NULL);
  char buf[65536];
  ssize_t n;

  while ((n = read (fd, buf, sizeof buf)) > 0)
    g_string_append_len (out, buf, n);
  close (fd);
  assert_true (rfx_wait (fx, pid, CAP_MS) >= 0);
  return g_string_free (out, FALSE);
}

/* N records of RUN, seqs FIRST.., appended to PATH (made 0600 when new). */
static void
append_run (const char *path, const char *run, guint64 first, guint n)
{
  g_autoptr (GString) text = g_string_new (NULL);
  int fd = open (path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);

  assert_true (fd >= 0);
  for (guint64 seq = first; seq < first + n; seq++)
    g_string_append_printf (text,
                            "{\"ts\":\"2024-01-01T00:00:00Z\",\"run\":\"%s\",\"seq\":%" G_GUINT64_FORMAT
                            ",\"op\":\"open\",\"path\":\"/%s-%" G_GUINT64_FORMAT
                            "\",\"access\":\"read\",\"decision\":\"allow\",\"errno\":0}\n",
                            run, seq, run, seq);
  write_str (fd, text->str);
  close (fd);
}

/* Two runs, one after the other, on one log, while a reader is behind a
 * pager: run B goes on in the live file run A left, rotates it (its own
 * seqs name it: 1-30) and makes a new live file.  The reader took B's
 * rotated file for the live file it had read, because the name's seqs were
 * below the highest it had shown: A's last 20 records and B's first 30
 * were missing, without a warning.  Only the file it read is skipped now. */
RFX_CASE (test_next_runs_rotated_file_read)
{
  g_autofree char *dir = g_build_filename (fx->tmp, "two", NULL);
  g_autofree char *live = g_build_filename (dir, "L.jsonl", NULL);
  g_autofree char *first = g_build_filename (dir, "L.000000000001-000000005000.jsonl", NULL);
  g_autofree char *second = g_build_filename (dir, "L.000000000001-000000000030.jsonl", NULL);
  g_autofree char *out = NULL;
  GPid pid;
  int fd;

  assert_int_equal (g_mkdir_with_parents (dir, 0700), 0);
  append_run (first, "A", 1, 5000);
  append_run (live, "A", 5001, 20);
  pid = start_stalled_reader (fx, live, &fd);
  /* run B, as the writer does it */
  append_run (live, "B", 1, 30);
  assert_int_equal (rename (live, second), 0);
  append_run (live, "B", 31, 10);
  out = drain (fx, pid, fd);
  if (count (out, "\"run\":\"A\"") != 5020 || count (out, "\"run\":\"B\"") != 40)
    fail_msg ("log %s: %u of A's 5020 records, %u of B's 40", live, count (out, "\"run\":\"A\""),
              count (out, "\"run\":\"B\""));
}

/* Another user's file at a rotated name beside a log that rotates, its
 * change time kept current (chmod in a loop): a follower's listing leaves
 * such a file for the next listing, and it forgot it had skipped it, so
 * it warned of it again and again (a hundred times a file in 20 s).  It
 * says so once. */
RFX_CASE (test_planted_file_kept_changing_warned_once)
{
  g_autofree char *dir = shared_dir (fx, "churn");
  g_autofree char *live = g_build_filename (dir, "L.jsonl", NULL);
  g_autofree char *planted = g_build_filename (dir, "L.000000900000-000000900000.jsonl", NULL);
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autofree char *said = NULL;
  GPid follower;
  pid_t toucher;

  append_run (planted, "X", 900000, 1);
  assert_int_equal (chown (planted, 65534, 65534), 0);
  test_assert_host_readable (planted);
  append_run (live, "R", 1, 1);
  follower = start_follower (fx, live, &out, &err);
  wait_for_text (out, "/R-1\"", "log --follow of the first record");
  toucher = fork ();
  assert_true (toucher >= 0);
  if (toucher == 0)
    for (guint i = 0;; i++)
      {
        if (chmod (planted, i % 2 ? 0644 : 0640) < 0)
          _exit (1);
        g_usleep (1000);
      }
  /* the writer's rotation, 150 times, 10 ms apart */
  for (guint64 seq = 2; seq <= 151; seq++)
    {
      g_autofree char *rotated =
        g_strdup_printf ("%s/L.%012" G_GUINT64_FORMAT "-%012" G_GUINT64_FORMAT ".jsonl", dir, seq - 1, seq - 1);

      assert_int_equal (rename (live, rotated), 0);
      append_run (live, "R", seq, 1);
      g_usleep (10 * 1000);
    }
  wait_for_text (out, "/R-151\"", "log --follow of the last record");
  kill (toucher, SIGKILL);
  assert_int_equal (waitpid (toucher, NULL, 0), toucher);
  test_kill_child (&follower, SIGKILL);
  {
    g_autofree char *text = test_read_file (err);

    said = g_strdup (text != NULL ? text : "");
  }
  if (count (said, planted) != 1)
    fail_msg ("the follower warned of %s %u times, not once:\n%.2000s", planted, count (said, planted), said);
  {
    g_autofree char *text = test_read_file (out);

    if (count (text, "\"run\":\"R\"") != 151 || count (text, "\"run\":\"X\"") != 0)
      fail_msg ("the follower showed %u of the log's 151 records, %u of the planted file's",
                count (text, "\"run\":\"R\""), count (text, "\"run\":\"X\""));
  }
}

/* A rotated file of the log's owner that the reader can't open (mode 000,
 * read by that owner, not root), beside the live file: a follower took it
 * for a new file at each listing, warned of it again, and listed again at
 * once: 48,000 warnings in 3 s at full CPU, and the live file's records
 * never shown.  It warns once and shows them, as a reader that ends does.
 * And a rotated file it read, made unreadable, then grown (another run
 * writing on in it): it went back to it at each look, failed, and warned
 * again, 47,000 times in 4.5 s; once now. */
RFX_CASE (test_follow_unreadable_rotated_warned_once)
{
  g_autofree char *dir = shared_dir (fx, "closed");
  g_autofree char *live = g_build_filename (dir, "L.jsonl", NULL);
  g_autofree char *closed = g_build_filename (dir, "L.000000000001-000000000003.jsonl", NULL);
  g_autofree char *later = g_build_filename (dir, "L.000000000004-000000000005.jsonl", NULL);
  g_autofree char *out = g_build_filename (fx->tmp, "closed.out", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "closed.err", NULL);
  g_autofree char *cmd = NULL;
  g_autofree char *said = NULL;
  const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  GPid follower;

  if (!g_file_test ("/usr/bin/setpriv", G_FILE_TEST_IS_EXECUTABLE))
    {
      printf ("skipped: /usr/bin/setpriv (util-linux) is missing: the follower must run as another user\n");
      return;
    }
  /* the reader, uid 65534, reaches the directory */
  assert_int_equal (chmod (fx->tmp, 0711), 0);
  append_run (closed, "R", 1, 3);
  append_run (later, "R", 4, 2);
  append_run (live, "R", 6, 3);
  assert_int_equal (chown (closed, 65534, 65534), 0);
  assert_int_equal (chown (later, 65534, 65534), 0);
  assert_int_equal (chown (live, 65534, 65534), 0);
  /* the file is there, and readable outside (to root): only its mode
   * keeps its owner out */
  test_assert_host_readable (closed);
  assert_int_equal (chmod (closed, 0), 0);
  cmd = g_strdup_printf ("exec setpriv --reuid 65534 --regid 65534 --clear-groups '%s' log --follow --json '%s' "
                         ">%s 2>%s",
                         test_bin (), live, out, err);
  argv[2] = cmd;
  rfx_set_repro (fx, (char **)argv);
  if (!g_spawn_async (fx->ws, (char **)argv, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &follower, &error))
    fail_msg ("spawn: %s", error->message);
  rfx_keep_pid (fx, follower);
  wait_for_text (out, "/R-8\"", "log --follow of the live file's last record");
  /* the file read, made unreadable, grows */
  assert_int_equal (chmod (later, 0), 0);
  append_run (later, "S", 1, 1);
  /* a second of following on */
  g_usleep (G_USEC_PER_SEC);
  test_kill_child (&follower, SIGKILL);
  said = test_read_file (err);
  if (count (said, closed) != 1)
    fail_msg ("the follower warned of %s %u times, not once:\n%.2000s", closed, count (said, closed), said);
  if (count (said, later) != 1)
    fail_msg ("the follower warned of %s %u times, not once:\n%.2000s", later, count (said, later), said);
  {
    g_autofree char *text = test_read_file (out);

    assert_int_equal (count (text, "\"run\":\"R\""), 5);
  }
}

/* CPU time (user and system) of process PID so far, in seconds. */
static double
cpu_seconds (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", (int)pid);
  g_autofree char *text = test_read_file (path);
  const char *after = text != NULL ? strrchr (text, ')') : NULL;
  unsigned long long utime = 0, stime = 0;

  /* fields 14 and 15, after the command's name in parentheses */
  assert_non_null (after);
  assert_int_equal (sscanf (after, ") %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime), 2);
  return (double)(utime + stime) / (double)sysconf (_SC_CLK_TCK);
}

/* A follower at the end of the log's newest file, its live file not made
 * yet, looks for a newer rotated file at every call: a listing of the
 * directory, and each queued name's owner asked.  Somebody who can write
 * in a shared directory put 20,000 rotated names of their own there: each
 * look took them all, five times a second, and the idle follower kept a
 * CPU half busy.  The looks now take a twentieth of its time at most, and
 * it still follows: the live file, once made, is read. */
RFX_CASE (test_follow_newest_beside_many_names_idles)
{
  g_autofree char *dir = shared_dir (fx, "crowded");
  g_autofree char *live = g_build_filename (dir, "L.jsonl", NULL);
  g_autofree char *first = g_build_filename (dir, "L.000000000001-000000000003.jsonl", NULL);
  g_autofree char *out = g_build_filename (fx->tmp, "crowded.out", NULL);
  g_autofree char *err = g_build_filename (fx->tmp, "crowded.err", NULL);
  g_autofree char *cmd = NULL;
  const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GError) error = NULL;
  const double window = 3.0;
  double used;
  GPid follower;

  append_run (first, "R", 1, 3);
  cmd = g_strdup_printf ("exec '%s' log --follow --json '%s' >%s 2>%s", test_bin (), live, out, err);
  argv[2] = cmd;
  rfx_set_repro (fx, (char **)argv);
  if (!g_spawn_async (fx->ws, (char **)argv, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &follower, &error))
    fail_msg ("spawn: %s", error->message);
  rfx_keep_pid (fx, follower);
  wait_for_text (out, "/R-3\"", "log --follow of the newest rotated file's last record");
  for (guint i = 0; i < 20000; i++)
    {
      g_autofree char *name = g_strdup_printf ("%s/L.%012u-%012u.jsonl", dir, 100 + 2 * i, 101 + 2 * i);

      append_run (name, "X", 100 + 2 * i, 2);
      assert_int_equal (chown (name, 65534, 65534), 0);
    }
  test_assert_host_readable (first);
  /* a second to find them, then a window of following */
  g_usleep (G_USEC_PER_SEC);
  used = cpu_seconds (follower);
  g_usleep ((gulong)(window * G_USEC_PER_SEC));
  used = cpu_seconds (follower) - used;
  if (used > window / 5)
    fail_msg ("the idle follower used %.2f s of CPU in %.1f s beside 20,000 names of another user's", used, window);
  append_run (live, "R", 4, 2);
  wait_for_text (out, "/R-5\"", "log --follow of the live file made after");
  test_kill_child (&follower, SIGKILL);
}

/* A reader (not a follower) that took the log for another user's (their
 * rotated file was all there was) meets the caller's live file, made
 * while it read: it was skipped as "another owner's", with the advice to
 * remove it.  A file of the caller's makes the log theirs. */
RFX_CASE (test_reader_adopts_the_callers_file)
{
  g_autofree char *dir = shared_dir (fx, "shared");
  g_autofree char *live = g_build_filename (dir, "M.jsonl", NULL);
  g_autofree char *planted = g_build_filename (dir, "M.000000000001-000000005000.jsonl", NULL);
  g_autofree char *out = NULL;
  GPid pid;
  int fd;

  append_run (planted, "X", 1, 5000);
  assert_int_equal (chown (planted, 65534, 65534), 0);
  test_assert_host_readable (planted);
  pid = start_stalled_reader (fx, live, &fd);
  append_run (live, "R", 1, 3);
  out = drain (fx, pid, fd);
  if (count (out, "\"run\":\"R\"") != 3)
    fail_msg ("log %s: %u of the caller's 3 records", live, count (out, "\"run\":\"R\""));
}

/* A live file whose owner made it sparse (truncate -s): record 1, then a
 * hole of terabytes, then record 3 on a line of its own.  A hole reads as
 * NUL bytes, at some GB/s: `log`, `report` and `log --follow` were at it
 * for hours.  Each now skips the hole (the line in it is bad, said) and
 * shows both records. */
RFX_CASE (test_sparse_log_read_past_its_hole)
{
  g_autofree char *live = run_file (fx, "access.jsonl");
  g_autofree char *rec1 = record (1, "/real-a");
  g_autofree char *rec3 = record (3, "/real-c");
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  const char *const cmds[][2] = { { "log", RUN }, { "report", RUN } };
  off_t size = (off_t)4 << 40;
  struct stat st;
  int fd;
  GPid follower;

  test_write (live, rec1, 0600);
  fd = open (live, O_WRONLY | O_APPEND | O_CLOEXEC);
  assert_true (fd >= 0);
  /* 4 TiB where the filesystem takes it (ext4 does), else the most it takes */
  while (ftruncate (fd, size) < 0 && errno == EFBIG && size > ((off_t)1 << 34))
    size /= 2;
  assert_int_equal (fstat (fd, &st), 0);
  assert_true (st.st_size == size && st.st_size > ((off_t)1 << 34));
  write_str (fd, "\n");
  write_str (fd, rec3);
  close (fd);
  /* sparse indeed: the data it holds is a block or two */
  assert_int_equal (stat (live, &st), 0);
  assert_true ((guint64)st.st_blocks * 512 < 1024 * 1024);
  for (guint k = 0; k < G_N_ELEMENTS (cmds); k++)
    {
      Res r;

      FUSEBOX (fx, &r, cmds[k][0], cmds[k][1]);
      if (r.status < 0)
        fail_msg ("%s %s: still reading a hole of %" G_GINT64_FORMAT " bytes after %d s", cmds[k][0], live,
                  (gint64)size, CAP_MS / 1000);
      if (r.status != 0)
        fail_msg ("%s %s: exit %d; stderr:\n%.2000s", cmds[k][0], live, r.status, r.err);
      test_assert_contains (r.err, "NUL byte", NULL);
      if (k == 0)
        test_assert_contains (r.out, "/real-a", "/real-c", NULL);
      else
        test_assert_contains (r.out, "records", NULL);
      res_clear (&r);
    }
  follower = start_follower (fx, live, &out, &err);
  wait_for_text (out, "/real-c", "log --follow past the hole");
  test_kill_child (&follower, SIGKILL);
}

/* The owner of a log appends to it faster than `fusebox log`, which ends,
 * gets through it (its output is read slowly here): it read on as long as
 * the file grew.  It reads the file as large as it was when opened, and
 * ends; what was appended after is for `log --follow`. */
RFX_CASE (test_growing_log_read_to_its_size_then)
{
  g_autofree char *live = run_file (fx, "access.jsonl");
  g_autofree char *rec1 = record (1, "/real-a");
  g_autofree char *err = g_build_filename (fx->tmp, "err", NULL);
  g_auto (GStrv) env = rfx_env (fx);
  g_autoptr (GString) shown = g_string_new (NULL);
  gint64 deadline;
  int status = -1, out[2];
  pid_t writer, reader;

  test_write (live, rec1, 0600);
  writer = fork ();
  assert_true (writer >= 0);
  if (writer == 0)
    {
      int fd = open (live, O_WRONLY | O_APPEND | O_CLOEXEC);
      GString *chunk = g_string_new (NULL);

      /* some 30 MB/s, for as long as the reader runs (each its own seq: a
       * record read again is a duplicate, not shown) */
      for (guint64 seq = 2;; g_string_truncate (chunk, 0))
        {
          for (guint i = 0; i < 100; i++, seq++)
            {
              g_autofree char *rec = record (seq, "/more");
              g_string_append (chunk, rec);
            }
          if (write (fd, chunk->str, chunk->len) < 0)
            _exit (1);
          g_usleep (1000);
        }
    }
  rfx_keep_pid (fx, writer);
  /* more than a pipe and stdio hold of its output */
  if (!TEST_WAIT_FOR (({
                        struct stat st;
                        stat (live, &st) == 0 && st.st_size > 1024 * 1024;
                      }),
                      CAP_MS))
    fail_msg ("the writer did not write 1 MB to %s", live);
  assert_int_equal (pipe2 (out, O_CLOEXEC), 0);
  reader = fork ();
  assert_true (reader >= 0);
  if (reader == 0)
    {
      int e = open (err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

      dup2 (out[1], STDOUT_FILENO);
      dup2 (e, STDERR_FILENO);
      execle (test_bin (), "fusebox", "log", "--json", live, (char *)NULL, env);
      _exit (127);
    }
  close (out[1]);
  rfx_keep_pid (fx, reader);
  /* its output taken at some 6 MB/s, a fifth of what is written */
  deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;
  for (;;)
    {
      char buf[64 * 1024];
      ssize_t n = read (out[0], buf, sizeof buf);

      if (n <= 0 || g_get_monotonic_time () > deadline)
        break;
      if (shown->len < 4096)
        g_string_append_len (shown, buf, MIN ((gsize)n, 4096 - shown->len));
      g_usleep (10 * 1000);
    }
  close (out[0]);
  kill (writer, SIGKILL);
  if (waitpid (reader, &status, WNOHANG) != reader)
    {
      kill (reader, SIGKILL);
      fail_msg ("log %s: still reading after 20 s while the file grows", live);
    }
  rfx_forget_pid (fx, reader);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    fail_msg ("log %s: ended with status %d", live, status);
  test_assert_contains (shown->str, "/real-a", "/more", NULL);
}

/* Whoever can write in a log's directory swaps the live file for a copy
 * of it (RENAME_EXCHANGE) each time a reader has opened it and begun to
 * read, told by inotify: at its end the reader found the live name
 * replaced, read the new file, found it replaced again, and never ended
 * (an outside review's `log` and `report` ran for 30 s of CPU, 550 swaps).
 * A reader that ends opens the live name a few times only, then says why
 * it stopped. */
RFX_CASE (test_live_swapped_each_time_read)
{
  g_autofree char *live = run_file (fx, "access.jsonl");
  g_autofree char *dir = g_path_get_dirname (live);
  g_autofree char *spare = g_build_filename (dir, "spare", NULL);
  g_autoptr (GString) text = g_string_new (NULL);
  const char *const cmds[] = { "log", "report" };
  int ready[2];
  char c;
  pid_t swapper;

  for (guint64 seq = 1; seq <= 10000; seq++)
    {
      g_autofree char *rec = record (seq, "/real-a");
      g_string_append (text, rec);
    }
  test_write (live, text->str, 0600);
  test_write (spare, text->str, 0600);
  assert_int_equal (pipe (ready), 0);
  swapper = fork ();
  assert_true (swapper >= 0);
  if (swapper == 0)
    {
      int in = inotify_init1 (IN_CLOEXEC);
      int dfd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
      bool armed = false;

      if (in < 0 || dfd < 0 || inotify_add_watch (in, dir, IN_OPEN | IN_ACCESS) < 0)
        _exit (1);
      (void)!write (ready[1], "r", 1);
      for (;;)
        {
          char buf[16 * 1024] __attribute__ ((aligned (__alignof__(struct inotify_event))));
          ssize_t n = read (in, buf, sizeof buf);

          if (n <= 0)
            _exit (1);
          for (char *p = buf; p < buf + n;)
            {
              const struct inotify_event *ev = (const struct inotify_event *)p;

              if ((ev->mask & IN_OPEN) && ev->len > 0 && strcmp (ev->name, "access.jsonl") == 0)
                armed = true;
              else if ((ev->mask & IN_ACCESS) && armed)
                {
                  armed = false;
                  (void)syscall (SYS_renameat2, dfd, "access.jsonl", dfd, "spare", RENAME_EXCHANGE);
                }
              p += sizeof *ev + ev->len;
            }
        }
    }
  close (ready[1]);
  rfx_keep_pid (fx, swapper);
  assert_int_equal (read (ready[0], &c, 1), 1);
  close (ready[0]);
  for (guint k = 0; k < G_N_ELEMENTS (cmds); k++)
    {
      Res r;

      FUSEBOX (fx, &r, cmds[k], RUN);
      if (r.status < 0)
        fail_msg ("%s %s: still reading after %d s while the live file is swapped each time it is read", cmds[k], RUN,
                  CAP_MS / 1000);
      if (r.status != 0)
        fail_msg ("%s %s: exit %d; stderr:\n%.2000s", cmds[k], RUN, r.status, r.err);
      test_assert_contains (r.err, "was another file each of the", NULL);
      res_clear (&r);
    }
  kill (swapper, SIGKILL);
}

static int
require_host (void **state)
{
  if (!g_file_test (test_bin (), G_FILE_TEST_IS_EXECUTABLE))
    test_skip_or_fail ("FUSEBOX_BIN is not an executable: run with 'meson test'");
  test_host_require ("root", "these tests need root (mknod of a device node)");
  return 0;
}

TEST_DEFINE_MAIN (require_host, NULL, RFX_TEST (test_live_log_not_a_file), RFX_TEST (test_rotated_log_not_a_file),
                  RFX_TEST (test_run_json_not_a_file), RFX_TEST (test_any_content), RFX_TEST (test_follow_any_content),
                  RFX_TEST (test_run_json_any_content), RFX_TEST (test_rotated_of_another_owner),
                  RFX_TEST (test_live_of_another_owner), RFX_TEST (test_run_json_of_another_owner),
                  RFX_TEST (test_follow_writer_kept_on_after_rotation),
                  RFX_TEST (test_follow_rotated_name_taken_before),
                  RFX_TEST (test_follow_started_after_a_refused_rotation),
                  RFX_TEST (test_follow_skipped_live_number_reused), RFX_TEST (test_names_made_one_after_another),
                  RFX_TEST (test_log_of_several_owners), RFX_TEST (test_follow_newest_before_another_users_name),
                  RFX_TEST (test_follow_past_a_link_at_the_live_name), RFX_TEST (test_two_runs_one_log),
                  RFX_TEST (test_no_run_directory_at_a_log_name), RFX_TEST (test_rotated_names_beside_a_run_directory),
                  RFX_TEST (test_report_gaps_do_not_wrap), RFX_TEST (test_run_id_before_a_name_here),
                  RFX_TEST (test_follow_adopts_the_callers_file), RFX_TEST (test_next_runs_rotated_file_read),
                  RFX_TEST (test_reader_adopts_the_callers_file), RFX_TEST (test_sparse_log_read_past_its_hole),
                  RFX_TEST (test_growing_log_read_to_its_size_then), RFX_TEST (test_live_swapped_each_time_read),
                  RFX_TEST (test_planted_file_kept_changing_warned_once),
                  RFX_TEST (test_follow_unreadable_rotated_warned_once),
                  RFX_TEST (test_follow_newest_beside_many_names_idles))
