// moe_experts — a mixture of experts' experts and their combine, given the
// route: out[t] = sum over the experts e token t chose (route[t, e] != 0) of
// route[t, e] * expert_e(x_t), plus a shared expert (MixtralSparseMoeBlock's
// loop over experts, GptOssExperts, DeepseekV3MoE.moe + shared_experts).
#include <cmath>
#include <vector>

#include "scalar.h"

namespace conform::scalar {

namespace {

// y[D] = down(act(gate) * up) (+ b2) for one token:
//   h = x @ w13 (+ b13)    w13[D, 2F]: [gate | up], or gate, up interleaved
//   act: silu(gate) * up, or gpt-oss's min(gate, L) * sigmoid(1.702 min(gate, L)) * (clamp(up, -L, L) + 1)
void expert(const float* x, int64_t D, int64_t F, const float* w13, const float* b13, const float* w2,
            const float* b2, bool interleaved, float limit, std::vector<float>& h, float* y, bool clamp = true) {
    h.assign(static_cast<size_t>(2 * F), 0.0f);
    for (int64_t j = 0; j < 2 * F; j++) {
        float acc = 0.0f;
        for (int64_t d = 0; d < D; d++) acc += x[d] * w13[d * 2 * F + j];
        h[j] = b13 ? acc + b13[j] : acc;
    }
    std::vector<float> a(static_cast<size_t>(F));
    for (int64_t i = 0; i < F; i++) {
        float gate = interleaved ? h[2 * i] : h[i];
        float up = interleaved ? h[2 * i + 1] : h[F + i];
        if (limit > 0) {
            if (clamp) {
                gate = std::min(gate, limit);
                up = std::max(-limit, std::min(up, limit));
            }
            a[i] = gate / (1.0f + std::exp(-1.702f * gate)) * (up + 1.0f);
        } else {
            a[i] = silu(gate) * up;
        }
    }
    for (int64_t d = 0; d < D; d++) {
        float acc = 0.0f;
        for (int64_t i = 0; i < F; i++) acc += a[i] * w2[i * D + d];
        y[d] = b2 ? acc + b2[d] : acc;
    }
}

}  // namespace

void moe_experts(View x, View route, const MoeWeights& w, const BlockConfig& c, MutView out, const MoeRules& rules) {
    const int64_t T = x.rows, D = c.d_model, E = c.n_experts, F = c.moe_ffn_dim, Fs = c.moe_shared_ffn_dim;
    detail::expect_shape("moe_experts", "x", x, T, D);
    detail::expect_shape("moe_experts", "route", route, T, E);
    detail::expect_shape("moe_experts", "out", out, T, D);
    check_moe_weights("moe_experts", w, c, false, true);
    const float limit = static_cast<float>(c.moe_swiglu_limit);
    std::vector<float> h, xin(static_cast<size_t>(D)), y(static_cast<size_t>(D));
    for (int64_t t = 0; t < T; t++) {
        const float* xt = x.data + t * D;
        float* o = out.data + t * D;
        for (int64_t d = 0; d < D; d++) o[d] = 0.0f;
        for (int64_t e = 0; e < E; e++) {
            const float r = route.data[t * E + e];
            if (r == 0.0f) continue;  // not chosen
            // Llama 4: the expert's input is r * x; the others weight its output
            for (int64_t d = 0; d < D; d++) xin[d] = c.moe_weight_on_input ? r * xt[d] : xt[d];
            const bool late = rules.down_bias_after_weight && c.moe_expert_bias && !c.moe_weight_on_input;
            const float* b2 = c.moe_expert_bias ? w.b2.data + e * D : nullptr;
            expert(xin.data(), D, F, w.w13.data + e * D * 2 * F, c.moe_expert_bias ? w.b13.data + e * 2 * F : nullptr,
                   w.w2.data + e * F * D, late ? nullptr : b2, c.moe_gate_up_interleaved, limit, h, y.data(),
                   !rules.swiglu_clamp_dropped);
            for (int64_t d = 0; d < D; d++) o[d] += c.moe_weight_on_input ? y[d] : r * y[d] + (late ? b2[d] : 0.0f);
        }
        if (Fs > 0) {
            // shared_experts(x), Qwen2-MoE: * sigmoid(shared_expert_gate(x))
            expert(xt, D, Fs, w.ws13.data, nullptr, w.ws2.data, nullptr, false, 0.0f, h, y.data());
            float gate = 1.0f;
            if (c.moe_shared_gate) {
                float z = 0.0f;
                for (int64_t d = 0; d < D; d++) z += xt[d] * w.ws_gate.data[d];
                gate = 1.0f / (1.0f + std::exp(-z));
            }
            for (int64_t d = 0; d < D; d++) o[d] += (rules.shared_twice ? 2.0f : 1.0f) * gate * y[d];
        }
    }
}

}  // namespace conform::scalar
