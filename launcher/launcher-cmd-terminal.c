/* fusebox run — the caller's terminal comes back as it was.
 *
 * The command inherits fds 0-2, often the caller's terminal.  setsid()
 * (launcher-pid1.c) takes the controlling terminal away, which stops
 * TIOCSTI and job-control signals, but the terminal is still a file the
 * command holds: it may turn echo off, disable Ctrl-C (TCSETS) and set
 * TIOCEXCL, after which nobody but root can open the terminal again, set
 * the window to 1x1 (TIOCSWINSZ) and stop its output (tcflow TCOOFF: every
 * later write blocks), and all of that would outlive the run.  So the
 * supervisor saves, before the command starts, the modes (tcgetattr), the
 * exclusive flag (TIOCGEXCL) and the window size (TIOCGWINSZ) of each of
 * 0, 1 and 2 that is a terminal, and after the sandbox is gone, on every way
 * out of the run (a failure, a signal forwarded to the command, the
 * command's own end), restores them and restarts output (TCOON undoes only
 * a TCOOFF: a person's Ctrl-S stays).  The line discipline (TIOCSETD: N_NULL
 * fails every write) is not saved: the seccomp filter refuses to change it.
 * Nor is it only a terminal's: each of 0, 1 and 2, whatever it is, is an
 * open file the caller shares, whose status flags (O_NONBLOCK, O_APPEND:
 * F_SETFL) the command may change; a shell whose terminal was left
 * O_NONBLOCK sees its next program's reads fail with EAGAIN.  They are
 * saved (F_GETFL) and put back when they differ, always (no one's
 * job-control state is in them).
 *
 * The alternative, a pty of the command's own relayed by the supervisor,
 * would also contain what the command does to the terminal while it runs,
 * but costs a relay for every byte, window-size forwarding and a changed
 * answer to isatty() for programs that check what they are connected to;
 * what the command can leave behind is the terminal's state above, which
 * fits in a few words.  The price: a window resized during the run gets
 * its old size back (the kernel can't tell who set the new one) until the
 * next resize.
 *
 * Restoring is done with SIGTTOU blocked: a `fusebox run &` in the
 * background would otherwise be stopped by its own tcsetattr.  The modes
 * are set back only when they differ from what was saved and when fusebox
 * is the terminal's foreground process group (or the terminal is not its
 * controlling one): a shell that took the terminal back meanwhile (a
 * background run ending while the shell reads a line) keeps its own modes,
 * and what a background run's command did to them stays (it has no
 * controlling terminal, so no SIGTTOU stopped it; `stty sane` mends it).
 * The rest is put back whoever is in the foreground: the exclusive flag
 * and the open files' flags (no one's modes depend on them), the output's
 * flow (a terminal stopped with TCOOFF took even the shell's writes) and
 * the window size (set by no foreground program but by the terminal). */
#include "launcher/launcher-private.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

struct FbCmdTerminal
{
  struct
  {
    bool saved;
    struct termios modes;
    bool excl_known; /* TIOCGEXCL answered (Linux 3.8) */
    int excl;
    bool size_known; /* TIOCGWINSZ answered */
    struct winsize size;
    int flags; /* F_GETFL's, -1 if not open */
  } fd[3];
};

FbCmdTerminal *
fb_cmd_terminal_save (void)
{
  FbCmdTerminal *t = g_new0 (FbCmdTerminal, 1);

  for (int fd = 0; fd < 3; fd++)
    {
      t->fd[fd].flags = fcntl (fd, F_GETFL);
      if (!isatty (fd) || tcgetattr (fd, &t->fd[fd].modes) < 0)
        continue;
      t->fd[fd].saved = true;
      t->fd[fd].excl_known = ioctl (fd, TIOCGEXCL, &t->fd[fd].excl) == 0;
      t->fd[fd].size_known = ioctl (fd, TIOCGWINSZ, &t->fd[fd].size) == 0;
    }
  return t;
}

static bool
same_modes (const struct termios *a, const struct termios *b)
{
  return a->c_iflag == b->c_iflag && a->c_oflag == b->c_oflag && a->c_cflag == b->c_cflag && a->c_lflag == b->c_lflag &&
         memcmp (a->c_cc, b->c_cc, sizeof a->c_cc) == 0 && cfgetispeed (a) == cfgetispeed (b) &&
         cfgetospeed (a) == cfgetospeed (b);
}

void
fb_cmd_terminal_restore (FbCmdTerminal *t)
{
  sigset_t ttou, old;

  if (t == NULL)
    return;
  sigemptyset (&ttou);
  sigaddset (&ttou, SIGTTOU);
  sigprocmask (SIG_BLOCK, &ttou, &old);
  for (int fd = 0; fd < 3; fd++)
    {
      struct termios now;
      struct winsize size;
      int excl = 0;
      pid_t fg;
      int flags;

      if (t->fd[fd].flags >= 0 && (flags = fcntl (fd, F_GETFL)) >= 0 && flags != t->fd[fd].flags)
        fcntl (fd, F_SETFL, t->fd[fd].flags);
      if (!t->fd[fd].saved)
        continue;
      if (t->fd[fd].excl_known && ioctl (fd, TIOCGEXCL, &excl) == 0 && excl != t->fd[fd].excl)
        ioctl (fd, t->fd[fd].excl ? TIOCEXCL : TIOCNXCL);
      /* Output stopped by a TCOOFF (only one: a person's Ctrl-S stays)
       * restarts whoever is in the foreground: a stopped terminal takes no
       * one's writes, the shell's included. */
      tcflow (fd, TCOON);
      /* A window size only the terminal emulator (or a command) sets: put
       * back whoever is in the foreground, at the price above. */
      if (t->fd[fd].size_known && ioctl (fd, TIOCGWINSZ, &size) == 0 &&
          (size.ws_row != t->fd[fd].size.ws_row || size.ws_col != t->fd[fd].size.ws_col ||
           size.ws_xpixel != t->fd[fd].size.ws_xpixel || size.ws_ypixel != t->fd[fd].size.ws_ypixel))
        ioctl (fd, TIOCSWINSZ, &t->fd[fd].size);
      /* -1: not our controlling terminal, no job control to respect */
      fg = tcgetpgrp (fd);
      if (fg >= 0 && fg != getpgrp ())
        continue;
      if (tcgetattr (fd, &now) == 0 && !same_modes (&now, &t->fd[fd].modes))
        tcsetattr (fd, TCSANOW, &t->fd[fd].modes);
    }
  sigprocmask (SIG_SETMASK, &old, NULL);
}

void
fb_cmd_terminal_free (FbCmdTerminal *t)
{
  g_free (t);
}
