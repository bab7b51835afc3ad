#!/usr/bin/env bash
# Kernels in any language (impls/WORKERS.md), through conform: the numpy
# worker conforms on every op, its wrong twin is caught and named, the torch
# worker (when torch is importable) conforms on its ops, and every fault a
# worker can commit — a crash, a hang, garbage on its stdout, a wrong shape,
# NaN, an exit before its hello or in the middle of a run — is a failed case
# with its reason (or exit 3 before the hello), and the run goes on.
# Exit 77 (ctest: skipped) where no python3 has numpy.
set -uo pipefail
: "${CONFORM:?path to the conform binary}" "${SRC:?the source tree}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect, find_python

find_python numpy  # $PY (lib.sh)
[ -n "$PY" ] || { echo "skipped: no python3 with numpy (apt-get install python3-numpy)"; exit 77; }
ex=$SRC/impls/worker_example
faults=$SRC/tests/workers/faults

expect_grep=-E  # expect (lib.sh): PATTERN is a grep -E regex

# The numpy worker: every op, the regression fixtures too.
expect 0 "^block +numpy" -- --impl-cmd "$PY $ex/numpy_worker.py" --cases 30 --out "$tmp/np"
"$PY" - "$tmp/np/conform.json" <<'PY' || fail "numpy worker: report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["pass"] is True
ops = {c["op"] for c in r["cases"] if c["impl"] == "numpy"}
assert ops == {"rmsnorm", "rope", "qk_norm", "attention", "swiglu", "block", "decode", "paged_attention", "moe",
               "moe_route", "moe_experts", "mla_attention"}, ops
assert any(c["origin"] == "fixture" for c in r["cases"] if c["impl"] == "numpy")
PY
# With RoPE angles by the float32 recurrence: another honest program, far
# from HF's rounding past position 10000 (a fresh seed each run).
expect 0 "^block +numpy" -- --impl-cmd "$PY $ex/numpy_worker.py --angles recurrence" --op rope,block,decode \
  --cases 40 --params 'pos=[0-9]{5,}' --seed random --no-default-fixtures --out "$tmp/rec"
# Its twin (kv heads tiled): exit 1, the bug named.
expect 1 "diagnosis: gqa_head_mapping_tiled: matches" -- --impl-cmd "$PY $ex/numpy_twin.py" --op attention --cases 30 \
  --no-default-fixtures --out "$tmp/twin"
# The PyTorch worker, where torch is importable.
if "$PY" -c "import torch" 2>/dev/null; then
  expect 0 "^attention +torch_cpu" -- --impl-cmd "$PY $ex/torch_worker.py" --op rope,rmsnorm,attention --cases 20 \
    --out "$tmp/torch"
else
  echo "torch_worker: not run (no torch for $PY)"
fi

# Faults: one bad call among good ones; each reported with its reason, the
# worker restarted, the other cases judged.
fault() {  # fault NAME PATTERN
  CONFORM_FAULT_AFTER=1 expect 1 "$2" -- --impl-cmd "$PY $faults/$1.py" --op rope --cases 4 --no-default-fixtures \
    --call-timeout 3 --out "$tmp/$1"
  "$PY" - "$tmp/$1/conform.json" "$1" <<'PY' || fail "$1: report"
import json, sys
r = json.load(open(sys.argv[1]))
cases = [c for c in r["cases"] if c["op"] == "rope"]
assert r["pass"] is False and len(cases) == 4, (r["pass"], len(cases))
assert any(c["pass"] for c in cases), sys.argv[2] + ": no case passed: the run did not go on after the fault"
PY
}
fault crash "the worker was killed by signal 6 \(SIGABRT\) in rope \(the worker is restarted"
fault hang "timed out after 3 s in rope and was killed"
fault garbage "protocol violation in rope: frame: magic: expected 43 46 57 4b"
fault wrong_shape 'rope: outputs\[0\] \("out"\): shape: expected \[1,4\], found \[1,3\]'
fault nan "non-finite value nan at"
fault exit_mid_run "the worker exited with status 1 in rope"
# A kernel that prints to stdout: the protocol survives, its words come out prefixed.
expect 0 "^rope +fault_prints_to_stdout" -- --impl-cmd "$PY $faults/prints_to_stdout.py" --op rope --cases 3 \
  --no-default-fixtures --out "$tmp/print"
grep -q "^  worker\[fault_prints_to_stdout\] | " "$tmp/out" || { cat "$tmp/out"; fail "the worker's print() was not relayed, prefixed"; }
# A worker that gives up before its hello: unavailable, exit 3, with its stderr.
expect 3 "exited with status 1 before its hello; its stderr: early_exit" -- \
  --impl-cmd "$PY $faults/early_exit.py" --op rope --cases 1 --no-default-fixtures --out "$tmp/early"
