/* fusebox — the systemd journal's native protocol, read the way journald
 * reads it, for the tests of the access log's journal output.
 *
 * A test binds a SOCK_DGRAM unix socket where fusebox is told the journal
 * is, and reads what arrives: test_journal_recv() takes one datagram (or
 * the sealed memfd an entry too large for a datagram comes in) and
 * test_journal_parse() splits it into fields, strictly: each field is
 * NAME=VALUE\n, or NAME\n, a little-endian 64-bit length, the bytes and
 * \n; anything else, or a name journald would refuse, fails the parse.
 * An entry is a GPtrArray of TestJournalField, in the datagram's order (a
 * field given twice is there twice: a forged field would show). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <glib.h>
#include <json-glib/json-glib.h>

typedef struct
{
  char *name;
  GBytes *value;
} TestJournalField;

void test_journal_field_free (TestJournalField *f);

/* journald's rule for a field a client may send. */
bool test_journal_name_valid (const char *name, size_t len);

/* The fields of DATA, or NULL (and *RET_WHY) when it is not well formed. */
GPtrArray *test_journal_parse (const char *data, size_t len, char **ret_why);

/* How many times NAME is in ENTRY, and the value of the first, as a string
 * (NULL when absent; a copy, NUL-terminated). */
guint test_journal_count (GPtrArray *entry, const char *name);

char *test_journal_get (GPtrArray *entry, const char *name);

/* The exact bytes of NAME (NULL when absent). */
GBytes *test_journal_get_bytes (GPtrArray *entry, const char *name);

/* A SOCK_DGRAM socket bound at PATH (removed first), non-blocking; -errno
 * on failure. */
int test_journal_bind (const char *path);

/* One entry from FD, waiting at most TIMEOUT_MS (a bound on a wait, not a
 * timed assertion): the datagram's bytes, or the content of the memfd it
 * passed (which must be sealed against writing, growing and shrinking, as
 * journald requires).  NULL when nothing came, or *RET_WHY says what was
 * wrong. */
GBytes *test_journal_recv (int fd, int timeout_ms, char **ret_why);

/* The next entry from FD (test_journal_recv()), parsed; NULL when nothing
 * came.  Fails the test when the socket can't be read or the entry is not
 * well formed. */
GPtrArray *test_journal_next (int fd, int timeout_ms);

/* The entries of the journal socket FD while PID (a child) runs, and
 * after it ended until the socket is empty; its status (128+N for a
 * signal) in *RET_STATUS.  Reading while it runs: a socket's queue holds
 * few datagrams (net.unix.max_dgram_qlen), and a journal that reads
 * nothing is another test.  Fails (returns NULL and *RET_WHY) on a
 * malformed entry. */
GPtrArray *test_journal_collect (int fd, pid_t pid, int *ret_status, char **ret_why);

/* The whole check of one entry against its record (a line of the access
 * log, parsed): each member as FUSEBOX_<NAME> (a nested object's as
 * FUSEBOX_<NAME>_<MEMBER>), exactly once, with the member's value (a
 * string's exact bytes, a number as written), null members left out,
 * nothing else of fusebox's, MESSAGE once on one line, PRIORITY by the decision,
 * SYSLOG_IDENTIFIER=fusebox.  NULL, or what differs. */
char *test_journal_check_record (GPtrArray *entry, JsonObject *o);

/* Every one of RECORDS (the access log's lines, parsed) arrived as the
 * entry at its index in ENTRIES, one each, whole (each entry as
 * test_journal_check_record() checks it); fails the test otherwise, WHAT
 * saying where the entries came from. */
void test_journal_assert_records (GPtrArray *entries, GPtrArray *records, const char *what);
