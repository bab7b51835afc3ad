// impls/cuda/forward.cuh — one forward of the decoder layer on the device and
// the state it runs over (weights packed for the fused products, activations,
// the KV cache), shared by block.cu (block, its bench) and decode.cu.
//
//   attn_in      = rmsnorm(x, attn_norm)                      rmsnorm.cu
//   [q | k | v]  = attn_in @ [wq | wk | wv]                   one packed GEMM
//   q_rot, cache = rope(qk_norm?(q)), rope(qk_norm?(k)), v    one kernel (rope.cu): the cache gets rotated k, raw v
//   attn         = attention(q_rot, cache_k, cache_v)         flash attention, split-K when few blocks (decode)
//   h, ffn_in    = x + attn @ wo, rmsnorm(h, ffn_norm)        GEMM, then the residual add fused into the norm
//   ffn_out      = (act(ffn_in @ w1) * (ffn_in @ w3)) @ w2   one packed GEMM, one activation pass, one GEMM
//   out          = h + ffn_out
// With sandwich_norm (Gemma 2/3), attn @ wo and ffn_out each go through one
// more rmsnorm (attn_post_norm, ffn_post_norm) before their adds.
#pragma once

#include <algorithm>
#include <vector>

#include "conform/dtype.h"
#include "cuda/common.cuh"
#include "cuda/kernels.h"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {



inline size_t sz(int64_t v) { return static_cast<size_t>(v); }

// ---- state ---------------------------------------------------------------------------------

// The block's weights on the device, in storage type T, packed for the fused products.
template <typename T>
struct Weights {
    DeviceBuffer<T> attn_norm;  // (D,)
    DeviceBuffer<T> wqkv;       // (D, Q + 2 KVW)   [wq | wk | wv]
    DeviceBuffer<T> wo;         // (Q, D)
    DeviceBuffer<T> ffn_norm;   // (D,)
    DeviceBuffer<T> w13;        // (D, 2F)          [w1 | w3]
    DeviceBuffer<T> w2;         // (F, D)
    DeviceBuffer<T> q_norm;     // (hd,)            qk_norm only
    DeviceBuffer<T> k_norm;     // (hd,)
    DeviceBuffer<T> bqkv;       // (Q + 2 KVW,)     [bq | bk | bv], qkv_bias only
    DeviceBuffer<float> sinks;  // (H,)             each head's sink logit, attn_sinks only
    DeviceBuffer<T> attn_post_norm;  // (D,)        sandwich_norm only
    DeviceBuffer<T> ffn_post_norm;   // (D,)
    DeviceBuffer<double> inv_freq;  // (rd/2,)     scaled; dynamic NTK's for the call's seq_len tokens

    Weights(const Context& ctx, const BlockWeights& w, const BlockConfig& c, int64_t seq_len) {
        const int64_t D = c.d_model, Q = c.q_width(), KVW = c.kv_width(), N = Q + 2 * KVW;
        // wqkv = torch.cat([wq, wk, wv], dim=1)
        std::vector<float> qkv(sz(D * N));
        for (int64_t r = 0; r < D; ++r) {
            float* dst = qkv.data() + r * N;
            dst = std::copy(w.wq.row(r), w.wq.row(r) + Q, dst);
            dst = std::copy(w.wk.row(r), w.wk.row(r) + KVW, dst);
            std::copy(w.wv.row(r), w.wv.row(r) + KVW, dst);
        }
        const std::vector<float> w13h = pack_gate_up(w.w1, w.w3);
        attn_norm = upload<T>(ctx, "attn_norm", w.attn_norm);
        wqkv = upload<T>(ctx, "wqkv", qkv.data(), qkv.size());
        wo = upload<T>(ctx, "wo", w.wo);
        ffn_norm = upload<T>(ctx, "ffn_norm", w.ffn_norm);
        w13 = upload<T>(ctx, "w13", w13h.data(), w13h.size());
        w2 = upload<T>(ctx, "w2", w.w2);
        if (c.qk_norm) {
            q_norm = upload<T>(ctx, "q_norm", w.q_norm);
            k_norm = upload<T>(ctx, "k_norm", w.k_norm);
        }
        if (c.qkv_bias) {
            std::vector<float> b(sz(N));
            std::copy(w.bq.data, w.bq.data + Q, b.begin());
            std::copy(w.bk.data, w.bk.data + KVW, b.begin() + Q);
            std::copy(w.bv.data, w.bv.data + KVW, b.begin() + Q + KVW);
            bqkv = upload<T>(ctx, "bqkv", b.data(), b.size());
        }
        if (c.attn_sinks) sinks = upload<float>(ctx, "sinks", w.sinks.data, sz(c.n_heads));
        if (c.sandwich_norm) {
            attn_post_norm = upload<T>(ctx, "attn_post_norm", w.attn_post_norm);
            ffn_post_norm = upload<T>(ctx, "ffn_post_norm", w.ffn_post_norm);
        }
        inv_freq = rope_inv_freq(ctx, rope_params(c), seq_len);
    }
};

