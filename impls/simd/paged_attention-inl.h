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

// Query heads taken together over a split's keys: each key and value row is
// read (and widened, or dequantised) once per block of heads instead of once
// per head — MLA's 128 heads share one latent row, GQA's group one kv row.
// Each head's own arithmetic (its scores, max, sum, and the order its values
// accumulate in) is the same as one head at a time: results do not depend on
// the block.
constexpr size_t kSplitHeads = 8;

// Dot(q_e, k) for four query heads at once (rows ldq apart), each with Dot's
// own association — two partial sums, the same order — so each result is
// Dot's bit for bit: eight independent chains where Dot has two.
HWY_INLINE void Dot4(const float* HWY_RESTRICT q, size_t ldq, const float* HWY_RESTRICT k, size_t hdp,
                     float* HWY_RESTRICT out) {
    const DF df;
    const size_t N = hn::Lanes(df);
    const float *q0 = q, *q1 = q + ldq, *q2 = q + 2 * ldq, *q3 = q + 3 * ldq;
    VF a0 = hn::Zero(df), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0, d1 = a0;
    size_t i = 0;
    for (; i + 2 * N <= hdp; i += 2 * N) {
        const VF k0 = hn::LoadU(df, k + i), k1 = hn::LoadU(df, k + i + N);
        a0 = hn::MulAdd(hn::Load(df, q0 + i), k0, a0), a1 = hn::MulAdd(hn::Load(df, q0 + i + N), k1, a1);
        b0 = hn::MulAdd(hn::Load(df, q1 + i), k0, b0), b1 = hn::MulAdd(hn::Load(df, q1 + i + N), k1, b1);
        c0 = hn::MulAdd(hn::Load(df, q2 + i), k0, c0), c1 = hn::MulAdd(hn::Load(df, q2 + i + N), k1, c1);
        d0 = hn::MulAdd(hn::Load(df, q3 + i), k0, d0), d1 = hn::MulAdd(hn::Load(df, q3 + i + N), k1, d1);
    }
    if (i < hdp) {
        const VF k0 = hn::LoadU(df, k + i);
        a0 = hn::MulAdd(hn::Load(df, q0 + i), k0, a0), b0 = hn::MulAdd(hn::Load(df, q1 + i), k0, b0);
        c0 = hn::MulAdd(hn::Load(df, q2 + i), k0, c0), d0 = hn::MulAdd(hn::Load(df, q3 + i), k0, d0);
    }
    out[0] = ReduceSum(df, hn::Add(a0, a1)), out[1] = ReduceSum(df, hn::Add(b0, b1));
    out[2] = ReduceSum(df, hn::Add(c0, c1)), out[3] = ReduceSum(df, hn::Add(d0, d1));
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
    auto row_of = [&](int64_t i) {
        return static_cast<size_t>(pages[i / static_cast<int64_t>(P)]) * P + static_cast<size_t>(i) % P;
    };

    auto scratch = hwy::AllocateAligned<float>(kSplitHeads * (hdp + job.split) + 4 * hdp);
    // (Widen stores and Dot loads whole aligned vectors: the rows of hdp first.)
    float* qs = scratch.get();           // [kSplitHeads][hdp] the block's query heads, widened
    float* kb = qs + kSplitHeads * hdp;  // [4][hdp] key or value rows, widened
    float* ss = kb + 4 * hdp;            // [kSplitHeads][split] their scores, then exps
    for (int64_t j = 0; j < q_len; ++j) {
        const size_t t = static_cast<size_t>(q0 + j);
        const int64_t pos = kv_len - q_len + j;
        const int64_t seen_end = std::min(k1, pos + 1);  // keys [seen_begin, seen_end) are visible:
        // causal, and from the first key the window and the chunk leave it (the variant's mask)
        const int64_t seen_begin = std::max(k0, job.first_key(pos));
        if (seen_end <= seen_begin) {
            for (size_t hh = 0; hh < G; ++hh) {
                PagedPartial part = job.partial(t, g * G + hh, c);
                *part.m = -std::numeric_limits<float>::infinity();
                *part.l = 0.0f;
            }
            continue;
        }
        const size_t n = static_cast<size_t>(seen_end - seen_begin);
        for (size_t h0 = 0; h0 < G; h0 += kSplitHeads) {
            const size_t nh = std::min(kSplitHeads, G - h0);
            for (size_t e = 0; e < nh; ++e)
                Widen(static_cast<const TQ*>(job.q.data) + t * job.q.ld + (g * G + h0 + e) * hd, hd, hdp, qs + e * hdp);
            // s_e,i = (q_e . k_i) * scale, each key row read once for the block
            for (int64_t i = seen_begin; i < seen_end; ++i) {
                const float* k = KvRow<TKV>(job.k, job.k_lut, row_of(i), g, hd, hdp, kb);
                float* s = ss + static_cast<size_t>(i - seen_begin);
                size_t e = 0;
                for (float d4[4]; e + 4 <= nh; e += 4) {
                    Dot4(qs + e * hdp, hdp, k, hdp, d4);
                    for (size_t x = 0; x < 4; ++x) s[(e + x) * job.split] = d4[x] * scale;
                }
                for (; e < nh; ++e) s[e * job.split] = Dot(qs + e * hdp, k, hdp) * scale;
            }
            for (size_t e = 0; e < nh; ++e) {
                float* s = ss + e * job.split;
                if (job.softcap > 0) SoftCap(s, n, static_cast<float>(job.softcap));
                float m = -std::numeric_limits<float>::infinity();
                for (size_t i = 0; i < n; ++i) m = std::max(m, s[i]);
                float l = 0.0f;
                for (size_t i = 0; i < n; ++i) l += (s[i] = std::exp(s[i] - m));
                PagedPartial part = job.partial(t, g * G + h0 + e, c);
                *part.m = m;
                *part.l = l;
                // acc lives in the partial states, packed with m and l: unaligned loads and stores.
                for (size_t d = 0; d < hdp; d += N) hn::StoreU(hn::Zero(df), df, part.acc + d);
            }
            // acc_e += exp(s_e,i - m_e) v_i, each value row read once for the
            // block, four at a time: an element still adds its keys one by one
            // in order, its partial sum loaded and stored once per four keys.
            int64_t i = seen_begin;
            for (; i + 4 <= seen_end; i += 4) {
                const float* v0 = KvRow<TKV>(job.v, job.v_lut, row_of(i), g, hd, hdp, kb);
                const float* v1 = KvRow<TKV>(job.v, job.v_lut, row_of(i + 1), g, hd, hdp, kb + hdp);
                const float* v2 = KvRow<TKV>(job.v, job.v_lut, row_of(i + 2), g, hd, hdp, kb + 2 * hdp);
                const float* v3 = KvRow<TKV>(job.v, job.v_lut, row_of(i + 3), g, hd, hdp, kb + 3 * hdp);
                for (size_t e = 0; e < nh; ++e) {
                    float* acc = job.partial(t, g * G + h0 + e, c).acc;
                    const float* p = ss + e * job.split + static_cast<size_t>(i - seen_begin);
                    const VF p0 = hn::Set(df, p[0]), p1 = hn::Set(df, p[1]), p2 = hn::Set(df, p[2]), p3 = hn::Set(df, p[3]);
                    for (size_t d = 0; d < hdp; d += N) {
                        VF a = hn::MulAdd(p0, hn::LoadU(df, v0 + d), hn::LoadU(df, acc + d));
                        a = hn::MulAdd(p1, hn::LoadU(df, v1 + d), a);
                        a = hn::MulAdd(p2, hn::LoadU(df, v2 + d), a);
                        hn::StoreU(hn::MulAdd(p3, hn::LoadU(df, v3 + d), a), df, acc + d);
                    }
                }
            }
            for (; i < seen_end; ++i) {
                const float* v = KvRow<TKV>(job.v, job.v_lut, row_of(i), g, hd, hdp, kb);
                for (size_t e = 0; e < nh; ++e) {
                    float* acc = job.partial(t, g * G + h0 + e, c).acc;
                    const VF p = hn::Set(df, ss[e * job.split + static_cast<size_t>(i - seen_begin)]);
                    for (size_t d = 0; d < hdp; d += N) hn::StoreU(hn::MulAdd(p, hn::LoadU(df, v + d), hn::LoadU(df, acc + d)), df, acc + d);
                }
            }
        }
    }
}

HWY_INLINE void PagedSplit(const PagedJob& job, size_t b, size_t g, size_t c) {
    const bool f32 = job.q.elem == Elem::f32;
    if (job.k_lut) return f32 ? PagedSplitT<float, uint8_t>(job, b, g, c) : PagedSplitT<bf16, uint8_t>(job, b, g, c);
    if (f32 && job.k.elem == Elem::bf16) return PagedSplitT<float, bf16>(job, b, g, c);  // MLA's bf16 latents
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
