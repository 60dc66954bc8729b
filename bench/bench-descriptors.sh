#!/bin/bash
# fusebox — what the descriptor budget (fs/fs-view-fd.c) costs: `find`
# through `fusebox mount` of two builds, side by side, rounds interleaved
# (each round mounts both, in an order reversed every other round), medians
# of --runs rounds.  Workloads, over DIR (default /usr: more directories
# than the directory cache holds at a limit of 20,000):
#
#   cold        find DIR -type d, the first run after the mount: every name
#               is a new node, every directory a new descriptor
#   warm        the same again: the kernel's caches answer most of it
#   revalidate  with --cache-timeout 0, the second run: every name is asked
#               again and the daemon finds its node (the warm lookup path;
#               with more directories than the cache holds, a directory's
#               descriptor may have to be opened again first)
#
# Each cell is the wall time of the find, then the daemon's CPU time (user +
# system, from /proc/PID/stat) in it: less moved by a busy machine.
# --nofile N runs both daemons with RLIMIT_NOFILE N (soft and hard): a build
# without the budget fails once DIR has more directories than that.
#
# Run by hand as root:
#   bench/bench-descriptors.sh --before FUSEBOX --after FUSEBOX [--runs N] [--dir DIR] [--nofile N]
set -euo pipefail

runs=5
dir=/usr
nofile=
before=
after=

while [ $# -gt 0 ]; do
  case "$1" in
    --before) before="$2"; shift 2 ;;
    --after) after="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --nofile) nofile="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-descriptors.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$before" ] || [ -z "$after" ]; then
  echo "bench-descriptors.sh: --before and --after name the two fusebox binaries" >&2
  exit 2
fi
if [ "$(id -u)" != 0 ]; then
  echo "bench-descriptors.sh: run as root (the mounts show the host's / with allow_other)" >&2
  exit 2
fi

work=$(mktemp -d /var/tmp/fusebox-bench-fd-XXXXXX)
mnt=$work/mnt
mkdir "$mnt"
# the mounts' run directories go with the rest
export XDG_STATE_HOME=$work/state
cat >"$work/policy.json" <<EOF
{ "version": 1, "rules": [ { "path": "/", "access": "read", "why": "the system" } ] }
EOF
cleanup() {
  fusermount3 -u -q "$mnt" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

daemon=
mount_one() { # BINARY [OPTIONS...]; sets $daemon
  local bin=$1 out
  shift
  if [ -n "$nofile" ]; then
    out=$(prlimit --nofile="$nofile:$nofile" "$bin" mount --policy "$work/policy.json" --log "$work/access.jsonl" "$@" "$mnt")
  else
    out=$("$bin" mount --policy "$work/policy.json" --log "$work/access.jsonl" "$@" "$mnt")
  fi
  daemon=$(echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p' | head -1)
}

cpu_ticks() { # the daemon's user + system time, in clock ticks
  awk '{ print $14 + $15 }' "/proc/$daemon/stat"
}

unmount_one() {
  fusermount3 -u "$mnt"
  # the daemon ends when the kernel ends the connection
  while grep -q " $mnt fuse" /proc/mounts; do sleep 0.05; done
  sleep 0.2
}

hz=$(getconf CLK_TCK)
timed() { # prints "wall/cpu" seconds; "fail" when find reports an error
  local t0=$EPOCHREALTIME c0 c1 n
  c0=$(cpu_ticks)
  n=$(find "$mnt$dir" -type d 2>"$work/find.err" | wc -l) || true
  local t1=$EPOCHREALTIME
  c1=$(cpu_ticks)
  if [ -s "$work/find.err" ]; then
    echo "find: $(head -1 "$work/find.err") (and $(wc -l <"$work/find.err") errors; $n directories)" >&2
    echo fail
    return
  fi
  echo "$t0 $t1 $c0 $c1 $hz" | awk '{ printf "%.3f/%.2f\n", $2 - $1, ($4 - $3) / $5 }'
}

declare -A results
one_round() { # NAME BINARY
  local name=$1 bin=$2
  sync
  echo 2 >/proc/sys/vm/drop_caches
  mount_one "$bin"
  results[$name.cold]+="$(timed) "
  results[$name.warm]+="$(timed) "
  unmount_one
  mount_one "$bin" --cache-timeout 0
  timed >/dev/null
  results[$name.revalidate]+="$(timed) "
  unmount_one
}

for ((i = 0; i < runs; i++)); do
  if ((i % 2 == 0)); then
    one_round before "$before"
    one_round after "$after"
  else
    one_round after "$after"
    one_round before "$before"
  fi
done

median() { # of the wall times, and of the CPU times, apart
  local cells
  cells=$(tr ' ' '\n' | grep -v '^$')
  if [ -z "$cells" ]; then echo -; return; fi
  if echo "$cells" | grep -q fail; then echo fail; return; fi
  echo "$(echo "$cells" | cut -d/ -f1 | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')/$(echo "$cells" | cut -d/ -f2 | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')"
}

echo "find $dir -type d ($(find "$dir" -type d 2>/dev/null | wc -l) directories), ${nofile:+RLIMIT_NOFILE $nofile, }median of $runs, seconds: wall/daemon CPU"
printf "%-12s %14s %14s\n" "" before after
for w in cold warm revalidate; do
  printf "%-12s %14s %14s\n" "$w" "$(echo "${results[before.$w]}" | median)" "$(echo "${results[after.$w]}" | median)"
done
for w in cold warm revalidate; do
  echo "  $w before: ${results[before.$w]}"
  echo "  $w after:  ${results[after.$w]}"
done
