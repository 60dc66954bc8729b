/* Adversarial tests: no spelling of a name gets past its rule where the host
 * folds names (vfat, exfat, SMB, casefold directories).
 *
 * The host here is fixtures/fb-foldfs, a case-insensitive passthrough FUSE
 * filesystem mounted at WS/ci over a backing directory outside the
 * workspace (--unicode: case folding of the NFD form, as ext4/tmpfs
 * casefold; --strip-dots: trailing dots and spaces ignored, as vfat).
 * Before each test the variants are proven to reach the real files on the
 * host, through that mount.  Then, through `fusebox run` (a probe inside) and
 * through `fusebox serve` (fs/readFile, fs/writeFile, fs/createDirectory):
 *  - `.GIT/config` (.git is protected), `SECRET-DENY.TXT` (deny),
 *    `Secret-Hide.txt` (hide), `PRIVATE-DIR/inner.txt` (deny on the
 *    directory) can't be read, written, created, removed or renamed onto;
 *  - a name that folds equal to a rule or a protected name and does not
 *    exist yet (`.GIT` in a directory without `.git`, `ABSENT-SECRET`)
 *    can't be made, so that it never acts as the real one on the host;
 *  - a variant of an allowed file (`NORMAL.TXT`) is not resolved either:
 *    the view shows every entry under its own spelling only;
 *  - the real names behave as their rules say, and the files are unchanged
 *    on the host afterwards;
 *  - the refusal of a spelling is logged with its reason;
 *  - `fusebox check` reports the folding filesystem under the workspace.
 * A real tmpfs with casefold is used too when the kernel has CONFIG_UNICODE
 * (otherwise that test says so and is skipped).
 *
 * Needs root and /dev/fuse (exit 77 without, unless FUSEBOX_TESTS_MUST_RUN=1). */
#include "tests/lib/test-run.h"
#include "tests/lib/test-sec-files.h"
#include "tests/lib/test-serve.h"

#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/vfs.h>

#define FUSE_SUPER_MAGIC 0x65735546

/* ---- inside the sandbox ---- */

static const char *
probe_one (const char *op, const char *a, const char *b, char **owned)
{
  if (strcmp (op, "read") == 0)
    return rfx_read_res (a);
  if (strcmp (op, "write") == 0 || strcmp (op, "create") == 0 || strcmp (op, "excl") == 0)
    {
      int flags = O_WRONLY | O_CLOEXEC;
      int fd;
      flags |= strcmp (op, "write") == 0 ? O_APPEND : strcmp (op, "create") == 0 ? O_CREAT | O_TRUNC : O_CREAT | O_EXCL;
      fd = open (a, flags, 0644);
      if (fd < 0)
        return rfx_errname (errno);
      const char *res = write (fd, "pwned\n", 6) != 6 ? rfx_errname (errno) : "OK";
      close (fd);
      return res;
    }
  if (strcmp (op, "mkdir") == 0)
    return rfx_res (mkdir (a, 0755));
  if (strcmp (op, "unlink") == 0)
    return rfx_res (unlink (a));
  if (strcmp (op, "rename") == 0)
    return rfx_res (rename (a, b));
  if (strcmp (op, "stat") == 0)
    {
      struct stat st;
      return rfx_res (lstat (a, &st));
    }
  if (strcmp (op, "sleep") == 0)
    {
      /* A: milliseconds, after the directory the steps are run in (the
       * kernel's entries of the view expire meanwhile) */
      const char *ms = strrchr (a, '/');
      g_usleep ((gulong)g_ascii_strtoull (ms != NULL ? ms + 1 : a, NULL, 10) * 1000);
      return "OK";
    }
  return NULL;
}

static gint
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

static int
probe_main (int argc, char **argv)
{
  /* OP A B, B ignored by one-argument operations ("-") */
  for (int i = 0; i + 2 < argc; i += 3)
    {
      g_autofree char *owned = NULL;
      const char *res;

      if (strcmp (argv[i], "list") == 0)
        {
          g_autoptr (GDir) d = g_dir_open (argv[i + 1], 0, NULL);
          g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
          const char *n;
          if (d == NULL)
            res = rfx_errname (errno);
          else
            {
              while ((n = g_dir_read_name (d)) != NULL)
                g_ptr_array_add (names, g_strdup (n));
              g_ptr_array_sort (names, compare_names);
              g_ptr_array_add (names, NULL);
              res = owned = g_strjoinv (",", (char **)names->pdata);
            }
        }
      else
        res = probe_one (argv[i], argv[i + 1], argv[i + 2], &owned);
      if (res == NULL)
        {
          fprintf (stderr, "probe: unknown operation %s\n", argv[i]);
          return 2;
        }
      printf ("%s\n", res);
      fflush (stdout);
    }
  return 0;
}

/* ---- the host side ---- */

typedef struct
{
  const char *op;
  const char *a; /* relative to WS/ci */
  const char *b; /* "-" when unused */
  const char *want;
} Step;

