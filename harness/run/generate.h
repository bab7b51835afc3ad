// harness/run/generate.h — conform generate: a fixture file of golden cases.
// The configuration (a preset, a config.json and the flags, --scale-down
// dividing the widths a preset or file gives; or a checkpoint at full size
// with one layer's real weights), the cases' shape checked before any weight
// is read, each case's inputs drawn as the property case of the same id is
// (gen::spec_at, gen::materialize), its expected outputs from the reference in
// float64 (run/golden.h), the file written (h5/fixture.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/options.h"
#include "conform/impl.h"

namespace conform::run {

struct GenerateRequest {
    std::string op, out, description;  // description: "" for the one made from the configuration
    config::ConfigOptions config;      // --preset, --config, and the flags overriding them
    int64_t scale_down = 1;
    bool scale_down_given = false;
    int64_t tokens = 4, keys = 0, start = 0, outliers = 0;
    std::optional<int64_t> prefill;  // decode; none: tokens / 2
    double mag = 1.0;
    int cases = 1;
    uint64_t seed = 1;
    bool force = false;
    std::string weights, inputs = "drawn";  // a checkpoint: the case takes `layer`'s real weights
    int64_t layer = 0;
};

struct Generated {
    std::string described;  // the configuration as far as the op uses it
    double kib = 0;         // the file's size
};

// Writes r.out. Throws InputError with the message for the user (a bad flag,
// a missing size, a file that exists, a case that cannot be made or written).
Generated generate_fixture(const GenerateRequest& r);

// The config sizes an op's inputs are built from, as (flag, field) (a superset
// of what the schema requires in the file: rope's x needs a head count to
// have a width; the dims of its inputs, conform/op_info.h).
std::vector<std::pair<const char*, int64_t BlockConfig::*>> sizes_needed(Op op);

// The config as far as the op uses it: "H=2 hd=128 layout=neox theta=500000".
std::string describe_for(Op op, const BlockConfig& c);

}  // namespace conform::run
