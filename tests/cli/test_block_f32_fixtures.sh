#!/usr/bin/env bash
# The float32 block/decode fixture (fixtures/block-f32-recurrence.h5) and its
# producer, scripts/block_f32_recurrence_fixtures.py (the numpy worker with
# RoPE angles by the float32 recurrence):
#   * the script writes the file (atomically; a bad --out exits 2, writing nothing);
#   * every case of the committed file and of a fresh one conforms for scalar,
#     simd and the reference: an honest float32 program that builds its angles
#     otherwise than HF is admitted at positions to 131071, in block and decode.
#     (The first cut of tolerance v2 failed qknorm_hd256_pos32766 at attn,
#     margin 0.69, for all three.)
# The bytes depend on the CPU's float32 BLAS, so they are not compared.
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, find_python

find_python "h5py, numpy"  # $PY (lib.sh)
[ -n "$PY" ] || fail "no python3 with h5py and numpy (scripts/setup.sh installs python3-h5py python3-numpy)"
script="$root/scripts/block_f32_recurrence_fixtures.py"

mkdir -p "$tmp/new"
"$PY" "$script" --out "$tmp/new" >/dev/null || fail "block_f32_recurrence_fixtures.py --out $tmp/new"
[ "$(ls -A "$tmp/new")" = "block-f32-recurrence.h5" ] || { ls -A "$tmp/new"; fail "the script wrote other files"; }

"$PY" "$script" --out "$tmp/missing" >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] || { cat "$tmp/out"; fail "--out to a missing directory exited $rc, expected 2"; }
grep -qF "block_f32_recurrence_fixtures.py: $tmp/missing: --out: not a directory" "$tmp/out" || { cat "$tmp/out"; fail "no message naming --out"; }
[ ! -e "$tmp/missing" ] || fail "--out to a missing directory created it"

for f in "$root/fixtures/block-f32-recurrence.h5" "$tmp/new/block-f32-recurrence.h5"; do
  "$CONFORM" --impl scalar,simd --cases 0 --fixtures "$f" --out "$tmp/report" >"$tmp/out" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { cat "$tmp/out"; fail "$f: conform exited $rc, expected 0 (every case conforms)"; }
  "$PY" - "$tmp/report/conform.json" <<'PY' || fail "$f: report"
import json, sys
r = json.load(open(sys.argv[1]))
cases = r["cases"]
assert len(cases) == 3 * 6, len(cases)
assert {c["impl"] for c in cases} == {"scalar", "simd", "reference"}
assert {c["op"] for c in cases} == {"block", "decode"}
assert all(c["pass"] and c["origin"] == "fixture" for c in cases)
PY
done
echo "cli block_f32_fixtures: ok"