/* WS/ci, mounted by fb-foldfs over T/backing with ARGS; the backing
 * directory's files made first.  Returns WS/ci. */
static char *
mount_foldfs (RFx *fx, const char *const *args, char **ret_backing)
{
  g_autofree char *fs = test_fixture ("fb-foldfs");
  char *backing = g_build_filename (fx->tmp, "backing", NULL);
  char *mnt = g_build_filename (fx->ws, "ci", NULL);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  struct statfs sfs;
  GPid pid;

  if (access ("/dev/fuse", R_OK | W_OK) != 0)
    test_skip_or_fail ("/dev/fuse is not usable here: the case-insensitive filesystem can't be mounted");
  g_mkdir_with_parents (backing, 0755);
  g_mkdir_with_parents (mnt, 0755);
  g_ptr_array_add (argv, fs);
  for (guint i = 0; args != NULL && args[i] != NULL; i++)
    g_ptr_array_add (argv, (char *)args[i]);
  g_ptr_array_add (argv, backing);
  g_ptr_array_add (argv, mnt);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_async (NULL, (char **)argv->pdata, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, &error))
    fail_msg ("can't start %s: %s", fs, error->message);
  rfx_keep_pid (fx, pid);
  if (!TEST_WAIT_FOR (statfs (mnt, &sfs) == 0 && sfs.f_type == FUSE_SUPER_MAGIC, 10000))
    fail_msg ("fb-foldfs did not mount %s over %s", mnt, backing);
  *ret_backing = backing;
  return mnt;
}

/* Unmount what the test mounted under T, then the usual teardown. */
static int
fold_teardown (void **state)
{
  RFx *fx = *state;
  g_autofree char *mountinfo = test_read_file ("/proc/self/mountinfo");
  g_auto (GStrv) lines = g_strsplit (mountinfo != NULL ? mountinfo : "", "\n", -1);

  for (gint i = (gint)g_strv_length (lines) - 1; i >= 0; i--)
    {
      g_auto (GStrv) f = g_strsplit (lines[i], " ", 6);
      if (g_strv_length (f) >= 5 && g_str_has_prefix (f[4], fx->tmp))
        umount2 (f[4], MNT_DETACH);
    }
  rfx_free (fx);
  return 0;
}

static void
make_tree (const char *backing)
{
  g_autofree char *git = g_build_filename (backing, ".git", "config", NULL);
  g_autofree char *deny = g_build_filename (backing, "secret-deny.txt", NULL);
  g_autofree char *hide = g_build_filename (backing, "secret-hide.txt", NULL);
  g_autofree char *inner = g_build_filename (backing, "private-dir", "inner.txt", NULL);
  g_autofree char *normal = g_build_filename (backing, "normal.txt", NULL);
  g_autofree char *other = g_build_filename (backing, "other.txt", NULL);
  g_autofree char *sub = g_build_filename (backing, "sub", "keep", NULL);

  test_write (git, "[core]\n\tbare = false\n", 0644);
  test_write (deny, "denied\n", 0644);
  test_write (hide, "hidden\n", 0644);
  test_write (inner, "inner\n", 0644);
  test_write (normal, "normal\n", 0644);
  test_write (other, "other\n", 0644);
  test_write (sub, "", 0644);
}

/* The variants reach the real files on the host: a refusal inside then
 * shows the view's doing, not an absent file. */
static void
assert_host_resolves (const char *mnt, const char *const *variants)
{
  for (guint i = 0; variants[i] != NULL; i++)
    {
      g_autofree char *p = g_build_filename (mnt, variants[i], NULL);
      test_assert_host_readable (p);
    }
}

static char *
policy_file (RFx *fx, const char *extra_rules)
{
  g_autofree char *text =
    g_strdup_printf ("{\"version\":1,\"network\":\"none\",\"rules\":["
                     "{\"path\":\"/\",\"access\":\"read\",\"why\":\"system files\"},"
                     "{\"path\":\"/tmp\",\"access\":\"write\",\"source\":\"private\",\"why\":\"a private /tmp\"},"
                     "{\"path\":\"${WORKSPACE}\",\"access\":\"write\",\"why\":\"the workspace\"},"
                     "{\"path\":\"${WORKSPACE}/ci/secret-deny.txt\",\"access\":\"deny\",\"why\":\"secret-deny\"},"
                     "{\"path\":\"${WORKSPACE}/ci/secret-hide.txt\",\"access\":\"hide\",\"why\":\"secret-hide\"},"
                     "{\"path\":\"${WORKSPACE}/ci/private-dir\",\"access\":\"deny\",\"why\":\"private-dir\"},"
                     "{\"path\":\"${WORKSPACE}/ci/absent-secret\",\"access\":\"deny\",\"why\":\"absent-secret\"}%s]}",
                     extra_rules != NULL ? extra_rules : "");
  char *path = g_build_filename (fx->tmp, "policy.json", NULL);
  test_write (path, text, 0644);
  return path;
}

/* Run STEPS through a probe inside `fusebox run` with POLICY; returns the
 * run's access log. */
