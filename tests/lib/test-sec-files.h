/* fusebox — the files a security test puts on the host before the sandbox
 * has its go at them, and finds there afterwards as they were.
 *
 * A table of them stands beside the test that judges them, so that a new
 * stand-in is one row; making them proves each one readable outside first
 * (a denial proves something only of what exists and reads on the host). */
#pragma once

#include "tests/lib/test-util.h"

typedef struct
{
  const char *rel;      /* below the directory the table is made in */
  const char *contents; /* written, and looked for afterwards */
} TestSecFile;

/* Write the N FILES below DIR (parents made, mode 0644), each proven
 * readable on the host (test_assert_host_readable()). */
void test_sec_files_make (const char *dir, const TestSecFile *files, size_t n);

/* The first of the N FILES below DIR that is gone or no longer holds its
 * contents, or NULL when every one is as it was made.  When one is found:
 * its path in *RET_PATH and what it holds now in *RET_NOW (NULL: gone). */
const TestSecFile *test_sec_files_changed (const char *dir, const TestSecFile *files, size_t n, char **ret_path,
                                           char **ret_now);
