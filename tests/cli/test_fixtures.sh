#!/usr/bin/env bash
# Fixtures through the command, end to end:
#   * a file written by scripts/h5py_example.py (h5py + numpy only) passes;
#   * expected values computed with the other RoPE layout fail for `reference`
#     and for `scalar`, with a replay line that reproduces just that case;
#   * `conform generate`: presets, every op, --force, its files pass;
#   * every bad input gets exit code 2 and a message naming file, case, field;
#   * --save-failures writes shrunk failures that replay;
#   * ONNX Runtime's attention fixture passes, and each served-variant mutant fails it, named;
#   * the repo's fixtures/ runs by default.
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect, find_python

# Debian's python3-h5py lives in /usr/bin/python3, which a pyenv or venv
# python3 earlier on PATH may shadow: find_python tries both.
find_python "h5py, numpy"  # $PY (lib.sh)
[ -n "$PY" ] || fail "no python3 with h5py and numpy (scripts/setup.sh installs python3-h5py python3-numpy)"

# expect CODE -- ARGS... (lib.sh): conform ARGS --out $tmp/report exits CODE; output in $tmp/out.
expect_tail=(--out "$tmp/report")
# expect_gen CODE -- ARGS...: the same for `conform generate` (whose --out is the file).
expect_gen() {
  local expect_tail=()
  expect "$1" -- generate "${@:3}"
}
has() { grep -qF -- "$1" "$tmp/out" || { cat "$tmp/out"; fail "no '$1' in the output"; }; }
lacks() { ! grep -qF -- "$1" "$tmp/out" || { cat "$tmp/out"; fail "unexpected '$1' in the output"; }; }
h5edit() {  # h5edit FILE PYTHON: runs PYTHON with f = the open file
  "$PY" - "$1" "$2" <<'PY' || fail "h5edit $1"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    exec(sys.argv[2])
PY
}

# ---- h5py's file passes, for every op -------------------------------------------------
"$PY" "$root/scripts/h5py_example.py" "$tmp/ex.h5" >/dev/null || fail "h5py_example.py"
expect 0 -- --impl scalar --fixtures "$tmp/ex.h5" --cases 0
has "fixtures: 8 cases of the selected ops from 1 file in $tmp/ex.h5"
for op in rmsnorm rope qk_norm attention swiglu block decode; do
  grep -qE "^$op +reference +[0-9]+ +[0-9]+" "$tmp/out" || { cat "$tmp/out"; fail "no reference row for $op"; }
  grep -qE "^$op +scalar +[0-9]+ +[0-9]+" "$tmp/out" || { cat "$tmp/out"; fail "no scalar row for $op"; }
done
"$PY" - "$tmp/report/conform.json" "$tmp/ex.h5" <<'PY' || fail "report of the h5py fixture"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["pass"] is True
assert r["fixtures"] == [sys.argv[2]], r["fixtures"]
assert {c["impl"] for c in r["cases"]} == {"scalar", "reference"}
assert all(c["origin"] == "fixture" and c["file"] == sys.argv[2] for c in r["cases"])
assert len(r["cases"]) == 16
PY
# The writer refuses to overwrite, as conform's does.
"$PY" "$root/scripts/h5py_example.py" "$tmp/ex.h5" >/dev/null 2>&1 && fail "h5py_example.py overwrote without --force"

# ---- expected values under the other RoPE layout: reference and scalar both fail -------
cp "$tmp/ex.h5" "$tmp/swapped.h5"
h5edit "$tmp/swapped.h5" 'f["rope_neox/config"].attrs["rope_layout"] = "interleaved"; f["block_qwen3_like/config"].attrs["rope_layout"] = "interleaved"'
expect 1 -- --impl scalar --fixtures "$tmp/swapped.h5" --cases 0
has "FAIL reference rope [f32]  swapped.h5:/rope_neox"
has "FAIL scalar rope [f32]  swapped.h5:/rope_neox"
has "FAIL reference block [f32]  swapped.h5:/block_qwen3_like"
has "FAIL scalar block [f32]  swapped.h5:/block_qwen3_like"
has "fixture:   $tmp/swapped.h5:/rope_neox"
lacks "swapped.h5:/rope_interleaved"   # its expected values were not touched
grep -qE "^  first failing tensor: q_rot" "$tmp/out" || { cat "$tmp/out"; fail "block: the first failing tap is not q_rot"; }
replay=$(grep -m1 "replay:.*--fixture-case 'rope_neox'" "$tmp/out" | sed 's/^ *replay: *//')
[ -n "$replay" ] || fail "no replay line for rope_neox"
replay=${replay/build\/conform/$CONFORM}
eval "$replay --out '$tmp/report'" >"$tmp/out" 2>&1
[ $? -eq 1 ] || { cat "$tmp/out"; fail "the replay did not fail: $replay"; }
has "fixtures: 1 case of the selected ops"
has "FAIL scalar rope [f32]  swapped.h5:/rope_neox"

