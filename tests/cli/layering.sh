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
# The build's side: a lower folder's library linking a higher one, and a
# library that builds two folders.
cp "$SRC/harness/CMakeLists.txt" "$tmp/CMakeLists.orig"
sed -i 's/target_link_libraries(conform_model PUBLIC conform_core conform_config)/target_link_libraries(conform_model PUBLIC conform_core conform_config conform_run)/' \
  "$tmp/copy/harness/CMakeLists.txt"
sed -i 's#add_library(conform_compare STATIC compare/metrics.cpp#add_library(conform_compare STATIC core/phases.cpp compare/metrics.cpp#' \
  "$tmp/copy/harness/CMakeLists.txt"
python3 "$tmp/copy/scripts/check-layering.py" "$tmp/copy" >"$tmp/log3" 2>&1
[ $? -eq 1 ] || { cat "$tmp/log3"; fail "planted link violations passed"; }
grep -q "conform_model (layer 6) links conform_run (layer 10): a library links only lower layers" "$tmp/log3" ||
  { cat "$tmp/log3"; fail "the upward link is not named"; }
grep -q "conform_compare builds sources of harness/compare, harness/core: one folder, one target" "$tmp/log3" ||
  { cat "$tmp/log3"; fail "the two-folder library is not named"; }
echo "layering: ok"
