/* fusebox policy — placeholder until the policy commands land. */
#include "launcher/launcher-private.h"

int
fb_cmd_policy (int argc, char **argv)
{
  fb_cmd_error ("policy: not built yet");
  return FB_EXIT_FAILURE;
}
