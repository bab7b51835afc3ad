#include "run/runner.h"

#include "run/relations.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <set>

#include "core/phases.h"
#include "diagnose/diagnose.h"
#include "run/golden.h"

namespace conform::run {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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

class Executor {
   public:
    Executor(const Plan& plan, ImplSet& impls, const RunOptions& o, const OnCase& on_case)
        : plan_(plan), sel_(plan.selection), impls_(impls), o_(o), on_case_(on_case) {}

    Outcome run() {
        const auto t0 = Clock::now();
        RunReport& rep = out_.report;
        rep.seed = sel_.seed;
        rep.cases_per_op = sel_.case_id.empty() ? sel_.cases : 1;
        rep.dtype = to_string(sel_.dtype);
        for (const auto& c : impls_.impls) rep.impls.push_back(c.name);
        // Before sharding, so that every shard's report lists the same implementations.
        if (plan_.fixtures.before_shard > 0) rep.impls.push_back("reference");
        for (const OpPlan& p : plan_.ops)
            if (std::find(rep.ops.begin(), rep.ops.end(), to_string(p.op)) == rep.ops.end()) rep.ops.push_back(to_string(p.op));
        rep.fixtures = plan_.fixtures.files;
        std::set<Op> fixtures_run;
        int64_t loaded = -1;  // the checkpoint layer held now
        for (const OpPlan& p : plan_.ops) {
            if (p.layer != loaded && sel_.real) {
                sel_.real->release(loaded);
                loaded = p.layer;
                const LayerStats st = sel_.real->load(p.layer);
                if (o_.on_layer) o_.on_layer(st);
            }
            property_cases(p);
            if (fixtures_run.insert(p.op).second) fixture_cases(p.op);
        }
        if (sel_.real) sel_.real->release(loaded);
        // Declining every case is not passing them. (A shard that was dealt
        // no case at all has nothing to say: merge-reports decides.)
        if (plan_.total_cases > 0)
            for (const auto& c : impls_.impls) {
                if (std::none_of(rep.results.begin(), rep.results.end(),
                                 [&](const CaseResult& r) { return r.impl == c.name; })) {
                    rep.add_nothing_ran(c.name);
                    continue;
                }
                // Nor is declining every property case of an op it offers,
                // however many fixture cases of it pass (their answers are
                // in files a worker can read).
                for (const OpPlan& p : plan_.ops) {
                    if (p.picks.empty() || !offers(c, p.op) || !p.for_impl(c.name)) continue;
                    const bool judged = std::any_of(rep.results.begin(), rep.results.end(), [&](const CaseResult& r) {
                        return r.impl == c.name && r.op == p.op && r.origin == "property";
                    });
                    const bool noted = std::any_of(rep.nothing_ran.begin(), rep.nothing_ran.end(), [&](const auto& n) {
                        return n.impl == c.name && n.op == to_string(p.op);
                    });
                    if (!judged && !noted) rep.add_nothing_ran(c.name, to_string(p.op));
                }
            }
        for (const auto& c : impls_.impls)
            if (c.worker) {
                const auto& st = c.worker->stats();
                rep.workers.push_back({c.name, st.calls, st.repeats, st.restarts});
            }
        twists_not_offered();
        rep.seconds = since(t0);
        rep.phases = phases::take();  // and what the plan spent reading fixtures before
        return std::move(out_);
    }

   private:
    // Whether an implementation offers an op at all: a worker, the ops of
    // its hello (one that never offered swiglu has not declined it); an
    // in-repo implementation, every op.
    static bool offers(const Chosen& c, Op op) { return c.impl->implements(op); }

    // Per implementation and op of the run, the twists it does not declare
    // (never offered), and those --require-twists asked for among them.
    void twists_not_offered() {
        RunReport& rep = out_.report;
        for (const auto& c : impls_.impls)
            for (const std::string& name : rep.ops) {
                const Op op = *parse_op(name);
                if (!offers(c, op)) continue;
                const TwistSet declared = c.impl->twists(op);
                RunReport::NotOffered n{c.name, name, {}};
                for (const Twist& t : twist_table())
                    if (op_info(op).reads(t) && !declared.declares(t)) n.twists.push_back(t.name);
                for (const Twist* t : o_.require_twists)
                    if (op_info(op).reads(*t) && !declared.declares(*t))
                        rep.missing_twists.push_back(c.name + " " + name + ": " + t->name);
                if (!n.twists.empty()) rep.not_offered.push_back(std::move(n));
            }
    }

