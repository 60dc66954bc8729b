/* fusebox — reading an access log back in a test: a whole run directory's
 * log with its rotated files, or one text searched for a record. */
#pragma once

#include "tests/lib/test-util.h"

typedef struct
{
  GPtrArray *records; /* JsonObject*, in seq order */
  guint files;        /* files read */
  guint64 bytes;      /* their size */
} TestLog;

/* Every record of the log in RUN_DIR (access.jsonl), the rotated files
 * (access.SEQ.jsonl: their names sort by seq) first; fails the test unless
 * seq runs gap-free from 1 and each line is a JSON object. */
void test_log_read (const char *run_dir, TestLog *ret);

/* The live log of run directory RUN_DIR (access.jsonl) as text; fails the
 * test when it can't be read. */
char *test_log_text (const char *run_dir);
void test_log_clear (TestLog *log);

/* A cmocka fixture: *state a TestLogFile, a temp directory and the path of
 * a log in it (not made). */
typedef struct
{
  char *dir;
  char *path; /* DIR/access.jsonl */
} TestLogFile;

/* The same in a fixture of the test's own: make the directory; remove it
 * and everything in it. */
void test_log_file_init (TestLogFile *f);
void test_log_file_clear (TestLogFile *f);

int test_log_file_setup (void **state);
int test_log_file_teardown (void **state);
#define TEST_LOG_FILE_TEST(f) cmocka_unit_test_setup_teardown (f, test_log_file_setup, test_log_file_teardown)

/* Is there a line in LOG (JSONL text) that contains every given fragment
 * (NULL-terminated)? */
bool test_log_has (const char *log, ...) G_GNUC_NULL_TERMINATED;
