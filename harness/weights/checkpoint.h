// harness/weights/checkpoint.h — a real checkpoint's weights in the block's
// schema, one layer at a time.
//
// One interface over Hugging Face safetensors (one file, or shards named by
// model.safetensors.index.json; the config.json beside them) and GGUF v2/v3
// (the configuration from its metadata). Opening maps the files, reads the
// configuration, and checks every tensor the block uses — present, of a type
// it can decode, of the shape the configuration implies — before any weight is
// decoded; the weights are then decoded from the mapping on each call, so a
// caller that holds one layer at a time holds one layer's floats whatever the
// model's size.
//
// What the weights mean, by format (harness/weights/README.md has the rules):
//   * safetensors: NeoX RoPE, as HF runs every Llama / Mistral / Qwen
//     checkpoint (HF's converter already undid Meta's q/k permutation);
//   * GGUF llama: interleaved RoPE (ggml NORMAL) on attn_q / attn_k as stored
//     — the HF-to-GGUF converter permuted them for that, and nothing here
//     un-permutes; GGUF qwen2 / qwen3: NeoX, unpermuted.
// detected() says, line by line, what was found and from which key or file.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "config/presets.h"
#include "core/case.h"
#include "weights/error.h"
#include "weights/stored.h"

namespace conform::weights {

class Checkpoint {
   public:
    // `path`: a .gguf file; a .safetensors file; a directory holding
    // model.safetensors.index.json (shards) or model.safetensors; or the
    // index file. `config_json` (safetensors only): the config.json to read,
    // "" for the one beside the weights. `log`: when given, each detected()
    // line is written to it, one per line, as it is found.
    // Throws WeightsError ("FILE: TENSOR: FIELD: ..." / "FILE: FIELD: ...")
    // for anything that keeps the checkpoint from being the block's weights.
    static Checkpoint open(const std::string& path, std::ostream* log = nullptr, const std::string& config_json = "");

    Checkpoint(Checkpoint&&) noexcept;
    Checkpoint& operator=(Checkpoint&&) noexcept;
    ~Checkpoint();

    const std::string& format() const;  // "safetensors" or "gguf"
    // The model: block (layout, theta, eps, qk_norm, scaling, rotary dim,
    // sizes), layers, vocab, max_position, tie_embeddings; name = the path.
    const config::ModelConfig& model() const;
    // What was detected and where from, e.g. "rope layout: interleaved
    // (general.architecture = llama: llama.cpp runs llama with NORMAL rope on
    // the converter-permuted attn_q/attn_k)", "d_model = 4096
    // (llama.embedding_length)", "Q8_0 dequantised to float32 (154 tensors)".
    const std::vector<std::string>& detected() const;

    // Layer l's weights, 0 <= l < model().layers, by schema name: attn_norm,
    // wq, wk, wv, wo, ffn_norm, w1 (gate), w3 (up), w2 (down), and q_norm,
    // k_norm when model().block.qk_norm. float32; matrices [in, out] so that
    // y = x @ W (the files' [out, in] transposed), norm weights [1, n].
    // Decoded on every call. Throws WeightsError for a non-finite weight.
    Named layer(int64_t l) const;

    Tensor embedding() const;                                      // [vocab, D]
    Tensor embedding_rows(const std::vector<int64_t>& ids) const;  // [ids, D]: just those tokens' rows
    Tensor final_norm() const;                                     // [1, D]
    Tensor lm_head() const;  // [D, vocab]; tied embeddings: the embedding transposed
    // [D, v1 - v0]: the LM head's columns for vocab ids [v0, v1), so logits
    // can be formed a slice at a time (a full LM head is vocab x D floats).
    Tensor lm_head_columns(int64_t v0, int64_t v1) const;

    // How layer l's weight `name` (schema name, as layer() gives it) is
    // stored; lm_head_encoding() the LM head's. An engine's arithmetic may
    // depend on it (llama.cpp quantises a K-quant matmul's inputs to Q8_K).
    Encoding encoding(int64_t l, const std::string& name) const;
    Encoding lm_head_encoding() const;

    // GGUF rope_freqs.weight (one factor per rotated pair, already mapped to
    // model().block.rope_scaling); empty when the file has none.
    const std::vector<float>& rope_freq_factors() const;

    struct Impl;  // checkpoint_impl.h

   private:
    explicit Checkpoint(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace conform::weights
