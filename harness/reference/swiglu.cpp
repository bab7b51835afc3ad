#include "reference/torch_ops.h"

namespace conform::ref {

// HF LlamaMLP.forward / GemmaMLP.forward (weights stored [in, out], so x @ W):
//   down_proj(act_fn(gate_proj(x)) * up_proj(x)),  act_fn = ACT2FN[hidden_act]: silu or gelu_pytorch_tanh
torch::Tensor swiglu(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w3, const torch::Tensor& w2,
                     HiddenAct act, const Ctx& ctx) {
    auto gate = matmul(linear_input(x, "w1", ctx), w1, ctx);  // [T, F]
    auto up = matmul(linear_input(x, "w3", ctx), w3, ctx);    // [T, F]
    const HiddenAct a = ctx.v.hidden_act.value_or(act);
    const auto act_fn = [&](const torch::Tensor& t) {
        if (ctx.v.gelu_gate) return torch::gelu(t);  // exact (erf) GELU
        if (a == HiddenAct::gelu_tanh && ctx.v.gelu_f16_table) {
            // ggml_vec_geglu_f32: table_f16[f16(a)] (the table holds f16(gelu(a)) at each f16 a), 0 / a past +-10
            const auto a16 = t.to(torch::kHalf).to(torch::kFloat32);
            const auto y = torch::gelu(a16, "tanh").to(torch::kHalf).to(t.scalar_type());
            return torch::where(t <= -10.0, torch::zeros_like(t), torch::where(t >= 10.0, t, y));
        }
        return a == HiddenAct::gelu_tanh ? gelu_tanh(t) : torch::silu(t);
    };
    auto g = ctx.v.swiglu_gate_on_up ? gate * act_fn(up) : act_fn(gate) * up;
    return matmul(linear_input(g, "w2", ctx), w2, ctx);  // [T, D]
}

}  // namespace conform::ref
