// impls/simd/rmsnorm-inl.h — RMSNorm, alone and fused with the residual add.
#include <cstddef>

#if defined(CONFORM_SIMD_RMSNORM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef CONFORM_SIMD_RMSNORM_INL_H_
#undef CONFORM_SIMD_RMSNORM_INL_H_
#else
#define CONFORM_SIMD_RMSNORM_INL_H_
#endif

#include <hwy/highway.h>

#include "simd/common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

// out = x * (1 / sqrt(mean(x^2) + eps)) * w   (eps inside the sqrt, HF/Meta)
template <class TX, class TO>
HWY_INLINE void RmsNormRow(const TX* HWY_RESTRICT x, const float* HWY_RESTRICT w, size_t n, float eps,
                           TO* HWY_RESTRICT out) {
    ScaleRow(x, InvRms(SumOfSquares(x, n), n, eps), w, out, n);
}

template <class TX, class TO>
HWY_INLINE void RmsNormRowsT(CRows x, const float* w, size_t D, float eps, MRows out, size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r)
        RmsNormRow(static_cast<const TX*>(x.data) + r * x.ld, w, D, eps, static_cast<TO*>(out.data) + r * out.ld);
}

HWY_INLINE void RmsNormRows(CRows x, const float* w, size_t D, float eps, MRows out, size_t r0, size_t r1) {
    if (x.elem == Elem::f32 && out.elem == Elem::f32) return RmsNormRowsT<float, float>(x, w, D, eps, out, r0, r1);
    if (x.elem == Elem::f32) return RmsNormRowsT<float, bf16>(x, w, D, eps, out, r0, r1);
    if (out.elem == Elem::f32) return RmsNormRowsT<bf16, float>(x, w, D, eps, out, r0, r1);
    RmsNormRowsT<bf16, bf16>(x, w, D, eps, out, r0, r1);
}

// h = r + d and the sum of squares of h in one pass, then n = h * inv_rms * w
// from the row just written (still in L1). h is the residual stream and stays
// f32 in every storage mode (engine.h). Half-width vectors, so each sum
// widens to f64 directly (see SumOfSquares).
template <class T>
HWY_INLINE void AddRmsNormRow(const T* HWY_RESTRICT r, const T* HWY_RESTRICT d, float* HWY_RESTRICT h,
                              const float* HWY_RESTRICT w, size_t n, float eps, T* HWY_RESTRICT out) {
    const DD dd;
    const DFH dfh;
    const size_t N = hn::Lanes(dfh);
    hn::Vec<DD> s0 = hn::Zero(dd), s1 = hn::Zero(dd);
    size_t i = 0;
    for (; i + 2 * N <= n; i += 2 * N) {
        const hn::Vec<DFH> a = hn::Add(LoadF(dfh, r + i), LoadF(dfh, d + i));
        const hn::Vec<DFH> b = hn::Add(LoadF(dfh, r + i + N), LoadF(dfh, d + i + N));
        StoreF(dfh, a, h + i);
        StoreF(dfh, b, h + i + N);
        const hn::Vec<DD> a64 = hn::PromoteTo(dd, a), b64 = hn::PromoteTo(dd, b);
        s0 = hn::MulAdd(a64, a64, s0);
        s1 = hn::MulAdd(b64, b64, s1);
    }
    for (; i < n; i += N) {
        const size_t left = n - i;
        const hn::Vec<DFH> a = hn::Add(LoadAny(dfh, r + i, left), LoadAny(dfh, d + i, left));
        StoreAny(dfh, a, h + i, left);
        const hn::Vec<DD> a64 = hn::PromoteTo(dd, a);
        s0 = hn::MulAdd(a64, a64, s0);
    }
    const double ss = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
    ScaleRow(h, InvRms(ss, n, eps), w, out, n);
}

HWY_INLINE void AddRmsNormRows(CRows r, CRows d, MRows h, const float* w, size_t D, float eps, MRows out,
                               size_t r0, size_t r1) {
    for (size_t t = r0; t < r1; ++t) {
        float* ht = static_cast<float*>(h.data) + t * h.ld;
        if (r.elem == Elem::f32) {
            AddRmsNormRow(static_cast<const float*>(r.data) + t * r.ld, static_cast<const float*>(d.data) + t * d.ld,
                          ht, w, D, eps, static_cast<float*>(out.data) + t * out.ld);
        } else {
            AddRmsNormRow(static_cast<const bf16*>(r.data) + t * r.ld, static_cast<const bf16*>(d.data) + t * d.ld,
                          ht, w, D, eps, static_cast<bf16*>(out.data) + t * out.ld);
        }
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
