// rmsnorm — y = x * rsqrt(mean(x^2) + eps) * w, every row on its own
// (Gemma: * (1 + w)).
#include <cmath>

#include "scalar.h"

namespace conform::scalar {

float inv_rms(const float* x, int64_t n, float eps) {
    // ss = x.pow(2).sum(-1)   one float accumulator, index order
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    // eps inside the sqrt (HF/Meta); a correctly rounded 1/sqrt, never an approximate rsqrt instruction
    const float ms = ss / static_cast<float>(n);
    return 1.0f / std::sqrt(ms + eps);
}

void rmsnorm_row(float* out, const float* x, const float* w, int64_t n, float eps, bool plus_one, InvRms scale) {
    // out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    // (GemmaRMSNorm: * (1.0 + self.weight.float()), the 1 + w in float32)
    const float s = scale(x, n, eps);
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * s * (plus_one ? 1.0f + w[i] : w[i]);
}

void rmsnorm(View x, View w, const RmsNormParams& p, MutView out, InvRms scale) {
    const int64_t T = x.rows;  // tokens
    const int64_t D = x.cols;  // normalised width
    detail::expect(D > 0, "rmsnorm", "x must have at least one column, found " + detail::shape_str(T, D));
    detail::expect_shape("rmsnorm", "x", x, T, D);
    detail::expect_shape("rmsnorm", "w", w, 1, D);
    detail::expect_shape("rmsnorm", "out", out, T, D);

    // eps is a double in the params; torch adds it to a float32 tensor in float32.
    const float eps = static_cast<float>(p.eps);
    for (int64_t t = 0; t < T; t++) rmsnorm_row(out.row(t), x.row(t), w.data, D, eps, p.plus_one, scale);
}

}  // namespace conform::scalar
