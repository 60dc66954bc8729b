#!/bin/bash
# fusebox — filesystem benchmark: the host directory, bindfs,
# loggedfs and `fusebox mount`, side by side in one run, on five workloads
# over a copy of /usr/include:
#
#   find       find DIR >/dev/null
#   git        GIT_OPTIONAL_LOCKS=0 git -C DIR status >/dev/null  (a repository of that copy)
#   read2      dd if=BIG of=/dev/null bs=1M, twice; the second (cached) read is timed
#   write      dd if=/dev/zero of=NEW bs=1M count=512 conv=fsync  (the file is new each run)
#   untar      tar -xf include.tar -C NEWDIR  (the tarball lies outside the mounts)
#
# All four setups show the same host directory (same inodes, same page
# cache): bindfs mounts it elsewhere, loggedfs mounts over a bind mount of
# it (loggedfs mounts over the directory it serves), fusebox shows the host's
# / so the directory appears at MOUNT/<its host path>.  The runs are
# interleaved (round i runs every setup, in an order rotated per round and
# reversed every other round) so
# that load changes hit every setup alike; medians of --runs runs.
#
# Caches: page-cache contents are never dropped between timed runs, and
# every workload first runs once untimed per setup.  Names and inodes
# (echo 2 >/proc/sys/vm/drop_caches, after sync) are dropped before each
# workload's warm-up and before each untar run; see there for why.  find and
# git start 2.5 s after the previous run: a tool run now and then, not the
# same command twice in a row.  bindfs's and loggedfs's name and attribute
# caches (1 s) have expired by then; fusebox's (60 s by default since
# 08ac1b3, with changes through any of its views invalidated at once) have
# not: each setup is measured with its own defaults.
#
# fusebox runs at its default log level (opens) with the access log in a
# file, under a policy that makes the data directory writable and gives
# `.git` read through protected_names: by default fusebox hides every .git,
# and `git status` would see no repository.  loggedfs logs to a file (-l)
# with the example configuration of its Debian package (every operation but
# getattr); it runs in the foreground (-f) because loggedfs 0.9+ds-4 logs
# nothing to the -l file once it has daemonized.  It also leaks memory (about
# 11 bytes per byte written and 0.35 per byte read: 24 GB after a few
# rounds, then the kernel's OOM killer), so it is restarted before each of
# its runs and killed if it passes --loggedfs-max-rss (a failed cell then
# says so).
#
# Run by hand as root:  bench/bench-fs.sh [--runs N] [--fusebox PATH] [--dir DIR]
#                         [--only "find git read2 write untar"] [--loggedfs-max-rss MiB] [--keep]
#                         [--settle SECONDS]  (quiet disk before each write run; default 10)
# Installs nothing; it names the Debian packages that are missing.  It times
# runs itself (hyperfine is not needed: it can't interleave setups).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/bench-lib.sh
. "$repo/bench/bench-lib.sh"

runs=5
expire=2.5 # seconds: longer than every setup's entry/attribute timeout
settle=10  # seconds of quiet disk before each write run (see "write" below)
fusebox=
base=/var/tmp
only="find git read2 write untar"
keep=0
lfs_max_kb=$((8 * 1024 * 1024))

while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --fusebox) fusebox="$2"; shift 2 ;;
    --dir) base="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --loggedfs-max-rss) lfs_max_kb=$(($2 * 1024)); shift 2 ;; # MiB
    --settle) settle="$2"; shift 2 ;;
    -h|--help) bench_usage 0 ;;
    *) bench_bad_argument "$1" ;;
  esac
done

[ -n "$fusebox" ] || fusebox=$(bench_find_fusebox "$repo")

# --- prerequisites ---------------------------------------------------------
need bindfs bindfs
need loggedfs loggedfs
need git git
need fusermount3 fuse3
need tar tar
need dd coreutils
need find findutils
need bc bc
bench_need_root bench-fs.sh "it mounts bindfs, loggedfs and a bind mount"
bench_check_missing bench-fs.sh
bench_check_fusebox bench-fs.sh "$fusebox"
if [ ! -e /dev/fuse ]; then
  echo "bench-fs.sh: /dev/fuse is missing: load the fuse module (modprobe fuse)" >&2
  exit 1
fi

# --- the data --------------------------------------------------------------
work=$(mktemp -d "$base/fusebox-bench.XXXXXX")
chmod 755 "$work"
data=$work/data
mounts=()

