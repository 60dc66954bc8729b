#!/bin/bash
# fusebox — a tool's first and second walk of a big tree through a view:
# the host, bindfs and fusebox side by side in one run, on a generated
# 30,000-file git repository and on /usr:
#
#   git    GIT_OPTIONAL_LOCKS=0 git -C REPO status >/dev/null
#   find   find DIR >/dev/null                        (DIR: --find-dir, default /usr)
#   stat   find DIR -printf '%i %s\n' >/dev/null      (every name stat'ed: a node each)
#   grep   grep -r --exclude-dir=.git ZZZ REPO         (reads every file, as rg does)
#   walk   find FLAT -printf '%i %s\n' >/dev/null over 1,000,000 empty files
#          (bench-gen-tree.sh flat), fusebox only, --walk-runs runs (default
#          1): more names than a view keeps (FB_VIEW_NODES_MAX)
#   serve  bench-serve-warm: `git status` in REPO as the first, second and
#          third process/start of a `fusebox serve` session (a fresh view,
#          then the view the first left) under the same read-only policy,
#          against the host, --runs rounds
#   start  bench-startup --session: `fusebox run -- true` and `fusebox run
#          --session NAME -- true` (a kept view) against bwrap, 20 runs
#
# Setups, each measured with its host directory's contents in the page
# cache (an untimed run first):
#   host      the command on the host directory
#   bindfs    a bindfs mount of the directory, made for the run (cold: its
#             kernel caches are empty)
#   fresh     `fusebox mount` under a read-only policy (/ read, .git read),
#             made for the run: every name is a first lookup
#   again     the same command again on that mount, right after: what the
#             kernel caches (600 s) keep
#   again2    and a third time: what the first walk's uncached listings and
#             reads no longer cost (they mark the atime stale, whatever the
#             mount's options, and the second walk's stats fetch it)
#   run       `fusebox run --policy P -- COMMAND`: a fresh view, with the
#             sandbox's start
#   base      (--baseline FUSEBOX) another fusebox build's fresh mount
#   base-again, base-again2  and its second and third runs
# Each cell is the median wall time of --runs runs; fusebox and bindfs
# cells also give the daemon's CPU time (user + system) in that run.  Rounds
# are interleaved (every setup once per round, the order rotated per round)
# so that a change of load hits every setup alike.  The untimed warm-up run
# of each setup is counted instead: the FUSE requests the command sent
# (perf's fuse:fuse_request_send tracepoint, when perf is installed).
#
# find, stat and walk also report the daemon's resident memory and
# descriptors after the walk, the FUSE inodes the kernel keeps then (the
# fuse_inode slab) and the RSS grown per inode, and again
# after the kernel forgot the names (`echo 2 >/proc/sys/vm/drop_caches`,
# which frees clean dentries and inodes everywhere and has no setting to
# restore).  Each workload's row is printed as soon as it is measured.
#
# The data lives in --data (default /var/tmp/fusebox-bench-views), made by
# bench-gen-tree.sh the first time and kept: the 1,000,000-file tree takes
# minutes to make.  Run by hand as root:
#   bench/bench-views.sh [--runs N] [--walk-runs N] [--fusebox PATH] [--baseline PATH]
#                        [--data DIR] [--find-dir DIR] [--only "git find stat grep walk serve start"]
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/bench-lib.sh
. "$repo/bench/bench-lib.sh"

runs=3
walk_runs=1
fusebox=
baseline=
data=/var/tmp/fusebox-bench-views
find_dir=/usr
only="git find stat grep walk serve start"

while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --walk-runs) walk_runs="$2"; shift 2 ;;
    --fusebox) fusebox="$2"; shift 2 ;;
    --baseline) baseline="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --find-dir) find_dir="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    -h|--help) bench_usage 0 ;;
    *) bench_bad_argument "$1" ;;
  esac
done

[ -n "$fusebox" ] || fusebox=$(bench_find_fusebox "$repo")
need bindfs bindfs
need git git
need fusermount3 fuse3
need bwrap bubblewrap
need bc bc
bench_need_root bench-views.sh "mounts with allow_other, drop_caches"
bench_check_missing bench-views.sh
bench_check_fusebox bench-views.sh "$fusebox"
fusebox=$(readlink -f "$fusebox")
[ -z "$baseline" ] || baseline=$(readlink -f "$baseline")
have_perf=0
if command -v perf >/dev/null 2>&1 && [ -n "$(perf list 2>/dev/null | grep fuse:fuse_request_send || true)" ]; then have_perf=1; fi

