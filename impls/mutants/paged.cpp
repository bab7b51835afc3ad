// Paged-attention mutants: the serving bugs of issue reports (flashinfer,
// vllm, flash-attention, llama.cpp), each one of scalar::PagedRules wrong.
#include <algorithm>
#include <cmath>
#include <vector>

#include "conform/dtype.h"
#include "mutants/mutants.h"

namespace conform::mutants {
namespace {

using scalar::PagedRules;
using scalar::ScalarImpl;

template <PagedRules (*R)()>
struct WithPagedRules : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                         MutView out, MutView lse) override {
        scalar::paged_attention(q, k_cache, v_cache, idx, p, out, lse, R());
    }
    // decode's FP8 cache goes through the same write and read: a cache bug
    // reaches both ops (the other rules are paged_attention's alone).
    scalar::KvCacheRules kv_cache_rules() const override { return R().cache; }
};

// The block table ignored: a sequence's pages taken as consecutive from its
// first (a kernel tested only with pages allocated in order, FlashInfer's
// own tests' arange), wrapping at the end of the pool.
PagedRules block_table_ignored() {
    PagedRules r;
    r.row = [](const PagedIndex& idx, int64_t P, int64_t b, int64_t i) {
        return (idx.kv_indices[idx.kv_indptr[b]] + i / P) * P + i % P;
    };
    return r;
}

// The last page read whole: kv_last_page_len ignored (the tail past it is
// another request's, or garbage; flashinfer #3716, #725).
PagedRules last_page_len_ignored() {
    PagedRules r;
    r.kv_len = [](const PagedIndex& idx, int64_t P, int64_t b) { return (idx.kv_indptr[b + 1] - idx.kv_indptr[b]) * P; };
    return r;
}

// The batch attended as one packed sequence: the sequences' boundaries
// ignored, so each query also sees every earlier sequence's keys
// (llama.cpp #7903, tt-metal #50512: another sequence's keys in the output).
PagedRules sequences_packed() {
    PagedRules r;
    r.kv_len = [](const PagedIndex& idx, int64_t P, int64_t b) {
        int64_t n = 0;
        for (int64_t j = 0; j <= b; ++j) n += scalar::paged_kv_len(idx, P, j);
        return n;
    };
    r.row = [](const PagedIndex& idx, int64_t P, int64_t, int64_t i) {
        int64_t j = 0;
        while (i >= scalar::paged_kv_len(idx, P, j)) i -= scalar::paged_kv_len(idx, P, j++);
        return scalar::paged_row(idx, P, j, i);
    };
    return r;
}

// One key too many where the last page is partial: kv_len + 1, so the slot
// after the sequence's last key is read and its queries sit one position
// later (the last one sees it). Its poison is a slot past the last page's
// length, as when the length is ignored; only its reference tells the two
// apart.
PagedRules one_slot_past() {
    PagedRules r;
    r.kv_len = [](const PagedIndex& idx, int64_t P, int64_t b) {
        const int64_t n = scalar::paged_kv_len(idx, P, b);
        return n % P != 0 ? n + 1 : n;
    };
    return r;
}

// A page-boundary off by one: pages counted kv_len / page_size, floored, so
// the last partial page — the newest keys, the new tokens' own — is dropped.
PagedRules partial_page_dropped() {
    PagedRules r;
    r.kv_len = [](const PagedIndex& idx, int64_t P, int64_t b) { return scalar::paged_kv_len(idx, P, b) / P * P; };
    return r;
}

// New queries placed at the start of the sequence, not after its cache
// (top-left causal): wrong only where q_len > 1 and something is cached
// (sgl-kernel-xpu #196, vllm #26042).
PagedRules queries_at_start() {
    PagedRules r;
    r.q_pos = [](int64_t j, int64_t, int64_t) { return j; };
    return r;
}

// lse returned in base 2 (FlashInfer's internal log2 domain) where the
// contract is the natural log: a cascade merge then weights partials wrongly.
PagedRules lse_base2() {
    PagedRules r;
    r.lse_scale = 1.0 / std::log(2.0);
    return r;
}

// The lse without its max: log(sum exp(s - m)), the m the sum was shifted by
// not added back (a kernel's internal normalised state returned as the lse).
PagedRules lse_max_dropped() {
    PagedRules r;
    r.lse_adds_max = false;
    return r;
}

// An empty sequence's rows left unwritten (flashinfer PR #363, #3360, #4975).
PagedRules empty_unwritten() {
    PagedRules r;
    r.write_empty = false;
    return r;
}

