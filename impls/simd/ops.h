// impls/simd/ops.h — the ops on storage-typed rows, split over the pool.
// The Implementation (simd_impl.cpp) stages the contract's float32 views into
// these; the block (block.cpp) and `conform bench` call them directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "conform/config.h"
#include "conform/interface.h"
#include "simd/kernels.h"
#include "simd/pack.h"
#include "simd/rope_table.h"
#include "simd/thread_pool.h"

namespace conform::simd {

// rmsnorm.cpp
void rmsnorm(ThreadPool& pool, Target t, CRows x, size_t T, size_t D, const float* w, float eps, MRows out);

// rope.cpp: x[T, n * hd]
void rope(ThreadPool& pool, Target t, RopeTable& table, CRows x, size_t T, size_t n_heads, const int64_t* pos,
          const RopeParams& p, MRows out);

// qk_norm.cpp: x[T, n * hd]
void qk_norm(ThreadPool& pool, Target t, CRows x, size_t T, size_t n_heads, size_t hd, const float* w, float eps,
             MRows out);

// attention.cpp
void attention(ThreadPool& pool, Target t, const Attn& job);

// paged_attention.cpp: out and lse[T][H] (f32) of a batch over a paged cache
void paged_attention(ThreadPool& pool, Target t, PagedJob& job, float* lse);

// mla_attention.cpp: the latent cache as an engine keeps it, one row of
// [c_kv (dc) | k_pe (dr)] per slot (FlashMLA's 576), from the contract's two
// tensors ckv [rows][dc] and kpe [rows][dr];
// kept in `e` (bf16: the dtype's values, exact);
void mla_latents(ThreadPool& pool, const float* ckv, const float* kpe, size_t rows, size_t dc, size_t dr, Elem e,
                 Buffer& latents);
// then j.out and lse[T][H] of a batch over it; `shape` carries the batch's
// index arrays and page size (paged_job), its heads and rows the kernel's own.
void mla_attention(ThreadPool& pool, Target t, MlaJob& j, const CRows& latents, const PagedJob& shape, float* lse);

// swiglu.cpp: out[T, D] = (act(x @ w1) * (x @ w3)) @ w2, w13 from pack_gate_up
void swiglu(ThreadPool& pool, Target t, CRows x, size_t T, const PackedWeight& w13, const PackedWeight& w2,
            HiddenAct act, MRows out, Buffer& gated, GemmScratch& scratch);

// A mixture of experts (conform/interface.h; docs/moe.md): the contract's
// views as they come, the weights packed once (pack_moe) as an engine holds
// them between calls. `storage` bf16: the weights packed in bf16, and every
// value an engine stores between steps (the routing weights, each expert's
// gate/up, its activation, its output, the sum) rounded to bf16, the
// arithmetic float32 — a bf16 engine's MoE. The router's logits stay
// float32 (DeepSeek's router; HF's bf16 linear would round them, which the
// judge's bf16 margin also allows).
struct MoePacked {
    Elem storage = Elem::f32;
    PackedWeight router;                // [D, E]
    std::vector<PackedWeight> w13, w2;  // per expert: [D, 2F], [F, D]
    PackedWeight ws13, ws2;             // the shared expert's, where the config has one
};
// `route` [T, E] where given: only the experts some token chose are packed
// (a call's; a model packs them all, route null).
MoePacked pack_moe(ThreadPool& pool, const MoeWeights& w, const BlockConfig& c, const View* route = nullptr,
                   Elem storage = Elem::f32);
// moe_route.cpp: route[T, E], each token's weight on each expert (0: not chosen)
void moe_route(ThreadPool& pool, Target t, View x, const MoePacked& p, const MoeWeights& w, const BlockConfig& c,
               MutView route);
// moe_experts.cpp: out[T, D] from a route
void moe_experts(ThreadPool& pool, Target t, View x, View route, const MoePacked& p, const MoeWeights& w,
                 const BlockConfig& c, MutView out);

}  // namespace conform::simd
