#!/usr/bin/env bash
# The README's second command: install, build, and run the whole test suite.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUSEBOX_BUILD_DIR:-$here/build}
"$here/tools/setup.sh"
# The Codex CLI the agent tests drive (suite codex): installed once into
# ~/.cache/fusebox, outside the checkout.  Without it those tests skip (in
# CI, where every test must run, they fail).
"$here/tools/codex.sh" >/dev/null ||
  echo "fusebox test: could not install the Codex CLI (tools/codex.sh); the codex tests will not run" >&2

exec meson test -C "$build" --print-errorlogs "$@"
