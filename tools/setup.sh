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

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "fusebox setup: missing Debian packages: ${missing[*]}" >&2
    echo "fusebox setup: run this as root, or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "fusebox setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$here" >/dev/null
fi
ninja -C "$build" >/dev/null
