#include "config/presets.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace conform::config {

namespace {

BlockConfig make(int64_t d_model, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t ffn_dim,
                 double theta, double eps, bool qk_norm, RopeLayout layout = RopeLayout::neox) {
    BlockConfig c;
    c.d_model = d_model;
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.head_dim = head_dim;
    c.ffn_dim = ffn_dim;
    c.rope_layout = layout;
    c.rope_theta = theta;
    c.qk_norm = qk_norm;
    c.norm_eps = eps;
    return c;
}

}  // namespace

const std::vector<Preset>& presets() {
    //                                                               D     H   KV   hd      F    theta   eps  qk_norm
    static const std::vector<Preset> table = {
        {"llama2-7b", "meta-llama/Llama-2-7b-hf (MHA)",            make(4096, 32, 32, 128, 11008, 1e4, 1e-5, false)},
        {"llama3-8b", "meta-llama/Meta-Llama-3-8B (GQA 4)",        make(4096, 32,  8, 128, 14336, 5e5, 1e-5, false)},
        {"qwen3-8b", "Qwen/Qwen3-8B (GQA 4, QK-norm)",             make(4096, 32,  8, 128, 12288, 1e6, 1e-6, true)},
        {"qwen3-0.6b", "Qwen/Qwen3-0.6B (head_dim != D/H)",        make(1024, 16,  8, 128,  3072, 1e6, 1e-6, true)},
        {"mistral-7b", "mistralai/Mistral-7B-v0.1 (GQA 4)",        make(4096, 32,  8, 128, 14336, 1e4, 1e-5, false)},
        {"mistral-7b-v0.3", "mistralai/Mistral-7B-v0.3 (GQA 4)",   make(4096, 32,  8, 128, 14336, 1e6, 1e-5, false)},
        {"tinyllama-1.1b", "TinyLlama/TinyLlama-1.1B-Chat-v1.0 (GQA 8)", make(2048, 32, 4, 64, 5632, 1e4, 1e-5, false)},
        {"phi3-mini", "microsoft/Phi-3-mini-4k-instruct (MHA, head_dim 96)", make(3072, 32, 32, 96, 8192, 1e4, 1e-5, false)},
    };
    return table;
}

const Preset* find_preset(std::string_view name) {
    for (const auto& p : presets())
        if (p.name == name) return &p;
    return nullptr;
}

BlockConfig scale_down(BlockConfig c, int64_t factor) {
    if (factor < 1) throw std::invalid_argument("scale_down: factor must be >= 1, got " + std::to_string(factor));
    auto down = [factor](int64_t v) { return v <= 0 ? v : std::max<int64_t>(1, (v + factor - 1) / factor); };
    c.d_model = down(c.d_model);
    c.ffn_dim = down(c.ffn_dim);
    return c;
}

std::string describe(const BlockConfig& c) {
    std::ostringstream o;
    o << "D=" << c.d_model << " H=" << c.n_heads << " KV=" << c.n_kv_heads << " hd=" << c.head_dim << " F=" << c.ffn_dim
      << " layout=" << to_string(c.rope_layout) << " theta=" << c.rope_theta << " eps=" << c.norm_eps
      << " qk_norm=" << (c.qk_norm ? 1 : 0);
    return o.str();
}

}  // namespace conform::config
