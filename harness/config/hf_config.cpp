#include "config/hf_config.h"

#include "core/case.h"  // InputError
#include "core/input_file.h"
#include "core/json_input.h"
#include "core/limits.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace conform::config {

namespace {

using nlohmann::json;

std::string num(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
}

// What each architecture's HF config class takes for a field the file omits
// (transformers models/<arch>/configuration_<arch>.py, the __init__ defaults).
struct HfDefaults {
    const char* cls;           // the config class, for messages
    const char* architecture;  // its ForCausalLM class
    const char* model_type;
    int64_t vocab, hidden, intermediate, layers, heads;
    int64_t kv_heads;  // 0: num_attention_heads
    int64_t head_dim;  // 0: hidden_size / num_attention_heads
    int64_t max_position;
    double eps, theta;
    bool qk_norm;     // not a field: the architecture norms q and k per head
    bool qkv_bias;    // not a field: q_proj, k_proj, v_proj are nn.Linear(bias=True) (Qwen2), o_proj is not
    const char* note;  // what the block does not model, or nullptr
};

const HfDefaults kArchitectures[] = {
    {"LlamaConfig", "LlamaForCausalLM", "llama", 32000, 4096, 11008, 32, 32, 0, 0, 2048, 1e-6, 10000.0, false, false,
     nullptr},
    {"MistralConfig", "MistralForCausalLM", "mistral", 32000, 4096, 14336, 32, 32, 8, 0, 4096 * 32, 1e-6, 10000.0,
     false, false, nullptr},
    {"Qwen2Config", "Qwen2ForCausalLM", "qwen2", 151936, 4096, 22016, 32, 32, 32, 0, 32768, 1e-6, 10000.0, false, true,
     nullptr},
    {"Qwen3Config", "Qwen3ForCausalLM", "qwen3", 151936, 4096, 22016, 32, 32, 32, 128, 32768, 1e-6, 10000.0, true,
     false, nullptr},
    {"Phi3Config", "Phi3ForCausalLM", "phi3", 32064, 3072, 8192, 32, 32, 0, 0, 4096, 1e-5, 10000.0, false, false,
     nullptr},
    // Gemma 1: (1 + w) norms, GeGLU, the embedding times sqrt(hidden_size),
    // tied embeddings (below, by model_type).
    {"GemmaConfig", "GemmaForCausalLM", "gemma", 256000, 3072, 24576, 28, 16, 16, 256, 8192, 1e-6, 10000.0, false,
     false, nullptr},
    // Gemma 2 and 3 (text): Gemma's norms, GeGLU and embedding scale, and
    // sandwich norms, query_pre_attn_scalar, sliding / full layers; Gemma 2
    // soft-caps, Gemma 3 norms q and k and gives its sliding layers their
    // own RoPE base (below, by model_type).
    {"Gemma2Config", "Gemma2ForCausalLM", "gemma2", 256000, 2304, 9216, 26, 8, 4, 256, 8192, 1e-6, 10000.0, false,
     false, nullptr},
    {"Gemma3TextConfig", "Gemma3ForCausalLM", "gemma3_text", 262208, 2304, 9216, 26, 8, 4, 256, 131072, 1e-6, 1e6, true,
     false, nullptr},
    // SmolLM3: Llama's block with NoPE layers (no_rope_layers; below).
    {"SmolLM3Config", "SmolLM3ForCausalLM", "smollm3", 128256, 2048, 11008, 36, 16, 4, 0, 32768, 1e-6, 2e6, false, false,
     nullptr},
    // Mixtral, Qwen2-MoE and Qwen3-MoE: Mistral's, Qwen2's and Qwen3's
    // attention, and a mixture of experts the moe ops compute (below; the
    // block and forward do not: ModelConfig::ffn_unmodelled).
    {"MixtralConfig", "MixtralForCausalLM", "mixtral", 32000, 4096, 14336, 32, 32, 8, 0, 4096 * 32, 1e-5, 1e6, false,
     false, nullptr},
    {"Qwen2MoeConfig", "Qwen2MoeForCausalLM", "qwen2_moe", 151936, 2048, 5632, 24, 16, 16, 0, 8192, 1e-6, 1e6, false,
     true, nullptr},
    {"Qwen3MoeConfig", "Qwen3MoeForCausalLM", "qwen3_moe", 151936, 2048, 6144, 24, 32, 4, 0, 32768, 1e-6, 10000.0, true,
     false, nullptr},
    // gpt-oss: its attention is read (q/k/v and o_proj biases, a sink per
    // head, sliding / full layers); its FFN is a mixture of experts, which
    // conform does not compute (below: ModelConfig::ffn_unmodelled).
    // DeepSeek-V3 (Kimi-K2 too): its FFN is a mixture of experts the moe
    // ops compute; its attention is latent (MLA), which conform does not
    // compute yet (ModelConfig::attention_unmodelled). head_dim is
    // qk_rope_head_dim, as DeepseekV3Config sets it.
    {"DeepseekV3Config", "DeepseekV3ForCausalLM", "deepseek_v3", 129280, 7168, 18432, 61, 128, 128, 64, 4096, 1e-6,
     10000.0, false, false, nullptr},
    // OLMoE: experts the moe ops compute; q and k normed over all heads at
    // once, which the block's per-head QK-norm is not (attention_unmodelled).
    {"OlmoeConfig", "OlmoeForCausalLM", "olmoe", 50304, 2048, 2048, 16, 16, 0, 0, 4096, 1e-5, 10000.0, false, false,
     nullptr},
    // Llama 4's text model: experts the moe ops compute (a sigmoid of the
    // chosen logits, the weight on the expert's input, a shared expert); its
    // attention (unweighted L2 QK-norm on RoPE layers, NoPE layers' temperature
    // tuning) is not the block's (attention_unmodelled).
    {"Llama4TextConfig", "Llama4ForCausalLM", "llama4_text", 202048, 5120, 8192, 48, 40, 8, 128, 4096 * 32, 1e-5,
     500000.0, false, false, nullptr},
    {"GptOssConfig", "GptOssForCausalLM", "gpt_oss", 201088, 2880, 2880, 36, 64, 8, 64, 131072, 1e-5, 150000.0, false,
     true, nullptr},
};

// Served architectures whose twists the block does not model yet: refused by
// name rather than read with Llama's conventions (which would run another
// model). model_type, then what it has that the block lacks.
struct Unmodelled {
    const char* model_type;
    const char* what;
};
const Unmodelled kUnmodelled[] = {
    // (Gemma 1, 2 and 3's text model are read: every twist of theirs is modelled.)
    {"gemma3", "a vision tower around its text model (Gemma3ForConditionalGeneration); the text model's "
               "config is its text_config, model_type gemma3_text, which conform reads"},
    {"llama4", "a vision tower around its text model (Llama4ForConditionalGeneration); the text model's config "
               "is its text_config, model_type llama4_text, which conform reads (its FFN ops)"},
};

// Fields that name a twist of the attention or the FFN the block does not
// model; present with a value that turns it on, the config is refused naming
// the field. (A null, false or 0 is the field's "off".)
struct TwistField {
    const char* key;
    const char* what;
    // Set where the block models the twist but no architecture read here
    // applies it (transformers' Gemma 2 does, with norms the block lacks):
    // why the field is refused all the same.
    const char* instead = nullptr;
};
const TwistField kTwistFields[] = {
    {"attn_logit_softcapping", "attention logit soft-capping (cap * tanh(s / cap))",
     "the block models it (--attn-softcap), but of the architectures read here none applies it in transformers "
     "(Gemma 2 does, with post-norms and GeGLU the block does not model); refused rather than run as another "
     "model"},
    {"final_logit_softcapping", "LM-head logit soft-capping",
     "conform forward models it (--final-logit-softcap), but of the architectures read here none applies it in "
     "transformers (Gemma 2 does, with post-norms the block does not model); refused rather than run as another "
     "model"},
    {"query_pre_attn_scalar", "an attention scale other than 1/sqrt(head_dim)",
     "the block models it (--attn-scale, query_pre_attn_scalar^-1/2), but of the architectures read here none "
     "applies it in transformers (Gemma 2 and 3 do, with post-norms the block does not model); refused rather than "
     "run as another model"},
    {"sliding_window_pattern", "alternating sliding-window layers"},
    {"rope_local_base_freq", "a RoPE base of the sliding layers' own"},
    {"no_rope_layers", "layers without RoPE (NoPE)"},
    {"attention_chunk_size", "chunked attention",
     "the block models it (--attention-chunk-size), but of the architectures read here none applies it (Llama 4 "
     "does, whose attention is read around: its FFN ops run); refused rather than run as another model"},
    {"num_local_experts", "a mixture-of-experts FFN"},
    {"num_experts", "a mixture-of-experts FFN"},
    {"n_routed_experts", "a mixture-of-experts FFN"},
};

// Reads one file's fields, recording every default it takes.
class Reader {
   public:
    Reader(const json& j, std::string file, ModelConfig& m) : j_(j), file_(std::move(file)), m_(m) {}

