#include <cmath>

#include "reference/torch_ops.h"

namespace conform::ref {

namespace {

constexpr double kPi = 3.14159265358979323846;

// HF modeling_rope_utils.py, _compute_default_rope_parameters:
//   inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
// dim is the rotary dim (head_dim * partial_rotary_factor).
torch::Tensor default_inv_freq(int64_t dim, double base, torch::Dtype adt) {
    auto exponent = torch::arange(0, dim, 2, torch::kInt64).to(adt) / static_cast<double>(dim);
    return 1.0 / torch::pow(torch::scalar_tensor(base, adt), exponent);  // [dim/2]
}

// _compute_llama3_parameters:
//   low_freq_wavelen = old_context_len / low_freq_factor; high_freq_wavelen = old_context_len / high_freq_factor
//   wavelen = 2 * math.pi / inv_freq
//   inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
//   smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
//   smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
//   is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
//   inv_freq_llama = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
torch::Tensor llama3_inv_freq(const torch::Tensor& inv_freq, const RopeScaling& s) {
    const double old_context_len = static_cast<double>(s.original_max_position);
    const double low_freq_wavelen = old_context_len / s.low_freq_factor;
    const double high_freq_wavelen = old_context_len / s.high_freq_factor;
    auto wavelen = 2 * kPi / inv_freq;
    auto inv_freq_llama = torch::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
    auto smooth_factor = (old_context_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    auto smoothed = (1 - smooth_factor) * inv_freq_llama / s.factor + smooth_factor * inv_freq_llama;
    auto is_medium_freq = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
    return torch::where(is_medium_freq, smoothed, inv_freq_llama);
}

// _compute_yarn_parameters:
//   pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
//   inv_freq_extrapolation = 1.0 / pos_freqs; inv_freq_interpolation = 1.0 / (factor * pos_freqs)
//   low, high = find_correction_range(beta_fast, beta_slow, dim, base, original_max_position_embeddings)
//   inv_freq_extrapolation_factor = 1 - linear_ramp_factor(low, high, dim // 2)
//   inv_freq = inv_freq_interpolation * (1 - inv_freq_extrapolation_factor)
//            + inv_freq_extrapolation * inv_freq_extrapolation_factor
torch::Tensor yarn_inv_freq(int64_t dim, double base, const RopeScaling& s, torch::Dtype adt) {
    auto pos_freqs = torch::pow(torch::scalar_tensor(base, adt),
                                torch::arange(0, dim, 2, torch::kInt64).to(adt) / static_cast<double>(dim));
    auto extrapolation = 1.0 / pos_freqs;
    auto interpolation = 1.0 / (s.factor * pos_freqs);
    // find_correction_dim(num_rotations) = dim * log(max_pos / (num_rotations * 2 pi)) / (2 log(base))
    auto correction_dim = [&](double rotations) {
        return static_cast<double>(dim) * std::log(static_cast<double>(s.original_max_position) / (rotations * 2 * kPi)) /
               (2 * std::log(base));
    };
    // find_correction_range: if truncate: floor / ceil; then max(low, 0), min(high, dim - 1)
    const double lo = correction_dim(s.beta_fast), hi = correction_dim(s.beta_slow);
    const double low = std::max(s.truncate ? std::floor(lo) : lo, 0.0);
    double high = std::min(s.truncate ? std::ceil(hi) : hi, static_cast<double>(dim - 1));
    // linear_ramp_factor: if min == max: max += 0.001; clamp((arange(dim // 2) - min) / (max - min), 0, 1)
    if (low == high) high += 0.001;
    auto ramp = torch::clamp((torch::arange(dim / 2, torch::kInt64).to(adt) - low) / (high - low), 0, 1);
    auto extrapolation_factor = 1 - ramp;
    return interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
}

// _compute_dynamic_ntk_parameters, with seq_len = max(position_ids) + 1 (dynamic_rope_update):
//   seq_len = seq_len if seq_len > max_position_embeddings else max_position_embeddings
//   base = base * ((factor * seq_len / max_position_embeddings) - (factor - 1)) ** (dim / (dim - 2))
double dynamic_base(double base, int64_t dim, double seq_len, const RopeScaling& s) {
    const double max_pos = static_cast<double>(s.original_max_position);
    const double L = std::max(seq_len, max_pos);
    return base * std::pow(s.factor * L / max_pos - (s.factor - 1), static_cast<double>(dim) / static_cast<double>(dim - 2));
}

// The scaled inverse frequencies of a call whose largest position is
// max_pos [rd/2], in the angle dtype (float32 below float64, as HF keeps its
// inv_freq buffer in float32).
torch::Tensor inv_freq_of(const RopeParams& p, int64_t max_pos, const Ctx& ctx, torch::Dtype adt) {
    const int64_t dim = p.rotary();
    const RopeScaling& s = ctx.v.scaling ? *ctx.v.scaling : p.scaling;
    const RopeScalingType type = ctx.v.scaling_type.value_or(s.type);
    switch (type) {
        case RopeScalingType::none: return default_inv_freq(dim, p.theta, adt);
        case RopeScalingType::linear: return default_inv_freq(dim, p.theta, adt) / s.factor;
        case RopeScalingType::llama3: return llama3_inv_freq(default_inv_freq(dim, p.theta, adt), s);
        case RopeScalingType::yarn: return yarn_inv_freq(dim, p.theta, s, adt);
        case RopeScalingType::dynamic: {
            // vLLM #3488 computes the base once, for the whole scaled context.
            const double seq_len = ctx.v.dynamic_at_scaled_context
                                       ? s.factor * static_cast<double>(s.original_max_position)
                                       : static_cast<double>(max_pos + 1);
            return default_inv_freq(dim, dynamic_base(p.theta, dim, seq_len, s), adt);
        }
    }
    return default_inv_freq(dim, p.theta, adt);
}

// HF LlamaRotaryEmbedding.forward: cos = emb.cos() * self.attention_scaling (yarn's attention factor; 1 otherwise).
double attention_scaling(const RopeParams& p, const Ctx& ctx) {
    const RopeScaling& s = ctx.v.scaling ? *ctx.v.scaling : p.scaling;
    return ctx.v.scaling_type.value_or(s.type) == RopeScalingType::yarn ? s.attention_factor : 1.0;
}

// Angles in float32 with autocast off (float64 for the truth):
//   freqs = position_ids.float() @ inv_freq        [T, rd/2]
torch::Tensor angles(const torch::Tensor& positions, const RopeParams& p, const Ctx& ctx) {
    const auto adt = ctx.dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    auto p_used = positions;
    if (ctx.v.rope_pos_from_start && positions.numel())
        p_used = positions[0].item<int64_t>() + torch::arange(positions.numel(), torch::kInt64);
    const int64_t max_pos = p_used.numel() ? p_used.max().item<int64_t>() : 0;  // dynamic NTK's length: the call's
    auto inv_freq = inv_freq_of(p, max_pos, ctx, adt);
    if (ctx.v.rope_inv_freq_bf16) inv_freq = inv_freq.to(torch::kBFloat16).to(adt);
    auto pos = (p_used + ctx.v.rope_pos_shift).to(adt);
    if (ctx.v.rope_positions_f16) pos = pos.to(torch::kFloat16).to(adt);
    auto freqs = torch::outer(pos, inv_freq);  // [T, rd/2]
    if (ctx.v.rope_angle_bf16) freqs = freqs.to(torch::kBFloat16).to(adt);
    return freqs;
}

// NeoX / half-split, HF:
//   def rotate_half(x): x1, x2 = x[..., : d // 2], x[..., d // 2 :]; return torch.cat((-x2, x1), dim=-1)
//   q_embed = (q * cos) + (rotate_half(q) * sin)      with emb = torch.cat((freqs, freqs), dim=-1)
// A bf16 cos/sin table in a float32 kernel (a Variant): the values rounded.
torch::Tensor table(torch::Tensor t, bool bf16) { return bf16 ? t.to(torch::kBFloat16).to(t.scalar_type()) : t; }

torch::Tensor rope_neox(const torch::Tensor& x, const torch::Tensor& freqs, int64_t rd, double mscale, bool bf16) {
    auto emb = torch::cat({freqs, freqs}, -1);                        // [T, rd]
    auto cos = table(emb.cos() * mscale, bf16).to(x.scalar_type()).unsqueeze(1);  // [T, 1, rd]
    auto sin = table(emb.sin() * mscale, bf16).to(x.scalar_type()).unsqueeze(1);
    auto x1 = x.narrow(-1, 0, rd / 2), x2 = x.narrow(-1, rd / 2, rd / 2);
    auto rotated = torch::cat({-x2, x1}, -1);
    return x * cos + rotated * sin;
}

// Interleaved / GPT-J, Meta llama apply_rotary_emb:
//   xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
//   freqs_cis = torch.polar(torch.ones_like(freqs), freqs)      (abs = the attention factor under yarn)
//   xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3); return xq_out.type_as(xq)
torch::Tensor rope_interleaved(const torch::Tensor& x, const torch::Tensor& freqs, int64_t rd, double mscale, bool bf16) {
    const auto wide = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    auto xs = x.to(wide).reshape({x.size(0), x.size(1), rd / 2, 2}).contiguous();
    auto xc = torch::view_as_complex(xs);                                      // [T, n, rd/2] complex
    auto f = freqs.to(wide);
    auto freqs_cis = torch::polar(torch::full_like(f, mscale), f).unsqueeze(1);  // [T, 1, rd/2]
    if (bf16)
        freqs_cis = torch::complex(table(torch::real(freqs_cis), true), table(torch::imag(freqs_cis), true));
    return torch::view_as_real(xc * freqs_cis).flatten(2).to(x.scalar_type());
}

// Partial rotary (GPT-NeoX, Phi, GLM):
//   q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
//   q_embed = torch.cat((rotate(q_rot), q_pass), dim=-1)
torch::Tensor rotate(const torch::Tensor& xh, const torch::Tensor& freqs, int64_t rd, RopeLayout layout,
                     double mscale, bool bf16) {
    const int64_t hd = xh.size(-1);
    auto part = xh.narrow(-1, 0, rd);
    auto rotated = layout == RopeLayout::neox ? rope_neox(part, freqs, rd, mscale, bf16)
                                              : rope_interleaved(part, freqs, rd, mscale, bf16);
    if (rd == hd) return rotated;
    return torch::cat({rotated, xh.narrow(-1, rd, hd - rd)}, -1);
}

}  // namespace

torch::Tensor rope_angles(const torch::Tensor& positions, const RopeParams& p, const Ctx& ctx) {
    return angles(positions, p, ctx);
}
double rope_attention_factor(const RopeParams& p, const Ctx& ctx) { return attention_scaling(p, ctx); }

torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& positions, RopeParams p, const Ctx& ctx) {
    p.layout = ctx.v.layout.value_or(p.layout);
    p.theta = ctx.v.theta.value_or(p.theta);
    const int64_t hd = p.head_dim, rd = p.rotary();
    const int64_t T = x.size(0), n = x.size(1) / hd;
    auto freqs = angles(positions, p, ctx);
    const double mscale = attention_scaling(p, ctx);
    auto xh = x.reshape({T, n, hd});  // [T, n, hd]
    const bool bf16 = ctx.v.rope_cos_sin_bf16;
    auto out = rotate(xh, freqs, rd, p.layout, mscale, bf16);
    if (ctx.v.rope_twice) out = rotate(out, freqs, rd, p.layout, mscale, bf16);
    return out.reshape({T, n * hd});
}

}  // namespace conform::ref
