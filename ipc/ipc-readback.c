/* fusebox — reading fusebox's own files back: access logs and run.json.
 *
 * `fusebox log`, `report` and `runs` read files in run directories, and
 * whoever can write there (a sandbox under a policy that showed them, before
 * they were hidden by identity; another user, for a --run-dir or --log in a
 * shared place) chooses what is at each name.  So:
 *  - A name is opened only when it is a regular file, never through a
 *    symbolic link (a link would show another file as the log), and never
 *    blocking in open(2) (a sandbox that replaced its log with a FIFO hung
 *    `fusebox log` for good): policy/util-file.c's reader, FB_FILE_OWN.
 *  - Content is bounded: a whole file read here has a size limit, and JSON
 *    text is measured for nesting before json-glib parses it (its parser
 *    and its tree's destructor recurse once per level: a line of a few
 *    hundred thousand '[' overflowed the stack of `fusebox log`).
 *
 * No state; any thread. */
#include "ipc/ipc-private.h"
#include "policy/util-file.h"
#include "policy/util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *
fb_ipc_file_kind (mode_t mode)
{
  return fb_file_kind (mode);
}

/* policy/util-file.c's refusal, in this module's domain. */
static void
propagate (GError *local, GError **error)
{
  int code = FB_IPC_ERROR_IO;

  if (g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
    code = FB_IPC_ERROR_NOT_FOUND;
  else if (g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_INVAL))
    code = FB_IPC_ERROR_INVALID;
  g_set_error_literal (error, FB_IPC_ERROR, code, local->message);
  g_error_free (local);
}

int
fb_ipc_open_regular (int dir_fd, const char *name, const char *path, const char *what, GError **error)
{
  GError *local = NULL;
  int fd = fb_file_open_regular (dir_fd, name, path, what, FB_FILE_OWN, &local);

  if (fd < 0)
    propagate (local, error);
  return fd;
}

char *
fb_ipc_read_regular (const char *path, const char *what, gsize max, gsize *ret_len, GError **error)
{
  GError *local = NULL;
  char *text = fb_file_read_regular (path, what, FB_FILE_OWN, max, ret_len, &local);

  if (text == NULL)
    propagate (local, error);
  return text;
}

gboolean
fb_json_is_plain (const char *text, gsize len, guint max_depth, gboolean *ret_too_deep)
{
  guint depth = 0;
  gboolean in_string = FALSE;

  *ret_too_deep = FALSE;
  for (gsize i = 0; i < len; i++)
    {
      char c = text[i];

      if (in_string)
        {
          if (c == '\\')
            i++; /* the escaped character, whatever it is */
          else if (c == '"')
            in_string = FALSE;
          continue;
        }
      /* Outside strings, only what plain JSON writes: json-glib also takes
       * comments and single-quoted strings, inside which brackets would not
       * count here but a '"' would. */
      if (c == '"')
        in_string = TRUE;
      else if (c == '[' || c == '{')
        {
          if (++depth > max_depth)
            {
              *ret_too_deep = TRUE;
              return FALSE;
            }
        }
      else if (c == ']' || c == '}')
        {
          if (depth > 0)
            depth--;
        }
      else if (strchr (" \t\r\n:,-+.0123456789eEtrufalsn", c) == NULL || c == '\0')
        return FALSE;
    }
  return TRUE;
}
