#!/usr/bin/env bash
# Which OpenBLAS core LibTorch's matmul runs on (harness/reference/blas.h):
# said by bench; OPENBLAS_CORETYPE kept by default; --blas-core auto replaces
# a generic core by the best this CPU runs, verified in a probe first, and the
# command runs again on it (the gate says so on stderr); a forced name, keep,
# and the refusals (exit 2). OpenBLAS is LibTorch's BLAS on Debian; elsewhere
# only the "not OpenBLAS" line is checked.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect
# The default is asked of a run without the user's choice: a machine whose
# environment names a core (OPENBLAS_CORETYPE=Haswell on some CI images)
# would otherwise show the kept choice, checked on its own below.
unset OPENBLAS_CORETYPE

small=(bench --impl torch --op rmsnorm --tokens 1 --min-time 0 --min-reps 1 --max-reps 1)
expect 0 "  BLAS: " -- "${small[@]}"
if grep -q "BLAS: not OpenBLAS" "$tmp/out"; then echo "blas: LibTorch's BLAS is not OpenBLAS here; nothing to choose"; exit 0; fi
grep -q "DYNAMIC_ARCH" "$tmp/out" || { echo "blas: OpenBLAS without DYNAMIC_ARCH; nothing to choose"; exit 0; }
# The core in use by default: DYNAMIC_ARCH's pick, or the one selected over its fallback.
best=$(sed -n 's/.*BLAS: OpenBLAS core \([A-Za-z0-9_]*\), \(DYNAMIC_ARCH.s pick\|selected (DYNAMIC_ARCH picked\).*/\1/p' "$tmp/out")
[ -n "$best" ] || { cat "$tmp/out"; fail "the default core and how it came to be are not said"; }

# The user's OPENBLAS_CORETYPE is kept unless --blas-core says otherwise.
OPENBLAS_CORETYPE=Prescott expect 0 "BLAS: OpenBLAS core Prescott, as OPENBLAS_CORETYPE=Prescott asks (kept" -- "${small[@]}"
expect 0 "core=Prescott" -- "${small[@]}" --blas-core Prescott
grep -q "BLAS: OpenBLAS core Prescott, selected (--blas-core Prescott" "$tmp/out" || { cat "$tmp/out"; fail "the forced core is not said"; }
expect 0 "its own pick (kept: --blas-core keep)" -- "${small[@]}" --blas-core keep

# A generic core on a CPU that runs a better one: auto selects, verified, and the
# command runs again on it (where this CPU runs nothing better than SSE3, it keeps).
if [ -n "$best" ] && [ "$best" != Prescott ]; then
  OPENBLAS_CORETYPE=Prescott expect 0 "core=$best" -- "${small[@]}" --blas-core auto
  grep -Eq "BLAS: OpenBLAS core $best, selected \(OPENBLAS_CORETYPE=Prescott on a CPU with .*verified on a 384\^3 sgemm, one thread: [0-9.]+ vs [0-9.]+ GFLOP/s, max rel diff from float64" "$tmp/out" ||
    { cat "$tmp/out"; fail "auto's selection and its verification are not said"; }
  # The JSON says it too.
  OPENBLAS_CORETYPE=Prescott "$CONFORM" "${small[@]}" --blas-core auto --json >"$tmp/b.json" 2>/dev/null || fail "bench --json exited $?"
  python3 - "$tmp/b.json" "$best" <<'PY' || fail "bench json's blas"
import json, sys
b = json.load(open(sys.argv[1]))["blas"]
assert b["core"] == sys.argv[2] and b["changed"] is True and "selected" in b["how"], b
PY
  # The gate (the judge's own reference) selects as well, and says so on stderr.
  OPENBLAS_CORETYPE=Prescott expect 0 "conform: OpenBLAS core $best, selected" -- --blas-core auto --impl scalar --op rmsnorm --cases 2 --out "$tmp/gate"
fi

expect 2 "--blas-core: 'Nope' is not an OpenBLAS core this table knows" -- "${small[@]}" --blas-core Nope
expect 2 "--blas-core: 'Nope' is not an OpenBLAS core" -- --blas-core Nope --impl scalar --op rmsnorm --cases 1 --out "$tmp/gate"
if [ "$best" != Cooperlake ] && [ "$best" != SapphireRapids ]; then
  expect 2 "cannot run Cooperlake's kernels" -- "${small[@]}" --blas-core Cooperlake
fi
echo "blas: ok"
