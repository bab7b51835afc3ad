// Attention mutants (semantics.md, bug classes 3 and 10, and "others worth a mutant").
// Each gets one of scalar::AttentionRules wrong.
#include <algorithm>
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
    void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                         MutView out, MutView lse) override {
        scalar::PagedRules r;
        r.attention = R();
        scalar::paged_attention(q, k_cache, v_cache, idx, p, out, lse, r);
    }
};

// The window's lower edge taken from the call's first query for every query
// (k_pos > q_first - W): a prefill chunk's tile bounds its keys once, from
// the chunk's first row, and never masks per row. A decode step (one query)
// is right; a later query of a chunk sees up to rows - 1 keys too many.
AttentionRules window_from_first() {
    AttentionRules r;
    r.in_window = [](const AttentionParams& p, int64_t k, int64_t q, const scalar::WindowAt& at) {
        return (p.sliding_window <= 0 || k > at.q_first - p.sliding_window) && same_chunk(k, q, p.chunk);
    };
    return r;
}

// The window applied by whole pages: a page is read when any of its keys is
// in the window, and read whole (the kernel skips pages left of the window but
// masks no key inside the first one it reads): up to page - 1 keys too many.
AttentionRules window_by_page() {
    AttentionRules r;
    r.in_window = [](const AttentionParams& p, int64_t k, int64_t q, const scalar::WindowAt& at) {
        if (p.sliding_window <= 0 || at.page <= 0) return p.in_window(k, q);
        const int64_t lo = std::max<int64_t>(0, q - p.sliding_window + 1);  // the first key in the window
        return k >= lo / at.page * at.page && same_chunk(k, q, p.chunk);
    };
    return r;
}

// The window applied on the decode path only: a sequence with more than one
// new query (a prefill, or a chunk of one) attends every earlier key.
AttentionRules window_decode_only() {
    AttentionRules r;
    r.in_window = [](const AttentionParams& p, int64_t k, int64_t q, const scalar::WindowAt& at) {
        return at.rows > 1 ? same_chunk(k, q, p.chunk) : p.in_window(k, q);
    };
    return r;
}

// The converse: the window applied where a sequence has more than one new
// query, and not on the decode path (one query), where every earlier key is
// attended: a decode kernel not given the window.
AttentionRules window_prefill_only() {
    AttentionRules r;
    r.in_window = [](const AttentionParams& p, int64_t k, int64_t q, const scalar::WindowAt& at) {
        return at.rows > 1 ? p.in_window(k, q) : same_chunk(k, q, p.chunk);
    };
    return r;
}

// The sink logit multiplied by the score scale, as if it were a score (the
// sink is added to the softmax's logits as it stands: gpt-oss, vLLM's sinks).
AttentionRules sink_times_scale() {
    AttentionRules r;
    r.sink_scaled = true;
    return r;
}

// Sinks indexed by the kv head, as a kernel looping over kv groups might.
AttentionRules sink_per_kv_head() {
    AttentionRules r;
    r.sink_head = [](int64_t h, int64_t n_heads, int64_t n_kv_heads) { return h / (n_heads / n_kv_heads); };
    return r;
}

// The cap after a -inf mask: tanh makes each masked key's logit -cap.
AttentionRules softcap_masked_keys() {
    AttentionRules r;
    r.softcap_after_mask = true;
    return r;
}

// Class 3 (onnx #7274, axlearn #842): kv heads tiled, query head h reads h % n_kv.
AttentionRules tiled_heads() {
    AttentionRules r;
    r.kv_head = [](int64_t h, int64_t, int64_t n_kv_heads) { return h % n_kv_heads; };
    return r;
}

