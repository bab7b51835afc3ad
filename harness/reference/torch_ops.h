// harness/reference/torch_ops.h — internal to the reference: the ops on
// torch::Tensor. Included only by this folder's .cpp files.
#pragma once

#include <functional>

#include <torch/torch.h>

#include "conform/dtype.h"
#include "reference/reference.h"

namespace conform::ref {

// t's float32 data as a tensor, not copied: it lives as long as t does.
torch::Tensor float_view(const Tensor& t);
// A float32 tensor as precision p holds it (f16: rounded to half, computed in float32).
torch::Tensor as_precision(const torch::Tensor& f32, Precision p);

// Everything an op needs to know beyond its tensors.
struct Ctx {
    torch::Dtype dtype;      // the precision being simulated (f64 for the truth)
    torch::Dtype acc_dtype;  // accumulation for sequential sums (f32 below f32)
    Order order;
    const Variant& v;
    ActQuant act_quant = ActQuant::none;  // Options::act_quant
    const std::vector<uint8_t>* route_taken = nullptr;  // Options::route_taken
};

// y = a @ b, in the context's summation order. a[..., M, K], b[..., K, N].
torch::Tensor matmul(const torch::Tensor& a, const torch::Tensor& b, const Ctx& ctx);
// The input of the matmul against weight `w` as the engine feeds it: a
// itself, or (w in ctx.v.q8_k_inputs) a through Q8_K and back, or a through
// the declared ctx.act_quant and back (conform/dtype.h act_quant_row).
torch::Tensor linear_input(const torch::Tensor& a, const char* w, const Ctx& ctx);
// x[..., K] quantised per row to q's blocks and dequantised, in float32 as
// ggml-cpu does it (conform/dtype.h act_quant_row; Q8_K: quantize_row_q8_K_ref,
// Q8_0: quantize_row_q8_0_ref); returned in x's dtype.
torch::Tensor act_quant_round_trip(const torch::Tensor& x, ActQuant q);
// sum over the last dim, keepdim, in the context's summation order.
torch::Tensor sum_last(const torch::Tensor& x, const Ctx& ctx);

// out = weight * (x * rsqrt(mean(x^2) + eps))                         (HF LlamaRMSNorm)
// plus_one: (x * rsqrt(mean(x^2) + eps)) * (1 + weight)                 (HF GemmaRMSNorm)
// (the variant may override plus_one)
torch::Tensor rmsnorm(const torch::Tensor& x, const torch::Tensor& weight, double eps, bool plus_one, const Ctx& ctx);

// x[T, n*hd] rotated per head at positions[T] (int64): the first p.rotary()
// dims of each head, with p's scaling; dynamic NTK's length is max(positions) + 1.
torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& positions, RopeParams p, const Ctx& ctx);

// The angles RoPE turns each pair by, [T, p.rotary()/2]: positions ⊗ the
// scaled inverse frequencies (in the context's dtype).
torch::Tensor rope_angles(const torch::Tensor& positions, const RopeParams& p, const Ctx& ctx);
// The factor cos and sin are multiplied by: yarn's attention factor, else 1.
double rope_attention_factor(const RopeParams& p, const Ctx& ctx);

// x[T, n*hd] → per-head rmsnorm with weight[hd]                         (HF Qwen3 q_norm / k_norm)
torch::Tensor qk_norm(const torch::Tensor& x, const torch::Tensor& weight, int64_t head_dim, double eps, bool plus_one,
                      const Ctx& ctx);

// The sliding window's edge for queries at q_pos [T]: [T, 1], a key is in
// the window iff k_pos > edge — q_pos - W as the config has it, or a
// variant's window (from the call's first query, by whole pages, or none
// where the call has more than one query). The reference's attention and
// its bound (noise.cpp) both take it from here, so a window hypothesis is
// bounded over the keys it sums.
torch::Tensor window_edge(const torch::Tensor& q_pos, int64_t W, const Variant& v);

// q[T, H*hd], k/v[S, KV*hd] → [T, H*hd] under p (conform/config.h
// AttentionParams: heads, the sliding window, the soft-cap; the variant may
// replace the window or the cap; p.sinks is not read). `sinks`, when defined,
// is [1, H] or [H]: each head's sink logit, a key of value 0 that every row
// sees (gpt-oss). `cached`, when defined, is a [T, S] bool:
// the keys each query can reach at all (decode: what is in the cache at its
// step), which a mask variant cannot widen. `lse`, when given, receives
// [T, H]: the log of each row's softmax denominator (natural log; -inf for a
// row that sees no key).
torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& q_pos, const torch::Tensor& k_pos, const AttentionParams& p,
                        const torch::Tensor& sinks, const Ctx& ctx, const torch::Tensor& cached = {},
                        torch::Tensor* lse = nullptr);

