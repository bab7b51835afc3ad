#!/usr/bin/env bash
# scripts/ci-gate.sh as a CI job calls it, against an already built tree
# (CONFORM_BUILD_DIR): exit codes are the gate's, reports are kept (per shard
# when sharded, mergeable), and the example workflow parses and uses it.
set -uo pipefail
: "${CONFORM_BUILD_DIR:?the build directory holding conform}"
here=$(cd "$(dirname "$0")/../.." && pwd)
gate="$here/scripts/ci-gate.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail
unset TEST_SHARD_INDEX TEST_TOTAL_SHARDS TEST_SHARD_STATUS_FILE

run_gate() {  # run_gate EXPECTED_RC args...
  local want=$1; shift
  "$gate" --build-dir "$CONFORM_BUILD_DIR" "$@" >"$tmp/log" 2>&1
  local rc=$?
  [ $rc -eq "$want" ] || { cat "$tmp/log"; fail "ci-gate.sh $* exited $rc, expected $want"; }
}

# Conforming: exit 0, the report kept. This one builds (incrementally: a no-op
# on a tree that is up to date), as a CI job would.
run_gate 0 --reports "$tmp/ok" -- --impl scalar --op rope,rmsnorm --cases 5 --no-default-fixtures
[ -s "$tmp/ok/conform.json" ] || fail "no report kept in --reports"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["pass"] is True' "$tmp/ok/conform.json" ||
  fail "kept report does not say pass"

# A mutant: the gate's exit 1 is the script's, and the failing report is kept.
run_gate 1 --no-build --reports "$tmp/bad" -- --impl rope_layout_swapped --op rope --cases 5 --no-default-fixtures
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["pass"] is False' "$tmp/bad/conform.json" ||
  fail "the mutant's report was not kept"
# Usage errors pass through as 2; the reports directory is the script's to choose.
run_gate 2 --no-build --reports "$tmp/u" -- --impl nope
run_gate 2 --no-build --reports "$tmp/u" -- --impl scalar --out "$tmp/elsewhere"
# No build where one was promised: 4, not a gate verdict.
"$gate" --build-dir "$tmp/nothing" --no-build -- --impl scalar >"$tmp/log" 2>&1
[ $? -eq 4 ] || { cat "$tmp/log"; fail "a missing build should exit 4"; }

# Sharded, as the example workflow does it (flag) and as Bazel-style runners do (env).
args=(--impl scalar,rope_layout_swapped --op rope --cases 8 --no-default-fixtures --quiet)
"$gate" --build-dir "$CONFORM_BUILD_DIR" --no-build --reports "$tmp/sh" -- "${args[@]}" --shard 0/2 >"$tmp/log" 2>&1
rc0=$?
TEST_SHARD_INDEX=1 TEST_TOTAL_SHARDS=2 "$gate" --build-dir "$CONFORM_BUILD_DIR" --no-build --reports "$tmp/sh" -- \
  "${args[@]}" >"$tmp/log" 2>&1
rc1=$?
[ $rc0 -le 1 ] && [ $rc1 -le 1 ] || fail "shards exited $rc0 and $rc1"
[ -s "$tmp/sh/shard-0-of-2/conform.json" ] && [ -s "$tmp/sh/shard-1-of-2/conform.json" ] ||
  { ls -R "$tmp/sh"; fail "shard reports not kept apart"; }
"$CONFORM_BUILD_DIR/conform" merge-reports "$tmp"/sh/shard-*/conform.json --out "$tmp/merged" --quiet
[ $? -eq 1 ] || fail "merged shards with a mutant should exit 1"
python3 - "$tmp/merged/conform.json" <<'PY' || fail "merged shard count"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["summary"]["cases"] == 16, r["summary"]  # 8 rope cases x 2 implementations
PY

# ---- the example workflow ------------------------------------------------------------------------
wf="$here/scripts/examples/github-actions.yml"
[ -f "$wf" ] || fail "no $wf"
grep -q "scripts/ci-gate.sh" "$wf" || fail "the workflow does not call scripts/ci-gate.sh"
grep -q "merge-reports" "$wf" || fail "the workflow does not merge the shards"
if python3 -c 'import yaml' 2>/dev/null; then
  python3 - "$wf" <<'PY' || fail "workflow structure"
import sys, yaml
w = yaml.safe_load(open(sys.argv[1]))
jobs = w["jobs"]
gate, merge = jobs["gate"], jobs["merge"]
shards = gate["strategy"]["matrix"]["shard"]
assert shards == list(range(int(w["env"]["SHARDS"]))), shards
runs = " ".join(s.get("run", "") for s in gate["steps"])
assert "scripts/ci-gate.sh" in runs and "--shard" in runs, runs
assert any("upload-artifact" in s.get("uses", "") for s in gate["steps"])
assert merge["needs"] == "gate"
assert any("merge-reports" in s.get("run", "") for s in merge["steps"])
PY
else
  # No YAML parser here: the structure by hand — no tabs, the keys the jobs need.
  grep -qP '\t' "$wf" && fail "the workflow contains tabs (invalid YAML indentation)"
  for key in '^jobs:' '^  gate:' '^  merge:' 'matrix:' 'needs: gate' 'upload-artifact' 'download-artifact'; do
    grep -q -- "$key" "$wf" || fail "the workflow lacks '$key'"
  done
  echo "ci_gate: python3-yaml absent; checked the workflow's structure by hand"
fi
echo "ci_gate: ok"
