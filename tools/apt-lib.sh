# shellcheck shell=bash
# fusebox — installing Debian packages for the tools: sourced, not run.
#
#   apt_missing PACKAGE...     prints, one a line, each PACKAGE dpkg does not
#                              list as installed
#   apt_install WHO PACKAGE... installs the PACKAGEs as root; as anyone else
#                              exits 1 naming them and the apt-get line (no
#                              PACKAGE: does nothing)

apt_missing() {
  local p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      echo "$p"
    fi
  done
}

apt_install() {
  local who=$1
  shift
  [ $# -gt 0 ] || return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "fusebox $who: missing Debian packages: $*" >&2
    echo "fusebox $who: run this as root, or: sudo apt-get install $*" >&2
    exit 1
  fi
  echo "fusebox $who: installing $*" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
