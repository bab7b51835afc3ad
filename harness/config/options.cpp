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
                                   o_theta, o_eps, o_layout, o_embedding_multiplier, o_final_softcap,
                                   o_kv_lora_rank, o_qk_nope_head_dim, o_qk_rope_head_dim, o_v_head_dim})
        if (opt && opt->count() > 0) return true;
    for (const TwistFlag& t : twists)
        if (t.given()) return true;
    return false;
}

std::string ConfigOptions::twist_flags() const {
    std::string f;
    for (const TwistFlag& t : twists)
        if (t.given()) f += std::string(" ") + t.twist->flag + " " + t.text;
    return f;
}

namespace {

// A twist's flag's values, for --help: 0 | 1, a count, tensor | head, ...
std::string flag_values(const Twist& t) {
    switch (t.kind) {
        case TwistKind::toggle:
            return t.spell.empty() ? "0 | 1" : std::string(t.spell[0]) + " | " + t.spell[1];
        case TwistKind::count: return "a count >= 0 (0: none)";
        case TwistKind::number: return "a number >= 0 (0: none)";
        case TwistKind::choice: {
            std::string v;
            for (const auto& n : twist_choices(t)) v += (v.empty() ? "" : " | ") + n;
            return v;
        }
    }
    return "";
}

}  // namespace

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
    // Multi-head latent attention (--op mla_attention; docs/mla.md).
    o.o_kv_lora_rank = g->add_option("--kv-lora-rank", o.kv_lora_rank,
                                     "dc: latent attention's cached latent width (DeepSeek-V2/V3, Kimi-K2: 512)");
    o.o_qk_nope_head_dim = g->add_option("--qk-nope-head-dim", o.qk_nope_head_dim,
                                         "dn: latent attention's per-head unrotated q/k width (V3: 128)");
    o.o_qk_rope_head_dim = g->add_option("--qk-rope-head-dim", o.qk_rope_head_dim,
                                         "dr: latent attention's rotated width, one key shared by all heads (V3: 64)");
    o.o_v_head_dim = g->add_option("--v-head-dim", o.v_head_dim, "dv: latent attention's per-head value width (V3: 128)");
    o.o_theta = g->add_option("--theta,--rope-theta", o.theta, "RoPE base");
    o.o_layout = g->add_option("--layout,--rope-layout", o.layout,
                               "RoPE pairing: neox (HF) | interleaved (Meta, GGUF)");
    // One flag per twist that has one (conform/twists.h), its help from the row.
    o.twists.clear();
    o.twists.reserve(twist_table().size());
    for (const Twist& t : twist_table()) {
        if (!*t.flag) continue;
        o.twists.push_back({&t, "", nullptr});
        ConfigOptions::TwistFlag& f = o.twists.back();
        const std::string names = *t.flag_alias ? std::string(t.flag) + "," + t.flag_alias : std::string(t.flag);
        f.option = g->add_option(names, f.text, std::string(t.summary) + " (" + t.models + "): " + flag_values(t));
    }
    if (with_layers) {  // the model's, not the block's: where --layers is, a forward is
        o.o_embedding_multiplier = g->add_option("--embedding-multiplier", o.embedding_multiplier,
                                                 "the embedding rows times this before the first block (Gemma: "
                                                 "sqrt(d_model)); 1: none");
        o.o_final_softcap = g->add_option("--final-logit-softcap", o.final_softcap,
                                          "cap: the logits become cap * tanh(logits / cap) after the LM head (Gemma "
                                          "2's final_logit_softcapping); 0: none");
    }
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
    size(o.o_kv_lora_rank, "--kv-lora-rank", o.kv_lora_rank, c.kv_lora_rank);
    size(o.o_qk_nope_head_dim, "--qk-nope-head-dim", o.qk_nope_head_dim, c.qk_nope_head_dim);
    size(o.o_qk_rope_head_dim, "--qk-rope-head-dim", o.qk_rope_head_dim, c.qk_rope_head_dim);
    size(o.o_v_head_dim, "--v-head-dim", o.v_head_dim, c.v_head_dim);
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
    // Each twist's flag, by its row: a toggle 0 | 1 (or on / off, true / false, or
    // its own spelling), a count or a number in range, a choice by name;
    // recorded as an override. One that does not apply (--kv-scale without an
    // FP8 cache) is refused after all of them are read.
    for (const ConfigOptions::TwistFlag& f : o.twists) {
        if (!f.given()) continue;
        const Twist& t = *f.twist;
        std::string text = f.text;
        if (t.kind == TwistKind::toggle && t.spell.empty()) {
            if (text == "on" || text == "true") text = "1";
            if (text == "off" || text == "false") text = "0";
        }
        std::string why;
        const auto v = parse_twist_text(t, text, &why);
        if (!v) throw ConfigError(std::string(t.flag) + ": " + why);
        const std::string was = twist_text(t, c);
        set_twist_value(t, c, *v);
        m.overrides.push_back(std::string(t.flag) + " " + twist_text(t, c) + (m.name.empty() ? "" : " (was " + was + ")"));
    }
    for (const ConfigOptions::TwistFlag& f : o.twists)
        if (f.given() && f.twist->applies && !f.twist->applies(c))
            throw ConfigError(std::string(f.twist->flag) + ": does not apply to this configuration (" + f.twist->lacks + ")");
    // A number of the model's: finite and >= 0 (0: off).
    auto number_flag = [&](const CLI::Option* opt, double v, const char* flag, const char* expected, double& field) {
        if (!opt || !opt->count()) return;
        if (!(v >= 0) || !std::isfinite(v))
            throw ConfigError(std::string(flag) + ": expected " + expected + ", found " + num(v));
        m.overrides.push_back(std::string(flag) + " " + num(v) + (m.name.empty() ? "" : " (was " + num(field) + ")"));
        field = v;
    };
    number_flag(o.o_final_softcap, o.final_softcap, "--final-logit-softcap", "a cap >= 0 (0: none)",
                m.final_logit_softcapping);
    if (o.o_embedding_multiplier && o.o_embedding_multiplier->count()) {
        if (!(o.embedding_multiplier > 0) || !std::isfinite(o.embedding_multiplier))
            throw ConfigError("--embedding-multiplier: expected a positive number, found " + num(o.embedding_multiplier));
        m.overrides.push_back("--embedding-multiplier " + num(o.embedding_multiplier) +
                              (m.name.empty() ? "" : " (was " + num(m.embedding_multiplier) + ")"));
        m.embedding_multiplier = o.embedding_multiplier;
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
            *problem = m.name + ": " + why + "; a whole block of it is not this model (" +
                       (m.attention_unmodelled.empty()
                            ? std::string("its attention ops are: conform --op attention,paged_attention")
                            : m.block.kv_lora_rank > 0
                                ? "nor its attention: its ops are: conform --op mla_attention,moe,moe_route,moe_experts"
                                : "nor its attention: its FFN ops are: conform --op moe,moe_route,moe_experts") +
                       ")";
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
