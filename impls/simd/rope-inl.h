// impls/simd/rope-inl.h — RoPE from a precomputed table, and the block's fused
// QK-norm + RoPE + cache write.
//
// The table row of a token (rope_table.h) holds cos[rd] and sin[rd] expanded
// per lane, so both layouts are one expression, out = x * cos + partner * sin:
//   neox:        partner of j is j +- rd/2: the other half, a plain load;
//   interleaved: partner of 2i is 2i+1 and back: Reverse2 of the same vector.
// Dims [rd, hd) of a head (partial rotary) are copied.
#include <cstddef>

#if defined(CONFORM_SIMD_ROPE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef CONFORM_SIMD_ROPE_INL_H_
#undef CONFORM_SIMD_ROPE_INL_H_
#else
#define CONFORM_SIMD_ROPE_INL_H_
#endif

#include <hwy/highway.h>

#include "simd/common-inl.h"
#include "simd/rmsnorm-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

// The dims RoPE leaves alone (partial rotary): out[j] = x[j], j in [rd, hd).
template <class TX, class TO>
HWY_INLINE void PassThrough(const TX* x, size_t rd, size_t hd, TO* out) {
    for (size_t j = rd; j < hd; ++j) out[j] = FromF32<TO>(ToF32(x[j]));
}

// One head: out[j] = x[j] * cs[j] + x[partner(j)] * sn[j] over the first hd
// (here: the rotary) dims. Reads all of x before writing, per vector pair, so
// out may alias x.
template <class TX, class TO>
HWY_INLINE void RotateHead(const TX* x, const float* HWY_RESTRICT cs, const float* HWY_RESTRICT sn,
                           size_t hd, RopeLayout layout, TO* out) {
    const DF df;
    const size_t N = hn::Lanes(df);
    if (layout == RopeLayout::neox) {
        const size_t half = hd / 2;
        for (size_t j = 0; j < half; j += N) {
            const size_t left = half - j;
            const VF lo = LoadAny(df, x + j, left), hi = LoadAny(df, x + half + j, left);
            const VF out_lo = hn::MulAdd(hi, LoadAny(df, sn + j, left), hn::Mul(lo, LoadAny(df, cs + j, left)));
            const VF out_hi =
                hn::MulAdd(lo, LoadAny(df, sn + half + j, left), hn::Mul(hi, LoadAny(df, cs + half + j, left)));
            StoreAny(df, out_lo, out + j, left);
            StoreAny(df, out_hi, out + half + j, left);
        }
        return;
    }
    if constexpr (hn::MaxLanes(DF()) == 1) {
        // One lane: pairs span two vectors.
        for (size_t j = 0; j < hd; j += 2) {
            const float a = ToF32(x[j]), b = ToF32(x[j + 1]);
            out[j] = FromF32<TO>(a * cs[j] + b * sn[j]);
            out[j + 1] = FromF32<TO>(b * cs[j + 1] + a * sn[j + 1]);
        }
    } else {
        // Lanes(df) is even, so a vector (or a partial one: hd is even) holds whole pairs.
        for (size_t j = 0; j < hd; j += N) {
            const size_t left = hd - j;
            const VF v = LoadAny(df, x + j, left);
            const VF r = hn::MulAdd(hn::Reverse2(df, v), LoadAny(df, sn + j, left), hn::Mul(v, LoadAny(df, cs + j, left)));
            StoreAny(df, r, out + j, left);
        }
    }
}

template <class TX, class TO>
HWY_INLINE void RopeRowsT(CRows x, size_t n_heads, const RopeRows& table, MRows out, size_t r0, size_t r1) {
    const size_t hd = table.hd, rd = table.rd;
    for (size_t r = r0; r < r1; ++r) {
        const float* cs = table.rows[r];
        const TX* xr = static_cast<const TX*>(x.data) + r * x.ld;
        TO* orow = static_cast<TO*>(out.data) + r * out.ld;
        for (size_t h = 0; h < n_heads; ++h) {
            RotateHead(xr + h * hd, cs, cs + rd, rd, table.layout, orow + h * hd);
            PassThrough(xr + h * hd, rd, hd, orow + h * hd);
        }
    }
}

HWY_INLINE void RopeRowsAny(CRows x, size_t n_heads, const RopeRows& table, MRows out, size_t r0, size_t r1) {
    if (x.elem == Elem::f32 && out.elem == Elem::f32) return RopeRowsT<float, float>(x, n_heads, table, out, r0, r1);
    if (x.elem == Elem::f32) return RopeRowsT<float, bf16>(x, n_heads, table, out, r0, r1);
    if (out.elem == Elem::f32) return RopeRowsT<bf16, float>(x, n_heads, table, out, r0, r1);
    RopeRowsT<bf16, bf16>(x, n_heads, table, out, r0, r1);
}

// A head QK-normed (when w) and rotated, in one pass: the normalised values
// stay in f32 on the stack between the two.
template <class T>
HWY_INLINE void NormRotateHead(const T* HWY_RESTRICT x, const float* w, float eps, const float* cs, size_t hd,
                               size_t rd, RopeLayout layout, T* HWY_RESTRICT out) {
    if (!w) {
        RotateHead(x, cs, cs + rd, rd, layout, out);
        return PassThrough(x, rd, hd, out);
    }
    HWY_ALIGN float normed[kMaxHeadDim];
    RmsNormRow(x, w, hd, eps, normed);
    RotateHead(static_cast<const float*>(normed), cs, cs + rd, rd, layout, out);
    PassThrough(static_cast<const float*>(normed), rd, hd, out);
}

template <class T>
HWY_INLINE void QkvRopeRowsT(const kern::QkvRope& j, size_t r0, size_t r1) {
    const size_t hd = j.table.hd, rd = j.table.rd, Q = j.H * hd, KVW = j.KV * hd;
    for (size_t r = r0; r < r1; ++r) {
        const T* row = static_cast<const T*>(j.qkv.data) + r * j.qkv.ld;  // [q | k | v]
        const float* cs = j.table.rows[r];
        T* q = static_cast<T*>(j.q_rot.data) + r * j.q_rot.ld;
        T* k = static_cast<T*>(j.k_rot.data) + r * j.k_rot.ld;
        T* v = static_cast<T*>(j.v.data) + r * j.v.ld;
        for (size_t h = 0; h < j.H; ++h)
            NormRotateHead(row + h * hd, j.q_norm, j.eps, cs, hd, rd, j.table.layout, q + h * hd);
        for (size_t g = 0; g < j.KV; ++g)
            NormRotateHead(row + Q + g * hd, j.k_norm, j.eps, cs, hd, rd, j.table.layout, k + g * hd);
        std::memcpy(v, row + Q + KVW, KVW * sizeof(T));
    }
}

HWY_INLINE void QkvRopeRows(const kern::QkvRope& j, size_t r0, size_t r1) {
    if (j.qkv.elem == Elem::f32)
        QkvRopeRowsT<float>(j, r0, r1);
    else
        QkvRopeRowsT<bf16>(j, r0, r1);
}

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
