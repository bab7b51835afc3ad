// swiglu — the Llama feed-forward: w2(silu(w1(x)) * w3(x)), no norm, no residual;
// Gemma's GeGLU is the same with gelu_tanh for silu (config.hidden_act).
#include <cmath>
#include <vector>

#include "scalar.h"

namespace conform::scalar {

float silu(float g) { return g / (1.0f + std::exp(-g)); }  // silu(a) = a * sigmoid(a), written a / (1 + exp(-a))

// F.gelu(a, approximate="tanh") = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))), written
// a * sigmoid(2 sqrt(2/pi) (a + 0.044715 a^3)) (the same function, since 1 + tanh(z) = 2 sigmoid(2z)),
// which keeps silu's shape and avoids 1 + tanh's cancellation for large negative a.
float gelu_tanh(float g) {
    constexpr float k = 1.5957691216057308f;  // 2 * sqrt(2 / pi)
    return g / (1.0f + std::exp(-k * (g + 0.044715f * g * g * g)));
}

Activation activation(HiddenAct a) { return a == HiddenAct::gelu_tanh ? gelu_tanh : silu; }

void swiglu(View x, View w1, View w3, View w2, MutView out, const MatMul& mm, Activation act) {
    const int64_t T = x.rows;   // tokens
    const int64_t D = x.cols;   // model width
    const int64_t F = w1.cols;  // hidden width
    detail::expect_shape("swiglu", "x", x, T, D);
    detail::expect_shape("swiglu", "w1", w1, D, F);
    detail::expect_shape("swiglu", "w3", w3, D, F);
    detail::expect_shape("swiglu", "w2", w2, F, D);
    detail::expect_shape("swiglu", "out", out, T, D);

    std::vector<float> a(static_cast<size_t>(T * F));  // (T, F) gate, then the gated product
    std::vector<float> b(static_cast<size_t>(T * F));  // (T, F) up
    MutView av{a.data(), T, F};
    MutView bv{b.data(), T, F};

    // a = self.w1(x); b = self.w3(x)
    mm(x, w1, av);
    mm(x, w3, bv);

    // g = act_fn(a) * b   (F.silu, or F.gelu(approximate="tanh"))
    for (int64_t i = 0; i < T * F; i++) a[i] = act(a[i]) * b[i];

    // out = self.w2(g)
    mm(av, w2, out);
}

}  // namespace conform::scalar
