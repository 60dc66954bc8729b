/* fusebox — the remote API's fs/... methods, over FbView.
 *
 * Every call goes through the view of its sandbox (ipc-rpc-sandbox.c), in
 * this process, on a worker thread (ipc-rpc-pipeline.c: one request
 * of a connection at a time, in the order received, so the connection's
 * handle table needs no lock), or on the loop thread when the server has
 * no workers: the same enforcement point as the FUSE
 * adapter (docs/design.md, promise 1), logged like a FUSE access with the session
 * as the caller.  No host path is ever opened here: paths are view paths,
 * resolved one component at a time by fb_view_walk(), which follows
 * symlinks inside the view.
 *
 * Semantics follow Codex's exec-server (std::fs on the executor): readFile
 * and writeFile follow symlinks, remove removes a symlink itself, copy
 * copies a symlink as a symlink, createDirectory and remove default to
 * recursive, remove defaults to force (a missing path is not an error).
 * Results and errors are shaped as Codex's; a policy denial becomes -32050
 * (ipc-rpc-sandbox.c, fb_rpc_error_from_errno).
 *
 * Bounds: ipc-rpc.h (FB_RPC_READ_FILE_MAX, FB_RPC_DIR_ENTRIES_MAX,
 * FB_RPC_TREE_MAX, FB_RPC_TREE_DEPTH_MAX, FB_RPC_HANDLES_MAX, Codex's walk
 * limits); fs/open's handles also count against the client's share and the
 * server's budget (ipc-rpc-share.c). */
#include "ipc/ipc-rpc-private.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

/* Codex's walk limits (codex-rs/file-system). */
#define WALK_MAX_DEPTH 64
#define WALK_MAX_DIRECTORIES 10000
#define WALK_MAX_ENTRIES 50000
#define WALK_MAX_RESPONSE_BYTES (4 * 1024 * 1024)
#define WALK_ITEM_OVERHEAD 64
#define COPY_CHUNK (1024 * 1024)

typedef struct
{
  FbRpcConn *conn;
  FbRpcSandbox *sb; /* a reference, until call_end */
  FbView *view;     /* sb's */
  FbViewCaller caller;
  FbRpcDenial denial;
} Call;

static bool
call_begin (Call *c, FbRpcConn *conn, JsonObject *params, FbRpcError *error)
{
  memset (c, 0, sizeof *c);
  c->conn = conn;
  c->sb = fb_rpc_sandbox_lookup_text (conn->server, conn->session,
                                      params != NULL ? json_object_get_member (params, "sandbox") : NULL,
                                      conn->call_sandbox, conn->call_sandbox_len, error);
  if (c->sb == NULL)
    return false;
  c->view = fb_rpc_sandbox_get_view (c->sb);
  fb_rpc_conn_get_caller (conn, &c->caller);
  fb_rpc_sandbox_begin (c->sb, &c->denial);
  return true;
}

static void
call_end (Call *c)
{
  if (c->sb != NULL)
    fb_rpc_sandbox_end (c->sb);
  fb_rpc_denial_clear (&c->denial);
  /* The lookup's reference: the cache may have dropped the sandbox since. */
  g_clear_pointer (&c->sb, fb_rpc_sandbox_unref);
  c->view = NULL;
}

/* r < 0: fill ERROR from -r and what the view decided, and end the call;
 * returns NULL. */
static JsonNode *
call_fail (Call *c, FbRpcError *error, int r, const char *path)
{
  fb_rpc_error_from_errno (error, -r, &c->denial, NULL, path);
  call_end (c);
  return NULL;
}

static JsonNode *
empty_result (void)
{
  return fb_rpc_object_node (json_object_new ());
}

/* The end of METHOD's walk of the tree at PATH (fs/remove, fs/copy): r is
 * its result, -E2BIG past the tree's bounds (said with AFTER: what the
 * walk left behind). */
static JsonNode *
tree_call_end (Call *c, int r, const char *path, const char *method, const char *after, FbRpcError *error)
{
  if (r == -E2BIG)
    {
      call_end (c);
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL,
                        "%s holds more than %d entries (or is deeper than %d), %s's limit%s", path, FB_RPC_TREE_MAX,
                        FB_RPC_TREE_DEPTH_MAX, method, after);
      return NULL;
    }
  if (r < 0)
    return call_fail (c, error, r, path);
  call_end (c);
  return empty_result ();
}

static void
split_path (const char *path, char **ret_parent, char **ret_name)
{
  *ret_parent = g_path_get_dirname (path);
  *ret_name = g_path_get_basename (path);
}

/* Is NAME a plain component that create/mkdir/unlink can take? */
static bool
plain_name (const char *name)
{
  return name[0] != '\0' && strcmp (name, ".") != 0 && strcmp (name, "..") != 0 && strchr (name, '/') == NULL;
}

static bool
is_dir_node (FbViewNode *node)
{
  return S_ISDIR (fb_view_node_get_type (node));
}

/* fs/readFile and fs/open read regular files only: anything else (a
 * directory, a device, a FIFO) is -32600 with Codex's wording, which its
 * client passes on to the agent as it is. */
static bool
check_regular (FbViewNode *node, const char *path, FbRpcError *error)
{
  if (S_ISREG (fb_view_node_get_type (node)))
    return true;
  fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "path `%s` is not a file", path);
  return false;
}

/* The node of PATH's parent directory and the last component, after
 * resolving PATH's directory part in the view. */