    // Whether a case is offered to an implementation: every twist on in it declared.
    bool offered(Chosen& impl, const Case& c) {
        const Twist* t = undeclared_twist(c.op, c.config, impl.impl->twists(c.op));
        if (!t) return true;
        out_.report.add_not_run(impl.name, to_string(c.op),
                                std::string("not offered: the case has ") + t->name + " on, which " + impl.name +
                                    " does not declare (its twists)");
        return false;
    }

    void tick() {
        for (; counted_ < out_.report.results.size(); ++counted_) failures_ += !out_.report.results[counted_].pass;
        if (on_case_) on_case_(++done_, failures_);
    }

    std::string replay(const Chosen& impl, const std::string& id) const {
        return "build/conform --impl " + impl.name + " --case '" + id + "'" + impl.replay_flags + o_.replay_flags;
    }
    std::string fixture_replay(const std::string& impl, const std::string& flags, const Case& fc) const {
        return h5::fixture_replay_command(impl, fc.file, fc.group, sel_.dtype) + flags;
    }

    // Whether a matching case of another shard, drawn before `index`, fails
    // on this implementation (then this shard's first failure is not the run's).
    bool fails_earlier_elsewhere(Chosen& impl, const OpPlan& p, int index) {
        for (const select::Pick& pick : p.outside) {
            if (pick.index >= index) break;
            Case c = property_case(pick.spec, sel_.dtype);
            if (undeclared_twist(c.op, c.config, impl.impl->twists(c.op)) || !impl.impl->supports(p.op, c.config).ok) continue;
            declared_for(c, *impl.impl);
            const Truth t = reference_truth(c, sel_.dtype);
            if (!t.beyond_declared.empty()) continue;
            if (!run_and_judge(*impl.impl, impl.name, c, sel_.dtype, t).result.pass) return true;
        }
        return false;
    }

    void save(const gen::CaseSpec& spec, const CaseResult& r, const Chosen& impl) {
        Case fc = gen::materialize(spec);
        round_inputs(fc, sel_.dtype);  // the values it failed on, so a --dtype replay sees them too
        const std::string path =
            (std::filesystem::path(o_.save_failures) / h5::failure_file_name(fc.id, r.impl)).string();
        if (!saved_paths_.insert(path).second) return;  // several failures shrank to this one case
        try {
            h5::save_failure(o_.save_failures, fc,
                             {r.impl, sel_.dtype, sel_.seed, r.shrink_steps, r.first_failing, r.error}, o_.force);
            const std::string cmd = h5::fixture_replay_command(r.impl, path, h5::kFailureGroup, sel_.dtype) +
                                    impl.replay_flags;
            out_.saved.push_back("saved:     " + path + "\n  replay:  " + cmd);
        } catch (const InputError& e) {
            out_.saved.push_back(std::string("not saved: ") + e.what());
        } catch (const std::exception& e) {
            out_.saved.push_back(std::string("not saved: ") + e.what());
            out_.save_failed = true;
        }
    }

