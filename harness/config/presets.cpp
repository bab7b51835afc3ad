#include "config/presets.h"

#include "conform/op_info.h"

#include <algorithm>
#include <cmath>
#include <set>
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

// Qwen2's q, k and v projection biases.
BlockConfig with_qkv_bias(BlockConfig c) {
    c.qkv_bias = true;
    return c;
}

// A sliding window on every layer (Mistral v0.1, Phi-3).
BlockConfig with_window(BlockConfig c, int64_t w) {
    c.sliding_window = w;
    return c;
}

// Gemma's conventions: (1 + w) norms and the GeGLU FFN (its sqrt(D)
// embedding scale is the preset's embedding_multiplier).
BlockConfig gemma(BlockConfig c) {
    c.norm_plus_one = true;
    c.hidden_act = HiddenAct::gelu_tanh;
    return c;
}

// Gemma 2 and 3's block: Gemma's, with sandwich norms, a window on the sliding
// layers, query_pre_attn_scalar (its scale where it is not head_dim) and
// Gemma 2's attention soft-cap.
BlockConfig gemma23(BlockConfig c, int64_t window, double query_pre_attn_scalar, double softcap) {
    c = gemma(c);
    c.sandwich_norm = true;
    c.sliding_window = window;
    if (query_pre_attn_scalar != static_cast<double>(c.head_dim)) c.attn_scale = 1.0 / std::sqrt(query_pre_attn_scalar);
    c.attn_logit_softcapping = softcap;
    return c;
}

// Sliding / full layers: every `period`-th layer full (Gemma 2: 2, Gemma 3: 6),
// the sliding layers' own RoPE base (Gemma 3's rope_local_base_freq; 0: none).
LayerPattern every(int64_t period, int64_t layers, double local_rope_theta = 0) {
    LayerPattern p;
    for (int64_t l = 0; l < layers; ++l) p.sliding.push_back((l + 1) % period != 0);
    p.local_rope_theta = local_rope_theta;
    return p;
}

Preset gemma2(std::string name, std::string source, BlockConfig c, int64_t layers, double qpas) {
    Preset p{std::move(name), std::move(source), gemma23(c, 4096, qpas, 50.0), layers, 256000, 8192, true,
             std::sqrt(static_cast<double>(c.d_model))};
    p.final_logit_softcapping = 30.0;
    p.pattern = every(2, layers);
    return p;
}

Preset gemma3(std::string name, std::string source, BlockConfig c, int64_t layers, int64_t window, int64_t vocab,
              int64_t max_position, double linear_factor) {
    c = gemma23(c, window, static_cast<double>(c.head_dim), 0.0);
    if (linear_factor > 1) {
        c.rope_scaling.type = RopeScalingType::linear;
        c.rope_scaling.factor = linear_factor;
    }
    Preset p{std::move(name), std::move(source), c, layers, vocab, max_position, true,
             std::sqrt(static_cast<double>(c.d_model))};
    p.pattern = every(6, layers, 10000.0);
    return p;
}

// Llama 3.1's rope_scaling, as its config.json states it.
BlockConfig with_llama3_scaling(BlockConfig c) {
    c.rope_scaling.type = RopeScalingType::llama3;
    c.rope_scaling.factor = 8.0;
    c.rope_scaling.low_freq_factor = 1.0;
    c.rope_scaling.high_freq_factor = 4.0;
    c.rope_scaling.original_max_position = 8192;
    return c;
}

std::string num(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
}

// gpt-oss: GQA 8, head_dim 64 != D/H, q/k/v and o_proj biases, a sink per
// head, layer 0 sliding (128) then alternating, YaRN with truncate: false.
// Its mixture of experts is the moe ops' (--op moe: 4 of E per token, a
// router bias, softmax over the chosen 4's logits, interleaved gate/up,
// SwiGLU clamped at 7, expert biases); the block's dense FFN stands for none
// of it, so the block's ops are refused (config::unmodelled_for).
// A mixture of experts as Mixtral's and Qwen2/3-MoE's sparse blocks run it
// (softmax over every expert, the top k, SwiGLU experts on [gate | up]
// without biases); `shared`: Qwen2-MoE's shared expert, gated by a sigmoid.
Preset with_experts(Preset p, int64_t experts, int64_t used, int64_t expert_ffn, bool renormalised, int64_t shared,
                    const std::string& block) {
    BlockConfig& c = p.config;
    c.n_experts = experts;
    c.n_experts_per_tok = used;
    c.moe_ffn_dim = expert_ffn;
    c.moe_norm_topk_prob = renormalised;
    c.moe_shared_ffn_dim = shared;
    c.moe_shared_gate = shared > 0;
    p.ffn_unmodelled = "a mixture of " + std::to_string(experts) + " experts, " + std::to_string(used) + " per token (" +
                       block + ": a softmax over the experts, the top " + std::to_string(used) +
                       (renormalised ? " renormalised" : " as they are") +
                       (shared > 0 ? ", and a shared expert gated by sigmoid(x @ shared_expert_gate)" : "") +
                       "): the block does not compute it (--op moe does)";
    return p;
}

