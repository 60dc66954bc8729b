/* fusebox — what the view's lookups and getattrs cost without FUSE: the
 * daemon's side of a `find` or `git status` whose names the kernel asks
 * about again (revalidation).
 *
 * Builds DIRS directories of FILES files each in a temporary directory,
 * makes a view of it (policy: "/" read), looks every name up once and keeps
 * the nodes (as the kernel keeps what it looked up), then times, over
 * ROUNDS passes:
 *  - warm lookup: fb_view_lookup of every known name in its directory;
 *  - getattr: fb_view_getattr of every directory node.
 * Time is this thread's CPU time (CLOCK_THREAD_CPUTIME_ID) per operation,
 * the median and the 90th percentile of the passes.  Run under a low
 * RLIMIT_NOFILE (prlimit --nofile=N:N) to time the same with more
 * directories than the descriptor cache holds (fs/fs-view-fd.c); a build
 * without that cache fails there with EMFILE, which is reported.
 * It also prints the heap the kept nodes take (malloc's in-use bytes,
 * mallinfo2's arena and mmap'd blocks, before and after the first
 * lookups, divided by the nodes: what they keep beside themselves, since
 * the nodes live in the view's slabs, fs/fs-view-node-slab.c, and the node
 * sets map their large arrays themselves, fs/fs-view-table.c), and the
 * anonymous memory the process grew by over the same lookups (RssAnon):
 * what the daemon holds per name the kernel remembers, nodes and tables
 * included.
 *
 *   build/bench/bench-view-lookup [DIRS [FILES [ROUNDS]]]   (default 2000 10 20)
 */
#include "bench/bench-util.h"
#include "fs/fs.h"

#include <errno.h>
#include <ftw.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int
rm_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  remove (path);
  return 0;
}

/* Bytes malloc has handed out: in its arenas, and in blocks of their own
 * (large arrays, such as the node table's) */
static gsize
heap_in_use (void)
{
  struct mallinfo2 mi = mallinfo2 ();

  return mi.uordblks + mi.hblkhd;
}

/* The process's resident anonymous memory, in bytes. */
static gsize
rss_anon (void)
{
  g_autofree char *status = NULL;
  const char *line;

  if (!g_file_get_contents ("/proc/self/status", &status, NULL, NULL) || (line = strstr (status, "\nRssAnon:")) == NULL)
    return 0;
  return (gsize)g_ascii_strtoull (line + strlen ("\nRssAnon:"), NULL, 10) * 1024;
}

static void
report (const char *what, double *per_op, guint rounds)
{
  bench_sort (per_op, rounds);
  printf ("%-12s median %7.0f ns   p90 %7.0f ns\n", what, per_op[rounds / 2], per_op[(rounds * 9) / 10]);
}