static char *
run_steps (RFx *fx, const char *policy, const char *mnt, const Step *steps, guint n)
{
  g_autofree char *self = test_self ();
  g_autofree char *run_dir = g_build_filename (fx->tmp, "run-1", NULL);
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GString) bad = g_string_new (NULL);
  g_auto (GStrv) got = NULL;
  RfxResult r;

  g_ptr_array_add (argv, g_strdup (test_bin ()));
  g_ptr_array_add (argv, g_strdup ("run"));
  g_ptr_array_add (argv, g_strdup ("--policy"));
  g_ptr_array_add (argv, g_strdup (policy));
  g_ptr_array_add (argv, g_strdup ("--read"));
  g_ptr_array_add (argv, g_strdup (g_getenv ("FUSEBOX_BUILD_ROOT")));
  g_ptr_array_add (argv, g_strdup ("--run-dir"));
  g_ptr_array_add (argv, g_strdup (run_dir));
  g_ptr_array_add (argv, g_strdup ("--"));
  g_ptr_array_add (argv, g_strdup (self));
  g_ptr_array_add (argv, g_strdup ("--probe"));
  for (guint i = 0; i < n; i++)
    {
      g_ptr_array_add (argv, g_strdup (steps[i].op));
      g_ptr_array_add (argv, g_build_filename (mnt, steps[i].a, NULL));
      g_ptr_array_add (argv, strcmp (steps[i].b, "-") == 0 ? g_strdup ("-") : g_build_filename (mnt, steps[i].b, NULL));
    }
  g_ptr_array_add (argv, NULL);
  rfx_run_argv (fx, &r, (char **)argv->pdata);
  if (r.status != 0)
    fail_msg ("the probe failed (status %d): %s", r.status, r.err);
  got = g_strsplit (r.out, "\n", -1);
  for (guint i = 0; i < n; i++)
    {
      const char *g = i < g_strv_length (got) ? got[i] : "(missing)";
      if (strcmp (g, steps[i].want) != 0)
        g_string_append_printf (bad, "  %s %s%s%s: %s, expected %s\n", steps[i].op, steps[i].a,
                                strcmp (steps[i].b, "-") == 0 ? "" : " ",
                                strcmp (steps[i].b, "-") == 0 ? "" : steps[i].b, g, steps[i].want);
    }
  rfx_result_clear (&r);
  if (bad->len > 0)
    fail_msg ("inside `fusebox run`, on a host that folds names:\n%s", bad->str);
  {
    g_autofree char *log_path = g_build_filename (run_dir, "access.jsonl", NULL);
    return test_read_file (log_path);
  }
}

/* The files the sandbox must not have changed, as they were made. */
static void
assert_host_unchanged (const char *backing)
{
  static const TestSecFile files[] = {
    { ".git/config", "[core]\n\tbare = false\n" }, { "secret-deny.txt", "denied\n" }, { "secret-hide.txt", "hidden\n" },
    { "private-dir/inner.txt", "inner\n" },        { "other.txt", "other\n" },
  };
  static const char *const absent[] = { "absent-secret", "ABSENT-SECRET",   "Absent-Secret", "sub/.GIT",
                                        "sub/.Git",      "SECRET-DENY.TXT", "NORMAL.TXT",    NULL };

  g_autofree char *changed = NULL, *text = NULL;

  if (test_sec_files_changed (backing, files, G_N_ELEMENTS (files), &changed, &text) != NULL)
    fail_msg ("%s changed on the host: \"%s\"", changed, text != NULL ? text : "(gone)");
  for (guint i = 0; absent[i] != NULL; i++)
    {
      g_autofree char *p = g_build_filename (backing, absent[i], NULL);
      struct stat st;
      if (lstat (p, &st) == 0)
        fail_msg ("the sandbox made %s on the host", p);
    }
}

/* A record of the view's refusal of a spelling, with its reason. */
static void
assert_logged_spelling (const char *log, const char *path)
{
  g_autoptr (GPtrArray) records = test_parse_lines (log != NULL ? log : "");

  for (guint i = 0; i < records->len; i++)
    {
      JsonObject *rec = records->pdata[i];
      const char *why = test_json_str (rec, "why");
      if (g_strcmp0 (test_json_str (rec, "path"), path) == 0 &&
          g_strcmp0 (test_json_str (rec, "decision"), "allow") != 0 && why != NULL &&
          strstr (why, "folds names") != NULL)
        return;
    }
  fail_msg ("no refusal of %s with the folding host's reason in the log:\n%s", path, log != NULL ? log : "");
}

