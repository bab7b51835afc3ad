#!/usr/bin/env bash
# --report: JUnit XML and Markdown from a run with a failing mutant — the XML
# valid against tests/junit.xsd (xmllint, when it can be had) and parsed by
# Python's xml.etree, its counts and failures those of the JSON report — and
# the refusals: an unknown format, an --out that is a file or cannot be
# written (exit 2, nothing of the user's touched).
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
tests=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect

# Without --report: conform.json only, as before there were formats.
"$CONFORM" --impl scalar --op rmsnorm --cases 2 --no-default-fixtures --quiet --out "$tmp/d" >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; fail "default run"; }
[ "$(ls -A "$tmp/d")" = "conform.json" ] || fail "default run wrote: $(ls -A "$tmp/d"); expected conform.json only"

# A failing mutant beside the scalar implementation.
mkdir -p "$tmp/m"
echo "mine" >"$tmp/m/notes.txt"
"$CONFORM" --impl scalar,rope_layout_swapped --op rope,attention --cases 6 --no-default-fixtures \
  --report junit,md,json --out "$tmp/m" >"$tmp/log" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/log"; fail "a run with a failing mutant exited $rc, expected 1"; }
grep -q "conform.xml" "$tmp/log" || fail "the written reports are not named"
[ "$(cat "$tmp/m/notes.txt")" = "mine" ] || fail "a file of the user's in --out was touched"
[ ! -e "$tmp/m/conform.html" ] || fail "html written though not asked for"

python3 - "$tmp/m/conform.xml" "$tmp/m/conform.json" <<'PY' || fail "JUnit report"
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
rep = json.load(open(sys.argv[2]))
assert root.tag == "testsuites", root.tag
suites = {s.get("name"): s for s in root.findall("testsuite")}
want = {f"conform.{i}.{o}" for i in ("scalar", "rope_layout_swapped") for o in ("rope", "attention")}
want = {w for w in want if any(f"conform.{c['impl']}.{c['op']}" == w for c in rep["cases"])}
assert set(suites) == want, (sorted(suites), sorted(want))
total = 0
for name, s in suites.items():
    cases = [c for c in rep["cases"] if f"conform.{c['impl']}.{c['op']}" == name]
    tcs = s.findall("testcase")
    assert int(s.get("tests")) == len(cases) == len(tcs), name
    failing = [c for c in cases if not c["pass"]]
    bad = s.findall("testcase/failure") + s.findall("testcase/error")
    assert int(s.get("failures")) + int(s.get("errors")) == len(failing) == len(bad), name
    assert {t.get("name") for t in tcs} == {c["case_id"] for c in cases}, name
    assert all(t.get("classname") == name for t in tcs)
    total += len(cases)
assert int(root.get("tests")) == total == len(rep["cases"])
assert suites["conform.scalar.rope"].get("failures") == "0"
fails = suites["conform.rope_layout_swapped.rope"].findall("testcase/failure")
assert fails, "the mutant's failures are missing"
for f in fails:
    msg, text = f.get("message"), f.text
    assert "max_abs" in msg and "allowed" in msg and " at (token " in msg, msg
    assert "rope_layout_swapped" in msg, msg  # the diagnosis names the bug
    for part in ("max_abs", "baseline", "floor", "diagnosis: rope_layout_swapped", "replay:    build/conform --impl rope_layout_swapped --case"):
        assert part in text, (part, text)
print(f"junit: {len(suites)} suites, {total} cases, {int(root.get('failures'))} failures")
PY

# Against the schema CI systems' readers accept.
if ! command -v xmllint >/dev/null; then
  install=()
  if ! command -v apt-get >/dev/null; then :; elif [ "$(id -u)" -eq 0 ]; then install=(apt-get)
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then install=(sudo -n apt-get); fi
  ((${#install[@]})) && DEBIAN_FRONTEND=noninteractive "${install[@]}" install -y -qq --no-install-recommends libxml2-utils >/dev/null 2>&1
fi
if command -v xmllint >/dev/null; then
  xmllint --noout --schema "$tests/junit.xsd" "$tmp/m/conform.xml" || fail "conform.xml is not valid against tests/junit.xsd"
  # The schema can fail: a report without its required counts is refused.
  sed 's/ tests="[0-9]*"//' "$tmp/m/conform.xml" >"$tmp/broken.xml"
  xmllint --noout --schema "$tests/junit.xsd" "$tmp/broken.xml" 2>/dev/null && fail "the schema accepted a testsuite without tests="
else
  echo "note: xmllint unavailable (libxml2-utils not installed and not installable here); schema check skipped"
fi

# Markdown: the table, the mutant's diagnosis, comment-sized.
md="$tmp/m/conform.md"
grep -q '^| op | impl | cases | pass |' "$md" || fail "no table in conform.md"
grep -q '| rope | rope_layout_swapped |' "$md" || fail "no rope_layout_swapped row in conform.md"
grep -q 'rope_layout_swapped: matches rope_layout=' "$md" || fail "the diagnosis is not in conform.md"
[ "$(wc -c <"$md")" -lt 65536 ] || fail "conform.md is too long for a comment"

# Refusals: exit 2 with the reason, before any work, nothing written.
expect 2 "--report: unknown format 'pdf'" -- --impl scalar --op rmsnorm --cases 1 --report json,pdf --out "$tmp/x"
expect 2 "--report: empty format name" -- --impl scalar --op rmsnorm --cases 1 --report json, --out "$tmp/x"
[ ! -e "$tmp/x" ] || fail "a refused --report created the output directory"
echo "precious" >"$tmp/file"
expect 2 "exists and is not a directory" -- --impl scalar --op rmsnorm --cases 1 --report all --out "$tmp/file"
expect 2 "is not a directory" -- --impl scalar --op rmsnorm --cases 1 --out "$tmp/file/sub"
[ "$(cat "$tmp/file")" = "precious" ] || fail "--out FILE changed the file"
expect 2 "cannot be created" -- --impl scalar --op rmsnorm --cases 1 --out /proc/conform-cannot-be-here
echo "junit/md: ok"
