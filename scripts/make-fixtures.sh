#!/usr/bin/env bash
# Regenerates fixtures/*.h5 — the regression set `conform` runs by default —
# from the LibTorch reference in float64 (`conform generate`), and the
# rope-f32-recurrence-*.h5 files from scripts/rope_f32_fixtures.py, an
# independent float32 RoPE producer (numpy, not conform: its expected values
# are a float32 implementation's, which conform must accept), and
# block-f32-recurrence.h5 from scripts/block_f32_recurrence_fixtures.py (the
# numpy worker's float32 block with the same recurrence for its angles).
#
# Real head_dim, theta, eps, layout and qk_norm of each preset; d_model and
# ffn_dim scaled down and head counts reduced (keeping MHA / GQA / MQA) so the
# whole set stays under 5 MB. Covers every op, both RoPE layouts, theta
# 1e4 / 5e5 / 1e6 at positions past 8192, QK-norm on and off, MHA, GQA, MQA,
# and decode with and without a prefill; llama3 and YaRN RoPE scaling and
# partial rotary.
#
#   scripts/make-fixtures.sh            (uses build/conform; CONFORM=path overrides)
set -euo pipefail
cd "$(dirname "$0")/.."
CONFORM=${CONFORM:-build/conform}
out=fixtures
mkdir -p "$out"
gen() {  # gen NAME ARGS...: one file
  local name=$1; shift
  "$CONFORM" generate --force --seed 1 --out "$out/$name.h5" "$@"
}

# rmsnorm at the real d_model: Llama's eps and Qwen3's, with outlier channels.
gen rmsnorm-llama3-8b          --op rmsnorm --preset llama3-8b --tokens 3 --outliers 2
gen rmsnorm-qwen3-8b           --op rmsnorm --preset qwen3-8b --tokens 3

# rope: head_dim 128 / 64 / 96, both layouts, theta 1e4, 5e5, 1e6, past 8192.
gen rope-llama2-7b-interleaved --op rope --preset llama2-7b --rope-layout interleaved --n-heads 2 --tokens 4 --positions 8190
gen rope-llama3-8b             --op rope --preset llama3-8b --n-heads 2 --tokens 4 --positions 8190
gen rope-qwen3-8b              --op rope --preset qwen3-8b --n-heads 2 --tokens 4 --positions 131070
gen rope-mistral-7b-v0.3       --op rope --preset mistral-7b-v0.3 --rope-layout interleaved --n-heads 2 --tokens 3 --positions 32766
gen rope-tinyllama-1.1b        --op rope --preset tinyllama-1.1b --n-heads 3 --tokens 3 --positions 9000
gen rope-phi3-mini             --op rope --preset phi3-mini --n-heads 2 --tokens 3 --positions 4095

# qk_norm: Qwen3's head_dim and eps.
gen qk_norm-qwen3-8b           --op qk_norm --preset qwen3-8b --n-heads 4 --tokens 3

# attention: MHA, GQA, MQA; the queries are the last keys, past position 8192.
gen attention-llama2-7b-mha    --op attention --preset llama2-7b --n-heads 2 --n-kv-heads 2 --tokens 3 --keys 7 --positions 8188
gen attention-llama3-8b-gqa    --op attention --preset llama3-8b --n-heads 8 --n-kv-heads 2 --tokens 3 --keys 9 --positions 8190
gen attention-tinyllama-mqa    --op attention --preset tinyllama-1.1b --n-heads 4 --n-kv-heads 1 --tokens 2 --keys 11 --positions 9000

# swiglu: TinyLlama's FFN ratio.
gen swiglu-tinyllama-1.1b      --op swiglu --preset tinyllama-1.1b --scale-down 32 --tokens 3

# block (every tap): layouts x theta x qk_norm x head grouping.
gen block-llama2-7b-interleaved-mha --op block --preset llama2-7b --scale-down 128 --n-heads 2 --n-kv-heads 2 --rope-layout interleaved --tokens 4 --positions 8190
gen block-llama3-8b-gqa        --op block --preset llama3-8b --scale-down 128 --n-heads 4 --n-kv-heads 2 --tokens 4 --positions 8190
gen block-qwen3-8b-qknorm      --op block --preset qwen3-8b --scale-down 128 --n-heads 4 --n-kv-heads 2 --tokens 4 --positions 40000
gen block-mistral-7b-mqa       --op block --preset mistral-7b --scale-down 128 --n-heads 4 --n-kv-heads 1 --tokens 4 --positions 8190

# decode: KV cache after a prefill, and from the first token on.
gen decode-llama3-8b-gqa       --op decode --preset llama3-8b --scale-down 128 --n-heads 4 --n-kv-heads 2 --tokens 6 --prefill 3 --positions 8190
gen decode-llama2-7b-interleaved --op decode --preset llama2-7b --scale-down 128 --n-heads 2 --n-kv-heads 2 --rope-layout interleaved --tokens 5 --prefill 0 --positions 9000
gen decode-qwen3-0.6b-qknorm   --op decode --preset qwen3-0.6b --scale-down 32 --n-heads 4 --n-kv-heads 2 --tokens 5 --prefill 2 --positions 32760

# RoPE scaling and partial rotary: Llama 3.1's llama3 scaling past its original
# 8192 positions, Qwen3's YaRN (with its attention factor) past 32768, and a
# partial rotary head (the last quarter of each head passes through).
gen rope-llama3.1-8b-scaled    --op rope --preset llama3.1-8b --n-heads 2 --tokens 4 --positions 16380
gen block-qwen3-8b-yarn        --op block --config scripts/fixture-configs/qwen3-8b-yarn.json --scale-down 128 --n-heads 4 --n-kv-heads 2 --tokens 4 --positions 40000
gen rope-phi4-mini-partial-rotary --op rope --config scripts/fixture-configs/phi-4-mini-partial-rotary.json --n-heads 2 --tokens 3 --positions 4100

# Float32 RoPE from a second producer (see fixtures/README.md). Debian's
# numpy and h5py live in /usr/bin/python3, which a pyenv python3 may shadow.
PY=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import h5py, numpy" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "make-fixtures.sh: no python3 with h5py and numpy (scripts/setup.sh installs them)" >&2; exit 2; }
"$PY" scripts/rope_f32_fixtures.py --out "$out"
"$PY" scripts/block_f32_recurrence_fixtures.py --out "$out"

du -ch "$out"/*.h5 | tail -1