// Every activation of one forward over up to `cap` tokens (llama2.c's RunState).
template <typename T>
struct RunState {
    DeviceBuffer<T> attn_in;  // (cap, D)
    DeviceBuffer<T> qkv;      // (cap, Q + 2 KVW)   taps q, k, v
    DeviceBuffer<T> q_rot;    // (cap, Q)
    DeviceBuffer<T> attn;     // (cap, Q)
    DeviceBuffer<T> attn_wo;  // (cap, D)           attn @ wo, before the residual
    DeviceBuffer<T> h;        // (cap, D)
    DeviceBuffer<T> ffn_in;   // (cap, D)
    DeviceBuffer<T> gu;       // (cap, 2F)          [ffn_in @ w1 | ffn_in @ w3]
    DeviceBuffer<T> g;        // (cap, F)
    DeviceBuffer<T> ffn_out;  // (cap, D)
    DeviceBuffer<T> post;     // (cap, D)           a sublayer's output after its sandwich norm (sandwich_norm only)
    DeviceBuffer<float> scratch;  // attention's split-K partials, grown on demand

    RunState(const Context& ctx, const BlockConfig& c, int64_t cap) {
        const int64_t D = c.d_model, Q = c.q_width(), KVW = c.kv_width(), F = c.ffn_dim;
        const cudaStream_t s = ctx.stream;
        attn_in = DeviceBuffer<T>("attn_in", sz(cap * D), s);
        qkv = DeviceBuffer<T>("qkv", sz(cap * (Q + 2 * KVW)), s);
        q_rot = DeviceBuffer<T>("q_rot", sz(cap * Q), s);
        attn = DeviceBuffer<T>("attn", sz(cap * Q), s);
        attn_wo = DeviceBuffer<T>("attn_wo", sz(cap * D), s);
        h = DeviceBuffer<T>("h", sz(cap * D), s);
        ffn_in = DeviceBuffer<T>("ffn_in", sz(cap * D), s);
        gu = DeviceBuffer<T>("gate|up", sz(cap * 2 * F), s);
        g = DeviceBuffer<T>("gated", sz(cap * F), s);
        ffn_out = DeviceBuffer<T>("ffn_out", sz(cap * D), s);
        if (c.sandwich_norm) post = DeviceBuffer<T>("post", sz(cap * D), s);
    }
};

// decode's FP8 cache (config.kv_cache_dtype): the rows just written, each
// value x replaced by what the cache gives back, lut[g][fp8(x / s_g)] — x / s
// in IEEE float32 and the hardware's saturating conversion, as
// paged_attention's cache write; lut[g][code] = code's value * s_g (dtype.h
// fp8_read_table), stored in T. A grid-stride loop: a decode step writes one
// row, the prefill a few.
template <typename T>
__global__ void fp8_round_trip_kernel(T* x, int64_t n, int64_t W, int64_t hd, const float* scale, const float* lut,
                                      __nv_fp8_interpretation_t kind) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
        const int64_t g = (e % W) / hd;  // the element's kv head
        const uint8_t code = __nv_cvt_float_to_fp8(to_f32(x[e]) / scale[g], __NV_SATFINITE, kind);
        x[e] = from_f32<T>(lut[g * 256 + code]);
    }
}

// Rotated keys (RoPE is never re-applied to a cached key), values (never
// rotated) and the position of every cached row, for the causal test.
template <typename T>
struct KvCache {
    DeviceBuffer<T> k;          // (capacity, KVW)
    DeviceBuffer<T> v;          // (capacity, KVW)
    DeviceBuffer<int64_t> pos;  // (capacity,)
    int64_t len = 0;
    // An FP8 cache (decode): each kv head's scale and read table, for K and V.
    KvCacheDtype fp8 = KvCacheDtype::none;
    DeviceBuffer<float> k_scale, v_scale, k_lut, v_lut;  // [KV], [KV * 256]

    KvCache(const Context& ctx, const BlockConfig& c, int64_t capacity)
        : k("cache_k", sz(capacity * c.kv_width()), ctx.stream),
          v("cache_v", sz(capacity * c.kv_width()), ctx.stream),
          pos("cache_pos", sz(capacity), ctx.stream) {}

