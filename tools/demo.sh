#!/usr/bin/env bash
# The README's first command: install, build, and show fusebox deciding on
# the built-in default policy.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUSEBOX_BUILD_DIR:-$here/build}
"$here/tools/setup.sh"

fusebox=$build/launcher/fusebox
ws=$(mktemp -d /tmp/fusebox-demo.XXXXXX)
trap 'rm -rf "$ws"' EXIT

echo "== fusebox policy explain, built-in default, workspace $ws"
"$fusebox" policy explain --policy builtin:default --workspace "$ws" \
  /etc/passwd /usr/bin/env "$ws/notes.txt" "$ws/.git/config" /home /root/.ssh/id_ed25519 "$HOME" /tmp/scratch /proc/self
