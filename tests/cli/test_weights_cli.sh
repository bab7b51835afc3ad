#!/usr/bin/env bash
# Real checkpoints through conform (docs/checkpoints.md): tiny models
# written in the real formats (tests/weights/make_checkpoints.cpp: HF
# safetensors F32/BF16/F16/sharded, GGUF F32/F16/Q8_0/Q4_0/Q4_K_M, Llama 3, Qwen3).
#  * the gate on a layer's real weights: scalar and simd conform, drawn and
#    model inputs, one layer and all; a mutant is caught and named, and its
#    replay line reproduces the failure;
#  * conform forward: the HF and GGUF files of one model give the same
#    reference logits (the GGUF's q/k permutation and interleaved RoPE undo
#    each other), and --save-logits never overwrites;
#  * --full-size takes a preset's own widths; --verbose reports the phases;
#  * bad input exits 2 naming the file, tensor or flag.
set -uo pipefail
: "${CONFORM:?path to the conform binary}" "${MAKE_CHECKPOINTS:?path to weights_checkpoints}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect, find_python

expect_grep=-E  # expect (lib.sh): PATTERN is a grep -E regex

ck=$tmp/ck
"$MAKE_CHECKPOINTS" "$ck" >/dev/null || fail "weights_checkpoints"
run=(--impl scalar,simd --no-default-fixtures --quiet)

# ---- the gate on real weights -------------------------------------------------
for m in llama-hf llama-hf-bf16 llama-hf-sharded llama.gguf llama-q8_0.gguf llama3-hf qwen3.gguf qwen2-hf qwen2.gguf \
         gemma-hf gemma.gguf gemma2-hf gemma2.gguf gemma3-hf gemma3.gguf mistral-hf smollm3-hf smollm3.gguf; do
  expect 0 "^block +scalar" -- --weights "$ck/$m" --layer 1 --cases 8 "${run[@]}" --out "$tmp/r-$m"
done
grep -q '"weights"' "$tmp/r-llama-hf/conform.json" || fail "report: no config.weights"
# No checkpoint reader reads latent attention: every op but it (and the experts) runs; named, it is refused, as
# are its width flags (the weights fix the sizes).
/usr/bin/python3 -c "
import json, sys
ops = {c['op'] for c in json.load(open(sys.argv[1]))['cases']}
assert 'mla_attention' not in ops and {'block', 'paged_attention'} <= ops, ops" "$tmp/r-llama-hf/conform.json" ||
  fail "a --weights run offered latent attention"
expect 2 "reads no latent attention yet" -- --weights "$ck/llama-hf" --op mla_attention "${run[@]}" --out "$tmp/r-mla"
expect 2 "the checkpoint's weights fix the sizes" -- --weights "$ck/llama-hf" --kv-lora-rank 16 "${run[@]}" --out "$tmp/r-mla"
# llama.cpp's Q4_K_M mix (Q4_K, with Q6_K for layer 2's attn_v and ffn_down and the head): every layer, then forward.
expect 0 "layer 2:.*weights read" -- --weights "$ck/llama-k-q4_k_m.gguf" --layers all --cases 3 --impl scalar,simd \
  --no-default-fixtures --out "$tmp/q4km"
grep -q "Q6_K dequantised to float32 (3 tensors)" "$tmp/out" || fail "Q4_K_M: the Q6_K tensors are not reported"
expect 0 "logits: $tmp/q4km.h5" -- forward --weights "$ck/llama-k-q4_k_m.gguf" --token-count 5 --impl scalar,simd \
  --save-logits "$tmp/q4km.h5"
# llama.cpp's own logits on that file (tests/weights/llamacpp-llama-k-q4_k_m.h5, its commit in the file's
# attributes): 2e-2 from the dequantised model, and named as its Q8_K activations (2.2e-7 once modelled).
# The same logits against the F32 model (other weights) are not explained by it.
llamacpp=${SRC:?}/tests/weights/llamacpp-llama-k-q4_k_m.h5
expect 1 "diagnosis: q8_k_activations: .*\(rel error [0-9.]+e-0[7-9]\)" -- forward --weights "$ck/llama-k-q4_k_m.gguf" \
  --tokens 1,5,2,7,3 --impl scalar --expect-logits "$llamacpp"
expect 1 "no single-convention change" -- forward --weights "$ck/llama-k.gguf" --tokens 1,5,2,7,3 --impl scalar \
  --expect-logits "$llamacpp"
