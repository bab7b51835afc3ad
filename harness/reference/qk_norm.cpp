#include "reference/torch_ops.h"

namespace conform::ref {

// HF Qwen3Attention.forward:
//   query_states = self.q_norm(self.q_proj(hidden_states).view(hidden_shape))
// i.e. RMSNorm over each head's head_dim slice, weight [head_dim], before RoPE.
// Gemma 3's q_norm / k_norm are GemmaRMSNorm: (1 + w) with plus_one.
torch::Tensor qk_norm(const torch::Tensor& x, const torch::Tensor& weight, int64_t head_dim, double eps, bool plus_one,
                      const Ctx& ctx) {
    const int64_t T = x.size(0), n = x.size(1) / head_dim;
    auto heads = x.reshape({T, n, head_dim});             // [T, n, hd]
    return rmsnorm(heads, weight.reshape({head_dim}), eps, plus_one, ctx).reshape({T, n * head_dim});
}

}  // namespace conform::ref
