// impls/simd/attention-inl.h — causal-by-position GQA attention with an online
// softmax (FlashAttention's recurrence, on the CPU).
//
// One work item is (token t, kv head g) with all G = H / KV query heads of the
// group: keys and values are read by index (query head h uses kv head h / G,
// nothing is repeated) and each key/value row is widened to f32 once per block
// for the whole group — a decode step reads the cache once.
//
// Keys go in blocks of kKeyBlock. For each query head, with running max m,
// running sum l and running output acc:
//   s_j   = (q . k_j) * scale                       visible keys only
//   m'    = max(m, max_j s_j);   c = exp(m - m')    (m = -inf at the start: c = 0)
//   p_j   = exp(s_j - m')
//   l     = l * c + sum_j p_j;   acc = acc * c + sum_j p_j v_j
//   out   = acc / l, or zeros when no key was visible (the contract's empty softmax)
// Invisible keys are skipped, never given -inf scores that could meet another
// -inf. A token's result depends only on its own query and the keys, in a
// fixed block order, so decode reproduces the block's rows bit for bit.
#include <cmath>
#include <cstddef>
#include <limits>

#if defined(CONFORM_SIMD_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef CONFORM_SIMD_ATTENTION_INL_H_
#undef CONFORM_SIMD_ATTENTION_INL_H_
#else
#define CONFORM_SIMD_ATTENTION_INL_H_
#endif

#include <hwy/aligned_allocator.h>
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "simd/common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

constexpr size_t kKeyBlock = 16;

// head_dim rounded up to whole vectors; the padding lanes hold zeros.
HWY_INLINE size_t PaddedHeadDim(size_t hd) {
    const size_t N = hn::Lanes(DF());
    return (hd + N - 1) / N * N;
}

// hd values of a row as f32, zero-padded to hdp.
template <class T>
HWY_INLINE void Widen(const T* HWY_RESTRICT src, size_t hd, size_t hdp, float* HWY_RESTRICT dst) {
    const DF df;
    const size_t N = hn::Lanes(df);
    for (size_t i = 0; i < hdp; i += N) hn::Store(i < hd ? LoadAny(df, src + i, hd - i) : hn::Zero(df), df, dst + i);
}

HWY_INLINE float Dot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, size_t hdp) {
    const DF df;
    const size_t N = hn::Lanes(df);
    VF s0 = hn::Zero(df), s1 = hn::Zero(df);
    size_t i = 0;
    for (; i + 2 * N <= hdp; i += 2 * N) {
        s0 = hn::MulAdd(hn::Load(df, a + i), hn::LoadU(df, b + i), s0);
        s1 = hn::MulAdd(hn::Load(df, a + i + N), hn::LoadU(df, b + i + N), s1);
    }
    if (i < hdp) s0 = hn::MulAdd(hn::Load(df, a + i), hn::LoadU(df, b + i), s0);
    return ReduceSum(df, hn::Add(s0, s1));
}

// A key or value row as hdp f32: the cache row itself when it already is
// (f32, whole vectors), else widened into `scratch`.
template <class T>
HWY_INLINE const float* RowF32(const T* HWY_RESTRICT src, size_t hd, size_t hdp, float* HWY_RESTRICT scratch) {
    if constexpr (hwy::IsSame<T, float>()) {
        if (hd == hdp) return src;
    }
    Widen(src, hd, hdp, scratch);
    return scratch;
}

// Gemma 2's soft-cap, in place on n scores: s = cap * tanh(s / cap)
// (Highway's Tanh, within 4 ulps; the a-priori bound allows that many).
HWY_INLINE void SoftCap(float* s, size_t n, float cap) {
    const DF df;
    const size_t N = hn::Lanes(df);
    const VF vc = hn::Set(df, cap);
    for (size_t i = 0; i < n; i += N) {
        const size_t left = n - i;
        StoreAny(df, hn::Mul(vc, hn::Tanh(df, hn::Div(LoadAny(df, s + i, left), vc))), s + i, left);
    }
}