# Gemma (1 + w norms, GeGLU, embedding x sqrt(D), tied): llama.cpp's logits on the GGUF
# (tests/weights/llamacpp-gemma.h5) are 8.6e-5 from the float64 model, all of it ggml's float16 GELU
# table (3.2e-7 once modelled); the HF and GGUF files are one model; a forward without the embedding
# scale is named.
gemma_cpp=${SRC:?}/tests/weights/llamacpp-gemma.h5
expect 0 "the reference's logits match it: rel error [0-9.]+e-05" -- forward --weights "$ck/gemma.gguf" \
  --tokens 1,5,2,7,3 --impl scalar,simd --expect-logits "$gemma_cpp"
expect 1 "diagnosis: gelu_f16_table: .*\(rel error [0-9.]+e-0[7-9]\)" -- forward --weights "$ck/gemma.gguf" \
  --tokens 1,5,2,7,3 --impl scalar --expect-logits "$gemma_cpp" --logits-tol 1e-6
expect 0 "the reference's logits match it: rel error [0-9.]+e-05" -- forward --weights "$ck/gemma-hf" \
  --tokens 1,5,2,7,3 --impl scalar --expect-logits "$gemma_cpp" --logits-tol 1e-4
# An engine's logits without one of Gemma's twists (written here by reading the model without it):
# each named against the model as it is.
for twist in "noscale --embedding-multiplier 1" "silu --hidden-act silu" "plainnorm --norm-plus-one 0" \
             "nocap --final-logit-softcap 0"; do
  set -- $twist
  expect 0 "logits: $tmp/gemma-$1.h5" -- forward --weights "$ck/gemma-hf" --tokens 1,5,2,7,3 --impl scalar "$2" "$3" \
    --save-logits "$tmp/gemma-$1.h5"
done
expect 1 "diagnosis: embedding_scale_missing: the file's logits are this model without its embedding multiplier" -- \
  forward --weights "$ck/gemma.gguf" --tokens 1,5,2,7,3 --impl scalar --expect-logits "$tmp/gemma-noscale.h5"
expect 1 "diagnosis: geglu_as_swiglu: the file's logits are this model with that convention changed" -- \
  forward --weights "$ck/gemma.gguf" --tokens 1,5,2,7,3 --impl scalar --expect-logits "$tmp/gemma-silu.h5"
expect 1 "diagnosis: norm_plus_one_missing: the file's logits are this model with that convention changed" -- \
  forward --weights "$ck/gemma-hf" --tokens 1,5,2,7,3 --impl scalar --expect-logits "$tmp/gemma-plainnorm.h5"
# Gemma 2's final soft-cap (cap * tanh(logits / cap)), given by flag: an engine without it is named.
expect 1 "diagnosis: final_softcap_missing: the file's logits are this model without its final soft-cap" -- \
  forward --weights "$ck/gemma-hf" --tokens 1,5,2,7,3 --impl scalar,simd --final-logit-softcap 2 \
  --expect-logits "$tmp/gemma-nocap.h5"
expect 2 "--final-logit-softcap: expected a cap >= 0" -- forward --weights "$ck/gemma-hf" --tokens 1,5 \
  --final-logit-softcap -3
expect 2 "--embedding-multiplier: expected a positive number" -- forward --weights "$ck/gemma-hf" --tokens 1,5 \
  --embedding-multiplier 0

# Gemma 2 (sandwich norms, soft-caps 5 / 10, sliding and full layers alternating) and Gemma 3 (QK-norm,
# 5 sliding layers with their own RoPE base, then a full one) against llama.cpp's logits on the GGUFs
# (tests/weights/llamacpp-gemma{2,3}.h5): the HF and GGUF files of each are one model, and what is
# left once ggml's float16 GELU table is modelled is 4e-7 (Gemma 3) and 9e-6 (Gemma 2: a gate or two
# that ggml's float32 rounds to the other float16 neighbour, scaled up by the post-FFN norm; with ggml's
# exact GELU llama.cpp is 2.9e-7 from the model, BENCHMARKS.md).
for g in gemma2 gemma3; do
  cpp=${SRC:?}/tests/weights/llamacpp-$g.h5
  for w in $g.gguf $g-hf; do
    expect 0 "the reference's logits match it: rel error [0-9.]+e-0[45]" -- forward --weights "$ck/$w" \
      --tokens 1,5,2,7,3 --impl scalar,simd --expect-logits "$cpp" --logits-tol 1e-3
  done