// DeepSeek-V3 (and Kimi-K2, GLM-4.5's router): its multi-head latent
// attention is not the block's, so its FFN ops and mla_attention run. The
// router as DeepseekV3TopkRouter: a float32 sigmoid, e_score_correction_bias
// for the choice only, 8 groups of 32 scored by their top-2 sum, the top 4
// groups kept, the top 8 experts renormalised (+1e-20) and times 2.5; one
// shared expert of the experts' width, unweighted. The first 3 layers are
// dense (first_k_dense_replace): the moe ops take the other 58.
Preset deepseek_v3() {
    BlockConfig c = make(7168, 128, 128, 64, 18432, 10000.0, 1e-6, false);
    // As config.json states it (YaRN, factor 40 over 4096, mscale = mscale_all_dim = 1): read, never run here.
    c.rope_scaling.type = RopeScalingType::yarn;
    c.rope_scaling.factor = 40.0;
    c.rope_scaling.original_max_position = 4096;
    c.rope_scaling.beta_fast = 32.0;
    c.rope_scaling.beta_slow = 1.0;
    c.rope_scaling.attention_factor = 1.0;
    Preset p{"deepseek-v3",
             "deepseek-ai/DeepSeek-V3 (MLA by --op mla_attention; 256 experts, 8 per token, grouped sigmoid "
             "router, a shared expert, by --op moe)",
             c, 61, 129280, 163840, false};
    p = with_experts(p, 256, 8, 2048, true, 2048, "DeepseekV3MoE");
    BlockConfig& m = p.config;
    m.moe_shared_gate = false;
    m.moe_scoring = MoeScoring::sigmoid;
    m.moe_selection_bias = true;
    m.moe_n_group = 8;
    m.moe_topk_group = 4;
    m.moe_group_score = MoeGroupScore::top2_sum;
    m.moe_routed_scaling_factor = 2.5;
    p.ffn_unmodelled = "a mixture of 256 experts, 8 per token (DeepseekV3MoE: a float32 sigmoid router whose "
                       "e_score_correction_bias chooses, 4 of 8 groups, the top 8 renormalised times 2.5, and an "
                       "unweighted shared expert): the block does not compute it (--op moe does)";
    // Its latent attention (DeepseekV3Attention): the widths, and the scale
    // mscale^2 / sqrt(dn + dr) with mscale = 0.1 ln(40) + 1 (mscale_all_dim 1).
    m.kv_lora_rank = 512;
    m.qk_nope_head_dim = 128;
    m.qk_rope_head_dim = 64;
    m.v_head_dim = 128;
    const double mscale = 0.1 * std::log(40.0) + 1.0;
    m.attn_scale = mscale * mscale / std::sqrt(192.0);
    p.attention_unmodelled = kLatentAttention;
    return p;
}

// OLMoE: its router and experts are the moe ops' (a softmax over 64, the
// top 8 as they are); its attention norms q and k over all heads at once
// (OlmoeAttention's q_norm is RMSNorm(hidden_size)), not per head as the
// block's QK-norm does, so only its FFN ops run.
Preset olmoe() {
    Preset p{"olmoe-1b-7b",
             "allenai/OLMoE-1B-7B-0924 (QK-norm over all heads: its FFN ops only; 64 experts, 8 per token, by --op moe)",
             make(2048, 16, 16, 128, 1024, 10000.0, 1e-5, false), 16, 50304, 4096, false};
    p = with_experts(p, 64, 8, 1024, false, 0, "OlmoeSparseMoeBlock");
    p.attention_unmodelled = "attention with q and k RMS-normed over all heads together (OlmoeAttention: "
                             "q_norm over hidden_size, k_norm over the kv width), not per head as the block's "
                             "QK-norm: its FFN ops run (--op moe, moe_route, moe_experts, rmsnorm)";
    return p;
}

