#include "cli/gate.h"

#include <chrono>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <memory>

#include "gen/gen.h"
#include "registry.h"
#include "report/report.h"
#include "run/run.h"

namespace conform::cli {

namespace {

struct Selected {
    const ImplEntry* entry;
    std::unique_ptr<Implementation> impl;
};

std::string replay_command(const GateOptions& o, const std::string& impl, const std::string& id) {
    std::string cmd = "build/conform --impl " + impl + " --case '" + id + "'";
    if (o.dtype != DType::f32) cmd += std::string(" --dtype ") + to_string(o.dtype);
    return cmd;
}

}  // namespace

int run_gate(const GateOptions& o) {
    const auto t0 = std::chrono::steady_clock::now();
    std::ostream& log = o.json ? std::cerr : std::cout;

    // ---- which implementations --------------------------------------------------
    std::vector<Selected> impls;
    std::vector<std::string> names = o.impls;
    if (names.empty())
        for (const auto& e : implementations()) names.push_back(e.name);
    for (const auto& n : names) {
        const ImplEntry* e = find_implementation(n);
        if (!e) {
            std::cerr << "conform: unknown implementation '" << n << "' (see `conform list`)\n";
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
        try {
            impls.push_back({e, e->create(io)});
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

    // Shrinks a failing property case for one implementation.
    auto fails = [&](Implementation& impl, const gen::CaseSpec& spec) {
        Case c = gen::materialize(spec);
        try {
            validate_case(c);
        } catch (const std::exception&) {
            return false;  // a shrink that leaves the valid space is not a counterexample
        }
        ImplOutputs out = run_impl(impl, c);
        if (!out.error.empty()) return true;
        return !judge_case(c, o.dtype, out.outputs, reference_truth(c, o.dtype)).pass;
    };

    for (Op op : ops) {
        std::map<std::string, bool> shrunk_once;  // shrink the first failure per implementation
        const int n = o.case_id.empty() ? o.cases : 1;
        for (int i = 0; i < n; ++i) {
            const gen::CaseSpec spec = o.case_id.empty() ? gen::draw(op, o.seed, i) : single[0];
            Case c = gen::materialize(spec);
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
                if (!r.pass && o.case_id.empty() && !shrunk_once[r.impl]) {
                    shrunk_once[r.impl] = true;
                    gen::Shrunk sh = gen::shrink(op, o.seed, i, [&](const gen::CaseSpec& cand) { return fails(*s.impl, cand); });
                    if (sh.steps > 0) {
                        Case small = gen::materialize(sh.spec);
                        ImplOutputs so = run_impl(*s.impl, small);
                        CaseResult sr = so.error.empty() ? judge_case(small, o.dtype, so.outputs, reference_truth(small, o.dtype))
                                                         : r;
                        if (!so.error.empty()) {
                            sr.case_id = small.id;
                            sr.shapes = input_shapes(small);
                            sr.error = so.error;
                        }
                        sr.impl = r.impl;
                        sr.pass = false;
                        sr.seconds = so.seconds;
                        sr.shrink_steps = sh.steps;
                        r = sr;
                    }
                }
                if (!r.pass) r.replay = replay_command(o, r.impl, r.case_id);
                report.results.push_back(std::move(r));
            }
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
    if (impls.empty()) {
        std::cerr << "conform: no implementation available to run\n";
        return kUnavailable;
    }
    return report.all_pass() ? kConform : kNonconformance;
}

}  // namespace conform::cli
