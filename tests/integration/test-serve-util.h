/* fusebox — the `fusebox serve` server and client of the tests, now in
 * tests/lib/test-serve.h; this header keeps the names the serve tests
 * have used for them. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/test-serve.h"

#define WAIT_LIMIT_S TEST_WAIT_LIMIT_S
#define NoteMatch TestNoteMatch
#define match_note test_match_note
#define match_id test_match_id
#define die_with_parent test_die_with_parent
#define answer_result test_answer_result
#define answer_error_code test_answer_error_code
#define answer_error_message test_answer_error_message