    void property_cases(const OpPlan& p) {
        std::set<std::string> shrunk_once;  // shrink the first failure per implementation
        // Per implementation, the failures of this op diagnosed in full (indices into results).
        std::map<std::string, std::vector<size_t>> diagnosed;
        const bool replaying = !sel_.case_id.empty();
        const DiagnoseMode mode = o_.diagnose;
        for (const select::Pick& pick : p.picks) {
            Case c = property_case(pick.spec, sel_.dtype);  // lent to its relations, as it was after them
            // One truth per activation quantisation the implementations declare (most: none).
            std::map<ActQuant, std::unique_ptr<Truth>> truths;
            for (Chosen& impl : impls_.impls) {
                if (!p.for_impl(impl.name) || !offered(impl, c)) continue;
                if (const Support sup = impl.impl->supports(p.op, c.config); !sup.ok) {
                    out_.report.add_not_run(impl.name, to_string(p.op), sup.reason);
                    continue;
                }
                declared_for(c, *impl.impl);
                std::unique_ptr<Truth>& truth = truths[c.act_quant];
                if (!truth) truth = std::make_unique<Truth>(reference_truth(c, sel_.dtype));
                if (!truth->beyond_declared.empty()) {
                    out_.report.add_not_run(impl.name, to_string(p.op), truth->beyond_declared);
                    continue;
                }
                Judged j = run_and_judge(*impl.impl, impl.name, c, sel_.dtype, *truth);
                CaseResult& r = j.result;
                gen::CaseSpec failing = pick.spec;
                bool shrink = false, full = false;
                if (!r.pass && !replaying && mode != DiagnoseMode::none) {
                    if (!o_.save_failures.empty()) {
                        shrink = true;
                    } else if (shrunk_once.insert(impl.name).second) {
                        shrink = !sel_.shard.active() || !fails_earlier_elsewhere(impl, p, pick.index);
                    }
                }
                std::optional<phases::Scope> diagnosing;
                if (!r.pass) diagnosing.emplace("shrink and diagnose");
                const diagnose::Evidence evidence{&c, &j.out.outputs, truth.get()};
                std::vector<size_t>& mine = diagnosed[impl.name];
                if (shrink) {
                    ErrorMap unshrunk = std::move(r.error_map);  // the larger case shows the pattern better
                    r = diagnose::shrink_and_explain(*impl.impl, p.stream, pick.index, sel_.dtype, evidence, r,
                                                     &failing, o_.shrink);
                    if (r.case_id != unshrunk.case_id) r.unshrunk_error_map = std::move(unshrunk);
                    full = true;
                } else if (!r.pass && mode != DiagnoseMode::none) {
                    // A shard diagnoses every failure in full: what a later
                    // failure is grouped with must not depend on the shards.
                    const bool each = mode == DiagnoseMode::all || replaying || sel_.shard.active();
                    std::vector<const CaseResult*> earlier;
                    for (size_t i : mine) earlier.push_back(&out_.report.results[i]);
                    if (each || !diagnose::explain_as_earlier(r, evidence, earlier)) {
                        if (each || static_cast<int>(mine.size()) < kMaxDiagnosed) {
                            diagnose::explain(r, evidence, impl.impl.get());
                            full = true;
                        } else {
                            r.diagnosis.push_back(fmt::format(
                                "not diagnosed: {} failures of {} on {} were diagnosed in full already and none of "
                                "their bugs explains this one (--diagnose all diagnoses every failure)",
                                mine.size(), to_string(p.op), impl.name));
                        }
                    }
                }
                if (!r.pass) r.replay = replay(impl, r.case_id);
                if (!r.pass && !o_.save_failures.empty()) save(failing, r, impl);
                if (r.shrink_steps > 0) out_.shrunk_from[out_.report.results.size()] = c.id;
                if (full && r.error.empty()) mine.push_back(out_.report.results.size());
                const bool passed = r.pass;
                out_.report.results.push_back(std::move(r));
                // A passing paged case: its relations too, each its own result (run/relations.h).
                if (passed)
                    for (CaseResult& rr : check_relations(*impl.impl, impl.name, c, sel_.dtype, j.out.outputs, *truth)) {
                        if (!rr.pass) rr.replay = replay(impl, rr.case_id);
                        out_.report.results.push_back(std::move(rr));
                    }
            }
            tick();
        }
    }

