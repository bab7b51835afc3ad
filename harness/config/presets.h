// harness/config/presets.h — named configurations of real checkpoints.
//
// A plain table: the numbers are the checkpoints' HF config.json values
// (hidden_size, num_attention_heads, num_key_value_heads, head_dim,
// intermediate_size, rope_theta, rms_norm_eps), so `conform generate
// --preset qwen3-8b` tests what that model runs. Only the RoPE layout is a
// choice the config file does not record: HF checkpoints are NeoX, Meta's
// original weights and llama.cpp's GGUF Llama are interleaved
// (--rope-layout interleaved overrides).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "conform/config.h"

namespace conform::config {

struct Preset {
    std::string name;    // e.g. "llama3-8b"
    std::string source;  // the checkpoint whose config.json the numbers are from
    BlockConfig config;
};

// Every preset, in the order `conform generate --presets` lists them.
const std::vector<Preset>& presets();

// nullptr when unknown.
const Preset* find_preset(std::string_view name);

// The block with d_model and ffn_dim divided by `factor` (rounded up, at least
// 1) and everything that defines the attention geometry and the conventions
// kept: heads, kv heads, head_dim, layout, theta, eps, qk_norm. A real
// head_dim and theta give real RoPE angles; the residual and FFN widths only
// set how much is summed. factor must be >= 1.
BlockConfig scale_down(BlockConfig c, int64_t factor);

// "D=4096 H=32 KV=8 hd=128 F=14336 layout=neox theta=500000 eps=1e-05 qk_norm=0"
std::string describe(const BlockConfig& c);

}  // namespace conform::config