// Llama 4 Scout's text model: 16 experts, one per token, weighted by the
// sigmoid of its logit on the expert's input, and a shared expert; its
// attention (unweighted L2 QK-norm, NoPE layers' temperature tuning) is not
// the block's, so only its FFN ops run.
Preset llama4_scout() {
    Preset p{"llama4-scout",
             "meta-llama/Llama-4-Scout-17B-16E's text_config (L2 QK-norm, NoPE temperature: its FFN ops only; 16 "
             "experts, 1 per token on its input, a shared expert, by --op moe)",
             with_llama3_scaling(make(5120, 40, 8, 128, 8192, 5e5, 1e-5, false)), 48, 202048, 262144, false};
    p = with_experts(p, 16, 1, 8192, false, 8192, "Llama4TextMoe");
    BlockConfig& m = p.config;
    m.moe_shared_gate = false;
    m.moe_scoring = MoeScoring::sigmoid;
    m.moe_weight_on_input = true;
    p.ffn_unmodelled = "a mixture of 16 experts, 1 per token (Llama4TextMoe: the top 1 of the router's logits "
                       "weighted by their sigmoid, the weight on the expert's input, and an unweighted shared "
                       "expert): the block does not compute it (--op moe does)";
    p.attention_unmodelled = "attention with q and k L2-normed without a weight on its RoPE layers and its NoPE "
                             "layers' scores temperature-tuned (attn_scale, floor_scale), which the block does not "
                             "model: its FFN ops run (--op moe, moe_route, moe_experts, rmsnorm)";
    return p;
}

Preset gpt_oss(std::string name, std::string source, int64_t layers, int64_t experts) {
    BlockConfig c = make(2880, 64, 8, 64, 2880, 150000.0, 1e-5, false);
    c.qkv_bias = true;
    c.attn_sinks = true;
    c.sliding_window = 128;
    // As config.json states it: factor 32 over 4096, betas 32 / 1, truncate
    // false, and HF's attention factor for YaRN without one, 0.1 ln(factor) + 1.
    c.rope_scaling.type = RopeScalingType::yarn;
    c.rope_scaling.factor = 32.0;
    c.rope_scaling.original_max_position = 4096;
    c.rope_scaling.beta_fast = 32.0;
    c.rope_scaling.beta_slow = 1.0;
    c.rope_scaling.attention_factor = 0.1 * 1.0 * std::log(32.0) + 1.0;
    c.rope_scaling.truncate = false;
    c.n_experts = experts;
    c.n_experts_per_tok = 4;
    c.moe_ffn_dim = 2880;
    c.moe_router_bias = true;
    c.moe_norm_topk_prob = true;  // softmax over the top-4 logits
    c.moe_gate_up_interleaved = true;
    c.moe_swiglu_limit = 7.0;
    c.moe_expert_bias = true;
    Preset p{std::move(name), std::move(source), c, layers, 201088, 131072, false};
    p.pattern = every(2, layers);
    p.o_bias = true;
    p.ffn_unmodelled = "a mixture of " + std::to_string(experts) +
                       " experts, 4 per token (GptOssMLP: a router, then experts whose SwiGLU is clamped, with biases): "
                       "the block does not compute it (--op moe does)";
    return p;
}

}  // namespace

std::string unmodelled_for(const ModelConfig& m, Op op) {
    const OpInfo& info = op_info(op);
    const std::string who = m.name.empty() ? std::string("the model") : m.name;
    if (!m.ffn_unmodelled.empty() && info.has_dim(Dim::F))
        return "op " + std::string(to_string(op)) + " runs the FFN, and " + who + "'s FFN is " + m.ffn_unmodelled;
    // Latent attention is its own op: a model has it (its widths) or not.
    // (Nothing given at all, generate's bare start: it asks for each width by flag.)
    if (info.uses(kMla))
        return m.block.kv_lora_rank > 0 || m.name.empty()
                   ? ""
                   : "op " + std::string(to_string(op)) + " runs multi-head latent attention, and " + who +
                         " has none (its attention is multi-head: --op attention, paged_attention; latent "
                         "attention's widths: --kv-lora-rank, --qk-nope-head-dim, --qk-rope-head-dim, --v-head-dim)";
    const bool heads = info.has_dim(Dim::Q) || info.has_dim(Dim::KVW) || info.has_dim(Dim::N) ||
                       info.has_dim(Dim::hd) || info.has_dim(Dim::H) || info.has_dim(Dim::S);
    if (!m.attention_unmodelled.empty() && heads)
        return "op " + std::string(to_string(op)) + " runs the attention, and " + who + "'s attention is " +
               m.attention_unmodelled;
    if ((info.uses(kMoeRoute) || info.uses(kMoeExperts)) && m.block.n_experts <= 0)
        return "op " + std::string(to_string(op)) + " runs a mixture of experts, and " + who + " has none (a dense FFN)";
    return "";
}