# A worker flooding its stderr (3 MB of blank lines, 2 MB of text) costs
# conform's output at most 1 MiB, says so once, and is judged as usual.
expect 0 "^rope +fault_noisy_stderr" -- --impl-cmd "$PY $faults/noisy_stderr.py" --op rope --cases 2 \
  --no-default-fixtures --out "$tmp/noisy"
# (before its hello a worker is labelled by its command)
grep -q "^  worker\[.*noisy_stderr.*\] | (its stderr past 1 MiB is not shown" "$tmp/out" || fail "no line for the cut stderr"
grep -q "^  worker\[.*noisy_stderr.*\] | $" "$tmp/out" && fail "a blank stderr line was relayed"
[ "$(wc -c <"$tmp/out")" -lt 1200000 ] || fail "a flooded stderr cost $(wc -c <"$tmp/out") bytes of output"
# A hello that is a bare JSON string holding a C1 CSI and a bidi override:
# refused (exit 3), the string shown escaped, neither character printed.
expect 3 'found "\\u009b2J\\u202eolleh FORGED"' -- --impl-cmd "$PY $faults/bad_hello.py string" --op rope --cases 1 \
  --no-default-fixtures --out "$tmp/string"
LC_ALL=C grep -q $'\xc2\x9b\|\xe2\x80\xae' "$tmp/out" && { cat "$tmp/out"; fail "a worker's C1 or bidi control was printed"; }
# A declaration about an op it does not list, an index dtype that is not an integer: refused, named.
expect 3 'hello: batch_invariant: "paged_attention" is not one of its ops' -- \
  --impl-cmd "$PY $faults/bad_hello.py invariant" --op rmsnorm --cases 1 --no-default-fixtures --out "$tmp/inv"
expect 3 'hello: index_dtype: expected "i64" or "i32", found "f32"' -- \
  --impl-cmd "$PY $faults/bad_hello.py index" --op rmsnorm --cases 1 --no-default-fixtures --out "$tmp/idx"
expect 3 'hello: kv_cache_dtypes: expected "fp8_e4m3" or "fp8_e5m2", found "int8"' -- \
  --impl-cmd "$PY $faults/bad_hello.py kvcache" --op paged_attention --cases 1 --no-default-fixtures --out "$tmp/kv"
expect 3 'hello: kv_cache_dtypes: the worker does not implement paged_attention' -- \
  --impl-cmd "$PY $faults/bad_hello.py kvcache_op" --op rmsnorm --cases 1 --no-default-fixtures --out "$tmp/kv"
expect 3 'hello: kv_cache_dtypes: not an array or an object' -- \
  --impl-cmd "$PY $faults/bad_hello.py kvcache_num" --op rmsnorm --cases 1 --no-default-fixtures --out "$tmp/kv"
expect 3 'hello: kv_cache_dtypes: rope is not an op with a KV cache \(paged_attention, decode\)' -- \
  --impl-cmd "$PY $faults/bad_hello.py kvcache_obj" --op rmsnorm --cases 1 --no-default-fixtures --out "$tmp/kv"
expect 3 'hello: kv_cache_dtypes.decode: expected "fp8_e4m3" or "fp8_e5m2", found "fp4"' -- \
  --impl-cmd "$PY $faults/bad_hello.py kvcache_obj_decode" --op rmsnorm --cases 1 --no-default-fixtures --out "$tmp/kv"
expect 3 'hello: activation_quant: rmsnorm has no weight product' -- \
  --impl-cmd "$PY $faults/bad_hello.py actquant" --op rmsnorm --cases 1 --no-default-fixtures --out "$tmp/aq"
expect 3 'hello: activation_quant.swiglu: expected "q8_0", "q8_k" or "none", found "q4_0"' -- \
  --impl-cmd "$PY $faults/bad_hello.py actquant_value" --op swiglu --cases 1 --no-default-fixtures --out "$tmp/aq"
# One that cannot even start.
expect 3 "impl-cmd '/nonexistent/worker'" -- --impl-cmd "/nonexistent/worker" --op rope --cases 1 --out "$tmp/none"
# --impl-fd: descriptors that are not two open ones of the right direction are a bad input (exit 2).
expect 2 "expected two descriptors READ,WRITE" -- --impl-fd 5 --op rope --cases 1 --out "$tmp/fd"
expect 2 "0, 1 and 2 are conform's own" -- --impl-fd 0,1 --op rope --cases 1 --out "$tmp/fd"
expect 2 "descriptor 7 .* is not open" -- --impl-fd 7,8 --op rope --cases 1 --out "$tmp/fd"
expect 2 "descriptor 8 .*conform writes its calls to it.* is open only for reading" -- --impl-fd 7,8 --op rope \
  --cases 1 --out "$tmp/fd" 7<"$tmp/out" 8<"$tmp/out"
# A peer that closes at once: unavailable (exit 3), named.
expect 3 "impl-fd 7,8.*before its hello" -- --impl-fd 7,8 --op rope --cases 1 --out "$tmp/fd" 7</dev/null 8>/dev/null
echo "workers: ok"
