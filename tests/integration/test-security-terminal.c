/* fusebox — the caller's terminal comes back as it was.
 *
 * `fusebox run` is started on a real pty of its own (its controlling
 * terminal, it the foreground process group, as under a shell), and the
 * command inside turns echo, line editing and Ctrl-C off (TCSETS), sets
 * TIOCEXCL (after which nobody but root may open the terminal), shrinks the
 * window to 1x1 (TIOCSWINSZ), sets the line discipline N_NULL (TIOCSETD:
 * every write then fails), stops the terminal's output (tcflow TCOOFF:
 * every write then blocks) and makes the open file it shares with the
 * caller non-blocking (F_SETFL O_NONBLOCK: the shell's next program reads
 * EAGAIN).  After the run, whether the command exits or is ended by a
 * SIGTERM to fusebox, the terminal has its modes, its size, its discipline
 * and its output back, is not exclusive, and its open file blocks again.  And the command
 * can't push input into the caller's terminal (TIOCSTI): it has no
 * controlling terminal, and the ioctl is filtered.
 *
 * The probe is this program inside the sandbox (`--probe tty [wait]`).
 */
#include <poll.h>
#include <signal.h>

#include "tests/lib/test-run.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <termios.h>

/* ---- inside the sandbox ---- */

static int
probe_main (int argc, char **argv)
{
  struct termios t;
  struct winsize tiny = { .ws_row = 1, .ws_col = 1 };
  char c = 'x';
  int excl = 0;
  int ldisc = 27; /* N_NULL */
  const char *res;

  if (tcgetattr (0, &t) < 0)
    {
      printf ("tcgetattr: %s\n", rfx_errname (errno));
      return 1;
    }
  t.c_lflag &= ~(ECHO | ICANON | ISIG);
  if (tcsetattr (0, TCSANOW, &t) < 0 || ioctl (0, TIOCEXCL) < 0)
    {
      printf ("change: %s\n", rfx_errname (errno));
      return 1;
    }
  /* the change took */
  if (tcgetattr (0, &t) < 0 || (t.c_lflag & (ECHO | ICANON | ISIG)) != 0 || ioctl (0, TIOCGEXCL, &excl) < 0 || !excl)
    {
      printf ("change did not take\n");
      return 1;
    }
  if (ioctl (0, TIOCSWINSZ, &tiny) < 0)
    {
      printf ("TIOCSWINSZ: %s\n", rfx_errname (errno));
      return 1;
    }
  /* the open file it shares with the caller's shell: the shell's next
   * program would read EAGAIN */
  if (fcntl (0, F_SETFL, fcntl (0, F_GETFL) | O_NONBLOCK) < 0 || !(fcntl (0, F_GETFL) & O_NONBLOCK))
    {
      printf ("O_NONBLOCK: %s\n", rfx_errname (errno));
      return 1;
    }
  printf ("CHANGED tiocsti=%s\n", rfx_res (ioctl (0, TIOCSTI, &c)));
  fflush (stdout);
  /* Nothing is written from here on: the terminal may take no more. */
  res = rfx_res (ioctl (0, TIOCSETD, &ldisc));
  tcflow (0, TCOOFF);
  /* last: the test waits for this file before it signals the run */
  g_file_set_contents ("tiocsetd", res, -1, NULL);
  if (argc > 0 && strcmp (argv[0], "wait") == 0)
    pause ();
  return 0;
}

/* ---- the test side ---- */

typedef struct
{
  int master;
  int slave; /* the test's own handle on the same terminal, O_NOCTTY */
  char *slave_path;
  pid_t pid; /* fusebox run */
  GString *out;
} Pty;

static void
pty_open (Pty *p)
{
  memset (p, 0, sizeof *p);
  p->master = posix_openpt (O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (p->master < 0)
    {
      g_autofree char *why = g_strdup_printf ("posix_openpt: %s (no /dev/ptmx?)", g_strerror (errno));
      test_skip_or_fail (why);
    }
  assert_int_equal (grantpt (p->master), 0);
  assert_int_equal (unlockpt (p->master), 0);
  p->slave_path = g_strdup (ptsname (p->master));
  p->slave = open (p->slave_path, O_RDWR | O_NOCTTY | O_CLOEXEC);
  assert_true (p->slave >= 0);
  p->out = g_string_new (NULL);
}

static void
pty_close (Pty *p)
{
  if (p->slave >= 0)
    close (p->slave);
  if (p->master >= 0)
    close (p->master);
  g_free (p->slave_path);
  g_string_free (p->out, TRUE);
}

/* `fusebox run ARGS` as the session leader of the pty, its foreground
 * process group, with the pty on 0, 1 and 2. */
static void
pty_start (RFx *fx, Pty *p, const char *const *args, bool background)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_auto (GStrv) env = rfx_env (fx);

  g_ptr_array_add (argv, (char *)test_bin ());
  g_ptr_array_add (argv, (char *)"run");
  g_ptr_array_add (argv, (char *)"--read");
  g_ptr_array_add (argv, (char *)g_getenv ("FUSEBOX_BUILD_ROOT"));
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (char *)args[i]);
  g_ptr_array_add (argv, NULL);
  rfx_set_repro (fx, (char **)argv->pdata);

  p->pid = fork ();
  assert_true (p->pid >= 0);
  if (p->pid == 0)
    {
      int fd;
      if (setsid () < 0 || chdir (fx->ws) < 0)
        _exit (120);
      /* a session leader opening a terminal without O_NOCTTY makes it its
       * controlling one, and its process group the foreground */
      fd = open (p->slave_path, O_RDWR);
      if (fd < 0 || ioctl (fd, TIOCSCTTY, 0) < 0 || dup2 (fd, 0) < 0 || dup2 (fd, 1) < 0 || dup2 (fd, 2) < 0)
        _exit (121);
      if (fd > 2)
        close (fd);
      if (background)
        {
          /* a shell's background job: a process group of its own, not the
           * terminal's foreground one (this leader's) */
          pid_t job = fork ();
          int status;

          if (job == 0)
            {
              setpgid (0, 0);
              execve (argv->pdata[0], (char **)argv->pdata, env);
              _exit (122);
            }
          if (job < 0 || waitpid (job, &status, 0) != job)
            _exit (123);
          _exit (WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status));
        }
      execve (argv->pdata[0], (char **)argv->pdata, env);
      _exit (122);
    }
  rfx_keep_pid (fx, p->pid);
}

