/* fusebox — the journal's native protocol for the tests (test-journal.h). */
#include "tests/lib/test-journal.h"
#include "tests/lib/test-util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

void
test_journal_field_free (TestJournalField *f)
{
  g_free (f->name);
  g_bytes_unref (f->value);
  g_free (f);
}

bool
test_journal_name_valid (const char *name, size_t len)
{
  if (len == 0 || len > 64 || name[0] == '_' || g_ascii_isdigit (name[0]))
    return false;
  for (size_t i = 0; i < len; i++)
    if (!(g_ascii_isupper (name[i]) || g_ascii_isdigit (name[i]) || name[i] == '_'))
      return false;
  return true;
}

GPtrArray *
test_journal_parse (const char *data, size_t len, char **ret_why)
{
  GPtrArray *fields = g_ptr_array_new_with_free_func ((GDestroyNotify)test_journal_field_free);
  const char *p = data, *end = data + len;

  while (p < end)
    {
      const char *nl = memchr (p, '\n', end - p);
      const char *eq = nl != NULL ? memchr (p, '=', nl - p) : NULL;
      TestJournalField *f;

      if (nl == NULL)
        {
          *ret_why = g_strdup_printf ("a field without its newline at byte %zu", (size_t)(p - data));
          goto fail;
        }
      f = g_new0 (TestJournalField, 1);
      if (eq != NULL)
        {
          f->name = g_strndup (p, eq - p);
          f->value = g_bytes_new (eq + 1, nl - eq - 1);
          p = nl + 1;
        }
      else
        {
          uint64_t le, n;

          f->name = g_strndup (p, nl - p);
          p = nl + 1;
          if (end - p < 8)
            {
              *ret_why = g_strdup_printf ("%s: a binary field without its length", f->name);
              test_journal_field_free (f);
              goto fail;
            }
          memcpy (&le, p, 8);
          n = GUINT64_FROM_LE (le);
          p += 8;
          if ((uint64_t)(end - p) < n + 1 || p[n] != '\n')
            {
              *ret_why = g_strdup_printf ("%s: a binary field of %" G_GUINT64_FORMAT " bytes that does not end there",
                                          f->name, (guint64)n);
              test_journal_field_free (f);
              goto fail;
            }
          f->value = g_bytes_new (p, n);
          p += n + 1;
        }
      if (!test_journal_name_valid (f->name, strlen (f->name)))
        {
          *ret_why = g_strdup_printf ("a field name journald refuses: \"%s\"", f->name);
          test_journal_field_free (f);
          goto fail;
        }
      g_ptr_array_add (fields, f);
    }
  return fields;

fail:
  g_ptr_array_unref (fields);
  return NULL;
}

guint
test_journal_count (GPtrArray *entry, const char *name)
{
  guint n = 0;

  for (guint i = 0; i < entry->len; i++)
    if (strcmp (((TestJournalField *)entry->pdata[i])->name, name) == 0)
      n++;
  return n;
}

/* The first field NAME of ENTRY, or NULL. */
static TestJournalField *
first_field (GPtrArray *entry, const char *name)
{
  for (guint i = 0; i < entry->len; i++)
    {
      TestJournalField *f = entry->pdata[i];
      if (strcmp (f->name, name) == 0)
        return f;
    }
  return NULL;
}

char *
test_journal_get (GPtrArray *entry, const char *name)
{
  TestJournalField *f = first_field (entry, name);
  gsize len;
  const char *v;

  if (f == NULL)
    return NULL;
  v = g_bytes_get_data (f->value, &len);
  return len > 0 ? g_strndup (v, len) : g_strdup ("");
}

GBytes *
test_journal_get_bytes (GPtrArray *entry, const char *name)
{
  TestJournalField *f = first_field (entry, name);

  return f != NULL ? g_bytes_ref (f->value) : NULL;
}

int
test_journal_bind (const char *path)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  int fd;

  if (strlen (path) >= sizeof sa.sun_path)
    return -ENAMETOOLONG;
  strcpy (sa.sun_path, path);
  unlink (path);
  fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -errno;
  if (bind (fd, (struct sockaddr *)&sa, sizeof sa) < 0)
    {
      int e = errno;
      close (fd);
      return -e;
    }
  return fd;
}

