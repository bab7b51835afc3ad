// harness/cli/gate.h — the main job: run cases on implementations, judge, report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "conform/config.h"
#include "conform/ops.h"

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
};

int run_gate(const GateOptions& o);

}  // namespace conform::cli
