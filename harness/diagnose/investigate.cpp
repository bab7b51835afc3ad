// Shrinking a failing property case, then explaining the smallest one that
// still says which bug it is.
#include <algorithm>
#include <fmt/format.h>
#include <functional>
#include <optional>

#include "diagnose/diagnose.h"
#include "gen/gen.h"

namespace conform::diagnose {

void explain_expected(CaseResult& r, const Case& c) {
    if (c.expected.empty()) return;
    const Truth ours = reference_truth(c, r.dtype);
    CaseResult jr = judge_case(c, r.dtype, c.expected, ours);
    if (jr.pass) return;
    jr.dtype = r.dtype;
    explain(jr, {&c, &c.expected, &ours}, nullptr, "the expected values");
    r.diagnosis.push_back("the fixture's expected values, diagnosed against the reference (how was this golden file "
                          "produced?):");
    r.diagnosis.insert(r.diagnosis.end(), jr.diagnosis.begin(), jr.diagnosis.end());
    r.hypotheses = jr.hypotheses;
    r.hypotheses_tried = jr.hypotheses_tried;
    r.localisation = jr.localisation;
}

namespace {

// How many later property cases an ambiguous failure may look through for
// one that tells the coinciding bugs apart.
constexpr int kScan = 20;

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : " and ") + x;
    return s;
}

// Whether a case still tells the bugs `want` from the `rivals`: some
// hypothesis of each wanted id conforms, none of any rival's does.
bool discriminates(const Case& c, DType dtype, const NamedD& observed, const std::vector<std::string>& want,
                   const std::vector<std::string>& rivals) {
    const std::vector<Hypothesis> hs = hypotheses(c);
    for (const auto& id : want) {
        // Not a convention of the reference's, but a claim with its own test.
        if (id == "precision_downgrade") {
            if (!explained_by_precision(c, dtype, observed, "out")) return false;
            continue;
        }
        bool found = false;
        for (const Hypothesis& h : hs) found = found || (h.id == id && explains(c, dtype, observed, h));
        if (!found) return false;
    }
    for (const Hypothesis& h : hs)
        if (has(rivals, h.id) && explains(c, dtype, observed, h)) return false;
    return true;
}

// The truths of the cases one shrink looks at, by id: the smallest case is
// judged again when it is explained, and a second shrink (for a sharper
// case) walks through many of the first's candidates. Bounded in bytes: a
// full-size block's truth holds every tap three times over.
class TruthCache {
   public:
    std::shared_ptr<const Truth> get(const Case& c, DType dtype) {
        auto it = truths_.find(c.id);
        if (it != truths_.end()) return it->second;
        auto t = std::make_shared<const Truth>(reference_truth(c, dtype));
        const size_t b = bytes(*t);
        if (held_ + b <= kBudget) {
            truths_.emplace(c.id, t);
            held_ += b;
        }
        return t;
    }

   private:
    static constexpr size_t kBudget = size_t{256} << 20;
    static size_t bytes(const Truth& t) {
        size_t n = 0;
        for (const NamedD* m : {&t.ref, &t.base_library, &t.base_sequential, &t.base_truth})
            for (const auto& [name, d] : *m) n += d.data.size() * sizeof(double);
        for (const auto& [name, d] : t.noise) n += d.data.size() * sizeof(double);
        return n;
    }
    std::map<std::string, std::shared_ptr<const Truth>> truths_;
    size_t held_ = 0;
};