    [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
        throw ConfigError(file_ + ": " + field + ": " + msg);
    }

    static bool present(const json& obj, const char* key) { return obj.contains(key) && !obj.at(key).is_null(); }
    bool present(const char* key) const { return present(j_, key); }

    int64_t integer(const json& obj, const std::string& field, const char* key) const {
        const json& v = obj.at(key);
        if (v.is_number_integer()) return v.get<int64_t>();
        if (v.is_number_float()) {
            const double d = v.get<double>();
            if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
        }
        fail(field, "expected an integer, found " + shown(v));
    }
    double number(const json& obj, const std::string& field, const char* key) const {
        const json& v = obj.at(key);
        if (v.is_number()) {
            const double d = v.get<double>();
            if (std::isfinite(d)) return d;
        }
        fail(field, "expected a number, found " + shown(v));
    }

    // A size: present and a positive integer at most max (core/limits.h: checked
    // before anything loops over it), or the default (recorded).
    int64_t size(const char* key, int64_t fallback, const std::string& why, int64_t max = limits::kWidth) {
        if (!present(key)) {
            m_.defaults.push_back(std::string(key) + ": absent, took " + std::to_string(fallback) + " (" + why + ")");
            return fallback;
        }
        const int64_t v = integer(j_, key, key);
        if (v <= 0 || v > max)
            fail(key, "expected a positive integer <= " + std::to_string(max) + ", found " + std::to_string(v));
        return v;
    }
    // A per-layer list (layer_types, no_rope_layers): an array of num_hidden_layers entries.
    const json& per_layer(const char* key, int64_t layers, const std::string& entries) const {
        const json& v = j_.at(key);
        if (!v.is_array() || static_cast<int64_t>(v.size()) != layers)
            fail(key, "expected a list of num_hidden_layers = " + std::to_string(layers) + " " + entries + ", found " +
                          shown(v));
        return v;
    }
    double positive(const char* key, double fallback, const std::string& why) {
        if (!present(key)) {
            m_.defaults.push_back(std::string(key) + ": absent, took " + num(fallback) + " (" + why + ")");
            return fallback;
        }
        const double v = number(j_, key, key);
        if (!(v > 0)) fail(key, "expected a positive number, found " + shown(j_.at(key)));
        return v;
    }

