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
};

int run_gate(const GateOptions& o);

}  // namespace conform::cli
