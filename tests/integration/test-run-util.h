/* fusebox — the `fusebox run` test fixture, now in tests/lib/test-run.h;
 * this header keeps the names the run tests have used for it. */
#pragma once

#include <ftw.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include "tests/lib/test-run.h"

#define rfx_bin test_bin
#define rfx_skip_or_fail test_skip_or_fail
#define rfx_self test_self
#define rfx_fixture test_fixture
#define rfx_rm_rf test_rm_rf
#define rfx_filter_tests test_filter_tests
#define rfx_read_line test_read_line
#define rfx_parse_object test_parse_object
#define rfx_str test_json_str
#define rfx_write test_write
#define rfx_assert_host_readable test_assert_host_readable
#define rfx_file test_read_file
#define rfx_ns_has_processes test_ns_has_processes
#define RFX_WAIT_FOR TEST_WAIT_FOR
