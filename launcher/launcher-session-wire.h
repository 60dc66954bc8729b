/* fusebox — the messages between `run --session` and its session's daemon
 * (launcher-session-wire.c, which describes the protocol), and the shape
 * of a command line the quick client takes (launcher-front.c).
 *
 * C and libc only: `fusebox`, the quick client, includes it without GLib.
 * Both ends are built from the same tree; a session daemon of another
 * build is refused by the size of its messages (fb_session_recv). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define SESSION_NAME_MAX 64

typedef enum
{
  MSG_HELLO = 1,
  MSG_INFO,
  MSG_JOIN,
  MSG_JOINED,
  MSG_REGISTER,
  MSG_GO,
  MSG_ENDED,
  MSG_CLOSED,
  MSG_REFUSED,
  MSG_LOG_FULL,
  MSG_STOP,
  MSG_STOPPING,
  MSG_STARTED,
  MSG_SIGNAL,
  MSG_EXITED,
  MSG_QUICK,
  MSG_NOT_QUICK,
} MsgType;

/* Descriptors a message carries at most (JOIN: the command, its stdin,
 * stdout and stderr, for the ready sandbox, the daemon's proof as the
 * caller opened it, and the caller's own environment and directory;
 * QUICK: the first five). */
#define MSG_FDS_MAX 6

typedef struct
{
  uint32_t type;
  uint32_t uid, gid, level, journal;
  uint32_t running;    /* INFO: commands in the view now */
  uint32_t log_full;   /* CLOSED: the command's log reached its budget */
  uint32_t ready;      /* JOIN: the command comes with it, for the ready sandbox */
  uint32_t quick;      /* JOIN: the caller's command line has the quick client's shape */
  int32_t status;      /* CLOSED after QUICK: the run's exit status */
  uint64_t n1, n2, n3; /* JOIN: rotate, budget; CLOSED: records, denials, records not written; SIGNAL: the
                        * signal; EXITED: the exit status; INFO: the descriptor of the daemon's proof */
  char digest[65];     /* JOIN: the effective policy's SHA-256 */
  char run_id[64];     /* JOIN: the command's run; INFO: the session's; STARTED after QUICK: the command's */
  char text[4096];     /* JOIN: the log's path; INFO: the session's run dir; REGISTER: the --resolve entries, a
                        * line each; REFUSED, CLOSED: a message; EXITED: why the command did not start;
                        * NOT_QUICK: why */
  char more[4096];     /* JOIN: the --resolve entries; JOINED: why not in the ready sandbox; CLOSED after
                        * QUICK: what the client says, a line each */
} Msg;

/* A session's name: 1 to SESSION_NAME_MAX letters, digits, '.', '_' or
 * '-', not starting with '.'. */
static inline bool
fb_session_name_valid (const char *name)
{
  size_t n = strlen (name);

  if (n == 0 || n > SESSION_NAME_MAX || name[0] == '.')
    return false;
  for (const char *p = name; *p != '\0'; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
          *p == '-'))
      return false;
  return true;
}

/* `run --session NAME [--] COMMAND [ARG...]` and nothing else (ARGV from
 * "run"): the one command line the quick client runs itself.  The index
 * of COMMAND, or 0. */
static inline int
fb_session_quick_shape (int argc, char **argv)
{
  int i = 3;

  if (argc < 4 || strcmp (argv[0], "run") != 0 || strcmp (argv[1], "--session") != 0 ||
      !fb_session_name_valid (argv[2]))
    return 0;
  if (strcmp (argv[i], "--") == 0)
    i++;
  else if (argv[i][0] == '-')
    return 0;
  return i < argc ? i : 0;
}
