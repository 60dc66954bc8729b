/* fusebox — the access log's systemd journal output.
 *
 * One journal entry per record, with the record's members as fields
 * (FUSEBOX_RUN, FUSEBOX_SEQ, FUSEBOX_OP, FUSEBOX_PATH, FUSEBOX_DECISION,
 * FUSEBOX_RULE, FUSEBOX_WHY ...), so that `journalctl
 * FUSEBOX_DECISION=deny` finds the refusals and a fleet ships them with the
 * tools it already has.  Written with the journal's native protocol
 * (systemd's "Native Journal Protocol"), not libsystemd: one datagram per
 * entry to /run/systemd/journal/socket, a field per line, and an entry too
 * large for a datagram in a sealed memfd passed with SCM_RIGHTS.
 *
 * The file is the log; the journal is a copy, and never costs the file a
 * record or a moment:
 *  - write() only keeps a copy of the record's line (the core flushed the
 *    file first); the loop's thread encodes it and sends it, so a FUSE
 *    worker never encodes an entry nor makes a system call for the
 *    journal.  The socket is non-blocking: an entry the journal can't take
 *    yet (its queue is full: EAGAIN) waits, and the loop sends it when the
 *    socket is writable again.  What waits is bounded
 *    (FB_LOG_JOURNAL_MAX_ENTRIES, FB_LOG_JOURNAL_MAX_BYTES); past the bound
 *    a record is counted, not sent.
 *  - A journal that is absent or refuses (ENOENT, ECONNREFUSED, EACCES,
 *    EMSGSIZE ...) is said once on standard error; the records it misses
 *    are counted, and the log ends with a "journal-incomplete" notice that
 *    counts them (ipc-log.c).  While it is away, records are counted as
 *    they come; the loop tries to connect again at most once a second,
 *    when records come.
 *  - Values are exact and can't forge a field: names are fusebox's own
 *    (FUSEBOX_ and the record's member names); a value that holds a newline
 *    is written length-prefixed, so a file name with "\nFUSEBOX_DECISION=allow"
 *    in it stays one value.  Invalid UTF-8 is as in the file: U+FFFD in the
 *    value, the exact bytes in FUSEBOX_<NAME>_B64.  MESSAGE, for people, is
 *    escaped as `fusebox log` escapes.
 *
 * Threads and locks: write() and flush() run under the core's writer lock
 * on any thread and take lock (what waits, the counts) for a moment; the
 * loop's thread alone connects, encodes, sends, closes and watches the
 * socket, and holds no lock while it encodes or sends. */
#include "ipc/ipc-log-output.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define RECONNECT_USEC (1 * G_USEC_PER_SEC)
/* At close, how long the journal may take no entry before the rest is
 * counted: a journal that reads at all drains far faster. */
#define FINISH_WAIT_MS 250
/* journald's own receive buffer; a larger send buffer lets more entries
 * wait in the kernel than in the backlog. */
#define SNDBUF_SIZE (8 * 1024 * 1024)
#define FIELD_NAME_MAX 64
#define MAX_DEPTH 8

typedef struct
{
  GSource source;
  FbLogJournal *journal;
} JournalSource;

/* A record waiting for the journal: its line, and once encoded (a send
 * that found the journal full) its entry. */
typedef struct
{
  char *line;
  gsize len;
  GBytes *entry;
} Waiting;

struct FbLogJournal
{
  FbLogOutput output;
  char *socket_path;

  /* The loop's thread only. */
  GSource *source;
  gpointer fd_tag;
  int watched_fd;
  int fd;           /* connected, or -1 */
  GString *scratch; /* the entry being encoded */

  GMutex lock;         /* everything below */
  gboolean gone;       /* no journal connected: records are counted as they come */
  gint64 reconnect_at; /* monotonic: the loop's next try */
  gboolean wake_armed; /* the loop's source will run */
  GQueue backlog;      /* Waiting*, oldest first */
  gsize backlog_bytes;
  guint64 sent;
  guint64 not_sent;
  int refused; /* the first refusal's errno, 0: none */
  char *why;   /* that refusal, for people */
  gboolean finished;
};

static void
waiting_free (Waiting *w)
{
  g_free (w->line);
  g_bytes_unref (w->entry); /* takes NULL */
  g_free (w);
}

