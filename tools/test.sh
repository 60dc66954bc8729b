#!/usr/bin/env bash
# The README's second command: install, build, and run the whole test suite.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUSEBOX_BUILD_DIR:-$here/build}
"$here/tools/setup.sh"

exec meson test -C "$build" --print-errorlogs "$@"
