// harness/config/hf_config.h — a Hugging Face config.json as a ModelConfig.
//
// Reads what the decoder block depends on: hidden_size, num_attention_heads,
// num_key_value_heads, head_dim, intermediate_size, rms_norm_eps, rope_theta,
// rope_scaling (`rope_type`, or the legacy `type`), partial_rotary_factor,
// max_position_embeddings, num_hidden_layers, vocab_size,
// tie_word_embeddings, and the architecture, which fixes the conventions the
// file does not spell out: every HF-format Llama / Mistral / Qwen2 / Qwen3 /
// Phi-3 checkpoint is NeoX (rotate_half), and Qwen3 norms q and k per head.
//
// A field the file omits takes the default of the architecture's HF config
// class (LlamaConfig's rms_norm_eps is 1e-6, not 1e-5; num_key_value_heads
// defaults to num_attention_heads; head_dim to hidden_size /
// num_attention_heads), and ModelConfig::defaults says which were taken.
// RoPE scaling is resolved to explicit numbers here, as
// transformers/modeling_rope_utils.py resolves it, so that no implementation
// has to know HF's defaults.
//
// Anything else is refused with ConfigError naming the file and the field:
// malformed JSON, a wrong type, a non-positive size, heads that do not divide,
// an odd rotary dim, a rope type we do not implement (longrope / su, ...).
#pragma once

#include <stdexcept>
#include <string>

#include "config/presets.h"

namespace conform::config {

// "path: field: expected ..., found ..." — a bad configuration (exit code 2).
struct ConfigError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Reads and resolves a config.json. `path` names the file in every message.
ModelConfig load_hf_config(const std::string& path);

// The same from the file's text (tests; `name` stands for the path in messages).
ModelConfig parse_hf_config(const std::string& text, const std::string& name);

// Checks a resolved block (after flags overrode it): sizes positive, heads
// divide, rotary dim even and within head_dim, theta and eps positive,
// scaling numbers sane. `where` prefixes each message. Throws ConfigError.
void validate_block(const BlockConfig& c, const std::string& where);

}  // namespace conform::config
