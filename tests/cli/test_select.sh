#!/usr/bin/env bash
# Case selection through the command: --params, sharding (flag and env) and
# merge-reports giving back the unsharded run, coverage of the default gate,
# no progress line off a terminal, `list --ops / --impls` for scripts.
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect
unset TEST_SHARD_INDEX TEST_TOTAL_SHARDS TEST_SHARD_STATUS_FILE

# ---- list, for scripts: one name per line, nothing else ---------------------------
"$CONFORM" list --ops >"$tmp/ops" 2>"$tmp/err" || fail "list --ops exited $?"
[ "$(cat "$tmp/ops")" = "$(printf 'rmsnorm\nrope\nqk_norm\nattention\nswiglu\nblock\ndecode\npaged_attention\nmoe\nmoe_route\nmoe_experts\nmla_attention')" ] ||
  { cat "$tmp/ops"; fail "list --ops: not the twelve op names, one per line"; }
"$CONFORM" list --impls >"$tmp/impls" 2>>"$tmp/err" || fail "list --impls exited $?"
grep -qx scalar "$tmp/impls" || fail "list --impls: no 'scalar' line"
grep -qvE '^[a-z0-9_-]+$' "$tmp/impls" && { cat "$tmp/impls"; fail "list --impls: a line that is not a bare name"; }
[ -s "$tmp/err" ] && { cat "$tmp/err"; fail "list wrote to stderr"; }

# ---- --params -------------------------------------------------------------------------
"$CONFORM" --impl scalar --op rope --cases 6 --no-default-fixtures --params 'layout=interleaved' \
  --out "$tmp/p" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "--params run exited $?"; }
python3 - "$tmp/p/conform.json" <<'PY' || fail "--params report"
import json, sys
r = json.load(open(sys.argv[1]))
ids = [c["case_id"] for c in r["cases"]]
assert len(ids) == 6, ids
assert all("layout=interleaved" in i for i in ids), ids
assert r["params"] == "layout=interleaved"
PY
grep -q "rope: 6 of 6 cases match" "$tmp/log" || { cat "$tmp/log"; fail "--params: no count of matches"; }
# Fixture cases are matched on their config too: the regression set's interleaved RoPE.
"$CONFORM" --impl scalar --op rope --cases 0 --params 'layout=interleaved' --out "$tmp/pf" >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; fail "--params on fixtures exited $?"; }
python3 - "$tmp/pf/conform.json" <<'PY' || fail "--params on fixtures"
import json, sys
r = json.load(open(sys.argv[1]))
files = {c["file"].split("/")[-1] for c in r["cases"]}
assert "rope-llama2-7b-interleaved.h5" in files, files  # --rope-layout interleaved (make-fixtures.sh)
assert "rope-llama3-8b.h5" not in files, files            # neox
PY
expect 2 "not a valid regular expression" -- --impl scalar --params 'theta=(5'
expect 2 "selects no case" -- --impl scalar --op rmsnorm --cases 3 --no-default-fixtures --params 'layout=neox'

# ---- sharding: bad specs ----------------------------------------------------------------
# qk_gain (the block's score scale) in a case id: the block and decode only, a positive number.
blk='block(T=2,D=4,H=1,KV=1,hd=4,F=4,layout=neox,theta=10000,qk_norm=0,eps=1e-05,pos=0'
expect 2 "field 'qk_gain': expected a finite number > 0 and <= 1e+30, found '-4'" -- --impl scalar --case "$blk,qk_gain=-4,mag=1,outliers=0,seed=1)"
expect 2 "field 'qk_gain': expected a finite number > 0 and <= 1e+30, found 'inf'" -- --impl scalar --case "$blk,qk_gain=inf,mag=1,outliers=0,seed=1)"
expect 2 "field 'qk_gain' does not apply to op rmsnorm" -- --impl scalar --case 'rmsnorm(T=1,D=4,eps=1e-05,qk_gain=4,mag=1,outliers=0,seed=1)'
expect 0 -- --impl scalar --case "$blk,qk_gain=16,mag=1,outliers=0,seed=1)" --out "$tmp/gain"
expect 2 "INDEX counts from 0" -- --impl scalar --shard 3/3
expect 2 "TOTAL must be at least 1" -- --impl scalar --shard 0/0
expect 2 "two whole numbers" -- --impl scalar --shard one/3
TEST_SHARD_INDEX=1 expect 2 "must be set together" -- --impl scalar
TEST_SHARD_INDEX=1 TEST_TOTAL_SHARDS=3 expect 2 "disagrees" -- --impl scalar --shard 0/3

