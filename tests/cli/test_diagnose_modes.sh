#!/usr/bin/env bash
# --diagnose first|all|none and --shrink-time: a failing run diagnoses each
# bug once by default (later failures checked against it: same_as), every
# failure with `all`, none with `none`; a shrink stops at its time limit and
# says so. On a mutant that fails every rmsnorm case.
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail

bug=rmsnorm_mean_not_squared
run() {  # run MODE_NAME args...: the gate on the mutant, its JSON report in $tmp/MODE_NAME.json
  local name=$1; shift
  "$CONFORM" --impl $bug --op rmsnorm --cases 12 --no-default-fixtures --seed 3 --out "$tmp/$name" "$@" \
    >"$tmp/$name.log" 2>&1
  local rc=$?
  [ $rc -eq 1 ] || { cat "$tmp/$name.log"; fail "--impl $bug $* exited $rc, expected 1"; }
  cp "$tmp/$name/conform.json" "$tmp/$name.json"
}
run first
run all --diagnose all
run none --diagnose none
run capped --shrink-time 0.000001

python3 - "$tmp" "$bug" <<'PY' || fail "reports"
import json, sys
tmp, bug = sys.argv[1], sys.argv[2]
def failures(name):
    r = json.load(open(f"{tmp}/{name}.json"))
    fs = [c for c in r["cases"] if not c["pass"]]
    assert len(fs) == 12, (name, len(fs))
    return fs
def ids(c):
    return {m["id"] for m in c.get("diagnosis", {}).get("matches", [])}

first = failures("first")
assert first[0].get("shrink_tried", 0) > 0 and "same_as" not in first[0], first[0]
assert ids(first[0]) == {bug}, ids(first[0])
for c in first[1:]:
    assert c.get("same_as") == first[0]["case_id"], c.get("same_as")
    assert ids(c) == {bug}, (c["case_id"], ids(c))
    assert "localisation" not in c and "shrink_tried" not in c, c["case_id"]
    assert any(l.startswith("same bug as case") for l in c["diagnosis"]["lines"]), c["diagnosis"]["lines"]

every = failures("all")
assert all("same_as" not in c for c in every)
assert all(ids(c) == {bug} for c in every), [ids(c) for c in every]
# a full diagnosis tries the whole catalogue; the check against the first only its bug
assert min(c["diagnosis"]["tried"] for c in every[1:]) > max(c["diagnosis"]["tried"] for c in first[1:])

for c in failures("none"):
    assert "diagnosis" not in c and "shrink_tried" not in c and "replay" in c, c

capped = failures("capped")[0]
assert "--shrink-time" in capped.get("shrink_stopped", ""), capped
assert capped["shrink_tried"] == 0 and ids(capped) == {bug}, capped
PY
grep -q "stopped at the 1e-06 s limit (--shrink-time)" "$tmp/capped.log" || { cat "$tmp/capped.log"; fail "the capped shrink is not said"; }
grep -q "same as:" "$tmp/first.log" || fail "no 'same as:' line in the failure reports"

# A wrong mode or limit: exit 2, named.
"$CONFORM" --impl scalar --op rope --cases 1 --diagnose some --out "$tmp/x" >"$tmp/bad" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--diagnose: expected all, first or none, found 'some'" "$tmp/bad" ||
  { cat "$tmp/bad"; fail "--diagnose some exited $rc"; }
"$CONFORM" --impl scalar --op rope --cases 1 --shrink-time -1 --out "$tmp/x" >"$tmp/bad" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--shrink-time" "$tmp/bad" || { cat "$tmp/bad"; fail "--shrink-time -1 exited $rc"; }
echo "diagnose modes: ok"