static int
walk_parent (Call *c, const char *path, FbViewNode **ret_parent, char **ret_name)
{
  g_autofree char *dir = NULL;
  g_autofree char *name = NULL;
  int r;

  split_path (path, &dir, &name);
  if (!plain_name (name))
    return strcmp (name, "/") == 0 ? -EBUSY : -EINVAL;
  r = fb_view_walk (c->view, &c->caller, dir, 0, ret_parent);
  if (r < 0)
    return r;
  *ret_name = g_steal_pointer (&name);
  return 0;
}

/* --- fs/readFile ------------------------------------------------------------ */

static int
read_all (Call *c, FbViewFile *file, gsize max, GByteArray **ret)
{
  g_autoptr (GByteArray) data = g_byte_array_new ();
  struct stat st;
  gsize want = 64 * 1024;

  if (fb_view_file_fstat (c->view, file, &st) == 0 && st.st_size > 0)
    want = MIN ((gsize)st.st_size + 1, max + 1);
  for (;;)
    {
      gssize n;
      gsize old = data->len;
      if (data->len > max)
        return -EFBIG;
      g_byte_array_set_size (data, old + want);
      n = fb_view_read (c->view, file, data->data + old, want, (off_t)old);
      if (n < 0)
        return (int)n;
      g_byte_array_set_size (data, old + (gsize)n);
      if (n == 0)
        break;
      /* Modest steps past the size fstat gave (usually one empty read):
       * a 1 MiB step maps and unmaps fresh pages on every call. */
      want = MIN ((gsize)64 * 1024, max + 1);
    }
  if (data->len > max)
    return -EFBIG;
  *ret = g_steal_pointer (&data);
  return 0;
}

JsonNode *
fb_rpc_fs_read_file (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  g_autofree char *path = NULL;
  g_autoptr (FbViewNode) node = NULL;
  g_autoptr (GByteArray) data = NULL;
  FbViewFile *file = NULL;
  Call c;
  int r;

  if (!fb_rpc_param_path (params, "path", &path, error) || !call_begin (&c, conn, params, error))
    return NULL;
  r = fb_view_walk (c.view, &c.caller, path, 0, &node);
  if (r == 0 && !check_regular (node, path, error))
    {
      call_end (&c);
      return NULL;
    }
  if (r == 0)
    r = fb_view_open (c.view, &c.caller, node, O_RDONLY, &file, NULL);
  if (r == 0)
    {
      r = read_all (&c, file, FB_RPC_READ_FILE_MAX, &data);
      fb_view_release (c.view, file);
    }
  if (r == -EFBIG)
    {
      call_end (&c);
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL,
                        "%s is larger than fs/readFile's limit of %d bytes; read it with fs/open and fs/readBlock",
                        path, FB_RPC_READ_FILE_MAX);
      return NULL;
    }
  if (r < 0)
    return call_fail (&c, error, r, path);
  call_end (&c);
  /* Answered here, as text: base64 needs no JSON escaping, and the
   * generator would copy and scan every byte of it again; encoded straight
   * into the answer, which needs no UTF-8 check (ASCII). */
  fb_rpc_conn_send_utf8 (conn, fb_rpc_encode_result_base64 (id, "dataBase64", data->data, data->len));
  *ret_deferred = true;
  return NULL;
}

/* --- fs/writeFile ----------------------------------------------------------- */

static int
write_all (Call *c, FbViewFile *file, const guint8 *data, gsize len)
{
  gsize off = 0;

  while (off < len)
    {
      gssize n = fb_view_write (c->view, file, data + off, MIN (len - off, (gsize)FB_VIEW_IO_MAX), (off_t)off);
      if (n < 0)
        return (int)n;
      if (n == 0)
        return -EIO;
      off += (gsize)n;
    }
  return 0;
}

/* Open PATH for writing, creating it (mode 0666 & ~umask) when missing;
 * symlinks are followed, as std::fs::write does.  Not truncated here: see
 * write_replace. */
static int
open_for_write (Call *c, const char *path, mode_t mode, FbViewFile **ret_file)
{
  g_autoptr (FbViewNode) parent = NULL;
  g_autoptr (FbViewNode) node = NULL;
  g_autofree char *name = NULL;
  int r;

  r = walk_parent (c, path, &parent, &name);
  if (r == 0)
    r = fb_view_create (c->view, &c->caller, parent, name, O_WRONLY, mode, ret_file, NULL, NULL);
  if (r != -ENXIO && r != -ELOOP && r != -EINVAL)
    return r;
  /* The name is a symlink (or "." / ".."): write where it leads. */
  fb_rpc_denial_clear (&c->denial);
  r = fb_view_walk (c->view, &c->caller, path, 0, &node);
  if (r == 0)
    r = fb_view_open (c->view, &c->caller, node, O_WRONLY, ret_file, NULL);
  return r;
}

/* The file's content becomes DATA: written over the old bytes, then cut to
 * LEN.  Not O_TRUNC then write: on ext4 a truncation to zero followed by
 * close forces the new data to disk at once (auto_da_alloc), which costs a
 * disk write per call; this ordering ends with the same content. */
static int
write_replace (Call *c, FbViewFile *file, const guint8 *data, gsize len)
{
  FbViewSetattr attr = { 0 };
  struct stat st;
  int r = write_all (c, file, data, len);

  if (r < 0)
    return r;
  if (fb_view_file_fstat (c->view, file, &st) == 0 && (guint64)st.st_size == len)
    return 0;
  attr.valid = FB_VIEW_SET_SIZE;
  attr.size = (off_t)len;
  return fb_view_setattr (c->view, &c->caller, fb_view_file_get_node (file), file, &attr, NULL);
}