// Class 3, in the form a kernel specialised by group size has it: the
// repeated mapping h / group up to 4 query heads per kv head, and the tiled
// h % n_kv above (a second code path for large groups, as TinyLlama's 32/4
// or Llama 3 70B's 64/8 take). Named by the same bug id: on a case with a
// group above 4 it is gqa_head_mapping_tiled.
AttentionRules tiled_heads_above_group_4() {
    AttentionRules r;
    r.kv_head = [](int64_t h, int64_t n_heads, int64_t n_kv_heads) {
        const int64_t group = n_heads / n_kv_heads;
        return group > 4 ? h % n_kv_heads : h / group;
    };
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

// The config's attn_scale and 1/sqrt(head_dim) both multiplied in (a kernel
// that scales q by its softmax_scale argument and then the scores again by
// the default): right wherever the config has no attn_scale.
AttentionRules both_scales() {
    AttentionRules r;
    r.scale = [](const AttentionParams& p) {
        const double d = 1.0 / std::sqrt(static_cast<double>(p.head_dim));
        return p.scale > 0 ? p.scale * d : d;
    };
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

// A mask computed from row indices (bottom-right aligned), not positions:
// right for one contiguous block, wrong for gaps, restarts, any order.
AttentionRules mask_by_index() {
    AttentionRules r;
    r.visible_index = [](int64_t j, int64_t t, int64_t S, int64_t T) { return j <= t + (S - T); };
    return r;
}

// head_dim truncated to a lane count: q·k over the first 64 dims of a head
// (one 64-wide tile), the rest of a 128-dim head ignored.
AttentionRules truncated_head() {
    AttentionRules r;
    r.score_dims = 64;
    return r;
}

// A flash kernel whose online softmax forgets to rescale across 64-key tiles.
AttentionRules unrescaled_tiles() {
    AttentionRules r;
    r.unrescaled_tile = 64;
    return r;
}

// A KV ring of 16 slots that wraps early: a one-token query (a decode step)
// reads only the last 16 keys of the cache.
struct KvCacheWrapsEarly : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                   MutView out) override {
        constexpr int64_t kRing = 16;
        if (q.rows == 1 && k.rows > kRing) {
            const int64_t skip = k.rows - kRing;
            const View k16{k.row(skip), kRing, k.cols}, v16{v.row(skip), kRing, v.cols};
            const Positions p16{k_pos.data + skip, kRing};
            ScalarImpl::attention(q, k16, v16, q_pos, p16, p, out);
            return;
        }
        ScalarImpl::attention(q, k, v, q_pos, k_pos, p, out);
    }
};

}  // namespace

std::unique_ptr<Implementation> gqa_head_mapping_tiled(const ImplOptions& o) {
    return detail::make<WithRules<tiled_heads>>("gqa_head_mapping_tiled", o);
}
std::unique_ptr<Implementation> gqa_tiled_above_group_4(const ImplOptions& o) {
    return detail::make<WithRules<tiled_heads_above_group_4>>("gqa_tiled_above_group_4", o);
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
std::unique_ptr<Implementation> attn_scale_times_default(const ImplOptions& o) {
    return detail::make<WithRules<both_scales>>("attn_scale_times_default", o);
}
std::unique_ptr<Implementation> softmax_no_max_subtraction(const ImplOptions& o) {
    return detail::make<WithRules<softmax_unshifted>>("softmax_no_max_subtraction", o);
}
std::unique_ptr<Implementation> masked_row_nan(const ImplOptions& o) {
    return detail::make<WithRules<empty_row_nan>>("masked_row_nan", o);
}

std::unique_ptr<Implementation> causal_mask_by_index(const ImplOptions& o) {
    return detail::make<WithRules<mask_by_index>>("causal_mask_by_index", o);
}
std::unique_ptr<Implementation> head_dim_truncated(const ImplOptions& o) {
    return detail::make<WithRules<truncated_head>>("head_dim_truncated", o);
}
std::unique_ptr<Implementation> softmax_tile_not_rescaled(const ImplOptions& o) {
    return detail::make<WithRules<unrescaled_tiles>>("softmax_tile_not_rescaled", o);
}
std::unique_ptr<Implementation> kv_cache_wraps_early(const ImplOptions& o) {
    return detail::make<KvCacheWrapsEarly>("kv_cache_wraps_early", o);
}

std::unique_ptr<Implementation> sink_wrong_head(const ImplOptions& o) {
    return detail::make<WithRules<sink_per_kv_head>>("sink_wrong_head", o);
}
std::unique_ptr<Implementation> softcap_after_mask(const ImplOptions& o) {
    return detail::make<WithRules<softcap_masked_keys>>("softcap_after_mask", o);
}
std::unique_ptr<Implementation> window_from_first_query(const ImplOptions& o) {
    return detail::make<WithRules<window_from_first>>("window_from_first_query", o);
}
std::unique_ptr<Implementation> window_per_page(const ImplOptions& o) {
    return detail::make<WithRules<window_by_page>>("window_per_page", o);
}
std::unique_ptr<Implementation> window_ignored_in_prefill(const ImplOptions& o) {
    return detail::make<WithRules<window_decode_only>>("window_ignored_in_prefill", o);
}
std::unique_ptr<Implementation> window_ignored_in_decode(const ImplOptions& o) {
    return detail::make<WithRules<window_prefill_only>>("window_ignored_in_decode", o);
}
std::unique_ptr<Implementation> sink_scaled(const ImplOptions& o) {
    return detail::make<WithRules<sink_times_scale>>("sink_scaled", o);
}

}  // namespace conform::mutants
