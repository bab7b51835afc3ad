// harness/model/model.h — a randomly initialised model for `conform forward`:
// embedding, L blocks, final norm, LM head, every weight drawn from a seed.
//
// The initialisation keeps the residual stream's scale steady through depth
// (GPT-2 / Llama style): projections into a sub-layer std 1/sqrt(fan_in), the
// two projections back into the residual stream (wo, w2) further divided by
// sqrt(2L), norm weights near 1. Each of the 2L sub-layers then adds about
// 1/(2L) of a unit variance, so the stream's std stays O(1) at any depth and
// the errors seen at layer 32 are the implementation's, not an overflow's.
//
// Weights are made one layer at a time (layer_weights), so a forward holds
// one layer in memory whatever the depth.
#pragma once

#include <cstdint>
#include <vector>

#include "config/presets.h"
#include "core/case.h"

namespace conform::model {

struct Spec {
    BlockConfig block;
    config::LayerPattern pattern;  // where layers differ from the block (sliding / full)
    int64_t layers = 1;
    int64_t tokens = 8;
    int64_t vocab = 512;
    int64_t start = 0;   // position of the first token
    uint64_t seed = 1;
    // The embedding rows times this before the first block (Gemma: sqrt(D));
    // the random embedding is drawn with std 1 / multiplier, so the stream
    // still starts at std 1.
    double embedding_multiplier = 1.0;
    // The logits soft-capped, cap * tanh(logits / cap) (Gemma 2's final_logit_softcapping); 0: none.
    double final_logit_softcapping = 0.0;

    BlockConfig layer_block(int64_t l) const { return pattern.layer(block, l); }
};

// Layer l's weights by schema name (attn_norm, wq, wk, wv, wo, ffn_norm, w1,
// w3, w2, q_norm, k_norm when block.qk_norm, bq, bk, bv when
// block.qkv_bias, attn_post_norm, ffn_post_norm when block.sandwich_norm,
// sinks when block.attn_sinks), stored [in, out].
Named layer_weights(const Spec& s, int64_t layer);
Tensor embedding(const Spec& s);   // [vocab, D], std 1
Tensor final_norm(const Spec& s);  // [1, D]
Tensor lm_head(const Spec& s);     // [D, vocab], std 1/sqrt(D)
std::vector<int64_t> token_ids(const Spec& s);  // T ids in [0, vocab)
std::vector<int64_t> positions(const Spec& s);  // start, start + 1, ...

// The rows of `table` for `ids`: [T, D].
Tensor embed(const Tensor& table, const std::vector<int64_t>& ids);

// Views of a layer's weights in the interface's struct.
BlockWeights views(const Named& w, const BlockConfig& c);

// y[T, N] = x[T, K] @ w[K, N], float32 inputs, float64 sums (the LM head
// applied to an implementation's final hidden state: its error is then the
// implementation's, not this product's).
DTensor matmul_acc64(const Tensor& x, const Tensor& w);

DTensor to_double(const Tensor& t);

struct Moments {
    double mean = 0, std = 0, max_abs = 0;
};
Moments moments(const DTensor& t);

// max |a - b| and max |a - b| / max |b|.
struct Error {
    double max_abs = 0, rel = 0;
};
Error error(const DTensor& a, const DTensor& b);

}  // namespace conform::model