# The same through `conform generate`: a block generated interleaved, relabelled NeoX.
expect_gen 0 -- --op block --preset llama3-8b --scale-down 128 --n-heads 4 --n-kv-heads 2 \
  --rope-layout interleaved --tokens 3 --positions 8190 --out "$tmp/gen-block.h5"
h5edit "$tmp/gen-block.h5" 'f["case_0/config"].attrs["rope_layout"] = "neox"'
expect 1 -- --impl scalar --fixtures "$tmp/gen-block.h5" --cases 0
has "FAIL reference block"
has "FAIL scalar block"

# ---- conform generate -------------------------------------------------------------------
expect_gen 0 -- --presets
for p in llama2-7b llama3-8b qwen3-8b mistral-7b tinyllama-1.1b; do has "$p"; done
expect_gen 0 -- --op rope --preset qwen3-8b --n-heads 2 --tokens 3 --positions 8190 --cases 2 --out "$tmp/g/rope.h5"
has "wrote $tmp/g/rope.h5 (2 rope cases, H=2 hd=128 layout=neox theta=1e+06"
expect_gen 2 -- --op rope --preset qwen3-8b --out "$tmp/g/rope.h5"
has "exists (use --force to overwrite)"
expect_gen 0 -- --op rope --preset qwen3-8b --n-heads 2 --tokens 3 --positions 8190 --cases 2 --out "$tmp/g/rope.h5" --force
expect_gen 0 -- --op rmsnorm --preset llama2-7b --scale-down 16 --out "$tmp/g/rmsnorm.h5"
expect_gen 0 -- --op qk_norm --preset qwen3-0.6b --n-heads 3 --out "$tmp/g/qk_norm.h5"
expect_gen 0 -- --op attention --preset tinyllama-1.1b --n-heads 8 --tokens 3 --keys 6 --positions 100 --out "$tmp/g/attention.h5"
expect_gen 0 -- --op swiglu --d-model 16 --ffn-dim 40 --tokens 3 --out "$tmp/g/swiglu.h5"
expect_gen 0 -- --op block --preset qwen3-8b --scale-down 128 --n-heads 4 --n-kv-heads 1 --tokens 3 --out "$tmp/g/block.h5"
expect_gen 0 -- --op decode --preset mistral-7b --scale-down 128 --n-heads 2 --n-kv-heads 1 --tokens 4 --prefill 1 --out "$tmp/g/decode.h5"
expect 0 -- --impl scalar --fixtures "$tmp/g" --cases 0
has "fixtures: 8 cases of the selected ops from 7 files in $tmp/g"
"$PY" - "$tmp/g" <<'PY' || fail "generated files"
import sys, h5py
d = sys.argv[1]
with h5py.File(d + "/block.h5", "r") as f:
    assert f.attrs["conform_schema"] == b"conform-fixture/1"
    c = f["case_0"]
    assert c.attrs["op"] == b"block" and c.attrs["preset"] == b"qwen3-8b"
    assert set(c["expected"]) == {"attn_in", "q", "k", "v", "q_rot", "k_rot", "attn", "h", "ffn_in", "ffn_out", "out"}
    assert c["expected/out"].dtype == "float64" and c["inputs/wq"].dtype == "float32"
    assert c["inputs/q_norm"].shape == (128,) and c["inputs/wq"].shape == (32, 512)
    assert c["config"].attrs["n_kv_heads"] == 1 and c["config"].attrs["head_dim"] == 128
with h5py.File(d + "/decode.h5", "r") as f:
    assert f["case_0"].attrs["prefill"] == 1 and list(f["case_0/expected"]) == ["out"]
with h5py.File(d + "/rope.h5", "r") as f:
    print(f["case_1"].attrs["case_id"].decode())
