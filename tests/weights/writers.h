// tests/weights/writers.h — tiny checkpoints in the real formats, for the
// tests and the fuzz target: one seeded random model written as Hugging Face
// safetensors (+ config.json; one file or shards with an index; F32, F16,
// BF16) and as GGUF (llama with the HF-to-GGUF converter's Q/K permutation,
// qwen2 / qwen3 unpermuted; F32, F16, BF16, Q8_0, Q4_0, Q4_K_M; llama3's
// rope_freqs.weight), byte by byte from the formats' specifications.
//
// The low-level builders (safetensors_bytes, GgufDoc) write whatever they are
// given, so a test can make exactly the malformed file it means.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "conform/config.h"

namespace conform::weights::testing {

// ---- numbers ---------------------------------------------------------------------

uint16_t float_to_half(float f);  // round to nearest, ties to even
uint16_t float_to_bf16(float f);  // round to nearest, ties to even
float round_to_half(float f);     // f through float16 and back
float round_to_bf16(float f);

// ---- a model, in Hugging Face's terms ------------------------------------------------

struct HfTensor {
    std::vector<int64_t> shape;  // PyTorch's: [out, in] for a Linear, [n] for a norm
    std::vector<float> data;     // row-major
};

struct ModelSpec {
    std::string arch = "llama";  // llama, qwen2, qwen3, gemma, gemma2, gemma3, mistral, smollm3, gpt_oss
    int64_t d_model = 64, n_heads = 4, n_kv_heads = 2, head_dim = 16, ffn_dim = 96;
    int64_t layers = 2, vocab = 64, max_position = 4096;
    double theta = 10000.0, eps = 1e-5;
    bool tie = false;
    // mistral, gemma2, gemma3: the sliding window (gemma2 alternates sliding /
    // full layers from layer 0; gemma3 has every 6th layer full), gemma2's
    // soft-caps, gemma3's local RoPE base (HF rope_local_base_freq; the GGUF
    // leaves it to llama.cpp's default, 10000).
    int64_t window = 0;
    double attn_softcap = 0, final_softcap = 0, local_theta = 10000.0;
    RopeScaling scaling{};  // llama3 only: written as rope_scaling / rope_freqs.weight
    // gpt_oss: its mixture of experts (ffn_dim is each expert's width), which conform reads around.
    int64_t experts = 4, experts_used = 2;
    uint64_t seed = 1;
};

struct Model {
    ModelSpec spec;
    std::map<std::string, HfTensor> tensors;  // by HF name (model.layers.0.self_attn.q_proj.weight, ...)
};

// Weights ~ N(0, 1/fan_in), norm weights 1 + N(0, 0.1^2), q/k norms too.
Model random_model(const ModelSpec& s);

// ---- safetensors -------------------------------------------------------------------------

struct StOut {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::string bytes;
};
// The file: u64 header length, the JSON header (padded with spaces to a
// multiple of 8, as the safetensors library pads it), the data in order.
std::string safetensors_bytes(const std::vector<StOut>& tensors, const std::map<std::string, std::string>& metadata = {
                                                                     {"format", "pt"}});
// The same from a header given as text (malformed ones too) and the data.
std::string safetensors_raw(const std::string& header, const std::string& data);

std::string encode(const std::vector<float>& v, const std::string& dtype);  // F32, F16, BF16, little-endian
std::string hf_config_json(const Model& m);
// config.json and model.safetensors, or `shards` > 1 files
// model-0000k-of-0000n.safetensors with model.safetensors.index.json.
void write_hf(const Model& m, const std::string& dir, const std::string& dtype = "F32", int shards = 1);

// ---- GGUF ------------------------------------------------------------------------------------

enum : uint32_t {
    kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ8_0 = 8, kGgmlQ4_K = 12, kGgmlQ5_K = 13, kGgmlQ6_K = 14, kGgmlBF16 = 30
};

struct GgufKv {
    std::string key;
    uint32_t type;      // gguf value type
    std::string value;  // its encoding
};
GgufKv kv_u32(const std::string& k, uint32_t v);
GgufKv kv_u64(const std::string& k, uint64_t v);
GgufKv kv_f32(const std::string& k, float v);
GgufKv kv_bool(const std::string& k, bool v);
GgufKv kv_str(const std::string& k, const std::string& v);
GgufKv kv_str_array(const std::string& k, const std::vector<std::string>& v);
GgufKv kv_i32_array(const std::string& k, const std::vector<int32_t>& v);

struct GgufTensorOut {
    std::string name;
    std::vector<uint64_t> ne;  // ne[0] fastest
    uint32_t type = kGgmlF32;
    std::string bytes;
    // The offset the info states; the bytes are placed at the next aligned
    // offset regardless, so a wrong one is a wrong info, not a huge file.
    std::optional<uint64_t> offset;
};

struct GgufDoc {
    uint32_t version = 3;
    std::vector<GgufKv> kv;
    std::vector<GgufTensorOut> tensors;
    uint64_t alignment = 32;  // padding used; general.alignment is written only if in kv
};
std::string gguf_bytes(const GgufDoc& d);

// ggml's blocks of 32: Q8_0 {f16 d, int8 q[32]}, x = d q; Q4_0 {f16 d,
// u8 qs[16]}, low nibbles elements 0..15, high 16..31, x = d (q - 8).
std::string quantise_q8_0(const std::vector<float>& x);
std::string quantise_q4_0(const std::vector<float>& x);
// ggml's super-blocks of 256 (Q4_K, Q5_K, Q6_K; layouts in
// harness/weights/ggml_blocks.h), with simple min/max scales.
std::string quantise_k(uint32_t type, const std::vector<float>& x);
// The type llama.cpp's quantiser gives a llama tensor in a Q4_K_M (base
// Q4_K) or Q5_K_M (base Q5_K) file (src/llama-quant.cpp): output.weight
// Q6_K; attn_v and ffn_down Q6_K on the layers use_more_bits picks (the
// first and last eighth, every third between); everything else the base.
uint32_t k_mix_type(uint32_t base, const std::string& name, int64_t layer, int64_t n_layers);

// The converter's permutation of an HF q/k weight [out, in] for interleaved
// RoPE (convert_hf_to_gguf.py LlamaModel.permute):
//   W.reshape(n_head, 2, out / n_head / 2, in).swapaxes(1, 2).reshape(out, in)
HfTensor permute_for_gguf(const HfTensor& w, int64_t n_head);

// The factors the converter writes as rope_freqs.weight for llama3 scaling
// (LlamaModel.generate_extra_tensors: float32 frequencies, double arithmetic).
std::vector<float> converter_rope_freqs(double theta, int64_t dim, const RopeScaling& s);

struct GgufOptions {
    uint32_t matrices = kGgmlF32;  // the 2-D weights' type (norms stay F32, as llama.cpp keeps them)
    bool k_mix = false;            // matrices = Q4_K or Q5_K: mixed with Q6_K as a _K_M file (k_mix_type)
    bool tokens = true;            // tokenizer.ggml.tokens, a string array
    bool alignment_key = true;     // general.alignment
};
// The model as llama.cpp's converter lays it out: names, ne = [in, out],
// q/k permuted for arch llama, rope_freqs.weight for llama3 scaling, output.weight
// absent when tied.
GgufDoc gguf_doc(const Model& m, const GgufOptions& o = {});

void write_file(const std::string& path, const std::string& bytes);
std::string read_file(const std::string& path);

}  // namespace conform::weights::testing
