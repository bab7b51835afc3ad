// harness/run/gate.h — the gate, `conform [flags]`: the flags resolved
// (run/resolve.h), the plan made (every fixture file read before any worker
// exists), --out opened and held against the workers (report/out_dir.h),
// every case run (run/runner.h), the reports written and the table printed.
// The command (cli/gate.cpp) declares the flags and turns the verdict into
// the exit code.
#pragma once

#include <ostream>
#include <string>

#include "run/resolve.h"

namespace conform::run {

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
    std::string require_twists;      // --require-twists a,b | all: each implementation must declare them
};

enum class GateVerdict {
    conform,         // every case conforms, the reports untouched
    nonconformance,  // a case failed, or the report directory was tampered with
    save_failed,     // --save-failures could not write a failure (a usage error)
    unavailable,     // no implementation available to run
};

// The run: the header lines, the progress line, the table (or, --json, the
// report) on `out`, or on `err` what goes there. Throws InputError (a bad
// flag, reports that cannot be written: exit 2) and UnavailableError (a
// named implementation this machine cannot run: exit 3).
GateVerdict run_gate(const GateOptions& g, std::ostream& out, std::ostream& err);

}  // namespace conform::run