ModelConfig Preset::model() const {
    ModelConfig m;
    m.block = config;
    m.layers = layers;
    m.vocab = vocab;
    m.max_position = max_position;
    m.tie_embeddings = tie_embeddings;
    m.embedding_multiplier = embedding_multiplier;
    m.final_logit_softcapping = final_logit_softcapping;
    m.pattern = pattern;
    m.ffn_unmodelled = ffn_unmodelled;
    m.attention_unmodelled = attention_unmodelled;
    m.o_bias = o_bias;
    m.name = name;
    m.origin = "preset " + name;
    return m;
}

const std::vector<Preset>& presets() {
    //                                                               D     H   KV   hd      F    theta   eps  qk_norm      layers vocab  max_pos  tied
    static const std::vector<Preset> table = {
        {"llama2-7b", "meta-llama/Llama-2-7b-hf (MHA)",            make(4096, 32, 32, 128, 11008, 1e4, 1e-5, false), 32, 32000, 4096, false},
        {"llama3-8b", "meta-llama/Meta-Llama-3-8B (GQA 4)",        make(4096, 32,  8, 128, 14336, 5e5, 1e-5, false), 32, 128256, 8192, false},
        {"llama3.1-8b", "meta-llama/Llama-3.1-8B (GQA 4, llama3 RoPE scaling)",
         with_llama3_scaling(make(4096, 32, 8, 128, 14336, 5e5, 1e-5, false)), 32, 128256, 131072, false},
        {"qwen3-8b", "Qwen/Qwen3-8B (GQA 4, QK-norm)",             make(4096, 32,  8, 128, 12288, 1e6, 1e-6, true), 36, 151936, 40960, false},
        {"qwen3-0.6b", "Qwen/Qwen3-0.6B (head_dim != D/H)",        make(1024, 16,  8, 128,  3072, 1e6, 1e-6, true), 28, 151936, 40960, true},
        {"qwen2.5-7b", "Qwen/Qwen2.5-7B (GQA 7, q/k/v biases)",      with_qkv_bias(make(3584, 28,  4, 128, 18944, 1e6, 1e-6, false)), 28, 152064, 131072, false},
        {"qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B (GQA 7, q/k/v biases)",    with_qkv_bias(make(896, 14,  2, 64,  4864, 1e6, 1e-6, false)), 24, 151936, 32768, true},
        {"mistral-7b", "mistralai/Mistral-7B-v0.1 (GQA 4, sliding window 4096)", with_window(make(4096, 32,  8, 128, 14336, 1e4, 1e-5, false), 4096), 32, 32000, 32768, false},
        {"mistral-7b-v0.3", "mistralai/Mistral-7B-v0.3 (GQA 4)",   make(4096, 32,  8, 128, 14336, 1e6, 1e-5, false), 32, 32768, 32768, false},
        {"tinyllama-1.1b", "TinyLlama/TinyLlama-1.1B-Chat-v1.0 (GQA 8)", make(2048, 32, 4, 64, 5632, 1e4, 1e-5, false), 22, 32000, 2048, false},
        {"phi3-mini", "microsoft/Phi-3-mini-4k-instruct (MHA, head_dim 96, sliding window 2047)", with_window(make(3072, 32, 32, 96, 8192, 1e4, 1e-5, false), 2047), 32, 32064, 4096, false},
        {"gemma-2b", "google/gemma-2b (MQA, head_dim 256, (1 + w) norms, GeGLU, embedding x sqrt(D))", gemma(make(2048, 8, 1, 256, 16384, 1e4, 1e-6, false)), 18, 256000, 8192, true, std::sqrt(2048.0)},
        {"gemma-7b", "google/gemma-7b (MHA, head_dim 256 != D/H, (1 + w) norms, GeGLU, embedding x sqrt(D))", gemma(make(3072, 16, 16, 256, 24576, 1e4, 1e-6, false)), 28, 256000, 8192, true, std::sqrt(3072.0)},
        gemma2("gemma2-2b", "google/gemma-2-2b (GQA 2, sandwich norms, soft-caps 50 / 30, sliding / full layers, window 4096)",
               make(2304, 8, 4, 256, 9216, 1e4, 1e-6, false), 26, 256.0),
        gemma2("gemma2-27b", "google/gemma-2-27b (GQA 2, head_dim 128, query_pre_attn_scalar 144, sandwich norms, soft-caps)",
               make(4608, 32, 16, 128, 36864, 1e4, 1e-6, false), 46, 144.0),
        gemma3("gemma3-1b", "google/gemma-3-1b-pt (MQA, QK-norm, 5 sliding : 1 full, window 512, local RoPE base 10000)",
               make(1152, 4, 1, 256, 6912, 1e6, 1e-6, true), 26, 512, 262144, 32768, 1.0),
        gemma3("gemma3-4b", "google/gemma-3-4b-pt's text_config (GQA 2, QK-norm, window 1024, linear RoPE x8 on full layers)",
               make(2560, 8, 4, 256, 10240, 1e6, 1e-6, true), 34, 1024, 262208, 131072, 8.0),
        with_experts({"mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1 (GQA 4; 8 experts, 2 per token, by --op moe)",
                      make(4096, 32, 8, 128, 14336, 1e6, 1e-5, false), 32, 32000, 32768, false},
                     8, 2, 14336, true, 0, "MixtralSparseMoeBlock"),
        with_experts({"qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B (GQA 8, QK-norm; 128 experts, 8 per token, by --op moe)",
                      make(2048, 32, 4, 128, 6144, 1e6, 1e-6, true), 48, 151936, 40960, false},
                     128, 8, 768, true, 0, "Qwen3MoeSparseMoeBlock"),
        with_experts({"qwen1.5-moe-a2.7b",
                      "Qwen/Qwen1.5-MoE-A2.7B (q/k/v biases; 60 experts, 4 per token, a gated shared expert, by --op moe)",
                      with_qkv_bias(make(2048, 16, 16, 128, 5632, 1e6, 1e-6, false)), 24, 151936, 8192, false},
                     60, 4, 1408, false, 5632, "Qwen2MoeSparseMoeBlock"),
        olmoe(),
        deepseek_v3(),
        llama4_scout(),
        gpt_oss("gpt-oss-20b", "openai/gpt-oss-20b (GQA 8, sinks, q/k/v/o biases, sliding 128 / full, YaRN; its experts by --op moe)", 24, 32),
        gpt_oss("gpt-oss-120b", "openai/gpt-oss-120b (GQA 8, sinks, q/k/v/o biases, sliding 128 / full, YaRN; its experts by --op moe)", 36, 128),
    };
    return table;
}

