// impls/simd/engine.h — one decoder block as an inference engine runs it:
// weights packed (and converted to bf16) once, activations in preallocated
// buffers, a KV cache that persists between decode steps.
//
//   attn_in      = rmsnorm(x)                         rows over the pool
//   qkv          = attn_in @ [wq | wk | wv]           one packed product
//   q_rot, cache = rope(qk_norm?(q)), rope(qk_norm?(k)), v   one fused pass per row
//   cache        = fp8(cache / scale) * scale          decode with an FP8 cache, the new rows
//   attn         = attention(q_rot, cache)            GQA by index, online softmax
//   attn_wo      = attn @ wo
//   attn_post    = rmsnorm(attn_wo)                   sandwich_norm only (Gemma 2/3)
//   h, ffn_in    = x + attn_wo, rmsnorm(h)            one fused pass per row (attn_post for attn_wo)
//   gated        = silu(ffn_in @ w1) * (ffn_in @ w3)  one product over packed gate/up panels
//   out          = h + gated @ w2                     residual in the product's epilogue
//                  h + rmsnorm(gated @ w2)            sandwich_norm: stored, normed, then added
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "conform/config.h"
#include "conform/impl.h"
#include "simd/buffer.h"
#include "simd/pack.h"
#include "simd/rope_table.h"
#include "simd/thread_pool.h"

namespace conform::simd {

struct EngineWeights {
    BlockConfig config;
    Elem elem = Elem::f32;
    // Norm weights as f32 (in bf16 mode holding bf16 values): vectors, read once per row.
    std::vector<float> attn_norm, ffn_norm, q_norm, k_norm;
    std::vector<float> attn_post_norm, ffn_post_norm;  // sandwich_norm only
    std::vector<float> bqkv;  // [bq | bk | bv] as stored, beside wqkv's columns (qkv_bias only)
    std::vector<float> sinks;  // [H] each head's sink logit as stored (attn_sinks only)
    // decode's FP8 cache (config.kv_cache_dtype): each kv head's scale [KV]
    // and read table [KV * 256] (dtype.h fp8_read_table), for K and V, built
    // once. The cache keeps each value as its code's value times the scale,
    // in elem: what attention reads is what an FP8 cache gives back.
    std::vector<float> k_scale, v_scale, k_table, v_table;
    PackedWeight wqkv, wo, w13, w2;
};

// A norm weight as stored: f32, holding bf16 values in bf16 mode.
std::vector<float> stored_vector(View w, Elem e);
// A norm's weight as the row kernels multiply by it: stored_vector, and
// 1 + w where the config has Gemma's norms (BlockConfig::norm_plus_one).
std::vector<float> norm_vector(View w, Elem e, bool plus_one);

EngineWeights prepare_weights(ThreadPool& pool, const BlockWeights& w, const BlockConfig& c, Elem e);

struct KvCache {
    Buffer k, v;               // [capacity][KV hd]: k after RoPE, v as projected
    std::vector<int64_t> pos;  // [capacity]
    size_t len = 0;            // rows filled

    void reset(Elem e, size_t capacity, size_t kv_width);
};

// Every activation of one forward, sized for the largest forward so far. In
// bf16 mode all are bf16 but the residual stream (h, out), which stays f32 as
// in mixed-precision engines: it is what every layer adds to, and rounding it
// to 8 bits at each layer would compound; bf16 rounding of out would also be
// a second rounding on top of attn_wo's and ffn_out's.
struct RunState {
    Buffer attn_in, qkv, q_rot, attn, attn_wo, attn_post, h, ffn_in, gated, ffn_out, ffn_post, out;
    GemmScratch gemm;
};

struct EngineContext {
    ThreadPool& pool;
    Target target;
    RopeTable& rope;
    // The call's sequence length (max position + 1), which dynamic NTK's base
    // depends on: decode() sets it for all its steps, so each rotates as
    // block() over the same tokens does. 0: the forward's own positions.
    int64_t rope_len = 0;
};

// One forward over the n rows of x (stored as w.elem) at positions pos:
// appends their k and v to the cache, attends over everything cached, and
// leaves every activation in the first n rows of s.
void forward(EngineContext& ctx, const EngineWeights& w, CRows x, const int64_t* pos, size_t n, KvCache& cache,
             RunState& s);

// decode.cpp: T tokens of x through one cache, as a server decodes them: the
// first `prefill` in one forward, then every later token alone. out[T, D] as
// float32. ctx.rope_len should be the whole call's (max position + 1).
void decode(EngineContext& ctx, const EngineWeights& w, CRows x, const int64_t* pos, size_t T, size_t prefill,
            MutView out);

}  // namespace conform::simd