JsonNode *
fb_rpc_fs_write_file (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  g_autofree char *path = NULL;
  g_autofree guint8 *data = NULL;
  const char *b64;
  FbViewFile *file = NULL;
  gsize len;
  Call c;
  int r;

  if (!fb_rpc_param_path (params, "path", &path, error) ||
      !fb_rpc_param_string (params, "dataBase64", true, &b64, error))
    return NULL;
  if (!fb_rpc_base64_decode (b64, &data, &len))
    {
      /* Codex answers invalid base64 with -32600 and this wording. */
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST,
                        "fs/writeFile requires valid base64 dataBase64: not canonical padded standard base64");
      return NULL;
    }
  if (!call_begin (&c, conn, params, error))
    return NULL;
  r = open_for_write (&c, path, 0666, &file);
  if (r == 0)
    {
      r = write_replace (&c, file, data, len);
      fb_view_release (c.view, file);
    }
  if (r < 0)
    return call_fail (&c, error, r, path);
  call_end (&c);
  return empty_result ();
}

/* --- fs/createDirectory ----------------------------------------------------- */

static int
mkdir_p (Call *c, const char *path)
{
  g_auto (GStrv) parts = g_strsplit (path, "/", -1);
  g_autoptr (FbViewNode) cur = fb_view_get_root (c->view);
  GString *sofar = g_string_new (NULL);
  int r = 0;

  for (guint i = 0; parts[i] != NULL && r == 0; i++)
    {
      g_autoptr (FbViewNode) next = NULL;
      const char *name = parts[i];
      if (name[0] == '\0' || strcmp (name, ".") == 0)
        continue;
      g_string_append_c (sofar, '/');
      g_string_append (sofar, name);
      if (strcmp (name, "..") == 0)
        {
          /* ".." is the parent *view* path, as fb_view_walk has it. */
          r = fb_view_walk (c->view, &c->caller, sofar->str, 0, &next);
        }
      else
        {
          r = fb_view_lookup (c->view, &c->caller, cur, name, &next, NULL);
          if (r == -ENOENT)
            {
              fb_rpc_denial_clear (&c->denial);
              r = fb_view_mkdir (c->view, &c->caller, cur, name, 0777, &next, NULL);
              if (r == -EEXIST)
                r = fb_view_lookup (c->view, &c->caller, cur, name, &next, NULL);
            }
          if (r == 0 && S_ISLNK (fb_view_node_get_type (next)))
            {
              /* An existing symlink on the way is followed (create_dir_all). */
              g_clear_pointer (&next, fb_view_node_unref);
              r = fb_view_walk (c->view, &c->caller, sofar->str, 0, &next);
            }
        }
      if (r == 0 && !is_dir_node (next))
        r = -ENOTDIR;
      if (r == 0)
        {
          g_clear_pointer (&cur, fb_view_node_unref);
          cur = g_steal_pointer (&next);
        }
    }
  g_string_free (sofar, TRUE);
  return r;
}

JsonNode *
fb_rpc_fs_create_directory (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  g_autofree char *path = NULL;
  bool recursive;
  Call c;
  int r;

  if (!fb_rpc_param_path (params, "path", &path, error) ||
      !fb_rpc_param_bool (params, "recursive", true, &recursive, error) || !call_begin (&c, conn, params, error))
    return NULL;
  if (recursive)
    r = mkdir_p (&c, path);
  else
    {
      g_autoptr (FbViewNode) parent = NULL;
      g_autofree char *name = NULL;
      r = walk_parent (&c, path, &parent, &name);
      if (r == 0)
        r = fb_view_mkdir (c.view, &c.caller, parent, name, 0777, NULL, NULL);
    }
  if (r < 0)
    return call_fail (&c, error, r, path);
  call_end (&c);
  return empty_result ();
}

/* --- fs/getMetadata, fs/canonicalize ---------------------------------------- */

static gint64
ts_ms (const struct timespec *ts)
{
  return (gint64)ts->tv_sec * 1000 + ts->tv_nsec / 1000000;
}

JsonNode *
fb_rpc_fs_get_metadata (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  g_autofree char *path = NULL;
  g_autoptr (FbViewNode) node = NULL;
  g_autoptr (FbViewNode) target = NULL;
  struct stat st;
  bool is_symlink = false;
  JsonObject *o;
  Call c;
  int r;

  if (!fb_rpc_param_path (params, "path", &path, error) || !call_begin (&c, conn, params, error))
    return NULL;
  r = fb_view_walk (c.view, &c.caller, path, FB_VIEW_WALK_NOFOLLOW, &node);
  if (r == 0 && S_ISLNK (fb_view_node_get_type (node)))
    {
      /* Like std::fs::metadata: the type and size of what the link leads
       * to, and whether the path itself is a link. */
      is_symlink = true;
      r = fb_view_walk (c.view, &c.caller, path, 0, &target);
    }
  if (r == 0)
    r = fb_view_getattr (c.view, &c.caller, target != NULL ? target : node, &st);
  if (r < 0)
    return call_fail (&c, error, r, path);
  call_end (&c);
  o = json_object_new ();
  json_object_set_boolean_member (o, "isDirectory", S_ISDIR (st.st_mode));
  json_object_set_boolean_member (o, "isFile", S_ISREG (st.st_mode));
  json_object_set_boolean_member (o, "isSymlink", is_symlink);
  json_object_set_int_member (o, "size", st.st_size);
  /* Birth time does not pass through the view's attributes: report the
   * change time, which is never later than any time the file was made. */
  json_object_set_int_member (o, "createdAtMs", ts_ms (&st.st_ctim));
  json_object_set_int_member (o, "modifiedAtMs", ts_ms (&st.st_mtim));
  return fb_rpc_object_node (o);
}

