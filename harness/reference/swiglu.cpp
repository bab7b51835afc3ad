#include <cmath>

#include "reference/torch_ops.h"

namespace conform::ref {

namespace {

// ggml's ggml_table_gelu_f16, as ggml-cpu.c fills it: at every float16 a,
// f16(0.5f*a*(1.0f + tanhf(SQRT_2_OVER_PI*a*(1.0f + GELU_COEF_A*a*a)))) in
// float32, widened back. Computed the same way here rather than from torch's
// float32 gelu, whose other rounding order could land an entry on the other
// float16 neighbour (on the test models it did not: the table is exact
// either way). What stays approximate is the index: the model rounds its
// float64 gate to float16 where ggml rounds its float32 one.
const torch::Tensor& ggml_gelu_table() {
    static const torch::Tensor table = [] {
        const float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoefA = 0.044715f;
        auto bits = torch::arange(65536, torch::kInt32).to(torch::kInt16);
        const auto a = bits.view(torch::kHalf).to(torch::kFloat32).contiguous();
        auto y = torch::empty_like(a);
        const float* pa = a.data_ptr<float>();
        float* py = y.data_ptr<float>();
        for (int64_t i = 0; i < 65536; ++i) {
            const float x = pa[i];
            const float inner = kSqrt2OverPi * x * (1.0f + kCoefA * x * x);
            py[i] = 0.5f * x * (1.0f + std::tanh(inner));
        }
        return y.to(torch::kHalf).to(torch::kFloat32);
    }();
    return table;
}

}  // namespace

// HF LlamaMLP.forward / GemmaMLP.forward (weights stored [in, out], so x @ W):
//   down_proj(act_fn(gate_proj(x)) * up_proj(x)),  act_fn = ACT2FN[hidden_act]: silu or gelu_pytorch_tanh
torch::Tensor swiglu(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w3, const torch::Tensor& w2,
                     HiddenAct act, const Ctx& ctx) {
    auto gate = matmul(linear_input(x, "w1", ctx), w1, ctx);  // [T, F]
    auto up = matmul(linear_input(x, "w3", ctx), w3, ctx);    // [T, F]
    const HiddenAct a = act;
    const auto act_fn = [&](const torch::Tensor& t) {
        if (ctx.v.gelu_gate) return torch::gelu(t);  // exact (erf) GELU
        if (a == HiddenAct::gelu_tanh && ctx.v.gelu_f16_table) {
            // ggml_vec_geglu_f32: table_f16[f16(a)] (the table holds f16(gelu(a)) at each f16 a), 0 / a past +-10
            const auto idx = t.to(torch::kFloat32).to(torch::kHalf).view(torch::kInt16).to(torch::kInt64).bitwise_and(0xFFFF);
            const auto y = ggml_gelu_table().index_select(0, idx.reshape({-1})).reshape(t.sizes()).to(t.scalar_type());
            return torch::where(t <= -10.0, torch::zeros_like(t), torch::where(t >= 10.0, t, y));
        }
        return a == HiddenAct::gelu_tanh ? gelu_tanh(t) : torch::silu(t);
    };
    auto g = ctx.v.swiglu_gate_on_up ? gate * act_fn(up) : act_fn(gate) * up;
    return matmul(linear_input(g, "w2", ctx), w2, ctx);  // [T, D]
}

}  // namespace conform::ref
