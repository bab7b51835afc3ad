// impls/simd/paged_attention-inl.h — split-KV attention over a paged cache
// (FlashDecoding / FlashInfer's "split-k" schedule, on the CPU).
//
// Phase 1, one work item per (sequence b, kv head g, split c): the split is a
// run of whole pages, keys [c·C, min((c+1)·C, kv_len_b)); for every query row
// j of b and every query head h of g's group, over the visible keys i <= pos_j
// of the split,
//   s_i = (q . k_i) * scale;   m_c = max_i s_i;   l_c = Σ_i exp(s_i − m_c);
//   acc_c = Σ_i exp(s_i − m_c) v_i
// stored as the split's partial state (m_c = −inf, l_c = 0 where it sees no key).
// Phase 2 (merge_states), one work item per query row: for each head,
//   m = max_c m_c;  l = Σ_c l_c exp(m_c − m);  out = Σ_c acc_c exp(m_c − m) / l;
//   lse = m + log(l)
// and a row that saw no key anywhere gets out 0, lse −inf. A row's result
// depends on the split size, never on the thread that computed it.
#include <cmath>
#include <cstddef>
#include <limits>

#if defined(CONFORM_SIMD_PAGED_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef CONFORM_SIMD_PAGED_ATTENTION_INL_H_
#undef CONFORM_SIMD_PAGED_ATTENTION_INL_H_
#else
#define CONFORM_SIMD_PAGED_ATTENTION_INL_H_
#endif

#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include "simd/attention-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

// One FP8 cache row of a kv head, dequantised through its table into
// `scratch` (zero past hd, as Widen leaves it).
HWY_INLINE const float* DequantRow(const uint8_t* HWY_RESTRICT codes, const float* HWY_RESTRICT lut, size_t hd,
                                   size_t hdp, float* HWY_RESTRICT scratch) {
    for (size_t d = 0; d < hd; ++d) scratch[d] = lut[codes[d]];
    for (size_t d = hd; d < hdp; ++d) scratch[d] = 0.0f;
    return scratch;
}

// Key or value row `row` of kv head g, as float32: widened, or an FP8 code's value from its table.
template <class TKV>
HWY_INLINE const float* KvRow(const CRows& src, const float* lut, size_t row, size_t g, size_t hd, size_t hdp,
                              float* HWY_RESTRICT scratch) {
    if constexpr (hwy::IsSame<TKV, uint8_t>())
        return DequantRow(static_cast<const uint8_t*>(src.data) + row * src.ld + g * hd, lut + g * 256, hd, hdp, scratch);
    else
        return RowF32(static_cast<const TKV*>(src.data) + row * src.ld + g * hd, hd, hdp, scratch);
}

template <class TQ, class TKV>
HWY_INLINE void PagedSplitT(const PagedJob& job, size_t b, size_t g, size_t c) {
    const DF df;
    const size_t N = hn::Lanes(df);
    const size_t hd = job.hd, hdp = PaddedHeadDim(hd), G = job.H / job.KV, P = job.P;
    const float scale = static_cast<float>(job.score_scale(static_cast<int64_t>(job.hd)));  // attn_scale, or 1 / sqrt(hd)
    const int64_t q0 = job.qo_indptr[b], q_len = job.qo_indptr[b + 1] - q0;
    const int64_t kv_len = job.kv_len(b);
    const int64_t k0 = static_cast<int64_t>(c * job.split), k1 = std::min<int64_t>(kv_len, k0 + static_cast<int64_t>(job.split));
    const int64_t* pages = job.kv_indices + job.kv_indptr[b];

    auto scratch = hwy::AllocateAligned<float>(2 * hdp + job.split);
    float* q = scratch.get();  // [hdp] the query head, widened
    float* kb = q + hdp;       // [hdp] one widened key or value row
    float* s = kb + hdp;       // [split] scores, then their exps
    for (int64_t j = 0; j < q_len; ++j) {
        const size_t t = static_cast<size_t>(q0 + j);
        const int64_t pos = kv_len - q_len + j;
        const int64_t seen_end = std::min(k1, pos + 1);  // keys [seen_begin, seen_end) are visible:
        // causal, and from the first key the window and the chunk leave it (the variant's mask)
        const int64_t seen_begin = std::max(k0, job.first_key(pos));
        for (size_t hh = 0; hh < G; ++hh) {
            const size_t h = g * G + hh;
            PagedPartial part = job.partial(t, h, c);
            if (seen_end <= seen_begin) {
                *part.m = -std::numeric_limits<float>::infinity();
                *part.l = 0.0f;
                continue;
            }
            Widen(static_cast<const TQ*>(job.q.data) + t * job.q.ld + h * hd, hd, hdp, q);
            float m = -std::numeric_limits<float>::infinity();
            for (int64_t i = seen_begin; i < seen_end; ++i) {
                const size_t row = static_cast<size_t>(pages[i / static_cast<int64_t>(P)]) * P + static_cast<size_t>(i) % P;
                const float* k = KvRow<TKV>(job.k, job.k_lut, row, g, hd, hdp, kb);
                s[i - k0] = Dot(q, k, hdp) * scale;
            }
            if (job.softcap > 0)
                SoftCap(s + (seen_begin - k0), static_cast<size_t>(seen_end - seen_begin), static_cast<float>(job.softcap));
            for (int64_t i = seen_begin; i < seen_end; ++i) m = std::max(m, s[i - k0]);
            float l = 0.0f;
            for (int64_t i = seen_begin; i < seen_end; ++i) l += (s[i - k0] = std::exp(s[i - k0] - m));
            float* acc = part.acc;
            // acc lives in the partial states, packed with m and l: unaligned loads and stores.
            for (size_t d = 0; d < hdp; d += N) hn::StoreU(hn::Zero(df), df, acc + d);
            for (int64_t i = seen_begin; i < seen_end; ++i) {
                const size_t row = static_cast<size_t>(pages[i / static_cast<int64_t>(P)]) * P + static_cast<size_t>(i) % P;
                const float* v = KvRow<TKV>(job.v, job.v_lut, row, g, hd, hdp, kb);
                const VF p = hn::Set(df, s[i - k0]);
                for (size_t d = 0; d < hdp; d += N) hn::StoreU(hn::MulAdd(p, hn::LoadU(df, v + d), hn::LoadU(df, acc + d)), df, acc + d);
            }
            *part.m = m;
            *part.l = l;
        }
    }
}

