#!/usr/bin/env bash
# Configurations end to end: anatomy's numbers, the gate driven by a
# config.json (Llama 3.1 with llama3 scaling, Qwen3 with QK-norm), bad
# configs refused with file and field, conform forward on a small preset.
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
: "${CONFIGS:?path to fixtures/configs}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect

# ---- anatomy: TinyLlama's shape with 8 kv heads (the issue's numbers) ------------
expect 0 "" -- anatomy --preset tinyllama-1.1b --kv-heads 8
cp "$tmp/out" "$tmp/anatomy"
cat "$tmp/anatomy"
grep -q "^layer  *45.1M | *90.2M" "$tmp/anatomy" || fail "anatomy: 45.1M parameters and 90.2M FLOP per layer"
grep -q "^model (22 layers) *992.0M" "$tmp/anatomy" || fail "anatomy: 992.0M per model"
grep -q "^per token  *| *2.0G" "$tmp/anatomy" || fail "anatomy: 2.0G FLOP per token at T = 1"
grep -q "2048 B per token per layer" "$tmp/anatomy" || fail "anatomy: 2048 B KV per token per layer"
grep -q "would take 8192 B" "$tmp/anatomy" || fail "anatomy: 8192 B with full multi-head"
"$CONFORM" anatomy --preset tinyllama-1.1b --kv-heads 8 --json >"$tmp/anatomy.json" || fail "anatomy --json"
python3 - "$tmp/anatomy.json" <<'PY' || fail "anatomy --json numbers"
import json, sys
a = json.load(open(sys.argv[1]))
assert a["schema"] == "conform-anatomy/1"
decode, prefill = a["phases"]
assert decode["tokens"] == 1 and prefill["tokens"] == 512
assert decode["layer"]["params"] == 45092864, decode["layer"]["params"]
assert round(decode["model"]["params"] / 1e6, 1) == 992.0
assert round(decode["layer"]["flops"] / 1e6, 1) == 90.2, decode["layer"]["flops"]
assert round(decode["flops_per_token"] / 1e9, 1) == 2.0
assert a["kv_cache"]["bytes_per_token_per_layer"] == 2048
assert a["kv_cache"]["bytes_per_token_per_layer_full_mha"] == 8192
ai = [s["intensity"] for s in a["intensity_by_tokens"]]
assert all(x < y for x, y in zip(ai, ai[1:])), ai            # grows with T
for s in a["intensity_by_tokens"]:                            # ~T FLOP per weight byte (fp16)
    assert abs(s["flops_per_weight_byte"] / s["tokens"] - 1) < 0.05 + 0.001 * s["tokens"], s
assert a["config"]["overrides"] == ["--kv-heads 8 (was 4)"], a["config"]["overrides"]
PY
expect 0 "LlamaForCausalLM" -- anatomy --config "$CONFIGS/llama3.1-8b.json"
expect 2 "unknown preset 'gpt-5'" -- anatomy --preset gpt-5
expect 2 "which model" -- anatomy

# ---- bad configs: exit 2, file and field ----------------------------------------
# Files that are not files (issue 54): a FIFO with no writer, a device that
# never ends, a directory — each refused before anything is read, at once;
# and the same for a checkpoint given as a FIFO and a shard report.
mkfifo "$tmp/fifo"
mkdir -p "$tmp/dir.json"
expect_cmd=(timeout 30 "$CONFORM")  # a hang is a failure here, not a ctest timeout
for f in "$tmp/fifo" /dev/zero "$tmp/dir.json"; do
  expect 2 ": not a regular file (a FIFO, a device or a directory), expected config.json" -- --config "$f" --impl scalar --op rope --cases 1
