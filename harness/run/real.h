// harness/run/real.h — a real checkpoint in a run (conform --weights PATH
// --layer N | --layers all|A-B [--inputs model]): its configuration pins the
// property cases at full size, and each layer's weights — and, with model
// inputs, its real activations — are loaded while that layer's cases run and
// released after, so a run holds one layer whatever the model's size.
//
// Model inputs are the reference's float64 forward of a token sequence
// through layers 0 .. N-1 (the embedding's rows, then each block), so layer
// N sees the residual stream a trained model makes: its outlier channels and
// massive activations. The stream moves forward one layer at a time as the
// run's layers ascend; it is never recomputed from the embedding unless a
// layer before the current one is asked for.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/presets.h"
#include "config/options.h"
#include "gen/gen.h"
#include "weights/checkpoint.h"

namespace conform::run {

struct RealOptions {
    std::string path;                 // --weights
    std::string layers;               // --layer N, --layers all | A-B | N ("" : 0)
    bool model_inputs = false;        // --inputs model
    std::vector<int64_t> tokens;      // --tokens IDS; empty: a fixed random sequence of `n_tokens`
    int64_t n_tokens = 64;
    int64_t start = 0;                // --positions: the position of the first token
    config::ConfigOptions overrides;  // --config (safetensors' config.json), and convention flags
};

struct TensorStats {
    std::string name;
    std::vector<int64_t> shape;
    double max_abs = 0, rms = 0;
    int64_t row = 0, col = 0;  // where max |w| is
};

struct ChannelStats {
    int64_t channel = 0;
    double max_abs = 0;  // over the stream's rows
};

struct LayerStats {
    int64_t layer = 0;
    std::vector<TensorStats> weights;
    // Model inputs: the layer's input stream x [rows, D].
    bool model_inputs = false;
    double x_rms = 0, median_channel = 0;  // median over channels of max |x|
    std::vector<ChannelStats> top_channels;  // the largest, by max |x|
    double seconds_read = 0, seconds_stream = 0;
};

// One line per tensor and one for the stream's largest channels.
void print_layer_stats(std::ostream& os, const LayerStats& s, const std::string& indent = "  ");

class RealModel {
   public:
    // Opens the checkpoint (detected lines to `log`), applies the convention
    // overrides, resolves the layers and the tokens. Throws InputError
    // naming the file, tensor and field, or the flag.
    static std::shared_ptr<RealModel> open(const RealOptions& o, std::ostream* log);

    const config::ModelConfig& model() const { return model_; }
    const weights::Checkpoint& checkpoint() const { return ckpt_; }
    const std::vector<int64_t>& layers() const { return layers_; }
    const std::vector<int64_t>& tokens() const { return tokens_; }
    const RealOptions& options() const { return o_; }
    bool model_inputs() const { return o_.model_inputs; }

    // The slot the property cases of `layer` point at (made on first ask).
    std::shared_ptr<const gen::RealLayer> slot(int64_t layer);
    // Fills a layer's slot: the weights; with model inputs, the stream
    // carried forward to it and the layer's activations on it.
    LayerStats load(int64_t layer);
    void release(int64_t layer);

    // What a replay command needs to find these cases again.
    std::string replay_flags() const;
    // What was detected in the checkpoint, and the layers and inputs taken.
    void print_header(std::ostream& os, const std::string& prefix) const;
    // The report's config gains weights, layers, inputs (tokens, first_position).
    void add_to_config_json(nlohmann::json& config) const;

   private:
    RealModel(weights::Checkpoint ckpt, RealOptions o) : ckpt_(std::move(ckpt)), o_(std::move(o)) {}
    std::shared_ptr<gen::RealLayer> mutable_slot(int64_t layer);

    weights::Checkpoint ckpt_;
    RealOptions o_;
    config::ModelConfig model_;
    std::vector<int64_t> layers_, tokens_;
    std::vector<std::shared_ptr<gen::RealLayer>> slots_;  // by layer index
    DTensor stream_;       // model inputs: the residual stream at the input of layer `stream_at_`
    int64_t stream_at_ = -1;
};

// "all", "A-B", "N" → layer indices in [0, layers); InputError naming `flag`.
std::vector<int64_t> parse_layers(const std::string& spec, int64_t layers, const std::string& flag);
// "1,2,3" → ids; InputError naming `flag`.
std::vector<int64_t> parse_token_ids(const std::string& ids, const std::string& flag);
// The default token sequence: n ids in [0, vocab) from a fixed seed.
std::vector<int64_t> default_tokens(int64_t n, int64_t vocab);

}  // namespace conform::run