# ---- three shards merge to the unsharded run ------------------------------------------------
# The mutant fails some cases, so failures and their errors must survive the merge too.
run=(--impl scalar,rope_layout_swapped --op rope,attention,block --cases 10 --quiet)
"$CONFORM" "${run[@]}" --out "$tmp/all" >"$tmp/log" 2>&1
[ $? -eq 1 ] || { cat "$tmp/log"; fail "unsharded run with a mutant should exit 1"; }
"$CONFORM" "${run[@]}" --shard 0/3 --out "$tmp/s0" >"$tmp/log" 2>&1; [ $? -le 1 ] || { cat "$tmp/log"; fail "shard 0"; }
TEST_SHARD_INDEX=1 TEST_TOTAL_SHARDS=3 TEST_SHARD_STATUS_FILE="$tmp/status" \
  "$CONFORM" "${run[@]}" --out "$tmp/s1" >"$tmp/log" 2>&1; [ $? -le 1 ] || { cat "$tmp/log"; fail "shard 1 (env)"; }
[ -e "$tmp/status" ] || fail "TEST_SHARD_STATUS_FILE not touched"
TEST_SHARD_INDEX=2 TEST_TOTAL_SHARDS=3 "$CONFORM" "${run[@]}" --shard 2/3 --out "$tmp/s2" >"$tmp/log" 2>&1
[ $? -le 1 ] || { cat "$tmp/log"; fail "shard 2 (env and flag agreeing)"; }

"$CONFORM" merge-reports "$tmp/s0/conform.json" "$tmp/s1/conform.json" "$tmp/s2/conform.json" --out "$tmp/m" \
  >"$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
[ $rc -eq 1 ] || fail "merge-reports of a failing run exited $rc, expected 1"
python3 - "$tmp/all/conform.json" "$tmp/m/conform.json" "$tmp"/s{0,1,2}/conform.json <<'PY' || fail "merged != unsharded"
import json, sys
full, merged = (json.load(open(p)) for p in sys.argv[1:3])
shards = [json.load(open(p)) for p in sys.argv[3:]]
def key(c):  # a shrunk case by the case it was drawn as
    return (c["impl"], c["op"], c["origin"], c.get("shrunk_from", c["case_id"]), c.get("file", ""), c.get("group", ""))
def view(r):
    return sorted((key(c), c["case_id"], c["pass"], c.get("error", ""), c.get("first_failing", ""),
                   json.dumps(c.get("diagnosis", {}).get("matches", []), sort_keys=True)) for c in r["cases"])
sets = [set(key(c) for c in s["cases"]) for s in shards]
for i in range(3):
    assert sets[i], f"shard {i} is empty"
    for j in range(i + 1, 3):
        assert not sets[i] & sets[j], f"shards {i} and {j} overlap"
vm, vf = view(merged), view(full)
if vm != vf:
    for a, b in zip(vm, vf):
        if a != b: print("merged:   ", a, "\nunsharded:", b)
    raise SystemExit("merged cases differ from the unsharded run")
assert sum(1 for c in full["cases"] if "shrunk_from" in c) >= 1, "the mutant's failure was not shrunk"
for k in ("seed", "cases_per_op", "impls", "ops", "dtype", "fixtures"):
    assert merged[k] == full[k], k
assert merged["summary"] == full["summary"], (merged["summary"], full["summary"])
assert merged["pass"] is False and full["pass"] is False
assert "shard" not in merged and len(merged["merged_from"]) == 3
PY

