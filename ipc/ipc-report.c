/* fusebox — the auditor's summary of an access log (`fusebox report`).
 *
 * What a run changed (created, written, renamed, deleted, other changes),
 * what it read, what the policy refused (by rule and by process) and
 * whether the log itself is whole (seq gaps, bad or truncated lines).
 *
 * How records are read (the view's conventions, fs/fs-event.h):
 *  - only allowed accesses that succeeded (errno 0) count as changes;
 *  - rename and link: path is the old name, target the new one; symlink:
 *    path is the new link;
 *  - bytes come from "close" records (summed per path over all handles).
 * A record that stands for repeated refusals (its "repeat" member, folded
 * by the writer: ipc-log.c) counts as as many denials as its count, and a
 * "notice" record (the log reached its budget) is reported, not counted.
 *
 * Memory grows with the number of distinct paths, not of records; denial
 * examples are capped. */
#include "ipc/ipc-private.h"
#include "policy/util.h"

#include <string.h>

#define MAX_EXAMPLES 5
#define PLURAL(n) ((n) == 1 ? "" : "s")

typedef struct
{
  const char *path;
  gint64 bytes;
  guint64 count;
  GPtrArray *ops; /* distinct op names, for "other changes" and "created" */
} FileEntry;

typedef struct
{
  const char *from;
  const char *to;
} Rename;

typedef struct
{
  const char *key;
  JsonNode *rule; /* the record's "rule" member (index, name or null) */
  const char *origin;
  const char *why;
  const char *comm;
  gint64 pid;
  guint64 count;
  GHashTable *decisions; /* name -> count */
  GPtrArray *examples;   /* distinct paths, at most MAX_EXAMPLES */
} Group;

/* One host the sandbox asked the network proxy for (connect and
 * disconnect records). */
typedef struct
{
  const char *host;
  guint64 connections; /* made */
  guint64 failed;      /* allowed, but the host could not be reached */
  guint64 denials;
  gint64 bytes_received, bytes_sent;
} NetHost;

typedef struct
{
  const char *run;
  gint64 first_seq; /* the lowest seq, -1 none */
  gint64 last_seq;  /* the highest */
  guint64 records;
  guint64 seq_records; /* of them, with a seq: each seq once (the reader drops repeats) */
  guint64 unordered;   /* seq not above the previous one */
} RunInfo;

/* The seq numbers missing between RI's first and last: the records of a
 * log may come out of order (rotated files read in the order written, two
 * runs in one log), so what is missing is counted once all are in. */
static guint64
run_gaps (const RunInfo *ri)
{
  guint64 span = ri->first_seq > 0 ? (guint64)(ri->last_seq - ri->first_seq + 1) : 0;

  return span > ri->seq_records ? span - ri->seq_records : 0;
}

struct FbReport
{
  GStringChunk *strings; /* every name and path below but first_ts and last_ts, each once */
  GHashTable *created, *written, *deleted, *read, *other; /* path -> FileEntry* */
  GPtrArray *renamed;                                     /* Rename* in log order */
  GHashTable *by_rule, *by_process;                       /* key -> Group* */
  GPtrArray *runs;                                        /* RunInfo* in order of appearance */
  GHashTable *ops;                                        /* op -> guint64* */
  GHashTable *decisions;                                  /* decision -> guint64* */
  GHashTable *network;                                    /* host -> NetHost* */
  guint64 records, allowed, denied, failed;
  guint64 repeat_records; /* records that stand for repeated refusals */
  guint64 repeated;       /* the refusals they stand for */
  gboolean log_full;      /* a "log-full" notice: the run was stopped */
  guint64 not_written;    /* records past the budget, counted by the notices */
  guint64 shares_full;    /* "log-share-full" notices: processes of serve stopped */
  gint64 first_us, last_us;
  char *first_ts, *last_ts;
  FbLogReaderStats reader;
  /* fb_report_expect: the run whose run.json counts its records, and how
   * many (-1: none known) */
  char *expect_run;
  gint64 expect_records;
  const char *expect_none; /* fb_report_expect_none: why nothing is known, or NULL */
  char *expect_dir;
};

static void
file_entry_free (gpointer p)
{
  FileEntry *e = p;

  g_ptr_array_unref (e->ops);
  g_free (e);
}

static void
group_free (gpointer p)
{
  Group *g = p;

  if (g->rule != NULL)
    json_node_unref (g->rule);
  g_hash_table_unref (g->decisions);
  g_ptr_array_unref (g->examples);
  g_free (g);
}

static GHashTable *
file_table (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, NULL, file_entry_free);
}

/* A table of names (in r->strings) to counts. */
static GHashTable *
count_table (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
}

FbReport *
fb_report_new (void)
{
  FbReport *r = g_new0 (FbReport, 1);

  r->strings = g_string_chunk_new (4096);
  r->expect_records = -1;
  r->created = file_table ();
  r->written = file_table ();
  r->deleted = file_table ();
  r->read = file_table ();
  r->other = file_table ();
  r->renamed = g_ptr_array_new_with_free_func (g_free);
  r->by_rule = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, group_free);
  r->by_process = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, group_free);
  r->runs = g_ptr_array_new_with_free_func (g_free);
  r->ops = count_table ();
  r->decisions = count_table ();
  r->network = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
  return r;
}