# --- the data --------------------------------------------------------------
mkdir -p "$data"
if [ ! -e "$data/repo.done" ]; then
  rm -rf "$data/repo"
  echo "generating $data/repo ..." >&2
  "$repo/bench/bench-gen-tree.sh" repo "$data/repo"
  touch "$data/repo.done"
fi
case " $only " in
  *" walk "*)
    if [ ! -e "$data/flat.done" ]; then
      rm -rf "$data/flat"
      echo "generating $data/flat (1,000,000 files) ..." >&2
      "$repo/bench/bench-gen-tree.sh" flat "$data/flat"
      touch "$data/flat.done"
    fi ;;
esac

work=$(mktemp -d /var/tmp/fusebox-bench-views.XXXXXX)
chmod 755 "$work"
export XDG_STATE_HOME=$work/state
cat >"$work/policy.json" <<EOF
{ "version": 1,
  "protected_names": { ".git": "read" },
  "rules": [ { "path": "/", "access": "read", "why": "the system, read-only" } ] }
EOF
mnt=$work/mnt
mkdir "$mnt"
daemon=

cleanup() {
  set +e
  fusermount3 -u -q "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
  if grep -q " $mnt " /proc/mounts; then
    echo "bench-views.sh: $mnt is still mounted; not removing $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# mount SETUP's view of SRC (a host directory): sets $daemon, and $view to
# the path where SRC shows
view=
mount_setup() { # SETUP SRC
  local out bin=$fusebox
  case "$1" in
    bindfs)
      bindfs -o allow_other "$2" "$mnt"
      daemon=$(pgrep -n -x bindfs)
      view=$mnt ;;
    fresh|base)
      [ "$1" = base ] && bin=$baseline
      out=$("$bin" mount --policy "$work/policy.json" --log "$work/access.jsonl" "$mnt")
      daemon=$(echo "$out" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p' | head -1)
      view=$mnt$2 ;;
  esac
  rss0=$(awk '/^VmRSS/ { print $2 }' "/proc/$daemon/status")
  inodes0=$(fuse_inodes)
}

# the FUSE inodes the kernel keeps (of every FUSE mount: the benchmark's is
# the only one it makes), from the slab they live in
fuse_inodes() { awk '$1 == "fuse_inode" { print $2 }' /proc/slabinfo; }

unmount_setup() {
  fusermount3 -u "$mnt"
  while grep -q " $mnt fuse" /proc/mounts; do sleep 0.05; done
  # (a daemon still serving 20 s after its unmount is told to stop, and
  # said: seen once on a loaded machine, the kernel not ending the
  # connection after the unmount)
  local waited=0
  if [ -n "$daemon" ]; then
    while kill -0 "$daemon" 2>/dev/null; do
      sleep 0.05
      waited=$((waited + 1))
      if [ "$waited" = 400 ]; then
        echo "bench-views.sh: daemon $daemon still runs 20 s after its unmount: SIGTERM" >&2
        kill "$daemon" 2>/dev/null || true
      fi
    done
  fi
  daemon=
}

hz=$(getconf CLK_TCK)
cpu_ticks() { if [ -n "$daemon" ]; then awk '{ print $14 + $15 }' "/proc/$daemon/stat"; else echo 0; fi; }
rss_fds() { # "RSS kB/descriptors" of the daemon
  echo "$(awk '/^VmRSS/ { print $2 }' "/proc/$daemon/status")/$(ls "/proc/$daemon/fd" | wc -l)"
}

# the command of workload W on directory P, in a string for bash -c
command_of() { # W P
  case "$1" in
    git) echo "GIT_OPTIONAL_LOCKS=0 git -C '$2' status >/dev/null" ;;
    find) echo "find '$2' >/dev/null" ;;
    stat) echo "find '$2' -printf '%i %s\n' >/dev/null" ;;
    grep) echo "grep -r --exclude-dir=.git -c zzzqqqzzz '$2' >/dev/null; true" ;;
    walk) echo "find '$2' -printf '%i %s\n' >/dev/null" ;;
  esac
}

source_of() { # W
  case "$1" in
    git|grep) echo "$data/repo" ;;
    find|stat) echo "$find_dir" ;;
    walk) echo "$data/flat" ;;
  esac
}

