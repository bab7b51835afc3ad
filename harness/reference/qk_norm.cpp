#include "reference/torch_ops.h"

namespace conform::ref {

// HF Qwen3Attention.forward:
//   query_states = self.q_norm(self.q_proj(hidden_states).view(hidden_shape))
// i.e. RMSNorm over each head's head_dim slice, weight [head_dim], before RoPE.
torch::Tensor qk_norm(const torch::Tensor& x, const torch::Tensor& weight, int64_t head_dim, double eps, const Ctx& ctx) {
    const int64_t T = x.size(0), n = x.size(1) / head_dim;
    auto heads = x.reshape({T, n, head_dim});             // [T, n, hd]
    return rmsnorm(heads, weight.reshape({head_dim}), eps, ctx).reshape({T, n * head_dim});
}

}  // namespace conform::ref
