#!/usr/bin/env bash
# The mutation check: each tools/mutants/<name>.patch plays one plausible bug
# in a security-critical line; this applies it to a scratch copy of the
# working tree, builds, runs the tests its header names and reports whether
# they caught it ("killed") or not ("survived").  Exits non-zero when any
# mutant survived, no longer applies ("stale"), does not build
# ("no-build"), or could not be judged ("no-base", below).
#
#   tools/mutants.sh                 every mutant
#   tools/mutants.sh NAME...         only these (NAME or NAME.patch)
#   tools/mutants.sh --list          name, suites and why of each mutant
#   tools/mutants.sh --check         only whether each still applies to the
#                                    working tree (no build, no tests): a
#                                    mutant that no longer applies is a
#                                    check that can't fail (`meson test
#                                    mutants-apply` runs this)
#   tools/mutants.sh --head [NAME...] on the last commit instead of the
#                                    working tree (the mutants themselves are
#                                    always read from tools/mutants/)
#
# A mutant file starts with header lines, then a diff as `git diff` prints it:
#   # suites: <arguments to `meson test`, e.g. test names or --suite security>
#   # why: <one line: what bug this mutant plays>
#
# The working tree (tracked and untracked, not ignored, files; or with
# --head, the files of HEAD) is copied once per run to <dir>/pristine, so
# edits made while it runs do not mix into it;
# each mutant is applied to <dir>/src, which is brought back to the pristine
# copy file by file, only where they differ, so that the build in <dir>/build
# (kept between runs) recompiles only what the mutant and the last one
# touched.  Before the mutants, the unmutated copy is built and each distinct
# suites line is run once: a mutant only counts as killed by tests that pass
# without it, so one whose tests fail already is reported "no-base", not
# judged (--no-baseline skips that).
#
# <dir> is $FUSEBOX_MUTANTS_DIR, or build-mutants/ at the top of the tree;
# a lock on it makes a second run wait for the first.  Logs of each run are in
# <dir>/logs/<name>.log.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mutants_dir=$here/tools/mutants
work=${FUSEBOX_MUTANTS_DIR:-$here/build-mutants}

usage ()
{
  sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

# The header value FIELD ("suites" or "why") of mutant file FILE.
header ()
{
  sed -n "s/^# $1: *//p" "$2" | head -n 1
}

list=0
check=0
baseline=1
head=0
names=()
while [ $# -gt 0 ]; do
  case $1 in
    --list) list=1 ;;
    --check) check=1 ;;
    --no-baseline) baseline=0 ;;
    --head) head=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
    -*)
      echo "mutants: unknown option $1 (see --help)" >&2
      exit 2
      ;;
    *) names+=("$(basename "$1" .patch)") ;;
  esac
  shift
done