/* Read what the pty says until it holds NEEDLE (or the run is over:
 * NEEDLE NULL), bounded.  Returns whether it was seen. */
static bool
pty_read_until (Pty *p, const char *needle, int cap_ms)
{
  for (int waited = 0; waited <= cap_ms; waited += 20)
    {
      struct pollfd pfd = { .fd = p->master, .events = POLLIN };
      char buf[4096];

      while (poll (&pfd, 1, 0) > 0 && (pfd.revents & POLLIN))
        {
          ssize_t n = read (p->master, buf, sizeof buf);
          if (n <= 0)
            break;
          g_string_append_len (p->out, buf, n);
        }
      if (needle != NULL && strstr (p->out->str, needle) != NULL)
        return true;
      g_usleep (20 * 1000);
    }
  return false;
}

/* Wait for the run while draining the pty (its buffer must not fill). */
static int
pty_wait (RFx *fx, Pty *p)
{
  for (int waited = 0; waited <= 60000; waited += 20)
    {
      int status;
      pid_t w = waitpid (p->pid, &status, WNOHANG);
      if (w == p->pid)
        {
          rfx_forget_pid (fx, p->pid);
          pty_read_until (p, NULL, 0);
          return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
        }
      pty_read_until (p, NULL, 20);
    }
  fail_msg ("fusebox run did not end; it said:\n%s", p->out->str);
  return -1;
}

/* Has PID exec'd fusebox (its descriptors are set up by then)? */
static bool
runs_fusebox (pid_t pid)
{
  g_autofree char *link = g_strdup_printf ("/proc/%d/exe", (int)pid);
  g_autofree char *exe = g_file_read_link (link, NULL);
  g_autofree char *base = exe != NULL ? g_path_get_basename (exe) : NULL;

  return base != NULL && g_str_has_prefix (base, "fusebox");
}

/* A descriptor of the open file that is fd 0 of process PID (pidfd_getfd:
 * the same file, with its status flags, not the terminal opened again). */
static int
grab_stdin (pid_t pid)
{
  int pidfd = (int)syscall (SYS_pidfd_open, pid, 0);
  int fd;

  assert_true (pidfd >= 0);
  fd = (int)syscall (SYS_pidfd_getfd, pidfd, 0, 0);
  if (fd < 0)
    fail_msg ("pidfd_getfd of fusebox run's fd 0: %s", g_strerror (errno));
  close (pidfd);
  return fd;
}

static void
assert_terminal_as_before (Pty *p, const struct termios *before, const struct winsize *size_before, bool modes)
{
  struct termios now;
  struct winsize size;
  int excl = -1;
  int ldisc = -1;
  ssize_t n;

  assert_int_equal (ioctl (p->slave, TIOCGETD, &ldisc), 0);
  if (ldisc != N_TTY)
    fail_msg ("the terminal's line discipline is %d after the run, not N_TTY (0): every write fails", ldisc);
  assert_int_equal (ioctl (p->slave, TIOCGWINSZ, &size), 0);
  if (size.ws_row != size_before->ws_row || size.ws_col != size_before->ws_col)
    fail_msg ("the terminal is %ux%u after the run, %ux%u before", size.ws_col, size.ws_row, size_before->ws_col,
              size_before->ws_row);
  /* a stopped terminal takes no output: a non-blocking write says so */
  assert_int_equal (fcntl (p->slave, F_SETFL, O_NONBLOCK), 0);
  n = write (p->slave, "flows\n", 6);
  if (n != 6)
    fail_msg ("writing to the terminal after the run: %s (its output is still stopped: TCOOFF)",
              n < 0 ? g_strerror (errno) : "short write");
  if (!pty_read_until (p, "flows", 5000))
    fail_msg ("what was written to the terminal after the run did not come out");
  assert_int_equal (tcgetattr (p->slave, &now), 0);
  if (modes && (now.c_lflag & (ECHO | ICANON | ISIG)) != (before->c_lflag & (ECHO | ICANON | ISIG)))
    fail_msg ("the terminal's local modes are 0%o after the run, 0%o before (ECHO 0%o, ICANON 0%o, ISIG 0%o); the "
              "run said:\n%s",
              now.c_lflag, before->c_lflag, ECHO, ICANON, ISIG, p->out->str);
  assert_int_equal (ioctl (p->slave, TIOCGEXCL, &excl), 0);
  if (excl != 0)
    fail_msg ("the terminal is still exclusive (TIOCEXCL) after the run");
}

