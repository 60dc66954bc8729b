/* fusebox run --session — what the command's side
 * (launcher-cmd-session.c) and the session's daemon
 * (launcher-session-daemon.c) share: the message layer
 * (launcher-session-wire.c) and the daemon's start.  Private to the
 * launcher; the messages themselves are launcher-session-wire.h's. */
#pragma once

#include "launcher/launcher-cmd-run.h"
#include "launcher/launcher-session-wire.h"
#include "policy/policy.h"

#include <glib.h>
#include <stdbool.h>

G_BEGIN_DECLS

/* launcher-session-wire.c */

/* Closes each of a message's descriptors FDS (-1 where none came). */
void fb_session_close_fds (int fds[MSG_FDS_MAX]);
/* M, with the N_FDS descriptors of FDS: 0 or -errno. */
int fb_session_send (int fd, const Msg *m, const int *fds, int n_fds);
/* A message of TYPE alone: 0 or -errno. */
int fb_session_send_type (int fd, MsgType type);
/* One message into M, its descriptors into FDS (else -1): 1, 0 at EOF,
 * -EPROTO for another build's, -errno. */
int fb_session_recv (int fd, Msg *m, int fds[MSG_FDS_MAX]);
/* fb_session_recv after waiting up to 30 s for the daemon's answer:
 * -ETIMEDOUT without one. */
int fb_session_await (int fd, Msg *m, int fds[MSG_FDS_MAX]);
/* Session NAME's socket: sessions/NAME.sock in fusebox's state directory. */
char *fb_session_socket_path (const char *name);
/* Whether the way to the sessions' directory is ours alone; false after
 * COMMAND's message. */
bool fb_session_dir_ok (const char *command);
/* A connection to session NAME's daemon, one of our uid, or -errno
 * (-EPERM after a message: another user's process answers). */
int fb_session_connect (const char *name);
/* The SHA-256 of POLICY's JSON, which a JOIN's policy must match. */
void fb_session_policy_digest (FbPolicy *policy, char out[65]);

/* launcher-session-daemon.c */

/* Starts session NAME's daemon with O's policy and options, unless
 * another first command did meanwhile: 0, or -1 after a message. */
int fb_session_daemon_start (const RunOptions *o, const char *name);

G_END_DECLS
