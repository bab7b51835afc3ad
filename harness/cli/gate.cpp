// conform [flags]: the gate. Flags → a plan (harness/run/plan.h) → the runner
// (harness/run/runner.h) → reports (harness/report/). Parsing and printing only.
#include "cli/gate.h"

#include <fmt/format.h>
#include <iostream>

#include "config/hf_config.h"
#include "report/formats.h"
#include "report/out_dir.h"
#include "run/real.h"
#include "run/runner.h"

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
    app.add_option("--threads", g.threads, "threads per implementation (default: theirs; simd uses every core)")
        ->check(CLI::NonNegativeNumber);
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
        ->check(CLI::NonNegativeNumber);
    add_worker_flags(app, g.workers, true);
}

namespace {

int run_planned(const GateOptions& g, const Resolved& r, const run::Plan& plan, const std::vector<std::string>& formats,
                OutDir& out_dir);

}  // namespace

int run_gate(const GateOptions& g) {
    std::vector<std::string> formats = {"json"};
    if (!g.report_list.empty()) {
        std::string err;
        auto parsed = parse_report_formats(g.report_list, &err);
        if (!parsed) throw InputError("--report: " + err);
        formats = *parsed;
    }
    // Before any work: a run whose reports cannot be written is wasted.
    if (const std::string bad = out_dir_problem(g.out); !bad.empty()) throw InputError("--out " + bad);

    if (!run::parse_diagnose_mode(g.diagnose))
        throw InputError("--diagnose: expected all, first or none, found '" + g.diagnose + "'");
    Resolved r = resolve_case_flags(g.cases);
    r.impls.options.simd_target = g.simd_target;
    r.impls.options.threads = g.threads;
    apply_worker_flags(g.workers, r.impls);
    // The plan first: every fixture file is read before any worker exists.
    const run::Plan plan = run::make_plan(r.selection);
    // --out opened, and its report files noted, before any worker exists: the
    // reports go through that descriptor, and whatever a worker does to the
    // directory meanwhile is found afterwards (report/out_dir.h).
    std::unique_ptr<OutDir> out_dir;
    try {
        out_dir = std::make_unique<OutDir>(g.out);
    } catch (const std::exception& e) {
        throw InputError(std::string("--out ") + e.what());
    }
    const bool foreign = r.impls.isolate || r.impls.has_workers();
    if (foreign) out_dir->snapshot();
    try {
        return run_planned(g, r, plan, formats, *out_dir);
    } catch (...) {
        // The run ends here (a worker that could not start, ...): no report
        // of this run is written, so none that a worker forged may stay.
        for (const auto& l : out_dir->sweep()) std::cerr << l << "\n";
        throw;
    }
}

