// impls/simd/common-inl.h — per-target helpers shared by the kernels: loads
// and stores of f32 / bf16 memory as f32 vectors, partial vectors, reductions.
//
// Tails: Highway 1.0.3 has no LoadN/StoreN, and its MaskedLoad on SSE4 and
// SCALAR is IfThenElseZero(m, Load(d, p)) — an aligned full-vector load that
// faults on an unaligned row and reads past its end. Partial vectors
// therefore go through an aligned stack buffer (LoadPartial/StorePartial);
// they occur only at the end of a row whose width is not a multiple of the
// vector, never in the inner loops at real model widths.

#include <cmath>
#include <cstddef>

// Per-target include guard (toggled by foreach_target).
#if defined(CONFORM_SIMD_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef CONFORM_SIMD_COMMON_INL_H_
#undef CONFORM_SIMD_COMMON_INL_H_
#else
#define CONFORM_SIMD_COMMON_INL_H_
#endif

#include <hwy/highway.h>

#include "simd/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Upper bound on lanes, usable as an array size on every target.
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

HWY_INLINE float ToF32(float x) { return x; }
HWY_INLINE float ToF32(bf16 x) { return hwy::F32FromBF16(x); }
template <class T>
HWY_INLINE T FromF32(float x);
template <>
HWY_INLINE float FromF32<float>(float x) {
    return x;
}
template <>
HWY_INLINE bf16 FromF32<bf16>(float x) {
    return to_bf16(x);
}

// Lanes(d) floats from f32 or bf16 memory.
template <class D>
HWY_INLINE hn::Vec<D> LoadF(D d, const float* HWY_RESTRICT p) {
    return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadF(D d, const bf16* HWY_RESTRICT p) {
    const hn::Rebind<bf16, D> dbf;
    return hn::PromoteTo(d, hn::LoadU(dbf, p));
}

template <class D>
HWY_INLINE void StoreF(D d, hn::Vec<D> v, float* HWY_RESTRICT p) {
    hn::StoreU(v, d, p);
}
// Round to nearest even, NaN kept quiet (see to_bf16).
template <class D>
HWY_INLINE void StoreF(D /* d */, hn::Vec<D> v, bf16* HWY_RESTRICT p) {
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const hn::Rebind<uint16_t, D> du16;
    const hn::Rebind<bf16, D> dbf;
    const auto bits = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
    auto hi = hn::ShiftRight<16>(hn::Add(bits, hn::Add(lsb, hn::Set(du, 0x7FFFu))));
    const auto nan = hn::RebindMask(du, hn::IsNaN(v));
    hi = hn::IfThenElse(nan, hn::Or(hn::ShiftRight<16>(bits), hn::Set(du, 0x40u)), hi);
    hn::StoreU(hn::BitCast(dbf, hn::DemoteTo(du16, hn::BitCast(di, hi))), dbf, p);
}

// The first n < Lanes(d) elements; the other lanes are zero.
template <class D, class T>
HWY_INLINE hn::Vec<D> LoadPartial(D d, const T* HWY_RESTRICT p, size_t n) {
    HWY_ALIGN float buf[kMaxLanes] = {};
    for (size_t i = 0; i < n; ++i) buf[i] = ToF32(p[i]);
    return hn::Load(d, buf);
}
template <class D, class T>
HWY_INLINE void StorePartial(D d, hn::Vec<D> v, T* HWY_RESTRICT p, size_t n) {
    HWY_ALIGN float buf[kMaxLanes];
    hn::Store(v, d, buf);
    for (size_t i = 0; i < n; ++i) p[i] = FromF32<T>(buf[i]);
}

// Either, by how many elements remain.
template <class D, class T>
HWY_INLINE hn::Vec<D> LoadAny(D d, const T* HWY_RESTRICT p, size_t n) {
    return n >= hn::Lanes(d) ? LoadF(d, p) : LoadPartial(d, p, n);
}
template <class D, class T>
HWY_INLINE void StoreAny(D d, hn::Vec<D> v, T* HWY_RESTRICT p, size_t n) {
    if (n >= hn::Lanes(d))
        StoreF(d, v, p);
    else
        StorePartial(d, v, p, n);
}

template <class D>
HWY_INLINE float ReduceSum(D d, hn::Vec<D> v) {
    return hn::GetLane(hn::SumOfLanes(d, v));
}

// Norms accumulate the sum of squares in f64 (half-width float vectors
// widened to double): the sum is then exact to well below f32 rounding, so the
// norm's error is the output's own rounding whatever the width or summation
// order, instead of an order-dependent f32 sum that on a row dominated by one
// outlier channel can land a few ulp from the truth. Norms are bound by
// memory, not arithmetic, so the wider accumulator costs nothing measurable.
using DD = hn::ScalableTag<double>;
using DFH = hn::Rebind<float, DD>;  // as many floats as DD has doubles

template <class T>
HWY_INLINE hn::Vec<DD> Square64(const T* HWY_RESTRICT x, size_t left, hn::Vec<DD> acc) {
    const DD dd;
    const DFH dfh;
    const hn::Vec<DD> v = hn::PromoteTo(dd, LoadAny(dfh, x, left));
    return hn::MulAdd(v, v, acc);
}

template <class T>
HWY_INLINE double SumOfSquares(const T* HWY_RESTRICT x, size_t n) {
    const DD dd;
    const size_t N = hn::Lanes(dd);
    hn::Vec<DD> s0 = hn::Zero(dd), s1 = hn::Zero(dd);
    size_t i = 0;
    for (; i + 2 * N <= n; i += 2 * N) {
        s0 = Square64(x + i, N, s0);
        s1 = Square64(x + i + N, N, s1);
    }
    for (; i < n; i += N) s0 = Square64(x + i, n - i, s0);
    return hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
}

// 1 / sqrt(ss / n + eps) in f64 — never an approximate reciprocal-sqrt
// instruction, whose 12-bit result would dominate the error.
HWY_INLINE double InvRms(double ss, size_t n, float eps) {
    return 1.0 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(eps));
}

// out[i] = x[i] * inv * w[i] in f64, rounded once to the output: within half
// an ulp of the exact norm. (Three f32 roundings, as the reference does them,
// reach 1.5 ulp; on a handful of elements that can exceed a tolerance whose
// floor is sampled from those same few elements.)
template <class TX, class TO>
HWY_INLINE void ScaleRow(const TX* HWY_RESTRICT x, double inv, const float* HWY_RESTRICT w, TO* HWY_RESTRICT out,
                         size_t n) {
    const DD dd;
    const DFH dfh;
    const size_t N = hn::Lanes(dd);
    const hn::Vec<DD> vinv = hn::Set(dd, inv);
    for (size_t i = 0; i < n; i += N) {
        const size_t left = n - i;
        const hn::Vec<DD> xv = hn::PromoteTo(dd, LoadAny(dfh, x + i, left));
        const hn::Vec<DD> wv = hn::PromoteTo(dd, LoadAny(dfh, w + i, left));
        StoreAny(dfh, hn::DemoteTo(dfh, hn::Mul(hn::Mul(xv, vinv), wv)), out + i, left);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