void
fb_report_free (FbReport *r)
{
  if (r == NULL)
    return;
  g_hash_table_unref (r->created);
  g_hash_table_unref (r->written);
  g_hash_table_unref (r->deleted);
  g_hash_table_unref (r->read);
  g_hash_table_unref (r->other);
  g_ptr_array_unref (r->renamed);
  g_hash_table_unref (r->by_rule);
  g_hash_table_unref (r->by_process);
  g_ptr_array_unref (r->runs);
  g_hash_table_unref (r->ops);
  g_hash_table_unref (r->decisions);
  g_hash_table_unref (r->network);
  g_free (r->first_ts);
  g_free (r->expect_run);
  g_free (r->expect_dir);
  g_free (r->last_ts);
  g_string_chunk_free (r->strings);
  g_free (r);
}

void
fb_report_set_reader_stats (FbReport *r, const FbLogReaderStats *stats)
{
  r->reader = *stats;
}

void
fb_report_expect (FbReport *r, const char *run, gint64 records)
{
  g_free (r->expect_run);
  r->expect_run = g_strdup (run);
  r->expect_records = records;
}

void
fb_report_expect_none (FbReport *r, const char *dir, const char *why)
{
  g_free (r->expect_dir);
  r->expect_dir = g_strdup (dir);
  r->expect_none = why;
}

/* Whether the log holds other than what the run's run.json counts: fewer
 * or more records of the run, or a last seq other than that count (the
 * writer's seq starts at 1 and has no gaps).  A run.json that counts none
 * says nothing. */
static bool
expect_mismatch (FbReport *r, guint64 *ret_held)
{
  *ret_held = 0;
  if (r->expect_run == NULL || r->expect_records < 0)
    return false;
  for (guint i = 0; i < r->runs->len; i++)
    {
      RunInfo *ri = r->runs->pdata[i];

      if (strcmp (ri->run, r->expect_run) == 0)
        {
          *ret_held = ri->records;
          return ri->records != (guint64)r->expect_records || ri->last_seq != r->expect_records;
        }
    }
  return r->expect_records != 0;
}

/* --- collecting -------------------------------------------------------- */

/* S kept in the report's strings (once however often it comes); NULL for
 * NULL. */
static const char *
intern (FbReport *r, const char *s)
{
  return s != NULL ? g_string_chunk_insert_const (r->strings, s) : NULL;
}

/* T's value for KEY, made by MAKE (given KEY interned: the table's key)
 * when T has none yet. */
static gpointer
table_get (FbReport *r, GHashTable *t, const char *key, gpointer (*make) (const char *key))
{
  gpointer v = g_hash_table_lookup (t, key);

  if (v == NULL)
    {
      const char *k = intern (r, key);

      v = make (k);
      g_hash_table_insert (t, (char *)k, v);
    }
  return v;
}

static gpointer
counter_new (const char *key)
{
  return g_new0 (guint64, 1);
}

static void
count_n (FbReport *r, GHashTable *t, const char *key, guint64 by)
{
  guint64 *n = table_get (r, t, key, counter_new);

  (*n) += by;
}

static gpointer
file_entry_new (const char *path)
{
  FileEntry *e = g_new0 (FileEntry, 1);

  e->path = path;
  e->ops = g_ptr_array_new ();
  return e;
}

static FileEntry *
file_entry (FbReport *r, GHashTable *t, const char *path)
{
  return table_get (r, t, path, file_entry_new);
}

/* S added to A (of strings in r->strings) unless A holds it already. */
static void
add_distinct (FbReport *r, GPtrArray *a, const char *s)
{
  for (guint i = 0; i < a->len; i++)
    if (strcmp (a->pdata[i], s) == 0)
      return;
  g_ptr_array_add (a, (char *)intern (r, s));
}

static void
add_op (FbReport *r, FileEntry *e, const char *op)
{
  add_distinct (r, e->ops, op);
}

/* WEIGHT more refusals of G, with PATH among its examples. */
static void
group_add (FbReport *r, Group *g, const char *decision, const char *path, guint64 weight)
{
  g->count += weight;
  count_n (r, g->decisions, decision != NULL ? decision : "?", weight);
  if (path != NULL && g->examples->len < MAX_EXAMPLES)
    add_distinct (r, g->examples, path);
}

static gpointer
group_new (const char *key)
{
  Group *g = g_new0 (Group, 1);

  g->key = key;
  g->decisions = count_table ();
  g->examples = g_ptr_array_new ();
  return g;
}

static Group *
group_get (FbReport *r, GHashTable *t, const char *key)
{
  return table_get (r, t, key, group_new);
}

static RunInfo *
run_info (FbReport *r, const char *run)
{
  const char *key = run != NULL ? run : "";

  for (guint i = 0; i < r->runs->len; i++)
    {
      RunInfo *ri = r->runs->pdata[i];
      if (strcmp (ri->run, key) == 0)
        return ri;
    }
  RunInfo *ri = g_new0 (RunInfo, 1);
  ri->run = intern (r, key);
  ri->first_seq = -1;
  ri->last_seq = -1;
  g_ptr_array_add (r->runs, ri);
  return ri;
}

/* What an allowed record changed or read, by what its operation does
 * (fs/fs-event.c); an operation this fusebox does not know is filed by its
 * access and bytes alone. */
