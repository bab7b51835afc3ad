// impls/cuda/kernels.h — the launchers: the middle of ggml's three layers
// (kernel → launcher → op entry). A launcher takes device pointers in the
// storage type T (float, __nv_bfloat16 or __half), picks the grid and
// launches on a stream; it neither allocates nor synchronises. Each is
// defined, with its kernel, in the .cu file of its op, and instantiated there
// for the three storage types.
#pragma once

#include <cstdint>

#include "conform/config.h"
#include "cuda/runtime.h"

namespace conform::cuda {

class Context;

// ---- rmsnorm.cu -----------------------------------------------------------------

// out[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * (w + w_offset)   x, out [rows, cols], w [cols]
// (w_offset 1: Gemma's (1 + w), added in float32; 0 otherwise)
// With residual != nullptr, x is first replaced by h = x + residual, which is
// stored (rounded to T) in h_out and normalised as stored: the fused
// `h = x + attn @ wo; ffn_in = rmsnorm(h)` of the block.
template <typename T>
void launch_rmsnorm(const T* x, const T* residual, T* h_out, const T* w, T* out, int64_t rows, int64_t cols,
                    float eps, float w_offset, cudaStream_t s);

// out = a + b, elementwise over n values (the block's last residual).
template <typename T>
void launch_add(const T* a, const T* b, T* out, int64_t n, cudaStream_t s);

// ---- rope.cu ---------------------------------------------------------------------

// Where RoPE reads and writes: head u of token t is src[t * src_stride + u * hd]
// → dst[t * dst_stride + u * hd].
template <typename T>
struct HeadRows {
    const T* src = nullptr;
    int64_t src_stride = 0;
    T* dst = nullptr;
    int64_t dst_stride = 0;
};

// RoPE's frequencies: inv_freq[rd/2] in double on the device (scaled as the
// config says), the rotary dims rd (the first rd of each head; the rest pass
// through), and what cos and sin are multiplied by (yarn's attention factor).
struct RopeFreqs {
    const double* inv_freq = nullptr;
    int64_t rd = 0;
    double mscale = 1.0;
};

// x rotated per head at pos[t].
template <typename T>
void launch_rope(HeadRows<T> rows, int64_t T_rows, int64_t n_heads, int64_t hd, const int64_t* pos,
                 RopeFreqs freqs, RopeLayout layout, cudaStream_t s);

// The block's step after the packed QKV product, in one kernel: for every
// token t of qkv[T, (H + 2 KV) hd] = [q | k | v],
//   q_rot[t]        = rope(qk_norm?(q[t], q_norm))
//   cache_k[row0+t] = rope(qk_norm?(k[t], k_norm))      rotated once, cached
//   cache_v[row0+t] = v[t]                               never rotated
// q_norm == nullptr: no QK-norm.
template <typename T>
struct QkvRopeArgs {
    const T* qkv = nullptr;
    T* q_rot = nullptr;
    T* cache_k = nullptr;
    T* cache_v = nullptr;
    int64_t tokens = 0;
    int64_t n_heads = 0, n_kv_heads = 0, hd = 0;
    const int64_t* pos = nullptr;
    RopeFreqs freqs;
    RopeLayout layout = RopeLayout::neox;
    const T* q_norm = nullptr;
    const T* k_norm = nullptr;
    float eps = 0;
    float w_offset = 0;  // 1: Gemma's (1 + w) for q_norm and k_norm
};
template <typename T>
void launch_qkv_rope_cache(const QkvRopeArgs<T>& a, cudaStream_t s);

// ---- attention.cu ------------------------------------------------------------------

// The mask, the logits' transform and the sinks (device memory here) are the
// variant's (conform/config.h AttentionVariant), host and device alike.
template <typename T>
struct AttentionArgs : AttentionVariant {
    const T* q = nullptr;  // [T, H*hd], row stride q_stride
    const T* k = nullptr;  // [S, KV*hd]
    const T* v = nullptr;  // [S, KV*hd]
    T* out = nullptr;      // [T, H*hd]
    const int64_t* q_pos = nullptr;
    const int64_t* k_pos = nullptr;
    int64_t tokens = 0, keys = 0;  // T queries, S keys
    int64_t q_stride = 0, kv_stride = 0, out_stride = 0;
    int64_t n_heads = 0, n_kv_heads = 0, hd = 0;
    bool gqa_tiled = false;  // Faults::gqa_tiled
};

// How a launch of attention is split over the keys, and the float32 scratch
// it needs when it is split (partial outputs and their softmax statistics).
struct AttentionPlan {
    int64_t n_splits = 1;
    int64_t keys_per_split = 0;
    size_t scratch_floats = 0;  // 0 when not split
};
AttentionPlan plan_attention(int64_t T, int64_t S, int64_t n_heads, int64_t n_kv_heads, int64_t hd, int sm_count);
constexpr int64_t kMaxAttentionHeadDim = 256;

template <typename T>
void launch_attention(const AttentionArgs<T>& a, const AttentionPlan& plan, float* scratch, const Context& ctx);

// ---- swiglu.cu ------------------------------------------------------------------------

// g[t, f] = act(gu[t, f]) * gu[t, F + f]       gu = x @ [w1 | w3]  [T, 2F],  g [T, F]; act: silu | gelu_tanh
template <typename T>
void launch_swiglu_act(const T* gu, T* g, int64_t tokens, int64_t F, HiddenAct act, cudaStream_t s);

// ---- moe_route.cu ----------------------------------------------------------------------

// A mixture of experts' router (config.h's moe_* fields), per token:
//   l = x @ w_router (+ router_bias)          float32, whatever T is
//   s = softmax(l) | sigmoid(l)
//   choice = s (+ e_bias); groups; the top K of the choice
//   route[t, e] = s_e (renormalised, times rsf) for the K chosen, else 0   route [T, E]
constexpr int64_t kMaxMoeTopK = 64;  // the experts a token takes: one thread's list (supports() declines more)
struct MoeRouteArgs {
    int64_t T = 0, D = 0, E = 0, K = 0;
    bool softmax = true, router_bias = false, selection_bias = false;
    int64_t n_group = 0, topk_group = 0;
    bool group_max = false, renorm = false;
    float rsf = 0.0f;  // 0: none
    bool router_bf16 = false;  // the fault of the cuda_router_in_bf16 mutant only: logits and scores rounded to bf16
};
template <typename T>
void launch_moe_route(const T* x, const T* w_router, const T* router_bias, const T* e_bias, T* route,
                      const MoeRouteArgs& a, cudaStream_t s);

// ---- moe_experts.cu --------------------------------------------------------------------

// out[t] = sum over e with route[t, e] != 0 of route[t, e] * expert_e(x_t)
// (expert_e(route[t, e] * x_t) with weight_on_input), then + shared(x_t)
// (times sigmoid(x_t @ ws_gate) with shared_gate). An expert's gate | up (h,
// [T, 2 max(F, Fs)]) and its activation (act, [T, max(F, Fs)]) are scratch.
struct MoeExpertArgs {
    int64_t T = 0, D = 0, E = 0, F = 0, Fs = 0;
    bool interleaved = false, weight_on_input = false, expert_bias = false, shared_gate = false;
    float limit = 0.0f;  // gpt-oss's clamped SwiGLU; 0: silu(gate) * up
};
template <typename T>
struct MoeExpertWeights {
    const T *w13 = nullptr, *b13 = nullptr, *w2 = nullptr, *b2 = nullptr;
    const T *ws13 = nullptr, *ws2 = nullptr, *ws_gate = nullptr;
};
template <typename T>
void launch_moe_experts(const T* x, const T* route, const MoeExpertWeights<T>& w, T* h, T* act, T* out,
                        const MoeExpertArgs& a, cudaStream_t s);

// ---- matmul.cu ---------------------------------------------------------------------

// y[M, N] = x[M, K] @ w[K, N] (+ y when accumulate), row-major, float32 accumulation (cuBLAS).
template <typename T>
void gemm(const Context& ctx, const T* x, const T* w, T* y, int64_t M, int64_t K, int64_t N, bool accumulate = false);
// y[M, N] = x @ w + bias[N] broadcast over the rows: one rounding to T (nn.Linear with bias).
template <typename T>
void gemm_bias(const Context& ctx, const T* x, const T* w, const T* bias, T* y, int64_t M, int64_t K, int64_t N);

}  // namespace conform::cuda
