/* Adversarial tests: the access-log writer writes only into its own file.
 *
 * Whoever can write in the log's directory (a --log or --run-dir in a
 * shared place) chooses what is at the log's name.  The writer opened it
 * with O_CREAT and without O_NOFOLLOW, at the start and again after each
 * rotation (it renames the live file away, then makes it again), and after
 * a failed reopen it opened the rotated file again by name: a symbolic link
 * put there had the records appended to any file the writer may write (or
 * its target made), a hard link or someone else's file got them too.
 *
 *  - At the start: a link to a victim file, a dangling link, a FIFO,
 *    another uid's file and a hard link to the victim at the name: the log
 *    is refused with a message naming it and what it is; the victim is
 *    unchanged and no link target is made.
 *  - At a rotation: the same put at the name in the instant after the
 *    writer's rename.  This program plays that attacker deterministically:
 *    it defines renameat2(), which the writer's library calls, calls the
 *    real one and, when it has just moved the live file away, plants the
 *    object (the race an attacker with inotify wins often, made certain).
 *    The victim is unchanged, the refusal is logged as a warning, and every
 *    record is still written, gap-free, into the file just rotated.
 *
 * Needs root (a file of another uid); nothing of the host is touched
 * outside the test's temporary directory. */
#include "tests/unit/test-ipc-util.h"
#include "tests/lib/test-logread.h"

#include <dlfcn.h>
#include <sys/stat.h>

#define VICTIM_TEXT "the victim's own content\n"

typedef enum
{
  PLANT_NONE,
  PLANT_LINK,
  PLANT_DANGLING,
  PLANT_FIFO,
  PLANT_FOREIGN,
  PLANT_HARDLINK,
} Plant;

static const struct
{
  const char *name; /* what is put at the log's name */
  const char *says; /* what the refusal says */
} plants[] = {
  [PLANT_NONE] = { "nothing", "" },
  [PLANT_LINK] = { "a link to the victim", "is a symbolic link" },
  [PLANT_DANGLING] = { "a dangling link", "is a symbolic link" },
  [PLANT_FIFO] = { "a FIFO", "is a FIFO, not a regular file" },
  [PLANT_FOREIGN] = { "another uid's file", "belongs to uid 65534" },
  [PLANT_HARDLINK] = { "a hard link to the victim", "has 2 names" },
};

typedef struct
{
  TestDir *dir;   /* T, which keeps the paths below */
  char *run;      /* T/run: the log's directory */
  char *path;     /* T/run/access.jsonl */
  char *victim;   /* T/victim */
  char *dangling; /* T/made-through-the-link: must never exist */
} Fixture;

/* The planting renameat2() below reads these. */
static Plant plant_at_rotation = PLANT_NONE;
static const Fixture *plant_fixture;
static gboolean planted;

static GPtrArray *warnings; /* messages the writer logged */

static GLogWriterOutput
capture_writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data)
{
  for (gsize i = 0; i < n_fields; i++)
    if (strcmp (fields[i].key, "MESSAGE") == 0)
      g_ptr_array_add (warnings, g_strdup (fields[i].value));
  return g_log_writer_default (level, fields, n_fields, user_data);
}

/* OBJ at PATH; FX's victim is what links point to. */
static void
plant (const Fixture *fx, Plant obj, const char *path)
{
  switch (obj)
    {
      case PLANT_NONE:
        break;
      case PLANT_LINK:
        assert_int_equal (symlink (fx->victim, path), 0);
        break;
      case PLANT_DANGLING:
        assert_int_equal (symlink (fx->dangling, path), 0);
        break;
      case PLANT_FIFO:
        assert_int_equal (mkfifo (path, 0600), 0);
        break;
      case PLANT_FOREIGN:
        {
          int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
          assert_true (fd >= 0);
          assert_int_equal (fchown (fd, 65534, 65534), 0);
          close (fd);
          break;
        }
      case PLANT_HARDLINK:
        assert_int_equal (link (fx->victim, path), 0);
        break;
    }
}

/* The attacker's half of the race, won every time: right after the writer
 * renamed its live file away, the object takes its name. */
int
renameat2 (int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags)
{
  static int (*real) (int, const char *, int, const char *, unsigned int);
  int r;

  if (real == NULL)
    real = (int (*) (int, const char *, int, const char *, unsigned int))dlsym (RTLD_NEXT, "renameat2");
  r = real (olddirfd, oldpath, newdirfd, newpath, flags);
  if (r == 0 && plant_at_rotation != PLANT_NONE && !planted && strcmp (oldpath, "access.jsonl") == 0)
    {
      int saved = errno;
      planted = TRUE;
      plant (plant_fixture, plant_at_rotation, plant_fixture->path);
      errno = saved;
    }
  return r;
}

static int
setup (void **state)
{
  Fixture *fx = g_new0 (Fixture, 1);

  fx->dir = test_dir_new (test_tmpdir ("fusebox-ipc"));
  fx->run = test_dir_mkdir (fx->dir, "run", 0700);
  fx->path = test_dir_path (fx->dir, "run/access.jsonl");
  fx->victim = test_dir_path (fx->dir, "victim");
  fx->dangling = test_dir_path (fx->dir, "made-through-the-link");
  assert_true (g_file_set_contents (fx->victim, VICTIM_TEXT, -1, NULL));
  assert_int_equal (chmod (fx->victim, 0644), 0);
  plant_at_rotation = PLANT_NONE;
  plant_fixture = fx;
  planted = FALSE;
  g_ptr_array_set_size (warnings, 0);
  *state = fx;
  return 0;
}

