#!/usr/bin/env bash
# The docs' examples, run as written: docs/python-workers.md's "Write yours"
# (a plain RMSNorm worker, which declares no twist) conforms on its --cases,
# and so do docs/pytest.md's first conform.check (a plain RMSNorm) and
# impls/PLUGINS.md's minimal C plugin. Extracted
# from the pages themselves, so a page that drifts from what conform does fails.
set -uo pipefail
: "${CONFORM:?}" "${SRC:?path to the source tree}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail

# The first ```LANG block after the line matching MARK in PAGE.
block_after() {  # block_after PAGE MARK LANG
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
at = text.find(sys.argv[2])
assert at >= 0, "no %r in %s" % (sys.argv[2], sys.argv[1])
m = re.compile(r"```" + re.escape(sys.argv[3]) + r"\n(.*?)```", re.S).search(text, at)
assert m, "no ```%s block after %r" % (sys.argv[3], sys.argv[2])
sys.stdout.write(m.group(1))
PY
}

# python-workers.md: the worker file and the command that runs it, from a
# directory laid out as the page has it (build/conform, my_kernels.py).
page=$SRC/docs/python-workers.md
block_after "$page" "Write yours." python >"$tmp/my_kernels.py" || fail "no worker example in $page"
cmd=$(block_after "$page" "Write yours." sh) || fail "no command after the worker example in $page"
mkdir -p "$tmp/build" && ln -s "$CONFORM" "$tmp/build/conform"
(cd "$tmp" && PYTHONPATH="$SRC/python" eval "$cmd --out $tmp/wy") >"$tmp/out" 2>&1 ||
  { cat "$tmp/out"; fail "python-workers.md's worker, run as written ($cmd), did not conform"; }
/usr/bin/python3 - "$tmp/wy/conform.json" <<'PY' || { cat "$tmp/out"; fail "python-workers.md's worker"; }
import json, sys
r = json.load(open(sys.argv[1]))
mine = [c for c in r["cases"] if c["impl"] == "mykernels" and c["origin"] == "property"]
assert r["pass"] and len(mine) == 100, (r["pass"], len(mine))
PY

# pytest.md's first example (a plain numpy RMSNorm through conform.check),
# as the page has it; then its report counted: all 100 property cases ran.
block_after "$SRC/docs/pytest.md" "## Test your" python >"$tmp/test_plain.py" || fail "no first example in pytest.md"
cat >>"$tmp/test_plain.py" <<'PY'

def test_rmsnorm_counted(conform):
    report = conform.check(my_rmsnorm, op="rmsnorm")
    assert report.passed
    assert sum(1 for c in report["cases"] if c["origin"] == "property") == 100
PY
(cd "$tmp" && CONFORM_BIN="$CONFORM" PYTHONPATH="$SRC/python" /usr/bin/python3 -m pytest -q -p conform.pytest \
  test_plain.py) >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "pytest.md's first example, run as written"; }

# PLUGINS.md's minimal plugin (a plain C RMSNorm, declaring no twist), built
# as the page says (the header alone) and run: it conforms on all its cases.
block_after "$SRC/impls/PLUGINS.md" "## A minimal plugin" c >"$tmp/mykernels.c" || fail "no C example in PLUGINS.md"
"${CC:-cc}" -std=c11 -shared -fPIC -O2 -I"$SRC/impls/include" "$tmp/mykernels.c" -o "$tmp/libmykernels.so" -lm \
  >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "PLUGINS.md's minimal plugin does not build as written"; }
"$CONFORM" --impl-lib "$tmp/libmykernels.so" --op rmsnorm --out "$tmp/pl" >"$tmp/out" 2>&1 ||
  { cat "$tmp/out"; fail "PLUGINS.md's minimal plugin does not conform"; }
/usr/bin/python3 - "$tmp/pl/conform.json" <<'PY' || { cat "$tmp/out"; fail "PLUGINS.md's minimal plugin"; }
import json, sys
r = json.load(open(sys.argv[1]))
mine = [c for c in r["cases"] if c["impl"] == "mykernels" and c["origin"] == "property"]
assert r["pass"] and len(mine) == 100 and all(c["pass"] for c in mine), (r["pass"], len(mine))
PY
# mla.md's commands at DeepSeek-V3's widths and at flags' widths, as written
# (from a directory with build/conform); the files they write then conform.
block_after "$SRC/docs/mla.md" "## The model's own widths" sh >"$tmp/mla.sh" || fail "no commands in mla.md"
(cd "$tmp" && bash -e "$tmp/mla.sh") >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "mla.md's commands, run as written"; }
grep -qE "^mla_attention +scalar +5 +5 " "$tmp/out" || { cat "$tmp/out"; fail "mla.md: scalar at V3's widths"; }
"$CONFORM" --impl scalar --fixtures "$tmp/mla-v3.h5" --fixtures "$tmp/mla-small.h5" --cases 0 --no-default-fixtures \
  --out "$tmp/mr" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "mla.md's generated fixtures do not conform"; }
echo "docs examples: ok"
