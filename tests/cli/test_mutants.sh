#!/usr/bin/env bash
# `conform mutants` exits 0 only when every mutant is killed and named; its
# report says so mutant by mutant. A mutant run through the ordinary gate
# prints a failure report that names it and replays.
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail

start=$(date +%s)
"$CONFORM" mutants --out "$tmp" >"$tmp/log" 2>&1
rc=$?
tail -n 30 "$tmp/log"
echo "conform mutants: $(( $(date +%s) - start )) s"
[ $rc -eq 0 ] || fail "conform mutants exited $rc"
grep -q "^power: \([0-9]*\)/\1 killed and diagnosed (100%); \1 killed, 0 misnamed, 0 unnamed" "$tmp/log" ||
  fail "no 100% power line with 0 misnamed"
python3 - "$tmp/mutants.json" <<'PY' || fail "mutants.json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "conform-mutants/1", r["schema"]
required = {"rope_layout_swapped", "rope_theta_default", "rope_angle_low_precision", "rope_position_off_by_one",
            "v_rotated", "rope_applied_twice", "qk_norm_missing", "qk_norm_after_rope", "qk_norm_always_on",
            "gqa_head_mapping_tiled", "causal_mask_missing", "causal_mask_off_by_one", "attention_scale_wrong",
            "softmax_no_max_subtraction", "rmsnorm_eps_outside_sqrt", "rmsnorm_mean_not_squared",
            "swiglu_gate_on_up", "residual_missing", "decode_cache_unrotated_k",
            # precision (issue 14) and the generators' reach (issue 15)
            "rope_cos_sin_bf16", "rope_inv_freq_bf16", "rope_positions_f16", "matmul_accumulates_bf16",
            "rope_position_from_row_index", "causal_mask_by_index", "head_dim_truncated",
            "softmax_tile_not_rescaled", "kv_cache_wraps_early", "layer_norm_not_rms", "gelu_gate",
            # groups above 4 with more than one kv head (issue 26)
            "gqa_tiled_above_group_4",
            # serving: a batch over a paged KV cache (issue 28)
            "paged_block_table_ignored", "paged_last_page_len_ignored", "paged_sequences_packed",
            "paged_queries_at_start", "paged_lse_base2", "paged_empty_unwritten", "paged_partial_page_dropped",
            # the served variants (issue 29)
            "qkv_bias_missing", "qkv_bias_after_rope", "window_off_by_one", "window_one_too_wide", "window_ignored",
            "softcap_missing", "softcap_after_mask", "sink_missing", "sink_wrong_head", "norm_plus_one_missing",
            "norm_plus_one_spurious", "geglu_as_swiglu", "gelu_erf_for_tanh", "attn_scale_ignored", "sandwich_norm_missing", "nope_ignored", "chunk_ignored", "chunk_as_window",
            # quantised activations (issue 30)
            "act_quant_undeclared",
            # names earned on the served ops (issue 53): a window per path, a NaN merge, logic inside bf16's bound
            "window_from_first_query", "window_per_page", "window_ignored_in_prefill", "split_kv_merge_nan",
            "sink_scaled", "rmsnorm_tail_skipped", "kv_fp8_reciprocal_scale", "paged_kv_len_off_by_one",
            "sink_per_split", "kv_fp8_read_divides", "attn_scale_times_default",
            "sink_missing_from_lse",
            # served-op mechanisms: a window per path, a split merge unrescaled, an lse without its max
            "window_ignored_in_decode", "split_kv_merge_unrescaled", "paged_lse_max_dropped",
            # latent attention (issue 52)
            "mla_scale_absorbed_dim", "mla_w_uk_transposed", "mla_w_uv_missing", "mla_pages_consecutive", "mla_split_merge_unrescaled"}
# Named by its effect, not its own name.
named_by = {"matmul_accumulates_bf16": "precision_downgrade", "gqa_tiled_above_group_4": "gqa_head_mapping_tiled",
            "window_one_too_wide": "window_off_by_one", "act_quant_undeclared": "precision_downgrade",
            "attn_scale_times_default": "attention_scale_wrong",
            "mla_pages_consecutive": "paged_block_table_ignored",
            "mla_split_merge_unrescaled": "split_kv_merge_unrescaled"}
