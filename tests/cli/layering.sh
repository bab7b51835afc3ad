#!/usr/bin/env bash
# The layering ARCHITECTURE.md draws, checked: scripts/check-layering.py
# passes on the tree, and fails (naming file, line and both layers) on a copy
# where a lower folder includes a higher one.
set -uo pipefail
: "${SRC:?path to the source tree}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail

python3 "$SRC/scripts/check-layering.py" "$SRC" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "the tree breaks its layering"; }
grep -q "0 violations" "$tmp/log" || fail "no summary line"

mkdir -p "$tmp/copy/scripts"
cp -r "$SRC/harness" "$SRC/impls" "$tmp/copy/"
cp "$SRC/scripts/check-layering.py" "$tmp/copy/scripts/"
# core (layer 4) reaching up into the runner (layer 9)
sed -i '0,/#include "conform\/config.h"/s//#include "conform\/config.h"\n#include "run\/plan.h"/' "$tmp/copy/harness/core/case.h"
python3 "$tmp/copy/scripts/check-layering.py" "$tmp/copy" >"$tmp/log2" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/log2"; fail "a planted upward include exited $rc, expected 1"; }
grep -q "harness/core/case.h:[0-9]*: includes run/plan.h: harness/core (layer 4) must not depend on harness/run" "$tmp/log2" ||
  { cat "$tmp/log2"; fail "the violation is not named"; }
echo "layering: ok"
