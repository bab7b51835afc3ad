// rope — rotary position embedding, NeoX (half-split) or interleaved pairs;
// and the block's fused step after the packed QKV product: QK-norm, RoPE and
// the KV-cache write in one kernel.
//
// Angles as in the scalar implementation (whose scaled inv_freq the host
// computes): pos * inv_freq in double, cos and sin in double (times yarn's
// attention factor), only then rounded to float — a float32 angle is off by
// ~1e-3 rad at position 32768, which the tolerance model would (rightly)
// count against us.
#include <cmath>
#include <vector>

#include "cuda/common.cuh"
#include "cuda/kernels.h"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {

namespace {

constexpr int kHeadsPerBlock = 4;  // one warp per (token, head)

// ---- kernels ------------------------------------------------------------------------------

// One warp, one head of hd values: src → dst, lane taking pairs i = lane, lane + 32, ...
//   (NORM) x     = x * (1 / sqrt(mean(x^2) + eps)) * (w + w_off)  Qwen3's q_norm / k_norm, before RoPE (w_off 1: Gemma 3)
//          theta = pos * inv_freq[i], i < rd/2                     (rd: the rotary dims, partial rotary)
//          neox:        pair (x[i], x[i + rd/2])   (HF rotate_half on x[..., :rd])
//          interleaved: pair (x[2i], x[2i + 1])    (Meta view_as_complex)
//          cos, sin    *= mscale                   (yarn's attention factor; 1 otherwise)
//          y_a = x_a cos - x_b sin;  y_b = x_b cos + x_a sin;   y[rd:] = x[rd:]
template <typename T, bool NORM>
__device__ __forceinline__ void rotate_head(const T* __restrict__ src, T* __restrict__ dst, int64_t hd, int64_t rd,
                                            int64_t pos, const double* __restrict__ inv_freq, double mscale, bool neox,
                                            const T* __restrict__ w, float eps, float w_off) {
    const int lane = threadIdx.x % kWarp;
    const int64_t half = rd / 2;
    float scale = 1.0f;
    if constexpr (NORM) {
        float ss = 0.0f;
        for (int64_t i = lane; i < hd; i += kWarp) {
            const float v = to_f32(src[i]);
            ss += v * v;
        }
        ss = warp_sum(ss);
        scale = 1.0f / sqrtf(ss / static_cast<float>(hd) + eps);
    }
    for (int64_t i = lane; i < half; i += kWarp) {
        const int64_t a = neox ? i : 2 * i;
        const int64_t b = neox ? i + half : 2 * i + 1;
        float xa = to_f32(src[a]), xb = to_f32(src[b]);
        if constexpr (NORM) {
            xa = xa * scale * (to_f32(w[a]) + w_off);
            xb = xb * scale * (to_f32(w[b]) + w_off);
        }
        double sin_d, cos_d;
        sincos(static_cast<double>(pos) * inv_freq[i], &sin_d, &cos_d);
        const float c = static_cast<float>(cos_d * mscale), s = static_cast<float>(sin_d * mscale);
        dst[a] = from_f32<T>(xa * c - xb * s);
        dst[b] = from_f32<T>(xb * c + xa * s);
    }
    // q_pass = q[..., rd:], concatenated back as it is (normed, under NORM)
    for (int64_t j = rd + lane; j < hd; j += kWarp) {
        float v = to_f32(src[j]);
        if constexpr (NORM) v = v * scale * (to_f32(w[j]) + w_off);
        dst[j] = from_f32<T>(v);
    }
}

// out[t, u*hd : (u+1)*hd] = rope(x[t, u*hd : ...], pos[t]) for every token t and head u.
template <typename T>
__global__ void __launch_bounds__(kHeadsPerBlock* kWarp)
    rope_kernel(HeadRows<T> rows, int64_t n_rows, int64_t n_heads, int64_t hd, const int64_t* __restrict__ pos,
                RopeFreqs f, bool neox) {
    const int64_t job = static_cast<int64_t>(blockIdx.x) * kHeadsPerBlock + threadIdx.x / kWarp;  // (token, head)
    if (job >= n_rows * n_heads) return;  // a whole warp at once: its shuffles stay full
    const int64_t t = job / n_heads, u = job % n_heads;
    rotate_head<T, false>(rows.src + t * rows.src_stride + u * hd, rows.dst + t * rows.dst_stride + u * hd, hd, f.rd,
                          pos[t], f.inv_freq, f.mscale, neox, nullptr, 0.0f, 0.0f);
}

// The block's fused step: one warp per (token, head u) of qkv = [q | k | v]:
//   u < H:            q_rot[t, u]        = rope(qk_norm?(q[t, u]))
//   u < H + KV:       cache_k[t, u - H]  = rope(qk_norm?(k[t, u - H]))
//   otherwise:        cache_v[t, u-H-KV] = v[t, u - H - KV]
template <typename T, bool NORM>
__global__ void __launch_bounds__(kHeadsPerBlock* kWarp) qkv_rope_cache_kernel(QkvRopeArgs<T> a, bool neox) {
    const int64_t H = a.n_heads, KV = a.n_kv_heads, hd = a.hd;
    const int64_t heads = H + 2 * KV;
    const int64_t job = static_cast<int64_t>(blockIdx.x) * kHeadsPerBlock + threadIdx.x / kWarp;
    if (job >= a.tokens * heads) return;  // a whole warp at once
    const int64_t t = job / heads, u = job % heads;
    const T* src = a.qkv + t * heads * hd + u * hd;
    const int64_t kv_row = t * KV * hd;
    if (u < H) {
        rotate_head<T, NORM>(src, a.q_rot + t * H * hd + u * hd, hd, a.freqs.rd, a.pos[t], a.freqs.inv_freq,
                             a.freqs.mscale, neox, a.q_norm, a.eps, a.w_offset);
    } else if (u < H + KV) {
        rotate_head<T, NORM>(src, a.cache_k + kv_row + (u - H) * hd, hd, a.freqs.rd, a.pos[t], a.freqs.inv_freq,
                             a.freqs.mscale, neox, a.k_norm, a.eps, a.w_offset);
    } else {
        T* dst = a.cache_v + kv_row + (u - H - KV) * hd;
        for (int64_t i = threadIdx.x % kWarp; i < hd; i += kWarp) dst[i] = src[i];
    }
}

unsigned blocks_for(int64_t jobs) { return static_cast<unsigned>(ceil_div(jobs, kHeadsPerBlock)); }

}  // namespace