static const Step ascii_steps[] = {
  /* first a listing (the kernel may ask for it with attributes, which makes
   * nodes before any lookup has shown that the directory folds); then a
   * directory spelt DOCS on disk follows the rule on docs/secret */
  { "list", ".", "-", "DOCS,normal.txt,other.txt,private-dir,secret-deny.txt,sub,vault" },
  { "read", "DOCS/other.txt", "-", "OK" },
  { "read", "DOCS/secret", "-", "EACCES" },
  { "read", "DOCS/SECRET", "-", "ENOENT" },
  { "read", "docs/other.txt", "-", "ENOENT" },
  /* the variants: nothing readable, writable or made */
  { "read", ".GIT/config", "-", "ENOENT" },
  { "write", ".GIT/config", "-", "ENOENT" },
  { "read", ".Git/config", "-", "ENOENT" },
  { "read", "SECRET-DENY.TXT", "-", "ENOENT" },
  { "write", "SECRET-DENY.TXT", "-", "ENOENT" },
  { "create", "SECRET-DENY.TXT", "-", "ENOENT" },
  { "read", "Secret-Hide.txt", "-", "ENOENT" },
  { "write", "Secret-Hide.txt", "-", "ENOENT" },
  { "create", "Secret-Hide.txt", "-", "EACCES" },
  { "read", "PRIVATE-DIR/inner.txt", "-", "ENOENT" },
  { "write", "PRIVATE-DIR/inner.txt", "-", "ENOENT" },
  { "create", "PRIVATE-DIR/new.txt", "-", "ENOENT" },
  { "read", "Private-Dir/inner.txt", "-", "ENOENT" },
  { "unlink", "SECRET-DENY.TXT", "-", "ENOENT" },
  { "unlink", "Secret-Hide.txt", "-", "ENOENT" },
  { "rename", "normal.txt", "SECRET-DENY.TXT", "EACCES" },
  { "rename", "normal.txt", ".GIT", "EACCES" },
  { "rename", "normal.txt", "Other.txt", "EACCES" },
  /* names that would act as a rule's or a protected name once made */
  { "mkdir", "sub/.GIT", "-", "EACCES" },
  { "mkdir", "sub/.Git", "-", "EACCES" },
  { "create", "ABSENT-SECRET", "-", "EACCES" },
  { "excl", "Absent-Secret", "-", "EACCES" },
  { "mkdir", "absent-SECRET", "-", "EACCES" },
  /* a variant of an allowed name is not resolved either */
  { "read", "NORMAL.TXT", "-", "ENOENT" },
  { "excl", "NORMAL.TXT", "-", "EEXIST" },
  { "mkdir", "Other.TXT", "-", "EEXIST" },
  /* the real names, as their rules say */
  { "read", ".git/config", "-", "ENOENT" },
  { "read", "secret-deny.txt", "-", "EACCES" },
  { "write", "secret-deny.txt", "-", "EACCES" },
  { "read", "secret-hide.txt", "-", "ENOENT" },
  { "read", "private-dir/inner.txt", "-", "EACCES" },
  { "read", "normal.txt", "-", "OK" },
  { "write", "normal.txt", "-", "OK" },
  { "excl", "new.txt", "-", "OK" },
  { "rename", "new.txt", "New.TXT", "OK" },
  { "read", "New.TXT", "-", "OK" },
  { "list", ".", "-", "DOCS,New.TXT,normal.txt,other.txt,private-dir,secret-deny.txt,sub,vault" },
  /* a hidden directory lists only the reachable names the disk spells so */
  { "list", "vault", "-", "open" },
  { "read", "vault/open/f.txt", "-", "OK" },
  { "read", "vault/pub/f.txt", "-", "ENOENT" },
  { "read", "vault/PUB/f.txt", "-", "ENOENT" },
  { "read", "vault/other.txt", "-", "ENOENT" },
};

/* One run over fb-foldfs: what is made on the host, what the sandbox
 * tries and what it must get. */
typedef struct
{
  const char *const *args;  /* fb-foldfs's options (NULL: none) */
  const TestSecFile *files; /* made in the backing directory beside make_tree's */
  size_t n_files;
  const char *const *variants; /* spellings that reach real files on the host */
  const char *rules;           /* policy_file's extra rules (NULL: none) */
  const Step *steps;
  size_t n_steps;
} FoldRun;

/* C on a host that folds names: the tree and C's files made in TREE (on
 * the host), the variants proven to reach them in FOLDING (where the host
 * folds), the steps run inside `fusebox run` (relative to MNT, WS/ci),
 * and TREE found unchanged.  Returns the run's access log. */
static char *
fold_steps (RFx *fx, const FoldRun *c, const char *tree, const char *folding, const char *mnt)
{
  g_autofree char *policy = NULL;
  g_autofree char *changed = NULL, *now = NULL;
  char *log;

  make_tree (tree);
  test_sec_files_make (tree, c->files, c->n_files);
  assert_host_resolves (folding, c->variants);
  policy = policy_file (fx, c->rules);
  log = run_steps (fx, policy, mnt, c->steps, c->n_steps);
  assert_host_unchanged (tree);
  if (test_sec_files_changed (tree, c->files, c->n_files, &changed, &now) != NULL)
    fail_msg ("%s changed on the host: \"%s\"", changed, now != NULL ? now : "(gone)");
  return log;
}

/* C over fb-foldfs (the tree in its backing directory); the mount (WS/ci)
 * and the backing directory in *RET_MNT and *RET_BACKING when asked for. */
