// impls/simd/qk_norm-inl.h — Qwen3's per-head RMSNorm of q and k.
#include <cstddef>

#if defined(CONFORM_SIMD_QK_NORM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef CONFORM_SIMD_QK_NORM_INL_H_
#undef CONFORM_SIMD_QK_NORM_INL_H_
#else
#define CONFORM_SIMD_QK_NORM_INL_H_
#endif

#include <hwy/highway.h>

#include "simd/common-inl.h"
#include "simd/rmsnorm-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

// Every head_dim slice of a row normalised on its own, all with w[hd].
template <class TX, class TO>
HWY_INLINE void QkNormRowsT(CRows x, size_t n_heads, size_t hd, const float* w, float eps, MRows out, size_t r0,
                            size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
        const TX* xr = static_cast<const TX*>(x.data) + r * x.ld;
        TO* orow = static_cast<TO*>(out.data) + r * out.ld;
        for (size_t h = 0; h < n_heads; ++h) RmsNormRow(xr + h * hd, w, hd, eps, orow + h * hd);
    }
}

HWY_INLINE void QkNormRows(CRows x, size_t n_heads, size_t hd, const float* w, float eps, MRows out, size_t r0,
                           size_t r1) {
    if (x.elem == Elem::f32 && out.elem == Elem::f32)
        return QkNormRowsT<float, float>(x, n_heads, hd, w, eps, out, r0, r1);
    if (x.elem == Elem::f32) return QkNormRowsT<float, bf16>(x, n_heads, hd, w, eps, out, r0, r1);
    if (out.elem == Elem::f32) return QkNormRowsT<bf16, float>(x, n_heads, hd, w, eps, out, r0, r1);
    QkNormRowsT<bf16, bf16>(x, n_heads, hd, w, eps, out, r0, r1);
}

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