cleanup() {
  set +e
  lfs_stop
  for m in "${mounts[@]}"; do
    fusermount3 -u -q "$m" 2>/dev/null || umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
  done
  # the bind mount under loggedfs goes last (it was mounted first)
  umount "$work/mnt-loggedfs" 2>/dev/null
  if [ "$keep" = 0 ]; then
    if grep -q " $work/" /proc/self/mountinfo; then
      echo "bench-fs.sh: something is still mounted under $work; not removing it" >&2
    else
      rm -rf "$work"
    fi
  else
    echo "kept: $work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "setting up in $work ..." >&2
mkdir -p "$data"
cp -a /usr/include "$data/include"
(
  cd "$data/include"
  git init -q
  git add -A
  # no background "gc --auto" while we measure: pack once, now
  git config gc.auto 0
  git -c user.name=bench -c user.email=bench@localhost commit -q -m "a copy of /usr/include"
  git gc -q
  # an index entry written in the same second as its file is "racy" and
  # re-read by every status; refresh once the clock has moved on
  sleep 2
  git update-index -q --refresh
  git status >/dev/null
)
head -c 512M /dev/urandom >"$data/big"
tar -cf "$work/include.tar" -C /usr include
sync

# --- the four setups -------------------------------------------------------
# loggedfs without -c logs nothing but its start; its package's example
# configuration logs every operation except getattr: the fair comparison.
loggedfs_conf=/usr/share/doc/loggedfs/examples/loggedfs.xml
if [ ! -r "$loggedfs_conf" ]; then
  cat >"$work/loggedfs.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<loggedFS logEnabled="true" printProcessName="true">
  <includes><include extension=".*" uid="*" action=".*" retname=".*"/></includes>
  <excludes><exclude extension=".*" uid="*" action="getattr" retname=".*"/></excludes>
</loggedFS>
EOF
  loggedfs_conf=$work/loggedfs.xml
fi
declare -A path
path[host]=$data

mkdir "$work/mnt-bindfs"
bindfs "$data" "$work/mnt-bindfs"
mounts+=("$work/mnt-bindfs")
path[bindfs]=$work/mnt-bindfs

mkdir "$work/mnt-loggedfs"
mount --bind "$data" "$work/mnt-loggedfs"
path[loggedfs]=$work/mnt-loggedfs
lfs_pid=
lfs_mnt=$work/mnt-loggedfs

lfs_stop() {
  if [ -n "$lfs_pid" ]; then
    fusermount3 -u -q "$lfs_mnt" 2>/dev/null || fusermount3 -u -z -q "$lfs_mnt" 2>/dev/null || true
    wait "$lfs_pid" 2>/dev/null || true
    lfs_pid=
  fi
}

# (Re)start loggedfs over the bind mount, with a watchdog on its memory.
lfs_start() {
  lfs_stop
  loggedfs -f -c "$loggedfs_conf" -l "$work/loggedfs.log" "$lfs_mnt" >>"$work/loggedfs.out" 2>&1 &
  lfs_pid=$!
  for _ in $(seq 100); do
    case "$(findmnt -n -o FSTYPE --target "$lfs_mnt" 2>/dev/null)" in fuse*) break ;; esac
    sleep 0.05
  done
  (
    pid=$lfs_pid
    while kill -0 "$pid" 2>/dev/null; do
      rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
      if [ "${rss:-0}" -gt "$lfs_max_kb" ]; then
        echo "loggedfs reached ${rss} kB RSS: killed" >>"$work/loggedfs-killed"
        kill "$pid"
        break
      fi
      sleep 0.2
    done
  ) &
}
lfs_start

cat >"$work/policy.json" <<EOF
{ "version": 1,
  "protected_names": { ".git": "read", ".agents": "hide", ".codex": "hide" },
  "rules": [
    { "path": "/", "access": "read", "why": "the system" },
    { "path": "$data", "access": "write", "why": "the benchmark's data" } ] }
EOF
mkdir "$work/mnt-fusebox"
"$fusebox" mount --policy "$work/policy.json" --log "$work/fusebox-access.jsonl" "$work/mnt-fusebox" >"$work/fusebox-mount.out"
mounts+=("$work/mnt-fusebox")
path[fusebox]=$work/mnt-fusebox$data

setups=(host bindfs loggedfs fusebox)

# Every setup must show the same, clean repository, or `git status` times
# would compare different work.
for s in "${setups[@]}"; do
  st=$(GIT_OPTIONAL_LOCKS=0 git -C "${path[$s]}/include" status --porcelain 2>&1 | head -3)
  if [ -n "$st" ]; then
    echo "bench-fs.sh: git status through $s is not clean:" >&2
    echo "$st" >&2
    exit 1
  fi
