// impls/mutants — the scalar implementation with exactly one bug each.
//
// Each mutant derives from scalar::ScalarImpl and overrides the one stage its
// bug lives in (impls/scalar/scalar.h: the op entry points, and the block's
// norm_qk / rotate_qk / cache_write / attention_residual / decode_position /
// rope_for_call).
// They exist to measure the harness: `conform mutants` must kill every one of
// them and name its id in the diagnosis. They are never in the default gate;
// registry.cpp lists them, with the ops each bug reaches.
//
// One file per family: rope.cpp, attention.cpp, norm.cpp, block.cpp, paged.cpp, moe.cpp, mla.cpp;
// and twist.cpp, the twists' bugs as config edits, from their rows.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "scalar/scalar.h"

namespace conform::mutants {

// rope.cpp
std::unique_ptr<Implementation> rope_layout_swapped(const ImplOptions& o);
std::unique_ptr<Implementation> rope_theta_default(const ImplOptions& o);
std::unique_ptr<Implementation> rope_angle_low_precision(const ImplOptions& o);
std::unique_ptr<Implementation> rope_applied_twice(const ImplOptions& o);
std::unique_ptr<Implementation> v_rotated(const ImplOptions& o);
std::unique_ptr<Implementation> dynamic_ntk_inside_context(const ImplOptions& o);
std::unique_ptr<Implementation> rope_cos_sin_bf16(const ImplOptions& o);
std::unique_ptr<Implementation> rope_inv_freq_bf16(const ImplOptions& o);
std::unique_ptr<Implementation> rope_positions_f16(const ImplOptions& o);
std::unique_ptr<Implementation> rope_position_from_row_index(const ImplOptions& o);

// attention.cpp
std::unique_ptr<Implementation> gqa_head_mapping_tiled(const ImplOptions& o);
std::unique_ptr<Implementation> gqa_tiled_above_group_4(const ImplOptions& o);
std::unique_ptr<Implementation> causal_mask_missing(const ImplOptions& o);
std::unique_ptr<Implementation> causal_mask_off_by_one(const ImplOptions& o);
std::unique_ptr<Implementation> attention_scale_wrong(const ImplOptions& o);
std::unique_ptr<Implementation> softmax_no_max_subtraction(const ImplOptions& o);
std::unique_ptr<Implementation> attn_scale_times_default(const ImplOptions& o);
std::unique_ptr<Implementation> masked_row_nan(const ImplOptions& o);
std::unique_ptr<Implementation> causal_mask_by_index(const ImplOptions& o);
std::unique_ptr<Implementation> head_dim_truncated(const ImplOptions& o);
std::unique_ptr<Implementation> softmax_tile_not_rescaled(const ImplOptions& o);
std::unique_ptr<Implementation> kv_cache_wraps_early(const ImplOptions& o);
std::unique_ptr<Implementation> sink_wrong_head(const ImplOptions& o);
std::unique_ptr<Implementation> softcap_after_mask(const ImplOptions& o);
std::unique_ptr<Implementation> window_from_first_query(const ImplOptions& o);
std::unique_ptr<Implementation> window_per_page(const ImplOptions& o);
std::unique_ptr<Implementation> window_ignored_in_prefill(const ImplOptions& o);
std::unique_ptr<Implementation> window_ignored_in_decode(const ImplOptions& o);
std::unique_ptr<Implementation> sink_scaled(const ImplOptions& o);

// norm.cpp
std::unique_ptr<Implementation> qk_norm_after_rope(const ImplOptions& o);
std::unique_ptr<Implementation> qk_norm_always_on(const ImplOptions& o);
std::unique_ptr<Implementation> rmsnorm_eps_outside_sqrt(const ImplOptions& o);
std::unique_ptr<Implementation> rmsnorm_mean_not_squared(const ImplOptions& o);
std::unique_ptr<Implementation> layer_norm_not_rms(const ImplOptions& o);
std::unique_ptr<Implementation> rmsnorm_tail_skipped(const ImplOptions& o);

// moe.cpp
std::unique_ptr<Implementation> selection_bias_in_weights(const ImplOptions& o);
std::unique_ptr<Implementation> expert_bias_after_weight(const ImplOptions& o);
std::unique_ptr<Implementation> group_mask_fill_zero(const ImplOptions& o);
std::unique_ptr<Implementation> router_in_bf16(const ImplOptions& o);
std::unique_ptr<Implementation> topk_softmax_over_all(const ImplOptions& o);
std::unique_ptr<Implementation> swiglu_clamp_dropped(const ImplOptions& o);
std::unique_ptr<Implementation> shared_expert_doubled(const ImplOptions& o);

// mla.cpp
std::unique_ptr<Implementation> mla_scale_absorbed_dim(const ImplOptions& o);
std::unique_ptr<Implementation> mla_w_uk_transposed(const ImplOptions& o);
std::unique_ptr<Implementation> mla_w_uv_missing(const ImplOptions& o);
std::unique_ptr<Implementation> mla_pages_consecutive(const ImplOptions& o);
std::unique_ptr<Implementation> mla_split_merge_unrescaled(const ImplOptions& o);

// block.cpp
std::unique_ptr<Implementation> rope_position_off_by_one(const ImplOptions& o);
std::unique_ptr<Implementation> decode_cache_unrotated_k(const ImplOptions& o);
std::unique_ptr<Implementation> swiglu_gate_on_up(const ImplOptions& o);
std::unique_ptr<Implementation> residual_missing(const ImplOptions& o);
std::unique_ptr<Implementation> matmul_accumulates_bf16(const ImplOptions& o);
std::unique_ptr<Implementation> act_quant_undeclared(const ImplOptions& o);
std::unique_ptr<Implementation> gelu_gate(const ImplOptions& o);
std::unique_ptr<Implementation> gelu_erf_for_tanh(const ImplOptions& o);
std::unique_ptr<Implementation> qkv_bias_after_rope(const ImplOptions& o);

// paged.cpp
std::unique_ptr<Implementation> paged_block_table_ignored(const ImplOptions& o);
std::unique_ptr<Implementation> paged_last_page_len_ignored(const ImplOptions& o);
std::unique_ptr<Implementation> paged_sequences_packed(const ImplOptions& o);
std::unique_ptr<Implementation> paged_queries_at_start(const ImplOptions& o);
std::unique_ptr<Implementation> paged_partial_page_dropped(const ImplOptions& o);
std::unique_ptr<Implementation> paged_lse_base2(const ImplOptions& o);
std::unique_ptr<Implementation> paged_empty_unwritten(const ImplOptions& o);
std::unique_ptr<Implementation> kv_fp8_scale_ignored(const ImplOptions& o);
std::unique_ptr<Implementation> kv_fp8_k_scale_for_v(const ImplOptions& o);
std::unique_ptr<Implementation> kv_fp8_per_head_read_per_tensor(const ImplOptions& o);
std::unique_ptr<Implementation> kv_fp8_truncated(const ImplOptions& o);
std::unique_ptr<Implementation> kv_fp8_unsaturated(const ImplOptions& o);
std::unique_ptr<Implementation> kv_fp8_dequant_twice(const ImplOptions& o);
std::unique_ptr<Implementation> kv_fp8_read_divides(const ImplOptions& o);
std::unique_ptr<Implementation> kv_fp8_reciprocal_scale(const ImplOptions& o);
std::unique_ptr<Implementation> split_kv_merge_nan(const ImplOptions& o);
std::unique_ptr<Implementation> split_kv_merge_unrescaled(const ImplOptions& o);
std::unique_ptr<Implementation> paged_lse_max_dropped(const ImplOptions& o);
std::unique_ptr<Implementation> paged_kv_len_off_by_one(const ImplOptions& o);
std::unique_ptr<Implementation> sink_per_split(const ImplOptions& o);
std::unique_ptr<Implementation> sink_missing_from_lse(const ImplOptions& o);

// twist.cpp: one mutant per twist bug its row marks (the twist ignored, or
// read as a bug computes it), named by the bug (named_by where one bug has
// two mutants: window_one_too_wide is window_off_by_one's W + 1).
struct TwistMutant {
    std::string name, description;
    std::vector<Op> ops;  // the ops that read the twist
    std::function<std::optional<BlockConfig>(const BlockConfig&)> edit;  // nullopt: the case as it is
    std::string named_by = {};
};
std::vector<TwistMutant> twist_mutants();
std::unique_ptr<Implementation> make_twist_mutant(const TwistMutant& m, const ImplOptions& o);

namespace detail {

// Like make_scalar: float32 only, named by its id.
template <typename Mutant>
std::unique_ptr<Implementation> make(const char* id, const ImplOptions& o) {
    if (o.dtype != DType::f32)
        throw ImplError(std::string(id) + " runs float32 only, asked for " + to_string(o.dtype));
    return std::make_unique<Mutant>(id);
}

}  // namespace detail
}  // namespace conform::mutants
