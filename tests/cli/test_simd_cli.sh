#!/usr/bin/env bash
# End to end: the simd implementation on every target this CPU runs, in f32
# and bf16; --simd-target's refusals; `conform bench` as a smoke test (one
# small op, its JSON schema, its check against LibTorch).
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect

"$CONFORM" list >"$tmp/list" 2>&1 || fail "list"
grep -q "simd  available" "$tmp/list" || { cat "$tmp/list"; fail "simd not listed as available"; }
targets=$(sed -n 's/^ *targets: \(.*\);.*/\1/p' "$tmp/list")
[ -n "$targets" ] || { cat "$tmp/list"; fail "no targets line"; }
echo "targets: $targets"
grep -q "scalar" <<<"$targets" || fail "the scalar fallback target is not listed"

# Every compiled target the CPU supports: "(not on this CPU)" marks the others.
for t in $(sed 's/[a-z0-9]* (not on this CPU)//g; s/(best here)//g' <<<"$targets"); do
  for d in f32 bf16; do
    "$CONFORM" --impl simd --simd-target "$t" --dtype "$d" --op all --cases 10 --out "$tmp" >"$tmp/log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { cat "$tmp/log"; fail "simd target $t dtype $d exited $rc"; }
    echo "simd $t $d: ok"
  done
done

expect 3 "unknown simd target 'neon' (compiled: " -- --impl simd --simd-target neon --op rmsnorm --cases 1 --out "$tmp"
expect 3 "simd stores f32 or bf16" -- --impl simd --dtype f16 --op rmsnorm --cases 1 --out "$tmp"
if grep -q "not on this CPU" <<<"$targets"; then
  t=$(grep -o '[a-z0-9]* (not on this CPU)' <<<"$targets" | head -1 | cut -d' ' -f1)
  expect 3 "this CPU cannot run it" -- --impl simd --simd-target "$t" --op rmsnorm --cases 1 --out "$tmp"
fi

# One case replayed on a forced target.
expect 0 "rmsnorm" -- --impl simd --simd-target scalar --case 'rmsnorm(T=3,D=20,eps=1.0000000000000001e-05,mag=1,outliers=0,seed=4)' --out "$tmp"

# bench: one small op, every implementation, JSON.
"$CONFORM" bench --op rmsnorm,decode --tokens 1 --context 8 --preset qwen3-0.6b --min-time 0 --min-reps 2 --json \
  >"$tmp/bench.json" 2>"$tmp/bench.err"
rc=$?
[ $rc -eq 0 ] || { cat "$tmp/bench.err"; fail "bench exited $rc"; }
python3 - "$tmp/bench.json" <<'PY' || fail "bench json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "conform-bench/1", r["schema"]
c = r["ceilings"]
assert c["copy_bytes_per_s"] > 0 and c["read_bytes_per_s"] > 0 and c["matmul_flops_per_s"] > 0 and c["f32_fma_flops_per_s"] > 0, c
# The FMA loop is a ceiling no matmul passes: LibTorch's 2048^3 product stays below it (by
# a margin for the two measurements' noise), and where the clock was read, so does the
# loop below twice its nominal rate (chains the compiler merged would count 12x).
assert c["matmul_flops_per_s"] < 1.25 * c["f32_fma_flops_per_s"], c
assert c["ghz"] == 0 or c["f32_fma_flops_per_s"] < 2 * c["f32_nominal_flops_per_s"], c
assert r["blas"]["core"] and r["blas"]["how"], r["blas"]
rows = {(x["op"], x["impl"], x["dtype"]) for x in r["results"]}
for want in [("rmsnorm", "simd", "f32"), ("rmsnorm", "simd", "bf16"), ("rmsnorm", "torch", "f32"),
             ("decode", "simd", "f32"), ("decode", "simd", "bf16"), ("decode", "torch", "f32")]:
    assert want in rows, (want, rows)
for x in r["results"]:
    assert x["median_s"] > 0 and x["reps"] >= 2, x
    if x["impl"] != "torch":
        assert x["max_rel_diff_vs_torch"] < (1e-1 if x["dtype"] == "bf16" else 1e-3), x
    # On the host, priced against the host's ceilings, timed against torch f32.
    assert x["on_device"] is False and 0 < x["fraction_of_ceiling"] <= 1 and x["bound"] in ("memory", "compute"), x
    assert x["ceiling"] in ("copy bandwidth", "read stream", "f32 FMA loop", "LibTorch f32 matmul", "bf16 dot loop (vdpbf16ps)",
                            "bf16 dot loop (Highway)"), x
    assert x["time_vs"] == "torch f32", x
assert "device_ceilings" not in r
PY
# A mixture of experts, timed whole (simd against torch's eager loop over experts), checked against torch:
# f32 to float32's rounding, bf16 (its experts packed in bf16, its stores rounded) to bf16's.
expect 0 "moe  *3  simd  f32 .* [0-9]e-0[5-9]$" -- bench --preset qwen1.5-moe-a2.7b --d-model 256 --op moe --tokens 1,3 \
  --min-time 0 --min-reps 2 --settle-ms 0
grep -Eq "moe  *3  simd  bf16 .* [0-9]e-0[2-4]$" "$tmp/out" || { cat "$tmp/out"; fail "bf16 moe not timed within bf16's rounding"; }
grep -q "^moe  *3  torch f32" "$tmp/out" || { cat "$tmp/out"; fail "no torch moe row"; }
expect 2 "tinyllama-1.1b has no mixture of experts" -- bench --op moe
# Latent attention at DeepSeek-V3's widths (heads cut), timed against torch's composed absorbed form, checked
# to float32's rounding, and in bf16 (latent cache and kv_b_proj kept in bf16) to bf16's; refused where the
# model has none.
expect 0 "mla_attention  *2  simd  f32 .* [0-9]e-0[5-9]$" -- bench --preset deepseek-v3 --heads 8 --kv-heads 8 --op mla_attention \
  --tokens 2 --context 40 --min-time 0 --min-reps 2 --settle-ms 0
grep -q "^mla_attention  *2  torch f32" "$tmp/out" || { cat "$tmp/out"; fail "no torch mla_attention row"; }
grep -Eq "^mla_attention  *2  simd  bf16 .* [0-9]e-0[2-4]$" "$tmp/out" || { cat "$tmp/out"; fail "bf16 mla_attention not timed within bf16's rounding"; }
expect 2 "tinyllama-1.1b has no latent attention" -- bench --op mla_attention
expect 2 "a mixture of experts is timed whole (--op moe)" -- bench --op moe_route --preset qwen3-30b-a3b
expect 2 "unknown op" -- bench --op nope
expect 2 "unknown preset 'nope'" -- bench --preset nope
echo "simd cli: ok"