done

# --- timing ----------------------------------------------------------------
now() { echo "${EPOCHREALTIME/,/.}"; }

declare -A times # "$workload $setup" -> "t1 t2 ..."

# prepare and run one workload on one setup; TIMED=1 records the time (or
# "fail" when the command failed: a killed loggedfs)
one() {
  local w=$1 s=$2 timed=$3 p=${path[$2]} t0 t1 tag ok=1
  tag="$s.$RANDOM$RANDOM"
  if [ "$s" = loggedfs ]; then lfs_start; fi
  set +e
  case "$w" in
    find)
      # after the kernel's name and attribute caches of every FUSE setup
      # expired (bindfs and loggedfs: 1 s, fusebox: its default): a tool
      # run now and then, not twice in a row
      sleep "$expire"
      t0=$(now); find "$p/include" >/dev/null || ok=0; t1=$(now) ;;
    git)
      sleep "$expire"
      t0=$(now); GIT_OPTIONAL_LOCKS=0 git -C "$p/include" status >/dev/null || ok=0; t1=$(now) ;;
    read2)
      dd if="$p/big" of=/dev/null bs=1M status=none || ok=0
      t0=$(now); dd if="$p/big" of=/dev/null bs=1M status=none || ok=0; t1=$(now) ;;
    write)
      # nobody's dirty data left from the setup before: each run writes
      # and flushes its own 512 MiB only.  sync returns once the guest
      # has written, but a run right after bindfs's or loggedfs's (13-30 s
      # of writing, loggedfs's log included) still met a disk busy with
      # them: 2.2-2.7 s instead of 0.35-0.6, for whichever setup came
      # next, and the rotation put fusebox after loggedfs in 3 rounds of
      # 7 and the host after bindfs in 2.  Every setup now gets the same
      # quiet disk: sync, then $settle s.
      sync
      sleep "$settle"
      t0=$(now); dd if=/dev/zero of="$p/w.$tag" bs=1M count=512 conv=fsync status=none || ok=0; t1=$(now)
      rm -f "$data/w.$tag" ;;
    untar)
      # Each run extracts into a new directory that stays until the end of
      # the workload: creating files right after deleting thousands is
      # several times slower on ext4 (recently_deleted() scans the inode
      # table; perf showed 70% of tar's time there).  Names and inodes are
      # dropped before each run instead, so that the daemon's descriptors
      # (one per name the kernel remembers) stay below RLIMIT_NOFILE; the
      # tarball is read back into the page cache untimed.
      sync
      echo 2 >/proc/sys/vm/drop_caches
      cat "$work/include.tar" >/dev/null
      mkdir "$data/x.$tag"
      t0=$(now); tar -xf "$work/include.tar" -C "$p/x.$tag" || ok=0; t1=$(now) ;;
  esac
  set -e
  if [ "$s" = loggedfs ]; then lfs_stop; fi
  if [ "$ok" = 0 ]; then
    echo "  $w on $s failed" >&2
  fi
  if [ "$timed" = 1 ]; then
    if [ "$ok" = 1 ]; then
      times["$w $s"]+="$(echo "$t1 - $t0" | bc -l) "
    else
      times["$w $s"]+="fail "
    fi
  fi
}

