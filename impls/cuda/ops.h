// impls/cuda/ops.h — the op entries, the outer of ggml's three layers: each
// checks its host tensors' shapes, uploads them in the storage type, calls
// its launcher(s), and downloads the outputs through the poison/sentinel
// check. Defined in the .cu file of the op.
#pragma once

#include <vector>

#include "conform/impl.h"
#include "cuda/device.h"
#include "cuda/kernels.h"

namespace conform::cuda {

void op_rmsnorm(const Context& ctx, View x, View w, const RmsNormParams& p, MutView out);
void op_rope(const Context& ctx, View x, Positions pos, const RopeParams& p, MutView out);
void op_qk_norm(const Context& ctx, View x, View w, const QkNormParams& p, MutView out);
void op_attention(const Context& ctx, View q, View k, View v, Positions q_pos, Positions k_pos,
                  const AttentionParams& p, MutView out);
void op_paged_attention(const Context& ctx, View q, View k_cache, View v_cache, const PagedIndex& idx,
                        const PagedAttentionParams& p, MutView out, MutView lse);
void op_swiglu(const Context& ctx, View x, View w1, View w3, View w2, const SwigluParams& p, MutView out);
TapSet op_block(const Context& ctx, View x, const BlockWeights& w, Positions pos, const BlockConfig& c,
                BlockOutputs& out);
void op_decode(const Context& ctx, View x, const BlockWeights& w, Positions pos, int64_t prefill,
               const BlockConfig& c, MutView out);
void op_moe_route(const Context& ctx, View x, const MoeWeights& w, const BlockConfig& c, MutView route);
void op_moe_experts(const Context& ctx, View x, View route, const MoeWeights& w, const BlockConfig& c, MutView out);
void op_moe(const Context& ctx, View x, const MoeWeights& w, const BlockConfig& c, MutView out, MutView route);

// The router's and the experts' arguments from the config (moe_route.cu, moe_experts.cu).
MoeRouteArgs moe_route_args(const BlockConfig& c, int64_t T);
MoeExpertArgs moe_expert_args(const BlockConfig& c, int64_t T);
// The router on x already on the device: its weights uploaded, route [T, E]
// written on the device (moe_route.cu).
template <typename T>
void run_route(const Context& ctx, const DeviceBuffer<T>& x, const MoeWeights& w, const BlockConfig& c,
               DeviceBuffer<T>& route);
// The experts on a route already on the device (moe's router wrote it, or
// moe_experts uploaded it): their weights uploaded, out written (moe_experts.cu).
template <typename T>
void run_experts(const Context& ctx, const DeviceBuffer<T>& x, const DeviceBuffer<T>& route, const MoeWeights& w,
                 const BlockConfig& c, MutView out);

// RoPE's inverse frequencies inv_freq[rotary_dim / 2], scaled as p says
// (dynamic NTK for a sequence of seq_len tokens), computed in double on the
// host by the scalar implementation's own function.
DeviceBuffer<double> rope_inv_freq(const Context& ctx, const RopeParams& p, int64_t seq_len);
// w13[D, 2F], row r = [w1[r] | w3[r]]: x @ w13 = [x @ w1 | x @ w3]. swiglu.cu
std::vector<float> pack_gate_up(View w1, View w3);
// The layout RoPE runs with: the config's, unless Faults::rope_layout_swapped.
RopeLayout effective_layout(const Context& ctx, RopeLayout configured);

}  // namespace conform::cuda