done
expect 1 "diagnosis: gelu_f16_table: .*\(rel error [0-9.]+e-0[7-9]\)" -- forward --weights "$ck/gemma3.gguf" \
  --tokens 1,5,2,7,3 --impl scalar --expect-logits "${SRC:?}/tests/weights/llamacpp-gemma3.h5" --logits-tol 1e-6
expect 1 "diagnosis: gelu_f16_table: .*\(rel error [0-9.]+e-0[6-9]\)" -- forward --weights "$ck/gemma2-hf" \
  --tokens 1,5,2,7,3 --impl scalar --expect-logits "${SRC:?}/tests/weights/llamacpp-gemma2.h5" --logits-tol 2e-5
# Mistral v0.1's window: llama.cpp runs its GGUF (a llama conversion) without one, and agrees with that
# file; against the HF model (window 3 of 5 tokens) its logits are named window_ignored.
mistral_cpp=${SRC:?}/tests/weights/llamacpp-mistral.h5
expect 0 "the reference's logits match it: rel error [0-9.]+e-0[7-9]" -- forward --weights "$ck/mistral.gguf" \
  --tokens 1,5,2,7,3 --impl scalar,simd --expect-logits "$mistral_cpp" --logits-tol 1e-6
expect 1 "diagnosis: window_ignored: the file's logits are this model with that convention changed" -- forward \
  --weights "$ck/mistral-hf" --tokens 1,5,2,7,3 --impl scalar,simd --expect-logits "$mistral_cpp" --logits-tol 1e-6
# ONNX Runtime's graph of the HF checkpoints (scripts/ort-checkpoint-logits.js: its GroupQueryAttention
# with local_window_size, q/k/v biases added by its own Add) is the producer that applies Mistral's window:
# the HF model agrees with it; an engine whose window is one key wider is named.
for m in mistral qwen2 llama; do
  expect 0 "the reference's logits match it: rel error [0-9.]+e-0[7-9]" -- forward --weights "$ck/$m-hf" \
    --tokens 1,5,2,7,3 --impl scalar,simd --expect-logits "${SRC:?}/tests/weights/ort-$m.h5" --logits-tol 1e-6
done
expect 1 "diagnosis: window_off_by_one: the file's logits are this model with that convention changed" -- forward \
  --weights "$ck/mistral-hf" --tokens 1,5,2,7,3 --impl scalar --expect-logits "${SRC:?}/tests/weights/ort-mistral-window4.h5" \
  --logits-tol 1e-6
# SmolLM3 (layer 3 of 4 NoPE) against llama.cpp (tests/weights/llamacpp-smollm3.h5): the HF and GGUF
# files are one model; an engine that rotates every layer is named.
smol_cpp=${SRC:?}/tests/weights/llamacpp-smollm3.h5
for w in smollm3.gguf smollm3-hf; do
  expect 0 "the reference's logits match it: rel error [0-9.]+e-0[7-9]" -- forward --weights "$ck/$w" \
    --tokens 1,5,2,7,3 --impl scalar,simd --expect-logits "$smol_cpp" --logits-tol 1e-6
done
# (the edited config.json: every layer RoPE; tr joins the file's one-entry-a-line list first)
tr -d '\n' < "$ck/smollm3-hf/config.json" | sed -E 's/"no_rope_layers": *\[[^]]*\]/"no_rope_layers": [1, 1, 1, 1]/' \
  > "$tmp/smol-rope.json"
grep -q '"no_rope_layers": \[1, 1, 1, 1\]' "$tmp/smol-rope.json" || fail "could not edit smollm3-hf's config.json"
expect 0 "logits: $tmp/smol-rope.h5" -- forward --weights "$ck/smollm3-hf" --tokens 1,5,2,7,3 --impl scalar \
  --config "$tmp/smol-rope.json" --save-logits "$tmp/smol-rope.h5"
expect 1 "diagnosis: no_rope_layers_ignored \(every layer rotated\)" -- forward --weights "$ck/smollm3.gguf" \
  --tokens 1,5,2,7,3 --impl scalar --expect-logits "$tmp/smol-rope.h5"
