#include "reference/torch_ops.h"

namespace conform::ref {

// HF LlamaMLP.forward (weights stored [in, out], so x @ W):
//   down_proj(act_fn(gate_proj(x)) * up_proj(x))
torch::Tensor swiglu(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w3, const torch::Tensor& w2,
                     const Ctx& ctx) {
    auto gate = matmul(linear_input(x, "w1", ctx), w1, ctx);  // [T, F]
    auto up = matmul(linear_input(x, "w3", ctx), w3, ctx);    // [T, F]
    auto g = ctx.v.swiglu_gate_on_up ? gate * torch::silu(up)
             : ctx.v.gelu_gate        ? torch::gelu(gate) * up
                                      : torch::silu(gate) * up;
    return matmul(linear_input(g, "w2", ctx), w2, ctx);  // [T, D]
}

}  // namespace conform::ref