int
main (int argc, char **argv)
{
  guint dirs = argc > 1 ? (guint)atoi (argv[1]) : 2000;
  guint files = argc > 2 ? (guint)atoi (argv[2]) : 10;
  guint rounds = argc > 3 ? (guint)atoi (argv[3]) : 20;
  g_autoptr (GError) error = NULL;
  g_autofree char *tmp = g_dir_make_tmp ("fusebox-bench-lookup-XXXXXX", &error);
  g_autofree char *policy_text = NULL;
  g_autoptr (FbPolicy) policy = NULL;
  g_autoptr (FbView) view = NULL;
  g_autoptr (FbViewNode) top = NULL;
  g_autoptr (GPtrArray) dir_nodes = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);
  g_autoptr (GPtrArray) file_nodes = g_ptr_array_new_with_free_func ((GDestroyNotify)fb_view_node_unref);
  g_autofree double *lookup_ns = g_new0 (double, rounds);
  g_autofree double *getattr_ns = g_new0 (double, rounds);
  FbViewCaller caller = { .pid = getpid (), .uid = getuid (), .gid = getgid (), .comm = "bench" };
  char name[32];
  guint errors = 0;
  gsize heap_before, heap_nodes, rss_before, rss_nodes;
  int r;

  if (tmp == NULL || dirs == 0 || rounds == 0)
    {
      fprintf (stderr, "bench-view-lookup: %s\n", tmp == NULL ? error->message : "DIRS and ROUNDS must be > 0");
      return 1;
    }
  for (guint i = 0; i < dirs; i++)
    for (guint j = 0; j < files; j++)
      {
        g_autofree char *path = g_strdup_printf ("%s/d%05u/f%03u", tmp, i, j);
        g_autofree char *dir = g_path_get_dirname (path);
        g_mkdir_with_parents (dir, 0755);
        g_file_set_contents (path, "x", 1, NULL);
      }
  policy_text =
    g_strdup ("{ \"version\": 1, \"rules\": [ { \"path\": \"/\", \"access\": \"read\", \"why\": \"all\" } ] }");
  policy = fb_policy_load_data (policy_text, -1, "bench.json", NULL, &error);
  if (policy == NULL)
    {
      fprintf (stderr, "bench-view-lookup: %s\n", error->message);
      return 1;
    }
  r = fb_view_new (policy, NULL, &view);
  if (r == 0)
    r = fb_view_walk (view, &caller, tmp, 0, &top);
  if (r < 0)
    {
      fprintf (stderr, "bench-view-lookup: the view of %s: %s\n", tmp, g_strerror (-r));
      return 1;
    }

  /* every name once, kept */
  heap_before = heap_in_use ();
  rss_before = rss_anon ();
  for (guint i = 0; i < dirs; i++)
    {
      FbViewNode *d = NULL;
      g_snprintf (name, sizeof name, "d%05u", i);
      r = fb_view_lookup (view, &caller, top, name, &d, NULL);
      if (r < 0)
        {
          fprintf (stderr, "bench-view-lookup: lookup %s: %s after %u directories\n", name, g_strerror (-r), i);
          nftw (tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
          return 1;
        }
      g_ptr_array_add (dir_nodes, d);
      for (guint j = 0; j < files; j++)
        {
          FbViewNode *f = NULL;
          g_snprintf (name, sizeof name, "f%03u", j);
          if (fb_view_lookup (view, &caller, d, name, &f, NULL) == 0)
            g_ptr_array_add (file_nodes, f);
          else
            errors++;
        }
    }

  heap_nodes = heap_in_use () - heap_before;
  rss_nodes = rss_anon () - rss_before;

  for (guint k = 0; k < rounds; k++)
    {
      double t0 = bench_now_ns (CLOCK_THREAD_CPUTIME_ID);
      guint ops = 0;
      for (guint i = 0; i < dirs; i++)
        {
          FbViewNode *d = dir_nodes->pdata[i];
          struct stat st;
          for (guint j = 0; j < files; j++)
            {
              g_autoptr (FbViewNode) f = NULL;
              g_snprintf (name, sizeof name, "f%03u", j);
              if (fb_view_lookup (view, &caller, d, name, &f, &st) < 0)
                errors++;
              ops++;
            }
        }
      lookup_ns[k] = (bench_now_ns (CLOCK_THREAD_CPUTIME_ID) - t0) / ops;
      t0 = bench_now_ns (CLOCK_THREAD_CPUTIME_ID);
      for (guint i = 0; i < dirs; i++)
        {
          struct stat st;
          if (fb_view_getattr (view, &caller, dir_nodes->pdata[i], &st) < 0)
            errors++;
        }
      getattr_ns[k] = (bench_now_ns (CLOCK_THREAD_CPUTIME_ID) - t0) / dirs;
    }

  printf ("%u directories x %u files, %u rounds%s\n", dirs, files, rounds, errors ? "" : ", no errors");
  if (errors != 0)
    printf ("%u operations failed\n", errors);
  printf ("%-12s %7.0f bytes of heap per node (%u nodes)\n", "memory",
          (double)heap_nodes / (dir_nodes->len + file_nodes->len), dir_nodes->len + file_nodes->len);
  printf ("%-12s %7.0f bytes of anonymous RSS per node\n", "", (double)rss_nodes / (dir_nodes->len + file_nodes->len));
  report ("warm lookup", lookup_ns, rounds);
  report ("dir getattr", getattr_ns, rounds);
  g_ptr_array_set_size (file_nodes, 0);
  g_ptr_array_set_size (dir_nodes, 0);
  g_clear_pointer (&top, fb_view_node_unref);
  nftw (tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  return errors != 0;
}
