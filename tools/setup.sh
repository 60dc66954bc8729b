#!/usr/bin/env bash
# Install what fusebox needs on Debian 12 (as root), then configure and build.
# Idempotent: when nothing is missing it only runs ninja, which takes seconds.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUSEBOX_BUILD_DIR:-$here/build}

packages=(
  gcc libc6-dev pkg-config meson ninja-build
  libfuse3-dev fuse3 libseccomp-dev libcap-dev
  libglib2.0-dev libjson-glib-dev libsoup-3.0-dev libcmocka-dev
  clang libclang-rt-14-dev clang-format
  python3 python3-websockets
  bubblewrap util-linux
  curl git
)

# shellcheck source=tools/apt-lib.sh
. "$here/tools/apt-lib.sh"
mapfile -t missing < <(apt_missing "${packages[@]}")
apt_install setup "${missing[@]}"

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$here" >/dev/null
fi
ninja -C "$build" >/dev/null