    void use_fp8(const Context& ctx, const BlockConfig& c, const BlockWeights& w) {
        fp8 = c.kv_cache_dtype;
        const PagedAttentionParams p = decode_cache_params(c, w);  // the scales as the paged kernel's tables read them
        for (bool is_v : {false, true}) {
            const std::vector<float> per_head = kv_scales_per_head(p, is_v);
            const std::vector<float> lut = fp8_read_table(p, is_v);
            (is_v ? v_scale : k_scale) = upload<float>(ctx, is_v ? "v_scale" : "k_scale", per_head.data(), per_head.size());
            (is_v ? v_lut : k_lut) = upload<float>(ctx, is_v ? "v_fp8_table" : "k_fp8_table", lut.data(), lut.size());
        }
    }

    // Rows [row0, row0 + n) through the cache, when it is FP8.
    void round_trip(const Context& ctx, const BlockConfig& c, int64_t row0, int64_t n) {
        if (fp8 == KvCacheDtype::none || n == 0) return;
        const int64_t W = c.kv_width(), count = n * W;
        const auto kind = fp8 == KvCacheDtype::fp8_e5m2 ? __NV_E5M2 : __NV_E4M3;
        const dim3 grid(static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((count + 255) / 256, 512))));
        CUDA_LAUNCH(fp8_round_trip_kernel<T>, grid, 256, 0, ctx.stream, k.data() + row0 * W, count, W, c.head_dim,
                    k_scale.data(), k_lut.data(), kind);
        CUDA_LAUNCH(fp8_round_trip_kernel<T>, grid, 256, 0, ctx.stream, v.data() + row0 * W, count, W, c.head_dim,
                    v_scale.data(), v_lut.data(), kind);
    }
};

// ---- the forward ---------------------------------------------------------------------------