// An FP8 KV cache written or read wrongly (scalar::KvCacheRules), the
// silent bugs of serving engines' FP8 caches.
PagedRules fp8_scale_ignored() {  // scales fallen back to 1.0 (sglang #20705, #18818)
    PagedRules r;
    r.cache.scale = [](const PagedAttentionParams&, bool, int64_t) { return 1.0f; };
    return r;
}
PagedRules fp8_k_scale_for_v() {  // v_descale given k_scale (sglang #26852)
    PagedRules r;
    r.cache.scale = [](const PagedAttentionParams& p, bool, int64_t g) { return scalar::kv_scale(p, false, g); };
    return r;
}
PagedRules fp8_per_tensor_read() {  // a per-head scale array read as one scale
    PagedRules r;
    r.cache.scale = [](const PagedAttentionParams& p, bool is_v, int64_t) { return scalar::kv_scale(p, is_v, 0); };
    return r;
}
PagedRules fp8_truncated() {  // a hand-written conversion that drops the low bits
    PagedRules r;
    r.cache.write = [](float x, float scale, KvCacheDtype d) { return fp8_round(x / scale, d, {true, true}); };
    return r;
}
PagedRules fp8_unsaturated() {  // __NV_NOSAT: past the max becomes NaN (e4m3) or inf (e5m2)
    PagedRules r;
    r.cache.write = [](float x, float scale, KvCacheDtype d) { return fp8_round(x / scale, d, {false, false}); };
    return r;
}
PagedRules fp8_reciprocal_scale() {  // fp8(k * fl(1 / scale)): a multiply for a divide, one rounding more
    PagedRules r;
    r.cache.write = [](float x, float scale, KvCacheDtype d) { return fp8_round(x * (1.0f / scale), d); };
    return r;
}
PagedRules fp8_read_divides() {  // the read divides by the scale, as the write did
    PagedRules r;
    r.cache.read = [](float code, float scale) { return code / scale; };
    return r;
}
PagedRules fp8_dequant_twice() {  // the scale applied in the read and again after it
    PagedRules r;
    r.cache.read = [](float code, float scale) { return code * scale * scale; };
    return r;
}

// A sink bug: the faithful paged kernel's result, where a batch has sinks,
// redone with the sinks taken in wrongly.
struct SinkForm : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                         MutView out, MutView lse) override {
        scalar::paged_attention(q, k_cache, v_cache, idx, p, out, lse);
        if (p.sinks) with_sinks(q, k_cache, v_cache, idx, p, out, lse);
    }
    virtual void with_sinks(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                            MutView out, MutView lse) = 0;
};

// The lse of the keys alone: the sink joins the output's softmax but the
// kernel returns the lse it had before adding it (FlashAttention's
// softmax_lse, with the sink applied afterwards to the output only).
struct SinkMissingFromLse : SinkForm {
    using SinkForm::SinkForm;
    void with_sinks(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p, MutView out,
                    MutView lse) override {
        PagedAttentionParams keys_only = p;
        keys_only.sinks = nullptr;
        Tensor o(out.rows, out.cols);
        scalar::paged_attention(q, k_cache, v_cache, idx, keys_only, o.mut(), lse);
    }
};

// A split-KV kernel (a split per page) that starts every split's softmax
// from the sink's state (max = sink, sum = 1) and merges them: the sink is
// counted once per page, n·exp(sink) in the denominator, as a sink of
// sink + ln n. Sequences of one page are right.
struct SinkPerSplit : SinkForm {
    using SinkForm::SinkForm;
    void with_sinks(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p, MutView out,
                    MutView lse) override {
        const int64_t B = idx.qo_indptr.n - 1;
        std::vector<float> sinks(static_cast<size_t>(p.n_heads));
        Tensor o(out.rows, out.cols), l(lse.rows, lse.cols);
        for (int64_t pages = 2;; pages++) {  // each page count the batch has, once
            bool any = false, more = false;
            for (int64_t b = 0; b < B; b++) {
                const int64_t n = idx.kv_indptr[b + 1] - idx.kv_indptr[b];
                any = any || n == pages, more = more || n > pages;
            }
            if (any) {
                for (int64_t h = 0; h < p.n_heads; h++)
                    sinks[static_cast<size_t>(h)] = p.sinks[h] + std::log(static_cast<float>(pages));
                PagedAttentionParams pp = p;
                pp.sinks = sinks.data();
                scalar::paged_attention(q, k_cache, v_cache, idx, pp, o.mut(), l.mut());
                for (int64_t b = 0; b < B; b++) {
                    if (idx.kv_indptr[b + 1] - idx.kv_indptr[b] != pages) continue;
                    for (int64_t t = idx.qo_indptr[b]; t < idx.qo_indptr[b + 1]; t++) {
                        std::copy_n(o.view().row(t), out.cols, out.row(t));
                        std::copy_n(l.view().row(t), lse.cols, lse.row(t));
                    }
                }
            }
            if (!more) break;
        }
    }
};