/* Is fd 0 of PID the terminal at PATH yet? */
static bool
stdin_is (pid_t pid, const char *path)
{
  g_autofree char *link = g_strdup_printf ("/proc/%d/fd/0", (int)pid);
  g_autofree char *target = g_file_read_link (link, NULL);

  return g_strcmp0 (target, path) == 0;
}

/* BACKGROUND: fusebox run is a background job of the pty's session (a
 * process group of its own): the command, which has no controlling
 * terminal, changes the terminal all the same; its modes stay so (the
 * foreground's to keep, written down), the rest comes back. */
static void
run_on_pty (void **state, bool by_signal, bool background)
{
  RFX_BEGIN (state);
  g_autofree char *self = test_self ();
  const char *args[] = { "--", self, "--probe", by_signal ? "wait" : "exit", NULL };
  struct termios before;
  struct winsize size = { .ws_row = 24, .ws_col = 80 };
  g_autofree char *tiocsetd = NULL;
  g_autofree char *tiocsetd_path = NULL;
  Pty p;
  int status, shared;

  pty_open (&p);
  /* a fresh pty echoes, edits lines and turns Ctrl-C into SIGINT; its
   * window is the size the terminal emulator gives it */
  assert_int_equal (tcgetattr (p.slave, &before), 0);
  assert_true ((before.c_lflag & (ECHO | ICANON | ISIG)) == (ECHO | ICANON | ISIG));
  assert_int_equal (ioctl (p.master, TIOCSWINSZ, &size), 0);

  pty_start (fx, &p, args, background);
  /* the open file the caller's shell shares, once fusebox runs (its
   * command starts long after), or once the background job's shell has
   * it (the job shares it) */
  if (!TEST_WAIT_FOR (background ? stdin_is (p.pid, p.slave_path) : runs_fusebox (p.pid), 60000))
    fail_msg ("fusebox run did not start");
  shared = grab_stdin (p.pid);
  assert_false (fcntl (shared, F_GETFL) & O_NONBLOCK);
  if (!pty_read_until (&p, "CHANGED", 60000))
    fail_msg ("the command did not change the terminal; the run said:\n%s", p.out->str);
  /* the command got the terminal's modes changed, and could not type
   * into it */
  assert_non_null (strstr (p.out->str, "CHANGED tiocsti=EPERM"));
  tiocsetd_path = g_build_filename (fx->ws, "tiocsetd", NULL);
  if (by_signal)
    {
      /* the command's last changes (TIOCSETD and TCOOFF) come after
       * CHANGED, and then the file with TIOCSETD's answer: the signal
       * waits for it */
      if (!TEST_WAIT_FOR (g_file_test (tiocsetd_path, G_FILE_TEST_EXISTS), 60000))
        fail_msg ("the command did not try TIOCSETD; the run said:\n%s", p.out->str);
      assert_int_equal (kill (p.pid, SIGTERM), 0);
      status = pty_wait (fx, &p);
      assert_int_equal (status, 128 + SIGTERM);
    }
  else
    {
      status = pty_wait (fx, &p);
      if (status != 0)
        fail_msg ("fusebox run exited %d:\n%s", status, p.out->str);
    }
  assert_terminal_as_before (&p, &before, &size, !background);
  if (fcntl (shared, F_GETFL) & O_NONBLOCK)
    fail_msg ("the terminal's open file is still O_NONBLOCK after the run: the caller's next read fails with EAGAIN");
  close (shared);
  /* the discipline could not be changed at all */
  tiocsetd = test_read_file (tiocsetd_path);
  if (g_strcmp0 (tiocsetd, "EPERM") != 0)
    fail_msg ("TIOCSETD N_NULL inside answered %s, not EPERM", tiocsetd != NULL ? tiocsetd : "nothing");
  pty_close (&p);
  RFX_PASS ();
}

static void
test_terminal_after_exit (void **state)
{
  run_on_pty (state, false, false);
}

static void
test_terminal_after_signal (void **state)
{
  run_on_pty (state, true, false);
}

static void
test_terminal_after_background_run (void **state)
{
  run_on_pty (state, false, true);
}

RFX_DEFINE_MAIN (probe_main, NULL, RFX_TEST (test_terminal_after_exit), RFX_TEST (test_terminal_after_signal),
                 RFX_TEST (test_terminal_after_background_run))