// The smallest case from the stream's draw `index` that fails and satisfies
// `also`, within the limits.
gen::CaseSpec shrink_while(Implementation& impl, const gen::Stream& stream, int index, DType dtype,
                           const std::function<bool(const Case&, const NamedD&)>& also, TruthCache& truths,
                           const gen::ShrinkLimits& limits, gen::Shrunk* out) {
    auto fails = [&](const gen::CaseSpec& spec) {
        Case c = gen::materialize(spec);
        round_inputs(c, dtype);
        try {
            validate_case(c);
        } catch (const std::exception&) {
            return false;  // a shrink that leaves the valid space is not a counterexample
        }
        if (!impl.supports(c.op, c.config).ok) return false;
        declared_for(c, impl);
        const ImplOutputs out = run_impl(impl, c);
        if (!out.error.empty()) return !also;
        const std::shared_ptr<const Truth> t = truths.get(c, dtype);
        if (!t->beyond_declared.empty()) return false;  // outside what the declaration can hold: no counterexample
        if (judge_case(c, dtype, out.outputs, *t).pass) return false;
        return !also || also(c, out.outputs);
    };
    *out = gen::shrink(stream, index, fails, limits);
    return out->spec;
}

// A case run and diagnosed.
struct Look {
    Case c;
    ImplOutputs out;
    std::shared_ptr<const Truth> truth;
    CaseResult r;
    Diagnosis d;
};

std::unique_ptr<Look> look(Implementation& impl, const gen::CaseSpec& spec, DType dtype, TruthCache& truths) {
    auto l = std::make_unique<Look>();
    l->c = gen::materialize(spec);
    round_inputs(l->c, dtype);
    declared_for(l->c, impl);
    l->out = run_impl(impl, l->c);
    if (!l->out.error.empty()) return l;
    l->truth = truths.get(l->c, dtype);
    l->r = judge_case(l->c, dtype, l->out.outputs, *l->truth);
    l->r.dtype = dtype;
    if (!l->r.pass) l->d = diagnose(l->c, dtype, l->out.outputs, l->r, l->truth.get());
    return l;
}

// What stopped a shrink early, for the report ("" when it ran out of smaller failing cases).
std::string stop_reason(const gen::Shrunk& sh, const gen::ShrinkLimits& limits) {
    switch (sh.stopped) {
        case gen::Shrunk::Stop::done: return "";
        case gen::Shrunk::Stop::time: return fmt::format("the {:g} s limit (--shrink-time)", limits.max_seconds);
        case gen::Shrunk::Stop::tries: return fmt::format("the {}-candidate limit", limits.max_tries);
    }
    return "";
}

}  // namespace