/* --- the native protocol ------------------------------------------------- */

static gboolean
field_name_valid (const char *name, gsize len)
{
  if (len == 0 || len > FIELD_NAME_MAX || name[0] == '_' || g_ascii_isdigit (name[0]))
    return FALSE;
  for (gsize i = 0; i < len; i++)
    if (!(g_ascii_isupper (name[i]) || g_ascii_isdigit (name[i]) || name[i] == '_'))
      return FALSE;
  return TRUE;
}

gboolean
fb_journal_append_field (GString *out, const char *name, const char *value, gsize len)
{
  gsize name_len = strlen (name);

  if (!field_name_valid (name, name_len))
    return FALSE;
  g_string_append_len (out, name, (gssize)name_len);
  if (memchr (value, '\n', len) == NULL && memchr (value, '\0', len) == NULL)
    {
      g_string_append_c (out, '=');
      g_string_append_len (out, value, (gssize)len);
    }
  else
    {
      guint64 le = GUINT64_TO_LE ((guint64)len);

      g_string_append_c (out, '\n');
      g_string_append_len (out, (const char *)&le, sizeof le);
      g_string_append_len (out, value, (gssize)len);
    }
  g_string_append_c (out, '\n');
  return TRUE;
}

/* --- a record's entry ---------------------------------------------------------- */

/* What MESSAGE and PRIORITY are made of. */
enum
{
  M_NOTICE,
  M_DECISION,
  M_OP,
  M_PATH,
  M_TARGET,
  M_COMM,
  M_PID,
  M_SESSION,
  M_ERROR,
  M_WHY,
  M_REPEAT_COUNT,
  M_N
};
#define FIELD(name)                                                                                                    \
  {                                                                                                                    \
    name, sizeof name - 1                                                                                              \
  }
static const struct
{
  const char *name;
  gsize len;
} message_fields[M_N] = {
  [M_NOTICE] = FIELD ("FUSEBOX_NOTICE"),
  [M_DECISION] = FIELD ("FUSEBOX_DECISION"),
  [M_OP] = FIELD ("FUSEBOX_OP"),
  [M_PATH] = FIELD ("FUSEBOX_PATH"),
  [M_TARGET] = FIELD ("FUSEBOX_TARGET"),
  [M_COMM] = FIELD ("FUSEBOX_COMM"),
  [M_PID] = FIELD ("FUSEBOX_PID"),
  [M_SESSION] = FIELD ("FUSEBOX_SESSION"),
  [M_ERROR] = FIELD ("FUSEBOX_ERROR"),
  [M_WHY] = FIELD ("FUSEBOX_WHY"),
  [M_REPEAT_COUNT] = FIELD ("FUSEBOX_REPEAT_COUNT"),
};
#undef FIELD

typedef struct
{
  const char *p, *end;
  GString *fields; /* FUSEBOX_* fields, in the record's order */
  GString *name;   /* the field name being built */
  GString *value;
  GString *message[M_N]; /* NULL: not in the record */
} Walk;

static void
skip_ws (Walk *w)
{
  while (w->p < w->end && (*w->p == ' ' || *w->p == '\t' || *w->p == '\n' || *w->p == '\r'))
    w->p++;
}

static int
hex4 (const char *p)
{
  int v = 0;

  for (int i = 0; i < 4; i++)
    {
      int d = g_ascii_xdigit_value (p[i]);
      if (d < 0)
        return -1;
      v = v * 16 + d;
    }
  return v;
}

/* The JSON string at w->p, decoded into OUT (exact bytes: \u0000 is a NUL,
 * a lone surrogate U+FFFD). */
