/* fusebox — startup of a sandbox: `fusebox run -- true` against bubblewrap
 * (the target, docs/performance.md: within 1.5x of `bwrap --unshare-all
 * --die-with-parent --ro-bind / / --dev /dev --proc /proc true`, median of
 * 20).
 *
 *   bench-startup [-n RUNS] [--fusebox PATH] [--bwrap PATH] [--baseline PATH]
 *                 [--baseline-env NAME=VALUE] [--command NAME] [--session]
 *
 * The commands run alternately (A B A B ...), so a load change on a shared
 * machine hits both alike; three warm-up rounds are not counted.  Each run
 * is timed from just before fork to the reaped exit (CLOCK_MONOTONIC): what
 * a caller waiting for the command sees; and its CPU time (user + system of
 * the whole tree, from wait4's rusage: every process of a sandbox is reaped
 * by its parent, so it counts), which a busy machine inflates much less
 * than the wall clock.  The output is the median, min and 90th percentile
 * of each, and the ratios of the medians.  `fusebox run` works in a fresh
 * workspace and a fresh XDG_STATE_HOME (both under $TMPDIR or /var/tmp,
 * removed at the end), with the built-in default policy.
 *
 * The command is `true` as the target writes it, found on a fixed PATH
 * (Debian's default, /usr/bin/true after three misses) so that the caller's
 * PATH does not change the result; --command /bin/true gives a path instead.
 * --baseline PATH adds another fusebox (an older build) to the rotation;
 * --baseline-env NAME=VALUE (repeatable) sets a variable for it alone, so
 * that a switch such as FUSEBOX_NO_FANOTIFY=1 can be measured against the
 * same build (--baseline then names the same binary).
 *
 * --session adds `fusebox run --session bench-startup -- CMD`: the command in
 * a kept view (the target: within 1.2x of bwrap), whose session the first
 * warm-up run starts and `fusebox session stop` ends after the last; its
 * CPU column leaves out the session daemon's serving, which is not a child
 * of the benchmark.  With --baseline, the baseline's in a session too.
 *
 * --floor DAEMON adds what no sandbox whose whole view is a fresh FUSE mount
 * can beat: the same bwrap command over a FUSE mount of / that DAEMON (run
 * as `DAEMON -s -o source=/ MOUNTPOINT`, the interface of libfuse's
 * single-threaded passthrough_ll example, which mounts and then puts itself
 * in the background) serves, made anew for every run.  Two subjects: the
 * daemon started and mounted before the clock starts (the cost of the cold
 * mount alone), and the daemon's start and mount timed with bwrap.  Neither
 * has a policy, a log, a run directory or a supervisor.  Their CPU column
 * leaves out the daemon's serving, which is not a child of the benchmark.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench-exec.h"

static double
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double
percentile (double *v, int n, double p)
{
  int i = (int)(p * (n - 1) + 0.5);
  return v[i];
}

typedef enum
{
  PLAIN,      /* argv, timed */
  FLOOR_COLD, /* daemon started untimed, then argv timed over its mount */
  FLOOR_ALL,  /* daemon start and argv timed together */
} Kind;

typedef struct
{
  const char *label;
  const char **argv;
  Kind kind;
  double *wall, *cpu;
} Subject;

/* One run of a floor subject: the daemon mounts MNT, argv runs over it,
 * MNT is unmounted (which ends the daemon).  Returns as time_one. */
static double
time_floor (const Subject *x, char **daemon_argv, const char *mnt, char **envp, const char *dir, double *ret_cpu)
{
  double start = 0, t, cpu, daemon_cpu = 0;

  if (x->kind == FLOOR_ALL)
    start = now_ms ();
  if (bench_time_exec (daemon_argv, envp, dir, &daemon_cpu) < 0)
    return -1;
  if (x->kind == FLOOR_COLD)
    {
      daemon_cpu = 0;
      start = now_ms ();
    }
  t = bench_time_exec ((char **)x->argv, envp, dir, &cpu);
  if (t >= 0)
    {
      t = now_ms () - start;
      *ret_cpu = cpu + daemon_cpu;
    }
  if (umount2 (mnt, 0) < 0)
    {
      fprintf (stderr, "bench-startup: umount %s: %s\n", mnt, g_strerror (errno));
      return -1;
    }
  return t;
}