done
expect 2 "fifo: not a regular file" -- --weights "$tmp/fifo" --impl scalar --cases 1
expect 2 "fifo: not a regular file (a FIFO, a device or a directory), expected a shard's report" -- merge-reports "$tmp/fifo" /dev/zero
expect_cmd=()
printf '{"hidden_size": 4096, "rope_scaling": {"rope_type": "longrope", "factor": 2}}' >"$tmp/longrope.json"
expect 2 "longrope.json: rope_scaling.rope_type: 'longrope' is not supported" -- --config "$tmp/longrope.json" --impl scalar
expect 2 "--sliding-window: expected a count of keys >= 0 (0: none), found '-2'" -- --preset mistral-7b --sliding-window -2 --impl scalar
expect 2 "--attn-softcap: expected a cap >= 0 (0: none), found '-50'" -- --preset llama3-8b --attn-softcap -50 --impl scalar
expect 2 "--attn-softcap: expected a cap >= 0 (0: none), found 'nan'" -- --preset llama3-8b --attn-softcap nan --impl scalar
expect 2 "--attn-sinks: expected 0 or 1, found 'yes please'" -- --preset llama3-8b --attn-sinks 'yes please' --impl scalar
# A case id's served-variant fields: on an op without attention, or out of range.
expect 2 "field 'softcap' does not apply to op rmsnorm" -- --case 'rmsnorm(T=1,D=4,eps=1e-05,softcap=5,mag=1,outliers=0,seed=1)' --impl scalar
expect 2 "field 'softcap': expected a cap >= 0 (0: none), found '-5'" -- --case 'attention(T=1,S=2,H=1,KV=1,hd=4,qpos=1,kpos=0,softcap=-5,mag=1,outliers=0,seed=1)' --impl scalar
expect 2 "--norm-plus-one: expected 0 or 1, found 'gemma'" -- --preset llama3-8b --norm-plus-one gemma --impl scalar
expect 2 "--hidden-act: expected \"silu\" or \"gelu_tanh\", found 'gelu'" -- --preset llama3-8b --hidden-act gelu --impl scalar
expect 2 "--attn-scale: expected a scale >= 0" -- --preset llama3-8b --attn-scale -1 --impl scalar
expect 2 "field 'plus_one' does not apply to op swiglu" -- --case 'swiglu(T=1,D=4,F=4,plus_one=1,mag=1,outliers=0,seed=1)' --impl scalar
expect 2 "field 'plus_one': expected 0 or 1, found '3'" -- --case 'rmsnorm(T=1,D=4,eps=1.0000000000000001e-05,plus_one=3,mag=1,outliers=0,seed=1)' --impl scalar
expect 2 "field 'sinks' does not apply to op swiglu" -- --case 'swiglu(T=1,D=4,F=4,sinks=1,mag=1,outliers=0,seed=1)' --impl scalar
expect 2 "field 'act' does not apply to op rmsnorm" -- --case 'rmsnorm(T=1,D=4,eps=1e-05,act=gelu_tanh,mag=1,outliers=0,seed=1)' --impl scalar
expect 2 "field 'act': expected \"silu\" or \"gelu_tanh\", found 'gelu'" -- --case 'swiglu(T=1,D=4,F=4,act=gelu,mag=1,outliers=0,seed=1)' --impl scalar
expect 2 "field 'attn_scale' does not apply to op swiglu" -- --case 'swiglu(T=1,D=4,F=4,attn_scale=0.5,mag=1,outliers=0,seed=1)' --impl scalar
expect 2 "field 'attn_scale': expected a scale >= 0 (0: 1/sqrt(head_dim)), found '-1'" -- \
  --case 'attention(T=1,S=1,H=1,KV=1,hd=4,qpos=0,kpos=0,attn_scale=-1,mag=1,outliers=0,seed=1)' --impl scalar
# Sandwich norms, NoPE and attention chunks: a field on an op without the twist, a bad value, a bad flag.
expect 2 "field 'nope' does not apply to op rope" -- \
  --case 'rope(T=1,n=1,hd=4,layout=neox,theta=10000,pos=0,nope=1,mag=1,outliers=0,seed=1)' --impl scalar
expect 2 "field 'sandwich' does not apply to op attention" -- \
  --case 'attention(T=1,S=1,H=1,KV=1,hd=4,qpos=0,kpos=0,sandwich=1,mag=1,outliers=0,seed=1)' --impl scalar
expect 2 "field 'chunk': 0 is its off value, and an id carries it only when on" -- \
  --case 'attention(T=1,S=1,H=1,KV=1,hd=4,qpos=0,kpos=0,chunk=0,mag=1,outliers=0,seed=1)' --impl scalar
expect 2 "--attention-chunk-size: expected a chunk of positions >= 0 (0: none), found '-3'" -- --attention-chunk-size -3 --op attention --cases 1
expect 2 "--nope: expected 0 or 1, found '2'" -- --nope 2 --op block --cases 1
expect 2 "--sandwich-norm: expected 0 or 1, found 'yes'" -- --sandwich-norm yes --op block --cases 1
expect 2 "field 'sinks': expected 0 or 1, found '2'" -- --case 'attention(T=1,S=2,H=1,KV=1,hd=4,qpos=1,kpos=0,sinks=2,mag=1,outliers=0,seed=1)' --impl scalar
expect 2 "--qkv-bias: expected 0 or 1, found 'maybe'" -- --preset qwen2.5-0.5b --qkv-bias maybe --impl scalar
printf '{"hidden_size": 4096,' >"$tmp/broken.json"
expect 2 "broken.json: not valid JSON" -- anatomy --config "$tmp/broken.json"
printf '{"hidden_size": "big"}' >"$tmp/type.json"
expect 2 "type.json: hidden_size: expected an integer" -- forward --config "$tmp/type.json"
expect 2 "nope.json: cannot open" -- --config "$tmp/nope.json" --impl scalar
expect 2 "kv heads" -- anatomy --preset llama3-8b --kv-heads 5

# ---- the gate driven by config files ----------------------------------------------
for cfg in llama3.1-8b qwen3-8b; do
  "$CONFORM" --config "$CONFIGS/$cfg.json" --impl scalar --op rope --cases 20 --out "$tmp/$cfg" >"$tmp/out" 2>&1
  rc=$?
  cat "$tmp/out"
  [ $rc -eq 0 ] || fail "conform --config $cfg.json --op rope exited $rc"
  python3 - "$tmp/$cfg/conform.json" "$cfg" <<'PY' || fail "$cfg: report"
