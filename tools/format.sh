#!/usr/bin/env bash
# Format every tracked C file with the repository's .clang-format (clang-format 14),
# or, with --check, list the files that do not follow it and fail.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

check=0
case ${1:-} in
  --check) check=1 ;;
  '') ;;
  *) echo "usage: tools/format.sh [--check]" >&2; exit 2 ;;
esac

if ! command -v clang-format >/dev/null; then
  echo "format: clang-format is missing (apt-get install clang-format)" >&2
  exit 1
fi
major=$(clang-format --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
if [ "$major" != 14 ]; then
  echo "format: clang-format $major here; the style is kept with clang-format 14, whose output may differ" >&2
fi

bad=0
while IFS= read -r -d '' f; do
  if [ $check -eq 1 ]; then
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
      echo "format: $f does not follow .clang-format (run tools/format.sh)" >&2
      bad=$((bad + 1))
    fi
  else
    clang-format -i "$f"
  fi
done < <(git ls-files -z '*.c' '*.h')

if [ $bad -gt 0 ]; then
  echo "format: $bad files to format" >&2
  exit 1
fi
