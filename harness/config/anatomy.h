// harness/config/anatomy.h — what one forward of a configuration costs, op by op.
//
// Counted, not measured, under one stated convention (the table header of
// `conform anatomy` repeats it):
//   * a matmul [T, K] @ [K, N]: 2·T·K·N FLOP (one multiply and one add per MAC);
//   * RMSNorm 4 FLOP per element (square, sum, scale, weight), RoPE 3 per rotated
//     element (two products, one sum), a residual add 1, SiLU(g)·u 5 (negate,
//     exp, add, divide, multiply), softmax 5 per score (max, subtract, exp, sum,
//     divide); cos / sin tables not counted;
//   * attention: each of the T queries, at positions context .. context+T-1,
//     scores every key at or before it: P = T·context + T(T+1)/2 pairs,
//     4·hd FLOP per pair and query head (q·k, then p·v);
//   * minimum bytes: each op on its own (unfused) reads its inputs and weights
//     once and writes its output once, every element `bytes` wide (weights,
//     activations and KV cache alike); attention reads each kv head's K and V
//     once for the whole group (GQA's saving);
//   * KV cache: K and V, every kv head, head_dim each: 2·KV·hd·bytes per token
//     per layer (full multi-head attention: 2·H·hd·bytes).
// Model totals are the blocks and the final norm; the embedding and the LM
// head are reported apart (their size is the vocabulary's, not the block's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/presets.h"

namespace conform::config {

struct OpCost {
    std::string name;    // "q_proj", "attention", ...
    std::string group;   // "attention" | "ffn" | "norm" | "residual"
    double params = 0;   // weights, in elements
    double flops = 0;
    double bytes = 0;    // minimum bytes moved
    double intensity() const { return bytes > 0 ? flops / bytes : 0; }
};

struct Anatomy {
    int64_t tokens = 1;   // T: tokens in the forward
    int64_t context = 0;  // tokens already in the KV cache
    double bytes_per_element = 2;

    std::vector<OpCost> ops;  // one layer's, in data-flow order
    OpCost layer;             // their sum
    OpCost model;             // layers × layer + the final norm
    OpCost embedding;         // vocab × D lookup (T rows read)
    OpCost lm_head;           // D × vocab matmul (params 0 when tied)

    double kv_bytes_per_token_layer = 0;       // 2·KV·hd·bytes
    double kv_bytes_per_token_layer_mha = 0;   // 2·H·hd·bytes: the same model without GQA
    double kv_bytes_per_token_model = 0;       // × layers
    double kv_cache_bytes = 0;                 // after this forward: (context + T) tokens, every layer

    double flops_per_token() const { return model.flops / static_cast<double>(tokens); }
};

// The costs of one forward of T tokens after `context` cached ones, every
// element `bytes_per_element` wide. Throws std::invalid_argument on T < 1 or
// context < 0.
Anatomy anatomy(const ModelConfig& m, int64_t tokens, int64_t context, double bytes_per_element);

// 45092864 → "45.1M", 2048 → "2.0K" (SI, one decimal; `unit` appended).
std::string si(double v, const std::string& unit = "");

}  // namespace conform::config
