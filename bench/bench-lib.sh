# fusebox — what the shell benchmarks share: sourced, not run.
#
#   bench_find_fusebox REPO   prints the first built fusebox below REPO
#                             (build/, then build-*/), or nothing
#   need COMMAND PACKAGE      notes PACKAGE as missing when COMMAND is
#   bench_check_missing NAME  exits 1 naming the missing packages and the
#                             apt-get line that installs them
#   bench_check_fusebox NAME PATH
#                             exits 1 unless PATH is an executable fusebox
#   bench_usage [CODE]        prints the running script's header comment
#                             (from line 2 to `set -euo`) and exits CODE (0)
#   bench_bad_argument ARG    says ARG is unknown, prints the usage, exits 2
#   bench_need_root NAME WHY  exits 1 unless run as root, saying WHY it must

bench_find_fusebox() {
  local b
  for b in "$1"/build/launcher/fusebox "$1"/build-*/launcher/fusebox; do
    if [ -x "$b" ]; then
      echo "$b"
      return
    fi
  done
}

missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$2 (for $1)"); }

bench_check_missing() {
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "$1: missing Debian packages:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  echo "install them with: apt-get install $(printf '%s\n' "${missing[@]}" | cut -d' ' -f1 | sort -u | tr '\n' ' ')" >&2
  exit 1
}

bench_check_fusebox() {
  if [ -z "$2" ] || [ ! -x "$2" ]; then
    echo "$1: no fusebox binary: build it (meson setup build && ninja -C build) or pass --fusebox PATH" >&2
    exit 1
  fi
}

bench_usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
  exit "${1:-0}"
}

bench_bad_argument() {
  echo "${0##*/}: unknown argument $1" >&2
  bench_usage 2 >&2
}

bench_need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "$1: run it as root ($2)" >&2
    exit 1
  fi
}