# gpt-oss's attention (q/k/v and o_proj biases, a sink per head, sliding / full layers) against llama.cpp's
# own stream (tests/weights/llamacpp-gptoss.h5: each layer's ffn_inp and l_out through its eval callback):
# each attention sub-layer from llama.cpp's input to it, the experts left to llama.cpp. The HF and GGUF files
# are one model. llama.cpp run on the GGUF with one twist removed is named, layer by layer.
go_cpp=${SRC:?}/tests/weights/llamacpp-gptoss
for w in gptoss.gguf gptoss-hf; do
  expect 0 "the reference's attention sub-layers match it: worst rel error [0-9.]+e-0[78]" -- forward \
    --weights "$ck/$w" --expect-hidden "$go_cpp.h5" --hidden-tol 1e-6
  grep -qE "^3 +full, sinks +[0-9.]+e-0[78]" "$tmp/out" || { cat "$tmp/out"; fail "$w: layer 3 not checked as full, with sinks"; }
  grep -qE "^0 +sliding 3, sinks " "$tmp/out" || { cat "$tmp/out"; fail "$w: layer 0 not checked as sliding"; }
done
for v in "nosinks:sink_missing" "sinkwronghead:sink_wrong_head" "noobias:o_bias_missing" "nowindow:window_ignored"; do
  expect 1 "layer 2: diagnosis: ${v#*:} \(" -- forward --weights "$ck/gptoss.gguf" --expect-hidden "$go_cpp-${v%%:*}.h5" \
    --hidden-tol 1e-6
done
expect 1 "layer 0: diagnosis: window_off_by_one \(a window of 3 keys where the config's is 4\)" -- forward \
  --weights "$ck/gptoss-hf" --expect-hidden "$go_cpp.h5" --hidden-tol 1e-6 --sliding-window 4
# Any checkpoint reads this way: llama.cpp's stream of the Mistral GGUF (its llama graph, no window) is the
# GGUF's model, layer by layer, and against the HF model each layer is named window_ignored.
expect 0 "the reference's attention sub-layers match it: worst rel error [0-9.]+e-0[78]" -- forward \
  --weights "$ck/mistral.gguf" --expect-hidden "${SRC:?}/tests/weights/llamacpp-mistral-hidden.h5" --hidden-tol 1e-6
expect 1 "layer 1: diagnosis: window_ignored \(this sliding layer attended every earlier key\)" -- forward \
  --weights "$ck/mistral-hf" --expect-hidden "${SRC:?}/tests/weights/llamacpp-mistral-hidden.h5" --hidden-tol 1e-6
# The experts are never run as the block's SwiGLU: every path that would is refused, naming them.
expect 2 "GptOssForCausalLM's FFN is a mixture of 4 experts, 2 per token .*--expect-hidden FILE" -- forward \
  --weights "$ck/gptoss-hf" --tokens 1,5,2
expect 2 "gpt-oss's FFN is a mixture of 4 experts" -- --weights "$ck/gptoss.gguf" --op block --cases 1
# Its config pins the ops that do not run its experts; those that would are refused when named.
expect 0 "" -- --config "$ck/gptoss-hf/config.json" --op attention,paged_attention,rope --cases 3 --impl scalar
expect 2 "--op block: op block runs the FFN, and $ck/gptoss-hf/config.json's FFN is a mixture of 4 experts" -- \
  --config "$ck/gptoss-hf/config.json" --op block --cases 1
expect 2 "op block runs the FFN.*a whole block of it is not this model" -- anatomy --config "$ck/gptoss-hf/config.json"
# Bad hidden files and flags: exit 2 naming the file and dataset or flag.
find_python "numpy, h5py"  # $PY (lib.sh)
[ -n "$PY" ] || fail "no python3 with h5py and numpy (scripts/setup.sh installs python3-h5py python3-numpy)"
"$PY" - "$go_cpp.h5" "$tmp/hid" <<'PY' || fail "writing bad hidden files"
import h5py, numpy as np, shutil, sys
src, out = sys.argv[1], sys.argv[2]
def variant(name, edit):
    shutil.copy(src, f"{out}-{name}.h5")
    with h5py.File(f"{out}-{name}.h5", "r+") as f:
        edit(f)
def nan(f): d = f["layers/1/attn_residual"]; a = d[()]; a[2, 3] = np.nan; d[...] = a
def narrow(f):
    for l in range(4):
        for n in ("attn_residual", "out"):
            a = f[f"layers/{l}/{n}"][()][:, :32]; del f[f"layers/{l}/{n}"]; f[f"layers/{l}/{n}"] = a
