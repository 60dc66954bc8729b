/* fusebox — ids across a user namespace (FbFuseIdMap, fs/fs-fuse.c): what
 * the FUSE adapter tells the view about a caller, and what it tells the
 * kernel about owners, when the sandbox's user namespace maps the daemon's
 * user to other ids (fusebox run --uid/--gid).  End to end, through a real
 * sandbox, this is tests/integration/test-run-reporter.c (files the sandbox
 * creates belong to the caller on the host; the caller's 0644 files are
 * writable for the sandbox's uid 1000). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "fs/fs.h"
#include "tests/lib/test-util.h"

/* The sandbox's uid and gid INSIDE are the daemon's HOST ones; every other
 * id shows as the overflow id. */
static FbFuseIdMap
mapped (unsigned inside, unsigned host)
{
  return (FbFuseIdMap){ .enabled = true,
                        .inside_uid = inside,
                        .host_uid = host,
                        .overflow_uid = 65534,
                        .inside_gid = inside,
                        .host_gid = host,
                        .overflow_gid = 65534 };
}

/* A host file owned by UID:GID shows as SHOWN_UID:SHOWN_GID through MAP;
 * only the owner changes. */
static void
assert_shown_as (const FbFuseIdMap *map, uid_t uid, gid_t gid, uid_t shown_uid, gid_t shown_gid)
{
  struct stat st;

  memset (&st, 0, sizeof st);
  st.st_mode = S_IFREG | 0644;
  st.st_uid = uid;
  st.st_gid = gid;
  fb_fuse_id_map_attr (map, &st);
  assert_int_equal (st.st_uid, shown_uid);
  assert_int_equal (st.st_gid, shown_gid);
  assert_int_equal (st.st_mode, S_IFREG | 0644);
}

static void
test_disabled_is_identity (void **state)
{
  FbFuseIdMap map = { 0 };

  assert_int_equal (fb_fuse_id_map_uid_to_host (&map, 1000), 1000);
  assert_int_equal (fb_fuse_id_map_gid_to_host (&map, 0), 0);
  assert_shown_as (&map, 1000, 100, 1000, 100);
}

/* root runs the sandbox as uid/gid 1000 inside */
static void
test_root_as_1000 (void **state)
{
  FbFuseIdMap map = mapped (1000, 0);

  /* requests: the sandbox's user is the host's root (act_as_caller creates
   * as root, the caller), never host uid 1000 */
  assert_int_equal (fb_fuse_id_map_uid_to_host (&map, 1000), 0);
  assert_int_equal (fb_fuse_id_map_gid_to_host (&map, 1000), 0);
  assert_int_equal (fb_fuse_id_map_uid_to_host (&map, 0), 65534);
  assert_int_equal (fb_fuse_id_map_gid_to_host (&map, 5), 65534);

  /* the caller's files are the sandbox user's */
  assert_shown_as (&map, 0, 0, 1000, 1000);
  /* host user 1000's files are someone else's inside, not the sandbox's */
  assert_shown_as (&map, 1000, 1000, 65534, 65534);
}

/* an unprivileged caller (uid 1000) runs the sandbox as root inside */
static void
test_user_as_root (void **state)
{
  FbFuseIdMap map = mapped (0, 1000);

  assert_int_equal (fb_fuse_id_map_uid_to_host (&map, 0), 1000);
  assert_shown_as (&map, 1000, 1000, 0, 0);
  /* the host's root files must not look like the sandbox root's own */
  assert_shown_as (&map, 0, 0, 65534, 65534);
}

/* `fusebox mount` and a 1:1 map need nothing: off unless asked */
static void
test_default_disabled (void **state)
{
  FbFuseOptions o;
  fb_fuse_options_init (&o);
  assert_false (o.id_map.enabled);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_disabled_is_identity), cmocka_unit_test (test_root_as_1000),
                  cmocka_unit_test (test_user_as_root), cmocka_unit_test (test_default_disabled))
