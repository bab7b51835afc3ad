#include "cli/gate.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "diagnose/diagnose.h"
#include "gen/gen.h"
#include "h5/fixture.h"
#include "h5/golden.h"
#include "plugin/isolate.h"
#include "plugin/loader.h"
#include "registry.h"
#include "report/report.h"
#include "run/run.h"

namespace conform::cli {

namespace {

struct Selected {
    const ImplEntry* entry;
    std::unique_ptr<Implementation> impl;
};

std::string replay_command(const GateOptions& o, const std::string& impl, const std::string& id,
                           const std::vector<plugin::Plugin>& plugins) {
    std::string cmd = "build/conform --impl " + impl + " --case '" + id + "'";
    if (const plugin::Plugin* p = plugin::find_plugin(plugins, impl)) cmd += " --impl-lib " + p->path;
    if (o.dtype != DType::f32) cmd += std::string(" --dtype ") + to_string(o.dtype);
    if (!o.simd_target.empty()) cmd += " --simd-target " + o.simd_target;
    if (o.threads > 0) cmd += " --threads " + std::to_string(o.threads);
    return cmd;
}

// The repo's regression fixtures: the source tree's fixtures/ (compiled in),
// spelled "fixtures" when that is where we run from; else ./fixtures; else none.
std::string default_fixture_dir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    const bool here = fs::is_directory("fixtures", ec);
#ifdef CONFORM_FIXTURES_DIR
    if (fs::is_directory(CONFORM_FIXTURES_DIR, ec))
        return here && fs::equivalent("fixtures", CONFORM_FIXTURES_DIR, ec) ? "fixtures" : CONFORM_FIXTURES_DIR;
#endif
    return here ? "fixtures" : "";
}

// A case whose implementation threw or broke a buffer contract.
CaseResult failed_to_run(const Case& c, DType dtype, const std::string& error) {
    CaseResult r;
    r.op = c.op;
    r.dtype = dtype;
    r.case_id = c.id;
    r.file = c.file;
    r.group = c.group;
    r.origin = c.file.empty() ? "property" : "fixture";
    r.shapes = input_shapes(c);
    r.error = error;
    r.pass = false;
    return r;
}

}  // namespace