JsonNode *
fb_rpc_fs_canonicalize (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  g_autofree char *path = NULL;
  g_autofree char *canon = NULL;
  g_autofree char *uri = NULL;
  g_autoptr (FbViewNode) node = NULL;
  JsonObject *o;
  Call c;
  int r;

  if (!fb_rpc_param_path (params, "path", &path, error) || !call_begin (&c, conn, params, error))
    return NULL;
  r = fb_view_walk (c.view, &c.caller, path, 0, &node);
  if (r < 0)
    return call_fail (&c, error, r, path);
  call_end (&c);
  canon = fb_view_node_dup_path (node);
  uri = fb_rpc_path_to_uri (canon);
  o = json_object_new ();
  json_object_set_string_member (o, "path", uri);
  return fb_rpc_object_node (o);
}

/* --- listing ---------------------------------------------------------------- */

typedef struct
{
  char *name;
  unsigned char type; /* DT_* */
} Entry;

static void
entry_clear (gpointer p)
{
  g_free (((Entry *)p)->name);
}

typedef struct
{
  GArray *entries;
  gsize max;
  bool overflow;
} ListCtx;

static bool
list_cb (const FbViewDirEntry *e, gpointer user_data)
{
  ListCtx *l = user_data;
  Entry entry;

  if (strcmp (e->name, ".") == 0 || strcmp (e->name, "..") == 0)
    return true;
  if (l->entries->len >= l->max)
    {
      l->overflow = true;
      return true;
    }
  entry.name = g_strdup (e->name);
  entry.type = e->type;
  g_array_append_val (l->entries, entry);
  return true;
}

/* The names in directory NODE, sorted, at most MAX (-E2BIG past it). */
static int
list_dir (Call *c, FbViewNode *node, gsize max, GArray **ret)
{
  g_autoptr (GArray) entries = g_array_new (FALSE, FALSE, sizeof (Entry));
  FbViewFile *dir = NULL;
  ListCtx l = { entries, max, false };
  int r;

  g_array_set_clear_func (entries, entry_clear);
  r = fb_view_opendir (c->view, &c->caller, node, &dir, NULL);
  if (r < 0)
    return r;
  r = fb_view_readdir (c->view, dir, 0, false, list_cb, &l);
  fb_view_releasedir (c->view, dir);
  if (r < 0)
    return r;
  if (l.overflow)
    return -E2BIG;
  *ret = g_steal_pointer (&entries);
  return 0;
}

static char *
child_path (const char *dir, const char *name)
{
  return strcmp (dir, "/") == 0 ? g_strconcat ("/", name, NULL) : g_strconcat (dir, "/", name, NULL);
}

/* Type of ENTRY in DIR_PATH following symlinks (DT_UNKNOWN when it leads
 * nowhere). */
static unsigned char
entry_type_followed (Call *c, const char *dir_path, const Entry *e)
{
  g_autofree char *p = NULL;
  g_autoptr (FbViewNode) n = NULL;
  mode_t t;

  if (e->type != DT_LNK && e->type != DT_UNKNOWN)
    return e->type;
  p = child_path (dir_path, e->name);
  if (fb_view_walk (c->view, &c->caller, p, 0, &n) < 0)
    return DT_UNKNOWN;
  t = fb_view_node_get_type (n);
  return S_ISDIR (t) ? DT_DIR : S_ISREG (t) ? DT_REG : DT_UNKNOWN;
}

JsonNode *
fb_rpc_fs_read_directory (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  g_autofree char *path = NULL;
  g_autofree char *canon = NULL;
  g_autoptr (FbViewNode) node = NULL;
  g_autoptr (GArray) entries = NULL;
  JsonArray *arr;
  JsonObject *o;
  Call c;
  int r;

  if (!fb_rpc_param_path (params, "path", &path, error) || !call_begin (&c, conn, params, error))
    return NULL;
  r = fb_view_walk (c.view, &c.caller, path, 0, &node);
  if (r == 0)
    r = list_dir (&c, node, FB_RPC_DIR_ENTRIES_MAX, &entries);
  if (r == -E2BIG)
    {
      call_end (&c);
      fb_rpc_error_set (error, FB_RPC_ERROR_INTERNAL,
                        "%s has more than %d entries, fs/readDirectory's limit; list it with fs/walk", path,
                        FB_RPC_DIR_ENTRIES_MAX);
      return NULL;
    }
  if (r < 0)
    return call_fail (&c, error, r, path);
  canon = fb_view_node_dup_path (node);
  arr = json_array_sized_new (entries->len);
  for (guint i = 0; i < entries->len; i++)
    {
      const Entry *e = &g_array_index (entries, Entry, i);
      unsigned char t = entry_type_followed (&c, canon, e);
      JsonObject *eo = json_object_new ();
      json_object_set_string_member (eo, "fileName", e->name);
      json_object_set_boolean_member (eo, "isDirectory", t == DT_DIR);
      json_object_set_boolean_member (eo, "isFile", t == DT_REG);
      json_array_add_object_element (arr, eo);
    }
  call_end (&c);
  o = json_object_new ();
  json_object_set_array_member (o, "entries", arr);
  return fb_rpc_object_node (o);
}