static gboolean
read_string (Walk *w, GString *out)
{
  g_string_truncate (out, 0);
  if (w->p >= w->end || *w->p != '"')
    return FALSE;
  w->p++;
  while (w->p < w->end)
    {
      char c = *w->p++;
      int cp;

      if (c == '"')
        return TRUE;
      if (c != '\\')
        {
          g_string_append_c (out, c);
          continue;
        }
      if (w->p >= w->end)
        return FALSE;
      c = *w->p++;
      switch (c)
        {
          case '"':
          case '\\':
          case '/':
            g_string_append_c (out, c);
            continue;
          case 'b':
            g_string_append_c (out, '\b');
            continue;
          case 'f':
            g_string_append_c (out, '\f');
            continue;
          case 'n':
            g_string_append_c (out, '\n');
            continue;
          case 'r':
            g_string_append_c (out, '\r');
            continue;
          case 't':
            g_string_append_c (out, '\t');
            continue;
          case 'u':
            break;
          default:
            return FALSE;
        }
      if (w->end - w->p < 4 || (cp = hex4 (w->p)) < 0)
        return FALSE;
      w->p += 4;
      if (cp >= 0xd800 && cp <= 0xdbff)
        {
          int lo = -1;

          if (w->end - w->p >= 6 && w->p[0] == '\\' && w->p[1] == 'u')
            lo = hex4 (w->p + 2);
          if (lo >= 0xdc00 && lo <= 0xdfff)
            {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
              w->p += 6;
            }
          else
            cp = 0xfffd;
        }
      else if (cp >= 0xdc00 && cp <= 0xdfff)
        cp = 0xfffd;
      if (cp == 0)
        g_string_append_c (out, '\0');
      else
        g_string_append_unichar (out, (gunichar)cp);
    }
  return FALSE;
}

/* A member's key onto the field name: upper case, anything but a letter or
 * a digit as '_'. */
static void
append_key (GString *name, const GString *key)
{
  g_string_append_c (name, '_');
  for (gsize i = 0; i < key->len; i++)
    {
      char c = key->str[i];
      g_string_append_c (name, g_ascii_isalnum (c) ? g_ascii_toupper (c) : '_');
    }
}

static void
add_field (Walk *w, const char *value, gsize len)
{
  if (!fb_journal_append_field (w->fields, w->name->str, value, len))
    return;
  for (guint i = 0; i < M_N; i++)
    if (w->name->len == message_fields[i].len && memcmp (w->name->str, message_fields[i].name, w->name->len) == 0)
      {
        if (w->message[i] == NULL)
          w->message[i] = g_string_new (NULL);
        g_string_assign (w->message[i], "");
        g_string_append_len (w->message[i], value, (gssize)len);
      }
}

/* The end of the value at w->p that is not a string or an object: a
 * number, true, false, null, or an array (kept as its JSON text). */
static gboolean
skip_other (Walk *w)
{
  int depth = 0;

  while (w->p < w->end)
    {
      char c = *w->p;

      if (c == '"')
        {
          if (!read_string (w, w->value))
            return FALSE;
          continue;
        }
      if (c == '[' || c == '{')
        depth++;
      else if (c == ']' || c == '}')
        {
          if (depth == 0)
            return TRUE;
          depth--;
        }
      else if (c == ',' && depth == 0)
        return TRUE;
      w->p++;
    }
  return depth == 0;
}

static gboolean read_object (Walk *w, int depth);

static gboolean
read_value (Walk *w, int depth)
{
  const char *start;

  skip_ws (w);
  if (w->p >= w->end)
    return FALSE;
  if (*w->p == '"')
    {
      if (!read_string (w, w->value))
        return FALSE;
      add_field (w, w->value->str, w->value->len);
      return TRUE;
    }
  if (*w->p == '{')
    return read_object (w, depth + 1);
  start = w->p;
  if (!skip_other (w))
    return FALSE;
  while (w->p > start && g_ascii_isspace (w->p[-1]))
    w->p--;
  if (w->p == start)
    return FALSE;
  if (w->p - start != 4 || memcmp (start, "null", 4) != 0)
    add_field (w, start, (gsize)(w->p - start));
  return TRUE;
}

/* The object at w->p: each member's value as the field name so far plus
 * the member's key. */
