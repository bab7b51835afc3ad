#include "cli/gate.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>

#include "config/hf_config.h"
#include "config/options.h"
#include "diagnose/diagnose.h"
#include "gen/gen.h"
#include "h5/fixture.h"
#include "h5/golden.h"
#include "plugin/isolate.h"
#include "plugin/loader.h"
#include "registry.h"
#include "report/formats.h"
#include "report/report.h"
#include "run/run.h"
#include "run/select.h"

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

FixtureSelection select_fixtures(const GateOptions& o, const std::vector<Op>& ops) {
    FixtureSelection sel;
    // A --case replay is exactly one case; the regression set would blur
    // it. Given --impl-lib, the run is about those libraries (as with
    // implementations): the set joins when named, --fixtures fixtures.
    sel.paths = o.fixtures;
    sel.by_default = sel.paths.empty() && o.default_fixtures && o.case_id.empty() && o.impl_libs.empty();
    if (sel.by_default) {
        const std::string d = default_fixture_dir();
        if (!d.empty()) sel.paths.push_back(d);
    }
    const select::ParamFilter params(o.params);
    const select::Shard shard{o.shard_index, o.shard_total};
    bool named_case_found = false;
    for (const auto& p : sel.paths) {
        const std::vector<std::string> found = h5::fixture_files(p);
        if (found.empty() && !sel.by_default) throw InputError(p + ": no fixture files (*.h5, *.hdf5) below it");
        for (const auto& f : found) {
            sel.files.push_back(f);
            for (Case& c : h5::read_fixture(f)) {
                if (std::find(ops.begin(), ops.end(), c.op) == ops.end() ||
                    (!o.fixture_case.empty() && c.group != o.fixture_case))
                    continue;
                named_case_found = true;
                if (!params.matches(select::params_text(c))) continue;
                ++sel.before_shard;
                if (select::in_shard(select::fixture_key(c), shard)) sel.cases.push_back(std::move(c));
            }
        }
    }
    if (!o.fixture_case.empty() && !named_case_found) {
        std::string where;
        for (const auto& p : sel.paths) where += (where.empty() ? "" : ", ") + p;
        throw InputError("--fixture-case: no case '" + o.fixture_case + "' of the selected ops in " +
                         (where.empty() ? "(no fixtures given)" : where));
    }
    return sel;
}

