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
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cuda/common.cuh"
#include "cuda/kernels.h"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {

namespace {

template <typename T>
struct PagedArgs {
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
    int64_t window = 0;  // sliding window: a row sees keys pos - window + 1 ..= pos (0: all <= pos)
    float softcap = 0.0f;  // > 0: each score s becomes softcap * tanh(s / softcap)
    const float* sinks = nullptr;  // [H] on the device: each head's sink logit, or none
    float scale = 0;
};

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
    const int64_t first = a.window > 0 && pos - a.window + 1 > 0 ? pos - a.window + 1 : 0;  // the window's first
    const int64_t kvh = h / (a.H / a.KV), W = a.KV * hd;
    const T* qh = a.q + t * a.H * hd + h * hd;
    float* ol = o + lane * hd;
    for (int64_t d = 0; d < hd; ++d) ol[d] = 0.0f;

    // ---- this lane's keys, online softmax ----
    float m = -INFINITY, l = 0.0f;
    for (int64_t i = first + lane; i < seen; i += kWarp) {
        const int64_t row = a.kv_indices[a.kv_indptr[b] + i / P] * P + i % P;
        const T* ki = a.k + row * W + kvh * hd;
        const T* vi = a.v + row * W + kvh * hd;
        float s = 0.0f;
        for (int64_t d = 0; d < hd; ++d) s += to_f32(qh[d]) * to_f32(ki[d]);
        s *= a.scale;
        if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);  // Gemma 2's soft-cap, before the softmax
        const float m_new = fmaxf(m, s), c = expf(m - m_new), p = expf(s - m_new);
        l = l * c + p;
        for (int64_t d = 0; d < hd; ++d) ol[d] = ol[d] * c + p * to_f32(vi[d]);
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
    with_storage(ctx.dtype, [&](auto tag) {
        using St = decltype(tag);
        const DeviceBuffer<St> dq = upload<St>(ctx, "q", q), dk = upload<St>(ctx, "k_cache", k_cache),
                               dv = upload<St>(ctx, "v_cache", v_cache);
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
        a.window = p.sliding_window;
        a.softcap = static_cast<float>(p.softcap);
        a.sinks = p.sinks ? dsinks.data() : nullptr;
        a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
        const size_t smem = static_cast<size_t>(kWarp * hd) * sizeof(float);  // 32 KiB at head_dim 256
        const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(H));
        CUDA_LAUNCH((paged_decode_kernel<St>), grid, kWarp, smem, ctx.stream, a);
        ctx.sync("paged_attention");
        download(ctx, dout, out);
        download(ctx, dlse, lse);
    });
}

}  // namespace conform::cuda