static gboolean
read_object (Walk *w, int depth)
{
  g_autoptr (GString) key = g_string_new (NULL);
  gsize name_len = w->name->len;

  if (depth > MAX_DEPTH || w->p >= w->end || *w->p != '{')
    return FALSE;
  w->p++;
  skip_ws (w);
  if (w->p < w->end && *w->p == '}')
    {
      w->p++;
      return TRUE;
    }
  for (;;)
    {
      skip_ws (w);
      if (!read_string (w, key))
        return FALSE;
      skip_ws (w);
      if (w->p >= w->end || *w->p != ':')
        return FALSE;
      w->p++;
      append_key (w->name, key);
      if (!read_value (w, depth))
        return FALSE;
      g_string_truncate (w->name, name_len);
      skip_ws (w);
      if (w->p >= w->end)
        return FALSE;
      if (*w->p == '}')
        {
          w->p++;
          return TRUE;
        }
      if (*w->p != ',')
        return FALSE;
      w->p++;
    }
}

static void
append_safe (GString *out, const GString *s)
{
  fb_text_append_safe_full (out, s->str, s->len, FB_TEXT_ELIDE);
}

/* S between BEFORE and AFTER, when the record has it. */
static void
append_part (GString *out, const char *before, const GString *s, const char *after)
{
  if (s == NULL)
    return;
  g_string_append (out, before);
  append_safe (out, s);
  g_string_append (out, after);
}

/* The record for people, one line: "deny open /etc/shadow (EACCES) by
 * cat[4242]: secrets stay on the host". */
static void
append_message (GString *out, GString *const m[M_N])
{
  if (m[M_NOTICE] != NULL)
    {
      append_safe (out, m[M_NOTICE]);
      append_part (out, ": ", m[M_WHY], "");
      return;
    }
  for (guint i = M_DECISION; i <= M_PATH; i++)
    if (m[i] != NULL)
      {
        if (i != M_DECISION)
          g_string_append_c (out, ' ');
        append_safe (out, m[i]);
      }
  append_part (out, " \u2192 ", m[M_TARGET], "");
  append_part (out, " (", m[M_ERROR], ")");
  if (m[M_COMM] != NULL || m[M_SESSION] != NULL)
    {
      append_part (out, " by ", m[M_COMM] != NULL ? m[M_COMM] : m[M_SESSION], "");
      append_part (out, "[", m[M_PID], "]");
    }
  append_part (out, ": ", m[M_WHY], "");
  append_part (out, " [", m[M_REPEAT_COUNT], " like this]");
}

gboolean
fb_journal_entry_from_record (GString *out, const char *line, gsize len)
{
  Walk w = { line, line + len, g_string_sized_new (512), g_string_new ("FUSEBOX"), g_string_new (NULL), { NULL } };
  g_autoptr (GString) message = g_string_sized_new (160);
  gboolean ok;
  const char *priority = "6"; /* LOG_INFO: an allowed access */

  skip_ws (&w);
  ok = read_object (&w, 0);
  skip_ws (&w);
  ok = ok && w.p == w.end;
  if (ok)
    {
      append_message (message, w.message);
      if (w.message[M_NOTICE] != NULL)
        priority = "4"; /* LOG_WARNING: the log says it is incomplete */
      else if (w.message[M_DECISION] != NULL && fb_decision_name_is_refusal (w.message[M_DECISION]->str))
        priority = "5"; /* LOG_NOTICE: a refusal */
      fb_journal_append_field (out, "MESSAGE", message->str, message->len);
      fb_journal_append_field (out, "PRIORITY", priority, 1);
      fb_journal_append_field (out, "SYSLOG_IDENTIFIER", "fusebox", strlen ("fusebox"));
      g_string_append_len (out, w.fields->str, (gssize)w.fields->len);
    }
  g_string_free (w.fields, TRUE);
  g_string_free (w.name, TRUE);
  g_string_free (w.value, TRUE);
  for (guint i = 0; i < M_N; i++)
    if (w.message[i] != NULL)
      g_string_free (w.message[i], TRUE);
  return ok;
}

/* --- the socket -------------------------------------------------------- */

