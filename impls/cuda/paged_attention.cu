// paged_attention — a batch of ragged sequences over a paged KV cache
// (FlashInfer's layout: conform/interface.h PagedIndex), FlashDecoding's
// split of the keys, here across the lanes of one warp.
//
// Work decomposition. One warp per (query row t, query head h): grid (T, H),
// 32 threads. Lane ℓ owns the keys i ≡ ℓ (mod 32) that row t sees (i at most
// t's position kv_len - q_len + j) and keeps FlashAttention's running state
// over them, its partial output o_ℓ[hd] in shared memory:
//   s_i = (q · k_i) * scale;  m' = max(m, s_i);  c = e^(m - m');  p = e^(s_i - m')
//   l = l c + p;  o = o c + p v_i;  m = m'
// Key i's row: kv_indices[kv_indptr[b] + i / P] * P + i % P; a row no
// sequence owns is never read (conform fills them with NaN).
// Combine (merge_states, the split-KV step every such kernel has), over lanes:
//   M = max_ℓ m_ℓ;  w_ℓ = e^(m_ℓ - M) (0 for a lane that saw no key);
//   L = Σ_ℓ l_ℓ w_ℓ;  out = Σ_ℓ o_ℓ w_ℓ / L;  lse = M + log L
// A row that sees no key at all: out 0, lse -inf. Lanes split keys by index,
// never by page or batch, so a row's result does not depend on either.
//
// An FP8 cache (kv_cache_dtype): first the cache write, one byte per value,
// code = fp8(x / scale) by the hardware's conversion (round to nearest even,
// saturating: __NV_SATFINITE), as vLLM's reshape_and_cache_flash writes it;
// then the kernel above reads each code through its kv head's table,
// code -> value * scale (the dequantisation, tabled on the host).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "conform/dtype.h"

#include "cuda/common.cuh"
#include "cuda/kernels.h"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {

namespace {

template <typename T>
struct PagedArgs : AttentionVariant {  // the mask, the transform, the sinks (device memory)
    const T* q = nullptr;                      // [T, H*hd]
    const T* k = nullptr;                      // [pages*P, KV*hd]
    const T* v = nullptr;
    const int64_t* seq_of = nullptr;           // [T]: the sequence of each query row (host-built)
    const int64_t* qo_indptr = nullptr;        // [B+1]
    const int64_t* kv_indptr = nullptr;        // [B+1]
    const int64_t* kv_indices = nullptr;       // [pages listed]
    const int64_t* kv_last_page_len = nullptr; // [B]
    T* out = nullptr;                          // [T, H*hd]
    T* lse = nullptr;                          // [T, H]
    int64_t H = 0, KV = 0, hd = 0, P = 0;
    float qk_scale = 0;  // q·k's multiplier, resolved (attn_scale, or 1 / sqrt(hd))
    // An FP8 cache: k8, v8 [pages*P, KV*hd] codes (k, v unused), read as
    // k_lut[kvh * 256 + code]; nullptr without one.
    const uint8_t* k8 = nullptr;
    const uint8_t* v8 = nullptr;
    const float* k_lut = nullptr;
    const float* v_lut = nullptr;
};

// The cache write: every value of the pool, code = fp8(x / scale) with its
// kv head's scale (or the one). A grid-stride loop: the pool is large, the
// work per value tiny. x / s is IEEE division (nvcc without fast math), so
// the codes are the contract's.
__global__ void fp8_cache_write_kernel(const float* x, uint8_t* code, const float* scale, int64_t n, int64_t W,
                                       int64_t hd, int64_t n_scales, __nv_fp8_interpretation_t kind) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
        const float s = scale[n_scales > 1 ? (e % W) / hd : 0];
        code[e] = __nv_cvt_float_to_fp8(x[e] / s, __NV_SATFINITE, kind);
    }
}

