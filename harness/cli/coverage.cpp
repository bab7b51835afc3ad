// conform coverage: flags → the gate's implementations and plan →
// run::count_coverage (harness/run/coverage.h: which trap dimensions the
// cases reach, per op and implementation, nothing executed) → the table or
// conform-coverage/1.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/flags.h"
#include "run/coverage.h"

namespace conform::cli {

namespace {

struct Opts {
    CaseFlags cases;  // as in the gate
    bool json = false;
    bool require_full = false;
};

int run(const Opts& in) {
    // The gate's implementations (in-repo: plugins are not asked) and its plan.
    const Resolved r = resolve_case_flags(in.cases);
    run::ImplSet impls = run::choose_implementations(r.impls);
    if (!in.json)
        for (const auto& s : impls.skipped) std::cout << "skipping " << s << "\n";
    if (impls.impls.empty()) {
        std::cerr << "conform: no implementation available to run\n";
        return kUnavailable;
    }
    const run::Plan plan = run::make_plan(r.selection);
    const run::Coverage cov = run::count_coverage(plan, impls);
    if (in.json)
        std::cout << run::coverage_json(plan, cov).dump(2) << "\n";
    else
        std::cout << run::coverage_table(plan, cov);
    return in.require_full && !cov.empty.empty() ? kNonconformance : kConform;
}

}  // namespace

Command add_coverage(CLI::App& app) {
    auto o = std::make_shared<Opts>();
    CLI::App* sub = app.add_subcommand(
        "coverage",
        "which trap dimensions (layouts, theta, positions, qk_norm, GQA shapes, widths, RoPE scaling, partial rotary, "
        "score scale, scaled context) the gate's cases reach, per op and implementation; nothing is run");
    add_case_flags(*sub, o->cases);
    sub->add_flag("--json", o->json, "print the coverage as JSON (schema conform-coverage/1)");
    sub->add_flag("--require-full", o->require_full, "exit 1 when a cell that applies to its op is empty");
    return {sub, [o] { return run(*o); }};
}

}  // namespace conform::cli
