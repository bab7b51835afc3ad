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
// in its dtype; float32 is the tighter of the two).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/mla_attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "simd/common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

// a . b over n floats, any n (the tail through common-inl.h's partial loads, zeros past it).
HWY_INLINE float DotN(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, size_t n) {
    const DF df;
    const size_t N = hn::Lanes(df);
    VF acc = hn::Zero(df);
    size_t i = 0;
    for (; i + N <= n; i += N) acc = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), acc);
    if (i < n) acc = hn::MulAdd(LoadPartial(df, a + i, n - i), LoadPartial(df, b + i, n - i), acc);
    return ReduceSum(df, acc);
}

// Row t's head h: q_abs = [q_nope @ w_ukᵀ | q_pe]. w_uk_h[c, :] is the dn
// contiguous values of w_kv_b's row c at column h·(dn + dv).
void MlaAbsorbExport(const MlaJob& j, size_t t, size_t h) {
    const float* q_nope = j.q + t * j.H * (j.dn + j.dr) + h * (j.dn + j.dr);
    float* qa = j.q_abs + (t * j.H + h) * j.da;
    for (size_t c = 0; c < j.dc; ++c) qa[c] = DotN(q_nope, j.w_kv_b + c * j.ld_w + h * (j.dn + j.dv), j.dn);
    for (size_t d = 0; d < j.dr; ++d) qa[j.dc + d] = q_nope[j.dn + d];
}

// Row t's head h: out = o_lat[:dc] @ w_uv_h, w_uv_h[c, :] the dv contiguous
// values of w_kv_b's row c after its head's dn keys.
void MlaProjectExport(const MlaJob& j, size_t t, size_t h) {
    const DF df;
    const size_t N = hn::Lanes(df);
    const float* ol = j.o_lat + (t * j.H + h) * j.da;
    float* o = j.out + t * j.H * j.dv + h * j.dv;
    for (size_t d = 0; d < j.dv; ++d) o[d] = 0.0f;
    for (size_t c = 0; c < j.dc; ++c) {
        const VF w = hn::Set(df, ol[c]);
        const float* uv = j.w_kv_b + c * j.ld_w + h * (j.dn + j.dv) + j.dn;
        size_t d = 0;
        for (; d + N <= j.dv; d += N) hn::StoreU(hn::MulAdd(w, hn::LoadU(df, uv + d), hn::LoadU(df, o + d)), df, o + d);
        if (d < j.dv) {
            const size_t n = j.dv - d;
            StorePartial(df, hn::MulAdd(w, LoadPartial(df, uv + d, n), LoadPartial(df, o + d, n)), o + d, n);
        }
    }
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

void mla_latents(ThreadPool& pool, const float* ckv, const float* kpe, size_t rows, size_t dc, size_t dr,
                 std::vector<float>& latents) {
    latents.resize(rows * (dc + dr));
    pool.RunRanges(rows, [&](size_t r0, size_t r1, int) {
        for (size_t r = r0; r < r1; ++r) {
            std::copy_n(ckv + r * dc, dc, latents.data() + r * (dc + dr));
            std::copy_n(kpe + r * dr, dr, latents.data() + r * (dc + dr) + dc);
        }
    });
}

void mla_attention(ThreadPool& pool, Target t, MlaJob& j, const float* latents, const PagedJob& shape, float* lse) {
    const size_t TH = j.T * j.H;
    std::vector<float> q_abs(TH * j.da), o_lat(TH * j.da);
    j.q_abs = q_abs.data();
    j.o_lat = o_lat.data();
    pool.Run(TH, [&](size_t i, int) { CONFORM_DISPATCH(t, MlaAbsorbExport)(j, i / j.H, i % j.H); });
    PagedJob job = shape;
    job.q = {q_abs.data(), j.H * j.da, Elem::f32};
    job.k = {latents, j.da, Elem::f32};
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