// ---- launchers ---------------------------------------------------------------------------------

template <typename T>
void launch_rope(HeadRows<T> rows, int64_t n_rows, int64_t n_heads, int64_t hd, const int64_t* pos,
                 RopeFreqs freqs, RopeLayout layout, cudaStream_t s) {
    if (n_rows * n_heads == 0) return;
    CUDA_LAUNCH(rope_kernel<T>, blocks_for(n_rows * n_heads), kHeadsPerBlock * kWarp, 0, s, rows, n_rows, n_heads, hd,
                pos, freqs, layout == RopeLayout::neox);
}

template <typename T>
void launch_qkv_rope_cache(const QkvRopeArgs<T>& a, cudaStream_t s) {
    const int64_t jobs = a.tokens * (a.n_heads + 2 * a.n_kv_heads);
    if (jobs == 0) return;
    const bool neox = a.layout == RopeLayout::neox;
    if (a.q_norm)
        CUDA_LAUNCH((qkv_rope_cache_kernel<T, true>), blocks_for(jobs), kHeadsPerBlock * kWarp, 0, s, a, neox);
    else
        CUDA_LAUNCH((qkv_rope_cache_kernel<T, false>), blocks_for(jobs), kHeadsPerBlock * kWarp, 0, s, a, neox);
}

#define INSTANTIATE(T)                                                                                        \
    template void launch_rope<T>(HeadRows<T>, int64_t, int64_t, int64_t, const int64_t*, RopeFreqs, RopeLayout,    \
                                 cudaStream_t);                                                               \
    template void launch_qkv_rope_cache<T>(const QkvRopeArgs<T>&, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(__nv_bfloat16)
INSTANTIATE(__half)
#undef INSTANTIATE

// ---- op entry --------------------------------------------------------------------------------------

DeviceBuffer<double> rope_inv_freq(const Context& ctx, const RopeParams& p, int64_t seq_len) {
    // inv_freq[rd/2] with the config's scaling, dynamic NTK's for seq_len tokens
    std::vector<double> f(static_cast<size_t>(p.rotary() / 2));
    scalar::rope_inv_freq(p, seq_len, f.data());
    DeviceBuffer<double> d("inv_freq", f.size(), ctx.stream);
    CUDA_CHECK(cudaMemcpyAsync(d.data(), f.data(), f.size() * sizeof(double), cudaMemcpyHostToDevice, ctx.stream));
    ctx.sync("rope inv_freq");  // f is freed on return
    return d;
}

RopeLayout effective_layout(const Context& ctx, RopeLayout l) {
    if (!ctx.faults.rope_layout_swapped) return l;
    return l == RopeLayout::neox ? RopeLayout::interleaved : RopeLayout::neox;
}

void op_rope(const Context& ctx, View x, Positions pos, const RopeParams& p, MutView out) {
    namespace chk = scalar::detail;
    const int64_t hd = p.head_dim;
    chk::expect(hd > 0 && hd % 2 == 0, "rope", "head_dim must be positive and even, found " + std::to_string(hd));
    chk::expect(x.cols % hd == 0, "rope",
                "x " + chk::shape_str(x.rows, x.cols) + " must have a multiple of head_dim = " + std::to_string(hd) +
                    " columns");
    chk::expect(p.rotary() > 0 && p.rotary() % 2 == 0 && p.rotary() <= hd, "rope",
                "rotary_dim must be even and in (0, head_dim = " + std::to_string(hd) + "], found " +
                    std::to_string(p.rotary()));
    chk::expect_positions("rope", "pos", pos, x.rows);
    chk::expect_shape("rope", "out", out, x.rows, x.cols);
    const int64_t T = x.rows, n = x.cols / hd;
    with_storage(ctx.dtype, [&](auto tag) {
        using S = decltype(tag);
        const DeviceBuffer<S> dx = upload<S>(ctx, "x", x);
        const DeviceBuffer<int64_t> dpos = upload_positions(ctx, "pos", pos.data, static_cast<size_t>(T));
        const DeviceBuffer<double> inv_freq = rope_inv_freq(ctx, p, scalar::rope_seq_len(pos));
        DeviceBuffer<S> dout("out", static_cast<size_t>(x.size()), ctx.stream);
        launch_rope<S>({dx.data(), x.cols, dout.data(), x.cols}, T, n, hd, dpos.data(),
                       {inv_freq.data(), p.rotary(), scalar::rope_attention_factor(p)}, effective_layout(ctx, p.layout),
                       ctx.stream);
        ctx.sync("rope");
        download(ctx, dout, out);
    });
}

}  // namespace conform::cuda
