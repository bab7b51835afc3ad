// harness/weights/checkpoint_impl.h — what a format's opener fills in
// (checkpoint_hf.cpp, checkpoint_gguf.cpp); private to harness/weights.
#pragma once

#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "weights/checkpoint.h"
#include "weights/gguf.h"
#include "weights/safetensors.h"
#include "weights/stored.h"

namespace conform::weights {

// One tensor the block uses: where it is, and whether it is a matrix to
// transpose from [out, in] to [in, out] or a vector to store as [1, n].
struct Slot {
    StoredTensor t;
    bool matrix = false;
};

struct Checkpoint::Impl {
    std::string format;
    config::ModelConfig model;
    std::vector<std::string> detected;
    std::ostream* log = nullptr;
    std::vector<float> rope_factors;

    std::optional<Safetensors> st;  // the mappings the slots point into
    std::optional<GgufFile> gguf;

    std::vector<std::map<std::string, Slot>> layers;  // by schema name
    Slot embedding, final_norm, lm_head;             // lm_head = embedding when tied

    void note(const std::string& line);
};

// The format openers: fill in everything above or throw WeightsError.
void open_safetensors(Checkpoint::Impl& c, const std::string& path, const std::string& config_json);
void open_gguf(Checkpoint::Impl& c, const std::string& path);

// Checks a tensor's shape against the configuration's: `want` row-major
// (slowest first), `symbols` the same dims in the configuration's letters
// ("H*hd", "D"). GGUF messages give ne order (fastest first), as the file does.
void expect_shape(const Checkpoint::Impl& c, const StoredTensor& t, const std::vector<int64_t>& want,
                  const std::vector<std::string>& symbols);

// Layer weight `schema` (attn_norm, wq, ..., bo, sinks) as model `m` has it:
// whether its layers carry it at all (QK-norm's, the biases, the sinks, the
// sandwich norms by their conventions; none of the FFN's where the FFN is not
// the block's, ModelConfig::ffn_unmodelled), and the shape it is stored in
// ([out, in] for a matrix, [n] for a vector) with the symbols messages name.
struct LayerTensor {
    bool present = false;
    std::vector<int64_t> shape;
    std::vector<std::string> symbols;
};
LayerTensor layer_tensor(const std::string& schema, const config::ModelConfig& m);

// "F32 (3 tensors)", "Q8_0 dequantised to float32 (14 tensors)": one line per
// encoding among the slots.
void note_encodings(Checkpoint::Impl& c);

}  // namespace conform::weights
