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

// Runs the scalar attention with its parameters edited by Edit (a callable on
// AttentionParams and PagedAttentionParams alike), for every caller (op,
// block, paged).
template <class Edit>
struct WithParams : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                   MutView out) override {
        AttentionParams b = p;
        Edit{}(b);
        ScalarImpl::attention(q, k, v, q_pos, k_pos, b, out);
    }
    void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                         MutView out, MutView lse) override {
        PagedAttentionParams b = p;
        Edit{}(b);
        ScalarImpl::paged_attention(q, k_cache, v_cache, idx, b, out, lse);
    }
};

// Sliding window read another way: `Shift` more keys (tokenspeed #578: 127
// keys for gpt-oss's 128, a window of W - 1; FlashAttention's window_size
// left = W passed where W - 1 was meant: W + 1), or (Ignored) full causal
// (zml #763, whose tests ran windows off).
template <int64_t Shift, bool Ignored>
struct Window {
    template <class Params>
    void operator()(Params& p) const {
        p.sliding_window = Ignored || p.sliding_window <= 0 ? 0 : std::max<int64_t>(1, p.sliding_window + Shift);
    }
};

// Llama 4's chunked attention dropped (full causal), or its chunk size
// taken as a sliding window of that many keys (the other local-attention
// mask a kernel library offers): a query past a chunk's start then sees the
// previous chunk's last keys.
struct NoChunk {
    template <class Params>
    void operator()(Params& p) const { p.chunk = 0; }
};
struct ChunkAsWindow {
    template <class Params>
    void operator()(Params& p) const {
        if (p.chunk <= 0) return;
        p.sliding_window = p.sliding_window > 0 ? std::min(p.sliding_window, p.chunk) : p.chunk;
        p.chunk = 0;
    }
};

// Soft-capping dropped (vLLM's first Gemma 2, PR #5908).
struct NoSoftcap {
    template <class Params>
    void operator()(Params& p) const { p.softcap = 0; }
};

// The config's score scale ignored: 1/sqrt(head_dim) always (Gemma 2 27B's
// query_pre_attn_scalar 144 run with head_dim 128's 1/sqrt(128), as early ports did).
struct NoAttnScale {
    template <class Params>
    void operator()(Params& p) const { p.scale = 0; }
};

// Attention sinks dropped (vllm-metal PR #550: never wired).
struct NoSinks {
    template <class Params>
    void operator()(Params& p) const { p.sinks = nullptr; }
};

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

std::unique_ptr<Implementation> sink_missing(const ImplOptions& o) {
    return detail::make<WithParams<NoSinks>>("sink_missing", o);
}
std::unique_ptr<Implementation> sink_wrong_head(const ImplOptions& o) {
    return detail::make<WithRules<sink_per_kv_head>>("sink_wrong_head", o);
}
std::unique_ptr<Implementation> softcap_missing(const ImplOptions& o) {
    return detail::make<WithParams<NoSoftcap>>("softcap_missing", o);
}
std::unique_ptr<Implementation> attn_scale_ignored(const ImplOptions& o) {
    return detail::make<WithParams<NoAttnScale>>("attn_scale_ignored", o);
}
std::unique_ptr<Implementation> softcap_after_mask(const ImplOptions& o) {
    return detail::make<WithRules<softcap_masked_keys>>("softcap_after_mask", o);
}
std::unique_ptr<Implementation> window_off_by_one(const ImplOptions& o) {
    return detail::make<WithParams<Window<-1, false>>>("window_off_by_one", o);
}
std::unique_ptr<Implementation> window_one_too_wide(const ImplOptions& o) {
    return detail::make<WithParams<Window<+1, false>>>("window_one_too_wide", o);
}
std::unique_ptr<Implementation> window_ignored(const ImplOptions& o) {
    return detail::make<WithParams<Window<0, true>>>("window_ignored", o);
}
std::unique_ptr<Implementation> chunk_ignored(const ImplOptions& o) {
    return detail::make<WithParams<NoChunk>>("chunk_ignored", o);
}
std::unique_ptr<Implementation> chunk_as_window(const ImplOptions& o) {
    return detail::make<WithParams<ChunkAsWindow>>("chunk_as_window", o);
}

}  // namespace conform::mutants