// How a cache's values reach attention: as they are, or through an FP8 cache
// (config.h kv_cache_dtype): fp8(x / scale) written, code * scale read — the
// division in float32, as the contract has it, so every honest kernel that
// is handed the same x stores the same code; the product exact in float64.
// `scale` holds the tensor's one scale or one per kv head (columns g*hd ..
// of head g); `k_scale`, given for V, is what a variant reading V with K's
// scale takes. A variant writes or reads it as a kernel with a cache bug does.
// paged_attention reads its pool through it; decode its own k_rot and v.
struct CacheRead {
    KvCacheDtype dtype = KvCacheDtype::none;
    std::vector<float> scale;  // per column (its head's scale), empty without a cache
    Fp8Rounding how;
    int times = 1;  // the scale multiplied in this often on the read (-1: divided once)
    bool reciprocal = false;  // written as fp8(x * fl(1 / s)), in float32 as a kernel does

    CacheRead() = default;
    CacheRead(KvCacheDtype d, const std::vector<float>& own_scale, int64_t head_dim, int64_t W, const Variant& v,
              const std::vector<float>* k_scale = nullptr) {
        using K = Variant::KvFp8;
        if (d == KvCacheDtype::none) return;
        dtype = d;
        const std::vector<float>& own = k_scale && v.kv_fp8 == K::k_scale_for_v ? *k_scale : own_scale;
        scale.resize(static_cast<size_t>(W));
        for (int64_t j = 0; j < W; ++j) {
            const size_t g = own.size() == 1 || v.kv_fp8 == K::per_tensor_read ? 0 : static_cast<size_t>(j / head_dim);
            scale[static_cast<size_t>(j)] = v.kv_fp8 == K::scale_ignored ? 1.0f : own[g];
        }
        how.truncate = v.kv_fp8 == K::truncated;
        how.saturate = v.kv_fp8 != K::unsaturated;
        times = v.kv_fp8 == K::dequant_twice ? 2 : v.kv_fp8 == K::read_divides ? -1 : 1;
        reciprocal = v.kv_fp8 == K::reciprocal_scale;
    }
    double value(float x, int64_t j) const {
        if (dtype == KvCacheDtype::none) return x;
        const float s = scale[static_cast<size_t>(j)];
        double y = fp8_round(reciprocal ? x * (1.0f / s) : x / s, dtype, how);
        if (times < 0) return y / s;
        for (int t = 0; t < times; ++t) y *= s;
        return y;
    }
};

// decode's FP8 cache: every row of t [n, W] (k_rot or v, in the precision it
// was computed in) as the cache gives it back — the value taken to float32
// (what a kernel hands its cache write), its code, code * scale in float64,
// then rounded to t's precision where that is below it. Unchanged without a cache.
torch::Tensor cache_round_trip(const torch::Tensor& t, const CacheRead& cache);

// paged_attention's index arrays, and one sequence of its batch gathered
// out of the pages (paged_attention.cpp; the a-priori bound reads them too).
struct PagedSeqs {
    const std::vector<int64_t>& qo_indptr;
    const std::vector<int64_t>& kv_indptr;
    const std::vector<int64_t>& kv_indices;
    const std::vector<int64_t>& kv_last_page_len;
    int64_t page_size;
    int64_t pages;  // in the pool
    // An FP8 cache (config.kv_cache_dtype): the scales, one or one per kv head.
    KvCacheDtype cache = KvCacheDtype::none;
    std::vector<float> k_scale, v_scale;
    int64_t head_dim = 0;
};
// The batch of a case, its cache as `config` has it (the case's, or a variant's).
PagedSeqs paged_seqs(const Case& c, const BlockConfig& config);
struct PagedSeq {
    int64_t q_begin = 0, q_len = 0, kv_len = 0;
    torch::Tensor q, k, v;        // [q_len, H*hd], [kv_len, KV*hd] x2
    torch::Tensor q_pos, k_pos;   // kv_len - q_len + j; i
};
// k_pool / v_pool: the caches as float32 (float_view: a pool of 174k keys
// is 1.4 GB, and converted whole it was most of the reference's time); the
// rows gathered are converted to precision p, one sequence at a time.
PagedSeq gather_sequence(const torch::Tensor& q, const torch::Tensor& k_pool, const torch::Tensor& v_pool, Precision p,
                         const PagedSeqs& s, int64_t b, const Variant& v);