HWY_INLINE void PagedSplit(const PagedJob& job, size_t b, size_t g, size_t c) {
    const bool f32 = job.q.elem == Elem::f32;
    if (job.k_lut) return f32 ? PagedSplitT<float, uint8_t>(job, b, g, c) : PagedSplitT<bf16, uint8_t>(job, b, g, c);
    if (f32) return PagedSplitT<float, float>(job, b, g, c);
    PagedSplitT<bf16, bf16>(job, b, g, c);
}

template <class TO>
HWY_INLINE void PagedMergeT(const PagedJob& job, size_t t, size_t splits, float* lse_row) {
    const DF df;
    const size_t N = hn::Lanes(df);
    const size_t hd = job.hd, hdp = PaddedHeadDim(hd);
    auto scratch = hwy::AllocateAligned<float>(hdp);
    float* o = scratch.get();
    TO* orow = static_cast<TO*>(job.out.data) + t * job.out.ld;
    for (size_t h = 0; h < job.H; ++h) {
        float m = -std::numeric_limits<float>::infinity();
        for (size_t c = 0; c < splits; ++c) m = std::max(m, *job.partial(t, h, c).m);
        TO* oh = orow + h * hd;
        if (m == -std::numeric_limits<float>::infinity()) {  // no key in any split
            for (size_t d = 0; d < hd; d += N) StoreAny(df, hn::Zero(df), oh + d, hd - d);
            lse_row[h] = -std::numeric_limits<float>::infinity();
            continue;
        }
        // A sink (gpt-oss) enters once, here, not per split: one more term of
        // the denominator, with no value (an empty row stays out 0, lse -inf).
        float l = 0.0f;
        if (job.sinks) {
            const float sink = job.sinks[h];
            m = std::max(m, sink);
            l = std::exp(sink - m);
        }
        for (size_t d = 0; d < hdp; d += N) hn::Store(hn::Zero(df), df, o + d);
        for (size_t c = 0; c < splits; ++c) {
            const PagedPartial part = job.partial(t, h, c);
            if (*part.l == 0.0f) continue;
            const float w = std::exp(*part.m - m);  // the split's rescale to the common max
            l += *part.l * w;
            const VF vw = hn::Set(df, w);
            for (size_t d = 0; d < hdp; d += N) hn::Store(hn::MulAdd(vw, hn::LoadU(df, part.acc + d), hn::Load(df, o + d)), df, o + d);
        }
        const VF vl = hn::Set(df, l);
        for (size_t d = 0; d < hd; d += N) StoreAny(df, hn::Div(hn::Load(df, o + d), vl), oh + d, hd - d);
        lse_row[h] = m + std::log(l);
    }
}

HWY_INLINE void PagedMerge(const PagedJob& job, size_t t, size_t splits, float* lse_row) {
    if (job.out.elem == Elem::f32) return PagedMergeT<float>(job, t, splits, lse_row);
    PagedMergeT<bf16>(job, t, splits, lse_row);
}

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
