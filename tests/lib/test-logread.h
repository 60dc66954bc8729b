/* fusebox — an access log read back the way `fusebox log` reads it, through
 * fusebox's own reader (FbLogReader), for the tests of what a writer leaves
 * on disk.  Linked apart from the rest of tests/lib (testlib_logread_dep):
 * it needs the log's library. */
#pragma once

#include <stdbool.h>

#include "ipc/ipc.h"

/* Every record of the log at PATH (the live file; its rotated files
 * first): each record's seq one above the one before, from 1.  Any status
 * but a record fails the test, WHAT naming the log in the message, except
 * a truncated line (a writer killed mid-line) where ALLOW_TRUNCATED.  The
 * reader's counts in *RET_STATS; returns how many records. */
guint64 test_log_read_back (const char *path, const char *what, bool allow_truncated, FbLogReaderStats *ret_stats);