// The launch: enough blocks to keep an H200's 132 SMs busy (~4 per SM), never
// more than the work.
void write_fp8_codes(const Context& ctx, const float* x, uint8_t* code, const float* scale, int64_t n, int64_t W,
                     int64_t hd, int64_t n_scales, KvCacheDtype dtype) {
    const auto kind = dtype == KvCacheDtype::fp8_e5m2 ? __NV_E5M2 : __NV_E4M3;
    const dim3 grid(static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + 255) / 256, 512))));
    CUDA_LAUNCH(fp8_cache_write_kernel, grid, 256, 0, ctx.stream, x, code, scale, n, W, hd, n_scales, kind);
}

template <typename T>
__global__ void __launch_bounds__(kWarp) paged_decode_kernel(PagedArgs<T> a) {
    CONFORM_DYNAMIC_SHARED(smem);
    float* o = reinterpret_cast<float*>(smem);  // [32][hd]: each lane's unnormalised output
    __shared__ float w[kWarp];                  // each lane's weight in the combine
    const int lane = threadIdx.x;
    const int64_t t = blockIdx.x, h = blockIdx.y, hd = a.hd, P = a.P;
    const int64_t b = a.seq_of[t];
    const int64_t n_pages = a.kv_indptr[b + 1] - a.kv_indptr[b];
    const int64_t kv_len = n_pages == 0 ? 0 : (n_pages - 1) * P + a.kv_last_page_len[b];
    const int64_t q_len = a.qo_indptr[b + 1] - a.qo_indptr[b];
    const int64_t pos = kv_len - q_len + (t - a.qo_indptr[b]);  // this row's position in its sequence
    const int64_t seen = pos + 1 < kv_len ? pos + 1 : kv_len;   // keys first .. seen-1 are visible
    const int64_t first = a.first_key(pos);  // the first key the window and the chunk leave it (the variant's mask)
    const int64_t kvh = h / (a.H / a.KV), W = a.KV * hd;
    const T* qh = a.q + t * a.H * hd + h * hd;
    float* ol = o + lane * hd;
    for (int64_t d = 0; d < hd; ++d) ol[d] = 0.0f;

    // ---- this lane's keys, online softmax ----
    const float cap = static_cast<float>(a.softcap);  // the variant's, as the kernel computes with it
    float m = -INFINITY, l = 0.0f;
    for (int64_t i = first + lane; i < seen; i += kWarp) {
        const int64_t row = a.kv_indices[a.kv_indptr[b] + i / P] * P + i % P;
        const T* ki = a.k8 ? nullptr : a.k + row * W + kvh * hd;
        const T* vi = a.v8 ? nullptr : a.v + row * W + kvh * hd;
        const uint8_t* k8 = a.k8 ? a.k8 + row * W + kvh * hd : nullptr;
        const uint8_t* v8 = a.v8 ? a.v8 + row * W + kvh * hd : nullptr;
        auto key = [&](int64_t d) { return k8 ? a.k_lut[kvh * 256 + k8[d]] : to_f32(ki[d]); };
        auto value = [&](int64_t d) { return v8 ? a.v_lut[kvh * 256 + v8[d]] : to_f32(vi[d]); };
        float s = 0.0f;
        for (int64_t d = 0; d < hd; ++d) s += to_f32(qh[d]) * key(d);
        s *= a.qk_scale;
        if (cap > 0.0f) s = cap * tanhf(s / cap);  // Gemma 2's soft-cap, before the softmax
        const float m_new = fmaxf(m, s), c = expf(m - m_new), p = expf(s - m_new);
        l = l * c + p;
        for (int64_t d = 0; d < hd; ++d) ol[d] = ol[d] * c + p * value(d);
        m = m_new;
    }

    // ---- combine the 32 lane states ----
    float M = warp_max(m);
    T* oh = a.out + t * a.H * hd + h * hd;
    if (M == -INFINITY) {  // no key in any lane: out 0, lse -inf, a sink or not
        for (int64_t d = lane; d < hd; d += kWarp) oh[d] = from_f32<T>(0.0f);
        if (lane == 0) a.lse[t * a.H + h] = from_f32<T>(-INFINITY);
        return;
    }
    // A sink (gpt-oss) joins the denominator once, here, with no value.
    if (a.sinks) M = fmaxf(M, a.sinks[h]);
    w[lane] = l > 0.0f ? expf(m - M) : 0.0f;
    const float L = warp_sum(l * w[lane]) + (a.sinks ? expf(a.sinks[h] - M) : 0.0f);
    __syncthreads();  // every lane's o and w are written before any lane reads another's
    for (int64_t d = lane; d < hd; d += kWarp) {
        float acc = 0.0f;
        for (int r = 0; r < kWarp; ++r) acc += o[r * hd + d] * w[r];
        oh[d] = from_f32<T>(acc / L);
    }
    if (lane == 0) a.lse[t * a.H + h] = from_f32<T>(M + logf(L));
}

}  // namespace

