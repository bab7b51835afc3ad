#!/usr/bin/env bash
# Every Catch test can be run by its own name through ctest. catch_discover_tests
# hands each name to ctest inside a CMake list, where ';' separates items: a
# name holding one reached ctest cut short, matched no test and "passed"
# having run nothing (two did, until 2026-12-04). Refused here, naming file and line.
set -uo pipefail
: "${SRC:?path to the source tree}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail

bad=$(grep -rnE '(TEST_CASE|SCENARIO)\("[^"]*;' "$SRC/tests" --include='*.cpp')
[ -z "$bad" ] || fail "a test name holds ';' (ctest would run nothing under it):
$bad"
# The check itself can fail: a planted name is found.
mkdir -p "$tmp/t"
printf 'TEST_CASE("a; b", "[x]") {}\n' >"$tmp/t/planted.cpp"
grep -rqE '(TEST_CASE|SCENARIO)\("[^"]*;' "$tmp/t" --include='*.cpp' || fail "the planted name was not found"
echo "test names: ok"