static void
report (Subject *x, int runs, const Subject *ref)
{
  qsort (x->wall, runs, sizeof (double), cmp_double);
  qsort (x->cpu, runs, sizeof (double), cmp_double);
  printf ("  %-30s wall median %7.2f ms  min %7.2f  p90 %7.2f   cpu median %6.2f ms", x->label,
          percentile (x->wall, runs, 0.5), x->wall[0], percentile (x->wall, runs, 0.9), percentile (x->cpu, runs, 0.5));
  if (ref && ref != x)
    printf ("   (x%.2f wall, x%.2f cpu)", percentile (x->wall, runs, 0.5) / percentile (ref->wall, runs, 0.5),
            percentile (x->cpu, runs, 0.5) / percentile (ref->cpu, runs, 0.5));
  printf ("\n");
}

int
main (int argc, char **argv)
{
  int runs = 20;
  const char *fusebox = "fusebox";
  const char *bwrap = "/usr/bin/bwrap";
  const char *baseline = NULL;
  const char *command = "true";
  const char *floor_daemon = NULL;
  bool session = false;
  GPtrArray *baseline_env = g_ptr_array_new ();

  for (int i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "-n") == 0 && i + 1 < argc)
        runs = atoi (argv[++i]);
      else if (strcmp (argv[i], "--fusebox") == 0 && i + 1 < argc)
        fusebox = argv[++i];
      else if (strcmp (argv[i], "--bwrap") == 0 && i + 1 < argc)
        bwrap = argv[++i];
      else if (strcmp (argv[i], "--baseline") == 0 && i + 1 < argc)
        baseline = argv[++i];
      else if (strcmp (argv[i], "--baseline-env") == 0 && i + 1 < argc && strchr (argv[i + 1], '=') != NULL)
        g_ptr_array_add (baseline_env, argv[++i]);
      else if (strcmp (argv[i], "--command") == 0 && i + 1 < argc)
        command = argv[++i];
      else if (strcmp (argv[i], "--floor") == 0 && i + 1 < argc)
        floor_daemon = argv[++i];
      else if (strcmp (argv[i], "--session") == 0)
        session = true;
      else
        {
          fprintf (stderr, "usage: bench-startup [-n RUNS] [--fusebox PATH] [--bwrap PATH] [--baseline PATH]\n"
                           "                     [--baseline-env NAME=VALUE] [--command NAME] [--floor DAEMON]\n"
                           "                     [--session]\n");
          return 2;
        }
    }
  if (runs < 1 || access (fusebox, X_OK) < 0 || access (bwrap, X_OK) < 0 || (baseline && access (baseline, X_OK) < 0) ||
      (floor_daemon && access (floor_daemon, X_OK) < 0))
    {
      fprintf (stderr,
               "bench-startup: need RUNS >= 1, an executable fusebox (%s), bwrap (%s; apt-get install "
               "bubblewrap), baseline (%s) and floor daemon (%s; see docs/performance.md)\n",
               fusebox, bwrap, baseline ? baseline : "none", floor_daemon ? floor_daemon : "none");
      return 2;
    }

  const char *base = g_getenv ("TMPDIR") ? g_getenv ("TMPDIR") : "/var/tmp";
  g_autofree char *tmp = g_build_filename (base, "fusebox-bench-XXXXXX", NULL);
  if (!g_mkdtemp (tmp))
    {
      fprintf (stderr, "bench-startup: mkdtemp in %s: %s\n", base, g_strerror (errno));
      return 1;
    }
  g_autofree char *ws = g_build_filename (tmp, "ws", NULL);
  g_autofree char *state = g_build_filename (tmp, "state", NULL);
  g_autofree char *mnt = g_build_filename (tmp, "mnt", NULL);
  g_mkdir (ws, 0755);
  g_mkdir (mnt, 0755);
  char **envp = g_get_environ ();
  envp = g_environ_setenv (envp, "XDG_STATE_HOME", state, TRUE);
  envp = g_environ_setenv (envp, "PATH", DEFAULT_PATH, TRUE);
  char **o_envp = g_strdupv (envp);
  for (guint k = 0; k < baseline_env->len; k++)
    {
      const char *kv = g_ptr_array_index (baseline_env, k);
      g_autofree char *name = g_strndup (kv, strchr (kv, '=') - kv);
      o_envp = g_environ_setenv (o_envp, name, strchr (kv, '=') + 1, TRUE);
    }

  const char *f_argv[] = { fusebox, "run", "--", command, NULL };
  const char *o_argv[] = { baseline, "run", "--", command, NULL };
  const char *s_argv[] = { fusebox, "run", "--session", "bench-startup", "--", command, NULL };
  const char *stop_argv[] = { fusebox, "session", "stop", "bench-startup", NULL };
  const char *os_argv[] = { baseline, "run", "--session", "bench-startup-base", "--", command, NULL };
  const char *ostop_argv[] = { baseline, "session", "stop", "bench-startup-base", NULL };
  const char *b_argv[] = {
    bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", command,
    NULL
  };
  const char *fl_argv[] = {
    bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", mnt, "/", "--dev", "/dev", "--proc", "/proc", command,
    NULL
  };
  const char *d_argv[] = { floor_daemon, "-s", "-o", "source=/", mnt, NULL };
  Subject all[] = {
    { "fusebox run -- CMD", f_argv, PLAIN },
    { "bwrap --unshare-all ... CMD", b_argv, PLAIN },
    { "baseline fusebox run -- CMD", o_argv, PLAIN },
    { "bwrap over a cold FUSE /", fl_argv, FLOOR_COLD },
    { "FUSE daemon start + bwrap", fl_argv, FLOOR_ALL },
    { "fusebox run --session -- CMD", s_argv, PLAIN },
    { "baseline run --session -- CMD", os_argv, PLAIN },
  };
  Subject *subjects[G_N_ELEMENTS (all)];
  int n_subjects = 0;
  int failed = 0;

  subjects[n_subjects++] = &all[0];
  subjects[n_subjects++] = &all[1];
  if (baseline)
    subjects[n_subjects++] = &all[2];
  if (floor_daemon)
    {
      subjects[n_subjects++] = &all[3];
      subjects[n_subjects++] = &all[4];
    }
  if (session)
    subjects[n_subjects++] = &all[5];
  if (session && baseline)
    subjects[n_subjects++] = &all[6];
  for (int j = 0; j < n_subjects; j++)
    {
      subjects[j]->wall = g_new (double, runs);
      subjects[j]->cpu = g_new (double, runs);
    }
  for (int i = -3; i < runs && !failed; i++)
    for (int j = 0; j < n_subjects; j++)
      {
        Subject *x = subjects[j];
        char **e = x == &all[2] || x == &all[6] ? o_envp : envp;
        double cpu;
        double t = x->kind == PLAIN ? bench_time_exec ((char **)x->argv, e, ws, &cpu)
                                    : time_floor (x, (char **)d_argv, mnt, e, ws, &cpu);
        if (t < 0)
          {
            fprintf (stderr, "bench-startup: %s failed; run it by hand to see why\n", x->argv[0]);
            failed = 1;
            break;
          }
        if (i >= 0)
          {
            x->wall[i] = t;
            x->cpu[i] = cpu;
          }
      }

  if (session)
    {
      double cpu;
      bench_time_exec ((char **)stop_argv, envp, ws, &cpu);
      if (baseline)
        bench_time_exec ((char **)ostop_argv, o_envp, ws, &cpu);
    }
  g_autofree char *rm = g_strdup_printf ("rm -rf '%s'", tmp);
  if (system (rm) != 0)
    fprintf (stderr, "bench-startup: could not remove %s\n", tmp);
  if (failed)
    return 1;

  printf ("%d runs each, interleaved, CMD=%s (wall clock fork to reaped exit; cpu = user+sys of the tree)\n", runs,
          command);
  report (&all[1], runs, NULL);
  for (int j = 0; j < n_subjects; j++)
    if (subjects[j] != &all[1])
      report (subjects[j], runs, &all[1]);
  printf ("  target: fusebox within x1.50 of bwrap (wall, median)%s\n",
          session ? "; in a kept view (--session) within x1.20" : "");
  if (floor_daemon || session)
    printf ("  (the FUSE and session rows' cpu leaves out the daemon's serving)\n");
  for (int j = 0; j < n_subjects; j++)
    {
      g_free (subjects[j]->wall);
      g_free (subjects[j]->cpu);
    }
  g_strfreev (envp);
  g_strfreev (o_envp);
  g_ptr_array_unref (baseline_env);
  return 0;
}