/* --- fs/walk ---------------------------------------------------------------- */

static int
entry_cmp (gconstpointer a, gconstpointer b)
{
  return strcmp (((const Entry *)a)->name, ((const Entry *)b)->name);
}

typedef struct
{
  JsonArray *entries;
  JsonArray *errors;
  bool truncated;
  gsize bytes;
} WalkOut;

/* false: the response is full (truncated). */
static bool
walk_push_error (WalkOut *w, const char *path, int err)
{
  g_autofree char *uri = fb_rpc_path_to_uri (path);
  g_autofree char *msg = fb_rpc_os_error_message (err);
  JsonObject *o;

  if (w->bytes + strlen (uri) + strlen (msg) + WALK_ITEM_OVERHEAD > WALK_MAX_RESPONSE_BYTES)
    {
      w->truncated = true;
      return false;
    }
  w->bytes += strlen (uri) + strlen (msg) + WALK_ITEM_OVERHEAD;
  o = json_object_new ();
  json_object_set_string_member (o, "path", uri);
  json_object_set_string_member (o, "message", msg);
  json_array_add_object_element (w->errors, o);
  return true;
}

typedef struct
{
  char *path;
  guint depth;
} WalkDir;

static void
walk_dir_free (gpointer p)
{
  WalkDir *d = p;
  g_free (d->path);
  g_free (d);
}

JsonNode *
fb_rpc_fs_walk (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  g_autofree char *path = NULL;
  g_autoptr (FbViewNode) root = NULL;
  g_autoptr (FbViewNode) root_nf = NULL;
  g_autoptr (GHashTable) visited = NULL;
  g_autoptr (GQueue) queue = NULL;
  JsonNode *opt_node;
  JsonObject *opts, *o;
  guint64 max_depth, max_dirs, max_entries;
  bool follow;
  gsize n_entries = 0, n_dirs = 1;
  WalkOut w = { 0 };
  Call c;
  int r;

  if (!fb_rpc_param_path (params, "path", &path, error))
    return NULL;
  opt_node = json_object_get_member (params, "options");
  if (opt_node == NULL || !JSON_NODE_HOLDS_OBJECT (opt_node))
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS,
                        "invalid params: `options` must be an object {maxDepth, maxDirectories, maxEntries, "
                        "followDirectorySymlinks}");
      return NULL;
    }
  opts = json_node_get_object (opt_node);
  if (!fb_rpc_param_uint (opts, "maxDepth", true, 0, &max_depth, error) ||
      !fb_rpc_param_uint (opts, "maxDirectories", true, 0, &max_dirs, error) ||
      !fb_rpc_param_uint (opts, "maxEntries", true, 0, &max_entries, error) ||
      !fb_rpc_param_bool (opts, "followDirectorySymlinks", false, &follow, error))
    return NULL;
  if (max_dirs == 0 || max_entries == 0)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "filesystem walk limits must be greater than zero");
      return NULL;
    }
  if (max_depth > WALK_MAX_DEPTH || max_dirs > WALK_MAX_DIRECTORIES || max_entries > WALK_MAX_ENTRIES)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST,
                        "filesystem walk limits exceed maximums: depth=%d, directories=%d, entries=%d", WALK_MAX_DEPTH,
                        WALK_MAX_DIRECTORIES, WALK_MAX_ENTRIES);
      return NULL;
    }
  if (!call_begin (&c, conn, params, error))
    return NULL;

  w.entries = json_array_new ();
  w.errors = json_array_new ();
  r = fb_view_walk (c.view, &c.caller, path, FB_VIEW_WALK_NOFOLLOW, &root_nf);
  if (r == 0 && S_ISLNK (fb_view_node_get_type (root_nf)))
    r = follow ? fb_view_walk (c.view, &c.caller, path, 0, &root) : 1;
  else if (r == 0)
    root = fb_view_node_ref (root_nf);
  if (r < 0)
    {
      json_array_unref (w.entries);
      json_array_unref (w.errors);
      return call_fail (&c, error, r, path);
    }
  visited = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  queue = g_queue_new ();
  if (root != NULL && is_dir_node (root))
    {
      WalkDir *d = g_new0 (WalkDir, 1);
      /* Entries are named under the path as given; directories are told
       * apart by their view path (canonical when following links). */
      d->path = g_strdup (path);
      g_hash_table_add (visited, fb_view_node_dup_path (root));
      g_queue_push_tail (queue, d);
    }
  while (!g_queue_is_empty (queue) && !w.truncated)
    {
      g_autoptr (GArray) entries = NULL;
      g_autoptr (FbViewNode) dnode = NULL;
      WalkDir *d = g_queue_pop_head (queue);

      r = fb_view_walk (c.view, &c.caller, d->path, 0, &dnode);
      if (r == 0)
        r = list_dir (&c, dnode, WALK_MAX_ENTRIES + 1, &entries);
      if (r < 0)
        {
          walk_push_error (&w, d->path, r == -E2BIG ? EFBIG : -r);
          walk_dir_free (d);
          continue;
        }
      g_array_sort (entries, entry_cmp);
      for (guint i = 0; i < entries->len && !w.truncated; i++)
        {
          const Entry *e = &g_array_index (entries, Entry, i);
          g_autofree char *p = child_path (d->path, e->name);
          g_autofree char *uri = NULL;
          g_autoptr (FbViewNode) n = NULL;
          mode_t t;
          bool is_link = false;
          JsonObject *eo;

          if (n_entries == max_entries)
            {
              w.truncated = true;
              break;
            }
          n_entries++;
          r = fb_view_walk (c.view, &c.caller, p, FB_VIEW_WALK_NOFOLLOW, &n);
          if (r == 0 && S_ISLNK (fb_view_node_get_type (n)))
            {
              is_link = true;
              if (!follow)
                continue;
              g_clear_pointer (&n, fb_view_node_unref);
              r = fb_view_walk (c.view, &c.caller, p, 0, &n);
            }
          if (r < 0)
            {
              if (!walk_push_error (&w, p, -r))
                break;
              continue;
            }
          t = fb_view_node_get_type (n);
          if (is_link && !S_ISDIR (t))
            continue;
          if (!S_ISDIR (t) && !S_ISREG (t))
            continue;
          uri = fb_rpc_path_to_uri (p);
          if (w.bytes + strlen (uri) + WALK_ITEM_OVERHEAD > WALK_MAX_RESPONSE_BYTES)
            {
              w.truncated = true;
              break;
            }
          w.bytes += strlen (uri) + WALK_ITEM_OVERHEAD;
          eo = json_object_new ();
          json_object_set_string_member (eo, "path", uri);
          json_object_set_string_member (eo, "kind", S_ISDIR (t) ? "directory" : "file");
          json_array_add_object_element (w.entries, eo);
          if (S_ISDIR (t) && d->depth < max_depth)
            {
              char *ident = fb_view_node_dup_path (n);
              if (!g_hash_table_add (visited, ident))
                continue;
              if (n_dirs == max_dirs)
                w.truncated = true;
              else
                {
                  WalkDir *sub = g_new0 (WalkDir, 1);
                  sub->path = g_steal_pointer (&p);
                  sub->depth = d->depth + 1;
                  n_dirs++;
                  g_queue_push_tail (queue, sub);
                }
            }
        }
      walk_dir_free (d);
    }
  g_queue_clear_full (queue, walk_dir_free);
  call_end (&c);
  o = json_object_new ();
  json_object_set_array_member (o, "entries", w.entries);
  json_object_set_array_member (o, "errors", w.errors);
  json_object_set_boolean_member (o, "truncated", w.truncated);
  return fb_rpc_object_node (o);
}

