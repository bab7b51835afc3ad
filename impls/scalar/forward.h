// impls/scalar/forward.h — what block.cpp and decode.cpp share: one forward's
// activations, the KV cache between forwards, and the checks and packing both
// entry points do first. Internal to impls/scalar/.
#pragma once

#include <cstdint>
#include <vector>

#include "scalar/scalar.h"

namespace conform::scalar {

// ----------------------------------------------------------------------------
// state

// Every activation of one forward over up to `cap` tokens, allocated once per
// block()/decode() call so that forward() itself allocates nothing but the
// ops' own scratch (llama2.c's RunState).
struct RunState {
    Tensor attn_in;   // (cap, D)
    Tensor qkv;       // (cap, (H + 2*KV) * hd)   [q | k | v]
    Tensor q;         // (cap, H * hd)    raw projection (tap q)
    Tensor k;         // (cap, KV * hd)   raw projection (tap k)
    Tensor v;         // (cap, KV * hd)   (tap v), cached as is
    Tensor q_normed;  // (cap, H * hd)    after QK-norm (used only when it is on)
    Tensor k_normed;  // (cap, KV * hd)
    Tensor q_rot;     // (cap, H * hd)
    Tensor k_rot;     // (cap, KV * hd)
    Tensor attn;      // (cap, H * hd)
    Tensor attn_wo;   // (cap, D)         attn @ wo, before the residual
    Tensor attn_post; // (cap, D)         rmsnorm(attn_wo, attn_post_norm)   (sandwich_norm only)
    Tensor h;         // (cap, D)
    Tensor ffn_in;    // (cap, D)
    Tensor ffn_out;   // (cap, D)
    Tensor ffn_post;  // (cap, D)         rmsnorm(ffn_out, ffn_post_norm)    (sandwich_norm only)
    Tensor out;       // (cap, D)

    RunState(const BlockConfig& c, int64_t cap)
        : attn_in(cap, c.d_model),
          qkv(cap, c.q_width() + 2 * c.kv_width()),
          q(cap, c.q_width()),
          k(cap, c.kv_width()),
          v(cap, c.kv_width()),
          q_normed(cap, c.q_width()),
          k_normed(cap, c.kv_width()),
          q_rot(cap, c.q_width()),
          k_rot(cap, c.kv_width()),
          attn(cap, c.q_width()),
          attn_wo(cap, c.d_model),
          attn_post(c.sandwich_norm ? cap : 0, c.d_model),
          h(cap, c.d_model),
          ffn_in(cap, c.d_model),
          ffn_out(cap, c.d_model),
          ffn_post(c.sandwich_norm ? cap : 0, c.d_model),
          out(cap, c.d_model) {}
};

// Everything that persists between decode steps: rotated keys (RoPE is never
// re-applied to a cached key) and values (never rotated), with the position
// of every cached row for the causal test.
struct KvCache {
    Tensor k;                  // (T_total, KV * hd)   k_rot of every token seen
    Tensor v;                  // (T_total, KV * hd)   v of every token seen
    std::vector<int64_t> pos;  // (T_total,)
    int64_t len = 0;           // rows filled so far

    KvCache(const BlockConfig& c, int64_t capacity)
        : k(capacity, c.kv_width()), v(capacity, c.kv_width()), pos(static_cast<size_t>(capacity), 0) {}
};

// x, pos and every weight against the config (block and decode alike).
void check_block_inputs(const char* op, View x, Positions pos, const BlockWeights& w, const BlockConfig& c);

// Rows [0, n) of src into rows [row0, row0 + n) of dst; same width.
void copy_rows(const Tensor& src, int64_t n, MutView dst, int64_t row0);

// wqkv (D, (H + 2*KV) * hd), built once per call from the caller's weights.
Tensor packed_qkv(const BlockWeights& w, const BlockConfig& c);

}  // namespace conform::scalar