// ---- op entry ------------------------------------------------------------------------------------

void op_paged_attention(const Context& ctx, View q, View k_cache, View v_cache, const PagedIndex& idx,
                        const PagedAttentionParams& p, MutView out, MutView lse) {
    namespace chk = scalar::detail;
    const int64_t H = p.n_heads, KV = p.n_kv_heads, hd = p.head_dim, P = p.page_size, B = idx.kv_last_page_len.n;
    chk::expect(H > 0 && KV > 0 && hd > 0 && P > 0 && H % KV == 0, "paged_attention",
                "n_heads, n_kv_heads, head_dim and page_size must be positive, n_heads a multiple of n_kv_heads");
    chk::expect(hd <= kMaxAttentionHeadDim, "paged_attention",
                "head_dim " + std::to_string(hd) + " is over " + std::to_string(kMaxAttentionHeadDim));
    const int64_t T = q.rows;
    chk::expect_positions("paged_attention", "qo_indptr", idx.qo_indptr, B + 1);
    chk::expect_positions("paged_attention", "kv_indptr", idx.kv_indptr, B + 1);
    chk::expect_shape("paged_attention", "q", q, T, H * hd);
    chk::expect_shape("paged_attention", "k_cache", k_cache, k_cache.rows, KV * hd);
    chk::expect_shape("paged_attention", "v_cache", v_cache, k_cache.rows, KV * hd);
    chk::expect_shape("paged_attention", "out", out, T, H * hd);
    chk::expect_shape("paged_attention", "lse", lse, T, H);
    // The sequence of each query row: a lookup the host makes once, so no
    // thread searches qo_indptr.
    std::vector<int64_t> seq_of(static_cast<size_t>(T));
    for (int64_t b = 0; b < B; ++b)
        for (int64_t r = idx.qo_indptr[b]; r < idx.qo_indptr[b + 1]; ++r) seq_of[static_cast<size_t>(r)] = b;
    if (T == 0) return;
    const bool fp8 = p.kv_cache_dtype != KvCacheDtype::none;
    if (fp8)
        chk::expect(p.k_scale && p.v_scale && (p.n_kv_scales == 1 || p.n_kv_scales == KV), "paged_attention",
                    "an FP8 cache needs k_scale and v_scale, 1 or n_kv_heads of each");
    with_storage(ctx.dtype, [&](auto tag) {
        using St = decltype(tag);
        const DeviceBuffer<St> dq = upload<St>(ctx, "q", q);
        DeviceBuffer<St> dk, dv;  // the cache in the storage dtype, or, FP8, its codes below
        DeviceBuffer<uint8_t> dk8, dv8;
        DeviceBuffer<float> dklut, dvlut;
        if (!fp8) {
            dk = upload<St>(ctx, "k_cache", k_cache);
            dv = upload<St>(ctx, "v_cache", v_cache);
        } else {
            // The pool in float32 (the harness rounded it to the dtype: exact), written as codes on the device.
            const int64_t W = KV * hd, n = k_cache.rows * W;
            for (auto [src, scale, codes, lut, is_v] :
                 {std::tuple{k_cache, p.k_scale, &dk8, &dklut, false}, std::tuple{v_cache, p.v_scale, &dv8, &dvlut, true}}) {
                const char* name = is_v ? "v" : "k";
                const DeviceBuffer<float> x = upload<float>(ctx, name, src);
                const DeviceBuffer<float> ds = upload<float>(ctx, "scale", scale, static_cast<size_t>(p.n_kv_scales));
                *codes = DeviceBuffer<uint8_t>(std::string(name) + "_codes", static_cast<size_t>(n), ctx.stream);
                write_fp8_codes(ctx, x.data(), codes->data(), ds.data(), n, W, hd, p.n_kv_scales, p.kv_cache_dtype);
                ctx.sync("paged_attention fp8 cache write");  // before x and ds go
                const std::vector<float> table = fp8_read_table(p, is_v);
                *lut = upload<float>(ctx, "fp8_table", table.data(), table.size());
            }
        }
        auto up = [&](const char* name, Positions x) { return upload_positions(ctx, name, x.data, static_cast<size_t>(x.n)); };
        const DeviceBuffer<int64_t> dseq = upload_positions(ctx, "seq_of", seq_of.data(), seq_of.size());
        const DeviceBuffer<int64_t> dqo = up("qo_indptr", idx.qo_indptr), dkp = up("kv_indptr", idx.kv_indptr),
                                    dki = up("kv_indices", idx.kv_indices),
                                    dkl = up("kv_last_page_len", idx.kv_last_page_len);
        DeviceBuffer<St> dout("out", static_cast<size_t>(out.size()), ctx.stream);
        DeviceBuffer<St> dlse("lse", static_cast<size_t>(lse.size()), ctx.stream);
        DeviceBuffer<float> dsinks;  // float32: the sinks are inputs of the case's dtype, held exactly
        if (p.sinks) dsinks = upload<float>(ctx, "sinks", p.sinks, static_cast<size_t>(p.n_heads));
        PagedArgs<St> a;
        a.q = dq.data();
        a.k = dk.data();
        a.v = dv.data();
        a.seq_of = dseq.data();
        a.qo_indptr = dqo.data();
        a.kv_indptr = dkp.data();
        a.kv_indices = dki.data();
        a.kv_last_page_len = dkl.data();
        a.out = dout.data();
        a.lse = dlse.data();
        a.H = H;
        a.KV = KV;
        a.hd = hd;
        a.P = P;
        static_cast<AttentionVariant&>(a) = p;
        a.sinks = p.sinks ? dsinks.data() : nullptr;  // the device's copy
        if (fp8) {
            a.k8 = dk8.data();
            a.v8 = dv8.data();
            a.k_lut = dklut.data();
            a.v_lut = dvlut.data();
        }
        a.qk_scale = static_cast<float>(p.score_scale());  // attn_scale, or 1 / sqrt(hd)
        const size_t smem = static_cast<size_t>(kWarp * hd) * sizeof(float);  // 32 KiB at head_dim 256
        const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(H));
        CUDA_LAUNCH((paged_decode_kernel<St>), grid, kWarp, smem, ctx.stream, a);
        ctx.sync("paged_attention");
        download(ctx, dout, out);
        download(ctx, dlse, lse);
    });
}

// ---- the conversion alone (cuda.h) ----------------------------------------------------------------

std::vector<uint8_t> fp8_convert(const std::vector<float>& x, KvCacheDtype dtype) {
    if (dtype == KvCacheDtype::none) throw ImplError("cuda: fp8_convert needs an FP8 dtype");
    const Context ctx(DType::f32, Faults{});
    const int64_t n = static_cast<int64_t>(x.size());
    const float one = 1.0f;
    const DeviceBuffer<float> dx = upload<float>(ctx, "x", x.data(), x.size());
    const DeviceBuffer<float> ds = upload<float>(ctx, "scale", &one, 1);
    DeviceBuffer<uint8_t> codes("codes", x.size(), ctx.stream);
    write_fp8_codes(ctx, dx.data(), codes.data(), ds.data(), n, n, n, 1, dtype);
    ctx.sync("fp8_convert");
    return codes.fetch_checked(ctx.stream, 0, 0);  // a code may equal the poison byte: only the guard is checked
}

}  // namespace conform::cuda