/* --- fs/remove -------------------------------------------------------------- */

/* Remove NAME from PARENT (whose view path is PARENT_PATH), everything
 * below it first when it is a directory and RECURSIVE. */
static int
remove_tree (Call *c, FbViewNode *parent, const char *parent_path, const char *name, bool recursive, guint depth,
             gsize *count)
{
  g_autoptr (FbViewNode) node = NULL;
  int r;

  if (++*count > FB_RPC_TREE_MAX || depth > FB_RPC_TREE_DEPTH_MAX)
    return -E2BIG;
  r = fb_view_lookup (c->view, &c->caller, parent, name, &node, NULL);
  if (r < 0)
    return r;
  if (is_dir_node (node))
    {
      g_autofree char *path = child_path (parent_path, name);
      g_autoptr (GArray) entries = NULL;
      if (recursive)
        {
          r = list_dir (c, node, FB_RPC_TREE_MAX, &entries);
          if (r < 0)
            return r;
          for (guint i = 0; i < entries->len; i++)
            {
              r = remove_tree (c, node, path, g_array_index (entries, Entry, i).name, true, depth + 1, count);
              if (r < 0 && r != -ENOENT)
                return r;
            }
        }
      return fb_view_rmdir (c->view, &c->caller, parent, name);
    }
  return fb_view_unlink (c->view, &c->caller, parent, name);
}

JsonNode *
fb_rpc_fs_remove (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  g_autofree char *path = NULL;
  g_autofree char *canon = NULL;
  g_autofree char *parent_path = NULL;
  g_autofree char *name = NULL;
  g_autoptr (FbViewNode) node = NULL;
  g_autoptr (FbViewNode) parent = NULL;
  bool recursive, force;
  gsize count = 0;
  Call c;
  int r;

  if (!fb_rpc_param_path (params, "path", &path, error) ||
      !fb_rpc_param_bool (params, "recursive", true, &recursive, error) ||
      !fb_rpc_param_bool (params, "force", true, &force, error) || !call_begin (&c, conn, params, error))
    return NULL;
  /* The path's own node, not a symlink's target: a link is removed itself. */
  r = fb_view_walk (c.view, &c.caller, path, FB_VIEW_WALK_NOFOLLOW, &node);
  if (r == 0)
    {
      canon = fb_view_node_dup_path (node);
      if (strcmp (canon, "/") == 0)
        r = -EBUSY;
    }
  if (r == 0)
    {
      split_path (canon, &parent_path, &name);
      r = fb_view_walk (c.view, &c.caller, parent_path, 0, &parent);
    }
  if (r == 0)
    r = remove_tree (&c, parent, parent_path, name, recursive, 0, &count);
  if (r == -ENOENT && force && !c.denial.denied)
    r = 0;
  return tree_call_end (&c, r, path, "fs/remove", "; what was removed before the limit stays removed", error);
}

/* --- fs/copy ---------------------------------------------------------------- */