declare -A times cpus reqs mem
rss0=
inodes0=
# run ARGV...; appends its wall time to times[KEY] and the daemon's CPU
# time in it to cpus[KEY]
timed() { # KEY ARGV...
  local key=$1 t0 t1 c0 c1
  shift
  c0=$(cpu_ticks)
  t0=$EPOCHREALTIME
  # (find exits 1 in `fusebox run` over /usr: a directory of mode 0700 of
  # another user is unreadable to root inside a user namespace)
  "$@" 2>>"$work/errors" || echo "  $key: exit status $?" >&2
  t1=$EPOCHREALTIME
  c1=$(cpu_ticks)
  times[$key]+="$(echo "$t1 - $t0" | bc -l) "
  if [ -n "$daemon" ]; then cpus[$key]+="$(echo "($c1 - $c0) / $hz" | bc -l) "; fi
}

# run ARGV... untimed; reqs[KEY]: the FUSE requests it sent
counted() { # KEY ARGV...
  local key=$1
  shift
  if [ "$have_perf" = 1 ]; then
    reqs[$key]=$(perf stat -x, -o "$work/perf.out" -e fuse:fuse_request_send -- "$@" 2>>"$work/errors" || true)
    reqs[$key]=$(awk -F, '/fuse_request_send/ { print $1 }' "$work/perf.out")
  else
    "$@" 2>>"$work/errors" || true
  fi
}

# one run of workload W in setup S (fresh and base also run it again on
# the same mount); COUNT=1: untimed, the FUSE requests counted instead
one() { # W S COUNT
  local w=$1 s=$2 count=$3 src cmd
  local -a argv
  src=$(source_of "$w")
  case "$s" in
    host|run)
      cmd=$(command_of "$w" "$src")
      if [ "$s" = host ]; then argv=(bash -c "$cmd"); else
        argv=("$fusebox" run --policy "$work/policy.json" --cwd / -- bash -c "$cmd")
      fi
      if [ "$count" = 1 ]; then counted "$w $s" "${argv[@]}"; else timed "$w $s" "${argv[@]}"; fi ;;
    *)
      mount_setup "$s" "$src"
      cmd=$(command_of "$w" "$view")
      if [ "$count" = 1 ]; then
        counted "$w $s" bash -c "$cmd"
        [ "$s" = bindfs ] || counted "$w $s-again" bash -c "$cmd"
        [ "$s" = bindfs ] || counted "$w $s-again2" bash -c "$cmd"
      else
        timed "$w $s" bash -c "$cmd"
        if [ "$w" = find ] || [ "$w" = stat ] || [ "$w" = walk ]; then
          mem["$w $s"]+="$(rss_fds) "
          mem["$w $s grew"]+="$(($(awk '/^VmRSS/ { print $2 }' "/proc/$daemon/status") - rss0)) "
          mem["$w $s nodes"]+="$(($(fuse_inodes) - inodes0)) "
        fi
        [ "$s" = bindfs ] || timed "$w $s-again" bash -c "$cmd"
        [ "$s" = bindfs ] || timed "$w $s-again2" bash -c "$cmd"
        if [ "$w" = find ] || [ "$w" = stat ] || [ "$w" = walk ]; then
          sync
          echo 2 >/proc/sys/vm/drop_caches
          sleep 3
          mem["$w $s forgot"]+="$(rss_fds) "
          mem["$w $s nodes forgot"]+="$(($(fuse_inodes) - inodes0)) "
          # the host's own names and inodes went too: read them again, so
          # that the next setup does not start colder than the others
          bash -c "$(command_of "$w" "$src")" 2>/dev/null || true
        fi
      fi
      unmount_setup ;;
  esac
}

median() { tr ' ' '\n' | { grep . || true; } | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
median_pair() { # "a/b a/b ..." -> median a / median b
  local cells
  cells=$(tr " " "\n" | { grep . || true; })
  [ -n "$cells" ] || { echo -; return; }
  echo "$(echo "$cells" | cut -d/ -f1 | median)/$(echo "$cells" | cut -d/ -f2 | median)"
}

setups=(host bindfs fresh run)
[ -z "$baseline" ] || setups+=(base)
cols=(host bindfs fresh run fresh-again fresh-again2)
[ -z "$baseline" ] || cols+=(base base-again base-again2)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%F %H:%M UTC')
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)

# names of W's tree
names_of() { find "$(source_of "$1")" -not -path '*/.git/*' -not -name .git 2>/dev/null | wc -l; }

# the table's row of workload W
row() { # W
  local w=$1 t cell cpu
  printf '| %s |' "$w"
  for c in "${cols[@]}"; do
    t=$(echo "${times["$w $c"]:-}" | median)
    cell=$t
    if [ "$t" != - ]; then
      cell=$(printf '%.3f' "$t")
      cpu=$(echo "${cpus["$w $c"]:-}" | median)
      [ "$cpu" = - ] || cell+=" ($(printf '%.2f' "$cpu"))"
      [ -z "${reqs["$w $c"]:-}" ] || cell+=" ${reqs["$w $c"]} req"
    fi
    printf ' %s |' "$cell"
  done
  echo
}