const Preset* find_preset(std::string_view name) {
    for (const auto& p : presets())
        if (p.name == name) return &p;
    return nullptr;
}

std::string preset_names() {
    std::string names;
    for (const auto& p : presets()) names += (names.empty() ? "" : ", ") + p.name;
    return names;
}

BlockConfig LayerPattern::layer(const BlockConfig& block, int64_t l) const {
    BlockConfig c = block;
    if (l >= 0 && l < static_cast<int64_t>(nope.size())) c.nope = block.nope || nope[static_cast<size_t>(l)];
    if (l < 0 || l >= static_cast<int64_t>(sliding.size())) return c;
    if (!sliding[static_cast<size_t>(l)]) {
        c.sliding_window = 0;  // a full-attention layer
    } else if (local_rope_theta > 0) {
        c.rope_theta = local_rope_theta;  // Gemma 3's local RoPE: its own base, unscaled
        c.rope_scaling = RopeScaling{};
    }
    return c;
}

std::string LayerPattern::kind(int64_t l) const {
    std::string k;
    if (l >= 0 && l < static_cast<int64_t>(sliding.size())) k = sliding[static_cast<size_t>(l)] ? "sliding" : "full";
    if (l >= 0 && l < static_cast<int64_t>(nope.size()) && nope[static_cast<size_t>(l)]) k += k.empty() ? "NoPE" : ", NoPE";
    return k;
}

namespace {
// "5 sliding, 1 full": runs of equal values, named by `on` / `off`.
std::string runs(const std::vector<bool>& v, const char* on, const char* off) {
    std::string out;
    for (size_t i = 0; i < v.size();) {
        size_t j = i;
        while (j < v.size() && v[j] == v[i]) ++j;
        out += (out.empty() ? "" : ", ") + std::to_string(j - i) + " " + (v[i] ? on : off);
        i = j;
    }
    return out;
}
}  // namespace