PY
# The case_id attribute is a property-case id: the same inputs, without the file.
id=$("$PY" -c "import h5py,sys; print(h5py.File(sys.argv[1],'r')['case_0'].attrs['case_id'].decode())" "$tmp/g/rope.h5")
expect 0 -- --impl scalar --case "$id"
expect_gen 2 -- --op rope --out "$tmp/g/x.h5"
has "--op rope needs --n-heads"
expect_gen 2 -- --op rope --preset gpt-9 --out "$tmp/g/x.h5"
has "unknown preset 'gpt-9'"
expect_gen 2 -- --op attention --preset llama3-8b --n-kv-heads 3 --out "$tmp/g/x.h5"
has "config/n_heads: n_heads 32 is not divisible by n_kv_heads 3"
# Latent attention: DeepSeek-V3's widths and scale from its preset (heads cut
# to keep the file small), or from the width flags; each refusal exit 2 and no file.
expect_gen 0 -- --op mla_attention --preset deepseek-v3 --n-heads 2 --tokens 3 --keys 40 --cases 2 --out "$tmp/mla/v3.h5"
has "2 mla_attention cases, H=2 dc=512 dn=128 dr=64 dv=128"
expect_gen 0 -- --op mla_attention --n-heads 3 --kv-lora-rank 16 --qk-nope-head-dim 8 --qk-rope-head-dim 4 \
  --v-head-dim 5 --tokens 1 --keys 33 --out "$tmp/mla/small.h5"
expect 0 -- --impl scalar --fixtures "$tmp/mla" --cases 0 --no-default-fixtures
grep -qE "^mla_attention +scalar +3 +3 " "$tmp/out" || { cat "$tmp/out"; fail "scalar does not pass the generated MLA fixtures"; }
"$PY" - "$tmp/mla/v3.h5" <<'PY' || fail "the MLA fixture"
import sys, math, h5py
with h5py.File(sys.argv[1], "r") as f:
    c = f["case_0"]
    a = c["config"].attrs
    assert (a["kv_lora_rank"], a["qk_nope_head_dim"], a["qk_rope_head_dim"], a["v_head_dim"]) == (512, 128, 64, 128)
    m = 0.1 * math.log(40) + 1  # yarn_get_mscale(40, mscale_all_dim 1)
    assert abs(a["attn_scale"] - m * m / math.sqrt(192)) < 1e-15, a["attn_scale"]
    assert c["inputs/w_kv_b"].shape == (512, 2 * 256) and c["inputs/q"].shape == (3, 2 * 192)
    assert c["expected/out"].shape == (3, 2 * 128)
PY
cp "$tmp/mla/small.h5" "$tmp/mla-bad.h5"
h5edit "$tmp/mla-bad.h5" 'f["case_0/config"].attrs["kv_lora_rank"] = 17'
expect 2 -- --impl scalar --fixtures "$tmp/mla-bad.h5" --cases 0 --no-default-fixtures
has "mla-bad.h5:/case_0: inputs/ckv_cache"
expect_gen 2 -- --op mla_attention --preset llama3-8b --out "$tmp/g/x.h5"
has "runs multi-head latent attention, and llama3-8b has none"
expect_gen 2 -- --op mla_attention --n-heads 2 --kv-lora-rank 16 --out "$tmp/g/x.h5"
has "--op mla_attention needs --qk-nope-head-dim"
expect_gen 2 -- --op mla_attention --preset deepseek-v3 --kv-lora-rank 0 --out "$tmp/g/x.h5"
has "--kv-lora-rank: expected a positive integer, found 0"
expect_gen 2 -- --op mla_attention --preset deepseek-v3 --kv-lora-rank 60000 --keys 4000 --out "$tmp/g/x.h5"
has "case too large"
# Any op: sizes past what a case may hold are refused before a tensor is drawn.
expect_gen 2 -- --op swiglu --d-model 1048576 --ffn-dim 1048576 --out "$tmp/g/x.h5"
has "--op swiglu: case too large (D x F)"
expect_gen 2 -- --op paged_attention --preset deepseek-v3 --out "$tmp/g/x.h5"
has "--op mla_attention runs it"
[ ! -e "$tmp/g/x.h5" ] || fail "a refused generate left a file"

