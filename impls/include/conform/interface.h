// conform/interface.h — the interface every implementation of the block provides
// (conform/impl.h is this and the op table, conform/op_info.h, together).
//
// Conventions (the same for every implementation, see ../../../fixtures/SCHEMA.md):
//   * all tensors row-major; weights stored [in, out] so that y = x @ W;
//   * outputs are written into caller-owned buffers of exactly the documented
//     shape — never resized, never written past their end;
//   * inputs are float32 at the boundary; an implementation running in a lower
//     dtype converts on entry and back on exit (the harness has already
//     rounded the inputs to that dtype, so conversion is exact);
//   * an op the implementation cannot run for a config returns a Support with
//     ok = false and a reason from supports(); calling it anyway throws.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conform/config.h"
#include "conform/ops.h"
#include "conform/tensor.h"

namespace conform {

struct CallTensors;  // conform/op_info.h: one call's tensors, by schema name

// Block weights, all stored [in, out]. q_norm / k_norm are [1, head_dim] and
// present (data != nullptr) iff config.qk_norm.
struct BlockWeights {
    View attn_norm;  // [1, D]
    View wq;         // [D, H*hd]
    View wk;         // [D, KV*hd]
    View wv;         // [D, KV*hd]
    View wo;         // [H*hd, D]
    View ffn_norm;   // [1, D]
    View w1;         // [D, F]   gate
    View w3;         // [D, F]   up
    View w2;         // [F, D]   down
    View q_norm;     // [1, hd]  (qk_norm only)
    View k_norm;     // [1, hd]  (qk_norm only)
    View bq;         // [1, H*hd]   (qkv_bias only) added to attn_in @ wq, before QK-norm and RoPE
    View bk;         // [1, KV*hd]  (qkv_bias only)
    View bv;         // [1, KV*hd]  (qkv_bias only)
    View sinks;      // [1, H]      (attn_sinks only) each head's sink logit, in its softmax's denominator
    View attn_post_norm;  // [1, D]  (sandwich_norm only) h = x + rmsnorm(attn @ wo, attn_post_norm)
    View ffn_post_norm;   // [1, D]  (sandwich_norm only) out = h + rmsnorm(ffn_out, ffn_post_norm)
    // decode with config.kv_cache_dtype only: the FP8 cache's scales, [1, 1]
    // (per tensor) or [1, KV] (per kv head, config.kv_scale_per_head). Every
    // key and value decode caches, the prefill's too, is stored as
    // fp8(k_rot / k_scale) (the division in float32, round to nearest even,
    // saturating) and attention reads it back as code * k_scale; likewise v.
    View k_scale;
    View v_scale;
};

// A mixture-of-experts FFN's weights (moe, moe_route, moe_experts), stored
// [in, out]; a twist's (BlockConfig) present, data != nullptr, only where it is on.
struct MoeWeights {
    View w_router;     // [D, E]        router logits l = x @ w_router
    View router_bias;  // [1, E]        (moe_router_bias) l += router_bias
    View e_bias;       // [1, E]        (moe_selection_bias) added to the scores for the choice only
    View w13;          // [E*D, 2*Fe]   expert e's gate and up, rows e*D .. e*D + D - 1: [gate | up], or
                       //               interleaved gate, up, gate, ... (moe_gate_up_interleaved)
    View w2;           // [E*Fe, D]     expert e's down projection, rows e*Fe .. e*Fe + Fe - 1
    View b13;          // [E, 2*Fe]     (moe_expert_bias) row e added to expert e's x @ w13 (same layout)
    View b2;           // [E, D]        (moe_expert_bias) row e added to expert e's output, before its weight
    View ws13;         // [D, 2*Fs]     (moe_shared_ffn_dim) the shared expert's gate | up
    View ws2;          // [Fs, D]       the shared expert's down projection
    View ws_gate;      // [D, 1]        (moe_shared_gate) the shared expert times sigmoid(x @ ws_gate)
};

// decode's FP8 cache as paged_attention's rules and tables read one: the
// dtype, the scales and their count (kv_cache_dtype none without a cache).
inline PagedAttentionParams decode_cache_params(const BlockConfig& c, const BlockWeights& w) {
    PagedAttentionParams p;
    p.n_kv_heads = c.n_kv_heads;
    p.head_dim = c.head_dim;
    p.kv_cache_dtype = c.kv_cache_dtype;
    p.k_scale = w.k_scale.data;
    p.v_scale = w.v_scale.data;
    p.n_kv_scales = w.k_scale.size();
    return p;
}

// A set of taps, as a bitmask over Tap.
struct TapSet {
    uint32_t bits = 0;
    void add(Tap t) { bits |= 1u << static_cast<unsigned>(t); }
    bool has(Tap t) const { return (bits >> static_cast<unsigned>(t)) & 1u; }
};

// Output buffers for block(). `out` is always provided; a tap whose buffer has
// data == nullptr was not requested and must not be written.
struct BlockOutputs {
    std::array<MutView, kAllTaps.size()> taps{};
    MutView& operator[](Tap t) { return taps[static_cast<size_t>(t)]; }
    const MutView& operator[](Tap t) const { return taps[static_cast<size_t>(t)]; }
};

// Where a batch's sequences are (FlashInfer's ragged queries and paged KV
// cache, its names; vLLM's block table is the same pages as one row per
// sequence: block_table[b][i] = kv_indices[kv_indptr[b] + i]). Sequence b:
//   queries    q rows [qo_indptr[b], qo_indptr[b+1])                     (q_len_b of them)
//   pages      kv_indices[kv_indptr[b] .. kv_indptr[b+1])                (n_b of them, in order)
//   keys       kv_len_b = (n_b - 1) * P + kv_last_page_len[b]; 0 when n_b = 0
//              key i is cache row kv_indices[kv_indptr[b] + i / P] * P + i % P
//   positions  key i at i; query j at kv_len_b - q_len_b + j (the new tokens
//              are the last of the sequence, their keys already in the cache)
// int64 at this boundary, like positions; a kernel wanting int32 narrows them.
struct PagedIndex {
    Positions qo_indptr;         // [B + 1], qo_indptr[0] = 0, non-decreasing, qo_indptr[B] = T
    Positions kv_indptr;         // [B + 1], kv_indptr[0] = 0, non-decreasing, kv_indptr[B] = pages listed
    Positions kv_indices;        // [pages listed], each in [0, num_pages)
    Positions kv_last_page_len;  // [B], in [1, P] for a sequence with pages, 0 for one without
};

struct Support {
    bool ok = true;
    std::string reason;  // why not, when !ok
    static Support yes() { return {}; }
    static Support no(std::string why) { return {false, std::move(why)}; }
};

// How an implementation is made (the registry's factories take it).
struct ImplOptions {
    DType dtype = DType::f32;
    std::string simd_target;  // simd only: force one compiled Highway target ("" = best)
    int threads = 0;          // 0 = implementation's default
};

// Whether an implementation can run on this machine, and why not.
struct Availability {
    bool available = true;
    std::string reason;  // why not, when !available
};

// Thrown by an implementation for a call it cannot honour.
struct ImplError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class Implementation {
   public:
    virtual ~Implementation() = default;