// (out [T, H*hd], lse [T, H]) of the batch, one sequence at a time.
std::pair<torch::Tensor, torch::Tensor> paged_attention(const torch::Tensor& q, const torch::Tensor& k_pool,
                                                        const torch::Tensor& v_pool, Precision p, const PagedSeqs& s,
                                                        const BlockConfig& cfg, const torch::Tensor& sinks,
                                                        const Ctx& ctx);

// mla_attention (mla_attention.cpp): each sequence's c_kv rows gathered as
// its keys and its k_pe rows as its values (gather_sequence), then its
// heads assembled for attention(): q [T, H*hd], k [S, H*hd] = [k_nope |
// k_pe] and v [S, H*hd], each head zero-padded to hd = max(dn + dr, dv);
// kv [S, H*(dn + dv)] is kv_b_proj's output (or a bound of it).
struct MlaHeads {
    torch::Tensor q, k, v;
};
int64_t mla_head_dim(const BlockConfig& c);
AttentionParams mla_attention_params(const BlockConfig& c);  // heads of mla_head_dim, the model's scale
MlaHeads mla_assemble(const torch::Tensor& q, const torch::Tensor& kv, const torch::Tensor& kpe, const BlockConfig& c);
// (out [T, H*dv], lse [T, H]) of the batch, one sequence at a time.
std::pair<torch::Tensor, torch::Tensor> mla_attention(const torch::Tensor& q, const torch::Tensor& ckv_pool,
                                                      const torch::Tensor& kpe_pool, const torch::Tensor& w_kv_b,
                                                      Precision p, const PagedSeqs& s, const BlockConfig& cfg,
                                                      const Ctx& ctx);

// F.gelu(a, approximate="tanh") written a * sigmoid(2 sqrt(2/pi) (a + 0.044715 a^3)): the same
// function, without 0.5 a (1 + tanh z)'s cancellation. torch's tanh form returns exactly 0 in
// float64 once tanh(z) rounds to -1 (a below about -7.3), where the value is ~1e-18 and an
// honest kernel's is too: an all-zero truth then makes any such output's nmse infinite.
inline torch::Tensor gelu_tanh(const torch::Tensor& a) {
    return a * torch::sigmoid(a.add(a.pow(3), 0.044715).mul(1.5957691216057308));
}

// (act(x @ w1) * (x @ w3)) @ w2, act = F.silu or F.gelu(approximate="tanh") (config.hidden_act)
torch::Tensor swiglu(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w3, const torch::Tensor& w2,
                     HiddenAct act, const Ctx& ctx);

// A mixture-of-experts FFN's weights (conform/interface.h MoeWeights), each
// undefined where its twist is off.
struct MoeTensors {
    torch::Tensor w_router, router_bias, e_bias, w13, w2, b13, b2, ws13, ws2, ws_gate;
    // Where set, w13 and w2 are held as stored (the case's float32, not
    // copied) and each chosen expert's slice goes through this into the
    // computation's precision when it is used: a full-size layer's experts
    // (qwen3-30b-a3b: 2.4 GB in float32) are never all in float64 at once.
    std::function<torch::Tensor(const torch::Tensor&)> expert_weight;
};
// The router's stages, per token: logits [T, E], scores (softmax or sigmoid),
// the scores the choice is made on (+ e_bias; the groups not kept -inf) and,
// with groups, each group's score [T, n_group].
struct MoeScores {
    torch::Tensor logits, scores, choice, group_scores;
};
MoeScores moe_scores(const torch::Tensor& x, const MoeTensors& w, const BlockConfig& c, const Ctx& ctx);
// route [T, E]: each token's weight on each expert, 0 for the experts it did not choose.
torch::Tensor moe_route(const torch::Tensor& x, const MoeTensors& w, const BlockConfig& c, const Ctx& ctx);
// out [T, D]: sum over e with route[t, e] != 0 of route[t, e] * expert_e(x_t) (+ the shared expert).
torch::Tensor moe_experts(const torch::Tensor& x, const torch::Tensor& route, const MoeTensors& w,
                          const BlockConfig& c, const Ctx& ctx);

// The block; returns every tap by name. decode_from: tokens at index >= this
// are decode steps (only Variant::decode_pos_shift looks at it).
std::map<std::string, torch::Tensor> block(const std::map<std::string, torch::Tensor>& in, const torch::Tensor& positions,
                                           const BlockConfig& c, int64_t decode_from, const Ctx& ctx);

}  // namespace conform::ref
