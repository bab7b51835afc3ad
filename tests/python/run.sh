#!/usr/bin/env bash
# ctest python.package: the Python package installed as docs/pytest.md says,
# into a clean venv, from a copy of python/ (pip writes build files beside
# its source), then its own tests and the examples run with pytest.
#   CONFORM: the conform binary;  SRC: the checkout.
set -euo pipefail
: "${CONFORM:?}" "${SRC:?}"
PY=/usr/bin/python3
for m in venv pytest numpy; do
  if ! "$PY" -c "import $m" 2>/dev/null; then echo "skipped: $PY has no $m (scripts/setup.sh installs it)"; exit 77; fi
done
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cp -r "$SRC/python" "$T/src"
rm -rf "$T/src/build" "$T/src"/*.egg-info

# The documented install: a venv that sees Debian's numpy, torch and pytest; no package index.
"$PY" -m venv --system-site-packages "$T/venv"
"$T/venv/bin/pip" install --quiet --no-build-isolation --no-index "$T/src"
VPY="$T/venv/bin/python"
"$VPY" -c "import conform, conform_worker; print('installed:', conform.__file__)"

export CONFORM_BIN="$CONFORM" CONFORM_EXPECT_INSTALLED=1
cd "$T"  # not the checkout: `import conform` must find the installed package
fail=0
say() { echo "python.package: $*"; }

# 1. the package's own tests
"$VPY" -m pytest -q -p no:cacheprovider "$SRC/python/tests" || { say "FAIL: python/tests"; fail=1; }

# 2. the honest examples pass (the plugin loads from the entry point: no -p needed)
"$VPY" -m pytest -q -p no:cacheprovider "$SRC/python/examples/test_numpy_kernels.py" \
  "$SRC/python/examples/test_torch_kernels.py" --conform-cases 30 || { say "FAIL: the honest examples"; fail=1; }

# 3. the twin fails, naming the bug, its case id in the JUnit XML; a random seed is printed
set +e
"$VPY" -m pytest -q -p no:cacheprovider "$SRC/python/examples/test_numpy_twin.py" --conform-seed random \
  --junitxml "$T/twin.xml" > "$T/twin.out" 2>&1
rc=$?
set -e
cat "$T/twin.out"
[ "$rc" -eq 1 ] || { say "FAIL: the twin's test exited $rc, expected 1 (one failed test)"; fail=1; }
grep -q "gqa_head_mapping_tiled" "$T/twin.out" || { say "FAIL: the twin's failure does not name gqa_head_mapping_tiled"; fail=1; }
grep -Eq "conform: --conform-seed random drew [0-9]+" "$T/twin.out" || { say "FAIL: no drawn seed in the header"; fail=1; }
grep -q 'property name="conform_case" value="attention(' "$T/twin.xml" || { say "FAIL: no conform_case property in the JUnit XML"; fail=1; }

# 4. without the install: the source tree on PYTHONPATH and -p conform.pytest, as docs/pytest.md says
PYTHONPATH="$SRC/python" CONFORM_EXPECT_INSTALLED= "$PY" -m pytest -q -p no:cacheprovider -p conform.pytest \
  "$SRC/python/examples/test_numpy_kernels.py" -k plain || { say "FAIL: the source-tree way"; fail=1; }

[ "$fail" -eq 0 ] && say "ok"
exit "$fail"