static int
copy_file (Call *c, FbViewNode *src, FbViewNode *dst_parent, const char *dst_name, guint8 *buf)
{
  FbViewFile *in = NULL, *out = NULL;
  struct stat st;
  off_t off = 0;
  int r;

  r = fb_view_getattr (c->view, &c->caller, src, &st);
  if (r == 0)
    r = fb_view_open (c->view, &c->caller, src, O_RDONLY, &in, NULL);
  if (r < 0)
    return r;
  r =
    fb_view_create (c->view, &c->caller, dst_parent, dst_name, O_WRONLY | O_TRUNC, st.st_mode & 0777, &out, NULL, NULL);
  while (r == 0)
    {
      gssize n = fb_view_read (c->view, in, buf, COPY_CHUNK, off);
      gssize w = 0;
      if (n <= 0)
        {
          r = (int)n;
          break;
        }
      while (w < n && r == 0)
        {
          gssize k = fb_view_write (c->view, out, buf + w, (gsize)(n - w), off + w);
          if (k <= 0)
            r = k < 0 ? (int)k : -EIO;
          else
            w += k;
        }
      off += n;
    }
  fb_view_release (c->view, in);
  if (out != NULL)
    fb_view_release (c->view, out);
  return r;
}

static int
copy_tree (Call *c, FbViewNode *src, const char *src_path, FbViewNode *dst_parent, const char *dst_name, guint depth,
           gsize *count, guint8 *buf)
{
  mode_t t = fb_view_node_get_type (src);
  int r;

  if (++*count > FB_RPC_TREE_MAX || depth > FB_RPC_TREE_DEPTH_MAX)
    return -E2BIG;
  if (S_ISLNK (t))
    {
      g_autofree char *text = NULL;
      r = fb_view_readlink (c->view, &c->caller, src, &text);
      if (r == 0)
        r = fb_view_symlink (c->view, &c->caller, dst_parent, dst_name, text, NULL, NULL);
      return r;
    }
  if (S_ISREG (t))
    return copy_file (c, src, dst_parent, dst_name, buf);
  if (S_ISDIR (t))
    {
      g_autoptr (FbViewNode) dst = NULL;
      g_autoptr (GArray) entries = NULL;
      struct stat st;
      r = fb_view_getattr (c->view, &c->caller, src, &st);
      if (r == 0)
        r = list_dir (c, src, FB_RPC_TREE_MAX, &entries);
      if (r < 0)
        return r;
      r = fb_view_mkdir (c->view, &c->caller, dst_parent, dst_name, st.st_mode & 0777, &dst, NULL);
      if (r == -EEXIST)
        r = fb_view_lookup (c->view, &c->caller, dst_parent, dst_name, &dst, NULL);
      if (r == 0 && !is_dir_node (dst))
        r = -ENOTDIR;
      for (guint i = 0; r == 0 && i < entries->len; i++)
        {
          const char *name = g_array_index (entries, Entry, i).name;
          g_autofree char *p = child_path (src_path, name);
          g_autoptr (FbViewNode) child = NULL;
          r = fb_view_lookup (c->view, &c->caller, src, name, &child, NULL);
          if (r == 0)
            r = copy_tree (c, child, p, dst, name, depth + 1, count, buf);
        }
      return r;
    }
  /* FIFOs, sockets, devices: not copied (std::fs::copy refuses them too). */
  return -EINVAL;
}

JsonNode *
fb_rpc_fs_copy (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  g_autofree char *src_path = NULL;
  g_autofree char *dst_path = NULL;
  g_autofree char *src_canon = NULL;
  g_autofree char *dst_name = NULL;
  g_autofree guint8 *buf = NULL;
  g_autoptr (FbViewNode) src = NULL;
  g_autoptr (FbViewNode) dst_parent = NULL;
  JsonNode *rec;
  bool recursive;
  gsize count = 0;
  Call c;
  int r;

  if (!fb_rpc_param_path (params, "sourcePath", &src_path, error) ||
      !fb_rpc_param_path (params, "destinationPath", &dst_path, error))
    return NULL;
  rec = json_object_get_member (params, "recursive");
  if (rec == NULL || !JSON_NODE_HOLDS_VALUE (rec) || json_node_get_value_type (rec) != G_TYPE_BOOLEAN)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `recursive` must be a boolean");
      return NULL;
    }
  recursive = json_node_get_boolean (rec);
  if (!call_begin (&c, conn, params, error))
    return NULL;
  r = fb_view_walk (c.view, &c.caller, src_path, 0, &src);
  if (r == 0 && is_dir_node (src) && !recursive)
    {
      call_end (&c);
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST,
                        "fs/copy requires recursive: true when sourcePath is a directory");
      return NULL;
    }
  if (r == 0)
    r = walk_parent (&c, dst_path, &dst_parent, &dst_name);
  if (r == 0 && is_dir_node (src))
    {
      g_autofree char *dst_dir = fb_view_node_dup_path (dst_parent);
      g_autofree char *dst_full = child_path (dst_dir, dst_name);
      g_autofree char *prefix = NULL;
      src_canon = fb_view_node_dup_path (src);
      prefix = g_str_has_suffix (src_canon, "/") ? g_strdup (src_canon) : g_strconcat (src_canon, "/", NULL);
      if (strcmp (dst_full, src_canon) == 0 || g_str_has_prefix (dst_full, prefix))
        {
          call_end (&c);
          fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "fs/copy cannot copy a directory into itself");
          return NULL;
        }
    }
  if (r == 0)
    {
      buf = g_malloc (COPY_CHUNK);
      if (src_canon == NULL)
        src_canon = fb_view_node_dup_path (src);
      r = copy_tree (&c, src, src_canon, dst_parent, dst_name, 0, &count, buf);
    }
  return tree_call_end (&c, r, src_path, "fs/copy", "", error);
}

/* --- fs/open, fs/readBlock, fs/close ---------------------------------------- */

