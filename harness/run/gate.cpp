// The gate's run (run/gate.h): flags resolved, plan, --out, run, reports.
#include "run/gate.h"

#include <fmt/format.h>

#include <cstdlib>
#include <memory>

#include "config/hf_config.h"
#include "report/formats.h"
#include "report/out_dir.h"
#include "report/report.h"
#include "run/real.h"
#include "run/runner.h"

namespace conform::run {

namespace {

GateVerdict run_planned(const GateOptions& g, const Resolved& r, Plan& plan, const std::vector<const Twist*>& required,
                        const std::vector<std::string>& formats, OutDir& out_dir, std::ostream& out, std::ostream& err);

// --require-twists: twist names (conform/twists.h), or all.
std::vector<const Twist*> required_twists(const std::string& list) {
    std::vector<const Twist*> out;
    if (list.empty()) return out;
    if (list == "all") {
        for (const Twist& t : twist_table()) out.push_back(&t);
        return out;
    }
    size_t start = 0;
    while (start <= list.size()) {
        const size_t comma = std::min(list.find(',', start), list.size());
        const std::string name = list.substr(start, comma - start);
        const Twist* t = find_twist(name);
        if (!t) {
            std::string known;
            for (const Twist& r : twist_table()) known += (known.empty() ? "" : ", ") + std::string(r.name);
            throw InputError("--require-twists: unknown twist '" + name.substr(0, 64) + "' (twists: " + known + ", or all)");
        }
        out.push_back(t);
        start = comma + 1;
    }
    return out;
}

}  // namespace

GateVerdict run_gate(const GateOptions& g, std::ostream& out, std::ostream& err) {
    std::vector<std::string> formats = {"json"};
    if (!g.report_list.empty()) {
        std::string why;
        auto parsed = parse_report_formats(g.report_list, &why);
        if (!parsed) throw InputError("--report: " + why);
        formats = *parsed;
    }
    // Before any work: a run whose reports cannot be written is wasted.
    if (const std::string bad = out_dir_problem(g.out); !bad.empty()) throw InputError("--out " + bad);

    if (!parse_diagnose_mode(g.diagnose))
        throw InputError("--diagnose: expected all, first or none, found '" + g.diagnose + "'");
    const std::vector<const Twist*> required = required_twists(g.require_twists);
    Resolved r = resolve_case_flags(g.cases);
    r.impls.options.simd_target = g.simd_target;
    r.impls.options.threads = g.threads;
    apply_worker_flags(g.workers, r.impls);
    // The plan first: every fixture file is read before any worker exists.
    Plan plan = make_plan(r.selection);
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
        return run_planned(g, r, plan, required, formats, *out_dir, out, err);
    } catch (...) {
        // The run ends here (a worker that could not start, ...): no report
        // of this run is written, so none that a worker forged may stay.
        for (const auto& l : out_dir->sweep()) err << l << "\n";
        throw;
    }
}

namespace {

GateVerdict run_planned(const GateOptions& g, const Resolved& r, Plan& plan, const std::vector<const Twist*>& required,
                        const std::vector<std::string>& formats, OutDir& out_dir, std::ostream& out, std::ostream& err) {
    std::ostream& log = g.json ? err : out;
    const bool chatty = !g.quiet && !g.json;
    ImplSet impls = choose_implementations(r.impls);
    plan_for(plan, impls);  // each implementation's cases within the twists it declares
    if (!g.quiet)
        for (const auto& s : impls.skipped) log << "skipping " << s << "\n";
    const Selection& s = plan.selection;

    if (chatty) {
        const int per_op = s.case_id.empty() ? s.cases : 1;
        log << fmt::format("conform: seed {} ({} property cases per op; --seed {} reproduces this run)\n", s.seed,
                           per_op, s.seed);
        if (r.real) r.real->print_header(log, "conform: ");
        for (const auto& n : r.notes) log << "conform: " << n << "\n";
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

    RunOptions ro;
    ro.save_failures = g.save_failures;
    ro.force = g.force;
    ro.diagnose = *parse_diagnose_mode(g.diagnose);
    ro.shrink.max_seconds = g.shrink_time;
    ro.require_twists = required;
    if (s.dtype != DType::f32) ro.replay_flags += std::string(" --dtype ") + to_string(s.dtype);
    if (!g.simd_target.empty()) ro.replay_flags += " --simd-target " + g.simd_target;
    if (g.threads > 0) ro.replay_flags += " --threads " + std::to_string(g.threads);
    if (r.real) {
        ro.replay_flags += r.real->replay_flags();
        // What each layer's weights (and, with model inputs, its stream) look like.
        if (chatty)
            ro.on_layer = [&log](const LayerStats& st) { print_layer_stats(log, st, "conform: "); };
    }
    select::Progress progress(err, select::progress_wanted(g.quiet, g.json), plan.total_cases);
    const Outcome outcome = execute(plan, impls, ro, [&](int done, int failures) { progress.update(done, failures); });
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
    auto j = report_json(outcome, plan, config);
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
        out << j.dump(2) << "\n";
    } else {
        print_summary(out, outcome.report);
        for (const auto& res : outcome.report.results)
            if (!res.pass) print_failure(out, res);
        if (g.verbose) print_phases(out, outcome.report);
        if (!g.quiet) out << fmt::format("\nreport: {}  ({:.1f} s)\n", written, outcome.report.seconds);
    }
    if (!outcome.saved.empty()) {
        std::ostream& so = g.json ? err : out;
        so << "\n--save-failures " << g.save_failures << ":\n";
        for (const auto& l : outcome.saved) so << l << "\n";
    }
    if (none_available) {
        err << "conform: no implementation available to run\n";
        return GateVerdict::unavailable;
    }
    for (const auto& n : outcome.report.nothing_ran)
        err << "conform: no " << (n.op.empty() ? "case" : "property case of " + n.op) << " ran for " << n.impl
            << " (" << n.reason << ")\n";
    // A report directory tampered with during the run: no pass, whatever the cases said.
    for (const auto& l : tampered) err << l << "\n";
    if (outcome.save_failed) return GateVerdict::save_failed;
    return outcome.report.all_pass() && tampered.empty() ? GateVerdict::conform : GateVerdict::nonconformance;
}

}  // namespace

}  // namespace conform::run
