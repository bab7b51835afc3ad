// impls/simd/swiglu-inl.h — the SwiGLU (or GeGLU) gate, applied in the epilogue of the
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

// gelu_tanh(gate) * up in f64, the same way: F.gelu(a, approximate="tanh")
// = a * sigmoid(2 sqrt(2/pi) (a + 0.044715 a^3)), so silu's clamped form with
// a scaled argument (and no 1 + tanh cancellation for very negative a).
template <class D>
HWY_INLINE hn::Vec<D> GeluTanhTimes(D d, hn::Vec<D> a, hn::Vec<D> up) {
    const hn::Vec<D> cubic = hn::MulAdd(hn::Mul(hn::Set(d, 0.044715), a), hn::Mul(a, a), a);  // a + 0.044715 a^3
    const hn::Vec<D> z = hn::Mul(hn::Set(d, 1.5957691216057308), cubic);                    // 2 sqrt(2/pi) (...)
    const hn::Vec<D> e = hn::Exp(d, hn::Min(hn::Neg(z), hn::Set(d, 706.0)));
    return hn::Mul(hn::Div(a, hn::Add(hn::Set(d, 1.0), e)), up);
}

// out[i] = act(gate[i]) * up[i] for i < n <= 8: one panel of the fused product
// (act: silu, or gelu_tanh with kGelu).
template <bool kGelu, class TO>
HWY_INLINE void SwiGluStore(const float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, TO* HWY_RESTRICT out,
                            size_t n) {
    const DD dd;
    const DFH dfh;
    const size_t N = hn::Lanes(dd);
    for (size_t i = 0; i < n; i += N) {
        const hn::Vec<DD> g = hn::PromoteTo(dd, hn::LoadU(dfh, gate + i));
        const hn::Vec<DD> u = hn::PromoteTo(dd, hn::LoadU(dfh, up + i));
        const hn::Vec<DD> gated = kGelu ? GeluTanhTimes(dd, g, u) : SiluTimes(dd, g, u);
        StoreAny(dfh, hn::DemoteTo(dfh, gated), out + i, n - i);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
