/* fusebox — the access table: every operation against every access
 * (write, read, deny, hide), run through a real mount and through the view
 * core without FUSE, on the same objects under the same rules, with the
 * same expected results; here its tree, policy, operations and rows.
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

/* The protected names both runs of the table use: hidden, and none of them
 * in the tree, so that they change no row. */
#define TEST_ACCESS_PROTECTED_NAMES "\".git\": \"hide\", \".agents\": \"hide\", \".codex\": \"hide\""

/* The tree at host path T, anything there before removed. */
void test_access_table_make (const char *t);

/* The operations of the table, each on the object its row names: as system
 * calls through a mount, as the view's entry points without FUSE.
 * ACCESS_W is the view's alone: through a mount the kernel answers
 * access(2) itself (default_permissions). */
typedef enum
{
  TEST_ACCESS_OP_GETATTR,
  TEST_ACCESS_OP_OPEN_READ,
  TEST_ACCESS_OP_OPEN_WRITE,
  TEST_ACCESS_OP_CHMOD,
  TEST_ACCESS_OP_TRUNCATE,
  TEST_ACCESS_OP_UTIMENS,
  TEST_ACCESS_OP_ACCESS_W,
  TEST_ACCESS_OP_SETXATTR,
  TEST_ACCESS_OP_GETXATTR,
  TEST_ACCESS_OP_REMOVEXATTR,
  TEST_ACCESS_OP_UNLINK,
  TEST_ACCESS_OP_RENAME_AWAY,
  TEST_ACCESS_OP_RENAME_ONTO,
  TEST_ACCESS_OP_EXCHANGE,
  TEST_ACCESS_OP_LINK_AWAY,
  TEST_ACCESS_OP_LINK_ONTO,
  TEST_ACCESS_OP_CREATE,
  TEST_ACCESS_OP_MKDIR,
  TEST_ACCESS_OP_SYMLINK,
  TEST_ACCESS_OP_MKFIFO,
  TEST_ACCESS_OP_READDIR,
  TEST_ACCESS_OP_RMDIR,
  TEST_ACCESS_OP_MKDIR_IN,
  TEST_ACCESS_OP_READLINK,
} TestAccessOp;

/* A row of the table: OP under the NAME failures print, on OBJ ("file",
 * "dir", "link", "new": a denial's why is "ACCESS OBJ"), MUTATION if it
 * changes the host when it succeeds, and its result per access in
 * test_access_names' order: 0 or the errno (the view returns it negated). */
typedef struct
{
  TestAccessOp op;
  const char *name;
  const char *obj;
  bool mutation;
  int expect[TEST_ACCESS_N];
} TestAccessRow;

/* What each operation gets under each access: one table for the view and
 * for the mount, so that the two cannot drift apart; the mount's run keeps
 * beside it the cases the kernel answers before asking the view. */
static G_GNUC_UNUSED const TestAccessRow test_access_rows[] = {
  { TEST_ACCESS_OP_GETATTR, "getattr f", "file", false, { 0, 0, 0, ENOENT } },
  { TEST_ACCESS_OP_OPEN_READ, "open O_RDONLY f", "file", false, { 0, 0, EACCES, ENOENT } },
  { TEST_ACCESS_OP_OPEN_WRITE, "open O_WRONLY|O_TRUNC f", "file", true, { 0, EROFS, EACCES, ENOENT } },
  { TEST_ACCESS_OP_CHMOD, "chmod f", "file", true, { 0, EROFS, EACCES, ENOENT } },
  { TEST_ACCESS_OP_TRUNCATE, "truncate f", "file", true, { 0, EROFS, EACCES, ENOENT } },
  { TEST_ACCESS_OP_UTIMENS, "utimens f", "file", true, { 0, EROFS, EACCES, ENOENT } },
  { TEST_ACCESS_OP_ACCESS_W, "access W_OK f", "file", false, { 0, EROFS, EACCES, ENOENT } },
  { TEST_ACCESS_OP_SETXATTR, "setxattr f user.n", "file", true, { 0, EROFS, EACCES, ENOENT } },
  { TEST_ACCESS_OP_GETXATTR, "getxattr f user.t", "file", false, { 0, 0, EACCES, ENOENT } },
  { TEST_ACCESS_OP_REMOVEXATTR, "removexattr f user.t", "file", true, { 0, EROFS, EACCES, ENOENT } },
  { TEST_ACCESS_OP_UNLINK, "unlink f", "file", true, { 0, EROFS, EACCES, ENOENT } },
  { TEST_ACCESS_OP_RENAME_AWAY, "rename f -> /t/zone/moved", "file", true, { 0, EROFS, EACCES, ENOENT } },
  { TEST_ACCESS_OP_RENAME_ONTO, "rename /t/zone/x -> new", "new", true, { 0, EROFS, EACCES, EACCES } },
  { TEST_ACCESS_OP_EXCHANGE, "rename /t/zone/x <-> f (EXCHANGE)", "file", true, { 0, EROFS, EACCES, EACCES } },
  { TEST_ACCESS_OP_LINK_AWAY, "link f -> /t/zone/lnk", "file", true, { 0, EROFS, EACCES, ENOENT } },
  { TEST_ACCESS_OP_LINK_ONTO, "link /t/zone/x -> new", "new", true, { 0, EROFS, EACCES, EACCES } },
  { TEST_ACCESS_OP_CREATE, "create new", "new", true, { 0, EROFS, EACCES, EACCES } },
  { TEST_ACCESS_OP_MKDIR, "mkdir new", "new", true, { 0, EROFS, EACCES, EACCES } },
  { TEST_ACCESS_OP_SYMLINK, "symlink new", "new", true, { 0, EROFS, EACCES, EACCES } },
  { TEST_ACCESS_OP_MKFIFO, "mknod S_IFIFO new", "new", true, { 0, EROFS, EACCES, EACCES } },
  { TEST_ACCESS_OP_READDIR, "readdir s", "dir", false, { 0, 0, EACCES, ENOENT } },
  { TEST_ACCESS_OP_RMDIR, "rmdir s", "dir", true, { 0, EROFS, EACCES, ENOENT } },
  { TEST_ACCESS_OP_MKDIR_IN, "mkdir s/sub", "dir", true, { 0, EROFS, EACCES, ENOENT } },
  { TEST_ACCESS_OP_READLINK, "readlink l", "link", false, { 0, 0, EACCES, ENOENT } },
};