static char *
fold_run (RFx *fx, const FoldRun *c, char **ret_mnt, char **ret_backing)
{
  g_autofree char *backing = NULL;
  g_autofree char *mnt = mount_foldfs (fx, c->args, &backing);
  char *log = fold_steps (fx, c, backing, mnt, mnt);

  if (ret_mnt != NULL)
    *ret_mnt = g_steal_pointer (&mnt);
  if (ret_backing != NULL)
    *ret_backing = g_steal_pointer (&backing);
  return log;
}

RFX_CASE (test_case_variants_run)
{
  static const TestSecFile files[] = {
    { "vault/PUB/f.txt", "pub\n" },  { "vault/open/f.txt", "open\n" }, { "vault/other.txt", "other\n" },
    { "DOCS/other.txt", "other\n" }, { "DOCS/secret", "secret\n" },
  };
  static const char *const variants[] = { ".GIT/config",           "SECRET-DENY.TXT", "Secret-Hide.txt",
                                          "PRIVATE-DIR/inner.txt", "NORMAL.TXT",      NULL };
  static const FoldRun c = {
    .files = files,
    .n_files = G_N_ELEMENTS (files),
    .variants = variants,
    .rules = ",{\"path\":\"${WORKSPACE}/ci/vault\",\"access\":\"hide\",\"why\":\"vault\"}"
             ",{\"path\":\"${WORKSPACE}/ci/vault/pub\",\"access\":\"read\",\"why\":\"pub\"}"
             ",{\"path\":\"${WORKSPACE}/ci/vault/open\",\"access\":\"read\",\"why\":\"open\"}"
             ",{\"path\":\"${WORKSPACE}/ci/docs/secret\",\"access\":\"deny\",\"why\":\"docs\"}",
    .steps = ascii_steps,
    .n_steps = G_N_ELEMENTS (ascii_steps),
  };
  g_autofree char *mnt = NULL;
  g_autofree char *log = fold_run (fx, &c, &mnt, NULL);
  g_autofree char *denied = g_build_filename (mnt, "SECRET-DENY.TXT", NULL);

  assert_logged_spelling (log, denied);
}

/* What the sandbox tries where it picks the name that tells the view
 * whether the directory folds: a variant spelling first, no listing. */
static const Step variant_first_steps[] = {
  { "read", "SECRET-DENY.TXT", "-", "ENOENT" }, { "read", ".GIT/config", "-", "ENOENT" },
  { "write", ".GIT/config", "-", "ENOENT" },    { "read", "PRIVATE-DIR/inner.txt", "-", "ENOENT" },
  { "create", "ABSENT-SECRET", "-", "EACCES" }, { "mkdir", "sub/.GIT", "-", "EACCES" },
  { "read", "secret-deny.txt", "-", "EACCES" }, { "read", "normal.txt", "-", "OK" },
};

/* SETUP's steps, then variant_first_steps, on the host fb-foldfs plays
 * with ARG. */
static void
variants_after (RFx *fx, const char *arg, const Step *setup, size_t n_setup)
{
  static const char *const variants[] = { ".GIT/config", "SECRET-DENY.TXT", "PRIVATE-DIR/inner.txt", "Mixed-Case.txt",
                                          NULL };
  /* an entry the disk spells otherwise than its rule: denied only while
   * the directory is rightly taken to fold (or maybe) */
  static const TestSecFile files[] = { { "Mixed-Case.txt", "mixed\n" } };
  static const Step last[] = { { "read", "Mixed-Case.txt", "-", "EACCES" } };
  const char *const args[] = { arg, NULL };
  g_autoptr (GArray) steps = g_array_new (FALSE, FALSE, sizeof (Step));
  FoldRun c = { .args = args,
                .files = files,
                .n_files = G_N_ELEMENTS (files),
                .variants = variants,
                .rules = ",{\"path\":\"${WORKSPACE}/ci/mixed-case.txt\",\"access\":\"deny\",\"why\":\"mixed\"}" };

  g_array_append_vals (steps, setup, (guint)n_setup);
  g_array_append_vals (steps, variant_first_steps, G_N_ELEMENTS (variant_first_steps));
  g_array_append_vals (steps, last, G_N_ELEMENTS (last));
  c.steps = (const Step *)(gpointer)steps->data;
  c.n_steps = steps->len;
  g_free (fold_run (fx, &c, NULL, NULL));
}

/* A host that numbers each spelling apart (a FUSE filesystem without
 * use_ino, an SMB mount without server inode numbers): that the variant
 * reaches another inode than the listed name does not make the host one
 * that keeps them apart. */
RFX_CASE (test_inode_per_name_run)
{
  variants_after (fx, "--inode-per-name", NULL, 0);
}

/* A host whose kernel remembers absences (NFS's lookup cache, a FUSE
 * negative timeout): the sandbox asks for ZZZ (absent: remembered), makes
 * zzz, waits for the view's entry of it to expire so that the view looks
 * it up again, and the host's memory says ZZZ is not there.  An absence
 * proves nothing on such a host. */