/* Say once why the journal misses records.  lock held. */
static void
refused (FbLogJournal *j, int err)
{
  if (j->refused != 0)
    return;
  j->refused = err;
  switch (err)
    {
      case ENOENT:
        j->why = g_strdup_printf ("no journal listens at %s (is systemd-journald running?)", j->socket_path);
        break;
      case ECONNREFUSED:
      case ENOTCONN:
      case ECONNRESET:
      case EPIPE:
        j->why = g_strdup_printf ("the journal at %s is not running (%s)", j->socket_path, g_strerror (err));
        break;
      case EACCES:
      case EPERM:
        j->why = g_strdup_printf ("fusebox may not write to the journal at %s (%s)", j->socket_path, g_strerror (err));
        break;
      case EAGAIN:
        j->why = g_strdup_printf ("the journal at %s took records slower than they came, and %u were waiting",
                                  j->socket_path, (unsigned)FB_LOG_JOURNAL_MAX_ENTRIES);
        break;
      case EMSGSIZE:
        j->why = g_strdup_printf ("the journal at %s refused a record as too large", j->socket_path);
        break;
      default:
        j->why = g_strdup_printf ("the journal at %s refused a record: %s", j->socket_path, g_strerror (err));
        break;
    }
  g_warning ("access log: %s; every record still goes to the log file, and those the journal misses are counted",
             j->why);
}

/* lock held */
static void
drop_backlog (FbLogJournal *j)
{
  Waiting *w;

  while ((w = g_queue_pop_head (&j->backlog)) != NULL)
    {
      waiting_free (w);
      j->not_sent++;
    }
  j->backlog_bytes = 0;
}

/* An entry too large for a datagram: in a sealed memfd, passed with
 * SCM_RIGHTS (journald reads it and checks the seals).  Returns 0 or
 * -errno. */