// n tokens x[n, D] at device positions pos[n], attending over the cache and
// themselves; writes out[n, D] and appends n rows to the cache.
template <typename T>
void forward(const Context& ctx, const Weights<T>& w, const BlockConfig& c, const T* x, const int64_t* pos, int64_t n,
             KvCache<T>& cache, RunState<T>& s, T* out) {
    const int64_t D = c.d_model, H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim, F = c.ffn_dim;
    const int64_t Q = c.q_width(), KVW = c.kv_width();
    const float eps = static_cast<float>(c.norm_eps);
    const float w_offset = c.norm_plus_one ? 1.0f : 0.0f;  // Gemma's (1 + w), every norm
    const cudaStream_t st = ctx.stream;

    // attn_in = self.input_layernorm(x)
    launch_rmsnorm<T>(x, nullptr, nullptr, w.attn_norm.data(), s.attn_in.data(), n, D, eps, w_offset, st);

    // q, k, v = self.q_proj(attn_in), self.k_proj(attn_in), self.v_proj(attn_in)   as one product
    // (+ q_proj.bias etc., Qwen2: the taps q, k, v include it)
    if (c.qkv_bias)
        gemm_bias<T>(ctx, s.attn_in.data(), w.wqkv.data(), w.bqkv.data(), s.qkv.data(), n, D, Q + 2 * KVW);
    else
        gemm<T>(ctx, s.attn_in.data(), w.wqkv.data(), s.qkv.data(), n, D, Q + 2 * KVW);

    // q, k = self.q_norm(q), self.k_norm(k)  (Qwen3);  q, k = apply_rotary_pos_emb(q, k, cos, sin)
    // self.cache_k[len:len+n] = k;  self.cache_v[len:len+n] = v
    QkvRopeArgs<T> r;
    r.qkv = s.qkv.data();
    r.q_rot = s.q_rot.data();
    r.cache_k = cache.k.data() + cache.len * KVW;
    r.cache_v = cache.v.data() + cache.len * KVW;
    r.tokens = n;
    r.n_heads = H;
    r.n_kv_heads = KV;
    r.hd = hd;
    r.pos = pos;
    // (a NoPE layer rotates no dim: every dim passes through, normed under QK-norm)
    r.freqs = {w.inv_freq.data(), c.nope ? 0 : c.rotary(), scalar::rope_attention_factor(rope_params(c))};
    r.layout = effective_layout(ctx, c.rope_layout);
    r.q_norm = c.qk_norm ? w.q_norm.data() : nullptr;
    r.k_norm = c.qk_norm ? w.k_norm.data() : nullptr;
    r.eps = eps;
    r.w_offset = w_offset;
    launch_qkv_rope_cache<T>(r, st);
    cache.round_trip(ctx, c, cache.len, n);  // an FP8 cache (decode): what it gives back
    CUDA_CHECK(cudaMemcpyAsync(cache.pos.data() + cache.len, pos, sz(n) * sizeof(int64_t), cudaMemcpyDeviceToDevice, st));
    cache.len += n;

    // attn = softmax(q k^T / sqrt(hd) + causal(pos)) v   over every cached row
    const AttentionPlan plan = plan_attention(n, cache.len, H, KV, hd, ctx.sm_count);
    if (plan.scratch_floats > s.scratch.size()) {
        ctx.sync("attention scratch");  // the old scratch may still be in use by queued work
        s.scratch = DeviceBuffer<float>("attention split scratch", plan.scratch_floats, st);
    }
    AttentionArgs<T> a;
    a.q = s.q_rot.data();
    a.k = cache.k.data();
    a.v = cache.v.data();
    a.out = s.attn.data();
    a.q_pos = pos;
    a.k_pos = cache.pos.data();
    a.tokens = n;
    a.keys = cache.len;
    a.q_stride = Q;
    a.kv_stride = KVW;
    a.out_stride = Q;
    a.n_heads = H;
    a.n_kv_heads = KV;
    a.hd = hd;
    static_cast<AttentionVariant&>(a) = attention_variant(c);
    a.sinks = c.attn_sinks ? w.sinks.data() : nullptr;
    a.gqa_tiled = ctx.faults.gqa_tiled;
    launch_attention<T>(a, plan, s.scratch.data(), ctx);

    // h = x + self.o_proj(attn);  ffn_in = self.post_attention_layernorm(h)
    // (Gemma 2/3: h = x + self.post_attention_layernorm(self.o_proj(attn)); ffn_in = self.pre_feedforward_layernorm(h))
    gemm<T>(ctx, s.attn.data(), w.wo.data(), s.attn_wo.data(), n, Q, D);
    const T* attn_branch = s.attn_wo.data();
    if (c.sandwich_norm) {
        launch_rmsnorm<T>(s.attn_wo.data(), nullptr, nullptr, w.attn_post_norm.data(), s.post.data(), n, D, eps,
                          w_offset, st);
        attn_branch = s.post.data();
    }
    launch_rmsnorm<T>(x, attn_branch, s.h.data(), w.ffn_norm.data(), s.ffn_in.data(), n, D, eps, w_offset, st);

    // ffn_out = self.w2(act_fn(self.w1(ffn_in)) * self.w3(ffn_in))   (F.silu, or Gemma's gelu_tanh)
    gemm<T>(ctx, s.ffn_in.data(), w.w13.data(), s.gu.data(), n, D, 2 * F);
    launch_swiglu_act<T>(s.gu.data(), s.g.data(), n, F, c.hidden_act, st);
    gemm<T>(ctx, s.g.data(), w.w2.data(), s.ffn_out.data(), n, F, D);

    // out = h + ffn_out   (Gemma 2/3: h + self.post_feedforward_layernorm(ffn_out))
    const T* ffn_branch = s.ffn_out.data();
    if (c.sandwich_norm) {
        // (s.post is free again: h has taken the attention branch)
        launch_rmsnorm<T>(s.ffn_out.data(), nullptr, nullptr, w.ffn_post_norm.data(), s.post.data(), n, D, eps,
                          w_offset, st);
        ffn_branch = s.post.data();
    }
    launch_add<T>(s.h.data(), ffn_branch, out, n * D, st);
}

// ---- checks --------------------------------------------------------------------------------

inline void check_block(const char* op, View x, Positions pos, const BlockWeights& w, const BlockConfig& c) {
    scalar::detail::expect(c.d_model > 0 && c.n_heads > 0 && c.n_kv_heads > 0 && c.head_dim > 0 && c.ffn_dim > 0, op,
                "d_model, n_heads, n_kv_heads, head_dim and ffn_dim must be positive");
    scalar::detail::expect(c.n_heads % c.n_kv_heads == 0, op,
                "n_heads = " + std::to_string(c.n_heads) + " must be a multiple of n_kv_heads = " +
                    std::to_string(c.n_kv_heads));
    scalar::detail::expect(c.head_dim % 2 == 0, op, "head_dim must be even for RoPE, found " + std::to_string(c.head_dim));
    scalar::detail::expect(c.head_dim <= kMaxAttentionHeadDim, op,
                "head_dim " + std::to_string(c.head_dim) + " is over " + std::to_string(kMaxAttentionHeadDim));
    scalar::detail::expect_shape(op, "x", x, x.rows, c.d_model);
    scalar::detail::expect_positions(op, "pos", pos, x.rows);
    scalar::detail::check_block_weights(op, w, c);
}


}  // namespace conform::cuda
