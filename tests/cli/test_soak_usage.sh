#!/usr/bin/env bash
# scripts/soak.sh on bad arguments: exit 2 with a message naming the argument,
# before (or instead of) any soak; nothing is reported as soaked.
set -uo pipefail
: "${CONFORM:?path to the conform binary}" "${SRC:?the source tree}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect

expect_cmd=(bash "$SRC/scripts/soak.sh") expect_name=soak.sh expect_grep=-E  # expect (lib.sh)
# soak_expect PATTERN -- ARGS...: exit 2, PATTERN in the output, no summary line.
soak_expect() {
  expect 2 "$@"
  ! grep -qE "^soak [a-z0-9]+: [0-9]+ cases" "$tmp/out" || { cat "$tmp/out"; fail "soak.sh ${*:3}: a summary was printed"; }
}
soak_expect "unknown argument '--bogus'" -- --bogus --conform "$CONFORM"
soak_expect "/nonexistent/conform: not built" -- --conform /nonexistent/conform
soak_expect "--op: unknown op 'nosuch'" -- --op nosuch --cases 1 --dtype f32 --conform "$CONFORM" --out "$tmp/r"
soak_expect "--dtype: unknown dtype 'f8'" -- --dtype f8 --cases 1 --conform "$CONFORM" --out "$tmp/r"
echo "soak usage: ok"