# the median, or "fail" when any run failed
median() { tr ' ' '\n' | grep . | sort -g | awk '/fail/ { f = 1 } { a[NR] = $1 } END { if (f) print "fail"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
started=$(date -u +%FT%TZ)
for w in $only; do
  # Forget cached names and inodes (not dirty data) before each workload's
  # warm-up: fusebox holds an O_PATH descriptor for every name the kernel
  # remembers and the kernel forgets nothing without memory pressure, so
  # find, git and one extracted copy together (~20,000 names) would pass
  # this machine's RLIMIT_NOFILE of 20,000 in the daemon ("Too many open
  # files", reported to fs/).  Every setup starts each workload alike.
  sync
  echo 2 >/proc/sys/vm/drop_caches
  echo "warming up: $w" >&2
  for s in "${setups[@]}"; do one "$w" "$s" 0; done
  for r in $(seq 1 "$runs"); do
    # rotate the order each round, and reverse it every other round: a
    # rotation alone keeps the cyclic order, so fusebox always ran right
    # after loggedfs and inherited the disk flushing its 500 MB log
    for i in 0 1 2 3; do
      if [ $((r % 2)) = 0 ]; then j=$(((i + r) % 4)); else j=$(((3 - i + r) % 4)); fi
      s=${setups[$j]}
      one "$w" "$s" 1
    done
    echo "  $w round $r/$runs done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  done
  if [ "$w" = untar ]; then rm -rf "$data"/x.*; fi
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# --- the table -------------------------------------------------------------
declare -A med
for w in $only; do
  for s in "${setups[@]}"; do
    med["$w $s"]=$(echo "${times["$w $s"]}" | median)
  done
done

ratio() { echo "scale=2; $1 / $2" | bc -l | sed 's/^\./0./'; }

echo
echo "fusebox filesystem benchmark, $started, $runs runs per cell (median seconds, ratio to the host)"
echo "machine: $(nproc) CPUs, $(uname -r), load average before $load_before, after $load_after"
echo "fusebox: $fusebox (repository at $commit when the run started; the binary is as built)"
echo
printf '| %-8s | %-10s | %-16s | %-16s | %-16s |\n' workload host bindfs loggedfs fusebox
printf '|%s|%s|%s|%s|%s|\n' ---------- ------------ ------------------ ------------------ ------------------
for w in $only; do
  h=${med["$w host"]}
  if [ "$h" = fail ]; then
    row=$(printf '| %-8s | %-10s |' "$w" failed)
  else
    row=$(printf '| %-8s | %-10.3f |' "$w" "$h")
  fi
  for s in bindfs loggedfs fusebox; do
    v=${med["$w $s"]}
    if [ "$v" = fail ] || [ "$h" = fail ]; then
      row+=$(printf ' %-16s |' "failed")
    else
      # one more column: "×" takes two bytes and printf counts bytes
      row+=$(printf ' %-17s |' "$(printf '%.3f (%s×)' "$v" "$(ratio "$v" "$h")")")
    fi
  done
  echo "$row"
done
echo
echo "all runs (seconds):"
for w in $only; do
  for s in "${setups[@]}"; do
    printf '  %-6s %-9s %s\n' "$w" "$s" "${times["$w $s"]}"
  done
done

# --- the targets (docs/performance.md, Filesystem) -------------------------
echo
echo "targets:"
target() { # workload limit-ratio-to-host
  local w=$1 lim=$2 v h r
  case " $only " in *" $w "*) ;; *) return ;; esac
  v=${med["$w fusebox"]}; h=${med["$w host"]}
  if [ "$v" = fail ]; then printf '  %-6s fusebox failed\n' "$w"; return; fi
  r=$(ratio "$v" "$h")
  if [ "$(echo "$v <= $lim * $h" | bc -l)" = 1 ]; then ok=met; else ok=MISSED; fi
  printf '  %-6s fusebox %s× the host, target ≤ %s×: %s\n' "$w" "$r" "$lim" "$ok"
}
target find 2
target git 1.5
target read2 1.3
target write 1.5
for w in $only; do
  v=${med["$w fusebox"]}; b=${med["$w bindfs"]}
  if [ "$v" = fail ] || [ "$b" = fail ]; then printf '  %-6s fusebox %s, bindfs %s\n' "$w" "$v" "$b"; continue; fi
  if [ "$(echo "$v < $b" | bc -l)" = 1 ]; then ok=met; else ok=MISSED; fi
  printf '  %-6s fusebox %.3f s vs bindfs %.3f s, target faster: %s\n' "$w" "$v" "$b" "$ok"
done
case " $only " in *" git "*)
  v=${med["git fusebox"]}; l=${med["git loggedfs"]}
  if [ "$v" = fail ] || [ "$l" = fail ]; then
    printf '  git    fusebox %s, loggedfs %s: no ratio\n' "$v" "$l"
  else
    if [ "$(echo "$l >= 10 * $v" | bc -l)" = 1 ]; then ok=met; else ok=MISSED; fi
    printf '  git    loggedfs / fusebox = %s×, target ≥ 10×: %s\n' "$(ratio "$l" "$v")" "$ok"
  fi ;;
esac
echo
if [ -s "$work/loggedfs-killed" ]; then echo "loggedfs watchdog:"; sed 's/^/  /' "$work/loggedfs-killed"; fi
echo "logs: fusebox $(wc -l <"$work/fusebox-access.jsonl") records ($(du -h "$work/fusebox-access.jsonl" | cut -f1)), loggedfs $(wc -l <"$work/loggedfs.log" 2>/dev/null || echo 0) lines ($(du -h "$work/loggedfs.log" 2>/dev/null | cut -f1))"