    virtual std::string name() const = 0;
    virtual DType dtype() const = 0;
    virtual Support supports(Op op, const BlockConfig& config) const = 0;

    // out[T, D] = x * rsqrt(mean(x^2, -1) + eps) * w              x[T, D], w[1, D]
    virtual void rmsnorm(View x, View w, const RmsNormParams& p, MutView out) = 0;

    // out[T, n*hd] = x rotated per head by positions               x[T, n*hd], pos[T]
    virtual void rope(View x, Positions pos, const RopeParams& p, MutView out) = 0;

    // out[T, n*hd] = per-head rmsnorm(x_h, w)                       x[T, n*hd], w[1, hd]
    virtual void qk_norm(View x, View w, const QkNormParams& p, MutView out) = 0;

    // out[T, H*hd] = softmax(q k^T / sqrt(hd) + causal(pos)) v     q[T, H*hd], k/v[S, KV*hd]
    virtual void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                           MutView out) = 0;

    // out[T, D] = (act(x @ w1) * (x @ w3)) @ w2                    no norm, no residual
    // act = p.act: silu (SwiGLU) or gelu_tanh (GeGLU)
    virtual void swiglu(View x, View w1, View w3, View w2, const SwigluParams& p, MutView out) = 0;

    // One forward of the block over T tokens at positions pos. Fills out[Tap::out]
    // and every requested tap it materialises; returns the taps it wrote.
    virtual TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) = 0;

    // The first `prefill` tokens in one forward, then the rest one at a time
    // through a KV cache (rotated k, unrotated v). out[T, D] is every token's
    // block output; it must equal block() over all T.
    virtual void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c,
                        MutView out) = 0;

    // Whether the rows it gives a sequence are bit-identical whatever else is
    // in the batch, wherever the sequence's pages are, in whatever order, run
    // after run (an op that pages). conform then checks those relations bit
    // for bit, otherwise within tolerance (harness/run/relations.h).
    virtual bool batch_invariant(Op op) const {
        (void)op;
        return false;
    }

    // What it does to the activations of every weight product of `op`
    // (y = x @ W in swiglu, block, decode) before the product: none, or
    // llama.cpp's Q8_0 / Q8_K blocks (conform/dtype.h act_quant_row). A
    // declaration, not a licence: the judge builds its low-precision
    // baselines with the activations quantised exactly so, and a kernel that
    // quantises more than it declares fails (precision_downgrade).
    virtual ActQuant activation_quant(Op op) const {
        (void)op;
        return ActQuant::none;
    }

    // Whether it has the op at all. An op it does not implement is not
    // offered to it (listed, never failed for want of cases); supports()
    // still declines its cases one by one. A worker says in its hello's
    // ops, a plugin by the table's function; in-repo, cuda has no
    // latent-attention kernel yet.
    virtual bool implements(Op op) const {
        (void)op;
        return true;
    }

    // The twists it computes, per op (conform/twists.h): it is offered a case
    // only where every twist that is on is declared, and its property cases
    // are drawn within them (an undeclared twist costs it no case). In-repo
    // implementations compute every twist (but simd's bf16 decode, whose
    // cache rounds FP8 values to bf16: not kv_cache_dtype); a worker and a
    // plugin say.
    virtual TwistSet twists(Op op) const {
        (void)op;
        return TwistSet::all();
    }

    // An implementation that takes a call whole (a worker, a plugin, a mutant
    // that edits the config): the op, the config and its tensors by schema
    // name, instead of the typed methods. Returns false to be called through
    // them (call_op, conform/op_info.h); true with the taps it wrote.
    virtual bool call(Op op, const BlockConfig& c, CallTensors& t, TapSet& written) {
        (void)op, (void)c, (void)t, (void)written;
        return false;
    }

    // A mixture-of-experts FFN (conform/config.h's moe_* fields; docs/moe.md):
    //   route[t, e] = token t's weight on expert e: the router's (scores, the
    //                 top-k choice, renormalisation, routed_scaling_factor),
    //                 0 for the experts not chosen                              route[T, E]
    //   out[t]      = sum over e with route[t, e] != 0 of
    //                 route[t, e] * expert_e(x_t)   (expert_e(route[t, e] * x_t): moe_weight_on_input)
    //                 + shared(x_t)                                            out[T, D]
    // expert_e(x) = act(x @ w13_e (+ b13_e)) @ w2_e (+ b2_e), act as config says.
    // moe() writes both; moe_route() the route only (into `route`); moe_experts()
    // takes a route (its nonzero entries are the choice) and writes out.
    // Not pure: an implementation that predates them declines them in supports().
    virtual void moe(View x, const MoeWeights& w, const BlockConfig& c, MutView out, MutView route) {
        (void)x, (void)w, (void)c, (void)out, (void)route;
        throw ImplError(name() + " does not implement moe");
    }
    virtual void moe_route(View x, const MoeWeights& w, const BlockConfig& c, MutView route) {
        (void)x, (void)w, (void)c, (void)route;
        throw ImplError(name() + " does not implement moe_route");
    }
    virtual void moe_experts(View x, View route, const MoeWeights& w, const BlockConfig& c, MutView out) {
        (void)x, (void)route, (void)w, (void)c, (void)out;
        throw ImplError(name() + " does not implement moe_experts");
    }

    // A batch of sequences over a paged KV cache (PagedIndex says where each is):
    // for each sequence b and query row t of it, every head h,
    //   out[t, h]  = softmax(q_t,h k_b^T / sqrt(hd), keys at positions <= t's) v_b      q[T, H*hd]
    //   lse[t, h]  = log(sum over those keys of exp(score)), natural log                 lse[T, H]
    // k_cache, v_cache[num_pages * P, KV*hd]: rows no sequence owns hold
    // anything (NaN in conform's cases) and must not be read. A row that sees
    // no key (an empty sequence) gets out = 0 and lse = -inf.
    // Not pure: an implementation that predates it declines it in supports().
    virtual void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx,
                                 const PagedAttentionParams& p, MutView out, MutView lse) {
        (void)q, (void)k_cache, (void)v_cache, (void)idx, (void)p, (void)out, (void)lse;
        throw ImplError(name() + " does not implement paged_attention");
    }

    // Multi-head latent attention (DeepSeek-V2/V3's MLA) over a paged latent
    // cache, batched as paged_attention is (PagedIndex; docs/mla.md). Per
    // sequence b, query row t of it, head h (dn, dr, dv, dc: MlaParams):
    //   k_s,h = [ckv_s @ w_kv_b[:, h*(dn+dv) : h*(dn+dv)+dn] | kpe_s]   (dn + dr)
    //   v_s,h =  ckv_s @ w_kv_b[:, h*(dn+dv)+dn : (h+1)*(dn+dv)]        (dv)
    //   out[t, h] = softmax(q_t,h k_h^T * scale, keys at positions <= t's) v_h   q[T, H*(dn+dr)], out[T, H*dv]
    //   lse[t, h] = log(sum of exp(score)) over those keys                       lse[T, H]
    // scale = p.score_scale(): attn_scale (YaRN's mscale^2 / sqrt(dn + dr)) or
    // 1/sqrt(dn + dr). ckv_cache[num_pages * P, dc], kpe_cache[num_pages * P, dr]:
    // rows no sequence owns hold NaN and must not be read. A kernel may take
    // the absorbed form (q_nope @ w_uk^T against ckv, then @ w_uv): the same
    // function, judged alike. A row that sees no key gets out = 0, lse = -inf.
    // Not pure: an implementation without it declines it in supports().
    virtual void mla_attention(View q, View ckv_cache, View kpe_cache, View w_kv_b, const PagedIndex& idx,
                               const MlaParams& p, MutView out, MutView lse) {
        (void)q, (void)ckv_cache, (void)kpe_cache, (void)w_kv_b, (void)idx, (void)p, (void)out, (void)lse;
        throw ImplError(name() + " does not implement mla_attention");
    }
};

}  // namespace conform