# ---- bad input: exit 2, the file, the case and the field named ---------------------------
# bad NAME 'PYTHON EDIT' 'EXPECTED MESSAGE': a copy of ex.h5, edited, must be refused.
bad() {
  local name=$1 edit=$2 msg=$3 f="$tmp/bad/$1.h5"
  mkdir -p "$tmp/bad"
  cp "$tmp/ex.h5" "$f"
  [ -z "$edit" ] || h5edit "$f" "$edit"
  expect 2 -- --impl scalar --fixtures "$f" --cases 0
  has "conform: $f$msg"
}
bad no_schema 'del f.attrs["conform_schema"]' ': conform_schema: missing root attribute (expected "conform-fixture/1"'
bad schema_2 'f.attrs["conform_schema"] = "conform-fixture/2"' ': conform_schema: schema "conform-fixture/2" is major version 2; this conform reads major version 1'
bad unknown_op 'f["rope_neox"].attrs["op"] = "flash_rope"' ":/rope_neox: op: unknown op 'flash_rope'"
bad no_op 'del f["swiglu"].attrs["op"]' ':/swiglu: op: missing attribute'
bad missing_dataset 'del f["rope_neox/inputs/positions"]' ':/rope_neox: inputs/positions: missing dataset (op rope needs it)'
bad missing_expected 'del f["qk_norm/expected/out"]' ':/qk_norm: expected/out: missing dataset'
bad missing_config 'del f["rope_neox/config"].attrs["rope_theta"]' ':/rope_neox: config/rope_theta: missing (op rope needs it)'
bad missing_prefill 'del f["decode_qwen3_like"].attrs["prefill"]' ':/decode_qwen3_like: prefill: missing attribute'
bad extra_dim 'x = f["rmsnorm/inputs/x"][...]; del f["rmsnorm/inputs/x"]; f["rmsnorm/inputs/x"] = x[None]' \
  ':/rmsnorm: inputs/x: expected a 2-D dataset [rows, cols], found 3-D [1,5,64]'
bad vector_2d 'w = f["rmsnorm/inputs/weight"][...]; del f["rmsnorm/inputs/weight"]; f["rmsnorm/inputs/weight"] = w[None]' \
  ':/rmsnorm: inputs/weight: expected a 1-D dataset [n], found 2-D [1,64]'
bad not_multiple_of_head_dim 'x = f["rope_neox/inputs/x"][...]; del f["rope_neox/inputs/x"]; f["rope_neox/inputs/x"] = x[:, :190]' \
  ':/rope_neox: inputs/x: columns 190 are not a multiple of head_dim 64'
bad heads_not_divisible 'f["attention_gqa/config"].attrs["n_kv_heads"] = 4' \
  ':/attention_gqa: config/n_heads: n_heads 6 is not divisible by n_kv_heads 4'
bad shape_vs_config 'f["block_qwen3_like/config"].attrs["ffn_dim"] = 40' \
  ':/block_qwen3_like: inputs/w1: expected shape [32,40], found [32,48]'
bad expected_shape 'o = f["swiglu/expected/out"][...]; del f["swiglu/expected/out"]; f["swiglu/expected/out"] = o[:, :23]' \
  ':/swiglu: expected/out: expected shape [4,24] (the op'"'"'s output for these inputs), found [4,23]'
bad input_float64 'x = f["rmsnorm/inputs/x"][...]; del f["rmsnorm/inputs/x"]; f["rmsnorm/inputs/x"] = x.astype(np.float64)' \
  ':/rmsnorm: inputs/x: wrong dtype: expected float32, found float64'
bad positions_float 'p = f["rope_neox/inputs/positions"][...]; del f["rope_neox/inputs/positions"]; f["rope_neox/inputs/positions"] = p.astype(np.float32)' \
  ':/rope_neox: inputs/positions: wrong dtype: expected int64, found float32'
bad expected_int 'o = f["qk_norm/expected/out"][...]; del f["qk_norm/expected/out"]; f["qk_norm/expected/out"] = o.astype(np.int32)' \
  ':/qk_norm: expected/out: wrong dtype: expected float64 (or float32), found int32'
bad config_float_for_int 'f["rope_neox/config"].attrs["head_dim"] = 64.0' \
  ':/rope_neox: config/head_dim: expected an integer (int64), found float64'
bad layout_unknown 'f["rope_neox/config"].attrs["rope_layout"] = "gptj"' \
  ':/rope_neox: config/rope_layout: expected "neox" or "interleaved", found "gptj"'
bad nan_input 'x = f["swiglu/inputs/w2"]; a = x[...]; a[3, 4] = np.nan; x[...] = a' \
  ':/swiglu: inputs/w2: non-finite value nan at flat index 76'
bad inf_expected 'x = f["attention_gqa/expected/out"]; a = x[...]; a[0, 1] = -np.inf; x[...] = a' \
  ':/attention_gqa: expected/out: non-finite value -inf at flat index 1'
bad negative_position 'p = f["rope_interleaved/inputs/positions"]; p[...] = np.arange(-5, -1)' \
  ':/rope_interleaved: inputs/positions: negative position -5 at index 0'
