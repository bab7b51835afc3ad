// harness/run/forward.h — conform forward: one forward of a model (embedding,
// L blocks, final norm, LM head) through the reference in float64 and through
// each implementation's own block(), layer by layer: a randomly initialised
// one (harness/model/), or a real checkpoint's (run/real.h). The residual
// stream after every sub-layer, each implementation's error there and on the
// logits — how error drifts with depth — and the model-level checks: GQA as
// MHA on repeated kv heads, the stream's scale, and (--expect-logits) the
// reference's logits against a file's, with the single convention change
// (the diagnosis catalogue's, diagnose/hypotheses.h) that explains a mismatch.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "config/options.h"
#include "config/presets.h"
#include "conform/impl.h"
#include "h5/fixture.h"
#include "model/model.h"
#include "run/real.h"

namespace conform::run {

struct ForwardRequest {
    config::ModelConfig model;        // as resolved (the report's config)
    model::Spec spec;                 // the block (scaled down), layers, tokens, vocab, first position, seed
    std::shared_ptr<RealModel> real;  // --weights: its layers, embedding, final norm, LM head, token ids
    std::string weights;              // its path, for the table and the logits file
    int64_t scale_down = 1;
    DType dtype = DType::f32;
    // Each implementation's own block() and rmsnorm(), by name.
    std::vector<std::pair<std::string, std::unique_ptr<Implementation>>> impls;
    std::string expect_logits;  // FILE.h5 the reference's logits must match (within logits_tol)
    double logits_tol = 1e-3;
    std::string save_logits;  // FILE.h5 to write the logits to
    bool force = false;       // save_logits may overwrite
};

// One row of the table: the reference's stream at a stage, each implementation's error there.
struct ForwardRow {
    std::string stage;
    std::vector<int64_t> shape;
    model::Moments ref;
    std::vector<std::optional<model::Error>> err;  // per implementation; nullopt: not available
};

struct ForwardResult {
    std::vector<std::string> names;    // the implementations, in request order
    std::vector<std::string> stopped;  // per implementation: "" or where and why it stopped
    std::vector<ForwardRow> rows;
    std::vector<double> top1;  // per implementation: the fraction of tokens whose top-1 logit is the reference's
    // --expect-logits: the reference's logits against the file's; the hypotheses that explain a mismatch.
    bool expected = false, expect_ok = true;
    double expect_err = 0, expect_top1 = 0;
    std::vector<std::pair<std::string, double>> explained;
    // Checks.
    std::vector<std::pair<std::string, double>> gqa;  // max |GQA - MHA on repeated kv|: the reference, then each
    bool gqa_ok = true, stable = true, finite = true;
    double params_ffn = 0, params_attn = 0, params_norms = 0, params_layer = 0;
    double min_std = 0, max_std = 0;
    double seconds = 0;
    bool pass() const { return finite && gqa_ok && stable && expect_ok; }
};

// conform forward's flags as typed.
struct ForwardFlags {
    config::ConfigOptions config;
    int64_t vocab = 512, start = 0, scale_down = 1;
    uint64_t seed = 1;
    std::string impls, dtype = "f32";                 // impls: comma-separated; "" every available one
    bool json = false;
    std::string tokens_arg = "8";                     // --tokens: a count, or (--weights) the ids
    std::string weights, save_logits, expect_logits;  // a real checkpoint; where the logits go; what they must be
    double logits_tol = 1e-3;
    int64_t token_count = 8;
    bool tokens_given = false, token_count_given = false;  // --tokens, --token-count on the command line
    bool force = false;
};

// The flags resolved: the model (a preset, config.json and flags; or a
// checkpoint opened, with its token ids), the checks, the implementations
// made (one skipped, not named or without block() for this model, is said
// on `log`). Throws InputError (a bad flag or file: exit 2) and
// UnavailableError (a named implementation that cannot run here: exit 3).
ForwardRequest resolve_forward(const ForwardFlags& o, std::ostream& log);

// What is run: the checkpoint's detected facts or the random model's law,
// the configuration, the model's depth, vocabulary and tokens.
std::string forward_header(const ForwardRequest& q);

// The forward. Reads --expect-logits first (a bad file costs nothing) and
// writes --save-logits at the end (a line on `log`). Throws InputError for
// the user's files (exit 2), weights::WeightsError for a tensor the
// checkpoint cannot give.
ForwardResult run_forward(const ForwardRequest& r, std::ostream& log);

// The table (stages × implementations), the stops, top-1, --expect-logits and the checks.
std::string forward_table(const ForwardRequest& r, const ForwardResult& f);
// conform-forward/1.
nlohmann::json forward_json(const ForwardRequest& r, const ForwardResult& f);

}  // namespace conform::run
