#!/usr/bin/env bash
# No false alarms, shown: honest implementations on fresh random seeds, every
# op, each dtype, until CASES property cases per dtype have been judged.
#
#   scripts/soak.sh [--cases N] [--dtype LIST] [--impl LIST] [--impl-cmd CMD] [--op LIST] [--per-run K]
#                   [--conform PATH] [--out DIR]
#
#   --cases N     property cases per dtype, over every op and implementation (default 200000)
#   --dtype LIST  comma-separated (default f32,bf16)
#   --impl LIST   the implementations (default scalar,simd; cuda where a GPU is;
#                 none with --impl-cmd unless named)
#   --impl-cmd CMD  also (or, without --impl, only) this worker (impls/WORKERS.md),
#                 e.g. '/usr/bin/python3 impls/worker_example/numpy_worker.py --angles recurrence'
#   --op LIST     the ops (default all)
#   --per-run K   cases per op per conform run (default 400): each run takes a
#                 fresh seed (--seed random), printed with its result
#   --out DIR     where each failing run's report is kept (default reports/soak)
#
# Prints one line per run (seed, cases, failures) and a summary per dtype;
# exit 0 when nothing failed, 1 when a case failed (its report and replay line
# are kept and printed), 2 on a usage error. ctest runs it small (label soak);
# the full run and its result are in BENCHMARKS.md ("Soak").
set -uo pipefail
cd "$(dirname "$0")/.."

target=200000 dtypes=f32,bf16 impls="" impl_cmd="" ops=all per_run=400 conform=build/conform out=reports/soak
while (($#)); do
  case "$1" in
    --cases) target=${2:?}; shift 2 ;;
    --dtype) dtypes=${2:?}; shift 2 ;;
    --impl) impls=${2:?}; shift 2 ;;
    --impl-cmd) impl_cmd=${2:?}; shift 2 ;;
    --op) ops=${2:?}; shift 2 ;;
    --per-run) per_run=${2:?}; shift 2 ;;
    --conform) conform=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    *) echo "soak.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$conform" ] || { echo "soak.sh: $conform: not built (scripts/setup.sh)" >&2; exit 2; }
PY=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import json" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "soak.sh: needs a python3 (to read the JSON report)" >&2; exit 2; }
worker=()
[ -n "$impl_cmd" ] && worker=(--impl-cmd "$impl_cmd")
if [ -z "$impls" ] && [ -n "$impl_cmd" ]; then
  :  # the worker alone
elif [ -z "$impls" ]; then
  impls=scalar,simd
  "$conform" list 2>/dev/null | grep -qE "^  cuda +available" && impls=$impls,cuda
fi
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rc=0
IFS=, read -ra dts <<<"$dtypes"
for dt in "${dts[@]}"; do
  # The implementations that run this dtype (scalar is float32 only: exit 3).
  IFS=, read -ra all <<<"$impls"
  run_impls=""
  for i in ${impls:+"${all[@]}"}; do
    "$conform" --impl "$i" --dtype "$dt" --op rmsnorm --cases 1 --no-default-fixtures --quiet --out "$tmp/probe" \
      >/dev/null 2>&1
    [ $? -ne 3 ] && run_impls=${run_impls:+$run_impls,}$i
  done
  [ -n "$run_impls" ] || [ -n "$impl_cmd" ] || { echo "soak.sh: no implementation of $impls runs $dt" >&2; exit 2; }
  impl_args=()
  [ -n "$run_impls" ] && impl_args=(--impl "$run_impls")
  done_cases=0 failed=0 runs=0 t0=$SECONDS
  while ((done_cases < target)); do
    "$conform" "${impl_args[@]}" "${worker[@]}" --op "$ops" --dtype "$dt" --cases "$per_run" --seed random \
      --no-default-fixtures --quiet --out "$tmp/run" >"$tmp/out" 2>&1
    code=$?
    if ((code != 0 && code != 1)); then cat "$tmp/out"; echo "soak.sh: conform exited $code" >&2; exit 2; fi
    read -r seed n f < <("$PY" - "$tmp/run/conform.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
cases = [c for c in r["cases"] if c.get("origin") != "fixture"]
print(r["seed"], len(cases), sum(1 for c in cases if not c["pass"]))
PY
)
    if [ -z "${n:-}" ] || ((n == 0)); then
      cat "$tmp/out"; echo "soak.sh: the run judged no case (no report, or an empty one)" >&2; exit 2
    fi
    runs=$((runs + 1)) done_cases=$((done_cases + n)) failed=$((failed + f))
    printf 'soak %-4s run %3d  seed %-12s %6d cases  %d failed  (%d of %d)\n' "$dt" "$runs" "$seed" "$n" "$f" \
      "$done_cases" "$target"
    if ((f > 0 || code != 0)); then
      keep="$out/$dt-seed-$seed"
      rm -rf "$keep" && cp -r "$tmp/run" "$keep"
      grep -E "^FAIL|replay:" "$tmp/out" | head -20
      echo "soak.sh: report kept in $keep"
      rc=1
    fi
  done
  printf 'soak %s: %d cases (%s; ops %s) in %d runs, %d failed, %d s\n' "$dt" "$done_cases" \
    "${run_impls}${impl_cmd:+${run_impls:+, }worker: $impl_cmd}" "$ops" "$runs" \
    "$failed" $((SECONDS - t0))
done
exit $rc
