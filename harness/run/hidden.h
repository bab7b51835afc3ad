// harness/run/hidden.h — conform forward --expect-hidden: a checkpoint's
// attention sub-layers against an engine's own residual stream, one layer at
// a time (fixtures/SCHEMA.md, "Hidden files").
//
// Layer l starts from the engine's stream — the embedding's rows of the
// file's token ids for layer 0, the file's layers/l-1/out after — and the
// reference computes h = x + attention(rmsnorm(x)) @ wo (+ bo) in float64
// with that layer's own configuration (its window, RoPE, sinks, biases); the
// file's layers/l/attn_residual must match it. What the layer does after
// (its FFN) is the engine's, never recomputed: so a model whose FFN conform
// does not compute (gpt-oss's mixture of experts) still has every attention
// layer checked, on the activations the engine itself made. A layer that does
// not match is tried again with one convention changed (the sinks dropped or
// read per kv head, the window ignored or one key off, the layer's type
// swapped, a bias dropped), and the change that explains it is named.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "config/hf_config.h"
#include "config/options.h"

namespace conform::run {

struct HiddenFlags {
    std::string weights;              // --weights
    std::string file;                 // --expect-hidden
    double tol = 1e-3;                // --hidden-tol: max |diff| / max |file| per layer
    config::ConfigOptions overrides;  // --config (safetensors' config.json)
};

struct HiddenLayer {
    int64_t layer = 0;
    std::string kind;  // "sliding 3", "full", ...
    double rel_err = 0, max_abs = 0;
    int64_t token = 0, channel = 0;  // where |diff| is largest
    bool ok = true;
    // Only for a layer that does not match: each convention change within the
    // tolerance, best first (name, rel error under it).
    std::vector<std::pair<std::string, double>> explained;
};

struct HiddenResult {
    std::string weights, file, producer;
    std::vector<std::string> detected;  // the checkpoint's, as forward prints them
    std::string ffn_unmodelled;         // the model's, when conform does not compute its FFN
    int64_t model_layers = 0, tokens = 0;
    double tol = 0;
    std::vector<HiddenLayer> layers;
    bool pass() const;
};

// Opens the checkpoint and the file and checks every layer the file holds.
// Throws InputError for a bad flag, checkpoint or file (exit 2), naming the
// file and field.
HiddenResult run_hidden_check(const HiddenFlags& f, std::ostream& log);

// The table: one row per layer, the verdict, and each mismatch's diagnosis.
std::string hidden_table(const HiddenResult& r);

}  // namespace conform::run