// A split-KV kernel whose merge starts from (m = -inf, l = 0) and folds each
// page's partial softmax in with exp(m_old - m_new): a first page with no key
// in the window (a sliding window past it) gives exp(-inf + inf) = NaN, which
// every later page carries on. Sinks start the state at (sink, 1) and a row
// that sees no key at all is written as empty, so neither turns NaN.
struct SplitMergeNan : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                         MutView out, MutView lse) override {
        scalar::paged_attention(q, k_cache, v_cache, idx, p, out, lse);
        if (p.sinks) return;
        const AttentionParams ap(p.n_heads, p.n_kv_heads, p.head_dim, p);
        const int64_t P = p.page_size;
        for (int64_t b = 0; b + 1 < idx.qo_indptr.n; b++) {
            const int64_t q0 = idx.qo_indptr[b], q_len = idx.qo_indptr[b + 1] - q0;
            const int64_t kv_len = scalar::paged_kv_len(idx, P, b);
            for (int64_t j = 0; j < q_len; j++) {
                const int64_t qp = scalar::paged_q_pos(j, q_len, kv_len);
                bool first = false, later = false;  // a key seen in the first page, in a later one
                for (int64_t k = 0; k < kv_len; k++)
                    if (ap.visible(k, qp)) (k < P ? first : later) = true;
                if (first || !later) continue;
                std::fill_n(out.row(q0 + j), out.cols, NAN);
                std::fill_n(lse.row(q0 + j), lse.cols, NAN);
            }
        }
    }
};

// A split-KV kernel (a split per page) whose merge adds its splits' sums and
// accumulators as they are: each split exponentiates against its own max m_i
// and the merge forgets exp(m_i - m), the rescale a flash-decoding combine
// does, so a split whose max is below the row's weighs too much. Its lse is
// the row's max + log of the added sums. A sequence of one page, or splits of
// one max, are right; with sinks, the faithful kernel (their bugs are others').
struct SplitMergeUnrescaled : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                         MutView out, MutView lse) override {
        scalar::paged_attention(q, k_cache, v_cache, idx, p, out, lse);  // the checks; a row with no key: 0, -inf
        if (p.sinks) return;
        const int64_t H = p.n_heads, KV = p.n_kv_heads, hd = p.head_dim, P = p.page_size, W = KV * hd;
        const AttentionParams ap(H, KV, hd, p);
        const float scale = static_cast<float>(ap.score_scale()), cap = static_cast<float>(p.softcap);
        for (int64_t b = 0; b + 1 < idx.qo_indptr.n; b++) {
            const int64_t q0 = idx.qo_indptr[b], q_len = idx.qo_indptr[b + 1] - q0;
            const int64_t kv_len = scalar::paged_kv_len(idx, P, b);
            // k_b, v_b: the sequence's keys and values as the cache gives them back
            Tensor kt(kv_len, W), vt(kv_len, W);
            scalar::paged_gather(k_cache, v_cache, idx, p, b, {}, kt.mut(), vt.mut());
            const std::vector<float>& k_b = kt.data;
            const std::vector<float>& v_b = vt.data;
            for (int64_t j = 0; j < q_len; j++) {
                const int64_t qp = scalar::paged_q_pos(j, q_len, kv_len);
                for (int64_t h = 0; h < H; h++) {
                    const float* qh = q.row(q0 + j) + h * hd;
                    const int64_t g = h / (H / KV);
                    float m_all = -INFINITY, l = 0.0f;
                    std::vector<float> acc(static_cast<size_t>(hd), 0.0f), s(static_cast<size_t>(P));
                    for (int64_t s0 = 0; s0 < kv_len; s0 += P) {  // split i: keys s0 .. s0 + P - 1
                        const int64_t n = std::min(P, kv_len - s0);
                        float m = -INFINITY;
                        for (int64_t i = 0; i < n; i++) {
                            float& si = s[static_cast<size_t>(i)];
                            si = -INFINITY;
                            if (!ap.visible(s0 + i, qp)) continue;
                            float dot = 0.0f;
                            for (int64_t d = 0; d < hd; d++) dot += qh[d] * k_b[static_cast<size_t>((s0 + i) * W + g * hd + d)];
                            si = dot * scale;
                            if (cap > 0) si = cap * std::tanh(si / cap);
                            m = std::max(m, si);
                        }
                        if (m == -INFINITY) continue;  // a split with no visible key adds nothing
                        for (int64_t i = 0; i < n; i++) {
                            if (s[static_cast<size_t>(i)] == -INFINITY) continue;
                            const float w = std::exp(s[static_cast<size_t>(i)] - m);  // the bug: never * exp(m - m_all)
                            l += w;
                            for (int64_t d = 0; d < hd; d++)
                                acc[static_cast<size_t>(d)] += w * v_b[static_cast<size_t>((s0 + i) * W + g * hd + d)];
                        }
                        m_all = std::max(m_all, m);
                    }
                    if (m_all == -INFINITY) continue;  // no key: the faithful 0 and -inf stay
                    for (int64_t d = 0; d < hd; d++) out.row(q0 + j)[h * hd + d] = acc[static_cast<size_t>(d)] / l;
                    lse.row(q0 + j)[h] = m_all + std::log(l);
                }
            }
        }
    }
};

}  // namespace

