#!/usr/bin/env bash
# The gate, small: the scalar implementation on 10 property cases of every op
# and the regression fixtures, conforming (ctest -L fast).
set -uo pipefail
: "${CONFORM:?}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect
expect_grep=-E
expect 0 "block +scalar +[0-9]+ +[0-9]+" -- --impl scalar --cases 10 --out "$tmp/r"
echo "gate fast: ok"
