// rope — rotary position embedding, NeoX (half-split) or interleaved pairs,
// over the first rotary_dim dims of each head, with long-context scaling.
//
// The angle is computed in double and only cos/sin are rounded to float: the
// implementation's own error then stays far below a float32 angle's (~1e-3 rad
// at position 32768), so a RoPE whose angles lost precision shows up against it.
#include <algorithm>
#include <cmath>
#include <vector>

#include "scalar.h"

namespace conform::scalar {

namespace {

constexpr double kPi = 3.14159265358979323846;

// inv_freq[i] of an unscaled RoPE over rd rotary dims.
//   inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
double plain_inv_freq(double base, int64_t i, int64_t rd) {
    return std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rd));
}

}  // namespace

double rope_dynamic_base(const RopeParams& p, double seq_len) {
    // base = base * ((factor * seq_len / max_position_embeddings) - (factor - 1)) ** (dim / (dim - 2)),
    // only once seq_len > max_position_embeddings: inside the context RoPE is left as it was trained.
    const RopeScaling& s = p.scaling;
    const double orig = static_cast<double>(s.original_max_position);
    if (seq_len <= orig) return p.theta;
    const double rd = static_cast<double>(p.rotary());
    return p.theta * std::pow(s.factor * seq_len / orig - (s.factor - 1.0), rd / (rd - 2.0));
}

void rope_inv_freq(const RopeParams& p, int64_t seq_len, double* inv_freq) {
    const int64_t rd = p.rotary();
    const RopeScaling& s = p.scaling;
    const double base = s.type == RopeScalingType::dynamic ? rope_dynamic_base(p, static_cast<double>(seq_len)) : p.theta;
    const double orig = static_cast<double>(s.original_max_position);

    // yarn: the ramp between interpolated and extrapolated frequencies runs
    // between the dims that make beta_fast and beta_slow turns over the original context.
    //   find_correction_dim(r) = dim * log(max_pos / (r * 2 pi)) / (2 log(base))
    //   low, high = max(floor(dim(beta_fast)), 0), min(ceil(dim(beta_slow)), dim - 1)  (no floor / ceil: truncate false)
    double ramp_low = 0, ramp_high = 1;
    if (s.type == RopeScalingType::yarn) {
        auto correction_dim = [&](double turns) {
            return static_cast<double>(rd) * std::log(orig / (turns * 2.0 * kPi)) / (2.0 * std::log(p.theta));
        };
        const double lo = correction_dim(s.beta_fast), hi = correction_dim(s.beta_slow);  // truncate: floor / ceil
        ramp_low = std::max(s.truncate ? std::floor(lo) : lo, 0.0);
        ramp_high = std::min(s.truncate ? std::ceil(hi) : hi, static_cast<double>(rd - 1));
        if (ramp_low == ramp_high) ramp_high += 0.001;  // linear_ramp_factor: if min == max: max += 0.001
    }

    for (int64_t i = 0; i < rd / 2; i++) {
        const double f = plain_inv_freq(base, i, rd);
        switch (s.type) {
            case RopeScalingType::none:
            case RopeScalingType::dynamic: inv_freq[i] = f; break;
            case RopeScalingType::linear:
                // inv_freq /= factor
                inv_freq[i] = f / s.factor;
                break;
            case RopeScalingType::llama3: {
                // wavelen < old_context_len / high_freq_factor: kept; > old_context_len / low_freq_factor: / factor;
                // between: smooth = (old_context_len / wavelen - low) / (high - low); (1 - smooth) f / factor + smooth f
                const double wavelen = 2.0 * kPi / f;
                if (wavelen < orig / s.high_freq_factor) {
                    inv_freq[i] = f;
                } else if (wavelen > orig / s.low_freq_factor) {
                    inv_freq[i] = f / s.factor;
                } else {
                    const double smooth = (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
                    inv_freq[i] = (1.0 - smooth) * f / s.factor + smooth * f;
                }
                break;
            }
            case RopeScalingType::yarn: {
                // ramp = clamp((i - low) / (high - low), 0, 1)
                // inv_freq = inv_freq_interpolation * ramp + inv_freq_extrapolation * (1 - ramp)
                const double ramp = std::clamp((static_cast<double>(i) - ramp_low) / (ramp_high - ramp_low), 0.0, 1.0);
                inv_freq[i] = f / s.factor * ramp + f * (1.0 - ramp);
                break;
            }
        }
    }
}

double rope_attention_factor(const RopeParams& p) {
    // cos = emb.cos() * self.attention_scaling   (yarn only)
    return p.scaling.type == RopeScalingType::yarn ? p.scaling.attention_factor : 1.0;
}

int64_t rope_seq_len(Positions pos) {
    int64_t last = 0;
    for (int64_t t = 0; t < pos.n; t++) last = std::max(last, pos[t]);
    return last + 1;
}

double rope_angle(int64_t pos, double inv_freq) { return static_cast<double>(pos) * inv_freq; }

void rope_trig(double angle, double mscale, float* c, float* s) {
    *c = static_cast<float>(std::cos(angle) * mscale);
    *s = static_cast<float>(std::sin(angle) * mscale);
}

void rope(View x, Positions pos, const RopeParams& p, MutView out, RopeAngle angle_of, RopeTrig trig) {
    const int64_t hd = p.head_dim;
    const int64_t rd = p.rotary();  // rotated dims of each head; [rd, hd) pass through
    detail::expect(hd > 0 && hd % 2 == 0, "rope", "head_dim must be positive and even, found " + std::to_string(hd));
    detail::expect(rd > 0 && rd % 2 == 0 && rd <= hd, "rope",
                   "rotary_dim must be even and in (0, head_dim = " + std::to_string(hd) + "], found " +
                       std::to_string(rd));
    detail::expect(x.cols % hd == 0, "rope",
                   "x " + detail::shape_str(x.rows, x.cols) + " must have a multiple of head_dim = " +
                       std::to_string(hd) + " columns");
    const int64_t T = x.rows;            // tokens
    const int64_t n_heads = x.cols / hd;  // H for q, KV for k
    const int64_t half = rd / 2;          // rotated pairs per head
    detail::expect_shape("rope", "x", x, T, n_heads * hd);
    detail::expect_positions("rope", "pos", pos, T);
    detail::expect_shape("rope", "out", out, T, n_heads * hd);

    // inv_freq, scaled as the config says; dynamic NTK for this call's length
    std::vector<double> inv_freq(static_cast<size_t>(half));  // (rd/2,)
    rope_inv_freq(p, rope_seq_len(pos), inv_freq.data());
    const double mscale = rope_attention_factor(p);

    for (int64_t t = 0; t < T; t++) {
        const float* xt = x.row(t);  // (n_heads * hd,)
        float* yt = out.row(t);      // (n_heads * hd,)
        for (int64_t i = 0; i < half; i++) {
            // freqs = torch.outer(pos, inv_freq); cos = emb.cos() * attention_scaling
            const double angle = angle_of(pos[t], inv_freq[static_cast<size_t>(i)]);
            float c, s;
            trig(angle, mscale, &c, &s);
            // neox:        pair (i, i + rd/2)   (HF rotate_half on q[..., :rotary_dim])
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
        // q_pass = q[..., rotary_dim:], concatenated back unchanged
        for (int64_t h = 0; h < n_heads; h++)
            std::copy(xt + h * hd + rd, xt + (h + 1) * hd, yt + h * hd + rd);
    }
}

}  // namespace conform::scalar