static int
send_memfd (int fd, const char *data, gsize len)
{
  _fb_cleanup_fd_ int mfd = memfd_create ("fusebox-journal-entry", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  union
  {
    struct cmsghdr align;
    char buf[CMSG_SPACE (sizeof (int))];
  } control;
  struct msghdr mh = { 0 };
  struct cmsghdr *cmsg;
  gsize done = 0;
  int r = 0;

  if (mfd < 0)
    return -errno;
  while (done < len && r == 0)
    {
      ssize_t n = write (mfd, data + done, len - done);
      if (n < 0 && errno != EINTR)
        r = -errno;
      else if (n > 0)
        done += (gsize)n;
    }
  if (r == 0 && fcntl (mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
    r = -errno;
  if (r == 0)
    {
      memset (&control, 0, sizeof control);
      mh.msg_control = control.buf;
      mh.msg_controllen = sizeof control.buf;
      cmsg = CMSG_FIRSTHDR (&mh);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN (sizeof (int));
      memcpy (CMSG_DATA (cmsg), &mfd, sizeof (int));
      if (sendmsg (fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        r = -errno;
    }
  return r;
}

int
fb_journal_send (int fd, const char *data, gsize len)
{
  if (send (fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
    return 0;
  if (errno == EMSGSIZE)
    return send_memfd (fd, data, len);
  return -errno;
}

/* The loop's thread, no lock held: connect when there is no journal and
 * it is time to try again. */
static void
reconnect (FbLogJournal *j)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  _fb_cleanup_fd_ int fd = -1;
  int size = SNDBUF_SIZE, err = 0;

  fb_fd_close (&j->fd);
  if (strlen (j->socket_path) >= sizeof sa.sun_path)
    err = ENAMETOOLONG;
  else
    {
      strcpy (sa.sun_path, j->socket_path);
      fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0)
        err = errno;
      else
        {
          if (setsockopt (fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0)
            (void)setsockopt (fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
          if (connect (fd, (struct sockaddr *)&sa, sizeof sa) < 0)
            err = errno;
          else
            j->fd = fb_steal_fd (&fd);
        }
    }
  g_mutex_lock (&j->lock);
  j->gone = j->fd < 0;
  j->reconnect_at = g_get_monotonic_time () + RECONNECT_USEC;
  if (err != 0)
    refused (j, err);
  g_mutex_unlock (&j->lock);
}

/* The loop's thread, no lock held: send what waits, oldest first, until the
 * journal takes no more.  Returns whether some still waits for room. */
static gboolean
send_backlog (FbLogJournal *j)
{
  for (;;)
    {
      Waiting *w;
      gsize len;
      const char *data;
      int r;

      g_mutex_lock (&j->lock);
      if (j->fd < 0 || j->gone)
        {
          drop_backlog (j);
          g_mutex_unlock (&j->lock);
          return FALSE;
        }
      w = g_queue_pop_head (&j->backlog);
      if (w != NULL)
        j->backlog_bytes -= w->len;
      g_mutex_unlock (&j->lock);
      if (w == NULL)
        return FALSE;

      if (w->entry == NULL)
        {
          g_string_truncate (j->scratch, 0);
          if (!fb_journal_entry_from_record (j->scratch, w->line, w->len))
            {
              /* not the core's JSON: still an entry, the line as the message */
              g_string_truncate (j->scratch, 0);
              fb_journal_append_field (j->scratch, "MESSAGE", w->line, w->len);
              fb_journal_append_field (j->scratch, "SYSLOG_IDENTIFIER", "fusebox", strlen ("fusebox"));
            }
          w->entry = g_bytes_new (j->scratch->str, j->scratch->len);
        }
      data = g_bytes_get_data (w->entry, &len);
      r = fb_journal_send (j->fd, data, len);

      g_mutex_lock (&j->lock);
      if (r == -EAGAIN || r == -ENOBUFS || r == -EINTR)
        {
          /* the loop sends it when the socket is writable */
          g_queue_push_head (&j->backlog, w);
          j->backlog_bytes += w->len;
          g_mutex_unlock (&j->lock);
          return TRUE;
        }
      waiting_free (w);
      if (r == 0)
        j->sent++;
      else
        {
          j->not_sent++;
          refused (j, -r);
          if (r == -ECONNREFUSED || r == -ENOTCONN || r == -ECONNRESET || r == -EPIPE || r == -ENOENT)
            j->gone = TRUE; /* the loop connects again when it is time */
        }
      g_mutex_unlock (&j->lock);
    }
}

/* The loop's thread: connect again when due, send what waits, and watch
 * the socket for room while some still waits. */
static gboolean
journal_dispatch (GSource *source, GSourceFunc callback, gpointer user_data)
{
  FbLogJournal *j = ((JournalSource *)source)->journal;
  gboolean full, retry;

  g_source_set_ready_time (source, -1);
  g_mutex_lock (&j->lock);
  j->wake_armed = FALSE;
  retry = j->gone && !j->finished && g_get_monotonic_time () >= j->reconnect_at && j->backlog.length > 0;
  g_mutex_unlock (&j->lock);
  if (retry)
    reconnect (j);
  full = send_backlog (j);

  if (j->watched_fd != j->fd)
    {
      if (j->fd_tag != NULL)
        g_source_remove_unix_fd (source, j->fd_tag);
      j->fd_tag = j->fd >= 0 ? g_source_add_unix_fd (source, j->fd, 0) : NULL;
      j->watched_fd = j->fd;
    }
  if (j->fd_tag != NULL)
    g_source_modify_unix_fd (source, j->fd_tag, full ? G_IO_OUT : 0);
  return G_SOURCE_CONTINUE;
}

static GSourceFuncs journal_source_funcs = {
  .dispatch = journal_dispatch,
};

/* --- the output ------------------------------------------------------------ */

static void
journal_write (FbLogOutput *output, const FbLogLine *record)
{
  FbLogJournal *j = container_of (output, FbLogJournal, output);
  Waiting *w;

  g_mutex_lock (&j->lock);
  if (j->finished)
    j->not_sent++;
  else if (j->gone && g_get_monotonic_time () < j->reconnect_at)
    j->not_sent++; /* no journal, and not yet time to look again */
  else if (j->backlog.length >= FB_LOG_JOURNAL_MAX_ENTRIES ||
           (j->backlog.length > 0 && j->backlog_bytes + record->len > FB_LOG_JOURNAL_MAX_BYTES))
    {
      j->not_sent++;
      refused (j, EAGAIN);
    }
  else
    {
      w = g_new0 (Waiting, 1);
      w->line = g_strndup (record->line, record->len);
      w->len = record->len;
      g_queue_push_tail (&j->backlog, w);
      j->backlog_bytes += w->len;
    }
  g_mutex_unlock (&j->lock);
}

/* Wake the loop, once per turn, when something waits for it. */
static gboolean
journal_flush (FbLogOutput *output)
{
  FbLogJournal *j = container_of (output, FbLogJournal, output);

  g_mutex_lock (&j->lock);
  if (j->backlog.length > 0 && !j->wake_armed && j->source != NULL)
    {
      j->wake_armed = TRUE;
      g_source_set_ready_time (j->source, 0);
    }
  g_mutex_unlock (&j->lock);
  return TRUE;
}

/* The loop's thread, at the end: every pusher has stopped. */
guint64
fb_log_journal_finish (FbLogJournal *j, char **ret_why)
{
  guint64 not_sent;
  gboolean finished;

  g_mutex_lock (&j->lock);
  finished = j->finished;
  g_mutex_unlock (&j->lock);
  if (!finished)
    {
      gint64 idle_since = g_get_monotonic_time ();
      guint64 sent = 0;

      gboolean retry;

      g_mutex_lock (&j->lock);
      retry = j->gone && j->backlog.length > 0;
      g_mutex_unlock (&j->lock);
      if (retry)
        reconnect (j);
      while (send_backlog (j))
        {
          struct pollfd pfd = { .fd = j->fd, .events = POLLOUT };

          /* bounded: a journal that takes nothing for FINISH_WAIT_MS gets
           * the rest counted instead of holding the end of the run */
          g_mutex_lock (&j->lock);
          if (j->sent > sent)
            idle_since = g_get_monotonic_time ();
          sent = j->sent;
          g_mutex_unlock (&j->lock);
          if (g_get_monotonic_time () - idle_since >= FINISH_WAIT_MS * 1000)
            break;
          (void)poll (&pfd, 1, FINISH_WAIT_MS);
        }
      g_mutex_lock (&j->lock);
      if (j->backlog.length > 0)
        refused (j, EAGAIN);
      drop_backlog (j);
      j->finished = TRUE;
      if (j->not_sent > 0)
        g_warning ("access log: the systemd journal missed %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                   " records, because %s; the log file has every one",
                   j->not_sent, j->not_sent + j->sent, j->why != NULL ? j->why : "it refused them");
      g_mutex_unlock (&j->lock);
    }
  g_mutex_lock (&j->lock);
  not_sent = j->not_sent;
  if (ret_why != NULL)
    *ret_why = g_strdup (j->why);
  g_mutex_unlock (&j->lock);
  return not_sent;
}

/* The count is the core's to write (fb_log_journal_finish): the journal
 * never fails the log. */
static gboolean
journal_close (FbLogOutput *output, GError **error)
{
  FbLogJournal *j = container_of (output, FbLogJournal, output);
  GSource *source;

  fb_log_journal_finish (j, NULL);
  g_mutex_lock (&j->lock);
  source = g_steal_pointer (&j->source);
  g_mutex_unlock (&j->lock);
  fb_source_clear (&source);
  fb_fd_close (&j->fd);
  return TRUE;
}

static void
journal_free (FbLogOutput *output)
{
  FbLogJournal *j = container_of (output, FbLogJournal, output);

  journal_close (output, NULL);
  g_queue_clear_full (&j->backlog, (GDestroyNotify)waiting_free);
  g_string_free (j->scratch, TRUE);
  g_mutex_clear (&j->lock);
  g_free (j->socket_path);
  g_free (j->why);
  g_free (j);
}

static const FbLogOutputOps journal_ops = {
  .write = journal_write,
  .flush = journal_flush,
  .close = journal_close,
  .free = journal_free,
};

FbLogJournal *
fb_log_journal_new (const char *socket_path, GMainContext *context)
{
  FbLogJournal *j = g_new0 (FbLogJournal, 1);

  j->output.ops = &journal_ops;
  j->socket_path = g_strdup (socket_path != NULL ? socket_path : FB_LOG_JOURNAL_SOCKET);
  j->scratch = g_string_sized_new (1024);
  j->fd = -1;
  j->watched_fd = -1;
  g_mutex_init (&j->lock);
  g_queue_init (&j->backlog);
  /* now, so that an absent journal is said before the first record */
  reconnect (j);
  j->source = g_source_new (&journal_source_funcs, sizeof (JournalSource));
  ((JournalSource *)j->source)->journal = j;
  g_source_set_name (j->source, "fusebox access log journal");
  g_source_attach (j->source, context);
  return j;
}

FbLogOutput *
fb_log_journal_output (FbLogJournal *journal)
{
  return &journal->output;
}