static void
add_change (FbReport *r, JsonObject *o, const char *op, const char *path, const char *target, const char *access)
{
  gint64 bytes_read = fb_json_member_int (o, "bytes_read", 0);
  gint64 bytes_written = fb_json_member_int (o, "bytes_written", 0);
  FbOp known = FB_OP_LOOKUP;
  gboolean is_known = fb_op_from_string (op, &known);
  FbOpEffect effect = is_known ? fb_op_info (known)->effect : FB_OP_EFFECT_OBSERVE;
  gboolean handle = effect == FB_OP_EFFECT_HANDLE;
  gboolean closes = is_known && known == FB_OP_CLOSE;
  gboolean classified = FALSE;
  FbAccess asked = FB_ACCESS_STAT;
  /* an access this fusebox does not know changes nothing it can tell */
  const FbAccessInfo *ai = access != NULL && fb_access_from_string (access, &asked) ? &fb_access_table[asked] : NULL;

  if (path == NULL)
    return;
  switch (effect)
    {
      case FB_OP_EFFECT_CONNECT:
        return; /* a connection's path is "HOST:PORT", no file's */
      case FB_OP_EFFECT_CREATE:
      case FB_OP_EFFECT_LINK:
        {
          /* what a link makes is its target */
          const char *made = effect == FB_OP_EFFECT_LINK ? target : path;

          if (made == NULL)
            break;
          add_op (r, file_entry (r, r->created, made), op);
          classified = TRUE;
        }
        break;
      case FB_OP_EFFECT_RENAME:
        if (target == NULL)
          break;
        {
          Rename *rn = g_new0 (Rename, 1);

          rn->from = intern (r, path);
          rn->to = intern (r, target);
          g_ptr_array_add (r->renamed, rn);
        }
        classified = TRUE;
        break;
      case FB_OP_EFFECT_DELETE:
        add_op (r, file_entry (r, r->deleted, path), op);
        classified = TRUE;
        break;
      case FB_OP_EFFECT_OBSERVE:
      case FB_OP_EFFECT_HANDLE:
      case FB_OP_EFFECT_WRITE:
      case FB_OP_EFFECT_ATTR:
        break;
    }

  if (effect == FB_OP_EFFECT_WRITE || bytes_written > 0 || (handle && ai != NULL && ai->handle_writes))
    {
      FileEntry *e = file_entry (r, r->written, path);

      /* "handles" counts closes: an "open" record of the same handle
       * (level opens and above) must not count it twice. */
      if (closes)
        e->count++;
      e->bytes += MAX (bytes_written, 0);
      add_op (r, e, op);
      classified = TRUE;
    }
  if (bytes_read > 0 || (handle && ai != NULL && ai->handle_reads))
    {
      FileEntry *e = file_entry (r, r->read, path);

      if (closes)
        e->count++;
      e->bytes += MAX (bytes_read, 0);
      classified = TRUE;
    }
  if (!classified && ai != NULL && ai->changes && !handle)
    add_op (r, file_entry (r, r->other, path), op);
}

static gpointer
net_host_new (const char *host)
{
  NetHost *h = g_new0 (NetHost, 1);

  h->host = host;
  return h;
}

/* A connection through the network proxy, filed by the host it asked for. */
static void
add_network (FbReport *r, JsonObject *o, FbOp op, const char *decision, gint64 err, guint64 weight)
{
  const char *host = fb_json_member_string (o, "host");
  NetHost *h;

  if (host == NULL)
    host = fb_json_member_string (o, "path");
  if (host == NULL)
    host = "?";
  h = table_get (r, r->network, host, net_host_new);
  if (op == FB_OP_DISCONNECT)
    {
      h->bytes_received += MAX (fb_json_member_int (o, "bytes_read", 0), 0);
      h->bytes_sent += MAX (fb_json_member_int (o, "bytes_written", 0), 0);
    }
  else if (fb_decision_name_is_refusal (decision))
    h->denials += weight;
  else if (err != 0)
    h->failed++;
  else
    h->connections++;
}