GBytes *
test_journal_recv (int fd, int timeout_ms, char **ret_why)
{
  static char buf[1 << 20];
  union
  {
    struct cmsghdr align;
    char b[CMSG_SPACE (sizeof (int))];
  } control;
  struct iovec iov = { buf, sizeof buf };
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.b, .msg_controllen = sizeof control.b };
  struct pollfd pfd = { fd, POLLIN, 0 };
  struct cmsghdr *cmsg;
  ssize_t n;

  *ret_why = NULL;
  if (poll (&pfd, 1, timeout_ms) <= 0)
    return NULL;
  n = recvmsg (fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0)
    {
      *ret_why = g_strdup_printf ("recvmsg: %s", g_strerror (errno));
      return NULL;
    }
  if (mh.msg_flags & MSG_TRUNC)
    {
      *ret_why = g_strdup ("a datagram larger than 1 MiB");
      return NULL;
    }
  cmsg = CMSG_FIRSTHDR (&mh);
  if (cmsg != NULL && cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS)
    {
      int mfd, seals;
      struct stat st;
      char *data;

      memcpy (&mfd, CMSG_DATA (cmsg), sizeof mfd);
      seals = fcntl (mfd, F_GET_SEALS);
      if (n != 0 || fstat (mfd, &st) < 0 || seals < 0 ||
          (seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)) != (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE))
        {
          *ret_why = g_strdup_printf ("a descriptor journald would refuse (%zd bytes beside it, seals 0x%x)", n, seals);
          close (mfd);
          return NULL;
        }
      data = g_malloc (st.st_size > 0 ? st.st_size : 1);
      if (pread (mfd, data, st.st_size, 0) != st.st_size)
        {
          *ret_why = g_strdup_printf ("reading the memfd: %s", g_strerror (errno));
          g_free (data);
          close (mfd);
          return NULL;
        }
      close (mfd);
      return g_bytes_new_take (data, st.st_size);
    }
  return g_bytes_new (buf, n);
}

GPtrArray *
test_journal_next (int fd, int timeout_ms)
{
  g_autofree char *why = NULL;
  g_autoptr (GBytes) data = test_journal_recv (fd, timeout_ms, &why);
  GPtrArray *entry;

  if (data == NULL)
    {
      if (why != NULL)
        fail_msg ("reading the journal's socket: %s", why);
      return NULL;
    }
  entry = test_journal_parse (g_bytes_get_data (data, NULL), g_bytes_get_size (data), &why);
  if (entry == NULL)
    fail_msg ("a malformed entry: %s", why);
  return entry;
}

GPtrArray *
test_journal_collect (int fd, pid_t pid, int *ret_status, char **ret_why)
{
  GPtrArray *entries = g_ptr_array_new_with_free_func ((GDestroyNotify)g_ptr_array_unref);
  bool ended = false;

  *ret_why = NULL;
  for (;;)
    {
      g_autoptr (GBytes) data = test_journal_recv (fd, ended ? 0 : 20, ret_why);
      GPtrArray *entry;

      if (*ret_why != NULL)
        break;
      if (data == NULL)
        {
          int status;

          if (ended)
            return entries;
          if (waitpid (pid, &status, WNOHANG) == pid)
            {
              *ret_status = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
              ended = true;
            }
          continue;
        }
      entry = test_journal_parse (g_bytes_get_data (data, NULL), g_bytes_get_size (data), ret_why);
      if (entry == NULL)
        break;
      g_ptr_array_add (entries, entry);
    }
  g_ptr_array_unref (entries);
  return NULL;
}

/* What differs between ENTRY and O's members under PREFIX, or NULL;
 * *RET_N counts the fields they make. */