import json, sys
r, name = json.load(open(sys.argv[1])), sys.argv[2]
c = r["config"]
assert c["origin"].endswith(name + ".json"), c["origin"]
assert r["pass"] is True
ids = [x["case_id"] for x in r["cases"] if x["op"] == "rope"]
assert len(ids) == 20, len(ids)
if name == "llama3.1-8b":
    assert c["rope_scaling"]["type"] == "llama3" and c["rope_scaling"]["original_max_position"] == 8192
    assert all("hd=128" in i and "theta=500000" in i and "scaling=llama3" in i for i in ids), ids[:3]
else:
    assert c["qk_norm"] is True and c["rope_scaling"]["type"] == "none"
    assert all("hd=128" in i and "theta=1000000" in i and "scaling" not in i for i in ids), ids[:3]
assert "head_dim: absent" in " ".join(c["defaults_taken"]) or name == "qwen3-8b"
PY
done
# Qwen3's QK-norm reaches the block's property cases.
"$CONFORM" --config "$CONFIGS/qwen3-0.6b.json" --impl scalar --op block --cases 3 --out "$tmp/q" >"$tmp/out" 2>&1 \
  || { cat "$tmp/out"; fail "qwen3-0.6b block"; }
grep -q "qk_norm=1" "$tmp/q/conform.json" || fail "qwen3 block cases without qk_norm"

# gpt-oss's presets pin the ops that do not run its experts (its YaRN, truncate: false, is computed): every
# op runs those, and says which it leaves out; an op that needs them is refused when named.
expect 0 "gpt-oss-20b: the ops it pins are run, not these:" -- --preset gpt-oss-20b --impl scalar --cases 2 \
  --no-default-fixtures --out "$tmp/go"
grep -qE "^paged_attention +scalar +2 +2 " "$tmp/out" || { cat "$tmp/out"; fail "gpt-oss-20b: no paged_attention cases"; }
grep -qE "^rope +scalar +2 +2 " "$tmp/out" || { cat "$tmp/out"; fail "gpt-oss-20b: no rope cases"; }
! grep -qE "^(swiglu|block|decode) " "$tmp/out" || { cat "$tmp/out"; fail "gpt-oss-20b ran an op it does not pin"; }
grep -q 'window=128,sinks=1' "$tmp/go/conform.json" || fail "gpt-oss-20b cases without its window and sinks"
grep -q 'scaling=yarn,factor=32,.*truncate=0' "$tmp/go/conform.json" || fail "gpt-oss-20b rope cases without truncate: false"
# A RoPE that rounds gpt-oss's correction range fails its preset's cases, named.
expect 1 "diagnosis: yarn_truncated: matches config rope_scaling.truncate=1" -- --preset gpt-oss-120b --op rope \
  --impl yarn_truncated --cases 2 --no-default-fixtures
expect 2 "--op decode: op decode runs the FFN, and gpt-oss-20b's FFN is a mixture of 32 experts" -- \
  --preset gpt-oss-20b --op decode --impl scalar
expect 2 "gpt-oss-20b: op block runs the FFN" -- forward --preset gpt-oss-20b
expect 2 "--op block: op block runs the FFN" -- generate --preset gpt-oss-20b --op block --out "$tmp/go.h5"

# ---- conform forward ----------------------------------------------------------------
expect 0 "layer  1 + ffn" -- forward --preset qwen3-0.6b --layers 2 --tokens 4 --impl scalar --vocab 64
cat "$tmp/out"
grep -q "^logits" "$tmp/out" || fail "forward: no logits row"
grep -q "GQA (H=16, KV=8) equals multi-head attention" "$tmp/out" || fail "forward: GQA check"
grep -q "the FFN dominates" "$tmp/out" || fail "forward: parameter breakdown"
# A swapped RoPE layout drifts: its logits error is far above scalar's.
"$CONFORM" forward --preset qwen3-0.6b --layers 2 --tokens 4 --positions 100 --impl scalar,rope_layout_swapped --vocab 64 --json \
  >"$tmp/fwd.json" 2>/dev/null || fail "forward --json"
python3 - "$tmp/fwd.json" <<'PY' || fail "forward --json errors"
import json, sys
f = json.load(open(sys.argv[1]))
logits = [r for r in f["rows"] if r["stage"] == "logits"][0]["errors"]
assert logits["scalar"]["rel"] < 1e-4, logits
assert logits["rope_layout_swapped"]["rel"] > 100 * logits["scalar"]["rel"], logits
PY
# Stable through a real depth: Llama 3.1's 32 layers (widths / 16), its llama3 scaling past 8192.
expect 0 "residual stream std over 32 layers: .* (stable)" -- forward --config "$CONFIGS/llama3.1-8b.json" \
  --scale-down 16 --tokens 4 --positions 9000 --impl scalar
grep -q "^layer 31 + ffn" "$tmp/out" || { cat "$tmp/out"; fail "forward: 32 layers"; }
expect 2 "--tokens: expected a count in \[1, 16777216\], found 0" -- forward --preset qwen3-0.6b --tokens 0
echo "config cli: ok"
