#include "config/anatomy.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace conform::config {

Anatomy anatomy(const ModelConfig& m, int64_t tokens, int64_t context, double bytes_per_element) {
    if (tokens < 1) throw std::invalid_argument("anatomy: tokens must be >= 1, got " + std::to_string(tokens));
    if (context < 0) throw std::invalid_argument("anatomy: context must be >= 0, got " + std::to_string(context));
    const BlockConfig& c = m.block;
    const double T = static_cast<double>(tokens), C = static_cast<double>(context), es = bytes_per_element;
    const double D = static_cast<double>(c.d_model), F = static_cast<double>(c.ffn_dim);
    const double H = static_cast<double>(c.n_heads), KV = static_cast<double>(c.n_kv_heads);
    const double hd = static_cast<double>(c.head_dim), rd = static_cast<double>(c.rotary());
    const double Q = H * hd, KVW = KV * hd;
    const double S = C + T;                      // keys attention reads
    const double pairs = T * C + T * (T + 1) / 2;  // (query, key) pairs under the causal mask

    Anatomy a;
    a.tokens = tokens;
    a.context = context;
    a.bytes_per_element = es;
    auto matmul = [&](const char* name, const char* group, double in, double out) {
        // [T, in] @ [in, out]
        a.ops.push_back({name, group, in * out, 2 * T * in * out, es * (T * in + in * out + T * out)});
    };
    auto norm = [&](const char* name, double width) {
        a.ops.push_back({name, "norm", width, 4 * T * width, es * (2 * T * width + width)});
    };
    auto residual = [&](const char* name) { a.ops.push_back({name, "residual", 0, T * D, es * 3 * T * D}); };

    // h = x + attn(rmsnorm(x)) @ wo
    norm("attn_norm", D);
    matmul("q_proj", "attention", D, Q);
    matmul("k_proj", "attention", D, KVW);
    matmul("v_proj", "attention", D, KVW);
    if (c.qk_norm)
        a.ops.push_back({"qk_norm", "attention", 2 * hd, 4 * T * (Q + KVW), es * (2 * T * (Q + KVW) + 2 * hd)});
    a.ops.push_back({"rope", "attention", 0, 3 * T * (H + KV) * rd, es * 2 * T * (Q + KVW)});
    a.ops.push_back({"attention", "attention", 0, 4 * hd * H * pairs + 5 * H * pairs,
                     es * (2 * T * Q + 2 * S * KVW)});
    matmul("o_proj", "attention", Q, D);
    residual("residual_attn");
    // out = h + w2(silu(w1 n) * w3 n), n = rmsnorm(h)
    norm("ffn_norm", D);
    matmul("gate_proj (w1)", "ffn", D, F);
    matmul("up_proj (w3)", "ffn", D, F);
    a.ops.push_back({"silu_mul", "ffn", 0, 5 * T * F, es * 3 * T * F});
    matmul("down_proj (w2)", "ffn", F, D);
    residual("residual_ffn");

    a.layer = {"layer", "", 0, 0, 0};
    for (const auto& op : a.ops) {
        a.layer.params += op.params;
        a.layer.flops += op.flops;
        a.layer.bytes += op.bytes;
    }
    const double L = static_cast<double>(m.layers);
    a.model = {"model", "", L * a.layer.params + D, L * a.layer.flops + 4 * T * D,
               L * a.layer.bytes + es * (2 * T * D + D)};
    const double V = static_cast<double>(m.vocab);
    a.embedding = {"embedding", "", V * D, 0, es * 2 * T * D};
    a.lm_head = {"lm_head", "", m.tie_embeddings ? 0 : V * D, 2 * T * D * V, es * (T * D + D * V + T * V)};

    a.kv_bytes_per_token_layer = 2 * KVW * es;
    a.kv_bytes_per_token_layer_mha = 2 * Q * es;
    a.kv_bytes_per_token_model = L * a.kv_bytes_per_token_layer;
    a.kv_cache_bytes = S * a.kv_bytes_per_token_model;
    return a;
}

std::string si(double v, const std::string& unit) {
    static const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
    int p = 0;
    double x = v;
    while (std::fabs(x) >= 1000 && p < 5) {
        x /= 1000;
        ++p;
    }
    char buf[64];
    if (p == 0 && x == std::floor(x))
        std::snprintf(buf, sizeof buf, "%.0f%s%s", x, unit.empty() ? "" : " ", unit.c_str());
    else
        std::snprintf(buf, sizeof buf, "%.1f%s%s%s", x, unit.empty() ? "" : " ", prefixes[p], unit.c_str());
    return buf;
}

}  // namespace conform::config