int run_gate(const GateOptions& o) {
    const auto t0 = std::chrono::steady_clock::now();
    std::ostream& log = o.json ? std::cerr : std::cout;
    // Before any work: a run whose reports cannot be written is wasted.
    if (const std::string bad = out_dir_problem(o.out); !bad.empty()) {
        std::cerr << "conform: --out " << bad << "\n";
        return kUsage;
    }

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
    // A configuration pins the property cases to its conventions and sizes.
    BlockConfig pinned;
    if (o.model) {
        pinned = config::scale_down(o.model->block, o.model_scale_down);
        gen::pin_config(&pinned);
        if (!o.quiet && !o.json) {
            config::print_config(log, *o.model, "conform: ");
            log << fmt::format("conform: property cases take this config{}; tokens, positions and inputs are drawn\n",
                               o.model_scale_down > 1 ? fmt::format(" with d_model and ffn / {} = {}, {}",
                                                                    o.model_scale_down, pinned.d_model, pinned.ffn_dim)
                                                      : std::string());
        }
    }

    // ---- fixture cases ---------------------------------------------------------------
    std::vector<Case> fixture_cases;
    size_t fixtures_matched = 0;  // before sharding
    {
        FixtureSelection fs;
        try {
            fs = select_fixtures(o, ops);
        } catch (const std::exception& e) {
            std::cerr << "conform: " << e.what() << "\n";
            return kUsage;
        }
        fixture_cases = std::move(fs.cases);
        fixtures_matched = fs.before_shard;
        report.fixtures = fs.files;
        const size_t files = fs.files.size();
        std::string where;
        for (const auto& p : fs.paths) where += (where.empty() ? "" : ", ") + p;
        // Before sharding, so that every shard's report lists the same implementations.
        if (fs.before_shard > 0) report.impls.push_back("reference");
        if (!o.quiet && !o.json && !fs.paths.empty())
            log << fmt::format("conform: fixtures: {} case{} of the selected ops from {} file{} in {}{}\n",
                               fixture_cases.size(), fixture_cases.size() == 1 ? "" : "s", files, files == 1 ? "" : "s",
                               where, fs.by_default ? " (the regression set; --no-default-fixtures skips it)" : "");
    }

    // ---- property cases: --params, the shard ------------------------------------------
    const select::ParamFilter params(o.params);
    const select::Shard shard{o.shard_index, o.shard_total};
    std::map<Op, std::vector<select::Pick>> picks, outside;
    int matched = 0, total_cases = static_cast<int>(fixture_cases.size());
    for (Op op : ops) {
        select::PropertySelection ps;
        if (o.case_id.empty()) {
            ps = select::select_property(op, o.seed, o.cases, params, shard);
        } else if (const std::string id = gen::canonical_id(single[0]); params.matches(id)) {
            ps.matched = ps.drawn = 1;
            if (select::in_shard(id, shard)) ps.picks.push_back({0, single[0], id});
        }
        matched += ps.matched;
        total_cases += static_cast<int>(ps.picks.size());
        if (params.active() && o.case_id.empty() && !o.quiet && !o.json)
            log << fmt::format("conform: --params: {}: {} of {} case{} match ({} drawn){}\n", to_string(op), ps.matched,
                               o.cases, o.cases == 1 ? "" : "s", ps.drawn,
                               ps.matched < o.cases ? " - the generators rarely or never reach it" : "");
        picks[op] = std::move(ps.picks);
        outside[op] = std::move(ps.outside);
    }
    // A filter that selects nothing must not let the gate pass having run nothing.
    if (params.active() && matched == 0 && fixtures_matched == 0) {
        std::cerr << "conform: --params '" << o.params << "' selects no case of the selected ops (case ids look like "
                  << "'rope(T=7,n=3,hd=16,layout=neox,theta=500000,pos=4090,...)'; see `conform coverage`)\n";
        return kUsage;
    }
    select::touch_shard_status_file(std::getenv("TEST_SHARD_STATUS_FILE"));  // "this runner shards"
    if (shard.active()) {
        if (!o.quiet && !o.json)
            log << fmt::format("conform: shard {}/{}: {} case{} of this run\n", shard.index, shard.total, total_cases,
                               total_cases == 1 ? "" : "s");
    }
    select::Progress progress(std::cerr, select::progress_wanted(o.quiet, o.json), total_cases);
    int done = 0, failures = 0;
    size_t counted = 0;
    auto tick = [&] {
        for (; counted < report.results.size(); ++counted) failures += !report.results[counted].pass;
        progress.update(++done, failures);
    };

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

    // Sharded, a shard's first failure (per op and implementation) is the
    // run's first only if no case of another shard before it fails too, and
    // only the run's first is shrunk: so the merged shards report exactly
    // what the unsharded run does. Those earlier cases are run and judged
    // here, on this implementation only, until one fails.
    auto fails_earlier_elsewhere = [&](Implementation& impl, Op op, int index) {
        for (const select::Pick& p : outside[op]) {
            if (p.index >= index) break;
            Case c = gen::materialize(p.spec);
            round_inputs(c, o.dtype);
            if (!impl.supports(op, c.config).ok) continue;
            const Truth t = reference_truth(c, o.dtype);
            ImplOutputs out = run_impl(impl, c);
            if (!out.error.empty() || !judge_case(c, o.dtype, out.outputs, t).pass) return true;
        }
        return false;
    };
    std::map<size_t, std::string> shrunk_from;  // result index -> the drawn case a shrunk one came from

    for (Op op : ops) {
        std::map<std::string, bool> shrunk_once;  // shrink the first failure per implementation
        for (const select::Pick& pick : picks[op]) {
            const int i = pick.index;  // the draw's index: shrinking replays it
            const gen::CaseSpec& spec = pick.spec;
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
                if (const Support sup = s.impl->supports(op, c.config); !sup.ok) {
                    report.add_not_run(s.entry->name, to_string(op), sup.reason);
                    continue;
                }
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
                bool shrink = false;
                if (!r.pass && o.case_id.empty() && !o.save_failures.empty()) {
                    shrink = true;
                } else if (!r.pass && o.case_id.empty() && !shrunk_once[r.impl]) {
                    shrunk_once[r.impl] = true;
                    shrink = !shard.active() || !fails_earlier_elsewhere(*s.impl, op, i);
                }
                if (shrink) {
                    ErrorMap unshrunk = std::move(r.error_map);  // the larger case shows the pattern better
                    // Shrunk, then diagnosed and localised (harness/diagnose/).
                    r = diagnose::shrink_and_explain(*s.impl, op, o.seed, i, o.dtype, {&c, &out.outputs, truth.get()},
                                                     r, &failing);
                    if (r.case_id != unshrunk.case_id) r.unshrunk_error_map = std::move(unshrunk);
                } else if (!r.pass) {
                    diagnose::explain(r, {&c, &out.outputs, truth.get()}, s.impl.get());
                }
                if (!r.pass) r.replay = replay_command(o, r.impl, r.case_id, plugins);
                if (!r.pass && !o.save_failures.empty()) save(failing, r);
                if (r.shrink_steps > 0) shrunk_from[report.results.size()] = c.id;
                report.results.push_back(std::move(r));
            }
            tick();
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
                if (const Support sup = s.impl->supports(op, fc.config); !sup.ok) {
                    report.add_not_run(s.entry->name, to_string(op), sup.reason);
                    continue;
                }
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
            tick();
        }
    }
    progress.finish();
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // ---- report ----------------------------------------------------------------------
    auto j = to_json(report);
    // What merge-reports checks the shards against each other with.
    if (params.active()) j["params"] = o.params;
    if (shard.active()) j["shard"] = {{"index", shard.index}, {"total", shard.total}};
    for (const auto& [k, id] : shrunk_from) j["cases"][k]["shrunk_from"] = id;  // what merge-reports keys a case by
    if (o.model) {
        j["config"] = config::config_json(*o.model);
        j["config"]["property_cases_scale_down"] = o.model_scale_down;
    }
    std::string path;  // the files written, for the last line
    try {
        for (const auto& p : write_reports(j, o.reports, o.out)) path += (path.empty() ? "" : ", ") + p;
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

bool apply_model_flags(const config::ConfigOptions& f, GateOptions& o) {
    if (!f.given()) return true;
    try {
        o.model = std::make_shared<const config::ModelConfig>(config::resolve_config(f));
    } catch (const config::ConfigError& e) {
        std::cerr << "conform: " << e.what() << "\n";
        return false;
    }
    while (o.model->block.d_model / o.model_scale_down > 256) o.model_scale_down *= 2;
    if (o.fixtures.empty()) o.default_fixtures = false;
    return true;
}

bool apply_selection_flags(const SelectionFlags& f, GateOptions& o) {
    auto split = [](const std::string& s) {
        std::vector<std::string> out;
        std::stringstream ss(s);
        std::string item;
        while (std::getline(ss, item, ','))
            if (!item.empty()) out.push_back(item);
        return out;
    };
    if (!f.impls.empty() && f.impls != "all") {
        o.impls = split(f.impls);
        o.impls_explicit = true;
    }
    if (!f.ops.empty() && f.ops != "all") {
        for (const auto& name : split(f.ops)) {
            auto op = parse_op(name);
            if (!op) {
                std::cerr << "conform: --op: unknown op '" << name
                          << "' (ops: rmsnorm, rope, qk_norm, attention, swiglu, block, decode)\n";
                return false;
            }
            o.ops.push_back(*op);
        }
    }
    auto dt = parse_dtype(f.dtype);
    if (!dt) {
        std::cerr << "conform: --dtype: unknown dtype '" << f.dtype << "' (f32, bf16, f16)\n";
        return false;
    }
    o.dtype = *dt;
    if (f.seed.empty()) {
        o.seed = kDefaultSeed;
    } else if (f.seed == "random") {
        o.seed = std::random_device{}() & 0xFFFFFFFFu;
    } else {
        try {
            size_t used = 0;
            o.seed = std::stoull(f.seed, &used);
            if (used != f.seed.size()) throw std::invalid_argument("trailing");
        } catch (const std::exception&) {
            std::cerr << "conform: --seed: expected a number or 'random', found '" << f.seed << "'\n";
            return false;
        }
    }
    if (const std::string why = select::regex_problem(o.params); !why.empty()) {
        std::cerr << "conform: --params: '" << o.params << "' is not a valid regular expression: " << why << "\n";
        return false;
    }
    std::string why;
    const auto shard = select::resolve_shard(f.shard, std::getenv("TEST_SHARD_INDEX"), std::getenv("TEST_TOTAL_SHARDS"),
                                             &why);
    if (!shard) {
        std::cerr << "conform: " << why << "\n";
        return false;
    }
    o.shard_index = shard->index;
    o.shard_total = shard->total;
    return true;
}

}  // namespace conform::cli
