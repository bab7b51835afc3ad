// rope — rotary position embedding, NeoX (half-split) or interleaved pairs.
//
// The angle is computed in double and only cos/sin are rounded to float: the
// implementation's own error then stays far below a float32 angle's (~1e-3 rad
// at position 32768), so a RoPE whose angles lost precision shows up against it.
#include <cmath>

#include "scalar.h"

namespace conform::scalar {

double rope_angle(int64_t pos, double inv_freq) { return static_cast<double>(pos) * inv_freq; }

void rope(View x, Positions pos, const RopeParams& p, MutView out, RopeAngle angle_of) {
    const int64_t hd = p.head_dim;
    detail::expect(hd > 0 && hd % 2 == 0, "rope", "head_dim must be positive and even, found " + std::to_string(hd));
    detail::expect(x.cols % hd == 0, "rope",
                   "x " + detail::shape_str(x.rows, x.cols) + " must have a multiple of head_dim = " +
                       std::to_string(hd) + " columns");
    const int64_t T = x.rows;            // tokens
    const int64_t n_heads = x.cols / hd;  // H for q, KV for k
    const int64_t half = hd / 2;          // rotated pairs per head
    detail::expect_shape("rope", "x", x, T, n_heads * hd);
    detail::expect_positions("rope", "pos", pos, T);
    detail::expect_shape("rope", "out", out, T, n_heads * hd);

    for (int64_t t = 0; t < T; t++) {
        const float* xt = x.row(t);  // (n_heads * hd,)
        float* yt = out.row(t);      // (n_heads * hd,)
        for (int64_t i = 0; i < half; i++) {
            // inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2) / hd)); freqs = torch.outer(pos, inv_freq)
            const double inv_freq = std::pow(p.theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
            const double angle = angle_of(pos[t], inv_freq);
            const float c = static_cast<float>(std::cos(angle));
            const float s = static_cast<float>(std::sin(angle));
            // neox:        pair (i, i + hd/2)   (HF rotate_half)
            // interleaved: pair (2i, 2i + 1)    (Meta view_as_complex)
            const int64_t a = p.layout == RopeLayout::neox ? i : 2 * i;
            const int64_t b = p.layout == RopeLayout::neox ? i + half : 2 * i + 1;
            // q_embed = (q * cos) + (rotate_half(q) * sin), one head at a time
            for (int64_t h = 0; h < n_heads; h++) {
                // read both before writing either, so out may alias x
                const float xa = xt[h * hd + a];
                const float xb = xt[h * hd + b];
                yt[h * hd + a] = xa * c - xb * s;
                yt[h * hd + b] = xb * c + xa * s;
            }
        }
    }
}

}  // namespace conform::scalar