void
fb_report_add_record (FbReport *r, JsonObject *o)
{
  const char *op = fb_json_member_string (o, "op");
  const char *path = fb_json_member_string (o, "path");
  const char *target = fb_json_member_string (o, "target");
  const char *access = fb_json_member_string (o, "access");
  const char *decision = fb_json_member_string (o, "decision");
  const char *ts = fb_json_member_string (o, "ts");
  const char *notice = fb_json_member_string (o, "notice");
  gint64 seq = fb_json_member_int (o, "seq", -1);
  gint64 err = fb_json_member_int (o, "errno", 0);
  gint64 us;
  RunInfo *ri = run_info (r, fb_json_member_string (o, "run"));
  JsonNode *repeat = json_object_get_member (o, "repeat");
  guint64 weight = 1;

  /* Logs are read back from disk: any member may be missing or mistyped. */
  if (op == NULL)
    op = "?";
  if (repeat != NULL && JSON_NODE_HOLDS_OBJECT (repeat))
    {
      gint64 n = fb_json_member_int (json_node_get_object (repeat), "count", 1);

      weight = n > 0 ? (guint64)n : 1;
    }
  r->records++;
  ri->records++;
  if (seq > 0)
    {
      if (ri->first_seq < 0 || seq < ri->first_seq)
        ri->first_seq = seq;
      if (seq <= ri->last_seq)
        ri->unordered++;
      if (seq > ri->last_seq)
        ri->last_seq = seq;
      ri->seq_records++;
    }
  if (ts != NULL && fb_ipc_parse_time (ts, &us))
    {
      if (r->first_ts == NULL || us < r->first_us)
        {
          g_free (r->first_ts);
          r->first_ts = g_strdup (ts);
          r->first_us = us;
        }
      if (r->last_ts == NULL || us > r->last_us)
        {
          g_free (r->last_ts);
          r->last_ts = g_strdup (ts);
          r->last_us = us;
        }
    }
  if (notice != NULL)
    {
      /* the writer's own word, not an access */
      if (strcmp (notice, "log-full") == 0)
        r->log_full = TRUE;
      else if (strcmp (notice, "log-share-full") == 0)
        r->shares_full++; /* a process of serve that used up its share of the budget */
      else
        return;
      r->not_written += (guint64)MAX (fb_json_member_int (o, "records_not_written", 0), 0);
      return;
    }
  count_n (r, r->ops, op, weight);
  count_n (r, r->decisions, decision != NULL ? decision : "?", weight);
  {
    FbOp known;

    if (fb_op_from_string (op, &known) && fb_op_info (known)->effect == FB_OP_EFFECT_CONNECT)
      add_network (r, o, known, decision, err, weight);
  }

  if (!fb_decision_name_is_refusal (decision))
    {
      r->allowed++;
      if (err != 0)
        r->failed++;
      else
        add_change (r, o, op, path, target, access);
      return;
    }

  r->denied += weight;
  if (repeat != NULL)
    {
      r->repeat_records++;
      r->repeated += weight;
    }
  {
    JsonNode *rule = json_object_get_member (o, "rule");
    const char *origin = fb_json_member_string (o, "rule_origin");
    const char *why = fb_json_member_string (o, "why");
    const char *comm = fb_json_member_string (o, "comm");
    gint64 pid = fb_json_member_int (o, "pid", 0);
    g_autofree char *rule_text = rule != NULL ? json_to_string (rule, FALSE) : g_strdup ("null");
    g_autofree char *rkey = g_strdup_printf ("%s\x1f%s", rule_text, origin != NULL ? origin : "");
    g_autofree char *pkey = g_strdup_printf ("%s\x1f%" G_GINT64_FORMAT, comm != NULL ? comm : "?", pid);
    Group *g = group_get (r, r->by_rule, rkey);
    Group *p = group_get (r, r->by_process, pkey);

    if (g->count == 0)
      {
        g->rule = rule != NULL ? json_node_copy (rule) : json_node_new (JSON_NODE_NULL);
        g->origin = intern (r, origin);
        g->why = intern (r, why);
      }
    group_add (r, g, decision, path, weight);

    if (p->count == 0)
      {
        p->comm = intern (r, comm);
        p->pid = pid;
      }
    group_add (r, p, decision, path, weight);
  }
}

/* --- output ----------------------------------------------------------- */

static int
file_entry_cmp (gconstpointer a, gconstpointer b)
{
  return strcmp ((*(FileEntry *const *)a)->path, (*(FileEntry *const *)b)->path);
}

/* T's values (FileEntry*, Group*), in CMP's order. */
static GPtrArray *
sorted_values (GHashTable *t, GCompareFunc cmp)
{
  GPtrArray *a = g_ptr_array_new ();
  GHashTableIter it;
  gpointer v;

  g_hash_table_iter_init (&it, t);
  while (g_hash_table_iter_next (&it, NULL, &v))
    g_ptr_array_add (a, v);
  g_ptr_array_sort (a, cmp);
  return a;
}

/* Most denials first; ties in key order, so the output is stable. */
static int
group_cmp (gconstpointer a, gconstpointer b)
{
  const Group *x = *(Group *const *)a;
  const Group *y = *(Group *const *)b;

  if (x->count != y->count)
    return x->count > y->count ? -1 : 1;
  return strcmp (x->key, y->key);
}