bad empty_tensor 'del f["rmsnorm/inputs/x"]; f["rmsnorm/inputs/x"] = np.zeros((0, 64), np.float32)' \
  ':/rmsnorm: inputs/x: empty tensor (shape [0,64])'
bad scalar_dataset 'del f["qk_norm/inputs/weight"]; f["qk_norm/inputs/weight"] = np.float32(1)' \
  ':/qk_norm: inputs/weight: expected a 1-D dataset [n], found a scalar'
bad decreasing_positions 'p = f["block_qwen3_like/inputs/positions"]; p[...] = np.array([9000, 9001, 9001, 9002, 9003])' \
  ":/block_qwen3_like: inputs/positions: a block's positions must be strictly increasing"
bad prefill_range 'f["decode_qwen3_like"].attrs["prefill"] = np.int64(9)' \
  ':/decode_qwen3_like: prefill: must be in [0, T=5], found 9'
# The served variants' optional fields: a value out of range, or on an op that has no use for it.
bad qkv_bias_two 'f["block_qwen3_like/config"].attrs["qkv_bias"] = np.int64(2)' \
  ':/block_qwen3_like: config/qkv_bias: expected 0 or 1, found 2'
bad qkv_bias_on_rope 'f["rope_neox/config"].attrs["qkv_bias"] = np.int64(1)' \
  ':/rope_neox: config/qkv_bias: op rope has no projections to bias'
bad qkv_bias_no_tensors 'f["block_qwen3_like/config"].attrs["qkv_bias"] = np.int64(1)' \
  ':/block_qwen3_like: inputs/bq: missing dataset'
bad window_negative 'f["attention_gqa/config"].attrs["sliding_window"] = np.int64(-3)' \
  ':/attention_gqa: config/sliding_window: expected a count of keys >= 0 (0: none), found -3'
bad window_on_rmsnorm 'f["rmsnorm/config"].attrs["sliding_window"] = np.int64(4)' \
  ':/rmsnorm: config/sliding_window: op rmsnorm has no attention to window'
bad softcap_negative 'f["attention_gqa/config"].attrs["attn_logit_softcapping"] = np.float64(-1.0)' \
  ':/attention_gqa: config/attn_logit_softcapping: expected a cap >= 0 (0: none), found -1.000000'
bad softcap_nan 'f["attention_gqa/config"].attrs["attn_logit_softcapping"] = np.float64("nan")' \
  ':/attention_gqa: config/attn_logit_softcapping: expected a cap >= 0 (0: none), found nan'
bad softcap_on_rmsnorm 'f["rmsnorm/config"].attrs["attn_logit_softcapping"] = np.float64(30.0)' \
  ':/rmsnorm: config/attn_logit_softcapping: op rmsnorm has no attention scores to cap'
bad sinks_two 'f["attention_gqa/config"].attrs["attn_sinks"] = np.int64(2)' \
  ':/attention_gqa: config/attn_sinks: expected 0 or 1, found 2'
bad sinks_on_rope 'f["rope_neox/config"].attrs["attn_sinks"] = np.int64(1)' \
  ':/rope_neox: config/attn_sinks: op rope has no softmax to sink'
bad sinks_no_tensor 'f["attention_gqa/config"].attrs["attn_sinks"] = np.int64(1)' \
  ':/attention_gqa: inputs/sinks: missing dataset'
bad sinks_wrong_shape 'f["attention_gqa/config"].attrs["attn_sinks"] = np.int64(1); f["attention_gqa/inputs/sinks"] = np.zeros(4, np.float32)' \
  ':/attention_gqa: inputs/sinks: expected shape [1,6], found [1,4]'
bad plus_one_two 'f["rope_neox/config"].attrs["norm_plus_one"] = np.int64(2)' \
  ':/rope_neox: config/norm_plus_one: expected 0 or 1, found 2'
bad plus_one_on_rope 'f["rope_neox/config"].attrs["norm_plus_one"] = np.int64(1)' \
  ':/rope_neox: config/norm_plus_one: op rope has no RMSNorm to offset'
bad sandwich_two 'f["attention_gqa/config"].attrs["sandwich_norm"] = np.int64(2)' \
  ':/attention_gqa: config/sandwich_norm: expected 0 or 1, found 2'
bad sandwich_on_attention 'f["attention_gqa/config"].attrs["sandwich_norm"] = np.int64(1)' \
  ':/attention_gqa: config/sandwich_norm: op attention has no sublayer outputs to norm'