typedef struct
{
  FbRpcSandbox *sb; /* a reference: the view reports to its tee sink */
  FbView *view;     /* sb's */
  FbViewFile *file;
  FbRpcClient *client; /* its connection's, which outlives it: the handle counts there */
} Handle;

static void
handle_free (gpointer p)
{
  Handle *h = p;
  fb_view_release (h->view, h->file);
  fb_rpc_sandbox_unref (h->sb);
  fb_rpc_handle_release (h->client);
  g_free (h);
}

static bool
check_handle_id (JsonObject *params, const char **ret, FbRpcError *error)
{
  if (!fb_rpc_param_string (params, "handleId", true, ret, error))
    return false;
  if (strlen (*ret) > FB_RPC_HANDLE_ID_MAX)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "file handle ID must not exceed %d bytes",
                        FB_RPC_HANDLE_ID_MAX);
      return false;
    }
  return true;
}

JsonNode *
fb_rpc_fs_open (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  g_autofree char *path = NULL;
  g_autoptr (FbViewNode) node = NULL;
  const char *handle_id;
  FbViewFile *file = NULL;
  Handle *h;
  JsonObject *o;
  Call c;
  int r;

  if (!check_handle_id (params, &handle_id, error) || !fb_rpc_param_path (params, "path", &path, error))
    return NULL;
  if (conn->handles == NULL)
    conn->handles = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, handle_free);
  if (g_hash_table_contains (conn->handles, handle_id))
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "file handle `%s` already exists", handle_id);
      return NULL;
    }
  if (g_hash_table_size (conn->handles) >= FB_RPC_HANDLES_MAX)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST,
                        "too many open file handles on this connection (limit %d); close some with fs/close",
                        FB_RPC_HANDLES_MAX);
      return NULL;
    }
  /* The client's share and the server's budget (ipc-rpc-share.c). */
  if (!fb_rpc_handle_claim (conn, error))
    return NULL;
  if (!call_begin (&c, conn, params, error))
    {
      fb_rpc_handle_release (conn->client);
      return NULL;
    }
  r = fb_view_walk (c.view, &c.caller, path, 0, &node);
  if (r == 0 && !check_regular (node, path, error))
    {
      call_end (&c);
      fb_rpc_handle_release (conn->client);
      return NULL;
    }
  if (r == 0)
    r = fb_view_open (c.view, &c.caller, node, O_RDONLY, &file, NULL);
  if (r < 0)
    {
      call_fail (&c, error, r, path);
      fb_rpc_handle_release (conn->client);
      return NULL;
    }
  h = g_new0 (Handle, 1);
  h->sb = fb_rpc_sandbox_ref (c.sb);
  h->view = c.view;
  h->file = file;
  h->client = conn->client;
  g_hash_table_insert (conn->handles, g_strdup (handle_id), h);
  call_end (&c);
  o = json_object_new ();
  json_object_set_string_member (o, "handleId", handle_id);
  return fb_rpc_object_node (o);
}

JsonNode *
fb_rpc_fs_read_block (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  const char *handle_id;
  guint64 offset, len;
  g_autofree guint8 *buf = NULL;
  g_autofree char *b64 = NULL;
  gsize got = 0;
  struct stat st;
  Handle *h;
  JsonObject *o;

  if (!check_handle_id (params, &handle_id, error) || !fb_rpc_param_uint (params, "offset", true, 0, &offset, error) ||
      !fb_rpc_param_uint (params, "len", true, 0, &len, error))
    return NULL;
  h = conn->handles != NULL ? g_hash_table_lookup (conn->handles, handle_id) : NULL;
  if (h == NULL)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_NOT_FOUND, "unknown file handle `%s`", handle_id);
      return NULL;
    }
  if (len == 0 || len > FB_RPC_READ_BLOCK_MAX)
    {
      /* Codex's wording; its bound is 1 MiB, ours larger. */
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_REQUEST, "file read block length must be between 1 and %d",
                        FB_RPC_READ_BLOCK_MAX);
      return NULL;
    }
  if (offset > G_MAXINT64 - len)
    {
      fb_rpc_error_set (error, FB_RPC_ERROR_INVALID_PARAMS, "invalid params: `offset` is out of range");
      return NULL;
    }
  buf = g_malloc (len + 1);
  while (got < len)
    {
      gssize n = fb_view_read (h->view, h->file, buf + got, len - got, (off_t)(offset + got));
      if (n < 0)
        {
          fb_rpc_error_from_errno (error, (int)-n, NULL, NULL, NULL);
          return NULL;
        }
      if (n == 0)
        break;
      got += (gsize)n;
    }
  b64 = g_base64_encode (buf, got);
  o = json_object_new ();
  json_object_set_string_member (o, "chunk", b64);
  json_object_set_boolean_member (
    o, "eof", got < len || (fb_view_file_fstat (h->view, h->file, &st) == 0 && (guint64)st.st_size <= offset + got));
  return fb_rpc_object_node (o);
}

JsonNode *
fb_rpc_fs_close (FbRpcConn *conn, JsonNode *id, JsonObject *params, FbRpcError *error, bool *ret_deferred)
{
  const char *handle_id;

  if (!check_handle_id (params, &handle_id, error))
    return NULL;
  /* Closing an unknown handle succeeds, as in Codex. */
  if (conn->handles != NULL)
    g_hash_table_remove (conn->handles, handle_id);
  return empty_result ();
}

void
fb_rpc_fs_close_all (FbRpcConn *conn)
{
  g_clear_pointer (&conn->handles, g_hash_table_destroy);
}
