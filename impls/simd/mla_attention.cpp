// mla_attention — DeepSeek's latent attention in the absorbed form, as
// FlashMLA and FlashInfer's MLA kernels run it, compiled per target:
//   q_abs[t, h] = [q_nope[t, h] @ w_uk_hᵀ | q_pe[t, h]]          (dc + dr)
//   o_lat[t, h] = softmax(q_abs[t, h] . [c_kv | k_pe] · scale) @ c_kv   (dc)
//   out[t, h]   = o_lat[t, h] @ w_uv_h                          (dv)
// The middle line is paged_attention's split-KV schedule (paged_attention-
// inl.h) with one kv head of dc + dr over the latent cache — MQA — whose
// keys are the cache's [c_kv | k_pe] rows and whose values are the same rows
// (FlashMLA's V = K[:, :dc]: o_lat's last dr columns are never read), its
// scale the model's (dn + dr)^-1/2 or attn_scale, never the absorbed width's.
// Everything is float32 between the steps (an engine keeps q_abs and o_lat
// in its dtype; float32 is the tighter of the two). The latent cache and
// kv_b_proj are read in the dtype they are kept in: float32, or bf16 as an
// engine serves them (widened as they are loaded: the same values, half the
// bytes).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/mla_attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "simd/common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

// a . b over n values, any n, b float32 or bf16 (widened as loaded; the
// tail through common-inl.h's partial loads, zeros past it).
template <class TW>
HWY_INLINE float DotN(const float* HWY_RESTRICT a, const TW* HWY_RESTRICT b, size_t n) {
    const DF df;
    const size_t N = hn::Lanes(df);
    VF acc = hn::Zero(df);
    for (size_t i = 0; i < n; i += N) acc = hn::MulAdd(LoadAny(df, a + i, n - i), LoadAny(df, b + i, n - i), acc);
    return ReduceSum(df, acc);
}

// Row t's head h: q_abs = [q_nope @ w_ukᵀ | q_pe]. w_uk_h[c, :] is the dn
// contiguous values of w_kv_b's row c at column h·(dn + dv).
template <class TW>
HWY_INLINE void MlaAbsorbT(const MlaJob& j, size_t t, size_t h) {
    const float* q_nope = j.q + t * j.H * (j.dn + j.dr) + h * (j.dn + j.dr);
    float* qa = j.q_abs + (t * j.H + h) * j.da;
    const TW* w = static_cast<const TW*>(j.w_kv_b.data) + h * (j.dn + j.dv);
    for (size_t c = 0; c < j.dc; ++c) qa[c] = DotN(q_nope, w + c * j.w_kv_b.ld, j.dn);
    for (size_t d = 0; d < j.dr; ++d) qa[j.dc + d] = q_nope[j.dn + d];
}
void MlaAbsorbExport(const MlaJob& j, size_t t, size_t h) {
    if (j.w_kv_b.elem == Elem::f32) return MlaAbsorbT<float>(j, t, h);
    MlaAbsorbT<bf16>(j, t, h);
}

// Row t's head h: out = o_lat[:dc] @ w_uv_h, w_uv_h[c, :] the dv contiguous
// values of w_kv_b's row c after its head's dn keys.
template <class TW>
HWY_INLINE void MlaProjectT(const MlaJob& j, size_t t, size_t h) {
    const DF df;
    const size_t N = hn::Lanes(df);
    const float* ol = j.o_lat + (t * j.H + h) * j.da;
    float* o = j.out + t * j.H * j.dv + h * j.dv;
    const TW* w = static_cast<const TW*>(j.w_kv_b.data) + h * (j.dn + j.dv) + j.dn;
    for (size_t d = 0; d < j.dv; ++d) o[d] = 0.0f;
    for (size_t c = 0; c < j.dc; ++c) {
        const VF p = hn::Set(df, ol[c]);
        const TW* uv = w + c * j.w_kv_b.ld;
        for (size_t d = 0; d < j.dv; d += N)
            StoreAny(df, hn::MulAdd(p, LoadAny(df, uv + d, j.dv - d), LoadAny(df, o + d, j.dv - d)), o + d, j.dv - d);
    }
}
void MlaProjectExport(const MlaJob& j, size_t t, size_t h) {
    if (j.w_kv_b.elem == Elem::f32) return MlaProjectT<float>(j, t, h);
    MlaProjectT<bf16>(j, t, h);
}

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <cmath>
#include <vector>

#include "simd/dispatch.h"
#include "simd/ops.h"

namespace conform::simd {

HWY_EXPORT(MlaAbsorbExport);
HWY_EXPORT(MlaProjectExport);

void mla_latents(ThreadPool& pool, const float* ckv, const float* kpe, size_t rows, size_t dc, size_t dr, Elem e,
                 Buffer& latents) {
    const size_t da = dc + dr;
    latents.resize(e, rows, da);
    pool.RunRanges(rows, [&](size_t r0, size_t r1, int) {
        for (size_t r = r0; r < r1; ++r) {
            if (e == Elem::f32) {
                float* row = static_cast<float*>(latents.data()) + r * da;
                std::copy_n(ckv + r * dc, dc, row);
                std::copy_n(kpe + r * dr, dr, row + dc);
            } else {  // the dtype's values already: exact
                bf16* row = static_cast<bf16*>(latents.data()) + r * da;
                for (size_t c = 0; c < dc; ++c) row[c] = to_bf16(ckv[r * dc + c]);
                for (size_t d = 0; d < dr; ++d) row[dc + d] = to_bf16(kpe[r * dr + d]);
            }
        }
    });
}

void mla_attention(ThreadPool& pool, Target t, MlaJob& j, const CRows& latents, const PagedJob& shape, float* lse) {
    const size_t TH = j.T * j.H;
    std::vector<float> q_abs(TH * j.da), o_lat(TH * j.da);
    j.q_abs = q_abs.data();
    j.o_lat = o_lat.data();
    pool.Run(TH, [&](size_t i, int) { CONFORM_DISPATCH(t, MlaAbsorbExport)(j, i / j.H, i % j.H); });
    PagedJob job = shape;
    job.q = {q_abs.data(), j.H * j.da, Elem::f32};
    job.k = latents;  // float32 or bf16 rows, widened as the split reads them
    job.v = job.k;  // the values are the latents themselves: o_lat[:, :dc] is their weighted sum
    job.out = {o_lat.data(), j.H * j.da, Elem::f32};
    job.KV = 1;
    job.hd = j.da;
    job.scale = j.scale;  // the model's scale, whatever width the dot products run over
    paged_attention(pool, t, job, lse);
    pool.Run(TH, [&](size_t i, int) { CONFORM_DISPATCH(t, MlaProjectExport)(j, i / j.H, i % j.H); });
}

}  // namespace conform::simd
#endif  // HWY_ONCE
