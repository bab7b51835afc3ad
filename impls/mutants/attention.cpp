// Attention mutants (semantics.md, bug classes 3 and 10, and "others worth a mutant").
// Each gets one of scalar::AttentionRules wrong.
#include <cmath>

#include "mutants/mutants.h"

namespace conform::mutants {
namespace {

using scalar::AttentionRules;
using scalar::ScalarImpl;

// Runs the scalar attention under rules R(), for every caller (op and block).
template <AttentionRules (*R)()>
struct WithRules : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                   MutView out) override {
        scalar::attention(q, k, v, q_pos, k_pos, p, out, R());
    }
};

// Class 3 (onnx #7274, axlearn #842): kv heads tiled, query head h reads h % n_kv.
AttentionRules tiled_heads() {
    AttentionRules r;
    r.kv_head = [](int64_t h, int64_t, int64_t n_kv_heads) { return h % n_kv_heads; };
    return r;
}

// Causal mask missing: every query sees every key.
AttentionRules no_mask() {
    AttentionRules r;
    r.visible = [](int64_t, int64_t) { return true; };
    return r;
}

// Causal mask off by one (triu(diagonal=0) for triu(diagonal=1)): the diagonal is
// masked too, so a query no longer sees its own key.
AttentionRules mask_strict() {
    AttentionRules r;
    r.visible = [](int64_t k_pos, int64_t q_pos) { return k_pos < q_pos; };
    return r;
}

// Scale 1/sqrt(d_model) for 1/sqrt(head_dim), d_model taken as n_heads * head_dim
// (as Llama's configs have it).
AttentionRules model_width_scale() {
    AttentionRules r;
    r.scale = [](const AttentionParams& p) { return 1.0 / std::sqrt(static_cast<double>(p.n_heads * p.head_dim)); };
    return r;
}

// A naive softmax, exp(score) without the row max: overflows to inf, then NaN,
// for scores above ~88.7.
AttentionRules softmax_unshifted() {
    AttentionRules r;
    r.subtract_max = false;
    return r;
}

// Class 10 (pytorch #103749): a row that sees no key gets NaN, not zeros.
AttentionRules empty_row_nan() {
    AttentionRules r;
    r.empty_row = NAN;
    return r;
}

}  // namespace

std::unique_ptr<Implementation> gqa_head_mapping_tiled(const ImplOptions& o) {
    return detail::make<WithRules<tiled_heads>>("gqa_head_mapping_tiled", o);
}
std::unique_ptr<Implementation> causal_mask_missing(const ImplOptions& o) {
    return detail::make<WithRules<no_mask>>("causal_mask_missing", o);
}
std::unique_ptr<Implementation> causal_mask_off_by_one(const ImplOptions& o) {
    return detail::make<WithRules<mask_strict>>("causal_mask_off_by_one", o);
}
std::unique_ptr<Implementation> attention_scale_wrong(const ImplOptions& o) {
    return detail::make<WithRules<model_width_scale>>("attention_scale_wrong", o);
}
std::unique_ptr<Implementation> softmax_no_max_subtraction(const ImplOptions& o) {
    return detail::make<WithRules<softmax_unshifted>>("softmax_no_max_subtraction", o);
}
std::unique_ptr<Implementation> masked_row_nan(const ImplOptions& o) {
    return detail::make<WithRules<empty_row_nan>>("masked_row_nan", o);
}

}  // namespace conform::mutants