    // Each implementation against the file's expected values, and our
    // reference against them too (as `reference`, judged with the float32
    // tolerance model): a golden file from another tool validates the
    // reference, and a wrong golden file fails once, there, instead of
    // silently failing every implementation.
    void fixture_cases(Op op) {
        for (const Case& file_case : plan_.fixtures.cases) {
            if (file_case.op != op) continue;
            std::unique_ptr<Truth> truth;  // the undeclared one, also the reference's row below
            for (Chosen& impl : impls_.impls) {
                if (!offered(impl, file_case)) continue;
                if (const Support sup = impl.impl->supports(op, file_case.config); !sup.ok) {
                    out_.report.add_not_run(impl.name, to_string(op), sup.reason);
                    continue;
                }
                // An implementation that declares an activation quantisation:
                // a copy of the case, judged against baselines that quantise so.
                std::optional<Case> declared;
                std::unique_ptr<Truth> own;
                if (impl.impl->activation_quant(op) != ActQuant::none) declared_for(declared.emplace(file_case), *impl.impl);
                const Case& fc = declared ? *declared : file_case;
                std::unique_ptr<Truth>& truth_of = declared ? own : truth;
                if (!truth_of) truth_of = std::make_unique<Truth>(fixture_truth(fc, sel_.dtype));
                if (!truth_of->beyond_declared.empty()) {
                    out_.report.add_not_run(impl.name, to_string(op), truth_of->beyond_declared);
                    continue;
                }
                Judged j = run_and_judge(*impl.impl, impl.name, fc, sel_.dtype, *truth_of);
                if (!j.result.pass) {
                    phases::Scope diagnosing("shrink and diagnose");
                    if (o_.diagnose != DiagnoseMode::none)
                        diagnose::explain(j.result, {&fc, &j.out.outputs, truth_of.get()}, impl.impl.get());
                    j.result.replay = fixture_replay(impl.name, impl.replay_flags, fc);
                }
                out_.report.results.push_back(std::move(j.result));
            }
            const Case& fc = file_case;
            const auto t_ref = Clock::now();
            std::unique_ptr<Truth> own;
            const Truth* t32 = truth.get();
            if (!t32 || sel_.dtype != DType::f32) t32 = (own = std::make_unique<Truth>(fixture_truth(fc, DType::f32))).get();
            CaseResult r = judge_case(fc, DType::f32, t32->base_truth, *t32);  // our reference, float64
            r.impl = "reference";
            r.seconds = since(t_ref);
            if (!r.pass) diagnose::explain_expected(r, fc);  // which convention produced the golden file?
            if (!r.pass) {
                const Chosen* first = impls_.impls.empty() ? nullptr : &impls_.impls.front();
                r.replay = first ? fixture_replay(first->name, first->replay_flags, fc) : fixture_replay("scalar", "", fc);
            }
            out_.report.results.push_back(std::move(r));
            tick();
        }
    }

    const Plan& plan_;
    const Selection& sel_;
    ImplSet& impls_;
    const RunOptions& o_;
    const OnCase& on_case_;
    Outcome out_;
    std::set<std::string> saved_paths_;
    int done_ = 0, failures_ = 0;
    size_t counted_ = 0;
};

}  // namespace

std::optional<DiagnoseMode> parse_diagnose_mode(const std::string& s) {
    if (s == "all") return DiagnoseMode::all;
    if (s == "first") return DiagnoseMode::first;
    if (s == "none") return DiagnoseMode::none;
    return std::nullopt;
}

Case property_case(const gen::CaseSpec& spec, DType dtype) {
    phases::Scope p("draw inputs");
    Case c = gen::materialize(spec);
    round_inputs(c, dtype);
    try {
        validate_case(c);
    } catch (const InputError& e) {
        // A case of a checkpoint's layer takes that checkpoint's tensors: an
        // id replayed with another --weights may not fit them.
        if (spec.layer >= 0)
            throw InputError("case " + c.id + " does not fit the layer given (" + e.what() +
                             "): was it drawn from another --weights?");
        throw std::logic_error(std::string("the generator drew an invalid case: ") + e.what());
    }
    return c;
}

Judged run_and_judge(Implementation& impl, const std::string& name, const Case& c, DType dtype, const Truth& truth) {
    Judged j;
    {
        phases::Scope p("implementation " + name);
        j.out = run_impl(impl, c);
    }
    phases::Scope p("compare");
    j.result = j.out.error.empty() ? judge_case(c, dtype, j.out.outputs, truth) : failed_to_run(c, dtype, j.out.error);
    j.result.impl = name;
    j.result.seconds = j.out.seconds;
    return j;
}

Outcome execute(const Plan& plan, ImplSet& impls, const RunOptions& o, const OnCase& on_case) {
    return Executor(plan, impls, o, on_case).run();
}

nlohmann::json report_json(const Outcome& out, const Plan& plan, const nlohmann::json& config) {
    auto j = to_json(out.report);
    const Selection& s = plan.selection;
    // What merge-reports checks the shards against each other with.
    if (!s.params.empty()) j["params"] = s.params;
    if (s.shard.active()) j["shard"] = {{"index", s.shard.index}, {"total", s.shard.total}};
    for (const auto& [k, id] : out.shrunk_from) j["cases"][k]["shrunk_from"] = id;  // what merge-reports keys a case by
    if (!config.is_null()) j["config"] = config;
    return j;
}

}  // namespace conform::run