static int
teardown (void **state)
{
  Fixture *fx = *state;

  /* forgotten before it is freed: the planting renameat2() reads it */
  plant_fixture = NULL;
  test_dir_free (fx->dir, true);
  g_free (fx);
  return 0;
}

/* The victim holds its own content, and nothing was made through a link. */
static void
assert_untouched (const Fixture *fx, const char *what)
{
  g_autofree char *text = NULL;

  assert_true (g_file_get_contents (fx->victim, &text, NULL, NULL));
  if (strcmp (text, VICTIM_TEXT) != 0)
    fail_msg ("%s: the victim file was written (%zu bytes now)", what, strlen (text));
  if (g_file_test (fx->dangling, G_FILE_TEST_EXISTS))
    fail_msg ("%s: the dangling link's target %s was made", what, fx->dangling);
}

static void
test_refused_at_start (void **state)
{
  Fixture *fx = *state;

  for (Plant p = PLANT_LINK; p <= PLANT_HARDLINK; p++)
    {
      FbAccessLogOptions opts = { .path = fx->path, .run_id = "run-test" };
      g_autoptr (GError) error = NULL;
      FbAccessLog *log;

      plant (fx, p, fx->path);
      log = fb_access_log_new (&opts, NULL, &error);
      if (log != NULL)
        {
          FbAccessEvent e = test_event ("open", "/work/x");
          fb_access_sink_push (fb_access_log_get_sink (log), &e);
          fb_access_log_close (log, NULL);
          fb_access_log_free (log);
          assert_untouched (fx, plants[p].name);
          fail_msg ("%s at the log's name: the log was opened", plants[p].name);
        }
      if (strstr (error->message, fx->path) == NULL || strstr (error->message, plants[p].says) == NULL)
        fail_msg ("%s: the refusal does not say '%s': %s", plants[p].name, plants[p].says, error->message);
      assert_untouched (fx, plants[p].name);
      assert_int_equal (unlink (fx->path), 0);
    }
}

#define RECORDS 40

/* Push RECORDS records from the loop's own thread (written at once),
 * rotating after every few. */
static void
write_records (const Fixture *fx)
{
  FbAccessLogOptions opts = { .path = fx->path, .run_id = "run-test", .rotate_bytes = 1024 };
  g_autoptr (GError) error = NULL;
  FbAccessLog *log = fb_access_log_new (&opts, NULL, &error);

  if (log == NULL)
    fail_msg ("fb_access_log_new: %s", error->message);
  for (guint i = 0; i < RECORDS; i++)
    {
      FbAccessEvent e = test_event ("open", "/work/a-file-with-a-long-enough-name");
      fb_access_sink_push (fb_access_log_get_sink (log), &e);
    }
  if (!fb_access_log_close (log, &error))
    fail_msg ("close: %s", error->message);
  fb_access_log_free (log);
}

/* Every record 1..RECORDS once, in the files of the log (read back by
 * fusebox's reader), nothing missing. */
static void
assert_all_records (const Fixture *fx, const char *what)
{
  FbLogReaderStats stats;
  guint64 n = test_log_read_back (fx->path, what, false, &stats);

  if (n != RECORDS || stats.gaps != 0)
    fail_msg ("%s: %" G_GUINT64_FORMAT " records read back, not %d", what, n, RECORDS);
}

static void
test_refused_at_rotation (void **state)
{
  Fixture *fx = *state;

  for (Plant p = PLANT_LINK; p <= PLANT_HARDLINK; p++)
    {
      gboolean warned = FALSE;

      plant_at_rotation = p;
      planted = FALSE;
      g_ptr_array_set_size (warnings, 0);
      write_records (fx);
      assert_true (planted); /* a rotation happened, the race was played */
      assert_untouched (fx, plants[p].name);
      for (guint i = 0; i < warnings->len; i++)
        if (strstr (warnings->pdata[i], fx->path) != NULL && strstr (warnings->pdata[i], plants[p].says) != NULL)
          warned = TRUE;
      if (!warned)
        fail_msg ("%s put at the name after a rotation: no warning saying '%s'", plants[p].name, plants[p].says);
      /* the attacker's object gone, the log is whole */
      assert_int_equal (unlink (fx->path), 0);
      assert_all_records (fx, plants[p].name);
      /* the next round starts afresh */
      test_rm_rf (fx->run);
      assert_int_equal (g_mkdir (fx->run, 0700), 0);
    }
}

/* The control: without an attacker, rotations make new live files and
 * every record is there. */
static void
test_rotation_unhindered (void **state)
{
  Fixture *fx = *state;
  g_autoptr (GPtrArray) rotated = NULL;

  write_records (fx);
  rotated = fb_log_list_rotated (fx->path, NULL);
  assert_non_null (rotated);
  assert_true (rotated->len >= 3);
  assert_all_records (fx, "no attacker");
  assert_int_equal (warnings->len, 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_refused_at_start, setup, teardown),
    cmocka_unit_test_setup_teardown (test_refused_at_rotation, setup, teardown),
    cmocka_unit_test_setup_teardown (test_rotation_unhindered, setup, teardown),
  };

  test_host_require ("root", "these tests need root (a file of another uid)");
  /* once per process (GLib): every test's warnings are kept, each test
   * starts with none */
  warnings = g_ptr_array_new_with_free_func (g_free);
  g_log_set_writer_func (capture_writer, NULL, NULL);
  return cmocka_run_group_tests (tests, NULL, NULL);
}