    const json& j_;
    std::string file_;
    ModelConfig& m_;
};

// rope_scaling (or transformers v5's rope_parameters) as explicit numbers,
// the way modeling_rope_utils.py resolves them.
RopeScaling read_scaling(Reader& r, const json& rs, const std::string& where, int64_t max_position,
                         bool max_position_given) {
    RopeScaling s;
    if (!rs.is_object()) r.fail(where, "expected an object or null, found " + shown(rs));
    // HF's legacy key was `type`; `rope_type` wins when both are there.
    const char* type_key = Reader::present(rs, "rope_type") ? "rope_type" : Reader::present(rs, "type") ? "type" : nullptr;
    std::string type = "default";
    if (type_key) {
        if (!rs.at(type_key).is_string())
            r.fail(where + "." + type_key, "expected a string, found " + shown(rs.at(type_key)));
        type = rs.at(type_key).get<std::string>();
    }
    const std::string type_field = where + "." + (type_key ? type_key : "rope_type");
    const auto t = parse_rope_scaling_type(type);
    if (!t || type == "none")
        r.fail(type_field, "'" + type +
                               "' is not supported (supported: default, linear, dynamic, yarn, llama3; "
                               "longrope / su and the others are not implemented)");
    s.type = *t;
    if (s.type == RopeScalingType::none) return s;

    auto field = [&](const char* key) { return where + "." + key; };
    auto required = [&](const char* key) {
        if (!Reader::present(rs, key))
            r.fail(field(key), "missing (rope_type '" + type + "' requires it, as HF does)");
        const double v = r.number(rs, field(key), key);
        if (!(v > 0)) r.fail(field(key), "expected a positive number, found " + shown(rs.at(key)));
        return v;
    };
    // The context the model was pre-trained with: rope_scaling's own
    // original_max_position_embeddings, else max_position_embeddings.
    auto original = [&]() -> int64_t {
        if (Reader::present(rs, "original_max_position_embeddings")) {
            const int64_t v = r.integer(rs, field("original_max_position_embeddings"), "original_max_position_embeddings");
            if (v <= 0) r.fail(field("original_max_position_embeddings"), "expected a positive integer, found " + std::to_string(v));
            return v;
        }
        r.m_.defaults.push_back(field("original_max_position_embeddings") + ": absent, took max_position_embeddings = " +
                                std::to_string(max_position) +
                                (max_position_given ? "" : " (itself a default)"));
        return max_position;
    };

    s.factor = required("factor");
    switch (s.type) {
        case RopeScalingType::none:
        case RopeScalingType::linear: break;
        case RopeScalingType::llama3:
            s.low_freq_factor = required("low_freq_factor");
            s.high_freq_factor = required("high_freq_factor");
            if (!(s.high_freq_factor > s.low_freq_factor))
                r.fail(field("high_freq_factor"), "expected > low_freq_factor (" + num(s.low_freq_factor) + "), found " +
                                                      num(s.high_freq_factor));
            s.original_max_position = original();
            break;
        case RopeScalingType::dynamic:
            // HF's dynamic NTK reads config.max_position_embeddings, whatever rope_scaling says.
            s.original_max_position = max_position;
            if (!max_position_given)
                r.m_.defaults.push_back(field("original_max_position") + ": dynamic uses max_position_embeddings, absent, took " +
                                        std::to_string(max_position));
            break;
        case RopeScalingType::yarn: {
            s.original_max_position = original();
            // beta_fast / beta_slow: `rs.get(key) or default` — absent, null and 0 all mean the default.
            auto beta = [&](const char* key, double fallback) {
                if (Reader::present(rs, key)) {
                    const double v = r.number(rs, field(key), key);
                    if (v != 0) return v;
                }
                r.m_.defaults.push_back(field(key) + ": absent, took " + num(fallback) + " (HF's default)");
                return fallback;
            };
            s.beta_fast = beta("beta_fast", 32.0);
            s.beta_slow = beta("beta_slow", 1.0);
            if (!(s.beta_fast > s.beta_slow))
                r.fail(field("beta_fast"), "expected > beta_slow (" + num(s.beta_slow) + "), found " + num(s.beta_fast));
            // truncate (HF's default true) floors / ceils the ramp's ends; gpt-oss's false keeps them as found.
            if (Reader::present(rs, "truncate")) {
                if (!rs.at("truncate").is_boolean())
                    r.fail(field("truncate"), "expected true or false, found " + shown(rs.at("truncate")));
                s.truncate = rs.at("truncate").get<bool>();
            }
            // get_mscale(scale, m) = 0.1 m ln(scale) + 1 for scale > 1, else 1.
            auto mscale = [&](double m) { return s.factor <= 1 ? 1.0 : 0.1 * m * std::log(s.factor) + 1.0; };
            if (Reader::present(rs, "attention_factor")) {
                s.attention_factor = r.number(rs, field("attention_factor"), "attention_factor");
                if (!(s.attention_factor > 0))
                    r.fail(field("attention_factor"), "expected a positive number, found " + shown(rs.at("attention_factor")));
            } else {
                const double m = Reader::present(rs, "mscale") ? r.number(rs, field("mscale"), "mscale") : 0;
                const double all =
                    Reader::present(rs, "mscale_all_dim") ? r.number(rs, field("mscale_all_dim"), "mscale_all_dim") : 0;
                if (m != 0 && all != 0) {
                    s.attention_factor = mscale(m) / mscale(all);
                    r.m_.defaults.push_back(field("attention_factor") + ": absent, took get_mscale(factor, mscale) / "
                                            "get_mscale(factor, mscale_all_dim) = " + num(s.attention_factor));
                } else {
                    s.attention_factor = mscale(1.0);
                    r.m_.defaults.push_back(field("attention_factor") + ": absent, took 0.1 ln(factor) + 1 = " +
                                            num(s.attention_factor) + " (HF's get_mscale)");
                }
            }
            break;
        }
    }
    return s;
}

ModelConfig resolve(const json& j, const std::string& file) {
    ModelConfig m;
    m.name = file;
    m.origin = "config " + file;
    Reader r(j, file, m);
    if (!j.is_object()) r.fail("(top level)", "expected a JSON object, found " + std::string(j.type_name()));

    // ---- the architecture: which defaults, which conventions ----------------------
    const HfDefaults* arch = nullptr;
    std::string arch_name;
    if (r.present("architectures")) {
        const json& a = j.at("architectures");
        if (!a.is_array() || a.empty() || !a[0].is_string())
            r.fail("architectures", "expected a list of class names, found " + shown(a));
        arch_name = a[0].get<std::string>();
        // A class name is a few dozen characters; a longer one is only ever quoted, cut.
        if (arch_name.size() > 200) r.fail("architectures[0]", "expected a class name, found " + shown(a[0]));
        for (const auto& d : kArchitectures)
            if (arch_name == d.architecture) arch = &d;
    }
    std::string model_type;
    if (r.present("model_type")) {
        if (!j.at("model_type").is_string()) r.fail("model_type", "expected a string, found " + shown(j.at("model_type")));
        model_type = j.at("model_type").get<std::string>();
        if (model_type.size() > 200) r.fail("model_type", "expected a model type, found " + shown(j.at("model_type")));
        if (!arch)
            for (const auto& d : kArchitectures)
                if (model_type == d.model_type) arch = &d;
    }
    for (const Unmodelled& u : kUnmodelled)
        if (model_type == u.model_type)
            r.fail("model_type", "\"" + model_type + "\" (" + (arch_name.empty() ? model_type : arch_name) +
                                     ") has " + u.what + ", which conform does not model yet; refused rather than "
                                     "run as a Llama block");
    // The twists Gemma 2 and 3 apply, read below rather than refused.
    const std::string_view arch_type = arch ? arch->model_type : "";
    const bool gemma2 = arch_type == "gemma2", gemma3 = arch_type == "gemma3_text", gemma23 = gemma2 || gemma3;
    const bool smollm3 = arch_type == "smollm3", gptoss = arch_type == "gpt_oss";
    const bool mixtral = arch_type == "mixtral", qwen_moe = arch_type == "qwen2_moe" || arch_type == "qwen3_moe";
    const bool deepseek = arch_type == "deepseek_v3", olmoe = arch_type == "olmoe", llama4 = arch_type == "llama4_text";
    auto modelled = [&](std::string_view key) {
        const bool either = key == "attn_logit_softcapping" || key == "final_logit_softcapping" || key == "query_pre_attn_scalar";
        return (gemma23 && either) || (gemma3 && (key == "sliding_window_pattern" || key == "rope_local_base_freq")) ||
               (smollm3 && key == "no_rope_layers") || ((gptoss || mixtral) && key == "num_local_experts") ||
               ((qwen_moe || olmoe) && key == "num_experts") || (deepseek && key == "n_routed_experts") ||
               (llama4 && (key == "num_local_experts" || key == "attention_chunk_size" || key == "no_rope_layers"));
    };
    for (const TwistField& t : kTwistFields) {
        if (!r.present(t.key) || modelled(t.key)) continue;
        const json& v = j.at(t.key);
        const bool off = v == false || (v.is_number() && v.get<double>() == 0) || (v.is_array() && v.empty());
        if (!off && t.instead) r.fail(t.key, shown(v) + ": " + t.what + ": " + t.instead);
        if (!off)
            r.fail(t.key, shown(v) + ": " + t.what + ", which the block does not model; refused rather than run "
                                                   "without it");
    }
    m.architecture = arch ? arch->architecture : arch_name;
    if (!arch) {
        arch = &kArchitectures[0];
        m.defaults.push_back("architecture: " +
                             (arch_name.empty() && model_type.empty()
                                  ? std::string("absent")
                                  : "'" + (arch_name.empty() ? model_type : arch_name) + "' not known") +
                             ", took LlamaForCausalLM's conventions (NeoX, no QK-norm) and LlamaConfig's defaults");
    }
    if (arch->note) m.notes.push_back(arch->note);
    const std::string dflt = std::string(arch->cls) + "'s default";

    // The FFN gate: silu (SwiGLU) or gelu_pytorch_tanh (GeGLU). Exact GELU
    // ("gelu") is refused: no architecture read here runs it. GemmaMLP
    // reads hidden_activation alone (absent: gelu_pytorch_tanh) and ignores
    // hidden_act, which Gemma's own config.json files give as "gelu".
    // Gemma 1, 2 and 3 alike (their MLPs read hidden_activation).
    const bool gemma = std::string_view(arch->model_type) == "gemma" || gemma23;
    if (gemma) {
        if (r.present("hidden_act") && j.at("hidden_act") != "gelu_pytorch_tanh")
            m.notes.push_back("hidden_act: " + shown(j.at("hidden_act")) +
                              " not used: GemmaMLP takes hidden_activation (transformers #29402)");
        if (!r.present("hidden_activation")) {
            m.block.hidden_act = HiddenAct::gelu_tanh;
            m.defaults.push_back("hidden_activation: absent, took gelu_pytorch_tanh (" + std::string(arch->cls) +
                                 "'s default)");
        }
    }
    for (const char* key : {"hidden_act", "hidden_activation"}) {
        if (!r.present(key) || (gemma && std::string_view(key) == "hidden_act")) continue;
        const json& act = j.at(key);
        const auto a = act.is_string() ? parse_hidden_act(act.get<std::string>()) : std::nullopt;
        if (!a || act.get<std::string>() == "gelu_tanh")
            r.fail(key, "expected \"silu\" (SwiGLU) or \"gelu_pytorch_tanh\" (GeGLU), found " + shown(act) +
                            " (exact GELU and other activations are not modelled)");
        m.block.hidden_act = *a;
    }
    // Qwen2's biases are the architecture's (q, k, v only); Llama's
    // attention_bias puts one on o_proj too, which the block does not model:
    // refused rather than run as a model without it.
    if (gptoss) {
        // GptOssAttention: q, k, v and o_proj are nn.Linear(bias=attention_bias), True by default;
        // its sinks are a parameter of every layer. The MoE FFN is read around, never run as SwiGLU.
        bool bias = true;
        if (r.present("attention_bias")) {
            if (!j.at("attention_bias").is_boolean())
                r.fail("attention_bias", "expected true or false, found " + shown(j.at("attention_bias")));
            bias = j.at("attention_bias").get<bool>();
        } else {
            m.defaults.push_back("attention_bias: absent, took true (GptOssConfig's default)");
        }
        m.block.qkv_bias = bias;
        m.o_bias = bias;
        m.block.attn_sinks = true;
        auto count = [&](const char* key, int64_t dflt_v) {
            return r.present(key) ? r.integer(j, key, key) : dflt_v;
        };
        const int64_t experts = count("num_local_experts", 128), used = count("num_experts_per_tok", 4);
        m.ffn_unmodelled = "a mixture of " + std::to_string(experts) + " experts, " + std::to_string(used) +
                           " per token (GptOssMLP: a router, then experts whose SwiGLU is clamped, with biases): "
                           "the block does not compute it (--op moe does)";
        // GptOssMLP as the moe ops compute it (docs/moe.md): intermediate_size is each expert's width.
        if (experts < 1 || experts > limits::kExperts)
            r.fail("num_local_experts", "expected a positive integer <= " + std::to_string(limits::kExperts) +
                                            ", found " + std::to_string(experts));
        if (experts < 1 || used < 1 || used > experts)
            r.fail("num_experts_per_tok", "must be in [1, num_local_experts = " + std::to_string(experts) + "], found " +
                                              std::to_string(used));
        m.block.n_experts = experts;
        m.block.n_experts_per_tok = used;
        m.block.moe_router_bias = m.block.moe_norm_topk_prob = m.block.moe_gate_up_interleaved = true;
        m.block.moe_expert_bias = true;
        const double limit = r.present("swiglu_limit") ? r.number(j, "swiglu_limit", "swiglu_limit") : 7.0;
        if (!std::isfinite(limit) || !(limit > 0)) r.fail("swiglu_limit", "must be finite and > 0");
        m.block.moe_swiglu_limit = limit;
    } else if (r.present("attention_bias")) {
        const json& ab = j.at("attention_bias");
        if (!ab.is_boolean()) r.fail("attention_bias", "expected true or false, found " + shown(ab));
        if (ab.get<bool>() && !arch->qkv_bias)
            r.fail("attention_bias",
                   "true: " + std::string(arch->architecture) +
                       " then adds a bias to o_proj as well as q, k and v, and the block models q, k, v biases "
                       "only (Qwen2's); refused rather than run without it");
    }
    if (r.present("mlp_bias") && j.at("mlp_bias") == true)
        r.fail("mlp_bias", "true: the block's SwiGLU has no biases; refused rather than run without them");

    // ---- sizes ---------------------------------------------------------------------
    BlockConfig& c = m.block;
    c.d_model = r.size("hidden_size", arch->hidden, dflt);
    c.n_heads = r.size("num_attention_heads", arch->heads, dflt, limits::kHeads);
    c.n_kv_heads = arch->kv_heads > 0 ? r.size("num_key_value_heads", arch->kv_heads, dflt, limits::kHeads)
                                      : r.size("num_key_value_heads", c.n_heads, "num_attention_heads, as HF does", limits::kHeads);
    if (arch->head_dim > 0) {
        c.head_dim = r.size("head_dim", arch->head_dim, dflt, limits::kHeadDim);
    } else {
        if (!r.present("head_dim") && c.d_model % c.n_heads != 0)
            r.fail("head_dim", "absent, and hidden_size " + std::to_string(c.d_model) +
                                   " is not a multiple of num_attention_heads " + std::to_string(c.n_heads));
        c.head_dim = r.size("head_dim", c.d_model / c.n_heads, "hidden_size / num_attention_heads, as HF does", limits::kHeadDim);
    }
    c.ffn_dim = r.size("intermediate_size", arch->intermediate, dflt);
    m.layers = r.size("num_hidden_layers", arch->layers, dflt, limits::kLayers);
    if (gptoss) c.moe_ffn_dim = c.ffn_dim;  // GptOssExperts: intermediate_size is each expert's width

    // ---- a mixture-of-experts FFN: Mixtral, Qwen2-MoE, Qwen3-MoE (gpt-oss's above) ----
    // As the moe ops compute it (docs/moe.md): a softmax over every expert,
    // the top k, the experts' SwiGLU on [gate | up] without biases.
    if (mixtral || qwen_moe) {
        const char* count_key = mixtral ? "num_local_experts" : "num_experts";
        const int64_t experts = r.size(count_key, mixtral ? 8 : (arch_type == "qwen2_moe" ? 60 : 128), dflt, limits::kExperts);
        const int64_t used = r.size("num_experts_per_tok", mixtral ? 2 : (arch_type == "qwen2_moe" ? 4 : 8), dflt);
        if (used > experts)
            r.fail("num_experts_per_tok", "must be in [1, " + std::string(count_key) + " = " + std::to_string(experts) +
                                              "], found " + std::to_string(used));
        c.n_experts = experts;
        c.n_experts_per_tok = used;
        // MixtralSparseMoeBlock renormalises its top k always (no field); Qwen's by norm_topk_prob (default false).
        c.moe_norm_topk_prob = mixtral;
        if (qwen_moe && r.present("norm_topk_prob")) {
            if (!j.at("norm_topk_prob").is_boolean())
                r.fail("norm_topk_prob", "expected true or false, found " + shown(j.at("norm_topk_prob")));
            c.moe_norm_topk_prob = j.at("norm_topk_prob").get<bool>();
        } else if (qwen_moe) {
            m.defaults.push_back("norm_topk_prob: absent, took false (" + dflt + ")");
        }
        // Mixtral's experts are intermediate_size wide; Qwen's moe_intermediate_size.
        c.moe_ffn_dim = mixtral ? c.ffn_dim
                                : r.size("moe_intermediate_size", arch_type == "qwen2_moe" ? 1408 : 768, dflt);
        std::string what = mixtral ? "MixtralSparseMoeBlock: a softmax over the experts, the top " +
                                         std::to_string(used) + " renormalised"
                                   : std::string(arch->architecture) + "'s sparse block: a softmax over the experts, the top " +
                                         std::to_string(used) + (c.moe_norm_topk_prob ? " renormalised" : " as they are");
        if (arch_type == "qwen2_moe") {
            // Qwen2MoeSparseMoeBlock: shared_expert(x) * sigmoid(shared_expert_gate(x)), always.
            c.moe_shared_ffn_dim = r.size("shared_expert_intermediate_size", 5632, dflt);
            c.moe_shared_gate = true;
            what += ", and a shared expert gated by sigmoid(x @ shared_expert_gate)";
        }
        m.ffn_unmodelled = "a mixture of " + std::to_string(experts) + " experts, " + std::to_string(used) +
                           " per token (" + what + "): the block does not compute it (--op moe does)";
        // Which layers have experts: every decoder_sparse_step-th, but those in mlp_only_layers (dense).
        if (qwen_moe) {
            const bool every = !r.present("decoder_sparse_step") || j.at("decoder_sparse_step") == 1;
            const bool none_dense = !r.present("mlp_only_layers") ||
                                    (j.at("mlp_only_layers").is_array() && j.at("mlp_only_layers").empty());
            if (!every || !none_dense)
                m.notes.push_back("decoder_sparse_step / mlp_only_layers: some layers are dense (intermediate_size "
                                  "wide); the moe ops take the sparse layers' FFN");
        }
    }

    // ---- Llama 4's router and experts (Llama4TextMoe) -----------------------------------
    if (llama4) {
        const int64_t experts = r.size("num_local_experts", 16, dflt, limits::kExperts);
        const int64_t used = r.size("num_experts_per_tok", 1, dflt);
        if (used > experts)
            r.fail("num_experts_per_tok", "must be in [1, num_local_experts = " + std::to_string(experts) +
                                              "], found " + std::to_string(used));
        c.n_experts = experts;
        c.n_experts_per_tok = used;
        // Llama4Router: the top k of the raw logits, then sigmoid of the
        // chosen (sigmoid is monotone: the moe ops' sigmoid scoring chooses
        // the same k, and weighs them by sigmoid, not renormalised).
        c.moe_scoring = MoeScoring::sigmoid;
        c.moe_norm_topk_prob = false;
        c.moe_weight_on_input = true;  // routed_in = hidden_states * router_scores
        c.moe_ffn_dim = c.ffn_dim;     // the experts and the shared expert are intermediate_size wide
        c.moe_shared_ffn_dim = c.ffn_dim;
        c.moe_shared_gate = false;
        m.ffn_unmodelled = "a mixture of " + std::to_string(experts) + " experts, " + std::to_string(used) +
                           " per token (Llama4TextMoe: the top " + std::to_string(used) +
                           " of the router's logits weighted by their sigmoid, the weight on the expert's input, "
                           "and an unweighted shared expert): the block does not compute it (--op moe does)";
        m.attention_unmodelled = "attention with q and k L2-normed without a weight on its RoPE layers and its "
                                 "NoPE layers' scores temperature-tuned (attn_scale, floor_scale), which the block "
                                 "does not model: its FFN ops run (--op moe, moe_route, moe_experts, rmsnorm)";
        if (r.present("interleave_moe_layer_step") && j.at("interleave_moe_layer_step") != 1)
            m.notes.push_back("interleave_moe_layer_step: some layers are dense (intermediate_size_mlp wide); the "
                              "moe ops take the sparse layers' FFN");
    }

    // ---- DeepSeek-V3's router and experts (DeepseekV3MoE), OLMoE's ---------------------
    if (deepseek || olmoe) {
        const char* count_key = deepseek ? "n_routed_experts" : "num_experts";
        const int64_t experts = r.size(count_key, deepseek ? 256 : 64, dflt, limits::kExperts);
        const int64_t used = r.size("num_experts_per_tok", 8, dflt);
        if (used > experts)
            r.fail("num_experts_per_tok", "must be in [1, " + std::string(count_key) + " = " + std::to_string(experts) +
                                              "], found " + std::to_string(used));
        c.n_experts = experts;
        c.n_experts_per_tok = used;
        auto flag = [&](const char* key, bool fallback) {
            if (!r.present(key)) {
                m.defaults.push_back(std::string(key) + ": absent, took " + (fallback ? "true" : "false") + " (" + dflt + ")");
                return fallback;
            }
            if (!j.at(key).is_boolean()) r.fail(key, "expected true or false, found " + shown(j.at(key)));
            return j.at(key).get<bool>();
        };
        c.moe_norm_topk_prob = flag("norm_topk_prob", deepseek);
        // OLMoE's experts are intermediate_size wide; DeepSeek's moe_intermediate_size
        // (its intermediate_size is the first dense layers').
        c.moe_ffn_dim = olmoe ? c.ffn_dim : r.size("moe_intermediate_size", 2048, dflt);
        std::string what;
        if (olmoe) {
            what = "OlmoeSparseMoeBlock: a softmax over the experts, the top " + std::to_string(used) +
                   (c.moe_norm_topk_prob ? " renormalised" : " as they are");
            m.attention_unmodelled = "attention with q and k RMS-normed over all heads together (OlmoeAttention: "
                                     "q_norm over hidden_size, k_norm over the kv width), not per head as the "
                                     "block's QK-norm: its FFN ops run (--op moe, moe_route, moe_experts, rmsnorm)";
        } else {
            // The router DeepseekV3TopkRouter computes, whatever the file says
            // of it; a file that says otherwise (DeepSeek-V2's softmax or
            // greedy routers under this class) is refused, not run as V3's.
            for (const auto& [key, want] : {std::pair<const char*, const char*>{"scoring_func", "sigmoid"},
                                            {"topk_method", "noaux_tc"}})
                if (r.present(key) && j.at(key) != want)
                    r.fail(key, "expected \"" + std::string(want) + "\" (DeepseekV3TopkRouter computes that), found " +
                                    shown(j.at(key)));
            c.moe_scoring = MoeScoring::sigmoid;
            c.moe_selection_bias = true;  // e_score_correction_bias: the choice only
            c.moe_n_group = r.size("n_group", 8, dflt, experts);
            c.moe_topk_group = r.size("topk_group", 4, dflt, c.moe_n_group);
            if (experts % c.moe_n_group != 0 || experts / c.moe_n_group < 2)
                r.fail("n_group", "expected a divisor of n_routed_experts = " + std::to_string(experts) +
                                      " leaving at least 2 experts a group (its score is their top-2 sum), found " +
                                      std::to_string(c.moe_n_group));
            c.moe_group_score = MoeGroupScore::top2_sum;
            double rsf = 1.0;
            if (r.present("routed_scaling_factor")) {
                rsf = r.number(j, "routed_scaling_factor", "routed_scaling_factor");
                if (!(rsf > 0)) r.fail("routed_scaling_factor", "expected a positive number, found " + num(rsf));
            } else {
                rsf = 2.5;
                m.defaults.push_back("routed_scaling_factor: absent, took 2.5 (" + dflt + ")");
            }
            c.moe_routed_scaling_factor = rsf == 1.0 ? 0.0 : rsf;
            const int64_t shared = r.present("n_shared_experts") ? r.integer(j, "n_shared_experts", "n_shared_experts") : 1;
            if (shared < 0 || shared > 64)
                r.fail("n_shared_experts", "expected an integer in [0, 64], found " + std::to_string(shared));
            c.moe_shared_ffn_dim = shared * c.moe_ffn_dim;  // DeepseekV3MLP(intermediate = moe_intermediate_size * n_shared)
            c.moe_shared_gate = false;
            what = "DeepseekV3MoE: a float32 sigmoid router whose e_score_correction_bias chooses, " +
                   std::to_string(c.moe_topk_group) + " of " + std::to_string(c.moe_n_group) + " groups, the top " +
                   std::to_string(used) + (c.moe_norm_topk_prob ? " renormalised" : " as they are") + " times " +
                   num(rsf) + (shared > 0 ? ", and an unweighted shared expert" : "");
            m.attention_unmodelled = kLatentAttention;
            if (r.present("first_k_dense_replace") && j.at("first_k_dense_replace") != 0)
                m.notes.push_back("first_k_dense_replace: the first layers are dense (intermediate_size wide); the "
                                  "moe ops take the sparse layers' FFN");
        }
        m.ffn_unmodelled = "a mixture of " + std::to_string(experts) + " experts, " + std::to_string(used) +
                           " per token (" + what + "): the block does not compute it (--op moe does)";
    }

    // ---- sliding window, and which layers have it ------------------------------------
    // As transformers applies it. The window W: key visible iff q - W < k <= q.
    // Which layers: layer_types where the file has it; else Gemma 2's
    // alternation (layer 0 sliding), Gemma 3's sliding_window_pattern (every
    // p-th layer full), Qwen2/3's use_sliding_window from max_window_layers
    // on; Mistral and Phi-3 window every layer; Llama none.
    const std::string mt = arch->model_type;
    int64_t W = 0;
    if (r.present("sliding_window")) {
        const json& sw = j.at("sliding_window");
        if (!sw.is_number_integer() || sw.get<int64_t>() < 1)
            r.fail("sliding_window", "expected a positive integer or null, found " + shown(sw));
        W = sw.get<int64_t>();
    } else if (gemma23 && !j.contains("sliding_window")) {
        W = 4096;
        m.defaults.push_back("sliding_window: absent, took 4096 (" + dflt + ")");
    } else if (gptoss && !j.contains("sliding_window")) {
        W = 128;
        m.defaults.push_back("sliding_window: absent, took 128 (" + dflt + ")");
    }
    std::vector<bool> sliding;  // per layer; empty: as the architecture windows every layer (or none)
    std::string which;          // where `sliding` came from
    if (r.present("layer_types")) {
        const json& lt = r.per_layer("layer_types", m.layers, "layer types");
        for (size_t i = 0; i < lt.size(); ++i) {
            if (lt[i] == "sliding_attention" || lt[i] == "full_attention") {
                sliding.push_back(lt[i] == "sliding_attention");
                continue;
            }
            r.fail("layer_types[" + std::to_string(i) + "]",
                   shown(lt[i]) + ": " +
                       (lt[i] == "chunked_attention"
                            ? std::string("Llama 4's chunked attention, which the block models (--attention-chunk-size) "
                                          "but no architecture read here has per layer")
                            : std::string("a layer type the block does not model")) +
                       " (sliding_attention and full_attention are read); refused rather than run as another model");
        }
        which = "layer_types";
    } else if (gemma2 || gptoss) {
        for (int64_t l = 0; l < m.layers; ++l) sliding.push_back((l + 1) % 2 != 0);
        which = std::string(gemma2 ? "Gemma 2" : "gpt-oss") + "'s alternation, layer 0 sliding (" + arch->cls +
                "'s default layer_types)";
    } else if (gemma3) {
        int64_t p = 6;
        if (r.present("sliding_window_pattern")) {
            p = r.integer(j, "sliding_window_pattern", "sliding_window_pattern");
            if (p < 1) r.fail("sliding_window_pattern", "expected a positive integer, found " + std::to_string(p));
        } else {
            m.defaults.push_back("sliding_window_pattern: absent, took 6 (Gemma3TextConfig's default)");
        }
        for (int64_t l = 0; l < m.layers; ++l) sliding.push_back((l + 1) % p != 0);
        which = "sliding_window_pattern " + std::to_string(p) + " (every " + std::to_string(p) + "th layer full)";
    } else if ((mt == "qwen2" || mt == "qwen3" || mt == "qwen2_moe" || mt == "qwen3_moe") && W > 0) {
        const bool use = r.present("use_sliding_window") && j.at("use_sliding_window") == true;
        const int64_t from = r.present("max_window_layers") ? r.integer(j, "max_window_layers", "max_window_layers") : m.layers;
        if (!use) {
            m.notes.push_back("sliding_window: " + std::to_string(W) + " not used (use_sliding_window is " +
                              (r.present("use_sliding_window") ? "false" : "absent") + ")");
            W = 0;
        } else {
            for (int64_t l = 0; l < m.layers; ++l) sliding.push_back(l >= from);
            which = "use_sliding_window, from max_window_layers = " + std::to_string(from) + " on";
        }
    } else if (mt == "llama" && W > 0) {
        m.notes.push_back("sliding_window: " + std::to_string(W) + " not used: " + arch->architecture +
                          " attends full causal whatever the field says (as transformers does)");
        W = 0;
    }
    const auto n_sliding = std::count(sliding.begin(), sliding.end(), true);
    if (!sliding.empty() && W == 0 && n_sliding > 0) {
        m.notes.push_back(which + ": " + std::to_string(n_sliding) +
                          " sliding layers, but sliding_window is null: every layer attends full causal");
        sliding.clear();
    }
    if (!sliding.empty() && n_sliding == 0) {
        if (W > 0) m.notes.push_back("sliding_window: " + std::to_string(W) + " not used: every layer is full attention (" + which + ")");
        W = 0;
        sliding.clear();
    }
    if (!sliding.empty() && n_sliding == static_cast<int64_t>(sliding.size())) sliding.clear();  // every layer: the block's own
    m.block.sliding_window = W;
    if (!sliding.empty()) {
        m.pattern.sliding = sliding;
        m.notes.push_back("layers: " + m.pattern.describe() + " (" + which + ")");
    }
    // ---- NoPE layers (SmolLM3: SmolLM3Attention's use_rope = no_rope_layers[layer]) ----
    if (smollm3) {
        std::vector<bool> nope;
        if (r.present("no_rope_layers")) {
            const json& nr = r.per_layer("no_rope_layers", m.layers, "entries (1: the layer uses RoPE, 0: NoPE)");
            for (size_t i = 0; i < nr.size(); ++i) {
                if (nr[i] != 0 && nr[i] != 1)
                    r.fail("no_rope_layers[" + std::to_string(i) + "]", "expected 0 (NoPE) or 1 (RoPE), found " + shown(nr[i]));
                nope.push_back(nr[i] == 0);
            }
        } else {
            int64_t every = 4;
            if (r.present("no_rope_layer_interval")) {
                every = r.integer(j, "no_rope_layer_interval", "no_rope_layer_interval");
                if (every < 1) r.fail("no_rope_layer_interval", "expected a positive integer, found " + std::to_string(every));
            } else {
                m.defaults.push_back("no_rope_layers: absent, took every 4th layer NoPE (SmolLM3Config's "
                                     "no_rope_layer_interval 4)");
            }
            for (int64_t l = 0; l < m.layers; ++l) nope.push_back((l + 1) % every == 0);
        }
        const auto n_nope = std::count(nope.begin(), nope.end(), true);
        if (n_nope == m.layers) c.nope = true;  // every layer: the block's own
        else if (n_nope > 0) m.pattern.nope = nope;
        if (n_nope > 0) m.notes.push_back("NoPE layers: " + std::to_string(n_nope) + " of " + std::to_string(m.layers) +
                                          " leave q and k unrotated (no_rope_layers)");
    }
    m.vocab = r.size("vocab_size", arch->vocab, dflt, limits::kVocab);
    const bool max_position_given = r.present("max_position_embeddings");
    m.max_position = r.size("max_position_embeddings", arch->max_position, dflt, limits::kPosition);
    if (r.present("tie_word_embeddings")) {
        if (!j.at("tie_word_embeddings").is_boolean())
            r.fail("tie_word_embeddings", "expected true or false, found " + shown(j.at("tie_word_embeddings")));
        m.tie_embeddings = j.at("tie_word_embeddings").get<bool>();
    } else if (gemma || smollm3) {
        m.tie_embeddings = true;
        m.defaults.push_back("tie_word_embeddings: absent, took true (" + dflt + ")");
    }
    if (gemma) {
        // GemmaModel: hidden_states * torch.tensor(hidden_size ** 0.5, dtype=hidden_states.dtype).
        m.embedding_multiplier = std::sqrt(static_cast<double>(c.d_model));
        c.norm_plus_one = true;  // GemmaRMSNorm: output * (1.0 + weight)
    }
    if (gemma23) {
        // Gemma2DecoderLayer: post_attention_layernorm and post_feedforward_layernorm on each sublayer's output.
        c.sandwich_norm = true;
        // self.scaling = config.query_pre_attn_scalar ** -0.5
        const double qpas = r.positive("query_pre_attn_scalar", 256, dflt);
        if (qpas != static_cast<double>(c.head_dim)) c.attn_scale = 1.0 / std::sqrt(qpas);
        // Soft-caps: a number, or null for none (Gemma 3's); absent, the class's default.
        auto cap = [&](const char* key, double fallback) {
            if (j.contains(key) && j.at(key).is_null()) return 0.0;
            if (!j.contains(key)) {
                m.defaults.push_back(std::string(key) + ": absent, took " + (fallback > 0 ? num(fallback) : "null") +
                                     " (" + dflt + ")");
                return fallback;
            }
            const double v = r.number(j, key, key);
            if (!(v >= 0)) r.fail(key, "expected a positive number or null, found " + shown(j.at(key)));
            return v;
        };
        c.attn_logit_softcapping = cap("attn_logit_softcapping", gemma2 ? 50.0 : 0.0);
        m.final_logit_softcapping = cap("final_logit_softcapping", gemma2 ? 30.0 : 0.0);
    }

    // ---- conventions ------------------------------------------------------------------
    c.norm_eps = r.positive("rms_norm_eps", arch->eps, dflt);
    c.qk_norm = arch->qk_norm;
    c.qkv_bias = gptoss ? m.o_bias : arch->qkv_bias;  // gpt-oss: attention_bias (above)
    c.rope_layout = RopeLayout::neox;  // every HF-format checkpoint: rotate_half

    // transformers v5 writes rope_theta and the scaling into one rope_parameters object
    // (Gemma 3: one per layer type, full_attention's the block's).
    const json* params = r.present("rope_parameters") ? &j.at("rope_parameters") : nullptr;
    if (params && !params->is_object()) r.fail("rope_parameters", "expected an object, found " + shown(*params));
    const json* local_params = nullptr;
    if (params && Reader::present(*params, "full_attention")) {
        local_params = Reader::present(*params, "sliding_attention") ? &params->at("sliding_attention") : nullptr;
        params = &params->at("full_attention");
        if (!params->is_object()) r.fail("rope_parameters.full_attention", "expected an object, found " + shown(*params));
    }
    if (!r.present("rope_theta") && params && Reader::present(*params, "rope_theta")) {
        c.rope_theta = r.number(*params, "rope_parameters.rope_theta", "rope_theta");
        if (!(c.rope_theta > 0)) r.fail("rope_parameters.rope_theta", "expected a positive number");
    } else {
        c.rope_theta = r.positive("rope_theta", arch->theta, dflt);
    }
    if (r.present("rope_scaling"))
        c.rope_scaling = read_scaling(r, j.at("rope_scaling"), "rope_scaling", m.max_position, max_position_given);
    else if (params)
        c.rope_scaling = read_scaling(r, *params, "rope_parameters", m.max_position, max_position_given);
    else if (gptoss) {  // GptOssConfig's default: YaRN, factor 32 over 4096, betas 32 / 1, truncate false
        RopeScaling& d = c.rope_scaling;
        d.type = RopeScalingType::yarn;
        d.factor = 32.0;
        d.original_max_position = 4096;
        d.beta_fast = 32.0;
        d.beta_slow = 1.0;
        d.attention_factor = 0.1 * std::log(32.0) + 1.0;
        d.truncate = false;
        m.defaults.push_back("rope_scaling: absent, took GptOssConfig's default (yarn, factor 32, "
                             "original_max_position_embeddings 4096, beta_fast 32, beta_slow 1, truncate false; "
                             "attention_factor 0.1 ln(32) + 1)");
    }

    // ---- DeepSeek-V3's latent attention (DeepseekV3Attention; --op mla_attention) ----
    // Its widths, and its softmax scale: (dn + dr)^-1/2, times mscale^2 where
    // rope_scaling has a nonzero mscale_all_dim (mscale = 0.1 mscale_all_dim
    // ln(factor) + 1, yarn_get_mscale), carried by the attn_scale twist.
    if (deepseek) {
        c.kv_lora_rank = r.size("kv_lora_rank", 512, dflt, limits::kHeadDim);
        c.qk_nope_head_dim = r.size("qk_nope_head_dim", 128, dflt, limits::kHeadDim);
        c.qk_rope_head_dim = r.size("qk_rope_head_dim", 64, dflt, limits::kHeadDim);
        c.v_head_dim = r.size("v_head_dim", 128, dflt, limits::kHeadDim);
        // (rope_scaling, or transformers 5's rope_parameters: whichever the scaling was read from)
        const json* scaling = r.present("rope_scaling") ? &j.at("rope_scaling") : params;
        const std::string where = r.present("rope_scaling") ? "rope_scaling" : "rope_parameters";
        double mscale = 1.0;
        if (c.rope_scaling.type != RopeScalingType::none && scaling && Reader::present(*scaling, "mscale_all_dim")) {
            const double all = r.number(*scaling, where + ".mscale_all_dim", "mscale_all_dim");
            if (all != 0 && c.rope_scaling.factor > 1) mscale = 0.1 * all * std::log(c.rope_scaling.factor) + 1.0;
        }
        if (mscale != 1.0) c.attn_scale = mscale * mscale / std::sqrt(static_cast<double>(c.mla_qk_dim()));
    }

    const json* prf_obj = r.present("partial_rotary_factor") ? &j
                          : params && Reader::present(*params, "partial_rotary_factor") ? params
                                                                                        : nullptr;
    if (prf_obj) {
        const std::string field = prf_obj == &j ? "partial_rotary_factor" : "rope_parameters.partial_rotary_factor";
        const double prf = r.number(*prf_obj, field, "partial_rotary_factor");
        if (!(prf > 0 && prf <= 1)) r.fail(field, "expected a number in (0, 1], found " + num(prf));
        // HF: dim = int(head_dim * partial_rotary_factor).
        const auto rd = static_cast<int64_t>(static_cast<double>(c.head_dim) * prf);
        if (rd < 2 || rd % 2 != 0)
            r.fail(field, "head_dim " + std::to_string(c.head_dim) + " x " + num(prf) + " = " + std::to_string(rd) +
                              " rotary dims: expected an even number >= 2");
        c.rotary_dim = rd == c.head_dim ? 0 : rd;
    }

    // Gemma 3's sliding layers rotate with their own base and no scaling
    // (Gemma3TextModel's rotary_emb_local: rope_local_base_freq, rope_type default).
    if (gemma3) {
        double local = 10000.0;
        if (r.present("rope_local_base_freq")) {
            local = r.positive("rope_local_base_freq", local, dflt);
        } else if (local_params && Reader::present(*local_params, "rope_theta")) {
            local = r.number(*local_params, "rope_parameters.sliding_attention.rope_theta", "rope_theta");
            if (!(local > 1)) r.fail("rope_parameters.sliding_attention.rope_theta", "expected a number > 1");
            for (const char* k : {"rope_type", "type"})
                if (Reader::present(*local_params, k) && local_params->at(k) != "default")
                    r.fail(std::string("rope_parameters.sliding_attention.") + k,
                           shown(local_params->at(k)) + ": a scaled local RoPE, which conform does not model (Gemma 3's is unscaled)");
        } else {
            m.defaults.push_back("rope_local_base_freq: absent, took 10000 (Gemma3TextConfig's default)");
        }
        if (!m.pattern.empty()) {
            m.pattern.local_rope_theta = local;
        } else if (c.sliding_window > 0) {  // every layer sliding: the block's own RoPE is the local one
            c.rope_theta = local;
            c.rope_scaling = RopeScaling{};
        }
    }
    validate_block(c, file);
    return m;
}

}  // namespace

