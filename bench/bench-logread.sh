#!/bin/bash
# fusebox — reading an access log back: `fusebox report` and `fusebox log`
# (the text for people, and --json) over a generated log of --records
# records (default 200,000, about 50 MB: a run's log near its default
# budget holds a million), in a scratch directory.
#
#   bench/bench-logread.sh [--records N] [--runs R] --fusebox BIN [--baseline BIN]
#
# Each cell is the median wall time of R runs (default 5), output to
# /dev/null, the log in the page cache (an untimed run first); with
# --baseline, another build's runs are interleaved with this one's, so that
# a change of load hits both alike.  Prints one line per command and build:
# the median, and the time per record.
set -euo pipefail

records=200000
runs=5
fusebox=""
baseline=""
while [ $# -gt 0 ]; do
  case "$1" in
    --records) records=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --fusebox) fusebox=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-logread: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$fusebox" ]; then
  echo "bench-logread: --fusebox BIN is needed (the fusebox binary to measure)" >&2
  exit 2
fi

dir=$(mktemp -d /tmp/fusebox-bench-logread-XXXXXX)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir/access.jsonl" "$records" <<'EOF'
import random, sys
path, n = sys.argv[1], int(sys.argv[2])
random.seed(20261205)
ops = ["open", "open", "open", "getattr", "create", "unlink", "rename", "readdir"]
with open(path, "w") as f:
    for i in range(1, n + 1):
        op = random.choice(ops)
        decision = "allow" if random.random() < 0.9 else "deny"
        f.write('{"ts":"2026-12-05T12:%02d:%02d.%06dZ","run":"20261205-120000-bench1","seq":%d,'
                '"pid":%d,"uid":1000,"comm":"git","op":"%s","path":"/work/dir%d/file%d.c",'
                '"access":"read","decision":"%s","errno":0,"rule":%d,"rule_origin":"p.json:1:1",'
                '"why":"w"}\n' % (i // 60000 % 60, i // 1000 % 60, i % 1000 * 1000, i,
                                  100 + i % 50, op, i % 300, i % 5000, decision, i % 7))
EOF

# the wall time (s) of "$@"
wall () {
  local s e
  s=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || true
  e=$(date +%s.%N)
  awk -v s="$s" -v e="$e" 'BEGIN { printf "%.6f\n", e - s }'
}

builds=("$fusebox")
[ -n "$baseline" ] && builds+=("$baseline")
for b in "${builds[@]}"; do "$b" report "$dir/access.jsonl" >/dev/null 2>&1 || true; done
echo "records $records, $(du -h "$dir/access.jsonl" | cut -f1), runs $runs"
for cmd in "report" "log" "log --json"; do
  declare -A times=()
  for _ in $(seq "$runs"); do
    for i in "${!builds[@]}"; do
      # shellcheck disable=SC2086
      times[$i]+="$(wall "${builds[$i]}" $cmd "$dir/access.jsonl") "
    done
  done
  for i in "${!builds[@]}"; do
    # shellcheck disable=SC2086
    m=$(printf '%s\n' ${times[$i]} | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
    printf '%-12s %-50s %8.3f s  %6.2f us/record\n' "$cmd" "${builds[$i]}" "$m" "$(awk -v m="$m" -v n="$records" 'BEGIN { print m * 1000000 / n }')"
  done
  unset times
done
