# fusebox — what the shell benchmarks share: sourced, not run.
#
#   bench_find_fusebox REPO   prints the first built fusebox below REPO
#                             (build/, then build-*/), or nothing
#   need COMMAND PACKAGE      notes PACKAGE as missing when COMMAND is
#   bench_check_missing NAME  exits 1 naming the missing packages and the
#                             apt-get line that installs them
#   bench_check_fusebox NAME PATH
#                             exits 1 unless PATH is an executable fusebox

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
