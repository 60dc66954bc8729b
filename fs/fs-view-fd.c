/* fusebox — the view's host descriptors: who may read a node's, and how.
 * Every *at() call below a node goes through node_fd_get(): never through
 * the field itself. */
#include "fs/fs-private.h"

bool
node_is_host_dir (const FbViewNode *node)
{
  return node->kind == NODE_HOST && S_ISDIR (node->type);
}

int
node_fd_get (FbViewNode *node, NodeFd *hold)
{
  hold->node = NULL;
  hold->fd = -1;
  if (node->kind != NODE_HOST || node->host_fd < 0)
    return -EBADF;
  return node->host_fd;
}

void
node_fd_put (NodeFd *hold)
{
  hold->node = NULL;
  hold->fd = -1;
}
