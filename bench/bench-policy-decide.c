/* fusebox — how long a policy decision takes.
 *
 * The view asks the policy on every lookup and every operation, so a
 * decision must cost well under a microsecond.  This builds a policy of 200
 * rules (190 literal paths of mixed depth, 10 globs of every kind the index
 * distinguishes: by name, by extension, anchored, floating, with "**") and
 * times, on 1000 paths of depth 10:
 *  - fb_policy_decide on the whole path;
 *  - a chain of fb_policy_decide_child from "/" down to the path (what the
 *    FUSE view does on a cold lookup), reported per chain and per step.
 * Each path is timed over a batch of repetitions (clock_gettime costs more
 * than a decision), giving one mean per path; the report is the median and
 * the 90th percentile over the paths.  Time is this thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), so that a busy machine preempting the benchmark
 * does not count as decision time; the wall-clock median is printed too.
 *
 *   build-policy/bench/bench-policy-decide [REPETITIONS]
 */
#include "bench/bench-util.h"
#include "policy/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_PATHS 1000
#define DEPTH 10

static const char *const top[] = { "usr", "etc", "home", "srv", "var", "opt", "data", "ws", "tmp", "lib" };
static const char *const mid[] = { "share", "local", "src", "include", "app",          "proj", "lib",  "cache",
                                   "build", "docs",  "u",   "x",       "node_modules", "pkg",  "test", "bin" };
static const char *const leaf[] = { "main.c",     "README", "a.pem",  "id_rsa",   "x.tar.gz",
                                    "Secret.txt", "lib.o",  "config", "index.js", "data.json" };

static void
report (const char *what, double *samples, guint n, double divide)
{
  bench_sort (samples, n);
  printf ("%-34s median %7.1f ns   p90 %7.1f ns\n", what, samples[n / 2] / divide, samples[n * 9 / 10] / divide);
}

static char *
policy_text (GRand *rand)
{
  g_autoptr (GString) json = g_string_new ("{ \"version\": 1, \"rules\": [\n");
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  static const char *const accesses[] = { "read", "write", "deny", "hide" };
  static const char *const globs[] = {
    "*.pem",    "id_rsa",           "/etc/ssh/*_key", "**/node_modules", "/srv/**/cache",
    "*.tar.gz", "/ws/**/build/*.o", "/data/**",       "[Ss]ecret*",      "/home/*/.ssh/**",
  };
  guint literals = 0;

  g_string_append (json, "  { \"path\": \"/\", \"access\": \"read\", \"why\": \"root\" }");
  literals++;
  while (literals < 190)
    {
      guint depth = (guint)g_rand_int_range (rand, 1, 8);
      g_autoptr (GString) path = g_string_new ("/");

      g_string_append (path, top[g_rand_int_range (rand, 0, G_N_ELEMENTS (top))]);
      for (guint k = 1; k < depth; k++)
        g_string_append_printf (path, "/%s", mid[g_rand_int_range (rand, 0, G_N_ELEMENTS (mid))]);
      if (g_hash_table_contains (seen, path->str))
        continue;
      g_hash_table_add (seen, g_strdup (path->str));
      g_string_append_printf (json, ",\n  { \"path\": \"%s\", \"access\": \"%s\", \"why\": \"rule %u\" }", path->str,
                              accesses[g_rand_int_range (rand, 0, 4)], literals);
      literals++;
    }
  for (guint i = 0; i < G_N_ELEMENTS (globs); i++)
    g_string_append_printf (json, ",\n  { \"glob\": \"%s\", \"access\": \"%s\", \"why\": \"glob %u\" }", globs[i],
                            i % 2 == 0 ? "deny" : "hide", i);
  g_string_append (json, " ] }\n");
  return g_string_free (g_steal_pointer (&json), FALSE);
}

