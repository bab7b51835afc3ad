#!/usr/bin/env bash
# Every path a .md file of the repo names exists (scripts/check-md-paths.py),
# and a path that does not is named with its file and line.
set -uo pipefail
: "${SRC:?path to the source tree}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail

/usr/bin/python3 "$SRC/scripts/check-md-paths.py" "$SRC" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "a .md file names a missing path"; }
grep -q "paths in [0-9]* .md files exist" "$tmp/log" || { cat "$tmp/log"; fail "no summary line"; }

# A copy of the tree (git's view of it) where one page names a file that is not there.
mkdir -p "$tmp/copy"
(cd "$SRC" && git ls-files -co --exclude-standard | while IFS= read -r f; do [ -e "$f" ] && printf '%s\n' "$f"; done |
  tar -cf - -T -) | tar -xf - -C "$tmp/copy" || fail "cannot copy the tree"
git -C "$tmp/copy" init -q && git -C "$tmp/copy" add -A >/dev/null 2>&1
printf '\nSee `harness/core/no_such_file.cpp`.\n' >>"$tmp/copy/ARCHITECTURE.md"
/usr/bin/python3 "$tmp/copy/scripts/check-md-paths.py" "$tmp/copy" >"$tmp/log2" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/log2"; fail "a missing path exited $rc, expected 1"; }
grep -q "ARCHITECTURE.md:[0-9]*: path 'harness/core/no_such_file.cpp' does not exist" "$tmp/log2" ||
  { cat "$tmp/log2"; fail "the missing path is not named with its file and line"; }
echo "docs paths: ok"
