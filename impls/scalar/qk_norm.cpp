// qk_norm — Qwen3's per-head RMSNorm of q and k (applied before RoPE).
#include "scalar.h"

namespace conform::scalar {

void qk_norm(View x, View w, const QkNormParams& p, MutView out, InvRms scale) {
    const int64_t hd = p.head_dim;
    detail::expect(hd > 0, "qk_norm", "head_dim must be positive, found " + std::to_string(hd));
    detail::expect(x.cols % hd == 0, "qk_norm",
                   "x " + detail::shape_str(x.rows, x.cols) + " must have a multiple of head_dim = " +
                       std::to_string(hd) + " columns");
    const int64_t T = x.rows;            // tokens
    const int64_t n_heads = x.cols / hd;  // heads in this tensor (H for q, KV for k)
    detail::expect_shape("qk_norm", "x", x, T, n_heads * hd);
    detail::expect_shape("qk_norm", "w", w, 1, hd);
    detail::expect_shape("qk_norm", "out", out, T, n_heads * hd);

    const float eps = static_cast<float>(p.eps);
    // q = self.q_norm(q.view(T, n_heads, hd))   one RMSNorm per head, shared weight w (hd,)
    for (int64_t t = 0; t < T; t++) {
        for (int64_t h = 0; h < n_heads; h++) {
            rmsnorm_row(out.row(t) + h * hd, x.row(t) + h * hd, w.data, hd, eps, p.plus_one, scale);
        }
    }
}

}  // namespace conform::scalar
