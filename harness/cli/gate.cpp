// conform [flags]: the gate. Flags → run::run_gate (harness/run/gate.h: the
// plan, the runner, the reports) → the exit code. Parsing only.
#include "cli/gate.h"

#include "cli/flags.h"

#include <iostream>

namespace conform::cli {

void add_gate_flags(CLI::App& app, GateOptions& g) {
    add_case_flags(app, g.cases);
    app.add_option("--out", g.out, "directory for reports (default reports/)");
    app.add_option("--report", g.report_list,
                   "report formats written to --out, comma-separated: json (conform.json), junit (conform.xml), md "
                   "(conform.md), html (conform.html), or all (default json)");
    app.add_flag("--json", g.json, "print the JSON report on stdout instead of the table");
    app.add_flag("--quiet", g.quiet, "no progress or summary lines beyond the table");
    app.add_flag("--verbose", g.verbose,
                 "after the table, where the time went: reading, drawing, the reference, the baselines, each "
                 "implementation, judging, diagnosis (also in the JSON report's \"phases\")");
    app.add_option("--simd-target", g.simd_target,
                   "simd: run this compiled Highway target instead of the best one (see `conform list`)");
    app.add_option("--threads", g.threads, "threads per implementation (default: theirs; simd uses every core; at most the CPUs this process may use)")
        ->check(machine_threads());
    app.add_option("--save-failures", g.save_failures,
                   "write each failing property case, shrunk, as a one-case fixture into DIR");
    app.add_flag("--force", g.force, "let --save-failures overwrite existing files");
    app.add_option("--diagnose", g.diagnose,
                   "which failures are shrunk and diagnosed: first (default: the first of each op and "
                   "implementation in full, each later one checked against the bugs already named and diagnosed "
                   "in full only when none explains it), all (every failure in full), none (verdicts and metrics "
                   "only)");
    app.add_option("--shrink-time", g.shrink_time,
                   "seconds a failure's shrinking may take before the smallest failing case so far is reported "
                   "(default 30; 0: no limit)")
        ->check(nonnegative());
    app.add_option("--require-twists", g.require_twists,
                   "twists (conform list --twists) each implementation must declare for the ops that read them, "
                   "comma-separated, or all: an undeclared one fails the run (it is never offered a case with it)");
    add_worker_flags(app, g.workers, true);
}

int run_gate(const GateOptions& g) {
    switch (run::run_gate(g, std::cout, std::cerr)) {
        case run::GateVerdict::conform: return kConform;
        case run::GateVerdict::nonconformance: return kNonconformance;
        case run::GateVerdict::save_failed: return kUsage;
        case run::GateVerdict::unavailable: return kUnavailable;
    }
    return kInternal;
}

}  // namespace conform::cli
