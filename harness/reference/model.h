// harness/reference/model.h — the reference's side of a whole-model forward
// (`conform forward`): the residual stream carried in float64 from block to
// block, so the truth every implementation's layer outputs are compared with
// never passes through float32. Torch-free header; model.cpp includes torch.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/case.h"

namespace conform::ref {

// One block in float64: x[T, D] and the layer's weights (by schema name:
// attn_norm, wq, ..., q_norm / k_norm when c.qk_norm) → the taps after the
// attention sub-layer (h) and after the FFN sub-layer (out).
// With all_taps, every tap of the block too (attn_in, q, k, v, q_rot, k_rot,
// attn, h, ffn_in, ffn_out, out) and rope_in: q as RoPE receives it (after
// QK-norm when c.qk_norm) — the real inputs of each op (conform --inputs model).
struct BlockStep {
    DTensor h, out;
    NamedD taps;
};
// q8_k_inputs: the weights whose inputs an engine quantises to Q8_K
// (Variant::q8_k_inputs); gelu_f16: a GeGLU gate through ggml's float16
// GELU table (Variant::gelu_f16_table). Neither, for the model itself.
BlockStep block_f64(const DTensor& x, const Named& weights, const std::vector<int64_t>& positions,
                    const BlockConfig& c, bool all_taps = false, const std::set<std::string>& q8_k_inputs = {},
                    bool gelu_f16 = false);

// y[T, D] = rmsnorm(x) * weight[1, D], in float64.
DTensor rmsnorm_f64(const DTensor& x, const Tensor& weight, double eps, bool plus_one);

// y[T, N] = x[T, K] @ w[K, N], in float64 (q8_k_input: x through Q8_K first).
DTensor matmul_f64(const DTensor& x, const Tensor& w, bool q8_k_input = false);

}  // namespace conform::ref