# merge-reports refuses what is not one run.
expect 2 "missing shard 2/3" -- merge-reports "$tmp/s0/conform.json" "$tmp/s1/conform.json" --out "$tmp/m2"
expect 2 "is also" -- merge-reports "$tmp/s0/conform.json" "$tmp/s0/conform.json" "$tmp/s2/conform.json" --out "$tmp/m2"
python3 - "$tmp/s1/conform.json" "$tmp/s1b.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); r["seed"] += 1; json.dump(r, open(sys.argv[2], "w"))
PY
expect 2 "s1b.json: seed: expected" -- merge-reports "$tmp/s0/conform.json" "$tmp/s1b.json" "$tmp/s2/conform.json" --out "$tmp/m2"
echo '{"schema": "other/1", "cases": []}' >"$tmp/bad.json"
expect 2 "schema: expected conform-report/1" -- merge-reports "$tmp/bad.json" --out "$tmp/m2"
expect 2 "is one of the inputs" -- merge-reports "$tmp/s0/conform.json" "$tmp/s1/conform.json" "$tmp/s2/conform.json" --out "$tmp/s0"
[ ! -e "$tmp/m2/conform.json" ] || fail "a refused merge wrote a report"

# ---- no progress line off a terminal ------------------------------------------------------------
"$CONFORM" --impl scalar --op rmsnorm --cases 5 --out "$tmp/q" >"$tmp/log" 2>"$tmp/err"
grep -q "ETA" "$tmp/log" "$tmp/err" && fail "a progress line was written to a file"
grep -q $'\r' "$tmp/err" && fail "carriage returns on stderr off a terminal"

# ---- coverage ----------------------------------------------------------------------------------
"$CONFORM" coverage --require-full >"$tmp/cov" 2>&1
rc=$?
cat "$tmp/cov"
[ $rc -eq 0 ] || fail "coverage --require-full of the default gate exited $rc: a trap the gate never reaches"
grep -q "rmsnorm / .*scalar" "$tmp/cov" || fail "coverage: no rmsnorm table"
grep -q "^  theta .*n/a" "$tmp/cov" || fail "coverage: theta not n/a anywhere"
# A narrow selection leaves cells empty, and says which.
expect 1 "interleaved EMPTY" -- coverage --impl scalar --op rope --cases 20 --no-default-fixtures --params 'layout=neox' --require-full
"$CONFORM" coverage --impl scalar --op rope --cases 20 --no-default-fixtures --params 'layout=neox' --json >"$tmp/cov.json" ||
  fail "coverage --json exited $?"
python3 - "$tmp/cov.json" <<'PY' || fail "coverage --json"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["schema"] == "conform-coverage/1"
(cell,) = j["cells"]
assert cell["reached"]["layout"] == {"neox": 20, "interleaved": 0}, cell["reached"]["layout"]
assert cell["reached"]["heads"] is None
assert {"op": "rope", "impl": "scalar", "dimension": "layout", "class": "interleaved"} in j["empty"]
assert j["full"] is False
PY
# Coverage counts what the gate runs: the same cases, property and fixture, per implementation.
sel=(--impl scalar --op rope,attention --cases 15 --params 'pos=[0-9]{5}' --shard 1/2)
"$CONFORM" "${sel[@]}" --out "$tmp/g" --quiet >/dev/null 2>&1 || fail "gate for the coverage cross-check exited $?"
"$CONFORM" coverage "${sel[@]}" --json >"$tmp/gc.json" || fail "coverage for the cross-check exited $?"
python3 - "$tmp/g/conform.json" "$tmp/gc.json" <<'PY' || fail "coverage disagrees with the gate's report"
import json, sys
run, cov = (json.load(open(p)) for p in sys.argv[1:])
for cell in cov["cells"]:
    ran = [c for c in run["cases"] if c["op"] == cell["op"] and c["impl"] == cell["impl"]]
    assert cell["cases"] == len(ran), (cell["op"], cell["cases"], len(ran))
    assert cell["cases"] > 0, cell["op"]
    if cell["op"] == "rope":
        inter = sum(1 for c in ran if "layout=interleaved" in c["case_id"] and c["origin"] == "property")
        assert inter <= cell["reached"]["layout"]["interleaved"], (inter, cell["reached"]["layout"])
PY
if ! "$CONFORM" list | grep -q "^  cuda  available"; then
  expect 3 "unavailable" -- coverage --impl cuda
fi
expect 2 "INDEX counts from 0" -- coverage --shard 5/2
echo "select: ok"
