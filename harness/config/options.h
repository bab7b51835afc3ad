// harness/config/options.h — the configuration flags every command shares.
//
//   --preset NAME    a real checkpoint's numbers (harness/config/presets.cpp)
//   --config FILE    a Hugging Face config.json (harness/config/hf_config.h)
//   --d-model --heads --kv-heads --head-dim --ffn --layers --theta --layout --eps --embedding-multiplier --final-logit-softcap
//   and each twist's flag (conform/twists.h: --qk-norm --qkv-bias --sliding-window ...)
//                    one value each, overriding
// applied in that order: the preset, then the file, then each flag given.
// (A file replaces the preset wholesale: a config.json says every field, by
// value or by its class's default.) Older spellings stay as aliases:
// --n-heads, --n-kv-heads, --ffn-dim, --rope-layout, --rope-theta, --norm-eps.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "config/presets.h"

namespace conform::config {

struct ConfigOptions {
    std::string preset, file;
    int64_t d_model = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, layers = 0;
    // Multi-head latent attention's widths (DeepSeek's kv_lora_rank, qk_nope_head_dim, ...).
    int64_t kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
    double theta = 0, eps = 0;
    std::string layout;
    double embedding_multiplier = 1.0;
    double final_softcap = 0;
    // Each twist's flag as given, by the twist's name (conform/twists.h), in table order.
    struct TwistFlag {
        const Twist* twist = nullptr;
        std::string text;
        CLI::Option* option = nullptr;
        bool given() const { return option && option->count() > 0; }
    };
    std::vector<TwistFlag> twists;

    CLI::Option *o_preset = nullptr, *o_file = nullptr, *o_d_model = nullptr, *o_heads = nullptr,
                *o_kv_heads = nullptr, *o_head_dim = nullptr, *o_ffn = nullptr, *o_layers = nullptr,
                *o_theta = nullptr, *o_eps = nullptr, *o_layout = nullptr, *o_embedding_multiplier = nullptr,
                *o_final_softcap = nullptr, *o_kv_lora_rank = nullptr, *o_qk_nope_head_dim = nullptr,
                *o_qk_rope_head_dim = nullptr, *o_v_head_dim = nullptr;

    // Whether any of the flags was given.
    bool given() const;
    // The twists' flags given, as a command line would repeat them (" --sliding-window 4").
    std::string twist_flags() const;
};

// Adds the flags to `app`, in an option group "configuration"; `what` says
// what the command does with the model (its --help).
// `with_layers`: whether --layers (the model's depth) is one of them; the
// gate, whose --layers picks a checkpoint's layers, leaves it out.
void add_config_options(CLI::App& app, ConfigOptions& o, const std::string& what = "", bool with_layers = true);

// preset → file → flags. Without a preset or a file, the flags apply to
// `base` (a command's own default; a zero block when it has none). Throws
// ConfigError (a message naming the flag, or the file and its field) on an
// unknown preset, a bad file, or a flag that makes the block invalid; the
// result is validated only when `validate` (generate checks the sizes its op
// needs itself).
ModelConfig resolve_config(const ConfigOptions& o, const ModelConfig& base = {}, bool validate = true);

// For commands that need a model (forward, anatomy): the resolved config, or
// nullopt with *problem saying why (a bad flag or file, or no model named).
std::optional<ModelConfig> resolve_model(const ConfigOptions& o, std::string* problem);

// "qwen3-8b (preset): D=4096 H=32 ...", then one indented line per default
// taken, override and note.
void print_config(std::ostream& out, const ModelConfig& m, const std::string& indent = "  ");

// The configuration as JSON: origin, every field, defaults taken, overrides, notes.
nlohmann::json config_json(const ModelConfig& m);

}  // namespace conform::config