int run_gate(const GateOptions& o) {
    const auto t0 = std::chrono::steady_clock::now();
    std::ostream& log = o.json ? std::cerr : std::cout;

    // ---- which implementations --------------------------------------------------
    std::vector<plugin::Plugin> plugins;
    try {
        plugin::LoadOptions lo;
        lo.isolate = o.isolation != GateOptions::Isolation::none;
        plugins = plugin::load_plugins(o.impl_libs, lo);
    } catch (const plugin::PluginError& e) {
        std::cerr << "conform: --impl-lib " << e.what() << "\n";
        return kUsage;
    }
    std::vector<Selected> impls;
    std::vector<std::string> names = o.impls;
    // Given libraries, the run is about them: the in-repo ones only when named.
    if (names.empty())
        for (const auto& p : plugins) names.push_back(p.entry.name);
    if (names.empty())
        for (const auto& e : implementations()) names.push_back(e.name);
    for (const auto& n : names) {
        const plugin::Plugin* from_lib = plugin::find_plugin(plugins, n);
        const ImplEntry* e = from_lib ? &from_lib->entry : find_implementation(n);
        if (!e) {
            std::cerr << "conform: unknown implementation '" << n << "' (see `conform list`"
                      << (o.impl_libs.empty() ? "" : "; the --impl-lib libraries provide:");
            for (const auto& p : plugins) std::cerr << " " << p.entry.name;
            std::cerr << ")\n";
            return kUsage;
        }
        const Availability a = e->available();
        if (!a.available) {
            if (o.impls_explicit) {
                std::cerr << "conform: implementation '" << n << "' is unavailable on this machine: " << a.reason << "\n";
                return kUnavailable;
            }
            if (!o.quiet) log << "skipping " << n << ": " << a.reason << "\n";
            continue;
        }
        ImplOptions io;
        io.dtype = o.dtype;
        io.simd_target = o.simd_target;
        io.threads = o.threads;
        try {
            std::unique_ptr<Implementation> impl = e->create(io);
            if (!from_lib && o.isolation == GateOptions::Isolation::all) impl = isolate::isolated(std::move(impl));
            impls.push_back({e, std::move(impl)});
        } catch (const std::exception& ex) {
            std::cerr << "conform: implementation '" << n << "' cannot run: " << ex.what() << "\n";
            return o.impls_explicit ? kUnavailable : kUsage;
        }
    }

    // ---- which cases -----------------------------------------------------------------
    std::vector<Op> ops = o.ops;
    if (ops.empty()) ops.assign(kAllOps.begin(), kAllOps.end());
    std::vector<gen::CaseSpec> single;
    if (!o.case_id.empty()) {
        std::string err;
        auto spec = gen::parse_case_id(o.case_id, &err);
        if (!spec) {
            std::cerr << "conform: --case: " << err << "\n";
            return kUsage;
        }
        single.push_back(*spec);
        ops = {spec->op};
    }

    RunReport report;
    report.seed = o.seed;
    report.cases_per_op = o.case_id.empty() ? o.cases : 1;
    report.dtype = to_string(o.dtype);
    for (auto& s : impls) report.impls.push_back(s.entry->name);
    for (Op op : ops) report.ops.push_back(to_string(op));
    if (!o.quiet && !o.json)
        log << fmt::format("conform: seed {} ({} property cases per op; --seed {} reproduces this run)\n", o.seed,
                           report.cases_per_op, o.seed);

    // ---- fixture cases ---------------------------------------------------------------
    std::vector<Case> fixture_cases;
    {
        std::vector<std::string> paths = o.fixtures;
        // A --case replay is exactly one case; the regression set would blur
        // it. Given --impl-lib, the run is about those libraries (as with
        // implementations): the set joins when named, --fixtures fixtures.
        const bool by_default = paths.empty() && o.default_fixtures && o.case_id.empty() && o.impl_libs.empty();
        if (by_default) {
            const std::string d = default_fixture_dir();
            if (!d.empty()) paths.push_back(d);
        }
        size_t files = 0;
        try {
            for (const auto& p : paths) {
                const std::vector<std::string> found = h5::fixture_files(p);
                if (found.empty() && !by_default) throw InputError(p + ": no fixture files (*.h5, *.hdf5) below it");
                for (const auto& f : found) {
                    ++files;
                    report.fixtures.push_back(f);
                    for (Case& c : h5::read_fixture(f))
                        if (std::find(ops.begin(), ops.end(), c.op) != ops.end() &&
                            (o.fixture_case.empty() || c.group == o.fixture_case))
                            fixture_cases.push_back(std::move(c));
                }
            }
        } catch (const std::exception& e) {
            std::cerr << "conform: " << e.what() << "\n";
            return kUsage;
        }
        std::string where;
        for (const auto& p : paths) where += (where.empty() ? "" : ", ") + p;
        if (!o.fixture_case.empty() && fixture_cases.empty()) {
            std::cerr << "conform: --fixture-case: no case '" << o.fixture_case << "' of the selected ops in "
                      << (where.empty() ? "(no fixtures given)" : where) << "\n";
            return kUsage;
        }
        if (!fixture_cases.empty()) report.impls.push_back("reference");
        if (!o.quiet && !o.json && !paths.empty())
            log << fmt::format("conform: fixtures: {} case{} of the selected ops from {} file{} in {}{}\n",
                               fixture_cases.size(), fixture_cases.size() == 1 ? "" : "s", files, files == 1 ? "" : "s",
                               where, by_default ? " (the regression set; --no-default-fixtures skips it)" : "");
    }

    // --save-failures: every failing property case, shrunk, as a one-case fixture.
    std::set<std::string> saved_paths;
    std::vector<std::string> saved_lines;
    bool save_failed = false;
    auto save = [&](const gen::CaseSpec& spec, const CaseResult& r) {
        Case fc = gen::materialize(spec);
        round_inputs(fc, o.dtype);  // the values it failed on, so a --dtype replay sees them too
        const std::string path =
            (std::filesystem::path(o.save_failures) / h5::failure_file_name(fc.id, r.impl)).string();
        if (!saved_paths.insert(path).second) return;  // several failures shrank to this one case
        try {
            h5::save_failure(o.save_failures, fc, {r.impl, o.dtype, o.seed, r.shrink_steps, r.first_failing, r.error},
                             o.force);
            std::string replay = h5::fixture_replay_command(r.impl, path, h5::kFailureGroup, o.dtype);
            if (const plugin::Plugin* p = plugin::find_plugin(plugins, r.impl)) replay += " --impl-lib " + p->path;
            saved_lines.push_back("saved:     " + path + "\n  replay:  " + replay);
        } catch (const InputError& e) {
            saved_lines.push_back(std::string("not saved: ") + e.what());
        } catch (const std::exception& e) {
            std::cerr << "conform: --save-failures: " << e.what() << "\n";
            save_failed = true;
        }
    };

    for (Op op : ops) {
        std::map<std::string, bool> shrunk_once;  // shrink the first failure per implementation
        const int n = o.case_id.empty() ? o.cases : 1;
        for (int i = 0; i < n; ++i) {
            const gen::CaseSpec spec = o.case_id.empty() ? gen::draw(op, o.seed, i) : single[0];
            Case c = gen::materialize(spec);
            round_inputs(c, o.dtype);
            try {
                validate_case(c);
            } catch (const std::exception& e) {
                std::cerr << "conform: " << e.what() << "\n";
                return kUsage;
            }
            std::unique_ptr<Truth> truth;
            for (auto& s : impls) {
                if (!s.impl->supports(op, c.config).ok) continue;
                if (!truth) truth = std::make_unique<Truth>(reference_truth(c, o.dtype));
                ImplOutputs out = run_impl(*s.impl, c);
                CaseResult r = out.error.empty() ? judge_case(c, o.dtype, out.outputs, *truth) : CaseResult{};
                if (!out.error.empty()) {
                    r.op = op;
                    r.dtype = o.dtype;
                    r.case_id = c.id;
                    r.origin = "property";
                    r.shapes = input_shapes(c);
                    r.error = out.error;
                    r.pass = false;
                }
                r.impl = s.entry->name;
                r.seconds = out.seconds;
                gen::CaseSpec failing = spec;
                if (!r.pass && o.case_id.empty() && (!shrunk_once[r.impl] || !o.save_failures.empty())) {
                    shrunk_once[r.impl] = true;
                    // Shrunk, then diagnosed and localised (harness/diagnose/).
                    r = diagnose::shrink_and_explain(*s.impl, op, o.seed, i, o.dtype, {&c, &out.outputs, truth.get()},
                                                     r, &failing);
                } else if (!r.pass) {
                    diagnose::explain(r, {&c, &out.outputs, truth.get()}, s.impl.get());
                }
                if (!r.pass) r.replay = replay_command(o, r.impl, r.case_id, plugins);
                if (!r.pass && !o.save_failures.empty()) save(failing, r);
                report.results.push_back(std::move(r));
            }
        }

        // Fixture cases: each implementation against the file's expected
        // values, and our reference against them too (as `reference`, judged
        // with the float32 tolerance model) — a golden file from another tool
        // validates the reference, and a wrong golden file fails once, there,
        // instead of silently failing every implementation.
        for (const Case& fc : fixture_cases) {
            if (fc.op != op) continue;
            auto replay = [&](const std::string& impl, DType dtype) {
                std::string cmd = h5::fixture_replay_command(impl, fc.file, fc.group, dtype);
                if (const plugin::Plugin* p = plugin::find_plugin(plugins, impl)) cmd += " --impl-lib " + p->path;
                return cmd;
            };
            std::unique_ptr<Truth> truth;
            for (auto& s : impls) {
                if (!s.impl->supports(op, fc.config).ok) continue;
                if (!truth) truth = std::make_unique<Truth>(fixture_truth(fc, o.dtype));
                ImplOutputs out = run_impl(*s.impl, fc);
                CaseResult r = out.error.empty() ? judge_case(fc, o.dtype, out.outputs, *truth)
                                                 : failed_to_run(fc, o.dtype, out.error);
                r.impl = s.entry->name;
                r.seconds = out.seconds;
                if (!r.pass) diagnose::explain(r, {&fc, &out.outputs, truth.get()}, s.impl.get());
                if (!r.pass) r.replay = replay(r.impl, o.dtype);
                report.results.push_back(std::move(r));
            }
            const auto t_ref = std::chrono::steady_clock::now();
            std::unique_ptr<Truth> own;
            const Truth* t32 = truth.get();
            if (!t32 || o.dtype != DType::f32) t32 = (own = std::make_unique<Truth>(fixture_truth(fc, DType::f32))).get();
            CaseResult r = judge_case(fc, DType::f32, t32->base_truth, *t32);  // our reference, float64
            r.impl = "reference";
            r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_ref).count();
            if (!r.pass) diagnose::explain_expected(r, fc);  // which convention produced the golden file?
            if (!r.pass) r.replay = replay(impls.empty() ? std::string("scalar") : impls[0].entry->name, o.dtype);
            report.results.push_back(std::move(r));
        }
    }
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // ---- report ----------------------------------------------------------------------
    const auto j = to_json(report);
    const std::string path = o.out + "/conform.json";
    try {
        write_file_atomic(path, j.dump(2) + "\n");
    } catch (const std::exception& e) {
        std::cerr << "conform: cannot write report: " << e.what() << "\n";
        return kUsage;
    }
    if (o.json) {
        std::cout << j.dump(2) << "\n";
    } else {
        print_summary(std::cout, report);
        for (const auto& r : report.results)
            if (!r.pass) print_failure(std::cout, r);
        if (!o.quiet) std::cout << fmt::format("\nreport: {}  ({:.1f} s)\n", path, report.seconds);
    }
    if (!saved_lines.empty()) {
        std::ostream& so = o.json ? std::cerr : std::cout;
        so << "\n--save-failures " << o.save_failures << ":\n";
        for (const auto& l : saved_lines) so << l << "\n";
    }
    if (impls.empty()) {
        std::cerr << "conform: no implementation available to run\n";
        return kUnavailable;
    }
    if (save_failed) return kUsage;
    return report.all_pass() ? kConform : kNonconformance;
}

}  // namespace conform::cli