static int
str_cmp (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

static GPtrArray *
sorted_keys (GHashTable *t)
{
  GPtrArray *a = g_ptr_array_new ();
  GHashTableIter it;
  gpointer k;

  g_hash_table_iter_init (&it, t);
  while (g_hash_table_iter_next (&it, &k, NULL))
    g_ptr_array_add (a, k);
  g_ptr_array_sort (a, str_cmp);
  return a;
}

static guint64
counter (GHashTable *t, const char *key)
{
  guint64 *n = g_hash_table_lookup (t, key);
  return n != NULL ? *n : 0;
}

static guint64
total_gaps (FbReport *r)
{
  guint64 n = 0;

  for (guint i = 0; i < r->runs->len; i++)
    {
      guint64 g = run_gaps (r->runs->pdata[i]);

      n = n > G_MAXUINT64 - g ? G_MAXUINT64 : n + g; /* a log's own seqs can't wrap it to "whole" */
    }
  return n;
}

/* T's values, sorted by CMP, as the array NAME: an object each, whose
 * members MEMBERS writes. */
static void
json_sorted_objects (JsonBuilder *b, const char *name, GHashTable *t, GCompareFunc cmp,
                     void (*members) (JsonBuilder *b, gconstpointer value))
{
  g_autoptr (GPtrArray) values = sorted_values (t, cmp);

  json_builder_set_member_name (b, name);
  json_builder_begin_array (b);
  for (guint i = 0; i < values->len; i++)
    {
      json_builder_begin_object (b);
      members (b, values->pdata[i]);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
}

/* A file that was written or read: how much, through how many handles. */
static void
json_file_bytes (JsonBuilder *b, gconstpointer value)
{
  const FileEntry *e = value;

  fb_json_builder_add_string_member (b, "path", e->path);
  fb_json_builder_add_int_member (b, "bytes", e->bytes);
  fb_json_builder_add_int_member (b, "handles", (gint64)e->count);
}

/* A file that was created, deleted or otherwise touched: by which ops. */
static void
json_file_ops (JsonBuilder *b, gconstpointer value)
{
  const FileEntry *e = value;

  fb_json_builder_add_string_member (b, "path", e->path);
  fb_json_builder_add_strings_member (b, "ops", (const char *const *)e->ops->pdata, e->ops->len);
}

static void
json_counts (JsonBuilder *b, const char *name, GHashTable *t)
{
  g_autoptr (GPtrArray) keys = sorted_keys (t);

  json_builder_set_member_name (b, name);
  json_builder_begin_object (b);
  for (guint i = 0; i < keys->len; i++)
    fb_json_builder_add_int_member (b, keys->pdata[i], (gint64)counter (t, keys->pdata[i]));
  json_builder_end_object (b);
}

static int
net_host_cmp (gconstpointer a, gconstpointer b)
{
  return strcmp ((*(NetHost *const *)a)->host, (*(NetHost *const *)b)->host);
}

static void
json_net_host (JsonBuilder *b, gconstpointer value)
{
  const NetHost *h = value;

  fb_json_builder_add_string_member (b, "host", h->host);
  fb_json_builder_add_int_member (b, "connections", (gint64)h->connections);
  fb_json_builder_add_int_member (b, "failed", (gint64)h->failed);
  fb_json_builder_add_int_member (b, "denials", (gint64)h->denials);
  fb_json_builder_add_int_member (b, "bytes_received", h->bytes_received);
  fb_json_builder_add_int_member (b, "bytes_sent", h->bytes_sent);
}

/* The counts every group has, after what it is keyed by. */
static void
json_group_counts (JsonBuilder *b, const Group *g)
{
  fb_json_builder_add_int_member (b, "count", (gint64)g->count);
  json_counts (b, "decisions", g->decisions);
  fb_json_builder_add_strings_member (b, "examples", (const char *const *)g->examples->pdata, g->examples->len);
}

static void
json_rule_group (JsonBuilder *b, gconstpointer value)
{
  const Group *g = value;

  json_builder_set_member_name (b, "rule");
  json_builder_add_value (b, json_node_copy (g->rule));
  fb_json_builder_add_string_member (b, "rule_origin", g->origin);
  fb_json_builder_add_string_member (b, "why", g->why);
  json_group_counts (b, g);
}

static void
json_process_group (JsonBuilder *b, gconstpointer value)
{
  const Group *g = value;

  fb_json_builder_add_string_member (b, "comm", g->comm);
  fb_json_builder_add_int_member (b, "pid", g->pid);
  json_group_counts (b, g);
}

JsonNode *
fb_report_to_json (FbReport *r)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  fb_json_builder_add_int_member (b, "version", 1);

  json_builder_set_member_name (b, "runs");
  json_builder_begin_array (b);
  for (guint i = 0; i < r->runs->len; i++)
    {
      RunInfo *ri = r->runs->pdata[i];

      json_builder_begin_object (b);
      fb_json_builder_add_string_member (b, "run", ri->run[0] != '\0' ? ri->run : NULL);
      fb_json_builder_add_int_member (b, "records", (gint64)ri->records);
      fb_json_builder_add_int_member (b, "seq_first", ri->first_seq);
      fb_json_builder_add_int_member (b, "seq_last", ri->last_seq);
      fb_json_builder_add_int_member (b, "gaps", (gint64)run_gaps (ri));
      json_builder_end_object (b);
    }
  json_builder_end_array (b);

  json_builder_set_member_name (b, "files");
  json_builder_begin_object (b);
  json_sorted_objects (b, "created", r->created, file_entry_cmp, json_file_ops);
  json_sorted_objects (b, "written", r->written, file_entry_cmp, json_file_bytes);
  json_builder_set_member_name (b, "renamed");
  json_builder_begin_array (b);
  for (guint i = 0; i < r->renamed->len; i++)
    {
      Rename *rn = r->renamed->pdata[i];

      json_builder_begin_object (b);
      fb_json_builder_add_string_member (b, "from", rn->from);
      fb_json_builder_add_string_member (b, "to", rn->to);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_sorted_objects (b, "deleted", r->deleted, file_entry_cmp, json_file_ops);
  json_sorted_objects (b, "read", r->read, file_entry_cmp, json_file_bytes);
  json_sorted_objects (b, "other", r->other, file_entry_cmp, json_file_ops);
  json_builder_end_object (b);

  /* only when the proxy logged something: a run without it reports as before */
  if (g_hash_table_size (r->network) > 0)
    json_sorted_objects (b, "network", r->network, net_host_cmp, json_net_host);

  json_builder_set_member_name (b, "denials");
  json_builder_begin_object (b);
  json_sorted_objects (b, "by_rule", r->by_rule, group_cmp, json_rule_group);
  json_sorted_objects (b, "by_process", r->by_process, group_cmp, json_process_group);
  json_builder_end_object (b);

  json_builder_set_member_name (b, "totals");
  json_builder_begin_object (b);
  fb_json_builder_add_int_member (b, "records", (gint64)r->records);
  fb_json_builder_add_int_member (b, "allowed", (gint64)r->allowed);
  fb_json_builder_add_int_member (b, "denied", (gint64)r->denied);
  fb_json_builder_add_int_member (b, "failed", (gint64)r->failed);
  fb_json_builder_add_int_member (b, "repeat_records", (gint64)r->repeat_records);
  fb_json_builder_add_int_member (b, "repeated_denials", (gint64)r->repeated);
  json_builder_set_member_name (b, "log_full");
  json_builder_add_boolean_value (b, r->log_full);
  fb_json_builder_add_int_member (b, "records_not_written", (gint64)r->not_written);
  fb_json_builder_add_int_member (b, "processes_stopped_by_share", (gint64)r->shares_full);
  json_counts (b, "decisions", r->decisions);
  json_counts (b, "ops", r->ops);
  fb_json_builder_add_int_member (b, "gaps", (gint64)total_gaps (r));
  fb_json_builder_add_int_member (b, "duplicates", (gint64)r->reader.duplicates);
  fb_json_builder_add_int_member (b, "bad_lines", (gint64)r->reader.bad_lines);
  fb_json_builder_add_int_member (b, "truncated_lines", (gint64)r->reader.truncated);
  fb_json_builder_add_int_member (b, "linked_files", (gint64)r->reader.linked);
  {
    guint64 held;
    bool mismatch = expect_mismatch (r, &held);

    json_builder_set_member_name (b, "run_json_records");
    if (r->expect_records >= 0)
      json_builder_add_int_value (b, r->expect_records);
    else
      json_builder_add_null_value (b);
    json_builder_set_member_name (b, "run_json_mismatch");
    json_builder_add_boolean_value (b, mismatch);
    fb_json_builder_add_string_member (b, "run_json_check",
                                       r->expect_none != NULL  ? r->expect_none
                                       : r->expect_records < 0 ? "not-a-run-directory"
                                       : mismatch              ? "mismatch"
                                                               : "match");
  }
  fb_json_builder_add_string_member (b, "first_ts", r->first_ts);
  fb_json_builder_add_string_member (b, "last_ts", r->last_ts);
  json_builder_set_member_name (b, "span_seconds");
  json_builder_add_double_value (b, r->first_ts != NULL ? (double)(r->last_us - r->first_us) / G_USEC_PER_SEC : 0.0);
  json_builder_end_object (b);

  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* --- text ------------------------------------------------------------ */

static void
text_safe (GString *out, const char *s)
{
  if (s == NULL)
    s = "?";
  fb_text_append_safe (out, s, strlen (s));
}

/* Right-aligned in 10 columns.  Not g_format_size: its U+00A0 breaks
 * byte-counted alignment and grep. */
/* ", KEY N": a counter whose key (an op or decision name) comes from the log. */
static void
text_count (GString *out, gboolean first, const char *key, guint64 n)
{
  if (!first)
    g_string_append (out, ", ");
  text_safe (out, key);
  g_string_append_printf (out, " %" G_GUINT64_FORMAT, n);
}

static void
text_bytes (GString *out, gint64 bytes)
{
  static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
  double v = (double)MAX (bytes, 0);
  guint u = 0;

  if (bytes < 1024)
    {
      g_string_append_printf (out, "%8" G_GINT64_FORMAT " B", MAX (bytes, 0));
      return;
    }
  v /= 1024;
  while (v >= 1024 && u + 1 < G_N_ELEMENTS (units))
    {
      v /= 1024;
      u++;
    }
  g_string_append_printf (out, "%6.1f %s", v, units[u]);
}

static void
text_ops (GString *out, GPtrArray *ops)
{
  g_string_append (out, "  (");
  for (guint j = 0; j < ops->len; j++)
    {
      if (j > 0)
        g_string_append (out, ", ");
      text_safe (out, ops->pdata[j]);
    }
  g_string_append_c (out, ')');
}

static void
text_files (GString *out, const char *title, GHashTable *t, gboolean bytes, gboolean ops)
{
  g_autoptr (GPtrArray) files = sorted_values (t, file_entry_cmp);

  g_string_append_printf (out, "\n%s (%u)\n", title, files->len);
  if (files->len == 0)
    g_string_append (out, "  none\n");
  for (guint i = 0; i < files->len; i++)
    {
      FileEntry *e = files->pdata[i];

      g_string_append (out, "  ");
      if (bytes)
        {
          text_bytes (out, e->bytes);
          g_string_append (out, "  ");
        }
      text_safe (out, e->path);
      if (ops)
        text_ops (out, e->ops);
      g_string_append_c (out, '\n');
    }
}

static void
text_decisions (GString *out, GHashTable *t)
{
  g_autoptr (GPtrArray) keys = sorted_keys (t);

  for (guint i = 0; i < keys->len; i++)
    text_count (out, i == 0, keys->pdata[i], counter (t, keys->pdata[i]));
}

static void
text_rule_head (GString *out, Group *g)
{
  g_autofree char *rule = json_to_string (g->rule, FALSE);

  if (JSON_NODE_HOLDS_VALUE (g->rule) && json_node_get_value_type (g->rule) == G_TYPE_INT64)
    g_string_append_printf (out, "rule %s", rule);
  else if (JSON_NODE_HOLDS_VALUE (g->rule) && json_node_get_value_type (g->rule) == G_TYPE_STRING)
    text_safe (out, json_node_get_string (g->rule));
  else
    g_string_append (out, "(no rule)");
  if (g->origin != NULL)
    {
      g_string_append (out, " at ");
      text_safe (out, g->origin);
    }
  g_string_append (out, ": ");
  text_safe (out, g->why != NULL ? g->why : "");
  g_string_append (out, "  [");
}

static void
text_process_head (GString *out, Group *g)
{
  text_safe (out, g->comm != NULL ? g->comm : "?");
  g_string_append_printf (out, "[%" G_GINT64_FORMAT "]  [", g->pid);
}

/* The groups of T, most denials first: the count, what HEAD writes (what
 * the group is keyed by), the decisions and the examples. */
static void
text_groups (GString *out, GHashTable *t, void (*head) (GString *out, Group *g))
{
  g_autoptr (GPtrArray) groups = sorted_values (t, group_cmp);

  if (groups->len == 0)
    g_string_append (out, "  none\n");
  for (guint i = 0; i < groups->len; i++)
    {
      Group *g = groups->pdata[i];

      g_string_append_printf (out, "  %6" G_GUINT64_FORMAT "  ", g->count);
      head (out, g);
      text_decisions (out, g->decisions);
      g_string_append (out, "]\n");
      for (guint j = 0; j < g->examples->len; j++)
        {
          g_string_append (out, "      ");
          text_safe (out, g->examples->pdata[j]);
          g_string_append_c (out, '\n');
        }
      if (g->count > g->examples->len && g->examples->len == MAX_EXAMPLES)
        g_string_append (out, "      ...\n");
    }
}

static void
text_duration (GString *out, double secs)
{
  guint64 s = (guint64)secs;

  if (s >= 3600)
    g_string_append_printf (out, "%" G_GUINT64_FORMAT "h %02um %02us", s / 3600, (guint)(s % 3600 / 60),
                            (guint)(s % 60));
  else if (s >= 60)
    g_string_append_printf (out, "%um %02us", (guint)(s / 60), (guint)(s % 60));
  else
    g_string_append_printf (out, "%.3fs", secs);
}

char *
fb_report_to_text (FbReport *r)
{
  GString *out = g_string_new (NULL);
  guint64 gaps = total_gaps (r);

  g_string_append (out, "fusebox report: ");
  if (r->runs->len == 0)
    g_string_append (out, "no records\n");
  for (guint i = 0; i < r->runs->len; i++)
    {
      RunInfo *ri = r->runs->pdata[i];

      g_string_append_printf (out, "%srun ", i > 0 ? "                " : "");
      text_safe (out, ri->run[0] != '\0' ? ri->run : "(none)");
      g_string_append_printf (
        out, ": %" G_GUINT64_FORMAT " record%s, seq %" G_GINT64_FORMAT "-%" G_GINT64_FORMAT "%s\n", ri->records,
        PLURAL (ri->records), ri->first_seq, ri->last_seq, run_gaps (ri) > 0 ? " WITH GAPS" : "");
    }
  if (gaps > 0 || r->reader.bad_lines > 0 || r->reader.truncated > 0)
    g_string_append_printf (out,
                            "WARNING: the log is not whole: %" G_GUINT64_FORMAT
                            " record%s missing (seq gaps), %" G_GUINT64_FORMAT " unreadable line%s, %" G_GUINT64_FORMAT
                            " truncated line%s\n",
                            gaps, PLURAL (gaps), r->reader.bad_lines, PLURAL (r->reader.bad_lines), r->reader.truncated,
                            PLURAL (r->reader.truncated));

  {
    guint64 held;

    if (expect_mismatch (r, &held))
      {
        g_string_append (out, "WARNING: run.json of run ");
        text_safe (out, r->expect_run);
        g_string_append_printf (out,
                                " counts %" G_GINT64_FORMAT " record%s written; the log holds %" G_GUINT64_FORMAT
                                " of that run: it was changed after it was written (records removed, renumbered "
                                "or added), or some of its files are gone\n",
                                r->expect_records, PLURAL (r->expect_records), held);
      }
  }
  if (r->expect_none != NULL && strcmp (r->expect_none, "missing") == 0)
    {
      g_string_append (out, "WARNING: the run directory ");
      text_safe (out, r->expect_dir);
      g_string_append (out, " has no run.json (fusebox writes one when a run starts): the log can't be checked "
                            "against the count of records it gives; it may have been removed to hide a rewrite\n");
    }
  else if (r->expect_none != NULL && strcmp (r->expect_none, "not-ended") == 0)
    {
      g_string_append (out, "NOTE: run.json in ");
      text_safe (out, r->expect_dir);
      g_string_append (out, " says the run has not ended (it runs, or its supervisor was killed): the log is not "
                            "checked against its count of records\n");
    }
  if (r->reader.linked > 0)
    g_string_append_printf (out,
                            "WARNING: %" G_GUINT64_FORMAT " of the log's files %s another name (a hard link): "
                            "whoever could write where that name is may have rewritten the records; find it "
                            "(find / -samefile FILE) and keep the log where no sandbox sees it\n",
                            r->reader.linked, r->reader.linked == 1 ? "has" : "have");
  if (r->log_full)
    g_string_append_printf (out,
                            "WARNING: the log reached its budget and the run was stopped; %" G_GUINT64_FORMAT
                            " record%s past it %s not written\n",
                            r->not_written, PLURAL (r->not_written), r->not_written == 1 ? "was" : "were");
  else if (r->shares_full > 0)
    g_string_append_printf (out,
                            "WARNING: %" G_GUINT64_FORMAT " process%s used up %s share of the log's budget and %s "
                            "stopped; %" G_GUINT64_FORMAT " record%s past %s %s not written\n",
                            r->shares_full, r->shares_full == 1 ? "" : "es", r->shares_full == 1 ? "its" : "their",
                            r->shares_full == 1 ? "was" : "were", r->not_written, PLURAL (r->not_written),
                            r->shares_full == 1 ? "it" : "them", r->not_written == 1 ? "was" : "were");

  text_files (out, "Files created", r->created, FALSE, TRUE);
  text_files (out, "Files written", r->written, TRUE, FALSE);
  g_string_append_printf (out, "\nFiles renamed (%u)\n", r->renamed->len);
  if (r->renamed->len == 0)
    g_string_append (out, "  none\n");
  for (guint i = 0; i < r->renamed->len; i++)
    {
      Rename *rn = r->renamed->pdata[i];

      g_string_append (out, "  ");
      text_safe (out, rn->from);
      g_string_append (out, " \u2192 ");
      text_safe (out, rn->to);
      g_string_append_c (out, '\n');
    }
  text_files (out, "Files deleted", r->deleted, FALSE, TRUE);
  text_files (out, "Files read", r->read, TRUE, FALSE);
  if (g_hash_table_size (r->other) > 0)
    text_files (out, "Other changes", r->other, FALSE, TRUE);
  if (g_hash_table_size (r->network) > 0)
    {
      g_autoptr (GPtrArray) hosts = sorted_keys (r->network);

      g_string_append_printf (out, "\nNetwork (%u host%s)\n", hosts->len, PLURAL (hosts->len));
      for (guint i = 0; i < hosts->len; i++)
        {
          NetHost *h = g_hash_table_lookup (r->network, hosts->pdata[i]);

          g_string_append (out, "  ");
          text_bytes (out, h->bytes_received);
          g_string_append (out, " in ");
          text_bytes (out, h->bytes_sent);
          g_string_append (out, " out  ");
          text_safe (out, h->host);
          g_string_append_printf (out, ": %" G_GUINT64_FORMAT " connection%s", h->connections, PLURAL (h->connections));
          if (h->failed > 0)
            g_string_append_printf (out, ", %" G_GUINT64_FORMAT " failed", h->failed);
          if (h->denials > 0)
            g_string_append_printf (out, ", %" G_GUINT64_FORMAT " denied", h->denials);
          g_string_append_c (out, '\n');
        }
    }

  g_string_append_printf (out, "\nDenials by rule (%" G_GUINT64_FORMAT " denial%s, %u rule%s)\n", r->denied,
                          PLURAL (r->denied), g_hash_table_size (r->by_rule), PLURAL (g_hash_table_size (r->by_rule)));
  text_groups (out, r->by_rule, text_rule_head);
  g_string_append_printf (out, "\nDenials by process (%u)\n", g_hash_table_size (r->by_process));
  text_groups (out, r->by_process, text_process_head);

  g_string_append (out, "\nTotals\n");
  g_string_append_printf (out, "  records     %" G_GUINT64_FORMAT "\n", r->records);
  g_string_append_printf (out, "  allowed     %" G_GUINT64_FORMAT " (%" G_GUINT64_FORMAT " failed on the host)\n",
                          r->allowed, r->failed);
  g_string_append_printf (out, "  denied      %" G_GUINT64_FORMAT, r->denied);
  if (r->denied > 0)
    {
      g_autoptr (GPtrArray) keys = sorted_keys (r->decisions);
      gboolean first = TRUE;

      g_string_append (out, " (");
      for (guint i = 0; i < keys->len; i++)
        {
          if (!fb_decision_name_is_refusal (keys->pdata[i]))
            continue;
          text_count (out, first, keys->pdata[i], counter (r->decisions, keys->pdata[i]));
          first = FALSE;
        }
      g_string_append_c (out, ')');
    }
  g_string_append_c (out, '\n');
  if (r->repeat_records > 0)
    g_string_append_printf (out,
                            "  repeats     %" G_GUINT64_FORMAT " record%s stand%s for %" G_GUINT64_FORMAT
                            " identical refusals (counted above)\n",
                            r->repeat_records, PLURAL (r->repeat_records), r->repeat_records == 1 ? "s" : "",
                            r->repeated);
  g_string_append (out, "  ops         ");
  text_decisions (out, r->ops);
  g_string_append_c (out, '\n');
  g_string_append_printf (out, "  seq gaps    %" G_GUINT64_FORMAT "%s\n", gaps,
                          gaps > 0 ? " (records are missing)" : "");
  if (r->reader.duplicates > 0 || r->reader.bad_lines > 0 || r->reader.truncated > 0)
    g_string_append_printf (out,
                            "  damaged     %" G_GUINT64_FORMAT " duplicate, %" G_GUINT64_FORMAT
                            " unreadable, %" G_GUINT64_FORMAT " truncated lines\n",
                            r->reader.duplicates, r->reader.bad_lines, r->reader.truncated);
  if (r->first_ts != NULL)
    {
      g_string_append (out, "  time span   ");
      text_safe (out, r->first_ts);
      g_string_append (out, " .. ");
      text_safe (out, r->last_ts);
      g_string_append (out, " (");
      text_duration (out, (double)(r->last_us - r->first_us) / G_USEC_PER_SEC);
      g_string_append (out, ")\n");
    }
  return g_string_free (out, FALSE);
}