RFX_CASE (test_remembered_absence_run)
{
  static const Step setup[] = {
    { "stat", "ZZZ", "-", "ENOENT" },
    { "create", "zzz", "-", "OK" },
    { "sleep", "3000", "-", "OK" },
    { "stat", "zzz", "-", "OK" },
  };

  variants_after (fx, "--remember-absences", setup, G_N_ELEMENTS (setup));
}

/* A host that keeps case apart but resolves names it never lists (NTFS's
 * and SMB's short 8.3 names): made to say so by two spellings listed side
 * by side, the directory still resolves only what it lists, and makes no
 * name that folds equal to a protected or denied one. */
RFX_CASE (test_alias_after_no_run)
{
  static const char *const args[] = { "--exact", "--alias", "SECRE~1.TXT=secret-deny.txt", NULL };
  static const char *const variants[] = { "SECRE~1.TXT", NULL };
  static const Step steps[] = {
    { "create", "foo", "-", "OK" },
    { "create", "FOO", "-", "OK" },
    { "sleep", "3000", "-", "OK" },
    { "stat", "foo", "-", "OK" },
    { "read", "SECRE~1.TXT", "-", "ENOENT" },
    { "write", "SECRE~1.TXT", "-", "ENOENT" },
    { "unlink", "SECRE~1.TXT", "-", "ENOENT" },
    { "read", "secret-deny.txt", "-", "EACCES" },
    { "read", "normal.txt", "-", "OK" },
    /* nor is a name made that would act as a protected or denied one
     * where the host folds after all (a casefold directory shows names
     * that are not UTF-8 in two cases side by side) */
    { "mkdir", ".GIT", "-", "EACCES" },
    { "create", "ABSENT-SECRET", "-", "EACCES" },
    { "rename", "foo", ".Git", "EACCES" },
  };
  static const FoldRun c = {
    .args = args,
    .variants = variants,
    .steps = steps,
    .n_steps = G_N_ELEMENTS (steps),
  };
  g_free (fold_run (fx, &c, NULL, NULL));
}

/* NFD against NFC and case folding beyond ASCII, as ext4/tmpfs casefold. */
RFX_CASE (test_unicode_variants_run)
{
  static const char *const args[] = { "--unicode", NULL };
  static const TestSecFile files[] = { { "caf\xc3\xa9-secret.txt", "caf\xc3\xa9\n" } };
  static const char *const variants[] = { "cafe\xcc\x81-secret.txt", "CAF\xc3\x89-SECRET.TXT", NULL };
  static const Step steps[] = {
    { "read", "cafe\xcc\x81-secret.txt", "-", "ENOENT" }, { "write", "cafe\xcc\x81-secret.txt", "-", "ENOENT" },
    { "read", "CAF\xc3\x89-SECRET.TXT", "-", "ENOENT" },  { "read", "caf\xc3\xa9-secret.txt", "-", "EACCES" },
    { "create", "nai\xcc\x88ve-absent", "-", "EACCES" },  { "mkdir", "NA\xc3\x8fVE-ABSENT", "-", "EACCES" },
    { "read", "SECRET-DENY.TXT", "-", "ENOENT" },         { "read", "normal.txt", "-", "OK" },
  };
  static const FoldRun c = {
    .args = args,
    .files = files,
    .n_files = G_N_ELEMENTS (files),
    .variants = variants,
    .rules = ",{\"path\":\"${WORKSPACE}/ci/caf\\u00e9-secret.txt\",\"access\":\"deny\",\"why\":\"cafe\"}"
             ",{\"path\":\"${WORKSPACE}/ci/na\\u00efve-absent\",\"access\":\"deny\",\"why\":\"naive\"}",
    .steps = steps,
    .n_steps = G_N_ELEMENTS (steps),
  };
  g_autofree char *backing = NULL, *nfd = NULL;
  struct stat st;

  g_free (fold_run (fx, &c, NULL, &backing));
  /* nor was a denied name made in another normalization */
  nfd = g_build_filename (backing, "nai\xcc\x88ve-absent", NULL);
  assert_int_not_equal (lstat (nfd, &st), 0);
}

/* Trailing dots and spaces, which vfat, NTFS and SMB servers ignore. */
RFX_CASE (test_trailing_dots_run)
{
  static const char *const args[] = { "--strip-dots", NULL };
  static const char *const variants[] = { "secret-deny.txt.", "secret-deny.txt ", ".git./config", NULL };
  static const Step steps[] = {
    { "read", "secret-deny.txt.", "-", "ENOENT" },  { "read", "secret-deny.txt ", "-", "ENOENT" },
    { "write", "SECRET-DENY.TXT.", "-", "ENOENT" }, { "read", ".git./config", "-", "ENOENT" },
    { "read", "secret-hide.txt..", "-", "ENOENT" }, { "create", "absent-secret.", "-", "EACCES" },
    { "mkdir", "sub/.git.", "-", "EACCES" },        { "read", "normal.txt", "-", "OK" },
  };
  static const FoldRun c = {
    .args = args,
    .variants = variants,
    .steps = steps,
    .n_steps = G_N_ELEMENTS (steps),
  };

  g_free (fold_run (fx, &c, NULL, NULL));
}

