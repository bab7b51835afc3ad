#include "reference/torch_ops.h"

namespace conform::ref {

namespace {

// HF LlamaRotaryEmbedding: angles in float32 with autocast off (float64 for the truth).
//   inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
//   freqs = position_ids.float() @ inv_freq
torch::Tensor angles(const torch::Tensor& positions, int64_t head_dim, double theta, const Ctx& ctx) {
    const auto adt = ctx.dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    auto exponent = torch::arange(0, head_dim, 2, torch::kInt64).to(adt) / static_cast<double>(head_dim);
    auto inv_freq = 1.0 / torch::pow(torch::scalar_tensor(theta, adt), exponent);  // [hd/2]
    auto pos = (positions + ctx.v.rope_pos_shift).to(adt);
    auto freqs = torch::outer(pos, inv_freq);  // [T, hd/2]
    if (ctx.v.rope_angle_bf16) freqs = freqs.to(torch::kBFloat16).to(adt);
    return freqs;
}

// NeoX / half-split, HF:
//   def rotate_half(x): x1, x2 = x[..., : d // 2], x[..., d // 2 :]; return torch.cat((-x2, x1), dim=-1)
//   q_embed = (q * cos) + (rotate_half(q) * sin)      with emb = torch.cat((freqs, freqs), dim=-1)
torch::Tensor rope_neox(const torch::Tensor& x, const torch::Tensor& freqs, int64_t hd) {
    auto emb = torch::cat({freqs, freqs}, -1);          // [T, hd]
    auto cos = emb.cos().to(x.scalar_type()).unsqueeze(1);  // [T, 1, hd]
    auto sin = emb.sin().to(x.scalar_type()).unsqueeze(1);
    auto x1 = x.narrow(-1, 0, hd / 2), x2 = x.narrow(-1, hd / 2, hd / 2);
    auto rotated = torch::cat({-x2, x1}, -1);
    return x * cos + rotated * sin;
}

// Interleaved / GPT-J, Meta llama apply_rotary_emb:
//   xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
//   freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
//   xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3); return xq_out.type_as(xq)
torch::Tensor rope_interleaved(const torch::Tensor& x, const torch::Tensor& freqs, int64_t hd) {
    const auto wide = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    auto xs = x.to(wide).reshape({x.size(0), x.size(1), hd / 2, 2}).contiguous();
    auto xc = torch::view_as_complex(xs);                                   // [T, n, hd/2] complex
    auto f = freqs.to(wide);
    auto freqs_cis = torch::polar(torch::ones_like(f), f).unsqueeze(1);     // [T, 1, hd/2]
    return torch::view_as_real(xc * freqs_cis).flatten(2).to(x.scalar_type());
}

torch::Tensor rotate(const torch::Tensor& xh, const torch::Tensor& freqs, int64_t hd, RopeLayout layout) {
    return layout == RopeLayout::neox ? rope_neox(xh, freqs, hd) : rope_interleaved(xh, freqs, hd);
}

}  // namespace

torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& positions, int64_t head_dim, RopeLayout layout,
                   double theta, const Ctx& ctx) {
    layout = ctx.v.layout.value_or(layout);
    theta = ctx.v.theta.value_or(theta);
    const int64_t T = x.size(0), n = x.size(1) / head_dim;
    auto freqs = angles(positions, head_dim, theta, ctx);
    auto xh = x.reshape({T, n, head_dim});  // [T, n, hd]
    auto out = rotate(xh, freqs, head_dim, layout);
    if (ctx.v.rope_twice) out = rotate(out, freqs, head_dim, layout);
    return out.reshape({T, n * head_dim});
}

}  // namespace conform::ref