# the daemons' memory after workload W: RSS and descriptors, the growth of
# RSS per FUSE inode the kernel keeps, and the same once it forgot them
memory() { # W
  local w=$1 n grew nodes
  n=$(names_of "$w")
  for s in bindfs fresh base; do
    [ -n "${mem["$w $s"]:-}" ] || continue
    grew=$(echo "${mem["$w $s grew"]}" | median)
    nodes=$(echo "${mem["$w $s nodes"]}" | median)
    printf '  %s %-7s after the walk of %s names: RSS kB/descriptors %s, %s inodes kept by the kernel, %s B of RSS grown per inode; after the kernel forgot: %s, %s inodes\n' \
      "$w" "$s" "$n" "$(echo "${mem["$w $s"]}" | median_pair)" "$nodes" "$((nodes > 0 ? grew * 1024 / nodes : 0))" \
      "$(echo "${mem["$w $s forgot"]}" | median_pair)" "$(echo "${mem["$w $s nodes forgot"]}" | median)"
  done
}

for w in $only; do
  case "$w" in serve|start) continue ;; esac
  sw=("${setups[@]}")
  nr=$runs
  # the walk of 1,000,000 names: the view's bounds, not a comparison
  if [ "$w" = walk ]; then sw=(fresh ${baseline:+base}); nr=$walk_runs; fi
  echo "warming up: $w (${sw[*]})" >&2
  [ "$w" = walk ] || for s in "${sw[@]}"; do one "$w" "$s" 1; done
  n=${#sw[@]}
  for r in $(seq 1 "$nr"); do
    for i in $(seq 0 $((n - 1))); do one "$w" "${sw[$(((i + r) % n))]}" 0; done
    echo "  $w round $r/$nr done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  done
  echo "  $(row "$w")" >&2
  memory "$w" >&2
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# --- the tables --------------------------------------------------------------
echo
echo "fusebox views benchmark, $started, $runs runs per cell (median seconds; daemon CPU seconds in brackets; FUSE requests of the untimed run)"
echo "machine: $(nproc) CPUs, $(uname -r), load average before $load_before, after $load_after"
echo "fusebox: $fusebox (repository at $commit)${baseline:+; base: $baseline}"
echo "data: $data/repo ($(names_of git) names), $find_dir ($(names_of find) names)"
echo
printf '| workload |'; for c in "${cols[@]}"; do printf ' %s |' "$c"; done; echo
printf '|---|'; for c in "${cols[@]}"; do printf -- '---|'; done; echo
for w in $only; do
  case "$w" in serve|start) continue ;; esac
  row "$w"
done
echo
for w in find stat walk; do
  case " $only " in *" $w "*) memory "$w" ;; esac
done
echo
echo "all runs (seconds):"
for k in "${!times[@]}"; do echo "  $k: ${times[$k]}${cpus[$k]:+ cpu ${cpus[$k]}}"; done | sort
for k in "${!mem[@]}"; do echo "  $k: ${mem[$k]}"; done | sort

# the benchmarks beside fusebox in its build tree
bench_bin() { # NAME
  local b
  b=$(dirname "$(dirname "$fusebox")")/bench/$1
  if [ -x "$b" ]; then echo "$b"; else
    echo "bench-views.sh: $b is not built (meson -Dbenchmarks=true)" >&2
  fi
}
case " $only " in
  *" serve "*)
    serve=$(bench_bin bench-serve-warm)
    if [ -n "$serve" ]; then
      echo
      echo "serve: FUSEBOX_BIN=$fusebox $serve --runs $runs --policy POLICY --dir $data/repo -- env GIT_OPTIONAL_LOCKS=0 git status"
      FUSEBOX_BIN=$fusebox "$serve" --runs "$runs" --policy "$work/policy.json" --dir "$data/repo" -- \
        env GIT_OPTIONAL_LOCKS=0 git status 2>>"$work/errors"
    fi ;;
esac
case " $only " in
  *" start "*)
    startup=$(bench_bin bench-startup)
    if [ -n "$startup" ]; then
      echo
      echo "start: $startup -n 20 --session --fusebox $fusebox"
      "$startup" -n 20 --session --fusebox "$fusebox"
    fi ;;
esac
