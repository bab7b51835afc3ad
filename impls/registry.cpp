// impls/registry.cpp — every implementation, listed by hand.
#include "registry.h"

#include "mutants/mutants.h"
#include "scalar/scalar.h"
#include "simd/simd.h"
#ifdef CONFORM_HAVE_CUDA
#include "cuda/cuda.h"
#endif

namespace conform {
namespace {

Availability always() { return {}; }

#ifndef CONFORM_HAVE_CUDA
// Listed all the same, so that `--impl cuda` says why it cannot run (exit 3).
Availability built_without_cuda() {
    return {false, "built without CUDA (nvcc not found at configure time, or CONFORM_CUDA=OFF)"};
}
std::unique_ptr<Implementation> no_cuda(const ImplOptions&) { throw ImplError(built_without_cuda().reason); }
#endif

}  // namespace

const std::vector<ImplEntry>& implementations() {
    static const std::vector<ImplEntry> table = {
        {"scalar", "plain float32 loops, llama2.c style", false, always, scalar::make_scalar},
        {"simd", "Highway SIMD, f32 or bf16 storage, fused, multithreaded", false, always, simd::make_simd, {},
         simd::simd_details, simd::make_bench_op},
        // scalar as a llama.cpp CPU kernel feeds its weight products, declared; only when named.
        {"scalar-q8_0", "scalar with Q8_0 activations before every weight product (declared)", false, always,
         [](const ImplOptions& o) { return scalar::make_scalar_act_quant(o, ActQuant::q8_0); }, {}, {}, {}, {}, true},
        {"scalar-q8_k", "scalar with Q8_K activations before every weight product (declared)", false, always,
         [](const ImplOptions& o) { return scalar::make_scalar_act_quant(o, ActQuant::q8_k); }, {}, {}, {}, {}, true},
#ifdef CONFORM_HAVE_CUDA
        {"cuda", "CUDA (sm_90): flash attention, fused QK-norm + RoPE + KV cache, cuBLAS; f32, bf16, f16", false,
         cuda::availability, cuda::make_cuda, {}, cuda::cuda_details, cuda::make_bench_op, {}, false, true},
#else
        {"cuda", "CUDA (sm_90): not in this build", false, built_without_cuda, no_cuda},
#endif
    };
    return table;
}

const std::vector<ImplEntry>& mutant_implementations() {
    using namespace mutants;
    // The ops each bug reaches: those whose result depends on the convention it breaks (conform/op_info.h).
    const std::vector<Op> rope_ops = ops_using(kRope);
    const std::vector<Op> block_ops = ops_using(kResidual);
    const std::vector<Op> attention_ops = ops_using(kCausal);
    const std::vector<Op> norm_ops = ops_using(kRmsNorm);
    const std::vector<Op> swiglu_ops = ops_using(kSwiglu);
    const std::vector<Op> decode_ops = ops_using(kKvCache);
    const std::vector<Op> fp8_ops = ops_using(kFp8Cache);
    static const std::vector<ImplEntry> table = [&] {
    std::vector<ImplEntry> t = {
        {"rope_layout_swapped", "RoPE pairs NeoX and interleaved swapped", true, always, rope_layout_swapped, rope_ops},
        {"rope_theta_default", "rope_theta ignored: always 10000", true, always, rope_theta_default, rope_ops},
        {"rope_angle_low_precision", "RoPE angles pos * inv_freq rounded to bf16", true, always,
         rope_angle_low_precision, rope_ops},
        {"dynamic_ntk_inside_context", "dynamic NTK base always at original_max_position * factor", true, always,
         dynamic_ntk_inside_context, rope_ops},
        {"rope_position_off_by_one", "decode steps rotated at pos + 1", true, always, rope_position_off_by_one,
         decode_ops},
        {"v_rotated", "v rotated like k", true, always, v_rotated, block_ops},
        {"rope_applied_twice", "q and k rotated twice", true, always, rope_applied_twice, block_ops},
        {"qk_norm_after_rope", "QK-norm after RoPE instead of before", true, always, qk_norm_after_rope, block_ops},
        {"qk_norm_always_on", "QK-norm applied whatever the config says", true, always, qk_norm_always_on,
         block_ops},
        {"gqa_head_mapping_tiled", "query head h reads kv head h % n_kv", true, always, gqa_head_mapping_tiled,
         attention_ops},
        {"gqa_tiled_above_group_4", "h / group up to 4 query heads per kv head, h % n_kv above", true, always,
         gqa_tiled_above_group_4, attention_ops, {}, {}, "gqa_head_mapping_tiled"},
        {"causal_mask_missing", "no causal mask", true, always, causal_mask_missing, attention_ops},
        {"causal_mask_off_by_one", "causal mask k_pos < q_pos: the diagonal masked", true, always,
         causal_mask_off_by_one, attention_ops},
        {"attention_scale_wrong", "scores scaled by 1/sqrt(n_heads * head_dim)", true, always,
         attention_scale_wrong, attention_ops},
        {"attn_scale_times_default", "attn_scale and 1/sqrt(head_dim) both multiplied in", true, always,
         attn_scale_times_default, attention_ops, {}, {}, "attention_scale_wrong"},
        {"softmax_no_max_subtraction", "softmax without the row max: overflows", true, always,
         softmax_no_max_subtraction, attention_ops},
        {"masked_row_nan", "a query that sees no key gets NaN, not zeros", true, always, masked_row_nan,
         {Op::attention}},
        {"rmsnorm_eps_outside_sqrt", "RMSNorm x / (sqrt(mean(x^2)) + eps)", true, always, rmsnorm_eps_outside_sqrt,
         norm_ops},
        {"rmsnorm_mean_not_squared", "RMSNorm with mean(|x|) for mean(x^2)", true, always,
         rmsnorm_mean_not_squared, norm_ops},
        {"rmsnorm_tail_skipped", "RMSNorm's sum of squares without the last n % 8 elements", true, always,
         rmsnorm_tail_skipped, norm_ops},
        {"swiglu_gate_on_up", "SiLU on the up branch instead of the gate", true, always, swiglu_gate_on_up,
         swiglu_ops},
        {"residual_missing", "attention residual dropped: h = attn @ wo", true, always, residual_missing, block_ops},
        // The served variants (issue 29).
        {"qkv_bias_after_rope", "q and k biases added after RoPE", true, always, qkv_bias_after_rope, block_ops},
        {"softcap_after_mask", "soft-cap after the -inf mask: masked keys read at logit -cap", true, always,
         softcap_after_mask, ops_using(kSoftcap)},
        {"sink_wrong_head", "sinks read per kv head (sinks[h / group])", true, always, sink_wrong_head,
         ops_using(kSinks)},
        {"sink_scaled", "the sink logit multiplied by the score scale", true, always, sink_scaled, ops_using(kSinks)},
        // A window's mask per path (issue 53): bounded from a chunk's first query, by whole pages, or not at all
        // with more than one query.
        {"window_from_first_query", "the window's edge from the first query of a call, for every query", true,
         always, window_from_first_query, {Op::attention, Op::paged_attention}},
        {"window_per_page", "the window applied by whole pages: no key masked inside the first page read", true,
         always, window_per_page, {Op::paged_attention}},
        {"window_ignored_in_prefill", "the window applied to one-query (decode) sequences only", true, always,
         window_ignored_in_prefill, {Op::paged_attention}},
        {"window_ignored_in_decode", "the window applied to sequences of more than one new query only", true, always,
         window_ignored_in_decode, {Op::paged_attention}},
        // A mixture of experts (issue 51).
        {"selection_bias_in_weights", "the routing weights from scores + e_bias, not the unbiased scores", true,
         always, selection_bias_in_weights, ops_using(kMoeRoute)},
        {"expert_bias_after_weight", "gpt-oss's down bias added after the routing weight", true, always,
         expert_bias_after_weight, ops_using(kMoeExperts)},
        {"group_mask_fill_zero", "grouped top-k: the groups not kept filled with 0.0, not -inf", true, always,
         group_mask_fill_zero, ops_using(kMoeRoute)},
        {"router_in_bf16", "the router's logits and scores held in bf16 (a float32 claim)", true, always,
         router_in_bf16, ops_using(kMoeRoute)},
        {"topk_softmax_over_all", "softmax scoring: the k weights left as the softmax over all E", true, always,
         topk_softmax_over_all, ops_using(kMoeRoute)},
        {"swiglu_clamp_dropped", "gpt-oss's SwiGLU without its clamps", true, always, swiglu_clamp_dropped,
         ops_using(kMoeExperts)},
        {"shared_expert_doubled", "the shared expert's output added twice", true, always, shared_expert_doubled,
         ops_using(kMoeExperts)},
        {"gelu_erf_for_tanh", "exact (erf) GELU where GeGLU's tanh approximation is meant", true, always,
         gelu_erf_for_tanh, ops_using(kGeglu)},
        {"decode_cache_unrotated_k", "decode steps cache their key before RoPE", true, always,
         decode_cache_unrotated_k, decode_ops},
        // Precision (issue 14): float32 kernels that keep something of RoPE in less.
        {"rope_cos_sin_bf16", "float32 RoPE with its cos/sin table in bf16", true, always, rope_cos_sin_bf16, rope_ops},
        {"rope_inv_freq_bf16", "float32 RoPE with inv_freq in bf16", true, always, rope_inv_freq_bf16, rope_ops},
        {"rope_positions_f16", "positions cast to f16 before the angle", true, always, rope_positions_f16, rope_ops},
        {"matmul_accumulates_bf16", "a float32 claim whose GEMMs run in bf16", true, always, matmul_accumulates_bf16,
         swiglu_ops, {}, {}, "precision_downgrade"},
        {"act_quant_undeclared", "Q8_0 activations before every weight product, declared as none", true, always,
         act_quant_undeclared, swiglu_ops, {}, {}, "precision_downgrade"},
        // The generators' reach (issue 15): tiles, long heads, rings, positions that are not rows.
        {"rope_position_from_row_index", "positions taken as positions[0] + row", true, always,
         rope_position_from_row_index, rope_ops},
        {"causal_mask_by_index", "causal mask from row indices, not positions", true, always, causal_mask_by_index,
         {Op::attention}},
        {"head_dim_truncated", "q.k over the first 64 dims of a head only", true, always, head_dim_truncated,
         attention_ops},
        {"softmax_tile_not_rescaled", "online softmax over 64-key tiles without the rescale", true, always,
         softmax_tile_not_rescaled, attention_ops},
        {"kv_cache_wraps_early", "a 16-slot KV ring: a decode step sees the last 16 keys", true, always,
         kv_cache_wraps_early, {Op::attention, Op::decode}},
        // Serving: a batch over a paged KV cache (issue reports of flashinfer, vllm, flash-attention, llama.cpp).
        {"paged_block_table_ignored", "a sequence's pages read as consecutive from its first", true, always,
         paged_block_table_ignored, {Op::paged_attention}},
        {"paged_last_page_len_ignored", "every last page read whole", true, always, paged_last_page_len_ignored,
         {Op::paged_attention}},
        {"paged_sequences_packed", "the batch as one packed sequence: earlier sequences' keys seen", true, always,
         paged_sequences_packed, {Op::paged_attention}},
        {"paged_queries_at_start", "new queries at the start of their sequence (top-left causal)", true, always,
         paged_queries_at_start, {Op::paged_attention}},
        {"paged_lse_base2", "lse in base 2", true, always, paged_lse_base2, {Op::paged_attention}},
        {"paged_partial_page_dropped", "kv_len / page_size pages (floor): a last partial page dropped", true, always,
         paged_partial_page_dropped, {Op::paged_attention}},
        {"paged_empty_unwritten", "rows that see no key (empty sequences) left unwritten", true, always,
         paged_empty_unwritten, {Op::paged_attention}},
        // An FP8 KV cache (sglang, vLLM, FlashInfer issue reports).
        {"kv_fp8_scale_ignored", "FP8 cache scales taken as 1.0", true, always, kv_fp8_scale_ignored, fp8_ops},
        {"kv_fp8_k_scale_for_v", "V written and read with K's scale", true, always, kv_fp8_k_scale_for_v, fp8_ops},
        {"kv_fp8_per_head_read_per_tensor", "per-kv-head scales read as one (scale[0])", true, always,
         kv_fp8_per_head_read_per_tensor, fp8_ops},
        {"kv_fp8_truncated", "FP8 cache written with truncation, not round to nearest even", true, always,
         kv_fp8_truncated, fp8_ops},
        {"kv_fp8_unsaturated", "FP8 cache written without saturation (NaN / inf past the max)", true, always,
         kv_fp8_unsaturated, fp8_ops},
        {"kv_fp8_read_divides", "FP8 cache read as code / scale", true, always, kv_fp8_read_divides, fp8_ops},
        {"kv_fp8_dequant_twice", "FP8 cache read as code * scale * scale", true, always, kv_fp8_dequant_twice,
         fp8_ops},
        {"kv_fp8_reciprocal_scale", "FP8 cache written as fp8(k * fl(1 / scale)), not fp8(k / scale)", true, always,
         kv_fp8_reciprocal_scale, fp8_ops},
        {"paged_kv_len_off_by_one", "one key too many where the last page is partial: the slot after it read", true,
         always, paged_kv_len_off_by_one, {Op::paged_attention}},
        {"sink_per_split", "the sink added once per page: every split starts from it", true, always,
         sink_per_split, {Op::paged_attention}},
        {"sink_missing_from_lse", "lse over the keys alone, the sink left out (the output has it)", true, always,
         sink_missing_from_lse, {Op::paged_attention}},
        {"split_kv_merge_nan", "split-KV merge from (-inf, 0): NaN where the first page has no key in the window",
         true, always, split_kv_merge_nan, {Op::paged_attention}},
        {"split_kv_merge_unrescaled", "split-KV merge (a split per page) without rescaling each split to the row's max",
         true, always, split_kv_merge_unrescaled, {Op::paged_attention}},
        {"paged_lse_max_dropped", "lse = log sum exp(s - max): the row's max not added back", true, always,
         paged_lse_max_dropped, {Op::paged_attention}},
        // Latent attention (issue 52): MLA kernels' reported bugs.
        {"mla_scale_absorbed_dim", "scores scaled by 1/sqrt(kv_lora_rank + qk_rope), the absorbed width", true, always,
         mla_scale_absorbed_dim, {Op::mla_attention}},
        {"mla_w_uk_transposed", "kv_b_proj's w_uk read per head as if stored [dn, dc]", true, always,
         mla_w_uk_transposed, {Op::mla_attention}},
        {"mla_w_uv_missing", "w_uv never applied: each head's first dv latents as its output", true, always,
         mla_w_uv_missing, {Op::mla_attention}},
        {"mla_pages_consecutive", "a sequence's latent pages read as consecutive from its first", true, always,
         mla_pages_consecutive, {Op::mla_attention}, {}, {}, "paged_block_table_ignored"},
        {"mla_split_merge_unrescaled", "split-KV latent attention (a split per page) merged without the rescale", true,
         always, mla_split_merge_unrescaled, {Op::mla_attention}, {}, {}, "split_kv_merge_unrescaled"},
        // The chapter's design choices taken the other way.
        {"layer_norm_not_rms", "LayerNorm (mean subtracted) for RMSNorm", true, always, layer_norm_not_rms, norm_ops},
        {"gelu_gate", "GELU on a SwiGLU gate instead of SiLU", true, always, gelu_gate, swiglu_ops},
    };
    // The twists' bugs as config edits, from their rows (mutants/twist.cpp).
    for (const TwistMutant& m : twist_mutants())
        t.push_back({m.name, m.description, true, always,
                     [m](const ImplOptions& o) { return make_twist_mutant(m, o); }, m.ops, {}, {}, m.named_by});
    return t;
    }();
    return table;
}

#ifdef CONFORM_HAVE_CUDA
// The CUDA mutants: the CUDA kernels with one bug each, for checking on a GPU
// that the harness catches a bug in them too (scripts/device-check.sh runs
// them by name and requires exit 1). Kept out of mutant_implementations():
// `conform mutants` creates every mutant there, which needs a device, and
// requires the diagnosis to name the mutant's own id, while it names the bug
// ("rope_layout_swapped") whatever implementation carries it.
static const std::vector<ImplEntry>& cuda_mutant_implementations() {
    static const std::vector<ImplEntry> table = {
        {"cuda_rope_layout_swapped", "cuda: RoPE pairs NeoX and interleaved swapped", true, cuda::availability,
         cuda::make_cuda_rope_layout_swapped, ops_using(kRope)},
        {"cuda_gqa_head_mapping_tiled", "cuda: query head h reads kv head h % n_kv (attention kernel)", true,
         cuda::availability, cuda::make_cuda_gqa_tiled, ops_using(kHeads)},
        {"cuda_router_in_bf16", "cuda: the MoE router's logits and scores rounded to bf16 (moe_route kernel)", true,
         cuda::availability, cuda::make_cuda_router_in_bf16, ops_using(kMoeRoute)},
    };
    return table;
}
#endif

const ImplEntry* find_implementation(const std::string& name) {
#ifdef CONFORM_HAVE_CUDA
    for (const ImplEntry& e : cuda_mutant_implementations())
        if (e.name == name) return &e;
#endif
    for (const auto* table : {&implementations(), &mutant_implementations()})
        for (const ImplEntry& e : *table)
            if (e.name == name) return &e;
    return nullptr;
}

}  // namespace conform
