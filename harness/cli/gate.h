// harness/cli/gate.h — the main job, `conform [flags]`: parse, plan, run, report.
// The work is in harness/run (plan.h, runner.h); this file only wires flags
// to it and prints.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"

namespace conform::cli {

struct GateOptions {
    CaseFlags cases;                 // what to run: implementations, ops, cases, fixtures, a model
    std::string out = "reports";
    std::string report_list;         // --report: formats written to `out` (report/formats.h); "" = json
    bool json = false;               // print the JSON report to stdout instead of the table
    bool quiet = false;
    bool verbose = false;            // the phase breakdown after the table
    std::string simd_target;         // simd: force one compiled Highway target ("" = best)
    int threads = 0;                 // implementations' thread count (0 = their default)
    std::string save_failures;       // directory: each failing property case, shrunk, as a fixture
    bool force = false;              // --save-failures may overwrite existing files
    std::string diagnose = "first";  // --diagnose all|first|none (run/runner.h, DiagnoseMode)
    double shrink_time = 30;         // --shrink-time: seconds per failure shrunk (0: no limit)
    WorkerFlags workers;             // --impl-lib, --impl-cmd, their limits, --isolate
};

// The gate's flags on the root app.
void add_gate_flags(CLI::App& app, GateOptions& g);

int run_gate(const GateOptions& g);

}  // namespace conform::cli