template <class TQ, class TKV, class TO>
HWY_INLINE void AttentionItemsT(const Attn& job, size_t i0, size_t i1) {
    const DF df;
    const size_t N = hn::Lanes(df);
    const size_t hd = job.hd, hdp = PaddedHeadDim(hd);
    const size_t G = job.H / job.KV;
    const float scale = static_cast<float>(job.score_scale(static_cast<int64_t>(job.hd)));  // attn_scale, or 1 / sqrt(hd)
    const float neg_inf = -std::numeric_limits<float>::infinity();

    // Scratch, [G][hdp] for q and acc, [kKeyBlock][hdp] for k and v, [G][kKeyBlock] for s / p.
    auto scratch = hwy::AllocateAligned<float>(2 * G * hdp + 2 * kKeyBlock * hdp + G * kKeyBlock + 2 * G);
    float* q = scratch.get();
    float* acc = q + G * hdp;
    float* kb = acc + G * hdp;
    float* vb = kb + kKeyBlock * hdp;
    float* s = vb + kKeyBlock * hdp;
    float* m = s + G * kKeyBlock;
    float* l = m + G;

    for (size_t item = i0; item < i1; ++item) {
        const size_t t = item / job.KV, g = item % job.KV;
        const int64_t qpos = job.q_pos[t];
        const TQ* qrow = static_cast<const TQ*>(job.q.data) + t * job.q.ld + g * G * hd;
        for (size_t h = 0; h < G; ++h) {
            Widen(qrow + h * hd, hd, hdp, q + h * hdp);
            for (size_t i = 0; i < hdp; i += N) hn::Store(hn::Zero(df), df, acc + h * hdp + i);
            // A sink (gpt-oss) is the online softmax's state before any key:
            // max = sink, sum = exp(0), no value. Without one, the empty state.
            const bool sunk = job.sinks != nullptr;
            m[h] = sunk ? job.sinks[g * G + h] : neg_inf;
            l[h] = sunk ? 1.0f : 0.0f;
        }

        for (size_t j0 = 0; j0 < job.S; j0 += kKeyBlock) {
            const size_t jn = std::min(kKeyBlock, job.S - j0);
            size_t vis[kKeyBlock];  // indices (within the block) of visible keys, ascending
            size_t nvis = 0;
            for (size_t jj = 0; jj < jn; ++jj)
                if (job.visible(job.k_pos[j0 + jj], qpos)) vis[nvis++] = jj;  // causal, window, chunk
            if (nvis == 0) continue;

            const float* krow[kKeyBlock];
            const float* vrow[kKeyBlock];
            for (size_t n = 0; n < nvis; ++n) {
                const size_t row = j0 + vis[n];
                krow[n] = RowF32(static_cast<const TKV*>(job.k.data) + row * job.k.ld + g * hd, hd, hdp, kb + n * hdp);
                vrow[n] = RowF32(static_cast<const TKV*>(job.v.data) + row * job.v.ld + g * hd, hd, hdp, vb + n * hdp);
            }

            for (size_t h = 0; h < G; ++h) {
                float* sh = s + h * kKeyBlock;
                float block_max = neg_inf;
                for (size_t n = 0; n < nvis; ++n) sh[n] = Dot(q + h * hdp, krow[n], hdp) * scale;
                if (job.softcap > 0) SoftCap(sh, nvis, static_cast<float>(job.softcap));  // before the softmax; masked keys never enter
                for (size_t n = 0; n < nvis; ++n) block_max = std::max(block_max, sh[n]);
                const float m_new = std::max(m[h], block_max);
                const float c = std::exp(m[h] - m_new);  // m[h] = -inf: exp(-inf) = 0
                // p_j = exp(s_j - m'), in place; the lanes past nvis are not summed.
                for (size_t n = 0; n < nvis; n += N) {
                    const size_t left = nvis - n;
                    const VF e = hn::Exp(df, hn::Sub(LoadAny(df, sh + n, left), hn::Set(df, m_new)));
                    StoreAny(df, e, sh + n, left);
                }
                float psum = 0.0f;
                for (size_t n = 0; n < nvis; ++n) psum += sh[n];
                l[h] = l[h] * c + psum;
                m[h] = m_new;

                float* ah = acc + h * hdp;
                const VF vc = hn::Set(df, c);
                for (size_t i = 0; i < hdp; i += N) {
                    VF a = hn::Mul(hn::Load(df, ah + i), vc);
                    for (size_t n = 0; n < nvis; ++n) a = hn::MulAdd(hn::Set(df, sh[n]), hn::LoadU(df, vrow[n] + i), a);
                    hn::Store(a, df, ah + i);
                }
            }
        }

        TO* orow = static_cast<TO*>(job.out.data) + t * job.out.ld + g * G * hd;
        for (size_t h = 0; h < G; ++h) {
            const float* ah = acc + h * hdp;
            TO* oh = orow + h * hd;
            if (l[h] == 0.0f) {
                for (size_t i = 0; i < hd; i += N) StoreAny(df, hn::Zero(df), oh + i, hd - i);
                continue;
            }
            const VF vl = hn::Set(df, l[h]);
            for (size_t i = 0; i < hd; i += N) StoreAny(df, hn::Div(hn::Load(df, ah + i), vl), oh + i, hd - i);
        }
    }
}

HWY_INLINE void AttentionItems(const Attn& job, size_t i0, size_t i1) {
    if (job.q.elem == Elem::f32) return AttentionItemsT<float, float, float>(job, i0, i1);
    AttentionItemsT<bf16, bf16, bf16>(job, i0, i1);
}

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