bad chunk_neg 'f["attention_gqa/config"].attrs["attention_chunk_size"] = np.int64(-4)' \
  ':/attention_gqa: config/attention_chunk_size: expected a chunk of positions >= 0 (0: none), found -4'
bad chunk_on_rope 'f["rope_neox/config"].attrs["attention_chunk_size"] = np.int64(4)' \
  ':/rope_neox: config/attention_chunk_size: op rope has no attention to chunk'
bad nope_two 'f["attention_gqa/config"].attrs["nope"] = np.int64(2)' \
  ':/attention_gqa: config/nope: expected 0 or 1, found 2'
bad nope_on_rope 'f["rope_neox/config"].attrs["nope"] = np.int64(1)' \
  ':/rope_neox: config/nope: op rope has no layer to leave RoPE out of'
bad attn_scale_neg 'f["attention_gqa/config"].attrs["attn_scale"] = np.float64(-0.5)' \
  ':/attention_gqa: config/attn_scale: expected a scale >= 0 (0: 1/sqrt(head_dim)), found -0.500000'
bad attn_scale_on_rope 'f["rope_neox/config"].attrs["attn_scale"] = np.float64(0.25)' \
  ':/rope_neox: config/attn_scale: op rope has no attention scores to scale'
bad act_unknown 'f["rope_neox/config"].attrs["hidden_act"] = "gelu"' \
  ':/rope_neox: config/hidden_act: expected "silu" or "gelu_tanh", found "gelu"'
bad act_on_rope 'f["rope_neox/config"].attrs["hidden_act"] = "gelu_tanh"' \
  ':/rope_neox: config/hidden_act: op rope has no FFN gate'
bad sinks_nan 'f["attention_gqa/config"].attrs["attn_sinks"] = np.int64(1); f["attention_gqa/inputs/sinks"] = np.array([0, 1, np.nan, 0, 0, 0], np.float32)' \
  ':/attention_gqa: inputs/sinks: non-finite value nan at flat index 2'
bad kv_dtype_on_rope 'f["rope_neox/config"].attrs["kv_cache_dtype"] = "fp8_e4m3"' \
  ':/rope_neox: config/kv_cache_dtype: op rope has no KV cache to store in FP8'
bad no_cases 'for k in list(f): del f[k]' ': no cases (a case is a top-level group)'

# Not HDF5, and truncated: the file named, and what is wrong with it.
mkdir -p "$tmp/bad"
echo "just text" >"$tmp/bad/text.h5"
expect 2 -- --impl scalar --fixtures "$tmp/bad/text.h5" --cases 0
has "conform: $tmp/bad/text.h5: not an HDF5 file"
head -c 5000 "$tmp/ex.h5" >"$tmp/bad/truncated.h5"
expect 2 -- --impl scalar --fixtures "$tmp/bad/truncated.h5" --cases 0
has "conform: $tmp/bad/truncated.h5: "
grep -qiE "truncat|eof|corrupt" "$tmp/out" || { cat "$tmp/out"; fail "truncated: no word on what is wrong"; }
: >"$tmp/bad/empty.h5"
expect 2 -- --impl scalar --fixtures "$tmp/bad/empty.h5" --cases 0
has "conform: $tmp/bad/empty.h5: not an HDF5 file"

# A directory is read recursively; one bad file in it stops the run before anything runs.
mkdir -p "$tmp/dir/sub"
cp "$tmp/ex.h5" "$tmp/dir/a.h5"
cp "$tmp/bad/nan_input.h5" "$tmp/dir/sub/b.h5"
expect 2 -- --impl scalar --fixtures "$tmp/dir" --cases 0
has "conform: $tmp/dir/sub/b.h5:/swiglu: inputs/w2: non-finite"
mkdir -p "$tmp/nothing"
expect 2 -- --fixtures "$tmp/nothing" --cases 0
has "no fixture files"
expect 2 -- --fixtures "$tmp/absent.h5" --cases 0
has "$tmp/absent.h5: no such file"
expect 2 -- --impl scalar --fixtures "$tmp/ex.h5" --fixture-case no_such_case --cases 0
has "--fixture-case: no case 'no_such_case'"
# Unknown attributes, datasets and groups inside a case are ignored; a minor version is read.
cp "$tmp/ex.h5" "$tmp/future.h5"
h5edit "$tmp/future.h5" 'f.attrs["conform_schema"] = "conform-fixture/1.4"; f["rope_neox"].attrs["rope_scaling"] = "yarn"; f["rope_neox/inputs/extra"] = np.zeros((2, 2, 2)); f.create_group("rope_neox/notes"); f["top_level_dataset"] = np.arange(3)'
expect 0 -- --impl scalar --fixtures "$tmp/future.h5" --cases 0

