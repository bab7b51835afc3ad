#include "reference/torch_ops.h"

namespace conform::ref {

// HF LlamaRMSNorm.forward:
//   hidden_states = hidden_states.to(torch.float32)
//   variance = hidden_states.pow(2).mean(-1, keepdim=True)
//   hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
//   return self.weight * hidden_states.to(input_dtype)
// HF GemmaRMSNorm.forward (Gemma 1, 2, 3), the weight an offset from one:
//   output = self._norm(x.float())
//   output = output * (1.0 + self.weight.float())
//   return output.type_as(x)
torch::Tensor rmsnorm(const torch::Tensor& x, const torch::Tensor& weight, double eps, bool plus_one, const Ctx& ctx) {
    const auto input_dtype = x.scalar_type();
    // Below float32, HF normalises in float32 and casts back before the weight.
    auto xf = (input_dtype == torch::kFloat64) ? x : x.to(torch::kFloat32);
    const double D = static_cast<double>(x.size(-1));
    Ctx fctx{xf.scalar_type(), xf.scalar_type(), ctx.order, ctx.v};
    torch::Tensor y;
    if (ctx.v.layer_norm) xf = xf - sum_last(xf, fctx) / D;  // LayerNorm's centring (no bias), then as below
    if (ctx.v.rms_mean_abs) {
        auto mean_abs = sum_last(xf.abs(), fctx) / D;
        y = xf * torch::rsqrt(mean_abs + eps);
    } else if (ctx.v.rms_eps_outside) {
        auto variance = sum_last(xf.pow(2), fctx) / D;
        y = xf / (torch::sqrt(variance) + eps);
    } else if (ctx.v.rms_tail_skipped) {
        const int64_t n = x.size(-1), whole = n - n % 8;  // the groups of 8; the tail left out of the sum
        auto variance = whole > 0 ? sum_last(xf.narrow(-1, 0, whole).pow(2), fctx) / D
                                  : torch::zeros_like(xf.narrow(-1, 0, 1));  // under 8: nothing summed
        y = xf * torch::rsqrt(variance + eps);
    } else {
        auto variance = sum_last(xf.pow(2), fctx) / D;
        y = xf * torch::rsqrt(variance + eps);
    }
    // Gemma scales in float32 and rounds once; Llama rounds before the weight.
    if (plus_one) return (y * (1.0 + weight.to(y.scalar_type()))).to(input_dtype);
    return weight * y.to(input_dtype);
}

}  // namespace conform::ref