std::unique_ptr<Implementation> kv_fp8_scale_ignored(const ImplOptions& o) {
    return detail::make<WithPagedRules<fp8_scale_ignored>>("kv_fp8_scale_ignored", o);
}
std::unique_ptr<Implementation> kv_fp8_k_scale_for_v(const ImplOptions& o) {
    return detail::make<WithPagedRules<fp8_k_scale_for_v>>("kv_fp8_k_scale_for_v", o);
}
std::unique_ptr<Implementation> kv_fp8_per_head_read_per_tensor(const ImplOptions& o) {
    return detail::make<WithPagedRules<fp8_per_tensor_read>>("kv_fp8_per_head_read_per_tensor", o);
}
std::unique_ptr<Implementation> kv_fp8_truncated(const ImplOptions& o) {
    return detail::make<WithPagedRules<fp8_truncated>>("kv_fp8_truncated", o);
}
std::unique_ptr<Implementation> kv_fp8_unsaturated(const ImplOptions& o) {
    return detail::make<WithPagedRules<fp8_unsaturated>>("kv_fp8_unsaturated", o);
}
std::unique_ptr<Implementation> kv_fp8_reciprocal_scale(const ImplOptions& o) {
    return detail::make<WithPagedRules<fp8_reciprocal_scale>>("kv_fp8_reciprocal_scale", o);
}
std::unique_ptr<Implementation> kv_fp8_read_divides(const ImplOptions& o) {
    return detail::make<WithPagedRules<fp8_read_divides>>("kv_fp8_read_divides", o);
}
std::unique_ptr<Implementation> kv_fp8_dequant_twice(const ImplOptions& o) {
    return detail::make<WithPagedRules<fp8_dequant_twice>>("kv_fp8_dequant_twice", o);
}

std::unique_ptr<Implementation> paged_block_table_ignored(const ImplOptions& o) {
    return detail::make<WithPagedRules<block_table_ignored>>("paged_block_table_ignored", o);
}
std::unique_ptr<Implementation> paged_last_page_len_ignored(const ImplOptions& o) {
    return detail::make<WithPagedRules<last_page_len_ignored>>("paged_last_page_len_ignored", o);
}
std::unique_ptr<Implementation> paged_sequences_packed(const ImplOptions& o) {
    return detail::make<WithPagedRules<sequences_packed>>("paged_sequences_packed", o);
}
std::unique_ptr<Implementation> paged_partial_page_dropped(const ImplOptions& o) {
    return detail::make<WithPagedRules<partial_page_dropped>>("paged_partial_page_dropped", o);
}
std::unique_ptr<Implementation> paged_queries_at_start(const ImplOptions& o) {
    return detail::make<WithPagedRules<queries_at_start>>("paged_queries_at_start", o);
}
std::unique_ptr<Implementation> paged_lse_base2(const ImplOptions& o) {
    return detail::make<WithPagedRules<lse_base2>>("paged_lse_base2", o);
}
std::unique_ptr<Implementation> paged_empty_unwritten(const ImplOptions& o) {
    return detail::make<WithPagedRules<empty_unwritten>>("paged_empty_unwritten", o);
}

std::unique_ptr<Implementation> sink_missing_from_lse(const ImplOptions& o) {
    return detail::make<SinkMissingFromLse>("sink_missing_from_lse", o);
}
std::unique_ptr<Implementation> sink_per_split(const ImplOptions& o) {
    return detail::make<SinkPerSplit>("sink_per_split", o);
}
std::unique_ptr<Implementation> paged_kv_len_off_by_one(const ImplOptions& o) {
    return detail::make<WithPagedRules<one_slot_past>>("paged_kv_len_off_by_one", o);
}
std::unique_ptr<Implementation> split_kv_merge_nan(const ImplOptions& o) {
    return detail::make<SplitMergeNan>("split_kv_merge_nan", o);
}
std::unique_ptr<Implementation> split_kv_merge_unrescaled(const ImplOptions& o) {
    return detail::make<SplitMergeUnrescaled>("split_kv_merge_unrescaled", o);
}
std::unique_ptr<Implementation> paged_lse_max_dropped(const ImplOptions& o) {
    return detail::make<WithPagedRules<lse_max_dropped>>("paged_lse_max_dropped", o);
}

}  // namespace conform::mutants