void validate_block(const BlockConfig& c, const std::string& where) {
    auto fail = [&](const std::string& field, const std::string& msg) { throw ConfigError(where + ": " + field + ": " + msg); };
    // Bounded above too (core/limits.h), so that no product of them wraps:
    // H * head_dim wrapping to 0 would let empty tensors match.
    auto size = [&](const char* field, int64_t v, int64_t max) {
        if (v <= 0 || v > max)
            fail(field, "expected a positive integer <= " + std::to_string(max) + ", found " + std::to_string(v));
    };
    size("hidden_size (d_model)", c.d_model, limits::kWidth);
    size("num_attention_heads (heads)", c.n_heads, limits::kHeads);
    size("num_key_value_heads (kv heads)", c.n_kv_heads, limits::kHeads);
    size("head_dim", c.head_dim, limits::kHeadDim);
    size("intermediate_size (ffn)", c.ffn_dim, limits::kWidth);
    if (c.n_heads * c.head_dim > limits::kWidth)
        fail("num_attention_heads * head_dim", "expected at most " + std::to_string(limits::kWidth) + ", found " +
                                                  std::to_string(c.n_heads) + " * " + std::to_string(c.head_dim));
    // Latent attention's widths (DeepSeek's): none of them, or all.
    if (c.kv_lora_rank || c.qk_nope_head_dim || c.qk_rope_head_dim || c.v_head_dim) {
        size("kv_lora_rank", c.kv_lora_rank, limits::kHeadDim);
        size("qk_nope_head_dim", c.qk_nope_head_dim, limits::kHeadDim);
        size("qk_rope_head_dim", c.qk_rope_head_dim, limits::kHeadDim);
        size("v_head_dim", c.v_head_dim, limits::kHeadDim);
        if (c.n_heads * (c.qk_nope_head_dim + c.v_head_dim) > limits::kWidth)
            fail("num_attention_heads * (qk_nope_head_dim + v_head_dim)",
                 "expected at most " + std::to_string(limits::kWidth) + " (kv_b_proj's width), found " +
                     std::to_string(c.n_heads) + " * " + std::to_string(c.qk_nope_head_dim + c.v_head_dim));
    }
    if (c.n_heads % c.n_kv_heads != 0)
        fail("num_key_value_heads (kv heads)", "expected a divisor of num_attention_heads " + std::to_string(c.n_heads) +
                                                   ", found " + std::to_string(c.n_kv_heads));
    if (c.rotary() % 2 != 0 || c.rotary() > c.head_dim || c.rotary() < 2)
        fail("head_dim", "RoPE rotates pairs: expected an even rotary dim in [2, head_dim], found " +
                             std::to_string(c.rotary()) + " (head_dim " + std::to_string(c.head_dim) + ")");
    if (!(c.rope_theta > 1) || !std::isfinite(c.rope_theta))
        fail("rope_theta (theta)", "expected a number > 1, found " + num(c.rope_theta));
    if (!(c.norm_eps > 0) || !(c.norm_eps < 1))
        fail("rms_norm_eps (eps)", "expected a number in (0, 1), found " + num(c.norm_eps));
    const RopeScaling& s = c.rope_scaling;
    if (s.type != RopeScalingType::none) {
        if (!(s.factor > 0) || !std::isfinite(s.factor))
            fail("rope_scaling.factor", "expected a positive number, found " + num(s.factor));
        if (s.type != RopeScalingType::linear && s.original_max_position <= 0)
            fail("rope_scaling.original_max_position_embeddings",
                 "expected a positive integer, found " + std::to_string(s.original_max_position));
    }
}

ModelConfig parse_hf_config(const std::string& text, const std::string& name) {
    // A config nests three deep and has a few hundred values; bounded before
    // parsing, so that printing a value in a message cannot recurse without end.
    if (const std::string why = json_shape_problem(text, kMaxJsonDepth, 1'000'000); !why.empty())
        throw ConfigError(name + ": " + why + ", far past any config.json");
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        // e.what() is "[json.exception.parse_error.101] parse error at line 3, column 5: ..." (or
        // out_of_range.406, a number past double's range: "number overflow parsing '1e400'")
        std::string what = e.what();
        const auto at = what.find("] ");
        throw ConfigError(name + ": not valid JSON: " + (at == std::string::npos ? what : what.substr(at + 2)));
    }
    return resolve(j, name);
}

ModelConfig load_hf_config(const std::string& path) {
    std::string text;
    try {
        // A checkpoint's config.json is a few KB; 64 MiB is far past any.
        text = read_input_file(path, "config.json", int64_t{64} << 20);
    } catch (const InputError& e) {
        throw ConfigError(e.what());
    }
    return parse_hf_config(text, path);
}

}  // namespace conform::config
