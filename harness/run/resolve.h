// harness/run/resolve.h — the flags that choose implementations and cases, as
// typed (cli/flags.cpp declares them; the gate and `conform coverage` share
// them, so coverage counts what the gate runs), and their resolution into a
// Selection and an ImplRequest: ops, dtype, seed, shard, --params, the model
// (a preset or config, scaled down; or a checkpoint opened).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/options.h"
#include "run/plan.h"

namespace conform::run {

inline constexpr uint64_t kDefaultSeed = 20261129;

// The selection flags as typed.
struct CaseFlags {
    std::string impls, ops, seed, dtype = "f32", shard, params, case_id, fixture_case;
    int cases = -1;  // -1: 100 per op, or kFullSizeCases at full size
    std::vector<std::string> fixtures;
    bool no_default_fixtures = false;
    config::ConfigOptions model;  // --preset / --config / overrides
    // A real checkpoint (run/real.h), and full-size runs without one.
    std::string weights, layers, inputs = "random", tokens;
    int64_t token_count = 64, positions = 0, max_rows = 0;
    bool full_size = false;
    CLI::Option* o_positions = nullptr;
};

// Property cases per op by default at full size (--weights, --full-size):
// a full-size block case costs seconds, not microseconds.
inline constexpr int kFullSizeCases = 10;
// Rows of the ops with weights at full size, unless --max-rows.
inline constexpr int64_t kFullSizeRows = 64;

// Out-of-tree implementations: --impl-lib, --impl-cmd, --impl-fd, and the limits of
// the worker processes they run in (impls/WORKERS.md); --isolate.
struct WorkerFlags {
    std::vector<std::string> impl_libs, impl_cmds, impl_fds;
    double call_timeout_s = 120;
    double memory_gb = 0;  // 0: the default (none for commands; 16 GB or half the RAM for plugins)
    int64_t cpu_s = 3600;
    bool isolate = false;
    bool no_isolate = false;  // refused: nothing foreign runs in the judge any more
};
// Into the request; throws InputError on a bad value.
void apply_worker_flags(const WorkerFlags& f, ImplRequest& r);

struct Resolved {
    Selection selection;
    ImplRequest impls;
    // --preset / --config: property cases take this block's conventions and
    // sizes, d_model and ffn divided by a power of two (scale_down) so that
    // 100 cases per op stay fast; the report's "config" section says so.
    std::shared_ptr<const config::ModelConfig> model;
    int64_t scale_down = 1;
    std::shared_ptr<RealModel> real;  // --weights
    std::vector<std::string> notes;   // what the run leaves out and why, a line each, printed before it
};

// The flags, checked: ops, dtype, seed ('random' draws one), shard (with
// TEST_SHARD_INDEX / TEST_TOTAL_SHARDS), the --params regex, the model.
// Throws InputError naming the flag (exit 2).
Resolved resolve_case_flags(const CaseFlags& f);

// --seed: "" the default seed, "random" one drawn now, else a number;
// InputError naming the flag otherwise.
uint64_t parse_seed(const std::string& text);

// "a,b,,c" -> {a, b, c}
std::vector<std::string> split_list(const std::string& s);

}  // namespace conform::run