ids = {m["id"] for m in r["mutants"]}
assert required <= ids, required - ids
assert r["power"]["fraction"] == 1.0, r["power"]
assert r["power"]["misnamed"] == 0 and r["power"]["unnamed"] == 0, r["power"]
for m in r["mutants"]:
    assert m["killed"] and m["diagnosed"] and not m["misnamed"], m["id"]
    for k in m["kills"]:
        f = k["failure"]
        bug = named_by.get(m["id"], m["id"])
        assert bug in k["named"], (m["id"], k["op"], k["named"])
        assert any(h["id"] == bug for h in f["diagnosis"]["matches"]), m["id"]
        assert f["replay"].startswith("build/conform --impl " + m["id"] + " --case "), f["replay"]
        assert (f.get("first_failing") or f.get("error")) and f["inputs"], m["id"]  # a broken output contract has no tensor
PY

# Through the gate, replayable: the failure report names the bug.
"$CONFORM" --impl rope_layout_swapped --op rope --cases 20 --out "$tmp" >"$tmp/gate" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/gate"; fail "gate on a mutant exited $rc, expected 1"; }
grep -q "diagnosis: rope_layout_swapped: matches rope_layout=" "$tmp/gate" || { cat "$tmp/gate"; fail "gate report does not name the mutant"; }
replay=$(grep -m1 "replay:" "$tmp/gate" | sed 's/.*replay: *build\/conform //')
eval "\"$CONFORM\" $replay --out \"$tmp\"" >"$tmp/replay" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/replay"; fail "replay exited $rc, expected 1"; }
grep -q "diagnosis: rope_layout_swapped" "$tmp/replay" || { cat "$tmp/replay"; fail "replay does not name the mutant"; }
# A float32 RoPE with a bf16 cos/sin table is caught, and named, by cases
# whose positions are all past 16384 (contiguous ones from a start that far).
far='^rope\((?!.*positions=).*pos=(1[6-9][0-9]{3}|[2-9][0-9]{4}|[0-9]{6,}),'
"$CONFORM" --impl rope_cos_sin_bf16 --op rope --params "$far" --cases 10 --no-default-fixtures --out "$tmp" >"$tmp/far" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/far"; fail "rope_cos_sin_bf16 at positions >= 16384 exited $rc, expected 1"; }
grep -q "10 of 10 cases match" "$tmp/far" || { cat "$tmp/far"; fail "--params did not select 10 far cases"; }
grep -q "diagnosis: rope_cos_sin_bf16: matches" "$tmp/far" || { cat "$tmp/far"; fail "the far failure does not name rope_cos_sin_bf16"; }
python3 - "$tmp/conform.json" <<'PY' || fail "far cases: report"
import json, re, sys
r = json.load(open(sys.argv[1]))
for c in r["cases"]:
    p = int(re.search(r"[,(]pos=(\d+)", c.get("shrunk_from", c["case_id"])).group(1))
    assert p >= 16384, c["case_id"]
PY
# The block and decode reach real models' score range (qk_gain): a softmax
# without its max overflows there too, and the diagnosis names it. Before the
# gain, all 200 block and decode cases of this run passed this mutant.
"$CONFORM" --impl softmax_no_max_subtraction --op block,decode --no-default-fixtures --out "$tmp/scores" >"$tmp/scores.log" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/scores.log"; fail "softmax_no_max_subtraction on block,decode exited $rc, expected 1"; }
for op in block decode; do
  grep -qE "^$op +softmax_no_max_subtraction .* FAIL" "$tmp/scores.log" || { cat "$tmp/scores.log"; fail "$op did not fail softmax_no_max_subtraction"; }
done
[ "$(grep -c "diagnosis: softmax_no_max_subtraction: matches" "$tmp/scores.log")" -ge 2 ] ||
  { cat "$tmp/scores.log"; fail "block and decode failures not both named softmax_no_max_subtraction"; }
# Mutants are never part of the default gate.
"$CONFORM" list --impls | grep -q rope_layout_swapped && fail "a mutant is listed as a gate implementation"
echo "mutants: ok"
