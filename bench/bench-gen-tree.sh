#!/bin/bash
# fusebox — the generated trees of bench/bench-views.sh, the same bytes on
# every machine (a fixed pseudo-random sequence, no /dev/urandom):
#
#   bench-gen-tree.sh repo DIR [FILES]   a committed git repository of FILES
#                                        files (default 30000) in about one
#                                        directory per ten files, nested up to
#                                        eight deep, sized as a source tree's
#                                        (most a few KiB, a few up to 256 KiB,
#                                        about 120 MB in all), with a
#                                        .gitignore here and there; `git
#                                        status` in it is clean
#   bench-gen-tree.sh flat DIR [FILES]   FILES empty files (default 1000000),
#                                        1,000 to a directory: the walk of a
#                                        tree larger than the view keeps
#
# DIR must not exist.  Needs awk and git.
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
  exit "${1:-0}"
}

[ $# -ge 2 ] || usage 2 >&2
kind=$1
dir=$2
if [ -e "$dir" ]; then
  echo "bench-gen-tree.sh: $dir exists" >&2
  exit 2
fi

case "$kind" in
  repo)
    files=${3:-30000}
    mkdir -p "$dir"
    # A linear congruential generator (Park and Miller's: every product
    # stays exact in a double, whatever the awk) drives every
    # choice: each directory's parent among the earlier ones (the shallower
    # more likely), each file's directory, its size from a long-tailed
    # distribution, and its lines.
    awk -v root="$dir" -v files="$files" '
      function rnd() { seed = (seed * 16807) % 2147483647; return seed / 2147483647 }
      BEGIN {
        seed = 42
        ndirs = int(files / 10); if (ndirs < 1) ndirs = 1
        split("alpha beta gamma delta util core net io fs mm lib src test doc api cmd pkg internal tools build", words, " ")
        nw = length(words)
        path[0] = root; depth[0] = 0
        for (d = 1; d < ndirs; d++) {
          do { p = int(rnd() * rnd() * d) } while (depth[p] >= 8)
          path[d] = path[p] "/" words[1 + int(rnd() * nw)] d
          depth[d] = depth[p] + 1
          dirs = dirs " \"" path[d] "\""
          if (d % 500 == 0 || d == ndirs - 1) { system("mkdir -p" dirs); dirs = "" }
        }
        for (i = 0; i < files; i++) {
          d = int(rnd() * ndirs)
          f = path[d] "/" words[1 + int(rnd() * nw)] "_" i (rnd() < 0.7 ? ".c" : rnd() < 0.5 ? ".h" : ".md")
          # sizes: 2^(7..14) bytes mostly, one in fifty up to 256 KiB
          size = int(2 ^ (7 + rnd() * 7 + (rnd() < 0.02 ? rnd() * 4 : 0)))
          line = ""
          for (n = 0; n < size; n += length(line) + 1) {
            line = sprintf("%s_%d(%s, %d); /* %s */", words[1 + int(rnd() * nw)], int(rnd() * 1000),
                           words[1 + int(rnd() * nw)], int(rnd() * 100000), words[1 + int(rnd() * nw)])
            print line > f
          }
          close(f)
        }
        for (d = 0; d < ndirs; d += 37) {
          g = path[d] "/.gitignore"
          print "*.o\n*.tmp\n/build-" d "/" > g
          close(g)
        }
      }'
    export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost GIT_COMMITTER_NAME=bench \
      GIT_COMMITTER_EMAIL=bench@localhost GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" \
      GIT_COMMITTER_DATE="2026-01-01T00:00:00Z"
    (
      cd "$dir"
      git init -q
      git config gc.auto 0
      git add -A
      git commit -q -m "generated tree"
      git gc -q
      # an index entry written in the same second as its file is "racy" and
      # re-read by every status; refresh once the clock has moved on
      sleep 2
      git update-index -q --refresh
      git status >/dev/null
      git status --porcelain | head -3
    )
    ;;
  flat)
    files=${3:-1000000}
    mkdir -p "$dir"
    (
      cd "$dir"
      for ((d = 0; d * 1000 < files; d++)); do
        n=$((files - d * 1000 < 1000 ? files - d * 1000 : 1000))
        mkdir "d$d"
        (cd "d$d" && seq -f 'f%g' 0 $((n - 1)) | xargs touch)
      done
    )
    ;;
  *) usage 2 >&2 ;;
esac
