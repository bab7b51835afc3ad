// The a-priori noise term of the tolerance model: how much any legitimate
// summation order may move each output, from the magnitudes of its summands.
#include <cmath>

#include "reference/torch_ops.h"

namespace conform::ref {

namespace {

double unit_roundoff(DType d) {
    switch (d) {
        case DType::f32: return std::ldexp(1.0, -24);
        case DType::bf16: return std::ldexp(1.0, -8);
        case DType::f16: return std::ldexp(1.0, -11);
    }
    return std::ldexp(1.0, -24);
}

double maxv(const torch::Tensor& t) { return t.numel() ? t.abs().max().item<double>() : 0.0; }

// sqrt(K) u max(|a| @ |b|): a dot product of length K in any order.
double dot_noise(const torch::Tensor& a, const torch::Tensor& b, double u) {
    const double K = static_cast<double>(a.size(-1));
    return std::sqrt(K) * u * maxv(torch::matmul(a.abs(), b.abs()));
}

// A norm's output moves relatively by half its mean-of-squares' error.
double norm_noise(const torch::Tensor& out, int64_t K, double u) {
    return 0.5 * std::sqrt(static_cast<double>(K)) * u * maxv(out);
}

// A norm y = w * x / rms(x), per row of x, moves an error e in its input by up
// to e * |w_i| * (1 + |x_i| / rms) / rms (first order). Legitimate programs
// differ upstream by e, so downstream by this much — a row with a small rms
// amplifies it, which a tensor-wide ratio of magnitudes misses.
double norm_propagation(const torch::Tensor& x, const torch::Tensor& w, double eps, double e) {
    auto rms = (x.pow(2).mean(-1, true) + eps).sqrt();
    return e * maxv(w.abs().reshape({1, -1}) * (1.0 + x.abs() / rms) / rms);
}

// SwiGLU's output: the down product's own rounding, plus what the gate and up
// products (each a dot product of length D, in any legitimate order) carry
// through silu and the down product, element by element: where the gate or
// up sums cancel, their absolute noise is far above u |g|, and a down product
// that cancels too passes it on.
double swiglu_noise(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w3, const torch::Tensor& w2,
                    double u) {
    const double D = static_cast<double>(x.size(-1));
    auto gate = torch::matmul(x, w1), up = torch::matmul(x, w3);
    auto d_gate = std::sqrt(D) * u * torch::matmul(x.abs(), w1.abs());
    auto d_up = std::sqrt(D) * u * torch::matmul(x.abs(), w3.abs());
    auto sig = torch::sigmoid(gate);
    auto silu = gate * sig;
    auto dsilu = sig * (1.0 + gate * (1.0 - sig));  // d silu / d gate
    auto g = silu * up;
    auto d_g = (dsilu * up).abs() * d_gate + silu.abs() * d_up + u * g.abs();
    return dot_noise(g, w2, u) + maxv(torch::matmul(d_g, w2.abs()));
}

// Attention: the output is a p-weighted mean of v (length S), and a score
// error δs moves it by up to 2·δs·max|v| (softmax's sensitivity).
double attention_noise(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t H, int64_t KV,
                       int64_t hd, double u) {
    const int64_t T = q.size(0), S = k.size(0);
    auto qh = q.reshape({T, H, hd}).transpose(0, 1).abs();                                   // [H, T, hd]
    auto kh = k.reshape({S, KV, hd}).transpose(0, 1).abs().repeat_interleave(H / KV, 0);   // [H, S, hd]
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    const double mag_s = maxv(torch::matmul(qh, kh.transpose(1, 2))) * scale;
    const double ds = (std::sqrt(static_cast<double>(hd)) + 2.0) * u * mag_s;  // dot, scale, max subtraction
    const double dv = std::sqrt(static_cast<double>(S)) * u * maxv(v);          // Σ p v, Σ p = 1
    return 2.0 * ds * maxv(v) + dv;
}

}  // namespace

std::map<std::string, double> reduction_noise(const Case& c, DType dtype) {
    torch::NoGradGuard no_grad;
    const double u = unit_roundoff(dtype);
    const NamedD truth = run(c);  // float64 taps and outputs
    auto T = [](const DTensor& d) {
        return torch::from_blob(const_cast<double*>(d.data.data()), {d.rows(), d.cols()}, torch::kFloat64).clone();
    };
    auto in = [&](const char* n) {
        const Tensor& t = c.in(n);
        return torch::from_blob(const_cast<float*>(t.data.data()), {t.rows(), t.cols()}, torch::kFloat32).to(torch::kFloat64);
    };
    const BlockConfig& cfg = c.config;
    std::map<std::string, double> n;
    switch (c.op) {
        case Op::rmsnorm: n["out"] = norm_noise(T(truth.at("out")), c.in("x").cols(), u); break;
        case Op::qk_norm: n["out"] = norm_noise(T(truth.at("out")), cfg.head_dim, u); break;
        // No reduction, but each output is x_i cos - x_j sin: cos and sin rounded
        // (1 ulp each), two products and a difference — about 3u |x_i| + 3u |x_j|
        // — on a value that can be as small as u |x|. Angle error is the baselines'.
        case Op::rope: n["out"] = 6.0 * u * maxv(in("x")); break;
        case Op::attention:
            n["out"] = attention_noise(in("q"), in("k"), in("v"), cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, u);
            break;
        case Op::swiglu: n["out"] = swiglu_noise(in("x"), in("w1"), in("w3"), in("w2"), u); break;
        case Op::block:
        case Op::decode: {
            // decode's only output is the block's out; its taps come from the block.
            Case b = c;
            b.op = Op::block;
            const NamedD t = c.op == Op::block ? truth : run(b);
            auto a = T(t.at("attn_in"));
            n["attn_in"] = norm_noise(a, cfg.d_model, u);
            n["q"] = dot_noise(a, in("wq"), u);
            n["k"] = dot_noise(a, in("wk"), u);
            n["v"] = dot_noise(a, in("wv"), u);
            n["q_rot"] = n["q"];
            n["k_rot"] = n["k"];
            if (cfg.qk_norm) {
                // QK-norm rescales q and k (and their errors) per head, then rounds.
                auto qr = T(t.at("q_rot")), kr = T(t.at("k_rot"));
                auto heads = [&](const char* tap) { return T(t.at(tap)).reshape({-1, cfg.head_dim}); };
                n["q_rot"] = norm_propagation(heads("q"), in("q_norm").reshape({-1}), cfg.norm_eps, n["q"]) +
                             norm_noise(qr, cfg.head_dim, u);
                n["k_rot"] = norm_propagation(heads("k"), in("k_norm").reshape({-1}), cfg.norm_eps, n["k"]) +
                             norm_noise(kr, cfg.head_dim, u);
            }
            // RoPE's own rounding (see Op::rope above).
            n["q_rot"] += 6.0 * u * maxv(T(t.at("q_rot")));
            n["k_rot"] += 6.0 * u * maxv(T(t.at("k_rot")));
            n["attn"] = attention_noise(T(t.at("q_rot")), T(t.at("k_rot")), T(t.at("v")), cfg.n_heads, cfg.n_kv_heads,
                                        cfg.head_dim, u);
            n["h"] = dot_noise(T(t.at("attn")), in("wo"), u) + u * maxv(T(t.at("h")));
            n["ffn_in"] = norm_noise(T(t.at("ffn_in")), cfg.d_model, u) +
                          norm_propagation(T(t.at("h")), in("ffn_norm").reshape({-1}), cfg.norm_eps, n["h"]);
            n["ffn_out"] = swiglu_noise(T(t.at("ffn_in")), in("w1"), in("w3"), in("w2"), u);
            n["out"] = n["h"] + n["ffn_out"] + u * maxv(T(t.at("out")));  // out = h + ffn_out
            if (c.op == Op::decode) n = {{"out", n["out"]}};
            break;
        }
    }
    return n;
}

}  // namespace conform::ref
