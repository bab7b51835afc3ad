// impls/simd/swiglu-inl.h — the SwiGLU gate, applied in the epilogue of the
// fused gate/up product (matmul-inl.h): the gate and up sums of a tile never
// leave registers and cache before they are combined.
#include <cstddef>

#if defined(CONFORM_SIMD_SWIGLU_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef CONFORM_SIMD_SWIGLU_INL_H_
#undef CONFORM_SIMD_SWIGLU_INL_H_
#else
#define CONFORM_SIMD_SWIGLU_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "simd/common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

// silu(gate) * up in f64, rounded once: the gated value is then as exact as
// its two sums allow. (In f32, Highway's Exp is within a few ulp and torch's
// silu within one or two; with no FMA (SSE4, scalar) the gate and up sums
// round exactly as the reference's sequential baseline does, so the silu
// evaluation would be the one difference — and at small widths the down
// product's cancellation turns a few ulp of g into more than the sampled
// baselines allow.) Highway's Exp is valid on [-DBL_MAX, 706]; -a is clamped
// to 706, where exp is already past f32 range: a very negative gate gives
// a / huge = -0 after rounding, the limit. It costs one f64 exp per gated
// element — T*F of them against T*F*D multiply-adds in the product.
template <class D>
HWY_INLINE hn::Vec<D> SiluTimes(D d, hn::Vec<D> a, hn::Vec<D> up) {
    const hn::Vec<D> e = hn::Exp(d, hn::Min(hn::Neg(a), hn::Set(d, 706.0)));
    return hn::Mul(hn::Div(a, hn::Add(hn::Set(d, 1.0), e)), up);
}

// out[i] = silu(gate[i]) * up[i] for i < n <= 8: one panel of the fused product.
template <class TO>
HWY_INLINE void SwiGluStore(const float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, TO* HWY_RESTRICT out,
                            size_t n) {
    const DD dd;
    const DFH dfh;
    const size_t N = hn::Lanes(dd);
    for (size_t i = 0; i < n; i += N) {
        const hn::Vec<DD> g = hn::PromoteTo(dd, hn::LoadU(dfh, gate + i));
        const hn::Vec<DD> u = hn::PromoteTo(dd, hn::LoadU(dfh, up + i));
        StoreAny(dfh, hn::DemoteTo(dfh, SiluTimes(dd, g, u)), out + i, n - i);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
