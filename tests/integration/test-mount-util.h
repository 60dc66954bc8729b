/* fusebox — the `fusebox mount` test fixture, now in
 * tests/lib/test-mount.h; this header keeps the names the mount tests have
 * used for it. */
#pragma once

#include <ftw.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/xattr.h>

#include "tests/lib/test-log.h"
#include "tests/lib/test-mount.h"

#define fusebox_bin test_bin
#define require_fuse mfx_require
#define mfx_rm_rf test_rm_rf
#define mfx_filter_tests test_filter_tests
#define fx_h mfx_h
#define fx_m mfx_m
#define host_write mfx_write
#define host_mkdir mfx_mkdir
#define assert_host_readable mfx_assert_host_readable
#define host_sum mfx_sum
#define cmp_names test_cmp_names
#define is_mounted test_is_mounted
#define pid_alive test_pid_alive
#define run_cmd test_run_cmd
#define log_has test_log_has
/* STEPS of 10 ms */
#define WAIT_FOR(cond, steps) TEST_WAIT_FOR (cond, (steps)*10)
