#!/usr/bin/env bash
# The float32 RoPE fixtures (fixtures/rope-f32-recurrence-*.h5) and their
# producer, scripts/rope_f32_fixtures.py:
#   * the committed files are exactly what the script writes, byte for byte,
#     and two runs write the same bytes;
#   * a bad --out exits 2 with a one-line message, writing nothing;
#   * conform reads every case, and the cases at positions 0..2 (where float32
#     angles are exact enough for any tolerance) conform for scalar and
#     for the reference.
# Whether the large positions pass is the tolerance model's business (issue 14);
# this test does not pin it.
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, find_python

find_python "h5py, numpy"  # $PY (lib.sh)
[ -n "$PY" ] || fail "no python3 with h5py and numpy (scripts/setup.sh installs python3-h5py python3-numpy)"

files="rope-f32-recurrence-neox.h5 rope-f32-recurrence-interleaved.h5 rope-f32-recurrence-partial-llama3.h5"
mkdir -p "$tmp/a" "$tmp/b"
"$PY" "$root/scripts/rope_f32_fixtures.py" --out "$tmp/a" >/dev/null || fail "rope_f32_fixtures.py --out $tmp/a"
sleep 1  # a timestamp in the files would now differ
"$PY" "$root/scripts/rope_f32_fixtures.py" --out "$tmp/b" >/dev/null || fail "rope_f32_fixtures.py --out $tmp/b"
for f in $files; do
  cmp -s "$tmp/a/$f" "$tmp/b/$f" || fail "$f: two runs of rope_f32_fixtures.py differ"
  cmp -s "$tmp/a/$f" "$root/fixtures/$f" || fail "fixtures/$f is not what scripts/rope_f32_fixtures.py writes (rerun it)"
done
[ "$(ls -A "$tmp/a" | wc -l)" -eq 3 ] || { ls -A "$tmp/a"; fail "rope_f32_fixtures.py left other files behind"; }

"$PY" "$root/scripts/rope_f32_fixtures.py" --out "$tmp/missing" >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] || { cat "$tmp/out"; fail "--out to a missing directory exited $rc, expected 2"; }
grep -qF "rope_f32_fixtures.py: $tmp/missing: --out: not a directory" "$tmp/out" || { cat "$tmp/out"; fail "no message naming --out"; }
[ ! -e "$tmp/missing" ] || fail "--out to a missing directory created it"

"$CONFORM" --impl scalar --cases 0 --fixtures "$tmp/a" --out "$tmp/report" >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 0 ] || [ $rc -eq 1 ] || { cat "$tmp/out"; fail "conform exited $rc on the float32 RoPE fixtures"; }
"$PY" - "$tmp/report/conform.json" <<'PY' || fail "report of the float32 RoPE fixtures"
import json, sys
r = json.load(open(sys.argv[1]))
cases = r["cases"]
assert len(cases) == 2 * 52, len(cases)
assert {c["impl"] for c in cases} == {"scalar", "reference"}
assert all(c["op"] == "rope" and c["origin"] == "fixture" for c in cases)
small = [c for c in cases if c["group"].endswith("_p0")]
assert len(small) == 2 * 3, [c["group"] for c in small]
bad = [(c["impl"], c["group"]) for c in small if not c["pass"]]
assert not bad, f"positions 0..2 do not conform: {bad}"
PY
echo "cli rope_f32_fixtures: ok"