static char *
test_journal_check_members (GPtrArray *entry, JsonObject *o, const char *prefix, guint *ret_n)
{
  g_autoptr (GList) members = json_object_get_members (o);

  for (GList *l = members; l != NULL; l = l->next)
    {
      JsonNode *n = json_object_get_member (o, l->data);
      g_autofree char *upper = g_ascii_strup (l->data, -1);
      g_autofree char *name = g_strconcat (prefix, "_", upper, NULL);
      g_autofree char *want = NULL;
      g_autofree char *got = NULL;

      if (JSON_NODE_HOLDS_NULL (n))
        {
          if (test_journal_count (entry, name) != 0)
            return g_strdup_printf ("%s is there for a null member", name);
          continue;
        }
      if (JSON_NODE_HOLDS_OBJECT (n))
        {
          char *why = test_journal_check_members (entry, json_node_get_object (n), name, ret_n);
          if (why != NULL)
            return why;
          continue;
        }
      if (json_node_get_value_type (n) == G_TYPE_STRING)
        want = g_strdup (json_node_get_string (n));
      else if (json_node_get_value_type (n) == G_TYPE_BOOLEAN)
        want = g_strdup (json_node_get_boolean (n) ? "true" : "false");
      else
        want = g_strdup_printf ("%" G_GINT64_FORMAT, json_node_get_int (n));
      if (test_journal_count (entry, name) != 1)
        return g_strdup_printf ("%s is in the entry %u times", name, test_journal_count (entry, name));
      got = test_journal_get (entry, name);
      if (strcmp (got, want) != 0)
        return g_strdup_printf ("%s is \"%s\", the record has \"%s\"", name, got, want);
      (*ret_n)++;
    }
  return NULL;
}

char *
test_journal_check_record (GPtrArray *entry, JsonObject *o)
{
  guint n = 0, fusebox = 0;
  g_autofree char *why = test_journal_check_members (entry, o, "FUSEBOX", &n);
  g_autofree char *message = NULL;
  g_autofree char *priority = NULL;
  g_autofree char *ident = NULL;
  const char *decision = json_object_has_member (o, "decision") ? json_object_get_string_member (o, "decision") : NULL;
  const char *want_priority = json_object_has_member (o, "notice")                  ? "4"
                              : decision != NULL && strcmp (decision, "allow") != 0 ? "5"
                                                                                    : "6";

  if (why != NULL)
    return g_steal_pointer (&why);
  for (guint i = 0; i < entry->len; i++)
    if (g_str_has_prefix (((TestJournalField *)entry->pdata[i])->name, "FUSEBOX_"))
      fusebox++;
  if (fusebox != n)
    return g_strdup_printf ("%u FUSEBOX_ fields for %u members", fusebox, n);
  if (entry->len != n + 3)
    return g_strdup_printf ("%u fields, expected the %u members, MESSAGE, PRIORITY and SYSLOG_IDENTIFIER", entry->len,
                            n);
  message = test_journal_get (entry, "MESSAGE");
  priority = test_journal_get (entry, "PRIORITY");
  ident = test_journal_get (entry, "SYSLOG_IDENTIFIER");
  if (message == NULL || test_journal_count (entry, "MESSAGE") != 1 || strchr (message, '\n') != NULL)
    return g_strdup ("MESSAGE is not one line, once");
  for (const char *p = message; *p != '\0'; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      return g_strdup_printf ("MESSAGE holds the control character 0x%02x", (unsigned char)*p);
  if (priority == NULL || strcmp (priority, want_priority) != 0)
    return g_strdup_printf ("PRIORITY=%s, expected %s", priority, want_priority);
  if (ident == NULL || strcmp (ident, "fusebox") != 0)
    return g_strdup_printf ("SYSLOG_IDENTIFIER=%s", ident);
  return NULL;
}

void
test_journal_assert_records (GPtrArray *entries, GPtrArray *records, const char *what)
{
  if (entries->len != records->len)
    fail_msg ("%s: %u journal entries for %u records", what, entries->len, records->len);
  for (guint i = 0; i < records->len; i++)
    {
      g_autofree char *why = test_journal_check_record (entries->pdata[i], records->pdata[i]);
      if (why != NULL)
        fail_msg ("%s: record %u: %s", what, i + 1, why);
    }
}
