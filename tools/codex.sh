#!/usr/bin/env bash
# The Codex CLI the agent tests drive, pinned to one version and installed
# once into a cache outside the checkout:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/fusebox/codex-VERSION
# Installs Debian's nodejs and npm (and git, which the agent test uses) when
# they are missing, then @openai/codex@VERSION from the npm registry.
# Idempotent: when the pinned version is there, it only prints its path.
#
#   tools/codex.sh           install if needed, print the codex binary's path
#   tools/codex.sh --path    print where it is (or would be), install nothing
#   tools/codex.sh --version print the pinned version
set -euo pipefail

# The version the tests and docs/api.md name.  Change it here only.
version=0.171.0

cache=${XDG_CACHE_HOME:-$HOME/.cache}/fusebox/codex-$version
codex=$cache/node_modules/.bin/codex

case ${1:-} in
  --path)
    echo "$codex"
    exit 0
    ;;
  --version)
    echo "$version"
    exit 0
    ;;
  "") ;;
  *)
    echo "usage: tools/codex.sh [--path|--version]" >&2
    exit 2
    ;;
esac

installed() {
  [ -x "$codex" ] && [ "$("$codex" --version 2>/dev/null)" = "codex-cli $version" ]
}

if installed; then
  echo "$codex"
  exit 0
fi

# shellcheck source=tools/apt-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt-lib.sh"
missing=()
for p in $(apt_missing nodejs npm git); do
  # A node and npm of another origin (nodesource, nvm) will do as well.
  case $p in
    nodejs) command -v node >/dev/null && continue ;;
    npm) command -v npm >/dev/null && continue ;;
    git) command -v git >/dev/null && continue ;;
  esac
  missing+=("$p")
done
apt_install codex "${missing[@]}"

echo "fusebox codex: installing @openai/codex@$version into $cache" >&2
# A fresh directory each time: a half-finished install is never reused.
rm -rf "$cache.tmp"
mkdir -p "$cache.tmp"
npm install --prefix "$cache.tmp" --no-audit --no-fund --no-update-notifier --save-exact --loglevel=error \
  "@openai/codex@$version" >&2
rm -rf "$cache"
mv "$cache.tmp" "$cache"
if ! installed; then
  echo "fusebox codex: $codex does not report codex-cli $version after the install" >&2
  exit 1
fi
echo "$codex"