def token(f): d = f["token_ids"]; a = d[()]; a[1] = 64; d[...] = a
def noout(f): del f["layers/2/out"]
def deep(f):
    for l in range(4, 6):
        f[f"layers/{l}/attn_residual"] = f["layers/0/attn_residual"][()]
        f[f"layers/{l}/out"] = f["layers/0/out"][()]
variant("nan", nan); variant("narrow", narrow); variant("token", token); variant("noout", noout); variant("deep", deep)
PY
expect 2 "$tmp/hid-nan.h5: layers/1/attn_residual: .*NaN" -- forward --weights "$ck/gptoss.gguf" --expect-hidden "$tmp/hid-nan.h5"
expect 2 "$tmp/hid-narrow.h5: layers/0/attn_residual: expected 64 columns \(the model's d_model\), found 32" -- forward --weights "$ck/gptoss.gguf" \
  --expect-hidden "$tmp/hid-narrow.h5"
expect 2 "$tmp/hid-token.h5: token_ids\[1\]: 64 is out of the vocabulary \[0, 64\)" -- forward --weights "$ck/gptoss.gguf" \
  --expect-hidden "$tmp/hid-token.h5"
expect 2 "$tmp/hid-noout.h5: layers/2/out: missing dataset" -- forward --weights "$ck/gptoss.gguf" --expect-hidden "$tmp/hid-noout.h5"
expect 2 "$tmp/hid-deep.h5: layers/5: the file holds 6 layers, the model \($ck/gptoss.gguf\) 4" -- forward \
  --weights "$ck/gptoss.gguf" --expect-hidden "$tmp/hid-deep.h5"
expect 2 "--impl: not with --expect-hidden" -- forward --weights "$ck/gptoss.gguf" --expect-hidden "$go_cpp.h5" --impl scalar
expect 2 "--expect-hidden: needs --weights" -- forward --expect-hidden "$go_cpp.h5"
expect 2 "--hidden-tol: only with --expect-hidden" -- forward --weights "$ck/llama-hf" --tokens 1,2 --hidden-tol 1e-3
expect 2 "--heads: the checkpoint's weights fix the sizes" -- forward --weights "$ck/gptoss.gguf" --expect-hidden "$go_cpp.h5" \
  --heads 8
# Engines that get one of Gemma 2/3's twists wrong, written here by reading the model so: each named.
sed_cfg() {  # sed_cfg OUT EXPR: gemma3-hf's config.json edited
  sed -E "$2" "$ck/gemma3-hf/config.json" > "$1"
}
sed_cfg "$tmp/g3-global.json" 's/"rope_local_base_freq": *[0-9.e+]+/"rope_local_base_freq": 1000000.0/'
sed_cfg "$tmp/g3-allslide.json" 's/"sliding_window_pattern": *6/"layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention"]/'
grep -q '"rope_local_base_freq": 1000000.0' "$tmp/g3-global.json" || fail "could not edit gemma3-hf's config.json"
for variant in "global --config $tmp/g3-global.json" "allslide --config $tmp/g3-allslide.json" "nosandwich --sandwich-norm 0"; do
  set -- $variant
  expect 0 "logits: $tmp/g3-$1.h5" -- forward --weights "$ck/gemma3-hf" --tokens 1,5,2,7,3 --impl scalar "$2" "$3" \
    --save-logits "$tmp/g3-$1.h5"
done
expect 1 "diagnosis: local_rope_base_ignored" -- forward --weights "$ck/gemma3-hf" --tokens 1,5,2,7,3 --impl scalar \
  --expect-logits "$tmp/g3-global.h5"
expect 1 "diagnosis: layer_types_ignored \(every layer sliding\)" -- forward --weights "$ck/gemma3.gguf" --tokens 1,5,2,7,3 \
  --impl scalar --expect-logits "$tmp/g3-allslide.h5"
expect 1 "diagnosis: sandwich_norm_missing: the file's logits are this model with that convention changed" -- \
  forward --weights "$ck/gemma3.gguf" --tokens 1,5,2,7,3 --impl scalar --expect-logits "$tmp/g3-nosandwich.h5"
# A GeGLU kernel that runs silu fails on Gemma's real layer, named.
expect 1 "diagnosis: geglu_as_swiglu: matches" -- --weights "$ck/gemma.gguf" --layer 1 --impl geglu_as_swiglu --op block \
  --cases 4 --no-default-fixtures --out "$tmp/geglu"
