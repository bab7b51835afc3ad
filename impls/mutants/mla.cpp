// Latent attention's bugs, from public reports on MLA kernels (the attn_scale
// twist's own are twist.cpp's): the scalar kernel under one broken MlaRules
// each, in both of its forms.
#include <cmath>

#include "mutants/mutants.h"

namespace conform::mutants {

namespace {

template <scalar::MlaRules (*R)()>
struct MlaWithRules : scalar::ScalarImpl {
    using ScalarImpl::ScalarImpl;
    scalar::MlaRules mla_rules() const override { return R(); }
};

// The absorbed form's width in the scale, 1/sqrt(kv_lora_rank + qk_rope):
// 1/sqrt(576) in V3, FlashMLA's and vLLM's tests' default, where the model's
// is 1/sqrt(192) * mscale^2 (the config's attn_scale ignored too).
scalar::MlaRules absorbed_dim_scale() {
    scalar::MlaRules r;
    r.scale = [](const MlaParams& p) {
        return 1.0 / std::sqrt(static_cast<double>(p.kv_lora_rank + p.qk_rope_head_dim));
    };
    return r;
}

// kv_b_proj's key half repacked and read in the other layout (vllm#56773's
// scrambling): each head's w_uk taken as if stored [dn, dc].
scalar::MlaRules w_uk_transposed() {
    scalar::MlaRules r;
    r.w_uk_transposed = true;
    return r;
}

// The absorbed kernel's last step skipped: each head writes the first dv
// columns of its softmax-weighted latent sum, never multiplied by w_uv (the
// issue's w_uv_missing; silent wherever dv <= kv_lora_rank, as in every
// DeepSeek, since the output's shape still fits).
scalar::MlaRules w_uv_missing() {
    scalar::MlaRules r;
    r.w_uv_missing = true;
    return r;
}

// A sequence's pages taken as consecutive from its first (flashinfer#3219:
// MLA tests that only lay pages out contiguously cannot see it).
scalar::MlaRules pages_consecutive() {
    scalar::MlaRules r;
    r.row = [](const PagedIndex& idx, int64_t P, int64_t b, int64_t i) {
        return (idx.kv_indices[idx.kv_indptr[b]] + i / P) * P + i % P;
    };
    return r;
}

// A split-KV MLA kernel whose merge forgets the rescale (cutlass#2274 via
// sglang#6101: missed because the tests' inputs were too small to move the max).
scalar::MlaRules split_unrescaled() {
    scalar::MlaRules r;
    r.split_merge_unrescaled = true;
    return r;
}

}  // namespace

std::unique_ptr<Implementation> mla_scale_absorbed_dim(const ImplOptions& o) {
    return detail::make<MlaWithRules<absorbed_dim_scale>>("mla_scale_absorbed_dim", o);
}
std::unique_ptr<Implementation> mla_w_uk_transposed(const ImplOptions& o) {
    return detail::make<MlaWithRules<w_uk_transposed>>("mla_w_uk_transposed", o);
}
std::unique_ptr<Implementation> mla_w_uv_missing(const ImplOptions& o) {
    return detail::make<MlaWithRules<w_uv_missing>>("mla_w_uv_missing", o);
}
std::unique_ptr<Implementation> mla_pages_consecutive(const ImplOptions& o) {
    return detail::make<MlaWithRules<pages_consecutive>>("mla_pages_consecutive", o);
}
std::unique_ptr<Implementation> mla_split_merge_unrescaled(const ImplOptions& o) {
    return detail::make<MlaWithRules<split_unrescaled>>("mla_split_merge_unrescaled", o);
}

}  // namespace conform::mutants
