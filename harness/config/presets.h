// harness/config/presets.h — named configurations of real checkpoints.
//
// A plain table: the numbers are the checkpoints' HF config.json values
// (hidden_size, num_attention_heads, num_key_value_heads, head_dim,
// intermediate_size, rope_theta, rms_norm_eps, rope_scaling,
// num_hidden_layers, vocab_size, max_position_embeddings), so `conform
// --preset qwen3-8b` tests what that model runs; fixtures/configs/<name>.json
// holds the same numbers as a config.json (a test checks they agree). Only
// the RoPE layout is a choice the config file does not record: HF checkpoints
// are NeoX, Meta's original weights and llama.cpp's GGUF Llama are
// interleaved (--layout interleaved overrides).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "conform/config.h"
#include "conform/ops.h"

namespace conform::config {

// Where a model's layers differ: per layer, a sliding-window layer or a full
// one (HF layer_types; Gemma 2's alternation and Gemma 3's
// sliding_window_pattern, which transformers expands into layer_types;
// llama.cpp's swa pattern). A sliding layer is the block, with its
// sliding_window and, where local_rope_theta is set (Gemma 3's
// rope_local_base_freq), that RoPE base without the block's scaling (HF
// Gemma 3's rotary_emb_local); a full layer is the block without a window.
// Empty: every layer is the block. And, separately, the NoPE layers
// (SmolLM3's every 4th, Llama 4's no_rope_layers: HF use_rope =
// no_rope_layers[l]): q and k unrotated there (BlockConfig::nope).
struct LayerPattern {
    std::vector<bool> sliding;
    double local_rope_theta = 0;
    std::vector<bool> nope;  // per layer: a NoPE layer; empty: as the block says

    bool empty() const { return sliding.empty() && nope.empty(); }
    // Layer l's block (the block itself where the pattern is empty or shorter).
    BlockConfig layer(const BlockConfig& block, int64_t l) const;
    // "sliding", "full", "NoPE", "sliding, NoPE"; "" where the pattern says nothing of layer l.
    std::string kind(int64_t l) const;
    // A run-length summary: "5 sliding, 1 full", "3 RoPE, 1 NoPE".
    std::string describe() const;
};

// A whole model: the block every layer repeats, and what surrounds it.
struct ModelConfig {
    BlockConfig block;
    LayerPattern pattern;          // where layers differ from the block (sliding / full)
    int64_t layers = 0;            // num_hidden_layers
    int64_t vocab = 0;             // vocab_size (0: unknown)
    int64_t max_position = 0;      // max_position_embeddings (0: unknown)
    bool tie_embeddings = false;   // tie_word_embeddings: the LM head is the embedding
    // The embedding rows are multiplied by this before the first block
    // (Gemma: sqrt(hidden_size), HF GemmaModel's normalizer, llama.cpp's
    // ggml_scale(inpL, sqrtf(n_embd))); 1: none. forward applies it: no op reads it.
    double embedding_multiplier = 1.0;
    // The logits soft-capped after the LM head, cap * tanh(logits / cap)
    // (Gemma 2's final_logit_softcapping, 30); 0: none. forward applies it.
    double final_logit_softcapping = 0.0;
    // Where the model's FFN is not the block's: what it is, in a line (gpt-oss:
    // a mixture of experts); "" when the block's FFN is the model's. Such a
    // model is read for its attention only (forward --expect-hidden); every
    // path that would run its layers as blocks refuses it.
    std::string ffn_unmodelled;
    // Where the model's attention is not the block's (DeepSeek-V3's latent
    // attention, OLMoE's QK-norm over all heads at once): what it is, in a
    // line; "" when the block's attention is the model's. Every op that runs
    // the attention (its inputs are heads: rope, qk_norm, attention,
    // paged_attention, block, decode) refuses such a model; its FFN ops run.
    std::string attention_unmodelled;
    // An output-projection bias (gpt-oss's o_proj.bias): h = x + attn @ wo + bo.
    // Not a block convention: only the attention check (run/hidden.h) adds it.
    bool o_bias = false;
    std::string name;              // "llama3-8b", or the config file's path
    std::string origin;            // "preset llama3-8b", "config fixtures/configs/x.json"
    std::string architecture;      // "LlamaForCausalLM" (config files), "" for presets
    // What the configuration did not say and was taken from a default, one
    // line each ("rms_norm_eps: absent, took 1e-06 (LlamaConfig's default)").
    std::vector<std::string> defaults;
    // The command-line flags that replaced a value ("--kv-heads 8 (was 4)").
    std::vector<std::string> overrides;
    // What the file says that the block does not model (biases, a sliding
    // window), one line each: the block still tests the conventions.
    std::vector<std::string> notes;

    BlockConfig layer_block(int64_t l) const { return pattern.layer(block, l); }
};

// What of model `m` op `op` would run that conform does not compute, or ""
// when nothing: its FFN for an op with FFN weights (swiglu, block, decode),
// its attention for an op whose inputs are heads (the op record says which,
// conform/op_info.h), and latent attention (mla_attention) for a model
// without it. A caller refuses the pair with this line.
std::string unmodelled_for(const ModelConfig& m, Op op);

// DeepSeek-V3's attention as attention_unmodelled says it: latent attention
// runs as its own op, not as the block's attention or paged_attention.
inline constexpr const char* kLatentAttention =
    "multi-head latent attention (q and kv through low-rank projections, a shared RoPE key of qk_rope_head_dim, "
    "YaRN's mscale in the scale), which the block and the multi-head attention ops do not compute: --op "
    "mla_attention runs it over the paged latent cache, and its FFN ops run (--op moe, moe_route, moe_experts, "
    "rmsnorm)";

struct Preset {
    std::string name;    // e.g. "llama3-8b"
    std::string source;  // the checkpoint whose config.json the numbers are from
    BlockConfig config;
    int64_t layers = 0;
    int64_t vocab = 0;
    int64_t max_position = 0;
    bool tie_embeddings = false;
    double embedding_multiplier = 1.0;
    double final_logit_softcapping = 0.0;
    LayerPattern pattern{};  // (initialised here: the table's rows leave it out)
    // As ModelConfig's: what of the model conform does not compute (gpt-oss's experts).
    std::string ffn_unmodelled{};
    std::string attention_unmodelled{};  // as ModelConfig's (DeepSeek-V3's MLA)
    bool o_bias = false;

    ModelConfig model() const;
};

// Every preset, in the order `conform generate --presets` lists them.
const std::vector<Preset>& presets();

// nullptr when unknown.
const Preset* find_preset(std::string_view name);

// "llama2-7b, llama3-8b, ..." for messages.
std::string preset_names();

// The block with d_model and ffn_dim divided by `factor` (rounded up, at least
// 1) and everything that defines the attention geometry and the conventions
// kept: heads, kv heads, head_dim, layout, theta, eps, qk_norm, scaling. A
// real head_dim and theta give real RoPE angles; the residual and FFN widths
// only set how much is summed. factor must be >= 1.
BlockConfig scale_down(BlockConfig c, int64_t factor);

// "D=4096 H=32 KV=8 hd=128 F=14336 layout=neox theta=500000 eps=1e-05 qk_norm=0"
// (and " rotary=32" / " scaling=llama3(...)" when the block has them).
std::string describe(const BlockConfig& c);

// "llama3(factor=8, low_freq_factor=1, high_freq_factor=4, original_max_position=8192)", "none".
std::string describe(const RopeScaling& s);

}  // namespace conform::config