expect 0 "layer 0:.*weights read" -- --weights "$ck/qwen3-hf" --layers all --inputs model --cases 6 \
  --impl scalar --no-default-fixtures --out "$tmp/model"
grep -q 'inputs=model' "$tmp/model/conform.json" || fail "--inputs model: no case id says inputs=model"
grep -q 'layer=1' "$tmp/model/conform.json" || fail "--layers all: layer 1 has no case"

# A mutant on a GGUF layer: caught, named, and its replay line fails the same way.
expect 1 "diagnosis: rope_layout_swapped: matches" -- --weights "$ck/llama.gguf" --layer 0 \
  --impl rope_layout_swapped --op rope --cases 10 --no-default-fixtures --out "$tmp/mut"
replay=$(grep -m1 -oE "replay: +build/conform .*" "$tmp/out" | sed -E 's/^replay: +build\/conform //')
[ -n "$replay" ] || fail "no replay line"
case "$replay" in *"layer=0"*"--weights $ck/llama.gguf"*) ;; *) fail "replay line lacks the layer or the weights: $replay" ;; esac
eval "\"$CONFORM\" $replay --out \"$tmp/replay\"" >"$tmp/out" 2>&1
[ $? -eq 1 ] || { cat "$tmp/out"; fail "the replay did not fail"; }
grep -q "rope_layout_swapped: matches" "$tmp/out" || { cat "$tmp/out"; fail "the replay does not name the bug"; }

# A convention flag given with --weights is in the replay line (the window here), which fails the same way.
expect 1 "diagnosis: window_off_by_one: matches" -- --weights "$ck/gemma-hf" --layer 1 --impl window_off_by_one \
  --op attention --sliding-window 3 --cases 10 --no-default-fixtures --out "$tmp/win"
grep -qE "replay: .* --sliding-window 3" "$tmp/out" || { cat "$tmp/out"; fail "the replay line lacks --sliding-window"; }

# Gemma 2/3's layers each take their own config: Gemma 3's sliding layers (0-4) a window of 3 and
# RoPE base 10000, its full layer (5) no window and theta 1e6 — in every case id.
expect 0 "layer 5:.*weights read" -- --weights "$ck/gemma3-hf" --layers all --op block,attention --cases 3 \
  --impl scalar,simd --no-default-fixtures --out "$tmp/g3"
grep -qE '"block\(T=[0-9]+,[^"]*theta=10000,[^"]*window=3,[^"]*sandwich=1,[^"]*layer=0' "$tmp/g3/conform.json" ||
  fail "gemma3 layer 0: its case ids do not carry the sliding layer's window and base"
grep -qE '"block\(T=[0-9]+,[^"]*theta=1000000,[^"]*layer=5' "$tmp/g3/conform.json" || fail "gemma3 layer 5: not theta 1e6"
grep -E '"block\(T=[0-9]+,[^"]*layer=5' "$tmp/g3/conform.json" | grep -q 'window=' && fail "gemma3 layer 5: a full layer has a window"
# SmolLM3's NoPE layer (3 of 4): its cases say nope=1, and a kernel that rotates it anyway is named.
expect 1 "diagnosis: nope_ignored: matches" -- --weights "$ck/smollm3.gguf" --layer 3 --impl nope_ignored --op block \
  --cases 4 --no-default-fixtures --out "$tmp/nope"
grep -qE '"block\(T=[0-9]+,[^"]*nope=1,[^"]*layer=3' "$tmp/nope/conform.json" || fail "smollm3 layer 3: its case ids lack nope=1"
# A kernel without Gemma 2's sandwich norms fails on its real layer, named.
expect 1 "diagnosis: sandwich_norm_missing: matches" -- --weights "$ck/gemma2.gguf" --layer 1 --impl sandwich_norm_missing \
  --op block --cases 4 --no-default-fixtures --out "$tmp/sandwich"

# Qwen2's biases are used: a kernel that drops them fails on the real layer, and is named.
expect 1 "diagnosis: qkv_bias_missing: matches" -- --weights "$ck/qwen2-hf" --layer 1 \
  --impl qkv_bias_missing --op block --cases 4 --no-default-fixtures --out "$tmp/bias"