/* A real tmpfs with casefold (Linux 6.13, CONFIG_UNICODE). */
static void
test_tmpfs_casefold_run (void **state)
{
  RFX_BEGIN (state);
  g_autofree char *mnt = g_build_filename (fx->ws, "ci", NULL);
  g_autofree char *dir = g_build_filename (mnt, "cf", NULL);
  static const char *const variants[] = { "SECRET-DENY.TXT", ".GIT/config", NULL };
  static const Step steps[] = {
    { "read", "cf/SECRET-DENY.TXT", "-", "ENOENT" }, { "read", "cf/.GIT/config", "-", "ENOENT" },
    { "read", "cf/Secret-Hide.txt", "-", "ENOENT" }, { "create", "cf/ABSENT-SECRET", "-", "EACCES" },
    { "read", "cf/secret-deny.txt", "-", "EACCES" }, { "read", "cf/normal.txt", "-", "OK" },
  };
  static const FoldRun c = {
    .variants = variants,
    .rules = ",{\"path\":\"${WORKSPACE}/ci/cf/secret-deny.txt\",\"access\":\"deny\",\"why\":\"d\"}"
             ",{\"path\":\"${WORKSPACE}/ci/cf/secret-hide.txt\",\"access\":\"hide\",\"why\":\"h\"}"
             ",{\"path\":\"${WORKSPACE}/ci/cf/absent-secret\",\"access\":\"deny\",\"why\":\"a\"}",
    .steps = steps,
    .n_steps = G_N_ELEMENTS (steps),
  };

  g_mkdir_with_parents (mnt, 0755);
  if (mount ("tmpfs", mnt, "tmpfs", 0, "casefold") < 0)
    {
      fprintf (stderr,
               "skipped: tmpfs can't fold names on this kernel (mount -o casefold: %s; it needs Linux 6.13 with "
               "CONFIG_UNICODE); the FUSE stand-ins cover the same cases\n",
               g_strerror (errno));
      fx->passed = true;
      skip ();
      return;
    }
  /* +F on an empty directory, as chattr does (FS_IOC_SETFLAGS) */
  mkdir (dir, 0755);
  {
    int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    unsigned int flags = 0;
    if (fd < 0 || ioctl (fd, FS_IOC_GETFLAGS, &flags) < 0 ||
        (flags |= FS_CASEFOLD_FL, ioctl (fd, FS_IOC_SETFLAGS, &flags)) < 0)
      fail_msg ("chattr +F %s: %s", dir, g_strerror (errno));
    close (fd);
  }
  /* the casefold directory is the host's own: the tree is made in it */
  g_free (fold_steps (fx, &c, dir, dir, mnt));
  RFX_PASS ();
}

/* ---- through the remote API ---- */