# ---- --save-failures: shrunk failures that replay ------------------------------------------
mutant=rope_layout_swapped
"$CONFORM" list | grep -q "  $mutant " || fail "no mutant '$mutant' to produce failures (see \`conform list\`)"
expect 1 -- --impl $mutant --op rope --cases 20 --no-default-fixtures --save-failures "$tmp/failures"
has "--save-failures $tmp/failures:"
has "saved:     $tmp/failures/rope_T="
n=$(ls "$tmp/failures"/*.h5 | wc -l)
[ "$n" -ge 1 ] || fail "no failure saved"
grep -q "shrunk:" "$tmp/out" || { cat "$tmp/out"; fail "failures were not shrunk"; }
for f in "$tmp/failures"/*.h5; do
  case "$f" in *".$mutant.h5") ;; *) fail "saved file not named <case id>.<impl>.h5: $f" ;; esac
  "$PY" - "$f" "$mutant" <<'PY' || fail "attributes of $f"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    assert list(f) == ["failure"], list(f)
    a = f["failure"].attrs
    assert a["impl"].decode() == sys.argv[2] and a["seed"] == 20261129 and a["dtype"] == b"f32", dict(a)
    assert a["case_id"].decode().startswith("rope(") and a["op"] == b"rope"
    assert sys.argv[1].endswith(a["case_id"].decode().replace("(", "_").replace(",", "_").rstrip(")") + "." + sys.argv[2] + ".h5")
PY
  # Replayed: the mutant fails it again, our reference and scalar pass it.
  expect 1 -- --impl $mutant --fixtures "$f" --fixture-case failure --cases 0
  has "FAIL $mutant rope"
  lacks "FAIL reference"
  expect 0 -- --impl scalar --fixtures "$f" --cases 0
done
# The printed replay command is the one that works.
expect 1 -- --impl $mutant --op rope --cases 20 --no-default-fixtures --save-failures "$tmp/failures"
has "not saved: $tmp/failures/rope_T="
has "exists (use --force to overwrite)"
expect 1 -- --impl $mutant --op rope --cases 20 --no-default-fixtures --save-failures "$tmp/failures" --force
has "saved:     $tmp/failures/"
replay=$(grep -m1 "^  replay:  build/conform --impl $mutant --fixtures" "$tmp/out" | sed 's/^ *replay: *//')
[ -n "$replay" ] || { cat "$tmp/out"; fail "no replay line for a saved failure"; }
replay=${replay/build\/conform/$CONFORM}
eval "$replay --out '$tmp/report'" >"$tmp/out" 2>&1
[ $? -eq 1 ] || { cat "$tmp/out"; fail "saved-failure replay did not fail: $replay"; }
has "FAIL $mutant rope"

# ---- the repo's regression set runs by default ------------------------------------------------
expect 0 -- --impl scalar --cases 0
has "(the regression set; --no-default-fixtures skips it)"
for op in rmsnorm rope qk_norm attention swiglu block decode; do
  grep -qE "^$op +reference " "$tmp/out" || { cat "$tmp/out"; fail "the regression set has no $op case"; }
done
# ONNX Runtime's attention with sinks, windows and soft-caps (scripts/ort-attention-fixture.js): the
# reference, scalar and simd pass it, and an engine with each variant wrong fails it and is named.
ort=$root/fixtures/attention-ort-sinks-windows.h5
expect 0 -- --impl scalar,simd --fixtures "$ort" --cases 0 --no-default-fixtures
has "fixtures: 8 cases of the selected ops from 1 file in $ort"
grep -qE "^attention +reference +8 +8 " "$tmp/out" || { cat "$tmp/out"; fail "the reference does not pass ORT's attention"; }
for mutant in window_off_by_one window_one_too_wide window_ignored softcap_missing softcap_after_mask sink_missing \
              sink_wrong_head; do
  expect 1 -- --impl "$mutant" --fixtures "$ort" --cases 0 --no-default-fixtures
  named=$mutant
  [ "$mutant" = window_one_too_wide ] && named=window_off_by_one  # one key either way is the same name
  has "diagnosis: $named: matches"
done
# ONNX Runtime's MoE with gpt-oss's conventions (scripts/ort-moe-fixture.js): the reference, scalar and
# simd pass it, and an expert kernel with each convention wrong fails it and is named.
ortmoe=$root/fixtures/moe-ort-gpt-oss.h5
expect 0 -- --impl scalar,simd --fixtures "$ortmoe" --cases 0 --no-default-fixtures
grep -qE "^moe +reference +4 +4 " "$tmp/out" || { cat "$tmp/out"; fail "the reference does not pass ORT's MoE"; }
for mutant in gate_up_interleave_swapped swiglu_clamp_dropped swiglu_oai_as_silu expert_bias_missing \
              expert_bias_after_weight router_bias_missing; do
  expect 1 -- --impl "$mutant" --fixtures "$ortmoe" --cases 0 --no-default-fixtures
  has "diagnosis: $mutant: matches"
done
expect 1 -- --impl topk_softmax_over_all --fixtures "$ortmoe" --cases 0 --no-default-fixtures
has "one function under 2 names: renorm_missing or topk_softmax_over_all"
# OpenAI's gpt-oss RoPE (its reference model.py, run at the desk: fixtures/README.md): YaRN with
# truncate false. The reference, scalar and simd pass it; a RoPE that rounds the correction range fails
# and is named; and the same file read as truncate: true fails the reference, so the file tells them apart.
oai=$root/fixtures/rope-gpt-oss-openai-yarn.h5
expect 0 -- --impl scalar,simd --fixtures "$oai" --cases 0 --no-default-fixtures
grep -qE "^rope +reference +5 +5 " "$tmp/out" || { cat "$tmp/out"; fail "the reference does not pass OpenAI's gpt-oss RoPE"; }
expect 1 -- --impl yarn_truncated --fixtures "$oai" --cases 0 --no-default-fixtures
has "diagnosis: yarn_truncated: matches"
cp "$oai" "$tmp/oai-truncated.h5"
/usr/bin/python3 -c "
import h5py, sys
with h5py.File(sys.argv[1], 'r+') as f:
    for g in f.values(): g['config'].attrs['rope_truncate'] = 1
" "$tmp/oai-truncated.h5" || fail "could not edit the OpenAI RoPE fixture"
expect 1 -- --impl scalar --fixtures "$tmp/oai-truncated.h5" --cases 0 --no-default-fixtures
grep -qE "^rope +reference +5 +0 " "$tmp/out" || { cat "$tmp/out"; fail "the reference passes OpenAI's RoPE read as truncate: true"; }
# Nothing selected is a usage error, never a pass.
# A mixture of experts' fixture, damaged one field at a time (HF's, committed): exit 2, file, case and field named.
moe=$root/fixtures/moe-hf-deepseek-v3-gpt-oss.h5
moe_bad() {  # moe_bad PYTHON MESSAGE
  cp "$moe" "$tmp/moe-bad.h5"
  h5edit "$tmp/moe-bad.h5" "$1"
  expect 2 -- --impl scalar --fixtures "$tmp/moe-bad.h5" --cases 0
  has "$2"
}
moe_bad 'f["deepseek_v3_moe/config"].attrs["n_experts_per_tok"] = 17' \
  "moe-bad.h5:/deepseek_v3_moe: n_experts_per_tok: must be in [1, n_experts = 16], found 17"
moe_bad 'f["deepseek_v3_moe/config"].attrs["moe_n_group"] = 3' \
  "moe-bad.h5:/deepseek_v3_moe: moe_n_group: must divide n_experts = 16, found 3"
moe_bad 'del f["deepseek_v3_moe/config"].attrs["n_experts"]' \
  "moe-bad.h5:/deepseek_v3_moe: config/n_experts: missing"
moe_bad 'f["gpt_oss_experts/inputs/route"][0, 0] = np.nan' \
  "moe-bad.h5:/gpt_oss_experts: inputs/route: non-finite value nan"
moe_bad 'del f["gpt_oss_moe/inputs/b2"]' "moe-bad.h5:/gpt_oss_moe: inputs/b2: missing"
moe_bad 'f["gpt_oss_moe/config"].attrs["moe_swiglu_limit"] = -1.0' "moe-bad.h5:/gpt_oss_moe: config/moe_swiglu_limit"

expect 2 -- --impl scalar --cases 0 --no-default-fixtures
has "the selection has no case"
expect 0 -- --impl scalar --case 'rope(T=3,n=2,hd=8,layout=interleaved,theta=500000,pos=8190,mag=1,outliers=0,seed=4)'
lacks "fixtures:"
echo "cli fixtures: ok"