std::string LayerPattern::describe() const {
    std::string out = runs(sliding, "sliding", "full");
    if (!nope.empty()) out += (out.empty() ? "" : "; ") + runs(nope, "NoPE", "RoPE");
    return out;
}

BlockConfig scale_down(BlockConfig c, int64_t factor) {
    if (factor < 1) throw std::invalid_argument("scale_down: factor must be >= 1, got " + std::to_string(factor));
    auto down = [factor](int64_t v) { return v <= 0 ? v : std::max<int64_t>(1, (v + factor - 1) / factor); };
    c.d_model = down(c.d_model);
    c.ffn_dim = down(c.ffn_dim);
    c.moe_ffn_dim = down(c.moe_ffn_dim);
    c.moe_shared_ffn_dim = down(c.moe_shared_ffn_dim);
    return c;
}

std::string describe(const RopeScaling& s) {
    std::ostringstream o;
    o << to_string(s.type);
    switch (s.type) {
        case RopeScalingType::none: break;
        case RopeScalingType::linear: o << "(factor=" << num(s.factor) << ")"; break;
        case RopeScalingType::llama3:
            o << "(factor=" << num(s.factor) << ", low_freq_factor=" << num(s.low_freq_factor)
              << ", high_freq_factor=" << num(s.high_freq_factor) << ", original_max_position=" << s.original_max_position
              << ")";
            break;
        case RopeScalingType::yarn:
            o << "(factor=" << num(s.factor) << ", beta_fast=" << num(s.beta_fast) << ", beta_slow=" << num(s.beta_slow)
              << ", attention_factor=" << num(s.attention_factor) << ", original_max_position=" << s.original_max_position
              << (s.truncate ? "" : ", truncate=false") << ")";
            break;
        case RopeScalingType::dynamic:
            o << "(factor=" << num(s.factor) << ", original_max_position=" << s.original_max_position << ")";
            break;
    }
    return o.str();
}

std::string describe(const BlockConfig& c) {
    std::ostringstream o;
    o << "D=" << c.d_model << " H=" << c.n_heads << " KV=" << c.n_kv_heads << " hd=" << c.head_dim << " F=" << c.ffn_dim
      << " layout=" << to_string(c.rope_layout) << " theta=" << c.rope_theta << " eps=" << c.norm_eps
      << " qk_norm=" << (c.qk_norm ? 1 : 0) << (c.qkv_bias ? " qkv_bias=1" : "")
      << (c.sliding_window > 0 ? " sliding_window=" + std::to_string(c.sliding_window) : "")
      << (c.attn_logit_softcapping > 0 ? " attn_softcap=" + num(c.attn_logit_softcapping) : "")
      << (c.attn_sinks ? " attn_sinks=1" : "")
      << (c.norm_plus_one ? " norm_plus_one=1" : "")
      << (c.sandwich_norm ? " sandwich_norm=1" : "")
      << (c.attn_scale > 0 ? " attn_scale=" + num(c.attn_scale) : "")
      << (c.hidden_act != HiddenAct::silu ? std::string(" hidden_act=") + to_string(c.hidden_act) : "");
    if (c.rotary_dim > 0 && c.rotary_dim != c.head_dim) o << " rotary=" << c.rotary_dim;
    if (c.rope_scaling.type != RopeScalingType::none) o << " scaling=" << describe(c.rope_scaling);
    if (c.n_experts > 0)
        o << " experts=" << c.n_experts << " top_k=" << c.n_experts_per_tok << " expert_ffn=" << c.moe_ffn_dim;
    if (c.kv_lora_rank > 0)
        o << " kv_lora_rank=" << c.kv_lora_rank << " qk_nope_head_dim=" << c.qk_nope_head_dim
          << " qk_rope_head_dim=" << c.qk_rope_head_dim << " v_head_dim=" << c.v_head_dim;
    // Every other twist that is on, from the record (those above keep the names they always had).
    static const std::set<std::string_view> above = {"qk_norm",        "qkv_bias",      "sliding_window",
                                                     "attn_logit_softcapping", "attn_sinks", "norm_plus_one",
                                                     "sandwich_norm",  "attn_scale",    "hidden_act",
                                                     "rotary_dim",     "rope_scaling",  "rope_scaling.truncate"};
    for (const Twist& t : twist_table())
        if (!t.core && !above.count(t.name) && twist_on(t, c) && (!t.applies || t.applies(c)))
            o << " " << t.name << "=" << twist_text(t, c);
    return o.str();
}

}  // namespace conform::config