expect 2 "has q, k, v biases" -- --weights "$ck/qwen2.gguf" --qkv-bias 0 --impl scalar --op block --cases 1 \
  --no-default-fixtures --out "$tmp/bias0"

# ---- conform forward: HF and GGUF of one model agree --------------------------
expect 0 "logits: $tmp/hf.h5" -- forward --weights "$ck/llama-hf" --token-count 5 --impl scalar --save-logits "$tmp/hf.h5"
expect 0 "logits: $tmp/gguf.h5" -- forward --weights "$ck/llama.gguf" --token-count 5 --impl scalar --save-logits "$tmp/gguf.h5"
expect 2 "exists" -- forward --weights "$ck/llama-hf" --token-count 5 --impl scalar --save-logits "$tmp/hf.h5"
expect 0 "logits: $tmp/q2hf.h5" -- forward --weights "$ck/qwen2-hf" --token-count 5 --impl scalar,simd --save-logits "$tmp/q2hf.h5"
expect 0 "logits: $tmp/q2gguf.h5" -- forward --weights "$ck/qwen2.gguf" --token-count 5 --impl scalar --save-logits "$tmp/q2gguf.h5"
find_python "numpy, h5py"  # $PY (lib.sh)
if [ -n "$PY" ]; then
  "$PY" - "$tmp/hf.h5" "$tmp/gguf.h5" <<'PY' || fail "HF vs GGUF logits"
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
assert a.attrs["conform_schema"] == b"conform-logits/1", a.attrs["conform_schema"]
assert (a["token_ids"][()] == b["token_ids"][()]).all()
ra, rb = a["reference"][()], b["reference"][()]
d = np.abs(ra - rb).max() / np.abs(ra).max()
assert d < 1e-12, d                                  # float64 both ways: the same function
e = np.abs(a["impls/scalar"][()] - ra).max() / np.abs(ra).max()
assert 0 < e < 1e-5, e                               # float32 scalar: close, not identical
print("HF vs GGUF reference logits: rel %.1e; scalar vs reference: rel %.1e" % (d, e))
PY
  "$PY" - "$tmp/q2hf.h5" "$tmp/q2gguf.h5" <<'PY' || fail "qwen2 HF vs GGUF logits"
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
ra, rb = a["reference"][()], b["reference"][()]
d = np.abs(ra - rb).max() / np.abs(ra).max()
assert d < 1e-12, d                                  # the biases read alike from both formats
for impl in ("scalar", "simd"):
    e = np.abs(a["impls/" + impl][()] - ra).max() / np.abs(ra).max()
    assert 0 < e < 1e-5, (impl, e)
print("qwen2 HF vs GGUF reference logits: rel %.1e" % d)
PY
else
  echo "HF vs GGUF logits: not compared (no python3 with numpy and h5py)"
fi

# --expect-logits: the GGUF against the HF file's logits matches; read as NeoX
# (the converter's permutation left in place) it does not, and the diagnosis
# re-runs the model one convention away and names the layout.
ids=5,9,17,3,44
expect 0 "logits: $tmp/hf-ids.h5" -- forward --weights "$ck/llama-hf" --tokens $ids --impl scalar --save-logits "$tmp/hf-ids.h5"
expect 0 "the reference's logits match it" -- forward --weights "$ck/llama.gguf" --tokens $ids --impl scalar \
  --expect-logits "$tmp/hf-ids.h5"
expect 1 "diagnosis: rope_layout_swapped: the file's logits are this model" -- forward --weights "$ck/llama.gguf" \
  --layout neox --tokens $ids --impl scalar --expect-logits "$tmp/hf-ids.h5"
expect 2 "token_ids: expected the 4 tokens" -- forward --weights "$ck/llama.gguf" --tokens 5,9,17,3 \
  --expect-logits "$tmp/hf-ids.h5"
expect 2 "$tmp/hf.h5: no such file|hf-none.h5: no such file" -- forward --weights "$ck/llama.gguf" --tokens $ids \
  --expect-logits "$tmp/hf-none.h5"

# conform generate --weights: a layer's real weights in a fixture, judged like any other.
expect 0 "generate: wrote" -- generate --weights "$ck/qwen3.gguf" --layer 1 --op block --tokens 6 --out "$tmp/gw.h5"
expect 0 "generate: wrote" -- generate --weights "$ck/llama-hf" --layer 1 --inputs model --op attention --tokens 3 \
  --keys 8 --out "$tmp/gwm.h5"