if [ ${#names[@]} -eq 0 ]; then
  for f in "$mutants_dir"/*.patch; do
    [ -f "$f" ] && names+=("$(basename "$f" .patch)")
  done
fi
if [ ${#names[@]} -eq 0 ]; then
  echo "mutants: no mutants in $mutants_dir" >&2
  exit 2
fi
for n in "${names[@]}"; do
  f=$mutants_dir/$n.patch
  if [ ! -f "$f" ]; then
    echo "mutants: no mutant $n (no file $f; --list shows them)" >&2
    exit 2
  fi
  if [ -z "$(header suites "$f")" ]; then
    echo "mutants: $f has no '# suites:' header line" >&2
    exit 2
  fi
done

# The diff of mutant file FILE, without its header lines.
diff_of ()
{
  sed -n '/^\(diff \|--- \)/,$p' "$1"
}

if [ $check -eq 1 ]; then
  stale=0
  for n in "${names[@]}"; do
    if ! out=$(diff_of "$mutants_dir/$n.patch" | (cd "$here" && git apply --check - 2>&1)); then
      echo "stale: $n: $out" >&2
      stale=$((stale + 1))
    fi
  done
  echo "${#names[@]} mutants: $stale no longer apply to $here"
  [ $stale -eq 0 ] && exit 0
  echo "mutants: make each stale one again against the code (the same bug, as its '# why:' says), then" \
    "run it: tools/mutants.sh NAME" >&2
  exit 1
fi

if [ $list -eq 1 ]; then
  for n in "${names[@]}"; do
    f=$mutants_dir/$n.patch
    printf '%-28s %s\n%-28s suites: %s\n' "$n" "$(header why "$f")" "" "$(header suites "$f")"
  done
  exit 0
fi

mkdir -p "$work/logs"
# (fd 9 is closed for every command run below: a daemon a test leaves
# behind must not hold the lock.)
exec 9>"$work/lock"
if ! flock -n 9; then
  echo "mutants: another run holds $work/lock; waiting for it" >&2
  flock 9
fi

# Make DST hold exactly the files listed in FILES (NUL-separated, relative)
# as they are in SRC, rewriting only the files whose contents differ so that
# the others keep their times and ninja does not rebuild them.
sync_tree ()
{
  local src=$1 dst=$2 files=$3 f

  mkdir -p "$dst"
  while IFS= read -r -d '' f; do
    [ -f "$src/$f" ] || continue
    if ! cmp -s "$src/$f" "$dst/$f"; then
      mkdir -p "$dst/$(dirname "$f")"
      rm -f "$dst/$f"
      cp --preserve=mode "$src/$f" "$dst/$f" || return 1
    fi
  done <"$files"
  # Files no longer in the tree (a mutant may also have added one).
  (cd "$dst" && find . -path ./.git -prune -o -type f -printf '%P\0') | sort -z >"$work/have"
  sort -z "$files" | comm -z -23 "$work/have" - | while IFS= read -r -d '' f; do
    rm -f "$dst/$f"
  done
}

started=$(date +%s)
if [ $head -eq 1 ]; then
  rm -rf "$work/head"
  mkdir -p "$work/head"
  (cd "$here" && git archive HEAD | tar -x -C "$work/head") || exit 1
  (cd "$here" && git ls-tree -r -z --name-only HEAD) >"$work/files" || exit 1
  sync_tree "$work/head" "$work/pristine" "$work/files" || exit 1
  rm -rf "$work/head"
else
  (cd "$here" && git ls-files -z --cached --others --exclude-standard) >"$work/files" || exit 1
  sync_tree "$here" "$work/pristine" "$work/files" || exit 1
fi
sync_tree "$work/pristine" "$work/src" "$work/files" || exit 1
# src is its own repository so that `git apply` there does not resolve paths
# against the tree's repository above it.
[ -d "$work/src/.git" ] || git -C "$work/src" init -q || exit 1

build=$work/build
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$work/src" -Dfuzzers=disabled -Dbenchmarks=false >"$work/logs/setup.log" 2>&1 9>&- || {
    echo "mutants: meson setup of the scratch copy failed; see $work/logs/setup.log" >&2
    exit 1
  }
fi

# Run `meson test` with the suites line SUITES; log to LOG.  0 when they pass.
run_suites ()
{
  local suites=$1 log=$2
  local -a args

  read -r -a args <<<"$suites"
  meson test -C "$build" --no-rebuild --print-errorlogs "${args[@]}" >>"$log" 2>&1 9>&-
}

if ! ninja -C "$build" >"$work/logs/baseline.log" 2>&1 9>&-; then
  echo "mutants: the unmutated copy does not build; see $work/logs/baseline.log" >&2
  exit 1
fi
# The suites lines that fail without any mutant: their mutants can't be
# judged ("no-base"), the others still are.
declare -A base_failed=()
if [ $baseline -eq 1 ]; then
  declare -A seen=()
  for n in "${names[@]}"; do
    suites=$(header suites "$mutants_dir/$n.patch")
    [ -n "${seen[$suites]:-}" ] && continue
    seen[$suites]=1
    if ! run_suites "$suites" "$work/logs/baseline.log"; then
      base_failed[$suites]=1
      echo "mutants: without any mutant, 'meson test $suites' already fails (see $work/logs/baseline.log);" \
        "its mutants are not judged" >&2
    fi
  done
  if grep -q '^Skipped: *[1-9]' "$work/logs/baseline.log"; then
    echo "mutants: warning: some tests skip on this host (see $work/logs/baseline.log); a mutant they would catch survives" >&2
  fi
fi

killed=0
survived=0
broken=0
printf '%-9s %-28s %6s  %s\n' result mutant time why
for n in "${names[@]}"; do
  f=$mutants_dir/$n.patch
  log=$work/logs/$n.log
  suites=$(header suites "$f")
  t0=$(date +%s)
  sync_tree "$work/pristine" "$work/src" "$work/files" || exit 1
  {
    echo "# mutant $n: $(header why "$f")"
    echo "# meson test $suites"
  } >"$log"
  if [ -n "${base_failed[$suites]:-}" ]; then
    result=no-base
    broken=$((broken + 1))
  elif ! diff_of "$f" | (cd "$work/src" && git apply -v - >>"$log" 2>&1); then
    result=stale
    broken=$((broken + 1))
  elif ! ninja -C "$build" >>"$log" 2>&1 9>&-; then
    result=no-build
    broken=$((broken + 1))
  elif run_suites "$suites" "$log"; then
    result=SURVIVED
    survived=$((survived + 1))
  else
    result=killed
    killed=$((killed + 1))
  fi
  printf '%-9s %-28s %5ss  %s\n' "$result" "$n" $(($(date +%s) - t0)) "$(header why "$f")"
done
# Leave src as the tree was, so that the next run starts from a clean build.
sync_tree "$work/pristine" "$work/src" "$work/files" || exit 1

total=${#names[@]}
echo "$total mutants: $killed killed, $survived survived, $broken stale, not building or not judged" \
  "($(($(date +%s) - started)) s; logs in $work/logs)"
[ $survived -eq 0 ] && [ $broken -eq 0 ]