RFX_CASE (test_case_variants_serve)
{
  g_autofree char *backing = NULL;
  g_autofree char *mnt = mount_foldfs (fx, NULL, &backing);
  static const char *const variants[] = { ".GIT/config", "SECRET-DENY.TXT", "Secret-Hide.txt", "PRIVATE-DIR/inner.txt",
                                          NULL };
  g_autofree char *policy = NULL;
  g_autofree char *log_path = g_build_filename (fx->tmp, "serve.jsonl", NULL);
  g_autoptr (GString) bad = g_string_new (NULL);
  TestServer *server;
  TestClient *c;
  const char *args[8];
  static const char *const unreadable[] = { ".GIT/config",           "SECRET-DENY.TXT", "Secret-Hide.txt",
                                            "PRIVATE-DIR/inner.txt", "secret-deny.txt", "secret-hide.txt",
                                            ".git/config",           "NORMAL.TXT" };
  static const char *const unwritable[] = { ".GIT/config",           "SECRET-DENY.TXT", "Secret-Hide.txt",
                                            "PRIVATE-DIR/inner.txt", "ABSENT-SECRET",   "sub/.GIT/config",
                                            "secret-deny.txt" };
  static const char *const unmakeable[] = { "sub/.GIT", "Absent-Secret", "PRIVATE-DIR/x" };

  make_tree (backing);
  assert_host_resolves (mnt, variants);
  policy = policy_file (fx, NULL);
  args[0] = "--workspace";
  args[1] = fx->ws;
  args[2] = "--policy";
  args[3] = policy;
  args[4] = "--log";
  args[5] = log_path;
  args[6] = NULL;
  server = test_server_start (fx->tmp, args);
  if (!g_str_has_prefix (server->url != NULL ? server->url : "", "ws://"))
    fail_msg ("fusebox serve did not start: %s", server->command);
  fx->repro = g_strdup (server->command);
  c = test_client_open (server->url);

  for (guint i = 0; i < G_N_ELEMENTS (unreadable); i++)
    {
      g_autofree char *p = g_build_filename (mnt, unreadable[i], NULL);
      g_autoptr (JsonNode) r = test_client_callf (c, "fs/readFile", "{\"path\":\"%s\"}", p);
      if (test_answer_result (r) != NULL)
        g_string_append_printf (bad, "  fs/readFile %s: read\n", unreadable[i]);
    }
  for (guint i = 0; i < G_N_ELEMENTS (unwritable); i++)
    {
      g_autofree char *p = g_build_filename (mnt, unwritable[i], NULL);
      g_autoptr (JsonNode) r =
        test_client_callf (c, "fs/writeFile", "{\"path\":\"%s\",\"dataBase64\":\"cHduZWQK\"}", p);
      if (test_answer_result (r) != NULL)
        g_string_append_printf (bad, "  fs/writeFile %s: written\n", unwritable[i]);
    }
  for (guint i = 0; i < G_N_ELEMENTS (unmakeable); i++)
    {
      g_autofree char *p = g_build_filename (mnt, unmakeable[i], NULL);
      g_autoptr (JsonNode) r = test_client_callf (c, "fs/createDirectory", "{\"path\":\"%s\",\"recursive\":false}", p);
      if (test_answer_result (r) != NULL)
        g_string_append_printf (bad, "  fs/createDirectory %s: made\n", unmakeable[i]);
    }
  {
    /* a call's own sandbox narrows the server's policy: folded as well */
    g_autofree char *p = g_build_filename (mnt, "OTHER.TXT", NULL);
    g_autofree char *q = g_build_filename (mnt, "normal.txt", NULL);
    g_autoptr (JsonNode) r = test_client_callf (c, "fs/readFile",
                                                "{\"path\":\"%s\",\"sandbox\":{\"version\":1,\"rules\":["
                                                "{\"path\":\"/\",\"access\":\"write\",\"why\":\"call\"},"
                                                "{\"path\":\"%s/other.txt\",\"access\":\"deny\",\"why\":\"call\"}]}}",
                                                p, mnt);
    g_autoptr (JsonNode) ok = test_client_callf (c, "fs/readFile", "{\"path\":\"%s\"}", q);
    if (test_answer_result (r) != NULL)
      g_string_append (bad, "  fs/readFile OTHER.TXT under a sandbox denying other.txt: read\n");
    if (test_answer_result (ok) == NULL)
      g_string_append_printf (bad, "  fs/readFile normal.txt: %s\n", test_answer_error_message (ok));
  }
  test_client_free (c);
  test_server_stop (server);
  if (bad->len > 0)
    fail_msg ("through the remote API, on a host that folds names:\n%s", bad->str);
  assert_host_unchanged (backing);
}

/* `fusebox check` names the folding filesystem under the workspace and
 * what fusebox does about it; a workspace without one says so. */
RFX_CASE (test_check_reports)
{
  g_autofree char *backing = NULL;
  g_autofree char *mnt = mount_foldfs (fx, NULL, &backing);
  g_autofree char *want = g_strdup_printf ("OK    case-folding names: %s (fuse.fb-foldfs) may fold names: ", mnt);
  g_autofree char *want_plain = NULL;
  const char *argv[] = { test_bin (), "check", "--workspace", fx->ws, NULL };
  const char *argv_plain[] = { test_bin (), "check", "--workspace", fx->home, NULL };
  g_autofree char *out = NULL;
  g_autofree char *out_plain = NULL;
  int status = 0;

  if (!g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL, &status, NULL))
    fail_msg ("can't run %s check", test_bin ());
  if (strstr (out, want) == NULL || strstr (out, "shows each entry only under its on-disk spelling") == NULL)
    fail_msg ("`fusebox check --workspace %s` does not report %s folding names:\n%s", fx->ws, mnt, out);
  if (!g_spawn_sync (NULL, (char **)argv_plain, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out_plain, NULL, &status,
                     NULL))
    fail_msg ("can't run %s check", test_bin ());
  want_plain = g_strdup_printf ("OK    case-folding names: nothing under %s folds names", fx->home);
  if (strstr (out_plain, want_plain) == NULL && strstr (out_plain, "may fold names") == NULL)
    fail_msg ("`fusebox check --workspace %s` says nothing of folding:\n%s", fx->home, out_plain);
}

/* A fold test: it may mount a folding filesystem, which its teardown
 * unmounts. */
#define FOLD_TEST(f) cmocka_unit_test_setup_teardown (f, rfx_setup, fold_teardown)

RFX_DEFINE_MAIN (probe_main, NULL, FOLD_TEST (test_case_variants_run), FOLD_TEST (test_unicode_variants_run),
                 FOLD_TEST (test_trailing_dots_run), FOLD_TEST (test_inode_per_name_run),
                 FOLD_TEST (test_remembered_absence_run), FOLD_TEST (test_alias_after_no_run),
                 FOLD_TEST (test_tmpfs_casefold_run), FOLD_TEST (test_case_variants_serve),
                 FOLD_TEST (test_check_reports))
