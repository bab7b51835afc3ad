// harness/cli/gate.h — the main job: run cases on implementations, judge, report.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conform/config.h"
#include "conform/ops.h"
#include "core/case.h"

namespace conform::config {
struct ModelConfig;
struct ConfigOptions;
}

namespace conform::cli {

// Exit codes, the same for every command.
enum Exit { kConform = 0, kNonconformance = 1, kUsage = 2, kUnavailable = 3 };

struct GateOptions {
    std::vector<std::string> impls;  // names; empty = every available gate implementation
    bool impls_explicit = false;     // named by the user: unavailable is then exit 3
    std::vector<Op> ops;             // empty = all
    int cases = 100;                 // property cases per op
    uint64_t seed = 0;
    DType dtype = DType::f32;
    std::string out = "reports";
    std::vector<std::string> reports = {"json"};  // --report: formats written to `out` (report/formats.h)
    bool json = false;               // print the JSON report to stdout instead of the table
    bool quiet = false;
    std::string case_id;             // replay one property case by canonical id
    std::string simd_target;         // simd: force one compiled Highway target ("" = best)
    int threads = 0;                 // implementations' thread count (0 = their default)
    std::vector<std::string> fixtures;  // --fixtures: files or directories; replace the default fixtures/
    bool default_fixtures = true;    // no --fixtures: run the repo's fixtures/ (not with --case)
    std::string fixture_case;        // run only fixture cases whose group has this name
    std::string save_failures;       // directory: each failing property case, shrunk, as a fixture
    bool force = false;              // --save-failures may overwrite existing files
    std::vector<std::string> impl_libs;  // --impl-lib: plugin libraries (conform/plugin.h); their names join --impl
    // Which implementations run each call in a forked child (--isolate / --no-isolate).
    enum class Isolation { plugins, all, none } isolation = Isolation::plugins;
    std::string params;              // --params: a regex over case ids (run/select.h); "" = every case
    int shard_index = 0;             // --shard i/n or TEST_SHARD_INDEX / TEST_TOTAL_SHARDS
    int shard_total = 1;
    // --preset / --config / overrides (config/options.h): property cases take
    // this block's conventions and sizes, d_model and ffn divided by
    // model_scale_down; the report's "config" section says so. nullptr: drawn freely.
    std::shared_ptr<const config::ModelConfig> model;
    int64_t model_scale_down = 1;
};

// The fixture cases a run takes: the files given (or the default set), the
// selected ops, --fixture-case, --params and the shard. Throws InputError
// with the message for the user (exit 2).
struct FixtureSelection {
    std::vector<Case> cases;          // in this shard
    std::vector<std::string> files;   // every file read
    std::vector<std::string> paths;   // as given, or the default directory
    bool by_default = false;          // the repo's regression set, not named by the user
    size_t before_shard = 0;          // selected cases before sharding
};
FixtureSelection select_fixtures(const GateOptions& o, const std::vector<Op>& ops);

// The selection flags as typed: the gate's, and `conform coverage`'s.
inline constexpr uint64_t kDefaultSeed = 20261129;
struct SelectionFlags {
    std::string impls, ops, seed, dtype = "f32", shard;
};
// Fills o's impls, ops, seed, dtype and shard from the flags and from
// TEST_SHARD_INDEX / TEST_TOTAL_SHARDS, and checks o.params compiles. On bad
// input prints what is wrong and returns false (exit 2).
bool apply_selection_flags(const SelectionFlags& f, GateOptions& o);
// --preset / --config and their overrides: resolves o.model, and the power of
// two d_model and ffn are divided by (to d_model <= 256) so property cases stay
// fast; the repo's fixtures then run only when named. Nothing given: no-op.
// On bad input prints what is wrong and returns false (exit 2).
bool apply_model_flags(const config::ConfigOptions& f, GateOptions& o);

int run_gate(const GateOptions& o);

}  // namespace conform::cli
