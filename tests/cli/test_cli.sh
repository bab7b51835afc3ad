#!/usr/bin/env bash
# End to end: the README's main command, exit codes and messages.
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect

"$CONFORM" --impl scalar --op all --cases 8 --out "$tmp" >"$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
[ $rc -eq 0 ] || fail "scalar gate exited $rc"
grep -q "rope .*scalar" "$tmp/log" || fail "no table row for rope"
python3 - "$tmp/conform.json" <<'PY' || fail "report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "conform-report/1", r["schema"]
assert r["pass"] is True
assert {c["op"] for c in r["cases"]} == {"rmsnorm", "rope", "qk_norm", "attention", "swiglu", "block", "decode",
                                         "paged_attention", "moe", "moe_route", "moe_experts", "mla_attention"}
for c in r["cases"]:
    for t in c["tensors"]:
        assert "allowed" in t["bound"] and "max_abs" in t and "margin" in t
PY

expect_tail=(--out "$tmp")  # expect (lib.sh): every run writes its report into $tmp
expect 2 "unknown implementation 'nope'" -- --impl nope
expect 2 "unknown op 'ropey'" -- --op ropey
expect 2 "unknown dtype" -- --dtype f8
expect 2 "seed" -- --seed abc
expect 2 "missing field" -- --case 'rope(T=1)'
expect 0 "rope" -- --impl scalar --case 'rope(T=3,n=2,hd=8,layout=interleaved,theta=500000,pos=8190,mag=1,outliers=0,seed=4)'
"$CONFORM" list | grep -q "scalar" || fail "list"
[ "$("$CONFORM" list --ops | wc -l)" -eq 12 ] || fail "list --ops"
echo "cli: ok"