int
main (int argc, char **argv)
{
  guint reps = argc > 1 ? (guint)atoi (argv[1]) : 200;
  g_autoptr (GRand) rand = g_rand_new_with_seed (42);
  g_autofree char *text = policy_text (rand);
  g_autoptr (GError) error = NULL;
  g_autoptr (FbPolicy) policy = fb_policy_load_data (text, -1, "bench.json", NULL, &error);
  char *paths[N_PATHS];
  char **names[N_PATHS];
  double *whole = g_new (double, N_PATHS);
  double *chain = g_new (double, N_PATHS);
  double *whole_wall = g_new (double, N_PATHS);
  double *chain_wall = g_new (double, N_PATHS);
  guint n_rules = 0;
  volatile guint sink = 0;

  if (policy == NULL)
    {
      fprintf (stderr, "bench: %s\n", error->message);
      return 1;
    }
  if (reps == 0)
    reps = 1;
  fb_policy_get_rules (policy, &n_rules);

  for (guint i = 0; i < N_PATHS; i++)
    {
      g_autoptr (GString) path = g_string_new (NULL);

      g_string_append_printf (path, "/%s", top[g_rand_int_range (rand, 0, G_N_ELEMENTS (top))]);
      for (guint k = 1; k < DEPTH - 1; k++)
        g_string_append_printf (path, "/%s", mid[g_rand_int_range (rand, 0, G_N_ELEMENTS (mid))]);
      g_string_append_printf (path, "/%s", leaf[g_rand_int_range (rand, 0, G_N_ELEMENTS (leaf))]);
      paths[i] = g_string_free (g_steal_pointer (&path), FALSE);
      names[i] = g_strsplit (paths[i] + 1, "/", -1);
    }

  for (guint i = 0; i < N_PATHS; i++)
    {
      FbPolicyDecision d;
      double w0 = bench_now_ns (CLOCK_MONOTONIC);
      double t0 = bench_now_ns (CLOCK_THREAD_CPUTIME_ID);

      for (guint r = 0; r < reps; r++)
        {
          fb_policy_decide (policy, paths[i], &d);
          sink += d.access;
        }
      whole[i] = (bench_now_ns (CLOCK_THREAD_CPUTIME_ID) - t0) / reps;
      whole_wall[i] = (bench_now_ns (CLOCK_MONOTONIC) - w0) / reps;
    }

  for (guint i = 0; i < N_PATHS; i++)
    {
      /* the parents' paths are what the view holds already: not timed */
      char *parents[DEPTH];
      FbPolicyDecision root;
      double t0;
      double w0;

      fb_policy_decide (policy, "/", &root);
      parents[0] = g_strdup ("/");
      for (guint k = 1; k < DEPTH; k++)
        parents[k] =
          k == 1 ? g_strconcat ("/", names[i][0], NULL) : g_strconcat (parents[k - 1], "/", names[i][k - 1], NULL);
      w0 = bench_now_ns (CLOCK_MONOTONIC);
      t0 = bench_now_ns (CLOCK_THREAD_CPUTIME_ID);
      for (guint r = 0; r < reps; r++)
        {
          FbPolicyDecision d = root;

          for (guint k = 0; k < DEPTH; k++)
            fb_policy_decide_child (policy, &d, parents[k], names[i][k], &d);
          sink += d.access;
        }
      chain[i] = (bench_now_ns (CLOCK_THREAD_CPUTIME_ID) - t0) / reps;
      chain_wall[i] = (bench_now_ns (CLOCK_MONOTONIC) - w0) / reps;
      for (guint k = 0; k < DEPTH; k++)
        g_free (parents[k]);
    }

  printf ("policy: %u rules (190 paths, 10 globs); %d paths of depth %d; %u repetitions each\n", n_rules, N_PATHS,
          DEPTH, reps);
  report ("fb_policy_decide (whole path)", whole, N_PATHS, 1);
  report ("decide_child chain (10 steps)", chain, N_PATHS, 1);
  report ("decide_child (one step)", chain, N_PATHS, DEPTH);
  report ("wall clock: fb_policy_decide", whole_wall, N_PATHS, 1);
  report ("wall clock: decide_child chain", chain_wall, N_PATHS, 1);
  /* report() sorted the arrays: the medians are in the middle */
  printf ("target: median fb_policy_decide < 1000 ns (CPU time): %s\n", whole[N_PATHS / 2] < 1000 ? "met" : "NOT met");

  for (guint i = 0; i < N_PATHS; i++)
    {
      g_free (paths[i]);
      g_strfreev (names[i]);
    }
  g_free (whole);
  g_free (chain);
  g_free (whole_wall);
  g_free (chain_wall);
  return sink == 0xffffffff ? 1 : 0;
}
