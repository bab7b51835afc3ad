#include "config/options.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "config/hf_config.h"

namespace conform::config {

namespace {

std::string num(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
}

}  // namespace

bool ConfigOptions::given() const {
    for (const CLI::Option* opt : {o_preset, o_file, o_d_model, o_heads, o_kv_heads, o_head_dim, o_ffn, o_layers,
                                   o_theta, o_eps, o_layout, o_qk_norm, o_qkv_bias, o_window, o_softcap, o_sinks,
                                   o_plus_one, o_sandwich, o_nope, o_chunk, o_hidden_act, o_attn_scale, o_embedding_multiplier, o_final_softcap, o_kv_cache_dtype,
                                   o_kv_scale})
        if (opt && opt->count() > 0) return true;
    return false;
}

void add_config_options(CLI::App& app, ConfigOptions& o, const std::string& what, bool with_layers) {
    CLI::Option_group* g = app.add_option_group(
        "configuration",
        "the model: --preset, then --config, then each flag, applied in that order" + (what.empty() ? "" : ". " + what));
    o.o_preset = g->add_option("--preset", o.preset, "a real checkpoint's numbers (" + preset_names() + ")");
    o.o_file = g->add_option("--config", o.file, "a Hugging Face config.json (fixtures/configs/ has one per preset)");
    o.o_d_model = g->add_option("--d-model", o.d_model, "D: width of the residual stream (hidden_size)");
    o.o_heads = g->add_option("--heads,--n-heads", o.heads, "H: query heads");
    o.o_kv_heads = g->add_option("--kv-heads,--n-kv-heads", o.kv_heads, "KV: key/value heads");
    o.o_head_dim = g->add_option("--head-dim", o.head_dim, "hd: dims per head");
    o.o_ffn = g->add_option("--ffn,--ffn-dim", o.ffn, "F: SwiGLU hidden width (intermediate_size)");
    if (with_layers) o.o_layers = g->add_option("--layers", o.layers, "L: blocks in the model (num_hidden_layers)");
    o.o_theta = g->add_option("--theta,--rope-theta", o.theta, "RoPE base");
    o.o_layout = g->add_option("--layout,--rope-layout", o.layout,
                               "RoPE pairing: neox (HF) | interleaved (Meta, GGUF)");
    o.o_qk_norm = g->add_option("--qk-norm", o.qk_norm, "per-head RMSNorm on q and k: 0 | 1");
    o.o_qkv_bias = g->add_option("--qkv-bias", o.qkv_bias, "biases on the q, k and v projections (Qwen2): 0 | 1");
    o.o_window = g->add_option("--sliding-window", o.window,
                               "W: each query sees its last W keys, its own included (HF sliding_window); 0: full causal");
    o.o_chunk = g->add_option("--attention-chunk-size", o.chunk,
                              "C: each query sees only the keys of its own chunk of C positions (Llama 4's "
                              "attention_chunk_size; not a sliding window); 0: none");
    o.o_sinks = g->add_option("--attn-sinks", o.sinks,
                              "a learned sink logit per head in each softmax's denominator (gpt-oss): 0 | 1");
    o.o_softcap = g->add_option("--attn-softcap,--attn-logit-softcapping", o.softcap,
                                "cap: each attention score s becomes cap * tanh(s / cap) before the mask (Gemma 2's "
                                "attn_logit_softcapping); 0: none");
    o.o_attn_scale = g->add_option("--attn-scale", o.attn_scale,
                                   "the scores' multiplier, q·k · S (Gemma 2/3: query_pre_attn_scalar^-1/2); 0: "
                                   "1/sqrt(head_dim)");
    o.o_plus_one = g->add_option("--norm-plus-one", o.plus_one,
                                 "every RMSNorm scales by (1 + w), its weight stored as an offset from one (Gemma): "
                                 "0 | 1");
    o.o_sandwich = g->add_option("--sandwich-norm", o.sandwich,
                                 "each sublayer's output RMSNormed before its residual add (Gemma 2/3's "
                                 "post_attention_layernorm, post_feedforward_layernorm): 0 | 1");
    o.o_nope = g->add_option("--nope", o.nope,
                             "the layer leaves q and k unrotated (a NoPE layer: SmolLM3's every 4th, Llama 4's "
                             "no_rope_layers): 0 | 1");
    o.o_hidden_act = g->add_option("--hidden-act", o.hidden_act,
                                   "the FFN gate's activation (HF hidden_act): silu (SwiGLU) | gelu_tanh (GeGLU, "
                                   "Gemma's gelu_pytorch_tanh)");
    if (with_layers) {  // the model's, not the block's: where --layers is, a forward is
        o.o_embedding_multiplier = g->add_option("--embedding-multiplier", o.embedding_multiplier,
                                                 "the embedding rows times this before the first block (Gemma: "
                                                 "sqrt(d_model)); 1: none");
        o.o_final_softcap = g->add_option("--final-logit-softcap", o.final_softcap,
                                          "cap: the logits become cap * tanh(logits / cap) after the LM head (Gemma "
                                          "2's final_logit_softcapping); 0: none");
    }
    o.o_kv_cache_dtype = g->add_option("--kv-cache-dtype", o.kv_cache_dtype,
                                       "the KV cache's storage, paged_attention's and decode's (vLLM's "
                                       "kv_cache_dtype): none | fp8_e4m3 | fp8_e5m2 (K and V written as "
                                       "fp8(x / scale), read as code * scale)");
    o.o_kv_scale = g->add_option("--kv-scale", o.kv_scale, "an FP8 cache's scales: tensor (one each for K and V) | head (one per kv head)");
    o.o_eps = g->add_option("--eps,--norm-eps", o.eps, "RMSNorm eps");
}

ModelConfig resolve_config(const ConfigOptions& o, const ModelConfig& base, bool validate) {
    ModelConfig m = base;
    if (o.o_preset && o.o_preset->count()) {
        const Preset* p = find_preset(o.preset);
        if (!p) throw ConfigError("--preset: unknown preset '" + o.preset + "' (presets: " + preset_names() + ")");
        m = p->model();
    }
    if (o.o_file && o.o_file->count()) {
        const std::string replaced = m.name;
        m = load_hf_config(o.file);
        if (!replaced.empty()) m.notes.push_back("--config replaced " + replaced);
    }

    BlockConfig& c = m.block;
    auto size = [&](CLI::Option* opt, const char* flag, int64_t v, int64_t& field) {
        if (!opt || !opt->count()) return;
        if (v <= 0) throw ConfigError(std::string(flag) + ": expected a positive integer, found " + std::to_string(v));
        m.overrides.push_back(std::string(flag) + " " + std::to_string(v) +
                              (m.name.empty() ? "" : " (was " + std::to_string(field) + ")"));
        field = v;
    };
    size(o.o_d_model, "--d-model", o.d_model, c.d_model);
    size(o.o_heads, "--heads", o.heads, c.n_heads);
    size(o.o_kv_heads, "--kv-heads", o.kv_heads, c.n_kv_heads);
    if (o.o_head_dim && o.o_head_dim->count()) {
        // A partial rotary fraction stays a fraction of the new head_dim.
        if (c.rotary_dim > 0 && c.head_dim > 0 && o.head_dim > 0)
            c.rotary_dim = c.rotary_dim * o.head_dim / c.head_dim;
        size(o.o_head_dim, "--head-dim", o.head_dim, c.head_dim);
    }
    size(o.o_ffn, "--ffn", o.ffn, c.ffn_dim);
    size(o.o_layers, "--layers", o.layers, m.layers);
    if (o.o_theta && o.o_theta->count()) {
        if (!(o.theta > 1)) throw ConfigError("--theta: expected a number > 1, found " + num(o.theta));
        m.overrides.push_back("--theta " + num(o.theta) + (m.name.empty() ? "" : " (was " + num(c.rope_theta) + ")"));
        c.rope_theta = o.theta;
    }
    if (o.o_eps && o.o_eps->count()) {
        if (!(o.eps > 0 && o.eps < 1)) throw ConfigError("--eps: expected a number in (0, 1), found " + num(o.eps));
        m.overrides.push_back("--eps " + num(o.eps) + (m.name.empty() ? "" : " (was " + num(c.norm_eps) + ")"));
        c.norm_eps = o.eps;
    }
    if (o.o_layout && o.o_layout->count()) {
        const auto l = parse_rope_layout(o.layout);
        if (!l) throw ConfigError("--layout: expected neox or interleaved, found '" + o.layout + "'");
        m.overrides.push_back("--layout " + o.layout +
                              (m.name.empty() ? "" : std::string(" (was ") + to_string(c.rope_layout) + ")"));
        c.rope_layout = *l;
    }
    // A switch flag: 0 | 1 (or on/off, true/false), recorded as an override.
    auto switch_flag = [&](const CLI::Option* opt, const std::string& v, const char* flag, bool& field) {
        if (!opt || !opt->count()) return;
        bool on;
        if (v == "1" || v == "on" || v == "true") on = true;
        else if (v == "0" || v == "off" || v == "false") on = false;
        else throw ConfigError(std::string(flag) + ": expected 0 or 1, found '" + v + "'");
        m.overrides.push_back(std::string(flag) + " " + (on ? "1" : "0") +
                              (m.name.empty() ? "" : std::string(" (was ") + (field ? "1" : "0") + ")"));
        field = on;
    };
    switch_flag(o.o_qk_norm, o.qk_norm, "--qk-norm", c.qk_norm);
    switch_flag(o.o_qkv_bias, o.qkv_bias, "--qkv-bias", c.qkv_bias);
    switch_flag(o.o_sinks, o.sinks, "--attn-sinks", c.attn_sinks);
    switch_flag(o.o_plus_one, o.plus_one, "--norm-plus-one", c.norm_plus_one);
    switch_flag(o.o_sandwich, o.sandwich, "--sandwich-norm", c.sandwich_norm);
    switch_flag(o.o_nope, o.nope, "--nope", c.nope);
    if (o.o_chunk && o.o_chunk->count()) {
        if (o.chunk < 0) throw ConfigError("--attention-chunk-size: expected a count >= 0, found " + std::to_string(o.chunk));
        m.overrides.push_back("--attention-chunk-size " + std::to_string(o.chunk) +
                              (m.name.empty() ? "" : " (was " + std::to_string(c.attention_chunk_size) + ")"));
        c.attention_chunk_size = o.chunk;
    }
    if (o.o_window && o.o_window->count()) {
        if (o.window < 0) throw ConfigError("--sliding-window: expected a count >= 0, found " + std::to_string(o.window));
        m.overrides.push_back("--sliding-window " + std::to_string(o.window) +
                              (m.name.empty() ? "" : " (was " + std::to_string(c.sliding_window) + ")"));
        c.sliding_window = o.window;
    }
    // A served variant's number: finite and >= 0 (0: off).
    auto number_flag = [&](const CLI::Option* opt, double v, const char* flag, const char* expected, double& field) {
        if (!opt || !opt->count()) return;
        if (!(v >= 0) || !std::isfinite(v))
            throw ConfigError(std::string(flag) + ": expected " + expected + ", found " + num(v));
        m.overrides.push_back(std::string(flag) + " " + num(v) + (m.name.empty() ? "" : " (was " + num(field) + ")"));
        field = v;
    };
    number_flag(o.o_softcap, o.softcap, "--attn-softcap", "a cap >= 0 (0: none)", c.attn_logit_softcapping);
    number_flag(o.o_attn_scale, o.attn_scale, "--attn-scale", "a scale >= 0 (0: 1/sqrt(head_dim))", c.attn_scale);
    number_flag(o.o_final_softcap, o.final_softcap, "--final-logit-softcap", "a cap >= 0 (0: none)",
                m.final_logit_softcapping);
    // A named enum's flag: one of its names.
    auto enum_flag = [&](const CLI::Option* opt, const std::string& text, const char* flag, const char* expected,
                         auto& field) {
        if (!opt || !opt->count()) return;
        const auto v = parse_named(text, std::decay_t<decltype(field)>{});
        if (!v) throw ConfigError(std::string(flag) + ": expected " + expected + ", found '" + text + "'");
        m.overrides.push_back(std::string(flag) + " " + to_string(*v) +
                              (m.name.empty() ? "" : std::string(" (was ") + to_string(field) + ")"));
        field = *v;
    };
    enum_flag(o.o_hidden_act, o.hidden_act, "--hidden-act", "silu or gelu_tanh", c.hidden_act);
    if (o.o_embedding_multiplier && o.o_embedding_multiplier->count()) {
        if (!(o.embedding_multiplier > 0) || !std::isfinite(o.embedding_multiplier))
            throw ConfigError("--embedding-multiplier: expected a positive number, found " + num(o.embedding_multiplier));
        m.overrides.push_back("--embedding-multiplier " + num(o.embedding_multiplier) +
                              (m.name.empty() ? "" : " (was " + num(m.embedding_multiplier) + ")"));
        m.embedding_multiplier = o.embedding_multiplier;
    }
    enum_flag(o.o_kv_cache_dtype, o.kv_cache_dtype, "--kv-cache-dtype", "none, fp8_e4m3 or fp8_e5m2", c.kv_cache_dtype);
    if (o.o_kv_scale && o.o_kv_scale->count()) {
        if (o.kv_scale != "tensor" && o.kv_scale != "head")
            throw ConfigError("--kv-scale: expected tensor or head, found '" + o.kv_scale + "'");
        if (c.kv_cache_dtype == KvCacheDtype::none)
            throw ConfigError("--kv-scale: the KV cache has no FP8 dtype (give --kv-cache-dtype fp8_e4m3 or fp8_e5m2)");
        m.overrides.push_back("--kv-scale " + o.kv_scale);
        c.kv_scale_per_head = o.kv_scale == "head";
    }
    if (m.name.empty() && !m.overrides.empty()) {
        m.name = "custom";
        m.origin = "flags";
        // Nothing to override: every size must come from a flag.
        for (const auto& [flag, v] : {std::pair<const char*, int64_t>{"--d-model", c.d_model}, {"--heads", c.n_heads},
                                      {"--kv-heads", c.n_kv_heads}, {"--head-dim", c.head_dim}, {"--ffn", c.ffn_dim},
                                      {"--layers", m.layers}})
            if (validate && v <= 0)
                throw ConfigError(std::string(flag) + ": missing (no --preset or --config to take it from)");
    }
    if (validate && !m.name.empty()) {
        std::string where = m.origin;
        if (!m.overrides.empty()) where += " with the flags";
        validate_block(c, where);
        if (m.layers <= 0) throw ConfigError(where + ": layers: expected a positive integer, found " + std::to_string(m.layers));
    }
    return m;
}

void print_config(std::ostream& out, const ModelConfig& m, const std::string& indent) {
    out << indent << "config: " << m.origin;
    if (!m.architecture.empty()) out << " (" << m.architecture << ")";
    out << "\n" << indent << "  " << describe(m.block) << " layers=" << m.layers;
    if (m.vocab > 0) out << " vocab=" << m.vocab;
    if (m.max_position > 0) out << " max_position=" << m.max_position;
    if (m.embedding_multiplier != 1.0) out << " embedding_x=" << m.embedding_multiplier;
    if (m.final_logit_softcapping > 0) out << " final_softcap=" << m.final_logit_softcapping;
    out << "\n";
    if (!m.pattern.empty()) {
        out << indent << "  layers: " << m.pattern.describe();
        if (!m.pattern.sliding.empty()) {
            out << " (a full layer has no window";
            if (m.pattern.local_rope_theta > 0) out << "; a sliding layer's RoPE base is " << m.pattern.local_rope_theta << ", unscaled";
            out << ")";
        }
        out << "\n";
    }
    for (const auto& d : m.defaults) out << indent << "  default taken: " << d << "\n";
    for (const auto& d : m.overrides) out << indent << "  override: " << d << "\n";
    for (const auto& d : m.notes) out << indent << "  note: " << d << "\n";
}

// The block's fields from conform/config.h's table (a scaling parameter
// only where the type takes it; rotary_dim as the rotated width), then the
// model's own.
nlohmann::json config_json(const ModelConfig& m) {
    const BlockConfig& c = m.block;
    nlohmann::json j = {{"name", m.name}, {"origin", m.origin}, {"architecture", m.architecture}};
    for_each_field(c, [&](const ConfigField& f, const auto& v) {
        using V = std::decay_t<decltype(v)>;
        nlohmann::json value;
        if constexpr (is_named_enum<V>)
            value = to_string(v);
        else
            value = v;
        const std::string name = f.name;
        if (name.rfind("rope_scaling.", 0) != 0) {
            j[name] = value;
        } else if (!f.is_scaling_param() || f.applies(c.rope_scaling.type)) {
            j["rope_scaling"][name.substr(std::string("rope_scaling.").size())] = value;
        }
    });
    j["rotary_dim"] = c.rotary();
    j["layers"] = m.layers;
    j["vocab"] = m.vocab;
    j["max_position"] = m.max_position;
    j["tie_embeddings"] = m.tie_embeddings;
    j["embedding_multiplier"] = m.embedding_multiplier;
    j["final_logit_softcapping"] = m.final_logit_softcapping;
    if (!m.pattern.sliding.empty()) {
        std::vector<std::string> kinds;
        for (bool s : m.pattern.sliding) kinds.push_back(s ? "sliding" : "full");
        j["layer_types"] = kinds;
        if (m.pattern.local_rope_theta > 0) j["local_rope_theta"] = m.pattern.local_rope_theta;
    }
    if (!m.pattern.nope.empty()) j["nope_layers"] = m.pattern.nope;
    j["defaults_taken"] = m.defaults;
    j["overrides"] = m.overrides;
    j["notes"] = m.notes;
    return j;
}

std::optional<ModelConfig> resolve_model(const ConfigOptions& o, std::string* problem) {
    try {
        ModelConfig m = resolve_config(o);
        // forward's random model and anatomy are the whole block: a model with a part conform does not
        // compute (gpt-oss's experts, its YaRN) is refused here, by that part.
        if (const std::string why = unmodelled_for(m, Op::block); !why.empty()) {
            *problem = m.name + ": " + why + "; a whole block of it is not this model (its attention ops are: " +
                       "conform --op attention,paged_attention)";
            return std::nullopt;
        }
        if (!m.name.empty()) return m;
        *problem = "which model? give --preset NAME or --config FILE (and flags to override)";
    } catch (const ConfigError& e) {
        *problem = e.what();
    }
    return std::nullopt;
}

}  // namespace conform::config