CaseResult shrink_and_explain(Implementation& impl, const gen::Stream& stream, int index, DType dtype,
                              const Evidence& unshrunk, const CaseResult& failed, gen::CaseSpec* reported,
                              const gen::ShrinkLimits& limits) {
    gen::Shrunk sh;
    auto how_far = [&](CaseResult& res) {
        res.shrink_tried = sh.tried;
        res.shrink_seconds = sh.seconds;
        res.shrink_stopped = stop_reason(sh, limits);
    };
    auto finish = [&](CaseResult res, int steps, double seconds) {
        how_far(res);
        res.impl = failed.impl;
        res.origin = failed.origin;
        res.dtype = dtype;
        res.pass = false;
        res.seconds = seconds;
        res.shrink_steps = steps;
        return res;
    };
    TruthCache truths;
    const gen::CaseSpec smallest = shrink_while(impl, stream, index, dtype, nullptr, truths, limits, &sh);
    int steps = sh.steps;
    if (steps == 0) {
        CaseResult r = failed;
        r.dtype = dtype;
        explain(r, unshrunk, &impl);
        how_far(r);
        return r;
    }
    std::unique_ptr<Look> best = look(impl, smallest, dtype, truths);
    if (reported) *reported = smallest;
    if (!best->out.error.empty()) {
        CaseResult r = failed;
        r.case_id = best->c.id;
        r.shapes = input_shapes(best->c);
        r.error = best->out.error;
        r.tensors.clear();
        r.first_failing.clear();
        r.hypotheses.clear();
        r.diagnosis.clear();
        explain(r, {&best->c, nullptr, nullptr}, &impl);
        return finish(r, steps, best->out.seconds);
    }

    std::vector<std::string> notes;
    const auto small_ids = best->d.ids();
    // A later case of the run that named the bug when the first failing one
    // could not: the case the name must then hold on (not the first one).
    std::optional<Case> named_on;
    NamedD named_out;
    // The diagnosis of the case as drawn, once.
    std::optional<Diagnosis> du_memo;
    auto unshrunk_diagnosis = [&]() -> const Diagnosis& {
        if (!du_memo) du_memo = diagnose(*unshrunk.c, dtype, *unshrunk.observed, failed, unshrunk.truth);
        return *du_memo;
    };
    if (small_ids.size() != 1 && failed.error.empty() && unshrunk.c) {
        const Diagnosis& du = unshrunk_diagnosis();
        std::vector<std::string> want = du.ids();
        int from = index;  // the property case the sharper diagnosis comes from
        bool sharper = !want.empty() && (small_ids.empty() || want.size() < small_ids.size());
        // A later property case of the run that fails, judged: the case, its
        // outputs, the truth and the verdict; nullopt when it passes or cannot run.
        struct Later {
            Case c;
            ImplOutputs out;
            std::shared_ptr<const Truth> truth;
            CaseResult r;
        };
        auto failing_later = [&](int j) -> std::optional<Later> {
            Later l;
            l.c = gen::materialize(gen::draw(stream, j));
            round_inputs(l.c, dtype);
            try {
                validate_case(l.c);
            } catch (const std::exception&) {
                return std::nullopt;
            }
            if (!impl.supports(l.c.op, l.c.config).ok) return std::nullopt;
            declared_for(l.c, impl);
            l.out = run_impl(impl, l.c);
            if (!l.out.error.empty()) return std::nullopt;
            l.truth = truths.get(l.c, dtype);
            if (!l.truth->beyond_declared.empty()) return std::nullopt;
            l.r = judge_case(l.c, dtype, l.out.outputs, *l.truth);
            if (l.r.pass) return std::nullopt;
            return l;
        };
        if (!sharper && small_ids.empty() && want.empty()) {
            // Nothing named on the case or anything it shrinks to: it may be
            // too small to tell (a lower precision needs a few dozen
            // elements to be told from a small logic error). A later failing
            // case of the run, diagnosed in full, may name one bug.
            for (int j = index + 1; j <= index + kScan && !sharper; ++j) {
                std::optional<Later> l = failing_later(j);
                if (!l) continue;
                const std::vector<std::string> named = diagnose(l->c, dtype, l->out.outputs, l->r, l->truth.get()).ids();
                if (named.size() == 1) {
                    want = named, from = j, sharper = true;
                    named_out = l->out.outputs;
                    named_on.emplace(std::move(l->c));
                }
            }
        }
        if (!sharper && small_ids.size() > 1) {
            // The case and all it shrinks to fail alike under several bugs (an
            // early, small case). A later case of the run may tell them apart:
            // only the coinciding hypotheses are tested on each.
            for (int j = index + 1; j <= index + kScan && !sharper; ++j) {
                std::optional<Later> l = failing_later(j);
                if (!l) continue;
                std::vector<std::string> named;
                for (const auto& id : small_ids)
                    if (discriminates(l->c, dtype, l->out.outputs, {id}, {})) named.push_back(id);
                if (named.size() == 1) want = named, from = j, sharper = true;
            }
        }
        if (sharper) {
            const std::string coincide =
                small_ids.empty() ? "no single-convention change explains them" : "there " + join(small_ids) + " coincide";
            if (from == index)
                notes.push_back(fmt::format("smaller cases fail too, but {} (e.g. {})", coincide, best->c.id));
            else if (small_ids.empty())
                notes.push_back(fmt::format("the first failing case, {}, and all it shrinks to name no bug (too few "
                                            "elements to tell); property case {} of this run names one, and is "
                                            "reported here",
                                            unshrunk.c->id, from));
            else
                notes.push_back(fmt::format("the first failing case, {}, and all it shrinks to fail alike: there {} "
                                            "coincide; property case {} of this run tells them apart, and is "
                                            "reported here",
                                            unshrunk.c->id, join(small_ids), from));
            std::vector<std::string> rivals;
            for (const auto& id : small_ids)
                if (!has(want, id)) rivals.push_back(id);
            gen::Shrunk sharp_sh;
            const gen::CaseSpec sharp = shrink_while(
                impl, stream, from, dtype,
                [&](const Case& c, const NamedD& obs) { return discriminates(c, dtype, obs, want, rivals); },
                truths, limits, &sharp_sh);
            std::unique_ptr<Look> l = look(impl, sharp, dtype, truths);
            if (l->out.error.empty() && !l->r.pass && l->d.ids() == want) {
                best = std::move(l);
                steps = sharp_sh.steps;
                sh.tried += sharp_sh.tried, sh.seconds += sharp_sh.seconds;
                if (sharp_sh.stopped != gen::Shrunk::Stop::done) sh.stopped = sharp_sh.stopped;
                if (reported) *reported = sharp;
            } else if (from == index) {
                CaseResult r = failed;
                annotate(r, du, unshrunk, &impl, "the output", notes);
                if (reported) *reported = gen::draw(stream, index);
                return finish(r, 0, r.seconds);
            } else {
                notes.clear();  // the later case did not hold up: report the ambiguity as it is
            }
        }
    }
    CaseResult res = best->r;
    // Names only when earned: a hypothesis that explains the shrunk case but
    // that the case it was drawn as contradicts (its output does not conform
    // there under any of the hypothesis's variants) is a candidate, not the
    // diagnosis: on a small enough case several bugs coincide with almost
    // anything. (A drawn case that merely cannot tell the hypothesis from the
    // config, a marginal failure, contradicts nothing.)
    Diagnosis earned = best->d;
    if (failed.error.empty() && unshrunk.c && !earned.matches.empty()) {
        const std::vector<Hypothesis> drawn = hypotheses(*unshrunk.c);
        auto contradicted = [&](const std::string& id) {
            // Lower precision, too, must hold on the case as drawn: its error
            // there must be that precision's kind, not merely under its bound.
            const Case& drawn_as = named_on ? *named_on : *unshrunk.c;
            const NamedD& seen = named_on ? named_out : *unshrunk.observed;
            // A paged kernel's read of a poisoned row, traced there too.
            if (auto traced = poison_trace(drawn_as, seen); traced && traced->id == id) return false;
            if (id == "precision_downgrade")
                return !explained_by_precision(drawn_as, dtype, seen,
                                               failed.first_failing.empty() ? "out" : failed.first_failing);
            bool listed = false;
            for (const Hypothesis& h : named_on ? hypotheses(*named_on) : drawn) {
                if (h.id != id) continue;
                listed = true;
                if (conforms_under(drawn_as, dtype, seen, h)) return false;
            }
            return listed;  // a fitted theta is not in the list: nothing to contradict it with
        };
        std::vector<std::string> candidates;
        std::vector<HypothesisMatch> kept;
        for (const auto& m : earned.matches) {
            if (!contradicted(m.id)) kept.push_back(m);
            else if (!has(candidates, m.id)) candidates.push_back(m.id);
        }
        if (!candidates.empty()) {
            earned.matches = kept;
            notes.push_back(fmt::format("candidates, not the diagnosis: {} explain{} the shrunk case, but the "
                                        "case it was drawn as contradicts {} ({})",
                                        join(candidates), candidates.size() == 1 ? "s" : "",
                                        candidates.size() == 1 ? "it" : "them",
                                        named_on ? named_on->id : unshrunk.c->id));
        }
    }
    annotate(res, earned, {&best->c, &best->out.outputs, best->truth.get()}, &impl, "the output", notes);
    return finish(res, steps, best->out.seconds);
}

}  // namespace conform::diagnose