expect 0 "^block +scalar" -- --fixtures "$tmp/gw.h5,$tmp/gwm.h5" --cases 0 --no-default-fixtures --impl scalar,simd \
  --out "$tmp/gr"
expect 1 "block +rope_layout_swapped .*FAIL" -- --fixtures "$tmp/gw.h5" --cases 0 --no-default-fixtures \
  --impl rope_layout_swapped --out "$tmp/gr"
expect 2 "only with --weights" -- generate --op rope --preset llama3-8b --inputs model --out "$tmp/x.h5"

# --full-size without weights: the preset's own widths; --verbose: where the time went.
expect 0 "^phase +seconds" -- --preset qwen3-0.6b --full-size --op swiglu --cases 3 --impl scalar \
  --no-default-fixtures --verbose --out "$tmp/fs"
grep -qE '"swiglu\(T=[0-9]+,D=1024,F=3072' "$tmp/fs/conform.json" || fail "--full-size: the cases are not at D=1024, F=3072"
grep -qE '"phase": *"implementation scalar"' "$tmp/fs/conform.json" || fail "the report has no phases"

# ---- bad input: exit 2, naming the file / tensor / flag ------------------------
# gpt-oss without rope_scaling: GptOssConfig's default (YaRN, factor 32, truncate: false) is taken and
# said; llama.cpp's stream of the GGUF (no scaling) is then named, layer by layer, rope_scaling_ignored.
mkdir -p "$tmp/gpt-oss"
cp "$ck/gptoss-hf/model.safetensors" "$tmp/gpt-oss/"
tr -d '\n' < "$ck/gptoss-hf/config.json" | sed -E 's/"rope_scaling": *\{[^}]*\},?//' > "$tmp/gpt-oss/config.json"
grep -q rope_scaling "$tmp/gpt-oss/config.json" && fail "could not remove rope_scaling from gptoss-hf's config.json"
expect 1 "layer 3: diagnosis: rope_scaling_ignored \(.*the config says yarn scaling with factor 32\)" \
  -- forward --weights "$tmp/gpt-oss" --expect-hidden "${SRC:?}/tests/weights/llamacpp-gptoss.h5" --hidden-tol 1e-6
expect 2 "$tmp/nope" -- --weights "$tmp/nope" --cases 1
head -c 100 "$ck/llama-hf/model.safetensors" > "$tmp/trunc.safetensors"
expect 2 "trunc.safetensors" -- --weights "$tmp/trunc.safetensors" --cases 1
head -c 5000 "$ck/llama.gguf" > "$tmp/trunc.gguf"
expect 2 "trunc.gguf" -- --weights "$tmp/trunc.gguf" --cases 1
# A K-quant scale of +inf: the file's last 2 bytes are output.weight's last Q6_K block's float16 d.
cp "$ck/llama-k-q4_k_m.gguf" "$tmp/inf-scale.gguf"
printf '\x00\x7c' | dd of="$tmp/inf-scale.gguf" bs=1 seek=$(( $(stat -c %s "$tmp/inf-scale.gguf") - 2 )) conv=notrunc 2>/dev/null
expect 2 "inf-scale.gguf: output.weight: element \[63, 0\] is inf \(Q6_K, block 0 of row 63, at byte 13230 of the tensor\)" -- \
  forward --weights "$tmp/inf-scale.gguf" --token-count 5 --impl scalar
expect 2 "--layers" -- --weights "$ck/llama-hf" --layer 7 --cases 1
expect 2 "only with --weights" -- --inputs model --cases 1
expect 2 "past the vocabulary" -- --weights "$ck/llama-hf" --inputs model --tokens 1,2,99999 --cases 1
expect 2 "weights" -- --case 'rope(T=1,n=1,hd=16,layout=neox,theta=10000,pos=1,mag=1,outliers=0,seed=0,layer=0)'
expect 2 "was it drawn from another --weights" -- --weights "$ck/qwen3.gguf" --impl scalar --case \
  'block(T=1,D=64,H=4,KV=2,hd=16,F=96,layout=neox,theta=10000,qk_norm=0,eps=1.0000000000000001e-05,pos=1,mag=1,outliers=0,seed=0,layer=1)'
expect 2 "fix the sizes" -- --weights "$ck/llama-hf" --d-model 128 --cases 1
expect 2 "token ids only with --weights" -- forward --preset llama3-8b --tokens 1,2
echo "weights cli: ok"
