/* fusebox — the tree and the policy of the access table: every operation
 * against every access (write, read, deny, hide), run through a real mount
 * and through the view core without FUSE, on the same objects under the
 * same rules.
 *
 * Each access A gets T/A/{f,s,l,new} decided as A (f a file with the xattr
 * user.t, s a directory, l a link to f, new absent), in a writable T;
 * T/zone is plain writable space for the other end of renames and links.
 * The policy names T @H@/t. */
#pragma once

#include "tests/lib/test-util.h"

#define TEST_ACCESS_N 4

/* "write", "read", "deny", "hide": the order of a row's expected results. */
extern const char *const test_access_names[TEST_ACCESS_N];

/* The policy: / readable, @H@/t writable, and a rule per access and object
 * whose why is "ACCESS OBJECT" ("deny file", "hide new");
 * PROTECTED_NAMES the members of its "protected_names" object. */
char *test_access_table_policy (const char *protected_names);

/* The tree at host path T, anything there before removed. */
void test_access_table_make (const char *t);