namespace {

int run_planned(const GateOptions& g, const Resolved& r, const run::Plan& plan, const std::vector<std::string>& formats,
                OutDir& out_dir) {
    std::ostream& log = g.json ? std::cerr : std::cout;
    const bool chatty = !g.quiet && !g.json;
    run::ImplSet impls = run::choose_implementations(r.impls);
    if (!g.quiet)
        for (const auto& s : impls.skipped) log << "skipping " << s << "\n";
    const run::Selection& s = plan.selection;

    if (chatty) {
        const int per_op = s.case_id.empty() ? s.cases : 1;
        log << fmt::format("conform: seed {} ({} property cases per op; --seed {} reproduces this run)\n", s.seed,
                           per_op, s.seed);
        if (r.real) r.real->print_header(log, "conform: ");
        if (r.model) {
            config::print_config(log, *r.model, "conform: ");
            if (!r.real)
            log << fmt::format("conform: property cases take this config{}; tokens, positions and inputs are drawn\n",
                               r.scale_down > 1 ? fmt::format(" with d_model and ffn / {} = {}, {}", r.scale_down,
                                                              s.pin->d_model, s.pin->ffn_dim)
                                                : std::string());
        }
        const auto& fs = plan.fixtures;
        if (!fs.paths.empty()) {
            std::string where;
            for (const auto& p : fs.paths) where += (where.empty() ? "" : ", ") + p;
            log << fmt::format("conform: fixtures: {} case{} of the selected ops from {} file{} in {}{}\n",
                               fs.cases.size(), fs.cases.size() == 1 ? "" : "s", fs.files.size(),
                               fs.files.size() == 1 ? "" : "s", where,
                               fs.by_default ? " (the regression set; --no-default-fixtures skips it)" : "");
        }
        if (!s.params.empty() && s.case_id.empty())
            for (const auto& p : plan.ops)
                log << fmt::format("conform: --params: {}: {} of {} case{} match ({} drawn){}\n", to_string(p.op),
                                   p.matched, s.cases, s.cases == 1 ? "" : "s", p.drawn,
                                   p.matched < s.cases ? " - the generators rarely or never reach it" : "");
        if (s.shard.active())
            log << fmt::format("conform: shard {}/{}: {} case{} of this run\n", s.shard.index, s.shard.total,
                               plan.total_cases, plan.total_cases == 1 ? "" : "s");
    }
    select::touch_shard_status_file(std::getenv("TEST_SHARD_STATUS_FILE"));  // "this runner shards"

    run::RunOptions ro;
    ro.save_failures = g.save_failures;
    ro.force = g.force;
    ro.diagnose = *run::parse_diagnose_mode(g.diagnose);
    ro.shrink.max_seconds = g.shrink_time;
    if (s.dtype != DType::f32) ro.replay_flags += std::string(" --dtype ") + to_string(s.dtype);
    if (!g.simd_target.empty()) ro.replay_flags += " --simd-target " + g.simd_target;
    if (g.threads > 0) ro.replay_flags += " --threads " + std::to_string(g.threads);
    if (r.real) {
        ro.replay_flags += r.real->replay_flags();
        // What each layer's weights (and, with model inputs, its stream) look like.
        if (chatty)
            ro.on_layer = [&log](const run::LayerStats& st) { run::print_layer_stats(log, st, "conform: "); };
    }
    select::Progress progress(std::cerr, select::progress_wanted(g.quiet, g.json), plan.total_cases);
    const run::Outcome out = run::execute(plan, impls, ro, [&](int done, int failures) { progress.update(done, failures); });
    progress.finish();
    // Every worker stopped (and its process group killed) before a report is
    // written: nothing foreign is left running to rewrite one afterwards.
    const bool none_available = impls.impls.empty();
    impls.impls.clear();

    nlohmann::json config = nullptr;
    if (r.model) {
        config = config::config_json(*r.model);
        config["property_cases_scale_down"] = r.scale_down;
        if (r.real) r.real->add_to_config_json(config);
    }
    auto j = run::report_json(out, plan, config);
    // What a worker did to --out, found before the reports are written, so
    // that every report says it and none says "pass" (report/out_dir.h).
    std::vector<std::string> tampered = out_dir.sweep();
    if (!tampered.empty()) {
        j["tampered"] = tampered;
        j["pass"] = false;
    }
    std::string written;
    try {
        for (const auto& p : out_dir.write(j, formats)) written += (written.empty() ? "" : ", ") + p;
    } catch (const std::exception& e) {
        throw InputError(std::string("cannot write report: ") + e.what());
    }
    for (const auto& l : out_dir.sweep()) tampered.push_back(l);
    if (g.json) {
        std::cout << j.dump(2) << "\n";
    } else {
        print_summary(std::cout, out.report);
        for (const auto& res : out.report.results)
            if (!res.pass) print_failure(std::cout, res);
        if (g.verbose) print_phases(std::cout, out.report);
        if (!g.quiet) std::cout << fmt::format("\nreport: {}  ({:.1f} s)\n", written, out.report.seconds);
    }
    if (!out.saved.empty()) {
        std::ostream& so = g.json ? std::cerr : std::cout;
        so << "\n--save-failures " << g.save_failures << ":\n";
        for (const auto& l : out.saved) so << l << "\n";
    }
    if (none_available) {
        std::cerr << "conform: no implementation available to run\n";
        return kUnavailable;
    }
    for (const auto& n : out.report.nothing_ran)
        std::cerr << "conform: no " << (n.op.empty() ? "case" : "property case of " + n.op) << " ran for " << n.impl
                  << " (" << n.reason << ")\n";
    // A report directory tampered with during the run: no pass, whatever the cases said.
    for (const auto& l : tampered) std::cerr << l << "\n";
    if (out.save_failed) return kUsage;
    return out.report.all_pass() && tampered.empty() ? kConform : kNonconformance;
}

}  // namespace

}  // namespace conform::cli
